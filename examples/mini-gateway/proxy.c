/*
 * proxy.c - the client side of the proxy, on a worker's loop: read and
 * parse requests with http-parser (keep-alive and pipelining by pausing
 * the parser after the head and after the message; a plainly common head
 * is read by head_scan.c instead, with the same events), enforce the header
 * and body limits and the header-read and idle timeouts, route each
 * request through switchyard (one snapshot per request, held until its
 * response is finished), answer 400/404/405/413/431/503 and redirects
 * itself, and hand proxied requests to upstream.c with the upstream head
 * built from the library's target (upstream_head.c).
 */
#define _DEFAULT_SOURCE
#include "proxy.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static http_parser_settings settings;
static void client_parse(gw_client *c);
/* Parse what is buffered, unless a parse loop is running further up the
 * stack (it goes on by itself). */
static void client_kick(gw_client *c) {
    if (!c->in_parse)
        client_parse(c);
}
static void client_close(gw_client *c);
static void request_finish(gw_request *q);

uint64_t gw_worker_rand(gw_worker *w) {
    uint64_t x = w->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    w->rng = x;
    return x ? x : 1;
}

/* ------------------------------------------------------------------ */
/* Reading and writing                                                  */
/* ------------------------------------------------------------------ */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
    (void)hint;
    gw_client *c = h->data;
    *buf = uv_buf_init(c->buf + c->end, (unsigned)(c->cap - c->end));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* The client is read all along (a request's body, the next pipelined
 * request, or its EOF) while the buffer has room; only backpressure from a
 * slow upstream or a full buffer stops it. */
static bool want_read(gw_client *c) {
    if (c->closing || c->eof || c->end == c->cap)
        return false;
    gw_request *q = c->req;
    return !q || !q->up || !q->body_flow || q->msg_done ||
           gw_upstream_queue(q->up) < GW_WRITE_HIGH;
}

static void update_read(gw_client *c) {
    bool want = want_read(c);
    if (want && !c->reading) {
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
            c->reading = true;
    } else if (!want && c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
}

void gw_client_resume_upstream(gw_client *c) {
    update_read(c);
}

typedef struct wreq {
    uv_write_t w;
    gw_client *c;
    char data[];
} wreq;

static void on_written(uv_write_t *w, int status) {
    wreq *wr = (wreq *)w;
    gw_client *c = wr->c;
    free(wr);
    c->writes--;
    if (c->closing)
        return;
    if (status) {
        client_close(c);
        return;
    }
    /* the response may have been held back by this queue */
    gw_request *q = c->req;
    if (q && q->up &&
        uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) <
            GW_WRITE_HIGH / 2)
        gw_upstream_pause(q->up, false);
}

void gw_client_write(gw_client *c, const char *data, size_t len) {
    if (c->req)
        c->req->bytes_out += len;
    if (!c->closing && len)
        gw_buf_add(&c->out, data, len);
}

static void client_flush_now(gw_client *c);

void gw_client_flush(gw_client *c) {
    if (c->closing || c->out.len == 0)
        return;
    if (c->out.len >= GW_FLUSH_AT) {
        client_flush_now(c);
        return;
    }
    gw_link_push(&c->w->dirty_clients, &c->dirty);
}

void gw_flush_pending(gw_worker *w) {
    /* requests first: the backends start on them while the responses go
     * out */
    while (w->dirty_ups) /* each flush takes its connection off the list */
        gw_upstream_flush_now(GW_OWNER(w->dirty_ups, gw_upconn, dirty));
    while (w->dirty_clients)
        client_flush_now(GW_OWNER(w->dirty_clients, gw_client, dirty));
}

int gw_try_send(int fd, const char *p, size_t len) {
    long n; /* not send(): a cancellation point in a threaded process,
               which takes and gives back asynchronous cancellation (two
               locked compare-and-swaps) around each call */
    do
        n = syscall(SYS_sendto, fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL, NULL,
                    0);
    while (n < 0 && errno == EINTR);
    if (n >= 0)
        return n ? (int)n : UV_EAGAIN;
    return errno == EAGAIN || errno == EWOULDBLOCK ? UV_EAGAIN : -errno;
}

/* Everything queued for c, to the socket now: tried at once without a
 * copy, the rest copied into a uv_write. */
static void client_flush_now(gw_client *c) {
    gw_link_unlink(&c->w->dirty_clients, &c->dirty);
    if (c->closing || (c->out.len == 0 && !c->out.failed))
        return;
    if (c->out.failed) { /* output lost to out-of-memory (gw.h) */
        client_close(c);
        return;
    }
    uv_stream_t *s = (uv_stream_t *)&c->tcp;
    size_t off = 0, len = c->out.len;
    c->out.len = 0;
    if (!c->writes) {
        int n = gw_try_send(c->fd, c->out.p, len);
        if (n > 0)
            off = (size_t)n;
        else if (n != UV_EAGAIN) {
            client_close(c);
            return;
        }
    }
    if (off == len)
        return;
    wreq *wr = malloc(sizeof *wr + (len - off));
    if (!wr) {
        client_close(c);
        return;
    }
    memcpy(wr->data, c->out.p + off, len - off);
    wr->c = c;
    uv_buf_t b = uv_buf_init(wr->data, (unsigned)(len - off));
    if (uv_write(&wr->w, s, &b, 1, on_written)) {
        free(wr);
        client_close(c);
        return;
    }
    c->writes++;
    gw_request *q = c->req;
    if (q && q->up && uv_stream_get_write_queue_size(s) > GW_WRITE_HIGH)
        gw_upstream_pause(q->up, true);
}

