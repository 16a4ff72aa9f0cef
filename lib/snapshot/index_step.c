/*
 * index_step.c - the index built a bounded amount of work at a time
 * (index.h, sy__index_step_*): the same structure sy__index_build makes, in
 * resumable passes, so a snapshot can spread a full rebuild over many
 * publishes (snapshot_build.c) instead of stalling one of them.
 *
 *   add(r1) add(r2) ... add(rn)          one route's patterns per call
 *   run(budget) run(budget) ... -> ix    each call: <= budget items of
 *                                        count | cost | place | lists |
 *                                        prefix sums | fill | nodes
 *
 * Every pass is a loop over an array (pending entries, routes, lists,
 * nodes) with a cursor kept in the builder, so a call stops after
 * `budget` items and the next one resumes where it stopped.
 */
#include "snapshot/index_int.h"

enum {
    PH_ALLOC,  /* per-route and per-list arrays */
    PH_INIT,   /* routes: no cost, generic placement */
    PH_COUNT,  /* pending: list lengths */
    PH_COST,   /* pending: each route's longest list per trie */
    PH_PLACE,  /* routes: path or host trie */
    PH_LISTS,  /* pending: list of each kept entry, list sizes */
    PH_SUM,    /* lists: prefix sums */
    PH_CANDS,  /* the candidate pool, fill cursors */
    PH_COPY,   /* lists: fill cursors = starts */
    PH_FILL,   /* pending: candidates into their lists */
    PH_NODES,  /* nodes: their list refs */
    PH_PRUNE,  /* nodes, last first: cut branches without lists */
    PH_HMARK,  /* nodes: whole-host keys, their count and text length */
    PH_HZERO,  /* the whole-host table, a group per item (its pages faulted
                  in order, not by the random writes of HPUT) */
    PH_HPUT,   /* nodes: keys into the whole-host table */
    PH_LCOUNT, /* nodes: children's ranges, the layout's sizes */
    PH_LZERO,  /* the child table, a line per item */
    PH_LPLACE, /* nodes: into their parents' ranges */
    PH_LORDER, /* the depth-first numbering, until it is done */
    PH_LNODE,  /* new nodes: filled */
    PH_LHASH,  /* new nodes: the child table */
    PH_DROP,   /* the build's big arrays, one per call */
    PH_FINISH, /* generic lists, the index */
    PH_DONE
};

struct sy__index_step {
    builder b;
    sy__index_route *routes; /* in the order added (ascending keys) */
    rinfo *info;
    size_t n, cap;
    int phase;
    size_t cur;  /* the current pass's cursor */
    size_t r;    /* PH_COST: route position of pending entry `cur` */
    size_t work; /* items done by run */
    size_t host_routes;
    uint8_t *placement;
    uint32_t *pcost, *slot_pos, *start, *fill;
    layout L;      /* pruning, the whole-host flags, the layout */
    hgroup *hosts; /* the whole-host table being filled */
    void *hosts_mem;
    uint32_t host_gmask;
    char *hkeys;
    size_t hcount, hbytes, hused;
    hfilter hfilt;
    size_t nlists, kept;
    list_ref generic[GENERIC_LISTS]; /* kept for finish: start and fill go
                                        before it */
    sy__cand *cands;
    uint32_t *cslots;
    size_t drop_len; /* the array drop_one is shrinking: its size now */
    edge *big;       /* a reserved edge table being emptied (prepare) */
    uint32_t big_mask;
    size_t big_done;
};

sy__index_step *sy__index_step_new(const sy__alloc *a) {
    sy__index_step *st = sy__calloc(a, 1, sizeof *st);
    if (!st)
        return NULL;
    st->b.a = a;
    sy__buf_init(&st->b.strings, a);
    st->b.edge_mask = 63;
    st->b.edges = sy__malloc(a, 64 * sizeof *st->b.edges);
    if (!st->b.edges) {
        sy__index_step_free(st);
        return NULL;
    }
    for (uint32_t i = 0; i < 64; i++)
        st->b.edges[i].child = NONE;
    sy__ix_new_node(&st->b); /* ROOT_PATH */
    sy__ix_new_node(&st->b); /* ROOT_HOST */
    if (st->b.failed) {
        sy__index_step_free(st);
        return NULL;
    }
    return st;
}

