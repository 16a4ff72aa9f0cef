/*
 * upstream_head.c - what the gateway sends upstream and edits on the way
 * back, from the library's decisions: the upstream request head built
 * from a sy_target (request line, Host, the target's headers without the
 * hop-by-hop ones, those a Connection header names (both ways: the
 * response's too, upstream.c), the forwarding headers forwarded.c
 * writes, the trace context, the body's framing), a match's response edits (the
 * route's CORS headers first) copied into the request for upstream.c to apply,
 * and a plain response head's headers taken and its lines passed on as the
 * upstream wrote them; whether a request's client waits for 100 Continue;
 * an Upgrade dropped, logged and counted.
 */
#define _DEFAULT_SOURCE
#include "proxy.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool name_is(sy_str n, const char *s) {
    size_t l = strlen(s);
    return n.len == l && strncasecmp(n.ptr, s, l) == 0;
}

/* A request header the gateway does not send on: SCG's hop-by-hop list
 * (RemoveHopByHopHeadersFilter: Connection, Keep-Alive, TE, Trailer,
 * Transfer-Encoding, Upgrade, Proxy-Authorization, Proxy-Authenticate,
 * X-Application-Context), Proxy-Connection, and what the gateway writes
 * itself (Host, Content-Length) or answers (Expect). Chosen by the
 * name's length first, as gw_resp_hop. */
static bool hop_by_hop(sy_str n) {
    const char *p = n.ptr;
    switch (n.len) {
    case 2: return gw_eq_lower(p, "te", 2);
    case 4: return gw_eq_lower(p, "host", 4);
    case 6: return gw_eq_lower(p, "expect", 6);
    case 7: return gw_eq_lower(p, "trailer", 7) || gw_eq_lower(p, "upgrade", 7);
    case 10:
        return gw_eq_lower(p, "connection", 10) ||
               gw_eq_lower(p, "keep-alive", 10);
    case 14: return gw_eq_lower(p, "content-length", 14);
    case 16: return gw_eq_lower(p, "proxy-connection", 16);
    case 17: return gw_eq_lower(p, "transfer-encoding", 17);
    case 18: return gw_eq_lower(p, "proxy-authenticate", 18);
    case 19: return gw_eq_lower(p, "proxy-authorization", 19);
    case 21: return gw_eq_lower(p, "x-application-context", 21);
    default: return false;
    }
}

bool gw_conn_names_any(const sy_header *h, size_t n) {
    for (size_t i = 0; i < n; i++) {
        sy_str v = h[i].value;
        if (h[i].name.len == 10 &&
            gw_eq_lower(h[i].name.ptr, "connection", 10) &&
            !(v.len == 10 && gw_eq_lower(v.ptr, "keep-alive", 10)) &&
            !(v.len == 5 && gw_eq_lower(v.ptr, "close", 5)))
            return true;
    }
    return false;
}

bool gw_conn_named(const sy_header *h, size_t n, sy_str name) {
    for (size_t i = 0; i < n; i++) {
        if (!name_is(h[i].name, "connection"))
            continue;
        const char *p = h[i].value.ptr;
        const char *end = p + h[i].value.len;
        while (p < end) {
            while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
                p++;
            const char *tok = p;
            while (p < end && *p != ',' && *p != ' ' && *p != '\t')
                p++;
            if ((size_t)(p - tok) == name.len &&
                strncasecmp(tok, name.ptr, name.len) == 0)
                return true;
        }
    }
    return false;
}

/* The value of arg `key` of a filter entry, or "". */
static const char *entry_arg(const sy_filter_entry *e, const char *key) {
    for (size_t i = 0; i < e->arg_count; i++)
        if (strcmp(e->args[i].key, key) == 0)
            return e->args[i].value;
    return "";
}

/* An op's name, value and arg, copied into `*blk` (the block of the
 * strings of all the ops one call adds: one malloc and one free a call,
 * per request, instead of one an op). */
