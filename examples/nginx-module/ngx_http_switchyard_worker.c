/*
 * ngx_http_switchyard_worker.c - each nginx worker's own sy_router: built
 * at worker start from the configured files and the zone's documents,
 * brought up to the zone's generation at the next request or timer tick,
 * and published (fingerprint, generation, last error) into the worker's
 * slot of the zone.
 */
#include "ngx_http_switchyard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

sw_worker_t sw_worker;

int64_t sw_now_ms(void) {
    /* not nginx's cached time: that is the start of the event loop's
     * iteration, before the apply being reported */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t sw_now_real_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static uint64_t sw_clock_us(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t sw_now_us(void) {
    return sw_clock_us(CLOCK_MONOTONIC);
}

uint64_t sw_cpu_us(void) {
    return sw_clock_us(CLOCK_THREAD_CPUTIME_ID);
}

void *sw_keep_add(ngx_http_request_t *r, ngx_pool_cleanup_pt mark,
                  size_t size) {
    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(r->pool, size);

    if (cln == NULL)
        return NULL;
    cln->handler = mark;
    return cln->data;
}

ngx_int_t sw_500(ngx_http_request_t *r, const char *cause) {
    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "switchyard: %s: answering 500", cause);
    return NGX_HTTP_INTERNAL_SERVER_ERROR;
}

static void sw_set_error(sy_error *err, int code, const char *path,
                         const char *msg) {
    ngx_memzero(err, sizeof *err);
    err->code = code;
    snprintf(err->path, sizeof err->path, "%s", path);
    snprintf(err->message, sizeof err->message, "%s", msg);
}

/* ---- instances lists (sy_instances_parse) ---- */

/* Changes staged by sw_stage_parsed so far (one per service): which file
 * a failed change of sw_load_files came from. */
static size_t sw_staged;

/* Stage every service of a parsed document, or only `only`. */
static int sw_stage_parsed(sy_change_set *cs, const sy_instances *doc,
                           const char *only, sy_error *err) {
    size_t n = sy_instances_service_count(doc);
    for (size_t i = 0; i < n; i++) {
        const char *name = sy_instances_service(doc, i);
        if (only && strcmp(name, only) != 0)
            continue;
        int rc =
            sy_change_set_set_instances(cs, name, sy_instances_list(doc, i),
                                        sy_instances_count(doc, i), err);
        if (rc)
            return rc;
        sw_staged++;
    }
    return 0;
}

/* The body of PUT <admin>/instances/<service>, staged (cs NULL: checked
 * only): an array of instances, given to the library's parser as the
 * instances document {"<service>": BODY} (error paths and positions are
 * then made relative to the body again), or an instances document holding
 * that service. */
int sw_instances_doc(const char *service, const char *json, size_t len,
                     sy_instances **out, sy_error *err) {
    sy_instances *doc = NULL;
    size_t i = 0, pre = 0;
    int rc;

    while (i < len && (json[i] == ' ' || json[i] == '\t' || json[i] == '\n' ||
                       json[i] == '\r'))
        i++;
    if (i < len && json[i] == '[' && service != NULL) {
        size_t sl = strlen(service), wl;
        u_char *w = malloc(6 * sl + len + 8);
        if (w == NULL) {
            sw_set_error(err, SY_ENOMEM, "", "out of memory");
            return SY_ENOMEM;
        }
        w[0] = '{';
        pre = (size_t)(sw_json_str(w + 1, (const u_char *)service, sl) - w);
        w[pre++] = ':';
        ngx_memcpy(w + pre, json, len);
        wl = pre + len;
        w[wl++] = '}';
        rc = sy_instances_parse((char *)w, wl, NULL, &doc, err);
        free(w);
        if (rc) {
            /* "<service>[1].port" -> "[1].port"; positions in the body */
            if (strncmp(err->path, service, sl) == 0)
                memmove(err->path, err->path + sl, strlen(err->path + sl) + 1);
            err->offset = err->offset >= pre ? err->offset - pre : 0;
            if (err->line == 1)
                err->column =
                    err->column > pre ? err->column - (uint32_t)pre : 1;
            return rc;
        }
    } else {
        rc = sy_instances_parse(json, len, NULL, &doc, err);
        if (rc)
            return rc;
        if (service && sy_instances_find(doc, service) == SIZE_MAX) {
            sy_instances_free(doc);
            sw_set_error(err, SY_ENOTFOUND, "",
                         "the instances document does not list this "
                         "service");
            return SY_ENOTFOUND;
        }
    }
    *out = doc;
    return 0;
}

static int sw_stage_instances(sy_change_set *cs, const char *service,
                              const char *json, size_t len, sy_error *err) {
    sy_instances *doc;
    int rc = sw_instances_doc(service, json, len, &doc, err);
    if (rc)
        return rc;
    rc = cs ? sw_stage_parsed(cs, doc, service, err) : 0;
    sy_instances_free(doc);
    return rc;
}

/* An instances file: every service staged, in order; cs NULL only
 * checks. */
static int sw_instances_file(sy_change_set *cs, const char *json, size_t len,
                             sy_error *err) {
    sy_instances *doc;
    int rc = sy_instances_parse(json, len, NULL, &doc, err);
    if (rc)
        return rc;
    rc = cs ? sw_stage_parsed(cs, doc, NULL, err) : 0;
    sy_instances_free(doc);
    return rc;
}

int sw_instances_file_check(const char *json, size_t len, sy_error *err) {
    return sw_instances_file(NULL, json, len, err);
}

/* ---- applying documents ---- */

static int sw_stage(sy_change_set *cs, ngx_uint_t kind, const char *name,
                    const char *source, const char *data, size_t len,
                    sy_error *err) {
    switch (kind) {
    case SW_DOC_ROUTES: return sy_change_set_apply(cs, name, data, len, err);
    case SW_DOC_ROUTE:
        return sy_change_set_upsert_route(cs, source, data, len, err);
    case SW_DOC_ROUTE_REMOVE: return sy_change_set_remove_route(cs, name, err);
    default: return sw_stage_instances(cs, name, data, len, err);
    }
}

/* Does this worker's router hold a route of that id in that source? (In
 * another source it is a conflict the upsert reports, as before.) */
static bool sw_route_held(const char *id, const char *source) {
    const char *src = NULL;
    sy_snapshot *snap = sy_router_acquire(sw_worker.router);
    bool held = sy_snapshot_find_route(snap, id, &src) != NULL && src &&
                strcmp(src, source) == 0;
    sy_snapshot_release(snap);
    return held;
}

/* A stored document, staged by a worker at generation `gen`: a route
 * change that inserted its route after `gen` (SW_DOC_INSERTED; its order
 * is the generation of the insert) while this worker still holds a route
 * of that id from before (its file's, or one removed since) removes that
 * one first (in the same source), so the route goes to the end of its
 * source as it did live, not to the old one's rank position. A removal
 * from a source that does not hold the route (`replaced`: a routes
 * document of that source is staged before it on this change set, whose
 * routes this worker does not know yet) stages nothing: the library
 * removes by id, and the route of that id is another source's now (a
 * removal of S2's R kept beside a later PUT of R into S1: route changes
 * are stored per (source, id)) or gone already. */
static int sw_stage_doc(sy_change_set *cs, ngx_uint_t kind, const char *name,
                        const char *source, const char *data, size_t len,
                        uint64_t order, ngx_uint_t flags, uint64_t gen,
                        bool replaced, sy_error *err) {
    if (kind == SW_DOC_ROUTE_REMOVE && !replaced &&
        !sw_route_held(name, source))
        return SY_OK;
    if (kind == SW_DOC_ROUTE && (flags & SW_DOC_INSERTED) && order > gen &&
        sw_route_held(name, source)) {
        int rc = sy_change_set_remove_route(cs, name, err);
        if (rc)
            return rc;
    }
    return sw_stage(cs, kind, name, source, data, len, err);
}

const char *sw_kind_name(ngx_uint_t kind) {
    static const char *names[] = {"routes", "instances", "route",
                                  "route-remove"};
    return kind < 4 ? names[kind] : "?";
}

/* One change as a one-change change set: committed, or (dry) only
 * checked against the live state with sy_router_check. */
static int sw_one_change(ngx_uint_t kind, const char *name, const char *source,
                         const char *data, size_t len, bool dry,
                         sy_error *err) {
    sy_change_set *cs;
    uint64_t c0 = sw_cpu_us();
    int rc = sy_change_set_new(sw_worker.router, &cs, err);
    if (rc)
        return rc;
    rc = sw_stage(cs, kind, name, source, data, len, err);
    sw_worker.stage_cpu_us = sw_cpu_us() - c0;
    if (rc == 0)
        rc = dry ? sy_router_check(sw_worker.router, cs, NULL, err)
                 : sy_router_commit(sw_worker.router, cs, NULL, err);
    sy_change_set_free(cs);
    return rc;
}

int sw_worker_apply(ngx_uint_t kind, const char *name, const char *source,
                    const char *data, size_t len, sy_error *err) {
    return sw_one_change(kind, name, source, data, len, false, err);
}

int sw_worker_check(ngx_uint_t kind, const char *name, const char *source,
                    const char *data, size_t len, sy_error *err) {
    return sw_one_change(kind, name, source, data, len, true, err);
}

void sw_worker_publish(int rc, const sy_error *err) {
    sw_slot_t *s = &sw_worker.slot;
    uint64_t t0 = sw_now_us();
    sy_snapshot *snap = sy_router_acquire(sw_worker.router);

    s->pid = ngx_pid;
    s->epoch = sw_worker.epoch;
    s->generation = sw_worker.generation;
    s->fingerprint = sy_snapshot_fingerprint(snap);
    s->routes = sy_snapshot_route_count(snap);
    s->updated_us = sw_now_real_us();
    s->updated_ms = s->updated_us / 1000;
    sy_snapshot_release(snap);
    s->publish_us = sw_now_us() - t0;
    if (rc) {
        s->last_rc = rc;
        snprintf(s->last_error, sizeof s->last_error, "%s%s%s", err->path,
                 err->path[0] ? ": " : "", err->message);
    }
    sw_zone_publish(sw_worker.zone, ngx_worker, s);
}

static void sw_log_doc_error(ngx_log_t *log, const sw_doc_copy_t *d,
                             const sy_error *e) {
    ngx_log_error(NGX_LOG_ERR, log, 0,
                  "switchyard: stored %s \"%s\" (generation %uL) not "
                  "applied: %s%s%s",
                  sw_kind_name(d->kind), d->name, d->seq, e->path,
                  e->path[0] ? ": " : "", e->message);
}

/* A removal whose route is not there asks for what already holds: the
 * route was removed, or the zone's newest change of that route in that
 * source (the only one it keeps) is this removal and replaced the upsert
 * before this worker applied it. Not an error (sw_stage_doc stages none
 * unless a routes document staged before it may hold the route). */
static bool sw_already_holds(const sw_doc_copy_t *d, int rc) {
    return rc == SY_ENOTFOUND && d->kind == SW_DOC_ROUTE_REMOVE;
}

/* Is a routes document of the source of route change i staged before it
 * (docs sorted by order)? */
static bool sw_copy_replaced(const sw_doc_copy_t *docs, size_t i) {
    if (docs[i].kind != SW_DOC_ROUTE_REMOVE)
        return false;
    for (size_t k = 0; k < i; k++)
        if (docs[k].kind == SW_DOC_ROUTES &&
            strcmp(docs[k].name, docs[i].source) == 0)
            return true;
    return false;
}

/* One copied document on its own change set, staged as a worker at
 * generation `gen` stages it, committed. */
static int sw_apply_doc(const sw_doc_copy_t *d, uint64_t gen, sy_error *err) {
    sy_change_set *cs;
    int rc = sy_change_set_new(sw_worker.router, &cs, err);
    if (rc)
        return rc;
    rc = sw_stage_doc(cs, d->kind, d->name, d->source, d->data, d->len,
                      d->order, d->flags, gen, false, err);
    if (rc == 0)
        rc = sy_router_commit(sw_worker.router, cs, NULL, err);
    sy_change_set_free(cs);
    return rc;
}

/* Apply zone documents (sorted by order) to a worker at generation `gen`
 * as one change set: one publish. Should one of them fail (a conflict
 * between documents stored by two workers at once), apply the others one
 * by one so that one bad document does not hold the rest back; the first
 * error is kept. */
static int sw_apply_docs(const sw_doc_copy_t *docs, size_t n, uint64_t gen,
                         sy_error *err, ngx_log_t *log) {
    sy_change_set *cs;
    int rc, first = 0;
    sy_error e;

    if (n == 0)
        return 0;
    rc = sy_change_set_new(sw_worker.router, &cs, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = sw_stage_doc(cs, docs[i].kind, docs[i].name, docs[i].source,
                          docs[i].data, docs[i].len, docs[i].order,
                          docs[i].flags, gen, sw_copy_replaced(docs, i), err);
    if (rc == 0)
        rc = sy_router_commit(sw_worker.router, cs, NULL, err);
    sy_change_set_free(cs);
    if (rc == 0 || n == 1) {
        if (rc && sw_already_holds(&docs[0], rc))
            return 0;
        if (rc)
            sw_log_doc_error(log, &docs[0], err);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        rc = sw_apply_doc(&docs[i], gen, &e);
        if (rc && !sw_already_holds(&docs[i], rc)) {
            sw_log_doc_error(log, &docs[i], &e);
            if (!first) {
                first = rc;
                *err = e;
            }
        }
    }
    return first;
}

/* The configured files as one change set, committed to `router`: what a
 * worker starts from, and what `nginx -t` and a reload check (in the
 * master, on a router of their own) so that a configuration that passes
 * them always starts its workers. On failure *path names the file whose
 * change failed. */
int sw_load_files(sy_router *router, sw_main_conf_t *mcf, sy_error *err,
                  ngx_str_t **path) {
    sw_file_t *f = mcf->route_files.elts;
    sy_change_set *cs;
    sy_report *rep = NULL;
    ngx_str_t *owner[SW_MAX_FILE_CHANGES];
    size_t changes = 0;
    int rc = sy_change_set_new(router, &cs, err);

    *path = NULL;
    for (ngx_uint_t i = 0; rc == 0 && i < mcf->route_files.nelts; i++) {
        rc = sy_change_set_apply(cs, (char *)f[i].name.data,
                                 (char *)f[i].text.data, f[i].text.len, err);
        if (rc)
            *path = &f[i].path;
        else if (changes < SW_MAX_FILE_CHANGES)
            owner[changes++] = &f[i].path;
    }
    f = mcf->instance_files.elts;
    for (ngx_uint_t i = 0; rc == 0 && i < mcf->instance_files.nelts; i++) {
        size_t before = sw_staged;
        rc = sw_instances_file(cs, (char *)f[i].text.data, f[i].text.len, err);
        if (rc)
            *path = &f[i].path;
        for (size_t k = before; k < sw_staged && changes < SW_MAX_FILE_CHANGES;
             k++)
            owner[changes++] = &f[i].path;
    }
    if (rc == 0) {
        rc = sy_router_commit(router, cs, &rep, err);
        if (rc && rep) {
            long k = sy_report_failed_change(rep);
            if (k >= 0 && (size_t)k < changes)
                *path = owner[k];
        }
        if (rep)
            sy_report_free(rep);
    }
    if (cs)
        sy_change_set_free(cs);
    return rc;
}

/* What the module runs when a route may be proxied in the variable form
 * (proxy_pass $switchyard_upstream...), which takes the location's own
 * timeouts and tries: a route's connect-timeout, response-timeout, Retry
 * and CircuitBreaker (its time limit) cannot run there. Which location
 * serves a route is not known at load, so they are refused, located, at
 * `nginx -t`, worker start and the admin location whenever a directive
 * uses $switchyard_upstream, and when no upstream has
 * switchyard_balancer. */
#define SW_VARIABLE_RUNS                                                       \
    "RequestRateLimiter", "forward:", "https:", "ws:", "wss:", NULL
static const char *const sw_unbalanced_runs[] = {
    "host=nginx without switchyard_balancer", SW_VARIABLE_RUNS};
static const char *const sw_variable_runs[] = {
    "host=nginx with a $switchyard_upstream location", SW_VARIABLE_RUNS};

/* A reason added to the host's name: "host=nginx" takes " with", a
 * longer name " and". */
static u_char *sw_host_why(u_char *name, u_char *p, const char *why,
                           size_t len) {
    p = p == name + 10 ? ngx_cpymem(p, " with", 5) : ngx_cpymem(p, " and", 4);
    return ngx_cpymem(p, why, len);
}

/* A proxy_pass without variables to http:// has no SSL context (nginx
 * makes one only for https:// or a proxy_pass with variables): an https
 * or wss target would be answered 500 at every request, so the list of
 * the other forms loses "https:" and "wss:" (the library then refuses
 * those routes and secure instances, located) and says why in its name.
 * A location that does not pass WebSocket upgrades would send a ws or
 * wss route's handshakes up as plain requests: the list loses "ws:" and
 * "wss:" likewise. */
const char *const *sw_host_runs(ngx_conf_t *cf, sw_main_conf_t *mcf) {
    const char *const *base = mcf->balancer != 1   ? sw_unbalanced_runs
                              : mcf->variable_form ? sw_variable_runs
                                                   : sy_host_profile("nginx");
    static const char plain[] = " a proxy_pass without variables",
                      ws_lost[] = " a location without WebSocket upgrades";
    size_t n = 0, k = 0;
    const char **runs;
    u_char *name, *p;

    if (!mcf->plain_form && !mcf->upgrade_lost)
        return base;
    while (base[n])
        n++;
    runs = ngx_palloc(cf->pool, (n + 1) * sizeof *runs);
    name = ngx_pnalloc(cf->pool, 256);
    if (runs == NULL || name == NULL)
        return NULL;
    /* the base's name, and why: "host=nginx with a proxy_pass without
     * variables", "host=nginx with a $switchyard_upstream location and a
     * location without WebSocket upgrades"... (at most 119 bytes: the
     * library's messages hold 128 for "host '...'") */
    p = ngx_cpymem(name, "host=nginx", 10);
    for (size_t i = 0; i < n; i++)
        if (ngx_strncmp(base[i], "host=", 5) == 0)
            p = ngx_cpymem(name, base[i], ngx_strlen(base[i]));
    if (mcf->plain_form)
        p = sw_host_why(name, p, plain, sizeof plain - 1);
    if (mcf->upgrade_lost)
        p = sw_host_why(name, p, ws_lost, sizeof ws_lost - 1);
    *p = '\0';
    for (size_t i = 0; i < n; i++) {
        if ((mcf->plain_form && (ngx_strcmp(base[i], "https:") == 0 ||
                                 ngx_strcmp(base[i], "wss:") == 0)) ||
            (mcf->upgrade_lost && (ngx_strcmp(base[i], "ws:") == 0 ||
                                   ngx_strcmp(base[i], "wss:") == 0)))
            continue;
        runs[k++] =
            ngx_strncmp(base[i], "host=", 5) == 0 ? (char *)name : base[i];
    }
    runs[k] = NULL;
    return runs;
}

int sw_router_create(sw_main_conf_t *mcf, sy_router **out, sy_error *err) {
    sy_router_options opts = SY_ROUTER_OPTIONS_INIT;
    sw_file_t *f = mcf->route_files.elts;
    int rc;

    /* the module offers no rollback: keep one generation of each
     * source, not the library's default eight. The library's default
     * allocator serves the routers: it keeps freed blocks of the size a
     * document change needs, so a change's copies land in resident
     * memory, not in fresh pages. */
    opts.history = 1;
    opts.strip_host_port = mcf->strip_host_port;
    opts.merge_slashes = mcf->merge_slashes;
    opts.escaped_slashes = (sy_escaped_slashes)mcf->escaped_slashes;
    /* passive health is the zone's, shared by the workers (one ejection
     * for the server, not one per worker): the routers' own is off */
    opts.outlier.disabled = true;
    /* what the module does not run is refused, located (SY_ENOTRUN) */
    opts.host_runs = mcf->host_runs;
    /* rate-limit buckets and breakers shared by every worker (the -t
     * check in the master, before the zone exists, has its own) */
    sw_zone_ctx_t *z = mcf->zone ? mcf->zone->data : NULL;
    if (z && z->sh && z->sh->policy &&
        sy_policy_store_attach(z->sh->policy, z->sh->policy_len,
                               &opts.policy_store, err))
        return err->code;
    rc = sy_router_new(&opts, out, err);
    for (ngx_uint_t i = 0; rc == 0 && i < mcf->route_files.nelts; i++)
        rc = sy_router_add_source(*out, (char *)f[i].name.data, err);
    if (rc && *out) {
        sy_router_free(*out);
        *out = NULL;
    }
    return rc;
}

/* nginx -t with switchyard_state: the stored changes it read (those the
 * files still own: sw_zone_reconcile), applied as a worker will, to a
 * router of the files of its own; each that would not apply is logged as
 * the workers would log it, before they start. */
void sw_test_stored(ngx_cycle_t *cycle, sw_main_conf_t *mcf) {
    sw_zone_ctx_t *z = mcf->zone ? mcf->zone->data : NULL;
    sy_router *router = NULL, *keep = sw_worker.router;
    sw_doc_copy_t *docs;
    ngx_str_t *path;
    sy_error err;
    size_t n;
    uint64_t gen;

    if (z == NULL || z->sh == NULL ||
        sw_zone_copy(z, false, z->sh->epoch, 0, &docs, &n, &gen) != NGX_OK)
        return;
    if (n && sw_router_create(mcf, &router, &err) == 0 &&
        sw_load_files(router, mcf, &err, &path) == 0) {
        sw_worker.router = router;
        if (sw_apply_docs(docs, n, 0, &err, cycle->log))
            ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
                          "switchyard: the stored changes logged above would "
                          "not be applied by the workers of this "
                          "configuration; they stay stored (\"%V\")",
                          &mcf->state_path);
        sw_worker.router = keep;
    }
    if (router)
        sy_router_free(router);
    sw_docs_free(docs, n);
}

/* Every document of the zone, as of now. */
static int sw_apply_zone(ngx_log_t *log, sy_error *err) {
    sw_doc_copy_t *docs;
    size_t n;
    uint64_t gen;
    int rc;

    if (sw_zone_copy(sw_worker.zone, false, sw_worker.epoch, 0, &docs, &n,
                     &gen) != NGX_OK)
        return 0;
    rc = sw_apply_docs(docs, n, 0, err, log);
    sw_docs_free(docs, n);
    sw_worker.generation = gen;
    return rc;
}

static int sw_doc_ptr_cmp(const void *a, const void *b) {
    const sw_shm_doc_t *x = *(sw_shm_doc_t *const *)a;
    const sw_shm_doc_t *y = *(sw_shm_doc_t *const *)b;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* sw_copy_replaced for documents in the zone. */
static bool sw_shm_replaced(sw_shm_doc_t *const *v, size_t i) {
    if (v[i]->kind != SW_DOC_ROUTE_REMOVE)
        return false;
    for (size_t k = 0; k < i; k++)
        if (v[k]->kind == SW_DOC_ROUTES && v[k]->name_len == v[i]->source_len &&
            ngx_memcmp(v[k]->name, v[i]->source, v[i]->source_len) == 0)
            return true;
    return false;
}

static void sw_cstr_n(char *dst, size_t cap, const u_char *p, size_t len) {
    size_t n = ngx_min(len, cap - 1);
    ngx_memcpy(dst, p, n);
    dst[n] = '\0';
}

/* The documents stored after this worker's generation, in replay order
 * (sw_shm_doc_t.order), staged on one change set straight from the zone, under
 * its mutex (the library copies what it keeps: no copy of our own), then
 * committed. NGX_OK with *n staged (*rc: the commit's or a staging's result,
 * *gen: the generation they bring the worker to); NGX_DECLINED: the zone
 * belongs to a newer configuration (*gen set); NGX_ERROR: out of memory.
 * *t_zone: when the zone was let go. */
static ngx_int_t sw_follow_from_zone(bool locked, uint64_t *gen, size_t *n,
                                     int *rc, sy_error *err, uint64_t *t_zone) {
    sw_zone_ctx_t *z = sw_worker.zone;
    sw_shm_doc_t **v = NULL, *d;
    size_t cap = 0;
    sy_change_set *cs;
    ngx_int_t zrc = NGX_OK;
    char name[256], source[256];

    *n = 0;
    *rc = 0;
    if (sy_change_set_new(sw_worker.router, &cs, err))
        return NGX_ERROR;
    if (!locked)
        sw_zone_lock(z);
    *gen = z->sh->generation;
    if (z->sh->epoch != sw_worker.epoch)
        zrc = NGX_DECLINED;
    for (d = z->sh->docs; zrc == NGX_OK && d; d = d->next) {
        if (d->seq <= sw_worker.generation)
            continue;
        if (*n == cap) {
            size_t ncap = cap ? 2 * cap : 8;
            sw_shm_doc_t **nv = realloc(v, ncap * sizeof *nv);
            if (nv == NULL) {
                zrc = NGX_ERROR;
                break;
            }
            v = nv;
            cap = ncap;
        }
        v[(*n)++] = d;
    }
    if (zrc == NGX_OK) {
        qsort(v, *n, sizeof *v, sw_doc_ptr_cmp);
        for (size_t i = 0; i < *n && *rc == 0; i++) {
            sw_cstr_n(name, sizeof name, v[i]->name, v[i]->name_len);
            sw_cstr_n(source, sizeof source, v[i]->source, v[i]->source_len);
            *rc =
                sw_stage_doc(cs, v[i]->kind, name, source, (char *)v[i]->data,
                             v[i]->len, v[i]->order, v[i]->flags,
                             sw_worker.generation, sw_shm_replaced(v, i), err);
        }
    }
    if (!locked)
        sw_zone_unlock(z);
    *t_zone = sw_now_us();
    free(v);
    if (zrc == NGX_OK && *rc == 0 && *n)
        *rc = sy_router_commit(sw_worker.router, cs, NULL, err);
    sy_change_set_free(cs);
    return zrc;
}

/* Apply the documents stored past this worker's generation; true when it
 * applied something (then *rc and *err hold the outcome). Should the one
 * change set fail (two workers stored conflicting changes, or a stored
 * document does not stage), the documents are copied out of the zone and
 * applied one by one (sw_apply_docs), so that one does not hold the
 * others back. */
static bool sw_worker_follow(ngx_log_t *log, bool locked, int *rc,
                             sy_error *err) {
    sw_doc_copy_t *docs;
    size_t n;
    uint64_t gen, t1;

    if (sw_worker.router == NULL || sw_worker.zone == NULL)
        return false;
    if (sw_worker.zone->sh->generation == sw_worker.generation)
        return false;
    uint64_t t0 = sw_now_us(), c0 = sw_cpu_us();
    ngx_int_t zrc = sw_follow_from_zone(locked, &gen, &n, rc, err, &t1);
    if (zrc == NGX_DECLINED) {
        /* a reload replaced this configuration: keep serving the old one
         * until this worker exits */
        sw_worker.generation = gen;
        return false;
    }
    if (zrc == NGX_OK && *rc) {
        zrc = sw_zone_copy(sw_worker.zone, locked, sw_worker.epoch,
                           sw_worker.generation, &docs, &n, &gen);
        if (zrc == NGX_OK) {
            *rc = sw_apply_docs(docs, n, sw_worker.generation, err, log);
            sw_docs_free(docs, n);
        } else if (zrc == NGX_DECLINED) {
            sw_worker.generation = gen;
            return false;
        }
    }
    if (zrc != NGX_OK) {
        ngx_log_error(NGX_LOG_ERR, log, 0, "switchyard: out of memory");
        return false;
    }
    sw_worker.slot.copy_us = t1 - t0;
    sw_worker.slot.apply_us = sw_now_us() - t1;
    sw_worker.slot.apply_cpu_us = sw_cpu_us() - c0;
    sw_worker.generation = gen;
    return true;
}

static void sw_worker_sync_changed(ngx_log_t *log) {
    sy_error err;
    int rc;

    if (sw_worker_follow(log, false, &rc, &err))
        sw_worker_publish(rc, &err);
}

void sw_worker_sync(ngx_log_t *log) {
    /* every request: one read, without sw_worker_follow's frame */
    if (sw_worker.router && sw_worker.zone &&
        sw_worker.zone->sh->generation != sw_worker.generation)
        sw_worker_sync_changed(log);
}

bool sw_worker_follow_locked(ngx_log_t *log, int *rc, sy_error *err) {
    return sw_worker_follow(log, true, rc, err);
}

static void sw_timer_handler(ngx_event_t *ev) {
    sw_worker_sync(ev->log);
    sw_state_follow(ev->log);
    /* free retired snapshots and renew the readers' counters now and then
     * (the library asks hosts that publish rarely to do so) */
    if (++sw_worker.ticks % (60000 / SW_POLL_MS) == 0 && sw_worker.router)
        sy_router_reclaim(sw_worker.router);
    if (!ngx_exiting && !ngx_terminate && !ngx_quit)
        ngx_add_timer(ev, SW_POLL_MS);
}

ngx_int_t sw_worker_start(ngx_cycle_t *cycle, sw_main_conf_t *mcf) {
    sy_error err;
    ngx_str_t *path = NULL, files = ngx_string("the configured files");
    int rc;

    ngx_memzero(&sw_worker, sizeof sw_worker);
    sw_worker.seed = ((uint64_t)ngx_random() << 32) ^ (uint64_t)ngx_random() ^
                     ((uint64_t)ngx_pid << 48);
    sw_worker.mcf = mcf;
    sw_worker.zone = mcf->zone->data;
    sw_worker.epoch = sw_worker.zone->sh->epoch;
    if (sw_router_create(mcf, &sw_worker.router, &err) ||
        sy_match_ctx_new(NULL, &sw_worker.mctx, &err))
        goto failed;
    /* the files applied at `nginx -t` and in the master: they apply here
     * (short of memory); documents stored since are reported per
     * document */
    if (sw_load_files(sw_worker.router, mcf, &err, &path))
        goto failed;
    rc = sw_apply_zone(cycle->log, &err);
    sw_worker_publish(rc, &err);

    if (sw_notify_watch(cycle, mcf->notify) != NGX_OK)
        ngx_log_error(NGX_LOG_WARN, cycle->log, ngx_errno,
                      "switchyard: cannot watch the notification pipe: "
                      "changes reach this worker at its next request or "
                      "timer tick");

    sw_worker.timer.handler = sw_timer_handler;
    sw_worker.timer.log = cycle->log;
    sw_worker.timer.data = &sw_worker;
    sw_worker.timer.cancelable = 1;
    ngx_add_timer(&sw_worker.timer, SW_POLL_MS);
    return NGX_OK;

failed:
    /* a worker that exits here is not respawned (fatal code 2) and would
     * leave the master without workers: it stays, answers 503 and says
     * why in the log of each refused request */
    ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                  "switchyard: this worker cannot load its routes (%V): "
                  "%s%s%s; it answers 503",
                  path ? path : &files, err.path, err.path[0] ? ": " : "",
                  err.message);
    if (sw_worker.mctx)
        sy_match_ctx_free(sw_worker.mctx);
    if (sw_worker.router)
        sy_router_free(sw_worker.router);
    sw_worker.mctx = NULL;
    sw_worker.router = NULL;
    return NGX_OK;
}

void sw_worker_stop(void) {
    if (sw_worker.mctx)
        sy_match_ctx_free(sw_worker.mctx);
    if (sw_worker.router)
        sy_router_free(sw_worker.router);
    free(sw_worker.hdrs);
    ngx_memzero(&sw_worker, sizeof sw_worker);
}
