/*
 * index_lookup.h - the index's lookup walk, inline: the path trie walked
 * by the path's '/' bits or its segments, the host trie by reversed
 * labels, the candidate lists collected in rank order. Read by index.c
 * (sy__index_lookup) and the matcher (index_lookup_flat inline in
 * match.c); the layout it reads is index_int.h's.
 */
#ifndef SY_INDEX_LOOKUP_H
#define SY_INDEX_LOOKUP_H

#include "snapshot/index_int.h"

/* ---- lookup (index.c; index_lookup_flat inline in the matcher) ---- */

/* segment_key's words alone (no hash): what a node's own key is compared
 * with. */
static inline void segment_words(const char *s, size_t len, uint64_t *w0,
                                 uint64_t *w1) {
    if (len >= 8) { /* 16: the same load; longer: w1 is not compared */
        *w0 = sy__load_u64(s);
        *w1 = sy__load_u64(s + len - 8);
    } else if (len >= 4) {
        *w0 = sy__load_u32(s) | (uint64_t)sy__load_u32(s + len - 4) << 32;
        *w1 = 0;
    } else if (len) {
        *w0 = (uint64_t)(unsigned char)s[0] |
              (uint64_t)(unsigned char)s[len / 2] << 8 |
              (uint64_t)(unsigned char)s[len - 1] << 16;
        *w1 = 0;
    } else {
        *w0 = *w1 = 0;
    }
}

/* Node `x`'s edge is segment (w0, w1, len; s its text): a longer one's
 * bytes from the 9th on are in the index's strings at x->w1. */
static inline bool node_is(const xnode *x, const char *strings, uint64_t w0,
                           uint64_t w1, const char *s, size_t len) {
    if (x->len != len || x->w0 != w0)
        return false;
    if (len <= KEY_BYTES) /* w0 is all of a short one (X_LONE's w1) */
        return len < 8 || x->w1 == w1;
    return memcmp(strings + x->w1, s + 8, len - 8) == 0;
}

typedef struct collector {
    const sy__index *ix;
    sy__cand_list *out;
    size_t n, cap;
    const sy_str *dec; /* the request's segments (labels) */
    const char *flat;  /* or the rooted path itself (walk_flat) */
    size_t count;      /* dec's count, or flat's length */
    bool overflow;
    bool reversed; /* host trie: labels walked from the last */
    bool lead;     /* host: a leading '.' */
} collector;

static inline void collect(collector *c, list_ref l, uint8_t proof,
                           bool exact) {
    if (!l.len)
        return;
    if (c->n == c->cap) {
        c->overflow = true;
        return;
    }
    c->out[c->n++] = (sy__cand_list){
        c->ix->cands + l.off, c->ix->vars, l.len, proof, exact, c->reversed};
}

/* A node's lists (X_SIDE: from the side table, by binary search). */
static inline list_ref side_list(const sy__index *ix, uint32_t node,
                                 bool multi) {
    uint32_t lo = 0, hi = ix->nside;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ix->side[mid].node < node)
            lo = mid + 1;
        else
            hi = mid;
    }
    const xside *e = &ix->side[lo]; /* present: the node has X_SIDE */
    return multi ? (list_ref){e->moff, e->mlen} : (list_ref){e->toff, e->tlen};
}

/* A node's term list in the pool (X_LONE: its candidate's copy). */
static inline list_ref term_of(const sy__index *ix, const xnode *nd,
                               uint32_t node) {
    if (nd->shape & (X_SIDE | X_LONE))
        return nd->shape & X_LONE ? (list_ref){nd->kids, 1}
                                  : side_list(ix, node, false);
    return (list_ref){nd->off, nd->tlen};
}

/* collect() of a node's term list: an X_LONE node's from the node (no
 * line of the pool read). */
static inline void collect_term(collector *c, const xnode *nd, uint32_t node,
                                uint8_t proof, bool exact) {
    if (!(nd->shape & X_LONE)) {
        collect(c, term_of(c->ix, nd, node), proof, exact);
    } else if (c->n == c->cap) {
        c->overflow = true;
    } else {
        c->out[c->n++] = (sy__cand_list){xnode_lone(nd), c->ix->vars, 1, proof,
                                         exact,          c->reversed};
    }
}

static inline list_ref multi_of(const sy__index *ix, const xnode *nd,
                                uint32_t node) {
    if (nd->shape & X_SIDE)
        return side_list(ix, node, true);
    return (list_ref){nd->off + nd->tlen, nd->mlen};
}

/* The child table's probe for the literal child of `parent` (an X_HASH
 * node; of the host trie: host) with hash h and words w0, w1 of segment
 * seg: past the smaller hashes of its home's run, then the entries of its
 * tag, each checked against the child's own words and that it is this
 * parent's; a larger hash or an empty slot ends it. */
