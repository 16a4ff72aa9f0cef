/*
 * def_build.h - internals shared by the document modules: def.c (document
 * level), def_route.c (one route object: fields, entries, argument mapping
 * and validation) and def_canon.c (canonical form, fingerprints, copies).
 */
#ifndef SY_DEF_BUILD_H
#define SY_DEF_BUILD_H

#include "def/def.h"

#include <cJSON.h>

/* cJSON_IsString, cJSON_IsArray, ... inline, as cJSON reads them (the
 * low byte of type; NULL is none): every entry of a document asks, and
 * cJSON's own are calls into the shared library. The named forms are
 * cJSON_IsString's, cJSON_IsArray's, ... (not cJSON_IsBool's: two bits). */
static inline bool sy__def_is(const cJSON *c, int type) {
    return c && (c->type & 0xFF) == type;
}
static inline bool sy__def_is_string(const cJSON *c) {
    return sy__def_is(c, cJSON_String);
}
static inline bool sy__def_is_array(const cJSON *c) {
    return sy__def_is(c, cJSON_Array);
}
static inline bool sy__def_is_object(const cJSON *c) {
    return sy__def_is(c, cJSON_Object);
}
static inline bool sy__def_is_null(const cJSON *c) {
    return sy__def_is(c, cJSON_NULL);
}
static inline bool sy__def_is_number(const cJSON *c) {
    return sy__def_is(c, cJSON_Number);
}

/* What building a route needs from the caller. */
typedef struct sy__def_ctx {
    const sy__alloc *alloc;
    const sy_registry *registry;
    sy__def_reuse_fn reuse; /* may be NULL */
    void *reuse_data;
    struct sy__regex_cache *regex_cache; /* may be NULL */
    sy__buf *scratch; /* canonical forms, reused route to route; may be NULL */
    size_t text_len;  /* bytes of the route's JSON text; 0: unknown */
    const char *const *host_runs; /* what the host runs; NULL: undeclared */
    struct sy__def_memo *memo;    /* entries seen before (def_memo.h); NULL */
} sy__def_ctx;

/*
 * Build, canonicalise and compile one route from its JSON object. `path`
 * names the route ("routes[3]", "[3]", "route"). Returns 0 and *out
 * (refs = 1), or a negative code with err filled.
 */
int sy__def_build_route(const sy__def_ctx *ctx, const cJSON *obj,
                        const char *path, struct sy_route **out, sy_error *err);

/*
 * Parse an array of predicate or filter entries into r. Entry i is named
 * "<path>[i]"; its `shortcut` says whether it was a shortcut string.
 * ea: where predicate entries and their argument arrays (not their texts)
 * go: NULL, r's arena; else an arena the caller frees, for a route that
 * keeps no entries (def_route.c).
 * path NULL: the errors are unnamed (path ""), for a caller that builds
 * the entries again with their path when they fail (building is
 * deterministic; the first try's allocations stay in r's arena or ea).
 */
int sy__def_build_entries_in(const sy__def_ctx *ctx, struct sy_route *r,
                             sy__arena *ea, sy__factory_kind kind,
                             const cJSON *arr, const char *path, sy_error *err);

/*
 * A built-in's shortcut entry "Name=v1,v2" read the common way
 * (def_shortcut.c; memo: the parse's, or NULL): 0 and e built, with its
 * values vals[k] (text order)
 * and their fields fields[k] (*n of them); 1: not this way (the general
 * reading of def_entry.c builds it, and says what fails); < 0: out of
 * memory. `path` names errors.
 */
struct sy__def_memo;
int sy__def_shortcut_fast(struct sy__def_memo *memo, struct sy_route *r,
                          sy__arena *ea, sy__factory_kind kind,
                          const char *text, const char *path, sy__def_entry *e,
                          const char **vals, int *fields, size_t *n,
                          sy_error *err);
/* Where an entry's errors are named (def_check.c): a shortcut's at the
 * entry, an object's at the argument ("<path>.args.<key>"). */
typedef struct sy__entry_ctx {
    const char *path; /* entry path */
    bool shortcut;
    const char *name;
    const sy__factory_spec *spec; /* the built-in named, once looked up */
} sy__entry_ctx;
int sy__def_arg_error(const sy__entry_ctx *ec, int code, const char *key,
                      const char *reason, sy_error *err);
/* One value checked by its field's type. */
int sy__def_check_value(const sy__field_spec *f, const sy__entry_ctx *ec,
                        const char *v, sy_error *err);
/* The cross-field rules of particular factories. */
int sy__def_check_rules(const sy__def_entry *e, const sy__entry_ctx *ec,
                        sy_error *err);
/* The checks of a built-in's shortcut entry whose args are mapped: each
 * value by its field's type, then the factory's rules. */
int sy__def_entry_checks(const sy__def_entry *e, const char *path,
                         sy_error *err);

/*
 * After a compile error on entry i of a shortcut string, move the error
 * to the entry's path and name the field in the message.
 */
void sy__def_shortcut_error(sy_error *err, const char *entry_path);

/* Set r->metadata from the route's "metadata" object (NULL: none): sorted
 * by key, the last of repeated keys kept, non-string values as JSON text;
 * checks the timeout keys and that selection keys are strings (their
 * values are checked by sy__route_check_select). */
