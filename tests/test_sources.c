/* test_sources.c - sources come and go: sy_router_remove_source refuses a
 * source with live routes or a running notify, frees its place for a later
 * add (the 257th source after one removal), drops its history, and leaves
 * held snapshots, status, metrics and change sets right; a race of
 * removals, adds, notifies and readers (concurrency suite, TSan).
 * Everything through the public API. */
#include "testutil.h"

#include "switchyard.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMPTY "{\"version\":\"e\",\"routes\":[]}"

static sy_router *new_router(void) {
    sy_router *r;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    return r;
}

static int apply(sy_router *r, const char *src, const char *json,
                 sy_error *err) {
    return sy_router_apply(r, src, json, strlen(json), NULL, err);
}

/* A document of one route `id` on path /<id>, order `order`. */
static const char *doc1(char *buf, size_t cap, const char *id, int order) {
    snprintf(buf, cap,
             "{\"version\":\"%s-%d\",\"routes\":[{\"id\":\"%s\",\"uri\":"
             "\"http://%s:80\",\"order\":%d,\"predicates\":[\"Path=/x/"
             "**\"]}]}",
             id, order, id, id, order);
    return buf;
}

/* The id of the route matching GET /x/1, or "" when none does. */
static const char *winner(sy_router *r, char *out, size_t cap) {
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.host = (sy_str){"h", 1};
    req.path = (sy_str){"/x/1", 4};
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m;
    ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
    snprintf(out, cap, "%s", m ? sy_route_id(sy_match_route(m)) : "");
    sy_snapshot_release(s);
    sy_match_ctx_free(ctx);
    return out;
}

START_TEST(a_removed_source_frees_its_place_for_the_257th) {
    sy_router *r = new_router();
    sy_error err;
    char name[32];
    for (int i = 0; i < 256; i++) {
        snprintf(name, sizeof name, "t%d", i);
        ck_assert_int_eq(sy_router_add_source(r, name, &err), 0);
    }
    ck_assert_int_eq(sy_router_add_source(r, "t256", &err), SY_ELIMIT);
    ck_assert_ptr_nonnull(strstr(err.message, "at most 256 sources"));
    ck_assert_int_eq(sy_router_remove_source(r, "t17", &err), 0);
    ck_assert_uint_eq(sy_router_source_count(r), 255);
    ck_assert_int_eq(sy_router_add_source(r, "t256", &err), 0);
    ck_assert_uint_eq(sy_router_source_count(r), 256);
    ck_assert_int_eq(sy_router_add_source(r, "t257", &err), SY_ELIMIT);
    /* the new source works: its routes publish and match */
    char doc[512], id[64];
    ck_assert_int_eq(apply(r, "t256", doc1(doc, sizeof doc, "n", 0), &err), 0);
    ck_assert_str_eq(winner(r, id, sizeof id), "n");
    /* the removed name is gone for every call that names a source */
    ck_assert_int_eq(apply(r, "t17", EMPTY, &err), SY_ENOTFOUND);
    ck_assert_int_eq(sy_router_remove_source(r, "t17", &err), SY_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(err.message, "'t17'"));
    ck_assert_int_eq(sy_router_remove_source(r, "", &err), SY_EINVAL);
    ck_assert_int_eq(sy_router_remove_source(r, NULL, &err), SY_EINVAL);
    ck_assert_int_eq(sy_router_remove_source(NULL, "t1", &err), SY_EINVAL);
    /* many tenants come and go: the limit is on the sources at a time */
    for (int round = 0; round < 600; round++) {
        snprintf(name, sizeof name, "t%d",
                 round % 256 == 17 ? 256 : round % 256);
        ck_assert_int_eq(apply(r, name, EMPTY, &err), 0);
        ck_assert_int_eq(sy_router_remove_source(r, name, &err), 0);
        ck_assert_int_eq(sy_router_add_source(r, name, &err), 0);
    }
    ck_assert_uint_eq(sy_router_source_count(r), 256);
    sy_router_free(r);
}
END_TEST

