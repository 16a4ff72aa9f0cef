/*
 * etcd_source.c - routes and instances from etcd v3: the source itself.
 *
 * Owns: the records of what etcd holds (sources, services, instances),
 * applying changes to the router as one commit each, the protocol (the
 * full range read, paged at one revision; the watch stream; backoff and
 * resynchronisation) and the status. The HTTP exchanges are etcd_http.c's,
 * the reading of etcd's answers (base64, watch lines, range answers,
 * instance values) etcd_decode.c's.
 *
 * Revision bookkeeping: `revision` is the etcd revision the router
 * reflects. A full read sets it to the read's header revision; a watch
 * response sets it to its last event's mod_revision. Reconnecting watches
 * from revision + 1, so nothing is missed or applied twice; a watch that
 * is cancelled because that revision was compacted, or an etcd whose
 * revision went back (data lost) or whose cluster changed, triggers a full
 * read, which is diffed against what is applied (by mod_revision).
 */
#include "etcd_source_int.h"

#include <http_parser.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_PREFIX "/switchyard/"
#define RANGE_PAGE 256

/* This thread's CPU time in microseconds. */
static uint64_t cpu_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void etcd_log(gw_etcd *e, gw_etcd_log_level lvl, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (e->opts.on_log)
        e->opts.on_log(e->opts.data, lvl, msg);
    else
        fprintf(stderr, "etcd: %s\n", msg);
}

/* A put of a key under the prefix that is neither a route nor an
 * instance key: it changes nothing, so the operator is told (logged,
 * counted, the last one in /status) instead of seeing nothing happen.
 * Deleting one is as good as it gets: not told. */
static void on_other_key(void *data, const char *key, size_t key_len, bool del,
                         const char *why) {
    gw_etcd *e = data;
    if (del)
        return;
    uv_mutex_lock(&e->mu);
    e->ignored_keys++;
    snprintf(e->ignored_key, sizeof e->ignored_key, "%.*s",
             (int)(key_len < 199 ? key_len : 199), key);
    for (char *p = e->ignored_key; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    e->ignored_why = why;
    char shown[200];
    snprintf(shown, sizeof shown, "%s", e->ignored_key);
    uv_mutex_unlock(&e->mu);
    etcd_log(e, GW_ETCD_LOG_WARN, "key %s%s ignored: %s", shown,
             key_len > 199 ? "..." : "", why);
}

static void set_str(char **slot, const char *s) {
    free(*slot);
    *slot = s ? etcd_strdup(s) : NULL;
}

/* ------------------------------------------------------------------ */
/* Records                                                              */
/* ------------------------------------------------------------------ */

source_rec *etcd_find_source(gw_etcd *e, const char *name) {
    for (size_t i = 0; i < e->src_n; i++)
        if (strcmp(e->src[i].name, name) == 0)
            return &e->src[i];
    return NULL;
}

static source_rec *add_source(gw_etcd *e, const char *name, const char *key) {
    source_rec *v = etcd_grow(e->src, &e->src_cap, e->src_n, sizeof *v, 8);
    if (!v)
        return NULL;
    e->src = v;
    source_rec *s = &e->src[e->src_n];
    *s = (source_rec){0};
    s->name = etcd_strdup(name);
    s->key = etcd_strdup(key);
    if (!s->name || !s->key) {
        free(s->name);
        free(s->key);
        return NULL;
    }
    e->src_n++;
    return s;
}

/* The record of service `name` (created when asked). The last one found
 * is tried first: the instance keys of a range read (and of a delete of a
 * prefix) come in key order, each service's together. */
service_rec *etcd_find_service(gw_etcd *e, const char *name, bool create) {
    if (e->svc_hint < e->svc_n && strcmp(e->svc[e->svc_hint].name, name) == 0)
        return &e->svc[e->svc_hint];
    for (size_t i = 0; i < e->svc_n; i++)
        if (strcmp(e->svc[i].name, name) == 0) {
            e->svc_hint = i;
            return &e->svc[i];
        }
    if (!create)
        return NULL;
    service_rec *v = etcd_grow(e->svc, &e->svc_cap, e->svc_n, sizeof *v, 8);
    if (!v)
        return NULL;
    e->svc = v;
    service_rec *s = &e->svc[e->svc_n];
    *s = (service_rec){0};
    s->name = etcd_strdup(name);
    if (!s->name)
        return NULL;
    e->svc_n++;
    return s;
}

/* Index of id in the sorted list, or where it would go (*found false). */
size_t etcd_find_inst(const service_rec *s, const char *id, bool *found) {
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->v[mid].id, id);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

static void inst_free(inst_rec *r) {
    etcd_instance_clear(&r->val);
    free(r->id);
    free(r->error);
}

static void format_error(char *out, size_t cap, const sy_error *err) {
    if (err->path[0])
        snprintf(out, cap, "%s: %s", err->path, err->message);
    else if (err->line)
        snprintf(out, cap, "line %u, column %u: %s", err->line, err->column,
                 err->message);
    else
        snprintf(out, cap, "%s", err->message);
}

/* ------------------------------------------------------------------ */
/* Applying changes                                                     */
/* ------------------------------------------------------------------ */

/* The instances deleted by the change just staged leave their services'
 * lists: one pass over each list that has some. */
static void drop_gone(gw_etcd *e) {
    for (size_t i = 0; i < e->svc_n; i++) {
        service_rec *s = &e->svc[i];
        if (!s->gone_n)
            continue;
        size_t k = 0;
        for (size_t j = 0; j < s->n; j++) {
            if (s->v[j].gone)
                inst_free(&s->v[j]);
            else
                s->v[k++] = s->v[j];
        }
        s->n = k;
        s->gone_n = 0;
    }
}

/* Apply one instance change to the records (under mu); false when out of
 * memory (a refused value is recorded with its error: true). */
static bool stage_instance(gw_etcd *e, etcd_change *c) {
    service_rec *s = etcd_find_service(e, c->name, !c->del);
    if (!s)
        return c->del; /* a delete of nothing, or out of memory */
    bool found;
    size_t i = etcd_find_inst(s, c->id, &found);
    if (c->del) { /* marked, and dropped from the list once the whole
                     change is staged (drop_gone): a delete of a prefix
                     moves the list once, not once per key */
        if (!found || s->v[i].gone)
            return true;
        etcd_instance_clear(&s->v[i].val);
        set_str(&s->v[i].error, NULL);
        s->v[i].gone = true;
        s->gone_n++;
        s->touched = true;
        return true;
    }
    if (found && s->v[i].gone) { /* deleted and put again in one change */
        s->v[i].gone = false;
        s->gone_n--;
    }
    if (!found) {
        inst_rec *v = etcd_grow(s->v, &s->cap, s->n, sizeof *v, 8);
        if (!v)
            return false;
        s->v = v;
        char *id = etcd_strdup(c->id);
        if (!id)
            return false;
        memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof *s->v);
        s->v[i] = (inst_rec){0};
        s->v[i].id = id;
        s->n++;
    }
    inst_rec *r = &s->v[i];
    r->mod_revision = c->mod_revision;
    char err[512];
    int rc =
        etcd_decode_instance(r->id, c->value, c->len, &r->val, err, sizeof err);
    if (rc == -2)
        return false; /* out of memory: not the value's fault */
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s: %s", c->key, err);
        set_str(&r->error, msg);
        e->rejected++;
        etcd_log(e, GW_ETCD_LOG_WARN, "instance rejected: %s", msg);
        /* the previous value, if any, keeps serving */
    } else {
        set_str(&r->error, NULL);
    }
    s->touched = true;
    return true;
}

