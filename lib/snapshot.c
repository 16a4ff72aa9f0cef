/*
 * snapshot.c - deriving immutable snapshots from the previous one plus a
 * list of route changes (snapshot.h), and the read-only snapshot API.
 *
 *   base snapshot                      derived snapshot
 *   slots: [r0][r1][r2]...[rN]   -->   slots: [r0][--][r2]...[rN][r1']
 *   base index (shared, refcounted) ------^         overlay index: {N+1}
 *
 * An updated route tombstones its old slot and takes a new one with the
 * same rank key; the base index is shared and its dead slots are skipped,
 * the overlay indexes only new slots. When the overlay grows past
 * min(2048, max(64, live/16)) slots, or keys of kept routes change, the
 * snapshot compacts its slots and builds a fresh base index.
 *
 * Slots, rank order and id table are chunked and shared with the base
 * (snapshot.h): deriving copies the chunk pointer vectors and then copies
 * only the chunks a change writes to (copy on write), so one change costs
 * O(n / 1024) pointer copies plus a few 1024-entry chunks, whatever n is.
 */
#include "snapshot.h"

#include "filter.h"
#include "service.h"

#include <stdlib.h>

#define NONE SY_NONE /* short local name */

/* ---- shared chunks (snapshot.h) ---- */

/* Every chunk type starts with its _Atomic uint32_t reference count. */
typedef struct chunk_head {
    _Atomic uint32_t refs;
} chunk_head;

static void chunk_ref(void *c) {
    atomic_fetch_add_explicit(&((chunk_head *)c)->refs, 1,
                              memory_order_relaxed);
}

static void chunk_unref(const sy_alloc *a, void *c) {
    if (c && atomic_fetch_sub_explicit(&((chunk_head *)c)->refs, 1,
                                       memory_order_acq_rel) == 1)
        sy_free(a, c);
}

/* A new chunk of `size` bytes, refs 1, zeroed past the header. */
static void *chunk_new(sy_snapshot *s, size_t size) {
    chunk_head *c = sy_calloc(s->alloc, 1, size);
    if (!c)
        return NULL;
    atomic_init(&c->refs, 1);
    s->chunk_bytes += size;
    return c;
}

/* `c` itself when this snapshot is its only holder, else a private copy
 * (the shared one loses this snapshot's reference). NULL: out of memory. */
static void *chunk_own(sy_snapshot *s, void *c, size_t size) {
    if (atomic_load_explicit(&((chunk_head *)c)->refs, memory_order_acquire) ==
        1)
        return c;
    chunk_head *n = sy_malloc(s->alloc, size);
    if (!n)
        return NULL;
    memcpy(n, c, size);
    atomic_init(&n->refs, 1);
    chunk_unref(s->alloc, c);
    s->chunk_bytes += size;
    return n;
}

static void free_chunks(const sy_alloc *a, void **v, size_t n) {
    for (size_t i = 0; v && i < n; i++)
        chunk_unref(a, v[i]);
    sy_free(a, v);
}

/* Slot i, writable (its chunk made private or created). NULL: no memory. */
static sy_slot *slot_mut(sy_snapshot *s, uint32_t i) {
    uint32_t k = i >> SY_CHUNK_BITS;
    sy_slot_chunk *c = s->slot_chunks[k];
    c = c ? chunk_own(s, c, sizeof *c) : chunk_new(s, sizeof *c);
    if (!c)
        return NULL;
    s->slot_chunks[k] = c;
    return &c->e[i & (SY_CHUNK - 1)];
}

static uint64_t key_of(const sy_snapshot *s, uint32_t slot) {
    return sy_snapshot_slot(s, slot)->key;
}

static void snapshot_free_parts(sy_snapshot *s) {
    const sy_alloc *a = s->alloc;
    free_chunks(a, (void **)s->slot_chunks, s->slot_chunk_cap);
    free_chunks(a, (void **)s->rank_chunks, s->rank_nchunks);
    sy_free(a, s->rank_start);
    free_chunks(a, (void **)s->id_chunks,
                s->id_chunks ? (s->id_mask >> SY_CHUNK_BITS) + 1 : 0);
    sy_index_unref(s->base);
    sy_index_unref(s->overlay);
    sy_free(a, s->overlay_slots);
    sy_free(a, s->weights);
    sy_free(a, s->weight_slots);
    if (s->defaults)
        sy_route_unref(s->defaults);
    for (size_t i = 0; s->sources && i < s->source_count; i++)
        sy_free(a, s->sources[i]);
    sy_free(a, s->sources);
    for (size_t i = 0; s->services && i < s->service_count; i++)
        sy_service_unref(s->services[i]);
    sy_free(a, s->services);
}

