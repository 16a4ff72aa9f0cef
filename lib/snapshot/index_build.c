/*
 * index_build.c - the one-shot index build (index.h, sy__index_build):
 * the whole index over a route list in one call, in named phases:
 *
 *   start   the routes sorted by rank key, the edge table, the two roots
 *   insert  each route's patterns into the path and host tries
 *   place   list lengths; each route in the trie where its lists are
 *           shortest
 *   flatten the candidate lists into one pool
 *   prune   branches without lists cut off (index_int.h)
 *   hosts   the whole-host table
 *   layout  the live nodes depth first into the index's arrays
 *
 * The temporaries of place and flatten are cut from the edge table,
 * dead once every route is in (tmp_get): its pages are faulted in
 * already, where fresh blocks (~5 MB at 100,000 routes) are faulted in
 * page by page, ~1.8 us a fault on this kind of VM.
 *
 * index_step.c runs the same passes a bounded share at a time;
 * index.c owns the tries' insertion and the lookups.
 */
#include "snapshot/index_int.h"

#include "route/predicate.h"

#include <stddef.h>

/* The one-shot build's state: the index being built and its
 * temporaries. */
typedef struct oneshot {
    const sy__alloc *a;
    sy__index *ix;
    const sy__index_route *routes; /* sorted by key */
    sy__index_route *routes_own;   /* their copy, unless given sorted */
    size_t n;
    uint8_t *placement; /* per route: 0 path, 1 host, 2 generic */
    uint32_t *pcost;    /* per route and trie: its longest list + 1 */
    uint32_t *slot_pos; /* per pending entry: its route's position */
    rinfo *info;
    spare room; /* the edge table's, after the insertion (index_int.h) */
    builder b;
    layout L;
} oneshot;

/* `bytes` for a temporary of the phases after the insertion (zeroed if
 * asked), from the edge table's room while it lasts, else allocated. */
static void *tmp_get(oneshot *o, size_t bytes, bool zero) {
    return spare_get(o->a, &o->room, bytes, zero);
}

/* A temporary of tmp_get's given back (freed unless the edge table's). */
static void tmp_put(oneshot *o, void *p) {
    spare_put(o->a, &o->room, p);
}

/* Stable counting sort of pending entries into per-(node, kind) lists. */
static bool flatten(oneshot *o) {
    builder *b = &o->b;
    sy__index *ix = o->ix;
    const uint8_t *placement = o->placement;
    const uint32_t *slot_pos = o->slot_pos;
    const rinfo *info = o->info;
    size_t nlists = (size_t)b->node_count * 2 + GENERIC_LISTS;
    uint32_t *start = tmp_get(o, (nlists + 1) * sizeof *start, true);
    if (!start)
        return false;
    size_t kept = 0;
    for (size_t i = 0; i < b->pend_count; i++) {
        pending *p = &b->pend[i];
        if (p->dim != placement[slot_pos[i]]) {
            p->kind = NONE; /* placed in the other dimension */
            continue;
        }
        size_t li = p->dim == 2 ? (size_t)b->node_count * 2 + p->node
                                : (size_t)p->node * 2 + p->kind;
        p->node = (uint32_t)li;
        start[li + 1]++;
        kept++;
    }
    for (size_t i = 0; i < nlists; i++)
        start[i + 1] += start[i];
    /* in huge pages, as the node array (index_layout.c) */
    ix->cands =
        sy__alloc_huge(b->a, (kept ? kept : 1) * sizeof *ix->cands, false);
    ix->cslots = sy__malloc(b->a, (kept ? kept : 1) * sizeof *ix->cslots);
    uint32_t *fill = tmp_get(o, nlists * sizeof *fill, false);
    if (!ix->cands || !ix->cslots || !fill) {
        tmp_put(o, fill);
        tmp_put(o, start);
        return false;
    }
    memcpy(fill, start, nlists * sizeof *fill);
    for (size_t i = 0; i < b->pend_count; i++) {
        pending *p = &b->pend[i];
        if (p->kind == NONE)
            continue;
        uint32_t *pos = &fill[p->node];
        /* a route with several patterns landing on one list: keep one */
        if (*pos > start[p->node] && ix->cslots[*pos - 1] == p->slot)
            continue;
        ix->cslots[*pos] = p->slot;
        ix->cands[(*pos)++] = cand_of(p, &info[slot_pos[i]]);
    }
    for (uint32_t n = 0; n < b->node_count; n++) {
        b->nodes[n].term = (list_ref){start[n * 2], fill[n * 2] - start[n * 2]};
        b->nodes[n].multi =
            (list_ref){start[n * 2 + 1], fill[n * 2 + 1] - start[n * 2 + 1]};
    }
    for (size_t g = 0; g < GENERIC_LISTS; g++) {
        size_t li = (size_t)b->node_count * 2 + g;
        ix->generic[g] = (list_ref){start[li], fill[li] - start[li]};
        if (ix->generic[g].len)
            ix->generic_some |= 1u << g;
    }
    ix->ncands = (uint32_t)kept;
    ix->bytes += kept * (sizeof *ix->cands + sizeof *ix->cslots);
    tmp_put(o, fill);
    tmp_put(o, start);
    return true;
}