/* The router's index of a source (registration order), cached. */
size_t etcd_lib_source_index(gw_etcd *e, source_rec *s) {
    size_t n = sy_router_source_count(e->router);
    sy_source_status st;
    /* the index found last, if it still names the source: a removed
     * source (sy_router_remove_source) moves the ones after it */
    if (s->lib_index < n &&
        sy_router_source_status(e->router, s->lib_index, &st, NULL) == 0 &&
        strcmp(st.name, s->name) == 0)
        return s->lib_index;
    for (size_t i = 0; i < n; i++) {
        if (sy_router_source_status(e->router, i, &st, NULL) == 0 &&
            strcmp(st.name, s->name) == 0)
            return s->lib_index = i;
    }
    return SIZE_MAX;
}

/* The router is full (it holds at most 256 sources): the sources whose
 * keys were deleted (emptied by an earlier commit) leave it, so that a
 * new one fits. Only then: while there is room a deleted source keeps
 * its place (sources of equal order rank by place, and a gateway that
 * watched a removal and one started later would place a new source
 * differently: a fleet agrees until the router is full). Sources the
 * etcd source did not register (a route file's) stay. True: one left. */
static bool make_room(gw_etcd *e) {
    bool freed = false;
    for (size_t i = 0; i < e->src_n; i++) {
        source_rec *s = &e->src[i];
        sy_error err;
        if (!s->registered || !s->owned || s->present)
            continue;
        if (sy_router_remove_source(e->router, s->name, &err)) {
            etcd_log(e, GW_ETCD_LOG_WARN, "source %s kept: %s", s->name,
                     err.message);
            continue;
        }
        s->registered = false;
        s->lib_index = SIZE_MAX;
        freed = true;
        etcd_log(e, GW_ETCD_LOG_INFO,
                 "source %s removed (its key %s was deleted; room for "
                 "another)",
                 s->name, s->key);
    }
    return freed;
}

/* The source's record, registering it with the router on first sight.
 * A source the router refuses (it holds at most 256, make_room tried)
 * gets a record all
 * the same, unregistered, with the refusal in *why: its changes are
 * refused with that error and the others go on. NULL: out of memory. */
static source_rec *source_for(gw_etcd *e, etcd_change *c, sy_error *why) {
    why->code = 0;
    source_rec *s = etcd_find_source(e, c->name);
    if (s && s->registered)
        return s;
    sy_error err;
    int rc = sy_router_add_source(e->router, c->name, &err);
    if (rc == SY_ELIMIT && make_room(e))
        rc = sy_router_add_source(e->router, c->name, &err);
    if (rc == SY_ENOMEM)
        return NULL;
    if (!s && !(s = add_source(e, c->name, c->key)))
        return NULL;
    s->lib_index = SIZE_MAX;
    s->registered = !rc || rc == SY_EEXIST;
    s->owned = !rc;
    if (!s->registered)
        *why = err;
    return s;
}

/* One staged change of a commit: a route document or a service's list. */
typedef struct staged {
    etcd_change *c;   /* route change, or NULL */
    service_rec *svc; /* instance list, or NULL */
    bool dropped;     /* rejected by an earlier commit attempt */
    char *error;      /* why, when dropped */
} staged;

