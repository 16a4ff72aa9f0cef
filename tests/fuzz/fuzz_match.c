/*
 * fuzz_match.c - libFuzzer target for the matching contract (route model
 * section 3): the indexed matcher and the linear scan must choose the same
 * route with the same variables and the same plan, and explain must call
 * that same route the first match. The policy calls then run on the match
 * (rate limit, Redis call, breaker, retry) within their contract.
 *
 * Input: a route document, then optionally a NUL byte and request lines
 *
 *   METHOD HOST PATH[?QUERY] [Name:Value ...]\n
 *
 * (fields split on single spaces; missing fields are empty). Without a NUL
 * the whole input is the document and a built-in list of requests is used,
 * so plain JSON documents (tests/data/valid) are useful seeds. The router
 * is lenient, so a document with some invalid routes still yields the
 * rest; a document rejected as a whole is ignored. The low bit of the
 * input length turns the strip_host_port option on.
 */
#include <switchyard.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HEADERS 8

static const char *const builtin[] = {
    "GET example.com /",
    "GET api.example.com:8080 /api/v1/users/42",
    "POST www.example.com /orders/7/items?debug=true X-Env:prod",
    "GET localhost /a/b/c/",
    "GET h /x.json Cookie:session=abc",
    "DELETE a.b.example.com /users;v=1/42/",
    "PUT h /%61pi/v2 X-Tenant:t1",
    "HEAD [::1]:443 //a//b",
    "PURGE h /static/img.png?q=a+b",
    "get Example.com /Users",
    "OPTIONS x.org /api/",
    "GET h ",
};

static sy_str S(const char *p, size_t n) {
    return (sy_str){p, n};
}

static bool same(sy_str a, sy_str b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static void must(bool ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_match: indexed and linear disagree on %s\n",
                what);
        abort();
    }
}

typedef struct first_match {
    const sy_route *route;
    bool seen;
} first_match;

static int explain_cb(void *data, const sy_route *route, bool matched,
                      int failed_predicate, const char *failed_name) {
    (void)failed_predicate;
    (void)failed_name;
    first_match *f = data;
    if (matched) {
        f->route = route;
        f->seen = true;
        return 1;
    }
    return 0;
}

/* Parse one request line (not NUL-terminated) into req/headers. */
static void parse_line(const char *p, size_t n, sy_request *req,
                       sy_header *hdr) {
    sy_str f[3 + MAX_HEADERS];
    size_t nf = 0, start = 0;
    for (size_t i = 0; i <= n && nf < 3 + MAX_HEADERS; i++)
        if (i == n || p[i] == ' ') {
            f[nf++] = S(p + start, i - start);
            start = i + 1;
        }
    for (size_t i = nf; i < 3; i++)
        f[i] = S("", 0);
    req->method = f[0];
    req->host = f[1];
    const char *q = f[2].len ? memchr(f[2].ptr, '?', f[2].len) : NULL;
    if (q) {
        req->path = S(f[2].ptr, (size_t)(q - f[2].ptr));
        req->query = S(q + 1, f[2].len - req->path.len - 1);
    } else {
        req->path = f[2];
    }
    size_t nh = 0;
    for (size_t i = 3; i < nf; i++) {
        const char *c = memchr(f[i].ptr, ':', f[i].len);
        size_t nl = c ? (size_t)(c - f[i].ptr) : f[i].len;
        hdr[nh].name = S(f[i].ptr, nl);
        hdr[nh].value = c ? S(c + 1, f[i].len - nl - 1) : S("", 0);
        nh++;
    }
    req->headers = nh ? hdr : NULL;
    req->header_count = nh;
    /* the other inputs come from a hash of the line */
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    static const char *const addrs[] = {"10.1.2.3", "192.168.1.1", "::1",
                                        "127.0.0.1"};
    const char *a = addrs[h % 4];
    req->remote_addr = S(a, strlen(a));
    req->now_ms = 1700000000000LL + (int64_t)(h % 8000) - 4000;
    req->seed = h;
    req->content_length = (h & 64) ? (int64_t)(h % 1000) : -1;
}

/* The policy calls on a match (lib/policy/): whatever args the document
 * gave, they answer within their contract. */
