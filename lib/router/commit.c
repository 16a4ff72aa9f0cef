/*
 * commit.c - one commit: the steps of a change set (documents, rollbacks,
 * one-route changes, instance lists) are derived one after the other off
 * to the side, each from the working snapshot the step before left, and
 * only the last one is published. A failure at any step publishes nothing
 * and leaves every source as it was; on success the sources take the state
 * the steps gave them and every part report goes to on_event.
 *
 *   cur --step 1--> w1 --step 2--> w2 ... --step n--> wn --publish--> live
 *        (parse, skip if live, diff vs the working snapshot, derive)
 *
 * Reference counting: intermediate snapshots never hold routes. At publish
 * every route any step touched is counted once, by whether the published
 * and the previous snapshot hold it (new: +1 and host data; gone: grave).
 */
#include "def/def.h"
#include "router/commit_int.h"
#include "router/report.h"
#include "service/service.h"
#include "snapshot/diff.h"
#include "snapshot/snapshot.h"

#include <stdio.h>

#define NONE SY_NONE

/* ---- publishing ---- */

typedef struct ptr_at {
    uint64_t ptr;
    uint64_t at;
} ptr_at;

/* Keep the first occurrence of each pointer, in order (so new routes are
 * attached in the order the steps met them). *lead: how many of the first
 * *lead entries are kept (they stay first). */
static int dedupe_in_order(const sy__alloc *a, ptr_vec *t, size_t *lead) {
    if (t->n < 2)
        return SY_OK;
    if (t->n <= 16) { /* one-route changes: compares, no sort, no memory */
        size_t u = 0, kept_lead = 0;
        for (size_t i = 0; i < t->n; i++) {
            size_t j = 0;
            while (j < u && t->v[j] != t->v[i])
                j++;
            if (j < u)
                continue;
            kept_lead += i < *lead;
            t->v[u++] = t->v[i];
        }
        t->n = u;
        *lead = kept_lead;
        return SY_OK;
    }
    ptr_at *sorted = sy__malloc(a, t->n * sizeof *sorted);
    bool *first = sy__calloc(a, t->n, sizeof *first);
    if (!sorted || !first) {
        sy__free(a, sorted);
        sy__free(a, first);
        return SY_ENOMEM;
    }
    for (size_t i = 0; i < t->n; i++)
        sorted[i] = (ptr_at){(uint64_t)(uintptr_t)t->v[i], i};
    /* stable: of equal pointers the first occurrence comes first */
    if (!sy__sort_by_u64(a, sorted, t->n, sizeof *sorted,
                         offsetof(ptr_at, ptr))) {
        sy__free(a, sorted);
        sy__free(a, first);
        return SY_ENOMEM;
    }
    for (size_t i = 0; i < t->n; i++)
        if (i == 0 || sorted[i].ptr != sorted[i - 1].ptr)
            first[sorted[i].at] = true;
    size_t u = 0, kept_lead = 0;
    for (size_t i = 0; i < t->n; i++)
        if (first[i]) {
            kept_lead += i < *lead;
            t->v[u++] = t->v[i];
        }
    t->n = u;
    *lead = kept_lead;
    sy__free(a, sorted);
    sy__free(a, first);
    return SY_OK;
}

static bool holds(const sy_snapshot *s, const struct sy_route *rt) {
    uint32_t slot = sy__snapshot_find_slot(s, rt->id);
    return slot != NONE && sy__snapshot_slot(s, slot)->route == rt;
}

/*
 * Publish the last working snapshot. The live table keeps one reference
 * per live route: every route the steps touched is counted once, by
 * whether the published snapshot holds it and whether the old one did
 * (intermediate snapshots never held a reference).
 */
