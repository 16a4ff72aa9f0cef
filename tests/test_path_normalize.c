/* test_path_normalize.c - request path normalisation: the
 * normalisation table (dot segments, "//", %2F, %2e%2e, traversal above the
 * root) under each option, and end to end with the router's default
 * (normalise, keep "//", keep %2F encoded): what matches, what is captured
 * and the path forwarded upstream. */
#include "base/path_normalize.h"
#include "def/def.h"
#include "snapshot/snapshot.h"
#include "testutil.h"

#include "switchyard.h"

#include <stdio.h>

#define BAD NULL /* the path is refused: SY_PN_BAD_PATH */

enum { DEF, MERGE, REJECT, DECODE, AS_IS };

static const struct {
    int opts;
    const char *in, *want;
} table[] = {
    /* dot segments, RFC 3986 5.2.4 */
    {DEF, "/a/./b", "/a/b"},
    {DEF, "/a/b/../c", "/a/c"},
    {DEF, "/a/b/..", "/a/"},
    {DEF, "/a/b/.", "/a/b/"},
    {DEF, "/a/..", "/"},
    {DEF, "/.", "/"},
    {DEF, "/api/../admin", "/admin"},
    {DEF, "/a/%2e%2e/b", "/b"},
    {DEF, "/a/%2E./b", "/b"},
    {DEF, "/a/.%2e/b", "/b"},
    {DEF, "/a/%2e/b", "/a/b"},
    {DEF, "/a/..;jsessionid=1/b", "/b"}, /* matrix params do not hide .. */
    {DEF, "/a/.../b", "/a/.../b"},       /* not a dot segment */
    {DEF, "/a/.b/c.", "/a/.b/c."},
    {DEF, "/a/%2e%2e%2e/b", "/a/%2e%2e%2e/b"},
    {DEF, "a/../b", "/b"},
    {DEF, "", ""},
    {DEF, "/", "/"},
    {DEF, "/plain/path", "/plain/path"},
    /* traversal above the root */
    {DEF, "/..", BAD},
    {DEF, "/../a", BAD},
    {DEF, "/a/../../b", BAD},
    {DEF, "/%2e%2e/etc/passwd", BAD},
    {DEF, "/a/./../..", BAD},
    /* repeated slashes */
    {DEF, "/a//b", "/a//b"},
    {DEF, "/a//../b", "/a/b"}, /* ".." pops the empty segment */
    {MERGE, "/a//b", "/a/b"},
    {MERGE, "//a///b//", "/a/b/"},
    {MERGE, "/a//..//b", "/b"},
    /* encoded slashes */
    {DEF, "/a%2Fb", "/a%2Fb"},
    {DEF, "/a/%2F../b", "/a/%2F../b"}, /* one segment "/.." decoded: kept */
    {REJECT, "/a%2Fb", BAD},
    {REJECT, "/a%2fb", BAD},
    {REJECT, "/a%5Cb", BAD},
    {REJECT, "/a/b", "/a/b"},
    {DECODE, "/a%2Fb", "/a/b"},
    {DECODE, "/a%5cb", "/a/b"},
    {DECODE, "/a/%2F../b", "/a/b"},
    {DECODE, "/a%2F..%2F..%2Fb", BAD},
    /* as is: nothing touched */
    {AS_IS, "/api/../admin", "/api/../admin"},
    {AS_IS, "/..", "/.."},
};

static sy__path_norm_opts opts_of(int k) {
    sy__path_norm_opts o = {SY_PN_NORMALIZE, false, SY_PN_SLASHES_KEEP};
    if (k == MERGE)
        o.merge_slashes = true;
    else if (k == REJECT)
        o.escaped_slashes = SY_PN_SLASHES_REJECT;
    else if (k == DECODE)
        o.escaped_slashes = SY_PN_SLASHES_DECODE;
    else if (k == AS_IS)
        o.mode = SY_PN_AS_IS;
    return o;
}

