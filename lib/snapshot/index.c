/*
 * index.c - the route index of a snapshot (see index.h).
 *
 * Two segment tries share one node array and one edge hash table:
 *
 *   node 0: path trie root        node 1: host trie root (labels reversed)
 *
 *      [0] --"repos"--> [7] --*--> [9] --*--> [12] --"events"--> [15]
 *       |                                                          term: {gh8}
 *       +--"users"--> [3] --*--> [5]                               multi: {}
 *                                  multi: {p42}   (pattern users/{u}/ then **)
 *
 *   edges: open-addressing table keyed by (parent node, literal segment),
 *          the segment's text in the build's strings:
 *          [ parent | child | str_off | len|tag ]  (16 bytes)
 *   node:  wild word, term list (patterns that end here), multi list
 *          (patterns whose ** / {*x} starts here):
 *
 *            bit 31  30  29 .. 0
 *             [ L | O | wild child, or with O the lone child's edge slot ]
 *
 *          L (LIT_KIDS): live literal children (else a walk neither
 *          hashes nor probes there); O (ONE_LIT, with L): exactly one live
 *          literal child and no wildcard one, its edge at that slot,
 *          compared directly:
 *
 *            [5] L|O|slot 812 ----> edges[812] = "events" -> [15]
 *            (no hash of "events", no probe: one compare of two words)
 *
 *          Set after placement by pruning (index_int.h): branches whose
 *          subtree holds no list (routes placed in the other trie) lose
 *          their L / wild, so a walk never enters them
 *   hosts: the whole-host table (index_int.h): a host-trie node reached
 *          by literal edges only, past no wildcard child and no multi
 *          list, is a key "h42.example.com" -> its term list; the matcher
 *          probes it with the unsplit host and splits the labels and
 *          walks only on a miss (sy__index_host_exact)
 *   lists: candidates sorted by rank key, flattened into one pool:
 *          [ route | vars | methods, pred | flags | nvars ]
 *          (16 bytes) so a candidate refused by its method, or proven
 *          whole by the walk (SY_CAND_WHOLE, captures from the var pool
 *          or, a lone {var}, the candidate), is decided without reading
 *          its route, and its route is known without reading its slot
 *          (its predicates too: the pointer's top bits, index_cand.h);
 *          the slots in an array of their own beside them (cslots),
 *          read only off the hot path (docs/architecture.md has
 *          pictures)
 *
 * A lookup walks both literal and wildcard edges with the request's
 * decoded segments and returns the lists it meets. A route sits in the
 * path trie, or in the host trie when its Host patterns are more selective
 * than its Path patterns, or in the "generic" any-method list when it has
 * neither. Disabled routes are not indexed: they never match.
 *
 * This file inserts routes into the tries and looks requests up; the
 * one-shot build's phases are in index_build.c, the stepwise build in
 * index_step.c, the layout of the nodes in index_layout.c.
 */
#include "snapshot/index_lookup.h"

#include "route/predicate.h"
#include "route/predicate_int.h" /* a literal Path's text (SY_CAND_LIT) */

#include <stddef.h>
#include <stdlib.h>

/* Edge e is segment s (len bytes, key k) from parent: its length, tag
 * and parent first, then its text (a hit is a segment met before: its
 * text was read then, and is mostly still in the cache). */
static inline bool edge_is(const edge *e, const char *strings, uint32_t parent,
                           const seg_key *k, const char *s, size_t len) {
    return e->len_tag == k->len_tag && e->parent == parent &&
           sy__bytes_eq(strings + e->str_off, s, len);
}

bool sy__ix_nodes_reserve(builder *b, size_t cap) {
    if (cap <= b->node_cap)
        return true;
    if (cap > WILD_NONE)
        return false;
    inode *n = sy__realloc(b->a, b->nodes, cap * sizeof *n);
    if (n)
        b->nodes = n;
    uint32_t *up = n ? sy__realloc(b->a, b->up, cap * sizeof *up) : NULL;
    if (up)
        b->up = up;
    lkey *key = up ? sy__realloc(b->a, b->key, cap * sizeof *key) : NULL;
    if (!key)
        return false; /* those grown are kept, node_cap is not */
    b->key = key;
    b->node_cap = (uint32_t)cap;
    return true;
}

/* A new node with no lists, no children, and as its parent and key
 * (up[], key[]) a root's: the caller notes a child's. */
