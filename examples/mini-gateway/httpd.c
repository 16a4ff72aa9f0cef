/*
 * httpd.c - a small buffered HTTP/1.1 server on libuv and http-parser, for
 * the admin API and the test backend: each request is read whole (body
 * included, up to a limit), handed to a handler, and answered with
 * httpd_respond (at once or later); keep-alive and pipelining are handled
 * by pausing the parser between requests.
 */
#define _DEFAULT_SOURCE
#include "gw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct httpd {
    uv_tcp_t tcp;
    uv_loop_t *loop;
    httpd_handler handler;
    void *data;
    size_t max_body;
    struct httpd_conn *conns;
    bool closing;
};

struct httpd_conn {
    uv_tcp_t tcp;
    httpd *srv;
    struct httpd_conn *next, *prev;
    http_parser p;
    gw_buf url, hb, body, pending;
    size_t name_off[GW_MAX_HEADERS], val_off[GW_MAX_HEADERS];
    size_t nh;
    int last; /* 0 none, 1 field, 2 value */
    bool busy, closing, dead, too_big, too_many;
    httpd_req req;
    char rbuf[16384];
};

static http_parser_settings settings;

static void conn_free(httpd_conn *c) {
    gw_buf_free(&c->url);
    gw_buf_free(&c->hb);
    gw_buf_free(&c->body);
    gw_buf_free(&c->pending);
    free(c);
}

/* A connection closed while its request is with the handler lives on until
 * the handler answers (httpd_respond frees it then). */
static void conn_closed(uv_handle_t *h) {
    httpd_conn *c = h->data;
    if (c->busy)
        c->dead = true;
    else
        conn_free(c);
}

