/*
 * pattern.h - Spring PathPattern (route model 4.1) and Ant host patterns
 * (AntPathMatcher with '.' separator, as SCG's Host predicate): compiling,
 * matching against a pre-split request, captures, and introspection of
 * literal segments for the index.
 */
#ifndef SY_PATTERN_H
#define SY_PATTERN_H

#include "base/regex.h"

/*
 * A request path split once per request: the raw path "/a/b%2Fc;x=1/"
 * gives segments {"a", "b/c", ""} (decoded, matrix params dropped) and raw
 * {"a", "b%2Fc;x=1", ""}. A path without leading '/' is treated as if it
 * had one. "/" gives one empty segment; "" gives zero segments.
 */
typedef struct sy__segments {
    size_t count;
    size_t cap;
    sy_str *dec; /* decoded, matrix parameters removed */
    sy_str *raw; /* raw slices of the request path (dec itself when no
                  * segment needed decoding: one allocation holds both) */
    bool lead;   /* host: starts with '.'; dec[0] is then a virtual "" */
    /* path, set by the caller before splitting: %2F and %5C stay encoded
     * in dec (SY_SLASHES_KEEP), so no capture turns them into separators */
    bool keep_escaped_slashes;
    bool trail; /* host: ends with '.'; dec[count - 1] is a virtual "" */
    /* path: when every segment is a plain slice (no '%', no ';') of one
     * rooted path, that path: "/" + dec[0] + "/" + dec[1] ... exactly, so
     * a literal can be compared with it in one go; else ptr is NULL */
    sy_str flat;
} sy__segments;

/* Split `path` into segs (arrays grown from `alloc` only when cap is too
 * small); decoded bytes are written to `scratch` (from the arena). Returns
 * false on allocation failure. Invalid %-escapes are kept as they are. */
bool sy__segments_split(sy__segments *segs, sy_str path, sy__arena *scratch,
                        const sy__alloc *alloc);
void sy__segments_free(sy__segments *segs, const sy__alloc *alloc);

/* What sy__segments_split_scan saw in the path: a '.' starting a segment
 * (the path's first byte or one after a '/': a possible dot segment; a
 * '.' inside a segment, "index.html", is no business of the normaliser),
 * a '%', a ';'; a path that is empty or does not start with '/'
 * (UNROOTED); a segment that may be empty (EMPTY: clear only when no
 * decoded segment is empty, "//", a trailing '/'); ALWAYS is always set
 * (so one mask can also say "normalise whatever the path holds"). */
enum {
    SY_SEEN_DOT = 1,
    SY_SEEN_PCT = 2,
    SY_SEEN_SEMI = 4,
    SY_SEEN_UNROOTED = 8,
    SY_SEEN_EMPTY = 16,
    SY_SEEN_ALWAYS = 32
};

/* sy__segments_split, and in the same pass over the path's bytes the
 * SY_SEEN_* bits of what it holds (so the caller can tell that
 * the path normaliser has nothing to do without scanning it again). */
bool sy__segments_split_scan(sy__segments *segs, sy_str path,
                             sy__arena *scratch, const sy__alloc *alloc,
                             unsigned *seen);

/* Host names split as AntPathMatcher tokenizes them: on '.', raw, empty
 * labels dropped; a leading '.' adds one empty first label and a trailing
 * '.' one empty last label (lead, trail), so "..a.b." gives {"", "a", "b",
 * ""} and "a..b" gives {"a", "b"}. */
bool sy__segments_split_host(sy__segments *segs, sy_str host,
                             const sy__alloc *alloc);

/* A captured variable: name (from the pattern) and value (decoded). */
typedef struct sy__capture {
    sy_str name;
    sy_str value;
} sy__capture;

typedef struct sy__pattern sy__pattern;

/* Compile a PathPattern as Spring's parser does (variable names are Java
 * identifiers, '-' allowed after the first character; a '{' never spans a
 * '/'; {name:regex} compiled with DOTALL and without capturing groups).
 * On error: SY_EPATTERN (or SY_EREGEX for a bad {name:regex}),
 * err->offset = byte offset in `src`, err->path empty. */
int sy__pattern_compile_path(const sy__alloc *a, const char *src,
                             sy__pattern **out, sy_error *err);
