/*
 * ngx_http_switchyard_policy.c - the library's policies run by the module
 * (docs/policies.md, docs/nginx.md): RequestRateLimiter against the
 * policy store in the zone (one bucket per key for every worker),
 * CircuitBreaker (an open breaker goes to its fallbackUri by an internal
 * redirect, or answers 503; every permitted call is recorded; a status
 * in its statusCodes goes to the fallback too), and Retry mapped onto the
 * balancer's tries (its exceptions become the request's
 * proxy_next_upstream, its retries the tries, its timeout
 * proxy_next_upstream_timeout; every answered status is looked at by the
 * wrapped header parser, which hands one Retry lists to nginx's next
 * upstream while a try is left). Retry's backoff is refused by the host
 * list ("!Retry.backoff"): nginx's tries follow one another at once.
 */
#include "ngx_http_switchyard.h"

#include <string.h>

/* The X-RateLimit-* headers of a limiter's answer, on the response. */
static ngx_int_t sw_ratelimit_headers(ngx_http_request_t *r,
                                      const sy_ratelimit *rl) {
    sy_header hs[4];
    u_char *buf = ngx_pnalloc(r->pool, 128);
    size_t n;

    if (buf == NULL)
        return NGX_ERROR;
    n = sy_ratelimit_headers(rl, hs, (char *)buf, 128);
    for (size_t i = 0; i < n; i++) {
        ngx_table_elt_t *h = ngx_list_push(&r->headers_out.headers);
        if (h == NULL)
            return NGX_ERROR;
        h->hash = 1;
        h->key.data = (u_char *)hs[i].name.ptr; /* static */
        h->key.len = hs[i].name.len;
        h->value.data = (u_char *)hs[i].value.ptr; /* in buf */
        h->value.len = hs[i].value.len;
        h->lowcase_key = NULL;
    }
    return NGX_OK;
}

/* Retry: the request's next-upstream conditions and tries. The
 * exceptions are nginx's error and timeout conditions; statuses are
 * decided per answer by sw_process_header, which reports one to retry as
 * an invalid header (nginx's condition for the next try, set there for
 * that try only: an answer nginx itself finds invalid is not retried). */
static void sw_retry_map(ngx_http_request_t *r, sw_req_ctx_t *ctx,
                         const sy_retry_policy *rp) {
    sy_str method = {(char *)r->method_name.data, r->method_name.len};
    sy_retry_info info;
    ngx_uint_t flags = 0;
    uint32_t delay;

    sy_retry_policy_info(rp, &info);
    if (sy_retry_next(rp, 0, method, SY_OUTCOME_CONNECT_FAILURE, 0, 0, 0,
                      &delay))
        flags |= NGX_HTTP_UPSTREAM_FT_ERROR;
    if (sy_retry_next(rp, 0, method, SY_OUTCOME_TIMEOUT, 0, 0, 0, &delay))
        flags |= NGX_HTTP_UPSTREAM_FT_TIMEOUT;
    /* every decision is the method's (sy_retry_next); nginx retries POST,
     * LOCK and PATCH only when told */
    if (r->method & (NGX_HTTP_POST | NGX_HTTP_LOCK | NGX_HTTP_PATCH))
        flags |= NGX_HTTP_UPSTREAM_FT_NON_IDEMPOTENT;
    ctx->retry = 1;
    ctx->rp = rp;
    ctx->retry_timeout = info.timeout_ms > 0 ? (ngx_msec_t)info.timeout_ms : 0;
    ctx->next_upstream = flags ? flags : NGX_HTTP_UPSTREAM_FT_OFF;
    ctx->tries = info.retries + 1;
}

/* Go to an open breaker's fallback (forward:/path) by an internal
 * redirect; the caller has released the match. */
static ngx_int_t sw_fallback(ngx_http_request_t *r, ngx_str_t *to) {
    ngx_str_t uri = *to, args = ngx_null_string;
    u_char *q = ngx_strlchr(uri.data, uri.data + uri.len, '?');

    if (q) {
        args.data = q + 1;
        args.len = uri.data + uri.len - args.data;
        uri.len = q - uri.data;
    }
    (void)ngx_http_internal_redirect(r, &uri, &args);
    ngx_http_finalize_request(r, NGX_DONE);
    return NGX_DONE;
}

