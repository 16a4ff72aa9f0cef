/*
 * index_layout.c - the index's layout (index_int.h "layout"): counting the
 * built trie's nodes and edges, ordering them breadth-first within a
 * cache budget, placing each node's children in its hashed child table
 * or its direct run, and handing the finished arrays to the index. The
 * trie itself is built in index.c; lookups are there too.
 */
#include "snapshot/index_int.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

bool sy__ix_layout_start(builder *b, layout *L) {
    const sy__alloc *a = b->a;
    uint32_t nodes = b->node_count;
    spare room = L->room;
    memset(L, 0, sizeof *L);
    L->room = room;
    L->up = b->up;
    L->key = b->key;
    b->up = NULL;
    b->key = NULL;
    L->live = spare_get(a, &L->room, (size_t)nodes * sizeof *L->live, true);
    L->kids = spare_get(a, &L->room, nodes, true);
    L->cstart =
        spare_get(a, &L->room, ((size_t)nodes + 1) * sizeof *L->cstart, false);
    if (!L->up || !L->key || !L->live || !L->kids || !L->cstart)
        return false;
    L->cstart[0] = 0;
    return true;
}

static inline bool has_wild(const inode *nd) {
    return (nd->wild & WILD_MASK) != WILD_NONE;
}

/* Lists that a node's u16 lengths and one offset cannot say. */
static inline bool needs_side(const inode *nd) {
    return nd->term.len >= UINT16_MAX || nd->multi.len >= UINT16_MAX ||
           (nd->term.len && nd->multi.len &&
            nd->multi.off != nd->term.off + nd->term.len);
}

static inline size_t edge_len(const builder *b, const layout *L, uint32_t n) {
    (void)b;
    return n > ROOT_HOST && (L->up[n] & 1u) ? L->key[n].len : 0;
}

void sy__ix_layout_count(const builder *b, layout *L, uint32_t n) {
    uint32_t lv = L->live[n];
    uint32_t cnt = lv & LIVE ? lv & ~LIVE : 0;
    L->cstart[n + 1] = L->cstart[n] + cnt;
    if (!(lv & LIVE))
        return;
    L->count++;
    const inode *nd = &b->nodes[n];
    bool w = has_wild(nd);
    if (cnt - w > DIRECT_MAX) /* kids[] holds the host flags still */
        L->nhash[(L->kids[n] & HF_HOST) != 0] += cnt - w;
    size_t len = edge_len(b, L, n);
    if (len > KEY_BYTES)
        L->long_bytes += len - 8;
    L->nside += needs_side(nd);
    /* from now on: the cursor of n's literal children in clist; and its
     * shape's two bits in kids[] (the host flags are used up) */
    L->live[n] = LIVE | (L->cstart[n] + w);
    L->kids[n] =
        (uint8_t)((cnt - w > DIRECT_MAX ? LK_HASH : 0) | (w ? LK_WILD : 0));
}

/* n slots for the child table: in huge pages and zeroed (zero), else not
 * zeroed. */
static xslot *slots_alloc(const sy__alloc *a, size_t n, bool zero) {
    return zero ? sy__alloc_huge(a, n * sizeof(xslot), true)
                : sy__malloc(a, n * sizeof(xslot));
}

bool sy__ix_layout_alloc(const sy__alloc *a, layout *L, bool zero) {
    size_t n = L->count, nk = n > 2 ? n - 2 : 1;
    L->clist = spare_get(a, &L->room, nk * sizeof *L->clist, false);
    L->order = spare_get(a, &L->room, n * 3 * sizeof *L->order, false);
    L->stack = spare_get(a, &L->room, n * sizeof *L->stack, false);
    /* zero: the one-shot build, whose node array and child table are in
     * huge pages (sy__alloc_huge); the stepwise build's pages are faulted
     * a share at a time, so no 2 MiB fault lands in a publish */
    L->mem = zero ? sy__alloc_huge(a, n * sizeof *L->xn + 64, false)
                  : sy__malloc(a, n * sizeof *L->xn + 64);
    if (L->long_bytes)
        L->strings = sy__malloc(a, L->long_bytes);
    if (L->nside)
        L->side = sy__malloc(a, L->nside * sizeof *L->side);
    L->slots_huge = zero;
    for (int t = 0; t < 2; t++) {
        if (!L->nhash[t])
            continue;
        size_t cap = slot_homes(L->nhash[t]);
        L->slots[t] = cap + SLOT_TAIL > UINT32_MAX
                          ? NULL
                          : slots_alloc(a, cap + SLOT_TAIL, zero);
        L->slot_mask[t] = (uint32_t)(cap - 1);
        L->slot_count[t] = (uint32_t)(cap + SLOT_TAIL);
        if (!L->slots[t])
            return false;
    }
    if (!L->clist || !L->order || !L->stack || !L->mem ||
        (L->long_bytes && !L->strings) || (L->nside && !L->side))
        return false;
    L->xn = (xnode *)(((uintptr_t)L->mem + 63) & ~(uintptr_t)63);
    L->parent = L->order + n;
    L->first = L->parent + n;
    /* the roots first, then the path root's subtree, then the host's */
    L->order[ROOT_PATH] = ROOT_PATH;
    L->order[ROOT_HOST] = ROOT_HOST;
    L->parent[ROOT_PATH] = L->parent[ROOT_HOST] = 0;
    L->cursor = 2;
    L->stack[0] = (lframe){ROOT_HOST, ROOT_HOST, 0, 0, 0, 0};
    L->stack[1] = (lframe){ROOT_PATH, ROOT_PATH, 0, 0, 0, 0};
    L->sp = 2;
    return true;
}

