/*
 * proxy.h - the proxy's per-connection and per-request state, shared by
 * proxy.c (the client side: parse, match, answer) and upstream.c (the
 * upstream side: pools, connect, forward, parse the response). Everything
 * here belongs to one worker thread.
 */
#ifndef GW_PROXY_H
#define GW_PROXY_H

#include "gw.h"
#include "head_scan.h" /* gw_fast_msg */

#include <strings.h>

#define GW_MAX_TRIES 8
#define GW_WRITE_HIGH (1u << 20) /* stop reading the other side above */
/* Queued output at or above this goes to the socket at once; less waits
 * for the end of the loop iteration (gw_flush_pending). */
#define GW_FLUSH_AT (32u * 1024)

typedef struct gw_client gw_client;
typedef struct gw_request gw_request;

typedef enum { C_IDLE, C_HEAD, C_ACTIVE } gw_client_state;

struct gw_client {
    uv_tcp_t tcp;
    gw_deadline timer; /* header, then idle */
    gw_worker *w;
    gw_client *next, *prev;
    http_parser p;
    char *buf;
    size_t cap, start, end;
    size_t body_base; /* body bytes are parsed from here on */
    /* the request head being parsed: slices into buf */
    const char *url;
    size_t url_len;
    sy_header hdrs[GW_MAX_HEADERS];
    size_t nh;
    int last;  /* 0 none, 1 field, 2 value */
    int event; /* what paused the parser: 1 head, 2 message */
    int error; /* a status to answer a bad request with */
    /* a message whose head head_scan.c took: 1 the head's last LF still
     * unread (where http-parser pauses), 2 in its Content-Length body */
    int fast;
    uint64_t fast_left; /* its body bytes still to come */
    gw_client_state state;
    gw_request *req;
    bool reading, closing, in_parse, eof;
    /* the socket, and the uv_writes on it not yet called back, read beside
     * out when it is sent (gw_try_send), not from libuv's handle, whose
     * lines are cold by the time a response goes out */
    int fd;
    unsigned writes;
    gw_buf out;    /* response bytes not yet handed to the socket */
    gw_link dirty; /* on the worker's dirty_clients while output waits */
    int open_handles;
    char peer[64];
    size_t peer_len;    /* strlen(peer), set with it at accept */
    uint16_t peer_port; /* the client's port (Forwarded's for=) */
};

/* W3C trace context of one request (trace.c): hex text, NUL-ended;
 * parent_id "" when the request came without a valid traceparent. */
typedef struct gw_trace {
    char trace_id[33], parent_id[17], span_id[17], flags[3];
} gw_trace;

typedef struct gw_resp_op {
    sy_response_op_kind kind;
    char *name, *value, *arg;
    char *extra; /* RewriteLocationResponseHeader: its protocols */
    bool pre;    /* a header line set before the call (CORS, X-RateLimit-*) */
    /* name is the block of the strings of this op and the ops after it
     * that one gw_request_copy_response_ops call added (freed through it) */
    bool owns;
    /* an edit of a route that forwarded the request: SCG runs it after the
     * answering route wrote its answer, so it changes only an answer the
     * gateway makes itself (no://op), never a proxied one */
    bool outer;
} gw_resp_op;

