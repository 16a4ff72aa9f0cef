/*
 * etcd_status.c - what the etcd source tells about itself (etcd_source.h):
 * its status as JSON, one source's etcd view, Prometheus lines, the last
 * trace and revision. Any thread: everything is read under the module's
 * mutex.
 */
#include "etcd_source_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *state_names[] = {"connecting", "reading", "watching",
                                    "backoff", "stopped"};

/* A source's applied/version/checksum from the router, if it committed
 * since they were read (under mu). */
static void refresh_source_locked(gw_etcd *e, source_rec *s) {
    if (!s->stale)
        return;
    sy_source_status ss;
    size_t k = etcd_lib_source_index(e, s);
    if (k != SIZE_MAX &&
        sy_router_source_status(e->router, k, &ss, NULL) == 0) {
        s->applied = ss.applied && s->present;
        s->has_version = ss.applied && ss.version[0];
        snprintf(s->version, sizeof s->version, "%s", ss.version);
        s->checksum = ss.checksum;
    }
    s->stale = false;
}

/* The fingerprint of the router's live snapshot (under mu, so that it goes
 * with `revision`: the module commits under mu too). The library keeps it
 * per snapshot once computed; the first reader pays a walk of the routes. */
static uint64_t live_fingerprint_locked(gw_etcd *e) {
    uint64_t t = uv_hrtime();
    sy_snapshot *snap = sy_router_acquire(e->router);
    uint64_t fp = sy_snapshot_fingerprint(snap);
    sy_snapshot_release(snap);
    e->fingerprint_us_total += (uv_hrtime() - t) / 1000;
    return fp;
}

void gw_etcd_last_trace(gw_etcd *e, gw_etcd_trace *out) {
    uv_mutex_lock(&e->mu);
    *out = e->last_trace;
    uv_mutex_unlock(&e->mu);
}

int64_t gw_etcd_revision(gw_etcd *e) {
    uv_mutex_lock(&e->mu);
    int64_t r = e->revision;
    uv_mutex_unlock(&e->mu);
    return r;
}

