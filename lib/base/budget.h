/*
 * budget.h - the CPU budget of one request: one pool of
 * PCRE2 match-limit units shared by every regex evaluation of the request
 * (predicates and filters), a cap on the repeated values of one header,
 * query parameter or cookie a predicate examines, and a cap on the bytes
 * RewritePath may produce. A request that exhausts its pool stops matching
 * at once and gets no route, with the reason SY_NOMATCH_BUDGET.
 *
 * PCRE2 cannot say how much of its match limit a call used, so a call runs
 * under escalating limits (256, 2048, 16384, ... up to the per-call limit
 * and to what is left) and each attempt is charged in full: the charge is
 * an upper bound of the work done, and at most ~9x the work of a call that
 * needed escalation (a trivial call costs 256 units).
 *
 * The budget is the match context's (match.c); while a match or a filter
 * plan runs, it is this thread's current budget (sy__budget_enter/leave,
 * stack-scoped and restored on exit), so the regex call sites reach it
 * without threading it through every signature. Outside a match there is
 * no current budget and calls run under their per-call limit only.
 */
#ifndef SY_BUDGET_H
#define SY_BUDGET_H

#include "base/util.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* Defaults (docs/security.md). */
#define SY_BUDGET_DEFAULT_UNITS 1000000u /* match-limit units per request */
#define SY_BUDGET_DEFAULT_REPEATS 32u    /* values per name examined */
#define SY_BUDGET_DEFAULT_REWRITE 16384u /* bytes of a rewritten path */
#define SY_BUDGET_FIRST_LIMIT 256u       /* first escalation step */

/* The limits, from the snapshot config; zero fields mean the defaults. */
typedef struct sy__budget_limits {
    uint64_t regex_units; /* match-limit units per request */
    uint32_t max_repeats; /* values of one name examined per predicate */
    size_t max_rewrite;   /* bytes a RewritePath result may have */
} sy__budget_limits;

/* A request's limits are read from `lim` when needed (a regex call, a
 * repeated value, a rewrite), not copied at the start: most requests need
 * none of them, and the start runs on every match. */
typedef struct sy__budget {
    const sy__budget_limits *lim; /* this request's (NULL: defaults) */
    uint64_t used;                /* units charged so far (tests, metrics) */
    bool exhausted;               /* a call was cut short by the pool */
    bool nomem; /* a call failed for memory: the request's answer is
                 * SY_ENOMEM, never "no route" (sets exhausted too) */
    pcre2_match_context *mctx; /* this context's own, limits set per call */
} sy__budget;

/* Create the budget's match context from `g` (the match context's general
 * context). false: out of memory. */
bool sy__budget_init(sy__budget *b, pcre2_general_context *g);
void sy__budget_free(sy__budget *b);
/* Start a request: a full pool under `lim` (NULL: defaults), which must
 * stay valid until the request is done. Inline: it runs on every match. */
static inline void sy__budget_start(sy__budget *b,
                                    const sy__budget_limits *lim) {
    b->lim = lim; /* `lim` must outlive the request (the snapshot's) */
    b->used = 0;
    b->exhausted = false;
    b->nomem = false;
}

/* The budget of the match or plan running on this thread (budget.c;
 * stack-scoped: set on entry, restored on exit, so nested matches on other
 * routers from host callbacks each see their own). Read it only through
 * the calls below. */
extern _Thread_local sy__budget *sy__budget_cur;

/* Make b this thread's current budget until sy__budget_leave(*saved). */
static inline void sy__budget_enter(sy__budget *b, sy__budget **saved) {
    *saved = sy__budget_cur;
    sy__budget_cur = b;
}
static inline void sy__budget_leave(sy__budget *saved) {
    sy__budget_cur = saved;
}
/* This thread's current budget, or NULL. */
static inline sy__budget *sy__budget_current(void) {
    return sy__budget_cur;
}

/*
 * pcre2_match under the current budget (as pcre2_match otherwise, with
 * `mctx`). `per_call` is the call's own match limit. A call stopped by
 * the pool returns PCRE2_ERROR_MATCHLIMIT and marks the budget exhausted;
 * once exhausted, every call returns that at once. A call PCRE2 fails for
 * memory (PCRE2_ERROR_NOMEMORY, PCRE2_ERROR_HEAP_FAILED) marks the budget
 * exhausted and nomem: the match stops and returns SY_ENOMEM.
 */
int sy__re_match(const pcre2_code *code, PCRE2_SPTR subject, PCRE2_SIZE len,
                 PCRE2_SIZE start, uint32_t options, pcre2_match_data *md,
                 pcre2_match_context *mctx, uint32_t per_call);

/* For a call its caller knows PCRE2 would finish within the first step's
 * limit (min(SY_BUDGET_FIRST_LIMIT, per_call)) and which it answers
 * without PCRE2: charge what sy__re_match would (that first step; nothing
 * without a current budget) and return true; false, charging nothing,
 * when less than a step is left in the pool, where sy__re_match's answer
 * depends on the pool: call it then. */
bool sy__budget_charge_first_step(uint32_t per_call);
/* The same with `b` (NULL: none) as the current budget, for a caller
 * that holds the request's budget without having made it current. */
bool sy__budget_charge_first_step_on(sy__budget *b, uint32_t per_call);

/* The current budget's match context (its sy_match_ctx's own, which
 * allocates as that context's match data does), else `fallback`. */
static inline pcre2_match_context *
sy__budget_mctx(pcre2_match_context *fallback) {
    sy__budget *b = sy__budget_cur;
    return b && b->mctx ? b->mctx : fallback;
}

/* How many values of one name a predicate may examine (UINT32_MAX when
 * no budget is current). */
uint32_t sy__budget_max_repeats(void);
/* How many bytes a rewritten path may have (SIZE_MAX without budget). */
size_t sy__budget_max_rewrite(void);

#endif
