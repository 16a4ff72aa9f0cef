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
 * set_*). A commit weighs only the routes it adds or removes (grouped by
 * key in a table of its own) against that map, never every route; only
 * its error reads the snapshot's routes, to name the other one.
 *
 * Routers sharing a policy store cannot be made to agree so (workers
 * apply one change one after the other): the store keeps each breaker's
 * settings and which routers' live routes name it, taken there once a
 * commit is published (nothing to give back when a publish fails), and
 * a commit of other settings than another router's is logged (WARN). A
 * lenient document leaves out a route whose settings clash with live
 * routes that stay, as an issue (sy__commit_brk_lenient); a lenient change
 * set is weighed whole at its publish check, which names the routes to
 * leave out (leave_out), and runs again leaving them out.
 */
#include "def/def.h"
#include "policy/breaker.h"
#include "router/commit_int.h"
#include "router/commit_reuse.h"
#include "router/report.h"
#include "router/router_int.h"
#include "snapshot/diff.h"

#include <stdio.h>

typedef struct sy__brk_at {
    const struct sy_route *rt;
    const char *list; /* NULL: "route" */
    unsigned index;
    size_t change; /* its change's index in the set */
} sy__brk_at;

/* A route a lenient change set leaves out: change `change`'s route at
 * document position pos (a one-route change: any), and its error. */
typedef struct sy__brk_leave {
    size_t change;
    uint32_t pos;
    bool doc;
    sy_error e;
} sy__brk_leave;

typedef struct sy__brk_delta {
    uint64_t key, fp;
    const struct sy_route *rt;
    const sy__brk_cfg *cfg;
    int32_t d; /* +1 added, -1 removed */
    int ri;    /* its filter's index (-1: the defaults') */
} sy__brk_delta;

typedef struct sy__brk_final {
    uint64_t key, fp;
    uint32_t count;
} sy__brk_final;

/* the store's part: the keys whose settings the router's routes give
 * change (first named, other settings, last gone), and for each the
 * first added route of its settings (+ 1; 0: none) */
typedef struct sy__brk_store {
    sy__store_setting *v;
    uint32_t *at;
    size_t n;
} sy__brk_store;

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
    c->brk_at[c->brk_at_n++] = (sy__brk_at){rt, list, index, c->step};
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
        (sy__brk_delta){key, cfg->fp, rt, cfg, added ? 1 : -1, ri};
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

/* Where an added route stands in its change (the last noted). */
static const sy__brk_at *at_of(const commit *c, const struct sy_route *rt) {
    for (size_t i = c->brk_at_n; i-- > 0;)
        if (c->brk_at[i].rt == rt)
            return &c->brk_at[i];
    return NULL;
}

/* An added route's CircuitBreaker's place in its change (at, else
 * looked up), in path. */
static void at_path(const commit *c, const sy__brk_at *at,
                    const sy__brk_delta *later, char *path, size_t n) {
    if (!at)
        at = at_of(c, later->rt);
    *path = 0;
    if (at) {
        int k = at->list ? snprintf(path, n, "%s[%u]", at->list, at->index)
                         : snprintf(path, n, "route");
        if (later->ri >= 0 && k > 0 && (size_t)k < n)
            snprintf(path + k, n - (size_t)k, ".filters[%d]", later->ri);
    }
}

static void later_path(const commit *c, const sy__brk_delta *later, char *path,
                       size_t n) {
    at_path(c, NULL, later, path, n);
}

/* Breaker `key` would be named with two settings: `later` (an added
 * route) against `first` (an added route), or, first NULL, against the
 * live routes of settings fp that stay. */
