/*
 * pattern.h - Spring PathPattern (route model 4.1) and Ant host patterns
 * with '.' separator: compiling, matching against a pre-split request,
 * captures, and introspection of literal segments for the index.
 */
#ifndef SY_PATTERN_H
#define SY_PATTERN_H

#include "util.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/*
 * A request path split once per request: the raw path "/a/b%2Fc;x=1/"
 * gives segments {"a", "b/c", ""} (decoded, matrix params dropped) and raw
 * {"a", "b%2Fc;x=1", ""}. A path without leading '/' is treated as if it
 * had one. "/" gives one empty segment; "" gives zero segments.
 */
typedef struct sy_segments {
    size_t count;
    size_t cap;
    sy_str *dec; /* decoded, matrix parameters removed */
    sy_str *raw; /* raw slices of the request path */
} sy_segments;

/* Split `path` into segs (arrays grown from `alloc` only when cap is too
 * small); decoded bytes are written to `scratch` (from the arena). Returns
 * false on allocation failure. Invalid %-escapes are kept as they are. */
bool sy_segments_split(sy_segments *segs, sy_str path, sy_arena *scratch,
                       const sy_alloc *alloc);
void sy_segments_free(sy_segments *segs, const sy_alloc *alloc);

/* Host names split on '.' (raw, no decoding), same struct. */
bool sy_segments_split_host(sy_segments *segs, sy_str host,
                            const sy_alloc *alloc);

/* A captured variable: name (from the pattern) and value (decoded). */
typedef struct sy_capture {
    sy_str name;
    sy_str value;
} sy_capture;

typedef struct sy_pattern sy_pattern;

/* Compile a PathPattern. On error: SY_EPATTERN (or SY_EREGEX for a bad
 * {name:regex}), err->offset = byte offset in `src`, err->path empty. */
int sy_pattern_compile_path(const sy_alloc *a, const char *src,
                            sy_pattern **out, sy_error *err);
/* Compile an Ant host pattern ('.' separator, '*', '?', '**', {var},
 * {var:regex}). Same errors. */
int sy_pattern_compile_host(const sy_alloc *a, const char *src,
                            sy_pattern **out, sy_error *err);
void sy_pattern_free(sy_pattern *p);

/* Largest number of capture groups of any regex in the pattern + 1 and of
 * captures, so the caller can size match data and capture arrays. */
uint32_t sy_pattern_max_groups(const sy_pattern *p);
uint32_t sy_pattern_var_count(const sy_pattern *p);

/*
 * Match a path pattern against split segments. On success appends the
 * pattern's captures at caps[*ncaps...] (capacity: var_count), writing
 * joined values ({*x}) into `scratch`, and returns true. `md` is match
 * data large enough for sy_pattern_max_groups(). Never allocates except
 * from `scratch`. caps == NULL: match without capturing (ncaps untouched).
 * On failure *ncaps is unchanged. md may be NULL only for patterns without
 * regex segments (a regex segment then never matches).
 */
bool sy_pattern_match_path(const sy_pattern *p, const sy_segments *segs,
                           bool match_trailing_slash, sy_capture *caps,
                           size_t *ncaps, pcre2_match_data *md,
                           sy_arena *scratch);
/* Match a host pattern against the host split on '.'. */
bool sy_pattern_match_host(const sy_pattern *p, const sy_segments *labels,
                           sy_capture *caps, size_t *ncaps,
                           pcre2_match_data *md);

/*
 * A standalone regex that must match a whole value (Header, Query, Cookie):
 * compiled anchored at both ends, JIT-compiled, with a match limit, all
 * memory from `a`. On error SY_EREGEX, err->offset = offset in `src` and
 * PCRE2's message, err->path empty. Matching is read-only: any number of
 * threads at once, each with its own match data.
 */
typedef struct sy_regex sy_regex;

/*
 * A cache of compiled whole-value regexes for one document parse: the same
 * pattern text used by many routes (a Header regex in 30,000 routes) is
 * compiled and JIT-compiled once and shared. Compiled regexes are
 * refcounted and immutable, so routes may outlive the cache.
 */
typedef struct sy_regex_cache sy_regex_cache;
sy_regex_cache *sy_regex_cache_new(const sy_alloc *a);
void sy_regex_cache_free(sy_regex_cache *c);
/* sy_regex_compile through `cache` (may be NULL). */
int sy_regex_compile_cached(sy_regex_cache *cache, const sy_alloc *a,
                            const char *src, sy_regex **out, sy_error *err);
int sy_regex_compile(const sy_alloc *a, const char *src, sy_regex **out,
                     sy_error *err);
void sy_regex_free(sy_regex *re);
/* Capture groups + 1 (the size of match data it needs to report groups). */
uint32_t sy_regex_groups(const sy_regex *re);
/* True when s[0..n) matches as a whole. md: any match data (NULL: false). */
bool sy_regex_full_match(const sy_regex *re, const char *s, size_t n,
                         pcre2_match_data *md);

/* Introspection for the index. */
typedef enum sy_seg_kind {
    SY_SEG_LITERAL = 0, /* plain text, compare with sy_pattern_literal */
    SY_SEG_SINGLE = 1,  /* matches exactly one segment (*, ?, {x}, regex) */
    SY_SEG_MULTI = 2    /* ** or {*x}: zero or more segments */
} sy_seg_kind;
size_t sy_pattern_segment_count(const sy_pattern *p);
sy_seg_kind sy_pattern_segment_kind(const sy_pattern *p, size_t i);
sy_str sy_pattern_literal(const sy_pattern *p, size_t i);
/* Segment i is a plain "{name}" (any one non-empty segment or label,
 * captured whole, as decoded): its name; anything else gives {NULL, 0}.
 * The index relies on exactly this to prove such a pattern by its walk and
 * take the captures itself. */
sy_str sy_pattern_segment_var(const sy_pattern *p, size_t i);
/* Segment i is a plain "*": any one non-empty segment or label, and the
 * empty one too when it is the pattern's last segment. */
bool sy_pattern_segment_is_star(const sy_pattern *p, size_t i);
const char *sy_pattern_source(const sy_pattern *p);

#endif
