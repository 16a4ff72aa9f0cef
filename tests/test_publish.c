/*
 * test_publish.c - unit tests of the publication protocol (lib/snapshot/publish.c):
 * acquire/release, retirement, reclamation, the retired cap, the held
 * callback, metrics and allocation.
 */
#include "hooks.h"
#include "snapshot/publish.h"
#include "testutil.h"

#include <pthread.h>
#include <stdlib.h>

#define MAX_OBJS 256

typedef struct tobj {
    sy__pub_obj hdr;
    int id;
} tobj;

/* Per-test world: allocator, fake clock, destroy bookkeeping. */
typedef struct world {
    sy__alloc alloc;
    uint64_t now_ms;
    int destroyed;
    int destroyed_ids[MAX_OBJS];
    int next_id;
    sy__pub *pub;
} world;

static void w_destroy(void *data, sy__pub_obj *o) {
    world *w = data;
    if (w->destroyed < MAX_OBJS)
        w->destroyed_ids[w->destroyed] = ((tobj *)o)->id;
    w->destroyed++;
    sy__pub_obj_free(&w->alloc, o);
}

static uint64_t w_clock(void *data) {
    return ((world *)data)->now_ms;
}

static tobj *w_obj(world *w) {
    tobj *o = sy__pub_obj_alloc(&w->alloc, sizeof(tobj));
    ck_assert_ptr_nonnull(o);
    o->id = w->next_id++;
    return o;
}

static bool w_was_destroyed(const world *w, int id) {
    for (int i = 0; i < w->destroyed && i < MAX_OBJS; i++)
        if (w->destroyed_ids[i] == id)
            return true;
    return false;
}

static void w_init_cap(world *w, size_t max_retired) {
    memset(w, 0, sizeof *w);
    sy__alloc_init(&w->alloc, NULL);
    w->now_ms = 1000;
    sy__pub_options opts = {w_destroy, w_clock, w, max_retired};
    tobj *first = w_obj(w);
    ck_assert_int_eq(sy__pub_new(&w->alloc, &opts, &first->hdr, &w->pub),
                     SY_OK);
}

static void w_init(world *w) {
    w_init_cap(w, 0);
}

static tobj *w_publish(world *w) {
    tobj *o = w_obj(w);
    ck_assert_int_eq(sy__pub_publish(w->pub, &o->hdr), SY_OK);
    return o;
}

static tobj *ref_tobj(sy__pub_ref r) {
    return (tobj *)sy__pub_ref_obj(r);
}

START_TEST(test_acquire_returns_current) {
    world w;
    w_init(&w);
    sy__pub_ref r = sy__pub_acquire(w.pub);
    ck_assert_ptr_eq(sy__pub_ref_obj(r), sy__pub_current(w.pub));
    ck_assert_int_eq(ref_tobj(r)->id, 0);
    sy__pub_release(r);
    sy__pub_free(w.pub);
}
END_TEST

START_TEST(test_ref_carries_shard_in_low_bits_only) {
    world w;
    w_init(&w);
    sy__pub_ref r = sy__pub_acquire(w.pub);
    ck_assert_uint_eq((uintptr_t)sy__pub_ref_obj(r) % SY_PUB_ALIGN, 0);
    ck_assert_uint_lt(r - (uintptr_t)sy__pub_ref_obj(r), SY_PUB_SHARDS);
    sy__pub_release(r);
    sy__pub_free(w.pub);
}
END_TEST

START_TEST(test_publish_makes_next_current_and_stamps_generation) {
    world w;
    w_init(&w);
    ck_assert_uint_eq(sy__pub_current(w.pub)->generation, 0);
    tobj *a = w_publish(&w);
    ck_assert_uint_eq(a->hdr.generation, 1);
    tobj *b = w_publish(&w); /* frees a: nobody holds it */
    ck_assert_uint_eq(b->hdr.generation, 2);
    sy__pub_ref r = sy__pub_acquire(w.pub);
    ck_assert_ptr_eq(ref_tobj(r), b);
    sy__pub_release(r);
    sy__pub_free(w.pub);
}
END_TEST

START_TEST(test_unheld_old_object_is_freed_by_publish) {
    world w;
    w_init(&w);
    sy__pub_ref r = sy__pub_acquire(w.pub);
    sy__pub_release(r);
    w_publish(&w);
    ck_assert_int_eq(w.destroyed, 1);
    ck_assert(w_was_destroyed(&w, 0));
    sy__pub_free(w.pub);
}
END_TEST

