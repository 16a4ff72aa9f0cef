/* test_head_scan.c - the mini-gateway's request head fast path
 * (examples/mini-gateway/head_scan.c) against http-parser, the parser it
 * stands in for: on every head it takes, the same url, header pairs,
 * method, version, flags, content length and keep-alive as http-parser's
 * callbacks and fields, the same offset where http-parser pauses after the
 * head, and the same framing (body bytes, where the next message starts);
 * every head it does not take is left to http-parser. Hand-written heads
 * (common, edge, malicious), generated ones and byte mutations of them,
 * and every prefix of each (a head split by the network). */
#include <check.h>
#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "head_scan.h"
#include "testutil.h"

#define MAXH 64

/* what http-parser reports for a message, fed whole */
typedef struct ref {
    const char *url;
    size_t url_len;
    sy_header h[MAXH];
    size_t nh;
    int last;
    bool overflow, head_done, msg_done;
    size_t body;
} ref;

static int r_url(http_parser *p, const char *at, size_t len) {
    ref *r = p->data;
    if (!r->url)
        r->url = at;
    r->url_len += len;
    return 0;
}

static int r_field(http_parser *p, const char *at, size_t len) {
    ref *r = p->data;
    if (r->last != 1) {
        if (r->nh == MAXH) {
            r->overflow = true;
            return 1;
        }
        r->h[r->nh++] = (sy_header){{at, 0}, {"", 0}};
        r->last = 1;
    }
    r->h[r->nh - 1].name.len += len;
    return 0;
}

static int r_value(http_parser *p, const char *at, size_t len) {
    ref *r = p->data;
    if (r->last != 2) {
        r->h[r->nh - 1].value = (sy_str){at, 0};
        r->last = 2;
    }
    r->h[r->nh - 1].value.len += len;
    return 0;
}

static int r_head(http_parser *p) {
    ((ref *)p->data)->head_done = true;
    http_parser_pause(p, 1);
    return 0;
}

static int r_body(http_parser *p, const char *at, size_t len) {
    (void)at;
    ((ref *)p->data)->body += len;
    return 0;
}

static int r_done(http_parser *p) {
    ((ref *)p->data)->msg_done = true;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_url = r_url,
    .on_header_field = r_field,
    .on_header_value = r_value,
    .on_headers_complete = r_head,
    .on_body = r_body,
    .on_message_complete = r_done,
};

static size_t taken, left; /* heads the scanner took / left */

/* The scanner on buf[0..len) against http-parser on the same bytes. */
static void check_one_in(const char *buf, size_t len, size_t max_head);

/* buf copied to a heap block of exactly len bytes first: a read past the
 * end is ASan's to see */
static void check_one(const char *buf, size_t len, size_t max_head) {
    char *b = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(b);
    memcpy(b, buf, len);
    check_one_in(b, len, max_head);
    free(b);
}

