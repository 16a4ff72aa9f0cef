/*
 * snapshot.h - building immutable snapshots: routes held in slots (shared,
 * refcounted route objects), the rank order, the index (a shared base plus
 * persistent overlays for routes added since it was built, and its
 * replacement being built a share per publish), weight groups,
 * an id table, default filters and services. A new snapshot is always
 * derived from the previous one and a list of changes, so a one-route change
 * costs a few chunk copies (the arrays are shared), not a rebuild.
 */
#ifndef SY_SNAPSHOT_H
#define SY_SNAPSHOT_H

#include "snapshot/snapshot_layout.h"

/* One change: set (add or replace by id) or remove (route == NULL). */
typedef struct sy__route_change {
    const char *id;
    struct sy_route *route; /* borrowed; the snapshot takes its own ref */
    uint64_t key;
    uint32_t source;
    /* the id's sy__snap_id_hash when the caller knows it (a document's
     * memo), else 0: hashed from the id (in the struct's padding) */
    uint32_t id_hash;
} sy__route_change;

typedef struct sy__snapshot_config {
    bool strip_host_port;
    sy__path_norm_opts path_norm; /* all zero: the secure default */
    sy__budget_limits budget;     /* per request; zero fields: defaults */
    int64_t (*clock_ms)(void *data);
    void *clock_data; /* also passed to random */
    uint64_t (*random)(void *data);
    struct sy_policy_store *policy;
    struct sy_route *defaults;
    uint32_t key_limit; /* above every live route's key */
    const char *const *sources;
    size_t source_count;
    /* services replacing the base's (NULL: keep the base's) */
    struct sy__service *const *services;
    size_t service_count;
    bool replace_services;
} sy__snapshot_config;

/* What a snapshot is derived from (sy__snapshot_derive). */
typedef struct sy__derive_input {
    const sy__alloc *alloc;  /* of the snapshot and of removed */
    const sy_snapshot *base; /* NULL: empty */
    const sy__snapshot_config *config;
    const sy__route_change *changes; /* applied in this order */
    size_t change_count;
    uint64_t generation; /* the derived snapshot's */
} sy__derive_input;

/* What a derive gives back. */
typedef struct sy__derive_result {
    sy_snapshot *snapshot;
    struct sy_route **removed; /* from the input's alloc: the caller frees */
    size_t removed_count;
} sy__derive_result;

/*
 * Derive a snapshot from in->base with in->changes applied, in the given
 * order; an id appears at most once per change list (SY_EINVAL
 * otherwise). Every failure leaves the base untouched, frees what was
 * built and sets *out to empty. The result has generation in->generation.
 *
 * Ownership: snapshots do not count references to their routes (that
 * would touch every route at every publish). The caller holds one
 * reference per live route: once the derived snapshot is published it
 * takes a reference to every route a change added, and out->removed
 * lists the routes that left, whose references it keeps until no
 * snapshot older than the derived one is alive.
 */
int sy__snapshot_derive(const sy__derive_input *in, sy__derive_result *out,
                        sy_error *err);
void sy__snapshot_destroy(sy_snapshot *s);

/* The slot id of rank i (i < route_count): a binary search over chunks. */
uint32_t sy__snapshot_rank_at(const sy_snapshot *s, size_t i);

/* The slot of a route id, or UINT32_MAX. */
uint32_t sy__snapshot_find_slot(const sy_snapshot *s, const char *id);
/* The service of that name, or NULL. */
const struct sy__service *sy__snapshot_service(const sy_snapshot *s,
                                               const char *name, size_t len);

/* A fresh random seed for the request of match m, which brought seed 0:
 * from the router's random callback, else from m's context generator
 * (match.c). For every draw that needs randomness (Weight, lb random). */
uint64_t sy__match_draw_seed(const sy_match *m);

/* Append the candidate lists of overlays ov[0..nov) (NULL ones skipped;
 * snapshot_overlay.c) for a request path and host labels (NULL: no host)
 * to out[0..cap): their number, or SIZE_MAX when they do not fit. Reads
 * only; allocation-free. The host's labels are needed (split) only when
 * sy__overlay_hosts says a route is filed under a host key. */
size_t sy__overlay_lookup(const sy__overlay *const *ov, size_t nov,
                          const sy__segments *path, const sy__segments *host,
                          sy__cand_list *out, size_t cap);
bool sy__overlay_hosts(const sy__overlay *const *ov, size_t nov);
/* The slot of candidate cd of a list sy__overlay_lookup gave. */
uint32_t sy__overlay_cand_slot(const sy__cand_list *l, const sy__cand *cd);

#endif
