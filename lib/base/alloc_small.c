/*
 * alloc_small.c - where the default allocator (alloc_map.c) keeps blocks
 * of fewer than SY_MAP_MIN bytes: size classes carved from spans that the
 * library maps itself, never from libc's heap.
 *
 * Why: a long-lived block in libc's heap (a route, a snapshot's list) pins
 * the heap's top: what the host or an apply freed below it stays in the
 * heap, and when that block is freed at last glibc gives all of it back to
 * the system at once, inside whatever call made the free. A single-route
 * publish that takes tens of microseconds took ~3 ms in the kernel that
 * way, trimming 45 MB that earlier work had freed (docs/performance.md,
 * round 7). Blocks of the library's own spans are not in libc's heap, so
 * the library's frees never trim it, and its long-lived blocks pin nothing
 * of the host's.
 *
 * Classes: 16-byte steps up to 1 KiB, then eight a doubling up to
 * SY_MAP_MIN (less than an eighth of a block unused). A span holds blocks
 * of one class: 256 KiB for classes up to 32 KiB, else the power of two
 * that holds eight. Spans are aligned to SPAN_UNIT (256 KiB), and a table
 * maps every unit a span covers to the span, so a free finds its span (or
 * learns that the block is not the arena's) with one probe. A span hands
 * out its freed blocks first, then its untouched tail in order (its pages
 * become resident only as they are used); its first block is offset by a
 * few cache lines that differ from class to class (its colour), so that
 * the spans' first blocks do not all fall in the same cache sets.
 *
 * A span whose last block is freed is kept for the next span of its size:
 * resident, up to KEEP_BYTES of such spans, and beyond that lazily freed
 * (MADV_FREE: the system takes the pages when it needs memory; a span
 * reused before that faults none in). So a rebuild after a large free
 * (a re-apply of every route, a router freed and made again) reuses pages
 * as it did in libc's heap, and memory no one uses goes back under
 * pressure. Spans are never unmapped: the address space the arena holds
 * is the most it ever held at once.
 *
 *     span (256 KiB aligned)
 *     +--------+--------+-------+-------+-------+- - - - - - - - - -+
 *     | header | colour | block | block | block |  untouched tail   |
 *     +--------+--------+-------+-------+-------+- - - - - - - - - -+
 *                free list --^ (freed blocks, linked by their first word)
 *
 * One mutex guards it all, and alloc_map.c's table of mappings too (the
 * default allocator's one lock): an apply allocates about one block a
 * route and a publish a few dozen, so it is held for tens of nanoseconds
 * at a time; a fork handler keeps a child from inheriting it locked.
 */
#define _GNU_SOURCE
#include "base/alloc_small.h"

#include <stdint.h>
#include <string.h>

#ifdef SY_MAP_ON

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#define SPAN_SHIFT 18
#define SPAN_UNIT ((size_t)1 << SPAN_SHIFT)
#define SMALL_SPAN_CLASS_MAX ((size_t)32 * 1024)
#define NCLASS 136 /* the last serves up to 512 KiB (SY_MAP_MIN) */
#define KEEP_BYTES ((size_t)4 << 20)
/* the header's room at the start of a span (blocks stay 16-aligned) */
#define HEADER_BYTES 64
/* A span's first block starts 0-63 cache lines after the header, by its
 * class (5 is prime to 64: neighbouring classes far apart): spans are
 * 256 KiB aligned, and with the first blocks of all of them in the same
 * cache sets match/github took 29.4-30.8 ns, 27.3-28.3 with these colours
 * (-falign-functions=64 builds, six runs each, with the classes of then:
 * 16-byte steps to 256 bytes; glibc's heap: 26.4-26.6; with today's
 * classes 26.9-27.2). By class, the colours are the same in every run;
 * taken from the span's address (which ASLR moves) github was 27-28 or
 * 29-31 ns by the run. */
#define SPAN_COLOURS 64

typedef struct span {
    struct span *next, *prev; /* in its class's list of spans with room */
    char *bump;               /* the first never-used block */
    char *end;                /* the span's end */
    void *free;               /* freed blocks, linked by their first word */
    size_t bytes;             /* mapped */
    uint32_t live;            /* blocks handed out */
    uint16_t cls;
    bool listed; /* in its class's list */
} span;

_Static_assert(sizeof(span) <= HEADER_BYTES, "span header fits its room");

static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t small_once = PTHREAD_ONCE_INIT;
static span *with_room[NCLASS]; /* spans with a free or untouched block */
/* empty spans, linked through next: resident (at most KEEP_BYTES), and
 * lazily freed (their pages the system's to take) */
static span *kept, *lazy;
static size_t kept_bytes, kept_n, lazy_n;
static sy__small_stats totals; /* but kept and lazy: kept_n, lazy_n */

/* Units -> spans: a unit's base address to its span. */
static sy__addr_tab units;

/* A fork while another thread holds the lock must not leave the child
 * with it locked (as glibc does for malloc's own locks). */
