/*
 * snapshot.c - deriving immutable snapshots from the previous one plus a
 * list of route changes (snapshot.h), and the read-only snapshot API.
 *
 *   base snapshot                      derived snapshot
 *   slots: [r0][r1][r2]...[rN]   -->   slots: [r0][--][r2]...[rN][r1']
 *   base index (shared, refcounted) ------^     ov[0]: {N+1} (persistent)
 *
 * An updated route tombstones its old slot and takes a new one (a free
 * one when there is one) with the same rank key; the base index is shared
 * and its dead slots are skipped, the overlays (snapshot_overlay.c) hold
 * the routes the base lacks, at a cost per change that does not grow with
 * them, and the base is rebuilt a bounded share per derive
 * (snapshot_build.c). Only a change list about as large as the table
 * compacts the slots and builds a fresh base at once.
 *
 * Slots, rank order and id table are chunked and shared with the base
 * (snapshot_table.c): deriving copies the chunk pointer vectors and then
 * copies only the chunks a change writes to (copy on write), so one change
 * costs O(n / 1024) pointer copies plus a few 1024-entry chunks.
 */
#include "snapshot/snapshot.h"
#include "snapshot/snapshot_int.h"

#include "route/filter.h"
#include "service/service.h"

#include <stddef.h>
#include <stdlib.h>

#define NEW_SLOT (SY_NONE - 1) /* sy__slot.weight during the change loop */

static void snapshot_free_parts(sy_snapshot *s) {
    const sy__alloc *a = s->alloc;
    sy__snap_free_chunks(a, s->crefs, (void **)s->slot_chunks, s->slot_cids,
                         s->slot_chunk_cap);
    sy__snap_free_chunks(a, s->crefs, (void **)s->rank_chunks, s->rank_cids,
                         s->rank_nchunks);
    sy__free(a, s->rank_start);
    sy__snap_free_chunks(a, s->crefs, (void **)s->id_chunks, s->id_cids,
                         s->id_chunks ? s->id_cap >> SY_CHUNK_BITS : 0);
    sy__snap_id_drop_old(s);
    sy__index_unref(s->base);
    sy__overlay_free(s->ov[0]);
    sy__overlay_free(s->ov[1]);
    sy__snap_list_free(a, &s->free_slots);
    sy__snap_list_free(a, &s->graves[0]);
    sy__snap_list_free(a, &s->graves[1]);
    sy__free(a, s->dead_bits);
    sy__snap_build_unref(a, s->build);
    sy__snap_trash_unref(a, s->trash);
    sy__crefs_drop(a, s->crefs);
    sy__free(a, s->weights);
    sy__free(a, s->weight_slots);
    if (s->defaults)
        sy__route_unref(s->defaults);
    for (size_t i = 0; s->sources && i < s->source_count; i++)
        sy__free(a, s->sources[i]);
    sy__free(a, s->sources);
    for (size_t i = 0; s->services && i < s->service_count; i++)
        sy__service_unref(s->services[i]);
    sy__free(a, s->services);
}

void sy__snapshot_destroy(sy_snapshot *s) {
    if (!s)
        return;
    snapshot_free_parts(s);
    sy__pub_obj_free(s->alloc, &s->pub);
}

/* ---- derive ---- */

typedef struct keyed_slot {
    uint64_t key;
    uint32_t slot;
} keyed_slot;

/* Sort slot ids by rank key (ids of one change list: usually few). */
static bool sort_by_key(const sy_snapshot *s, uint32_t *ids, size_t n) {
    if (n < 2)
        return true;
    keyed_slot *tmp = sy__malloc(s->alloc, n * sizeof *tmp);
    if (!tmp)
        return false;
    for (size_t i = 0; i < n; i++)
        tmp[i] = (keyed_slot){sy__snap_key_of(s, ids[i]), ids[i]};
    bool ok = sy__sort_by_u64(s->alloc, tmp, n, sizeof *tmp,
                              offsetof(keyed_slot, key));
    for (size_t i = 0; ok && i < n; i++)
        ids[i] = tmp[i].slot;
    sy__free(s->alloc, tmp);
    return ok;
}

/* The changes in rank-key order (stable): a bulk list applied to an
 * empty table in this order fills slot i with rank i, so compaction has
 * nothing to move (compact_and_index). NULL when out of memory. */
static uint32_t *key_order(const sy__alloc *a, const sy__route_change *changes,
                           size_t n) {
    keyed_slot *tmp = sy__malloc(a, n * sizeof *tmp);
    uint32_t *order = sy__malloc(a, n * sizeof *order);
    bool ok = tmp && order;
    for (size_t i = 0; ok && i < n; i++)
        tmp[i] = (keyed_slot){changes[i].key, (uint32_t)i};
    ok = ok &&
         sy__sort_by_u64(a, tmp, n, sizeof *tmp, offsetof(keyed_slot, key));
    for (size_t i = 0; ok && i < n; i++)
        order[i] = tmp[i].slot;
    sy__free(a, tmp);
    if (!ok) {
        sy__free(a, order);
        return NULL;
    }
    return order;
}

