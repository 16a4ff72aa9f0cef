/*
 * publish_hooks.c - test and benchmark hooks on the publication domain
 * (lib/snapshot/publish.c), kept out of the shipped library: the renewal threshold
 * the tests lower, and the bare acquire/release benchmark of
 * switchyard-bench. They reach the domain's layout through
 * lib/snapshot/publish_int.h.
 */
#include "hooks.h"
#include "snapshot/publish_int.h"

#include <sched.h>
#include <time.h>

void sy__pub_set_renew_threshold(sy__pub *p, uint64_t borrows) {
    p->renew_at = borrows ? borrows : 1;
}

/* ---- benchmark ---- */

typedef struct sy__pub_bench {
    sy__pub *pub;
    sy__alloc alloc;
    _Atomic int go; /* 0: wait, 1: run, -1: give up */
    _Atomic int readers_left;
    uint64_t iters;
} sy__pub_bench;

typedef struct sy__pub_bench_reader {
    sy__pub_bench *b;
    double ns;
    uint64_t sink;
} sy__pub_bench_reader;

/* The reader's own CPU time: other processes on a busy machine do not
 * inflate it, cache-line traffic between our threads still does. */
static uint64_t sy__pub_bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sy__pub_bench_destroy(void *data, sy__pub_obj *o) {
    sy__pub_obj_free(data, o);
}

static bool sy__pub_bench_wait(sy__pub_bench *b) {
    int go;
    while ((go = atomic_load_explicit(&b->go, memory_order_acquire)) == 0)
        sched_yield();
    return go > 0;
}

static void *sy__pub_bench_read(void *arg) {
    sy__pub_bench_reader *r = arg;
    sy__pub_bench *b = r->b;
    uint64_t sink = 0;
    if (sy__pub_bench_wait(b)) {
        uint64_t t0 = sy__pub_bench_now_ns();
        for (uint64_t i = 0; i < b->iters; i++) {
            sy__pub_ref ref = sy__pub_acquire(b->pub);
            sink += sy__pub_ref_obj(ref)->generation;
            sy__pub_release(ref);
        }
        r->ns = (double)(sy__pub_bench_now_ns() - t0) / (double)b->iters;
    }
    r->sink = sink;
    atomic_fetch_sub_explicit(&b->readers_left, 1, memory_order_acq_rel);
    return NULL;
}

static void *sy__pub_bench_write(void *arg) {
    sy__pub_bench *b = arg;
    if (!sy__pub_bench_wait(b))
        return NULL;
    while (atomic_load_explicit(&b->readers_left, memory_order_acquire) > 0) {
        sy__pub_obj *o = sy__pub_obj_alloc(&b->alloc, sizeof(sy__pub_obj));
        if (o && sy__pub_publish(b->pub, o) != SY_OK)
            sy__pub_obj_free(&b->alloc, o);
    }
    return NULL;
}

double sy__pub_bench_acquire_release_ns(int threads, bool storm,
                                        uint64_t iters) {
    if (threads < 1 || threads > 256 || iters == 0)
        return -1;
    sy__pub_bench b;
    memset(&b, 0, sizeof b);
    sy__alloc_init(&b.alloc, NULL);
    b.iters = iters;
    atomic_init(&b.go, 0);
    atomic_init(&b.readers_left, threads);
    sy__pub_options opts = {sy__pub_bench_destroy, NULL, &b.alloc, 0};
    sy__pub_obj *first = sy__pub_obj_alloc(&b.alloc, sizeof(sy__pub_obj));
    if (!first)
        return -1;
    if (sy__pub_new(&b.alloc, &opts, first, &b.pub) != SY_OK) {
        sy__pub_obj_free(&b.alloc, first);
        return -1;
    }
    sy__pub_bench_reader *r = sy__calloc(&b.alloc, (size_t)threads, sizeof *r);
    pthread_t *tid = sy__calloc(&b.alloc, (size_t)threads + 1, sizeof *tid);
    int started = 0;
    bool writer = false;
    if (r && tid) {
        for (; started < threads; started++) {
            r[started].b = &b;
            if (pthread_create(&tid[started], NULL, sy__pub_bench_read,
                               &r[started]) != 0)
                break;
        }
        if (started == threads && storm)
            writer = pthread_create(&tid[threads], NULL, sy__pub_bench_write,
                                    &b) == 0;
    }
    bool ok = r && tid && started == threads && (!storm || writer);
    atomic_store_explicit(&b.go, ok ? 1 : -1, memory_order_release);
    double sum = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(tid[i], NULL);
        sum += r[i].ns;
    }
    if (writer)
        pthread_join(tid[threads], NULL);
    sy__free(&b.alloc, r);
    sy__free(&b.alloc, tid);
    sy__pub_free(b.pub);
    return ok ? sum / threads : -1;
}
