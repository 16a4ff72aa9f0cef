/*
 * test_publish_stress.c - the stress test of the publication protocol
 * (lib/snapshot/publish.c; docs/architecture.md, "Publication"): more
 * reader threads than cores acquire, hold for random times (some very long,
 * some handed to another thread to release) while one writer publishes tens
 * of thousands of objects. Destroyed objects are poisoned and quarantined
 * (never freed before the end), so a reader touching one sees the poison
 * and a late write shows as a changed poison. The same checker must fail on
 * deliberately broken versions of the protocol (sy_pub_broken_*, from
 * tests/hooks/publish_broken.c).
 */
#include "hooks.h"
#include "snapshot/publish.h"
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Which weakening the broken protocol applies (set before threads start). */
#define stress_broken_mode sy__pub_broken_mode

#if defined(__SANITIZE_THREAD__)
#define STRESS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STRESS_TSAN 1
#endif
#endif

#define READERS 6
#define HELD_MAX 8
#define LONG_MAX_HELD 3
#define QUEUE_MAX 64
#define MAGIC UINT64_C(0x5157495443485944)
#define POISON 0xDD
#define PAYLOAD 6

/* The protocol under test: the library's, or a broken copy. */
typedef struct pub_ops {
    const char *name;
    int mode; /* stress_broken_mode while running */
    int (*make)(const sy__alloc *, const sy__pub_options *, sy__pub_obj *,
                sy__pub **);
    void (*destroy_domain)(sy__pub *);
    sy__pub_ref (*acquire)(sy__pub *);
    void (*release)(sy__pub_ref);
    int (*publish)(sy__pub *, sy__pub_obj *);
    size_t (*reclaim)(sy__pub *);
    void (*metrics)(const sy__pub *, sy__pub_metrics *);
} pub_ops;

static const pub_ops correct_ops = {"correct",          0,
                                    sy__pub_new,        sy__pub_free,
                                    sy__pub_acquire,    sy__pub_release,
                                    sy__pub_publish,    sy__pub_reclaim,
                                    sy__pub_metrics_get};
#ifndef STRESS_TSAN
static const pub_ops free_on_swap_ops = {"free on swap",
                                         1,
                                         sy__pub_broken_new,
                                         sy__pub_broken_free,
                                         sy__pub_broken_acquire,
                                         sy__pub_broken_release,
                                         sy__pub_broken_publish,
                                         sy__pub_broken_reclaim,
                                         sy__pub_broken_metrics_get};
static const pub_ops two_step_ops = {
    "two-step acquire",        2,
    sy__pub_broken_new,        sy__pub_broken_free,
    sy__pub_broken_acquire,    sy__pub_broken_release,
    sy__pub_broken_publish,    sy__pub_broken_reclaim,
    sy__pub_broken_metrics_get};
#endif

typedef struct sobj {
    sy__pub_obj hdr;
    uint64_t magic;
    uint64_t serial; /* creation order; 0 is the initial object */
    uint64_t payload[PAYLOAD];
} sobj;

/* What the checker found. A correct protocol leaves everything 0 except
 * created == destroyed. */
typedef struct verdict {
    _Atomic uint64_t bad_reads;   /* a held object was poisoned/corrupt */
    _Atomic uint64_t null_refs;   /* acquire gave no object */
    _Atomic uint64_t regressions; /* a thread saw its generation go back */
    uint64_t double_destroys;
    uint64_t late_writes; /* a quarantined object's poison changed */
    uint64_t leaked;      /* still retired after the final reclaim */
    uint64_t live_after;  /* metrics.live after the final reclaim */
    uint64_t created;
    uint64_t destroyed;
    /* how hard the run pushed */
    _Atomic uint64_t acquires;
    _Atomic uint64_t handed_off; /* released by another thread */
    _Atomic uint64_t long_holds;
    uint64_t max_retired; /* most retired objects held at once */
} verdict;

typedef struct quarantined {
    sobj *obj;
    void *base;
} quarantined;