static void policies(const sy_match *m, const sy_request *req) {
    sy_ratelimit rl;
    must(sy_match_ratelimit(m, req->now_ms, &rl, NULL) == 0, "ratelimit");
    must(rl.limited || rl.allowed, "no limiter, yet not allowed");
    must(rl.allowed || rl.status >= 100, "a denial without a status");
    must(rl.key_len < sizeof rl.key, "key length");
    for (size_t i = 0; i < sy_match_ratelimit_count(m); i++) {
        sy_redis_call c;
        must(sy_match_ratelimit_redis(m, i, &c, NULL) == 0, "redis call");
        sy_ratelimit_redis_result(&c, req->seed & 1, 1, 0, &rl);
    }
    sy_breaker_permit p;
    must(sy_match_breaker_acquire(m, req->now_ms, &p, NULL) == 0, "breaker");
    if (p.permitted)
        sy_breaker_record(&p, (sy_outcome)(req->seed % 4),
                          (int)(req->seed % 600), req->seed % 5000,
                          req->now_ms);
    const sy_retry_policy *rp = sy_match_retry_policy(m);
    uint32_t delay;
    for (uint32_t n = 0; rp && n < 4; n++)
        sy_retry_next(rp, n, req->method, (sy_outcome)((req->seed >> n) % 4),
                      (int)(req->seed % 600), n * 100u, req->seed, &delay);
}

static void check(const sy_snapshot *s, sy_match_ctx *ci, sy_match_ctx *cl,
                  const sy_request *req) {
    sy_match *mi = NULL, *ml = NULL;
    int rci = sy_snapshot_match(s, ci, req, &mi);
    int rcl = sy_snapshot_match_linear(s, cl, req, &ml);
    must(rci == rcl, "return code");
    if (rci)
        return;
    const sy_route *ri = mi ? sy_match_route(mi) : NULL;
    const sy_route *rl = ml ? sy_match_route(ml) : NULL;
    must(ri == rl, "route");
    if (!mi)
        return;
    must(sy_match_var_count(mi) == sy_match_var_count(ml), "var count");
    for (size_t i = 0; i < sy_match_var_count(mi); i++) {
        sy_str a, b, c, d;
        sy_match_var(mi, i, &a, &b);
        sy_match_var(ml, i, &c, &d);
        must(same(a, c) && same(b, d), "variable");
    }
    must(sy_match_action(mi) == sy_match_action(ml), "action");
    must(sy_match_status(mi) == sy_match_status(ml), "status");
    must(same(sy_match_redirect(mi), sy_match_redirect(ml)), "redirect");
    must(same(sy_match_path(mi), sy_match_path(ml)), "path");
    must(same(sy_match_query(mi), sy_match_query(ml)), "query");
    must(sy_match_header_count(mi) == sy_match_header_count(ml),
         "header count");
    for (size_t i = 0; i < sy_match_header_count(mi); i++) {
        sy_header a = sy_match_header(mi, i), b = sy_match_header(ml, i);
        must(same(a.name, b.name) && same(a.value, b.value), "header");
    }
    must(sy_match_response_op_count(mi) == sy_match_response_op_count(ml),
         "response ops");
    policies(mi, req);
    /* explain runs on the linear context: ml is not used after this */
    first_match f = {NULL, false};
    must(sy_snapshot_explain(s, cl, req, explain_cb, &f) == 0, "explain");
    must(f.seen && f.route == ri, "explain's first match");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *in = (const char *)data;
    const char *nul = memchr(in, '\0', size);
    size_t doc_len = nul ? (size_t)(nul - in) : size;

    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.lenient = true;
    o.strip_host_port = size & 1;
    sy_router *r = NULL;
    if (sy_router_new(&o, &r, NULL))
        return 0;
    if (sy_router_add_source(r, "fuzz", NULL) ||
        sy_router_apply(r, "fuzz", in, doc_len, NULL, NULL)) {
        sy_router_free(r);
        return 0;
    }
    sy_match_ctx *ci = NULL, *cl = NULL;
    if (sy_match_ctx_new(NULL, &ci, NULL) ||
        sy_match_ctx_new(NULL, &cl, NULL)) {
        sy_match_ctx_free(ci);
        sy_router_free(r);
        return 0;
    }
    sy_snapshot *s = sy_router_acquire(r);
    sy_request req = SY_REQUEST_INIT;
    sy_header hdr[MAX_HEADERS];
    if (nul) {
        const char *p = nul + 1, *end = in + size;
        size_t lines = 0;
        while (p <= end && lines++ < 64) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
            sy_request init = SY_REQUEST_INIT;
            req = init;
            parse_line(p, n, &req, hdr);
            check(s, ci, cl, &req);
            if (!nl)
                break;
            p = nl + 1;
        }
    } else {
        for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++) {
            sy_request init = SY_REQUEST_INIT;
            req = init;
            parse_line(builtin[i], strlen(builtin[i]), &req, hdr);
            check(s, ci, cl, &req);
        }
    }
    sy_snapshot_release(s);
    sy_match_ctx_free(ci);
    sy_match_ctx_free(cl);
    sy_router_free(r);
    return 0;
}
