/*
 * resp_edits.c - a route's response edits on a response's header list
 * (resp_edits.h): AddResponseHeader, SetResponseHeader,
 * RemoveResponseHeader, DedupeResponseHeader, RewriteResponseHeader,
 * RewriteLocationResponseHeader, and the lines kept in their place
 * (upstream_head.c), for an upstream's answer (upstream.c) or the
 * gateway's own (gw_response_ops_text).
 */
#define _DEFAULT_SOURCE
#define PCRE2_CODE_UNIT_WIDTH 8
#include "resp_edits.h"

#include <pcre2.h>

static void hl_del(hlist *l, size_t i) {
    free(l->a[i].owned);
    memmove(&l->a[i], &l->a[i + 1], (l->n - i - 1) * sizeof *l->a);
    l->n--;
}

void gw_hl_remove(hlist *l, const char *name) {
    for (size_t i = l->n; i-- > 0;)
        if (hv_is(&l->a[i], name))
            hl_del(l, i);
}

/* Remove the values of name after position `at`. */
static void hl_remove_after(hlist *l, const char *name, size_t at) {
    for (size_t i = l->n; i-- > at + 1;)
        if (hv_is(&l->a[i], name))
            hl_del(l, i);
}

static void dedupe(hlist *l, const char *name, const char *strategy) {
    size_t first = SIZE_MAX, last = SIZE_MAX;
    for (size_t i = 0; i < l->n; i++)
        if (hv_is(&l->a[i], name)) {
            if (first == SIZE_MAX)
                first = i;
            last = i;
        }
    if (first == SIZE_MAX)
        return;
    if (strcasecmp(strategy, "RETAIN_LAST") == 0) {
        for (size_t i = last; i-- > 0;)
            if (hv_is(&l->a[i], name))
                hl_del(l, i);
    } else if (strcasecmp(strategy, "RETAIN_UNIQUE") == 0) {
        for (size_t i = l->n; i-- > 0;) {
            if (!hv_is(&l->a[i], name))
                continue;
            for (size_t j = 0; j < i; j++)
                if (hv_is(&l->a[j], name) && l->a[j].vl == l->a[i].vl &&
                    memcmp(l->a[j].v, l->a[i].v, l->a[i].vl) == 0) {
                    hl_del(l, i);
                    break;
                }
        }
    } else { /* RETAIN_FIRST (default) */
        for (size_t i = l->n; i-- > first + 1;)
            if (hv_is(&l->a[i], name))
                hl_del(l, i);
    }
}

static void rewrite(hlist *l, const char *name, const char *regexp,
                    const char *repl) {
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)regexp, PCRE2_ZERO_TERMINATED, 0,
                                   &ec, &eo, NULL);
    if (!re)
        return;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    for (size_t i = 0; md && i < l->n; i++) {
        if (!hv_is(&l->a[i], name))
            continue;
        char out[4096];
        PCRE2_SIZE olen = sizeof out;
        int rc = pcre2_substitute(re, (PCRE2_SPTR)l->a[i].v, l->a[i].vl, 0,
                                  PCRE2_SUBSTITUTE_GLOBAL, md, NULL,
                                  (PCRE2_SPTR)repl, PCRE2_ZERO_TERMINATED,
                                  (PCRE2_UCHAR *)out, &olen);
        if (rc >= 0) {
            char *v = strndup(out, olen);
            if (v) {
                free(l->a[i].owned);
                l->a[i].v = l->a[i].owned = v;
                l->a[i].vl = (uint32_t)olen;
            }
        }
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
}

/* RewriteLocationResponseHeader, as SCG's: in the first value of the
 * location header, the host[:port] after one of `protocols`' schemes (and
 * a /vN segment after it, when the version is stripped) becomes hostValue
 * or the client's Host, when a '/' follows it. The version is stripped
 * always (ALWAYS_STRIP), never (NEVER_STRIP), or when the request's path
 * does not start with one (AS_IN_REQUEST). The header then has that one
 * value. */
