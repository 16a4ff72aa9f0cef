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

#include "base/factory.h"
#include "base/util.h"

/* A host-registered factory an entry names, and the name as written (in
 * the route's arena). */
typedef struct sy__def_host_ref {
    const void *factory; /* registry entry; NULL: none registered */
    const char *name;
} sy__def_host_ref;

/* One predicate or filter entry after shortcut/field mapping. Args are in
 * canonical order: the factory's fields in shortcut order (list fields
 * repeat the key, values in order), then other keys sorted by name.
 * Defaults are NOT filled in (compilers apply them). 24 bytes an entry
 * (one or more in every route): a built-in's name is its spec's
 * (sy__def_name). */
typedef struct sy__def_entry {
    /* read them with sy__def_spec / sy__def_host / sy__def_name: */
    union {
        const sy__factory_spec *spec; /* built-in (!host) */
        const sy__def_host_ref *ref;  /* host-registered (host) */
    } f;
    sy_kv *args;
    uint32_t arg_count;
    bool host;     /* a host-registered factory */
    bool shortcut; /* written "Name=args": its compile errors are reported
                      at the entry */
} sy__def_entry;

/* The built-in spec of e, or NULL for a host-registered factory. */
static inline const sy__factory_spec *sy__def_spec(const sy__def_entry *e) {
    return e->host ? NULL : e->f.spec;
}
/* The registry entry of a host-registered factory, or NULL. */
static inline const void *sy__def_host(const sy__def_entry *e) {
    return e->host && e->f.ref ? e->f.ref->factory : NULL;
}
/* The factory's name: the spec's for a built-in, else as written ("" when
 * neither is set). */
static inline const char *sy__def_name(const sy__def_entry *e) {
    if (e->host)
        return e->f.ref && e->f.ref->name ? e->f.ref->name : "";
    return e->f.spec ? e->f.spec->name : "";
}
/* Set e's factory: a built-in spec, else (spec NULL) the host's `ref`. */
static inline void sy__def_set_factory(sy__def_entry *e,
                                       const sy__factory_spec *spec,
                                       const sy__def_host_ref *ref) {
    e->host = spec == NULL;
    if (spec)
        e->f.spec = spec;
    else
        e->f.ref = ref;
}

/* First value of `key`, or NULL. */
const char *sy__def_arg(const sy__def_entry *e, const char *key);
/* An argument's key is `key`: most keys are the spec's field names
 * (def_shortcut.c), the very string a caller names when the linker
 * merged the two literals, so the pointers are compared first. */
static inline bool sy__arg_key_is(const char *k, const char *key) {
    return k == key || strcmp(k, key) == 0;
}
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
    /* What the host runs (sy_router_options.host_runs): a route using a
     * host-run item missing from it is refused; NULL: undeclared */
    const char *const *host_runs;
} sy__compile_env;

/* n bytes (rounded up to 8), 8-aligned, for a compiled object of a route:
 * taken from the top of `top` (the route's first chunk, in its block:
 * downwards, below the strings sy__route_text took there, the predicates'
 * texts, and what was taken before) while it has room above its used
 * bottom, else from `arena` (sy__arena_alloc); NULL when out of memory.
 * So a test reads one cluster of lines: the objects and the texts they
 * borrow. Taking from the top never
 * needs more of the chunk than the bottom would: the bottom's end is
 * aligned as it would have been, and the top's padding (its first object
 * only, the rest are multiples of 8) is at most the chunk's slack. */
static inline void *sy__compile_obj(sy__arena_chunk *top, sy__arena *arena,
                                    size_t n) {
    if (n > SY_ARENA_CHUNK_MAX)
        return NULL;
    n = n ? (n + 7u) & ~(size_t)7u : 8;
    if (top && n <= top->size) {
        uint32_t at = (uint32_t)(top->size - n) & ~(uint32_t)7u;
        if (at >= ((top->used + 7u) & ~(uint32_t)7u)) {
            top->size = at;
            return top->data + at;
        }
    }
    return sy__arena_alloc(arena, n);
}

#endif
