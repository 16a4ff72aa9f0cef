/* test_budget.c - the CPU budget of one request, tested
 * by outcome and by counted work, never by time: one pool of PCRE2
 * match-limit units shared by every regex of the request, a cap on the
 * repeated values of one name, RewritePath bounded in work and output,
 * RequestHeaderSize summed per name in one pass. */
#include "base/budget.h"
#include "base/regex.h"
#include "def/def.h"
#include "request/match.h"
#include "snapshot/snapshot.h"
#include "testutil.h"

#include "switchyard.h"

#include <stdio.h>
#include <stdlib.h>

/* A snapshot of `n` route definitions (rank = position) under `lim`. */
typedef struct table {
    sy__alloc a;
    struct sy_route *rt[8];
    size_t n;
    sy_snapshot *snap;
    sy_match_ctx *ctx;
    sy_request req; /* borrowed by the match until the next one */
} table;

static void table_open(table *t, const char *const *defs, size_t n,
                       const sy__budget_limits *lim) {
    memset(t, 0, sizeof *t);
    sy__alloc_init(&t->a, NULL);
    sy__route_change ch[8];
    ck_assert_uint_le(n, 8);
    for (size_t i = 0; i < n; i++) {
        sy_error e;
        ck_assert_msg(sy__def_parse_route(defs[i], strlen(defs[i]), NULL,
                                          "route", &t->rt[i], &e) == 0,
                      "%s: %s", defs[i], e.message);
        ch[i] = (sy__route_change){t->rt[i]->id, t->rt[i],
                                   sy__rank_key(0, 0, (uint32_t)i), 0, 0};
    }
    t->n = n;
    const char *const sources[] = {"s"};
    sy__snapshot_config cfg = {0};
    if (lim)
        cfg.budget = *lim;
    cfg.sources = sources;
    cfg.source_count = 1;
    sy__derive_input in = {.alloc = &t->a,
                           .config = &cfg,
                           .changes = ch,
                           .change_count = n,
                           .generation = 1};
    sy__derive_result d;
    ck_assert_int_eq(sy__snapshot_derive(&in, &d, NULL), 0);
    t->snap = d.snapshot;
    sy__free(&t->a, d.removed);
    ck_assert_int_eq(sy_match_ctx_new(NULL, &t->ctx, NULL), 0);
}

static void table_close(table *t) {
    sy_match_ctx_free(t->ctx);
    sy__snapshot_destroy(t->snap);
    for (size_t i = 0; i < t->n; i++)
        sy__route_unref(t->rt[i]);
}

/* Match; returns the route id or "" and the no-match reason. */
static const char *match(table *t, const char *path, const char *query,
                         const sy_header *h, size_t nh, sy_nomatch *why,
                         sy_match **out) {
    static const sy_request init = SY_REQUEST_INIT;
    t->req = init;
    t->req.method = (sy_str){"GET", 3};
    t->req.path = (sy_str){path, strlen(path)};
    t->req.query = (sy_str){query, strlen(query)};
    t->req.headers = h;
    t->req.header_count = nh;
    sy_match *m = NULL;
    ck_assert_int_eq(sy_snapshot_match(t->snap, t->ctx, &t->req, &m), 0);
    if (why)
        *why = sy_match_ctx_nomatch(t->ctx, NULL);
    if (out)
        *out = m;
    return m ? sy_route_id(sy_match_route(m)) : "";
}

static sy_header *headers(size_t n, const char *name, const char *value,
                          const char *last) {
    sy_header *h = calloc(n, sizeof *h);
    for (size_t i = 0; i < n; i++) {
        const char *v = i + 1 == n && last ? last : value;
        h[i] = (sy_header){{name, strlen(name)}, {v, strlen(v)}};
    }
    return h;
}

/* (a+)+b as a whole-value regex against "aaaa...bx" backtracks until the
 * per-call limit (the 'b' it requires is there, the end is not). */
