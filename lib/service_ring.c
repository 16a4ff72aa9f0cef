/*
 * service_ring.c - the consistent-hash rings of a service (policy
 * SY_LB_HASH): virtual nodes, sorting them, building a group's ring on
 * first use, handing rings on to the next version of the service, and the
 * lookup.
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
 *
 * When rings are built. Most services are never balanced by hash, and a
 * ring is tens of thousands of hashed and sorted points, so building one
 * for every group at every instance update was most of an update's cost.
 * A group's ring is built the first time a hash pick needs it:
 *
 *   group.ring (atomic pointer, NULL)
 *     pick: load (acquire) -> set: use it
 *           NULL -> build one, compare-and-swap NULL -> it (acq_rel):
 *                   won: use it;  lost: free ours, use the winner's
 *           build failed (memory): the owner is worked out from the
 *           members' virtual nodes directly, the same answer, slower
 *
 * Readers never wait on a lock. The writer keeps readers off the build
 * after an update: sy_service_inherit_rr hands the new version the rings
 * its predecessor had built (svc_ring_inherit), sharing a ring (refcounted)
 * where the group's members, their positions and weights are unchanged,
 * and building it at once where they changed. So a ring is built only for
 * groups a hash route has used, and only when their instances changed; a
 * route that turns to hash later builds on its first request.
 */
#include "service_int.h"

#include <stdlib.h>

/* A point being placed: its value and the instance owning it. */
typedef struct svc_point {
    uint64_t point;
    uint32_t inst;
} svc_point;

static uint64_t svc_idh(const svc_inst *in) {
    return sy_hash64(in->pub.id, in->idlen, ~0ull);
}

/* Ring order: by point, equal points (practically never) by a hash of
 * their id, so the ring does not depend on the order instances came in. */
static bool svc_point_less(const sy_service *s, uint64_t pa, uint32_t ia,
                           uint64_t pb, uint32_t ib) {
    if (pa != pb)
        return pa < pb;
    return svc_idh(&s->inst[ia]) < svc_idh(&s->inst[ib]);
}

/* The bucket index's size for `total` points: about 4 points a bucket. */
static unsigned svc_ring_bits(uint64_t total) {
    size_t nb = 2;
    unsigned bits = 1;
    while (nb * 4 < total && bits < 24) {
        nb <<= 1;
        bits++;
    }
    return bits;
}

static uint64_t svc_members_vnodes(const sy_service *s, const svc_group *g) {
    uint64_t v = 0;
    for (uint32_t k = 0; k < g->n; k++)
        v += svc_vnodes(&s->inst[g->members[k]]);
    return v;
}

/*
 * Fill ring r (arrays allocated, r->n points) with the virtual nodes of the
 * members of g. The points are uniform hashes, so one counting pass on
 * their top bits puts each in its bucket (the counts are the bucket index
 * the lookup needs) and an insertion sort inside each bucket (about 4
 * points) finishes the order. `tmp` has room for r->n points.
 */
static void svc_ring_fill(const sy_service *s, const svc_group *g, svc_ring *r,
                          svc_point *tmp) {
    size_t p = 0, nb = (size_t)1 << (64 - r->shift);
    memset(r->bucket, 0, (nb + 1) * sizeof *r->bucket);
    for (uint32_t k = 0; k < g->n; k++) {
        const svc_inst *in = &s->inst[g->members[k]];
        for (uint64_t j = 0, v = svc_vnodes(in); j < v; j++) {
            uint64_t h = sy_hash64(in->pub.id, in->idlen, j);
            tmp[p].point = h;
            tmp[p].inst = g->members[k];
            r->bucket[(h >> r->shift) + 1]++;
            p++;
        }
    }
    for (size_t b = 0; b < nb; b++)
        r->bucket[b + 1] += r->bucket[b];
    /* bucket[b] is now the first slot of bucket b; place, then sort each
     * bucket's few points by insertion */
    for (size_t i = 0; i < r->n; i++) {
        size_t at = r->bucket[tmp[i].point >> r->shift]++;
        r->points[at] = tmp[i].point;
        r->inst[at] = tmp[i].inst;
    }
    /* the placing moved each bucket's start to the next one's: shift back */
    memmove(r->bucket + 1, r->bucket, nb * sizeof *r->bucket);
    r->bucket[0] = 0;
    for (size_t b = 0; b < nb; b++)
        for (size_t i = r->bucket[b] + 1; i < r->bucket[b + 1]; i++) {
            uint64_t pt = r->points[i];
            uint32_t in = r->inst[i];
            size_t j = i;
            while (
                j > r->bucket[b] &&
                svc_point_less(s, pt, in, r->points[j - 1], r->inst[j - 1])) {
                r->points[j] = r->points[j - 1];
                r->inst[j] = r->inst[j - 1];
                j--;
            }
            r->points[j] = pt;
            r->inst[j] = in;
        }
}

