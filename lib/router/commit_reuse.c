/*
 * commit_reuse.c - the live routes of one source that an apply (or a
 * rollback) may share rather than build again (commit_reuse.h): by the
 * document position they hold, by the bytes that built them, by meaning
 * (id and fingerprint); and the source's routes in rank order for the
 * diff.
 */
#include "router/commit_reuse.h"
#include "base/util.h"

#define NONE SY_NONE

/* The live routes of one source by the hash of the bytes that built them
 * (the source's memo, def.h sy__span_memo): an open-addressing table,
 * built at the first lookup of an apply (the parse finds most routes by
 * position, below, and asks for this one only when a document was
 * reordered). */
typedef struct span_entry {
    uint64_t hash;
    uint32_t len;
    uint32_t pos;                 /* the route's document position */
    const struct sy_route *route; /* NULL: empty */
} span_entry;

/* Fill rc->at from the source's live routes: one pass over the slots in
 * slot order (sequential memory) that reads no route. Positions of one
 * document are dense (a lenient apply leaves holes for invalid routes;
 * next_pos bounds them): a table much larger than the routes, or out of
 * memory, leaves it NULL, and the apply then only loses the shortcut. */
static void at_build(reuse_ctx *rc, uint32_t next_pos) {
    const sy_snapshot *s = rc->work;
    if (!s->route_count || !next_pos ||
        next_pos > 4 * (size_t)s->route_count + 64)
        return;
    rc->at = sy__calloc(rc->alloc, next_pos, sizeof *rc->at);
    if (!rc->at)
        return;
    rc->at_count = next_pos;
    for (uint32_t i = 0; i < s->slot_count; i++) {
        const sy__slot *sl = sy__snapshot_slot(s, i);
        size_t pos = (size_t)(sl->key & 0xffffffu);
        if (!sl->route || sl->source != rc->source)
            continue;
        if (pos >= rc->at_count || rc->at[pos].route) {
            /* every route of the source must be in the table exactly once
             * (sy__reuse_source_routes reads it): never expected, but
             * then none */
            sy__free(rc->alloc, rc->at);
            rc->at = NULL;
            rc->at_count = 0;
            return;
        }
        rc->at[pos] = (at_entry){sl->route, i};
    }
}

/* Fill rc->spans from the memo's entries of positions that hold a live
 * route (an entry describes the route at its position: def.h), sized for
 * twice their number. No memo (a first apply, the first after a
 * rollback) or no position table: none. */
static void spans_build(reuse_ctx *rc) {
    rc->spans_tried = true;
    size_t n = rc->memo_count < rc->at_count ? rc->memo_count : rc->at_count;
    size_t known = 0;
    for (size_t p = 0; p < n; p++)
        known += rc->at[p].route && rc->memo[p].span_len;
    if (!known)
        return;
    size_t cap = sy__pow2_at_least(16, 2 * known);
    rc->spans = sy__calloc(rc->alloc, cap, sizeof *rc->spans);
    if (!rc->spans)
        return;
    rc->mask = cap - 1;
    for (size_t p = 0; p < n; p++) {
        const sy__span_memo *m = &rc->memo[p];
        if (!rc->at[p].route || !m->span_len)
            continue;
        size_t k = (size_t)m->span_hash & rc->mask;
        while (rc->spans[k].route)
            k = (k + 1) & rc->mask;
        rc->spans[k] = (span_entry){m->span_hash, m->span_len, (uint32_t)p,
                                    rc->at[p].route};
    }
}

static const span_entry *span_find(reuse_ctx *rc, uint64_t hash, size_t len) {
    if (!rc->spans_tried)
        spans_build(rc);
    if (!rc->spans)
        return NULL;
    for (size_t k = (size_t)hash & rc->mask; rc->spans[k].route;
         k = (k + 1) & rc->mask)
        if (rc->spans[k].hash == hash && rc->spans[k].len == len)
            return &rc->spans[k];
    return NULL;
}

/* A live route of the same source built from the same bytes: the route
 * those bytes build (def.c route_find_same says why), without parsing
 * them; *pos gets its position. */
