/*
 * def_memo.h - the entry memo of one document's parse (def_memo.c): a
 * built-in's shortcut entry ("Method=GET", "StripPrefix=2") written again
 * in a later route is rebuilt from what its first build found (its
 * values, the field of each) and its canonical text is copied, not
 * written again. Internal to lib/def.
 */
#ifndef SY_DEF_MEMO_H
#define SY_DEF_MEMO_H

#include "def/def_build.h"

#define SY_MEMO_ARGS 6    /* values of an entry the memo keeps */
#define SY_MEMO_BYTES 232 /* its text, values and canonical text */
#define SY_MEMO_HINTS 16  /* entries of a list the canonical form is told of */

/* One entry's text and what building it found. */
typedef struct sy__memo_slot {
    uint64_t hash; /* of the text and kind; 0: empty */
    const sy__factory_spec *spec;
    uint32_t gen; /* the last route that used it: not replaced in it */
    uint16_t text_len;
    uint16_t canon_len; /* 0: not written yet (the next use writes it) */
    uint16_t canon_at;  /* where it goes in bytes */
    uint8_t kind, nargs;
    /* value k (in the text's order) goes to args[pos[k]] under the key of
     * field[k]; its vlen[k] bytes and a NUL follow the text in bytes, the
     * values' vals_len bytes in all */
    uint16_t vals_len;
    uint8_t field[SY_MEMO_ARGS], pos[SY_MEMO_ARGS], vlen[SY_MEMO_ARGS];
    /* a predicate's share of its route's arena estimate (def_route.c
     * predicate_estimate), once a route has asked */
    bool est_set, est_one;
    uint32_t est_n, est_text;
    char bytes[SY_MEMO_BYTES];
} sy__memo_slot;

/* A predicate's text as the route's arena estimate looked it up: its
 * build looks no more (its slot checked again: another entry of the route
 * may have taken the place since). */
typedef struct sy__memo_pre {
    const void *item; /* the predicate's cJSON node */
    sy__memo_slot *slot;
    uint64_t hash;
    size_t len;
} sy__memo_pre;

/* The entries of the route being built that came from, or went into, a
 * slot: the canonical form copies or keeps their text. */
typedef struct sy__def_memo {
    const sy__alloc *alloc;
    sy__memo_slot *slots; /* made at the first use */
    uint64_t *seen;       /* texts seen once (their hashes): the second
                             sight of a text takes it in, not the first */
    uint32_t gen;
    size_t hint_n[2]; /* entries of the list hinted: the route's count */
    sy__memo_slot *hint[2][SY_MEMO_HINTS]; /* NULL: none */
    /* built-ins found by name (sy__def_memo_spec) */
    const sy__factory_spec *specs[2][64];
    size_t pre_n; /* predicates of the route looked up by its estimate */
    sy__memo_pre pre[SY_MEMO_HINTS];
} sy__def_memo;

void sy__def_memo_init(sy__def_memo *m, const sy__alloc *a);
void sy__def_memo_free(sy__def_memo *m);
/* Its tables made now (else at the first entry taken in): a large
 * document's, so they lie below its routes in the heap and their room
 * serves what comes after the parse. False: out of memory (no memo). */
bool sy__def_memo_reserve(sy__def_memo *m);

#define SY_MEMO_SLOTS 256

/* The hash of an entry's text (never 0): a word at a time, inline (the
 * texts are short; a slot's text is compared whole). */
static inline uint64_t sy__def_memo_hash(sy__factory_kind kind,
                                         const char *text, size_t len) {
    const uint64_t k = 0x9e3779b97f4a7c15ull;
    uint64_t h = ((uint64_t)len << 1 | (uint64_t)kind) * k, w;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        h = (h ^ sy__load_u64(text + i)) * k;
        h ^= h >> 29;
    }
    if (i < len) {
        if (len >= 8) { /* the last word, overlapping */
            w = sy__load_u64(text + len - 8);
        } else {
            w = 0;
            for (size_t j = 0; j < len; j++)
                w = w << 8 | (unsigned char)text[j];
        }
        h = (h ^ w) * k;
        h ^= h >> 29;
    }
    h *= k;
    h ^= h >> 32;
    return h ? h : 1;
}

/* s (or NULL) when it holds (kind, text[0, len)) of that hash, marked
 * used by the route being built; else NULL. */
static inline sy__memo_slot *
sy__def_memo_check(sy__def_memo *m, sy__memo_slot *s, sy__factory_kind kind,
                   const char *text, size_t len, uint64_t hash) {
    if (!s || s->hash != hash || s->kind != (uint8_t)kind ||
        s->text_len != len || memcmp(s->bytes, text, len) != 0)
        return NULL;
    s->gen = m->gen;
    return s;
}

/* The slot of (kind, text[0, len)) or NULL; *hash: the text's. */
static inline sy__memo_slot *sy__def_memo_find(sy__def_memo *m,
                                               sy__factory_kind kind,
                                               const char *text, size_t len,
                                               uint64_t *hash) {
    *hash = sy__def_memo_hash(kind, text, len);
    if (!m->slots)
        return NULL;
    return sy__def_memo_check(m, &m->slots[*hash & (SY_MEMO_SLOTS - 1)], kind,
                              text, len, *hash);
}

/* sy__factory_find(kind, name, len) through m (NULL: none). */
static inline const sy__factory_spec *sy__def_memo_spec(sy__def_memo *m,
                                                        sy__factory_kind kind,
                                                        const char *name,
                                                        size_t len) {
    if (!m || !len)
        return sy__factory_find(kind, name, len);
    const sy__factory_spec **c =
        &m->specs[kind & 1][(len * 7 + (unsigned char)name[0] +
                             (unsigned char)name[len - 1]) &
                            63];
    const sy__factory_spec *s = *c;
    if (s && strncmp(s->name, name, len) == 0 && !s->name[len])
        return s;
    s = sy__factory_find(kind, name, len);
    if (s)
        *c = s;
    return s;
}

/* Rebuild entry e of r from slot s (values copied into r's text, args
 * from ea). False: out of memory. */
bool sy__def_memo_replay(const sy__memo_slot *s, struct sy_route *r,
                         sy__arena *ea, sy__def_entry *e);

/* Keep what building (kind, text) found: values vals[k] (in the text's
 * order) of fields[k], e the built entry (args in field order). Returns
 * the slot, or NULL: the text's first sight, or it does not fit, or its
 * place is in use. */
sy__memo_slot *sy__def_memo_add(sy__def_memo *m, sy__factory_kind kind,
                                const char *text, size_t len, uint64_t hash,
                                const sy__def_entry *e, const char *const *vals,
                                const int *fields, size_t n);

#endif
