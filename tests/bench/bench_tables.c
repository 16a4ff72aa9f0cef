/* bench_tables.c - route tables and requests of switchyard-bench. */
#include "bench_tables.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* Route ids: "<prefix><i>". Predicates and filters are given as JSON string
 * contents, already escaped. */
static void route_at(bench_buf *b, bool sep, size_t i, const char *prefix,
                     int order, const char *uri, const char *const *preds,
                     size_t np, const char *const *filters, size_t nf) {
    bench_buf_printf(b, "%s{\"id\":\"%s%zu\",\"uri\":\"%s\"", sep ? ",\n" : "",
                     prefix, i, uri);
    if (order)
        bench_buf_printf(b, ",\"order\":%d", order);
    bench_buf_printf(b, ",\"predicates\":[");
    for (size_t k = 0; k < np; k++)
        bench_buf_printf(b, "%s\"%s\"", k ? "," : "", preds[k]);
    bench_buf_printf(b, "]");
    if (nf) {
        bench_buf_printf(b, ",\"filters\":[");
        for (size_t k = 0; k < nf; k++)
            bench_buf_printf(b, "%s\"%s\"", k ? "," : "", filters[k]);
        bench_buf_printf(b, "]");
    }
    bench_buf_printf(b, "}");
}

static void route(bench_buf *b, size_t i, const char *prefix, int order,
                  const char *uri, const char *const *preds, size_t np,
                  const char *const *filters, size_t nf) {
    route_at(b, i != 0, i, prefix, order, uri, preds, np, filters, nf);
}

static void doc_begin(bench_buf *b) {
    b->len = 0;
    bench_buf_printf(b, "{\"version\":\"bench-1\",\"routes\":[\n");
}

static void doc_end(bench_buf *b) {
    bench_buf_printf(b, "\n]}\n");
}

/* The routes the requests hit: a random permutation of 0..n-1 when
 * nreq >= n, else nreq distinct routes drawn at random. */
static size_t *sample(size_t n, size_t nreq, size_t *count) {
    size_t *perm = bench_xmalloc(n * sizeof *perm);
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    uint64_t st = 0x5eed + n;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(bench_rand(&st) % i);
        size_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
    *count = nreq < n ? nreq : n;
    return perm;
}

static const char *const common_headers[] = {
    "User-Agent", "bench/1.0", "Accept", "*/*", "Accept-Encoding", "gzip"};

void table_static(size_t n, size_t nreq, bench_buf *doc, bench_reqs *rs) {
    char p[64], path[64];
    doc_begin(doc);
    for (size_t i = 0; i < n; i++) {
        snprintf(p, sizeof p, "Path=/user%zu/ljj", i);
        const char *preds[] = {p};
        route(doc, i, "s", 0, i % 100 == 0 ? "lb://svc" : "http://backend:80",
              preds, 1, NULL, 0);
    }
    doc_end(doc);
    size_t k, *s = sample(n, nreq, &k);
    for (size_t j = 0; j < k; j++) {
        snprintf(path, sizeof path, "/user%zu/ljj", s[j]);
        bench_reqs_add(rs, "GET", "api.example.com", path, common_headers, 3);
    }
    free(s);
}

void table_static_route(size_t i, const char *variant, bench_buf *out) {
    out->len = 0;
    bench_buf_printf(out,
                     "{\"id\":\"s%zu\",\"uri\":\"%s\","
                     "\"predicates\":[\"Path=/user%zu/ljj%s\"]}",
                     i, i % 100 == 0 ? "lb://svc" : "http://backend:80", i,
                     variant);
}

void table_param(size_t n, size_t nreq, bench_buf *doc, bench_reqs *rs) {
    char p[64], path[64];
    doc_begin(doc);
    for (size_t i = 0; i < n; i++) {
        snprintf(p, sizeof p, "Path=/user%zu/{name}", i);
        const char *preds[] = {p};
        route(doc, i, "u", 0, "http://backend:80", preds, 1, NULL, 0);
    }
    doc_end(doc);
    size_t k, *s = sample(n, nreq, &k);
    for (size_t j = 0; j < k; j++) {
        snprintf(path, sizeof path, "/user%zu/ljj", s[j]);
        bench_reqs_add(rs, "GET", "api.example.com", path, common_headers, 3);
    }
    free(s);
}