/* The error of a failed commit without its "change N (kind 'name'): ". */
static void commit_error(char *out, size_t cap, sy_error *err) {
    const char *m = err->message;
    if (strncmp(m, "change ", 7) == 0) {
        const char *p = strstr(m, "): ");
        if (p)
            m = p + 3;
    }
    char msg[sizeof err->message];
    snprintf(msg, sizeof msg, "%s", m);
    memcpy(err->message, msg, sizeof msg);
    format_error(out, cap, err);
}

/* The host's check of a route document (the one its files and admin API
 * run): a refused document is dropped with its located error before any
 * commit attempt, as one the router refuses. */
static void host_check(gw_etcd *e, source_rec *src, staged *s) {
    sy_error err = {0};
    src->refused.code = 0;
    if (s->c->del || !e->opts.check_document ||
        !e->opts.check_document(s->c->value, s->c->len, &err))
        return;
    src->refused = err;
    char msg[1024];
    format_error(msg, sizeof msg, &err);
    s->dropped = true;
    s->error = etcd_strdup(msg);
    e->rejected++;
    etcd_log(e, GW_ETCD_LOG_WARN, "%s rejected (mod_revision %" PRId64 "): %s",
             s->c->key, s->c->mod_revision, msg);
}

/* A route change of a source the router would not register: dropped with
 * the refusal as its error (the commit's other changes go on). */
static void refuse_unregistered(gw_etcd *e, source_rec *src, staged *st,
                                const sy_error *why) {
    char msg[600];
    snprintf(msg, sizeof msg, "source %s not registered: %s", src->name,
             why->message);
    st->dropped = true;
    st->error = etcd_strdup(msg);
    e->rejected++;
    etcd_log(e, GW_ETCD_LOG_WARN, "%s rejected (mod_revision %" PRId64 "): %s",
             st->c->key, st->c->mod_revision, msg);
}

/* Stage every change not dropped yet; instance lists first. */
static int stage_all(gw_etcd *e, sy_change_set *cs, staged *st, size_t n,
                     size_t *map, size_t *count) {
    sy_error err;
    *count = 0;
    for (size_t i = 0; i < n; i++) {
        if (st[i].dropped)
            continue;
        int rc;
        if (st[i].svc) {
            service_rec *s = st[i].svc;
            sy_instance *list = calloc(s->n + 1, sizeof *list);
            if (!list)
                return SY_ENOMEM;
            size_t k = 0;
            for (size_t j = 0; j < s->n; j++)
                if (s->v[j].val.json)
                    list[k++] = s->v[j].val.inst;
            rc = sy_change_set_set_instances(cs, s->name, list, k, &err);
            free(list);
        } else {
            etcd_change *c = st[i].c;
            /* A deleted key empties its source. */
            rc = sy_change_set_apply(cs, c->name, c->del ? "[]" : c->value,
                                     c->del ? 2 : c->len, &err);
        }
        if (rc) {
            etcd_log(e, GW_ETCD_LOG_ERROR, "staging: %s", err.message);
            return rc;
        }
        map[(*count)++] = i;
    }
    return 0;
}

/* What one apply stages: every change not dropped yet, in staging order,
 * and map[k]: which of them is the commit's change k. */
typedef struct staged_list {
    staged *st;
    size_t *map;
    size_t n;
} staged_list;

/* Phase 1 of apply_changes: the instance changes into their service
 * records (their lists are staged from there). False: out of memory. */
static bool stage_instances(gw_etcd *e, etcd_change_list *l) {
    bool ok = true;
    for (size_t i = 0; ok && i < l->n; i++)
        if (!l->v[i].is_route)
            ok = stage_instance(e, &l->v[i]);
    drop_gone(e);
    return ok;
}

/* Phase 2: the staged list, services whose instances changed first, then
 * each route document with its source's record updated and the host's
 * check run. False: out of memory. */
static bool collect_staged(gw_etcd *e, etcd_change_list *l, staged_list *sl) {
    sl->st = calloc(l->n + e->svc_n + 1, sizeof *sl->st);
    sl->map = calloc(l->n + e->svc_n + 1, sizeof *sl->map);
    if (!sl->st || !sl->map)
        return false;
    for (size_t i = 0; i < e->svc_n; i++)
        if (e->svc[i].touched) {
            e->svc[i].touched = false;
            sl->st[sl->n++] = (staged){.svc = &e->svc[i]};
        }
    for (size_t i = 0; i < l->n; i++) {
        etcd_change *c = &l->v[i];
        if (!c->is_route)
            continue;
        sy_error why = {0};
        source_rec *s =
            c->del ? etcd_find_source(e, c->name) : source_for(e, c, &why);
        if (!s && !c->del) /* out of memory registering it */
            return false;
        if (!s)
            continue;
        s->mod_revision = c->mod_revision;
        s->present = !c->del;
        if (!c->del)
            s->create_revision = c->create_revision;
        if (!s->registered) { /* the router has no such source */
            if (c->del) {     /* nothing to empty, nothing refused */
                set_str(&s->error, NULL);
                continue;
            }
            sl->st[sl->n] = (staged){.c = c};
            refuse_unregistered(e, s, &sl->st[sl->n++], &why);
            continue;
        }
        sl->st[sl->n] = (staged){.c = c};
        host_check(e, s, &sl->st[sl->n]);
        sl->n++;
    }
    return true;
}