/* Compile an Ant host pattern ('.' separator, '*', '?', any number of
 * '**', {var}, {var:regex}; empty labels skipped). Errors: a bad regex
 * (SY_EREGEX), capturing groups in a regex or {*name} (SY_EPATTERN). */
int sy__pattern_compile_host(const sy__alloc *a, const char *src,
                             sy__pattern **out, sy_error *err);
/* Either compile, with the pattern placed in `ar` (a route's arena: it
 * must outlive the pattern, and so must `a`, which allocates its regexes,
 * and `src`, which the pattern keeps) instead of a block of its own; ar
 * NULL: as the two above. */
int sy__pattern_compile_in(const sy__alloc *a, sy__arena *ar, const char *src,
                           bool host, sy__pattern **out, sy_error *err);
/* The same, the pattern taken from the top of `top` while it has room
 * (sy__compile_obj: a route's first chunk, next to its texts), else from
 * `ar` (not NULL). */
int sy__pattern_compile_at(const sy__alloc *a, sy__arena *ar,
                           sy__arena_chunk *top, const char *src, bool host,
                           sy__pattern **out, sy_error *err);
/* The pieces of s[0, len) (split at `sep` and, with `commas`, at ','
 * too) that may compile to a regex: those with a glob character ('{',
 * '}', '*', '?') other than "*", "**", "{name}" and "{*name}". At least
 * the number of patterns of a list that make a regex. `globs`: how many
 * glob characters s holds (SIZE_MAX: not known); the scan stops once it
 * has met them all, and it runs from the end for a path ('/': its globs
 * are mostly in its last segments), from the start for a host. */
size_t sy__pattern_regex_pieces(const char *s, size_t len, char sep,
                                bool commas, size_t globs);
/* What sy__pattern_compile_in takes from an arena at most, alignment
 * included, for `npatterns` patterns whose texts hold `nsep` separators
 * ('/' for paths, '.' for hosts), `nbrace` '{' and `nregex` pieces that
 * may make a regex (sy__pattern_regex_pieces) in all, `rooted` of them
 * paths that start with '/': for sizing the arena. */
size_t sy__pattern_bytes_max(size_t npatterns, size_t rooted, size_t nsep,
                             size_t nbrace, size_t nregex, bool host);
/* Frees its regexes, and its memory unless an arena holds it. */
void sy__pattern_free(sy__pattern *p);
/* Most variables in one pattern (a predicate's count of them is 16-bit):
 * one more is an error at its segment. */
#define SY_PATTERN_VARS_MAX ((uint32_t)UINT16_MAX)
/* Longest pattern text compiled (offsets are 32-bit). */
#define SY_PATTERN_MAX ((size_t)UINT32_MAX / 2)

/* Largest number of capture groups of any regex in the pattern + 1 and of
 * captures, so the caller can size match data and capture arrays. */
uint32_t sy__pattern_max_groups(const sy__pattern *p);
uint32_t sy__pattern_var_count(const sy__pattern *p);

/*
 * Match a path pattern against split segments. On success appends the
 * pattern's captures at caps[*ncaps...] (capacity: var_count), writing
 * joined values ({*x}) into `scratch`, and returns true. `md` is match
 * data large enough for sy__pattern_max_groups(). Never allocates except
 * from `scratch`. caps == NULL: match without capturing (ncaps untouched).
 * On failure *ncaps is unchanged. md may be NULL only for patterns without
 * regex segments (a regex segment then never matches).
 */
bool sy__pattern_match_path(const sy__pattern *p, const sy__segments *segs,
                            bool match_trailing_slash, sy__capture *caps,
                            size_t *ncaps, pcre2_match_data *md,
                            sy__arena *scratch);
/* Match a host pattern against the host split by split_host, as
 * AntPathMatcher.match does (labels in order, several **, the leading and
 * trailing '.' compared as Ant does). Captures: every variable, in Ant's
 * order; a repeated name is captured again (the last one wins). */
bool sy__pattern_match_host(const sy__pattern *p, const sy__segments *labels,
                            sy__capture *caps, size_t *ncaps,
                            pcre2_match_data *md);

