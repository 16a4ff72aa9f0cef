/*
 * admin_ops.c - the operator's admin endpoints (rows of admin.c's table):
 *
 *   GET /                          the web console (console_html.c)
 *   GET /explain?method=M&url=U[&header=Name:%20v]...
 *                                  every live route in rank order, matched
 *                                  or the first predicate that failed
 *   GET /shadowed                  live routes no request can reach
 *   GET /instances                 services and instances with their
 *                                  passive health (ejections)
 *   GET /changes                   the last changes, newest first, each
 *                                  with its three-way diff (the report)
 *   PUT /routes/<source>?dry_run=1 the diff the document would make, the
 *                                  routes it would leave unreachable and
 *                                  its impact on the last requests served
 *                                  (access_log.c's ring); changes nothing
 *
 * Main thread only (the admin loop), as admin.c.
 */
#define _DEFAULT_SOURCE
#include "gw.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static cJSON *str_or_null(const char *s);

/* ---- the console ---- */

void gw_admin_console(gw_admin_call *a) {
    httpd_conn *c = a->c;
    httpd_respond(c, 200, "text/html; charset=utf-8",
                  "Cache-Control: no-store\r\n"
                  "Content-Security-Policy: default-src 'self'; "
                  "style-src 'unsafe-inline'; script-src 'unsafe-inline'\r\n",
                  gw_console_html, strlen(gw_console_html));
}

/* ---- query parameters ---- */

