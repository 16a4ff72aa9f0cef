/* test_alloc.c - the default allocator (alloc_map.c) and its arena of
 * small blocks (alloc_small.c): bytes kept across classes, realloc and the
 * map threshold; spans given back; the library's blocks out of libc's
 * heap; threads allocating and freeing each other's blocks at once. */
#define _GNU_SOURCE
#include "base/alloc_small.h"
#include "base/util.h"
#include "route/route.h"
#include "testutil.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* Blocks below and above SY_MAP_MIN, moved across it by realloc both
 * ways, keep their bytes; a large calloc is zero; a freed large block
 * leaves the resident set. */
static unsigned char pat(size_t i) {
    return (unsigned char)(i * 131u + 7u);
}

static long rss_pages(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, res = -1;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &res) != 2)
            res = -1;
        fclose(f);
    }
    return res;
}

START_TEST(default_allocator_keeps_bytes_across_the_map_threshold) {
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    size_t small = 1000, big = SY_MAP_MIN + 12345, bigger = 3 * SY_MAP_MIN;
    unsigned char *p = sy__malloc(&a, small);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < small; i++)
        p[i] = pat(i);
    p = sy__realloc(&a, p, big); /* arena -> mapping */
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < small; i++)
        ck_assert_uint_eq(p[i], pat(i));
    for (size_t i = small; i < big; i++)
        p[i] = pat(i);
    p = sy__realloc(&a, p, bigger); /* mapping grows */
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < big; i++)
        ck_assert_uint_eq(p[i], pat(i));
    p[bigger - 1] = 1;
    p = sy__realloc(&a, p, SY_MAP_MIN - 1); /* mapping shrinks, stays */
    ck_assert_ptr_nonnull(p);
    p = sy__realloc(&a, p, 100); /* mapping -> arena */
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < 100; i++)
        ck_assert_uint_eq(p[i], pat(i));
    sy__free(&a, p);
    sy__free(&a, NULL);

    /* many at once (the table of mappings grows), freed in another order */
    enum { N = 200 };
    unsigned char *v[N];
    for (size_t i = 0; i < N; i++) {
        v[i] = i % 3 ? sy__malloc(&a, SY_MAP_MIN + i)
                     : sy__calloc(&a, SY_MAP_MIN + i, 1);
        ck_assert_ptr_nonnull(v[i]);
        if (i % 3 == 0)
            for (size_t k = 0; k < SY_MAP_MIN + i; k += 4093)
                ck_assert_uint_eq(v[i][k], 0);
        v[i][0] = (unsigned char)i;
        v[i][SY_MAP_MIN + i - 1] = (unsigned char)(i + 1);
    }
    for (size_t i = 0; i < N; i += 2)
        sy__free(&a, v[i]);
    for (size_t i = 1; i < N; i += 2) {
        ck_assert_uint_eq(v[i][0], (unsigned char)i);
        ck_assert_uint_eq(v[i][SY_MAP_MIN + i - 1], (unsigned char)(i + 1));
        sy__free(&a, v[i]);
    }

    if (sy__alloc_maps_large() && rss_pages() > 0) {
        /* glibc's own threshold raised (a freed 24 MB block), and a block
         * after ours (the heap's top cannot be trimmed past it): a freed
         * libc block of 16 MB would stay resident */
        void *volatile raise = malloc(24u << 20);
        ck_assert_ptr_nonnull(raise);
        memset(raise, 0, 64);
        free(raise);
        size_t n = 16u << 20;
        long before = rss_pages();
        unsigned char *q = sy__malloc(&a, n);
        ck_assert_ptr_nonnull(q);
        void *pin = malloc(64);
        memset(q, 1, n);
        long touched = rss_pages();
        sy__free(&a, q);
        long after = rss_pages();
        free(pin);
        long mb12 = (12l << 20) / 4096;
        ck_assert_int_ge(touched - before, mb12);
        ck_assert_int_ge(touched - after, mb12);
    }
}
END_TEST

