/*
 * actuator.c - Spring Cloud Gateway's actuator API on the admin port, for
 * the scripts and dashboards an SCG team already has (its rows,
 * gw_actuator_pages, are part of admin.c's table of endpoints):
 *
 *   GET    /actuator/gateway                   the endpoints (href, methods)
 *   GET    /actuator/gateway/routes            [{route_id, uri, order,
 *                                               predicate, filters,
 *                                               metadata?}] in rank order
 *   POST   /actuator/gateway/routes            RouteDefinitions with ids:
 *                                               all saved or none; 200
 *   GET    /actuator/gateway/routes/{id}       that route, in the same form
 *   POST   /actuator/gateway/routes/{id}       a RouteDefinition: 201
 *   DELETE /actuator/gateway/routes/{id}       200
 *   POST   /actuator/gateway/refresh           re-read the route files
 *   GET    /actuator/gateway/routedefinitions  every live definition
 *   GET    /actuator/gateway/globalfilters     {name: order}
 *   GET    /actuator/gateway/routefilters      {factory: null}
 *   GET    /actuator/gateway/routepredicates   {factory: null}
 *
 * Routes made here live in a source of their own, "actuator" (SCG's
 * in-memory route repository); a route of another source is not changed
 * here (409 naming its source and file). With --etcd the actuator
 * source is written through to etcd like any admin change (store.c), so
 * every gateway of the fleet has the route. Main thread only.
 */
#define _DEFAULT_SOURCE
#include "gw.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACTUATOR_SOURCE "actuator"

/* ---- SCG's string forms of predicates and filters ---- */

/* One arg value as SCG prints it: a list as [a, b], text as it is. */
static void arg_text(gw_buf *b, const cJSON *v) {
    if (cJSON_IsArray(v)) {
        gw_buf_add(b, "[", 1);
        int i = 0;
        for (const cJSON *e = v->child; e; e = e->next, i++) {
            if (i)
                gw_buf_adds(b, ", ");
            arg_text(b, e);
        }
        gw_buf_add(b, "]", 1);
    } else if (cJSON_IsString(v)) {
        gw_buf_adds(b, v->valuestring);
    } else {
        char *t = cJSON_PrintUnformatted(v);
        gw_buf_adds(b, t ? t : "");
        free(t);
    }
}

/* "Paths: [/a/{x}], match trailing slash: true", "Methods: [GET]", ...:
 * the shape of SCG's predicates' toString, "Name: k=v, ..." for others. */
static void predicate_text(gw_buf *b, const cJSON *p) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(p, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(p, "args");
    const char *n = cJSON_IsString(name) ? name->valuestring : "?";
    static const struct {
        const char *name, *label, *list;
    } lists[] = {{"Path", "Paths", "patterns"},
                 {"Host", "Hosts", "patterns"},
                 {"Method", "Methods", "methods"}};
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++)
        if (strcmp(n, lists[i].name) == 0) {
            gw_buf_printf(b, "%s: ", lists[i].label);
            arg_text(b, cJSON_GetObjectItemCaseSensitive(args, lists[i].list));
            const cJSON *mts =
                cJSON_GetObjectItemCaseSensitive(args, "matchTrailingSlash");
            if (i == 0 && mts) {
                gw_buf_adds(b, ", match trailing slash: ");
                arg_text(b, mts);
            }
            return;
        }
    gw_buf_printf(b, "%s:", n);
    int i = 0;
    for (const cJSON *a = args ? args->child : NULL; a; a = a->next, i++) {
        gw_buf_printf(b, "%s %s=", i ? "," : "", a->string);
        arg_text(b, a);
    }
}

/* SCG's AndPredicate: "(A && B)", nested to the left for more. */
static char *predicates_text(const cJSON *preds) {
    gw_buf b = {0};
    int n = cJSON_GetArraySize(preds);
    if (n == 0)
        gw_buf_adds(&b, "true");
    for (int i = 1; i < n; i++)
        gw_buf_add(&b, "(", 1);
    int i = 0;
    for (const cJSON *p = preds ? preds->child : NULL; p; p = p->next, i++) {
        predicate_text(&b, p);
        if (i > 0)
            gw_buf_add(&b, ")", 1);
        if (p->next)
            gw_buf_adds(&b, " && ");
    }
    gw_buf_add(&b, "", 1);
    return b.p;
}

/* "[[AddRequestHeader X-Foo = 'Bar'], order = 1]", "[[StripPrefix
 * parts = 1], order = 2]": the shape of SCG's OrderedGatewayFilter. */
