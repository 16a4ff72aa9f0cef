/*
 * ngx_http_switchyard_module.c - the request phase that routes a request
 * with the worker's sy_router, the $switchyard_* variables, and the header
 * filter that applies a route's response filters, with the pre- and
 * postconfiguration that install them. The directives, configuration and
 * the module's life cycle are ngx_http_switchyard_conf.c's; docs/nginx.md
 * is the manual.
 */
#include "ngx_http_switchyard.h"

#include <string.h>

static ngx_http_output_header_filter_pt sw_next_header_filter;

/* ---- variables ---- */

static ngx_int_t sw_var(ngx_http_request_t *r, ngx_http_variable_value_t *v,
                        uintptr_t data) {
    sw_req_ctx_t *ctx = ngx_http_get_module_ctx(r, ngx_http_switchyard_module);
    ngx_str_t *s;

    /* an admin request's context is not a routing context */
    if (ctx == NULL || ctx->kind != SW_CTX_REQUEST) {
        v->not_found = 1;
        return NGX_OK;
    }
    /* the balancer refuses a request whose location sends neither
     * (sw_init_peer): its filters' path and Host would be lost */
    if (data == offsetof(sw_req_ctx_t, uri))
        ctx->uri_read = 1;
    else if (data == offsetof(sw_req_ctx_t, host))
        ctx->host_read = 1;
    s = (ngx_str_t *)((u_char *)ctx + data);
    if (s->data == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }
    v->data = s->data;
    v->len = s->len;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;
    return NGX_OK;
}

/* $switchyard_upstream is what the variable form proxies to. A route
 * whose timeouts or policies only the balancer applies cannot reach it:
 * a configuration with a proxy_pass to this variable refuses such routes
 * at load and at the admin location (sw_router_create). Should one come
 * through anyway (a location that reaches the variable some other way),
 * it is refused here (500, the cause logged), never sent with
 * the location's timeouts. */
static ngx_int_t sw_var_upstream(ngx_http_request_t *r,
                                 ngx_http_variable_value_t *v, uintptr_t data) {
    sw_req_ctx_t *ctx = ngx_http_get_module_ctx(r, ngx_http_switchyard_module);

    if (ctx && ctx->kind == SW_CTX_REQUEST && !ctx->balanced && r->upstream &&
        ctx->upstream.len && ctx->needs_balancer) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "switchyard: route \"%V\" sets connect-timeout, "
                      "response-timeout, Retry or a CircuitBreaker's time "
                      "limit, which the module applies only through "
                      "switchyard_balancer: refused",
                      &ctx->route);
        return NGX_ERROR;
    }
    /* the proxy module reads it (the variable form): without a `resolver`
     * nginx cannot resolve a name (every request was a 502, "no resolver
     * defined"), so the worker resolves it as the balancer does */
    if (ctx && ctx->kind == SW_CTX_REQUEST && !ctx->balanced && r->upstream &&
        ctx->upstream.len && !ctx->resolved) {
        ngx_http_core_loc_conf_t *clcf =
            ngx_http_get_module_loc_conf(r, ngx_http_core_module);
        ctx->resolved = 1;
        if ((clcf->resolver == NULL ||
             clcf->resolver->connections.nelts == 0) &&
            sw_upstream_resolve(r, &ctx->upstream) == NGX_ERROR) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "switchyard: route \"%V\": cannot resolve "
                          "\"%V\" (no resolver in the location): answering "
                          "500",
                          &ctx->route, &ctx->upstream);
            return NGX_ERROR;
        }
    }
    return sw_var(r, v, data);
}

static ngx_http_variable_t sw_vars[] = {
    {ngx_string("switchyard_route"), NULL, sw_var,
     offsetof(sw_req_ctx_t, route), NGX_HTTP_VAR_NOCACHEABLE, 0},
    {ngx_string("switchyard_upstream"), NULL, sw_var_upstream,
     offsetof(sw_req_ctx_t, upstream), NGX_HTTP_VAR_NOCACHEABLE, 0},
    {ngx_string("switchyard_uri"), NULL, sw_var, offsetof(sw_req_ctx_t, uri),
     NGX_HTTP_VAR_NOCACHEABLE, 0},
    {ngx_string("switchyard_host"), NULL, sw_var, offsetof(sw_req_ctx_t, host),
     NGX_HTTP_VAR_NOCACHEABLE, 0},
    {ngx_string("switchyard_instance"), NULL, sw_var,
     offsetof(sw_req_ctx_t, instance), NGX_HTTP_VAR_NOCACHEABLE, 0},
    {ngx_string("switchyard_version"), NULL, sw_var,
     offsetof(sw_req_ctx_t, version), NGX_HTTP_VAR_NOCACHEABLE, 0},
    ngx_http_null_variable};

ngx_int_t sw_preconfiguration(ngx_conf_t *cf) {
    if (sw_location_wrap(cf) != NGX_OK)
        return NGX_ERROR;
    for (ngx_http_variable_t *v = sw_vars; v->name.len; v++) {
        ngx_http_variable_t *var =
            ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL)
            return NGX_ERROR;
        var->get_handler = v->get_handler;
        var->data = v->data;
    }
    return NGX_OK;
}

/* ---- routing a request ---- */

