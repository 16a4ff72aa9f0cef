/*
 * bench.c - switchyard-bench, the benchmark program of docs/performance.md.
 *
 * Prints one line per case and table size, `name routes value unit`, and
 * comment lines starting with '#'. Arguments select cases: a full case name
 * runs that case, any other argument runs every case whose name starts with
 * it (`match/` runs all match cases); no argument runs everything.
 *
 * Method: every table is generated as a route document and applied to a
 * real router; requests are built beforehand; a timed batch is a loop of
 * calls between two CLOCK_MONOTONIC reads, sized by calibration so one
 * batch lasts tens of milliseconds; the figure is the median of several
 * batches. One sy_match_ctx per thread, reused.
 *
 * Every lookup table is first cross-checked: the indexed matcher and the
 * linear scan must agree on every checked request. Any disagreement is a
 * bug, so the program then exits with status 1 (after printing all the
 * figures).
 */
#include "bench_run.h"
#include "bench_tables.h"
#include "bench_util.h"
#include "hooks.h"
#ifdef SY_BENCH_HAVE_R3
#include "bench_r3.h"
#endif
#include "base/alloc_small.h"
#include "base/util.h"
#include "def/def.h"
#include "router/router_int.h"
#include "service/service.h"
#include "snapshot/publish.h"
#include "snapshot/snapshot.h"

#include <cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#ifndef SY_BENCH_DATA_DIR
#define SY_BENCH_DATA_DIR "tests/data"
#endif

#define SCAN_REPS 5
#define NREQ 8192  /* distinct requests per large table */
#define HOT_REQS 8 /* match-hot/: the first few requests, repeated */

/* Requests on which the index and the scan disagreed, over the whole run:
 * the program exits non-zero when any did. */
size_t g_differ;

/* ---------------------------------------------------------------- */
/* Case selection and output                                         */
/* ---------------------------------------------------------------- */

static const char *const case_names[] = {
    "memory/route",
    "match/github",
    "match-hot/github",
    "scan/github",
    "peer/r3-github",
    "match/static",
    "match-hot/static",
    "scan/static",
    "match/param",
    "match-hot/param",
    "scan/param",
    "match/prefix",
    "match-hot/prefix",
    "scan/prefix",
    "match/hosts",
    "match-hot/hosts",
    "scan/hosts",
    "match/mixed",
    "match-hot/mixed",
    "scan/mixed",
    "compile/json",
    "update/one-route",
    "update/one-route-max",
    "update/instances",
    "update/document-one-changed",
    "snapshot/acquire-release",
    "snapshot/acquire-release-2t",
    "snapshot/acquire-release-storm",
    "select/round-robin",
    "select/random",
    "select/hash",
    "scale/memory",
    "scale/compile",
    "scale/match",
    "scale/one-route-max",
    "scale/publish-max-readers",
    "scale/publish-grow-max",
    "policy/ratelimit",
    "policy/ratelimit-100k-keys",
    "policy/breaker",
    "policy/breaker-100k-names",
    "policy/breaker-100k-match-only",
    "proxy/lb-strip",
};
#define NCASES (sizeof case_names / sizeof case_names[0])

static int g_argc;
static char **g_argv;

static bool is_case_name(const char *s) {
    for (size_t i = 0; i < NCASES; i++)
        if (strcmp(case_names[i], s) == 0)
            return true;
    return false;
}

/* Does argument `arg` select case `name`? */
static bool arg_selects(const char *arg, const char *name) {
    if (strcmp(arg, name) == 0)
        return true;
    return !is_case_name(arg) && strncmp(arg, name, strlen(arg)) == 0;
}

bool want(const char *name) {
    if (g_argc <= 1)
        return true;
    for (int i = 1; i < g_argc; i++)
        if (arg_selects(g_argv[i], name))
            return true;
    return false;
}

void result(const char *name, size_t routes, double value, const char *unit) {
    /* a ratio with two decimals: one would read 1.34 as "1.3", which a
     * target of 1.3 would take for met */
    if (!strcmp(unit, "x") && value < 10)
        printf("%s %zu %.2f %s\n", name, routes, value, unit);
    else if (value >= 100)
        printf("%s %zu %.0f %s\n", name, routes, value, unit);
    else
        printf("%s %zu %.1f %s\n", name, routes, value, unit);
    fflush(stdout);
}

void comment(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

void fail(const char *what, int rc, const sy_error *e) {
    comment("SKIPPED %s: %s (%d)%s%s%s%s", what, sy_strerror(rc), rc,
            e && e->message[0] ? ": " : "", e ? e->message : "",
            e && e->path[0] ? " at " : "", e ? e->path : "");
}

/* ---------------------------------------------------------------- */
/* Timing                                                            */
/* ---------------------------------------------------------------- */

/* The process's CPU time in the kernel so far, in ns (0 when unknown):
 * the cases that read it run one thread, so a difference is the time
 * the kernel spent for that thread (page faults, unmapping). */
uint64_t process_sys_ns(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_stime.tv_sec * 1000000000u +
           (uint64_t)ru.ru_stime.tv_usec * 1000u;
}

uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The median thread CPU time per operation of the last measure() call:
 * far below the wall-clock figure means the thread was preempted (a busy
 * machine), not that the code is slow. */
double g_last_cpu_ns;

/* The number of calls of fn that takes at least batch_ns. */
uint64_t calibrate(batch_fn fn, void *arg, uint64_t batch_ns) {
    uint64_t n = 1;
    for (;;) {
        uint64_t t0 = bench_now_ns();
        fn(arg, n);
        uint64_t dt = bench_now_ns() - t0;
        if (dt >= batch_ns || n >= (1ull << 34))
            break;
        double scale = dt ? 1.25 * (double)batch_ns / (double)dt : 16;
        if (scale > 16)
            scale = 16;
        if (scale < 2)
            scale = 2;
        n = (uint64_t)((double)n * scale) + 1;
    }
    return n;
}

double timed_batch(batch_fn fn, void *arg, uint64_t n) {
    uint64_t t0 = bench_now_ns();
    fn(arg, n);
    return (double)(bench_now_ns() - t0) / (double)n;
}

/* Calibrate a batch size so one batch lasts at least `batch_ns`, then time
 * `reps` batches and return the median ns per operation. */
double measure(batch_fn fn, void *arg, uint64_t batch_ns, int reps,
               uint64_t *batch_out) {
    uint64_t n = calibrate(fn, arg, batch_ns);
    double v[16], cpu[16];
    if (reps > 16)
        reps = 16;
    for (int r = 0; r < reps; r++) {
        uint64_t c0 = thread_cpu_ns();
        uint64_t t0 = bench_now_ns();
        fn(arg, n);
        v[r] = (double)(bench_now_ns() - t0) / (double)n;
        cpu[r] = (double)(thread_cpu_ns() - c0) / (double)n;
    }
    if (batch_out)
        *batch_out = n;
    g_last_cpu_ns = bench_median(cpu, (size_t)reps);
    return bench_median(v, (size_t)reps);
}

/* ---------------------------------------------------------------- */
/* Routers                                                           */
/* ---------------------------------------------------------------- */

int router_fresh(sy_router **out, sy_error *e) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    /* the scale/ document of 1,000,000 routes is ~82 MiB */
    o.limits.max_document_bytes = 256u << 20;
    int rc = sy_router_new(&o, out, e);
    if (rc)
        return rc;
    rc = sy_router_add_source(*out, "bench", e);
    if (rc) {
        sy_router_free(*out);
        *out = NULL;
    }
    return rc;
}