struct gw_request {
    gw_client *c;
    gw_worker *w;
    sy_snapshot *snap;
    /* sreq: at the end (not zeroed) */
    sy_header *fwd_src; /* c->hdrs */
    uint64_t t_start;   /* ms */
    uint64_t t_start_ns;
    uint64_t t_sent_ns; /* the upstream head went out */
    /* the last response head's upstream latency, held for gw_metrics_done */
    double up_lat_s;
    bool up_lat_held;
    const char *route_id; /* borrowed from snap, or "" */
    gw_route_data *rd;
    /* which of the host filters run per request hf_route has (GW_HF_*,
     * one pass over them at dispatch, proxy.c) */
    const sy_route *hf_route;
    unsigned hf;
    /* the current attempt */
    /* head (the upstream request head), tried: at the end (not zeroed) */
    uint16_t port; /* host and instance: at the end (not zeroed) */
    bool lb;
    size_t ntried;
    int attempts;
    uint64_t connect_ms, response_ms;
    gw_upconn *up;
    /* response edits */
    gw_resp_op *ops;
    size_t nops;
    int status_override;
    /* request body */
    bool has_body, req_chunked, msg_done, body_flow, head_req;
    uint64_t body_bytes;
    /* response */
    int status;
    bool resp_started, resp_chunked, resp_close, resp_done, resp_no_body;
    /* the response head's headers: slices in rhs, or, once a read ended
     * inside the head (rcopy), copied into rh, NUL separated, at
     * rname/rval (upstream.c r_spill) */
    /* rh: at the end (not zeroed) */
    size_t rn; /* headers so far (rhs, rname/rval: see GW_REQ_ZEROED) */
    int rlast; /* 0 none, 1 a name, 2 a value last */
    bool rcopy;
    bool keep_alive; /* to the client after this request */
    bool http10;     /* an HTTP/1.0 request: keep-alive is said (gw_conn) */
    bool finished;
    bool fresh;    /* do not take a pooled connection */
    bool pipe_off; /* re-sent after a pipeline broke: on its own now */
    /* forward: the request as re-dispatched (forward.c) */
    int forwards;        /* hops so far */
    gw_buf fwd;          /* path, query, header names and values */
    sy_header *fwd_hdrs; /* sreq.headers after a forward */
    /* the client's request and the route it matched, kept at the first
     * forward: the access log and the dry run's ring describe it */
    /* client_req: at the end (not zeroed) */
    const char *client_route_id;
    gw_route_data *client_rd;
    /* policies (policy.c) */
    /* xhdrs, pre: at the end (not zeroed) */
    bool pre_split; /* pre split for a header list (apply_ops) */
    /* the names' gw_name_bits of the first xknown bytes of xhdrs (of
     * pre_known of pre), all different (gw_xhdrs_noted) */
    uint64_t xbits, pre_bits;
    size_t xknown, pre_known;
    struct gw_rlwait *rlw; /* calls to Redis in flight */
    /* permit: at the end (not zeroed) */
    bool permit_held;
    uint64_t call_start_ms; /* the breaker's call began */
    bool call_fresh;        /* and its first attempt is being set up */
    const sy_retry_policy *retry;
    uint32_t retries_done;
    uint64_t first_attempt_ms;
    uv_timer_t *backoff;
    gw_buf body_keep; /* the request body so far, for another attempt */
    bool keep_body, body_overflow, replay;
    bool expect_100, sent_100; /* Expect: 100-continue (gw_request_body_flow) */
    int fb_kind, fb_status;    /* why the request went to a fallback */
    gw_buf req_xhdrs; /* request headers from the gateway (FallbackHeaders) */
    int redo;         /* after a response head: what policy does instead */
    int redo_status;
    uint32_t redo_delay;
    /* for the access log (access_log.c); trace: at the end (not zeroed) */
    uint64_t bytes_out; /* response bytes queued for the client */
    bool remembered;    /* in the recent ring (access_log.c) */
    bool rate_limited;  /* a rate limiter refused it (policy.c) */
    bool cut;           /* its body cut short: the upstream's ended mid-body */
    struct gw_cache_cap *cache_cap; /* the answer LocalResponseCache keeps */
    /* Not zeroed when a request starts (proxy.c reuses request blocks):
     * an entry is written before it is read (r_field, r_value, r_spill,
     * r_headers_complete); host and
     * instance start "" (request_get) and are written whole, NUL-ended
     * (gw_copy_str), before more of them is read; sreq, client_req and
     * health as said at each. */
    size_t rname[GW_MAX_HEADERS], rval[GW_MAX_HEADERS];
    sy_header rhs[GW_MAX_HEADERS];
    char *tried[GW_MAX_TRIES]; /* ntried of them */
    /* the buffers keep their memory from request to request (request_get
     * empties them) */
    gw_buf head;  /* upstream request head */
    gw_buf rh;    /* see rn */
    gw_buf xhdrs; /* response headers from the gateway (CORS,
                     X-RateLimit-*), "Name: v\r\n", until copied as edits */
    gw_buf pre;   /* xhdrs kept as the only edits, "Name: v\r\n"
                     lines (gw_request_copy_response_ops; kept with
                     the block), "Name\0 v\0\n" once pre_split */
    /* for the access log: gw_trace_begin writes it whole (request_begin) */
    gw_trace trace;
    char host[256];
    char instance[128];
    /* the request (request_begin sets it whole) */
    sy_request sreq;
    /* the client's request: set at the first forward, read only with
     * forwards (access_log.c) */
    sy_request client_req;
    /* for sy_router_report_outcome (lb:// only): set with lb and instance
     * (build_attempt) when either is, read only with them */
    sy_target health;
    /* the breaker's: written whole by every proxied request's
     * sy_match_breaker_acquire (policy.c breaker_step, a route without a
     * breaker's too) before it is read, read with permit_held or fb_kind
     * (set only after it was written) */
    sy_breaker_permit permit;
};
/* The part of a gw_request a new request starts zeroed. */
#define GW_REQ_ZEROED offsetof(gw_request, rname)

