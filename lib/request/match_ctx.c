/*
 * match_ctx.c - match contexts: the per-worker scratch a match runs in
 * (captures, PCRE2 match data, the path's and host's segments, the
 * request's CPU budget), made once per worker and grown to what a
 * snapshot needs before a match uses it (match.c).
 */
#include "request/match.h"

#include "route/pattern_split.h" /* sy__segments_free */

int sy_match_ctx_new(const sy_allocator *alloc, sy_match_ctx **out,
                     sy_error *err) {
    sy__alloc a;
    sy__alloc_init(&a, alloc);
    if (!out)
        return sy__error_set(err, SY_EINVAL, "", "out is NULL");
    sy_match_ctx *c = sy__calloc(&a, 1, sizeof *c);
    if (!c)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    c->alloc = a;
    c->rng = sy__hash_mix((uint64_t)(uintptr_t)c, sy__now_monotonic_us()) | 1;
    sy__arena_init(&c->scratch, &c->alloc, 16384);
    /* what the evaluation reads of the context at fixed places (the
     * capture and match data arrays: ctx_fit, when they grow) */
    c->ev.path = &c->path;
    c->ev.host = &c->host;
    c->ev.scratch = &c->scratch;
    c->m.ctx = c; /* the result a match returns is always this one */
    c->gctx = sy__re_general_context_new(&c->alloc);
    if (!c->gctx || !sy__budget_init(&c->budget, c->gctx)) {
        if (c->gctx)
            pcre2_general_context_free(c->gctx);
        sy__free(&a, c);
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    }
    *out = c;
    return SY_OK;
}

void sy_match_ctx_free(sy_match_ctx *c) {
    if (!c)
        return;
    sy__arena_free(&c->scratch);
    sy__segments_free(&c->path, &c->alloc);
    sy__segments_free(&c->host, &c->alloc);
    sy__free(&c->alloc, c->caps);
    if (c->md)
        pcre2_match_data_free(c->md);
    sy__budget_free(&c->budget);
    pcre2_general_context_free(c->gctx);
    sy__free(&c->alloc, c);
}

/* Grow scratch to the snapshot's needs (only allocation on the match
 * path; match.c calls it when the context does not fit). */
__attribute__((noinline)) int sy__match_ctx_grow(sy_match_ctx *c,
                                                 const sy_snapshot *s) {
    size_t need = s->prep.fit_caps;
    if (c->caps_cap < need) {
        sy__capture *caps =
            sy__realloc(&c->alloc, c->caps, need * sizeof *caps);
        if (!caps)
            return SY_ENOMEM;
        c->caps = caps;
        c->caps_cap = need;
        c->ev.caps = caps;
        c->ev.caps_cap = need;
    }
    uint32_t groups = s->prep.fit_groups;
    if (!c->md || c->md_groups < groups) {
        pcre2_match_data *md = pcre2_match_data_create(groups, c->gctx);
        if (!md)
            return SY_ENOMEM;
        if (c->md)
            pcre2_match_data_free(c->md);
        c->md = md;
        c->md_groups = groups;
        c->ev.md = md;
    }
    /* what fits now: the larger of each (a context serves any snapshot) */
    c->fit_caps = c->caps_cap < UINT32_MAX ? (uint32_t)c->caps_cap : UINT32_MAX;
    c->fit_groups = c->md_groups;
    return SY_OK;
}