/* ------------------------------------------------------------------ */
/* Closing                                                              */
/* ------------------------------------------------------------------ */

static void on_client_handle_closed(uv_handle_t *h) {
    gw_client *c = h->data;
    if (--c->open_handles > 0)
        return;
    gw_worker *w = c->w;
    if (c->prev)
        c->prev->next = c->next;
    else
        w->client_list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    free(c->buf);
    gw_buf_free(&c->out);
    free(c);
    w->clients--;
    atomic_fetch_sub(&G.active_clients, 1);
    gw_worker_client_closed(w);
}

/* Request blocks of this worker thread kept for the next requests: a
 * block is ~3.7 KB (most of it the response's header offsets and the
 * upstream's host and instance, which are written before they are read),
 * and a calloc per request cleared all of
 * it; its upstream head and response header buffers keep their memory
 * too (each is refilled from len 0), so a steady request allocates
 * nothing for them (nor for the gateway's own response headers, xhdrs and
 * pre).
 * At most REQ_KEEP blocks are kept per thread. */
#define REQ_KEEP 64
static _Thread_local gw_request *req_free;
static _Thread_local unsigned req_nfree;

static gw_request *request_get(void) {
    gw_request *q = req_free;
    if (!q)
        return calloc(1, sizeof *q);
    req_free = (gw_request *)q->c;
    req_nfree--;
    memset(q, 0, GW_REQ_ZEROED);
    q->host[0] = q->instance[0] = '\0';
    q->head.len = q->rh.len = q->xhdrs.len = q->pre.len = 0;
    q->head.failed = q->rh.failed = q->xhdrs.failed = q->pre.failed = false;
    return q;
}

static void request_put(gw_request *q) {
    /* buffers grown by a large request go back to the system */
    if (req_nfree >= REQ_KEEP || q->head.cap > 16384 || q->rh.cap > 16384 ||
        q->xhdrs.cap > 16384 || q->pre.cap > 16384) {
        gw_buf_free(&q->head);
        gw_buf_free(&q->rh);
        gw_buf_free(&q->xhdrs);
        gw_buf_free(&q->pre);
        free(q);
        return;
    }
    q->c = (gw_client *)req_free;
    req_free = q;
    req_nfree++;
}

void gw_request_blocks_free(void) {
    while (req_free) {
        gw_request *q = req_free;
        req_free = (gw_request *)q->c;
        gw_buf_free(&q->head);
        gw_buf_free(&q->rh);
        gw_buf_free(&q->xhdrs);
        gw_buf_free(&q->pre);
        free(q);
    }
    req_nfree = 0;
}

static void request_free(gw_request *q) {
    if (q->up_lat_held) /* not finished (its client left): counted here */
        gw_metrics_upstream_latency(&q->w->metrics, q->up_lat_s);
    if (q->up)
        gw_upstream_abandon(q);
    if (q->snap)
        sy_snapshot_release(q->snap);
    for (size_t i = 0; i < q->nops; i++) {
        if (q->ops[i].owns) /* the strings of its call's ops */
            free(q->ops[i].name);
        free(q->ops[i].extra);
    }
    gw_forward_free(q);
    gw_policy_free(q);
    gw_cache_request_free(q);
    free(q->ops);
    for (size_t i = 0; i < q->ntried; i++)
        free(q->tried[i]);
    GW_OWN_ADD(&q->w->metrics.active_requests, -1);
    request_put(q);
}

static void client_close(gw_client *c) {
    if (c->closing)
        return;
    c->closing = true;
    gw_link_unlink(&c->w->dirty_clients, &c->dirty);
    if (c->req) {
        gw_request *q = c->req;
        c->req = NULL;
        q->status = q->status ? q->status : 499; /* the client left */
        gw_metrics_request(&c->w->metrics, q->route_id ? q->route_id : "",
                           q->status);
        gw_access_log(q);
        request_free(q);
    }
    uv_close((uv_handle_t *)&c->timer.timer, on_client_handle_closed);
    uv_close((uv_handle_t *)&c->tcp, on_client_handle_closed);
}

void gw_client_abort(gw_client *c) {
    client_close(c);
}

static void on_shutdown(uv_shutdown_t *s, int status) {
    (void)status;
    gw_client *c = s->data;
    free(s);
    client_close(c);
}

/* Close once every queued write has gone out. */
static void client_close_after_writes(gw_client *c) {
    if (c->closing)
        return;
    client_flush_now(c); /* uv_shutdown waits for libuv's queue only */
    if (c->closing)
        return;
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    uv_shutdown_t *s = malloc(sizeof *s);
    if (!s || (s->data = c,
               uv_shutdown(s, (uv_stream_t *)&c->tcp, on_shutdown) != 0)) {
        free(s);
        client_close(c);
    }
}

/* ------------------------------------------------------------------ */
/* Timers                                                               */
/* ------------------------------------------------------------------ */