static ngx_int_t sw_pstr(ngx_http_request_t *r, ngx_str_t *dst, const char *src,
                         size_t len) {
    dst->data = ngx_pnalloc(r->pool, len + 1);
    if (dst->data == NULL)
        return NGX_ERROR;
    ngx_memcpy(dst->data, src, len);
    dst->data[len] = '\0';
    dst->len = len;
    return NGX_OK;
}

/* A string of the snapshot the request holds (no copy). */
static void sw_borrow(ngx_str_t *dst, const char *src) {
    dst->data = (u_char *)src;
    dst->len = ngx_strlen(src);
}

/* The request's headers as sy_header slices (worker scratch). */
static ngx_int_t sw_request_headers(ngx_list_t *headers, sy_request *req) {
    ngx_list_part_t *part = &headers->part;
    size_t n = 0;

    for (; part; part = part->next) {
        ngx_table_elt_t *h = part->elts;
        for (ngx_uint_t i = 0; i < part->nelts; i++) {
            if (n == sw_worker.hdr_cap) {
                size_t cap = sw_worker.hdr_cap ? 2 * sw_worker.hdr_cap : 32;
                sy_header *nh = realloc(sw_worker.hdrs, cap * sizeof *nh);
                if (nh == NULL)
                    return NGX_ERROR;
                sw_worker.hdrs = nh;
                sw_worker.hdr_cap = cap;
            }
            sw_worker.hdrs[n].name =
                (sy_str){(char *)h[i].key.data, h[i].key.len};
            sw_worker.hdrs[n].value =
                (sy_str){(char *)h[i].value.data, h[i].value.len};
            n++;
        }
    }
    req->headers = sw_worker.hdrs;
    req->header_count = n;
    return NGX_OK;
}

/* Replace the request's headers by the filter plan's list. */
static ngx_int_t sw_set_headers(ngx_http_request_t *r, const sy_header *hs,
                                size_t n) {
    ngx_list_t list;
    if (ngx_list_init(&list, r->pool, n ? n : 1, sizeof(ngx_table_elt_t)) !=
        NGX_OK)
        return NGX_ERROR;
    for (size_t i = 0; i < n; i++) {
        ngx_table_elt_t *h = ngx_list_push(&list);
        if (h == NULL ||
            sw_pstr(r, &h->key, hs[i].name.ptr, hs[i].name.len) != NGX_OK ||
            sw_pstr(r, &h->value, hs[i].value.ptr, hs[i].value.len) != NGX_OK)
            return NGX_ERROR;
        h->lowcase_key = ngx_pnalloc(r->pool, h->key.len);
        if (h->lowcase_key == NULL)
            return NGX_ERROR;
        h->hash = ngx_hash_strlow(h->lowcase_key, h->key.data, h->key.len);
    }
    r->headers_in.headers = list;
    return NGX_OK;
}

/* True when the filter plan's headers are the request's own, in order,
 * the same slices (the library hands back the list it was given when no
 * filter touched it), but for Host, which the target carries apart: no
 * filter changed a request header, so the list needs no copy. */
static bool sw_headers_kept(const ngx_list_t *headers, const sy_header *plan,
                            size_t n) {
    size_t j = 0;

    for (const ngx_list_part_t *part = &headers->part; part;
         part = part->next) {
        const ngx_table_elt_t *h = part->elts;
        for (ngx_uint_t i = 0; i < part->nelts; i++) {
            if (j < n && plan[j].name.ptr == (char *)h[i].key.data &&
                plan[j].name.len == h[i].key.len &&
                plan[j].value.ptr == (char *)h[i].value.data &&
                plan[j].value.len == h[i].value.len) {
                j++;
                continue;
            }
            if (h[i].key.len != 4 || h[i].lowcase_key == NULL ||
                h[i].lowcase_key[0] != 'h' || h[i].lowcase_key[1] != 'o' ||
                h[i].lowcase_key[2] != 's' || h[i].lowcase_key[3] != 't')
                return false;
        }
    }
    return j == n;
}

/* 404, 405 with Allow, or 400 from the library's no-match reason. */
static ngx_int_t sw_answer_nomatch(ngx_http_request_t *r) {
    sy_str allow = {NULL, 0};

    switch (sy_match_ctx_nomatch(sw_worker.mctx, &allow)) {
    case SY_NOMATCH_METHOD: {
        ngx_table_elt_t *h = ngx_list_push(&r->headers_out.headers);
        if (h == NULL)
            return sw_500(r, "out of memory for the Allow header");
        h->hash = 1;
        ngx_str_set(&h->key, "Allow");
        if (sw_pstr(r, &h->value, allow.ptr ? allow.ptr : "", allow.len) !=
            NGX_OK)
            return sw_500(r, "out of memory for the Allow header");
        return NGX_HTTP_NOT_ALLOWED;
    }
    case SY_NOMATCH_BAD_PATH: return NGX_HTTP_BAD_REQUEST;
    case SY_NOMATCH_BUDGET: return NGX_HTTP_SERVICE_UNAVAILABLE;
    default: return NGX_HTTP_NOT_FOUND;
    }
}

/* sy_match_target skipping `exclude` and the instances the zone's shared
 * passive health ejected; when that leaves none, the ejected ones are
 * eligible again (at least one instance may always be tried). */