void table_free(table *t) {
    if (t->router)
        sy_router_free(t->router);
    bench_buf_free(&t->doc);
    bench_reqs_free(&t->reqs);
    memset(t, 0, sizeof *t);
}

/* Apply t->doc to a fresh router. Returns 0 or prints why not. */
int table_load(table *t, const char *what) {
    sy_error e;
    memset(&e, 0, sizeof e);
    int rc = router_fresh(&t->router, &e);
    if (rc) {
        fail(what, rc, &e);
        return rc;
    }
    sy_report *rep = NULL;
    uint64_t t0 = bench_now_ns();
    rc = sy_router_apply(t->router, "bench", t->doc.ptr, t->doc.len, &rep, &e);
    t->apply_ms = (double)(bench_now_ns() - t0) / 1e6;
    if (rep)
        sy_report_free(rep);
    if (rc) {
        fail(what, rc, &e);
        sy_router_free(t->router);
        t->router = NULL;
        return rc;
    }
    sy_snapshot *s = sy_router_acquire(t->router);
    t->routes = sy_snapshot_route_count(s);
    sy_snapshot_release(s);
    return 0;
}

/* ---------------------------------------------------------------- */
/* Lookups                                                           */
/* ---------------------------------------------------------------- */

void run_match(void *arg, uint64_t count) {
    lookups *l = arg;
    const sy_request *reqs = l->rs->reqs;
    size_t n = l->rs->n, pos = 0;
    uint64_t hits = 0, errors = 0;
    for (uint64_t i = 0; i < count; i++) {
        sy_match *m = NULL;
        errors += sy_snapshot_match(l->snap, l->ctx, &reqs[pos], &m) != 0;
        hits += m != NULL;
        if (++pos == n)
            pos = 0;
    }
    l->hits += hits;
    l->errors += errors;
}

static void run_scan(void *arg, uint64_t count) {
    lookups *l = arg;
    const sy_request *reqs = l->rs->reqs;
    size_t n = l->rs->n, pos = 0;
    uint64_t hits = 0, errors = 0;
    for (uint64_t i = 0; i < count; i++) {
        sy_match *m = NULL;
        errors +=
            sy_snapshot_match_linear(l->snap, l->ctx, &reqs[pos], &m) != 0;
        hits += m != NULL;
        if (++pos == n)
            pos = 0;
    }
    l->hits += hits;
    l->errors += errors;
}

/* Compare the indexed matcher with the linear scan on up to `max`
 * requests; returns the number of requests where they differ and counts
 * the hits of the indexed matcher. */
size_t cross_check(const sy_snapshot *s, sy_match_ctx *ctx,
                   const bench_reqs *rs, size_t max, size_t *hits) {
    size_t differ = 0;
    *hits = 0;
    for (size_t i = 0; i < rs->n && i < max; i++) {
        sy_match *m = NULL;
        const sy_route *a = NULL, *b = NULL;
        if (sy_snapshot_match(s, ctx, &rs->reqs[i], &m) == 0 && m)
            a = sy_match_route(m);
        m = NULL;
        if (sy_snapshot_match_linear(s, ctx, &rs->reqs[i], &m) == 0 && m)
            b = sy_match_route(m);
        *hits += a != NULL;
        if (a != b) {
            if (differ < 3)
                comment("  differs: %.*s %.*s%s%.*s -> index %s, scan %s",
                        (int)rs->reqs[i].method.len, rs->reqs[i].method.ptr,
                        (int)rs->reqs[i].host.len,
                        rs->reqs[i].host.ptr ? rs->reqs[i].host.ptr : "",
                        rs->reqs[i].host.len ? "" : "",
                        (int)rs->reqs[i].path.len, rs->reqs[i].path.ptr,
                        a ? sy_route_id(a) : "(none)",
                        b ? sy_route_id(b) : "(none)");
            differ++;
        }
    }
    return differ;
}

/* misses/<table>: match/<table> divided by the mean of the run's start
 * and end baselines of one dependent load that misses every cache (a
 * ratio of times, not a count of misses), printed after the end
 * baseline. */
typedef struct miss_note {
    char name[32];
    size_t routes;
    double ns;
} miss_note;
static miss_note g_miss[16];
static size_t g_nmiss;
static double g_load_start, g_load_end;

static void misses_note(const char *name, size_t routes, double ns) {
    if (g_nmiss == sizeof g_miss / sizeof g_miss[0])
        return;
    miss_note *m = &g_miss[g_nmiss++];
    snprintf(m->name, sizeof m->name, "misses/%s", name);
    m->routes = routes;
    m->ns = ns;
}

static void misses_print(void) {
    if (!g_nmiss || g_load_start <= 0 || g_load_end <= 0)
        return;
    double den = (g_load_start + g_load_end) / 2;
    for (size_t i = 0; i < g_nmiss; i++)
        result(g_miss[i].name, g_miss[i].routes, g_miss[i].ns / den, "misses");
    comment("misses/: match/<table> divided by %.1f ns, the mean of this "
            "run's start (%.1f ns) and end (%.1f ns) baselines of one "
            "dependent load missing every cache: a ratio of times, not a "
            "count of cache misses",
            den, g_load_start, g_load_end);
}

/* match/ and match-hot/ figures are timed in rounds (since session 42):
 * the tables stay loaded, and each round times one batch of every case in
 * turn, MATCH_REPS rounds, each batch after an untimed pass over its
 * requests (the warm state of batches run back to back). This VM's speed
 * moved by up to 1.6x within a second or two, which a case timed in one
 * ~0.5 s stretch took as its own; over the rounds' ~6 s every figure is
 * the median of the same stretches as every other's. */
typedef struct round_case {
    char name[64], table[32];
    size_t routes;
    bench_reqs rs; /* the table's requests, or its first HOT_REQS */
    lookups l;
    uint64_t n;
    double v[MATCH_REPS], cpu[MATCH_REPS], scan_ns;
    bool cold; /* match/: noted for misses/ */
} round_case;

enum { MAX_ROUND_CASES = 16, MAX_KEPT = 8 };
static round_case g_rounds[MAX_ROUND_CASES];
static size_t g_nrounds;
static table g_kept[MAX_KEPT]; /* loaded until rounds_run */
static size_t g_nkept;

/* Keep a loaded table for the rounds: it is theirs now (t zeroed). */
static void keep_table(table *t) {
    if (g_nkept == MAX_KEPT) {
        table_free(t);
        return;
    }
    bench_buf_free(&t->doc); /* applied: only the router and requests */
    g_kept[g_nkept++] = *t;
    memset(t, 0, sizeof *t);
}

