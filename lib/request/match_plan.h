/*
 * match_plan.h - a match's filter plan, computed on first use
 * (match_plan.c) and read through sy__match_plan by what answers from it
 * (match_result.c, target.c). Apart from match.h so that the matcher,
 * which only resets the plan, does not reach the file that computes it.
 */
#ifndef SY_MATCH_PLAN_H
#define SY_MATCH_PLAN_H

#include "request/match.h"

/* The filter plan of a match, computed on first use (match_plan.c). */
sy__plan *sy__match_plan_compute(const sy_match *m);
static inline sy__plan *sy__match_plan(const sy_match *m) {
    /* the plan lives in the context, which the caller owns (one thread
     * at a time) */
    return m->plan_done ? (sy__plan *)(uintptr_t)&m->plan
                        : sy__match_plan_compute(m);
}

#endif