/* Slot i holds rank i for every live route (and no dead slot is left). */
static bool slots_in_rank_order(const sy_snapshot *s) {
    if (s->slot_count != s->route_count)
        return false;
    uint32_t i = 0;
    for (size_t k = 0; k < s->rank_nchunks; k++)
        for (uint32_t j = 0; j < s->rank_chunks[k]->n; j++, i++)
            if (s->rank_chunks[k]->e[j] != i)
                return false;
    return true;
}

static int index_over(sy_snapshot *s, const uint32_t *slots, size_t n,
                      sy__index **out) {
    sy__index_route *in = sy__malloc(s->alloc, (n ? n : 1) * sizeof *in);
    if (!in)
        return SY_ENOMEM;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const sy__slot *sl = sy__snapshot_slot(s, slots[i]);
        if (sl->route)
            in[m++] = (sy__index_route){slots[i], sl->key, sl->route};
    }
    int rc = sy__index_build(s->alloc, in, m, out);
    sy__free(s->alloc, in);
    return rc;
}

static bool has_weight(const struct sy_route *r) {
    for (size_t p = 0; p < r->predicate_count; p++)
        if (sy__pred_get_kind(sy__route_cpred(r, p)) == SY_PK_WEIGHT)
            return true;
    return false;
}

static const sy__pred *weight_pred(const struct sy_route *r) {
    for (size_t p = 0; p < r->predicate_count; p++)
        if (sy__pred_get_kind(sy__route_cpred(r, p)) == SY_PK_WEIGHT)
            return sy__route_cpred(r, p);
    return NULL;
}

static int cmp_def_order(const void *x, const void *y) {
    const keyed_slot *a = x, *b = y;
    uint64_t ka = a->key & 0xffffffffu, kb = b->key & 0xffffffffu;
    return ka < kb ? -1 : ka > kb;
}

/*
 * Weight groups over the live weight routes among `cand` (slot ids):
 * members in definition order (source, position), ranges of [0,1)
 * proportional to their weights, recomputed at every publish. Touches only
 * weight routes, so a one-route change stays cheap.
 */
static int build_weights(sy_snapshot *s, const uint32_t *cand, size_t n) {
    const sy__alloc *a = s->alloc;
    keyed_slot *ws = sy__malloc(a, (n ? n : 1) * sizeof *ws);
    if (!ws)
        return SY_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const sy__slot *sl = sy__snapshot_slot(s, cand[i]);
        if (sl->route && !sl->route->disabled && has_weight(sl->route))
            ws[k++] = (keyed_slot){sl->key, cand[i]};
    }
    if (!k) {
        sy__free(a, ws);
        return SY_OK;
    }
    qsort(ws, k, sizeof *ws, cmp_def_order);
    s->weight_slots = sy__malloc(a, k * sizeof *s->weight_slots);
    s->weights = sy__calloc(a, k, sizeof *s->weights);
    const char **names = sy__malloc(a, k * sizeof *names);
    uint32_t *wv = sy__malloc(a, k * sizeof *wv);
    if (!s->weight_slots || !s->weights || !names || !wv) {
        sy__free(a, ws);
        sy__free(a, names);
        sy__free(a, wv);
        return SY_ENOMEM;
    }
    for (size_t i = 0; i < k; i++) {
        const sy__pred *pr =
            weight_pred(sy__snapshot_slot(s, ws[i].slot)->route);
        s->weight_slots[i] = ws[i].slot;
        names[i] = sy__pred_weight_group(pr);
        wv[i] = sy__pred_weight_value(pr);
        sy__slot *sl = sy__snap_slot_mut(s, ws[i].slot);
        if (!sl) {
            sy__free(a, ws);
            sy__free(a, names);
            sy__free(a, wv);
            return SY_ENOMEM;
        }
        sl->weight = (uint32_t)i;
    }
    s->weight_count = k;
    sy__free(a, ws);
    /* group numbers by first appearance; ranges proportional to weight */
    uint32_t groups = 0;
    for (size_t i = 0; i < k; i++) {
        size_t first = i;
        for (size_t j = 0; j < i; j++)
            if (strcmp(names[j], names[i]) == 0) {
                first = j;
                break;
            }
        if (first != i) {
            s->weights[i].group = s->weights[first].group;
            continue;
        }
        s->weights[i].group = groups++;
        double total = 0;
        for (size_t j = i; j < k; j++)
            if (strcmp(names[j], names[i]) == 0)
                total += wv[j];
        double lo = 0;
        for (size_t j = i; j < k; j++) {
            if (strcmp(names[j], names[i]) != 0)
                continue;
            double w = total > 0 ? wv[j] / total : 0;
            s->weights[j].lo = lo;
            s->weights[j].hi = lo + w;
            lo += w;
        }
        /* the last member with a weight closes the range exactly at 1 */
        for (size_t j = k; j-- > i;)
            if (strcmp(names[j], names[i]) == 0 && wv[j] > 0) {
                s->weights[j].hi = 1.0;
                break;
            }
    }
    sy__free(a, names);
    sy__free(a, wv);
    return SY_OK;
}