static void svc_gring_unref(svc_gring *r) {
    while (r &&
           atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1) {
        svc_gring *base = r->base;
        sy_alloc a = r->alloc;
        sy_free(&a, r);
        r = base;
    }
}

static const svc_gring *svc_ring_get(const sy_service *s, uint32_t g);

/* A new ring (one reference) for non-twin group g, or NULL (memory). */
static svc_gring *svc_gring_build(const sy_service *s, uint32_t g) {
    const svc_group *gr = &s->groups[g];
    uint64_t total = svc_members_vnodes(s, gr);
    if (total == 0 || total > UINT32_MAX)
        return NULL;
    size_t head = (sizeof(svc_gring) + 7) & ~(size_t)7;
    svc_gring *r;
    if (g != SVC_G_ALL && total * SVC_RING_DENSE_DIV >= s->vnodes) {
        /* dense: walk the service ring, skipping non-members */
        const svc_gring *base = svc_ring_get(s, SVC_G_ALL);
        size_t words = (s->n + 63) / 64;
        if (!base || !(r = sy_malloc(&s->alloc, head + words * 8)))
            return NULL;
        memset(r, 0, sizeof *r);
        r->bits = (uint64_t *)(void *)((char *)r + head);
        memset(r->bits, 0, words * 8);
        for (uint32_t k = 0; k < gr->n; k++)
            r->bits[gr->members[k] / 64] |= 1ull << (gr->members[k] % 64);
        atomic_fetch_add_explicit(&((svc_gring *)base)->refs, 1,
                                  memory_order_relaxed);
        r->base = (svc_gring *)base;
        r->walk = &base->ring;
    } else {
        unsigned bits = svc_ring_bits(total);
        size_t nb = (size_t)1 << bits;
        size_t bytes = head + total * 8 + total * 4 + (nb + 1) * 4;
        svc_point *tmp = sy_malloc(&s->alloc, total * sizeof *tmp);
        r = tmp ? sy_malloc(&s->alloc, bytes) : NULL;
        if (!r) {
            sy_free(&s->alloc, tmp);
            return NULL;
        }
        memset(r, 0, sizeof *r);
        r->ring.points = (uint64_t *)(void *)((char *)r + head);
        r->ring.inst = (uint32_t *)(void *)(r->ring.points + total);
        r->ring.bucket = r->ring.inst + total;
        r->ring.n = total;
        r->ring.vnodes = total;
        r->ring.shift = 64 - bits;
        svc_ring_fill(s, gr, &r->ring, tmp);
        r->walk = &r->ring;
        sy_free(&s->alloc, tmp);
    }
    atomic_init(&r->refs, 1);
    r->alloc = s->alloc;
    return r;
}

/* The ring of group g (of its twin), built now if it was not; NULL when
 * building failed for memory. Lock-free. */
static const svc_gring *svc_ring_get(const sy_service *s, uint32_t g) {
    if (s->groups[g].twin != SY_NONE)
        g = s->groups[g].twin;
    svc_group *gr = &s->groups[g];
    svc_gring *r = atomic_load_explicit(&gr->ring, memory_order_acquire);
    if (r)
        return r;
    svc_gring *mine = svc_gring_build(s, g);
    if (!mine)
        return NULL;
    if (atomic_compare_exchange_strong_explicit(
            &gr->ring, &r, mine, memory_order_acq_rel, memory_order_acquire))
        return mine;
    svc_gring_unref(mine); /* another thread's build won: r is it */
    return r;
}