static int conflict(commit *c, uint64_t key, const sy__brk_delta *first,
                    uint64_t fp, const sy__brk_delta *later, sy_error *err) {
    const sy__brk_cfg *ocfg = first ? first->cfg : NULL;
    const struct sy_route *other =
        first ? first->rt : route_naming(c, key, fp, &ocfg);
    if (!other) /* (cannot be: the live ones stay) */
        return sy__error_set(err, SY_EARG, "",
                             "routes name one CircuitBreaker with different "
                             "settings");
    char path[96], how[160];
    later_path(c, later, path, sizeof path);
    sy__brk_first_diff(later->cfg, ocfg, how, sizeof how);
    const char *name = later->cfg->name ? later->cfg->name : later->rt->id;
    return sy__error_set(err, SY_EARG, path, SY__BRK_CLASH, name, how,
                         other->id);
}

/* One breaker key the commit's routes name. The live routes' settings
 * (else the first added route's) are the base; every added route of
 * other settings makes them clash unless no route of the base stays. The
 * removed routes were live: they are of the base. */
typedef struct group {
    uint64_t key, base, other;
    int64_t base_n, other_n;     /* routes of each that stay */
    int64_t live_n;              /* live routes that stay as they are */
    uint32_t base_add;           /* the first added route of the base, + 1 */
    uint32_t other_at, third_at; /* the first of other, of a third, + 1 */
    bool live;                   /* base is the live routes' */
    bool clash;                  /* a lenient set leaves routes out */
    uint64_t win;                /* then: the settings that stay */
    const sy__brk_cfg *wcfg;
    const struct sy_route *wrt; /* a route giving them */
} group;

/* Groups by key: open addressing over indexes + 1 into g (0: empty). */
static size_t group_at(const uint32_t *ix, size_t m, const group *g,
                       uint64_t key) {
    size_t i = (size_t)(key * 0x9e3779b97f4a7c15ull) & m;
    while (ix[i] && g[ix[i] - 1].key != key)
        i = (i + 1) & m;
    return i;
}

static void weigh(group *g, const sy__brk_delta *d, uint32_t i) {
    if (d->d < 0) { /* a live route's: of the base */
        g->base_n -= d->fp == g->base;
        g->live_n--;
        return;
    }
    if (!g->base)
        g->base = d->fp;
    if (d->fp == g->base) {
        g->base_n++;
        if (!g->base_add)
            g->base_add = i + 1;
    } else if (!g->other || d->fp == g->other) {
        g->other = d->fp;
        g->other_n++;
        if (!g->other_at)
            g->other_at = i + 1;
    } else if (!g->third_at) {
        g->third_at = i + 1;
    }
}

static void store_follow(commit *c);
static int leave_out(commit *c, group *g, size_t ng, const uint32_t *ix,
                     size_t cap, sy_error *err);
static int store_clash(sy_router *r, sy_error *err, const char *path,
                       const sy__brk_cfg *cfg, const struct sy_route *rt,
                       int other);