static int hexval(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The i-th value of `key` in query q, decoded (%XX, '+'), into out[cap];
 * false when there is none. */
static bool param(const char *q, const char *key, size_t nth, char *out,
                  size_t cap) {
    size_t kl = strlen(key), seen = 0;
    for (const char *p = q; p && *p;) {
        size_t n = strcspn(p, "&");
        if (n > kl && strncmp(p, key, kl) == 0 && p[kl] == '=' &&
            seen++ == nth) {
            size_t o = 0;
            for (size_t i = kl + 1; i < n && o + 1 < cap; i++) {
                int h1, h2;
                if (p[i] == '%' && i + 2 < n + 1 &&
                    (h1 = hexval(p[i + 1])) >= 0 &&
                    (h2 = hexval(p[i + 2])) >= 0) {
                    out[o++] = (char)(h1 * 16 + h2);
                    i += 2;
                } else {
                    out[o++] = p[i] == '+' ? ' ' : p[i];
                }
            }
            out[o] = '\0';
            return true;
        }
        p = p[n] ? p + n + 1 : NULL;
    }
    return false;
}

/* ---- explain ---- */

/* Every parameter of an explain is read as asked, or the call is refused
 * (400, msg): an unknown key (?headr=), method or url twice, more than 16
 * headers, a value longer than its buffer. They were dropped, the first
 * of two taken, or cut, and the answer was for another request. */
static bool explain_query_ok(const char *q, char *msg, size_t cap) {
    static const struct {
        const char *key;
        size_t most, room;
    } keys[] = {{"method", 1, 32}, {"url", 1, 2048}, {"header", 16, 512}};
    size_t count[3] = {0, 0, 0};
    for (const char *p = q; p && *p;) {
        size_t n = strcspn(p, "&"), k = strcspn(p, "=&");
        size_t i = 0;
        while (i < 3 &&
               !(strlen(keys[i].key) == k && strncmp(p, keys[i].key, k) == 0))
            i++;
        size_t len = 0; /* the value's length once decoded */
        for (size_t j = k + 1; j < n; j++, len++)
            if (p[j] == '%' && j + 2 < n && hexval(p[j + 1]) >= 0 &&
                hexval(p[j + 2]) >= 0)
                j += 2;
        if (n == 0) {
            /* an empty pair (a&&b): nothing asked */
        } else if (i == 3) {
            snprintf(msg, cap,
                     "query parameter '%.*s' is not read: explain takes "
                     "method, url and header",
                     (int)(k < 64 ? k : 64), p);
            return false;
        } else if (++count[i] > keys[i].most) {
            snprintf(msg, cap,
                     keys[i].most == 1
                         ? "query parameter '%s' given twice"
                         : "query parameter '%s': at most 16 are read",
                     keys[i].key);
            return false;
        } else if (len >= keys[i].room) {
            snprintf(msg, cap,
                     "query parameter '%s' is longer than %zu bytes "
                     "decoded",
                     keys[i].key, keys[i].room - 1);
            return false;
        }
        p = p[n] ? p + n + 1 : NULL;
    }
    return true;
}

/* A method the gateway routes: one http-parser reads (it answers any
 * other 400) but CONNECT (answered 405, never routed). An explain of
 * another ("", "get") was answered for a request no client can send. */
static bool routed_method(const char *m) {
#define GW_METHOD_IS(num, name, string)                                        \
    if (HTTP_##name != HTTP_CONNECT && strcmp(m, #string) == 0)                \
        return true;
    HTTP_METHOD_MAP(GW_METHOD_IS)
#undef GW_METHOD_IS
    return false;
}

typedef struct explain_state {
    cJSON *list;
    const sy_snapshot *snap;
} explain_state;

static int explain_one(void *data, const sy_route *route, bool matched,
                       int failed, const char *failed_name) {
    explain_state *st = data;
    const char *src = NULL;
    sy_snapshot_find_route(st->snap, sy_route_id(route), &src);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "route", sy_route_id(route));
    cJSON_AddStringToObject(e, "source", src ? src : "");
    cJSON_AddNumberToObject(e, "order", sy_route_order(route));
    cJSON_AddBoolToObject(e, "matched", matched);
    if (!matched) {
        cJSON_AddNumberToObject(e, "failed_predicate", failed);
        cJSON_AddStringToObject(e, "failed", failed_name);
    }
    cJSON_AddItemToArray(st->list, e);
    return 0;
}

void gw_admin_explain(gw_admin_call *a) {
    httpd_conn *c = a->c;
    httpd_req *r = a->r;
    static char method[32], url[2048], hbuf[16][512];
    sy_header hs[17];
    size_t nh = 0;
    char bad[160];
    if (!explain_query_ok(r->query, bad, sizeof bad)) {
        gw_reply_error(c, 400, bad);
        return;
    }
    if (!param(r->query, "method", 0, method, sizeof method))
        snprintf(method, sizeof method, "GET");
    if (!routed_method(method)) {
        char msg[192];
        snprintf(msg, sizeof msg,
                 "method '%s' is not one the gateway routes (http-parser's "
                 "methods, in capitals; CONNECT is answered 405)",
                 method);
        gw_reply_error(c, 400, msg);
        return;
    }
    if (!param(r->query, "url", 0, url, sizeof url) || url[0] != '/') {
        gw_reply_error(c, 400,
                       "url must be given and start with '/' "
                       "(e.g. /explain?method=GET&url=/api/x)");
        return;
    }
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){method, strlen(method)};
    req.scheme = (sy_str){"http", 4};
    char *q = strchr(url, '?');
    if (q)
        *q++ = '\0';
    req.path = (sy_str){url, strlen(url)};
    req.query = q ? (sy_str){q, strlen(q)} : (sy_str){"", 0};
    for (; nh < 16 && param(r->query, "header", nh, hbuf[nh], sizeof hbuf[nh]);
         nh++) {
        char *colon = strchr(hbuf[nh], ':');
        if (!colon || colon == hbuf[nh]) {
            gw_reply_error(c, 400, "a header must look like 'Name: value'");
            return;
        }
        char *v = colon + 1;
        while (*v == ' ')
            v++;
        hs[nh] =
            (sy_header){{hbuf[nh], (size_t)(colon - hbuf[nh])}, {v, strlen(v)}};
        if (hs[nh].name.len == 4 && strncasecmp(hbuf[nh], "host", 4) == 0)
            req.host = hs[nh].value;
    }
    req.headers = hs;
    req.header_count = nh;
    req.remote_addr = (sy_str){"127.0.0.1", 9};
    sy_match_ctx *ctx = NULL;
    if (sy_match_ctx_new(NULL, &ctx, NULL)) {
        gw_reply_error(c, 500, "out of memory");
        return;
    }
    sy_snapshot *s = sy_router_acquire(G.router);
    explain_state st = {cJSON_CreateArray(), s};
    int rc = sy_snapshot_explain(s, ctx, &req, explain_one, &st);
    sy_match *m = NULL;
    if (!rc)
        rc = sy_snapshot_match(s, ctx, &req, &m);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "method", method);
    cJSON_AddStringToObject(o, "path", url);
    if (m)
        cJSON_AddStringToObject(o, "route", sy_route_id(sy_match_route(m)));
    else
        cJSON_AddNullToObject(o, "route");
    cJSON_AddItemToObject(o, "routes", st.list);
    sy_snapshot_release(s);
    sy_match_ctx_free(ctx);
    if (rc) {
        cJSON_Delete(o);
        gw_reply_error(c, 400, sy_strerror(rc));
        return;
    }
    gw_reply_cjson(c, 200, o);
}

