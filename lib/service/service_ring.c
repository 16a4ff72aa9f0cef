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
 * after an update: sy__service_inherit_rr hands the new version the rings
 * its predecessor had built (sy__svc_ring_inherit), sharing a ring (refcounted)
 * where the group's members, their positions and weights are unchanged,
 * and making it at once where they changed: from the predecessor's ring by
 * one merge walk when few nodes come or go (sy__svc_gring_merge), else from
 * scratch. So a ring is built only for
 * groups a hash route has used, and only when their instances changed; a
 * route that turns to hash later builds on its first request.
 */
#include "service/service_int.h"

#include <stdlib.h>

/* A point being placed: its value and the instance owning it. */
typedef struct sy__svc_point {
    uint64_t point;
    uint32_t inst;
} sy__svc_point;

static uint64_t sy__svc_idh(const sy__svc_inst *in) {
    return sy__hash64(in->pub.id, in->idlen, ~0ull);
}

/* Ring order: by point, equal points (practically never) by a hash of
 * their id, so the ring does not depend on the order instances came in. */
static bool sy__svc_point_less(const sy__service *s, uint64_t pa, uint32_t ia,
                               uint64_t pb, uint32_t ib) {
    if (pa != pb)
        return pa < pb;
    return sy__svc_idh(&s->inst[ia]) < sy__svc_idh(&s->inst[ib]);
}

/* The bucket index's size for `total` points: about 4 points a bucket. */
static unsigned sy__svc_ring_bits(uint64_t total) {
    size_t nb = 2;
    unsigned bits = 1;
    while (nb * 4 < total && bits < 24) {
        nb <<= 1;
        bits++;
    }
    return bits;
}

static uint64_t sy__svc_members_vnodes(const sy__service *s,
                                       const sy__svc_group *g) {
    uint64_t v = 0;
    for (uint32_t k = 0; k < g->n; k++)
        v += sy__svc_vnodes(&s->inst[g->members[k]]);
    return v;
}

/*
 * Sort n points (tmp) into points[] / inst[] in ring order and fill
 * bucket[] (1 << (64 - shift) + 1 entries) with the first index of each
 * bucket. The points are uniform hashes, so one counting pass on their top
 * bits puts each in its bucket (the counts are the bucket index the lookup
 * needs) and an insertion sort inside each bucket (about 4 points)
 * finishes the order. `s` owns the instances tmp[].inst names.
 */
static void sy__svc_points_place(const sy__service *s, const sy__svc_point *tmp,
                                 size_t n, uint64_t *points, uint32_t *inst,
                                 uint32_t *bucket, unsigned shift) {
    size_t nb = (size_t)1 << (64 - shift);
    memset(bucket, 0, (nb + 1) * sizeof *bucket);
    for (size_t i = 0; i < n; i++)
        bucket[(tmp[i].point >> shift) + 1]++;
    for (size_t b = 0; b < nb; b++)
        bucket[b + 1] += bucket[b];
    for (size_t i = 0; i < n; i++) {
        size_t at = bucket[tmp[i].point >> shift]++;
        points[at] = tmp[i].point;
        inst[at] = tmp[i].inst;
    }
    /* the placing moved each bucket's start to the next one's: shift back */
    memmove(bucket + 1, bucket, nb * sizeof *bucket);
    bucket[0] = 0;
    for (size_t b = 0; b < nb; b++)
        for (size_t i = bucket[b] + 1; i < bucket[b + 1]; i++) {
            uint64_t pt = points[i];
            uint32_t in = inst[i];
            size_t j = i;
            while (j > bucket[b] &&
                   sy__svc_point_less(s, pt, in, points[j - 1], inst[j - 1])) {
                points[j] = points[j - 1];
                inst[j] = inst[j - 1];
                j--;
            }
            points[j] = pt;
            inst[j] = in;
        }
}

/* Fill ring r (arrays allocated, r->n points, r->shift set) with the
 * virtual nodes of the members of g. `tmp` has room for r->n points. */
