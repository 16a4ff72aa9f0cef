/*
 * etcd_driver.c - a router fed by the mini-gateway's etcd source, driven
 * over stdin, for the etcd end-to-end tests and the etcd benchmark.
 *
 *   etcd_driver --etcd URL [--etcd-prefix PREFIX] [--commits]
 *               [--request-timeout-ms N]
 *
 * Runs one libuv loop with the etcd source (examples/mini-gateway/
 * etcd_source.c) and a strict router. Commands on stdin, one per line,
 * each answered with one JSON line on stdout:
 *   status                  {"fingerprint","generation","routes":[ids in
 *                            rank order],"etcd":{the module's status}}
 *   match METHOD HOST PATH  {"route": id|null, "instance": id|null,
 *                            "target": "host:port"|null, "error": ...}
 *   metrics                 {"text": the module's Prometheus lines}
 *   fail-alloc N            (etcd_driver_faults only) the module's Nth
 *                            allocation from now fails, once: {"armed": N}
 *   quit                    stops the module and exits 0
 * With --commits every commit from etcd also prints
 *   {"commit": revision, "fingerprint": "hex", "us": epoch microseconds}
 * ("us" taken as the commit published; the fingerprint read after it),
 * and the module's trace of that change (gw_etcd_trace): "first_us",
 * "last_us", "decoded_us", "committed_us" (wall clock, microseconds),
 * "bytes", "reads", "decode_cpu_us", "commit_cpu_us".
 */
#include "etcd_source.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef GW_ETCD_FAULTS /* the driver's own allocations are not counted */
#undef malloc
#undef calloc
#undef realloc

static long fault_countdown; /* 0: off; else allocations until the fault */

static bool fault_now(void) {
    return fault_countdown > 0 && --fault_countdown == 0;
}

void *etcd_fault_malloc(size_t n) {
    return fault_now() ? NULL : malloc(n);
}

void *etcd_fault_calloc(size_t n, size_t size) {
    return fault_now() ? NULL : calloc(n, size);
}

void *etcd_fault_realloc(void *p, size_t n) {
    return fault_now() ? NULL : realloc(p, n);
}
#endif

typedef struct driver {
    uv_loop_t *loop;
    sy_router *router;
    sy_match_ctx *ctx;
    gw_etcd *etcd;
    uv_pipe_t in;
    char line[4096];
    size_t len;
    bool commits;
} driver;

static void emit(cJSON *o) {
    char *s = cJSON_PrintUnformatted(o);
    if (s) {
        fputs(s, stdout);
        fputc('\n', stdout);
        fflush(stdout);
    }
    free(s);
    cJSON_Delete(o);
}

static void on_commit(void *data, int64_t revision, uint64_t generation) {
    driver *d = data;
    if (!d->commits)
        return;
    /* the time first: the snapshot is published, requests see it */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    sy_snapshot *s = sy_router_acquire(d->router);
    char hex[24];
    snprintf(hex, sizeof hex, "%016" PRIx64,
             sy_snapshot_generation(s) == generation
                 ? sy_snapshot_fingerprint(s)
                 : 0);
    sy_snapshot_release(s);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "commit", (double)revision);
    cJSON_AddStringToObject(o, "fingerprint", hex);
    cJSON_AddNumberToObject(o, "us",
                            (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3);
    gw_etcd_trace t;
    gw_etcd_last_trace(d->etcd, &t);
    cJSON_AddNumberToObject(o, "first_us", (double)t.first_byte_us);
    cJSON_AddNumberToObject(o, "last_us", (double)t.last_byte_us);
    cJSON_AddNumberToObject(o, "decoded_us", (double)t.decoded_us);
    cJSON_AddNumberToObject(o, "committed_us", (double)t.committed_us);
    cJSON_AddNumberToObject(o, "bytes", (double)t.line_bytes);
    cJSON_AddNumberToObject(o, "reads", (double)t.reads);
    cJSON_AddNumberToObject(o, "decode_cpu_us", (double)t.decode_cpu_us);
    cJSON_AddNumberToObject(o, "commit_cpu_us", (double)t.commit_cpu_us);
    emit(o);
}