struct gw_upconn {
    uv_tcp_t tcp;
    /* connect, response head, response body (idle reads), then idle in
     * the pool */
    gw_deadline timer;
    uv_connect_t creq;
    uv_getaddrinfo_t gai; /* an upstream given by name */
    gw_worker *w;
    gw_pool *pool;
    gw_upconn *next_idle;
    gw_upconn *lnext, *lprev; /* the worker's list of every connection */
    http_parser p;
    gw_fast_msg fast; /* head_scan.c's side of p */
    /* the request whose response comes next; NULL when none, or when its
     * client went away (its response is read and dropped) */
    gw_request *req;
    /* every request sent or queued on u, in order (HTTP/1.1 pipelining):
     * pq[(pfirst + i) % GW_PIPE_MAX] for i < npipe, req the first; a
     * slot is NULL when its client went away; phead: it was a HEAD */
    gw_request *pq[GW_PIPE_MAX];
    bool phead[GW_PIPE_MAX];
    unsigned pfirst, npipe;
    bool pipelined; /* carries only requests safe to pipeline */
    bool connected, closing, reused, got_bytes, reading;
    /* the first request's response body streams: each read re-arms the
     * timer for body_ms (none while paused: the client is slow) */
    bool in_body;
    uint64_t body_ms, body_bytes;
    int fd;          /* once connected; as gw_client's */
    unsigned writes; /* as gw_client's */
    gw_buf out;      /* request bytes not yet handed to the socket */
    gw_link dirty;   /* on the worker's dirty_ups while output waits */
    int open_handles;
};

/* proxy.c */
void gw_client_accept(gw_worker *w, uv_stream_t *server);
/* uv_try_write of one buffer with send() (MSG_DONTWAIT) on a stream's
 * socket fd: bytes taken, UV_EAGAIN, or a negative UV error. Only when
 * no uv_write of the stream is pending (its `writes` 0). send() takes the
 * socket path; write() goes through vfs_write and fdget_pos first. */
int gw_try_send(int fd, const char *p, size_t len);
/* Free the request blocks the calling worker thread kept (its loop ended). */
void gw_request_blocks_free(void);
/* Queue bytes for the client (copied). gw_client_flush: the queued bytes
 * are complete for now; they go to the socket at the end of this loop
 * iteration (at once when GW_FLUSH_AT or more are queued), in one write
 * for everything queued on the connection (no copy when it goes at once).
 * Deferring the write lets one pass over the ready sockets wake the
 * backend and each client once with everything the pass produced, instead
 * of once per write (a woken peer would often preempt the worker on its
 * return from write()). */
/* q's Upgrade is not proxied: logged, counted (upstream_head.c). */
void gw_upgrade_dropped(gw_request *q);
/* An HTTP/1.1 request with Expect: 100-continue (upstream_head.c). */
bool gw_expects_100(const http_parser *p, const sy_header *h, size_t n);
void gw_client_write(gw_client *c, const char *data, size_t len);
void gw_client_flush(gw_client *c);
/* Hand every connection's deferred output to its socket (the worker's
 * uv_prepare handle, before the loop waits for events). */
