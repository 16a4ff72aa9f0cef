/* bench_r3.c - libr3 as the peer of match/github (see bench_r3.h). */
#include "bench_r3.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* r3's headers use GCC extensions (bit-fields of char type) and declare
 * strndup themselves unless told the C library has it (POSIX 2008 does). */
#define HAVE_STRNDUP 1
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include <r3.h>
#pragma GCC diagnostic pop

typedef struct r3_req {
    const char *path;
    int len;
    int method;
} r3_req;

struct bench_r3 {
    node *tree;
    char **ids; /* route ids in document order */
    size_t nids;
    r3_req *reqs;
    size_t n;
};

static int r3_method(const char *m, size_t len) {
    static const struct {
        const char *name;
        int bit;
    } map[] = {{"GET", METHOD_GET},        {"POST", METHOD_POST},
               {"PUT", METHOD_PUT},        {"DELETE", METHOD_DELETE},
               {"PATCH", METHOD_PATCH},    {"HEAD", METHOD_HEAD},
               {"OPTIONS", METHOD_OPTIONS}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strlen(map[i].name) == len && memcmp(map[i].name, m, len) == 0)
            return map[i].bit;
    return 0;
}

/* "Name=args" shortcut of a predicate, or NULL. */
static const char *pred_arg(const cJSON *route, const char *name) {
    const cJSON *preds = cJSON_GetObjectItemCaseSensitive(route, "predicates");
    const cJSON *p;
    size_t nl = strlen(name);
    cJSON_ArrayForEach(p, preds) {
        if (cJSON_IsString(p) && strncmp(p->valuestring, name, nl) == 0 &&
            p->valuestring[nl] == '=')
            return p->valuestring + nl + 1;
    }
    return NULL;
}

bench_r3 *bench_r3_new(const char *doc, size_t len, const bench_reqs *rs,
                       char *err, size_t errlen) {
    cJSON *root = cJSON_ParseWithLength(doc, len);
    const cJSON *routes = cJSON_GetObjectItemCaseSensitive(root, "routes");
    if (!cJSON_IsArray(routes)) {
        snprintf(err, errlen, "the document has no routes array");
        cJSON_Delete(root);
        return NULL;
    }
    bench_r3 *r = bench_xmalloc(sizeof *r);
    r->tree = r3_tree_create(10);
    r->reqs = NULL;
    r->n = 0;
    r->nids = (size_t)cJSON_GetArraySize(routes);
    r->ids = calloc(r->nids ? r->nids : 1, sizeof *r->ids);
    if (!r->ids) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    const cJSON *rt;
    long idx = 0;
    cJSON_ArrayForEach(rt, routes) {
        const char *m = pred_arg(rt, "Method"), *p = pred_arg(rt, "Path");
        if (!m || !p || strchr(m, ',') || strchr(p, ',') || strchr(p, '*')) {
            snprintf(err, errlen, "routes[%ld] is not one method + one path",
                     idx);
            goto fail;
        }
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(rt, "id");
        r->ids[idx] = strdup(cJSON_IsString(id) ? id->valuestring : "?");
        int bit = r3_method(m, strlen(m));
        char *e = NULL;
        if (!bit || !r3_tree_insert_routel_ex(r->tree, bit, p, (int)strlen(p),
                                              (void *)(idx + 1), &e)) {
            snprintf(err, errlen, "routes[%ld]: r3 refused %s %s: %s", idx, m,
                     p, e ? e : "?");
            free(e);
            goto fail;
        }
        idx++;
    }
    char *e = NULL;
    if (r3_tree_compile(r->tree, &e) != 0) {
        snprintf(err, errlen, "r3_tree_compile: %s", e ? e : "?");
        free(e);
        goto fail;
    }
    cJSON_Delete(root);
    r->reqs = bench_xmalloc((rs->n ? rs->n : 1) * sizeof *r->reqs);
    for (size_t i = 0; i < rs->n; i++) {
        const sy_request *q = &rs->reqs[i];
        r->reqs[i] = (r3_req){q->path.ptr, (int)q->path.len,
                              r3_method(q->method.ptr, q->method.len)};
    }
    r->n = rs->n;
    return r;
fail:
    cJSON_Delete(root);
    bench_r3_free(r);
    return NULL;
}

void bench_r3_free(bench_r3 *r) {
    if (!r)
        return;
    r3_tree_free(r->tree);
    for (size_t i = 0; r->ids && i < r->nids; i++)
        free(r->ids[i]);
    free(r->ids);
    free(r->reqs);
    free(r);
}

const char *bench_r3_route_id(const bench_r3 *r, long i) {
    return i >= 0 && (size_t)i < r->nids && r->ids[i] ? r->ids[i] : "(none)";
}

size_t bench_r3_requests(const bench_r3 *r) {
    return r->n;
}

long bench_r3_lookup(bench_r3 *r, size_t i) {
    match_entry *e = match_entry_createl(r->reqs[i].path, r->reqs[i].len);
    e->request_method = r->reqs[i].method;
    route *m = r3_tree_match_route(r->tree, e);
    match_entry_free(e);
    return m ? (long)m->data - 1 : -1;
}

uint64_t bench_r3_run(bench_r3 *r, uint64_t count) {
    uint64_t hits = 0;
    size_t pos = 0, n = r->n;
    const node *tree = r->tree;
    for (uint64_t i = 0; i < count; i++) {
        const r3_req *q = &r->reqs[pos];
        match_entry *e = match_entry_createl(q->path, q->len);
        e->request_method = q->method;
        hits += r3_tree_match_route(tree, e) != NULL;
        match_entry_free(e);
        if (++pos == n)
            pos = 0;
    }
    return hits;
}
