/*
 * router_core.c - what every part of the router stands on, below the
 * calls that change it (router.c) and the commit engine (commit.c): host
 * callbacks run with the re-entrancy guard, the sources table lookup, the
 * configuration each derived snapshot gets, graves of removed routes, the
 * route keys and host data of routes that go live or are freed, and the
 * documents each source keeps for rollback.
 */
#include "def/def.h"
#include "policy/breaker.h"
#include "policy/host_runs.h"
#include "policy/ratelimit.h"
#include "route/filter.h"
#include "router/report.h"
#include "router/router_int.h"
#include "snapshot/snapshot.h"

#include <stdio.h>

/* ---- callbacks and re-entrancy ---- */

static uintptr_t self_token(void) {
    return (uintptr_t)pthread_self();
}

bool sy__router_in_callback(sy_router *r) {
    return atomic_load_explicit(&r->callback_thread, memory_order_acquire) ==
           self_token();
}

void sy__router_cb_enter(sy_router *r) {
    atomic_store_explicit(&r->callback_thread, self_token(),
                          memory_order_release);
}

void sy__router_cb_leave(sy_router *r) {
    atomic_store_explicit(&r->callback_thread, 0, memory_order_release);
}

bool sy__router_lock_for_read(sy_router *r) {
    if (sy__router_in_callback(r))
        return false;
    pthread_mutex_lock(&r->lock);
    return true;
}

void sy__router_log(sy_router *r, sy_log_level lvl, const char *fmt, ...) {
    if (!r->opts.on_log)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    sy__router_cb_enter(r);
    r->opts.on_log(r->opts.callback_data, lvl, buf);
    sy__router_cb_leave(r);
}

void sy__router_held_cb(void *data, uint64_t gen, uint64_t age) {
    sy_router *r = data;
    if (!r->opts.on_retired_held)
        return;
    sy__router_cb_enter(r);
    r->opts.on_retired_held(r->opts.callback_data, gen, age);
    sy__router_cb_leave(r);
}

void sy__router_event(sy_router *r, const sy_report *rep) {
    if (!r->opts.on_event)
        return;
    sy__router_cb_enter(r);
    r->opts.on_event(r->opts.callback_data, rep);
    sy__router_cb_leave(r);
}

/* ---- helpers ---- */

const sy__alloc *sy__router_allocator(sy_router *r) {
    return &r->alloc;
}

int64_t sy__router_now_ms(sy_router *r) {
    return r->opts.clock_ms ? r->opts.clock_ms(r->opts.callback_data)
                            : sy__now_realtime_ms();
}

sy__source *sy__router_find_source(sy_router *r, const char *name) {
    for (size_t i = 0; name && i < r->source_count; i++)
        if (r->sources[i].name && strcmp(r->sources[i].name, name) == 0)
            return &r->sources[i];
    return NULL;
}

const sy_snapshot *sy__router_current(sy_router *r) {
    return (const sy_snapshot *)sy__pub_current(r->pub);
}

sy__snapshot_config sy__router_snapshot_config(sy_router *r) {
    sy__snapshot_config cfg = {0};
    cfg.strip_host_port = r->opts.strip_host_port;
    cfg.path_norm.mode = (int)r->opts.path_normalization;
    cfg.path_norm.merge_slashes = r->opts.merge_slashes;
    cfg.path_norm.escaped_slashes = (int)r->opts.escaped_slashes;
    cfg.budget.regex_units = r->opts.regex_budget;
    cfg.budget.max_repeats = r->opts.max_repeated_values;
    cfg.budget.max_rewrite = r->opts.max_rewritten_path;
    cfg.clock_ms = r->opts.clock_ms;
    cfg.clock_data = r->opts.callback_data;
    cfg.random = r->opts.random;
    cfg.policy = r->policy;
    cfg.defaults = r->defaults;
    cfg.key_limit = r->key_limit;
    cfg.sources = r->source_names;
    cfg.source_count = r->source_count;
    return cfg;
}

