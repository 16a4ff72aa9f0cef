/*
 * pattern_split.c - splitting requests: a path into segments (percent-
 * decoded, matrix parameters dropped) and a host into labels, as the
 * patterns of pattern.c and pattern_host.c and the index walk read them.
 *
 * The common path has neither '%' nor ';' and is split in one pass over
 * its bytes, sixteen at a time: one compare per byte class gives bit masks
 *
 *     /repos/octo/hello/events
 *     '/' 1.....1....1.....1.....      -> segments between the set bits
 *     '.' ........................     -> nothing for the normaliser
 *     '%' ';' ....................     -> no segment needs decoding
 *
 * so the matcher learns in the same pass whether the path normaliser has
 * anything to look at (sy__segments_split_scan's `seen`).
 */
#include "pattern.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static bool segs_reserve(sy__segments *s, size_t n, const sy__alloc *a) {
    if (n <= s->cap)
        return true;
    size_t cap = s->cap ? s->cap : 8;
    while (cap < n) {
        if (cap > SIZE_MAX / (2 * sizeof(sy_str)))
            return false;
        cap *= 2;
    }
    sy_str *d = sy__realloc(a, s->dec, cap * sizeof *d);
    if (!d)
        return false;
    s->dec = d;
    sy_str *r = sy__realloc(a, s->raw, cap * sizeof *r);
    if (!r)
        return false;
    s->raw = r;
    s->cap = cap;
    return true;
}

/* Matrix parameters dropped, then percent-decoded (into scratch only when
 * there is a '%'). Invalid escapes stay as they are, and so do %2F and %5C
 * with `keep_slashes`. */
static bool decode_segment(sy_str raw, bool keep_slashes, sy__arena *scratch,
                           sy_str *out) {
    size_t n = raw.len;
    const char *semi = n ? memchr(raw.ptr, ';', n) : NULL;
    if (semi)
        n = (size_t)(semi - raw.ptr);
    if (n == 0 || !memchr(raw.ptr, '%', n)) {
        *out = (sy_str){n ? raw.ptr : "", n};
        return true;
    }
    char *buf = scratch ? sy__arena_alloc(scratch, n) : NULL;
    if (!buf)
        return false;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (raw.ptr[i] == '%' && i + 2 < n &&
            (hi = sy__hexval(raw.ptr[i + 1])) >= 0 &&
            (lo = sy__hexval(raw.ptr[i + 2])) >= 0 &&
            !(keep_slashes && (hi * 16 + lo == '/' || hi * 16 + lo == '\\'))) {
            buf[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            buf[o++] = raw.ptr[i];
        }
    }
    *out = (sy_str){buf, o};
    return true;
}

static bool push_segment(sy__segments *segs, size_t n, sy_str raw, bool special,
                         sy__arena *scratch, const sy__alloc *alloc) {
    if (n == segs->cap && !segs_reserve(segs, n + 1, alloc))
        return false;
    segs->raw[n] = raw;
    if (special)
        return decode_segment(raw, segs->keep_escaped_slashes, scratch,
                              &segs->dec[n]);
    segs->dec[n] = raw;
    return true;
}

/* Split a path after its leading '/'. A segment is decoded only when it
 * holds a '%' or a ';'; when the whole path has neither (the common case)
 * segments are plain slices found with memchr. */
static __attribute__((noinline)) bool split_path(sy__segments *segs, sy_str s,
                                                 sy__arena *scratch,
                                                 const sy__alloc *alloc) {
    segs->count = 0;
    segs->flat = (sy_str){NULL, 0};
    if (s.len == 0)
        return true;
    const char *p = s.ptr, *end = s.ptr + s.len;
    if (*p == '/')
        p++;
    bool any_special =
        memchr(p, '%', (size_t)(end - p)) || memchr(p, ';', (size_t)(end - p));
    size_t n = 0;
    for (;;) {
        const char *q = memchr(p, '/', (size_t)(end - p));
        if (!q)
            q = end;
        sy_str raw = {p, (size_t)(q - p)};
        bool special =
            any_special && (memchr(p, '%', raw.len) || memchr(p, ';', raw.len));
        if (!push_segment(segs, n++, raw, special, scratch, alloc))
            return false;
        if (q == end)
            break;
        p = q + 1;
    }
    segs->count = n;
    return true;
}