ngx_int_t sw_policy_phase(ngx_http_request_t *r, sw_req_ctx_t *ctx, sy_match *m,
                          bool *none) {
    sy_error err;
    size_t limiters = sy_match_ratelimit_count(m);

    if (limiters) {
        sy_ratelimit rl;
        if (sy_match_ratelimit(m, ctx->now_ms, &rl, &err)) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "switchyard: route \"%V\": rate limiter: %s",
                          &ctx->route, err.message);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        if (rl.limited && rl.headers && sw_ratelimit_headers(r, &rl) != NGX_OK)
            return sw_500(r, "out of memory for the X-RateLimit headers");
        if (rl.limited && !rl.allowed)
            return rl.status;
    }
    if (sy_match_breaker_acquire(m, ctx->now_ms, &ctx->permit, &err)) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "switchyard: route \"%V\": circuit breaker: %s",
                      &ctx->route, err.message);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (ctx->permit.breaker && !ctx->permit.permitted) {
        if (ctx->permit.fallback == NULL)
            return NGX_HTTP_SERVICE_UNAVAILABLE;
        size_t fl = ngx_strlen(ctx->permit.fallback);
        ctx->fallback.data = ngx_pnalloc(r->pool, fl);
        if (ctx->fallback.data == NULL)
            return sw_500(r, "out of memory for a fallback");
        ngx_memcpy(ctx->fallback.data, ctx->permit.fallback, fl);
        ctx->fallback.len = fl;
        ctx->permit.breaker = 0; /* not permitted: nothing to record */
        return NGX_DONE;         /* sw_policy_redirect, once released */
    }
    if (ctx->permit.breaker)
        ctx->needs_balancer = 1; /* its time limit */
    const sy_retry_policy *rp = sy_match_retry_policy(m);
    if (rp) {
        sw_retry_map(r, ctx, rp);
        ctx->needs_balancer = 1;
    }
    *none = limiters == 0 && !ctx->permit.breaker && rp == NULL;
    return NGX_DECLINED;
}

ngx_int_t sw_policy_redirect(ngx_http_request_t *r, sw_req_ctx_t *ctx) {
    ngx_str_t to = ctx->fallback;
    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "switchyard: route \"%V\": forward to \"%V\"", &ctx->route,
                  &to);
    return sw_fallback(r, &to);
}

void sw_policy_conf(sw_req_ctx_t *ctx, ngx_http_upstream_conf_t *conf,
                    ngx_peer_connection_t *pc) {
    if (ctx->retry) {
        conf->next_upstream = ctx->next_upstream;
        conf->next_upstream_tries = ctx->tries;
        if (ctx->retry_timeout &&
            (conf->next_upstream_timeout == 0 ||
             conf->next_upstream_timeout > ctx->retry_timeout))
            conf->next_upstream_timeout = ctx->retry_timeout;
        pc->tries = ctx->tries;
    }
    if (ctx->permit.breaker && ctx->permit.timeout_ms) {
        ngx_msec_t t = ctx->permit.timeout_ms;
        if (conf->read_timeout > t)
            conf->read_timeout = t;
        if (conf->connect_timeout > t)
            conf->connect_timeout = t;
        if (conf->send_timeout > t)
            conf->send_timeout = t;
    }
}

sy_breaker_verdict sw_policy_record(ngx_http_request_t *r, sw_req_ctx_t *ctx,
                                    sy_outcome outcome, int status) {
    ngx_time_t *tp;
    int64_t now;

    if (!ctx->permit.breaker || ctx->breaker_recorded)
        return SY_BREAKER_PASS;
    ctx->breaker_recorded = 1;
    tp = ngx_timeofday();
    now = (int64_t)tp->sec * 1000 + tp->msec;
    (void)r;
    return sy_breaker_record(
        &ctx->permit, outcome, status,
        (uint64_t)(now > ctx->now_ms ? now - ctx->now_ms : 0), now);
}

/* ---- a failed call's fallback ----
 * A permitted call that fails without an answer (refused, reset, timed
 * out: nginx answers 502 or 504 itself) goes to the breaker's fallback as
 * SCG's does. The upstream's finalize hook records the call; on the
 * breaker's FALLBACK verdict the request gets, for its remaining life in
 * this location, a copy of the location's settings whose error_page sends
 * 502, 503 and 504 to the fallback path: nginx's own error_page machinery
 * then redirects internally, and the redirected request finds its
 * location again. error_page makes the request a GET; the client's method
 * is kept in a pool cleanup entry (it survives the redirect, the module
 * context does not) and given back by the phase handler of the
 * redirected request, so that the fallback gets the method as SCG's
 * forward does. A status in the breaker's statusCodes takes the same way:
 * the wrapped header parser reports it as an invalid header with nginx's
 * next try turned off, nginx answers 502, error_page redirects. */

typedef struct {
    ngx_uint_t method;
    ngx_str_t method_name;
    unsigned active : 1;
} sw_method_keep_t;