/* Drop the references of removed routes no live snapshot can still use. */
/* One of the live table's references to rt is buried. At the last one no
 * snapshot can reach rt: the host's data and the key go now (also when
 * something else still holds it, a kept document of the history: a
 * rollback that puts it back attaches it again). */
static void route_unlive(sy_router *r, struct sy_route *rt) {
    if (rt->live == UINT16_MAX || rt->live == 0 || --rt->live)
        return;
    if (rt->key != UINT32_MAX)
        sy__router_route_released(r, rt);
}

void sy__router_bury(sy_router *r) {
    uint64_t oldest = sy__pub_oldest_generation(r->pub);
    size_t k = 0;
    for (size_t i = 0; i < r->grave_count; i++) {
        if (r->graves[i].generation <= oldest) {
            route_unlive(r, r->graves[i].route);
            sy__route_unref(r->graves[i].route);
        } else
            r->graves[k++] = r->graves[i];
    }
    r->grave_count = k;
}

bool sy__router_graves_reserve(sy_router *r, size_t extra) {
    if (r->grave_count + extra <= r->grave_cap)
        return true;
    sy__grave *g = sy__grow(&r->alloc, r->graves, &r->grave_cap,
                            r->grave_count + extra, 64, sizeof *g);
    if (!g)
        return false;
    r->graves = g;
    return true;
}

/* ---- route keys and host data ---- */

static int policy_at(const struct sy_route *r, sy__builtin id,
                     const void **cfg);

/* The store key of the breaker rt's chain runs (the default filters',
 * else its own), or 0 when it runs none; its config in *cfg, its filter's
 * index in the route's chain in *ri (-1: the defaults'). */
/* (inlined: a route's attach and release call it, a policy-free route's
 * answer is two tests) */
static inline __attribute__((always_inline)) uint64_t
breaker_key(const sy_router *r, const struct sy_route *rt,
            const sy__brk_cfg **cfg, int *ri) {
    const void *v = NULL;
    int at = -1;
    /* a route known to run no breaker of its own: its filters are not
     * read (a large document's are out of the cache by its attach) */
    if (policy_at(r->defaults, SY_F_CIRCUIT_BREAKER, &v) < 0 &&
        !sy__route_policy_free(rt))
        at = policy_at(rt, SY_F_CIRCUIT_BREAKER, &v);
    const sy__brk_cfg *c = v;
    if (cfg)
        *cfg = c;
    if (ri)
        *ri = at;
    if (!c)
        return 0;
    /* the key the requests use (breaker.c): the name's, else the id's */
    return c->key ? c->key : sy__brk_key(rt->id, strlen(rt->id));
}

uint64_t sy__router_breaker_of(const sy_router *r, const struct sy_route *rt,
                               const sy__brk_cfg **cfg, int *ri) {
    return breaker_key(r, rt, cfg, ri);
}

/* ---- the router's use of breaker entries ---- */

/* The index of key in the use table, or of the empty place it would go. */
static size_t use_at(const sy_router *r, uint64_t key) {
    size_t m = r->use_cap - 1, i = (size_t)(key * 0x9e3779b97f4a7c15ull) & m;
    while (r->use_keys[i] && r->use_keys[i] != key)
        i = (i + 1) & m;
    return i;
}

static bool use_grow(sy_router *r) {
    size_t cap = r->use_cap ? r->use_cap * 2 : 64;
    uint64_t *k = sy__calloc(&r->alloc, cap, sizeof *k);
    uint32_t *c = sy__calloc(&r->alloc, cap, sizeof *c);
    if (!k || !c) {
        sy__free(&r->alloc, k);
        sy__free(&r->alloc, c);
        return false;
    }
    uint64_t *ok = r->use_keys;
    uint32_t *oc = r->use_counts;
    size_t on = r->use_cap;
    r->use_keys = k, r->use_counts = c, r->use_cap = cap;
    for (size_t i = 0; i < on; i++)
        if (ok[i]) {
            size_t j = use_at(r, ok[i]);
            k[j] = ok[i], c[j] = oc[i];
        }
    sy__free(&r->alloc, ok);
    sy__free(&r->alloc, oc);
    return true;
}

