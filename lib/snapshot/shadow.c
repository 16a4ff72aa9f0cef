/*
 * shadow.c - shadowed and unreachable routes (sy_document_shadowed,
 * sy_snapshot_shadowed): a route no request can reach, because routes
 * ranked above it take every request it would match, or because its own
 * predicates hold for no request at all.
 *
 * Only what holds for every request is reported. Route A (above) takes
 * every request of route B when each predicate of A is implied by B's
 * predicates: a Path (Host) of A contains a Path (Host) of B pattern by
 * pattern (route/pattern_cover.c), a Method of A lists every method B
 * admits, A's time window holds B's, and any other predicate of A is
 * written exactly as one of B's. A with a Weight or a host-registered
 * predicate takes no route's requests (a draw, a host's decision). B's
 * own extra predicates only narrow B, so they never stop A from taking
 * it. B's Path patterns may be taken by different routes above (route(s)
 * named in rank order). A route above whose Path patterns all start with
 * one literal segment ("/api/...") is only tried for patterns of B that
 * start with it (routes are grouped by that segment, sorted once), so a
 * table of distinct prefixes is checked in about n log n; the worst case
 * (every route a wildcard first segment) stays quadratic: a check for
 * publish or CI time, not for the request path.
 */
#include "def/def.h"
#include "route/predicate.h"
#include "snapshot/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rinfo {
    const struct sy_route *r;
    size_t rank, position;
    char path[32];
    bool skip;       /* disabled */
    bool may_take;   /* no Weight, no host-registered predicate */
    bool any_method; /* no Method predicate */
    uint32_t mask;   /* standard methods every Method predicate admits */
    int method;      /* first Method predicate (its others), or -1 */
    int64_t lo, hi;  /* now must lie in (lo, hi) */
    int path_pred;   /* first Path predicate, or -1 */
    /* a first path segment every request it matches has ("api" for
     * Path=/api/x,/api/y), or ptr NULL: none known */
    sy_str first;
    const char *nothing; /* why no request can match it, or NULL */
} rinfo;

#define STD_METHODS 0x7fffffffu

static const struct sy__pred *pred(const struct sy_route *r, size_t i) {
    return sy__route_cpred(r, i);
}

/* A non-standard method every Method predicate of `ri` lists. */
static bool other_admitted(const rinfo *ri, const char *m) {
    for (size_t i = 0; i < ri->r->predicate_count; i++) {
        const struct sy__pred *p = pred(ri->r, i);
        if (sy__pred_get_kind(p) != SY_PK_METHOD)
            continue;
        bool listed = false;
        for (size_t k = 0; k < sy__pred_method_other_count(p) && !listed; k++)
            listed = strcmp(sy__pred_method_other(p, k), m) == 0;
        if (!listed)
            return false;
    }
    return true;
}

/* The literal first segment of pattern p, or {NULL, 0}. */
static sy_str first_literal(const sy__pattern *p) {
    if (!sy__pattern_segment_count(p) ||
        sy__pattern_segment_kind(p, 0) != SY_SEG_LITERAL)
        return (sy_str){NULL, 0};
    return sy__pattern_literal(p, 0);
}

/* One literal first segment all patterns of Path predicate p share. */
static sy_str shared_first(const struct sy__pred *p) {
    sy_str f = {NULL, 0};
    for (size_t i = 0; i < sy__pred_pattern_count(p); i++) {
        sy_str s = first_literal(sy__pred_pattern(p, i));
        if (!s.ptr || (f.ptr && !sy__str_eq(f, s.ptr, s.len)))
            return (sy_str){NULL, 0};
        f = s;
    }
    return f;
}

