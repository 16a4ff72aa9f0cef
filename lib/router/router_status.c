/*
 * router_status.c - what a router tells its operators: router-wide
 * metrics (sy_router_metrics), per-source status (sy_router_source_status)
 * and both in the Prometheus text exposition format
 * (sy_router_metrics_text). Reads the router under its writer lock, or
 * without it from inside a callback, whose thread holds it already.
 */
#include "def/def.h"
#include "router/router_int.h"
#include "service/service.h"
#include "snapshot/snapshot.h"

#include <stdio.h>

static void unlock_if(sy_router *r, bool locked) {
    if (locked)
        pthread_mutex_unlock(&r->lock);
}

static void metrics_locked(sy_router *r, sy_metrics *out) {
    sy__pub_metrics pm;
    sy__pub_metrics_get(r->pub, &pm);
    const sy_snapshot *cur = sy__router_current(r);
    memset(out, 0, sizeof *out);
    out->generation = pm.generation;
    out->publishes = pm.publishes;
    out->live_snapshots = pm.live;
    out->retired_snapshots = pm.retired;
    out->reclaimed_snapshots = pm.reclaimed;
    out->retired_bytes = pm.retired_bytes;
    out->oldest_retired_age_ms = pm.oldest_retired_age_ms;
    out->routes = cur->route_count;
    out->commits = r->commits;
    out->failed_commits = r->failed_commits;
    out->skipped_applies = r->skipped_applies;
    out->instance_updates = r->instance_updates;
    out->services = cur->service_count;
    for (size_t i = 0; i < cur->service_count; i++)
        out->instances += sy__service_count(cur->services[i]);
    out->ejections = atomic_load_explicit(&r->ejections, memory_order_relaxed);
    out->outcomes = atomic_load_explicit(&r->outcomes, memory_order_relaxed);
    out->fingerprint = sy_snapshot_fingerprint(cur);
}

void sy_router_metrics(sy_router *r, sy_metrics *out) {
    if (!r || !out)
        return;
    bool locked = sy__router_lock_for_read(r);
    metrics_locked(r, out);
    unlock_if(r, locked);
}

size_t sy_router_source_count(sy_router *r) {
    if (!r)
        return 0;
    bool locked = sy__router_lock_for_read(r);
    size_t n = r->live_sources;
    unlock_if(r, locked);
    return n;
}

/* One source's fingerprint and live route count. */
struct sy__source_memo {
    uint64_t fingerprint;
    size_t routes;
};

/*
 * Fingerprint of each source's live routes in rank order, and their
 * count, for every source index (m has SY_MAX_SOURCES entries): one pass
 * over the live routes. A source without live routes gets fingerprint 0.
 */
static void source_fingerprints(const sy_snapshot *s,
                                struct sy__source_memo *m) {
    for (size_t k = 0; k < SY_MAX_SOURCES; k++)
        m[k] = (struct sy__source_memo){0x5359u /* "SY" */, 0};
    for (size_t i = 0; i < s->route_count; i++) {
        const sy__slot *sl = sy__snapshot_slot(s, sy__snapshot_rank_at(s, i));
        if (sl->source >= SY_MAX_SOURCES)
            continue;
        struct sy__source_memo *o = &m[sl->source];
        o->fingerprint =
            sy__hash_mix(o->fingerprint, sy__def_route_fp(sl->route));
        o->routes++;
    }
    for (size_t k = 0; k < SY_MAX_SOURCES; k++)
        if (!m[k].routes)
            m[k].fingerprint = 0;
}

/*
 * Fill the fingerprint and route count of st[k] for the source at place
 * place[k] (k < n) from the router's memo of the live snapshot, worked out
 * only when the snapshot changed since the last status: a host that polls
 * its sources' status (an admin page, a fleet's convergence check) pays
 * one pass over the routes per publish, not one per call and source.
 * Without memory for the memo, a pass per call. Under the lock.
 */
static void source_status_fill(sy_router *r, const uint32_t *place,
                               sy_source_status *st, size_t n) {
    const sy_snapshot *cur = sy__router_current(r);
    struct sy__source_memo local[SY_MAX_SOURCES];
    struct sy__source_memo *m = r->status_memo;
    if (!m && (m = sy__malloc(&r->alloc, sizeof local)) != NULL) {
        r->status_memo = m;
        r->status_gen = cur->generation + 1; /* not this one's */
    }
    if (!m) {
        m = local;
        source_fingerprints(cur, m);
    } else if (r->status_gen != cur->generation) {
        source_fingerprints(cur, m);
        r->status_gen = cur->generation;
    }
    for (size_t k = 0; k < n; k++) {
        st[k].fingerprint = m[place[k]].fingerprint;
        st[k].routes = m[place[k]].routes;
    }
}

