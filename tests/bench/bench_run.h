/*
 * bench_run.h - what the cases of switchyard-bench share (bench.c): case
 * selection, output lines, timing, tables loaded into routers, lookups.
 */
#ifndef SY_BENCH_RUN_H
#define SY_BENCH_RUN_H

#include "bench_util.h"

#include <stdbool.h>

#define MATCH_BATCH_NS 60000000u /* 60 ms per timed batch */
#define MATCH_REPS 7

/* Does the command line select case `name`? */
bool want(const char *name);
/* One figure: `name routes value unit`. */
void result(const char *name, size_t routes, double value, const char *unit);
/* A '#' comment line. */
void comment(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A SKIPPED comment with the error. */
void fail(const char *what, int rc, const sy_error *e);
/* min, median, p90 and max of runs[0..n) as a comment (runs is left in
 * its order). */
void print_spread(const char *name, const double *runs, size_t n,
                  const char *unit);
int cmp_d(const void *a, const void *b);

uint64_t process_sys_ns(void);
uint64_t thread_cpu_ns(void);

typedef void (*batch_fn)(void *arg, uint64_t count);
/* The number of calls of fn that takes at least batch_ns, and one batch
 * of n calls timed: ns per call (for cases that alternate two batches). */
uint64_t calibrate(batch_fn fn, void *arg, uint64_t batch_ns);
double timed_batch(batch_fn fn, void *arg, uint64_t n);
/* Calibrate a batch to last >= batch_ns, time `reps` batches; the median
 * ns per operation (g_last_cpu_ns: the median thread CPU time). */
double measure(batch_fn fn, void *arg, uint64_t batch_ns, int reps,
               uint64_t *batch_out);
extern double g_last_cpu_ns;

typedef struct table {
    sy_router *router;
    bench_buf doc;
    bench_reqs reqs;
    size_t routes; /* routes in the published snapshot */
    double apply_ms;
} table;

int router_fresh(sy_router **out, sy_error *e);
/* Apply t->doc to a fresh router (apply_ms, routes); 0 or prints why not. */
int table_load(table *t, const char *what);
void table_free(table *t);

typedef struct lookups {
    const sy_snapshot *snap;
    sy_match_ctx *ctx;
    const bench_reqs *rs;
    uint64_t hits, errors;
} lookups;

/* A batch of sy_snapshot_match over l->rs in turn (a batch_fn). */
void run_match(void *arg, uint64_t count);
/* Index against scan on up to `max` requests: how many differ. */
size_t cross_check(const sy_snapshot *s, sy_match_ctx *ctx,
                   const bench_reqs *rs, size_t max, size_t *hits);
/* Requests where index and scan disagreed over the run (exit status 1). */
extern size_t g_differ;

typedef void (*table_gen)(size_t n, size_t nreq, bench_buf *doc,
                          bench_reqs *rs);
/* memory/route's measure (call it in a child process, before the heap
 * grows): VmRSS after applying gen's table of n routes, per route, and
 * what the library's accounting says it is. */
void memory_child(const char *name, table_gen gen, size_t n);
/* Run memory_child in a forked child. */
void memory_forked(const char *name, table_gen gen, size_t n);

/* bench_scale.c: the scale/ cases (1,000,000 routes). */
void case_scale(void);
/* bench_policy.c: the policy/ cases (rate limits, breakers). */
void case_policy(void);
/* bench_proxy.c: the proxy/ case (a proxied request's library work). */
void case_proxy(void);

#endif