static inline __attribute__((always_inline)) uint32_t
probe_child(const sy__index *ix, uint32_t parent, uint64_t h, uint64_t w0,
            uint64_t w1, sy_str seg, const bool host) {
    uint32_t nt = slot_ntag(h);
    const xslot *e = host ? &ix->hslots[h >> ix->hslot_shift]
                          : &ix->slots[h >> ix->slot_shift];
    while (e->ntag > nt)
        e++;
    for (; e->ntag == nt; e++) {
        uint32_t c = e->child;
        if (!c)
            return NONE; /* an empty slot: nt 0 */
        const xnode *x = &ix->nodes[c];
        if (node_is(x, ix->strings, w0, w1, seg.ptr, seg.len) &&
            x->kids == parent)
            return c;
    }
    return NONE;
}

/* A segment longer than KEY_BYTES: its tail is compared in the pool,
 * out of line (off the walk's registers). */
static __attribute__((noinline, unused)) uint32_t
find_hashed_long(const sy__index *ix, uint32_t parent, sy_str seg, bool host) {
    seg_key k = segment_key(seg.ptr, seg.len);
    return probe_child(ix, parent, child_hash(parent, k.hash), k.w0, k.w1, seg,
                       host);
}

/* The literal child of `parent` (an X_HASH node) for segment `seg`,
 * through the child table. A segment of up to KEY_BYTES bytes is
 * compared by its words alone, no call: the probe's registers stay the
 * caller's. */
static inline __attribute__((always_inline)) uint32_t
find_hashed(const sy__index *ix, uint32_t parent, sy_str seg, const bool host) {
    if (seg.len > KEY_BYTES)
        return find_hashed_long(ix, parent, seg, host);
    uint64_t w0, w1;
    segment_words(seg.ptr, seg.len, &w0, &w1);
    return probe_child(ix, parent,
                       child_hash(parent, segment_hash(w0, w1, seg.len)), w0,
                       w1, seg, host);
}

/* The literal child among n of them from `first`, compared one by one. */
static inline uint32_t find_direct(const sy__index *ix, uint32_t first,
                                   uint32_t n, sy_str seg) {
    uint64_t w0, w1;
    segment_words(seg.ptr, seg.len, &w0, &w1);
    for (uint32_t j = 0; j < n; j++)
        if (node_is(&ix->nodes[first + j], ix->strings, w0, w1, seg.ptr,
                    seg.len))
            return first + j;
    return NONE;
}

/* A node's first child (its wildcard one, if any, then its literal ones):
 * with HCHILD (kids is then its parent) the next node. */
static inline uint32_t first_kid(const xnode *nd, uint32_t node,
                                 uint32_t shape) {
    return shape & X_HCHILD ? node + 1 : nd->kids;
}

/*
 * Where a walk is in the request: the segment `d` (labels: from the last)
 * of the split path or host, or (W_FLAT) the rooted path's bytes [d, e),
 * e the next '/' or the path's end, `m` the '/' bits past e:
 *
 *   "/repos/o/r"  d 1, e 6, m {8}  -> "repos"; then d 7, e 8, m {} -> "o";
 *                 d 9, e 10        -> "r" (the last: e is the end);
 *                 d 11 > 10        -> past it
 *
 * so a lookup of a short plain path reads no segment array (the matcher
 * cuts one only for a reader that needs it: a capture, a pattern).
 */
enum { W_PATH, W_HOST, W_FLAT };
/* The collector's request fields, copied for the walk (in registers: the
 * lists it writes could alias the collector). */
typedef struct seq {
    const sy_str *dec;
    const char *flat;
    size_t count;
} seq;
typedef struct cursor {
    size_t d, e;
    uint64_t m;
} cursor;

/* W_FLAT: the segment from byte d, its end the next bit of m, or len. */
static inline cursor cur_flat(size_t d, uint64_t m, size_t len) {
    if (!m)
        return (cursor){d, len, 0};
    return (cursor){d, (unsigned)__builtin_ctzll(m), m & (m - 1)};
}

/* The walk is at the last segment, or past it. */
static inline bool cur_last(const seq *c, cursor k, const int mode) {
    return mode == W_FLAT ? k.e == c->count : k.d + 1 >= c->count;
}

/* Past the last segment (cur_last holds). */
static inline bool cur_past(const seq *c, cursor k, const int mode) {
    return mode == W_FLAT ? k.d > c->count : k.d == c->count;
}

static inline sy_str cur_seg(const seq *c, cursor k, const int mode) {
    if (mode == W_FLAT)
        return (sy_str){c->flat + k.d, k.e - k.d};
    return c->dec[mode == W_PATH ? k.d : c->count - 1 - k.d];
}

static inline cursor cur_next(const seq *c, cursor k, const int mode) {
    if (mode == W_FLAT)
        return cur_flat(k.e + 1, k.m, c->count);
    return (cursor){k.d + 1, 0, 0};
}

/* Depth-first walk over literal and wildcard edges; `literal` says every
 * segment so far was matched by a literal edge. A node without literal
 * children costs no compare, one with a few (X_NLIT) compares them, one
 * with more (X_HASH) hashes the segment and probes the child table; one
 * without a wildcard child costs no recursion. Compiled once per trie and
 * form of the path (`mode` a constant). */
