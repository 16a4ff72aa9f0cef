/* test_snapshot.c - snapshots share their chunked arrays: a
 * one-route change costs memory independent of the table size (the
 * library's own byte count of the derived snapshot, not time), and the
 * rank order, the id table and matching stay exact across thousands of
 * random changes that split, copy and empty chunks; and
 * 10,000 consecutive single changes rebuild the index several times, each
 * publish doing a bounded share of the work, matching exactly throughout;
 * and the overlay's groups stay found while its doublings move them, and
 * ids while a growing id table moves into its larger one; and a base
 * index's candidates name their slot's route while the slot lives, none
 * dead when the matcher takes the route from them. */
#include "snapshot/index_lookup.h"
#include "snapshot/snapshot.h"
#include "snapshot/snapshot_int.h"
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
    sy_router *r = sy_test_router(d, len);
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
    size_t b = sy__snapshot_from_handle(h)->bytes;
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
    /* the first document, taken in rank order: slot i holds rank i */
    check_against(r, m, n, ctx);
    sy_snapshot *h = sy_router_acquire(r);
    const sy_snapshot *s0 = sy__snapshot_from_handle(h);
    ck_assert_uint_eq(s0->slot_count, n0);
    for (size_t i = 0; i < n0; i++)
        ck_assert_uint_eq(sy__snapshot_rank_at(s0, i), i);
    sy_snapshot_release(h);
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

/* Route i of the mixed table: eight shapes, so the overlay files routes by
 * literal prefixes, shared prefixes, the root group (a wildcard first, a
 * Host only) and several patterns. `gen` varies the literal parts. */
static int mixed_route(char *buf, size_t cap, size_t i, unsigned gen) {
    const char *fmt[] = {
        "\"Path=/a%zu-%u/lit\"",
        "\"Path=/{x}/w%zu-%u\"",
        "\"Path=/p/{id}/v%zu-%u\"",
        "\"Host=h%zu-%u.example.com\"",
        "\"Path=/m%zu-%u/**\",\"Method=POST\"",
        "\"Path=/t%zu-%u,/u%zu-%u\"",
        "\"Path=/{a}/{b}/c%zu-%u/**\"",
        "\"Path=/**/z%zu-%u\"",
    };
    char preds[128];
    snprintf(preds, sizeof preds, fmt[i % 8], i, gen, i, gen);
    return snprintf(buf, cap,
                    "{\"id\":\"r%zu\",\"uri\":\"http://b\",\"order\":%d,"
                    "\"predicates\":[%s]}",
                    i, (int)(i % 5), preds);
}

/* A request route i (of generation gen) matches. */
static void mixed_request(size_t i, unsigned gen, char *path, size_t cap,
                          char *host, size_t hcap, sy_request *req) {
    const char *pfmt[] = {
        "/a%zu-%u/lit", "/zz/w%zu-%u", "/p/5/v%zu-%u",   "/",
        "/m%zu-%u/x/y", "/u%zu-%u",    "/x/y/c%zu-%u/d", "/q/r/z%zu-%u"};
    snprintf(path, cap, pfmt[i % 8], i, gen);
    snprintf(host, hcap, "h%zu-%u.example.com", i, gen);
    *req = (sy_request)SY_REQUEST_INIT;
    req->method = i % 8 == 4 ? (sy_str){"POST", 4} : (sy_str){"GET", 3};
    req->path = (sy_str){path, strlen(path)};
    req->host = (sy_str){host, strlen(host)};
}

/* The indexed match and the reference scan pick the same route. */
static void same_as_scan(const sy_snapshot *s, sy_match_ctx *ctx,
                         const sy_request *req, const char *want) {
    sy_match *mi = NULL, *ml = NULL;
    ck_assert_int_eq(sy_snapshot_match(s, ctx, req, &mi), 0);
    const sy_route *ri = mi ? sy_match_route(mi) : NULL;
    ck_assert_int_eq(sy_snapshot_match_linear(s, ctx, req, &ml), 0);
    const sy_route *rl = ml ? sy_match_route(ml) : NULL;
    ck_assert_msg(ri == rl, "%.*s: index %s, scan %s", (int)req->path.len,
                  req->path.ptr, ri ? sy_route_id(ri) : "-",
                  rl ? sy_route_id(rl) : "-");
    if (want)
        ck_assert_msg(rl && strcmp(sy_route_id(rl), want) == 0,
                      "%.*s: %s, want %s", (int)req->path.len, req->path.ptr,
                      rl ? sy_route_id(rl) : "-", want);
}