#define EVIL "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaabx"

START_TEST(one_backtracking_value_fails_alone_and_a_lower_route_matches) {
    const char *defs[] = {
        "{\"id\":\"evil\",\"uri\":\"http://e\",\"predicates\":"
        "[\"Header=X-A, (a+)+b\"]}",
        "{\"id\":\"any\",\"uri\":\"http://a\",\"predicates\":[\"Path=/**\"]}"};
    table t;
    table_open(&t, defs, 2, NULL);
    sy_header *h = headers(1, "X-A", EVIL, NULL);
    sy_nomatch why;
    /* the per-call limit stops the regex; the pool is not exhausted */
    ck_assert_str_eq(match(&t, "/x", "", h, 1, &why, NULL), "any");
    ck_assert_uint_le(t.ctx->budget.used, SY_BUDGET_DEFAULT_UNITS);
    ck_assert(!t.ctx->budget.exhausted);
    free(h);
    table_close(&t);
}
END_TEST

START_TEST(repeated_backtracking_headers_exhaust_the_pool_no_route) {
    const char *defs[] = {
        "{\"id\":\"evil\",\"uri\":\"http://e\",\"predicates\":"
        "[\"Header=X-A, (a+)+b\"]}",
        "{\"id\":\"q\",\"uri\":\"http://q\",\"predicates\":"
        "[\"Query=p, (a+)+b\"]}",
        "{\"id\":\"any\",\"uri\":\"http://a\",\"predicates\":[\"Path=/**\"]}"};
    table t;
    table_open(&t, defs, 3, NULL);
    sy_header *h = headers(700, "X-A", EVIL, NULL);
    sy_nomatch why;
    /* 700 values x 200,000 units each would be ~1 s of CPU: the pool
     * stops it, and "any" (which would match) is not chosen instead */
    ck_assert_str_eq(match(&t, "/x", "", h, 700, &why, NULL), "");
    ck_assert_int_eq(why, SY_NOMATCH_BUDGET);
    ck_assert(t.ctx->budget.exhausted);
    ck_assert_uint_le(t.ctx->budget.used, SY_BUDGET_DEFAULT_UNITS);
    /* the budget is per request: a clean request on the same context */
    ck_assert_str_eq(match(&t, "/x", "", NULL, 0, &why, NULL), "any");
    ck_assert_int_eq(why, SY_NOMATCH_NONE);
    free(h);
    table_close(&t);
}
END_TEST

START_TEST(every_regex_of_a_request_draws_on_one_pool) {
    /* four routes whose trivial Header regexes each cost the first step */
    const char *defs[] = {
        "{\"id\":\"a\",\"uri\":\"http://a\",\"predicates\":[\"Header=X, a\"]}",
        "{\"id\":\"b\",\"uri\":\"http://b\",\"predicates\":[\"Header=X, b\"]}",
        "{\"id\":\"c\",\"uri\":\"http://c\",\"predicates\":[\"Header=X, c\"]}",
        "{\"id\":\"d\",\"uri\":\"http://d\",\"predicates\":[\"Header=X, d\"]}",
        "{\"id\":\"any\",\"uri\":\"http://z\",\"predicates\":[\"Path=/**\"]}"};
    sy__budget_limits lim = {3 * SY_BUDGET_FIRST_LIMIT, 0, 0};
    table t;
    table_open(&t, defs, 5, &lim);
    sy_header h = {{"X", 1}, {"c", 1}};
    sy_nomatch why;
    /* a, b, c: three calls, exactly the pool */
    ck_assert_str_eq(match(&t, "/", "", &h, 1, &why, NULL), "c");
    ck_assert_uint_eq(t.ctx->budget.used, 3 * SY_BUDGET_FIRST_LIMIT);
    /* d needs a fourth call: the pool is empty */
    h.value = (sy_str){"d", 1};
    ck_assert_str_eq(match(&t, "/", "", &h, 1, &why, NULL), "");
    ck_assert_int_eq(why, SY_NOMATCH_BUDGET);
    table_close(&t);
}
END_TEST

