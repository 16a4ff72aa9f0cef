/*
 * snapshot_layout.h - what a snapshot is made of, for every file that
 * reads one: slots, the chunked slot, rank and id tables, the match
 * preparation, struct sy_snapshot itself and its inline accessors.
 * Declarations of the calls that derive and query snapshots are in
 * snapshot.h (snapshot.c), the shared tables' calls in snapshot_int.h.
 */
#ifndef SY_SNAPSHOT_LAYOUT_H
#define SY_SNAPSHOT_LAYOUT_H

#include "base/budget.h"
#include "base/path_normalize.h"
#include "route/predicate.h"
#include "route/route.h"
#include "snapshot/index.h"
#include "snapshot/publish.h"

struct sy__service;
typedef struct sy__overlay sy__overlay;
typedef struct sy__snap_build sy__snap_build;
typedef struct sy__snap_trash sy__snap_trash;

/* Largest position of a route within its source (24 bits of the key). */
#define SY_RANK_POS_MAX 0xffffffu

/* Rank key: order, then source, then position in the source's document. */
static inline uint64_t sy__rank_key(int32_t order, uint32_t source,
                                    uint32_t pos) {
    return ((uint64_t)((uint32_t)order ^ 0x80000000u) << 32) |
           ((uint64_t)(source & 0xffu) << 24) | (pos & 0xffffffu);
}

typedef struct sy__slot {
    struct sy_route *route; /* NULL: removed */
    uint64_t key;
    uint32_t source;
    uint32_t weight; /* index into weights[], or UINT32_MAX */
} sy__slot;

/* A list of slot ids (private to one snapshot). */
typedef struct sy__slot_list {
    uint32_t *v;
    size_t n, cap;
} sy__slot_list;

typedef struct sy__id_entry {
    uint32_t hash; /* sy__snap_id_hash */
    uint32_t slot; /* UINT32_MAX: empty */
} sy__id_entry;

/*
 * Slots, the rank order and the id table are chunked arrays whose chunks
 * are shared between a snapshot and the ones derived from it (copy on
 * write, refcounted): a one-route change copies the chunk pointer vectors
 * (n / 1024 pointers) and the few chunks it touches, never the whole
 * arrays, so its cost barely depends on the table size.
 *
 *   snapshot A  slot_chunks: [c0][c1][c2]
 *   snapshot B  slot_chunks: [c0][c1'][c2][c3]   c1' = c1 with one change
 *
 * Rank chunks hold a variable number of slot ids (a run of the rank
 * order), split when full; rank_start[k] is the rank of chunk k's first.
 *
 * A chunk's reference count is not in the chunk: it is refs[cid] of the
 * dense table (sy__crefs, snapshot_int.h) that every snapshot derived
 * from the same first one shares, and each chunk vector has a parallel
 * vector of its chunks' ids (slot_cids, rank_cids, id_cids). Deriving
 * counts a reference on every chunk of the base (n / 1024 of each table),
 * and freeing a snapshot drops them: with the counts in the chunks those
 * were reads and writes of one line on a page of its own per chunk (a
 * TLB miss each), ~2/3 of a one-route publish at 1,000,000 routes; in the
 * dense table they are a sequential pass over a few KB. Only the
 * router's writer (under its lock) derives and frees snapshots
 * (publish.h: destroy runs on the writer's thread), so the counts are
 * plain integers.
 */
#define SY_CHUNK_BITS 10u
#define SY_CHUNK (1u << SY_CHUNK_BITS)
/* a rank chunk is 8 KiB: its count and the ids */
#define SY_RANK_CHUNK_MAX (2u * SY_CHUNK - 1u)

/* A chunk holds its entries only: 24 KiB, 8 KiB, 8 KiB, each exactly a
 * size class of the allocator (alloc_small.c; a header would take the
 * next class, 2 KiB or 1 KiB more). Its count is refs[cid] of the
 * sy__crefs, cid in the vector of ids parallel to its chunk vector. */
typedef struct sy__slot_chunk {
    sy__slot e[SY_CHUNK];
} sy__slot_chunk;

typedef struct sy__id_chunk {
    sy__id_entry e[SY_CHUNK];
} sy__id_chunk;

