/*
 * def_shortcut.c - a built-in's shortcut entry ("Path=/a/{id}", "Method=GET,
 * POST", "StripPrefix=2") read the common way: its values split, trimmed
 * and copied, mapped onto the spec's fields by the shortcut kind and
 * checked, without the general reading's raw arguments and field view
 * (def_entry.c). What it does not read this way (no '=', a host's
 * factory, more values than SY_MEMO_ARGS, a value that may be SpEL, a
 * missing required field, any failed check) it leaves to that reading,
 * which builds the same entry or names the same error.
 */
#include "base/values.h"
#include "def/def_memo.h"

/* Blanks trimmed around a shortcut's values (def_entry.c's). */
static bool blank(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int sy__def_shortcut_fast(sy__def_memo *memo, struct sy_route *r, sy__arena *ea,
                          sy__factory_kind kind, const char *text,
                          const char *path, sy__def_entry *e, const char **vals,
                          int *fields, size_t *n, sy_error *err) {
    const char *eq = strchr(text, '=');
    if (!eq)
        return 1;
    const sy__factory_spec *spec =
        sy__def_memo_spec(memo, kind, text, (size_t)(eq - text));
    if (!spec)
        return 1;
    /* the values: split on ',', trimmed, empty ones dropped */
    const char *vs[SY_MEMO_ARGS];
    size_t vl[SY_MEMO_ARGS], m = 0;
    for (const char *p = eq + 1;;) {
        const char *end = strchr(p, ',');
        const char *b = p, *t = end ? end : p + strlen(p);
        while (b < t && blank(*b))
            b++;
        while (t > b && blank(t[-1]))
            t--;
        if (t > b) {
            if (m == SY_MEMO_ARGS || *b == '#') /* many, or maybe SpEL */
                return 1;
            vs[m] = b;
            vl[m++] = (size_t)(t - b);
        }
        if (!end)
            break;
        p = end + 1;
    }
    /* the field of each value (def_entry.c map_args for `_genkey_` keys):
     * in order (DEFAULT), else the first list field's, and for
     * GATHER_LIST_TAIL_FLAG a last value that reads as a boolean the
     * first non-list field's */
    size_t nf = spec->field_count;
    int list = -1, flag = -1;
    if (spec->shortcut == SY_SHORTCUT_DEFAULT) {
        if (m > (spec->shortcut_allowed ? nf : 0))
            return 1;
    } else {
        for (size_t f = 0; f < nf; f++) {
            if (spec->fields[f].list && list < 0)
                list = (int)f;
            if (!spec->fields[f].list && flag < 0)
                flag = (int)f;
        }
        if (list < 0)
            return 1;
        if (spec->shortcut != SY_SHORTCUT_GATHER_LIST_TAIL_FLAG)
            flag = -1;
    }
    /* copied in the text's order (as def_entry.c raw_from_shortcut): past
     * here only an entry that fails goes to the general reading */
    for (size_t k = 0; k < m; k++) {
        if (!(vals[k] = sy__route_strndup(r, vs[k], vl[k])))
            return sy__error_set(err, SY_ENOMEM, path, "out of memory");
        fields[k] = list < 0 ? (int)k : list;
    }
    if (flag >= 0 && m > 0 && sy__value_bool(vals[m - 1], NULL, NULL))
        fields[m - 1] = flag;
    for (size_t f = 0; f < nf; f++) { /* a required field without a value */
        bool found = false;
        for (size_t k = 0; k < m && !found; k++)
            found = fields[k] == (int)f;
        if (spec->fields[f].required && !found)
            return 1;
    }
    /* args: the fields in order, each field's values in the text's */
    e->args = m ? sy__arena_alloc(ea, m * sizeof *e->args) : NULL;
    if (m && !e->args)
        return sy__error_set(err, SY_ENOMEM, path, "out of memory");
    size_t j = 0;
    for (size_t f = 0; f < nf && j < m; f++)
        for (size_t k = 0; k < m; k++)
            if (fields[k] == (int)f)
                e->args[j++] = (sy_kv){spec->fields[f].name, vals[k]};
    sy__def_set_factory(e, spec, NULL);
    e->arg_count = (uint32_t)m;
    *n = m;
    return sy__def_entry_checks(e, path, err) ? 1 : 0;
}
