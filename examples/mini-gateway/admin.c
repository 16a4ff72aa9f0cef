/*
 * admin.c - the admin HTTP API on its own port (loopback by default,
 * optional bearer token), on the main thread's loop:
 *
 *   GET    /status                      fingerprint, generation, sources
 *   GET    /routes                      live routes in rank order
 *   PUT    /routes/<source>             a whole route document
 *   PUT    /routes/<source>/<id>        one route (upsert)
 *   DELETE /routes/<source>/<id>        remove one route
 *   POST   /routes/<source>/<id>/disable | /enable
 *   PUT    /instances/<service>         a JSON array of instances
 *   POST   /rollback/<source>[?version=V]
 *   GET    /report                      the last apply report
 *   GET    /fingerprint                 the live snapshot's fingerprint
 *   GET    /metrics                     Prometheus text
 *   GET    /  /explain  /shadowed  /changes  /instances,
 *   PUT    /routes/<source>?dry_run=1
 *                                       the operator's (admin_ops.c)
 *   ...    /actuator/gateway/...        SCG's actuator API (actuator.c)
 *
 * A change to a source or service a file owns is refused with 409 naming
 * the file, or kept as an override with --admin-overrides-files (owner.c).
 * With --state FILE every accepted change is saved before the answer and
 * replayed at the next start (state.c).
 * With --etcd, route and instance changes are written through to etcd
 * (store.c) and every gateway on it applies them.
 * Every change is one change set (one publish); a rejected one answers 400
 * with the located error and changes nothing.
 */
#define _DEFAULT_SOURCE
#include "gw.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#ifdef GW_HAVE_ETCD
#include "etcd_source.h"
#endif
#include <stdlib.h>
#include <string.h>

static httpd *admin;

/* ---- the admin port's answers (gw.h; every admin file answers so) ---- */

/* Every JSON answer passes here: the bytes it echoes (a request's, a
 * route's, an error quoting either) that are not well-formed UTF-8 are
 * written \ufffd, as the access log writes them (gw_json_text_utf8). */
void gw_reply_json(httpd_conn *c, int status, const gw_buf *b) {
    static const char oom[] = "{\"error\":\"out of memory\"}\n";
    gw_buf fixed = {0};
    if (!b->failed && b->len && gw_json_text_utf8(&fixed, b->p, b->len))
        b = &fixed;
    if (b->failed) /* the answer could not be built (gw.h) */
        httpd_respond(c, 500, "application/json", NULL, oom, sizeof oom - 1);
    else
        httpd_respond(c, status, "application/json", NULL, b->p ? b->p : "",
                      b->len);
    gw_buf_free(&fixed);
}

void gw_reply_cjson(httpd_conn *c, int status, cJSON *j) {
    char *t = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    gw_buf b = {.p = t, .len = t ? strlen(t) : 0, .failed = !t};
    gw_reply_json(c, status, &b);
    free(t);
}

void gw_reply_error(httpd_conn *c, int status, const char *msg) {
    gw_buf b = {0};
    gw_buf_adds(&b, "{\"error\":");
    gw_buf_json_str(&b, msg, strlen(msg));
    gw_buf_adds(&b, "}\n");
    gw_reply_json(c, status, &b);
    gw_buf_free(&b);
}

void gw_reply_sy_error(httpd_conn *c, int status, const sy_error *e) {
    gw_buf b = {0};
    gw_buf_adds(&b, "{\"error\":");
    gw_error_json(&b, e);
    gw_buf_adds(&b, "}\n");
    gw_reply_json(c, status, &b);
    gw_buf_free(&b);
}

static int status_for(int code) {
    switch (code) {
    case SY_ENOTFOUND: return 404;
    case SY_ENOMEM: return 500;
    case SY_EREENTRANT: return 500;
    default: return 400;
    }
}

static void hex64(char out[17], uint64_t v) {
    snprintf(out, 17, "%016llx", (unsigned long long)v);
}

