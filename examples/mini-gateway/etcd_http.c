/*
 * etcd_http.c - the etcd source's HTTP/1.1 client (etcd_http.h): connect
 * (resolve, TCP, the transport's start), request (the bytes through the
 * transport), response (http-parser; a whole body, or a stream delivered
 * line by line with the stamps of the reads that brought each line). One
 * request per connection; the exchange is freed once libuv lets go of it.
 */
#include "etcd_http.h"

#include <http_parser.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define READ_CHUNK 65536

bool etcd_buf_add(etcd_buf *b, const char *p, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q)
            return false;
        b->p = q;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = '\0';
    return true;
}

void etcd_buf_free(etcd_buf *b) {
    free(b->p);
    *b = (etcd_buf){0};
}

int64_t etcd_wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

struct etcd_http {
    etcd_http_request req; /* its strings are ours */
    uv_getaddrinfo_t gai;
    uv_tcp_t tcp;
    uv_connect_t conn;
    uv_timer_t timer;
    http_parser parser;
    char *out; /* the request's bytes */
    size_t out_len;
    etcd_buf body;
    char rbuf[READ_CHUNK];
    int status;
    bool complete;       /* message complete */
    bool timed;          /* the timer runs: reset by every read (off once a
                            stream's head came: its owner watches it) */
    bool closing;        /* the owner is done with it */
    bool gai_pending;    /* getaddrinfo not called back yet */
    size_t scanned;      /* streaming: body bytes already searched for '\n' */
    int64_t read_us;     /* wall clock of the read being parsed */
    int64_t line_us;     /* wall clock of the read that began the open line */
    uint32_t line_reads; /* reads that brought the open line so far */
    int handles;         /* open libuv handles */
    int writes;          /* uv_writes in flight */
};

typedef struct http_write {
    uv_write_t w;
    etcd_http *h;
    char data[];
} http_write;

static void http_maybe_free(etcd_http *h) {
    if (h->closing && h->handles == 0 && !h->gai_pending && h->writes == 0) {
        const etcd_http_transport *t = h->req.transport;
        if (t && t->close)
            t->close(t->state);
        free(h->out);
        etcd_buf_free(&h->body);
        free(h);
    }
}

static void http_handle_closed(uv_handle_t *hd) {
    etcd_http *h = hd->data;
    h->handles--;
    http_maybe_free(h);
}

void etcd_http_close(etcd_http *h) {
    if (!h || h->closing)
        return;
    h->closing = true;
    if (h->gai_pending)
        uv_cancel((uv_req_t *)&h->gai);
    if (!uv_is_closing((uv_handle_t *)&h->timer))
        uv_close((uv_handle_t *)&h->timer, http_handle_closed);
    if (h->handles == 2 && !uv_is_closing((uv_handle_t *)&h->tcp))
        uv_close((uv_handle_t *)&h->tcp, http_handle_closed);
    http_maybe_free(h);
}

static void http_fail(etcd_http *h, const char *err) {
    if (!h->closing)
        h->req.on_done(h->req.data, h->status, NULL, 0, err);
}

/* A failed libuv call of step `what`. */
static void http_fail_uv(etcd_http *h, const char *what, int rc) {
    char msg[128];
    snprintf(msg, sizeof msg, "%s: %s", what, uv_strerror(rc));
    http_fail(h, msg);
}

void etcd_http_line_stamps(const etcd_http *h, int64_t *first_us,
                           int64_t *last_us, uint32_t *reads) {
    *first_us = h ? h->line_us : 0;
    *last_us = h ? h->read_us : 0;
    *reads = h ? h->line_reads : 0;
}

/* ------------------------------------------------------------------ */
/* Response                                                             */
/* ------------------------------------------------------------------ */

static int on_hp_status(http_parser *p, const char *at, size_t n) {
    (void)at;
    (void)n;
    etcd_http *h = p->data;
    h->status = (int)p->status_code;
    return 0;
}

static int on_hp_headers_complete(http_parser *p) {
    etcd_http *h = p->data;
    h->status = (int)p->status_code;
    /* A stream stays open: only connecting and the response head are
     * timed here; its owner watches over the silence that follows. */
    if (h->req.streaming && h->status == 200) {
        uv_timer_stop(&h->timer);
        h->timed = false;
    }
    return 0;
}