static round_case *rounds_add(const char *name, const char *tname, table *t,
                              size_t nreqs, bool cold) {
    if (g_nrounds == MAX_ROUND_CASES)
        return NULL;
    round_case *c = &g_rounds[g_nrounds];
    memset(c, 0, sizeof *c);
    sy_error e;
    int rc = sy_match_ctx_new(NULL, &c->l.ctx, &e);
    if (rc) {
        fail(name, rc, &e);
        return NULL;
    }
    g_nrounds++;
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->table, sizeof c->table, "%s", tname);
    c->routes = t->routes;
    c->rs = t->reqs;
    c->rs.n = nreqs < t->reqs.n ? nreqs : t->reqs.n;
    c->l.snap = sy_router_acquire(t->router);
    c->l.rs = &c->rs;
    c->cold = cold;
    c->scan_ns = -1;
    return c;
}

static void rounds_run(void) {
    if (!g_nrounds)
        return;
    for (size_t i = 0; i < g_nrounds; i++)
        g_rounds[i].n = calibrate(run_match, &g_rounds[i].l, MATCH_BATCH_NS);
    for (int r = 0; r < MATCH_REPS; r++)
        for (size_t i = 0; i < g_nrounds; i++) {
            round_case *c = &g_rounds[i];
            run_match(&c->l, c->rs.n); /* the warm pass, untimed */
            uint64_t c0 = thread_cpu_ns();
            c->v[r] = timed_batch(run_match, &c->l, c->n);
            c->cpu[r] = (double)(thread_cpu_ns() - c0) / (double)c->n;
        }
    for (size_t i = 0; i < g_nrounds; i++) {
        round_case *c = &g_rounds[i];
        double ns = bench_median(c->v, MATCH_REPS);
        if (c->l.errors)
            comment("%s: %llu match calls failed", c->name,
                    (unsigned long long)c->l.errors);
        result(c->name, c->routes, ns, "ns");
        comment("%s: %s%zu requests in turn; in %d rounds across the "
                "tables; thread CPU time %.1f ns per lookup",
                c->name, c->cold ? "" : "the first ", c->rs.n, MATCH_REPS,
                bench_median(c->cpu, MATCH_REPS));
        if (c->cold)
            misses_note(c->table, c->routes, ns);
        if (c->scan_ns > 0)
            comment("%s %zu: scan / index = %.0fx", c->table, c->routes,
                    c->scan_ns / ns);
        sy_snapshot_release((sy_snapshot *)c->l.snap);
        sy_match_ctx_free(c->l.ctx);
    }
    g_nrounds = 0;
    for (size_t i = 0; i < g_nkept; i++)
        table_free(&g_kept[i]);
    g_nkept = 0;
}

/* Check a loaded table's index against the scan, time scan/<name> now
 * and register match/<name> and match-hot/<name> for the rounds. */
static void lookup_case(const char *name, table *t, size_t check_max) {
    char mname[64], hname[64], sname[64];
    snprintf(mname, sizeof mname, "match/%s", name);
    snprintf(hname, sizeof hname, "match-hot/%s", name);
    snprintf(sname, sizeof sname, "scan/%s", name);
    sy_match_ctx *ctx = NULL;
    sy_error e;
    int rc = sy_match_ctx_new(NULL, &ctx, &e);
    if (rc) {
        fail(mname, rc, &e);
        return;
    }
    sy_snapshot *s = sy_router_acquire(t->router);
    size_t hits = 0;
    /* SY_BENCH_CHECK=n checks at most n requests against the scan (for
     * runs under callgrind, where the scan of a 100k table is too slow) */
    const char *cap = getenv("SY_BENCH_CHECK");
    if (cap && *cap && strtoul(cap, NULL, 10) < check_max)
        check_max = strtoul(cap, NULL, 10);
    size_t checked = t->reqs.n < check_max ? t->reqs.n : check_max;
    size_t differ = cross_check(s, ctx, &t->reqs, check_max, &hits);
    g_differ += differ;
    comment("%s %zu: applied in %.1f ms, %zu requests; %zu checked against "
            "the scan: %zu hit, %zu differ",
            name, t->routes, t->apply_ms, t->reqs.n, checked, hits, differ);
    round_case *cold =
        want(mname) ? rounds_add(mname, name, t, t->reqs.n, true) : NULL;
    if (want(hname))
        rounds_add(hname, name, t, HOT_REQS, false);
    if (want(sname)) {
        lookups l = {s, ctx, &t->reqs, 0, 0};
        uint64_t batch = 0;
        double ns_scan =
            measure(run_scan, &l, MATCH_BATCH_NS, SCAN_REPS, &batch);
        if (l.errors)
            comment("%s: %llu scan calls failed", sname,
                    (unsigned long long)l.errors);
        result(sname, t->routes, ns_scan, "ns");
        comment("%s: thread CPU time %.1f ns per lookup, %llu lookups per "
                "batch",
                sname, g_last_cpu_ns, (unsigned long long)batch);
        if (cold)
            cold->scan_ns = ns_scan;
    }
    sy_snapshot_release(s);
    sy_match_ctx_free(ctx);
}

static bool want_pair(const char *name) {
    char m[64], h[64], s[64];
    snprintf(m, sizeof m, "match/%s", name);
    snprintf(h, sizeof h, "match-hot/%s", name);
    snprintf(s, sizeof s, "scan/%s", name);
    return want(m) || want(h) || want(s);
}

static void generated_case(const char *name, table_gen gen, size_t n,
                           size_t check_max) {
    if (!want_pair(name))
        return;
    /* SY_BENCH_ROUTES=n runs only the tables of n routes (so a profile,
     * e.g. callgrind's, holds one table of the mixed case alone) */
    const char *only = getenv("SY_BENCH_ROUTES");
    if (only && *only && strtoul(only, NULL, 10) != n)
        return;
    table t;
    memset(&t, 0, sizeof t);
    gen(n, NREQ, &t.doc, &t.reqs);
    if (table_load(&t, name) == 0)
        lookup_case(name, &t, check_max);
    keep_table(&t);
}

/* ---------------------------------------------------------------- */
/* The GitHub API table                                              */
/* ---------------------------------------------------------------- */

static char *data_path(const char *file) {
    const char *dir = getenv("SY_TEST_DATA");
    if (!dir || !*dir)
        dir = SY_BENCH_DATA_DIR;
    bench_buf b = {0};
    bench_buf_printf(&b, "%s/%s", dir, file);
    return b.ptr;
}

/* Load the GitHub table and its requests; 0 on success. */
static int github_load(table *t) {
    char *rp = data_path("github-api-routes.json");
    char *qp = data_path("github-api-requests.json");
    size_t len = 0, qlen = 0;
    char *doc = bench_read_file(rp, &len);
    char *reqs = bench_read_file(qp, &qlen);
    int rc = -1;
    if (!doc || !reqs) {
        comment("SKIPPED github: cannot read %s or %s (set SY_TEST_DATA)", rp,
                qp);
        goto out;
    }
    t->doc.ptr = doc;
    t->doc.len = len;
    t->doc.cap = len + 1;
    doc = NULL;
    cJSON *arr = cJSON_ParseWithLength(reqs, qlen);
    if (!cJSON_IsArray(arr)) {
        comment("SKIPPED github: %s is not a JSON array", qp);
        cJSON_Delete(arr);
        goto out;
    }
    cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        cJSON *m = cJSON_GetArrayItem(it, 0), *p = cJSON_GetArrayItem(it, 1);
        if (cJSON_IsString(m) && cJSON_IsString(p))
            bench_reqs_add(&t->reqs, m->valuestring, "api.github.com",
                           p->valuestring, NULL, 0);
    }
    cJSON_Delete(arr);
    rc = table_load(t, "github");