/*
 * The build visits routes in rank order, which in a large table with
 * mixed orders reads them all over the heap: each line a TLB and cache
 * miss (at 100k routes most of the build's time). The routes ahead are
 * fetched in stages, each stage reading only lines an earlier one
 * fetched: the route's own fields 16 ahead, its predicate array 8 ahead,
 * the predicates 4 ahead, their patterns 2 ahead, the patterns' text 1
 * ahead. Hints only: what is read and built does not change.
 */
static void prefetch_patterns(const struct sy_route *rt, bool text) {
    size_t np = rt->predicate_count < 8 ? rt->predicate_count : 8;
    for (size_t i = 0; i < np; i++) {
        const sy__pred *p = sy__route_cpred(rt, i);
        size_t nk = p ? sy__pred_pattern_count(p) : 0;
        for (size_t k = 0; k < nk && k < 2; k++) {
            const sy__pattern *pat = sy__pred_pattern(p, k);
            if (text) {
                __builtin_prefetch(sy__pattern_source(pat));
            } else {
                __builtin_prefetch(pat);
                __builtin_prefetch((const char *)pat + 64);
            }
        }
    }
}

static void prefetch_ahead(const sy__index_route *routes, size_t n, size_t r) {
    if (r + 16 < n) {
        const struct sy_route *rt = routes[r + 16].route;
        __builtin_prefetch(&rt->order);
        __builtin_prefetch(&rt->predicate_count);
        __builtin_prefetch(&rt->cpred);
    }
    if (r + 8 < n)
        __builtin_prefetch(routes[r + 8].route->cpred);
    if (r + 4 < n) {
        const struct sy_route *rt = routes[r + 4].route;
        size_t np = rt->predicate_count < 8 ? rt->predicate_count : 8;
        for (size_t i = 0; i < np; i++)
            __builtin_prefetch(sy__route_cpred(rt, i));
    }
    if (r + 2 < n)
        prefetch_patterns(routes[r + 2].route, false);
    if (r + 1 < n)
        prefetch_patterns(routes[r + 1].route, true);
}

/* The arrays, the routes sorted, the edge table and the two roots. */
static bool build_start(oneshot *o, const sy__index_route *routes_in) {
    const sy__alloc *a = o->a;
    size_t n = o->n;
    o->ix = sy__calloc(a, 1, sizeof *o->ix);
    o->info = sy__malloc(a, (n ? n : 1) * sizeof *o->info);
    if (!o->ix || !o->info)
        return false;
    /* a first document's routes come in key order (slot i holds rank i):
     * read where they are, no copy */
    bool sorted = true;
    for (size_t i = 1; i < n && sorted; i++)
        sorted = routes_in[i - 1].key <= routes_in[i].key;
    o->routes = routes_in;
    if (!sorted) {
        o->routes = o->routes_own = sy__malloc(a, n * sizeof *o->routes_own);
        if (!o->routes_own)
            return false;
        memcpy(o->routes_own, routes_in, n * sizeof *o->routes_own);
        if (!sy__sort_by_u64(a, o->routes_own, n, sizeof *o->routes_own,
                             offsetof(sy__index_route, key)))
            return false;
    }
    o->ix->alloc = a;
    atomic_init(&o->ix->refs, 1);
    /* the edge table sized for ~2 literal edges a route (as
     * sy__index_step_reserve sizes it), so that a large table does not
     * rehash every edge at each doubling on the way (~10 % of a
     * 1,000,000-route build, in cache misses and fresh pages); the node
     * arrays for as many nodes */
    builder *b = &o->b;
    size_t guess = 2 * n + n / 4 + 64;
    uint32_t ecap = 64;
    while (ecap < UINT32_MAX / 4 && (size_t)ecap * 3 < guess * 4)
        ecap *= 2;
    if (!sy__ix_nodes_reserve(b, guess < WILD_NONE ? guess : WILD_NONE))
        return false;
    b->edge_mask = ecap - 1;
    b->edges = sy__malloc(a, (size_t)ecap * sizeof *b->edges);
    if (!b->edges)
        return false;
    for (uint32_t i = 0; i < ecap; i++)
        b->edges[i].child = NONE;
    sy__ix_new_node(b); /* ROOT_PATH */
    sy__ix_new_node(b); /* ROOT_HOST */
    return !b->failed;
}

