/*
 * breaker.h - CircuitBreaker (Spring Cloud CircuitBreaker on
 * Resilience4j): its args (SCG's name, fallbackUri, statusCodes,
 * resumeWithoutError; Resilience4j's CircuitBreakerConfig and
 * TimeLimiterConfig names; warmupDuration, switchyard's gradual recovery)
 * and the breaker's state machine over a store entry.
 */
#ifndef SY_POLICY_BREAKER_H
#define SY_POLICY_BREAKER_H

#include "policy/policy_args.h"
#include "policy/store.h"

typedef struct sy__brk_cfg {
    const char *name;     /* NULL: the route's id (SCG's default) */
    const char *fallback; /* the path of forward:/path, or NULL */
    uint64_t codes[8];    /* statusCodes: bit (status - 100) */
    bool resume_without_error;
    bool has_codes;
    float failure_rate, slow_rate; /* percent, (0, 100] */
    uint32_t slow_ms, window, min_calls, wait_ms, half_open, timeout_ms;
    uint32_t warmup_ms; /* 0: none */
    uint64_t key;       /* of the name (0: the route id's, per request) */
    uint64_t fp;        /* of the window's settings (Resilience4j's): a
                           change resets the breaker */
    /* the store entry this breaker was last found at, + 1 (0: none yet):
     * a hint the request path checks against the entry's key before it
     * trusts it (no probe of the store's table a call); written only when
     * it was wrong */
    _Atomic uint32_t at;
} sy__brk_cfg;

int sy__brk_compile(sy__pargs *p, sy__brk_cfg *cfg);
/* The first of the settings fp covers (Resilience4j's, in its order) in
 * which a and b differ, as "NAME A" and "B" (a's value first) in buf:
 * false when none does. */
bool sy__brk_first_diff(const sy__brk_cfg *a, const sy__brk_cfg *b, char *buf,
                        size_t n);
/* The error of a route naming breaker %s (its name) with other settings
 * than route %s: "%s" is sy__brk_first_diff's. */
#define SY__BRK_CLASH                                                          \
    "CircuitBreaker '%.80s': %s as route '%.80s' gives it: routes naming "     \
    "one breaker share its window and state, so they must give it the same "   \
    "settings (change them all in one change set)"
/* The store key of a breaker name. */
uint64_t sy__brk_key(const char *name, size_t len);
/* The time of a call, read only when needed: ms when not 0, else
 * read(arg) the first time (a closed breaker's usual permit needs none). */
typedef struct sy__brk_now {
    int64_t ms;
    int64_t (*read)(const void *arg);
    const void *arg;
} sy__brk_now;
/* Permission for one call (sy_match_breaker_acquire), asked from a
 * snapshot of generation `gen`. */
void sy__brk_acquire(sy_policy_store *st, const sy__brk_cfg *cfg,
                     const char *route_id, uint64_t gen, sy__brk_now *now,
                     sy_breaker_permit *out);

#endif