START_TEST(values_past_the_repeat_cap_are_not_examined) {
    const char *defs[] = {
        ("{\"id\":\"h\",\"uri\":\"http://h\",\"predicates\":[\"Header=X-B, "
         "x\"]}"),
        "{\"id\":\"q\",\"uri\":\"http://q\",\"predicates\":[\"Query=p, x\"]}",
        "{\"id\":\"k\",\"uri\":\"http://k\",\"predicates\":[\"Cookie=c, x\"]}",
        "{\"id\":\"any\",\"uri\":\"http://a\",\"predicates\":[\"Path=/**\"]}"};
    sy__budget_limits lim = {0, 4, 0};
    table t;
    table_open(&t, defs, 4, &lim);
    /* the matching value is the 4th: examined */
    sy_header *h = headers(4, "X-B", "y", "x");
    ck_assert_str_eq(match(&t, "/", "", h, 4, NULL, NULL), "h");
    free(h);
    /* the 5th: past the cap, as if absent */
    h = headers(5, "X-B", "y", "x");
    ck_assert_str_eq(match(&t, "/", "", h, 5, NULL, NULL), "any");
    free(h);
    /* comma-separated values of one header count one by one */
    sy_header one = {{"X-B", 3}, {"y,y,y,y,x", 9}};
    ck_assert_str_eq(match(&t, "/", "", &one, 1, NULL, NULL), "any");
    ck_assert_str_eq(match(&t, "/", "p=y&p=y&p=y&p=x", NULL, 0, NULL, NULL),
                     "q");
    ck_assert_str_eq(match(&t, "/", "p=y&p=y&p=y&p=y&p=x", NULL, 0, NULL, NULL),
                     "any");
    sy_header ck = {{"Cookie", 6}, {"c=y; c=y; c=y; c=y; c=x", 24}};
    ck_assert_str_eq(match(&t, "/", "", &ck, 1, NULL, NULL), "any");
    ck.value = (sy_str){"c=y; c=y; c=y; c=x", 18};
    ck_assert_str_eq(match(&t, "/", "", &ck, 1, NULL, NULL), "k");
    table_close(&t);
}
END_TEST

START_TEST(path_pattern_regexes_draw_on_the_pool) {
    const char *defs[] = {"{\"id\":\"p\",\"uri\":\"http://p\",\"predicates\":"
                          "[\"Path=/{v:(?:a+)+b}/x\"]}",
                          "{\"id\":\"any\",\"uri\":\"http://a\","
                          "\"predicates\":[\"Path=/**\"]}"};
    sy__budget_limits lim = {50000, 0, 0};
    table t;
    table_open(&t, defs, 2, &lim);
    sy_nomatch why;
    ck_assert_str_eq(match(&t, "/aab/x", "", NULL, 0, &why, NULL), "p");
    ck_assert_str_eq(match(&t, "/" EVIL "/x", "", NULL, 0, &why, NULL), "");
    ck_assert_int_eq(why, SY_NOMATCH_BUDGET);
    ck_assert_uint_le(t.ctx->budget.used, 50000);
    table_close(&t);
}
END_TEST

/* RewritePath's result for `path`; *act: the plan's action (a RESPOND
 * must be a 500). */
static sy_str rewrite(table *t, const char *path, sy_action *act) {
    sy_match *m = NULL;
    ck_assert_str_ne(match(t, path, "", NULL, 0, NULL, &m), "");
    *act = sy_match_action(m);
    if (*act == SY_ACTION_RESPOND)
        ck_assert_int_eq(sy_match_status(m), 500);
    return sy_match_path(m);
}