static void copy_text(char *dst, size_t cap, const char *src) {
    size_t n = src ? strlen(src) : 0;
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Everything of *out but the fingerprint and the route count
 * (source_fingerprints). */
static void status_locked(sy_router *r, size_t i, sy_source_status *out) {
    const sy__source *s = &r->sources[i];
    memset(out, 0, sizeof *out);
    copy_text(out->name, sizeof out->name, s->name);
    copy_text(out->version, sizeof out->version, s->version);
    out->applied = s->applied;
    out->checksum = s->applied ? s->checksum : 0;
    out->last_apply_ms = s->last_apply_ms;
    out->last_result = s->last_result;
    out->last_error = s->last_error;
    out->applied_count = s->applied_count;
    out->skipped_count = s->skipped_count;
    out->failed_count = s->failed_count;
}

/* The place of the i-th source in use (place order), or UINT32_MAX. */
static uint32_t place_of(const sy_router *r, size_t i) {
    for (uint32_t p = 0; p < r->source_count; p++)
        if (r->sources[p].name && i-- == 0)
            return p;
    return UINT32_MAX;
}

int sy_router_source_status(sy_router *r, size_t i, sy_source_status *out,
                            sy_error *err) {
    if (!r || !out)
        return sy__error_set(err, SY_EINVAL, "", "router or out is NULL");
    bool locked = sy__router_lock_for_read(r);
    int rc = SY_OK;
    uint32_t p = place_of(r, i);
    if (p == UINT32_MAX)
        rc = sy__error_set(err, SY_ENOTFOUND, "",
                           "no source %zu (the router has %zu)", i,
                           r->live_sources);
    else {
        status_locked(r, p, out);
        source_status_fill(r, &p, out, 1);
    }
    unlock_if(r, locked);
    return rc;
}

/* ---- Prometheus text ---- */

/* Appends to a caller buffer; counts what it would need when full. */
typedef struct text_out {
    char *buf;
    size_t cap, len;
} text_out;

static void put(text_out *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(text_out *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = t->len < t->cap ? t->cap - t->len : 0;
    int n = vsnprintf(room ? t->buf + t->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len += (size_t)n;
}

/* A label value with \, " and newline escaped as the format requires. */
static void put_label(text_out *t, const char *v) {
    for (; v && *v; v++) {
        if (*v == '\\')
            put(t, "\\\\");
        else if (*v == '"')
            put(t, "\\\"");
        else if (*v == '\n')
            put(t, "\\n");
        else
            put(t, "%c", *v);
    }
}

static void metric(text_out *t, const char *name, const char *type,
                   const char *help, uint64_t value) {
    put(t, "# HELP switchyard_%s %s\n# TYPE switchyard_%s %s\n", name, help,
        name, type);
    put(t, "switchyard_%s %llu\n", name, (unsigned long long)value);
}

typedef unsigned long long (*source_value)(const sy_source_status *st);
static unsigned long long v_applied(const sy_source_status *st) {
    return st->applied_count;
}
static unsigned long long v_skipped(const sy_source_status *st) {
    return st->skipped_count;
}
static unsigned long long v_failed(const sy_source_status *st) {
    return st->failed_count;
}
static unsigned long long v_routes(const sy_source_status *st) {
    return st->routes;
}
static unsigned long long v_error(const sy_source_status *st) {
    return (unsigned long long)(-(long long)st->last_result);
}
static unsigned long long v_when(const sy_source_status *st) {
    return (unsigned long long)(st->last_apply_ms / 1000);
}

/* One per-source family: the HELP/TYPE header, then a line per source. */
static void source_family(text_out *t, const sy_source_status *st, size_t n,
                          const char *name, const char *type, const char *help,
                          source_value get) {
    put(t, "# HELP switchyard_%s %s\n# TYPE switchyard_%s %s\n", name, help,
        name, type);
    for (size_t i = 0; i < n; i++) {
        put(t, "switchyard_%s{source=\"", name);
        put_label(t, st[i].name);
        put(t, "\"} %llu\n", get(&st[i]));
    }
}

int sy_router_metrics_text(sy_router *r, char *buf, size_t cap, size_t *len,
                           sy_error *err) {
    if (!r || (!buf && cap))
        return sy__error_set(err, SY_EINVAL, "", "router or buffer is NULL");
    sy_metrics m;
    bool locked = sy__router_lock_for_read(r);
    metrics_locked(r, &m);
    size_t n = r->live_sources;
    sy_source_status *st = sy__malloc(&r->alloc, (n ? n : 1) * sizeof *st);
    uint32_t place[SY_MAX_SOURCES];
    if (st) {
        size_t k = 0; /* the places in use, in place order */
        for (uint32_t p = 0; p < r->source_count; p++)
            if (r->sources[p].name)
                place[k++] = p;
        for (size_t i = 0; i < n; i++)
            status_locked(r, place[i], &st[i]);
        source_status_fill(r, place, st, n);
    }
    unlock_if(r, locked);
    if (!st)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");

    text_out t = {buf, cap, 0};
    metric(&t, "generation", "gauge", "Generation of the live snapshot.",
           m.generation);
    metric(&t, "publishes_total", "counter", "Snapshots published.",
           m.publishes);
    metric(&t, "commits_total", "counter",
           "Commits that succeeded (single calls included).", m.commits);
    metric(&t, "commits_failed_total", "counter",
           "Commits rejected; nothing was published.", m.failed_commits);
    metric(&t, "applies_skipped_total", "counter",
           "Documents skipped as already live.", m.skipped_applies);
    metric(&t, "instance_updates_total", "counter",
           "Instance list changes published.", m.instance_updates);
    metric(&t, "routes", "gauge", "Routes in the live snapshot.", m.routes);
    metric(&t, "services", "gauge", "Services in the live snapshot.",
           m.services);
    metric(&t, "instances", "gauge", "Instances in the live snapshot.",
           m.instances);
    metric(&t, "snapshots_live", "gauge",
           "Snapshots alive: the current one and retired ones still held.",
           m.live_snapshots);
    metric(&t, "snapshots_retired", "gauge", "Retired snapshots not yet freed.",
           m.retired_snapshots);
    metric(&t, "snapshots_reclaimed_total", "counter",
           "Retired snapshots freed.", m.reclaimed_snapshots);
    metric(&t, "retired_bytes", "gauge", "Bytes held by retired snapshots.",
           m.retired_bytes);
    metric(&t, "oldest_retired_age_milliseconds", "gauge",
           "Age of the oldest retired snapshot still held.",
           m.oldest_retired_age_ms);
    metric(&t, "ejections_total", "counter",
           "Instances ejected by passive health.", m.ejections);
    metric(&t, "outcomes_total", "counter",
           "Upstream outcomes reported for passive health.", m.outcomes);
    put(&t,
        "# HELP switchyard_snapshot_info The live snapshot's fingerprint.\n"
        "# TYPE switchyard_snapshot_info gauge\n"
        "switchyard_snapshot_info{fingerprint=\"%016llx\",generation=\"%llu\"}"
        " 1\n",
        (unsigned long long)m.fingerprint, (unsigned long long)m.generation);
    source_family(&t, st, n, "source_applied_total", "counter",
                  "Documents applied per source.", v_applied);
    source_family(&t, st, n, "source_skipped_total", "counter",
                  "Documents skipped as already live, per source.", v_skipped);
    source_family(&t, st, n, "source_failed_total", "counter",
                  "Documents rejected per source.", v_failed);
    source_family(&t, st, n, "source_routes", "gauge",
                  "Live routes per source.", v_routes);
    source_family(&t, st, n, "source_last_error_code", "gauge",
                  "Negated sy_code of the last attempt (0: it succeeded).",
                  v_error);
    source_family(&t, st, n, "source_last_apply_timestamp_seconds", "gauge",
                  "When the last document was tried (epoch seconds).", v_when);
    put(&t, "# HELP switchyard_source_info Live version of each source.\n"
            "# TYPE switchyard_source_info gauge\n");
    for (size_t i = 0; i < n; i++) {
        put(&t, "switchyard_source_info{source=\"");
        put_label(&t, st[i].name);
        put(&t, "\",version=\"");
        put_label(&t, st[i].version);
        put(&t, "\",checksum=\"%016llx\",fingerprint=\"%016llx\"} 1\n",
            (unsigned long long)st[i].checksum,
            (unsigned long long)st[i].fingerprint);
    }
    sy__free(&r->alloc, st);
    if (len)
        *len = t.len < cap ? t.len : t.len + 1;
    if (t.len >= cap)
        return sy__error_set(err, SY_ETOOSMALL, "",
                             "the metrics need %zu bytes, the buffer has %zu",
                             t.len + 1, cap);
    return SY_OK;
}

void sy_router_report_outcome(sy_router *r, const sy_target *t,
                              sy_outcome outcome) {
    if (!r || !t || !t->health || r->opts.outlier.disabled)
        return;
    atomic_fetch_add_explicit(&r->outcomes, 1, memory_order_relaxed);
    if (sy__service_report_outcome(t->health, outcome, sy__router_now_ms(r),
                                   &r->opts.outlier, &r->eject_gate))
        atomic_fetch_add_explicit(&r->ejections, 1, memory_order_relaxed);
}