void gw_flush_pending(gw_worker *w);
/* The response head went out, or the response is finished. */
void gw_request_response_done(gw_request *q);
/* Answer the request from the gateway (before any upstream byte). */
void gw_request_respond(gw_request *q, int status, const char *headers,
                        const char *body);
/* Upstream connected and head written: let the request body flow. */
void gw_request_body_flow(gw_request *q);
/* The attempt failed to connect: retry elsewhere or answer 502/503. */
void gw_request_connect_failed(gw_request *q, bool timeout);
/* Abort the client connection (a response already under way broke). */
void gw_client_abort(gw_client *c);
void gw_client_resume_upstream(gw_client *c);
/* worker.c: a client connection of w closed (the drain may be over). */
void gw_worker_client_closed(gw_worker *w);
/* Close w's idle client connections; the busy ones close when done. */
void gw_clients_drain(gw_worker *w);

/* Match q->sreq on q->snap and act on the route: answer, forward or
 * proxy. */
void gw_request_dispatch(gw_request *q);

/* The worker's xorshift generator (seeds, jitter); never 0. */
uint64_t gw_worker_rand(gw_worker *w);
/* Match q->sreq on q->snap again (the worker's context was used by other
 * requests meanwhile): 0 and *m, or non-zero when it no longer matches. */
int gw_request_rematch(gw_request *q, sy_match **m);
/* upstream_head.c: q's upstream head (q->head) for target t: 0, or 500
 * when out of memory; match m's response edits, after the route's CORS
 * header lines `cors`, put before the edits q holds already (those of a
 * route that forwarded here). */
int gw_upstream_head(gw_request *q, const sy_target *t);
/* A Connection header among h[0..n) with options other than a lone
 * "keep-alive" or "close" (then gw_conn_named looks); whether one of them
 * is `name`: a header of the hop (RFC 9110 7.6.1), dropped both ways. */
bool gw_conn_names_any(const sy_header *h, size_t n);
bool gw_conn_named(const sy_header *h, size_t n, sy_str name);
/* forwarded.c: the forwarding headers of q's upstream head for target t
 * at w (the byte after them), and the room they take at most; nothing
 * without --trusted-proxies. */
size_t gw_forwarded_room(const gw_request *q, const sy_target *t);
char *gw_forwarded_put(gw_request *q, const sy_target *t, char *w);
/* The worker's match data for --trusted-proxies, freed when it stops. */
void gw_trusted_free(gw_worker *w);
/* X-Forwarded-* or Forwarded: left to gw_forwarded_put (a client's
 * dropped without --trusted-proxies, as SCG 4.3.5+ does). */
static inline bool gw_forwarding_name(sy_str n) {
    return (n.len == 9 && (n.ptr[0] | 0x20) == 'f' &&
            strncasecmp(n.ptr, "forwarded", 9) == 0) ||
           (n.len >= 12 && (n.ptr[0] | 0x20) == 'x' &&
            strncasecmp(n.ptr, "x-forwarded-", 12) == 0);
}
void gw_request_copy_response_ops(gw_request *q, sy_match *m,
                                  const gw_buf *cors);
/* The header lines staged before the call when they are all of a
 * request's response edits (q->pre), each added when the response has no
 * header of its name, as the edits they stand for. They stay "Name:
 * value\r\n" lines, which a response head takes as they are (upstream.c);
 * gw_request_pre_split makes them "Name\0 value\0\n" for a header list,
 * and gw_request_pre_next then gives the name after `at` (NULL: the
 * first) and its *value, NUL-ended; NULL after the last. */
void gw_request_pre_split(gw_request *q);
/* Appends the header lines of a response head scanned whole (hdrs[0..n)
 * while gw_fast_msg.lines: each line's bytes as read), less the
 * hop-by-hop ones but Content-Length; the gw_name_bits of the names kept
 * (Content-Length's aside, as a header list holds them). */
uint64_t gw_head_lines(gw_buf *out, const sy_header *hdrs, size_t n);
/* gw_fast_msg.on_headers of an upstream connection (p->data): a scanned
 * head's headers into its request's q->rhs at once. */
