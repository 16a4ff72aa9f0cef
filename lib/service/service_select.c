/*
 * service_select.c - instance selection (route model section 7): the
 * balancing structures built per candidate group (smooth weighted
 * round-robin schedules, alias tables for weighted random), the
 * round-robin / random picks, sy__service_select, and parsing the policy
 * settings of a route's metadata. The hash pick lives in service_hrw.c.
 *
 * Selection is: pick the base group (one map lookup when a version header
 * is present), optionally descend to the hint child and the zone child
 * (one lookup each), and balance inside that group. Because every
 * candidate set is a precomputed group, round robin is exact over each
 * cycle of the group's schedule. No lock; the only mutable state is the
 * group's atomic round-robin counter, and the smooth cycle of a group of
 * several weights, made by its first round-robin pick (sy__svc_wrr_get:
 * one allocation, then never again for that service version).
 */
#include "service/service_int.h"

#include <stdlib.h>

/* ---- balancing structures (build side) ---- */

/* A weight class of a schedule: members of one weight take turns. */
typedef struct sy__svc_class {
    int64_t v;      /* current weight of the class's next member */
    uint64_t w;     /* the weight */
    uint32_t start; /* its members in order[start .. start + m) */
    uint32_t m;
    uint32_t p; /* position of its next member among them */
} sy__svc_class;

/* Classes of the weights w[0..n): order[] gets the member positions
 * grouped by class, ascending inside a class. Distinct weights are few in
 * practice: a small table finds them; many fall back to a sort. Returns
 * the class count, 0 for memory. */
static size_t sy__svc_classes(const sy__alloc *a, const uint64_t *w, uint32_t n,
                              uint32_t *order, sy__svc_class **out) {
    enum { FEW = 16 };
    uint64_t few[FEW];
    size_t nc = 0;
    for (uint32_t k = 0; k < n && nc <= FEW; k++) {
        size_t c = 0;
        while (c < nc && few[c] != w[k])
            c++;
        if (c == nc && nc++ < FEW)
            few[c] = w[k];
    }
    if (nc <= FEW) {
        sy__svc_class *cl = sy__calloc(a, nc, sizeof *cl);
        uint8_t *of = sy__malloc(a, n);
        if (!cl || !of) {
            sy__free(a, cl);
            sy__free(a, of);
            return 0;
        }
        for (uint32_t k = 0; k < n; k++) {
            uint8_t c = 0;
            while (few[c] != w[k])
                c++;
            of[k] = c;
            cl[c].m++;
        }
        for (size_t c = 0; c < nc; c++) {
            cl[c].w = few[c];
            cl[c].start = c ? cl[c - 1].start + cl[c - 1].m : 0;
            cl[c].p = cl[c].start; /* fill cursor for now */
        }
        for (uint32_t k = 0; k < n; k++)
            order[cl[of[k]].p++] = k;
        for (size_t c = 0; c < nc; c++)
            cl[c].p = 0;
        sy__free(a, of);
        *out = cl;
        return nc;
    }
    uint64_t *key = sy__malloc(a, (size_t)n * sizeof *key);
    if (!key)
        return 0;
    for (uint32_t k = 0; k < n; k++)
        key[k] = (w[k] << 32) | k;
    if (!sy__sort_by_u64(a, key, n, sizeof *key, 0)) {
        sy__free(a, key);
        return 0;
    }
    nc = 0;
    for (uint32_t k = 0; k < n; k++)
        if (k == 0 || (key[k] >> 32) != (key[k - 1] >> 32))
            nc++;
    sy__svc_class *cl = sy__calloc(a, nc, sizeof *cl);
    if (!cl) {
        sy__free(a, key);
        return 0;
    }
    size_t c = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (k == 0 || (key[k] >> 32) != (key[k - 1] >> 32)) {
            cl[c].w = key[k] >> 32;
            cl[c].start = k;
            c++;
        }
        cl[c - 1].m++;
        order[k] = (uint32_t)key[k];
    }
    sy__free(a, key);
    *out = cl;
    return nc;
}

