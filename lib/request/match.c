/*
 * match.c - the request path: the indexed matcher, the reference linear
 * scan and explain (the match contexts they use: match_ctx.c; what a
 * result answers: match_result.c).
 *
 * One match:
 *   scan the path once (its segments, the host's labels: cut when read)
 *   -> index lookup (base + overlay lists)
 *   -> merge lists by rank key, skipping removed slots and repeats
 *   -> first route whose predicates all hold wins; its captures are the vars
 * Nothing here allocates once the context has seen the snapshot's needs.
 */
#include "request/match.h"

#include "route/pattern_split.h"   /* sy__segments_split_lazy, inline */
#include "route/predicate_quick.h" /* sy__preds_quick, inline */
#include "snapshot/index_lookup.h" /* index_lookup_flat, index_host_exact */

static inline int ctx_fit(sy_match_ctx *c, const sy_snapshot *s) {
    if (c->fit_caps >= s->prep.fit_caps && c->fit_groups >= s->prep.fit_groups)
        return SY_OK;
    return sy__match_ctx_grow(c, s);
}

/* The host as matched: port removed when the router strips it. */
static inline __attribute__((always_inline)) sy_str
host_for_match(const sy_snapshot *s, sy_str host) {
    if (!s->prep.strip_host_port || !host.len)
        return host;
    size_t end = host.len;
    size_t start = 0;
    if (host.ptr[0] == '[') { /* IPv6 literal: [::1]:8080 */
        while (start < host.len && host.ptr[start] != ']')
            start++;
    }
    for (size_t i = host.len; i-- > start;)
        if (host.ptr[i] == ':') {
            end = i;
            break;
        }
    return (sy_str){host.ptr, end};
}

/* A seed for a request that brought none (seed 0): the router's random
 * callback, else the context's own xorshift64* generator. */
static uint64_t draw_seed(sy_match_ctx *c, const sy_snapshot *s) {
    if (s->random)
        return s->random(s->clock_data);
    c->rng ^= c->rng >> 12;
    c->rng ^= c->rng << 25;
    c->rng ^= c->rng >> 27;
    return c->rng * 0x2545f4914f6cdd1dull;
}

/* A request from a host built against an older, shorter sy_request is
 * completed with defaults so nothing past its size is ever read; one
 * without a seed gets one when some route draws a Weight. */
static const sy_request *full_request(sy_match_ctx *c, const sy_snapshot *s,
                                      const sy_request *req) {
    bool seed = req->seed == 0 && s->prep.weights;
    if (req->size >= sizeof(sy_request) && !seed)
        return req;
    static const sy_request defaults = SY_REQUEST_INIT;
    c->req_copy = defaults;
    memcpy(&c->req_copy, req,
           req->size < sizeof(sy_request) ? req->size : sizeof(sy_request));
    c->req_copy.size = sizeof(sy_request);
    if (seed)
        c->req_copy.seed = draw_seed(c, s);
    return &c->req_copy;
}

uint64_t sy__match_draw_seed(const sy_match *m) {
    return draw_seed(m->ctx, m->snap);
}

/* Normalise the request path (path_normalize.c); a changed path goes
 * into a copy of the request, so matching, captures and the filter plan's
 * upstream path all see it. SY_PN_BAD_PATH: route nothing. */
static int normalize_path(sy_match_ctx *c, const sy_snapshot *s,
                          const sy_request **req) {
    sy_str np;
    int rc = sy__path_normalize(&s->path_norm, (*req)->path, &c->scratch, &np);
    if (rc == SY_PN_BAD_PATH)
        c->nomatch = SY_NOMATCH_BAD_PATH;
    if (rc || np.ptr == (*req)->path.ptr)
        return rc;
    if (*req != &c->req_copy)
        c->req_copy = **req;
    c->req_copy.path = np;
    *req = &c->req_copy;
    return 0;
}

/* Fit the context, normalise the path (may replace *reqp), split. Returns
 * SY_PN_BAD_PATH (positive) when the path is refused. */