static char *filter_text(const cJSON *f, int order) {
    gw_buf b = {0};
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(f, "args");
    gw_buf_printf(&b, "[[%s", cJSON_IsString(name) ? name->valuestring : "?");
    const cJSON *hn = cJSON_GetObjectItemCaseSensitive(args, "name");
    const cJSON *hv = cJSON_GetObjectItemCaseSensitive(args, "value");
    if (cJSON_GetArraySize(args) == 2 && cJSON_IsString(hn) &&
        cJSON_IsString(hv)) {
        gw_buf_printf(&b, " %s = '%s'", hn->valuestring, hv->valuestring);
    } else {
        int i = 0;
        for (const cJSON *a = args ? args->child : NULL; a; a = a->next, i++) {
            gw_buf_printf(&b, "%s %s = ", i ? "," : "", a->string);
            arg_text(&b, a);
        }
    }
    gw_buf_printf(&b, "], order = %d]", order);
    gw_buf_add(&b, "", 1);
    return b.p;
}

/* One live route in SCG's /actuator/gateway/routes form. */
static cJSON *route_summary(const sy_route *r) {
    const char *canon = sy_route_canonical(r);
    cJSON *def = canon ? cJSON_Parse(canon) : NULL;
    if (!def)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "route_id", sy_route_id(r));
    cJSON_AddStringToObject(o, "uri", sy_route_uri(r));
    cJSON_AddNumberToObject(o, "order", sy_route_order(r));
    char *p =
        predicates_text(cJSON_GetObjectItemCaseSensitive(def, "predicates"));
    cJSON_AddStringToObject(o, "predicate", p ? p : "");
    free(p);
    cJSON *fl = cJSON_AddArrayToObject(o, "filters");
    int i = 1;
    const cJSON *filters = cJSON_GetObjectItemCaseSensitive(def, "filters");
    for (const cJSON *f = filters ? filters->child : NULL; f; f = f->next) {
        char *t = filter_text(f, i++);
        cJSON_AddItemToArray(fl, cJSON_CreateString(t ? t : ""));
        free(t);
    }
    cJSON *meta = cJSON_DetachItemFromObjectCaseSensitive(def, "metadata");
    if (cJSON_GetArraySize(meta))
        cJSON_AddItemToObject(o, "metadata", meta);
    else
        cJSON_Delete(meta);
    cJSON_Delete(def);
    return o;
}

/* ---- endpoints ---- */

/* GET /actuator/gateway/routes (summaries) and /routedefinitions. */
static void routes_page(gw_admin_call *a) {
    httpd_conn *c = a->c;
    bool definitions = strcmp(a->seg[2], "routedefinitions") == 0;
    sy_snapshot *s = sy_router_acquire(G.router);
    cJSON *list = cJSON_CreateArray();
    size_t n = sy_snapshot_route_count(s);
    for (size_t i = 0; list && i < n; i++) {
        const sy_route *r = sy_snapshot_route_at(s, i);
        const char *canon = definitions ? sy_route_canonical(r) : NULL;
        cJSON *o = definitions ? (canon ? cJSON_Parse(canon) : NULL)
                               : route_summary(r);
        if (!o) {
            cJSON_Delete(list);
            list = NULL;
        } else {
            cJSON_AddItemToArray(list, o);
        }
    }
    sy_snapshot_release(s);
    gw_reply_cjson(c, 200, list);
}

/* GET /actuator/gateway/routes/{id}: the route as GET routes lists it
 * (SCG's GatewayControllerEndpoint serializes the live route, route_id
 * and all; the definition is in /routedefinitions). */
static void get_route(gw_admin_call *a) {
    httpd_conn *c = a->c;
    const char *id = a->seg[3];
    sy_snapshot *s = sy_router_acquire(G.router);
    const sy_route *r = sy_snapshot_find_route(s, id, NULL);
    cJSON *one = r ? route_summary(r) : NULL;
    sy_snapshot_release(s);
    if (!r)
        gw_reply_error(c, 404, "no such route");
    else
        gw_reply_cjson(c, 200, one);
}

/* 409 when route `id` is live in a source other than the actuator's:
 * the actuator changes its own routes only. */
static bool owned_elsewhere(httpd_conn *c, const char *id, bool *exists) {
    sy_snapshot *s = sy_router_acquire(G.router);
    const char *src = NULL;
    char owner[256] = "";
    *exists = sy_snapshot_find_route(s, id, &src) != NULL;
    if (*exists && src && strcmp(src, ACTUATOR_SOURCE) != 0)
        gw_copy_str(owner, sizeof owner, src);
    sy_snapshot_release(s);
    if (!owner[0])
        return false;
    char msg[768];
    const char *file = gw_config_source_file(owner);
    snprintf(msg, sizeof msg,
             "route %s belongs to source %s%s%s%s; the actuator changes the "
             "routes it made (source \"" ACTUATOR_SOURCE "\")",
             id, owner, file ? " (file " : "", file ? file : "",
             file ? ")" : "");
    gw_reply_error(c, 409, msg);
    return true;
}

