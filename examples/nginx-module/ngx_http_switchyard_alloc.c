/*
 * ngx_http_switchyard_alloc.c - the allocator of each worker's router
 * (sy_router_options.allocator): malloc, except that blocks of
 * SW_BIG_BLOCK bytes and more are kept when freed and handed out again for
 * the next large allocation. A whole-document change makes the library
 * copy the document into a large buffer (the change set's staging copy)
 * and build large temporaries (the scan, the index); with plain malloc
 * such a buffer is often fresh memory (glibc gives the heap's top or a mapping
 * back to the kernel), and faulting its pages in costs several times the copy
 * itself (a 1 MB document: ~0.3 ms of page faults for a 0.1 ms copy). Kept
 * blocks stay mapped, so the copy runs at memory speed. Each worker is one
 * thread and its router is used by that thread only: no locking.
 */
#include "ngx_http_switchyard.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

/* Blocks at least this large are kept when freed. */
#define SW_BIG_BLOCK (256 * 1024)
/* At most this many kept blocks, and this many bytes in all. */
#define SW_KEEP_BLOCKS 4
#define SW_KEEP_BYTES (128 * 1024 * 1024)

static struct {
    void *p[SW_KEEP_BLOCKS];
    size_t cap[SW_KEEP_BLOCKS];
    size_t n, bytes;
} sw_kept;

/* A kept block of at least size bytes, the smallest one, taken out of
 * the cache; NULL when none fits. */
static void *sw_take(size_t size) {
    size_t best = SW_KEEP_BLOCKS;
    void *p;

    for (size_t i = 0; i < sw_kept.n; i++)
        if (sw_kept.cap[i] >= size &&
            (best == SW_KEEP_BLOCKS || sw_kept.cap[i] < sw_kept.cap[best]))
            best = i;
    if (best == SW_KEEP_BLOCKS)
        return NULL;
    p = sw_kept.p[best];
    sw_kept.bytes -= sw_kept.cap[best];
    sw_kept.n--;
    sw_kept.p[best] = sw_kept.p[sw_kept.n];
    sw_kept.cap[best] = sw_kept.cap[sw_kept.n];
    return p;
}

static void *sw_alloc_malloc(void *data, size_t size) {
    void *p;
    (void)data;
    if (size < SW_BIG_BLOCK)
        return malloc(size);
    if ((p = sw_take(size)) != NULL)
        return p;
    /* room for a document that grows a little at its next change */
    return malloc(size + size / 16);
}

static void sw_alloc_free(void *data, void *p) {
    size_t cap;
    (void)data;
    if (p == NULL)
        return;
    cap = malloc_usable_size(p);
    if (cap < SW_BIG_BLOCK) {
        free(p);
        return;
    }
    /* make room: the smallest kept blocks go first */
    while (sw_kept.n > 0 && (sw_kept.n == SW_KEEP_BLOCKS ||
                             sw_kept.bytes + cap > SW_KEEP_BYTES)) {
        size_t small = 0;
        for (size_t i = 1; i < sw_kept.n; i++)
            if (sw_kept.cap[i] < sw_kept.cap[small])
                small = i;
        if (sw_kept.cap[small] > cap)
            break;
        free(sw_take(sw_kept.cap[small]) /* that one, or one as small */);
    }
    if (sw_kept.n == SW_KEEP_BLOCKS || sw_kept.bytes + cap > SW_KEEP_BYTES) {
        free(p);
        return;
    }
    sw_kept.p[sw_kept.n] = p;
    sw_kept.cap[sw_kept.n++] = cap;
    sw_kept.bytes += cap;
}

static void *sw_alloc_realloc(void *data, void *p, size_t size) {
    size_t cap;
    void *q;

    if (p == NULL)
        return sw_alloc_malloc(data, size);
    cap = malloc_usable_size(p);
    if (cap < SW_BIG_BLOCK && size < SW_BIG_BLOCK)
        return realloc(p, size);
    if (size <= cap && size >= cap / 2)
        return p; /* fits, and does not waste more than half */
    q = sw_alloc_malloc(data, size);
    if (q == NULL)
        return NULL;
    memcpy(q, p, ngx_min(cap, size));
    sw_alloc_free(data, p);
    return q;
}

const sy_allocator sw_allocator = {sw_alloc_malloc, sw_alloc_realloc,
                                   sw_alloc_free, NULL};

void sw_alloc_release(void) {
    while (sw_kept.n > 0)
        free(sw_take(0));
}
