/*
 * index_hash.h - how the index hashes a path or host segment, and an
 * edge (a parent node and a segment): the words a segment is compared
 * by (segment_key), its hash, and the child table's hash, slot and tag.
 * The one-shot build (index_build.c), the stepwise build (index_step.c),
 * the layout (index_layout.c) and the lookups (index_lookup.h) all hash
 * the same way, from here.
 */
#ifndef SY_INDEX_HASH_H
#define SY_INDEX_HASH_H

#include "base/util.h"

#include <stddef.h>
#include <stdint.h>

#define KEY_BYTES 16

/*
 * A segment as the build's edges compare it: two words that determine its
 * first KEY_BYTES bytes given its length (segment_key), its length and a
 * 16-bit tag from its hash.
 */
typedef struct seg_key {
    uint64_t w0, w1;
    uint64_t hash;    /* of the segment alone; combined with the parent */
    uint32_t len_tag; /* length | tag << 16 */
} seg_key;

/* Edge hash = the segment's own hash combined with the parent node, so a
 * lookup hashes each request segment once, whatever node it is tried at.
 * A full mix: the segment hash's low bits alone repeat for segments that
 * differ only past their first bytes ("user1" .. "user99999"), and a
 * cheaper combine (xor with parent * odd, with or without folding the
 * high half down) made the static and param tables' probes several times
 * longer. */
static inline uint64_t edge_combine(uint32_t parent, uint64_t seg_hash) {
    uint64_t h = seg_hash ^ ((uint64_t)parent * 0x9e3779b97f4a7c15ull);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

/* The child table's hash of (parent, segment): one multiply, the slot
 * taken from its high bits (child_slot), which depend on every bit of
 * the segment's hash and the parent. (Slots from the low bits, which
 * depend only on the low bits of the product's input, needed a fold
 * before and after the multiply: "p0" .. "p99999", whose last bytes
 * land in the segment hash's high bits, probed ~19 slots without them.)
 * The tag is the high half: with the slot's bits the check before a
 * node is read. */
static inline uint64_t child_hash(uint32_t parent, uint64_t seg_hash) {
    return (seg_hash ^ parent) * 0xbf58476d1ce4e5b9ull;
}

/* The child table's slot of hash h in a table of mask + 1 slots. */
static inline uint32_t child_slot(uint64_t h, uint32_t mask) {
    return (uint32_t)(h >> __builtin_clzll((uint64_t)mask));
}

/* The hash of a segment of up to KEY_BYTES bytes, from its words. */
static inline uint64_t segment_hash(uint64_t w0, uint64_t w1, size_t len) {
    if (len < 8) {
        /* w0 alone: one multiply (the combine mixes it fully; its high
         * bits, the tag's, are the product's best) */
        return (w0 ^ (uint64_t)len) * 0x9e3779b97f4a7c15ull;
    }
    uint64_t h = (w0 ^ (uint64_t)len) * 0x9e3779b97f4a7c15ull;
    h ^= (w1 + (h >> 31)) * 0xc2b2ae3d27d4eb4full;
    return h ^ (h >> 29);
}

/* Words that, with the length, determine the first 16 bytes: overlapping
 * loads, so no byte past the segment is read. */
static inline seg_key segment_key(const char *s, size_t len) {
    seg_key k;
    if (len >= 8) {
        k.w0 = sy__load_u64(s);
        k.w1 = len >= 16 ? sy__load_u64(s + 8) : sy__load_u64(s + len - 8);
    } else if (len >= 4) {
        k.w0 = sy__load_u32(s) | (uint64_t)sy__load_u32(s + len - 4) << 32;
        k.w1 = 0;
    } else if (len) {
        k.w0 = (uint64_t)(unsigned char)s[0] |
               (uint64_t)(unsigned char)s[len / 2] << 8 |
               (uint64_t)(unsigned char)s[len - 1] << 16;
        k.w1 = 0;
    } else {
        k.w0 = k.w1 = 0;
    }
    if (len <= KEY_BYTES) {
        k.hash = segment_hash(k.w0, k.w1, len);
    } else {
        k.hash = sy__hash64(s, len, 0x5e9);
    }
    k.len_tag = (uint32_t)(len & 0xffff) | (uint32_t)(k.hash >> 48) << 16;
    return k;
}

#endif
