/*
 * filter.h - compiling filters (route model section 5) and computing the
 * filter plan of a matched request: new path and query, the upstream
 * header list, response header edits, status, redirect, short-circuit
 * answers, and the entries handed to the host (stateful and host filters).
 */
#ifndef SY_FILTER_H
#define SY_FILTER_H

#include "pattern.h"
#include "route.h"

typedef struct sy_filter sy_filter;

int sy_filter_compile(const sy_def_entry *e, const sy_compile_env *env,
                      const char *path, sy_filter **out, sy_error *err);
void sy_filter_free(sy_filter *f, const sy_alloc *a);
uint32_t sy_filter_max_groups(const sy_filter *f);

/* The plan, built in the match context's scratch arena. */
typedef struct sy_plan {
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
    const sy_filter_entry **host_filters;
    size_t host_filter_count, host_filter_cap;
} sy_plan;

/*
 * Compute the plan: default filters first, then the route's, each in
 * order. Strings come from the request, the compiled filters or `scratch`.
 * Returns 0 or SY_ENOMEM (scratch exhausted and the allocator failed).
 */
int sy_plan_compute(sy_plan *plan, const sy_filter *const *defaults,
                    size_t default_count, const sy_filter *const *filters,
                    size_t filter_count, const sy_request *req,
                    const sy_capture *vars, size_t var_count,
                    pcre2_match_data *md, sy_arena *scratch);

#endif
