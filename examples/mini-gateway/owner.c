/*
 * owner.c - who may change what, so that no admin edit is silently
 * undone. A route source read from a file, or a service the instances
 * file names, is the file's: the next change of the file would replace
 * what the admin API did. So such a change is refused (409, naming the
 * file), unless the operator chose --admin-overrides-files: then the
 * admin change is kept as an override, staged again on top of the file's
 * content after every read of the file (in the same change set: one
 * publish), and listed in /status under "overrides". Also the one path
 * for the actuator's route writes (gw_admin_change_route). Main thread
 * only.
 */
#define _DEFAULT_SOURCE
#include "gw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum ov_kind {
    OV_DOCUMENT, /* PUT /routes/<source> */
    OV_UPSERT,   /* PUT /routes/<source>/<id> */
    OV_REMOVE,   /* DELETE /routes/<source>/<id> */
    OV_ENABLE,   /* POST /routes/<source>/<id>/enable */
    OV_DISABLE,  /* POST /routes/<source>/<id>/disable */
    OV_INSTANCES, /* PUT /instances/<service> */
    OV_ROLLBACK   /* POST /rollback/<source>: the version rolled back to */
} ov_kind;

static const char *const kind_names[] = {
    "document", "upsert", "remove", "enable", "disable", "instances",
    "rollback"};

typedef struct override {
    ov_kind kind;
    char *name; /* the source, or the service for OV_INSTANCES */
    char *id;   /* the route; NULL for a document or instances */
    char *body; /* JSON for document, upsert, instances; the version for
                   a rollback */
    size_t len;
    int64_t at_ms; /* when the admin made it (wall clock) */
} override;

static override *ovs;
static size_t nov, cap_ov;

int gw_owner_check(const char *source, const char *service, char *msg,
                   size_t cap) {
    const char *file = source ? gw_config_source_file(source)
                              : service ? gw_config_service_file(service)
                                        : NULL;
    if (!file || G.cfg.admin_overrides_files)
        return 0;
    snprintf(msg, cap,
             "%s %s comes from the file %s: the next change of the file "
             "would undo this; change the file (or start with "
             "--admin-overrides-files)",
             source ? "source" : "service", source ? source : service, file);
    return 409;
}

static void ov_free(override *o) {
    free(o->name);
    free(o->id);
    free(o->body);
}

/* Drop the overrides that a new one of `kind` on (name, id) supersedes. */
static void supersede(ov_kind kind, const char *name, const char *id) {
    size_t k = 0;
    for (size_t i = 0; i < nov; i++) {
        override *o = &ovs[i];
        bool same_name = strcmp(o->name, name) == 0 &&
                         (kind == OV_INSTANCES) == (o->kind == OV_INSTANCES);
        bool state = o->kind == OV_ENABLE || o->kind == OV_DISABLE;
        bool gone =
            same_name &&
            (kind == OV_DOCUMENT || kind == OV_INSTANCES ||
             kind == OV_ROLLBACK ||
             (o->id && id && strcmp(o->id, id) == 0 &&
              (kind == OV_ENABLE || kind == OV_DISABLE) == state));
        if (gone)
            ov_free(o);
        else
            ovs[k++] = *o;
    }
    nov = k;
}

/* The version of `source` now live ("" when none). */
static void live_version(const char *source, char *out, size_t cap) {
    out[0] = 0;
    size_t n = sy_router_source_count(G.router);
    for (size_t i = 0; i < n; i++) {
        sy_source_status st;
        sy_error err;
        if (!sy_router_source_status(G.router, i, &st, &err) &&
            strcmp(st.name, source) == 0)
            gw_copy_str(out, cap, st.version);
    }
}