START_TEST(ten_thousand_single_changes_rebuild_in_bounded_shares) {
    enum { N = 4000, OPS = 10000 };
    char *doc = malloc((size_t)N * 160 + 16), buf[256];
    size_t o = 0;
    doc[o++] = '[';
    for (size_t i = 0; i < N; i++) {
        if (i)
            doc[o++] = ',';
        o += (size_t)mixed_route(doc + o, 256, i, 0);
    }
    doc[o++] = ']';
    sy_router *r = sy_test_router(doc, o);
    sy_error e;
    free(doc);
    unsigned *gen = calloc(N, sizeof *gen); /* 0: live as loaded */
    bool *live = malloc(N * sizeof *live);
    for (size_t i = 0; i < N; i++)
        live[i] = true;
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    srand(15);
    const sy__index *last_base = NULL;
    size_t swaps = 0, during = 0, trash_run = 0;
    for (unsigned op = 1; op <= OPS; op++) {
        size_t i = (size_t)rand() % N;
        char id[16];
        snprintf(id, sizeof id, "r%zu", i);
        if (live[i] && rand() % 8 == 0) {
            ck_assert_int_eq(sy_router_remove_route(r, id, NULL), 0);
            live[i] = false;
        } else {
            int n = mixed_route(buf, sizeof buf, i, op);
            ck_assert_int_eq(sy_router_upsert_route(r, "s", buf, (size_t)n, &e),
                             0);
            gen[i] = op;
            live[i] = true;
        }
        sy_snapshot *h = sy_router_acquire(r);
        const sy_snapshot *s = sy__snapshot_from_handle(h);
        /* bounded work: one share of the rebuild, counted, not timed */
        ck_assert_uint_le(s->build_routes, SY_BUILD_ROUTES);
        ck_assert_uint_le(s->build_items, 2 * SY_BUILD_ITEMS);
        during += s->build != NULL;
        /* a swap's trash (the old base, ov[1]) goes a part per publish */
        trash_run = s->trash ? trash_run + 1 : 0;
        ck_assert_uint_le(trash_run, 64);
        if (last_base && s->base != last_base)
            swaps++;
        last_base = s->base;
        if (op % 250 == 0) {
            for (size_t k = 0; k < 50; k++) {
                size_t j = (size_t)rand() % N;
                char path[64], host[64], rid[16];
                sy_request req;
                mixed_request(j, gen[j], path, sizeof path, host, sizeof host,
                              &req);
                snprintf(rid, sizeof rid, "r%zu", j);
                same_as_scan(s, ctx, &req, live[j] ? rid : NULL);
                ck_assert(live[j] ==
                          (sy_snapshot_find_route(h, rid, NULL) != NULL));
                /* an old generation's request: a miss or another route,
                 * the same either way */
                mixed_request(j, gen[j] ? gen[j] - 1 : 1, path, sizeof path,
                              host, sizeof host, &req);
                same_as_scan(s, ctx, &req, NULL);
                /* spellings around the route's own: a trailing slash, an
                 * upper-case segment, an encoded character, one segment
                 * more, the other method */
                static const char *const tails[] = {"/", "", "%41", "/x"};
                for (size_t v = 0; v < 5; v++) {
                    mixed_request(j, gen[j], path, sizeof path - 8, host,
                                  sizeof host, &req);
                    if (v < 4) {
                        strcat(path, tails[v]);
                        if (v == 1)
                            path[1] = (char)(path[1] - 32 * (path[1] >= 'a'));
                    } else {
                        req.method = (sy_str){"PUT", 3};
                    }
                    req.path = (sy_str){path, strlen(path)};
                    same_as_scan(s, ctx, &req, NULL);
                }
            }
        }
        sy_snapshot_release(h);
    }
    /* dead slots are reused once no index can hold them: the slot array
     * stays near the live count (8,750 upserts would append as many) */
    sy_snapshot *h = sy_router_acquire(r);
    uint32_t slots = sy__snapshot_from_handle(h)->slot_count;
    sy_snapshot_release(h);
    ck_assert_msg(slots < N + N / 2, "%u slots for %d routes", slots, N);
    /* several rebuilds ran, spread over many publishes each */
    ck_assert_msg(swaps >= 20, "%zu rebuilds", swaps);
    ck_assert_msg(during > swaps * 20, "%zu publishes with a rebuild running",
                  during);
    sy_match_ctx_free(ctx);
    sy_router_free(r);
    free(gen);
    free(live);
}
END_TEST

