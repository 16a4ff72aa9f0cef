/*
 * publish.c - the publication protocol: a sharded split reference count
 * (docs/architecture.md, "Publication"). Owns the shard words, the slot table,
 * the retired list, reclamation and the publication metrics.
 *
 *   domain (sy__pub)                         objects (sy__pub_obj first)
 *   +--------------------------+
 *   | word[0]  slot 3 | 17     |--+         table          +-------------+
 *   | word[1]  slot 3 |  4     |--+       +-------+   +--->| gen 9 (cur) |
 *   |   ...  one cache line    |  +-----> | 3     |---+    | internal[S] |
 *   | word[S-1] slot 3 | 0     |--+       | 5     |------->| gen 8 (ret) |
 *   +--------------------------+          | ...   |        | internal[i] |
 *     (slot << 48) | borrows               +-------+        | = borrows   |
 *                                        free slots:        |  - releases |
 *                                        writer's stack     | remaining   |
 *                                                           +-------------+
 *
 *   reader  acquire: w = fetch_add(&word[s], 1)      s = hash(pthread_self)
 *                    obj = table[w >> 48]            ref = obj | s
 *           release: if fetch_sub(&obj->internal[s], 1) == 1: shard done
 *
 *   writer  publish: table[new] = next
 *                    for each shard i:
 *                        old = exchange(&word[i], new << 48)
 *                        fetch_add(&cur->internal[i], borrows(old) - BIAS)
 *                        (reaching 0 here means: shard done)
 *                    cur goes on the retired list
 *           shard done: fetch_sub(&obj->remaining, 1); 0 means DEAD
 *           reclaim: destroy every DEAD retired object, free its slot
 *
 * A borrow is taken by the same instruction that reads the slot, so there is
 * no window between finding the object and counting it. internal[i] starts
 * at BIAS so early releases cannot reach 0 before the writer transfers the
 * shard's borrows; after the transfer it holds exactly the references still
 * out on that shard. Every read-modify-write is acq_rel (acquire for the
 * reader's fetch_add): no stand-alone fences, which ThreadSanitizer ignores.
 * A slot is reused only after its object is DEAD, i.e. after every reader
 * that read it has released.
 */
#include "snapshot/publish_int.h"

/* ---------------------------------------------------------------- */
/* Aligned allocation                                                */
/* ---------------------------------------------------------------- */

static void *sy__pub_aligned_alloc(const sy__alloc *a, size_t size,
                                   void **base) {
    if (size > SIZE_MAX - SY_PUB_ALIGN)
        return NULL;
    unsigned char *raw = sy__malloc(a, size + SY_PUB_ALIGN);
    if (!raw)
        return NULL;
    uintptr_t at =
        ((uintptr_t)raw + SY_PUB_ALIGN - 1) & ~(uintptr_t)(SY_PUB_ALIGN - 1);
    unsigned char *p = raw + (at - (uintptr_t)raw);
    memset(p, 0, size);
    *base = raw;
    return p;
}

void *sy__pub_obj_alloc(const sy__alloc *alloc, size_t size) {
    void *base;
    if (size < sizeof(sy__pub_obj))
        size = sizeof(sy__pub_obj);
    sy__pub_obj *o = sy__pub_aligned_alloc(alloc, size, &base);
    if (!o)
        return NULL;
    for (int i = 0; i < SY_PUB_SHARDS; i++)
        atomic_init(&o->internal[i].n, SY_PUB_BIAS);
    atomic_init(&o->remaining, SY_PUB_SHARDS);
    o->bytes = size;
    o->base = base;
    return o;
}

void sy__pub_obj_free(const sy__alloc *alloc, void *obj) {
    if (obj)
        sy__free(alloc, ((sy__pub_obj *)obj)->base);
}

bool sy__pub_obj_dead(const sy__pub_obj *obj) {
    return atomic_load_explicit(&obj->remaining, memory_order_acquire) == 0;
}

/* ---------------------------------------------------------------- */
/* Reader side                                                       */
/* ---------------------------------------------------------------- */

static inline void sy__pub_shard_done(sy__pub_obj *o) {
    atomic_fetch_sub_explicit(&o->remaining, 1, memory_order_acq_rel);
}

sy__pub_ref sy__pub_acquire(sy__pub *p) {
    unsigned s = sy__pub_shard();
    uint64_t w = (uint64_t)atomic_fetch_add_explicit(&p->word[s].n, 1,
                                                     memory_order_acquire);
    /* Acquire: the table may have grown after the publish our word came
     * from; its entries must be visible too (a plain load on x86). */
    sy__pub_table *t = atomic_load_explicit(&p->table, memory_order_acquire);
    sy__pub_obj *o = atomic_load_explicit(&t->entry[w >> SY_PUB_SLOT_SHIFT],
                                          memory_order_relaxed);
    return (sy__pub_ref)o | s;
}

