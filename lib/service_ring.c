/*
 * service_ring.c - the consistent-hash ring of a service (policy
 * SY_LB_HASH): virtual nodes, sorting them, building a ring, giving each
 * candidate group its ring, and the lookup.
 *
 * An instance of weight w owns 32 * min(w, 64) virtual nodes; node j of
 * instance `id` sits at point hash64(id, j), which depends on that instance
 * alone. A ring is all its nodes' points sorted, plus a bucket index over
 * the points' top `bits` bits (about 4 points per bucket):
 *
 *   0                                                            2^64-1
 *   |--bucket 0----|--bucket 1----|--bucket 2----|--bucket 3----|
 *   |  p0    p1    |        p2 p3 |  p4          |    p5    p6  |
 *      a     c              b  a     c                a     b      inst[]
 *   bucket[] = { 0,            2,             4,             5 }
 *                                   ^ h = hash64(key, SVC_HASH_SEED)
 *
 *   lookup(h):
 *     i = bucket[h >> shift]                 first point of h's bucket
 *     while (i < n && points[i] < h) i++     walk to the first point >= h
 *     if (i == n) i = 0                      past the last point: wrap
 *     if the group shares the service ring:
 *       while (inst[i] not in the group) i = (i + 1) % n
 *     return inst[i]                         owner of the next node
 *                                            clockwise from h (c above)
 *
 * Invariants:
 *  - points[] is ascending (equal points ordered by a hash of their id, so
 *    the ring does not depend on the order instances were given in);
 *    inst[i] owns points[i]; n is the total of the members' virtual nodes.
 *  - bucket[b] is the index of the first point whose top bits are >= b, so
 *    every point before it is < (b << shift) <= h: starting the walk there
 *    never skips the answer, and bucket[] is non-decreasing and <= n.
 *  - lookups run only on non-empty groups, so n > 0 and, on a shared ring,
 *    at least one node belongs to the group: every loop ends.
 *  - group "a" (every up instance) uses the service ring as is; another
 *    group shares it (with a membership bitmap) only when it holds at least
 *    1/SVC_RING_DENSE_DIV of its virtual nodes, so the skipping walk takes
 *    about SVC_RING_DENSE_DIV steps at most on average; smaller groups get
 *    a ring of their own.
 *  - adding or removing an instance moves only the keys that land on (or
 *    leave) its own nodes; changing a weight moves only the keys of the
 *    nodes added or removed.
 */
#include "service_int.h"

#include <stdlib.h>

typedef struct svc_point {
    uint64_t point, idh;
    uint32_t inst;
} svc_point;

static int svc_point_cmp(const void *a, const void *b) {
    const svc_point *x = a, *y = b;
    if (x->point != y->point)
        return x->point < y->point ? -1 : 1;
    return x->idh < y->idh ? -1 : x->idh > y->idh;
}

/* Sort ring points as svc_point_cmp orders them: an LSD radix sort on the
 * 64-bit point (4 passes of 16 bits; qsort with a comparator was most of an
 * instance update), then runs of equal points (practically never) by idh.
 * `tmp` has room for n points. */
static void svc_sort_points(svc_point *pts, svc_point *tmp, size_t n,
                            size_t *count /* 65536 + 1 */) {
    svc_point *src = pts, *dst = tmp;
    for (unsigned shift = 0; shift < 64; shift += 16) {
        memset(count, 0, 65537 * sizeof *count);
        for (size_t i = 0; i < n; i++)
            count[((src[i].point >> shift) & 0xffff) + 1]++;
        for (size_t d = 0; d < 65536; d++)
            count[d + 1] += count[d];
        for (size_t i = 0; i < n; i++)
            dst[count[(src[i].point >> shift) & 0xffff]++] = src[i];
        svc_point *t = src;
        src = dst;
        dst = t;
    }
    /* four passes: the result is back in pts */
    for (size_t i = 1; i < n; i++) {
        size_t j = i;
        while (j > 0 && svc_point_cmp(&pts[j - 1], &pts[j]) > 0) {
            svc_point t = pts[j];
            pts[j] = pts[j - 1];
            pts[j - 1] = t;
            j--;
        }
    }
}

static uint64_t svc_vnodes(const svc_inst *in) {
    uint32_t w = in->pub.weight;
    return (uint64_t)SVC_RING_VNODES *
           (w > SVC_RING_WEIGHT_CAP ? SVC_RING_WEIGHT_CAP : w);
}