/* The end of the candidate pool an index's lists use. */
static size_t cands_used(const sy__index *ix) {
    size_t end = 0;
    for (uint32_t i = 0; i < ix->node_count; i++) {
        const xnode *x = &ix->nodes[i];
        size_t t = x->shape & X_LONE ? (size_t)x->kids + 1
                                     : (size_t)x->off + x->tlen + x->mlen;
        if (x->shape & X_SIDE)
            t = 0; /* in side[] */
        end = t > end ? t : end;
    }
    for (uint32_t i = 0; i < ix->nside; i++) {
        size_t t = ix->side[i].toff + ix->side[i].tlen;
        size_t m = ix->side[i].moff + ix->side[i].mlen;
        end = t > end ? t : end;
        end = m > end ? m : end;
    }
    for (size_t g = 0; g < GENERIC_LISTS; g++) {
        size_t e = ix->generic[g].off + ix->generic[g].len;
        end = e > end ? e : end;
    }
    return end;
}

/* The stepwise build, resumed after every `budget` items, makes the very
 * index the one-shot build makes: same nodes, edges, lists, candidates. */
/* A swap's old base goes to the trash, freed a few parts a publish, but
 * not while a snapshot from before the swap holds it: then it stays
 * whole (and that snapshot keeps matching), and goes once released. */
START_TEST(a_held_old_base_stays_in_the_trash_until_released) {
    enum { N = 3000 };
    sy_router *r = router_of(N, 1);
    sy_snapshot *h0 = sy_router_acquire(r);
    const sy__index *old = sy__snapshot_from_handle(h0)->base;
    char id[16], path[32];
    size_t op = 0, after = 0;
    for (; op < 4 * N && after < 40; op++) {
        snprintf(id, sizeof id, "r%zu", op % N);
        snprintf(path, sizeof path, "/q%zu", op);
        upsert(r, id, 0, path);
        sy_snapshot *h = sy_router_acquire(r);
        const sy_snapshot *s = sy__snapshot_from_handle(h);
        if (s->base != old) {
            /* swapped: the old base held by h0, so the trash stays */
            ck_assert_ptr_nonnull(s->trash);
            after++;
        }
        sy_snapshot_release(h);
    }
    ck_assert_uint_eq(after, 40);
    ck_assert_ptr_nonnull(sy_snapshot_find_route(h0, "r7", NULL));
    ck_assert_ptr_null(sy_snapshot_find_route(h0, "r7x", NULL));
    sy_snapshot_release(h0);
    size_t gone_after = 0;
    for (;; op++) {
        snprintf(id, sizeof id, "r%zu", op % N);
        snprintf(path, sizeof path, "/q%zu", op);
        upsert(r, id, 0, path);
        sy_snapshot *h = sy_router_acquire(r);
        bool gone = sy__snapshot_from_handle(h)->trash == NULL;
        sy_snapshot_release(h);
        gone_after++;
        if (gone)
            break;
        ck_assert_uint_le(gone_after, 64);
    }
    sy_router_free(r);
}
END_TEST