/* One more route (or check) of this router names breaker `key`: at the
 * first, the store's entry takes the router's bit (claimed when new).
 * SY_ELIMIT: the store has no free entry; SY_ENOMEM. */
static int brk_use(sy_router *r, uint64_t key) {
    size_t i = r->use_cap ? use_at(r, key) : 0;
    if (r->use_cap && r->use_keys[i]) { /* a count: never fails */
        r->use_counts[i]++;
        return SY_OK;
    }
    if ((r->use_n + 1) * 2 > r->use_cap) {
        if (!use_grow(r))
            return SY_ENOMEM;
        i = use_at(r, key);
    }
    if (!sy__store_breaker_hold(r->policy, key, r->brk_owner))
        return SY_ELIMIT;
    r->use_keys[i] = key;
    r->use_counts[i] = 1;
    r->use_n++;
    return SY_OK;
}

/* One fewer: at the last, the router's bit goes (the entry is freed when
 * no router has one). Deletion by backward shift (no tombstones). */
static void brk_unuse(sy_router *r, uint64_t key) {
    if (!r->use_cap)
        return;
    size_t i = use_at(r, key), m = r->use_cap - 1;
    if (!r->use_keys[i] || --r->use_counts[i])
        return;
    sy__store_breaker_drop(r->policy, key, r->brk_owner);
    r->use_n--;
    for (size_t j = (i + 1) & m; r->use_keys[j]; j = (j + 1) & m) {
        size_t h = (size_t)(r->use_keys[j] * 0x9e3779b97f4a7c15ull) & m;
        /* j's entry may move to the hole at i when its home is not in
         * (i, j] (cyclically) */
        if (((j - h) & m) >= ((j - i) & m)) {
            r->use_keys[i] = r->use_keys[j];
            r->use_counts[i] = r->use_counts[j];
            i = j;
        }
    }
    r->use_keys[i] = 0;
    r->use_counts[i] = 0;
}

uint32_t sy__router_brk_uses(const sy_router *r, uint64_t key) {
    if (!r->use_cap)
        return 0;
    size_t i = use_at(r, key);
    return r->use_keys[i] ? r->use_counts[i] : 0;
}

void sy__router_policy_free(sy_router *r) {
    sy__store_owner_give(r->policy, r->brk_owner);
    r->brk_owner = -1;
    sy__free(&r->alloc, r->use_keys);
    sy__free(&r->alloc, r->use_counts);
    r->use_keys = NULL;
    r->use_counts = NULL;
    r->use_n = r->use_cap = 0;
    sy__free(&r->alloc, r->set_keys);
    sy__free(&r->alloc, r->set_fps);
    sy__free(&r->alloc, r->set_counts);
    r->set_keys = r->set_fps = NULL;
    r->set_counts = NULL;
    r->set_n = r->set_cap = 0;
}

/* rt's breaker entry use and key, given back (released or not attached
 * after all). */
static void give_back(sy_router *r, struct sy_route *rt) {
    /* no snapshot reaches rt: its breaker entry loses a user (freed at
     * the last, so that route changes never use the store up) */
    uint64_t bk = breaker_key(r, rt, NULL, NULL);
    if (bk)
        brk_unuse(r, bk);
    uint32_t key = rt->key;
    rt->key = UINT32_MAX;
    if (key == UINT32_MAX)
        return;
    if (r->free_key_count == r->free_key_cap) {
        uint32_t *v = sy__grow(&r->alloc, r->free_keys, &r->free_key_cap,
                               r->free_key_count + 1, 64, sizeof *v);
        if (!v)
            return; /* the key is not reused: key_limit grows, no harm */
        r->free_keys = v;
    }
    r->free_keys[r->free_key_count++] = key;
}