/* A change the router rejected is dropped with its error. */
static void drop_rejected(gw_etcd *e, staged *bad, const char *msg) {
    bad->dropped = true;
    bad->error = etcd_strdup(msg);
    e->rejected++;
    if (bad->c)
        etcd_log(e, GW_ETCD_LOG_WARN,
                 "%s rejected (mod_revision %" PRId64 "): %s", bad->c->key,
                 bad->c->mod_revision, msg);
    else
        etcd_log(e, GW_ETCD_LOG_WARN, "instances of %s rejected: %s",
                 bad->svc->name, msg);
}

typedef enum attempt { COMMITTED, DROPPED_ONE, FAILED_ALL } attempt;

/* One commit of what is staged and not dropped: committed, one change
 * dropped (try again without it), or nothing can be (out of memory, most
 * likely). */
static attempt commit_attempt(gw_etcd *e, staged_list *sl) {
    sy_change_set *cs = NULL;
    sy_report *rep = NULL;
    sy_error err;
    size_t count = 0;
    if (sy_change_set_new(e->router, &cs, &err) ||
        stage_all(e, cs, sl->st, sl->n, sl->map, &count)) {
        /* out of memory (staging only copies): nothing is published, and
         * the revision must not move past these changes */
        sy_change_set_free(cs);
        return FAILED_ALL;
    }
    int rc = count ? sy_router_commit(e->router, cs, &rep, &err) : 0;
    sy_change_set_free(cs);
    long f = rc && rep ? sy_report_failed_change(rep) : -1;
    sy_report_free(rep);
    if (!rc)
        return COMMITTED;
    char msg[1024];
    commit_error(msg, sizeof msg, &err);
    if (f < 0 || (size_t)f >= count) {
        etcd_log(e, GW_ETCD_LOG_ERROR, "commit failed: %s", msg);
        return FAILED_ALL;
    }
    drop_rejected(e, &sl->st[sl->map[f]], msg);
    return DROPPED_ONE;
}

/* Phase 4: per-source outcome, in staging order (the last attempt wins);
 * the staged list freed. */
static void record_outcomes(gw_etcd *e, staged_list *sl, bool committed) {
    for (size_t i = 0; i < sl->n; i++) {
        staged *st = &sl->st[i];
        if (st->svc) {
            set_str(&st->svc->error, st->dropped ? st->error : NULL);
            continue;
        }
        source_rec *s = etcd_find_source(e, st->c->name);
        if (!s)
            continue;
        if (st->dropped || !committed) {
            set_str(&s->error, st->error ? st->error : "commit failed");
            continue;
        }
        set_str(&s->error, NULL);
        /* version and checksum are read from the router when asked
         * (refresh_source_locked): its source status walks the source's
         * routes, which need not delay the next etcd_change */
        s->stale = true;
    }
    for (size_t i = 0; sl->st && i < sl->n; i++)
        free(sl->st[i].error);
    free(sl->st);
    free(sl->map);
}

/* Phase 5, committed: the revision the router reflects, the counters and
 * the trace of this commit (t0, c0: when it started, wall and CPU). The
 * router's generation now. */
static uint64_t note_commit(gw_etcd *e, size_t events, int64_t revision,
                            bool full_read, uint64_t t0, uint64_t c0) {
    e->events += events;
    /* A full read is the truth, even when etcd went back (lost data). */
    if (full_read || revision > e->revision)
        e->revision = revision;
    /* the fingerprint is read when asked (live_fingerprint_locked): a
     * walk of every route, which need not delay the next etcd_change */
    sy_snapshot *snap = sy_router_acquire(e->router);
    uint64_t gen = sy_snapshot_generation(snap);
    sy_snapshot_release(snap);
    e->commits++;
    e->last_commit_us = (uv_hrtime() - t0) / 1000;
    e->commit_us_total += e->last_commit_us;
    uint64_t cpu = cpu_us() - c0;
    e->commit_cpu_us_total += cpu;
    if (full_read)
        e->trace = (gw_etcd_trace){0};
    e->trace.revision = e->revision;
    e->trace.committed_us = etcd_wall_us();
    e->trace.commit_cpu_us = cpu;
    e->last_trace = e->trace;
    return gen;
}

/*
 * Apply a list of changes as ONE commit (sy_router_commit: one publish)
 * and record `revision` as what the router reflects (a watch only moves
 * it forward). Instance lists are staged first, so a new route never
 * points at a service whose instances are not there yet. A change the
 * router rejects (a broken document) is dropped with its error and the
 * rest committed again: the other sources keep going.
 */
static bool apply_changes(gw_etcd *e, etcd_change_list *l, int64_t revision,
                          bool full_read) {
    uint64_t t0 = uv_hrtime(), c0 = cpu_us();
    uv_mutex_lock(&e->mu);
    /* out of memory staging a change: nothing is committed and the
     * revision does not move (the caller reads everything again) */
    staged_list sl = {NULL, NULL, 0};
    attempt a = stage_instances(e, l) && collect_staged(e, l, &sl) ? DROPPED_ONE
                                                                   : FAILED_ALL;
    while (a == DROPPED_ONE)
        a = commit_attempt(e, &sl);
    record_outcomes(e, &sl, a == COMMITTED);
    if (a == FAILED_ALL) {
        /* Nothing was published (out of memory, most likely) but the
         * records moved on: the revision stays, and the caller reads
         * everything again, applying every key. */
        e->force_full = true;
        uv_mutex_unlock(&e->mu);
        return false;
    }
    uint64_t gen = note_commit(e, l->n, revision, full_read, t0, c0);
    int64_t rev = e->revision;
    uv_mutex_unlock(&e->mu);
    if (e->opts.on_commit)
        e->opts.on_commit(e->opts.data, rev, gen);
    return true;
}