/* Virtual node j of an instance sits at hash(id, seed j): it depends on
 * the instance alone, so adding or removing one instance moves only the
 * keys that land on (or leave) its own nodes. */
int svc_ring_build(sy_service *s, svc_ring *r, const uint32_t *members,
                   uint32_t n) {
    uint64_t total = 0;
    for (uint32_t k = 0; k < n; k++)
        total += svc_vnodes(&s->inst[members[k]]);
    r->vnodes = total;
    if (total == 0 || total > UINT32_MAX)
        return total ? SY_ENOMEM : 0;
    /* small rings: qsort; large ones: radix sort (needs scratch) */
    bool radix = total >= 4096;
    svc_point *pts =
        sy_calloc(&s->alloc, radix ? total * 2 : total, sizeof *pts);
    size_t *count = radix ? sy_malloc(&s->alloc, 65537 * sizeof *count) : NULL;
    if (!pts || (radix && !count)) {
        sy_free(&s->alloc, pts);
        sy_free(&s->alloc, count);
        return SY_ENOMEM;
    }
    size_t p = 0;
    for (uint32_t k = 0; k < n; k++) {
        const svc_inst *in = &s->inst[members[k]];
        size_t idlen = strlen(in->pub.id);
        uint64_t idh = sy_hash64(in->pub.id, idlen, ~0ull);
        for (uint64_t j = 0, v = svc_vnodes(in); j < v; j++) {
            pts[p].point = sy_hash64(in->pub.id, idlen, j);
            pts[p].idh = idh;
            pts[p].inst = members[k];
            p++;
        }
    }
    if (radix)
        svc_sort_points(pts, pts + total, total, count);
    else
        qsort(pts, total, sizeof *pts, svc_point_cmp);
    sy_free(&s->alloc, count);
    size_t nb = 2;
    unsigned bits = 1;
    while (nb * 4 < total && bits < 24) { /* ~4 points per bucket */
        nb <<= 1;
        bits++;
    }
    r->n = total;
    r->shift = 64 - bits;
    r->points = svc_arena_array(s, total, sizeof *r->points);
    r->inst = svc_arena_array(s, total, sizeof *r->inst);
    r->bucket = svc_arena_array(s, nb, sizeof *r->bucket);
    if (!r->points || !r->inst || !r->bucket) {
        sy_free(&s->alloc, pts);
        return SY_ENOMEM;
    }
    for (size_t i = 0; i < total; i++) {
        r->points[i] = pts[i].point;
        r->inst[i] = pts[i].inst;
    }
    sy_free(&s->alloc, pts);
    size_t i = 0;
    for (size_t b = 0; b < nb; b++) {
        while (i < total && (r->points[i] >> r->shift) < b)
            i++;
        r->bucket[b] = (uint32_t)i;
    }
    return 0;
}

int svc_ring_attach(sy_service *s, svc_group *g, uint32_t id) {
    if (g->n == 0)
        return 0;
    if (id == SVC_G_ALL) {
        g->ring = &s->ring;
        return 0;
    }
    uint64_t v = 0;
    for (uint32_t k = 0; k < g->n; k++)
        v += svc_vnodes(&s->inst[g->members[k]]);
    if (v * SVC_RING_DENSE_DIV >= s->ring.vnodes) {
        size_t words = (s->n + 63) / 64;
        g->bits = svc_arena_array(s, words, sizeof *g->bits);
        if (!g->bits)
            return SY_ENOMEM;
        memset(g->bits, 0, words * sizeof *g->bits);
        for (uint32_t k = 0; k < g->n; k++)
            g->bits[g->members[k] / 64] |= 1ull << (g->members[k] % 64);
        g->ring = &s->ring;
        return 0;
    }
    g->ring = &g->own;
    return svc_ring_build(s, &g->own, g->members, g->n);
}

uint32_t svc_ring_pick(const svc_group *g, sy_str key) {
    const svc_ring *r = g->ring;
    uint64_t h = sy_hash64(key.ptr, key.len, SVC_HASH_SEED);
    size_t i = r->bucket[h >> r->shift];
    while (i < r->n && r->points[i] < h)
        i++;
    if (i == r->n)
        i = 0;
    if (g->bits)
        while (!(g->bits[r->inst[i] / 64] >> (r->inst[i] % 64) & 1))
            i = i + 1 == r->n ? 0 : i + 1;
    return r->inst[i];
}
