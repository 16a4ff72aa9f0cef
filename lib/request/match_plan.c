/*
 * match_plan.c - a match's filter plan, computed on first use from the
 * route's (and the defaults') compiled filters, the request and the
 * captured variables, and kept in the match context (read through
 * sy__match_plan, match_plan.h).
 */
#include "request/match.h"

/* (Not inlined into the accessors: their usual path, the plan done, then
 * sets up no frame.) */
__attribute__((noinline)) sy__plan *sy__match_plan_compute(const sy_match *cm) {
    /* the plan is computed on first use; the result lives in the context,
     * which the caller owns (one thread at a time) */
    sy_match *m = (sy_match *)(uintptr_t)cm;
    if (!m->plan_done) {
        sy__match_caps(m->ctx);
        const struct sy_route *d = m->snap->defaults;
        const sy__eval *ev = &m->ctx->ev;
        sy__budget *saved; /* (sy__plan_compute sets the whole plan) */
        sy__budget_enter(&m->ctx->budget, &saved);
        m->plan_rc = sy__plan_compute(
            &m->plan, d ? (const sy__filter *const *)d->more->cfilters : NULL,
            d ? d->more->filter_count : 0,
            (const sy__filter *const *)m->route->more->cfilters,
            m->route->more->filter_count, m->req, ev->caps, ev->ncaps,
            m->ctx->md, &m->ctx->scratch);
        sy__budget_leave(saved);
        m->plan_done = true;
    }
    return &m->plan;
}