static void answer_status(gw_admin_call *a) {
    httpd_conn *c = a->c;
    sy_metrics m;
    sy_router_metrics(G.router, &m);
    sy_snapshot *s = sy_router_acquire(G.router);
    char fp[17];
    hex64(fp, sy_snapshot_fingerprint(s));
    uint64_t gen = sy_snapshot_generation(s);
    size_t nroutes = sy_snapshot_route_count(s);
    sy_snapshot_release(s);
    gw_buf b = {0};
    gw_buf_printf(
        &b,
        "{\"fingerprint\":\"%s\",\"generation\":%llu,"
        "\"routes\":%zu,\"services\":%llu,\"instances\":%llu,"
        "\"publishes\":%llu,\"commits\":%llu,"
        "\"failed_commits\":%llu,\"instance_updates\":%llu,"
        "\"ejections\":%llu,\"active_connections\":%ld,"
        "\"active_requests\":%ld,\"sources\":[",
        fp, (unsigned long long)gen, nroutes, (unsigned long long)m.services,
        (unsigned long long)m.instances, (unsigned long long)m.publishes,
        (unsigned long long)m.commits, (unsigned long long)m.failed_commits,
        (unsigned long long)m.instance_updates, (unsigned long long)m.ejections,
        atomic_load(&G.active_clients), gw_active_requests());
    size_t n = sy_router_source_count(G.router);
    for (size_t i = 0; i < n; i++) {
        sy_source_status st;
        sy_error err;
        if (sy_router_source_status(G.router, i, &st, &err))
            continue;
        char ck[17], sfp[17];
        hex64(ck, st.checksum);
        hex64(sfp, st.fingerprint);
        if (i)
            gw_buf_add(&b, ",", 1);
        gw_buf_adds(&b, "{\"name\":");
        gw_buf_json_str(&b, st.name, strlen(st.name));
        /* file, admin, state, etcd, demo */
        const char *from = gw_origin(st.name);
        gw_buf_adds(&b, ",\"origin\":");
        if (from)
            gw_buf_json_str(&b, from, strlen(from));
        else
            gw_buf_adds(&b, "null");
        gw_buf_adds(&b, ",\"version\":");
        if (st.applied)
            gw_buf_json_str(&b, st.version, strlen(st.version));
        else
            gw_buf_adds(&b, "null");
        gw_buf_printf(&b,
                      ",\"checksum\":\"%s\",\"fingerprint\":\"%s\","
                      "\"applied\":%s,\"routes\":%zu,\"last_apply_ms\":%lld,"
                      "\"applied_count\":%llu,\"skipped_count\":%llu,"
                      "\"failed_count\":%llu,\"error\":",
                      ck, sfp, st.applied ? "true" : "false", st.routes,
                      (long long)st.last_apply_ms,
                      (unsigned long long)st.applied_count,
                      (unsigned long long)st.skipped_count,
                      (unsigned long long)st.failed_count);
        /* a file refused before the router saw it (or left out of its
         * tick's commit) has its own error */
        const sy_error *fe = gw_config_source_error(st.name);
#ifdef GW_HAVE_ETCD
        gw_etcd_source_info ei; /* likewise a document from etcd */
        if (!fe && G.etcd && !gw_etcd_source_info_get(G.etcd, st.name, &ei) &&
            ei.refused.code)
            fe = &ei.refused;
#endif
        if (fe)
            gw_error_json(&b, fe);
        else if (st.last_result != SY_OK)
            gw_error_json(&b, &st.last_error);
        else
            gw_buf_adds(&b, "null");
        gw_buf_add(&b, "}", 1);
    }
    gw_buf_adds(&b, "],\"files\":");
    gw_config_files_json(&b);
    gw_overrides_json(&b); /* admin changes kept over files (state.c) */
    gw_state_json(&b);     /* --state */
    if (G.cfg.redis) {     /* the limiter's Redis: AUTH and errors (redis.c) */
        gw_buf_adds(&b, ",\"redis\":");
        gw_redis_status_json(&b);
    }
#ifdef GW_HAVE_ETCD
    if (G.etcd) { /* the etcd source's own view (etcd_source.h) */
        char *e = gw_etcd_status_json(G.etcd);
        if (e) {
            gw_buf_adds(&b, ",\"etcd\":");
            gw_buf_adds(&b, e);
            free(e);
        }
    }
#endif
    gw_buf_adds(&b, "}\n");
    gw_reply_json(c, 200, &b);
    gw_buf_free(&b);
}