START_TEST(test_held_old_object_survives_publish) {
    world w;
    w_init(&w);
    sy__pub_ref r = sy__pub_acquire(w.pub);
    w_publish(&w);
    w_publish(&w);
    ck_assert(!w_was_destroyed(&w, 0));
    ck_assert_int_eq(ref_tobj(r)->id, 0);
    ck_assert(!sy__pub_obj_dead(sy__pub_ref_obj(r)));
    sy__pub_release(r);
    ck_assert_uint_eq(sy__pub_reclaim(w.pub), 1);
    ck_assert(w_was_destroyed(&w, 0));
    sy__pub_free(w.pub);
}
END_TEST

START_TEST(test_renewed_borrow_counters_still_free_at_last_release) {
    world w;
    w_init(&w);
    sy__pub_set_renew_threshold(w.pub, 4);
    enum { N = 200 };
    static sy__pub_ref r[N];
    /* borrows pile up on one shard past the threshold, renewals move them
     * to the object's counter while the object is current */
    for (int i = 0; i < N; i++) {
        r[i] = sy__pub_acquire(w.pub);
        if (i % 7 == 0)
            sy__pub_reclaim(w.pub);
    }
    sy__pub_obj *old = sy__pub_ref_obj(r[0]);
    for (int i = 0; i < N / 2; i++)
        sy__pub_release(r[i]);
    sy__pub_reclaim(w.pub);
    w_publish(&w);
    for (int i = N / 2; i < N - 1; i++) {
        sy__pub_release(r[i]);
        ck_assert(!sy__pub_obj_dead(old));
    }
    ck_assert_uint_eq(sy__pub_reclaim(w.pub), 0);
    sy__pub_release(r[N - 1]);
    ck_assert(sy__pub_obj_dead(old));
    ck_assert_uint_eq(sy__pub_reclaim(w.pub), 1);
    sy__pub_free(w.pub);
}
END_TEST

START_TEST(test_old_object_dies_exactly_at_last_release) {
    world w;
    w_init(&w);
    sy__pub_ref r[3];
    for (int i = 0; i < 3; i++)
        r[i] = sy__pub_acquire(w.pub);
    sy__pub_obj *old = sy__pub_ref_obj(r[0]);
    w_publish(&w);
    for (int i = 0; i < 2; i++) {
        sy__pub_release(r[i]);
        ck_assert(!sy__pub_obj_dead(old));
        ck_assert_uint_eq(sy__pub_reclaim(w.pub), 0);
    }
    sy__pub_release(r[2]);
    ck_assert(sy__pub_obj_dead(old));
    ck_assert_uint_eq(sy__pub_reclaim(w.pub), 1);
    ck_assert_int_eq(w.destroyed, 1);
    sy__pub_free(w.pub);
}
END_TEST

START_TEST(test_releases_before_publish_are_counted) {
    world w;
    w_init(&w);
    /* Many acquire/release pairs on the current object, then one held. */
    for (int i = 0; i < 1000; i++)
        sy__pub_release(sy__pub_acquire(w.pub));
    sy__pub_ref held = sy__pub_acquire(w.pub);
    w_publish(&w);
    ck_assert(!sy__pub_obj_dead(sy__pub_ref_obj(held)));
    sy__pub_release(held);
    ck_assert_uint_eq(sy__pub_reclaim(w.pub), 1);
    sy__pub_free(w.pub);
}
END_TEST

static void *release_thread(void *arg) {
    sy__pub_release(*(sy__pub_ref *)arg);
    return NULL;
}

START_TEST(test_release_on_another_thread) {
    world w;
    w_init(&w);
    sy__pub_ref r = sy__pub_acquire(w.pub);
    w_publish(&w);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, release_thread, &r), 0);
    pthread_join(t, NULL);
    ck_assert_uint_eq(sy__pub_reclaim(w.pub), 1);
    ck_assert(w_was_destroyed(&w, 0));
    sy__pub_free(w.pub);
}
END_TEST

typedef struct acq_arg {
    sy__pub *pub;
    sy__pub_ref ref;
} acq_arg;