static void on_client_timer(uv_timer_t *t) {
    gw_client *c = t->data;
    if (c->state == C_HEAD) {
        /* a head that does not arrive in time (slowloris) */
        static const char r408[] = "HTTP/1.1 408 Request Timeout\r\n"
                                   "Content-Length: 0\r\n"
                                   "Connection: close\r\n\r\n";
        gw_client_write(c, r408, sizeof r408 - 1);
        gw_metrics_request(&c->w->metrics, "", 408);
        client_close_after_writes(c);
    } else if (c->state == C_IDLE) {
        client_close(c);
    }
}

/* ------------------------------------------------------------------ */
/* Request head parsing                                                 */
/* ------------------------------------------------------------------ */

static size_t head_bytes(gw_client *c, const char *at, size_t len) {
    return (size_t)(at + len - (c->buf + c->body_base));
}

static int on_message_begin(http_parser *p) {
    gw_client *c = p->data;
    c->state = C_HEAD;
    c->url = NULL;
    c->url_len = 0;
    c->nh = 0;
    c->last = 0;
    c->error = 0;
    c->body_base = c->start; /* the head starts here */
    gw_deadline_set(&c->timer, on_client_timer, G.cfg.header_timeout_ms);
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len) {
    gw_client *c = p->data;
    if (!c->url)
        c->url = at;
    c->url_len += len;
    if (head_bytes(c, at, len) > G.cfg.max_header_bytes) {
        c->error = 414;
        return 1;
    }
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len) {
    gw_client *c = p->data;
    if (c->last != 1) {
        if (c->nh == GW_MAX_HEADERS) {
            c->error = 431;
            return 1;
        }
        c->hdrs[c->nh++] = (sy_header){{at, 0}, {"", 0}};
        c->last = 1;
    }
    c->hdrs[c->nh - 1].name.len += len;
    if (head_bytes(c, at, len) > G.cfg.max_header_bytes) {
        c->error = 431;
        return 1;
    }
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len) {
    gw_client *c = p->data;
    if (c->last != 2) {
        c->hdrs[c->nh - 1].value = (sy_str){at, 0};
        c->last = 2;
    }
    c->hdrs[c->nh - 1].value.len += len;
    if (head_bytes(c, at, len) > G.cfg.max_header_bytes) {
        c->error = 431;
        return 1;
    }
    return 0;
}

static int on_headers_complete(http_parser *p) {
    gw_client *c = p->data;
    gw_head_trim_values(c->hdrs, c->nh); /* the fast scan's are trimmed */
    c->event = 1;
    http_parser_pause(p, 1);
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
    gw_client *c = p->data;
    gw_request *q = c->req;
    if (!q)
        return 0;
    q->body_bytes += len;
    if (q->body_bytes > G.cfg.max_body_bytes) {
        c->error = 413;
        return 1;
    }
    if (!q->up)
        return 0; /* answered by the gateway: the body is dropped */
    gw_policy_keep_body(q, at, len);
    if (q->req_chunked) {
        char sz[24];
        int n = snprintf(sz, sizeof sz, "%zx\r\n", len);
        gw_upstream_write(q->up, sz, (size_t)n);
        gw_upstream_write(q->up, at, len);
        gw_upstream_write(q->up, "\r\n", 2);
    } else {
        gw_upstream_write(q->up, at, len);
    }
    return 0;
}

