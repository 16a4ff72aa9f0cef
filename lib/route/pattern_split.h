/*
 * pattern_split.h - the path split's inline part (pattern_split.c has the
 * rest): the byte-class masks of a path and the split of a path of up to
 * 64 bytes without '%' or ';', inline so the matcher's request path runs
 * it without a call. Internal to pattern_split.c and match.c.
 */
#ifndef SY_PATTERN_SPLIT_H
#define SY_PATTERN_SPLIT_H

#include "route/pattern.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Grow segs to room for n segments (pattern_split.c): one block of
 * 2 * cap slices, dec the first half, raw's the second when segments need
 * decoding (else raw is dec). The slices held are kept in dec only. */
bool sy__segs_reserve(sy__segments *s, size_t n, const sy__alloc *a);

/* Room for `need` segments; the arrays may move (the caller reloads). */
static inline bool sy__segs_room(sy__segments *segs, size_t need,
                                 const sy__alloc *alloc) {
    return need <= segs->cap || sy__segs_reserve(segs, need, alloc);
}

#if defined(__SSE2__)
/* The masks of 16 bytes: bit i is byte i. Returns the '/' bits; `dot`
 * gets the '.' bits and `odd` the '%' and ';' bits, or, `fold` (a
 * constant at every call), `dot` the '.', '%' and ';' bits in one mask
 * and `odd` none: the path scan's one test of what is rare. */
static inline __attribute__((always_inline)) unsigned
block_scan(__m128i v, unsigned *dot, unsigned *odd, bool fold) {
    __m128i d = _mm_cmpeq_epi8(v, _mm_set1_epi8('.'));
    __m128i o = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('%')),
                             _mm_cmpeq_epi8(v, _mm_set1_epi8(';')));
    if (fold) {
        *dot = (unsigned)_mm_movemask_epi8(_mm_or_si128(d, o));
        *odd = 0;
    } else {
        *dot = (unsigned)_mm_movemask_epi8(d);
        *odd = (unsigned)_mm_movemask_epi8(o);
    }
    return (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('/')));
}

/* The n bytes at p (n < 8) in the low bytes of a word, zeros above:
 * overlapping loads, the second shifted so its bytes land in place. */
static inline uint64_t load_short(const char *p, size_t n) {
    if (n >= 4)
        return sy__load_u32(p) |
               ((uint64_t)sy__load_u32(p + n - 4) << 32) >> ((8 - n) * 8);
    uint64_t w = n ? (unsigned char)p[0] : 0;
    if (n > 1)
        w |= (uint64_t)(unsigned char)p[1] << 8;
    if (n > 2)
        w |= (uint64_t)(unsigned char)p[2] << 16;
    return w;
}

/*
 * The masks of the 16-byte block at `off` of p[0..len), never reading past
 * the path: a last partial block is the path's last 16 bytes with the bits
 * already seen shifted out; a path under 16 bytes is loaded as two words,
 * its bytes in place and zeros after them (a zero byte is in no class), so
 * its masks need no fixing.
 */
static inline __attribute__((always_inline)) unsigned
block_at_as(const char *p, size_t len, size_t off, unsigned *dot, unsigned *odd,
            bool fold) {
    size_t rest = len - off;
    if (rest >= 16)
        return block_scan(_mm_loadu_si128((const void *)(p + off)), dot, odd,
                          fold);
    if (len >= 16) { /* the last 16 bytes; drop the ones seen */
        unsigned drop = (unsigned)(16 - rest);
        unsigned sl = block_scan(_mm_loadu_si128((const void *)(p + len - 16)),
                                 dot, odd, fold);
        *dot >>= drop;
        *odd >>= drop;
        return sl >> drop;
    }
    uint64_t lo, hi = 0;
    if (len >= 8) { /* bytes 0-7, then 8 .. len-1 from the last eight */
        lo = sy__load_u64(p);
        if (len > 8)
            hi = sy__load_u64(p + len - 8) >> ((16 - len) * 8);
    } else {
        lo = load_short(p, len);
    }
    return block_scan(_mm_set_epi64x((long long)hi, (long long)lo), dot, odd,
                      fold);
}

/*
 * The masks of a whole path of 1..64 bytes, bit i for byte i: 16-byte
 * blocks, the last one the path's last 16 bytes shifted into place (the
 * bytes it shares with the block before give the same bits, so OR is
 * exact); a path under 16 bytes is block_at's two words.
 */
