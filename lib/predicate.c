/* predicate.c - placeholder: compiles nothing until the module lands. */
#include "predicate.h"

int sy_pred_compile(const sy_def_entry *e, const sy_compile_env *env,
                    const char *path, sy_pred **out, sy_error *err) {
    SY_UNUSED(e);
    SY_UNUSED(env);
    SY_UNUSED(path);
    SY_UNUSED(err);
    *out = NULL;
    return 0;
}

void sy_pred_free(sy_pred *p, const sy_alloc *a) {
    SY_UNUSED(p);
    SY_UNUSED(a);
}