/* What matching r needs of the per-request scratch; true when r has a
 * Weight predicate (has_weight). */
static bool scratch_needs(sy_snapshot *s, const struct sy_route *r) {
    uint32_t groups = 0, vars = 0;
    bool weight = false;
    for (size_t i = 0; i < r->predicate_count; i++) {
        const sy__pred *p = sy__route_cpred(r, i);
        sy__pred_kind k = sy__pred_get_kind(p);
        s->needs_host |= k == SY_PK_HOST;
        s->needs_time |= k == SY_PK_TIME;
        weight |= k == SY_PK_WEIGHT;
        uint32_t g = sy__pred_max_groups(p);
        if (g > groups)
            groups = g;
        vars += sy__pred_var_count(p);
    }
    for (size_t i = 0; i < r->more->filter_count; i++)
        if (r->more->cfilters[i]) {
            uint32_t g = sy__filter_max_groups(r->more->cfilters[i]);
            if (g > groups)
                groups = g;
        }
    if (groups > s->max_groups)
        s->max_groups = groups;
    if (vars > s->max_vars)
        s->max_vars = vars;
    return weight;
}

/* scratch_needs reads each route's predicate and filter objects: over a
 * large table in slot (rank) order those lie all over the heap, a TLB and
 * cache miss each. The slots ahead are fetched in stages, each reading
 * only lines an earlier stage fetched (hints only). */
static void prefetch_needs(const sy_snapshot *s, uint32_t i, uint32_t n) {
    if (i + 16 < n) {
        const struct sy_route *r = sy__snapshot_slot(s, i + 16)->route;
        if (r) {
            __builtin_prefetch(&r->predicate_count);
            __builtin_prefetch(&r->cpred);
        }
    }
    if (i + 8 < n) {
        const struct sy_route *r = sy__snapshot_slot(s, i + 8)->route;
        if (r) {
            __builtin_prefetch(r->cpred);
            __builtin_prefetch(r->more->cfilters);
        }
    }
    if (i + 4 < n) {
        const struct sy_route *r = sy__snapshot_slot(s, i + 4)->route;
        for (size_t k = 0; r && k < r->predicate_count && k < 8; k++)
            __builtin_prefetch(sy__route_cpred(r, k));
        for (size_t k = 0; r && k < r->more->filter_count && k < 8; k++)
            __builtin_prefetch(r->more->cfilters[k]);
    }
}

/* What matching in s needs of its context and how its paths are split
 * and normalised, worked out once per snapshot (sy__match_prep, read by
 * match.c's prepare). */
static void match_prep_init(sy_snapshot *s) {
    sy__match_prep *p = &s->prep;
    p->fit_caps = s->max_vars + 8;
    p->fit_groups = s->max_groups + 1 > 16 ? s->max_groups + 1 : 16;
    bool as_is = s->path_norm.mode == SY_PN_AS_IS;
    /* a rooted path without a '.' starting a segment and without '%' is
     * never changed by the normaliser, unless it merges slashes */
    p->norm_mask = as_is
                       ? 0
                       : SY_SEEN_DOT | SY_SEEN_PCT | SY_SEEN_UNROOTED |
                             (s->path_norm.merge_slashes ? SY_SEEN_ALWAYS : 0);
    p->keep_escaped_slashes =
        !as_is && s->path_norm.escaped_slashes == SY_PN_SLASHES_KEEP;
    p->strip_host_port = s->strip_host_port;
    p->needs_host = s->needs_host;
    p->needs_time = s->needs_time;
    p->host_or_time = s->strip_host_port || s->needs_host || s->needs_time;
    p->weights = s->weight_count > 0;
    p->path_lazy = s->base && sy__index_path_none(s->base);
    p->cands_live = s->base_dead == 0;
    p->ov_live = sy__overlay_count(s->ov[0]) || sy__overlay_count(s->ov[1]);
}

static int copy_config(sy_snapshot *s, const sy_snapshot *base,
                       const sy__snapshot_config *cfg) {
    const sy__alloc *a = s->alloc;
    s->strip_host_port = cfg->strip_host_port;
    s->path_norm = cfg->path_norm;
    s->budget = cfg->budget;
    s->clock_ms = cfg->clock_ms;
    s->clock_data = cfg->clock_data;
    s->random = cfg->random;
    s->policy = cfg->policy;
    s->key_limit = cfg->key_limit;
    s->defaults = cfg->defaults ? sy__route_ref(cfg->defaults) : NULL;
    if (s->defaults)
        scratch_needs(s, s->defaults);
    s->source_count = cfg->source_count;
    s->sources = sy__calloc(a, cfg->source_count + 1, sizeof *s->sources);
    if (!s->sources)
        return SY_ENOMEM;
    for (size_t i = 0; i < cfg->source_count; i++)
        if (!(s->sources[i] = sy__strdup(a, cfg->sources[i])))
            return SY_ENOMEM;
    struct sy__service *const *svc =
        cfg->replace_services ? cfg->services : (base ? base->services : NULL);
    size_t nsvc = cfg->replace_services ? cfg->service_count
                                        : (base ? base->service_count : 0);
    s->services = sy__calloc(a, nsvc + 1, sizeof *s->services);
    if (!s->services)
        return SY_ENOMEM;
    for (size_t i = 0; i < nsvc; i++)
        s->services[s->service_count++] = sy__service_ref(svc[i]);
    return SY_OK;
}