int sy__commit_brk_check(commit *c, sy_error *err) {
    sy_router *r = c->r;
    const sy__alloc *a = &r->alloc;
    sy__brk_delta *d = c->brk_d;
    size_t n = c->brk_d_n;
    c->brk_final_n = 0;
    if (!n)
        return SY_OK;
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    group *g = sy__malloc(a, n * sizeof *g);
    uint32_t *ix = sy__calloc(a, cap, sizeof *ix);
    sy__free(a, c->brk_final);
    c->brk_final = sy__malloc(a, n * sizeof *c->brk_final);
    if (!c->brk_store)
        c->brk_store = sy__calloc(a, 1, sizeof *c->brk_store);
    if (c->brk_store) {
        sy__free(a, c->brk_store->v);
        sy__free(a, c->brk_store->at);
        c->brk_store->v = sy__malloc(a, n * sizeof *c->brk_store->v);
        c->brk_store->at = sy__malloc(a, n * sizeof *c->brk_store->at);
        c->brk_store->n = 0;
    }
    if (!g || !ix || !c->brk_final || !c->brk_store || !c->brk_store->v ||
        !c->brk_store->at) {
        sy__free(a, g);
        sy__free(a, ix);
        return sy__commit_nomem(err);
    }
    size_t ng = 0;
    for (size_t i = 0; i < n; i++) {
        size_t at = group_at(ix, cap - 1, g, d[i].key);
        if (!ix[at]) {
            group *ng_ = &g[ng];
            memset(ng_, 0, sizeof *ng_);
            ng_->key = d[i].key;
            uint32_t n0 = 0;
            ng_->live = set_find(r, d[i].key, &ng_->base, &n0);
            ng_->base_n = ng_->live_n = n0;
            ix[at] = (uint32_t)++ng;
        }
        weigh(&g[ix[at] - 1], &d[i], (uint32_t)i);
    }
    int rc = SY_OK;
    size_t fresh = 0, clashes = 0;
    bool leave = c->may_leave && !c->rerun;
    for (size_t k = 0; k < ng && rc == SY_OK; k++) {
        group *e = &g[k];
        bool base = e->base_n > 0, other = e->other_n > 0;
        if (leave && (base || other) && (e->third_at || (base && other))) {
            e->clash = true; /* left out below, the set run again */
            clashes++;
        } else if (e->third_at && (base || other)) {
            /* a third setting beside the base's or other's */
            const sy__brk_delta *first =
                base ? (e->base_add ? &d[e->base_add - 1] : NULL)
                     : &d[e->other_at - 1];
            rc =
                conflict(c, e->key, first, base ? e->base : e->other,
                         &d[base ? (e->other_at ? e->other_at : e->third_at) - 1
                                 : e->third_at - 1],
                         err);
        } else if (base && other) {
            rc = conflict(c, e->key, e->base_add ? &d[e->base_add - 1] : NULL,
                          e->base, &d[e->other_at - 1], err);
        } else {
            fresh += !e->live && (base || other);
            sy__brk_final *fi = &c->brk_final[c->brk_final_n++];
            *fi = (sy__brk_final){e->key, base ? e->base : e->other,
                                  (uint32_t)(base    ? e->base_n
                                             : other ? e->other_n
                                                     : 0)};
            /* the store's part: settings first named or changed here (a
             * live key of unchanged settings is the router's already),
             * or a key the router's routes no longer name */
            if (fi->count ? !(e->live && fi->fp == e->base) : e->live) {
                sy__brk_store *bs = c->brk_store;
                bs->v[bs->n] = (sy__store_setting){fi->key, fi->fp, fi->count};
                bs->at[bs->n++] =
                    fi->count ? (base ? e->base_add : e->other_at) : 0;
            }
        }
    }
    if (rc == SY_OK && clashes)
        rc = leave_out(c, g, ng, ix, cap, err);
    sy__free(a, g);
    sy__free(a, ix);
    if (rc || c->dry)
        c->brk_store->n = 0; /* nothing for the store */
    if (rc == SY_OK && !c->dry && !set_reserve(r, fresh))
        rc = sy__commit_nomem(err);
    return rc;
}

/* ---- a lenient change set: routes of clashing settings left out ---- */

static int by_route(const void *x, const void *y) {
    const sy__brk_at *a = x, *b = y;
    uintptr_t p = (uintptr_t)a->rt, q = (uintptr_t)b->rt;
    if (p != q)
        return p < q ? -1 : 1;
    return a->change < b->change ? -1 : a->change > b->change;
}

/* Where rt stands in its change: the last noted (sorted: a copy of the
 * notes by route, then change, n of them; else NULL: looked up one by
 * one). */
static const sy__brk_at *find_at(const commit *c, const sy__brk_at *sorted,
                                 size_t n, const struct sy_route *rt) {
    if (!sorted)
        return at_of(c, rt);
    size_t lo = 0, hi = n;
    while (lo < hi) { /* the first past rt */
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)sorted[mid].rt <= (uintptr_t)rt)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo && sorted[lo - 1].rt == rt ? &sorted[lo - 1] : NULL;
}

