/*
 * store.c - with --etcd, admin changes go to etcd, not to this gateway's
 * router: every gateway on that etcd (this one too) applies them from its
 * watch, so a fleet stays one. The change is checked here first (a bad
 * route is 400 with its located error and nothing is written), written as
 * one transaction that holds only while the keys are as this gateway saw
 * them (etcd_write.c; a concurrent write is 409), and answered once etcd
 * accepted it and this gateway's watch applied it, with the key and the
 * revision (400 with the watch's error when it refused the write: a
 * source beyond the router's 256):
 *
 *   PUT    /routes/<source>          the document, as PREFIX routes/<source>
 *   PUT    /routes/<source>/<id>     the source's document with the route
 *   DELETE /routes/<source>/<id>     the source's document without it
 *   POST   /routes/<source>/<id>/disable | /enable
 *                                    the route with metadata "status":
 *                                    "disabled" (or without it)
 *   PUT    /instances/<service>      PREFIX instances/<service>/<id> keys
 *   POST /actuator/gateway/routes/{id}, DELETE: the "actuator" source
 *
 * A source's document is made from the live routes of the source, in
 * rank order, as the library keeps them (canonical). A rollback is not
 * written through (409: roll back in etcd). Main thread only.
 */
#define _DEFAULT_SOURCE
#include "gw.h"

#include "etcd_source.h"
#include "etcd_write.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pending {
    httpd_conn *c;
    int ok_status;
    char key[640];
    char source[128]; /* a route source's write: which, else "" */
    char what[256];
    int64_t revision;  /* accepted by etcd at */
    uv_timer_t timer;  /* waiting for this gateway's watch to apply it */
    uint64_t deadline; /* loop time (ms) */
} pending;

static void answer(pending *p, int status, int64_t revision, const char *msg) {
    cJSON *j = cJSON_CreateObject();
    if (status != 200)
        cJSON_AddStringToObject(j, "error", msg);
    else if (msg)
        cJSON_AddStringToObject(j, "warning", msg);
    cJSON_AddStringToObject(j, "what", p->what);
    cJSON *e = cJSON_AddObjectToObject(j, "etcd");
    cJSON_AddStringToObject(e, "key", p->key);
    if (revision)
        cJSON_AddNumberToObject(e, "revision", (double)revision);
    gw_reply_cjson(p->c, status == 200 ? p->ok_status : status, j);
}

static void on_timer_closed(uv_handle_t *h) {
    free(h->data);
}

/* The answer waits until this gateway's watch applied the write (up to
 * 2 s): a script's next change, here, builds on it. */
static void on_applied_check(uv_timer_t *t) {
    pending *p = t->data;
    bool applied = gw_etcd_revision(G.etcd) >= p->revision;
    if (!applied && uv_now(t->loop) < p->deadline)
        return;
    /* applied, but refused by this gateway's router (a check the one
     * here before the write does not make, e.g. more sources than the
     * router holds): said, with where it is in etcd, not answered 200 */
    gw_etcd_source_info si;
    if (applied && p->source[0] &&
        !gw_etcd_source_info_get(G.etcd, p->source, &si) && si.error[0] &&
        si.mod_revision == p->revision) {
        char msg[800];
        snprintf(msg, sizeof msg,
                 "written to etcd, but refused by this gateway (the fleet's "
                 "gateways refuse it too; put a good document or delete "
                 "the key): %s",
                 si.error);
        answer(p, 400, p->revision, msg);
    } else {
        answer(p, 200, p->revision,
               applied ? NULL
                       : "applied by etcd; this gateway's watch has "
                         "not delivered it yet");
    }
    uv_timer_stop(t);
    uv_close((uv_handle_t *)t, on_timer_closed);
}

static void on_written(void *data, int status, int64_t revision,
                       const char *msg) {
    pending *p = data;
    if (status != 200) {
        answer(p, status, revision, msg);
        free(p);
        return;
    }
    gw_log("%s: written to etcd at revision %lld", p->what,
           (long long)revision);
    p->revision = revision;
    uv_timer_init(G.main_loop, &p->timer);
    p->timer.data = p;
    p->deadline = uv_now(G.main_loop) + 2000;
    uv_timer_start(&p->timer, on_applied_check, 0, 2);
}

static pending *pending_new(httpd_conn *c, int ok_status, const char *what) {
    pending *p = calloc(1, sizeof *p);
    if (p) {
        p->c = c;
        p->ok_status = ok_status;
        gw_copy_str(p->what, sizeof p->what, what);
    }
    return p;
}