/* Introspection for the index. A host pattern reports its labels with
 * the virtual empty first/last labels split_host gives a request that
 * starts/ends with '.' (none after a last "**", which Ant lets match any
 * end). */
/* False for a path pattern that can match no request path: one without a
 * leading '/' (Spring's "foo" never matches "/foo") that does not start
 * with ** or {*name}. */
bool sy__pattern_can_match(const sy__pattern *p);
typedef enum sy__seg_kind {
    SY_SEG_LITERAL = 0, /* plain text, compare with sy__pattern_literal */
    SY_SEG_SINGLE = 1,  /* matches exactly one segment (*, ?, {x}, regex) */
    SY_SEG_MULTI = 2,   /* ** or {*x}: zero or more segments */
    /* not one segment, and not proven by the index's walk either: anything
     * may follow, the pattern must still be tested. A last path regex
     * without variables (Spring lets it take the separators that end the
     * path: "/" + "****" matches "///"), and a host's virtual last label
     * after a last "*" (Ant lets that "*" stand for nothing when the host
     * ends with '.'). */
    SY_SEG_REST = 3
} sy__seg_kind;
size_t sy__pattern_segment_count(const sy__pattern *p);
sy__seg_kind sy__pattern_segment_kind(const sy__pattern *p, size_t i);
sy_str sy__pattern_literal(const sy__pattern *p, size_t i);
/* sy__pattern_segment_kind of segment i and, for SY_SEG_LITERAL only,
 * its sy__pattern_literal in *lit: the index's walks ask both of each
 * segment (one call instead of two). */
sy__seg_kind sy__pattern_segment(const sy__pattern *p, size_t i, sy_str *lit);
/* Segment i is a plain "{name}" (any one non-empty segment or label,
 * captured whole, as decoded): its name; anything else gives {NULL, 0}, so
 * does a host variable whose name the pattern uses twice (which value
 * wins then follows Ant's matching order, not the label order).
 * The index relies on exactly this to prove such a pattern by its walk and
 * take the captures itself. */
sy_str sy__pattern_segment_var(const sy__pattern *p, size_t i);
/* Segment i is a plain "*": any one non-empty segment or label, and the
 * empty one too when it is the pattern's last segment. */
bool sy__pattern_segment_is_star(const sy__pattern *p, size_t i);
const char *sy__pattern_source(const sy__pattern *p);
/* predicate.c's literal form of a pattern: true when it can match, every
 * segment (label) of it is literal and its source is exactly those joined
 * by '/' (each after a '/') or '.' (between labels, none empty), after
 * a last "/" "**" of no variable for a path (*rest set, that element not
 * counted); *segs and *len (the source's length without it) then set. At
 * most UINT16_MAX segments and UINT32_MAX bytes. The walk of
 * sy__pattern_segment_kind and sy__pattern_literal in one call. */
bool sy__pattern_literal_form(const sy__pattern *p, bool host, size_t *segs,
                              size_t *len, bool *rest);
/* predicate.c's tail form of a pattern that is not a literal form: a
 * host's "*.lit.lit" (star_suffix): its suffix text (*text, *len: the
 * source after "*."), *var 0; a rooted path's literals then a last "**"
 * or "{*name}" whose source is exactly "/" + each literal (none empty)
 * then "/" "**" or "/{*name}": the source (*text), the literals' length
 * (*len: "/a/b"), the name's length (*var; 0 for "**"), the name at
 * *text + *len + 3. Lengths below 65,536. False: neither. */
bool sy__pattern_tail_form(const sy__pattern *p, bool host, const char **text,
                           size_t *len, size_t *var);

/* Containment, for the shadowed-route check (pattern_cover.c): true only
 * when q matches every request path p matches, with each pattern's
 * matchTrailingSlash; false when it does not or cannot be told (regex
 * elements of q count as matching nothing, of p as matching anything). */
bool sy__pattern_covers_path(const sy__pattern *q, bool q_trailing,
                             const sy__pattern *p, bool p_trailing);
/* The same for host patterns: equal texts, or an all-literal p (no
 * leading or trailing '.') whose labels q's matcher accepts. `alloc`
 * holds the labels for the time of the call. */
bool sy__pattern_covers_host(const sy__pattern *q, const sy__pattern *p,
                             const sy__alloc *alloc);

#endif