static void check_one_in(const char *buf, size_t len, size_t max_head) {
    sy_header hs[MAXH];
    gw_head_req h;
    bool fast = gw_head_scan_request(buf, len, max_head, hs, MAXH, &h);
    if (!fast) {
        left++;
        return;
    }
    taken++;
    ck_assert_uint_le(h.head_len, len);
    ck_assert_uint_le(h.head_len, max_head);
    /* every prefix short of the head: not taken (a partial read). A prefix
     * with the same bytes as one of the head checked last was checked
     * there: the same call (both shorter than their head, so than their
     * max_head, which then bounds nothing), and the scanner keeps no
     * state. The heads checked one after the other share long prefixes
     * (at_http_parser_max's ~80 KB ones eight times over, every_byte's up
     * to the changed byte): each distinct prefix is scanned once, not once
     * a head (the scans of a head's prefixes cost its length squared). */
    static char *seen;
    static size_t seen_len, seen_cap;
    size_t same = 0;
    while (same < seen_len && same < h.head_len && seen[same] == buf[same])
        same++;
    size_t from = same < seen_len ? same + 1 : seen_len;
    if (h.head_len > seen_cap) {
        seen_cap = h.head_len;
        seen = realloc(seen, seen_cap);
        ck_assert_ptr_nonnull(seen);
    }
    memcpy(seen, buf, h.head_len);
    seen_len = h.head_len;
    for (size_t k = from; k < h.head_len; k++) {
        gw_head_req h2;
        ck_assert_msg(!gw_head_scan_request(buf, k, max_head, hs, MAXH, &h2),
                      "took a head cut at %zu of %zu", k, h.head_len);
    }
    http_parser p;
    http_parser_init(&p, HTTP_REQUEST);
    ref r = {0};
    p.data = &r;
    size_t n = http_parser_execute(&p, &settings, buf, len);
    ck_assert_msg(r.head_done, "taken, but http-parser: %s",
                  http_errno_name(HTTP_PARSER_ERRNO(&p)));
    ck_assert_int_eq(HTTP_PARSER_ERRNO(&p), HPE_PAUSED);
    ck_assert_uint_eq(n, h.head_len - 1); /* it pauses before the last LF */
    ck_assert_uint_eq(p.method, h.method);
    ck_assert_uint_eq(p.http_major, 1);
    ck_assert_uint_eq(p.http_minor, h.http_minor);
    ck_assert_uint_eq(p.flags, h.flags);
    ck_assert_uint_eq(p.upgrade, 0);
    ck_assert_uint_eq(p.uses_transfer_encoding, 0);
    ck_assert_uint_eq(p.content_length, h.content_length);
    ck_assert(http_should_keep_alive(&p));
    ck_assert_ptr_eq(r.url, h.url);
    ck_assert_uint_eq(r.url_len, h.url_len);
    ck_assert_uint_eq(r.nh, h.nh);
    for (size_t i = 0; i < h.nh; i++) {
        ck_assert_ptr_eq(r.h[i].name.ptr, hs[i].name.ptr);
        ck_assert_uint_eq(r.h[i].name.len, hs[i].name.len);
        ck_assert_ptr_eq(r.h[i].value.ptr, hs[i].value.ptr);
        ck_assert_uint_eq(r.h[i].value.len, hs[i].value.len);
    }
    /* the framing: the body the gateway's fast path reads, then the next
     * message where http-parser starts it */
    http_parser_pause(&p, 0);
    n += http_parser_execute(&p, &settings, buf + n, len - n);
    uint64_t cl = h.content_length == UINT64_MAX ? 0 : h.content_length;
    size_t avail = len - h.head_len;
    bool done = cl <= avail;
    ck_assert_int_eq(r.msg_done, done);
    ck_assert_uint_eq(r.body, done ? cl : avail);
    ck_assert_uint_eq(n, h.head_len + (done ? cl : avail));
    ck_assert_int_eq(HTTP_PARSER_ERRNO(&p), done ? HPE_PAUSED : HPE_OK);
}

static void check_str(const char *s) {
    check_one(s, strlen(s), 80 * 1024);
}

#define NEXT "GET /n HTTP/1.1\r\nHost: n\r\n\r\n"

START_TEST(common_heads_are_taken) {
    static const char *ok[] = {
        "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /p?q=1#f HTTP/1.1\r\nHost: a:80\r\nUser-Agent: x/1\r\n\r\n",
        "HEAD /x HTTP/1.1\r\nhost:\ta\r\nAccept: */*\r\n\r\n",
        "POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello" NEXT,
        "PUT /u HTTP/1.1\r\nHost: a\r\ncontent-length: 0\r\n\r\n" NEXT,
        "DELETE /d HTTP/1.1\r\nHost: a\r\nConnection: Keep-Alive\r\n\r\n",
        "OPTIONS /o HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\n",
        "PATCH /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nab",
        "GET /\"<>\\^`{|}~%41?a?b#c#d HTTP/1.1\r\nX: a \t b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 999999999999999\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Lengt: 12\r\nConnectio: close\r\n"
        "Upgrad: x\r\nTransfer-Encodin: chunked\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        size_t before = taken;
        check_str(ok[i]);
        ck_assert_msg(taken == before + 1, "not taken: %s", ok[i]);
    }
}
END_TEST