/* ------------------------------------------------------------------ */
/* The protocol: full read, watch, backoff                              */
/* ------------------------------------------------------------------ */

static void start_full_read(gw_etcd *e);
static void start_watch(gw_etcd *e);
static void fail(gw_etcd *e, const char *what, const char *err);

static void set_state(gw_etcd *e, state st, const char *err) {
    uv_mutex_lock(&e->mu);
    e->st = st;
    if (st == ST_BACKOFF)
        e->connected = false;
    if (err)
        set_str(&e->last_error, err);
    uv_mutex_unlock(&e->mu);
}

/* POST to the current endpoint; a stream when on_line is given. */
static etcd_http *http_post(gw_etcd *e, const char *path, const char *body,
                            etcd_http_line_fn on_line,
                            etcd_http_done_fn on_done) {
    etcd_http_request req = {.loop = e->loop,
                             .ep = &e->eps[e->ep_index],
                             .path = path,
                             .body = body,
                             .headers = e->auth_header,
                             .transport =
                                 etcd_transport(e, &e->eps[e->ep_index]),
                             .timeout_ms = e->opts.request_timeout_ms,
                             .streaming = on_line != NULL,
                             .on_line = on_line,
                             .on_done = on_done,
                             .data = e};
    return etcd_http_post(&req);
}

static void drop_http(gw_etcd *e) {
    etcd_http_close(e->http);
    e->http = NULL;
}

/* Watch from the applied revision, or read in full first. */
static void proceed(gw_etcd *e) {
    uv_mutex_lock(&e->mu);
    bool synced = e->revision > 0;
    uv_mutex_unlock(&e->mu);
    if (synced && !e->need_full_read)
        start_watch(e);
    else
        start_full_read(e);
}

static void on_login(gw_etcd *e, void *data, const char *err) {
    (void)data;
    if (e->stopping)
        return;
    if (err)
        fail(e, "auth", err);
    else
        proceed(e);
}

/* With --etcd-user, a token first when there is none (etcd_auth.c). */
static void proceed_or_login(gw_etcd *e) {
    if (etcd_auth_needed(e)) {
        set_state(e, ST_CONNECTING, NULL);
        etcd_auth_login(e, &e->http, on_login, NULL);
    } else {
        proceed(e);
    }
}

static void on_retry(uv_timer_t *t) {
    gw_etcd *e = t->data;
    if (e->stopping)
        return;
    uv_mutex_lock(&e->mu);
    e->reconnects++;
    uv_mutex_unlock(&e->mu);
    proceed_or_login(e);
}

void etcd_source_fail(gw_etcd *e, const char *what, const char *err) {
    fail(e, what, err);
}

/* Something failed: keep serving, try again after the backoff (the next
 * endpoint of the list, if any). */
static void fail(gw_etcd *e, const char *what, const char *err) {
    char msg[900];
    snprintf(msg, sizeof msg, "%s: %s%s%s%s", what, err,
             e->tls_error[0] ? " (" : "", e->tls_error,
             e->tls_error[0] ? ")" : "");
    e->tls_error[0] = 0;
    drop_http(e);
    if (etcd_auth_expired(0, err)) /* log in again at the next attempt */
        etcd_auth_drop(e);
    etcd_changes_clear(&e->pending);
    if (e->stopping)
        return;
    uint32_t wait = e->backoff_ms;
    /* up to a quarter of jitter, so a fleet does not reconnect in step */
    e->rng ^= e->rng << 13;
    e->rng ^= e->rng >> 7;
    e->rng ^= e->rng << 17;
    wait += (uint32_t)(e->rng % (wait / 4 + 1));
    etcd_log(e, GW_ETCD_LOG_WARN, "%s (%s); retrying in %u ms", msg,
             e->eps[e->ep_index].host, wait);
    set_state(e, ST_BACKOFF, msg);
    e->ep_index = (e->ep_index + 1) % e->ep_count;
    e->backoff_ms = e->backoff_ms * 2 > e->opts.backoff_max_ms
                        ? e->opts.backoff_max_ms
                        : e->backoff_ms * 2;
    uv_timer_start(&e->retry_timer, on_retry, wait, 0);
}

/* Full read done: diff what etcd holds at read_revision against what is
 * applied (by mod_revision), apply the difference, then watch. */
static void finish_full_read(gw_etcd *e) {
    uint64_t t0 = uv_hrtime();
    etcd_change_list diff = {0};
    etcd_change_list *got = &e->pending;
    size_t keys = got->n;
    uv_mutex_lock(&e->mu);
    /* a change that could not be listed: apply nothing */
    bool listed = etcd_full_read_diff(e, got, &diff);
    e->full_reads++;
    uv_mutex_unlock(&e->mu);
    etcd_changes_clear(got);
    etcd_log(e, GW_ETCD_LOG_INFO,
             "full read at revision %" PRId64 ": %zu change(s)",
             e->read_revision, diff.n);
    bool ok = false;
    if (listed) {
        e->force_full = false;
        ok = apply_changes(e, &diff, e->read_revision, true);
    }
    etcd_changes_clear(&diff);
    uv_mutex_lock(&e->mu);
    e->last_full_read_keys = keys;
    e->last_full_read_us = (uv_hrtime() - t0) / 1000;
    uv_mutex_unlock(&e->mu);
    if (!ok) {
        e->need_full_read = true;
        fail(e, "commit", "the router refused the changes");
        return;
    }
    e->need_full_read = false;
    start_watch(e);
}