/* Compact live slots into rank order (slot i = rank i) in fresh chunks,
 * rebuild the rank chunks, the id table and the base index over them.
 * *wslots (*wn): the slots of live routes with a Weight predicate, for
 * build_weights (heap, the caller frees). needs_known: the caller has
 * seen every live route's scratch needs and filled *wslots, valid while
 * the slots stay where they are (else both are done again here). */
static int compact_and_index(sy_snapshot *s, uint32_t **wslots, size_t *wn,
                             bool needs_known) {
    const sy__alloc *a = s->alloc;
    size_t n = s->route_count;
    size_t nsk = (n + SY_CHUNK - 1) / SY_CHUNK;
    /* fresh rank chunks, full: half-full ones cost 4 bytes a route, and a
     * later insert into a full one splits it (a copy of one chunk, as a
     * shared chunk's first change makes anyway) */
    size_t per = SY_RANK_CHUNK_MAX, nrk = (n + per - 1) / per;
    /* slots already in rank order (a first document: see key_order): the
     * slot chunks and the id table stay, only the rank chunks are made
     * afresh; nothing is copied and freed again */
    bool keep = slots_in_rank_order(s);
    /* every chunk made so far is replaced (and freed) below: count only
     * the fresh ones */
    s->chunk_bytes = 0;
    if (keep) {
        nsk = 0;
        for (size_t k = 0; k < s->slot_chunk_cap && s->slot_chunks[k]; k++)
            s->chunk_bytes += sizeof(sy__slot_chunk);
        for (size_t k = 0; k < s->id_cap >> SY_CHUNK_BITS; k++)
            s->chunk_bytes += s->id_chunks[k] ? sizeof(sy__id_chunk) : 0;
    }
    sy__slot_chunk **sc = sy__calloc(a, nsk ? nsk : 1, sizeof *sc);
    uint32_t *scid = sy__calloc(a, nsk ? nsk : 1, sizeof *scid);
    sy__rank_chunk **rc = sy__calloc(a, nrk + 1, sizeof *rc);
    uint32_t *rcid = sy__calloc(a, nrk + 1, sizeof *rcid);
    size_t *rs = sy__calloc(a, nrk + 1, sizeof *rs);
    bool ok = sc && scid && rc && rcid && rs;
    for (size_t k = 0; ok && k < nsk; k++)
        ok = (sc[k] = sy__snap_chunk_new(s, sizeof **sc, &scid[k])) != NULL;
    for (size_t k = 0; ok && k < nrk; k++)
        ok = (rc[k] = sy__snap_chunk_new(s, sizeof **rc, &rcid[k])) != NULL;
    if (ok) {
        size_t i = 0;
        for (size_t k = 0; k < s->rank_nchunks; k++)
            for (uint32_t j = 0; j < s->rank_chunks[k]->n; j++, i++) {
                if (!keep) {
                    sy__slot *d =
                        &sc[i >> SY_CHUNK_BITS]->e[i & (SY_CHUNK - 1)];
                    *d = *sy__snapshot_slot(s, s->rank_chunks[k]->e[j]);
                    d->weight = NONE;
                } /* else: every slot is this derive's, weight NONE */
                sy__rank_chunk *r = rc[i / per];
                r->e[r->n++] = (uint32_t)i;
            }
    }
    if (!ok) {
        sy__snap_free_chunks(a, s->crefs, (void **)sc, scid, nsk);
        sy__snap_free_chunks(a, s->crefs, (void **)rc, rcid, nrk);
        sy__free(a, rs);
        return SY_ENOMEM;
    }
    sy__snap_free_chunks(a, s->crefs, (void **)s->rank_chunks, s->rank_cids,
                         s->rank_nchunks);
    sy__free(a, s->rank_start);
    s->rank_chunks = rc;
    s->rank_cids = rcid;
    s->rank_start = rs;
    s->rank_nchunks = nrk;
    if (keep) {
        sy__free(a, sc);
        sy__free(a, scid);
        sy__snap_rank_recount(s);
    } else {
        sy__snap_free_chunks(a, s->crefs, (void **)s->slot_chunks, s->slot_cids,
                             s->slot_chunk_cap);
        s->slot_chunks = sc;
        s->slot_cids = scid;
        s->slot_chunk_cap = nsk;
        s->slot_count = (uint32_t)n;
        sy__snap_rank_recount(s);
        sy__snap_free_chunks(a, s->crefs, (void **)s->id_chunks, s->id_cids,
                             s->id_cap >> SY_CHUNK_BITS);
        s->id_chunks = NULL;
        s->id_cids = NULL;
        sy__snap_id_drop_old(s);
        if (!sy__snap_id_alloc(s, sy__snap_id_cap_new(n)))
            return SY_ENOMEM;
        sy__snap_id_fill(s);
    }
    uint32_t *all = sy__malloc(a, (n ? n : 1) * sizeof *all);
    if (!all)
        return SY_ENOMEM;
    for (size_t i = 0; i < n; i++)
        all[i] = (uint32_t)i;
    if (!needs_known || !keep) {
        sy__free(a, *wslots);
        *wn = 0;
        uint32_t *ws = *wslots = sy__malloc(a, (n ? n : 1) * sizeof *ws);
        if (!ws) {
            sy__free(a, all);
            return SY_ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
            prefetch_needs(s, (uint32_t)i, (uint32_t)n);
            const struct sy_route *rt =
                sy__snapshot_slot(s, (uint32_t)i)->route;
            if (scratch_needs(s, rt) && !rt->disabled)
                ws[(*wn)++] = (uint32_t)i;
        }
    }
    int r = index_over(s, all, n, &s->base);
    sy__free(a, all);
    return r;
}

