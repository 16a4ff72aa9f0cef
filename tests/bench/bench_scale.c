/*
 * bench_scale.c - the scale/ cases of switchyard-bench: the table of
 * bench_tables.c's table_scale (literal paths, parameter paths and a route
 * per customer host) at 1,000,000 routes, against the same table at
 * 100,000:
 *
 *   scale/memory        VmRSS per route after applying 1M routes (bench.c,
 *                       in a child, before the run's heap grows)
 *   scale/compile       a fresh router's apply of the 1M document (parse,
 *                       compile, index build and publish), wall clock
 *   scale/match         lookups at 100k and at 1M, and their ratio
 *                       (scale/match-ratio)
 *   scale/one-route-max the slowest of 10,000 one-route upserts at 1M
 *   scale/publish-max-readers  the slowest one-route publish at 1M while
 *                       a reader thread matches without pause, over
 *                       enough upserts that a background rebuild starts,
 *                       runs and swaps in, and the old index is freed
 *   scale/publish-grow-max  the slowest of 200,000 one-route publishes
 *                       that each add a new route to the 1M table (the
 *                       snapshot's id table outgrows its capacity on
 *                       the way, at ~1,125,600 routes)
 *
 * After each apply (100k for scale/match, 1M for every case) a comment
 * gives the process's memory in transparent huge pages (AnonHugePages of
 * /proc/self/smaps_rollup) and its VmRSS: what a cold lookup's TLB
 * misses can be read against (docs/performance.md, "Round 11
 * (continued): huge pages at 1,000,000 routes").
 *
 * Beside the last three a stall watcher (the reader thread, or a thread
 * of its own) reads CLOCK_MONOTONIC without pause and records every gap over
 * 200 us in which it was not switched out (its switch count read at most
 * 20 us before the gap): the machine stopping the virtual CPU (an
 * interrupt's or the host's time, charged to whatever thread runs), not
 * code. A publish whose wall time exceeds its thread CPU time by over
 * 50 us with no context switch had its own virtual CPU stopped (the host
 * took it away; a publish's wall less its CPU is 1-5 us otherwise). Each
 * case then prints, beside its raw
 * maximum, <name>-unstalled: the slowest publish that neither kind of
 * stall touched and that was not switched out. The watcher sees its own
 * virtual CPU only: a stall of the publisher's CPU charged to its thread
 * (an interrupt storm there) is not seen (docs/performance.md). Each
 * also prints the steal time the kernel counted over the case (/proc/stat:
 * time the hypervisor ran something else while a vCPU of this VM wanted to
 * run), in its ticks of 10 ms: the host's share the watcher can only infer;
 * and, from a clock loop of 1 s on the publisher's CPU before and after
 * the case, the most thread CPU the machine charged between two reads of
 * the clock (a thread doing nothing), with the machine's huge-page faults
 * over the case (docs/performance.md, "Round 11 (session 47)").
 *
 * In those three cases the publisher runs on one CPU and the reader or
 * watcher on another (printed as the case's condition; SY_BENCH_PIN=0
 * leaves both to the scheduler): a spinner placed on the publisher's
 * vCPU made it wait out a time slice, ~2.5 ms (docs/performance.md,
 * "Round 11 (session 41): the publisher and its spinner on one vCPU").
 * Each also counts the publishes switched out involuntarily and those
 * that began or ended with the other thread last seen on their CPU.
 */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include "bench_run.h"
#include "bench_tables.h"

#include "snapshot/snapshot.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#define SCALE_BIG 1000000
#define SCALE_SMALL 100000
#define SCALE_NREQ 8192

/* match at one size; the figure of the cold (8,192 random requests) run */
static double scale_match(const char *what, table *t, size_t check) {
    sy_match_ctx *ctx = NULL;
    sy_error e;
    int rc = sy_match_ctx_new(NULL, &ctx, &e);
    if (rc) {
        fail(what, rc, &e);
        return -1;
    }
    sy_snapshot *s = sy_router_acquire(t->router);
    size_t hits = 0;
    size_t differ = cross_check(s, ctx, &t->reqs, check, &hits);
    g_differ += differ;
    comment("scale/match %zu: %zu requests; %zu checked against the scan: "
            "%zu hit, %zu differ",
            t->routes, t->reqs.n, check, hits, differ);
    lookups l = {s, ctx, &t->reqs, 0, 0};
    double ns = measure(run_match, &l, MATCH_BATCH_NS, MATCH_REPS, NULL);
    result("scale/match", t->routes, ns, "ns");
    comment("scale/match %zu: thread CPU time %.1f ns per lookup", t->routes,
            g_last_cpu_ns);
    sy_snapshot_release(s);
    sy_match_ctx_free(ctx);
    return ns;
}

/* scale/match-ratio: a batch of lookups at 100k and one at 1M, in turn,
 * 31 times, both tables loaded; the median of each pair's ratio.
 * Timed apart (the 100k table's figure before the 1M table is built,
 * seconds earlier) the ratio took the machine's swings for the code's:
 * session 42's first pair read the 100k lookup at 482 ns in run 1 and
 * 87 ns in run 2. */
