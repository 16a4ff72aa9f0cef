/* test_pattern.c - request splitting, PathPattern and Ant host patterns
 * (route model 4.1): matching tables, captures, compile errors with
 * offsets, introspection, and sy__regex. */
#include "route/pattern.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>

static sy__alloc A;

static void setup(void) {
    sy__alloc_init(&A, NULL);
}

/* Everything one match needs, built from text. */
typedef struct mt {
    sy__pattern *p;
    sy__arena pat_arena; /* the pattern's, when compiled in an arena */
    sy__segments segs;
    sy__arena scratch;
    pcre2_match_data *md;
    sy__capture caps[16];
    size_t ncaps;
} mt;

/* Compile patterns into an arena (as a route's predicates are) instead
 * of blocks of their own: the corpus runs both ways. */
static bool in_arena;

static void mt_open(mt *m, const char *pat, bool host) {
    memset(m, 0, sizeof *m);
    sy_error err;
    sy__arena_init(&m->pat_arena, &A, 64);
    int rc = in_arena ? sy__pattern_compile_in(&A, &m->pat_arena, pat, host,
                                               &m->p, &err)
             : host   ? sy__pattern_compile_host(&A, pat, &m->p, &err)
                      : sy__pattern_compile_path(&A, pat, &m->p, &err);
    ck_assert_msg(rc == 0, "%s: %s at %zu", pat, err.message, err.offset);
    sy__arena_init(&m->scratch, &A, 256);
    m->md = pcre2_match_data_create(sy__pattern_max_groups(m->p), NULL);
}

static bool mt_run(mt *m, const char *input, bool mts) {
    m->ncaps = 0;
    sy__arena_reset(&m->scratch);
    sy_str s = {input, strlen(input)};
    ck_assert(sy__segments_split(&m->segs, s, &m->scratch, &A));
    return sy__pattern_match_path(m->p, &m->segs, mts, m->caps, &m->ncaps,
                                  m->md, &m->scratch);
}

static bool mt_host(mt *m, const char *input) {
    m->ncaps = 0;
    sy_str s = {input, strlen(input)};
    ck_assert(sy__segments_split_host(&m->segs, s, &A));
    return sy__pattern_match_host(m->p, &m->segs, m->caps, &m->ncaps, m->md);
}

static void mt_close(mt *m) {
    sy__pattern_free(m->p);
    sy__arena_free(&m->pat_arena);
    sy__segments_free(&m->segs, &A);
    sy__arena_free(&m->scratch);
    pcre2_match_data_free(m->md);
}

/* The one-pass split gives the segments of the plain split, and what it
 * reports is exactly what the path holds (a segment-starting '.', a '%',
 * a ';'): random paths of 0-70 bytes over an alphabet rich in separators, every
 * length around the 8- and 16-byte block edges, each copied into a buffer of
 * its exact size (so ASan would catch a read past its end). */
START_TEST(one_pass_split_equals_the_plain_split) {
    static const char alphabet[] = "//ab.c%2F;x";
    sy__segments a = {0}, b = {0};
    sy__arena ar;
    sy__arena_init(&ar, &A, 256);
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (int iter = 0; iter < 20000; iter++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        size_t len = (size_t)(rng % 71);
        char *buf = malloc(len ? len : 1);
        for (size_t i = 0; i < len; i++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            /* mostly plain bytes, so many paths take the fast pass */
            buf[i] = rng % 4 ? "abcdefgh/"[rng % 9]
                             : alphabet[(rng >> 8) % (sizeof alphabet - 1)];
        }
        sy_str s = {buf, len};
        unsigned seen = 99;
        sy__arena_reset(&ar);
        ck_assert(sy__segments_split(&a, s, &ar, &A));
        ck_assert(sy__segments_split_scan(&b, s, &ar, &A, &seen));
        ck_assert_uint_eq(a.count, b.count);
        for (size_t i = 0; i < a.count; i++) {
            ck_assert(a.dec[i].len == b.dec[i].len &&
                      memcmp(a.dec[i].ptr, b.dec[i].ptr, a.dec[i].len) == 0);
            ck_assert(a.raw[i].ptr == b.raw[i].ptr &&
                      a.raw[i].len == b.raw[i].len);
        }
        bool dot_starts = false; /* a '.' first or after a '/' */
        for (size_t i = 0; i < len; i++)
            dot_starts |= buf[i] == '.' && (i == 0 || buf[i - 1] == '/');
        bool odd = len && (memchr(buf, '%', len) || memchr(buf, ';', len));
        bool empty = false; /* a decoded segment is empty */
        for (size_t i = 0; i < a.count; i++)
            empty |= a.dec[i].len == 0;
        unsigned want = (dot_starts ? SY_SEEN_DOT : 0u) |
                        (len && memchr(buf, '%', len) ? SY_SEEN_PCT : 0u) |
                        (len && memchr(buf, ';', len) ? SY_SEEN_SEMI : 0u) |
                        (!len || buf[0] != '/' ? SY_SEEN_UNROOTED : 0u) |
                        SY_SEEN_ALWAYS;
        /* EMPTY: set whenever a segment is empty, and exactly then when
         * no segment needs decoding (else it may be set anyway) */
        if (empty || (odd && (seen & SY_SEEN_EMPTY)))
            want |= SY_SEEN_EMPTY;
        ck_assert_uint_eq(seen, want);
        /* plain segments of a rooted path: that path, else none */
        bool flat = len && buf[0] == '/' && !odd;
        ck_assert(b.flat.ptr == (flat ? buf : NULL));
        if (flat)
            ck_assert_uint_eq(b.flat.len, len);
        free(buf);
    }
    sy__segments_free(&a, &A);
    sy__segments_free(&b, &A);
    sy__arena_free(&ar);
}
END_TEST

/* Host labels against a plain reading of the rule (split on '.', empty
 * labels dropped, one empty label for a leading and one for a trailing
 * '.'), on random hosts of 0-80 bytes in buffers of their exact size. */