START_TEST(normalisation_table) {
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy__arena ar;
    sy__arena_init(&ar, &a, 256);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        sy__path_norm_opts o = opts_of(table[i].opts);
        sy_str in = {table[i].in, strlen(table[i].in)}, out = {NULL, 0};
        int rc = sy__path_normalize(&o, in, &ar, &out);
        if (!table[i].want) {
            ck_assert_msg(rc == SY_PN_BAD_PATH, "%s (opts %d): rc %d, '%.*s'",
                          table[i].in, table[i].opts, rc, (int)out.len,
                          out.ptr ? out.ptr : "");
            continue;
        }
        ck_assert_msg(rc == 0, "%s (opts %d): rc %d", table[i].in,
                      table[i].opts, rc);
        ck_assert_msg(out.len == strlen(table[i].want) &&
                          memcmp(out.ptr, table[i].want, out.len) == 0,
                      "%s (opts %d): '%.*s', want '%s'", table[i].in,
                      table[i].opts, (int)out.len, out.ptr, table[i].want);
        /* an unchanged path is the caller's own slice, not a copy */
        if (strcmp(table[i].in, table[i].want) == 0)
            ck_assert_ptr_eq(out.ptr, in.ptr);
    }
    sy__arena_free(&ar);
}
END_TEST

/* End to end, router defaults. */
static const char *ROUTES =
    "[{\"id\":\"api\",\"uri\":\"http://api\",\"predicates\":[\"Path=/api/"
    "**\"]},"
    "{\"id\":\"admin\",\"uri\":\"http://admin\",\"predicates\":"
    "[\"Path=/admin/**\"]},"
    "{\"id\":\"files\",\"uri\":\"http://files\",\"predicates\":"
    "[\"Path=/files/{name}\"],\"filters\":[\"SetPath=/store/{name}\"]},"
    "{\"id\":\"strip\",\"uri\":\"http://strip\",\"predicates\":"
    "[\"Path=/s/**\"],\"filters\":[\"StripPrefix=1\"]}]";

typedef struct outcome {
    char route[32]; /* "" when nothing matched */
    char path[128]; /* the path sent upstream */
    char name[64];  /* the {name} capture, when any */
    bool bad_path;
} outcome;

static sy_router *r;

