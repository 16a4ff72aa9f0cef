/*
 * commit_reuse.h - the live routes of one source that a document step
 * (an apply, a rollback) may share rather than build again: by the
 * document position they hold, by the bytes that built them, by meaning
 * (id and fingerprint); and the source's routes in rank order, for the
 * diff (commit_reuse.c). Private to the commit steps.
 */
#ifndef SY_COMMIT_REUSE_H
#define SY_COMMIT_REUSE_H

#include "def/def.h"
#include "snapshot/snapshot.h"

/* The live route at one position of the source's document (the slot
 * key's position) and its slot. */
typedef struct at_entry {
    const struct sy_route *route; /* NULL: none */
    uint32_t slot;
} at_entry;

typedef struct reuse_ctx {
    const sy__alloc *alloc;
    const sy_snapshot *work;
    uint32_t source;
    bool spans_tried;         /* spans_build ran */
    struct span_entry *spans; /* NULL: none (no live route, or out of memory) */
    size_t mask;
    at_entry *at; /* by position; NULL: no table */
    size_t at_count;
    /* the source's memo (def.h): the spans of the routes by position,
     * which spans_build reads; NULL: none (set by the caller) */
    const sy__span_memo *memo;
    size_t memo_count;
} reuse_ctx;

/* The reuse of source `source` of the working snapshot `work`: the table
 * by position built at once (next_pos: the source's next position), the
 * one by bytes at the first lookup. Out of memory only loses shortcuts. */
void sy__reuse_begin(reuse_ctx *rc, const sy__alloc *a, const sy_snapshot *work,
                     uint32_t source, uint32_t next_pos);
void sy__reuse_end(reuse_ctx *rc);

/* The parse's reuse callbacks over rc (sy__def_reuse; memo unset: the
 * caller sets it there and in rc). */
sy__def_reuse sy__reuse_for_parse(reuse_ctx *rc);

/* The live routes of rc's source in rank order, but those whose slot is
 * marked in `skip` (may be NULL); from rc's allocator, NULL when out of
 * memory. */
const struct sy_route **
sy__reuse_source_routes(const reuse_ctx *rc, const bool *skip, size_t *count);

#endif