void sy__index_step_free(sy__index_step *st) {
    if (!st)
        return;
    const sy__alloc *a = st->b.a;
    sy__ix_builder_free(&st->b);
    sy__free(a, st->routes);
    sy__free(a, st->info);
    sy__free(a, st->placement);
    sy__free(a, st->pcost);
    sy__free(a, st->slot_pos);
    sy__free(a, st->start);
    sy__free(a, st->fill);
    sy__free(a, st->cands);
    sy__free(a, st->cslots);
    sy__free(a, st->big);
    sy__ix_layout_done(a, &st->L);
    sy__free(a, st->hosts_mem);
    sy__free(a, st->hkeys);
    sy__free(a, st);
}

/* Room for `routes` routes shaped like those of `like` (NULL: none), so
 * that adding them rarely grows an array: a growth copies the array, and
 * a grown edge table rehashes every edge, which would be one long step. */
int sy__index_step_reserve(sy__index_step *st, const sy__index *like,
                           size_t routes) {
    builder *b = &st->b;
    const sy__alloc *a = b->a;
    size_t r = routes + routes / 8 + 64;
    size_t nodes = (like ? like->built_nodes : 2 * routes) + r / 4 + 64;
    uint32_t edges = 64;
    while (edges < UINT32_MAX / 4 && (size_t)edges * 3 < nodes * 4)
        edges *= 2;
    sy__index_route *nr = sy__realloc(a, st->routes, r * sizeof *nr);
    if (nr)
        st->routes = nr;
    rinfo *ni = nr ? sy__realloc(a, st->info, r * sizeof *ni) : NULL;
    if (ni)
        st->info = ni;
    pending *np = ni ? sy__realloc(a, b->pend, r * sizeof *np) : NULL;
    if (np)
        b->pend = np;
    bool nn = np && sy__ix_nodes_reserve(b, nodes);
    sy__cand_var *nv = nn ? sy__realloc(a, b->vars, r * sizeof *nv) : NULL;
    if (nv)
        b->vars = nv;
    edge *ne = nv && edges > b->edge_mask + 1 && b->edge_count == 0
                   ? sy__malloc(a, (size_t)edges * sizeof *ne)
                   : NULL;
    if (!nv || !sy__buf_reserve(&b->strings, nodes * 12)) {
        sy__free(a, ne); /* the arrays above are kept by st, freed with it */
        return SY_ENOMEM;
    }
    st->cap = r;
    b->pend_cap = r;
    b->var_cap = (uint32_t)r;
    if (ne) { /* emptied by sy__index_step_prepare, a share at a time */
        st->big = ne;
        st->big_mask = edges - 1;
        st->big_done = 0;
    }
    return SY_OK;
}

int sy__index_step_prepare(sy__index_step *st, size_t budget) {
    if (!st->big)
        return 1;
    size_t cap = (size_t)st->big_mask + 1;
    while (st->big_done < cap && budget--) {
        st->big[st->big_done++].child = NONE;
        st->work++;
    }
    if (st->big_done < cap)
        return 0;
    sy__free(st->b.a, st->b.edges); /* empty: nothing added yet */
    st->b.edges = st->big;
    st->b.edge_mask = st->big_mask;
    st->big = NULL;
    return 1;
}

size_t sy__index_step_work(const sy__index_step *st) {
    return st->work;
}

