/*
 * service_int.h - the private layout of a service, shared by the files that
 * build it (service.c), its hash pick (service_hrw.c),
 * selection (service_select.c) and passive health (service_health.c).
 * Private to those files.
 *
 *   sy__service
 *    |- inst[]            copied instances (metadata sorted by key)
 *    |- ids               id -> index (idtab.h)
 *    |- groups[]          candidate sets, all over UP instances only:
 *    |    0  "a"          every up instance            (fallback any)
 *    |    1  "u"          up instances without version (no header)
 *    |    k  "v" 1.2      up instances of version 1.2  (one per version)
 *    |    .. "h" x  <- child of a base group: its members with hint x
 *    |    .. "z" eu <- child of a base or hint group: members in zone eu
 *    |   each group: members[], cum[] weights, smooth WRR schedule,
 *    |               alias table, one cache-line-padded atomic round-robin
 *    |               counter, its members ordered by weight (the hash
 *    |               pick, service_hrw.c)
 *    |   a group whose members are exactly those of its counterpart in
 *    |   the "a" tree ("u" = "a" when no instance has a version; "u"/z eu
 *    |   = "a"/z eu ...) is that group's twin: it shares its members and
 *    |   balancing arrays (not its counter)
 *    |- map               (parent group, tag, string) -> group
 *    `- health block      one allocation holding every instance's fresh
 *                         passive-health record (service_health.c)
 */
#ifndef SY_SERVICE_INT_H
#define SY_SERVICE_INT_H

#include "base/idtab.h"
#include "service/service.h"

#define SVC_G_ALL 0u
#define SVC_G_UNV 1u
/* Smooth WRR schedules are precomputed up to this length (and this much
 * build work); longer cycles use an exact multiplicative permutation. */
#define SVC_SCHED_MIN 4096u
#define SVC_SCHED_PER_MEMBER 64u
#define SVC_SCHED_WORK (1ull << 24)
#define SVC_MEMBERSHIPS 8 /* groups one instance can be in */
#define SVC_HASH_SEED 0x5e1ec7ab1e5eedull

__extension__ typedef unsigned __int128 sy__svc_u128;

/* The records of one service build live in one block, freed when the
 * last of them is (service_health.c). */
typedef struct sy__svc_hblock {
    _Atomic size_t live; /* records whose refs are not 0 */
} sy__svc_hblock;

/* Passive health of one instance (service_health.c): shared by every
 * version of its service that holds an instance of that id, so outcomes
 * and ejections survive publishes. */
typedef struct sy__svc_health {
    _Atomic size_t refs;
    _Atomic uint32_t failures;     /* consecutive failed outcomes */
    _Atomic uint32_t ejections;    /* times ejected, for the growing time */
    _Atomic int64_t ejected_until; /* epoch ms; 0: not ejected */
    sy__svc_hblock *block;         /* the block holding this record */
} sy__svc_health;

typedef struct sy__svc_inst {
    sy_instance pub; /* strings in the arena, weight >= 1 */
    uint32_t idh;    /* sy__idtab_hash of the id */
    uint32_t idlen;  /* strlen of the id */
    uint64_t hseed;  /* hash64 of the id: its rendezvous seed (hash pick) */
    const char *version, *zone, *hint;
    size_t version_len, zone_len, hint_len;
    const char *authority;  /* the Host header it expects (host[:port]) */
    size_t authority_len;   /* its strlen */
    sy__svc_health *health; /* never NULL once built */
    const struct sy__service *owner;
} sy__svc_inst;

/* A run of members of one weight in a group's hash order: they end
 * before hmem[end]; inv is 1 / their weight. */
typedef struct sy__svc_hrun {
    uint32_t end;
    double inv;
} sy__svc_hrun;

typedef struct sy__svc_counter {
    _Atomic uint64_t v;
    char pad[64 - sizeof(uint64_t)];
} sy__svc_counter;

