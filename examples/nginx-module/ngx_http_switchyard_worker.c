/*
 * ngx_http_switchyard_worker.c - each nginx worker's own sy_router: built
 * at worker start from the configured files and the zone's documents,
 * brought up to the zone's generation at the next request or timer tick,
 * and published (fingerprint, generation, last error) into the worker's
 * slot of the zone.
 */
#include "ngx_http_switchyard.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sw_worker_t sw_worker;

int64_t sw_now_ms(void) {
    ngx_time_t *tp = ngx_timeofday();
    return (int64_t)tp->sec * 1000 + (int64_t)tp->msec;
}

static void sw_set_error(sy_error *err, int code, const char *path,
                         const char *msg) {
    ngx_memzero(err, sizeof *err);
    err->code = code;
    snprintf(err->path, sizeof err->path, "%s", path);
    snprintf(err->message, sizeof err->message, "%s", msg);
}

/* ---- instances lists ---- */

typedef struct {
    sy_instance *list;
    sy_kv *kvs;
    size_t count;
} sw_instances_t;

static void sw_instances_free(sw_instances_t *in) {
    free(in->list);
    free(in->kvs);
}

/* Integers and booleans in metadata are taken as text ("version": 2 is
 * "2"), in place. */
static int sw_metadata_as_text(cJSON *md) {
    char buf[32];
    cJSON *kv = md ? md->child : NULL;
    while (kv) {
        cJSON *next = kv->next, *text = NULL;
        if (cJSON_IsBool(kv))
            text = cJSON_CreateString(cJSON_IsTrue(kv) ? "true" : "false");
        else if (cJSON_IsNumber(kv) && kv->valuedouble >= -9007199254740992.0 &&
                 kv->valuedouble <= 9007199254740992.0 &&
                 kv->valuedouble == (double)(long long)kv->valuedouble) {
            snprintf(buf, sizeof buf, "%lld", (long long)kv->valuedouble);
            text = cJSON_CreateString(buf);
        }
        /* the replacement takes over the key (cJSON frees it) */
        if (text && (text->string = strdup(kv->string)) == NULL) {
            cJSON_Delete(text);
            return SY_ENOMEM;
        }
        if ((cJSON_IsBool(kv) || text) &&
            (text == NULL || !cJSON_ReplaceItemViaPointer(md, kv, text))) {
            cJSON_Delete(text);
            return SY_ENOMEM;
        }
        kv = next;
    }
    return 0;
}

static const char *sw_unknown_key(const cJSON *in) {
    static const char *known[] = {"id",    "host",   "port",     "weight",
                                  "state", "secure", "metadata", NULL};
    for (const cJSON *kv = in->child; kv; kv = kv->next) {
        size_t i = 0;
        while (known[i] && strcmp(known[i], kv->string) != 0)
            i++;
        if (!known[i])
            return kv->string;
    }
    return NULL;
}

/* Borrows strings from arr (a cJSON array of instance objects; metadata
 * values are turned into text in place). */
