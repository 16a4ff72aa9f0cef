/*
 * def_breakers.h - a document's routes naming one circuit breaker give it
 * the same settings (breaker.h sy__brk_cfg.fp): another is an error of
 * the later route, at its CircuitBreaker (a strict parse fails, a lenient
 * one leaves the route out as an issue).
 */
#ifndef SY_DEF_BREAKERS_H
#define SY_DEF_BREAKERS_H

#include "base/util.h"

struct sy_route;

/* The breakers the document's routes named so far: key -> the first
 * route naming it (open addressing on the key; 0: empty). */
typedef struct sy__def_brks {
    uint64_t *keys;
    const struct sy_route **routes;
    size_t n, cap;
} sy__def_brks;

/* Route r (at `path`, e.g. "routes[3]") names its breaker: SY_EARG in *e
 * when an earlier route named it with other settings; SY_ENOMEM. */
int sy__def_brks_check(const sy__alloc *a, sy__def_brks *t,
                       const struct sy_route *r, const char *path, sy_error *e);
void sy__def_brks_free(const sy__alloc *a, sy__def_brks *t);

#endif