static ngx_inline int sw_select(sy_match *m, const char **exclude, size_t n,
                                sy_target *t, sy_error *err) {
    const char *ids[SW_MAX_EXCLUDE];
    sy_upstream up;
    size_t k = 0;

    if (!sw_health_any_ejected())
        return sy_match_target(m, exclude,
                               n < SW_MAX_EXCLUDE ? n : SW_MAX_EXCLUDE, t, err);
    sy_route_upstream(sy_match_route(m), &up);
    for (; k < n && k < SW_MAX_EXCLUDE; k++)
        ids[k] = exclude[k];
    if (up.kind == SY_UPSTREAM_SERVICE)
        k += sw_health_ejected(up.host, ids + k, SW_MAX_EXCLUDE - k);
    if (k > n) {
        int rc = sy_match_target(m, ids, k, t, err);
        if (rc != SY_ENOINSTANCE)
            return rc;
    }
    return sy_match_target(m, ids, n < SW_MAX_EXCLUDE ? n : SW_MAX_EXCLUDE, t,
                           err);
}

/* The route's connect-timeout / response-timeout in ms, as the library
 * reads its metadata (Spring's reading): 0 when not set (nginx's own
 * proxy_connect_timeout / proxy_read_timeout), NGX_MAX_INT32_VALUE (about
 * 24 days) for "no limit". */
static ngx_msec_t sw_meta_ms(const sy_route *route, sy_timeout_kind kind) {
    uint64_t ms = 0;

    switch (sy_route_timeout(route, kind, &ms)) {
    case SY_TIMEOUT_MS:
        return ms < NGX_MAX_INT32_VALUE ? (ngx_msec_t)ms
                                        : (ngx_msec_t)NGX_MAX_INT32_VALUE;
    case SY_TIMEOUT_NONE: return (ngx_msec_t)NGX_MAX_INT32_VALUE;
    default: return 0;
    }
}

/* The route's facts in snapshot snap (held by the caller): found in the
 * worker's table, or asked of the library and kept there (the policies
 * once a request has gone through sw_policy_phase). The table holds one
 * generation's routes: a newer snapshot empties it. */
static sw_route_facts_t *sw_route_facts(const sy_snapshot *snap,
                                        const sy_route *route) {
    uint64_t gen = sy_snapshot_generation(snap);
    sw_route_facts_t *f;

    if (gen != sw_worker.facts_gen) {
        ngx_memzero(sw_worker.facts, sizeof sw_worker.facts);
        sw_worker.facts_gen = gen;
    }
    f = &sw_worker.facts[(((uintptr_t)route * 0x9E3779B97F4A7C15ULL) >> 32) %
                         SW_FACTS];
    if (f->route == route)
        return f;
    f->route = route;
    sw_borrow(&f->id, sy_route_id(route));
    f->connect_timeout = sw_meta_ms(route, SY_TIMEOUT_CONNECT);
    f->response_timeout = sw_meta_ms(route, SY_TIMEOUT_RESPONSE);
    f->policy_free = 0;
    return f;
}

/* ctx->upstream: scheme://host:port ([host] for IPv6), written by hand: a
 * request's ngx_sprintf costs more than the rest of the string. */
static ngx_int_t sw_upstream_str(ngx_http_request_t *r, sw_req_ctx_t *ctx,
                                 const char *scheme, const sy_target *t) {
    size_t hl = ngx_strlen(t->host), sl = ngx_strlen(scheme);
    bool v6 =
        ngx_strlchr((u_char *)t->host, (u_char *)t->host + hl, ':') != NULL;
    u_char digits[5], *d = digits + sizeof digits, *p;
    uint32_t port = t->port;

    ctx->upstream.data = ngx_pnalloc(r->pool, sl + hl + 12);
    if (ctx->upstream.data == NULL)
        return NGX_ERROR;
    p = ngx_cpymem(ctx->upstream.data, scheme, sl);
    p = ngx_cpymem(p, v6 ? "://[" : "://", v6 ? 4 : 3);
    p = ngx_cpymem(p, t->host, hl);
    if (v6)
        *p++ = ']';
    *p++ = ':';
    do {
        *--d = (u_char)('0' + port % 10);
        port /= 10;
    } while (port);
    p = ngx_cpymem(p, d, digits + sizeof digits - d);
    ctx->upstream.len = p - ctx->upstream.data;
    return NGX_OK;
}

/* The target's path?query as a slice of the client's request line when
 * it is one (no filter rewrote the path but to cut it, as StripPrefix
 * does; the query as sent): no copy. The request line lives as long as
 * the request; a plan's own string (the match context's) does not. */
static bool sw_uri_slice(const ngx_str_t *line, const sy_target *t,
                         ngx_str_t *uri) {
    const u_char *b = line->data, *e = b + line->len;
    const u_char *p = (const u_char *)t->path.ptr, *pe = p + t->path.len;

    if (p == NULL || p < b || pe > e)
        return false;
    if (t->query.len) {
        const u_char *q = (const u_char *)t->query.ptr;
        if (pe == e || *pe != '?' || q != pe + 1 ||
            t->query.len > (size_t)(e - q))
            return false;
        pe = q + t->query.len;
    }
    uri->data = (u_char *)p;
    uri->len = pe - p;
    return true;
}

/* The proxied target in one library call: where to connect, the path and
 * query, the Host to send and the request headers after filters. */
