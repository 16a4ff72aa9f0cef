/*
 * upstream.c - the upstream side of the proxy, on a worker's loop: take
 * a connection from its pool (upstream_pool.c) or connect with a timeout,
 * send the request head and stream the body, parse the response with
 * http-parser (a timeout for its head, then for each wait for body
 * bytes), apply the route's response edits (resp_edits.c) and SetStatus, stream
 * the body back (Content-Length passed on, chunked or close-delimited bodies
 * re-chunked), report outcomes to passive health, and give the connection
 * back to its pool.
 */
#define _DEFAULT_SOURCE
#include "proxy.h"
#include "resp_edits.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

static http_parser_settings up_settings;
static void up_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void up_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void on_response_timeout(uv_timer_t *t);
static void on_body_timeout(uv_timer_t *t);

/* ------------------------------------------------------------------ */
/* The requests in flight on a connection (pipelining)                  */
/* ------------------------------------------------------------------ */

static void enqueue(gw_upconn *u, gw_request *q) {
    unsigned i = (u->pfirst + u->npipe) % GW_PIPE_MAX;
    u->pq[i] = q;
    u->phead[i] = q->head_req;
    if (u->npipe++ == 0)
        u->req = q;
    q->up = u;
    q->rh.len = 0;
    q->rn = 0;
    q->rlast = 0;
    q->rcopy = false;
}

/* Take the first request off u (NULL when its client went away). */
static gw_request *dequeue(gw_upconn *u) {
    gw_request *q = u->pq[u->pfirst];
    u->pq[u->pfirst] = NULL;
    u->pfirst = (u->pfirst + 1) % GW_PIPE_MAX;
    u->npipe--;
    u->req = u->npipe ? u->pq[u->pfirst] : NULL;
    if (q && q->up == u)
        q->up = NULL;
    return q;
}

/* Take every request off u: those still with a client into out. */
static unsigned dequeue_all(gw_upconn *u, gw_request **out) {
    unsigned n = 0;
    while (u->npipe) {
        gw_request *q = dequeue(u);
        if (q && out)
            out[n++] = q;
    }
    return n;
}

/* GET, HEAD and OPTIONS without a body, and not an upgrade, may share a
 * connection with others (RFC 9112 9.3.2: idempotent, so a request left
 * unanswered when the connection breaks is sent again). */
static bool pipelinable(const gw_request *q) {
    if (G.cfg.upstream_pipeline < 2 || q->pipe_off || q->has_body ||
        q->req_chunked || q->c->p.upgrade)
        return false;
    sy_str m = q->sreq.method;
    return (m.len == 3 && memcmp(m.ptr, "GET", 3) == 0) ||
           (m.len == 4 && memcmp(m.ptr, "HEAD", 4) == 0) ||
           (m.len == 7 && memcmp(m.ptr, "OPTIONS", 7) == 0);
}

/* q was sent on a connection that broke before its answer began: once
 * more, on a fresh connection of its own. Not a failed attempt. */
static void resend(gw_request *q) {
    q->pipe_off = true;
    q->fresh = true;
    gw_upstream_start(q);
}

static void resend_all(gw_request **qs, unsigned n) {
    for (unsigned i = 0; i < n; i++)
        resend(qs[i]);
}

/* The response timer for u's first request, from now. */
static void arm_first(gw_upconn *u) {
    gw_request *q = u->req;
    gw_deadline_set(&u->timer, on_response_timeout,
                    q ? q->response_ms : G.cfg.response_timeout_ms);
}

/* The response body's idle timer, from now: a read brought bytes, or
 * reading resumed after the client caught up. A set only stores the later
 * deadline while the timer is armed earlier (gw_deadline): no timer work
 * per read beyond that. */
static void arm_body(gw_upconn *u) {
    gw_deadline_set(&u->timer, on_body_timeout, u->body_ms);
}

/* ------------------------------------------------------------------ */
/* Connections (their pools: upstream_pool.c)                         */
/* ------------------------------------------------------------------ */

static void on_up_closed(uv_handle_t *h) {
    gw_upconn *u = h->data;
    if (--u->open_handles > 0)
        return;
    gw_upconn_unlist(u);
    gw_buf_free(&u->out);
    free(u);
}

void gw_upstream_close(gw_upconn *u) {
    if (u->closing)
        return;
    u->closing = true;
    gw_link_unlink(&u->w->dirty_ups, &u->dirty);
    gw_pool_unlink(u);
    dequeue_all(u, NULL);
    uv_close((uv_handle_t *)&u->timer.timer, on_up_closed);
    uv_close((uv_handle_t *)&u->tcp, on_up_closed);
}

static void on_idle_timeout(uv_timer_t *t) {
    gw_upstream_close(t->data);
}