static void rewrite_location(hlist *l, const gw_resp_op *op,
                             const gw_request *q) {
    size_t at = SIZE_MAX;
    for (size_t i = 0; i < l->n && at == SIZE_MAX; i++)
        if (hv_is(&l->a[i], op->name))
            at = i;
    if (at == SIZE_MAX)
        return;
    sy_str path = q->sreq.path;
    size_t d = 2;
    while (d < path.len && path.ptr[d] >= '0' && path.ptr[d] <= '9')
        d++;
    bool versioned = path.len > 2 && path.ptr[0] == '/' && path.ptr[1] == 'v' &&
                     d > 2 && d < path.len && path.ptr[d] == '/';
    bool strip = strcmp(op->arg, "ALWAYS_STRIP") == 0 ||
                 (strcmp(op->arg, "AS_IN_REQUEST") == 0 && !versioned);
    gw_buf re = {0};
    /* SCG's lookbehind (?<=^(?:protocols)://) varies in length, which
     * PCRE2 does not take: the host is a named group instead */
    gw_buf_printf(&re, "^(?:%s)://(?<gwhost>[^:/]+(?::\\d+)?%s)(?=/)",
                  op->extra && op->extra[0] ? op->extra : "https?|ftps?",
                  strip ? "(?:/v\\d+)?" : "");
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *code =
        pcre2_compile((PCRE2_SPTR)re.p, re.len, 0, &ec, &eo, NULL);
    gw_buf_free(&re);
    pcre2_match_data *md =
        code ? pcre2_match_data_create_from_pattern(code, NULL) : NULL;
    const char *v = l->a[at].v;
    size_t vl = l->a[at].vl;
    if (md && pcre2_match(code, (PCRE2_SPTR)v, vl, 0, 0, md, NULL) > 0) {
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        int g = pcre2_substring_number_from_name(code, (PCRE2_SPTR) "gwhost");
        ov += 2 * (g > 0 ? g : 0);
        const char *host = op->value[0] ? op->value : NULL;
        size_t hlen = host ? strlen(host) : q->sreq.host.len;
        gw_buf out = {0};
        gw_buf_add(&out, v, ov[0]);
        gw_buf_add(&out, host ? host : q->sreq.host.ptr, hlen);
        gw_buf_add(&out, v + ov[1], vl - ov[1]);
        char *fixed = out.p;
        hl_remove_after(l, op->name, at);
        free(l->a[at].owned);
        l->a[at].v = l->a[at].owned = fixed;
        l->a[at].vl = (uint32_t)out.len;
    }
    pcre2_match_data_free(md);
    pcre2_code_free(code);
}

void gw_apply_ops(gw_request *q, hlist *l, bool proxied) {
    const char *v = NULL; /* lines kept instead of edits (upstream_head.c) */
    gw_request_pre_split(q);
    for (const char *n = NULL; (n = gw_request_pre_next(q, n, &v)) != NULL;)
        if (!hl_has(l, n))
            hl_add(l, n, v);
    for (size_t i = 0; i < q->nops; i++) {
        gw_resp_op *op = &q->ops[i];
        if (proxied && op->outer)
            continue;
        switch (op->kind) {
        case SY_RESP_ADD: hl_add(l, op->name, op->value); break;
        case SY_RESP_ADD_IF_ABSENT:
            if (!hl_has(l, op->name))
                hl_add(l, op->name, op->value);
            break;
        case SY_RESP_SET:
            gw_hl_remove(l, op->name);
            hl_add(l, op->name, op->value);
            break;
        case SY_RESP_REMOVE: gw_hl_remove(l, op->name); break;
        case SY_RESP_DEDUPE: {
            char *names = strdup(op->name), *save = NULL;
            for (char *n = names ? strtok_r(names, " ", &save) : NULL; n;
                 n = strtok_r(NULL, " ", &save))
                dedupe(l, n, op->arg[0] ? op->arg : "RETAIN_FIRST");
            free(names);
            break;
        }
        case SY_RESP_REWRITE: rewrite(l, op->name, op->arg, op->value); break;
        case SY_RESP_REWRITE_LOCATION: rewrite_location(l, op, q); break;
        }
    }
}

void gw_response_ops_text(gw_request *q, gw_buf *out) {
    hlist l;
    hl_init(&l);
    gw_apply_ops(q, &l, false);
    hl_text(&l, out);
    hl_free(&l);
}
