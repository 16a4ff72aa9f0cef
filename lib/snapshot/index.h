/*
 * index.h - the lookup structure of a snapshot: given a request, the short
 * lists of routes (by slot id, each list sorted by rank key) that could
 * match it. A route is placed by its Path patterns (a segment trie), or by
 * its Host patterns (a trie over reversed labels), whichever is more
 * selective, or else in a per-method "always a candidate" list. The lists
 * are a superset of the routes that can match: the matcher still tests
 * every predicate, merging the lists in rank order.
 */
#ifndef SY_INDEX_H
#define SY_INDEX_H

#include "route/pattern.h"
#include "route/route.h"

typedef struct sy__index sy__index;

/* One route to index: its slot id, rank key and compiled route. */
typedef struct sy__index_route {
    uint32_t slot;
    uint64_t key;
    const struct sy_route *route;
} sy__index_route;

/*
 * One candidate of a list, with what the matcher needs to decide it
 * without touching the route when the walk already proved it, and the
 * route itself (16 bytes, four to a line: no candidate straddles two):
 *
 *   route             | vars              | mbits             | flags | nvars |
 *   the slot's route  | u32: offset in    | u16: the methods  | u8    | u8    |
 *   (below)           | the index's var   | and the pred      |       |       |
 *                     | pool, or the one  | (sy__cand_mbits)  |       |       |
 *                     | var (VAR1)        |                   |       |       |
 *
 * The candidate's slot is not in it: an index's slots are an array
 * parallel to its candidates (sy__index_cand_slot), an overlay group's
 * after its keys (sy__overlay_cand_slot), read only where the route is
 * not enough (a snapshot with dead entries, a 405's note, a weight, a
 * merge of several lists). The route is the one the slot held when the
 * candidate was made: while the slot lives it holds that route (a slot's
 * route never changes; a removed route leaves its slot NULL, and a slot
 * an index holds is not reused until no index holds it), so a matcher
 * that knows the slot lives (no index entry of its snapshot is dead:
 * sy__match_prep's cands_live) takes the route from here and reads no
 * slot chunk.
 *
 * flags: SY_CAND_WALK, SY_CAND_WHOLE, SY_CAND_VAR1, SY_CAND_LIT and the
 * latter's predicate.
 */
typedef struct sy__cand {
    const struct sy_route *route; /* the slot's, while the slot lives */
    /* the first of nvars entries of the index's var pool; SY_CAND_VAR1:
     * the one var, or with SY_CAND_LIT and no var the literal Path */
    uint32_t vars;
    /* the AND of the route's Method predicate masks
     * (sy__pred_method_mask) as sy__cand_mbits packs it, and
     * SY_CAND_WALK's predicate, the one it proves (sy__cand_pred) */
    uint16_t mbits;
    uint8_t flags;
    uint8_t nvars; /* SY_CAND_WALK: its var pool entries */
} sy__cand;

/* A method mask in a candidate's mbits: the standard methods' bits 0-8
 * as they are, bit 31 (another method: only a "maybe") at bit 15, bit 14
 * set when the mask is all ones (no Method predicate), the predicate in
 * bits 9-13. A request's method bit b (sy__method_bit: 0-8 or 31) is
 * then bit b & 15 (sy__cand_mbit): one AND. */
#define SY_CAND_M_OTHER 15
#define SY_CAND_M_NONE (1u << 14)
#define SY_CAND_PRED_SHIFT 9
#define SY_CAND_PRED_MAX 31 /* a walk proving a later predicate: none */
static inline uint16_t sy__cand_mbits(uint32_t mask, uint32_t pred) {
    return (uint16_t)((mask & 0x1ffu) | (mask >> 31) << SY_CAND_M_OTHER |
                      (mask == UINT32_MAX ? SY_CAND_M_NONE : 0) |
                      pred << SY_CAND_PRED_SHIFT);
}
static inline int sy__cand_mbit(int method_bit) {
    return method_bit & 15;
}
/* Whether the candidate's route has no Method predicate. */
static inline bool sy__cand_any_method(const struct sy__cand *cd) {
    return cd->mbits & SY_CAND_M_NONE;
}
/* SY_CAND_WALK: the route's predicate the walk proves. */
static inline uint32_t sy__cand_pred(const struct sy__cand *cd) {
    return (uint32_t)cd->mbits >> SY_CAND_PRED_SHIFT & SY_CAND_PRED_MAX;
}

/* SY_CAND_WALK: the route has one Path (or Host, by the trie it sits in)
 * predicate, `pred`, of one pattern made of literal, "*" and plain {var}
 * segments (and perhaps a "**" the walk meets last): an exact walk to its
 * list proves it, and its captures are the request's segments at its
 * {var}s. SY_CAND_WHOLE: besides, the route has only Method predicates,
 * so the walk and the method mask decide it without touching the route.
 * SY_CAND_LIT (host trie, with SY_CAND_WALK): besides the Host and its
 * Method predicates, the route has one Path, a literal the matcher
 * compares with a plain path's text (sy__pred_path_lit), predicate
 * flags >> SY_CAND_LIT_SHIFT: so it is decided by that compare alone,
 * without the route's other predicates. */