out:
    free(doc);
    free(reqs);
    free(rp);
    free(qp);
    return rc;
}

#ifdef SY_BENCH_HAVE_R3
static void run_r3(void *arg, uint64_t count) {
    bench_r3_run(arg, count);
}

/* peer/r3-github and the ratio match/github-vs-r3: a batch of our lookups
 * and one of r3's, in turn, R3_PAIRS times, which side goes first
 * alternating pair by pair; the ratio is the median of each pair's, so
 * both sides of it ran within the same ~30 ms. On a shared VM the
 * machine's speed moves by up to 1.6x between cases of one run, which a
 * ratio of two separately timed cases takes for ours or r3's; short
 * batches and many pairs leave each state a share of the pairs, and the
 * order turned each pair cancels a drift within it. */
enum { R3_PAIRS = 31, R3_BATCH_NS = 15000000 };

static void r3_pairs(lookups *ours, bench_r3 *r, size_t routes) {
    uint64_t n_ours = calibrate(run_match, ours, R3_BATCH_NS);
    uint64_t n_r3 = calibrate(run_r3, r, R3_BATCH_NS);
    double a[R3_PAIRS], b[R3_PAIRS], q[R3_PAIRS];
    double qmin = 0, qmax = 0;
    for (int i = 0; i < R3_PAIRS; i++) {
        if (i & 1) {
            b[i] = timed_batch(run_r3, r, n_r3);
            a[i] = timed_batch(run_match, ours, n_ours);
        } else {
            a[i] = timed_batch(run_match, ours, n_ours);
            b[i] = timed_batch(run_r3, r, n_r3);
        }
        q[i] = a[i] / b[i];
        qmin = i == 0 || q[i] < qmin ? q[i] : qmin;
        qmax = i == 0 || q[i] > qmax ? q[i] : qmax;
    }
    double ratio = bench_median(q, R3_PAIRS);
    result("peer/r3-github", routes, bench_median(b, R3_PAIRS), "ns");
    result("match/github-vs-r3", routes, ratio, "x");
    comment("peer/r3-github: a match entry created and freed per request, as "
            "r3's API requires; timed in %d alternating pairs of ~15 ms "
            "batches with ours, each other pair r3's first (ours %.1f ns "
            "in them, median); match/github-vs-r3 is the median of the "
            "pairs' ratios, %.3f-%.3f",
            R3_PAIRS, bench_median(a, R3_PAIRS), qmin, qmax);
}

/* peer/r3-github: libr3 on the same table and requests, in this run. The
 * routes each side picks are compared and the agreement printed. */
static void case_r3(table *t) {
    char err[256];
    bench_r3 *r =
        bench_r3_new(t->doc.ptr, t->doc.len, &t->reqs, err, sizeof err);
    if (!r) {
        comment("SKIPPED peer/r3-github: %s", err);
        return;
    }
    sy_match_ctx *ctx = NULL;
    sy_error e;
    if (sy_match_ctx_new(NULL, &ctx, &e) != 0) {
        fail("peer/r3-github", -1, &e);
        bench_r3_free(r);
        return;
    }
    sy_snapshot *s = sy_router_acquire(t->router);
    size_t same = 0, hits = 0;
    for (size_t i = 0; i < t->reqs.n; i++) {
        sy_match *m = NULL;
        sy_snapshot_match(s, ctx, &t->reqs.reqs[i], &m);
        long k = bench_r3_lookup(r, i);
        hits += k >= 0;
        const char *ours = m ? sy_route_id(sy_match_route(m)) : "(none)";
        same += strcmp(ours, bench_r3_route_id(r, k)) == 0;
    }
    comment("peer/r3-github: libr3 hit %zu of %zu requests; picked the "
            "same route as switchyard for %zu",
            hits, t->reqs.n, same);
    lookups l = {s, ctx, &t->reqs, 0, 0};
    r3_pairs(&l, r, t->routes);
    sy_snapshot_release(s);
    sy_match_ctx_free(ctx);
    bench_r3_free(r);
}
#endif

static void case_github(void) {
    bool peer = want("peer/r3-github");
    if (!want_pair("github") && !peer)
        return;
    table t;
    memset(&t, 0, sizeof t);
    if (github_load(&t) == 0) {
        if (want_pair("github"))
            lookup_case("github", &t, SIZE_MAX);
#ifdef SY_BENCH_HAVE_R3
        if (peer)
            case_r3(&t);
#else
        if (peer)
            comment("SKIPPED peer/r3-github: built without libr3 (install "
                    "libr3-dev and reconfigure)");
#endif
    }
    keep_table(&t);
}

/* ---------------------------------------------------------------- */
/* memory/route                                                      */
/* ---------------------------------------------------------------- */

void memory_child(const char *name, table_gen gen, size_t n) {
    table t;
    memset(&t, 0, sizeof t);
    gen(n, 1, &t.doc, &t.reqs);
    sy_error e;
    int rc = router_fresh(&t.router, &e);
    if (rc) {
        fail(name, rc, &e);
        return;
    }
    uint64_t before = bench_rss_bytes();
    sy_report *rep = NULL;
    rc = sy_router_apply(t.router, "bench", t.doc.ptr, t.doc.len, &rep, &e);
    if (rep)
        sy_report_free(rep);
    if (rc) {
        fail(name, rc, &e);
        return;
    }
    uint64_t after = bench_rss_bytes();
    uint64_t lazy = bench_lazyfree_bytes();
    sy__small_stats arena;
    sy__small_stats_get(&arena);
    sy_snapshot *h = sy_router_acquire(t.router);
    size_t routes = sy_snapshot_route_count(h);
    const sy_snapshot *s = sy__snapshot_from_handle(h);
    size_t snap_bytes = s->bytes;
    size_t base_bytes = s->base ? sy__index_bytes(s->base) : 0;
    /* the routes' own blocks: struct, arena chunks (with their headers).
     * The first chunk, in the route's block, has its header over cpred
     * and fingerprint (route.h): the block runs from the struct to the
     * end of the id, taken first from the top of that chunk. */
    size_t route_bytes = 0;
    for (uint32_t i = 0; i < s->slot_count; i++) {
        const struct sy_route *rt = sy__snapshot_slot(s, i)->route;
        if (!rt)
            continue;
        const sy__arena_chunk *first =
            rt->arena_embedded
                ? sy__route_first_chunk((struct sy_route *)(uintptr_t)rt)
                : NULL;
        for (const sy__arena_chunk *c = rt->arena.head; c && c != first;
             c = c->next)
            route_bytes += sizeof *c + c->size;
        const char *end = (const char *)(rt + 1);
        if (first && rt->id >= end && rt->id < end + SY_ARENA_CHUNK_MAX)
            end = rt->id + strlen(rt->id) + 1;
        route_bytes += (size_t)(end - (const char *)rt);
    }
    sy_snapshot_release(h);
    /* what the source keeps besides: the memo of its last document (the
     * re-apply shortcut) and its history (kept documents for rollback) */
    size_t memo_bytes = 0, history_bytes = 0;
    for (size_t i = 0; i < t.router->source_count; i++) {
        const sy__source *src = &t.router->sources[i];
        memo_bytes += src->memo_count * sizeof *src->memo;
        for (size_t k = 0; k < src->history_count; k++)
            history_bytes +=
                src->history[k].count *
                (sizeof(struct sy_route *) +
                 (src->history[k].positions ? sizeof(uint32_t) : 0));
    }
    if (!routes)
        routes = n;
    result(name, n, (double)(after - before) / (double)routes, "bytes");
    comment("%s: VmRSS %.1f MiB -> %.1f MiB for %zu routes "
            "(document text allocated before, not counted)",
            name, (double)before / 1048576, (double)after / 1048576, routes);
    comment("%s: the library's arena (alloc_small.c): %zu spans, "
            "%.1f MiB; %zu empty ones kept resident, %zu lazily freed; "
            "LazyFree %.0f bytes/route (counted above until the system "
            "takes it)",
            name, arena.spans, (double)arena.span_bytes / 1048576, arena.kept,
            arena.lazy, (double)lazy / (double)routes);
#ifdef __GLIBC__
    malloc_trim(0);
    uint64_t trimmed = bench_rss_bytes();
    comment("%s: after malloc_trim(0): %.0f bytes/route (heap "
            "kept by glibc after parsing returned)",
            name, (double)(trimmed - before) / (double)routes);
#endif
    comment("%s: library accounting: snapshot %zu bytes (%.0f "
            "bytes/route), index %zu bytes (%.0f bytes/route)",
            name, snap_bytes, (double)snap_bytes / (double)routes, base_bytes,
            (double)base_bytes / (double)routes);
    comment("%s: library accounting: route blocks %.0f, source memo "
            "%.0f, history %.0f bytes/route (requested sizes, before the "
            "allocator's headers and rounding)",
            name, (double)route_bytes / (double)routes,
            (double)memo_bytes / (double)routes,
            (double)history_bytes / (double)routes);
    comment("%s: counted: everything the apply left (routes, "
            "snapshot and index, the source's memo and history, the heap "
            "the allocator kept); the default configuration (history of 8 "
            "documents: the routes' references, not the text)",
            name);
    table_free(&t);
}

