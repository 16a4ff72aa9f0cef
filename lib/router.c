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
 *   commit(steps)
 *     for each step: parse+validate -> skip if already live -> diff vs the
 *       working snapshot -> derive the next working snapshot -> part report
 *     attach new routes (host data, keys) -> publish the last one
 *     -> sources take their new state -> on_event per part
 *
 * Writers are serialized by one mutex; readers never touch it. A writer
 * call from inside a callback gets SY_EREENTRANT instead of a deadlock.
 */
#include "change_set.h"
#include "def.h"
#include "diff.h"
#include "report.h"
#include "router_int.h"
#include "service.h"
#include "snapshot.h"

#include <stdio.h>

#define NONE UINT32_MAX

/* ---- callbacks and re-entrancy ---- */

static uintptr_t self_token(void) {
    return (uintptr_t)pthread_self();
}

bool sy_router_in_callback(sy_router *r) {
    return atomic_load_explicit(&r->callback_thread, memory_order_acquire) ==
           self_token();
}

static void cb_enter(sy_router *r) {
    atomic_store_explicit(&r->callback_thread, self_token(),
                          memory_order_release);
}

static void cb_leave(sy_router *r) {
    atomic_store_explicit(&r->callback_thread, 0, memory_order_release);
}

bool sy_router_lock_for_read(sy_router *r) {
    if (sy_router_in_callback(r))
        return false;
    pthread_mutex_lock(&r->lock);
    return true;
}

/* Every writer entry point: a call from a callback would deadlock. */
static int writer_enter(sy_router *r, sy_error *err) {
    if (sy_router_in_callback(r))
        return sy_error_set(err, SY_EREENTRANT, "",
                            "a writer call was made from inside a router "
                            "callback; make it after the callback returns");
    pthread_mutex_lock(&r->lock);
    return SY_OK;
}

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
    cb_enter(r);
    r->opts.on_log(r->opts.callback_data, lvl, buf);
    cb_leave(r);
}

static void held_cb(void *data, uint64_t gen, uint64_t age) {
    sy_router *r = data;
    if (!r->opts.on_retired_held)
        return;
    cb_enter(r);
    r->opts.on_retired_held(r->opts.callback_data, gen, age);
    cb_leave(r);
}

static void deliver_event(sy_router *r, const sy_report *rep) {
    if (!r->opts.on_event)
        return;
    cb_enter(r);
    r->opts.on_event(r->opts.callback_data, rep);
    cb_leave(r);
}

/* ---- helpers ---- */

const sy_alloc *sy_router_allocator(sy_router *r) {
    return &r->alloc;
}

int64_t sy_router_now_ms(sy_router *r) {
    return r->opts.clock_ms ? r->opts.clock_ms(r->opts.callback_data)
                            : sy_now_realtime_ms();
}

static sy_source *find_source(sy_router *r, const char *name) {
    for (size_t i = 0; name && i < r->source_count; i++)
        if (strcmp(r->sources[i].name, name) == 0)
            return &r->sources[i];
    return NULL;
}

