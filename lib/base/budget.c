/*
 * budget.c - the per-request CPU budget (budget.h): escalating PCRE2 match
 * limits charged against one pool, and the thread's current budget while
 * a match or a filter plan runs.
 */
#include "base/budget.h"

/* budget.h: the budget of the match or plan running on this thread. */
_Thread_local sy__budget *sy__budget_cur;

bool sy__budget_init(sy__budget *b, pcre2_general_context *g) {
    memset(b, 0, sizeof *b);
    b->mctx = pcre2_match_context_create(g);
    if (!b->mctx)
        return false;
    pcre2_set_depth_limit(b->mctx, 10000u);
    sy__budget_start(b, NULL);
    return true;
}

void sy__budget_free(sy__budget *b) {
    pcre2_match_context_free(b->mctx);
    b->mctx = NULL;
}

/* The units of b's pool. */
static uint64_t pool_total(const sy__budget *b) {
    return b->lim && b->lim->regex_units ? b->lim->regex_units
                                         : SY_BUDGET_DEFAULT_UNITS;
}

bool sy__budget_charge_first_step(uint32_t per_call) {
    return sy__budget_charge_first_step_on(sy__budget_cur, per_call);
}

bool sy__budget_charge_first_step_on(sy__budget *b, uint32_t per_call) {
    if (!b || !b->mctx)
        return true; /* sy__re_match charges nothing either */
    if (b->exhausted)
        return false;
    uint64_t lim =
        SY_BUDGET_FIRST_LIMIT < per_call ? SY_BUDGET_FIRST_LIMIT : per_call;
    /* sy__re_match's first attempt, when the pool does not bound it */
    if (lim >= pool_total(b) - b->used)
        return false;
    b->used += lim;
    return true;
}

int sy__re_match(const pcre2_code *code, PCRE2_SPTR subject, PCRE2_SIZE len,
                 PCRE2_SIZE start, uint32_t options, pcre2_match_data *md,
                 pcre2_match_context *mctx, uint32_t per_call) {
    sy__budget *b = sy__budget_cur;
    if (!b || !b->mctx)
        return pcre2_match(code, subject, len, start, options, md, mctx);
    uint64_t total = pool_total(b);
    uint64_t step = SY_BUDGET_FIRST_LIMIT;
    for (;;) {
        /* used <= total: a charge never exceeds what was left */
        uint64_t left = total - b->used;
        uint64_t lim = step < per_call ? step : per_call;
        bool by_pool = lim >= left;
        if (by_pool)
            lim = left;
        if (lim == 0) {
            b->exhausted = true;
            return PCRE2_ERROR_MATCHLIMIT;
        }
        pcre2_set_match_limit(b->mctx, (uint32_t)lim);
        int rc = pcre2_match(code, subject, len, start, options, md, b->mctx);
        b->used += lim; /* an upper bound of what the attempt did */
        if (rc == PCRE2_ERROR_NOMEMORY || rc == PCRE2_ERROR_HEAP_FAILED) {
            b->nomem = b->exhausted = true; /* an answer would be a lie */
            return rc;
        }
        if (rc != PCRE2_ERROR_MATCHLIMIT)
            return rc;
        if (by_pool) {
            b->exhausted = true;
            return rc;
        }
        if (lim >= per_call)
            return rc; /* the call's own limit, as without a budget */
        step *= 8;
    }
}

uint32_t sy__budget_max_repeats(void) {
    const sy__budget *b = sy__budget_cur;
    if (!b)
        return UINT32_MAX;
    return b->lim && b->lim->max_repeats ? b->lim->max_repeats
                                         : SY_BUDGET_DEFAULT_REPEATS;
}

size_t sy__budget_max_rewrite(void) {
    const sy__budget *b = sy__budget_cur;
    if (!b)
        return SIZE_MAX;
    return b->lim && b->lim->max_rewrite ? b->lim->max_rewrite
                                         : SY_BUDGET_DEFAULT_REWRITE;
}
