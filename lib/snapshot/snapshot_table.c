/*
 * snapshot_table.c - the chunked, copy-on-write tables of a snapshot
 * (snapshot.h): slots, the rank order and the id table, shared chunk by
 * chunk between a snapshot and the ones derived from it. An id table that
 * outgrows its capacity moves into a larger one a stretch per publish
 * (sy__snap_id_move), never in one O(n) refill.
 *
 * The rank order also keeps the snapshot's route-sequence fingerprint up
 * to date: the sum (mod 2^64) of pair(a, b) over every two neighbours of
 * the sequence START, r1, ..., rn, END (route fingerprints in rank order).
 * Inserting or removing a route changes two or three pairs, so the sum
 * costs O(1) per change, and it depends only on the sequence, never on
 * the history that led to it; since route fingerprints are distinct (the
 * id is part of the canonical form), the pairs determine the sequence.
 */
#include "base/idtab.h"
#include "def/def.h"
#include "snapshot/snapshot_int.h"

#define FP_START 0x5354415254ull /* "START" */
#define FP_END 0x454e44ull       /* "END" */

static uint64_t fp_pair(uint64_t a, uint64_t b) {
    return sy__hash_mix(sy__hash_mix(0x5170, a), b);
}

uint64_t sy__snap_fp_empty(void) {
    return fp_pair(FP_START, FP_END);
}

/* The sum fp_update keeps: fp_pair of each two neighbours in rank order,
 * FP_START before the first and FP_END after the last. */
uint64_t sy__snap_fp_walk(const sy_snapshot *s, bool *whole) {
    uint64_t seq = 0, prev = FP_START;
    *whole = true;
    for (size_t k = 0; k < s->rank_nchunks; k++) {
        const sy__rank_chunk *c = s->rank_chunks[k];
        for (uint32_t i = 0; i < c->n; i++) {
            uint64_t x = sy__def_route_fp(sy__snapshot_slot(s, c->e[i])->route);
            seq += fp_pair(prev, x);
            prev = x;
            *whole = *whole && x;
        }
    }
    return seq + fp_pair(prev, FP_END);
}

/* ---- shared chunks (snapshot.h) ---- */

sy__crefs *sy__crefs_new(const sy__alloc *a) {
    sy__crefs *c = sy__calloc(a, 1, sizeof *c);
    if (c)
        c->users = 1;
    return c;
}

sy__crefs *sy__crefs_hold(sy__crefs *c) {
    c->users++;
    return c;
}

void sy__crefs_drop(const sy__alloc *a, sy__crefs *c) {
    if (!c || --c->users)
        return;
    sy__free(a, c->refs);
    sy__free(a, c->free_ids);
    sy__free(a, c);
}

/* An id with a count of 1; false: out of memory. */
static bool cid_take(const sy__alloc *a, sy__crefs *c, uint32_t *out) {
    if (c->nfree) {
        *out = c->free_ids[--c->nfree];
    } else {
        if (c->next == c->cap) {
            if (c->cap > UINT32_MAX / 2)
                return false;
            size_t cap = c->cap, fcap = c->cap; /* both grow alike */
            uint32_t *r =
                sy__grow(a, c->refs, &cap, (size_t)c->next + 1, 256, sizeof *r);
            if (!r)
                return false;
            c->refs = r;
            uint32_t *f = sy__grow(a, c->free_ids, &fcap, (size_t)c->next + 1,
                                   256, sizeof *f);
            if (!f)
                return false; /* refs grown, cap not: harmless */
            c->free_ids = f;
            c->cap = (uint32_t)cap;
        }
        *out = c->next++;
    }
    c->refs[*out] = 1;
    return true;
}

bool sy__crefs_take(const sy__alloc *a, sy__crefs *c, uint32_t *cid) {
    return cid_take(a, c, cid);
}

void sy__crefs_put(sy__crefs *c, uint32_t cid) {
    c->free_ids[c->nfree++] = cid; /* room for every id: cannot fail */
}

