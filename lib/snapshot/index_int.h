/*
 * index_int.h - the index's internal layout and build state, shared by
 * the one-shot build (index.c), the stepwise build (index_step.c) and the
 * lookup (index_lookup.h). index.c's header comment draws the structures.
 */
#ifndef SY_INDEX_INT_H
#define SY_INDEX_INT_H

#include "route/predicate.h"
#include "snapshot/index.h"
#include "snapshot/index_hash.h"

#include <stddef.h>

#define NONE SY_NONE /* short local name */
#define ROOT_PATH 0u
#define ROOT_HOST 1u
#define GENERIC_LISTS 11 /* 9 standard methods, "other", any */
#define GENERIC_OTHER 9
#define GENERIC_ANY 10

/* ---- the index's layout ---- */

/*
 * A node of the index (32 bytes, two to a line; the array is aligned to
 * a line). The edge into a node (its literal segment's words) is stored in
 * the node itself: the walk reads the child it goes to anyway, and the
 * compare costs no other line. Nodes are numbered depth first so that a
 * node's children follow it closely:
 *
 *   a node with a few literal children (X_NLIT, compared one by one):
 *     its children together, the wildcard one first, then their subtrees
 *        [P] [*][a][b] [..subtree of *..] [..of a..] [..of b..]
 *   a node with more (X_HASH, found through the child table): each child
 *   right before its own subtree, the wildcard one first
 *        [P] [*][..subtree of *..] [a][..of a..] [b][..of b..]
 *
 *   len   u16       the segment of the edge into the node: its length
 *   shape u16       X_NLIT: the number of literal children when they are
 *                   compared one by one (1 .. DIRECT_MAX); X_HASH: more;
 *                   X_WILD: a wildcard child (the first); X_HCHILD: the
 *                   node is an X_HASH node's literal child; X_SIDE: the
 *                   lists are in side[]; X_MULTI: a multi list (mlen or
 *                   X_SIDE); X_LONE: the one candidate in the node
 *   kids  u32       the first child; with X_HCHILD the parent instead
 *                   (what a child table hit is checked against), the first
 *                   child being then the next node; X_LONE: the pool's
 *                   place of the node's candidate
 *   w0 | w1         the segment as segment_key's words (len > KEY_BYTES:
 *                   w0 its first 8 bytes, w1 the offset of its bytes from
 *                   the 9th on in the index's strings); zero for roots and
 *                   wildcards
 *   off   u32       the term list at cands + off, the multi list after it
 *   tlen, mlen u16  their lengths (X_SIDE: both 0xffff)
 *
 *   X_LONE:  [len|shape|kids: the pool's place][w0][the candidate: 16]
 *
 * Roots: ROOT_PATH 0 and ROOT_HOST 1.
 */
typedef struct xnode {
    uint16_t len;
    uint16_t shape;
    uint32_t kids;
    uint64_t w0, w1;
    uint32_t off;
    uint16_t tlen, mlen;
} xnode;

#define X_NLIT 0x7u
#define X_WILD 0x8u
#define X_HASH 0x10u
#define X_SIDE 0x20u
#define X_HCHILD 0x40u
/* a multi list (mlen != 0, or X_SIDE): tested with the shape's other
 * bits, no second load */
#define X_MULTI 0x80u
/* X_LONE: a leaf whose lists are one term candidate, carried in the node
 * itself over w1, off, tlen and mlen (xnode_lone), so that a cold walk
 * reads no line of the pool for it; kids is then that candidate's place
 * in the pool (its copy there, and its slot in cslots). Only where those
 * fields are free: a leaf (no kids), not an X_HASH node's child (kids is
 * its parent), its segment shorter than 8 bytes (w0 is all of it, w1 is
 * not compared), no multi list, no side entry. */
#define X_LONE 0x100u
_Static_assert(sizeof(xnode) == 32 && sizeof(sy__cand) == 16 &&
                   offsetof(xnode, w1) == 16,
               "an X_LONE node's candidate lies over w1 .. mlen");

/* An X_LONE node's candidate. */
static inline const sy__cand *xnode_lone(const xnode *x) {
    return (const sy__cand *)(const void *)&x->w1;
}
/* Literal children compared one by one up to this many: a compare is a
 * length and two words, cheaper than hashing the segment and probing. */
#define DIRECT_MAX 4

/* The child table: the literal children of X_HASH nodes, keyed by (the
 * parent's id, the segment), eight entries to a line, load <= 2/3
 * (slot_homes), the path trie's and the host trie's in two tables, in
 * ordered linear probing: an entry sits at or past its home slot (the
 * combined hash's top bits, h >> slot_shift) with no empty slot between,
 * and every run of entries is in order of the hash's high half, so a
 * probe passes only smaller hashes and stops at the first larger one: a
 * miss reads about as many slots as a hit, where plain linear probing
 * read to the end of the run (9 slots at 1,000,000 routes for a request
 * whose first segment no route has; docs/performance.md). A run never
 * wraps: the table has SLOT_TAIL slots past its mask + 1 (more if a run
 * needs them), the last always empty. ntag: the high half's complement,
 * so 0 in an empty slot ends a probe and a run reads highest first;
 * child 0: empty (a root is nobody's child). A hit is checked against
 * the child's own words and its parent (its kids field). */