typedef struct sy__rank_chunk {
    uint32_t n;
    uint32_t e[SY_RANK_CHUNK_MAX];
} sy__rank_chunk;

/* What every match reads of its snapshot before it looks at the request,
 * worked out once when the snapshot is built (match_prep_init at the end
 * of sy__snapshot_derive, snapshot.c) so the request path reads it
 * instead of recomputing it per match (match.c's prepare). */
typedef struct sy__match_prep {
    uint32_t fit_caps;   /* capture slots a context needs (max_vars + 8) */
    uint32_t fit_groups; /* match-data groups it needs (>= 16) */
    /* SY_SEEN_* bits (pattern.h) of a path that send it to the path
     * normaliser: none for SY_PN_AS_IS, ALWAYS when merging slashes */
    uint8_t norm_mask;
    bool keep_escaped_slashes; /* the split keeps %2F and %5C encoded */
    /* copies of the fields below, here on the line a match reads first */
    bool strip_host_port, needs_host, needs_time;
    bool host_or_time; /* any of those three */
    bool weights;      /* weight_count > 0 */
    /* the base index's path trie is empty (sy__index_path_none): a
     * lookup that ends at a whole-host hit walks no path (match.c) */
    bool path_lazy;
    /* every candidate of the base index and the overlays names a live
     * slot (base_dead 0: the overlays drop the routes that leave), so a
     * candidate's route is its own sy__cand.route, no slot chunk read
     * (else only for a slot the dead filter does not clear) */
    bool cands_live;
    /* an overlay holds a route (ov[0] or ov[1] has a count): else a
     * match neither splits the path for them nor calls their lookup */
    bool ov_live;
} sy__match_prep;

struct sy_snapshot {
    sy__pub_obj pub;     /* first: the publication header */
    sy__match_prep prep; /* read first by every match */
    const sy__alloc *alloc;
    uint64_t generation;
    /* unique in the process (never reused, whatever the router): what a
     * match context keys what it resolved in this snapshot by
     * (select.c's services) */
    uint64_t serial;
    /* route-sequence fingerprint, kept up to date per change
     * (snapshot_table.c); services are added on first request. fp_lazy:
     * not kept (a first document, whose routes' fingerprints are left to
     * their first reader, or a base that had not been asked): walked
     * over the routes on first request, into fp_walked, which the next
     * snapshot takes up if it was asked by then */
    uint64_t fp_seq;
    _Atomic uint64_t fingerprint;
    _Atomic uint64_t fp_walked;
    _Atomic bool fingerprint_done;
    bool fp_lazy;

    struct sy__crefs *crefs;      /* the chunks' reference counts */
    sy__slot_chunk **slot_chunks; /* slot i: chunk i / SY_CHUNK */
    size_t slot_chunk_cap;        /* entries of slot_chunks (NULL past use) */
    uint32_t slot_count;
    sy__rank_chunk **rank_chunks; /* live slot ids in rank order */
    size_t *rank_start;           /* rank of each chunk's first entry */
    /* the chunk ids of slot_chunks, rank_chunks and id_chunks, parallel
     * to them */
    uint32_t *slot_cids, *rank_cids, *id_cids;
    size_t rank_nchunks;
    size_t route_count;

    /* Index: the base (shared, built over the routes of some earlier
     * snapshot; dead slots are skipped) and persistent overlays holding
     * every live route the base lacks: ov[0] the ones added since the
     * running rebuild began (or since the base, when none runs), ov[1]
     * those the running rebuild covers (NULL when none runs). */
    sy__index *base;
    struct sy__overlay *ov[2];
    struct sy__snap_build *build; /* the running rebuild, or NULL */
    struct sy__snap_trash *trash; /* what the last swap replaced, or NULL */
    size_t base_dead;             /* slots the base holds that died since */
    /* The dead filter: bit slot % SY_DEAD_BITS set for every slot counted
     * in base_dead (a superset: other slots share bits); NULL when
     * base_dead is 0. A candidate whose bit is clear names a live slot,
     * whose route is the candidate's own (match.c). Copied per derive
     * (8 KiB), set by a removal, rebuilt from graves[0] at a swap. */
    uint64_t *dead_bits;
    /* Dead slots: free ones are reused by new routes; a grave may still
     * sit in the base or the running rebuild's routes, and is freed after
     * graves[0]: the next swap of a rebuilt base, graves[1]: the one after
     * (snapshot_build.c) */
    sy__slot_list free_slots, graves[2];
    /* the rebuild work this derive did (tests count it) */
    size_t build_routes, build_items;

