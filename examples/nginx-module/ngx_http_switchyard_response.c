/*
 * ngx_http_switchyard_response.c - a route's response header operations
 * on a proxied response (the header filter): Add (with or without
 * override), Set, Remove, Dedupe and Rewrite, in the route's order. nginx
 * keeps some headers outside r->headers_out.headers or writes its own
 * when a pointer is NULL; those are handled by name: Content-Type (a
 * string of its own: Set gives one header), Server and Date (nginx adds
 * its own unless the pointer is set: Remove sets it to a removed entry),
 * Location and Last-Modified (pointer and time kept in step). Those of
 * a forward: route or a breaker's route whose fallback answers are kept
 * over the internal redirect and applied after the answering route's
 * only to an answer the module makes (no://op, 413/431): a proxied one is
 * left as the answering route made it.
 */
#include "ngx_http_switchyard.h"

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

enum { SW_H_OTHER, SW_H_CT, SW_H_SERVER, SW_H_DATE, SW_H_LOCATION, SW_H_LM };

static ngx_uint_t sw_special(ngx_str_t *n) {
    static const struct {
        const char *name;
        ngx_uint_t id;
    } s[] = {{"content-type", SW_H_CT},
             {"server", SW_H_SERVER},
             {"date", SW_H_DATE},
             {"location", SW_H_LOCATION},
             {"last-modified", SW_H_LM}};
    for (size_t i = 0; i < sizeof s / sizeof *s; i++)
        if (n->len == ngx_strlen(s[i].name) &&
            ngx_strncasecmp(n->data, (u_char *)s[i].name, n->len) == 0)
            return s[i].id;
    return SW_H_OTHER;
}

static bool sw_is(ngx_table_elt_t *h, ngx_str_t *name) {
    return h->hash && h->key.len == name->len &&
           ngx_strncasecmp(h->key.data, name->data, name->len) == 0;
}

/* A removed entry, for the pointers nginx fills in when NULL. */
static ngx_table_elt_t *sw_removed(ngx_http_request_t *r) {
    ngx_table_elt_t *h = ngx_pcalloc(r->pool, sizeof *h);
    return h;
}

static ngx_int_t sw_remove(ngx_http_request_t *r, ngx_str_t *name) {
    ngx_list_part_t *part = &r->headers_out.headers.part;
    ngx_uint_t sp = sw_special(name);

    for (; part; part = part->next) {
        ngx_table_elt_t *h = part->elts;
        for (ngx_uint_t i = 0; i < part->nelts; i++)
            if (sw_is(&h[i], name))
                h[i].hash = 0;
    }
    switch (sp) {
    case SW_H_CT:
        r->headers_out.content_type.len = 0;
        r->headers_out.content_type_len = 0;
        r->headers_out.content_type_lowcase = NULL;
        r->headers_out.charset.len = 0;
        break;
    case SW_H_SERVER:
        if ((r->headers_out.server = sw_removed(r)) == NULL)
            return NGX_ERROR;
        break;
    case SW_H_DATE:
        if ((r->headers_out.date = sw_removed(r)) == NULL)
            return NGX_ERROR;
        break;
    case SW_H_LOCATION: r->headers_out.location = NULL; break;
    case SW_H_LM:
        r->headers_out.last_modified = NULL;
        r->headers_out.last_modified_time = -1;
        break;
    }
    return NGX_OK;
}

static bool sw_has(ngx_http_request_t *r, ngx_str_t *name) {
    ngx_list_part_t *part = &r->headers_out.headers.part;

    switch (sw_special(name)) {
    case SW_H_CT:
        if (r->headers_out.content_type.len)
            return true;
        break;
    case SW_H_SERVER: /* nginx writes its own unless told otherwise */
        if (r->headers_out.server == NULL)
            return true;
        break;
    case SW_H_DATE:
        if (r->headers_out.date == NULL)
            return true;
        break;
    }
    for (; part; part = part->next) {
        ngx_table_elt_t *h = part->elts;
        for (ngx_uint_t i = 0; i < part->nelts; i++)
            if (sw_is(&h[i], name))
                return true;
    }
    return false;
}