static inline __attribute__((always_inline)) uint64_t
path_masks_as(const char *p, size_t len, uint64_t *dot, uint64_t *odd,
              bool fold) {
    unsigned d, o, sl;
    if (len < 16) {
        sl = block_at_as(p, len, 0, &d, &o, fold);
        *dot = d;
        *odd = o;
        return sl;
    }
    uint64_t s = 0, dt = 0, od = 0;
    for (size_t off = 0; off + 16 < len; off += 16) {
        sl = block_scan(_mm_loadu_si128((const void *)(p + off)), &d, &o, fold);
        s |= (uint64_t)sl << off;
        dt |= (uint64_t)d << off;
        od |= (uint64_t)o << off;
    }
    size_t last = len - 16;
    sl = block_scan(_mm_loadu_si128((const void *)(p + last)), &d, &o, fold);
    *dot = dt | (uint64_t)d << last;
    *odd = od | (uint64_t)o << last;
    return s | (uint64_t)sl << last;
}

/* block_at_as and path_masks_as with the three masks apart. */
static inline unsigned block_at(const char *p, size_t len, size_t off,
                                unsigned *dot, unsigned *odd) {
    return block_at_as(p, len, off, dot, odd, false);
}

static inline uint64_t path_masks(const char *p, size_t len, uint64_t *dot,
                                  uint64_t *odd) {
    return path_masks_as(p, len, dot, odd, false);
}

/*
 * A path of 1..64 bytes without '%' or ';' (else false: nothing done):
 * its segments are the slices between the '/' bits, written to dec only
 * (raw is dec), and what the normaliser and the captures need to know is
 * read off the masks: a '.' starting a segment is a '.' bit at 0 or just
 * after a '/' bit; an empty segment is two adjacent '/' bits or a '/' at
 * the end. *ok false: out of memory. In two halves, so the matcher can
 * leave the second to the first reader of the segments: sy__split_scan
 * (the masks: false with nothing done for a '%' or ';'; else the '/' bits
 * in *slp, *seen set) and sy__split_segs (the slices, room for 65 made).
 */
static inline __attribute__((always_inline)) bool
sy__split_scan(const char *p, size_t len, uint64_t *slp, unsigned *seen) {
    uint64_t rare, dot = 0, odd;
    uint64_t sl = path_masks_as(p, len, &rare, &odd, true);
    if (__builtin_expect(rare != 0, 0)) { /* which of '.', '%', ';' */
        path_masks_as(p, len, &dot, &odd, false);
        if (odd)
            return false;
    }
    uint64_t rooted = sl & 1;
    /* what the matcher must look at: each test rare, so tested once */
    uint64_t dots = dot & ((sl << 1) | 1);
    uint64_t empty = (sl & (sl >> 1)) | (sl >> (len - 1));
    unsigned flags = SY_SEEN_ALWAYS;
    if (__builtin_expect((dots | empty | (rooted ^ 1)) != 0, 0))
        flags |= (dots ? SY_SEEN_DOT : 0u) | (empty ? SY_SEEN_EMPTY : 0u) |
                 (rooted ? 0u : SY_SEEN_UNROOTED);
    *seen = flags;
    *slp = sl;
    return true;
}

static inline __attribute__((always_inline)) void
sy__split_segs(sy__segments *segs, const char *p, size_t len, uint64_t sl) {
    sy_str *dec = segs->dec, *o = dec;
    segs->raw = dec;
    uint64_t rooted = sl & 1;
    const char *b = p + rooted; /* the segment's first byte */
    for (uint64_t m = sl & ~rooted; m; m &= m - 1) {
        const char *e = p + __builtin_ctzll(m);
        *o++ = (sy_str){b, (size_t)(e - b)};
        b = e + 1;
    }
    *o = (sy_str){b, (size_t)(p + len - b)};
    segs->count = (size_t)(o - dec) + 1;
    segs->flat = (sy_str){rooted ? p : NULL, len};
}

static inline __attribute__((always_inline)) bool
sy__split_short(sy__segments *segs, const char *p, size_t len,
                const sy__alloc *alloc, unsigned *seen, bool *ok) {
    uint64_t sl;
    if (!sy__split_scan(p, len, &sl, seen))
        return false;
    if (!sy__segs_room(segs, 65, alloc)) /* at most one a byte, and the last */
        return *ok = false, true;
    sy__split_segs(segs, p, len, sl);
    return true;
}