void table_prefix(size_t n, size_t nreq, bench_buf *doc, bench_reqs *rs) {
    char p[64], path[64];
    doc_begin(doc);
    for (size_t i = 0; i < n; i++) {
        snprintf(p, sizeof p, "Path=/p%zu/**", i);
        const char *preds[] = {p};
        route(doc, i, "p", 0, "http://backend:80", preds, 1, NULL, 0);
    }
    doc_end(doc);
    size_t k, *s = sample(n, nreq, &k);
    for (size_t j = 0; j < k; j++) {
        snprintf(path, sizeof path, "/p%zu/a/b", s[j]);
        bench_reqs_add(rs, "GET", "api.example.com", path, common_headers, 3);
    }
    free(s);
}

void table_hosts(size_t n, size_t nreq, bench_buf *doc, bench_reqs *rs) {
    char h[80], host[80];
    doc_begin(doc);
    for (size_t i = 0; i < n; i++) {
        if (i % 2 == 0)
            snprintf(h, sizeof h, "Host=h%zu.example.com", i);
        else
            snprintf(h, sizeof h, "Host=*.w%zu.example.com", i);
        const char *preds[] = {"Path=/api/data", h};
        route(doc, i, "h", 0, "http://backend:80", preds, 2, NULL, 0);
    }
    doc_end(doc);
    size_t k, *s = sample(n, nreq, &k);
    for (size_t j = 0; j < k; j++) {
        size_t i = s[j];
        if (i % 2 == 0)
            snprintf(host, sizeof host, "h%zu.example.com", i);
        else
            snprintf(host, sizeof host, "eu.w%zu.example.com", i);
        bench_reqs_add(rs, "GET", host, "/api/data", common_headers, 3);
    }
    free(s);
}

/*
 * The mixed table. Route i belongs to service s = i / 6 and is of kind
 * i % 6:
 *   0  Host=svc{s}.example.com, Path=/api/r{i}/ then **, Method=GET;
 *      StripPrefix
 *   1  Path=/api/r{i}/items/{id}, Method=GET,POST, Header=X-Tenant, t\d+
 *   2  Host=*.t{s}.example.org, Path=/r{i}/static/health
 *   3  Method=POST, Path=/r{i}/orders/{orderId}, Header=X-Version, v[12]
 *   4  Header=X-Api-Key, Host=api{s}.example.net, Path=/r{i}/ then {*rest}
 *   5  Host=tenant{s}.example.com, Path=/shared/ then **, Method=GET,HEAD
 *      (one sixth of the table shares one path and differs by host)
 * Orders cycle through -5..5. Every request carries three common headers
 * plus what its route needs.
 */