void sy__router_route_released(sy_router *r, struct sy_route *rt) {
    if (r->opts.route_detach) {
        sy__router_cb_enter(r);
        r->opts.route_detach(r->opts.callback_data, rt, rt->more->host_data);
        sy__router_cb_leave(r);
    }
    sy__route_set_host_data(rt, NULL); /* (cannot fail for NULL) */
    give_back(r, rt);
}

void sy__router_release_all(sy_router *r) {
    const sy_snapshot *cur = sy__router_current(r);
    for (uint32_t i = 0; i < cur->slot_count; i++) {
        struct sy_route *rt = sy__snapshot_slot(cur, i)->route;
        if (rt && rt->key != UINT32_MAX)
            sy__router_route_released(r, rt);
    }
    for (size_t i = 0; i < r->grave_count; i++)
        if (r->graves[i].route->key != UINT32_MAX)
            sy__router_route_released(r, r->graves[i].route);
    for (size_t i = 0; i < r->pinned_count; i++) {
        if (r->pinned[i]->key != UINT32_MAX)
            sy__router_route_released(r, r->pinned[i]);
        sy__route_unref(r->pinned[i]);
    }
    sy__free(&r->alloc, r->pinned);
    r->pinned = NULL;
    r->pinned_count = r->pinned_cap = 0;
}

int sy__router_attach_route(sy_router *r, struct sy_route *rt) {
    /* the commit's check holds the entry: found, it cannot fail */
    uint64_t bk = breaker_key(r, rt, NULL, NULL);
    if (bk && brk_use(r, bk) != SY_OK)
        sy__router_log(r, SY_LOG_ERROR,
                       "route %s: no circuit-breaker entry: its calls pass "
                       "unbroken",
                       rt->id);
    rt->key =
        r->free_key_count ? r->free_keys[--r->free_key_count] : r->key_limit++;
    if (!r->opts.route_attach)
        return SY_OK;
    sy__router_cb_enter(r);
    void *data = r->opts.route_attach(r->opts.callback_data, rt);
    sy__router_cb_leave(r);
    if (sy__route_set_host_data(rt, data) == SY_OK)
        return SY_OK;
    /* no room for it: the host has it back, and rt is not attached */
    if (r->opts.route_detach) {
        sy__router_cb_enter(r);
        r->opts.route_detach(r->opts.callback_data, rt, data);
        sy__router_cb_leave(r);
    }
    give_back(r, rt);
    return SY_ENOMEM;
}

/* ---- documents kept for rollback ---- */

void sy__history_entry_free(sy_router *r, sy__history_entry *e) {
    for (size_t i = 0; i < e->count; i++)
        sy__route_unref(e->routes[i]); /* may call route_detach */
    sy__free(&r->alloc, e->routes);
    sy__free(&r->alloc, e->issues);
    sy__free(&r->alloc, e->version);
    memset(e, 0, sizeof *e);
}

/* An owned copy of `k` in *e (a reference to each route), or SY_ENOMEM
 * (nothing held). */
