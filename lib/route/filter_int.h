/*
 * filter_int.h - the compiled filter, shared by filter.c (compiling) and
 * the filter_plan*.c family (computing the plan, filter_plan_int.h).
 * Private to the filter module's files.
 */
#ifndef SY_FILTER_INT_H
#define SY_FILTER_INT_H

#include "route/filter.h"

/* PCRE2 match limit of one RewritePath match (the request's budget,
 * budget.h, bounds them all together). */
#define SY_FILTER_MATCH_LIMIT 1000000u

/* Default of RequestHeaderSize's and RequestSize's error header. */
#define SY_FILTER_ERROR_HEADER "errorMessage"

/*
 * One compiled filter. Which members are used depends on `id`:
 *
 *   AddRequestHeader, SetRequestHeader,     name, value (template)
 *   AddRequestParameter, SetResponseHeader
 *   AddResponseHeader                       name, value, flag = override
 *   AddRequestHeadersIfNotPresent           items (name, value template)
 *   DedupeResponseHeader                    name (space separated), arg
 *   MapRequestHeader                        name = from, value = to
 *   PrefixPath                              value = prefix
 *   RedirectTo                              status, value = url,
 *                                           flag = includeRequestParams
 *   Remove{Request,Response}Header,         name
 *   RemoveRequestParameter
 *   RequestHeaderSize                       size, name = error header
 *   RequestSize                             size
 *   RewritePath                             re, mctx, value = replacement
 *                                           in pcre2_substitute syntax
 *   RewriteResponseHeader                   name, arg = regexp, value =
 *                                           replacement (PCRE2 syntax)
 *   RewriteLocationResponseHeader           name = locationHeaderName,
 *                                           value = hostValue, arg =
 *                                           stripVersion, entry (all args)
 *   SetPath                                 value = template
 *   SetRequestHostHeader                    value = host template
 *   SetStatus                               status
 *   StripPrefix                             size = parts
 *   Retry, RequestRateLimiter,              entry, policy (the config of
 *   CircuitBreaker                          retry.h, ratelimit.h, breaker.h)
 *   host filters                            entry
 *
 * Every string is NUL-terminated and lives in its route's arena, or in
 * `arena` for a filter compiled without one.
 */
struct sy__filter {
    sy__builtin id; /* a SY_F_* value, or SY_HOST_FACTORY */
    bool in_arena;  /* this object lives in its route's arena */
    const sy__alloc *alloc;
    sy__arena arena;
    sy_str name;
    sy_str value;
    sy_str arg;
    bool flag;
    bool value_has_vars; /* value contains '{' */
    int status;
    int64_t size;
    union {
        sy_header *items; /* AddRequestHeadersIfNotPresent */
        void *policy;     /* Retry, RequestRateLimiter, CircuitBreaker: the
                             compiled config (lib/policy/) */
    };
    size_t item_count;
    pcre2_code *re;
    pcre2_match_context *mctx;
    uint32_t groups; /* capture groups of re + 1 */
    sy_filter_entry entry;
};

#endif