static void op_strings(gw_resp_op *op, char **blk, sy_str name, sy_str value,
                       sy_str arg) {
    char *b = *blk;
    op->name = b;
    op->value = b + name.len + 1;
    op->arg = op->value + value.len + 1;
    if (name.len)
        memcpy(op->name, name.ptr, name.len);
    op->name[name.len] = '\0';
    if (value.len)
        memcpy(op->value, value.ptr, value.len);
    op->value[value.len] = '\0';
    if (arg.len)
        memcpy(op->arg, arg.ptr, arg.len);
    op->arg[arg.len] = '\0';
    *blk = op->arg + arg.len + 1;
}

/* The response edits of match m, after the route's CORS headers (`cors`:
 * "Name: value\r\n" lines, each added when the upstream did not send
 * it), put before the edits already there: those of a route that
 * forwarded here, which edit the response after this one, as SCG's outer
 * filter chain does, and are marked `outer` (a proxied answer is already
 * written when they run in SCG). */
static void copy_ops(gw_request *q, sy_match *m, const gw_buf *cors) {
    size_t n = m ? sy_match_response_op_count(m) : 0, nc = 0, bytes = 0;
    const char *end = cors && cors->len ? cors->p + cors->len : NULL;
    for (const char *l = cors ? cors->p : NULL;
         end && (l = memchr(l, '\n', (size_t)(end - l))) != NULL; l++)
        nc++;
    if (!n && !nc)
        return;
    if (nc) /* a line "Name: value\r\n" has room for its op's 3 NULs */
        bytes += cors->len;
    for (size_t i = 0; i < n; i++) {
        sy_response_op op = sy_match_response_op(m, i);
        bytes += op.name.len + op.value.len + op.arg.len + 3;
    }
    gw_resp_op *ops = calloc(n + nc + q->nops, sizeof *ops);
    char *blk = malloc(bytes);
    if (!ops || !blk) {
        free(ops);
        free(blk);
        return;
    }
    ops[0].owns = true; /* blk: the strings of ops[0..n + nc) */
    size_t k = 0;
    const char *l = cors ? cors->p : NULL;
    for (size_t i = 0; l && i < nc; i++) {
        const char *eol = memchr(l, '\r', (size_t)(end - l));
        const char *colon = memchr(l, ':', (size_t)(eol - l));
        ops[k].kind = SY_RESP_ADD_IF_ABSENT;
        ops[k].pre = true;
        op_strings(&ops[k], &blk, (sy_str){l, (size_t)(colon - l)},
                   (sy_str){colon + 2, (size_t)(eol - colon - 2)},
                   (sy_str){"", 0});
        k++;
        l = eol + 2;
    }
    size_t loc = 0; /* RewriteLocationResponseHeader entries seen */
    for (size_t i = 0; i < n; i++) {
        sy_response_op op = sy_match_response_op(m, i);
        ops[k].kind = op.kind;
        op_strings(&ops[k], &blk, op.name, op.value, op.arg);
        k++;
        if (op.kind != SY_RESP_REWRITE_LOCATION)
            continue;
        /* its protocols are in its host filter entry (the loc-th) */
        size_t seen = 0;
        for (size_t j = 0; j < sy_match_host_filter_count(m); j++) {
            const sy_filter_entry *e = sy_match_host_filter(m, j);
            if (strcmp(e->name, "RewriteLocationResponseHeader") == 0 &&
                seen++ == loc) {
                ops[k - 1].extra = strdup(entry_arg(e, "protocols"));
                break;
            }
        }
        loc++;
    }
    if (q->nops)
        memcpy(ops + k, q->ops, q->nops * sizeof *ops);
    for (size_t i = k; i < k + q->nops; i++)
        ops[i].outer |= !ops[i].pre; /* the forwarding route's edits */
    free(q->ops);
    q->ops = ops;
    q->nops += k;
}

/* The lines of q->pre between "Name\0 value\0\n" (kept) and "Name:
 * value\r\n" (as staged): the first NUL of a line was its colon, the
 * second its CR. */