static int sw_instances_from_json(const cJSON *arr, const char *where,
                                  sw_instances_t *out, sy_error *err) {
    char path[200];
    const cJSON *in, *kv;
    size_t n, nkv = 0, i = 0, k = 0;

    ngx_memzero(out, sizeof *out);
    if (!cJSON_IsArray(arr)) {
        sw_set_error(err, SY_ETYPE, where, "expected an array of instances");
        return SY_ETYPE;
    }
    n = (size_t)cJSON_GetArraySize(arr);
    cJSON_ArrayForEach(in, arr) {
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(in, "metadata");
        nkv += (size_t)cJSON_GetArraySize(md);
    }
    out->list = calloc(n + 1, sizeof *out->list);
    out->kvs = calloc(nkv + 1, sizeof *out->kvs);
    if (out->list == NULL || out->kvs == NULL) {
        sw_instances_free(out);
        sw_set_error(err, SY_ENOMEM, where, "out of memory");
        return SY_ENOMEM;
    }
    cJSON_ArrayForEach(in, arr) {
        sy_instance *x = &out->list[i];
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(in, "id");
        const cJSON *host = cJSON_GetObjectItemCaseSensitive(in, "host");
        const cJSON *port = cJSON_GetObjectItemCaseSensitive(in, "port");
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(in, "weight");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(in, "state");
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(in, "metadata");
        int code = 0;
        const char *field = "", *msg = "";

        if (!cJSON_IsObject(in))
            code = SY_ETYPE, msg = "expected an object";
        else if (sw_unknown_key(in))
            code = SY_EUNKNOWN, msg = "unknown key";
        else if (!cJSON_IsString(id) || !id->valuestring[0])
            code = SY_EMISSING, field = ".id", msg = "needs a string id";
        else if (!cJSON_IsString(host) || !host->valuestring[0])
            code = SY_EMISSING, field = ".host", msg = "needs a string host";
        else if (!cJSON_IsNumber(port) || port->valuedouble < 1 ||
                 port->valuedouble > 65535 ||
                 port->valuedouble != (double)(int)port->valuedouble)
            code = SY_ERANGE, field = ".port",
            msg = "port must be an integer from 1 to 65535";
        else if (w && (!cJSON_IsNumber(w) || w->valuedouble < 1 ||
                       w->valuedouble > 4294967295.0))
            code = SY_ERANGE, field = ".weight",
            msg = "weight must be a number from 1 to 4294967295";
        else if (st && !cJSON_IsString(st))
            code = SY_ETYPE, field = ".state", msg = "state must be a string";
        else if (md && !cJSON_IsObject(md))
            code = SY_ETYPE, field = ".metadata",
            msg = "metadata must be an object";
        else if (sw_metadata_as_text((cJSON *)md))
            code = SY_ENOMEM, msg = "out of memory";
        else
            for (size_t j = 0; j < i; j++)
                if (strcmp(out->list[j].id, id->valuestring) == 0) {
                    code = SY_EDUPLICATE, field = ".id",
                    msg = "duplicate instance id";
                    break;
                }
        if (code) {
            if (code == SY_EUNKNOWN)
                snprintf(path, sizeof path, "%s[%zu].%s", where, i,
                         sw_unknown_key(in));
            else
                snprintf(path, sizeof path, "%s[%zu]%s", where, i, field);
            sw_set_error(err, code, path, msg);
            sw_instances_free(out);
            return code;
        }
        x->id = id->valuestring;
        x->host = host->valuestring;
        x->port = (uint16_t)port->valuedouble;
        x->weight = w ? (uint32_t)w->valuedouble : 1;
        x->secure =
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(in, "secure"));
        x->state = SY_INSTANCE_UP;
        if (st && strcasecmp(st->valuestring, "up") != 0) {
            if (strcasecmp(st->valuestring, "draining") == 0)
                x->state = SY_INSTANCE_DRAINING;
            else if (strcasecmp(st->valuestring, "down") == 0)
                x->state = SY_INSTANCE_DOWN;
            else {
                snprintf(path, sizeof path, "%s[%zu].state", where, i);
                sw_set_error(err, SY_EARG, path,
                             "state must be up, draining or down");
                sw_instances_free(out);
                return SY_EARG;
            }
        }
        x->metadata = out->kvs + k;
        cJSON_ArrayForEach(kv, md) {
            if (!cJSON_IsString(kv)) {
                snprintf(path, sizeof path, "%s[%zu].metadata.%s", where, i,
                         kv->string);
                sw_set_error(err, SY_ETYPE, path,
                             "metadata values must be strings, integers or "
                             "booleans");
                sw_instances_free(out);
                return SY_ETYPE;
            }
            out->kvs[k++] = (sy_kv){kv->string, kv->valuestring};
        }
        x->metadata_count = (size_t)(out->kvs + k - x->metadata);
        i++;
    }
    out->count = n;
    return 0;
}

static cJSON *sw_parse_json(const char *json, size_t len, sy_error *err) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (root == NULL) {
        sw_set_error(err, SY_ESYNTAX, "", "JSON syntax error");
        err->offset = end ? (size_t)(end - json) : 0;
        return NULL;
    }
    return root;
}

/* Stage a service's instance list (cs NULL: only check it). */
static int sw_stage_instances(sy_change_set *cs, const char *service,
                              const char *json, size_t len, sy_error *err) {
    sw_instances_t in;
    cJSON *root = sw_parse_json(json, len, err);
    if (root == NULL)
        return SY_ESYNTAX;
    const cJSON *arr = root;
    if (cJSON_IsObject(root))
        arr = cJSON_GetObjectItemCaseSensitive(root, "instances");
    int rc = sw_instances_from_json(
        arr, cJSON_IsObject(root) ? "instances" : "", &in, err);
    if (rc == 0) {
        rc = cs ? sy_change_set_set_instances(cs, service, in.list, in.count,
                                              err)
                : 0;
        sw_instances_free(&in);
    }
    cJSON_Delete(root);
    return rc;
}

/* {"services": {name: [instances]}}: every service staged, in order; cs
 * NULL only checks. */