static void sw_method_keep_cleanup(void *data) {
    (void)data; /* only a marker in the pool's cleanup list */
}

static ngx_int_t sw_method_keep(ngx_http_request_t *r) {
    sw_method_keep_t *k;

    if (r->method == NGX_HTTP_GET || r->method == NGX_HTTP_HEAD)
        return NGX_OK; /* error_page keeps these */
    k = sw_keep_add(r, sw_method_keep_cleanup, sizeof *k);
    if (k == NULL)
        return NGX_ERROR;
    k->method = r->method;
    k->method_name = r->method_name;
    k->active = 1;
    return NGX_OK;
}

void sw_policy_restore_method(ngx_http_request_t *r) {
    for (ngx_pool_cleanup_t *c = r->pool->cleanup; c; c = c->next) {
        sw_method_keep_t *k = c->data;
        if (c->handler != sw_method_keep_cleanup || !k->active)
            continue;
        k->active = 0;
        if (r->method == NGX_HTTP_GET) {
            r->method = k->method;
            r->method_name = k->method_name;
        }
        return;
    }
}

/* A breaker's fallback by nginx's error_page: a copy of the location's
 * settings whose error pages for 502, 503 and 504 go to the fallback; the
 * route's response operations are kept for the fallback's answer. */
static ngx_int_t sw_fallback_error_pages(ngx_http_request_t *r,
                                         sw_req_ctx_t *ctx,
                                         const char *fallback) {
    static const ngx_int_t codes[] = {NGX_HTTP_BAD_GATEWAY,
                                      NGX_HTTP_SERVICE_UNAVAILABLE,
                                      NGX_HTTP_GATEWAY_TIME_OUT};
    ngx_http_core_loc_conf_t *clcf;
    void **lc = ngx_palloc(r->pool, ngx_http_max_module * sizeof(void *));
    ngx_array_t *pages =
        ngx_array_create(r->pool, 3, sizeof(ngx_http_err_page_t));
    size_t fl = ngx_strlen(fallback);
    u_char *uri = ngx_pnalloc(r->pool, fl), *q;

    clcf = ngx_palloc(r->pool, sizeof *clcf);
    if (lc == NULL || pages == NULL || uri == NULL || clcf == NULL)
        return NGX_ERROR;
    ngx_memcpy(uri, fallback, fl);
    ngx_memcpy(lc, r->loc_conf, ngx_http_max_module * sizeof(void *));
    *clcf = *(ngx_http_core_loc_conf_t *)
                 r->loc_conf[ngx_http_core_module.ctx_index];
    for (size_t i = 0; i < sizeof codes / sizeof *codes; i++) {
        ngx_http_err_page_t *ep = ngx_array_push(pages);
        if (ep == NULL)
            return NGX_ERROR;
        ngx_memzero(ep, sizeof *ep);
        ep->status = codes[i];
        ep->overwrite = 0; /* the fallback's own status */
        q = ngx_strlchr(uri, uri + fl, '?');
        ep->value.value.data = uri;
        ep->value.value.len = q ? (size_t)(q - uri) : fl;
        if (q) {
            ep->args.data = q + 1;
            ep->args.len = uri + fl - q - 1;
        }
    }
    clcf->error_pages = pages;
    lc[ngx_http_core_module.ctx_index] = clcf;
    r->loc_conf = lc;
    r->error_page = 0;
    if (sw_response_ops_keep(r, ctx) != NGX_OK)
        return NGX_ERROR;
    return sw_method_keep(r);
}

static void sw_policy_finalize(ngx_http_request_t *r, ngx_int_t rc) {
    sw_req_ctx_t *ctx = ngx_http_get_module_ctx(r, ngx_http_switchyard_module);
    ngx_http_upstream_t *u = r->upstream;

    /* (the hook is set only on a request with its context) */
    ctx->finalize(r, rc);
    if (!ctx->permit.breaker || ctx->breaker_recorded || u->header_sent ||
        (rc != NGX_HTTP_BAD_GATEWAY && rc != NGX_HTTP_GATEWAY_TIME_OUT &&
         rc != NGX_HTTP_SERVICE_UNAVAILABLE))
        return;
    sy_outcome outcome = rc == NGX_HTTP_GATEWAY_TIME_OUT
                             ? SY_OUTCOME_TIMEOUT
                             : SY_OUTCOME_CONNECT_FAILURE;
    if (sw_policy_record(r, ctx, outcome, 0) == SY_BREAKER_FALLBACK &&
        ctx->permit.fallback &&
        sw_fallback_error_pages(r, ctx, ctx->permit.fallback) != NGX_OK)
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "switchyard: route \"%V\": out of memory for the "
                      "breaker's fallback",
                      &ctx->route);
}