static void range_page(gw_etcd *e, const char *from_b64);

static void on_range(void *data, int status, const char *body, size_t n,
                     const char *err) {
    gw_etcd *e = data;
    drop_http(e);
    if (err) {
        fail(e, "range", err);
        return;
    }
    char msg[512];
    if (status != 200) {
        int code;
        etcd_decode_answer_error(status, body, n, msg, sizeof msg, &code);
        if (code == 11) { /* compacted between pages: read again */
            etcd_changes_clear(&e->pending);
            start_full_read(e);
            return;
        }
        fail(e, "range", msg);
        return;
    }
    etcd_range_page page;
    if (etcd_decode_range(body, n, &e->keys, &e->pending, &page, msg,
                          sizeof msg)) {
        fail(e, "range", msg);
        return;
    }
    if (!e->read_revision) {
        e->read_revision = page.revision;
        snprintf(e->cluster_id, sizeof e->cluster_id, "%s", page.cluster_id);
    }
    if (page.next_b64) { /* the next page starts just after the last key */
        range_page(e, page.next_b64);
        free(page.next_b64);
        return;
    }
    finish_full_read(e);
}

static void range_page(gw_etcd *e, const char *from_b64) {
    char *body = malloc(strlen(from_b64) + strlen(e->end_b64) + 160);
    if (!body) {
        fail(e, "range", "out of memory");
        return;
    }
    if (e->read_revision)
        sprintf(body,
                "{\"key\":\"%s\",\"range_end\":\"%s\",\"limit\":\"%d\","
                "\"revision\":\"%" PRId64 "\"}",
                from_b64, e->end_b64, RANGE_PAGE, e->read_revision);
    else
        sprintf(body, "{\"key\":\"%s\",\"range_end\":\"%s\",\"limit\":\"%d\"}",
                from_b64, e->end_b64, RANGE_PAGE);
    e->http = http_post(e, "/v3/kv/range", body, NULL, on_range);
    free(body);
    if (!e->http)
        fail(e, "range", "cannot start a request");
}

static void start_full_read(gw_etcd *e) {
    drop_http(e);
    etcd_changes_clear(&e->pending);
    e->read_revision = 0;
    set_state(e, ST_READING, NULL);
    range_page(e, e->key_b64);
}

/* The watch was canceled: compacted past what the router reflects (read
 * everything again), or for another reason (reconnect). */
static void on_watch_canceled(gw_etcd *e, const etcd_watch_msg *m,
                              int64_t applied) {
    if (!m->compact_revision) { /* the reason tells an expired token */
        char why[600];
        snprintf(why, sizeof why, "canceled by etcd%s%s",
                 m->message[0] ? ": " : "", m->message);
        fail(e, "watch", why);
        return;
    }
    etcd_log(e, GW_ETCD_LOG_WARN,
             "revision %" PRId64 " was compacted (compact revision %" PRId64
             "): full read",
             applied + 1, m->compact_revision);
    drop_http(e);
    start_full_read(e);
}

/* The watch is set up: watching, unless etcd went back or is another
 * cluster (what it holds now is the truth: a full read). */
static void on_watch_created(gw_etcd *e, const etcd_watch_msg *m,
                             int64_t applied) {
    bool other_cluster = m->cluster_id[0] && e->cluster_id[0] &&
                         strcmp(m->cluster_id, e->cluster_id) != 0;
    if (m->revision < applied || other_cluster) {
        etcd_log(e, GW_ETCD_LOG_WARN,
                 "etcd is at revision %" PRId64 " < %" PRId64
                 " or another cluster: full read",
                 m->revision, applied);
        drop_http(e);
        start_full_read(e);
        return;
    }
    uv_mutex_lock(&e->mu);
    e->st = ST_WATCHING;
    e->connected = true;
    uv_mutex_unlock(&e->mu);
    e->backoff_ms = e->opts.backoff_min_ms;
}

/* One line of the watch stream: a JSON object {"result": {...}}, parsed
 * in place (etcd_decode_watch); the values of its events are decoded where they
 * lie and applied from there, without a copy. */
