/* test_reuse.c - an apply shares the live compiled route of every route
 * object whose bytes did not change (commit.c reuse_bytes, def.c
 * build_routes), falls back to the fingerprint for bytes of the same
 * meaning, and gives exactly the routes and errors a fresh router gives
 * for the same document. Route objects are compared by pointer through
 * sy_snapshot_find_route; the spans through the source's memo (def.h
 * sy__span_memo, router_int.h: routes carry none). The random
 * test also checks that a router fed other bytes of the same meaning (no
 * byte sharing possible) reports the same diffs. */
#include "testutil.h"

#include "def/def.h"
#include "route/route.h"
#include "router/router_int.h"
#include "switchyard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sy_router *new_router(bool lenient, size_t nsources) {
    static const char *const names[] = {"main", "other"};
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.lenient = lenient;
    sy_router *r;
    sy_error err;
    ck_assert_int_eq(sy_router_new(&o, &r, &err), 0);
    for (size_t i = 0; i < nsources; i++)
        ck_assert_int_eq(sy_router_add_source(r, names[i], &err), 0);
    return r;
}

static int apply(sy_router *r, const char *src, const char *json,
                 sy_report **rep, sy_error *err) {
    return sy_router_apply(r, src, json, strlen(json), rep, err);
}

/* The live route object of `id`, or NULL. */
static const sy_route *live(sy_router *r, const char *id) {
    sy_snapshot *s = sy_router_acquire(r);
    const sy_route *rt = sy_snapshot_find_route(s, id, NULL);
    sy_snapshot_release(s);
    return rt; /* the router holds it while it stays live */
}

/* The memo entry of element `pos` of source src's last document (span_len
 * 0: none, or no memo). */
static sy__span_memo memo_of(sy_router *r, const char *src, size_t pos) {
    const sy__source *s = sy__router_find_source(r, src);
    ck_assert_ptr_nonnull(s);
    return s->memo && pos < s->memo_count ? s->memo[pos]
                                          : (sy__span_memo){0, 0, 0};
}

/* A document of n routes "r0".."r<n-1>"; route `changed` (if < n) gets
 * another path; `spaced` (if < n) gets a space after its first comma. */
static char *make_doc(const char *version, size_t n, size_t changed,
                      size_t spaced) {
    size_t cap = 256 + n * 160, len = 0;
    char *d = malloc(cap);
    ck_assert_ptr_nonnull(d);
    len += (size_t)snprintf(d + len, cap - len,
                            "{\"version\":\"%s\",\"routes\":[\n", version);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(
            d + len, cap - len,
            "%s{\"id\":\"r%zu\",%s\"uri\":\"http://b%zu:80\",\"order\":%d,"
            "\"predicates\":[\"Path=/%s%zu/**\",\"Method=GET\"],"
            "\"filters\":[\"StripPrefix=1\"]}",
            i ? ",\n" : "", i, i == spaced ? " " : "", i, (int)(i % 3) - 1,
            i == changed ? "changed" : "p", i);
    snprintf(d + len, cap - len, "\n]}");
    return d;
}

#define N 50
#define NONE ((size_t)-1)

START_TEST(unchanged_bytes_share_the_live_route) {
    sy_router *r = new_router(false, 1);
    char *a = make_doc("1", N, NONE, NONE);
    char *b = make_doc("2", N, 17, NONE);
    sy_error err;
    ck_assert_int_eq(apply(r, "main", a, NULL, &err), 0);
    const sy_route *before[N];
    char id[16];
    for (size_t i = 0; i < N; i++) {
        snprintf(id, sizeof id, "r%zu", i);
        before[i] = live(r, id);
        ck_assert_ptr_nonnull(before[i]);
        /* built from a document: the memo holds the span of its bytes */
        ck_assert_uint_gt(memo_of(r, "main", i).span_len, 0);
    }
    /* held: keeps the replaced route alive (and its address unused) */
    sy_snapshot *old = sy_router_acquire(r);
    sy_report *rep;
    ck_assert_int_eq(apply(r, "main", b, &rep, &err), 0);
    ck_assert_uint_eq(sy_diff_updated_count(sy_report_diff(rep)), 1);
    ck_assert_uint_eq(sy_diff_unchanged_count(sy_report_diff(rep)), N - 1);
    sy_report_free(rep);
    for (size_t i = 0; i < N; i++) {
        snprintf(id, sizeof id, "r%zu", i);
        if (i == 17)
            ck_assert_ptr_ne(live(r, id), before[i]);
        else
            ck_assert_ptr_eq(live(r, id), before[i]);
    }
    /* the changed route is the new one, with its new fingerprint */
    ck_assert_uint_ne(sy_route_fingerprint(live(r, "r17")),
                      sy_route_fingerprint(before[17]));
    sy_snapshot_release(old);
    before[17] = live(r, "r17");
    /* back to a: r17 is compiled again, the others still shared */
    old = sy_router_acquire(r);
    ck_assert_int_eq(apply(r, "main", a, NULL, &err), 0);
    for (size_t i = 0; i < N; i++) {
        snprintf(id, sizeof id, "r%zu", i);
        if (i == 17)
            ck_assert_ptr_ne(live(r, id), before[i]);
        else
            ck_assert_ptr_eq(live(r, id), before[i]);
    }
    sy_snapshot_release(old);
    free(a);
    free(b);
    sy_router_free(r);
}
END_TEST