static void on_log(void *data, gw_etcd_log_level level, const char *msg) {
    (void)data;
    static const char *names[] = {"info", "warn", "error"};
    fprintf(stderr, "etcd_driver: %s: %s\n", names[level], msg);
}

static void cmd_status(driver *d) {
    sy_snapshot *s = sy_router_acquire(d->router);
    char hex[24];
    snprintf(hex, sizeof hex, "%016" PRIx64, sy_snapshot_fingerprint(s));
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "fingerprint", hex);
    cJSON_AddNumberToObject(o, "generation", (double)sy_snapshot_generation(s));
    cJSON *ids = cJSON_AddArrayToObject(o, "routes");
    for (size_t i = 0; i < sy_snapshot_route_count(s); i++)
        cJSON_AddItemToArray(
            ids, cJSON_CreateString(sy_route_id(sy_snapshot_route_at(s, i))));
    sy_snapshot_release(s);
    cJSON_AddItemToObject(o, "etcd", gw_etcd_status(d->etcd));
    emit(o);
}

static void cmd_match(driver *d, char *args) {
    char *save = NULL;
    char *method = strtok_r(args, " ", &save);
    char *host = strtok_r(NULL, " ", &save);
    char *path = strtok_r(NULL, " ", &save);
    cJSON *o = cJSON_CreateObject();
    if (!method || !host || !path) {
        cJSON_AddStringToObject(o, "error", "usage: match METHOD HOST PATH");
        emit(o);
        return;
    }
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){method, strlen(method)};
    req.host = (sy_str){host, strlen(host)};
    char *q = strchr(path, '?');
    if (q) {
        *q = '\0';
        req.query = (sy_str){q + 1, strlen(q + 1)};
    }
    req.path = (sy_str){path, strlen(path)};
    req.seed = 1;
    sy_snapshot *s = sy_router_acquire(d->router);
    sy_match *m = NULL;
    int rc = sy_snapshot_match(s, d->ctx, &req, &m);
    if (rc || !m) {
        cJSON_AddNullToObject(o, "route");
        if (rc)
            cJSON_AddStringToObject(o, "error", sy_strerror(rc));
    } else {
        const sy_route *r = sy_match_route(m);
        cJSON_AddStringToObject(o, "route", sy_route_id(r));
        sy_upstream up;
        sy_route_upstream(r, &up);
        char target[300];
        if (up.kind == SY_UPSTREAM_SERVICE) {
            sy_selection sel;
            sy_error err;
            if (sy_snapshot_select(s, d->ctx, m, &req, &sel, &err) == 0) {
                cJSON_AddStringToObject(o, "instance", sel.id);
                snprintf(target, sizeof target, "%s:%u", sel.host, sel.port);
                cJSON_AddStringToObject(o, "target", target);
            } else {
                cJSON_AddNullToObject(o, "instance");
                cJSON_AddNullToObject(o, "target");
                cJSON_AddStringToObject(o, "error", err.message);
            }
        } else {
            snprintf(target, sizeof target, "%s:%u", up.host, up.port);
            cJSON_AddNullToObject(o, "instance");
            cJSON_AddStringToObject(o, "target", target);
        }
    }
    sy_snapshot_release(s);
    emit(o);
}

static void stop(driver *d) {
    if (d->etcd)
        gw_etcd_stop(d->etcd);
    d->etcd = NULL;
    if (!uv_is_closing((uv_handle_t *)&d->in))
        uv_close((uv_handle_t *)&d->in, NULL);
}

