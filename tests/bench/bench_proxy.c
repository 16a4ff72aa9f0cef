/*
 * bench_proxy.c - the proxy/ case of switchyard-bench: the library's work
 * a proxied request costs a host, what the nginx module and the
 * mini-gateway call per request (acquire, match, the plan's status and
 * action, the target with its instance, release), on the table of
 * examples/nginx-module/bench/bench_balancer.py: 10 Path routes to
 * lb://be (two instances) with StripPrefix=1, a GET with only a Host
 * header (docs/performance.md, "the library's cost per request on the
 * proxy path"). Its instructions a request: run it under callgrind with
 * --toggle-collect=run_proxy and divide by the request count it prints.
 */
#include "bench_run.h"

#include <stdio.h>
#include <string.h>

#define ROUTES 10

typedef struct proxy_arg {
    sy_router *router;
    sy_match_ctx *ctx;
    char paths[ROUTES][16];
    uint64_t requests, sink;
} proxy_arg;

/* What a host runs for one proxied request (a batch_fn). */
static void run_proxy(void *arg, uint64_t count) {
    proxy_arg *a = arg;
    sy_header host = {{"Host", 4}, {"127.0.0.1:8080", 14}};
    for (uint64_t i = 0; i < count; i++, a->requests++) {
        const sy_snapshot *s = sy_router_acquire(a->router);
        const char *p = a->paths[a->requests % ROUTES];
        sy_request req = SY_REQUEST_INIT;
        req.method = (sy_str){"GET", 3};
        req.scheme = (sy_str){"http", 4};
        req.host = host.value;
        req.path = (sy_str){p, strlen(p)};
        req.remote_addr = (sy_str){"127.0.0.1", 9};
        req.now_ms = 1700000000000LL;
        req.seed = a->requests + 1;
        req.headers = &host;
        req.header_count = 1;
        sy_match *m = NULL;
        sy_target t;
        if (sy_snapshot_match(s, a->ctx, &req, &m) == 0 && m &&
            sy_match_status(m) == 0 && sy_match_action(m) == SY_ACTION_PROXY &&
            sy_match_target(m, NULL, 0, &t, NULL) == 0)
            a->sink += t.port + t.path.len + t.host_header.len +
                       sy_match_response_op_count(m);
        sy_snapshot_release((sy_snapshot *)(uintptr_t)s);
    }
}

void case_proxy(void) {
    if (!want("proxy/lb-strip"))
        return;
    sy_error e;
    proxy_arg a = {0};
    bench_buf doc = {0};
    bench_buf_printf(&doc, "{\"version\":\"1\",\"routes\":[");
    for (int i = 0; i < ROUTES; i++) {
        bench_buf_printf(
            &doc,
            "%s{\"id\":\"svc%d\",\"uri\":\"lb://be\",\"predicates\":"
            "[\"Path=/svc%d/**\"],\"filters\":[\"StripPrefix=1\"]}",
            i ? "," : "", i, i);
        snprintf(a.paths[i], sizeof a.paths[i], "/svc%d/x", i);
    }
    bench_buf_printf(&doc, "]}");
    sy_instance in[2] = {{.id = "be0", .host = "127.0.0.1", .port = 9001},
                         {.id = "be1", .host = "127.0.0.1", .port = 9002}};
    int rc = router_fresh(&a.router, &e);
    if (!rc)
        rc = sy_router_apply(a.router, "bench", doc.ptr, doc.len, NULL, &e);
    if (!rc)
        rc = sy_router_set_instances(a.router, "be", in, 2, NULL, &e);
    if (!rc)
        rc = sy_match_ctx_new(NULL, &a.ctx, &e);
    bench_buf_free(&doc);
    if (rc) {
        fail("proxy/lb-strip", rc, &e);
    } else {
        run_proxy(&a, 1000); /* warm: the context's table, the arena */
        if (a.sink == 0) {
            comment("SKIPPED proxy/lb-strip: no proxied target");
        } else {
            uint64_t batch;
            double ns =
                measure(run_proxy, &a, MATCH_BATCH_NS, MATCH_REPS, &batch);
            result("proxy/lb-strip", ROUTES, ns, "ns");
            comment("proxy/lb-strip: %llu requests run in all (run_proxy)",
                    (unsigned long long)a.requests);
        }
    }
    sy_match_ctx_free(a.ctx);
    if (a.router)
        sy_router_free(a.router);
}
