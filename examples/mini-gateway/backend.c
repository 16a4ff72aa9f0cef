/*
 * backend.c - the test backend: answers every request with a JSON body
 * naming its instance id and version and echoing the method, path, query,
 * headers and body size it received, so tests and the demo see exactly
 * where a request went. Query parameters shape the answer for tests:
 * delay=MS (answer later), status=N, size=N (pad the body to N bytes),
 * location=URL (a Location header, %XX decoded).
 * Runs as `mini-gateway --backend ...` or as threads of the demo.
 */
#define _DEFAULT_SOURCE
#include "gw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct backend {
    char id[128], version[64];
    uv_loop_t loop;
    httpd *srv;
    uv_signal_t sigterm, sigint;
    char host[64];
    int port;
} backend;

typedef struct pending {
    uv_timer_t timer;
    httpd_conn *c;
    int status;
    gw_buf body;
    char *headers;
} pending;

/* "Location: URL\r\n" from location=URL (%XX decoded), or NULL. */
static char *location_header(const char *q) {
    for (const char *p = q; p && *p;) {
        if (strncmp(p, "location=", 9) == 0) {
            gw_buf h = {0};
            gw_buf_adds(&h, "Location: ");
            for (p += 9; *p && *p != '&'; p++) {
                char c = *p;
                if (c == '%' && p[1] && p[2]) {
                    char hex[3] = {p[1], p[2], 0};
                    c = (char)strtol(hex, NULL, 16);
                    p += 2;
                }
                if (c != '\r' && c != '\n')
                    gw_buf_add(&h, &c, 1);
            }
            gw_buf_adds(&h, "\r\n");
            return h.p;
        }
        p = strchr(p, '&');
        if (p)
            p++;
    }
    return NULL;
}

static long query_num(const char *q, const char *key) {
    size_t kl = strlen(key);
    for (const char *p = q; p && *p;) {
        if (strncmp(p, key, kl) == 0 && p[kl] == '=')
            return strtol(p + kl + 1, NULL, 10);
        p = strchr(p, '&');
        if (p)
            p++;
    }
    return -1;
}

static void pending_closed(uv_handle_t *h) {
    pending *pd = h->data;
    gw_buf_free(&pd->body);
    free(pd->headers);
    free(pd);
}

static void on_delay(uv_timer_t *t) {
    pending *pd = t->data;
    httpd_respond(pd->c, pd->status, "application/json", pd->headers,
                  pd->body.p, pd->body.len);
    uv_close((uv_handle_t *)t, pending_closed);
}

static void handle(httpd_conn *c, httpd_req *r, void *data) {
    backend *b = data;
    gw_buf out = {0};
    gw_buf_adds(&out, "{\"instance\":");
    gw_buf_json_str(&out, b->id, strlen(b->id));
    gw_buf_adds(&out, ",\"version\":");
    gw_buf_json_str(&out, b->version, strlen(b->version));
    gw_buf_adds(&out, ",\"method\":");
    gw_buf_json_str(&out, r->method, strlen(r->method));
    gw_buf_adds(&out, ",\"path\":");
    gw_buf_json_str(&out, r->path, strlen(r->path));
    gw_buf_adds(&out, ",\"query\":");
    gw_buf_json_str(&out, r->query, strlen(r->query));
    gw_buf_adds(&out, ",\"headers\":[");
    for (size_t i = 0; i < r->header_count; i++) {
        gw_buf_adds(&out, i ? ",[" : "[");
        gw_buf_json_str(&out, r->headers[i].name.ptr, r->headers[i].name.len);
        gw_buf_adds(&out, ",");
        gw_buf_json_str(&out, r->headers[i].value.ptr, r->headers[i].value.len);
        gw_buf_adds(&out, "]");
    }
    gw_buf_printf(&out, "],\"body_bytes\":%zu", r->body_len);
    long size = query_num(r->query, "size");
    if (size > 0 && size <= 64L * 1024 * 1024) {
        gw_buf_adds(&out, ",\"pad\":\"");
        while (!out.failed && out.len + 3 < (size_t)size)
            gw_buf_add(&out, "x", 1);
        gw_buf_adds(&out, "\"");
    }
    gw_buf_adds(&out, "}\n");
    long status = query_num(r->query, "status");
    if (status < 100 || status > 599)
        status = 200;
    if (out.failed) { /* out of memory (gw.h): this answer fails */
        gw_buf_free(&out);
        httpd_respond(c, 500, "text/plain", NULL, "out of memory\n", 14);
        return;
    }
    char *headers = location_header(r->query);
    long delay = query_num(r->query, "delay");
    if (delay > 0) {
        pending *pd = calloc(1, sizeof *pd);
        if (pd) {
            pd->headers = headers;
            pd->c = c;
            pd->status = (int)status;
            pd->body = out;
            uv_timer_init(httpd_loop(c), &pd->timer);
            pd->timer.data = pd;
            uv_timer_start(&pd->timer, on_delay, (uint64_t)delay, 0);
            return;
        }
    }
    httpd_respond(c, (int)status, "application/json", headers, out.p, out.len);
    free(headers);
    gw_buf_free(&out);
}

static void on_signal(uv_signal_t *s, int sig) {
    (void)sig;
    backend *b = s->data;
    httpd_close(b->srv);
    uv_close((uv_handle_t *)&b->sigterm, NULL);
    uv_close((uv_handle_t *)&b->sigint, NULL);
}

int gw_backend_main(const char *listen, const char *id, const char *version) {
    backend *b = calloc(1, sizeof *b);
    if (!b)
        return 1;
    snprintf(b->id, sizeof b->id, "%s", id ? id : "backend");
    snprintf(b->version, sizeof b->version, "%s", version ? version : "");
    if (gw_parse_addr(listen ? listen : "127.0.0.1:9000", b->host,
                      sizeof b->host, &b->port)) {
        gw_log("bad --listen address");
        return 2;
    }
    uv_loop_init(&b->loop);
    b->srv = httpd_new(&b->loop, b->host, b->port, handle, b, 64 << 20);
    if (!b->srv)
        return 1;
    uv_signal_init(&b->loop, &b->sigterm);
    uv_signal_init(&b->loop, &b->sigint);
    b->sigterm.data = b->sigint.data = b;
    uv_signal_start(&b->sigterm, on_signal, SIGTERM);
    uv_signal_start(&b->sigint, on_signal, SIGINT);
    fprintf(stderr, "backend %s (version %s) on %s:%d\n", b->id, b->version,
            b->host, b->port);
    uv_run(&b->loop, UV_RUN_DEFAULT);
    uv_loop_close(&b->loop);
    free(b);
    return 0;
}

static void backend_thread(void *arg) {
    backend *b = arg;
    uv_run(&b->loop, UV_RUN_DEFAULT);
}

int gw_backend_spawn(const char *host, int port, const char *id,
                     const char *version) {
    backend *b = calloc(1, sizeof *b);
    if (!b)
        return -1;
    snprintf(b->id, sizeof b->id, "%s", id);
    snprintf(b->version, sizeof b->version, "%s", version);
    snprintf(b->host, sizeof b->host, "%s", host);
    b->port = port;
    uv_loop_init(&b->loop);
    b->srv = httpd_new(&b->loop, host, port, handle, b, 64 << 20);
    if (!b->srv)
        return -1;
    uv_thread_t t;
    return uv_thread_create(&t, backend_thread, b);
}
