/*
 * commit_steps.c - the steps of a commit, each run on the working
 * snapshot the step before left (commit_int.h): a source's document (parse
 * reusing live routes by bytes or by meaning, skip when already live, diff
 * against the source's working routes), a rollback to a kept document,
 * one-route upserts, removes and enables, and instance lists. A step
 * derives the next working snapshot and fills its part report; it never
 * publishes.
 */
#include "def/def.h"
#include "policy/host_runs.h"
#include "router/commit_int.h"
#include "router/commit_reuse.h"
#include "router/report.h"
#include "service/service.h"
#include "snapshot/diff.h"

#include <stdio.h>

#define NONE SY_NONE

static bool same_text(const char *a, const char *b) {
    return a && b && strcmp(a, b) == 0;
}

/* ---- the steps ---- */

/* Policies the routes of changes ch[0, n) and the default filters cannot
 * run together, and a breaker entry for each route's breaker, before
 * anything is derived (list: the document's "routes", NULL: one route).
 * known_free: every route is known to run neither policy (a document's
 * parse noted it: sy_document.policy_some), so without a default
 * breaker to claim entries for no route needs reading (at 100,000 routes
 * a cache miss each: the routes were built long before). */
static int check_change_policies(commit *c, const sy__route_change *ch,
                                 size_t n, const char *list, bool known_free,
                                 sy_error *err) {
    int rc = SY_OK;
    if (known_free && !sy__router_checks_every_route(c->r))
        return SY_OK;
    for (size_t i = 0; rc == SY_OK && i < n; i++) {
        /* a large document's routes are no longer in the cache: the one
         * line the check reads, ahead (a hint only) */
        if (i + 8 < n && ch[i + 8].route)
            __builtin_prefetch(&ch[i + 8].route->more);
        if (!ch[i].route)
            continue;
        unsigned at = (unsigned)(ch[i].key & 0xffffffu);
        uint64_t bk = 0;
        rc = sy__router_check_policies(c->r, ch[i].route, list, at, !c->dry,
                                       &bk, err);
        /* where its breaker stands, should its settings clash with
         * another route's (sy__commit_brk_check, at the publish) */
        if (rc == SY_OK && bk)
            rc = sy__commit_brk_note(c, ch[i].route, list, at, err);
    }
    return rc;
}

/* Derive the next working snapshot from `ch` (and cfg's services): the
 * changes' routes and the removed ones are noted as touched. The working
 * snapshot it replaces goes at once when this commit derived it: every
 * route it holds is held by the live table or by the commit (owned,
 * documents), and what the two snapshots share is counted (chunks,
 * index), so a commit keeps one working snapshot, not one per change. */
static int commit_derive(commit *c, const sy__snapshot_config *cfg,
                         const sy__route_change *ch, size_t n, const char *list,
                         bool known_free, sy_error *err) {
    const sy__alloc *a = &c->r->alloc;
    uint64_t t0 = sy__now_monotonic_us();
    int rc = check_change_policies(c, ch, n, list, known_free, err);
    if (rc)
        return rc;
    sy__derive_result d;
    rc = sy__snapshot_derive(&(sy__derive_input){.alloc = a,
                                                 .base = c->work,
                                                 .config = cfg,
                                                 .changes = ch,
                                                 .change_count = n,
                                                 .generation = c->generation},
                             &d, err);
    if (rc)
        return rc;
    sy_snapshot *next = d.snapshot;
    /* c->inter holds at most the one working snapshot */
    bool replace = c->inter.n && c->inter.v[c->inter.n - 1] == c->work;
    rc = replace ? SY_OK : sy__vec_push(a, &c->inter, next);
    size_t t0n = c->touched.n;
    for (size_t i = 0; rc == SY_OK && i < n; i++)
        if (ch[i].route)
            rc = sy__vec_push(a, &c->touched, ch[i].route);
    /* every change's route has a slot in `next` */
    size_t adds = c->touched.n - t0n;
    for (size_t i = 0; rc == SY_OK && i < d.removed_count; i++)
        rc = sy__vec_push(a, &c->touched, d.removed[i]);
    sy__free(a, d.removed);
    if (rc) {
        if (c->inter.n && c->inter.v[c->inter.n - 1] == next)
            c->inter.n--;
        sy__snapshot_destroy(next);
        return sy__commit_nomem(err);
    }
    if (replace) {
        sy__snapshot_destroy((sy_snapshot *)(uintptr_t)c->work);
        c->inter.v[c->inter.n - 1] = next;
    }
    if (t0n == 0)
        c->held_adds = adds;
    else if (adds || d.removed_count)
        c->held_adds = 0;
    c->work = next;
    c->derive_us += sy__now_monotonic_us() - t0;
    return SY_OK;
}

/* The document source si keeps `back` places from its newest (0: the
 * newest) as the steps see its history: the live one followed by this
 * commit's, the newest opts.history of all; NULL past the oldest. */