static void analyse(rinfo *ri) {
    const struct sy_route *r = ri->r;
    /* no cpred: not compiled, or no predicates (a catch-all, it takes
     * every request of every route after it) */
    ri->skip = r->disabled || (!r->cpred && r->predicate_count);
    ri->may_take = true;
    ri->any_method = true;
    ri->mask = STD_METHODS;
    ri->method = ri->path_pred = -1;
    ri->lo = INT64_MIN;
    ri->hi = INT64_MAX;
    ri->nothing = NULL;
    if (ri->skip)
        return;
    for (size_t i = 0; i < r->predicate_count; i++) {
        const struct sy__pred *p = pred(r, i);
        int64_t lo, hi;
        switch (sy__pred_get_kind(p)) {
        case SY_PK_WEIGHT:
        case SY_PK_HOST_FACTORY: ri->may_take = false; break;
        case SY_PK_METHOD:
            ri->any_method = false;
            ri->mask &= sy__pred_method_mask(p) & STD_METHODS;
            if (ri->method < 0)
                ri->method = (int)i;
            break;
        case SY_PK_TIME:
            sy__pred_time_window(p, &lo, &hi);
            if (lo > ri->lo)
                ri->lo = lo;
            if (hi < ri->hi)
                ri->hi = hi;
            break;
        case SY_PK_PATH:
            if (ri->path_pred < 0)
                ri->path_pred = (int)i;
            if (!ri->first.ptr)
                ri->first = shared_first(p);
            if (!sy__pred_can_match_path(p))
                ri->nothing = "no pattern of its Path predicate can match a "
                              "path (a pattern must start with '/')";
            break;
        default: break;
        }
    }
    if (!ri->any_method && !ri->mask) {
        const struct sy__pred *m = pred(r, (size_t)ri->method);
        bool other = false;
        for (size_t k = 0; k < sy__pred_method_other_count(m) && !other; k++)
            other = other_admitted(ri, sy__pred_method_other(m, k));
        if (!other)
            ri->nothing = "no method passes its Method predicates";
    }
    /* integer milliseconds strictly between lo and hi */
    if (ri->hi <= ri->lo || (uint64_t)ri->hi - (uint64_t)ri->lo <= 1)
        ri->nothing = "no instant passes its After, Before and Between "
                      "predicates";
}

static bool entries_equal(const sy__def_entry *a, const sy__def_entry *b) {
    if (strcmp(sy__def_name(a), sy__def_name(b)) != 0 ||
        a->arg_count != b->arg_count || a->host || b->host)
        return false;
    for (uint32_t i = 0; i < a->arg_count; i++)
        if (strcmp(a->args[i].key, b->args[i].key) != 0 ||
            strcmp(a->args[i].value, b->args[i].value) != 0)
            return false;
    return true;
}

/* Every method b admits, Method predicate q admits. */
static bool methods_cover(const struct sy__pred *q, const rinfo *b) {
    if (b->any_method)
        return false;
    if (b->mask & ~sy__pred_method_mask(q) & STD_METHODS)
        return false;
    const struct sy__pred *bm = pred(b->r, (size_t)b->method);
    for (size_t k = 0; k < sy__pred_method_other_count(bm); k++) {
        const char *m = sy__pred_method_other(bm, k);
        if (!other_admitted(b, m))
            continue; /* not admitted by b at all */
        bool listed = false;
        for (size_t j = 0; j < sy__pred_method_other_count(q) && !listed; j++)
            listed = strcmp(sy__pred_method_other(q, j), m) == 0;
        if (!listed)
            return false;
    }
    return true;
}

/* Predicate q of a route above holds for every request b matches (with
 * b's first Path predicate narrowed to pattern `piece`, SIZE_MAX: all). */
static bool pred_covers(const struct sy_route *qr, size_t qi, const rinfo *b,
                        size_t piece, const sy__alloc *a) {
    const struct sy__pred *q = pred(qr, qi);
    sy__pred_kind kind = sy__pred_get_kind(q);
    const struct sy_route *br = b->r;
    int64_t lo, hi;
    switch (kind) {
    case SY_PK_METHOD: return methods_cover(q, b);
    case SY_PK_TIME:
        sy__pred_time_window(q, &lo, &hi);
        return lo <= b->lo && hi >= b->hi;
    case SY_PK_WEIGHT:
    case SY_PK_HOST_FACTORY: return false;
    default: break;
    }
    sy__entry_view qt, tmp; /* the entries: rebuilt if not kept */
    const sy__def_entry *qe = NULL;
    for (size_t i = 0; i < br->predicate_count; i++) {
        const struct sy__pred *bp = pred(br, i);
        if (sy__pred_get_kind(bp) != kind)
            continue;
        if (kind == SY_PK_PATH || kind == SY_PK_HOST) {
            size_t only = (int)i == b->path_pred ? piece : SIZE_MAX;
            if (sy__pred_patterns_cover(q, bp, only, a))
                return true;
        } else {
            if (!qe)
                qe = sy__route_pred_entry(qr, qi, &qt);
            if (entries_equal(qe, sy__route_pred_entry(br, i, &tmp)))
                return true;
        }
    }
    return false;
}

