/*
 * predicate_quick.h - the predicate tests the matcher makes inline, without
 * the budget made current: a literal Path on a plain path, a Method for a
 * standard method, a literal Host the unsplit host decides, a Header's
 * presence its first value decides, a Header's regex its one value decides
 * (charged to the request's budget). What they leave undecided,
 * sy__pred_test decides.
 * Read by predicate_eval.c and match.c (cand_holds_quick) only.
 */
#ifndef SY_PREDICATE_QUICK_H
#define SY_PREDICATE_QUICK_H

#include "base/budget.h"
#include "base/regex.h"        /* sy__regex_full_match_on */
#include "route/pattern_int.h" /* a host pattern's star_suffix */
#include "route/predicate_int.h"

/* A literal Path on plain segments of one rooted path (f, the segments'
 * flat): "/" + each segment is the path itself, and a literal segment
 * holds no '/', so equal segments are an equal prefix ending where a
 * segment does. The literal: its text and length, its last "**" (rest),
 * its trailing-slash option (an index candidate carries them too:
 * sy__cand_lit_pack). */
static inline __attribute__((always_inline)) bool
sy__lit_flat(const char *lit, size_t len, bool rest, bool trailing, sy_str f) {
    if (f.len < len || !sy__bytes_eq(f.ptr, lit, len))
        return false;
    if (f.len == len)
        return true;
    return f.ptr[len] == '/' && (rest || (trailing && f.len == len + 1));
}

/* The same for literal Path predicate p. */
static inline __attribute__((always_inline)) bool
sy__pred_lit_flat(const sy__pred *p, sy_str f) {
    return sy__lit_flat(p->lit_src, p->lit_len, p->lit_rest, p->trailing, f);
}

/* Whether header h has the name of Header predicate p: the length first
 * (most names differ in it), then the exact bytes (the usual spelling),
 * without the case-insensitive call. */
static inline bool sy__pred_header_named(const sy__pred *p,
                                         const sy_header *h) {
    return h->name.len == p->name_len &&
           (sy__bytes_eq(h->name.ptr, p->name, p->name_len) ||
            sy__str_ieq(h->name, p->name, p->name_len));
}

/* A Header predicate without a regex (presence) where its first header
 * of that name decides it without the budget: none, 0; a value whose
 * first byte is not blank, ',' or '"', 1 (its first element is not empty
 * and needs no unquoting, and a budget examines at least one value);
 * else -1 (test_header, predicate_eval.c). */
static inline int sy__pred_header_present(const sy__pred *p,
                                          const sy_request *r) {
    for (size_t i = 0; i < r->header_count; i++) {
        const sy_header *h = &r->headers[i];
        if (!sy__pred_header_named(p, h))
            continue;
        if (!h->value.len)
            return -1;
        char c0 = h->value.ptr[0];
        return c0 == ' ' || c0 == '\t' || c0 == ',' || c0 == '"' ? -1 : 1;
    }
    return 0;
}

/* A Header predicate with a regex where the request's one header of that
 * name decides it as test_header would, without its element scan: none,
 * 0; a value of up to 64 bytes without ',' or '"' and without a blank at
 * either end is its one element as is (no split, trim or unquote),
 * answered without PCRE2 where sy__regex_full_match_on answers it, and
 * charged to `b` as test_header's call would be. Else -1 (several
 * headers of the name, another value, a regex PCRE2 answers, a pool
 * without a step left: test_header decides). */
static inline int sy__pred_header_re(const sy__pred *p, const sy__eval *ev,
                                     sy__budget *b) {
    const sy_request *r = ev->req;
    const sy_header *one = NULL;
    for (size_t i = 0; i < r->header_count; i++) {
        if (!sy__pred_header_named(p, &r->headers[i]))
            continue;
        if (one)
            return -1;
        one = &r->headers[i];
    }
    if (!one)
        return 0;
    sy_str v = one->value;
    if (!v.len || v.len > 64 || !ev->md || v.ptr[0] == ' ' ||
        v.ptr[0] == '\t' || v.ptr[v.len - 1] == ' ' || v.ptr[v.len - 1] == '\t')
        return -1;
    for (size_t i = 0; i < v.len; i++)
        if (v.ptr[i] == ',' || v.ptr[i] == '"')
            return -1;
    return sy__regex_full_match_on(p->re, v.ptr, v.len, b);
}

/* A Host of one "*.lit.lit" pattern (star_suffix) on the unsplit host:
 * 1 when the host is a label without '.' then '.' and the literals as
 * written (its labels are then exactly those, none empty, so Ant's match
 * holds and captures nothing); -1 otherwise (the labels decide: a host
 * with empty labels may still hold). */
static inline int sy__pred_host_star(const sy__pred *p, sy_str host) {
    const sy__pattern *pat = p->many ? NULL : p->one;
    const char *suf; /* the literals' text: the tail's (no pattern read) */
    size_t slen;
    if (p->tail) {
        suf = sy__pred_tail(p), slen = p->tail_len;
    } else if (!pat || !pat->star_suffix) {
        return -1;
    } else {
        const sy__pelem *a = &pat->elems[pat->first + 1];
        const sy__pelem *z = &pat->elems[pat->last - 1];
        suf = pat->src + a->offset, slen = z->offset + z->len - a->offset;
    }
    if (host.len < slen + 2)
        return -1;
    size_t x = host.len - slen - 1; /* the first label's length, >= 1 */
    if (host.ptr[x] != '.' || !sy__bytes_eq(host.ptr + x + 1, suf, slen))
        return -1;
    for (size_t i = 0; i < x; i++)
        if (host.ptr[i] == '.')
            return -1;
    return 1;
}