/* The request is done with u: back to the pool, or closed. */
void gw_upstream_detach(gw_upconn *u, bool reusable) {
    dequeue_all(u, NULL);
    u->pipelined = false;
    gw_pool *p = u->pool;
    if (p && p->pipe == u)
        p->pipe = NULL;
    if (!reusable || !p || u->closing || u->w->draining ||
        p->idle_count >= G.cfg.pool_max_idle) {
        gw_upstream_close(u);
        return;
    }
    u->next_idle = p->idle;
    p->idle = u;
    p->idle_count++;
    if (!u->reading) {
        uv_read_start((uv_stream_t *)&u->tcp, up_alloc, up_read);
        u->reading = true;
    }
    gw_deadline_set(&u->timer, on_idle_timeout, G.cfg.upstream_idle_ms);
}

/* ------------------------------------------------------------------ */
/* Writing                                                              */
/* ------------------------------------------------------------------ */

typedef struct uwreq {
    uv_write_t w;
    gw_upconn *u;
    char data[];
} uwreq;

static void on_up_written(uv_write_t *w, int status) {
    uwreq *wr = (uwreq *)w;
    gw_upconn *u = wr->u;
    free(wr);
    u->writes--;
    if (status || u->closing || !u->req)
        return; /* errors surface on the read side or as a timeout (or
                   the first request's client went away) */
    if (gw_upstream_queue(u) < GW_WRITE_HIGH / 2)
        gw_client_resume_upstream(u->req->c);
}

void gw_upstream_write(gw_upconn *u, const char *data, size_t len) {
    if (!u->closing && len)
        gw_buf_add(&u->out, data, len);
}

void gw_upstream_flush(gw_upconn *u) {
    if (u->closing || u->out.len == 0 || !u->connected)
        return;
    if (u->out.len >= GW_FLUSH_AT) {
        gw_upstream_flush_now(u);
        return;
    }
    gw_link_push(&u->w->dirty_ups, &u->dirty);
}

void gw_upstream_flush_now(gw_upconn *u) {
    gw_link_unlink(&u->w->dirty_ups, &u->dirty);
    if (u->closing || u->out.len == 0 || !u->connected)
        return;
    if (u->out.failed) /* request bytes lost to out-of-memory (gw.h): */
        return;        /* like a failed write, the timeout reports it */
    uv_stream_t *s = (uv_stream_t *)&u->tcp;
    size_t off = 0, len = u->out.len;
    u->out.len = 0;
    if (!u->writes) {
        int n = gw_try_send(u->fd, u->out.p, len);
        if (n > 0)
            off = (size_t)n;
        else if (n != UV_EAGAIN)
            return; /* the read side or the timeout reports it */
    }
    if (off == len)
        return;
    uwreq *wr = malloc(sizeof *wr + (len - off));
    if (!wr)
        return;
    memcpy(wr->data, u->out.p + off, len - off);
    wr->u = u;
    uv_buf_t b = uv_buf_init(wr->data, (unsigned)(len - off));
    if (uv_write(&wr->w, s, &b, 1, on_up_written))
        free(wr);
    else
        u->writes++;
}

void gw_upstream_pause(gw_upconn *u, bool pause) {
    if (u->closing)
        return;
    if (pause && u->reading) {
        uv_read_stop((uv_stream_t *)&u->tcp);
        u->reading = false;
        if (u->in_body) /* the client is slow, not the upstream */
            gw_deadline_clear(&u->timer);
    } else if (!pause && !u->reading) {
        uv_read_start((uv_stream_t *)&u->tcp, up_alloc, up_read);
        u->reading = true;
        if (u->in_body)
            arm_body(u);
    }
}

static void on_response_timeout(uv_timer_t *t) {
    gw_upconn *u = t->data;
    if (u->npipe == 0)
        return;
    /* the first request timed out; those behind it were not answered */
    gw_request *q = dequeue(u), *rest[GW_PIPE_MAX];
    unsigned n = dequeue_all(u, rest);
    gw_upstream_close(u);
    resend_all(rest, n);
    if (!q)
        return;
    if (q->lb)
        sy_router_report_outcome(G.router, &q->health, SY_OUTCOME_TIMEOUT);
    if (q->resp_started) {
        gw_client_abort(q->c);
        return;
    }
    if (gw_policy_on_failure(q, SY_OUTCOME_TIMEOUT))
        return;
    gw_request_respond(q, 504, NULL,
                       "{\"status\":504,\"error\":\"upstream timeout\"}\n");
}

/* The first response's body brought nothing for its response timeout
 * (an idle read timeout, as Reactor Netty's): the head went out, so no 504
 * can; the client's connection is closed with the body cut short (a
 * chunked one without its last chunk), the upstream's never pooled. */