static int history_copy(sy_router *r, const sy__history_entry *k,
                        sy__history_entry *e) {
    const sy__alloc *a = &r->alloc;
    *e = *k;
    /* positions 0..count-1 (a document without invalid routes): none kept */
    bool dense = true;
    for (size_t i = 0; k->positions && dense && i < k->count; i++)
        dense = k->positions[i] == i;
    e->routes = sy__malloc(
        a, k->count * (sizeof *e->routes + (dense ? 0 : sizeof *e->positions)) +
               1);
    e->issues = k->issue_count
                    ? sy__malloc(a, k->issue_count * sizeof *e->issues)
                    : NULL;
    e->version = k->version ? sy__strdup(a, k->version) : NULL;
    if (!e->routes || (!e->issues && k->issue_count) ||
        (!e->version && k->version)) {
        sy__free(a, e->routes);
        sy__free(a, e->issues);
        sy__free(a, e->version);
        memset(e, 0, sizeof *e);
        return SY_ENOMEM;
    }
    if (k->issue_count)
        memcpy(e->issues, k->issues, k->issue_count * sizeof *e->issues);
    e->positions = dense ? NULL : (uint32_t *)(void *)(e->routes + e->count);
    for (size_t i = 0; i < e->count; i++)
        e->routes[i] = sy__route_ref(k->routes[i]);
    if (!dense)
        memcpy(e->positions, k->positions, e->count * sizeof *e->positions);
    return SY_OK;
}

int sy__history_push(sy_router *r, sy__source *s, const sy__history_entry *k,
                     size_t n) {
    const sy__alloc *a = &r->alloc;
    size_t cap = r->opts.history;
    if (n > cap) { /* the older ones would be dropped at once */
        k += n - cap;
        n = cap;
    }
    if (n == 0)
        return SY_OK;
    sy__history_entry *e = sy__calloc(a, n, sizeof *e);
    size_t made = 0;
    while (e && made < n && history_copy(r, &k[made], &e[made]) == SY_OK)
        made++;
    size_t keep = s->history_count < cap - n ? s->history_count : cap - n;
    if (made == n && keep + n > s->history_count) {
        sy__history_entry *h =
            sy__realloc(a, s->history, (keep + n) * sizeof *h);
        if (h)
            s->history = h;
        else
            made = SIZE_MAX; /* out of memory */
    }
    if (made != n) {
        for (size_t i = 0; e && i < n && i < made; i++)
            sy__history_entry_free(r, &e[i]);
        sy__free(a, e);
        return SY_ENOMEM;
    }
    /* the copies hold their references: the oldest may go now (k may
     * have borrowed from them) */
    size_t drop = s->history_count - keep;
    for (size_t i = 0; i < drop; i++)
        sy__history_entry_free(r, &s->history[i]);
    memmove(s->history, s->history + drop, keep * sizeof *s->history);
    memcpy(s->history + keep, e, n * sizeof *e);
    s->history_count = keep + n;
    sy__free(a, e);
    return SY_OK;
}

/* The index of the first filter of builtin `id` in r's compiled chain
 * (its policy in *cfg), or -1. */
static int policy_at(const struct sy_route *r, sy__builtin id,
                     const void **cfg) {
    for (size_t i = 0; r && r->more->cfilters && i < r->more->filter_count;
         i++) {
        sy__builtin got;
        const void *p = sy__filter_policy(r->more->cfilters[i], &got);
        if (p && got == id) {
            if (cfg)
                *cfg = p;
            return (int)i;
        }
    }
    return -1;
}

/* The route's path, for an error only: a document's routes pass the
 * check one after the other, none formatted when all pass. */
static void route_path(char *at, size_t n, const char *list, unsigned index) {
    if (list)
        snprintf(at, n, "%s[%u]", list, index);
    else
        snprintf(at, n, "route");
}

/* The default filters' RequestRateLimiter keyed by a path variable
 * (*at: its index), or NULL. */
static const sy__rl_cfg *default_var_limiter(const sy_router *r, int *at) {
    const void *v = NULL;
    *at = policy_at(r->defaults, SY_F_REQUEST_RATE_LIMITER, &v);
    const sy__rl_cfg *rl = v;
    return *at >= 0 && rl->kr.kind == SY_KR_PATH_VAR ? rl : NULL;
}

/* The first default filter whose template (a header
 * value, SetPath, ...) names a {NAME} route rt's requests do not all have
 * (rt NULL: any {NAME}: the defaults are a route without predicates), its
 * index (*field, *v, *n: the arg, the name); -1 when none. */