START_TEST(a_source_with_live_routes_is_refused_until_they_are_gone) {
    sy_router *r = new_router();
    sy_error err;
    char doc[512], id[64];
    ck_assert_int_eq(sy_router_add_source(r, "tenant", &err), 0);
    ck_assert_int_eq(apply(r, "tenant", doc1(doc, sizeof doc, "a", 0), &err),
                     0);
    ck_assert_int_eq(sy_router_remove_source(r, "tenant", &err), SY_EBUSY);
    ck_assert_ptr_nonnull(strstr(err.message, "'tenant' has 1 live routes"));
    /* nothing changed: it still serves, still is listed */
    ck_assert_str_eq(winner(r, id, sizeof id), "a");
    ck_assert_uint_eq(sy_router_source_count(r), 1);
    /* a disabled route is live too */
    ck_assert_int_eq(sy_router_set_route_enabled(r, "a", false, &err), 0);
    ck_assert_int_eq(sy_router_remove_source(r, "tenant", &err), SY_EBUSY);
    ck_assert_int_eq(sy_router_remove_route(r, "a", &err), 0);
    ck_assert_int_eq(sy_router_remove_source(r, "tenant", &err), 0);
    ck_assert_uint_eq(sy_router_source_count(r), 0);
    /* a source of the same name starts afresh: no history to roll back */
    ck_assert_int_eq(sy_router_add_source(r, "tenant", &err), 0);
    ck_assert_int_eq(sy_router_rollback(r, "tenant", "a-0", NULL, &err),
                     SY_ENOTFOUND);
    sy_source_status st;
    ck_assert_int_eq(sy_router_source_status(r, 0, &st, &err), 0);
    ck_assert_str_eq(st.name, "tenant");
    ck_assert(!st.applied);
    ck_assert_uint_eq(st.applied_count, 0);
    ck_assert_uint_eq(st.routes, 0);
    sy_router_free(r);
}
END_TEST