static const sy__history_entry *history_at(const commit *c, uint32_t si,
                                           size_t back) {
    const sy__source *s = &c->r->sources[si];
    const src_state *st = &c->st[si];
    size_t n = s->history_count + st->pend_count;
    if (n > c->r->opts.history)
        n = c->r->opts.history;
    if (back >= n)
        return NULL;
    if (back < st->pend_count)
        return &st->pend[st->pend_count - 1 - back];
    return &s->history[s->history_count - 1 - (back - st->pend_count)];
}

/* Keep `e` (a copy; its arrays borrowed until the sources follow) as source
 * si's newest document, as a single call would: the oldest goes when the
 * commit's own list holds opts.history. */
static int history_note(commit *c, uint32_t si, const sy__history_entry *e,
                        sy_error *err) {
    src_state *st = &c->st[si];
    size_t cap = c->r->opts.history;
    if (st->pend_count == cap) {
        memmove(st->pend, st->pend + 1, (cap - 1) * sizeof *st->pend);
        st->pend_count--;
    } else if (st->pend_count == st->pend_cap) {
        size_t n = st->pend_cap ? 2 * st->pend_cap : 2;
        if (n > cap)
            n = cap;
        sy__history_entry *v =
            sy__realloc(&c->r->alloc, st->pend, n * sizeof *v);
        if (!v)
            return sy__commit_nomem(err);
        st->pend = v;
        st->pend_cap = n;
    }
    st->pend[st->pend_count++] = *e;
    return SY_OK;
}

/* The memo of source si's last apply: this commit's, else the live one. */
static sy__span_memo *source_memo(commit *c, uint32_t si, size_t *count) {
    src_state *st = &c->st[si];
    sy__source *s = &c->r->sources[si];
    if (!st->memo && st->memo_drop) { /* a rollback came before */
        *count = 0;
        return NULL;
    }
    *count = st->memo ? st->memo_count : s->memo_count;
    return st->memo ? st->memo : s->memo;
}

/* A one-route change replaced or removed the route at document position
 * pos: its memo entry goes, so every entry describes the route at its
 * position (def.h sy__def_reuse memo; a route upserted later takes a
 * position past the memo, next_pos). A failed commit leaves the entry
 * gone: the next apply reads that route. */
static void memo_forget(commit *c, uint32_t si, uint32_t pos) {
    size_t n;
    sy__span_memo *m = source_memo(c, si, &n);
    if (m && pos < n)
        m[pos].span_len = 0;
}

/* Derive the next snapshot from a document's changes (and free them),
 * the parse time (since t0) reported first; known_free as
 * check_change_policies. */
static int derive_document(commit *c, sy__route_change *ch, size_t nch,
                           bool envelope, bool known_free, sy_report *rep,
                           uint64_t t0, sy_error *err) {
    rep->parse_us = sy__now_monotonic_us() - t0;
    sy__snapshot_config cfg = sy__router_snapshot_config(c->r);
    int rc = commit_derive(c, &cfg, ch, nch, envelope ? "routes" : "",
                           known_free, err);
    sy__free(&c->r->alloc, ch);
    return rc;
}

/* The walk of document_changes over a document's routes. */
typedef struct doc_walk {
    commit *c;
    uint32_t si;
    const sy_document *doc;
    const reuse_ctx *rctx;
    sy_report *rep;
    const sy_snapshot *w;
    const struct sy_route **keep; /* routes for the diff (not shared) */
    sy__route_change *ch;
    /* Routes the parse shared by bytes are the live route object of their
     * slot: found through the span table without an id lookup, and left
     * out of the diff (they are unchanged; `shared` marks their slots). */
    bool *shared;
    size_t kept, nch, nshared;
    size_t left_out; /* routes left out as issues of a lenient document */
    bool *left;      /* which (by index; NULL until one is left out) */
    /* some kept route's rank key changed: the report's reordered routes
     * are worked out (reordered_routes); else none moved */
    bool moved;
    /* no route runs a policy and no default breaker claims entries: the
     * lenient check reads no route (check_change_policies) */
    bool policy_free;
    /* lenient: routes left out for their breaker settings, in document
     * order, and the next one (sy__commit_brk_lenient) */
    sy__brk_skip *skip;
    size_t nskip, skip_at;
} doc_walk;

/* A route ahead that will be read (not one shared by position, which the
 * walk decides without reading it): its order, id and fingerprint. */
static void prefetch_doc_route(const doc_walk *dw, size_t i) {
    const sy_document *doc = dw->doc;
    if (i + 8 >= doc->route_count)
        return;
    const struct sy_route *ah = doc->routes[i + 8];
    uint32_t pa = doc->prev ? doc->prev[i + 8] : UINT32_MAX;
    if (!(pa < dw->rctx->at_count && dw->rctx->at[pa].route == ah)) {
        __builtin_prefetch(&ah->order);
        __builtin_prefetch(&ah->fingerprint);
    }
}