static void answer_routes(gw_admin_call *a) {
    httpd_conn *c = a->c;
    sy_snapshot *s = sy_router_acquire(G.router);
    gw_buf b = {0};
    gw_buf_printf(&b, "{\"generation\":%llu,\"routes\":[",
                  (unsigned long long)sy_snapshot_generation(s));
    size_t n = sy_snapshot_route_count(s);
    for (size_t i = 0; i < n; i++) {
        const sy_route *r = sy_snapshot_route_at(s, i);
        const char *src = NULL;
        sy_snapshot_find_route(s, sy_route_id(r), &src);
        if (i)
            gw_buf_add(&b, ",", 1);
        gw_buf_adds(&b, "{\"id\":");
        gw_buf_json_str(&b, sy_route_id(r), strlen(sy_route_id(r)));
        gw_buf_adds(&b, ",\"source\":");
        gw_buf_json_str(&b, src ? src : "", src ? strlen(src) : 0);
        gw_buf_adds(&b, ",\"uri\":");
        gw_buf_json_str(&b, sy_route_uri(r), strlen(sy_route_uri(r)));
        const char *def = sy_route_canonical(r); /* NULL: out of memory */
        gw_buf_printf(&b, ",\"order\":%d,\"disabled\":%s,\"definition\":%s}",
                      (int)sy_route_order(r),
                      sy_route_disabled(r) ? "true" : "false",
                      def ? def : "null");
    }
    sy_snapshot_release(s);
    gw_buf_adds(&b, "]}\n");
    gw_reply_json(c, 200, &b);
    gw_buf_free(&b);
}

static void answer_metrics(gw_admin_call *a) {
    httpd_conn *c = a->c;
    gw_buf b = {0};
    size_t need = 0;
    int rc = SY_ENOMEM;
    if (gw_buf_reserve(&b, 16384))
        rc = sy_router_metrics_text(G.router, b.p, b.cap, &need, NULL);
    if (rc == SY_ETOOSMALL && gw_buf_reserve(&b, need))
        rc = sy_router_metrics_text(G.router, b.p, b.cap, &need, NULL);
    b.len = rc == 0 ? need : 0;
    gw_metrics_text(&b);
#ifdef GW_HAVE_ETCD
    if (G.etcd) {
        size_t n = gw_etcd_metrics_text(G.etcd, NULL, 0);
        if (gw_buf_reserve(&b, n + 1)) {
            gw_etcd_metrics_text(G.etcd, b.p + b.len, n + 1);
            b.len += n;
        }
    }
#endif
    if (b.failed)
        gw_reply_error(c, 500, "out of memory");
    else
        httpd_respond(c, 200, "text/plain; version=0.0.4", NULL, b.p, b.len);
    gw_buf_free(&b);
}

/* Decode %XX in place. */
static void url_decode(char *s) {
    char *o = s;
    for (; *s; s++) {
        if (*s == '%' && s[1] && s[2]) {
            char hex[3] = {s[1], s[2], 0};
            char *end;
            long v = strtol(hex, &end, 16);
            if (!*end) {
                *o++ = (char)v;
                s += 2;
                continue;
            }
        }
        *o++ = *s;
    }
    *o = 0;
}

/* True when the live snapshot has route `id` from `source`. */
static bool route_in_source(const char *source, const char *id) {
    sy_snapshot *s = sy_router_acquire(G.router);
    const char *src = NULL;
    bool found = sy_snapshot_find_route(s, id, &src) != NULL && src &&
                 strcmp(src, source) == 0;
    sy_snapshot_release(s);
    return found;
}

static bool authorized(const httpd_req *r) {
    if (!G.cfg.admin_token)
        return true;
    size_t len;
    const char *v = httpd_header(r, "authorization", &len);
    size_t tl = strlen(G.cfg.admin_token);
    if (!v || len != tl + 7 || strncmp(v, "Bearer ", 7) != 0)
        return false;
    /* compare in constant time */
    unsigned diff = 0;
    for (size_t i = 0; i < tl; i++)
        diff |= (unsigned char)v[7 + i] ^ (unsigned char)G.cfg.admin_token[i];
    return diff == 0;
}

static void query_param(const char *q, const char *key, char *out, size_t cap) {
    out[0] = 0;
    size_t kl = strlen(key);
    for (const char *p = q; p && *p;) {
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            const char *v = p + kl + 1;
            size_t n = strcspn(v, "&");
            snprintf(out, cap, "%.*s", (int)n, v);
            url_decode(out);
            return;
        }
        p = strchr(p, '&');
        if (p)
            p++;
    }
}