void sy_snapshot_destroy(sy_snapshot *s) {
    if (!s)
        return;
    snapshot_free_parts(s);
    sy_pub_obj_free(s->alloc, &s->pub);
}

/* ---- id table (open addressing, linear probing, chunked) ---- */

static uint64_t id_hash(const char *id) {
    return sy_hash64(id, strlen(id), 0x1d);
}

static const sy_id_entry *id_at(const sy_snapshot *s, uint32_t i) {
    return &s->id_chunks[i >> SY_CHUNK_BITS]->e[i & (SY_CHUNK - 1)];
}

/* Entry i, writable. NULL: out of memory. */
static sy_id_entry *id_mut(sy_snapshot *s, uint32_t i) {
    uint32_t k = i >> SY_CHUNK_BITS;
    sy_id_chunk *c = chunk_own(s, s->id_chunks[k], sizeof *c);
    if (!c)
        return NULL;
    s->id_chunks[k] = c;
    return &c->e[i & (SY_CHUNK - 1)];
}

static uint32_t id_find(const sy_snapshot *s, const char *id, uint64_t h,
                        uint32_t *pos) {
    for (uint32_t i = (uint32_t)h & s->id_mask;; i = (i + 1) & s->id_mask) {
        const sy_id_entry *e = id_at(s, i);
        if (e->slot == NONE) {
            *pos = i;
            return NONE;
        }
        if (e->hash == h &&
            strcmp(sy_snapshot_slot(s, e->slot)->route->id, id) == 0) {
            *pos = i;
            return e->slot;
        }
    }
}

static bool id_set(sy_snapshot *s, uint32_t pos, sy_id_entry v) {
    sy_id_entry *e = id_mut(s, pos);
    if (e)
        *e = v;
    return e != NULL;
}

/* Remove entry at pos with backward-shift deletion. */
static bool id_remove_at(sy_snapshot *s, uint32_t pos) {
    uint32_t mask = s->id_mask, i = pos;
    for (;;) {
        if (!id_set(s, i, (sy_id_entry){0, NONE}))
            return false;
        uint32_t j = i;
        for (;;) {
            j = (j + 1) & mask;
            if (id_at(s, j)->slot == NONE)
                return true;
            uint32_t home = (uint32_t)id_at(s, j)->hash & mask;
            /* can entry j move to hole i? (home not in (i, j]) */
            bool between =
                i <= j ? (home > i && home <= j) : (home > i || home <= j);
            if (!between)
                break;
        }
        if (!id_set(s, i, *id_at(s, j)))
            return false;
        i = j;
    }
}

/* Capacity for `live` ids: a power of two, at least one chunk. */
static uint32_t id_cap_for(size_t live) {
    uint32_t cap = SY_CHUNK;
    while (cap < live + live / 3 + 16)
        cap *= 2;
    return cap;
}

/* A fresh, empty table of `cap` entries. */
static bool id_table_alloc(sy_snapshot *s, uint32_t cap) {
    uint32_t nk = cap >> SY_CHUNK_BITS;
    s->id_chunks = sy_calloc(s->alloc, nk, sizeof *s->id_chunks);
    if (!s->id_chunks)
        return false;
    s->id_mask = cap - 1;
    for (uint32_t k = 0; k < nk; k++) {
        sy_id_chunk *c = chunk_new(s, sizeof *c);
        if (!c)
            return false;
        for (uint32_t i = 0; i < SY_CHUNK; i++)
            c->e[i].slot = NONE;
        s->id_chunks[k] = c;
    }
    return true;
}

/* The base's table shared chunk by chunk. */
static bool id_table_share(sy_snapshot *s, const sy_snapshot *base) {
    uint32_t nk = (base->id_mask >> SY_CHUNK_BITS) + 1;
    s->id_chunks = sy_malloc(s->alloc, nk * sizeof *s->id_chunks);
    if (!s->id_chunks)
        return false;
    s->id_mask = base->id_mask;
    for (uint32_t k = 0; k < nk; k++) {
        s->id_chunks[k] = base->id_chunks[k];
        chunk_ref(s->id_chunks[k]);
    }
    return true;
}