/* An id owned by another source is an error of this document: fails a
 * strict apply, an issue of a lenient one. */
static int other_source_id(doc_walk *dw, const struct sy_route *rt,
                           uint32_t pos, uint32_t slot, sy_error *err) {
    sy_router *r = dw->c->r;
    sy_error e;
    char path[64];
    snprintf(path, sizeof path, "%s[%u].id", dw->doc->envelope ? "routes" : "",
             pos);
    sy__error_set(&e, SY_EDUPLICATE, path,
                  "route id '%s' is already defined by source '%s'", rt->id,
                  r->sources[sy__snapshot_slot(dw->w, slot)->source].name);
    if (!r->opts.lenient) {
        if (err)
            *err = e;
        return SY_EDUPLICATE;
    }
    dw->left_out++;
    return sy__report_add_issue(dw->rep, &e) ? sy__commit_nomem(err) : SY_OK;
}

/* The document's route i: unchanged and shared as it is, or a change (a
 * new route, or the live one at a new rank). */
static int route_change(doc_walk *dw, size_t i, sy_error *err) {
    const sy_document *doc = dw->doc;
    const sy_snapshot *w = dw->w;
    const struct sy_route *rt = doc->routes[i];
    uint32_t pos = doc->positions[i];
    /* lenient: its breaker's settings clash with live routes that stay:
     * left out as an issue, as an invalid route is (a live one of its id
     * goes) */
    if (dw->skip_at < dw->nskip && dw->skip[dw->skip_at].i == i) {
        dw->left_out++;
        return sy__report_add_issue(dw->rep, &dw->skip[dw->skip_at++].e)
                   ? sy__commit_nomem(err)
                   : SY_OK;
    }
    if (pos > SY_RANK_POS_MAX)
        return sy__error_set(err, SY_ELIMIT, "routes",
                             "a source holds at most %u routes",
                             SY_RANK_POS_MAX + 1);
    /* a route the parse shared by its bytes and position is that
     * position's slot; any other is found by id, and is shared when the
     * slot holds this very route object (shared by bytes or by meaning) */
    uint32_t prev = doc->prev ? doc->prev[i] : UINT32_MAX;
    bool by_pos = prev < dw->rctx->at_count && dw->rctx->at[prev].route == rt;
    if (by_pos) {
        /* the commonest case reads no route: the slot holds this very
         * route, so its key differs from the one wanted at most in the
         * position */
        uint32_t slot = dw->rctx->at[prev].slot;
        dw->shared[slot] = true;
        dw->nshared++;
        if ((sy__snapshot_slot(w, slot)->key & 0xffffffu) == pos)
            return SY_OK; /* unchanged, same rank: shared as it is */
    }
    /* lenient: a route whose policies cannot run beside the default
     * filters (SY_EARG), a forward: route beside a default path filter
     * (SY_ENOTRUN), is this document's issue and left out, as an
     * invalid route is (a live one of its id goes); strict documents fail
     * at commit_derive. A store with no breaker entry for it (SY_ELIMIT)
     * is no fault of the route: commit_derive's claim decides (it may
     * reap owners gone) and refuses the apply, the live one stays. A
     * route shared by position was checked when it became live. */
    if (!by_pos && dw->c->r->opts.lenient && !dw->policy_free) {
        sy_error e;
        int prc = sy__router_check_policies(dw->c->r, rt,
                                            dw->doc->envelope ? "routes" : "",
                                            pos, false, NULL, &e);
        if (prc == SY_EARG || prc == SY_ENOTRUN) {
            dw->left_out++;
            if (!dw->left && !(dw->left = sy__calloc(&dw->c->r->alloc,
                                                     doc->route_count + 1, 1)))
                return sy__commit_nomem(err);
            dw->left[i] = true;
            return sy__report_add_issue(dw->rep, &e) ? sy__commit_nomem(err)
                                                     : SY_OK;
        }
    }
    /* (an empty table holds no id: a first apply hashes none) */
    uint32_t slot = by_pos           ? dw->rctx->at[prev].slot
                    : w->route_count ? sy__snapshot_find_slot(w, rt->id)
                                     : NONE;
    const sy__slot *sl = slot != NONE ? sy__snapshot_slot(w, slot) : NULL;
    if (sl && sl->route == rt && sl->source == dw->si && !dw->shared[slot]) {
        dw->shared[slot] = true;
        dw->nshared++;
    }
    if (sl && sl->source != dw->si)
        return other_source_id(dw, rt, pos, slot, err);
    if (!dw->shared[sl ? slot : w->slot_count])
        dw->keep[dw->kept++] = rt;
    uint64_t key = sy__rank_key(rt->order, dw->si, pos);
    if (sl && sl->key != key)
        dw->moved = true;
    bool same_meaning = sl && (sl->route == rt || sy__def_route_fp(sl->route) ==
                                                      sy__def_route_fp(rt));
    if (same_meaning && sl->key == key)
        return SY_OK; /* unchanged, same rank: shared as it is */
    /* same meaning at a new rank: keep sharing the compiled route */
    struct sy_route *use = same_meaning ? sl->route : (struct sy_route *)rt;
    /* the id's hash as the parse took it (the memo's), so the derive
     * does not read the id */
    uint32_t h = doc->memo && pos < doc->memo_count && doc->memo[pos].span_len
                     ? doc->memo[pos].id_hash
                     : 0;
    dw->ch[dw->nch++] = (sy__route_change){rt->id, use, key, dw->si, h};
    return SY_OK;
}

