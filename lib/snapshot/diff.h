/*
 * diff.h - three-way diffs of route lists by id and fingerprint: added,
 * updated (with which parts changed) and removed ids, and the unchanged
 * count, and the kept routes whose rank order moved (reordered). One core
 * serves documents, snapshots and router applies.
 */
#ifndef SY_DIFF_H
#define SY_DIFF_H

#include "route/route.h"

/* Diff two route lists (any order, unique ids within each). */
int sy__diff_routes(const sy__alloc *a,
                    const struct sy_route *const *old_routes, size_t old_count,
                    const struct sy_route *const *new_routes, size_t new_count,
                    sy_diff **out);
/* The same, and the reordered routes from each list's rank keys (any
 * increasing key of the rank: the router's, a document's, a snapshot's
 * index); either NULL: none. */
int sy__diff_routes_ranked(const sy__alloc *a,
                           const struct sy_route *const *old_routes,
                           const uint64_t *old_keys, size_t old_count,
                           const struct sy_route *const *new_routes,
                           const uint64_t *new_keys, size_t new_count,
                           sy_diff **out);
/* One kept route (in both lists): its rank keys in each; `id` is copied
 * when the route is reported. */
typedef struct sy__rank_pair {
    uint64_t new_key, old_key;
    const char *id;
} sy__rank_pair;
/* Set d's reordered routes from every kept route's pair (p is sorted in
 * place by new key): the routes outside a longest increasing run of old
 * keys in new-key order, in new rank order. O(n) when nothing moved, else
 * O(n log n). SY_OK or SY_ENOMEM. */
int sy__diff_set_reordered(sy_diff *d, sy__rank_pair *p, size_t n);
/* Count n more unchanged routes: routes the caller already knows are the
 * same objects in both lists and left out of sy__diff_routes. */
void sy__diff_add_unchanged(sy_diff *d, size_t n);
/* Which parts differ between two versions of one route (SY_CHANGED_*):
 * exactly (def.h sy__def_route_changes). */
unsigned sy__diff_route_changes(const struct sy_route *a,
                                const struct sy_route *b);

#endif