/* SCG runs its default-filters with every route, the actuator's too: the
 * Spring route files' default-filters (config.c) interleaved into the
 * definition's filters as the converter does for the files' routes
 * (default 1, route 1, default 2, ...). False, answered 409, when two
 * files give different ones. */
static bool with_default_filters(httpd_conn *c, cJSON *def) {
    const char *file, *other;
    const char *text = gw_config_default_filters(&file, &other);
    if (!text)
        return true;
    if (other) {
        char msg[1200];
        snprintf(msg, sizeof msg,
                 "the default-filters of %s and %s differ: which run with "
                 "the actuator's routes is not known (keep them in one "
                 "file, or use --default-filters)",
                 file, other);
        gw_reply_error(c, 409, msg);
        return false;
    }
    cJSON *dflt = cJSON_Parse(text);
    cJSON *own = cJSON_DetachItemFromObjectCaseSensitive(def, "filters");
    cJSON *all = cJSON_CreateArray();
    int nd = cJSON_GetArraySize(dflt), no = cJSON_GetArraySize(own);
    for (int i = 0; all && (i < nd || i < no); i++) {
        if (i < nd)
            cJSON_AddItemToArray(
                all, cJSON_Duplicate(cJSON_GetArrayItem(dflt, i), true));
        if (i < no)
            cJSON_AddItemToArray(
                all, cJSON_Duplicate(cJSON_GetArrayItem(own, i), true));
    }
    cJSON_Delete(dflt);
    if (!cJSON_IsArray(own) && own) { /* not a list: left for the check */
        cJSON_Delete(all);
        cJSON_AddItemToObject(def, "filters", own);
        return true;
    }
    cJSON_Delete(own);
    cJSON_AddItemToObject(def, "filters", all);
    return true;
}

/* POST /actuator/gateway/routes/{id}: a RouteDefinition (its "id", if
 * any, is replaced by the URL's, as SCG does) upserted into the actuator
 * source; 201. */
static void save_route(gw_admin_call *a) {
    httpd_conn *c = a->c;
    const char *id = a->seg[3];
    bool exists;
    if (owned_elsewhere(c, id, &exists))
        return;
    cJSON *def = cJSON_ParseWithLength(a->body, a->len);
    if (!cJSON_IsObject(def)) {
        cJSON_Delete(def);
        gw_reply_error(c, 400,
                       "the body must be a RouteDefinition (a JSON "
                       "object)");
        return;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(def, "id");
    if (!with_default_filters(c, def)) {
        cJSON_Delete(def);
        return;
    }
    cJSON *out = cJSON_CreateObject(); /* the URL's id first, then the rest */
    cJSON_AddStringToObject(out, "id", id);
    while (out && def->child) {
        cJSON *item = def->child;
        char *key = item->string;
        item->string = NULL;
        cJSON_DetachItemViaPointer(def, item);
        cJSON_AddItemToObject(out, key, item);
        free(key);
    }
    cJSON_Delete(def);
    char *text = out ? cJSON_PrintUnformatted(out) : NULL;
    cJSON_Delete(out);
    if (!text) {
        gw_reply_error(c, 500, "out of memory");
        return;
    }
    char what[512];
    snprintf(what, sizeof what, "actuator: save %s", id);
    if (G.etcd) { /* written through; answered once etcd took it */
        gw_store_route(c, ACTUATOR_SOURCE, id, text, strlen(text), 201, what);
        free(text);
        return;
    }
    gw_admin_route_change(c, ACTUATOR_SOURCE, id, text, strlen(text), what,
                          201);
    free(text);
}

/* Is `id` the "id" of one of the array's objects? */
static bool posted(const cJSON *list, const char *id) {
    for (const cJSON *r = list->child; r; r = r->next) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, "id");
        if (cJSON_IsString(v) && strcmp(v->valuestring, id) == 0)
            return true;
    }
    return false;
}

/* POST /actuator/gateway/routes: RouteDefinitions, each with its id (SCG:
 * "Saving multiple routes require specifying the ID for every route"),
 * saved all or none: the actuator source's document becomes the posted
 * routes (first, so that an error's [i] is the posted index) and its
 * other routes as they are, one PUT of the source. 200, as SCG. */
