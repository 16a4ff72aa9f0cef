/*
 * service.h - services, instances and version-aware instance selection
 * (route model section 7). A sy__service is an immutable, refcounted copy of
 * one service's instance list plus everything selection needs, precomputed
 * at build time: candidate groups per version / hint / zone, a smooth
 * weighted round-robin schedule per group and an alias table for weighted
 * random. The hash policy needs nothing built: weighted rendezvous hashing
 * over the group's members (service_hrw.c). Selection takes no lock and
 * allocates nothing; its mutable state is one atomic round-robin counter
 * per candidate group (and the lazily made smooth cycle).
 */
#ifndef SY_SERVICE_H
#define SY_SERVICE_H

#include "base/util.h"

typedef struct sy__service sy__service;

/*
 * Build a service from a list of instances. Everything is copied (strings,
 * metadata); weight 0 becomes 1. Validation: id non-empty and unique
 * (SY_EINVAL / SY_EDUPLICATE, path "instances[2].id"), host a name or
 * an address a host can connect to (sy__value_host: "instances[i].host";
 * "[::1]" is kept as "::1"), port != 0 ("instances[i].port"), a known state
 * ("instances[i].state"), metadata keys and values non-NULL and keys unique
 * ("instances[i].metadata[j].key"), a non-empty "version"
 * ("instances[i].metadata[j].value"). n == 0 is allowed: selection on an
 * empty service fails with SY_ENOINSTANCE. `name` must be non-empty. On
 * success *out holds one reference. Writer side; `a` is copied.
 */
int sy__service_new(const sy__alloc *a, const char *name,
                    const sy_instance *list, size_t n, sy__service **out,
                    sy_error *err);

/*
 * Build a new service from `old` with deltas applied in order: ADD adds an
 * instance or replaces the one with the same id (keeping its position),
 * REMOVE removes by id, WEIGHT and STATE change that field of the instance
 * named by delta.instance.id. An unknown id for REMOVE/WEIGHT/STATE is
 * SY_ENOTFOUND with path "deltas[i].instance.id"; an invalid ADD instance is
 * reported with path "deltas[i].instance.<field>". All-or-nothing: on error
 * *out is untouched and nothing changes. The new service inherits the
 * round-robin positions of `old` (see sy__service_inherit_rr). `old` is not
 * modified and keeps its own reference count.
 */
int sy__service_apply_deltas(const sy__service *old, const sy_instance_delta *d,
                             size_t n, sy__service **out, sy_error *err);

/*
 * Round-robin positions survive updates: copy into `dst` the counter of
 * every candidate group of `src` that has a counterpart in `dst` (same
 * version, hint and zone path). The schedule itself may have changed, so
 * the position continues modulo the new schedule: rotation goes on where it
 * was instead of restarting at the first instance after every update.
 * Smooth cycles too (made now where a round-robin pick used them). Called by
 * sy__service_apply_deltas; call it yourself after sy__service_new when
 * replacing a whole list. Call before `dst` is published; idempotent.
 */
void sy__service_inherit_rr(sy__service *dst, const sy__service *src);

/* Take one more reference; returns s. Any thread. */
sy__service *sy__service_ref(sy__service *s);
/* Drop one reference; the last one frees the service. NULL is a no-op. Any
 * thread. */
void sy__service_unref(sy__service *s);

/* Accessors. Strings and instances are borrowed from the service and live
 * as long as it does. Instances keep the order given (deltas: replaced in
 * place, added at the end); metadata is sorted by key; weight is >= 1. */
const char *sy__service_name(const sy__service *s);
size_t sy__service_count(const sy__service *s);
const sy_instance *sy__service_instance(const sy__service *s, size_t i);
/* The instance with this id, or NULL. */
const sy_instance *sy__service_find(const sy__service *s, const char *id);
/* Passive health of instance i (service_health.c): consecutive failures,
 * times ejected, ejected until (epoch ms, 0: never). Relaxed reads: a
 * moment's view for status pages. Any thread. */
void sy__service_health_of(const sy__service *s, size_t i, uint32_t *failures,
                           uint32_t *ejections, int64_t *ejected_until);

/*
 * Fingerprint of the service's name and instance list, independent of the
 * instances' order: equal lists give equal fingerprints on every machine
 * (it is part of sy_snapshot_fingerprint). Computed on first use and kept
 * in the service. Any thread.
 */
uint64_t sy__service_fingerprint(const sy__service *s);

/*
 * Instance changes between two versions of a service, by id: added (in
 * `to` only), removed (in `from` only), changed (in both, any field
 * differs: host, port, secure, weight, state or metadata). Either side may
 * be NULL (no service). The id strings are copies owned by the diff.
 */
typedef struct sy__service_diff {
    const char **added;
    size_t added_count;
    const char **removed;
    size_t removed_count;
    const char **changed;
    size_t changed_count;
    sy__alloc alloc; /* private: frees the block */
    void *block;     /* private: one allocation holding all of the above */
} sy__service_diff;

/* Fill *out (always initialised, even on failure); free with
 * sy__service_diff_free. `a` allocates the result. */
int sy__service_diff_compute(const sy__alloc *a, const sy__service *from,
                             const sy__service *to, sy__service_diff *out,
                             sy_error *err);
void sy__service_diff_free(sy__service_diff *d);

/* ---- selection ---- */

typedef enum sy__version_fallback {
    SY_VERSION_FALLBACK_NONE = 0, /* unknown version: SY_ENOINSTANCE */
    SY_VERSION_FALLBACK_LATEST,   /* unknown version: the latest version */
    SY_VERSION_FALLBACK_ANY       /* unknown version: every up instance */
} sy__version_fallback;