static inline __attribute__((always_inline)) int
prepare(sy_match_ctx *c, const sy_snapshot *s, const sy_request **reqp) {
    int rc = ctx_fit(c, s);
    if (rc)
        return rc;
    /* an arena the last request left untouched needs no reset, and one
     * of a single chunk (no larger than the arena's next would be: what
     * sy__arena_reset keeps it at) only its count */
    sy__arena_chunk *h = c->scratch.head;
    if (h && !h->next && h->size <= c->scratch.chunk_size)
        h->used = 0;
    else if (h)
        sy__arena_reset(&c->scratch);
    /* split first: the same pass tells whether the normaliser has anything
     * to look at (match_prep_init's norm_mask, snapshot.c); the inline
     * split decodes nothing, so only the others read keep_escaped_slashes */
    sy_str path = (*reqp)->path;
    unsigned seen;
    uint64_t sl;
    int split = sy__segments_split_lazy(&c->path, path, &c->alloc, &seen, &sl);
    c->path_state = PATH_READY;
    if (split == 2) {
        /* a short plain rooted path is cut on first need (path_segs): the
         * index walks it by its '/' bits, a literal Path compares it
         * whole, and a route found without captures reads no segment */
        c->path_state = PATH_PENDING;
        c->path_sl = sl;
    }
    if (split < 0) {
        c->path.keep_escaped_slashes = s->prep.keep_escaped_slashes;
        split = sy__segments_split_scan(&c->path, path, &c->scratch, &c->alloc,
                                        &seen);
    }
    if (!split)
        return SY_ENOMEM;
    if (seen & s->prep.norm_mask) {
        if ((rc = normalize_path(c, s, reqp)))
            return rc;
        if ((*reqp)->path.ptr != path.ptr) {
            c->path.keep_escaped_slashes = s->prep.keep_escaped_slashes;
            c->path_state = PATH_READY;
            if (!sy__segments_split(&c->path, (*reqp)->path, &c->scratch,
                                    &c->alloc))
                return SY_ENOMEM;
            seen = SY_SEEN_EMPTY; /* not looked at again: may be */
        }
    }
    c->path_seen = seen;
    c->lazy_list = NULL;
    const sy_request *req = *reqp;
    sy__eval *ev = &c->ev;
    ev->req = req;
    c->host.count = 0;
    /* ev->weight and ev->ncaps are set by whatever evaluates predicates
     * or takes captures, before it does */
    if (__builtin_expect(!s->prep.host_or_time, 1)) {
        /* no port to strip, no Host and no time predicate: the host as
         * given, no labels, the request's time */
        c->host_state = HOST_READY;
        ev->host_str = req->host;
        ev->now_ms = req->now_ms;
        return SY_OK;
    }
    sy_str host = host_for_match(s, req->host);
    /* see host_labels (lead and trail are read for host lists only, which
     * a split or the whole-host table's answer sets) */
    c->host_state = s->prep.needs_host && host.len ? HOST_PENDING : HOST_READY;
    ev->host_str = host;
    ev->now_ms = req->now_ms || !s->prep.needs_time ? req->now_ms
                 : s->clock_ms                      ? s->clock_ms(s->clock_data)
                                                    : sy__now_realtime_ms();
    return SY_OK;
}

/* The host's labels (c->host), split now if not yet: prepare leaves them
 * to the first that needs them (the host walk, a Host predicate), as a
 * host the whole-host table answers needs none. On allocation failure the
 * labels stay empty and the match reports SY_ENOMEM (HOST_OOM). */
static __attribute__((noinline)) void host_split_now(sy_match_ctx *c) {
    c->host_state = HOST_READY;
    int r = sy__segments_split_host_fast(&c->host, c->ev.host_str, &c->alloc);
    if (r < 0)
        r = sy__segments_split_host(&c->host, c->ev.host_str, &c->alloc);
    if (!r) {
        c->host.count = 0;
        c->host.lead = c->host.trail = false;
        c->host_state = HOST_OOM;
        c->budget.exhausted = true; /* stop here; match_common reports it */
    }
}

static inline bool host_labels(sy_match_ctx *c) {
    if (c->host_state == HOST_PENDING)
        host_split_now(c);
    return c->host_state != HOST_OOM;
}

/* The path's segments (c->path), cut now if prepare left them: every
 * reader but a literal Path compare (path.flat) calls this first. */
static inline __attribute__((always_inline)) void path_segs(sy_match_ctx *c) {
    if (c->path_state == PATH_PENDING) {
        c->path_state = PATH_READY;
        sy__split_segs(&c->path, c->path.flat.ptr, c->path.flat.len,
                       c->path_sl);
    }
}

/* path_segs out of line, for the readers off the common path. */
static __attribute__((noinline)) void path_segs_now(sy_match_ctx *c) {
    path_segs(c);
}

/* sy__pred_test, the host's labels split first for a Host predicate
 * (and the path's segments for a Path one). */
static inline bool pred_holds(sy_match_ctx *c, const sy__pred *p) {
    if (c->path_state == PATH_PENDING && p->kind == SY_PK_PATH) {
        /* literals then a rest on a plain path need no segments */
        int q = sy__pred_lit_rest_flat(p, &c->ev);
        if (q >= 0)
            return q;
        path_segs_now(c);
    }
    if (c->host_state == HOST_PENDING && p->kind == SY_PK_HOST) {
        /* a literal decided by the unsplit host needs no labels */
        int q = sy__pred_test_host_flat(p, c->ev.host_str);
        if (q >= 0)
            return q;
        host_split_now(c);
    }
    return sy__pred_test(p, &c->ev);
}

/* The slot of list l's candidate cd, off the hot path: index or overlay. */
static uint32_t cand_slot(const sy_snapshot *s, const sy__cand_list *l,
                          const sy__cand *cd) {
    uint32_t slot;
    if (s->base && sy__index_cand_slot(s->base, cd, &slot))
        return slot;
    return sy__overlay_cand_slot(l, cd);
}

