/*
 * snapshot_build.c - the base index rebuilt a bounded share per publish
 * (snapshot_int.h), so no single change pays for a full rebuild.
 *
 *   S0: overlay outgrows max(256, live/32) -> a rebuild starts over S0's
 *       live routes (its rank chunks, held): ov[1] = ov[0], ov[0] = {}
 *   S1..Sk: each derive indexes SY_BUILD_ROUTES more of them (routes that
 *       died meanwhile are skipped), then SY_BUILD_ITEMS items of the
 *       finishing passes (index_step.c); changes go to ov[0] as usual
 *   Sk: complete -> base = the new index, ov[1] dropped (the new base
 *       holds its routes), ov[0] kept (the changes since S0)
 *
 * The rebuild object is shared by the snapshots derived while it runs
 * (one writer at a time advances it). It never reads a route dead in the
 * snapshot that advances it, and slots are not reused, so an entry it
 * indexed is at worst a dead entry the matcher skips. A snapshot that
 * branched off (a failed commit's steps advanced the same rebuild) may
 * still hold a route the rebuild skipped: the swap files such routes in
 * ov[0], so every live route is in the base or an overlay.
 */
#include "snapshot/snapshot_int.h"

struct sy__snap_build {
    _Atomic uint32_t refs;
    const sy__alloc *a;
    sy__rank_chunk **frozen; /* S0's rank chunks (a reference each) */
    uint32_t *frozen_cids;   /* their ids in crefs */
    sy__crefs *crefs;        /* S0's (held) */
    size_t nfrozen;
    size_t k; /* next frozen entry: chunk k, entry j */
    uint32_t j;
    sy__index_step *st;
    sy__index *done;   /* the finished index (shared by branches) */
    uint32_t *skipped; /* frozen slots found dead */
    size_t nskipped, skip_cap;
    size_t dead_at_start; /* the snapshot's base_dead at S0 */
    size_t nroutes;       /* S0's live routes */
    bool failed;
};

struct sy__snap_trash {
    _Atomic uint32_t refs;
    sy__index *ix;   /* the old base (one reference) */
    sy__overlay *ov; /* the dropped ov[1] */
};

sy__snap_trash *sy__snap_trash_ref(sy__snap_trash *t) {
    atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    return t;
}

void sy__snap_trash_unref(const sy__alloc *a, sy__snap_trash *t) {
    if (!t || atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1)
        return;
    sy__index_unref(t->ix);
    sy__overlay_free(t->ov);
    sy__free(a, t);
}

/* Whether a share's (or the trash's) time is spent. */
static bool spent(uint64_t until) {
    return sy__now_monotonic_us() >= until;
}

/* Parts of the trash freed, if older snapshots let go of it, until
 * SY_TRASH_US have passed (the first part always); the snapshot drops the
 * trash when nothing is left. */
static void trash_step(sy_snapshot *s) {
    sy__snap_trash *t = s->trash;
    uint64_t until = sy__now_monotonic_us() + SY_TRASH_US;
    do {
        if (t->ov) {
            if (sy__overlay_free_step(t->ov)) {
                sy__overlay_free(t->ov);
                t->ov = NULL;
            }
        } else if (t->ix) {
            int rc = sy__index_free_step(t->ix);
            if (rc < 0)
                return; /* held by an older snapshot */
            if (rc > 0) {
                sy__index_unref(t->ix);
                t->ix = NULL;
            }
        }
        if (!t->ov && !t->ix) {
            s->trash = NULL;
            sy__snap_trash_unref(s->alloc, t);
            return;
        }
    } while (!spent(until));
}

