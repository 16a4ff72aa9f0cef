/*
 * service_select.c - instance selection (route model section 7): the
 * balancing structures built per candidate group (smooth weighted
 * round-robin schedules, alias tables for weighted random), the
 * round-robin / random picks, sy_service_select, and parsing the policy
 * settings of a route's metadata. The hash pick lives in service_ring.c.
 *
 * Selection is: pick the base group (one map lookup when a version header
 * is present), optionally descend to the hint child and the zone child
 * (one lookup each), and balance inside that group. Because every
 * candidate set is a precomputed group, round robin is exact over each
 * cycle of the group's schedule. No lock, no allocation; the only mutable
 * state is the group's atomic round-robin counter.
 */
#include "service_int.h"

#include <stdlib.h>

/* ---- balancing structures (build side) ---- */

static int svc_u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * nginx's smooth weighted round robin, simulated per weight class: every
 * step each member's current weight grows by its weight, the largest wins
 * (first in order on ties) and loses the total. After t steps member i
 * holds t*w_i - W*picks_i, so members of one class differ only by their
 * pick count and take turns in index order: one candidate per class.
 */
static int svc_build_schedule(sy_service *s, svc_group *g, const uint64_t *w) {
    uint64_t W = g->total, n = g->n;
    uint64_t *order = sy_calloc(&s->alloc, n, sizeof *order);
    if (!order)
        return SY_ENOMEM;
    for (uint32_t k = 0; k < n; k++)
        order[k] = (w[k] << 32) | k;
    qsort(order, n, sizeof *order, svc_u64_cmp);
    size_t nclass = 0;
    for (size_t k = 0; k < n; k++)
        if (k == 0 || (order[k] >> 32) != (order[k - 1] >> 32))
            nclass++;
    if (nclass * W > SVC_SCHED_WORK) {
        sy_free(&s->alloc, order);
        return 1; /* too much work: caller uses the permutation */
    }
    struct cls {
        uint64_t w, start, m, q;
    } *cl = sy_calloc(&s->alloc, nclass, sizeof *cl);
    g->sched = svc_arena_array(s, W, sizeof *g->sched);
    if (!cl || !g->sched) {
        sy_free(&s->alloc, order);
        sy_free(&s->alloc, cl);
        return SY_ENOMEM;
    }
    size_t c = 0;
    for (size_t k = 0; k < n; k++) {
        if (k == 0 || (order[k] >> 32) != (order[k - 1] >> 32)) {
            cl[c].w = order[k] >> 32;
            cl[c].start = k;
            c++;
        }
        cl[c - 1].m++;
    }
    for (uint64_t t = 1; t <= W; t++) {
        size_t best = 0;
        long long bestv = 0;
        uint32_t bestpos = 0;
        for (size_t k = 0; k < nclass; k++) {
            uint32_t pos = (uint32_t)order[cl[k].start + cl[k].q % cl[k].m];
            long long v =
                (long long)(t * cl[k].w) - (long long)(W * (cl[k].q / cl[k].m));
            if (k == 0 || v > bestv || (v == bestv && pos < bestpos)) {
                best = k;
                bestv = v;
                bestpos = pos;
            }
        }
        cl[best].q++;
        g->sched[t - 1] = g->members[bestpos];
    }
    sy_free(&s->alloc, order);
    sy_free(&s->alloc, cl);
    return 0;
}

/*
 * Walker/Vose alias table in integers: n buckets of capacity W (the total
 * weight), member k brings w_k * n. A bucket keeps its own member up to
 * prob[k] and lends the rest to alias[k], so member k is drawn with
 * probability exactly w_k / W in O(1): one bucket draw, one threshold.
 */
