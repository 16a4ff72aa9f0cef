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
 *
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

static void reply_json(httpd_conn *c, int status, const gw_buf *b) {
    httpd_respond(c, status, "application/json", NULL, b->p ? b->p : "",
                  b->len);
}

static void reply_msg(httpd_conn *c, int status, const char *msg) {
    gw_buf b = {0};
    gw_buf_adds(&b, "{\"error\":");
    gw_buf_json_str(&b, msg, strlen(msg));
    gw_buf_adds(&b, "}\n");
    reply_json(c, status, &b);
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

/* Commit cs and answer: 200 with the report, or the located error. */
static void commit_reply(httpd_conn *c, sy_change_set *cs, const char *what) {
    sy_error err;
    int rc = gw_commit(cs, what, &err);
    sy_change_set_free(cs);
    if (rc) {
        gw_buf b = {0};
        gw_buf_adds(&b, "{\"error\":");
        gw_error_json(&b, &err);
        gw_buf_adds(&b, "}\n");
        reply_json(c, status_for(rc), &b);
        gw_buf_free(&b);
        return;
    }
    reply_json(c, 200, &G.last_report);
}

static void staged_fail(httpd_conn *c, sy_change_set *cs, const sy_error *e) {
    sy_change_set_free(cs);
    gw_buf b = {0};
    gw_buf_adds(&b, "{\"error\":");
    gw_error_json(&b, e);
    gw_buf_adds(&b, "}\n");
    reply_json(c, status_for(e->code), &b);
    gw_buf_free(&b);
}

static void hex64(char out[17], uint64_t v) {
    snprintf(out, 17, "%016llx", (unsigned long long)v);
}

static void get_status(httpd_conn *c) {
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
        atomic_load(&G.active_clients), atomic_load(&G.active_requests));
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
        if (st.last_result != SY_OK)
            gw_error_json(&b, &st.last_error);
        else
            gw_buf_adds(&b, "null");
        gw_buf_add(&b, "}", 1);
    }
    gw_buf_adds(&b, "]");
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
    reply_json(c, 200, &b);
    gw_buf_free(&b);
}

static void get_routes(httpd_conn *c) {
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
    reply_json(c, 200, &b);
    gw_buf_free(&b);
}