static inline __attribute__((always_inline)) void
walk_in(collector *c, uint32_t node, cursor k, bool literal, const int mode,
        void (*self)(collector *, uint32_t, cursor, bool)) {
    const bool path = mode != W_HOST;
    const sy__index *ix = c->ix;
    const xnode *nodes = ix->nodes;
    const seq q = {mode == W_FLAT ? NULL : c->dec,
                   mode == W_FLAT ? c->flat : NULL, c->count};
    for (;;) {
        const xnode *nd = &nodes[node];
        uint32_t shape = nd->shape;
        /* a walkable host pattern starting with "**" has no leading '.',
         * which Ant compares: a host with one is not proven */
        if (shape & X_MULTI) {
            collect(c, multi_of(ix, nd, node), SY_PROOF_NONE, path || !c->lead);
            if (c->overflow)
                return;
        }
        if (cur_last(&q, k, mode)) { /* the last segment, or past it */
            if (cur_past(&q, k, mode)) {
                collect_term(c, nd, node,
                             !literal ? SY_PROOF_NONE
                             : path   ? SY_PROOF_PATH
                                      : SY_PROOF_HOST,
                             true);
                return;
            }
            /* matchTrailingSlash: "/a" also matches "/a/" */
            if (path && cur_seg(&q, k, mode).len == 0) {
                collect_term(c, nd, node, SY_PROOF_NONE, false);
                if (c->overflow)
                    return;
            }
        }
        /* the first child is read only where it is used (a hashed step
         * finds its child through the table) */
        if (shape & X_WILD) {
            uint32_t kid = first_kid(nd, node, shape);
            if (!(shape & (X_NLIT | X_HASH))) { /* the wildcard child only */
                node = kid;
                literal = false;
                k = cur_next(&q, k, mode);
                continue;
            }
            self(c, kid, cur_next(&q, k, mode), false);
            if (c->overflow)
                return;
            node = shape & X_NLIT
                       ? find_direct(ix, kid + 1, shape & X_NLIT,
                                     cur_seg(&q, k, mode))
                       : find_hashed(ix, node, cur_seg(&q, k, mode), !path);
        } else if (shape & X_NLIT) {
            node = find_direct(ix, first_kid(nd, node, shape), shape & X_NLIT,
                               cur_seg(&q, k, mode));
        } else if (shape & X_HASH) {
            node = find_hashed(ix, node, cur_seg(&q, k, mode), !path);
        } else {
            return;
        }
        if (node == NONE)
            return;
        k = cur_next(&q, k, mode);
    }
}

static inline void walk_path(collector *c, uint32_t node, cursor k,
                             bool literal) {
    walk_in(c, node, k, literal, W_PATH, walk_path);
}

static inline void walk_flat(collector *c, uint32_t node, cursor k,
                             bool literal) {
    walk_in(c, node, k, literal, W_FLAT, walk_flat);
}

static inline void walk_host(collector *c, uint32_t node, cursor k,
                             bool literal) {
    walk_in(c, node, k, literal, W_HOST, walk_host);
}

/* A lookup's start: nothing collected, no host walked yet. */
static inline void collector_init(collector *c, const sy__index *ix,
                                  sy__cand_list *out, size_t cap) {
    c->ix = ix;
    c->out = out;
    c->n = 0;
    c->cap = cap;
    c->overflow = false;
    c->reversed = false;
    c->lead = false;
}

/* After the path walk: the host walk, the generic lists. */
static inline size_t lookup_rest(collector *c, const sy__segments *host_labels,
                                 int method_bit) {
    const sy__index *ix = c->ix;
    /* an empty or missing Host matches no Host pattern */
    if (host_labels && host_labels->count && ix->host_routes) {
        c->dec = host_labels->dec;
        c->count = host_labels->count;
        c->reversed = true;
        c->lead = host_labels->lead;
        walk_host(c, ROOT_HOST, (cursor){0, 0, 0}, true);
    }
    if (ix->generic_some) {  /* most tables have no generic route */
        c->reversed = false; /* generic lists are no host lists */
        collect(c, ix->generic[GENERIC_ANY], SY_PROOF_NONE, false);
        collect(c,
                ix->generic[method_bit >= 0 && method_bit < 9 ? method_bit
                                                              : GENERIC_OTHER],
                SY_PROOF_NONE, false);
    }
    return c->overflow ? SIZE_MAX : c->n;
}

/* sy__index_lookup_flat, inline for the matcher. */
static inline size_t index_lookup_flat(const sy__index *ix,
                                       const sy__segments *path, uint64_t sl,
                                       const sy__segments *host_labels,
                                       int method_bit, sy__cand_list *out,
                                       size_t cap) {
    collector c;
    collector_init(&c, ix, out, cap);
    c.flat = path->flat.ptr;
    c.count = path->flat.len;
    /* the first segment starts after the root's '/' (bit 0) */
    walk_in(&c, ROOT_PATH, cur_flat(1, sl & ~(uint64_t)1, c.count), true,
            W_FLAT, walk_flat);
    return lookup_rest(&c, host_labels, method_bit);
}

#endif