void gw_overrides_note(const char *method, char *const *seg, int ns,
                       const char *body, size_t len) {
    if (!G.cfg.admin_overrides_files || ns < 2)
        return;
    char version[128];
    if (strcmp(seg[0], "rollback") == 0) { /* kept as the version now live */
        live_version(seg[1], version, sizeof version);
        body = version;
        len = strlen(version);
    }
    bool inst = strcmp(seg[0], "instances") == 0;
    if (!(inst ? gw_config_service_file(seg[1])
               : gw_config_source_file(seg[1])))
        return; /* not a file's: nothing would undo it */
    ov_kind kind;
    if (inst)
        kind = OV_INSTANCES;
    else if (strcmp(seg[0], "rollback") == 0)
        kind = OV_ROLLBACK;
    else if (ns == 2)
        kind = OV_DOCUMENT;
    else if (ns == 3)
        kind = strcmp(method, "DELETE") == 0 ? OV_REMOVE : OV_UPSERT;
    else
        kind = strcmp(seg[3], "enable") == 0 ? OV_ENABLE : OV_DISABLE;
    const char *id = ns >= 3 && !inst && kind != OV_ROLLBACK ? seg[2] : NULL;
    supersede(kind, seg[1], id);
    if (nov == cap_ov) {
        size_t nc = cap_ov ? cap_ov * 2 : 8;
        override *n = realloc(ovs, nc * sizeof *n);
        if (!n) {
            gw_log("out of memory: the override of %s is not kept", seg[1]);
            return;
        }
        ovs = n;
        cap_ov = nc;
    }
    bool has_body = kind != OV_REMOVE && kind != OV_ENABLE &&
                    kind != OV_DISABLE;
    override o = {kind, strdup(seg[1]), id ? strdup(id) : NULL,
                  has_body ? malloc(len + 1) : NULL, len,
                  0};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    o.at_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    if (!o.name || (id && !o.id) || (has_body && !o.body)) {
        ov_free(&o);
        gw_log("out of memory: the override of %s is not kept", seg[1]);
        return;
    }
    if (has_body) {
        memcpy(o.body, body, len);
        o.body[len] = 0;
    }
    ovs[nov++] = o;
}

int gw_overrides_stage(sy_change_set *cs, const char *source, sy_error *err) {
    for (size_t i = 0; i < nov; i++) {
        const override *o = &ovs[i];
        if (source ? o->kind == OV_INSTANCES || strcmp(o->name, source) != 0
                   : o->kind != OV_INSTANCES)
            continue;
        int rc = 0;
        switch (o->kind) {
        case OV_DOCUMENT:
            rc = sy_change_set_apply(cs, o->name, o->body, o->len, err);
            break;
        case OV_UPSERT:
            rc = sy_change_set_upsert_route(cs, o->name, o->body, o->len, err);
            break;
        case OV_REMOVE:
            rc = sy_change_set_remove_route(cs, o->id, err);
            break;
        case OV_ENABLE:
        case OV_DISABLE:
            rc = sy_change_set_set_route_enabled(cs, o->id,
                                                 o->kind == OV_ENABLE, err);
            break;
        case OV_INSTANCES:
            rc = gw_instances_stage(cs, o->body, o->len, o->name, err);
            break;
        case OV_ROLLBACK:
            rc = sy_change_set_rollback(cs, o->name, o->body, err);
            if (rc == SY_ENOTFOUND) { /* out of the history by now */
                gw_log("override: %s's version %s is no longer in its "
                       "history; the file's content serves",
                       o->name, o->body);
                rc = 0;
            }
            break;
        }
        if (rc == SY_ENOTFOUND && o->id)
            rc = 0; /* the file dropped the route: nothing to remove */
        if (rc)
            return rc;
    }
    return 0;
}

void gw_overrides_json(gw_buf *b) {
    gw_buf_adds(b, ",\"overrides\":[");
    for (size_t i = 0; i < nov; i++) {
        const override *o = &ovs[i];
        bool inst = o->kind == OV_INSTANCES;
        const char *file = inst ? gw_config_service_file(o->name)
                                : gw_config_source_file(o->name);
        gw_buf_printf(b, "%s{\"%s\":", i ? "," : "",
                      inst ? "service" : "source");
        gw_buf_json_str(b, o->name, strlen(o->name));
        gw_buf_adds(b, ",\"route\":");
        if (o->id)
            gw_buf_json_str(b, o->id, strlen(o->id));
        else
            gw_buf_adds(b, "null");
        gw_buf_adds(b, ",\"file\":");
        gw_buf_json_str(b, file ? file : "", file ? strlen(file) : 0);
        gw_buf_printf(b, ",\"change\":\"%s\",\"at_ms\":%lld}",
                      kind_names[o->kind], (long long)o->at_ms);
    }
    gw_buf_adds(b, "]");
}

int gw_admin_change_route(const char *source, const char *id,
                          const char *json, size_t len, const char *what,
                          sy_error *err) {
    int rc = sy_router_add_source(G.router, source, err);
    if (rc && rc != SY_EEXIST)
        return rc;
    sy_change_set *cs;
    if ((rc = sy_change_set_new(G.router, &cs, err)))
        return rc;
    rc = json ? sy_change_set_upsert_route(cs, source, json, len, err)
              : sy_change_set_remove_route(cs, id, err);
    if (!rc)
        rc = gw_commit(cs, what, err);
    sy_change_set_free(cs);
    return rc;
}