static void sy__svc_ring_fill(const sy__service *s, const sy__svc_group *g,
                              sy__svc_ring *r, sy__svc_point *tmp) {
    size_t p = 0;
    for (uint32_t k = 0; k < g->n; k++) {
        const sy__svc_inst *in = &s->inst[g->members[k]];
        for (uint64_t j = 0, v = sy__svc_vnodes(in); j < v; j++) {
            tmp[p].point = sy__hash64(in->pub.id, in->idlen, j);
            tmp[p].inst = g->members[k];
            p++;
        }
    }
    sy__svc_points_place(s, tmp, r->n, r->points, r->inst, r->bucket, r->shift);
}

/* The bucket index of a ring whose points are in place. */
static void sy__svc_ring_index(sy__svc_ring *r) {
    size_t nb = (size_t)1 << (64 - r->shift), b = 0;
    for (size_t i = 0; i < r->n; i++)
        for (size_t top = r->points[i] >> r->shift; b <= top; b++)
            r->bucket[b] = (uint32_t)i;
    for (; b <= nb; b++)
        r->bucket[b] = (uint32_t)r->n;
}

static void sy__svc_gring_unref(sy__svc_gring *r) {
    while (r &&
           atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1) {
        sy__svc_gring *base = r->base;
        sy__alloc a = r->alloc;
        sy__free(&a, r);
        r = base;
    }
}

static const sy__svc_gring *sy__svc_ring_get(const sy__service *s, uint32_t g);

/* A new ring (one reference) for non-twin group g, or NULL (memory). */
/* A ring of its own for `total` points (arrays in the same block, refs 1,
 * points not filled), or NULL. */
static sy__svc_gring *sy__svc_gring_own(const sy__service *s, uint64_t total) {
    size_t head = (sizeof(sy__svc_gring) + 7) & ~(size_t)7;
    unsigned bits = sy__svc_ring_bits(total);
    size_t nb = (size_t)1 << bits;
    sy__svc_gring *r =
        sy__malloc(&s->alloc, head + total * 8 + total * 4 + (nb + 1) * 4);
    if (!r)
        return NULL;
    memset(r, 0, sizeof *r);
    r->ring.points = (uint64_t *)(void *)((char *)r + head);
    r->ring.inst = (uint32_t *)(void *)(r->ring.points + total);
    r->ring.bucket = r->ring.inst + total;
    r->ring.n = total;
    r->ring.vnodes = total;
    r->ring.shift = 64 - bits;
    r->walk = &r->ring;
    atomic_init(&r->refs, 1);
    r->alloc = s->alloc;
    return r;
}

/* Whether non-twin group g of s walks the service ring (dense) rather
 * than a ring of its own, for members with `total` virtual nodes. */
static bool sy__svc_dense(const sy__service *s, uint32_t g, uint64_t total) {
    return g != SVC_G_ALL && total * SVC_RING_DENSE_DIV >= s->vnodes;
}

/* A new ring (one reference) for non-twin group g, or NULL (memory). */
static sy__svc_gring *sy__svc_gring_build(const sy__service *s, uint32_t g) {
    const sy__svc_group *gr = &s->groups[g];
    uint64_t total = sy__svc_members_vnodes(s, gr);
    if (total == 0 || total > UINT32_MAX)
        return NULL;
    sy__svc_gring *r;
    if (sy__svc_dense(s, g, total)) {
        /* dense: walk the service ring, skipping non-members */
        size_t head = (sizeof(sy__svc_gring) + 7) & ~(size_t)7;
        const sy__svc_gring *base = sy__svc_ring_get(s, SVC_G_ALL);
        size_t words = (s->n + 63) / 64;
        if (!base || !(r = sy__malloc(&s->alloc, head + words * 8)))
            return NULL;
        memset(r, 0, sizeof *r);
        r->bits = (uint64_t *)(void *)((char *)r + head);
        memset(r->bits, 0, words * 8);
        for (uint32_t k = 0; k < gr->n; k++)
            r->bits[gr->members[k] / 64] |= 1ull << (gr->members[k] % 64);
        atomic_fetch_add_explicit(&((sy__svc_gring *)base)->refs, 1,
                                  memory_order_relaxed);
        r->base = (sy__svc_gring *)base;
        r->walk = &base->ring;
        atomic_init(&r->refs, 1);
        r->alloc = s->alloc;
        return r;
    }
    sy__svc_point *tmp = sy__malloc(&s->alloc, total * sizeof *tmp);
    r = tmp ? sy__svc_gring_own(s, total) : NULL;
    if (r)
        sy__svc_ring_fill(s, gr, &r->ring, tmp);
    sy__free(&s->alloc, tmp);
    return r;
}