START_TEST(uncommon_heads_are_left) {
    static const char *no[] = {
        "GET / HTTP/1.1\r\nHost: a\r\n",             /* incomplete */
        "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",     /* leading CRLF */
        "GET  / HTTP/1.1\r\nHost: a\r\n\r\n",        /* two spaces */
        "GET /  HTTP/1.1\r\nHost: a\r\n\r\n",        /* two spaces */
        "get / HTTP/1.1\r\nHost: a\r\n\r\n",         /* lowercase method */
        "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n", /* CONNECT */
        "PURGE / HTTP/1.1\r\nHost: a\r\n\r\n",       /* not in the list */
        "GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", /* absolute-form */
        "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",     /* asterisk-form */
        "GET /\x80 HTTP/1.1\r\nHost: a\r\n\r\n",     /* high byte */
        "GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n",     /* DEL */
        "GET / HTTP/2.0\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.2\r\nHost: a\r\n\r\n",
        "GET / HTTP/0.9\r\nHost: a\r\n\r\n",
        "GET /\r\n\r\n",                   /* HTTP/0.9 */
        "GET / HTTP/1.1\nHost: a\r\n\r\n", /* bare LF */
        "GET / HTTP/1.1\r\nHost: a\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\n\n",
        "GET / HTTP/1.1\r\nHost: a\r\r\n\r\n",
        "GET / HTTP/1.1\r\nHost : a\r\n\r\n", /* space before colon */
        " GET / HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.1\r\n Host: a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\n b\r\n\r\n", /* obs-fold */
        "GET / HTTP/1.1\r\nHost: a\r\n\tb\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a \r\n\r\n", /* trailing OWS */
        "GET / HTTP/1.1\r\nHost: a\t\r\n\r\n",
        "GET / HTTP/1.1\r\nX:\r\n\r\n", /* empty value */
        "GET / HTTP/1.1\r\nX:  \r\n\r\n",
        "GET / HTTP/1.1\r\n: a\r\n\r\n",      /* empty name */
        "GET / HTTP/1.1\r\nX(: a\r\n\r\n",    /* not a token */
        "GET / HTTP/1.1\r\nX: a\x01\r\n\r\n", /* CTL */
        "GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n",
        "GET / HTTP/1.1\r\nX: \xc3\xa9\r\n\r\n", /* obs-text */
        "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na",
        "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\na",
        "POST / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\na",
        "POST / HTTP/1.1\r\nContent-Length: 01\r\n\r\na",
        "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\na",
        "POST / HTTP/1.1\r\nContent-Length: 1 \r\n\r\na",
        "POST / HTTP/1.1\r\nContent-Length: 0x1\r\n\r\na",
        "POST / HTTP/1.1\r\nContent-Length: 1234567890123456\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length : 1\r\n\r\na",
        "POST / HTTP/1.1\r\nContent-Lengthy: 1\r\n\r\na",
        "POST / HTTP/1.1\r\nConnection-X: 1\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 3\r\n"
        "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encodingx: gzip\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding:\r\n\r\n",
        "GET / HTTP/1.1\r\nConnection: close\r\n\r\n",
        "GET / HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        "GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
        "GET / HTTP/1.1\r\nConnection: keep-alive, close\r\n\r\n",
        "GET / HTTP/1.1\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n",
        "GET / HTTP/1.1\r\nConnection: keep-alive\r\n"
        "Connection: keep-alive\r\n\r\n",
        "GET / HTTP/1.1\r\nProxy-Connection: close\r\n\r\n",
        "GET / HTTP/1.0\r\nHost: a\r\n\r\n", /* 1.0: closes */
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        size_t before = taken;
        check_str(no[i]);
        ck_assert_msg(taken == before, "taken: %s", no[i]);
    }
    /* a NUL anywhere */
    const char nul[] = "GET / HTTP/1.1\r\nX: a\0b\r\n\r\n";
    size_t before = taken;
    check_one(nul, sizeof nul - 1, 1000);
    const char nul2[] = "GET /\0 HTTP/1.1\r\nX: ab\r\n\r\n";
    check_one(nul2, sizeof nul2 - 1, 1000);
    ck_assert_uint_eq(taken, before);
}
END_TEST

