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
    char root;                   /* first byte of the top-level value */
    bool has_routes;             /* object root: a "routes" key (first one) */
    const char *default_filters; /* object root: a default-filters key as
                                    spelled (no host runs it), else NULL */
    char routes_first;           /* first byte of that key's value */
    sy__json_span version; /* object root: the "version" value; 0,0: none */
    sy__json_span *routes; /* the route elements, sy__malloc'd */
    size_t route_count;
} sy__json_scan;

/* ---- the checks of one route element's bytes, shared by the scan's fast
 * pass (def_scan.c) and the checked tree parse (def_tree.c) ---- */

/* The end of the run of plain string bytes at p: the first NUL, '"' or
 * '\\' of s[p, len), or len. A word at a time, then byte by byte. */
static inline size_t sy__json_plain_end(const char *s, size_t p, size_t len) {
    static const unsigned char stop[256] = {[0] = 1, ['"'] = 1, ['\\'] = 1};
    const unsigned char *u = (const unsigned char *)s;
    while (p + 8 <= len) {
        uint64_t w = sy__load_u64(s + p);
        uint64_t hit = sy__swar_has_byte(w, '"') | sy__swar_has_byte(w, '\\') |
                       sy__swar_has_below(w, 1);
        if (hit) {
#if SY_SWAR_FIRST_OK
            p += sy__swar_first(hit);
#endif
            break;
        }
        p += 8;
    }
    while (p < len && !stop[u[p]])
        p++;
    return p;
}

/* The string at pos (its opening quote), checked as the scan checks it
 * but for what it leaves to the scan (a \u escape): the position past its
 * closing quote, or 0 (invalid, or a \u escape). A decoded length over
 * max_bytes fails. *escapes (when not NULL): the escapes in it. */
static inline size_t sy__json_string_end(const char *s, size_t pos, size_t len,
                                         size_t max_bytes, size_t *escapes) {
    const unsigned char *u = (const unsigned char *)s;
    size_t p = pos + 1, esc = 0;
    for (;;) {
        p = sy__json_plain_end(s, p, len);
        if (p >= len || !u[p])
            return 0;
        if (u[p] == '"')
            break;
        /* a backslash: the escapes of one byte, not \u */
        if (p + 1 >= len || u[p + 1] == 'u' || u[p + 1] == 0 ||
            !strchr("\"\\/bfnrt", u[p + 1]))
            return 0;
        esc++;
        p += 2;
    }
    if (p - (pos + 1) - esc > max_bytes)
        return 0;
    if (escapes)
        *escapes = esc;
    return p + 1;
}

static inline bool sy__json_digit(char c) {
    return c >= '0' && c <= '9';
}

/* The number at pos, as the scan reads it: the position past it, or 0. */
static inline size_t sy__json_number_end(const char *s, size_t pos,
                                         size_t len) {
    if (s[pos] == '-')
        pos++;
    if (pos >= len || !sy__json_digit(s[pos]))
        return 0;
    if (s[pos] == '0')
        pos++;
    else
        while (pos < len && sy__json_digit(s[pos]))
            pos++;
    if (pos < len && s[pos] == '.') {
        if (++pos >= len || !sy__json_digit(s[pos]))
            return 0;
        while (pos < len && sy__json_digit(s[pos]))
            pos++;
    }
    if (pos < len && (s[pos] == 'e' || s[pos] == 'E')) {
        pos++;
        if (pos < len && (s[pos] == '+' || s[pos] == '-'))
            pos++;
        if (pos >= len || !sy__json_digit(s[pos]))
            return 0;
        while (pos < len && sy__json_digit(s[pos]))
            pos++;
    }
    if (pos < len &&
        (sy__json_digit(s[pos]) || s[pos] == '.' ||
         (s[pos] >= 'a' && s[pos] <= 'z') || (s[pos] >= 'A' && s[pos] <= 'Z')))
        return 0;
    return pos;
}

/* A route element's nesting at most this deep inside the element is checked
 * by the fast pass and the checked tree parse; deeper, the scan reads it. */
#define SY_JSON_FAST_LEVELS 63u

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
 * depth, accepts (accepted before, or checked just now by the same rules:
 * the scan then skips them), or 0 to scan them. *values is 1 (the element)
 * when asked; a hook that read the element sets it to the values counted
 * in it, as the scan counts them. out->routes[0..index] are there (the
 * element's start set, earlier ones complete); the hook may set their
 * hash, hashed and known fields, and the element's end.
 */
typedef struct sy__json_skip {
    size_t (*fn)(void *data, const char *json, size_t len, sy__json_scan *out,
                 size_t index, size_t at, uint32_t depth, size_t *values);
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