static long minor_faults(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* A freed block of a few MB is kept for the next one of its size: filling
 * the next one faults no fresh pages in, and a calloc served from the keep
 * is zero all the same. */
START_TEST(default_allocator_reuses_a_freed_block_of_its_size) {
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    size_t m = SY_MAP_MIN * 2; /* 1 MiB: 256 pages */
    unsigned char *k = sy__malloc(&a, m);
    ck_assert_ptr_nonnull(k);
    memset(k, 0xab, m);
    sy__free(&a, k);
    long before = minor_faults();
    unsigned char *again = sy__malloc(&a, m - 4096);
    ck_assert_ptr_nonnull(again);
    memset(again, 1, m - 4096);
    long faults = minor_faults() - before;
    ck_assert_int_lt(faults, 32);
    sy__free(&a, again);
    unsigned char *z = sy__calloc(&a, m, 1);
    ck_assert_ptr_nonnull(z);
    for (size_t i = 0; i < m; i += 61)
        ck_assert_uint_eq(z[i], 0);
    ck_assert_uint_eq(z[m - 1], 0);
    sy__free(&a, z);
}
END_TEST

/* ---- the arena ---- */

/* LazyFree of /proc/self/smaps_rollup in KiB, or -1. */
static long lazy_free_kb(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f)
        return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "LazyFree: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static uint64_t rnd(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Sizes as the library asks for them: mostly small, some of a few KiB,
 * a few past the arena's 256 KiB spans' largest class of their own. */
static size_t some_size(uint64_t *x) {
    uint64_t r = rnd(x);
    switch (r % 16) {
    case 0: return 1 + (size_t)(r >> 8) % 70000;
    case 1:
    case 2: return 1 + (size_t)(r >> 8) % 4096;
    default: return 1 + (size_t)(r >> 8) % 512;
    }
}

static void fill(unsigned char *p, size_t n, size_t tag) {
    for (size_t i = 0; i < n; i++)
        p[i] = pat(i + tag);
}

/* every 7th byte and the last */
static bool filled(const unsigned char *p, size_t n, size_t tag) {
    for (size_t i = 0; i < n; i += 7)
        if (p[i] != pat(i + tag))
            return false;
    return p[n - 1] == pat(n - 1 + tag);
}

static void check_fill(const unsigned char *p, size_t n, size_t tag) {
    ck_assert_msg(filled(p, n, tag), "a block of %zu bytes lost its bytes", n);
}

/* Every size below SY_MAP_MIN has a class at least as large, a multiple
 * of 16, never smaller than the class of a smaller size, and wasting less
 * than an eighth of the size (less than 16 bytes up to 1 KiB). */
START_TEST(arena_classes_cover_every_size_with_little_room_lost) {
    size_t prev = 0;
    for (size_t n = 1; n < SY_MAP_MIN; n++) {
        size_t c = sy__small_class_size(n);
        ck_assert_uint_ge(c, n);
        ck_assert_uint_eq(c % 16, 0);
        ck_assert_uint_ge(c, prev);
        if (n <= 1024)
            ck_assert_uint_lt(c - n, 16);
        else
            ck_assert_uint_lt(c - n, n / 8);
        prev = c;
    }
    ck_assert_uint_eq(sy__small_class_size(SY_MAP_MIN - 1), SY_MAP_MIN);
}
END_TEST

/* 20,000 blocks of mixed sizes: each 16-byte aligned, the arena's (its
 * usable size at least what was asked), its bytes intact while others
 * come and go; once all are freed the arena holds no block, keeps at most
 * 4 MiB of spans resident and lets the system take the pages of the rest
 * (LazyFree in smaps_rollup, where the kernel reports it). */
START_TEST(arena_blocks_keep_their_bytes_and_spans_are_given_back) {
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy__small_stats before, mid, after;
    sy__small_stats_get(&before);
    enum { N = 20000 };
    unsigned char **v = calloc(N, sizeof *v);
    size_t *len = calloc(N, sizeof *len);
    uint64_t x = 0x2545F4914F6CDD1Dull;
    for (size_t i = 0; i < N; i++) {
        len[i] = some_size(&x);
        v[i] = i % 5 ? sy__malloc(&a, len[i]) : sy__calloc(&a, len[i], 1);
        ck_assert_ptr_nonnull(v[i]);
        ck_assert_uint_eq((uintptr_t)v[i] % 16, 0);
        ck_assert_uint_ge(sy__small_size(v[i]), len[i]);
        if (i % 5 == 0)
            for (size_t k = 0; k < len[i]; k += 13)
                ck_assert_uint_eq(v[i][k], 0);
        fill(v[i], len[i], i);
    }
    sy__small_stats_get(&mid);
    ck_assert_uint_eq(mid.blocks - before.blocks, N);
    /* free every other one, then fill the holes with new blocks */
    for (size_t i = 0; i < N; i += 2)
        sy__free(&a, v[i]);
    for (size_t i = 1; i < N; i += 2)
        check_fill(v[i], len[i], i);
    for (size_t i = 0; i < N; i += 2) {
        len[i] = some_size(&x);
        v[i] = sy__malloc(&a, len[i]);
        ck_assert_ptr_nonnull(v[i]);
        fill(v[i], len[i], i + 1);
    }
    for (size_t i = 0; i < N; i++)
        check_fill(v[i], len[i], i + !(i % 2));
    long lazy0 = lazy_free_kb();
    for (size_t i = N; i-- > 0;)
        sy__free(&a, v[i]);
    sy__small_stats_get(&after);
    ck_assert_uint_eq(after.blocks, before.blocks);
    ck_assert_uint_gt(after.lazy, before.lazy);
    long lazy1 = lazy_free_kb();
    if (lazy0 >= 0 && lazy1 >= 0) /* most of ~40 MB of blocks */
        ck_assert_int_ge(lazy1 - lazy0, 16 * 1024);
    free(v);
    free(len);
}
END_TEST

/* realloc within a class keeps the block; across classes, to a mapping
 * and back, it keeps the bytes. */
START_TEST(arena_realloc_moves_between_classes_and_mappings) {
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    unsigned char *p = sy__malloc(&a, 20);
    ck_assert_ptr_nonnull(p);
    fill(p, 20, 3);
    unsigned char *q = sy__realloc(&a, p, 30); /* the same class: 32 */
    ck_assert_ptr_eq(q, p);
    size_t steps[] = {300, 40000, 300000, SY_MAP_MIN + 5, 100, 17};
    size_t have = 20;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        size_t n = steps[i];
        p = sy__realloc(&a, p, n);
        ck_assert_ptr_nonnull(p);
        check_fill(p, have < n ? have : n, 3);
        if (n >= SY_MAP_MIN)
            ck_assert_uint_eq(sy__small_size(p), 0); /* a mapping */
        else
            ck_assert_uint_ge(sy__small_size(p), n);
        if (have < n)
            fill(p, n, 3); /* the whole block, for the next step */
        have = n;
    }
    sy__free(&a, p);
}
END_TEST