static char *repeat(const char *unit, size_t n) {
    size_t ul = strlen(unit);
    char *s = malloc(ul * n + 1);
    for (size_t i = 0; i < n; i++)
        memcpy(s + i * ul, unit, ul);
    s[ul * n] = '\0';
    return s;
}

START_TEST(rewrite_path_output_is_capped) {
    /* the replacement names the group 100 times: 100x the path */
    char repl[1200];
    size_t o = 0;
    for (int i = 0; i < 100; i++)
        o += (size_t)snprintf(repl + o, sizeof repl - o, "${s}");
    char def[1400];
    snprintf(def, sizeof def,
             "{\"id\":\"r\",\"uri\":\"http://r\",\"predicates\":[\"Path=/**\"],"
             "\"filters\":[{\"name\":\"RewritePath\",\"args\":{\"regexp\":"
             "\"/(?<s>.*)\",\"replacement\":\"/%s\"}}]}",
             repl);
    const char *defs[] = {def};
    table t;
    table_open(&t, defs, 1, NULL);
    sy_action act;
    sy_str p = rewrite(&t, "/ab", &act);
    ck_assert_int_eq(act, SY_ACTION_PROXY);
    ck_assert_uint_eq(p.len, 1 + 200);
    /* 1,000 bytes x 100 = 100,000 > 16 KiB: refused, never built */
    char *path = repeat("a", 1000);
    path[0] = '/';
    p = rewrite(&t, path, &act);
    ck_assert_int_eq(act, SY_ACTION_RESPOND); /* 500 */
    free(path);
    table_close(&t);
}
END_TEST

START_TEST(rewrite_path_matches_draw_on_the_pool) {
    /* one match per byte: 2,000 matches of the first step each */
    const char *defs[] = {
        "{\"id\":\"r\",\"uri\":\"http://r\",\"predicates\":[\"Path=/**\"],"
        "\"filters\":[\"RewritePath=[a-z], X\"]}"};
    sy__budget_limits lim = {200 * SY_BUDGET_FIRST_LIMIT, 0, 1 << 20};
    table t;
    table_open(&t, defs, 1, &lim);
    sy_action act;
    char *path = repeat("a", 100);
    path[0] = '/';
    sy_str p = rewrite(&t, path, &act);
    ck_assert_int_eq(act, SY_ACTION_PROXY);
    ck_assert_uint_eq(p.len, 100);
    ck_assert(p.ptr[0] == '/' && p.ptr[1] == 'X' && p.ptr[99] == 'X');
    free(path);
    path = repeat("a", 2000);
    path[0] = '/';
    p = rewrite(&t, path, &act);
    ck_assert_int_eq(act, SY_ACTION_RESPOND); /* the pool ran out */
    ck_assert(t.ctx->budget.exhausted);
    free(path);
    table_close(&t);
}
END_TEST

/* An allocator for PCRE2 that grants `grant_left` blocks, then fails:
 * the general context and the match data get theirs, pcre2_match's
 * backtracking frames do not. */
static int grant_left;
static void *granting_malloc(size_t n, void *d) {
    (void)d;
    return grant_left-- > 0 ? malloc(n) : NULL;
}
static void granting_free(void *p, void *d) {
    (void)d;
    free(p);
}