static void on_watch_line(void *data, char *line, size_t n) {
    gw_etcd *e = data;
    uint64_t t0 = uv_hrtime(), c0 = cpu_us();
    uv_mutex_lock(&e->mu);
    int64_t applied = e->revision;
    uv_mutex_unlock(&e->mu);
    etcd_watch_msg m;
    if (etcd_decode_watch(line, n, &e->keys, applied, &m)) {
        /* a change could not be read: the revision stays where it is and
         * the watch resumes from it */
        fail(e, "watch", "out of memory");
        return;
    }
    switch (m.kind) {
    case ETCD_WATCH_ERROR: fail(e, "watch", m.message); return;
    case ETCD_WATCH_CANCELED: on_watch_canceled(e, &m, applied); return;
    case ETCD_WATCH_CREATED: on_watch_created(e, &m, applied); return;
    case ETCD_WATCH_PROGRESS: /* etcd is alive and at m.revision */
        uv_mutex_lock(&e->mu);
        e->progress_notifies++;
        uv_mutex_unlock(&e->mu);
        return;
    case ETCD_WATCH_EVENTS: break;
    }
    uv_mutex_lock(&e->mu);
    e->last_decode_us = (uv_hrtime() - t0) / 1000;
    e->decode_us_total += e->last_decode_us;
    e->trace = (gw_etcd_trace){.decoded_us = etcd_wall_us(),
                               .line_bytes = n,
                               .decode_cpu_us = cpu_us() - c0};
    etcd_http_line_stamps(e->http, &e->trace.first_byte_us,
                          &e->trace.last_byte_us, &e->trace.reads);
    uv_mutex_unlock(&e->mu);
    /* the changes borrow their values from `line`, alive until we return */
    bool ok = m.top <= applied || apply_changes(e, &m.changes, m.top, false);
    etcd_changes_clear(&m.changes);
    if (!ok) {
        e->need_full_read = true;
        fail(e, "commit", "the router refused the changes");
    }
}

static void on_watch_done(void *data, int status, const char *body, size_t n,
                          const char *err) {
    gw_etcd *e = data;
    char msg[512];
    if (!err) {
        int code;
        etcd_decode_answer_error(status, body, n, msg, sizeof msg, &code);
        err = msg;
    }
    fail(e, "watch", err);
}

static void start_watch(gw_etcd *e) {
    drop_http(e);
    uv_mutex_lock(&e->mu);
    int64_t from = e->revision + 1;
    uv_mutex_unlock(&e->mu);
    char *body = malloc(strlen(e->key_b64) + strlen(e->end_b64) + 160);
    if (!body) {
        fail(e, "watch", "out of memory");
        return;
    }
    sprintf(body,
            "{\"create_request\":{\"key\":\"%s\",\"range_end\":\"%s\","
            "\"start_revision\":\"%" PRId64 "\",\"progress_notify\":true}}",
            e->key_b64, e->end_b64, from);
    set_state(e, ST_CONNECTING, NULL);
    e->http = http_post(e, "/v3/watch", body, on_watch_line, on_watch_done);
    free(body);
    if (!e->http)
        fail(e, "watch", "cannot start a request");
}

/* ------------------------------------------------------------------ */
/* Public calls                                                         */
/* ------------------------------------------------------------------ */

static int parse_endpoints(gw_etcd *e, const char *url, char *err,
                           size_t err_len) {
    size_t count = 1;
    for (const char *p = url; *p; p++)
        count += *p == ',';
    e->eps = calloc(count, sizeof *e->eps);
    if (!e->eps) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    const char *p = url;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        struct http_parser_url u;
        http_parser_url_init(&u);
        if (len == 0 || http_parser_parse_url(p, len, 0, &u) ||
            !(u.field_set & (1 << UF_SCHEMA)) ||
            !(u.field_set & (1 << UF_HOST)) ||
            !((u.field_data[UF_SCHEMA].len == 4 &&
               memcmp(p + u.field_data[UF_SCHEMA].off, "http", 4) == 0) ||
              (u.field_data[UF_SCHEMA].len == 5 &&
               memcmp(p + u.field_data[UF_SCHEMA].off, "https", 5) == 0)) ||
            u.field_data[UF_HOST].len >= sizeof e->eps[0].host) {
            snprintf(err, err_len,
                     "--etcd: \"%.*s\" (offset %zu) is not an "
                     "http(s)://host:port URL",
                     (int)len, p, (size_t)(p - url));
            return -1;
        }
        /* what the client would not use: refused, not dropped */
        static const struct {
            int field;
            const char *what;
        } extra[] = {{UF_USERINFO, "a user and password (use "
                                   "--etcd-user and --etcd-password-file)"},
                     {UF_PATH, "a path (the gateway speaks /v3/...)"},
                     {UF_QUERY, "a query"},
                     {UF_FRAGMENT, "a fragment"}};
        for (size_t k = 0; k < sizeof extra / sizeof *extra; k++)
            if (u.field_set & (1 << extra[k].field)) {
                snprintf(err, err_len,
                         "\"%.*s\" (offset %zu) has %s: an endpoint is "
                         "http(s)://host:port",
                         (int)len, p, (size_t)(p - url), extra[k].what);
                return -1;
            }
        etcd_endpoint *ep = &e->eps[e->ep_count++];
        snprintf(ep->scheme, sizeof ep->scheme, "%.*s",
                 (int)u.field_data[UF_SCHEMA].len,
                 p + u.field_data[UF_SCHEMA].off);
        memcpy(ep->host, p + u.field_data[UF_HOST].off,
               u.field_data[UF_HOST].len);
        ep->host[u.field_data[UF_HOST].len] = '\0';
        snprintf(ep->port, sizeof ep->port, "%u",
                 (u.field_set & (1 << UF_PORT)) ? u.port : 2379u);
        p += len;
        if (*p == ',')
            p++;
    }
    if (!e->ep_count) {
        snprintf(err, err_len, "--etcd: no URL given");
        return -1;
    }
    return 0;
}