typedef enum sy__lb_policy {
    SY_LB_ROUND_ROBIN = 0, /* smooth weighted round robin (default) */
    SY_LB_RANDOM,          /* weighted random from the request seed */
    SY_LB_HASH             /* consistent hash of hash_key */
} sy__lb_policy;

/*
 * What the caller extracted from the request and the route's metadata.
 * Slices are borrowed for the call only. Zero-initialise
 * (SY_SELECT_PARAMS_INIT) and set what applies.
 */
typedef struct sy__select_params {
    bool has_version;              /* the version header is present */
    sy_str version;                /* its value */
    sy__version_fallback fallback; /* route metadata version-fallback */
    sy_str hint;                   /* X-SC-LB-Hint value; len 0 = no hint */
    sy_str zone;                   /* preferred zone; len 0 = no preference */
    sy__lb_policy policy;          /* route metadata lb-policy */
    /* Bytes of the lb-hash-header / lb-hash-cookie value. ptr NULL = the
     * request has none: SY_LB_HASH then balances by round robin. */
    sy_str hash_key;
    uint64_t seed;  /* per-request random seed (SY_LB_RANDOM) */
    bool websocket; /* route was lb:ws: report ws/wss instead of http/s */
    /* without has_version: when no up instance is unversioned, the oldest
     * version instead of the latest (route metadata version-default) */
    bool untagged_oldest;
    /* ids of instances already tried for this request: never chosen */
    const char *const *exclude;
    size_t exclude_count;
    /* clock for passive-health ejections (NULL: real time) */
    int64_t (*clock_ms)(void *data);
    void *clock_data;
} sy__select_params;

#define SY_SELECT_PARAMS_INIT                                                  \
    { 0 }

/* Parse route metadata values: "latest"/"any"/"none" and
 * "round-robin"/"random"/"hash". SY_EINVAL for anything else. */
int sy__version_fallback_parse(const char *s, size_t len,
                               sy__version_fallback *out);
int sy__lb_policy_parse(const char *s, size_t len, sy__lb_policy *out);

/*
 * Choose an instance (route model section 7, in this order):
 *  1. only instances in state UP;
 *  2. version: with p->has_version, the instances whose metadata `version`
 *     equals p->version; if none: SY_ENOINSTANCE, or with fallback LATEST
 *     the latest version among up instances (the unversioned ones if no up
 *     instance has a version), with ANY every up instance. Without the
 *     header: the instances without `version`; if none, the latest version
 *     (the oldest with p->untagged_oldest);
 *  3. hint (metadata `hint` == p->hint), then zone (metadata `zone` ==
 *     p->zone), each only when it matches at least one instance of the
 *     current set;
 *  4. balance by p->policy.
 * Fills out with pointers borrowed from `svc` (valid while the caller holds
 * a reference). SY_ENOINSTANCE with a message when nothing is eligible
 * (no instances, none up, no such version). svc NULL: SY_ENOINSTANCE
 * ("unknown service"). Any thread, lock-free, no allocation.
 */
int sy__service_select(const sy__service *svc, const sy__select_params *p,
                       sy_selection *out, sy_error *err);

/* What sy__service_select_ex chose, beyond the public selection: all
 * borrowed from the service and worked out when it was built. */
typedef struct sy__pick {
    const sy_instance *instance;
    const char *version, *zone; /* its metadata values, or NULL */
    const char *authority;      /* the Host header it expects */
    size_t authority_len;       /* its strlen */
    const void *health;         /* for sy__service_report_outcome */
} sy__pick;

/*
 * sy__service_select, and also: instances whose ids are in p->exclude are
 * never chosen, and instances ejected by passive health are chosen only
 * when nothing else is left (all of the candidates ejected). When the
 * balancing pick is not eligible, the next eligible member of its group
 * is taken, then of the enclosing groups (zone -> hint -> version).
 * *pick (may be NULL) receives what the caller needs beyond `out`.
 */
int sy__service_select_ex(const sy__service *svc, const sy__select_params *p,
                          sy_selection *out, sy__pick *pick, sy_error *err);

/*
 * Passive health: record the outcome of an attempt to the instance behind
 * `health` (from sy__service_select_ex) at time `now_ms`. Returns true when
 * this outcome ejected the instance. Any thread, lock-free. `gate` is
 * one flag shared by every reporter of every version of the service (the
 * router's): an ejection is counted against max_ejected_percent and made
 * by the one report that holds it, so no interleaving of reports exceeds
 * the cap; a report that finds it held ejects nothing now (the instance
 * stays over its threshold: its next failure tries again).
 */
bool sy__service_report_outcome(const void *health, sy_outcome outcome,
                                int64_t now_ms, const sy_outlier_options *o,
                                atomic_bool *gate);

/* Share `src`'s health records with the instances of `dst` that have the
 * same id, so outcomes and ejections carry across publishes. Call before
 * `dst` is published. */
void sy__service_inherit_health(sy__service *dst, const sy__service *src);

/*
 * Version order used for "latest": segments split on '.', compared left to
 * right. A segment's leading digits compare as a number (any length:
 * 1.10 > 1.9); a segment starting with digits is smaller than one that does
 * not (1.9 < 1.x); after equal leading digits, no suffix beats a suffix
 * (1.2 > 1.2-rc1) and suffixes compare bytewise. A missing segment is
 * smaller than a present one (1.2 < 1.2.1). Versions equal by these rules
 * but spelled differently (1.01 vs 1.1) are ordered bytewise, so the order
 * is total. Returns <0, 0 or >0.
 */
int sy__service_version_cmp(const char *a, size_t alen, const char *b,
                            size_t blen);

#endif
