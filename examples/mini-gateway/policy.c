/*
 * policy.c - the mini-gateway runs the library's route policies
 * (docs/policies.md): the library holds their semantics and state, the
 * gateway does the I/O around them.
 *
 *   RequestRateLimiter  local buckets (sy_match_ratelimit) by default; with
 *                       --redis, SCG's script and keys in Redis (redis.c),
 *                       one limiter after the other; a failed or late Redis
 *                       call allows the request with X-RateLimit-Remaining
 *                       -1 (SCG's fail open). Denied: the limiter's status
 *                       (429) and the four X-RateLimit-* headers, no body.
 *   CircuitBreaker      a permit per request before the upstream call
 *                       (sy_match_breaker_acquire); the call's time limit
 *                       caps the connect and response timeouts; the
 *                       outcome (response status, connect failure,
 *                       timeout) is recorded once, after any retries; a
 *                       refused or failed call goes to fallbackUri
 *                       (re-dispatched, forward.c) or is answered 503
 *                       (open), 504 (time limit) or 502.
 *   Retry               after each failed attempt sy_retry_next says
 *                       whether and when to try again; the gateway waits
 *                       the backoff on a libuv timer and targets again,
 *                       excluding the instances tried (all of them again
 *                       when none is left). A request body is kept up to
 *                       --retry-body-bytes for the new attempt; a longer
 *                       one is not retried nor sent to a breaker's
 *                       fallback (logged, counted: not_replayed).
 *
 * The gateway declares what it runs (sy_host_profile("gateway") as
 * sy_router_options.host_runs, config.c): a document using any other
 * host-run item is refused by the library with a located error.
 */
#define _GNU_SOURCE /* memmem */
#include "proxy.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static uint64_t now_ms(void) {
    return gw_now_ns() / 1000000u;
}

/* The worker loop's time (uv_now: gw_now_ns's clock, in milliseconds, read
 * when the loop last woke), no clock read: where a request's policy needs
 * "now" while the loop handles its events (a VM's clock read costs ~50 ns,
 * what the limiter's whole check costs). Never later than now_ms(). */
static uint64_t loop_ms(const gw_request *q) {
    return uv_now(&q->w->loop);
}

/* ms from `since` (now_ms or loop_ms) to `now`, 0 when the loop's time was
 * the later one (a coarse loop clock) */
static uint64_t ms_since(uint64_t now, uint64_t since) {
    return now > since ? now - since : 0;
}

/* The limiter's "now" (epoch ms): the loop's time plus the wall clock's
 * offset from it, read again when the loop's time has moved a second on
 * (a stepped wall clock shows within a second; the workers' buckets see
 * one clock within a millisecond or so). */
static int64_t limiter_now(const gw_request *q) {
    static _Thread_local int64_t off;
    static _Thread_local uint64_t at;
    uint64_t t = loop_ms(q);
    if (!at || t - at >= 1000u) {
        off = gw_wall_ms() - (int64_t)t;
        at = t ? t : 1;
    }
    return (int64_t)t + off;
}

/* ------------------------------------------------------------------ */
/* Rate limits                                                          */
/* ------------------------------------------------------------------ */

/* The limiters' calls to Redis of one request, made one after the other. */
typedef struct gw_rlwait {
    gw_request *q;
    gw_rcall *call;    /* the one in flight */
    sy_match_ctx *ctx; /* the match context holding m (parked), or NULL */
    sy_match *m;       /* the request's match, valid while ctx is held */
    size_t i, n;
    struct gw_rlwait *next_free;
    sy_redis_call calls[]; /* filled by the library (no need to clear) */
} gw_rlwait;

/* Blocks of one limiter's call (the common case) kept by the worker thread
 * for its next Redis-limited requests: ~2 KB (the two key texts), past
 * malloc's per-thread cache, so a calloc a request went through malloc's
 * bins and cleared all of it. At most RLW_KEEP are kept. */
#define RLW_KEEP 64
static _Thread_local gw_rlwait *rlw_free;
static _Thread_local unsigned rlw_nfree;

