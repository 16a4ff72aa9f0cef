/*
 * filter.h - compiling filters (route model section 5) and computing the
 * filter plan of a matched request: new path and query, the upstream
 * header list, response header edits, status, redirect, short-circuit
 * answers, and the entries handed to the host (stateful and host filters).
 */
#ifndef SY_FILTER_H
#define SY_FILTER_H

#include "route/compile_env.h"
#include "route/pattern.h"

typedef struct sy__filter sy__filter;

/*
 * Compile one filter entry (args mapped and type-checked by the parser;
 * defaults applied here). `e->spec == NULL` means a host-registered filter:
 * e->host_factory is its `const sy_filter_factory *`, whose validate runs
 * now. `path` is the entry's JSON path ("routes[3].filters[1]"); errors
 * name "<path>.args.<field>" (SY_EREGEX with err->offset inside the regex,
 * SY_EARG, SY_EMISSING), or "<path>" plus the host's own path for host
 * validation failures. The filter keeps `env->alloc`, which must outlive
 * it. Returns 0 and *out, or a negative code and *out = NULL.
 */
int sy__filter_compile(const sy__def_entry *e, const sy__compile_env *env,
                       const char *path, sy__filter **out, sy_error *err);
/* NULL is fine. `a` may be NULL (the allocator given at compile time). */
void sy__filter_free(sy__filter *f, const sy__alloc *a);
/* Capture groups + 1 that the match data passed to sy__plan_compute needs
 * (RewritePath), or 0. */
uint32_t sy__filter_max_groups(const sy__filter *f);

/* The compiled policy config of a Retry (struct sy_retry_policy),
 * RequestRateLimiter (sy__rl_cfg) or CircuitBreaker (sy__brk_cfg) filter,
 * with *id its builtin id; NULL for any other filter. */
const void *sy__filter_policy(const sy__filter *f, sy__builtin *id);

/* A CircuitBreaker after a Retry in a chain is refused (route.c, and
 * router_core.c for a Retry among the default filters): SCG would run the
 * breaker on every try; the hosts run it once, around all the tries. */
#define SY__BREAKER_AFTER_RETRY                                                \
    "CircuitBreaker: after a Retry, SCG runs the breaker on every try; "       \
    "switchyard runs it once around all the tries: list the CircuitBreaker "   \
    "before the Retry"

/* The plan, built in the match context's scratch arena. */
typedef struct sy__plan {
    sy_action action;
    int status;
    sy_str redirect;
    sy_str path;
    sy_str query;
    bool preserve_host;
    sy_header *headers;
    size_t header_count, header_cap;
    sy_response_op *resp;
    size_t resp_count, resp_cap;
    const sy_filter_entry **host_filters; /* host_local, or in the arena */
    size_t host_filter_count, host_filter_cap;
    /* the first ones (a route's usual policy or two): no arena growth */
    const sy_filter_entry *host_local[4];
} sy__plan;

/*
 * Compute the plan: default and route filters interleaved as SCG orders
 * them (default 1, route 1, default 2, route 2, ...: each list numbered
 * in its own order, stably merged, defaults first on ties), each seeing
 * the edits of the ones before. The plan starts from
 * the request (path, query, a scratch copy of the header array; action
 * PROXY, status 0) and is overwritten whole. Strings come from the
 * request, the compiled filters or `scratch`; nothing else is allocated.
 * NULL entries in either list are skipped. `vars` are the captures of the
 * match (the last one of a name wins). `md` should hold at least
 * sy__filter_max_groups() pairs for every filter (smaller or NULL: PCRE2
 * allocates one through the filter's allocator).
 *
 * Short-circuits: the first RESPOND/REDIRECT wins; later filters still run
 * (their response ops count), but later short-circuit filters and SetStatus
 * change nothing. A RewritePath that fails at run time (match limit)
 * answers RESPOND 500.
 *
 * Response ops: ADD / ADD_IF_ABSENT / SET carry the expanded value;
 * DEDUPE: name = the space-separated names, arg = strategy; REWRITE: arg =
 * the regex, value = the replacement already in pcre2_substitute syntax
 * (use PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_UNSET_EMPTY);
 * REWRITE_LOCATION: name = locationHeaderName, value = hostValue (may be
 * empty), arg = stripVersion, and the same filter also appears in
 * host_filters with all four args (protocols included).
 *
 * Returns 0 or SY_ENOMEM (scratch exhausted and the allocator failed).
 */
int sy__plan_compute(sy__plan *plan, const sy__filter *const *defaults,
                     size_t default_count, const sy__filter *const *filters,
                     size_t filter_count, const sy_request *req,
                     const sy__capture *vars, size_t var_count,
                     pcre2_match_data *md, sy__arena *scratch);

/* What a compiled filter object takes in its route's arena: for sizing
 * the arena ahead (def_route.c). */
#define SY_FILTER_OBJECT_BYTES 176

#endif
