/*
 * def.h - route documents: JSON parsing (cJSON, freed right after),
 * shape and value validation with JSON paths, shortcut-to-field mapping,
 * canonical form and fingerprints, strict and lenient modes. Produces
 * sy_route objects (route.h) and compiles them through route.c.
 */
#ifndef SY_DEF_H
#define SY_DEF_H

#include "route/route.h"

/* What an apply learnt about one element of the routes array: the span
 * of its bytes and the id hash of the route it gave, so the next apply of
 * the source finds that route by its bytes (by position, or through
 * by_bytes' table) without reading the route. span_hash: sy__hash64 of
 * the element's bytes with a seed of SY_ROUTE_SPAN_SEED and the routes
 * array's nesting (def.c span_seed); span_len their length; id_hash the
 * id's sy__idtab_hash (a route shared by bytes is checked for a duplicate
 * id without reading the id, but when another id has the same hash).
 * span_len 0: nothing (an invalid element, a span of 4 GiB or more, or an
 * entry cleared since). The route is the one at that position
 * (sy__def_reuse at_position): the memo is offered only while that holds.
 * The memo is the only record of a route's bytes (routes carry none: 16
 * bytes a route, docs/performance.md round 11); a route not in it (an
 * upsert, an enable/disable copy, the first apply after a rollback) is
 * never found by its bytes, only by its id and fingerprint.
 * 16 bytes an element. */
typedef struct sy__span_memo {
    uint64_t span_hash;
    uint32_t span_len, id_hash;
} sy__span_memo;

struct sy_document {
    sy__alloc alloc;
    uint32_t *positions; /* position in the JSON array of routes[i] */
    /* with sy__def_reuse's at_position: the position of routes[i] in the
     * document before when the parse found it there (by bytes), else
     * UINT32_MAX; NULL without at_position. Such a route is BORROWED: the
     * document holds no reference to it, so the document may be read only
     * while the routes offered to the parse are live (an apply's commit:
     * the router keeps a reference to every live route until a publish
     * retires it, and the commit frees its documents without reading
     * them). */
    uint32_t *prev;
    /* with at_position: entry i describes element i of the routes array
     * (memo_count elements); the caller may take it (and set it NULL) */
    sy__span_memo *memo;
    size_t memo_count;
    bool envelope; /* {"version", "routes"} shape: paths "routes[i]" */
    /* some route may run a Retry or a CircuitBreaker: one that does, or
     * one this parse did not build (shared: not known without reading
     * it). False: the commit's policy check need not read the routes
     * (sy__route_policy_free of each, noted while it was hot) */
    bool policy_some;
    char *version;     /* NULL when the envelope has none */
    uint64_t checksum; /* of the bytes */
    struct sy_route **routes;
    size_t route_count;
    sy_error *issues;
    size_t issue_count;
};

/* A route's fingerprint (route.h), computed here on the first call when
 * its parse left it to the first reader (def_canon.c). */
uint64_t sy__def_route_fp(const struct sy_route *r);

/*
 * Asked for each valid route before it is compiled: a live route with this
 * id and fingerprint to share instead (the document takes a reference), or
 * NULL to compile. Lets an apply compile only added and updated routes.
 */
typedef const struct sy_route *(*sy__def_reuse_fn)(void *data, const char *id,
                                                   uint64_t fingerprint);

/*
 * Asked for each route object of a document before it is parsed: a live
 * route built from the very same bytes (a span of `len` bytes hashing to
 * `hash`, as the memo records them) to share instead, or NULL to parse;
 * *pos gets its position in the document before (SIZE_MAX: unknown).
 * Lets an apply of a large document in which few routes changed cost a
 * hash of its bytes for the others, not a parse and canonical form.
 */
typedef const struct sy_route *(*sy__def_reuse_bytes_fn)(void *data,
                                                         uint64_t hash,
                                                         size_t len,
                                                         size_t *pos);

/*
 * What a parse may share: both functions may be NULL. Only the routes of
 * ONE router may be offered, parsed with that router's options (same
 * registry, limits, strict or lenient mode): then equal bytes mean
 * exactly the same route.
 */
typedef struct sy__def_reuse {
    sy__def_reuse_fn by_fingerprint;
    sy__def_reuse_bytes_fn by_bytes;
    void *data;
    /* Optional, with by_bytes: the live route that was element `pos` of
     * the routes array of the document before, or NULL. With it and the
     * memo the scan guesses that element i is the route the document
     * before held near position i and, when its bytes are that route's
     * span, skips them unread (def.c span_skip). */
    const struct sy_route *(*at_position)(void *data, size_t pos);
    size_t count_hint; /* routes the document before held (0: unknown) */
    /* Optional: the memo of the document before (sy_document.memo). Entry
     * p describes at_position(p)'s route: the caller offers it only while
     * that holds, an entry cleared (span_len 0) for every route replaced or
     * removed since (no other change of the source since: commit_steps.c
     * memo_forget). */
    const sy__span_memo *memo;
    size_t memo_count;
    /* Optional: no live route can be found (a first document): the scan
     * still hashes each element (the memo of the next apply), but looks
     * nothing up. */
    bool none_live;
} sy__def_reuse;

/* sy_document_parse with reuse of already compiled routes (reuse may be
 * NULL). */
int sy__document_parse_reusing(const char *json, size_t len,
                               const sy_parse_options *opts,
                               const sy__def_reuse *reuse, sy_document **out,
                               sy_error *err);

/* Parse JSON text into a cJSON tree under resolved limits and the scan's
 * rules (def_scan.h: syntax with line and column, depth, string lengths,
 * NUL bytes, at most SY_MAX_ROUTE_VALUES values): the route documents'
 * rules, shared with instances documents. The tree's nodes are in `tree`
 * (an arena the caller frees; def_tree.c), or cJSON's own when *own (a
 * number of more than 63 characters: the caller deletes it). */
struct cJSON;
int sy__def_parse_json(sy__arena *tree, const char *json, size_t len,
                       const sy_limits *lim, struct cJSON **out, bool *own,
                       sy_error *err);

/* Which parts (SY_CHANGED_*) of two versions of one route differ:
 * exactly, by their canonical texts (written only when their fields
 * cannot tell; a route keeps no hash of each part). For diff.c. */
unsigned sy__def_route_changes(const struct sy_route *a,
                               const struct sy_route *b);

/* Resolved limits (defaults filled in). */
void sy__limits_resolve(sy_limits *out, const sy_limits *in);

/*
 * Parse one route object (for upserts). `path` prefixes error paths
 * (e.g. "route"). The route is compiled. Returns 0 and *out (refs = 1).
 */
int sy__def_parse_route(const char *json, size_t len,
                        const sy_parse_options *opts, const char *path,
                        struct sy_route **out, sy_error *err);

/*
 * Build a new route equal to `r` but with metadata.status set to
 * "disabled" (enabled = false) or removed (enabled = true); compiled.
 */
int sy__def_route_with_enabled(const struct sy_route *r, bool enabled,
                               const sy_parse_options *opts,
                               struct sy_route **out, sy_error *err);

/* Parse a JSON array of filter entries (router default filters) into a
 * route-less list; used as "default-filters" with path "defaultFilters". */
int sy__def_parse_filters(const char *json, size_t len,
                          const sy_parse_options *opts, struct sy_route **out,
                          sy_error *err);

#endif