static gw_rlwait *rlwait_get(size_t n) {
    gw_rlwait *rw = n == 1 ? rlw_free : NULL;
    if (rw) {
        rlw_free = rw->next_free;
        rlw_nfree--;
    } else {
        rw = malloc(sizeof *rw + n * sizeof(sy_redis_call));
    }
    if (rw)
        memset(rw, 0, sizeof *rw);
    return rw;
}

static void rlwait_put(gw_rlwait *rw) {
    if (!rw)
        return;
    if (rw->n != 1 || rlw_nfree >= RLW_KEEP) {
        free(rw);
        return;
    }
    rw->next_free = rlw_free;
    rlw_free = rw;
    rlw_nfree++;
}

/* Match contexts for requests waiting for Redis. The request's match lives
 * in the worker's context, which the requests matched while the call is
 * in flight would overwrite: a request that parks takes that context with
 * it (its match stays valid: same snapshot, held by the request) and the
 * worker matches on a spare one meanwhile, so the request goes on after
 * the reply without matching again (gw_request_rematch, ~900 instructions).
 * Spare contexts are kept by the worker thread, at most CTX_KEEP; each
 * grows to the snapshots it sees, as the worker's own does. */
#define CTX_KEEP 64
static _Thread_local sy_match_ctx *ctx_free[CTX_KEEP];
static _Thread_local unsigned ctx_nfree;

static void ctx_put(sy_match_ctx *c) {
    if (!c)
        return;
    if (ctx_nfree < CTX_KEEP)
        ctx_free[ctx_nfree++] = c;
    else
        sy_match_ctx_free(c);
}

/* rw's request parks with m (from the worker's context); without a spare
 * context (out of memory) it matches again after the reply. */
static void park_match(gw_rlwait *rw, sy_match *m) {
    gw_worker *w = rw->q->w;
    sy_match_ctx *spare = ctx_nfree ? ctx_free[--ctx_nfree] : NULL;
    if (!spare && sy_match_ctx_new(NULL, &spare, NULL))
        return;
    rw->ctx = w->ctx;
    rw->m = m;
    w->ctx = spare;
}

void gw_policy_blocks_free(void) {
    while (rlw_free) {
        gw_rlwait *rw = rlw_free;
        rlw_free = rw->next_free;
        free(rw);
    }
    rlw_nfree = 0;
    while (ctx_nfree)
        sy_match_ctx_free(ctx_free[--ctx_nfree]);
}

static void breaker_step(gw_request *q, sy_match *m);

/* The X-RateLimit-* lines of the last limiter values this thread wrote,
 * as one text: "X-RateLimit-Remaining: N\r\n" and the other three lines.
 * Those three are the limiter's configuration, formatted once for a
 * (rate, capacity, requested); Remaining's digits are formatted again
 * only when the number moved by more than its last digit can show (a
 * bucket's next request answers one less, a refill a few more or the same
 * again), so the usual request edits one byte and copies one text. The
 * names and the order are sy_ratelimit_headers'. */
typedef struct rl_lines {
    bool set, rem_set;
    uint32_t rate, burst, requested;
    int64_t rem;      /* the Remaining whose digits `all` holds */
    size_t first_len; /* "X-RateLimit-Remaining: " */
    size_t tail_len;  /* the other three lines, "Name: v\r\n" each */
    size_t len;       /* of `all` (rem_set) */
    uint64_t bits;    /* the four names' gw_name_bits (0: two are one) */
    char first[48];
    char tail[160];
    char all[48 + 24 + 160]; /* first, digits, "\r\n", tail */
} rl_lines;
static _Thread_local rl_lines rl_cache;