static const struct sy_route *reuse_bytes(void *data, uint64_t hash, size_t len,
                                          size_t *pos) {
    const span_entry *e = span_find(data, hash, len);
    *pos = e ? e->pos : SIZE_MAX;
    return e ? e->route : NULL;
}

/* The live route at position `pos` of the source's document. */
static const struct sy_route *reuse_at(void *data, size_t pos) {
    const reuse_ctx *rc = data;
    return pos < rc->at_count ? rc->at[pos].route : NULL;
}

/* The live routes of the apply's source in rank order, but those whose
 * slot is marked in `skip` (may be NULL). From the position table: the
 * source's routes only, sorted by their rank key (unique within a
 * source: order, source, position); else by a walk of the rank order. */
typedef struct keyed_route {
    uint64_t key;
    const struct sy_route *route;
} keyed_route;

const struct sy_route **
sy__reuse_source_routes(const reuse_ctx *rc, const bool *skip, size_t *count) {
    const sy_snapshot *s = rc->work;
    size_t n = 0;
    if (rc->at) {
        keyed_route *kr =
            sy__malloc(rc->alloc, (rc->at_count + 1) * sizeof *kr);
        const struct sy_route **v =
            kr ? sy__malloc(rc->alloc, (rc->at_count + 1) * sizeof *v) : NULL;
        if (v) {
            for (size_t p = 0; p < rc->at_count; p++) {
                const at_entry *e = &rc->at[p];
                if (e->route && !(skip && skip[e->slot]))
                    kr[n++] = (keyed_route){sy__snapshot_slot(s, e->slot)->key,
                                            e->route};
            }
            if (sy__sort_by_u64(rc->alloc, kr, n, sizeof *kr,
                                offsetof(keyed_route, key)))
                for (size_t i = 0; i < n; i++)
                    v[i] = kr[i].route;
            else
                sy__free(rc->alloc, v), v = NULL;
        }
        sy__free(rc->alloc, kr);
        *count = v ? n : 0;
        return v;
    }
    const struct sy_route **v =
        sy__malloc(rc->alloc, (s->route_count + 1) * sizeof *v);
    if (v)
        for (size_t i = 0; i < s->route_count; i++) {
            uint32_t slot = sy__snapshot_rank_at(s, i);
            const sy__slot *sl = sy__snapshot_slot(s, slot);
            if (sl->source == rc->source && !(skip && skip[slot]))
                v[n++] = sl->route;
        }
    *count = n;
    return v;
}

/* A live route of the same source with the same meaning: share it rather
 * than compile it again. */
static const struct sy_route *reuse_live(void *data, const char *id,
                                         uint64_t fingerprint) {
    const reuse_ctx *rc = data;
    if (!rc->work->route_count) /* (an empty table: no id to hash) */
        return NULL;
    uint32_t slot = sy__snapshot_find_slot(rc->work, id);
    if (slot == NONE ||
        sy__snapshot_slot(rc->work, slot)->source != rc->source ||
        sy__def_route_fp(sy__snapshot_slot(rc->work, slot)->route) !=
            fingerprint)
        return NULL;
    return sy__snapshot_slot(rc->work, slot)->route;
}

void sy__reuse_begin(reuse_ctx *rc, const sy__alloc *a, const sy_snapshot *work,
                     uint32_t source, uint32_t next_pos) {
    *rc = (reuse_ctx){a, work, source, false, NULL, 0, NULL, 0, NULL, 0};
    at_build(rc, next_pos);
}

void sy__reuse_end(reuse_ctx *rc) {
    sy__free(rc->alloc, rc->spans);
    sy__free(rc->alloc, rc->at);
    rc->spans = NULL;
    rc->at = NULL;
}

sy__def_reuse sy__reuse_for_parse(reuse_ctx *rc) {
    return (sy__def_reuse){.by_fingerprint = reuse_live,
                           .by_bytes = reuse_bytes,
                           .data = rc,
                           .at_position = reuse_at,
                           .count_hint = rc->at_count + 16,
                           .none_live = rc->work->route_count == 0};
}
