/*
 * test_change_sets.c - a change set does what the same changes made as
 * single calls do (include/switchyard.h: "each change seeing the ones
 * before it"), differentially: random sets of documents, rollbacks (to the
 * previous document or a named version), one-route upserts, removes and
 * enables and instance lists, on two sources, are committed on router A
 * and made one by one on router B. After a commit that holds, A and B hold
 * the same routes, instances and source states (and later rollbacks, which
 * read the kept history, keep agreeing); a set that fails fails at the
 * first change whose single call fails, with the same code and path, and
 * publishes nothing ("change N: " prefixed). Seeds: a fixed list plus
 * $SY_SEED; sizes scale with $SY_STRESS_SCALE.
 */
#include "testutil.h"

#include <switchyard.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rnext(rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static unsigned below(rng *r, unsigned n) {
    return (unsigned)(rnext(r) % n);
}

enum { APPLY, ROLLBACK, UPSERT, REMOVE, ENABLE, INSTANCES, KINDS };

/* One change, its text owned. */
typedef struct change {
    int kind;
    char name[16];  /* source, route id or service */
    char text[512]; /* document, route, or rollback version ("" = NULL) */
    bool enabled;
    size_t ninst;
} change;

static const char *const sources[2] = {"a", "b"};

/* The document of version v of source s: deterministic, so a version
 * names one content (rollback by version means something); it holds
 * routes <s>0..<s>4 in a subset and order drawn from v. */
static void document(char *out, size_t cap, int s, unsigned v) {
    rng g = {0x5eed0000u + 977u * v + (unsigned)s};
    int n = snprintf(out, cap, "{\"version\":\"v%u\",\"routes\":[", v);
    unsigned routes = 1 + below(&g, 4), first = below(&g, 5);
    for (unsigned i = 0; i < routes; i++) {
        unsigned k = (first + i * 2) % 5;
        n += snprintf(out + n, cap - (size_t)n,
                      "%s{\"id\":\"%s%u\",\"uri\":\"%s\",\"order\":%u,"
                      "\"predicates\":[\"Path=/%s/%u/%u\"]}",
                      i ? "," : "", sources[s], k,
                      below(&g, 2) ? "lb://svc" : "http://h:1", below(&g, 3),
                      sources[s], k, below(&g, 3));
    }
    snprintf(out + n, cap - (size_t)n, "]}");
}

static void draw(rng *g, change *c) {
    memset(c, 0, sizeof *c);
    c->kind = (int)below(g, KINDS);
    int s = (int)below(g, 2);
    switch (c->kind) {
    case APPLY:
        snprintf(c->name, sizeof c->name, "%s", sources[s]);
        document(c->text, sizeof c->text, s, below(g, 6));
        break;
    case ROLLBACK:
        snprintf(c->name, sizeof c->name, "%s", sources[s]);
        if (below(g, 2))
            snprintf(c->text, sizeof c->text, "v%u", below(g, 6));
        break;
    case UPSERT:
        snprintf(c->name, sizeof c->name, "%s", sources[s]);
        /* now and then another source's id: a duplicate */
        snprintf(c->text, sizeof c->text,
                 "{\"id\":\"%s%u\",\"uri\":\"http://u:%u\",\"predicates\":"
                 "[\"Path=/u/%u\"]}",
                 sources[below(g, 8) ? s : 1 - s], below(g, 7),
                 1 + below(g, 3), below(g, 4));
        break;
    case REMOVE:
    case ENABLE:
        snprintf(c->name, sizeof c->name, "%s%u", sources[s], below(g, 7));
        c->enabled = below(g, 2);
        break;
    default:
        snprintf(c->name, sizeof c->name, "svc");
        c->ninst = below(g, 4);
        break;
    }
}

static sy_instance inst[3] = {
    {"i0", "10.0.0.1", 80, false, 1, SY_INSTANCE_UP, NULL, 0},
    {"i1", "10.0.0.2", 80, false, 2, SY_INSTANCE_UP, NULL, 0},
    {"i2", "10.0.0.3", 80, false, 1, SY_INSTANCE_DRAINING, NULL, 0}};

static const char *opt(const char *s) {
    return *s ? s : NULL;
}