static __attribute__((noinline)) bool rl_lines_fill(const sy_ratelimit *rl) {
    rl_lines *c = &rl_cache;
    c->set = c->rem_set = false;
    sy_header h[4];
    char buf[160];
    if (sy_ratelimit_headers(rl, h, buf, sizeof buf) != 4 ||
        h[0].name.len + 2 > sizeof c->first)
        return false;
    size_t at = 0;
    uint64_t bits = gw_name_bit(h[0].name.ptr, h[0].name.len);
    bool apart = true;
    for (size_t i = 1; i < 4; i++) {
        uint64_t bit = gw_name_bit(h[i].name.ptr, h[i].name.len);
        apart = apart && !(bits & bit);
        bits |= bit;
        size_t n = h[i].name.len + h[i].value.len + 4;
        if (at + n > sizeof c->tail)
            return false;
        memcpy(c->tail + at, h[i].name.ptr, h[i].name.len);
        at += h[i].name.len;
        memcpy(c->tail + at, ": ", 2);
        memcpy(c->tail + at + 2, h[i].value.ptr, h[i].value.len);
        at += 2 + h[i].value.len;
        memcpy(c->tail + at, "\r\n", 2);
        at += 2;
    }
    memcpy(c->first, h[0].name.ptr, h[0].name.len);
    memcpy(c->first + h[0].name.len, ": ", 2);
    c->first_len = h[0].name.len + 2;
    c->tail_len = at;
    c->bits = apart ? bits : 0;
    c->rate = rl->replenish_rate;
    c->burst = rl->burst_capacity;
    c->requested = rl->requested_tokens;
    c->set = true;
    return true;
}

/* The four lines for rl's values in rl_cache.all (rl_cache.len bytes), or
 * false when they do not fit. */
static inline bool rl_lines_for(const sy_ratelimit *rl) {
    rl_lines *c = &rl_cache;
    if (!(c->set && c->rate == rl->replenish_rate &&
          c->burst == rl->burst_capacity &&
          c->requested == rl->requested_tokens) &&
        !rl_lines_fill(rl))
        return false;
    if (c->rem_set) {
        /* the usual request: the number as the last one, or a few more or
         * fewer (a bucket's next request, a refill): its last digit moved
         * in place when no other digit changes */
        int64_t d = rl->remaining - c->rem;
        char *last = c->all + c->len - c->tail_len - 3;
        if (d >= -9 && d <= 9 && rl->remaining >= 0 && c->rem >= 0 &&
            *last + d >= '0' && *last + d <= '9') {
            *last = (char)(*last + d);
            c->rem = rl->remaining;
            return true;
        }
    }
    char *p = c->all;
    memcpy(p, c->first, c->first_len);
    p += c->first_len;
    if (rl->remaining < 0)
        *p++ = '-';
    p += gw_u64_text(p, rl->remaining < 0 ? 0u - (uint64_t)rl->remaining
                                          : (uint64_t)rl->remaining);
    memcpy(p, "\r\n", 2);
    memcpy(p + 2, c->tail, c->tail_len);
    c->len = (size_t)(p + 2 + c->tail_len - c->all);
    c->rem = rl->remaining;
    c->rem_set = true;
    return true;
}

/* A limiter's decision: its X-RateLimit-* headers go with the response
 * (allowed: true), or with the denial answer, in *deny (false). Nothing
 * is answered here: the caller answers once it let go of what it holds. */
static bool ratelimit_decided(gw_request *q, const sy_ratelimit *rl,
                              gw_buf *deny, int *status) {
    if (!rl->limited)
        return true;
    gw_buf *out = rl->allowed ? &q->xhdrs : deny;
    if (rl->headers && rl_lines_for(rl)) { /* per limited request */
        size_t from = out->len;
        gw_buf_add(out, rl_cache.all, rl_cache.len);
        if (!out->failed && out == &q->xhdrs && rl_cache.bits)
            gw_xhdrs_noted(q, from, rl_cache.bits);
    }
    if (!rl->allowed) {
        gw_metrics_policy(&q->w->metrics, q->route_id, GW_POLICY_LIMITED);
        q->rate_limited = true; /* for the access log */
        *status = rl->status;
        return false;
    }
    if (rl->remaining < 0)
        gw_metrics_policy(&q->w->metrics, q->route_id, GW_POLICY_FAILED_OPEN);
    return true;
}