typedef struct stress {
    const pub_ops *ops;
    sy__alloc alloc;
    sy__pub *pub;
    uint64_t publishes;
    _Atomic uint64_t progress; /* publishes done so far */
    _Atomic int writer_done;
    verdict v;
    /* writer side */
    quarantined *quarantine; /* by serial */
    unsigned char *destroyed_flag;
    /* handoff queue: refs released by another thread */
    pthread_mutex_t lock;
    sy__pub_ref queue[QUEUE_MAX];
    int queued;
} stress;

typedef struct reader {
    stress *st;
    uint64_t rng;
    int index;
} reader;

static uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static void fill(sobj *o, uint64_t serial) {
    o->magic = MAGIC;
    o->serial = serial;
    for (int i = 0; i < PAYLOAD; i++)
        o->payload[i] = serial * 7919u + (uint64_t)i;
}

/* True when the object is intact (not destroyed, not overwritten). */
static bool intact(const sobj *o) {
    const volatile sobj *v = o;
    if (v->magic != MAGIC)
        return false;
    uint64_t serial = v->serial;
    for (int i = 0; i < PAYLOAD; i++)
        if (v->payload[i] != serial * 7919u + (uint64_t)i)
            return false;
    return true;
}

static void stress_destroy(void *data, sy__pub_obj *h) {
    stress *st = data;
    sobj *o = (sobj *)h;
    uint64_t serial = o->serial;
    if (serial > st->publishes || st->destroyed_flag[serial]) {
        st->v.double_destroys++;
        return;
    }
    st->destroyed_flag[serial] = 1;
    st->quarantine[serial].obj = o;
    st->quarantine[serial].base = h->base;
    memset(o, POISON, sizeof *o);
    st->v.destroyed++;
}

/* Check a held object, then give it back. */
static void check_release(stress *st, sy__pub_ref r) {
    if (!intact((sobj *)sy__pub_ref_obj(r)))
        atomic_fetch_add(&st->v.bad_reads, 1);
    st->ops->release(r);
}

static bool queue_push(stress *st, sy__pub_ref r) {
    bool ok = false;
    pthread_mutex_lock(&st->lock);
    if (st->queued < QUEUE_MAX) {
        st->queue[st->queued++] = r;
        ok = true;
    }
    pthread_mutex_unlock(&st->lock);
    return ok;
}

static bool queue_pop(stress *st, sy__pub_ref *r) {
    bool ok = false;
    pthread_mutex_lock(&st->lock);
    if (st->queued > 0) {
        *r = st->queue[--st->queued];
        ok = true;
    }
    pthread_mutex_unlock(&st->lock);
    return ok;
}

static void pause_us(uint64_t us) {
    struct timespec ts = {0, (long)(us * 1000)};
    nanosleep(&ts, NULL);
}

typedef struct held {
    sy__pub_ref ref;
    uint64_t until; /* release when progress reaches this */
} held;