START_TEST(a_regex_that_fails_for_memory_is_no_memory_not_no_match) {
    int ec;
    PCRE2_SIZE eo;
    /* anchored, no start optimisation (no "required c" shortcut), not
     * JIT-compiled: the interpreter needs frames for the subject */
    pcre2_code *code =
        pcre2_compile((PCRE2_SPTR) "^(a|b)*c", PCRE2_ZERO_TERMINATED,
                      PCRE2_NO_START_OPTIMIZE, &ec, &eo, NULL);
    ck_assert_ptr_nonnull(code);
    grant_left = 2;
    pcre2_general_context *g =
        pcre2_general_context_create(granting_malloc, granting_free, NULL);
    ck_assert_ptr_nonnull(g);
    pcre2_match_data *md = pcre2_match_data_create(4, g);
    ck_assert_ptr_nonnull(md);
    sy__budget b;
    ck_assert(sy__budget_init(&b, NULL));
    static char subject[20001];
    memset(subject, 'a', sizeof subject - 1);
    sy__budget_start(&b, NULL);
    sy__budget *saved;
    sy__budget_enter(&b, &saved);
    int rc = sy__re_match(code, (PCRE2_SPTR)subject, sizeof subject - 1, 0, 0,
                          md, NULL, UINT32_MAX);
    sy__budget_leave(saved);
    ck_assert_int_eq(rc, PCRE2_ERROR_NOMEMORY);
    ck_assert(b.nomem);         /* the match will answer SY_ENOMEM */
    ck_assert(b.exhausted);     /* and stop at once */
    sy__budget_start(&b, NULL); /* the next request starts clean */
    ck_assert(!b.nomem && !b.exhausted);
    pcre2_match_data_free(md);
    sy__budget_free(&b);
    pcre2_general_context_free(g);
    pcre2_code_free(code);
}
END_TEST

/* PCRE2's own global substitution, for comparison. */
static char *pcre2_global(const char *re, const char *repl, const char *s) {
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *code =
        pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, 0, &ec, &eo, NULL);
    ck_assert_ptr_nonnull(code);
    static char out[4096];
    PCRE2_SIZE n = sizeof out;
    int rc = pcre2_substitute(
        code, (PCRE2_SPTR)s, PCRE2_ZERO_TERMINATED, 0,
        PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_UNSET_EMPTY, NULL, NULL,
        (PCRE2_SPTR)repl, PCRE2_ZERO_TERMINATED, (PCRE2_UCHAR *)out, &n);
    pcre2_code_free(code);
    ck_assert_int_ge(rc, 0);
    return out;
}

START_TEST(rewrite_path_equals_pcre2_global_substitution) {
    static const struct {
        const char *re, *repl, *path;
    } cases[] = {
        {"/a", "/b", "/a/a/xa/a"},
        {"x*", "-", "/abc"},
        {"(?=b)", "!", "/abcb"},
        {"$", "/end", "/p/q"},
        {"^", "/pre", "/p"},
        {"\\b", "|", "/ab/cd"},
        {"/(?<s>[^/]*)", "/<${s}>", "/one/two//three/"},
        {"(a)|b", "[$1]", "/abab"},
        {"z", "y", "/no-match"},
        {"", "_", "/ab"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char def[512];
        snprintf(def, sizeof def,
                 "{\"id\":\"r\",\"uri\":\"http://r\",\"predicates\":"
                 "[\"Path=/**\"],\"filters\":[{\"name\":\"RewritePath\","
                 "\"args\":{\"regexp\":\"%s\",\"replacement\":\"%s\"}}]}",
                 cases[i].re, cases[i].repl);
        /* the JSON escape of a backslash */
        char esc[512];
        size_t o = 0;
        for (const char *c = def; *c && o + 2 < sizeof esc; c++) {
            if (*c == '\\')
                esc[o++] = '\\';
            esc[o++] = *c;
        }
        esc[o] = '\0';
        const char *defs[] = {esc};
        table t;
        table_open(&t, defs, 1, NULL);
        sy_action act;
        sy_str p = rewrite(&t, cases[i].path, &act);
        /* the library speaks Java's ${name}: PCRE2 takes it as is */
        const char *want =
            pcre2_global(cases[i].re, cases[i].repl, cases[i].path);
        ck_assert_msg(p.len == strlen(want) && memcmp(p.ptr, want, p.len) == 0,
                      "%s -> %s on %s: '%.*s', want '%s'", cases[i].re,
                      cases[i].repl, cases[i].path, (int)p.len, p.ptr, want);
        table_close(&t);
    }
}
END_TEST

START_TEST(request_header_size_sums_each_name_once_in_order) {
    const char *defs[] = {
        "{\"id\":\"r\",\"uri\":\"http://r\",\"predicates\":[\"Path=/**\"],"
        "\"filters\":[\"RequestHeaderSize=20B\"]}"};
    table t;
    table_open(&t, defs, 1, NULL);
    /* 4,000 headers over 2,000 names: each name twice, mixed case */
    size_t n = 4000;
    sy_header *h = calloc(n, sizeof *h);
    char(*names)[16] = calloc(n, sizeof *names);
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], i < n / 2 ? "h%zu" : "H%zu",
                 i % (n / 2));
        h[i] = (sy_header){{names[i], strlen(names[i])}, {"v", 1}};
    }
    /* one name over the limit: "h7" + 2 values of 10 bytes */
    h[7].value = (sy_str){"1234567890", 10};
    h[n / 2 + 7].value = (sy_str){"1234567890", 10};
    sy_match *m = NULL;
    ck_assert_str_eq(match(&t, "/", "", h, n, NULL, &m), "r");
    ck_assert_int_eq(sy_match_action(m), SY_ACTION_RESPOND);
    ck_assert_int_eq(sy_match_status(m), 431);
    sy_response_op op = sy_match_response_op(m, 0);
    const char *want = "Request Header/s size is larger than permissible "
                       "limit (20B). Request Header/s size for 'h7' is 22B.";
    ck_assert_msg(op.value.len == strlen(want) &&
                      memcmp(op.value.ptr, want, op.value.len) == 0,
                  "%.*s", (int)op.value.len, op.value.ptr);
    free(h);
    free(names);
    table_close(&t);
}
END_TEST