/* grown at each power of two */
static int leave_push(commit *c, const sy__brk_leave *l) {
    if (!(c->brk_leave_n & (c->brk_leave_n - 1))) {
        size_t cap = c->brk_leave_n ? 2 * c->brk_leave_n : 1;
        sy__brk_leave *v =
            sy__realloc(&c->r->alloc, c->brk_leave, cap * sizeof *v);
        if (!v)
            return SY_ENOMEM;
        c->brk_leave = v;
    }
    c->brk_leave[c->brk_leave_n++] = *l;
    return SY_OK;
}

/* A lenient change set's keys of clashing settings (g[].clash): the
 * settings that stay are the live routes' when some of them stay as they
 * are, else those of the set's first route naming the key (in the order
 * of its changes, and of each document's routes: as a document's own two
 * routes, the first stays). Every added
 * route of other settings is left out when the set runs again
 * (c->brk_leave), as an issue at its CircuitBreaker naming a route of the
 * settings that stay. (An upsert left out keeps its live route, which may
 * give the live settings again: the next run leaves out what clashes with
 * it in turn.) */
static int leave_out(commit *c, group *g, size_t ng, const uint32_t *ix,
                     size_t cap, sy_error *err) {
    const sy__alloc *a = &c->r->alloc;
    const sy__brk_delta *d = c->brk_d;
    size_t n = c->brk_d_n, losers = 0;
    for (size_t k = 0; k < ng; k++) {
        group *e = &g[k];
        if (!e->clash)
            continue;
        if (e->live && e->live_n > 0) {
            e->win = e->base;
            e->wrt = route_naming(c, e->key, e->base, &e->wcfg);
        } else {
            uint32_t f =
                e->base_add && (!e->other_at || e->base_add < e->other_at)
                    ? e->base_add
                    : e->other_at;
            e->win = d[f - 1].fp;
            e->wcfg = d[f - 1].cfg;
            e->wrt = d[f - 1].rt;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const group *e = &g[ix[group_at(ix, cap - 1, g, d[i].key)] - 1];
        losers += e->clash && d[i].d > 0 && d[i].fp != e->win;
    }
    /* many: the notes sorted by route, not read once a loser */
    sy__brk_at *sorted = NULL;
    if (losers > 16 && c->brk_at_n) {
        sorted = sy__malloc(a, c->brk_at_n * sizeof *sorted);
        if (!sorted)
            return sy__commit_nomem(err);
        memcpy(sorted, c->brk_at, c->brk_at_n * sizeof *sorted);
        qsort(sorted, c->brk_at_n, sizeof *sorted, by_route);
    }
    int rc = SY__BRK_LEAVE;
    for (size_t i = 0; i < n && rc == SY__BRK_LEAVE; i++) {
        const group *e = &g[ix[group_at(ix, cap - 1, g, d[i].key)] - 1];
        if (!e->clash || d[i].d < 0 || d[i].fp == e->win)
            continue;
        const sy__brk_at *at = find_at(c, sorted, c->brk_at_n, d[i].rt);
        if (!at || !e->wrt) { /* (cannot be) refused as a strict one is */
            rc = conflict(c, e->key, NULL, e->win, &d[i], err);
            break;
        }
        sy__brk_leave l = {at->change, at->index, at->list != NULL, {0}};
        char path[96], how[160];
        at_path(c, at, &d[i], path, sizeof path);
        sy__brk_first_diff(d[i].cfg, e->wcfg, how, sizeof how);
        sy__error_set(&l.e, SY_EARG, path, SY__BRK_CLASH,
                      d[i].cfg->name ? d[i].cfg->name : d[i].rt->id, how,
                      e->wrt->id);
        if (leave_push(c, &l))
            rc = sy__commit_nomem(err);
    }
    sy__free(a, sorted);
    return rc;
}

/* Routers sharing the store are told of each other's settings: once the
 * commit is published, the keys whose settings it first gives or
 * changes are taken there and those its routes no longer name given up;
 * another router's live routes of other settings are logged, not refused
 * (store.h sy__store_settings_follow says why). Taken before the publish,
 * a failed one had to give them back, and could take back what another
 * router had taken up meanwhile (its settings: it was not told). */
static void store_follow(commit *c) {
    sy__brk_store *bs = c->brk_store;
    size_t at = 0;
    int other = -1;
    if (!sy__store_settings_follow(c->r->policy, c->r->brk_owner, bs->v, bs->n,
                                   &at, &other))
        return;
    const sy__brk_delta *later = &c->brk_d[bs->at[at] - 1];
    char path[96];
    sy_error warn;
    later_path(c, later, path, sizeof path);
    store_clash(c->r, &warn, path, later->cfg, later->rt, other);
    sy__router_log(c->r, SY_LOG_WARN, "%s: %s", warn.path, warn.message);
}

/* The error of a route whose breaker another router sharing the store
 * gives other settings. */
static int store_clash(sy_router *r, sy_error *err, const char *path,
                       const sy__brk_cfg *cfg, const struct sy_route *rt,
                       int other) {
    return sy__error_set(
        err, SY_EARG, path,
        "CircuitBreaker '%.80s': another router sharing the policy store "
        "(owner %d, process %llu) gives it other settings than route "
        "'%.80s' does: routes naming one breaker share its window and "
        "state, each call weighed by its own route's settings, until every "
        "router's routes give it the same",
        cfg->name ? cfg->name : rt->id, other,
        (unsigned long long)sy__store_owner_pid(r->policy, other), rt->id);
}

/* ---- lenient documents: a route of other settings is left out ---- */

/* A breaker key one of the document's routes gives settings other than
 * the live ones': the settings of the live routes that stay (base, 0:
 * none stays) and one of them. */
typedef struct lkey {
    uint64_t key;
    const sy__brk_cfg *base;
    const struct sy_route *rt;
} lkey;

static lkey *lkey_at(lkey *t, size_t cap, uint64_t key) {
    size_t m = cap - 1, i = (size_t)(key * 0x9e3779b97f4a7c15ull) & m;
    while (t[i].key && t[i].key != key)
        i = (i + 1) & m;
    return t[i].key ? &t[i] : NULL;
}

/* Route i of the document: its breaker, and whether it is the live
 * route of its id in source si (the same object, or the same meaning:
 * it stays as it is). */
typedef struct lroute {
    size_t i;
    uint64_t key;
    const sy__brk_cfg *cfg;
    int ri;
    const struct sy_route *live; /* it stays: the live route; else NULL */
} lroute;

/* Route i of the document is the live route of its position (shared by
 * its bytes): unchanged, its settings the live ones (as the walk decides
 * it, reading no route). */
static bool by_position(const sy_document *doc, const reuse_ctx *rctx,
                        size_t i) {
    uint32_t prev = doc->prev ? doc->prev[i] : UINT32_MAX;
    return prev < rctx->at_count && rctx->at[prev].route == doc->routes[i];
}

/* A lenient change set's document (change c->step): the routes its first
 * run found to leave out (none the first time), in document order. */
static int doc_leaves(commit *c, const sy_document *doc, sy__brk_skip **out,
                      size_t *nout, sy_error *err) {
    const sy__alloc *a = &c->r->alloc;
    size_t ns = 0;
    for (size_t k = 0; k < c->brk_leave_n; k++)
        ns += c->brk_leave[k].doc && c->brk_leave[k].change == c->step;
    if (!ns)
        return SY_OK;
    sy__brk_skip *sk = sy__malloc(a, ns * sizeof *sk);
    if (!sk)
        return sy__commit_nomem(err);
    ns = 0;
    for (size_t k = 0; k < c->brk_leave_n; k++) {
        const sy__brk_leave *l = &c->brk_leave[k];
        if (!l->doc || l->change != c->step)
            continue;
        /* positions rise with the index: the route at l->pos */
        size_t lo = 0, hi = doc->route_count;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (doc->positions[mid] < l->pos)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == doc->route_count || doc->positions[lo] != l->pos)
            continue; /* (cannot be: the same document) */
        size_t j = ns++;
        for (; j > 0 && sk[j - 1].i > lo; j--)
            sk[j] = sk[j - 1];
        sk[j] = (sy__brk_skip){lo, l->e};
    }
    *out = sk;
    *nout = ns;
    return SY_OK;
}