/*
 * sy__segments_split_host for a host of 1..64 bytes: one '.' mask, one
 * loop over its bits, empty labels dropped without a branch. Returns 1
 * when done, 0 on allocation failure, -1 for any other length (nothing
 * done). Inline, so the matcher's host split makes no second call.
 */
static inline __attribute__((always_inline)) int
sy__split_host_short(sy__segments *segs, sy_str host, const sy__alloc *alloc) {
    static const char empty[1] = "";
    const char *p = host.ptr;
    size_t len = host.len;
    if (len - 1 >= 64)
        return -1;
    uint64_t dot, odd;
    path_masks(p, len, &dot, &odd);
    /* at most 33 labels, the lead and the trail one */
    if (!sy__segs_room(segs, 36, alloc))
        return 0;
    sy_str *dec = segs->dec, *o = dec;
    segs->raw = dec;
    segs->flat = (sy_str){NULL, 0};
    bool lead = dot & 1, trail = (dot >> (len - 1)) & 1;
    segs->lead = lead;
    segs->trail = trail;
    *o = (sy_str){empty, 0};
    o += lead;
    const char *b = p; /* the label's first byte */
    for (uint64_t m = dot; m; m &= m - 1) {
        const char *e = p + __builtin_ctzll(m);
        *o = (sy_str){b, (size_t)(e - b)};
        o += e > b; /* empty labels dropped */
        b = e + 1;
    }
    *o = (sy_str){b, (size_t)(p + len - b)};
    o += p + len > b;
    *o = (sy_str){empty, 0};
    o += trail;
    segs->count = (size_t)(o - dec);
    return 1;
}
#endif

/*
 * sy__segments_split_scan for the common path: 1..64 bytes, no '%' or
 * ';'. Returns 1 when done (*seen as split_scan gives it), 0 on
 * allocation failure, -1 when the path is not one of those (nothing
 * done: call sy__segments_split_scan). Leaves segs->lead and trail as
 * they are (false: only a host split sets them, never on a path's).
 */
static inline __attribute__((always_inline)) int
sy__segments_split_fast(sy__segments *segs, sy_str path, const sy__alloc *alloc,
                        unsigned *seen) {
#if defined(__SSE2__)
    if (path.len - 1 < 64) {
        bool ok = true;
        if (sy__split_short(segs, path.ptr, path.len, alloc, seen, &ok))
            return ok;
    }
#else
    (void)segs, (void)path, (void)alloc, (void)seen;
#endif
    return -1;
}

/* sy__segments_split_fast with a rooted path's slices left to its first
 * reader (sy__split_segs(segs, segs->flat.ptr, segs->flat.len, *sl)):
 * returns 2 with segs->flat the path (all a literal Path compare reads),
 * its '/' bits in *sl and room made; count, dec and raw are stale until
 * that split. 1: split now (not rooted), 0: out of memory, -1: not a
 * short plain path (nothing done). */
static inline __attribute__((always_inline)) int
sy__segments_split_lazy(sy__segments *segs, sy_str path, const sy__alloc *alloc,
                        unsigned *seen, uint64_t *sl) {
#if defined(__SSE2__)
    if (path.len - 1 < 64 && sy__split_scan(path.ptr, path.len, sl, seen)) {
        if (!sy__segs_room(segs, 65, alloc)) /* one a byte, and the last */
            return 0;
        if (*sl & 1) {
            segs->flat = path;
            return 2;
        }
        sy__split_segs(segs, path.ptr, path.len, *sl);
        return 1;
    }
#else
    (void)segs, (void)path, (void)alloc, (void)seen, (void)sl;
#endif
    return -1;
}

/* sy__segments_split_host for a host of 1..64 bytes (1 done, 0 out of
 * memory, -1: call sy__segments_split_host). */
static inline __attribute__((always_inline)) int
sy__segments_split_host_fast(sy__segments *segs, sy_str host,
                             const sy__alloc *alloc) {
#if defined(__SSE2__)
    return sy__split_host_short(segs, host, alloc);
#else
    (void)segs, (void)host, (void)alloc;
    return -1;
#endif
}

#endif