START_TEST(limits) {
    /* a head longer than max_head, or with more headers than room */
    const char *s = "GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n\r\n";
    size_t len = strlen(s);
    sy_header hs[2];
    gw_head_req h;
    ck_assert(gw_head_scan_request(s, len, len, hs, 2, &h));
    ck_assert(!gw_head_scan_request(s, len, len - 1, hs, 2, &h));
    ck_assert(!gw_head_scan_request(s, len, len, hs, 1, &h));
    /* a very long one, taken whole and cut */
    size_t big = 70000;
    char *b = malloc(big + 64);
    ck_assert_ptr_nonnull(b);
    int n = snprintf(b, 64, "GET / HTTP/1.1\r\nX: ");
    memset(b + n, 'v', big);
    memcpy(b + n + big, "\r\n\r\n", 4);
    check_one(b, (size_t)n + big + 4, 80 * 1024);
    ck_assert(
        gw_head_scan_request(b, (size_t)n + big + 4, 80 * 1024, hs, 2, &h));
    ck_assert(!gw_head_scan_request(b, (size_t)n + big + 4, 65536, hs, 2, &h));
    free(b);
}
END_TEST

/* ------------------------------------------------------------------ */
/* generated heads                                                      */
/* ------------------------------------------------------------------ */

static unsigned long long rng = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static const char *pick(const char *const *a, size_t n) {
    return a[rnd((unsigned)n)];
}
#define PICK(a) pick(a, sizeof a / sizeof a[0])

static const char *const g_method[] = {
    "GET",   "GET",     "HEAD",  "POST", "PUT",  "DELETE", "OPTIONS",
    "PATCH", "CONNECT", "PURGE", "get",  "GETT", "GE",     "MKCOL",
};
static const char *const g_sp[] = {" ", " ", " ", " ", "  ", "\t", ""};
static const char *const g_target[] = {
    "/",          "/a/b", "/a?b=c",  "/x#f",  "/%zz",  "/a?b?c#d#e",      "*",
    "http://h/p", "a/b",  "/sp ace", "/\x01", "/\x80", "/~!$&'()*+,;=:@",
};
static const char *const g_version[] = {
    "HTTP/1.1", "HTTP/1.1", "HTTP/1.1", "HTTP/1.0",  "HTTP/2.0", "HTTP/0.9",
    "HTTP/1.",  "HTTP/11",  "http/1.1", "HTTP/1.1 ", "",
};
static const char *const g_eol[] = {"\r\n", "\r\n", "\r\n",  "\r\n",
                                    "\n",   "\r",   "\r\r\n"};
static const char *const g_name[] = {
    "Host",
    "Host",
    "User-Agent",
    "Accept",
    "X-A",
    "content-length",
    "Content-Length",
    "CONTENT-LENGTH",
    "Transfer-Encoding",
    "Connection",
    "connection",
    "Upgrade",
    "Proxy-Connection",
    "Content-Lengthz",
    "Connection2",
    "Transfer-Encodingz",
    "Upgrade-Insecure-Requests",
    "X Y",
    "X(",
    "",
    "Host ",
    " Host",
    "X\x01",
};
static const char *const g_colon[] = {":",    ": ", ":  ", ":\t",
                                      ": \t", " :", ""};
static const char *const g_value[] = {
    "a",
    "example.com",
    "0",
    "5",
    "12",
    "007",
    "-1",
    "1 ",
    " 2",
    "1,1",
    "18446744073709551615",
    "99999999999999",
    "chunked",
    "gzip, chunked",
    "close",
    "keep-alive",
    "Keep-Alive",
    "upgrade",
    "keep-alive, close",
    "",
    "a b",
    "a\tb",
    "a\x01",
    "\xff",
    "x ",
    "websocket",
};

#define PUT2(s)                                                                \
    do {                                                                       \
        const char *s_ = (s);                                                  \
        size_t l_ = strlen(s_);                                                \
        if (n + l_ < cap) {                                                    \
            memcpy(out + n, s_, l_);                                           \
            n += l_;                                                           \
        }                                                                      \
    } while (0)