static cJSON *str_or_null(const char *s) {
    return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

cJSON *gw_etcd_status(gw_etcd *e) {
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    char hex[24];
    uv_mutex_lock(&e->mu);
    cJSON_AddStringToObject(o, "url", e->url);
    char ep[300]; /* the endpoint the watch uses (or will try next) */
    snprintf(ep, sizeof ep, "%s:%s", e->eps[e->ep_index].host,
             e->eps[e->ep_index].port);
    cJSON_AddStringToObject(o, "endpoint", ep);
    cJSON_AddStringToObject(o, "prefix", e->prefix);
    cJSON_AddStringToObject(o, "state", state_names[e->st]);
    cJSON_AddBoolToObject(o, "connected", e->connected);
    cJSON_AddNumberToObject(o, "revision", (double)e->revision);
    snprintf(hex, sizeof hex, "%016" PRIx64, live_fingerprint_locked(e));
    cJSON_AddStringToObject(o, "fingerprint", hex);
    cJSON_AddItemToObject(o, "last_error", str_or_null(e->last_error));
    cJSON_AddNumberToObject(o, "reconnects", (double)e->reconnects);
    cJSON_AddNumberToObject(o, "full_reads", (double)e->full_reads);
    cJSON_AddNumberToObject(o, "commits", (double)e->commits);
    cJSON_AddNumberToObject(o, "events", (double)e->events);
    cJSON_AddNumberToObject(o, "rejected", (double)e->rejected);
    cJSON_AddNumberToObject(o, "progress_notifies",
                            (double)e->progress_notifies);
    cJSON_AddNumberToObject(o, "ignored_keys", (double)e->ignored_keys);
    cJSON *ik = e->ignored_keys ? cJSON_CreateObject() : cJSON_CreateNull();
    if (e->ignored_keys) {
        cJSON_AddStringToObject(ik, "key", e->ignored_key);
        cJSON_AddStringToObject(ik, "why", e->ignored_why);
    }
    cJSON_AddItemToObject(o, "last_ignored_key", ik);
    cJSON_AddNumberToObject(o, "last_commit_us", (double)e->last_commit_us);
    cJSON_AddNumberToObject(o, "commit_us_total", (double)e->commit_us_total);
    cJSON_AddNumberToObject(o, "commit_cpu_us_total",
                            (double)e->commit_cpu_us_total);
    cJSON_AddNumberToObject(o, "fingerprint_us_total",
                            (double)e->fingerprint_us_total);
    cJSON_AddNumberToObject(o, "last_full_read_keys",
                            (double)e->last_full_read_keys);
    cJSON_AddNumberToObject(o, "last_full_read_us",
                            (double)e->last_full_read_us);
    cJSON_AddNumberToObject(o, "last_decode_us", (double)e->last_decode_us);
    cJSON_AddNumberToObject(o, "decode_us_total", (double)e->decode_us_total);
    cJSON *srcs = cJSON_AddArrayToObject(o, "sources");
    for (size_t i = 0; i < e->src_n; i++) {
        source_rec *s = &e->src[i];
        refresh_source_locked(e, s);
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", s->name);
        cJSON_AddStringToObject(j, "key", s->key);
        cJSON_AddNumberToObject(j, "mod_revision", (double)s->mod_revision);
        cJSON_AddBoolToObject(j, "present", s->present);
        cJSON_AddItemToObject(j, "version",
                              str_or_null(s->has_version ? s->version : NULL));
        snprintf(hex, sizeof hex, "%016" PRIx64, s->checksum);
        cJSON_AddItemToObject(j, "checksum",
                              str_or_null(s->applied ? hex : NULL));
        cJSON_AddItemToObject(j, "error", str_or_null(s->error));
        cJSON_AddItemToArray(srcs, j);
    }
    cJSON *svcs = cJSON_AddArrayToObject(o, "services");
    for (size_t i = 0; i < e->svc_n; i++) {
        const service_rec *s = &e->svc[i];
        size_t live = 0;
        const char *error = s->error;
        for (size_t k = 0; k < s->n; k++) {
            live += s->v[k].val.json != NULL;
            if (!error)
                error = s->v[k].error;
        }
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", s->name);
        cJSON_AddNumberToObject(j, "instances", (double)live);
        cJSON_AddItemToObject(j, "error", str_or_null(error));
        cJSON_AddItemToArray(svcs, j);
    }
    uv_mutex_unlock(&e->mu);
    return o;
}

char *gw_etcd_status_json(gw_etcd *e) {
    cJSON *o = gw_etcd_status(e);
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

int gw_etcd_source_info_get(gw_etcd *e, const char *source,
                            gw_etcd_source_info *out) {
    int rc = -1;
    uv_mutex_lock(&e->mu);
    source_rec *s = etcd_find_source(e, source);
    if (s) {
        refresh_source_locked(e, s);
        memset(out, 0, sizeof *out);
        snprintf(out->key, sizeof out->key, "%s", s->key);
        out->mod_revision = s->mod_revision;
        snprintf(out->version, sizeof out->version, "%s",
                 s->has_version ? s->version : "");
        out->checksum = s->applied ? s->checksum : 0;
        snprintf(out->error, sizeof out->error, "%s", s->error ? s->error : "");
        if (s->refused.code)
            out->refused = s->refused;
        rc = 0;
    }
    uv_mutex_unlock(&e->mu);
    return rc;
}

/* Append to buf as snprintf does, counting what does not fit. */
static void add_text(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*len < cap ? buf + *len : NULL,
                      *len < cap ? cap - *len : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n;
}

size_t gw_etcd_metrics_text(gw_etcd *e, char *buf, size_t cap) {
    size_t len = 0;
    if (cap)
        buf[0] = '\0';
    uv_mutex_lock(&e->mu);
    add_text(buf, cap, &len,
             "# HELP switchyard_etcd_revision The etcd revision the router "
             "reflects.\n"
             "# TYPE switchyard_etcd_revision gauge\n"
             "switchyard_etcd_revision %" PRId64 "\n"
             "# HELP switchyard_etcd_info The fingerprint of the router's "
             "snapshot, which reflects that revision.\n"
             "# TYPE switchyard_etcd_info gauge\n"
             "switchyard_etcd_info{revision=\"%" PRId64
             "\",fingerprint=\"%016" PRIx64 "\"} 1\n"
             "# TYPE switchyard_etcd_connected gauge\n"
             "switchyard_etcd_connected %d\n"
             "# TYPE switchyard_etcd_reconnects_total counter\n"
             "switchyard_etcd_reconnects_total %" PRIu64 "\n"
             "# TYPE switchyard_etcd_full_reads_total counter\n"
             "switchyard_etcd_full_reads_total %" PRIu64 "\n"
             "# TYPE switchyard_etcd_commits_total counter\n"
             "switchyard_etcd_commits_total %" PRIu64 "\n"
             "# TYPE switchyard_etcd_rejected_total counter\n"
             "switchyard_etcd_rejected_total %" PRIu64 "\n"
             "# HELP switchyard_etcd_ignored_keys_total Puts of keys under "
             "the prefix that are no route or instance key.\n"
             "# TYPE switchyard_etcd_ignored_keys_total counter\n"
             "switchyard_etcd_ignored_keys_total %" PRIu64 "\n"
             "# TYPE switchyard_etcd_auth_logins_total counter\n"
             "switchyard_etcd_auth_logins_total %" PRIu64 "\n"
             "# TYPE switchyard_etcd_auth_renewals_total counter\n"
             "switchyard_etcd_auth_renewals_total %" PRIu64 "\n"
             "# TYPE switchyard_etcd_auth_rejections_total counter\n"
             "switchyard_etcd_auth_rejections_total %" PRIu64 "\n"
             "# TYPE switchyard_etcd_source_error gauge\n",
             e->revision, e->revision, live_fingerprint_locked(e),
             e->connected ? 1 : 0, e->reconnects, e->full_reads, e->commits,
             e->rejected, e->ignored_keys, e->auth_logins, e->auth_renewals,
             e->auth_rejections);
    for (size_t i = 0; i < e->src_n; i++) {
        /* label value escaping: backslash, quote, newline */
        char name[300];
        size_t k = 0;
        for (const char *p = e->src[i].name; *p && k + 3 < sizeof name; p++) {
            if (*p == '\\' || *p == '"' || *p == '\n')
                name[k++] = '\\';
            name[k++] = *p == '\n' ? 'n' : *p;
        }
        name[k] = '\0';
        add_text(buf, cap, &len,
                 "switchyard_etcd_source_error{source=\"%s\"} %d\n", name,
                 e->src[i].error ? 1 : 0);
    }
    uv_mutex_unlock(&e->mu);
    return len;
}