static void match_pairs(table *small, table *big) {
    enum { PAIRS = 31, PAIR_BATCH_NS = 15000000 };
    sy_match_ctx *cs = NULL, *cb = NULL;
    sy_error e;
    if (sy_match_ctx_new(NULL, &cs, &e) || sy_match_ctx_new(NULL, &cb, &e)) {
        fail("scale/match-ratio", -1, &e);
        sy_match_ctx_free(cs);
        return;
    }
    sy_snapshot *ss = sy_router_acquire(small->router);
    sy_snapshot *sb = sy_router_acquire(big->router);
    lookups ls = {ss, cs, &small->reqs, 0, 0}, lb = {sb, cb, &big->reqs, 0, 0};
    uint64_t ns_ = calibrate(run_match, &ls, PAIR_BATCH_NS);
    uint64_t nb = calibrate(run_match, &lb, PAIR_BATCH_NS);
    double a[PAIRS], b[PAIRS], q[PAIRS];
    double qmin = 0, qmax = 0;
    for (int i = 0; i < PAIRS; i++) {
        a[i] = timed_batch(run_match, &ls, ns_);
        b[i] = timed_batch(run_match, &lb, nb);
        q[i] = b[i] / a[i];
        qmin = i == 0 || q[i] < qmin ? q[i] : qmin;
        qmax = i == 0 || q[i] > qmax ? q[i] : qmax;
    }
    result("scale/match-ratio", big->routes, bench_median(q, PAIRS), "x");
    comment("scale/match-ratio: %d alternating pairs of ~15 ms batches at "
            "%zu and %zu routes, both tables loaded (medians %.1f / %.1f "
            "ns); the median of the pairs' ratios, %.2f-%.2f",
            PAIRS, small->routes, big->routes, bench_median(a, PAIRS),
            bench_median(b, PAIRS), qmin, qmax);
    sy_snapshot_release(ss);
    sy_snapshot_release(sb);
    sy_match_ctx_free(cs);
    sy_match_ctx_free(cb);
}

/* The process's memory in transparent huge pages and its VmRSS, as a
 * comment. */
static void print_huge(const char *when) {
    comment("%s: AnonHugePages %.1f MiB (transparent huge pages of the "
            "process, /proc/self/smaps_rollup); VmRSS %.1f MiB",
            when, (double)bench_anon_huge_bytes() / 1048576,
            (double)bench_rss_bytes() / 1048576);
}

/* ---- the TLB's reach: what scale/match-ratio is made of ---- */

/* A cycle of pointers, one a line, chased `count` steps. */
typedef struct page_chase {
    void **at;
} page_chase;

static void run_page_chase(void *arg, uint64_t count) {
    page_chase *c = arg;
    void **p = c->at;
    for (uint64_t i = 0; i < count; i++)
        p = *p;
    c->at = p;
}

/* One dependent load each to 8,192 lines (512 KiB: the L2's) laid out in
 * `pages` distinct 4 KiB pages of `r`, in a random order; ns a load. */
static double lines_in_pages(char *r, size_t region, size_t pages) {
    enum { LINES = 8192 };
    size_t npg = region >> 12;
    uint32_t *pg = bench_xmalloc(npg * sizeof *pg);
    void **at[LINES];
    uint64_t st = 0x7eb + pages;
    for (size_t i = 0; i < npg; i++)
        pg[i] = (uint32_t)i;
    for (size_t i = 0; i < pages; i++) { /* the first `pages`, at random */
        size_t j = i + (size_t)(bench_rand(&st) % (npg - i));
        uint32_t t = pg[i];
        pg[i] = pg[j];
        pg[j] = t;
    }
    for (size_t i = 0; i < LINES; i++) /* distinct lines of each page */
        at[i] = (void **)(void *)(r + ((size_t)pg[i % pages] << 12) +
                                  (((i / pages) + pg[i % pages]) % 64) * 64);
    for (size_t i = LINES - 1; i > 0; i--) { /* a random order */
        size_t j = (size_t)(bench_rand(&st) % (i + 1));
        void **t = at[i];
        at[i] = at[j];
        at[j] = t;
    }
    for (size_t i = 0; i < LINES; i++)
        *at[i] = at[(i + 1) % LINES];
    free(pg);
    page_chase c = {at[0]};
    run_page_chase(&c, 4 * LINES);
    return measure(run_page_chase, &c, 20000000u, 5, NULL);
}

/* The same 8,192 lines in 2,048 and in 8,192 distinct 4 KiB pages of a
 * 32 MiB region advised into 2 MiB pages, as a comment: the lines are the
 * L2's either way, so the difference is address translation, the cost of
 * a lookup pass whose pages outnumber the TLB's 4 KiB entries. A 1M pass
 * of the scale table reads ~11,600 distinct pages, a 100k one ~3,000,
 * with the same lines (docs/performance.md, "Round 11 (session 47): where
 * the 1M lookup's extra time goes"); on a machine that maps the guest's
 * 2 MiB pages as such the two figures agree, on this one they did not. */