/* The report's reordered routes, when some kept route's rank key changed
 * (dw->moved): every route of the document kept from the source's live
 * ones (shared or not, but those left out), its old and new rank keys.
 * The walk only notes that a key changed, so an apply that moves nothing
 * pays no more than the flag. */
static int reordered_routes(doc_walk *dw, sy_error *err) {
    const sy_document *doc = dw->doc;
    const sy_snapshot *w = dw->w;
    sy_router *r = dw->c->r;
    sy__rank_pair *p =
        sy__malloc(&r->alloc, (doc->route_count + 1) * sizeof *p);
    if (!p)
        return sy__commit_nomem(err);
    size_t n = 0;
    for (size_t i = 0; i < doc->route_count; i++) {
        if (dw->left && dw->left[i])
            continue;
        const struct sy_route *rt = doc->routes[i];
        uint32_t prev = doc->prev ? doc->prev[i] : UINT32_MAX;
        bool by_pos =
            prev < dw->rctx->at_count && dw->rctx->at[prev].route == rt;
        uint32_t slot = by_pos ? dw->rctx->at[prev].slot
                               : sy__snapshot_find_slot(w, rt->id);
        const sy__slot *sl = slot != NONE ? sy__snapshot_slot(w, slot) : NULL;
        if (sl && sl->source == dw->si)
            p[n++] = (sy__rank_pair){
                sy__rank_key(rt->order, dw->si, doc->positions[i]), sl->key,
                rt->id};
    }
    int rc = sy__diff_set_reordered(dw->rep->diff, p, n);
    sy__free(&r->alloc, p);
    return rc ? sy__commit_nomem(err) : SY_OK;
}

/* The diff of the routes kept against the source's live ones (but the
 * shared), and a change removing each route the document dropped. */
static int removed_changes(doc_walk *dw, sy_error *err) {
    sy_router *r = dw->c->r;
    sy_report *rep = dw->rep;
    size_t old_count = 0;
    const struct sy_route **old =
        sy__reuse_source_routes(dw->rctx, dw->shared, &old_count);
    int rc = SY_OK;
    if (!old || sy__diff_routes(&r->alloc, old, old_count, dw->keep, dw->kept,
                                &rep->diff))
        rc = sy__commit_nomem(err);
    sy__free(&r->alloc, old);
    if (rc)
        return rc;
    sy__diff_add_unchanged(rep->diff, dw->nshared);
    if (dw->moved && (rc = reordered_routes(dw, err)))
        return rc;
    for (size_t i = 0; i < sy_diff_removed_count(rep->diff); i++)
        dw->ch[dw->nch++] = (sy__route_change){sy_diff_removed(rep->diff, i),
                                               NULL, 0, dw->si, 0};
    return SY_OK;
}

/* The changes that make source `si` hold exactly the document's routes:
 * one per route that is new or moved, then the diff and the removals. */
static int document_changes(commit *c, uint32_t si, const sy_document *doc,
                            reuse_ctx *rctx, sy_report *rep,
                            sy__route_change **out, size_t *nout,
                            sy_error *err) {
    sy_router *r = c->r;
    const sy_snapshot *w = c->work;
    size_t n = sy_document_route_count(doc);
    doc_walk dw = {
        .c = c, .si = si, .doc = doc, .rctx = rctx, .rep = rep, .w = w};
    dw.policy_free = !doc->policy_some && !sy__router_checks_every_route(r);
    dw.keep = sy__malloc(&r->alloc, (n + 1) * sizeof *dw.keep);
    dw.ch = sy__malloc(&r->alloc, (n + w->route_count + 1) * sizeof *dw.ch);
    dw.shared = sy__calloc(&r->alloc, (size_t)w->slot_count + 1, 1);
    int rc = SY_OK;
    if (!dw.keep || !dw.ch || !dw.shared)
        rc = sy__commit_nomem(err);
    if (rc == SY_OK && r->opts.lenient && !dw.policy_free)
        rc = sy__commit_brk_lenient(c, si, doc, rctx, &dw.skip, &dw.nskip, err);
    for (size_t i = 0; rc == SY_OK && i < n; i++) {
        prefetch_doc_route(&dw, i);
        rc = route_change(&dw, i, err);
    }
    /* a lenient document none of whose routes is left to run is refused,
     * as one of invalid routes only is (apply_document): it would empty
     * the source */
    if (rc == SY_OK && n && dw.left_out == n)
        rc = sy__error_set(err, SY_EINVALIDDOC, "",
                           "no route of the document is valid (%zu invalid); "
                           "nothing changed",
                           sy_report_issue_count(rep));
    if (rc == SY_OK)
        rc = removed_changes(&dw, err);
    sy__free(&r->alloc, dw.keep);
    sy__free(&r->alloc, dw.shared);
    sy__free(&r->alloc, dw.skip);
    sy__free(&r->alloc, dw.left);
    if (rc) {
        sy__free(&r->alloc, dw.ch);
        return rc;
    }
    *out = dw.ch;
    *nout = dw.nch;
    return SY_OK;
}