uint32_t sy__ix_new_node(builder *b) {
    if (b->node_count == b->node_cap &&
        !sy__ix_nodes_reserve(b, b->node_cap ? (size_t)b->node_cap * 2 : 64)) {
        b->failed = true;
        return NONE;
    }
    inode *n = &b->nodes[b->node_count];
    n->wild = WILD_NONE;
    n->term = n->multi = (list_ref){0, 0};
    b->up[b->node_count] = 0;
    b->key[b->node_count] = (lkey){0, 0};
    return b->node_count++;
}

void sy__ix_builder_free(builder *b) {
    sy__free(b->a, b->nodes);
    sy__free(b->a, b->up);
    sy__free(b->a, b->key);
    sy__free(b->a, b->edges);
    sy__buf_free(&b->strings);
    sy__free(b->a, b->vars);
    sy__free(b->a, b->pend);
    sy__free(b->a, b->list_len);
}

static edge *edge_find(edge *edges, uint32_t mask, const char *strings,
                       uint32_t parent, const seg_key *k, const char *s,
                       size_t len, uint64_t h) {
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        edge *e = &edges[i];
        if (e->child == NONE || edge_is(e, strings, parent, k, s, len))
            return e;
    }
}

static bool edges_grow(builder *b) {
    uint32_t cap = (b->edge_mask + 1) * 2;
    edge *n = sy__malloc(b->a, (size_t)cap * sizeof *n);
    if (!n)
        return false;
    for (uint32_t i = 0; i < cap; i++)
        n[i].child = NONE;
    for (uint32_t i = 0; i <= b->edge_mask; i++) {
        edge *e = &b->edges[i];
        if (e->child == NONE)
            continue;
        size_t len = e->len_tag & 0xffff;
        seg_key k = segment_key(b->strings.ptr + e->str_off, len);
        uint64_t h = edge_combine(e->parent, k.hash);
        for (uint32_t j = (uint32_t)h & (cap - 1);; j = (j + 1) & (cap - 1))
            if (n[j].child == NONE) {
                n[j] = *e;
                break;
            }
    }
    sy__free(b->a, b->edges);
    b->edges = n;
    b->edge_mask = cap - 1;
    return true;
}

static uint32_t literal_child(builder *b, uint32_t parent, sy_str seg) {
    if ((b->edge_count + 1) * 4 > (b->edge_mask + 1) * 3 && !edges_grow(b)) {
        b->failed = true;
        return NONE;
    }
    seg_key k = segment_key(seg.ptr, seg.len);
    uint64_t h = edge_combine(parent, k.hash);
    edge *e = edge_find(b->edges, b->edge_mask, b->strings.ptr, parent, &k,
                        seg.ptr, seg.len, h);
    if (e->child != NONE)
        return e->child;
    /* the segment and its NUL appended at once (sy__buf's room kept for
     * a terminator after them) */
    sy__buf *st = &b->strings;
    if (st->len + seg.len + 1 >= st->cap && !sy__buf_reserve(st, seg.len + 1)) {
        b->failed = true; /* (st->failed set too) */
        return NONE;
    }
    uint32_t off = (uint32_t)st->len;
    char *o = st->ptr + st->len;
    memcpy(o, seg.ptr, seg.len);
    o[seg.len] = '\0';
    o[seg.len + 1] = '\0';
    st->len += seg.len + 1;
    uint32_t child = sy__ix_new_node(b);
    if (st->failed || child == NONE) {
        b->failed = true;
        return NONE;
    }
    e->parent = parent;
    e->child = child;
    e->str_off = off;
    e->len_tag = k.len_tag;
    b->edge_count++;
    b->up[child] = parent << 1 | 1u;
    b->key[child] = (lkey){off, (uint32_t)seg.len};
    b->nodes[parent].wild |= LIT_KIDS;
    return child;
}

static uint32_t wild_child(builder *b, uint32_t parent) {
    if ((b->nodes[parent].wild & WILD_MASK) == WILD_NONE) {
        uint32_t c = sy__ix_new_node(b);
        if (c == NONE || c >= WILD_NONE)
            return NONE;
        b->nodes[parent].wild = (b->nodes[parent].wild & LIT_KIDS) | c;
        b->up[c] = parent << 1;
    }
    return b->nodes[parent].wild & WILD_MASK;
}

