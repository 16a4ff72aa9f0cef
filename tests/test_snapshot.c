/* test_snapshot.c - snapshots share their chunked arrays (issue 14 item
 * 6): a one-route change costs memory independent of the table size (the
 * library's own byte count of the derived snapshot, not time), and the
 * rank order, the id table and matching stay exact across thousands of
 * random changes that split, copy and empty chunks. */
#include "snapshot.h"
#include "testutil.h"

#include "switchyard.h"

#include <stdio.h>
#include <stdlib.h>

/* A document of n routes r0..r(n-1), Path=/p<i>, order = i % orders. */
static char *doc_of(size_t n, int orders, size_t *len) {
    size_t cap = n * 96 + 16, o = 0;
    char *d = malloc(cap);
    ck_assert_ptr_nonnull(d);
    o += (size_t)snprintf(d + o, cap - o, "[");
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(d + o, cap - o,
                              "%s{\"id\":\"r%zu\",\"uri\":\"http://b\","
                              "\"order\":%d,\"predicates\":[\"Path=/p%zu\"]}",
                              i ? "," : "", i, (int)(i % (size_t)orders), i);
    o += (size_t)snprintf(d + o, cap - o, "]");
    *len = o;
    return d;
}

static sy_router *router_of(size_t n, int orders) {
    size_t len;
    char *d = doc_of(n, orders, &len);
    sy_router *r;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    sy_error e;
    ck_assert_msg(sy_router_apply(r, "s", d, len, NULL, &e) == 0, "%s",
                  e.message);
    free(d);
    return r;
}

static int upsert(sy_router *r, const char *id, int order, const char *path) {
    char buf[256];
    int n = snprintf(buf, sizeof buf,
                     "{\"id\":\"%s\",\"uri\":\"http://b\",\"order\":%d,"
                     "\"predicates\":[\"Path=%s\"]}",
                     id, order, path);
    sy_error e;
    int rc = sy_router_upsert_route(r, "s", buf, (size_t)n, &e);
    ck_assert_msg(rc == 0, "upsert %s: %s", id, e.message);
    return rc;
}

/* Bytes of the live snapshot as the library counts them (its arrays, the
 * chunks it made and its overlay index; shared chunks are not counted). */
static size_t live_bytes(sy_router *r) {
    sy_snapshot *h = sy_router_acquire(r);
    size_t b = sy_snapshot_from_handle(h)->bytes;
    sy_snapshot_release(h);
    return b;
}

START_TEST(a_one_route_change_costs_memory_independent_of_table_size) {
    size_t small_n = 2000, large_n = 40000;
    sy_router *small = router_of(small_n, 1), *large = router_of(large_n, 1);
    upsert(small, "r1000", 0, "/changed");
    upsert(large, "r1000", 0, "/changed");
    size_t bs = live_bytes(small), bl = live_bytes(large);
    /* a full copy of the slot array alone would be 24 bytes per route */
    ck_assert_msg(bl < large_n * 24 / 4, "one change at %zu routes: %zu bytes",
                  large_n, bl);
    /* 20x the routes: only the chunk pointer vectors grow (8 bytes per
     * 1024 routes per array) */
    ck_assert_msg(bl < bs + 4096, "%zu routes: %zu bytes; %zu routes: %zu",
                  small_n, bs, large_n, bl);
    sy_router_free(small);
    sy_router_free(large);
}
END_TEST

/* The model: per id, its order and path, or absent. */
typedef struct model_route {
    bool live;
    int order;
    unsigned pos; /* position in the source (kept across updates) */
    char path[24];
} model_route;

static int cmp_rank(const void *x, const void *y) {
    const model_route *a = *(const model_route *const *)x,
                      *b = *(const model_route *const *)y;
    if (a->order != b->order)
        return a->order < b->order ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}

static void check_against(sy_router *r, model_route *m, size_t n,
                          sy_match_ctx *ctx) {
    model_route **live = malloc(n * sizeof *live);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (m[i].live)
            live[k++] = &m[i];
    qsort(live, k, sizeof *live, cmp_rank);
    sy_snapshot *s = sy_router_acquire(r);
    ck_assert_uint_eq(sy_snapshot_route_count(s), k);
    for (size_t i = 0; i < k; i++) {
        char id[16];
        snprintf(id, sizeof id, "r%zu", (size_t)(live[i] - m));
        const sy_route *rt = sy_snapshot_route_at(s, i);
        ck_assert_msg(strcmp(sy_route_id(rt), id) == 0, "rank %zu: %s, want %s",
                      i, sy_route_id(rt), id);
        ck_assert_ptr_eq(sy_snapshot_find_route(s, id, NULL), rt);
    }
    for (size_t i = 0; i < n; i += 37) { /* a sample of lookups */
        char id[16];
        snprintf(id, sizeof id, "r%zu", i);
        const sy_route *rt = sy_snapshot_find_route(s, id, NULL);
        ck_assert(m[i].live == (rt != NULL));
        if (!m[i].live)
            continue;
        sy_request req = SY_REQUEST_INIT;
        req.method = (sy_str){"GET", 3};
        req.path = (sy_str){m[i].path, strlen(m[i].path)};
        sy_match *mt = NULL;
        ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &mt), 0);
        ck_assert_ptr_nonnull(mt);
        ck_assert_str_eq(sy_route_id(sy_match_route(mt)), id);
    }
    sy_snapshot_release(s);
    free(live);
}

START_TEST(random_changes_keep_rank_ids_and_matching_exact) {
    /* 3 orders: inserts land in the middle of the rank order, so rank
     * chunks fill, split and empty */
    size_t n0 = 6000, n = 9000;
    sy_router *r = router_of(n0, 3);
    model_route *m = calloc(n, sizeof *m);
    unsigned next_pos = (unsigned)n0;
    for (size_t i = 0; i < n0; i++) {
        m[i] = (model_route){true, (int)(i % 3), (unsigned)i, ""};
        snprintf(m[i].path, sizeof m[i].path, "/p%zu", i);
    }
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    srand(7);
    for (int step = 0; step < 5000; step++) {
        size_t i = (size_t)rand() % n;
        char id[16];
        snprintf(id, sizeof id, "r%zu", i);
        int what = rand() % 4;
        if (m[i].live && what == 0) {
            ck_assert_int_eq(sy_router_remove_route(r, id, NULL), 0);
            m[i].live = false;
        } else {
            int order = rand() % 3;
            char path[24];
            snprintf(path, sizeof path, "/q%d-%zu", step, i);
            upsert(r, id, order, path);
            if (!m[i].live)
                m[i].pos = next_pos++;
            m[i].live = true;
            m[i].order = order;
            memcpy(m[i].path, path, sizeof path);
        }
        if (step % 500 == 499)
            check_against(r, m, n, ctx);
    }
    check_against(r, m, n, ctx);
    sy_match_ctx_free(ctx);
    sy_router_free(r);
    free(m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("snapshot");
    TCase *tc = tcase_create("snapshot");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc,
                   a_one_route_change_costs_memory_independent_of_table_size);
    tcase_add_test(tc, random_changes_keep_rank_ids_and_matching_exact);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
