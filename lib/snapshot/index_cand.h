/*
 * index_cand.h - an index candidate (sy__cand): the 16 bytes a list holds
 * for one route, and how its fields pack what the matcher needs to
 * decide the route without reading it (the methods, the predicate a walk
 * proves, one {var}, a literal Path). index.h's lists are arrays of
 * them; the builds (index_int.h) write them, the matcher reads them.
 */
#ifndef SY_INDEX_CAND_H
#define SY_INDEX_CAND_H

#include "route/route.h"

#include <stdbool.h>
#include <stdint.h>

/*
 * One candidate of a list, with what the matcher needs to decide it
 * without touching the route when the walk already proved it, and the
 * route itself (16 bytes, four to a line: no candidate straddles two):
 *
 *   rtag              | vars              | mbits             | flags | nvars |
 *   the slot's route  | u32: offset in    | u16: the methods  | u8    | u8    |
 *   and, in its top   | the index's var   | and the pred      |       |       |
 *   16 bits, where    | pool, or the one  | (sy__cand_mbits)  |       |       |
 *   its preds lie     | var (VAR1)        |                   |       |       |
 *
 * The candidate's slot is not in it: an index's slots are an array
 * parallel to its candidates (sy__index_cand_slot), an overlay group's
 * after its keys (sy__overlay_cand_slot), read only where the route is
 * not enough (a snapshot with dead entries, a 405's note, a weight, a
 * merge of several lists). The route is the one the slot held when the
 * candidate was made: while the slot lives it holds that route (a slot's
 * route never changes; a removed route leaves its slot NULL, and a slot
 * an index holds is not reused until no index holds it), so a matcher
 * that knows the slot lives (no index entry of its snapshot is dead:
 * sy__match_prep's cands_live) takes the route from here and reads no
 * slot chunk.
 *
 * flags: SY_CAND_WALK, SY_CAND_WHOLE, SY_CAND_VAR1, SY_CAND_LIT and the
 * latter's predicate.
 */
typedef struct sy__cand {
    /* the slot's route, while the slot lives (sy__cand_route), and in the
     * pointer's top 16 bits where its compiled predicates lie
     * (sy__cand_tag, sy__cand_preds) */
    uintptr_t rtag;
    /* the first of nvars entries of the index's var pool; SY_CAND_VAR1:
     * the one var, or with SY_CAND_LIT and no var the literal Path */
    uint32_t vars;
    /* the AND of the route's Method predicate masks
     * (sy__pred_method_mask) as sy__cand_mbits packs it, and
     * SY_CAND_WALK's predicate, the one it proves (sy__cand_pred) */
    uint16_t mbits;
    uint8_t flags;
    uint8_t nvars; /* SY_CAND_WALK: its var pool entries */
} sy__cand;

/* The route's predicates in the candidate's route word, on x86-64: a
 * route there lies below 2^48 (route.h SY_ROUTE_ADDR_BITS: 48-bit
 * addresses; with 5-level paging the kernel gives an address above 47
 * bits only to an mmap that asks for one, and sy__route_new refuses a
 * block a host's allocator placed there), so its pointer's top 16 bits
 * carry the route's predicate count (bits 12-15: 1-15) and its compiled
 * objects' offset from the route in 8-byte units (bits 0-11, signed:
 * within 16 KiB, the route's block as route.c places them). A cold
 * lookup then goes from the candidate to the predicate slots without
 * reading the route struct's line for predicate_count and cpred
 * (docs/performance.md, "Round 11 (session 45)"). 0: not carried (no
 * predicates, more than 15, too far).
 * Elsewhere (AArch64's top-byte tags, MTE, 32-bit hosts) the word is the
 * pointer alone and the route is read. */
#define SY_CAND_TAGGED (SY_ROUTE_ADDR_BITS != 0)
#define SY_CAND_ROUTE_BITS SY_ROUTE_ADDR_BITS
#define SY_CAND_ROUTE_MASK ((UINT64_C(1) << SY_CAND_ROUTE_BITS) - 1)
static inline uintptr_t sy__cand_tag(const struct sy_route *r) {
    uintptr_t w = (uintptr_t)(const void *)r;
#if SY_CAND_TAGGED
    size_t n = r ? r->predicate_count : 0;
    if (!n || n > 15 || !r->cpred || (uint64_t)w >> SY_CAND_ROUTE_BITS)
        return w;
    intptr_t off = (intptr_t)((uintptr_t)(const void *)r->cpred - w);
    if (off % 8 || off < -2048 * 8 || off > 2047 * 8)
        return w;
    uint64_t t = (uint64_t)n << 12 | ((uint64_t)(off / 8) & 0xfffu);
    return (uintptr_t)((uint64_t)w | t << SY_CAND_ROUTE_BITS);
#else
    return w;
#endif
}
/* Candidate cd's route (the pointer without the tag). */
static inline const struct sy_route *sy__cand_route(const struct sy__cand *cd) {
#if SY_CAND_TAGGED
    return (const struct sy_route *)(uintptr_t)((uint64_t)cd->rtag &
                                                SY_CAND_ROUTE_MASK);
#else
    return (const struct sy_route *)cd->rtag;
#endif
}
/* The compiled predicates of cd's route r (cd's own, or its live slot's:
 * the same route) and their count in *n: from the tag when it has them,
 * else r's fields (NULL with no predicate). */