/* The route of list l's candidate `cd`: its own (sy__cand.route) when
 * every candidate names a live slot or the dead filter says its slot
 * lives, else its slot's (NULL: removed), a line of the slot chunks a
 * cold lookup then reads for it alone (and one of the list's slots). */
static inline __attribute__((always_inline)) const struct sy_route *
cand_route(const sy_snapshot *s, const sy__cand_list *l, const sy__cand *cd) {
    if (__builtin_expect(s->prep.cands_live, 1))
        return sy__cand_route(cd);
    uint32_t slot = cand_slot(s, l, cd);
    return !sy__snapshot_maybe_dead(s, slot)
               ? sy__cand_route(cd)
               : sy__snapshot_slot(s, slot)->route;
}

/* Index of the first predicate that fails, or -1 when all hold. `proven`
 * is a predicate the index already proved (skipped), or -1. */
static int first_failing_but(sy_match_ctx *c, const sy_snapshot *s,
                             uint32_t slot, int32_t proven) {
    const sy__slot *sl = sy__snapshot_slot(s, slot);
    const struct sy_route *r = sl->route;
    sy__eval *ev = &c->ev;
    ev->ncaps = 0;
    ev->weight = sl->weight != NONE ? &s->weights[sl->weight] : NULL;
    for (size_t i = 0; i < r->predicate_count; i++)
        if ((int32_t)i != proven && !pred_holds(c, sy__route_cpred(r, i)))
            return (int)i;
    return -1;
}

/* A candidate failed at predicate `f`: if that is its Method, remember the
 * route (as slot << 1 | 1: match.h), so a miss can tell 405 from 404.
 * Costs one load per failure. */
static void note_failure(sy_match_ctx *c, const sy_snapshot *s, uint32_t slot,
                         int f) {
    const struct sy_route *r = sy__snapshot_slot(s, slot)->route;
    if (f >= 0 && c->method_miss_count < MAX_METHOD_MISSES &&
        sy__pred_get_kind(sy__route_cpred(r, f)) == SY_PK_METHOD)
        c->method_misses[c->method_miss_count++] = (uintptr_t)slot << 1 | 1;
}

/* The proven predicate of a candidate its walk does not prove with
 * captures: the list's literal Path (Host), or none (-1). */
static inline int32_t proof_skip(const struct sy_route *r, uint8_t proof) {
    return proof == SY_PROOF_PATH   ? r->literal_path
           : proof == SY_PROOF_HOST ? r->literal_host
                                    : -1;
}

/* A candidate from a list reached through literal edges only: its
 * all-literal Path (or Host) predicate is proven (no captures to take). */
static int candidate_fails(sy_match_ctx *c, const sy_snapshot *s, uint32_t slot,
                           uint8_t proof) {
    const struct sy_route *r = sy__snapshot_slot(s, slot)->route;
    int f = first_failing_but(c, s, slot, proof_skip(r, proof));
    if (f >= 0)
        note_failure(c, s, slot, f);
    return f;
}

/* Append the captures of a walk-proven pattern (SY_CAND_WALK): the
 * request's segments (labels) at its {var}s; false when one is empty (a
 * {var} needs a non-empty segment: the pattern does not hold after all). */
/* The host's first label (a wildcard key's list: not empty, no '.'). */
static sy_str first_label(sy_str host) {
    size_t d = 0;
    while (d < host.len && host.ptr[d] != '.')
        d++;
    return (sy_str){host.ptr, d};
}

static inline bool walk_caps(sy__eval *ev, const sy__cand_list *l,
                             const sy__cand *cd) {
    const sy__segments *segs = l->host ? ev->host : ev->path;
    sy__cand_var one;
    const sy__cand_var *v = cd->nvars ? sy__cand_vars(l->vars, cd, &one) : NULL;
    size_t n = ev->ncaps;
    if (ev->caps_cap - n < cd->nvars)
        return false;
    for (size_t k = 0; k < cd->nvars; k++) {
        sy_str val =
            l->host == SY_LIST_WILD_KEY
                ? first_label(ev->host_str)
                : segs->dec[l->host ? segs->count - 1 - v[k].seg : v[k].seg];
        if (!val.len)
            return false;
        if (v[k].name.ptr) /* else a "*": checked, not captured */
            ev->caps[n++] = (sy__capture){v[k].name, val};
    }
    ev->ncaps = n;
    return true;
}

/* Whether a whole, walk-proven candidate's captures hold (no {var} on an
 * empty segment) without taking them: they are taken on first read
 * (sy__match_caps). false: take them now (walk_caps decides). */
static inline bool caps_later(sy_match_ctx *c, const sy__cand_list *l,
                              const sy__cand *cd) {
    if (cd->nvars > c->ev.caps_cap)
        return false;
    if (!l->host && (c->path_seen & SY_SEEN_EMPTY)) { /* labels never are */
        path_segs_now(c);
        sy__cand_var one;
        const sy__cand_var *v = sy__cand_vars(l->vars, cd, &one);
        for (size_t k = 0; k < cd->nvars; k++)
            if (!c->path.dec[v[k].seg].len)
                return false;
    }
    c->lazy_list = l;
    c->lazy_cand = cd;
    return true;
}