static int on_message_complete(http_parser *p) {
    gw_client *c = p->data;
    c->event = 2;
    http_parser_pause(p, 1);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Answers from the gateway                                             */
/* ------------------------------------------------------------------ */

void gw_request_respond(gw_request *q, int status, const char *headers,
                        const char *body) {
    gw_client *c = q->c;
    if (q->has_body && !q->msg_done)
        q->keep_alive = false; /* the rest of the body is not read */
    if (c->w->draining)
        q->keep_alive = false;
    q->status = status;
    size_t blen = body ? strlen(body) : 0;
    gw_buf out = {0};
    gw_buf_printf(&out,
                  "HTTP/1.1 %d %s\r\n%sContent-Length: %zu\r\n"
                  "Content-Type: %s\r\n%s\r\n",
                  status, gw_status_text(status), headers ? headers : "", blen,
                  blen && body[0] == '{' ? "application/json"
                                         : "text/plain; charset=utf-8",
                  gw_conn_line(q));
    if (!q->head_req && blen)
        gw_buf_add(&out, body, blen);
    gw_client_write(c, out.p, out.len);
    c->out.failed |= out.failed;
    gw_buf_free(&out);
    gw_client_flush(c);
    q->resp_started = true;
    q->body_flow = true; /* let the parser reach the end of the message */
    gw_request_response_done(q);
}

static void error_body(char *out, size_t cap, int status, const char *why) {
    snprintf(out, cap, "{\"status\":%d,\"error\":\"%s\"}\n", status,
             why ? why : gw_status_text(status));
}

static void respond_error(gw_request *q, int status, const char *why) {
    char body[256];
    error_body(body, sizeof body, status, why);
    gw_request_respond(q, status, NULL, body);
}

/* A request the parser rejected (before or without a gw_request). */
static void bad_request(gw_client *c, int status) {
    if (c->req && c->req->resp_started) {
        client_close(c);
        return;
    }
    if (c->req) {
        c->req->keep_alive = false;
        respond_error(c->req, status, NULL);
        return;
    }
    char body[128];
    error_body(body, sizeof body, status, NULL);
    gw_buf out = {0};
    gw_buf_printf(&out,
                  "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                  "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                  status, gw_status_text(status), strlen(body), body);
    gw_client_write(c, out.p, out.len);
    c->out.failed |= out.failed;
    gw_access_log_refused(c->peer, status, out.len);
    gw_buf_free(&out);
    gw_metrics_request(&c->w->metrics, "", status);
    client_close_after_writes(c);
}

/* ------------------------------------------------------------------ */
/* Routing a request                                                    */
/* ------------------------------------------------------------------ */

/* Build the upstream head for the target of match m, excluding the
 * instances already tried. 0, or the status to answer with. */
static int build_attempt(gw_request *q, sy_match *m) {
    sy_target t;
    sy_error err;
    int rc =
        sy_match_target(m, (const char *const *)q->tried, q->ntried, &t, &err);
    if (rc == SY_ENOINSTANCE)
        return q->ntried ? 502 : 503;
    if (rc)
        return 502;
    if (t.kind == SY_UPSTREAM_NONE)
        return -1; /* no://op: the gateway answers */
    gw_copy_str(q->host, sizeof q->host, t.host);
    q->port = t.port;
    q->lb = t.kind == SY_UPSTREAM_SERVICE;
    gw_copy_str(q->instance, sizeof q->instance, t.instance_id);
    /* read only with lb or an instance (report_outcome, the access log's
     * version): a url:// route's request skips its three lines */
    if (q->lb || q->instance[0])
        q->health = t;
    const char *sc = t.scheme; /* "http", byte by byte: no strcmp call */
    if (sc && !(sc[0] == 'h' && sc[1] == 't' && sc[2] == 't' && sc[3] == 'p' &&
                sc[4] == '\0'))
        return 502; /* https/ws upstreams are not supported here */
    return gw_upstream_head(q, &t);
}

int gw_request_rematch(gw_request *q, sy_match **m) {
    *m = NULL;
    return sy_snapshot_match(q->snap, q->w->ctx, &q->sreq, m) || !*m ? -1 : 0;
}

/* Match the request again on its own snapshot (the match result of the
 * first try may have been overwritten by other requests of this worker)
 * and build the next attempt. */
static int rematch_attempt(gw_request *q) {
    sy_match *m = NULL;
    if (gw_request_rematch(q, &m))
        return 502;
    return build_attempt(q, m);
}

int gw_request_retry_attempt(gw_request *q) {
    int st = rematch_attempt(q);
    if (st == 502 && q->ntried) { /* every instance tried: any again */
        for (size_t i = 0; i < q->ntried; i++)
            free(q->tried[i]);
        q->ntried = 0;
        st = rematch_attempt(q);
    }
    if (st)
        return st < 0 ? 502 : st;
    q->attempts++;
    gw_upstream_start(q);
    return 0;
}

void gw_request_connect_failed(gw_request *q, bool timeout) {
    q->up = NULL;
    sy_outcome o = timeout ? SY_OUTCOME_TIMEOUT : SY_OUTCOME_CONNECT_FAILURE;
    if (q->lb)
        sy_router_report_outcome(G.router, &q->health, o);
    /* without a Retry filter, connect failures of lb:// routes go to
     * another instance (--retries) */
    if (q->lb && !q->retry) {
        if (q->attempts <= G.cfg.retries && q->ntried < GW_MAX_TRIES) {
            q->tried[q->ntried++] = strdup(q->instance);
            atomic_fetch_add(&q->w->metrics.retries, 1);
            int st = rematch_attempt(q);
            if (st == 0) {
                q->attempts++;
                gw_upstream_start(q);
                return;
            }
        }
    }
    if (gw_policy_on_failure(q, o))
        return;
    respond_error(q, timeout ? 504 : 502,
                  timeout ? "upstream connect timeout"
                          : "upstream connect failed");
}

void gw_request_body_flow(gw_request *q) {
    q->body_flow = true;
    if (q->expect_100 && !q->sent_100 && !q->msg_done && !q->body_bytes) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        q->sent_100 = true;
        gw_client_write(q->c, cont, sizeof cont - 1);
        gw_client_flush(q->c);
    }
    client_kick(q->c);
}

enum { GW_HF_HEADERS = 1, GW_HF_CACHE = 2 };

/* Which host filters the gateway runs per request match m has: one pass,
 * a name compared only when its first letter is one of theirs (most
 * routes' host filters are policies: RequestRateLimiter, CircuitBreaker,
 * Retry). */
static unsigned host_flags(sy_match *m) {
    unsigned f = 0;
    size_t n = sy_match_host_filter_count(m);
    for (size_t i = 0; i < n; i++) {
        const char *name = sy_match_host_filter(m, i)->name;
        if ((name[0] == 'S' && strcmp(name, "SecureHeaders") == 0) ||
            (name[0] == 'F' && strcmp(name, "FallbackHeaders") == 0))
            f |= GW_HF_HEADERS;
        else if (name[0] == 'L' && strcmp(name, "LocalResponseCache") == 0)
            f |= GW_HF_CACHE;
    }
    return f;
}