static int publish_work(commit *c, sy_error *err) {
    sy_router *r = c->r;
    sy_snapshot *f = c->inter.v[c->inter.n - 1];
    ptr_vec *t = &c->touched;
    size_t known = c->held_adds;
    if (dedupe_in_order(&r->alloc, t, &known))
        return sy__commit_nomem(err);
    bool cur_empty = c->cur->route_count == 0;
    size_t graves = 0, pins = 0;
    /* 2 bits per route: held by the published / the old snapshot; and
     * ATTACHED: attached here (released again if the publish fails) */
    enum { ATTACHED = 4 };
    uint8_t *held = sy__malloc(&r->alloc, t->n + 1);
    if (!held)
        return sy__commit_nomem(err);
    int rc = SY_OK;
    bool brk = c->brk_at_n || r->set_n;
    size_t i = 0;
    for (; i < t->n && rc == SY_OK; i++) {
        struct sy_route *rt = t->v[i];
        /* routes ahead (a large document's lie ~1 KB apart): the key
         * line attach writes */
        if (i + 8 < t->n) {
            const struct sy_route *ah = t->v[i + 8];
            __builtin_prefetch(&ah->key, 1);
        }
        held[i] = (uint8_t)((i < known || holds(f, rt)) |
                            (!cur_empty && holds(c->cur, rt)) << 1);
        graves += held[i] == 2;
        pins += held[i] == 1 && rt->live == UINT16_MAX - 1;
        /* its breaker weighed against the routes that stay (none to
         * weigh: no added route runs one, no live route names one) */
        if (brk && (held[i] == 1 || held[i] == 2) &&
            sy__commit_brk_add(c, rt, held[i] == 1))
            rc = SY_ENOMEM;
        if (rc == SY_OK && held[i] == 1 && rt->key == UINT32_MAX) {
            /* before readers can see it */
            rc = sy__router_attach_route(r, rt);
            held[i] |= rc == SY_OK ? ATTACHED : 0;
        }
    }
    f->key_limit = r->key_limit;
    /* two routes naming one breaker with different settings: refused,
     * what was attached for the publish is released */
    int brc = rc == SY_OK ? sy__commit_brk_check(c, err) : SY_OK;
    if (brc) {
        for (size_t k = 0; k < i; k++)
            if (held[k] & ATTACHED)
                sy__router_route_released(r, t->v[k]);
        sy__free(&r->alloc, held);
        return brc;
    }
    if (rc == SY_OK && r->pinned_count + pins > r->pinned_cap) {
        struct sy_route **v =
            sy__grow(&r->alloc, r->pinned, &r->pinned_cap,
                     r->pinned_count + pins, 4, sizeof *r->pinned);
        if (v)
            r->pinned = v;
        else
            rc = SY_ENOMEM;
    }
    if (rc == SY_OK)
        rc = sy__router_graves_reserve(r, graves)
                 ? sy__pub_publish(r->pub, &f->pub)
                 : SY_ENOMEM;
    if (rc) {
        /* not published: what was attached for it is released (the
         * store's breaker settings are taken only once published) */
        for (size_t k = 0; k < i; k++)
            if (held[k] & ATTACHED)
                sy__router_route_released(r, t->v[k]);
        sy__free(&r->alloc, held);
        return sy__error_set(err, rc, "",
                             rc == SY_EBUSY
                                 ? "too many retired snapshots are still held "
                                   "by readers (max_retired reached)"
                                 : "%s",
                             sy_strerror(rc));
    }
    c->inter.n--; /* published: the publisher owns it now */
    sy__commit_brk_follow(c);
    for (i = 0; i < t->n; i++) {
        held[i] &= (uint8_t)~ATTACHED;
        if (held[i] == 1) {
            struct sy_route *rt = sy__route_ref(t->v[i]);
            /* saturated now: the router keeps it until it goes, and
             * releases it then (route.h live; room made above) */
            if (rt->live == UINT16_MAX - 1)
                r->pinned[r->pinned_count++] = sy__route_ref(rt);
            rt->live += rt->live != UINT16_MAX;
        } else if (held[i] == 2)
            r->graves[r->grave_count++] =
                (sy__grave){t->v[i], f->pub.generation};
    }
    sy__free(&r->alloc, held);
    return SY_OK;
}

/* A check's publish, but for the publishing: two routes naming one
 * breaker with different settings are refused as the publish would. */
static int check_work(commit *c, sy_error *err) {
    ptr_vec *t = &c->touched;
    size_t known = c->held_adds;
    if (!c->brk_at_n) /* no added route runs a breaker */
        return SY_OK;
    if (dedupe_in_order(&c->r->alloc, t, &known))
        return sy__commit_nomem(err);
    const sy_snapshot *f = c->inter.v[c->inter.n - 1];
    for (size_t i = 0; i < t->n; i++) {
        const struct sy_route *rt = t->v[i];
        bool now = i < known || holds(f, rt), before = holds(c->cur, rt);
        if (now != before && sy__commit_brk_add(c, rt, now))
            return sy__commit_nomem(err);
    }
    return sy__commit_brk_check(c, err);
}