void sy__ix_add_pending(builder *b, uint32_t node, uint32_t kind, uint32_t slot,
                        uint32_t dim) {
    if (b->pend_count == b->pend_cap) {
        pending *p = sy__grow(b->a, b->pend, &b->pend_cap, b->pend_count + 1,
                              256, sizeof *p);
        if (!p) {
            b->failed = true;
            return;
        }
        b->pend = p;
    }
    b->pend[b->pend_count++] = (pending){node, kind, slot, dim};
}

/*
 * Walk a pattern's segments from `root` (reversed for hosts), creating
 * nodes; returns the node where it ends and whether it ends in a MULTI.
 */
static uint32_t insert_pattern(builder *b, uint32_t root, const sy__pattern *p,
                               bool reversed, uint32_t *kind) {
    size_t n = sy__pattern_segment_count(p);
    uint32_t node = root;
    *kind = L_TERM;
    for (size_t k = 0; k < n && node != NONE; k++) {
        size_t i = reversed ? n - 1 - k : k;
        sy_str lit = {"", 0};
        sy__seg_kind sk = sy__pattern_segment(p, i, &lit);
        if (sk == SY_SEG_MULTI || sk == SY_SEG_REST) {
            *kind = L_MULTI;
            return node;
        }
        node = sk == SY_SEG_LITERAL && lit.len <= UINT16_MAX
                   ? literal_child(b, node, lit)
                   : wild_child(b, node);
    }
    return node;
}

/* Every pattern of a Path (dim 0) or Host (dim 1, labels reversed)
 * predicate, as pending entries of `slot`. Host patterns and requests are
 * both split as Ant tokenizes them (empty labels dropped, a virtual empty
 * label for a leading or trailing '.'), and a host pattern is walked from
 * its end down to its last "**", which Ant matches label for label. */
void sy__ix_insert_patterns(builder *b, const sy__pred *pred, uint32_t root,
                            uint32_t slot, uint32_t dim) {
    size_t np = pred ? sy__pred_pattern_count(pred) : 0;
    for (size_t i = 0; i < np; i++) {
        const sy__pattern *pat = sy__pred_pattern(pred, i);
        /* a path pattern that matches nothing ("foo" without '/') is left
         * out: its segments would otherwise prove a literal "/foo" */
        if (!sy__pattern_can_match(pat))
            continue;
        uint32_t kind;
        uint32_t node = insert_pattern(b, root, pat, dim == 1, &kind);
        if (node != NONE)
            sy__ix_add_pending(b, node, kind, slot, dim);
    }
}

/* The first built-in predicate of `kind` of a route, or NULL. */
const sy__pred *sy__ix_find_pred(const struct sy_route *r, sy__pred_kind kind) {
    for (size_t i = 0; i < r->predicate_count; i++)
        if (sy__pred_get_kind(sy__route_cpred(r, i)) == kind)
            return sy__route_cpred(r, i);
    return NULL;
}

/* A pattern the trie walk proves on its own: literal segments (labels)
 * short enough for a literal edge, plain {var}s and "*"s, and at most one
 * "**"
 * (capturing nothing) as the last segment the walk meets (the last of a
 * path, the first label of a host): the walk then collects it in the multi
 * list at the node where every segment before it matched. */
/* *single: a bit for each of the first 64 segments that is a {var} or a
 * "*" (the only segments sy__ix_route_info's captures look at). */
static bool pattern_walkable(const sy__pattern *p, bool host,
                             uint64_t *single) {
    size_t n = sy__pattern_segment_count(p), vars = 0;
    *single = 0;
    for (size_t i = 0; i < n; i++) {
        sy_str lit;
        sy__seg_kind k = sy__pattern_segment(p, i, &lit);
        if (k == SY_SEG_MULTI) {
            if (i != (host ? 0 : n - 1))
                return false;
            continue;
        } else if (k == SY_SEG_LITERAL) {
            if (lit.len > UINT16_MAX)
                return false;
            continue;
        } else if (sy__pattern_segment_var(p, i).ptr) {
            vars++;
        } else if (!sy__pattern_segment_is_star(p, i)) {
            return false;
        }
        if (i < 64)
            *single |= (uint64_t)1 << i;
    }
    return vars == sy__pattern_var_count(p); /* no {*name} */
}