START_TEST(status_and_metrics_list_only_the_sources_in_use) {
    sy_router *r = new_router();
    sy_error err;
    char doc[512];
    const char *names[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(sy_router_add_source(r, names[i], &err), 0);
    ck_assert_int_eq(apply(r, "c", doc1(doc, sizeof doc, "rc", 0), &err), 0);
    sy_source_status st;
    ck_assert_int_eq(sy_router_source_status(r, 2, &st, &err), 0); /* memo */
    ck_assert_int_eq(sy_router_remove_source(r, "b", &err), 0);
    ck_assert_uint_eq(sy_router_source_count(r), 2);
    ck_assert_int_eq(sy_router_source_status(r, 0, &st, &err), 0);
    ck_assert_str_eq(st.name, "a");
    ck_assert_int_eq(sy_router_source_status(r, 1, &st, &err), 0);
    ck_assert_str_eq(st.name, "c");
    ck_assert_uint_eq(st.routes, 1);
    ck_assert_int_eq(sy_router_source_status(r, 2, &st, &err), SY_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(err.message, "the router has 2"));
    char text[16384];
    size_t len;
    ck_assert_int_eq(sy_router_metrics_text(r, text, sizeof text, &len, &err),
                     0);
    ck_assert_ptr_null(strstr(text, "source=\"b\""));
    ck_assert_ptr_nonnull(strstr(text, "source=\"c\""));
    /* d takes b's place: between a and c, with b's (empty) figures */
    ck_assert_int_eq(sy_router_add_source(r, "d", &err), 0);
    ck_assert_int_eq(sy_router_source_status(r, 1, &st, &err), 0);
    ck_assert_str_eq(st.name, "d");
    ck_assert_uint_eq(st.routes, 0);
    ck_assert_uint_eq(st.fingerprint, 0);
    ck_assert_int_eq(sy_router_source_status(r, 2, &st, &err), 0);
    ck_assert_str_eq(st.name, "c");
    ck_assert_uint_eq(st.routes, 1);
    sy_router_free(r);
}
END_TEST

START_TEST(a_new_source_in_a_freed_place_ties_at_that_place) {
    sy_router *r = new_router();
    sy_error err;
    char doc[512], id[64];
    ck_assert_int_eq(sy_router_add_source(r, "a", &err), 0);
    ck_assert_int_eq(sy_router_add_source(r, "b", &err), 0);
    ck_assert_int_eq(sy_router_add_source(r, "c", &err), 0);
    ck_assert_int_eq(apply(r, "c", doc1(doc, sizeof doc, "rc", 5), &err), 0);
    ck_assert_int_eq(sy_router_remove_source(r, "a", &err), 0);
    ck_assert_int_eq(sy_router_add_source(r, "d", &err), 0); /* place 0 */
    ck_assert_int_eq(apply(r, "d", doc1(doc, sizeof doc, "rd", 5), &err), 0);
    ck_assert_str_eq(winner(r, id, sizeof id), "rd");        /* equal orders */
    ck_assert_int_eq(sy_router_add_source(r, "e", &err), 0); /* place 3 */
    ck_assert_int_eq(apply(r, "e", doc1(doc, sizeof doc, "re", 4), &err), 0);
    ck_assert_str_eq(winner(r, id, sizeof id), "re"); /* lower order */
    sy_router_free(r);
}
END_TEST

START_TEST(a_held_snapshot_keeps_the_removed_source_name) {
    sy_router *r = new_router();
    sy_error err;
    char doc[512];
    ck_assert_int_eq(sy_router_add_source(r, "old", &err), 0);
    ck_assert_int_eq(apply(r, "old", doc1(doc, sizeof doc, "x", 0), &err), 0);
    sy_snapshot *held = sy_router_acquire(r);
    ck_assert_int_eq(apply(r, "old", EMPTY, &err), 0);
    ck_assert_int_eq(sy_router_remove_source(r, "old", &err), 0);
    ck_assert_int_eq(sy_router_add_source(r, "new", &err), 0); /* its place */
    ck_assert_int_eq(apply(r, "new", doc1(doc, sizeof doc, "x", 1), &err), 0);
    const char *src = NULL;
    ck_assert_ptr_nonnull(sy_snapshot_find_route(held, "x", &src));
    ck_assert_str_eq(src, "old");
    sy_snapshot *now = sy_router_acquire(r);
    ck_assert_ptr_nonnull(sy_snapshot_find_route(now, "x", &src));
    ck_assert_str_eq(src, "new");
    sy_snapshot_release(now);
    sy_snapshot_release(held);
    sy_router_reclaim(r);
    sy_router_free(r);
}
END_TEST

START_TEST(a_change_set_for_a_removed_source_fails_at_commit) {
    sy_router *r = new_router();
    sy_error err;
    char doc[512];
    ck_assert_int_eq(sy_router_add_source(r, "keep", &err), 0);
    ck_assert_int_eq(sy_router_add_source(r, "gone", &err), 0);
    sy_change_set *cs;
    ck_assert_int_eq(sy_change_set_new(r, &cs, &err), 0);
    doc1(doc, sizeof doc, "k", 0);
    ck_assert_int_eq(sy_change_set_apply(cs, "keep", doc, strlen(doc), &err),
                     0);
    doc1(doc, sizeof doc, "g", 0);
    ck_assert_int_eq(sy_change_set_apply(cs, "gone", doc, strlen(doc), &err),
                     0);
    ck_assert_int_eq(sy_router_remove_source(r, "gone", &err), 0);
    ck_assert_int_eq(sy_router_commit(r, cs, NULL, &err), SY_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(err.message, "change 1 (apply 'gone')"));
    ck_assert_ptr_nonnull(strstr(err.message, "unknown source 'gone'"));
    sy_change_set_free(cs);
    sy_snapshot *s = sy_router_acquire(r);
    ck_assert_uint_eq(sy_snapshot_route_count(s), 0); /* nothing published */
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

typedef struct remover {
    sy_router *r;
    int calls;
    int rc; /* of the removal tried from inside the loader */
    char message[256];
} remover;

static int removing_loader(void *data, const char *source, sy_loaded *out,
                           sy_error *err) {
    (void)err;
    remover *st = data;
    st->calls++;
    sy_error e;
    st->rc = sy_router_remove_source(st->r, source, &e);
    snprintf(st->message, sizeof st->message, "%s", e.message);
    out->bytes = EMPTY;
    out->len = strlen(EMPTY);
    out->release = NULL;
    return 0;
}

START_TEST(a_source_is_not_removed_while_its_notify_runs) {
    sy_router *r = new_router();
    sy_error err;
    remover st = {r, 0, 0, ""};
    ck_assert_int_eq(sy_router_add_source(r, "pull", &err), 0);
    ck_assert_int_eq(
        sy_router_set_loader(r, "pull", removing_loader, &st, &err), 0);
    ck_assert_int_eq(sy_router_notify(r, "pull", &err), 0);
    ck_assert_int_eq(st.calls, 1);
    ck_assert_int_eq(st.rc, SY_EBUSY);
    ck_assert_ptr_nonnull(strstr(st.message, "in use by a notify"));
    /* after the notify returned: removed, its loader with it */
    ck_assert_int_eq(sy_router_remove_source(r, "pull", &err), 0);
    ck_assert_int_eq(sy_router_notify(r, "pull", &err), SY_ENOTFOUND);
    ck_assert_int_eq(sy_router_add_source(r, "pull", &err), 0);
    ck_assert_int_eq(sy_router_notify(r, "pull", &err), SY_EINVAL); /* none */
    sy_router_free(r);
}
END_TEST

/* ---- the race: tenants removed and added while others notify and read */

#define RACE_SOURCES 8

typedef struct race {
    sy_router *r;
    atomic_int stop;
    atomic_long notifies, reads;
} race;

static int empty_loader(void *data, const char *source, sy_loaded *out,
                        sy_error *err) {
    (void)data, (void)source, (void)err;
    out->bytes = EMPTY;
    out->len = strlen(EMPTY);
    out->release = NULL;
    return 0;
}

static void *notifier(void *arg) {
    race *g = arg;
    char name[16];
    for (unsigned i = 0; !atomic_load(&g->stop); i++) {
        snprintf(name, sizeof name, "s%u", i % RACE_SOURCES);
        sy_error e;
        int rc = sy_router_notify(g->r, name, &e);
        /* removed (or added again without its loader yet) in between */
        ck_assert_msg(rc == 0 || rc == SY_ENOTFOUND || rc == SY_EINVAL,
                      "notify %s: %d %s", name, rc, e.message);
        atomic_fetch_add(&g->notifies, 1);
    }
    return NULL;
}

static void *reader(void *arg) {
    race *g = arg;
    char text[32768];
    while (!atomic_load(&g->stop)) {
        size_t n = sy_router_source_count(g->r);
        for (size_t i = 0; i < n; i++) {
            sy_source_status st;
            int rc = sy_router_source_status(g->r, i, &st, NULL);
            ck_assert(rc == 0 || rc == SY_ENOTFOUND);
            if (rc == 0)
                ck_assert(st.name[0] == 's' || !strcmp(st.name, "base"));
        }
        size_t len;
        ck_assert_int_eq(
            sy_router_metrics_text(g->r, text, sizeof text, &len, NULL), 0);
        sy_snapshot *s = sy_router_acquire(g->r);
        const char *src = NULL;
        if (sy_snapshot_find_route(s, "fixed", &src))
            ck_assert_str_eq(src, "base");
        sy_snapshot_release(s);
        atomic_fetch_add(&g->reads, 1);
    }
    return NULL;
}

START_TEST(removals_race_notifies_and_readers) {
    race g = {.r = new_router()};
    sy_error err;
    char doc[512];
    ck_assert_int_eq(sy_router_add_source(g.r, "base", &err), 0);
    ck_assert_int_eq(
        apply(g.r, "base", doc1(doc, sizeof doc, "fixed", 0), &err), 0);
    char name[16];
    for (int i = 0; i < RACE_SOURCES; i++) {
        snprintf(name, sizeof name, "s%d", i);
        ck_assert_int_eq(sy_router_add_source(g.r, name, &err), 0);
        ck_assert_int_eq(
            sy_router_set_loader(g.r, name, empty_loader, NULL, &err), 0);
    }
    pthread_t t[3];
    ck_assert_int_eq(pthread_create(&t[0], NULL, notifier, &g), 0);
    ck_assert_int_eq(pthread_create(&t[1], NULL, notifier, &g), 0);
    ck_assert_int_eq(pthread_create(&t[2], NULL, reader, &g), 0);
    long removed = 0, busy = 0;
    int rounds = 2000 * sy_test_scale();
    /* (the rounds, and on until the reader has had some turns) */
    for (int i = 0;
         i < rounds || (atomic_load(&g.reads) < 20 && i < 50 * rounds); i++) {
        snprintf(name, sizeof name, "s%d", i % RACE_SOURCES);
        int rc = sy_router_remove_source(g.r, name, &err);
        ck_assert_msg(rc == 0 || rc == SY_EBUSY, "remove %s: %d %s", name, rc,
                      err.message);
        if (rc == SY_EBUSY) {
            busy++;
            continue;
        }
        removed++;
        ck_assert_int_eq(sy_router_add_source(g.r, name, &err), 0);
        ck_assert_int_eq(
            sy_router_set_loader(g.r, name, empty_loader, NULL, &err), 0);
    }
    atomic_store(&g.stop, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    ck_assert_int_gt(removed, 0);
    ck_assert_uint_eq(sy_router_source_count(g.r), RACE_SOURCES + 1);
    ck_assert_int_gt(atomic_load(&g.reads), 0);
    printf("# %ld removed, %ld refused (notify running), %ld notifies, %ld "
           "reads\n",
           removed, busy, atomic_load(&g.notifies), atomic_load(&g.reads));
    sy_router_free(g.r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("sources");
    TCase *tc = tcase_create("sources");
    tcase_add_test(tc, a_removed_source_frees_its_place_for_the_257th);
    tcase_add_test(tc,
                   a_source_with_live_routes_is_refused_until_they_are_gone);
    tcase_add_test(tc, status_and_metrics_list_only_the_sources_in_use);
    tcase_add_test(tc, a_new_source_in_a_freed_place_ties_at_that_place);
    tcase_add_test(tc, a_held_snapshot_keeps_the_removed_source_name);
    tcase_add_test(tc, a_change_set_for_a_removed_source_fails_at_commit);
    tcase_add_test(tc, a_source_is_not_removed_while_its_notify_runs);
    tcase_add_test(tc, removals_race_notifies_and_readers);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
