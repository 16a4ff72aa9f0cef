/*
 * router.c - the router: named config sources and commits. Every change a
 * host makes (a document for a source, a rollback, one-route upserts,
 * removes and enables, instance lists) is a step of a commit; the steps of
 * one commit are derived one after the other off to the side and the last
 * derived snapshot is published in one step (publish.c). A failure at any
 * step publishes nothing and leaves every source as it was. The single
 * calls (sy_router_apply, ...) are one-step commits; change sets
 * (change_set.c) stage several.
 *
 * The commit itself (steps, publish, references) is in commit.c; this file
 * holds the router's lifecycle, sources, callbacks, the single calls, pull
 * sources and the reader calls.
 *
 * Writers are serialized by one mutex; readers never touch it. A writer
 * call from inside a callback gets SY_EREENTRANT instead of a deadlock.
 */
#include "def/def.h"
#include "policy/host_runs.h"
#include "policy/store.h"
#include "router/commit.h"
#include "router/report.h"
#include "router/router_int.h"
#include "service/service.h"
#include "snapshot/diff.h"
#include "snapshot/snapshot.h"

#include <stdio.h>

#define NONE SY_NONE

/* Every writer entry point: a call from a callback would deadlock. */
static int writer_enter(sy_router *r, sy_error *err) {
    if (sy__router_in_callback(r))
        return sy__error_set(err, SY_EREENTRANT, "",
                             "a writer call was made from inside a router "
                             "callback; make it after the callback returns");
    pthread_mutex_lock(&r->lock);
    return SY_OK;
}

/* ---- lifecycle ---- */

static void destroy_snapshot(void *data, sy__pub_obj *obj) {
    SY_UNUSED(data);
    sy__snapshot_destroy((sy_snapshot *)obj);
}

static uint64_t pub_clock(void *data) {
    SY_UNUSED(data);
    return sy__now_monotonic_us() / 1000u;
}

int sy_router_new(const sy_router_options *opts, sy_router **out,
                  sy_error *err) {
    if (!out)
        return sy__error_set(err, SY_EINVAL, "", "out is NULL");
    *out = NULL;
    sy_router_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    if (opts) {
        if (opts->size < offsetof(sy_router_options, callback_data))
            return sy__error_set(err, SY_EINVAL, "", "options size too small");
        memcpy(&o, opts, opts->size < sizeof o ? opts->size : sizeof o);
    }
    int hrc = sy__host_runs_check(o.host_runs, err);
    if (hrc)
        return hrc;
    if ((unsigned)o.path_normalization > SY_PATH_AS_IS ||
        (unsigned)o.escaped_slashes > SY_SLASHES_DECODE)
        return sy__error_set(err, SY_EINVAL, "",
                             "unknown path_normalization or escaped_slashes");
    if (o.outlier.max_ejected_percent > 100)
        return sy__error_set(err, SY_EINVAL, "",
                             "outlier.max_ejected_percent is above 100");
    sy__alloc a;
    sy__alloc_init(&a, o.allocator);
    sy_router *r = sy__calloc(&a, 1, sizeof *r);
    if (!r)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    r->alloc = a;
    r->opts = o;
    r->opts.default_filters = NULL;
    r->dflt_path = -1;
    if (!r->opts.history)
        r->opts.history = 8;
    r->popts = (sy_parse_options)SY_PARSE_OPTIONS_INIT;
    r->popts.lenient = o.lenient;
    r->popts.limits = o.limits;
    r->popts.allocator = o.allocator;
    r->popts.registry = o.registry;
    r->popts.host_runs = o.host_runs;
    r->rng = (uint64_t)(uintptr_t)r ^ sy__now_monotonic_us();
    atomic_init(&r->callback_thread, 0);
    atomic_init(&r->ejections, 0);
    atomic_init(&r->outcomes, 0);
    atomic_init(&r->eject_gate, false);
    int rc = SY_ENOMEM;
    r->brk_owner = -1;
    if (pthread_mutex_init(&r->lock, NULL) != 0) {
        sy__free(&a, r);
        return sy__error_set(err, SY_ENOMEM, "", "cannot create mutex");
    }
    if ((rc = sy__router_policy_init(r, err)))
        goto fail;
    if (o.default_filters) {
        rc = sy__def_parse_filters(o.default_filters, strlen(o.default_filters),
                                   &r->popts, &r->defaults, err);
        if (rc)
            goto fail;
        /* a host that declares what it runs (NULL: nothing declared,
         * nothing refused) */
        if (o.host_runs && sy__host_runs(o.host_runs, "forward:"))
            r->dflt_path = sy__route_path_filter(r->defaults);
    }
    sy__snapshot_config cfg = sy__router_snapshot_config(r);
    sy__derive_result empty; /* no change: nothing removed */
    rc = sy__snapshot_derive(
        &(sy__derive_input){.alloc = &r->alloc, .config = &cfg}, &empty, err);
    if (rc)
        goto fail;
    sy__free(&r->alloc, empty.removed);
    sy_snapshot *first = empty.snapshot;
    sy__pub_options po = {destroy_snapshot, pub_clock, r, o.max_retired};
    rc = sy__pub_new(&r->alloc, &po, &first->pub, &r->pub);
    if (rc) {
        sy__snapshot_destroy(first);
        sy__error_set(err, rc, "", "%s", sy_strerror(rc));
        goto fail;
    }
    *out = r;
    return SY_OK;
fail:
    if (r->defaults)
        sy__route_unref(r->defaults);
    if (r->policy)
        sy__router_policy_free(r);
    sy__free(&a, r->policy_mem);
    pthread_mutex_destroy(&r->lock);
    sy__free(&a, r);
    return rc;
}