uint32_t sy_snapshot_find_slot(const sy_snapshot *s, const char *id) {
    uint32_t pos;
    return id_find(s, id, id_hash(id), &pos);
}

/* Put every live slot's id in the (fresh, empty) id table. */
static void id_fill(sy_snapshot *s) {
    for (uint32_t i = 0; i < s->slot_count; i++) {
        const sy_slot *sl = sy_snapshot_slot(s, i);
        if (!sl->route)
            continue;
        uint32_t pos;
        uint64_t h = id_hash(sl->route->id);
        id_find(s, sl->route->id, h, &pos);
        /* a fresh table's chunks are private: no copy, cannot fail */
        *id_mut(s, pos) = (sy_id_entry){h, i};
    }
}

/* ---- rank order (chunked runs of slot ids) ---- */

uint32_t sy_snapshot_rank_at(const sy_snapshot *s, size_t i) {
    size_t lo = 0, hi = s->rank_nchunks;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (s->rank_start[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    return s->rank_chunks[lo]->e[i - s->rank_start[lo]];
}

/* Recount rank_start and route_count after changes. */
static void rank_recount(sy_snapshot *s) {
    size_t r = 0;
    for (size_t k = 0; k < s->rank_nchunks; k++) {
        s->rank_start[k] = r;
        r += s->rank_chunks[k]->n;
    }
    s->route_count = r;
}

/* Index of the chunk where `key` belongs: the last whose first key is
 * below it (or `<=` with after_equal), else 0. */
static size_t rank_chunk_for(const sy_snapshot *s, uint64_t key,
                             bool after_equal) {
    size_t lo = 0, hi = s->rank_nchunks;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        uint64_t k0 = key_of(s, s->rank_chunks[mid]->e[0]);
        if (k0 < key || (after_equal && k0 == key))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? lo - 1 : 0;
}

/* Insert `slot` after every entry with a key <= its own. */
static bool rank_insert(sy_snapshot *s, uint32_t slot) {
    uint64_t key = key_of(s, slot);
    if (!s->rank_nchunks) {
        sy_rank_chunk *c = chunk_new(s, sizeof *c);
        if (!c)
            return false;
        s->rank_chunks[s->rank_nchunks++] = c;
    }
    size_t k = rank_chunk_for(s, key, true);
    sy_rank_chunk *c = chunk_own(s, s->rank_chunks[k], sizeof *c);
    if (!c)
        return false;
    s->rank_chunks[k] = c;
    if (c->n == SY_RANK_CHUNK_MAX) { /* split: the upper half moves on */
        sy_rank_chunk *n = chunk_new(s, sizeof *n);
        if (!n)
            return false;
        n->n = c->n / 2;
        c->n -= n->n;
        memcpy(n->e, c->e + c->n, n->n * sizeof *n->e);
        memmove(s->rank_chunks + k + 2, s->rank_chunks + k + 1,
                (s->rank_nchunks - k - 1) * sizeof *s->rank_chunks);
        s->rank_chunks[k + 1] = n;
        s->rank_nchunks++;
        if (key_of(s, n->e[0]) <= key)
            c = n;
    }
    uint32_t lo = 0, hi = c->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (key_of(s, c->e[mid]) <= key)
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(c->e + lo + 1, c->e + lo, (c->n - lo) * sizeof *c->e);
    c->e[lo] = slot;
    c->n++;
    return true;
}

/* Remove `slot` (present) from the rank order. */
static bool rank_remove(sy_snapshot *s, uint32_t slot) {
    uint64_t key = key_of(s, slot);
    for (size_t k = rank_chunk_for(s, key, false); k < s->rank_nchunks; k++) {
        const sy_rank_chunk *r = s->rank_chunks[k];
        if (key_of(s, r->e[0]) > key)
            break; /* past every entry with this key */
        for (uint32_t i = 0; i < r->n; i++) {
            if (r->e[i] != slot)
                continue;
            sy_rank_chunk *c = chunk_own(s, s->rank_chunks[k], sizeof *c);
            if (!c)
                return false;
            memmove(c->e + i, c->e + i + 1, (c->n - i - 1) * sizeof *c->e);
            if (--c->n == 0) {
                chunk_unref(s->alloc, c);
                memmove(s->rank_chunks + k, s->rank_chunks + k + 1,
                        (s->rank_nchunks - k - 1) * sizeof *s->rank_chunks);
                s->rank_nchunks--;
            } else {
                s->rank_chunks[k] = c;
            }
            return true;
        }
    }
    return true; /* not ranked (cannot happen for a live slot) */
}

/* ---- derive ---- */

typedef struct keyed_slot {
    uint64_t key;
    uint32_t slot;
} keyed_slot;

static int cmp_keyed(const void *x, const void *y) {
    const keyed_slot *a = x, *b = y;
    return a->key < b->key ? -1 : a->key > b->key;
}

/* Sort slot ids by rank key (ids of one change list: usually few). */
static bool sort_by_key(const sy_snapshot *s, uint32_t *ids, size_t n) {
    if (n < 2)
        return true;
    keyed_slot *tmp = sy_malloc(s->alloc, n * sizeof *tmp);
    if (!tmp)
        return false;
    for (size_t i = 0; i < n; i++)
        tmp[i] = (keyed_slot){key_of(s, ids[i]), ids[i]};
    qsort(tmp, n, sizeof *tmp, cmp_keyed);
    for (size_t i = 0; i < n; i++)
        ids[i] = tmp[i].slot;
    sy_free(s->alloc, tmp);
    return true;
}

static int index_over(sy_snapshot *s, const uint32_t *slots, size_t n,
                      sy_index **out) {
    sy_index_route *in = sy_malloc(s->alloc, (n ? n : 1) * sizeof *in);
    if (!in)
        return SY_ENOMEM;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const sy_slot *sl = sy_snapshot_slot(s, slots[i]);
        if (sl->route)
            in[m++] = (sy_index_route){slots[i], sl->key, sl->route};
    }
    int rc = sy_index_build(s->alloc, in, m, out);
    sy_free(s->alloc, in);
    return rc;
}

static bool has_weight(const struct sy_route *r) {
    for (size_t p = 0; p < r->predicate_count; p++)
        if (r->cpreds[p] && sy_pred_get_kind(r->cpreds[p]) == SY_PK_WEIGHT)
            return true;
    return false;
}

static const sy_pred *weight_pred(const struct sy_route *r) {
    for (size_t p = 0; p < r->predicate_count; p++)
        if (r->cpreds[p] && sy_pred_get_kind(r->cpreds[p]) == SY_PK_WEIGHT)
            return r->cpreds[p];
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
    const sy_alloc *a = s->alloc;
    keyed_slot *ws = sy_malloc(a, (n ? n : 1) * sizeof *ws);
    if (!ws)
        return SY_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const sy_slot *sl = sy_snapshot_slot(s, cand[i]);
        if (sl->route && !sl->route->disabled && has_weight(sl->route))
            ws[k++] = (keyed_slot){sl->key, cand[i]};
    }
    if (!k) {
        sy_free(a, ws);
        return SY_OK;
    }
    qsort(ws, k, sizeof *ws, cmp_def_order);
    s->weight_slots = sy_malloc(a, k * sizeof *s->weight_slots);
    s->weights = sy_calloc(a, k, sizeof *s->weights);
    const char **names = sy_malloc(a, k * sizeof *names);
    uint32_t *wv = sy_malloc(a, k * sizeof *wv);
    if (!s->weight_slots || !s->weights || !names || !wv) {
        sy_free(a, ws);
        sy_free(a, names);
        sy_free(a, wv);
        return SY_ENOMEM;
    }
    for (size_t i = 0; i < k; i++) {
        const sy_pred *pr = weight_pred(sy_snapshot_slot(s, ws[i].slot)->route);
        s->weight_slots[i] = ws[i].slot;
        names[i] = sy_pred_weight_group(pr);
        wv[i] = sy_pred_weight_value(pr);
        sy_slot *sl = slot_mut(s, ws[i].slot);
        if (!sl) {
            sy_free(a, ws);
            sy_free(a, names);
            sy_free(a, wv);
            return SY_ENOMEM;
        }
        sl->weight = (uint32_t)i;
    }
    s->weight_count = k;
    sy_free(a, ws);
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
    sy_free(a, names);
    sy_free(a, wv);
    return SY_OK;
}