START_TEST(host_split_equals_the_rule) {
    sy__segments a = {0};
    uint64_t rng = 0x2545f4914f6cdd1dull;
    for (int iter = 0; iter < 20000; iter++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        /* 0-80 bytes: both sides of the 64-byte one-mask split */
        size_t len = (size_t)(rng % 81);
        char *buf = malloc(len ? len : 1);
        for (size_t i = 0; i < len; i++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            buf[i] = "ab.cd.e-"[rng % 8];
        }
        ck_assert(sy__segments_split_host(&a, (sy_str){buf, len}, &A));
        size_t n = 0;
        bool lead = len && buf[0] == '.', trail = len && buf[len - 1] == '.';
        ck_assert(a.lead == lead && a.trail == trail);
        if (lead) {
            ck_assert(n < a.count && a.dec[n].len == 0);
            n++;
        }
        for (size_t i = 0; i < len;) {
            size_t j = i;
            while (j < len && buf[j] != '.')
                j++;
            if (j > i) {
                ck_assert(n < a.count);
                ck_assert(a.dec[n].ptr == buf + i && a.dec[n].len == j - i);
                n++;
            }
            i = j + 1;
        }
        if (trail) {
            ck_assert(n < a.count && a.dec[n].len == 0);
            n++;
        }
        ck_assert_uint_eq(n, a.count);
        free(buf);
    }
    sy__segments_free(&a, &A);
}
END_TEST

/* Does `pat` match `path` (matchTrailingSlash as given)? */
static bool pm(const char *pat, const char *path, bool mts) {
    mt m;
    mt_open(&m, pat, false);
    bool r = mt_run(&m, path, mts);
    mt_close(&m);
    return r;
}

static bool hm(const char *pat, const char *host) {
    mt m;
    mt_open(&m, pat, true);
    bool r = mt_host(&m, host);
    mt_close(&m);
    return r;
}

/* The value captured for `name`, as a malloc'd string, or NULL when the
 * pattern did not match or has no such capture. */
static char *pcap(const char *pat, const char *path, const char *name) {
    mt m;
    mt_open(&m, pat, false);
    char *v = NULL;
    if (mt_run(&m, path, true))
        for (size_t i = 0; i < m.ncaps; i++)
            if (sy__str_eq(m.caps[i].name, name, strlen(name)))
                v = strndup(m.caps[i].value.ptr, m.caps[i].value.len);
    mt_close(&m);
    return v;
}

static char *hcap(const char *pat, const char *host, const char *name) {
    mt m;
    mt_open(&m, pat, true);
    char *v = NULL;
    if (mt_host(&m, host))
        for (size_t i = 0; i < m.ncaps; i++)
            if (sy__str_eq(m.caps[i].name, name, strlen(name)))
                v = strndup(m.caps[i].value.ptr, m.caps[i].value.len);
    mt_close(&m);
    return v;
}

#define ck_cap(got, want)                                                      \
    do {                                                                       \
        char *g_ = (got);                                                      \
        ck_assert_ptr_nonnull(g_);                                             \
        ck_assert_str_eq(g_, want);                                            \
        free(g_);                                                              \
    } while (0)

static void ck_err(const char *pat, bool host, int code, size_t offset) {
    sy__pattern *p = NULL;
    sy_error err;
    int rc = host ? sy__pattern_compile_host(&A, pat, &p, &err)
                  : sy__pattern_compile_path(&A, pat, &p, &err);
    ck_assert_msg(rc == code, "%s: rc %d, want %d", pat, rc, code);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(err.code, code);
    ck_assert_msg(err.offset == offset, "%s: offset %zu, want %zu (%s)", pat,
                  err.offset, offset, err.message);
    ck_assert_str_eq(err.path, "");
    ck_assert(err.message[0] != '\0');
}

/* ---- splitting ---- */

static void ck_seg(const sy__segments *s, size_t i, const char *dec,
                   const char *raw) {
    ck_assert_uint_gt(s->count, i);
    ck_assert_msg(sy__str_eq(s->dec[i], dec, strlen(dec)), "dec[%zu] '%.*s'", i,
                  (int)s->dec[i].len, s->dec[i].ptr);
    ck_assert_msg(sy__str_eq(s->raw[i], raw, strlen(raw)), "raw[%zu] '%.*s'", i,
                  (int)s->raw[i].len, s->raw[i].ptr);
}

static sy__segments split(const char *path, sy__arena *ar) {
    sy__segments s = {0};
    ck_assert(sy__segments_split(&s, (sy_str){path, strlen(path)}, ar, &A));
    return s;
}

START_TEST(split_decodes_each_segment_after_splitting) {
    sy__arena ar;
    sy__arena_init(&ar, &A, 128);
    sy__segments s = split("/a/b%2Fc/%41", &ar);
    ck_assert_uint_eq(s.count, 3);
    ck_seg(&s, 0, "a", "a");
    ck_seg(&s, 1, "b/c", "b%2Fc");
    ck_seg(&s, 2, "A", "%41");
    sy__segments_free(&s, &A);
    sy__arena_free(&ar);
}
END_TEST

START_TEST(split_drops_matrix_params_before_decoding) {
    sy__arena ar;
    sy__arena_init(&ar, &A, 128);
    sy__segments s = split("/a;x=1;y=2/b%3Bc;z/", &ar);
    ck_assert_uint_eq(s.count, 3);
    ck_seg(&s, 0, "a", "a;x=1;y=2");
    ck_seg(&s, 1, "b;c", "b%3Bc;z");
    ck_seg(&s, 2, "", "");
    sy__segments_free(&s, &A);
    sy__arena_free(&ar);
}
END_TEST

START_TEST(split_keeps_empty_segments) {
    sy__arena ar;
    sy__arena_init(&ar, &A, 128);
    sy__segments s = split("/a//b", &ar);
    ck_assert_uint_eq(s.count, 3);
    ck_seg(&s, 1, "", "");
    ck_seg(&s, 2, "b", "b");
    sy__segments_free(&s, &A);
    sy__arena_free(&ar);
}
END_TEST

START_TEST(split_root_is_one_empty_segment_and_empty_is_none) {
    sy__arena ar;
    sy__arena_init(&ar, &A, 128);
    sy__segments s = split("/", &ar);
    ck_assert_uint_eq(s.count, 1);
    ck_seg(&s, 0, "", "");
    ck_assert(sy__segments_split(&s, (sy_str){"", 0}, &ar, &A));
    ck_assert_uint_eq(s.count, 0);
    sy__segments_free(&s, &A);
    sy__arena_free(&ar);
}
END_TEST

START_TEST(split_treats_missing_leading_slash_as_present) {
    sy__arena ar;
    sy__arena_init(&ar, &A, 128);
    sy__segments s = split("a/b", &ar);
    ck_assert_uint_eq(s.count, 2);
    ck_seg(&s, 0, "a", "a");
    sy__segments_free(&s, &A);
    sy__arena_free(&ar);
}
END_TEST

START_TEST(split_keeps_invalid_escapes) {
    sy__arena ar;
    sy__arena_init(&ar, &A, 128);
    sy__segments s = split("/%zz%4/%", &ar);
    ck_seg(&s, 0, "%zz%4", "%zz%4");
    ck_seg(&s, 1, "%", "%");
    sy__segments_free(&s, &A);
    sy__arena_free(&ar);
}
END_TEST