typedef struct xslot {
    uint32_t child;
    uint32_t ntag;
} xslot;

/* Slots past the child table's mask + 1 (a multiple of 8: a line). */
#define SLOT_TAIL 64

/* A child table's home slots (its mask + 1) for n entries: a power of
 * two, load <= 2/3. (At 1/2 the path table of 666,667 children, table_scale
 * at 1,000,000 routes, took 16 MiB, 4,096 pages a lookup reaches at
 * random, where 8 MiB hold it at 0.64: docs/performance.md.) */
static inline size_t slot_homes(size_t n) {
    return sy__pow2_at_least(8, n + n / 2);
}

/* An entry's ntag for the combined hash h. */
static inline uint32_t slot_ntag(uint64_t h) {
    return ~(uint32_t)(h >> 32);
}

/* Lists of a node that do not fit its u16 lengths or do not follow each
 * other in the pool (a route's two patterns reaching one list: one entry
 * kept): sorted by node. */
typedef struct xside {
    uint32_t node;
    uint32_t toff, tlen, moff, mlen;
} xside;

typedef struct list_ref {
    uint32_t off;
    uint32_t len;
} list_ref;

/* ---- build state: the tries as inserted, before the layout ---- */

/* 16 bytes (four to a line): an open-addressing table keyed by (parent,
 * segment). The segment's text is in the builder's strings at str_off
 * (what a hit is checked against); len_tag as seg_key's. A probe reads
 * one line where a 32-byte edge with the segment's words read two, and
 * the table is half the size (at 100,000 routes 8 MiB probed at random,
 * not 16). The node's own key (where its text is) is noted in the
 * builder's key[] when the node is made, in order. */
typedef struct edge {
    uint32_t parent;
    uint32_t child; /* NONE: empty */
    uint32_t str_off;
    uint32_t len_tag;
} edge;

/* wild: the one-segment wildcard child (WILD_NONE: none), and LIT_KIDS
 * when the node has literal children in the edge table. Pruning clears
 * them when the children are dead. */
#define WILD_MASK 0x3fffffffu
#define WILD_NONE WILD_MASK
#define LIT_KIDS 0x80000000u

typedef struct inode {
    uint32_t wild;
    list_ref term;
    list_ref multi;
} inode;

/*
 * The whole-host table: a node of the host trie reached from its root by
 * literal edges only, past no wildcard child and no multi list (so a walk
 * there meets no list but its term list), is a key: the host spelled as a
 * request names it ("h7.example.com": its labels from that node up, joined
 * by '.'), its hash and the node's term list. A request's host (unsplit)
 * is hashed once and probed; a hit is the whole answer of the host walk.
 * Such a node whose only child is a wildcard one without children or a
 * multi list ("*.w7.example.com": the node w7) is also a wildcard key
 * (HE_WILD in len): a request of one more non-empty label than it
 * ("eu.w7.example.com") meets that child's term list and nothing else, so
 * the request's host past its first '.' is probed for it and a hit is
 * again the whole answer of the host walk (no walk: the labels are split
 * for the captures only).
 * The table is groups of a line each (64 bytes, aligned): a word of
 * tags, then seven slots. Byte j of the tags (bits 8j..8j+7, j < 7) is
 * slot j's: 0 an empty slot, else 0x80 | the hash's top 7 bits; the top
 * byte is always 0. A key is in the first group from its hash's low bits
 * with a free slot, so a probe compares a group's seven tags at once
 * (SWAR) and stops at a group with an empty slot: at a load of at most
 * 3/4, mostly the one, else the next line of the same 4 KiB page (at
 * 1/2 the table at 1,000,000 hosts spanned twice the pages a lookup
 * reaches at random: docs/performance.md). A slot: the offset of the key's
 * record in the index's hkeys (its len, the term list's length, then its text:
 * the line a compare reads anyway) and the term list's offset. A key longer
 * than 32767 bytes or a list longer than 65535 is left to the walk.
 *
 *   group  [tags: t0 .. t6, 0][off|term_off] x 7
 *   hkeys  ... [len | HE_WILD : u16][term_len : u16]["h7.example.com"] ...
 *
 * A lone list's record carries its candidate's copy before its head, 8-byte
 * aligned (zero bytes before): a hit reads no line of the pool for it (the
 * pool keeps its own, and its slot in cslots); one carrying its literal
 * Path (sy__cand_has_lit) has the text after the key's, its offset from
 * the copy (SY_CAND_LIT_SELF): a hit reads no line of the route either:
 *   hkeys ... [0-7 zeros][candidate: 16][len][1]["t7.example.com"]["/api"]
 */
typedef struct hslot {
    uint32_t off; /* the record in hkeys */
    uint32_t term_off;
} hslot;
#define HG_SLOTS 7
typedef struct hgroup {
    uint64_t tags;
    hslot slot[HG_SLOTS];
} hgroup;
#define HK_HEAD 4                      /* a record's len and term_len */
#define HK_LONE (sizeof(sy__cand) + 7) /* a lone list's copy, aligned */
#define HE_WILD 0x8000u
#define HE_MAX_LEN 0x7fffu