int gw_response_headers(http_parser *p, const sy_header *hdrs, size_t n);
/* n bytes of a header name (tchars) equal to a literal of lowercase
 * letters, digits and '-', ASCII case aside: exact, as a tchar | 0x20
 * is a lowercase letter only when it was that letter in either case, and
 * '-' or a digit only when it was that; 8 bytes a test, no call. */
static inline bool gw_eq_lower(const char *n, const char *lit, size_t len) {
    uint64_t a, b;
    if (len < 8) {
        for (size_t i = 0; i < len; i++)
            if ((n[i] | 0x20) != lit[i])
                return false;
        return true;
    }
    for (size_t i = 0;; i += 8) {
        if (i + 8 > len) /* the last 8 bytes, overlapping */
            i = len - 8;
        memcpy(&a, n + i, 8);
        memcpy(&b, lit + i, 8);
        if ((a | 0x2020202020202020ull) != b)
            return false;
        if (i + 8 == len)
            return true;
    }
}
/* The Connection line of q's answer: close when the connection ends
 * after it; keep-alive to an HTTP/1.0 client that keeps it open, which
 * takes an answer without it for the connection's last (RFC 9112 C.2.2:
 * ab -k reads such an answer to EOF); none for HTTP/1.1. */
static inline const char *gw_conn_line(const gw_request *q) {
    return !q->keep_alive ? "Connection: close\r\n"
           : q->http10    ? "Connection: keep-alive\r\n"
                          : "";
}
/* A response header the gateway does not pass on as it came (SCG's
 * hop-by-hop list, Proxy-Connection, or the framing it writes itself):
 * chosen by the name's length first, so most names are told apart
 * without a compare. Those the upstream's Connection names: upstream.c. */
static inline bool gw_resp_hop(const char *n, size_t len) {
    switch (len) {
    case 2: return gw_eq_lower(n, "te", 2);
    case 7: return gw_eq_lower(n, "trailer", 7) || gw_eq_lower(n, "upgrade", 7);
    case 10:
        return gw_eq_lower(n, "connection", 10) ||
               gw_eq_lower(n, "keep-alive", 10);
    case 14: return gw_eq_lower(n, "content-length", 14);
    case 16: return gw_eq_lower(n, "proxy-connection", 16);
    case 17: return gw_eq_lower(n, "transfer-encoding", 17);
    case 18: return gw_eq_lower(n, "proxy-authenticate", 18);
    case 19: return gw_eq_lower(n, "proxy-authorization", 19);
    case 21: return gw_eq_lower(n, "x-application-context", 21);
    default: return false;
    }
}
/* A header name's bit among 64, from its length and last letter: two
 * names of one bit may be one name (whatever their case), two of
 * different bits are not. */
static inline uint64_t gw_name_bit(const char *n, size_t len) {
    return 1ull << ((len + (size_t)(len ? n[len - 1] | 0x20 : 0)) & 63);
}
/* The lines just added to q->xhdrs from byte `from` on have names of
 * gw_name_bits `bits`, all different: a response head can then tell
 * without a walk that none repeats an earlier one (upstream.c). */
static inline void gw_xhdrs_noted(gw_request *q, size_t from, uint64_t bits) {
    if (q->xknown == from && !(q->xbits & bits)) {
        q->xbits |= bits;
        q->xknown = q->xhdrs.len;
    }
}
/* q->xhdrs emptied: nothing of it noted. */
static inline void gw_xhdrs_clear(gw_request *q) {
    q->xhdrs.len = 0;
    q->xbits = 0;
    q->xknown = 0;
}
const char *gw_request_pre_next(const gw_request *q, const char *at,
                                const char **value);
/* After the policies: the route's response edits, then forward, answer
 * (no://op) or the first upstream attempt. */
void gw_request_proceed(gw_request *q, sy_match *m);
/* Only the route's response edits (before going to a fallback). */
void gw_request_proceed_ops(gw_request *q, sy_match *m);
/* Another attempt (Retry): target again excluding the instances tried
 * (all of them again when none is left) and start it; 0 or the status to
 * answer with. */
int gw_request_retry_attempt(gw_request *q);