START_TEST(split_grows_arrays_only_when_too_small) {
    sy__arena ar;
    sy__arena_init(&ar, &A, 128);
    sy__segments s = split("/a/b/c/d/e/f/g/h/i/j", &ar);
    ck_assert_uint_eq(s.count, 10);
    size_t cap = s.cap;
    sy_str *dec = s.dec;
    ck_assert(sy__segments_split(&s, (sy_str){"/x/y", 4}, &ar, &A));
    ck_assert_uint_eq(s.count, 2);
    ck_assert_uint_eq(s.cap, cap);
    ck_assert_ptr_eq(s.dec, dec);
    sy__segments_free(&s, &A);
    sy__arena_free(&ar);
}
END_TEST

START_TEST(split_without_escapes_points_into_the_path) {
    sy__arena ar;
    sy__arena_init(&ar, &A, 128);
    const char *path = "/plain/text";
    sy__segments s = split(path, &ar);
    ck_assert_ptr_eq(s.dec[0].ptr, path + 1);
    ck_assert_ptr_eq(s.dec[1].ptr, path + 7);
    sy__segments_free(&s, &A);
    sy__arena_free(&ar);
}
END_TEST

START_TEST(split_host_on_dots_keeps_the_port) {
    sy__segments s = {0};
    ck_assert(
        sy__segments_split_host(&s, (sy_str){"example.com:8080", 16}, &A));
    ck_assert_uint_eq(s.count, 2);
    ck_seg(&s, 0, "example", "example");
    ck_seg(&s, 1, "com:8080", "com:8080");
    sy__segments_free(&s, &A);
}
END_TEST

/* ---- path matching ---- */

typedef struct row {
    const char *pat, *path;
    bool want;
} row;

static void table(const row *rows, size_t n, bool mts) {
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(pm(rows[i].pat, rows[i].path, mts) == rows[i].want,
                      "'%s' vs '%s' (mts=%d): want %d", rows[i].pat,
                      rows[i].path, mts, rows[i].want);
}

START_TEST(literal_segments_are_case_sensitive) {
    static const row r[] = {
        {"/api/users", "/api/users", true},
        {"/api/users", "/API/users", false},
        {"/api/users", "/api/users/x", false},
        {"/api/users", "/api", false},
        {"/", "/", true},
        {"/", "/a", false},
    };
    table(r, SY_ARRAY_LEN(r), false);
}
END_TEST

START_TEST(question_mark_matches_exactly_one_character) {
    static const row r[] = {
        {"/a?c", "/abc", true},   {"/a?c", "/ac", false},
        {"/a?c", "/abbc", false}, {"/a?c", "/a%C3%A9c", true},
        {"/???", "/xyz", true},   {"/???", "/xy", false},
        {"/a?c", "/a%2Fc", true},
    };
    table(r, SY_ARRAY_LEN(r), false);
}
END_TEST

START_TEST(star_stays_within_one_segment) {
    static const row r[] = {
        {"/a/*/c", "/a/b/c", true},         {"/a/*/c", "/a/b/x/c", false},
        {"/file*.txt", "/file.txt", true},  {"/file*.txt", "/file-1.txt", true},
        {"/file*.txt", "/fileXtxt", false}, {"/*.json", "/x/y.json", false},
    };
    table(r, SY_ARRAY_LEN(r), false);
}
END_TEST

START_TEST(star_last_may_match_the_empty_last_segment) {
    static const row r[] = {
        {"/a/*", "/a/", true},
        {"/a/*", "/a", false},
        {"/a/*", "/a/b", true},
        {"/a/*", "/a/b/", false},
    };
    table(r, SY_ARRAY_LEN(r), false);
}
END_TEST

START_TEST(star_in_the_middle_needs_a_nonempty_segment) {
    ck_assert(!pm("/a/*/c", "/a//c", false));
    ck_assert(pm("/a/*/c", "/a/b/c", false));
}
END_TEST

START_TEST(empty_segments_keep_their_separators) {
    static const row r[] = {
        {"/a/b", "/a//b", false},
        {"/a//b", "/a//b", true},
        {"/a//b", "/a/b", false},
        {"/a/{x}", "/a//", false},
    };
    table(r, SY_ARRAY_LEN(r), true);
}
END_TEST

START_TEST(var_captures_one_decoded_nonempty_segment) {
    ck_cap(pcap("/users/{id}", "/users/42", "id"), "42");
    ck_cap(pcap("/users/{id}", "/users/a%20b", "id"), "a b");
    ck_assert_ptr_null(pcap("/users/{id}", "/users/", "id"));
    ck_assert(!pm("/users/{id}", "/users/1/2", false));
}
END_TEST

START_TEST(percent_encoded_slash_stays_inside_its_segment) {
    ck_cap(pcap("/files/{name}", "/files/a%2Fb", "name"), "a/b");
    ck_assert(!pm("/files/{name}", "/files/a/b", false));
}
END_TEST

START_TEST(matrix_params_are_ignored_when_matching) {
    ck_assert(pm("/cars/{make}/x", "/cars/vw;color=red/x", false));
    ck_cap(pcap("/cars/{make}", "/cars/vw;color=red", "make"), "vw");
    ck_assert(pm("/cars", "/cars;a=b", false));
}
END_TEST

START_TEST(regex_var_must_match_the_whole_segment) {
    static const row r[] = {
        {"/o/{id:\\d+}", "/o/123", true},
        {"/o/{id:\\d+}", "/o/12a", false},
        {"/o/{id:\\d+}", "/o/a12", false},
        {"/o/{id:a|ab}", "/o/ab", true},
        {"/o/{id:[a-z]{2}}", "/o/ab", true},
        {"/o/{id:[a-z]{2}}", "/o/abc", false},
    };
    table(r, SY_ARRAY_LEN(r), false);
    ck_cap(pcap("/o/{id:(?:\\d)(?:\\d)}", "/o/12", "id"), "12");
}
END_TEST

START_TEST(mixed_segment_captures_each_variable) {
    ck_cap(pcap("/img/{name}-{size}.png", "/img/logo-64.png", "name"), "logo");
    ck_cap(pcap("/img/{name}-{size}.png", "/img/logo-64.png", "size"), "64");
    ck_cap(pcap("/v{major:\\d+}.{minor:\\d+}", "/v1.20", "minor"), "20");
    ck_assert(!pm("/img/{name}.png", "/img/logoXpng", false));
    ck_assert(!pm("/v{major:\\d+}", "/vx", false));
}
END_TEST

