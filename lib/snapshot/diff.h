/*
 * diff.h - three-way diffs of route lists by id and fingerprint: added,
 * updated (with which parts changed) and removed ids, and the unchanged
 * count. One core serves documents, snapshots and router applies.
 */
#ifndef SY_DIFF_H
#define SY_DIFF_H

#include "route/route.h"

/* Diff two route lists (any order, unique ids within each). */
int sy__diff_routes(const sy__alloc *a,
                    const struct sy_route *const *old_routes, size_t old_count,
                    const struct sy_route *const *new_routes, size_t new_count,
                    sy_diff **out);
/* Count n more unchanged routes: routes the caller already knows are the
 * same objects in both lists and left out of sy__diff_routes. */
void sy__diff_add_unchanged(sy_diff *d, size_t n);
/* Which parts differ between two versions of one route (SY_CHANGED_*):
 * exactly (def.h sy__def_route_changes). */
unsigned sy__diff_route_changes(const struct sy_route *a,
                                const struct sy_route *b);

#endif