/* Sort n points of service s in ring order into pts[] (inst[] beside),
 * using scratch bucket space; false for memory. */
static bool sy__svc_points_sort(const sy__service *s, const sy__svc_point *tmp,
                                size_t n, uint64_t *pts, uint32_t *inst) {
    unsigned bits = sy__svc_ring_bits(n);
    uint32_t *bucket =
        sy__malloc(&s->alloc, (((size_t)1 << bits) + 1) * sizeof *bucket);
    if (!bucket)
        return false;
    sy__svc_points_place(s, tmp, n, pts, inst, bucket, 64 - bits);
    sy__free(&s->alloc, bucket);
    return true;
}

/* Whether node (pa of a's instance ia) comes before (pb of b's ib). */
static bool sy__svc_node_less(const sy__service *a, uint64_t pa, uint32_t ia,
                              const sy__service *b, uint64_t pb, uint32_t ib) {
    if (pa != pb)
        return pa < pb;
    return sy__svc_idh(&a->inst[ia]) < sy__svc_idh(&b->inst[ib]);
}

/*
 * The ring of dst's group g made from src's own ring r of the counterpart
 * group o instead of from scratch: a node is the hash of (id, j), so an
 * instance that keeps its id keeps its nodes j < min(old, new vnodes).
 * Only the nodes that come (new instances, grown weights) and go (left or
 * shrunk instances) are hashed and sorted; each is located in r through
 * its bucket index, and the runs of r between those places are copied
 * with their instances renumbered to dst's positions:
 *
 *   r:      p1(a) p2(b) p3(c) p4(a) p5(c)      b left, c shrank (p5 goes)
 *   come:   p0(d) p6(d)          at 0, 5       d joined
 *   go:     p2(b) p5(c)          at 1, 4
 *   result: p0(d) | p1(a') | p3(c') p4(a') | p6(d)
 *                   run 0..1   run 2..4
 *
 * NULL (caller builds from scratch) for memory, or when many nodes come or
 * go (then hashing them costs about what a build costs).
 */
/* The state of one merge, shared by its phases. */
typedef struct ring_merge {
    const sy__service *dst, *src;
    const sy__svc_group *gr, *og; /* the group in dst, its counterpart */
    const sy__svc_ring *old;      /* the ring being merged from */
    uint32_t *to;   /* per src instance: its index in dst, or SY_NONE */
    uint32_t *keep; /* per src instance: the nodes it keeps */
    size_t nc, nt;  /* coming nodes, all nodes (coming, then going) */
    uint64_t *np;   /* the nodes' points, sorted (coming ones first) */
    uint32_t *ni;   /* their instances */
    uint32_t *at;   /* their places in old */
} ring_merge;

/* Is src instance j a member of group og (members ascending)? */
static bool group_has(const sy__svc_group *og, uint32_t j) {
    uint32_t lo = 0, hi = og->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (og->members[mid] < j)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < og->n && og->members[lo] == j;
}

/* Phase 1: where each src member went (mg->to, mg->keep), and how many
 * nodes come (*ncome) and go (*ngo). */
static void merge_plan(ring_merge *mg, uint64_t *ncome, uint64_t *ngo) {
    const sy__service *dst = mg->dst, *src = mg->src;
    for (size_t j = 0; j < src->n; j++)
        mg->to[j] = SY_NONE;
    *ncome = *ngo = 0;
    for (uint32_t k = 0; k < mg->gr->n; k++) {
        uint32_t i = mg->gr->members[k];
        uint32_t j = sy__svc_match(dst, i, src);
        uint64_t vn = sy__svc_vnodes(&dst->inst[i]);
        if (j == SY_NONE || !group_has(mg->og, j)) {
            *ncome += vn;
            continue;
        }
        uint64_t vo = sy__svc_vnodes(&src->inst[j]);
        mg->to[j] = i;
        mg->keep[j] = (uint32_t)(vn < vo ? vn : vo);
        *ncome += vn > vo ? vn - vo : 0;
    }
    for (uint32_t k = 0; k < mg->og->n; k++) {
        uint32_t j = mg->og->members[k];
        *ngo += sy__svc_vnodes(&src->inst[j]) -
                (mg->to[j] == SY_NONE ? 0 : mg->keep[j]);
    }
}