/* Which hosts could be keys at all: the lengths (bit len % 64) and first
 * bytes of the keys, of each kind (kind[0] whole hosts, kind[1] wildcard
 * keys). A host outside them is walked without a probe (a table line not
 * read: the cold tables' request hosts mostly miss). */
typedef struct hkind {
    uint64_t lens;
    uint64_t first[4];
} hkind;
typedef struct hfilter {
    hkind kind[2];
    /* some list of the host trie is no key's (a multi list, a node past
     * a wildcard, a key too long): a host both probes miss is walked.
     * 0: every host list is a key's, so a walk of a host with no empty
     * label finds nothing after both probes miss (index_host_keyed) */
    uint32_t loose;
} hfilter;

struct sy__index {
    _Atomic long refs;
    const sy__alloc *alloc;
    xnode *nodes;    /* node_count, aligned to a line */
    void *nodes_mem; /* their allocation */
    uint32_t node_count;
    /* the build's nodes, dead ones too: the next stepwise build's
     * reserve */
    uint32_t built_nodes;
    xslot *slots; /* the path trie's child table, slot_count; or NULL */
    uint32_t slot_mask, slot_count; /* homes: 0..slot_mask */
    uint8_t slot_shift; /* a hash's slot is its high bits: h >> slot_shift */
    /* the host trie's, apart: a lookup walks the host trie only when the
     * whole-host table cannot answer, and its children would otherwise
     * double the table every path request probes (hslot_count; or NULL) */
    uint8_t hslot_shift;
    uint32_t hslot_mask, hslot_count;
    xslot *hslots;
    char *strings; /* segments longer than KEY_BYTES, from byte 9 */
    xside *side;   /* nside */
    uint32_t nside;
    sy__cand *cands;  /* every list, flattened */
    uint32_t *cslots; /* cands[i]'s slot, cslots[i] */
    uint32_t ncands;
    sy__cand_var *vars;
    list_ref generic[GENERIC_LISTS];
    uint32_t generic_some; /* bit g: generic[g] is not empty */
    hgroup *hosts;   /* the whole-host table, host_gmask + 1 groups; or NULL */
    void *hosts_mem; /* its allocation (hosts is aligned to a line) */
    uint32_t host_gmask; /* a power of two - 1 */
    char *hkeys;         /* the keys' records */
    size_t hkeys_used;   /* their bytes */
    hfilter hfilt;
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
    uint32_t vars[2]; /* per trie: offset in the var pool (VAR1: the var) */
    uint8_t nvars[2];
    uint8_t flags[2]; /* SY_CAND_WALK, WHOLE, VAR1, LIT (and its pred) */
    /* the candidate's methods and walk-proven predicate as sy__cand_mbits
     * packs them: per trie, and [2] for an entry the walk proves nothing
     * of (the route's methods alone) */
    uint16_t mbits[3];
    uintptr_t rtag; /* the route and its predicates' place (sy__cand_tag) */
} rinfo;

/* The literal segment into a node (zero for roots and wildcard
 * children): its text in the builder's strings and its length (the
 * layout reads its words from there: 8 bytes a node here, not 24 with
 * them, ~3 MB fewer fresh pages at 100,000 routes). */
typedef struct lkey {
    uint32_t str_off, len;
} lkey;

typedef struct builder {
    const sy__alloc *a;
    sy__cand_var *vars;
    uint32_t var_count, var_cap;
    inode *nodes;
    /* per node, noted when it is made (in order: no pass over the edge
     * table after the insertion): up[n] = parent << 1 | (n is a literal
     * child), 0 for the roots; key[n] its segment. node_cap of each;
     * the layout takes them over (sy__ix_layout_start) */
    uint32_t *up;
    lkey *key;
    uint32_t node_count, node_cap;
    edge *edges;
    uint32_t edge_mask, edge_count;
    sy__buf strings;
    pending *pend;
    size_t pend_count, pend_cap;
    uint32_t *list_len; /* per (node, kind) during counting */
    bool failed;
} builder;

/* Build steps shared with index_step.c (index.c). */
uint32_t sy__ix_new_node(builder *b);
/* Room for `cap` nodes (nodes, up, key); false: out of memory (or past
 * the wildcard field's range). */
bool sy__ix_nodes_reserve(builder *b, size_t cap);
void sy__ix_add_pending(builder *b, uint32_t node, uint32_t kind, uint32_t slot,
                        uint32_t dim);
void sy__ix_insert_patterns(builder *b, const sy__pred *pred, uint32_t root,
                            uint32_t slot, uint32_t dim);
const sy__pred *sy__ix_find_pred(const struct sy_route *r, sy__pred_kind kind);
rinfo sy__ix_route_info(builder *b, const struct sy_route *r);
/* The builder's own arrays freed (those not given to an index). */
void sy__ix_builder_free(builder *b);