/* ------------------------------------------------------------------ */
/* Endpoints                                                            */
/* ------------------------------------------------------------------ */

/* A reading endpoint answers by itself (gw_admin_answer, gw.h). */
typedef gw_admin_answer answer_fn;
/* A changing endpoint stages its change into cs and names it in what[cap]
 * (for the report and the log); 0, or SY_E* with err filled. The one
 * stage-and-commit helper (change) does the rest. */
typedef int (*stage_fn)(gw_admin_call *a, sy_change_set *cs, char *what,
                        size_t cap, sy_error *err);

/* What a changing endpoint needs before it stages. */
enum {
    NEEDS_SOURCE = 1, /* seg[1] is registered as a source when new */
    NEEDS_ROUTE = 2   /* seg[2] is a live route of source seg[1], else 404 */
};

typedef struct endpoint {
    unsigned methods; /* GW_M_*; GW_M_GET takes HEAD too */
    /* the path as segments joined by '/'; "*" is any one segment */
    const char *pattern;
    answer_fn answer; /* a reading endpoint, or */
    stage_fn stage;   /* a changing one */
    unsigned needs;   /* NEEDS_* for a changing one */
} endpoint;

static void answer_report(gw_admin_call *a) {
    if (G.last_report.len)
        gw_reply_json(a->c, 200, &G.last_report);
    else
        gw_reply_error(a->c, 404, "nothing applied yet");
}

static void answer_fingerprint(gw_admin_call *a) {
    sy_snapshot *s = sy_router_acquire(G.router);
    char fp[17], body[96];
    hex64(fp, sy_snapshot_fingerprint(s));
    int n = snprintf(body, sizeof body,
                     "{\"fingerprint\":\"%s\",\"generation\":%llu}\n", fp,
                     (unsigned long long)sy_snapshot_generation(s));
    sy_snapshot_release(s);
    httpd_respond(a->c, 200, "application/json", NULL, body, (size_t)n);
}

/* PUT /routes/<source>: a whole document for a source. */
static int stage_document(gw_admin_call *a, sy_change_set *cs, char *what,
                          size_t cap, sy_error *err) {
    snprintf(what, cap, "admin: document for %s", a->seg[1]);
    int rc = gw_document_check(a->body, a->len, false, err);
    return rc ? rc : sy_change_set_apply(cs, a->seg[1], a->body, a->len, err);
}

/* PUT /routes/<source>/<id>: one route; its "id" must be the URL's. */
static int stage_upsert(gw_admin_call *a, sy_change_set *cs, char *what,
                        size_t cap, sy_error *err) {
    cJSON *j = cJSON_ParseWithLength(a->body, a->len);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    bool same = cJSON_IsString(id) && strcmp(id->valuestring, a->seg[2]) == 0;
    cJSON_Delete(j);
    if (j && !same) {
        memset(err, 0, sizeof *err);
        err->code = SY_EINVAL;
        snprintf(err->path, sizeof err->path, "id");
        snprintf(err->message, sizeof err->message,
                 "the route's \"id\" must be the <id> of the URL");
        return SY_EINVAL;
    }
    snprintf(what, cap, "admin: upsert %s/%s", a->seg[1], a->seg[2]);
    int rc = gw_document_check(a->body, a->len, true, err);
    return rc ? rc
              : sy_change_set_upsert_route(cs, a->seg[1], a->body, a->len, err);
}

/* DELETE /routes/<source>/<id> */
static int stage_remove(gw_admin_call *a, sy_change_set *cs, char *what,
                        size_t cap, sy_error *err) {
    snprintf(what, cap, "admin: remove %s/%s", a->seg[1], a->seg[2]);
    return sy_change_set_remove_route(cs, a->seg[2], err);
}

/* POST /routes/<source>/<id>/disable and /enable */
static int stage_enabled(gw_admin_call *a, sy_change_set *cs, char *what,
                         size_t cap, sy_error *err) {
    snprintf(what, cap, "admin: %s %s/%s", a->seg[3], a->seg[1], a->seg[2]);
    return sy_change_set_set_route_enabled(
        cs, a->seg[2], strcmp(a->seg[3], "enable") == 0, err);
}

