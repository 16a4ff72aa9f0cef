/*
 * snapshot.h - building immutable snapshots: routes held in slots (shared,
 * refcounted route objects), the rank order, the index (a shared base plus a
 * small overlay for routes changed since the base was built), weight groups,
 * an id table, default filters and services. A new snapshot is always
 * derived from the previous one and a list of changes, so a one-route change
 * costs a few array copies, not a rebuild.
 */
#ifndef SY_SNAPSHOT_H
#define SY_SNAPSHOT_H

#include "index.h"
#include "predicate.h"
#include "publish.h"
#include "route.h"

struct sy_service;

/* Largest position of a route within its source (24 bits of the key). */
#define SY_RANK_POS_MAX 0xffffffu

/* Rank key: order, then source, then position in the source's document. */
static inline uint64_t sy_rank_key(int32_t order, uint32_t source,
                                   uint32_t pos) {
    return ((uint64_t)((uint32_t)order ^ 0x80000000u) << 32) |
           ((uint64_t)(source & 0xffu) << 24) | (pos & 0xffffffu);
}

typedef struct sy_slot {
    struct sy_route *route; /* NULL: removed */
    uint64_t key;
    uint32_t source;
    uint32_t weight; /* index into weights[], or UINT32_MAX */
} sy_slot;

typedef struct sy_id_entry {
    uint64_t hash;
    uint32_t slot; /* UINT32_MAX: empty */
} sy_id_entry;

struct sy_snapshot {
    sy_pub_obj pub; /* first: the publication header */
    const sy_alloc *alloc;
    uint64_t generation;
    /* content fingerprint, computed on first request (O(routes)) */
    _Atomic uint64_t fingerprint;
    _Atomic bool fingerprint_done;

    sy_slot *slots;
    uint32_t slot_count;
    uint32_t *rank; /* live slot ids in rank order */
    size_t route_count;

    sy_index *base;    /* shared with other snapshots */
    sy_index *overlay; /* slots added since base; may be NULL */
    uint32_t *overlay_slots;
    size_t overlay_count;

    sy_id_entry *ids;
    uint32_t id_mask;

    sy_weight_slot *weights; /* per weight route */
    uint32_t *weight_slots;  /* slot of each weight route */
    size_t weight_count;

    struct sy_route *defaults; /* default filters (route-less), or NULL */
    char **sources;
    size_t source_count;

    struct sy_service **services; /* sorted by name */
    size_t service_count;

    bool strip_host_port;
    int64_t (*clock_ms)(void *data); /* for requests with now_ms == 0 */
    void *clock_data;
    uint64_t (*random)(void *data); /* for requests with seed == 0 */
    uint32_t key_limit;             /* above every sy_route_key of its routes */
    bool needs_host;                /* some route has a Host predicate */
    bool needs_time;                /* some route has After/Before/Between */
    uint32_t max_groups, max_vars;
    size_t bytes;
};

/* One change: set (add or replace by id) or remove (route == NULL). */
typedef struct sy_route_change {
    const char *id;
    struct sy_route *route; /* borrowed; the snapshot takes its own ref */
    uint64_t key;
    uint32_t source;
} sy_route_change;

typedef struct sy_snapshot_config {
    bool strip_host_port;
    int64_t (*clock_ms)(void *data);
    void *clock_data; /* also passed to random */
    uint64_t (*random)(void *data);
    struct sy_route *defaults;
    uint32_t key_limit; /* above every live route's key */
    const char *const *sources;
    size_t source_count;
    /* services replacing the base's (NULL: keep the base's) */
    struct sy_service *const *services;
    size_t service_count;
    bool replace_services;
} sy_snapshot_config;

/*
 * Derive a snapshot from `base` (NULL: empty) with `changes` applied, in
 * the given order; an id appears at most once per change list (SY_EINVAL
 * otherwise). Every failure leaves `base` untouched and frees what was
 * built. The result has generation `generation`.
 *
 * Ownership: snapshots do not count references to their routes (that
 * would touch every route at every publish). The caller holds one
 * reference per live route: once the derived snapshot is published it
 * takes a reference to every route a change added, and *removed (array
 * from `a`, caller frees it) lists the routes that left, whose references
 * it keeps until no snapshot older than the derived one is alive.
 */
int sy_snapshot_derive(const sy_alloc *a, const sy_snapshot *base,
                       const sy_snapshot_config *cfg,
                       const sy_route_change *changes, size_t n,
                       uint64_t generation, sy_snapshot **out,
                       struct sy_route ***removed, size_t *removed_count,
                       sy_error *err);
void sy_snapshot_destroy(sy_snapshot *s);

/* The slot of a route id, or UINT32_MAX. */
uint32_t sy_snapshot_find_slot(const sy_snapshot *s, const char *id);
/* The service of that name, or NULL. */
const struct sy_service *sy_snapshot_service(const sy_snapshot *s,
                                             const char *name, size_t len);

/* The snapshot behind a handle returned by acquire (untags it). */
const sy_snapshot *sy_snapshot_from_handle(const sy_snapshot *handle);

#endif