static void conn_close(httpd_conn *c) {
    if (c->closing)
        return;
    c->closing = true;
    if (c->prev)
        c->prev->next = c->next;
    else
        c->srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void reset_req(httpd_conn *c) {
    c->url.len = c->hb.len = c->body.len = 0;
    c->nh = 0;
    c->last = 0;
    c->too_big = c->too_many = false;
}

static int on_begin(http_parser *p) {
    reset_req(p->data);
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len) {
    httpd_conn *c = p->data;
    gw_buf_add(&c->url, at, len);
    return c->url.len > 65536 || c->url.failed;
}

static int on_field(http_parser *p, const char *at, size_t len) {
    httpd_conn *c = p->data;
    if (c->last != 1) {
        if (c->nh == GW_MAX_HEADERS) {
            c->too_many = true;
            return 1;
        }
        if (c->last == 2)
            gw_buf_add(&c->hb, "", 1);
        c->name_off[c->nh++] = c->hb.len;
        c->last = 1;
    }
    gw_buf_add(&c->hb, at, len);
    return c->hb.len > 65536 || c->hb.failed;
}

static int on_value(http_parser *p, const char *at, size_t len) {
    httpd_conn *c = p->data;
    if (c->last != 2) {
        gw_buf_add(&c->hb, "", 1);
        c->val_off[c->nh - 1] = c->hb.len;
        c->last = 2;
    }
    gw_buf_add(&c->hb, at, len);
    return c->hb.len > 65536 || c->hb.failed;
}

static int on_headers_complete(http_parser *p) {
    httpd_conn *c = p->data;
    if (c->last == 1) { /* a name without value */
        gw_buf_add(&c->hb, "", 1);
        c->val_off[c->nh - 1] = c->hb.len;
    }
    gw_buf_add(&c->hb, "", 1);
    if (c->hb.failed)
        return -1;
    if (p->content_length != ULLONG_MAX &&
        p->content_length > c->srv->max_body) {
        c->too_big = true;
        return -1;
    }
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
    httpd_conn *c = p->data;
    if (c->body.len + len > c->srv->max_body) {
        c->too_big = true;
        return 1;
    }
    gw_buf_add(&c->body, at, len);
    return c->body.failed;
}

static int on_message_complete(http_parser *p) {
    httpd_conn *c = p->data;
    httpd_req *r = &c->req;
    memset(r, 0, sizeof *r);
    r->method = http_method_str((enum http_method)p->method);
    gw_buf_add(&c->url, "", 0);
    gw_buf_add(&c->body, "", 0);
    if (c->url.failed || c->body.failed)
        return -1; /* out of memory (gw.h): the connection fails */
    r->url = c->url.p;
    r->body = c->body.p;
    r->body_len = c->body.len;
    r->header_count = c->nh;
    for (size_t i = 0; i < c->nh; i++) {
        const char *n = c->hb.p + c->name_off[i];
        const char *v = c->hb.p + c->val_off[i];
        r->headers[i] = (sy_header){{n, strlen(n)}, {v, strlen(v)}};
    }
    r->keep_alive = http_should_keep_alive(p);
    r->http_minor = p->http_minor;
    c->busy = true;
    http_parser_pause(p, 1);
    return 0;
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
    (void)hint;
    httpd_conn *c = h->data;
    *buf = uv_buf_init(c->rbuf, sizeof c->rbuf);
}

static void dispatch(httpd_conn *c);

static void send_error(httpd_conn *c, int status) {
    c->req.keep_alive = false;
    char body[128];
    int n = snprintf(body, sizeof body, "{\"error\":\"%s\"}\n",
                     gw_status_text(status));
    httpd_respond(c, status, "application/json", NULL, body, (size_t)n);
}

/* Parse the pending bytes; stops at the end of one request. */
static void parse_pending(httpd_conn *c) {
    size_t n =
        http_parser_execute(&c->p, &settings, c->pending.p, c->pending.len);
    enum http_errno e = HTTP_PARSER_ERRNO(&c->p);
    if (e == HPE_PAUSED) {
        memmove(c->pending.p, c->pending.p + n, c->pending.len - n);
        c->pending.len -= n;
        http_parser_pause(&c->p, 0);
        dispatch(c);
        /* an answer still to come: stop reading until it went out (a
         * stop and start around every answer would cost the backend two
         * epoll_ctl calls per request) */
        if (c->busy && !c->closing)
            uv_read_stop((uv_stream_t *)&c->tcp);
        return;
    }
    if (e != HPE_OK) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        send_error(c, c->too_big ? 413 : c->too_many ? 431 : 400);
        return;
    }
    c->pending.len = 0;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    httpd_conn *c = s->data;
    if (nread < 0) {
        conn_close(c);
        return;
    }
    if (nread == 0)
        return;
    gw_buf_add(&c->pending, buf->base, (size_t)nread);
    if (c->pending.failed) { /* out of memory (gw.h): this connection */
        conn_close(c);
        return;
    }
    if (!c->busy)
        parse_pending(c);
}

static void dispatch(httpd_conn *c) {
    httpd_req *r = &c->req;
    /* path and query: split in place */
    char *q = strchr(r->url, '?');
    if (q) {
        *q = 0;
        r->query = q + 1;
    } else {
        r->query = r->url + strlen(r->url);
    }
    r->path = r->url;
    c->srv->handler(c, r, c->srv->data);
}

typedef struct wreq {
    uv_write_t w;
    httpd_conn *c;
    bool close_after;
    char data[];
} wreq;

static void on_written(uv_write_t *w, int status) {
    wreq *wr = (wreq *)w;
    httpd_conn *c = wr->c;
    bool close_after = wr->close_after;
    free(wr);
    if (status || close_after)
        conn_close(c);
}