START_TEST(router_options_set_the_budget) {
    static const char *doc =
        "[{\"id\":\"h\",\"uri\":\"http://h\",\"predicates\":"
        "[\"Header=X, (a+)+b\"]},"
        "{\"id\":\"any\",\"uri\":\"http://a\",\"predicates\":"
        "[\"Path=/**\"]}]";
    sy_header h = {{"X", 1}, {EVIL, strlen(EVIL)}};
    for (int small = 0; small < 2; small++) {
        sy_router_options o = SY_ROUTER_OPTIONS_INIT;
        o.regex_budget = small ? 10000 : 0;
        sy_router *r;
        ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
        ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
        ck_assert_int_eq(sy_router_apply(r, "s", doc, strlen(doc), NULL, NULL),
                         0);
        sy_match_ctx *ctx;
        ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
        sy_request req = SY_REQUEST_INIT;
        req.method = (sy_str){"GET", 3};
        req.path = (sy_str){"/", 1};
        req.headers = &h;
        req.header_count = 1;
        sy_snapshot *s = sy_router_acquire(r);
        sy_match *m = NULL;
        ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
        if (small) { /* 10,000 units: less than the call's own limit */
            ck_assert_ptr_null(m);
            ck_assert_int_eq(sy_match_ctx_nomatch(ctx, NULL),
                             SY_NOMATCH_BUDGET);
        } else { /* default: the call's limit stops it, "any" matches */
            ck_assert_ptr_nonnull(m);
            ck_assert_str_eq(sy_route_id(sy_match_route(m)), "any");
        }
        sy_snapshot_release(s);
        sy_match_ctx_free(ctx);
        sy_router_free(r);
    }
}
END_TEST

/* A Header regex the matcher's quick tests decide from the request's one
 * header of that name (predicate_quick.h sy__pred_header_re): for each
 * header set, the indexed matcher picks the route the linear scan picks
 * and charges the pool as much (a value decided twice, or a later header
 * of the name skipped, fails it); under a pool of one step PCRE2 answers
 * as before. */