static int apply_document(commit *c, uint32_t si, const char *json, size_t len,
                          bool force, reuse_ctx *rctx, sy_report *rep,
                          sy_error *err) {
    sy_router *r = c->r;
    src_state *st = &c->st[si];
    uint64_t t0 = sy__now_monotonic_us();
    sy_document *doc = NULL;
    /* Parsed with the router's own options (r->popts: registry, limits,
     * lenient or strict), set when the router is created and never changed:
     * so a live route built from the same bytes is the route those bytes
     * build now, and the parse may share it (reuse_bytes). */
    sy__def_reuse reuse = sy__reuse_for_parse(rctx);
    /* the memo of the source's last apply (this commit's, else the live
     * one): its entries name live routes only, as a one-route change
     * forgets the entry of the route it replaces or removes
     * (memo_forget), so none can name a freed route */
    reuse.memo = source_memo(c, si, &reuse.memo_count);
    rctx->memo = reuse.memo;
    rctx->memo_count = reuse.memo_count;
    int rc =
        sy__document_parse_reusing(json, len, &r->popts, &reuse, &doc, err);
    if (rc)
        return rc;
    if (sy__vec_push(&r->alloc, &c->docs, doc)) {
        sy_document_free(doc);
        return sy__commit_nomem(err);
    }
    const char *version = sy_document_version(doc);
    if (version && !(rep->version = sy__strdup(&r->alloc, version)))
        return sy__commit_nomem(err);
    /* a lenient apply must not drop routes silently: no room to report
     * an issue fails the apply */
    for (size_t i = 0; i < sy_document_issue_count(doc); i++)
        if (sy__report_add_issue(rep, sy_document_issue(doc, i)))
            return sy__commit_nomem(err);
    if (sy_document_route_count(doc) == 0 && sy_document_issue_count(doc))
        return sy__error_set(err, SY_EINVALIDDOC, "",
                             "no route of the document is valid (%zu invalid); "
                             "nothing changed",
                             sy_document_issue_count(doc));
    bool same_version = same_text(version, st->version);
    bool same_bytes = sy_document_checksum(doc) == st->checksum;
    if (!force && st->applied && !st->modified &&
        (same_bytes || (same_version && r->opts.skip_same_version))) {
        rep->skipped = true;
        rep->parse_us = sy__now_monotonic_us() - t0;
        st->outcome = st->outcome ? st->outcome : 2;
        return SY_OK;
    }
    rep->version_not_bumped = st->applied && same_version && !same_bytes;
    sy__route_change *ch;
    size_t nch;
    rc = document_changes(c, si, doc, rctx, rep, &ch, &nch, err);
    if (rc || (rc = derive_document(c, ch, nch, doc->envelope,
                                    !doc->policy_some, rep, t0, err)))
        return rc;
    st->version = version;
    st->checksum = sy_document_checksum(doc);
    st->applied = st->touched = true;
    st->modified = false;
    st->outcome = 1;
    /* positions restart after the document: upserted routes that the
     * document does not hold are gone with this apply */
    st->next_pos = 0;
    for (size_t i = 0, n = doc->route_count; i < n; i++)
        if (doc->positions[i] >= st->next_pos)
            st->next_pos = doc->positions[i] + 1;
    sy__history_entry kept = {(char *)(uintptr_t)version,
                              doc->checksum,
                              doc->routes,
                              doc->positions,
                              doc->route_count,
                              doc->issues,
                              doc->issue_count,
                              doc->envelope};
    if ((rc = history_note(c, si, &kept, err)))
        return rc;
    /* what this apply learnt: the next one's memo, if the commit holds */
    sy__free(&r->alloc, st->memo);
    st->memo = doc->memo;
    st->memo_count = doc->memo_count;
    doc->memo = NULL;
    doc->memo_count = 0;
    return SY_OK;
}

/* One document applied to source si; the span table of the source's live
 * routes (by the bytes that built them) lives for the parse and the diff.
 * Its large temporaries (the scan's elements, the change list, the sorts,
 * a fresh index's build arrays) are a bulk: in huge pages. */
