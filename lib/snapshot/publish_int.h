/*
 * publish_int.h - the private layout of a publication domain (publish.c):
 * the word and counter constants, the slot table, struct sy__pub and the
 * reader's shard. Shared with nothing else in lib/; tests that weaken the
 * protocol on purpose (tests/hooks/) read it to reach the same fields.
 */
#ifndef SY_PUBLISH_INT_H
#define SY_PUBLISH_INT_H

#include "snapshot/publish.h"

#include <pthread.h>
#include <string.h>

#define SY_PUB_BIAS ((int64_t)1 << 62)
#define SY_PUB_SLOT_SHIFT 48
#define SY_PUB_BORROWS ((UINT64_C(1) << SY_PUB_SLOT_SHIFT) - 1)
#define SY_PUB_MAX_SLOTS ((uint32_t)1 << (64 - SY_PUB_SLOT_SHIFT))
#define SY_PUB_FIRST_SLOTS 16

_Static_assert((SY_PUB_SHARDS & (SY_PUB_SHARDS - 1)) == 0 &&
                   SY_PUB_SHARDS <= SY_PUB_ALIGN,
               "shards: a power of two that fits the low address bits");
_Static_assert(sizeof(sy__pub_obj) % SY_PUB_ALIGN == 0,
               "the embedding object's own fields start on a fresh line");

/* The slot table. Readers load the newest one; a grown table copies every
 * entry and older tables stay readable until the domain is freed. */
typedef struct sy__pub_table {
    struct sy__pub_table *older;
    uint32_t size;
    _Atomic(sy__pub_obj *) entry[];
} sy__pub_table;

struct sy__pub {
    sy__pub_line word[SY_PUB_SHARDS]; /* written by readers */
    /* read by readers, written by the writer when the table grows */
    _Alignas(SY_PUB_ALIGN) _Atomic(sy__pub_table *) table;
    /* writer only below */
    _Alignas(SY_PUB_ALIGN) sy__alloc alloc;
    sy__pub_options opts;
    void *base;
    sy__pub_obj *current;
    sy__pub_obj *retired_head; /* oldest first */
    sy__pub_obj *retired_tail;
    uint32_t *free_slots; /* stack of unused slots */
    uint32_t free_count;
    uint64_t publishes;
    uint64_t retired;
    uint64_t reclaimed;
    uint64_t retired_bytes;
    uint64_t renew_at; /* borrows in a word that trigger a renewal */
};

/* The calling thread's shard: a hash of its thread id. */
static inline unsigned sy__pub_shard(void) {
    pthread_t self = pthread_self();
    uint64_t x = 0;
    memcpy(&x, &self, sizeof self < sizeof x ? sizeof self : sizeof x);
    x ^= x >> 29;
    x *= UINT64_C(0x9E3779B97F4A7C15);
    return (unsigned)(x >> 58) & (SY_PUB_SHARDS - 1);
}

#endif
