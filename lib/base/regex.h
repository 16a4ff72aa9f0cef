/*
 * regex.h - the PCRE2 environment every compiler shares: memory from the
 * sy__alloc hooks (the one PCRE2 allocator shim), compiling with a match
 * limit and JIT, PCRE2 error messages as located sy__errors, and sy__regex,
 * the whole-value regex predicates use, with its per-document cache.
 */
#ifndef SY_REGEX_H
#define SY_REGEX_H

#include "base/util.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* Compile flags for a regex that must match a whole subject: anchored at
 * compile time (never at match time, which would turn the JIT off). */
#define SY_RE_WHOLE (PCRE2_ANCHORED | PCRE2_ENDANCHORED)

/* Backtracking budgets of the match contexts made by sy__re_env. */
#define SY_RE_MATCH_LIMIT 200000u
#define SY_RE_DEPTH_LIMIT 10000u

/* A PCRE2 general context whose memory comes from `a` (which must outlive
 * it and everything made from it). NULL when out of memory. */
pcre2_general_context *sy__re_general_context_new(const sy__alloc *a);

/*
 * The contexts for compiling one or more regexes with the same limits.
 * They are created on the first compile (a path pattern without a regex
 * costs no PCRE2 allocation). sy__re_env_done drops the compile contexts and,
 * unless kept, the match context; a kept match context belongs to the
 * caller (pcre2_match_context_free).
 */
typedef struct sy__re_env {
    const sy__alloc *a;
    uint32_t match_limit, depth_limit;
    pcre2_general_context *g;
    pcre2_compile_context *c;
    pcre2_match_context *m;
} sy__re_env;

/* Limits of 0 mean PCRE2's defaults. `a` must outlive the env and the
 * codes and match context it makes. */
void sy__re_env_init(sy__re_env *env, const sy__alloc *a, uint32_t match_limit,
                     uint32_t depth_limit);
/* Compile src[0..len) with PCRE2 `flags` and JIT-compile it (falling back
 * to the interpreter). NULL on error: *ec = PCRE2 error code (or
 * PCRE2_ERROR_HEAP_FAILED when out of memory), *eo = offset in src. */
pcre2_code *sy__re_env_compile(sy__re_env *env, const char *src, size_t len,
                               uint32_t flags, int *ec, size_t *eo);
void sy__re_env_done(sy__re_env *env, bool keep_match);

/* Fill err (code SY_EREGEX with PCRE2's message, or SY_ENOMEM) for a
 * failed compile at offset `off`; err->path = `path`. Returns the code. */
int sy__re_error(sy_error *err, const char *path, int ec, size_t off);
/* Number of capturing groups in `re`. */
uint32_t sy__re_capture_count(const pcre2_code *re);

/*
 * A standalone regex that must match a whole value (Header, Query, Cookie):
 * compiled anchored at both ends, JIT-compiled, with a match limit, all
 * memory from `a`. On error SY_EREGEX, err->offset = offset in `src` and
 * PCRE2's message, err->path empty. Matching is read-only: any number of
 * threads at once, each with its own match data.
 */
typedef struct sy__regex sy__regex;

/*
 * A cache of compiled whole-value regexes for one document parse: the same
 * pattern text used by many routes (a Header regex in 30,000 routes) is
 * compiled and JIT-compiled once and shared. Compiled regexes are
 * refcounted and immutable, so routes may outlive the cache.
 */
typedef struct sy__regex_cache sy__regex_cache;
sy__regex_cache *sy__regex_cache_new(const sy__alloc *a);
void sy__regex_cache_free(sy__regex_cache *c);
/* sy__regex_compile through `cache` (may be NULL). */
int sy__regex_compile_cached(sy__regex_cache *cache, const sy__alloc *a,
                             const char *src, sy__regex **out, sy_error *err);
int sy__regex_compile(const sy__alloc *a, const char *src, sy__regex **out,
                      sy_error *err);
void sy__regex_free(sy__regex *re);
/* Capture groups + 1 (the size of match data it needs to report groups). */
uint32_t sy__regex_groups(const sy__regex *re);
/* True when s[0..n) matches as a whole. md: any match data (NULL: false). */
bool sy__regex_full_match(const sy__regex *re, const char *s, size_t n,
                          pcre2_match_data *md);
/* The same for a caller holding the request's budget `b` without having
 * made it current (the matcher's quick tests): 1 or 0 where the matcher
 * without PCRE2 answers, charged to b as sy__regex_full_match would
 * charge it with b current; -1 where it does not (charging nothing: ask
 * sy__regex_full_match under the budget). */
struct sy__budget;
int sy__regex_full_match_on(const sy__regex *re, const char *s, size_t n,
                            struct sy__budget *b);

#endif