static void print_tlb_reach(void) {
    const size_t region = 32u << 20, huge = 2u << 20;
    char *m = mmap(NULL, region + huge, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        comment("scale/match-ratio: no TLB baseline (mmap failed)");
        return;
    }
    char *r = (char *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
    uint64_t huge0 = bench_anon_huge_bytes();
    (void)madvise(r, region, MADV_HUGEPAGE);
    memset(r, 1, region);
    double in_huge = (double)(bench_anon_huge_bytes() - huge0) / (double)region;
    double few = lines_in_pages(r, region, 2048);
    double many = lines_in_pages(r, region, 8192);
    comment("scale/match-ratio: 8192 lines chased in 2048 / 8192 distinct "
            "4 KiB pages of a 32 MiB region (%.0f %% of it in 2 MiB pages): "
            "%.1f / %.1f ns a load; the difference is the translation of "
            "pages past the TLB's reach",
            in_huge * 100, few, many);
    munmap(m, region + huge);
}

/* ---- the machine's stalls ---- */

/* A gap between two clock reads of the watcher taken as a stall. */
#define STALL_NS 200000u
/* Stalls a watcher keeps (more are counted as lost). */
#define STALLS_MAX ((size_t)1 << 20)
/* How often the watcher reads its context switch count (getrusage): a
 * gap is put down to a switch when the count moved since that read, so a
 * switch at most this long before the gap can hide a stall (at 200 us, a
 * stall within 200 us of a short switch was dropped as "switched"). */
#define STALL_SWITCH_NS 20000u
/* A publish's wall less thread CPU, with no context switch, taken as its
 * own virtual CPU stopped (the watcher's 200 us would let a publish lose
 * up to 200 us to the host and count as unstalled). */
#define OFF_NS 50000u

typedef struct stall {
    uint64_t t0, t1; /* bench_now_ns() before and after the gap */
} stall;

/* The stalls one watcher saw (written by the watcher only, read once it
 * has stopped), in time order. */
typedef struct stall_watch {
    stall *v;
    size_t n, cap, lost;
    size_t switched; /* gaps in which the watcher was switched out */
    _Atomic int stop, started;
} stall_watch;

/* A watcher's clock: its last read and its switch count then. */
typedef struct watch_clock {
    uint64_t prev, checked, switches;
} watch_clock;

static uint64_t thread_switches(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_nivcsw + (uint64_t)ru.ru_nvcsw;
}

static void watch_start(watch_clock *c) {
    c->switches = thread_switches();
    c->prev = c->checked = bench_now_ns();
}

/* The CPU the case's other thread (reader or watcher) last ran on, as it
 * saw it at its last clock read (-1: none). */
static _Atomic int g_other_cpu = -1;

/* One clock read of a watcher: a gap over STALL_NS since the last one is
 * a stall when the watcher's switch count did not move meanwhile. */
static void watch_tick(stall_watch *w, watch_clock *c) {
    atomic_store_explicit(&g_other_cpu, sched_getcpu(), memory_order_relaxed);
    uint64_t t = bench_now_ns();
    if (t - c->prev > STALL_NS) {
        uint64_t sw = thread_switches();
        if (sw != c->switches)
            w->switched++;
        else if (w->n < w->cap)
            w->v[w->n++] = (stall){c->prev, t};
        else
            w->lost++;
        c->switches = sw;
        c->checked = t = bench_now_ns();
    } else if (t - c->checked > STALL_SWITCH_NS) {
        c->switches = thread_switches();
        c->checked = t = bench_now_ns();
    }
    c->prev = t;
}

static stall_watch *g_watch; /* the running case's watcher, or NULL */
/* when each upsert began (bench_now_ns), for the stalls' overlap */
static uint64_t *g_start;

static void watch_init(stall_watch *w, size_t cap) {
    memset(w, 0, sizeof *w);
    w->v = bench_xmalloc(cap * sizeof *w->v);
    w->cap = cap;
}

static void *watch_run(void *arg) {
    stall_watch *w = arg;
    watch_clock c;
    watch_start(&c);
    atomic_store(&w->started, 1);
    while (!atomic_load_explicit(&w->stop, memory_order_relaxed))
        watch_tick(w, &c);
    return NULL;
}

/* The stall time (ns) the watcher saw within [t0, t1). */
static uint64_t stalled_ns(const stall_watch *w, uint64_t t0, uint64_t t1) {
    size_t lo = 0, hi = w->n; /* the first stall ending after t0 */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->v[mid].t1 <= t0)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t ns = 0;
    for (size_t i = lo; i < w->n && w->v[i].t0 < t1; i++)
        ns += (w->v[i].t1 < t1 ? w->v[i].t1 : t1) -
              (w->v[i].t0 > t0 ? w->v[i].t0 : t0);
    return ns;
}

/* The stall time the watcher saw within upsert i (0: none, or no
 * watcher). */
static uint64_t upsert_stall_ns(size_t i, const double *us) {
    if (!g_watch || !g_start)
        return 0;
    return stalled_ns(g_watch, g_start[i],
                      g_start[i] + (uint64_t)(us[i] * 1e3) + 1);
}

static uint32_t *g_preempt;
/* of which involuntary (the scheduler took the CPU for another thread) */
static uint32_t *g_invol;
/* whether the other thread was last seen on the publisher's CPU when the
 * publish began or ended (both queued on one CPU) */
static bool *g_near;

/* The time upsert i's own CPU stopped without switching its thread out:
 * wall less thread CPU when that is over OFF_NS and no context switch
 * was counted (the host took the virtual CPU away), else 0. */
static double upsert_off_us(size_t i, const double *us, const double *cpu) {
    double off = us[i] - cpu[i];
    if (!g_preempt || g_preempt[i] || off * 1e3 <= OFF_NS)
        return 0;
    return off;
}

static const sy_snapshot *internal(sy_snapshot *h) {
    return sy__snapshot_from_handle(h);
}

/* What each upsert of the last upserts() call met: 'b' a rebuild ran,
 * 'S' it started one, 'W' it swapped one in, '.' neither. */
static char *g_state;
/* and the page faults its thread took, the times it was switched out
 * (getrusage RUSAGE_THREAD: minor faults, involuntary and voluntary
 * context switches; a virtual CPU the host takes away is not seen) */
static uint32_t *g_faults;
/* whether each upsert's snapshot was still moving its id table into a
 * larger one (NULL: not recorded) */
static bool *g_idmove;

/* The per-upsert notes above for up to n upserts (the id table's moves
 * too when idmove), and their release. */
static void notes_alloc(size_t n, bool idmove) {
    g_state = bench_xmalloc(n);
    g_faults = bench_xmalloc(n * sizeof *g_faults);
    g_preempt = bench_xmalloc(n * sizeof *g_preempt);
    g_invol = bench_xmalloc(n * sizeof *g_invol);
    g_near = bench_xmalloc(n * sizeof *g_near);
    g_idmove = idmove ? bench_xmalloc(n * sizeof *g_idmove) : NULL;
    g_start = bench_xmalloc(n * sizeof *g_start);
}

static void notes_free(void) {
    free(g_state);
    free(g_faults);
    free(g_preempt);
    free(g_invol);
    free(g_near);
    g_near = NULL;
    free(g_idmove);
    free(g_start);
    g_start = NULL;
    g_state = NULL;
    g_faults = g_preempt = g_invol = NULL;
    g_idmove = NULL;
}

static void thread_usage(uint64_t *faults, uint64_t *preempt, uint64_t *invol) {
    struct rusage ru;
    *faults = *preempt = *invol = 0;
    if (getrusage(RUSAGE_THREAD, &ru) == 0) {
        *faults = (uint64_t)ru.ru_minflt + (uint64_t)ru.ru_majflt;
        *preempt = (uint64_t)ru.ru_nivcsw + (uint64_t)ru.ru_nvcsw;
        *invol = (uint64_t)ru.ru_nivcsw;
    }
}