/* Phase 2: the coming nodes (new instances, grown weights) and the going
 * ones (left or shrunk instances) hashed into tmp, sorted into np/ni.
 * False when their count is not what phase 1 said, or for memory. */
static bool merge_nodes(ring_merge *mg, sy__svc_point *tmp) {
    const sy__service *dst = mg->dst, *src = mg->src;
    size_t nc = 0, ng = 0;
    for (uint32_t k = 0; k < mg->gr->n; k++) {
        uint32_t i = mg->gr->members[k];
        uint32_t j = sy__svc_match(dst, i, src);
        const sy__svc_inst *in = &dst->inst[i];
        uint64_t from = j != SY_NONE && mg->to[j] == i ? mg->keep[j] : 0;
        for (uint64_t v = from, vn = sy__svc_vnodes(in); v < vn; v++) {
            tmp[nc].point = sy__hash64(in->pub.id, in->idlen, v);
            tmp[nc].inst = i;
            nc++;
        }
    }
    for (uint32_t k = 0; k < mg->og->n; k++) {
        uint32_t j = mg->og->members[k];
        const sy__svc_inst *in = &src->inst[j];
        for (uint64_t v = mg->to[j] == SY_NONE ? 0 : mg->keep[j],
                      vo = sy__svc_vnodes(in);
             v < vo; v++) {
            tmp[nc + ng].point = sy__hash64(in->pub.id, in->idlen, v);
            tmp[nc + ng].inst = j;
            ng++;
        }
    }
    mg->nc = nc;
    return nc + ng == mg->nt &&
           sy__svc_points_sort(dst, tmp, nc, mg->np, mg->ni) &&
           sy__svc_points_sort(src, tmp + nc, ng, mg->np + nc, mg->ni + nc);
}

/* Phase 3: each node's place in the old ring: a coming node goes before
 * the first node after it; a going node is found where it is. */
static bool merge_places(ring_merge *mg) {
    const sy__svc_ring * or = mg->old;
    for (size_t e = 0; e < mg->nt; e++) {
        bool come = e < mg->nc;
        const sy__service *es = come ? mg->dst : mg->src;
        uint64_t p = mg->np[e];
        uint32_t pi = mg->ni[e];
        size_t i = or->bucket[p >> or->shift];
        while (i < or->n &&
                         (come ? sy__svc_node_less(mg->src, or->points[i],
                                                   or->inst[i], es, p, pi)
                               : or->points[i] < p ||
                                     (or->points[i] == p && or->inst[i] != pi)))
            i++;
        mg->at[e] = (uint32_t)i;
        if (!come && !(i < or->n && or->points[i] == p))
            return false;
    }
    return true;
}

/* Phase 4: the copy into out: runs of the old ring between the places,
 * renumbered to dst's positions, the coming nodes between them. False if
 * the pieces do not add up to `total` (cannot happen). */
static bool merge_copy(const ring_merge *mg, sy__svc_ring *out,
                       uint64_t total) {
    const sy__svc_ring * or = mg->old;
    size_t nc = mg->nc, nt = mg->nt;
    size_t i = 0, n = 0, c = 0, go = nc;
    for (;;) {
        size_t e = or->n;
        if (c < nc && mg->at[c] < e)
            e = mg->at[c];
        if (go < nt && mg->at[go] < e)
            e = mg->at[go];
        if (e < i || n + (e - i) > total)
            return false;
        memcpy(out->points + n, or->points + i, (e - i) * sizeof * or->points);
        for (; i < e; i++) {
            uint32_t m = mg->to[or->inst[i]];
            if (m == SY_NONE)
                return false;
            out->inst[n++] = m;
        }
        if (c < nc && mg->at[c] == e) { /* coming nodes go before node e */
            if (n >= total)
                return false;
            out->points[n] = mg->np[c];
            out->inst[n++] = mg->ni[c++];
        } else if (go < nt && mg->at[go] == e) {
            i = e + 1; /* the old ring's node e goes */
            go++;
        } else {
            break; /* e == or->n: all copied */
        }
    }
    return n == total && c == nc && go == nt;
}