static void fork_prepare(void) {
    pthread_mutex_lock(&alloc_lock);
}
static void fork_after(void) {
    pthread_mutex_unlock(&alloc_lock);
}
static void small_init(void) {
    pthread_atfork(fork_prepare, fork_after, fork_after);
}

void sy__alloc_lock(void) {
    pthread_once(&small_once, small_init);
    pthread_mutex_lock(&alloc_lock);
}

void sy__alloc_unlock(void) {
    pthread_mutex_unlock(&alloc_lock);
}

/* ---- classes ---- */

/* n in (2^k, 2^(k+1)] (k >= 10) is in the eighth q of that range */
static unsigned class_of(size_t n) {
    if (n <= 1024)
        return n ? (unsigned)((n - 1) >> 4) : 0;
    unsigned k = 63u - (unsigned)__builtin_clzll((unsigned long long)n - 1);
    return 64u + (k - 10u) * 8u + (unsigned)(((n - 1) >> (k - 3)) & 7u);
}

static size_t class_size(unsigned c) {
    if (c < 64)
        return (size_t)(c + 1) * 16;
    unsigned k = 10 + (c - 64) / 8, q = (c - 64) % 8;
    return ((size_t)1 << k) + (size_t)(q + 1) * ((size_t)1 << (k - 3));
}

static size_t span_bytes(unsigned c) {
    size_t sz = class_size(c);
    if (sz <= SMALL_SPAN_CLASS_MAX)
        return SPAN_UNIT;
    size_t b = SPAN_UNIT;
    while (b < sz * 8)
        b *= 2;
    return b;
}

/* ---- address tables (alloc_small.h; under the lock) ---- */

static size_t addr_home(const sy__addr_tab *t, uintptr_t key) {
    return (size_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> 32) &
           (t->cap - 1);
}

sy__addr_entry *sy__addr_tab_find(const sy__addr_tab *t, uintptr_t key) {
    if (!t->cap)
        return NULL;
    for (size_t k = addr_home(t, key);; k = (k + 1) & (t->cap - 1)) {
        if (t->e[k].key == key)
            return &t->e[k];
        if (t->e[k].key == 0)
            return NULL;
    }
}

void sy__addr_tab_put(sy__addr_tab *t, uintptr_t key, uintptr_t val) {
    size_t k = addr_home(t, key);
    while (t->e[k].key > 1)
        k = (k + 1) & (t->cap - 1);
    t->used += t->e[k].key == 0;
    t->e[k] = (sy__addr_entry){key, val};
}

void sy__addr_tab_delete(sy__addr_entry *e) {
    e->key = 1;
}

