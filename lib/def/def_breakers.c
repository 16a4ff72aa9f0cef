/*
 * def_breakers.c - a document's routes naming one circuit breaker give it
 * the same settings (def_breakers.h). They would share its window and
 * state, each call weighed by its own route's settings: the breaker's
 * state would depend on the route a call came through. A commit refuses
 * the same between a route and the live ones (router/commit_brk.c).
 */
#include "def/def_breakers.h"
#include "policy/breaker.h"
#include "route/filter.h"
#include "route/route.h"

#include <stdio.h>

/* r's own CircuitBreaker: its config and its index in the chain. */
static const sy__brk_cfg *breaker_of(const struct sy_route *r, int *at) {
    for (size_t i = 0; r->more->cfilters && i < r->more->filter_count; i++) {
        sy__builtin got;
        const void *p = sy__filter_policy(r->more->cfilters[i], &got);
        if (p && got == SY_F_CIRCUIT_BREAKER) {
            *at = (int)i;
            return p;
        }
    }
    return NULL;
}

static uint64_t key_of(const sy__brk_cfg *c, const struct sy_route *r) {
    return c->key ? c->key : sy__brk_key(r->id, strlen(r->id));
}

static size_t slot_of(const sy__def_brks *t, uint64_t key) {
    size_t m = t->cap - 1, i = (size_t)(key * 0x9e3779b97f4a7c15ull) & m;
    while (t->keys[i] && t->keys[i] != key)
        i = (i + 1) & m;
    return i;
}

static bool grow(const sy__alloc *a, sy__def_brks *t) {
    size_t cap = t->cap ? t->cap * 2 : 16;
    uint64_t *k = sy__calloc(a, cap, sizeof *k);
    const struct sy_route **r = sy__calloc(a, cap, sizeof *r);
    if (!k || !r) {
        sy__free(a, k);
        sy__free(a, (void *)r);
        return false;
    }
    sy__def_brks o = *t;
    t->keys = k, t->routes = r, t->cap = cap;
    for (size_t i = 0; i < o.cap; i++)
        if (o.keys[i]) {
            size_t j = slot_of(t, o.keys[i]);
            k[j] = o.keys[i], r[j] = o.routes[i];
        }
    sy__free(a, o.keys);
    sy__free(a, (void *)o.routes);
    return true;
}

int sy__def_brks_check(const sy__alloc *a, sy__def_brks *t,
                       const struct sy_route *r, const char *path,
                       sy_error *e) {
    if (sy__route_policy_free(r))
        return 0;
    int at = -1;
    const sy__brk_cfg *c = breaker_of(r, &at);
    if (!c)
        return 0;
    if ((t->n + 1) * 2 > t->cap && !grow(a, t))
        return sy__error_set(e, SY_ENOMEM, "", "out of memory");
    uint64_t key = key_of(c, r);
    size_t i = slot_of(t, key);
    if (!t->keys[i]) {
        t->keys[i] = key;
        t->routes[i] = r;
        t->n++;
        return 0;
    }
    int oat;
    const struct sy_route *o = t->routes[i];
    const sy__brk_cfg *oc = breaker_of(o, &oat);
    if (oc->fp == c->fp)
        return 0;
    char p[128], how[160];
    snprintf(p, sizeof p, "%s.filters[%d]", path, at);
    sy__brk_first_diff(c, oc, how, sizeof how);
    sy__error_clear(e);
    return sy__error_set(e, SY_EARG, p, SY__BRK_CLASH,
                         c->name ? c->name : r->id, how, o->id);
}

void sy__def_brks_free(const sy__alloc *a, sy__def_brks *t) {
    sy__free(a, t->keys);
    sy__free(a, (void *)t->routes);
    memset(t, 0, sizeof *t);
}
