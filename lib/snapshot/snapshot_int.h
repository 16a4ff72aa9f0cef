/*
 * snapshot_int.h - internals shared by the snapshot modules: the shared
 * chunk tables (slots, rank order, id table; snapshot_table.c), the spread
 * index rebuild (snapshot_build.c) and the persistent overlay
 * (snapshot_overlay.c). Not part of any public API.
 */
#ifndef SY_SNAPSHOT_INT_H
#define SY_SNAPSHOT_INT_H

#include "snapshot/snapshot_layout.h"

#define NONE SY_NONE /* short local name */

/* ---- shared chunks (snapshot_table.c) ---- */

/* The reference counts of the chunks of every snapshot derived from one
 * first snapshot (snapshot.h): refs[cid], an id reused once its chunk is
 * freed. Writer only (under the router's lock), so plain integers. */
typedef struct sy__crefs {
    uint32_t *refs;     /* by chunk id */
    uint32_t *free_ids; /* ids free for reuse (room for every id) */
    uint32_t cap, next, nfree;
    size_t users; /* snapshots and rebuilds holding the table */
} sy__crefs;
/* A new table (one user) / one user more / one fewer (the last frees). */
sy__crefs *sy__crefs_new(const sy__alloc *a);
sy__crefs *sy__crefs_hold(sy__crefs *c);
void sy__crefs_drop(const sy__alloc *a, sy__crefs *c);
/* A new id (count 1) / an id whose count reached 0 given back, for a
 * table whose chunks are freed by their owner (the overlay's). */
bool sy__crefs_take(const sy__alloc *a, sy__crefs *c, uint32_t *cid);
void sy__crefs_put(sy__crefs *c, uint32_t cid);

/* Count a reference on each chunk of ids cids[0..n). */
void sy__snap_chunks_ref(sy__crefs *cr, const uint32_t *cids, size_t n);
/* Drop one reference on chunk c of id cid (NULL: nothing); the last
 * frees it. A chunk's id is not in the chunk (its size is its entries',
 * a size class of its own: docs/performance.md) but in the vector of
 * ids parallel to the chunk vector (slot_cids, rank_cids, id_cids). */
void sy__snap_chunk_unref(const sy__alloc *a, sy__crefs *cr, void *c,
                          uint32_t cid);
/* A new zeroed chunk of `size` bytes with an id of s->crefs (count 1),
 * stored in *cid. */
void *sy__snap_chunk_new(sy_snapshot *s, size_t size, uint32_t *cid);
/* `c` (of id *cid) itself when this snapshot is its only holder, else a
 * private copy (the shared one loses this snapshot's reference; *cid
 * becomes the copy's id). NULL: out of memory. The caller stores the
 * result in its vector. */
void *sy__snap_chunk_own(sy_snapshot *s, void *c, uint32_t *cid, size_t size);
/* Drop a reference on every chunk v[i] (id cids[i]; NULL entries
 * skipped) and free both vectors. */
void sy__snap_free_chunks(const sy__alloc *a, sy__crefs *cr, void **v,
                          uint32_t *cids, size_t n);
/* Slot i, writable (its chunk made private or created). NULL: no memory. */
sy__slot *sy__snap_slot_mut(sy_snapshot *s, uint32_t i);
uint64_t sy__snap_key_of(const sy_snapshot *s, uint32_t slot);

/* Slot id lists: a copy of src with room for `extra` more; push one. */
bool sy__snap_list_copy(const sy__alloc *a, sy__slot_list *dst,
                        const sy__slot_list *src, size_t extra);
bool sy__snap_list_push(const sy__alloc *a, sy__slot_list *l, uint32_t v);
/* Move every id of `from` to `to` (from emptied). */
bool sy__snap_list_move(const sy__alloc *a, sy__slot_list *to,
                        sy__slot_list *from);
void sy__snap_list_free(const sy__alloc *a, sy__slot_list *l);

/* ---- id table ---- */

/* The id table's hash of an id: sy__idtab_hash, the one a document's
 * parse records in the memo of a document (def.h sy__span_memo id_hash). */
uint32_t sy__snap_id_hash(const char *id);
/* The slot of `id` (hash h), or NONE; *pos: its entry or the free entry
 * where it would go. */
uint32_t sy__snap_id_find(const sy_snapshot *s, const char *id, uint32_t h,
                          uint32_t *pos);
bool sy__snap_id_set(sy_snapshot *s, uint32_t pos, sy__id_entry v);
bool sy__snap_id_remove_at(sy_snapshot *s, uint32_t pos);
uint32_t sy__snap_id_cap_for(size_t live);
/* The capacity of a new table for `ids` ids: room for an eighth more
 * (at 1,000,000 ids: 125,000 added before it is filled again), or the
 * power of two the table had before when that is smaller (room for
 * fewer, never more bytes than then). */