/* PUT /instances/<service>: a JSON array of instances. */
static int stage_instances(gw_admin_call *a, sy_change_set *cs, char *what,
                           size_t cap, sy_error *err) {
    snprintf(what, cap, "admin: instances of %s", a->seg[1]);
    return gw_instances_stage(cs, a->body, a->len, a->seg[1], err);
}

/* POST /rollback/<source>[?version=V] */
static int stage_rollback(gw_admin_call *a, sy_change_set *cs, char *what,
                          size_t cap, sy_error *err) {
    char ver[256];
    query_param(a->query, "version", ver, sizeof ver);
    snprintf(what, cap, "admin: rollback %s to %s", a->seg[1],
             ver[0] ? ver : "the previous version");
    return sy_change_set_rollback(cs, a->seg[1], ver[0] ? ver : NULL, err);
}

static const endpoint endpoints[] = {
    {GW_M_GET, "", gw_admin_console, NULL, 0},
    {GW_M_GET, "explain", gw_admin_explain, NULL, 0},
    {GW_M_GET, "shadowed", gw_admin_shadowed, NULL, 0},
    {GW_M_GET, "changes", gw_admin_changes, NULL, 0},
    {GW_M_GET, "instances", gw_admin_instances, NULL, 0},
    {GW_M_GET, "status", answer_status, NULL, 0},
    {GW_M_GET, "routes", answer_routes, NULL, 0},
    {GW_M_GET, "metrics", answer_metrics, NULL, 0},
    {GW_M_GET, "report", answer_report, NULL, 0},
    {GW_M_GET, "fingerprint", answer_fingerprint, NULL, 0},
    {GW_M_PUT, "routes/*", NULL, stage_document, NEEDS_SOURCE},
    {GW_M_PUT, "routes/*/*", NULL, stage_upsert, NEEDS_SOURCE},
    {GW_M_DELETE, "routes/*/*", NULL, stage_remove, NEEDS_ROUTE},
    {GW_M_POST | GW_M_PUT, "routes/*/*/disable", NULL, stage_enabled,
     NEEDS_ROUTE},
    {GW_M_POST | GW_M_PUT, "routes/*/*/enable", NULL, stage_enabled,
     NEEDS_ROUTE},
    {GW_M_PUT, "instances/*", NULL, stage_instances, 0},
    {GW_M_POST | GW_M_PUT, "rollback/*", NULL, stage_rollback, 0},
};

/* Reply with the located error of a change that was refused. */
static void reply_error(httpd_conn *c, int code, const sy_error *err) {
    gw_reply_sy_error(c, status_for(code), err);
}

/* Route ids the check added that another source of the live router
 * holds: SY_EDUPLICATE, as the live commit would say. */
static int added_ids_free(const sy_report *rep, const char *source,
                          sy_error *err) {
    size_t parts = sy_report_part_count(rep);
    sy_snapshot *s = sy_router_acquire(G.router);
    int rc = 0;
    for (size_t p = 0; !rc && p < (parts ? parts : 1); p++) {
        const sy_diff *d = sy_report_diff(parts ? sy_report_part(rep, p) : rep);
        size_t n = d ? sy_diff_added_count(d) : 0;
        for (size_t i = 0; !rc && i < n; i++) {
            const char *src = NULL, *id = sy_diff_added(d, i);
            if (sy_snapshot_find_route(s, id, &src) && src &&
                strcmp(src, source) != 0) {
                memset(err, 0, sizeof *err);
                err->code = rc = SY_EDUPLICATE;
                snprintf(err->path, sizeof err->path, "id");
                snprintf(err->message, sizeof err->message,
                         "route id '%s' is already defined by source '%s'", id,
                         src);
            }
        }
    }
    sy_snapshot_release(s);
    return rc;
}