/* Upserts of distinct routes of t, from route `from`, each one suffixed
 * with `variant` (or, with `add`, new routes `from`, `from` + 1, ...); us[i],
 * cpu[i]: wall and thread CPU time of each. Stops after `runs`, or (when
 * until_swap) once a rebuild has started, swapped its index in and the old one
 * has been freed (a part per publish), whichever is later (at most max_runs).
 * Returns how many were done; *swaps: index swaps seen. */
static size_t upserts(table *t, size_t from, const char *variant, size_t runs,
                      size_t max_runs, bool until_swap, bool add, double *us,
                      double *cpu, size_t *swaps, size_t *builds) {
    bench_buf doc = {0};
    sy_error e;
    size_t done = 0;
    *swaps = 0;
    *builds = 0;
    sy_snapshot *h = sy_router_acquire(t->router);
    const void *base = internal(h)->base;
    bool building = internal(h)->build != NULL;
    sy_snapshot_release(h);
    bool tidy = true; /* nothing in the trash */
    for (size_t r = 0; r < max_runs; r++) {
        if (r >= runs && (!until_swap || (*swaps > 0 && tidy)))
            break;
        /* 7919 is prime to the table sizes: distinct routes */
        table_scale_route(add ? from + r : (from + r * 7919) % t->routes,
                          variant, &doc);
        uint64_t f0, p0, i0, f1, p1, i1;
        thread_usage(&f0, &p0, &i0);
        bool near = sched_getcpu() == atomic_load(&g_other_cpu);
        uint64_t t0 = bench_now_ns(), c0 = thread_cpu_ns();
        int rc =
            sy_router_upsert_route(t->router, "bench", doc.ptr, doc.len, &e);
        uint64_t dt = bench_now_ns() - t0, dc = thread_cpu_ns() - c0;
        near |= sched_getcpu() == atomic_load(&g_other_cpu);
        thread_usage(&f1, &p1, &i1);
        if (rc) {
            fail("scale/one-route", rc, &e);
            break;
        }
        us[done] = (double)dt / 1e3;
        cpu[done] = (double)dc / 1e3;
        if (g_start)
            g_start[done] = t0;
        h = sy_router_acquire(t->router);
        const sy_snapshot *s = internal(h);
        char st = s->build ? 'b' : '.';
        if (s->build && !building)
            (*builds)++, st = 'S';
        building = s->build != NULL;
        if (s->base != base)
            (*swaps)++, st = 'W';
        tidy = !s->trash;
        if (g_state)
            g_state[done] = st;
        if (g_idmove)
            g_idmove[done] = s->id_old_chunks != NULL;
        if (g_faults) {
            g_faults[done] = (uint32_t)(f1 - f0);
            g_preempt[done] = (uint32_t)(p1 - p0);
            g_invol[done] = (uint32_t)(i1 - i0);
            g_near[done] = near;
        }
        done++;
        base = s->base;
        sy_snapshot_release(h);
    }
    bench_buf_free(&doc);
    return done;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The machine's load average (/proc/loadavg's first three fields). */
static const char *loadavg(void) {
    static char buf[64];
    snprintf(buf, sizeof buf, "unknown");
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        double a, b, c;
        if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3)
            snprintf(buf, sizeof buf, "%.2f %.2f %.2f", a, b, c);
        fclose(f);
    }
    return buf;
}

/* The machine's time charged to a thread that does nothing: this thread
 * reads its CPU clock in a loop for `ms` milliseconds; *largest: the most
 * thread CPU between two reads (us), *over: such gaps over 1 ms. On the
 * AMD EPYC VM a loop of 10 s saw gaps of up to 7 ms with no fault and no
 * switch (docs/performance.md, "Round 11 (session 47)"): a publish that
 * meets one is charged it, whatever its code. Run on the publisher's CPU
 * before and after a case (no watcher can see that CPU meanwhile). */
static void clock_gaps(unsigned ms, double *largest, unsigned *over) {
    uint64_t end = bench_now_ns() + (uint64_t)ms * 1000000u;
    uint64_t last = thread_cpu_ns(), most = 0;
    *over = 0;
    for (unsigned k = 1;; k++) {
        uint64_t c = thread_cpu_ns(), g = c - last;
        most = g > most ? g : most;
        *over += g > 1000000u;
        last = c;
        if (k % 1024 == 0 && bench_now_ns() >= end)
            break;
    }
    *largest = (double)most / 1e3;
}

/* The machine's huge-page faults so far, every process's (/proc/vmstat
 * thp_fault_alloc); -1 when unreadable. A 2 MB fault of memory the host
 * took back costs ~3.5 ms of the faulting thread's CPU on that VM; the
 * publish cases map none (the rebuild's bulk is off), a 1M apply ~275. */
static long thp_faults(void) {
    long v = -1;
    char line[128];
    FILE *f = fopen("/proc/vmstat", "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "thp_fault_alloc %ld", &v) == 1)
            break;
    if (f)
        fclose(f);
    return v;
}

/* What clock_gaps saw before (b) and after (a) a case, and the huge-page
 * faults over it. */
static void report_machine(const char *name, double b_us, unsigned b_over,
                           double a_us, unsigned a_over, long thp0, long thp1) {
    comment("%s: the publisher's CPU in a clock loop of 1 s before / "
            "after the case: the most thread CPU between two reads %.0f / "
            "%.0f us (%u / %u over 1 ms), the machine's time charged to a "
            "thread doing nothing; huge-page faults over the case (every "
            "process, /proc/vmstat): %ld",
            name, b_us, a_us, b_over, a_over,
            thp0 >= 0 && thp1 >= 0 ? thp1 - thp0 : -1);
}

/* The steal time of all CPUs so far, in ms (/proc/stat's first line, its
 * eighth field, in USER_HZ ticks of 10 ms); -1 when unreadable. */
static long steal_ms(void) {
    long v = -1;
    FILE *f = fopen("/proc/stat", "r");
    if (f) {
        unsigned long long x[8];
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &x[0],
                   &x[1], &x[2], &x[3], &x[4], &x[5], &x[6], &x[7]) == 8)
            v = (long)(x[7] * 10u);
        fclose(f);
    }
    return v;
}