/* Phase 5: the bucket index. With the same buckets, the old ring's index
 * moved by the nodes that came and went before each (both lists sorted);
 * else built afresh. */
static void merge_buckets(const ring_merge *mg, sy__svc_ring *out) {
    const sy__svc_ring * or = mg->old;
    if (out->shift != or->shift) {
        sy__svc_ring_index(out);
        return;
    }
    size_t nc = mg->nc, nt = mg->nt;
    size_t nb = (size_t)1 << (64 - or->shift), cb = 0, gb = nc;
    for (size_t b = 0; b <= nb; b++) {
        while (cb < nc && (mg->np[cb] >> or->shift) < b)
            cb++;
        while (gb < nt && (mg->np[gb] >> or->shift) < b)
            gb++;
        out->bucket[b] = (uint32_t)(or->bucket[b] + cb - (gb - nc));
    }
}

static sy__svc_gring *sy__svc_gring_merge(const sy__service *dst, uint32_t g,
                                          const sy__service *src, uint32_t o,
                                          const sy__svc_gring *r) {
    ring_merge mg = {dst,
                     src,
                     &dst->groups[g],
                     &src->groups[o],
                     &r->ring,
                     NULL,
                     NULL,
                     0,
                     0,
                     NULL,
                     NULL,
                     NULL};
    uint64_t total = sy__svc_members_vnodes(dst, mg.gr);
    if (r->base || total == 0 || total > UINT32_MAX ||
        sy__svc_dense(dst, g, total))
        return NULL;
    mg.to = sy__malloc(&dst->alloc, (src->n + 1) * 2 * sizeof *mg.to);
    if (!mg.to)
        return NULL;
    mg.keep = mg.to + src->n + 1;
    uint64_t ncome, ngo;
    merge_plan(&mg, &ncome, &ngo);
    sy__svc_gring *out = NULL;
    sy__svc_point *tmp = NULL;
    if ((ncome + ngo) * 4 > total) /* hashing them costs about a build */
        goto done;
    mg.nt = (size_t)(ncome + ngo);
    tmp = sy__malloc(&dst->alloc, (mg.nt + 1) * sizeof *tmp);
    mg.np = sy__malloc(&dst->alloc,
                       (mg.nt + 1) * (sizeof *mg.np + 2 * sizeof(uint32_t)));
    out = tmp && mg.np ? sy__svc_gring_own(dst, total) : NULL;
    if (!out)
        goto done;
    mg.ni = (uint32_t *)(void *)(mg.np + mg.nt + 1);
    mg.at = mg.ni + mg.nt + 1;
    if (!merge_nodes(&mg, tmp) || !merge_places(&mg) ||
        !merge_copy(&mg, &out->ring, total)) {
        /* cannot happen: build from scratch */
        sy__svc_gring_unref(out);
        out = NULL;
        goto done;
    }
    merge_buckets(&mg, &out->ring);
done:
    sy__free(&dst->alloc, mg.to);
    sy__free(&dst->alloc, tmp);
    sy__free(&dst->alloc, mg.np);
    return out;
}

/* The ring of group g (of its twin), built now if it was not; NULL when
 * building failed for memory. Lock-free. */
static const sy__svc_gring *sy__svc_ring_get(const sy__service *s, uint32_t g) {
    if (s->groups[g].twin != SY_NONE)
        g = s->groups[g].twin;
    sy__svc_group *gr = &s->groups[g];
    sy__svc_gring *r = atomic_load_explicit(&gr->ring, memory_order_acquire);
    if (r)
        return r;
    sy__svc_gring *mine = sy__svc_gring_build(s, g);
    if (!mine)
        return NULL;
    if (atomic_compare_exchange_strong_explicit(
            &gr->ring, &r, mine, memory_order_acq_rel, memory_order_acquire))
        return mine;
    sy__svc_gring_unref(mine); /* another thread's build won: r is it */
    return r;
}