enum { SY_CAND_WALK = 1, SY_CAND_WHOLE = 2, SY_CAND_VAR1 = 4, SY_CAND_LIT = 8 };
#define SY_CAND_LIT_SHIFT 4 /* above the flags */
#define SY_CAND_LIT_MAX 15  /* the highest predicate index it holds */

/* A {var} of a walk-proven pattern: its name (into the pattern's text,
 * valid while the slot's route is; NULL for a "*", which captures nothing
 * but also needs a non-empty segment) and the segment it captures (a path
 * segment's index; for a host, the label's index counted from the last). */
typedef struct sy__cand_var {
    sy_str name;
    uint32_t seg;
} sy__cand_var;

/* SY_CAND_VAR1: a walk-proven pattern's one {var} (or "*") whose name
 * lies within 32 KiB of its route and whose name length and segment are
 * below 256 is its candidate's `vars` itself, no entry of the var pool:
 * the name's offset from the route (int16, 0 with length 0 for a "*"),
 * its length, the segment. */
static inline uint32_t sy__cand_var1_pack(const struct sy_route *r,
                                          sy__cand_var v, bool *ok) {
    intptr_t off =
        v.name.ptr
            ? (intptr_t)((uintptr_t)v.name.ptr - (uintptr_t)(const void *)r)
            : 0;
    *ok = off >= INT16_MIN && off <= INT16_MAX && v.name.len < 256 &&
          v.seg < 256 && (v.name.ptr || !v.name.len);
    return (uint32_t)(uint16_t)(int16_t)off | (uint32_t)v.name.len << 16 |
           v.seg << 24;
}

/* Candidate cd's var entries: the pool's at `pool` + cd->vars, or its one
 * (SY_CAND_VAR1) decoded into *one. */
static inline const sy__cand_var *sy__cand_vars(const sy__cand_var *pool,
                                                const struct sy__cand *cd,
                                                sy__cand_var *one) {
    if (!(cd->flags & SY_CAND_VAR1))
        return pool + cd->vars;
    uint32_t v = cd->vars;
    size_t len = v >> 16 & 0xffu;
    const char *name =
        (const char *)((uintptr_t)(const void *)cd->route +
                       (uintptr_t)(intptr_t)(int16_t)(v & 0xffffu));
    *one = (sy__cand_var){{len || (v & 0xffffu) ? name : NULL, len}, v >> 24};
    return one;
}

/* SY_CAND_LIT with SY_CAND_VAR1 and no var (nvars 0): `vars` is the
 * literal Path itself, packed as a {var} is (its text within 32 KiB of
 * its route): the text's offset from the route (int16), its length (<
 * 256), bit 24 its last "**" (lit_rest), bit 25 its trailing-slash
 * option. The matcher then compares the path with the text alone: a cold
 * Host route's lookup reads neither the route's struct nor its predicate,
 * two dependent lines (docs/performance.md, "the Host route's literal in
 * its candidate"). */
#define SY_CAND_LIT_REST (1u << 24)
#define SY_CAND_LIT_TRAILING (1u << 25)
/* Bit 26: the offset is from the candidate itself, not its route: a host
 * key record's copy (index_int.h host_slot), whose text follows the key's
 * in the record, so a cold Host lookup reads no line of the route arena,
 * whose 4 KiB pages grow with the table (docs/performance.md, "Round 11
 * (session 44)"). Only in such a copy: one moved elsewhere would point
 * past it. */
#define SY_CAND_LIT_SELF (1u << 26)
static inline uint32_t sy__cand_lit_pack(const struct sy_route *r,
                                         const char *text, size_t len,
                                         bool rest, bool trailing, bool *ok) {
    intptr_t off = (intptr_t)((uintptr_t)text - (uintptr_t)(const void *)r);
    *ok = text && off >= INT16_MIN && off <= INT16_MAX && len < 256;
    return (uint32_t)(uint16_t)(int16_t)off | (uint32_t)len << 16 |
           (rest ? SY_CAND_LIT_REST : 0) |
           (trailing ? SY_CAND_LIT_TRAILING : 0);
}

/* Whether candidate cd, SY_CAND_LIT, carries its literal Path (above). */
static inline bool sy__cand_lit_here(const struct sy__cand *cd) {
    return !cd->nvars && (cd->flags & SY_CAND_VAR1);
}

/* Whether candidate cd carries its literal Path (above). */
static inline bool sy__cand_has_lit(const struct sy__cand *cd) {
    return (cd->flags & SY_CAND_LIT) && sy__cand_lit_here(cd);
}

/* A candidate's literal Path (sy__cand_has_lit): its text and length. */
static inline sy_str sy__cand_lit_text(const struct sy__cand *cd) {
    uint32_t v = cd->vars;
    uintptr_t at = v & SY_CAND_LIT_SELF ? (uintptr_t)(const void *)cd
                                        : (uintptr_t)(const void *)cd->route;
    return (sy_str){
        (const char *)(at + (uintptr_t)(intptr_t)(int16_t)(v & 0xffffu)),
        v >> 16 & 0xffu};
}