START_TEST(double_star_last_matches_zero_or_more_segments) {
    static const row r[] = {
        {"/a/**", "/a", true},     {"/a/**", "/a/", true},
        {"/a/**", "/a/b/c", true}, {"/a/**", "/b", false},
        {"/a/**", "/ab", false},   {"/**", "/", true},
        {"/**", "/x/y", true},     {"/a/b/**", "/a", false},
    };
    table(r, SY_ARRAY_LEN(r), false);
}
END_TEST

START_TEST(double_star_first_matches_any_prefix) {
    static const row r[] = {
        {"/**/x.json", "/x.json", true},
        {"/**/x.json", "/a/b/x.json", true},
        {"/**/x.json", "/a/b/y.json", false},
        {"/**/{f}.json", "/a/b.json", true},
    };
    table(r, SY_ARRAY_LEN(r), false);
}
END_TEST

START_TEST(capture_rest_includes_the_leading_slash) {
    ck_cap(pcap("/static/{*path}", "/static/css/a%2Fb.css", "path"),
           "/css/a/b.css");
    ck_cap(pcap("/static/{*path}", "/static", "path"), "");
    ck_cap(pcap("/static/{*path}", "/static/", "path"), "/");
    ck_cap(pcap("/{*path}/x", "/a/b/x", "path"), "/a/b");
}
END_TEST

/* A plain rooted path split as the matcher splits it (the scan: its
 * segments keep the path as flat) gives a {*rest} the path's own text;
 * the plain split copies the joined segments. Both the same, matched or
 * not, for short paths, empty segments and one past 64 bytes. */
START_TEST(capture_rest_from_the_flat_path_equals_the_joined_segments) {
    static const char *const pats[] = {"/static/{*path}", "/{*path}/x",
                                       "/{a}/{*rest}", "{*rest}",
                                       "/a/{b}/{*r}"};
    static const char *const paths[] = {
        "/static/css/a.css",
        "/static",
        "/static/",
        "/a/b/x",
        "/a//b/x",
        "/a/b//",
        "/x/y/z",
        "/a",
        "/a/",
        "//",
        "/a/b/c/d/x",
        "/a/bb/ccc/dddd/eeeee/ffffff/ggggggg/hhhhhhhh/iiiiiiiii/jjjjjjjjjj/x",
        "/static/a/bb/ccc/dddd/eeeee/ffffff/ggggggg/hhhhhhhh/iiiiiiiii/jjj"};
    size_t flat_caps = 0;
    for (size_t i = 0; i < SY_ARRAY_LEN(pats); i++) {
        mt m;
        mt_open(&m, pats[i], false);
        sy__segments flat = {0};
        for (size_t j = 0; j < SY_ARRAY_LEN(paths); j++) {
            sy_str s = {paths[j], strlen(paths[j])};
            unsigned seen;
            ck_assert(sy__segments_split_scan(&flat, s, &m.scratch, &A, &seen));
            ck_assert_ptr_eq(flat.flat.ptr, paths[j]);
            sy__capture fc[16];
            size_t fn = 0;
            bool fok = sy__pattern_match_path(m.p, &flat, true, fc, &fn, m.md,
                                              &m.scratch);
            bool ok = mt_run(&m, paths[j], true);
            ck_assert_msg(fok == ok, "%s %s", pats[i], paths[j]);
            ck_assert_uint_eq(fn, ok ? m.ncaps : 0);
            for (size_t k = 0; ok && k < fn; k++) {
                ck_assert_msg(fc[k].value.len == m.caps[k].value.len &&
                                  !memcmp(fc[k].value.ptr, m.caps[k].value.ptr,
                                          fc[k].value.len),
                              "%s %s: %.*s", pats[i], paths[j],
                              (int)fc[k].value.len, fc[k].value.ptr);
                /* the rest points into the path itself (no copy) */
                if (fc[k].value.len && fc[k].value.ptr[0] == '/') {
                    ck_assert(fc[k].value.ptr >= paths[j] &&
                              fc[k].value.ptr < paths[j] + s.len);
                    flat_caps++;
                }
            }
        }
        sy__segments_free(&flat, &A);
        mt_close(&m);
    }
    ck_assert_uint_gt(flat_caps, 10);
}
END_TEST

START_TEST(trailing_slash_matches_when_enabled) {
    static const row on[] = {
        {"/a", "/a/", true},
        {"/a/{x}", "/a/b/", true},
        {"/a", "/a//", false},
        {"/a/", "/a/", true},
    };
    table(on, SY_ARRAY_LEN(on), true);
    static const row off[] = {
        {"/a", "/a/", false},
        {"/a/{x}", "/a/b/", false},
    };
    table(off, SY_ARRAY_LEN(off), false);
}
END_TEST

START_TEST(trailing_slash_is_not_a_matrix_only_segment) {
    ck_assert(!pm("/a", "/a/;x=1", true));
}
END_TEST

/* Spring PathPatternTests literalPathElements
 * (checkNoMatch("foo", "/foo")): a pattern without a leading '/' never
 * matches a request path, unless it starts with ** or {*x}, which stand
 * for the separator themselves (PathPatternParserTests
 * captureSegmentsEndOfPathPatterns: "{*foobar}" is "/{*foobar}"). */
START_TEST(pattern_without_leading_slash_never_matches) {
    ck_assert(!pm("foo", "/foo", true));
    ck_assert(!pm("a/{b}", "/a/x", false));
    ck_assert(!pm("*", "/x", true));
    ck_assert(pm("**/x", "/a/x", false));
    ck_cap(pcap("{*rest}", "/a/b", "rest"), "/a/b");
    sy__pattern *p;
    ck_assert_int_eq(sy__pattern_compile_path(&A, "foo", &p, NULL), 0);
    ck_assert(!sy__pattern_can_match(p));
    sy__pattern_free(p);
    ck_assert_int_eq(sy__pattern_compile_path(&A, "**/x", &p, NULL), 0);
    ck_assert(sy__pattern_can_match(p));
    sy__pattern_free(p);
}
END_TEST

START_TEST(failed_match_leaves_capture_count_unchanged) {
    mt m;
    mt_open(&m, "/{a}/{b}/z", false);
    m.ncaps = 0;
    sy__arena_reset(&m.scratch);
    ck_assert(
        sy__segments_split(&m.segs, (sy_str){"/x/y/q", 6}, &m.scratch, &A));
    m.ncaps = 3;
    ck_assert(!sy__pattern_match_path(m.p, &m.segs, true, m.caps, &m.ncaps,
                                      m.md, &m.scratch));
    ck_assert_uint_eq(m.ncaps, 3);
    mt_close(&m);
}
END_TEST