static size_t gen(char *out, size_t cap) {
    size_t n = 0;
#define PUT(s)                                                                 \
    do {                                                                       \
        const char *s_ = (s); /* evaluated once: PICK draws */                 \
        size_t l_ = strlen(s_);                                                \
        if (n + l_ < cap) {                                                    \
            memcpy(out + n, s_, l_);                                           \
            n += l_;                                                           \
        }                                                                      \
    } while (0)
    bool clean = rnd(3) != 0; /* mostly well formed */
    PUT(clean ? "GET" : PICK(g_method));
    PUT(clean ? " " : PICK(g_sp));
    PUT(clean ? "/p" : PICK(g_target));
    PUT(clean ? " " : PICK(g_sp));
    PUT(clean ? (rnd(4) ? "HTTP/1.1" : "HTTP/1.0") : PICK(g_version));
    PUT(clean ? "\r\n" : PICK(g_eol));
    unsigned nh = rnd(7);
    for (unsigned i = 0; i < nh; i++) {
        bool c2 = rnd(4) != 0;
        PUT(PICK(g_name));
        PUT(c2 ? ": " : PICK(g_colon));
        PUT(PICK(g_value));
        PUT(c2 ? "\r\n" : PICK(g_eol));
        if (!rnd(20))
            PUT(rnd(2) ? " folded\r\n" : "\tfolded\r\n");
    }
    PUT(clean ? "\r\n" : PICK(g_eol));
    size_t body = rnd(30); /* some body bytes, then a pipelined request */
    for (size_t i = 0; i < body && n + 1 < cap; i++)
        out[n++] = 'b';
    if (rnd(2))
        PUT(NEXT);
#undef PUT
    return n;
}

START_TEST(generated_and_mutated) {
    char buf[1024];
    size_t t0 = taken;
    for (int i = 0; i < 200000; i++) {
        size_t n = gen(buf, sizeof buf);
        if (i % 3 == 0 && n) { /* mutate a byte, or cut, or repeat one */
            switch (rnd(3)) {
            case 0: buf[rnd((unsigned)n)] = (char)rnd(256); break;
            case 1: n = rnd((unsigned)n) + 1; break;
            default:
                if (n + 1 < sizeof buf) {
                    size_t at = rnd((unsigned)n);
                    memmove(buf + at + 1, buf + at, n - at);
                    n++;
                }
            }
        }
        check_one(buf, n, rnd(8) ? 80 * 1024 : rnd(200) + 1);
    }
    ck_assert_uint_gt(taken - t0, 10000); /* the fast path was exercised */
    ck_assert_uint_gt(left, 20000);       /* and so was the fallback */
}
END_TEST

/* ------------------------------------------------------------------ */
/* responses: gw_fast_execute_response against http_parser_execute      */
/* ------------------------------------------------------------------ */

/* a run's callbacks, as the gateway's upstream.c makes them: pause at a
 * final response's end, HEAD answers' bodies skipped on request */
typedef struct trace {
    char log[8192];
    size_t n;
    gw_fast_msg f;
    const char *base; /* the part being read, copied on its own */
    size_t base_off;  /* its offset in the whole */
    int hc_ret;
} trace;

static void logf_(trace *t, const char *fmt, long a, long b) {
    int k = snprintf(t->log + t->n, sizeof t->log - t->n, fmt, a, b);
    if (k > 0 && t->n + (size_t)k < sizeof t->log)
        t->n += (size_t)k;
}