/* The last reference on chunk ptr (id cid) went: free both. */
static void cid_free(const sy__alloc *a, sy__crefs *c, uint32_t cid,
                     void *ptr) {
    sy__crefs_put(c, cid);
    sy__free(a, ptr);
}

void sy__snap_chunks_ref(sy__crefs *cr, const uint32_t *cids, size_t n) {
    for (size_t i = 0; i < n; i++)
        cr->refs[cids[i]]++;
}

void sy__snap_chunk_unref(const sy__alloc *a, sy__crefs *cr, void *c,
                          uint32_t cid) {
    if (c && --cr->refs[cid] == 0)
        cid_free(a, cr, cid, c);
}

void *sy__snap_chunk_new(sy_snapshot *s, size_t size, uint32_t *cid) {
    void *c = sy__calloc(s->alloc, 1, size);
    if (!c)
        return NULL;
    if (!cid_take(s->alloc, s->crefs, cid)) {
        sy__free(s->alloc, c);
        return NULL;
    }
    s->chunk_bytes += size;
    return c;
}

void *sy__snap_chunk_own(sy_snapshot *s, void *c, uint32_t *cid, size_t size) {
    if (s->crefs->refs[*cid] == 1)
        return c;
    void *n = sy__malloc(s->alloc, size);
    uint32_t ncid;
    if (!n)
        return NULL;
    memcpy(n, c, size);
    if (!cid_take(s->alloc, s->crefs, &ncid)) {
        sy__free(s->alloc, n);
        return NULL;
    }
    sy__snap_chunk_unref(s->alloc, s->crefs, c, *cid);
    *cid = ncid;
    s->chunk_bytes += size;
    return n;
}

void sy__snap_free_chunks(const sy__alloc *a, sy__crefs *cr, void **v,
                          uint32_t *cids, size_t n) {
    for (size_t i = 0; v && cids && i < n; i++)
        if (v[i] && --cr->refs[cids[i]] == 0)
            cid_free(a, cr, cids[i], v[i]);
    sy__free(a, v);
    sy__free(a, cids);
}

/* Slot i, writable (its chunk made private or created). NULL: no memory. */
sy__slot *sy__snap_slot_mut(sy_snapshot *s, uint32_t i) {
    uint32_t k = i >> SY_CHUNK_BITS;
    sy__slot_chunk *c = s->slot_chunks[k];
    c = c ? sy__snap_chunk_own(s, c, &s->slot_cids[k], sizeof *c)
          : sy__snap_chunk_new(s, sizeof *c, &s->slot_cids[k]);
    if (!c)
        return NULL;
    s->slot_chunks[k] = c;
    return &c->e[i & (SY_CHUNK - 1)];
}

bool sy__snap_list_copy(const sy__alloc *a, sy__slot_list *dst,
                        const sy__slot_list *src, size_t extra) {
    size_t n = src ? src->n : 0;
    dst->v = sy__malloc(a, (n + extra + 1) * sizeof *dst->v);
    if (!dst->v)
        return false;
    if (n)
        memcpy(dst->v, src->v, n * sizeof *dst->v);
    dst->n = n;
    dst->cap = n + extra + 1;
    return true;
}

bool sy__snap_list_push(const sy__alloc *a, sy__slot_list *l, uint32_t v) {
    if (l->n == l->cap) {
        uint32_t *nv = sy__grow(a, l->v, &l->cap, l->n + 1, 16, sizeof *nv);
        if (!nv)
            return false;
        l->v = nv;
    }
    l->v[l->n++] = v;
    return true;
}

bool sy__snap_list_move(const sy__alloc *a, sy__slot_list *to,
                        sy__slot_list *from) {
    for (size_t i = 0; i < from->n; i++)
        if (!sy__snap_list_push(a, to, from->v[i]))
            return false;
    from->n = 0;
    return true;
}