static void on_body_timeout(uv_timer_t *t) {
    gw_upconn *u = t->data;
    if (!u->in_body || u->npipe == 0)
        return;
    gw_request *q = dequeue(u), *rest[GW_PIPE_MAX];
    unsigned n = dequeue_all(u, rest);
    gw_log("route %s: upstream sent nothing of the response body for %llu "
           "ms after %llu body bytes: both connections closed",
           q && q->route_id && q->route_id[0] ? q->route_id : "(none)",
           (unsigned long long)u->body_ms, (unsigned long long)u->body_bytes);
    GW_OWN_ADD(&u->w->metrics.upstream_body_timeouts, 1);
    gw_upstream_close(u);
    resend_all(rest, n);
    if (q) {
        q->cut = true; /* for the access log */
        gw_client_abort(q->c);
    }
}

void gw_upstream_request_done(gw_upconn *u, gw_request *q) {
    if (q == u->req && !q->resp_started)
        gw_deadline_set(&u->timer, on_response_timeout, q->response_ms);
}

void gw_upstream_abandon(gw_request *q) {
    gw_upconn *u = q->up;
    q->up = NULL;
    if (!u || u->closing)
        return;
    unsigned others = 0, at = GW_PIPE_MAX;
    for (unsigned i = 0; i < u->npipe; i++) {
        unsigned k = (u->pfirst + i) % GW_PIPE_MAX;
        if (u->pq[k] == q)
            at = i;
        else if (u->pq[k])
            others++;
    }
    if (at == GW_PIPE_MAX)
        return;
    if (!others) {
        gw_upstream_close(u);
        return;
    }
    if (!u->connected) { /* not sent (on_connect sends): out of the line */
        for (unsigned i = at; i + 1 < u->npipe; i++) {
            unsigned k = (u->pfirst + i) % GW_PIPE_MAX;
            unsigned n = (k + 1) % GW_PIPE_MAX;
            u->pq[k] = u->pq[n];
            u->phead[k] = u->phead[n];
        }
        u->pq[(u->pfirst + --u->npipe) % GW_PIPE_MAX] = NULL;
        u->req = u->pq[u->pfirst];
        return;
    }
    /* others wait for their answers behind or after q's: read q's and
     * drop it */
    u->pq[(u->pfirst + at) % GW_PIPE_MAX] = NULL;
    if (u->req == q)
        u->req = NULL;
    gw_upstream_pause(u, false);
}

static void send_head(gw_upconn *u, gw_request *q) {
    gw_upstream_write(u, q->head.p, q->head.len);
    gw_policy_replay(q, u); /* a retry or a fallback: the body kept */
    if (q->replay && q->msg_done && q->req_chunked)
        gw_upstream_write(u, "0\r\n\r\n", 5);
    q->t_sent_ns = gw_loop_ns(u->w);
    if (q == u->req)
        gw_deadline_set(&u->timer, on_response_timeout, q->response_ms);
    if (!u->reading) {
        uv_read_start((uv_stream_t *)&u->tcp, up_alloc, up_read);
        u->reading = true;
    }
    gw_request_body_flow(q); /* body bytes already here join the head */
    gw_upstream_flush(u);
}

/* q is the first request on u (new, or from the pool). */
static void attach(gw_upconn *u, gw_request *q, bool pipe) {
    enqueue(u, q);
    http_parser_init(&u->p, HTTP_RESPONSE);
    u->p.data = u;
    u->fast = (gw_fast_msg){.on_headers = gw_response_headers};
    u->got_bytes = false;
    u->in_body = false;
    u->pipelined = pipe;
    if (pipe)
        u->pool->pipe = u;
    gw_deadline_clear(&u->timer);
}

/* u's connection failed: each of its requests as a failed connect. */
static void connect_failed_all(gw_upconn *u, bool timeout) {
    gw_request *qs[GW_PIPE_MAX];
    unsigned n = dequeue_all(u, qs);
    gw_upstream_close(u);
    for (unsigned i = 0; i < n; i++)
        gw_request_connect_failed(qs[i], timeout);
}

static void on_connect(uv_connect_t *cr, int status) {
    gw_upconn *u = cr->data;
    if (status == UV_ECANCELED || u->closing)
        return;
    uv_os_fd_t fd;
    if (status || uv_fileno((uv_handle_t *)&u->tcp, &fd)) {
        connect_failed_all(u, false);
        return;
    }
    u->fd = fd;
    u->connected = true;
    uv_tcp_nodelay(&u->tcp, 1);
    atomic_fetch_add(&u->w->metrics.upstream_connects, 1);
    bool any = false;
    for (unsigned i = 0; i < u->npipe && !u->closing; i++) {
        gw_request *q = u->pq[(u->pfirst + i) % GW_PIPE_MAX];
        if (q) { /* the heads of all in one write (the loop's flush) */
            send_head(u, q);
            any = true;
        }
    }
    if (!any)
        gw_upstream_close(u);
    else if (!u->closing && !u->req)
        arm_first(u); /* the first one's client went away */
}

static void on_connect_timeout(uv_timer_t *t) {
    connect_failed_all(t->data, true);
}

static void connect_to(gw_upconn *u, const struct sockaddr *sa) {
    if (uv_tcp_connect(&u->creq, &u->tcp, sa, on_connect))
        connect_failed_all(u, false);
}