/*
 * Pruning, after the lists are placed (both builds): a branch of a trie
 * whose subtree holds no list (every route under it was placed in the
 * other trie) is cut off: it is left out of the layout, so a walk never
 * enters it. With up[] and key[] as the insertion noted them (builder),
 * prune_node runs for every node from the last to the first (a child is
 * always numbered after its parent), with
 * kids[] and live[] zeroed: it clears LIT_KIDS and the wildcard child of a
 * node whose literal (wildcard) children are all dead, and leaves in
 * live[n] LIVE (n is kept) | the number of n's live children.
 */
enum { KID_LIT = 1, KID_WILD = 2 };
#define LIVE 0x80000000u
static inline void prune_node(builder *b, const uint32_t *up, uint32_t *live,
                              uint8_t *kids, uint32_t n) {
    inode *nd = &b->nodes[n];
    uint8_t k = kids[n];
    if (!(k & KID_LIT))
        nd->wild &= ~LIT_KIDS;
    if (!(k & KID_WILD))
        nd->wild = (nd->wild & LIT_KIDS) | WILD_NONE;
    if (!k && !nd->term.len && !nd->multi.len && n > ROOT_HOST)
        return; /* dead */
    live[n] |= LIVE;
    if (n <= ROOT_HOST)
        return;
    uint32_t p = up[n] >> 1;
    kids[p] |= up[n] & 1u ? KID_LIT : KID_WILD;
    live[p]++;
}

/*
 * The layout (both builds), after pruning and the whole-host table: the
 * live nodes renumbered depth first into xnodes (index.c). The passes:
 *   layout_count   old nodes: their children's ranges (prefix sums), the
 *                  sizes of the arrays to come
 *   layout_place   old nodes: each live one into its parent's range
 *                  (the wildcard child first)
 *   layout_alloc   the index's arrays and the pass's own (the stepwise
 *                  build zeroes the child table in a pass of its own)
 *   layout_order   the depth-first numbering, one node placed or one
 *                  frame entered or left per item, `budget` at a time
 *   layout_node    new nodes: fill each
 *   layout_hash    new nodes: the X_HASH nodes' children into the table
 */
/* layout_count's bits per old node, in kids[] */
enum { LK_HASH = 1, LK_WILD = 2 };

/* Room for a build's temporaries in memory already faulted in: the
 * one-shot build's edge table once the insertion is done (index_build.c);
 * empty (p NULL) in the stepwise build. spare_get cuts a line-aligned
 * block from it (zeroed if asked) or, past its end, allocates one;
 * spare_put frees a block unless it is the room's. */
typedef struct spare {
    char *p;
    size_t len, used;
} spare;

static inline void *spare_get(const sy__alloc *a, spare *s, size_t bytes,
                              bool zero) {
    size_t at = (s->used + 63) & ~(size_t)63;
    if (s->p && at <= s->len && bytes <= s->len - at) {
        s->used = at + bytes;
        if (zero)
            memset(s->p + at, 0, bytes);
        return s->p + at;
    }
    return zero ? sy__calloc(a, 1, bytes) : sy__malloc(a, bytes);
}

static inline void spare_put(const sy__alloc *a, const spare *s, void *p) {
    uintptr_t u = (uintptr_t)p, b = (uintptr_t)s->p;
    if (p && !(s->p && u >= b && u < b + s->len))
        sy__free(a, p);
}

typedef struct lframe {
    uint32_t old, id; /* the node being expanded: old id, new id */
    uint32_t k, end;  /* its next child and its last in clist */
    uint32_t phase;   /* 0 entered; 1 placing one by one (HASH: each
                         then its subtree); 2 X_NLIT: expanding */
    uint32_t hash;    /* its children are in the child table */
} lframe;

typedef struct layout {
    uint32_t *up, *live; /* the pruning's, per old node */
    lkey *key;
    uint8_t *kids;                    /* the pruning's, then the host flags */
    uint32_t *cstart;                 /* old node: its children in clist */
    uint32_t *clist;                  /* live children by parent */
    uint32_t *order, *parent, *first; /* new node: old id, parent, kids */
    lframe *stack;
    uint32_t count;      /* live nodes */
    uint32_t sp, cursor; /* layout_order's state */
    size_t nhash[2]; /* hashed children: [0] the path trie's, [1] the host's */
    size_t long_bytes, nside;
    size_t long_used, side_used; /* layout_node's cursors */
    void *mem;                   /* xn's allocation (xn is aligned) */
    xnode *xn;
    /* the child tables, [0] the path trie's, [1] the host trie's */
    xslot *slots[2];
    uint32_t slot_mask[2], slot_count[2];
    bool slots_huge; /* slots from sy__alloc_huge */
    char *strings;
    xside *side;
    /* the candidate pool, filled: an X_LONE node's candidate is copied
     * from it (set before sy__ix_layout_node) */
    const sy__cand *cands;
    /* where live, kids, cstart, clist, order and stack are cut from: set
     * before sy__ix_layout_start, which keeps it (empty: allocated) */
    spare room;
} layout;

/* The pruning's arrays; up[] and key[] taken over from b (b keeps
 * neither). */