/* One derive's state, shared by its phases. */
typedef struct derive {
    const sy__alloc *a;
    sy_snapshot *s;
    const sy_snapshot *base;
    const sy__route_change *changes;
    size_t n;
    bool bulk;       /* indexed from scratch (compact_and_index) */
    size_t live;     /* live routes as the changes are applied */
    uint32_t *order; /* the changes in key order (a first document) */
    uint32_t *added; /* slots of set changes */
    size_t added_count;
    struct sy_route **removed; /* routes that left, handed back */
    size_t nremoved;
    uint32_t *fresh_ws; /* a first document: its weight candidates */
    size_t fresh_wn;
} derive;

static const sy__route_change *change_at(const derive *d, size_t c) {
    return &d->changes[d->order ? d->order[c] : c];
}

/* The last snapshot serial handed out (0: none yet). */
static _Atomic uint64_t snapshot_serial;

/* Phase 1: the new snapshot object sharing the base's tables; whether it
 * is indexed from scratch (a change list about as large as the table:
 * its cost is O(n) anyway) or over the base's index with overlays. */
static int derive_start(derive *d, const sy__snapshot_config *cfg,
                        uint64_t generation) {
    const sy__alloc *a = d->a;
    const sy_snapshot *base = d->base;
    size_t n = d->n;
    sy_snapshot *s = d->s = sy__pub_obj_alloc(a, sizeof *s);
    if (!s)
        return SY_ENOMEM;
    s->alloc = a;
    s->generation = generation;
    s->serial = 1 + atomic_fetch_add_explicit(&snapshot_serial, 1,
                                              memory_order_relaxed);
    s->fp_seq = sy__snap_fp_empty();
    s->fp_lazy = true;
    if (base && !base->fp_lazy) {
        s->fp_seq = base->fp_seq;
        s->fp_lazy = false;
    } else if (base && atomic_load_explicit(&base->fingerprint_done,
                                            memory_order_acquire)) {
        s->fp_seq =
            atomic_load_explicit(&base->fp_walked, memory_order_relaxed);
        s->fp_lazy = false;
    }
    int rc = copy_config(s, base, cfg);
    if (rc)
        return rc;
    s->crefs =
        base && base->crefs ? sy__crefs_hold(base->crefs) : sy__crefs_new(a);
    if (!s->crefs)
        return SY_ENOMEM;
    /* slots: the base's (routes shared, not counted) + one per set change,
     * a free one reused when there is one */
    d->live = base ? base->route_count : 0;
    d->added = sy__malloc(a, (n ? n : 1) * sizeof *d->added);
    d->removed = sy__malloc(a, (n ? n : 1) * sizeof *d->removed);
    if (!d->added || !d->removed || sy__snap_share_base(s, base, n, d->live))
        return SY_ENOMEM;
    /* from scratch: no base index, no live route to keep (a first
     * document after the router's empty snapshot is indexed whole,
     * not left in the overlay, whose lists the walk proves nothing
     * for), or changes that outweigh what is kept */
    d->bulk = !base || !base->base || d->live == 0 || n * 4 >= d->live + 64;
    if (!d->bulk) {
        s->base = sy__index_ref(base->base);
        s->base_dead = base->base_dead;
        if (base->dead_bits) {
            s->dead_bits = sy__malloc(a, SY_DEAD_WORDS * sizeof(uint64_t));
            if (!s->dead_bits)
                return SY_ENOMEM;
            memcpy(s->dead_bits, base->dead_bits,
                   SY_DEAD_WORDS * sizeof(uint64_t));
        }
        s->build = base->build ? sy__snap_build_ref(base->build) : NULL;
        s->trash = base->trash ? sy__snap_trash_ref(base->trash) : NULL;
        if (!(s->ov[0] = sy__overlay_copy(a, base->ov[0])) ||
            (base->ov[1] && !(s->ov[1] = sy__overlay_copy(a, base->ov[1]))) ||
            !sy__snap_list_copy(a, &s->free_slots, &base->free_slots, n) ||
            !sy__snap_list_copy(a, &s->graves[0], &base->graves[0], n) ||
            !sy__snap_list_copy(a, &s->graves[1], &base->graves[1], n))
            return SY_ENOMEM;
    }
    /* a whole document onto an empty table: taken in rank order, so the
     * slots need no compaction (compact_and_index) */
    if (d->bulk && d->live == 0 && n > 1 &&
        !(d->order = key_order(a, d->changes, n)))
        return SY_ENOMEM;
    /* a first document: every live route is one of the changes, whose
     * scratch needs and weight slots one pass in document order notes
     * (fresh_needs; compact_and_index then needs no pass of its own) */
    if (d->order && !(d->fresh_ws = sy__malloc(a, n * sizeof *d->fresh_ws)))
        return SY_ENOMEM;
    return SY_OK;
}