/* A host name resolved (uv_getaddrinfo, on the loop's thread pool). The
 * pending lookup counts as an open handle, so u outlives it. */
static void on_resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *res) {
    gw_upconn *u = g->data;
    if (u->closing || u->npipe == 0) {
        uv_freeaddrinfo(res);
        on_up_closed((uv_handle_t *)&u->tcp); /* drops the lookup's count */
        return;
    }
    u->open_handles--;
    if (status || !res) {
        uv_freeaddrinfo(res);
        connect_failed_all(u, false);
        return;
    }
    const struct addrinfo *a = res; /* IPv4 first, as nginx's resolver */
    for (const struct addrinfo *i = res; i; i = i->ai_next)
        if (i->ai_family == AF_INET) {
            a = i;
            break;
        }
    connect_to(u, a->ai_addr);
    uv_freeaddrinfo(res);
}

/* q's pool (made when new; NULL: q's route keeps none). Here, not in
 * upstream_pool.c: a call a request (inlined). */
static gw_pool *pool_find(gw_request *q) {
    gw_route_data *rd = q->rd;
    if (!rd)
        return NULL; /* no host data: connections are not kept */
    gw_pool **head = &rd->pools[q->w->index];
    for (gw_pool *p = *head; p; p = p->next)
        if (p->port == q->port && strcmp(p->host, q->host) == 0)
            return p;
    gw_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->host = strdup(q->host);
    p->port = q->port;
    p->next = *head;
    *head = p;
    return p;
}

void gw_upstream_start(gw_request *q) {
    gw_worker *w = q->w;
    q->connect_ms =
        q->rd ? q->rd->connect_timeout_ms : G.cfg.connect_timeout_ms;
    q->response_ms =
        q->rd ? q->rd->response_timeout_ms : G.cfg.response_timeout_ms;
    gw_policy_timeouts(q);
    gw_pool *pool = pool_find(q);
    bool pipe = pool && pipelinable(q);
    gw_upconn *j = pipe ? pool->pipe : NULL;
    /* a connection whose requests of this loop turn are not yet written
     * (or that still connects) takes this one too: one write for all */
    if (j && !j->closing && j->pipelined &&
        j->npipe < G.cfg.upstream_pipeline &&
        (!j->connected || j->out.len > 0) && !(q->fresh && j->reused)) {
        enqueue(j, q);
        GW_OWN_ADD(&w->metrics.upstream_reuses, 1);
        if (j->connected)
            send_head(j, q);
        return;
    }
    if (pool && pool->idle && !q->fresh) {
        gw_upconn *u = pool->idle;
        pool->idle = u->next_idle;
        pool->idle_count--;
        u->next_idle = NULL;
        attach(u, q, pipe);
        u->reused = true;
        GW_OWN_ADD(&w->metrics.upstream_reuses, 1);
        send_head(u, q);
        return;
    }
    gw_upconn *u = calloc(1, sizeof *u);
    if (!u) {
        gw_request_connect_failed(q, false);
        return;
    }
    u->w = w;
    u->pool = pool;
    uv_tcp_init(&w->loop, &u->tcp);
    gw_deadline_init(&w->loop, &u->timer, u);
    u->tcp.data = u->creq.data = u->gai.data = u;
    u->open_handles = 2;
    gw_upconn_list_add(u);
    attach(u, q, pipe);
    /* the connect timeout covers the name lookup too */
    gw_deadline_set(&u->timer, on_connect_timeout, q->connect_ms);
    struct sockaddr_storage ss;
    if (uv_ip4_addr(q->host, q->port, (struct sockaddr_in *)&ss) == 0 ||
        uv_ip6_addr(q->host, q->port, (struct sockaddr_in6 *)&ss) == 0) {
        connect_to(u, (struct sockaddr *)&ss);
        return;
    }
    struct addrinfo hints = {0};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    char ps[8];
    snprintf(ps, sizeof ps, "%u", q->port);
    u->open_handles++;
    if (uv_getaddrinfo(&w->loop, &u->gai, on_resolved, q->host, ps, &hints)) {
        u->open_handles--;
        connect_failed_all(u, false);
    }
}

/* ------------------------------------------------------------------ */
/* The response                                                         */
/* ------------------------------------------------------------------ */

static int r_begin(http_parser *p) {
    gw_upconn *u = p->data;
    gw_request *q = u->req;
    u->fast.mid = true;
    if (!q)
        return 0;
    q->rh.len = 0;
    q->rn = 0;
    q->rlast = 0;
    q->rcopy = false;
    return 0;
}

/* The response head's headers are slices of the read buffer (q->rhs)
 * while one execute call reads them; up_read copies them into q->rh when
 * a call ends inside the head (the next read overwrites the buffer), and
 * from then on they are appended there, NUL separated, at q->rname and
 * q->rval (as a name or value that goes on in the next read). */