/* Route `above` takes every request of b (narrowed to `piece`). */
static bool takes(const rinfo *above, const rinfo *b, size_t piece,
                  const sy__alloc *a) {
    if (above->skip || !above->may_take || above->nothing)
        return false;
    const struct sy_route *r = above->r;
    for (size_t i = 0; i < r->predicate_count; i++)
        if (!pred_covers(r, i, b, piece, a))
            return false;
    return true;
}

typedef struct shadow_run {
    const sy__alloc *alloc;
    rinfo *info; /* in rank order */
    size_t n;
    sy_shadow_fn fn;
    void *data;
    /* the routes with a first segment, sorted by (segment, rank), and
     * the ranks of those without one, in rank order */
    struct keyed_ent *keyed;
    size_t nkeyed;
    size_t *open, nopen;
} shadow_run;

typedef struct keyed_ent {
    sy_str first;
    size_t rank;
} keyed_ent;

static int cmp_str(sy_str a, sy_str b) {
    size_t n = a.len < b.len ? a.len : b.len;
    int c = n ? memcmp(a.ptr, b.ptr, n) : 0;
    return c ? c : (a.len > b.len) - (a.len < b.len);
}

static int keyed_cmp(const void *x, const void *y) {
    const keyed_ent *a = x, *b = y;
    int c = cmp_str(a->first, b->first);
    return c ? c : (a->rank > b->rank) - (a->rank < b->rank);
}

/* The first route above rank k that takes b's piece (key: the piece's
 * literal first segment, or NULL), or k. Only routes without a first
 * segment and those with the piece's can: a route whose patterns all
 * start with "api" holds for no path of a piece that starts otherwise (or
 * with a wildcard, which also matches other first segments). */
static size_t first_taker(const shadow_run *run, const rinfo *b, size_t k,
                          size_t piece, sy_str key) {
    size_t lo = 0, hi = 0;
    if (key.ptr) { /* the range of routes whose first segment is key */
        size_t l = 0, h = run->nkeyed;
        while (l < h) {
            size_t m = (l + h) / 2;
            if (cmp_str(run->keyed[m].first, key) < 0)
                l = m + 1;
            else
                h = m;
        }
        lo = hi = l;
        while (hi < run->nkeyed && cmp_str(run->keyed[hi].first, key) == 0)
            hi++;
    }
    size_t a = 0, x = lo;
    for (;;) {
        size_t ra = a < run->nopen ? run->open[a] : SIZE_MAX;
        size_t rx = x < hi ? run->keyed[x].rank : SIZE_MAX;
        size_t j = ra < rx ? ra : rx;
        if (j >= k)
            return k;
        if (ra < rx)
            a++;
        else
            x++;
        if (takes(&run->info[j], b, piece, run->alloc))
            return j;
    }
}

/* Report route k when it is unreachable. */
static int check_one(shadow_run *run, size_t k, size_t *by, size_t *by_rank,
                     size_t *by_pos, const sy_route **by_route,
                     const char **by_path) {
    rinfo *b = &run->info[k];
    if (b->skip)
        return 0;
    sy_shadow s;
    memset(&s, 0, sizeof s);
    s.route = b->r;
    s.rank = b->rank;
    s.position = b->position;
    s.path = b->path;
    char reason[512];
    if (b->nothing) {
        snprintf(reason, sizeof reason, "it can match no request: %s",
                 b->nothing);
        s.reason = reason;
        return run->fn(run->data, &s);
    }
    size_t pieces = 1;
    if (b->path_pred >= 0)
        pieces = sy__pred_pattern_count(pred(b->r, (size_t)b->path_pred));
    size_t nby = 0;
    for (size_t piece = 0; piece < pieces; piece++) {
        size_t whole = b->path_pred >= 0 ? piece : SIZE_MAX;
        sy_str key = {NULL, 0};
        if (b->path_pred >= 0)
            key = first_literal(
                sy__pred_pattern(pred(b->r, (size_t)b->path_pred), piece));
        size_t j = first_taker(run, b, k, whole, key);
        if (j == k)
            return 0; /* this part of its requests reaches it */
        size_t m = 0;
        while (m < nby && by[m] != j)
            m++;
        if (m == nby)
            by[nby++] = j;
    }
    /* rank order */
    for (size_t i = 1; i < nby; i++)
        for (size_t x = i; x > 0 && by[x - 1] > by[x]; x--) {
            size_t t = by[x];
            by[x] = by[x - 1];
            by[x - 1] = t;
        }
    size_t o = (size_t)snprintf(reason, sizeof reason,
                                "every request it matches goes to ");
    for (size_t i = 0; i < nby; i++) {
        const rinfo *ri = &run->info[by[i]];
        by_route[i] = ri->r;
        by_rank[i] = ri->rank;
        by_pos[i] = ri->position;
        by_path[i] = ri->path;
        if (o < sizeof reason)
            o += (size_t)snprintf(reason + o, sizeof reason - o, "%s'%s'",
                                  i == 0         ? ""
                                  : i + 1 == nby ? " or "
                                                 : ", ",
                                  ri->r->id);
    }
    s.by_count = nby;
    s.by = by_route;
    s.by_rank = by_rank;
    s.by_position = by_pos;
    s.by_path = by_path;
    s.reason = reason;
    return run->fn(run->data, &s);
}