/* The document of `source` from the live routes, with `route` (a parsed
 * route object) in place of, or added after, the route of its id, or
 * without route `drop`. A malloc'd JSON array; NULL: out of memory. */
static char *source_doc(const char *source, const cJSON *route,
                        const char *drop) {
    const cJSON *rid =
        route ? cJSON_GetObjectItemCaseSensitive(route, "id") : NULL;
    const char *id = cJSON_IsString(rid) ? rid->valuestring : drop;
    cJSON *doc = cJSON_CreateArray();
    bool placed = false;
    sy_snapshot *s = sy_router_acquire(G.router);
    size_t n = sy_snapshot_route_count(s);
    for (size_t i = 0; doc && i < n; i++) {
        const sy_route *r = sy_snapshot_route_at(s, i);
        const char *src = NULL;
        sy_snapshot_find_route(s, sy_route_id(r), &src);
        if (!src || strcmp(src, source) != 0)
            continue;
        cJSON *item;
        if (id && strcmp(sy_route_id(r), id) == 0) {
            if (!route)
                continue; /* dropped */
            item = cJSON_Duplicate(route, true);
            placed = true;
        } else {
            const char *canon = sy_route_canonical(r);
            item = canon ? cJSON_Parse(canon) : NULL;
        }
        if (!item) {
            cJSON_Delete(doc);
            doc = NULL;
        } else {
            cJSON_AddItemToArray(doc, item);
        }
    }
    sy_snapshot_release(s);
    if (doc && route && !placed)
        cJSON_AddItemToArray(doc, cJSON_Duplicate(route, true));
    char *t = doc ? cJSON_PrintUnformatted(doc) : NULL;
    cJSON_Delete(doc);
    return t;
}

/* Check a document as the router would take it (the syntax and every
 * route; ids used by other sources too). */
static int check_doc(const char *source, const char *json, size_t len,
                     sy_error *err) {
    sy_document *d = NULL;
    sy_parse_options po = SY_PARSE_OPTIONS_INIT; /* as the router parses */
    po.registry = gw_registry();
    po.host_runs = sy_host_profile("gateway");
    int rc = sy_document_parse(json, len, &po, &d, err);
    sy_snapshot *s = sy_router_acquire(G.router);
    size_t n = rc ? 0 : sy_document_route_count(d);
    for (size_t i = 0; i < n && !rc; i++) {
        const char *id = sy_route_id(sy_document_route(d, i));
        const char *src = NULL;
        if (sy_snapshot_find_route(s, id, &src) && src &&
            strcmp(src, source) != 0) {
            memset(err, 0, sizeof *err);
            err->code = rc = SY_EDUPLICATE;
            snprintf(err->path, sizeof err->path, "routes[%zu].id", i);
            snprintf(err->message, sizeof err->message,
                     "route id %s is already used by source %s", id, src);
        }
    }
    sy_snapshot_release(s);
    sy_document_free(d);
    return rc;
}

/* Write `doc` (malloc'd, taken) as the source's key and answer later. */
static void write_doc(httpd_conn *c, const char *source, char *doc,
                      int ok_status, const char *what) {
    sy_error err;
    if (!doc) {
        gw_reply_error(c, 500, "out of memory");
        return;
    }
    if (check_doc(source, doc, strlen(doc), &err)) {
        free(doc);
        gw_reply_sy_error(c, err.code == SY_EDUPLICATE ? 409 : 400, &err);
        return;
    }
    pending *p = pending_new(c, ok_status, what);
    if (p) {
        gw_etcd_source_key(G.etcd, source, p->key, sizeof p->key);
        gw_copy_str(p->source, sizeof p->source, source);
    }
    if (!p ||
        gw_etcd_write_source(G.etcd, source, doc, strlen(doc), on_written, p)) {
        free(p);
        gw_reply_error(c, 500, "out of memory");
    }
    free(doc);
}

static bool route_in(const char *source, const char *id, cJSON **canon) {
    sy_snapshot *s = sy_router_acquire(G.router);
    const char *src = NULL;
    const sy_route *r = sy_snapshot_find_route(s, id, &src);
    bool in = r && src && strcmp(src, source) == 0;
    if (in && canon) {
        const char *t = sy_route_canonical(r);
        *canon = t ? cJSON_Parse(t) : NULL;
    }
    sy_snapshot_release(s);
    return in;
}

