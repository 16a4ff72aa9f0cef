/*
 * snapshot_int.h - internals shared by the snapshot modules: the shared
 * chunk tables (slots, rank order, id table; snapshot_table.c), the spread
 * index rebuild (snapshot_build.c) and the persistent overlay
 * (snapshot_overlay.c). Not part of any public API.
 */
#ifndef SY_SNAPSHOT_INT_H
#define SY_SNAPSHOT_INT_H

#include "snapshot.h"

#define NONE SY_NONE /* short local name */

/* ---- shared chunks (snapshot_table.c) ---- */

/* Every chunk type starts with its _Atomic uint32_t reference count. */
void sy_snap_chunk_ref(void *c);
void sy_snap_chunk_unref(const sy_alloc *a, void *c);
/* A new chunk of `size` bytes, refs 1, zeroed past the header. */
void *sy_snap_chunk_new(sy_snapshot *s, size_t size);
/* `c` itself when this snapshot is its only holder, else a private copy
 * (the shared one loses this snapshot's reference). NULL: out of memory. */
void *sy_snap_chunk_own(sy_snapshot *s, void *c, size_t size);
void sy_snap_free_chunks(const sy_alloc *a, void **v, size_t n);
/* Slot i, writable (its chunk made private or created). NULL: no memory. */
sy_slot *sy_snap_slot_mut(sy_snapshot *s, uint32_t i);
uint64_t sy_snap_key_of(const sy_snapshot *s, uint32_t slot);

/* ---- id table ---- */

uint64_t sy_snap_id_hash(const char *id);
/* The slot of `id` (hash h), or NONE; *pos: its entry or the free entry
 * where it would go. */
uint32_t sy_snap_id_find(const sy_snapshot *s, const char *id, uint64_t h,
                         uint32_t *pos);
bool sy_snap_id_set(sy_snapshot *s, uint32_t pos, sy_id_entry v);
bool sy_snap_id_remove_at(sy_snapshot *s, uint32_t pos);
uint32_t sy_snap_id_cap_for(size_t live);
bool sy_snap_id_alloc(sy_snapshot *s, uint32_t cap);
void sy_snap_id_fill(sy_snapshot *s);

/* ---- rank order ---- */

void sy_snap_rank_recount(sy_snapshot *s);
/* Insert / remove a live slot in the rank order; both keep the sequence
 * fingerprint (fp_seq) up to date. false: out of memory. */
bool sy_snap_rank_insert(sy_snapshot *s, uint32_t slot);
bool sy_snap_rank_remove(sy_snapshot *s, uint32_t slot);
/* The empty sequence's fingerprint. */
uint64_t sy_snap_fp_empty(void);

/* Share the base's chunk vectors with room for n more slots and rank
 * chunks; the id table is shared when its capacity suits live + n ids. */
int sy_snap_share_base(sy_snapshot *s, const sy_snapshot *base, size_t n,
                       size_t live);

#endif