/* Whether a walk-proven candidate's captures surely hold (room for them,
 * no empty segment: labels never are) and no predicate from `from` on
 * takes captures (a Path or Host pattern's come after the walk's): then
 * they are taken on first read (sy__match_caps), the segments perhaps never
 * cut. */
static inline bool caps_sure(const sy_match_ctx *c, const sy__cand_list *l,
                             const sy__cand *cd, const struct sy_route *r,
                             size_t from) {
    if (!cd->nvars || cd->nvars > c->ev.caps_cap ||
        (!l->host && (c->path_seen & SY_SEEN_EMPTY)))
        return false;
    for (size_t i = from; i < r->predicate_count; i++) {
        uint8_t k = sy__route_cpred(r, i)->kind;
        if (k == SY_PK_PATH || k == SY_PK_HOST)
            return false;
    }
    return true;
}

/* A candidate the quick kinds left undecided at predicate `from`
 * (cand_holds): the ones before it hold (a rest Path's capture in ev,
 * without a walk: sy__preds_quick), nothing else captured. The rest in
 * order, but the proven one (a walk-proven one's captures taken at its
 * place, or first when it lies before `from`; should one be empty, the
 * candidate is tested in full), the first that fails noted
 * (note_failure). The budget is made this thread's current one only for
 * the first predicate the quick test leaves (a regex, repeated values:
 * the only part of a lookup that reads it). */
static __attribute__((noinline)) bool
cand_holds_rest(sy_match_ctx *c, const sy_snapshot *s, const sy__cand_list *l,
                const sy__cand *cd, int mbit, bool walk, int32_t proven,
                size_t from) {
    const struct sy_route *r = cand_route(s, l, cd);
    sy__eval *ev = &c->ev;
    sy__budget *saved = NULL;
    bool entered = false, ok = true;
    bool later = walk && (size_t)proven < from && caps_sure(c, l, cd, r, from);
    /* walk_caps reads the segments */
    if (walk && cd->nvars && !l->host && !later)
        path_segs(c);
    if (walk && (size_t)proven < from && !later && !walk_caps(ev, l, cd)) {
        sy__budget_enter(&c->budget, &saved);
        ok = candidate_fails(c, s, cand_slot(s, l, cd), SY_PROOF_NONE) < 0;
        sy__budget_leave(saved);
        return ok;
    }
    for (size_t i = from; i < r->predicate_count; i++) {
        if ((int32_t)i == proven) {
            if (walk && !walk_caps(ev, l, cd)) {
                if (!entered)
                    sy__budget_enter(&c->budget, &saved), entered = true;
                ok = candidate_fails(c, s, cand_slot(s, l, cd), SY_PROOF_NONE) <
                     0;
                break;
            }
            continue;
        }
        const sy__pred *p = sy__route_cpred(r, i);
        int q = i == from ? -1 : sy__pred_test_quick(p, ev, mbit);
        if (q < 0) {
            if (!entered) { /* a Weight's: read only with weight routes */
                const sy__slot *sl =
                    s->prep.weights ? sy__snapshot_slot(s, cand_slot(s, l, cd))
                                    : NULL;
                ev->weight =
                    sl && sl->weight != NONE ? &s->weights[sl->weight] : NULL;
                sy__budget_enter(&c->budget, &saved), entered = true;
            }
            q = pred_holds(c, p);
        }
        if (!q) {
            note_failure(c, s, cand_slot(s, l, cd), (int)i);
            ok = false;
            break;
        }
    }
    if (entered)
        sy__budget_leave(saved);
    if (ok && later) { /* sy__match_caps takes them */
        c->lazy_list = l;
        c->lazy_cand = cd;
    }
    return ok;
}

/* The captures of the route found, which caps_later left: taken now
 * (sy__match_caps, match.h, calls this only when some were left). */
void sy__match_caps_take(sy_match_ctx *c) {
    path_segs(c);
    c->ev.ncaps = 0;
    walk_caps(&c->ev, c->lazy_list, c->lazy_cand);
    c->lazy_list = NULL;
}

/* A candidate its inline data does not decide: the others of the quick
 * kinds in one call (a literal Path behind a proven Host, a Method, a
 * Header's presence), most candidates are decided there; what they leave,
 * cand_holds_rest. Out of line: the inline matcher keeps its registers. */