START_TEST(captures_append_after_existing_ones) {
    mt m;
    mt_open(&m, "/{a}/{b}", false);
    ck_assert(sy__segments_split(&m.segs, (sy_str){"/x/y", 4}, &m.scratch, &A));
    m.ncaps = 2;
    ck_assert(sy__pattern_match_path(m.p, &m.segs, true, m.caps, &m.ncaps, m.md,
                                     &m.scratch));
    ck_assert_uint_eq(m.ncaps, 4);
    ck_assert(sy__str_eq(m.caps[2].name, "a", 1));
    ck_assert(sy__str_eq(m.caps[3].value, "y", 1));
    mt_close(&m);
}
END_TEST

START_TEST(null_caps_matches_without_capturing) {
    mt m;
    mt_open(&m, "/{a}/{*rest}", false);
    ck_assert(sy__segments_split(&m.segs, (sy_str){"/x/y", 4}, &m.scratch, &A));
    size_t n = 7;
    ck_assert(sy__pattern_match_path(m.p, &m.segs, true, NULL, &n, m.md, NULL));
    ck_assert_uint_eq(n, 7);
    mt_close(&m);
}
END_TEST

START_TEST(pathological_regex_is_bounded_by_the_match_limit) {
    ck_assert(!pm("/{x:(?:a+)+b}", "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                  false));
    ck_assert(pm("/{x:(?:a+)+b}", "/aaab", false));
}
END_TEST

/* ---- errors ---- */

START_TEST(double_star_in_the_middle_is_an_error_at_its_offset) {
    ck_err("/a/**/b", false, SY_EPATTERN, 3);
    ck_err("/a/{*rest}/b", false, SY_EPATTERN, 3);
}
END_TEST

START_TEST(second_multi_segment_is_an_error_at_its_offset) {
    ck_err("/**/a/**", false, SY_EPATTERN, 6);
    ck_err("/{*x}/{*y}", false, SY_EPATTERN, 6);
}
END_TEST

/* Spring PathPatternParserTests captureSegmentsIllegalSyntax: the error
 * is at the start of the segment */
START_TEST(capture_rest_must_be_a_whole_segment) {
    ck_err("/a/x{*y}", false, SY_EPATTERN, 3);
    ck_err("/{*foobar}abc", false, SY_EPATTERN, 1);
    ck_err("/{abc}{*foobar}", false, SY_EPATTERN, 1);
}
END_TEST

START_TEST(duplicate_variable_is_an_error_at_the_second) {
    ck_err("/{a}/{a}", false, SY_EPATTERN, 5);
    ck_err("/{a}-{b}/{*b}", false, SY_EPATTERN, 9);
}
END_TEST

START_TEST(bad_regex_reports_offset_inside_the_pattern) {
    sy__pattern *p = NULL;
    sy_error err;
    ck_assert_int_eq(sy__pattern_compile_path(&A, "/x/{id:a)b}", &p, &err),
                     SY_EREGEX);
    ck_assert_uint_eq(err.offset, 8); /* the ')' */
    ck_assert_ptr_nonnull(strstr(err.message, "parenthesis"));
    ck_err("/x/{a}-{id:[z}", false, SY_EREGEX, 13); /* end of "[z" */
}
END_TEST

/* n, multi, first and last are 16-bit: a pattern of more elements is an
 * error at the separator that makes one too many, not a truncation. */
START_TEST(too_many_segments_is_an_error_at_that_separator) {
    size_t max = 65534, n = max + 1;
    char *src = malloc(2 * n + 1);
    ck_assert_ptr_nonnull(src);
    for (size_t i = 0; i < n; i++)
        memcpy(src + 2 * i, "/a", 2);
    src[2 * n] = '\0';
    sy__pattern *p = NULL;
    sy_error err;
    ck_assert_int_eq(sy__pattern_compile_path(&A, src, &p, &err), SY_EPATTERN);
    ck_assert_uint_eq(err.offset, 2 * max); /* the 65535th '/' */
    ck_assert_ptr_nonnull(strstr(err.message, "65534 segments"));
    /* one fewer compiles, every element kept */
    src[2 * max] = '\0';
    ck_assert_int_eq(sy__pattern_compile_path(&A, src, &p, &err), 0);
    ck_assert_uint_eq(sy__pattern_segment_count(p), max);
    ck_assert_str_eq(sy__pattern_literal(p, max - 1).ptr, "a");
    sy__pattern_free(p);
    /* unrooted: one element more than its separators */
    src[2 * max] = '/';
    ck_assert_int_eq(sy__pattern_compile_path(&A, src + 1, &p, &err),
                     SY_EPATTERN);
    ck_assert_uint_eq(err.offset, 2 * max - 1);
    /* a host: three elements more than its dots, at most */
    for (size_t i = 0; i < n; i++)
        memcpy(src + 2 * i, "a.", 2);
    src[2 * (max - 2)] = '\0'; /* 65532 dots */
    ck_assert_int_eq(sy__pattern_compile_host(&A, src, &p, &err), SY_EPATTERN);
    ck_assert_uint_eq(err.offset, 2 * (max - 2) - 1); /* the last dot */
    ck_assert_ptr_nonnull(strstr(err.message, "65534 labels"));
    src[2 * (max - 3)] = '\0';
    ck_assert_int_eq(sy__pattern_compile_host(&A, src, &p, &err), 0);
    sy__pattern_free(p);
    free(src);
}
END_TEST

/* A predicate's count of variables is 16-bit: the 65536th variable of a
 * pattern is an error at its segment (label), not a truncation. */
START_TEST(too_many_variables_is_an_error_at_that_label) {
    /* 65,520 labels "{a}" (host names may repeat), then labels of five
     * variables each: the fourth holds the 65,536th */
    char *src = sy_test_host_over_vars();
    sy__pattern *p = NULL;
    sy_error err;
    ck_assert_int_eq(sy__pattern_compile_host(&A, src, &p, &err), SY_EPATTERN);
    ck_assert_uint_eq(err.offset, SY_TEST_VARS_OVER_AT); /* the 4th's start */
    ck_assert_ptr_nonnull(strstr(err.message, "65535 variables"));
    /* without the last: 65,535 variables compile */
    src[SY_TEST_VARS_OVER_AT - 1] = '\0'; /* without the 4th */
    ck_assert_int_eq(sy__pattern_compile_host(&A, src, &p, &err), 0);
    ck_assert_uint_eq(sy__pattern_var_count(p), 65535);
    sy__pattern_free(p);
    free(src);
}
END_TEST

/* A pattern with a regex keeps its match context after its names, in the
 * room sy__pattern_bytes_max counts from sy__pattern_regex_pieces: the
 * arena holds no more than that, and the regex still matches under it. */
START_TEST(regex_match_context_fits_the_counted_room) {
    static const char *const pats[] = {
        "/a/{x:\\d+}", "/f*.txt/{y}",  "/q?/**",     "/{*rest}",
        "/{v}/*",      "/a-{b}-{c}/d", "/plain/text"};
    static const size_t regex[] = {1, 1, 1, 0, 0, 1, 0};
    for (size_t k = 0; k < sizeof pats / sizeof *pats; k++) {
        const char *s = pats[k];
        size_t len = strlen(s), seps = 0, braces = 0, globs = 0;
        for (size_t i = 0; i < len; i++)
            seps += s[i] == '/', braces += s[i] == '{',
                globs += strchr("{}*?", s[i]) && s[i];
        size_t pieces = sy__pattern_regex_pieces(s, len, '/', true, SIZE_MAX);
        ck_assert_msg(pieces == regex[k], "%s: %zu pieces", s, pieces);
        /* told how many glob characters there are, it stops once it met
         * them all: the same count, from either end */
        ck_assert_uint_eq(sy__pattern_regex_pieces(s, len, '/', true, globs),
                          pieces);
        ck_assert_uint_eq(
            sy__pattern_regex_pieces(s, len, '.', true, globs),
            sy__pattern_regex_pieces(s, len, '.', true, SIZE_MAX));
        sy__arena ar;
        sy__arena_init(&ar, &A, 4096);
        sy__pattern *p = NULL;
        sy_error err;
        ck_assert_int_eq(sy__pattern_compile_in(&A, &ar, s, false, &p, &err),
                         0);
        ck_assert_uint_le(
            ar.head->used,
            sy__pattern_bytes_max(1, 1, seps, braces, pieces, false));
        sy__pattern_free(p);
        sy__arena_free(&ar);
    }
    mt m;
    in_arena = true;
    mt_open(&m, "/a/{x:\\d+}", false);
    ck_assert(mt_run(&m, "/a/42", false));
    ck_assert(!mt_run(&m, "/a/4b", false));
    mt_close(&m);
    in_arena = false;
}
END_TEST

START_TEST(unbalanced_braces_are_errors) {
    ck_err("/a/{x", false, SY_EPATTERN, 5);
    ck_err("/a}", false, SY_EPATTERN, 2);
}
END_TEST

START_TEST(capturing_group_in_a_mixed_segment_is_an_error) {
    ck_err("/{a}-{b:(x)}", false, SY_EPATTERN, 8);
}
END_TEST

/* ---- host patterns ---- */

START_TEST(host_patterns_match_labels) {
    static const struct {
        const char *pat, *host;
        bool want;
    } r[] = {
        {"example.com", "example.com", true},
        {"example.com", "Example.com", false},
        {"example.com", "example.com:8080", false},
        {"example.com:8080", "example.com:8080", true},
        {"*.example.com", "api.example.com", true},
        {"*.example.com", "example.com", false},
        {"*.example.com", "a.b.example.com", false},
        {"**.example.com", "example.com", true},
        {"**.example.com", "a.b.example.com", true},
        {"api.**", "api.example.com:8443", true},
        {"ap?.example.com", "api.example.com", true},
        {"ap?.example.com", "ap.example.com", false},
        {"web-*.example.com", "web-1.example.com", true},
        {"{sub:[a-z]+\\.x}.com", "ab.x.com", false},
        {"{sub:[a-z]+}.com", "ab.com", true},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(r); i++)
        ck_assert_msg(hm(r[i].pat, r[i].host) == r[i].want, "%s vs %s",
                      r[i].pat, r[i].host);
}
END_TEST

START_TEST(host_variables_are_captured) {
    ck_cap(hcap("{sub}.example.com", "api.example.com", "sub"), "api");
    ck_cap(hcap("{sub}.example.com:{port}", "api.example.com:8080", "sub"),
           "api");
    ck_cap(hcap("{sub}.example.{tld:com|org}", "a.example.org", "tld"), "org");
}
END_TEST

START_TEST(host_pattern_errors) {
    ck_err("{*x}.com", true, SY_EPATTERN, 0);
    ck_err("{a:(}.com", true, SY_EREGEX, 4);
    /* SCG would throw when the host matches (groups != variables) */
    ck_err("{a:(x)}.com", true, SY_EPATTERN, 3);
    ck_err("a.b{c:x|(y)}", true, SY_EPATTERN, 6);
}
END_TEST

/* ---- introspection, regex, memory ---- */

START_TEST(introspection_reports_segment_kinds_and_literals) {
    sy__pattern *p;
    ck_assert_int_eq(
        sy__pattern_compile_path(&A, "/api/{v}/f*.txt/*/**", &p, NULL), 0);
    ck_assert_uint_eq(sy__pattern_segment_count(p), 5);
    ck_assert_int_eq(sy__pattern_segment_kind(p, 0), SY_SEG_LITERAL);
    ck_assert(sy__str_eq(sy__pattern_literal(p, 0), "api", 3));
    ck_assert_int_eq(sy__pattern_segment_kind(p, 1), SY_SEG_SINGLE);
    ck_assert_int_eq(sy__pattern_segment_kind(p, 2), SY_SEG_SINGLE);
    ck_assert_int_eq(sy__pattern_segment_kind(p, 3), SY_SEG_SINGLE);
    ck_assert_int_eq(sy__pattern_segment_kind(p, 4), SY_SEG_MULTI);
    ck_assert_str_eq(sy__pattern_source(p), "/api/{v}/f*.txt/*/**");
    ck_assert_uint_eq(sy__pattern_var_count(p), 1);
    sy__pattern_free(p);
}
END_TEST

START_TEST(max_groups_covers_every_regex) {
    sy__pattern *p;
    ck_assert_int_eq(
        sy__pattern_compile_path(&A, "/{a}-{b}/{c}_{d}_{e}/{f:x}", &p, NULL),
        0);
    ck_assert_uint_eq(sy__pattern_max_groups(p), 4);
    ck_assert_uint_eq(sy__pattern_var_count(p), 6);
    sy__pattern_free(p);
}
END_TEST

START_TEST(regex_full_match_is_anchored_at_both_ends) {
    sy__regex *re;
    ck_assert_int_eq(sy__regex_compile(&A, "ab|abc", &re, NULL), 0);
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    ck_assert(sy__regex_full_match(re, "abc", 3, md));
    ck_assert(sy__regex_full_match(re, "ab", 2, md));
    ck_assert(!sy__regex_full_match(re, "xab", 3, md));
    ck_assert(!sy__regex_full_match(re, "abcd", 4, md));
    ck_assert_uint_eq(sy__regex_groups(re), 1);
    pcre2_match_data_free(md);
    sy__regex_free(re);
}
END_TEST

START_TEST(regex_error_reports_pcre2_offset) {
    sy__regex *re = (sy__regex *)1;
    sy_error err;
    ck_assert_int_eq(sy__regex_compile(&A, "ab[", &re, &err), SY_EREGEX);
    ck_assert_ptr_null(re);
    ck_assert_uint_eq(err.offset, 3);
    ck_assert_ptr_nonnull(strstr(err.message, "]"));
}
END_TEST

/* ---- Spring's own assertions: tests/data/spring/{path,host}-patterns.tsv
 * (each row names the Spring test it comes from) ---- */

/* "\n" is a newline, "\\" a backslash (host inputs and captures only). */
static char *unescape(char *s) {
    char *o = s;
    for (char *i = s; *i; i++) {
        if (*i == '\\' && (i[1] == 'n' || i[1] == '\\')) {
            *o++ = i[1] == 'n' ? '\n' : '\\';
            i++;
        } else {
            *o++ = *i;
        }
    }
    *o = '\0';
    return s;
}

static int code_of(const char *name) {
    return strncmp(name, "EREGEX", 6) == 0 ? SY_EREGEX : SY_EPATTERN;
}

/* Check the captures "a=1;b=2" of a match (the last capture of a name
 * wins, as in the filters' expansion). */
static void ck_caps(const mt *m, char *want, const char *row) {
    char *save = NULL;
    for (char *kv = strtok_r(want, ";", &save); kv;
         kv = strtok_r(NULL, ";", &save)) {
        char *eqs = strchr(kv, '=');
        ck_assert_msg(eqs != NULL, "%s: bad captures", row);
        *eqs = '\0';
        const char *v = unescape(eqs + 1);
        const sy__capture *got = NULL;
        for (size_t i = 0; i < m->ncaps; i++)
            if (sy__str_eq(m->caps[i].name, kv, strlen(kv)))
                got = &m->caps[i];
        ck_assert_msg(got && sy__str_eq(got->value, v, strlen(v)),
                      "%s: capture '%s' is '%.*s', want '%s'", row, kv,
                      got ? (int)got->value.len : 0, got ? got->value.ptr : "",
                      v);
    }
}

static void corpus(const char *file, bool host) {
    char *text = sy_test_read(file, NULL);
    ck_assert_ptr_nonnull(text);
    int rows = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#')
            continue;
        char *f[6] = {0};
        size_t nf = 0;
        for (char *c = line; nf < 6; nf++) {
            f[nf] = c;
            c = strchr(c, '\t');
            if (!c) {
                nf++;
                break;
            }
            *c++ = '\0';
        }
        ck_assert_msg(nf >= (host ? 4u : 5u), "%s: short row '%s'", file, line);
        const char *src = f[0], *pat = f[1];
        char *input = host ? unescape(f[2]) : f[2];
        bool mts = !host && f[3][0] == '1';
        const char *expect = f[host ? 3 : 4];
        char *caps = f[host ? 4 : 5];
        char row[400];
        snprintf(row, sizeof row, "%s: '%s' vs '%s'", src, pat, input);
        rows++;
        if (strncmp(expect, "error:", 6) == 0) {
            sy__pattern *p = NULL;
            sy_error err;
            sy__error_clear(&err);
            sy__arena ar;
            sy__arena_init(&ar, &A, 64);
            int rc = in_arena
                         ? sy__pattern_compile_in(&A, &ar, pat, host, &p, &err)
                     : host ? sy__pattern_compile_host(&A, pat, &p, &err)
                            : sy__pattern_compile_path(&A, pat, &p, &err);
            sy__arena_free(&ar);
            int want = code_of(expect + 6);
            ck_assert_msg(rc == want, "%s: rc %d, want %d", row, rc, want);
            ck_assert_ptr_null(p);
            const char *at = strchr(expect, '@');
            if (at)
                ck_assert_msg(err.offset == (size_t)atoi(at + 1),
                              "%s: offset %zu, want %s (%s)", row, err.offset,
                              at + 1, err.message);
            continue;
        }
        mt m;
        mt_open(&m, pat, host);
        bool got = host ? mt_host(&m, input) : mt_run(&m, input, mts);
        bool want = strcmp(expect, "match") == 0;
        ck_assert_msg(got == want, "%s: got %s", row,
                      got ? "match" : "no match");
        if (got && caps && *caps)
            ck_caps(&m, caps, row);
        mt_close(&m);
    }
    free(text);
    ck_assert_int_gt(rows, 50);
}

START_TEST(spring_path_pattern_assertions) {
    corpus("spring/path-patterns.tsv", false);
}
END_TEST

START_TEST(spring_host_pattern_assertions) {
    corpus("spring/host-patterns.tsv", true);
}
END_TEST

/* The same corpus with every pattern compiled into an arena. */
START_TEST(spring_assertions_hold_for_patterns_in_an_arena) {
    in_arena = true;
    corpus("spring/path-patterns.tsv", false);
    corpus("spring/host-patterns.tsv", true);
    in_arena = false;
}
END_TEST

typedef struct counting {
    long live, calls;
} counting;
static void *c_malloc(void *d, size_t n) {
    ((counting *)d)->live++;
    ((counting *)d)->calls++;
    return malloc(n);
}
static void *c_realloc(void *d, void *p, size_t n) {
    if (!p)
        ((counting *)d)->live++;
    ((counting *)d)->calls++;
    return realloc(p, n);
}
static void c_free(void *d, void *p) {
    ((counting *)d)->live--;
    free(p);
}

START_TEST(all_pattern_memory_goes_through_the_hooks) {
    counting c = {0, 0};
    sy_allocator user = {c_malloc, c_realloc, c_free, &c};
    sy__alloc ca;
    sy__alloc_init(&ca, &user);
    sy__pattern *p;
    ck_assert_int_eq(
        sy__pattern_compile_path(&ca, "/a/{x:\\d+}/{y}-{z}.png/**", &p, NULL),
        0);
    long after_compile = c.calls;
    ck_assert_int_gt(after_compile, 5); /* PCRE2 used the hooks too */
    sy__pattern_free(p);
    sy__regex *re;
    ck_assert_int_eq(sy__regex_compile(&ca, "x+", &re, NULL), 0);
    sy__regex_free(re);
    ck_assert_int_eq(sy__pattern_compile_path(&ca, "/{a:(}", &p, NULL),
                     SY_EREGEX);
    ck_assert_int_eq(c.live, 0);
}
END_TEST

/* In an arena, a pattern without regexes takes nothing from the
 * allocator but the arena's chunk: no block of its own, no scratch. */
START_TEST(patterns_without_regexes_in_an_arena_allocate_nothing) {
    counting c = {0, 0};
    sy_allocator user = {c_malloc, c_realloc, c_free, &c};
    sy__alloc ca;
    sy__alloc_init(&ca, &user);
    sy__arena ar;
    sy__arena_init(&ar, &ca, 4096);
    ck_assert_ptr_nonnull(sy__arena_alloc(&ar, 1)); /* the chunk */
    long before = c.calls;
    static const char *const paths[] = {
        "/user0/ljj",
        "/a/{b}/*/c",
        "/p/**",
        "/x/{*rest}",
        "",
        "/",
        "/a/averyveryveryveryveryverylongsegmentofmorethanthirtytwobytes"};
    sy__pattern *p[SY_ARRAY_LEN(paths) + 1];
    for (size_t i = 0; i < SY_ARRAY_LEN(paths); i++)
        ck_assert_int_eq(
            sy__pattern_compile_in(&ca, &ar, paths[i], false, &p[i], NULL), 0);
    ck_assert_int_eq(sy__pattern_compile_in(&ca, &ar, "*.{sub}.example.com",
                                            true, &p[SY_ARRAY_LEN(paths)],
                                            NULL),
                     0);
    ck_assert_int_eq(c.calls, before);
    /* the literal path reads as before: segments, kinds, text */
    ck_assert_uint_eq(sy__pattern_segment_count(p[0]), 2);
    ck_assert_int_eq(sy__pattern_segment_kind(p[0], 1), SY_SEG_LITERAL);
    sy_str lit = sy__pattern_literal(p[0], 1);
    ck_assert(sy__str_eq(lit, "ljj", 3));
    ck_assert_str_eq(sy__pattern_source(p[0]), "/user0/ljj");
    for (size_t i = 0; i <= SY_ARRAY_LEN(paths); i++)
        sy__pattern_free(p[i]);
    ck_assert_int_eq(c.calls, before); /* nothing to free either */
    sy__arena_free(&ar);
    ck_assert_int_eq(c.live, 0);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("pattern");
    TCase *t = tcase_create("split");
    tcase_add_checked_fixture(t, setup, NULL);
    tcase_add_test(t, split_decodes_each_segment_after_splitting);
    tcase_add_test(t, split_drops_matrix_params_before_decoding);
    tcase_add_test(t, split_keeps_empty_segments);
    tcase_add_test(t, split_root_is_one_empty_segment_and_empty_is_none);
    tcase_add_test(t, split_treats_missing_leading_slash_as_present);
    tcase_add_test(t, split_keeps_invalid_escapes);
    tcase_add_test(t, split_grows_arrays_only_when_too_small);
    tcase_add_test(t, split_without_escapes_points_into_the_path);
    tcase_add_test(t, split_host_on_dots_keeps_the_port);
    suite_add_tcase(s, t);

    t = tcase_create("path");
    tcase_add_checked_fixture(t, setup, NULL);
    tcase_add_test(t, literal_segments_are_case_sensitive);
    tcase_add_test(t, question_mark_matches_exactly_one_character);
    tcase_add_test(t, star_stays_within_one_segment);
    tcase_add_test(t, star_last_may_match_the_empty_last_segment);
    tcase_add_test(t, star_in_the_middle_needs_a_nonempty_segment);
    tcase_add_test(t, empty_segments_keep_their_separators);
    tcase_add_test(t, var_captures_one_decoded_nonempty_segment);
    tcase_add_test(t, percent_encoded_slash_stays_inside_its_segment);
    tcase_add_test(t, matrix_params_are_ignored_when_matching);
    tcase_add_test(t, regex_var_must_match_the_whole_segment);
    tcase_add_test(t, mixed_segment_captures_each_variable);
    tcase_add_test(t, double_star_last_matches_zero_or_more_segments);
    tcase_add_test(t, double_star_first_matches_any_prefix);
    tcase_add_test(t, capture_rest_includes_the_leading_slash);
    tcase_add_test(t,
                   capture_rest_from_the_flat_path_equals_the_joined_segments);
    tcase_add_test(t, trailing_slash_matches_when_enabled);
    tcase_add_test(t, trailing_slash_is_not_a_matrix_only_segment);
    tcase_add_test(t, pattern_without_leading_slash_never_matches);
    tcase_add_test(t, failed_match_leaves_capture_count_unchanged);
    tcase_add_test(t, captures_append_after_existing_ones);
    tcase_add_test(t, null_caps_matches_without_capturing);
    tcase_add_test(t, pathological_regex_is_bounded_by_the_match_limit);
    suite_add_tcase(s, t);

    t = tcase_create("errors");
    tcase_add_checked_fixture(t, setup, NULL);
    tcase_add_test(t, double_star_in_the_middle_is_an_error_at_its_offset);
    tcase_add_test(t, second_multi_segment_is_an_error_at_its_offset);
    tcase_add_test(t, capture_rest_must_be_a_whole_segment);
    tcase_add_test(t, duplicate_variable_is_an_error_at_the_second);
    tcase_add_test(t, bad_regex_reports_offset_inside_the_pattern);
    tcase_add_test(t, unbalanced_braces_are_errors);
    tcase_add_test(t, too_many_segments_is_an_error_at_that_separator);
    tcase_add_test(t, regex_match_context_fits_the_counted_room);
    tcase_add_test(t, too_many_variables_is_an_error_at_that_label);
    tcase_add_test(t, capturing_group_in_a_mixed_segment_is_an_error);
    suite_add_tcase(s, t);

    t = tcase_create("host");
    tcase_add_checked_fixture(t, setup, NULL);
    tcase_add_test(t, host_patterns_match_labels);
    tcase_add_test(t, host_variables_are_captured);
    tcase_add_test(t, host_pattern_errors);
    suite_add_tcase(s, t);

    t = tcase_create("misc");
    tcase_add_checked_fixture(t, setup, NULL);
    tcase_add_test(t, introspection_reports_segment_kinds_and_literals);
    tcase_add_test(t, one_pass_split_equals_the_plain_split);
    tcase_add_test(t, host_split_equals_the_rule);
    tcase_add_test(t, max_groups_covers_every_regex);
    tcase_add_test(t, regex_full_match_is_anchored_at_both_ends);
    tcase_add_test(t, regex_error_reports_pcre2_offset);
    tcase_add_test(t, all_pattern_memory_goes_through_the_hooks);
    tcase_add_test(t, spring_path_pattern_assertions);
    tcase_add_test(t, spring_host_pattern_assertions);
    tcase_add_test(t, spring_assertions_hold_for_patterns_in_an_arena);
    tcase_add_test(t, patterns_without_regexes_in_an_arena_allocate_nothing);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return sy_test_run(suite());
}