void sy__pub_release(sy__pub_ref ref) {
    sy__pub_obj *o = sy__pub_ref_obj(ref);
    unsigned s = (unsigned)(ref & (SY_PUB_ALIGN - 1));
    if (atomic_fetch_sub_explicit(&o->internal[s].n, 1, memory_order_acq_rel) ==
        1)
        sy__pub_shard_done(o);
}

/* ---------------------------------------------------------------- */
/* Writer side                                                       */
/* ---------------------------------------------------------------- */

static uint64_t sy__pub_now_ms(const sy__pub *p) {
    if (p->opts.clock_ms)
        return p->opts.clock_ms(p->opts.data);
    return sy__now_monotonic_us() / 1000u;
}

/* Replace the table by one of `size` slots (copying entries) and push the
 * new slots on the free stack. The old table stays readable. */
static int sy__pub_grow(sy__pub *p, uint32_t size) {
    sy__pub_table *old = atomic_load_explicit(&p->table, memory_order_relaxed);
    uint32_t from = old ? old->size : 0;
    sy__pub_table *t =
        sy__malloc(&p->alloc, sizeof *t + (size_t)size * sizeof t->entry[0]);
    uint32_t *stack = sy__realloc(&p->alloc, p->free_slots,
                                  (size_t)size * sizeof *p->free_slots);
    if (!t || !stack) {
        sy__free(&p->alloc, t);
        if (stack)
            p->free_slots = stack;
        return SY_ENOMEM;
    }
    p->free_slots = stack;
    t->older = old;
    t->size = size;
    for (uint32_t i = 0; i < size; i++) {
        sy__pub_obj *o = i < from ? atomic_load_explicit(&old->entry[i],
                                                         memory_order_relaxed)
                                  : NULL;
        atomic_init(&t->entry[i], o);
    }
    /* Slots pop from the top: hand out low numbers first. */
    for (uint32_t i = size; i > from; i--)
        p->free_slots[p->free_count++] = i - 1;
    atomic_store_explicit(&p->table, t, memory_order_release);
    return SY_OK;
}

/* Take a free slot for `o` and write the table entry. */
static int sy__pub_take_slot(sy__pub *p, sy__pub_obj *o) {
    if (p->free_count == 0) {
        sy__pub_table *t =
            atomic_load_explicit(&p->table, memory_order_relaxed);
        if (t->size >= SY_PUB_MAX_SLOTS)
            return SY_EBUSY;
        int rc = sy__pub_grow(p, t->size * 2);
        if (rc)
            return rc;
    }
    uint32_t slot = p->free_slots[--p->free_count];
    sy__pub_table *t = atomic_load_explicit(&p->table, memory_order_relaxed);
    atomic_store_explicit(&t->entry[slot], o, memory_order_relaxed);
    o->slot = slot;
    return SY_OK;
}

int sy__pub_new(const sy__alloc *alloc, const sy__pub_options *opts,
                sy__pub_obj *initial, sy__pub **out) {
    if (!alloc || !opts || !opts->destroy || !initial || !out)
        return SY_EINVAL;
    void *base;
    sy__pub *p = sy__pub_aligned_alloc(alloc, sizeof *p, &base);
    if (!p)
        return SY_ENOMEM;
    p->alloc = *alloc;
    p->opts = *opts;
    p->renew_at = UINT64_C(1) << 40;
    p->base = base;
    atomic_init(&p->table, NULL);
    if (sy__pub_grow(p, SY_PUB_FIRST_SLOTS) != SY_OK) {
        sy__free(alloc, p->free_slots);
        sy__free(alloc, base);
        return SY_ENOMEM;
    }
    sy__pub_take_slot(p, initial); /* cannot fail: the stack is full */
    for (int i = 0; i < SY_PUB_SHARDS; i++)
        atomic_init(&p->word[i].n,
                    (int64_t)((uint64_t)initial->slot << SY_PUB_SLOT_SHIFT));
    p->current = initial;
    *out = p;
    return SY_OK;
}

void sy__pub_free(sy__pub *p) {
    if (!p)
        return;
    sy__pub_obj *o = p->retired_head;
    while (o) {
        sy__pub_obj *next = o->retired_next;
        p->opts.destroy(p->opts.data, o);
        o = next;
    }
    p->opts.destroy(p->opts.data, p->current);
    sy__pub_table *t = atomic_load_explicit(&p->table, memory_order_relaxed);
    while (t) {
        sy__pub_table *older = t->older;
        sy__free(&p->alloc, t);
        t = older;
    }
    sy__free(&p->alloc, p->free_slots);
    sy__alloc a = p->alloc;
    sy__free(&a, p->base);
}

sy__pub_obj *sy__pub_current(const sy__pub *p) {
    return p->current;
}

uint64_t sy__pub_oldest_generation(const sy__pub *p) {
    return p->retired_head ? p->retired_head->generation
                           : p->current->generation;
}

/* Move shard i's borrows from the word to the old object's counter. */
static void sy__pub_transfer(sy__pub_obj *o, int i, uint64_t borrows);