static int t_begin(http_parser *p) {
    trace *t = p->data;
    t->f.mid = true;
    logf_(t, "B%ld%ld ", 0, 0);
    return 0;
}
static int t_field(http_parser *p, const char *at, size_t len) {
    trace *t = p->data;
    logf_(t, "F%ld,%ld ", (long)(at - t->base + (long)t->base_off), (long)len);
    return 0;
}
static int t_value(http_parser *p, const char *at, size_t len) {
    trace *t = p->data;
    logf_(t, "V%ld,%ld ", (long)(at - t->base + (long)t->base_off), (long)len);
    return 0;
}
static int t_head(http_parser *p) {
    trace *t = p->data;
    logf_(t, "H%ld,%ld ", p->status_code, (long)p->flags);
    logf_(t, "%ld.%ld ", p->http_major, p->http_minor);
    logf_(t, "cl%ld u%ld ", (long)p->content_length, p->upgrade);
    return p->status_code >= 200 ? t->hc_ret : 0;
}
static int t_body(http_parser *p, const char *at, size_t len) {
    trace *t = p->data;
    logf_(t, "D%ld,%ld ", (long)(at - t->base + (long)t->base_off), (long)len);
    return 0;
}
static int t_done(http_parser *p) {
    trace *t = p->data;
    t->f.mid = !http_should_keep_alive(p);
    logf_(t, "M%ld,%ld ", p->status_code, http_should_keep_alive(p));
    if (p->status_code >= 200)
        http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings t_settings = {
    .on_message_begin = t_begin,
    .on_header_field = t_field,
    .on_header_value = t_value,
    .on_headers_complete = t_head,
    .on_body = t_body,
    .on_message_complete = t_done,
};

/* buf fed in two reads split at cut, then EOF, as up_read feeds it: each
 * pause resumed while bytes are left */
static void run(trace *t, bool fast, const char *buf, size_t len, size_t cut,
                int hc_ret) {
    memset(t, 0, sizeof *t);
    t->hc_ret = hc_ret;
    http_parser p;
    http_parser_init(&p, HTTP_RESPONSE);
    p.data = t;
    size_t parts[3][2] = {{0, cut}, {cut, len - cut}, {len, 0}};
    for (int k = 0; k < 3; k++) {
        size_t l = parts[k][1], off = 0;
        /* each read in a heap block of its own size: a read past its end
         * is ASan's to see */
        char *d = l ? malloc(l) : NULL;
        ck_assert(!l || d);
        if (l)
            memcpy(d, buf + parts[k][0], l);
        t->base = d;
        t->base_off = parts[k][0];
        for (;;) {
            size_t n =
                fast ? gw_fast_execute_response(&p, &t_settings, &t->f,
                                                d ? d + off : NULL, l - off)
                     : http_parser_execute(&p, &t_settings, d ? d + off : NULL,
                                           l - off);
            off += n;
            enum http_errno e = HTTP_PARSER_ERRNO(&p);
            logf_(t, "<%ld e%ld> ", (long)n, (long)e);
            if (e == HPE_PAUSED && off < l) {
                http_parser_pause(&p, 0);
                continue;
            }
            if (e == HPE_PAUSED)
                http_parser_pause(&p, 0);
            break;
        }
        free(d);
        if (HTTP_PARSER_ERRNO(&p) != HPE_OK)
            break;
    }
    logf_(t, "end s%ld f%ld ", p.status_code, (long)p.flags);
    logf_(t, "cl%ld u%ld", (long)p.content_length, p.upgrade);
}

static size_t resp_taken, resp_left;

static void check_resp(const char *buf, size_t len, size_t cut, int hc_ret) {
    static trace a, b;
    run(&a, false, buf, len, cut, hc_ret);
    run(&b, true, buf, len, cut, hc_ret);
    ck_assert_msg(a.n == b.n && !memcmp(a.log, b.log, a.n),
                  "cut %zu of %zu:\nhttp-parser %.*s\nfast        %.*s\n"
                  "input %.*s",
                  cut, len, (int)a.n, a.log, (int)b.n, b.log, (int)len, buf);
}

static void check_resp_all(const char *buf, size_t len, bool every_cut) {
    sy_header hs[MAXH];
    gw_head_resp h;
    if (gw_head_scan_response(buf, len, 80 * 1024, hs, MAXH, &h))
        resp_taken++;
    else
        resp_left++;
    for (size_t cut = 0; cut <= len; cut += every_cut ? 1 : 1 + rnd(64)) {
        check_resp(buf, len, cut, 0);
        check_resp(buf, len, cut, 1);
    }
}

#define OKR "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"

START_TEST(responses) {
    static const char *rs[] = {
        OKR,
        OKR OKR,
        OKR "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n" OKR,
        "HTTP/1.1 200 OK\r\nServer: b\r\nContent-Length: 10\r\n\r\n0123456789",
        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123",
        "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: "
        "1\r\n\r\nx",
        "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx" OKR,
        "HTTP/1.1 200 \r\nContent-Length: 1\r\n\r\nx",
        "HTTP/1.1 200\r\nContent-Length: 1\r\n\r\nx",
        "HTTP/1.1 100 Continue\r\n\r\n" OKR,
        "HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n" OKR,
        "HTTP/1.1 304 Not Modified\r\nContent-Length: 3\r\n\r\n" OKR,
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0"
        "\r\n\r\n" OKR,
        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked"
        "\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        "HTTP/1.1 200 OK\r\n\r\nto the end",
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: "
        "1\r\n\r\nx" OKR,
        "HTTP/1.1 101 Switching\r\nConnection: upgrade\r\nUpgrade: x\r\n\r\nyy",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n folded\r\n\r\nx",
        "HTTP/1.1 200 OK\nContent-Length: 1\r\n\r\nx",
        "HTTP/1.1 2000 OK\r\nContent-Length: 1\r\n\r\nx",
        "HTTP/2 200 OK\r\nContent-Length: 1\r\n\r\nx",
        "\r\n" OKR,
    };
    for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++)
        check_resp_all(rs[i], strlen(rs[i]), true);
}
END_TEST