static void r_spill(gw_request *q) {
    q->rh.len = 0;
    for (size_t i = 0; i < q->rn; i++) {
        if (i)
            gw_buf_add(&q->rh, "", 1);
        q->rname[i] = q->rh.len;
        gw_buf_add(&q->rh, q->rhs[i].name.ptr, q->rhs[i].name.len);
        if (i + 1 < q->rn || q->rlast == 2) {
            gw_buf_add(&q->rh, "", 1);
            q->rval[i] = q->rh.len;
            gw_buf_add(&q->rh, q->rhs[i].value.ptr, q->rhs[i].value.len);
        }
    }
    q->rcopy = true;
}

/* Header fields after the client's response started are a chunked
 * body's trailer fields: not forwarded (as SCG 4.x, whose
 * NettyRoutingFilter writes the body only) nor counted against the
 * head's limits. */
static int r_field(http_parser *p, const char *at, size_t len) {
    gw_request *q = ((gw_upconn *)p->data)->req;
    if (!q || q->resp_started)
        return 0;
    if (!q->rcopy) {
        if (q->rlast != 1) {
            if (q->rn == GW_MAX_HEADERS)
                return 1;
            q->rhs[q->rn++] = (sy_header){{at, len}, {"", 0}};
            q->rlast = 1;
            return 0;
        }
        r_spill(q); /* a name in two parts */
    }
    if (q->rlast != 1) {
        if (q->rn == GW_MAX_HEADERS)
            return 1;
        if (q->rlast == 2)
            gw_buf_add(&q->rh, "", 1);
        q->rname[q->rn++] = q->rh.len;
        q->rlast = 1;
    }
    gw_buf_add(&q->rh, at, len);
    return q->rh.len > 256 * 1024 || q->rh.failed;
}

static int r_value(http_parser *p, const char *at, size_t len) {
    gw_request *q = ((gw_upconn *)p->data)->req;
    if (!q || q->resp_started)
        return 0;
    if (!q->rcopy) {
        if (q->rlast != 2) {
            q->rhs[q->rn - 1].value = (sy_str){at, len};
            q->rlast = 2;
            return 0;
        }
        r_spill(q); /* a value in two parts */
    }
    if (q->rlast != 2) {
        gw_buf_add(&q->rh, "", 1);
        q->rval[q->rn - 1] = q->rh.len;
        q->rlast = 2;
    }
    gw_buf_add(&q->rh, at, len);
    return q->rh.len > 256 * 1024 || q->rh.failed;
}

/* True when the "Name: value\r\n" lines of pre are each added by
 * gw_apply_ops, in their order: none is named as a response header (whose
 * names' bits are `names`) or as a line before it. False when that cannot
 * be told from the names' bits: gw_apply_ops then decides. */
static bool pre_direct(const gw_request *q, uint64_t names) {
    if (q->pre_known == q->pre.len) /* its names' bits known, all different */
        return !(names & q->pre_bits);
    const char *l = q->pre.p, *end = q->pre.p + q->pre.len;
    while (l < end) {
        const char *colon = memchr(l, ':', (size_t)(end - l));
        const char *eol =
            colon ? memchr(colon, '\r', (size_t)(end - colon)) : NULL;
        if (!eol || colon[1] != ' ' || eol + 1 >= end || eol[1] != '\n')
            return false;
        uint64_t bit = gw_name_bit(l, (size_t)(colon - l));
        if (names & bit)
            return false;
        names |= bit;
        l = eol + 2;
    }
    return true;
}