static int svc_build_alias(sy_service *s, svc_group *g, const uint64_t *w) {
    uint32_t n = g->n;
    uint64_t W = g->total;
    uint64_t *left = sy_calloc(&s->alloc, n, sizeof *left);
    uint32_t *stack = sy_calloc(&s->alloc, n, sizeof *stack);
    g->prob = svc_arena_array(s, n, sizeof *g->prob);
    g->alias = svc_arena_array(s, n, sizeof *g->alias);
    if (!left || !stack || !g->prob || !g->alias) {
        sy_free(&s->alloc, left);
        sy_free(&s->alloc, stack);
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
    sy_free(&s->alloc, left);
    sy_free(&s->alloc, stack);
    return 0;
}

int svc_finish_group(sy_service *s, svc_group *g) {
    if (g->n == 0)
        return 0;
    uint64_t *w = sy_calloc(&s->alloc, g->n, sizeof *w);
    if (!w)
        return SY_ENOMEM;
    uint64_t d = 0;
    for (uint32_t k = 0; k < g->n; k++)
        d = svc_gcd(s->inst[g->members[k]].pub.weight, d);
    g->cum = svc_arena_array(s, g->n, sizeof *g->cum);
    if (!g->cum) {
        sy_free(&s->alloc, w);
        return SY_ENOMEM;
    }
    uint64_t total = 0;
    for (uint32_t k = 0; k < g->n; k++) {
        w[k] = s->inst[g->members[k]].pub.weight / d;
        total += w[k];
        g->cum[k] = total;
    }
    g->total = total;
    int rc = svc_build_alias(s, g, w);
    if (rc) {
        sy_free(&s->alloc, w);
        return rc;
    }
    uint64_t limit = (uint64_t)g->n * SVC_SCHED_PER_MEMBER;
    if (limit < SVC_SCHED_MIN)
        limit = SVC_SCHED_MIN;
    rc = 1;
    if (total <= limit)
        rc = svc_build_schedule(s, g, w);
    sy_free(&s->alloc, w);
    if (rc < 0)
        return rc;
    if (rc > 0) {
        /* A step near total/phi, coprime with total: i -> i*step mod total
         * is a permutation, so each cycle is still exact. */
        uint64_t step =
            (uint64_t)(((svc_u128)total * 0x9e3779b97f4a7c15ull) >> 64);
        while (svc_gcd(step, total) != 1)
            step++;
        g->step = step;
    }
    return 0;
}

/* ---- selection ---- */

int sy_version_fallback_parse(const char *s, size_t len,
                              sy_version_fallback *out) {
    sy_str v = {s, len};
    if (sy_str_eq(v, "none", 4))
        *out = SY_VERSION_FALLBACK_NONE;
    else if (sy_str_eq(v, "latest", 6))
        *out = SY_VERSION_FALLBACK_LATEST;
    else if (sy_str_eq(v, "any", 3))
        *out = SY_VERSION_FALLBACK_ANY;
    else
        return SY_EINVAL;
    return 0;
}

int sy_lb_policy_parse(const char *s, size_t len, sy_lb_policy *out) {
    sy_str v = {s, len};
    if (sy_str_eq(v, "round-robin", 11))
        *out = SY_LB_ROUND_ROBIN;
    else if (sy_str_eq(v, "random", 6))
        *out = SY_LB_RANDOM;
    else if (sy_str_eq(v, "hash", 4))
        *out = SY_LB_HASH;
    else
        return SY_EINVAL;
    return 0;
}

static uint32_t svc_cum_pick(const svc_group *g, uint64_t x) {
    const uint64_t *base = g->cum;
    size_t len = g->n;
    while (len > 1) {
        size_t half = len / 2;
        base += base[half - 1] <= x ? half : 0;
        len -= half;
    }
    return g->members[base - g->cum];
}

static uint32_t svc_pick_rr(const svc_group *g) {
    uint64_t c = atomic_fetch_add_explicit(&g->rr->v, 1, memory_order_relaxed);
    if (g->sched)
        return g->sched[c % g->total];
    uint64_t pos = (uint64_t)(((svc_u128)(c % g->total) * g->step) % g->total);
    return svc_cum_pick(g, pos);
}

static uint32_t svc_pick_random(const svc_group *g, uint64_t seed) {
    uint64_t r = sy_hash_mix(seed, SVC_HASH_SEED);
    uint64_t r2 = sy_hash_mix(r, seed);
    size_t k = (size_t)(((svc_u128)r * g->n) >> 64);
    uint64_t u = (uint64_t)(((svc_u128)r2 * g->total) >> 64);
    return g->members[u < g->prob[k] ? k : g->alias[k]];
}

/* Whether instance i may be chosen: not excluded, and (unless `panic`)
 * not ejected. */
static bool svc_eligible(const sy_service *s, uint32_t i,
                         const sy_select_params *p, bool panic, int64_t *now) {
    const svc_inst *in = &s->inst[i];
    for (size_t k = 0; k < p->exclude_count; k++)
        if (p->exclude[k] && strcmp(p->exclude[k], in->pub.id) == 0)
            return false;
    return panic || !svc_health_ejected(in, p, now);
}

/* The first eligible member of g or of its enclosing groups, starting
 * after `from` so retries spread; SY_NONE when there is none. */
static uint32_t svc_next_eligible(const sy_service *s, uint32_t g,
                                  uint32_t from, const sy_select_params *p,
                                  bool panic, int64_t *now) {
    for (; g != SY_NONE; g = s->groups[g].parent) {
        const svc_group *gr = &s->groups[g];
        uint32_t start = 0;
        while (start < gr->n && gr->members[start] <= from)
            start++;
        for (uint32_t k = 0; k < gr->n; k++) {
            uint32_t i = gr->members[(start + k) % gr->n];
            if (svc_eligible(s, i, p, panic, now))
                return i;
        }
    }
    return SY_NONE;
}

int sy_service_select_ex(const sy_service *s, const sy_select_params *p,
                         sy_selection *out, sy_pick *pick, sy_error *err) {
    if (!s)
        return sy_error_set(err, SY_ENOINSTANCE, "", "unknown service");
    if (!p || !out)
        return sy_error_set(err, SY_EINVAL, "", "NULL params or selection");
    if (s->up == 0)
        return s->n == 0
                   ? sy_error_set(err, SY_ENOINSTANCE, "",
                                  "service \"%s\" has no instances", s->name)
                   : sy_error_set(err, SY_ENOINSTANCE, "",
                                  "no instance of service \"%s\" is up",
                                  s->name);
    uint32_t g = p->untagged_oldest ? s->deflt_oldest : s->deflt;
    if (p->has_version) {
        g = svc_group_find(s, SY_NONE, 'v', p->version.ptr, p->version.len);
        if (g == SY_NONE || s->groups[g].n == 0) {
            if (p->fallback == SY_VERSION_FALLBACK_LATEST)
                g = s->latest;
            else if (p->fallback == SY_VERSION_FALLBACK_ANY)
                g = SVC_G_ALL;
            else
                return sy_error_set(
                    err, SY_ENOINSTANCE, "",
                    "no instance of version %.*s of service \"%s\"%s",
                    (int)(p->version.len > 64 ? 64 : p->version.len),
                    p->version.ptr ? p->version.ptr : "", s->name,
                    g == SY_NONE ? "" : " is up");
        }
    }
    if (p->hint.len) {
        uint32_t h = svc_group_find(s, g, 'h', p->hint.ptr, p->hint.len);
        if (h != SY_NONE)
            g = h;
    }
    if (p->zone.len) {
        uint32_t z = svc_group_find(s, g, 'z', p->zone.ptr, p->zone.len);
        if (z != SY_NONE)
            g = z;
    }
    const svc_group *gr = &s->groups[g];
    uint32_t i;
    if (p->policy == SY_LB_RANDOM)
        i = svc_pick_random(gr, p->seed);
    else if (p->policy == SY_LB_HASH && p->hash_key.ptr)
        i = svc_ring_pick(gr, p->hash_key);
    else
        i = svc_pick_rr(gr);
    int64_t now = 0;
    if (!svc_eligible(s, i, p, false, &now)) {
        uint32_t alt = svc_next_eligible(s, g, i, p, false, &now);
        if (alt == SY_NONE) /* every candidate left is ejected */
            alt = svc_next_eligible(s, g, i, p, true, &now);
        if (alt == SY_NONE)
            return sy_error_set(err, SY_ENOINSTANCE, "",
                                "every eligible instance of service \"%s\" "
                                "was already tried",
                                s->name);
        i = alt;
    }
    const svc_inst *in = &s->inst[i];
    out->id = in->pub.id;
    out->host = in->pub.host;
    out->port = in->pub.port;
    out->scheme = p->websocket ? (in->pub.secure ? "wss" : "ws")
                               : (in->pub.secure ? "https" : "http");
    out->service = s->name;
    if (pick)
        *pick = (sy_pick){&in->pub, in->version, in->zone, in->authority, in};
    return 0;
}

int sy_service_select(const sy_service *s, const sy_select_params *p,
                      sy_selection *out, sy_error *err) {
    return sy_service_select_ex(s, p, out, NULL, err);
}