static int single(sy_router *r, const change *c, sy_error *e) {
    switch (c->kind) {
    case APPLY:
        return sy_router_apply(r, c->name, c->text, strlen(c->text), NULL, e);
    case ROLLBACK: return sy_router_rollback(r, c->name, opt(c->text), NULL, e);
    case UPSERT:
        return sy_router_upsert_route(r, c->name, c->text, strlen(c->text), e);
    case REMOVE: return sy_router_remove_route(r, c->name, e);
    case ENABLE: return sy_router_set_route_enabled(r, c->name, c->enabled, e);
    default:
        return sy_router_set_instances(r, c->name, inst, c->ninst, NULL, e);
    }
}

static void stage(sy_change_set *cs, const change *c) {
    sy_error e;
    int rc;
    switch (c->kind) {
    case APPLY:
        rc = sy_change_set_apply(cs, c->name, c->text, strlen(c->text), &e);
        break;
    case ROLLBACK:
        rc = sy_change_set_rollback(cs, c->name, opt(c->text), &e);
        break;
    case UPSERT:
        rc = sy_change_set_upsert_route(cs, c->name, c->text, strlen(c->text),
                                        &e);
        break;
    case REMOVE: rc = sy_change_set_remove_route(cs, c->name, &e); break;
    case ENABLE:
        rc = sy_change_set_set_route_enabled(cs, c->name, c->enabled, &e);
        break;
    default:
        rc = sy_change_set_set_instances(cs, c->name, inst, c->ninst, &e);
        break;
    }
    ck_assert_msg(rc == 0, "staging: %s", e.message);
}

static sy_router *fresh(void) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.history = 4; /* small: sets that push past it drop the oldest */
    sy_router *r;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    for (int s = 0; s < 2; s++)
        ck_assert_int_eq(sy_router_add_source(r, sources[s], NULL), 0);
    return r;
}

/* The changes B has taken so far (to rebuild B after a failed set). */
typedef struct log_t {
    change *v;
    size_t n, cap;
} log_t;

static void log_add(log_t *l, const change *c) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        ck_assert_ptr_nonnull(l->v);
    }
    l->v[l->n++] = *c;
}

static uint64_t fingerprint(sy_router *r) {
    sy_snapshot *s = sy_router_acquire(r);
    uint64_t f = sy_snapshot_fingerprint(s);
    sy_snapshot_release(s);
    return f;
}

/* A and B hold the same routes, instances and source states. */
static void same(sy_router *a, sy_router *b, uint64_t seed, int round) {
    ck_assert_msg(fingerprint(a) == fingerprint(b),
                  "seed %" PRIu64 " round %d: the set and the single calls "
                  "left different tables",
                  seed, round);
    for (size_t i = 0; i < 2; i++) {
        sy_source_status x, y;
        ck_assert_int_eq(sy_router_source_status(a, i, &x, NULL), 0);
        ck_assert_int_eq(sy_router_source_status(b, i, &y, NULL), 0);
        ck_assert_msg(strcmp(x.version, y.version) == 0 &&
                          x.applied == y.applied && x.checksum == y.checksum &&
                          x.fingerprint == y.fingerprint &&
                          x.routes == y.routes,
                      "seed %" PRIu64 " round %d: source %s: set at version "
                      "'%s' (%zu routes), single calls at '%s' (%zu routes)",
                      seed, round, x.name, x.version, x.routes, y.version,
                      y.routes);
    }
}