static void router_up(void) {
    ck_assert_int_eq(sy_router_new(NULL, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    ck_assert_int_eq(
        sy_router_apply(r, "s", ROUTES, strlen(ROUTES), NULL, NULL), 0);
}

static void router_down(void) {
    sy_router_free(r);
    r = NULL;
}

static outcome route(const char *path) {
    outcome o;
    memset(&o, 0, sizeof o);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){path, strlen(path)};
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m = NULL;
    ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
    o.bad_path = (sy_match_ctx_nomatch(ctx, NULL) == SY_NOMATCH_BAD_PATH);
    if (m) {
        snprintf(o.route, sizeof o.route, "%s", sy_route_id(sy_match_route(m)));
        sy_str p = sy_match_path(m);
        snprintf(o.path, sizeof o.path, "%.*s", (int)p.len, p.ptr);
        sy_str v = sy_match_var_get(m, "name");
        if (v.ptr)
            snprintf(o.name, sizeof o.name, "%.*s", (int)v.len, v.ptr);
    }
    sy_snapshot_release(s);
    sy_match_ctx_free(ctx);
    return o;
}

START_TEST(dot_segments_cannot_escape_a_path_prefix) {
    outcome o = route("/api/../admin/users");
    ck_assert_str_eq(o.route, "admin");
    ck_assert_str_eq(o.path, "/admin/users");
    o = route("/api/%2e%2e/admin/users");
    ck_assert_str_eq(o.route, "admin");
    ck_assert_str_eq(o.path, "/admin/users");
    o = route("/api/./v1/../v2");
    ck_assert_str_eq(o.route, "api");
    ck_assert_str_eq(o.path, "/api/v2");
}
END_TEST

START_TEST(a_path_above_the_root_matches_nothing_with_a_reason) {
    static const char *const bad[] = {"/..", "/api/../../admin",
                                      "/%2e%2e/api/x", "/s/../../x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        outcome o = route(bad[i]);
        ck_assert_msg(o.route[0] == '\0', "%s matched %s", bad[i], o.route);
        ck_assert_msg(o.bad_path, "%s: no bad-path reason", bad[i]);
    }
    outcome o = route("/nothing/here");
    ck_assert_str_eq(o.route, "");
    ck_assert(!o.bad_path); /* an ordinary miss is not a bad path */
}
END_TEST

START_TEST(captures_and_filters_see_the_normalised_path) {
    outcome o = route("/files/x/../report.pdf");
    ck_assert_str_eq(o.route, "files");
    ck_assert_str_eq(o.name, "report.pdf");
    ck_assert_str_eq(o.path, "/store/report.pdf");
    o = route("/s/a/./b/../c");
    ck_assert_str_eq(o.route, "strip");
    ck_assert_str_eq(o.path, "/a/c");
}
END_TEST

START_TEST(encoded_slashes_stay_encoded_by_default) {
    outcome o = route("/files/a%2Fb");
    ck_assert_str_eq(o.route, "files"); /* one segment */
    ck_assert_str_eq(o.name, "a%2Fb");  /* kept encoded in the capture too */
    o = route("/api/%2F..%2Fadmin");
    ck_assert_str_eq(o.route, "api"); /* "%2F..%2F" is no dot segment */
    ck_assert_str_eq(o.path, "/api/%2F..%2Fadmin");
}
END_TEST

START_TEST(repeated_slashes_are_kept_by_default) {
    outcome o = route("/api//x");
    ck_assert_str_eq(o.route, "api");
    ck_assert_str_eq(o.path, "/api//x");
}
END_TEST

/* End to end under each option: a snapshot derived with the option set
 * in its config (what the router option will set), holding "files"
 * (Path=/files/{name}, SetPath) then "deep" (Path=/files/{a}/{b}). */
static struct sy_route *snap_routes[2];

static sy__alloc snap_alloc; /* the snapshot keeps a pointer to it */

static sy_snapshot *snapshot_with(int k) {
    static const char *const defs[] = {
        "{\"id\":\"files\",\"uri\":\"http://files\",\"predicates\":"
        "[\"Path=/files/{name}\"],\"filters\":[\"SetPath=/store/{name}\"]}",
        "{\"id\":\"deep\",\"uri\":\"http://deep\",\"predicates\":"
        "[\"Path=/files/{a}/{b}\"]}"};
    sy__alloc_init(&snap_alloc, NULL);
    sy__route_change ch[2];
    for (uint32_t i = 0; i < 2; i++) {
        ck_assert_int_eq(sy__def_parse_route(defs[i], strlen(defs[i]), NULL,
                                             "route", &snap_routes[i], NULL),
                         0);
        ch[i] = (sy__route_change){snap_routes[i]->id, snap_routes[i],
                                   sy__rank_key(0, 0, i), 0, 0};
    }
    const char *const sources[] = {"s"};
    sy__snapshot_config cfg = {0};
    cfg.path_norm = opts_of(k);
    cfg.sources = sources;
    cfg.source_count = 1;
    sy__derive_input in = {.alloc = &snap_alloc,
                           .config = &cfg,
                           .changes = ch,
                           .change_count = 2,
                           .generation = 1};
    sy__derive_result d;
    ck_assert_int_eq(sy__snapshot_derive(&in, &d, NULL), 0);
    sy__free(&snap_alloc, d.removed);
    return d.snapshot;
}

static void destroy_snapshot(sy_snapshot *snap) {
    sy__snapshot_destroy(snap);
    sy__route_unref(snap_routes[0]);
    sy__route_unref(snap_routes[1]);
}

static outcome route_with(int k, const char *path) {
    sy_snapshot *snap = snapshot_with(k);
    outcome o;
    memset(&o, 0, sizeof o);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){path, strlen(path)};
    sy_match *m = NULL;
    ck_assert_int_eq(sy_snapshot_match(snap, ctx, &req, &m), 0);
    o.bad_path = (sy_match_ctx_nomatch(ctx, NULL) == SY_NOMATCH_BAD_PATH);
    if (m) {
        snprintf(o.route, sizeof o.route, "%s", sy_route_id(sy_match_route(m)));
        sy_str p = sy_match_path(m);
        snprintf(o.path, sizeof o.path, "%.*s", (int)p.len, p.ptr);
    }
    sy_match_ctx_free(ctx);
    destroy_snapshot(snap);
    return o;
}