/* A router of 2,000 routes built with the default allocator leaves libc's
 * heap as it found it (its blocks are the arena's and mappings), and 200
 * single-route upserts after it do not grow libc's heap either. */
START_TEST(router_blocks_are_out_of_libcs_heap) {
    enum { ROUTES = 2000 };
    size_t cap = (size_t)ROUTES * 128 + 16, len = 0;
    char *doc = malloc(cap);
    len += (size_t)snprintf(doc + len, cap - len, "[");
    for (int i = 0; i < ROUTES; i++)
        len += (size_t)snprintf(
            doc + len, cap - len,
            "%s{\"id\":\"r%d\",\"uri\":\"http://u\",\"predicates\":"
            "[\"Path=/svc%d/{id}\"]}",
            i ? "," : "", i, i);
    len += (size_t)snprintf(doc + len, cap - len, "]");
    char one[256];
    sy_error e;
    struct mallinfo2 m0 = mallinfo2();
    sy_router *r = sy_test_router(doc, len);
    struct mallinfo2 m1 = mallinfo2();
    for (int i = 0; i < 200; i++) {
        int n = snprintf(one, sizeof one,
                         "{\"id\":\"r%d\",\"uri\":\"http://v\",\"predicates\":"
                         "[\"Path=/new%d/**\"]}",
                         i * 7 % ROUTES, i);
        ck_assert_int_eq(sy_router_upsert_route(r, "s", one, (size_t)n, &e), 0);
    }
    struct mallinfo2 m2 = mallinfo2();
    /* in libc's heap the routes alone would be ~1 MB */
    ck_assert_msg(m1.uordblks < m0.uordblks + 64 * 1024,
                  "libc's heap grew by %zu bytes with the router",
                  m1.uordblks - m0.uordblks);
    ck_assert_msg(m2.uordblks < m1.uordblks + 16 * 1024,
                  "libc's heap grew by %zu bytes over the upserts",
                  m2.uordblks - m1.uordblks);
    sy_router_free(r);
    free(doc);
}
END_TEST