int sy__index_step_add(sy__index_step *st, const sy__index_route *r) {
    builder *b = &st->b;
    if (st->phase != PH_ALLOC || b->failed || st->big)
        return SY_EINVAL;
    if (st->n == st->cap) {
        size_t cap = st->cap, icap = st->cap; /* both grow alike */
        sy__index_route *nr =
            sy__grow(b->a, st->routes, &cap, st->n + 1, 256, sizeof *nr);
        if (nr)
            st->routes = nr;
        rinfo *ni =
            nr ? sy__grow(b->a, st->info, &icap, st->n + 1, 256, sizeof *ni)
               : NULL;
        if (!ni)
            return SY_ENOMEM;
        st->info = ni;
        st->cap = cap;
    }
    st->routes[st->n] = *r;
    memset(&st->info[st->n], 0, sizeof st->info[st->n]);
    const struct sy_route *rt = r->route;
    if (!rt->disabled) {
        size_t pend0 = b->pend_count;
        st->info[st->n] = sy__ix_route_info(b, rt);
        const sy__pred *path = sy__ix_find_pred(rt, SY_PK_PATH);
        const sy__pred *host = sy__ix_find_pred(rt, SY_PK_HOST);
        sy__ix_insert_patterns(b, path, ROOT_PATH, r->slot, 0);
        sy__ix_insert_patterns(b, host, ROOT_HOST, r->slot, 1);
        if (!path && !host)
            sy__ix_add_pending(b, GENERIC_ANY, 0, r->slot, 2);
        if (b->failed) {
            b->pend_count = pend0; /* the route is not in */
            return SY_ENOMEM;
        }
    }
    st->n++;
    return SY_OK;
}

/* One pass over [cur, end): `body` per item, at most *left items. Returns
 * true when the pass is complete. */
#define PASS(st, end, left, ...)                                               \
    do {                                                                       \
        size_t end_ = (end);                                                   \
        while ((st)->cur<end_ &&*(left)> 0) {                                  \
            size_t i = (st)->cur;                                              \
            __VA_ARGS__;                                                       \
            (st)->cur++;                                                       \
            (*(left))--;                                                       \
            (st)->work++;                                                      \
        }                                                                      \
        if ((st)->cur < end_)                                                  \
            return 0;                                                          \
        (st)->cur = 0;                                                         \
    } while (0)

static void next_phase(sy__index_step *st) {
    st->phase++;
    st->cur = 0;
}

static int finish(sy__index_step *st, sy__index **out) {
    builder *b = &st->b;
    const sy__alloc *a = b->a;
    sy__index *ix = sy__calloc(a, 1, sizeof *ix);
    if (!ix)
        return SY_ENOMEM;
    ix->alloc = a;
    atomic_init(&ix->refs, 1);
    for (size_t g = 0; g < GENERIC_LISTS; g++) {
        ix->generic[g] = st->generic[g];
        if (ix->generic[g].len)
            ix->generic_some |= 1u << g;
    }
    ix->cands = st->cands;
    ix->cslots = st->cslots;
    ix->ncands = (uint32_t)st->kept;
    st->cands = NULL;
    st->cslots = NULL;
    ix->host_routes = st->host_routes;
    ix->built_nodes = b->node_count;
    ix->vars = b->vars;
    ix->hosts = st->hosts;
    ix->hosts_mem = st->hosts_mem;
    ix->host_gmask = st->host_gmask;
    ix->hkeys = st->hkeys;
    ix->hkeys_used = st->hused;
    ix->hfilt = st->hfilt;
    st->hosts = NULL;
    st->hosts_mem = NULL;
    st->hkeys = NULL;
    ix->bytes = st->kept * (sizeof *ix->cands + sizeof *ix->cslots) +
                sizeof *ix + (size_t)b->var_cap * sizeof *b->vars;
    if (ix->hosts)
        ix->bytes += host_table_bytes(ix->host_gmask) + st->hused;
    sy__ix_layout_give(&st->L, ix);
    sy__ix_layout_done(a, &st->L);
    b->vars = NULL;
    *out = ix;
    return SY_OK;
}

/* One of the build's arrays freed or shrunk (true), or none left: a
 * large one freed at once is a long step of its own (munmap of 16 MB of
 * edges: ~0.8 ms), so a large build frees one per call, and with the
 * default allocator, whose large blocks are mappings that a shrinking
 * realloc trims in place (mremap), gives back a large one DROP_STEP
 * bytes per call. Unmapping costs by the page (on this project's VM ~10
 * us a call and ~0.07 us a KB of resident pages; a share's slice that
 * gave back 512 KB took 65 us median, 125 us p90, up to 0.9 ms at 1M
 * routes): a share gives back 128 KB at a time, as many times as its
 * time allows (snapshot_build.c), so the slice that overruns its budget
 * overruns it by less. */