const sy_snapshot *sy_router_current(sy_router *r) {
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

static sy_snapshot_config base_config(sy_router *r) {
    sy_snapshot_config cfg = {0};
    cfg.strip_host_port = r->opts.strip_host_port;
    cfg.clock_ms = r->opts.clock_ms;
    cfg.clock_data = r->opts.callback_data;
    cfg.random = r->opts.random;
    cfg.defaults = r->defaults;
    cfg.key_limit = r->key_limit;
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
    sy_grave *g = sy_realloc(&r->alloc, r->graves, cap * sizeof *g);
    if (!g)
        return false;
    r->graves = g;
    r->grave_cap = cap;
    return true;
}

/* ---- route keys and host data ---- */

/* The last reference of a live route is gone: tell the host, free its key.
 * Runs on the writer's side (bury, a commit's cleanup, sy_router_free). */
static void route_released(void *data, struct sy_route *rt) {
    sy_router *r = data;
    if (r->opts.route_detach) {
        cb_enter(r);
        r->opts.route_detach(r->opts.callback_data, rt, rt->host_data);
        cb_leave(r);
    }
    if (rt->key == UINT32_MAX)
        return;
    if (r->free_key_count == r->free_key_cap) {
        size_t cap = r->free_key_cap ? r->free_key_cap * 2 : 64;
        uint32_t *v = sy_realloc(&r->alloc, r->free_keys, cap * sizeof *v);
        if (!v)
            return; /* the key is not reused: key_limit grows, no harm */
        r->free_keys = v;
        r->free_key_cap = cap;
    }
    r->free_keys[r->free_key_count++] = rt->key;
}

/* A route about to become live for the first time: key and host data. */
static void route_attach(sy_router *r, struct sy_route *rt) {
    rt->key =
        r->free_key_count ? r->free_keys[--r->free_key_count] : r->key_limit++;
    rt->owner = &r->owner;
    if (r->opts.route_attach) {
        cb_enter(r);
        rt->host_data = r->opts.route_attach(r->opts.callback_data, rt);
        cb_leave(r);
    }
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
    if ((unsigned)o.path_normalization > SY_PATH_AS_IS ||
        (unsigned)o.escaped_slashes > SY_SLASHES_DECODE)
        return sy_error_set(err, SY_EINVAL, "",
                            "unknown path_normalization or escaped_slashes");
    if (o.outlier.max_ejected_percent > 100)
        return sy_error_set(err, SY_EINVAL, "",
                            "outlier.max_ejected_percent is above 100");
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
    r->owner = (sy_route_owner){route_released, r};
    atomic_init(&r->callback_thread, 0);
    atomic_init(&r->ejections, 0);
    atomic_init(&r->outcomes, 0);
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

static void free_history(sy_router *r, sy_source *s) {
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
    const sy_snapshot *cur = sy_router_current(r);
    for (uint32_t i = 0; i < cur->slot_count; i++)
        if (cur->slots[i].route)
            sy_route_unref(cur->slots[i].route);
    for (size_t i = 0; i < r->grave_count; i++)
        sy_route_unref(r->graves[i].route);
    sy_free(&r->alloc, r->graves);
    sy_pub_free(r->pub);
    for (size_t i = 0; i < r->source_count; i++) {
        sy_source *s = &r->sources[i];
        free_history(r, s);
        sy_free(&r->alloc, s->name);
        sy_free(&r->alloc, s->version);
    }
    sy_free(&r->alloc, r->sources);
    if (r->defaults)
        sy_route_unref(r->defaults);
    sy_free(&r->alloc, r->free_keys);
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
    if (strlen(name) > SY_MAX_SOURCE_NAME)
        return sy_error_set(err, SY_ELIMIT, "",
                            "a source name has at most %d bytes",
                            SY_MAX_SOURCE_NAME);
    int rc = writer_enter(r, err);
    if (rc)
        return rc;
    if (find_source(r, name)) {
        rc = sy_error_set(err, SY_EEXIST, "", "source '%s' already exists",
                          name);
    } else if (r->source_count >= SY_MAX_SOURCES) {
        rc = sy_error_set(err, SY_ELIMIT, "", "at most %d sources",
                          SY_MAX_SOURCES);
    } else {
        /* sources never move: notify uses a source outside the lock */
        if (!r->sources)
            r->sources =
                sy_calloc(&r->alloc, SY_MAX_SOURCES, sizeof *r->sources);
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

/* ---- commits: the working state ---- */

typedef struct ptr_vec {
    void **v;
    size_t n, cap;
} ptr_vec;

static int vec_push(const sy_alloc *a, ptr_vec *pv, void *p) {
    if (pv->n == pv->cap) {
        size_t cap = pv->cap ? pv->cap * 2 : 16;
        void **v = sy_realloc(a, pv->v, cap * sizeof *v);
        if (!v)
            return SY_ENOMEM;
        pv->v = v;
        pv->cap = cap;
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
    const char *history_bytes; /* a document to keep in the history */
    size_t history_len;
    const char *history_version;
    int outcome; /* 0 none, 1 applied, 2 skipped */
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
    ptr_vec bytes;           /* rollback copies, freed at the end */
    src_state *st;
    uint64_t derive_us;
} commit;

static int nomem(sy_error *err) {
    return sy_error_set(err, SY_ENOMEM, "", "out of memory");
}

/* Derive the next working snapshot from `ch` (and cfg's services). */
static int step_derive(commit *c, const sy_snapshot_config *cfg,
                       const sy_route_change *ch, size_t n, sy_error *err) {
    const sy_alloc *a = &c->r->alloc;
    uint64_t t0 = sy_now_monotonic_us();
    sy_snapshot *next;
    struct sy_route **removed;
    size_t nremoved;
    int rc = sy_snapshot_derive(a, c->work, cfg, ch, n, c->generation, &next,
                                &removed, &nremoved, err);
    if (rc)
        return rc;
    rc = vec_push(a, &c->inter, next);
    for (size_t i = 0; rc == SY_OK && i < n; i++)
        if (ch[i].route)
            rc = vec_push(a, &c->touched, ch[i].route);
    for (size_t i = 0; rc == SY_OK && i < nremoved; i++)
        rc = vec_push(a, &c->touched, removed[i]);
    sy_free(a, removed);
    if (rc) {
        if (c->inter.n && c->inter.v[c->inter.n - 1] == next)
            c->inter.n--;
        sy_snapshot_destroy(next);
        return nomem(err);
    }
    c->work = next;
    c->derive_us += sy_now_monotonic_us() - t0;
    return SY_OK;
}

/* The live routes of source `si` in `s`, in rank order. */
static const struct sy_route **source_routes(sy_router *r, const sy_snapshot *s,
                                             uint32_t si, size_t *count) {
    const struct sy_route **v =
        sy_malloc(&r->alloc, (s->route_count + 1) * sizeof *v);
    size_t n = 0;
    if (v)
        for (size_t i = 0; i < s->route_count; i++) {
            const sy_slot *sl = &s->slots[s->rank[i]];
            if (sl->source == si)
                v[n++] = sl->route;
        }
    *count = n;
    return v;
}

typedef struct reuse_ctx {
    const sy_snapshot *work;
    uint32_t source;
} reuse_ctx;

/* A live route of the same source with the same meaning: share it rather
 * than compile it again. */
static const struct sy_route *reuse_live(void *data, const char *id,
                                         uint64_t fingerprint) {
    const reuse_ctx *rc = data;
    uint32_t slot = sy_snapshot_find_slot(rc->work, id);
    if (slot == NONE || rc->work->slots[slot].source != rc->source ||
        rc->work->slots[slot].route->fingerprint != fingerprint)
        return NULL;
    return rc->work->slots[slot].route;
}

static bool same_text(const char *a, const char *b) {
    return a && b && strcmp(a, b) == 0;
}

/* ---- commits: the steps ---- */

/* The changes that make source `si` hold exactly the document's routes. */
static int document_changes(commit *c, uint32_t si, const sy_document *doc,
                            sy_report *rep, sy_route_change **out, size_t *nout,
                            sy_error *err) {
    sy_router *r = c->r;
    const sy_snapshot *w = c->work;
    size_t n = sy_document_route_count(doc);
    const struct sy_route **keep = sy_malloc(&r->alloc, (n + 1) * sizeof *keep);
    sy_route_change *ch =
        sy_malloc(&r->alloc, (n + w->route_count + 1) * sizeof *ch);
    size_t kept = 0, nch = 0, old_count = 0;
    const struct sy_route **old = source_routes(r, w, si, &old_count);
    int rc = SY_OK;
    if (!keep || !ch || !old)
        rc = nomem(err);
    for (size_t i = 0; rc == SY_OK && i < n; i++) {
        const struct sy_route *rt = sy_document_route(doc, i);
        uint32_t pos = doc->positions[i];
        if (pos > SY_RANK_POS_MAX) {
            rc = sy_error_set(err, SY_ELIMIT, "routes",
                              "a source holds at most %u routes",
                              SY_RANK_POS_MAX + 1);
            break;
        }
        uint32_t slot = sy_snapshot_find_slot(w, rt->id);
        if (slot != NONE && w->slots[slot].source != si) {
            /* an id owned by another source is an error of this document */
            sy_error e;
            char path[64];
            snprintf(path, sizeof path, "%s[%u].id",
                     doc->envelope ? "routes" : "", pos);
            sy_error_set(&e, SY_EDUPLICATE, path,
                         "route id '%s' is already defined by source '%s'",
                         rt->id, r->sources[w->slots[slot].source].name);
            if (!r->opts.lenient) {
                if (err)
                    *err = e;
                rc = SY_EDUPLICATE;
            } else if (sy_report_add_issue(rep, &e)) {
                rc = nomem(err);
            }
            continue;
        }
        keep[kept++] = rt;
        uint64_t key = sy_rank_key(rt->order, si, pos);
        if (slot != NONE && w->slots[slot].key == key &&
            w->slots[slot].route->fingerprint == rt->fingerprint)
            continue; /* unchanged, same rank: shared as it is */
        /* same meaning at a new rank: keep sharing the compiled route */
        struct sy_route *use =
            slot != NONE && w->slots[slot].route->fingerprint == rt->fingerprint
                ? w->slots[slot].route
                : (struct sy_route *)rt;
        ch[nch++] = (sy_route_change){rt->id, use, key, si};
    }
    if (rc == SY_OK &&
        sy_diff_routes(&r->alloc, old, old_count, keep, kept, &rep->diff))
        rc = nomem(err);
    for (size_t i = 0; rc == SY_OK && i < sy_diff_removed_count(rep->diff); i++)
        ch[nch++] =
            (sy_route_change){sy_diff_removed(rep->diff, i), NULL, 0, si};
    sy_free(&r->alloc, keep);
    sy_free(&r->alloc, old);
    if (rc) {
        sy_free(&r->alloc, ch);
        return rc;
    }
    *out = ch;
    *nout = nch;
    return SY_OK;
}

static int step_apply(commit *c, uint32_t si, const char *json, size_t len,
                      bool force, sy_report *rep, sy_error *err) {
    sy_router *r = c->r;
    src_state *st = &c->st[si];
    uint64_t t0 = sy_now_monotonic_us();
    sy_document *doc = NULL;
    reuse_ctx rctx = {c->work, si};
    int rc = sy_document_parse_reusing(json, len, &r->popts, reuse_live, &rctx,
                                       &doc, err);
    if (rc)
        return rc;
    if (vec_push(&r->alloc, &c->docs, doc)) {
        sy_document_free(doc);
        return nomem(err);
    }
    const char *version = sy_document_version(doc);
    if (version && !(rep->version = sy_strdup(&r->alloc, version)))
        return nomem(err);
    /* a lenient apply must not drop routes silently: no room to report
     * an issue fails the apply */
    for (size_t i = 0; i < sy_document_issue_count(doc); i++)
        if (sy_report_add_issue(rep, sy_document_issue(doc, i)))
            return nomem(err);
    if (sy_document_route_count(doc) == 0 && sy_document_issue_count(doc))
        return sy_error_set(err, SY_EINVALIDDOC, "",
                            "no route of the document is valid (%zu invalid); "
                            "nothing changed",
                            sy_document_issue_count(doc));
    bool same_version = same_text(version, st->version);
    bool same_bytes = sy_document_checksum(doc) == st->checksum;
    if (!force && st->applied && !st->modified &&
        (same_bytes || (same_version && r->opts.skip_same_version))) {
        rep->skipped = true;
        rep->parse_us = sy_now_monotonic_us() - t0;
        st->outcome = st->outcome ? st->outcome : 2;
        return SY_OK;
    }
    rep->version_not_bumped = st->applied && same_version && !same_bytes;
    sy_route_change *ch;
    size_t nch;
    rc = document_changes(c, si, doc, rep, &ch, &nch, err);
    if (rc)
        return rc;
    rep->parse_us = sy_now_monotonic_us() - t0;
    sy_snapshot_config cfg = base_config(r);
    rc = step_derive(c, &cfg, ch, nch, err);
    sy_free(&r->alloc, ch);
    if (rc)
        return rc;
    st->version = version;
    st->checksum = sy_document_checksum(doc);
    st->applied = st->touched = true;
    st->modified = false;
    st->outcome = 1;
    /* positions restart after the document: upserted routes that the
     * document does not hold are gone with this apply */
    st->next_pos = 0;
    for (size_t i = 0; i < sy_document_route_count(doc); i++)
        if (doc->positions[i] >= st->next_pos)
            st->next_pos = doc->positions[i] + 1;
    st->history_bytes = json;
    st->history_len = len;
    st->history_version = version;
    if (rep->version_not_bumped)
        log_msg(r, SY_LOG_WARN,
                "source %s: version %s applied again with different content: "
                "the publisher did not bump the version",
                r->sources[si].name, version);
    return SY_OK;
}

static int step_rollback(commit *c, uint32_t si, const char *version,
                         sy_report *rep, sy_error *err) {
    sy_router *r = c->r;
    const sy_source *src = &r->sources[si];
    /* version NULL: the document before the current one */
    const sy_history_entry *e = NULL;
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
        return sy_error_set(err, SY_ENOTFOUND, "",
                            "source '%s' has no kept version '%s'", src->name,
                            version ? version : "(previous)");
    /* a copy: the history may drop this entry when the commit ends */
    char *bytes = sy_strndup(&r->alloc, e->bytes, e->len);
    if (!bytes || vec_push(&r->alloc, &c->bytes, bytes)) {
        sy_free(&r->alloc, bytes);
        return nomem(err);
    }
    return step_apply(c, si, bytes, e->len, true, rep, err);
}

/* A one-route change's part report: the diff of old and new. */
static int one_route_diff(commit *c, const struct sy_route *old,
                          const struct sy_route *now, sy_report *rep,
                          sy_error *err) {
    const struct sy_route *o[1] = {old}, *n[1] = {now};
    if (sy_diff_routes(&c->r->alloc, o, old ? 1 : 0, n, now ? 1 : 0,
                       &rep->diff))
        return nomem(err);
    return SY_OK;
}

static int step_upsert(commit *c, uint32_t si, const char *json, size_t len,
                       sy_report *rep, sy_error *err) {
    sy_router *r = c->r;
    src_state *st = &c->st[si];
    struct sy_route *rt;
    int rc = sy_def_parse_route(json, len, &r->popts, "route", &rt, err);
    if (rc)
        return rc;
    if (vec_push(&r->alloc, &c->owned, rt)) {
        sy_route_unref(rt);
        return nomem(err);
    }
    const sy_snapshot *w = c->work;
    uint32_t slot = sy_snapshot_find_slot(w, rt->id);
    uint32_t pos;
    if (slot != NONE) {
        if (w->slots[slot].source != si)
            return sy_error_set(err, SY_EDUPLICATE, "route.id",
                                "route id '%s' is already defined by source "
                                "'%s'",
                                rt->id, r->sources[w->slots[slot].source].name);
        pos = (uint32_t)(w->slots[slot].key & 0xffffffu);
    } else {
        if (st->next_pos > SY_RANK_POS_MAX)
            return sy_error_set(err, SY_ELIMIT, "route",
                                "source '%s' has used all %u route positions; "
                                "apply its whole document again to renumber",
                                r->sources[si].name, SY_RANK_POS_MAX + 1);
        pos = st->next_pos++;
    }
    rt->doc_index = pos;
    rc = one_route_diff(c, slot != NONE ? w->slots[slot].route : NULL, rt, rep,
                        err);
    if (rc)
        return rc;
    sy_route_change ch = {rt->id, rt, sy_rank_key(rt->order, si, pos), si};
    sy_snapshot_config cfg = base_config(r);
    rc = step_derive(c, &cfg, &ch, 1, err);
    if (rc == SY_OK)
        st->modified = st->touched = true;
    return rc;
}

/* The slot of route `id` in the working snapshot, or an error. */
static int find_live(commit *c, const char *id, uint32_t *slot, sy_error *err) {
    *slot = sy_snapshot_find_slot(c->work, id);
    if (*slot == NONE)
        return sy_error_set(err, SY_ENOTFOUND, "", "no route '%s'", id);
    return SY_OK;
}

static int step_remove(commit *c, const char *id, sy_report **rep,
                       sy_error *err) {
    uint32_t slot;
    int rc = find_live(c, id, &slot, err);
    if (rc)
        return rc;
    const sy_slot *sl = &c->work->slots[slot];
    uint32_t si = sl->source;
    if (!(*rep = sy_report_new(&c->r->alloc, c->r->sources[si].name)))
        return nomem(err);
    rc = one_route_diff(c, sl->route, NULL, *rep, err);
    if (rc)
        return rc;
    sy_route_change ch = {id, NULL, 0, si};
    sy_snapshot_config cfg = base_config(c->r);
    rc = step_derive(c, &cfg, &ch, 1, err);
    if (rc == SY_OK)
        c->st[si].modified = c->st[si].touched = true;
    return rc;
}

static int step_enable(commit *c, const char *id, bool enabled, sy_report **rep,
                       sy_error *err) {
    uint32_t slot;
    int rc = find_live(c, id, &slot, err);
    if (rc)
        return rc;
    const sy_slot *sl = &c->work->slots[slot];
    uint32_t si = sl->source;
    if (!(*rep = sy_report_new(&c->r->alloc, c->r->sources[si].name)))
        return nomem(err);
    if (sl->route->disabled == !enabled) {
        (*rep)->skipped = (*rep)->noop = true; /* already so: no event */
        return SY_OK;
    }
    struct sy_route *nr;
    rc = sy_def_route_with_enabled(sl->route, enabled, &c->r->popts, &nr, err);
    if (rc)
        return rc;
    if (vec_push(&c->r->alloc, &c->owned, nr)) {
        sy_route_unref(nr);
        return nomem(err);
    }
    nr->doc_index = sl->route->doc_index;
    rc = one_route_diff(c, sl->route, nr, *rep, err);
    if (rc)
        return rc;
    sy_route_change ch = {id, nr, sl->key, si};
    sy_snapshot_config cfg = base_config(c->r);
    rc = step_derive(c, &cfg, &ch, 1, err);
    if (rc == SY_OK)
        c->st[si].modified = c->st[si].touched = true;
    return rc;
}

/* Replace one service in the working snapshot's sorted service list. */
static int derive_with_service(commit *c, struct sy_service *svc,
                               sy_error *err) {
    const sy_snapshot *w = c->work;
    const char *name = sy_service_name(svc);
    size_t n = w->service_count;
    struct sy_service **list = sy_malloc(&c->r->alloc, (n + 1) * sizeof *list);
    if (!list)
        return nomem(err);
    size_t k = 0;
    bool placed = false;
    for (size_t i = 0; i < n; i++) {
        int cmp = strcmp(sy_service_name(w->services[i]), name);
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
    sy_snapshot_config cfg = base_config(c->r);
    cfg.services = list;
    cfg.service_count = k;
    cfg.replace_services = true;
    int rc = step_derive(c, &cfg, NULL, 0, err);
    sy_free(&c->r->alloc, list);
    return rc;
}

static int step_instances(commit *c, const sy_change *ch, sy_report *rep,
                          sy_error *err) {
    sy_router *r = c->r;
    const char *name = ch->name;
    const struct sy_service *old =
        sy_snapshot_service(c->work, name, strlen(name));
    struct sy_service *svc = NULL, *empty = NULL;
    int rc;
    if (ch->kind == SY_CHANGE_UPDATE_INSTANCES) {
        rc =
            old ? SY_OK : sy_service_new(&r->alloc, name, NULL, 0, &empty, err);
        if (rc == SY_OK)
            rc = sy_service_apply_deltas(old ? old : empty, ch->deltas,
                                         ch->count, &svc, err);
        sy_service_unref(empty);
    } else {
        rc = sy_service_new(&r->alloc, name, ch->instances, ch->count, &svc,
                            err);
    }
    if (rc)
        return rc;
    if (!(rep->service = sy_strdup(&r->alloc, name)))
        rc = nomem(err);
    if (rc == SY_OK)
        rc = sy_service_diff_compute(&r->alloc, old, svc, &rep->instances, err);
    if (rc == SY_OK && old) {
        sy_service_inherit_rr(svc, old);
        sy_service_inherit_health(svc, old);
    }
    if (rc == SY_OK)
        rc = derive_with_service(c, svc, err);
    sy_service_unref(svc); /* the snapshots hold their own references */
    return rc;
}

/* One staged change: its part report in *rep (also on failure, if any). */
static int run_step(commit *c, const sy_change *ch, sy_report **rep,
                    sy_error *err) {
    sy_router *r = c->r;
    *rep = NULL;
    bool by_source = ch->kind == SY_CHANGE_APPLY ||
                     ch->kind == SY_CHANGE_ROLLBACK ||
                     ch->kind == SY_CHANGE_UPSERT;
    sy_source *src = by_source ? find_source(r, ch->name) : NULL;
    if (by_source && !src)
        return sy_error_set(err, SY_ENOTFOUND, "", "unknown source '%s'",
                            ch->name);
    uint32_t si = src ? (uint32_t)(src - r->sources) : 0;
    if (ch->kind == SY_CHANGE_REMOVE)
        return step_remove(c, ch->name, rep, err);
    if (ch->kind == SY_CHANGE_ENABLE)
        return step_enable(c, ch->name, ch->enabled, rep, err);
    if (!(*rep = sy_report_new(&r->alloc, src ? src->name : NULL)))
        return nomem(err);
    switch (ch->kind) {
    case SY_CHANGE_APPLY:
        return step_apply(c, si, ch->bytes, ch->len, false, *rep, err);
    case SY_CHANGE_ROLLBACK: return step_rollback(c, si, ch->text, *rep, err);
    case SY_CHANGE_UPSERT:
        return step_upsert(c, si, ch->bytes, ch->len, *rep, err);
    default: return step_instances(c, ch, *rep, err);
    }
}

/* ---- commits: publishing ---- */

static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (void *const *)a;
    uintptr_t y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

static bool holds(const sy_snapshot *s, const struct sy_route *rt) {
    uint32_t slot = sy_snapshot_find_slot(s, rt->id);
    return slot != NONE && s->slots[slot].route == rt;
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
    if (t->n)
        qsort(t->v, t->n, sizeof *t->v, cmp_ptr);
    size_t u = 0, graves = 0;
    for (size_t i = 0; i < t->n; i++)
        if (u == 0 || t->v[u - 1] != t->v[i])
            t->v[u++] = t->v[i];
    t->n = u;
    /* 2 bits per route: held by the published / the old snapshot */
    uint8_t *held = sy_malloc(&r->alloc, t->n + 1);
    if (!held)
        return nomem(err);
    for (size_t i = 0; i < t->n; i++) {
        struct sy_route *rt = t->v[i];
        held[i] = (uint8_t)(holds(f, rt) | holds(c->cur, rt) << 1);
        graves += held[i] == 2;
        if (held[i] == 1 && rt->key == UINT32_MAX)
            route_attach(r, rt); /* before readers can see it */
    }
    f->key_limit = r->key_limit;
    int rc =
        graves_reserve(r, graves) ? sy_pub_publish(r->pub, &f->pub) : SY_ENOMEM;
    if (rc) {
        sy_free(&r->alloc, held);
        return sy_error_set(err, rc, "",
                            rc == SY_EBUSY
                                ? "too many retired snapshots are still held "
                                  "by readers (max_retired reached)"
                                : "%s",
                            sy_strerror(rc));
    }
    c->inter.n--; /* published: the publisher owns it now */
    for (size_t i = 0; i < t->n; i++) {
        if (held[i] == 1)
            sy_route_ref(t->v[i]);
        else if (held[i] == 2)
            r->graves[r->grave_count++] =
                (sy_grave){t->v[i], f->pub.generation};
    }
    sy_free(&r->alloc, held);
    return SY_OK;
}

static void commit_cleanup(commit *c) {
    const sy_alloc *a = &c->r->alloc;
    for (size_t i = 0; i < c->inter.n; i++)
        sy_snapshot_destroy(c->inter.v[i]);
    for (size_t i = 0; i < c->docs.n; i++)
        sy_document_free(c->docs.v[i]);
    for (size_t i = 0; i < c->owned.n; i++)
        sy_route_unref(c->owned.v[i]);
    for (size_t i = 0; i < c->bytes.n; i++)
        sy_free(a, c->bytes.v[i]);
    sy_free(a, c->inter.v);
    sy_free(a, c->docs.v);
    sy_free(a, c->owned.v);
    sy_free(a, c->bytes.v);
    sy_free(a, c->touched.v);
    sy_free(a, c->st);
}

static int push_history(sy_router *r, sy_source *s, const char *version,
                        const char *bytes, size_t len) {
    sy_history_entry e = {NULL, sy_strndup(&r->alloc, bytes, len), len};
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
        sy_history_entry *h = sy_realloc(&r->alloc, s->history,
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

/* After the publish: the sources take the state the steps gave them. */
static void sources_follow(commit *c, int64_t now) {
    sy_router *r = c->r;
    for (size_t i = 0; i < r->source_count; i++) {
        sy_source *s = &r->sources[i];
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
            char *v = st->version ? sy_strdup(&r->alloc, st->version) : NULL;
            sy_free(&r->alloc, s->version);
            s->version = v;
        }
        s->checksum = st->checksum;
        s->applied = st->applied;
        s->modified = st->modified;
        s->next_pos = st->next_pos;
        if (st->history_bytes &&
            push_history(r, s, st->history_version, st->history_bytes,
                         st->history_len))
            log_msg(r, SY_LOG_WARN,
                    "source %s: history not kept (out of memory)", s->name);
    }
}

/* The source a failed change was about, if any: its status says so. */
static void note_failure(commit *c, const sy_change *ch, int64_t now,
                         const sy_error *e) {
    sy_router *r = c->r;
    if (ch->kind != SY_CHANGE_APPLY && ch->kind != SY_CHANGE_ROLLBACK &&
        ch->kind != SY_CHANGE_UPSERT)
        return;
    sy_source *s = find_source(r, ch->name);
    if (!s)
        return;
    s->last_apply_ms = now;
    s->last_result = e->code;
    s->last_error = *e;
    s->failed_count++;
}

static void log_part(sy_router *r, const sy_report *p) {
    if (p->diff && p->source && !p->skipped)
        log_msg(r, SY_LOG_INFO,
                "source %s: version %s: %zu added, %zu updated, %zu "
                "removed, %zu unchanged (generation %llu)",
                p->source, p->version ? p->version : "-",
                sy_diff_added_count(p->diff), sy_diff_updated_count(p->diff),
                sy_diff_removed_count(p->diff),
                sy_diff_unchanged_count(p->diff),
                (unsigned long long)p->generation);
}

/*
 * Run `n` changes as one commit, under the lock. `single`: a one-change
 * call, whose report is the part itself and whose messages carry no
 * "change N: " prefix.
 */
static int commit_locked(sy_router *r, const sy_change *items, size_t n,
                         bool single, sy_report **report, sy_error *err) {
    commit c;
    memset(&c, 0, sizeof c);
    c.r = r;
    c.cur = c.work = sy_router_current(r);
    c.generation = c.cur->pub.generation + 1;
    sy_report *all = single ? NULL : sy_report_new(&r->alloc, NULL);
    sy_error local;
    if (!err)
        err = &local;
    memset(err, 0, sizeof *err);
    c.st = sy_calloc(&r->alloc, r->source_count + 1, sizeof *c.st);
    int rc = (!single && !all) || !c.st ? nomem(err) : SY_OK;
    for (size_t i = 0; i < r->source_count && c.st; i++) {
        const sy_source *s = &r->sources[i];
        c.st[i] = (src_state){
            s->version,  s->checksum, s->applied, s->modified, false,
            s->next_pos, NULL,        0,          NULL,        0};
    }
    sy_report *part = NULL;
    size_t failed = 0;
    for (size_t i = 0; rc == SY_OK && i < n; i++) {
        rc = run_step(&c, &items[i], &part, err);
        if (rc) {
            failed = i;
            break;
        }
        if (!single && sy_report_add_part(all, part)) {
            sy_report_free(part);
            rc = nomem(err);
            failed = i;
        }
        if (!single)
            part = NULL;
    }
    uint64_t t1 = sy_now_monotonic_us();
    if (rc == SY_OK && c.inter.n)
        rc = publish_work(&c, err);
    uint64_t publish_us = sy_now_monotonic_us() - t1 + c.derive_us;
    int64_t now = sy_now_realtime_ms(); /* wall time, for operators */
    if (rc) {
        if (n && failed < n)
            note_failure(&c, &items[failed], now, err);
        if (!single && n > 1) {
            char msg[sizeof err->message + 128];
            int k = snprintf(
                msg, sizeof msg, "change %zu (%s '%.40s'): ", failed,
                sy_change_kind_name(items[failed].kind), items[failed].name);
            size_t used = k > 0 ? (size_t)k : 0;
            size_t rest = sizeof err->message - 1 - used;
            memcpy(msg + used, err->message, rest);
            msg[used + rest] = '\0';
            memcpy(err->message, msg, sizeof err->message);
            err->message[sizeof err->message - 1] = '\0';
        }
        r->failed_commits++;
        sy_report *rep = single ? part : all;
        if (rep) {
            /* best effort: the error is also in *err */
            if (err->code && rep->issue_count == 0)
                (void)sy_report_add_issue(rep, err);
            rep->failed_change = (long)failed;
        }
        if (!single)
            sy_report_free(part);
        commit_cleanup(&c);
        if (report)
            *report = rep;
        else
            sy_report_free(rep);
        log_msg(r, SY_LOG_ERROR, "commit rejected, nothing changed: %s%s%s",
                err->path, *err->path ? ": " : "", err->message);
        return rc;
    }
    uint64_t gen = sy_router_current(r)->pub.generation;
    sources_follow(&c, now);
    r->commits++;
    commit_cleanup(&c);
    bury(r);
    if (r->opts.retired_warn_ms)
        sy_pub_check_held(r->pub, r->opts.retired_warn_ms, held_cb, r);
    sy_report *const *parts = single ? &part : all->parts;
    size_t nparts = single ? 1 : all->part_count;
    for (size_t i = 0; i < nparts; i++) {
        sy_report *p = parts[i];
        p->generation = gen;
        p->publish_us = p->skipped ? 0 : publish_us;
        if (p->skipped && p->source)
            r->skipped_applies++;
        if (p->service)
            r->instance_updates++;
        log_part(r, p);
        if (!p->noop)
            deliver_event(r, p);
    }
    if (all)
        all->generation = gen;
    sy_report *rep = single ? part : all;
    if (report)
        *report = rep;
    else
        sy_report_free(rep);
    return SY_OK;
}

static int commit_one(sy_router *r, const sy_change *ch, sy_report **report,
                      sy_error *err) {
    if (report)
        *report = NULL;
    int rc = writer_enter(r, err);
    if (rc)
        return rc;
    rc = commit_locked(r, ch, 1, true, report, err);
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int sy_router_commit(sy_router *r, const sy_change_set *cs, sy_report **report,
                     sy_error *err) {
    if (report)
        *report = NULL;
    if (!r || !cs)
        return sy_error_set(err, SY_EINVAL, "", "router or change set is NULL");
    if (cs->router != r)
        return sy_error_set(err, SY_EINVAL, "",
                            "the change set belongs to another router");
    int rc = writer_enter(r, err);
    if (rc)
        return rc;
    rc = commit_locked(r, cs->items, cs->count, false, report, err);
    pthread_mutex_unlock(&r->lock);
    return rc;
}

/* ---- the single calls: one-change commits ---- */

int sy_router_apply(sy_router *r, const char *source, const char *json,
                    size_t len, sy_report **report, sy_error *err) {
    if (report)
        *report = NULL;
    if (!r || !json)
        return sy_error_set(err, SY_EINVAL, "", "router or document is NULL");
    sy_change ch = {.kind = SY_CHANGE_APPLY,
                    .name = source ? source : "",
                    .bytes = json,
                    .len = len};
    return commit_one(r, &ch, report, err);
}

int sy_router_rollback(sy_router *r, const char *source, const char *version,
                       sy_report **report, sy_error *err) {
    if (report)
        *report = NULL;
    if (!r)
        return sy_error_set(err, SY_EINVAL, "", "router is NULL");
    sy_change ch = {.kind = SY_CHANGE_ROLLBACK,
                    .name = source ? source : "",
                    .text = version};
    return commit_one(r, &ch, report, err);
}

int sy_router_upsert_route(sy_router *r, const char *source,
                           const char *route_json, size_t len, sy_error *err) {
    if (!r || !route_json)
        return sy_error_set(err, SY_EINVAL, "", "router or route is NULL");
    sy_change ch = {.kind = SY_CHANGE_UPSERT,
                    .name = source ? source : "",
                    .bytes = route_json,
                    .len = len};
    return commit_one(r, &ch, NULL, err);
}

int sy_router_remove_route(sy_router *r, const char *id, sy_error *err) {
    if (!r || !id)
        return sy_error_set(err, SY_EINVAL, "", "router or id is NULL");
    sy_change ch = {.kind = SY_CHANGE_REMOVE, .name = id};
    return commit_one(r, &ch, NULL, err);
}

int sy_router_set_route_enabled(sy_router *r, const char *id, bool enabled,
                                sy_error *err) {
    if (!r || !id)
        return sy_error_set(err, SY_EINVAL, "", "router or id is NULL");
    sy_change ch = {.kind = SY_CHANGE_ENABLE, .name = id, .enabled = enabled};
    return commit_one(r, &ch, NULL, err);
}

int sy_router_set_instances(sy_router *r, const char *service,
                            const sy_instance *instances, size_t count,
                            sy_report **report, sy_error *err) {
    if (report)
        *report = NULL;
    if (!r || !service || !*service)
        return sy_error_set(err, SY_EINVAL, "", "router or service is NULL");
    if (count && !instances)
        return sy_error_set(err, SY_EINVAL, "", "instances is NULL");
    sy_change ch = {.kind = SY_CHANGE_SET_INSTANCES,
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
        return sy_error_set(err, SY_EINVAL, "", "router or service is NULL");
    if (!deltas && count)
        return sy_error_set(err, SY_EINVAL, "", "deltas is NULL");
    static const sy_instance_delta none[1];
    sy_change ch = {.kind = SY_CHANGE_UPDATE_INSTANCES,
                    .name = service,
                    .deltas = deltas ? deltas : none,
                    .count = count};
    return commit_one(r, &ch, report, err);
}

/* ---- pull sources ---- */

int sy_router_set_loader(sy_router *r, const char *name, sy_load_fn load,
                         void *data, sy_error *err) {
    if (!r || !load)
        return sy_error_set(err, SY_EINVAL, "", "router or loader is NULL");
    int rc = writer_enter(r, err);
    if (rc)
        return rc;
    sy_source *src = find_source(r, name);
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

static int load_and_apply(sy_router *r, sy_source *src, sy_error *err) {
    pthread_mutex_lock(&r->lock);
    sy_load_fn load = src->load;
    void *load_data = src->load_data;
    pthread_mutex_unlock(&r->lock);
    sy_loaded ld = {0};
    int rc = load(load_data, src->name, &ld, err);
    if (rc) {
        if (err && err->code == SY_OK)
            sy_error_set(err, SY_ECALLBACK, "", "loader for '%s' failed",
                         src->name);
        pthread_mutex_lock(&r->lock);
        log_msg(r, SY_LOG_ERROR, "source %s: loader failed", src->name);
        pthread_mutex_unlock(&r->lock);
        return rc < 0 ? rc : SY_ECALLBACK;
    }
    rc = sy_router_apply(r, src->name, ld.bytes, ld.len, NULL, err);
    if (ld.release)
        ld.release(ld.data, ld.bytes);
    return rc;
}

int sy_router_notify(sy_router *r, const char *name, sy_error *err) {
    if (!r)
        return sy_error_set(err, SY_EINVAL, "", "router is NULL");
    int rc = writer_enter(r, err);
    if (rc)
        return rc;
    sy_source *src = find_source(r, name);
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
    rc = SY_OK;
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

/* ---- readers ---- */

sy_snapshot *sy_router_acquire(sy_router *r) {
    return (sy_snapshot *)sy_pub_acquire(r->pub);
}

void sy_snapshot_release(sy_snapshot *s) {
    if (s)
        sy_pub_release((sy_pub_ref)s);
}

size_t sy_router_reclaim(sy_router *r) {
    if (sy_router_in_callback(r))
        return 0;
    pthread_mutex_lock(&r->lock);
    size_t n = sy_pub_reclaim(r->pub);
    bury(r);
    if (r->opts.retired_warn_ms)
        sy_pub_check_held(r->pub, r->opts.retired_warn_ms, held_cb, r);
    pthread_mutex_unlock(&r->lock);
    return n;
}