int sy__commit_brk_left_out(commit *c, sy_report *rep, bool *left,
                            sy_error *err) {
    *left = false;
    for (size_t k = 0; k < c->brk_leave_n && !*left; k++) {
        const sy__brk_leave *l = &c->brk_leave[k];
        if (l->doc || l->change != c->step)
            continue;
        *left = true;
        if (sy__report_add_issue(rep, &l->e) ||
            (!rep->diff &&
             sy__diff_routes(&c->r->alloc, NULL, 0, NULL, 0, &rep->diff)))
            return sy__commit_nomem(err);
    }
    return SY_OK;
}

int sy__commit_brk_lenient(commit *c, uint32_t si, const sy_document *doc,
                           const reuse_ctx *rctx, sy__brk_skip **out,
                           size_t *nout, sy_error *err) {
    sy_router *r = c->r;
    const sy__alloc *a = &r->alloc;
    *out = NULL;
    *nout = 0;
    /* a change set is weighed whole at its publish (sy__commit_brk_check):
     * a route here may clash with another change's, or be left alone by
     * a later change giving the live ones its settings */
    if (c->may_leave)
        return doc_leaves(c, doc, out, nout, err);
    if (!r->set_n) /* no live route names a breaker */
        return SY_OK;
    size_t n = doc->route_count, m = 0, nk = 0;
    lroute *v = sy__malloc(a, (n + 1) * sizeof *v);
    if (!v)
        return sy__commit_nomem(err);
    const sy_snapshot *w = c->work;
    /* the routes the walk will change (a re-apply reads none), then, if
     * one gives a breaker other settings, those kept as they are (which
     * may be the ones that stay) */
    for (int pass = 0; pass < 2 && (pass == 0 || nk); pass++)
        for (size_t i = 0; i < n; i++) {
            if (by_position(doc, rctx, i) != (pass == 1))
                continue;
            const struct sy_route *rt = doc->routes[i];
            const sy__brk_cfg *cfg;
            int ri;
            uint64_t key = sy__router_breaker_of(r, rt, &cfg, &ri), fp0;
            uint32_t n0;
            if (!key || !set_find(r, key, &fp0, &n0))
                continue;
            /* whether it stays as it is: looked up below, for the keys of
             * other settings only */
            v[m++] = (lroute){i, key, cfg, ri, NULL};
            nk += cfg->fp != fp0;
        }
    if (!nk) { /* every one gives its breaker the live settings */
        sy__free(a, v);
        return SY_OK;
    }
    size_t cap = 16;
    while (cap < 2 * nk)
        cap *= 2;
    lkey *t = sy__calloc(a, cap, sizeof *t);
    if (!t) {
        sy__free(a, v);
        return sy__commit_nomem(err);
    }
    for (size_t k = 0; k < m; k++) {
        uint64_t fp0;
        uint32_t n0;
        set_find(r, v[k].key, &fp0, &n0);
        if (v[k].cfg->fp == fp0)
            continue;
        size_t h = (size_t)(v[k].key * 0x9e3779b97f4a7c15ull) & (cap - 1);
        while (t[h].key && t[h].key != v[k].key)
            h = (h + 1) & (cap - 1);
        t[h].key = v[k].key;
    }
    /* the live routes that stay: another source's (every one, once), or
     * one the document keeps as it is */
    for (uint32_t i = 0; i < w->slot_count; i++) {
        const sy__slot *sl = sy__snapshot_slot(w, i);
        const sy__brk_cfg *cfg;
        lkey *e;
        if (!sl->route || sl->source == si)
            continue;
        uint64_t key = sy__router_breaker_of(r, sl->route, &cfg, NULL);
        if (key && (e = lkey_at(t, cap, key)) && !e->base)
            e->base = cfg, e->rt = sl->route;
    }
    for (size_t k = 0; k < m; k++) {
        lkey *e = lkey_at(t, cap, v[k].key);
        if (!e || e->base)
            continue;
        const struct sy_route *rt = doc->routes[v[k].i];
        uint32_t slot = sy__snapshot_find_slot(w, rt->id);
        const sy__slot *sl = slot != SY_NONE ? sy__snapshot_slot(w, slot) : 0;
        if (sl && sl->source == si &&
            (sl->route == rt ||
             sy__def_route_fp(sl->route) == sy__def_route_fp(rt)))
            e->base = v[k].cfg, e->rt = v[k].live = sl->route;
    }
    /* the document's routes of other settings than those, in its order */
    int rc = SY_OK;
    size_t ns = 0, scap = 0;
    sy__brk_skip *sk = NULL;
    for (size_t k = 0; k < m && rc == SY_OK; k++) {
        lkey *e = lkey_at(t, cap, v[k].key);
        if (!e || !e->base || e->base->fp == v[k].cfg->fp)
            continue;
        if (ns == scap) {
            sy__brk_skip *g = sy__grow(a, sk, &scap, ns + 1, 4, sizeof *sk);
            if (!g) {
                rc = sy__commit_nomem(err);
                break;
            }
            sk = g;
        }
        const struct sy_route *rt = doc->routes[v[k].i];
        char path[96], how[160];
        int p = snprintf(path, sizeof path, "%s[%u]",
                         doc->envelope ? "routes" : "", doc->positions[v[k].i]);
        if (v[k].ri >= 0 && p > 0 && (size_t)p < sizeof path)
            snprintf(path + p, sizeof path - (size_t)p, ".filters[%d]",
                     v[k].ri);
        sy__brk_first_diff(v[k].cfg, e->base, how, sizeof how);
        sk[ns].i = v[k].i;
        sy__error_set(&sk[ns].e, SY_EARG, path, SY__BRK_CLASH,
                      v[k].cfg->name ? v[k].cfg->name : rt->id, how, e->rt->id);
        ns++;
    }
    sy__free(a, t);
    sy__free(a, v);
    if (rc) {
        sy__free(a, sk);
        return rc;
    }
    /* in document order, for the walk (the kept routes came second; none
     * of them is left out, being the live settings: a few, sorted) */
    for (size_t k = 1; k < ns; k++)
        for (size_t j = k; j > 0 && sk[j - 1].i > sk[j].i; j--) {
            sy__brk_skip x = sk[j];
            sk[j] = sk[j - 1];
            sk[j - 1] = x;
        }
    *out = sk;
    *nout = ns;
    return SY_OK;
}

void sy__commit_brk_follow(commit *c) {
    for (size_t i = 0; i < c->brk_final_n; i++)
        set_put(c->r, c->brk_final[i].key, c->brk_final[i].fp,
                c->brk_final[i].count);
    c->brk_final_n = 0;
    sy__brk_store *bs = c->brk_store;
    if (bs && bs->n)
        store_follow(c);
    if (bs)
        bs->n = 0;
}

void sy__commit_brk_free(commit *c) {
    const sy__alloc *a = &c->r->alloc;
    sy__free(a, c->brk_at);
    sy__free(a, c->brk_d);
    sy__free(a, c->brk_final);
    sy__free(a, c->brk_leave);
    c->brk_leave = NULL;
    c->brk_leave_n = 0;
    if (c->brk_store) {
        sy__free(a, c->brk_store->v);
        sy__free(a, c->brk_store->at);
        sy__free(a, c->brk_store);
    }
    c->brk_store = NULL;
    c->brk_at = NULL;
    c->brk_d = NULL;
    c->brk_final = NULL;
    c->brk_at_n = c->brk_at_cap = c->brk_d_n = c->brk_d_cap = 0;
    c->brk_final_n = 0;
}