#define DROP_STEP ((size_t)128 << 10)

/* p, a mapping of the default allocator, cut to `to` bytes, or given
 * back whole when `to` is 0 (sy__alloc_cut: a block of 2 MB or less is
 * cut too, which realloc would keep whole, and a whole one is unmapped,
 * never kept, so it pushes no kept block out); false when p is no such
 * mapping. */
static bool cut(bool maps, void *p, size_t to) {
    return maps && sy__alloc_cut(p, to);
}

static bool drop_one(sy__index_step *st) {
    builder *b = &st->b;
    layout *L = &st->L;
    struct {
        void **p;
        size_t bytes; /* known size, 0: its mapping's, if any */
    } parts[] = {
        {(void **)&b->edges, ((size_t)b->edge_mask + 1) * sizeof(edge)},
        {(void **)&b->nodes, (size_t)b->node_cap * sizeof(inode)},
        {(void **)&L->key, (size_t)b->node_cap * sizeof(lkey)},
        {(void **)&b->strings.ptr, 0},
        {(void **)&b->pend, 0},
        {(void **)&b->list_len, 0},
        {(void **)&st->routes, 0},
        {(void **)&st->info, 0},
        {(void **)&st->pcost, 0},
        {(void **)&st->slot_pos, 0},
        {(void **)&st->placement, 0},
        {(void **)&L->up, 0},
        {(void **)&L->live, 0},
        {(void **)&L->kids, 0},
        {(void **)&L->cstart, 0},
        {(void **)&L->clist, 0},
        {(void **)&L->order, 0},
        {(void **)&L->stack, 0},
        {(void **)&st->start, 0},
        {(void **)&st->fill, 0}};
    bool maps = sy__alloc_default_shared(b->a) && sy__alloc_maps_large();
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (!*parts[i].p)
            continue;
        /* a part of no known size: its mapping's, when it is one */
        size_t cur = st->drop_len     ? st->drop_len
                     : parts[i].bytes ? parts[i].bytes
                     : maps           ? sy__alloc_mapped_len(*parts[i].p)
                                      : 0;
        if (cur >= 2 * DROP_STEP && cut(maps, *parts[i].p, cur - DROP_STEP)) {
            st->drop_len = cur - DROP_STEP;
            return true;
        }
        if (!cut(maps, *parts[i].p, 0))
            sy__free(b->a, *parts[i].p);
        *parts[i].p = NULL;
        st->drop_len = 0;
        return true;
    }
    return false;
}

/* ---- the passes of sy__index_build after insertion (index.c), each
 * resumable: 1 done, 0 to be continued (budget spent), < 0 an error ---- */

/* Per-route and per-list arrays. */
static int ph_alloc(sy__index_step *st) {
    builder *b = &st->b;
    const sy__alloc *a = b->a;
    size_t n = st->n;
    b->list_len = sy__calloc(a, (size_t)b->node_count * 2, sizeof *b->list_len);
    st->slot_pos = sy__malloc(a, (b->pend_count ? b->pend_count : 1) *
                                     sizeof *st->slot_pos);
    st->placement = sy__malloc(a, n ? n : 1);
    st->pcost = sy__malloc(a, (n ? n : 1) * 2 * sizeof *st->pcost);
    if (!b->list_len || !st->slot_pos || !st->placement || !st->pcost)
        return SY_ENOMEM;
    return 1;
}

/* Routes: no cost yet, generic placement. */
static int ph_init(sy__index_step *st, size_t *left) {
    PASS(st, st->n, left, {
        st->pcost[i * 2] = st->pcost[i * 2 + 1] = 0;
        st->placement[i] = 2;
    });
    return 1;
}

/* Pending entries: list lengths. */
static int ph_count(sy__index_step *st, size_t *left) {
    builder *b = &st->b;
    PASS(st, b->pend_count, left, {
        if (b->pend[i].dim != 2)
            b->list_len[b->pend[i].node * 2 + b->pend[i].kind]++;
    });
    st->r = 0;
    return 1;
}

/* Pending entries: each route's longest list per trie (routes are in
 * key order, pending entries in the order added: st->r follows). */