static __attribute__((noinline)) bool
cand_holds_quick(sy_match_ctx *c, const sy_snapshot *s, const sy__cand_list *l,
                 const sy__cand *cd, int mbit, bool odd_host) {
    const struct sy_route *r = cand_route(s, l, cd);
    bool walk = (cd->flags & SY_CAND_WALK) && l->exact && !odd_host;
    int32_t proven =
        walk ? (int32_t)sy__cand_pred(cd) : proof_skip(r, l->proof);
    size_t np; /* from the candidate: no line of the route's struct */
    const sy__pred *p0 = sy__cand_preds(cd, r, &np);
    c->ev.ncaps = 0; /* the quick loop's rest capture, if any, first */
    int f = sy__preds_quick(p0, np, (size_t)(int64_t)proven, &c->ev, mbit,
                            &c->budget, !walk || !cd->nvars);
    if (f == -1) { /* all hold: the proven one's captures, on first read */
        if (!walk || !cd->nvars)
            return true;
        if (caps_later(c, l, cd))
            return true;
        f = -2 - (int)np; /* walk_caps decides */
    }
    if (f >= 0) {
        note_failure(c, s, cand_slot(s, l, cd), f);
        return false;
    }
    return cand_holds_rest(c, s, l, cd, mbit, walk, proven, (size_t)(-2 - f));
}

/* Does candidate `cd` (route r) of list `l` hold? The index's inline
 * data first: a method bit the route refuses fails it without touching
 * the route; a whole route (SY_CAND_WHOLE) reached by an exact walk
 * holds with its captures taken from the request's segments, one whose
 * Host the walk proves and whose other predicates are Methods and a
 * literal Path (SY_CAND_LIT) when that Path holds on the plain path's
 * text (all inline here, the common cases); a walk-proven one has only
 * its other predicates tested; anything else is tested in full. */
static inline bool cand_holds(sy_match_ctx *c, const sy_snapshot *s,
                              const sy__cand_list *l, const sy__cand *cd,
                              int mbit) {
    if (!(cd->mbits & 1u << sy__cand_mbit(mbit))) {
        /* for a 405: method_reason() checks its other predicates */
        if (c->method_miss_count < MAX_METHOD_MISSES)
            c->method_misses[c->method_miss_count++] =
                (uintptr_t)cand_slot(s, l, cd) << 1 | 1;
        return false;
    }
    /* a host with a leading or trailing '.' has Ant's empty end labels,
     * which the walk does not model: decide those by the pattern */
    bool odd_host = l->host && (c->host.lead || c->host.trail);
    if ((cd->flags & SY_CAND_WHOLE) && l->exact && !odd_host &&
        (mbit != 31 || sy__cand_any_method(cd))) {
        if (!cd->nvars) {
            c->ev.ncaps = 0;
            return true;
        }
        if (caps_later(c, l, cd)) /* sy__match_caps sets ncaps */
            return true;
    } else if ((cd->flags & SY_CAND_LIT) && l->exact && !odd_host &&
               (mbit != 31 || sy__cand_any_method(cd)) && c->path.flat.ptr) {
        /* the methods hold (the mask), the Host is proven: the Path is
         * the first that could fail, and no Method failure is noted */
        if (sy__cand_lit_here(cd)) { /* the route's lines not read */
            uint32_t v = cd->vars;
            sy_str lit = sy__cand_lit_text(cd);
            if (!sy__lit_flat(lit.ptr, lit.len, v & SY_CAND_LIT_REST,
                              v & SY_CAND_LIT_TRAILING, c->path.flat))
                return false;
            c->ev.ncaps = 0;
            return true;
        }
        if (!sy__pred_lit_flat(sy__cand_pred_at(cd, cand_route(s, l, cd),
                                                cd->flags >> SY_CAND_LIT_SHIFT),
                               c->path.flat))
            return false;
        if (!cd->nvars) {
            c->ev.ncaps = 0;
            return true;
        }
        if (caps_later(c, l, cd))
            return true;
    }
    return cand_holds_quick(c, s, l, cd, mbit, odd_host);
}

static sy_match *found_route(sy_match_ctx *c, const sy_snapshot *s,
                             const sy_request *req, const struct sy_route *r) {
    sy_match *m = &c->m; /* m->ctx is c (sy_match_ctx_new); plan_rc is
                          * set with the plan */
    m->snap = s;
    m->req = req;
    m->route = r;
    m->plan_done = false;
    return m;
}

static sy_match *found(sy_match_ctx *c, const sy_snapshot *s,
                       const sy_request *req, uint32_t slot) {
    return found_route(c, s, req, sy__snapshot_slot(s, slot)->route);
}

static int match_linear_now(sy_match_ctx *c, const sy_snapshot *s,
                            const sy_request *req, sy_match **out) {
    if (!host_labels(c))
        return SY_ENOMEM;
    for (size_t i = 0; i < s->route_count; i++) {
        uint32_t slot = sy__snapshot_rank_at(s, i);
        if (sy__snapshot_slot(s, slot)->route->disabled)
            continue;
        int f = first_failing_but(c, s, slot, -1);
        if (f < 0) {
            *out = found(c, s, req, slot);
            return SY_OK;
        }
        note_failure(c, s, slot, f);
        if (c->budget.exhausted)
            return SY_OK; /* no lower route may match instead */
    }
    return SY_OK;
}

/* The linear scan under the request's budget (cand_holds_rest). */
static __attribute__((noinline)) int match_linear(sy_match_ctx *c,
                                                  const sy_snapshot *s,
                                                  const sy_request *req,
                                                  sy_match **out) {
    sy__budget *saved;
    sy__budget_enter(&c->budget, &saved);
    int rc = match_linear_now(c, s, req, out);
    sy__budget_leave(saved);
    return rc;
}

