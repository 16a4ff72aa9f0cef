/*
 * commit_brk.c - routes naming one circuit breaker agree on its settings.
 * They share its window and state, and each call is weighed by the
 * settings of the route that recorded it (window, minimumNumberOfCalls,
 * thresholds, durations): two routes of different settings would make
 * the breaker's state depend on which route a call came through
 * (Resilience4j keeps the settings per breaker name: it never arises
 * there). A commit that would publish that is refused at the later
 * route's CircuitBreaker.
 *
 * The router keeps, per breaker key its live routes name, the settings'
 * fingerprint (sy__brk_cfg.fp) and how many routes name it (router_int.h
 * set_*). A commit weighs only the routes it adds or removes (sorted by
 * key and fingerprint) against that map, never every route; only its
 * error reads the snapshot's routes, to name the other one.
 */
#include "policy/breaker.h"
#include "router/commit_int.h"
#include "router/router_int.h"

#include <stdio.h>

typedef struct sy__brk_at {
    const struct sy_route *rt;
    const char *list; /* NULL: "route" */
    unsigned index;
} sy__brk_at;

typedef struct sy__brk_delta {
    uint64_t key, fp;
    const struct sy_route *rt;
    const sy__brk_cfg *cfg;
    int64_t total; /* of its (key, fp) once weighed */
    int32_t d;     /* +1 added, -1 removed */
    int ri;        /* its filter's index (-1: the defaults') */
} sy__brk_delta;

typedef struct sy__brk_final {
    uint64_t key, fp;
    uint32_t count;
} sy__brk_final;

/* ---- the router's map: breaker key -> settings, routes naming it ---- */

static size_t set_at(const sy_router *r, uint64_t key) {
    size_t m = r->set_cap - 1, i = (size_t)(key * 0x9e3779b97f4a7c15ull) & m;
    while (r->set_keys[i] && r->set_keys[i] != key)
        i = (i + 1) & m;
    return i;
}

static bool set_find(const sy_router *r, uint64_t key, uint64_t *fp,
                     uint32_t *count) {
    if (!r->set_cap)
        return false;
    size_t i = set_at(r, key);
    if (!r->set_keys[i])
        return false;
    *fp = r->set_fps[i];
    *count = r->set_counts[i];
    return true;
}

/* Room for `more` keys besides the ones held. */
static bool set_reserve(sy_router *r, size_t more) {
    if ((r->set_n + more) * 2 <= r->set_cap)
        return true;
    size_t cap = r->set_cap ? r->set_cap : 64;
    while ((r->set_n + more) * 2 > cap)
        cap *= 2;
    uint64_t *k = sy__calloc(&r->alloc, cap, sizeof *k);
    uint64_t *f = sy__calloc(&r->alloc, cap, sizeof *f);
    uint32_t *c = sy__calloc(&r->alloc, cap, sizeof *c);
    if (!k || !f || !c) {
        sy__free(&r->alloc, k);
        sy__free(&r->alloc, f);
        sy__free(&r->alloc, c);
        return false;
    }
    uint64_t *ok = r->set_keys, *of = r->set_fps;
    uint32_t *oc = r->set_counts;
    size_t on = r->set_cap;
    r->set_keys = k, r->set_fps = f, r->set_counts = c, r->set_cap = cap;
    for (size_t i = 0; i < on; i++)
        if (ok[i]) {
            size_t j = set_at(r, ok[i]);
            k[j] = ok[i], f[j] = of[i], c[j] = oc[i];
        }
    sy__free(&r->alloc, ok);
    sy__free(&r->alloc, of);
    sy__free(&r->alloc, oc);
    return true;
}

/* key's entry set (count 0: removed, by backward shift); the room was
 * reserved. */