static int sw_instances_file(sy_change_set *cs, const char *json, size_t len,
                             sy_error *err) {
    char where[160];
    const cJSON *svc;
    sw_instances_t in;
    int rc = 0;
    cJSON *root = sw_parse_json(json, len, err);
    if (root == NULL)
        return SY_ESYNTAX;
    const cJSON *services = cJSON_GetObjectItemCaseSensitive(root, "services");
    if (!cJSON_IsObject(services)) {
        sw_set_error(err, SY_EMISSING, "services",
                     "expected {\"services\": {name: [instances]}}");
        cJSON_Delete(root);
        return SY_EMISSING;
    }
    cJSON_ArrayForEach(svc, services) {
        snprintf(where, sizeof where, "services.%s", svc->string);
        rc = sw_instances_from_json(svc, where, &in, err);
        if (rc)
            break;
        if (cs)
            rc = sy_change_set_set_instances(cs, svc->string, in.list, in.count,
                                             err);
        sw_instances_free(&in);
        if (rc)
            break;
    }
    cJSON_Delete(root);
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

const char *sw_kind_name(ngx_uint_t kind) {
    static const char *names[] = {"routes", "instances", "route",
                                  "route-remove"};
    return kind < 4 ? names[kind] : "?";
}

int sw_worker_apply(ngx_uint_t kind, const char *name, const char *source,
                    const char *data, size_t len, sy_error *err) {
    sy_change_set *cs;
    int rc = sy_change_set_new(sw_worker.router, &cs, err);
    if (rc)
        return rc;
    rc = sw_stage(cs, kind, name, source, data, len, err);
    if (rc == 0)
        rc = sy_router_commit(sw_worker.router, cs, NULL, err);
    sy_change_set_free(cs);
    return rc;
}

void sw_worker_publish(int rc, const sy_error *err) {
    sw_slot_t *s = &sw_worker.slot;
    sy_snapshot *snap = sy_router_acquire(sw_worker.router);

    s->pid = ngx_pid;
    s->epoch = sw_worker.epoch;
    s->generation = sw_worker.generation;
    s->fingerprint = sy_snapshot_fingerprint(snap);
    s->routes = sy_snapshot_route_count(snap);
    s->updated_ms = sw_now_ms();
    sy_snapshot_release(snap);
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

/* Apply zone documents (sorted by seq) as one change set: one publish.
 * Should one of them fail (a conflict between documents stored by two
 * workers at once), apply the others one by one so that one bad document
 * does not hold the rest back; the first error is kept. */
static int sw_apply_docs(const sw_doc_copy_t *docs, size_t n, sy_error *err,
                         ngx_log_t *log) {
    sy_change_set *cs;
    int rc, first = 0;
    sy_error e;

    if (n == 0)
        return 0;
    rc = sy_change_set_new(sw_worker.router, &cs, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = sw_stage(cs, docs[i].kind, docs[i].name, docs[i].source,
                      docs[i].data, docs[i].len, err);
    if (rc == 0)
        rc = sy_router_commit(sw_worker.router, cs, NULL, err);
    sy_change_set_free(cs);
    if (rc == 0 || n == 1) {
        if (rc)
            sw_log_doc_error(log, &docs[0], err);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        rc = sw_worker_apply(docs[i].kind, docs[i].name, docs[i].source,
                             docs[i].data, docs[i].len, &e);
        if (rc) {
            sw_log_doc_error(log, &docs[i], &e);
            if (!first) {
                first = rc;
                *err = e;
            }
        }
    }
    return first;
}

/* The configured files as one change set (they were checked at
 * configuration time). */
static int sw_apply_files(sy_error *err) {
    sw_main_conf_t *mcf = sw_worker.mcf;
    sw_file_t *f = mcf->route_files.elts;
    sy_change_set *cs;
    int rc = sy_change_set_new(sw_worker.router, &cs, err);

    for (ngx_uint_t i = 0; rc == 0 && i < mcf->route_files.nelts; i++)
        rc = sy_change_set_apply(cs, (char *)f[i].name.data,
                                 (char *)f[i].text.data, f[i].text.len, err);
    f = mcf->instance_files.elts;
    for (ngx_uint_t i = 0; rc == 0 && i < mcf->instance_files.nelts; i++)
        rc = sw_instances_file(cs, (char *)f[i].text.data, f[i].text.len, err);
    if (rc == 0)
        rc = sy_router_commit(sw_worker.router, cs, NULL, err);
    if (cs)
        sy_change_set_free(cs);
    return rc;
}

/* Every document of the zone, as of now. */
static int sw_apply_zone(ngx_log_t *log, sy_error *err) {
    sw_doc_copy_t *docs;
    size_t n;
    uint64_t gen;
    int rc;

    if (sw_zone_copy(sw_worker.zone, sw_worker.epoch, 0, &docs, &n, &gen) !=
        NGX_OK)
        return 0;
    rc = sw_apply_docs(docs, n, err, log);
    sw_docs_free(docs, n);
    sw_worker.generation = gen;
    return rc;
}

/* Files, then every document of the zone: the whole configuration. */
static int sw_full_sync(ngx_log_t *log, sy_error *err) {
    int rc = sw_apply_files(err);
    return rc ? rc : sw_apply_zone(log, err);
}

void sw_worker_sync(ngx_log_t *log) {
    sw_doc_copy_t *docs;
    size_t n;
    uint64_t gen;
    sy_error err;
    int rc;

    if (sw_worker.router == NULL || sw_worker.zone == NULL)
        return;
    if (sw_worker.dirty) {
        sw_worker.dirty = 0;
        rc = sw_full_sync(log, &err);
        sw_worker_publish(rc, &err);
        return;
    }
    if (sw_worker.zone->sh->generation == sw_worker.generation)
        return;
    ngx_int_t zrc = sw_zone_copy(sw_worker.zone, sw_worker.epoch,
                                 sw_worker.generation, &docs, &n, &gen);
    if (zrc == NGX_DECLINED) {
        /* a reload replaced this configuration: keep serving the old one
         * until this worker exits */
        sw_worker.generation = gen;
        return;
    }
    if (zrc != NGX_OK) {
        ngx_log_error(NGX_LOG_ERR, log, 0, "switchyard: out of memory");
        return;
    }
    rc = sw_apply_docs(docs, n, &err, log);
    sw_docs_free(docs, n);
    sw_worker.generation = gen;
    sw_worker_publish(rc, &err);
}

static void sw_timer_handler(ngx_event_t *ev) {
    sw_worker_sync(ev->log);
    /* free retired snapshots and renew the readers' counters now and then
     * (the library asks hosts that publish rarely to do so) */
    if (++sw_worker.ticks % (60000 / SW_POLL_MS) == 0 && sw_worker.router)
        sy_router_reclaim(sw_worker.router);
    if (!ngx_exiting && !ngx_terminate && !ngx_quit)
        ngx_add_timer(ev, SW_POLL_MS);
}

ngx_int_t sw_worker_start(ngx_cycle_t *cycle, sw_main_conf_t *mcf) {
    sy_router_options opts = SY_ROUTER_OPTIONS_INIT;
    sy_error err;
    sw_file_t *f;
    int rc;

    ngx_memzero(&sw_worker, sizeof sw_worker);
    sw_worker.mcf = mcf;
    sw_worker.zone = mcf->zone->data;
    sw_worker.epoch = sw_worker.zone->sh->epoch;
    opts.strip_host_port = mcf->strip_host_port;
    opts.merge_slashes = mcf->merge_slashes;
    opts.escaped_slashes = (sy_escaped_slashes)mcf->escaped_slashes;
    if (sy_router_new(&opts, &sw_worker.router, &err) ||
        sy_match_ctx_new(NULL, &sw_worker.mctx, &err))
        goto failed;
    f = mcf->route_files.elts;
    for (ngx_uint_t i = 0; i < mcf->route_files.nelts; i++)
        if (sy_router_add_source(sw_worker.router, (char *)f[i].name.data,
                                 &err))
            goto failed;
    /* the files must apply; documents stored since this configuration was
     * loaded are reported per document */
    if (sw_apply_files(&err))
        goto failed;
    rc = sw_apply_zone(cycle->log, &err);
    sw_worker_publish(rc, &err);

    sw_worker.timer.handler = sw_timer_handler;
    sw_worker.timer.log = cycle->log;
    sw_worker.timer.data = &sw_worker;
    sw_worker.timer.cancelable = 1;
    ngx_add_timer(&sw_worker.timer, SW_POLL_MS);
    return NGX_OK;

failed:
    ngx_log_error(NGX_LOG_EMERG, cycle->log, 0, "switchyard: %s%s%s", err.path,
                  err.path[0] ? ": " : "", err.message);
    return NGX_ERROR;
}

void sw_worker_stop(void) {
    if (sw_worker.mctx)
        sy_match_ctx_free(sw_worker.mctx);
    if (sw_worker.router)
        sy_router_free(sw_worker.router);
    free(sw_worker.hdrs);
    ngx_memzero(&sw_worker, sizeof sw_worker);
}