int gw_try_new_source(const char *source,
                      int (*stage)(void *data, sy_change_set *cs,
                                   sy_error *err),
                      void *data, sy_error *err) {
    sy_router *r = NULL;
    sy_change_set *cs = NULL;
    sy_report *rep = NULL;
    int rc = gw_scratch_router(&r, err);
    if (!rc)
        rc = sy_router_add_source(r, source, err);
    if (!rc)
        rc = sy_change_set_new(r, &cs, err);
    if (!rc)
        rc = stage(data, cs, err);
    if (!rc)
        rc = sy_router_check(r, cs, &rep, err);
    if (!rc && rep)
        rc = added_ids_free(rep, source, err);
    sy_report_free(rep);
    sy_change_set_free(cs);
    sy_router_free(r);
    return rc;
}

typedef struct scratch_call {
    gw_admin_call *a;
    const endpoint *ep;
} scratch_call;

static int stage_call(void *data, sy_change_set *cs, sy_error *err) {
    scratch_call *s = data;
    char what[512];
    return s->ep->stage(s->a, cs, what, sizeof what, err);
}

/* The one stage-and-commit helper: ep's change saved first when it is
 * kept (state.c: with --state, durably; a change that cannot be saved is
 * refused with 500 and nothing changed), then staged into a new change
 * set and committed as one publish (a new source registered first, once
 * the change passed on a scratch router). Answered: ok_status with the
 * report (report) or an empty body, or the located error with nothing
 * changed. The admin API's changes and the actuator's come here. */
static void stage_and_commit(gw_admin_call *a, const endpoint *ep,
                             int ok_status, bool report) {
    sy_error err;
    bool new_source = ep->needs & NEEDS_SOURCE && !gw_source_exists(a->seg[1]);
    if (new_source) {
        scratch_call sc = {a, ep};
        int rc = gw_try_new_source(a->seg[1], stage_call, &sc, &err);
        if (rc) {
            reply_error(a->c, rc, &err);
            return;
        }
    }
    /* with --state, saved before it is committed (state.c) */
    char msg[768], m[1024];
    if (gw_state_begin(a->method, a->seg, a->ns, a->body, a->len, msg,
                       sizeof msg)) {
        snprintf(m, sizeof m, "the change cannot be kept, nothing changed: %s",
                 msg);
        gw_reply_error(a->c, 500, m);
        return;
    }
    sy_change_set *cs = NULL;
    int rc = new_source ? sy_router_add_source(G.router, a->seg[1], &err) : 0;
    if (!rc)
        rc = sy_change_set_new(G.router, &cs, &err);
    char what[512];
    if (!rc)
        rc = ep->stage(a, cs, what, sizeof what, &err);
    if (a->what)
        gw_copy_str(what, sizeof what, a->what);
    if (!rc)
        rc = gw_commit(cs, what, &err);
    sy_change_set_free(cs);
    bool inst = strcmp(a->seg[0], "instances") == 0;
    int kept = gw_state_end(rc == 0, inst ? NULL : a->seg[1], msg, sizeof msg);
    if (rc) {
        reply_error(a->c, rc, &err);
    } else if (kept) { /* a rollback that could not be saved (state.c) */
        gw_reply_error(a->c, 500, msg);
    } else if (!report) {
        /* a route created (the actuator's 201): where it is, as SCG's
         * ResponseEntity.created("/routes/" + id) says; an id with bytes
         * a header cannot carry goes without */
        char loc[320] = "";
        bool plain = ok_status == 201 && a->ns == 3 && strlen(a->seg[2]) < 256;
        for (const char *p = plain ? a->seg[2] : ""; *p; p++)
            plain &= *p > 0x20 && *p < 0x7f;
        if (plain)
            snprintf(loc, sizeof loc, "Location: /routes/%s\r\n", a->seg[2]);
        httpd_respond(a->c, ok_status, "application/json", plain ? loc : NULL,
                      "", 0);
    } else if (G.last_report.failed) { /* applied; only its report lost */
        static const char done[] = "{\"ok\":true,\"report\":null}\n";
        httpd_respond(a->c, ok_status, "application/json", NULL, done,
                      sizeof done - 1);
    } else {
        gw_reply_json(a->c, ok_status, &G.last_report);
    }
}

/* A query parameter the change does not read (a misspelt ?version= of a
 * rollback would roll back to the previous version), or ?version= given
 * twice: answered 400, nothing changed. Dry-run keys are gw_dry_run's. */
