/*
 * compile_env.c - argument lookups on a definition entry, shared by the
 * predicate and filter compilers (see compile_env.h).
 */
#include "route/compile_env.h"

const char *sy__def_arg(const sy__def_entry *e, const char *key) {
    if (!e || !key)
        return NULL;
    for (size_t i = 0; i < e->arg_count; i++)
        if (sy__arg_key_is(e->args[i].key, key))
            return e->args[i].value;
    return NULL;
}

const char *sy__def_arg_or_default(const sy__def_entry *e, const char *key) {
    const char *v = sy__def_arg(e, key);
    if (v || !e || !sy__def_spec(e))
        return v;
    const sy__field_spec *f = sy__factory_field(sy__def_spec(e), key);
    return f ? f->dflt : NULL;
}