static void save_routes(gw_admin_call *a) {
    httpd_conn *c = a->c;
    cJSON *doc = cJSON_ParseWithLength(a->body, a->len);
    if (!cJSON_IsArray(doc)) {
        cJSON_Delete(doc);
        gw_reply_error(c, 400,
                       "the body must be a JSON array of RouteDefinitions");
        return;
    }
    int i = 0;
    for (const cJSON *r = doc->child; r; r = r->next, i++) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(r, "id");
        bool exists;
        if (!cJSON_IsString(id) || !id->valuestring[0]) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "[%d].id: saving several routes needs the id of every "
                     "route",
                     i);
            gw_reply_error(c, 400, msg);
            cJSON_Delete(doc);
            return;
        }
        if (owned_elsewhere(c, id->valuestring, &exists) ||
            (cJSON_IsObject(r) && !with_default_filters(c, (cJSON *)r))) {
            cJSON_Delete(doc);
            return;
        }
    }
    sy_snapshot *s = sy_router_acquire(G.router);
    size_t n = sy_snapshot_route_count(s);
    for (size_t k = 0; k < n; k++) {
        const sy_route *r = sy_snapshot_route_at(s, k);
        const char *src = NULL, *id = sy_route_id(r);
        sy_snapshot_find_route(s, id, &src);
        const char *canon = sy_route_canonical(r);
        if (src && strcmp(src, ACTUATOR_SOURCE) == 0 && !posted(doc, id) &&
            canon)
            cJSON_AddItemToArray(doc, cJSON_Parse(canon));
    }
    sy_snapshot_release(s);
    char *text = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    if (!text) {
        gw_reply_error(c, 500, "out of memory");
        return;
    }
    char *seg[] = {"routes", ACTUATOR_SOURCE};
    if (!gw_store_admin(c, "PUT", seg, 2, text, strlen(text)))
        gw_admin_route_change(c, ACTUATOR_SOURCE, NULL, text, strlen(text),
                              "actuator: save routes", 200);
    free(text);
}

/* DELETE /actuator/gateway/routes/{id} */
static void delete_route(gw_admin_call *a) {
    httpd_conn *c = a->c;
    const char *id = a->seg[3];
    bool exists;
    if (owned_elsewhere(c, id, &exists))
        return;
    if (!exists) {
        gw_reply_error(c, 404, "no such route");
        return;
    }
    char what[512];
    snprintf(what, sizeof what, "actuator: delete %s", id);
    if (G.etcd) {
        gw_store_route(c, ACTUATOR_SOURCE, id, NULL, 0, 200, what);
        return;
    }
    gw_admin_route_change(c, ACTUATOR_SOURCE, id, NULL, 0, what, 200);
}

/* POST /actuator/gateway/refresh: the route files read again. */
static void refresh(gw_admin_call *a) {
    sy_error err;
    if (gw_config_refresh(&err))
        gw_reply_sy_error(a->c, 400, &err);
    else
        httpd_respond(a->c, 200, "application/json", NULL, "", 0);
}

/* What the mini-gateway does for every request, by the SCG global filter
 * it stands for, with that filter's order. */
static void global_filters(gw_admin_call *a) {
    static const struct {
        const char *name;
        int order;
    } g[] = {
        {"NettyWriteResponseFilter (response streamed to the client)", -1},
        {"ForwardPathFilter (forward: routes)", 0},
        {"GatewayMetricsFilter (/metrics gateway_requests)", 0},
        {"RouteToRequestUrlFilter (the route's uri)", 10000},
        {"ReactiveLoadBalancerClientFilter (lb:// instance selection)", 10150},
        {"NettyRoutingFilter (the upstream request)", 2147483647},
        {"ForwardRoutingFilter (forward: re-dispatch)", 2147483647},
    };
    cJSON *o = cJSON_CreateObject();
    for (size_t i = 0; o && i < sizeof g / sizeof *g; i++)
        cJSON_AddNumberToObject(o, g[i].name, g[i].order);
    gw_reply_cjson(a->c, 200, o);
}

/* SCG's factory names; those this gateway runs are listed (a route naming
 * each is parsed as the gateway's router parses: an unknown name is
 * SY_EUNKNOWN, one the gateway does not run SY_ENOTRUN). */