static ngx_int_t sw_target(ngx_http_request_t *r, sw_req_ctx_t *ctx,
                           sy_match *m, uint64_t gen) {
    sy_target t;
    sy_error err;
    const char *scheme;
    u_char *p;

    if (sw_select(m, NULL, 0, &t, &err)) {
        ngx_uint_t level =
            err.code == SY_ENOINSTANCE ? NGX_LOG_WARN : NGX_LOG_ERR;
        ngx_log_error(level, r->connection->log, 0,
                      "switchyard: route \"%V\": %s", &ctx->route, err.message);
        return err.code == SY_ENOINSTANCE ? NGX_HTTP_SERVICE_UNAVAILABLE
                                          : NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (t.kind == SY_UPSTREAM_FORWARD) {
        /* forward:/path: dispatched again through the routes, by an
         * internal redirect once the match is released (the request
         * headers after the filters go with it) */
        sy_upstream up;
        size_t pl;
        /* the uri's path, with the request's query after the filters (as
         * the mini-gateway forwards) */
        sy_route_upstream(sy_match_route(m), &up);
        pl = ngx_strlen(up.path);
        ctx->fallback.data = ngx_pnalloc(r->pool, pl + t.query.len + 1);
        if (ctx->fallback.data == NULL)
            return NGX_ERROR;
        p = ngx_cpymem(ctx->fallback.data, up.path, pl);
        if (t.query.len) {
            *p++ = '?';
            p = ngx_cpymem(p, t.query.ptr, t.query.len);
        }
        ctx->fallback.len = p - ctx->fallback.data;
        if (sw_set_headers(r, t.headers, t.header_count) != NGX_OK)
            return NGX_ERROR;
        return NGX_DONE;
    }
    if (t.kind == SY_UPSTREAM_NONE)
        return NGX_AGAIN; /* no://op: the module answers (sw_answer_noop) */
    if (t.kind != SY_UPSTREAM_URL && t.kind != SY_UPSTREAM_SERVICE) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "switchyard: route \"%V\": upstream kind %d is not "
                      "run by the module",
                      &ctx->route, (int)t.kind);
        return NGX_HTTP_BAD_GATEWAY;
    }
    /* nginx proxies WebSocket over http(s) with the Upgrade headers */
    scheme = t.scheme;
    if (scheme[0] == 'w' && scheme[1] == 's' && scheme[2] == '\0')
        scheme = "http";
    else if (scheme[0] == 'w' && scheme[1] == 's' && scheme[2] == 's' &&
             scheme[3] == '\0')
        scheme = "https";
    bool http = scheme[0] == 'h' && scheme[1] == 't' && scheme[2] == 't' &&
                scheme[3] == 'p' &&
                (scheme[4] == '\0' || (scheme[4] == 's' && scheme[5] == '\0'));
    ctx->https = http && scheme[4] == 's';
    /* an address the worker resolved before has its string made */
    if (!http || (ctx->addr = sw_target_addr(&t, gen, ctx->https,
                                             &ctx->upstream)) == NULL) {
        if (sw_upstream_str(r, ctx, scheme, &t) != NGX_OK)
            return NGX_ERROR;
    }

    if (!sw_uri_slice(&r->unparsed_uri, &t, &ctx->uri)) {
        ctx->uri.data = ngx_pnalloc(r->pool, t.path.len + t.query.len + 2);
        if (ctx->uri.data == NULL)
            return NGX_ERROR;
        p = ngx_cpymem(ctx->uri.data, t.path.ptr, t.path.len);
        if (t.query.len) {
            *p++ = '?';
            p = ngx_cpymem(p, t.query.ptr, t.query.len);
        }
        ctx->uri.len = p - ctx->uri.data;
    }

    if (sw_pstr(r, &ctx->host, t.host_header.ptr ? t.host_header.ptr : "",
                t.host_header.len) != NGX_OK)
        return NGX_ERROR;
    if (t.health)
        ctx->target = t;
    /* the snapshot's strings (NUL-terminated): copied if the snapshot
     * is not kept for the request (sw_phase_handler) */
    if (t.service)
        sw_borrow(&ctx->service, t.service);
    if (t.instance_id)
        sw_borrow(&ctx->instance, t.instance_id);
    if (t.version)
        sw_borrow(&ctx->version, t.version);
    /* the common case: no filter changed a request header, and no
     * forward before this one did (r->internal: the kept client headers
     * are checked below); the request's own list is sent, and no line of
     * the location can replace a change */
    if (!r->internal &&
        sw_headers_kept(&r->headers_in.headers, t.headers, t.header_count))
        return NGX_OK;
    /* run or refuse: nginx passes no request header the location sets */
    const ngx_str_t *lost = sw_location_header_lost(r, &ctx->orig_headers,
                                                    t.headers, t.header_count);
    if (lost) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "switchyard: route \"%V\" refused: its filters change "
                      "the request header \"%V\", which the location sets "
                      "with proxy_set_header (nginx would send the "
                      "location's): answering 500",
                      &ctx->route, lost);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    return sw_set_headers(r, t.headers, t.header_count);
}