/* ---- shadowed routes ---- */

typedef struct shadow_state {
    cJSON *list;
    const sy_snapshot *snap;
} shadow_state;

static int shadow_one(void *data, const sy_shadow *sh) {
    shadow_state *st = data;
    const char *src = NULL;
    sy_snapshot_find_route(st->snap, sy_route_id(sh->route), &src);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "route", sy_route_id(sh->route));
    cJSON_AddStringToObject(e, "source", src ? src : "");
    cJSON *by = cJSON_AddArrayToObject(e, "shadowed_by");
    for (size_t i = 0; i < sh->by_count; i++)
        cJSON_AddItemToArray(by, cJSON_CreateString(sy_route_id(sh->by[i])));
    cJSON_AddStringToObject(e, "reason", sh->reason);
    cJSON_AddItemToArray(st->list, e);
    return 0;
}

/* The answer is worked out once per published snapshot (the console asks
 * every few seconds; a large table takes a while). */
static char *shadowed_json;
static uint64_t shadowed_fp, shadowed_gen;

void gw_admin_shadowed(gw_admin_call *a) {
    httpd_conn *c = a->c;
    sy_snapshot *s = sy_router_acquire(G.router);
    uint64_t fp = sy_snapshot_fingerprint(s), gen = sy_snapshot_generation(s);
    if (!shadowed_json || fp != shadowed_fp || gen != shadowed_gen) {
        shadow_state st = {cJSON_CreateArray(), s};
        sy_error err;
        int rc = sy_snapshot_shadowed(s, NULL, shadow_one, &st, &err);
        if (rc) {
            sy_snapshot_release(s);
            cJSON_Delete(st.list);
            gw_reply_error(c, 500, err.message);
            return;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "shadowed", st.list);
        char *t = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!t) {
            sy_snapshot_release(s);
            gw_reply_error(c, 500, "out of memory");
            return;
        }
        free(shadowed_json);
        shadowed_json = t;
        shadowed_fp = fp;
        shadowed_gen = gen;
    }
    sy_snapshot_release(s);
    gw_buf b = {.p = shadowed_json, .len = strlen(shadowed_json)};
    gw_reply_json(c, 200, &b); /* its route ids as UTF-8 (admin.c) */
}

/* ---- instances and their health ---- */