/*
 * The schedule loop below with each class's current weight and next
 * member packed in one integer, key = v * 2^32 + (2^32 - 1 - pos): the
 * largest key is the largest v, and on equal v the smallest position,
 * so a step is an add and a compare per class. A current weight is never
 * below -W (the winner is the largest, >= 0, before losing W) and never
 * above the step's winner, which the loop watches: it gives up (false,
 * nothing to undo but the classes) before any key could overflow.
 */
static bool sy__svc_schedule_packed(const sy__svc_group *g, sy__svc_class *cl,
                                    size_t nclass, const uint32_t *order,
                                    uint32_t *sched) {
    enum { MAXC = 16 };
    const int64_t two32 = (int64_t)1 << 32, W = (int64_t)g->total;
    int64_t key[MAXC], inc[MAXC];
    if (nclass > MAXC)
        return false;
    for (size_t k = 0; k < nclass; k++) {
        key[k] = (int64_t)UINT32_MAX - order[cl[k].start];
        inc[k] = (int64_t)cl[k].w * two32;
    }
    for (int64_t t = 0; t < W; t++) {
        size_t best = 0;
        int64_t bk = key[0] += inc[0];
        for (size_t k = 1; k < nclass; k++) {
            int64_t kk = key[k] += inc[k];
            best = kk > bk ? k : best;
            bk = kk > bk ? kk : bk;
        }
        if (bk >= (int64_t)1 << 61) /* v >= 2^29: stop well before 2^31 */
            return false;
        sy__svc_class *c = &cl[best];
        uint32_t pos = order[c->start + c->p];
        if (++c->p == c->m) {
            c->p = 0;
            key[best] -= W * two32;
        }
        key[best] += (int64_t)pos - (int64_t)order[c->start + c->p];
        sched[t] = g->members[pos];
    }
    return true;
}

/* Group g's weights divided by their gcd into w[0, g->n); returns their
 * sum. The gcd stops at 1 (the usual: a weight of 1, or two coprime ones)
 * and then nothing is divided: each step of Euclid's loop and each
 * division is a 64-bit divide, tens of cycles, per member. */
static uint64_t sy__svc_reduced_weights(const sy__service *s,
                                        const sy__svc_group *g, uint64_t *w) {
    uint64_t d = 0, total = 0;
    for (uint32_t k = 0; k < g->n && d != 1; k++)
        d = sy__svc_gcd(s->inst[g->members[k]].pub.weight, d);
    for (uint32_t k = 0; k < g->n; k++) {
        uint64_t x = s->inst[g->members[k]].pub.weight;
        w[k] = d == 1 ? x : x / d;
        total += w[k];
    }
    return total;
}

/* The smooth cycle of classes cl[0, nclass) (order: their members'
 * positions) into sched[0, g->total): the slow loop where the packed one
 * gives up. */
static void sy__svc_schedule_fill(const sy__svc_group *g, sy__svc_class *cl,
                                  size_t nclass, const uint32_t *order,
                                  uint32_t *sched) {
    uint64_t W = g->total;
    if (sy__svc_schedule_packed(g, cl, nclass, order, sched))
        return;
    for (size_t k = 0; k < nclass; k++)
        cl[k].v = cl[k].p = 0;
    for (uint64_t t = 0; t < W; t++) {
        size_t best = 0;
        int64_t bestv = 0;
        uint32_t bestpos = 0;
        for (size_t k = 0; k < nclass; k++) {
            sy__svc_class *c = &cl[k];
            c->v += (int64_t)c->w;
            uint32_t pos = order[c->start + c->p];
            if (k == 0 || c->v > bestv || (c->v == bestv && pos < bestpos)) {
                best = k;
                bestv = c->v;
                bestpos = pos;
            }
        }
        sy__svc_class *c = &cl[best];
        if (++c->p == c->m) {
            c->p = 0;
            c->v -= (int64_t)W;
        }
        sched[t] = g->members[bestpos];
    }
}