    /* open addressing over id_cap entries, a multiple of SY_CHUNK (not a
     * power of two: sy__snap_id_home) */
    sy__id_chunk **id_chunks; /* a NULL chunk: every entry empty */
    uint32_t id_cap;
    /* While the table grows (snapshot_table.c): the one it outgrew,
     * shared with the snapshots before, whose entries move into id_chunks
     * a stretch per publish (those before id_old_next have moved; a
     * lookup not found in id_chunks looks here past it); NULL when none. */
    sy__id_chunk **id_old_chunks;
    uint32_t *id_old_cids;
    uint32_t id_old_cap, id_old_next;

    sy__weight_slot *weights; /* per weight route */
    uint32_t *weight_slots;   /* slot of each weight route */
    size_t weight_count;

    struct sy_route *defaults; /* default filters (route-less), or NULL */
    char **sources;
    size_t source_count;

    struct sy__service **services; /* sorted by name */
    size_t service_count;

    bool strip_host_port;
    sy__path_norm_opts path_norm;    /* request path normalisation */
    sy__budget_limits budget;        /* CPU budget per request (0: defaults) */
    int64_t (*clock_ms)(void *data); /* for requests with now_ms == 0 */
    void *clock_data;
    uint64_t (*random)(void *data); /* for requests with seed == 0 */
    struct sy_policy_store *policy; /* the router's (lib/policy/store.h) */
    uint32_t key_limit;             /* above every sy_route_key of its routes */
    bool needs_host;                /* some route has a Host predicate */
    bool needs_time;                /* some route has After/Before/Between */
    uint32_t max_groups, max_vars;
    size_t chunk_bytes; /* chunks this snapshot made (not shared ones) */
    size_t bytes;
};

#define SY_DEAD_WORDS 1024u
#define SY_DEAD_BITS (SY_DEAD_WORDS * 64u)

/* Whether slot `slot` may have died since the base index was built
 * (false: it lives, if an index or overlay of s holds it). */
static inline bool sy__snapshot_maybe_dead(const sy_snapshot *s,
                                           uint32_t slot) {
    const uint64_t *b = s->dead_bits;
    return !b || (b[(slot / 64u) % SY_DEAD_WORDS] >> (slot % 64u) & 1u);
}

/* Sets slot's bit of the dead filter (allocated when NULL); false: out
 * of memory. Only the writer, on a snapshot it derives. */
static inline bool sy__snapshot_dead_set(sy_snapshot *s, uint32_t slot) {
    if (!s->dead_bits &&
        !(s->dead_bits = sy__calloc(s->alloc, SY_DEAD_WORDS, sizeof(uint64_t))))
        return false;
    s->dead_bits[(slot / 64u) % SY_DEAD_WORDS] |= (uint64_t)1 << (slot % 64u);
    return true;
}

/* Slot i (i < slot_count). */
static inline const sy__slot *sy__snapshot_slot(const sy_snapshot *s,
                                                uint32_t i) {
    return &s->slot_chunks[i >> SY_CHUNK_BITS]->e[i & (SY_CHUNK - 1)];
}

/* The home entry of an id of hash h in a table of `cap` entries: h
 * scaled to [0, cap) by its high bits (any capacity, no division). */
static inline uint32_t sy__snap_id_home(uint32_t h, uint32_t cap) {
    return (uint32_t)(((uint64_t)h * cap) >> 32);
}

/* The snapshot behind a handle returned by acquire (untags it). */
static inline const sy_snapshot *
sy__snapshot_from_handle(const sy_snapshot *handle) {
    return (const sy_snapshot *)sy__pub_ref_obj((sy__pub_ref)handle);
}

#endif