/* Measured in a child process so the rest of the run (and its freed heap)
 * cannot hide or inflate the figure. */
void memory_forked(const char *name, table_gen gen, size_t n) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        memory_child(name, gen, n);
        fflush(stdout);
        _exit(0);
    }
    if (pid < 0) {
        memory_child(name, gen, n);
        return;
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        comment("%s: the measuring child failed (status %d)", name, st);
}

static void case_memory(void) {
    if (want("memory/route"))
        memory_forked("memory/route", table_static, 100000);
}

/* ---------------------------------------------------------------- */
/* compile/json                                                      */
/* ---------------------------------------------------------------- */

static void compile_size(size_t n, int reps) {
    bench_buf doc = {0};
    bench_reqs rs = {0};
    table_mixed(n, 1, &doc, &rs);
    double ms[8], parse[8], pub[8], cpu[8];
    int done = 0;
    for (int r = 0; r < reps && r < 8; r++) {
        sy_router *router = NULL;
        sy_error e;
        int rc = router_fresh(&router, &e);
        if (rc) {
            fail("compile/json", rc, &e);
            break;
        }
        sy_report *rep = NULL;
        uint64_t c0 = thread_cpu_ns(), t0 = bench_now_ns();
        rc = sy_router_apply(router, "bench", doc.ptr, doc.len, &rep, &e);
        uint64_t dt = bench_now_ns() - t0, dc = thread_cpu_ns() - c0;
        if (rc) {
            fail("compile/json", rc, &e);
            if (rep)
                sy_report_free(rep);
            sy_router_free(router);
            break;
        }
        ms[done] = (double)dt / 1e6;
        cpu[done] = (double)dc / 1e6;
        parse[done] = rep ? (double)sy_report_parse_us(rep) / 1e3 : 0;
        pub[done] = rep ? (double)sy_report_publish_us(rep) / 1e3 : 0;
        done++;
        if (rep)
            sy_report_free(rep);
        sy_router_free(router);
        if (ms[done - 1] > 5000) {
            comment("compile/json %zu: one apply took over 5 s: not "
                    "repeated",
                    n);
            break;
        }
    }
    if (done) {
        result("compile/json", n, bench_median(ms, (size_t)done), "ms");
        comment("compile/json %zu: document %.1f MiB; report: parse+compile "
                "%.1f ms, build+publish %.1f ms; thread CPU time %.1f ms "
                "(medians of %d)",
                n, (double)doc.len / 1048576, bench_median(parse, (size_t)done),
                bench_median(pub, (size_t)done),
                bench_median(cpu, (size_t)done), done);
    }
    bench_buf_free(&doc);
    bench_reqs_free(&rs);
}

static void case_compile(void) {
    if (!want("compile/json"))
        return;
    compile_size(10000, 5);
    compile_size(100000, 3);
}

/* ---------------------------------------------------------------- */
/* The shared 100k static router: match/static, updates              */
/* ---------------------------------------------------------------- */

static table g_static;
static bool g_static_tried;

static table *static_table(void) {
    if (!g_static_tried) {
        g_static_tried = true;
        table_static(100000, NREQ, &g_static.doc, &g_static.reqs);
        if (table_load(&g_static, "static 100000") != 0)
            table_free(&g_static);
    }
    return g_static.router ? &g_static : NULL;
}

static void case_static(void) {
    if (!want_pair("static"))
        return;
    table *t = static_table();
    if (t)
        lookup_case("static", t, 2000);
}

int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void print_spread(const char *name, const double *runs, size_t n,
                  const char *unit) {
    /* a sorted copy: the caller's runs stay in their order (by run) */
    double *v = bench_xmalloc(n * sizeof *v);
    memcpy(v, runs, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp_d);
    comment("%s: %zu runs: min %.1f, median %.1f, p90 %.1f, max %.1f %s", name,
            n, v[0], bench_quantile(v, n, 0.5), bench_quantile(v, n, 0.9),
            v[n - 1], unit);
    free(v);
}

static void case_update_one(void) {
    if (!want("update/one-route"))
        return;
    table *t = static_table();
    if (!t)
        return;
    enum { RUNS = 101 };
    double us[RUNS];
    size_t done = 0;
    bench_buf a = {0}, b = {0};
    table_static_route(50000, "2", &a);
    table_static_route(50000, "", &b);
    sy_error e;
    for (size_t r = 0; r < RUNS; r++) {
        const bench_buf *doc = r % 2 ? &b : &a;
        uint64_t t0 = bench_now_ns();
        int rc =
            sy_router_upsert_route(t->router, "bench", doc->ptr, doc->len, &e);
        uint64_t dt = bench_now_ns() - t0;
        if (rc) {
            fail("update/one-route", rc, &e);
            break;
        }
        us[done++] = (double)dt / 1e3;
    }
    /* Leave the table as it was. */
    if (done % 2)
        sy_router_upsert_route(t->router, "bench", b.ptr, b.len, &e);
    if (done) {
        double copy[RUNS];
        memcpy(copy, us, done * sizeof *us);
        result("update/one-route", t->routes, bench_median(copy, done), "us");
        print_spread("update/one-route", us, done, "us");
    }
    sy_metrics m;
    sy_router_metrics(t->router, &m);
    comment("update/one-route: after the runs: generation %llu, %llu live "
            "snapshots, %llu retired",
            (unsigned long long)m.generation,
            (unsigned long long)m.live_snapshots,
            (unsigned long long)m.retired_snapshots);
    bench_buf_free(&a);
    bench_buf_free(&b);
}