START_TEST(escaped_slash_options_end_to_end) {
    /* keep: %2F is inside one segment, the capture holds a '/' */
    outcome o = route_with(DEF, "/files/a%2Fb");
    ck_assert_str_eq(o.route, "files");
    /* reject: nothing matches, with the bad-path reason */
    o = route_with(REJECT, "/files/a%2Fb");
    ck_assert_str_eq(o.route, "");
    ck_assert(o.bad_path);
    /* decode: two segments, forwarded as such */
    o = route_with(DECODE, "/files/a%2Fb");
    ck_assert_str_eq(o.route, "deep");
    ck_assert_str_eq(o.path, "/files/a/b");
    /* decode turns an encoded traversal into dot segments */
    o = route_with(DECODE, "/files/x%2F..%2Freport");
    ck_assert_str_eq(o.route, "files");
    ck_assert_str_eq(o.path, "/store/report");
    o = route_with(DECODE, "/files/..%2F..%2F..%2Fetc");
    ck_assert_str_eq(o.route, "");
    ck_assert(o.bad_path);
}
END_TEST

START_TEST(merge_slashes_end_to_end) {
    outcome o = route_with(DEF, "/files//a");
    ck_assert_str_eq(o.route, ""); /* an empty segment: no {name} */
    ck_assert(!o.bad_path);
    o = route_with(MERGE, "//files//a");
    ck_assert_str_eq(o.route, "files");
    ck_assert_str_eq(o.path, "/store/a");
}
END_TEST

START_TEST(as_is_leaves_the_path_alone) {
    outcome o = route_with(AS_IS, "/files/x/../y");
    ck_assert_str_eq(o.route, ""); /* four segments */
    o = route_with(DEF, "/files/x/../y");
    ck_assert_str_eq(o.route, "files");
    ck_assert_str_eq(o.path, "/store/y");
}
END_TEST