/* Streaming: hand every complete line of the body to on_line. */
static int deliver_lines(etcd_http *h) {
    /* One JSON object per line; bytes before `scanned` hold no newline. */
    size_t start = 0;
    for (size_t i = h->scanned; i < h->body.len; i++) {
        const char *nl = memchr(h->body.p + i, '\n', h->body.len - i);
        if (!nl)
            break;
        i = (size_t)(nl - h->body.p);
        if (i > start)
            h->req.on_line(h->req.data, h->body.p + start, i - start);
        start = i + 1;
        if (h->closing)
            return -1;
    }
    if (start) {
        memmove(h->body.p, h->body.p + start, h->body.len - start);
        h->body.len -= start;
        h->body.p[h->body.len] = '\0';
        h->line_us = h->read_us; /* the rest begins the next line */
        h->line_reads = 1;
    }
    h->scanned = h->body.len;
    return 0;
}

static int on_hp_body(http_parser *p, const char *at, size_t n) {
    etcd_http *h = p->data;
    if (!h->body.len) { /* a line begins */
        h->line_us = h->read_us;
        h->line_reads = 0;
    }
    h->line_reads++;
    if (!etcd_buf_add(&h->body, at, n))
        return -1;
    if (!h->req.streaming || h->status != 200)
        return 0;
    return deliver_lines(h);
}

static int on_hp_complete(http_parser *p) {
    etcd_http *h = p->data;
    h->complete = true;
    return 0;
}

static const http_parser_settings hp_settings = {
    .on_status = on_hp_status,
    .on_headers_complete = on_hp_headers_complete,
    .on_body = on_hp_body,
    .on_message_complete = on_hp_complete,
};

static void http_finish(etcd_http *h) {
    if (h->closing)
        return;
    if (h->req.streaming && h->status == 200) {
        /* A stream that ends, even cleanly, means reconnecting. */
        if (h->body.len)
            h->req.on_line(h->req.data, h->body.p, h->body.len);
        if (!h->closing)
            http_fail(h, "watch stream ended");
        return;
    }
    h->req.on_done(h->req.data, h->status, h->body.p ? h->body.p : "",
                   h->body.len, NULL);
}

void etcd_http_deliver(etcd_http *h, const char *p, size_t n) {
    if (h->closing)
        return;
    size_t done = http_parser_execute(&h->parser, &hp_settings, p, n);
    if (h->closing)
        return;
    if (h->parser.http_errno != HPE_OK || done != n) {
        char msg[160];
        snprintf(msg, sizeof msg, "bad HTTP response at byte %zu: %s", done,
                 http_errno_description(HTTP_PARSER_ERRNO(&h->parser)));
        http_fail(h, msg);
        return;
    }
    if (h->complete)
        http_finish(h);
}

static void http_alloc(uv_handle_t *hd, size_t hint, uv_buf_t *b) {
    (void)hint;
    etcd_http *h = hd->data;
    *b = uv_buf_init(h->rbuf, sizeof h->rbuf);
}

static void http_timeout(uv_timer_t *t) {
    http_fail(t->data, "timed out");
}

static void http_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b) {
    etcd_http *h = s->data;
    if (h->closing)
        return;
    if (nread == UV_EOF) {
        http_parser_execute(&h->parser, &hp_settings, NULL, 0);
        if (h->complete)
            http_finish(h);
        else
            http_fail(h, "connection closed by etcd");
        return;
    }
    if (nread < 0) {
        http_fail_uv(h, "read", (int)nread);
        return;
    }
    h->read_us = etcd_wall_us();
    /* a timeout of silence, not of the whole answer: a large range page
     * over a slow link arrives as long as its bytes keep coming */
    if (h->timed)
        uv_timer_start(&h->timer, http_timeout, h->req.timeout_ms, 0);
    const etcd_http_transport *t = h->req.transport;
    int rc = t ? t->receive(h, t->state, b->base, (size_t)nread) : 0;
    if (rc)
        http_fail_uv(h, "receive", rc);
    else if (!t)
        etcd_http_deliver(h, b->base, (size_t)nread);
}

/* ------------------------------------------------------------------ */
/* Request                                                              */
/* ------------------------------------------------------------------ */

static void http_written(uv_write_t *w, int status) {
    http_write *hw = (http_write *)w;
    etcd_http *h = hw->h;
    free(hw);
    h->writes--;
    if (status < 0 && !h->closing)
        http_fail_uv(h, "write", status);
    http_maybe_free(h);
}