/* Copy the response operations and SetStatus for the header filter. */
static ngx_int_t sw_keep_response_ops(ngx_http_request_t *r, sw_req_ctx_t *ctx,
                                      sy_match *m) {
    size_t n = sy_match_response_op_count(m);
    ctx->status = sy_match_status(m);
    if (n == 0)
        return NGX_OK;
    ctx->ops = ngx_palloc(r->pool, n * sizeof *ctx->ops);
    if (ctx->ops == NULL)
        return NGX_ERROR;
    for (size_t i = 0; i < n; i++) {
        sy_response_op op = sy_match_response_op(m, i);
        ngx_str_t s[3];
        if (sw_pstr(r, &s[0], op.name.ptr ? op.name.ptr : "", op.name.len) ||
            sw_pstr(r, &s[1], op.value.ptr ? op.value.ptr : "", op.value.len) ||
            sw_pstr(r, &s[2], op.arg.ptr ? op.arg.ptr : "", op.arg.len))
            return NGX_ERROR;
        op.name = (sy_str){(char *)s[0].data, s[0].len};
        op.value = (sy_str){(char *)s[1].data, s[1].len};
        op.arg = (sy_str){(char *)s[2].data, s[2].len};
        ctx->ops[i] = op;
    }
    ctx->op_count = n;
    return NGX_OK;
}

/* A no://op route: answered by the module with its status (SetStatus,
 * else 200), its response operations and no body, as the mini-gateway
 * and SCG do; those of the routes that forwarded here follow (the only
 * answer they apply to: sw_response_ops_kept). */
static ngx_int_t sw_answer_noop(ngx_http_request_t *r, sw_req_ctx_t *ctx,
                                sy_match *m) {
    if (sw_keep_response_ops(r, ctx, m) != NGX_OK)
        return sw_500(r, "out of memory for the response operations");
    ctx->noop = 1;
    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = 0;
    r->header_only = 1;
    if (sw_response_ops(r, ctx) != NGX_OK)
        return NGX_HTTP_INTERNAL_SERVER_ERROR; /* logged there */
    return ngx_http_send_header(r); /* header only: the answer is done */
}

/* A forward: route or an open breaker goes on by an internal redirect:
 * the route's response operations are kept for the answer, and the
 * client's headers for the final location's check. NGX_DONE. */
static ngx_int_t sw_keep_over_redirect(ngx_http_request_t *r, sw_req_ctx_t *ctx,
                                       sy_match *m) {
    if (sw_keep_response_ops(r, ctx, m) != NGX_OK ||
        sw_response_ops_keep(r, ctx) != NGX_OK ||
        sw_location_keep_headers(r, &ctx->orig_headers) != NGX_OK)
        return sw_500(r, "out of memory for the response operations");
    return NGX_DONE;
}

/* The request as the library sees it; headers from `headers` (the
 * client's, before the filters replaced them). */
static ngx_int_t sw_build_request(ngx_http_request_t *r, sw_req_ctx_t *ctx,
                                  ngx_list_t *headers, sy_request *req) {
    u_char *q;

    req->method = (sy_str){(char *)r->method_name.data, r->method_name.len};
#if (NGX_HTTP_SSL)
    req->scheme =
        r->connection->ssl ? (sy_str){"https", 5} : (sy_str){"http", 4};
#else
    req->scheme = (sy_str){"http", 4};
#endif
    if (r->headers_in.host)
        req->host = (sy_str){(char *)r->headers_in.host->value.data,
                             r->headers_in.host->value.len};
    else /* HTTP/1.0 without Host, or the host of an absolute URI */
        req->host = (sy_str){(char *)r->headers_in.server.data,
                             r->headers_in.server.len};
    if (r->internal) {
        /* an internal redirect (an open breaker's forward:, error_page):
         * the URI it was given, not the client's */
        req->path = (sy_str){(char *)r->uri.data, r->uri.len};
    } else {
        /* the query nginx parsed out of it follows its '?' */
        q = r->args.data;
        if (q == NULL || q <= r->unparsed_uri.data ||
            q > r->unparsed_uri.data + r->unparsed_uri.len || q[-1] != '?')
            q = memchr(r->unparsed_uri.data, '?', r->unparsed_uri.len);
        else
            q--;
        req->path = (sy_str){(char *)r->unparsed_uri.data,
                             q ? (size_t)(q - r->unparsed_uri.data)
                               : r->unparsed_uri.len};
    }
    req->query = (sy_str){(char *)r->args.data, r->args.len};
    req->remote_addr = (sy_str){(char *)r->connection->addr_text.data,
                                r->connection->addr_text.len};
    req->content_length = r->headers_in.content_length_n;
    req->now_ms = ctx->now_ms;
    req->seed = ctx->seed;
    return sw_request_headers(headers, req);
}

/* True when the client's own path (the request line's, before any '?')
 * has an escaped slash or backslash (%2F, %5C). */
static bool sw_raw_escaped_slash(const ngx_http_request_t *r) {
    const u_char *p = r->unparsed_uri.data, *e = p + r->unparsed_uri.len;

    for (; p + 2 < e && *p != '?'; p++)
        if (p[0] == '%' && ((p[1] == '2' && (p[2] | 0x20) == 'f') ||
                            (p[1] == '5' && (p[2] | 0x20) == 'c')))
            return true;
    return false;
}