static void commit_cleanup(commit *c) {
    const sy__alloc *a = &c->r->alloc;
    /* after the attaches: an entry a published route uses stays */
    sy__router_drop_checked(c->r);
    for (size_t i = 0; i < c->inter.n; i++)
        sy__snapshot_destroy(c->inter.v[i]);
    for (size_t i = 0; i < c->docs.n; i++)
        sy_document_free(c->docs.v[i]);
    for (size_t i = 0; i < c->owned.n; i++)
        sy__route_unref(c->owned.v[i]);
    for (size_t i = 0; c->st && i < c->r->source_count; i++) {
        sy__free(a, c->st[i].memo); /* not taken: the commit failed */
        sy__free(a, c->st[i].pend); /* the entries are borrowed */
    }
    sy__free(a, c->inter.v);
    sy__free(a, c->docs.v);
    sy__free(a, c->owned.v);
    sy__free(a, c->touched.v);
    sy__free(a, c->st);
    sy__commit_brk_free(c);
}

/* After the publish: the sources take the state the steps gave them. */
static void sources_follow(commit *c, int64_t now) {
    sy_router *r = c->r;
    for (size_t i = 0; i < r->source_count; i++) {
        sy__source *s = &r->sources[i];
        src_state *st = &c->st[i];
        if (st->outcome) {
            s->last_apply_ms = now;
            s->last_result = SY_OK;
            memset(&s->last_error, 0, sizeof s->last_error);
            if (st->outcome == 1)
                s->applied_count++;
            else
                s->skipped_count++;
        }
        if (!st->touched)
            continue;
        if (st->version != s->version) {
            char *v = st->version ? sy__strdup(&r->alloc, st->version) : NULL;
            sy__free(&r->alloc, s->version);
            s->version = v;
        }
        s->checksum = st->checksum;
        if (st->memo || st->memo_drop) { /* the memo of the routes now */
            sy__free(&r->alloc, s->memo);
            s->memo = st->memo;
            s->memo_count = st->memo_count;
            st->memo = NULL;
        }
        s->applied = st->applied;
        s->modified = st->modified;
        s->next_pos = st->next_pos;
        if (sy__history_push(r, s, st->pend, st->pend_count))
            sy__router_log(r, SY_LOG_WARN,
                           "source %s: history not kept (out of memory)",
                           s->name);
    }
}

/* The source a failed change was about, if any: its status says so. */
static void note_failure(commit *c, const sy__change *ch, int64_t now,
                         const sy_error *e) {
    sy_router *r = c->r;
    sy__source *s = NULL;
    if (ch->kind == SY_CHANGE_APPLY || ch->kind == SY_CHANGE_ROLLBACK ||
        ch->kind == SY_CHANGE_UPSERT) {
        s = sy__router_find_source(r, ch->name);
    } else if (ch->kind == SY_CHANGE_REMOVE || ch->kind == SY_CHANGE_ENABLE) {
        /* a change of one route is its source's failure */
        uint32_t slot = sy__snapshot_find_slot(c->work, ch->name);
        if (slot != NONE)
            s = &r->sources[sy__snapshot_slot(c->work, slot)->source];
    }
    if (!s)
        return;
    s->last_apply_ms = now;
    s->last_result = e->code;
    s->last_error = *e;
    s->failed_count++;
}

/* After the publish: what one part did, for the log. */
static void log_part(sy_router *r, const sy_report *p) {
    if (p->version_not_bumped)
        sy__router_log(
            r, SY_LOG_WARN,
            "source %s: version %s applied again with different content: "
            "the publisher did not bump the version",
            p->source, p->version);
    if (p->diff && p->source && !p->skipped)
        sy__router_log(
            r, SY_LOG_INFO,
            "source %s: version %s: %zu added, %zu updated, %zu "
            "removed, %zu unchanged, %zu reordered (generation %llu)",
            p->source, p->version ? p->version : "-",
            sy_diff_added_count(p->diff), sy_diff_updated_count(p->diff),
            sy_diff_removed_count(p->diff), sy_diff_unchanged_count(p->diff),
            sy_diff_reordered_count(p->diff),
            (unsigned long long)p->generation);
}