static void scratch_needs(sy_snapshot *s, const struct sy_route *r) {
    uint32_t groups = 0, vars = 0;
    for (size_t i = 0; i < r->predicate_count; i++)
        if (r->cpreds[i]) {
            sy_pred_kind k = sy_pred_get_kind(r->cpreds[i]);
            s->needs_host |= k == SY_PK_HOST;
            s->needs_time |= k == SY_PK_TIME;
            uint32_t g = sy_pred_max_groups(r->cpreds[i]);
            if (g > groups)
                groups = g;
            vars += sy_pred_var_count(r->cpreds[i]);
        }
    for (size_t i = 0; i < r->filter_count; i++)
        if (r->cfilters[i]) {
            uint32_t g = sy_filter_max_groups(r->cfilters[i]);
            if (g > groups)
                groups = g;
        }
    if (groups > s->max_groups)
        s->max_groups = groups;
    if (vars > s->max_vars)
        s->max_vars = vars;
}

static int copy_config(sy_snapshot *s, const sy_snapshot *base,
                       const sy_snapshot_config *cfg) {
    const sy_alloc *a = s->alloc;
    s->strip_host_port = cfg->strip_host_port;
    s->path_norm = cfg->path_norm;
    s->budget = cfg->budget;
    s->clock_ms = cfg->clock_ms;
    s->clock_data = cfg->clock_data;
    s->random = cfg->random;
    s->key_limit = cfg->key_limit;
    s->defaults = cfg->defaults ? sy_route_ref(cfg->defaults) : NULL;
    if (s->defaults)
        scratch_needs(s, s->defaults);
    s->source_count = cfg->source_count;
    s->sources = sy_calloc(a, cfg->source_count + 1, sizeof *s->sources);
    if (!s->sources)
        return SY_ENOMEM;
    for (size_t i = 0; i < cfg->source_count; i++)
        if (!(s->sources[i] = sy_strdup(a, cfg->sources[i])))
            return SY_ENOMEM;
    struct sy_service *const *svc =
        cfg->replace_services ? cfg->services : (base ? base->services : NULL);
    size_t nsvc = cfg->replace_services ? cfg->service_count
                                        : (base ? base->service_count : 0);
    s->services = sy_calloc(a, nsvc + 1, sizeof *s->services);
    if (!s->services)
        return SY_ENOMEM;
    for (size_t i = 0; i < nsvc; i++)
        s->services[s->service_count++] = sy_service_ref(svc[i]);
    return SY_OK;
}