static int r_headers_complete(http_parser *p) {
    gw_upconn *u = p->data;
    gw_request *q = u->req;
    int st = p->status_code;
    if (st >= 100 && st < 200) { /* interim: the final response follows */
        if (q)
            q->rlast = 0; /* its headers: nothing to keep (up_read) */
        return 0;
    }
    /* the head is here: the response timeout now bounds each wait for
     * body bytes (up_read re-arms it), paused while the client is slow */
    u->in_body = true;
    u->body_ms = q ? q->response_ms : G.cfg.response_timeout_ms;
    u->body_bytes = 0;
    if (u->reading)
        arm_body(u);
    else
        gw_deadline_clear(&u->timer);
    if (!q) /* its client went away: dropped (a HEAD's has no body) */
        return u->phead[u->pfirst] || st == 204 || st == 304 ? 1 : 0;
    uint64_t now_ns = gw_loop_ns(u->w);
    if (q->up_lat_held) /* an earlier attempt's: counted now */
        gw_metrics_upstream_latency(&u->w->metrics, q->up_lat_s);
    /* counted with the request (gw_metrics_done: one lock a request) */
    q->up_lat_s = (double)(now_ns - q->t_sent_ns) / 1e9;
    q->up_lat_held = true;
    if (q->lb)
        sy_router_report_outcome(G.router, &q->health,
                                 st >= 500 ? SY_OUTCOME_5XX
                                           : SY_OUTCOME_SUCCESS);
    if (gw_policy_on_response(q, st, now_ns)) {
        /* a retry or the fallback: nothing of this answer goes out;
         * up_read closes the connection and hands over (gw_policy_redo) */
        http_parser_pause(p, 1);
        q->rlast = 0;
        return 0;
    }
    if (q->rcopy) { /* the head came in more than one read */
        if (q->rlast == 1) {
            gw_buf_add(&q->rh, "", 1);
            q->rval[q->rn - 1] = q->rh.len;
        }
        gw_buf_add(&q->rh, "", 1);
        if (q->rh.failed)
            return -1;
        for (size_t i = 0; i < q->rn; i++) {
            size_t vend = i + 1 < q->rn ? q->rname[i + 1] : q->rh.len;
            q->rhs[i].name =
                (sy_str){q->rh.p + q->rname[i], q->rval[i] - q->rname[i] - 1};
            q->rhs[i].value =
                (sy_str){q->rh.p + q->rval[i], vend - 1 - q->rval[i]};
        }
    }
    q->rlast = 0; /* nothing for up_read to copy */
    q->status = q->status_override ? q->status_override : st;
    gw_client *c = q->c;
    /* the head straight into the client's output, where gw_client_write
     * would copy it from a buffer of its own (a malloc, a copy and a free
     * a response); a closing client's goes to one that is dropped */
    gw_buf dropped = {0};
    gw_buf *out = c->closing ? &dropped : &c->out;
    size_t mark = out->len;
    gw_buf_status_line(out, q->status);
    size_t lines_at = out->len;
    hlist l;
    hl_init(&l);
    /* a head scanned whole, with no edit but lines kept (below): its
     * header lines go on as the upstream wrote them, not through l */
    /* a 204 has no body, so no Content-Length either (RFC 9110 8.6): one
     * an upstream gave it is not passed on (nginx drops it too), where a
     * client that believed it would read the next answer as this body */
    bool raw = u->fast.lines && !q->nops && !q->cache_cap && !q->pre_split &&
               st != 204;
    uint64_t names = raw ? gw_head_lines(out, q->rhs, q->rn) : 0;
    /* lines kept as all the edits (the usual limited, CORS or
     * SecureHeaders route): into the head as they are, after l */
    bool direct = q->pre.len && !q->pre_split && !q->nops && !q->cache_cap;
    if (raw && direct && !pre_direct(q, names)) {
        out->len = lines_at; /* a kept line may be of a name it has */
        raw = direct = false;
    }
    /* the headers the upstream's Connection names are of its hop too
     * (RFC 9110 7.6.1, SCG's RemoveHopByHopHeadersFilter on responses); a
     * raw head's Connection is a lone keep-alive (head_scan.c) */
    bool conn = !raw && gw_conn_names_any(q->rhs, q->rn);
    for (size_t i = 0; i < q->rn && !raw; i++) {
        sy_str n = q->rhs[i].name, v = q->rhs[i].value;
        if (!gw_resp_hop(n.ptr, n.len) &&
            !(conn && gw_conn_named(q->rhs, q->rn, n))) {
            hl_addn(&l, n.ptr, n.len, v.ptr, v.len);
            names |= gw_name_bit(n.ptr, n.len);
        }
    }
    direct = direct && (raw || pre_direct(q, names));
    if (!direct && !raw)
        gw_apply_ops(q, &l, true);
    char ccbuf[512];
    if (q->cache_cap) {    /* LocalResponseCache (cache.c) */
        gw_buf ccv = {0};  /* the first Cache-Control, NUL-ended */
        gw_buf vary = {0}; /* every Vary line, joined */
        bool has_cc = false;
        for (size_t i = 0; i < l.n; i++) {
            if (!has_cc && hv_is(&l.a[i], "cache-control")) {
                has_cc = true;
                gw_buf_add(&ccv, l.a[i].v, l.a[i].vl);
            }
            if (hv_is(&l.a[i], "vary")) {
                gw_buf_adds(&vary, vary.len ? "," : "");
                gw_buf_add(&vary, l.a[i].v, l.a[i].vl);
            }
        }
        gw_buf_add(&vary, "", 1);
        gw_buf_add(&ccv, "", 1);
        const char *cc = gw_cache_head(
            q, q->status, has_cc ? (ccv.failed ? "no-store" : ccv.p) : NULL,
            vary.failed ? "*" : vary.p,
            (p->flags & F_CONTENTLENGTH) ? (int64_t)p->content_length : -1,
            ccbuf, sizeof ccbuf);
        gw_buf_free(&vary);
        if (cc) { /* to be kept: sent with the route's max-age */
            gw_hl_remove(&l, "cache-control");
            gw_buf kept = {0};
            hl_text(&l, &kept);
            gw_cache_head_text(q, kept.p, kept.len);
            gw_buf_free(&kept);
            hl_add(&l, "Cache-Control", cc);
        }
        gw_buf_free(&ccv);
    }
    q->resp_no_body = q->head_req || st == 204 || st == 304;
    bool has_cl = (p->flags & F_CONTENTLENGTH) != 0;
    hl_text(&l, out);
    hl_free(&l);
    if (direct)
        gw_buf_add(out, q->pre.p, q->pre.len);
    if (raw) { /* its Content-Length line went with the others */
    } else if (has_cl && st != 204) {
        gw_buf_content_length(out, p->content_length);
    } else if (!q->resp_no_body) {
        if (c->p.http_major == 1 && c->p.http_minor >= 1) {
            q->resp_chunked = true;
            gw_buf_adds(out, "Transfer-Encoding: chunked\r\n");
        } else {
            q->keep_alive = false; /* close-delimited */
        }
    }
    if (c->w->draining)
        q->keep_alive = false;
    gw_buf_adds(out, gw_conn_line(q));
    gw_buf_adds(out, "\r\n");
    q->resp_started = true;
    q->bytes_out += out->len - mark;
    c->out.failed |= q->rh.failed;
    gw_buf_free(&dropped);
    /* nor has a 204's or a 304's, whatever its Content-Length says (RFC
     * 9112 6.3; a 304's gives the representation's length): http-parser
     * would wait for that many bytes, holding the client's connection
     * until the body timeout cut it */
    return q->resp_no_body ? 1 : 0;
}