/* What sy__commit_run carries from phase to phase. */
typedef struct commit_run {
    commit c;
    const sy__change *items;
    size_t n;
    bool single;     /* one change: its part is the report */
    sy_report *all;  /* the report of every part (not single) */
    sy_report *part; /* the last step's part */
    size_t failed;   /* the change that failed; n: none did, the publish */
    uint64_t publish_us;
    int64_t now; /* wall time, for operators */
} commit_run;

/* Phase 1: the commit starts from the published snapshot, each source's
 * working state from its own. */
static int run_begin(commit_run *u, sy_router *r, sy_error *err) {
    commit *c = &u->c;
    c->r = r;
    /* routes the snapshots readers released since the last commit can no
     * longer reach go first: their breaker entries are free for this one */
    sy__pub_reclaim(r->pub);
    sy__router_bury(r);
    c->cur = c->work = sy__router_current(r);
    c->generation = c->cur->pub.generation + 1;
    u->failed = u->n;
    u->all = u->single ? NULL : sy__report_new(&r->alloc, NULL);
    c->st = sy__calloc(&r->alloc, r->source_count + 1, sizeof *c->st);
    if ((!u->single && !u->all) || !c->st)
        return sy__commit_nomem(err);
    for (size_t i = 0; i < r->source_count; i++) {
        const sy__source *s = &r->sources[i];
        memset(&c->st[i], 0, sizeof c->st[i]);
        c->st[i].version = s->version;
        c->st[i].checksum = s->checksum;
        c->st[i].applied = s->applied;
        c->st[i].modified = s->modified;
        c->st[i].next_pos = s->next_pos;
    }
    return SY_OK;
}

/* Phase 2: every change a step on the working state, its part report
 * gathered; the first failure stops (u->failed names it, u->part is its
 * part report when there is one). */
static int run_steps(commit_run *u, sy_error *err) {
    for (size_t i = 0; i < u->n; i++) {
        u->c.step = i;
        int rc = sy__commit_step(&u->c, &u->items[i], &u->part, err);
        if (!rc && !u->single && sy__report_add_part(u->all, u->part)) {
            sy_report_free(u->part);
            u->part = NULL;
            rc = sy__commit_nomem(err);
        }
        if (rc) {
            u->failed = i;
            return rc;
        }
        if (!u->single)
            u->part = NULL;
    }
    return SY_OK;
}

/* The report to the caller, or freed when it did not ask for one. */
static void hand_report(sy_report *rep, sy_report **report) {
    if (report)
        *report = rep;
    else
        sy_report_free(rep);
}

/* A failed change of a change set says which one in its message. */
static void name_failed_change(const commit_run *u, sy_error *err) {
    const sy__change *ch = &u->items[u->failed];
    char msg[sizeof err->message + 128];
    int k = snprintf(msg, sizeof msg, "change %zu (%s '%.40s'): ", u->failed,
                     sy__change_kind_name(ch->kind), ch->name);
    size_t used = k > 0 ? (size_t)k : 0;
    size_t rest = sizeof err->message - 1 - used;
    memcpy(msg + used, err->message, rest);
    msg[used + rest] = '\0';
    memcpy(err->message, msg, sizeof err->message);
    err->message[sizeof err->message - 1] = '\0';
}

/* Phase 3, refused: nothing published; the failed change (or, for a
 * refused publish, every change) is its source's failed attempt. */
static int run_refused(commit_run *u, int rc, sy_report **report,
                       sy_error *err) {
    sy_router *r = u->c.r;
    bool dry = u->c.dry;
    size_t n = u->n, failed = u->failed;
    for (size_t i = failed < n ? failed : 0;
         !dry && i < (failed < n ? failed + 1 : n); i++)
        note_failure(&u->c, &u->items[i], u->now, err);
    if (!u->single && failed < n)
        name_failed_change(u, err);
    if (!dry)
        r->failed_commits++;
    sy_report *rep = u->single ? u->part : u->all;
    if (rep) {
        /* best effort: the error is also in *err */
        if (err->code && rep->issue_count == 0)
            (void)sy__report_add_issue(rep, err);
        rep->failed_change = failed < n ? (long)failed : -1;
    }
    if (!u->single)
        sy_report_free(u->part);
    commit_cleanup(&u->c);
    hand_report(rep, report);
    if (!dry)
        sy__router_log(r, SY_LOG_ERROR,
                       "commit rejected, nothing changed: %s%s%s", err->path,
                       *err->path ? ": " : "", err->message);
    return rc;
}