static void deny(gw_request *q, int status, gw_buf *hdrs) {
    if (hdrs->failed)
        gw_request_respond(q, 500, NULL, NULL);
    else
        gw_request_respond(q, status, hdrs->p, NULL);
    gw_buf_free(hdrs);
}

static void on_redis(void *data, bool ok, int64_t allowed, int64_t left,
                     size_t draw);

typedef enum { RL_WAIT, RL_ALLOWED, RL_DENIED } rl_state;

/* Run the Redis calls from rw->i on, one after the other. RL_WAIT: one
 * is in flight (on_redis goes on); RL_DENIED: *hdrs and *status say how
 * to answer. */
static rl_state redis_next(gw_rlwait *rw, gw_buf *hdrs, int *status) {
    gw_request *q = rw->q;
    for (; rw->i < rw->n; rw->i++) {
        sy_redis_call *c = &rw->calls[rw->i];
        sy_ratelimit rl;
        if (c->needed) {
            const char *keys[2] = {c->tokens_key, c->timestamp_key};
            const char *args[4] = {c->rate, c->capacity, "", c->requested};
            atomic_fetch_add(&q->w->metrics.redis_calls, 1);
            rw->call = gw_redis_script(q->w, keys, args, on_redis, rw);
            if (rw->call)
                return RL_WAIT;
            sy_ratelimit_redis_result(c, false, 0, 0, &rl); /* fail open */
        } else {
            rl = c->decided;
        }
        if (!ratelimit_decided(q, &rl, hdrs, status))
            return RL_DENIED;
    }
    return RL_ALLOWED;
}

static void rlwait_end(gw_request *q) {
    gw_rlwait *rw = q->rlw;
    q->rlw = NULL;
    if (rw) {
        gw_redis_cancel(rw->call);
        ctx_put(rw->ctx);
        rw->ctx = NULL;
    }
    rlwait_put(rw);
}

static void on_redis(void *data, bool ok, int64_t allowed, int64_t left,
                     size_t draw) {
    gw_rlwait *rw = data;
    gw_request *q = rw->q;
    rw->call = NULL;
    sy_ratelimit rl;
    sy_ratelimit_redis_batch_result(&rw->calls[rw->i], ok, allowed, left, draw,
                                    &rl);
    gw_buf hdrs = {0};
    int status = 0;
    rl_state st = RL_DENIED;
    if (ratelimit_decided(q, &rl, &hdrs, &status)) {
        rw->i++;
        st = redis_next(rw, &hdrs, &status);
        if (st == RL_WAIT)
            return;
    }
    /* the match parked with the request, or (no spare context) match
     * again: same snapshot, same request, same route */
    sy_match_ctx *held = rw->ctx;
    sy_match *m = rw->m;
    rw->ctx = NULL;
    rlwait_end(q);
    if (st == RL_DENIED) {
        ctx_put(held);
        deny(q, status, &hdrs);
        return;
    }
    if (!held && gw_request_rematch(q, &m)) {
        gw_request_respond(q, 502, NULL, NULL);
        return;
    }
    breaker_step(q, m); /* done with m when it returns */
    ctx_put(held);
}

void gw_policy_begin(gw_request *q, sy_match *m) {
    size_t n = sy_match_ratelimit_count(m);
    if (!n) {
        breaker_step(q, m);
        return;
    }
    sy_error err;
    gw_buf hdrs = {0};
    int status = 0;
    if (!G.cfg.redis) {
        sy_ratelimit rl;
        if (sy_match_ratelimit(m, limiter_now(q), &rl, &err)) {
            gw_request_respond(q, 500, NULL, NULL);
            return;
        }
        if (ratelimit_decided(q, &rl, &hdrs, &status))
            breaker_step(q, m);
        else
            deny(q, status, &hdrs);
        return;
    }
    gw_rlwait *rw = rlwait_get(n);
    if (!rw) {
        gw_request_respond(q, 500, NULL, NULL);
        return;
    }
    rw->q = q;
    rw->n = n;
    for (size_t i = 0; i < n; i++)
        if (sy_match_ratelimit_redis(m, i, &rw->calls[i], &err)) {
            rlwait_put(rw);
            gw_request_respond(q, 500, NULL, NULL);
            return;
        }
    q->rlw = rw;
    rl_state st = redis_next(rw, &hdrs, &status);
    if (st == RL_WAIT) {
        park_match(rw, m);
        return; /* on_redis goes on */
    }
    rlwait_end(q);
    if (st == RL_DENIED)
        deny(q, status, &hdrs);
    else
        breaker_step(q, m); /* no call was made: m is still valid */
}