/* The owner of the first node at or after h on ring gr (wrapping). */
static inline uint32_t sy__svc_ring_lookup(const sy__svc_gring *gr,
                                           uint64_t h) {
    const sy__svc_ring *r = gr->walk;
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
static uint32_t sy__svc_ring_scan(const sy__service *s, const sy__svc_group *g,
                                  uint64_t h) {
    uint32_t best = SY_NONE, first = SY_NONE;
    uint64_t bp = 0, fp = 0;
    for (uint32_t k = 0; k < g->n; k++) {
        uint32_t m = g->members[k];
        const sy__svc_inst *in = &s->inst[m];
        for (uint64_t j = 0, v = sy__svc_vnodes(in); j < v; j++) {
            uint64_t p = sy__hash64(in->pub.id, in->idlen, j);
            if (first == SY_NONE || sy__svc_point_less(s, p, m, fp, first)) {
                first = m;
                fp = p;
            }
            if (p >= h &&
                (best == SY_NONE || sy__svc_point_less(s, p, m, bp, best))) {
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
sy__svc_ring_pick_slow(const sy__service *s, const sy__svc_group *g,
                       uint64_t h) {
    const sy__svc_gring *gr = sy__svc_ring_get(s, (uint32_t)(g - s->groups));
    if (!gr)
        return sy__svc_ring_scan(s, g, h);
    return sy__svc_ring_lookup(gr, h);
}

uint32_t sy__svc_ring_pick(const sy__service *s, const sy__svc_group *g,
                           sy_str key) {
    uint64_t h = sy__hash64(key.ptr, key.len, SVC_HASH_SEED);
    const sy__svc_gring *gr =
        atomic_load_explicit(g->ringp, memory_order_acquire);
    if (__builtin_expect(gr == NULL, 0))
        return sy__svc_ring_pick_slow(s, g, h);
    return sy__svc_ring_lookup(gr, h);
}

/* Whether group g of a and group h of b have the same members at the same
 * positions with the same virtual nodes: then their rings are equal. */
static bool sy__svc_same_members(const sy__service *a, uint32_t g,
                                 const sy__service *b, uint32_t h) {
    const sy__svc_group *x = &a->groups[g], *y = &b->groups[h];
    if (x->n != y->n)
        return false;
    for (uint32_t k = 0; k < x->n; k++) {
        uint32_t i = x->members[k];
        if (i != y->members[k] || !sy__svc_same_id(a, i, b, i) ||
            sy__svc_vnodes(&a->inst[i]) != sy__svc_vnodes(&b->inst[i]))
            return false;
    }
    return true;
}

void sy__svc_ring_inherit(sy__service *dst, const sy__service *src) {
    /* group 0 first: the dense groups' rings lean on it */
    for (uint32_t g = 0; g < dst->ngroups; g++) {
        sy__svc_group *gr = &dst->groups[g];
        if (gr->twin != SY_NONE || gr->n == 0 ||
            atomic_load_explicit(&gr->ring, memory_order_relaxed))
            continue;
        uint32_t o = sy__svc_counterpart_owner(dst, src, g);
        if (o == SY_NONE)
            continue;
        sy__svc_gring *r =
            atomic_load_explicit(&src->groups[o].ring, memory_order_acquire);
        if (!r)
            continue; /* no hash pick used it: none for dst either */
        if (sy__svc_same_members(dst, g, src, o) &&
            (!r->base ||
             r->base == atomic_load_explicit(&dst->groups[SVC_G_ALL].ring,
                                             memory_order_relaxed))) {
            atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
            atomic_store_explicit(&gr->ring, r, memory_order_release);
        } else {
            sy__svc_gring *m = sy__svc_gring_merge(dst, g, src, o, r);
            if (m)
                atomic_store_explicit(&gr->ring, m, memory_order_release);
            else /* from scratch; failing, readers build or scan */
                (void)sy__svc_ring_get(dst, g);
        }
    }
}

void sy__svc_ring_release(sy__service *s) {
    for (uint32_t g = 0; s->groups && g < s->ngroups; g++)
        sy__svc_gring_unref(
            atomic_load_explicit(&s->groups[g].ring, memory_order_acquire));
}
