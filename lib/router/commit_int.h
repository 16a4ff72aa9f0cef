/*
 * commit_int.h - a commit's working state, shared by the commit engine
 * (commit.c: running the steps, publishing, references, sources) and the
 * steps themselves (commit_steps.c: documents, rollbacks, one-route
 * changes, instance lists, deriving the working snapshots). Private to
 * those two files; commit.c calls down into commit_steps.c, never back.
 */
#ifndef SY_COMMIT_INT_H
#define SY_COMMIT_INT_H

#include "router/commit.h"
#include "snapshot/snapshot.h"

typedef struct ptr_vec {
    void **v;
    size_t n, cap;
} ptr_vec;

static inline int sy__vec_push(const sy__alloc *a, ptr_vec *pv, void *p) {
    if (pv->n == pv->cap) {
        void **v = sy__grow(a, pv->v, &pv->cap, pv->n + 1, 16, sizeof *v);
        if (!v)
            return SY_ENOMEM;
        pv->v = v;
    }
    pv->v[pv->n++] = p;
    return SY_OK;
}

/* A source's state as the commit's steps see it; copied back on success. */
typedef struct src_state {
    const char *version; /* borrowed: the source's or a kept document's */
    uint64_t checksum;
    bool applied, modified, touched;
    uint32_t next_pos;
    /* the documents to keep in the history, oldest first: each apply's,
     * or the kept one a rollback put back (borrowed until the sources
     * follow; at most opts.history, the oldest dropped first). The
     * source's history as the steps see it is its live one followed by
     * these, the newest opts.history of all (sy__commit_history_at) */
    sy__history_entry *pend;
    size_t pend_count, pend_cap;
    /* a rollback left no memo (it parsed nothing): the live one goes */
    bool memo_drop;
    int outcome;                /* 0 none, 1 applied, 2 skipped */
    struct sy__span_memo *memo; /* this commit's last apply's memo, owned */
    size_t memo_count;
} src_state;

typedef struct commit {
    sy_router *r;
    const sy_snapshot *cur;  /* published when the commit started */
    const sy_snapshot *work; /* cur or the last derived snapshot */
    uint64_t generation;     /* of every derived snapshot */
    ptr_vec inter;           /* derived snapshots, unpublished */
    ptr_vec touched;         /* routes any step added or removed */
    ptr_vec owned;           /* route references held until the end */
    ptr_vec docs;            /* parsed documents, freed at the end */
    src_state *st;
    uint64_t derive_us;
    /* touched[0, held_adds): routes the working snapshot surely holds
     * (the first derive that touched routes added them; no derive touched
     * routes after it), so the publish need not look their ids up */
    size_t held_adds;
    bool dry; /* a check: breaker entries are looked at, not claimed */
    /* where each checked route that runs a breaker stands in its change
     * (an error's path), and the router's breaker settings the publish
     * leaves (commit_brk.c) */
    struct sy__brk_at *brk_at;
    size_t brk_at_n, brk_at_cap;
    struct sy__brk_delta *brk_d;
    size_t brk_d_n, brk_d_cap;
    struct sy__brk_final *brk_final;
    size_t brk_final_n;
    /* the keys whose settings the commit gives the policy store once it
     * is published (routers sharing it are told of each other's) */
    struct sy__brk_store *brk_store;
    size_t step; /* the change the steps are on (its index in the set) */
    /* a lenient change set: routes whose breaker settings clash are
     * weighed on the whole set and left out (commit_brk.c); brk_leave:
     * those the runs before found, left out by this one (rerun: the last
     * run allowed, refused as a strict one is) */
    bool may_leave, rerun;
    struct sy__brk_leave *brk_leave;
    size_t brk_leave_n;
} commit;

/* sy__commit_brk_check of a lenient change set: routes to leave out were
 * found (c->brk_leave); the commit runs again leaving them out. */
#define SY__BRK_LEAVE 1

static inline int sy__commit_nomem(sy_error *err) {
    return sy__error_set(err, SY_ENOMEM, "", "out of memory");
}

/* ---- commit_brk.c: routes naming one breaker agree on its settings ---- */

/* Route rt, which runs a breaker, is "<list>[<index>]" (list NULL:
 * "route") in its change. */
int sy__commit_brk_note(commit *c, const struct sy_route *rt, const char *list,
                        unsigned index, sy_error *err);
/* A route the steps touched that the snapshot to publish holds and the
 * live one does not (added true), or the reverse: its breaker, if any,
 * is weighed by sy__commit_brk_check. SY_ENOMEM. */
int sy__commit_brk_add(commit *c, const struct sy_route *rt, bool added);
/* SY_EARG when the snapshot to publish (c->work) would hold two routes
 * naming one breaker with different settings, at the later route's
 * CircuitBreaker, naming the other route and the first setting that
 * differs (a lenient change set's first run: SY__BRK_LEAVE, the routes
 * to leave out in c->brk_leave: those of other settings than the live
 * routes that stay, else than the set's first route naming it); else what the
 * router's map of breaker settings becomes is kept for sy__commit_brk_follow,
 * with the settings it first gives or changes (and the keys it no longer names)
 * for the policy store. */
int sy__commit_brk_check(commit *c, sy_error *err);
/* Lenient: a route of document `doc` (source si's) left out because it
 * gives its breaker other settings than live routes that stay (another
 * source's, or one the document keeps as it is): its index in
 * doc->routes and its error, at its CircuitBreaker, naming such a route. */
typedef struct sy__brk_skip {
    size_t i;
    sy_error e;
} sy__brk_skip;
struct sy_document;
/* The routes a lenient apply of `doc` to source si leaves out for their
 * breaker settings, in document order (*out NULL, *nout 0: none; the
 * caller frees *out; rctx: the walk's, to pass the routes it shares by
 * position unread). Weighed against the published routes' settings
 * map and the working snapshot; the publish's check still weighs the
 * whole commit. SY_ENOMEM. */
struct reuse_ctx;
int sy__commit_brk_lenient(commit *c, uint32_t si,
                           const struct sy_document *doc,
                           const struct reuse_ctx *rctx, sy__brk_skip **out,
                           size_t *nout, sy_error *err);
/* A one-route change (c->step) of a lenient change set that the run
 * leaves out for its breaker settings: its error an issue of rep (and an
 * empty diff), *left set; else nothing. SY_ENOMEM. */
int sy__commit_brk_left_out(commit *c, struct sy_report *rep, bool *left,
                            sy_error *err);
/* Published: the router's map of breaker settings follows, its settings
 * and setter bits in the store (taken only now: a commit not published
 * leaves the store as it was), and another router's other settings are
 * logged. */
void sy__commit_brk_follow(commit *c);
void sy__commit_brk_free(commit *c);

/* Run one staged change on the working state: its part report in *rep
 * (also on failure, when there is one). */
int sy__commit_step(commit *c, const sy__change *ch, sy_report **rep,
                    sy_error *err);

#endif
