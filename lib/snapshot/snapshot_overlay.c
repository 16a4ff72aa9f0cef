/*
 * snapshot_overlay.c - the persistent overlay of a snapshot: the routes
 * added since its base index was built, findable by request at a cost per
 * change that does not grow with the overlay (snapshot_int.h).
 *
 * A route is filed under keys: when a Host predicate of it has one
 * pattern of literal labels, the hash of those labels (a host key: a
 * table of a route per customer host shares one path, so its path keys
 * would make one group of every updated host route, scanned by every
 * request to that path); else per Path pattern, the hash of its leading
 * literal segments, or of one later literal at its position (keys_of);
 * else under the one root key (always a candidate: no Path, or a pattern
 * with no literal before its first "**").
 * Each key has a group: its routes' candidates in rank key order. Groups
 * hang off a hash table in 256-bucket chunks:
 *
 *   table chunks:  [c0][c1]...         chunk: group * x 256
 *   chunk ids:     [i0][i1]...         refs[i] in the overlay's sy__crefs
 *   group:  refs | len | hash | sy__cand c[len] | uint64_t key[len]
 *           | uint32_t slot[len]
 *
 * Groups and chunks are immutable once shared and refcounted, so deriving
 * copies the chunk vector and a change copies one chunk and one group:
 * O(group + 256), whatever the overlay holds. A chunk no group has
 * reached yet is not allocated (NULL: 256 empty buckets). A chunk's count
 * is not in the chunk but in the dense table (sy__crefs, snapshot_int.h)
 * every copy of one overlay shares, by the id in the vector parallel to
 * the chunk vector, as the snapshot's chunks' are: copying or freeing an
 * overlay of 100,000 routes (a rebuild's ov[1] at 1,000,000, 512-1,024
 * chunks) counted a reference on every chunk, a line on a page of its own
 * each, ~0.1-0.5 ms of a publish for each of the copy and the free
 * (docs/performance.md, Round 11 (continued)); in the dense table both are
 * a pass over a few KB. Copies and frees run on the writer's thread only
 * (publish.h), so the counts are plain integers.
 *
 * The table doubles when its groups reach half its buckets, but its
 * groups move over a chunk at a time: the old table stays (read-only,
 * with its filter) until every one of its chunks has moved, one per
 * change (sy__overlay_add / _remove), long before the next doubling (a
 * table of B buckets moves in B / 256 changes; the next doubling is B / 2
 * changes away). Meanwhile a key's group is the new table's when it has
 * one (a change writes only there), else the old table's.
 *
 * A lookup hashes the request's path segments one prefix at a time (and
 * each alone) and probes the depths and positions some key has (bit masks
 * per overlay): the
 * groups it finds are candidate lists like the index's (no walk proof, so
 * the matcher checks every predicate). The lists are a superset: a route
 * can only match a request whose segments start with its literals.
 */
#include "snapshot/snapshot_int.h"

#define OV_CHUNK 256u
#define OV_KEYS 16 /* a route with more patterns goes to the root group */
#define SEED_PATH 0x9a7bull
#define SEED_SINGLE 0x5e91ull
#define SEED_HOST 0x4057ull
#define ROOT_KEY 0x726f6f74ull /* "root" */

typedef struct ov_group {
    _Atomic uint32_t refs;
    uint32_t len;
    uint64_t hash;
    sy__cand c[]; /* then uint64_t key[len], uint32_t slot[len] */
} ov_group;

/* 2 KiB, exactly a size class of the allocator: its count is in the
 * overlay's sy__crefs */
typedef struct ov_chunk {
    ov_group *g[OV_CHUNK];
} ov_chunk;

/* A bit filter over the keys present (two bits a key, 8 bits a bucket):
 * a lookup skips a key whose bits are not both set without touching the
 * table, which is a cache miss or two at a large overlay; the filter is
 * small enough to stay in cache. Shared between copies, copied on write;
 * bits are never cleared (a removed key only costs a false positive).
 * Its bits lie in pieces of at most FILTER_PIECE bytes, counted in the
 * overlay's sy__crefs like the chunks, so a change copies the header and
 * the piece or two its bits fall in: copied whole, the filter of a
 * 40,000-route overlay was 128 KiB of memcpy a publish (2 x 2,050 D1
 * misses under callgrind), the largest part of an overlay's copy. */