START_TEST(the_stepwise_build_makes_the_one_shot_index) {
    enum { N = 3000 };
    char *doc = malloc((size_t)N * 160 + 16);
    size_t o = 0;
    doc[o++] = '[';
    for (size_t i = 0; i < N; i++) {
        if (i)
            doc[o++] = ',';
        o += (size_t)mixed_route(doc + o, 256, i, 0);
    }
    doc[o++] = ']';
    sy_router *r;
    sy_router_options ro = SY_ROUTER_OPTIONS_INIT;
    ck_assert_int_eq(sy_router_new(&ro, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    ck_assert_int_eq(sy_router_apply(r, "s", doc, o, NULL, NULL), 0);
    free(doc);
    sy_snapshot *h = sy_router_acquire(r);
    const sy_snapshot *s = sy__snapshot_from_handle(h);
    size_t n = s->route_count;
    sy__index_route *in = malloc(n * sizeof *in);
    for (size_t i = 0; i < n; i++) { /* rank order: ascending keys */
        uint32_t slot = sy__snapshot_rank_at(s, i);
        const sy__slot *sl = sy__snapshot_slot(s, slot);
        in[i] = (sy__index_route){slot, sl->key, sl->route};
    }
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy__index *one;
    ck_assert_int_eq(sy__index_build(&a, in, n, &one), 0);
    const size_t budgets[] = {1, 7, 4096};
    for (size_t bi = 0; bi < 3; bi++) {
        sy__index_step *st = sy__index_step_new(&a);
        ck_assert_ptr_nonnull(st);
        for (size_t i = 0; i < n; i++)
            ck_assert_int_eq(sy__index_step_add(st, &in[i]), 0);
        sy__index *ix = NULL;
        size_t calls = 0;
        int rc;
        while ((rc = sy__index_step_run(st, budgets[bi], &ix)) == 0)
            calls++;
        ck_assert_int_eq(rc, 1);
        /* every call but the last did exactly its budget */
        ck_assert_uint_ge(sy__index_step_work(st), calls * budgets[bi]);
        ck_assert_uint_le(sy__index_step_work(st), (calls + 1) * budgets[bi]);
        ck_assert_uint_eq(ix->node_count, one->node_count);
        /* nodes whose few literal children are compared one by one */
        size_t direct = 0;
        for (uint32_t k = 0; k < one->node_count; k++)
            direct += (one->nodes[k].shape & X_NLIT) != 0;
        ck_assert_uint_gt(direct, N / 10);
        ck_assert_int_eq(
            memcmp(ix->nodes, one->nodes, one->node_count * sizeof *one->nodes),
            0);
        ck_assert_uint_eq(ix->slot_mask, one->slot_mask);
        ck_assert_uint_eq(ix->slot_count, one->slot_count);
        ck_assert(!ix->slots == !one->slots);
        if (one->slots)
            ck_assert_int_eq(memcmp(ix->slots, one->slots,
                                    one->slot_count * sizeof *one->slots),
                             0);
        ck_assert_uint_eq(ix->hslot_count, one->hslot_count);
        ck_assert(!ix->hslots == !one->hslots);
        if (one->hslots)
            ck_assert_int_eq(memcmp(ix->hslots, one->hslots,
                                    one->hslot_count * sizeof *one->hslots),
                             0);
        ck_assert_uint_eq(ix->nside, one->nside);
        if (one->nside)
            ck_assert_int_eq(
                memcmp(ix->side, one->side, one->nside * sizeof *one->side), 0);
        ck_assert_int_eq(memcmp(ix->generic, one->generic, sizeof one->generic),
                         0);
        size_t used = cands_used(one);
        ck_assert_uint_gt(used, N / 2);
        ck_assert_uint_eq(cands_used(ix), used);
        ck_assert_int_eq(
            memcmp(ix->cands, one->cands, used * sizeof *one->cands), 0);
        ck_assert_int_eq(
            memcmp(ix->cslots, one->cslots, used * sizeof *one->cslots), 0);
        ck_assert_uint_eq(ix->host_routes, one->host_routes);
        ck_assert_uint_eq(ix->bytes, one->bytes);
        sy__index_unref(ix);
        sy__index_step_free(st);
    }
    sy__index_unref(one);
    free(in);
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

/* Counting allocator: fails allocation number `fail_at` of a call when
 * armed; counts live blocks to find leaks. */
typedef sy_test_alloc counting;

/* Single changes that fail at every allocation point, while rebuilds run
 * (failed derives advance the shared rebuild too): each fails cleanly or
 * succeeds, matching stays exact, nothing leaks. */
START_TEST(failed_single_changes_during_rebuilds_leave_exact_state) {
    enum { N = 700, OPS = 3000 };
    counting cnt = {0};
    sy_allocator al = sy_test_allocator(&cnt);
    sy_router_options ro = SY_ROUTER_OPTIONS_INIT;
    ro.allocator = &al;
    sy_router *r;
    ck_assert_int_eq(sy_router_new(&ro, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    char *doc = malloc((size_t)N * 160 + 16), buf[256];
    size_t o = 0;
    doc[o++] = '[';
    for (size_t i = 0; i < N; i++) {
        if (i)
            doc[o++] = ',';
        o += (size_t)mixed_route(doc + o, 256, i, 0);
    }
    doc[o++] = ']';
    ck_assert_int_eq(sy_router_apply(r, "s", doc, o, NULL, NULL), 0);
    free(doc);
    unsigned *gen = calloc(N, sizeof *gen);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    size_t failed = 0, rebuilding = 0, swaps = 0;
    const sy__index *last_base = NULL;
    for (unsigned op = 1; op <= OPS; op++) {
        size_t i = (op * 7919u) % N;
        int n = mixed_route(buf, sizeof buf, i, op);
        cnt.calls = 0;
        cnt.fail_at = op % 3 ? (long)(op / 3 % 60) + 1 : 0;
        int rc = sy_router_upsert_route(r, "s", buf, (size_t)n, NULL);
        cnt.fail_at = 0;
        ck_assert(rc == 0 || rc == SY_ENOMEM);
        failed += rc != 0;
        if (rc == 0)
            gen[i] = op;
        sy_snapshot *h = sy_router_acquire(r);
        rebuilding += sy__snapshot_from_handle(h)->build != NULL;
        swaps += last_base && sy__snapshot_from_handle(h)->base != last_base;
        last_base = sy__snapshot_from_handle(h)->base;
        if (op % 100 == 0)
            for (size_t j = op % 7; j < N; j += 7) {
                char path[64], host[64], rid[16];
                sy_request req;
                mixed_request(j, gen[j], path, sizeof path, host, sizeof host,
                              &req);
                snprintf(rid, sizeof rid, "r%zu", j);
                same_as_scan(sy__snapshot_from_handle(h), ctx, &req, rid);
            }
        sy_snapshot_release(h);
    }
    ck_assert_uint_gt(failed, OPS / 3);
    ck_assert_msg(rebuilding > 100 && swaps >= 2, "%zu, %zu", rebuilding,
                  swaps);
    sy_match_ctx_free(ctx);
    sy_router_free(r);
    free(gen);
    ck_assert_int_eq(cnt.live, 0);
}
END_TEST

/* Routes with a Host of literal labels are filed in the overlay under
 * their host (snapshot_overlay.c): a request finds them by its labels
 * whatever path they share, and every odd spelling of a host (an empty
 * label, a leading or trailing '.', another case, a port) gets what the
 * scan gives. */
START_TEST(host_routes_in_the_overlay_are_found_by_their_labels) {
    enum { N = 2000, UP = 40 };
    char *doc = malloc((size_t)N * 128 + 16), buf[256];
    ck_assert_ptr_nonnull(doc);
    size_t o = (size_t)snprintf(doc, 16, "[");
    for (size_t i = 0; i < N; i++)
        o += (size_t)snprintf(doc + o, 128,
                              "%s{\"id\":\"h%zu\",\"uri\":\"http://b\","
                              "\"predicates\":[\"Host=t%zu.example.com\","
                              "\"Path=/api/**\"]}",
                              i ? "," : "", i, i);
    o += (size_t)snprintf(doc + o, 4, "]");
    sy_router *r = sy_test_router(doc, o);
    free(doc);
    sy_error e;
    for (size_t i = 0; i < UP; i++) {
        /* new hosts, a changed one, a wildcard and a leading-dot pattern
         * (both filed by path), a host with a port */
        const char *host = i == 0   ? "t7.example.com"
                           : i == 1 ? "*.w.example.com"
                           : i == 2 ? ".lead.example.com"
                                    : NULL;
        char h[64];
        if (!host) {
            snprintf(h, sizeof h, "u%zu.example.com", i);
            host = h;
        }
        int n = snprintf(buf, sizeof buf,
                         "{\"id\":\"%s%zu\",\"uri\":\"http://b\","
                         "\"predicates\":[\"Host=%s\",\"Path=/api/**\"]}",
                         i == 0 ? "h" : "x", i == 0 ? (size_t)7 : i, host);
        ck_assert_msg(sy_router_upsert_route(r, "s", buf, (size_t)n, &e) == 0,
                      "%s", e.message);
    }
    sy_match_ctx *ctx = NULL;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, &e), 0);
    sy_snapshot *h = sy_router_acquire(r);
    const sy_snapshot *in = sy__snapshot_from_handle(h);
    ck_assert(sy__overlay_hosts((const sy__overlay *const *)in->ov, 2));
    static const struct {
        const char *host, *path, *want;
    } cases[] = {
        {"u5.example.com", "/api/x", "x5"},
        {"u5..example.com", "/api/x", "x5"},
        {".u5.example.com", "/api/x", NULL},
        {"u5.example.com.", "/api/x", NULL},
        {"U5.example.com", "/api/x", NULL},
        {"u5.example.com", "/other", NULL},
        {"u39.example.com", "/api", "x39"},
        {"t7.example.com", "/api/y", "h7"},
        {"t8.example.com", "/api/y", "h8"},
        {"a.w.example.com", "/api/z", "x1"},
        {".lead.example.com", "/api/z", NULL},
        {"u5", "/api/x", NULL},
        {"", "/api/x", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sy_request req = SY_REQUEST_INIT;
        req.method = (sy_str){"GET", 3};
        req.host = (sy_str){cases[i].host, strlen(cases[i].host)};
        req.path = (sy_str){cases[i].path, strlen(cases[i].path)};
        same_as_scan(h, ctx, &req, cases[i].want);
    }
    sy_snapshot_release(h);
    sy_match_ctx_free(ctx);
    sy_router_free(r);
}
END_TEST

/* The overlay's table doubles (at 128, 256, 512 and 1,024 groups) while
 * its groups move over a chunk per change: after every change, routes
 * changed before and after each doubling are found under their new
 * paths and not under their old ones, whichever table holds their group
 * (100,000 routes: the rebuild starts only after ~1,500 changes). */
static void match_want(sy_router *r, sy_match_ctx *ctx, const char *path,
                       const char *want) {
    sy_snapshot *h = sy_router_acquire(r);
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){path, strlen(path)};
    sy_match *m = NULL;
    ck_assert_int_eq(sy_snapshot_match(h, ctx, &req, &m), 0);
    const char *got = m ? sy_route_id(sy_match_route(m)) : NULL;
    ck_assert_msg(want ? got && strcmp(got, want) == 0 : !got,
                  "%s: %s, want %s", path, got ? got : "-", want ? want : "-");
    sy_snapshot_release(h);
}

START_TEST(overlay_groups_move_a_chunk_per_change_and_stay_found) {
    enum { N0 = 100000, UP = 1400 };
    sy_router *r = router_of(N0, 1);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    for (size_t j = 0; j < UP; j++) {
        char id[16], path[32];
        snprintf(id, sizeof id, "r%zu", j * 7);
        snprintf(path, sizeof path, "/n%zu", j * 7);
        upsert(r, id, 0, path);
        size_t probe[] = {j, j / 2, j / 3, 0, j > 200 ? j - 200 : 0};
        for (size_t k = 0; k < sizeof probe / sizeof probe[0]; k++) {
            char want[16], now[32], old[32];
            snprintf(want, sizeof want, "r%zu", probe[k] * 7);
            snprintf(now, sizeof now, "/n%zu", probe[k] * 7);
            snprintf(old, sizeof old, "/p%zu", probe[k] * 7);
            match_want(r, ctx, now, want);
            match_want(r, ctx, old, NULL);
        }
    }
    match_want(r, ctx, "/p3", "r3"); /* never changed: the base's */
    sy_match_ctx_free(ctx);
    sy_router_free(r);
}
END_TEST

/* The id table outgrows its capacity as routes are added one a publish:
 * a larger table takes its entries over a stretch per publish, looked up
 * in both meanwhile, the old table's chunks let go as the move passes
 * them. Before, during and after the move every live id is
 * found with its latest route (replaced ones too, whichever table held
 * them), removed ones are not, and a snapshot held from before the growth
 * still finds its own routes (published tables never change). */
static void ids_as_model(sy_router *r, const int *order, size_t n0,
                         size_t added, size_t every) {
    sy_snapshot *h = sy_router_acquire(r);
    char id[16];
    for (size_t i = 0; i < n0 + added; i += every) {
        if (i < n0)
            snprintf(id, sizeof id, "r%zu", i);
        else
            snprintf(id, sizeof id, "n%zu", i - n0);
        const sy_route *rt = sy_snapshot_find_route(h, id, NULL);
        int want = i < n0 ? order[i] : 7;
        ck_assert_msg(want < 0 ? !rt : rt && sy_route_order(rt) == want,
                      "%s after %zu added: %s, order %d", id, added,
                      rt ? "found" : "missing", rt ? sy_route_order(rt) : -1);
        ck_assert(!rt || strcmp(sy_route_id(rt), id) == 0);
    }
    ck_assert(!sy_snapshot_find_route(h, "n-none", NULL));
    sy_snapshot_release(h);
}

START_TEST(an_id_table_that_grows_moves_a_stretch_per_publish) {
    enum { N0 = 20000, ADD = 4000 };
    sy_router *r = router_of(N0, 1);
    int *order = calloc(N0, sizeof *order); /* -1: removed */
    ck_assert_ptr_nonnull(order);
    sy_snapshot *before = sy_router_acquire(r);
    uint32_t cap0 = sy__snapshot_from_handle(before)->id_cap;
    size_t moving = 0, grew_at = 0;
    for (size_t j = 0; j < ADD; j++) {
        char id[16], path[32];
        snprintf(id, sizeof id, "n%zu", j);
        snprintf(path, sizeof path, "/n%zu", j);
        upsert(r, id, 7, path);
        if (j % 3 == 0) { /* replace an id of the first document */
            size_t k = (j * 5) % N0;
            snprintf(id, sizeof id, "r%zu", k);
            snprintf(path, sizeof path, "/q%zu", k);
            order[k] = (int)(j % 100) + 1;
            upsert(r, id, order[k], path);
        }
        if (j % 7 == 1) { /* remove one */
            size_t k = (j * 11 + 1) % N0;
            snprintf(id, sizeof id, "r%zu", k);
            sy_error e;
            int rc = sy_router_remove_route(r, id, &e);
            ck_assert_int_eq(rc, order[k] < 0 ? SY_ENOTFOUND : 0);
            order[k] = -1;
        }
        sy_snapshot *h = sy_router_acquire(r);
        const sy_snapshot *s = sy__snapshot_from_handle(h);
        bool during = s->id_old_chunks != NULL;
        if (during && !moving++)
            grew_at = j;
        if (during) { /* the old table: the first document's */
            ck_assert_uint_eq(s->id_old_cap, cap0);
            /* its chunks wholly moved let go, the one the move is in held
             * (lookups whose run crosses into it go on past the gap) */
            uint32_t k = s->id_old_next >> SY_CHUNK_BITS;
            for (uint32_t i = 0; i < k; i++)
                ck_assert_ptr_null(s->id_old_chunks[i]);
            ck_assert_ptr_nonnull(s->id_old_chunks[k]);
        }
        sy_snapshot_release(h);
        /* every id while the move runs and once after; a sample else */
        bool all = during || j + 1 == ADD || (moving && j == grew_at + moving);
        ids_as_model(r, order, N0, j + 1, all ? 1 : 97);
    }
    /* the move took many publishes, not one, and is done */
    ck_assert_uint_gt(moving, 10);
    ck_assert_uint_lt(moving, 200);
    sy_snapshot *h = sy_router_acquire(r);
    ck_assert_ptr_null(sy__snapshot_from_handle(h)->id_old_chunks);
    ck_assert_uint_gt(sy__snapshot_from_handle(h)->id_cap, cap0);
    sy_snapshot_release(h);
    /* the snapshot from before: its own routes, all of them */
    char id[16];
    for (size_t i = 0; i < N0; i++) {
        snprintf(id, sizeof id, "r%zu", i);
        const sy_route *rt = sy_snapshot_find_route(before, id, NULL);
        ck_assert_msg(rt && sy_route_order(rt) == 0, "%s in the old one", id);
    }
    ck_assert(!sy_snapshot_find_route(before, "n0", NULL));
    sy_snapshot_release(before);
    free(order);
    sy_router_free(r);
}
END_TEST

/* Every candidate of the base index names its slot's route while the slot
 * lives (what the matcher takes instead of the slot's, prep.cands_live),
 * with cands_live none names a dead slot, and the dead filter has the bit
 * of every dead one. Returns the dead ones. */
static size_t filtered_live; /* live by the filter, with dead entries */
static size_t base_cands_as_slots(const sy_snapshot *s) {
    ck_assert(s->prep.cands_live == (s->base_dead == 0));
    ck_assert((s->dead_bits != NULL) == (s->base_dead > 0));
    const sy__index *ix = s->base;
    size_t dead = 0, seen = 0;
    for (uint32_t n = 0; ix && n < ix->node_count + GENERIC_LISTS; n++) {
        list_ref ls[2] = {{0, 0}, {0, 0}};
        if (n < ix->node_count) {
            const xnode *nd = &ix->nodes[n];
            ls[0] = term_of(ix, nd, n);
            if (nd->shape & X_MULTI)
                ls[1] = multi_of(ix, nd, n);
        } else {
            ls[0] = ix->generic[n - ix->node_count];
        }
        for (int k = 0; k < 2; k++)
            for (uint32_t j = 0; j < ls[k].len; j++) {
                const sy__cand *cd = &ix->cands[ls[k].off + j];
                uint32_t slot = ix->cslots[ls[k].off + j];
                ck_assert_uint_lt(slot, s->slot_count);
                const struct sy_route *sr = sy__snapshot_slot(s, slot)->route;
                if (sr)
                    ck_assert_ptr_eq(sr, sy__cand_route(cd));
                if (sr && s->dead_bits && !sy__snapshot_maybe_dead(s, slot))
                    filtered_live++;
                if (!sr)
                    ck_assert(sy__snapshot_maybe_dead(s, slot));
                dead += !sr;
                seen++;
            }
    }
    ck_assert_uint_gt(seen, 0);
    if (s->prep.cands_live)
        ck_assert_uint_eq(dead, 0);
    return dead;
}

START_TEST(candidates_name_their_slots_route_while_it_lives) {
    sy_router *r = router_of(2000, 3);
    srand(11);
    size_t live_checks = 0, dead_checks = 0;
    /* changes and removals, then only new routes (no slot dies: a
     * rebuild's swap leaves no dead entry) */
    for (int step = 0; step < 4000; step++) {
        size_t i = step < 3000 ? (size_t)rand() % 2400 : 3000 + (size_t)step;
        char id[16], path[40];
        snprintf(id, sizeof id, "r%zu", i);
        if (step < 3000 && rand() % 3 == 0) {
            sy_router_remove_route(r, id, NULL); /* absent: an error */
        } else {
            /* a lone {var} (its candidate holds it), or a literal */
            snprintf(path, sizeof path, i % 2 ? "/v%d-%zu/{x}" : "/q%d-%zu",
                     step, i);
            upsert(r, id, rand() % 3, path);
        }
        if (step % 25)
            continue;
        sy_snapshot *h = sy_router_acquire(r);
        const sy_snapshot *s = sy__snapshot_from_handle(h);
        if (base_cands_as_slots(s))
            dead_checks++;
        else if (s->prep.cands_live)
            live_checks++;
        sy_snapshot_release(h);
    }
    /* both kinds of snapshot were seen: with dead entries, and live
     * after a rebuild's swap */
    ck_assert_uint_gt(dead_checks, 0);
    ck_assert_uint_gt(live_checks, 0);
    /* with dead entries, most candidates still take their own route */
    ck_assert_uint_gt(filtered_live, 0);
    sy_router_free(r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("snapshot");
    TCase *tc = tcase_create("snapshot");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc,
                   a_one_route_change_costs_memory_independent_of_table_size);
    tcase_add_test(tc, random_changes_keep_rank_ids_and_matching_exact);
    tcase_add_test(tc, ten_thousand_single_changes_rebuild_in_bounded_shares);
    tcase_add_test(tc, a_held_old_base_stays_in_the_trash_until_released);
    tcase_add_test(tc, the_stepwise_build_makes_the_one_shot_index);
    tcase_add_test(tc, failed_single_changes_during_rebuilds_leave_exact_state);
    tcase_add_test(tc, host_routes_in_the_overlay_are_found_by_their_labels);
    tcase_add_test(tc, overlay_groups_move_a_chunk_per_change_and_stay_found);
    tcase_add_test(tc, an_id_table_that_grows_moves_a_stretch_per_publish);
    tcase_add_test(tc, candidates_name_their_slots_route_while_it_lives);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