static void report_steal(const char *name, long before, double secs) {
    long after = steal_ms();
    if (before < 0 || after < 0)
        comment("%s: steal time unknown (/proc/stat unreadable)", name);
    else
        comment("%s: the host stole %ld ms of this VM's vCPUs over the "
                "case's %.1f s (/proc/stat, 10 ms ticks)",
                name, after - before, secs);
}

/* The five upserts with the most `by`, with their wall and CPU time,
 * page faults, context switches and what they met (g_state). */
static void slowest(const char *name, const char *by_name, const double *by,
                    const double *us, const double *cpu, size_t done) {
    char line[512];
    size_t len = 0;
    bool *seen = calloc(done, 1);
    for (int k = 0; k < 5 && seen && (size_t)k < done; k++) {
        size_t w = SIZE_MAX;
        for (size_t i = 0; i < done; i++)
            if (!seen[i] && (w == SIZE_MAX || by[i] > by[w]))
                w = i;
        seen[w] = true;
        len += (size_t)snprintf(line + len, sizeof line - len,
                                " #%zu %.0f/%.0f us %uf %up %ui (%c)", w, us[w],
                                cpu[w], g_faults ? g_faults[w] : 0,
                                g_preempt ? g_preempt[w] : 0,
                                g_invol ? g_invol[w] : 0, g_state[w]);
        if (g_watch && len < sizeof line)
            len += (size_t)snprintf(line + len, sizeof line - len,
                                    " stall %.0f+%.0f us",
                                    (double)upsert_stall_ns(w, us) / 1e3,
                                    upsert_off_us(w, us, cpu));
        if (len >= sizeof line)
            break;
    }
    free(seen);
    comment("%s: slowest by %s (wall/CPU, page faults f, switches p, of "
            "them involuntary i):%s "
            "(b: a rebuild ran, S: one started, W: one swapped in, .: "
            "neither%s)",
            name, by_name, line,
            g_watch ? "; stall a+b: the machine's stalls the watcher saw "
                      "within it + its own CPU stopped, wall less CPU "
                      "with no switch, when over 50 us"
                    : "");
}

/* <name>-unstalled: the slowest upsert that no stall overlapped and that
 * was not switched out, and what the watcher saw. */
static void report_stalls(const char *name, size_t routes, const double *us,
                          const double *cpu, size_t done) {
    const stall_watch *w = g_watch;
    size_t calm = SIZE_MAX, hit = 0, off = 0, switched = 0;
    double lost_us = 0, off_us = 0;
    for (size_t i = 0; i < done; i++) {
        uint64_t ns = upsert_stall_ns(i, us);
        double o = upsert_off_us(i, us, cpu);
        hit += ns > 0;
        lost_us += (double)ns / 1e3;
        off += o > 0;
        off_us += o;
        if (ns > 0 || o > 0)
            continue;
        if (g_preempt && g_preempt[i]) {
            switched++;
            continue;
        }
        if (calm == SIZE_MAX || us[i] > us[calm])
            calm = i;
    }
    char uname[96];
    snprintf(uname, sizeof uname, "%s-unstalled", name);
    if (calm != SIZE_MAX)
        result(uname, routes, us[calm], "us");
    uint64_t most = 0, span = 0;
    for (size_t i = 0; i < w->n; i++) {
        most = w->v[i].t1 - w->v[i].t0 > most ? w->v[i].t1 - w->v[i].t0 : most;
        span += w->v[i].t1 - w->v[i].t0;
    }
    comment("%s: the stall watcher saw %zu stalls over %u us (%.1f ms in "
            "all, the longest %.0f us; %zu gaps it was switched out in, not "
            "counted%s); %zu publishes overlapped one (%.1f ms of their "
            "time); %zu publishes lost over %u us off their CPU with no "
            "switch (%.1f ms in all); %zu others were switched out",
            name, w->n, STALL_NS / 1000u, (double)span / 1e6,
            (double)most / 1e3, w->switched,
            w->lost ? ", some not recorded: the list was full" : "", hit,
            lost_us / 1e3, off, OFF_NS / 1000u, off_us / 1e3, switched);
    if (calm != SIZE_MAX)
        comment("%s-unstalled: the slowest publish with no stall seen, "
                "its CPU not stopped and not switched out: #%zu, %.1f us wall, "
                "%.1f us thread CPU "
                "(%c)",
                name, calm, us[calm], cpu[calm], g_state ? g_state[calm] : '?');
}