void sy__snap_list_free(const sy__alloc *a, sy__slot_list *l) {
    sy__free(a, l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

uint64_t sy__snap_key_of(const sy_snapshot *s, uint32_t slot) {
    return sy__snapshot_slot(s, slot)->key;
}
/* ---- id table (open addressing, linear probing, chunked) ---- */

/* 32 bits: the entry's home is its high bits scaled to the capacity
 * (sy__snap_id_home), all of it tells most ids that share a probe run
 * apart before their text is compared. */
uint32_t sy__snap_id_hash(const char *id) {
    return sy__idtab_hash(id, strlen(id));
}

/* An entry of the table being moved out whose id has left (replaced or
 * removed) while it had not moved: skipped by lookups and by the move.
 * The old table never takes new entries, so its empty entries never run
 * out and a probe of it ends. */
#define ID_GONE (NONE - 1)

static const sy__id_entry id_none = {0, NONE};

static const sy__id_entry *entry_at(sy__id_chunk *const *v, uint32_t i) {
    const sy__id_chunk *c = v[i >> SY_CHUNK_BITS];
    return c ? &c->e[i & (SY_CHUNK - 1)] : &id_none;
}

static const sy__id_entry *id_at(const sy_snapshot *s, uint32_t i) {
    return entry_at(s->id_chunks, i);
}

/* Entry i of chunk vector v (ids cids), writable: its chunk made private,
 * or created empty. NULL: out of memory. */
static sy__id_entry *entry_mut(sy_snapshot *s, sy__id_chunk **v, uint32_t *cids,
                               uint32_t i) {
    uint32_t k = i >> SY_CHUNK_BITS;
    sy__id_chunk *c;
    if (v[k]) {
        c = sy__snap_chunk_own(s, v[k], &cids[k], sizeof *c);
    } else if ((c = sy__snap_chunk_new(s, sizeof *c, &cids[k])) != NULL) {
        for (uint32_t j = 0; j < SY_CHUNK; j++)
            c->e[j].slot = NONE;
    }
    if (!c)
        return NULL;
    v[k] = c;
    return &c->e[i & (SY_CHUNK - 1)];
}

/* Entry i, writable. NULL: out of memory. */
static sy__id_entry *id_mut(sy_snapshot *s, uint32_t i) {
    return entry_mut(s, s->id_chunks, s->id_cids, i);
}

uint32_t sy__snap_id_find(const sy_snapshot *s, const char *id, uint32_t h,
                          uint32_t *pos) {
    uint32_t cap = s->id_cap;
    for (uint32_t i = sy__snap_id_home(h, cap);; i = i + 1 == cap ? 0 : i + 1) {
        const sy__id_entry *e = id_at(s, i);
        if (e->slot == NONE) {
            *pos = i;
            break;
        }
        if (e->hash == h &&
            strcmp(sy__snapshot_slot(s, e->slot)->route->id, id) == 0) {
            *pos = i;
            return e->slot;
        }
    }
    if (!s->id_old_chunks)
        return NONE;
    /* not moved yet? Entries before id_old_next have moved and their
     * chunks may be gone (sy__snap_id_move lets each go once passed): a
     * probe that reaches them goes on at id_old_next, where a run that
     * crossed them goes on; an id has one live entry at most, so one
     * found past its run's end is still it. The position of one found is
     * id_cap + its position in the old table. */
    uint32_t ocap = s->id_old_cap, next = s->id_old_next;
    bool skipped = false;
    for (uint32_t i = sy__snap_id_home(h, ocap);;
         i = i + 1 == ocap ? 0 : i + 1) {
        if (i < next) {
            if (skipped)
                return NONE; /* round the table once */
            i = next, skipped = true;
        }
        const sy__id_entry *e = entry_at(s->id_old_chunks, i);
        if (e->slot == NONE)
            return NONE;
        if (e->slot != ID_GONE && e->hash == h &&
            strcmp(sy__snapshot_slot(s, e->slot)->route->id, id) == 0) {
            *pos = cap + i;
            return e->slot;
        }
    }
}

bool sy__snap_id_set(sy_snapshot *s, uint32_t pos, sy__id_entry v) {
    sy__id_entry *e =
        pos < s->id_cap
            ? id_mut(s, pos)
            : entry_mut(s, s->id_old_chunks, s->id_old_cids, pos - s->id_cap);
    if (e)
        *e = v;
    return e != NULL;
}

/* Remove entry at pos with backward-shift deletion (in the old table: a
 * GONE mark, nothing shifts there). */
bool sy__snap_id_remove_at(sy_snapshot *s, uint32_t pos) {
    uint32_t cap = s->id_cap, i = pos;
    if (pos >= cap)
        return sy__snap_id_set(s, pos, (sy__id_entry){0, ID_GONE});
    for (;;) {
        if (!sy__snap_id_set(s, i, (sy__id_entry){0, NONE}))
            return false;
        uint32_t j = i;
        for (;;) {
            j = j + 1 == cap ? 0 : j + 1;
            if (id_at(s, j)->slot == NONE)
                return true;
            uint32_t home = sy__snap_id_home(id_at(s, j)->hash, cap);
            /* can entry j move to hole i? (home not in (i, j]) */
            bool between =
                i <= j ? (home > i && home <= j) : (home > i || home <= j);
            if (!between)
                break;
        }
        if (!sy__snap_id_set(s, i, *id_at(s, j)))
            return false;
        i = j;
    }
}

/* Move the old table's next `count` entries (positions) into the table;
 * each old chunk is let go once all its entries have moved (not all of
 * them at the end: at 1,000,000 ids that was 1,374 chunks in the move's
 * last publish), the old table once every entry has. The home is the
 * hash's high bits scaled to the capacity, so the entries of a stretch of
 * the old table land in a stretch of the new one (about cap / old cap
 * times as long): a publish copies a few chunks, not one per entry. */
bool sy__snap_id_move(sy_snapshot *s, size_t count) {
    if (!s->id_old_chunks)
        return true;
    uint32_t cap = s->id_cap, ocap = s->id_old_cap, p = s->id_old_next;
    uint32_t k = p >> SY_CHUNK_BITS; /* the first chunk still held */
    uint32_t end = count < ocap - p ? p + (uint32_t)count : ocap;
    for (; p < end; p++) {
        sy__id_entry e = *entry_at(s->id_old_chunks, p);
        if (e.slot == NONE || e.slot == ID_GONE)
            continue;
        /* not in the table (a lookup found it in the old one, where an
         * id that changed was marked GONE): its first empty entry */
        uint32_t i = sy__snap_id_home(e.hash, cap);
        while (id_at(s, i)->slot != NONE)
            i = i + 1 == cap ? 0 : i + 1;
        sy__id_entry *d = id_mut(s, i);
        if (!d)
            return false;
        *d = e;
    }
    s->id_old_next = end;
    if (end == ocap) {
        sy__snap_id_drop_old(s);
        return true;
    }
    for (; k < end >> SY_CHUNK_BITS; k++) { /* wholly moved */
        sy__snap_chunk_unref(s->alloc, s->crefs, s->id_old_chunks[k],
                             s->id_old_cids[k]);
        s->id_old_chunks[k] = NULL;
    }
    return true;
}

void sy__snap_id_drop_old(sy_snapshot *s) {
    sy__snap_free_chunks(s->alloc, s->crefs, (void **)s->id_old_chunks,
                         s->id_old_cids,
                         s->id_old_chunks ? s->id_old_cap >> SY_CHUNK_BITS : 0);
    s->id_old_chunks = NULL;
    s->id_old_cids = NULL;
    s->id_old_cap = s->id_old_next = 0;
}

/* Capacity for `live` ids: whole chunks, loaded at most 80 % (8-byte
 * entries: a probe run of a few entries mostly stays within a cache line;
 * the matcher never looks ids up). Not a power of two: 1,000,000 ids
 * took 2^21 entries (16 bytes an id). */
uint32_t sy__snap_id_cap_for(size_t live) {
    size_t want = live + live / 4 + 16;
    if (want > (size_t)UINT32_MAX - SY_CHUNK)
        want = (size_t)UINT32_MAX - SY_CHUNK; /* past any slot count */
    return (uint32_t)((want + SY_CHUNK - 1) & ~(size_t)(SY_CHUNK - 1));
}

uint32_t sy__snap_id_cap_new(size_t ids) {
    uint32_t roomy = sy__snap_id_cap_for(ids + ids / 8), pow2 = SY_CHUNK;
    while (pow2 < roomy && pow2 < ids + ids / 4 + 16)
        pow2 *= 2;
    return pow2 < roomy ? pow2 : roomy;
}

/* A fresh, empty table of `cap` entries. */
bool sy__snap_id_alloc(sy_snapshot *s, uint32_t cap) {
    uint32_t nk = cap >> SY_CHUNK_BITS;
    s->id_chunks = sy__calloc(s->alloc, nk, sizeof *s->id_chunks);
    s->id_cids = sy__calloc(s->alloc, nk, sizeof *s->id_cids);
    if (!s->id_chunks || !s->id_cids)
        return false;
    s->id_cap = cap;
    for (uint32_t k = 0; k < nk; k++) {
        sy__id_chunk *c = sy__snap_chunk_new(s, sizeof *c, &s->id_cids[k]);
        if (!c)
            return false;
        for (uint32_t i = 0; i < SY_CHUNK; i++)
            c->e[i].slot = NONE;
        s->id_chunks[k] = c;
    }
    return true;
}

/* Copies of a table's chunk vectors (nk chunks), a reference on each
 * chunk there is. false: out of memory (nothing taken). */
static bool id_vec_share(sy_snapshot *s, sy__id_chunk ***pv, uint32_t **pc,
                         sy__id_chunk *const *v, const uint32_t *c,
                         uint32_t nk) {
    sy__id_chunk **nv = sy__malloc(s->alloc, (nk ? nk : 1) * sizeof *nv);
    uint32_t *nc = sy__malloc(s->alloc, (nk ? nk : 1) * sizeof *nc);
    if (!nv || !nc) {
        sy__free(s->alloc, nv);
        sy__free(s->alloc, nc);
        return false;
    }
    memcpy(nv, v, nk * sizeof *nv);
    memcpy(nc, c, nk * sizeof *nc);
    for (uint32_t k = 0; k < nk; k++)
        if (nv[k])
            s->crefs->refs[nc[k]]++;
    *pv = nv;
    *pc = nc;
    return true;
}

/* The base's table (and the one it is moving out of) shared chunk by
 * chunk. */
static bool id_table_share(sy_snapshot *s, const sy_snapshot *base) {
    if (!id_vec_share(s, &s->id_chunks, &s->id_cids, base->id_chunks,
                      base->id_cids, base->id_cap >> SY_CHUNK_BITS))
        return false;
    s->id_cap = base->id_cap;
    if (!base->id_old_chunks)
        return true;
    if (!id_vec_share(s, &s->id_old_chunks, &s->id_old_cids,
                      base->id_old_chunks, base->id_old_cids,
                      base->id_old_cap >> SY_CHUNK_BITS))
        return false;
    s->id_old_cap = base->id_old_cap;
    s->id_old_next = base->id_old_next;
    return true;
}

/* The base's table becomes the old one, moved into a new empty table of
 * `cap` entries (its chunks made as entries land in them). */
static bool id_table_grow(sy_snapshot *s, const sy_snapshot *base,
                          uint32_t cap) {
    if (!id_vec_share(s, &s->id_old_chunks, &s->id_old_cids, base->id_chunks,
                      base->id_cids, base->id_cap >> SY_CHUNK_BITS))
        return false;
    s->id_old_cap = base->id_cap;
    s->id_old_next = 0;
    uint32_t nk = cap >> SY_CHUNK_BITS;
    s->id_chunks = sy__calloc(s->alloc, nk, sizeof *s->id_chunks);
    s->id_cids = sy__calloc(s->alloc, nk, sizeof *s->id_cids);
    if (!s->id_chunks || !s->id_cids)
        return false; /* freed with the snapshot (NULL chunks) */
    s->id_cap = cap;
    return true;
}

uint32_t sy__snapshot_find_slot(const sy_snapshot *s, const char *id) {
    uint32_t pos;
    return sy__snap_id_find(s, id, sy__snap_id_hash(id), &pos);
}

/* Put every live slot's id in the (fresh, empty) id table. */
void sy__snap_id_fill(sy_snapshot *s) {
    for (uint32_t i = 0; i < s->slot_count; i++) {
        const sy__slot *sl = sy__snapshot_slot(s, i);
        if (!sl->route)
            continue;
        uint32_t pos;
        uint32_t h = sy__snap_id_hash(sl->route->id);
        sy__snap_id_find(s, sl->route->id, h, &pos);
        /* a fresh table's chunks are private: no copy, cannot fail */
        *id_mut(s, pos) = (sy__id_entry){h, i};
    }
}

/* ---- rank order (chunked runs of slot ids) ---- */

uint32_t sy__snapshot_rank_at(const sy_snapshot *s, size_t i) {
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
void sy__snap_rank_recount(sy_snapshot *s) {
    size_t r = 0;
    for (size_t k = 0; k < s->rank_nchunks; k++) {
        s->rank_start[k] = r;
        r += s->rank_chunks[k]->n;
    }
    s->route_count = r;
}

/* Index of the chunk where `key` belongs: the last whose first key is
 * below it (or `<=` with after_equal), else 0. */
static uint64_t fp_of(const sy_snapshot *s, uint32_t slot, uint64_t edge) {
    return slot == NONE ? edge
                        : sy__def_route_fp(sy__snapshot_slot(s, slot)->route);
}

/* The neighbours of entry i of rank chunk k: the slots before and after
 * it in rank order (NONE at either end). */
static void rank_neighbours(const sy_snapshot *s, size_t k, uint32_t i,
                            uint32_t *prev, uint32_t *next) {
    const sy__rank_chunk *c = s->rank_chunks[k];
    *prev = i > 0   ? c->e[i - 1]
            : k > 0 ? s->rank_chunks[k - 1]->e[s->rank_chunks[k - 1]->n - 1]
                    : NONE;
    *next = i + 1 < c->n              ? c->e[i + 1]
            : k + 1 < s->rank_nchunks ? s->rank_chunks[k + 1]->e[0]
                                      : NONE;
}

/* Entry i of chunk k joins (sign 1) or leaves (sign -1) the sequence. */
static void fp_update(sy_snapshot *s, size_t k, uint32_t i, int sign) {
    if (s->fp_lazy) /* walked when asked (sy__snap_fp_walk) */
        return;
    uint32_t p, n;
    rank_neighbours(s, k, i, &p, &n);
    uint64_t a = fp_of(s, p, FP_START), b = fp_of(s, n, FP_END);
    uint64_t x =
        sy__def_route_fp(sy__snapshot_slot(s, s->rank_chunks[k]->e[i])->route);
    uint64_t with = fp_pair(a, x) + fp_pair(x, b), without = fp_pair(a, b);
    s->fp_seq += sign > 0 ? with - without : without - with;
}

static size_t rank_chunk_for(const sy_snapshot *s, uint64_t key,
                             bool after_equal) {
    size_t lo = 0, hi = s->rank_nchunks;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        uint64_t k0 = sy__snap_key_of(s, s->rank_chunks[mid]->e[0]);
        if (k0 < key || (after_equal && k0 == key))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? lo - 1 : 0;
}

/* Insert `slot` after every entry with a key <= its own. */
bool sy__snap_rank_insert(sy_snapshot *s, uint32_t slot) {
    uint64_t key = sy__snap_key_of(s, slot);
    if (!s->rank_nchunks) {
        sy__rank_chunk *c =
            sy__snap_chunk_new(s, sizeof *c, &s->rank_cids[s->rank_nchunks]);
        if (!c)
            return false;
        s->rank_chunks[s->rank_nchunks++] = c;
    }
    /* a first document's routes come in key order (snapshot.c
     * key_order): each after the last entry, found without a search */
    const sy__rank_chunk *last = s->rank_chunks[s->rank_nchunks - 1];
    bool tail = last->n && sy__snap_key_of(s, last->e[last->n - 1]) <= key;
    size_t k = tail ? s->rank_nchunks - 1 : rank_chunk_for(s, key, true);
    sy__rank_chunk *c =
        sy__snap_chunk_own(s, s->rank_chunks[k], &s->rank_cids[k], sizeof *c);
    if (!c)
        return false;
    s->rank_chunks[k] = c;
    if (c->n == SY_RANK_CHUNK_MAX) { /* split: the upper half moves on */
        uint32_t ncid;
        sy__rank_chunk *n = sy__snap_chunk_new(s, sizeof *n, &ncid);
        if (!n)
            return false;
        /* but for a key after the last one (the routes of a document,
         * inserted in their order): a new chunk of its own, the full one
         * stays full (half-full chunks cost 4 bytes a route) */
        bool append = k + 1 == s->rank_nchunks &&
                      sy__snap_key_of(s, c->e[c->n - 1]) <= key;
        n->n = append ? 0 : c->n / 2;
        c->n -= n->n;
        memcpy(n->e, c->e + c->n, n->n * sizeof *n->e);
        memmove(s->rank_chunks + k + 2, s->rank_chunks + k + 1,
                (s->rank_nchunks - k - 1) * sizeof *s->rank_chunks);
        memmove(s->rank_cids + k + 2, s->rank_cids + k + 1,
                (s->rank_nchunks - k - 1) * sizeof *s->rank_cids);
        s->rank_chunks[k + 1] = n;
        s->rank_cids[k + 1] = ncid;
        s->rank_nchunks++;
        if (append || sy__snap_key_of(s, n->e[0]) <= key) {
            c = n;
            k++;
        }
    }
    uint32_t lo = tail ? c->n : 0, hi = c->n; /* tail: every key <= key */
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (sy__snap_key_of(s, c->e[mid]) <= key)
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(c->e + lo + 1, c->e + lo, (c->n - lo) * sizeof *c->e);
    c->e[lo] = slot;
    c->n++;
    fp_update(s, k, lo, 1);
    return true;
}

/* Remove `slot` (present) from the rank order. */
bool sy__snap_rank_remove(sy_snapshot *s, uint32_t slot) {
    uint64_t key = sy__snap_key_of(s, slot);
    for (size_t k = rank_chunk_for(s, key, false); k < s->rank_nchunks; k++) {
        const sy__rank_chunk *r = s->rank_chunks[k];
        if (sy__snap_key_of(s, r->e[0]) > key)
            break; /* past every entry with this key */
        for (uint32_t i = 0; i < r->n; i++) {
            if (r->e[i] != slot)
                continue;
            fp_update(s, k, i, -1);
            sy__rank_chunk *c = sy__snap_chunk_own(s, s->rank_chunks[k],
                                                   &s->rank_cids[k], sizeof *c);
            if (!c)
                return false;
            memmove(c->e + i, c->e + i + 1, (c->n - i - 1) * sizeof *c->e);
            if (--c->n == 0) {
                sy__snap_chunk_unref(s->alloc, s->crefs, c, s->rank_cids[k]);
                memmove(s->rank_chunks + k, s->rank_chunks + k + 1,
                        (s->rank_nchunks - k - 1) * sizeof *s->rank_chunks);
                memmove(s->rank_cids + k, s->rank_cids + k + 1,
                        (s->rank_nchunks - k - 1) * sizeof *s->rank_cids);
                s->rank_nchunks--;
            } else {
                s->rank_chunks[k] = c;
            }
            return true;
        }
    }
    return true; /* not ranked (cannot happen for a live slot) */
}

/* Share the base's chunk vectors (a reference per chunk) with room for
 * `n` more slots and `n` more rank chunks; the id table is shared when
 * its capacity suits live + n ids, else rebuilt. */
int sy__snap_share_base(sy_snapshot *s, const sy_snapshot *base, size_t n,
                        size_t live) {
    const sy__alloc *a = s->alloc;
    uint32_t base_slots = base ? base->slot_count : 0;
    size_t cap = ((size_t)base_slots + n + SY_CHUNK - 1) / SY_CHUNK;
    size_t base_chunks = ((size_t)base_slots + SY_CHUNK - 1) / SY_CHUNK;
    s->slot_chunks = sy__calloc(a, cap ? cap : 1, sizeof *s->slot_chunks);
    s->slot_cids = sy__calloc(a, cap ? cap : 1, sizeof *s->slot_cids);
    if (!s->slot_chunks || !s->slot_cids)
        return SY_ENOMEM;
    s->slot_chunk_cap = cap;
    if (base_chunks) {
        memcpy(s->slot_chunks, base->slot_chunks,
               base_chunks * sizeof *s->slot_chunks);
        memcpy(s->slot_cids, base->slot_cids,
               base_chunks * sizeof *s->slot_cids);
        sy__snap_chunks_ref(s->crefs, s->slot_cids, base_chunks);
    }
    s->slot_count = base_slots;
    size_t rn = base ? base->rank_nchunks : 0;
    s->rank_chunks = sy__calloc(a, rn + n + 1, sizeof *s->rank_chunks);
    s->rank_cids = sy__calloc(a, rn + n + 1, sizeof *s->rank_cids);
    s->rank_start = sy__calloc(a, rn + n + 1, sizeof *s->rank_start);
    if (!s->rank_chunks || !s->rank_cids || !s->rank_start)
        return SY_ENOMEM;
    if (rn) {
        memcpy(s->rank_chunks, base->rank_chunks, rn * sizeof *s->rank_chunks);
        memcpy(s->rank_cids, base->rank_cids, rn * sizeof *s->rank_cids);
        sy__snap_chunks_ref(s->crefs, s->rank_cids, rn);
    }
    s->rank_nchunks = rn;
    uint32_t want = sy__snap_id_cap_for(live + n);
    uint32_t have = base ? base->id_cap : 0;
    /* a table being moved out of moves a stretch per publish: a chunk and
     * four entries per change, so that it is done long before the new
     * table (room for twice the ids it grew at) fills up */
    size_t step = SY_CHUNK + 4 * n;
    if (base && have >= want && have / 4 <= want)
        return id_table_share(s, base) && sy__snap_id_move(s, step) ? SY_OK
                                                                    : SY_ENOMEM;
    /* a table that grows takes room for as many ids again, its entries
     * moved in a stretch per publish (sy__snap_id_move), looked up in
     * both meanwhile; a new one (or one that shrinks, or grows again
     * before its move is done) takes sy__snap_id_cap_new's, filled at
     * once (O(n), like the change list or the table that left) */
    uint32_t grown = sy__snap_id_cap_for(2 * (live + n));
    if (base && live && want > have && !base->id_old_chunks &&
        (size_t)grown + have <= (size_t)UINT32_MAX - SY_CHUNK)
        return id_table_grow(s, base, grown) && sy__snap_id_move(s, step)
                   ? SY_OK
                   : SY_ENOMEM;
    want = live && want > have ? grown : sy__snap_id_cap_new(live + n);
    if (!sy__snap_id_alloc(s, want))
        return SY_ENOMEM;
    sy__snap_id_fill(s);
    return SY_OK;
}