static bool unread_query(gw_admin_call *a, const endpoint *ep) {
    bool rollback = ep->stage == stage_rollback, version = false;
    for (const char *p = a->query; p && *p;) {
        size_t n = strcspn(p, "&"), k = strcspn(p, "=&");
        bool ok = n == 0 || gw_dry_run_key(p, n),
             ver = rollback && k == 7 && strncmp(p, "version", 7) == 0;
        if (ver) {
            ok = !version;
            version = true;
        }
        if (!ok) {
            char msg[320];
            snprintf(msg, sizeof msg,
                     "query parameter '%.*s'%s: this change takes %s: "
                     "nothing changed",
                     (int)(k < 64 ? k : 64), p,
                     ver ? " given twice" : " is not read",
                     rollback ? "?version=V and ?dry_run" : "?dry_run only");
            gw_reply_error(a->c, 400, msg);
            return true;
        }
        p = p[n] ? p + n + 1 : NULL;
    }
    return false;
}

/* An admin API change: what it needs asked first (a dry run changes
 * nothing; a file's source is refused; with --etcd it is written
 * through), then the one stage-and-commit helper. */
static void change(gw_admin_call *a, const endpoint *ep) {
    if (unread_query(a, ep))
        return;
    int dry = gw_dry_run(a->query);
    if (dry < 0 || (dry && ep->stage != stage_document)) {
        gw_reply_error(a->c, 400,
                       dry == -2 ? "query parameter 'dry_run' given twice: "
                                   "nothing changed"
                       : dry < 0 ? "dry run: write ?dry_run=1 (or true; 0 or "
                                   "false for none): nothing changed"
                                 : "a dry run is answered for PUT "
                                   "/routes/<source> only: nothing changed");
        return;
    }
    if (dry) {
        gw_admin_dry_run(a->c, a->seg[1], a->body, a->len);
        return; /* changes nothing: no owner or etcd question */
    }
    /* a file's source or service: refused, naming the file (owner.c) */
    char msg[768];
    bool inst = strcmp(a->seg[0], "instances") == 0;
    int refuse = gw_owner_check(inst ? NULL : a->seg[1],
                                inst ? a->seg[1] : NULL, msg, sizeof msg);
    if (refuse) {
        gw_reply_error(a->c, refuse, msg);
        return;
    }
    /* --etcd: written through to etcd, answered once it accepted (store.c) */
    if (gw_store_admin(a->c, a->method, a->seg, a->ns, a->body, a->len))
        return;
    if (ep->needs & NEEDS_ROUTE && !route_in_source(a->seg[1], a->seg[2])) {
        gw_reply_error(a->c, 404, "no such route in this source");
        return;
    }
    stage_and_commit(a, ep, 200, true);
}

void gw_admin_route_change(httpd_conn *c, const char *source, const char *id,
                           const char *json, size_t len, const char *what,
                           int ok_status) {
    static const endpoint ep_upsert = {GW_M_PUT, "routes/*/*", NULL,
                                       stage_upsert, NEEDS_SOURCE};
    static const endpoint ep_remove = {GW_M_DELETE, "routes/*/*", NULL,
                                       stage_remove, NEEDS_ROUTE};
    static const endpoint ep_document = {GW_M_PUT, "routes/*", NULL,
                                         stage_document, NEEDS_SOURCE};
    gw_admin_call a = {.c = c,
                       .method = json ? "PUT" : "DELETE",
                       .body = json,
                       .len = len,
                       .seg = {"routes", (char *)source, (char *)id},
                       .ns = id ? 3 : 2,
                       .what = what};
    stage_and_commit(&a,
                     !id    ? &ep_document
                     : json ? &ep_upsert
                            : &ep_remove,
                     ok_status, false);
}

/* A reading endpoint but /explain (and the console's page, which holds
 * no data) takes no query parameter: one is answered 400 naming it. Taken
 * before as not written: /shadowed?source=a answered every source's,
 * /changes?limit=1 all of them. */
static bool reads_no_query(gw_admin_call *a, const endpoint *ep) {
    if (!a->query || !*a->query || ep->answer == gw_admin_explain ||
        ep->answer == gw_admin_console)
        return false;
    const char *p = a->query + strspn(a->query, "&");
    if (!*p)
        return false;
    size_t k = strcspn(p, "=&");
    char msg[200];
    snprintf(msg, sizeof msg,
             "query parameter '%.*s' is not read: GET /%s takes none",
             (int)(k < 64 ? k : 64), p, ep->pattern);
    gw_reply_error(a->c, 400, msg);
    return true;
}