typedef struct sy__svc_group {
    uint32_t parent; /* SY_NONE for base groups */
    char tag;        /* 'a', 'u', 'v', 'h', 'z' */
    const char *key; /* version, hint or zone (borrowed from inst) */
    size_t key_len;
    uint32_t *members; /* instance indices, ascending */
    uint32_t n;
    uint32_t fill;
    uint64_t total;  /* sum of weights / gcd */
    uint64_t *cum;   /* cumulative reduced weights (permutation RR) */
    uint64_t *prob;  /* alias table for weighted random: keep position k */
    uint32_t *alias; /* when u < prob[k], else take alias[k] */
    uint32_t *sched; /* one weight class: the cycle (= members), or NULL */
    /* more classes: the smooth WRR cycle, built on the first round-robin
     * pick (never set on a twin: its owner's is used), see smooth */
    _Atomic(uint32_t *) wrr;
    bool smooth;   /* a smooth cycle is wanted (else the permutation) */
    uint64_t step; /* permutation multiplier: without sched and wrr */
    uint32_t twin; /* group with the same members, or SY_NONE */
    sy__svc_counter *rr;
    /* the hash pick's order (service_hrw.c): members by weight (then
     * position), their id seeds beside, and the runs of one weight */
    uint32_t *hmem;
    uint64_t *hseed;
    struct sy__svc_hrun *hruns;
    uint32_t hclasses;
} sy__svc_group;

typedef struct sy__svc_slot {
    uint64_t hash;
    uint32_t group; /* SY_NONE = empty */
} sy__svc_slot;

struct sy__service {
    _Atomic size_t refs;
    sy__alloc alloc;
    sy__arena arena;
    const char *name;
    sy__svc_inst *inst;
    size_t n;
    size_t up;
    sy__idtab ids;         /* id -> index into inst[] (idtab.h) */
    sy__svc_group *groups; /* sy__malloc'd */
    size_t ngroups, groups_cap;
    sy__svc_slot *map; /* sy__malloc'd */
    size_t map_cap, map_used;
    uint32_t deflt;        /* no version header */
    uint32_t deflt_oldest; /* no version header, version-default oldest */
    uint32_t latest;       /* fallback latest */
    sy__svc_counter *counters;
    sy__svc_hblock *hblock; /* this build's health records (service_health.c) */
    _Atomic uint64_t fingerprint; /* sy__service_fingerprint, once computed */
    _Atomic bool fingerprint_done;
};

/* ---- small helpers ---- */

static inline void *sy__svc_arena_array(sy__service *s, size_t n, size_t size) {
    if (size && n > (SIZE_MAX - 64) / size)
        return NULL;
    return sy__arena_alloc(&s->arena, n * size);
}

static inline uint64_t sy__svc_gcd(uint64_t a, uint64_t b) {
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* A group's key in the map: the hash of its string (sy__svc_khash, worked
 * out once per instance and string when building) mixed with its parent
 * and tag. */
static inline uint64_t sy__svc_khash(const char *k, size_t len) {
    return sy__hash64(k, len, SVC_HASH_SEED);
}

static inline uint64_t sy__svc_gkey(uint32_t parent, char tag, uint64_t khash) {
    return sy__hash_mix(khash, ((uint64_t)parent << 8) ^ (unsigned char)tag);
}

/* The group (parent, tag, k), whose string hashes to kh, or SY_NONE. */
static inline uint32_t sy__svc_group_find_h(const sy__service *s,
                                            uint32_t parent, char tag,
                                            const char *k, size_t len,
                                            uint64_t kh) {
    uint64_t h = sy__svc_gkey(parent, tag, kh);
    size_t mask = s->map_cap - 1, i = h & mask;
    for (;; i = (i + 1) & mask) {
        const sy__svc_slot *sl = &s->map[i];
        if (sl->group == SY_NONE)
            return SY_NONE;
        if (sl->hash != h)
            continue;
        const sy__svc_group *g = &s->groups[sl->group];
        if (g->parent == parent && g->tag == tag && g->key_len == len &&
            memcmp(g->key, k, len) == 0)
            return sl->group;
    }
}

static inline uint32_t sy__svc_group_find(const sy__service *s, uint32_t parent,
                                          char tag, const char *k, size_t len) {
    return sy__svc_group_find_h(s, parent, tag, k, len, sy__svc_khash(k, len));
}

/* Whether instance i of `a` and instance j of `b` have the same id. */
static inline bool sy__svc_same_id(const sy__service *a, uint32_t i,
                                   const sy__service *b, uint32_t j) {
    const sy__svc_inst *x = &a->inst[i], *y = &b->inst[j];
    return x->idh == y->idh && x->idlen == y->idlen &&
           memcmp(x->pub.id, y->pub.id, x->idlen) == 0;
}

/* The index in `o` of the instance with the id of s->inst[i], or SY_NONE:
 * the same position first (lists usually keep their order from one
 * version to the next), then o's id table. */