int sy__def_build_metadata(struct sy_route *r, const cJSON *md,
                           const char *path, const sy__alloc *a, sy_error *err);
/* r's metadata "status" set to "disabled" (enabled false) or dropped
 * (enabled true), the other keys kept in order, and r->disabled to match;
 * false: out of memory (r unchanged). */
bool sy__def_set_status(struct sy_route *r, bool enabled);
/* The route object's "enabled" (SCG 4.2's RouteDefinition.enabled; NULL:
 * absent): false disables the route as metadata.status "disabled" does
 * (and is that in its canonical form); not a boolean, or contradicting an
 * explicit metadata.status, is an error at PATH.enabled. After the
 * metadata is built. */
int sy__def_build_enabled(struct sy_route *r, const cJSON *en, const char *path,
                          sy_error *err);

/*
 * Every error of a route whose build failed with `first` (lenient parses):
 * builds each part of the route object alone (id, uri, order, each
 * predicate, each filter, metadata) and collects its errors, with paths
 * in the whole route. Writes up to `max` errors to out[] in route order,
 * `first` among them; returns how many. Lives in def_probe.c.
 */
#define SY_DEF_ROUTE_ERRORS_MAX 32
size_t sy__def_route_errors(const sy__def_ctx *ctx, const cJSON *obj,
                            const char *path, const sy_error *first,
                            sy_error *out, size_t max);

/* Set r's fingerprint from its fields (the canonical form is written,
 * hashed and not kept: sy_route_canonical builds it again when asked).
 * SY_ENOMEM. The fingerprint lies over the header of the arena's first
 * chunk (route.h): call it once r's arena allocates no more. The _into
 * form only computes it, into *fingerprint, writing into `scratch`
 * (reused from route to route; its text is the canonical form until the
 * next call). */
int sy__def_canonicalize(struct sy_route *r);
int sy__def_canonicalize_into(const struct sy_route *r, sy__buf *scratch,
                              uint64_t *fingerprint);
/* The _into form for a route just built with ctx->memo (NULL: none): its
 * entries the memo holds are copied from it, and the text of those it
 * took in is kept there. */
int sy__def_canonicalize_memo(const struct sy_route *r, sy__buf *scratch,
                              struct sy__def_memo *memo, uint64_t *fingerprint);

/* A deep copy of r's definition (not compiled, no canonical form). */
struct sy_route *sy__def_clone(const struct sy_route *r);

/* Sort kv pairs by key with strcmp, keeping equal keys in order. */
bool sy__def_sort_kv(const sy__alloc *a, sy_kv *kv, size_t n);

/* JSON number as argument text: integers without fraction, others %.17g. */
void sy__def_number_text(double v, char *buf, size_t size);

/*
 * The cJSON tree of the JSON value in json[start, end), text that
 * sy__json_scan_text accepted, with every node and string in `ar`
 * (def_tree.c): read it with cJSON's calls, never cJSON_Delete it; it lives
 * until the arena is reset. Returns 0, SY_ENOMEM, or SY_DEF_TREE_CJSON
 * when the text holds what only cJSON's own parse reads as it does (a
 * number of more than 63 characters): then parse it with cJSON.
 */
#define SY_DEF_TREE_CJSON 1
int sy__def_tree_parse(sy__arena *ar, const char *json, size_t start,
                       size_t end, cJSON **out);

/*
 * sy__def_tree_parse for a route element the scan has not read: the
 * element at json[start] (its '{'; json is len bytes), nested in `depth`
 * levels, checked as the scan's fast pass checks one (def_scan.h: the
 * grammar, string bytes up to max_bytes, nesting up to max_depth, values
 * counted from *values up to SY_MAX_ROUTE_VALUES) while its tree is built
 * in `ar`. Returns 0 with *end past its closing brace and *values the
 * count, or non-zero: invalid, or something the fast pass leaves to the
 * scan (a \u escape, a long number, out of memory); *out is then NULL
 * and the arena's use so far is garbage to reset.
 */
typedef struct sy__def_tree_check {
    size_t max_bytes;
    uint32_t depth, max_depth;
    size_t *values; /* in and out */
} sy__def_tree_check;
int sy__def_tree_parse_checked(sy__arena *ar, const char *json, size_t start,
                               size_t len, const sy__def_tree_check *chk,
                               size_t *end, cJSON **out);

/* snprintf for JSON paths: truncation is accepted silently. */
#define sy__def_path sy__path_printf

/* The host's host_runs list of parse options (NULL when the options
 * are older than the field, or it is not set). */
const char *const *sy__def_host_runs(const sy_parse_options *o);

/* def_json.c: the cJSON parse of json[start, end), which def_scan.c
 * accepted (a failure is SY_ENOMEM, never a syntax error); and its tree in
 * `tree` (def_tree.c), or cJSON's own where def_tree.c leaves the text to
 * cJSON (*own set: the caller deletes *out). */
int sy__def_parse_scanned(const char *json, size_t start, size_t end,
                          cJSON **out, sy_error *err);
int sy__def_parse_tree(sy__arena *tree, const char *json, size_t start,
                       size_t end, cJSON **out, bool *own, sy_error *err);

#endif