/* ------------------------------------------------------------------ */
/* Breaker and retry                                                    */
/* ------------------------------------------------------------------ */

/* The fallback path t with each {NAME} replaced by the route's variable
 * NAME (as SCG's fallbackUri expands them; the library refused a NAME no
 * pattern of the route captures), its bytes a path cannot carry as they
 * are %XX-encoded. False for a variable the match lacks (a breaker of the
 * default filters on a route without it): SCG fails that fallback. */
static bool expand_fallback(gw_buf *out, sy_match *m, const char *t) {
    for (const char *s = t; *s;) {
        const char *end = *s == '{' ? strchr(s, '}') : NULL;
        if (!end) {
            gw_buf_add(out, s++, 1);
            continue;
        }
        char name[128];
        size_t n = (size_t)(end - s - 1);
        if (n >= sizeof name)
            return false;
        memcpy(name, s + 1, n);
        name[n] = '\0';
        sy_str v = sy_match_var_get(m, name);
        if (!v.ptr)
            return false;
        for (size_t i = 0; i < v.len; i++) {
            unsigned char c = (unsigned char)v.ptr[i];
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                (c >= '0' && c <= '9') || strchr("-._~!$&'()*+,;=:@/", c))
                gw_buf_add(out, (const char *)&c, 1);
            else
                gw_buf_printf(out, "%%%02X", c);
        }
        s = end + 1;
    }
    return true;
}

/* Re-dispatch q to its breaker's fallback path with the headers and query
 * the route's filters produced. */
static void to_fallback(gw_request *q, const char *path) {
    sy_match *m = NULL;
    if (gw_request_rematch(q, &m)) {
        gw_request_respond(q, 502, NULL, NULL);
        return;
    }
    gw_buf fb = {0};
    if (strchr(path, '{')) {
        bool known = expand_fallback(&fb, m, path);
        if (!known || fb.failed || !fb.p) {
            gw_buf_free(&fb);
            gw_request_respond(q, 500, NULL,
                               known ? NULL
                                     : "{\"status\":500,\"error\":"
                                       "\"fallbackUri: no such route "
                                       "variable\"}\n");
            return;
        }
        path = fb.p;
    }
    size_t n = sy_match_header_count(m), k = 0;
    sy_header *h = malloc((n ? n : 1) * sizeof *h);
    if (!h) {
        gw_buf_free(&fb);
        gw_request_respond(q, 500, NULL, NULL);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        sy_header x = sy_match_header(m, i);
        if (!(x.name.len == 4 && strncasecmp(x.name.ptr, "host", 4) == 0))
            h[k++] = x;
    }
    gw_metrics_policy(&q->w->metrics, q->route_id, GW_POLICY_FALLBACK);
    q->replay = true; /* the body again, to whoever answers */
    gw_request_forward(q, (sy_str){path, strlen(path)}, sy_match_query(m), h,
                       k);
    free(h);
    gw_buf_free(&fb);
}