uint32_t sy__snap_id_cap_new(size_t ids);
bool sy__snap_id_alloc(sy_snapshot *s, uint32_t cap);
void sy__snap_id_fill(sy_snapshot *s);
/* A table that grew moves the entries of the one it outgrew `count`
 * positions at a time (sy__snap_share_base, each derive); the old one is
 * dropped once all have moved. false: out of memory. */
bool sy__snap_id_move(sy_snapshot *s, size_t count);
/* Drop the old table (every entry moved, or the table refilled). */
void sy__snap_id_drop_old(sy_snapshot *s);

/* ---- rank order ---- */

void sy__snap_rank_recount(sy_snapshot *s);
/* Insert / remove a live slot in the rank order; both keep the sequence
 * fingerprint (fp_seq) up to date. false: out of memory. */
bool sy__snap_rank_insert(sy_snapshot *s, uint32_t slot);
bool sy__snap_rank_remove(sy_snapshot *s, uint32_t slot);
/* The empty sequence's fingerprint. */
uint64_t sy__snap_fp_empty(void);
/* The route-sequence fingerprint of s's rank order, walked (each route's
 * fingerprint computed if it was left to its first reader): what fp_seq
 * holds when it is kept. *whole: false when a route's could not be
 * computed (out of memory: sy__def_route_fp's 0 taken in). */
uint64_t sy__snap_fp_walk(const sy_snapshot *s, bool *whole);

/* Share the base's chunk vectors with room for n more slots and rank
 * chunks; the id table is shared when its capacity suits live + n ids. */
int sy__snap_share_base(sy_snapshot *s, const sy_snapshot *base, size_t n,
                        size_t live);

/* ---- the persistent overlay (snapshot_overlay.c) ---- */

/* A copy sharing src's chunks (src NULL: empty). NULL: out of memory. */
sy__overlay *sy__overlay_copy(const sy__alloc *a, const sy__overlay *src);
void sy__overlay_free(sy__overlay *ov);
size_t sy__overlay_count(const sy__overlay *ov);
/* Free one chunk (256 buckets' groups) when this overlay is its only
 * holder: true when none is left (then sy__overlay_free is cheap). */
bool sy__overlay_free_step(sy__overlay *ov);
size_t sy__overlay_bytes(const sy__overlay *ov);
/* File live slot `slot` (rank key `key`, route r) / take it out again
 * (*found: it was there). O(its groups), whatever the overlay holds. */
int sy__overlay_add(sy__overlay *ov, uint32_t slot, uint64_t key,
                    const struct sy_route *r);
int sy__overlay_remove(sy__overlay *ov, uint32_t slot, const struct sy_route *r,
                       bool *found);

/* ---- the spread rebuild (snapshot_build.c) ---- */

/* Routes indexed / finishing items done per derive while a rebuild runs,
 * and the time a share may take (microseconds, wall clock, checked every
 * SY_BUILD_SLICE items or SY_BUILD_SLICE_ROUTES routes): the bounds on a
 * publish's share of the rebuild. An item's cost varies by pass (a cache
 * miss, a page fault of fresh memory, part of a mapping given back) and
 * with the machine's load, so the count alone let a share of 4,096 items
 * take 0.2-3 ms. */
#define SY_BUILD_ROUTES 64
#define SY_BUILD_ITEMS 4096
#define SY_BUILD_US 250
#define SY_BUILD_SLICE 64
#define SY_BUILD_SLICE_ROUTES 16
/* The time a derive spends freeing the trash of the last swap (the old
 * base and ov[1], DROP_STEP of a large array at a time, index_step.c)
 * before its share: the first part always goes. */
#define SY_TRASH_US 60

/* After a derive's changes: advance the running rebuild by one share and
 * swap its index in when complete; start one when the overlay and the
 * base's dead entries outgrow max(256, live / 32). */
int sy__snap_build_advance(sy_snapshot *s);
void sy__snap_build_unref(const sy__alloc *a, sy__snap_build *b);
sy__snap_build *sy__snap_build_ref(sy__snap_build *b);
/* What a swap replaced (the old base, the dropped ov[1]), freed a part per
 * derive once older snapshots no longer hold it (snapshot_build.c). */
void sy__snap_trash_unref(const sy__alloc *a, sy__snap_trash *t);
sy__snap_trash *sy__snap_trash_ref(sy__snap_trash *t);

#endif