static void run_line(driver *d, char *line) {
    if (strcmp(line, "status") == 0) {
        cmd_status(d);
    } else if (strncmp(line, "match ", 6) == 0) {
        cmd_match(d, line + 6);
    } else if (strcmp(line, "metrics") == 0) {
        size_t n = gw_etcd_metrics_text(d->etcd, NULL, 0);
        char *buf = malloc(n + 1);
        gw_etcd_metrics_text(d->etcd, buf, n + 1);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "text", buf);
        free(buf);
        emit(o);
    } else if (strcmp(line, "quit") == 0) {
        stop(d);
#ifdef GW_ETCD_FAULTS
    } else if (strncmp(line, "fail-alloc ", 11) == 0) {
        fault_countdown = strtol(line + 11, NULL, 10);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "armed", (double)fault_countdown);
        emit(o);
#endif
    } else if (line[0]) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "error", "unknown command");
        emit(o);
    }
}

static void in_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
    (void)hint;
    driver *d = h->data;
    *b = uv_buf_init(d->line + d->len, (unsigned)(sizeof d->line - d->len));
}

static void in_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
    (void)b;
    driver *d = s->data;
    if (n < 0) { /* stdin closed: stop */
        stop(d);
        return;
    }
    d->len += (size_t)n;
    size_t start = 0;
    for (size_t i = 0; i < d->len && d->etcd; i++) {
        if (d->line[i] != '\n')
            continue;
        d->line[i] = '\0';
        run_line(d, d->line + start);
        start = i + 1;
    }
    if (!d->etcd)
        return;
    memmove(d->line, d->line + start, d->len - start);
    d->len -= start;
    if (d->len == sizeof d->line) /* an over-long line: drop it */
        d->len = 0;
}

int main(int argc, char **argv) {
    const char *url = NULL, *prefix = NULL;
    uint32_t timeout_ms = 0; /* 0: the module's default */
    driver d = {0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--etcd") == 0 && i + 1 < argc)
            url = argv[++i];
        else if (strcmp(argv[i], "--etcd-prefix") == 0 && i + 1 < argc)
            prefix = argv[++i];
        else if (strcmp(argv[i], "--commits") == 0)
            d.commits = true;
        else if (strcmp(argv[i], "--request-timeout-ms") == 0 && i + 1 < argc)
            timeout_ms = (uint32_t)strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr,
                    "usage: etcd_driver --etcd URL [--etcd-prefix PREFIX] "
                    "[--commits] [--request-timeout-ms N]\n");
            return 2;
        }
    }
    if (!url) {
        fprintf(stderr, "etcd_driver: --etcd URL is required\n");
        return 2;
    }
    sy_error err;
    sy_router_options ro = SY_ROUTER_OPTIONS_INIT;
    if (sy_router_new(&ro, &d.router, &err) ||
        sy_match_ctx_new(NULL, &d.ctx, &err)) {
        fprintf(stderr, "etcd_driver: %s\n", err.message);
        return 1;
    }
    d.loop = uv_default_loop();
    gw_etcd_options o = {0};
    o.url = url;
    o.prefix = prefix;
    o.on_commit = on_commit;
    o.on_log = on_log;
    o.data = &d;
    o.backoff_min_ms = 50;
    o.backoff_max_ms = 1000;
    o.request_timeout_ms = timeout_ms;
    char msg[256];
    if (gw_etcd_start_opts(d.loop, d.router, &o, &d.etcd, msg, sizeof msg)) {
        fprintf(stderr, "etcd_driver: %s\n", msg);
        sy_match_ctx_free(d.ctx); /* a clean exit for the leak checker */
        sy_router_free(d.router);
        return 2;
    }
    uv_pipe_init(d.loop, &d.in, 0);
    d.in.data = &d;
    if (uv_pipe_open(&d.in, 0) ||
        uv_read_start((uv_stream_t *)&d.in, in_alloc, in_read)) {
        fprintf(stderr, "etcd_driver: stdin must be a pipe\n");
        return 2;
    }
    uv_run(d.loop, UV_RUN_DEFAULT);
    uv_loop_close(d.loop);
    sy_match_ctx_free(d.ctx);
    sy_router_free(d.router);
    return 0;
}