/* update/one-route-max: 10,000 consecutive single-route upserts, each a
 * different route of the 100k static table (its path gets a suffix), so
 * every compaction and index rebuild the router does on the way is among
 * them; the figure is the slowest publish. Leaves those routes changed
 * (nothing after it reads their paths). */
static void case_update_max(void) {
    if (!want("update/one-route-max"))
        return;
    table *t = static_table();
    if (!t)
        return;
    enum { RUNS = 10000 };
    double *us = bench_xmalloc(RUNS * sizeof *us);
    double *cpu = bench_xmalloc(RUNS * sizeof *cpu);
    double *sys = bench_xmalloc(RUNS * sizeof *sys);
    size_t done = 0;
    bench_buf doc = {0};
    sy_error e;
    uint64_t start = bench_now_ns();
    for (size_t r = 0; r < RUNS; r++) {
        /* 7919 is prime to the table size: RUNS distinct routes */
        table_static_route((50000 + r * 7919) % t->routes, "m", &doc);
        uint64_t s0 = process_sys_ns();
        uint64_t t0 = bench_now_ns(), c0 = thread_cpu_ns();
        int rc =
            sy_router_upsert_route(t->router, "bench", doc.ptr, doc.len, &e);
        uint64_t dt = bench_now_ns() - t0, dc = thread_cpu_ns() - c0;
        sys[done] = (double)(process_sys_ns() - s0) / 1e3;
        if (rc) {
            fail("update/one-route-max", rc, &e);
            break;
        }
        cpu[done] = (double)dc / 1e3;
        us[done++] = (double)dt / 1e3;
    }
    double total_s = (double)(bench_now_ns() - start) / 1e9;
    if (done) {
        size_t over = 0, worst = 0, cover = 0, cworst = 0;
        for (size_t i = 0; i < done; i++) {
            over += us[i] > 2000;
            if (us[i] > us[worst])
                worst = i;
            cover += cpu[i] > 2000;
            if (cpu[i] > cpu[cworst])
                cworst = i;
        }
        double max = us[worst];
        result("update/one-route-max", t->routes, max, "us");
        comment("update/one-route-max: %zu upserts of distinct routes in "
                "%.1f s; the slowest was #%zu; %zu took over 2 ms",
                done, total_s, worst, over);
        comment("update/one-route-max: thread CPU time: the most was %.1f us "
                "(#%zu), %zu over 2 ms (wall clock far above it: preempted)",
                cpu[cworst], cworst, cover);
        comment("update/one-route-max: of the slowest (by thread CPU), %.0f "
                "us in the kernel (getrusage; page faults, unmapping)",
                sys[cworst]);
        print_spread("update/one-route-max", us, done, "us");
        print_spread("update/one-route-max (thread CPU)", cpu, done, "us");
    }
    free(us);
    free(cpu);
    free(sys);
    bench_buf_free(&doc);
}

static void case_update_instances(void) {
    if (!want("update/instances"))
        return;
    table *t = static_table();
    if (!t)
        return;
    enum { NINST = 1000, RUNS = 41 };
    sy_instance *a = bench_xmalloc(NINST * sizeof *a);
    sy_instance *b = bench_xmalloc(NINST * sizeof *b);
    char *names = bench_xmalloc((size_t)NINST * 64);
    static const sy_kv zone[3][1] = {
        {{"zone", "z0"}}, {{"zone", "z1"}}, {{"zone", "z2"}}};
    for (size_t i = 0; i < NINST; i++) {
        char *id = names + i * 64, *host = id + 32;
        snprintf(id, 32, "inst-%zu", i);
        snprintf(host, 32, "10.0.%zu.%zu", i / 256, i % 256);
        a[i] = (sy_instance){.id = id,
                             .host = host,
                             .port = 8080,
                             .weight = (uint32_t)(i % 4 + 1),
                             .state = SY_INSTANCE_UP,
                             .metadata = zone[i % 3],
                             .metadata_count = 1};
        b[i] = a[i];
        b[i].weight = (uint32_t)((i + 1) % 4 + 1);
    }
    double us[RUNS], cpu[RUNS], faults[RUNS];
    size_t done = 0;
    sy_error e;
    for (size_t r = 0; r < RUNS; r++) {
        struct rusage ru0, ru1;
        getrusage(RUSAGE_SELF, &ru0);
        uint64_t t0 = bench_now_ns(), c0 = thread_cpu_ns();
        int rc = sy_router_set_instances(t->router, "svc", r % 2 ? b : a, NINST,
                                         NULL, &e);
        uint64_t dt = bench_now_ns() - t0, dc = thread_cpu_ns() - c0;
        getrusage(RUSAGE_SELF, &ru1);
        if (rc) {
            fail("update/instances", rc, &e);
            break;
        }
        cpu[done] = (double)dc / 1e3;
        faults[done] = (double)(ru1.ru_minflt - ru0.ru_minflt);
        us[done++] = (double)dt / 1e3;
    }
    if (done) {
        double copy[RUNS];
        memcpy(copy, us, done * sizeof *us);
        result("update/instances", t->routes, bench_median(copy, done), "us");
        print_spread("update/instances", us, done, "us");
        print_spread("update/instances (thread CPU)", cpu, done, "us");
        print_spread("update/instances (page faults)", faults, done, "");
    }
    free(a);
    free(b);
    free(names);
}

/* ---------------------------------------------------------------- */
/* update/document-one-changed                                       */
/* ---------------------------------------------------------------- */

/* A copy of `doc` with every occurrence of `from` replaced by `to` (same
 * length); aborts when `from` is absent. */
static void doc_replace(const bench_buf *doc, const char *from, const char *to,
                        bench_buf *out) {
    size_t fl = strlen(from);
    out->len = 0;
    bench_buf_printf(out, "%.*s", (int)doc->len, doc->ptr);
    size_t hits = 0;
    for (char *p = out->ptr; (p = strstr(p, from)) != NULL; p += fl, hits++)
        memcpy(p, to, fl);
    if (!hits || strlen(to) != fl) {
        fprintf(stderr, "switchyard-bench: '%s' not in the document\n", from);
        exit(1);
    }
}

/* The mixed table of n routes applied, then the whole document applied
 * again and again with one route changed (route n/2's path, and the
 * version), alternating between the two variants: what a config centre
 * that stores all routes under one key sends for a one-route edit. */
