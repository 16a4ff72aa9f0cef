/*
 * filter_plan_int.h - the running plan, shared by the files that compute
 * it: filter_plan.c (the chain, the dispatch, response edits),
 * filter_headers.c (the request header list), filter_template.c ({var}
 * templates, string building), filter_query.c (the query string) and
 * filter_path.c (path rewriting). Private to those files; the module's
 * entry point is sy__plan_compute (filter.h).
 */
#ifndef SY_FILTER_PLAN_INT_H
#define SY_FILTER_PLAN_INT_H

#include "route/filter_int.h"

/* One computation of a plan: the plan being built and what it reads. */
typedef struct sy__run {
    sy__plan *plan;
    const sy_request *req;
    const sy__capture *vars;
    size_t var_count;
    pcre2_match_data *md;
    sy__arena *ar;
    bool prefixed; /* a PrefixPath ran (SCG's GATEWAY_ALREADY_PREFIXED) */
} sy__run;

/* The empty string; a C string as sy_str. */
#define SY_PLAN_EMPTY ((sy_str){"", 0})
static inline sy_str sy__plan_cstr(const char *s) {
    return (sy_str){s, strlen(s)};
}

/* Java's Character.isWhitespace for ASCII. */
static inline bool sy__plan_space(char ch) {
    /* ' ', or '\t' '\n' '\v' '\f' '\r' (9-13) */
    return ch == ' ' || (unsigned char)(ch - '\t') <= '\r' - '\t';
}

/* StringUtils.hasText: some non-whitespace character. */
static inline bool sy__plan_has_text(sy_str s) {
    for (size_t i = 0; i < s.len; i++)
        if (!sy__plan_space(s.ptr[i]))
            return true;
    return false;
}

/* Narrow [*s, *e) of p to its text without surrounding whitespace. */
static inline void sy__plan_trim(const char *p, size_t *s, size_t *e) {
    while (*s < *e && sy__plan_space(p[*s]))
        (*s)++;
    while (*e > *s && sy__plan_space(p[*e - 1]))
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
static inline bool sy__plan_short_circuited(const sy__run *r) {
    return r->plan->action != SY_ACTION_PROXY;
}

static inline void sy__plan_respond(sy__run *r, sy_action action, int status) {
    r->plan->action = action;
    r->plan->status = status;
}

/* Every call below that returns bool returns false only when the scratch
 * arena cannot grow (out of memory). */

/* filter_template.c: room for one more of `count` elements of size `elem` in
 * the arena array *arr of *cap (doubled, copied). */
bool sy__plan_grow(sy__arena *ar, void **arr, size_t *cap, size_t count,
                   size_t elem);
/* filter_template.c: append a response header operation. */
bool sy__plan_resp_add(sy__run *r, sy_response_op_kind kind, sy_str name,
                       sy_str value, sy_str arg);

/* filter_headers.c: the request header list (names case-insensitive). */
bool sy__plan_hdr_add(sy__run *r, sy_str name, sy_str value);
/* Remove every header named `name`, from index `from` on. */
void sy__plan_hdr_remove(sy__plan *p, sy_str name, size_t from);
/* HttpHeaders.set: the first header of that name takes the value in
 * place, the others go; appended when absent. */
bool sy__plan_hdr_set(sy__run *r, sy_str name, sy_str value);
bool sy__plan_headers_if_not_present(sy__run *r, const sy__filter *f);
bool sy__plan_map_header(sy__run *r, const sy__filter *f);
/* RequestHeaderSize: may answer 431 with the error header. */
bool sy__plan_header_size(sy__run *r, const sy__filter *f);

/* filter_template.c: expand the {var} template `t` into the arena (`t`
 * itself when nothing changes). */
bool sy__plan_expand(const sy__run *r, sy_str t, sy_str *out);
/* The raw path of Spring's UriTemplate(t).expand(vars) (SetPath,
 * PrefixPath): see filter_template.c. */
bool sy__plan_expand_uri_path(const sy__run *r, sy_str t, sy_str *out);
/* a + b + c + d, NUL-terminated, in the arena; *len its length. */
char *sy__plan_concat(sy__arena *ar, sy_str a, sy_str b, sy_str c, sy_str d,
                      size_t *len);
/* Write ch to dst (if non-NULL) as it is when `plain`, else as "%XX";
 * returns the bytes written (1 or 3). */
size_t sy__plan_put_byte(char *dst, unsigned char ch, bool plain);

/* filter_query.c: RemoveRequestParameter (replacement NULL),
 * RewriteRequestParameter (the name's values replaced by one, last) and
 * AddRequestParameter. */
bool sy__plan_remove_param(sy__run *r, sy_str name, const sy_str *replacement);
bool sy__plan_add_param(sy__run *r, const sy__filter *f);

/* filter_path.c: StripPrefix, PrefixPath, SetPath; RewritePath returns 0
 * or SY_ENOMEM (a run-time regex failure answers 500). */
bool sy__plan_strip_prefix(sy__run *r, int64_t parts);
bool sy__plan_prefix_path(sy__run *r, const sy__filter *f);
bool sy__plan_set_path(sy__run *r, const sy__filter *f);
int sy__plan_rewrite_path(sy__run *r, const sy__filter *f);

#endif
