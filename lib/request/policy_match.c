/*
 * policy_match.c - the policy calls of a match (sy_match_ratelimit*,
 * sy_match_breaker_acquire, sy_match_retry_policy): the stateful filters
 * of the match's chain (default filters and the route's, in SCG's merged
 * order) run against the snapshot's policy store (lib/policy/).
 */
#include "policy/breaker.h"
#include "policy/ratelimit.h"
#include "policy/retry.h"
#include "request/match.h"

/* False when route r (NULL: none) has no filter of builtin `id`, as its
 * compile noted (Retry, CircuitBreaker, RequestRateLimiter): no walk over
 * its filters. */
static bool may_have(const struct sy_route *r, sy__builtin id) {
    if (!r)
        return false;
    unsigned p = r->more->policies;
    if (!(p & SY_MORE_COMPILED))
        return r->more->filter_count != 0;
    if (id == SY_F_RETRY)
        return p & SY_MORE_RETRY;
    if (id == SY_F_CIRCUIT_BREAKER)
        return p & SY_MORE_BREAKER;
    if (id == SY_F_REQUEST_RATE_LIMITER)
        return p & SY_MORE_RATELIMIT;
    return true;
}

/* next_policy's walk of the merged chain, when there are default filters
 * (see next_policy); out of line: most routers have none. */
static __attribute__((noinline)) const void *
merged_next(const sy_match *m, sy__builtin id, size_t *at) {
    const struct sy_route *d = m->snap->defaults, *r = m->route;
    size_t nd = d ? d->more->filter_count : 0, nr = r->more->filter_count;
    if (!may_have(d, id) && !may_have(r, id)) {
        *at = 2 * (nd > nr ? nd : nr); /* as after the walk */
        return NULL;
    }
    size_t i = *at >> 1, side = *at & 1;
    for (; i < nd || i < nr; i++, side = 0) {
        for (; side < 2; side++) {
            const struct sy_route *src = side ? r : d;
            if (i >= (side ? nr : nd))
                continue;
            /* the entry names its built-in: no call for other filters */
            const sy__factory_spec *spec = sy__def_spec(&src->more->filters[i]);
            if (!spec || spec->id != id)
                continue;
            *at = 2 * i + side + 1;
            sy__builtin got;
            return sy__filter_policy(src->more->cfilters[i], &got);
        }
    }
    *at = 2 * i;
    return NULL;
}

/* The next policy of builtin `id` in the merged chain (default i before
 * route i) from position *at (0 at first; moved past the one returned),
 * or NULL. Inline, for its usual case: no default filter (most routers),
 * the route's filters alone, at the same positions as the merged walk's
 * (route filter i is 2i + 1), without its per-entry side switch. */
static inline __attribute__((always_inline)) const void *
next_policy(const sy_match *m, sy__builtin id, size_t *at) {
    const struct sy_route *d = m->snap->defaults, *r = m->route;
    if (d && d->more->filter_count)
        return merged_next(m, id, at);
    const sy__route_more *rm = r->more;
    size_t nr = rm->filter_count;
    if (!may_have(r, id)) {
        *at = 2 * nr; /* as after the walk */
        return NULL;
    }
    size_t i = *at >> 1;
    for (; i < nr; i++) {
        const sy__factory_spec *spec = sy__def_spec(&rm->filters[i]);
        if (!spec || spec->id != id)
            continue;
        *at = 2 * i + 2;
        sy__builtin got;
        return sy__filter_policy(rm->cfilters[i], &got);
    }
    *at = 2 * i;
    return NULL;
}

/* The k-th policy of builtin `id` in the merged chain, or NULL. */
static const void *nth_policy(const sy_match *m, sy__builtin id, size_t k) {
    size_t at = 0;
    const void *p;
    while ((p = next_policy(m, id, &at)) && k--)
        ;
    return p;
}

static int64_t now_of(const sy_match *m, int64_t now_ms) {
    if (now_ms)
        return now_ms;
    const sy_snapshot *s = m->snap;
    return s->clock_ms ? s->clock_ms(s->clock_data) : sy__now_realtime_ms();
}

static int64_t snap_now(const void *m) {
    return now_of(m, 0);
}