static void run_seed(uint64_t seed, int rounds) {
    rng g = {seed};
    sy_router *a = fresh(), *b = fresh();
    log_t done = {0};
    int held = 0, failed = 0, rollbacks = 0;
    for (int round = 0; round < rounds; round++) {
        change set[6];
        size_t n = 1 + below(&g, 6);
        sy_change_set *cs;
        ck_assert_int_eq(sy_change_set_new(a, &cs, NULL), 0);
        for (size_t i = 0; i < n; i++) {
            draw(&g, &set[i]);
            stage(cs, &set[i]);
            rollbacks += set[i].kind == ROLLBACK;
        }
        uint64_t before = fingerprint(a);
        sy_report *rep = NULL;
        sy_error ea;
        int rca = sy_router_commit(a, cs, &rep, &ea);
        long at = rca && rep ? sy_report_failed_change(rep) : -1;
        sy_report_free(rep);
        sy_change_set_free(cs);
        /* the same changes as single calls on B, up to the first failure */
        size_t k = 0;
        sy_error eb;
        int rcb = 0;
        for (; k < n && (rcb = single(b, &set[k], &eb)) == 0; k++)
            log_add(&done, &set[k]);
        if (rca == 0) {
            ck_assert_msg(rcb == 0,
                          "seed %" PRIu64 " round %d: the set held, single "
                          "call %zu failed: %s",
                          seed, round, k, eb.message);
            same(a, b, seed, round);
            held++;
            continue;
        }
        failed++;
        ck_assert_msg(rcb != 0 && (long)k == at && rcb == rca &&
                          strcmp(ea.path, eb.path) == 0,
                      "seed %" PRIu64 " round %d: the set failed at change "
                      "%ld (%d, %s: %s), the single calls at %zu (%d, %s: %s)",
                      seed, round, at, rca, ea.path, ea.message, k, rcb,
                      eb.path, rcb ? eb.message : "");
        char prefix[32];
        snprintf(prefix, sizeof prefix, "change %zu ", k);
        ck_assert_msg(strncmp(ea.message, prefix, strlen(prefix)) == 0,
                      "no '%s' prefix: %s", prefix, ea.message);
        ck_assert_uint_eq(fingerprint(a), before);
        /* B took changes 0..k-1 that A did not: B again from its log
         * without them */
        done.n -= k;
        sy_router_free(b);
        b = fresh();
        for (size_t i = 0; i < done.n; i++)
            ck_assert_int_eq(single(b, &done.v[i], &eb), 0);
        same(a, b, seed, round);
    }
    /* both outcomes and rollbacks were exercised */
    ck_assert_msg(held > rounds / 5 && failed > 0 && rollbacks > rounds / 4,
                  "seed %" PRIu64 ": %d held, %d failed, %d rollbacks", seed,
                  held, failed, rollbacks);
    free(done.v);
    sy_router_free(a);
    sy_router_free(b);
}

START_TEST(random_sets_equal_the_same_single_calls) {
    static const uint64_t seeds[] = {1, 2, 3, 42, 4242, 99991};
    int rounds = 150 * sy_test_scale();
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++)
        run_seed(seeds[i], rounds);
    const char *env = getenv("SY_SEED");
    if (env && *env) {
        uint64_t s = strtoull(env, NULL, 0);
        printf("# seed %" PRIu64 "\n", s);
        run_seed(s, rounds);
    }
}
END_TEST

/* The review's case: history v1 v2 v3; the set "rollback, rollback" ends
 * where the two single calls end: at v3 (the first goes back to v2, the
 * second back to what was current before it, v3). */
START_TEST(two_rollbacks_in_a_set_end_where_two_single_calls_end) {
    sy_router *r = fresh();
    for (unsigned v = 1; v <= 3; v++) {
        char doc[512];
        document(doc, sizeof doc, 0, v);
        ck_assert_int_eq(sy_router_apply(r, "a", doc, strlen(doc), NULL, NULL),
                         0);
    }
    sy_change_set *cs;
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    ck_assert_int_eq(sy_change_set_rollback(cs, "a", NULL, NULL), 0);
    ck_assert_int_eq(sy_change_set_rollback(cs, "a", NULL, NULL), 0);
    sy_error e;
    ck_assert_msg(sy_router_commit(r, cs, NULL, &e) == 0, "%s", e.message);
    sy_change_set_free(cs);
    sy_source_status st;
    ck_assert_int_eq(sy_router_source_status(r, 0, &st, NULL), 0);
    ck_assert_str_eq(st.version, "v3");
    /* and a rollback by name finds a version an apply of the same set
     * brought */
    char doc[512];
    document(doc, sizeof doc, 0, 5);
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    ck_assert_int_eq(sy_change_set_apply(cs, "a", doc, strlen(doc), NULL), 0);
    ck_assert_int_eq(sy_change_set_apply(cs, "a", "[]", 2, NULL), 0);
    ck_assert_int_eq(sy_change_set_rollback(cs, "a", "v5", NULL), 0);
    ck_assert_msg(sy_router_commit(r, cs, NULL, &e) == 0, "%s", e.message);
    sy_change_set_free(cs);
    ck_assert_int_eq(sy_router_source_status(r, 0, &st, NULL), 0);
    ck_assert_str_eq(st.version, "v5");
    sy_router_free(r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("change_sets");
    TCase *tc = tcase_create("change_sets");
    tcase_add_test(tc, two_rollbacks_in_a_set_end_where_two_single_calls_end);
    tcase_add_test(tc, random_sets_equal_the_same_single_calls);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