/* What change c + 12 will read (its id's hash or text, its fingerprint
 * for the rank order's sequence hash when that is kept): in key order
 * they lie all over the heap. */
static void prefetch_changes(const derive *d, size_t c) {
    if (c + 12 < d->n) {
        const sy__route_change *ah = change_at(d, c + 12);
        if (!ah->id_hash) /* else the change carries its id's hash */
            __builtin_prefetch(ah->id);
        if (ah->route && !d->s->fp_lazy)
            __builtin_prefetch(&ah->route->fingerprint);
    }
}

/* Phase 2a: the live route in slot `old` leaves (replaced or removed):
 * out of the rank order, the id table and the overlays, its slot free now
 * (only in ov[0]: no index holds it) or a grave until no base or rebuild
 * can hold it (snapshot_build.c); its route handed back. */
static bool derive_remove(derive *d, uint32_t old, uint32_t pos) {
    sy_snapshot *s = d->s;
    sy__slot *os = sy__snap_slot_mut(s, old);
    if (!os || !sy__snap_rank_remove(s, old) || !sy__snap_id_remove_at(s, pos))
        return false;
    bool in0 = false, in1 = false;
    if (!d->bulk &&
        (sy__overlay_remove(s->ov[0], old, os->route, &in0) ||
         (!in0 && sy__overlay_remove(s->ov[1], old, os->route, &in1))))
        return false;
    if (!d->bulk && !in0) { /* a dead entry of an index */
        s->base_dead++;
        if (!sy__snapshot_dead_set(s, old))
            return false;
    }
    sy__slot_list *to = in0        ? &s->free_slots
                        : s->build ? &s->graves[1]
                                   : &s->graves[0];
    if (!d->bulk && !sy__snap_list_push(d->a, to, old))
        return false;
    d->removed[d->nremoved++] = os->route; /* hand it back */
    os->route = NULL;
    d->live--;
    return true;
}

/* Phase 2b: change ch's route into a slot (a free one reused), the id
 * table at `pos`, the rank order and the overlay. */
static bool derive_add(derive *d, const sy__route_change *ch, uint32_t h,
                       uint32_t pos) {
    sy_snapshot *s = d->s;
    bool reuse = !d->bulk && s->free_slots.n;
    uint32_t slot =
        reuse ? s->free_slots.v[s->free_slots.n - 1] : s->slot_count;
    sy__slot *ns = sy__snap_slot_mut(s, slot);
    if (!ns)
        return false;
    /* NEW_SLOT marks a slot of this change list until the loop ends */
    *ns = (sy__slot){ch->route, ch->key, ch->source, NEW_SLOT};
    if (reuse)
        s->free_slots.n--;
    else
        s->slot_count++;
    if (!sy__snap_id_set(s, pos, (sy__id_entry){h, slot}) ||
        !sy__snap_rank_insert(s, slot))
        return false;
    if (!d->bulk && sy__overlay_add(s->ov[0], slot, ch->key, ch->route))
        return false;
    d->added[d->added_count++] = slot;
    d->live++;
    return true;
}

/* A first document's scratch needs and weight candidates (fresh_ws) in
 * the changes' own order (the document's, which the parse allocated the
 * routes in: up the heap a page in turn), not the change loop's key order
 * (a miss and a TLB miss a route line); the rare weight routes' change
 * numbers become slots through d->added (key order) at the end. */
static bool fresh_needs(derive *d) {
    const sy__route_change *ch = d->changes;
    size_t n = d->n;
    for (size_t c = 0; c < n; c++) {
        if (c + 4 < n && ch[c + 4].route)
            __builtin_prefetch(ch[c + 4].route->cpred);
        const struct sy_route *r = ch[c].route;
        if (r && scratch_needs(d->s, r) && !r->disabled)
            d->fresh_ws[d->fresh_wn++] = (uint32_t)c;
    }
    if (!d->fresh_wn)
        return true;
    uint32_t *slot_of = sy__malloc(d->a, n * sizeof *slot_of);
    if (!slot_of)
        return false;
    for (size_t i = 0, k = 0; i < n; i++)
        if (change_at(d, i)->route)
            slot_of[d->order[i]] = d->added[k++];
    for (size_t j = 0; j < d->fresh_wn; j++)
        d->fresh_ws[j] = slot_of[d->fresh_ws[j]];
    sy__free(d->a, slot_of);
    return true;
}

/* Change ch's id hash: the one the caller gave (a document's memo holds
 * the hash its parse took: def.c route_place, the same function), so that
 * a large document's ids are not read here (a miss each), else hashed
 * from the text (a hash of 0 is hashed again, to 0). */