bool sy__ix_layout_start(builder *b, layout *L);
void sy__ix_layout_count(const builder *b, layout *L, uint32_t n);
void sy__ix_layout_place(const builder *b, layout *L, uint32_t n);
/* zero: the child table zeroed (else the caller zeroes it, a line per
 * item, so that its pages are faulted in over many calls) */
bool sy__ix_layout_alloc(const sy__alloc *a, layout *L, bool zero);
/* Up to `budget` items; returns the number done (fewer: finished). */
size_t sy__ix_layout_order(const builder *b, layout *L, size_t budget);
void sy__ix_layout_node(const builder *b, layout *L, uint32_t j);
/* Node j into the child table (when it is a hashed child): false when
 * out of memory for a longer tail (L then as before). */
bool sy__ix_layout_hash(const builder *b, layout *L, uint32_t j);
/* Frees the pass's own arrays (not the index's). */
void sy__ix_layout_done(const sy__alloc *a, layout *L);
/* The index's arrays into ix (L keeps none), and their bytes. */
void sy__ix_layout_give(layout *L, sy__index *ix);

/* The whole host's hash (the table's and the lookup's): one 64x64->128
 * multiply of two words of it (a short one's bytes), folded; a host
 * longer than 16 bytes folds its words 16 bytes at a time first (the
 * last two overlapping, never past its end). Low bits: the group; the
 * top 7: the tag. */