void gw_admin_instances(gw_admin_call *a) {
    httpd_conn *c = a->c;
    long long now = gw_wall_ms();
    static const char *const states[] = {"up", "draining", "down"};
    sy_snapshot *s = sy_router_acquire(G.router);
    cJSON *o = cJSON_CreateObject(), *svcs = cJSON_CreateArray();
    cJSON_AddNumberToObject(o, "now_ms", (double)now);
    for (size_t i = 0; i < sy_snapshot_service_count(s); i++) {
        cJSON *sv = cJSON_CreateObject(), *list = cJSON_CreateArray();
        cJSON_AddStringToObject(sv, "name", sy_snapshot_service_name(s, i));
        for (size_t k = 0; k < sy_snapshot_instance_count(s, i); k++) {
            sy_instance_health hh;
            if (sy_snapshot_instance_health(s, i, k, &hh))
                continue;
            const sy_instance *in = hh.instance;
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "id", in->id);
            cJSON_AddStringToObject(e, "host", in->host);
            cJSON_AddNumberToObject(e, "port", in->port);
            cJSON_AddNumberToObject(e, "weight", in->weight ? in->weight : 1);
            cJSON_AddStringToObject(e, "state",
                                    (unsigned)in->state < 3 ? states[in->state]
                                                            : "unknown");
            const char *ver = NULL;
            for (size_t m = 0; m < in->metadata_count; m++)
                if (strcmp(in->metadata[m].key, "version") == 0)
                    ver = in->metadata[m].value;
            cJSON_AddItemToObject(e, "version", str_or_null(ver));
            cJSON_AddNumberToObject(e, "consecutive_failures",
                                    hh.consecutive_failures);
            cJSON_AddNumberToObject(e, "ejections", hh.ejections);
            cJSON_AddBoolToObject(e, "ejected", hh.ejected_until_ms > now);
            cJSON_AddNumberToObject(e, "ejected_until_ms",
                                    (double)hh.ejected_until_ms);
            cJSON_AddItemToArray(list, e);
        }
        cJSON_AddItemToObject(sv, "instances", list);
        cJSON_AddItemToArray(svcs, sv);
    }
    sy_snapshot_release(s);
    cJSON_AddItemToObject(o, "services", svcs);
    gw_reply_cjson(c, 200, o);
}

/* ---- the last changes ---- */

#define CHANGES_MAX 16
static struct {
    char *report; /* the commit's report JSON */
    long long at_ms;
} changes[CHANGES_MAX];
static size_t changes_next, changes_count;

void gw_changes_note(const gw_buf *report) {
    if (report->failed || !report->len)
        return;
    char *copy = strndup(report->p, report->len);
    if (!copy)
        return;
    free(changes[changes_next].report);
    changes[changes_next].report = copy;
    changes[changes_next].at_ms = gw_wall_ms();
    changes_next = (changes_next + 1) % CHANGES_MAX;
    if (changes_count < CHANGES_MAX)
        changes_count++;
}

void gw_admin_changes(gw_admin_call *a) {
    httpd_conn *c = a->c;
    gw_buf b = {0};
    gw_buf_adds(&b, "{\"changes\":[");
    for (size_t i = 0; i < changes_count; i++) {
        size_t k = (changes_next + CHANGES_MAX - 1 - i) % CHANGES_MAX;
        gw_buf_printf(&b, "%s{\"at_ms\":%lld,\"report\":", i ? "," : "",
                      changes[k].at_ms);
        size_t n = strlen(changes[k].report);
        while (n && changes[k].report[n - 1] == '\n')
            n--;
        gw_buf_add(&b, changes[k].report, n);
        gw_buf_adds(&b, "}");
    }
    gw_buf_adds(&b, "]}\n");
    gw_reply_json(c, 200, &b);
    gw_buf_free(&b);
}

/* ---- dry run ---- */

/* A query key that reads as dry_run ("dry_run", "dryRun", "dry-run", a
 * bare "dry_run"): a misspelt dry run must not become a real change. */
bool gw_dry_run_key(const char *p, size_t n) {
    static const char want[] = "dryrun";
    size_t k = 0;
    for (size_t i = 0; i < n && p[i] != '='; i++) {
        char c = p[i];
        if (c == '_' || c == '-')
            continue;
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (k >= sizeof want - 1 || c != want[k++])
            return false;
    }
    return k == sizeof want - 1;
}

int gw_dry_run(const char *query) {
    int dry = 0;
    bool seen = false;
    for (const char *p = query; p && *p;) {
        size_t n = strcspn(p, "&");
        if (gw_dry_run_key(p, n)) {
            if (seen)
                return -2; /* one value is read: which would it be? */
            seen = true;
            char v[8];
            if (!(n > 8 && strncmp(p, "dry_run=", 8) == 0) ||
                !param(p, "dry_run", 0, v, sizeof v))
                return -1;
            if (strcmp(v, "1") == 0 || strcmp(v, "true") == 0)
                dry = 1;
            else if (strcmp(v, "0") != 0 && strcmp(v, "false") != 0)
                return -1;
        }
        p = p[n] ? p + n + 1 : NULL;
    }
    return dry;
}