/* Phase 3, published: the sources follow, and every part report gets the
 * generation, goes to the log and to on_event. */
static void run_published(commit_run *u, sy_report **report) {
    sy_router *r = u->c.r;
    uint64_t gen = sy__router_current(r)->pub.generation;
    sources_follow(&u->c, u->now);
    r->commits++;
    commit_cleanup(&u->c);
    sy__router_bury(r);
    if (r->opts.retired_warn_ms)
        sy__pub_check_held(r->pub, r->opts.retired_warn_ms, sy__router_held_cb,
                           r);
    sy_report *const *parts = u->single ? &u->part : u->all->parts;
    size_t nparts = u->single ? 1 : u->all->part_count;
    for (size_t i = 0; i < nparts; i++) {
        sy_report *p = parts[i];
        p->generation = gen;
        p->publish_us = p->skipped ? 0 : u->publish_us;
        if (p->skipped && p->source)
            r->skipped_applies++;
        if (p->service)
            r->instance_updates++;
        log_part(r, p);
        if (!p->noop)
            sy__router_event(r, p);
    }
    if (u->all)
        u->all->generation = gen;
    hand_report(u->single ? u->part : u->all, report);
}

/* Steps, then the publish (a check: its checks). */
static int run_once(commit_run *u, sy_router *r, sy_error *err) {
    int rc = run_begin(u, r, err);
    if (rc == SY_OK)
        rc = run_steps(u, err);
    uint64_t t1 = sy__now_monotonic_us();
    if (rc == SY_OK && u->c.inter.n && !u->c.dry) {
        /* after a document, the publish's sorts are a bulk as its steps'
         * temporaries were (commit_steps.c step_apply) */
        bool doc = false;
        for (size_t i = 0; i < u->n; i++)
            doc |= u->items[i].kind == SY_CHANGE_APPLY;
        bool bulk = sy__alloc_bulk(doc);
        rc = publish_work(&u->c, err);
        sy__alloc_bulk(bulk);
    }
    u->publish_us = sy__now_monotonic_us() - t1 + u->c.derive_us;
    if (rc == SY_OK && u->c.inter.n && u->c.dry)
        rc = check_work(&u->c, err);
    return rc;
}

/* Steps, publish, then the refused or the published commit's ending. A
 * lenient change set whose routes give a breaker clashing settings runs
 * again: the first run finds the routes to leave out (sy__commit_brk_check
 * weighs the whole set), the next leaves them out, as issues. */
int sy__commit_run(sy_router *r, const sy__change *items, size_t n, bool single,
                   bool dry, sy_report **report, sy_error *err) {
    commit_run u;
    memset(&u, 0, sizeof u);
    u.items = items;
    u.n = n;
    u.single = single;
    u.c.dry = dry;
    u.c.may_leave = r->opts.lenient && !single;
    sy_error local;
    if (!err)
        err = &local;
    memset(err, 0, sizeof *err);
    int rc = run_once(&u, r, err);
    for (int round = 1; rc == SY__BRK_LEAVE; round++) {
        /* again, leaving out what the runs before found (an upsert left
         * out keeps its live route, which may clash in turn: a few rounds
         * at most, then refused as a strict set is) */
        struct sy__brk_leave *leave = u.c.brk_leave;
        size_t nleave = u.c.brk_leave_n;
        u.c.brk_leave = NULL;
        sy_report_free(u.all);
        sy_report_free(u.part);
        commit_cleanup(&u.c);
        memset(&u, 0, sizeof u);
        u.items = items;
        u.n = n;
        u.single = single;
        u.c.dry = dry;
        u.c.may_leave = true;
        u.c.rerun = round == 4;
        u.c.brk_leave = leave;
        u.c.brk_leave_n = nleave;
        memset(err, 0, sizeof *err);
        rc = run_once(&u, r, err);
    }
    u.now = sy__now_realtime_ms();
    if (rc)
        return run_refused(&u, rc, report, err);
    if (dry) { /* a check: everything held, nothing published or kept */
        commit_cleanup(&u.c);
        hand_report(single ? u.part : u.all, report);
        return SY_OK;
    }
    run_published(&u, report);
    return SY_OK;
}
