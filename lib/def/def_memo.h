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
     * field[k]; its vlen[k] bytes follow the text in bytes */
    uint8_t field[SY_MEMO_ARGS], pos[SY_MEMO_ARGS], vlen[SY_MEMO_ARGS];
    char bytes[SY_MEMO_BYTES];
} sy__memo_slot;

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
} sy__def_memo;

void sy__def_memo_init(sy__def_memo *m, const sy__alloc *a);
void sy__def_memo_free(sy__def_memo *m);

/* The slot of (kind, text[0, len)) or NULL. */
sy__memo_slot *sy__def_memo_find(sy__def_memo *m, sy__factory_kind kind,
                                 const char *text, size_t len, uint64_t *hash);

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