/* The owner of the first node at or after h on ring gr (wrapping). */
static inline uint32_t svc_ring_lookup(const svc_gring *gr, uint64_t h) {
    const svc_ring *r = gr->walk;
    size_t i = r->bucket[h >> r->shift];
    while (i < r->n && r->points[i] < h)
        i++;
    if (i == r->n)
        i = 0;
    if (gr->bits)
        while (!(gr->bits[r->inst[i] / 64] >> (r->inst[i] % 64) & 1))
            i = i + 1 == r->n ? 0 : i + 1;
    return r->inst[i];
}

/* Without a ring: the member owning the first virtual node at or after h
 * (wrapping to the first node), in ring order. O(virtual nodes). */
static uint32_t svc_ring_scan(const sy_service *s, const svc_group *g,
                              uint64_t h) {
    uint32_t best = SY_NONE, first = SY_NONE;
    uint64_t bp = 0, fp = 0;
    for (uint32_t k = 0; k < g->n; k++) {
        uint32_t m = g->members[k];
        const svc_inst *in = &s->inst[m];
        for (uint64_t j = 0, v = svc_vnodes(in); j < v; j++) {
            uint64_t p = sy_hash64(in->pub.id, in->idlen, j);
            if (first == SY_NONE || svc_point_less(s, p, m, fp, first)) {
                first = m;
                fp = p;
            }
            if (p >= h &&
                (best == SY_NONE || svc_point_less(s, p, m, bp, best))) {
                best = m;
                bp = p;
            }
        }
    }
    return best != SY_NONE ? best : first;
}

/* The first pick of a group whose ring is not built: build it (or, out
 * of memory, scan). Kept out of line so the common path stays short. */
__attribute__((noinline)) static uint32_t
svc_ring_pick_slow(const sy_service *s, const svc_group *g, uint64_t h) {
    const svc_gring *gr = svc_ring_get(s, (uint32_t)(g - s->groups));
    if (!gr)
        return svc_ring_scan(s, g, h);
    return svc_ring_lookup(gr, h);
}

uint32_t svc_ring_pick(const sy_service *s, const svc_group *g, sy_str key) {
    uint64_t h = sy_hash64(key.ptr, key.len, SVC_HASH_SEED);
    const svc_gring *gr = atomic_load_explicit(g->ringp, memory_order_acquire);
    if (__builtin_expect(gr == NULL, 0))
        return svc_ring_pick_slow(s, g, h);
    return svc_ring_lookup(gr, h);
}

/* Whether group g of a and group h of b have the same members at the same
 * positions with the same virtual nodes: then their rings are equal. */
static bool svc_same_members(const sy_service *a, uint32_t g,
                             const sy_service *b, uint32_t h) {
    const svc_group *x = &a->groups[g], *y = &b->groups[h];
    if (x->n != y->n)
        return false;
    for (uint32_t k = 0; k < x->n; k++) {
        uint32_t i = x->members[k];
        if (i != y->members[k] || !svc_same_id(a, i, b, i) ||
            svc_vnodes(&a->inst[i]) != svc_vnodes(&b->inst[i]))
            return false;
    }
    return true;
}

void svc_ring_inherit(sy_service *dst, const sy_service *src) {
    /* group 0 first: the dense groups' rings lean on it */
    for (uint32_t g = 0; g < dst->ngroups; g++) {
        svc_group *gr = &dst->groups[g];
        if (gr->twin != SY_NONE || gr->n == 0 ||
            atomic_load_explicit(&gr->ring, memory_order_relaxed))
            continue;
        uint32_t o = svc_counterpart(dst, src, g);
        if (o == SY_NONE)
            continue;
        if (src->groups[o].twin != SY_NONE)
            o = src->groups[o].twin;
        svc_gring *r =
            atomic_load_explicit(&src->groups[o].ring, memory_order_acquire);
        if (!r)
            continue; /* no hash pick used it: none for dst either */
        if (svc_same_members(dst, g, src, o) &&
            (!r->base ||
             r->base == atomic_load_explicit(&dst->groups[SVC_G_ALL].ring,
                                             memory_order_relaxed))) {
            atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
            atomic_store_explicit(&gr->ring, r, memory_order_release);
        } else {
            (void)svc_ring_get(dst, g); /* failing: readers build or scan */
        }
    }
}

void svc_ring_release(sy_service *s) {
    for (uint32_t g = 0; s->groups && g < s->ngroups; g++)
        svc_gring_unref(
            atomic_load_explicit(&s->groups[g].ring, memory_order_acquire));
}
