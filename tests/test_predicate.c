/* test_predicate.c - every built-in predicate of route model section 4 and
 * host-registered ones: tables of matching and non-matching requests,
 * captures, and compile errors with their paths and offsets. */
#include "route/predicate.h"
#include "route/predicate_quick.h" /* the quick tests and a tail */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>

static sy__alloc A;
static sy__compile_env ENV;

static void setup(void) {
    sy__alloc_init(&A, NULL);
    ENV.alloc = &A;
    ENV.registry = NULL;
}

#define ROUTE_PATH "routes[0].predicates[1]"
#define ARGS(...) (sy_kv[]){__VA_ARGS__}, SY_ARRAY_LEN(((sy_kv[]){__VA_ARGS__}))

static sy__def_entry entry(const char *name, sy_kv *args, size_t n) {
    sy__def_entry e = {
        .f.spec = sy__factory_find(SY_FACTORY_PREDICATE, name, strlen(name)),
        .args = args,
        .arg_count = (uint32_t)n};
    ck_assert_ptr_nonnull(sy__def_spec(&e));
    return e;
}

static sy__pred *pred(const char *name, sy_kv *args, size_t n) {
    sy__def_entry e = entry(name, args, n);
    sy__pred *p = NULL;
    sy_error err;
    int rc = sy__pred_compile(&e, &ENV, ROUTE_PATH, &p, &err);
    ck_assert_msg(rc == 0, "%s: %s (%s)", name, err.message, err.path);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Compile must fail with `code` at `path` and `offset`. */
static void pred_err(const char *name, sy_kv *args, size_t n, int code,
                     const char *path, size_t offset) {
    sy__def_entry e = entry(name, args, n);
    sy__pred *p = (sy__pred *)&e;
    sy_error err;
    int rc = sy__pred_compile(&e, &ENV, ROUTE_PATH, &p, &err);
    ck_assert_msg(rc == code, "%s: rc %d want %d (%s)", name, rc, code,
                  err.message);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(err.code, code);
    ck_assert_str_eq(err.path, path);
    ck_assert_uint_eq(err.offset, offset);
    ck_assert(err.message[0] != '\0');
}

/* A request under construction plus what one evaluation needs. */
typedef struct rq {
    sy_request req;
    sy_header h[8];
    sy__segments path, host;
    sy__arena scratch;
    pcre2_match_data *md;
    sy__capture caps[8];
    sy__eval ev;
} rq;

static void rq_init(rq *r, const char *path) {
    memset(r, 0, sizeof *r);
    sy_request init = SY_REQUEST_INIT;
    r->req = init;
    r->req.method = (sy_str){"GET", 3};
    r->req.host = (sy_str){"example.com", 11};
    r->req.remote_addr = (sy_str){"10.1.2.3", 8};
    r->req.headers = r->h;
    const char *q = strchr(path, '?');
    r->req.path = (sy_str){path, q ? (size_t)(q - path) : strlen(path)};
    if (q)
        r->req.query = (sy_str){q + 1, strlen(q + 1)};
    sy__arena_init(&r->scratch, &A, 256);
}

static void rq_header(rq *r, const char *name, const char *value) {
    ck_assert_uint_lt(r->req.header_count, SY_ARRAY_LEN(r->h));
    r->h[r->req.header_count++] =
        (sy_header){{name, strlen(name)}, {value, strlen(value)}};
}

static void rq_free(rq *r) {
    sy__segments_free(&r->path, &A);
    sy__segments_free(&r->host, &A);
    sy__arena_free(&r->scratch);
    pcre2_match_data_free(r->md);
}

/* eval() splits the path as the matcher does (sy__segments_split_scan:
 * plain segments keep the path as `flat`) instead of sy__segments_split */
static bool scan_split;

static bool eval(const sy__pred *p, rq *r) {
    sy__arena_reset(&r->scratch);
    unsigned seen;
    ck_assert(scan_split
                  ? sy__segments_split_scan(&r->path, r->req.path, &r->scratch,
                                            &A, &seen)
                  : sy__segments_split(&r->path, r->req.path, &r->scratch, &A));
    ck_assert(sy__segments_split_host(&r->host, r->req.host, &A));
    pcre2_match_data_free(r->md);
    r->md = pcre2_match_data_create(sy__pred_max_groups(p), NULL);
    r->ev.req = &r->req;
    r->ev.path = &r->path;
    r->ev.host = &r->host;
    r->ev.host_str = r->req.host;
    r->ev.caps = r->caps;
    r->ev.caps_cap = SY_ARRAY_LEN(r->caps);
    r->ev.ncaps = 0;
    r->ev.md = r->md;
    r->ev.scratch = &r->scratch;
    if (!r->ev.now_ms)
        r->ev.now_ms = r->req.now_ms;
    return sy__pred_test(p, &r->ev);
}

/* Evaluate `p` on a request with just this path (and query). */
static bool on_path(const sy__pred *p, const char *path) {
    rq r;
    rq_init(&r, path);
    bool ok = eval(p, &r);
    rq_free(&r);
    return ok;
}

/* ... with one header. */
static bool on_header(const sy__pred *p, const char *name, const char *value) {
    rq r;
    rq_init(&r, "/");
    rq_header(&r, name, value);
    bool ok = eval(p, &r);
    rq_free(&r);
    return ok;
}

static bool cap_is(const rq *r, const char *name, const char *value) {
    for (size_t i = 0; i < r->ev.ncaps; i++)
        if (sy__str_eq(r->caps[i].name, name, strlen(name)))
            return sy__str_eq(r->caps[i].value, value, strlen(value));
    return false;
}

/* ---- Path ---- */

START_TEST(path_first_matching_pattern_wins_and_captures_its_vars) {
    sy__pred *p =
        pred("Path", ARGS({"patterns", "/a/{x}"}, {"patterns", "/{y}/b"}));
    rq r;
    rq_init(&r, "/a/b");
    ck_assert(eval(p, &r));
    ck_assert_uint_eq(r.ev.ncaps, 1);
    ck_assert(cap_is(&r, "x", "b"));
    rq_free(&r);
    rq_init(&r, "/z/b");
    ck_assert(eval(p, &r));
    ck_assert(cap_is(&r, "y", "z"));
    rq_free(&r);
    ck_assert(!on_path(p, "/z/c"));
    ck_assert_int_eq(sy__pred_get_kind(p), SY_PK_PATH);
    ck_assert_uint_eq(sy__pred_pattern_count(p), 2);
    ck_assert_uint_eq(sy__pred_var_count(p), 1);
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(path_matches_trailing_slash_by_default) {
    sy__pred *p = pred("Path", ARGS({"patterns", "/a"}));
    ck_assert(on_path(p, "/a/"));
    ck_assert(on_path(p, "/a?x=1"));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(path_match_trailing_slash_false_is_exact) {
    sy__pred *p =
        pred("Path", ARGS({"patterns", "/a"}, {"matchTrailingSlash", "false"}));
    ck_assert(!on_path(p, "/a/"));
    ck_assert(on_path(p, "/a"));
    sy__pred_free(p, &A);
}
END_TEST

/* A Path predicate of one all-literal pattern (perhaps with a last "**")
 * is tested by a literal compare (predicate_eval.c), not by the pattern
 * matcher: both must give
 * the same answer on random paths (encoded slashes, matrix parameters,
 * empty segments, trailing slashes), with and without matchTrailingSlash. */
START_TEST(path_literal_compare_equals_the_pattern_matcher) {
    static const char *const pats[] = {"/api/data", "/",    "/a//b",   "/a/b/",
                                       "/ab",       "/a/b", "/a%2Fb",  "//",
                                       "/a/**",     "/**",  "/ab/b/**"};
    static const char alphabet[] = "ab/%2F;d";
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    sy__segments segs = {0};
    sy__arena scratch;
    sy__arena_init(&scratch, &A, 256);
    size_t agreed_true = 0, flat_seen = 0, flat_true = 0;
    for (size_t k = 0; k < SY_ARRAY_LEN(pats); k++) {
        for (int trailing = 0; trailing < 2; trailing++) {
            sy__pred *p =
                pred("Path",
                     ARGS({"patterns", pats[k]},
                          {"matchTrailingSlash", trailing ? "true" : "false"}));
            const sy__pattern *pat = sy__pred_pattern(p, 0);
            for (int t = 0; t < 3000; t++) {
                char path[16];
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                size_t len = (size_t)(rng % 10);
                /* start from the pattern itself now and then */
                size_t pl = strlen(pats[k]);
                bool from_pat = (rng >> 8) % 3 == 0 && pl < sizeof path - 3;
                if (from_pat) {
                    memcpy(path, pats[k], pl);
                    len = pl + (size_t)((rng >> 12) % 3);
                }
                for (size_t i = from_pat ? pl : 0; i < len; i++)
                    path[i] = alphabet[(rng >> (16 + 3 * (i % 12))) % 8];
                if (len && (rng >> 60) % 4)
                    path[0] = '/';
                path[len] = '\0';
                rq r;
                rq_init(&r, path);
                bool got = eval(p, &r);
                /* again split as the matcher splits: the compare with the
                 * whole path when its segments are plain */
                scan_split = true;
                bool got_flat = eval(p, &r);
                flat_seen += r.path.flat.ptr != NULL;
                flat_true += r.path.flat.ptr && got_flat;
                scan_split = false;
                rq_free(&r);
                sy__arena_reset(&scratch);
                ck_assert(sy__segments_split(&segs, (sy_str){path, len},
                                             &scratch, &A));
                size_t nc = 0;
                bool want = sy__pattern_match_path(pat, &segs, trailing, NULL,
                                                   &nc, NULL, &scratch);
                ck_assert_msg(got == want, "pattern %s trailing %d path '%s'",
                              pats[k], trailing, path);
                ck_assert_msg(got_flat == want,
                              "flat: pattern %s trailing %d path '%s'", pats[k],
                              trailing, path);
                agreed_true += got;
            }
            sy__pred_free(p, &A);
        }
    }
    ck_assert_uint_gt(agreed_true, 100); /* the matches were exercised */
    /* and the whole-path compare, both ways */
    ck_assert_uint_gt(flat_seen, 10000);
    ck_assert_uint_gt(flat_true, 100);
    sy__segments_free(&segs, &A);
    sy__arena_free(&scratch);
}
END_TEST

/* The same for a Host predicate of one all-literal pattern: random hosts
 * (empty labels, leading and trailing dots, prefixes of the pattern)
 * against sy__pattern_match_host. */
START_TEST(host_literal_compare_equals_the_pattern_matcher) {
    static const char *const pats[] = {"a.b",  "ab",   "b.a.ab",
                                       "a.b.", ".a.b", "a..b"};
    static const char alphabet[] = "ab..";
    uint64_t rng = 0x2545f4914f6cdd1dull;
    sy__segments labels = {0};
    size_t agreed_true = 0, flat_decided = 0, flat_true = 0;
    for (size_t k = 0; k < SY_ARRAY_LEN(pats); k++) {
        sy__pred *p = pred("Host", ARGS({"patterns", pats[k]}));
        const sy__pattern *pat = sy__pred_pattern(p, 0);
        for (int t = 0; t < 3000; t++) {
            char host[16];
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            size_t len = (size_t)(rng % 9), pl = strlen(pats[k]);
            bool from_pat = (rng >> 8) % 3 == 0;
            if (from_pat) {
                memcpy(host, pats[k], pl);
                len = pl + (size_t)((rng >> 12) % 3);
            }
            for (size_t i = from_pat ? pl : 0; i < len; i++)
                host[i] = alphabet[(rng >> (16 + 2 * (i % 20))) % 4];
            host[len] = '\0';
            rq r;
            rq_init(&r, "/");
            r.req.host = (sy_str){host, len};
            bool got = eval(p, &r);
            rq_free(&r);
            ck_assert(
                sy__segments_split_host(&labels, (sy_str){host, len}, &A));
            size_t nc = 0;
            bool want = sy__pattern_match_host(pat, &labels, NULL, &nc, NULL);
            ck_assert_msg(got == want, "pattern %s host '%s'", pats[k], host);
            agreed_true += got;
            /* the unsplit compare (match.c's, before any labels): when it
             * decides, it agrees */
            int flat = sy__pred_test_host_flat(p, (sy_str){host, len});
            ck_assert_msg(flat < 0 || flat == (int)want,
                          "flat: pattern %s host '%s'", pats[k], host);
            flat_decided += flat >= 0;
            flat_true += flat == 1;
        }
        sy__pred_free(p, &A);
    }
    ck_assert_uint_gt(agreed_true, 100);
    ck_assert_uint_gt(flat_decided, 1000);
    ck_assert_uint_gt(flat_true, 100);
    sy__segments_free(&labels, &A);
}
END_TEST

START_TEST(path_table_from_the_route_model) {
    static const struct {
        const char *pat, *path;
        bool want;
    } t[] = {
        {"/red/{segment}", "/red/blue", true},
        {"/red/{segment}", "/red/blue/green", false},
        {"/a/**", "/a", true},
        {"/**/x.json", "/deep/down/x.json", true},
        {"/f/{name}", "/f/a%2Fb", true},
        {"/f/{name}", "/f/a/b", false},
        {"/m/{id}", "/m/7;v=1", true},
        {"/a/b", "/a//b", false},
        {"/a/*", "/a/", true},
        {"/a/*", "/a", false},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(t); i++) {
        sy__pred *p = pred("Path", ARGS({"patterns", t[i].pat}));
        ck_assert_msg(on_path(p, t[i].path) == t[i].want, "%s vs %s", t[i].pat,
                      t[i].path);
        sy__pred_free(p, &A);
    }
}
END_TEST

START_TEST(path_capture_rest_is_joined_into_scratch) {
    sy__pred *p = pred("Path", ARGS({"patterns", "/s/{*rest}"}));
    rq r;
    rq_init(&r, "/s/x/y%20z");
    ck_assert(eval(p, &r));
    ck_assert(cap_is(&r, "rest", "/x/y z"));
    rq_free(&r);
    sy__pred_free(p, &A);
}
END_TEST

/* A tail (a "*.lit.lit" Host's suffix, a literals-then-rest Path's text
 * in the predicate, so the quick tests read no pattern): each shape that
 * has one has it, and the quick tests answer and capture with it as they
 * do from the pattern (the tail cleared). */
START_TEST(tail_answers_as_the_pattern_does) {
    static const struct {
        const char *kind, *pat;
        bool tail;
    } t[] = {
        {"Path", "/r7/{*rest}", true},      {"Path", "/{*rest}", true},
        {"Path", "/a/bc/{*all}", true},     {"Path", "/a/bc/**", false},
        {"Path", "/a/{x}/{*rest}", false},  {"Path", "/a/b*/{*rest}", false},
        {"Host", "*.t5.example.org", true}, {"Host", "*.org", true},
        {"Host", "a.*.org", false},         {"Host", "*.*.org", false},
    };
    static const char *const paths[] = {"/r7",  "/r7/",  "/r7/a/b", "/r7x/a",
                                        "/r",   "/",     "/a/bc",   "/a/bc/d/",
                                        "/a/b", "/R7/a", "/a/bcd",  "/a/bc//"};
    static const char *const hosts[] = {"eu.t5.example.org",
                                        "t5.example.org",
                                        "a.b.t5.example.org",
                                        "e.org",
                                        "x.t5.example.orgz",
                                        "eu.t5.example.or",
                                        ".org",
                                        "ab.org",
                                        "eu.t5example.org"};
    bool host = false;
    size_t holds = 0;
    /* in an arena, as a route's: the object and its text near each other
     * (apart, they may lie too far apart for a tail: ASan's heap) */
    sy__arena ar;
    sy__arena_init(&ar, &A, 4096);
    sy__compile_env env = ENV;
    env.arena = &ar;
    for (size_t i = 0; i < SY_ARRAY_LEN(t); i++) {
        /* the argument text the pattern borrows, as a route's */
        char *v = sy__arena_alloc(&ar, strlen(t[i].pat) + 1);
        ck_assert_ptr_nonnull(v);
        memcpy(v, t[i].pat, strlen(t[i].pat) + 1);
        sy__def_entry e = entry(t[i].kind, ARGS({"patterns", v}));
        sy__pred *p = sy__arena_alloc(&ar, SY_PRED_OBJECT_BYTES);
        sy_error err;
        ck_assert_ptr_nonnull(p);
        memset(p, 0, SY_PRED_OBJECT_BYTES);
        ck_assert_int_eq(sy__pred_compile_into(&e, &env, NULL, "", p, &err), 0);
        host = strcmp(t[i].kind, "Host") == 0;
        ck_assert_msg(p->tail == t[i].tail, "%s: tail %d", t[i].pat, p->tail);
        size_t n = host ? SY_ARRAY_LEN(hosts) : SY_ARRAY_LEN(paths);
        for (size_t j = 0; j < n && p->tail; j++) {
            int got[2];
            size_t ncaps[2];
            sy_str name[2], val[2];
            for (int k = 0; k < 2; k++) {
                rq r;
                rq_init(&r, host ? "/" : paths[j]);
                if (host)
                    r.req.host = (sy_str){hosts[j], strlen(hosts[j])};
                scan_split = true;
                eval(p, &r); /* the request's ev, its path flat */
                scan_split = false;
                r.ev.ncaps = 0;
                p->tail = k == 0;
                got[k] = host ? sy__pred_host_star(p, r.ev.host_str)
                              : sy__pred_lit_rest_flat(p, &r.ev);
                ncaps[k] = r.ev.ncaps;
                name[k] = ncaps[k] ? r.caps[0].name : (sy_str){"", 0};
                val[k] = ncaps[k] ? r.caps[0].value : (sy_str){"", 0};
                rq_free(&r);
            }
            p->tail = true;
            ck_assert_msg(got[0] == got[1] && ncaps[0] == ncaps[1] &&
                              sy__str_eq(name[0], name[1].ptr, name[1].len) &&
                              sy__str_eq(val[0], val[1].ptr, val[1].len),
                          "%s on %s: tail %d (%zu caps: %.*s=%.*s), pattern "
                          "%d (%zu)",
                          t[i].pat, host ? hosts[j] : paths[j], got[0],
                          ncaps[0], (int)name[0].len, name[0].ptr,
                          (int)val[0].len, val[0].ptr, got[1], ncaps[1]);
            holds += got[0] == 1;
        }
        sy__pred_free(p, &A);
    }
    sy__arena_free(&ar);
    /* the cases that hold: 3, 12 and 3 paths, 1 and 2 hosts */
    ck_assert_uint_eq(holds, 21);
}
END_TEST

START_TEST(path_without_room_for_captures_matches_without_them) {
    sy__pred *p = pred("Path", ARGS({"patterns", "/{a}/{b}"}));
    rq r;
    rq_init(&r, "/x/y");
    ck_assert(sy__segments_split(&r.path, r.req.path, &r.scratch, &A));
    r.ev.req = &r.req;
    r.ev.path = &r.path;
    r.ev.caps = r.caps;
    r.ev.caps_cap = 1;
    r.ev.md = r.md = pcre2_match_data_create(1, NULL);
    ck_assert(sy__pred_test(p, &r.ev));
    ck_assert_uint_eq(r.ev.ncaps, 0);
    rq_free(&r);
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(path_pattern_error_names_the_field_and_offset) {
    pred_err("Path", ARGS({"patterns", "/ok"}, {"patterns", "/a/**/b"}),
             SY_EPATTERN, ROUTE_PATH ".args.patterns", 3);
}
END_TEST

START_TEST(path_regex_error_has_offset_inside_the_pattern) {
    pred_err("Path", ARGS({"patterns", "/x/{id:a)b}"}), SY_EREGEX,
             ROUTE_PATH ".args.patterns", 8);
}
END_TEST

START_TEST(path_bad_trailing_slash_flag_is_an_arg_error) {
    pred_err("Path", ARGS({"patterns", "/a"}, {"matchTrailingSlash", "maybe"}),
             SY_EARG, ROUTE_PATH ".args.matchTrailingSlash", 0);
}
END_TEST

/* The predicate's count of variables is 16-bit: a pattern's most, 65,535,
 * is kept whole, one more is an error naming the field and offset. */
START_TEST(host_variable_count_is_kept_up_to_the_pattern_limit) {
    char *src = sy_test_host_over_vars();
    pred_err("Host", ARGS({"patterns", src}), SY_EPATTERN,
             ROUTE_PATH ".args.patterns", SY_TEST_VARS_OVER_AT);
    src[SY_TEST_VARS_OVER_AT - 1] = '\0'; /* without the 4th */
    sy__pred *p = pred("Host", ARGS({"patterns", src}));
    ck_assert_uint_eq(sy__pred_var_count(p), 65535);
    sy__pred_free(p, &A);
    free(src);
}
END_TEST

/* ---- Host ---- */

START_TEST(host_matches_the_host_with_its_port_as_sent) {
    sy__pred *p = pred("Host", ARGS({"patterns", "**.example.com"},
                                    {"patterns", "*.example.com:8080"}));
    rq r;
    rq_init(&r, "/");
    r.req.host = (sy_str){"api.example.com:8080", 20};
    ck_assert(eval(p, &r));
    r.req.host = (sy_str){"a.b.example.com", 15};
    ck_assert(eval(p, &r));
    r.req.host = (sy_str){"example.org", 11};
    ck_assert(!eval(p, &r));
    r.req.host = (sy_str){"a.b.example.com:8080", 20};
    ck_assert(!eval(p, &r));
    rq_free(&r);
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(host_captures_the_vars_of_the_matching_pattern) {
    sy__pred *p = pred("Host", ARGS({"patterns", "{sub}.example.com"}));
    rq r;
    rq_init(&r, "/");
    r.req.host = (sy_str){"shop.example.com", 16};
    ck_assert(eval(p, &r));
    ck_assert(cap_is(&r, "sub", "shop"));
    rq_free(&r);
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(host_pattern_error_names_the_field) {
    pred_err("Host", ARGS({"patterns", "{a:(x)}.com"}), SY_EPATTERN,
             ROUTE_PATH ".args.patterns", 3);
}
END_TEST

/* ---- Method ---- */

START_TEST(method_matches_listed_methods_upper_cased) {
    sy__pred *p = pred("Method", ARGS({"methods", "get"}, {"methods", "POST"}));
    rq r;
    rq_init(&r, "/");
    ck_assert(eval(p, &r));
    r.req.method = (sy_str){"POST", 4};
    ck_assert(eval(p, &r));
    r.req.method = (sy_str){"PUT", 3};
    ck_assert(!eval(p, &r));
    r.req.method = (sy_str){"get", 3};
    ck_assert(!eval(p, &r));
    rq_free(&r);
    ck_assert_uint_eq(sy__pred_method_mask(p), (1u << 0) | (1u << 2));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(method_nonstandard_sets_bit_31_and_matches_exactly) {
    sy__pred *p = pred("Method", ARGS({"methods", "purge"}));
    ck_assert_uint_eq(sy__pred_method_mask(p), 1u << 31);
    rq r;
    rq_init(&r, "/");
    r.req.method = (sy_str){"PURGE", 5};
    ck_assert(eval(p, &r));
    r.req.method = (sy_str){"MKCOL", 5};
    ck_assert(!eval(p, &r));
    rq_free(&r);
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(method_bits_follow_the_documented_order) {
    ck_assert_int_eq(sy__method_bit((sy_str){"GET", 3}), 0);
    ck_assert_int_eq(sy__method_bit((sy_str){"HEAD", 4}), 1);
    ck_assert_int_eq(sy__method_bit((sy_str){"DELETE", 6}), 5);
    ck_assert_int_eq(sy__method_bit((sy_str){"CONNECT", 7}), 8);
    ck_assert_int_eq(sy__method_bit((sy_str){"get", 3}), 31);
}
END_TEST

/* ---- Header ---- */

START_TEST(header_name_is_case_insensitive) {
    sy__pred *p =
        pred("Header", ARGS({"header", "X-Request-Id"}, {"regexp", "\\d+"}));
    ck_assert(on_header(p, "x-request-id", "123"));
    ck_assert(!on_header(p, "x-request-id", "12a"));
    ck_assert(!on_header(p, "x-request", "123"));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(header_without_regexp_needs_a_nonempty_value) {
    sy__pred *p = pred("Header", ARGS({"header", "X-Flag"}));
    ck_assert(on_header(p, "X-Flag", "1"));
    ck_assert(!on_header(p, "X-Flag", ""));
    ck_assert(!on_header(p, "X-Flag", " , "));
    ck_assert(!on_header(p, "X-Flag", "\"\""));
    ck_assert(!on_header(p, "X-Other", "1"));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(header_values_split_on_commas_outside_quotes) {
    sy__pred *p = pred("Header", ARGS({"header", "X-V"}, {"regexp", "b, c"}));
    ck_assert(on_header(p, "X-V", "a, \"b, c\""));
    ck_assert(!on_header(p, "X-V", "a, b, c"));
    sy__pred_free(p, &A);
    p = pred("Header", ARGS({"header", "X-V"}, {"regexp", "b"}));
    ck_assert(on_header(p, "X-V", "a,  b  ,c"));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(header_quoted_values_are_unescaped) {
    sy__pred *p =
        pred("Header", ARGS({"header", "X-V"}, {"regexp", "say \"hi\""}));
    ck_assert(on_header(p, "X-V", "x, \"say \\\"hi\\\"\""));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(header_values_of_repeated_headers_all_count) {
    sy__pred *p = pred("Header", ARGS({"header", "X-V"}, {"regexp", "two"}));
    rq r;
    rq_init(&r, "/");
    rq_header(&r, "X-V", "one");
    rq_header(&r, "Other", "two");
    ck_assert(!eval(p, &r));
    rq_header(&r, "x-v", "zero, two");
    ck_assert(eval(p, &r));
    rq_free(&r);
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(header_regexp_must_match_the_whole_value) {
    sy__pred *p = pred("Header", ARGS({"header", "X-V"}, {"regexp", "ab"}));
    ck_assert(!on_header(p, "X-V", "abc"));
    ck_assert(!on_header(p, "X-V", "xab"));
    ck_assert(on_header(p, "X-V", "ab"));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(header_bad_regexp_is_an_error_with_offset) {
    pred_err("Header", ARGS({"header", "X-V"}, {"regexp", "a(b"}), SY_EREGEX,
             ROUTE_PATH ".args.regexp", 3);
}
END_TEST

/* ---- Query ---- */

START_TEST(query_param_without_regexp_is_present_even_without_value) {
    sy__pred *p = pred("Query", ARGS({"param", "x"}));
    ck_assert(on_path(p, "/?x"));
    ck_assert(on_path(p, "/?a=1&x="));
    ck_assert(on_path(p, "/?a=1&&x=2"));
    ck_assert(!on_path(p, "/?xx=1"));
    ck_assert(!on_path(p, "/"));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(query_param_name_is_case_sensitive) {
    sy__pred *p = pred("Query", ARGS({"param", "Id"}));
    ck_assert(!on_path(p, "/?id=1"));
    ck_assert(on_path(p, "/?Id=1"));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(query_values_are_url_decoded_with_plus_as_space) {
    sy__pred *p = pred("Query", ARGS({"param", "q"}, {"regexp", "a b!"}));
    ck_assert(on_path(p, "/?q=a+b%21"));
    ck_assert(on_path(p, "/?q=a%20b!"));
    ck_assert(!on_path(p, "/?q=a+b"));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(query_names_are_decoded_too) {
    sy__pred *p = pred("Query", ARGS({"param", "a[b]"}));
    ck_assert(on_path(p, "/?a%5Bb%5D=1"));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(query_some_value_must_fully_match) {
    sy__pred *p = pred("Query", ARGS({"param", "v"}, {"regexp", "\\d+"}));
    ck_assert(on_path(p, "/?v=x&v=12"));
    ck_assert(!on_path(p, "/?v=12x"));
    ck_assert(!on_path(p, "/?v"));
    sy__pred_free(p, &A);
}
END_TEST

/* ---- Cookie ---- */

START_TEST(cookie_needs_exact_name_and_fully_matching_value) {
    sy__pred *p = pred("Cookie", ARGS({"name", "sid"}, {"regexp", "ab.*"}));
    ck_assert(on_header(p, "Cookie", "a=1; sid=abc; b=2"));
    ck_assert(on_header(p, "cookie", "sid=ab"));
    ck_assert(!on_header(p, "Cookie", "SID=abc"));
    ck_assert(!on_header(p, "Cookie", "xsid=abc"));
    ck_assert(!on_header(p, "Cookie", "sid=xab"));
    ck_assert(!on_header(p, "Set-Cookie", "sid=abc"));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(cookie_in_any_cookie_header_and_quoted_values_count) {
    sy__pred *p = pred("Cookie", ARGS({"name", "v"}, {"regexp", "1 2"}));
    rq r;
    rq_init(&r, "/");
    rq_header(&r, "Cookie", "a=1");
    rq_header(&r, "Cookie", "v=\"1 2\"");
    ck_assert(eval(p, &r));
    rq_free(&r);
    sy__pred_free(p, &A);
}
END_TEST

/* ---- After / Before / Between ---- */

static bool at(const sy__pred *p, int64_t now) {
    rq r;
    rq_init(&r, "/");
    r.ev.now_ms = now;
    bool ok = eval(p, &r);
    rq_free(&r);
    return ok;
}

START_TEST(after_is_strict) {
    sy__pred *p = pred("After", ARGS({"datetime", "1000"}));
    ck_assert(!at(p, 999));
    ck_assert(!at(p, 1000));
    ck_assert(at(p, 1001));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(before_is_strict) {
    sy__pred *p = pred("Before", ARGS({"datetime", "1000"}));
    ck_assert(at(p, 999));
    ck_assert(!at(p, 1000));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(between_excludes_both_ends) {
    sy__pred *p =
        pred("Between", ARGS({"datetime1", "1000"}, {"datetime2", "2000"}));
    ck_assert(!at(p, 1000));
    ck_assert(at(p, 1001));
    ck_assert(at(p, 1999));
    ck_assert(!at(p, 2000));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(after_reads_iso_dates_with_zone) {
    sy__pred *p = pred(
        "After",
        ARGS({"datetime", "2017-01-20T17:42:47.789-07:00[America/Denver]"}));
    ck_assert(!at(p, 1484959367789));
    ck_assert(at(p, 1484959367790));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(between_needs_datetime1_before_datetime2) {
    pred_err("Between", ARGS({"datetime1", "2000"}, {"datetime2", "2000"}),
             SY_EARG, ROUTE_PATH ".args.datetime2", 0);
}
END_TEST

START_TEST(bad_datetime_is_an_arg_error) {
    pred_err("Before", ARGS({"datetime", "tomorrow"}), SY_EARG,
             ROUTE_PATH ".args.datetime", 0);
}
END_TEST

/* ---- RemoteAddr ---- */

static bool from(const sy__pred *p, const char *addr) {
    rq r;
    rq_init(&r, "/");
    r.req.remote_addr = (sy_str){addr, strlen(addr)};
    bool ok = eval(p, &r);
    rq_free(&r);
    return ok;
}

START_TEST(remote_addr_ipv4_cidr) {
    sy__pred *p = pred("RemoteAddr", ARGS({"sources", "192.168.1.1/24"}));
    ck_assert(from(p, "192.168.1.200"));
    ck_assert(!from(p, "192.168.2.1"));
    ck_assert(from(p, "192.168.1.7:5555"));
    ck_assert(from(p, "::ffff:192.168.1.9"));
    ck_assert(!from(p, "not-an-ip"));
    ck_assert(!from(p, ""));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(remote_addr_bare_address_is_a_host_route) {
    sy__pred *p = pred("RemoteAddr", ARGS({"sources", "10.0.0.1"},
                                          {"sources", "2001:db8::1"}));
    ck_assert(from(p, "10.0.0.1"));
    ck_assert(!from(p, "10.0.0.2"));
    ck_assert(from(p, "2001:db8::1"));
    ck_assert(from(p, "[2001:db8::1]:443"));
    ck_assert(!from(p, "2001:db8::2"));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(remote_addr_ipv6_cidr) {
    sy__pred *p = pred("RemoteAddr", ARGS({"sources", "2001:db8::/32"}));
    ck_assert(from(p, "2001:db8:ffff::1"));
    ck_assert(!from(p, "2001:db9::1"));
    ck_assert(!from(p, "32.1.13.184"));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(remote_addr_bad_source_is_an_arg_error) {
    pred_err("RemoteAddr", ARGS({"sources", "10.0.0.0/8"}, {"sources", "x"}),
             SY_EARG, ROUTE_PATH ".args.sources", 0);
}
END_TEST

/* ---- XForwardedRemoteAddr ---- */

static bool xff(const sy__pred *p, const char *h1, const char *h2) {
    rq r;
    rq_init(&r, "/");
    r.req.remote_addr = (sy_str){"172.16.0.1", 10};
    if (h1)
        rq_header(&r, "X-Forwarded-For", h1);
    if (h2)
        rq_header(&r, "x-forwarded-for", h2);
    bool ok = eval(p, &r);
    rq_free(&r);
    return ok;
}

START_TEST(xff_default_index_uses_the_right_most_entry) {
    sy__pred *p = pred("XForwardedRemoteAddr", ARGS({"sources", "10.0.0.0/8"}));
    ck_assert(xff(p, "1.1.1.1, 10.0.0.5", NULL));
    ck_assert(!xff(p, "10.0.0.5, 1.1.1.1", NULL));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(xff_max_trusted_index_counts_from_the_right) {
    sy__pred *p = pred("XForwardedRemoteAddr", ARGS({"sources", "10.0.0.0/8"},
                                                    {"maxTrustedIndex", "2"}));
    ck_assert(xff(p, "1.1.1.1, 10.0.0.5, 2.2.2.2", NULL));
    ck_assert(!xff(p, "10.0.0.5, 1.1.1.1, 2.2.2.2", NULL));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(xff_index_beyond_the_entries_uses_the_left_most) {
    sy__pred *p = pred("XForwardedRemoteAddr", ARGS({"sources", "10.0.0.0/8"},
                                                    {"maxTrustedIndex", "9"}));
    ck_assert(xff(p, "10.0.0.5, 1.1.1.1", NULL));
    ck_assert(!xff(p, "1.1.1.1, 10.0.0.5", NULL));
    sy__pred_free(p, &A);
}
END_TEST

/* SCG XForwardedRemoteAddressResolverTest
 * trustOneFallsBackOnMultipleHeaders / trustAllFallsBackOnMultipleHeaders:
 * several X-Forwarded-For lines are all discarded, the socket address is
 * tested instead. */
static bool xff_from(const sy__pred *p, const char *remote, const char *h1,
                     const char *h2) {
    rq r;
    rq_init(&r, "/");
    r.req.remote_addr = (sy_str){remote, strlen(remote)};
    if (h1)
        rq_header(&r, "X-Forwarded-For", h1);
    if (h2)
        rq_header(&r, "X-Forwarded-For", h2);
    bool ok = eval(p, &r);
    rq_free(&r);
    return ok;
}

START_TEST(xff_several_header_lines_fall_back_to_the_socket_address) {
    sy__pred *p = pred("XForwardedRemoteAddr", ARGS({"sources", "0.0.0.0"}));
    ck_assert(xff_from(p, "0.0.0.0", "0.0.0.1", "0.0.0.2"));
    ck_assert(!xff_from(p, "0.0.0.9", "0.0.0.1", "0.0.0.0"));
    sy__pred_free(p, &A);
    p = pred("XForwardedRemoteAddr",
             ARGS({"sources", "0.0.0.1"}, {"maxTrustedIndex", "9"}));
    ck_assert(!xff_from(p, "0.0.0.0", "0.0.0.1", "0.0.0.2"));
    ck_assert(xff_from(p, "0.0.0.0", "0.0.0.1,0.0.0.2, 0.0.0.3", NULL));
    sy__pred_free(p, &A);
    /* the two spellings of the name are one header */
    p = pred("XForwardedRemoteAddr", ARGS({"sources", "172.16.0.0/12"}));
    ck_assert(xff(p, "1.1.1.1", "2.2.2.2"));
    sy__pred_free(p, &A);
}
END_TEST

/* SCG XForwardedRemoteAddressResolverTest trustOneFallsBackOnEmptyHeader;
 * maxIndexOneReturnsLastForwardedIp. Entries are split on every comma:
 * quotes do not group them. */
START_TEST(xff_one_line_is_split_on_every_comma) {
    sy__pred *p = pred("XForwardedRemoteAddr", ARGS({"sources", "0.0.0.3"}));
    ck_assert(xff_from(p, "0.0.0.0", "0.0.0.1,0.0.0.2, 0.0.0.3", NULL));
    ck_assert(xff_from(p, "0.0.0.3", "", NULL));
    ck_assert(xff_from(p, "0.0.0.3", " , ", NULL));
    ck_assert(xff_from(p, "0.0.0.0", "\"a,0.0.0.3", NULL));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(xff_without_entries_uses_the_socket_address) {
    sy__pred *p =
        pred("XForwardedRemoteAddr", ARGS({"sources", "172.16.0.0/12"}));
    ck_assert(xff(p, NULL, NULL));
    ck_assert(!xff(p, "1.1.1.1", NULL));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(xff_ipv6_entries) {
    sy__pred *p = pred("XForwardedRemoteAddr", ARGS({"sources", "fd00::/8"}));
    ck_assert(xff(p, "1.1.1.1, fd00::7", NULL));
    ck_assert(xff(p, "1.1.1.1,[fd00::7]:8080", NULL));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(xff_max_trusted_index_must_be_positive) {
    pred_err("XForwardedRemoteAddr",
             ARGS({"sources", "10.0.0.0/8"}, {"maxTrustedIndex", "0"}), SY_EARG,
             ROUTE_PATH ".args.maxTrustedIndex", 0);
}
END_TEST

/* ---- Weight ---- */

static bool weighted(const sy__pred *p, uint64_t seed,
                     const sy__weight_slot *slot) {
    rq r;
    rq_init(&r, "/");
    r.req.seed = seed;
    r.ev.weight = slot;
    bool ok = eval(p, &r);
    rq_free(&r);
    return ok;
}

START_TEST(weight_holds_only_when_the_draw_falls_in_the_slot) {
    sy__pred *p =
        pred("Weight", ARGS({"weight.group", "g"}, {"weight.weight", "8"}));
    ck_assert_str_eq(sy__pred_weight_group(p), "g");
    ck_assert_uint_eq(sy__pred_weight_value(p), 8);
    double r = sy__weight_draw(42, 3);
    sy__weight_slot below = {3, 0.0, r}; /* hi is exclusive */
    sy__weight_slot at_lo = {3, r, 1.0}; /* lo is inclusive */
    sy__weight_slot all = {3, 0.0, 1.0};
    ck_assert(!weighted(p, 42, &below));
    ck_assert(weighted(p, 42, &at_lo));
    ck_assert(weighted(p, 42, &all));
    ck_assert(!weighted(p, 42, NULL));
    sy__pred_free(p, &A);
}
END_TEST

START_TEST(weight_draw_is_deterministic_in_unit_range_and_spread) {
    ck_assert(sy__weight_draw(7, 1) == sy__weight_draw(7, 1));
    ck_assert(sy__weight_draw(7, 1) != sy__weight_draw(7, 2));
    ck_assert(sy__weight_draw(7, 1) != sy__weight_draw(8, 1));
    int low = 0;
    for (uint64_t s = 0; s < 4000; s++) {
        double r = sy__weight_draw(s, 0);
        ck_assert(r >= 0.0 && r < 1.0);
        low += r < 0.25;
    }
    ck_assert_int_gt(low, 850);
    ck_assert_int_lt(low, 1150);
}
END_TEST

START_TEST(weight_must_not_be_negative) {
    pred_err("Weight", ARGS({"weight.group", "g"}, {"weight.weight", "-1"}),
             SY_EARG, ROUTE_PATH ".args.weight.weight", 0);
}
END_TEST

/* ---- host factories ---- */

typedef struct hf_count {
    int compiles, frees;
} hf_count;

static int hf_compile(void *data, const sy_kv *args, size_t n, void **state,
                      sy_error *err) {
    hf_count *c = data;
    c->compiles++;
    if (n != 1 || strcmp(args[0].key, "prefix") != 0) {
        snprintf(err->message, sizeof err->message, "needs a prefix");
        snprintf(err->path, sizeof err->path, "prefix");
        return SY_EARG;
    }
    char *s = strdup(args[0].value);
    *state = s;
    return s ? 0 : SY_ENOMEM;
}

static bool hf_test(void *state, const sy_request *req) {
    size_t n = strlen(state);
    return req->path.len >= n && memcmp(req->path.ptr, state, n) == 0;
}

static int hf_count_tests;
static bool hf_test_counting(void *state, const sy_request *req) {
    hf_count_tests++;
    return hf_test(state, req);
}

static void hf_free(void *data, void *state) {
    ((hf_count *)data)->frees++;
    free(state);
}

START_TEST(host_factory_compiles_once_tests_per_request_and_frees) {
    hf_count c = {0, 0};
    sy_predicate_factory f = {
        NULL, SY_SHORTCUT_DEFAULT, hf_compile, hf_test_counting, hf_free, &c};
    sy_kv args[] = {{"prefix", "/in"}};
    sy__def_host_ref ref = {&f, "InHouse"};
    sy__def_entry e = {
        .f.ref = &ref, .args = args, .arg_count = 1, .host = true};
    sy__pred *p;
    ck_assert_int_eq(sy__pred_compile(&e, &ENV, ROUTE_PATH, &p, NULL), 0);
    ck_assert_int_eq(sy__pred_get_kind(p), SY_PK_HOST_FACTORY);
    hf_count_tests = 0;
    ck_assert(on_path(p, "/inside"));
    ck_assert(!on_path(p, "/out"));
    ck_assert_int_eq(hf_count_tests, 2);
    ck_assert_int_eq(c.compiles, 1);
    sy__pred_free(p, &A);
    ck_assert_int_eq(c.frees, 1);
}
END_TEST

START_TEST(host_factory_error_gets_the_entry_path) {
    hf_count c = {0, 0};
    sy_predicate_factory f = {
        NULL, SY_SHORTCUT_DEFAULT, hf_compile, hf_test, hf_free, &c};
    sy_kv args[] = {{"other", "x"}};
    sy__def_host_ref ref = {&f, "InHouse"};
    sy__def_entry e = {
        .f.ref = &ref, .args = args, .arg_count = 1, .host = true};
    sy__pred *p;
    sy_error err;
    ck_assert_int_eq(sy__pred_compile(&e, &ENV, ROUTE_PATH, &p, &err), SY_EARG);
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err.path, ROUTE_PATH ".args.prefix");
    ck_assert_str_eq(err.message, "needs a prefix");
    ck_assert_int_eq(c.frees, 0);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("predicate");
    TCase *t = tcase_create("path_host_method");
    tcase_add_checked_fixture(t, setup, NULL);
    tcase_add_test(t, path_first_matching_pattern_wins_and_captures_its_vars);
    tcase_add_test(t, path_matches_trailing_slash_by_default);
    tcase_add_test(t, path_match_trailing_slash_false_is_exact);
    tcase_add_test(t, path_table_from_the_route_model);
    tcase_add_test(t, path_literal_compare_equals_the_pattern_matcher);
    tcase_add_test(t, host_literal_compare_equals_the_pattern_matcher);
    tcase_add_test(t, path_capture_rest_is_joined_into_scratch);
    tcase_add_test(t, tail_answers_as_the_pattern_does);
    tcase_add_test(t, path_without_room_for_captures_matches_without_them);
    tcase_add_test(t, path_pattern_error_names_the_field_and_offset);
    tcase_add_test(t, host_variable_count_is_kept_up_to_the_pattern_limit);
    tcase_add_test(t, path_regex_error_has_offset_inside_the_pattern);
    tcase_add_test(t, path_bad_trailing_slash_flag_is_an_arg_error);
    tcase_add_test(t, host_matches_the_host_with_its_port_as_sent);
    tcase_add_test(t, host_captures_the_vars_of_the_matching_pattern);
    tcase_add_test(t, host_pattern_error_names_the_field);
    tcase_add_test(t, method_matches_listed_methods_upper_cased);
    tcase_add_test(t, method_nonstandard_sets_bit_31_and_matches_exactly);
    tcase_add_test(t, method_bits_follow_the_documented_order);
    suite_add_tcase(s, t);

    t = tcase_create("header_query_cookie");
    tcase_add_checked_fixture(t, setup, NULL);
    tcase_add_test(t, header_name_is_case_insensitive);
    tcase_add_test(t, header_without_regexp_needs_a_nonempty_value);
    tcase_add_test(t, header_values_split_on_commas_outside_quotes);
    tcase_add_test(t, header_quoted_values_are_unescaped);
    tcase_add_test(t, header_values_of_repeated_headers_all_count);
    tcase_add_test(t, header_regexp_must_match_the_whole_value);
    tcase_add_test(t, header_bad_regexp_is_an_error_with_offset);
    tcase_add_test(t, query_param_without_regexp_is_present_even_without_value);
    tcase_add_test(t, query_param_name_is_case_sensitive);
    tcase_add_test(t, query_values_are_url_decoded_with_plus_as_space);
    tcase_add_test(t, query_names_are_decoded_too);
    tcase_add_test(t, query_some_value_must_fully_match);
    tcase_add_test(t, cookie_needs_exact_name_and_fully_matching_value);
    tcase_add_test(t, cookie_in_any_cookie_header_and_quoted_values_count);
    suite_add_tcase(s, t);

    t = tcase_create("time_addr_weight");
    tcase_add_checked_fixture(t, setup, NULL);
    tcase_add_test(t, after_is_strict);
    tcase_add_test(t, before_is_strict);
    tcase_add_test(t, between_excludes_both_ends);
    tcase_add_test(t, after_reads_iso_dates_with_zone);
    tcase_add_test(t, between_needs_datetime1_before_datetime2);
    tcase_add_test(t, bad_datetime_is_an_arg_error);
    tcase_add_test(t, remote_addr_ipv4_cidr);
    tcase_add_test(t, remote_addr_bare_address_is_a_host_route);
    tcase_add_test(t, remote_addr_ipv6_cidr);
    tcase_add_test(t, remote_addr_bad_source_is_an_arg_error);
    tcase_add_test(t, xff_default_index_uses_the_right_most_entry);
    tcase_add_test(t, xff_max_trusted_index_counts_from_the_right);
    tcase_add_test(t, xff_index_beyond_the_entries_uses_the_left_most);
    tcase_add_test(t, xff_several_header_lines_fall_back_to_the_socket_address);
    tcase_add_test(t, xff_one_line_is_split_on_every_comma);
    tcase_add_test(t, xff_without_entries_uses_the_socket_address);
    tcase_add_test(t, xff_ipv6_entries);
    tcase_add_test(t, xff_max_trusted_index_must_be_positive);
    tcase_add_test(t, weight_holds_only_when_the_draw_falls_in_the_slot);
    tcase_add_test(t, weight_draw_is_deterministic_in_unit_range_and_spread);
    tcase_add_test(t, weight_must_not_be_negative);
    tcase_add_test(t, host_factory_compiles_once_tests_per_request_and_frees);
    tcase_add_test(t, host_factory_error_gets_the_entry_path);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return sy_test_run(suite());
}