/* A request at least up to its seed (a caller built before
 * content_length existed passes the shorter size). */
static inline bool valid_request(const sy_request *req) {
    return __builtin_expect(req != NULL, 1) &&
           __builtin_expect(req->size >= offsetof(sy_request, content_length),
                            1);
}

/* The arguments of a match: a branch each (no flag arithmetic). */
static inline bool valid_args(const sy_snapshot *h, const sy_match_ctx *c,
                              const sy_request *req, sy_match **out) {
    if (__builtin_expect(!out, 0))
        return false;
    *out = NULL; /* first: no stale result for a host testing it on error */
    if (__builtin_expect(!h, 0) || __builtin_expect(!c, 0))
        return false;
    return valid_request(req);
}

static int match_indexed(sy_match_ctx *c, const sy_snapshot *s,
                         const sy_request *req, sy_match **out);

/* Append `name` to the Allow list unless it is there already. */
static void allow_add(sy_match_ctx *c, const char *name, size_t len) {
    for (const char *p = c->allow, *end = c->allow + c->allow_len; p < end;) {
        const char *q = memchr(p, ',', (size_t)(end - p));
        size_t n = (size_t)((q ? q : end) - p);
        if (n == len && memcmp(p, name, len) == 0)
            return;
        p = q ? q + 2 : end;
    }
    size_t sep = c->allow_len ? 2 : 0;
    if (c->allow_len + sep + len >= sizeof c->allow)
        return; /* a very long list is cut; the status stays 405 */
    memcpy(c->allow + c->allow_len, ", ", sep);
    memcpy(c->allow + c->allow_len + sep, name, len);
    c->allow_len += sep + len;
    c->allow[c->allow_len] = '\0';
}

/* After a miss: 405 when a route failed only on its Method predicate(s):
 * every other predicate of it holds. Runs on misses only, under the
 * request's budget (method_reason). */
static sy_nomatch method_reason_now(sy_match_ctx *c, const sy_snapshot *s) {
    c->allow_len = 0;
    c->allow[0] = '\0';
    host_labels(c); /* a failure is reported by the match (HOST_OOM) */
    path_segs_now(c);
    for (size_t k = 0; k < c->method_miss_count; k++) {
        uintptr_t e = c->method_misses[k];
        const sy__slot *sl = sy__snapshot_slot(
            s, e & 1 ? (uint32_t)(e >> 1)
                     : cand_slot(s, &c->lists[0], (const sy__cand *)e));
        const struct sy_route *r = sl->route;
        if (!r)
            continue; /* removed (tombstoned): never recorded, but cheap */
        c->ev.ncaps = 0;
        c->ev.weight = sl->weight != NONE ? &s->weights[sl->weight] : NULL;
        bool others_hold = true;
        for (size_t i = 0; i < r->predicate_count && others_hold; i++)
            if (sy__pred_get_kind(sy__route_cpred(r, i)) != SY_PK_METHOD)
                others_hold = sy__pred_test(sy__route_cpred(r, i), &c->ev);
        if (!others_hold)
            continue;
        for (size_t i = 0; i < r->predicate_count; i++) {
            const sy__pred *p = sy__route_cpred(r, i);
            if (sy__pred_get_kind(p) != SY_PK_METHOD)
                continue;
            uint32_t mask = sy__pred_method_mask(p);
            for (int bit = 0; bit < 31; bit++) {
                const char *name = sy__method_name(bit);
                if ((mask & (1u << bit)) && name)
                    allow_add(c, name, strlen(name));
            }
            for (size_t j = 0; j < sy__pred_method_other_count(p); j++) {
                const char *name = sy__pred_method_other(p, j);
                allow_add(c, name, strlen(name));
            }
        }
    }
    return c->allow_len ? SY_NOMATCH_METHOD : SY_NOMATCH_NO_ROUTE;
}

static __attribute__((noinline)) sy_nomatch
method_reason(sy_match_ctx *c, const sy_snapshot *s) {
    sy__budget *saved;
    sy__budget_enter(&c->budget, &saved);
    sy_nomatch r = method_reason_now(c, s);
    sy__budget_leave(saved);
    return r;
}

/* Every count the API takes is checked before a size is computed from
 * it: the filter plan sizes its header list from header_count. */
static inline bool headers_fit(const sy_request *req) {
    return __builtin_expect(req->header_count <= SY_MAX_REQUEST_HEADERS, 1);
}

