/*
 * service_hrw.c - the pick of policy SY_LB_HASH: weighted rendezvous
 * hashing (highest random weight) over a group's members.
 *
 * Every member i scores the key on its own:
 *
 *   h       = hash64(key, SVC_HASH_SEED)
 *   x_i     = mix(h, seed_i)            seed_i = hash64(id_i): the id alone
 *   u_i     = (top 53 bits of x_i + 1/2) / 2^53      uniform in (0, 1)
 *   score_i = -ln(u_i) / w_i            exponential with rate w_i
 *
 * and the lowest score wins (ties, practically never: the lower seed). The
 * minimum of independent exponentials of rates w_i is member i's with
 * probability w_i / sum(w), so each member's share of keys is its weight's
 * share, at any weight (1..2^32-1), with nothing to build per key range:
 *
 *   - a member's score depends on its id, its weight and the key only,
 *     never on the other instances;
 *   - an instance that leaves takes only its own keys away (every other
 *     score is unchanged), one that joins takes only the keys it now wins;
 *     a weight change moves keys only to (heavier) or from (lighter) that
 *     instance;
 *   - groups (versions, hints, zones) score their own members: a key
 *     stays on its instance while that instance stays in its group.
 *
 * Members of one weight need no log to be compared: score is decreasing
 * in u, so among them the highest x wins. The group keeps its members
 * ordered by weight (hmem, made at build), and a pick takes, per run of
 * one weight, the highest x (a mix and a compare per member, the seeds
 * read from one array), then one log per weight; a group of one weight
 * takes no log at all:
 *
 *   hmem:  [ a c f | b e | d ]      members (instance indices)
 *   hseed: [ seeds of a c f b e d ]
 *   hruns: [ {3, 1/1} {5, 1/2} {6, 1/4} ]   weights 1, 2, 4: 3 logs
 *
 * O(members) per request, nothing allocated, no lock, no lazily built
 * state: docs/performance.md has the instruction counts against the ring
 * this replaced (session 50).
 */
#include "service/service_int.h"

#include <math.h>
#include <stdlib.h>

static inline uint64_t hrw_x(uint64_t h, uint64_t seed) {
    uint64_t x = sy__hash_mix(h, seed);
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    return (x ^ (x >> 32)) >> 11; /* the 53 bits u is made of */
}

uint32_t sy__svc_hrw_pick(const sy__service *s, const sy__svc_group *g,
                          sy_str key) {
    (void)s;
    uint64_t h = sy__hash64(key.ptr, key.len, SVC_HASH_SEED);
    const uint64_t *seed = g->hseed;
    uint32_t best = 0, k = 0;
    double bs = INFINITY;
    for (uint32_t r = 0; r < g->hclasses; r++) {
        /* the run of one weight: its highest x (ties: the lower seed) */
        uint32_t rb = k, end = g->hruns[r].end;
        uint64_t rx = hrw_x(h, seed[k]);
        for (k++; k < end; k++) {
            uint64_t x = hrw_x(h, seed[k]);
            if (x > rx || (x == rx && seed[k] < seed[rb])) {
                rx = x;
                rb = k;
            }
        }
        if (g->hclasses == 1)
            return g->hmem[rb];
        double sc = -log(((double)rx + 0.5) * 0x1p-53) * g->hruns[r].inv;
        if (sc < bs || (sc == bs && seed[rb] < seed[best])) {
            bs = sc;
            best = rb;
        }
    }
    return g->hmem[best];
}

static int hrw_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int sy__svc_hrw_prepare(sy__service *s, sy__svc_group *g) {
    g->hclasses = 0;
    if (g->n == 0)
        return SY_OK;
    uint64_t *key = sy__malloc(&s->alloc, g->n * sizeof *key);
    g->hmem = sy__svc_arena_array(s, g->n, sizeof *g->hmem);
    g->hseed = sy__svc_arena_array(s, g->n, sizeof *g->hseed);
    if (!g->hmem || !g->hseed || !key) {
        sy__free(&s->alloc, key);
        return SY_ENOMEM;
    }
    for (uint32_t k = 0; k < g->n; k++) /* weight, then position */
        key[k] =
            (uint64_t)s->inst[g->members[k]].pub.weight << 32 | g->members[k];
    qsort(key, g->n, sizeof *key, hrw_cmp);
    uint32_t runs = 0;
    for (uint32_t k = 0; k < g->n; k++) {
        g->hmem[k] = (uint32_t)key[k];
        g->hseed[k] = s->inst[g->hmem[k]].hseed;
        runs += k == 0 || key[k] >> 32 != key[k - 1] >> 32;
    }
    g->hruns = sy__svc_arena_array(s, runs, sizeof *g->hruns);
    if (!g->hruns) {
        sy__free(&s->alloc, key);
        return SY_ENOMEM;
    }
    for (uint32_t k = 0; k < g->n; k++) {
        if (k + 1 < g->n && key[k + 1] >> 32 == key[k] >> 32)
            continue;
        g->hruns[g->hclasses].end = k + 1;
        g->hruns[g->hclasses++].inv = 1.0 / (double)(key[k] >> 32);
    }
    sy__free(&s->alloc, key);
    return SY_OK;
}
