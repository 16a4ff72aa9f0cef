/*
 * router.c - the router: named config sources, applying documents and
 * one-route changes, rollback, pull sources with coalesced notifications,
 * service instance lists and events (the reports it fills live in
 * report.c). Every change is built off to the side as a new snapshot
 * (snapshot.c) and published in one step (publish.c); a failure at any step
 * leaves the live snapshot untouched.
 *
 *   apply(source, bytes)
 *     parse+validate -> skip if same version/checksum -> diff vs the
 *     source's live routes -> changes -> derive snapshot -> publish -> report
 *
 * Writers are serialized by one mutex; readers never touch it.
 */
#include "def.h"
#include "diff.h"
#include "report.h"
#include "service.h"
#include "snapshot.h"

#include <pthread.h>
#include <stdio.h>

#define NONE UINT32_MAX
#define MAX_SOURCES 256

typedef struct history_entry {
    char *version; /* may be NULL */
    char *bytes;
    size_t len;
} history_entry;

typedef struct source {
    char *name;
    char *version;     /* of the last applied document */
    uint64_t checksum; /* of the last applied document */
    bool applied;
    uint32_t next_pos; /* position for routes upserted without a document */
    history_entry *history;
    size_t history_count; /* newest last */
    sy_load_fn load;
    void *load_data;
    _Atomic int dirty;
    _Atomic int running;
} source;

/* A route that left the live table at `generation`: its reference is
 * dropped once no snapshot older than that generation is alive. */
typedef struct grave {
    struct sy_route *route;
    uint64_t generation;
} grave;

struct sy_router {
    sy_alloc alloc;
    grave *graves;
    size_t grave_count, grave_cap;
    sy_router_options opts;
    sy_parse_options popts;
    pthread_mutex_t lock;
    source *sources;
    size_t source_count;
    const char *source_names[MAX_SOURCES];
    sy_pub *pub;
    struct sy_route *defaults;
    void *data;
    uint64_t rng;
};

/* ---- helpers ---- */