static void *reader_main(void *arg) {
    reader *rd = arg;
    stress *st = rd->st;
    held short_held[HELD_MAX], long_held[LONG_MAX_HELD];
    int n_short = 0, n_long = 0;
    uint64_t last_gen = 0;
    while (!atomic_load(&st->writer_done)) {
        sy__pub_ref r = st->ops->acquire(st->pub);
        sobj *o = (sobj *)sy__pub_ref_obj(r);
        if (!o) {
            atomic_fetch_add(&st->v.null_refs, 1);
            continue;
        }
        atomic_fetch_add_explicit(&st->v.acquires, 1, memory_order_relaxed);
        if (!intact(o))
            atomic_fetch_add(&st->v.bad_reads, 1);
        uint64_t gen = o->hdr.generation;
        if (gen < last_gen)
            atomic_fetch_add(&st->v.regressions, 1);
        last_gen = gen;

        uint64_t now = atomic_load(&st->progress);
        uint64_t dice = rng_next(&rd->rng) % 1000;
        if (dice < 800) {
            check_release(st, r);
        } else if (dice < 930) { /* hold for a while */
            if (n_short == HELD_MAX) {
                check_release(st, short_held[0].ref);
                short_held[0] = short_held[--n_short];
            }
            short_held[n_short].ref = r;
            short_held[n_short++].until = now + rng_next(&rd->rng) % 64;
        } else if (dice < 980) { /* another thread releases it */
            if (queue_push(st, r))
                atomic_fetch_add(&st->v.handed_off, 1);
            else
                check_release(st, r);
        } else if (dice < 995) { /* hold across a sleep */
            pause_us(rng_next(&rd->rng) % 200);
            check_release(st, r);
        } else if (n_long < LONG_MAX_HELD) { /* very long */
            atomic_fetch_add(&st->v.long_holds, 1);
            long_held[n_long].ref = r;
            long_held[n_long++].until =
                now + 1000 + rng_next(&rd->rng) % (st->publishes / 2 + 1);
        } else {
            check_release(st, r);
        }

        /* Release what is due; re-check what is still held. */
        now = atomic_load(&st->progress);
        for (int i = 0; i < n_short;) {
            if (short_held[i].until <= now) {
                check_release(st, short_held[i].ref);
                short_held[i] = short_held[--n_short];
            } else {
                if (!intact((sobj *)sy__pub_ref_obj(short_held[i].ref)))
                    atomic_fetch_add(&st->v.bad_reads, 1);
                i++;
            }
        }
        for (int i = 0; i < n_long;) {
            if (long_held[i].until <= now) {
                check_release(st, long_held[i].ref);
                long_held[i] = long_held[--n_long];
            } else {
                i++;
            }
        }
        sy__pub_ref q;
        if (rng_next(&rd->rng) % 4 == 0 && queue_pop(st, &q))
            check_release(st, q);
    }
    for (int i = 0; i < n_short; i++)
        check_release(st, short_held[i].ref);
    for (int i = 0; i < n_long; i++)
        check_release(st, long_held[i].ref);
    return NULL;
}

static sobj *new_obj(stress *st, uint64_t serial) {
    sobj *o = sy__pub_obj_alloc(&st->alloc, sizeof *o);
    ck_assert_ptr_nonnull(o);
    fill(o, serial);
    return o;
}

/* Let the readers run: on a loaded machine the writer could publish
 * everything between two of their time slices, and the run would test
 * little (test_stress_holds_objects_across_many_publishes counts their
 * acquires). The writer yields until they have acquired once a publish so
 * far, for 20 s of the run at most. */