static int step_apply(commit *c, uint32_t si, const char *json, size_t len,
                      bool force, sy_report *rep, sy_error *err) {
    reuse_ctx rctx;
    bool bulk = sy__alloc_bulk(true);
    sy__reuse_begin(&rctx, &c->r->alloc, c->work, si, c->st[si].next_pos);
    int rc = apply_document(c, si, json, len, force, &rctx, rep, err);
    sy__reuse_end(&rctx);
    sy__alloc_bulk(bulk);
    return rc;
}

/* Put back a kept document: its compiled routes at their positions, as
 * an apply of its text would (the same diff against the working routes,
 * the same id checks against other sources, its issues reported again),
 * without parsing anything. */
static int step_rollback(commit *c, uint32_t si, const char *version,
                         sy_report *rep, sy_error *err) {
    sy_router *r = c->r;
    const sy__source *src = &r->sources[si];
    src_state *st = &c->st[si];
    uint64_t t0 = sy__now_monotonic_us();
    /* version NULL: the document before the current one; the history as
     * the changes before this one left it (history_at) */
    const sy__history_entry *found = NULL;
    if (!version) {
        found = history_at(c, si, 1);
    } else {
        const sy__history_entry *h;
        for (size_t i = 0; !found && (h = history_at(c, si, i)); i++)
            if (same_text(h->version, version))
                found = h;
    }
    if (!found)
        return sy__error_set(err, SY_ENOTFOUND, "",
                             "source '%s' has no kept version '%s'", src->name,
                             version ? version : "(previous)");
    /* a copy: noting it below may move the commit's list */
    const sy__history_entry kept = *found, *e = &kept;
    if (e->version && !(rep->version = sy__strdup(&r->alloc, e->version)))
        return sy__commit_nomem(err);
    for (size_t i = 0; i < e->issue_count; i++)
        if (sy__report_add_issue(rep, &e->issues[i]))
            return sy__commit_nomem(err);
    rep->version_not_bumped = st->applied &&
                              same_text(e->version, st->version) &&
                              e->checksum != st->checksum;
    /* the entry read as a document (document_changes reads its routes,
     * positions and shape only) */
    sy_document doc;
    memset(&doc, 0, sizeof doc);
    uint32_t *dense = NULL;
    if (!e->positions) {
        dense = sy__malloc(&r->alloc, (e->count + 1) * sizeof *dense);
        if (!dense)
            return sy__commit_nomem(err);
        for (size_t i = 0; i < e->count; i++)
            dense[i] = (uint32_t)i;
    }
    doc.routes = e->routes;
    doc.positions = e->positions ? e->positions : dense;
    doc.route_count = e->count;
    doc.envelope = e->envelope;
    doc.policy_some = true; /* not known without reading the routes */
    reuse_ctx rctx;
    sy__reuse_begin(&rctx, &r->alloc, c->work, si, st->next_pos);
    sy__route_change *ch;
    size_t nch;
    int rc = document_changes(c, si, &doc, &rctx, rep, &ch, &nch, err);
    sy__reuse_end(&rctx);
    sy__free(&r->alloc, dense);
    if (rc ||
        (rc = derive_document(c, ch, nch, e->envelope, false, rep, t0, err)))
        return rc;
    st->version = e->version;
    st->checksum = e->checksum;
    st->applied = st->touched = true;
    st->modified = false;
    st->outcome = 1;
    st->next_pos = e->positions ? 0 : (uint32_t)e->count;
    for (size_t i = 0; e->positions && i < e->count; i++)
        if (e->positions[i] >= st->next_pos)
            st->next_pos = e->positions[i] + 1;
    if ((rc = history_note(c, si, e, err))) /* kept until sources follow */
        return rc;
    /* no parse, no memo: the next apply reads the document once */
    sy__free(&r->alloc, st->memo);
    st->memo = NULL;
    st->memo_count = 0;
    st->memo_drop = true;
    return SY_OK;
}

/* A one-route change of source `si`: `old` (or NULL), at document
 * position `old_pos`, becomes `now` (or NULL: removed) at rank `key`; the
 * part report gets their diff. */
static int one_route_step(commit *c, uint32_t si, const char *id,
                          const struct sy_route *old, uint32_t old_pos,
                          struct sy_route *now, uint64_t key, sy_report *rep,
                          sy_error *err) {
    const struct sy_route *o[1] = {old}, *n[1] = {now};
    if (sy__diff_routes(&c->r->alloc, o, old ? 1 : 0, n, now ? 1 : 0,
                        &rep->diff))
        return sy__commit_nomem(err);
    sy__route_change ch = {id, now, key, si, 0};
    sy__snapshot_config cfg = sy__router_snapshot_config(c->r);
    int rc = commit_derive(c, &cfg, &ch, 1, NULL, false, err);
    if (rc == SY_OK) {
        c->st[si].modified = c->st[si].touched = true;
        if (old)
            memo_forget(c, si, old_pos);
    }
    return rc;
}