static void set_put(sy_router *r, uint64_t key, uint64_t fp, uint32_t count) {
    if (!r->set_cap)
        return;
    size_t i = set_at(r, key), m = r->set_cap - 1;
    if (count) {
        r->set_n += !r->set_keys[i];
        r->set_keys[i] = key, r->set_fps[i] = fp, r->set_counts[i] = count;
        return;
    }
    if (!r->set_keys[i])
        return;
    r->set_n--;
    for (size_t j = (i + 1) & m; r->set_keys[j]; j = (j + 1) & m) {
        size_t h = (size_t)(r->set_keys[j] * 0x9e3779b97f4a7c15ull) & m;
        if (((j - h) & m) >= ((j - i) & m)) {
            r->set_keys[i] = r->set_keys[j];
            r->set_fps[i] = r->set_fps[j];
            r->set_counts[i] = r->set_counts[j];
            i = j;
        }
    }
    r->set_keys[i] = 0;
    r->set_fps[i] = 0;
    r->set_counts[i] = 0;
}

/* ---- the commit's part ---- */

int sy__commit_brk_note(commit *c, const struct sy_route *rt, const char *list,
                        unsigned index, sy_error *err) {
    if (c->brk_at_n == c->brk_at_cap) {
        sy__brk_at *v = sy__grow(&c->r->alloc, c->brk_at, &c->brk_at_cap,
                                 c->brk_at_n + 1, 16, sizeof *v);
        if (!v)
            return sy__commit_nomem(err);
        c->brk_at = v;
    }
    c->brk_at[c->brk_at_n++] = (sy__brk_at){rt, list, index};
    return SY_OK;
}

int sy__commit_brk_add(commit *c, const struct sy_route *rt, bool added) {
    const sy__brk_cfg *cfg;
    int ri;
    uint64_t key = sy__router_breaker_of(c->r, rt, &cfg, &ri);
    if (!key)
        return SY_OK;
    if (c->brk_d_n == c->brk_d_cap) {
        sy__brk_delta *v = sy__grow(&c->r->alloc, c->brk_d, &c->brk_d_cap,
                                    c->brk_d_n + 1, 16, sizeof *v);
        if (!v)
            return SY_ENOMEM;
        c->brk_d = v;
    }
    c->brk_d[c->brk_d_n++] =
        (sy__brk_delta){key, cfg->fp, rt, cfg, 0, added ? 1 : -1, ri};
    return SY_OK;
}

/* A live route of the snapshot to publish naming breaker key with
 * settings fp (the error's other route; reads every route, once). */
static const struct sy_route *route_naming(const commit *c, uint64_t key,
                                           uint64_t fp,
                                           const sy__brk_cfg **cfg) {
    const sy_snapshot *f = c->work;
    for (uint32_t i = 0; i < f->slot_count; i++) {
        const struct sy_route *rt = sy__snapshot_slot(f, i)->route;
        if (rt && sy__router_breaker_of(c->r, rt, cfg, NULL) == key &&
            (*cfg)->fp == fp)
            return rt;
    }
    return NULL;
}

/* Breaker d[0].key's routes would run settings of more than one
 * fingerprint (d[0, n): the commit's routes naming it, each with the
 * total of its fingerprint; fp0: the live routes', 0: none stays). */
static int conflict(commit *c, const sy__brk_delta *d, size_t n, uint64_t fp0,
                    sy_error *err) {
    /* the settings that came first: the live routes' while any stays,
     * else the first added route's of settings that stay */
    const sy__brk_delta *first = NULL, *later = NULL;
    for (size_t i = 0; i < n; i++)
        if (d[i].d > 0 && d[i].total > 0 && !first && (!fp0 || d[i].fp == fp0))
            first = &d[i];
    uint64_t fp = first ? first->fp : fp0;
    for (size_t i = 0; i < n && !later; i++)
        if (d[i].d > 0 && d[i].total > 0 && d[i].fp != fp)
            later = &d[i];
    const sy__brk_cfg *ocfg = first ? first->cfg : NULL;
    const struct sy_route *other =
        first ? first->rt : route_naming(c, d[0].key, fp, &ocfg);
    if (!later || !other) /* (cannot be: two settings stay) */
        return sy__error_set(err, SY_EARG, "",
                             "routes name one CircuitBreaker with different "
                             "settings");
    /* the later route's place in its change */
    const sy__brk_at *at = NULL;
    for (size_t i = c->brk_at_n; i-- > 0 && !at;)
        if (c->brk_at[i].rt == later->rt)
            at = &c->brk_at[i];
    char path[96] = "", how[160];
    if (at) {
        int k = at->list
                    ? snprintf(path, sizeof path, "%s[%u]", at->list, at->index)
                    : snprintf(path, sizeof path, "route");
        if (later->ri >= 0 && k > 0 && (size_t)k < sizeof path)
            snprintf(path + k, sizeof path - (size_t)k, ".filters[%d]",
                     later->ri);
    }
    sy__brk_first_diff(later->cfg, ocfg, how, sizeof how);
    const char *name = later->cfg->name ? later->cfg->name : later->rt->id;
    return sy__error_set(err, SY_EARG, path, SY__BRK_CLASH, name, how,
                         other->id);
}