static ngx_int_t sw_add(ngx_http_request_t *r, ngx_str_t *name,
                        ngx_str_t *value) {
    ngx_uint_t sp = sw_special(name);
    ngx_table_elt_t *h;

    if (sp == SW_H_CT && r->headers_out.content_type.len == 0) {
        r->headers_out.content_type = *value;
        r->headers_out.content_type_len = value->len;
        r->headers_out.content_type_lowcase = NULL;
        r->headers_out.charset.len = 0;
        return NGX_OK;
    }
    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL)
        return NGX_ERROR;
    h->hash = 1;
    h->key = *name;
    h->value = *value;
    h->lowcase_key = NULL;
#if (nginx_version >= 1023000)
    h->next = NULL;
#endif
    switch (sp) {
    case SW_H_SERVER: r->headers_out.server = h; break;
    case SW_H_DATE: r->headers_out.date = h; break;
    case SW_H_LOCATION:
        if (r->headers_out.location == NULL)
            r->headers_out.location = h;
        break;
    case SW_H_LM:
        if (r->headers_out.last_modified == NULL) {
            r->headers_out.last_modified = h;
            r->headers_out.last_modified_time = -1;
        }
        break;
    }
    return NGX_OK;
}

/* RETAIN_FIRST (default), RETAIN_LAST or RETAIN_UNIQUE over the values of
 * one header (Content-Type has one value). */
static void sw_dedupe_one(ngx_http_request_t *r, ngx_str_t *name,
                          ngx_str_t *strategy) {
    ngx_table_elt_t *seen[64];
    ngx_uint_t n = 0;
    ngx_list_part_t *part = &r->headers_out.headers.part;
    bool last =
        strategy->len == 11 &&
        ngx_strncasecmp(strategy->data, (u_char *)"RETAIN_LAST", 11) == 0;
    bool unique =
        strategy->len == 13 &&
        ngx_strncasecmp(strategy->data, (u_char *)"RETAIN_UNIQUE", 13) == 0;

    for (; part; part = part->next) {
        ngx_table_elt_t *h = part->elts;
        for (ngx_uint_t i = 0; i < part->nelts; i++) {
            if (!sw_is(&h[i], name))
                continue;
            if (unique) {
                for (ngx_uint_t j = 0; j < n; j++)
                    if (seen[j]->value.len == h[i].value.len &&
                        ngx_memcmp(seen[j]->value.data, h[i].value.data,
                                   h[i].value.len) == 0) {
                        h[i].hash = 0;
                        break;
                    }
                if (h[i].hash && n < 64)
                    seen[n++] = &h[i];
            } else if (last) {
                if (n)
                    seen[0]->hash = 0;
                seen[0] = &h[i];
                n = 1;
            } else if (n) {
                h[i].hash = 0;
            } else {
                seen[n++] = &h[i];
            }
        }
    }
    if (sw_special(name) == SW_H_LOCATION && n)
        r->headers_out.location = seen[0];
}

static void sw_dedupe(ngx_http_request_t *r, sy_response_op *op) {
    u_char *p = (u_char *)op->name.ptr, *end = p + op->name.len;
    ngx_str_t strategy = {op->arg.len, (u_char *)op->arg.ptr};

    while (p < end) {
        u_char *sp = ngx_strlchr(p, end, ' ');
        ngx_str_t one = {(sp ? sp : end) - p, p};
        if (one.len)
            sw_dedupe_one(r, &one, &strategy);
        p = sp ? sp + 1 : end;
    }
}

/* Every match of the regexp in the value replaced (PCRE2 substitution
 * syntax, global), into r->pool; the value is kept when it fails. */
static void sw_rewrite_value(ngx_http_request_t *r, pcre2_code *re,
                             pcre2_match_data *md, sy_response_op *op,
                             ngx_str_t *v) {
    PCRE2_SIZE olen = v->len * 2 + op->value.len + 64;
    for (int round = 0; round < 2; round++) {
        u_char *out = ngx_pnalloc(r->pool, olen);
        if (out == NULL)
            return;
        int rc = pcre2_substitute(
            re, v->data, v->len, 0,
            PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH, md,
            NULL, (PCRE2_SPTR)op->value.ptr, op->value.len, out, &olen);
        if (rc >= 0) {
            v->data = out;
            v->len = olen;
            return;
        }
        if (rc != PCRE2_ERROR_NOMEMORY)
            return;
    }
}

/* PCRE2's memory for a response's rewrite: the request's pool. */
static void *sw_pcre2_alloc(PCRE2_SIZE size, void *pool) {
    return ngx_palloc(pool, size);
}