static ngx_int_t sw_route(ngx_http_request_t *r, sw_req_ctx_t *ctx,
                          sy_snapshot *snap) {
    /* req stays on this frame: every use of the match is in this call */
    sy_request req = SY_REQUEST_INIT;
    sy_match *m = NULL;

    /* a retry matches again: same time, same Weight draws, same headers */
    ngx_time_t *tp = ngx_timeofday();
    ctx->now_ms = (int64_t)tp->sec * 1000 + (int64_t)tp->msec;
    /* splitmix64 of the worker's counter (two ngx_random a request cost
     * ~100 instructions) */
    uint64_t z = (sw_worker.seed += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    ctx->seed = z ^ (z >> 31);
    if (ctx->seed == 0)
        ctx->seed = 1;
    ctx->orig_headers = r->headers_in.headers;
    /* a rewrite (or an internal redirect) is matched on nginx's decoded
     * URI, where the client's %2F is a slash already: with reject, the
     * client's own path is held to it */
    if (r->internal &&
        sw_worker.mcf->escaped_slashes == (ngx_uint_t)SY_SLASHES_REJECT &&
        sw_raw_escaped_slash(r))
        return NGX_HTTP_BAD_REQUEST;
    if (sw_build_request(r, ctx, &r->headers_in.headers, &req) != NGX_OK) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "switchyard: out of memory for the request's headers");
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (sy_snapshot_match(snap, sw_worker.mctx, &req, &m) < 0) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "switchyard: the match failed (invalid request)");
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (m == NULL)
        return sw_answer_nomatch(r);
    const sy_route *route = sy_match_route(m);
    sw_route_facts_t *facts = sw_route_facts(snap, route);
    ctx->route = facts->id; /* the snapshot's (sw_borrow) */
    ctx->connect_timeout = facts->connect_timeout;
    ctx->response_timeout = facts->response_timeout;
    ctx->needs_balancer = ctx->connect_timeout || ctx->response_timeout;

    /* an answer the module gives must be a real status (0 would let the
     * request go on) */
    int status = sy_match_status(m);
    sy_action action = sy_match_action(m);
    if (action != SY_ACTION_PROXY && (status < 200 || status > 599)) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "switchyard: route \"%V\" answers status %d, not an "
                      "HTTP status",
                      &ctx->route, status);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (facts->policy_free) {
        ctx->permit.permitted = 1; /* as sy_match_breaker_acquire says */
    } else {
        bool none = false;
        ngx_int_t prc = sw_policy_phase(r, ctx, m, &none);
        if (prc == NGX_DONE) /* an open breaker's fallback answers */
            return sw_keep_over_redirect(r, ctx, m);
        if (prc != NGX_DECLINED)
            return prc;
        facts->policy_free = none;
    }
    switch (action) {
    case SY_ACTION_RESPOND:
        /* 413/431 with the filter's error header and the route's other
         * response operations (the header filter), as the mini-gateway */
        if (sw_keep_response_ops(r, ctx, m) != NGX_OK)
            return sw_500(r, "out of memory for the response operations");
        if (sw_response_refused(r, &ctx->route, ctx->ops, ctx->op_count,
                                "answering 500"))
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        ctx->respond = 1;
        return status;
    case SY_ACTION_REDIRECT: {
        sy_str loc = sy_match_redirect(m);
        ngx_table_elt_t *h = ngx_list_push(&r->headers_out.headers);
        if (h == NULL)
            return sw_500(r, "out of memory for a redirect's Location");
        h->hash = 1;
        ngx_str_set(&h->key, "Location");
        if (sw_pstr(r, &h->value, loc.ptr ? loc.ptr : "", loc.len) != NGX_OK)
            return sw_500(r, "out of memory for a redirect's Location");
        ngx_http_clear_location(r);
        r->headers_out.location = h;
        return status;
    }
    case SY_ACTION_PROXY: break;
    }
    ngx_int_t rc = sw_target(r, ctx, m, sy_snapshot_generation(snap));
    if (rc == NGX_DONE) /* a forward: route */
        return sw_keep_over_redirect(r, ctx, m);
    if (rc == NGX_AGAIN)
        return sw_answer_noop(r, ctx, m);
    if (rc != NGX_OK)
        return rc == NGX_ERROR ? sw_500(r, "out of memory for the target") : rc;
    if (sy_match_response_op_count(m) == 0) /* (status read above) */
        ctx->status = status;
    else if (sw_keep_response_ops(r, ctx, m) != NGX_OK)
        return sw_500(r, "out of memory for the response operations");
    if (sw_location_refuses(r, ctx, 0)) {
        ctx->op_count = 0; /* the 500 goes out without them */
        ctx->status = 0;
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    return NGX_DECLINED;
}

/* After the rewrite phase, in the request's final location (an `if`
 * block may have added headers or a proxy_pass): a route whose location
 * does not proxy, or whose response filters the location's add_header or
 * expires would undo, is refused before it is proxied. */