static void breaker_step(gw_request *q, sy_match *m) {
    if (!q->permit_held) { /* a forward keeps the first route's permit */
        sy_error err;
        /* asked straight into the request's permit (no copy), but for a
         * fallback's route: the first route's stays (its name, for
         * FallbackHeaders) unless this route has a breaker */
        sy_breaker_permit other, *p = q->fb_kind ? &other : &q->permit;
        /* now_ms 0: the library reads the time when the breaker needs it
         * (a closed one does not) */
        if (sy_match_breaker_acquire(m, 0, p, &err)) {
            gw_request_respond(q, 500, NULL, NULL);
            return;
        }
        if (p->breaker && !p->permitted) {
            gw_metrics_policy(&q->w->metrics, q->route_id, GW_POLICY_REJECTED);
            if (p->fallback) {
                q->fb_kind = GW_FB_OPEN;
                if (p != &q->permit)
                    q->permit = *p; /* its name, for FallbackHeaders */
                gw_request_proceed_ops(q, m); /* this route's edits too */
                to_fallback(q, q->permit.fallback);
            } else {
                gw_request_respond(
                    q, 503, NULL,
                    "{\"status\":503,\"error\":\"circuit breaker open\"}\n");
            }
            return;
        }
        if (p->breaker) {
            if (p != &q->permit)
                q->permit = *p;
            q->permit_held = true;
            q->call_start_ms = loop_ms(q); /* no clock read a call */
            q->call_fresh = true; /* until the first attempt's timeouts */
        }
    }
    const sy_retry_policy *rp = sy_match_retry_policy(m);
    if (rp) {
        q->retry = rp;
        if (!q->first_attempt_ms)
            q->first_attempt_ms = now_ms();
    }
    if (q->has_body && !q->keep_body &&
        (q->retry || (q->permit_held && q->permit.fallback) ||
         gw_caches_body(m)))
        q->keep_body = true; /* kept from the first byte on */
    gw_request_proceed(q, m);
    q->call_fresh = false;
}

/* The connect and response timeouts of an attempt, within the breaker's
 * time limit counted from the start of the call. */
void gw_policy_timeouts(gw_request *q) {
    if (!q->permit_held || !q->permit.timeout_ms)
        return;
    /* the first attempt starts as the call does (breaker_step) */
    uint64_t spent = q->call_fresh ? 0 : ms_since(now_ms(), q->call_start_ms);
    uint64_t left =
        spent < q->permit.timeout_ms ? q->permit.timeout_ms - spent : 1;
    if (q->connect_ms > left)
        q->connect_ms = left;
    if (q->response_ms > left)
        q->response_ms = left;
}

static bool can_replay(const gw_request *q) {
    return !q->has_body || (q->keep_body && !q->body_overflow);
}

static void retry_now(gw_request *q) {
    q->retries_done++;
    gw_metrics_policy(&q->w->metrics, q->route_id, GW_POLICY_RETRIED);
    atomic_fetch_add(&q->w->metrics.retries, 1);
    int st = gw_request_retry_attempt(q);
    if (st)
        gw_request_respond(q, st, NULL, NULL);
}

static void on_backoff(uv_timer_t *t) {
    retry_now(t->data);
}

static void backoff_closed(uv_handle_t *h) {
    free(h);
}

/* What to do after an attempt that failed or answered `status`. */
typedef enum { DO_PASS, DO_RETRY, DO_FALLBACK, DO_ERROR, DO_EMPTY } gw_do;

/* A retry or a fallback the policy asked for and the gateway cannot make:
 * the request body went upstream past --retry-body-bytes and was not
 * kept. A condition of the request, not of the route: logged and counted
 * (gateway_body_not_replayed_total), the failure answered as without it. */
static void not_replayed(gw_request *q, const char *what) {
    gw_metrics_policy(&q->w->metrics, q->route_id, GW_POLICY_NOT_REPLAYED);
    gw_log("route %s: %s not made: the request body (%s) is over "
           "--retry-body-bytes %llu and was not kept",
           q->route_id, what, q->req_chunked ? "chunked" : "Content-Length",
           (unsigned long long)G.cfg.retry_body_bytes);
}