static void sw_pcre2_free(void *p, void *pool) {
    if (p)
        ngx_pfree(pool, p);
}

static ngx_int_t sw_rewrite(ngx_http_request_t *r, sy_response_op *op) {
    ngx_str_t name = {op->name.len, (u_char *)op->name.ptr};
    ngx_list_part_t *part = &r->headers_out.headers.part;
    int ec = 0;
    PCRE2_SIZE eo = 0;
    pcre2_general_context *gc =
        pcre2_general_context_create(sw_pcre2_alloc, sw_pcre2_free, r->pool);
    pcre2_compile_context *cc = gc ? pcre2_compile_context_create(gc) : NULL;
    pcre2_code *re = cc ? pcre2_compile((PCRE2_SPTR)op->arg.ptr, op->arg.len, 0,
                                        &ec, &eo, cc)
                        : NULL;
    pcre2_match_data *md;

    pcre2_compile_context_free(cc);
    if (cc == NULL)
        return NGX_ERROR; /* out of memory: logged by the caller */
    if (re == NULL) {
        /* the library compiled it when the route was loaded */
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "switchyard: RewriteResponseHeader regexp of header "
                      "\"%V\" does not compile (offset %uz)",
                      &name, (size_t)eo);
        return NGX_ERROR;
    }
    md = pcre2_match_data_create_from_pattern(re, gc);
    if (md == NULL) {
        pcre2_code_free(re);
        return NGX_ERROR;
    }
    if (sw_special(&name) == SW_H_CT && r->headers_out.content_type.len) {
        sw_rewrite_value(r, re, md, op, &r->headers_out.content_type);
        r->headers_out.content_type_len = r->headers_out.content_type.len;
        r->headers_out.content_type_lowcase = NULL;
    }
    for (; part; part = part->next) {
        ngx_table_elt_t *h = part->elts;
        for (ngx_uint_t i = 0; i < part->nelts; i++)
            if (sw_is(&h[i], &name))
                sw_rewrite_value(r, re, md, op, &h[i].value);
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    pcre2_general_context_free(gc);
    return NGX_OK;
}

/* SetStatus (when not 0) and the response operations of `route`. */
/* Run or refuse: the location's add_header and expires lines add their
 * headers after the route's response operations, so a route that sets,
 * removes or rewrites one of them is refused, logged at error. Checked
 * before the request is proxied (sw_precontent_handler: a 500) and again
 * when the operations are applied (a no://op answer, those kept over a
 * redirect). */
ngx_flag_t sw_response_refused(ngx_http_request_t *r, ngx_str_t *route,
                               const sy_response_op *ops, ngx_uint_t n,
                               const char *outcome) {
    sw_loc_conf_t *lcf =
        ngx_http_get_module_loc_conf(r, ngx_http_switchyard_module);
    ngx_str_t name;
    const char *d =
        n && lcf ? sw_location_response_lost(lcf, ops, n, &name) : NULL;

    if (d == NULL)
        return 0;
    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "switchyard: route \"%V\" refused: its response filters "
                  "set, remove or rewrite \"%V\", which the location adds "
                  "after them with %s: %s",
                  route, &name, d, outcome);
    return 1;
}

static ngx_int_t sw_ops_apply(ngx_http_request_t *r, ngx_str_t *route,
                              ngx_int_t status, sy_response_op *ops,
                              ngx_uint_t n) {
    if (sw_response_refused(r, route, ops, n, "refused"))
        return NGX_ERROR;
    if (status) {
        r->headers_out.status = status;
        r->headers_out.status_line.len = 0;
    }
    for (ngx_uint_t i = 0; i < n; i++) {
        sy_response_op *op = &ops[i];
        ngx_str_t name = {op->name.len, (u_char *)op->name.ptr};
        ngx_str_t value = {op->value.len, (u_char *)op->value.ptr};
        ngx_int_t rc = NGX_OK;

        switch (op->kind) {
        case SY_RESP_SET:
            rc = sw_remove(r, &name);
            if (rc == NGX_OK)
                rc = sw_add(r, &name, &value);
            break;
        case SY_RESP_REMOVE: rc = sw_remove(r, &name); break;
        case SY_RESP_ADD_IF_ABSENT:
            if (!sw_has(r, &name))
                rc = sw_add(r, &name, &value);
            break;
        case SY_RESP_ADD: rc = sw_add(r, &name, &value); break;
        case SY_RESP_DEDUPE: sw_dedupe(r, op); break;
        case SY_RESP_REWRITE: rc = sw_rewrite(r, op); break;
        default:
            /* RewriteLocationResponseHeader is refused when the route is
             * loaded (host_runs: the library's SY_ENOTRUN) */
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "switchyard: route \"%V\": response operation %d "
                          "is not run by the module",
                          route, (int)op->kind);
            return NGX_ERROR;
        }
        if (rc != NGX_OK) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "switchyard: route \"%V\": response header \"%V\" "
                          "not changed (out of memory)",
                          route, &name);
            return NGX_ERROR;
        }
    }
    return NGX_OK;
}