static void report_upserts(const char *name, size_t routes, double *us,
                           double *cpu, size_t done, size_t swaps,
                           size_t builds) {
    size_t worst = 0, over1 = 0, over2 = 0, cworst = 0;
    for (size_t i = 0; i < done; i++) {
        if (us[i] > us[worst])
            worst = i;
        if (cpu[i] > cpu[cworst])
            cworst = i;
        over1 += us[i] > 1000;
        over2 += us[i] > 2000;
    }
    result(name, routes, us[worst], "us");
    if (g_watch)
        report_stalls(name, routes, us, cpu, done);
    comment("%s: %zu upserts of distinct routes; the slowest was #%zu; %zu "
            "took over 1 ms, %zu over 2 ms; rebuilds started %zu, index "
            "swaps %zu",
            name, done, worst, over1, over2, builds, swaps);
    comment("%s: thread CPU time: the most was %.1f us (#%zu)", name,
            cpu[cworst], cworst);
    if (g_state) { /* the five slowest by CPU, by wall, what they met */
        size_t during = 0;
        for (size_t i = 0; i < done; i++)
            during += g_state[i] == 'b' || g_state[i] == 'S';
        comment("%s: %zu publishes ran a share of a rebuild", name, during);
        slowest(name, "CPU", cpu, us, cpu, done);
        slowest(name, "wall", us, us, cpu, done);
    }
    if (g_faults) {
        double *f = bench_xmalloc(done * sizeof *f);
        size_t preempted = 0, invol = 0, fmax = 0, calm = SIZE_MAX;
        size_t near = 0, near_invol = 0;
        for (size_t i = 0; i < done; i++) {
            f[i] = g_faults[i];
            preempted += g_preempt[i] > 0;
            invol += g_invol[i] > 0;
            near += g_near[i];
            near_invol += g_near[i] && g_invol[i];
            fmax = g_faults[i] > g_faults[fmax] ? i : fmax;
            if (!g_preempt[i] && (calm == SIZE_MAX || us[i] > us[calm]))
                calm = i;
        }
        comment("%s: page faults a publish: the most %u (#%zu); %zu "
                "publishes were switched out (context switches), %zu of "
                "them involuntarily (preempted)",
                name, g_faults[fmax], fmax, preempted, invol);
        if (g_watch)
            comment("%s: %zu publishes began or ended with the other thread "
                    "last seen on their CPU (sched_getcpu), %zu of them "
                    "preempted",
                    name, near, near_invol);
        if (calm != SIZE_MAX)
            comment("%s: the slowest publish not switched out: %.1f us wall, "
                    "%.1f us thread CPU (#%zu)",
                    name, us[calm], cpu[calm], calm);
        print_spread("(page faults)", f, done, "");
        free(f);
    }
    double *sorted = bench_xmalloc(done * sizeof *sorted);
    memcpy(sorted, cpu, done * sizeof *sorted);
    qsort(sorted, done, sizeof *sorted, cmp_double);
    double cpu999 = bench_quantile(sorted, done, 0.999);
    memcpy(sorted, us, done * sizeof *sorted);
    qsort(sorted, done, sizeof *sorted, cmp_double);
    comment("%s: p99.9 wall %.1f us, thread CPU %.1f us; load average %s", name,
            bench_quantile(sorted, done, 0.999), cpu999, loadavg());
    free(sorted);
    print_spread(name, us, done, "us");
    print_spread("(thread CPU)", cpu, done, "us");
}

/* ---- where a case's two threads run ---- */

/* The publisher (this thread) on one CPU, the case's other thread (the
 * reader, or the stall watcher) on another: a thread spinning beside the
 * publisher on one vCPU takes a time slice (~3 ms under EEVDF) from it
 * whenever the scheduler places both there. SY_BENCH_PIN=0 leaves both to
 * the scheduler; with one CPU allowed there is nothing to pin. */
typedef struct placement {
    bool pinned;
    cpu_set_t before; /* this thread's CPUs before the case */
} placement;

/* Pins this thread and sets `attr` (initialised here) for the other
 * thread; prints the placement as the case's condition. */
static void place(placement *p, pthread_attr_t *attr, const char *name,
                  const char *other) {
    p->pinned = false;
    pthread_attr_init(attr);
    const char *env = getenv("SY_BENCH_PIN");
    if (env && strcmp(env, "0") == 0) {
        comment("%s: the publisher and the %s not pinned (SY_BENCH_PIN=0): "
                "placed by the scheduler",
                name, other);
        return;
    }
    int cpus[2], n = 0;
    if (pthread_getaffinity_np(pthread_self(), sizeof p->before, &p->before) ==
        0)
        for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
            if (CPU_ISSET(c, &p->before))
                cpus[n++] = c;
    if (n < 2) {
        comment("%s: the publisher and the %s not pinned: fewer than two "
                "CPUs allowed, they share one",
                name, other);
        return;
    }
    cpu_set_t one, two;
    CPU_ZERO(&one);
    CPU_SET(cpus[0], &one);
    CPU_ZERO(&two);
    CPU_SET(cpus[1], &two);
    if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0 ||
        pthread_attr_setaffinity_np(attr, sizeof two, &two) != 0) {
        pthread_setaffinity_np(pthread_self(), sizeof p->before, &p->before);
        pthread_attr_destroy(attr);
        pthread_attr_init(attr);
        comment("%s: the publisher and the %s not pinned (affinity refused)",
                name, other);
        return;
    }
    p->pinned = true;
    comment("%s: the publisher pinned to CPU %d, the %s to CPU %d "
            "(SY_BENCH_PIN=0: both left to the scheduler)",
            name, cpus[0], other, cpus[1]);
}

/* This thread back on its CPUs of before the case. */
static void unplace(placement *p, pthread_attr_t *attr) {
    atomic_store(&g_other_cpu, -1);
    if (p->pinned)
        pthread_setaffinity_np(pthread_self(), sizeof p->before, &p->before);
    pthread_attr_destroy(attr);
}

/* ---- a publish while a reader matches ---- */

typedef struct reader {
    sy_router *router;
    const bench_reqs *rs;
    _Atomic int stop;
    _Atomic int started;
    uint64_t lookups, hits;
    stall_watch *watch; /* the reader watches for stalls too */
} reader;

static void *reader_run(void *arg) {
    reader *r = arg;
    sy_match_ctx *ctx = NULL;
    sy_error e;
    if (sy_match_ctx_new(NULL, &ctx, &e) != 0)
        return NULL;
    watch_clock c;
    watch_start(&c);
    atomic_store(&r->started, 1);
    size_t pos = 0;
    uint64_t n = 0, hits = 0;
    while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
        sy_snapshot *s = sy_router_acquire(r->router);
        for (int k = 0; k < 64; k++) {
            sy_match *m = NULL;
            sy_snapshot_match(s, ctx, &r->rs->reqs[pos], &m);
            hits += m != NULL;
            if (++pos == r->rs->n)
                pos = 0;
            if ((k & 15) == 15) /* every ~2-3 us */
                watch_tick(r->watch, &c);
        }
        sy_snapshot_release(s);
        n += 64;
    }
    r->lookups = n;
    r->hits = hits;
    sy_match_ctx_free(ctx);
    return NULL;
}