static int ph_cost(sy__index_step *st, size_t *left) {
    builder *b = &st->b;
    PASS(st, b->pend_count, left, {
        while (st->routes[st->r].slot != b->pend[i].slot)
            st->r++;
        st->slot_pos[i] = (uint32_t)st->r;
        if (b->pend[i].dim != 2) {
            uint32_t len = b->list_len[b->pend[i].node * 2 + b->pend[i].kind];
            uint32_t *c = &st->pcost[st->r * 2 + b->pend[i].dim];
            if (len + 1 > *c)
                *c = len + 1;
        }
    });
    return 1;
}

/* Routes: the path trie unless the host trie is more selective; then the
 * list starts for the next pass. */
static int ph_place(sy__index_step *st, size_t *left) {
    builder *b = &st->b;
    PASS(st, st->n, left, {
        uint32_t pc = st->pcost[i * 2], hc = st->pcost[i * 2 + 1];
        if (pc && (!hc || pc <= hc)) {
            st->placement[i] = 0;
        } else if (hc) {
            st->placement[i] = 1;
            st->host_routes++;
        }
    });
    st->nlists = (size_t)b->node_count * 2 + GENERIC_LISTS;
    st->start = sy__calloc(b->a, st->nlists + 1, sizeof *st->start);
    return st->start ? 1 : SY_ENOMEM;
}

/* Pending entries: the list of each kept one, the lists' sizes. */
static int ph_lists(sy__index_step *st, size_t *left) {
    builder *b = &st->b;
    PASS(st, b->pend_count, left, {
        pending *p = &b->pend[i];
        if (p->dim != st->placement[st->slot_pos[i]]) {
            p->kind = NONE; /* placed in the other dimension */
        } else {
            size_t li = p->dim == 2 ? (size_t)b->node_count * 2 + p->node
                                    : (size_t)p->node * 2 + p->kind;
            p->node = (uint32_t)li;
            st->start[li + 1]++;
            st->kept++;
        }
    });
    return 1;
}

/* Lists: prefix sums. */
static int ph_sum(sy__index_step *st, size_t *left) {
    PASS(st, st->nlists, left, st->start[i + 1] += st->start[i]);
    return 1;
}

/* The candidate pool and the fill cursors. */
static int ph_cands(sy__index_step *st) {
    const sy__alloc *a = st->b.a;
    st->cands = sy__malloc(a, (st->kept ? st->kept : 1) * sizeof *st->cands);
    st->cslots = sy__malloc(a, (st->kept ? st->kept : 1) * sizeof *st->cslots);
    st->fill = sy__malloc(a, st->nlists * sizeof *st->fill);
    return st->cands && st->cslots && st->fill ? 1 : SY_ENOMEM;
}

/* Lists: fill cursors = starts. */
static int ph_copy(sy__index_step *st, size_t *left) {
    PASS(st, st->nlists, left, st->fill[i] = st->start[i]);
    return 1;
}

/* Pending entries: candidates into their lists. */
static int ph_fill(sy__index_step *st, size_t *left) {
    builder *b = &st->b;
    PASS(st, b->pend_count, left, {
        pending *p = &b->pend[i];
        uint32_t *pos = p->kind != NONE ? &st->fill[p->node] : NULL;
        /* a route with several patterns landing on one list: one */
        if (pos &&
            !(*pos > st->start[p->node] && st->cslots[*pos - 1] == p->slot)) {
            st->cslots[*pos] = p->slot;
            st->cands[(*pos)++] = cand_of(p, &st->info[st->slot_pos[i]]);
        }
    });
    return 1;
}

/* Nodes: their list refs; the generic lists kept for finish; then the
 * pruning's arrays. */
static int ph_nodes(sy__index_step *st, size_t *left) {
    builder *b = &st->b;
    const uint32_t *s0 = st->start, *f = st->fill;
    PASS(st, b->node_count, left, {
        b->nodes[i].term = (list_ref){s0[i * 2], f[i * 2] - s0[i * 2]};
        b->nodes[i].multi =
            (list_ref){s0[i * 2 + 1], f[i * 2 + 1] - s0[i * 2 + 1]};
    });
    for (size_t g = 0; g < GENERIC_LISTS; g++) {
        size_t li = (size_t)b->node_count * 2 + g;
        st->generic[g] = (list_ref){s0[li], f[li] - s0[li]};
    }
    return sy__ix_layout_start(b, &st->L) ? 1 : SY_ENOMEM;
}