ngx_int_t sw_response_ops(ngx_http_request_t *r, sw_req_ctx_t *ctx) {
    return sw_ops_apply(r, &ctx->route, ctx->status, ctx->ops, ctx->op_count);
}

/* ---- response operations carried over an internal redirect ----
 *
 * A forward: route and a breaker's fallback go on by an internal
 * redirect, which clears the module's context: their route's SetStatus
 * and response operations are kept in the request's pool (a cleanup
 * entry marked by its handler). They are applied after those of the
 * route that answers, innermost first, as a response returns through the
 * routes that forwarded it (SCG's forward), only when the module makes
 * the answer: a no://op route (the outer SetStatus wins) or a 413/431 of
 * RequestSize/RequestHeaderSize (its status stays), as the mini-gateway
 * does. Any other answer (proxied, or nginx's own error page for it) is
 * left as it was made: in
 * SCG the forwarding route's post filters run after the answering route
 * wrote its answer, find it committed and change nothing (the
 * mini-gateway's gw_resp_op.outer). Headers set before the redirect
 * (X-RateLimit-*) are in the answer already and stay. */

typedef struct {
    ngx_str_t route;
    const sw_req_ctx_t *owner; /* the context that kept them */
    ngx_int_t status;
    sy_response_op *ops;
    ngx_uint_t op_count;
    unsigned active : 1;
} sw_kept_ops_t;

/* Kept entries whose pool is still there, in this worker: with none, a
 * response has none to look for. */
ngx_uint_t sw_kept_live;

static void sw_kept_ops_mark(void *data) {
    (void)data; /* a marker in the pool's cleanup list, run when it goes */
    sw_kept_live--;
}

ngx_int_t sw_response_ops_keep(ngx_http_request_t *r, sw_req_ctx_t *ctx) {
    sw_kept_ops_t *k;

    if (ctx->status == 0 && ctx->op_count == 0)
        return NGX_OK;
    k = sw_keep_add(r, sw_kept_ops_mark, sizeof *k);
    if (k == NULL)
        return NGX_ERROR;
    sw_kept_live++;
    k->active = 0;
    /* the route id may be the snapshot's, released before the redirect */
    k->route.data = ngx_pnalloc(r->pool, ctx->route.len + 1);
    if (k->route.data == NULL)
        return NGX_ERROR;
    ngx_memcpy(k->route.data, ctx->route.data, ctx->route.len);
    k->route.data[ctx->route.len] = '\0';
    k->route.len = ctx->route.len;
    k->owner = ctx;
    k->status = ctx->status;
    k->ops = ctx->ops; /* in r->pool, as the route's strings */
    k->op_count = ctx->op_count;
    k->active = 1;
    return NGX_OK;
}

ngx_int_t sw_response_ops_kept(ngx_http_request_t *r, sw_req_ctx_t *ctx) {
    /* only the module's own answer is still open to them (see above) */
    ngx_flag_t open = ctx && (ctx->noop || ctx->respond);

    if (sw_kept_live == 0)
        return NGX_OK;

    /* newest first: the route forwarded to last is the innermost */
    for (ngx_pool_cleanup_t *c = r->pool->cleanup; c; c = c->next) {
        sw_kept_ops_t *k = c->data;
        if (c->handler != sw_kept_ops_mark || !k->active)
            continue;
        k->active = 0;
        /* kept for a fallback that did not happen: applied already */
        if (!open || k->owner == ctx)
            continue;
        if (sw_ops_apply(r, &k->route, ctx->noop ? k->status : 0, k->ops,
                         k->op_count) != NGX_OK)
            return NGX_ERROR;
    }
    return NGX_OK;
}