/*
 * nginx's smooth weighted round robin, simulated per weight class: every
 * step each member's current weight grows by its weight, the largest wins
 * (first in order on ties) and loses the total. After t steps member i
 * holds t*w_i - W*picks_i, so members of one class differ only by their
 * pick count and take turns in index order: one candidate per class,
 * whose current weight grows by w each step and drops by W each time the
 * class has given every member a turn. One class (equal weights): the
 * cycle is the member array. With more, the cycle (W steps of a loop over
 * the classes: ~60 instructions a step, 300,000 for a service of 1,000
 * instances in three zones) is only marked wanted here (g->smooth) and
 * built on the group's first round-robin pick: most groups of an update
 * (zone, hint and version groups, groups of services balanced at random
 * or by hash) are never picked by round robin.
 */
static int sy__svc_build_schedule(sy__service *s, sy__svc_group *g,
                                  const uint64_t *w) {
    uint64_t W = g->total;
    uint32_t n = g->n;
    if (W == n) { /* weights reduced by their gcd: all 1, one class */
        g->sched = g->members;
        return 0;
    }
    /* the classes are counted only when their bound n could be too many */
    size_t nclass = n;
    if (n * W > SVC_SCHED_WORK) {
        uint32_t *order = sy__malloc(&s->alloc, (size_t)n * sizeof *order);
        sy__svc_class *cl = NULL;
        nclass = order ? sy__svc_classes(&s->alloc, w, n, order, &cl) : 0;
        sy__free(&s->alloc, order);
        sy__free(&s->alloc, cl);
        if (nclass == 0)
            return SY_ENOMEM;
    }
    if (nclass * W > SVC_SCHED_WORK)
        return 1; /* too much work: caller uses the permutation */
    g->smooth = true;
    return 1; /* the permutation too: the pick's fallback for memory */
}

/* The smooth cycle of non-twin group g (its `smooth` set), made now, or
 * NULL for memory. */
static uint32_t *sy__svc_wrr_make(const sy__service *s,
                                  const sy__svc_group *g) {
    const sy__alloc *a = &s->alloc;
    uint32_t n = g->n;
    uint64_t *w = sy__malloc(a, (size_t)n * sizeof *w);
    uint32_t *order = sy__malloc(a, (size_t)n * sizeof *order);
    uint32_t *sched = sy__malloc(a, (size_t)g->total * sizeof *sched);
    sy__svc_class *cl = NULL;
    size_t nclass = 0;
    if (w && order && sched) {
        (void)sy__svc_reduced_weights(s, g, w);
        nclass = sy__svc_classes(a, w, n, order, &cl);
    }
    if (nclass)
        sy__svc_schedule_fill(g, cl, nclass, order, sched);
    else {
        sy__free(a, sched);
        sched = NULL;
    }
    sy__free(a, w);
    sy__free(a, order);
    sy__free(a, cl);
    return sched;
}

/* Group g's smooth cycle, built by the first pick that needs it
 * (lock-free: racing builders publish one and free the others); NULL
 * when it cannot be had (memory): the pick then takes the permutation. */
static const uint32_t *sy__svc_wrr_get(const sy__service *s,
                                       const sy__svc_group *g) {
    sy__svc_group *o =
        (sy__svc_group *)(uintptr_t)(g->twin != SY_NONE ? &s->groups[g->twin]
                                                        : g);
    uint32_t *c = atomic_load_explicit(&o->wrr, memory_order_acquire);
    if (c)
        return c;
    uint32_t *mine = sy__svc_wrr_make(s, o);
    if (!mine)
        return NULL;
    uint32_t *none = NULL;
    if (atomic_compare_exchange_strong_explicit(
            &o->wrr, &none, mine, memory_order_acq_rel, memory_order_acquire))
        return mine;
    sy__free(&s->alloc, mine);
    return none;
}

