/*
 * index_int.h - the index's internal layout and build state, shared by
 * the one-shot build (index.c) and the stepwise build (index_step.c).
 * index.c's header comment draws the structures.
 */
#ifndef SY_INDEX_INT_H
#define SY_INDEX_INT_H

#include "index.h"
#include "predicate.h"

#define NONE SY_NONE /* short local name */
#define ROOT_PATH 0u
#define ROOT_HOST 1u
#define GENERIC_LISTS 11 /* 9 standard methods, "other", any */
#define GENERIC_OTHER 9
#define GENERIC_ANY 10

#define KEY_BYTES 16

/*
 * A segment as the edges compare it: two words that determine its first
 * KEY_BYTES bytes given its length (segment_key), its length and a 16-bit
 * tag from its hash. A segment of up to 16 bytes is compared with three
 * integer compares in the edge's own cache line, no call, no string pool;
 * a longer one compares its tail in the pool.
 */
typedef struct seg_key {
    uint64_t w0, w1;
    uint64_t hash;    /* of the segment alone; combined with the parent */
    uint32_t len_tag; /* length | tag << 16 */
} seg_key;

/* 32 bytes. */
typedef struct edge {
    uint64_t w0, w1;
    uint32_t parent;
    uint32_t child; /* NONE: empty */
    uint32_t str_off;
    uint32_t len_tag;
} edge;

typedef struct list_ref {
    uint32_t off;
    uint32_t len;
} list_ref;

/* wild: the one-segment wildcard child (WILD_NONE: none), and LIT_KIDS
 * when the node has literal children in the edge table: a walk probes the
 * table only at nodes that have some. After pruning, ONE_LIT (with
 * LIT_KIDS) says the node has one live literal child and no wildcard one:
 * the low bits are then that child's edge table slot, compared directly
 * (no hash, no probe). */
#define WILD_MASK 0x3fffffffu
#define WILD_NONE WILD_MASK
#define ONE_LIT 0x40000000u
#define LIT_KIDS 0x80000000u

typedef struct inode {
    uint32_t wild;
    list_ref term;
    list_ref multi;
} inode;

struct sy_index {
    _Atomic long refs;
    const sy_alloc *alloc;
    inode *nodes;
    uint32_t node_count;
    edge *edges; /* capacity edge_mask + 1; child == NONE means empty */
    uint32_t edge_mask;
    char *strings;
    sy_cand *cands; /* every list, flattened */
    sy_cand_var *vars;
    list_ref generic[GENERIC_LISTS];
    size_t host_routes; /* routes placed in the host trie */
    size_t bytes;
};

/* ---- build state ---- */

enum { L_TERM = 0, L_MULTI = 1 };

typedef struct pending {
    uint32_t node; /* node, or NONE-1-g for generic list g */
    uint32_t kind;
    uint32_t slot;
    uint32_t dim; /* 0 path, 1 host, 2 generic */
} pending;

/* What a route's candidate entries carry, computed once per route. */
typedef struct rinfo {
    uint32_t methods;
    uint32_t vars[2]; /* per trie: offset in the var pool */
    uint16_t nvars[2];
    uint8_t pred[2];  /* the predicate the walk proves */
    uint8_t flags[2]; /* SY_CAND_WALK, SY_CAND_WHOLE */
} rinfo;

typedef struct builder {
    const sy_alloc *a;
    sy_cand_var *vars;
    uint32_t var_count, var_cap;
    inode *nodes;
    uint32_t node_count, node_cap;
    edge *edges;
    uint32_t edge_mask, edge_count;
    sy_buf strings;
    pending *pend;
    size_t pend_count, pend_cap;
    uint32_t *list_len; /* per (node, kind) during counting */
    bool failed;
} builder;

/* Build steps shared with index_step.c (index.c). */
uint32_t new_node(builder *b);
void add_pending(builder *b, uint32_t node, uint32_t kind, uint32_t slot,
                 uint32_t dim);
void insert_patterns(builder *b, const sy_pred *pred, uint32_t root,
                     uint32_t slot, uint32_t dim);
const sy_pred *find_pred(const struct sy_route *r, sy_pred_kind kind);
rinfo route_info(builder *b, const struct sy_route *r);

/*
 * Pruning, after the lists are placed (both builds): a branch of a trie
 * whose subtree holds no list (every route under it was placed in the
 * other trie) is cut off, so a walk never enters it, and a node left with
 * one live literal child and no wildcard one gets ONE_LIT. up[n] = parent
 * << 1 | (n is a literal child) and eslot[n] = n's edge slot, filled by
 * prune_up_edge for each edge table entry and prune_up_wild for each node;
 * then prune_node for every node from the last to the first (a child is
 * always numbered after its parent), with kids[] zeroed: it clears
 * LIT_KIDS and the wildcard child of a node whose literal (wildcard)
 * children are all dead. one[] needs no initialisation.
 */
enum { KID_LIT = 1, KID_WILD = 2, KID_LIT2 = 4 };
static inline void prune_up_edge(const builder *b, uint32_t *up,
                                 uint32_t *eslot, size_t i) {
    const edge *e = &b->edges[i];
    if (e->child != NONE) {
        up[e->child] = e->parent << 1 | 1u;
        eslot[e->child] = (uint32_t)i;
    }
}
static inline void prune_up_wild(const builder *b, uint32_t *up, uint32_t n) {
    uint32_t w = b->nodes[n].wild & WILD_MASK;
    if (w != WILD_NONE)
        up[w] = n << 1;
}
static inline void prune_node(builder *b, const uint32_t *up,
                              const uint32_t *eslot, uint32_t *one,
                              uint8_t *kids, uint32_t n) {
    inode *nd = &b->nodes[n];
    uint8_t k = kids[n];
    if (!(k & KID_LIT))
        nd->wild &= ~LIT_KIDS;
    if (!(k & KID_WILD))
        nd->wild = (nd->wild & LIT_KIDS) | WILD_NONE;
    if (k == KID_LIT && b->edge_mask < WILD_MASK)
        nd->wild = LIT_KIDS | ONE_LIT | one[n];
    bool live = k || nd->term.len || nd->multi.len;
    if (!live || n <= ROOT_HOST)
        return;
    uint32_t p = up[n] >> 1;
    if (!(up[n] & 1u)) {
        kids[p] |= KID_WILD;
    } else if (kids[p] & KID_LIT) {
        kids[p] |= KID_LIT2;
    } else {
        kids[p] |= KID_LIT;
        one[p] = eslot[n];
    }
}

/* The candidate entry of pending entry `p` of the route described by
 * `ri`: what the walk proves travels with it only in the trie (path or
 * host) that proves it. */
static inline sy_cand cand_of(const pending *p, const rinfo *ri) {
    int d = p->dim < 2 ? (int)p->dim : 0;
    bool walk = p->dim < 2 && ri->flags[d];
    return (sy_cand){p->slot,
                     ri->methods,
                     walk ? ri->vars[d] : 0,
                     walk ? ri->nvars[d] : 0,
                     walk ? ri->flags[d] : 0,
                     walk ? ri->pred[d] : 0};
}

#endif