static sy_str var_of(const void *m, const char *name) {
    return sy_match_var_get(m, name);
}

/* The whole key; scratch holds a registered resolver's */
static sy_str resolve(const sy_match *m, const sy__rl_cfg *cfg, char *scratch,
                      size_t cap) {
    return sy__keyres_resolve(&cfg->kr, m->req, m->route, m->route->id, var_of,
                              m, scratch, cap);
}

size_t sy_match_ratelimit_count(const sy_match *m) {
    size_t n = 0, at = 0;
    while (m && next_policy(m, SY_F_REQUEST_RATE_LIMITER, &at))
        n++;
    return n;
}

int sy_match_ratelimit(const sy_match *m, int64_t now_ms, sy_ratelimit *out,
                       sy_error *err) {
    if (!m || !out)
        return sy__error_set(err, SY_EINVAL, "", "match and out needed");
    /* no limiter: allowed, nothing else to say */
    memset(out, 0, offsetof(sy_ratelimit, key));
    out->allowed = true;
    out->key[0] = '\0';
    const sy__rl_cfg *cfg;
    char scratch[SY_KEY_RESOLVER_CAP];
    for (size_t at = 0;
         (cfg = next_policy(m, SY_F_REQUEST_RATE_LIMITER, &at));) {
        /* the bucket from the whole key; the key reported (255 bytes at
         * most) names it */
        sy_str k = resolve(m, cfg, scratch, sizeof scratch);
        if (!k.len) {
            sy__rl_empty_key(cfg, out);
            if (!out->allowed) {
                sy__store_count(&m->snap->policy->limited);
                return 0;
            }
            continue;
        }
        out->key_len = sy__keyres_text(k, out->key);
        uint64_t bk = sy__rl_bucket_key(cfg, m->route->id, k.ptr, k.len);
        sy__rl_take(m->snap->policy, cfg, bk, now_of(m, now_ms), out);
        if (!out->allowed)
            return 0;
    }
    return 0;
}

int sy_match_ratelimit_redis(const sy_match *m, size_t i, sy_redis_call *call,
                             sy_error *err) {
    if (!m || !call)
        return sy__error_set(err, SY_EINVAL, "", "match and call needed");
    const sy__rl_cfg *cfg = nth_policy(m, SY_F_REQUEST_RATE_LIMITER, i);
    if (!cfg)
        return sy__error_set(err, SY_ENOTFOUND, "",
                             "the route has no RequestRateLimiter %zu", i);
    memset(call, 0, offsetof(sy_redis_call, tokens_key));
    char scratch[SY_KEY_RESOLVER_CAP];
    sy_str k = resolve(m, cfg, scratch, sizeof scratch);
    if (!k.len) {
        call->key_len = 0;
        call->key[0] = '\0';
        call->needed = false;
        sy__rl_empty_key(cfg, &call->decided);
        return 0;
    }
    call->key_len = sy__keyres_text(k, call->key);
    sy__rl_redis_call(cfg, m->route->id, call);
    return 0;
}

int sy_match_breaker_acquire(const sy_match *m, int64_t now_ms,
                             sy_breaker_permit *out, sy_error *err) {
    if (!m || !out)
        return sy__error_set(err, SY_EINVAL, "", "match and out needed");
    size_t at = 0;
    const sy__brk_cfg *cfg = next_policy(m, SY_F_CIRCUIT_BREAKER, &at);
    if (!cfg) {
        memset(out, 0, sizeof *out);
        out->permitted = true;
        return 0;
    }
    /* the time only when the breaker needs it (not to permit a call of a
     * closed one) */
    sy__brk_now now = {now_ms, snap_now, m};
    sy__brk_acquire(m->snap->policy, cfg, m->route->id, m->snap->generation,
                    &now, out);
    /* record's now_ms 0 reads the clock this call reads */
    out->clock_ms = m->snap->clock_ms;
    out->clock_data = m->snap->clock_data;
    return 0;
}

const sy_retry_policy *sy_match_retry_policy(const sy_match *m) {
    return m ? nth_policy(m, SY_F_RETRY, 0) : NULL;
}