static ngx_int_t sw_precontent_handler(ngx_http_request_t *r) {
    sw_req_ctx_t *ctx = ngx_http_get_module_ctx(r, ngx_http_switchyard_module);

    if (ctx == NULL || ctx->kind != SW_CTX_REQUEST)
        return NGX_DECLINED;
    if (sw_location_refuses(r, ctx, 1) ||
        (ctx->op_count &&
         sw_response_refused(r, &ctx->route, ctx->ops, ctx->op_count,
                             "answering 500"))) {
        ctx->op_count = 0; /* the 500 goes out without them */
        ctx->status = 0;
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    return NGX_DECLINED;
}

ngx_int_t sw_reselect(ngx_http_request_t *r, sw_req_ctx_t *ctx,
                      const char **exclude, size_t n, sy_target *t) {
    sy_request req = SY_REQUEST_INIT;
    sy_match *m = NULL;
    sy_error err;
    const char *id;

    if (ctx->snap == NULL ||
        sw_build_request(r, ctx, &ctx->orig_headers, &req) != NGX_OK ||
        sy_snapshot_match(ctx->snap, sw_worker.mctx, &req, &m) < 0 || m == NULL)
        return NGX_ERROR;
    id = sy_route_id(sy_match_route(m));
    if (ngx_strlen(id) != ctx->route.len ||
        ngx_strncmp(id, ctx->route.data, ctx->route.len) != 0)
        return NGX_ERROR;
    if (sw_select(m, exclude, n, t, &err))
        return err.code == SY_ENOINSTANCE ? NGX_DECLINED : NGX_ERROR;
    return NGX_OK;
}

/* Copies, in the request's pool, of the context's strings borrowed from
 * the snapshot (sw_borrow), before it is released. */
static ngx_int_t sw_unborrow(ngx_http_request_t *r, sw_req_ctx_t *ctx) {
    ngx_str_t *s[] = {&ctx->route, &ctx->service, &ctx->instance,
                      &ctx->version};

    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        if (s[i]->data &&
            sw_pstr(r, s[i], (const char *)s[i]->data, s[i]->len) != NGX_OK)
            return NGX_ERROR;
    return NGX_OK;
}

/* A request's context lives off its pool (the pool's second block was
 * full: the context, ~530 bytes, and the balancer's peer made nginx take a
 * third, a posix_memalign and a free a request): a free list per worker,
 * refilled by the pool's cleanup, which also releases the snapshot the
 * request kept. */
typedef struct sw_ctx_slot_s sw_ctx_slot_t;
struct sw_ctx_slot_s {
    sw_req_ctx_t ctx;
    sw_ctx_slot_t *next;
};
#define SW_CTX_FREE_MAX 1024
static sw_ctx_slot_t *sw_ctx_free;
static ngx_uint_t sw_ctx_free_count;

static void sw_ctx_put(void *data) {
    sw_ctx_slot_t *s = data;

    if (s->ctx.snap)
        sy_snapshot_release(s->ctx.snap);
    if (sw_ctx_free_count >= SW_CTX_FREE_MAX) {
        ngx_free(s);
        return;
    }
    s->next = sw_ctx_free;
    sw_ctx_free = s;
    sw_ctx_free_count++;
}

static sw_req_ctx_t *sw_ctx_get(ngx_http_request_t *r) {
    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(r->pool, 0);
    sw_ctx_slot_t *s;

    if (cln == NULL)
        return NULL;
    s = sw_ctx_free;
    if (s) {
        sw_ctx_free = s->next;
        sw_ctx_free_count--;
    } else if ((s = ngx_alloc(sizeof *s, r->connection->log)) == NULL) {
        return NULL; /* the cleanup has no handler: nothing runs */
    }
    /* (not the fields sw_route sets first, the target nor the peer: 330
     * bytes of the 650) */
    ngx_memzero(&s->ctx, offsetof(sw_req_ctx_t, orig_headers));
    s->ctx.target.health = NULL;
    cln->handler = sw_ctx_put;
    cln->data = s;
    return &s->ctx;
}

static ngx_int_t sw_phase_handler(ngx_http_request_t *r) {
    sw_loc_conf_t *lcf =
        ngx_http_get_module_loc_conf(r, ngx_http_switchyard_module);
    sw_req_ctx_t *ctx;

    if (r->internal)
        sw_policy_restore_method(r); /* a breaker's fallback */
    if (!lcf->enable || lcf->admin ||
        ngx_http_get_module_ctx(r, ngx_http_switchyard_module) != NULL)
        return NGX_DECLINED;
    if (sw_worker.router == NULL) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "switchyard: this worker has no routes (it could not "
                      "load them at its start, see the alert then)");
        return NGX_HTTP_SERVICE_UNAVAILABLE;
    }
    sw_worker_sync(r->connection->log);
    ctx = sw_ctx_get(r);
    if (ctx == NULL)
        return sw_500(r, "out of memory for the request's context");
    ctx->kind = SW_CTX_REQUEST;
    ngx_http_set_ctx(r, ctx, ngx_http_switchyard_module);

    sy_snapshot *snap = sy_router_acquire(sw_worker.router);
    ngx_int_t rc = sw_route(r, ctx, snap);
    if (rc == NGX_DECLINED && (ctx->target.health || ctx->permit.breaker)) {
        /* keep the snapshot for the outcome report (sw_log_handler) until
         * the context goes (sw_ctx_put): the context's strings borrowed
         * from it stay valid with it */
        ctx->snap = snap;
        return rc;
    }
    /* the snapshot goes now (as soon as the match is done with): what
     * the context borrowed from it is copied first */
    ngx_int_t crc = sw_unborrow(r, ctx);
    sy_snapshot_release(snap);
    if (crc != NGX_OK)
        return sw_500(r, "out of memory for the route's strings");
    if (rc == NGX_DONE) /* a forward: route, or an open breaker's fallback */
        return sw_policy_redirect(r, ctx);
    return rc;
}

/* Passive health: tell the library how the attempt to the chosen
 * instance went (consecutive failures eject it for a while). */