/* Both matchers: check arguments, complete the request, prepare. */
static inline __attribute__((always_inline)) int
match_common(const sy_snapshot *h, sy_match_ctx *c, const sy_request *req,
             sy_match **out, bool linear) {
    if (!valid_args(h, c, req, out))
        return SY_EINVAL;
    c->nomatch = SY_NOMATCH_NONE; /* none from an earlier request */
    if (!headers_fit(req))
        return SY_ELIMIT;
    c->method_miss_count = 0;
    const sy_snapshot *s = sy__snapshot_from_handle(h);
    if (req->size < sizeof(sy_request) || (!req->seed && s->prep.weights))
        req = full_request(c, s, req);
    int rc = prepare(c, s, &req);
    if (rc)
        return rc == SY_PN_BAD_PATH ? SY_OK : rc; /* no match, a reason */
    /* one CPU budget for the whole request, filters included (budget.h);
     * it is made this thread's current one only where predicates run
     * (match_linear, cand_holds_rest, method_reason) */
    sy__budget_start(&c->budget, &s->budget);
    rc = linear ? match_linear(c, s, req, out) : match_indexed(c, s, req, out);
    /* the 405 check runs predicates again: inside the same budget */
    if (rc == SY_OK && !*out && !c->budget.exhausted)
        c->nomatch = method_reason(c, s);
    if (rc == SY_OK && c->budget.exhausted) {
        *out = NULL; /* stopped: no route, whatever was left to try */
        /* no labels, or a regex PCRE2 could not run for memory: no answer */
        if (c->host_state == HOST_OOM || c->budget.nomem)
            rc = SY_ENOMEM;
        else
            c->nomatch = SY_NOMATCH_BUDGET;
    }
    return rc;
}

sy_nomatch sy_match_ctx_nomatch(const sy_match_ctx *c, sy_str *allow) {
    if (allow)
        *allow = c && c->nomatch == SY_NOMATCH_METHOD
                     ? (sy_str){c->allow, c->allow_len}
                     : (sy_str){NULL, 0};
    return c ? c->nomatch : SY_NOMATCH_NONE;
}

int sy_snapshot_match_linear(const sy_snapshot *h, sy_match_ctx *c,
                             const sy_request *req, sy_match **out) {
    return match_common(h, c, req, out, true);
}

int sy_snapshot_match(const sy_snapshot *h, sy_match_ctx *c,
                      const sy_request *req, sy_match **out) {
    return match_common(h, c, req, out, false);
}

/* sy__method_bit with GET, PUT, POST and DELETE (bits 0, 3, 2 and 5)
 * decided inline. */
static inline int method_bit(sy_str m) {
    if (__builtin_expect(m.len == 3, 1)) { /* GET first: the usual one */
        if (memcmp(m.ptr, "GET", 3) == 0)
            return 0;
        if (memcmp(m.ptr, "PUT", 3) == 0)
            return 3;
    } else if (m.len == 4) {
        if (memcmp(m.ptr, "POST", 4) == 0)
            return 2;
    } else if (m.len == 6 && memcmp(m.ptr, "DELETE", 6) == 0) {
        return 5;
    }
    return sy__method_bit(m);
}

static int match_merge(sy_match_ctx *c, const sy_snapshot *s,
                       const sy_request *req, sy_match **out, size_t n,
                       int mbit);

/* A host of 1..64 bytes without an empty label: no '.' first, last or
 * after another (index_host_keyed). false: walk it. */
static inline bool host_plain(sy_str host) {
#if defined(__SSE2__)
    if (host.len - 1 >= 64)
        return false;
    uint64_t dot, odd;
    path_masks(host.ptr, host.len, &dot, &odd);
    return !((dot & 1) | (dot >> (host.len - 1)) | (dot & (dot >> 1)));
#else
    (void)host;
    return false;
#endif
}

