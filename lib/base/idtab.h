/*
 * idtab.h - the one open-addressing table from string ids to uint32_t
 * values in lib/: route ids seen in a document (def.c), old routes by id
 * in a diff (diff.c), live slots by route id in a snapshot (snapshot.c),
 * instances by id in a service and in its delta work list (service.c).
 *
 *   entries[mask + 1]   {hash, val}; val == SY_NONE: empty
 *   home(id) = hash(id) & mask; probe home, home+1, ... (wrapping) until
 *   the id or an empty entry: linear probing, no tombstones
 *
 * The table holds no strings: key(ctx, val) gives back the id stored
 * under a value (routes[val]->id, inst[val].id, ...), so one table serves
 * any array of named things and costs 8 bytes an entry. The stored 32-bit
 * hash rejects most non-matching entries without touching the id, and
 * gives each entry's home when removing (backward shift).
 *
 * Invariants: the capacity is a power of two with at least one empty
 * entry (sy__idtab_capacity keeps the load <= 3/4), so every probe ends;
 * every entry lies between its home and the first empty entry after it,
 * which sy__idtab_remove_at keeps by shifting later entries back.
 *
 * Header-only: lookups inline the caller's key function. The caller owns
 * the entry array (heap, arena, or copied from an older table).
 */
#ifndef SY_IDTAB_H
#define SY_IDTAB_H

#include "base/util.h"

typedef struct sy__idtab_entry {
    uint32_t hash;
    uint32_t val; /* SY_NONE: empty */
} sy__idtab_entry;

typedef struct sy__idtab {
    sy__idtab_entry *e; /* mask + 1 entries */
    uint32_t mask;
} sy__idtab;

/* The id stored under `val`. */
typedef const char *(*sy__idtab_key_fn)(const void *ctx, uint32_t val);

static inline uint32_t sy__idtab_hash(const char *id, size_t len) {
    return (uint32_t)sy__hash64(id, len, 0x1d);
}

/* Entries for a table of up to n ids: a power of two >= 16, load <= 3/4. */
static inline size_t sy__idtab_capacity(size_t n) {
    return sy__pow2_at_least(16, n + n / 3 + 16);
}

/* Use `entries` (cap of them, cap from sy__idtab_capacity) as an empty
 * table. */
static inline void sy__idtab_init(sy__idtab *t, sy__idtab_entry *entries,
                                  size_t cap) {
    t->e = entries;
    t->mask = (uint32_t)(cap - 1);
    for (size_t i = 0; i < cap; i++)
        t->e[i].val = SY_NONE;
}

/*
 * The value stored for id (len bytes, hash h), or SY_NONE. *pos receives
 * the entry holding it, or the empty entry where it would go (valid until
 * the table changes).
 */
static inline uint32_t sy__idtab_find(const sy__idtab *t, const char *id,
                                      size_t len, uint32_t h,
                                      sy__idtab_key_fn key, const void *ctx,
                                      uint32_t *pos) {
    for (uint32_t i = h & t->mask;; i = (i + 1) & t->mask) {
        const sy__idtab_entry *e = &t->e[i];
        if (e->val == SY_NONE) {
            *pos = i;
            return SY_NONE;
        }
        if (e->hash == h) {
            const char *k = key(ctx, e->val);
            if (strncmp(k, id, len) == 0 && k[len] == '\0') {
                *pos = i;
                return e->val;
            }
        }
    }
}

/* Store (h, val) at `pos`, an empty entry from sy__idtab_find. */
static inline void sy__idtab_set(sy__idtab *t, uint32_t pos, uint32_t h,
                                 uint32_t val) {
    t->e[pos] = (sy__idtab_entry){h, val};
}

/* Store (h, val) for an id known to be absent. */
static inline void sy__idtab_add(sy__idtab *t, uint32_t h, uint32_t val) {
    uint32_t i = h & t->mask;
    while (t->e[i].val != SY_NONE)
        i = (i + 1) & t->mask;
    t->e[i] = (sy__idtab_entry){h, val};
}

/* Empty the entry at `pos` and shift later entries of its run back, so
 * every remaining id is still found from its home. */
static inline void sy__idtab_remove_at(sy__idtab *t, uint32_t pos) {
    uint32_t mask = t->mask, i = pos;
    for (;;) {
        t->e[i].val = SY_NONE;
        uint32_t j = i;
        for (;;) {
            j = (j + 1) & mask;
            if (t->e[j].val == SY_NONE)
                return;
            uint32_t home = t->e[j].hash & mask;
            /* can entry j move to hole i? (home not in (i, j]) */
            bool between =
                i <= j ? (home > i && home <= j) : (home > i || home <= j);
            if (!between)
                break;
        }
        t->e[i] = t->e[j];
        i = j;
    }
}

#endif
