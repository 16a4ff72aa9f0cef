/*
 * filter_plan_int.h - the running plan, shared by the files that compute
 * it: filter_plan.c (the chain, the dispatch, response edits),
 * filter_headers.c (the request header list), filter_template.c ({var}
 * templates, string building), filter_query.c (the query string) and
 * filter_path.c (path rewriting). Private to those files; the module's
 * entry point is sy_plan_compute (filter.h).
 */
#ifndef SY_FILTER_PLAN_INT_H
#define SY_FILTER_PLAN_INT_H

#include "filter_int.h"

/* One computation of a plan: the plan being built and what it reads. */
typedef struct sy_run {
    sy_plan *plan;
    const sy_request *req;
    const sy_capture *vars;
    size_t var_count;
    pcre2_match_data *md;
    sy_arena *ar;
    bool prefixed; /* a PrefixPath ran (SCG's GATEWAY_ALREADY_PREFIXED) */
} sy_run;

/* The empty string; a C string as sy_str. */
#define SY_PLAN_EMPTY ((sy_str){"", 0})
static inline sy_str sy_plan_cstr(const char *s) {
    return (sy_str){s, strlen(s)};
}

/* Java's Character.isWhitespace for ASCII. */
static inline bool sy_plan_space(char ch) {
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' ||
           ch == '\v';
}

/* StringUtils.hasText: some non-whitespace character. */
static inline bool sy_plan_has_text(sy_str s) {
    for (size_t i = 0; i < s.len; i++)
        if (!sy_plan_space(s.ptr[i]))
            return true;
    return false;
}

/* Narrow [*s, *e) of p to its text without surrounding whitespace. */
static inline void sy_plan_trim(const char *p, size_t *s, size_t *e) {
    while (*s < *e && sy_plan_space(p[*s]))
        (*s)++;
    while (*e > *s && sy_plan_space(p[*e - 1]))
        (*e)--;
}

/*
 * Short-circuit answers. switchyard: the first short-circuit wins. SCG
 * stops the chain there; we keep running the later filters (their request
 * edits are moot, their response header edits apply to the answer the
 * host sends), but a later RedirectTo / RequestSize / RequestHeaderSize /
 * failed RewritePath changes nothing, and SetStatus never overrides the
 * status of a short-circuit answer (SCG's SetStatus sees a committed
 * response).
 */
static inline bool sy_plan_short_circuited(const sy_run *r) {
    return r->plan->action != SY_ACTION_PROXY;
}

static inline void sy_plan_respond(sy_run *r, sy_action action, int status) {
    r->plan->action = action;
    r->plan->status = status;
}

/* Every call below that returns bool returns false only when the scratch
 * arena cannot grow (out of memory). */

/* filter_plan.c: room for one more of `count` elements of size `elem` in
 * the arena array *arr of *cap (doubled, copied). */
bool sy_plan_grow(sy_arena *ar, void **arr, size_t *cap, size_t count,
                  size_t elem);
/* filter_plan.c: append a response header operation. */
bool sy_plan_resp_add(sy_run *r, sy_response_op_kind kind, sy_str name,
                      sy_str value, sy_str arg);

/* filter_headers.c: the request header list (names case-insensitive). */
bool sy_plan_hdr_add(sy_run *r, sy_str name, sy_str value);
/* Remove every header named `name`, from index `from` on. */
void sy_plan_hdr_remove(sy_plan *p, sy_str name, size_t from);
/* HttpHeaders.set: the first header of that name takes the value in
 * place, the others go; appended when absent. */
bool sy_plan_hdr_set(sy_run *r, sy_str name, sy_str value);
bool sy_plan_headers_if_not_present(sy_run *r, const sy_filter *f);
bool sy_plan_map_header(sy_run *r, const sy_filter *f);
/* RequestHeaderSize: may answer 431 with the error header. */
bool sy_plan_header_size(sy_run *r, const sy_filter *f);

/* filter_template.c: expand the {var} template `t` into the arena (`t`
 * itself when nothing changes). */
bool sy_plan_expand(const sy_run *r, sy_str t, sy_str *out);
/* The raw path of Spring's UriTemplate(t).expand(vars) (SetPath,
 * PrefixPath): see filter_template.c. */
bool sy_plan_expand_uri_path(const sy_run *r, sy_str t, sy_str *out);
/* a + b + c + d, NUL-terminated, in the arena; *len its length. */
char *sy_plan_concat(sy_arena *ar, sy_str a, sy_str b, sy_str c, sy_str d,
                     size_t *len);
/* Write ch to dst (if non-NULL) as it is when `plain`, else as "%XX";
 * returns the bytes written (1 or 3). */
size_t sy_plan_put_byte(char *dst, unsigned char ch, bool plain);

/* filter_query.c: RemoveRequestParameter and AddRequestParameter. */
bool sy_plan_remove_param(sy_run *r, sy_str name);
bool sy_plan_add_param(sy_run *r, const sy_filter *f);

/* filter_path.c: StripPrefix, PrefixPath, SetPath; RewritePath returns 0
 * or SY_ENOMEM (a run-time regex failure answers 500). */
bool sy_plan_strip_prefix(sy_run *r, int64_t parts);
bool sy_plan_prefix_path(sy_run *r, const sy_filter *f);
bool sy_plan_set_path(sy_run *r, const sy_filter *f);
int sy_plan_rewrite_path(sy_run *r, const sy_filter *f);

#endif