/* Compact live slots into rank order (slot i = rank i) in fresh chunks,
 * rebuild the rank chunks, the id table and the base index over them. */
static int compact_and_index(sy_snapshot *s) {
    const sy_alloc *a = s->alloc;
    size_t n = s->route_count;
    size_t nsk = (n + SY_CHUNK - 1) / SY_CHUNK;
    /* fresh rank chunks, half full so later inserts rarely split */
    size_t half = SY_RANK_CHUNK_MAX / 2, nrk = (n + half - 1) / half;
    sy_slot_chunk **sc = sy_calloc(a, nsk ? nsk : 1, sizeof *sc);
    sy_rank_chunk **rc = sy_calloc(a, nrk + 1, sizeof *rc);
    size_t *rs = sy_calloc(a, nrk + 1, sizeof *rs);
    bool ok = sc && rc && rs;
    for (size_t k = 0; ok && k < nsk; k++)
        ok = (sc[k] = chunk_new(s, sizeof **sc)) != NULL;
    for (size_t k = 0; ok && k < nrk; k++)
        ok = (rc[k] = chunk_new(s, sizeof **rc)) != NULL;
    if (ok) {
        size_t i = 0;
        for (size_t k = 0; k < s->rank_nchunks; k++)
            for (uint32_t j = 0; j < s->rank_chunks[k]->n; j++, i++) {
                sy_slot *d = &sc[i >> SY_CHUNK_BITS]->e[i & (SY_CHUNK - 1)];
                *d = *sy_snapshot_slot(s, s->rank_chunks[k]->e[j]);
                d->weight = NONE;
                sy_rank_chunk *r = rc[i / half];
                r->e[r->n++] = (uint32_t)i;
            }
    }
    if (!ok) {
        free_chunks(a, (void **)sc, nsk);
        free_chunks(a, (void **)rc, nrk);
        sy_free(a, rs);
        return SY_ENOMEM;
    }
    free_chunks(a, (void **)s->slot_chunks, s->slot_chunk_cap);
    free_chunks(a, (void **)s->rank_chunks, s->rank_nchunks);
    sy_free(a, s->rank_start);
    s->slot_chunks = sc;
    s->slot_chunk_cap = nsk;
    s->slot_count = (uint32_t)n;
    s->rank_chunks = rc;
    s->rank_start = rs;
    s->rank_nchunks = nrk;
    rank_recount(s);
    free_chunks(a, (void **)s->id_chunks, (s->id_mask >> SY_CHUNK_BITS) + 1);
    s->id_chunks = NULL;
    if (!id_table_alloc(s, id_cap_for(n)))
        return SY_ENOMEM;
    id_fill(s);
    uint32_t *all = sy_malloc(a, (n ? n : 1) * sizeof *all);
    if (!all)
        return SY_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        all[i] = (uint32_t)i;
        scratch_needs(s, sy_snapshot_slot(s, (uint32_t)i)->route);
    }
    int r = index_over(s, all, n, &s->base);
    sy_free(a, all);
    return r;
}

