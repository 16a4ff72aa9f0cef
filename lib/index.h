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

#include "pattern.h"
#include "route.h"

typedef struct sy_index sy_index;

/* One route to index: its slot id, rank key and compiled route. */
typedef struct sy_index_route {
    uint32_t slot;
    uint64_t key;
    const struct sy_route *route;
} sy_index_route;

/* A candidate list: slot ids in ascending rank key order. */
typedef struct sy_cand_list {
    const uint32_t *ids;
    uint32_t len;
    /* every segment (path) or label (host) of the request equalled a
     * literal on the way to this list (no wildcard, no trailing-slash or **
     * shortcut): a route's all-literal Path (or Host) predicate is proven */
    uint8_t proof;
} sy_cand_list;

enum { SY_PROOF_NONE = 0, SY_PROOF_PATH = 1, SY_PROOF_HOST = 2 };

/* Build an index over `routes` (any order). The index is immutable and
 * refcounted (refs = 1), so snapshots can share it. */
int sy_index_build(const sy_alloc *a, const sy_index_route *routes, size_t n,
                   sy_index **out);
sy_index *sy_index_ref(sy_index *ix);
void sy_index_unref(sy_index *ix);
size_t sy_index_bytes(const sy_index *ix);

/*
 * Collect the candidate lists for a request into out[0..cap). Returns the
 * number of lists, or SIZE_MAX when more than `cap` lists would be needed
 * (the caller then scans every route). Reads only; allocation-free.
 */
size_t sy_index_lookup(const sy_index *ix, const sy_segments *path,
                       const sy_segments *host_labels, int method_bit,
                       sy_cand_list *out, size_t cap);

#endif