#if !defined(__SSE2__)
/* Split a host as AntPathMatcher tokenizes it: on '.', empty labels
 * dropped. Ant also compares whether host and pattern start and end with
 * '.': a leading '.' gives one empty first label and a trailing '.' one
 * empty last label (lead, trail), so the index walks them too. */
static bool split_host(sy__segments *segs, sy_str s, const sy__alloc *alloc) {
    segs->count = 0;
    segs->flat = (sy_str){NULL, 0};
    segs->lead = s.len > 0 && s.ptr[0] == '.';
    segs->trail = s.len > 0 && s.ptr[s.len - 1] == '.';
    size_t n = 0;
    if (segs->lead &&
        !push_segment(segs, n++, (sy_str){"", 0}, false, NULL, alloc))
        return false;
    const char *p = s.ptr, *end = s.ptr + s.len;
    while (p < end) {
        const char *q = memchr(p, '.', (size_t)(end - p));
        if (!q)
            q = end;
        if (q > p && !push_segment(segs, n++, (sy_str){p, (size_t)(q - p)},
                                   false, NULL, alloc))
            return false;
        p = q + 1;
    }
    if (segs->trail &&
        !push_segment(segs, n++, (sy_str){"", 0}, false, NULL, alloc))
        return false;
    segs->count = n;
    return true;
}
#endif

bool sy__segments_split(sy__segments *segs, sy_str path, sy__arena *scratch,
                        const sy__alloc *alloc) {
    segs->lead = segs->trail = false;
    return split_path(segs, path, scratch, alloc);
}

#if defined(__SSE2__)
/* The masks of 16 bytes: bit i is byte i. Returns the '/' bits; `dot`
 * gets the '.' bits and `odd` the '%' and ';' bits. */