/* host_flags of the request's match, kept with its route for the
 * snapshot's generation (the route's host filters are its filters' and
 * the snapshot's default filters': no pass over them a request). */
static unsigned host_flags_of(gw_request *q, sy_match *m) {
    uint64_t gen = sy_snapshot_generation(q->snap);
    gw_route_data *rd = q->rd;
    uint64_t kept =
        rd ? atomic_load_explicit(&rd->host_flags, memory_order_relaxed) : 0;
    if ((kept & 0x80) && kept >> 8 == gen)
        return (unsigned)(kept & 0x7f);
    unsigned f = host_flags(m);
    if (rd && gen < (1ull << 56))
        atomic_store_explicit(&rd->host_flags, gen << 8 | 0x80 | f,
                              memory_order_relaxed);
    return f;
}

void gw_request_proceed_ops(gw_request *q, sy_match *m) {
    if (q->hf_route != sy_match_route(m) || (q->hf & GW_HF_HEADERS))
        gw_host_filters(q, m);
    gw_request_copy_response_ops(q, m, &q->xhdrs);
    gw_xhdrs_clear(q);
}

void gw_request_proceed(gw_request *q, sy_match *m) {
    gw_request_proceed_ops(q, m);
    int st = sy_match_status(m);
    sy_upstream up;
    sy_route_upstream(sy_match_route(m), &up);
    /* SetStatus: on the gateway's own answer (no://op) an outer
     * (forwarding) route's wins, as its filter runs last; on a proxied
     * one only the answering route's, as in SCG the outer one finds the
     * answer written */
    if (!q->status_override ||
        (up.kind == SY_UPSTREAM_URL || up.kind == SY_UPSTREAM_SERVICE))
        q->status_override = st;
    if (up.kind == SY_UPSTREAM_FORWARD) {
        gw_forward_route(q, m, up.path);
        return;
    }
    st = build_attempt(q, m);
    if (st < 0) { /* no://op: its status (SetStatus, else 200) and headers */
        gw_buf hdr = {0};
        gw_response_ops_text(q, &hdr);
        if (hdr.failed)
            respond_error(q, 500, "out of memory");
        else
            gw_request_respond(q, q->status_override ? q->status_override : 200,
                               hdr.p, NULL);
        gw_buf_free(&hdr);
        return;
    }
    if (st) {
        respond_error(q, st,
                      st == 503 ? "no instance available" : "bad upstream");
        return;
    }
    if (q->c->p.upgrade)
        gw_upgrade_dropped(q);
    q->attempts = 1;
    gw_upstream_start(q);
}

/* An origin-form target (RFC 9112 3.2.1: "/path?query#fragment", what
 * clients send to a gateway) split as http_parser_parse_url splits it: the
 * path up to the first '?' or '#', the query after that '?' up to the next
 * '#', an empty query not set. Its bytes were checked one by one by
 * http_parser_execute (the same per-character rule), so this saves only
 * parse_url's second pass over them (~300 instructions a request). */
static void split_origin_form(const char *url, size_t len, sy_request *r) {
    size_t i = 0;
    while (i < len && url[i] != '?' && url[i] != '#')
        i++;
    r->path = (sy_str){url, i};
    if (i < len && url[i] == '?') {
        size_t q = ++i;
        while (i < len && url[i] != '#')
            i++;
        if (i > q)
            r->query = (sy_str){url + q, i - q};
    }
}

/* http_should_keep_alive for a request, without its two calls into
 * http-parser (~35 instructions a request): a request never needs the
 * connection's end to end its message (http_message_needs_eof), so only
 * the version and the Connection header's flags decide. */
static bool request_keep_alive(const http_parser *p) {
    if (p->http_major > 0 && p->http_minor > 0)
        return !(p->flags & F_CONNECTION_CLOSE);
    return (p->flags & F_CONNECTION_KEEP_ALIVE) != 0;
}

/* The request's method as text, from http-parser's own list (no call
 * into it and no strlen a request). */
static sy_str method_text(unsigned m) {
#define GW_METHOD_TEXT(num, name, string) [num] = {#string, sizeof #string - 1},
    static const sy_str names[] = {HTTP_METHOD_MAP(GW_METHOD_TEXT)};
#undef GW_METHOD_TEXT
    if (m < sizeof names / sizeof names[0] && names[m].len)
        return names[m];
    const char *s = http_method_str((enum http_method)m);
    return (sy_str){s, strlen(s)};
}