static inline const struct sy__pred *
sy__cand_preds(const struct sy__cand *cd, const struct sy_route *r, size_t *n) {
#if SY_CAND_TAGGED
    uint64_t w = (uint64_t)cd->rtag;
    size_t k = (size_t)(w >> 60);      /* the count: the tag's bits 12-15 */
    if (__builtin_expect(k != 0, 1)) { /* the offset: bits 0-11, signed */
        *n = k;
        return (const struct sy__pred *)(const void
                                             *)((const char *)(const void *)r +
                                                ((int64_t)(w << 4) >> 52) * 8);
    }
#endif
    *n = r->predicate_count;
    return *n ? sy__route_cpred(r, 0) : NULL;
}

/* Predicate i of cd's route r (i below its count), as sy__cand_preds. */
static inline const struct sy__pred *sy__cand_pred_at(const struct sy__cand *cd,
                                                      const struct sy_route *r,
                                                      size_t i) {
    size_t n;
    const char *p0 = (const char *)(const void *)sy__cand_preds(cd, r, &n);
    return (const struct sy__pred *)(const void *)(p0 +
                                                   i * SY_PRED_OBJECT_BYTES);
}

/* A method mask in a candidate's mbits: the standard methods' bits 0-8
 * as they are, bit 31 (another method: only a "maybe") at bit 15, bit 14
 * set when the mask is all ones (no Method predicate), the predicate in
 * bits 9-13. A request's method bit b (sy__method_bit: 0-8 or 31) is
 * then bit b & 15 (sy__cand_mbit): one AND. */
#define SY_CAND_M_OTHER 15
#define SY_CAND_M_NONE (1u << 14)
#define SY_CAND_PRED_SHIFT 9
#define SY_CAND_PRED_MAX 31 /* a walk proving a later predicate: none */
static inline uint16_t sy__cand_mbits(uint32_t mask, uint32_t pred) {
    return (uint16_t)((mask & 0x1ffu) | (mask >> 31) << SY_CAND_M_OTHER |
                      (mask == UINT32_MAX ? SY_CAND_M_NONE : 0) |
                      pred << SY_CAND_PRED_SHIFT);
}
static inline int sy__cand_mbit(int method_bit) {
    return method_bit & 15;
}
/* Whether the candidate's route has no Method predicate. */
static inline bool sy__cand_any_method(const struct sy__cand *cd) {
    return cd->mbits & SY_CAND_M_NONE;
}
/* SY_CAND_WALK: the route's predicate the walk proves. */
static inline uint32_t sy__cand_pred(const struct sy__cand *cd) {
    return (uint32_t)cd->mbits >> SY_CAND_PRED_SHIFT & SY_CAND_PRED_MAX;
}

/* SY_CAND_WALK: the route has one Path (or Host, by the trie it sits in)
 * predicate, `pred`, of one pattern made of literal, "*" and plain {var}
 * segments (and perhaps a "**" the walk meets last): an exact walk to its
 * list proves it, and its captures are the request's segments at its
 * {var}s. SY_CAND_WHOLE: besides, the route has only Method predicates,
 * so the walk and the method mask decide it without touching the route.
 * SY_CAND_LIT (host trie, with SY_CAND_WALK): besides the Host and its
 * Method predicates, the route has one Path, a literal the matcher
 * compares with a plain path's text (sy__pred_path_lit), predicate
 * flags >> SY_CAND_LIT_SHIFT: so it is decided by that compare alone,
 * without the route's other predicates. */
enum { SY_CAND_WALK = 1, SY_CAND_WHOLE = 2, SY_CAND_VAR1 = 4, SY_CAND_LIT = 8 };
#define SY_CAND_LIT_SHIFT 4 /* above the flags */
#define SY_CAND_LIT_MAX 15  /* the highest predicate index it holds */

/* A {var} of a walk-proven pattern: its name (into the pattern's text,
 * valid while the slot's route is; NULL for a "*", which captures nothing
 * but also needs a non-empty segment) and the segment it captures (a path
 * segment's index; for a host, the label's index counted from the last). */