static void pre_form(gw_buf *pre, bool kept) {
    for (char *l = pre->p, *end = pre->p + pre->len; l < end;) {
        char *colon = memchr(l, kept ? ':' : '\0', (size_t)(end - l));
        char *eol = memchr(colon, kept ? '\r' : '\0', (size_t)(end - colon));
        *colon = kept ? '\0' : ':';
        *eol = kept ? '\0' : '\r';
        l = eol + 2;
    }
}

void gw_request_copy_response_ops(gw_request *q, sy_match *m,
                                  const gw_buf *cors) {
    if (q->pre.len) { /* staged by an earlier route: edits as they were */
        if (q->pre_split)
            pre_form(&q->pre, false);
        copy_ops(q, NULL, &q->pre);
        q->pre.len = 0;
        q->pre_split = false;
    }
    if (cors == &q->xhdrs && cors->len && !cors->failed && !q->nops &&
        !sy_match_response_op_count(m)) {
        /* only header lines (the usual limited or CORS route): kept as
         * they are, without an edit each (gw_request_pre_next); the
         * caller empties xhdrs, now the old q->pre */
        gw_buf t = q->pre;
        q->pre = q->xhdrs;
        q->xhdrs = t;
        q->pre_split = false; /* split only for a header list */
        q->pre_bits = q->xbits;
        q->pre_known = q->xknown;
        q->xbits = 0;
        q->xknown = 0;
        return;
    }
    copy_ops(q, m, cors);
}

void gw_request_pre_split(gw_request *q) {
    if (q->pre.len && !q->pre_split) {
        pre_form(&q->pre, true);
        q->pre_split = true;
    }
}

const char *gw_request_pre_next(const gw_request *q, const char *at,
                                const char **value) {
    at = at ? *value + strlen(*value) + 2 : q->pre.p;
    if (!q->pre.len || at >= q->pre.p + q->pre.len)
        return NULL;
    *value = at + strlen(at) + 2;
    return at;
}

/* n bytes of s at w; the byte after them. The head's room is reserved
 * once (gw_upstream_head), so its ~20 pieces are copies without a check
 * each, and a literal's copy is a few moves. */
static inline char *put(char *w, const void *s, size_t n) {
    memcpy(w, s, n);
    return w + n;
}
#define PUT_LIT(w, lit) put((w), (lit), sizeof(lit) - 1)

/* The upstream request head for target t: request line, Host, the
 * target's headers but hop-by-hop ones and those the client's Connection
 * names, FallbackHeaders, the forwarding headers (forwarded.c), the
 * trace context and the body's framing. 0, or 500 when out of memory. */
int gw_upstream_head(gw_request *q, const sy_target *t) {
    gw_buf *h = &q->head;
    const sy_request *r = &q->sreq;
    /* the literals' bytes (under 256 with the largest framing line), each
     * header's at most (": ", CRLF) and the forwarding headers' */
    size_t room = 256 + r->method.len + t->path.len + t->query.len +
                  t->host_header.len + q->req_xhdrs.len +
                  gw_forwarded_room(q, t);
    for (size_t i = 0; i < t->header_count; i++)
        room += t->headers[i].name.len + t->headers[i].value.len + 4;
    h->len = 0;
    if (!gw_buf_reserve(h, room))
        return 500;
    char *w = h->p;
    w = put(w, r->method.ptr, r->method.len);
    *w++ = ' ';
    if (t->path.len)
        w = put(w, t->path.ptr, t->path.len);
    else
        *w++ = '/';
    if (t->query.len) {
        *w++ = '?';
        w = put(w, t->query.ptr, t->query.len);
    }
    w = PUT_LIT(w, " HTTP/1.1\r\nHost: ");
    w = put(w, t->host_header.ptr, t->host_header.len);
    w = PUT_LIT(w, "\r\n");
    const gw_client *c = q->c;
    bool conn = gw_conn_names_any(c->hdrs, c->nh);
    for (size_t i = 0; i < t->header_count; i++) {
        sy_header hd = t->headers[i];
        if (hop_by_hop(hd.name) || gw_forwarding_name(hd.name) ||
            (conn && gw_conn_named(c->hdrs, c->nh, hd.name)) ||
            gw_trace_drops(q, hd))
            continue;
        w = put(w, hd.name.ptr, hd.name.len);
        w = PUT_LIT(w, ": ");
        w = put(w, hd.value.ptr, hd.value.len);
        w = PUT_LIT(w, "\r\n");
    }
    if (q->req_xhdrs.len) /* FallbackHeaders */
        w = put(w, q->req_xhdrs.p, q->req_xhdrs.len);
    w = gw_forwarded_put(q, t, w); /* none without --trusted-proxies */
    w = gw_trace_put(&q->trace, w);
    if (q->req_chunked) {
        w = PUT_LIT(w, "Transfer-Encoding: chunked\r\n");
    } else if (q->has_body) {
        w = PUT_LIT(w, "Content-Length: ");
        w += gw_u64_text(w, (uint64_t)q->sreq.content_length);
        w = PUT_LIT(w, "\r\n");
    }
    w = PUT_LIT(w, "\r\n");
    h->len = (size_t)(w - h->p);
    *w = '\0';
    return h->failed ? 500 : 0;
}

