/*
 * route.h - the compiled route: its definition (id, uri, order, metadata,
 * predicate and filter entries with mapped args, canonical form and
 * fingerprints) and its compiled predicates and filters. A route is
 * immutable once built and refcounted, so consecutive snapshots share it.
 * All its strings live in its own arena.
 */
#ifndef SY_ROUTE_H
#define SY_ROUTE_H

#include "factory.h"
#include "util.h"

struct sy_pred;
struct sy_filter;

/* One predicate or filter entry after shortcut/field mapping. Args are in
 * canonical order: the factory's fields in shortcut order (list fields
 * repeat the key, values in order), then other keys sorted by name.
 * Defaults are NOT filled in (compilers apply them). */
typedef struct sy_def_entry {
    const char *name;
    const sy_factory_spec *spec; /* built-in spec, or NULL */
    const void *host_factory;    /* registry entry when spec == NULL */
    sy_kv *args;
    size_t arg_count;
} sy_def_entry;

/* First value of `key`, or NULL. */
const char *sy_def_arg(const sy_def_entry *e, const char *key);
/* The value of `key`, or the field's default from the spec, or NULL. */
const char *sy_def_arg_or_default(const sy_def_entry *e, const char *key);

struct sy_route {
    _Atomic long refs;
    const sy_alloc *alloc;
    sy_arena arena; /* every string and array below */

    const char *id;
    const char *uri;
    int32_t order;
    bool disabled; /* metadata.status == "disabled" */
    sy_upstream upstream;

    sy_def_entry *predicates;
    size_t predicate_count;
    sy_def_entry *filters;
    size_t filter_count;
    sy_kv *metadata; /* sorted by key; values JSON text unless strings */
    size_t metadata_count;

    const char *canonical; /* canonical JSON (fingerprinted) */
    uint64_t fingerprint;  /* of the whole canonical form */
    uint64_t fp_predicates, fp_filters, fp_uri, fp_metadata; /* for diffs */
    uint32_t doc_index; /* position in the document that built it (ranks
                           come from the snapshot slot key, not this) */
    /* index of the first Path (Host) predicate when every one of its
     * patterns is all literal segments (labels): the index can prove it */
    int32_t literal_path, literal_host;

    /* instance selection settings read from the metadata once, at compile
     * (version-header, version-fallback, lb-policy, lb-hash-header,
     * lb-hash-cookie, lb-zone); strings point into the metadata */
    struct {
        const char *version_header;                   /* "version" unless set */
        const char *hash_header, *hash_cookie, *zone; /* or NULL */
        int fallback, policy; /* sy_version_fallback, sy_lb_policy */
        bool websocket;       /* lb:ws:// */
    } select;

    /* compiled, parallel to predicates[] / filters[] */
    struct sy_pred **cpreds;
    struct sy_filter **cfilters;
};

/* Environment for compiling predicates and filters. `alloc` must live as
 * long as the compiled objects: pass the route's own r->alloc. */
struct sy_regex_cache;
typedef struct sy_compile_env {
    const sy_alloc *alloc;
    const sy_registry *registry;        /* may be NULL */
    struct sy_regex_cache *regex_cache; /* shares regexes; may be NULL */
} sy_compile_env;

/*
 * Compile every predicate and filter of `r` (sets cpreds / cfilters).
 * `path` is the route's JSON path ("routes[3]"); errors get
 * "<path>.predicates[i].args.<field>" and the offset in the pattern.
 */
int sy_route_compile(struct sy_route *r, const sy_compile_env *env,
                     const char *path, sy_error *err);

/* A new empty route (refs = 1) that owns a copy of `alloc` and an arena
 * built on it; NULL when out of memory. */
struct sy_route *sy_route_new(const sy_alloc *alloc);
struct sy_route *sy_route_ref(const struct sy_route *r);
void sy_route_unref(struct sy_route *r); /* frees at zero */

#endif