void sy__svc_wrr_inherit(sy__service *dst, const sy__service *src) {
    for (uint32_t g = 0; g < dst->ngroups; g++) {
        sy__svc_group *gr = &dst->groups[g];
        if (!gr->smooth || gr->twin != SY_NONE ||
            atomic_load_explicit(&gr->wrr, memory_order_relaxed))
            continue;
        uint32_t o = sy__svc_counterpart_owner(dst, src, g);
        if (o == SY_NONE)
            continue;
        if (atomic_load_explicit(&src->groups[o].wrr, memory_order_acquire))
            (void)sy__svc_wrr_get(dst, gr); /* failing: the first pick */
    }
}

void sy__svc_wrr_release(sy__service *s) {
    for (uint32_t g = 0; s->groups && g < s->ngroups; g++)
        if (s->groups[g].twin == SY_NONE)
            sy__free(&s->alloc, atomic_load_explicit(&s->groups[g].wrr,
                                                     memory_order_acquire));
}

/*
 * Walker/Vose alias table in integers: n buckets of capacity W (the total
 * weight), member k brings w_k * n. A bucket keeps its own member up to
 * prob[k] and lends the rest to alias[k], so member k is drawn with
 * probability exactly w_k / W in O(1): one bucket draw, one threshold.
 */
static int sy__svc_build_alias(sy__service *s, sy__svc_group *g,
                               const uint64_t *w) {
    uint32_t n = g->n;
    uint64_t W = g->total;
    uint64_t *left = sy__malloc(&s->alloc, n * sizeof *left);
    uint32_t *stack = sy__malloc(&s->alloc, n * sizeof *stack);
    g->prob = sy__svc_arena_array(s, n, sizeof *g->prob);
    g->alias = sy__svc_arena_array(s, n, sizeof *g->alias);
    if (!left || !stack || !g->prob || !g->alias) {
        sy__free(&s->alloc, left);
        sy__free(&s->alloc, stack);
        return SY_ENOMEM;
    }
    uint32_t small = 0, large = n; /* small grows up, large grows down */
    for (uint32_t k = 0; k < n; k++) {
        left[k] = w[k] * n;
        g->prob[k] = W;
        g->alias[k] = k;
        if (left[k] < W)
            stack[small++] = k;
        else
            stack[--large] = k;
    }
    while (small > 0 && large < n) {
        uint32_t l = stack[--small], h = stack[large];
        g->prob[l] = left[l];
        g->alias[l] = h;
        left[h] -= W - left[l];
        if (left[h] < W) {
            large++;
            stack[small++] = h;
        }
    }
    sy__free(&s->alloc, left);
    sy__free(&s->alloc, stack);
    return 0;
}

int sy__svc_finish_group(sy__service *s, sy__svc_group *g) {
    if (g->n == 0)
        return 0;
    uint64_t *w = sy__malloc(&s->alloc, g->n * sizeof *w);
    g->cum = sy__svc_arena_array(s, g->n, sizeof *g->cum);
    if (!w || !g->cum) {
        sy__free(&s->alloc, w);
        return SY_ENOMEM;
    }
    uint64_t total = sy__svc_reduced_weights(s, g, w);
    for (uint64_t k = 0, sum = 0; k < g->n; k++)
        g->cum[k] = sum += w[k];
    g->total = total;
    int rc = sy__svc_build_alias(s, g, w);
    if (rc) {
        sy__free(&s->alloc, w);
        return rc;
    }
    uint64_t limit = (uint64_t)g->n * SVC_SCHED_PER_MEMBER;
    if (limit < SVC_SCHED_MIN)
        limit = SVC_SCHED_MIN;
    rc = 1;
    if (total <= limit)
        rc = sy__svc_build_schedule(s, g, w);
    sy__free(&s->alloc, w);
    if (rc < 0)
        return rc;
    if (rc > 0) {
        /* A step near total/phi, coprime with total: i -> i*step mod total
         * is a permutation, so each cycle is still exact. */
        uint64_t step =
            (uint64_t)(((sy__svc_u128)total * 0x9e3779b97f4a7c15ull) >> 64);
        while (sy__svc_gcd(step, total) != 1)
            step++;
        g->step = step;
    }
    return 0;
}