static void document_one_changed(size_t n, size_t runs) {
    static const char *name = "update/document-one-changed";
    table t = {0};
    table_mixed(n, 1, &t.doc, &t.reqs);
    if (table_load(&t, name) != 0) {
        table_free(&t);
        return;
    }
    char from[48], to[48];
    snprintf(from, sizeof from, "/r%zu/", n / 2);
    snprintf(to, sizeof to, "/x%zu/", n / 2);
    bench_buf a = {0}, b = {0};
    doc_replace(&t.doc, "\"version\":\"bench-1\"", "\"version\":\"bench-a\"",
                &a);
    doc_replace(&t.doc, "\"version\":\"bench-1\"", "\"version\":\"bench-b\"",
                &b);
    bench_buf tmp = {0};
    doc_replace(&b, from, to, &tmp);
    bench_buf_free(&b);
    b = tmp;
    double *ms = bench_xmalloc(runs * sizeof *ms);
    double *parse = bench_xmalloc(runs * sizeof *parse);
    double *cpu = bench_xmalloc(runs * sizeof *cpu);
    size_t done = 0, changed = 0;
    sy_error e;
    for (size_t r = 0; r < runs; r++) {
        const bench_buf *doc = r % 2 ? &a : &b;
        sy_report *rep = NULL;
        uint64_t c0 = thread_cpu_ns();
        uint64_t t0 = bench_now_ns();
        int rc =
            sy_router_apply(t.router, "bench", doc->ptr, doc->len, &rep, &e);
        uint64_t dt = bench_now_ns() - t0;
        cpu[done] = (double)(thread_cpu_ns() - c0) / 1e6;
        if (rc) {
            fail(name, rc, &e);
            if (rep)
                sy_report_free(rep);
            break;
        }
        const sy_diff *d = rep ? sy_report_diff(rep) : NULL;
        /* every apply but the first changes exactly one route */
        if (d && sy_diff_updated_count(d) + sy_diff_added_count(d) +
                         sy_diff_removed_count(d) ==
                     1)
            changed++;
        ms[done] = (double)dt / 1e6;
        parse[done++] = rep ? (double)sy_report_parse_us(rep) / 1e3 : 0;
        if (rep)
            sy_report_free(rep);
    }
    if (done) {
        double *copy = bench_xmalloc(done * sizeof *copy);
        memcpy(copy, ms, done * sizeof *ms);
        result(name, t.routes, bench_median(copy, done), "ms");
        comment("%s %zu: document %.1f MiB; %zu applies, %zu with exactly one "
                "route changed; medians: report parse %.2f ms, thread CPU "
                "%.2f ms (below the wall time: the thread was preempted)",
                name, n, (double)a.len / 1048576, done, changed,
                bench_median(parse, done), bench_median(cpu, done));
        print_spread(name, ms, done, "ms");
        free(copy);
    }
    free(ms);
    free(parse);
    free(cpu);
    bench_buf_free(&a);
    bench_buf_free(&b);
    table_free(&t);
}

static void case_update_document(void) {
    if (!want("update/document-one-changed"))
        return;
    document_one_changed(10000, 41);
    document_one_changed(100000, 11);
}

/* ---------------------------------------------------------------- */
/* snapshot/acquire-release                                          */
/* ---------------------------------------------------------------- */

typedef struct ar_shared {
    sy_router *router;
    _Atomic int go;    /* 0 wait, 1 run */
    _Atomic int stop;  /* storm writer: stop */
    _Atomic int ready; /* threads waiting at the start line */
    uint64_t iters;
    uint64_t publishes;
    int publish_errors;
} ar_shared;

typedef struct ar_reader {
    ar_shared *sh;
    double ns;
    uint64_t sink;
} ar_reader;

static void ar_wait(ar_shared *sh) {
    atomic_fetch_add(&sh->ready, 1);
    while (!atomic_load_explicit(&sh->go, memory_order_acquire))
        ;
}

static void *ar_read(void *arg) {
    ar_reader *r = arg;
    ar_shared *sh = r->sh;
    sy_router *router = sh->router;
    uint64_t sink = 0, n = sh->iters;
    ar_wait(sh);
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        sy_snapshot *s = sy_router_acquire(router);
        sink += sy_snapshot_generation(s);
        sy_snapshot_release(s);
    }
    r->ns = (double)(bench_now_ns() - t0) / (double)n;
    r->sink = sink;
    return NULL;
}

/* The storm: one-route upserts without pause, alternating two versions. */
static void *ar_write(void *arg) {
    ar_shared *sh = arg;
    static const char *const v[2] = {
        "{\"id\":\"storm\",\"uri\":\"http://a:80\","
        "\"predicates\":[\"Path=/storm/a\"]}",
        "{\"id\":\"storm\",\"uri\":\"http://a:80\","
        "\"predicates\":[\"Path=/storm/b\"]}"};
    ar_wait(sh);
    uint64_t k = 0;
    while (!atomic_load_explicit(&sh->stop, memory_order_acquire)) {
        const char *doc = v[k & 1];
        if (sy_router_upsert_route(sh->router, "bench", doc, strlen(doc), NULL))
            sh->publish_errors++;
        else
            k++;
    }
    sh->publishes = k;
    return NULL;
}

/* One timed round: `threads` readers (and a storm writer if asked); returns
 * the mean ns per acquire+release pair per reader, or -1. */
static double ar_round(sy_router *router, int threads, bool storm,
                       uint64_t iters, uint64_t *publishes) {
    ar_shared sh;
    memset(&sh, 0, sizeof sh);
    sh.router = router;
    sh.iters = iters;
    ar_reader rd[2];
    pthread_t tid[3];
    int nt = 0;
    for (int i = 0; i < threads; i++) {
        rd[i] = (ar_reader){&sh, 0, 0};
        if (pthread_create(&tid[nt], NULL, ar_read, &rd[i]) != 0)
            break;
        nt++;
    }
    bool wok = !storm;
    if (storm && nt == threads)
        wok = pthread_create(&tid[nt], NULL, ar_write, &sh) == 0;
    int expect = nt + (storm && wok ? 1 : 0);
    while (atomic_load(&sh.ready) < expect)
        ;
    atomic_store_explicit(&sh.go, 1, memory_order_release);
    double sum = 0;
    for (int i = 0; i < nt; i++) {
        pthread_join(tid[i], NULL);
        sum += rd[i].ns;
    }
    atomic_store_explicit(&sh.stop, 1, memory_order_release);
    if (storm && wok)
        pthread_join(tid[nt], NULL);
    if (publishes)
        *publishes = sh.publishes;
    if (nt != threads || !wok || sh.publish_errors)
        return -1;
    return sum / threads;
}

static void ar_case(const char *name, sy_router *router, size_t routes,
                    int threads, bool storm) {
    if (!want(name))
        return;
    enum { REPS = 5 };
    uint64_t iters = storm ? 2000000 : 4000000;
    double v[REPS], pubs[REPS];
    int done = 0;
    ar_round(router, threads, storm, iters / 8, NULL); /* warm up */
    for (int r = 0; r < REPS; r++) {
        uint64_t p = 0;
        uint64_t t0 = bench_now_ns();
        double ns = ar_round(router, threads, storm, iters, &p);
        double secs = (double)(bench_now_ns() - t0) / 1e9;
        if (ns < 0) {
            comment("SKIPPED %s: a thread could not start or a publish "
                    "failed",
                    name);
            return;
        }
        pubs[done] = (double)p / secs;
        v[done++] = ns;
    }
    result(name, routes, bench_median(v, (size_t)done), "ns");
    if (storm)
        comment("%s: the writer published %.0f snapshots/s (one-route "
                "upserts)",
                name, bench_median(pubs, (size_t)done));
    /* The publication domain alone, through the library's own hook. */
    double d = sy__pub_bench_acquire_release_ns(threads, storm, iters);
    comment("%s: bare publication domain (sy__pub_bench_acquire_release_ns): "
            "%.1f ns",
            name, d);
}

