/* filter.c - placeholder: compiles nothing until the module lands. */
#include "filter.h"

int sy_filter_compile(const sy_def_entry *e, const sy_compile_env *env,
                      const char *path, sy_filter **out, sy_error *err) {
    SY_UNUSED(e);
    SY_UNUSED(env);
    SY_UNUSED(path);
    SY_UNUSED(err);
    *out = NULL;
    return 0;
}

void sy_filter_free(sy_filter *f, const sy_alloc *a) {
    SY_UNUSED(f);
    SY_UNUSED(a);
}
