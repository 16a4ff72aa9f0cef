/*
 * match.h - the match context and the match result, shared by the
 * matcher (match.c), the result's answers (match_result.c), instance
 * selection (select.c) and the target of a match (target.c). Internal: the
 * public API sees opaque handles.
 */
#ifndef SY_MATCH_H
#define SY_MATCH_H

#include "base/budget.h"
#include "route/filter.h"
#include "route/predicate.h"
#include "snapshot/index.h"
#include "snapshot/snapshot.h"

#ifndef NONE
#define NONE SY_NONE /* short local name */
#endif
#define MAX_LISTS 64
/* routes that failed only on Method, remembered to answer 405 */
#define MAX_METHOD_MISSES 16
/* services a context keeps resolved (a power of two) */
#define SY_MATCH_SERVICES 32

struct sy_match {
    sy_match_ctx *ctx;
    const sy_snapshot *snap;
    const sy_request *req;
    const struct sy_route *route;
    bool plan_done;
    int plan_rc;
    sy__plan plan;
};

enum { HOST_READY = 0, HOST_PENDING = 1, HOST_OOM = 2 };
enum { PATH_READY = 0, PATH_PENDING = 1 };

struct sy_match_ctx {
    sy__alloc alloc;
    sy_request req_copy; /* a completed or seeded copy of the request */
    uint64_t rng;        /* Weight seeds when the host passes none */
    sy__arena scratch;
    sy__segments path, host;
    /* the host's labels are split on first need (host_labels, match.c):
     * the whole-host table answers most hosts without them. HOST_OOM: that
     * split failed (and stopped the match, as an exhausted budget does):
     * the match reports SY_ENOMEM */
    uint8_t host_state; /* HOST_READY, HOST_PENDING, HOST_OOM */
    /* a rooted short path's slices are cut on first need (path_segs,
     * match.c): the index walks path.flat by its '/' bits, path.flat
     * answers a literal Path, and a route found without captures reads
     * none. PATH_PENDING: path.count, dec and raw are stale; path_sl holds
     * the path's '/' bits */
    uint8_t path_state; /* PATH_READY, PATH_PENDING */
    uint64_t path_sl;
    sy__capture *caps;
    size_t caps_cap;
    /* what the scratch fits (sy__match_prep's fit_*; 0 before the first
     * match), so a match checks it against its snapshot's with two loads */
    uint32_t fit_caps, fit_groups;
    /* what the path's split saw (SY_SEEN_*, pattern.h): with EMPTY clear,
     * no segment is empty */
    unsigned path_seen;
    /* the captures of the route found, when a walk proved it whole: taken
     * from the request's segments on first read (sy__match_caps), as a
     * host that reads none pays nothing for them; NULL when ev.caps holds
     * them already */
    const sy__cand_list *lazy_list;
    const sy__cand *lazy_cand;
    pcre2_general_context *gctx;
    pcre2_match_data *md;
    uint32_t md_groups;
    sy__eval ev;
    sy__cand_list lists[MAX_LISTS];
    uint32_t heads[MAX_LISTS];
    sy_match m;
    sy__budget budget; /* the CPU budget of the current request */
    /* why the last match found nothing (sy_match_ctx_nomatch) */
    sy_nomatch nomatch;
    /* slot << 1 | 1, or (the one-list loop's) a candidate of lists[0],
     * its slot found only on a miss (method_reason) */
    uintptr_t method_misses[MAX_METHOD_MISSES];
    size_t method_miss_count;
    char allow[128];
    size_t allow_len;
    /* lb:// services found by name (select.c): entry k holds the service
     * named by route uri string `name` in the snapshot of serial `serial`
     * (0: empty), so a route's service is looked up once per snapshot,
     * not per request. An entry is read only while a match holds that
     * snapshot (serials are never reused), and the name while its route
     * is in it: never stale. */
    struct {
        uint64_t serial;
        const char *name;
        const struct sy__service *svc;
    } services[SY_MATCH_SERVICES];
};

/* Grows c's scratch to what snapshot s needs (match_ctx.c): SY_ENOMEM or
 * SY_OK. */
int sy__match_ctx_grow(sy_match_ctx *c, const sy_snapshot *s);

/* Takes the captures the matcher left for their first read (match.c). */
void sy__match_caps_take(sy_match_ctx *c);

/* The captures of the route found, in c->ev: taken now if left. */
static inline void sy__match_caps(sy_match_ctx *c) {
    if (c->lazy_list)
        sy__match_caps_take(c);
}

#endif
