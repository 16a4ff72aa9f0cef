/*
 * match_result.c - what a match answers: the route found, its captured
 * variables (taken on first read when the matcher left them) and its
 * filter plan, computed on first use and kept in the match context.
 */
#include "request/match_plan.h"

const sy_route *sy_match_route(const sy_match *m) {
    return m->route;
}

size_t sy_match_var_count(const sy_match *m) {
    sy__match_caps(m->ctx);
    return m->ctx->ev.ncaps;
}

void sy_match_var(const sy_match *m, size_t i, sy_str *name, sy_str *value) {
    sy__match_caps(m->ctx);
    const sy__eval *ev = &m->ctx->ev;
    sy_str none = {NULL, 0};
    if (name)
        *name = i < ev->ncaps ? ev->caps[i].name : none;
    if (value)
        *value = i < ev->ncaps ? ev->caps[i].value : none;
}

sy_str sy_match_var_get(const sy_match *m, const char *name) {
    sy__match_caps(m->ctx);
    const sy__eval *ev = &m->ctx->ev;
    size_t len = strlen(name);
    /* the last capture of a name wins, as SCG merges the predicates'
     * variable maps (and as the filters expand {name}) */
    for (size_t i = ev->ncaps; i-- > 0;)
        if (sy__str_eq(ev->caps[i].name, name, len))
            return ev->caps[i].value;
    return (sy_str){NULL, 0};
}

sy_action sy_match_action(const sy_match *m) {
    return sy__match_plan(m)->action;
}
int sy_match_status(const sy_match *m) {
    return sy__match_plan(m)->status;
}
sy_str sy_match_redirect(const sy_match *m) {
    return sy__match_plan(m)->redirect;
}
sy_str sy_match_path(const sy_match *m) {
    return sy__match_plan(m)->path;
}
sy_str sy_match_query(const sy_match *m) {
    return sy__match_plan(m)->query;
}
size_t sy_match_header_count(const sy_match *m) {
    return sy__match_plan(m)->header_count;
}
bool sy_match_preserve_host(const sy_match *m) {
    return sy__match_plan(m)->preserve_host;
}

sy_header sy_match_header(const sy_match *m, size_t i) {
    sy__plan *p = sy__match_plan(m);
    sy_header none = {{NULL, 0}, {NULL, 0}};
    return i < p->header_count ? p->headers[i] : none;
}

size_t sy_match_response_op_count(const sy_match *m) {
    return sy__match_plan(m)->resp_count;
}

sy_response_op sy_match_response_op(const sy_match *m, size_t i) {
    sy__plan *p = sy__match_plan(m);
    sy_response_op none = {SY_RESP_ADD, {NULL, 0}, {NULL, 0}, {NULL, 0}};
    return i < p->resp_count ? p->resp[i] : none;
}

size_t sy_match_host_filter_count(const sy_match *m) {
    return sy__match_plan(m)->host_filter_count;
}

const sy_filter_entry *sy_match_host_filter(const sy_match *m, size_t i) {
    sy__plan *p = sy__match_plan(m);
    return i < p->host_filter_count ? p->host_filters[i] : NULL;
}