/* Insert each route into every dimension it could use. */
static bool build_insert(oneshot *o) {
    builder *b = &o->b;
    for (size_t r = 0; r < o->n && !b->failed; r++) {
        const struct sy_route *rt = o->routes[r].route;
        uint32_t slot = o->routes[r].slot;
        prefetch_ahead(o->routes, o->n, r);
        if (rt->disabled)
            continue;
        o->info[r] = sy__ix_route_info(b, rt);
        const sy__pred *path = sy__ix_find_pred(rt, SY_PK_PATH);
        const sy__pred *host = sy__ix_find_pred(rt, SY_PK_HOST);
        sy__ix_insert_patterns(b, path, ROOT_PATH, slot, 0);
        sy__ix_insert_patterns(b, host, ROOT_HOST, slot, 1);
        /* in the any-method list even with a Method predicate: a request
         * of another method must still meet it (inline method bits reject
         * it at once), so a miss can answer 405 rather than 404 */
        if (!path && !host)
            sy__ix_add_pending(b, GENERIC_ANY, 0, slot, 2);
    }
    /* the edge table is not read again: its room serves tmp_get */
    o->room = (spare){(char *)b->edges,
                      ((size_t)b->edge_mask + 1) * sizeof *b->edges, 0};
    return !b->failed;
}

/* Count list sizes, then place each route where its lists are shortest:
 * the path trie unless the host trie is more selective. */
static bool build_place(oneshot *o) {
    builder *b = &o->b;
    size_t n = o->n;
    o->placement = tmp_get(o, n ? n : 1, false);
    o->pcost = tmp_get(o, (n ? n : 1) * 2 * sizeof *o->pcost, false);
    o->slot_pos = tmp_get(
        o, (b->pend_count ? b->pend_count : 1) * sizeof *o->slot_pos, false);
    if (!o->placement || !o->pcost || !o->slot_pos)
        return false;
    /* the list lengths last: flatten's arrays take their room after */
    size_t mark = o->room.used;
    uint32_t *list_len =
        tmp_get(o, (size_t)b->node_count * 2 * sizeof *list_len, true);
    if (!list_len)
        return false;
    for (size_t i = 0; i < b->pend_count; i++)
        if (b->pend[i].dim != 2)
            list_len[b->pend[i].node * 2 + b->pend[i].kind]++;
    for (size_t r = 0; r < n; r++) {
        o->pcost[r * 2] = o->pcost[r * 2 + 1] = 0;
        o->placement[r] = 2;
    }
    /* map pending -> route position (routes are sorted; pending in order) */
    for (size_t i = 0, r = 0; i < b->pend_count; i++) {
        while (o->routes[r].slot != b->pend[i].slot)
            r++;
        o->slot_pos[i] = (uint32_t)r;
        if (b->pend[i].dim == 2)
            continue;
        uint32_t len = list_len[b->pend[i].node * 2 + b->pend[i].kind];
        uint32_t *c = &o->pcost[r * 2 + b->pend[i].dim];
        if (len + 1 > *c)
            *c = len + 1;
    }
    for (size_t r = 0; r < n; r++) {
        uint32_t pc = o->pcost[r * 2], hc = o->pcost[r * 2 + 1];
        if (pc && (!hc || pc <= hc)) {
            o->placement[r] = 0;
        } else if (hc) {
            o->placement[r] = 1;
            o->ix->host_routes++;
        }
    }
    tmp_put(o, list_len);
    o->room.used = mark; /* list_len was the last one cut */
    return true;
}