/* sy__pred_lit_rest_flat of a tail Path (predicate_int.h): its literals
 * "/a/b" are the flat path's prefix up to its end or a '/' (each literal
 * then one segment: none holds a '/'), the rest the text from there. */
static inline int sy__pred_tail_rest(const sy__pred *p, sy__eval *ev) {
    const char *t = sy__pred_tail(p);
    size_t len = p->tail_len;
    sy_str f = ev->path->flat;
    if (f.len < len || !sy__bytes_eq(f.ptr, t, len) ||
        (f.len > len && f.ptr[len] != '/'))
        return 0;
    sy__capture *caps = ev->caps;
    if (caps && ev->caps_cap >= ev->ncaps &&
        ev->caps_cap - ev->ncaps >= p->var_count && p->tail_var) {
        caps[ev->ncaps].name = (sy_str){t + len + 3, p->tail_var};
        caps[ev->ncaps].value =
            len == f.len ? (sy_str){"", 0} : (sy_str){f.ptr + len, f.len - len};
        ev->ncaps++;
    }
    return 1;
}

/* A Path of one pattern of literal segments then a last "**" or
 * "{*name}" (predicate_eval.c match_lit_rest) on the flat text of a plain
 * rooted path, its segments not cut: the same answer and capture (the
 * segments of such a path are its text between the '/'s, so the literals
 * are the text after each '/' up to the next one or the end, and the rest
 * the text from the '/' after them). -1: another shape (a literal of no
 * bytes, several patterns), or no flat path: the segments decide. */
static inline int sy__pred_lit_rest_flat(const sy__pred *p, sy__eval *ev) {
    const sy__pattern *pat = p->many ? NULL : p->one;
    if (!pat || p->lit || !ev->path || !ev->path->flat.ptr)
        return -1;
    if (p->tail) /* "/a/b" and the name in the tail: no pattern read */
        return sy__pred_tail_rest(p, ev);
    size_t m = pat->multi;
    if (m == PE_NONE || m + 1 != pat->n || !pat->rooted)
        return -1;
    for (size_t i = 0; i < m; i++)
        if (pat->elems[i].kind != PE_LITERAL || !pat->elems[i].len)
            return -1;
    sy_str f = ev->path->flat;
    size_t pos = 0; /* the '/' before segment i */
    for (size_t i = 0; i < m; i++) {
        const sy__pelem *el = &pat->elems[i];
        size_t b = pos + 1, e = b + el->len;
        if (e > f.len || (e < f.len && f.ptr[e] != '/') ||
            !sy__bytes_eq(f.ptr + b, pat->src + el->offset, el->len))
            return 0;
        pos = e;
    }
    const sy__pelem *mul = &pat->elems[m];
    sy__capture *caps = ev->caps;
    if (caps && ev->caps_cap >= ev->ncaps &&
        ev->caps_cap - ev->ncaps >= p->var_count && mul->nvars) {
        caps[ev->ncaps].name = pat->vars[mul->var];
        caps[ev->ncaps].value =
            pos == f.len ? (sy_str){"", 0} : (sy_str){f.ptr + pos, f.len - pos};
        ev->ncaps++;
    }
    return 1;
}

/* The predicates p[0..n) (a route's cpred, SY_PRED_OBJECT_BYTES apart)
 * but `skip` (SIZE_MAX: none), in order, as far as the quick tests decide
 * them: -1 when every one holds; i when predicate i fails (the ones
 * before it hold); -2 - i when the quick tests leave predicate i (the
 * ones before it hold; it and the ones after it are untested). A Header
 * regex's charge goes to `b`, the request's budget. With `caps` (no walk
 * captures to come first), a literals-then-rest Path on the flat path is
 * decided here too, its capture appended to ev's. */
static inline __attribute__((always_inline)) int
sy__preds_quick(const sy__pred *p, size_t n, size_t skip, sy__eval *ev,
                int mbit, sy__budget *b, bool caps) {
    for (size_t i = 0; i < n; i++) {
        const sy__pred *q =
            (const sy__pred *)(const void *)((const char *)(const void *)p +
                                             i * SY_PRED_OBJECT_BYTES);
        if (i == skip)
            continue;
        int r = -1;
        switch (q->kind) {
        case SY_PK_PATH:
            if (q->lit && ev->path->flat.ptr)
                r = sy__pred_lit_flat(q, ev->path->flat);
            else if (caps)
                r = sy__pred_lit_rest_flat(q, ev);
            break;
        case SY_PK_METHOD:
            if (mbit != 31)
                r = (int)((q->mask >> mbit) & 1u);
            break;
        case SY_PK_HOST:
            if (q->lit && ev->host_str.len <= q->lit_len)
                r = ev->host_str.len == q->lit_len &&
                    sy__bytes_eq(ev->host_str.ptr, q->lit_src, q->lit_len);
            else if (!q->lit)
                r = sy__pred_host_star(q, ev->host_str);
            break;
        case SY_PK_HEADER:
            r = q->re ? sy__pred_header_re(q, ev, b)
                      : sy__pred_header_present(q, ev->req);
            break;
        default: break;
        }
        if (r < 0)
            return -2 - (int)i;
        if (!r)
            return (int)i;
    }
    return -1;
}

#endif