#define FILTER_PIECE 4096u
typedef struct ov_filter {
    _Atomic uint32_t refs;
    uint32_t mask;     /* bits - 1 */
    uint32_t shift;    /* a piece holds 1 << shift bits */
    uint32_t n;        /* pieces */
    uint64_t *piece[]; /* then uint32_t ids[n] */
} ov_filter;

static size_t filter_head_size(uint32_t n) {
    return sizeof(ov_filter) + n * (sizeof(uint64_t *) + sizeof(uint32_t));
}

static uint32_t *filter_ids(ov_filter *f) {
    return (uint32_t *)(void *)(f->piece + f->n);
}

struct sy__overlay {
    const sy__alloc *a;
    sy__crefs *cr; /* the chunks' counts, shared by every copy */
    ov_filter *filter;
    ov_chunk **chunks;
    uint32_t *cids; /* chunk ids, parallel to chunks (old_cids to old) */
    uint32_t mask;  /* buckets - 1; buckets a multiple of OV_CHUNK */
    uint32_t groups;
    /* the table before the last doubling, while its chunks move (NULL:
     * none): chunks [0, moved) have moved */
    ov_chunk **old;
    uint32_t *old_cids;
    ov_filter *old_filter;
    uint32_t old_mask, moved;
    size_t count;       /* live entries */
    uint64_t depths;    /* bit d: some prefix key of depth d (63: or more) */
    uint64_t positions; /* bit p: some single key at position p */
    bool hosts;         /* some route is filed under a host key */
    size_t bytes;       /* chunks and groups this overlay made */
};

static uint64_t *group_keys(ov_group *g) {
    return (uint64_t *)(void *)(g->c + g->len);
}

static uint32_t *group_slots(ov_group *g) {
    return (uint32_t *)(void *)(group_keys(g) + g->len);
}

static void group_unref(const sy__alloc *a, ov_group *g) {
    if (g && atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) == 1)
        sy__free(a, g);
}

/* Drop a reference on chunk c (id cid; NULL: nothing); the last frees it
 * and its groups' references. */
static void chunk_unref(const sy__alloc *a, sy__crefs *cr, ov_chunk *c,
                        uint32_t cid) {
    if (!c || --cr->refs[cid] != 0)
        return;
    sy__crefs_put(cr, cid);
    for (uint32_t i = 0; i < OV_CHUNK; i++)
        group_unref(a, c->g[i]);
    sy__free(a, c);
}

static ov_group *group_new(sy__overlay *ov, uint32_t len, uint64_t hash) {
    size_t size =
        sizeof(ov_group) +
        len * (sizeof(sy__cand) + sizeof(uint64_t) + sizeof(uint32_t));
    ov_group *g = sy__malloc(ov->a, size);
    if (!g)
        return NULL;
    atomic_init(&g->refs, 1);
    g->len = len;
    g->hash = hash;
    ov->bytes += size;
    return g;
}

/* Drop a reference on piece p (id pid); the last frees it. */
static void piece_unref(const sy__alloc *a, sy__crefs *cr, uint64_t *p,
                        uint32_t pid) {
    if (p && --cr->refs[pid] == 0) {
        sy__crefs_put(cr, pid);
        sy__free(a, p);
    }
}

