/*
 * bench_util.h - small helpers for switchyard-bench: a monotonic clock,
 * medians, a growable text buffer (to generate route documents), a set of
 * pre-built requests, and the description of the machine.
 */
#ifndef SY_BENCH_UTIL_H
#define SY_BENCH_UTIL_H

#include "switchyard.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* Nanoseconds from CLOCK_MONOTONIC. */
uint64_t bench_now_ns(void);

/* Median of v[0..n) (sorts v in place); 0 when n == 0. */
double bench_median(double *v, size_t n);
/* The q-quantile (0..1) of v[0..n), v already sorted. */
double bench_quantile(const double *v, size_t n, double q);

/* A growable NUL-terminated text buffer; aborts the program when out of
 * memory (a benchmark has nothing better to do). */
typedef struct bench_buf {
    char *ptr;
    size_t len;
    size_t cap;
} bench_buf;

void bench_buf_printf(bench_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void bench_buf_free(bench_buf *b);

/*
 * A set of requests built once, before any timing: every string is copied
 * into memory owned by the set, so the timed loops only read.
 */
typedef struct bench_reqs {
    sy_request *reqs;
    size_t n, cap;
    char **strings; /* every copied string and header array, to free */
    size_t nstrings, capstrings;
} bench_reqs;

/* Add a request. `host` may be NULL; headers come as name/value pairs
 * (2 * header_count strings). Returns the request for further edits. */
sy_request *bench_reqs_add(bench_reqs *rs, const char *method, const char *host,
                           const char *path, const char *const *headers,
                           size_t header_count);
void bench_reqs_free(bench_reqs *rs);

/* A small deterministic generator (splitmix64). */
uint64_t bench_rand(uint64_t *state);

/* The whole file as a NUL-terminated string (len in *len), or NULL. */
char *bench_read_file(const char *path, size_t *len);

/* VmRSS of this process in bytes, or 0 if unknown. */
uint64_t bench_rss_bytes(void);
/* Pages of the process that the system may take back (MADV_FREE), counted
 * in VmRSS until it does: LazyFree of /proc/self/smaps_rollup (0 when not
 * reported). */
uint64_t bench_lazyfree_bytes(void);
/* The process's anonymous memory in transparent huge pages: AnonHugePages
 * of /proc/self/smaps_rollup (0 when not reported). */
uint64_t bench_anon_huge_bytes(void);

/* Print the machine and build description as '#' comment lines. */
void bench_print_machine(void);

/* Abort with a message when out of memory. */
void *bench_xmalloc(size_t n);

#endif
