/*
 * def_scan.h - one pass over a document's JSON text before any tree is
 * built (def_scan.c): strict syntax, nesting depth, string lengths, NUL
 * bytes, the number of values per route and the number of routes, each
 * violation located (JSON path, line, column, offset). It also finds where
 * each route of the routes array starts and ends, so def.c can build the
 * cJSON tree of one route at a time: peak memory stays near the document
 * size plus one route's tree, whatever the document holds.
 */
#ifndef SY_DEF_SCAN_H
#define SY_DEF_SCAN_H

#include "base/util.h"

/* At most this many JSON values (scalars, arrays, objects) in one route,
 * one default-filters array or one single-route text: caps one cJSON
 * tree at a few MiB. */
#define SY_MAX_ROUTE_VALUES 65536u

/* cJSON's own nesting limit (CJSON_NESTING_LIMIT): the scan never lets a
 * deeper document through, whatever max_depth says. */
#define SY_JSON_MAX_DEPTH 1000u

typedef struct sy__json_span {
    size_t start, end; /* byte offsets, end exclusive */
    /* Left zero by the scan, for its skip hook (below) and the caller:
     * a hash of the span's bytes (hashed: set), and what the hook knew the
     * span to be (known: non-NULL when the hook skipped it). */
    uint64_t hash;
    const void *known;
    size_t aux; /* the hook's own note about `known` */
    bool hashed;
} sy__json_span;

typedef struct sy__json_scan {
    char root;             /* first byte of the top-level value */
    bool has_routes;       /* object root: a "routes" key (first one) */
    const char *default_filters; /* object root: a default-filters key as
                                    spelled (no host runs it), else NULL */
    char routes_first;     /* first byte of that key's value */
    sy__json_span version; /* object root: the "version" value; 0,0: none */
    sy__json_span *routes; /* the route elements, sy__malloc'd */
    size_t route_count;
} sy__json_scan;

/*
 * Scan `json`. With `routes` true the routes array (the root array, or the
 * root object's "routes") is split into spans, at most lim->max_routes of
 * them, each of at most SY_MAX_ROUTE_VALUES values; with `routes` false
 * the whole text may hold at most SY_MAX_ROUTE_VALUES values. A string
 * holding a NUL byte (raw or \u0000) is an error. Returns 0, or SY_ESYNTAX
 * / SY_ELIMIT / SY_EARG / SY_ENOMEM with err located. Free out->routes with
 * sy__free(a, ...) in both cases.
 */
int sy__json_scan_text(const sy__alloc *a, const char *json, size_t len,
                       const sy_limits *lim, bool routes, sy__json_scan *out,
                       sy_error *err);

/*
 * Asked at the first byte of each element of the routes array (at byte
 * `at` of `json`, element `index`, the array's frame at nesting `depth`:
 * 1 for a root array, 2 in an envelope), when that byte is '{': the length
 * of the element's text if the caller knows those very bytes to be one
 * whole JSON value that this scan, under the same limits and at the same
 * depth, accepted before (the scan then skips them), or 0 to scan them.
 * out->routes[0..index] are there (the element's start set, earlier ones
 * complete); the hook may set their hash, hashed and known fields.
 */
typedef struct sy__json_skip {
    size_t (*fn)(void *data, const char *json, size_t len, sy__json_scan *out,
                 size_t index, size_t at, uint32_t depth);
    void *data;
    size_t expect; /* routes the caller expects (room made at once) */
} sy__json_skip;

/* sy__json_scan_text with `routes` true and a skip hook (may be NULL). */
int sy__json_scan_routes(const sy__alloc *a, const char *json, size_t len,
                         const sy_limits *lim, const sy__json_skip *skip,
                         sy__json_scan *out, sy_error *err);

/* Fill err's line, column and offset for byte `off` of `json`. */
void sy__json_locate(const char *json, size_t len, size_t off, sy_error *err);

#endif