static gw_do decide(gw_request *q, sy_outcome o, int status, uint64_t now,
                    uint32_t *delay, int *err_status) {
    if (q->retry &&
        sy_retry_next(q->retry, q->retries_done, q->sreq.method, o, status,
                      now - q->first_attempt_ms, gw_worker_rand(q->w), delay)) {
        if (can_replay(q))
            return DO_RETRY;
        not_replayed(q, "Retry");
    }
    if (!q->permit_held)
        return o == SY_OUTCOME_SUCCESS || status ? DO_PASS : DO_ERROR;
    q->permit_held = false;
    /* now_ms 0: the library reads the time if the state moves */
    sy_breaker_verdict v = sy_breaker_record(
        &q->permit, o, status, ms_since(now, q->call_start_ms), 0);
    if (v == SY_BREAKER_PASS)
        return DO_PASS;
    if (v == SY_BREAKER_RESUME) /* resumeWithoutError: SCG's empty 200 */
        return DO_EMPTY;
    if (q->permit.fallback && !can_replay(q)) {
        not_replayed(q, "CircuitBreaker fallback");
    } else if (q->permit.fallback) {
        q->fb_kind = status                    ? GW_FB_STATUS
                     : o == SY_OUTCOME_TIMEOUT ? GW_FB_TIMEOUT
                                               : GW_FB_CONNECT;
        q->fb_status = status;
        return DO_FALLBACK;
    }
    if (status) /* a listed status without a fallback: the answer stands */
        return DO_PASS;
    *err_status = o == SY_OUTCOME_TIMEOUT ? 504 : 502;
    return DO_ERROR;
}

/* Carry out a decision that is not PASS (no upstream attached). */
static void carry_out(gw_request *q, gw_do d, uint32_t delay, int err_status) {
    q->body_flow = false; /* the body waits for the next attempt */
    if (d == DO_RETRY) {
        if (q->lb && q->ntried < GW_MAX_TRIES && q->instance[0])
            q->tried[q->ntried++] = strdup(q->instance);
        q->replay = true;
        if (!q->backoff) {
            q->backoff = malloc(sizeof *q->backoff);
            if (!q->backoff) {
                retry_now(q);
                return;
            }
            uv_timer_init(&q->w->loop, q->backoff);
            q->backoff->data = q;
        }
        uv_timer_start(q->backoff, on_backoff, delay, 0);
        return;
    }
    if (d == DO_FALLBACK) {
        to_fallback(q, q->permit.fallback);
        return;
    }
    gw_request_respond(q, d == DO_EMPTY ? 200 : err_status, NULL, NULL);
}

int gw_policy_on_response(gw_request *q, int status, uint64_t now_ns) {
    if (!q->retry && !q->permit_held)
        return 0;
    uint32_t delay = 0;
    int err = 502;
    sy_outcome o = status >= 500 ? SY_OUTCOME_5XX : SY_OUTCOME_SUCCESS;
    gw_do d = decide(q, o, status, now_ns / 1000000u, &delay, &err);
    if (d == DO_PASS)
        return 0;
    q->redo = (int)d;
    q->redo_delay = delay;
    q->redo_status = err;
    return 1;
}

void gw_policy_redo(gw_request *q) {
    gw_do d = (gw_do)q->redo;
    q->redo = 0;
    carry_out(q, d, q->redo_delay, q->redo_status);
}

bool gw_policy_on_failure(gw_request *q, sy_outcome o) {
    uint32_t delay = 0;
    int err = o == SY_OUTCOME_TIMEOUT ? 504 : 502;
    if (!q->retry && !q->permit_held)
        return false;
    gw_do d = decide(q, o, 0, now_ms(), &delay, &err);
    if (d == DO_PASS || d == DO_ERROR)
        return false; /* the caller answers as it would have */
    carry_out(q, d, delay, err);
    return true;
}

/* Keep request body bytes for a retry or a fallback. */
void gw_policy_keep_body(gw_request *q, const char *at, size_t len) {
    if (!q->keep_body || q->body_overflow)
        return;
    if (q->body_keep.len + len > G.cfg.retry_body_bytes) {
        q->body_overflow = true;
        gw_buf_free(&q->body_keep);
        q->body_keep = (gw_buf){0};
        return;
    }
    gw_buf_add(&q->body_keep, at, len);
}

