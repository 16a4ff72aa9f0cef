/*
 * bench_r3.h - the peer in the same run: Debian's libr3 (a C radix tree
 * router) loaded with a route document of Method + Path routes and matched
 * the way its API requires (one match entry per request). Only built when
 * libr3 is found (SY_BENCH_HAVE_R3).
 */
#ifndef SY_BENCH_R3_H
#define SY_BENCH_R3_H

#include "bench_util.h"

typedef struct bench_r3 bench_r3;

/* Build an r3 tree from a route document whose routes have one Method and
 * one Path predicate each (the GitHub table), and prepare the requests of
 * `rs`. NULL with a reason in err[] when a route cannot be expressed. */
bench_r3 *bench_r3_new(const char *doc, size_t len, const bench_reqs *rs,
                       char *err, size_t errlen);
void bench_r3_free(bench_r3 *r);

/* The route document index r3 returns for request i, or -1 for none. */
long bench_r3_lookup(bench_r3 *r, size_t i);

/* The id of the route at document index i, or "(none)". */
const char *bench_r3_route_id(const bench_r3 *r, long i);

/* `count` lookups over the prepared requests in turn, each with its own
 * match entry (created, matched, freed); returns the number of hits. */
uint64_t bench_r3_run(bench_r3 *r, uint64_t count);

/* The number of prepared requests. */
size_t bench_r3_requests(const bench_r3 *r);

#endif