static const char *const r_status[] = {
    "HTTP/1.1 200 OK", "HTTP/1.1 200 OK",       "HTTP/1.1 404 Not Found",
    "HTTP/1.1 503 x",  "HTTP/1.0 200 OK",       "HTTP/1.1 204 No Content",
    "HTTP/1.1 304 NM", "HTTP/1.1 100 Continue", "HTTP/1.1 200",
    "HTTP/1.1 199 x",  "HTTP/1.1 600 x",        "HTTP/1.1 20 x",
    "HTTP/2.0 200 OK", "http/1.1 200 OK",       "HTTP/1.1 200 \x01",
};

static size_t gen_resp(char *out, size_t cap) {
    size_t n = 0;
    for (unsigned m = 0, nm = 1 + rnd(3); m < nm; m++) {
        bool clean = rnd(3) != 0;
        PUT2(clean ? "HTTP/1.1 200 OK" : PICK(r_status));
        PUT2(clean ? "\r\n" : PICK(g_eol));
        unsigned nh = rnd(6);
        bool cl = clean && rnd(4);
        for (unsigned i = 0; i < nh; i++) {
            bool c2 = rnd(4) != 0;
            PUT2(PICK(g_name));
            PUT2(c2 ? ": " : PICK(g_colon));
            PUT2(PICK(g_value));
            PUT2(c2 ? "\r\n" : PICK(g_eol));
        }
        char clh[40];
        unsigned body = rnd(20);
        snprintf(clh, sizeof clh, "Content-Length: %u\r\n", body);
        if (cl)
            PUT2(clh);
        PUT2(clean ? "\r\n" : PICK(g_eol));
        for (unsigned i = 0; i < body + rnd(3) && n + 1 < cap; i++)
            out[n++] = 'b';
    }
    return n;
}

START_TEST(generated_responses) {
    char buf[1024];
    size_t t0 = resp_taken;
    for (int i = 0; i < 30000; i++) {
        size_t n = gen_resp(buf, sizeof buf);
        if (i % 3 == 0 && n)
            buf[rnd((unsigned)n)] = (char)rnd(256);
        check_resp_all(buf, n, i % 50 == 0);
    }
    ck_assert_uint_gt(resp_taken - t0, 2000);
    ck_assert_uint_gt(resp_left, 3000);
}
END_TEST

/* Every byte value at every position of a few heads, as a substitute and
 * as an insertion: whatever the scanner takes, http-parser reads the same
 * (names matched as http-parser matches them, values and targets byte by
 * byte, NUL and bytes >= 0x80 included). */
static void every_byte(const char *s, size_t max_head) {
    size_t len = strlen(s);
    char buf[512];
    ck_assert_uint_lt(len + 1, sizeof buf);
    for (size_t i = 0; i < len; i++)
        for (unsigned b = 0; b < 256; b++) {
            memcpy(buf, s, len);
            buf[i] = (char)b;
            check_one(buf, len, max_head);
            memcpy(buf, s, i);
            buf[i] = (char)b;
            memcpy(buf + i + 1, s + i, len - i);
            check_one(buf, len + 1, max_head);
        }
}

