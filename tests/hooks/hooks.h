/*
 * hooks.h - test and benchmark hooks on library internals, built from
 * tests/hooks/ into the test suites and switchyard-bench, never into the
 * shipped library: a lower renewal threshold for the publication domain,
 * the publication and selection micro-benchmarks, and the deliberately
 * broken publication protocol the stress test must catch.
 */
#ifndef SY_TEST_HOOKS_H
#define SY_TEST_HOOKS_H

#include "snapshot/publish.h"

/* Renew a shard's word once it holds this many borrows (the library
 * renews at 2^40), so renewals race with readers in tests. Writer side. */
void sy__pub_set_renew_threshold(sy__pub *p, uint64_t borrows);

/*
 * Benchmark: `threads` threads each do `iters` acquire + release pairs on one
 * domain (touching the object in between), while, if `storm`, one more
 * thread publishes new objects without pause. Returns the mean, over the
 * reader threads, of each thread's CPU time per pair in ns (CPU time, so a
 * loaded machine does not inflate it), or a negative value on failure.
 */
double sy__pub_bench_acquire_release_ns(int threads, bool storm,
                                        uint64_t iters);

/*
 * Benchmark for switchyard-bench: build a service of `instances` instances
 * (weights 1..4, three zones, unversioned) and return the mean ns per
 * sy__service_select over `iters` calls with policy "round-robin", "random"
 * or "hash" (hash keys vary per call). Negative on error.
 */
double sy__service_bench_select_ns(const char *policy, size_t instances,
                                   uint64_t iters);

/*
 * The publication protocol, deliberately weakened (tests/test_publish_stress.c
 * must catch both), selected by sy__pub_broken_mode (set before threads
 * start; 0 = the library's protocol unchanged):
 *   1  free on swap: a retired object counts as dead at once and is
 *      destroyed by the publish that retired it, held or not;
 *   2  two-step acquire: read the slot, then count the borrow in a second
 *      step, leaving a window in which a publish moves the word on.
 * The other calls are the library's under the same prefix, so one table
 * of functions can name a whole protocol.
 */
extern int sy__pub_broken_mode;
int sy__pub_broken_new(const sy__alloc *alloc, const sy__pub_options *opts,
                       sy__pub_obj *initial, sy__pub **out);
void sy__pub_broken_free(sy__pub *p);
sy__pub_ref sy__pub_broken_acquire(sy__pub *p);
void sy__pub_broken_release(sy__pub_ref ref);
int sy__pub_broken_publish(sy__pub *p, sy__pub_obj *next);
size_t sy__pub_broken_reclaim(sy__pub *p);
void sy__pub_broken_metrics_get(const sy__pub *p, sy__pub_metrics *out);

#endif