static void free_history(sy_router *r, sy__source *s) {
    sy__free(&r->alloc, s->memo);
    for (size_t i = 0; i < s->history_count; i++)
        sy__history_entry_free(r, &s->history[i]);
    sy__free(&r->alloc, s->history);
}

void sy_router_free(sy_router *r) {
    if (!r)
        return;
    /* every attached route released (route_detach), then the live
     * table's references, then the buried ones */
    sy__router_release_all(r);
    const sy_snapshot *cur = sy__router_current(r);
    for (uint32_t i = 0; i < cur->slot_count; i++)
        if (sy__snapshot_slot(cur, i)->route)
            sy__route_unref(sy__snapshot_slot(cur, i)->route);
    for (size_t i = 0; i < r->grave_count; i++)
        sy__route_unref(r->graves[i].route);
    sy__free(&r->alloc, r->graves);
    sy__pub_free(r->pub);
    for (size_t i = 0; i < r->source_count; i++) {
        sy__source *s = &r->sources[i];
        free_history(r, s);
        sy__free(&r->alloc, s->name);
        sy__free(&r->alloc, s->version);
    }
    sy__free(&r->alloc, r->sources);
    if (r->defaults)
        sy__route_unref(r->defaults);
    sy__free(&r->alloc, r->free_keys);
    sy__free(&r->alloc, r->brk_held);
    sy__router_policy_free(r); /* every route released */
    sy__free(&r->alloc, r->status_memo);
    sy__free(&r->alloc, r->policy_mem);
    pthread_mutex_destroy(&r->lock);
    sy__alloc a = r->alloc;
    sy__free(&a, r);
}

/* The router's owner slot in its store: its bit marks the breaker
 * entries its routes use (policy/store.h). */
static int policy_owner(sy_router *r, sy_error *err) {
    r->brk_owner = sy__store_owner_take(r->policy);
    if (r->brk_owner < 0)
        return sy__error_set(err, SY_ELIMIT, "policy_store",
                             "the policy store is used by %u routers already "
                             "(its most)",
                             SY_STORE_OWNERS);
    return 0;
}

/* The policy store: the host's (options), else one of the router's own
 * (docs/policies.md). */

int sy__router_policy_init(sy_router *r, sy_error *err) {
    if (r->opts.policy_store) {
        r->policy = r->opts.policy_store;
        return policy_owner(r, err);
    }
    uint32_t slots = r->opts.policy_slots ? r->opts.policy_slots : 16384;
    uint32_t brk = r->opts.policy_breakers ? r->opts.policy_breakers : 256;
    size_t bytes = sy_policy_store_bytes(slots, brk);
    r->policy_mem = sy__malloc(&r->alloc, bytes);
    if (!r->policy_mem)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    int rc =
        sy_policy_store_init(r->policy_mem, bytes, slots, brk, &r->policy, err);
    return rc ? rc : policy_owner(r, err);
}

sy_policy_store *sy_router_policy_store(sy_router *r) {
    return r ? r->policy : NULL;
}

void sy_router_set_data(sy_router *r, void *data) {
    r->data = data;
}
void *sy_router_data(const sy_router *r) {
    return r->data;
}

