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
 * anything to look at (sy__segments_split_scan's `seen`). A path of up
 * to 64 bytes (nearly all) gets one 64-bit mask per class, so the '.'
 * and empty-segment tests are a few operations on the masks and the
 * segments one loop over the '/' bits; plain segments are written once
 * (raw is dec: both arrays share one block, the second half used only
 * when some segment is decoded).
 */
#include "route/pattern_split.h"

/* Room for n segments: one block of 2 * cap slices, dec the first half,
 * the second half raw's when segments need decoding (else raw is dec).
 * The slices held are kept in dec only (raw is reset by the caller). */
bool sy__segs_reserve(sy__segments *s, size_t n, const sy__alloc *a) {
    if (n <= s->cap)
        return true;
    sy_str *d = sy__grow(a, s->dec, &s->cap, n, 8, 2 * sizeof *d);
    if (!d)
        return false;
    s->dec = s->raw = d;
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

/* Split a path after its leading '/'. A segment is decoded only when it
 * holds a '%' or a ';'; when the whole path has neither, segments are
 * plain slices found with memchr and raw is dec. Room for every segment
 * is made first (one more than the '/'s), so the arrays stay put. */
static __attribute__((noinline)) bool split_path(sy__segments *segs, sy_str s,
                                                 sy__arena *scratch,
                                                 const sy__alloc *alloc) {
    segs->count = 0;
    segs->flat = (sy_str){NULL, 0};
    segs->raw = segs->dec;
    if (s.len == 0)
        return true;
    const char *p = s.ptr, *end = s.ptr + s.len;
    if (*p == '/')
        p++;
    size_t need = 1;
    for (const char *q = p; (q = memchr(q, '/', (size_t)(end - q))); q++)
        need++;
    if (!sy__segs_room(segs, need, alloc))
        return false;
    bool any_special =
        memchr(p, '%', (size_t)(end - p)) || memchr(p, ';', (size_t)(end - p));
    sy_str *dec = segs->dec, *raw = any_special ? dec + segs->cap : dec;
    segs->raw = raw;
    size_t n = 0;
    for (;;) {
        const char *q = memchr(p, '/', (size_t)(end - p));
        if (!q)
            q = end;
        sy_str r = {p, (size_t)(q - p)};
        raw[n] = r;
        if (any_special && (memchr(p, '%', r.len) || memchr(p, ';', r.len))) {
            if (!decode_segment(r, segs->keep_escaped_slashes, scratch,
                                &dec[n]))
                return false;
        } else {
            dec[n] = r;
        }
        n++;
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
    segs->raw = segs->dec;
    segs->lead = s.len > 0 && s.ptr[0] == '.';
    segs->trail = s.len > 0 && s.ptr[s.len - 1] == '.';
    const char *p = s.ptr, *end = s.ptr + s.len;
    size_t need = 3; /* the lead, the last and the trail label */
    for (const char *q = p; q < end && (q = memchr(q, '.', (size_t)(end - q)));
         q++)
        need++;
    if (!sy__segs_room(segs, need, alloc))
        return false;
    sy_str *dec = segs->dec;
    segs->raw = dec;
    size_t n = 0;
    if (segs->lead)
        dec[n++] = (sy_str){"", 0};
    while (p < end) {
        const char *q = memchr(p, '.', (size_t)(end - p));
        if (!q)
            q = end;
        if (q > p)
            dec[n++] = (sy_str){p, (size_t)(q - p)};
        p = q + 1;
    }
    if (segs->trail)
        dec[n++] = (sy_str){"", 0};
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
/* split_short for any length, a block at a time: false (nothing decided)
 * when a '%' or ';' asks for decoding, else true with *ok false on
 * allocation failure. Room for a block's segments is made once per block
 * (its '/' count). */
static __attribute__((noinline)) bool split_long(sy__segments *segs,
                                                 const char *p, size_t len,
                                                 const sy__alloc *alloc,
                                                 unsigned *seen, bool *ok) {
    bool rooted = p[0] == '/';
    size_t begin = rooted, n = 0;
    unsigned dots = 0, flags = rooted ? 0 : SY_SEEN_UNROOTED;
    sy_str *dec = segs->dec;
    for (size_t off = 0; off < len; off += 16) {
        unsigned dot, odd;
        unsigned sl = block_at(p, len, off, &dot, &odd);
        if (odd)
            return false;
        dots |= dot;
        if (off == 0)
            sl &= ~(unsigned)begin; /* the leading '/' starts no segment */
        if (!sy__segs_room(segs, n + 17, alloc)) /* 16 a block, and the last */
            return *ok = false, true;
        dec = segs->dec;
        for (; sl; sl &= sl - 1) {
            size_t at = off + (size_t)__builtin_ctz(sl);
            dec[n++] = (sy_str){p + begin, at - begin};
            begin = at + 1;
        }
    }
    dec[n] = (sy_str){p + begin, len - begin};
    segs->raw = dec;
    segs->count = n + 1;
    segs->flat = (sy_str){rooted ? p : NULL, len};
    for (size_t i = 0; i <= n; i++) {
        if (!dec[i].len)
            flags |= SY_SEEN_EMPTY;
        else if (dots && dec[i].ptr[0] == '.')
            flags |= SY_SEEN_DOT;
    }
    *seen = flags | SY_SEEN_ALWAYS;
    return true;
}

/* split_host in one pass: the '.' masks give the labels (room made per
 * block, as split_long does). */
static bool split_host_fast(sy__segments *segs, sy_str s,
                            const sy__alloc *alloc) {
    const char *p = s.ptr;
    size_t len = s.len, begin = 0, n = 0;
    static const char empty[1] = "";
    int r = sy__split_host_short(segs, s, alloc);
    if (r >= 0)
        return r;
    segs->count = 0;
    segs->flat = (sy_str){NULL, 0};
    bool lead = len > 0 && p[0] == '.';
    bool trail = len > 0 && p[len - 1] == '.';
    segs->lead = lead;
    segs->trail = trail;
    /* the lead label, a block's labels, the last one and the trail one */
    if (!sy__segs_room(segs, 3, alloc))
        return false;
    sy_str *dec = segs->dec;
    segs->raw = dec;
    if (lead)
        dec[n++] = (sy_str){empty, 0};
    for (size_t off = 0; off < len; off += 16) {
        unsigned dot, odd;
        block_at(p, len, off, &dot, &odd);
        if (!sy__segs_room(segs, n + 18, alloc)) /* 16, the last, the trail */
            return false;
        dec = segs->raw = segs->dec;
        for (; dot; dot &= dot - 1) {
            size_t at = off + (size_t)__builtin_ctz(dot);
            if (at > begin)
                dec[n++] = (sy_str){p + begin, at - begin};
            begin = at + 1;
        }
    }
    if (len > begin)
        dec[n++] = (sy_str){p + begin, len - begin};
    if (trail)
        dec[n++] = (sy_str){empty, 0};
    segs->count = n;
    return true;
}
#endif

bool sy__segments_split_scan(sy__segments *segs, sy_str path,
                             sy__arena *scratch, const sy__alloc *alloc,
                             unsigned *seen) {
    segs->lead = segs->trail = false;
    const char *p = path.ptr;
    size_t len = path.len;
    if (len == 0) {
        segs->count = 0;
        segs->flat = (sy_str){NULL, 0};
        *seen = SY_SEEN_UNROOTED | SY_SEEN_ALWAYS;
        return true;
    }
#if defined(__SSE2__)
    bool ok = true;
    if (len <= 64 ? sy__split_short(segs, p, len, alloc, seen, &ok)
                  : split_long(segs, p, len, alloc, seen, &ok))
        return ok;
        /* a '%' or ';' stopped the scan: look at the whole path again */
#endif
    unsigned f = SY_SEEN_ALWAYS | SY_SEEN_EMPTY; /* EMPTY: maybe */
    if (p[0] != '/')
        f |= SY_SEEN_UNROOTED;
    for (size_t i = 0; i < len && !(f & SY_SEEN_DOT); i++)
        if (p[i] == '.' && (i == 0 || p[i - 1] == '/'))
            f |= SY_SEEN_DOT;
    f |= (memchr(p, '%', len) ? SY_SEEN_PCT : 0u) |
         (memchr(p, ';', len) ? SY_SEEN_SEMI : 0u);
    *seen = f;
    segs->count = 0;
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
    sy__free(alloc, segs->dec); /* raw is in the same block */
    segs->dec = segs->raw = NULL;
    segs->count = segs->cap = 0;
}
