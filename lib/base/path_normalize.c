/*
 * path_normalize.c - request path normalisation (path_normalize.h).
 *
 * One pass over the raw path, segment by segment, appending to an output
 * that never holds a trailing '/' until the end; ".." pops the last
 * output segment:
 *
 *     in   /a/b/%2E%2e/./c//d/..    (merge_slashes off)
 *     out  /a  /a/b  /a  /a  /a/c  /a/c/  /a/c//d  /a/c/   -> "/a/c/"
 *
 * A request path is short and this runs once per request: a quick look
 * for anything that could change ("/." "/%" "//" "%2F" "%5C") lets the
 * common path through untouched, without copying.
 */
#include "base/path_normalize.h"

static bool is_hex_pair(const char *p, char hi, char lo) {
    return p[0] == '%' && p[1] == hi && (p[2] == lo || p[2] == (lo | 0x20));
}

/* %2F or %5C (either case) at p (3 bytes available). */
static bool is_escaped_slash(const char *p) {
    return is_hex_pair(p, '2', 'F') || is_hex_pair(p, '5', 'C');
}

/* Could normalisation change this path? Conservative: false only when
 * the result is certainly `in`. */
static bool may_change(const sy__path_norm_opts *o, sy_str in) {
    const char *p = in.ptr;
    /* the common case, decided by two vectorised scans: a rooted path
     * with neither '.' nor '%' holds no dot segment and no escape */
    if (in.len && p[0] == '/' && !o->merge_slashes && !memchr(p, '.', in.len) &&
        !memchr(p, '%', in.len))
        return false;
    for (size_t i = 0; i < in.len; i++) {
        if (p[i] == '/' && i + 1 < in.len &&
            (p[i + 1] == '.' || p[i + 1] == '%' ||
             (o->merge_slashes && p[i + 1] == '/')))
            return true;
        if (p[i] == '%' && i + 2 < in.len && is_escaped_slash(p + i) &&
            o->escaped_slashes != SY_PN_SLASHES_KEEP)
            return true;
    }
    /* a path not starting with '/' may start with a dot segment */
    return in.len && p[0] != '/';
}

/* 1 for ".", 2 for "..", 0 otherwise: the segment decoded ('.' or %2E)
 * up to its matrix parameters (';'). */
static int dot_segment(const char *s, size_t len) {
    int dots = 0;
    size_t i = 0;
    while (i < len && s[i] != ';') {
        if (s[i] == '.')
            i++;
        else if (i + 2 < len && s[i] == '%' && s[i + 1] == '2' &&
                 (s[i + 2] == 'e' || s[i + 2] == 'E'))
            i += 3;
        else
            return 0;
        if (++dots > 2)
            return 0;
    }
    return dots;
}

int sy__path_normalize(const sy__path_norm_opts *o, sy_str in,
                       sy__arena *scratch, sy_str *out) {
    *out = in;
    if (o->mode == SY_PN_AS_IS || !in.ptr || !may_change(o, in))
        return 0;
    const char *p = in.ptr;
    size_t n = in.len;
    if (o->escaped_slashes != SY_PN_SLASHES_KEEP) {
        for (size_t i = 0; i + 2 < n; i++)
            if (is_escaped_slash(p + i)) {
                if (o->escaped_slashes == SY_PN_SLASHES_REJECT)
                    return SY_PN_BAD_PATH;
                break;
            }
    }
    char *buf = sy__arena_alloc(scratch, n + 2);
    if (!buf)
        return SY_ENOMEM;
    size_t w = 0;          /* output length; no trailing '/' until the end */
    bool trailing = false; /* the last segment asks for a trailing '/' */
    size_t i = p[0] == '/' ? 1 : 0;
    for (;;) {
        /* the segment [i, e): up to '/' (or %2F/%5C when decoding) */
        size_t e = i, next;
        while (e < n && p[e] != '/' &&
               !(o->escaped_slashes == SY_PN_SLASHES_DECODE && e + 2 < n &&
                 is_escaped_slash(p + e)))
            e++;
        bool last = e >= n;
        next = last ? n : p[e] == '/' ? e + 1 : e + 3;
        int dots = dot_segment(p + i, e - i);
        trailing = false;
        if (dots == 1) {
            trailing = last;
        } else if (dots == 2) {
            if (w == 0)
                return SY_PN_BAD_PATH; /* climbs above the root */
            while (w > 0 && buf[w - 1] != '/')
                w--;
            w--; /* the '/' that began the popped segment */
            trailing = last;
        } else if (e == i && !last && o->merge_slashes) {
            /* an empty segment before another: "//" merged */
        } else {
            buf[w++] = '/';
            memcpy(buf + w, p + i, e - i);
            w += e - i;
        }
        if (last)
            break;
        i = next;
    }
    if (trailing || w == 0)
        buf[w++] = '/';
    out->ptr = buf;
    out->len = w;
    if (w == n && memcmp(buf, p, n) == 0)
        *out = in; /* unchanged: keep the caller's slice */
    return 0;
}