/* Does the call's path fit the pattern? */
static bool path_fits(const gw_admin_call *a, const char *pattern) {
    int i = 0;
    for (const char *p = pattern; *p; i++) {
        size_t n = strcspn(p, "/");
        if (i >= a->ns)
            return false;
        if (!(n == 1 && *p == '*') &&
            (strlen(a->seg[i]) != n || strncmp(a->seg[i], p, n) != 0))
            return false;
        p += n;
        p += *p == '/';
    }
    return i == a->ns;
}

/* Does the call fit a row of methods and pattern? *path_known: set when
 * its path does. */
static bool row_fits(const gw_admin_call *a, unsigned m, unsigned methods,
                     const char *pattern, bool *path_known) {
    if (!path_fits(a, pattern))
        return false;
    *path_known = true;
    return (methods & m) != 0;
}

static unsigned method_bit(const char *m) {
    if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0)
        return GW_M_GET;
    if (strcmp(m, "PUT") == 0)
        return GW_M_PUT;
    if (strcmp(m, "POST") == 0)
        return GW_M_POST;
    return strcmp(m, "DELETE") == 0 ? GW_M_DELETE : 0;
}

static void handle(httpd_conn *c, httpd_req *r, void *data) {
    (void)data;
    /* the console page holds no data: it asks for the token itself */
    bool console =
        strcmp(r->path, "/") == 0 && method_bit(r->method) == GW_M_GET;
    if (!console && !authorized(r)) {
        httpd_respond(c, 401, "application/json",
                      "WWW-Authenticate: Bearer\r\n",
                      "{\"error\":\"unauthorized\"}\n", 25);
        return;
    }
    /* split the path into at most 5 decoded segments */
    char path[2048];
    snprintf(path, sizeof path, "%s", r->path);
    gw_admin_call a = {.c = c,
                       .r = r,
                       .method = r->method,
                       .query = r->query,
                       .body = r->body,
                       .len = r->body_len};
    char *save = NULL;
    for (char *s = strtok_r(path, "/", &save); s && a.ns < 5;
         s = strtok_r(NULL, "/", &save)) {
        url_decode(s);
        a.seg[a.ns++] = s;
    }
    unsigned m = method_bit(r->method);
    bool path_known = false;
    for (size_t i = 0; i < sizeof endpoints / sizeof *endpoints; i++) {
        const endpoint *ep = &endpoints[i];
        if (!row_fits(&a, m, ep->methods, ep->pattern, &path_known))
            continue;
        if (ep->answer && reads_no_query(&a, ep))
            return;
        if (ep->answer)
            ep->answer(&a);
        else
            change(&a, ep);
        return;
    }
    /* /actuator/gateway/...: Spring Cloud Gateway's (actuator.c) */
    for (size_t i = 0; i < gw_actuator_page_count; i++) {
        const gw_admin_page *pg = &gw_actuator_pages[i];
        if (row_fits(&a, m, pg->methods, pg->pattern, &path_known)) {
            /* a change reads no query: ?dry_run=1 was saved or deleted
             * for real, ?metadata= refreshed everything */
            if (m != GW_M_GET && a.query && *a.query) {
                size_t k = strcspn(a.query, "=&");
                char msg[200];
                snprintf(msg, sizeof msg,
                         "query parameter '%.*s' is not read: the "
                         "actuator's changes take none (a dry run is PUT "
                         "/routes/<source>?dry_run=1): nothing changed",
                         (int)(k < 64 ? k : 64), a.query);
                gw_reply_error(c, 400, msg);
                return;
            }
            pg->answer(&a);
            return;
        }
    }
    if (path_known)
        gw_reply_error(c, 405, "method not allowed here");
    else
        gw_reply_error(c, 404, "no such admin endpoint");
}

int gw_admin_start(uv_loop_t *loop) {
    if (G.cfg.admin_port <= 0)
        return 0;
    admin = httpd_new(loop, G.cfg.admin_host, G.cfg.admin_port, handle, NULL,
                      64u << 20); /* route documents up to 64 MiB */
    return admin ? 0 : -1;
}

void gw_admin_close(void) {
    httpd_close(admin);
    admin = NULL;
}