static int default_template_at(const sy_router *r, const struct sy_route *rt,
                               const char **field, const char **v, size_t *n) {
    const struct sy_route *d = r->defaults;
    for (size_t i = 0; d && i < d->more->filter_count; i++)
        if ((*v = sy__route_template_unbound(rt ? rt : d, &d->more->filters[i],
                                             field, n)))
            return (int)i;
    return -1;
}

bool sy__router_checks_every_route(const sy_router *r) {
    int at;
    const char *f, *v;
    size_t n;
    return r->dflt_path >= 0 ||
           policy_at(r->defaults, SY_F_CIRCUIT_BREAKER, NULL) >= 0 ||
           default_var_limiter(r, &at) ||
           default_template_at(r, NULL, &f, &v, &n) >= 0;
}

int sy__router_check_policies(sy_router *r, const struct sy_route *rt,
                              const char *list, unsigned index, bool claim,
                              uint64_t *bkey, sy_error *err) {
    static const sy__builtin once[2] = {SY_F_CIRCUIT_BREAKER, SY_F_RETRY};
    char p[300], at[64];
    /* SCG runs the default path filter on a forward: route's path (the
     * uri's, ForwardPathFilter); the host forwards to the uri's path as
     * written: accepted, its effect would be dropped */
    if (r->dflt_path >= 0 && rt->up_scheme == SY_SCHEME_FORWARD) {
        char who[128];
        route_path(at, sizeof at, list, index);
        snprintf(p, sizeof p, "defaultFilters[%d]", r->dflt_path);
        sy__host_name(r->opts.host_runs, who, sizeof who);
        return sy__error_set(
            err, SY_ENOTRUN, p,
            "%s: route '%s' (%s) is a forward: route; SCG applies the "
            "default filters to the uri's path, %s forwards to the uri's "
            "path as written: put it on the routes that answer",
            sy__def_spec(&r->defaults->more->filters[r->dflt_path])->name,
            rt->id, at, who);
    }
    /* a default limiter keyed by a path variable this route does not
     * capture: its every request would get the empty key, never a limit */
    int li;
    const sy__rl_cfg *rl = default_var_limiter(r, &li);
    if (rl && !sy__route_keys_limiter(rt, rl)) {
        route_path(at, sizeof at, list, index);
        snprintf(p, sizeof p, "defaultFilters[%d].args.key-resolver", li);
        return sy__error_set(
            err, SY_EARG, p,
            "RequestRateLimiter: key-resolver: #{@pathVariable:%s}: no Path "
            "or Host pattern of route '%s' (%s) captures {%s}: its every "
            "request would get the empty key (its status), never a limit",
            rl->kr.arg, rt->id, at, rl->kr.arg);
    }
    /* a default filter's template {NAME} this route's requests do not
     * all have: SCG fails them (500), the plan would expand it to "" */
    const char *tf, *tv;
    size_t tn;
    int ti = default_template_at(r, rt, &tf, &tv, &tn);
    if (ti >= 0) {
        route_path(at, sizeof at, list, index);
        bool sc = r->defaults->more->filters[ti].shortcut;
        snprintf(p, sizeof p, "defaultFilters[%d]%s%s", ti, sc ? "" : ".args.",
                 sc ? "" : tf);
        return sy__error_set(
            err, SY_EARG, p,
            "%s: %s: {%.*s}: not every request of route '%s' (%s) has it "
            "(no Path or Host predicate each of whose patterns captures "
            "it): SCG fails such a request (500)",
            sy__def_name(&r->defaults->more->filters[ti]), tf,
            (int)(tn > 80 ? 80 : tn), tv, rt->id, at);
    }
    /* a default breaker's fallbackUri with a {NAME} this route's requests
     * do not all have: their fallback would fail (500) */
    const void *bv = NULL;
    int bi = policy_at(r->defaults, SY_F_CIRCUIT_BREAKER, &bv);
    size_t vn = 0;
    const char *v = bi >= 0 ? sy__route_fallback_unbound(
                                  rt, ((const sy__brk_cfg *)bv)->fallback, &vn)
                            : NULL;
    if (v) {
        route_path(at, sizeof at, list, index);
        snprintf(p, sizeof p, "defaultFilters[%d].args.fallbackUri", bi);
        return sy__error_set(err, SY_EARG, p,
                             "CircuitBreaker: fallbackUri: {%.*s}: not every "
                             "request of route '%s' (%s) has it (no Path or "
                             "Host predicate each of whose patterns captures "
                             "it): its fallback would fail",
                             (int)(vn > 80 ? 80 : vn), v + 1, rt->id, at);
    }
    /* the common route: no policy of its own and no default breaker to
     * claim an entry for; its filters are not read (a large document's
     * routes are out of the cache by now) */
    if (sy__route_policy_free(rt) &&
        policy_at(r->defaults, SY_F_CIRCUIT_BREAKER, NULL) < 0)
        return 0;
    for (int k = 0; k < 2; k++) {
        int ri = policy_at(rt, once[k], NULL);
        if (ri >= 0 && policy_at(r->defaults, once[k], NULL) >= 0) {
            route_path(at, sizeof at, list, index);
            snprintf(p, sizeof p, "%s.filters[%d]", at, ri);
            const char *n = k ? "Retry" : "CircuitBreaker";
            return sy__error_set(err, SY_EARG, p,
                                 "a %s is already in the default filters; "
                                 "SCG would nest them, switchyard runs one "
                                 "per request",
                                 n);
        }
    }
    bi = policy_at(rt, SY_F_CIRCUIT_BREAKER, NULL);
    if (bi >= 0 && policy_at(r->defaults, SY_F_RETRY, NULL) >= 0) {
        route_path(at, sizeof at, list, index);
        snprintf(p, sizeof p, "%s.filters[%d]", at, bi);
        return sy__error_set(err, SY_EARG, p, SY__BREAKER_AFTER_RETRY);
    }
    const sy__brk_cfg *cfg;
    int ri;
    uint64_t key = breaker_key(r, rt, &cfg, &ri);
    if (bkey)
        *bkey = key;
    if (!key)
        return 0;
    /* a check claims nothing, but sees the room a claim would make by
     * reaping the routers of processes gone */
    if (!claim && !sy__store_breaker_room(r->policy, key))
        sy__store_reap(r->policy);
    if (!claim && sy__store_breaker_room(r->policy, key))
        return 0;
    if (claim && r->brk_held_count == r->brk_held_cap) {
        uint64_t *v = sy__grow(&r->alloc, r->brk_held, &r->brk_held_cap,
                               r->brk_held_count + 1, 16, sizeof *v);
        if (!v)
            return sy__error_set(err, SY_ENOMEM, "", "out of memory");
        r->brk_held = v;
    }
    int rc = claim ? brk_use(r, key) : SY_ELIMIT;
    if (rc == SY_OK) {
        r->brk_held[r->brk_held_count++] = key;
        return 0;
    }
    if (rc == SY_ENOMEM)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    route_path(at, sizeof at, list, index);
    if (ri < 0)
        snprintf(p, sizeof p, "%s", at);
    else
        snprintf(p, sizeof p, "%s.filters[%d]%s", at, ri,
                 cfg->name ? ".args.name" : "");
    return sy__error_set(
        err, SY_ELIMIT, p,
        "no free circuit-breaker entry in the policy store (%u in use): %s",
        r->policy->breakers,
        r->policy_mem ? "raise sy_router_options.policy_breakers"
                      : "format the store with more breakers "
                        "(sy_policy_store_init)");
}

void sy__router_drop_checked(sy_router *r) {
    for (size_t i = 0; i < r->brk_held_count; i++)
        brk_unuse(r, r->brk_held[i]);
    r->brk_held_count = 0;
}