START_TEST(a_header_regex_decided_quick_answers_and_charges_as_the_scan) {
    static const char *defs[] = {
        "{\"id\":\"h\",\"uri\":\"http://h\",\"predicates\":"
        "[\"Path=/h/{id}\",\"Header=X-T, t\\\\d+\"]}",
        "{\"id\":\"any\",\"uri\":\"http://a\",\"predicates\":"
        "[\"Path=/**\"]}"};
    static const struct {
        const char *v[2];
        const char *want;
        uint64_t used;
    } cases[] = {
        {{"t7", NULL}, "h", SY_BUDGET_FIRST_LIMIT},
        {{"x7", NULL}, "any", SY_BUDGET_FIRST_LIMIT},
        {{NULL, NULL}, "any", 0},
        {{"u1", "t7"}, "h", 2 * SY_BUDGET_FIRST_LIMIT},
        {{"t7", "u1"}, "h", SY_BUDGET_FIRST_LIMIT},
        {{" t7", NULL}, "h", SY_BUDGET_FIRST_LIMIT},
        {{"t7\t", NULL}, "h", SY_BUDGET_FIRST_LIMIT},
        {{"u1, t7", NULL}, "h", 2 * SY_BUDGET_FIRST_LIMIT},
        {{"\"t7\"", NULL}, "h", SY_BUDGET_FIRST_LIMIT},
        {{"", NULL}, "any", SY_BUDGET_FIRST_LIMIT},
    };
    for (int one_step = 0; one_step < 2; one_step++) {
        sy__budget_limits lim = {one_step ? SY_BUDGET_FIRST_LIMIT : 0, 0, 0};
        table t;
        table_open(&t, defs, 2, &lim);
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            sy_header h[3] = {{{"Accept", 6}, {"*/*", 3}}};
            size_t nh = 1;
            for (size_t k = 0; k < 2 && cases[i].v[k]; k++)
                h[nh++] = (sy_header){{k ? "x-t" : "X-T", 3},
                                      {cases[i].v[k], strlen(cases[i].v[k])}};
            const char *got = match(&t, "/h/42", "", h, nh, NULL, NULL);
            uint64_t used = t.ctx->budget.used;
            sy_match *m = NULL;
            ck_assert_int_eq(
                sy_snapshot_match_linear(t.snap, t.ctx, &t.req, &m), 0);
            const char *scan = m ? sy_route_id(sy_match_route(m)) : "";
            /* a pool of one step: a second value exhausts it (no route,
             * both ways) */
            const char *want = one_step && cases[i].used > lim.regex_units
                                   ? ""
                                   : cases[i].want;
            ck_assert_msg(strcmp(got, want) == 0 && strcmp(scan, want) == 0,
                          "case %zu (one step %d): %s, scan %s", i, one_step,
                          got, scan);
            ck_assert_uint_eq(used, t.ctx->budget.used);
            if (!one_step)
                ck_assert_uint_eq(used, cases[i].used);
        }
        table_close(&t);
    }
}
END_TEST

/* sy__regex answers simple patterns (regex.c) without PCRE2: every answer
 * and charge must be PCRE2's. For each pattern and each subject (every
 * string up to 3 bytes over an alphabet that hits and misses each atom,
 * and long ones about the 64-byte cut): the answer under a full pool
 * equals a plain pcre2_match of the same pattern, the charge is the first
 * step; under a pool of exactly one step (PCRE2 runs, limited to 256)
 * the answer is the same: PCRE2 needs less than a step for them. */