/* Nodes, last first: cut the branches without lists. */
static int ph_prune(sy__index_step *st, size_t *left) {
    builder *b = &st->b;
    PASS(st, b->node_count, left,
         prune_node(b, st->L.up, st->L.live, st->L.kids,
                    b->node_count - 1 - (uint32_t)i));
    return 1;
}

/* Nodes: whole-host keys, their count and text length; then the table
 * (not zeroed: ph_host_zero does it in order). */
static int ph_host_mark(sy__index_step *st, size_t *left) {
    builder *b = &st->b;
    PASS(st, b->node_count, left, {
        st->hbytes += host_mark(b, st->L.up, st->L.key, st->cands, st->L.kids,
                                (uint32_t)i, &st->hcount);
    });
    return host_alloc(b->a, st->hcount, st->hbytes, false, &st->hosts_mem,
                      &st->hosts, &st->host_gmask, &st->hkeys)
               ? 1
               : SY_ENOMEM;
}

/* The whole-host table, a group per item. */
static int ph_host_zero(sy__index_step *st, size_t *left) {
    PASS(st, st->hosts ? (size_t)st->host_gmask + 1 : 0, left,
         host_zero_group(st->hosts, i));
    return 1;
}

/* Nodes: keys into the whole-host table. */
static int ph_host_put(sy__index_step *st, size_t *left) {
    PASS(st, st->b.node_count, left,
         host_put(&st->b, st->L.up, st->L.key, st->L.kids, (uint32_t)i,
                  st->hosts, st->host_gmask, st->hkeys, &st->hused, st->cands,
                  &st->hfilt));
    return 1;
}

/* Nodes: children's ranges, the layout's sizes; then its arrays (the
 * child table not zeroed: ph_layout_zero does it in order). */
static int ph_layout_count(sy__index_step *st, size_t *left) {
    PASS(st, st->b.node_count, left,
         sy__ix_layout_count(&st->b, &st->L, (uint32_t)i));
    return sy__ix_layout_alloc(st->b.a, &st->L, false) ? 1 : SY_ENOMEM;
}

/* The child tables' line i (the path trie's, then the host trie's). */
static void zero_slots(layout *L, size_t i) {
    size_t n0 = L->slots[0] ? (size_t)L->slot_count[0] / 8 : 0;
    xslot *s = i < n0 ? &L->slots[0][i * 8] : &L->slots[1][(i - n0) * 8];
    memset(s, 0, 8 * sizeof *s);
}

/* The child tables, a line per item. */
static int ph_layout_zero(sy__index_step *st, size_t *left) {
    const layout *L = &st->L;
    PASS(st,
         (L->slots[0] ? (size_t)L->slot_count[0] / 8 : 0) +
             (L->slots[1] ? (size_t)L->slot_count[1] / 8 : 0),
         left, zero_slots(&st->L, i));
    return 1;
}

/* Nodes: into their parents' ranges. */
static int ph_layout_place(sy__index_step *st, size_t *left) {
    PASS(st, st->b.node_count, left,
         sy__ix_layout_place(&st->b, &st->L, (uint32_t)i));
    return 1;
}

/* The depth-first numbering, until it is done. */
static int ph_layout_order(sy__index_step *st, size_t *left) {
    size_t did = sy__ix_layout_order(&st->b, &st->L, *left);
    *left -= did;
    st->work += did;
    return st->L.sp ? 0 : 1;
}

/* New nodes: filled. */
static int ph_layout_node(sy__index_step *st, size_t *left) {
    st->L.cands = st->cands;
    PASS(st, st->L.count, left,
         sy__ix_layout_node(&st->b, &st->L, (uint32_t)i));
    return 1;
}