__extension__ typedef unsigned __int128 host_u128;
static inline uint64_t host_mum(uint64_t a, uint64_t b) {
    host_u128 r = (host_u128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}
#define HOST_K0 0xa0761d6478bd642full
#define HOST_K1 0xe7037ed1a0b428dbull
static inline uint64_t host_hash(const char *s, size_t len) {
    uint64_t a, b, seed = HOST_K1 ^ len;
    if (len > 16) {
        for (size_t i = 0; i + 16 < len; i += 16)
            seed = host_mum(sy__load_u64(s + i) ^ HOST_K0,
                            sy__load_u64(s + i + 8) ^ seed);
        a = sy__load_u64(s + len - 16);
        b = sy__load_u64(s + len - 8);
    } else if (len >= 8) {
        a = sy__load_u64(s);
        b = sy__load_u64(s + len - 8);
    } else if (len >= 4) {
        a = sy__load_u32(s);
        b = sy__load_u32(s + len - 4);
    } else {
        a = len ? (uint64_t)(unsigned char)s[0] |
                      (uint64_t)(unsigned char)s[len / 2] << 8 |
                      (uint64_t)(unsigned char)s[len - 1] << 16
                : 0;
        b = 0;
    }
    return host_mum(a ^ HOST_K0, b ^ seed);
}

/* A slot's tag (never 0: the empty slot's); a group's seven tags' bytes
 * and their high bits. */
static inline uint64_t host_tag(uint64_t h) {
    return 0x80u | h >> 57;
}
#define HT_ONES 0x0001010101010101ull
#define HT_HIGHS 0x0080808080808080ull

/* Slot j's tag in group g (0: empty). */
static inline unsigned host_tag_at(const hgroup *g, unsigned j) {
    return (unsigned)(g->tags >> (8 * j)) & 0xffu;
}

/* A record's head: the key's len (| HE_WILD), its term list's length. */
static inline void host_rec_head(const char *rec, uint16_t *len,
                                 uint16_t *term_len) {
    uint16_t h[2];
    memcpy(h, rec, sizeof h);
    *len = h[0];
    *term_len = h[1];
}

/* A key's text is the host's (n bytes each): 8 to 16 bytes, the usual
 * host, as two overlapping words. */
static inline bool host_key_eq(const char *a, const char *b, size_t n) {
    if (n - 8 <= 8)
        return ((sy__load_u64(a) ^ sy__load_u64(b)) |
                (sy__load_u64(a + n - 8) ^ sy__load_u64(b + n - 8))) == 0;
    return sy__bytes_eq(a, b, n);
}

/* The whole-host table's bytes for gmask + 1 groups (and the line its
 * alignment may cost). */
static inline size_t host_table_bytes(uint32_t gmask) {
    return ((size_t)gmask + 1) * sizeof(hgroup) + 64;
}

/*
 * The whole-host table's build (both builds), after pruning, with up[]
 * and key[] of the pruning and a byte per node (flag, the pruning's
 * kids[] reused). host_mark, for every node first to last (a parent is
 * numbered before its children): flags the nodes reached by literal edges
 * only past nothing a walk would collect or branch into, counts the keys
 * a node is in *keys (its whole host, a wildcard key) and returns the
 * length of their text (0: none). host_put, for every node again once
 * the table is allocated (host_alloc, all slots empty): writes the text
 * and takes a slot per key.
 */
enum { HF_REACH = 1, HF_KEY = 2, HF_WKEY = 4, HF_HOST = 8, HF_LOOSE = 16 };
/* The wildcard child of nd that makes it a wildcard key, or NONE. */
static inline uint32_t host_wild_key(const builder *b, const inode *nd) {
    uint32_t w = nd->wild & WILD_MASK;
    if (w == WILD_NONE || (nd->wild & LIT_KIDS) || nd->multi.len)
        return NONE;
    const inode *wn = &b->nodes[w];
    if (!wn->term.len || wn->term.len > UINT16_MAX || wn->multi.len ||
        wn->wild != WILD_NONE)
        return NONE; /* no list, or the walk goes on past it */
    return w;
}
/* Also flags HF_HOST (a node of the host trie) and HF_LOOSE (one whose
 * lists are not all keys': host_put notes it in hfilter.loose). */
static inline uint8_t host_loose(const builder *b, const uint32_t *up,
                                 const uint8_t *flag, uint32_t n, uint8_t k) {
    const inode *nd = &b->nodes[n];
    if (nd->multi.len)
        return HF_LOOSE;
    if (!nd->term.len || (k & HF_KEY))
        return 0;
    /* the wildcard child of a wildcard key: its list is that key's */
    bool wkey = n > ROOT_HOST && !(up[n] & 1u) && (flag[up[n] >> 1] & HF_WKEY);
    return wkey ? 0 : HF_LOOSE;
}
/* Whether a record's copy of lone candidate cd (key text n bytes) carries
 * its literal Path's text (sy__cand_has_lit), reached from itself. */
static inline bool host_lit_self(const sy__cand *cd, size_t n) {
    return sy__cand_has_lit(cd) && !(cd->vars & SY_CAND_LIT_SELF) &&
           sizeof(sy__cand) + HK_HEAD + n <= INT16_MAX;
}
/* A record's bytes for list l past its text: a lone one's (host_slot). */
static inline size_t host_lone(const sy__cand *cands, list_ref l, size_t n) {
    const sy__cand *cd = &cands[l.off];
    if (l.len != 1)
        return 0;
    return HK_LONE + (host_lit_self(cd, n) ? sy__cand_lit_text(cd).len : 0);
}
static inline size_t host_mark(const builder *b, const uint32_t *up,
                               const lkey *key, const sy__cand *cands,
                               uint8_t *flag, uint32_t n, size_t *keys) {
    uint8_t host =
        n == ROOT_HOST || (n > ROOT_HOST && (flag[up[n] >> 1] & HF_HOST))
            ? HF_HOST
            : 0;
    flag[n] = n == ROOT_HOST ? HF_REACH | HF_HOST : host;
    if (host)
        flag[n] |= host_loose(b, up, flag, n, 0);
    if (n <= ROOT_HOST || !(up[n] & 1u) || !(flag[up[n] >> 1] & HF_REACH))
        return 0;
    const inode *p = &b->nodes[up[n] >> 1], *nd = &b->nodes[n];
    if (p->multi.len || (p->wild & WILD_MASK) != WILD_NONE)
        return 0; /* the walk collects or branches at the parent */
    flag[n] = HF_REACH | host | host_loose(b, up, flag, n, 0);
    uint8_t k = 0;
    if (nd->term.len && !nd->multi.len && nd->term.len <= UINT16_MAX)
        k |= HF_KEY;
    if (host_wild_key(b, nd) != NONE)
        k |= HF_WKEY;
    if (!k)
        return 0;
    size_t len = 0;
    for (uint32_t m = n; m != ROOT_HOST; m = up[m] >> 1)
        len += key[m].len + 1;
    if (len <= 1 || len - 1 > HE_MAX_LEN) /* none (0: an empty slot) */
        return 0;
    flag[n] =
        (uint8_t)((flag[n] & ~HF_LOOSE) | k | host_loose(b, up, flag, n, k));
    *keys += (k & HF_KEY ? 1u : 0) + (k & HF_WKEY ? 1u : 0);
    size_t rec = HK_HEAD + len - 1; /* len - 1: the dots between labels */
    list_ref wl = k & HF_WKEY ? b->nodes[host_wild_key(b, nd)].term : nd->term;
    return (k & HF_KEY ? rec + host_lone(cands, nd->term, len - 1) : 0) +
           (k & HF_WKEY ? rec + host_lone(cands, wl, len - 1) : 0);
}

/* zero: the table zeroed (else the caller zeroes it, a group per item,
 * so that its pages are faulted in over many calls, not by host_put's
 * random writes); bytes: the keys' records */
static inline bool host_alloc(const sy__alloc *a, size_t count, size_t bytes,
                              bool zero, void **mem, hgroup **tab,
                              uint32_t *gmask, char **keys) {
    *mem = NULL;
    *tab = NULL;
    *keys = NULL;
    *gmask = 0;
    if (!count)
        return true;
    /* load <= 3/4 */
    size_t groups =
        sy__pow2_at_least(1, (count * 4 + 3 * HG_SLOTS - 1) / (3 * HG_SLOTS));
    if (groups > UINT32_MAX || bytes > UINT32_MAX)
        return true; /* no table: every host is walked */
    size_t size = host_table_bytes((uint32_t)(groups - 1));
    /* zero: the one-shot build's, in huge pages (index_layout.c) */
    *mem = zero ? sy__alloc_huge(a, size, true) : sy__malloc(a, size);
    *keys = zero ? sy__alloc_huge(a, bytes ? bytes : 1, false)
                 : sy__malloc(a, bytes ? bytes : 1);
    if (!*mem || !*keys) {
        sy__free(a, *mem);
        sy__free(a, *keys);
        *mem = NULL;
        *keys = NULL;
        return false;
    }
    *tab = (hgroup *)(((uintptr_t)*mem + 63) & ~(uintptr_t)63);
    *gmask = (uint32_t)(groups - 1);
    return true;
}

/* Group g of the table emptied. */
static inline void host_zero_group(hgroup *tab, size_t g) {
    memset(&tab[g], 0, sizeof tab[g]);
}

/* One entry: its record at keys + off (written: len | HE_WILD, the list's
 * length, the text k; a lone list's candidate from cands before it, and
 * after the text its literal Path's, host_lone), list l; in the first
 * group from the hash with a free slot. Returns where the text now is
 * (k's bytes may lie under the record). */
static inline const char *host_slot(hgroup *tab, uint32_t gmask, char *keys,
                                    size_t *used, const sy__cand *cands,
                                    const char *k, uint16_t len, list_ref l) {
    size_t off = *used, n = len & HE_MAX_LEN, pad = 0;
    if (l.len == 1) {
        pad = (8 - off % 8) % 8;
        off += pad + sizeof(sy__cand);
    }
    memmove(keys + off + HK_HEAD, k, n); /* first: k may lie below off */
    size_t end = off + HK_HEAD + n;
    if (l.len == 1) {
        memset(keys + *used, 0, pad);
        sy__cand cd = cands[l.off];
        if (host_lit_self(&cd, n)) { /* after the key's, from the copy */
            sy_str lit = sy__cand_lit_text(&cd);
            memcpy(keys + end, lit.ptr, lit.len);
            end += lit.len;
            cd.vars = (cd.vars & ~0xffffu) | SY_CAND_LIT_SELF |
                      (uint32_t)(sizeof(sy__cand) + HK_HEAD + n);
        }
        memcpy(keys + off - sizeof(sy__cand), &cd, sizeof(sy__cand));
    }
    uint16_t head[2] = {len, (uint16_t)l.len};
    memcpy(keys + off, head, HK_HEAD);
    *used = end;
    uint64_t h = host_hash(keys + off + HK_HEAD, n); /* k moved */
    uint32_t g = (uint32_t)h & gmask;
    while (!(~tab[g].tags & HT_HIGHS))
        g = (g + 1) & gmask;
    unsigned j = (unsigned)__builtin_ctzll(~tab[g].tags & HT_HIGHS) >> 3;
    tab[g].tags |= host_tag(h) << (8 * j);
    tab[g].slot[j] = (hslot){(uint32_t)off, l.off};
    return keys + off + HK_HEAD;
}

static inline void host_put(const builder *b, const uint32_t *up,
                            const lkey *key, const uint8_t *flag, uint32_t n,
                            hgroup *tab, uint32_t gmask, char *keys,
                            size_t *used, const sy__cand *cands, hfilter *f) {
    if (flag[n] & HF_LOOSE)
        f->loose = 1;
    if (!tab || !(flag[n] & (HF_KEY | HF_WKEY)))
        return;
    char *k = keys + *used + HK_HEAD; /* written here, then moved */
    const char *text = k;
    size_t len = 0;
    for (uint32_t m = n;;) {
        size_t l = key[m].len;
        memcpy(k + len, b->strings.ptr + key[m].str_off, l);
        len += l;
        m = up[m] >> 1;
        if (m == ROOT_HOST)
            break;
        k[len++] = '.';
    }
    unsigned char c0 = (unsigned char)k[0];
    if (flag[n] & HF_KEY) {
        f->kind[0].lens |= 1ull << (len & 63);
        f->kind[0].first[c0 >> 6] |= 1ull << (c0 & 63);
        text = host_slot(tab, gmask, keys, used, cands, text, (uint16_t)len,
                         b->nodes[n].term);
    }
    if (flag[n] & HF_WKEY) {
        f->kind[1].lens |= 1ull << (len & 63);
        f->kind[1].first[c0 >> 6] |= 1ull << (c0 & 63);
        host_slot(tab, gmask, keys, used, cands, text,
                  (uint16_t)(len | HE_WILD),
                  b->nodes[host_wild_key(b, &b->nodes[n])].term);
    }
}

/* The whole-host table's slot for key text `key` of kind `wild`
 * (HE_WILD or 0), or NULL: a group's tags compared at once (a byte of
 * x is 0 where the tag is the key's; the borrow may flag a byte above
 * such a one, which the compare refuses), then its next group only when
 * it has no empty slot. *rec: the slot's record. */
static inline __attribute__((always_inline)) const hslot *
host_probe(const sy__index *ix, sy_str key, uint32_t wild, const char **rec) {
    uint64_t h = host_hash(key.ptr, key.len), want_tags = host_tag(h) * HT_ONES;
    uint32_t want = (uint32_t)key.len | wild;
    for (uint32_t g = (uint32_t)h & ix->host_gmask;;
         g = (g + 1) & ix->host_gmask) {
        const hgroup *gr = &ix->hosts[g];
        uint64_t t = gr->tags, x = t ^ want_tags;
        for (uint64_t m = (x - HT_ONES) & ~x & HT_HIGHS; m; m &= m - 1) {
            const hslot *e = &gr->slot[(unsigned)__builtin_ctzll(m) >> 3];
            const char *r = ix->hkeys + e->off;
            uint16_t len, term_len;
            host_rec_head(r, &len, &term_len);
            if (len == want && host_key_eq(r + HK_HEAD, key.ptr, key.len)) {
                *rec = r;
                return e;
            }
        }
        if (~t & HT_HIGHS)
            return NULL;
    }
}

/* A hit's list (its record's length; a lone one from the record). */
static inline sy__cand_list host_hit(const sy__index *ix, const hslot *e,
                                     const char *rec, uint8_t proof,
                                     uint8_t host) {
    uint16_t len, term_len;
    host_rec_head(rec, &len, &term_len);
    const sy__cand *c = term_len == 1
                            ? (const sy__cand *)(const void *)(rec - sizeof *c)
                            : ix->cands + e->term_off;
    return (sy__cand_list){c, ix->vars, term_len, proof, true, host};
}

/*
 * The whole-host table's list for `host` (not empty) of kind `wild`: 0,
 * the host itself (a hit proves its Host predicates); HE_WILD, the
 * wildcard key for a host of one more label, the host past its first
 * '.' when that label is not empty (a hit is the wildcard child's term
 * list: no proof, exact; every {var} or "*" of its routes is the first
 * label, SY_LIST_WILD_KEY). Either hit is the host walk's whole answer.
 */
static inline __attribute__((always_inline)) bool
index_host_kind(const sy__index *ix, sy_str host, uint32_t wild,
                sy__cand_list *out) {
    sy_str key = host;
    if (wild) {
        size_t d = 0; /* the first label: short, so a loop and no call */
        while (d < host.len && host.ptr[d] != '.')
            d++;
        if (d == 0 || d + 1 >= host.len)
            return false;
        key = (sy_str){host.ptr + d + 1, host.len - d - 1};
    }
    unsigned char c0 = (unsigned char)key.ptr[0];
    const hkind *f = &ix->hfilt.kind[wild != 0];
    if (key.len > HE_MAX_LEN || !(f->lens >> (key.len & 63) & 1u) ||
        !(f->first[c0 >> 6] >> (c0 & 63) & 1u))
        return false;
    const char *rec;
    const hslot *e = host_probe(ix, key, wild, &rec);
    if (!e)
        return false;
    *out = host_hit(ix, e, rec, wild ? SY_PROOF_NONE : SY_PROOF_HOST,
                    wild ? SY_LIST_WILD_KEY : 1);
    return true;
}

/* sy__index_host_exact, inline (host.len > 0). */
static inline bool index_host_exact(const sy__index *ix, sy_str host,
                                    sy__cand_list *out) {
    return ix->hosts && index_host_kind(ix, host, 0, out);
}

/* The wildcard key's list (index_host_exact's miss; host.len > 0). */
static inline bool index_host_wild(const sy__index *ix, sy_str host,
                                   sy__cand_list *out) {
    return ix->hosts && ix->hfilt.kind[1].lens &&
           index_host_kind(ix, host, HE_WILD, out);
}

/* Whether a lookup without host labels would find no list at all: the
 * path trie's root has no child, no list (after pruning: every route
 * placed in the host trie) and there is no generic list. The matcher
 * then skips sy__index_lookup after a whole-host hit. */
static inline bool index_path_none(const sy__index *ix) {
    const xnode *r = &ix->nodes[ROOT_PATH];
    return !ix->generic_some && !r->tlen &&
           !(r->shape & (X_NLIT | X_WILD | X_HASH | X_SIDE | X_MULTI));
}

/* Whether cd is one of ix's candidates, with its slot in *slot: in the
 * pool, or an X_LONE node's or a host key record's (the slot of its copy
 * in the pool). */
bool sy__index_cand_slot(const sy__index *ix, const sy__cand *cd,
                         uint32_t *slot); /* index.c */

/* Whether every list of the host trie is a key's (hfilter.loose): then
 * a host without an empty label (no leading, trailing or doubled '.':
 * the walk drops those labels, the probes do not) that both probes
 * missed meets no list in a walk either, and the matcher skips it. */
static inline bool index_host_keyed(const sy__index *ix) {
    return ix->hosts && !ix->hfilt.loose;
}

/* The candidate entry of pending entry `p` of the route described by
 * `ri`: what the walk proves travels with it only in the trie (path or
 * host) that proves it. */
static inline sy__cand cand_of(const pending *p, const rinfo *ri) {
    int d = p->dim < 2 ? (int)p->dim : 0;
    bool walk = p->dim < 2 && ri->flags[d];
    return (sy__cand){ri->rtag, walk ? ri->vars[d] : 0, ri->mbits[walk ? d : 2],
                      walk ? ri->flags[d] : 0, walk ? ri->nvars[d] : 0};
}

#endif