static ngx_int_t sw_log_handler(ngx_http_request_t *r) {
    sw_req_ctx_t *ctx = ngx_http_get_module_ctx(r, ngx_http_switchyard_module);
    ngx_http_upstream_state_t *st = NULL;
    sy_outcome outcome;
    int status;

    if (ctx == NULL || ctx->kind != SW_CTX_REQUEST || ctx->snap == NULL ||
        sw_worker.router == NULL)
        return NGX_OK;
    /* no breaker to tell, and the balancer reported every attempt */
    if (ctx->balanced && (!ctx->permit.breaker || ctx->breaker_recorded))
        return NGX_OK;
    if (r->upstream_states && r->upstream_states->nelts) {
        st = r->upstream_states->elts;
        st = &st[r->upstream_states->nelts - 1];
    }
    status = st ? (int)st->status : (int)r->headers_out.status;
    if (st && st->connect_time == (ngx_msec_t)-1)
        outcome = st->status == NGX_HTTP_GATEWAY_TIME_OUT
                      ? SY_OUTCOME_TIMEOUT
                      : SY_OUTCOME_CONNECT_FAILURE;
    else if (status == NGX_HTTP_GATEWAY_TIME_OUT)
        outcome = SY_OUTCOME_TIMEOUT;
    else if (status >= 500 || status == 0)
        outcome = SY_OUTCOME_5XX;
    else
        outcome = SY_OUTCOME_SUCCESS;
    /* the breaker counts the request's call once, whatever the tries */
    sw_policy_record(r, ctx, outcome, status);
    /* passive health: the balancer reported every attempt already */
    if (ctx->balanced || ctx->target.health == NULL || st == NULL)
        return NGX_OK;
    sy_router_report_outcome(sw_worker.router, &ctx->target, outcome);
    sw_health_report(r->connection->log, (char *)ctx->service.data,
                     (char *)ctx->instance.data, outcome);
    return NGX_OK;
}

/* ---- response filters ---- */

static ngx_int_t sw_header_filter(ngx_http_request_t *r) {
    sw_loc_conf_t *lcf =
        ngx_http_get_module_loc_conf(r, ngx_http_switchyard_module);
    sw_req_ctx_t *ctx = ngx_http_get_module_ctx(r, ngx_http_switchyard_module);

    if (lcf->admin || r != r->main)
        return sw_next_header_filter(r);
    /* the proxied or 413/431 route's (a no://op's are applied already);
     * those kept over a forward or fallback only on the module's own
     * answer */
    if (ctx && ctx->kind != SW_CTX_REQUEST)
        ctx = NULL;
    if (ctx && (ctx->upstream.data || ctx->respond) &&
        (ctx->op_count || ctx->status) && sw_response_ops(r, ctx) != NGX_OK)
        return NGX_ERROR;
    if (sw_kept_live && sw_response_ops_kept(r, ctx) != NGX_OK)
        return NGX_ERROR;
    return sw_next_header_filter(r);
}

/* ---- installing the phase handlers and the header filter ---- */

ngx_int_t sw_postconfiguration(ngx_conf_t *cf) {
    sw_main_conf_t *mcf =
        ngx_http_conf_get_module_main_conf(cf, ngx_http_switchyard_module);
    ngx_http_core_main_conf_t *cmcf =
        ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
    ngx_http_handler_pt *h;
    static ngx_str_t name = ngx_string("switchyard");

    sw_location_unwrap(NULL); /* the http block is read */
    if (!mcf->used)
        return NGX_OK;
    /* every location merged: what each switchyard location sends */
    if (sw_location_check(cf, mcf) != NGX_OK)
        return NGX_ERROR;
    /* which location serves which route is not known at load: one
     * variable-form proxy_pass makes the whole configuration refuse what
     * that form cannot run (sw_router_create); a log_format or add_header
     * reading $switchyard_upstream does not */
    mcf->variable_form = sw_location_variable_form(mcf);
    mcf->host_runs = sw_host_runs(cf, mcf);
    if (mcf->host_runs == NULL)
        return NGX_ERROR;
    if (sw_check_files(cf, mcf) != NGX_OK)
        return NGX_ERROR;
    mcf->zone = ngx_shared_memory_add(cf, &name, mcf->zone_size,
                                      &ngx_http_switchyard_module);
    if (mcf->zone == NULL)
        return NGX_ERROR;
    if (mcf->zone->data == NULL) {
        mcf->zone->data = ngx_pcalloc(cf->pool, sizeof(sw_zone_ctx_t));
        if (mcf->zone->data == NULL)
            return NGX_ERROR;
    }
    ((sw_zone_ctx_t *)mcf->zone->data)->mcf = mcf;
    mcf->zone->init = sw_zone_init;

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_REWRITE_PHASE].handlers);
    if (h == NULL)
        return NGX_ERROR;
    *h = sw_phase_handler;
    h = ngx_array_push(&cmcf->phases[NGX_HTTP_PRECONTENT_PHASE].handlers);
    if (h == NULL)
        return NGX_ERROR;
    *h = sw_precontent_handler;
    h = ngx_array_push(&cmcf->phases[NGX_HTTP_LOG_PHASE].handlers);
    if (h == NULL)
        return NGX_ERROR;
    *h = sw_log_handler;

    sw_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = sw_header_filter;
    return NGX_OK;
}
