/*
 * alloc_map.c - the library's default allocator (a host that passes no
 * sy_allocator): blocks of SY_MAP_MIN bytes or more are mapped and
 * unmapped directly, so that a freed one goes back to the system at once
 * (but for a small keep of freed blocks of up to 2 MiB, reused by the next
 * block of their size); smaller blocks come from the library's own arena
 * of spans (alloc_small.c). None of the library's blocks is in libc's
 * heap.
 *
 * Why: an apply's temporaries are large arrays (the document's scan, sort
 * buffers, the index build's lists: tens of MB at 100,000 routes) freed
 * when it returns. glibc serves a first large block with mmap, but the
 * free of such a block raises its threshold to that block's size (up to
 * 32 MiB), so the next ones come from the heap, between the routes that
 * stay, and their pages stay resident after the free (~170 bytes a route
 * at 100,000, docs/architecture.md "Memory of an apply"). Mapping them
 * ourselves keeps the threshold where glibc starts it, for this library's
 * blocks only: the host's own malloc policy (mallopt) is left alone. The
 * small blocks stay out of libc's heap for the reason alloc_small.c gives
 * (a long-lived one pins the heap's top, and its free trims all below).
 *
 * In a bulk (sy__alloc_bulk: a document's apply, whose large temporaries
 * are tens of MB faulted in and freed), a block of BULK_MIN or more is
 * mapped in whole 2 MiB pages, advised into transparent huge pages: on
 * this VM a small page's fault costs ~2.1 us, a huge page's ~0.5 us per
 * 4 KiB (docs/performance.md, Round 11 (session 43)).
 *
 * A mapped block starts on a page; its size is kept in a table (an
 * open-addressing set of the live mappings, under the default allocator's
 * one lock, sy__alloc_lock), looked up only for page-aligned pointers that
 * are not the arena's. Only where alloc_small.h sets SY_MAP_ON (glibc on
 * Linux, not under AddressSanitizer); elsewhere every block is libc's. A
 * block is libc's also where the arena or a mapping could not be had (out
 * of memory).
 */
#define _GNU_SOURCE
#include "base/alloc_map.h"
#include "base/alloc_small.h"

#include <stdlib.h>
#include <string.h>

#ifdef SY_MAP_ON
#include <malloc.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

#ifdef SY_MAP_ON

/* The live mappings: base -> mapped bytes (whole pages). */
static sy__addr_tab maps;
/* set before the first mapping is handed out: until then no free needs
 * the table (or its lock) */
static _Atomic bool map_any;

/* Freed blocks kept for the next block of their size, oldest first (still
 * in the table): a host that re-applies a document of a few MB reuses its
 * resident pages instead of faulting fresh ones in at every apply, while
 * the keep bounds what stays resident. */
#define SY_MAP_KEEP_N 4
#define SY_MAP_KEEP_MAX ((size_t)2 << 20)
#define SY_MAP_KEEP_BYTES ((size_t)4 << 20)
static struct {
    uintptr_t base[SY_MAP_KEEP_N];
    size_t len[SY_MAP_KEEP_N];
    size_t n, bytes;
} map_kept;

/* A mapping's table value is its length, with this bit set for a block
 * advised into huge pages (sy__alloc_huge): such a block is never kept for
 * reuse, so that no later block grows into fresh huge pages. */
#define HUGE_BIT ((size_t)1)
#define HUGE_LEN ((size_t)2 << 20)
static bool huge_advice_fails; /* tests: sy__alloc_huge_test_fail */
/* sy__alloc_bulk: this thread's blocks of BULK_MIN bytes or more go in
 * huge pages (one of less than 2 MiB takes a whole one) */
static _Thread_local bool bulk_on;
#define BULK_MIN ((size_t)1 << 20)

static size_t pages_of(size_t n) {
    long ps = sysconf(_SC_PAGESIZE);
    size_t page = ps > 0 ? (size_t)ps : 4096;
    return (n + page - 1) & ~(page - 1);
}

/* The mapped length of p (a mapped block), or 0 when p is libc's. */
static size_t mapped_len(const void *p) {
    uintptr_t u = (uintptr_t)p;
    if (!p || (u & 4095u) ||
        !atomic_load_explicit(&map_any, memory_order_acquire))
        return 0;
    sy__alloc_lock();
    const sy__addr_entry *e = sy__addr_tab_find(&maps, u);
    size_t len = e ? e->val & ~HUGE_BIT : 0;
    sy__alloc_unlock();
    return len;
}

