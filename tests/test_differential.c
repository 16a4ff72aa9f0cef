/*
 * test_differential.c - the correctness contract of route model section 3:
 * for every request, the indexed matcher (sy_snapshot_match) returns exactly
 * what the reference linear scan (sy_snapshot_match_linear) returns: the
 * same route, the same captured variables (names and values, in order) and
 * the same filter plan.
 *
 * Random route tables are generated as SCG JSON documents from a small
 * vocabulary (every predicate kind, overlapping and nested patterns, equal
 * and negative orders, disabled routes, routes without Path/Host, weight
 * groups), split over two sources, applied to a router; random requests are
 * drawn mostly from the same vocabulary so that many of them match. Then
 * one-route changes (upsert, remove, enable/disable, re-apply) exercise the
 * snapshot overlay and, past its size limit, the index rebuild.
 *
 * Seeds are a fixed list plus one taken from $SY_SEED when set; sizes scale
 * with $SY_STRESS_SCALE. A failure prints the seed, the request and the
 * whole live table (canonical JSON, rank order) to stderr.
 */
#include "testutil.h"

#include <switchyard.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Small helpers: RNG, growable text                                    */
/* ------------------------------------------------------------------ */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rnext(rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint32_t below(rng *r, uint32_t n) {
    return n ? (uint32_t)(rnext(r) % n) : 0;
}

static bool chance(rng *r, unsigned pct) {
    return below(r, 100) < pct;
}

#define PICK(r, arr) ((arr)[below((r), sizeof(arr) / sizeof((arr)[0]))])

typedef struct text {
    char *p;
    size_t len, cap;
} text;

static void tput(text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void tput(text *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = t->cap - t->len;
        int n = vsnprintf(t->p ? t->p + t->len : NULL, room, fmt, ap);
        va_end(ap);
        ck_assert_int_ge(n, 0);
        if ((size_t)n < room) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap * 2 : 1024;
        while (cap < t->len + (size_t)n + 1)
            cap *= 2;
        t->p = realloc(t->p, cap);
        ck_assert_ptr_nonnull(t->p);
        t->cap = cap;
    }
}

static void treset(text *t) {
    t->len = 0;
    if (t->p)
        t->p[0] = '\0';
}

static void tfree(text *t) {
    free(t->p);
    t->p = NULL;
    t->len = t->cap = 0;
}

/* ------------------------------------------------------------------ */
/* Route generation                                                     */
/* ------------------------------------------------------------------ */

#define T0 1700000000000LL /* 2023-11-14T22:13:20Z */

static const char *const path_lits[] = {"api",    "v1",      "v2",    "users",
                                        "orders", "a",       "b",     "static",
                                        "x.json", "img.png", "Users", "42"};

/* One path pattern; vars are p<k>, numbered per pattern. */
static void gen_path_pattern(rng *r, text *t, bool allow_braces_in_regex) {
    unsigned nseg = below(r, 5);
    unsigned multi = below(r, 100); /* < 25: last, < 40: first */
    unsigned var = 0;
    bool multi_first = multi >= 25 && multi < 40;
    bool multi_last = multi < 25;
    /* a bare double-star path matches everything: keep catch-alls rare */
    if (nseg == 0 && (multi_first || multi_last) && chance(r, 85))
        nseg = 1 + below(r, 2);
    if (nseg == 0 && !multi_first && !multi_last) {
        tput(t, "/");
        return;
    }
    if (multi_first) {
        if (chance(r, 60))
            tput(t, "/**");
        else
            tput(t, "/{*p%u}", var++);
    }
    for (unsigned i = 0; i < nseg; i++) {
        unsigned k = below(r, 100);
        tput(t, "/");
        if (k < 50)
            tput(t, "%s", PICK(r, path_lits));
        else if (k < 62)
            tput(t, "{p%u}", var++);
        else if (k < 70) {
            static const char *const res[] = {"[a-z]+", "[0-9]+", "v[12]",
                                              "[a-z]{2,3}", ".*"};
            const char *re = PICK(r, res);
            if (!allow_braces_in_regex && strchr(re, ','))
                re = "[a-z]+";
            tput(t, "{p%u:%s}", var++, re);
        } else if (k < 78)
            tput(t, "*");
        else if (k < 83)
            tput(t, "%s", chance(r, 50) ? "v?" : "?");
        else {
            switch (below(r, 5)) {
            case 0: tput(t, "{p%u}.json", var++); break;
            case 1: tput(t, "*.png"); break;
            case 2:
                tput(t, "{p%u}-{p%u}.png", var, var + 1);
                var += 2;
                break;
            case 3: tput(t, "us*"); break;
            default: tput(t, "x.{p%u}", var++); break;
            }
        }
    }
    if (multi_last) {
        if (chance(r, 60))
            tput(t, "/**");
        else
            tput(t, "/{*p%u}", var++);
    }
}

static const char *const host_tails[] = {"example.com", "x.org",
                                         "api.example.com"};

static void gen_host_pattern(rng *r, text *t) {
    unsigned k = below(r, 100);
    if (k < 1) {
        tput(t, "**");
        return;
    }
    static const char *const heads[] = {"",    "www.",  "api.",         "*.",
                                        "**.", "{h0}.", "{h0:[a-z]+}.", "a?i.",
                                        "*.*."};
    tput(t, "%s%s", PICK(r, heads), PICK(r, host_tails));
    if (chance(r, 20))
        tput(t, "%s", chance(r, 50) ? ":8080" : ":443");
}

static const char *const methods_cfg[] = {
    "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "PURGE", "get"};

/* Append one predicate entry (JSON value) to t. `kind` chooses it. */
static void gen_predicate(rng *r, text *t, unsigned kind) {
    switch (kind) {
    case 0: { /* Path */
        unsigned n = 1 + (chance(r, 30) ? below(r, 3) : 0);
        bool trailing_false = chance(r, 15);
        if (chance(r, 25)) {
            tput(t, "{\"name\":\"Path\",\"args\":{");
            for (unsigned i = 0; i < n; i++) {
                tput(t, "%s\"_genkey_%u\":\"", i ? "," : "", i);
                gen_path_pattern(r, t, true);
                tput(t, "\"");
            }
            if (trailing_false)
                tput(t, ",\"_genkey_%u\":\"false\"", n);
            tput(t, "}}");
        } else {
            tput(t, "\"Path=");
            for (unsigned i = 0; i < n; i++) {
                if (i)
                    tput(t, ",");
                gen_path_pattern(r, t, false);
            }
            if (trailing_false)
                tput(t, ",false");
            tput(t, "\"");
        }
        break;
    }
    case 1: { /* Host */
        unsigned n = 1 + (chance(r, 25) ? below(r, 2) : 0);
        tput(t, "\"Host=");
        for (unsigned i = 0; i < n; i++) {
            if (i)
                tput(t, ",");
            gen_host_pattern(r, t);
        }
        tput(t, "\"");
        break;
    }
    case 2: { /* Method */
        unsigned n = 1 + below(r, 3);
        tput(t, "\"Method=");
        for (unsigned i = 0; i < n; i++)
            tput(t, "%s%s", i ? "," : "", PICK(r, methods_cfg));
        tput(t, "\"");
        break;
    }
    case 3: { /* Header */
        static const char *const names[] = {"X-Env", "X-Tenant", "x-env"};
        static const char *const res[] = {"prod", "stag.*", "[a-z]+", "t[12]",
                                          "dev|prod"};
        if (chance(r, 35))
            tput(t, "\"Header=%s\"", PICK(r, names));
        else
            tput(t, "\"Header=%s, %s\"", PICK(r, names), PICK(r, res));
        break;
    }
    case 4: { /* Query */
        static const char *const names[] = {"debug", "color", "q"};
        static const char *const res[] = {"true", "gre+n", "[a-z ]+", "A"};
        if (chance(r, 40))
            tput(t, "\"Query=%s\"", PICK(r, names));
        else
            tput(t, "\"Query=%s,%s\"", PICK(r, names), PICK(r, res));
        break;
    }
    case 5: { /* Cookie */
        static const char *const names[] = {"session", "theme"};
        static const char *const res[] = {"[a-z]+", "dark", "abc", ".*"};
        tput(t, "\"Cookie=%s,%s\"", PICK(r, names), PICK(r, res));
        break;
    }
    case 6: { /* After / Before / Between */
        long long a = T0 + ((long long)below(r, 5) - 2) * 1000;
        long long b = a + (1 + (long long)below(r, 3)) * 1000;
        switch (below(r, 4)) {
        case 0: tput(t, "\"After=%lld\"", a); break;
        case 1: tput(t, "\"Before=%lld\"", a); break;
        case 2: tput(t, "\"Between=%lld,%lld\"", a, b); break;
        default:
            /* the same instant as T0 in ISO form, with an offset */
            tput(t, "\"After=2023-11-14T23:13:20+01:00\"");
            break;
        }
        break;
    }
    case 7: { /* RemoteAddr */
        static const char *const cidrs[] = {"10.0.0.0/8", "192.168.1.1", "::1",
                                            "172.16.0.0/12", "127.0.0.1/32"};
        unsigned n = 1 + below(r, 2);
        tput(t, "\"RemoteAddr=");
        for (unsigned i = 0; i < n; i++)
            tput(t, "%s%s", i ? "," : "", PICK(r, cidrs));
        tput(t, "\"");
        break;
    }
    case 8: { /* XForwardedRemoteAddr */
        static const char *const cidrs[] = {"10.0.0.0/8", "192.168.1.1",
                                            "203.0.113.0/24"};
        if (chance(r, 40))
            tput(t,
                 "{\"name\":\"XForwardedRemoteAddr\",\"args\":{\"sources\":"
                 "\"%s\",\"maxTrustedIndex\":\"%u\"}}",
                 PICK(r, cidrs), 1 + below(r, 3));
        else
            tput(t, "\"XForwardedRemoteAddr=%s\"", PICK(r, cidrs));
        break;
    }
    default: { /* Weight */
        static const char *const groups[] = {"g1", "g2", "g3"};
        if (chance(r, 30))
            tput(t,
                 "{\"name\":\"Weight\",\"args\":{\"weight.group\":\"%s\","
                 "\"weight.weight\":\"%u\"}}",
                 PICK(r, groups), below(r, 5));
        else
            tput(t, "\"Weight=%s,%u\"", PICK(r, groups), below(r, 5));
        break;
    }
    }
}

static const char *const filters[] = {
    "\"StripPrefix=1\"",
    "\"StripPrefix=2\"",
    "\"PrefixPath=/pre\"",
    "\"SetPath=/set/{p0}\"",
    "\"RewritePath=/api/(?<rest>.*), /r/${rest}\"",
    "\"AddRequestHeader=X-Var,v-{p0}-{h0}\"",
    "\"SetRequestHeader=X-Env,over\"",
    "\"RemoveRequestHeader=X-Tenant\"",
    "\"AddRequestParameter=added,1\"",
    "\"RemoveRequestParameter=debug\"",
    "\"SetStatus=418\"",
    "\"RedirectTo=302,https://other.example/\"",
    "\"AddResponseHeader=X-Resp,{p0}\"",
    "\"RequestHeaderSize=40B\"",
    "\"PreserveHostHeader\"",
    "\"MapRequestHeader=X-Env,X-Mapped\"",
    "{\"name\":\"RequestSize\",\"args\":{\"maxSize\":\"100B\"}}",
    "\"Retry=3\"",
};

/* Whether the route whose text starts at t->p[from] (up to its filters)
 * is accepted as far as its templates go: a filter's {p0} or {h0} that
 * not every request of the route has is refused (the library's own check
 * says which). */
static bool templates_bound(const text *t, size_t from) {
    size_t n = t->len - from;
    char *doc = malloc(n + 4);
    ck_assert_ptr_nonnull(doc);
    doc[0] = '[';
    memcpy(doc + 1, t->p + from, n);
    memcpy(doc + 1 + n, "}]", 3);
    sy_document *d = NULL;
    sy_error e;
    int rc = sy_document_parse(doc, n + 3, NULL, &d, &e);
    free(doc);
    sy_document_free(d);
    return !(rc == SY_EARG && strstr(e.message, "not every request"));
}

/* One route object. Kinds: Path 0, Host 1, others 2..9. */
static void gen_route(rng *r, text *t, const char *id, bool allow_disabled) {
    static const int orders[] = {-3, -1, 0, 0, 0, 0, 1, 2, 5};
    static const char *const uris[] = {"http://up-a:8080", "lb://svc-a",
                                       "https://up-b", "no://op",
                                       "forward:/local"};
    size_t from = t->len;
    tput(t, "{\"id\":\"%s\",\"uri\":\"%s\"", id, PICK(r, uris));
    if (chance(r, 80))
        tput(t, ",\"order\":%d", PICK(r, orders));
    tput(t, ",\"predicates\":[");
    unsigned n = 0;
    /* most routes have a Path, some a Host, some neither */
    bool path = chance(r, 75), host = chance(r, 30);
    unsigned extra = below(r, 3);
    /* a bare catch-all would hide everything ranked after it */
    if (!path && !host && extra == 0 && chance(r, 85))
        extra = 1 + below(r, 2);
    unsigned kinds[8];
    unsigned nk = 0;
    if (host && chance(r, 30))
        kinds[nk++] = 1; /* Host before Path sometimes */
    if (path)
        kinds[nk++] = 0;
    if (host && (nk == 0 || kinds[0] != 1))
        kinds[nk++] = 1;
    for (unsigned i = 0; i < extra; i++)
        kinds[nk++] = 2 + below(r, 8);
    /* shuffle the extras a little around Path/Host */
    if (nk >= 2 && chance(r, 20)) {
        unsigned a = below(r, nk), b = below(r, nk);
        unsigned x = kinds[a];
        kinds[a] = kinds[b];
        kinds[b] = x;
    }
    for (unsigned i = 0; i < nk; i++) {
        if (n++)
            tput(t, ",");
        gen_predicate(r, t, kinds[i]);
    }
    tput(t, "]");
    if (chance(r, 40)) {
        unsigned nf = 1 + below(r, 3);
        size_t at = t->len;
        /* a second pass without templates when the route's requests do
         * not all have their {p0} or {h0} */
        for (int pass = 0; pass < 2; pass++) {
            t->len = at;
            tput(t, ",\"filters\":[");
            bool retry = false; /* a route runs one Retry */
            for (unsigned i = 0; i < nf; i++) {
                const char *f = PICK(r, filters);
                if ((strcmp(f, "\"Retry=3\"") == 0 && retry) ||
                    (pass && strchr(f, '{')))
                    f = "\"PreserveHostHeader\"";
                retry |= strcmp(f, "\"Retry=3\"") == 0;
                tput(t, "%s%s", i ? "," : "", f);
            }
            tput(t, "]");
            if (pass || templates_bound(t, from))
                break;
        }
    }
    if (allow_disabled && chance(r, 10))
        tput(t, ",\"metadata\":{\"status\":\"disabled\"}");
    else if (chance(r, 10))
        tput(t, ",\"metadata\":{\"status\":\"enabled\",\"team\":\"x\"}");
    tput(t, "}");
}

/* ------------------------------------------------------------------ */
/* Request generation                                                   */
/* ------------------------------------------------------------------ */

#define MAX_HDR 8

typedef struct req_buf {
    sy_request req;
    sy_header hdr[MAX_HDR];
    char path[256];
    char host[96];
    text desc;
} req_buf;

static sy_str S(const char *s) {
    return (sy_str){s, strlen(s)};
}

static const char *const req_segs[] = {
    "api",   "v1",        "v2",     "users",   "orders", "a",
    "b",     "static",    "x.json", "img.png", "Users",  "42",
    "123",   "abc",       "x",      "",        "a.png",  "foo-bar.png",
    "%61pi", "users;v=1", "us%2Fx", "vv",      "x.y",    "API"};

static const char *const req_hosts[] = {"example.com",
                                        "www.example.com",
                                        "api.example.com",
                                        "a.b.example.com",
                                        "x.org",
                                        "api.x.org",
                                        "Example.com",
                                        "localhost",
                                        "",
                                        "api.example.com.",
                                        "aqi.example.com",
                                        "www.api.example.com",
                                        "[::1]"};

static void gen_request(rng *r, req_buf *b, const char *const *hostv,
                        size_t nhost) {
    static const char *const methods[] = {
        "GET",   "GET",  "GET",     "POST",  "POST", "PUT", "DELETE",
        "PATCH", "HEAD", "OPTIONS", "PURGE", "get",  "FOO", ""};
    sy_request init = SY_REQUEST_INIT;
    b->req = init;
    b->req.method = S(PICK(r, methods));
    /* path */
    size_t o = 0;
    unsigned n = below(r, 100) < 5 ? 0 : 1 + below(r, 5);
    if (n == 0 && chance(r, 50)) {
        b->path[o++] = '/';
    }
    for (unsigned i = 0; i < n; i++) {
        const char *s = PICK(r, req_segs);
        int w = snprintf(b->path + o, sizeof b->path - o, "/%s", s);
        o += (size_t)w;
    }
    if (n && chance(r, 15))
        b->path[o++] = '/';
    b->path[o] = '\0';
    b->req.path = (sy_str){b->path, o};
    /* host */
    const char *h = hostv[below(r, (uint32_t)nhost)];
    unsigned port = below(r, 100);
    snprintf(b->host, sizeof b->host, "%s%s", h,
             port < 15   ? ":8080"
             : port < 20 ? ":443"
                         : "");
    b->req.host = S(b->host);
    /* query */
    static const char *const queries[] = {"",
                                          "",
                                          "debug",
                                          "debug=true",
                                          "color=green&q=a+b",
                                          "color=greeen",
                                          "q=%41",
                                          "debug=false&color=red",
                                          "q=hello+world",
                                          "debug=&x=1"};
    b->req.query = S(PICK(r, queries));
    /* headers */
    static const sy_header pool[] = {
        {{"X-Env", 5}, {"prod", 4}},
        {{"X-Env", 5}, {"staging", 7}},
        {{"x-env", 5}, {"dev, prod", 9}},
        {{"X-Env", 5}, {"", 0}},
        {{"X-Tenant", 8}, {"t1", 2}},
        {{"X-Tenant", 8}, {"T2", 2}},
        {{"Cookie", 6}, {"session=abc; theme=dark", 23}},
        {{"Cookie", 6}, {"theme=\"light\"", 13}},
        {{"X-Forwarded-For", 15}, {"10.1.2.3, 192.168.1.1", 21}},
        {{"X-Forwarded-For", 15}, {"203.0.113.9", 11}},
        {{"Accept", 6}, {"text/html", 9}},
        {{"X-Long-Header-Name", 18},
         {"a value that is long enough to pass forty bytes", 47}},
    };
    size_t nh = below(r, 5);
    for (size_t i = 0; i < nh; i++)
        b->hdr[i] = PICK(r, pool);
    b->req.headers = nh ? b->hdr : NULL;
    b->req.header_count = nh;
    static const char *const addrs[] = {
        "10.1.2.3", "192.168.1.1", "127.0.0.1",  "::1", "172.16.0.5",
        "",         "[::1]:5555",  "203.0.113.7"};
    b->req.remote_addr = S(PICK(r, addrs));
    b->req.now_ms = T0 + ((int64_t)below(r, 13) - 6) * 500;
    b->req.seed = rnext(r);
    static const int64_t lens[] = {-1, -1, 50, 500};
    b->req.content_length = PICK(r, lens);

    treset(&b->desc);
    tput(&b->desc,
         "%.*s %s host=%s query=%.*s remote=%.*s now=%" PRId64 " seed=%" PRIu64
         " clen=%" PRId64 " headers=[",
         (int)b->req.method.len, b->req.method.ptr, b->path, b->host,
         (int)b->req.query.len, b->req.query.ptr, (int)b->req.remote_addr.len,
         b->req.remote_addr.ptr, b->req.now_ms, b->req.seed,
         b->req.content_length);
    for (size_t i = 0; i < nh; i++)
        tput(&b->desc, "%s%.*s: %.*s", i ? "; " : "", (int)b->hdr[i].name.len,
             b->hdr[i].name.ptr, (int)b->hdr[i].value.len, b->hdr[i].value.ptr);
    tput(&b->desc, "]");
}

/* ------------------------------------------------------------------ */
/* The comparison                                                       */
/* ------------------------------------------------------------------ */

typedef struct diff_ctx {
    sy_router *router;
    sy_match_ctx *ix, *lin;
    uint64_t seed;
    const char *phase;
    size_t checks, matched;
} diff_ctx;

static bool str_same(sy_str a, sy_str b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static void dump_table(const sy_snapshot *s) {
    fprintf(stderr,
            "---- live table (rank order), generation %" PRIu64 " ----\n",
            sy_snapshot_generation(s));
    for (size_t i = 0; i < sy_snapshot_route_count(s); i++) {
        const sy_route *rt = sy_snapshot_route_at(s, i);
        const char *src = NULL;
        sy_snapshot_find_route(s, sy_route_id(rt), &src);
        fprintf(stderr, "[%zu] source=%s %s\n", i, src ? src : "?",
                sy_route_canonical(rt));
    }
    fprintf(stderr, "---- end of table ----\n");
}

/* Describe a mismatch (stderr) and return the message for ck_assert_msg. */
static const char *mismatch(diff_ctx *d, const sy_snapshot *s, const req_buf *b,
                            const char *what, const char *ixv,
                            const char *linv) {
    static char msg[1024];
    snprintf(msg, sizeof msg,
             "seed %" PRIu64 " (%s): %s differs: indexed=%s linear=%s; "
             "request: %s",
             d->seed, d->phase, what, ixv, linv, b->desc.p);
    fprintf(stderr, "MISMATCH %s\n", msg);
    dump_table(s);
    return msg;
}

static void fmt_str(char *out, size_t n, sy_str s) {
    if (!s.ptr)
        snprintf(out, n, "(null)");
    else
        snprintf(out, n, "'%.*s'", (int)(s.len > 200 ? 200 : s.len), s.ptr);
}

#define CHECK_SAME(cond, what, a, b)                                           \
    do {                                                                       \
        if (!(cond))                                                           \
            ck_assert_msg(0, "%s", mismatch(d, s, rb, what, a, b));            \
    } while (0)

static void check_str(diff_ctx *d, const sy_snapshot *s, const req_buf *rb,
                      const char *what, sy_str a, sy_str b) {
    if (str_same(a, b))
        return;
    char x[256], y[256];
    fmt_str(x, sizeof x, a);
    fmt_str(y, sizeof y, b);
    CHECK_SAME(0, what, x, y);
}

static void check_int(diff_ctx *d, const sy_snapshot *s, const req_buf *rb,
                      const char *what, long long a, long long b) {
    if (a == b)
        return;
    char x[32], y[32];
    snprintf(x, sizeof x, "%lld", a);
    snprintf(y, sizeof y, "%lld", b);
    CHECK_SAME(0, what, x, y);
}

typedef struct first_hit {
    const sy_route *route;
} first_hit;

static int first_hit_cb(void *data, const sy_route *route, bool matched,
                        int failed_predicate, const char *failed_name) {
    (void)failed_predicate;
    (void)failed_name;
    if (!matched)
        return 0;
    ((first_hit *)data)->route = route;
    return 1;
}

/* Explain (on a sample of requests) must call the same route the first
 * match. It reuses the linear context, so it runs after every other
 * comparison. */
static void check_explain(diff_ctx *d, const sy_snapshot *s, const req_buf *rb,
                          const sy_route *want) {
    first_hit f = {NULL};
    ck_assert_int_eq(sy_snapshot_explain(s, d->lin, &rb->req, first_hit_cb, &f),
                     0);
    if (f.route != want)
        CHECK_SAME(0, "explain's first match",
                   f.route ? sy_route_id(f.route) : "(none)",
                   want ? sy_route_id(want) : "(none)");
}

/* Both matchers on one request; every observable result must agree. */
static void check_request(diff_ctx *d, const sy_snapshot *s,
                          const req_buf *rb) {
    sy_match *mi = NULL, *ml = NULL;
    int rci = sy_snapshot_match(s, d->ix, &rb->req, &mi);
    int rcl = sy_snapshot_match_linear(s, d->lin, &rb->req, &ml);
    d->checks++;
    check_int(d, s, rb, "return code", rci, rcl);
    const sy_route *ri = mi ? sy_match_route(mi) : NULL;
    const sy_route *rl = ml ? sy_match_route(ml) : NULL;
    if (ri != rl)
        CHECK_SAME(0, "route", ri ? sy_route_id(ri) : "(none)",
                   rl ? sy_route_id(rl) : "(none)");
    if (!mi) {
        if (d->checks % 16 == 0)
            check_explain(d, s, rb, NULL);
        return;
    }
    d->matched++;
    check_int(d, s, rb, "var count", (long long)sy_match_var_count(mi),
              (long long)sy_match_var_count(ml));
    for (size_t i = 0; i < sy_match_var_count(mi); i++) {
        sy_str ni, vi, nl, vl;
        sy_match_var(mi, i, &ni, &vi);
        sy_match_var(ml, i, &nl, &vl);
        check_str(d, s, rb, "var name", ni, nl);
        check_str(d, s, rb, "var value", vi, vl);
    }
    check_int(d, s, rb, "action", sy_match_action(mi), sy_match_action(ml));
    check_int(d, s, rb, "status", sy_match_status(mi), sy_match_status(ml));
    check_str(d, s, rb, "redirect", sy_match_redirect(mi),
              sy_match_redirect(ml));
    check_str(d, s, rb, "upstream path", sy_match_path(mi), sy_match_path(ml));
    check_str(d, s, rb, "upstream query", sy_match_query(mi),
              sy_match_query(ml));
    check_int(d, s, rb, "preserve host", sy_match_preserve_host(mi),
              sy_match_preserve_host(ml));
    check_int(d, s, rb, "header count", (long long)sy_match_header_count(mi),
              (long long)sy_match_header_count(ml));
    for (size_t i = 0; i < sy_match_header_count(mi); i++) {
        sy_header hi = sy_match_header(mi, i), hl = sy_match_header(ml, i);
        check_str(d, s, rb, "header name", hi.name, hl.name);
        check_str(d, s, rb, "header value", hi.value, hl.value);
    }
    check_int(d, s, rb, "response op count",
              (long long)sy_match_response_op_count(mi),
              (long long)sy_match_response_op_count(ml));
    for (size_t i = 0; i < sy_match_response_op_count(mi); i++) {
        sy_response_op oi = sy_match_response_op(mi, i),
                       ol = sy_match_response_op(ml, i);
        check_int(d, s, rb, "response op kind", oi.kind, ol.kind);
        check_str(d, s, rb, "response op name", oi.name, ol.name);
        check_str(d, s, rb, "response op value", oi.value, ol.value);
        check_str(d, s, rb, "response op arg", oi.arg, ol.arg);
    }
    check_int(d, s, rb, "host filter count",
              (long long)sy_match_host_filter_count(mi),
              (long long)sy_match_host_filter_count(ml));
    for (size_t i = 0; i < sy_match_host_filter_count(mi); i++) {
        const sy_filter_entry *fi = sy_match_host_filter(mi, i),
                              *fl = sy_match_host_filter(ml, i);
        if (fi != fl && (!fi || !fl || strcmp(fi->name, fl->name) != 0))
            CHECK_SAME(0, "host filter", fi ? fi->name : "(null)",
                       fl ? fl->name : "(null)");
    }
    if (d->checks % 16 == 0)
        check_explain(d, s, rb, ri);
}

/* ------------------------------------------------------------------ */
/* The model of what was applied (ids, sources), and mutations          */
/* ------------------------------------------------------------------ */

#define NSOURCES 2
static const char *const source_names[NSOURCES] = {"public", "orders"};

typedef struct model_route {
    char id[16];
    unsigned source;
    bool alive;
} model_route;

typedef struct model {
    model_route *routes;
    size_t count, cap;
    unsigned next_id;
} model;

static model_route *model_add(model *m, unsigned source) {
    if (m->count == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 64;
        m->routes = realloc(m->routes, m->cap * sizeof *m->routes);
        ck_assert_ptr_nonnull(m->routes);
    }
    model_route *mr = &m->routes[m->count++];
    snprintf(mr->id, sizeof mr->id, "r%u", m->next_id++);
    mr->source = source;
    mr->alive = true;
    return mr;
}

static model_route *model_pick_alive(rng *r, model *m) {
    if (!m->count)
        return NULL;
    for (int tries = 0; tries < 16; tries++) {
        model_route *mr = &m->routes[below(r, (uint32_t)m->count)];
        if (mr->alive)
            return mr;
    }
    for (size_t i = 0; i < m->count; i++)
        if (m->routes[i].alive)
            return &m->routes[i];
    return NULL;
}

/* Build one source's document from fresh routes; returns route count. */
static size_t gen_document(rng *r, model *m, unsigned source, size_t n,
                           text *doc) {
    treset(doc);
    bool envelope = chance(r, 50);
    if (envelope)
        tput(doc, "{\"version\":\"v%" PRIu64 "\",\"routes\":[", rnext(r));
    else
        tput(doc, "[");
    /* the source's previous routes are replaced by this document */
    for (size_t i = 0; i < m->count; i++)
        if (m->routes[i].source == source)
            m->routes[i].alive = false;
    for (size_t i = 0; i < n; i++) {
        model_route *mr = model_add(m, source);
        if (i)
            tput(doc, ",");
        gen_route(r, doc, mr->id, true);
    }
    tput(doc, envelope ? "]}" : "]");
    return n;
}

static void apply_doc(diff_ctx *d, unsigned source, const text *doc) {
    sy_error err;
    memset(&err, 0, sizeof err);
    int rc = sy_router_apply(d->router, source_names[source], doc->p, doc->len,
                             NULL, &err);
    if (rc)
        fprintf(stderr, "document rejected: %s\n%s\n", err.message, doc->p);
    ck_assert_msg(rc == 0,
                  "seed %" PRIu64 ": apply of source %s failed: %d %s at %s",
                  d->seed, source_names[source], rc, err.message, err.path);
}

/* One random one-route change through the public API. */
static void mutate(diff_ctx *d, rng *r, model *m, text *scratch) {
    sy_error err;
    memset(&err, 0, sizeof err);
    unsigned k = below(r, 100);
    int rc = 0;
    const char *what = "";
    if (k < 30 || !m->count) { /* new route */
        unsigned src = below(r, NSOURCES);
        model_route *mr = model_add(m, src);
        treset(scratch);
        gen_route(r, scratch, mr->id, true);
        rc = sy_router_upsert_route(d->router, source_names[src], scratch->p,
                                    scratch->len, &err);
        what = "upsert (new)";
    } else if (k < 55) { /* replace an existing route's definition */
        model_route *mr = model_pick_alive(r, m);
        if (!mr)
            return;
        treset(scratch);
        gen_route(r, scratch, mr->id, true);
        rc = sy_router_upsert_route(d->router, source_names[mr->source],
                                    scratch->p, scratch->len, &err);
        what = "upsert (replace)";
    } else if (k < 70) {
        model_route *mr = model_pick_alive(r, m);
        if (!mr)
            return;
        rc = sy_router_remove_route(d->router, mr->id, &err);
        mr->alive = false;
        what = "remove";
    } else if (k < 97) {
        model_route *mr = model_pick_alive(r, m);
        if (!mr)
            return;
        rc =
            sy_router_set_route_enabled(d->router, mr->id, chance(r, 50), &err);
        what = "set enabled";
    } else { /* re-apply a whole source */
        unsigned src = below(r, NSOURCES);
        gen_document(r, m, src, 5 + below(r, 40), scratch);
        apply_doc(d, src, scratch);
        return;
    }
    if (rc)
        fprintf(stderr, "%s failed: %s\n%s\n", what, err.message,
                scratch->len ? scratch->p : "");
    ck_assert_msg(rc == 0, "seed %" PRIu64 ": %s failed: %d %s", d->seed, what,
                  rc, err.message);
}

/* ------------------------------------------------------------------ */
/* Runs                                                                 */
/* ------------------------------------------------------------------ */

typedef struct run_cfg {
    size_t routes_min, routes_max; /* per table, over both sources */
    size_t requests;               /* after the initial apply */
    size_t mutations;              /* one-route changes afterwards */
    size_t requests_per_mutation;
    bool strip_host_port;
    bool default_filters;
    size_t new_routes; /* upserts of new ids right after the apply */
} run_cfg;

static size_t run_checks(diff_ctx *d, rng *r, size_t n,
                         const char *const *hosts, size_t nhosts) {
    sy_snapshot *s = sy_router_acquire(d->router);
    req_buf rb;
    memset(&rb, 0, sizeof rb);
    for (size_t i = 0; i < n; i++) {
        gen_request(r, &rb, hosts, nhosts);
        check_request(d, s, &rb);
    }
    tfree(&rb.desc);
    sy_snapshot_release(s);
    return n;
}

/* One seed: a table in two sources, requests, then changes + requests. */
static void run_seed(uint64_t seed, const run_cfg *cfg, const char *phase,
                     size_t *checks, size_t *matched) {
    rng r = {seed};
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.strip_host_port = cfg->strip_host_port;
    /* no {var} here: the default filters reach routes without it, which
     * are refused then */
    if (cfg->default_filters)
        o.default_filters = "[\"AddRequestHeader=X-Gw,gw\",\"StripPrefix=1\"]";
    diff_ctx d = {0};
    d.seed = seed;
    d.phase = phase;
    sy_error err;
    memset(&err, 0, sizeof err);
    ck_assert_msg(sy_router_new(&o, &d.router, &err) == 0, "router: %s",
                  err.message);
    for (unsigned i = 0; i < NSOURCES; i++)
        ck_assert_int_eq(sy_router_add_source(d.router, source_names[i], &err),
                         0);
    ck_assert_int_eq(sy_match_ctx_new(NULL, &d.ix, &err), 0);
    ck_assert_int_eq(sy_match_ctx_new(NULL, &d.lin, &err), 0);

    model m = {0};
    text doc = {0};
    size_t total = cfg->routes_min +
                   below(&r, (uint32_t)(cfg->routes_max - cfg->routes_min + 1));
    size_t first = chance(&r, 25) ? total : below(&r, (uint32_t)total + 1);
    if (cfg->routes_min > 1024 && first < 1030)
        first = total - below(&r, 60);
    /* the second source is applied first sometimes: rank follows
     * registration order, not apply order */
    unsigned a = chance(&r, 50) ? 0 : 1;
    gen_document(&r, &m, a, first, &doc);
    apply_doc(&d, a, &doc);
    if (total > first) {
        gen_document(&r, &m, 1 - a, total - first, &doc);
        apply_doc(&d, 1 - a, &doc);
    }
    run_checks(&d, &r, cfg->requests, req_hosts,
               sizeof req_hosts / sizeof req_hosts[0]);
    for (size_t i = 0; i < cfg->new_routes; i++) {
        unsigned src = below(&r, NSOURCES);
        model_route *mr = model_add(&m, src);
        treset(&doc);
        gen_route(&r, &doc, mr->id, true);
        ck_assert_msg(sy_router_upsert_route(d.router, source_names[src], doc.p,
                                             doc.len, &err) == 0,
                      "seed %" PRIu64 ": upsert failed: %s", seed, err.message);
        if (i % 64 == 63)
            run_checks(&d, &r, cfg->requests_per_mutation, req_hosts,
                       sizeof req_hosts / sizeof req_hosts[0]);
    }
    for (size_t i = 0; i < cfg->mutations; i++) {
        mutate(&d, &r, &m, &doc);
        run_checks(&d, &r, cfg->requests_per_mutation, req_hosts,
                   sizeof req_hosts / sizeof req_hosts[0]);
    }
    *checks += d.checks;
    *matched += d.matched;
    tfree(&doc);
    free(m.routes);
    sy_match_ctx_free(d.ix);
    sy_match_ctx_free(d.lin);
    sy_router_free(d.router);
}

static const uint64_t seeds[] = {
    1,          2,          3,          4,          5,          6,
    7,          8,          42,         99,         1234,       2024,
    7777,       31337,      65535,      0xdeadbeef, 0xc0ffee,   17,
    23,         101,        0x5eed0001, 0x5eed0002, 0x5eed0003, 0x5eed0004,
    0x5eed0005, 0x5eed0006, 0x5eed0007, 0x5eed0008, 0x5eed0009, 0x5eed000a};
#define NSEEDS (sizeof seeds / sizeof seeds[0])

static void report(const char *name, size_t checks, size_t matched) {
    fprintf(stderr, "%s: %zu request checks, %zu matched (%.0f%%)\n", name,
            checks, matched,
            checks ? 100.0 * (double)matched / (double)checks : 0.0);
}

/* ------------------------------------------------------------------ */
/* Tests                                                                */
/* ------------------------------------------------------------------ */

START_TEST(indexed_equals_linear_on_random_tables) {
    size_t scale = (size_t)sy_test_scale(), checks = 0, matched = 0;
    run_cfg cfg = {5, 150, 14000 * scale, 0, 0, false, false, 0};
    for (size_t i = 0; i < NSEEDS; i++)
        run_seed(seeds[i], &cfg, "initial apply", &checks, &matched);
    report("random tables", checks, matched);
    ck_assert_uint_ge(checks, 400000 * scale);
    /* the vocabulary is shared, so a good part of requests must match */
    ck_assert_uint_ge(matched * 5, checks);
}
END_TEST

START_TEST(indexed_equals_linear_after_one_route_changes) {
    size_t scale = (size_t)sy_test_scale(), checks = 0, matched = 0;
    run_cfg cfg = {5, 80, 2000, 300 * scale, 40, false, false, 0};
    for (size_t i = 0; i < NSEEDS; i++)
        run_seed(seeds[i] ^ 0x0bedu, &cfg, "overlay changes", &checks,
                 &matched);
    report("overlay changes", checks, matched);
    ck_assert_uint_ge(checks, 360000 * scale);
    ck_assert_uint_ge(matched * 5, checks);
}
END_TEST

/* More than 1024 new slots since the last full build: the snapshot
 * compacts its slots and rebuilds the index (while the overlay grows, it
 * holds every new route); then more changes on top of the rebuilt base. */
START_TEST(indexed_equals_linear_across_index_rebuild) {
    size_t scale = (size_t)sy_test_scale(), checks = 0, matched = 0;
    run_cfg cfg = {20, 60, 1000, 400 * scale, 15, false, false, 1300};
    for (size_t i = 0; i < 2; i++)
        run_seed(seeds[i] * 0x9e3779b97f4a7c15ull, &cfg, "index rebuild",
                 &checks, &matched);
    report("index rebuild", checks, matched);
    ck_assert_uint_ge(checks, 10000 * scale);
}
END_TEST

/* A first document is indexed as a shared base index (later small
 * changes go to the overlay); one-route changes then tombstone base
 * slots and add overlay slots, and both indexes are merged per request. */
START_TEST(indexed_equals_linear_on_large_base_index) {
    size_t scale = (size_t)sy_test_scale(), checks = 0, matched = 0;
    run_cfg cfg = {1100, 2500, 4000 * scale, 200 * scale, 20, false, false, 0};
    for (size_t i = 0; i < 4; i++)
        run_seed(seeds[i] + 0xb16, &cfg, "large base index", &checks, &matched);
    report("large base index", checks, matched);
    ck_assert_uint_ge(checks, 30000 * scale);
}
END_TEST

START_TEST(indexed_equals_linear_with_strip_host_port) {
    size_t scale = (size_t)sy_test_scale(), checks = 0, matched = 0;
    run_cfg cfg = {5, 120, 8000 * scale, 60, 50, true, false, 0};
    for (size_t i = 0; i < 10; i++)
        run_seed(seeds[i] + 1000, &cfg, "strip host port", &checks, &matched);
    report("strip host port", checks, matched);
    ck_assert_uint_ge(checks, 80000 * scale);
}
END_TEST

START_TEST(indexed_equals_linear_with_default_filters) {
    size_t scale = (size_t)sy_test_scale(), checks = 0, matched = 0;
    run_cfg cfg = {5, 120, 8000 * scale, 60, 50, false, true, 0};
    for (size_t i = 0; i < 10; i++)
        run_seed(seeds[i] + 2000, &cfg, "default filters", &checks, &matched);
    report("default filters", checks, matched);
    ck_assert_uint_ge(checks, 80000 * scale);
}
END_TEST

/* One more seed from $SY_SEED, to replay a failure or explore. */
START_TEST(indexed_equals_linear_for_env_seed) {
    const char *env = getenv("SY_SEED");
    if (!env || !*env)
        return;
    uint64_t seed = strtoull(env, NULL, 0);
    size_t scale = (size_t)sy_test_scale(), checks = 0, matched = 0;
    run_cfg cfg = {5, 150, 20000 * scale, 300 * scale, 40, false, false, 0};
    fprintf(stderr, "SY_SEED=%" PRIu64 "\n", seed);
    run_seed(seed, &cfg, "SY_SEED", &checks, &matched);
    cfg.strip_host_port = true;
    cfg.default_filters = true;
    run_seed(seed, &cfg, "SY_SEED, strip host port, default filters", &checks,
             &matched);
    report("SY_SEED", checks, matched);
    ck_assert_uint_gt(checks, 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("differential");
    TCase *tc = tcase_create("differential");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, indexed_equals_linear_on_random_tables);
    tcase_add_test(tc, indexed_equals_linear_after_one_route_changes);
    tcase_add_test(tc, indexed_equals_linear_across_index_rebuild);
    tcase_add_test(tc, indexed_equals_linear_on_large_base_index);
    tcase_add_test(tc, indexed_equals_linear_with_strip_host_port);
    tcase_add_test(tc, indexed_equals_linear_with_default_filters);
    tcase_add_test(tc, indexed_equals_linear_for_env_seed);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