/*
 * A word counts borrows in 48 bits: without a publish, ~2^48 acquires on
 * one shard would overflow into the slot bits. Renewal swaps such a word
 * for the same slot with no borrows and adds the borrows to the current
 * object's counter, which stays above zero (it starts at BIAS) until the
 * object is retired. Readers racing with the swap land on one side of it.
 */
static void sy__pub_renew(sy__pub *p) {
    sy__pub_obj *cur = p->current;
    int64_t fresh = (int64_t)((uint64_t)cur->slot << SY_PUB_SLOT_SHIFT);
    for (int i = 0; i < SY_PUB_SHARDS; i++) {
        uint64_t w =
            (uint64_t)atomic_load_explicit(&p->word[i].n, memory_order_relaxed);
        if ((w & SY_PUB_BORROWS) < p->renew_at)
            continue;
        w = (uint64_t)atomic_exchange_explicit(&p->word[i].n, fresh,
                                               memory_order_acq_rel);
        atomic_fetch_add_explicit(&cur->internal[i].n,
                                  (int64_t)(w & SY_PUB_BORROWS),
                                  memory_order_acq_rel);
    }
}

size_t sy__pub_reclaim(sy__pub *p) {
    size_t n = 0;
    sy__pub_renew(p);
    sy__pub_obj **link = &p->retired_head;
    sy__pub_obj *prev = NULL;
    while (*link) {
        sy__pub_obj *o = *link;
        if (!sy__pub_obj_dead(o)) {
            prev = o;
            link = &o->retired_next;
            continue;
        }
        *link = o->retired_next;
        if (p->retired_tail == o)
            p->retired_tail = prev;
        sy__pub_table *t =
            atomic_load_explicit(&p->table, memory_order_relaxed);
        atomic_store_explicit(&t->entry[o->slot], NULL, memory_order_relaxed);
        p->free_slots[p->free_count++] = o->slot;
        p->retired--;
        p->retired_bytes -= o->bytes;
        p->reclaimed++;
        n++;
        p->opts.destroy(p->opts.data, o);
    }
    return n;
}

/* Move shard i's borrows from the word to the old object's counter. */
static void sy__pub_transfer(sy__pub_obj *o, int i, uint64_t borrows) {
    int64_t delta = (int64_t)borrows - SY_PUB_BIAS;
    if (atomic_fetch_add_explicit(&o->internal[i].n, delta,
                                  memory_order_acq_rel) == -delta)
        sy__pub_shard_done(o);
}

int sy__pub_publish(sy__pub *p, sy__pub_obj *next) {
    if (!next || next == p->current)
        return SY_EINVAL;
    sy__pub_reclaim(p);
    if (p->opts.max_retired && p->retired >= p->opts.max_retired)
        return SY_EBUSY;
    int rc = sy__pub_take_slot(p, next);
    if (rc)
        return rc;
    sy__pub_obj *old = p->current;
    next->generation = old->generation + 1;
    int64_t fresh = (int64_t)((uint64_t)next->slot << SY_PUB_SLOT_SHIFT);
    for (int i = 0; i < SY_PUB_SHARDS; i++) {
        uint64_t w = (uint64_t)atomic_exchange_explicit(&p->word[i].n, fresh,
                                                        memory_order_acq_rel);
        sy__pub_transfer(old, i, w & SY_PUB_BORROWS);
    }
    p->current = next;
    p->publishes++;
    old->retired_ms = sy__pub_now_ms(p);
    old->retired_next = NULL;
    if (p->retired_tail)
        p->retired_tail->retired_next = old;
    else
        p->retired_head = old;
    p->retired_tail = old;
    p->retired++;
    p->retired_bytes += old->bytes;
    sy__pub_reclaim(p);
    return SY_OK;
}

size_t sy__pub_check_held(sy__pub *p, uint64_t limit_ms,
                          void (*held)(void *data, uint64_t generation,
                                       uint64_t age_ms),
                          void *data) {
    uint64_t now = sy__pub_now_ms(p);
    size_t n = 0;
    for (sy__pub_obj *o = p->retired_head; o; o = o->retired_next) {
        uint64_t age = now > o->retired_ms ? now - o->retired_ms : 0;
        if (age < limit_ms)
            break; /* oldest first: the rest are younger */
        if (o->warned || sy__pub_obj_dead(o))
            continue;
        o->warned = true;
        n++;
        if (held)
            held(data, o->generation, age);
    }
    return n;
}

void sy__pub_metrics_get(const sy__pub *p, sy__pub_metrics *out) {
    memset(out, 0, sizeof *out);
    out->generation = p->current->generation;
    out->publishes = p->publishes;
    out->live = 1 + p->retired;
    out->retired = p->retired;
    out->reclaimed = p->reclaimed;
    out->retired_bytes = p->retired_bytes;
    if (p->retired_head) {
        uint64_t now = sy__pub_now_ms(p);
        uint64_t at = p->retired_head->retired_ms;
        out->oldest_retired_age_ms = now > at ? now - at : 0;
    }
}