void gw_store_route(httpd_conn *c, const char *source, const char *id,
                    const char *json, size_t len, int ok_status,
                    const char *what) {
    cJSON *route = NULL;
    if (json) {
        route = cJSON_ParseWithLength(json, len);
        const cJSON *rid = cJSON_GetObjectItemCaseSensitive(route, "id");
        if (!cJSON_IsObject(route) || !cJSON_IsString(rid) ||
            strcmp(rid->valuestring, id) != 0) {
            cJSON_Delete(route);
            gw_reply_error(c, 400,
                           "the route must be a JSON object whose \"id\" "
                           "is the <id> of the URL");
            return;
        }
    } else if (!route_in(source, id, NULL)) {
        gw_reply_error(c, 404, "no such route in this source");
        return;
    }
    char *doc = source_doc(source, route, json ? NULL : id);
    cJSON_Delete(route);
    write_doc(c, source, doc, ok_status, what);
}

static void set_enabled(httpd_conn *c, const char *source, const char *id,
                        bool enable, const char *what) {
    cJSON *route = NULL;
    if (!route_in(source, id, &route) || !route) {
        cJSON_Delete(route);
        gw_reply_error(c, route ? 500 : 404, "no such route in this source");
        return;
    }
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(route, "metadata");
    if (!meta)
        meta = cJSON_AddObjectToObject(route, "metadata");
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "status");
    if (!enable)
        cJSON_AddStringToObject(meta, "status", "disabled");
    char *doc = source_doc(source, route, NULL);
    cJSON_Delete(route);
    write_doc(c, source, doc, 200, what);
}

static void put_instances(httpd_conn *c, const char *service, const char *body,
                          size_t len, const char *what) {
    /* checked as the router takes it: staged into a set never committed */
    sy_change_set *cs = NULL;
    sy_error err;
    int rc = sy_change_set_new(G.router, &cs, &err);
    if (!rc)
        rc = gw_instances_stage(cs, body, len, service, &err);
    sy_change_set_free(cs);
    if (rc) {
        gw_reply_sy_error(c, rc == SY_ENOMEM ? 500 : 400, &err);
        return;
    }
    cJSON *list = cJSON_ParseWithLength(body, len);
    pending *p = pending_new(c, 200, what);
    char msg[256] = "out of memory";
    if (p)
        snprintf(p->key, sizeof p->key, "instances/%s/", service);
    if (!p || !list ||
        gw_etcd_write_instances(G.etcd, service, list, on_written, p, msg,
                                sizeof msg)) {
        free(p);
        gw_reply_error(c, strcmp(msg, "out of memory") ? 400 : 500, msg);
    }
    cJSON_Delete(list);
}

bool gw_store_admin(httpd_conn *c, const char *method, char *const *seg, int ns,
                    const char *body, size_t len) {
    if (!G.etcd)
        return false;
    /* a file's source or service stays the file's: with
     * --admin-overrides-files its override is kept here, not in etcd */
    bool inst = strcmp(seg[0], "instances") == 0;
    if (ns >= 2 &&
        (inst ? gw_config_service_file(seg[1]) : gw_config_source_file(seg[1])))
        return false;
    char what[256];
    bool del = strcmp(method, "DELETE") == 0;
    if (inst && ns == 2) {
        snprintf(what, sizeof what, "admin: instances of %s", seg[1]);
        put_instances(c, seg[1], body, len, what);
    } else if (strcmp(seg[0], "routes") == 0 && ns == 2) {
        snprintf(what, sizeof what, "admin: document for %s", seg[1]);
        char *doc = malloc(len + 1);
        if (doc) {
            memcpy(doc, body, len);
            doc[len] = 0;
        }
        write_doc(c, seg[1], doc, 200, what);
    } else if (strcmp(seg[0], "routes") == 0 && ns == 3) {
        snprintf(what, sizeof what, "admin: %s %s/%s",
                 del ? "remove" : "upsert", seg[1], seg[2]);
        gw_store_route(c, seg[1], seg[2], del ? NULL : body, len, 200, what);
    } else if (strcmp(seg[0], "routes") == 0 && ns == 4) {
        snprintf(what, sizeof what, "admin: %s %s/%s", seg[3], seg[1], seg[2]);
        set_enabled(c, seg[1], seg[2], strcmp(seg[3], "enable") == 0, what);
    } else {
        gw_reply_error(c, 409,
                       "with --etcd the routes live in etcd: roll back there "
                       "(put the older document), every gateway follows");
    }
    return true;
}