/* Share the base's chunk vectors (a reference per chunk) with room for
 * `n` more slots and `n` more rank chunks; the id table is shared when
 * its capacity suits live + n ids, else rebuilt. */
static int share_base(sy_snapshot *s, const sy_snapshot *base, size_t n,
                      size_t live) {
    const sy_alloc *a = s->alloc;
    uint32_t base_slots = base ? base->slot_count : 0;
    size_t cap = ((size_t)base_slots + n + SY_CHUNK - 1) / SY_CHUNK;
    size_t base_chunks = ((size_t)base_slots + SY_CHUNK - 1) / SY_CHUNK;
    s->slot_chunks = sy_calloc(a, cap ? cap : 1, sizeof *s->slot_chunks);
    if (!s->slot_chunks)
        return SY_ENOMEM;
    s->slot_chunk_cap = cap;
    for (size_t k = 0; k < base_chunks; k++) {
        s->slot_chunks[k] = base->slot_chunks[k];
        chunk_ref(s->slot_chunks[k]);
    }
    s->slot_count = base_slots;
    size_t rn = base ? base->rank_nchunks : 0;
    s->rank_chunks = sy_calloc(a, rn + n + 1, sizeof *s->rank_chunks);
    s->rank_start = sy_calloc(a, rn + n + 1, sizeof *s->rank_start);
    if (!s->rank_chunks || !s->rank_start)
        return SY_ENOMEM;
    for (size_t k = 0; k < rn; k++) {
        s->rank_chunks[k] = base->rank_chunks[k];
        chunk_ref(s->rank_chunks[k]);
    }
    s->rank_nchunks = rn;
    uint32_t want = id_cap_for(live + n);
    uint32_t have = base ? base->id_mask + 1 : 0;
    if (base && have >= want && have / 4 <= want)
        return id_table_share(s, base) ? SY_OK : SY_ENOMEM;
    if (!id_table_alloc(s, want))
        return SY_ENOMEM;
    id_fill(s);
    return SY_OK;
}