static inline unsigned block_scan(__m128i v, unsigned *dot, unsigned *odd) {
    *dot = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('.')));
    *odd = (unsigned)_mm_movemask_epi8(
        _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('%')),
                     _mm_cmpeq_epi8(v, _mm_set1_epi8(';'))));
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
static inline unsigned block_at(const char *p, size_t len, size_t off,
                                unsigned *dot, unsigned *odd) {
    size_t rest = len - off;
    if (rest >= 16)
        return block_scan(_mm_loadu_si128((const void *)(p + off)), dot, odd);
    if (len >= 16) { /* the last 16 bytes; drop the ones seen */
        unsigned drop = (unsigned)(16 - rest);
        unsigned sl =
            block_scan(_mm_loadu_si128((const void *)(p + len - 16)), dot, odd);
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
    return block_scan(_mm_set_epi64x((long long)hi, (long long)lo), dot, odd);
}

/* Room for `need` segments; the arrays may move (the caller reloads). */
static inline bool segs_room(sy__segments *segs, size_t need,
                             const sy__alloc *alloc) {
    return need <= segs->cap || segs_reserve(segs, need, alloc);
}

/* Every segment a plain slice, split in one pass over the path; returns
 * false (nothing decided) when a '%' or ';' asks for decoding, else true
 * with *ok false on allocation failure. Room for a block's segments is
 * made once per block (its '/' count), so the loop over them keeps the
 * arrays in registers. */
static bool split_plain(sy__segments *segs, sy_str s, const sy__alloc *alloc,
                        unsigned *seen, bool *ok) {
    const char *p = s.ptr;
    size_t len = s.len, begin = len && p[0] == '/', n = 0;
    unsigned dots = 0;
    sy_str *dec = segs->dec, *raw = segs->raw;
    *ok = true;
    for (size_t off = 0; off < len; off += 16) {
        unsigned dot, odd;
        unsigned sl = block_at(p, len, off, &dot, &odd);
        if (odd) {
            *seen = SY_SEEN_PCT; /* the caller looks again */
            return false;
        }
        dots |= dot;
        if (off == 0)
            sl &= ~(unsigned)begin; /* the leading '/' starts no segment */
        if (!segs_room(segs, n + 17, alloc)) /* 16 a block, and the last */
            return *ok = false, true;
        dec = segs->dec;
        raw = segs->raw;
        for (; sl; sl &= sl - 1) {
            size_t at = off + (size_t)__builtin_ctz(sl);
            sy_str seg = {p + begin, at - begin};
            dec[n] = seg;
            raw[n] = seg;
            n++;
            begin = at + 1;
        }
    }
    if (!segs_room(segs, n + 1, alloc))
        return *ok = false, true;
    sy_str last = {p + begin, len - begin};
    segs->dec[n] = last;
    segs->raw[n] = last;
    segs->count = n + 1;
    /* a '.' matters to the normaliser only where it starts a segment */
    *seen = 0;
    for (size_t i = 0; dots && i <= n; i++)
        if (segs->dec[i].len && segs->dec[i].ptr[0] == '.')
            *seen = SY_SEEN_DOT;
    return true;
}

/* split_host in one pass: the '.' masks give the labels (room made per
 * block, as split_plain does). */
static bool split_host_fast(sy__segments *segs, sy_str s,
                            const sy__alloc *alloc) {
    const char *p = s.ptr;
    size_t len = s.len, begin = 0, n = 0;
    segs->count = 0;
    segs->flat = (sy_str){NULL, 0};
    bool lead = len > 0 && p[0] == '.';
    bool trail = len > 0 && p[len - 1] == '.';
    segs->lead = lead;
    segs->trail = trail;
    /* the lead label, a block's labels, the last one and the trail one */
    if (!segs_room(segs, 3, alloc))
        return false;
    sy_str *dec = segs->dec, *raw = segs->raw;
    static const char empty[1] = "";
    if (lead) {
        dec[n] = raw[n] = (sy_str){empty, 0};
        n++;
    }
    for (size_t off = 0; off < len; off += 16) {
        unsigned dot, odd;
        block_at(p, len, off, &dot, &odd);
        if (!segs_room(segs, n + 18, alloc)) /* 16, the last, the trail */
            return false;
        dec = segs->dec;
        raw = segs->raw;
        for (; dot; dot &= dot - 1) {
            size_t at = off + (size_t)__builtin_ctz(dot);
            if (at > begin) {
                sy_str l = {p + begin, at - begin};
                dec[n] = raw[n] = l;
                n++;
            }
            begin = at + 1;
        }
    }
    if (len > begin) {
        sy_str l = {p + begin, len - begin};
        dec[n] = raw[n] = l;
        n++;
    }
    if (trail) {
        dec[n] = raw[n] = (sy_str){empty, 0};
        n++;
    }
    segs->count = n;
    return true;
}
#endif

bool sy__segments_split_scan(sy__segments *segs, sy_str path,
                             sy__arena *scratch, const sy__alloc *alloc,
                             unsigned *seen) {
    segs->lead = segs->trail = false;
    segs->count = 0;
    *seen = 0;
    if (path.len == 0) {
        segs->flat = (sy_str){NULL, 0};
        return true;
    }
#if defined(__SSE2__)
    bool ok;
    if (split_plain(segs, path, alloc, seen, &ok)) {
        /* every segment a plain slice: a rooted path is their text */
        segs->flat = (sy_str){path.ptr[0] == '/' ? path.ptr : NULL, path.len};
        return ok;
    }
    /* a '%' or ';' stopped the scan: look at the whole path again */
    *seen = 0;
#endif
    const char *p = path.ptr;
    size_t len = path.len;
    for (size_t i = 0; i < len && !(*seen & SY_SEEN_DOT); i++)
        if (p[i] == '.' && (i == 0 || p[i - 1] == '/'))
            *seen |= SY_SEEN_DOT;
    *seen |= (memchr(p, '%', len) ? SY_SEEN_PCT : 0u) |
             (memchr(p, ';', len) ? SY_SEEN_SEMI : 0u);
    return split_path(segs, path, scratch, alloc);
}

bool sy__segments_split_host(sy__segments *segs, sy_str host,
                             const sy__alloc *alloc) {
#if defined(__SSE2__)
    return split_host_fast(segs, host, alloc);
#else
    return split_host(segs, host, alloc);
#endif
}

void sy__segments_free(sy__segments *segs, const sy__alloc *alloc) {
    sy__free(alloc, segs->dec);
    sy__free(alloc, segs->raw);
    segs->dec = segs->raw = NULL;
    segs->count = segs->cap = 0;
}