static void free_records(gw_etcd *e) {
    for (size_t i = 0; i < e->src_n; i++) {
        free(e->src[i].name);
        free(e->src[i].key);
        free(e->src[i].error);
    }
    free(e->src);
    for (size_t i = 0; i < e->svc_n; i++) {
        for (size_t j = 0; j < e->svc[i].n; j++)
            inst_free(&e->svc[i].v[j]);
        free(e->svc[i].v);
        free(e->svc[i].name);
        free(e->svc[i].error);
    }
    free(e->svc);
}

static void etcd_free(gw_etcd *e) {
    free_records(e);
    etcd_changes_clear(&e->pending);
    free(e->url);
    free(e->prefix);
    free(e->password_file);
    free(e->key_b64);
    free(e->end_b64);
    free(e->eps);
    free(e->last_error);
    free(e->auth_header); /* not a rejection */
    if (e->password) {
        memset(e->password, 0, strlen(e->password));
        free(e->password);
    }
    etcd_tls_free(e);
    uv_mutex_destroy(&e->mu);
    free(e);
}

int gw_etcd_start_opts(uv_loop_t *loop, sy_router *router,
                       const gw_etcd_options *opts, gw_etcd **out, char *err,
                       size_t err_len) {
    *out = NULL;
    if (!loop || !router || !opts || !opts->url) {
        snprintf(err, err_len, "etcd: loop, router and URL are required");
        return -1;
    }
    gw_etcd *e = calloc(1, sizeof *e);
    if (!e || uv_mutex_init(&e->mu)) {
        free(e);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    e->loop = loop;
    e->router = router;
    e->opts = *opts;
    if (!e->opts.backoff_min_ms)
        e->opts.backoff_min_ms = 100;
    if (!e->opts.backoff_max_ms)
        e->opts.backoff_max_ms = 5000;
    if (e->opts.backoff_max_ms < e->opts.backoff_min_ms)
        e->opts.backoff_max_ms = e->opts.backoff_min_ms;
    if (!e->opts.request_timeout_ms)
        e->opts.request_timeout_ms = 10000;
    e->backoff_ms = e->opts.backoff_min_ms;
    e->rng = uv_hrtime() ^ (uint64_t)(uintptr_t)e ^ 0x9e3779b97f4a7c15ull;
    const char *prefix = opts->prefix ? opts->prefix : DEFAULT_PREFIX;
    e->url = etcd_strdup(opts->url);
    e->prefix = etcd_strdup(prefix);
    e->prefix_len = strlen(prefix);
    e->opts.url = e->url;
    e->opts.prefix = e->prefix;
    if (!e->url || !e->prefix) {
        snprintf(err, err_len, "out of memory");
        etcd_free(e);
        return -1;
    }
    if (!e->prefix_len || (unsigned char)prefix[e->prefix_len - 1] == 0xff) {
        snprintf(err, err_len,
                 "--etcd-prefix: \"%s\" must be non-empty and not end in "
                 "byte 0xff",
                 prefix);
        etcd_free(e);
        return -1;
    }
    if (parse_endpoints(e, opts->url, err, err_len) ||
        etcd_tls_init(e, err, err_len)) {
        etcd_free(e);
        return -1;
    }
    if (!opts->user != !(opts->password || opts->password_file)) {
        snprintf(err, err_len, "--etcd-user and its password go together");
        etcd_free(e);
        return -1;
    }
    e->opts.password = NULL; /* the host's: copied */
    e->opts.password_file = NULL;
    if ((opts->password && !(e->password = etcd_strdup(opts->password))) ||
        (opts->password_file && !(e->opts.password_file = e->password_file =
                                      etcd_strdup(opts->password_file)))) {
        snprintf(err, err_len, "out of memory");
        etcd_free(e);
        return -1;
    }
    /* The range of the prefix: [prefix, prefix with its last byte + 1). */
    char *end = etcd_strdup(prefix);
    if (end)
        end[e->prefix_len - 1]++;
    e->keys = (etcd_keys){e->prefix, e->prefix_len, on_other_key, e};
    e->key_b64 = etcd_b64_encode(prefix, e->prefix_len);
    e->end_b64 = end ? etcd_b64_encode(end, e->prefix_len) : NULL;
    free(end);
    if (!e->key_b64 || !e->end_b64) {
        snprintf(err, err_len, "out of memory");
        etcd_free(e);
        return -1;
    }
    uv_timer_init(loop, &e->retry_timer);
    e->retry_timer.data = e;
    *out = e;
    if (etcd_probe_start(e))
        etcd_log(e, GW_ETCD_LOG_WARN,
                 "out of memory: no liveness probe of the watched member");
    proceed_or_login(e);
    return 0;
}

int gw_etcd_start(uv_loop_t *loop, sy_router *router, const char *url,
                  const char *prefix, gw_etcd **out, char *err,
                  size_t err_len) {
    gw_etcd_options o = {0};
    o.url = url;
    o.prefix = prefix;
    return gw_etcd_start_opts(loop, router, &o, out, err, err_len);
}

static void retry_timer_closed(uv_handle_t *h) {
    etcd_free(h->data);
}

void gw_etcd_stop(gw_etcd *e) {
    if (!e || e->stopping)
        return;
    e->stopping = true;
    etcd_probe_stop(e);
    etcd_auth_stop(e);
    drop_http(e);
    set_state(e, ST_STOPPED, NULL);
    uv_timer_stop(&e->retry_timer);
    uv_close((uv_handle_t *)&e->retry_timer, retry_timer_closed);
}
