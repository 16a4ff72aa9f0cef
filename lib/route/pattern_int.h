/*
 * pattern_int.h - the compiled pattern, shared by pattern.c (PathPatterns,
 * introspection) and pattern_host.c (Ant host patterns). Private to the
 * pattern files.
 */
#ifndef SY_PATTERN_INT_H
#define SY_PATTERN_INT_H

#include "route/pattern.h"

typedef enum pe_kind {
    PE_LITERAL, /* memcmp */
    PE_STAR,    /* "*": any non-empty segment, or the empty last one */
    PE_VAR,     /* "{name}": any non-empty segment, captured */
    PE_REGEX,   /* anything else within one segment: one anchored regex */
    PE_MULTI    /* "**" or "{*name}" */
} pe_kind;

/* One element: 16 bytes (a route's patterns hold one per segment).
 * Offsets and lengths are 32-bit (a pattern is at most SY_PATTERN_MAX
 * bytes); a segment has at most UINT16_MAX variables (PCRE2's limit on
 * groups: a mixed element is one regex with a group per variable). A
 * regex element's offset is only read while it is compiled: then `re`
 * takes its place. */
typedef struct sy__pelem {
    uint8_t kind;   /* pe_kind */
    bool whole;     /* PE_REGEX from "{name:regex}" alone: capture = segment */
    uint16_t nvars; /* PE_REGEX (mixed): variable i is group i + 1 */
    uint32_t var;   /* index of the element's first variable in vars[] */
    union {
        struct {
            uint32_t offset; /* of the segment in src */
            uint32_t len;    /* PE_LITERAL: the text is src[offset, +len) */
        };
        pcre2_code *re; /* PE_REGEX, once compiled (NULL until then) */
    };
} sy__pelem;

/* "no PE_MULTI element" */
#define PE_NONE UINT16_MAX
/* Elements a pattern may have (n, multi, first and last are 16-bit): more
 * segments (labels) than this are an error at the separator that makes
 * one too many. */
#define SY_PATTERN_ELEMS_MAX ((size_t)UINT16_MAX - 1u)

/*
 * A compiled pattern is one piece of memory: this header, the elements,
 * the variable names and the source text, after a copy of the allocator
 * for a pattern in its own block. A pattern compiled into an arena (a
 * route's) takes no allocation of its own unless it has regexes, and
 * borrows its source (the route's argument text, in the same arena). A
 * pattern with regexes keeps their match context after its names (the
 * slot is reserved for every pattern with a glob character).
 *
 * own block: [sy__alloc 32][sy__pattern 32][elems: 16 each]
 *            [vars: 16 each][match context 8][src\0]
 * in arena:  [sy__pattern 32][elems: 16 each][vars: 16 each]
 *            [match context 8]
 */
struct sy__pattern {
    const char *src; /* in the block, or (in an arena) the caller's */
    sy_str *vars;    /* names, into src; then the match context slot */
    uint16_t n;
    union {
        uint16_t multi; /* path: index of the PE_MULTI element, or PE_NONE */
        uint16_t first; /* host: real labels are elems[first, last) */
    };
    uint16_t last;
    /* bits: the header is 32 bytes (every route has a pattern or more) */
    bool host : 1;
    bool rooted : 1;          /* path: starts with '/' */
    bool lead : 1, trail : 1; /* host: starts / ends with '.' (Ant compares
                                 both) */
    bool in_arena : 1;        /* the memory is an arena's: not freed with it */
    bool has_mctx : 1;        /* vars[nvars] holds a pcre2_match_context * */
    bool star_suffix : 1;     /* host: "*" then literal labels, no '.' first
                                 or last, the literals src[elems[first + 1]
                                 .offset..] joined by single dots */
    uint32_t nvars;
    uint32_t max_groups;
    sy__pelem elems[];
};

/* The match context of p's regexes (NULL: none). */
static inline pcre2_match_context *sy__pat_mctx(const sy__pattern *p) {
    return p->has_mctx ? *(pcre2_match_context *const *)(const void *)(p->vars +
                                                                       p->nvars)
                       : NULL;
}

/* One piece of a segment (path) or label (host) being compiled. */
typedef enum tok_kind { T_LIT, T_Q, T_STAR, T_VAR, T_RVAR, T_REST } tok_kind;
typedef struct tok {
    tok_kind kind;
    size_t off, len;   /* the text of the piece */
    size_t noff, nlen; /* T_VAR, T_RVAR, T_REST: the name */
    size_t roff, rlen; /* T_RVAR: the regex */
} tok;

int sy__pat_error(sy_error *err, int code, size_t off, const char *msg);
/* Record a variable name; `unique`: a second use is an error at `off`. */
int sy__pat_add_var(sy__pattern *p, sy_str name, size_t off, bool unique,
                    sy_error *err);
/* Compile a whole "{name:regex}" element (no capturing groups allowed). */
int sy__pat_compile_whole(sy__pattern *p, sy__re_env *env, sy__pelem *el,
                          const tok *t, sy_error *err);
/* el->nvars = the variables recorded since el->var; SY_EPATTERN at `off`
 * when they are more than a segment may hold. */
int sy__pat_set_nvars(sy__pattern *p, sy__pelem *el, size_t off, sy_error *err);
/* Compile a mixed element: one regex, literal parts quoted, one group per
 * variable, matched with DOTALL (as Spring compiles it). */
int sy__pat_compile_mixed(sy__pattern *p, sy__re_env *env, sy__pelem *el,
                          const tok *t, size_t nt, sy_error *err);
/* Finish a glob element from its tokens: "*" alone, "{name}" alone, one
 * "{name:regex}" alone, or a mixed regex (path and host patterns alike). */
int sy__pat_compile_glob(sy__pattern *p, sy__re_env *env, sy__pelem *el,
                         const tok *t, size_t nt, sy_error *err);
/* Match one element against one segment; `last`: it is the pattern's last
 * element (a "*" or a regex without variables may then match ""). */
bool sy__pat_elem_match(const sy__pattern *p, const sy__pelem *el, sy_str seg,
                        bool last, sy__capture *caps, size_t *nc,
                        pcre2_match_data *md);

/* pattern_host.c: parse and compile p->src as an Ant host pattern. */
int sy__pat_parse_host(sy__pattern *p, sy__re_env *env, tok *t, sy_error *err);
/* sy__pat_parse_host for a host of len bytes without '{', '}', '?' or
 * '*': every label literal, nothing to fail. */
void sy__pat_parse_host_literal(sy__pattern *p, size_t len);

#endif