/* The router options reach the snapshots it publishes. */
START_TEST(router_options_select_the_behaviour) {
    static const char *doc =
        "[{\"id\":\"files\",\"uri\":\"http://files\",\"predicates\":"
        "[\"Path=/files/{name}\"]}]";
    struct {
        sy_path_normalization mode;
        bool merge;
        sy_escaped_slashes slashes;
        const char *path, *want; /* want NULL: bad path */
    } cases[] = {
        {SY_PATH_NORMALIZE, false, SY_SLASHES_REJECT, "/files/a%2Fb", NULL},
        {SY_PATH_NORMALIZE, false, SY_SLASHES_KEEP, "/files/a%2Fb",
         "/files/a%2Fb"},
        {SY_PATH_NORMALIZE, true, SY_SLASHES_KEEP, "//files//x", "/files/x"},
        {SY_PATH_AS_IS, false, SY_SLASHES_KEEP, "/files/../files/x", ""},
        {SY_PATH_NORMALIZE, false, SY_SLASHES_KEEP, "/files/../files/x",
         "/files/x"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sy_router_options o = SY_ROUTER_OPTIONS_INIT;
        o.path_normalization = cases[i].mode;
        o.merge_slashes = cases[i].merge;
        o.escaped_slashes = cases[i].slashes;
        sy_router *rt;
        ck_assert_int_eq(sy_router_new(&o, &rt, NULL), 0);
        ck_assert_int_eq(sy_router_add_source(rt, "s", NULL), 0);
        ck_assert_int_eq(sy_router_apply(rt, "s", doc, strlen(doc), NULL, NULL),
                         0);
        sy_match_ctx *ctx;
        ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
        sy_request req = SY_REQUEST_INIT;
        req.method = (sy_str){"GET", 3};
        req.path = (sy_str){cases[i].path, strlen(cases[i].path)};
        sy_snapshot *s = sy_router_acquire(rt);
        sy_match *m = NULL;
        ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
        if (!cases[i].want) {
            ck_assert_ptr_null(m);
            ck_assert_int_eq(sy_match_ctx_nomatch(ctx, NULL),
                             SY_NOMATCH_BAD_PATH);
        } else if (!cases[i].want[0]) {
            ck_assert_ptr_null(m);
            ck_assert_int_eq(sy_match_ctx_nomatch(ctx, NULL),
                             SY_NOMATCH_NO_ROUTE);
        } else {
            ck_assert_ptr_nonnull(m);
            sy_str p = sy_match_path(m);
            ck_assert_msg(p.len == strlen(cases[i].want) &&
                              memcmp(p.ptr, cases[i].want, p.len) == 0,
                          "%s: '%.*s'", cases[i].path, (int)p.len, p.ptr);
        }
        sy_snapshot_release(s);
        sy_match_ctx_free(ctx);
        sy_router_free(rt);
    }
}
END_TEST

/* ---- the matcher's fast paths against a plain reading of the rules ----
 *
 * The matcher splits a rooted path of up to 64 bytes without '%' or ';'
 * inline, sends a path to the normaliser only when its split saw a '.'
 * starting a segment, a '%', no leading '/' (or always, when merging
 * slashes), and takes the captures of a route the index walk proved on
 * first read, checking for empty segments only when the split saw one.
 * Here every path of a table (around the 16- and 64-byte edges, with
 * "//", a trailing '/', '.', "..", %2F, %5C, %2e, ';', no leading '/',
 * empty) is matched under each option and compared with what the rules
 * give: the normaliser's output split on '/', matrix parameters dropped,
 * escapes decoded (%2F and %5C kept when escaped slashes are kept), then
 * Path=/files/{name} (route "files") before Path=/files/{a}/{b} ("deep"),
 * each also matching with one more, bare empty segment (a trailing '/').
 */

typedef struct seg {
    char dec[160];
    size_t raw_len;
} seg;

/* The rules' split of a normalised path; returns the segment count. */
static size_t rule_split(const char *p, size_t n, bool keep, seg *out,
                         size_t cap) {
    size_t count = 0;
    if (n == 0)
        return 0;
    size_t i = p[0] == '/' ? 1 : 0;
    for (;;) {
        size_t e = i;
        while (e < n && p[e] != '/')
            e++;
        ck_assert_uint_lt(count, cap);
        seg *sg = &out[count++];
        sg->raw_len = e - i;
        size_t end = i;
        while (end < e && p[end] != ';')
            end++;
        size_t o = 0;
        for (size_t k = i; k < end; k++) {
            int hi, lo;
            if (p[k] == '%' && k + 2 < end &&
                (hi = sy__hexval(p[k + 1])) >= 0 &&
                (lo = sy__hexval(p[k + 2])) >= 0 &&
                !(keep && (hi * 16 + lo == '/' || hi * 16 + lo == '\\'))) {
                sg->dec[o++] = (char)(hi * 16 + lo);
                k += 2;
            } else {
                sg->dec[o++] = p[k];
            }
        }
        sg->dec[o] = '\0';
        if (e >= n)
            break;
        i = e + 1;
    }
    return count;
}

/* The route the rules pick ("" for none) and its first capture. */
static const char *rule_route(int k, const char *path, bool *bad,
                              char name[160], char norm[256]) {
    sy__path_norm_opts o = opts_of(k);
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy__arena ar;
    sy__arena_init(&ar, &a, 256);
    sy_str in = {path, strlen(path)}, np;
    int rc = sy__path_normalize(&o, in, &ar, &np);
    *bad = rc == SY_PN_BAD_PATH;
    name[0] = norm[0] = '\0';
    if (!rc)
        snprintf(norm, 256, "%.*s", (int)np.len, np.ptr);
    const char *id = "";
    if (!rc) {
        bool keep =
            o.mode != SY_PN_AS_IS && o.escaped_slashes == SY_PN_SLASHES_KEEP;
        seg sg[80];
        size_t n = rule_split(np.ptr, np.len, keep, sg, 80);
        /* one more, bare empty segment: a trailing slash both accept */
        size_t m = n >= 2 && sg[n - 1].raw_len == 0 ? n - 1 : n;
        bool lit = n >= 1 && strcmp(sg[0].dec, "files") == 0;
        if (lit && (n == 2 || m == 2) && sg[1].dec[0]) {
            id = "files";
            snprintf(name, 160, "%s", sg[1].dec);
        } else if (lit && (n == 3 || m == 3) && sg[1].dec[0] && sg[2].dec[0]) {
            id = "deep";
            snprintf(name, 160, "%s", sg[1].dec);
        }
    }
    sy__arena_free(&ar);
    return id;
}

START_TEST(fast_paths_follow_the_rules) {
    static const char *const heads[] = {
        "/files/",      "files/",    "//files/",    "/files//", "/./files/",
        "/x/../files/", "/files/./", "/files/%2e/", ""};
    static const char *const tails[] = {
        "",      "a",   "a/",   "a/b",   "a//b",   "a/b/",    ".",
        "..",    "./a", "a/..", "%2F",   "a%2Fb",  "a%2fb/c", "a%5Cb",
        "a;x=1", ";x",  "a/;x", "%2e",   "x.y",    ".x",      "a/b/c",
        "%41",   "a%2", "/",    "a/b//", "a/./b/", "a/../b/c"};
    /* padding around the 16-, 32- and 64-byte edges of the split */
    static const size_t pads[] = {0,  1,  6,  7,  8,  9,  22, 23, 24, 25,
                                  38, 39, 40, 54, 55, 56, 57, 58, 70};
    char path[256], name[160], norm[256];
    size_t checked = 0;
    for (int k = DEF; k <= AS_IS; k++) {
        sy_snapshot *snap = snapshot_with(k);
        sy_match_ctx *ctx;
        ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
        for (size_t h = 0; h < sizeof heads / sizeof *heads; h++)
            for (size_t t = 0; t < sizeof tails / sizeof *tails; t++)
                for (size_t pd = 0; pd < sizeof pads / sizeof *pads; pd++) {
                    /* the padding goes into the first segment after the
                     * head: "/files/" + "xxx" + tail */
                    char pad[80];
                    memset(pad, 'p', pads[pd]);
                    pad[pads[pd]] = '\0';
                    snprintf(path, sizeof path, "%s%s%s", heads[h], pad,
                             tails[t]);
                    bool bad;
                    const char *want = rule_route(k, path, &bad, name, norm);
                    sy_request req = SY_REQUEST_INIT;
                    req.method = (sy_str){"GET", 3};
                    req.path = (sy_str){path, strlen(path)};
                    sy_match *m = NULL;
                    ck_assert_int_eq(sy_snapshot_match(snap, ctx, &req, &m), 0);
                    const char *got = m ? sy_route_id(sy_match_route(m)) : "";
                    ck_assert_msg(strcmp(got, want) == 0,
                                  "opts %d '%s': route '%s', want '%s'", k,
                                  path, got, want);
                    ck_assert_int_eq(sy_match_ctx_nomatch(ctx, NULL) ==
                                         SY_NOMATCH_BAD_PATH,
                                     bad);
                    if (!m)
                        continue;
                    size_t want_vars = strcmp(want, "files") == 0 ? 1 : 2;
                    sy_str v = sy_match_var_get(
                        m, strcmp(want, "files") == 0 ? "name" : "a");
                    ck_assert_msg(v.len == strlen(name) &&
                                      memcmp(v.ptr, name, v.len) == 0,
                                  "opts %d '%s': capture '%.*s', want '%s'", k,
                                  path, (int)v.len, v.ptr, name);
                    ck_assert_uint_eq(sy_match_var_count(m), want_vars);
                    sy_str n0, v0;
                    sy_match_var(m, 0, &n0, &v0);
                    ck_assert(v0.ptr == v.ptr && v0.len == v.len);
                    /* "deep" has no filter: upstream gets the path as
                     * normalised ("files" sets its own) */
                    sy_str up = sy_match_path(m);
                    if (want_vars == 2)
                        ck_assert_msg(
                            up.len == strlen(norm) &&
                                memcmp(up.ptr, norm, up.len) == 0,
                            "opts %d '%s': upstream '%.*s', want '%s'", k, path,
                            (int)up.len, up.ptr, norm);
                    checked++;
                }
        sy_match_ctx_free(ctx);
        destroy_snapshot(snap);
    }
    ck_assert_uint_gt(checked, 1000); /* many paths did match */
}
END_TEST

int main(void) {
    Suite *s = suite_create("path_normalize");
    TCase *tc = tcase_create("path_normalize");
    tcase_add_unchecked_fixture(tc, router_up, router_down);
    tcase_add_test(tc, normalisation_table);
    tcase_add_test(tc, dot_segments_cannot_escape_a_path_prefix);
    tcase_add_test(tc, a_path_above_the_root_matches_nothing_with_a_reason);
    tcase_add_test(tc, captures_and_filters_see_the_normalised_path);
    tcase_add_test(tc, encoded_slashes_stay_encoded_by_default);
    tcase_add_test(tc, repeated_slashes_are_kept_by_default);
    tcase_add_test(tc, escaped_slash_options_end_to_end);
    tcase_add_test(tc, merge_slashes_end_to_end);
    tcase_add_test(tc, as_is_leaves_the_path_alone);
    tcase_add_test(tc, router_options_select_the_behaviour);
    tcase_add_test(tc, fast_paths_follow_the_rules);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