void sy__ix_layout_place(const builder *b, layout *L, uint32_t n) {
    (void)b;
    if (n <= ROOT_HOST || !(L->live[n] & LIVE))
        return;
    uint32_t p = L->up[n] >> 1;
    if (L->up[n] & 1u)
        L->clist[L->live[p]++ & ~LIVE] = n;
    else
        L->clist[L->cstart[p]] = n; /* the wildcard child first */
}

/* A node has its literal children in the child table (layout_count's
 * bit). */
static inline bool hashed(const builder *b, const layout *L, uint32_t o) {
    (void)b;
    return L->kids[o] & LK_HASH;
}

static inline uint32_t place(layout *L, uint32_t o, uint32_t parent) {
    uint32_t id = L->cursor++;
    L->order[id] = o;
    L->parent[id] = parent;
    return id;
}

size_t sy__ix_layout_order(const builder *b, layout *L, size_t budget) {
    (void)b;
    size_t done = 0;
    while (L->sp && done < budget) {
        lframe *f = &L->stack[L->sp - 1];
        done++;
        if (f->phase == 0) { /* entered: its children start here */
            L->first[f->id] = L->cursor;
            f->k = L->cstart[f->old];
            f->end = L->cstart[f->old + 1];
            f->hash = L->kids[f->old] & LK_HASH;
            f->phase = 1;
        } else if (f->k == f->end && (f->hash || f->phase == 2)) {
            L->sp--;
        } else if (f->hash) { /* each child, then its subtree */
            uint32_t o = L->clist[f->k++];
            uint32_t id = place(L, o, f->id);
            L->stack[L->sp++] = (lframe){o, id, 0, 0, 0, 0};
        } else if (f->phase == 1) { /* the children together */
            if (f->k < f->end) {
                place(L, L->clist[f->k++], f->id);
            } else {
                f->phase = 2;
                f->k = L->cstart[f->old];
            }
        } else { /* then their subtrees */
            uint32_t id = L->first[f->id] + (f->k - L->cstart[f->old]);
            L->stack[L->sp++] = (lframe){L->clist[f->k++], id, 0, 0, 0, 0};
        }
    }
    return done;
}

void sy__ix_layout_node(const builder *b, layout *L, uint32_t j) {
    uint32_t o = L->order[j];
    const inode *nd = &b->nodes[o];
    xnode x = {.kids = L->first[j]};
    size_t len = edge_len(b, L, o);
    if (len) {
        const lkey *e = &L->key[o];
        const char *seg = b->strings.ptr + e->str_off;
        x.len = (uint16_t)len;
        if (len <= KEY_BYTES) { /* its words (the hash, unused, dropped) */
            seg_key k = segment_key(seg, len);
            x.w0 = k.w0;
            x.w1 = k.w1;
        } else { /* its first 8 bytes, the rest in strings */
            x.w0 = sy__load_u64(seg);
        }
        if (len > KEY_BYTES) {
            memcpy(L->strings + L->long_used, b->strings.ptr + e->str_off + 8,
                   len - 8);
            x.w1 = L->long_used;
            L->long_used += len - 8;
        }
    }
    bool w = has_wild(nd);
    uint32_t nlit = L->cstart[o + 1] - L->cstart[o] - w;
    x.shape =
        (uint16_t)((w ? X_WILD : 0) | (nlit > DIRECT_MAX ? X_HASH : nlit));
    if (!(nlit + w))
        x.kids = 0; /* a leaf */
    if (j > ROOT_HOST && (L->up[o] & 1u) &&
        hashed(b, L, L->order[L->parent[j]])) {
        x.shape |= X_HCHILD; /* its children (if any) start at j + 1 */
        x.kids = L->parent[j];
    }
    if (needs_side(nd)) {
        x.shape |= X_SIDE;
        x.tlen = x.mlen = UINT16_MAX;
        L->side[L->side_used++] = (xside){j, nd->term.off, nd->term.len,
                                          nd->multi.off, nd->multi.len};
    } else {
        x.off = nd->term.len ? nd->term.off : nd->multi.off;
        x.tlen = (uint16_t)nd->term.len;
        x.mlen = (uint16_t)nd->multi.len;
    }
    if (x.mlen)
        x.shape |= X_MULTI;
    /* a lone candidate into the node (X_LONE), its pool place in kids */
    bool lone = j > ROOT_HOST && !(nlit + w) && len < 8 &&
                !(x.shape & (X_HCHILD | X_SIDE)) && x.tlen == 1 && !x.mlen;
    if (lone) {
        x.shape |= X_LONE;
        x.kids = x.off;
    }
    L->xn[j] = x;
    if (lone)
        memcpy(&L->xn[j].w1, &L->cands[x.off], sizeof(sy__cand));
}