static int r_body(http_parser *p, const char *at, size_t len) {
    gw_upconn *u = p->data;
    gw_request *q = u->req;
    u->body_bytes += len;
    if (!q || q->resp_no_body)
        return 0;
    gw_cache_body(q, at, len);
    if (q->resp_chunked) {
        char sz[24];
        int n = snprintf(sz, sizeof sz, "%zx\r\n", len);
        gw_client_write(q->c, sz, (size_t)n);
        gw_client_write(q->c, at, len);
        gw_client_write(q->c, "\r\n", 2);
    } else {
        gw_client_write(q->c, at, len);
    }
    return 0;
}

static int r_message_complete(http_parser *p) {
    int st = p->status_code;
    ((gw_upconn *)p->data)->fast.mid = !http_should_keep_alive(p);
    if (st >= 100 && st < 200)
        return 0;
    http_parser_pause(p, 1);
    return 0;
}

/* After the parser paused at the end of the first request's response:
 * true when u goes on with the next request's. `extra`: bytes of the read
 * follow the answer; with no request after it on u they answer nothing
 * (a body longer than its Content-Length): u is closed, never pooled,
 * where a later request would read them as its answer (nginx: "upstream
 * sent more data than specified"). Line ends alone are let be: some
 * servers end an answer with one more CRLF, which http-parser skips
 * before the next answer's status line. */
static bool response_complete(gw_upconn *u, const char *rest, size_t extra) {
    u->in_body = false; /* what comes next sets the timer */
    gw_request *q = dequeue(u);
    /* r_message_complete paused the parser: fast.mid is its
     * !http_should_keep_alive */
    bool reusable = !u->fast.mid && (!q || q->msg_done);
    while (extra && (rest[extra - 1] == '\r' || rest[extra - 1] == '\n'))
        extra--;
    if (extra && u->npipe == 0) {
        gw_log("route %s: upstream sent %zu bytes after its answer (a body "
               "longer than its Content-Length?): connection closed",
               q && q->route_id && q->route_id[0] ? q->route_id : "(none)",
               extra);
        reusable = false;
    }
    if (q) {
        if (q->resp_chunked)
            gw_client_write(q->c, "0\r\n\r\n", 5);
        gw_cache_done(q, true);
        if (!q->msg_done)
            q->keep_alive = false; /* the request body is cut short */
    }
    bool more = false, live = false;
    for (unsigned i = 0; i < u->npipe && !live; i++)
        live = u->pq[(u->pfirst + i) % GW_PIPE_MAX] != NULL;
    if (u->npipe == 0) {
        gw_upstream_detach(u, reusable);
    } else if (!live) { /* only answers nobody waits for: no route's
                         * snapshot keeps the pool of u either */
        gw_upstream_close(u);
    } else if (!reusable) { /* the upstream ends the connection here */
        gw_request *rest[GW_PIPE_MAX];
        unsigned n = dequeue_all(u, rest);
        gw_upstream_close(u);
        resend_all(rest, n);
    } else { /* the next response: its time runs from now */
        arm_first(u);
        gw_upstream_pause(u, false);
        more = true;
    }
    if (q)
        gw_request_response_done(q);
    return more && !u->closing;
}

/* GET, HEAD, OPTIONS, PUT, DELETE and TRACE may be sent twice (RFC 9110
 * 9.2.2). */
static bool idempotent(const gw_request *q) {
    static const char *const ok[] = {"GET", "HEAD",   "OPTIONS",
                                     "PUT", "DELETE", "TRACE"};
    sy_str m = q->sreq.method;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (m.len == strlen(ok[i]) && memcmp(m.ptr, ok[i], m.len) == 0)
            return true;
    return false;
}