int sy_router_add_source(sy_router *r, const char *name, sy_error *err) {
    if (!r)
        return sy__error_set(err, SY_EINVAL, "", "router is NULL");
    if (!name || !*name)
        return sy__error_set(err, SY_EINVAL, "", "source name is empty");
    if (strlen(name) > SY_MAX_SOURCE_NAME)
        return sy__error_set(err, SY_ELIMIT, "",
                             "a source name has at most %d bytes",
                             SY_MAX_SOURCE_NAME);
    int rc = writer_enter(r, err);
    if (rc)
        return rc;
    if (sy__router_find_source(r, name)) {
        rc = sy__error_set(err, SY_EEXIST, "", "source '%s' already exists",
                           name);
    } else if (r->live_sources >= SY_MAX_SOURCES) {
        rc = sy__error_set(err, SY_ELIMIT, "",
                           "at most %d sources (sy_router_remove_source "
                           "frees a place)",
                           SY_MAX_SOURCES);
    } else {
        /* sources never move: notify uses a source outside the lock */
        if (!r->sources)
            r->sources =
                sy__calloc(&r->alloc, SY_MAX_SOURCES, sizeof *r->sources);
        char *nm = r->sources ? sy__strdup(&r->alloc, name) : NULL;
        if (!nm) {
            rc = sy__error_set(err, SY_ENOMEM, "", "out of memory");
        } else {
            size_t i = 0; /* the lowest free place, else a new one */
            while (i < r->source_count && r->sources[i].name)
                i++;
            r->sources[i].name = nm;
            r->source_names[i] = nm;
            if (i == r->source_count)
                r->source_count++;
            r->live_sources++;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

/* Live routes of source place si in the live snapshot. */
static size_t source_routes(sy_router *r, uint32_t si) {
    const sy_snapshot *cur = sy__router_current(r);
    size_t n = 0;
    for (uint32_t i = 0; i < cur->slot_count; i++) {
        const sy__slot *sl = sy__snapshot_slot(cur, i);
        n += sl->route && sl->source == si;
    }
    return n;
}

int sy_router_remove_source(sy_router *r, const char *name, sy_error *err) {
    if (!r)
        return sy__error_set(err, SY_EINVAL, "", "router is NULL");
    if (!name || !*name)
        return sy__error_set(err, SY_EINVAL, "", "source name is empty");
    int rc = writer_enter(r, err);
    if (rc)
        return rc;
    sy__source *s = sy__router_find_source(r, name);
    uint32_t si = s ? (uint32_t)(s - r->sources) : 0;
    size_t live = s ? source_routes(r, si) : 0;
    if (!s) {
        rc = sy__error_set(err, SY_ENOTFOUND, "", "unknown source '%s'", name);
    } else if (live) {
        rc = sy__error_set(err, SY_EBUSY, "",
                           "source '%s' has %zu live routes (apply an empty "
                           "document or remove them first)",
                           name, live);
    } else if (atomic_load_explicit(&s->users, memory_order_acquire)) {
        rc = sy__error_set(err, SY_EBUSY, "",
                           "source '%s' is in use by a notify (its loader "
                           "runs); remove it after that returns",
                           name);
    } else {
        /* nothing names place si any more: no live route (older
         * snapshots have their own copy of its name), no notify (users
         * is taken under the lock), no running commit (the lock) */
        free_history(r, s);
        sy__free(&r->alloc, s->name);
        sy__free(&r->alloc, s->version);
        memset(s, 0, sizeof *s);
        r->source_names[si] = ""; /* (snapshots copy it; no route names it) */
        r->live_sources--;
        while (r->source_count && !r->sources[r->source_count - 1].name)
            r->source_count--;
        /* (the status memo of this generation says 0 routes for place
         * si: right for a source added there next, too) */
        sy__router_log(r, SY_LOG_INFO, "source %s removed", name);
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

static int commit_one(sy_router *r, const sy__change *ch, sy_report **report,
                      sy_error *err) {
    if (report)
        *report = NULL;
    int rc = writer_enter(r, err);
    if (rc)
        return rc;
    rc = sy__commit_run(r, ch, 1, true, false, report, err);
    pthread_mutex_unlock(&r->lock);
    return rc;
}

/* Commit (or with `dry`, check) a change set. */
static int commit_set(sy_router *r, sy_change_set *cs, bool dry,
                      sy_report **report, sy_error *err) {
    if (report)
        *report = NULL;
    if (!r || !cs)
        return sy__error_set(err, SY_EINVAL, "",
                             "router or change set is NULL");
    if (cs->router != r)
        return sy__error_set(err, SY_EINVAL, "",
                             "the change set belongs to another router");
    int rc = writer_enter(r, err);
    if (rc)
        return rc;
    /* claimed under the writer lock, which every commit of cs takes (its
     * router's): of any number of threads committing it, one publishes */
    if (cs->committed)
        rc = sy__error_set(err, SY_EINVAL, "",
                           "the change set was committed already");
    else
        rc = sy__commit_run(r, cs->items, cs->count, false, dry, report, err);
    if (rc == SY_OK && !dry)
        cs->committed = true;
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int sy_router_commit(sy_router *r, sy_change_set *cs, sy_report **report,
                     sy_error *err) {
    return commit_set(r, cs, false, report, err);
}

int sy_router_check(sy_router *r, const sy_change_set *cs, sy_report **report,
                    sy_error *err) {
    return commit_set(r, (sy_change_set *)(uintptr_t)cs, true, report, err);
}

/* ---- the single calls: one-change commits ---- */

/* A source name or route id the call needs: NULL or "" is SY_EINVAL, as
 * staging it in a change set is (change_set.c). */
static int no_name(const char *name, const char *what, sy_error *err) {
    if (name && *name)
        return SY_OK;
    return sy__error_set(err, SY_EINVAL, "", "%s is NULL or empty", what);
}

int sy_router_apply(sy_router *r, const char *source, const char *json,
                    size_t len, sy_report **report, sy_error *err) {
    if (report)
        *report = NULL;
    if (!r || !json)
        return sy__error_set(err, SY_EINVAL, "", "router or document is NULL");
    int rc = no_name(source, "source name", err);
    if (rc)
        return rc;
    sy__change ch = {
        .kind = SY_CHANGE_APPLY, .name = source, .bytes = json, .len = len};
    return commit_one(r, &ch, report, err);
}

int sy_router_rollback(sy_router *r, const char *source, const char *version,
                       sy_report **report, sy_error *err) {
    if (report)
        *report = NULL;
    if (!r)
        return sy__error_set(err, SY_EINVAL, "", "router is NULL");
    int rc = no_name(source, "source name", err);
    if (rc)
        return rc;
    sy__change ch = {
        .kind = SY_CHANGE_ROLLBACK, .name = source, .text = version};
    return commit_one(r, &ch, report, err);
}

int sy_router_upsert_route(sy_router *r, const char *source,
                           const char *route_json, size_t len, sy_error *err) {
    if (!r || !route_json)
        return sy__error_set(err, SY_EINVAL, "", "router or route is NULL");
    int rc = no_name(source, "source name", err);
    if (rc)
        return rc;
    sy__change ch = {.kind = SY_CHANGE_UPSERT,
                     .name = source,
                     .bytes = route_json,
                     .len = len};
    return commit_one(r, &ch, NULL, err);
}

int sy_router_remove_route(sy_router *r, const char *id, sy_error *err) {
    if (!r)
        return sy__error_set(err, SY_EINVAL, "", "router is NULL");
    int rc = no_name(id, "route id", err);
    if (rc)
        return rc;
    sy__change ch = {.kind = SY_CHANGE_REMOVE, .name = id};
    return commit_one(r, &ch, NULL, err);
}

int sy_router_set_route_enabled(sy_router *r, const char *id, bool enabled,
                                sy_error *err) {
    if (!r)
        return sy__error_set(err, SY_EINVAL, "", "router is NULL");
    int rc = no_name(id, "route id", err);
    if (rc)
        return rc;
    sy__change ch = {.kind = SY_CHANGE_ENABLE, .name = id, .enabled = enabled};
    return commit_one(r, &ch, NULL, err);
}

int sy_router_set_instances(sy_router *r, const char *service,
                            const sy_instance *instances, size_t count,
                            sy_report **report, sy_error *err) {
    if (report)
        *report = NULL;
    if (!r || !service || !*service)
        return sy__error_set(err, SY_EINVAL, "", "router or service is NULL");
    if (count && !instances)
        return sy__error_set(err, SY_EINVAL, "", "instances is NULL");
    int rc = sy__check_instance_counts(instances, NULL, count, err);
    if (rc)
        return rc;
    sy__change ch = {.kind = SY_CHANGE_SET_INSTANCES,
                     .name = service,
                     .instances = instances,
                     .count = count};
    return commit_one(r, &ch, report, err);
}

int sy_router_update_instances(sy_router *r, const char *service,
                               const sy_instance_delta *deltas, size_t count,
                               sy_report **report, sy_error *err) {
    if (report)
        *report = NULL;
    if (!r || !service || !*service)
        return sy__error_set(err, SY_EINVAL, "", "router or service is NULL");
    if (!deltas && count)
        return sy__error_set(err, SY_EINVAL, "", "deltas is NULL");
    int rc = sy__check_instance_counts(NULL, deltas, count, err);
    if (rc)
        return rc;
    static const sy_instance_delta none[1];
    sy__change ch = {.kind = SY_CHANGE_UPDATE_INSTANCES,
                     .name = service,
                     .deltas = deltas ? deltas : none,
                     .count = count};
    return commit_one(r, &ch, report, err);
}

/* ---- pull sources ---- */

int sy_router_set_loader(sy_router *r, const char *name, sy_load_fn load,
                         void *data, sy_error *err) {
    if (!r || !load)
        return sy__error_set(err, SY_EINVAL, "", "router or loader is NULL");
    int rc = no_name(name, "source name", err);
    if (rc || (rc = writer_enter(r, err)))
        return rc;
    sy__source *src = sy__router_find_source(r, name);
    if (!src)
        rc = sy__error_set(err, SY_ENOTFOUND, "", "unknown source '%s'", name);
    else {
        src->load = load;
        src->load_data = data;
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

static int load_and_apply(sy_router *r, sy__source *src, sy_error *err) {
    pthread_mutex_lock(&r->lock);
    sy_load_fn load = src->load;
    void *load_data = src->load_data;
    pthread_mutex_unlock(&r->lock);
    sy_loaded ld = {0};
    int rc = load(load_data, src->name, &ld, err);
    if (rc) {
        if (err && err->code == SY_OK)
            sy__error_set(err, SY_ECALLBACK, "", "loader for '%s' failed",
                          src->name);
        pthread_mutex_lock(&r->lock);
        sy__router_log(r, SY_LOG_ERROR, "source %s: loader failed", src->name);
        pthread_mutex_unlock(&r->lock);
        return rc < 0 ? rc : SY_ECALLBACK;
    }
    rc = sy_router_apply(r, src->name, ld.bytes, ld.len, NULL, err);
    if (ld.release)
        ld.release(ld.data, ld.bytes);
    return rc;
}

/* The notify of a source that has a loader (src->users held). */
static int notify_run(sy_router *r, sy__source *src, sy_error *err) {
    int rc = SY_OK;
    /* Mark dirty; whoever holds `running` keeps applying until clean. A
     * notification arriving during an apply costs one more apply, not one
     * per notification. */
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

int sy_router_notify(sy_router *r, const char *name, sy_error *err) {
    if (!r)
        return sy__error_set(err, SY_EINVAL, "", "router is NULL");
    int rc = no_name(name, "source name", err);
    if (rc || (rc = writer_enter(r, err)))
        return rc;
    sy__source *src = sy__router_find_source(r, name);
    bool has_loader = src && src->load;
    if (has_loader) /* holds the place until this call returns */
        atomic_fetch_add_explicit(&src->users, 1, memory_order_acq_rel);
    pthread_mutex_unlock(&r->lock);
    if (!src)
        return sy__error_set(err, SY_ENOTFOUND, "", "unknown source '%s'",
                             name);
    if (!has_loader)
        return sy__error_set(err, SY_EINVAL, "", "source '%s' has no loader",
                             name);
    rc = notify_run(r, src, err);
    atomic_fetch_sub_explicit(&src->users, 1, memory_order_acq_rel);
    return rc;
}

/* ---- readers ---- */

sy_snapshot *sy_router_acquire(sy_router *r) {
    return (sy_snapshot *)sy__pub_acquire(r->pub);
}

void sy_snapshot_release(sy_snapshot *s) {
    if (s)
        sy__pub_release((sy__pub_ref)s);
}

size_t sy_router_reclaim(sy_router *r) {
    if (sy__router_in_callback(r))
        return 0;
    pthread_mutex_lock(&r->lock);
    size_t n = sy__pub_reclaim(r->pub);
    sy__router_bury(r);
    if (r->opts.retired_warn_ms)
        sy__pub_check_held(r->pub, r->opts.retired_warn_ms, sy__router_held_cb,
                           r);
    pthread_mutex_unlock(&r->lock);
    return n;
}