static void request_begin(gw_client *c) {
    gw_worker *w = c->w;
    gw_request *q = request_get();
    if (!q) {
        client_close(c);
        return;
    }
    GW_OWN_ADD(&w->metrics.active_requests, 1);
    q->c = c;
    q->w = w;
    q->route_id = "";
    q->t_start_ns = gw_loop_ns(w);
    c->req = q;
    c->state = C_ACTIVE;
    gw_deadline_clear(&c->timer);
    http_parser *p = &c->p;
    q->keep_alive = request_keep_alive(p) && !w->draining && !p->upgrade;
    q->http10 = p->http_major == 1 && p->http_minor == 0;
    q->head_req = p->method == HTTP_HEAD;
    q->req_chunked = (p->flags & F_CHUNKED) != 0;
    bool has_cl = (p->flags & F_CONTENTLENGTH) != 0;
    q->has_body = q->req_chunked || (has_cl && p->content_length > 0);
    c->body_base = c->start;
    q->expect_100 = q->has_body && gw_expects_100(p, c->hdrs, c->nh);

    sy_request *r = &q->sreq;
    *r = (sy_request)SY_REQUEST_INIT;
    r->method = method_text(p->method);
    r->scheme = (sy_str){"http", 4};
    r->headers = c->hdrs;
    r->header_count = c->nh;
    r->remote_addr = (sy_str){c->peer, c->peer_len};
    r->seed = gw_worker_rand(w);
    r->content_length = has_cl ? (int64_t)p->content_length : -1;
    gw_trace_begin(&q->trace, r);
    if (has_cl && p->content_length > G.cfg.max_body_bytes) {
        respond_error(q, 413, "request body too large");
        return;
    }
    if (p->method == HTTP_CONNECT) {
        respond_error(q, 405, "CONNECT is not proxied");
        return;
    }
    struct http_parser_url u;
    http_parser_url_init(&u);
    if (c->url && c->url_len && c->url[0] == '/') {
        split_origin_form(c->url, c->url_len, r);
    } else {
        if (!c->url || http_parser_parse_url(c->url, c->url_len,
                                             p->method == HTTP_CONNECT, &u)) {
            respond_error(q, 400, "bad request target");
            return;
        }
        if (u.field_set & (1 << UF_PATH))
            r->path = (sy_str){c->url + u.field_data[UF_PATH].off,
                               u.field_data[UF_PATH].len};
        else
            r->path = (sy_str){"/", 1};
        if (r->path.ptr[0] != '/') {
            respond_error(q, 400, "bad request target");
            return;
        }
        if (u.field_set & (1 << UF_QUERY))
            r->query = (sy_str){c->url + u.field_data[UF_QUERY].off,
                                u.field_data[UF_QUERY].len};
    }
    size_t hosts = 0;
    for (size_t i = 0; i < c->nh; i++)
        if (c->hdrs[i].name.len == 4 &&
            gw_eq_lower(c->hdrs[i].name.ptr, "host", 4) && hosts++ == 0)
            r->host = c->hdrs[i].value;
    if (hosts > 1) { /* RFC 9112 3.2: ambiguous, a smuggling vector */
        respond_error(q, 400, "more than one Host header");
        return;
    }
    if (u.field_set & (1 << UF_HOST)) { /* absolute-form wins */
        r->host = (sy_str){c->url + u.field_data[UF_HOST].off,
                           u.field_data[UF_HOST].len};
    }
    if (!r->host.len && p->http_major == 1 && p->http_minor >= 1) {
        respond_error(q, 400, "missing Host header");
        return;
    }

    gw_recent_remember(q);
    q->snap = sy_router_acquire(G.router);
    gw_request_dispatch(q);
}

/* The route's CORS answer (cors.c) for a request whose route carries a
 * `cors` metadata: true when the gateway answered (a preflight, or 403);
 * else the CORS headers for the response are in *hdrs. */
static bool cors_check(gw_request *q, gw_buf *hdrs) {
    if (q->rd && q->rd->cors_error && gw_cors_is_cross_origin(q)) {
        char why[200];
        snprintf(why, sizeof why, "route metadata.cors: %.150s",
                 q->rd->cors_error);
        respond_error(q, 500, why);
        return true;
    }
    if (!q->rd || !q->rd->cors)
        return false;
    int st = gw_cors_check(q->rd->cors, q, hdrs);
    if (!st)
        return false;
    gw_request_respond(q, st, hdrs->p,
                       st == 403 ? "Invalid CORS request" : NULL);
    return true;
}

/* A preflight whose route takes only other methods: the route of the
 * request it announces (Access-Control-Request-Method) answers it. */
static bool preflight_by_method(gw_request *q) {
    sy_str want = gw_cors_preflight_method(q);
    if (!want.len)
        return false;
    sy_request r = q->sreq;
    r.method = want;
    sy_match *m = NULL;
    if (sy_snapshot_match(q->snap, q->w->ctx, &r, &m) || !m)
        return false;
    gw_route_data *rd = sy_route_host_data(sy_match_route(m));
    if (!rd || !rd->cors)
        return false;
    q->route_id = sy_route_id(sy_match_route(m));
    q->rd = rd;
    gw_buf hdrs = {0};
    bool answered = cors_check(q, &hdrs);
    gw_buf_free(&hdrs);
    return answered;
}