/* The id of instance i of service ctx (the id table's key reader). */
static inline const char *sy__svc_inst_id(const void *ctx, uint32_t i) {
    return ((const sy__service *)ctx)->inst[i].pub.id;
}

static inline uint32_t sy__svc_match(const sy__service *s, size_t i,
                                     const sy__service *o) {
    const sy__svc_inst *in = &s->inst[i];
    if (i < o->n && sy__svc_same_id(s, (uint32_t)i, o, (uint32_t)i))
        return (uint32_t)i;
    if (!o->ids.e)
        return SY_NONE;
    uint32_t pos;
    return sy__idtab_find(&o->ids, in->pub.id, in->idlen, in->idh,
                          sy__svc_inst_id, o, &pos);
}

/* Where an instance is in the caller's input: instances[i] of a list, or
 * deltas[i].instance of a delta list. Formatted only for an error. */
typedef struct sy__svc_where {
    bool delta;
    size_t i;
} sy__svc_where;

/* The JSON path of `w` followed by fmt's text, into out[cap]. */
void sy__svc_path(char *out, size_t cap, sy__svc_where w, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Checks one instance's fields; SY_EINVAL with its path. */
int sy__svc_validate(const sy_instance *in, sy__svc_where w, sy_error *err);
/* The group of `old` that corresponds to group g of `s` (same tags and
 * strings from the root), or SY_NONE. */
static inline uint32_t sy__svc_counterpart(const sy__service *s,
                                           const sy__service *old, uint32_t g) {
    if (g == SY_NONE || g <= SVC_G_UNV)
        return g;
    const sy__svc_group *gr = &s->groups[g];
    uint32_t parent = sy__svc_counterpart(s, old, gr->parent);
    if (gr->parent != SY_NONE && parent == SY_NONE)
        return SY_NONE;
    return sy__svc_group_find(old, parent, gr->tag, gr->key, gr->key_len);
}

/* The group of `old` that holds the lazily built state (smooth cycle) of
 * `s`'s group g: its counterpart, or the twin that counterpart shares it
 * with; SY_NONE for none. */
static inline uint32_t sy__svc_counterpart_owner(const sy__service *s,
                                                 const sy__service *old,
                                                 uint32_t g) {
    uint32_t o = sy__svc_counterpart(s, old, g);
    if (o != SY_NONE && old->groups[o].twin != SY_NONE)
        o = old->groups[o].twin;
    return o;
}

/* ---- the hash pick (service_hrw.c) ---- */

/* The member of non-empty group `g` that `key` goes to: weighted
 * rendezvous hashing, each member's share its weight's share. Reads only
 * the service; no lock, no allocation. */
uint32_t sy__svc_hrw_pick(const sy__service *s, const sy__svc_group *g,
                          sy_str key);
/* Fill g->hmem (from s's arena) and g->hclasses from g's members:
 * SY_OK or SY_ENOMEM. */
int sy__svc_hrw_prepare(sy__service *s, sy__svc_group *g);

/* ---- passive health (service_health.c) ---- */

/* Give every instance of `s` (s->n of them) a fresh health record, all in
 * one block: SY_OK or SY_ENOMEM. */
int sy__svc_health_init(sy__service *s);
/* Drop the instance's reference to its record. */
void sy__svc_health_release(const sy__alloc *a, sy__svc_inst *in);
/* True when `in` is ejected at `*now` (read through the clock lazily: *now
 * is 0 until needed). */
bool sy__svc_health_ejected(const sy__svc_inst *in, const sy__select_params *p,
                            int64_t *now);

/* ---- balancing structures (service_select.c) ---- */

/* Fill g->cum, g->total, the alias table and the round-robin schedule (or
 * permutation step) of group `g` from its members' weights. A smooth
 * cycle of several weight classes is not built here but on the group's
 * first round-robin pick (g->wrr), or by sy__svc_wrr_inherit. */
int sy__svc_finish_group(sy__service *s, sy__svc_group *g);
/* Build now (writer side) the smooth cycles of the groups of `dst` whose
 * counterparts in its predecessor `src` had one, so readers of a service
 * picked by round robin do not build one after an instance update. */
void sy__svc_wrr_inherit(sy__service *dst, const sy__service *src);
/* Free the smooth cycles built for s's groups. */
void sy__svc_wrr_release(sy__service *s);

#endif