sy__snap_build *sy__snap_build_ref(sy__snap_build *b) {
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

void sy__snap_build_unref(const sy__alloc *a, sy__snap_build *b) {
    if (!b || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
        return;
    sy__snap_free_chunks(a, b->crefs, (void **)b->frozen, b->frozen_cids,
                         b->nfrozen);
    sy__crefs_drop(a, b->crefs);
    sy__index_step_free(b->st);
    sy__index_unref(b->done);
    sy__free(a, b->skipped);
    sy__free(a, b);
}

/* A rebuild over s's live routes; s's overlay becomes ov[1]. */
static int start(sy_snapshot *s) {
    const sy__alloc *a = s->alloc;
    sy__snap_build *b = sy__calloc(a, 1, sizeof *b);
    sy__overlay *fresh = sy__overlay_copy(a, NULL);
    if (!b || !fresh ||
        !(b->frozen =
              sy__malloc(a, (s->rank_nchunks + 1) * sizeof *b->frozen)) ||
        !(b->frozen_cids =
              sy__malloc(a, (s->rank_nchunks + 1) * sizeof *b->frozen_cids)) ||
        !(b->st = sy__index_step_new(a))) {
        sy__overlay_free(fresh);
        if (b) {
            sy__free(a, b->frozen);
            sy__free(a, b->frozen_cids);
        }
        sy__free(a, b);
        return SY_ENOMEM;
    }
    if (sy__index_step_reserve(b->st, s->base, s->route_count)) {
        sy__index_step_free(b->st);
        sy__overlay_free(fresh);
        sy__free(a, b->frozen);
        sy__free(a, b->frozen_cids);
        sy__free(a, b);
        return SY_ENOMEM;
    }
    atomic_init(&b->refs, 1);
    b->a = a;
    b->crefs = sy__crefs_hold(s->crefs);
    memcpy(b->frozen, s->rank_chunks, s->rank_nchunks * sizeof *b->frozen);
    memcpy(b->frozen_cids, s->rank_cids,
           s->rank_nchunks * sizeof *b->frozen_cids);
    sy__snap_chunks_ref(s->crefs, b->frozen_cids, s->rank_nchunks);
    b->nfrozen = s->rank_nchunks;
    b->nroutes = s->route_count;
    b->dead_at_start = s->base_dead;
    sy__overlay_free(s->ov[1]);
    s->ov[1] = s->ov[0];
    s->ov[0] = fresh;
    s->build = b;
    return SY_OK;
}

static bool skip(sy__snap_build *b, uint32_t slot) {
    if (b->nskipped == b->skip_cap) {
        uint32_t *v = sy__grow(b->a, b->skipped, &b->skip_cap, b->nskipped + 1,
                               64, sizeof *v);
        if (!v)
            return false;
        b->skipped = v;
    }
    b->skipped[b->nskipped++] = slot;
    return true;
}

/* One share of the rebuild: the reserved edge table emptied, routes, then
 * finishing items, each up to its count and all of it until SY_BUILD_US
 * have passed, whichever comes first. The time is checked between slices
 * of SY_BUILD_SLICE items (SY_BUILD_SLICE_ROUTES routes), and the first
 * slice of a part always runs, so every share makes progress however
 * loaded the machine is. */
static int advance(sy_snapshot *s, sy__snap_build *b) {
    uint64_t until = sy__now_monotonic_us() + SY_BUILD_US;
    size_t items = 0;
    int ready = 0;
    while (items < SY_BUILD_ITEMS) {
        size_t w0 = sy__index_step_work(b->st);
        size_t want = SY_BUILD_ITEMS - items;
        ready = sy__index_step_prepare(
            b->st, want < SY_BUILD_SLICE ? want : SY_BUILD_SLICE);
        items += sy__index_step_work(b->st) - w0;
        if (ready || spent(until))
            break;
    }
    s->build_items += items;
    if (!ready)
        return SY_OK;
    while (b->k < b->nfrozen && s->build_routes < SY_BUILD_ROUTES) {
        if (s->build_routes && s->build_routes % SY_BUILD_SLICE_ROUTES == 0 &&
            spent(until))
            return SY_OK;
        const sy__rank_chunk *c = b->frozen[b->k];
        uint32_t slot = c->e[b->j];
        const sy__slot *sl = sy__snapshot_slot(s, slot);
        int rc = SY_OK;
        if (!sl->route)
            rc = skip(b, slot) ? SY_OK : SY_ENOMEM;
        else
            rc = sy__index_step_add(
                b->st, &(sy__index_route){slot, sl->key, sl->route});
        if (rc)
            return rc;
        s->build_routes++;
        if (++b->j == c->n) {
            b->j = 0;
            b->k++;
        }
    }
    if (b->k < b->nfrozen || (s->build_routes && spent(until)))
        return SY_OK;
    items = 0;
    int rc = 0;
    while (rc == 0 && items < SY_BUILD_ITEMS) {
        size_t w0 = sy__index_step_work(b->st);
        size_t want = SY_BUILD_ITEMS - items;
        rc = sy__index_step_run(
            b->st, want < SY_BUILD_SLICE ? want : SY_BUILD_SLICE, &b->done);
        items += sy__index_step_work(b->st) - w0;
        if (spent(until))
            break;
    }
    s->build_items += items;
    return rc < 0 ? rc : SY_OK;
}

/* The finished index becomes s's base. */
static int swap(sy_snapshot *s, sy__snap_build *b) {
    for (size_t i = 0; i < b->nskipped; i++) {
        uint32_t slot = b->skipped[i];
        const sy__slot *sl = sy__snapshot_slot(s, slot);
        bool in = false;
        /* alive here: a branch skipped it; ov[1] goes, ov[0] must have it */
        if (sl->route && (sy__overlay_remove(s->ov[0], slot, sl->route, &in) ||
                          sy__overlay_add(s->ov[0], slot, sl->key, sl->route)))
            return SY_ENOMEM;
    }
    /* graves[0] were held by the old base only; graves[1] may be in the
     * new one, until it is replaced in turn */
    if (!sy__snap_list_move(s->alloc, &s->free_slots, &s->graves[0]) ||
        !sy__snap_list_move(s->alloc, &s->graves[0], &s->graves[1]))
        return SY_ENOMEM;
    /* the old base and ov[1] go to the trash, freed a part per derive
     * (the trash of a swap before is freed now, if not yet done) */
    sy__snap_trash *tr = sy__calloc(s->alloc, 1, sizeof *tr);
    if (!tr)
        return SY_ENOMEM;
    atomic_init(&tr->refs, 1);
    tr->ix = s->base;
    tr->ov = s->ov[1];
    sy__snap_trash_unref(s->alloc, s->trash);
    s->trash = tr;
    s->base = sy__index_ref(b->done);
    s->ov[1] = NULL;
    s->base_dead =
        s->base_dead > b->dead_at_start ? s->base_dead - b->dead_at_start : 0;
    /* the new base's dead entries died since it began: graves[0] now */
    if (s->dead_bits)
        memset(s->dead_bits, 0, SY_DEAD_WORDS * sizeof *s->dead_bits);
    for (size_t i = 0; s->base_dead && i < s->graves[0].n; i++)
        if (!sy__snapshot_dead_set(s, s->graves[0].v[i]))
            return SY_ENOMEM;
    if (!s->base_dead) {
        sy__free(s->alloc, s->dead_bits);
        s->dead_bits = NULL;
    }
    s->build = NULL;
    sy__snap_build_unref(s->alloc, b);
    return SY_OK;
}

/* Start the frozen routes over with a fresh builder (after a failure). */
static bool reset(sy__snap_build *b) {
    sy__index_step *st = sy__index_step_new(b->a);
    if (!st || sy__index_step_reserve(st, NULL, b->nroutes)) {
        sy__index_step_free(st);
        return false;
    }
    sy__index_step_free(b->st);
    b->st = st;
    b->k = b->j = 0;
    b->nskipped = 0;
    b->failed = false;
    return true;
}

static int build_advance(sy_snapshot *s) {
    if (s->trash)
        trash_step(s);
    size_t live = s->route_count;
    size_t limit = live / 32 > 256 ? live / 32 : 256;
    /* out of memory while starting or advancing: the overlays keep
     * serving every route, and a later derive tries again */
    if (!s->build && sy__overlay_count(s->ov[0]) + s->base_dead > limit &&
        start(s) != SY_OK)
        return SY_OK;
    sy__snap_build *b = s->build;
    if (!b || (b->failed && !reset(b)))
        return SY_OK;
    if (b->done) /* a derive of its own: the swap frees the old base */
        return swap(s, b);
    if (advance(s, b) != SY_OK)
        b->failed = true;
    return SY_OK;
}

/* A rebuild's arrays live across publishes and are given back a share at
 * a time (index_step.c): never in huge pages, even when a document's
 * apply (a bulk, sy__alloc_bulk) advances it. */
int sy__snap_build_advance(sy_snapshot *s) {
    bool bulk = sy__alloc_bulk(false);
    int rc = build_advance(s);
    sy__alloc_bulk(bulk);
    return rc;
}