uint64_t gw_head_lines(gw_buf *out, const sy_header *h, size_t n) {
    uint64_t names = 0;
    const char *run = NULL, *end = NULL; /* lines kept, not yet added */
    for (size_t i = 0; i < n; i++) {
        const char *l = h[i].name.ptr, *e = h[i].value.ptr + h[i].value.len + 2;
        size_t nl = h[i].name.len;
        bool hop = gw_resp_hop(l, nl), cl = hop && nl == 14;
        if (run && (l != end || (hop && !cl))) { /* Content-Length kept */
            gw_buf_add(out, run, (size_t)(end - run));
            run = NULL;
        }
        if (hop && !cl)
            continue;
        names |= cl ? 0 : gw_name_bit(l, nl);
        run = run ? run : l;
        end = e;
    }
    if (run)
        gw_buf_add(out, run, (size_t)(end - run));
    return names;
}

int gw_response_headers(http_parser *p, const sy_header *h, size_t n) {
    gw_request *q = ((gw_upconn *)p->data)->req;
    if (q && n <= GW_MAX_HEADERS) { /* as r_field and r_value leave them */
        memcpy(q->rhs, h, n * sizeof *h);
        q->rn = n;
        q->rlast = 2;
    }
    return q && n > GW_MAX_HEADERS;
}

/* True for an HTTP/1.1 request with Expect: 100-continue among its n
 * headers: its client waits for 100 Continue before the body. The gateway
 * does not send Expect upstream (hop-by-hop here, as the body is read by
 * the gateway), so it answers it itself once it reads the body for the
 * upstream (gw_request_body_flow); an answer of its own instead (404,
 * 413, ...) is the final status RFC 9110 10.1.1 allows in its place. */
bool gw_expects_100(const http_parser *p, const sy_header *h, size_t n) {
    if (p->http_major != 1 || p->http_minor < 1)
        return false;
    for (size_t i = 0; i < n; i++)
        if (h[i].name.len == 6 && strncasecmp(h[i].name.ptr, "expect", 6) == 0)
            return h[i].value.len == 12 &&
                   strncasecmp(h[i].value.ptr, "100-continue", 12) == 0;
    return false;
}

/* A protocol upgrade (WebSocket; SCG upgrades one on an http:// route):
 * the gateway proxies none, so Upgrade and Connection are dropped as
 * hop-by-hop and the request goes as a plain one. Logged and counted. */
void gw_upgrade_dropped(gw_request *q) {
    gw_metrics_policy(&q->w->metrics, q->route_id, GW_UPGRADE_DROPPED);
    const sy_header *h = q->c->hdrs;
    for (size_t i = 0; i < q->c->nh; i++)
        if (h[i].name.len == 7 && strncasecmp(h[i].name.ptr, "upgrade", 7) == 0)
            gw_log("route %s: Upgrade: %.*s dropped: the gateway proxies no "
                   "protocol upgrade, sent upstream as a plain %.*s",
                   q->route_id,
                   (int)(h[i].value.len < 64 ? h[i].value.len : 64),
                   h[i].value.ptr, (int)q->sreq.method.len, q->sreq.method.ptr);
}