int sy_snapshot_derive(const sy_alloc *a, const sy_snapshot *base,
                       const sy_snapshot_config *cfg,
                       const sy_route_change *changes, size_t n,
                       uint64_t generation, sy_snapshot **out,
                       struct sy_route ***removed_out, size_t *removed_count,
                       sy_error *err) {
    *out = NULL;
    *removed_out = NULL;
    *removed_count = 0;
    uint32_t *added = NULL;
    struct sy_route **removed = NULL;
    size_t added_count = 0, nremoved = 0;
    sy_snapshot *s = sy_pub_obj_alloc(a, sizeof *s);
    if (!s)
        return sy_error_set(err, SY_ENOMEM, "", "out of memory");
    s->alloc = a;
    s->generation = generation;
    int rc = copy_config(s, base, cfg);
    if (rc)
        goto fail;

    /* slots: the base's (routes shared, not counted) + one per set change */
    uint32_t base_slots = base ? base->slot_count : 0;
    size_t live = base ? base->route_count : 0;
    added = sy_malloc(a, (n ? n : 1) * sizeof *added);
    removed = sy_malloc(a, (n ? n : 1) * sizeof *removed);
    if (!added || !removed || (rc = share_base(s, base, n, live))) {
        rc = SY_ENOMEM;
        goto fail;
    }
    rc = SY_ENOMEM; /* what a failed chunk copy below means */
    for (size_t c = 0; c < n; c++) {
        const sy_route_change *ch = &changes[c];
        uint64_t h = id_hash(ch->id);
        uint32_t pos;
        uint32_t old = id_find(s, ch->id, h, &pos);
        if (old != NONE && old >= base_slots) {
            /* the caller takes one reference per set change: an id may
             * appear once per change list */
            rc = SY_EINVAL;
            goto fail;
        }
        if (old != NONE) {
            sy_slot *os = slot_mut(s, old);
            if (!os || !rank_remove(s, old) || !id_remove_at(s, pos))
                goto fail;
            removed[nremoved++] = os->route; /* hand it back */
            os->route = NULL;
            live--;
            id_find(s, ch->id, h, &pos);
        }
        if (!ch->route)
            continue;
        uint32_t slot = s->slot_count;
        sy_slot *ns = slot_mut(s, slot);
        if (!ns)
            goto fail;
        *ns = (sy_slot){ch->route, ch->key, ch->source, NONE};
        s->slot_count++;
        if (!id_set(s, pos, (sy_id_entry){h, slot}) || !rank_insert(s, slot))
            goto fail;
        added[added_count++] = slot;
        live++;
    }
    rank_recount(s);
    if (!sort_by_key(s, added, added_count))
        goto fail;

    /* index: share the base and index the changed slots in an overlay, or
     * compact and rebuild when the overlay would grow too large */
    size_t prev_overlay = base ? base->overlay_count : 0;
    size_t limit = live / 16 > 64 ? live / 16 : 64;
    if (limit > 2048)
        limit = 2048;
    bool rebuild = !base || !base->base || prev_overlay + added_count > limit;
    if (rebuild) {
        uint32_t *all = NULL;
        rc = compact_and_index(s);
        if (!rc && !(all = sy_malloc(a, (s->route_count ? s->route_count : 1) *
                                            sizeof *all)))
            rc = SY_ENOMEM;
        for (size_t i = 0; !rc && i < s->route_count; i++)
            all[i] = (uint32_t)i;
        if (!rc)
            rc = build_weights(s, all, s->route_count);
        sy_free(a, all);
    } else {
        s->base = sy_index_ref(base->base);
        if (base->max_groups > s->max_groups)
            s->max_groups = base->max_groups;
        if (base->max_vars > s->max_vars)
            s->max_vars = base->max_vars;
        s->needs_host |= base->needs_host;
        s->needs_time |= base->needs_time;
        s->overlay_slots =
            sy_malloc(a, (prev_overlay + added_count + 1) * sizeof(uint32_t));
        /* weight candidates: the base's weight routes and the new slots */
        size_t wn = (base ? base->weight_count : 0) + added_count;
        uint32_t *wc = sy_malloc(a, (wn ? wn : 1) * sizeof *wc);
        if (!s->overlay_slots || !wc) {
            sy_free(a, wc);
            rc = SY_ENOMEM;
            goto fail;
        }
        for (size_t i = 0; i < prev_overlay; i++)
            if (sy_snapshot_slot(s, base->overlay_slots[i])->route)
                s->overlay_slots[s->overlay_count++] = base->overlay_slots[i];
        memcpy(s->overlay_slots + s->overlay_count, added,
               added_count * sizeof *added);
        s->overlay_count += added_count;
        for (size_t i = 0; i < added_count; i++)
            scratch_needs(s, sy_snapshot_slot(s, added[i])->route);
        rc = s->overlay_count ? index_over(s, s->overlay_slots,
                                           s->overlay_count, &s->overlay)
                              : SY_OK;
        size_t k = 0;
        for (size_t i = 0; base && i < base->weight_count; i++)
            wc[k++] = base->weight_slots[i];
        memcpy(wc + k, added, added_count * sizeof *added);
        k += added_count;
        /* weight indices of the base belong to the base's table */
        for (size_t i = 0; !rc && base && i < base->weight_count; i++) {
            sy_slot *ws = slot_mut(s, base->weight_slots[i]);
            if (!ws)
                rc = SY_ENOMEM;
            else
                ws->weight = NONE;
        }
        if (!rc)
            rc = build_weights(s, wc, k);
        sy_free(a, wc);
    }
    if (rc)
        goto fail;
    s->bytes = sizeof *s + s->slot_chunk_cap * sizeof(void *) +
               s->rank_nchunks * (sizeof(void *) + sizeof(size_t)) +
               ((size_t)(s->id_mask >> SY_CHUNK_BITS) + 1) * sizeof(void *) +
               s->chunk_bytes + (s->overlay ? sy_index_bytes(s->overlay) : 0) +
               (rebuild && s->base ? sy_index_bytes(s->base) : 0);
    s->pub.bytes = s->bytes;
    sy_free(a, added);
    *out = s;
    *removed_out = removed;
    *removed_count = nremoved;
    return SY_OK;

fail:
    sy_free(a, added);
    sy_free(a, removed);
    snapshot_free_parts(s);
    sy_pub_obj_free(a, &s->pub);
    return sy_error_set(err, rc ? rc : SY_ENOMEM, "", "%s",
                        sy_strerror(rc ? rc : SY_ENOMEM));
}