static void factories(gw_admin_call *a) {
    bool filters = strcmp(a->seg[2], "routefilters") == 0;
    static const char *const preds[] = {
        "After",      "Before",
        "Between",    "Cookie",
        "Header",     "Host",
        "Method",     "Path",
        "Query",      "ReadBody",
        "RemoteAddr", "XForwardedRemoteAddr",
        "Weight",     "CloudFoundryRouteService"};
    static const char *const filts[] = {"AddRequestHeader",
                                        "AddRequestHeadersIfNotPresent",
                                        "AddRequestParameter",
                                        "AddResponseHeader",
                                        "CircuitBreaker",
                                        "CacheRequestBody",
                                        "DedupeResponseHeader",
                                        "FallbackHeaders",
                                        "JsonToGrpc",
                                        "LocalResponseCache",
                                        "MapRequestHeader",
                                        "ModifyRequestBody",
                                        "ModifyResponseBody",
                                        "PrefixPath",
                                        "PreserveHostHeader",
                                        "RedirectTo",
                                        "RemoveJsonAttributesResponseBody",
                                        "RemoveRequestHeader",
                                        "RemoveRequestParameter",
                                        "RemoveResponseHeader",
                                        "RequestHeaderSize",
                                        "RequestRateLimiter",
                                        "RequestSize",
                                        "Retry",
                                        "RewriteLocationResponseHeader",
                                        "RewritePath",
                                        "RewriteRequestParameter",
                                        "RewriteResponseHeader",
                                        "SaveSession",
                                        "SecureHeaders",
                                        "SetPath",
                                        "SetRequestHeader",
                                        "SetRequestHostHeader",
                                        "SetResponseHeader",
                                        "SetStatus",
                                        "StripPrefix",
                                        "TokenRelay"};
    const char *const *names = filters ? filts : preds;
    size_t n =
        filters ? sizeof filts / sizeof *filts : sizeof preds / sizeof *preds;
    cJSON *o = cJSON_CreateObject();
    for (size_t i = 0; o && i < n; i++) {
        char doc[256], key[128];
        snprintf(
            doc, sizeof doc,
            "[{\"id\":\"x\",\"uri\":\"no://op\",\"%s\":[{\"name\":\"%s\"}]}]",
            filters ? "filters" : "predicates", names[i]);
        sy_document *d = NULL;
        sy_error err;
        sy_parse_options po = SY_PARSE_OPTIONS_INIT;
        po.registry = gw_registry();               /* the gateway's own */
        po.host_runs = sy_host_profile("gateway"); /* what it runs */
        int rc = sy_document_parse(doc, strlen(doc), &po, &d, &err);
        sy_document_free(d);
        if (rc == SY_EUNKNOWN || rc == SY_ENOTRUN)
            continue;
        snprintf(key, sizeof key, "%s%s", names[i],
                 filters ? "GatewayFilterFactory" : "RoutePredicateFactory");
        cJSON_AddNullToObject(o, key);
    }
    gw_reply_cjson(a->c, 200, o);
}

static void index_page(gw_admin_call *call) {
    static const struct {
        const char *href, *methods;
    } e[] = {{"/actuator/gateway/", "GET"},
             {"/actuator/gateway/routedefinitions", "GET"},
             {"/actuator/gateway/globalfilters", "GET"},
             {"/actuator/gateway/routefilters", "GET"},
             {"/actuator/gateway/routes", "GET POST"},
             {"/actuator/gateway/routepredicates", "GET"},
             {"/actuator/gateway/refresh", "POST"},
             {"/actuator/gateway/routes/{id}", "GET POST DELETE"}};
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < sizeof e / sizeof *e; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "href", e[i].href);
        cJSON *m = cJSON_AddArrayToObject(o, "methods");
        char ms[32];
        snprintf(ms, sizeof ms, "%s", e[i].methods);
        char *save = NULL;
        for (char *t = strtok_r(ms, " ", &save); t;
             t = strtok_r(NULL, " ", &save))
            cJSON_AddItemToArray(m, cJSON_CreateString(t));
        cJSON_AddItemToArray(a, o);
    }
    gw_reply_cjson(call->c, 200, a);
}

const gw_admin_page gw_actuator_pages[] = {
    {GW_M_GET, "actuator/gateway", index_page},
    {GW_M_GET, "actuator/gateway/routes", routes_page},
    {GW_M_POST, "actuator/gateway/routes", save_routes},
    {GW_M_GET, "actuator/gateway/routedefinitions", routes_page},
    {GW_M_GET, "actuator/gateway/globalfilters", global_filters},
    {GW_M_GET, "actuator/gateway/routefilters", factories},
    {GW_M_GET, "actuator/gateway/routepredicates", factories},
    {GW_M_POST, "actuator/gateway/refresh", refresh},
    {GW_M_GET, "actuator/gateway/routes/*", get_route},
    {GW_M_POST, "actuator/gateway/routes/*", save_route},
    {GW_M_DELETE, "actuator/gateway/routes/*", delete_route},
};
const size_t gw_actuator_page_count =
    sizeof gw_actuator_pages / sizeof *gw_actuator_pages;