/* Retry on an answered status: while a try is left (and nginx's own
 * limits allow the next), a status Retry lists for this method. */
static bool sw_retry_status(ngx_http_request_t *r, sw_req_ctx_t *ctx,
                            ngx_http_upstream_t *u, int status) {
    sy_str method = {(char *)r->method_name.data, r->method_name.len};
    ngx_msec_t timeout = u->conf->next_upstream_timeout;
    uint32_t delay;

    if (ctx->rp == NULL || u->peer.tries <= 1 || r->connection->error ||
        (u->request_sent && r->request_body_no_buffering) ||
        (timeout && ngx_current_msec - u->peer.start_time >= timeout))
        return false;
    if (!sy_retry_next(ctx->rp, (uint32_t)(ctx->tries - u->peer.tries), method,
                       status >= 500 ? SY_OUTCOME_5XX : SY_OUTCOME_SUCCESS,
                       status, 0, 0, &delay))
        return false;
    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "switchyard: route \"%V\": status %d retried (Retry)",
                  &ctx->route, status);
    return true;
}

static ngx_int_t sw_process_header(ngx_http_request_t *r) {
    sw_req_ctx_t *ctx = ngx_http_get_module_ctx(r, ngx_http_switchyard_module);
    ngx_http_upstream_t *u = r->upstream;
    ngx_int_t rc = ctx->process_header(r);
    int status;

    /* the proxy moves from its status line parser to its header parser */
    if (u->process_header != sw_process_header) {
        ctx->process_header = u->process_header;
        u->process_header = sw_process_header;
    }
    if (rc != NGX_OK)
        return rc;
    status = (int)u->headers_in.status_n;
    ctx->answered = 1;
    if (sw_retry_status(r, ctx, u, status)) {
        u->conf->next_upstream |= NGX_HTTP_UPSTREAM_FT_INVALID_HEADER;
        return NGX_HTTP_UPSTREAM_INVALID_HEADER;
    }
    if (!ctx->permit.breaker || ctx->breaker_recorded ||
        sw_policy_record(r, ctx,
                         status >= 500 ? SY_OUTCOME_5XX : SY_OUTCOME_SUCCESS,
                         status) != SY_BREAKER_FALLBACK ||
        ctx->permit.fallback == NULL)
        return NGX_OK;
    if (sw_fallback_error_pages(r, ctx, ctx->permit.fallback) != NGX_OK) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "switchyard: route \"%V\": out of memory for the "
                      "breaker's fallback: status %d passed on",
                      &ctx->route, status);
        return NGX_OK;
    }
    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "switchyard: route \"%V\": status %d is a failure of "
                  "breaker \"%s\": forward to \"%s\"",
                  &ctx->route, status, ctx->permit.name ? ctx->permit.name : "",
                  ctx->permit.fallback);
    /* nginx answers 502 without a next try; error_page goes on */
    u->conf->next_upstream &= ~NGX_HTTP_UPSTREAM_FT_INVALID_HEADER;
    return NGX_HTTP_UPSTREAM_INVALID_HEADER;
}

/* A next try starts the proxy's parser again: wrap it again. */
static ngx_int_t sw_reinit_request(ngx_http_request_t *r) {
    sw_req_ctx_t *ctx = ngx_http_get_module_ctx(r, ngx_http_switchyard_module);
    ngx_http_upstream_t *u = r->upstream;
    ngx_int_t rc = ctx->reinit_request(r);

    ctx->answered = 0;
    u->conf->next_upstream &= ~NGX_HTTP_UPSTREAM_FT_INVALID_HEADER;
    if (u->process_header != sw_process_header) {
        ctx->process_header = u->process_header;
        u->process_header = sw_process_header;
    }
    return rc;
}

void sw_policy_hook(ngx_http_request_t *r, sw_req_ctx_t *ctx) {
    ngx_http_upstream_t *u = r->upstream;

    if (!ctx->permit.breaker && !ctx->retry)
        return;
    if (u->process_header && u->process_header != sw_process_header) {
        ctx->process_header = u->process_header;
        u->process_header = sw_process_header;
    }
    if (u->reinit_request && u->reinit_request != sw_reinit_request) {
        ctx->reinit_request = u->reinit_request;
        u->reinit_request = sw_reinit_request;
    }
    if (!ctx->permit.breaker || ctx->permit.fallback == NULL ||
        u->finalize_request == sw_policy_finalize)
        return;
    ctx->finalize = u->finalize_request;
    u->finalize_request = sw_policy_finalize;
}