static uint32_t change_id_hash(const sy__route_change *ch) {
    return ch->id_hash ? ch->id_hash : sy__snap_id_hash(ch->id);
}

/* Phase 2: every change in order. SY_EINVAL for an id twice in the list
 * (the caller takes one reference per set change), SY_ENOMEM. */
static int derive_changes(derive *d) {
    sy_snapshot *s = d->s;
    size_t n = d->n;
    /* id hashes of the changes c .. c + ID_AHEAD (idq[c % 8]): each hashed
     * ID_AHEAD changes ahead and its id table entry fetched (a random line
     * of the table, a miss per change in a large one) */
    enum { ID_AHEAD = 4 };
    uint32_t idq[8];
    for (size_t c = 0; c < n && c < ID_AHEAD; c++)
        idq[c] = change_id_hash(change_at(d, c));
    for (size_t c = 0; c < n; c++) {
        const sy__route_change *ch = change_at(d, c);
        prefetch_changes(d, c);
        if (c + ID_AHEAD < n) {
            size_t k = c + ID_AHEAD;
            uint32_t hk = change_id_hash(change_at(d, k));
            uint32_t i = sy__snap_id_home(hk, s->id_cap);
            idq[k % 8] = hk;
            const sy__id_chunk *ic = s->id_chunks[i >> SY_CHUNK_BITS];
            if (ic) /* NULL: a chunk of a table that grew, still empty */
                __builtin_prefetch(&ic->e[i & (SY_CHUNK - 1)]);
        }
        uint32_t h = idq[c % 8];
        uint32_t pos;
        uint32_t old = sy__snap_id_find(s, ch->id, h, &pos);
        if (old != NONE && sy__snapshot_slot(s, old)->weight == NEW_SLOT)
            return SY_EINVAL;
        if (old != NONE) {
            if (!derive_remove(d, old, pos))
                return SY_ENOMEM;
            sy__snap_id_find(s, ch->id, h, &pos);
        }
        if (ch->route && !derive_add(d, ch, h, pos))
            return SY_ENOMEM;
    }
    if (d->fresh_ws && !fresh_needs(d))
        return SY_ENOMEM;
    for (size_t i = 0; i < d->added_count; i++) /* private chunks: no copy */
        sy__snap_slot_mut(s, d->added[i])->weight = NONE;
    sy__snap_rank_recount(s);
    /* taken in key order (key_order): already sorted */
    if (!d->order && !sort_by_key(s, d->added, d->added_count))
        return SY_ENOMEM;
    return SY_OK;
}

/* Phase 3 over a base: the base's index shared, the changes in the
 * overlay (phase 2), a rebuild advanced by one bounded share; weight
 * candidates are the base's weight routes and the new slots. */
static int derive_index_over_base(derive *d) {
    sy_snapshot *s = d->s;
    const sy_snapshot *base = d->base;
    if (base->max_groups > s->max_groups)
        s->max_groups = base->max_groups;
    if (base->max_vars > s->max_vars)
        s->max_vars = base->max_vars;
    s->needs_host |= base->needs_host;
    s->needs_time |= base->needs_time;
    size_t wn = base->weight_count + d->added_count;
    uint32_t *wc = sy__malloc(d->a, (wn ? wn : 1) * sizeof *wc);
    if (!wc)
        return SY_ENOMEM;
    for (size_t i = 0; i < d->added_count; i++)
        scratch_needs(s, sy__snapshot_slot(s, d->added[i])->route);
    int rc = sy__snap_build_advance(s);
    size_t k = 0;
    for (size_t i = 0; i < base->weight_count; i++)
        wc[k++] = base->weight_slots[i];
    memcpy(wc + k, d->added, d->added_count * sizeof *d->added);
    k += d->added_count;
    /* weight indices of the base belong to the base's table */
    for (size_t i = 0; !rc && i < base->weight_count; i++) {
        sy__slot *ws = sy__snap_slot_mut(s, base->weight_slots[i]);
        if (!ws)
            rc = SY_ENOMEM;
        else
            ws->weight = NONE;
    }
    if (!rc)
        rc = build_weights(s, wc, k);
    sy__free(d->a, wc);
    return rc;
}

/* Phase 3: the index, from scratch (bulk: weight candidates found by the
 * change loop for a first document, or by a pass over every route) or
 * over the base. */
static int derive_index(derive *d) {
    if (!d->bulk)
        return derive_index_over_base(d);
    int rc = compact_and_index(d->s, &d->fresh_ws, &d->fresh_wn,
                               d->fresh_ws != NULL);
    if (!rc)
        rc = build_weights(d->s, d->fresh_ws, d->fresh_wn);
    sy__free(d->a, d->fresh_ws);
    d->fresh_ws = NULL;
    return rc;
}