/* ---- selection ---- */

int sy__version_fallback_parse(const char *s, size_t len,
                               sy__version_fallback *out) {
    sy_str v = {s, len};
    if (sy__str_eq(v, "none", 4))
        *out = SY_VERSION_FALLBACK_NONE;
    else if (sy__str_eq(v, "latest", 6))
        *out = SY_VERSION_FALLBACK_LATEST;
    else if (sy__str_eq(v, "any", 3))
        *out = SY_VERSION_FALLBACK_ANY;
    else
        return SY_EINVAL;
    return 0;
}

int sy__lb_policy_parse(const char *s, size_t len, sy__lb_policy *out) {
    sy_str v = {s, len};
    if (sy__str_eq(v, "round-robin", 11))
        *out = SY_LB_ROUND_ROBIN;
    else if (sy__str_eq(v, "random", 6))
        *out = SY_LB_RANDOM;
    else if (sy__str_eq(v, "hash", 4))
        *out = SY_LB_HASH;
    else
        return SY_EINVAL;
    return 0;
}

static uint32_t sy__svc_cum_pick(const sy__svc_group *g, uint64_t x) {
    const uint64_t *base = g->cum;
    size_t len = g->n;
    while (len > 1) {
        size_t half = len / 2;
        base += base[half - 1] <= x ? half : 0;
        len -= half;
    }
    return g->members[base - g->cum];
}

static uint32_t sy__svc_pick_rr(const sy__service *s, const sy__svc_group *g) {
    uint64_t c = atomic_fetch_add_explicit(&g->rr->v, 1, memory_order_relaxed);
    if (g->sched)
        return g->sched[c % g->total];
    const uint32_t *wrr = g->smooth ? sy__svc_wrr_get(s, g) : NULL;
    if (wrr)
        return wrr[c % g->total];
    uint64_t pos =
        (uint64_t)(((sy__svc_u128)(c % g->total) * g->step) % g->total);
    return sy__svc_cum_pick(g, pos);
}

static uint32_t sy__svc_pick_random(const sy__svc_group *g, uint64_t seed) {
    uint64_t r = sy__hash_mix(seed, SVC_HASH_SEED);
    uint64_t r2 = sy__hash_mix(r, seed);
    size_t k = (size_t)(((sy__svc_u128)r * g->n) >> 64);
    uint64_t u = (uint64_t)(((sy__svc_u128)r2 * g->total) >> 64);
    return g->members[u < g->prob[k] ? k : g->alias[k]];
}

/* Whether instance i may be chosen: not excluded, and (unless `panic`)
 * not ejected. */
static bool sy__svc_eligible(const sy__service *s, uint32_t i,
                             const sy__select_params *p, bool panic,
                             int64_t *now) {
    const sy__svc_inst *in = &s->inst[i];
    for (size_t k = 0; k < p->exclude_count; k++)
        if (p->exclude[k] && strcmp(p->exclude[k], in->pub.id) == 0)
            return false;
    /* an instance never ejected (the usual) answers without the call */
    return panic ||
           atomic_load_explicit(&in->health->ejected_until,
                                memory_order_relaxed) == 0 ||
           !sy__svc_health_ejected(in, p, now);
}

/* The first eligible member of g or of its enclosing groups, starting
 * after `from` so retries spread; SY_NONE when there is none. */