START_TEST(simple_regexes_answer_as_pcre2_and_charge_as_it) {
    static const char *pats[] = {"t\\d+",    "v[12]",   "application/json",
                                 "a?",       "[a-cx]*", "\\.x",
                                 "",         "ab\\-c+", "[0-9a-f]+",
                                 "x[1-2a]?", "a b;c=d", "\\d\\d*",
                                 "[]a]",     "a|b",     "a+b",
                                 "(a)",      "[^a]",    "a{2}"};
    static const char alpha[] = "at1v2x.-bc/ ]";
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy__budget b;
    ck_assert(sy__budget_init(&b, NULL));
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    for (size_t p = 0; p < sizeof pats / sizeof *pats; p++) {
        sy__regex *re;
        sy_error e;
        ck_assert_int_eq(sy__regex_compile(&a, pats[p], &re, &e), 0);
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *code =
            pcre2_compile((PCRE2_SPTR)pats[p], PCRE2_ZERO_TERMINATED,
                          SY_RE_WHOLE, &ec, &eo, NULL);
        ck_assert_ptr_nonnull(code);
        size_t na = sizeof alpha - 1;
        for (size_t k = 0; k < 1 + na + na * na + na * na * na + 8; k++) {
            char subj[80];
            size_t n = 0, x = k;
            if (k < 1 + na + na * na + na * na * na) {
                size_t len = x == 0              ? 0
                             : x <= na           ? 1
                             : x <= na + na * na ? 2
                                                 : 3;
                x -= len == 0   ? 0
                     : len == 1 ? 1
                     : len == 2 ? 1 + na
                                : 1 + na + na * na;
                for (; n < len; n++, x /= na)
                    subj[n] = alpha[x % na];
            } else { /* 63..66 bytes of one atom, then a stray last byte */
                size_t j = k - (1 + na + na * na + na * na * na);
                n = 63 + j % 4;
                memset(subj, "1a"[j / 4 % 2], n);
                subj[0] = pats[p][0] ? pats[p][0] : 't';
                if (j >= 8)
                    subj[n - 1] = '!';
            }
            bool want =
                pcre2_match(code, (PCRE2_SPTR)subj, n, 0, 0, md, NULL) >= 0;
            for (int one_step = 0; one_step < 2; one_step++) {
                sy__budget_limits lim = {one_step ? SY_BUDGET_FIRST_LIMIT : 0,
                                         0, 0};
                sy__budget_start(&b, &lim);
                sy__budget *saved;
                sy__budget_enter(&b, &saved);
                bool got = sy__regex_full_match(re, subj, n, md);
                sy__budget_leave(saved);
                ck_assert_msg(got == want, "%s on %.*s: %d", pats[p], (int)n,
                              subj, got);
                ck_assert_uint_eq(b.used, SY_BUDGET_FIRST_LIMIT);
                ck_assert(!b.exhausted);
            }
            /* and without a current budget */
            ck_assert(sy__regex_full_match(re, subj, n, md) == want);
        }
        pcre2_code_free(code);
        sy__regex_free(re);
    }
    pcre2_match_data_free(md);
    sy__budget_free(&b);
}
END_TEST

int main(void) {
    Suite *s = suite_create("budget");
    TCase *tc = tcase_create("budget");
    tcase_add_test(
        tc, one_backtracking_value_fails_alone_and_a_lower_route_matches);
    tcase_add_test(tc, repeated_backtracking_headers_exhaust_the_pool_no_route);
    tcase_add_test(tc, every_regex_of_a_request_draws_on_one_pool);
    tcase_add_test(tc, values_past_the_repeat_cap_are_not_examined);
    tcase_add_test(tc, path_pattern_regexes_draw_on_the_pool);
    tcase_add_test(tc, rewrite_path_output_is_capped);
    tcase_add_test(tc, rewrite_path_matches_draw_on_the_pool);
    tcase_add_test(tc, rewrite_path_equals_pcre2_global_substitution);
    tcase_add_test(tc, request_header_size_sums_each_name_once_in_order);
    tcase_add_test(tc, router_options_set_the_budget);
    tcase_add_test(tc, a_regex_that_fails_for_memory_is_no_memory_not_no_match);
    tcase_add_test(tc, simple_regexes_answer_as_pcre2_and_charge_as_it);
    tcase_add_test(
        tc, a_header_regex_decided_quick_answers_and_charges_as_the_scan);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