/* The bytes the snapshot itself holds (not its routes). */
static size_t derive_bytes(const sy_snapshot *s, bool bulk) {
    return sizeof *s + s->slot_chunk_cap * (sizeof(void *) + 4) +
           s->rank_nchunks * (sizeof(void *) + 4 + sizeof(size_t)) +
           ((size_t)s->id_cap >> SY_CHUNK_BITS) * (sizeof(void *) + 4) +
           (s->id_old_chunks ? (size_t)s->id_old_cap >> SY_CHUNK_BITS : 0) *
               (sizeof(void *) + 4) +
           s->chunk_bytes + sy__overlay_bytes(s->ov[0]) +
           sy__overlay_bytes(s->ov[1]) +
           (s->dead_bits ? SY_DEAD_WORDS * sizeof(uint64_t) : 0) +
           (bulk && s->base ? sy__index_bytes(s->base) : 0);
}

int sy__snapshot_derive(const sy__derive_input *in, sy__derive_result *out,
                        sy_error *err) {
    const sy__alloc *a = in->alloc;
    *out = (sy__derive_result){NULL, NULL, 0};
    derive d = {.a = a,
                .base = in->base,
                .changes = in->changes,
                .n = in->change_count};
    int rc = derive_start(&d, in->config, in->generation);
    if (!rc)
        rc = derive_changes(&d);
    if (!rc)
        rc = derive_index(&d);
    sy__free(a, d.added);
    sy__free(a, d.order);
    sy__free(a, d.fresh_ws);
    if (rc) {
        sy__free(a, d.removed);
        if (d.s) {
            snapshot_free_parts(d.s);
            sy__pub_obj_free(a, &d.s->pub);
        }
        return sy__error_set(err, rc, "", "%s", sy_strerror(rc));
    }
    match_prep_init(d.s);
    d.s->bytes = derive_bytes(d.s, d.bulk);
    d.s->pub.bytes = d.s->bytes;
    *out = (sy__derive_result){d.s, d.removed, d.nremoved};
    return SY_OK;
}

const struct sy__service *sy__snapshot_service(const sy_snapshot *s,
                                               const char *name, size_t len) {
    size_t lo = 0, hi = s->service_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const char *nm = sy__service_name(s->services[mid]);
        size_t nl = strlen(nm);
        int c = memcmp(nm, name, nl < len ? nl : len);
        if (c == 0)
            c = nl < len ? -1 : nl > len;
        if (c == 0)
            return s->services[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- public read-only API ---- */

uint64_t sy_snapshot_generation(const sy_snapshot *h) {
    return sy__snapshot_from_handle(h)->generation;
}

/* The route sequence's fingerprint (kept per change, snapshot_table.c),
 * the route count, then services by name: equal content gives equal
 * fingerprints whatever history led to it. A service whose list is empty
 * adds nothing: a router that saw a service's instances come and go and
 * one that never saw the service hold the same instances (none), and a
 * fleet fed by one store must agree. The services part is computed
 * once per snapshot, on first request (O(services + instances)); two
 * readers racing compute the same value. */
uint64_t sy_snapshot_fingerprint(const sy_snapshot *h) {
    sy_snapshot *s = (sy_snapshot *)sy__snapshot_from_handle(h);
    if (atomic_load_explicit(&s->fingerprint_done, memory_order_acquire))
        return atomic_load_explicit(&s->fingerprint, memory_order_relaxed);
    uint64_t seq = s->fp_seq;
    bool whole = true;
    if (s->fp_lazy) {
        seq = sy__snap_fp_walk(s, &whole);
        if (!whole) /* out of memory: asked again, walked again */
            return sy__hash_mix(seq, s->route_count);
        atomic_store_explicit(&s->fp_walked, seq, memory_order_relaxed);
    }
    uint64_t fp = sy__hash_mix(seq, s->route_count);
    for (size_t i = 0; i < s->service_count; i++)
        if (sy__service_count(s->services[i]))
            fp = sy__hash_mix(fp, sy__service_fingerprint(s->services[i]));
    atomic_store_explicit(&s->fingerprint, fp, memory_order_relaxed);
    atomic_store_explicit(&s->fingerprint_done, true, memory_order_release);
    return fp;
}

size_t sy_snapshot_route_count(const sy_snapshot *h) {
    return sy__snapshot_from_handle(h)->route_count;
}

const sy_route *sy_snapshot_route_at(const sy_snapshot *h, size_t i) {
    const sy_snapshot *s = sy__snapshot_from_handle(h);
    return i < s->route_count
               ? sy__snapshot_slot(s, sy__snapshot_rank_at(s, i))->route
               : NULL;
}

const sy_route *sy_snapshot_find_route(const sy_snapshot *h, const char *id,
                                       const char **source) {
    const sy_snapshot *s = sy__snapshot_from_handle(h);
    if (!id)
        return NULL;
    uint32_t slot = sy__snapshot_find_slot(s, id);
    if (slot == NONE)
        return NULL;
    if (source)
        *source = sy__snapshot_slot(s, slot)->source < s->source_count
                      ? s->sources[sy__snapshot_slot(s, slot)->source]
                      : NULL;
    return sy__snapshot_slot(s, slot)->route;
}

uint32_t sy_snapshot_route_key_limit(const sy_snapshot *h) {
    return h ? sy__snapshot_from_handle(h)->key_limit : 0;
}