/* Index against scan on requests for routes the upserts changed (the
 * overlays' routes, host keys included): every one must be found. */
static void check_updated(table *t, size_t from, const char *variant,
                          size_t done) {
    bench_reqs rs = {0};
    char host[64], path[64];
    for (size_t r = 0; r < done && rs.n < 300; r += 1 + done / 300) {
        size_t i = (from + r * 7919) % t->routes;
        const char *hp = "api.example.com";
        if (i % 3 == 0) {
            snprintf(path, sizeof path, "/s%zu/ljj%s", i, variant);
        } else if (i % 3 == 1) {
            snprintf(path, sizeof path, "/u%zu%s/bob", i, variant);
        } else {
            snprintf(host, sizeof host, "t%zu%s.example.com", i, variant);
            snprintf(path, sizeof path, "/api/orders/1");
            hp = host;
        }
        bench_reqs_add(&rs, "GET", hp, path, NULL, 0);
    }
    sy_match_ctx *ctx = NULL;
    sy_error e;
    if (sy_match_ctx_new(NULL, &ctx, &e) == 0) {
        sy_snapshot *s = sy_router_acquire(t->router);
        size_t hits = 0, differ = cross_check(s, ctx, &rs, rs.n, &hits);
        g_differ += differ;
        comment("scale/publish-max-readers: %zu requests to updated routes "
                "checked against the scan: %zu hit, %zu differ",
                rs.n, hits, differ);
        sy_snapshot_release(s);
        sy_match_ctx_free(ctx);
    }
    bench_reqs_free(&rs);
}

static void scale_with_readers(table *t) {
    static const char *name = "scale/publish-max-readers";
    enum { MAX_RUNS = 200000 };
    double *us = bench_xmalloc(MAX_RUNS * sizeof *us);
    double *cpu = bench_xmalloc(MAX_RUNS * sizeof *cpu);
    notes_alloc(MAX_RUNS, false);
    stall_watch watch;
    watch_init(&watch, STALLS_MAX);
    reader rd = {.router = t->router, .rs = &t->reqs, .watch = &watch};
    pthread_t tid;
    placement pl;
    pthread_attr_t attr;
    place(&pl, &attr, name, "reader");
    double gap0, gap1;
    unsigned over0, over1;
    clock_gaps(1000, &gap0, &over0);
    long thp0 = thp_faults();
    if (pthread_create(&tid, &attr, reader_run, &rd) != 0) {
        unplace(&pl, &attr);
        comment("SKIPPED %s: no reader thread", name);
        free(us);
        free(cpu);
        free(watch.v);
        notes_free();
        return;
    }
    while (!atomic_load(&rd.started))
        ;
    size_t swaps, builds;
    long steal0 = steal_ms();
    uint64_t t0 = bench_now_ns();
    size_t done = upserts(t, 500001, "r", 10000, MAX_RUNS, true, false, us, cpu,
                          &swaps, &builds);
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    atomic_store(&rd.stop, 1);
    pthread_join(tid, NULL);
    long thp1 = thp_faults();
    clock_gaps(1000, &gap1, &over1);
    unplace(&pl, &attr);
    if (done)
        check_updated(t, 500001, "r", done);
    if (done) {
        g_watch = &watch;
        report_upserts(name, t->routes, us, cpu, done, swaps, builds);
        report_steal(name, steal0, secs);
        report_machine(name, gap0, over0, gap1, over1, thp0, thp1);
        g_watch = NULL;
        comment("%s: a reader thread matched without pause meanwhile: %.1f M "
                "lookups in %.1f s (%.0f ns each), %.1f %% hits",
                name, (double)rd.lookups / 1e6, secs,
                rd.lookups ? secs * 1e9 / (double)rd.lookups : 0,
                rd.lookups ? 100.0 * (double)rd.hits / (double)rd.lookups : 0);
    }
    free(us);
    free(cpu);
    free(watch.v);
    notes_free();
}

/* ---- a stall watcher beside a run of upserts ---- */

/* The watcher on a CPU of its own while this thread upserts; from
 * watched_stop to watched_free the report reads what it saw (g_watch). */
typedef struct watched {
    stall_watch w;
    pthread_t tid;
    placement pl;
    pthread_attr_t attr;
    bool on;
} watched;

static void watched_start(watched *x, const char *name) {
    watch_init(&x->w, STALLS_MAX);
    place(&x->pl, &x->attr, name, "stall watcher");
    x->on = pthread_create(&x->tid, &x->attr, watch_run, &x->w) == 0;
    if (!x->on)
        comment("%s: no stall watcher (no thread)", name);
    while (x->on && !atomic_load(&x->w.started))
        ;
}

static void watched_stop(watched *x) {
    if (x->on) {
        atomic_store(&x->w.stop, 1);
        pthread_join(x->tid, NULL);
        g_watch = &x->w;
    }
    unplace(&x->pl, &x->attr);
}

static void watched_free(watched *x) {
    g_watch = NULL;
    free(x->w.v);
}

/* ---- a table that grows by one route a publish ---- */