START_TEST(moved_bytes_keep_the_route_and_take_the_new_rank) {
    sy_router *r = new_router(false, 1);
    const char *a = "[{\"id\":\"x\",\"uri\":\"http://x:80\","
                    "\"predicates\":[\"Path=/s/**\"]},"
                    "{\"id\":\"y\",\"uri\":\"http://y:80\","
                    "\"predicates\":[\"Path=/s/**\"]}]";
    const char *b = "[{\"id\":\"y\",\"uri\":\"http://y:80\","
                    "\"predicates\":[\"Path=/s/**\"]},"
                    "{\"id\":\"x\",\"uri\":\"http://x:80\","
                    "\"predicates\":[\"Path=/s/**\"]}]";
    sy_error err;
    ck_assert_int_eq(apply(r, "main", a, NULL, &err), 0);
    const sy_route *x = live(r, "x"), *y = live(r, "y");
    ck_assert_int_eq(apply(r, "main", b, NULL, &err), 0);
    ck_assert_ptr_eq(live(r, "x"), x);
    ck_assert_ptr_eq(live(r, "y"), y);
    /* rank from the document order: y first now */
    sy_snapshot *s = sy_router_acquire(r);
    ck_assert_str_eq(sy_route_id(sy_snapshot_route_at(s, 0)), "y");
    ck_assert_str_eq(sy_route_id(sy_snapshot_route_at(s, 1)), "x");
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

START_TEST(duplicate_id_from_a_reused_span_is_an_error) {
    const char *a = "{\"version\":\"1\",\"routes\":["
                    "{\"id\":\"a\",\"uri\":\"http://a:80\"},"
                    "{\"id\":\"b\",\"uri\":\"http://b:80\"}]}";
    /* a's exact bytes again at routes[2] */
    const char *b = "{\"version\":\"2\",\"routes\":["
                    "{\"id\":\"a\",\"uri\":\"http://a:80\"},"
                    "{\"id\":\"b\",\"uri\":\"http://b:80\"},"
                    "{\"id\":\"a\",\"uri\":\"http://a:80\"}]}";
    /* strict: the apply fails, nothing changes */
    sy_router *r = new_router(false, 1);
    sy_error err;
    ck_assert_int_eq(apply(r, "main", a, NULL, &err), 0);
    const sy_route *ra = live(r, "a");
    ck_assert_int_eq(apply(r, "main", b, NULL, &err), SY_EDUPLICATE);
    ck_assert_str_eq(err.path, "routes[2].id");
    ck_assert_ptr_eq(live(r, "a"), ra);
    sy_router_free(r);
    /* lenient: an issue at routes[2].id, a and b stay */
    r = new_router(true, 1);
    ck_assert_int_eq(apply(r, "main", a, NULL, &err), 0);
    sy_report *rep;
    ck_assert_int_eq(apply(r, "main", b, &rep, &err), 0);
    ck_assert_uint_eq(sy_report_issue_count(rep), 1);
    ck_assert_int_eq(sy_report_issue(rep, 0)->code, SY_EDUPLICATE);
    ck_assert_str_eq(sy_report_issue(rep, 0)->path, "routes[2].id");
    sy_report_free(rep);
    sy_snapshot *s = sy_router_acquire(r);
    ck_assert_uint_eq(sy_snapshot_route_count(s), 2);
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

START_TEST(whitespace_change_falls_back_to_the_fingerprint) {
    sy_router *r = new_router(false, 1);
    char *a = make_doc("1", N, NONE, NONE);
    char *b = make_doc("2", N, NONE, 5); /* r5 gets one more space */
    sy_error err;
    ck_assert_int_eq(apply(r, "main", a, NULL, &err), 0);
    const sy_route *r5 = live(r, "r5");
    size_t old_len = memo_of(r, "main", 5).span_len;
    uint64_t old_hash = memo_of(r, "main", 5).span_hash;
    sy_report *rep;
    ck_assert_int_eq(apply(r, "main", b, &rep, &err), 0);
    ck_assert_uint_eq(sy_diff_unchanged_count(sy_report_diff(rep)), N);
    sy_report_free(rep);
    /* same meaning: still the same compiled route ... */
    ck_assert_ptr_eq(live(r, "r5"), r5);
    /* ... which now answers to the new bytes */
    ck_assert_uint_eq(memo_of(r, "main", 5).span_len, old_len + 1);
    ck_assert_uint_ne(memo_of(r, "main", 5).span_hash, old_hash);
    free(a);
    free(b);
    sy_router_free(r);
}
END_TEST

START_TEST(disabled_or_upserted_route_is_not_taken_for_its_old_bytes) {
    sy_router *r = new_router(false, 1);
    char *a = make_doc("1", 4, NONE, NONE);
    char *a2 = make_doc("2", 4, NONE, NONE);
    char *a3 = make_doc("3", 4, NONE, NONE);
    sy_error err;
    ck_assert_int_eq(apply(r, "main", a, NULL, &err), 0);
    /* disabled by a one-route change: a copy, whose position the memo
     * forgets */
    ck_assert_uint_gt(memo_of(r, "main", 1).span_len, 0);
    ck_assert_int_eq(sy_router_set_route_enabled(r, "r1", false, &err), 0);
    ck_assert(sy_route_disabled(live(r, "r1")));
    ck_assert_uint_eq(memo_of(r, "main", 1).span_len, 0);
    ck_assert_uint_gt(memo_of(r, "main", 2).span_len, 0);
    /* the document again (same bytes for r1): r1 is enabled again */
    ck_assert_int_eq(apply(r, "main", a2, NULL, &err), 0);
    ck_assert(!sy_route_disabled(live(r, "r1")));
    /* upserted with another uri, then the document: the document's uri */
    const char *up = "{\"id\":\"r2\",\"uri\":\"http://elsewhere:80\"}";
    ck_assert_int_eq(sy_router_upsert_route(r, "main", up, strlen(up), &err),
                     0);
    ck_assert_str_eq(sy_route_uri(live(r, "r2")), "http://elsewhere:80");
    ck_assert_int_eq(apply(r, "main", a3, NULL, &err), 0);
    ck_assert_str_eq(sy_route_uri(live(r, "r2")), "http://b2:80");
    free(a);
    free(a2);
    free(a3);
    sy_router_free(r);
}
END_TEST

START_TEST(same_bytes_in_another_source_are_not_shared) {
    sy_router *r = new_router(false, 2);
    const char *doc = "[{\"id\":\"a\",\"uri\":\"http://a:80\"}]";
    sy_error err;
    ck_assert_int_eq(apply(r, "main", doc, NULL, &err), 0);
    ck_assert_int_eq(apply(r, "other", doc, NULL, &err), SY_EDUPLICATE);
    ck_assert_str_eq(err.path, "[0].id");
    sy_router_free(r);
}
END_TEST

START_TEST(invalid_route_is_reported_again) {
    sy_router *r = new_router(true, 1);
    const char *a = "{\"version\":\"1\",\"routes\":["
                    "{\"id\":\"ok\",\"uri\":\"http://a:80\"},"
                    "{\"id\":\"bad\",\"uri\":\"http://a:80\","
                    "\"predicates\":[\"NoSuch=1\"]}]}";
    const char *b = "{\"version\":\"2\",\"routes\":["
                    "{\"id\":\"ok\",\"uri\":\"http://a:80\"},"
                    "{\"id\":\"bad\",\"uri\":\"http://a:80\","
                    "\"predicates\":[\"NoSuch=1\"]}]}";
    sy_error err;
    sy_report *rep;
    ck_assert_int_eq(apply(r, "main", a, &rep, &err), 0);
    ck_assert_uint_eq(sy_report_issue_count(rep), 1);
    sy_report_free(rep);
    ck_assert_int_eq(apply(r, "main", b, &rep, &err), 0);
    ck_assert_uint_eq(sy_report_issue_count(rep), 1);
    ck_assert_str_eq(sy_report_issue(rep, 0)->path, "routes[1].predicates[0]");
    sy_report_free(rep);
    ck_assert_ptr_null(live(r, "bad"));
    sy_router_free(r);
}
END_TEST

/* ---- random edits: a reusing router equals a fresh one ---- */

static uint64_t rnd(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* One route object of the random documents: a small set of variants, so
 * the same bytes come back often, with whitespace, duplicate ids and
 * invalid routes among them. */
static size_t route_text(char *out, size_t cap, uint64_t *s) {
    unsigned id = (unsigned)(rnd(s) % 24), v = (unsigned)(rnd(s) % 6);
    switch (v) {
    case 0:
    case 1:
        return (size_t)snprintf(out, cap,
                                "{\"id\":\"k%u\",\"uri\":\"http://h%u:80\","
                                "\"predicates\":[\"Path=/k%u/**\"]}",
                                id, v, id);
    case 2: /* same meaning as variant 0, other bytes */
        return (size_t)snprintf(out, cap,
                                "{ \"id\": \"k%u\", \"uri\": \"http://h0:80\","
                                " \"predicates\": [\"Path=/k%u/**\"] }",
                                id, id);
    case 3:
        return (size_t)snprintf(out, cap,
                                "{\"id\":\"k%u\",\"uri\":\"http://h0:80\","
                                "\"order\":%u,\"predicates\":[\"Path=/k%u/**\","
                                "\"Method=GET\"]}",
                                id, id % 3, id);
    case 4: /* disabled */
        return (size_t)snprintf(out, cap,
                                "{\"id\":\"k%u\",\"uri\":\"http://h0:80\","
                                "\"predicates\":[\"Path=/k%u/**\"],"
                                "\"metadata\":{\"status\":\"disabled\"}}",
                                id, id);
    default: /* invalid: an unknown predicate */
        return (size_t)snprintf(out, cap,
                                "{\"id\":\"k%u\",\"uri\":\"http://h0:80\","
                                "\"predicates\":[\"Nope=%u\"]}",
                                id, id);
    }
}

/* The document of the random test: up to MAXR route objects, edited a
 * little each round (one object replaced, added, removed, swapped with
 * another or copied over another), so most bytes come back. */
#define MAXR 16
typedef struct rdoc {
    char text[MAXR][256];
    size_t n;
} rdoc;

static void edit(rdoc *d, uint64_t *s) {
    size_t i = d->n ? rnd(s) % d->n : 0, j = d->n ? rnd(s) % d->n : 0;
    unsigned op = (unsigned)(rnd(s) % 5);
    if (op == 0 && d->n == MAXR)
        op = 1; /* full: replace instead */
    switch (op) {
    case 0:
        route_text(d->text[d->n], sizeof d->text[0], s);
        d->n++;
        break;
    case 1:
        if (d->n)
            route_text(d->text[i], sizeof d->text[0], s);
        break;
    case 2:
        if (d->n) {
            memmove(d->text[i], d->text[d->n - 1], sizeof d->text[0]);
            d->n--;
        }
        break;
    case 3: {
        char t[256];
        memcpy(t, d->text[i], sizeof t);
        memcpy(d->text[i], d->text[j], sizeof t);
        memcpy(d->text[j], t, sizeof t);
        break;
    }
    default: /* a copy: a duplicate id unless i == j */
        if (d->n)
            memcpy(d->text[i], d->text[j], sizeof d->text[0]);
        break;
    }
}

/* The document text; `pad` spaces after each route object's '{' (other
 * bytes, same meaning). */
static char *doc_text(const rdoc *d, unsigned version, int pad) {
    size_t cap = 64 + MAXR * 264, len = 0;
    char *t = malloc(cap);
    ck_assert_ptr_nonnull(t);
    len +=
        (size_t)snprintf(t, cap, "{\"version\":\"%u\",\"routes\":[", version);
    for (size_t i = 0; i < d->n; i++)
        len += (size_t)snprintf(t + len, cap - len, "%s{%*s%s", i ? "," : "",
                                pad, "", d->text[i] + 1);
    snprintf(t + len, cap - len, "]}");
    return t;
}

static void check_equal(sy_router *a, sy_router *b) {
    sy_snapshot *sa = sy_router_acquire(a), *sb = sy_router_acquire(b);
    ck_assert_uint_eq(sy_snapshot_route_count(sa), sy_snapshot_route_count(sb));
    for (size_t i = 0; i < sy_snapshot_route_count(sa); i++) {
        const sy_route *x = sy_snapshot_route_at(sa, i);
        const sy_route *y = sy_snapshot_route_at(sb, i);
        ck_assert_str_eq(sy_route_id(x), sy_route_id(y));
        ck_assert_uint_eq(sy_route_fingerprint(x), sy_route_fingerprint(y));
        ck_assert_int_eq(sy_route_disabled(x), sy_route_disabled(y));
    }
    ck_assert_uint_eq(sy_snapshot_fingerprint(sa), sy_snapshot_fingerprint(sb));
    sy_snapshot_release(sa);
    sy_snapshot_release(sb);
}

/* Two diffs list the same ids in the same order. */
static void check_same_diff(const sy_diff *a, const sy_diff *b) {
    ck_assert_uint_eq(sy_diff_unchanged_count(a), sy_diff_unchanged_count(b));
    ck_assert_uint_eq(sy_diff_added_count(a), sy_diff_added_count(b));
    ck_assert_uint_eq(sy_diff_updated_count(a), sy_diff_updated_count(b));
    ck_assert_uint_eq(sy_diff_removed_count(a), sy_diff_removed_count(b));
    for (size_t i = 0; i < sy_diff_added_count(a); i++)
        ck_assert_str_eq(sy_diff_added(a, i), sy_diff_added(b, i));
    for (size_t i = 0; i < sy_diff_updated_count(a); i++) {
        unsigned ca = 0, cb = 0;
        ck_assert_str_eq(sy_diff_updated(a, i, &ca),
                         sy_diff_updated(b, i, &cb));
        ck_assert_uint_eq(ca, cb);
    }
    for (size_t i = 0; i < sy_diff_removed_count(a); i++)
        ck_assert_str_eq(sy_diff_removed(a, i), sy_diff_removed(b, i));
}

START_TEST(random_edits_match_a_fresh_router) {
    bool lenient = _i == 1;
    uint64_t seed = 0x9e3779b97f4a7c15ull + (uint64_t)_i;
    sy_router *keep = new_router(lenient, 1);
    sy_router *mirror = new_router(lenient, 1);
    rdoc d = {.n = 0}, good = {.n = 0};
    size_t rounds = 300 * (size_t)sy_test_scale(), shared = 0, failed = 0;
    for (size_t k = 0; k < rounds; k++) {
        for (uint64_t e = 1 + rnd(&seed) % 2; e > 0; e--)
            edit(&d, &seed);
        char *doc = doc_text(&d, (unsigned)k, 0);
        /* the same document with other bytes in every route object, never
         * those of the round before: `mirror` shares by fingerprint only */
        char *padded = doc_text(&d, (unsigned)k, 1 + (int)(k % 2));
        sy_router *fresh = new_router(lenient, 1);
        sy_error e1, e2, e3;
        sy_report *r1 = NULL, *r2 = NULL, *r3 = NULL;
        sy_snapshot *before = sy_router_acquire(keep);
        int rc1 = apply(keep, "main", doc, &r1, &e1);
        int rc2 = apply(fresh, "main", doc, &r2, &e2);
        int rc3 = apply(mirror, "main", padded, &r3, &e3);
        ck_assert_int_eq(rc1, rc2);
        ck_assert_int_eq(rc1, rc3);
        if (!rc1)
            check_same_diff(sy_report_diff(r1), sy_report_diff(r3));
        if (rc1) {
            ck_assert_str_eq(e1.path, e2.path);
            ck_assert_str_eq(e1.message, e2.message);
        } else {
            ck_assert_uint_eq(sy_report_issue_count(r1),
                              sy_report_issue_count(r2));
            for (size_t i = 0; i < sy_report_issue_count(r1); i++)
                ck_assert_str_eq(sy_report_issue(r1, i)->path,
                                 sy_report_issue(r2, i)->path);
            /* count the routes the apply shared with the snapshot before */
            sy_snapshot *after = sy_router_acquire(keep);
            for (size_t i = 0; i < sy_snapshot_route_count(after); i++) {
                const sy_route *x = sy_snapshot_route_at(after, i);
                shared +=
                    sy_snapshot_find_route(before, sy_route_id(x), NULL) == x;
            }
            sy_snapshot_release(after);
        }
        sy_snapshot_release(before);
        if (!rc1) /* a failed apply leaves `keep` as it was */
            check_equal(keep, fresh);
        failed += rc1 != 0;
        if (rc1) /* the publisher fixes the document: the last good one */
            d = good;
        else
            good = d;
        sy_report_free(r1);
        sy_report_free(r2);
        sy_report_free(r3);
        sy_router_free(fresh);
        free(doc);
        free(padded);
    }
    /* the edits kept routes often enough to exercise the sharing */
    ck_assert_uint_gt(shared, rounds / 2);
    /* and both outcomes were seen */
    ck_assert_uint_gt(failed, 0);
    ck_assert_uint_lt(failed, rounds / 2);
    check_equal(keep, mirror);
    sy_router_free(keep);
    sy_router_free(mirror);
}
END_TEST

/* ---- whole documents of many routes: the scan's guesses (def.c
 * span_skip) and the position table (commit_steps.c) ---- */

/* One route object of the large documents: route `i` in variant `v`. */
static size_t big_route(char *out, size_t cap, size_t i, unsigned v) {
    return (size_t)snprintf(out, cap,
                            "{\"id\":\"b%zu\",\"uri\":\"http://h%u:80\","
                            "\"order\":%d,\"predicates\":[\"Path=/b%zu/**\"]}",
                            i, v, (int)(i % 4) - 2, i);
}

/* A document of the routes ids[0..n) (variant vars[k]); array root when
 * `bare`, else an envelope of `version`. */
static char *big_doc(const size_t *ids, const unsigned *vars, size_t n,
                     bool bare, unsigned version) {
    size_t cap = 64 + n * 128, len = 0;
    char *t = malloc(cap);
    ck_assert_ptr_nonnull(t);
    if (bare)
        len += (size_t)snprintf(t, cap, "[");
    else
        len += (size_t)snprintf(t, cap, "{\"version\":\"%u\",\"routes\":[",
                                version);
    for (size_t k = 0; k < n; k++) {
        if (k)
            t[len++] = k % 7 ? ',' : '\n';
        if (k % 7 == 0 && k)
            t[len++] = ',';
        len += big_route(t + len, cap - len, ids[k], vars[k]);
    }
    snprintf(t + len, cap - len, bare ? "]" : "]}");
    return t;
}

/* Apply `doc` to `keep` and to a fresh router: the same outcome, errors,
 * diff and routes; returns how many of keep's routes after the apply are
 * the very objects it held before. */
static size_t apply_both(sy_router *keep, const char *doc) {
    sy_router *fresh = new_router(false, 1);
    sy_snapshot *before = sy_router_acquire(keep);
    sy_error e1, e2;
    sy_report *r1 = NULL, *r2 = NULL;
    int rc1 = apply(keep, "main", doc, &r1, &e1);
    int rc2 = apply(fresh, "main", doc, &r2, &e2);
    ck_assert_int_eq(rc1, rc2);
    size_t shared = 0;
    if (rc1) {
        ck_assert_str_eq(e1.path, e2.path);
        ck_assert_str_eq(e1.message, e2.message);
        ck_assert_uint_eq(e1.line, e2.line);
        ck_assert_uint_eq(e1.column, e2.column);
        ck_assert_uint_eq(e1.offset, e2.offset);
    } else {
        check_equal(keep, fresh);
        /* the source's status: the checksum hashed along with the spans
         * is the hash of the whole text */
        sy_source_status s1, s2;
        ck_assert_int_eq(sy_router_source_status(keep, 0, &s1, &e1), 0);
        ck_assert_int_eq(sy_router_source_status(fresh, 0, &s2, &e2), 0);
        ck_assert_uint_eq(s1.checksum, s2.checksum);
        sy_document *pd = NULL;
        ck_assert_int_eq(sy_document_parse(doc, strlen(doc), NULL, &pd, &e2),
                         0);
        ck_assert_uint_eq(s1.checksum, sy_document_checksum(pd));
        sy_document_free(pd);
        ck_assert_uint_eq(s1.fingerprint, s2.fingerprint);
        ck_assert_str_eq(s1.version, s2.version);
        sy_snapshot *after = sy_router_acquire(keep);
        for (size_t i = 0; i < sy_snapshot_route_count(after); i++) {
            const sy_route *x = sy_snapshot_route_at(after, i);
            shared += sy_snapshot_find_route(before, sy_route_id(x), NULL) == x;
        }
        sy_snapshot_release(after);
    }
    sy_snapshot_release(before);
    sy_report_free(r1);
    sy_report_free(r2);
    sy_router_free(fresh);
    return shared;
}

#define BIG 400

START_TEST(large_document_edits_match_a_fresh_router) {
    sy_router *keep = new_router(false, 1);
    size_t ids[BIG + 64];
    unsigned vars[BIG + 64] = {0};
    size_t n = BIG;
    for (size_t i = 0; i < n; i++)
        ids[i] = i;
    char *d = big_doc(ids, vars, n, false, 1);
    ck_assert_uint_eq(apply_both(keep, d), 0);
    free(d);
    /* one route changed in the middle: every other one shared */
    sy_report *rep;
    sy_error err;
    vars[200] = 1;
    d = big_doc(ids, vars, n, false, 2);
    ck_assert_uint_eq(apply_both(keep, d), n - 1);
    ck_assert_int_eq(apply(keep, "main", d, &rep, &err), 0);
    ck_assert(sy_report_skipped(rep)); /* same bytes: skipped */
    sy_report_free(rep);
    free(d);
    /* 40 routes inserted at the front: the guesses follow the shift */
    memmove(ids + 40, ids, n * sizeof *ids);
    memmove(vars + 40, vars, n * sizeof *vars);
    for (size_t i = 0; i < 40; i++)
        ids[i] = 1000 + i, vars[i] = 0;
    n += 40;
    d = big_doc(ids, vars, n, false, 3);
    ck_assert_uint_eq(apply_both(keep, d), n - 40);
    free(d);
    /* 30 removed from the middle, one moved far, one edited */
    memmove(ids + 100, ids + 130, (n - 130) * sizeof *ids);
    memmove(vars + 100, vars + 130, (n - 130) * sizeof *vars);
    n -= 30;
    size_t t = ids[5];
    memmove(ids + 5, ids + 6, (n - 6) * sizeof *ids);
    ids[n - 1] = t;
    unsigned tv = vars[5];
    memmove(vars + 5, vars + 6, (n - 6) * sizeof *vars);
    vars[n - 1] = tv;
    vars[300] ^= 1;
    d = big_doc(ids, vars, n, false, 4);
    ck_assert_uint_eq(apply_both(keep, d), n - 1);
    free(d);
    /* reversed: nothing where it was (the by-bytes table finds them) */
    for (size_t i = 0; i < n / 2; i++) {
        size_t x = ids[i];
        ids[i] = ids[n - 1 - i];
        ids[n - 1 - i] = x;
        unsigned v = vars[i];
        vars[i] = vars[n - 1 - i];
        vars[n - 1 - i] = v;
    }
    d = big_doc(ids, vars, n, false, 5);
    ck_assert_uint_eq(apply_both(keep, d), n);
    free(d);
    /* an unchanged route's bytes twice: a duplicate id, named by path */
    ids[250] = ids[249];
    vars[250] = vars[249];
    d = big_doc(ids, vars, n, false, 6);
    ck_assert_int_eq(apply(keep, "main", d, NULL, &err), SY_EDUPLICATE);
    ck_assert_str_eq(err.path, "routes[250].id");
    apply_both(keep, d);
    free(d);
    ids[250] = 5000;
    /* a syntax error after many known routes: located as a fresh scan
     * locates it (line, column, offset) */
    d = big_doc(ids, vars, n, false, 7);
    char *bad = strstr(d, "\"b5000\"");
    ck_assert_ptr_nonnull(bad);
    bad[0] = '\'';
    ck_assert_int_eq(apply(keep, "main", d, NULL, &err), SY_ESYNTAX);
    ck_assert_uint_gt(err.line, 1);
    apply_both(keep, d);
    bad[0] = '"';
    ck_assert_uint_eq(apply_both(keep, d), n - 1);
    free(d);
    /* the same routes as a root array: other bytes around, same routes */
    d = big_doc(ids, vars, n, true, 0);
    apply_both(keep, d);
    free(d);
    sy_router_free(keep);
}
END_TEST

/* A route whose nesting fits under the depth limit in a root array but not
 * in an envelope (one level deeper): its bytes, accepted in the array, are
 * not taken as checked in the envelope. */
START_TEST(known_bytes_are_checked_again_one_level_deeper) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.limits.max_depth = 5;
    sy_router *r;
    sy_error err;
    ck_assert_int_eq(sy_router_new(&o, &r, &err), 0);
    ck_assert_int_eq(sy_router_add_source(r, "main", &err), 0);
    /* route object (2) > metadata (3) > a (4) > b (5): depth 5 in [ ] */
    const char *route = "{\"id\":\"deep\",\"uri\":\"http://h:80\","
                        "\"metadata\":{\"a\":{\"b\":[1]}}}";
    char arr[256], env[256];
    snprintf(arr, sizeof arr, "[%s]", route);
    snprintf(env, sizeof env, "{\"version\":\"2\",\"routes\":[%s]}", route);
    ck_assert_int_eq(apply(r, "main", arr, NULL, &err), 0);
    ck_assert_int_eq(apply(r, "main", env, NULL, &err), SY_ELIMIT);
    /* as a router that never saw those bytes says it */
    sy_router *fresh;
    sy_error e2;
    ck_assert_int_eq(sy_router_new(&o, &fresh, &e2), 0);
    ck_assert_int_eq(sy_router_add_source(fresh, "main", &e2), 0);
    ck_assert_int_eq(apply(fresh, "main", env, NULL, &e2), SY_ELIMIT);
    ck_assert_str_eq(err.message, e2.message);
    ck_assert_uint_eq(err.offset, e2.offset);
    ck_assert_uint_gt(err.offset, 0);
    sy_router_free(fresh);
    sy_router_free(r);
}
END_TEST

/* A full history lends its oldest buffer to the newest copy: documents of
 * other lengths each way, every kept one rolled back to exactly. */
START_TEST(after_a_rollback_routes_are_shared_by_meaning_then_by_bytes) {
    sy_router *r = new_router(false, 1);
    char *a = make_doc("1", N, NONE, NONE);
    char *b = make_doc("2", N, 17, NONE);
    char *a3 = make_doc("3", N, NONE, NONE);
    char *a4 = make_doc("4", N, NONE, NONE);
    sy_error err;
    ck_assert_int_eq(apply(r, "main", a, NULL, &err), 0);
    ck_assert_int_eq(apply(r, "main", b, NULL, &err), 0);
    ck_assert_int_eq(sy_router_rollback(r, "main", "1", NULL, &err), 0);
    /* no parse, no memo: no route is known by its bytes now */
    ck_assert_uint_eq(memo_of(r, "main", 0).span_len, 0);
    const sy_route *before[N];
    char id[16];
    for (size_t i = 0; i < N; i++) {
        snprintf(id, sizeof id, "r%zu", i);
        before[i] = live(r, id);
    }
    /* the same routes again: shared by their meaning, and the memo back */
    sy_report *rep;
    ck_assert_int_eq(apply(r, "main", a3, &rep, &err), 0);
    ck_assert_uint_eq(sy_diff_unchanged_count(sy_report_diff(rep)), N);
    sy_report_free(rep);
    for (size_t i = 0; i < N; i++) {
        snprintf(id, sizeof id, "r%zu", i);
        ck_assert_ptr_eq(live(r, id), before[i]);
        ck_assert_uint_gt(memo_of(r, "main", i).span_len, 0);
    }
    /* and then by their bytes */
    ck_assert_int_eq(apply(r, "main", a4, &rep, &err), 0);
    ck_assert_uint_eq(sy_diff_unchanged_count(sy_report_diff(rep)), N);
    sy_report_free(rep);
    for (size_t i = 0; i < N; i++) {
        snprintf(id, sizeof id, "r%zu", i);
        ck_assert_ptr_eq(live(r, id), before[i]);
        ck_assert_uint_gt(memo_of(r, "main", i).span_len, 0);
    }
    free(a);
    free(b);
    free(a3);
    free(a4);
    sy_router_free(r);
}
END_TEST

START_TEST(history_keeps_every_document_when_buffers_are_reused) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.history = 3;
    sy_router *r;
    sy_error err;
    ck_assert_int_eq(sy_router_new(&o, &r, &err), 0);
    ck_assert_int_eq(sy_router_add_source(r, "main", &err), 0);
    size_t ids[64];
    unsigned vars[64] = {0};
    for (size_t i = 0; i < 64; i++)
        ids[i] = i;
    static const size_t counts[] = {10, 60, 3, 40, 64, 1, 20};
    for (size_t k = 0; k < 7; k++) {
        char *d = big_doc(ids, vars, counts[k], false, (unsigned)k);
        ck_assert_int_eq(apply(r, "main", d, NULL, &err), 0);
        free(d);
    }
    for (size_t k = 4; k < 7; k++) {
        char v[8];
        snprintf(v, sizeof v, "%zu", k);
        ck_assert_int_eq(sy_router_rollback(r, "main", v, NULL, &err), 0);
        sy_snapshot *s = sy_router_acquire(r);
        ck_assert_uint_eq(sy_snapshot_route_count(s), counts[k]);
        sy_snapshot_release(s);
    }
    ck_assert_int_eq(sy_router_rollback(r, "main", "3", NULL, &err),
                     SY_ENOTFOUND);
    sy_router_free(r);
}
END_TEST

/* The memo of the last apply (sy__source.memo) is used only while the
 * source's routes are that apply's: after one-route changes, inside change
 * sets that apply twice, and after a failed commit, every apply still
 * gives what a fresh router gives for the same document. */
static void commit_set(sy_router *r, const char *d1, const char *rm,
                       const char *d2, const char *bad_version, int want) {
    sy_change_set *cs;
    sy_error err;
    ck_assert_int_eq(sy_change_set_new(r, &cs, &err), 0);
    ck_assert_int_eq(sy_change_set_apply(cs, "main", d1, strlen(d1), &err), 0);
    if (rm)
        ck_assert_int_eq(sy_change_set_remove_route(cs, rm, &err), 0);
    if (d2)
        ck_assert_int_eq(sy_change_set_apply(cs, "main", d2, strlen(d2), &err),
                         0);
    if (bad_version)
        ck_assert_int_eq(sy_change_set_rollback(cs, "main", bad_version, &err),
                         0);
    ck_assert_int_eq(sy_router_commit(r, cs, NULL, &err), want);
    sy_change_set_free(cs);
}

START_TEST(the_memo_is_used_only_for_the_routes_it_describes) {
    sy_router *keep = new_router(false, 1);
    size_t ids[200];
    unsigned vars[200] = {0};
    for (size_t i = 0; i < 200; i++)
        ids[i] = i;
    char *d1 = big_doc(ids, vars, 200, false, 1);
    ck_assert_uint_eq(apply_both(keep, d1), 0);
    sy_error err;
    /* a route removed, then the document again: it comes back */
    ck_assert_int_eq(sy_router_remove_route(keep, "b50", &err), 0);
    char *d2 = big_doc(ids, vars, 200, false, 2);
    ck_assert_uint_eq(apply_both(keep, d2), 199);
    /* a route replaced by an upsert, one disabled: the document's win */
    char up[160];
    big_route(up, sizeof up, 60, 3);
    ck_assert_int_eq(sy_router_upsert_route(keep, "main", up, strlen(up), &err),
                     0);
    ck_assert_int_eq(sy_router_set_route_enabled(keep, "b70", false, &err), 0);
    ck_assert_int_eq(sy_router_set_route_enabled(keep, "b71", false, &err), 0);
    ck_assert_int_eq(sy_router_set_route_enabled(keep, "b71", true, &err), 0);
    char *d3 = big_doc(ids, vars, 200, false, 3);
    /* b60 and b70 compiled again; b71's enabled copy has the meaning of
     * its bytes: shared by fingerprint */
    ck_assert_uint_eq(apply_both(keep, d3), 198);
    /* one commit: an apply, a remove, another apply of the same source */
    vars[10] = 1;
    char *d4 = big_doc(ids, vars, 200, false, 4);
    vars[10] = 0;
    vars[20] = 2;
    char *d5 = big_doc(ids, vars, 200, false, 5);
    commit_set(keep, d4, "b30", d5, NULL, 0);
    apply_both(keep, d5); /* the same bytes: skipped by both */
    ck_assert_uint_eq(apply_both(keep, d1), 199);
    /* a commit that fails after its apply: nothing of it stays */
    commit_set(keep, d5, NULL, NULL, "nope", SY_ENOTFOUND);
    ck_assert_uint_eq(apply_both(keep, d4), 199);
    free(d1);
    free(d2);
    free(d3);
    free(d4);
    free(d5);
    sy_router_free(keep);
}
END_TEST

/* One-route changes keep the memo for every route they did not touch: a
 * route replaced (or removed) loses its entry, so a later route at the
 * freed address is never taken for the old bytes. Many rounds of
 * replace-then-apply give the allocator every chance to reuse addresses. */
START_TEST(one_route_changes_forget_only_their_route_in_the_memo) {
    sy_router *keep = new_router(false, 1);
    size_t ids[200];
    unsigned vars[200] = {0};
    for (size_t i = 0; i < 200; i++)
        ids[i] = i;
    char *d = big_doc(ids, vars, 200, false, 1);
    ck_assert_uint_eq(apply_both(keep, d), 0);
    free(d);
    sy_error err;
    for (unsigned round = 0; round < 60; round++) {
        size_t k = (round * 37) % 200;
        char up[160];
        /* replaced six times: a freed copy's address is there to take */
        for (unsigned v = 1; v <= 6; v++) {
            big_route(up, sizeof up, k, (round + v) % 3 + 1);
            ck_assert_int_eq(
                sy_router_upsert_route(keep, "main", up, strlen(up), &err), 0);
        }
        char id[16];
        snprintf(id, sizeof id, "b%zu", (k + 1) % 200);
        if (round % 2)
            ck_assert_int_eq(sy_router_remove_route(keep, id, &err), 0);
        /* the document as first applied: the replaced route (and the
         * removed one) compiled again, every other one shared */
        d = big_doc(ids, vars, 200, false, 2 + round);
        ck_assert_uint_eq(apply_both(keep, d), round % 2 ? 198 : 199);
        free(d);
    }
    sy_router_free(keep);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("reuse");
    TCase *tc = tcase_create("reuse");
    tcase_add_test(tc, unchanged_bytes_share_the_live_route);
    tcase_add_test(tc, moved_bytes_keep_the_route_and_take_the_new_rank);
    tcase_add_test(tc, duplicate_id_from_a_reused_span_is_an_error);
    tcase_add_test(tc, whitespace_change_falls_back_to_the_fingerprint);
    tcase_add_test(tc,
                   disabled_or_upserted_route_is_not_taken_for_its_old_bytes);
    tcase_add_test(tc, same_bytes_in_another_source_are_not_shared);
    tcase_add_test(tc, invalid_route_is_reported_again);
    tcase_add_test(tc, large_document_edits_match_a_fresh_router);
    tcase_add_test(tc, known_bytes_are_checked_again_one_level_deeper);
    tcase_add_test(tc, the_memo_is_used_only_for_the_routes_it_describes);
    tcase_add_test(tc, one_route_changes_forget_only_their_route_in_the_memo);
    tcase_add_test(tc, history_keeps_every_document_when_buffers_are_reused);
    tcase_add_test(tc,
                   after_a_rollback_routes_are_shared_by_meaning_then_by_bytes);
    tcase_add_loop_test(tc, random_edits_match_a_fresh_router, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return sy_test_run(suite());
}
