/*
 * def_memo.c - the entry memo of one document's parse (def_memo.h): a
 * table of 256 slots placed by the hash of a shortcut entry's text, a slot
 * replaced by a later entry of the same place unless the route being built
 * uses it. A text is taken in at its second sight: most texts seen once
 * (a route's own path or host) are never seen again, and taking one in
 * costs more than building it.
 */
#include "def/def_memo.h"

#define SLOTS SY_MEMO_SLOTS
#define SEEN 1024

void sy__def_memo_init(sy__def_memo *m, const sy__alloc *a) {
    memset(m, 0, sizeof *m);
    m->alloc = a;
}

bool sy__def_memo_reserve(sy__def_memo *m) {
    if (!m->seen && !(m->seen = sy__calloc(m->alloc, SEEN, sizeof *m->seen)))
        return false;
    if (!m->slots) {
        if (!(m->slots = sy__malloc(m->alloc, SLOTS * sizeof *m->slots)))
            return false;
        for (size_t i = 0; i < SLOTS; i++) {
            m->slots[i].hash = 0;
            m->slots[i].gen = 0;
        }
    }
    return true;
}

void sy__def_memo_free(sy__def_memo *m) {
    sy__free(m->alloc, m->slots);
    sy__free(m->alloc, m->seen);
    m->slots = NULL;
    m->seen = NULL;
}

bool sy__def_memo_replay(const sy__memo_slot *s, struct sy_route *r,
                         sy__arena *ea, sy__def_entry *e) {
    /* the values in one piece of r's text (their bytes and NULs, as the
     * first build took them one by one), then the args array */
    const char *v[SY_MEMO_ARGS];
    if (s->nargs) {
        char *p = sy__route_text(r, s->vals_len);
        if (!p)
            return false;
        memcpy(p, s->bytes + s->text_len, s->vals_len);
        for (size_t k = 0; k < s->nargs; k++) {
            v[k] = p;
            p += s->vlen[k] + 1;
        }
    }
    sy__def_set_factory(e, s->spec, NULL);
    e->arg_count = s->nargs;
    e->args = NULL;
    if (!s->nargs)
        return true;
    if (!(e->args = sy__arena_alloc(ea, s->nargs * sizeof *e->args)))
        return false;
    for (size_t k = 0; k < s->nargs; k++)
        e->args[s->pos[k]] = (sy_kv){s->spec->fields[s->field[k]].name, v[k]};
    return true;
}

sy__memo_slot *sy__def_memo_add(sy__def_memo *m, sy__factory_kind kind,
                                const char *text, size_t len, uint64_t hash,
                                const sy__def_entry *e, const char *const *vals,
                                const int *fields, size_t n) {
    if (n > SY_MEMO_ARGS || n != e->arg_count || len >= SY_MEMO_BYTES / 2 ||
        e->host || !sy__def_spec(e))
        return NULL;
    if (!sy__def_memo_reserve(m))
        return NULL; /* no memo: every entry is built */
    uint64_t *seen = &m->seen[(hash >> 16) & (SEEN - 1)];
    if (*seen != hash) {
        *seen = hash;
        return NULL;
    }
    sy__memo_slot *s = &m->slots[hash & (SLOTS - 1)];
    if (s->hash && s->gen == m->gen)
        return NULL; /* this route's: its hint may still be read */
    /* e's args are the fields' values in field order, each field's in
     * the text's order (def_entry.c finish_entry): value k's place */
    uint8_t pos[SY_MEMO_ARGS];
    size_t at = len;
    for (size_t k = 0; k < n; k++) {
        size_t vl = strlen(vals[k]), j = 0;
        if (fields[k] < 0 ||
            (size_t)fields[k] >= sy__def_spec(e)->field_count ||
            vl > UINT8_MAX || at + vl + 1 > SY_MEMO_BYTES)
            return NULL;
        at += vl + 1;
        for (size_t i = 0; i < n; i++)
            j += fields[i] < fields[k] || (fields[i] == fields[k] && i < k);
        if (e->args[j].key != sy__def_spec(e)->fields[fields[k]].name ||
            strcmp(e->args[j].value, vals[k]) != 0)
            return NULL; /* not as expected: not kept */
        pos[k] = (uint8_t)j;
    }
    s->hash = 0; /* invalid until whole */
    memcpy(s->bytes, text, len);
    at = len;
    for (size_t k = 0; k < n; k++) {
        size_t vl = strlen(vals[k]);
        memcpy(s->bytes + at, vals[k], vl + 1);
        at += vl + 1;
        s->vlen[k] = (uint8_t)vl;
        s->field[k] = (uint8_t)fields[k];
        s->pos[k] = pos[k];
    }
    s->spec = sy__def_spec(e);
    s->kind = (uint8_t)kind;
    s->nargs = (uint8_t)n;
    s->text_len = (uint16_t)len;
    s->vals_len = (uint16_t)(at - len);
    s->canon_at = (uint16_t)at;
    s->canon_len = 0;
    s->est_set = false;
    s->gen = m->gen;
    s->hash = hash;
    return s;
}