static bool add_var(builder *b, sy_str name, uint32_t seg) {
    if (b->var_count == b->var_cap) {
        size_t cap = b->var_cap;
        sy__cand_var *v =
            b->var_cap > UINT32_MAX / 2
                ? NULL /* a 32-bit count */
                : sy__grow(b->a, b->vars, &cap, (size_t)b->var_count + 1, 64,
                           sizeof *v);
        if (!v)
            return false;
        b->vars = v;
        b->var_cap = (uint32_t)cap;
    }
    b->vars[b->var_count++] = (sy__cand_var){name, seg};
    return true;
}

/* The methods a route accepts and, per trie (0 path, 1 host), whether
 * the walk proves its Path (Host) predicate (SY_CAND_WALK: one such
 * predicate, of one walkable pattern) and whether that leaves only its
 * Method predicates (SY_CAND_WHOLE) or, proving its Host, those and one
 * literal Path (SY_CAND_LIT). */
rinfo sy__ix_route_info(builder *b, const struct sy_route *r) {
    rinfo ri;
    memset(&ri, 0, sizeof ri);
    uint32_t methods = UINT32_MAX, proven[2] = {0, 0};
    ri.rtag = sy__cand_tag(r);
    size_t at[2] = {0, 0}, ndims[2] = {0, 0};
    bool other = false, path_lit = false;
    for (size_t i = 0; i < r->predicate_count; i++) {
        const sy__pred *p = sy__route_cpred(r, i);
        sy__pred_kind k = p ? sy__pred_get_kind(p) : SY_PK_HOST_FACTORY;
        if (k == SY_PK_METHOD) {
            methods &= sy__pred_method_mask(p);
        } else if (k == SY_PK_PATH || k == SY_PK_HOST) {
            at[k == SY_PK_HOST] = i;
            ndims[k == SY_PK_HOST]++;
            if (k == SY_PK_PATH)
                path_lit = sy__pred_path_lit(p);
        } else {
            other = true;
        }
    }
    for (int d = 0; d < 2; d++) {
        if (ndims[d] != 1 || at[d] > SY_CAND_PRED_MAX)
            continue;
        const sy__pred *pred = sy__route_cpred(r, at[d]);
        if (sy__pred_pattern_count(pred) != 1)
            continue;
        const sy__pattern *pat = sy__pred_pattern(pred, 0);
        uint64_t single;
        if (!pattern_walkable(pat, d == 1, &single))
            continue;
        ri.vars[d] = b->var_count;
        size_t n = sy__pattern_segment_count(pat);
        for (size_t i = 0; i < n; i++) {
            /* a literal or "**" has no name and is no "*": nothing to add */
            if (i < 64 && !(single >> i & 1))
                continue;
            sy_str name = sy__pattern_segment_var(pat, i);
            /* hosts: counted from the last label (a leading ** takes any
             * number of labels before the others) */
            uint32_t seg = (uint32_t)(d == 1 ? n - 1 - i : i);
            /* a "*" but the last needs a non-empty segment: an entry
             * without a name checks that and captures nothing (a path's
             * only: no host label a walk or a wildcard key meets is empty,
             * and a host with an empty end label is not walk-proven) */
            bool check = name.ptr || (d == 0 && i + 1 < n &&
                                      sy__pattern_segment_is_star(pat, i));
            if (check && !add_var(b, name, seg)) {
                b->failed = true;
                return ri;
            }
        }
        if (b->var_count - ri.vars[d] > UINT8_MAX) {
            b->var_count = ri.vars[d]; /* not walk-proven: tested */
            continue;
        }
        ri.nvars[d] = (uint8_t)(b->var_count - ri.vars[d]);
        proven[d] = (uint32_t)at[d];
        ri.flags[d] = SY_CAND_WALK;
        bool one = false;
        if (ri.nvars[d] == 1) { /* most: the var in the candidate */
            uint32_t v = sy__cand_var1_pack(r, b->vars[ri.vars[d]], &one);
            if (one) {
                b->var_count = ri.vars[d];
                ri.vars[d] = v;
                ri.flags[d] |= SY_CAND_VAR1;
            }
        }
        if (!other && !ndims[1 - d])
            ri.flags[d] |= SY_CAND_WHOLE;
        else if (d == 1 && !other && ndims[0] == 1 && path_lit &&
                 at[0] <= SY_CAND_LIT_MAX) {
            ri.flags[1] |= (uint8_t)(SY_CAND_LIT | at[0] << SY_CAND_LIT_SHIFT);
            if (!ri.nvars[1]) { /* the literal in the candidate */
                const sy__pred *lp = sy__route_cpred(r, at[0]);
                uint32_t v =
                    sy__cand_lit_pack(r, lp->lit_src, lp->lit_len, lp->lit_rest,
                                      lp->trailing, &one);
                if (one) {
                    ri.vars[1] = v;
                    ri.flags[1] |= SY_CAND_VAR1;
                }
            }
        }
    }
    for (int d = 0; d < 2; d++)
        ri.mbits[d] = sy__cand_mbits(methods, ri.flags[d] ? proven[d] : 0);
    ri.mbits[2] = sy__cand_mbits(methods, 0);
    return ri;
}

