/*
 * publish.h - lock-free publication of immutable objects (snapshots) by a
 * sharded split reference count; see docs/architecture.md ("Publication")
 * and the picture at the top of publish.c. Owns: the publication domain
 * (sy__pub), the header every published object embeds first (sy__pub_obj),
 * reader references (sy__pub_ref), retirement, reclamation and their metrics.
 * Knows nothing about routes: the object after the header is the caller's.
 *
 * Threads: sy__pub_acquire() and sy__pub_release() may be called by any
 * thread at any time, concurrently with everything else, and are wait-free
 * (one atomic read-modify-write each, no lock, no allocation, no syscall).
 * Every other function is writer side: the caller serializes them (one
 * writer at a time, e.g. under the router's mutex).
 */
#ifndef SY_PUBLISH_H
#define SY_PUBLISH_H

#include "base/util.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Shards of the reader count: a power of two, at most 64 (the shard rides
 * in the low 6 bits of a 64-byte aligned object's address). */
#define SY_PUB_SHARDS 16
/* Alignment of published objects and size of one counter line. */
#define SY_PUB_ALIGN 64

/* One counter alone on its cache line. */
typedef struct sy__pub_line {
    _Alignas(SY_PUB_ALIGN) _Atomic int64_t n;
} sy__pub_line;

/*
 * The header a published object embeds as its FIRST member; the object must
 * come from sy__pub_obj_alloc() (64-byte aligned, header initialised). Fields
 * marked "writer" belong to the domain once the object is published; the
 * owner may read `generation` and `bytes` at any time and may set `bytes`
 * before publishing (it defaults to the allocated size).
 */
typedef struct sy__pub_obj {
    /* BIAS minus releases per shard, plus borrows once transferred at
     * retirement; a shard is done when its counter reaches 0. */
    sy__pub_line internal[SY_PUB_SHARDS];
    /* Shards not yet done; 0 means DEAD: no reader holds the object. */
    _Alignas(SY_PUB_ALIGN) _Atomic uint32_t remaining;
    uint32_t slot;                    /* writer: index in the slot table */
    uint64_t generation;              /* stamped by sy__pub_publish() */
    uint64_t retired_ms;              /* writer: clock at retirement */
    size_t bytes;                     /* counted in retired_bytes */
    struct sy__pub_obj *retired_next; /* writer: retired list, oldest first */
    void *base;                       /* start of the underlying allocation */
    bool warned;                      /* writer: held callback already fired */
} sy__pub_obj;

/*
 * A reader's reference: the object's address with the reader's shard in the
 * low 6 bits. Pass it back to sy__pub_release() exactly once, from any
 * thread; get the object with sy__pub_ref_obj().
 */
typedef uintptr_t sy__pub_ref;

static inline sy__pub_obj *sy__pub_ref_obj(sy__pub_ref ref) {
    return (sy__pub_obj *)(ref & ~(uintptr_t)(SY_PUB_ALIGN - 1));
}

/* A publication domain (one per router). */
typedef struct sy__pub sy__pub;

typedef struct sy__pub_options {
    /* Frees an object that no reader holds any more (its own contents and
     * then the memory, e.g. with sy__pub_obj_free()). Called on the writer's
     * thread, from sy__pub_publish(), sy__pub_reclaim() and sy__pub_free().
     * Required. */
    void (*destroy)(void *data, sy__pub_obj *obj);
    /* Monotonic clock in ms for retirement ages; NULL: the system's. */
    uint64_t (*clock_ms)(void *data);
    void *data;         /* passed to destroy and clock_ms */
    size_t max_retired; /* cap on retired objects not yet freed; 0: none */
} sy__pub_options;

/* Metrics, read on the writer side. */
typedef struct sy__pub_metrics {
    uint64_t generation; /* of the current object */
    uint64_t publishes;  /* successful sy__pub_publish() calls */
    uint64_t live;       /* current + retired not yet freed */
    uint64_t retired;    /* retired, not yet freed */
    uint64_t reclaimed;  /* retired objects freed so far */
    uint64_t retired_bytes;
    uint64_t oldest_retired_age_ms; /* 0 when nothing is retired */
} sy__pub_metrics;

/*
 * Allocate `size` bytes (>= sizeof(sy__pub_obj)) aligned to 64 through the
 * allocator (which may only give 16-byte alignment), zeroed, with the header
 * initialised for publication. Returns NULL when out of memory. Any thread.
 */
void *sy__pub_obj_alloc(const sy__alloc *alloc, size_t size);
/* Give back memory from sy__pub_obj_alloc() (NULL is fine). */
void sy__pub_obj_free(const sy__alloc *alloc, void *obj);
/* True once no reader holds the retired object any more. */
bool sy__pub_obj_dead(const sy__pub_obj *obj);

/*
 * Create a domain publishing `initial` (from sy__pub_obj_alloc(), never
 * published before), whose generation is left as the caller set it. On
 * success the domain owns `initial`; on failure (SY_ENOMEM, SY_EINVAL) the
 * caller still does. `alloc` is copied. Writer side.
 */
int sy__pub_new(const sy__alloc *alloc, const sy__pub_options *opts,
                sy__pub_obj *initial, sy__pub **out);
/*
 * Destroy the current object and every retired one, then the domain. The
 * caller guarantees no reader holds or will take a reference.
 */
void sy__pub_free(sy__pub *p);

/*
 * Take a reference to the current object: one fetch_add on the caller's
 * shard. Never fails. Any thread, wait-free.
 */
sy__pub_ref sy__pub_acquire(sy__pub *p);
/*
 * Give back a reference from sy__pub_acquire(), exactly once, on any thread:
 * one fetch_sub. The object is not freed here: the writer frees it later.
 */
void sy__pub_release(sy__pub_ref ref);

/*
 * Make `next` (from sy__pub_obj_alloc(), never published) the current object
 * and retire the previous one. Stamps next->generation with the current
 * generation + 1. First frees whatever retired objects are dead; then fails
 * with SY_EBUSY if max_retired objects are still held (or the 65,535 slots
 * are all in use), or SY_ENOMEM; on failure nothing changes and the caller
 * still owns `next`. On success the domain owns it. Finally frees the
 * previous object at once if no reader holds it. Writer side.
 */
int sy__pub_publish(sy__pub *p, sy__pub_obj *next);

/* The current object (borrowed until the next publish). Writer side. */
sy__pub_obj *sy__pub_current(const sy__pub *p);

/* Generation of the oldest object still alive: the oldest retired object
 * not yet freed, else the current one. Writer side. */
uint64_t sy__pub_oldest_generation(const sy__pub *p);

/* Free every dead retired object; returns how many. Also renews the
 * borrow counters of the current object before they can overflow (after
 * 2^40 acquires on one shard without a publish), so a host that never
 * publishes should call this now and then. Writer side. */
size_t sy__pub_reclaim(sy__pub *p);

/*
 * Call held(data, generation, age_ms) once for each retired object that is
 * still held and was retired at least `limit_ms` ago and has not been
 * reported before, oldest first. Returns how many were reported. Writer
 * side.
 */
size_t sy__pub_check_held(sy__pub *p, uint64_t limit_ms,
                          void (*held)(void *data, uint64_t generation,
                                       uint64_t age_ms),
                          void *data);

void sy__pub_metrics_get(const sy__pub *p, sy__pub_metrics *out);

#endif