void gw_request_dispatch(gw_request *q) {
    gw_worker *w = q->w;
    sy_match *m = NULL;
    int rc = sy_snapshot_match(q->snap, w->ctx, &q->sreq, &m);
    if (rc) {
        respond_error(q, 500, sy_strerror(rc));
        return;
    }
    if (!m) {
        sy_str allow = {0, 0};
        switch (sy_match_ctx_nomatch(w->ctx, &allow)) {
        case SY_NOMATCH_METHOD: {
            char hdr[300];
            snprintf(hdr, sizeof hdr, "Allow: %.*s\r\n", (int)allow.len,
                     allow.ptr ? allow.ptr : "");
            if (preflight_by_method(q))
                return;
            char body[128];
            error_body(body, sizeof body, 405, "method not allowed");
            gw_request_respond(q, 405, hdr, body);
            return;
        }
        case SY_NOMATCH_BAD_PATH: respond_error(q, 400, "bad path"); return;
        case SY_NOMATCH_BUDGET:
            respond_error(q, 503, "matching budget exhausted");
            return;
        default: respond_error(q, 404, "no route"); return;
        }
    }
    const sy_route *route = sy_match_route(m);
    q->route_id = sy_route_id(route);
    q->rd = sy_route_host_data(route);
    gw_xhdrs_clear(q);
    if (cors_check(q, &q->xhdrs))
        return;
    switch (sy_match_action(m)) {
    case SY_ACTION_REDIRECT: {
        sy_str loc = sy_match_redirect(m);
        gw_buf_adds(&q->xhdrs, "Location: ");
        gw_buf_add(&q->xhdrs, loc.ptr, loc.len);
        gw_buf_adds(&q->xhdrs, "\r\n");
        if (q->xhdrs.failed)
            respond_error(q, 500, "out of memory");
        else
            gw_request_respond(q, sy_match_status(m), q->xhdrs.p, NULL);
        break;
    }
    case SY_ACTION_RESPOND: { /* RequestSize 413, RequestHeaderSize 431 */
        /* with the filter's error header (SCG's errorMessage) and the
         * route's other response edits, as a no://op answer */
        int st = sy_match_status(m);
        gw_request_copy_response_ops(q, m, &q->xhdrs);
        gw_xhdrs_clear(q);
        gw_buf hdr = {0};
        gw_response_ops_text(q, &hdr);
        char body[256];
        error_body(body, sizeof body, st ? st : 500, NULL);
        if (hdr.failed)
            respond_error(q, 500, "out of memory");
        else
            gw_request_respond(q, st ? st : 500, hdr.p, body);
        gw_buf_free(&hdr);
        break;
    }
    case SY_ACTION_PROXY:
        q->hf = host_flags_of(q, m);
        q->hf_route = route;
        if (!(q->hf & GW_HF_CACHE))
            gw_cache_request_free(q);   /* what a lookup does first */
        else if (gw_cache_lookup(q, m)) /* LocalResponseCache (cache.c) */
            break;
        gw_policy_begin(q, m);
        break;
    }
}

/* The client's message is complete. */
static void request_msg_done(gw_client *c) {
    gw_request *q = c->req;
    if (!q)
        return;
    q->msg_done = true;
    if (q->up) {
        if (q->req_chunked)
            gw_upstream_write(q->up, "0\r\n\r\n", 5);
        gw_upstream_request_done(q->up, q);
    }
    if (q->resp_done)
        request_finish(q);
}

void gw_request_response_done(gw_request *q) {
    q->resp_done = true;
    if (q->msg_done || !q->keep_alive)
        request_finish(q);
    else
        client_kick(q->c);
}

static void request_finish(gw_request *q) {
    gw_client *c = q->c;
    if (q->finished)
        return;
    q->finished = true;
    double secs = (double)(gw_loop_ns(c->w) - q->t_start_ns) / 1e9;
    gw_metrics_done(&c->w->metrics, q->route_id, q->status, secs,
                    q->up_lat_held ? q->up_lat_s : -1.0);
    q->up_lat_held = false;
    gw_access_log(q);
    bool keep = q->keep_alive && !c->w->draining;
    if (q->up) /* still attached: the response was cut short */
        keep = false;
    c->req = NULL;
    request_free(q);
    if (!keep) {
        client_close_after_writes(c);
        return;
    }
    c->state = C_IDLE;
    if (c->start && c->end > c->start) /* a pipelined request's bytes */
        memmove(c->buf, c->buf + c->start, c->end - c->start);
    c->end -= c->start;
    c->start = 0;
    c->body_base = 0;
    gw_deadline_set(&c->timer, on_client_timer, G.cfg.idle_timeout_ms);
    client_kick(c);
}

/* ------------------------------------------------------------------ */
/* The parse loop                                                       */
/* ------------------------------------------------------------------ */

/* A plainly common head (head_scan.c) read without http-parser, with its
 * events, fields and byte offsets as http-parser's; 0 when http-parser is
 * to read the bytes, 1/2 head/message done, 3 body bytes taken, -1 an
 * on_body error (http-parser's errno then set as it would set it). */
