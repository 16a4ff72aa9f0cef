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
#include "snapshot/index_cand.h"

typedef struct sy__index sy__index;

/* One route to index: its slot id, rank key and compiled route. */
typedef struct sy__index_route {
    uint32_t slot;
    uint64_t key;
    const struct sy_route *route;
} sy__index_route;

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
