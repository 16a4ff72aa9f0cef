/*
 * ngx_http_switchyard_refuse.c - what the module does not run is refused,
 * never accepted and ignored: at `nginx -t` / reload for the files and by
 * the admin location for a PUT, with the route and the JSON path. The
 * library parses these; the module has no executor for them (yet):
 *   - filters the library hands to the host: Retry, RequestRateLimiter,
 *     CircuitBreaker;
 *   - RewriteLocationResponseHeader;
 *   - forward: and no:// uris;
 *   - the "cors" metadata (per-route CORS answered by a gateway).
 * A cheap scan of the text for their names comes first; only a text that
 * names one is parsed to locate it (or to find that the name was in some
 * other string).
 */
#include "ngx_http_switchyard.h"

#include <cJSON.h>
#include <stdio.h>
#include <string.h>

static const char *sw_unrun_filters[] = {
    "Retry", "RequestRateLimiter", "CircuitBreaker",
    "RewriteLocationResponseHeader", NULL};

static bool sw_mentions(const char *text, size_t len) {
    static const char *needles[] = {"Retry",    "RequestRateLimiter",
                                    "CircuitBreaker", "RewriteLocation",
                                    "forward:", "no://",
                                    "cors",     NULL};
    for (const char **n = needles; *n; n++)
        if (ngx_strlcasestrn((u_char *)text, (u_char *)text + len,
                             (u_char *)*n, ngx_strlen(*n) - 1) != NULL)
            return true;
    return false;
}

static int sw_refuse_error(sy_error *err, const char *prefix, size_t i,
                           const char *id, const char *what, const char *msg) {
    ngx_memzero(err, sizeof *err);
    err->code = SY_EINVAL;
    snprintf(err->path, sizeof err->path, "%s[%zu]%s", prefix, i, what);
    snprintf(err->message, sizeof err->message,
             "route \"%s\": %s is not run by the nginx module (refused "
             "rather than accepted and not done)",
             id, msg);
    return SY_EINVAL;
}

/* The first thing of route i the module cannot run, as err. */
static int sw_refuse_route(const sy_route *rt, const char *prefix, size_t i,
                           sy_error *err) {
    sy_upstream up;
    const char *canon;
    cJSON *root, *filters, *f;
    int rc = 0, k = 0;
    char what[64];

    sy_route_upstream(rt, &up);
    if (up.kind == SY_UPSTREAM_FORWARD || up.kind == SY_UPSTREAM_NONE)
        return sw_refuse_error(err, prefix, i, sy_route_id(rt), ".uri",
                               up.kind == SY_UPSTREAM_FORWARD
                                   ? "a forward: uri"
                                   : "a no:// uri");
    if (sy_route_metadata(rt, "cors") != NULL)
        return sw_refuse_error(err, prefix, i, sy_route_id(rt),
                               ".metadata.cors", "the cors metadata");
    canon = sy_route_canonical(rt);
    if (canon == NULL) {
        ngx_memzero(err, sizeof *err);
        err->code = SY_ENOMEM;
        snprintf(err->message, sizeof err->message, "out of memory");
        return SY_ENOMEM;
    }
    root = cJSON_Parse(canon);
    filters = cJSON_GetObjectItemCaseSensitive(root, "filters");
    cJSON_ArrayForEach(f, filters) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        for (const char **u = sw_unrun_filters;
             rc == 0 && cJSON_IsString(name) && *u; u++)
            if (ngx_strcmp(name->valuestring, *u) == 0) {
                snprintf(what, sizeof what, ".filters[%d]", k);
                char msg[96];
                snprintf(msg, sizeof msg, "the %s filter", *u);
                rc = sw_refuse_error(err, prefix, i, sy_route_id(rt), what,
                                     msg);
            }
        if (rc)
            break;
        k++;
    }
    cJSON_Delete(root);
    return rc;
}

int sw_refuse_document(const sy_document *doc, const char *text, size_t len,
                       sy_error *err) {
    size_t i = 0;
    const char *prefix;

    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' ||
                       text[i] == '\r'))
        i++;
    prefix = i < len && text[i] == '[' ? "" : "routes";
    for (size_t r = 0; r < sy_document_route_count(doc); r++) {
        int rc = sw_refuse_route(sy_document_route(doc, r), prefix, r, err);
        if (rc)
            return rc;
    }
    return 0;
}

int sw_refuse_text(ngx_uint_t kind, const char *text, size_t len,
                   sy_error *err) {
    sy_parse_options po = SY_PARSE_OPTIONS_INIT;
    sy_document *doc;
    char *w = NULL;
    int rc;

    if ((kind != SW_DOC_ROUTES && kind != SW_DOC_ROUTE) ||
        !sw_mentions(text, len))
        return 0;
    if (kind == SW_DOC_ROUTE) {
        /* one route: parsed as a document of one */
        w = ngx_alloc(len + 2, ngx_cycle->log);
        if (w == NULL)
            return 0; /* the commit reports memory */
        w[0] = '[';
        ngx_memcpy(w + 1, text, len);
        w[len + 1] = ']';
        rc = sy_document_parse(w, len + 2, &po, &doc, err);
    } else {
        rc = sy_document_parse(text, len, &po, &doc, err);
    }
    if (rc) {
        ngx_free(w);
        return 0; /* not a valid document: the commit says where */
    }
    rc = sw_refuse_document(doc, w ? "[" : text, w ? 1 : len, err);
    if (rc && kind == SW_DOC_ROUTE) {
        /* "[0].filters[1]" -> "filters[1]": the body is the route */
        char *dot = strchr(err->path, '.');
        memmove(err->path, dot ? dot + 1 : "", strlen(dot ? dot + 1 : "") + 1);
    }
    sy_document_free(doc);
    ngx_free(w);
    return rc;
}