/* A scratch router holding what the live one would after the change:
 * every live source in order, each with its live routes (their canonical
 * definitions), `source` with `body` instead (body NULL: the live routes
 * as they are), and the live services' instances. */
static int build_after(const char *source, const char *body, size_t len,
                       sy_router **out, sy_error *err) {
    int rc = gw_scratch_router(out, err);
    sy_snapshot *live = sy_router_acquire(G.router);
    size_t ns = sy_router_source_count(G.router);
    bool seen = false;
    for (size_t i = 0; !rc && i < ns; i++) {
        sy_source_status st;
        if (sy_router_source_status(G.router, i, &st, NULL))
            continue;
        rc = sy_router_add_source(*out, st.name, err);
        if (rc)
            break;
        if (body && strcmp(st.name, source) == 0) {
            seen = true;
            rc = sy_router_apply(*out, st.name, body, len, NULL, err);
            continue;
        }
        gw_buf doc = {0};
        gw_buf_adds(&doc, "[");
        size_t nr = sy_snapshot_route_count(live), k = 0;
        for (size_t j = 0; j < nr; j++) {
            const sy_route *r = sy_snapshot_route_at(live, j);
            const char *src = NULL;
            sy_snapshot_find_route(live, sy_route_id(r), &src);
            const char *def = sy_route_canonical(r);
            if (!src || strcmp(src, st.name) != 0 || !def)
                continue;
            gw_buf_adds(&doc, k++ ? "," : "");
            gw_buf_adds(&doc, def);
        }
        gw_buf_adds(&doc, "]");
        rc = doc.failed
                 ? SY_ENOMEM
                 : sy_router_apply(*out, st.name, doc.p, doc.len, NULL, err);
        gw_buf_free(&doc);
    }
    if (!rc && !seen && body) {
        rc = sy_router_add_source(*out, source, err);
        if (!rc)
            rc = sy_router_apply(*out, source, body, len, NULL, err);
    }
    /* the instances, so that lb:// routes choose among the same ones */
    for (size_t i = 0; !rc && i < sy_snapshot_service_count(live); i++) {
        size_t n = sy_snapshot_instance_count(live, i);
        sy_instance *v = malloc((n ? n : 1) * sizeof *v);
        if (!v) {
            rc = SY_ENOMEM;
            break;
        }
        for (size_t k = 0; k < n; k++) {
            sy_instance_health h;
            sy_snapshot_instance_health(live, i, k, &h);
            v[k] = *h.instance;
        }
        rc = sy_router_set_instances(*out, sy_snapshot_service_name(live, i), v,
                                     n, NULL, err);
        free(v);
    }
    sy_snapshot_release(live);
    return rc;
}