void table_mixed(size_t n, size_t nreq, bench_buf *doc, bench_reqs *rs) {
    char a[96], b[96], c[96], uri[64];
    doc_begin(doc);
    for (size_t i = 0; i < n; i++) {
        size_t s = i / 6;
        int order = (int)((i * 37) % 11) - 5;
        const char *preds[3];
        const char *filters[2];
        size_t np = 3, nf = 0;
        switch (i % 6) {
        case 0:
            snprintf(a, sizeof a, "Host=svc%zu.example.com", s);
            snprintf(b, sizeof b, "Path=/api/r%zu/**", i);
            preds[0] = a, preds[1] = b, preds[2] = "Method=GET";
            filters[nf++] = "StripPrefix=2";
            break;
        case 1:
            snprintf(a, sizeof a, "Path=/api/r%zu/items/{id}", i);
            preds[0] = a, preds[1] = "Method=GET,POST";
            preds[2] = "Header=X-Tenant, t\\\\d+";
            filters[nf++] = "AddRequestHeader=X-Gateway, sy";
            break;
        case 2:
            snprintf(a, sizeof a, "Host=*.t%zu.example.org", s);
            snprintf(b, sizeof b, "Path=/r%zu/static/health", i);
            preds[0] = a, preds[1] = b, np = 2;
            break;
        case 3:
            snprintf(b, sizeof b, "Path=/r%zu/orders/{orderId}", i);
            preds[0] = "Method=POST", preds[1] = b;
            preds[2] = "Header=X-Version, v[12]";
            break;
        case 4:
            snprintf(b, sizeof b, "Host=api%zu.example.net", s);
            snprintf(c, sizeof c, "Path=/r%zu/{*rest}", i);
            preds[0] = "Header=X-Api-Key", preds[1] = b, preds[2] = c;
            filters[nf++] = "RemoveRequestHeader=X-Api-Key";
            break;
        default:
            snprintf(a, sizeof a, "Host=tenant%zu.example.com", s);
            preds[0] = a, preds[1] = "Path=/shared/**";
            preds[2] = "Method=GET,HEAD";
            break;
        }
        if (i % 6 == 0 || i % 6 == 3)
            snprintf(uri, sizeof uri, "lb://svc%zu", s);
        else
            snprintf(uri, sizeof uri, "http://svc%zu.internal:8080", s);
        route(doc, i, "m", order, uri, preds, np, filters, nf);
    }
    doc_end(doc);

    size_t k, *smp = sample(n, nreq, &k);
    char host[96], path[96];
    for (size_t j = 0; j < k; j++) {
        size_t i = smp[j], s = i / 6;
        const char *h[12];
        size_t nh = 3;
        for (size_t x = 0; x < 6; x++)
            h[x] = common_headers[x];
        const char *method = "GET";
        switch (i % 6) {
        case 0:
            snprintf(host, sizeof host, "svc%zu.example.com", s);
            snprintf(path, sizeof path, "/api/r%zu/orders/17", i);
            break;
        case 1:
            method = "POST";
            snprintf(host, sizeof host, "svc%zu.example.com", s);
            snprintf(path, sizeof path, "/api/r%zu/items/42", i);
            h[2 * nh] = "X-Tenant", h[2 * nh + 1] = "t7", nh++;
            break;
        case 2:
            snprintf(host, sizeof host, "eu.t%zu.example.org", s);
            snprintf(path, sizeof path, "/r%zu/static/health", i);
            break;
        case 3:
            method = "POST";
            snprintf(host, sizeof host, "svc%zu.example.com", s);
            snprintf(path, sizeof path, "/r%zu/orders/1001", i);
            h[2 * nh] = "X-Version", h[2 * nh + 1] = "v2", nh++;
            break;
        case 4:
            snprintf(host, sizeof host, "api%zu.example.net", s);
            snprintf(path, sizeof path, "/r%zu/a/b", i);
            h[2 * nh] = "X-Api-Key", h[2 * nh + 1] = "k-123", nh++;
            break;
        default:
            snprintf(host, sizeof host, "tenant%zu.example.com", s);
            snprintf(path, sizeof path, "/shared/docs/index.html");
            break;
        }
        bench_reqs_add(rs, method, host, path, h, nh);
    }
    free(smp);
}

/*
 * The scale table (scale/ cases): route i is of kind i % 3:
 *   0  Path=/s{i}/ljj                          (a literal path)
 *   1  Path=/u{i}/{name}                       (a path with a parameter)
 *   2  Host=t{i}.example.com, Path=/api/ then **  (a host per customer)
 * Requests: GET /s{i}/ljj, GET /u{i}/bob, GET t{i}.example.com/api/orders/1.
 */
static void scale_route(bench_buf *b, size_t i, const char *variant, bool sep) {
    char p[64], h[64];
    switch (i % 3) {
    case 0:
        snprintf(p, sizeof p, "Path=/s%zu/ljj%s", i, variant);
        route_at(b, sep, i, "c", 0, "http://backend:80",
                 (const char *const[]){p}, 1, NULL, 0);
        break;
    case 1:
        snprintf(p, sizeof p, "Path=/u%zu%s/{name}", i, variant);
        route_at(b, sep, i, "c", 0, "http://backend:80",
                 (const char *const[]){p}, 1, NULL, 0);
        break;
    default:
        snprintf(h, sizeof h, "Host=t%zu%s.example.com", i, variant);
        route_at(b, sep, i, "c", 0, "lb://tenants",
                 (const char *const[]){h, "Path=/api/**"}, 2, NULL, 0);
        break;
    }
}

void table_scale_route(size_t i, const char *variant, bench_buf *out) {
    out->len = 0;
    scale_route(out, i, variant, false);
}

void table_scale(size_t n, size_t nreq, bench_buf *doc, bench_reqs *rs) {
    doc_begin(doc);
    for (size_t i = 0; i < n; i++)
        scale_route(doc, i, "", i != 0);
    doc_end(doc);
    size_t k, *s = sample(n, nreq, &k);
    char host[64], path[64];
    for (size_t j = 0; j < k; j++) {
        size_t i = s[j];
        const char *hp = "api.example.com";
        switch (i % 3) {
        case 0: snprintf(path, sizeof path, "/s%zu/ljj", i); break;
        case 1: snprintf(path, sizeof path, "/u%zu/bob", i); break;
        default:
            snprintf(host, sizeof host, "t%zu.example.com", i);
            snprintf(path, sizeof path, "/api/orders/1");
            hp = host;
            break;
        }
        bench_reqs_add(rs, "GET", hp, path, common_headers, 3);
    }
    free(s);
}