/* New nodes: the child table. */
static int ph_layout_hash(sy__index_step *st, size_t *left) {
    PASS(
        st, st->L.count, left,
        if (!sy__ix_layout_hash(&st->b, &st->L, (uint32_t)i)) return SY_ENOMEM);
    return 1;
}

/* The build's big arrays: all at once for a small build, else one share
 * per call (the rest of the call's budget). */
static int ph_drop(sy__index_step *st, size_t *left) {
    if (st->b.node_count + st->n < 32768) {
        while (drop_one(st))
            ;
    } else if (drop_one(st)) {
        st->work += *left;
        *left = 0;
        return 0;
    }
    return 1;
}

static int run_phase(sy__index_step *st, size_t *left) {
    switch (st->phase) {
    case PH_ALLOC: return ph_alloc(st);
    case PH_INIT: return ph_init(st, left);
    case PH_COUNT: return ph_count(st, left);
    case PH_COST: return ph_cost(st, left);
    case PH_PLACE: return ph_place(st, left);
    case PH_LISTS: return ph_lists(st, left);
    case PH_SUM: return ph_sum(st, left);
    case PH_CANDS: return ph_cands(st);
    case PH_COPY: return ph_copy(st, left);
    case PH_FILL: return ph_fill(st, left);
    case PH_NODES: return ph_nodes(st, left);
    case PH_PRUNE: return ph_prune(st, left);
    case PH_HMARK: return ph_host_mark(st, left);
    case PH_HZERO: return ph_host_zero(st, left);
    case PH_HPUT: return ph_host_put(st, left);
    case PH_LCOUNT: return ph_layout_count(st, left);
    case PH_LZERO: return ph_layout_zero(st, left);
    case PH_LPLACE: return ph_layout_place(st, left);
    case PH_LORDER: return ph_layout_order(st, left);
    case PH_LNODE: return ph_layout_node(st, left);
    case PH_LHASH: return ph_layout_hash(st, left);
    case PH_DROP: return ph_drop(st, left);
    default: return SY_EINVAL;
    }
}

/* The passes in order, as far as the budget goes; then the index. */
static int step(sy__index_step *st, size_t *left, sy__index **out) {
    while (st->phase < PH_FINISH) {
        int rc = run_phase(st, left);
        if (rc <= 0)
            return rc;
        next_phase(st);
    }
    if (st->phase != PH_FINISH)
        return SY_EINVAL;
    int rc = finish(st, out);
    if (rc)
        return rc;
    st->phase = PH_DONE;
    return 1;
}

int sy__index_step_run(sy__index_step *st, size_t budget, sy__index **out) {
    *out = NULL;
    if (st->b.failed)
        return SY_ENOMEM;
    if (st->phase == PH_DONE)
        return SY_EINVAL;
    size_t left = budget ? budget : 1;
    int rc = step(st, &left, out);
    if (rc < 0)
        st->b.failed = true; /* a failed pass cannot resume */
    return rc;
}

int sy__index_free_step(sy__index *ix) {
    if (atomic_load_explicit(&ix->refs, memory_order_acquire) != 1)
        return -1; /* another holder would free it all at once */
    void **parts[] = {(void **)&ix->hosts_mem, (void **)&ix->hkeys,
                      (void **)&ix->cands,     (void **)&ix->cslots,
                      (void **)&ix->vars,      (void **)&ix->strings,
                      (void **)&ix->slots,     (void **)&ix->hslots,
                      (void **)&ix->side,      (void **)&ix->nodes_mem};
    /* a large mapped part shrinks DROP_STEP a call, as drop_one does: a
     * 74 MB node array of a 1,000,000-route index unmapped at once is a
     * publish of several ms (the trash calls this within a time budget,
     * snapshot_build.c) */
    bool maps = sy__alloc_default_shared(ix->alloc) && sy__alloc_maps_large();
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (*parts[i]) {
            size_t len = maps ? sy__alloc_mapped_len(*parts[i]) : 0;
            if (len >= 2 * DROP_STEP && cut(maps, *parts[i], len - DROP_STEP))
                return 0;
            if (!cut(maps, *parts[i], 0))
                sy__free(ix->alloc, *parts[i]);
            *parts[i] = NULL;
            return 0;
        }
    return 1;
}
