/*
 * publish_broken.c - the publication protocol of lib/snapshot/publish.c weakened on
 * purpose, so tests/test_publish_stress.c can show its checker catches a
 * broken protocol (see hooks.h for the two weakenings). Everything not
 * weakened is the library's own code; the weakened steps reach the
 * domain's layout through lib/snapshot/publish_int.h.
 */
#include "hooks.h"
#include "snapshot/publish_int.h"

#include <sched.h>

int sy__pub_broken_mode;

/* Not weakened: the library's own calls. */
int sy__pub_broken_new(const sy__alloc *alloc, const sy__pub_options *opts,
                       sy__pub_obj *initial, sy__pub **out) {
    return sy__pub_new(alloc, opts, initial, out);
}
void sy__pub_broken_free(sy__pub *p) {
    sy__pub_free(p);
}
void sy__pub_broken_release(sy__pub_ref ref) {
    sy__pub_release(ref);
}
void sy__pub_broken_metrics_get(const sy__pub *p, sy__pub_metrics *out) {
    sy__pub_metrics_get(p, out);
}

/* Mode 2: read the slot the word names, yield, and only then count the
 * borrow on whatever the word names by now. */
sy__pub_ref sy__pub_broken_acquire(sy__pub *p) {
    if (sy__pub_broken_mode != 2)
        return sy__pub_acquire(p);
    unsigned s = sy__pub_shard();
    uint64_t w =
        (uint64_t)atomic_load_explicit(&p->word[s].n, memory_order_acquire);
    sy__pub_table *t = atomic_load_explicit(&p->table, memory_order_acquire);
    sy__pub_obj *o = atomic_load_explicit(&t->entry[w >> SY_PUB_SLOT_SHIFT],
                                          memory_order_relaxed);
    sched_yield();
    atomic_fetch_add_explicit(&p->word[s].n, 1, memory_order_acquire);
    return (sy__pub_ref)o | s;
}

/* Mode 1: mark every retired object dead (no reader counted), then let
 * the library's reclaim destroy them. */
size_t sy__pub_broken_reclaim(sy__pub *p) {
    if (sy__pub_broken_mode == 1)
        for (sy__pub_obj *o = p->retired_head; o; o = o->retired_next)
            atomic_store_explicit(&o->remaining, 0, memory_order_release);
    return sy__pub_reclaim(p);
}

int sy__pub_broken_publish(sy__pub *p, sy__pub_obj *next) {
    int rc = sy__pub_publish(p, next);
    if (rc == SY_OK && sy__pub_broken_mode == 1)
        sy__pub_broken_reclaim(p);
    return rc;
}