static int match_indexed(sy_match_ctx *c, const sy_snapshot *s,
                         const sy_request *req, sy_match **out) {
    int mbit = method_bit(req->method);
    /* an empty Host matches no Host pattern (as SCG's null host): its
     * routes are no candidates, and no walk may prove them. A host the
     * whole-host table knows needs no labels and no host walk; one its
     * wildcard keys know needs no walk. Without
     * Host predicates (HOST_READY, no labels) there is no host walk
     * either. */
    const sy__segments *host = NULL;
    size_t pre = 0;
    if (c->host_state == HOST_PENDING) { /* a host; Host predicates */
        if (index_host_exact(s->base, c->ev.host_str, &c->lists[0])) {
            pre = 1; /* no labels: a host list sees no odd end */
            c->host.lead = c->host.trail = false;
        } else if (index_host_wild(s->base, c->ev.host_str, &c->lists[0])) {
            pre = 1; /* no walk, no labels: the captures are the first
                      * label (walk_caps); no odd end (its probe) */
            c->host.lead = c->host.trail = false;
        } else if (index_host_keyed(s->base) && host_plain(c->ev.host_str)) {
            /* no walk: it would find nothing (labels split only if a
             * Host predicate asks) */
        } else if (!host_labels(c)) {
            return SY_ENOMEM;
        } else {
            host = &c->host;
        }
    }
    size_t n;
    if (!host && s->prep.path_lazy) { /* index_path_none, one load */
        n = 0; /* a table of host routes after a whole-host hit */
    } else if (c->path_state == PATH_PENDING) { /* walked by its bits */
        n = index_lookup_flat(s->base, &c->path, c->path_sl, host, mbit,
                              c->lists + pre, MAX_LISTS - pre);
    } else {
        n = sy__index_lookup(s->base, &c->path, host, mbit, c->lists + pre,
                             MAX_LISTS - pre);
    }
    if (n != SIZE_MAX)
        n += pre;
    if (n != SIZE_MAX && s->prep.ov_live) {
        const sy__overlay *const *ov = (const sy__overlay *const *)s->ov;
        /* routes filed under a host key need the labels */
        bool hk = c->ev.host_str.len && sy__overlay_hosts(ov, 2);
        if (hk && !host_labels(c))
            return SY_ENOMEM;
        path_segs_now(c);
        size_t m = sy__overlay_lookup(ov, 2, &c->path, hk ? &c->host : NULL,
                                      c->lists + n, MAX_LISTS - n);
        n = m == SIZE_MAX ? SIZE_MAX : n + m;
    }
    if (n == SIZE_MAX)
        return match_linear(c, s, req, out);

    if (n == 1) { /* the common case: one list, already in rank order */
        const sy__cand_list *l = &c->lists[0];
        /* the bounds in locals: the stores below could alias the list */
        const uint32_t bit = 1u << sy__cand_mbit(mbit);
        for (const sy__cand *cd = l->c, *end = cd + l->len; cd < end; cd++) {
            /* the method bit first, inline; a refused candidate is kept
             * for a 405, its slot found only on a miss (method_reason) */
            if (!(cd->mbits & bit)) {
                if (c->method_miss_count < MAX_METHOD_MISSES &&
                    (s->prep.cands_live || cand_route(s, l, cd)))
                    c->method_misses[c->method_miss_count++] = (uintptr_t)cd;
                continue;
            }
            /* the route only for the dead filter and the one found */
            if ((s->prep.cands_live || cand_route(s, l, cd)) &&
                cand_holds(c, s, l, cd, mbit)) {
                *out = found_route(c, s, req, cand_route(s, l, cd));
                return SY_OK;
            }
            if (c->budget.exhausted)
                return SY_OK;
        }
        return SY_OK;
    }

    return match_merge(c, s, req, out, n, mbit);
}

/* Several lists: a k-way merge by rank key; the first route that holds
 * wins. Out of line, so the one-list path above keeps its registers. */
static __attribute__((noinline)) int
match_merge(sy_match_ctx *c, const sy_snapshot *s, const sy_request *req,
            sy_match **out, size_t n, int mbit) {
    for (size_t i = 0; i < n; i++)
        c->heads[i] = 0;
    uint64_t last = UINT64_MAX;
    for (;;) {
        size_t best = SIZE_MAX;
        uint64_t best_key = UINT64_MAX;
        for (size_t i = 0; i < n; i++) {
            const sy__cand_list *l = &c->lists[i];
            for (; c->heads[i] < l->len; c->heads[i]++) {
                const sy__slot *sl =
                    sy__snapshot_slot(s, cand_slot(s, l, &l->c[c->heads[i]]));
                if (sl->route && sl->key != last) {
                    if (sl->key < best_key) {
                        best_key = sl->key;
                        best = i;
                    }
                    break;
                }
            }
        }
        if (best == SIZE_MAX)
            return SY_OK;
        const sy__cand_list *l = &c->lists[best];
        const sy__cand *cd = &l->c[c->heads[best]++];
        last = best_key;
        if (cand_holds(c, s, l, cd, mbit)) {
            *out = found(c, s, req, cand_slot(s, l, cd));
            return SY_OK;
        }
        if (c->budget.exhausted)
            return SY_OK;
    }
}

int sy_snapshot_explain(const sy_snapshot *h, sy_match_ctx *c,
                        const sy_request *req, sy_explain_fn fn, void *data) {
    if (!h || !c || !fn || !valid_request(req))
        return SY_EINVAL;
    if (!headers_fit(req))
        return SY_ELIMIT;
    const sy_snapshot *s = sy__snapshot_from_handle(h);
    c->nomatch = SY_NOMATCH_NONE; /* the last match's reason is gone */
    c->method_miss_count = 0;
    req = full_request(c, s, req);
    int rc = prepare(c, s, &req);
    if (rc)
        return rc == SY_PN_BAD_PATH ? SY_OK : rc; /* nothing can match */
    if (!host_labels(c))
        return SY_ENOMEM;
    sy__budget *saved;
    sy__budget_start(&c->budget, &s->budget);
    sy__budget_enter(&c->budget, &saved);
    for (size_t i = 0; i < s->route_count; i++) {
        uint32_t slot = sy__snapshot_rank_at(s, i);
        const struct sy_route *r = sy__snapshot_slot(s, slot)->route;
        int stop;
        if (r->disabled) {
            stop = fn(data, r, false, -1, "disabled");
        } else {
            int f = first_failing_but(c, s, slot, -1);
            stop = fn(data, r, f < 0, f,
                      f < 0 ? NULL : sy_route_predicate_name(r, (size_t)f));
        }
        if (stop)
            break;
    }
    sy__budget_leave(saved);
    return SY_OK;
}
