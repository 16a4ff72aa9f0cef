/*
 * bench_tables.h - the route tables of switchyard-bench: each generator
 * writes a whole route document (JSON text) and the requests that hit it,
 * built before any timing.
 */
#ifndef SY_BENCH_TABLES_H
#define SY_BENCH_TABLES_H

#include "bench_util.h"

/* `Path=/user{i}/ljj`, requests GET /user{i}/ljj. */
void table_static(size_t n, size_t nreq, bench_buf *doc, bench_reqs *rs);
/* `Path=/user{i}/{name}`, requests GET /user{i}/ljj. */
void table_param(size_t n, size_t nreq, bench_buf *doc, bench_reqs *rs);
/* `Path=/p{i}/` then `**` (prefix routes), requests GET /p{i}/a/b. */
void table_prefix(size_t n, size_t nreq, bench_buf *doc, bench_reqs *rs);
/* One path for all, `Host=h{i}.example.com` (even i) or
 * `Host=*.w{i}.example.com` (odd i). */
void table_hosts(size_t n, size_t nreq, bench_buf *doc, bench_reqs *rs);
/* A gateway-like table: services of six routes each mixing Host, Path,
 * Method and Header predicates in varied orders, orders -5..5, a few
 * filters; see bench_tables.c. */
void table_mixed(size_t n, size_t nreq, bench_buf *doc, bench_reqs *rs);

/* The scale table: kinds i % 3: `Path=/s{i}/ljj`, `Path=/u{i}/{name}`,
 * `Host=t{i}.example.com` + `Path=/api/` then `**` (see bench_tables.c). */
void table_scale(size_t n, size_t nreq, bench_buf *doc, bench_reqs *rs);
/* Route i of table_scale, its path or host suffixed by `variant`, as a
 * route object for sy_router_upsert_route. */
void table_scale_route(size_t i, const char *variant, bench_buf *out);

/* One route of table_static with its path suffixed by `variant` ("" or
 * "2"), as a route object for sy_router_upsert_route. */
void table_static_route(size_t i, const char *variant, bench_buf *out);

#endif