static void scale_grow(table *t) {
    static const char *name = "scale/publish-grow-max";
    enum { RUNS = 200000 };
    double *us = bench_xmalloc(RUNS * sizeof *us);
    double *cpu = bench_xmalloc(RUNS * sizeof *cpu);
    notes_alloc(RUNS, true);
    watched wd;
    watched_start(&wd, name);
    double gap0, gap1;
    unsigned over0, over1;
    clock_gaps(1000, &gap0, &over0);
    long thp0 = thp_faults();
    size_t swaps, builds, from = t->routes;
    long steal0 = steal_ms();
    uint64_t t0 = bench_now_ns();
    size_t done =
        upserts(t, from, "", RUNS, RUNS, false, true, us, cpu, &swaps, &builds);
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    long thp1 = thp_faults();
    clock_gaps(1000, &gap1, &over1);
    watched_stop(&wd);
    sy_snapshot *h = sy_router_acquire(t->router);
    size_t now = sy_snapshot_route_count(h);
    sy_snapshot_release(h);
    if (done && now != from + done) {
        comment("%s: %zu routes after %zu added to %zu", name, now, done, from);
        g_differ++;
    }
    if (done) {
        size_t worst = 0; /* before report_upserts sorts cpu */
        size_t moves = 0, mworst = SIZE_MAX, first = SIZE_MAX;
        for (size_t i = 1; i < done; i++)
            worst = cpu[i] > cpu[worst] ? i : worst;
        size_t last = SIZE_MAX; /* the publish that finished the move */
        for (size_t i = 0; i < done; i++) {
            if (!g_idmove[i] && i > 0 && g_idmove[i - 1])
                last = i;
            if (!g_idmove[i])
                continue;
            moves++;
            first = first == SIZE_MAX ? i : first;
            mworst = mworst == SIZE_MAX || cpu[i] > cpu[mworst] ? i : mworst;
        }
        if (moves)
            comment("%s: the id table grew at route %zu (publish #%zu: %.1f "
                    "us thread CPU) and moved over %zu publishes, the most "
                    "%.1f us thread CPU (#%zu, '%c')",
                    name, from + first, first, cpu[first], moves, cpu[mworst],
                    mworst, g_state[mworst]);
        else
            comment("%s: the id table grew in no publish", name);
        if (last != SIZE_MAX) /* it drops the old table's chunks */
            comment("%s: the publish that finished the move (#%zu) took "
                    "%.1f us thread CPU, %.1f us wall ('%c')",
                    name, last, cpu[last], us[last], g_state[last]);
        report_upserts(name, from, us, cpu, done, swaps, builds);
        report_steal(name, steal0, secs);
        report_machine(name, gap0, over0, gap1, over1, thp0, thp1);
        comment("%s: the publish of the most thread CPU added route %zu "
                "(the table then held %zu)",
                name, from + worst, from + worst + 1);
    }
    watched_free(&wd);
    free(us);
    free(cpu);
    notes_free();
}

void case_scale(void) {
    bool w_compile = want("scale/compile"), w_match = want("scale/match"),
         w_max = want("scale/one-route-max"),
         w_read = want("scale/publish-max-readers"),
         w_grow = want("scale/publish-grow-max");
    if (!w_compile && !w_match && !w_max && !w_read && !w_grow)
        return;
    double small_ns = -1;
    table small = {0};
    if (w_match) {
        table_scale(SCALE_SMALL, SCALE_NREQ, &small.doc, &small.reqs);
        if (table_load(&small, "scale/match") == 0) {
            comment("scale/match %zu: applied in %.1f ms", small.routes,
                    small.apply_ms);
            print_huge("scale/match 100000");
            small_ns = scale_match("scale/match", &small, 300);
        }
        bench_buf_free(&small.doc); /* the 100k table stays for the pairs */
    }
    table t = {0};
    table_scale(SCALE_BIG, SCALE_NREQ, &t.doc, &t.reqs);
    sy_error e;
    int rc = router_fresh(&t.router, &e);
    if (rc) {
        fail("scale/compile", rc, &e);
        table_free(&t);
        table_free(&small);
        return;
    }
    sy_report *rep = NULL;
    uint64_t c0 = thread_cpu_ns(), t0 = bench_now_ns();
    rc = sy_router_apply(t.router, "bench", t.doc.ptr, t.doc.len, &rep, &e);
    uint64_t dt = bench_now_ns() - t0, dc = thread_cpu_ns() - c0;
    if (rc) {
        fail("scale/compile", rc, &e);
        if (rep)
            sy_report_free(rep);
        table_free(&t);
        table_free(&small);
        return;
    }
    sy_snapshot *h = sy_router_acquire(t.router);
    t.routes = sy_snapshot_route_count(h);
    sy_snapshot_release(h);
    if (w_compile) {
        result("scale/compile", t.routes, (double)dt / 1e6, "ms");
        comment("scale/compile %zu: document %.1f MiB; report: parse+compile "
                "%.1f ms, build+publish %.1f ms; thread CPU time %.1f ms; "
                "one apply to a fresh router",
                t.routes, (double)t.doc.len / 1048576,
                rep ? (double)sy_report_parse_us(rep) / 1e3 : 0,
                rep ? (double)sy_report_publish_us(rep) / 1e3 : 0,
                (double)dc / 1e6);
    }
    if (rep)
        sy_report_free(rep);
    print_huge("scale 1000000, after the apply");
    if (w_match) {
        double big_ns = scale_match("scale/match", &t, 100);
        if (small_ns > 0 && big_ns > 0) {
            match_pairs(&small, &t);
            print_tlb_reach();
        }
    }
    table_free(&small);
    if (w_max) {
        enum { RUNS = 10000 };
        double *us = bench_xmalloc(RUNS * sizeof *us);
        double *cpu = bench_xmalloc(RUNS * sizeof *cpu);
        notes_alloc(RUNS, false);
        watched wd;
        watched_start(&wd, "scale/one-route-max");
        size_t swaps, builds;
        long steal0 = steal_ms();
        uint64_t s0 = bench_now_ns();
        size_t done = upserts(&t, 1, "m", RUNS, RUNS, false, false, us, cpu,
                              &swaps, &builds);
        double secs = (double)(bench_now_ns() - s0) / 1e9;
        watched_stop(&wd);
        if (done) {
            report_upserts("scale/one-route-max", t.routes, us, cpu, done,
                           swaps, builds);
            report_steal("scale/one-route-max", steal0, secs);
        }
        watched_free(&wd);
        free(us);
        free(cpu);
        notes_free();
    }
    if (w_read)
        scale_with_readers(&t);
    if (w_grow) /* last: the table is larger after it */
        scale_grow(&t);
    table_free(&t);
}