typedef struct sy__cand_var {
    sy_str name;
    uint32_t seg;
} sy__cand_var;

/* SY_CAND_VAR1: a walk-proven pattern's one {var} (or "*") whose name
 * lies within 32 KiB of its route and whose name length and segment are
 * below 256 is its candidate's `vars` itself, no entry of the var pool:
 * the name's offset from the route (int16, 0 with length 0 for a "*"),
 * its length, the segment. */
static inline uint32_t sy__cand_var1_pack(const struct sy_route *r,
                                          sy__cand_var v, bool *ok) {
    intptr_t off =
        v.name.ptr
            ? (intptr_t)((uintptr_t)v.name.ptr - (uintptr_t)(const void *)r)
            : 0;
    *ok = off >= INT16_MIN && off <= INT16_MAX && v.name.len < 256 &&
          v.seg < 256 && (v.name.ptr || !v.name.len);
    return (uint32_t)(uint16_t)(int16_t)off | (uint32_t)v.name.len << 16 |
           v.seg << 24;
}

/* Candidate cd's var entries: the pool's at `pool` + cd->vars, or its one
 * (SY_CAND_VAR1) decoded into *one. */
static inline const sy__cand_var *sy__cand_vars(const sy__cand_var *pool,
                                                const struct sy__cand *cd,
                                                sy__cand_var *one) {
    if (!(cd->flags & SY_CAND_VAR1))
        return pool + cd->vars;
    uint32_t v = cd->vars;
    size_t len = v >> 16 & 0xffu;
    const char *name =
        (const char *)((uintptr_t)(const void *)sy__cand_route(cd) +
                       (uintptr_t)(intptr_t)(int16_t)(v & 0xffffu));
    *one = (sy__cand_var){{len || (v & 0xffffu) ? name : NULL, len}, v >> 24};
    return one;
}

/* SY_CAND_LIT with SY_CAND_VAR1 and no var (nvars 0): `vars` is the
 * literal Path itself, packed as a {var} is (its text within 32 KiB of
 * its route): the text's offset from the route (int16), its length (<
 * 256), bit 24 its last "**" (lit_rest), bit 25 its trailing-slash
 * option. The matcher then compares the path with the text alone: a cold
 * Host route's lookup reads neither the route's struct nor its predicate,
 * two dependent lines (docs/performance.md, "the Host route's literal in
 * its candidate"). */
#define SY_CAND_LIT_REST (1u << 24)
#define SY_CAND_LIT_TRAILING (1u << 25)
/* Bit 26: the offset is from the candidate itself, not its route: a host
 * key record's copy (index_int.h host_slot), whose text follows the key's
 * in the record, so a cold Host lookup reads no line of the route arena,
 * whose 4 KiB pages grow with the table (docs/performance.md, "Round 11
 * (session 44)"). Only in such a copy: one moved elsewhere would point
 * past it. */
#define SY_CAND_LIT_SELF (1u << 26)
static inline uint32_t sy__cand_lit_pack(const struct sy_route *r,
                                         const char *text, size_t len,
                                         bool rest, bool trailing, bool *ok) {
    intptr_t off = (intptr_t)((uintptr_t)text - (uintptr_t)(const void *)r);
    *ok = text && off >= INT16_MIN && off <= INT16_MAX && len < 256;
    return (uint32_t)(uint16_t)(int16_t)off | (uint32_t)len << 16 |
           (rest ? SY_CAND_LIT_REST : 0) |
           (trailing ? SY_CAND_LIT_TRAILING : 0);
}

/* Whether candidate cd, SY_CAND_LIT, carries its literal Path (above). */
static inline bool sy__cand_lit_here(const struct sy__cand *cd) {
    return !cd->nvars && (cd->flags & SY_CAND_VAR1);
}

/* Whether candidate cd carries its literal Path (above). */
static inline bool sy__cand_has_lit(const struct sy__cand *cd) {
    return (cd->flags & SY_CAND_LIT) && sy__cand_lit_here(cd);
}

/* A candidate's literal Path (sy__cand_has_lit): its text and length. */
static inline sy_str sy__cand_lit_text(const struct sy__cand *cd) {
    uint32_t v = cd->vars;
    uintptr_t at = v & SY_CAND_LIT_SELF
                       ? (uintptr_t)(const void *)cd
                       : (uintptr_t)(const void *)sy__cand_route(cd);
    return (sy_str){
        (const char *)(at + (uintptr_t)(intptr_t)(int16_t)(v & 0xffffu)),
        v >> 16 & 0xffu};
}

#endif