static void readers_catch_up(stress *st, uint64_t published,
                             const struct timespec *t0) {
    struct timespec now;
    do {
        sched_yield();
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (atomic_load_explicit(&st->v.acquires, memory_order_relaxed) <
                 published &&
             now.tv_sec - t0->tv_sec < 20);
}

/* Run the whole scenario on `ops` and fill *v. */
static void run_stress(const pub_ops *ops, uint64_t publishes, verdict *out) {
    stress *st = calloc(1, sizeof *st);
    ck_assert_ptr_nonnull(st);
    st->ops = ops;
    stress_broken_mode = ops->mode;
    st->publishes = publishes + 1; /* + the final one */
    sy__alloc_init(&st->alloc, NULL);
    st->quarantine = calloc(st->publishes + 1, sizeof *st->quarantine);
    st->destroyed_flag = calloc(st->publishes + 1, 1);
    ck_assert_ptr_nonnull(st->quarantine);
    ck_assert_ptr_nonnull(st->destroyed_flag);
    pthread_mutex_init(&st->lock, NULL);
    sy__pub_options opts = {stress_destroy, NULL, st, 0};
    ck_assert_int_eq(
        ops->make(&st->alloc, &opts, &new_obj(st, 0)->hdr, &st->pub), SY_OK);
    st->v.created = 1;
    /* renew borrow counters often, so renewals race with the readers too */
    if (ops == &correct_ops)
        sy__pub_set_renew_threshold(st->pub, 16);

    reader rd[READERS];
    pthread_t t[READERS];
    for (int i = 0; i < READERS; i++) {
        rd[i].st = st;
        rd[i].index = i;
        rd[i].rng = UINT64_C(0x9E3779B97F4A7C15) * (uint64_t)(i + 1);
        ck_assert_int_eq(pthread_create(&t[i], NULL, reader_main, &rd[i]), 0);
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint64_t i = 1; i <= publishes; i++) {
        sobj *o = new_obj(st, i);
        ck_assert_int_eq(ops->publish(st->pub, &o->hdr), SY_OK);
        st->v.created++;
        atomic_store(&st->progress, i);
        sy__pub_metrics m;
        ops->metrics(st->pub, &m);
        if (m.retired > st->v.max_retired)
            st->v.max_retired = m.retired;
        if (i % 512 == 0)
            readers_catch_up(st, i, &t0);
    }
    atomic_store(&st->writer_done, 1);
    for (int i = 0; i < READERS; i++)
        pthread_join(t[i], NULL);
    sy__pub_ref q;
    while (queue_pop(st, &q))
        check_release(st, q);

    /* Retire the last object readers saw, then nothing may stay behind. */
    sobj *last = new_obj(st, st->publishes);
    ck_assert_int_eq(ops->publish(st->pub, &last->hdr), SY_OK);
    st->v.created++;
    ops->reclaim(st->pub);
    sy__pub_metrics m;
    ops->metrics(st->pub, &m);
    st->v.leaked = m.retired;
    st->v.live_after = m.live;
    ops->destroy_domain(st->pub);

    for (uint64_t i = 0; i <= st->publishes; i++) {
        unsigned char *b = (unsigned char *)st->quarantine[i].obj;
        if (!b)
            continue;
        for (size_t k = 0; k < sizeof(sobj); k++) {
            if (b[k] != POISON) {
                st->v.late_writes++;
                break;
            }
        }
        sy__free(&st->alloc, st->quarantine[i].base);
    }
    stress_broken_mode = 0;
    *out = st->v;
    if (getenv("SY_STRESS_VERBOSE"))
        fprintf(stderr,
                "# %s: %llu acquires, %llu handed off, %llu long holds, "
                "max %llu retired; bad reads %llu, null %llu, regressions "
                "%llu, double frees %llu, late writes %llu, leaked %llu, "
                "destroyed %llu of %llu\n",
                ops->name, (unsigned long long)out->acquires,
                (unsigned long long)out->handed_off,
                (unsigned long long)out->long_holds,
                (unsigned long long)out->max_retired,
                (unsigned long long)out->bad_reads,
                (unsigned long long)out->null_refs,
                (unsigned long long)out->regressions,
                (unsigned long long)out->double_destroys,
                (unsigned long long)out->late_writes,
                (unsigned long long)out->leaked,
                (unsigned long long)out->destroyed,
                (unsigned long long)out->created);
    pthread_mutex_destroy(&st->lock);
    free(st->quarantine);
    free(st->destroyed_flag);
    free(st);
}

static uint64_t default_publishes(void) {
    return 20000u * (uint64_t)sy_test_scale();
}

/* Any finding at all: the checker says the protocol is broken. */
static bool violated(const verdict *v) {
    return v->bad_reads || v->null_refs || v->regressions ||
           v->double_destroys || v->late_writes || v->leaked ||
           v->live_after != 1 || v->destroyed != v->created;
}

START_TEST(test_no_reader_ever_sees_a_freed_object) {
    verdict v;
    run_stress(&correct_ops, default_publishes(), &v);
    ck_assert_uint_eq(v.bad_reads, 0);
    ck_assert_uint_eq(v.null_refs, 0);
    ck_assert_uint_eq(v.late_writes, 0);
    ck_assert_uint_eq(v.double_destroys, 0);
}
END_TEST

START_TEST(test_generations_never_go_back_on_a_thread) {
    verdict v;
    run_stress(&correct_ops, default_publishes() / 4, &v);
    ck_assert_uint_eq(v.regressions, 0);
}
END_TEST

START_TEST(test_every_published_object_is_freed_exactly_once) {
    verdict v;
    run_stress(&correct_ops, default_publishes(), &v);
    ck_assert_uint_eq(v.leaked, 0);
    ck_assert_uint_eq(v.live_after, 1); /* only the current object */
    ck_assert_uint_eq(v.created, default_publishes() + 2);
    ck_assert_uint_eq(v.destroyed, v.created);
    ck_assert(!violated(&v));
}
END_TEST

START_TEST(test_stress_holds_objects_across_many_publishes) {
    verdict v;
    run_stress(&correct_ops, default_publishes() / 4, &v);
    ck_assert_uint_gt(v.acquires, default_publishes() / 4);
    ck_assert_uint_gt(v.handed_off, 0);
    ck_assert_uint_gt(v.long_holds, 0);
    ck_assert_uint_ge(v.max_retired, 2);
    ck_assert(!violated(&v));
}
END_TEST

/* The broken copies race by design: under ThreadSanitizer the reports
 * would end the run, so these run in the other builds only. */
#ifndef STRESS_TSAN
START_TEST(test_checker_catches_free_on_swap) {
    verdict v;
    run_stress(&free_on_swap_ops, 5000, &v);
    ck_assert(violated(&v));
    ck_assert_uint_gt(v.bad_reads + v.late_writes, 0);
}
END_TEST

START_TEST(test_checker_catches_two_step_acquire) {
    verdict v;
    run_stress(&two_step_ops, 5000, &v);
    ck_assert(violated(&v));
}
END_TEST

/* The smallest failing schedule, without threads: a reader holds the old
 * object across one publish. */
START_TEST(test_checker_catches_free_on_swap_without_threads) {
    stress st;
    memset(&st, 0, sizeof st);
    st.publishes = 2;
    quarantined qs[3];
    unsigned char flags[3] = {0, 0, 0};
    memset(qs, 0, sizeof qs);
    st.quarantine = qs;
    st.destroyed_flag = flags;
    st.ops = &free_on_swap_ops;
    sy__alloc_init(&st.alloc, NULL);
    stress_broken_mode = 1;
    sy__pub_options opts = {stress_destroy, NULL, &st, 0};
    ck_assert_int_eq(
        sy__pub_broken_new(&st.alloc, &opts, &new_obj(&st, 0)->hdr, &st.pub),
        SY_OK);
    sy__pub_ref r = sy__pub_broken_acquire(st.pub);
    ck_assert(intact((sobj *)sy__pub_ref_obj(r)));
    ck_assert_int_eq(sy__pub_broken_publish(st.pub, &new_obj(&st, 1)->hdr),
                     SY_OK);
    bool seen = !intact((sobj *)sy__pub_ref_obj(r));
    sy__pub_broken_free(st.pub);
    stress_broken_mode = 0;
    for (int i = 0; i < 3; i++)
        if (qs[i].base)
            sy__free(&st.alloc, qs[i].base);
    ck_assert(seen);
}
END_TEST

#endif

static Suite *stress_suite(void) {
    Suite *s = suite_create("publish_stress");
    TCase *tc = tcase_create("stress");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_no_reader_ever_sees_a_freed_object);
    tcase_add_test(tc, test_generations_never_go_back_on_a_thread);
    tcase_add_test(tc, test_every_published_object_is_freed_exactly_once);
    tcase_add_test(tc, test_stress_holds_objects_across_many_publishes);
#ifndef STRESS_TSAN
    tcase_add_test(tc, test_checker_catches_free_on_swap);
    tcase_add_test(tc, test_checker_catches_two_step_acquire);
    tcase_add_test(tc, test_checker_catches_free_on_swap_without_threads);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return sy_test_run(stress_suite());
}