static uint32_t sy__svc_next_eligible(const sy__service *s, uint32_t g,
                                      uint32_t from, const sy__select_params *p,
                                      bool panic, int64_t *now) {
    for (; g != SY_NONE; g = s->groups[g].parent) {
        const sy__svc_group *gr = &s->groups[g];
        uint32_t start = 0;
        while (start < gr->n && gr->members[start] <= from)
            start++;
        for (uint32_t k = 0; k < gr->n; k++) {
            uint32_t i = gr->members[(start + k) % gr->n];
            if (sy__svc_eligible(s, i, p, panic, now))
                return i;
        }
    }
    return SY_NONE;
}

int sy__service_select_ex(const sy__service *s, const sy__select_params *p,
                          sy_selection *out, sy__pick *pick, sy_error *err) {
    if (!s)
        return sy__error_set(err, SY_ENOINSTANCE, "", "unknown service");
    if (!p || !out)
        return sy__error_set(err, SY_EINVAL, "", "NULL params or selection");
    if (s->up == 0)
        return s->n == 0
                   ? sy__error_set(err, SY_ENOINSTANCE, "",
                                   "service \"%s\" has no instances", s->name)
                   : sy__error_set(err, SY_ENOINSTANCE, "",
                                   "no instance of service \"%s\" is up",
                                   s->name);
    uint32_t g = p->untagged_oldest ? s->deflt_oldest : s->deflt;
    if (p->has_version) {
        g = sy__svc_group_find(s, SY_NONE, 'v', p->version.ptr, p->version.len);
        if (g == SY_NONE || s->groups[g].n == 0) {
            if (p->fallback == SY_VERSION_FALLBACK_LATEST)
                g = s->latest;
            else if (p->fallback == SY_VERSION_FALLBACK_ANY)
                g = SVC_G_ALL;
            else
                return sy__error_set(
                    err, SY_ENOINSTANCE, "",
                    "no instance of version %.*s of service \"%s\"%s",
                    (int)(p->version.len > 64 ? 64 : p->version.len),
                    p->version.ptr ? p->version.ptr : "", s->name,
                    g == SY_NONE ? "" : " is up");
        }
    }
    if (p->hint.len) {
        uint32_t h = sy__svc_group_find(s, g, 'h', p->hint.ptr, p->hint.len);
        if (h != SY_NONE)
            g = h;
    }
    if (p->zone.len) {
        uint32_t z = sy__svc_group_find(s, g, 'z', p->zone.ptr, p->zone.len);
        if (z != SY_NONE)
            g = z;
    }
    const sy__svc_group *gr = &s->groups[g];
    uint32_t i;
    if (p->policy == SY_LB_RANDOM)
        i = sy__svc_pick_random(gr, p->seed);
    else if (p->policy == SY_LB_HASH && p->hash_key.ptr)
        i = sy__svc_hrw_pick(s, gr, p->hash_key);
    else
        i = sy__svc_pick_rr(s, gr);
    int64_t now = 0;
    if (!sy__svc_eligible(s, i, p, false, &now)) {
        uint32_t alt = sy__svc_next_eligible(s, g, i, p, false, &now);
        if (alt == SY_NONE) /* every candidate left is ejected */
            alt = sy__svc_next_eligible(s, g, i, p, true, &now);
        if (alt == SY_NONE)
            return sy__error_set(err, SY_ENOINSTANCE, "",
                                 "every eligible instance of service \"%s\" "
                                 "was already tried",
                                 s->name);
        i = alt;
    }
    const sy__svc_inst *in = &s->inst[i];
    out->id = in->pub.id;
    out->host = in->pub.host;
    out->port = in->pub.port;
    out->scheme = p->websocket ? (in->pub.secure ? "wss" : "ws")
                               : (in->pub.secure ? "https" : "http");
    out->service = s->name;
    if (pick)
        *pick = (sy__pick){.instance = &in->pub,
                           .version = in->version,
                           .zone = in->zone,
                           .authority = in->authority,
                           .authority_len = in->authority_len,
                           .health = in};
    return 0;
}

int sy__service_select(const sy__service *s, const sy__select_params *p,
                       sy_selection *out, sy_error *err) {
    return sy__service_select_ex(s, p, out, NULL, err);
}