int sy__commit_brk_check(commit *c, sy_error *err) {
    sy_router *r = c->r;
    sy__brk_delta *d = c->brk_d;
    size_t n = c->brk_d_n;
    c->brk_final_n = 0;
    if (!n)
        return SY_OK;
    /* by key, then fingerprint, then the order the steps met them */
    if (n > 1 && (!sy__sort_by_u64(&r->alloc, d, n, sizeof *d,
                                   offsetof(sy__brk_delta, fp)) ||
                  !sy__sort_by_u64(&r->alloc, d, n, sizeof *d,
                                   offsetof(sy__brk_delta, key))))
        return sy__commit_nomem(err);
    sy__free(&r->alloc, c->brk_final);
    c->brk_final = sy__malloc(&r->alloc, n * sizeof *c->brk_final);
    if (!c->brk_final)
        return sy__commit_nomem(err);
    size_t fresh = 0;
    for (size_t s = 0, e; s < n; s = e) {
        for (e = s; e < n && d[e].key == d[s].key;)
            e++;
        uint64_t fp0 = 0, keep = 0;
        uint32_t n0 = 0;
        bool known = set_find(r, d[s].key, &fp0, &n0), fp0_seen = false;
        int stay = 0;
        int64_t count = 0, fp0_total = known ? n0 : 0;
        for (size_t i = s, j; i < e; i = j) {
            bool live = known && d[i].fp == fp0;
            int64_t tot = live ? n0 : 0;
            fp0_seen |= live;
            for (j = i; j < e && d[j].fp == d[i].fp; j++)
                tot += d[j].d;
            for (size_t k = i; k < j; k++)
                d[k].total = tot;
            if (live)
                fp0_total = tot;
            if (tot > 0)
                stay++, keep = d[i].fp, count = tot;
        }
        if (known && !fp0_seen && n0)
            stay++, keep = fp0, count = n0;
        if (stay > 1)
            return conflict(c, d + s, e - s, fp0_total > 0 ? fp0 : 0, err);
        fresh += !known && stay;
        c->brk_final[c->brk_final_n++] =
            (sy__brk_final){d[s].key, keep, stay ? (uint32_t)count : 0};
    }
    if (!c->dry && !set_reserve(r, fresh))
        return sy__commit_nomem(err);
    return SY_OK;
}

void sy__commit_brk_follow(commit *c) {
    for (size_t i = 0; i < c->brk_final_n; i++)
        set_put(c->r, c->brk_final[i].key, c->brk_final[i].fp,
                c->brk_final[i].count);
    c->brk_final_n = 0;
}

void sy__commit_brk_free(commit *c) {
    const sy__alloc *a = &c->r->alloc;
    sy__free(a, c->brk_at);
    sy__free(a, c->brk_d);
    sy__free(a, c->brk_final);
    c->brk_at = NULL;
    c->brk_d = NULL;
    c->brk_final = NULL;
    c->brk_at_n = c->brk_at_cap = c->brk_d_n = c->brk_d_cap = 0;
    c->brk_final_n = 0;
}