void httpd_respond(httpd_conn *c, int status, const char *content_type,
                   const char *headers, const char *body, size_t len) {
    if (c->dead) {
        conn_free(c);
        return;
    }
    if (c->closing) {
        c->busy = false;
        return;
    }
    bool keep = c->req.keep_alive && !c->srv->closing;
    gw_buf out = {0};
    gw_buf_printf(&out,
                  "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
                  "Content-Length: %zu\r\n%s%s\r\n",
                  status, gw_status_text(status),
                  content_type ? content_type : "text/plain", len,
                  headers ? headers : "", keep ? "" : "Connection: close\r\n");
    bool head = strcmp(c->req.method ? c->req.method : "", "HEAD") == 0;
    if (!head)
        gw_buf_add(&out, body, len);
    if (out.failed) /* out of memory (gw.h): the connection fails */
        out.len = 0, keep = false;
    /* at once when the socket takes it all (no copy, and no write
     * callback: uv_write's would re-register the socket with epoll),
     * else the rest through uv_write */
    uv_stream_t *s = (uv_stream_t *)&c->tcp;
    size_t off = 0;
    if (uv_stream_get_write_queue_size(s) == 0) {
        uv_buf_t b = uv_buf_init(out.p, (unsigned)out.len);
        int n = uv_try_write(s, &b, 1);
        if (n > 0)
            off = (size_t)n;
        else if (n != UV_EAGAIN)
            off = SIZE_MAX; /* broken */
    }
    wreq *wr = NULL;
    if (off < out.len && (wr = malloc(sizeof *wr + (out.len - off))) != NULL) {
        memcpy(wr->data, out.p + off, out.len - off);
        wr->c = c;
        wr->close_after = !keep;
        uv_buf_t b = uv_buf_init(wr->data, (unsigned)(out.len - off));
        if (uv_write(&wr->w, s, &b, 1, on_written)) {
            free(wr);
            wr = NULL;
        }
    }
    bool sent = off == out.len || wr;
    gw_buf_free(&out);
    if (!sent || (!keep && !wr)) { /* broken, or all out and done */
        c->busy = false;
        conn_close(c);
        return;
    }
    c->busy = false;
    if (!keep)
        return;
    reset_req(c);
    if (c->pending.len)
        parse_pending(c);
    if (!c->busy && !c->closing)
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

const char *httpd_header(const httpd_req *r, const char *name, size_t *len) {
    size_t nl = strlen(name);
    for (size_t i = 0; i < r->header_count; i++)
        if (r->headers[i].name.len == nl &&
            strncasecmp(r->headers[i].name.ptr, name, nl) == 0) {
            if (len)
                *len = r->headers[i].value.len;
            return r->headers[i].value.ptr;
        }
    return NULL;
}

uv_loop_t *httpd_loop(httpd_conn *c) {
    return c->srv->loop;
}

static void on_connection(uv_stream_t *server, int status) {
    httpd *s = server->data;
    if (status < 0)
        return;
    httpd_conn *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->srv = s;
    uv_tcp_init(s->loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp)) {
        uv_close((uv_handle_t *)&c->tcp, conn_closed);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    http_parser_init(&c->p, HTTP_REQUEST);
    c->p.data = c;
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

httpd *httpd_new(uv_loop_t *loop, const char *host, int port, httpd_handler h,
                 void *data, size_t max_body) {
    settings.on_message_begin = on_begin;
    settings.on_url = on_url;
    settings.on_header_field = on_field;
    settings.on_header_value = on_value;
    settings.on_headers_complete = on_headers_complete;
    settings.on_body = on_body;
    settings.on_message_complete = on_message_complete;
    httpd *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->loop = loop;
    s->handler = h;
    s->data = data;
    s->max_body = max_body;
    s->tcp.data = s;
    int rc = gw_listen_tcp(loop, &s->tcp, host, port, false, on_connection);
    if (rc) { /* fatal for every caller: the process exits */
        gw_log("cannot listen on %s:%d: %s", host, port, uv_strerror(rc));
        return NULL;
    }
    return s;
}

static void srv_closed(uv_handle_t *h) {
    free(h->data);
}

void httpd_close(httpd *s) {
    if (!s)
        return;
    s->closing = true;
    while (s->conns)
        conn_close(s->conns);
    uv_close((uv_handle_t *)&s->tcp, srv_closed);
}