static cJSON *str_or_null(const char *s) {
    return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

/* The route, upstream and instance a request gets on s. */
typedef struct outcome {
    const char *route, *upstream, *instance; /* NULL: none */
} outcome;

static outcome run_one(sy_snapshot *s, sy_match_ctx *ctx, sy_request *req) {
    outcome o = {NULL, NULL, NULL};
    sy_match *m = NULL;
    if (sy_snapshot_match(s, ctx, req, &m) || !m)
        return o;
    const sy_route *r = sy_match_route(m);
    o.route = sy_route_id(r);
    o.upstream = sy_route_uri(r);
    sy_upstream up;
    sy_route_upstream(r, &up);
    sy_selection sel;
    if (up.kind == SY_UPSTREAM_SERVICE &&
        sy_snapshot_select(s, ctx, m, req, &sel, NULL) == 0)
        o.instance = sel.id; /* borrowed from s */
    return o;
}

static bool same(const char *a, const char *b) {
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* The last requests served, through `before` (a copy of the live routes
 * and instances: choosing an instance on the live router would move its
 * round-robin) and through `after`: {"requests": N, "changed": [...],
 * "summary": [...]}. */
static cJSON *impact(sy_router *before, sy_router *after) {
    gw_recent *recent = malloc(GW_RECENT_MAX * sizeof *recent);
    sy_match_ctx *ctx = NULL;
    cJSON *o = cJSON_CreateObject(), *list = cJSON_CreateArray(),
          *sum = cJSON_CreateArray();
    size_t n = recent ? gw_recent_copy(recent, GW_RECENT_MAX) : 0, cut = 0;
    sy_snapshot *a = sy_router_acquire(before), *b = sy_router_acquire(after);
    if (sy_match_ctx_new(NULL, &ctx, NULL))
        n = 0;
    for (size_t i = 0; i < n; i++) {
        sy_header hs[GW_RECENT_HEADERS];
        sy_request req;
        gw_recent_request(&recent[i], hs, &req);
        req.seed = 0x9e3779b97f4a7c15ull * (i + 1); /* the same draws */
        cut += recent[i].cut;
        outcome oa = run_one(a, ctx, &req), ob = run_one(b, ctx, &req);
        const char *ia = oa.route, *ib = ob.route;
        if (same(ia, ib) && same(oa.upstream, ob.upstream) &&
            same(oa.instance, ob.instance))
            continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "method", recent[i].method);
        char url[1600];
        snprintf(url, sizeof url, "%s%s%s", recent[i].path,
                 recent[i].query[0] ? "?" : "", recent[i].query);
        cJSON_AddStringToObject(e, "url", url);
        cJSON_AddItemToObject(e, "old_route", str_or_null(ia));
        cJSON_AddItemToObject(e, "new_route", str_or_null(ib));
        cJSON_AddItemToObject(e, "old_upstream", str_or_null(oa.upstream));
        cJSON_AddItemToObject(e, "new_upstream", str_or_null(ob.upstream));
        cJSON_AddItemToObject(e, "old_instance", str_or_null(oa.instance));
        cJSON_AddItemToObject(e, "new_instance", str_or_null(ob.instance));
        cJSON_AddItemToArray(list, e);
        /* the summary by route pair */
        cJSON *p = NULL;
        cJSON_ArrayForEach(p, sum) {
            const cJSON *po = cJSON_GetObjectItem(p, "old_route");
            const cJSON *pn = cJSON_GetObjectItem(p, "new_route");
            bool so =
                cJSON_IsNull(po) ? !ia : ia && strcmp(po->valuestring, ia) == 0;
            bool sn =
                cJSON_IsNull(pn) ? !ib : ib && strcmp(pn->valuestring, ib) == 0;
            if (so && sn)
                break;
        }
        if (p) {
            cJSON *cnt = cJSON_GetObjectItem(p, "count");
            cJSON_SetNumberValue(cnt, cnt->valuedouble + 1);
        } else {
            p = cJSON_CreateObject();
            cJSON_AddItemToObject(p, "old_route", str_or_null(ia));
            cJSON_AddItemToObject(p, "new_route", str_or_null(ib));
            cJSON_AddNumberToObject(p, "count", 1);
            cJSON_AddItemToArray(sum, p);
        }
    }
    sy_snapshot_release(a);
    sy_snapshot_release(b);
    sy_match_ctx_free(ctx);
    free(recent);
    cJSON_AddNumberToObject(o, "requests", (double)n);
    /* replayed with less than they carried: said, not hidden */
    cJSON_AddNumberToObject(o, "cut", (double)cut);
    cJSON_AddItemToObject(o, "changed", list);
    cJSON_AddItemToObject(o, "summary", sum);
    return o;
}

void gw_admin_dry_run(httpd_conn *c, const char *source, const char *body,
                      size_t len) {
    sy_error err;
    memset(&err, 0, sizeof err);
    sy_router *after = NULL, *before = NULL;
    sy_change_set *cs = NULL;
    sy_report *rep = NULL;
    /* the host's own checks first (cors metadata, a document's default
     * filters): what the real PUT refuses, the dry run refuses too */
    int rc = gw_document_check(body, len, false, &err);
    /* the diff, exactly as the live router would report the change */
    if (!rc)
        rc = sy_change_set_new(G.router, &cs, &err);
    bool known = !rc && gw_source_exists(source);
    if (!rc && known)
        rc = sy_change_set_apply(cs, source, body, len, &err);
    if (!rc && known)
        rc = sy_router_check(G.router, cs, &rep, &err);
    if (!rc)
        rc = build_after(source, body, len, &after, &err);
    if (!rc)
        rc = build_after(source, NULL, 0, &before, &err);
    if (rc) {
        gw_buf b = {0};
        gw_buf_adds(&b, "{\"dry_run\":true,\"ok\":false,\"error\":");
        gw_error_json(&b, &err);
        gw_buf_adds(&b, "}\n");
        gw_reply_json(c, 400, &b);
        gw_buf_free(&b);
    } else {
        gw_buf b = {0};
        gw_buf_adds(&b, "{\"dry_run\":true,\"ok\":true,\"diff\":");
        if (rep && sy_report_part_count(rep))
            gw_report_part_json(&b, sy_report_part(rep, 0));
        else if (rep)
            gw_report_part_json(&b, rep);
        else { /* a new source: every route is added, as the real PUT's
                * report says (its version, never skipped) */
            sy_snapshot *s = sy_router_acquire(after);
            gw_buf_adds(&b, "{\"source\":");
            gw_buf_json_str(&b, source, strlen(source));
            gw_buf_adds(&b, ",\"version\":");
            sy_source_status ss;
            const char *ver = NULL;
            for (size_t i = 0; !ver && i < sy_router_source_count(after); i++)
                if (!sy_router_source_status(after, i, &ss, NULL) &&
                    strcmp(ss.name, source) == 0 && ss.version[0])
                    ver = ss.version;
            if (ver)
                gw_buf_json_str(&b, ver, strlen(ver));
            else
                gw_buf_adds(&b, "null");
            gw_buf_adds(&b, ",\"skipped\":false,\"version_not_bumped\":false,"
                            "\"added\":[");
            size_t k = 0;
            for (size_t i = 0; i < sy_snapshot_route_count(s); i++) {
                const sy_route *r = sy_snapshot_route_at(s, i);
                const char *src = NULL;
                sy_snapshot_find_route(s, sy_route_id(r), &src);
                if (!src || strcmp(src, source) != 0)
                    continue;
                gw_buf_adds(&b, k++ ? "," : "");
                gw_buf_json_str(&b, sy_route_id(r), strlen(sy_route_id(r)));
            }
            gw_buf_adds(&b,
                        "],\"removed\":[],\"updated\":[],\"reordered\":[]}");
            sy_snapshot_release(s);
        }
        /* a file's source: previewed (what changing the file would do),
         * but the real PUT is refused, and the answer says so */
        char msg[768];
        if (gw_owner_check(source, NULL, msg, sizeof msg)) {
            gw_buf_adds(&b, ",\"put_refused\":");
            gw_buf_json_str(&b, msg, strlen(msg));
        }
        cJSON *imp = impact(before, after);
        char *t = cJSON_PrintUnformatted(imp);
        gw_buf_adds(&b, ",\"impact\":");
        gw_buf_adds(&b, t ? t : "null");
        free(t);
        cJSON_Delete(imp);
        /* the routes no request could reach after the change */
        sy_snapshot *s = sy_router_acquire(after);
        shadow_state st = {cJSON_CreateArray(), s};
        sy_error serr;
        if (sy_snapshot_shadowed(s, NULL, shadow_one, &st, &serr) == 0) {
            t = cJSON_PrintUnformatted(st.list);
            gw_buf_adds(&b, ",\"shadowed\":");
            gw_buf_adds(&b, t ? t : "null");
            free(t);
        }
        cJSON_Delete(st.list);
        sy_snapshot_release(s);
        gw_buf_adds(&b, "}\n");
        gw_reply_json(c, 200, &b);
        gw_buf_free(&b);
    }
    sy_report_free(rep);
    sy_change_set_free(cs);
    sy_router_free(after);
    sy_router_free(before);
}