/* Under the lock (sy__alloc_lock): a kept block of at least len bytes (and not
 * more than twice that), taken out of the keep; 0 when none fits. */
static uintptr_t keep_take(size_t len, size_t *got) {
    size_t best = SY_MAP_KEEP_N;
    for (size_t i = 0; i < map_kept.n; i++)
        if (map_kept.len[i] >= len && map_kept.len[i] / 2 <= len &&
            (best == SY_MAP_KEEP_N || map_kept.len[i] < map_kept.len[best]))
            best = i;
    if (best == SY_MAP_KEEP_N)
        return 0;
    uintptr_t base = map_kept.base[best];
    *got = map_kept.len[best];
    map_kept.bytes -= *got;
    map_kept.n--;
    map_kept.base[best] = map_kept.base[map_kept.n];
    map_kept.len[best] = map_kept.len[map_kept.n];
    return base;
}

/* len bytes (whole pages) mapped from a 2 MiB boundary, not yet in the
 * table; NULL when no mapping could be had. */
static char *huge_reserve(size_t len) {
    if (len > SIZE_MAX - HUGE_LEN)
        return NULL;
    char *m = mmap(NULL, len + HUGE_LEN, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    uintptr_t u = (uintptr_t)m, p = (u + HUGE_LEN - 1) & ~(HUGE_LEN - 1);
    if (p > u)
        munmap(m, p - u);
    if (u + HUGE_LEN > p)
        munmap((void *)(p + len), u + HUGE_LEN - p);
    return (char *)p;
}

/* p (len bytes) advised into transparent huge pages: true when it was. */
static bool huge_advise(void *p, size_t len) {
    return !huge_advice_fails && madvise(p, len, MADV_HUGEPAGE) == 0;
}

/* A bulk block's mapped length: whole huge pages (a partly used last one
 * would fault in small pages; its unused rest is never touched). */
static size_t bulk_len(size_t len) {
    return (len + HUGE_LEN - 1) & ~(HUGE_LEN - 1);
}

/* Enter a new mapping of `len` bytes (with its HUGE_BIT `flags`) in the
 * table of mapped blocks; unmapped again when the table has no room. */
static void *map_record(void *p, size_t len, size_t flags) {
    sy__alloc_lock();
    bool ok = sy__addr_tab_room(&maps, 1);
    if (ok)
        sy__addr_tab_put(&maps, (uintptr_t)p, len | flags);
    sy__alloc_unlock();
    atomic_store_explicit(&map_any, true, memory_order_release);
    if (!ok) {
        munmap(p, len);
        return NULL;
    }
    return p;
}

/* n bytes (HUGE_LEN or more) mapped from a 2 MiB boundary and advised into
 * transparent huge pages; NULL when no mapping could be had. A failed
 * advice leaves a block in small pages, as good as map_new's. */
static void *map_huge(size_t n) {
    size_t len = pages_of(n);
    char *p = len < n ? NULL : huge_reserve(len);
    if (!p)
        return NULL;
    bool huge = huge_advise(p, len);
    return map_record(p, len, huge ? HUGE_BIT : 0);
}

static void *map_new(size_t n, bool zero) {
    size_t len = pages_of(n);
    if (len < n)
        return NULL;
    if (bulk_on && len >= BULK_MIN && len <= SIZE_MAX - HUGE_LEN) {
        void *p = map_huge(bulk_len(len));
        if (p)
            return p; /* zero already */
    }
    if (len <= SY_MAP_KEEP_MAX &&
        atomic_load_explicit(&map_any, memory_order_acquire)) {
        size_t got = 0;
        sy__alloc_lock();
        uintptr_t base = keep_take(len, &got);
        sy__alloc_unlock();
        if (base) {
            if (zero)
                memset((void *)base, 0, n);
            return (void *)base;
        }
        /* room for a block that grows a little next time (address space
         * only: pages are resident once touched) */
        size_t more = pages_of(n + n / 8);
        if (more <= SY_MAP_KEEP_MAX)
            len = more;
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    return map_record(p, len, 0);
}

/* Keep a freed mapped block of `len` bytes for the next one of its size
 * when it is small enough and the keep has room; otherwise forget and
 * unmap it. */
static void map_drop(void *p, size_t len) {
    sy__alloc_lock();
    sy__addr_entry *e = sy__addr_tab_find(&maps, (uintptr_t)p);
    if (e && len <= SY_MAP_KEEP_MAX && !(e->val & HUGE_BIT)) {
        /* the oldest kept blocks make room (slot 0 is the oldest) */
        while (map_kept.n && (map_kept.n == SY_MAP_KEEP_N ||
                              map_kept.bytes + len > SY_MAP_KEEP_BYTES)) {
            uintptr_t old = map_kept.base[0];
            size_t old_len = map_kept.len[0];
            sy__addr_entry *oe = sy__addr_tab_find(&maps, old);
            if (oe)
                sy__addr_tab_delete(oe);
            map_kept.n--;
            map_kept.bytes -= old_len;
            memmove(map_kept.base, map_kept.base + 1,
                    map_kept.n * sizeof map_kept.base[0]);
            memmove(map_kept.len, map_kept.len + 1,
                    map_kept.n * sizeof map_kept.len[0]);
            munmap((void *)old, old_len);
        }
        map_kept.base[map_kept.n] = (uintptr_t)p;
        map_kept.len[map_kept.n++] = len;
        map_kept.bytes += len;
        sy__alloc_unlock();
        return;
    }
    if (e)
        sy__addr_tab_delete(e);
    sy__alloc_unlock();
    munmap(p, len);
}

static void *map_malloc(void *d, size_t n) {
    SY_UNUSED(d);
    void *p = n >= SY_MAP_MIN ? map_new(n, false) : sy__small_alloc(n);
    return p ? p : malloc(n);
}

static void map_free(void *d, void *p) {
    SY_UNUSED(d);
    if (sy__small_free(p))
        return;
    size_t len = mapped_len(p);
    if (len)
        map_drop(p, len);
    else
        free(p);
}

/* A new block for n bytes holding the first `old` bytes of p (all of them
 * when n is larger), p freed; NULL (p untouched) when out of memory. */
static void *map_move(void *d, void *p, size_t old, size_t n) {
    void *q = map_malloc(d, n ? n : 1);
    if (!q)
        return NULL;
    memcpy(q, p, old < n ? old : n);
    map_free(d, p);
    return q;
}

static void *map_realloc(void *d, void *p, size_t n) {
    if (!p)
        return map_malloc(d, n);
    size_t small = sy__small_size(p);
    if (small) {
        /* the same class keeps its block; another moves */
        if (n < SY_MAP_MIN && sy__small_class_size(n) == small)
            return p;
        void *q = map_move(d, p, small, n);
        return q ? q : n <= small ? p : NULL;
    }
    size_t len = mapped_len(p);
    if (!len) { /* libc's (the arena or a mapping was out of memory) */
        void *q = map_move(d, p, malloc_usable_size(p), n);
        return q ? q : realloc(p, n);
    }
    if (n < SY_MAP_MIN / 2) { /* shrunk well below: into the arena */
        void *q = map_move(d, p, len, n);
        return q ? q : n <= len ? p : NULL;
    }
    size_t want = pages_of(n);
    if (want < n)
        return NULL;
    if (want == len ||
        (want < len && len <= SY_MAP_KEEP_MAX && want >= len / 2))
        return p; /* a keepable block keeps its room */
    /* a block growing to BULK_MIN or more in a bulk (sy__alloc_bulk):
     * copied into a new one when it is in small pages (they would hold
     * its first 2 MiB page), else moved to a 2 MiB boundary and advised,
     * so that its new room faults in huge pages */
    bool grow = bulk_on && want > len && want >= BULK_MIN &&
                want <= SIZE_MAX - HUGE_LEN;
    if (grow && len < HUGE_LEN) {
        void *q = map_move(d, p, len, n);
        if (q)
            return q;
    }
    if (grow)
        want = bulk_len(want);
    char *to = grow ? huge_reserve(want) : NULL;
    sy__alloc_lock();
    /* the table must have room before the mapping moves, so that a moved
     * block is never unknown */
    bool room = sy__addr_tab_room(&maps, 1);
    void *q = room && to
                  ? mremap(p, len, want, MREMAP_MAYMOVE | MREMAP_FIXED, to)
                  : MAP_FAILED;
    /* the reservation, unused (a failed move has unmapped it already) */
    if (to && !room)
        munmap(to, want);
    if (room && q == MAP_FAILED)
        q = mremap(p, len, want, MREMAP_MAYMOVE);
    if (q != MAP_FAILED) {
        sy__addr_entry *e = sy__addr_tab_find(&maps, (uintptr_t)p);
        size_t huge = e->val & HUGE_BIT;
        if (q == to && huge_advise(q, want))
            huge = HUGE_BIT;
        if (q == p) {
            e->val = want | huge;
        } else {
            sy__addr_tab_delete(e);
            sy__addr_tab_put(&maps, (uintptr_t)q, want | huge); /* room above */
        }
    }
    sy__alloc_unlock();
    if (q == MAP_FAILED)
        return n <= len ? p : NULL; /* a shrink may keep the block */
    return q;
}

/* Zeroed memory: a new mapping is zero already (its pages are not
 * touched until used); a block of the arena is cleared. */
static void *map_calloc(size_t n) {
    if (n >= SY_MAP_MIN) {
        void *p = map_new(n, true);
        if (p)
            return p;
    } else {
        void *p = sy__small_alloc(n);
        if (p)
            return memset(p, 0, n);
    }
    return calloc(1, n ? n : 1);
}

#else /* libc's, as they are */

static void *map_malloc(void *d, size_t n) {
    SY_UNUSED(d);
    return malloc(n);
}
static void *map_realloc(void *d, void *p, size_t n) {
    SY_UNUSED(d);
    return realloc(p, n);
}
static void map_free(void *d, void *p) {
    SY_UNUSED(d);
    free(p);
}

#endif /* SY_MAP_ON */

/* The default allocator is stateless: one copy serves every route. */
static const sy__alloc shared_default = {map_malloc, map_realloc, map_free,
                                         NULL};

void *sy__alloc_default_calloc(const sy__alloc *a, size_t n) {
#ifdef SY_MAP_ON
    if (a->malloc == map_malloc)
        return map_calloc(n);
#endif
    SY_UNUSED(a);
    SY_UNUSED(n);
    return SY_ALLOC_NOT_DEFAULT;
}

void sy__alloc_default(sy__alloc *out) {
    *out = shared_default;
}

const sy__alloc *sy__alloc_default_shared(const sy__alloc *a) {
    if (a->malloc != shared_default.malloc ||
        a->realloc != shared_default.realloc ||
        a->free != shared_default.free || a->data != shared_default.data)
        return NULL;
    return &shared_default;
}

bool sy__alloc_maps_large(void) {
#ifdef SY_MAP_ON
    return true;
#else
    return false;
#endif
}

void *sy__alloc_huge(const sy__alloc *a, size_t n, bool zero) {
#ifdef SY_MAP_ON
    if (a->malloc == map_malloc && n > HUGE_LEN) {
        void *p = map_huge(n);
        if (p)
            return p; /* zero already */
    }
    if (a->malloc == map_malloc)
        return zero ? map_calloc(n) : map_malloc(NULL, n);
#endif
    void *p = a->malloc(a->data, n ? n : 1);
    if (p && zero)
        memset(p, 0, n);
    return p;
}

bool sy__alloc_bulk(bool on) {
#ifdef SY_MAP_ON
    bool was = bulk_on;
    bulk_on = on;
    return was;
#else
    SY_UNUSED(on);
    return false;
#endif
}

void sy__alloc_huge_test_fail(bool fail) {
#ifdef SY_MAP_ON
    huge_advice_fails = fail;
#else
    SY_UNUSED(fail);
#endif
}

bool sy__alloc_huge_advised(const void *p) {
#ifdef SY_MAP_ON
    uintptr_t u = (uintptr_t)p;
    if (!p || (u & 4095u) ||
        !atomic_load_explicit(&map_any, memory_order_acquire))
        return false;
    sy__alloc_lock();
    const sy__addr_entry *e = sy__addr_tab_find(&maps, u);
    bool huge = e && (e->val & HUGE_BIT);
    sy__alloc_unlock();
    return huge;
#else
    SY_UNUSED(p);
    return false;
#endif
}

size_t sy__alloc_mapped_len(const void *p) {
#ifdef SY_MAP_ON
    return mapped_len(p);
#else
    (void)p;
    return 0;
#endif
}

bool sy__alloc_cut(void *p, size_t to) {
#ifdef SY_MAP_ON
    size_t len = mapped_len(p), want = to ? pages_of(to) : 0;
    if (!len || want >= len)
        return false;
    sy__alloc_lock();
    sy__addr_entry *e = sy__addr_tab_find(&maps, (uintptr_t)p);
    if (e && want)
        e->val = want | (e->val & HUGE_BIT);
    else if (e)
        sy__addr_tab_delete(e);
    sy__alloc_unlock();
    if (!e)
        return false;
    munmap((char *)p + want, len - want); /* no other block's pages */
    return true;
#else
    (void)p;
    (void)to;
    return false;
#endif
}