sy__index *sy__index_ref(sy__index *ix) {
    atomic_fetch_add_explicit(&ix->refs, 1, memory_order_relaxed);
    return ix;
}

void sy__index_unref(sy__index *ix) {
    if (!ix ||
        atomic_fetch_sub_explicit(&ix->refs, 1, memory_order_acq_rel) != 1)
        return;
    const sy__alloc *a = ix->alloc;
    sy__free(a, ix->nodes_mem);
    sy__free(a, ix->slots);
    sy__free(a, ix->hslots);
    sy__free(a, ix->side);
    sy__free(a, ix->strings);
    sy__free(a, ix->cands);
    sy__free(a, ix->cslots);
    sy__free(a, ix->vars);
    sy__free(a, ix->hosts_mem);
    sy__free(a, ix->hkeys);
    sy__free(a, ix);
}

size_t sy__index_bytes(const sy__index *ix) {
    return ix->bytes;
}

/* ---- lookup ---- */

bool sy__index_host_exact(const sy__index *ix, sy_str host,
                          sy__cand_list *out) {
    return host.len && index_host_exact(ix, host, out);
}

bool sy__index_path_none(const sy__index *ix) {
    return index_path_none(ix);
}

size_t sy__index_lookup(const sy__index *ix, const sy__segments *path,
                        const sy__segments *host_labels, int method_bit,
                        sy__cand_list *out, size_t cap) {
    collector c;
    collector_init(&c, ix, out, cap);
    c.dec = path->dec;
    c.count = path->count;
    walk_in(&c, ROOT_PATH, (cursor){0, 0, 0}, true, W_PATH, walk_path);
    return lookup_rest(&c, host_labels, method_bit);
}

size_t sy__index_lookup_flat(const sy__index *ix, const sy__segments *path,
                             uint64_t sl, const sy__segments *host_labels,
                             int method_bit, sy__cand_list *out, size_t cap) {
    return index_lookup_flat(ix, path, sl, host_labels, method_bit, out, cap);
}

/* The pool's place of the candidate copied before the record at hkeys +
 * off: the slot naming that record (its key's text hashed again). */
static uint32_t host_cand_place(const sy__index *ix, uint32_t off) {
    const char *rec = ix->hkeys + off;
    uint16_t len, term_len;
    host_rec_head(rec, &len, &term_len);
    uint64_t h = host_hash(rec + HK_HEAD, len & HE_MAX_LEN);
    for (uint32_t g = (uint32_t)h & ix->host_gmask;;
         g = (g + 1) & ix->host_gmask)
        for (unsigned j = 0; j < HG_SLOTS; j++)
            if (host_tag_at(&ix->hosts[g], j) &&
                ix->hosts[g].slot[j].off == off)
                return ix->hosts[g].slot[j].term_off;
}

bool sy__index_cand_slot(const sy__index *ix, const sy__cand *cd,
                         uint32_t *slot) {
    uintptr_t at = (uintptr_t)(const void *)cd,
              lo = (uintptr_t)(const void *)ix->cands,
              nlo = (uintptr_t)(const void *)ix->nodes;
    if (at >= lo && at - lo < (uintptr_t)ix->ncands * sizeof *cd) {
        *slot = ix->cslots[(at - lo) / sizeof *cd];
        return true;
    }
    if (at >= nlo && at - nlo < (uintptr_t)ix->node_count * sizeof(xnode)) {
        *slot = ix->cslots[ix->nodes[(at - nlo) / sizeof(xnode)].kids];
        return true;
    }
    uintptr_t klo = (uintptr_t)(const void *)ix->hkeys;
    if (!ix->hkeys || at < klo || at - klo >= ix->hkeys_used)
        return false;
    *slot = ix->cslots[host_cand_place(
        ix, (uint32_t)(at - klo + sizeof *cd))]; /* its record's head */
    return true;
}