bool sy__addr_tab_room(sy__addr_tab *t, size_t more) {
    if (t->cap && (t->used + more) * 4 <= t->cap * 3)
        return true;
    size_t live = 0;
    for (size_t i = 0; i < t->cap; i++)
        live += t->e[i].key > 1;
    size_t cap = 64;
    while (cap * 3 < (live + more) * 4 * 2)
        cap *= 2;
    sy__addr_entry *e = mmap(NULL, cap * sizeof *e, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (e == MAP_FAILED)
        return false;
    sy__addr_tab old = *t;
    *t = (sy__addr_tab){e, cap, 0};
    for (size_t i = 0; i < old.cap; i++)
        if (old.e[i].key > 1)
            sy__addr_tab_put(t, old.e[i].key, old.e[i].val);
    if (old.e)
        munmap(old.e, old.cap * sizeof *old.e);
    return true;
}

/* ---- spans (under the lock) ---- */

static void list_add(span *s) {
    unsigned c = s->cls;
    s->prev = NULL;
    s->next = with_room[c];
    if (s->next)
        s->next->prev = s;
    with_room[c] = s;
    s->listed = true;
}

static void list_remove(span *s) {
    if (s->prev)
        s->prev->next = s->next;
    else
        with_room[s->cls] = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->next = s->prev = NULL;
    s->listed = false;
}

static void span_reset(span *s, unsigned c) {
    s->cls = (uint16_t)c;
    s->bump = (char *)s + HEADER_BYTES + (size_t)((c * 5) % SPAN_COLOURS) * 64;
    s->end = (char *)s + s->bytes;
    s->free = NULL;
    s->live = 0;
}

/* A span of `bytes`, aligned to SPAN_UNIT: one mapping with a unit to
 * spare, trimmed at both ends. */
static span *span_map(size_t bytes) {
    if (!sy__addr_tab_room(&units, bytes / SPAN_UNIT))
        return NULL;
    size_t len = bytes + SPAN_UNIT;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uintptr_t at = ((uintptr_t)p + SPAN_UNIT - 1) & ~(uintptr_t)(SPAN_UNIT - 1);
    size_t head = at - (uintptr_t)p, tail = len - head - bytes;
    if (head)
        munmap(p, head);
    if (tail)
        munmap((char *)at + bytes, tail);
    span *s = (span *)at;
    s->bytes = bytes;
    for (size_t i = 0; i < bytes / SPAN_UNIT; i++)
        sy__addr_tab_put(&units, at + i * SPAN_UNIT, (uintptr_t)s);
    totals.spans++;
    totals.span_bytes += bytes;
    return s;
}

/* Take a span of `bytes` out of a keep list, or NULL. */
static span *keep_take(span **list, size_t bytes) {
    for (span **at = list; *at; at = &(*at)->next)
        if ((*at)->bytes == bytes) {
            span *s = *at;
            *at = s->next;
            return s;
        }
    return NULL;
}

/* A span for class c: a kept one of its size (resident first, then a
 * lazily freed one), else a new mapping. */
static span *span_new(unsigned c) {
    size_t bytes = span_bytes(c);
    span *s = keep_take(&kept, bytes);
    if (s) {
        kept_bytes -= bytes;
        kept_n--;
    } else if ((s = keep_take(&lazy, bytes))) {
        lazy_n--;
    } else if (!(s = span_map(bytes))) {
        return NULL;
    }
    span_reset(s, c);
    list_add(s);
    return s;
}

/* Let the system take s's pages but its header's (the lazy list runs
 * through it) when it needs them; until then they stay, and a span
 * reused before that faults none in. Where MADV_FREE is refused
 * (kernels before 4.5) the pages go at once. */
static void span_lazy(span *s) {
    long ps = sysconf(_SC_PAGESIZE);
    size_t page = ps > 0 ? (size_t)ps : 4096;
    char *from = (char *)s + page;
    size_t len = s->bytes - page;
#ifdef MADV_FREE
    if (madvise(from, len, MADV_FREE) != 0)
#endif
        madvise(from, len, MADV_DONTNEED);
    s->next = lazy;
    lazy = s;
    lazy_n++;
}

/* s's last block was freed: it joins the resident keep, whose oldest
 * spans beyond KEEP_BYTES become lazily freed. */
static void span_empty(span *s) {
    if (s->listed)
        list_remove(s);
    s->next = kept;
    kept = s;
    kept_bytes += s->bytes;
    kept_n++;
    while (kept_bytes > KEEP_BYTES) {
        span **last = &kept; /* the oldest is at the end */
        while ((*last)->next)
            last = &(*last)->next;
        span *old = *last;
        *last = NULL;
        kept_bytes -= old->bytes;
        kept_n--;
        span_lazy(old);
    }
}

/* ---- the calls ---- */

bool sy__small_on(void) {
    return true;
}

size_t sy__small_class_size(size_t n) {
    return class_size(class_of(n));
}

void *sy__small_alloc(size_t n) {
    if (n >= SY_MAP_MIN)
        return NULL;
    unsigned c = class_of(n);
    size_t sz = class_size(c);
    sy__alloc_lock();
    span *s = with_room[c];
    if (!s && !(s = span_new(c))) {
        sy__alloc_unlock();
        return NULL;
    }
    void *p = s->free;
    if (p) {
        memcpy(&s->free, p, sizeof s->free);
    } else {
        p = s->bump;
        s->bump += sz;
    }
    s->live++;
    totals.blocks++;
    if (!s->free && (size_t)(s->end - s->bump) < sz)
        list_remove(s); /* full */
    sy__alloc_unlock();
    return p;
}

/* Under the lock: the span holding p, or NULL when p is not the arena's
 * (p need not be mapped at all: only the table is read). */
static span *span_of(const void *p) {
    if (!p)
        return NULL;
    const sy__addr_entry *e =
        sy__addr_tab_find(&units, (uintptr_t)p & ~(uintptr_t)(SPAN_UNIT - 1));
    span *s = e ? (span *)e->val : NULL;
    /* a kept span holds no block */
    return s && s->live ? s : NULL;
}

size_t sy__small_size(const void *p) {
    if (!p)
        return 0;
    sy__alloc_lock();
    span *s = span_of(p);
    size_t sz = s ? class_size(s->cls) : 0;
    sy__alloc_unlock();
    return sz;
}

bool sy__small_free(void *p) {
    if (!p)
        return false;
    sy__alloc_lock();
    span *s = span_of(p);
    if (!s) {
        sy__alloc_unlock();
        return false;
    }
    memcpy(p, &s->free, sizeof s->free);
    s->free = p;
    s->live--;
    totals.blocks--;
    if (!s->live)
        span_empty(s);
    else if (!s->listed)
        list_add(s);
    sy__alloc_unlock();
    return true;
}

void sy__small_stats_get(sy__small_stats *out) {
    sy__alloc_lock();
    *out = totals;
    out->kept = kept_n;
    out->lazy = lazy_n;
    sy__alloc_unlock();
}

#else /* no arena: libc serves every block */

bool sy__small_on(void) {
    return false;
}
size_t sy__small_class_size(size_t n) {
    return n;
}
void *sy__small_alloc(size_t n) {
    (void)n;
    return NULL;
}
size_t sy__small_size(const void *p) {
    (void)p;
    return 0;
}
bool sy__small_free(void *p) {
    (void)p;
    return false;
}
void sy__small_stats_get(sy__small_stats *out) {
    memset(out, 0, sizeof *out);
}

#endif /* SY_MAP_ON */