/* A new attempt after the first: the body kept so far goes first. */
void gw_policy_replay(gw_request *q, gw_upconn *u) {
    if (!q->replay || !q->body_keep.len)
        return;
    if (q->req_chunked) {
        char sz[24];
        int n = snprintf(sz, sizeof sz, "%zx\r\n", q->body_keep.len);
        gw_upstream_write(u, sz, (size_t)n);
        gw_upstream_write(u, q->body_keep.p, q->body_keep.len);
        gw_upstream_write(u, "\r\n", 2);
    } else {
        gw_upstream_write(u, q->body_keep.p, q->body_keep.len);
    }
}

void gw_policy_free(gw_request *q) {
    rlwait_end(q);
    if (q->permit_held) /* the client left first: not the upstream's fault */
        sy_breaker_record(&q->permit, SY_OUTCOME_SUCCESS, 0,
                          ms_since(now_ms(), q->call_start_ms), gw_wall_ms());
    q->permit_held = false;
    if (q->backoff) {
        uv_timer_stop(q->backoff);
        uv_close((uv_handle_t *)q->backoff, backoff_closed);
        q->backoff = NULL;
    }
    gw_buf_free(&q->body_keep);
    gw_xhdrs_clear(q); /* its memory stays with the request block (proxy.c) */
    gw_buf_free(&q->req_xhdrs);
}

/* ------------------------------------------------------------------ */
/* Checks at apply that the library leaves to the gateway               */
/* ------------------------------------------------------------------ */

static int refuse(sy_error *err, const char *path, const char *msg) {
    memset(err, 0, sizeof *err);
    err->code = SY_EARG;
    snprintf(err->path, sizeof err->path, "%s", path);
    snprintf(err->message, sizeof err->message, "%s", msg);
    return SY_EARG;
}

/* A route's metadata.cors must be what cors.c reads (else its CORS
 * requests would be answered 500). */
static int check_cors(const cJSON *route, const char *path, sy_error *err) {
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(route, "metadata");
    const cJSON *cors = cJSON_GetObjectItemCaseSensitive(md, "cors");
    if (!cors)
        return 0;
    char *text = cJSON_PrintUnformatted(cors), msg[256] = "";
    gw_cors *c = text ? gw_cors_parse(text, msg, sizeof msg) : NULL;
    free(text);
    if (c) {
        gw_cors_free(c);
        return 0;
    }
    char p[128];
    snprintf(p, sizeof p, "%s%smetadata.cors", path, path[0] ? "." : "");
    return refuse(err, p, msg[0] ? msg : "out of memory");
}

int gw_document_check(const char *json, size_t len, bool single,
                      sy_error *err) {
    if (!json ||
        (!memmem(json, len, "efault", 6) && !memmem(json, len, "\"cors\"", 6) &&
         !memmem(json, len, "\\u", 2)))
        return 0; /* cheap: neither key can be there, not even escaped */
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root)
        return 0; /* the library reports the syntax error */
    int rc = 0;
    const cJSON *routes = root, *it;
    if (single) {
        rc = check_cors(root, "route", err);
        routes = NULL;
    } else if (cJSON_IsObject(root)) {
        cJSON_ArrayForEach(it, root) {
            if (strcmp(it->string, "default-filters") == 0 ||
                strcmp(it->string, "defaultFilters") == 0 ||
                strcmp(it->string, "default_filters") == 0) {
                rc = refuse(err, it->string,
                            "a document's default filters are not run by "
                            "this gateway: give them with --default-filters, "
                            "or merge them into the routes' filters "
                            "(switchyard convert does)");
                break;
            }
        }
        routes = cJSON_GetObjectItemCaseSensitive(root, "routes");
    }
    int i = 0;
    const cJSON *list = cJSON_IsArray(routes) && !rc ? routes : NULL;
    cJSON_ArrayForEach(it, list) {
        char p[64];
        snprintf(p, sizeof p, "%s[%d]", routes == root ? "" : "routes", i++);
        if ((rc = check_cors(it, p, err)))
            break;
    }
    cJSON_Delete(root);
    return rc;
}