static int run_all(shadow_run *run, sy_error *err) {
    size_t n = run->n;
    run->keyed = sy__calloc(run->alloc, n + 1, sizeof *run->keyed);
    run->open = sy__calloc(run->alloc, n + 1, sizeof *run->open);
    if (!run->keyed || !run->open) {
        sy__free(run->alloc, run->keyed);
        sy__free(run->alloc, run->open);
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        if (run->info[i].first.ptr)
            run->keyed[run->nkeyed++] = (keyed_ent){run->info[i].first, i};
        else
            run->open[run->nopen++] = i;
    }
    qsort(run->keyed, run->nkeyed, sizeof *run->keyed, keyed_cmp);
    size_t *by = sy__calloc(run->alloc, 3 * n + 1, sizeof *by);
    const sy_route **by_route = sy__calloc(run->alloc, n + 1, sizeof *by_route);
    const char **by_path = sy__calloc(run->alloc, n + 1, sizeof *by_path);
    int rc = 0;
    if (!by || !by_route || !by_path)
        rc = sy__error_set(err, SY_ENOMEM, "", "out of memory");
    for (size_t k = 0; !rc && k < n; k++)
        rc = check_one(run, k, by, by + n, by + 2 * n, by_route, by_path);
    sy__free(run->alloc, run->keyed);
    sy__free(run->alloc, run->open);
    sy__free(run->alloc, by);
    sy__free(run->alloc, by_route);
    sy__free(run->alloc, by_path);
    return rc;
}

static int order_cmp(const void *x, const void *y) {
    const rinfo *a = x, *b = y;
    if (a->r->order != b->r->order)
        return a->r->order < b->r->order ? -1 : 1;
    return a->position < b->position ? -1 : a->position > b->position;
}

int sy_document_shadowed(const sy_document *doc, const sy_allocator *alloc,
                         sy_shadow_fn fn, void *data, sy_error *err) {
    if (!doc || !fn)
        return sy__error_set(err, SY_EINVAL, "", "no document or callback");
    sy__alloc a;
    sy__alloc_init(&a, alloc);
    size_t n = doc->route_count;
    rinfo *info = sy__calloc(&a, n + 1, sizeof *info);
    if (!info)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    for (size_t i = 0; i < n; i++) {
        rinfo *ri = &info[i];
        ri->r = doc->routes[i];
        ri->position = doc->positions ? doc->positions[i] : i;
        snprintf(ri->path, sizeof ri->path, "%s[%zu]",
                 doc->envelope ? "routes" : "", ri->position);
        analyse(ri);
    }
    /* rank: by order, then position (route model section 3) */
    qsort(info, n, sizeof *info, order_cmp);
    for (size_t i = 0; i < n; i++)
        info[i].rank = i;
    shadow_run run = {
        .alloc = &a, .info = info, .n = n, .fn = fn, .data = data};
    int rc = run_all(&run, err);
    sy__free(&a, info);
    return rc;
}

int sy_snapshot_shadowed(const sy_snapshot *snap, const sy_allocator *alloc,
                         sy_shadow_fn fn, void *data, sy_error *err) {
    if (!snap || !fn)
        return sy__error_set(err, SY_EINVAL, "", "no snapshot or callback");
    sy__alloc a;
    sy__alloc_init(&a, alloc);
    size_t n = sy_snapshot_route_count(snap);
    rinfo *info = sy__calloc(&a, n + 1, sizeof *info);
    if (!info)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    for (size_t i = 0; i < n; i++) {
        rinfo *ri = &info[i];
        ri->r = sy_snapshot_route_at(snap, i);
        ri->rank = i;
        ri->position = ri->r->doc_index;
        analyse(ri);
    }
    shadow_run run = {
        .alloc = &a, .info = info, .n = n, .fn = fn, .data = data};
    int rc = run_all(&run, err);
    sy__free(&a, info);
    return rc;
}