/* Threads allocate at once, then each frees the blocks another thread
 * allocated (checking their bytes): the arena's lock serves them all. */
enum { T = 4, PER = 5000 };
typedef struct worker {
    unsigned char *v[PER];
    size_t len[PER];
    size_t id;
    struct worker *other; /* whose blocks this one frees */
} worker;

static void *allocate_some(void *arg) {
    worker *w = arg;
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    uint64_t x = 0x9E3779B97F4A7C15ull * (w->id + 1);
    for (size_t i = 0; i < PER; i++) {
        w->len[i] = some_size(&x);
        w->v[i] = sy__malloc(&a, w->len[i]);
        if (!w->v[i])
            return (void *)1;
        fill(w->v[i], w->len[i], i + w->id);
        if (i % 3 == 0) { /* some come and go at once */
            unsigned char *t = sy__malloc(&a, w->len[i] / 2 + 1);
            if (!t)
                return (void *)1;
            sy__free(&a, t);
        }
    }
    return NULL;
}

static void *free_others(void *arg) {
    worker *w = arg;
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    worker *o = w->other;
    for (size_t i = 0; i < PER; i++) {
        if (!filled(o->v[i], o->len[i], i + o->id))
            return (void *)1;
        sy__free(&a, o->v[i]);
        o->v[i] = NULL;
    }
    return NULL;
}

START_TEST(arena_serves_threads_freeing_each_others_blocks) {
    sy__small_stats before, after;
    sy__small_stats_get(&before);
    worker *w = calloc(T, sizeof *w);
    pthread_t th[T];
    for (size_t i = 0; i < T; i++) {
        w[i].id = i;
        w[i].other = &w[(i + 1) % T];
    }
    for (int phase = 0; phase < 2; phase++) {
        for (size_t i = 0; i < T; i++)
            ck_assert_int_eq(pthread_create(&th[i], NULL,
                                            phase ? free_others : allocate_some,
                                            &w[i]),
                             0);
        for (size_t i = 0; i < T; i++) {
            void *rc = (void *)1;
            pthread_join(th[i], &rc);
            ck_assert_ptr_null(rc);
        }
    }
    sy__small_stats_get(&after);
    ck_assert_uint_eq(after.blocks, before.blocks);
    free(w);
}
END_TEST

/* The VmFlags of the mapping that holds p (/proc/self/smaps) hold "hg"
 * (MADV_HUGEPAGE); -1 when no mapping holds p. */
static int smaps_hugepage(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    int in = 0, found = -1;
    uintptr_t u = (uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2) { /* a mapping's head */
            in = u >= lo && u < hi;
            continue;
        }
        if (in && strncmp(line, "VmFlags:", 8) == 0) {
            found = strstr(line, " hg") != NULL;
            in = 0;
        }
    }
    fclose(f);
    return found;
}

/* The one-shot index's arrays (sy__alloc_huge): a block over 2 MiB from
 * a 2 MiB boundary, advised into huge pages (the kernel's own flag agrees
 * with the allocator's), zero, its bytes kept by a shrink; a freed one
 * never kept for reuse, even once shrunk to a keepable size. */