static void *acquire_thread(void *arg) {
    acq_arg *a = arg;
    a->ref = sy__pub_acquire(a->pub);
    return NULL;
}

START_TEST(test_refs_taken_on_many_threads_all_count) {
    enum { N = 12 };
    world w;
    w_init(&w);
    acq_arg a[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        a[i].pub = w.pub;
        ck_assert_int_eq(pthread_create(&t[i], NULL, acquire_thread, &a[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    sy__pub_obj *old = sy__pub_ref_obj(a[0].ref);
    w_publish(&w);
    for (int i = N - 1; i >= 0; i--) {
        ck_assert_ptr_eq(sy__pub_ref_obj(a[i].ref), old);
        ck_assert(!sy__pub_obj_dead(old));
        sy__pub_release(a[i].ref);
    }
    ck_assert(sy__pub_obj_dead(old));
    ck_assert_uint_eq(sy__pub_reclaim(w.pub), 1);
    sy__pub_free(w.pub);
}
END_TEST

START_TEST(test_cap_returns_ebusy_and_leaves_next_with_caller) {
    world w;
    w_init_cap(&w, 2);
    sy__pub_ref r0 = sy__pub_acquire(w.pub);
    w_publish(&w);
    sy__pub_ref r1 = sy__pub_acquire(w.pub);
    tobj *cur = w_publish(&w);
    tobj *next = w_obj(&w);
    ck_assert_int_eq(sy__pub_publish(w.pub, &next->hdr), SY_EBUSY);
    ck_assert_ptr_eq(sy__pub_current(w.pub), &cur->hdr);
    ck_assert_int_eq(w.destroyed, 0);
    sy__pub_metrics m;
    sy__pub_metrics_get(w.pub, &m);
    ck_assert_uint_eq(m.publishes, 2);
    ck_assert_uint_eq(m.generation, 2);
    /* Once a holder lets go, the same object publishes. */
    sy__pub_release(r0);
    ck_assert_int_eq(sy__pub_publish(w.pub, &next->hdr), SY_OK);
    ck_assert_uint_eq(next->hdr.generation, 3);
    sy__pub_release(r1);
    sy__pub_free(w.pub);
    ck_assert_int_eq(w.destroyed, 4);
}
END_TEST

START_TEST(test_publish_rejects_the_current_object) {
    world w;
    w_init(&w);
    ck_assert_int_eq(sy__pub_publish(w.pub, sy__pub_current(w.pub)), SY_EINVAL);
    ck_assert_int_eq(sy__pub_publish(w.pub, NULL), SY_EINVAL);
    sy__pub_free(w.pub);
}
END_TEST

START_TEST(test_new_requires_destroy_callback) {
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy__pub_options opts = {NULL, NULL, NULL, 0};
    sy__pub_obj *o = sy__pub_obj_alloc(&a, sizeof *o);
    sy__pub *p = NULL;
    ck_assert_int_eq(sy__pub_new(&a, &opts, o, &p), SY_EINVAL);
    ck_assert_ptr_null(p);
    sy__pub_obj_free(&a, o);
}
END_TEST

typedef struct held_log {
    int calls;
    uint64_t generation[8];
    uint64_t age[8];
} held_log;

static void on_held(void *data, uint64_t generation, uint64_t age_ms) {
    held_log *h = data;
    if (h->calls < 8) {
        h->generation[h->calls] = generation;
        h->age[h->calls] = age_ms;
    }
    h->calls++;
}

START_TEST(test_held_callback_reports_old_retired_object_once) {
    world w;
    w_init(&w);
    w_publish(&w);                          /* generation 1 current */
    sy__pub_ref r = sy__pub_acquire(w.pub); /* hold generation 1 */
    w.now_ms = 2000;
    w_publish(&w); /* retires generation 1 at t=2000 */
    w.now_ms = 7000;
    held_log h = {0};
    ck_assert_uint_eq(sy__pub_check_held(w.pub, 5000, on_held, &h), 1);
    ck_assert_int_eq(h.calls, 1);
    ck_assert_uint_eq(h.generation[0], 1);
    ck_assert_uint_eq(h.age[0], 5000);
    ck_assert_uint_eq(sy__pub_check_held(w.pub, 5000, on_held, &h), 0);
    ck_assert_int_eq(h.calls, 1);
    sy__pub_release(r);
    sy__pub_free(w.pub);
}
END_TEST

START_TEST(test_held_callback_skips_young_and_released_objects) {
    world w;
    w_init(&w);
    sy__pub_ref r0 = sy__pub_acquire(w.pub);
    w_publish(&w); /* retires generation 0 at t=1000 */
    sy__pub_ref r1 = sy__pub_acquire(w.pub);
    w.now_ms = 1500;
    w_publish(&w); /* retires generation 1 at t=1500 */
    sy__pub_release(r0);
    w.now_ms = 2200;
    held_log h = {0};
    /* generation 0 is old but released; generation 1 is too young */
    ck_assert_uint_eq(sy__pub_check_held(w.pub, 1000, on_held, &h), 0);
    ck_assert_int_eq(h.calls, 0);
    sy__pub_release(r1);
    sy__pub_free(w.pub);
}
END_TEST

START_TEST(test_metrics_track_publishes_live_retired_bytes_and_age) {
    world w;
    w_init(&w);
    sy__pub_metrics m;
    sy__pub_metrics_get(w.pub, &m);
    ck_assert_uint_eq(m.generation, 0);
    ck_assert_uint_eq(m.publishes, 0);
    ck_assert_uint_eq(m.live, 1);
    ck_assert_uint_eq(m.retired, 0);
    ck_assert_uint_eq(m.oldest_retired_age_ms, 0);

    sy__pub_current(w.pub)->bytes = 1000;
    sy__pub_ref r0 = sy__pub_acquire(w.pub);
    w_publish(&w); /* retired at 1000 */
    sy__pub_current(w.pub)->bytes = 300;
    sy__pub_ref r1 = sy__pub_acquire(w.pub);
    w.now_ms = 1250;
    w_publish(&w);
    w.now_ms = 1400;
    sy__pub_metrics_get(w.pub, &m);
    ck_assert_uint_eq(m.generation, 2);
    ck_assert_uint_eq(m.publishes, 2);
    ck_assert_uint_eq(m.live, 3);
    ck_assert_uint_eq(m.retired, 2);
    ck_assert_uint_eq(m.reclaimed, 0);
    ck_assert_uint_eq(m.retired_bytes, 1300);
    ck_assert_uint_eq(m.oldest_retired_age_ms, 400);

    sy__pub_release(r0);
    sy__pub_reclaim(w.pub);
    sy__pub_metrics_get(w.pub, &m);
    ck_assert_uint_eq(m.live, 2);
    ck_assert_uint_eq(m.retired, 1);
    ck_assert_uint_eq(m.reclaimed, 1);
    ck_assert_uint_eq(m.retired_bytes, 300);
    ck_assert_uint_eq(m.oldest_retired_age_ms, 150);
    sy__pub_release(r1);
    sy__pub_free(w.pub);
}
END_TEST

START_TEST(test_free_destroys_current_and_retired_objects) {
    world w;
    w_init(&w);
    sy__pub_ref r = sy__pub_acquire(w.pub);
    w_publish(&w);
    w_publish(&w);
    sy__pub_release(r); /* dead but not yet reclaimed */
    sy__pub_ref r2 = sy__pub_acquire(w.pub);
    w_publish(&w);
    sy__pub_release(r2);
    int before = w.destroyed;
    sy__pub_free(w.pub);
    ck_assert_int_eq(w.destroyed, 4);
    ck_assert_int_lt(before, 4);
}
END_TEST

START_TEST(test_slot_table_grows_while_objects_are_held) {
    enum { N = 100 };
    world w;
    w_init(&w);
    sy__pub_ref r[N];
    for (int i = 0; i < N; i++) {
        r[i] = sy__pub_acquire(w.pub);
        w_publish(&w);
    }
    ck_assert_int_eq(w.destroyed, 0);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(ref_tobj(r[i])->id, i);
    sy__pub_ref cur = sy__pub_acquire(w.pub);
    ck_assert_int_eq(ref_tobj(cur)->id, N);
    sy__pub_release(cur);
    for (int i = 0; i < N; i++)
        sy__pub_release(r[i]);
    ck_assert_uint_eq(sy__pub_reclaim(w.pub), N);
    /* Recycled slots serve new objects. */
    tobj *last = w_publish(&w);
    cur = sy__pub_acquire(w.pub);
    ck_assert_ptr_eq(ref_tobj(cur), last);
    sy__pub_release(cur);
    sy__pub_free(w.pub);
    ck_assert_int_eq(w.destroyed, N + 2);
}
END_TEST

/* Hooks that hand out 16- but never 64-byte aligned memory, and can fail. */
typedef struct odd_heap {
    int allocs;
    int fail_after; /* < 0: never */
} odd_heap;

static void *odd_malloc(void *data, size_t n) {
    odd_heap *h = data;
    if (h->fail_after >= 0 && h->allocs >= h->fail_after)
        return NULL;
    h->allocs++;
    unsigned char *raw = aligned_alloc(64, ((n + 16 + 63) / 64) * 64);
    if (!raw)
        return NULL;
    memcpy(raw, &n, sizeof n);
    return raw + 16;
}
static void *odd_realloc(void *data, void *p, size_t n) {
    unsigned char *q = odd_malloc(data, n);
    if (q && p) {
        size_t old;
        memcpy(&old, (unsigned char *)p - 16, sizeof old);
        memcpy(q, p, old < n ? old : n);
        free((unsigned char *)p - 16);
    }
    return q;
}
static void odd_free(void *data, void *p) {
    SY_UNUSED(data);
    free((unsigned char *)p - 16);
}

START_TEST(test_objects_are_64_byte_aligned_with_16_byte_hooks) {
    odd_heap h = {0, -1};
    sy_allocator user = {odd_malloc, odd_realloc, odd_free, &h};
    sy__alloc a;
    sy__alloc_init(&a, &user);
    for (size_t size = sizeof(sy__pub_obj); size < sizeof(sy__pub_obj) + 200;
         size += 24) {
        sy__pub_obj *o = sy__pub_obj_alloc(&a, size);
        ck_assert_ptr_nonnull(o);
        ck_assert_uint_eq((uintptr_t)o % 64, 0);
        ck_assert_uint_eq(o->bytes, size);
        ck_assert(!sy__pub_obj_dead(o));
        memset((char *)o + sizeof *o, 0xAB, size - sizeof *o);
        sy__pub_obj_free(&a, o);
    }
    ck_assert_int_gt(h.allocs, 0);
}
END_TEST

static void odd_destroy(void *data, sy__pub_obj *o) {
    sy__pub_obj_free(data, o);
}

START_TEST(test_publish_out_of_memory_changes_nothing) {
    odd_heap h = {0, -1};
    sy_allocator user = {odd_malloc, odd_realloc, odd_free, &h};
    sy__alloc a;
    sy__alloc_init(&a, &user);
    sy__pub_options opts = {odd_destroy, NULL, &a, 0};
    sy__pub *p;
    ck_assert_int_eq(
        sy__pub_new(&a, &opts, sy__pub_obj_alloc(&a, sizeof(sy__pub_obj)), &p),
        SY_OK);
    /* Hold every object so the first 16 slots fill up. */
    sy__pub_ref r[16];
    for (int i = 0; i < 16; i++) {
        r[i] = sy__pub_acquire(p);
        if (i < 15)
            ck_assert_int_eq(
                sy__pub_publish(p, sy__pub_obj_alloc(&a, sizeof(sy__pub_obj))),
                SY_OK);
    }
    sy__pub_obj *next = sy__pub_obj_alloc(&a, sizeof(sy__pub_obj));
    sy__pub_obj *cur = sy__pub_current(p);
    h.fail_after = h.allocs; /* growing the table must fail */
    ck_assert_int_eq(sy__pub_publish(p, next), SY_ENOMEM);
    ck_assert_ptr_eq(sy__pub_current(p), cur);
    sy__pub_ref now = sy__pub_acquire(p);
    ck_assert_ptr_eq(sy__pub_ref_obj(now), cur);
    sy__pub_release(now);
    h.fail_after = -1;
    ck_assert_int_eq(sy__pub_publish(p, next), SY_OK);
    for (int i = 0; i < 16; i++)
        sy__pub_release(r[i]);
    ck_assert_uint_eq(sy__pub_reclaim(p), 16);
    sy__pub_free(p);
}
END_TEST

/* A short concurrent run: readers acquire/release while the writer
 * publishes; every object is freed exactly once, none while held. */
typedef struct race {
    sy__pub *pub;
    _Atomic int stop;
    _Atomic int bad;
} race;

static void *race_reader(void *arg) {
    race *rc = arg;
    while (!atomic_load(&rc->stop)) {
        sy__pub_ref r = sy__pub_acquire(rc->pub);
        if (ref_tobj(r)->id < 0)
            atomic_fetch_add(&rc->bad, 1);
        sy__pub_release(r);
    }
    return NULL;
}

static void race_destroy(void *data, sy__pub_obj *o) {
    world *w = data;
    ((tobj *)o)->id = -1;
    w->destroyed++;
    sy__pub_obj_free(&w->alloc, o);
}

START_TEST(test_concurrent_readers_and_writer_free_each_object_once) {
    enum { READERS = 4 };
    int publishes = 2000 * sy_test_scale();
    world w;
    memset(&w, 0, sizeof w);
    sy__alloc_init(&w.alloc, NULL);
    sy__pub_options opts = {race_destroy, NULL, &w, 0};
    ck_assert_int_eq(sy__pub_new(&w.alloc, &opts, &w_obj(&w)->hdr, &w.pub),
                     SY_OK);
    race rc = {w.pub, 0, 0};
    pthread_t t[READERS];
    for (int i = 0; i < READERS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, race_reader, &rc), 0);
    for (int i = 0; i < publishes; i++)
        w_publish(&w);
    atomic_store(&rc.stop, 1);
    for (int i = 0; i < READERS; i++)
        pthread_join(t[i], NULL);
    sy__pub_reclaim(w.pub);
    sy__pub_metrics m;
    sy__pub_metrics_get(w.pub, &m);
    ck_assert_int_eq(atomic_load(&rc.bad), 0);
    ck_assert_uint_eq(m.live, 1);
    ck_assert_uint_eq(m.reclaimed, (uint64_t)publishes);
    sy__pub_free(w.pub);
    ck_assert_int_eq(w.destroyed, publishes + 1);
}
END_TEST

START_TEST(test_bench_reports_a_positive_time) {
    double ns = sy__pub_bench_acquire_release_ns(1, false, 10000);
    ck_assert(ns > 0);
    ns = sy__pub_bench_acquire_release_ns(1, true, 10000);
    ck_assert(ns > 0);
    ck_assert(sy__pub_bench_acquire_release_ns(0, false, 10) < 0);
}
END_TEST

static Suite *publish_suite(void) {
    Suite *s = suite_create("publish");
    TCase *tc = tcase_create("protocol");
    tcase_add_test(tc, test_acquire_returns_current);
    tcase_add_test(tc, test_ref_carries_shard_in_low_bits_only);
    tcase_add_test(tc, test_publish_makes_next_current_and_stamps_generation);
    tcase_add_test(tc, test_unheld_old_object_is_freed_by_publish);
    tcase_add_test(tc, test_held_old_object_survives_publish);
    tcase_add_test(tc, test_old_object_dies_exactly_at_last_release);
    tcase_add_test(tc, test_renewed_borrow_counters_still_free_at_last_release);
    tcase_add_test(tc, test_releases_before_publish_are_counted);
    tcase_add_test(tc, test_release_on_another_thread);
    tcase_add_test(tc, test_refs_taken_on_many_threads_all_count);
    tcase_add_test(tc, test_cap_returns_ebusy_and_leaves_next_with_caller);
    tcase_add_test(tc, test_publish_rejects_the_current_object);
    tcase_add_test(tc, test_new_requires_destroy_callback);
    tcase_add_test(tc, test_held_callback_reports_old_retired_object_once);
    tcase_add_test(tc, test_held_callback_skips_young_and_released_objects);
    tcase_add_test(tc, test_metrics_track_publishes_live_retired_bytes_and_age);
    tcase_add_test(tc, test_free_destroys_current_and_retired_objects);
    tcase_add_test(tc, test_slot_table_grows_while_objects_are_held);
    tcase_add_test(tc, test_objects_are_64_byte_aligned_with_16_byte_hooks);
    tcase_add_test(tc, test_publish_out_of_memory_changes_nothing);
    tcase_add_test(tc,
                   test_concurrent_readers_and_writer_free_each_object_once);
    tcase_add_test(tc, test_bench_reports_a_positive_time);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return sy_test_run(publish_suite());
}