int etcd_http_write(etcd_http *h, const char *p, size_t n) {
    http_write *hw = malloc(sizeof *hw + n);
    if (!hw)
        return UV_ENOMEM;
    memcpy(hw->data, p, n);
    hw->h = h;
    uv_buf_t b = uv_buf_init(hw->data, (unsigned)n);
    int rc = uv_write(&hw->w, (uv_stream_t *)&h->tcp, &b, 1, http_written);
    if (rc)
        free(hw);
    else
        h->writes++;
    return rc;
}

/* The session can carry the request: send it, read the answer. */
void etcd_http_ready(etcd_http *h) {
    if (h->closing)
        return;
    const etcd_http_transport *t = h->req.transport;
    int rc = t ? t->send(h, t->state, h->out, h->out_len)
               : etcd_http_write(h, h->out, h->out_len);
    if (rc) {
        http_fail_uv(h, "write", rc);
        return;
    }
    if (!t && (rc = uv_read_start((uv_stream_t *)&h->tcp, http_alloc,
                                  http_read)) != 0)
        http_fail_uv(h, "read", rc);
}

/* ------------------------------------------------------------------ */
/* Connect                                                              */
/* ------------------------------------------------------------------ */

static void http_connected(uv_connect_t *c, int status) {
    etcd_http *h = c->data;
    if (h->closing)
        return;
    if (status < 0) {
        http_fail_uv(h, "connect", status);
        return;
    }
    uv_tcp_nodelay(&h->tcp, 1);
    uv_tcp_keepalive(&h->tcp, 1, 10);
    const etcd_http_transport *t = h->req.transport;
    if (!t) {
        etcd_http_ready(h);
        return;
    }
    /* a transport reads from the start (a handshake) */
    int rc = uv_read_start((uv_stream_t *)&h->tcp, http_alloc, http_read);
    if (!rc)
        rc = t->start(h, t->state);
    if (rc)
        http_fail_uv(h, "transport", rc);
}

static void http_resolved(uv_getaddrinfo_t *g, int status,
                          struct addrinfo *res) {
    etcd_http *h = g->data;
    h->gai_pending = false;
    if (h->closing) {
        uv_freeaddrinfo(res);
        http_maybe_free(h);
        return;
    }
    if (status < 0 || !res) {
        uv_freeaddrinfo(res);
        http_fail_uv(h, "resolve", status);
        return;
    }
    int rc = uv_tcp_init(h->req.loop, &h->tcp);
    if (!rc) {
        h->tcp.data = h;
        h->handles++;
        h->conn.data = h;
        rc = uv_tcp_connect(&h->conn, &h->tcp, res->ai_addr, http_connected);
    }
    uv_freeaddrinfo(res);
    if (rc)
        http_fail_uv(h, "connect", rc);
}

/* The request's bytes: head and JSON body. */
static char *request_bytes(const etcd_http_request *r, size_t *len) {
    const char *extra = r->headers ? r->headers : "";
    size_t jlen = strlen(r->body);
    size_t cap =
        jlen + strlen(r->path) + strlen(r->ep->host) + strlen(extra) + 256;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    int n = snprintf(out, cap,
                     "POST %s HTTP/1.1\r\nHost: %s:%s\r\n%s"
                     "Content-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     r->path, r->ep->host, r->ep->port, extra, jlen, r->body);
    *len = (size_t)n;
    return out;
}

etcd_http *etcd_http_post(const etcd_http_request *req) {
    etcd_http *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->req = *req;
    h->out = request_bytes(req, &h->out_len);
    if (!h->out) {
        free(h);
        return NULL;
    }
    /* the strings live in out from here; the owner's may go */
    h->req.path = h->req.body = h->req.headers = NULL;
    http_parser_init(&h->parser, HTTP_RESPONSE);
    h->parser.data = h;
    uv_timer_init(req->loop, &h->timer);
    h->timer.data = h;
    h->handles = 1;
    uv_timer_start(&h->timer, http_timeout, req->timeout_ms, 0);
    h->timed = true;
    struct addrinfo hints = {0};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    h->gai.data = h;
    h->gai_pending = true;
    int rc = uv_getaddrinfo(req->loop, &h->gai, http_resolved, req->ep->host,
                            req->ep->port, &hints);
    if (rc) {
        h->gai_pending = false;
        etcd_http_close(h);
        return NULL;
    }
    return h;
}