/* The connection broke before the first request's response was
 * complete; those behind it were not answered: sent again. */
static void response_failed(gw_upconn *u, ssize_t nread) {
    bool nothing_back = !u->got_bytes;
    /* a pooled connection the upstream had closed, or a pipeline that
     * broke before this answer began: once more, fresh */
    bool retry_fresh = (u->reused || u->pipelined) && nothing_back;
    gw_request *q = dequeue(u), *rest[GW_PIPE_MAX];
    unsigned n = dequeue_all(u, rest);
    gw_upstream_close(u);
    resend_all(rest, n);
    if (!q)
        return;
    if (q->resp_started) { /* the head went out: the client's cut too */
        enum http_errno e = HTTP_PARSER_ERRNO(&u->p);
        gw_log("route %s: upstream connection ended mid-body after %llu "
               "body bytes (%s): the client's connection closed",
               q->route_id && q->route_id[0] ? q->route_id : "(none)",
               (unsigned long long)u->body_bytes,
               nread == UV_EOF ? "closed"
               : nread < 0     ? uv_strerror((int)nread)
                               : http_errno_name(e));
        GW_OWN_ADD(&u->w->metrics.upstream_body_cuts, 1);
        q->cut = true; /* for the access log */
        gw_client_abort(q->c);
        return;
    }
    /* an idempotent one only: the upstream may have read a POST and died
     * acting on it, which nothing tells from a close it made before the
     * request came (nginx's proxy_next_upstream, non_idempotent off) */
    if (retry_fresh && !q->has_body && !q->pipe_off && idempotent(q)) {
        resend(q);
        return;
    }
    if (q->lb && !q->has_body && nothing_back && idempotent(q)) {
        /* the instance died with the request: nothing of the answer came
         * back, so another instance may take it (as nginx's
         * proxy_next_upstream error does for idempotent requests) */
        gw_request_connect_failed(q, false);
        return;
    }
    if (q->lb)
        sy_router_report_outcome(G.router, &q->health,
                                 SY_OUTCOME_CONNECT_FAILURE);
    if (gw_policy_on_failure(q, SY_OUTCOME_CONNECT_FAILURE))
        return;
    gw_request_respond(q, 502, NULL,
                       "{\"status\":502,\"error\":\"upstream failed\"}\n");
}

static void up_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
    (void)hint;
    gw_upconn *u = h->data;
    *buf = uv_buf_init(u->w->rbuf, sizeof u->w->rbuf);
}

static void up_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    gw_upconn *u = s->data;
    if (u->closing)
        return;
    if (u->npipe == 0) { /* idle in the pool: EOF or stray bytes end it */
        if (nread != 0)
            gw_upstream_close(u);
        return;
    }
    if (nread == 0)
        return;
    const char *data = nread > 0 ? buf->base : NULL;
    size_t len = nread > 0 ? (size_t)nread : 0, off = 0;
    if (nread > 0)
        u->got_bytes = true;
    if (nread > 0 && u->in_body)
        arm_body(u); /* bytes of the body (or of what follows it) */
    for (;;) {       /* one read may end several pipelined responses */
        gw_request *q = u->req;
        gw_client *c = q ? q->c : NULL;
        /* http_parser_execute, a common head and its body read faster */
        off += gw_fast_execute_response(&u->p, &up_settings, &u->fast,
                                        data ? data + off : NULL, len - off);
        if (u->req && u->req->rlast && !u->req->rcopy)
            r_spill(u->req); /* a head goes on in the next read */
        enum http_errno e = HTTP_PARSER_ERRNO(&u->p);
        bool more = false;
        if (q && q->redo) { /* policy takes over (r_headers_complete) */
            gw_request *rest[GW_PIPE_MAX];
            dequeue(u);
            unsigned n = dequeue_all(u, rest);
            gw_upstream_close(u);
            resend_all(rest, n);
            gw_policy_redo(q);
        } else if (e == HPE_PAUSED) {
            more = response_complete(u, nread > 0 ? data + off : NULL,
                                     nread > 0 ? len - off : 0);
            if (more) {
                http_parser_pause(&u->p, 0);
                u->got_bytes = off < len; /* of the next answer */
            }
        } else if (e != HPE_OK || nread < 0)
            response_failed(u, nread);
        if (c)
            gw_client_flush(c); /* everything this read produced for it */
        if (!more || (off >= len && nread > 0))
            break;
    }
}

__attribute__((constructor)) static void init_settings(void) {
    up_settings.on_message_begin = r_begin;
    up_settings.on_header_field = r_field;
    up_settings.on_header_value = r_value;
    up_settings.on_headers_complete = r_headers_complete;
    up_settings.on_body = r_body;
    up_settings.on_message_complete = r_message_complete;
}