START_TEST(every_byte_everywhere) {
    size_t t0 = taken;
    every_byte("POST /a?b#c HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\n"
               "Connection: keep-alive\r\n\r\n0123456789ab" NEXT,
               80 * 1024);
    every_byte("GET /x HTTP/1.0\r\nConnection: keep-alive\r\nUpgrade-: 1\r\n"
               "Transfer-Encodin: x\r\nProxy-Connectio: y\r\n\r\n",
               80 * 1024);
    /* the head's end at max_head exactly, and one byte over */
    const char *e = "GET / HTTP/1.1\r\nContent-Length: 1\r\n\r\nx";
    every_byte(e, strlen(e) - 1);
    every_byte(e, strlen(e) - 2);
    ck_assert_uint_gt(taken - t0, 500);
}
END_TEST

/* Heads about http-parser's own HTTP_MAX_HEADER_SIZE: one it refuses
 * (HPE_HEADER_OVERFLOW) is never taken. */
START_TEST(at_http_parser_max) {
    size_t cap = HTTP_MAX_HEADER_SIZE + 64;
    char *b = malloc(cap);
    ck_assert_ptr_nonnull(b);
    for (size_t total = HTTP_MAX_HEADER_SIZE - 4;
         total <= HTTP_MAX_HEADER_SIZE + 4; total++) {
        size_t n = (size_t)snprintf(b, 64, "GET / HTTP/1.1\r\nX: ");
        size_t fill = total - n - 4;
        memset(b + n, 'v', fill);
        memcpy(b + n + fill, "\r\n\r\n", 4);
        size_t before = taken;
        check_one(b, total, HTTP_MAX_HEADER_SIZE);
        check_one(b, total, total);
        /* (http-parser, paused at the head as the gateway pauses it, fails
         * one of exactly HTTP_MAX_HEADER_SIZE on the last LF) */
        ck_assert_uint_eq(taken - before, total < HTTP_MAX_HEADER_SIZE ? 2 : 0);
        /* a response head of the same size */
        n = (size_t)snprintf(b, 64,
                             "HTTP/1.1 200 OK\r\nContent-Length: 1"
                             "\r\nX: ");
        fill = total - n - 4;
        memset(b + n, 'v', fill);
        memcpy(b + n + fill, "\r\n\r\nx", 5);
        check_resp(b, total + 1, total + 1, 0);
        check_resp(b, total + 1, total / 2, 0);
    }
    free(b);
}
END_TEST

/* Every byte value at every position of a few responses, substituted and
 * inserted, read in one piece and cut in two: the same events. */
static void every_byte_resp(const char *s) {
    size_t len = strlen(s);
    char buf[512];
    ck_assert_uint_lt(len + 1, sizeof buf);
    for (size_t i = 0; i < len; i++)
        for (unsigned b = 0; b < 256; b++) {
            memcpy(buf, s, len);
            buf[i] = (char)b;
            for (int hc = 0; hc < 2; hc++) {
                check_resp(buf, len, len, hc);
                check_resp(buf, len, i, hc);
            }
            memcpy(buf, s, i);
            buf[i] = (char)b;
            memcpy(buf + i + 1, s + i, len - i);
            check_resp(buf, len + 1, len + 1, 0);
            check_resp(buf, len + 1, i + 1, 1);
        }
}

START_TEST(every_byte_responses) {
    every_byte_resp("HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: "
                    "keep-alive\r\n\r\n0123456789ab" OKR);
    every_byte_resp("HTTP/1.0 404 x\r\nConnection: keep-alive\r\nUpgrade-: 1"
                    "\r\nContent-Length: 0\r\n\r\n" OKR);
}
END_TEST

int main(void) {
    Suite *s = suite_create("head_scan");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, common_heads_are_taken);
    tcase_add_test(tc, uncommon_heads_are_left);
    tcase_add_test(tc, limits);
    tcase_add_test(tc, generated_and_mutated);
    tcase_add_test(tc, responses);
    tcase_add_test(tc, generated_responses);
    tcase_add_test(tc, every_byte_everywhere);
    tcase_add_test(tc, at_http_parser_max);
    tcase_add_test(tc, every_byte_responses);
    suite_add_tcase(s, tc);
    int rc = sy_test_run(s);
    printf("# head_scan: requests %zu heads taken, %zu left to http-parser; "
           "responses %zu taken, %zu left\n",
           taken, left, resp_taken, resp_left);
    return rc;
}