static int fast_step(gw_client *c) {
    http_parser *p = &c->p;
    const char *at = c->buf + c->start;
    size_t avail = c->end - c->start;
    if (!c->fast) {
        size_t max = G.cfg.max_header_bytes < HTTP_MAX_HEADER_SIZE
                         ? G.cfg.max_header_bytes
                         : HTTP_MAX_HEADER_SIZE;
        gw_head_req h;
        if (!gw_head_scan_request(at, avail, max, c->hdrs, GW_MAX_HEADERS, &h))
            return 0;
        on_message_begin(p);
        c->url = h.url;
        c->url_len = h.url_len;
        c->nh = h.nh;
        c->last = 2;
        p->method = h.method;
        p->http_major = 1;
        p->http_minor = h.http_minor;
        p->flags = h.flags;
        p->content_length = h.content_length;
        p->upgrade = 0;
        c->start += h.head_len - 1;
        c->fast = 1;
        return 1;
    }
    if (c->fast == 1) {
        c->start++, at++, avail--;
        if (p->content_length == 0 || p->content_length == UINT64_MAX) {
            c->fast = 0;
            return 2;
        }
        c->fast = 2;
        c->fast_left = p->content_length;
        if (!avail)
            return 3;
    }
    size_t n = avail < c->fast_left ? avail : (size_t)c->fast_left;
    c->start += n;
    c->fast_left -= n;
    if (on_body(p, at, n)) {
        c->fast = 0;
        p->http_errno = HPE_CB_body;
        return -1;
    }
    if (c->fast_left)
        return 3;
    c->fast = 0;
    return 2;
}

static void client_parse(gw_client *c) {
    c->in_parse = true;
    while (!c->closing) {
        gw_request *q = c->req;
        if (q && (!q->body_flow || q->msg_done))
            break;
        if (c->start == c->end)
            break;
        int ev = c->fast || c->state == C_IDLE ? fast_step(c) : 0;
        if (!ev) {
            c->start += http_parser_execute(&c->p, &settings, c->buf + c->start,
                                            c->end - c->start);
            enum http_errno e = HTTP_PARSER_ERRNO(&c->p);
            if (e == HPE_PAUSED) {
                http_parser_pause(&c->p, 0);
                ev = c->event;
                c->event = 0;
            } else if (e != HPE_OK) {
                ev = -1;
            }
        }
        if (ev < 0) {
            c->in_parse = false;
            bad_request(c, c->error ? c->error : 400);
            return;
        }
        if (ev == 1)
            request_begin(c);
        else if (ev == 2)
            request_msg_done(c);
    }
    c->in_parse = false;
    if (c->req && c->req->up)
        gw_upstream_flush(c->req->up);
    if (c->closing)
        return;
    if (c->start == c->end) {
        if (c->state == C_IDLE)
            c->start = c->end = 0;
        else if (c->state == C_ACTIVE && c->req && !c->req->msg_done)
            c->start = c->end = c->body_base;
    }
    if (c->state != C_ACTIVE && c->end == c->cap) {
        bad_request(c, 431);
        return;
    }
    update_read(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    (void)buf;
    gw_client *c = s->data;
    if (nread == UV_EOF && c->req && c->req->msg_done && !c->req->resp_done) {
        /* half-closed after its request: answer it, then close */
        c->eof = true;
        c->req->keep_alive = false;
        update_read(c);
        return;
    }
    if (nread < 0) {
        client_close(c);
        return;
    }
    c->end += (size_t)nread;
    client_parse(c);
}

void gw_client_accept(gw_worker *w, uv_stream_t *server) {
    gw_client *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->cap = G.cfg.max_header_bytes + 65536;
    c->buf = malloc(c->cap);
    if (!c->buf) {
        free(c);
        return;
    }
    c->w = w;
    uv_tcp_init(&w->loop, &c->tcp);
    c->tcp.data = c;
    gw_deadline_init(&w->loop, &c->timer, c);
    c->open_handles = 2;
    w->clients++;
    atomic_fetch_add(&G.active_clients, 1);
    c->next = w->client_list;
    if (c->next)
        c->next->prev = c;
    w->client_list = c;
    uv_os_fd_t fd;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) ||
        uv_fileno((uv_handle_t *)&c->tcp, &fd)) {
        client_close(c);
        return;
    }
    c->fd = fd;
    uv_tcp_nodelay(&c->tcp, 1);
    struct sockaddr_storage ss;
    int sl = sizeof ss;
    snprintf(c->peer, sizeof c->peer, "0.0.0.0");
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET)
            uv_ip4_name((struct sockaddr_in *)&ss, c->peer, sizeof c->peer);
        else if (ss.ss_family == AF_INET6)
            uv_ip6_name((struct sockaddr_in6 *)&ss, c->peer, sizeof c->peer);
        c->peer_port = ntohs(ss.ss_family == AF_INET6
                                 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                 : ((struct sockaddr_in *)&ss)->sin_port);
    }
    c->peer_len = strlen(c->peer);
    http_parser_init(&c->p, HTTP_REQUEST);
    c->p.data = c;
    c->state = C_IDLE;
    /* the first request must start arriving within the header timeout */
    gw_deadline_set(&c->timer, on_client_timer, G.cfg.header_timeout_ms);
    update_read(c);
}

/* Draining: close idle keep-alive connections, let active ones finish. */
void gw_clients_drain(gw_worker *w) {
    gw_client *c = w->client_list;
    while (c) {
        gw_client *next = c->next;
        if (c->state == C_IDLE && !c->req && c->start == c->end)
            client_close(c);
        else if (c->req)
            c->req->keep_alive = false;
        c = next;
    }
}

__attribute__((constructor)) static void init_settings(void) {
    settings.on_message_begin = on_message_begin;
    settings.on_url = on_url;
    settings.on_header_field = on_header_field;
    settings.on_header_value = on_header_value;
    settings.on_headers_complete = on_headers_complete;
    settings.on_body = on_body;
    settings.on_message_complete = on_message_complete;
}