static void get_metrics(httpd_conn *c) {
    gw_buf b = {0};
    size_t need = 0;
    gw_buf_reserve(&b, 16384);
    int rc = sy_router_metrics_text(G.router, b.p, b.cap, &need, NULL);
    if (rc == SY_ETOOSMALL) {
        gw_buf_reserve(&b, need);
        rc = sy_router_metrics_text(G.router, b.p, b.cap, &need, NULL);
    }
    b.len = rc == 0 ? need : 0;
    gw_metrics_text(&b);
#ifdef GW_HAVE_ETCD
    if (G.etcd) {
        size_t n = gw_etcd_metrics_text(G.etcd, NULL, 0);
        gw_buf_reserve(&b, n + 1);
        gw_etcd_metrics_text(G.etcd, b.p + b.len, n + 1);
        b.len += n;
    }
#endif
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

static void handle(httpd_conn *c, httpd_req *r, void *data) {
    (void)data;
    if (!authorized(r)) {
        httpd_respond(c, 401, "application/json",
                      "WWW-Authenticate: Bearer\r\n",
                      "{\"error\":\"unauthorized\"}\n", 25);
        return;
    }
    /* split the path into at most 4 decoded segments */
    char path[2048];
    snprintf(path, sizeof path, "%s", r->path);
    char *seg[5] = {0};
    int ns = 0;
    char *save = NULL;
    for (char *s = strtok_r(path, "/", &save); s && ns < 5;
         s = strtok_r(NULL, "/", &save)) {
        url_decode(s);
        seg[ns++] = s;
    }
    const char *m = r->method;
    bool get = strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0;
    bool put = strcmp(m, "PUT") == 0, post = strcmp(m, "POST") == 0;
    bool del = strcmp(m, "DELETE") == 0;
    sy_change_set *cs = NULL;
    sy_error err;
    char what[512];

    if (ns == 1 && strcmp(seg[0], "status") == 0 && get) {
        get_status(c);
    } else if (ns == 1 && strcmp(seg[0], "routes") == 0 && get) {
        get_routes(c);
    } else if (ns == 1 && strcmp(seg[0], "metrics") == 0 && get) {
        get_metrics(c);
    } else if (ns == 1 && strcmp(seg[0], "report") == 0 && get) {
        if (G.last_report.len)
            reply_json(c, 200, &G.last_report);
        else
            reply_msg(c, 404, "nothing applied yet");
    } else if (ns == 1 && strcmp(seg[0], "fingerprint") == 0 && get) {
        sy_snapshot *s = sy_router_acquire(G.router);
        char fp[17], body[96];
        hex64(fp, sy_snapshot_fingerprint(s));
        int n = snprintf(body, sizeof body,
                         "{\"fingerprint\":\"%s\",\"generation\":%llu}\n", fp,
                         (unsigned long long)sy_snapshot_generation(s));
        sy_snapshot_release(s);
        httpd_respond(c, 200, "application/json", NULL, body, (size_t)n);
    } else if (ns == 2 && strcmp(seg[0], "routes") == 0 && put) {
        /* a whole document for a source (registered when new) */
        int rc = sy_router_add_source(G.router, seg[1], &err);
        if (rc && rc != SY_EEXIST) {
            reply_msg(c, 400, err.message);
            return;
        }
        if (sy_change_set_new(G.router, &cs, &err)) {
            reply_msg(c, 500, err.message);
            return;
        }
        if (sy_change_set_apply(cs, seg[1], r->body, r->body_len, &err)) {
            staged_fail(c, cs, &err);
            return;
        }
        snprintf(what, sizeof what, "admin: document for %s", seg[1]);
        commit_reply(c, cs, what);
    } else if (ns == 3 && strcmp(seg[0], "routes") == 0 && (put || del)) {
        if (put) { /* a new source is registered, as for a document */
            int rc = sy_router_add_source(G.router, seg[1], &err);
            if (rc && rc != SY_EEXIST) {
                reply_msg(c, 400, err.message);
                return;
            }
        } else if (!route_in_source(seg[1], seg[2])) {
            reply_msg(c, 404, "no such route in this source");
            return;
        }
        if (sy_change_set_new(G.router, &cs, &err)) {
            reply_msg(c, 500, err.message);
            return;
        }
        if (put) {
            cJSON *j = cJSON_ParseWithLength(r->body, r->body_len);
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
            bool same =
                cJSON_IsString(id) && strcmp(id->valuestring, seg[2]) == 0;
            cJSON_Delete(j);
            if (j && !same) {
                sy_change_set_free(cs);
                {
                    reply_msg(c, 400,
                              "the route's \"id\" must be the "
                              "<id> of the URL");
                    return;
                }
            }
            if (sy_change_set_upsert_route(cs, seg[1], r->body, r->body_len,
                                           &err)) {
                staged_fail(c, cs, &err);
                return;
            }
            snprintf(what, sizeof what, "admin: upsert %s/%s", seg[1], seg[2]);
        } else {
            if (sy_change_set_remove_route(cs, seg[2], &err)) {
                staged_fail(c, cs, &err);
                return;
            }
            snprintf(what, sizeof what, "admin: remove %s/%s", seg[1], seg[2]);
        }
        commit_reply(c, cs, what);
    } else if (ns == 4 && strcmp(seg[0], "routes") == 0 && (post || put) &&
               (strcmp(seg[3], "disable") == 0 ||
                strcmp(seg[3], "enable") == 0)) {
        bool en = strcmp(seg[3], "enable") == 0;
        if (!route_in_source(seg[1], seg[2])) {
            reply_msg(c, 404, "no such route in this source");
            return;
        }
        if (sy_change_set_new(G.router, &cs, &err)) {
            reply_msg(c, 500, err.message);
            return;
        }
        if (sy_change_set_set_route_enabled(cs, seg[2], en, &err)) {
            staged_fail(c, cs, &err);
            return;
        }
        snprintf(what, sizeof what, "admin: %s %s/%s", seg[3], seg[1], seg[2]);
        commit_reply(c, cs, what);
    } else if (ns == 2 && strcmp(seg[0], "instances") == 0 && put) {
        if (sy_change_set_new(G.router, &cs, &err)) {
            reply_msg(c, 500, err.message);
            return;
        }
        if (gw_instances_stage(cs, r->body, r->body_len, seg[1], &err)) {
            staged_fail(c, cs, &err);
            return;
        }
        snprintf(what, sizeof what, "admin: instances of %s", seg[1]);
        commit_reply(c, cs, what);
    } else if (ns == 2 && strcmp(seg[0], "rollback") == 0 && (post || put)) {
        char ver[256];
        query_param(r->query, "version", ver, sizeof ver);
        if (sy_change_set_new(G.router, &cs, &err)) {
            reply_msg(c, 500, err.message);
            return;
        }
        if (sy_change_set_rollback(cs, seg[1], ver[0] ? ver : NULL, &err)) {
            staged_fail(c, cs, &err);
            return;
        }
        snprintf(what, sizeof what, "admin: rollback %s to %s", seg[1],
                 ver[0] ? ver : "the previous version");
        commit_reply(c, cs, what);
    } else if (ns >= 1 && (strcmp(seg[0], "routes") == 0 ||
                           strcmp(seg[0], "instances") == 0 ||
                           strcmp(seg[0], "rollback") == 0 ||
                           strcmp(seg[0], "status") == 0 ||
                           strcmp(seg[0], "metrics") == 0)) {
        reply_msg(c, 405, "method not allowed here");
    } else {
        reply_msg(c, 404, "no such admin endpoint");
    }
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