/* Child table t's tail doubled: a run reached its last slot (which
 * stays empty, so that a probe needs no bound). */
static bool slots_grow(const sy__alloc *a, layout *L, int t) {
    size_t n = L->slot_count[t], m = n + (n - ((size_t)L->slot_mask[t] + 1));
    xslot *s = m > UINT32_MAX ? NULL : slots_alloc(a, m, L->slots_huge);
    if (!s)
        return false;
    memcpy(s, L->slots[t], n * sizeof *s);
    memset(s + n, 0, (m - n) * sizeof *s);
    sy__free(a, L->slots[t]);
    L->slots[t] = s;
    L->slot_count[t] = (uint32_t)m;
    return true;
}

bool sy__ix_layout_hash(const builder *b, layout *L, uint32_t j) {
    if (!(L->xn[j].shape & X_HCHILD))
        return true;
    uint32_t p = L->parent[j];
    const xnode *x = &L->xn[j];
    uint64_t h = child_hash(
        p,
        x->len <= KEY_BYTES
            ? segment_hash(x->w0, x->w1, x->len)
            : segment_key(b->strings.ptr + L->key[L->order[j]].str_off, x->len)
                  .hash);
    /* the host trie's nodes are numbered after the path trie's: from
     * its root's first child on */
    int t = j >= L->first[ROOT_HOST];
    /* past the run's smaller hashes and its equal ones (so that ties
     * keep the order of j, the same in both builds), to the first larger
     * or the run's end, which moves a slot on */
    uint32_t nt = slot_ntag(h);
    size_t i = child_slot(h, L->slot_mask[t]), end;
    xslot *sl = L->slots[t];
    while (sl[i].child && sl[i].ntag >= nt)
        i++;
    for (end = i; sl[end].child; end++)
        ;
    if (end + 1 == L->slot_count[t]) {
        if (!slots_grow(b->a, L, t))
            return false;
        sl = L->slots[t];
    }
    memmove(&sl[i + 1], &sl[i], (end - i) * sizeof *sl);
    sl[i] = (xslot){j, nt};
    return true;
}

void sy__ix_layout_give(layout *L, sy__index *ix) {
    ix->nodes = L->xn;
    ix->nodes_mem = L->mem;
    ix->node_count = L->count;
    ix->slots = L->slots[0];
    ix->slot_mask = L->slot_mask[0];
    ix->slot_count = L->slot_count[0];
    ix->slot_shift =
        (uint8_t)(L->slot_mask[0] ? __builtin_clzll((uint64_t)L->slot_mask[0])
                                  : 63);
    ix->hslots = L->slots[1];
    ix->hslot_mask = L->slot_mask[1];
    ix->hslot_count = L->slot_count[1];
    ix->hslot_shift =
        (uint8_t)(L->slot_mask[1] ? __builtin_clzll((uint64_t)L->slot_mask[1])
                                  : 63);
    ix->strings = L->strings;
    ix->side = L->side;
    ix->nside = (uint32_t)L->nside;
    ix->bytes += (size_t)L->count * sizeof *L->xn + 64 + L->long_bytes +
                 L->nside * sizeof *L->side +
                 ((size_t)L->slot_count[0] + L->slot_count[1]) * sizeof(xslot);
    L->xn = NULL;
    L->mem = NULL;
    L->slots[0] = L->slots[1] = NULL;
    L->strings = NULL;
    L->side = NULL;
}

void sy__ix_layout_done(const sy__alloc *a, layout *L) {
    sy__free(a, L->up);
    sy__free(a, L->key);
    spare_put(a, &L->room, L->live);
    spare_put(a, &L->room, L->kids);
    spare_put(a, &L->room, L->cstart);
    spare_put(a, &L->room, L->clist);
    spare_put(a, &L->room, L->order);
    spare_put(a, &L->room, L->stack);
    sy__free(a, L->mem);
    sy__free(a, L->slots[0]);
    sy__free(a, L->slots[1]);
    sy__free(a, L->strings);
    sy__free(a, L->side);
    memset(L, 0, sizeof *L);
}