/* Cut the branches without lists (index_int.h, "Pruning"). */
static bool build_prune(oneshot *o) {
    builder *b = &o->b;
    layout *L = &o->L;
    /* the candidates are placed: the room is the layout's from here */
    tmp_put(o, o->slot_pos);
    tmp_put(o, o->placement);
    tmp_put(o, o->pcost);
    o->slot_pos = NULL;
    o->placement = NULL;
    o->pcost = NULL;
    L->room = o->room;
    L->room.used = 0;
    if (!sy__ix_layout_start(b, L))
        return false;
    for (uint32_t i = b->node_count; i-- > 0;)
        prune_node(b, L->up, L->live, L->kids, i);
    return true;
}

/* The whole-host table (the pruning's kids[] reused for its flags). */
static bool build_hosts(oneshot *o) {
    builder *b = &o->b;
    layout *L = &o->L;
    sy__index *ix = o->ix;
    size_t hcount = 0, hbytes = 0, used = 0;
    for (uint32_t i = 0; i < b->node_count; i++) {
        hbytes += host_mark(b, L->up, L->key, ix->cands, L->kids, i, &hcount);
    }
    if (!host_alloc(o->a, hcount, hbytes, true, &ix->hosts_mem, &ix->hosts,
                    &ix->host_gmask, &ix->hkeys))
        return false;
    for (uint32_t i = 0; i < b->node_count; i++)
        host_put(b, L->up, L->key, L->kids, i, ix->hosts, ix->host_gmask,
                 ix->hkeys, &used, ix->cands, &ix->hfilt);
    ix->hkeys_used = used;
    if (ix->hosts)
        ix->bytes += host_table_bytes(ix->host_gmask) + used;
    return true;
}

/* The live nodes, depth first, into the index's arrays. */
static bool build_layout(oneshot *o) {
    builder *b = &o->b;
    layout *L = &o->L;
    for (uint32_t i = 0; i < b->node_count; i++)
        sy__ix_layout_count(b, L, i);
    if (!sy__ix_layout_alloc(o->a, L, true))
        return false;
    for (uint32_t i = 0; i < b->node_count; i++)
        sy__ix_layout_place(b, L, i);
    sy__ix_layout_order(b, L, SIZE_MAX);
    L->cands = o->ix->cands;
    for (uint32_t j = 0; j < L->count; j++)
        sy__ix_layout_node(b, L, j);
    for (uint32_t j = 0; j < L->count; j++)
        if (!sy__ix_layout_hash(b, L, j))
            return false;
    sy__ix_layout_give(L, o->ix);
    return true;
}

/* The build's temporaries, whatever the outcome. */
static void build_done(oneshot *o) {
    const sy__alloc *a = o->a;
    sy__ix_layout_done(a, &o->L);
    tmp_put(o, o->slot_pos);
    tmp_put(o, o->placement);
    tmp_put(o, o->pcost);
    sy__ix_builder_free(&o->b); /* the edge table with them */
    sy__free(a, o->routes_own);
    sy__free(a, o->info);
}

int sy__index_build(const sy__alloc *a, const sy__index_route *routes_in,
                    size_t n, sy__index **out) {
    *out = NULL;
    oneshot o = {.a = a, .n = n, .b = {.a = a}};
    sy__buf_init(&o.b.strings, a);
    bool ok = build_start(&o, routes_in) && build_insert(&o) &&
              build_place(&o) && flatten(&o) && build_prune(&o) &&
              build_hosts(&o) && build_layout(&o);
    sy__index *ix = o.ix;
    if (ok) {
        ix->built_nodes = o.b.node_count;
        ix->vars = o.b.vars;
        o.b.vars = NULL;
        ix->bytes += sizeof *ix + (size_t)o.b.var_cap * sizeof *ix->vars;
        *out = ix;
    } else if (ix) {
        sy__free(a, ix->cands);
        sy__free(a, ix->cslots);
        sy__free(a, ix->hosts_mem);
        sy__free(a, ix->hkeys);
        sy__free(a, ix);
    }
    build_done(&o);
    return ok ? SY_OK : SY_ENOMEM;
}