const struct sy_service *sy_snapshot_service(const sy_snapshot *s,
                                             const char *name, size_t len) {
    size_t lo = 0, hi = s->service_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const char *nm = sy_service_name(s->services[mid]);
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

const sy_snapshot *sy_snapshot_from_handle(const sy_snapshot *handle) {
    return (const sy_snapshot *)sy_pub_ref_obj((sy_pub_ref)handle);
}

uint64_t sy_snapshot_generation(const sy_snapshot *h) {
    return sy_snapshot_from_handle(h)->generation;
}

/* Routes in rank order, then services by name: equal content gives equal
 * fingerprints whatever history led to it. Computed once per snapshot; two
 * readers racing compute the same value. */
uint64_t sy_snapshot_fingerprint(const sy_snapshot *h) {
    sy_snapshot *s = (sy_snapshot *)sy_snapshot_from_handle(h);
    if (atomic_load_explicit(&s->fingerprint_done, memory_order_acquire))
        return atomic_load_explicit(&s->fingerprint, memory_order_relaxed);
    uint64_t fp = 0x5170;
    for (size_t k = 0; k < s->rank_nchunks; k++)
        for (uint32_t i = 0; i < s->rank_chunks[k]->n; i++)
            fp = sy_hash_mix(fp, sy_snapshot_slot(s, s->rank_chunks[k]->e[i])
                                     ->route->fingerprint);
    fp = sy_hash_mix(fp, s->route_count);
    for (size_t i = 0; i < s->service_count; i++)
        fp = sy_hash_mix(fp, sy_service_fingerprint(s->services[i]));
    atomic_store_explicit(&s->fingerprint, fp, memory_order_relaxed);
    atomic_store_explicit(&s->fingerprint_done, true, memory_order_release);
    return fp;
}

size_t sy_snapshot_route_count(const sy_snapshot *h) {
    return sy_snapshot_from_handle(h)->route_count;
}

const sy_route *sy_snapshot_route_at(const sy_snapshot *h, size_t i) {
    const sy_snapshot *s = sy_snapshot_from_handle(h);
    return i < s->route_count
               ? sy_snapshot_slot(s, sy_snapshot_rank_at(s, i))->route
               : NULL;
}

const sy_route *sy_snapshot_find_route(const sy_snapshot *h, const char *id,
                                       const char **source) {
    const sy_snapshot *s = sy_snapshot_from_handle(h);
    if (!id)
        return NULL;
    uint32_t slot = sy_snapshot_find_slot(s, id);
    if (slot == NONE)
        return NULL;
    if (source)
        *source = sy_snapshot_slot(s, slot)->source < s->source_count
                      ? s->sources[sy_snapshot_slot(s, slot)->source]
                      : NULL;
    return sy_snapshot_slot(s, slot)->route;
}

uint32_t sy_snapshot_route_key_limit(const sy_snapshot *h) {
    return h ? sy_snapshot_from_handle(h)->key_limit : 0;
}