static int step_upsert(commit *c, uint32_t si, const char *json, size_t len,
                       sy_report *rep, sy_error *err) {
    sy_router *r = c->r;
    src_state *st = &c->st[si];
    struct sy_route *rt;
    int rc = sy__def_parse_route(json, len, &r->popts, "route", &rt, err);
    if (rc)
        return rc;
    if (sy__vec_push(&r->alloc, &c->owned, rt)) {
        sy__route_unref(rt);
        return sy__commit_nomem(err);
    }
    /* a lenient change set leaves it out for its breaker settings */
    bool left;
    if ((rc = sy__commit_brk_left_out(c, rep, &left, err)) || left)
        return rc;
    const sy_snapshot *w = c->work;
    uint32_t slot = sy__snapshot_find_slot(w, rt->id);
    uint32_t pos;
    if (slot != NONE) {
        if (sy__snapshot_slot(w, slot)->source != si)
            return sy__error_set(
                err, SY_EDUPLICATE, "route.id",
                "route id '%s' is already defined by source "
                "'%s'",
                rt->id, r->sources[sy__snapshot_slot(w, slot)->source].name);
        pos = (uint32_t)(sy__snapshot_slot(w, slot)->key & 0xffffffu);
    } else {
        if (st->next_pos > SY_RANK_POS_MAX)
            return sy__error_set(err, SY_ELIMIT, "route",
                                 "source '%s' has used all %u route positions; "
                                 "apply its whole document again to renumber",
                                 r->sources[si].name, SY_RANK_POS_MAX + 1);
        pos = st->next_pos++;
    }
    rt->doc_index = pos;
    return one_route_step(
        c, si, rt->id, slot != NONE ? sy__snapshot_slot(w, slot)->route : NULL,
        pos, rt, sy__rank_key(rt->order, si, pos), rep, err);
}

/* The live slot of route `id` in the working snapshot and a new part
 * report for its source, or an error. */
static int find_live(commit *c, const char *id, const sy__slot **sl,
                     sy_report **rep, sy_error *err) {
    uint32_t slot = sy__snapshot_find_slot(c->work, id);
    if (slot == NONE)
        return sy__error_set(err, SY_ENOTFOUND, "", "no route '%s'", id);
    *sl = sy__snapshot_slot(c->work, slot);
    if (!(*rep =
              sy__report_new(&c->r->alloc, c->r->sources[(*sl)->source].name)))
        return sy__commit_nomem(err);
    return SY_OK;
}

static int step_remove(commit *c, const char *id, sy_report **rep,
                       sy_error *err) {
    const sy__slot *sl;
    int rc = find_live(c, id, &sl, rep, err);
    if (rc)
        return rc;
    return one_route_step(c, sl->source, id, sl->route,
                          (uint32_t)(sl->key & SY_RANK_POS_MAX), NULL, 0, *rep,
                          err);
}

static int step_enable(commit *c, const char *id, bool enabled, sy_report **rep,
                       sy_error *err) {
    const sy__slot *sl;
    int rc = find_live(c, id, &sl, rep, err);
    if (rc)
        return rc;
    if (sl->route->disabled == !enabled) {
        (*rep)->skipped = (*rep)->noop = true; /* already so: no event */
        return SY_OK;
    }
    struct sy_route *nr;
    rc = sy__def_route_with_enabled(sl->route, enabled, &c->r->popts, &nr, err);
    if (rc)
        return rc;
    if (sy__vec_push(&c->r->alloc, &c->owned, nr)) {
        sy__route_unref(nr);
        return sy__commit_nomem(err);
    }
    nr->doc_index = sl->route->doc_index;
    return one_route_step(c, sl->source, id, sl->route,
                          (uint32_t)(sl->key & SY_RANK_POS_MAX), nr, sl->key,
                          *rep, err);
}

/* Replace one service in the working snapshot's sorted service list. */
static int derive_with_service(commit *c, struct sy__service *svc,
                               sy_error *err) {
    const sy_snapshot *w = c->work;
    const char *name = sy__service_name(svc);
    size_t n = w->service_count;
    struct sy__service **list =
        sy__malloc(&c->r->alloc, (n + 1) * sizeof *list);
    if (!list)
        return sy__commit_nomem(err);
    size_t k = 0;
    bool placed = false;
    for (size_t i = 0; i < n; i++) {
        int cmp = strcmp(sy__service_name(w->services[i]), name);
        if (cmp == 0) {
            list[k++] = svc;
            placed = true;
            continue;
        }
        if (cmp > 0 && !placed) {
            list[k++] = svc;
            placed = true;
        }
        list[k++] = w->services[i];
    }
    if (!placed)
        list[k++] = svc;
    sy__snapshot_config cfg = sy__router_snapshot_config(c->r);
    cfg.services = list;
    cfg.service_count = k;
    cfg.replace_services = true;
    int rc = commit_derive(c, &cfg, NULL, 0, NULL, false, err);
    sy__free(&c->r->alloc, list);
    return rc;
}