/* policy.c */
/* Rate limits, then the breaker's permit, then gw_request_proceed (or an
 * answer: 429, 503, a fallback). May go on later (Redis). */
void gw_policy_begin(gw_request *q, sy_match *m);
/* Cap q->connect_ms / response_ms by the breaker's time limit. */
void gw_policy_timeouts(gw_request *q);
/* The upstream answered `status` at now_ns (gw_now_ns): 0 to pass the
 * answer on; 1 when policy
 * takes the request over (a retry, the fallback): the caller stops the
 * response, closes the connection, then calls gw_policy_redo. */
int gw_policy_on_response(gw_request *q, int status, uint64_t now_ns);
void gw_policy_redo(gw_request *q);
/* An attempt failed without an answer: true when policy took the request
 * over (a retry or the fallback); false: answer as usual. */
bool gw_policy_on_failure(gw_request *q, sy_outcome o);
void gw_policy_keep_body(gw_request *q, const char *at, size_t len);
void gw_policy_replay(gw_request *q, gw_upconn *u);
void gw_policy_free(gw_request *q);
/* The wait blocks the worker thread kept (at its end). */
void gw_policy_blocks_free(void);

/* filters.c: SCG filters run as host filters (SecureHeaders,
 * FallbackHeaders) */
enum { GW_FB_OPEN = 1, GW_FB_STATUS, GW_FB_TIMEOUT, GW_FB_CONNECT };
/* The route's host filters of match m: response headers into q->xhdrs,
 * request headers into q->req_xhdrs. */
void gw_host_filters(gw_request *q, sy_match *m);
/* LocalResponseCache (cache.c): answer from the worker's cache (true:
 * answered), else note what to keep of the upstream's answer. */
bool gw_cache_lookup(gw_request *q, sy_match *m);
/* The answer's head (status after the route's edits, its Cache-Control
 * or NULL, its Vary lines joined by ",", its Content-Length or -1): the
 * Cache-Control value to send instead, in buf, or NULL when this answer is
 * not kept (it goes out as it is; `Vary: *` and a length over the route's
 * size are not kept); when kept, then the header lines without
 * Cache-Control (gw_cache_head_text). */
const char *gw_cache_head(gw_request *q, int status, const char *cc,
                          const char *vary, int64_t length, char *buf,
                          size_t cap);
void gw_cache_head_text(gw_request *q, const char *text, size_t len);
void gw_cache_body(gw_request *q, const char *at, size_t len);
/* The answer ended (complete: whole): kept when it may be. */
void gw_cache_done(gw_request *q, bool complete);
void gw_cache_request_free(gw_request *q);
void gw_cache_free(gw_worker *w);
/* The route has CacheRequestBody: its request body is kept as for a retry. */
bool gw_caches_body(sy_match *m);

/* redis.c */
typedef struct gw_rcall gw_rcall;
typedef void (*gw_redis_cb)(void *data, bool ok, int64_t v0, int64_t v1,
                            size_t draw);
int gw_redis_init(gw_worker *w, const char *script);
void gw_redis_close(gw_worker *w);
/* Run the script with two keys and four args; cb once, within
 * --redis-timeout: ok with the two integers the command returned and the
 * call's place in it (`draw`), or not ok (an error, no reply in time,
 * Redis down). NULL when no call can be made now (cb is never called):
 * fail open at once. The call goes before the loop waits for events, in
 * one command with the iteration's other calls with the same keys and
 * args (the token bucket's draws, in order: the batch script, whose reply
 * sy_ratelimit_redis_batch_result reads; a call alone: draw 0 of the
 * script given to gw_redis_init). */
gw_rcall *gw_redis_script(gw_worker *w, const char *const keys[2],
                          const char *const args[4], gw_redis_cb cb,
                          void *data);
/* cb will not be called. */
void gw_redis_cancel(gw_rcall *c);

/* forward.c */
/* Whether hd is one of the client's header lines as it sent it (the
 * same bytes: the target's list copies the client's headers as they are,
 * a filter's header points at the route's or the match's). */