/* A candidate list in ascending rank key order. */
typedef struct sy__cand_list {
    const sy__cand *c;
    const sy__cand_var *vars; /* the index's var pool */
    uint32_t len;
    /* every segment (path) or label (host) of the request equalled a
     * literal on the way to this list (no wildcard, no trailing-slash or **
     * shortcut): a route's all-literal Path (or Host) predicate is proven */
    uint8_t proof;
    /* a term list where the walk consumed every segment (label) one edge
     * each, literal or wildcard, or a multi list ("**" starts here, every
     * segment before it consumed so): SY_CAND_WHOLE entries hold when
     * their method bit is set and their {var}s are non-empty */
    uint8_t exact;
    /* found in the host trie (captures are labels); SY_LIST_WILD_KEY: by
     * a wildcard key of the whole-host table, whose routes' only {var}
     * or "*" is the request's first label (no labels split) */
    uint8_t host;
} sy__cand_list;

#define SY_LIST_WILD_KEY 2

enum { SY_PROOF_NONE = 0, SY_PROOF_PATH = 1, SY_PROOF_HOST = 2 };

/* Build an index over `routes` (any order). The index is immutable and
 * refcounted (refs = 1), so snapshots can share it. */
int sy__index_build(const sy__alloc *a, const sy__index_route *routes, size_t n,
                    sy__index **out);
sy__index *sy__index_ref(sy__index *ix);
void sy__index_unref(sy__index *ix);
size_t sy__index_bytes(const sy__index *ix);

/*
 * Stepwise build (index_step.c): the same index as sy__index_build, built
 * a bounded amount of work at a time, so a large index can be built over
 * many publishes. After sy__index_step_reserve and sy__index_step_prepare,
 * routes are added one at a time in ascending key order
 * (sy__index_step_add: one route's patterns), then sy__index_step_run does at
 * most `budget` items of the finishing passes (counting, placement, the
 * flattened lists) per call: 1 when the index is done (*out, refs 1; the
 * builder keeps nothing of it), 0 when more calls are needed, SY_ENOMEM.
 * No route is read after its add. Single-threaded: one caller at a time.
 */
typedef struct sy__index_step sy__index_step;
sy__index_step *sy__index_step_new(const sy__alloc *a);
/* Room for `routes` routes shaped like `like`'s (NULL: unknown), so that
 * adding them does not grow (copy, rehash) the builder's arrays. */
int sy__index_step_reserve(sy__index_step *st, const sy__index *like,
                           size_t routes);
/* After a reserve: empty the reserved edge table, at most `budget`
 * entries per call; 1 when done (add may start), 0 when more is needed. */
int sy__index_step_prepare(sy__index_step *st, size_t budget);
int sy__index_step_add(sy__index_step *st, const sy__index_route *r);
int sy__index_step_run(sy__index_step *st, size_t budget, sy__index **out);
/* Free one of the big arrays of `ix` (or a part of one) when nothing but
 * the caller holds it: 1 when none is left, and the index may be unref'd
 * for the price of its header; 0 when a part was freed; -1 when another
 * holder has it (nothing freed). A large index freed at once is a long
 * step of its own (munmap of tens of MB). */
int sy__index_free_step(sy__index *ix);
/* Items done by sy__index_step_run so far (for tests: work, not time). */
size_t sy__index_step_work(const sy__index_step *st);
void sy__index_step_free(sy__index_step *st);

/*
 * The whole-host table: when `host` (as matched, unsplit) spells an
 * all-literal Host pattern's labels and the host walk would meet no list
 * but that pattern's (no wildcard, no "**" on its way), returns true with
 * that list in *out (its Host predicates proven; exact): the caller then
 * needs neither the labels nor the host walk (sy__index_lookup without
 * host_labels). False: walk the labels. Reads only.
 */
bool sy__index_host_exact(const sy__index *ix, sy_str host, sy__cand_list *out);

/* Whether a lookup without host labels finds no list at all (no route
 * placed in the path trie, no generic list): a table of host routes. */
bool sy__index_path_none(const sy__index *ix);

/*
 * Collect the candidate lists for a request into out[0..cap). Returns the
 * number of lists, or SIZE_MAX when more than `cap` lists would be needed
 * (the caller then scans every route). Reads only; allocation-free.
 */
size_t sy__index_lookup(const sy__index *ix, const sy__segments *path,
                        const sy__segments *host_labels, int method_bit,
                        sy__cand_list *out, size_t cap);
/* The same for a rooted path of 1..64 bytes without '%' or ';' given as
 * path->flat and its '/' bits `sl` (bit i: byte i is '/'; sy__split_scan's),
 * whose segments are the slices between them: path's segment array is not
 * read (it may be stale). */
size_t sy__index_lookup_flat(const sy__index *ix, const sy__segments *path,
                             uint64_t sl, const sy__segments *host_labels,
                             int method_bit, sy__cand_list *out, size_t cap);

#endif