static void case_snapshot(void) {
    if (!want("snapshot/acquire-release") &&
        !want("snapshot/acquire-release-2t") &&
        !want("snapshot/acquire-release-storm"))
        return;
    table t;
    memset(&t, 0, sizeof t);
    if (github_load(&t) != 0) {
        table_free(&t);
        return;
    }
    ar_case("snapshot/acquire-release", t.router, t.routes, 1, false);
    ar_case("snapshot/acquire-release-2t", t.router, t.routes, 2, false);
    ar_case("snapshot/acquire-release-storm", t.router, t.routes, 1, true);
    sy_router_reclaim(t.router);
    table_free(&t);
}

/* ---------------------------------------------------------------- */
/* select/<policy>                                                   */
/* ---------------------------------------------------------------- */

static void case_select(void) {
    static const char *const policies[] = {"round-robin", "random", "hash"};
    for (size_t p = 0; p < 3; p++) {
        char name[64];
        snprintf(name, sizeof name, "select/%s", policies[p]);
        if (!want(name))
            continue;
        enum { REPS = 7 };
        double v[REPS];
        int done = 0;
        sy__service_bench_select_ns(policies[p], 1000, 100000); /* warm */
        for (int r = 0; r < REPS; r++) {
            double ns = sy__service_bench_select_ns(policies[p], 1000, 2000000);
            if (ns < 0)
                break;
            v[done++] = ns;
        }
        if (done == REPS)
            result(name, 1000, bench_median(v, REPS), "ns");
        else
            comment("SKIPPED %s: sy__service_bench_select_ns failed", name);
    }
}

/* ---------------------------------------------------------------- */
/* Baseline: the machine's own speed, measured in the same run        */
/* ---------------------------------------------------------------- */

typedef struct hash_arg {
    char (*paths)[32];
    uint64_t sink;
} hash_arg;

static void run_hash(void *arg, uint64_t count) {
    hash_arg *h = arg;
    uint64_t sink = 0;
    for (uint64_t i = 0; i < count; i++)
        sink += sy__hash64(h->paths[i & 1023], 30, sink);
    h->sink += sink;
}

typedef struct chase_arg {
    uint32_t *next;
    uint32_t at;
} chase_arg;

static void run_chase(void *arg, uint64_t count) {
    chase_arg *c = arg;
    uint32_t at = c->at;
    for (uint64_t i = 0; i < count; i++)
        at = c->next[at];
    c->at = at;
}

/* The 64 MiB random cycle of the load baseline, built once a run. */
static chase_arg g_chase;

static double load_latency_now(void) {
    enum { N = 16u << 20 };
    if (!g_chase.next) {
        g_chase.next = bench_xmalloc(N * sizeof *g_chase.next);
        for (uint32_t i = 0; i < N; i++)
            g_chase.next[i] = i;
        uint64_t st = 42;
        for (uint32_t i = N - 1; i > 0; i--) { /* Sattolo: one cycle */
            uint32_t j = (uint32_t)(bench_rand(&st) % i);
            uint32_t t = g_chase.next[i];
            g_chase.next[i] = g_chase.next[j];
            g_chase.next[j] = t;
        }
    }
    return measure(run_chase, &g_chase, 20000000u, 5, NULL);
}

/* Two figures to read the others against on a shared, noisy machine: the
 * physical floor of a lookup (hash a 30-byte path) and the latency of one
 * dependent load that misses every cache (a 64 MiB random cycle). */
static double baseline(const char *when) {
    hash_arg h = {bench_xmalloc(1024 * sizeof *h.paths), 0};
    for (size_t i = 0; i < 1024; i++)
        snprintf(h.paths[i], sizeof h.paths[i], "/repos/owner%05zu/repo/events",
                 i * 7919 % 100000);
    double ns_hash = measure(run_hash, &h, 20000000u, 5, NULL);
    free(h.paths);
    double ns_load = load_latency_now();
    comment("baseline (%s): sy__hash64 of a 30-byte path %.1f ns; one "
            "dependent load missing every cache (64 MiB) %.1f ns",
            when, ns_hash, ns_load);
    return ns_load;
}

/* Warm the CPU up before the first case (SY_BENCH_WARM_MS, default 3000;
 * 0: none): a case run alone then gives the figure a full run gives (a
 * cold start measured match/github ~1.8x slower). */
static void warm_up(void) {
    const char *env = getenv("SY_BENCH_WARM_MS");
    uint64_t ms = env && *env ? strtoull(env, NULL, 10) : 3000;
    if (!ms)
        return;
    hash_arg h = {bench_xmalloc(1024 * sizeof *h.paths), 0};
    for (size_t i = 0; i < 1024; i++)
        snprintf(h.paths[i], sizeof h.paths[i], "/repos/owner%05zu/repo/warm",
                 i);
    uint64_t t0 = bench_now_ns(), end = t0 + ms * 1000000u;
    while (bench_now_ns() < end)
        run_hash(&h, 100000);
    free(h.paths);
    comment("warm-up: %llu ms of hashing before the first case",
            (unsigned long long)ms);
}

/* ---------------------------------------------------------------- */

static void usage(FILE *out) {
    fprintf(out,
            "usage: switchyard-bench [case-or-prefix...]\n"
            "  no argument runs every case; a full case name runs that case,\n"
            "  any other argument every case whose name starts with it.\n"
            "  SY_TEST_DATA overrides the directory of the GitHub table.\n"
            "cases:\n");
    for (size_t i = 0; i < NCASES; i++)
        fprintf(out, "  %s\n", case_names[i]);
}

int main(int argc, char **argv) {
    g_argc = argc;
    g_argv = argv;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0 ||
            strcmp(argv[i], "--list") == 0) {
            usage(stdout);
            return 0;
        }
        bool any = false;
        for (size_t c = 0; c < NCASES; c++)
            any |= arg_selects(argv[i], case_names[c]);
        if (!any) {
            fprintf(stderr, "switchyard-bench: no case matches '%s'\n",
                    argv[i]);
            usage(stderr);
            return 2;
        }
    }
    uint64_t t0 = bench_now_ns();
    bench_print_machine();
    warm_up();
    g_load_start = baseline("start");
    case_memory();            /* first, in a child, before this heap grows */
    if (want("scale/memory")) /* the same, in a child */
        memory_forked("scale/memory", table_scale, 1000000);
    case_github();
    case_static();
    generated_case("param", table_param, 100000, 2000);
    generated_case("prefix", table_prefix, 100000, 2000);
    generated_case("hosts", table_hosts, 1000, SIZE_MAX);
    generated_case("mixed", table_mixed, 1000, SIZE_MAX);
    generated_case("mixed", table_mixed, 100000, 300);
    rounds_run();
    case_compile();
    case_update_one();
    case_update_max();
    case_update_instances();
    case_update_document();
    table_free(&g_static);
    case_snapshot();
    case_select();
    case_policy();
    case_proxy();
    case_scale();
    g_load_end = baseline("end");
    misses_print();
    free(g_chase.next);
    comment("total run time %.1f s", (double)(bench_now_ns() - t0) / 1e9);
    if (g_differ) {
        comment("FAILED: the index and the scan disagreed on %zu requests",
                g_differ);
        return 1;
    }
    return 0;
}