bool gw_request_client_header(const gw_request *q, sy_header hd);
/* Dispatch q again through the gateway's routes with this path, query and
 * header list (copied first, but the client's own lines, which stay the
 * client's); 508 past the hop limit. */
void gw_request_forward(gw_request *q, sy_str path, sy_str query,
                        const sy_header *h, size_t n);
/* A forward:/path route matched (m): its filtered query and headers go on
 * with the uri's path. */
void gw_forward_route(gw_request *q, sy_match *m, const char *path);
/* Free what a forward kept. */
void gw_forward_free(gw_request *q);

/* cors.c: a route's `cors` metadata (SCG's per-route CORS) */
#include "cors_parse.h" /* gw_cors, its parse and free */
/* Check q against its route's CORS configuration: 0 and the response
 * headers to add in *hdrs ("Name: value\r\n" lines), or the status to
 * answer with from the gateway (200 for a preflight, 403 for a rejected
 * request) with its headers in *hdrs. */
int gw_cors_check(const gw_cors *cfg, const gw_request *q, gw_buf *hdrs);
/* True when q has an Origin other than its own (a CORS request). */
bool gw_cors_is_cross_origin(const gw_request *q);
/* The method a preflight request announces, or {NULL, 0} when q is not a
 * preflight. */
sy_str gw_cors_preflight_method(const gw_request *q);

/* trace.c: W3C Trace Context */
/* Read r's traceparent (one, valid) or start a trace; a new span id. */
void gw_trace_begin(gw_trace *t, const sy_request *r);
/* A traceparent is not sent on (the gateway writes its own), nor the
 * client's tracestate (gw_request_client_header) when q's trace is new;
 * a route filter's tracestate is. */
bool gw_trace_drops(const gw_request *q, sy_header hd);
/* "traceparent: 00-<trace>-<the gateway's span>-<flags>\r\n" at w (room
 * for GW_TRACE_LINE bytes); the byte after it */
#define GW_TRACE_LINE 70
char *gw_trace_put(const gw_trace *t, char *w);

/* access_log.c */
/* The request is over: remember it (the recent ring, unless
 * gw_recent_remember did) and log it. */
void gw_access_log(gw_request *q);
/* Remember the routed request in the recent ring now, while its head's
 * lines are still in the cache (request_begin; once it is answered they
 * are long gone). */
void gw_recent_remember(gw_request *q);
/* One access log line for a request refused before its head was read
 * (400, 431): method, path and the request's fields null. */
void gw_access_log_refused(const char *peer, int status, uint64_t bytes);

/* upstream.c */
/* The response edits of q applied to an empty header list, as
 * "Name: value\r\n" lines (an answer from the gateway). */
void gw_response_ops_text(gw_request *q, gw_buf *out);
void gw_upstream_start(gw_request *q); /* pool or connect, then send */
/* Queue request bytes for u; gw_upstream_flush as gw_client_flush. */
void gw_upstream_write(gw_upconn *u, const char *data, size_t len);
void gw_upstream_flush(gw_upconn *u);
void gw_upstream_flush_now(gw_upconn *u);
void gw_upstream_detach(gw_upconn *u, bool reusable);
void gw_upstream_close(gw_upconn *u);
void gw_upstream_pause(gw_upconn *u, bool pause);
/* q's client body is complete (q on u) */
void gw_upstream_request_done(gw_upconn *u, gw_request *q);
/* q's client went away: u is closed, unless other requests are in flight
 * on it (pipelined): then q's response is read and dropped. */
void gw_upstream_abandon(gw_request *q);
void gw_pools_drop(gw_worker *w, gw_route_data *rd);
/* upstream_pool.c: u into / out of its worker's list of connections; u out
 * of its pool. */
void gw_upconn_list_add(gw_upconn *u);
void gw_upconn_unlist(gw_upconn *u);
void gw_pool_unlink(gw_upconn *u);
void gw_upstream_close_all(gw_worker *w);
/* Request bytes queued on u and not yet sent (deferred and in libuv). */
static inline size_t gw_upstream_queue(gw_upconn *u) {
    return uv_stream_get_write_queue_size((uv_stream_t *)&u->tcp) + u->out.len;
}

#endif /* GW_PROXY_H */