START_TEST(huge_blocks_are_advised_aligned_and_never_kept) {
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    size_t n = ((size_t)5 << 20) + 4321;
    unsigned char *p = sy__alloc_huge(&a, n, true);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq((uintptr_t)p & (((size_t)2 << 20) - 1), 0);
    ck_assert_uint_eq(sy__alloc_mapped_len(p), (n + 4095) & ~(size_t)4095);
    /* where the kernel has transparent huge pages the advice holds */
    bool thp = access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0;
    ck_assert_int_eq(sy__alloc_huge_advised(p), thp);
    ck_assert_int_eq(smaps_hugepage(p), thp);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(p[i], 0);
    for (size_t i = 0; i < n; i++)
        p[i] = pat(i);
    p = sy__realloc(&a, p, (size_t)1 << 20); /* to a keepable size */
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(sy__alloc_huge_advised(p), thp);
    for (size_t i = 0; i < ((size_t)1 << 20); i++)
        ck_assert_uint_eq(p[i], pat(i));
    sy__free(&a, p);
    ck_assert_int_eq(smaps_hugepage(p), -1); /* unmapped, not kept */
    /* a block of 2 MiB or less is an ordinary one */
    unsigned char *q = sy__alloc_huge(&a, (size_t)1 << 20, true);
    ck_assert_ptr_nonnull(q);
    ck_assert(!sy__alloc_huge_advised(q));
    for (size_t i = 0; i < ((size_t)1 << 20); i++)
        ck_assert_uint_eq(q[i], 0);
    sy__free(&a, q);
}
END_TEST

/* A refused advice (a kernel without transparent huge pages) leaves a
 * block in small pages that works as any other: zero, written, freed out
 * of the process. */
START_TEST(huge_block_falls_back_when_the_advice_fails) {
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy__alloc_huge_test_fail(true);
    size_t n = (size_t)3 << 20;
    unsigned char *p = sy__alloc_huge(&a, n, true);
    sy__alloc_huge_test_fail(false);
    ck_assert_ptr_nonnull(p);
    ck_assert(!sy__alloc_huge_advised(p));
    ck_assert_int_eq(smaps_hugepage(p), 0);
    ck_assert_uint_eq(sy__alloc_mapped_len(p), n);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(p[i], 0);
    for (size_t i = 0; i < n; i++)
        p[i] = pat(i);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(p[i], pat(i));
    sy__free(&a, p);
    ck_assert_int_eq(smaps_hugepage(p), -1);
}
END_TEST

/* A bulk's block: from a 2 MiB boundary, whole huge pages, advised where
 * the kernel has them, its bytes kept. */
static void check_bulk_block(unsigned char *p, size_t n, size_t tag, bool thp) {
    size_t huge = (size_t)2 << 20;
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq((uintptr_t)p & (huge - 1), 0);
    ck_assert_uint_eq(sy__alloc_mapped_len(p), (n + huge - 1) & ~(huge - 1));
    ck_assert_int_eq(sy__alloc_huge_advised(p), thp);
    ck_assert_int_eq(smaps_hugepage(p), thp);
    check_fill(p, n, tag);
}

static void *bulk_elsewhere(void *arg) {
    (void)arg;
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    unsigned char *p = sy__malloc(&a, (size_t)3 << 20);
    bool advised = p && sy__alloc_huge_advised(p);
    sy__free(&a, p);
    return advised ? p : NULL;
}

/* In a bulk (sy__alloc_bulk: an apply's temporaries), a block of 1 MiB or
 * more is mapped in whole huge pages, and one that grows to 1 MiB or more
 * moves into them (copied from small pages, moved from huge ones), its
 * bytes kept; smaller blocks, other threads' blocks and blocks made after
 * the bulk are ordinary; a freed bulk block is unmapped, not kept. */