/* Run or refuse: a secure instance (its requests go out as https or wss)
 * needs the host's TLS client, which a host whose host_runs lack "https:"
 * does not have: every request sent to it would fail. */
static int check_secure_instances(const sy_router *r, const sy__change *ch,
                                  sy_error *err) {
    if (sy__host_runs(r->opts.host_runs, "https:"))
        return SY_OK;
    bool deltas = ch->kind == SY_CHANGE_UPDATE_INSTANCES;
    for (size_t i = 0; i < ch->count; i++) {
        const sy_instance *in =
            deltas ? &ch->deltas[i].instance : &ch->instances[i];
        if (!in->secure || (deltas && ch->deltas[i].op != SY_INSTANCE_ADD))
            continue;
        char path[64], who[128];
        snprintf(path, sizeof path, "%s[%zu]%s.secure",
                 deltas ? "deltas" : "instances", i, deltas ? ".instance" : "");
        sy__host_name(r->opts.host_runs, who, sizeof who);
        return sy__error_set(
            err, SY_ENOTRUN, path,
            "instance '%s' of service '%s' is secure (https, wss): %s does "
            "not run TLS to an instance (its host_runs lack \"https:\")",
            in->id ? in->id : "", ch->name, who);
    }
    return SY_OK;
}

static int step_instances(commit *c, const sy__change *ch, sy_report *rep,
                          sy_error *err) {
    sy_router *r = c->r;
    const char *name = ch->name;
    int rc = check_secure_instances(r, ch, err);
    if (rc)
        return rc;
    const struct sy__service *old =
        sy__snapshot_service(c->work, name, strlen(name));
    struct sy__service *svc = NULL, *empty = NULL;
    for (size_t i = 0;
         !old && ch->kind == SY_CHANGE_UPDATE_INSTANCES && i < ch->count; i++)
        if (ch->deltas[i].op != SY_INSTANCE_ADD) {
            char path[48];
            snprintf(path, sizeof path, "deltas[%zu].instance.id", i);
            return sy__error_set(err, SY_ENOTFOUND, path,
                                 "service '%s' is unknown: it has no instance "
                                 "list to change",
                                 name);
        }
    if (ch->kind == SY_CHANGE_UPDATE_INSTANCES) {
        rc = old ? SY_OK
                 : sy__service_new(&r->alloc, name, NULL, 0, &empty, err);
        if (rc == SY_OK)
            rc = sy__service_apply_deltas(old ? old : empty, ch->deltas,
                                          ch->count, &svc, err);
        sy__service_unref(empty);
    } else {
        rc = sy__service_new(&r->alloc, name, ch->instances, ch->count, &svc,
                             err);
    }
    if (rc)
        return rc;
    if (!(rep->service = sy__strdup(&r->alloc, name)))
        rc = sy__commit_nomem(err);
    if (rc == SY_OK)
        rc =
            sy__service_diff_compute(&r->alloc, old, svc, &rep->instances, err);
    if (rc == SY_OK && old) {
        sy__service_inherit_rr(svc, old);
        sy__service_inherit_health(svc, old);
    }
    if (rc == SY_OK)
        rc = derive_with_service(c, svc, err);
    sy__service_unref(svc); /* the snapshots hold their own references */
    return rc;
}

/* One staged change: its part report in *rep (also on failure, if any). */
int sy__commit_step(commit *c, const sy__change *ch, sy_report **rep,
                    sy_error *err) {
    sy_router *r = c->r;
    *rep = NULL;
    bool by_source = ch->kind == SY_CHANGE_APPLY ||
                     ch->kind == SY_CHANGE_ROLLBACK ||
                     ch->kind == SY_CHANGE_UPSERT;
    sy__source *src = by_source ? sy__router_find_source(r, ch->name) : NULL;
    if (by_source && !src)
        return sy__error_set(err, SY_ENOTFOUND, "", "unknown source '%s'",
                             ch->name);
    uint32_t si = src ? (uint32_t)(src - r->sources) : 0;
    if (ch->kind == SY_CHANGE_REMOVE)
        return step_remove(c, ch->name, rep, err);
    if (ch->kind == SY_CHANGE_ENABLE)
        return step_enable(c, ch->name, ch->enabled, rep, err);
    if (!(*rep = sy__report_new(&r->alloc, src ? src->name : NULL)))
        return sy__commit_nomem(err);
    switch (ch->kind) {
    case SY_CHANGE_APPLY:
        return step_apply(c, si, ch->bytes, ch->len, false, *rep, err);
    case SY_CHANGE_ROLLBACK: return step_rollback(c, si, ch->text, *rep, err);
    case SY_CHANGE_UPSERT:
        return step_upsert(c, si, ch->bytes, ch->len, *rep, err);
    default: return step_instances(c, ch, *rep, err);
    }
}
