/*
 * compile_env.h - what every compiler reads, below route, predicate and
 * filter: one definition entry after shortcut/field mapping, the lookups of
 * its arguments (with the factory's defaults), and the environment a
 * predicate or filter is compiled in. The layering reads
 *
 *   parse (def*) -> compile (pattern, predicate, filter) -> route
 *     -> index / snapshot -> router
 *
 * and this header sits under the compile step, so predicate.c and filter.c
 * need nothing from route.c.
 */
#ifndef SY_COMPILE_ENV_H
#define SY_COMPILE_ENV_H

#include "factory.h"
#include "util.h"

/* One predicate or filter entry after shortcut/field mapping. Args are in
 * canonical order: the factory's fields in shortcut order (list fields
 * repeat the key, values in order), then other keys sorted by name.
 * Defaults are NOT filled in (compilers apply them). */
typedef struct sy__def_entry {
    const char *name;
    const sy__factory_spec *spec; /* built-in spec, or NULL */
    const void *host_factory;     /* registry entry when spec == NULL */
    sy_kv *args;
    uint32_t arg_count; /* 40 bytes an entry: one or more in every route */
} sy__def_entry;

/* First value of `key`, or NULL. */
const char *sy__def_arg(const sy__def_entry *e, const char *key);
/* The value of `key`, or the field's default from the spec, or NULL. */
const char *sy__def_arg_or_default(const sy__def_entry *e, const char *key);

/* Environment for compiling predicates and filters. `alloc` must live as
 * long as the compiled objects: pass the route's own r->alloc. */
struct sy__regex_cache;
typedef struct sy__compile_env {
    const sy__alloc *alloc;
    const sy_registry *registry;         /* may be NULL */
    struct sy__regex_cache *regex_cache; /* shares regexes; may be NULL */
    /* The route's arena, for the compiled objects themselves (a predicate
     * and its pattern list, a filter): they live exactly as long as the
     * route. NULL: they are allocated with `alloc`. */
    sy__arena *arena;
} sy__compile_env;

#endif