START_TEST(bulk_blocks_take_huge_pages_in_their_thread_only) {
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    bool thp = access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0;
    size_t mib = (size_t)1 << 20;
    unsigned char *small = sy__malloc(&a, 3 * mib / 4); /* before the bulk */
    ck_assert_ptr_nonnull(small);
    fill(small, 3 * mib / 4, 7);
    ck_assert(!sy__alloc_bulk(true));
    size_t n = 3 * mib / 2;
    unsigned char *p = sy__malloc(&a, n);
    ck_assert_ptr_nonnull(p);
    fill(p, n, 1);
    check_bulk_block(p, n, 1, thp);
    /* grown from huge pages: moved to a boundary, its room whole pages */
    size_t m = 3 * mib + 5;
    p = sy__realloc(&a, p, m);
    fill(p + n, m - n, 1 + n);
    check_bulk_block(p, m, 1, thp);
    /* grown from small pages: copied */
    small = sy__realloc(&a, small, n);
    fill(small + 3 * mib / 4, n - 3 * mib / 4, 7 + 3 * mib / 4);
    check_bulk_block(small, n, 7, thp);
    /* a block below 1 MiB is an ordinary one; another thread's too */
    unsigned char *q = sy__malloc(&a, mib - 4096);
    ck_assert_ptr_nonnull(q);
    ck_assert(!sy__alloc_huge_advised(q));
    pthread_t t;
    void *other = NULL;
    ck_assert_int_eq(pthread_create(&t, NULL, bulk_elsewhere, NULL), 0);
    ck_assert_int_eq(pthread_join(t, &other), 0);
    ck_assert_ptr_null(other);
    /* a refused advice: a block that works in small pages */
    sy__alloc_huge_test_fail(true);
    unsigned char *r = sy__malloc(&a, n);
    sy__alloc_huge_test_fail(false);
    ck_assert_ptr_nonnull(r);
    ck_assert(!sy__alloc_huge_advised(r));
    fill(r, n, 3);
    check_fill(r, n, 3);
    ck_assert(sy__alloc_bulk(false));
    unsigned char *after = sy__malloc(&a, (size_t)3 << 20);
    ck_assert_ptr_nonnull(after);
    ck_assert(!sy__alloc_huge_advised(after));
    ck_assert_int_eq(smaps_hugepage(after), 0);
    sy__free(&a, p);
    ck_assert_int_eq(smaps_hugepage(p), -1); /* unmapped, not kept */
    sy__free(&a, small);
    ck_assert_int_eq(smaps_hugepage(small), -1);
    sy__free(&a, q);
    sy__free(&a, r);
    sy__free(&a, after);
}
END_TEST

static size_t user_mallocs;
static void *user_malloc(void *d, size_t n) {
    (void)d;
    user_mallocs++;
    void *p = malloc(n);
    if (p)
        memset(p, 0xab, n); /* so that a missed clear shows */
    return p;
}
static void *user_realloc(void *d, void *p, size_t n) {
    (void)d;
    return realloc(p, n);
}
static void user_free(void *d, void *p) {
    (void)d;
    free(p);
}

/* A host's own allocator gives every block, huge ones too, zeroed when
 * asked; none is advised. */
START_TEST(huge_block_of_a_hosts_allocator_is_its_own) {
    sy_allocator user = {user_malloc, user_realloc, user_free, NULL};
    sy__alloc a;
    sy__alloc_init(&a, &user);
    size_t n = (size_t)3 << 20, before = user_mallocs;
    unsigned char *p = sy__alloc_huge(&a, n, true);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(user_mallocs, before + 1);
    ck_assert(!sy__alloc_huge_advised(p));
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(p[i], 0);
    sy__free(&a, p);
}
END_TEST

/* Whether any byte of [p, p + n) is mapped (mincore fails with ENOMEM
 * on an unmapped range). */
static bool mapped(const void *p, size_t n) {
    unsigned char vec[64];
    return mincore((void *)p, n, vec) == 0 || errno != ENOMEM;
}

/* A block given back a part at a time (index_step.c): cut in place to
 * whole pages whatever its size (realloc would keep a 1.5 MiB block
 * whole), its first bytes kept, its tail out of the process; then
 * unmapped whole, not kept for the next block. Not a mapped block, or a
 * length not below its own: nothing done. */