static void log_msg(sy_router *r, sy_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void log_msg(sy_router *r, sy_log_level lvl, const char *fmt, ...) {
    if (!r->opts.on_log)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    r->opts.on_log(r->opts.callback_data, lvl, buf);
}

static source *find_source(sy_router *r, const char *name) {
    for (size_t i = 0; name && i < r->source_count; i++)
        if (strcmp(r->sources[i].name, name) == 0)
            return &r->sources[i];
    return NULL;
}

static const sy_snapshot *current(sy_router *r) {
    return (const sy_snapshot *)sy_pub_current(r->pub);
}

static void destroy_snapshot(void *data, sy_pub_obj *obj) {
    SY_UNUSED(data);
    sy_snapshot_destroy((sy_snapshot *)obj);
}

static uint64_t pub_clock(void *data) {
    SY_UNUSED(data);
    return sy_now_monotonic_us() / 1000u;
}

static void held_cb(void *data, uint64_t gen, uint64_t age) {
    sy_router *r = data;
    if (r->opts.on_retired_held)
        r->opts.on_retired_held(r->opts.callback_data, gen, age);
}

static sy_snapshot_config base_config(sy_router *r) {
    sy_snapshot_config cfg = {0};
    cfg.strip_host_port = r->opts.strip_host_port;
    cfg.clock_ms = r->opts.clock_ms;
    cfg.clock_data = r->opts.callback_data;
    cfg.random = r->opts.random;
    cfg.defaults = r->defaults;
    cfg.sources = r->source_names;
    cfg.source_count = r->source_count;
    return cfg;
}

/* Drop the references of removed routes no live snapshot can still use. */
static void bury(sy_router *r) {
    uint64_t oldest = sy_pub_oldest_generation(r->pub);
    size_t k = 0;
    for (size_t i = 0; i < r->grave_count; i++) {
        if (r->graves[i].generation <= oldest)
            sy_route_unref(r->graves[i].route);
        else
            r->graves[k++] = r->graves[i];
    }
    r->grave_count = k;
}

static bool graves_reserve(sy_router *r, size_t extra) {
    if (r->grave_count + extra <= r->grave_cap)
        return true;
    size_t cap = r->grave_cap ? r->grave_cap * 2 : 64;
    while (cap < r->grave_count + extra)
        cap *= 2;
    grave *g = sy_realloc(&r->alloc, r->graves, cap * sizeof *g);
    if (!g)
        return false;
    r->graves = g;
    r->grave_cap = cap;
    return true;
}

/* Derive from the live snapshot and publish; on failure nothing changes. */
static int derive_publish(sy_router *r, const sy_snapshot_config *cfg,
                          const sy_route_change *ch, size_t n,
                          uint64_t *generation, sy_error *err) {
    const sy_snapshot *cur = current(r);
    sy_snapshot *next;
    struct sy_route **removed;
    size_t nremoved;
    int rc =
        sy_snapshot_derive(&r->alloc, cur, cfg, ch, n, cur->pub.generation + 1,
                           &next, &removed, &nremoved, err);
    if (rc)
        return rc;
    if (!graves_reserve(r, nremoved))
        rc = SY_ENOMEM;
    else
        rc = sy_pub_publish(r->pub, &next->pub);
    if (rc) {
        sy_free(&r->alloc, removed);
        sy_snapshot_destroy(next);
        return sy_error_set(err, rc, "",
                            rc == SY_EBUSY
                                ? "too many retired snapshots are still held "
                                  "by readers (max_retired reached)"
                                : "%s",
                            sy_strerror(rc));
    }
    /* the live table now holds the added routes and lets go of the
     * removed ones once no older snapshot is alive */
    for (size_t i = 0; i < n; i++)
        if (ch[i].route)
            sy_route_ref(ch[i].route);
    for (size_t i = 0; i < nremoved; i++)
        r->graves[r->grave_count++] = (grave){removed[i], next->pub.generation};
    sy_free(&r->alloc, removed);
    bury(r);
    if (generation)
        *generation = next->pub.generation;
    if (r->opts.retired_warn_ms)
        sy_pub_check_held(r->pub, r->opts.retired_warn_ms, held_cb, r);
    return SY_OK;
}

/* ---- reports ---- */

static void deliver(sy_router *r, sy_report *rep, sy_report **out) {
    if (rep && r->opts.on_event)
        r->opts.on_event(r->opts.callback_data, rep);
    if (out)
        *out = rep;
    else
        sy_report_free(rep);
}

/* ---- lifecycle ---- */

int sy_router_new(const sy_router_options *opts, sy_router **out,
                  sy_error *err) {
    if (!out)
        return sy_error_set(err, SY_EINVAL, "", "out is NULL");
    *out = NULL;
    sy_router_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    if (opts) {
        if (opts->size < offsetof(sy_router_options, callback_data))
            return sy_error_set(err, SY_EINVAL, "", "options size too small");
        memcpy(&o, opts, opts->size < sizeof o ? opts->size : sizeof o);
    }
    sy_alloc a;
    sy_alloc_init(&a, o.allocator);
    sy_router *r = sy_calloc(&a, 1, sizeof *r);
    if (!r)
        return sy_error_set(err, SY_ENOMEM, "", "out of memory");
    r->alloc = a;
    r->opts = o;
    r->opts.default_filters = NULL;
    if (!r->opts.history)
        r->opts.history = 8;
    r->popts = (sy_parse_options)SY_PARSE_OPTIONS_INIT;
    r->popts.lenient = o.lenient;
    r->popts.limits = o.limits;
    r->popts.allocator = o.allocator;
    r->popts.registry = o.registry;
    r->rng = (uint64_t)(uintptr_t)r ^ sy_now_monotonic_us();
    int rc = SY_ENOMEM;
    if (pthread_mutex_init(&r->lock, NULL) != 0) {
        sy_free(&a, r);
        return sy_error_set(err, SY_ENOMEM, "", "cannot create mutex");
    }
    if (o.default_filters) {
        rc = sy_def_parse_filters(o.default_filters, strlen(o.default_filters),
                                  &r->popts, &r->defaults, err);
        if (rc)
            goto fail;
    }
    sy_snapshot_config cfg = base_config(r);
    sy_snapshot *first;
    struct sy_route **none;
    size_t nnone;
    rc = sy_snapshot_derive(&r->alloc, NULL, &cfg, NULL, 0, 0, &first, &none,
                            &nnone, err);
    if (rc)
        goto fail;
    sy_free(&r->alloc, none);
    sy_pub_options po = {destroy_snapshot, pub_clock, r, o.max_retired};
    rc = sy_pub_new(&r->alloc, &po, &first->pub, &r->pub);
    if (rc) {
        sy_snapshot_destroy(first);
        sy_error_set(err, rc, "", "%s", sy_strerror(rc));
        goto fail;
    }
    *out = r;
    return SY_OK;
fail:
    if (r->defaults)
        sy_route_unref(r->defaults);
    pthread_mutex_destroy(&r->lock);
    sy_free(&a, r);
    return rc;
}

static void free_history(sy_router *r, source *s) {
    for (size_t i = 0; i < s->history_count; i++) {
        sy_free(&r->alloc, s->history[i].version);
        sy_free(&r->alloc, s->history[i].bytes);
    }
    sy_free(&r->alloc, s->history);
}

void sy_router_free(sy_router *r) {
    if (!r)
        return;
    /* the live table's references, then the buried ones */
    const sy_snapshot *cur = current(r);
    for (uint32_t i = 0; i < cur->slot_count; i++)
        if (cur->slots[i].route)
            sy_route_unref(cur->slots[i].route);
    for (size_t i = 0; i < r->grave_count; i++)
        sy_route_unref(r->graves[i].route);
    sy_free(&r->alloc, r->graves);
    sy_pub_free(r->pub);
    for (size_t i = 0; i < r->source_count; i++) {
        source *s = &r->sources[i];
        free_history(r, s);
        sy_free(&r->alloc, s->name);
        sy_free(&r->alloc, s->version);
    }
    sy_free(&r->alloc, r->sources);
    if (r->defaults)
        sy_route_unref(r->defaults);
    pthread_mutex_destroy(&r->lock);
    sy_alloc a = r->alloc;
    sy_free(&a, r);
}

void sy_router_set_data(sy_router *r, void *data) {
    r->data = data;
}
void *sy_router_data(const sy_router *r) {
    return r->data;
}

int sy_router_add_source(sy_router *r, const char *name, sy_error *err) {
    if (!r || !name || !*name)
        return sy_error_set(err, SY_EINVAL, "", "source name is empty");
    pthread_mutex_lock(&r->lock);
    int rc = SY_OK;
    if (find_source(r, name)) {
        rc = sy_error_set(err, SY_EEXIST, "", "source '%s' already exists",
                          name);
    } else if (r->source_count >= MAX_SOURCES) {
        rc =
            sy_error_set(err, SY_ELIMIT, "", "at most %d sources", MAX_SOURCES);
    } else {
        /* sources never move: notify uses a source outside the lock */
        if (!r->sources)
            r->sources = sy_calloc(&r->alloc, MAX_SOURCES, sizeof *r->sources);
        char *nm = r->sources ? sy_strdup(&r->alloc, name) : NULL;
        if (!nm) {
            rc = sy_error_set(err, SY_ENOMEM, "", "out of memory");
        } else {
            r->sources[r->source_count].name = nm;
            r->source_names[r->source_count] = nm;
            r->source_count++;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

/* ---- apply ---- */

static bool same_text(const char *a, const char *b) {
    return a && b && strcmp(a, b) == 0;
}

static int push_history(sy_router *r, source *s, const char *version,
                        const char *bytes, size_t len) {
    history_entry e = {NULL, sy_strndup(&r->alloc, bytes, len), len};
    if (!e.bytes || (version && !(e.version = sy_strdup(&r->alloc, version)))) {
        sy_free(&r->alloc, e.bytes);
        return SY_ENOMEM;
    }
    if (s->history_count == r->opts.history) {
        sy_free(&r->alloc, s->history[0].version);
        sy_free(&r->alloc, s->history[0].bytes);
        memmove(s->history, s->history + 1,
                (s->history_count - 1) * sizeof *s->history);
        s->history_count--;
    } else {
        history_entry *h = sy_realloc(&r->alloc, s->history,
                                      (s->history_count + 1) * sizeof *h);
        if (!h) {
            sy_free(&r->alloc, e.bytes);
            sy_free(&r->alloc, e.version);
            return SY_ENOMEM;
        }
        s->history = h;
    }
    s->history[s->history_count++] = e;
    return SY_OK;
}

/* The live routes of source `si`, in document position order. */
static const struct sy_route **live_routes(sy_router *r, const sy_snapshot *cur,
                                           uint32_t si, size_t *count) {
    const struct sy_route **v =
        sy_malloc(&r->alloc, (cur->route_count + 1) * sizeof *v);
    size_t n = 0;
    if (v)
        for (size_t i = 0; i < cur->route_count; i++) {
            const sy_slot *sl = &cur->slots[cur->rank[i]];
            if (sl->source == si)
                v[n++] = sl->route;
        }
    *count = n;
    return v;
}

typedef struct reuse_ctx {
    const sy_snapshot *cur;
    uint32_t source;
} reuse_ctx;

/* A live route of the same source with the same meaning: share it rather
 * than compile it again. */
static const struct sy_route *reuse_live(void *data, const char *id,
                                         uint64_t fingerprint) {
    const reuse_ctx *rc = data;
    uint32_t slot = sy_snapshot_find_slot(rc->cur, id);
    if (slot == NONE || rc->cur->slots[slot].source != rc->source ||
        rc->cur->slots[slot].route->fingerprint != fingerprint)
        return NULL;
    return rc->cur->slots[slot].route;
}

static int apply_locked(sy_router *r, source *src, const char *json, size_t len,
                        bool force, sy_report *rep, sy_error *err) {
    uint32_t si = (uint32_t)(src - r->sources);
    uint64_t t0 = sy_now_monotonic_us();
    sy_document *doc = NULL;
    reuse_ctx rctx = {current(r), si};
    int rc = sy_document_parse_reusing(json, len, &r->popts, reuse_live, &rctx,
                                       &doc, err);
    if (rc) {
        if (err)
            sy_report_add_issue(rep, err);
        return rc;
    }
    const char *version = sy_document_version(doc);
    if (version && !(rep->version = sy_strdup(&r->alloc, version))) {
        sy_document_free(doc);
        return sy_error_set(err, SY_ENOMEM, "", "out of memory");
    }
    /* a lenient apply must not drop routes silently: no room to report
     * an issue fails the apply */
    for (size_t i = 0; i < sy_document_issue_count(doc); i++)
        if (sy_report_add_issue(rep, sy_document_issue(doc, i))) {
            sy_document_free(doc);
            return sy_error_set(err, SY_ENOMEM, "", "out of memory");
        }
    if (sy_document_route_count(doc) == 0 && sy_document_issue_count(doc)) {
        rc = sy_error_set(err, SY_EINVALIDDOC, "",
                          "no route of the document is valid (%zu invalid); "
                          "nothing changed",
                          sy_document_issue_count(doc));
        sy_document_free(doc);
        return rc;
    }
    if (!force && src->applied &&
        ((version && same_text(version, src->version)) ||
         sy_document_checksum(doc) == src->checksum)) {
        rep->skipped = true;
        rep->generation = current(r)->pub.generation;
        rep->parse_us = sy_now_monotonic_us() - t0;
        sy_document_free(doc);
        return SY_OK;
    }
    const sy_snapshot *cur = current(r);
    size_t n = sy_document_route_count(doc);
    /* ids owned by another source are an error of this document */
    const struct sy_route **keep = sy_malloc(&r->alloc, (n + 1) * sizeof *keep);
    sy_route_change *ch =
        sy_malloc(&r->alloc, (n + cur->route_count + 1) * sizeof *ch);
    size_t kept = 0, nch = 0, old_count = 0;
    const struct sy_route **old = live_routes(r, cur, si, &old_count);
    if (!keep || !ch || !old) {
        rc = sy_error_set(err, SY_ENOMEM, "", "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const struct sy_route *rt = sy_document_route(doc, i);
        uint32_t pos = doc->positions[i];
        if (pos > SY_RANK_POS_MAX) {
            rc = sy_error_set(err, SY_ELIMIT, "routes",
                              "a source holds at most %u routes",
                              SY_RANK_POS_MAX + 1);
            goto done;
        }
        uint32_t slot = sy_snapshot_find_slot(cur, rt->id);
        if (slot != NONE && cur->slots[slot].source != si) {
            sy_error e;
            char path[64];
            snprintf(path, sizeof path, "%s[%u].id",
                     doc->envelope ? "routes" : "", pos);
            sy_error_set(&e, SY_EDUPLICATE, path,
                         "route id '%s' is already defined by source '%s'",
                         rt->id, r->sources[cur->slots[slot].source].name);
            if (sy_report_add_issue(rep, &e) && r->opts.lenient) {
                rc = sy_error_set(err, SY_ENOMEM, "", "out of memory");
                goto done;
            }
            if (!r->opts.lenient) {
                if (err)
                    *err = e;
                rc = SY_EDUPLICATE;
                goto done;
            }
            continue;
        }
        keep[kept++] = rt;
        uint64_t key = sy_rank_key(rt->order, si, pos);
        if (slot != NONE && cur->slots[slot].key == key &&
            cur->slots[slot].route->fingerprint == rt->fingerprint)
            continue; /* unchanged, same rank: shared as it is */
        /* same meaning at a new rank: keep sharing the compiled route */
        struct sy_route *use =
            slot != NONE &&
                    cur->slots[slot].route->fingerprint == rt->fingerprint
                ? cur->slots[slot].route
                : (struct sy_route *)rt;
        ch[nch++] = (sy_route_change){rt->id, use, key, si};
    }
    rc = sy_diff_routes(&r->alloc, old, old_count, keep, kept, &rep->diff);
    if (rc) {
        sy_error_set(err, rc, "", "out of memory");
        goto done;
    }
    for (size_t i = 0; i < sy_diff_removed_count(rep->diff); i++)
        ch[nch++] =
            (sy_route_change){sy_diff_removed(rep->diff, i), NULL, 0, si};
    rep->parse_us = sy_now_monotonic_us() - t0;
    uint64_t t1 = sy_now_monotonic_us();
    sy_snapshot_config cfg = base_config(r);
    rc = derive_publish(r, &cfg, ch, nch, &rep->generation, err);
    rep->publish_us = sy_now_monotonic_us() - t1;
    if (rc)
        goto done;
    /* the source's state follows the published snapshot */
    char *v = version ? sy_strdup(&r->alloc, version) : NULL;
    sy_free(&r->alloc, src->version);
    src->version = v;
    src->checksum = sy_document_checksum(doc);
    src->applied = true;
    /* positions restart after the document: upserted routes that the
     * document does not hold are gone with this apply */
    src->next_pos = 0;
    for (size_t i = 0; i < n; i++)
        if (doc->positions[i] >= src->next_pos)
            src->next_pos = doc->positions[i] + 1;
    if (push_history(r, src, version, json, len))
        log_msg(r, SY_LOG_WARN, "source %s: history not kept (out of memory)",
                src->name);
    log_msg(r, SY_LOG_INFO,
            "source %s: applied version %s: %zu added, %zu updated, %zu "
            "removed, %zu unchanged (generation %llu)",
            src->name, version ? version : "-", sy_diff_added_count(rep->diff),
            sy_diff_updated_count(rep->diff), sy_diff_removed_count(rep->diff),
            sy_diff_unchanged_count(rep->diff),
            (unsigned long long)rep->generation);
done:
    sy_free(&r->alloc, keep);
    sy_free(&r->alloc, ch);
    sy_free(&r->alloc, old);
    sy_document_free(doc);
    return rc;
}

static int apply_common(sy_router *r, const char *name, const char *json,
                        size_t len, bool force, sy_report **report,
                        sy_error *err) {
    if (report)
        *report = NULL;
    if (!r || !json)
        return sy_error_set(err, SY_EINVAL, "", "router or document is NULL");
    pthread_mutex_lock(&r->lock);
    source *src = find_source(r, name);
    int rc;
    sy_report *rep = NULL;
    if (!src) {
        rc = sy_error_set(err, SY_ENOTFOUND, "", "unknown source '%s'",
                          name ? name : "(null)");
    } else if (!(rep = sy_report_new(&r->alloc, name))) {
        rc = sy_error_set(err, SY_ENOMEM, "", "out of memory");
    } else {
        rc = apply_locked(r, src, json, len, force, rep, err);
        if (rc)
            log_msg(r, SY_LOG_ERROR, "source %s: document rejected: %s", name,
                    err ? err->message : sy_strerror(rc));
    }
    if (rep && rc == SY_OK)
        deliver(r, rep, report);
    else if (report)
        *report = rep;
    else
        sy_report_free(rep);
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int sy_router_apply(sy_router *r, const char *source_name, const char *json,
                    size_t len, sy_report **report, sy_error *err) {
    return apply_common(r, source_name, json, len, false, report, err);
}

int sy_router_rollback(sy_router *r, const char *name, const char *version,
                       sy_report **report, sy_error *err) {
    if (report)
        *report = NULL;
    if (!r)
        return sy_error_set(err, SY_EINVAL, "", "router is NULL");
    pthread_mutex_lock(&r->lock);
    source *src = find_source(r, name);
    char *bytes = NULL;
    size_t len = 0;
    int rc = SY_OK;
    if (!src) {
        rc = sy_error_set(err, SY_ENOTFOUND, "", "unknown source '%s'",
                          name ? name : "(null)");
    } else {
        /* version NULL: the document before the current one */
        const history_entry *e = NULL;
        if (!version) {
            if (src->history_count >= 2)
                e = &src->history[src->history_count - 2];
        } else {
            for (size_t i = src->history_count; i-- > 0;)
                if (same_text(src->history[i].version, version)) {
                    e = &src->history[i];
                    break;
                }
        }
        if (!e)
            rc = sy_error_set(err, SY_ENOTFOUND, "",
                              "source '%s' has no kept version '%s'", name,
                              version ? version : "(previous)");
        else if (!(bytes = sy_strndup(&r->alloc, e->bytes, e->len)))
            rc = sy_error_set(err, SY_ENOMEM, "", "out of memory");
        else
            len = e->len;
    }
    pthread_mutex_unlock(&r->lock);
    if (rc == SY_OK)
        rc = apply_common(r, name, bytes, len, true, report, err);
    if (r)
        sy_free(&r->alloc, bytes);
    return rc;
}

/* ---- one-route changes ---- */

/* Tell on_event about a one-route change (added, updated or removed). */
static void report_one(sy_router *r, const char *source,
                       const struct sy_route *old, const struct sy_route *now,
                       uint64_t generation) {
    if (!r->opts.on_event)
        return;
    sy_report *rep = sy_report_new(&r->alloc, source);
    if (!rep)
        return;
    rep->generation = generation;
    const struct sy_route *o[1] = {old}, *n[1] = {now};
    if (sy_diff_routes(&r->alloc, o, old ? 1 : 0, n, now ? 1 : 0, &rep->diff) ==
        SY_OK)
        deliver(r, rep, NULL);
    else
        sy_report_free(rep);
}

int sy_router_upsert_route(sy_router *r, const char *name,
                           const char *route_json, size_t len, sy_error *err) {
    if (!r || !route_json)
        return sy_error_set(err, SY_EINVAL, "", "router or route is NULL");
    struct sy_route *rt;
    int rc = sy_def_parse_route(route_json, len, &r->popts, "route", &rt, err);
    if (rc)
        return rc;
    pthread_mutex_lock(&r->lock);
    source *src = find_source(r, name);
    if (!src) {
        rc = sy_error_set(err, SY_ENOTFOUND, "", "unknown source '%s'",
                          name ? name : "(null)");
        goto done;
    }
    uint32_t si = (uint32_t)(src - r->sources);
    const sy_snapshot *cur = current(r);
    uint32_t slot = sy_snapshot_find_slot(cur, rt->id);
    uint32_t pos;
    if (slot != NONE) {
        if (cur->slots[slot].source != si) {
            rc = sy_error_set(err, SY_EDUPLICATE, "route.id",
                              "route id '%s' is already defined by source "
                              "'%s'",
                              rt->id, r->sources[cur->slots[slot].source].name);
            goto done;
        }
        pos = (uint32_t)(cur->slots[slot].key & 0xffffffu);
    } else {
        if (src->next_pos > SY_RANK_POS_MAX) {
            rc = sy_error_set(err, SY_ELIMIT, "route",
                              "source '%s' has used all %u route positions; "
                              "apply its whole document again to renumber",
                              src->name, SY_RANK_POS_MAX + 1);
            goto done;
        }
        pos = src->next_pos++;
    }
    rt->doc_index = pos;
    sy_route_change ch = {rt->id, rt, sy_rank_key(rt->order, si, pos), si};
    sy_snapshot_config cfg = base_config(r);
    struct sy_route *old =
        slot != NONE ? sy_route_ref(cur->slots[slot].route) : NULL;
    uint64_t gen = 0;
    rc = derive_publish(r, &cfg, &ch, 1, &gen, err);
    if (rc == SY_OK)
        report_one(r, src->name, old, rt, gen);
    sy_route_unref(old);
done:
    pthread_mutex_unlock(&r->lock);
    sy_route_unref(rt);
    return rc;
}

int sy_router_remove_route(sy_router *r, const char *id, sy_error *err) {
    if (!r || !id)
        return sy_error_set(err, SY_EINVAL, "", "router or id is NULL");
    pthread_mutex_lock(&r->lock);
    const sy_snapshot *cur = current(r);
    uint32_t slot = sy_snapshot_find_slot(cur, id);
    int rc;
    if (slot == NONE) {
        rc = sy_error_set(err, SY_ENOTFOUND, "", "no route '%s'", id);
    } else {
        uint32_t si = cur->slots[slot].source;
        struct sy_route *old = sy_route_ref(cur->slots[slot].route);
        sy_route_change ch = {id, NULL, 0, si};
        sy_snapshot_config cfg = base_config(r);
        uint64_t gen = 0;
        rc = derive_publish(r, &cfg, &ch, 1, &gen, err);
        if (rc == SY_OK)
            report_one(r, r->sources[si].name, old, NULL, gen);
        sy_route_unref(old);
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int sy_router_set_route_enabled(sy_router *r, const char *id, bool enabled,
                                sy_error *err) {
    if (!r || !id)
        return sy_error_set(err, SY_EINVAL, "", "router or id is NULL");
    pthread_mutex_lock(&r->lock);
    const sy_snapshot *cur = current(r);
    uint32_t slot = sy_snapshot_find_slot(cur, id);
    int rc = SY_OK;
    if (slot == NONE) {
        rc = sy_error_set(err, SY_ENOTFOUND, "", "no route '%s'", id);
    } else if (cur->slots[slot].route->disabled != !enabled) {
        struct sy_route *nr;
        rc = sy_def_route_with_enabled(cur->slots[slot].route, enabled,
                                       &r->popts, &nr, err);
        if (rc == SY_OK) {
            nr->doc_index = cur->slots[slot].route->doc_index;
            uint32_t si = cur->slots[slot].source;
            struct sy_route *old = sy_route_ref(cur->slots[slot].route);
            sy_route_change ch = {id, nr, cur->slots[slot].key, si};
            sy_snapshot_config cfg = base_config(r);
            uint64_t gen = 0;
            rc = derive_publish(r, &cfg, &ch, 1, &gen, err);
            if (rc == SY_OK)
                report_one(r, r->sources[si].name, old, nr, gen);
            sy_route_unref(old);
            sy_route_unref(nr);
        }
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

/* ---- pull sources ---- */

int sy_router_set_loader(sy_router *r, const char *name, sy_load_fn load,
                         void *data, sy_error *err) {
    if (!r || !load)
        return sy_error_set(err, SY_EINVAL, "", "router or loader is NULL");
    pthread_mutex_lock(&r->lock);
    source *src = find_source(r, name);
    int rc = SY_OK;
    if (!src)
        rc = sy_error_set(err, SY_ENOTFOUND, "", "unknown source '%s'",
                          name ? name : "(null)");
    else {
        src->load = load;
        src->load_data = data;
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

static int load_and_apply(sy_router *r, source *src, sy_error *err) {
    sy_loaded ld = {0};
    int rc = src->load(src->load_data, src->name, &ld, err);
    if (rc) {
        if (err && err->code == SY_OK)
            sy_error_set(err, SY_ECALLBACK, "", "loader for '%s' failed",
                         src->name);
        log_msg(r, SY_LOG_ERROR, "source %s: loader failed", src->name);
        return rc < 0 ? rc : SY_ECALLBACK;
    }
    rc = apply_common(r, src->name, ld.bytes, ld.len, false, NULL, err);
    if (ld.release)
        ld.release(ld.data, ld.bytes);
    return rc;
}

int sy_router_notify(sy_router *r, const char *name, sy_error *err) {
    if (!r)
        return sy_error_set(err, SY_EINVAL, "", "router is NULL");
    pthread_mutex_lock(&r->lock);
    source *src = find_source(r, name);
    bool has_loader = src && src->load;
    pthread_mutex_unlock(&r->lock);
    if (!src)
        return sy_error_set(err, SY_ENOTFOUND, "", "unknown source '%s'",
                            name ? name : "(null)");
    if (!has_loader)
        return sy_error_set(err, SY_EINVAL, "", "source '%s' has no loader",
                            name);
    /* Mark dirty; whoever holds `running` keeps applying until clean. A
     * notification arriving during an apply costs one more apply, not one
     * per notification. */
    int rc = SY_OK;
    atomic_store_explicit(&src->dirty, 1, memory_order_release);
    while (atomic_load_explicit(&src->dirty, memory_order_acquire)) {
        if (atomic_exchange_explicit(&src->running, 1, memory_order_acq_rel))
            return SY_OK; /* coalesced into the running apply */
        while (atomic_exchange_explicit(&src->dirty, 0, memory_order_acq_rel))
            rc = load_and_apply(r, src, err);
        atomic_store_explicit(&src->running, 0, memory_order_release);
    }
    return rc;
}

/* ---- instances ---- */

static int publish_service(sy_router *r, struct sy_service *svc, sy_report *rep,
                           sy_error *err) {
    const sy_snapshot *cur = current(r);
    const char *name = sy_service_name(svc);
    const struct sy_service *old = sy_snapshot_service(cur, name, strlen(name));
    int rc = sy_service_diff_compute(&r->alloc, old, svc, &rep->instances, err);
    if (rc)
        return rc;
    if (old)
        sy_service_inherit_rr(svc, old);
    size_t n = cur->service_count;
    struct sy_service **list = sy_malloc(&r->alloc, (n + 1) * sizeof *list);
    if (!list)
        return sy_error_set(err, SY_ENOMEM, "", "out of memory");
    size_t k = 0;
    bool placed = false;
    for (size_t i = 0; i < n; i++) {
        int c = strcmp(sy_service_name(cur->services[i]), name);
        if (c == 0) {
            list[k++] = svc;
            placed = true;
            continue;
        }
        if (c > 0 && !placed) {
            list[k++] = svc;
            placed = true;
        }
        list[k++] = cur->services[i];
    }
    if (!placed)
        list[k++] = svc;
    sy_snapshot_config cfg = base_config(r);
    cfg.services = list;
    cfg.service_count = k;
    cfg.replace_services = true;
    rc = derive_publish(r, &cfg, NULL, 0, &rep->generation, err);
    sy_free(&r->alloc, list);
    return rc;
}

static int instances_common(sy_router *r, const char *service,
                            const sy_instance *list, size_t count,
                            const sy_instance_delta *deltas, size_t ndeltas,
                            sy_report **report, sy_error *err) {
    if (report)
        *report = NULL;
    if (!r || !service || !*service)
        return sy_error_set(err, SY_EINVAL, "", "router or service is NULL");
    pthread_mutex_lock(&r->lock);
    sy_report *rep = sy_report_new(&r->alloc, NULL);
    struct sy_service *svc = NULL;
    int rc;
    if (!rep) {
        rc = sy_error_set(err, SY_ENOMEM, "", "out of memory");
    } else if (deltas) {
        const struct sy_service *old =
            sy_snapshot_service(current(r), service, strlen(service));
        struct sy_service *empty = NULL;
        rc = old ? SY_OK
                 : sy_service_new(&r->alloc, service, NULL, 0, &empty, err);
        if (rc == SY_OK)
            rc = sy_service_apply_deltas(old ? old : empty, deltas, ndeltas,
                                         &svc, err);
        sy_service_unref(empty);
    } else {
        rc = sy_service_new(&r->alloc, service, list, count, &svc, err);
    }
    if (rc == SY_OK)
        rc = publish_service(r, svc, rep, err);
    sy_service_unref(svc);
    if (rc == SY_OK) {
        deliver(r, rep, report);
    } else {
        sy_report_free(rep);
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int sy_router_set_instances(sy_router *r, const char *service,
                            const sy_instance *instances, size_t count,
                            sy_report **report, sy_error *err) {
    if (count && !instances)
        return sy_error_set(err, SY_EINVAL, "", "instances is NULL");
    return instances_common(r, service, instances, count, NULL, 0, report, err);
}

int sy_router_update_instances(sy_router *r, const char *service,
                               const sy_instance_delta *deltas, size_t count,
                               sy_report **report, sy_error *err) {
    if (!deltas && count)
        return sy_error_set(err, SY_EINVAL, "", "deltas is NULL");
    static const sy_instance_delta none[1];
    return instances_common(r, service, NULL, 0, deltas ? deltas : none, count,
                            report, err);
}

/* ---- readers and metrics ---- */

sy_snapshot *sy_router_acquire(sy_router *r) {
    return (sy_snapshot *)sy_pub_acquire(r->pub);
}

void sy_snapshot_release(sy_snapshot *s) {
    if (s)
        sy_pub_release((sy_pub_ref)s);
}

size_t sy_router_reclaim(sy_router *r) {
    pthread_mutex_lock(&r->lock);
    size_t n = sy_pub_reclaim(r->pub);
    bury(r);
    if (r->opts.retired_warn_ms)
        sy_pub_check_held(r->pub, r->opts.retired_warn_ms, held_cb, r);
    pthread_mutex_unlock(&r->lock);
    return n;
}

void sy_router_metrics(sy_router *r, sy_metrics *out) {
    pthread_mutex_lock(&r->lock);
    sy_pub_metrics pm;
    sy_pub_metrics_get(r->pub, &pm);
    out->generation = pm.generation;
    out->publishes = pm.publishes;
    out->live_snapshots = pm.live;
    out->retired_snapshots = pm.retired;
    out->reclaimed_snapshots = pm.reclaimed;
    out->retired_bytes = pm.retired_bytes;
    out->oldest_retired_age_ms = pm.oldest_retired_age_ms;
    out->routes = current(r)->route_count;
    pthread_mutex_unlock(&r->lock);
}