static void filter_unref(const sy__alloc *a, sy__crefs *cr, ov_filter *f) {
    if (!f || atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (uint32_t i = 0; i < f->n; i++)
        piece_unref(a, cr, f->piece[i], filter_ids(f)[i]);
    sy__free(a, f);
}

/* An empty filter for `buckets` buckets (a power of two, >= OV_CHUNK).
 * NULL: out of memory. */
static ov_filter *filter_new(sy__overlay *ov, uint32_t buckets) {
    uint32_t bytes = buckets < FILTER_PIECE ? buckets : FILTER_PIECE;
    uint32_t n = buckets / bytes;
    ov_filter *f = sy__calloc(ov->a, 1, filter_head_size(n));
    if (!f)
        return NULL;
    atomic_init(&f->refs, 1);
    f->mask = buckets * 8 - 1;
    f->n = n;
    for (f->shift = 0; (1u << f->shift) < bytes * 8; f->shift++)
        ;
    for (uint32_t i = 0; i < n; i++)
        if (!(f->piece[i] = sy__calloc(ov->a, 1, bytes)) ||
            !sy__crefs_take(ov->a, ov->cr, &filter_ids(f)[i])) {
            sy__free(ov->a, f->piece[i]);
            f->piece[i] = NULL;
            filter_unref(ov->a, ov->cr, f);
            return NULL;
        }
    ov->bytes += filter_head_size(n) + (size_t)n * bytes;
    return f;
}

static inline uint32_t filter_bit(const ov_filter *f, uint64_t h, int k) {
    return (uint32_t)((k ? h * 0x9e3779b97f4a7c15ull : h) >> 40) & f->mask;
}

/* Bit a of the filter. */
static inline bool filter_get(const ov_filter *f, uint32_t a) {
    uint32_t in = a & ((1u << f->shift) - 1);
    return (f->piece[a >> f->shift][in / 64] >> (in % 64)) & 1;
}

static inline bool filter_has(const ov_filter *f, uint64_t h) {
    return filter_get(f, filter_bit(f, h, 0)) &&
           filter_get(f, filter_bit(f, h, 1));
}

/* Set bit a of ov's filter (private), its piece made private first.
 * false: out of memory. */
static bool filter_put(sy__overlay *ov, uint32_t a) {
    ov_filter *f = ov->filter;
    uint32_t k = a >> f->shift, in = a & ((1u << f->shift) - 1);
    uint32_t *ids = filter_ids(f);
    if (ov->cr->refs[ids[k]] != 1) {
        size_t bytes = ((size_t)1 << f->shift) / 8;
        uint32_t pid;
        uint64_t *p = sy__malloc(ov->a, bytes);
        if (!p || !sy__crefs_take(ov->a, ov->cr, &pid)) {
            sy__free(ov->a, p);
            return false;
        }
        memcpy(p, f->piece[k], bytes);
        piece_unref(ov->a, ov->cr, f->piece[k], ids[k]);
        f->piece[k] = p;
        ids[k] = pid;
        ov->bytes += bytes;
    }
    f->piece[k][in / 64] |= 1ull << (in % 64);
    return true;
}

/* Set h's bits, the filter made private first. false: out of memory. */
static bool filter_set(sy__overlay *ov, uint64_t h) {
    ov_filter *f = ov->filter;
    if (atomic_load_explicit(&f->refs, memory_order_acquire) != 1) {
        size_t size = filter_head_size(f->n);
        ov_filter *n = sy__malloc(ov->a, size);
        if (!n)
            return false;
        memcpy(n, f, size);
        atomic_init(&n->refs, 1);
        for (uint32_t i = 0; i < n->n; i++)
            ov->cr->refs[filter_ids(n)[i]]++;
        filter_unref(ov->a, ov->cr, f);
        ov->filter = f = n;
        ov->bytes += size;
    }
    return filter_put(ov, filter_bit(f, h, 0)) &&
           filter_put(ov, filter_bit(f, h, 1));
}

/* An empty table of `buckets` (its chunks not allocated yet). */
static bool table_alloc(sy__overlay *ov, uint32_t buckets) {
    uint32_t nk = buckets / OV_CHUNK;
    ov->filter = filter_new(ov, buckets);
    if (!ov->filter)
        return false;
    ov->chunks = sy__calloc(ov->a, nk, sizeof *ov->chunks);
    ov->cids = sy__calloc(ov->a, nk, sizeof *ov->cids);
    if (!ov->chunks || !ov->cids)
        return false;
    ov->mask = buckets - 1;
    return true;
}

static void table_free(const sy__alloc *a, sy__crefs *cr, ov_chunk **chunks,
                       uint32_t *cids, uint32_t mask) {
    for (uint32_t k = 0; chunks && cids && k <= mask / OV_CHUNK; k++)
        chunk_unref(a, cr, chunks[k], cids[k]);
    sy__free(a, chunks);
    sy__free(a, cids);
}

/* A copy of a chunk vector and its ids (*chunks, *cids), a reference on
 * each chunk. false: out of memory (nothing counted). */
static bool chunks_share(const sy__alloc *a, sy__crefs *cr,
                         ov_chunk *const *src, const uint32_t *src_cids,
                         uint32_t mask, ov_chunk ***chunks, uint32_t **cids) {
    uint32_t nk = (mask + 1) / OV_CHUNK;
    ov_chunk **v = sy__malloc(a, nk * sizeof *v);
    uint32_t *ids = sy__malloc(a, nk * sizeof *ids);
    if (!v || !ids) {
        sy__free(a, v);
        sy__free(a, ids);
        return false;
    }
    memcpy(v, src, nk * sizeof *v);
    memcpy(ids, src_cids, nk * sizeof *ids);
    for (uint32_t k = 0; k < nk; k++)
        if (v[k])
            cr->refs[ids[k]]++;
    *chunks = v;
    *cids = ids;
    return true;
}

sy__overlay *sy__overlay_copy(const sy__alloc *a, const sy__overlay *src) {
    sy__overlay *ov = sy__calloc(a, 1, sizeof *ov);
    if (!ov)
        return NULL;
    ov->a = a;
    if (!src) {
        if (!(ov->cr = sy__crefs_new(a)) || !table_alloc(ov, OV_CHUNK)) {
            sy__overlay_free(ov);
            return NULL;
        }
        return ov;
    }
    ov->cr = sy__crefs_hold(src->cr);
    if (!chunks_share(a, ov->cr, src->chunks, src->cids, src->mask, &ov->chunks,
                      &ov->cids)) {
        sy__crefs_drop(a, ov->cr);
        sy__free(a, ov);
        return NULL;
    }
    ov->mask = src->mask;
    if (src->old) {
        if (!chunks_share(a, ov->cr, src->old, src->old_cids, src->old_mask,
                          &ov->old, &ov->old_cids)) {
            table_free(a, ov->cr, ov->chunks, ov->cids, ov->mask);
            sy__crefs_drop(a, ov->cr);
            sy__free(a, ov);
            return NULL;
        }
        ov->old_mask = src->old_mask;
        ov->moved = src->moved;
        ov->old_filter = src->old_filter;
        atomic_fetch_add_explicit(&ov->old_filter->refs, 1,
                                  memory_order_relaxed);
    }
    ov->filter = src->filter;
    atomic_fetch_add_explicit(&ov->filter->refs, 1, memory_order_relaxed);
    ov->groups = src->groups;
    ov->count = src->count;
    ov->depths = src->depths;
    ov->positions = src->positions;
    ov->hosts = src->hosts;
    return ov;
}

void sy__overlay_free(sy__overlay *ov) {
    if (!ov)
        return;
    filter_unref(ov->a, ov->cr, ov->filter);
    table_free(ov->a, ov->cr, ov->chunks, ov->cids, ov->mask);
    filter_unref(ov->a, ov->cr, ov->old_filter);
    table_free(ov->a, ov->cr, ov->old, ov->old_cids, ov->old_mask);
    sy__crefs_drop(ov->a, ov->cr);
    sy__free(ov->a, ov);
}

/* One chunk of `chunks` freed (or found shared: its reference dropped):
 * true; none left: false. */
static bool chunks_free_one(const sy__alloc *a, sy__crefs *cr,
                            ov_chunk **chunks, const uint32_t *cids,
                            uint32_t mask) {
    for (uint32_t k = 0; chunks && k <= mask / OV_CHUNK; k++) {
        ov_chunk *c = chunks[k];
        if (!c)
            continue;
        chunk_unref(a, cr, c, cids[k]); /* shared: its last holder frees */
        chunks[k] = NULL;
        return true;
    }
    return false;
}

bool sy__overlay_free_step(sy__overlay *ov) {
    return !chunks_free_one(ov->a, ov->cr, ov->chunks, ov->cids, ov->mask) &&
           !chunks_free_one(ov->a, ov->cr, ov->old, ov->old_cids, ov->old_mask);
}

size_t sy__overlay_count(const sy__overlay *ov) {
    return ov ? ov->count : 0;
}

size_t sy__overlay_bytes(const sy__overlay *ov) {
    if (!ov)
        return 0;
    size_t vec = ((size_t)ov->mask + 1) / OV_CHUNK;
    if (ov->old)
        vec += ((size_t)ov->old_mask + 1) / OV_CHUNK;
    return sizeof *ov + vec * (sizeof(void *) + sizeof(uint32_t)) + ov->bytes;
}

/* Bucket i's group of a chunk vector (NULL: empty). */
static ov_group *bucket_in(ov_chunk *const *chunks, uint32_t i) {
    const ov_chunk *c = chunks[i / OV_CHUNK];
    return c ? c->g[i % OV_CHUNK] : NULL;
}

/* The bucket of `hash` in a table: its group's, or the empty one where it
 * goes. */
static uint32_t find_in(ov_chunk *const *chunks, uint32_t mask, uint64_t hash) {
    for (uint32_t i = (uint32_t)hash & mask;; i = (i + 1) & mask) {
        const ov_group *g = bucket_in(chunks, i);
        if (!g || g->hash == hash)
            return i;
    }
}

static uint32_t find(const sy__overlay *ov, uint64_t hash) {
    return find_in(ov->chunks, ov->mask, hash);
}

/* The group of `hash` (NULL: none): the table's, else, while the old
 * table's chunks move, the old table's. */
static const ov_group *group_of(const sy__overlay *ov, uint64_t hash) {
    const ov_group *g = bucket_in(ov->chunks, find(ov, hash));
    if (!g && ov->old)
        g = bucket_in(ov->old, find_in(ov->old, ov->old_mask, hash));
    return g;
}

/* Bucket i, writable (its chunk made private, or allocated). NULL: out of
 * memory. */
static ov_group **bucket_mut(sy__overlay *ov, uint32_t i) {
    uint32_t k = i / OV_CHUNK, cid;
    ov_chunk *c = ov->chunks[k];
    if (!c) {
        c = sy__calloc(ov->a, 1, sizeof *c);
        if (!c || !sy__crefs_take(ov->a, ov->cr, &cid)) {
            sy__free(ov->a, c);
            return NULL;
        }
        ov->chunks[k] = c;
        ov->cids[k] = cid;
        ov->bytes += sizeof *c;
    } else if (ov->cr->refs[ov->cids[k]] != 1) {
        ov_chunk *n = sy__malloc(ov->a, sizeof *n);
        if (!n || !sy__crefs_take(ov->a, ov->cr, &cid)) {
            sy__free(ov->a, n);
            return NULL;
        }
        for (uint32_t j = 0; j < OV_CHUNK; j++) {
            n->g[j] = c->g[j];
            if (n->g[j])
                atomic_fetch_add_explicit(&n->g[j]->refs, 1,
                                          memory_order_relaxed);
        }
        chunk_unref(ov->a, ov->cr, c, ov->cids[k]);
        ov->chunks[k] = c = n;
        ov->cids[k] = cid;
        ov->bytes += sizeof *n;
    }
    return &c->g[i % OV_CHUNK];
}

/* The old table's next chunk moved over: each of its groups whose key
 * has none in the table yet (a reference each); the old table dropped
 * after its last chunk. false: out of memory (nothing lost: the chunk
 * moves again, its moved groups found in the table). */
static bool move_chunk(sy__overlay *ov) {
    if (!ov->old)
        return true;
    const ov_chunk *c = ov->old[ov->moved];
    for (uint32_t k = 0; c && k < OV_CHUNK; k++) {
        ov_group *g = c->g[k];
        if (!g)
            continue;
        uint32_t i = find(ov, g->hash);
        if (bucket_in(ov->chunks, i))
            continue; /* changed since the doubling, or moved before */
        ov_group **b = bucket_mut(ov, i);
        if (!b || !filter_set(ov, g->hash))
            return false;
        atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
        *b = g;
        ov->groups++;
    }
    if (++ov->moved <= ov->old_mask / OV_CHUNK)
        return true;
    table_free(ov->a, ov->cr, ov->old, ov->old_cids, ov->old_mask);
    filter_unref(ov->a, ov->cr, ov->old_filter);
    ov->old = NULL;
    ov->old_cids = NULL;
    ov->old_filter = NULL;
    ov->old_mask = ov->moved = 0;
    return true;
}

/* Twice the buckets: the table becomes the old one, whose groups move
 * over a chunk per change (move_chunk). A doubling while the last one's
 * chunks still move (not with the pace above) moves the rest first. */
static bool grow(sy__overlay *ov) {
    while (ov->old)
        if (!move_chunk(ov))
            return false;
    ov_chunk **old = ov->chunks;
    uint32_t *old_cids = ov->cids;
    ov_filter *old_filter = ov->filter;
    uint32_t old_mask = ov->mask;
    ov->chunks = NULL;
    ov->cids = NULL;
    ov->filter = NULL;
    if (!table_alloc(ov, (old_mask + 1) * 2)) {
        filter_unref(ov->a, ov->cr, ov->filter);
        sy__free(ov->a, ov->chunks);
        sy__free(ov->a, ov->cids);
        ov->chunks = old;
        ov->cids = old_cids;
        ov->filter = old_filter;
        ov->mask = old_mask;
        return false;
    }
    ov->old = old;
    ov->old_cids = old_cids;
    ov->old_filter = old_filter;
    ov->old_mask = old_mask;
    ov->moved = 0;
    ov->groups = 0;
    return true;
}

/* ---- keys ---- */

typedef struct route_keys {
    uint64_t hash[OV_KEYS];
    size_t n;
    bool host;              /* one key: a host key */
    uint8_t depth[OV_KEYS]; /* prefix: its length; single: its position */
    uint8_t single[OV_KEYS];
} route_keys;

static uint64_t seg_hash(sy_str s) {
    return sy__hash64(s.ptr, s.len, 0x0f);
}

/* The key of segment `pos` alone. */
static uint64_t single_key(size_t pos, uint64_t seg) {
    return sy__hash_mix(SEED_SINGLE + pos, seg);
}

/*
 * One key per Path pattern of `pred`: its leading literal segments (a
 * prefix key), or, when at most one segment leads and a literal comes
 * after a wildcard, that later literal at its position (a single key:
 * "/{tenant}/orders/{id}" -> (1, "orders"); "/api/{id}/posts" -> (2,
 * "posts")). Positions count only before a "**" or {*x}. false: a pattern
 * has neither, or there are too many patterns (the route goes to root).
 */
static bool keys_of(const sy__pred *pred, route_keys *k) {
    k->n = 0;
    for (size_t i = 0; pred && i < sy__pred_pattern_count(pred); i++) {
        const sy__pattern *p = sy__pred_pattern(pred, i);
        if (!sy__pattern_can_match(p))
            continue; /* matches nothing: needs no key */
        size_t n = sy__pattern_segment_count(p), d = 0, last = SIZE_MAX;
        uint64_t h = SEED_PATH;
        for (; d < n && sy__pattern_segment_kind(p, d) == SY_SEG_LITERAL; d++)
            h = sy__hash_mix(h, seg_hash(sy__pattern_literal(p, d)));
        for (size_t j = d; j < n && j < 63; j++) {
            sy__seg_kind sk = sy__pattern_segment_kind(p, j);
            if (sk == SY_SEG_MULTI || sk == SY_SEG_REST)
                break;
            if (sk == SY_SEG_LITERAL)
                last = j;
        }
        bool single = d < 2 && last != SIZE_MAX;
        if (single)
            h = single_key(last, seg_hash(sy__pattern_literal(p, last)));
        if ((d == 0 && !single) || k->n == OV_KEYS)
            return false;
        bool dup = false;
        for (size_t j = 0; j < k->n; j++)
            dup |= k->hash[j] == h;
        if (!dup) {
            k->hash[k->n] = h;
            k->single[k->n] = single;
            k->depth[k->n++] = (uint8_t)(single ? last : d < 63 ? d : 63);
        }
    }
    return pred != NULL;
}

static const sy__pred *first_pred(const struct sy_route *r,
                                  sy__pred_kind kind) {
    for (size_t i = 0; i < r->predicate_count; i++)
        if (sy__pred_get_kind(sy__route_cpred(r, i)) == kind)
            return sy__route_cpred(r, i);
    return NULL;
}

/* The host key of a request's labels or of a pattern's: every label in
 * order, so only a host of exactly those labels meets it. */
static uint64_t host_key_mix(uint64_t h, sy_str label) {
    return sy__hash_mix(h, seg_hash(label));
}

/* A host key for r: a Host predicate of one pattern of non-empty literal
 * labels (every request it matches has exactly those labels, no leading
 * or trailing '.'); false: none. */
static bool host_key_of(const struct sy_route *r, uint64_t *out) {
    for (size_t i = 0; i < r->predicate_count; i++) {
        const sy__pred *p = sy__route_cpred(r, i);
        if (!p || sy__pred_get_kind(p) != SY_PK_HOST ||
            sy__pred_pattern_count(p) != 1)
            continue;
        const sy__pattern *pat = sy__pred_pattern(p, 0);
        size_t n = sy__pattern_segment_count(pat);
        bool lit = n > 0 && sy__pattern_can_match(pat);
        uint64_t h = SEED_HOST;
        for (size_t j = 0; lit && j < n; j++) {
            sy_str l = sy__pattern_literal(pat, j);
            lit =
                sy__pattern_segment_kind(pat, j) == SY_SEG_LITERAL && l.len > 0;
            h = host_key_mix(h, l);
        }
        if (lit) {
            *out = h;
            return true;
        }
    }
    return false;
}

/* Where a route is filed: its host key, else its path keys, else the
 * root. (A Host predicate of wildcards goes by its path or to the root:
 * a request's odd host forms, a leading or trailing '.', make label
 * prefixes an unsafe key.) */
static void route_keys_of(const struct sy_route *r, route_keys *k) {
    k->host = false;
    if (host_key_of(r, &k->hash[0])) {
        k->n = 1;
        k->host = true;
        k->depth[0] = 0;
        k->single[0] = 0;
        return;
    }
    if (keys_of(first_pred(r, SY_PK_PATH), k))
        return;
    k->n = 1;
    k->hash[0] = ROOT_KEY;
    k->depth[0] = 0;
    k->single[0] = 0;
}

static uint16_t methods_of(const struct sy_route *r) {
    uint32_t m = UINT32_MAX;
    for (size_t i = 0; i < r->predicate_count; i++)
        if (sy__pred_get_kind(sy__route_cpred(r, i)) == SY_PK_METHOD)
            m &= sy__pred_method_mask(sy__route_cpred(r, i));
    return sy__cand_mbits(m, 0);
}

/* ---- changes ---- */

/* Replace bucket i's group (may be NULL) by a copy with the candidate
 * inserted (cand != NULL) or with slot `slot` removed. */
static int regroup(sy__overlay *ov, uint32_t i, uint64_t hash,
                   const sy__cand *cand, uint64_t key, uint32_t slot) {
    const ov_group *g = group_of(ov, hash);
    uint32_t len = g ? g->len : 0, at = len;
    if (cand) {
        at = 0; /* after every key <= its own */
        while (at < len && group_keys((ov_group *)g)[at] <= key)
            at++;
    } else {
        for (uint32_t j = 0; j < len; j++)
            if (group_slots((ov_group *)g)[j] == slot)
                at = j;
        if (at == len)
            return SY_OK; /* not here */
    }
    ov_group *n = group_new(ov, cand ? len + 1 : len - 1, hash);
    ov_group **b = n ? bucket_mut(ov, i) : NULL;
    if (!b) {
        sy__free(ov->a, n);
        return SY_ENOMEM;
    }
    uint64_t *ok = len ? group_keys((ov_group *)g) : NULL, *nk = group_keys(n);
    uint32_t *os = len ? group_slots((ov_group *)g) : NULL,
             *ns = group_slots(n);
    if (at) {
        memcpy(n->c, g->c, at * sizeof *n->c), memcpy(nk, ok, at * sizeof *nk);
        memcpy(ns, os, at * sizeof *ns);
    }
    uint32_t skip = cand ? 0 : 1, put = cand ? 1 : 0;
    if (cand) {
        n->c[at] = *cand;
        nk[at] = key;
        ns[at] = slot;
    }
    if (len > at + skip) {
        size_t rest = len - at - skip;
        memcpy(n->c + at + put, g->c + at + skip, rest * sizeof *n->c);
        memcpy(nk + at + put, ok + at + skip, rest * sizeof *nk);
        memcpy(ns + at + put, os + at + skip, rest * sizeof *ns);
    }
    if (!*b)
        ov->groups++;
    group_unref(ov->a, *b);
    *b = n;
    return SY_OK;
}

int sy__overlay_add(sy__overlay *ov, uint32_t slot, uint64_t key,
                    const struct sy_route *r) {
    if (r->disabled)
        return SY_OK; /* never matches: not indexed */
    if (!move_chunk(ov))
        return SY_ENOMEM;
    route_keys k;
    route_keys_of(r, &k);
    sy__cand cand = {sy__cand_tag(r), 0, methods_of(r), 0, 0};
    for (size_t j = 0; j < k.n; j++) {
        if ((ov->groups + 1) * 2 > ov->mask + 1 && !grow(ov))
            return SY_ENOMEM;
        int rc = regroup(ov, find(ov, k.hash[j]), k.hash[j], &cand, key, slot);
        if (rc || !filter_set(ov, k.hash[j]))
            return rc ? rc : SY_ENOMEM;
        if (k.host)
            ov->hosts = true;
        else if (k.single[j])
            ov->positions |= 1ull << k.depth[j];
        else if (k.hash[j] != ROOT_KEY)
            ov->depths |= 1ull << k.depth[j];
    }
    ov->count++;
    return SY_OK;
}

int sy__overlay_remove(sy__overlay *ov, uint32_t slot, const struct sy_route *r,
                       bool *found) {
    *found = false;
    if (!ov || r->disabled)
        return SY_OK;
    if (!move_chunk(ov))
        return SY_ENOMEM;
    route_keys k;
    route_keys_of(r, &k);
    for (size_t j = 0; j < k.n; j++) {
        uint32_t i = find(ov, k.hash[j]);
        const ov_group *g = group_of(ov, k.hash[j]);
        bool here = false;
        for (uint32_t e = 0; g && e < g->len; e++)
            here |= group_slots((ov_group *)g)[e] == slot;
        if (!here)
            continue;
        int rc = regroup(ov, i, k.hash[j], NULL, 0, slot);
        if (rc)
            return rc;
        *found = true;
    }
    if (*found)
        ov->count--;
    return SY_OK;
}

/* ---- lookup ---- */

uint32_t sy__overlay_cand_slot(const sy__cand_list *l, const sy__cand *cd) {
    /* the list is a whole group's: its slots after its keys */
    const uint64_t *keys = (const uint64_t *)(const void *)(l->c + l->len);
    return ((const uint32_t *)(const void *)(keys + l->len))[cd - l->c];
}

static bool collect(const sy__overlay *ov, uint64_t hash, sy__cand_list *out,
                    size_t *n, size_t cap) {
    if (!filter_has(ov->filter, hash) &&
        !(ov->old_filter && filter_has(ov->old_filter, hash)))
        return true;
    const ov_group *g = group_of(ov, hash);
    if (!g || !g->len)
        return true;
    if (*n == cap)
        return false;
    out[(*n)++] = (sy__cand_list){g->c, NULL, g->len, SY_PROOF_NONE, 0, 0};
    return true;
}

/* Probe every prefix depth and single position of the path some key of
 * ov[0..nov) has, hashing each segment once for all. false: no room. */
static bool probe(const sy__overlay *const *ov, size_t nov,
                  const sy__segments *segs, sy__cand_list *out, size_t *n,
                  size_t cap) {
    uint64_t depths = 0, positions = 0;
    for (size_t o = 0; o < nov; o++) {
        depths |= ov[o]->depths;
        positions |= ov[o]->positions;
    }
    size_t top = 63; /* the deepest segment a key needs */
    while (top && !((depths >> top) & 1) && !((positions >> (top - 1)) & 1))
        top--;
    size_t last = top == 63 || segs->count < top ? segs->count : top;
    uint64_t h = SEED_PATH;
    for (size_t d = 1; d <= last; d++) {
        uint64_t sh = seg_hash(segs->dec[d - 1]);
        h = sy__hash_mix(h, sh);
        size_t bit = d < 63 ? d : 63;
        for (size_t o = 0; o < nov; o++) {
            if (((ov[o]->depths >> bit) & 1) && !collect(ov[o], h, out, n, cap))
                return false;
            if (d - 1 < 63 && ((ov[o]->positions >> (d - 1)) & 1) &&
                !collect(ov[o], single_key(d - 1, sh), out, n, cap))
                return false;
        }
    }
    return true;
}

bool sy__overlay_hosts(const sy__overlay *const *ov, size_t nov) {
    for (size_t o = 0; o < nov; o++)
        if (ov[o] && ov[o]->count && ov[o]->hosts)
            return true;
    return false;
}

size_t sy__overlay_lookup(const sy__overlay *const *ov, size_t nov,
                          const sy__segments *path, const sy__segments *host,
                          sy__cand_list *out, size_t cap) {
    const sy__overlay *live[4];
    size_t k = 0, n = 0;
    for (size_t o = 0; o < nov && k < 4; o++)
        if (ov[o] && ov[o]->count)
            live[k++] = ov[o];
    if (!k)
        return 0;
    if (!probe(live, k, path, out, &n, cap))
        return SIZE_MAX;
    /* a host of real labels only: a virtual empty one (a leading or
     * trailing '.') meets no host key */
    if (host && host->count && !host->lead && !host->trail) {
        uint64_t h = SEED_HOST;
        for (size_t i = 0; i < host->count; i++)
            h = host_key_mix(h, host->dec[i]);
        for (size_t o = 0; o < k; o++)
            if (live[o]->hosts && !collect(live[o], h, out, &n, cap))
                return SIZE_MAX;
    }
    for (size_t o = 0; o < k; o++)
        if (!collect(live[o], ROOT_KEY, out, &n, cap))
            return SIZE_MAX;
    return n;
}