START_TEST(a_mapped_block_is_cut_in_place_and_given_back) {
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    size_t n = (size_t)3 << 19;
    unsigned char *p = sy__malloc(&a, n);
    ck_assert_ptr_nonnull(p);
    size_t len = sy__alloc_mapped_len(p);
    ck_assert_uint_ge(len, n);
    for (size_t i = 0; i < n; i++)
        p[i] = pat(i);
    ck_assert(!sy__alloc_cut(p, len));
    ck_assert_uint_eq(sy__alloc_mapped_len(p), len);
    ck_assert(sy__alloc_cut(p, (size_t)1 << 20));
    ck_assert_uint_eq(sy__alloc_mapped_len(p), (size_t)1 << 20);
    ck_assert(!mapped(p + ((size_t)1 << 20), 4096));
    ck_assert(sy__alloc_cut(p, 5000)); /* to whole pages */
    ck_assert_uint_eq(sy__alloc_mapped_len(p), 8192);
    ck_assert(!mapped(p + 8192, 4096));
    for (size_t i = 0; i < 8192; i++)
        ck_assert_uint_eq(p[i], pat(i));
    ck_assert(sy__alloc_cut(p, 0));
    ck_assert_uint_eq(sy__alloc_mapped_len(p), 0);
    ck_assert(!mapped(p, 4096));
    unsigned char *q = sy__malloc(&a, 1000); /* the arena's */
    ck_assert_ptr_nonnull(q);
    ck_assert(!sy__alloc_cut(q, 0));
    ck_assert(!sy__alloc_cut(q, 10));
    memset(q, 7, 1000);
    sy__free(&a, q);
}
END_TEST

/* On x86-64 a route block must lie below 2^48 (the index packs its
 * pointer's top 16 bits): a host's allocator that places one above it
 * has the block back and the route refused as out of memory, never a
 * route whose packed pointer would be cut. */
typedef struct high_hooks {
    bool armed;
    void *freed;
} high_hooks;
static void *high_malloc(void *data, size_t size) {
    high_hooks *h = data;
    return h->armed ? (void *)(uintptr_t)(UINT64_C(1) << 50) : malloc(size);
}
static void *high_realloc(void *data, void *p, size_t size) {
    (void)data;
    return realloc(p, size);
}
static void high_free(void *data, void *p) {
    high_hooks *h = data;
    if (p == (void *)(uintptr_t)(UINT64_C(1) << 50))
        h->freed = p;
    else
        free(p);
}
START_TEST(a_route_block_above_the_packed_bits_is_refused) {
    high_hooks h = {false, NULL};
    sy_allocator user = {high_malloc, high_realloc, high_free, &h};
    sy__alloc a;
    sy__alloc_init(&a, &user);
    struct sy_route *r = sy__route_new(&a);
    ck_assert_ptr_nonnull(r); /* a block below 2^48 */
    sy__route_unref(r);
    h.armed = true;
#if SY_ROUTE_ADDR_BITS
    ck_assert_ptr_null(sy__route_new(&a));
    ck_assert_ptr_eq(h.freed, (void *)(uintptr_t)(UINT64_C(1) << 50));
#endif
}
END_TEST

int main(void) {
    Suite *s = suite_create("alloc");
    TCase *tc = tcase_create("alloc");
    /* the mapped blocks and the arena exist only where SY_MAP_ON (not
     * under ASan, whose allocator must see every block): elsewhere their
     * tests are reported as skipped, not passed without looking */
    static const char *const off = "no mapped blocks nor arena in this "
                                   "build (alloc_small.h: SY_MAP_ON)";
#define ARENA_TEST(t)                                                          \
    do {                                                                       \
        if (sy__small_on())                                                    \
            tcase_add_test(tc, t);                                             \
        else                                                                   \
            sy_test_skip(#t, off);                                             \
    } while (0)
    tcase_add_test(tc, default_allocator_keeps_bytes_across_the_map_threshold);
    ARENA_TEST(default_allocator_reuses_a_freed_block_of_its_size);
    ARENA_TEST(arena_classes_cover_every_size_with_little_room_lost);
    ARENA_TEST(arena_blocks_keep_their_bytes_and_spans_are_given_back);
    ARENA_TEST(arena_realloc_moves_between_classes_and_mappings);
    ARENA_TEST(router_blocks_are_out_of_libcs_heap);
    tcase_add_test(tc, arena_serves_threads_freeing_each_others_blocks);
    ARENA_TEST(huge_blocks_are_advised_aligned_and_never_kept);
    ARENA_TEST(huge_block_falls_back_when_the_advice_fails);
    ARENA_TEST(a_mapped_block_is_cut_in_place_and_given_back);
    ARENA_TEST(bulk_blocks_take_huge_pages_in_their_thread_only);
    tcase_add_test(tc, huge_block_of_a_hosts_allocator_is_its_own);
    tcase_add_test(tc, a_route_block_above_the_packed_bits_is_refused);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
