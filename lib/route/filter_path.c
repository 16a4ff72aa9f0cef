/*
 * filter_path.c - rewriting the plan's raw path: StripPrefix, PrefixPath,
 * SetPath and RewritePath (regex replace-all under the request's budget,
 * output capped). New paths live in the scratch arena.
 */
#include "base/budget.h"
#include "route/filter_plan_int.h"

/* StripPrefix's result as a slice of the path p when it is one, the
 * common case ("/svc/x" -> "/x"): the tokens kept (past the first `parts`
 * that are not blank) follow a '/' of p, each behind one '/', none empty
 * or with whitespace at either end, and p ends after the last one or
 * after one '/' behind it. False: the join below must build it. */
static bool strip_slice(sy_str p, int64_t parts, sy_str *out) {
    if (!p.ptr)
        return false;
    const char *e = p.ptr + p.len, *at = p.ptr;
    for (int64_t idx = 0; idx < parts;) {
        while (at < e && *at == '/')
            at++;
        if (at == e) { /* fewer tokens than parts: the join's "/" */
            *out = (sy_str){"/", 1};
            return true;
        }
        const char *t = at; /* a token of one byte or more */
        while (at < e && *at != '/')
            at++;
        /* a blank token is dropped, not counted */
        idx += !sy__plan_space(*t) ||
               sy__plan_has_text((sy_str){t, (size_t)(at - t)});
    }
    if (at == e) { /* nothing left (an empty path too): the join's "/" */
        *out = (sy_str){"/", 1};
        return true;
    }
    if (*at != '/')
        return false; /* parts 0 and an unrooted path */
    const char *k = at + 1;
    while (k < e) { /* a token, then its '/' or the end */
        if (*k == '/' || sy__plan_space(*k))
            return false;
        while (k < e && *k != '/')
            k++;
        if (sy__plan_space(k[-1]))
            return false;
        if (k < e)
            k++;
    }
    *out = (sy_str){at, (size_t)(e - at)};
    return true;
}

/* StripPrefix joined in the arena, as SCG does it: tokenize the raw path
 * on '/' (tokens trimmed, empty ones dropped), drop the first `parts`,
 * re-join behind '/', and keep a trailing '/' when the original had one
 * and the result is not "/". (Not inlined: the slice's caller saves no
 * registers for it.) */
static __attribute__((noinline)) bool strip_join(sy__run *r, int64_t parts) {
    sy_str p = r->plan->path;
    char *buf = sy__arena_alloc(r->ar, p.len + 2);
    if (!buf)
        return false;
    size_t o = 0;
    buf[o++] = '/';
    int64_t idx = 0;
    for (size_t i = 0; i < p.len;) {
        while (i < p.len && p.ptr[i] == '/')
            i++;
        size_t s = i;
        while (i < p.len && p.ptr[i] != '/')
            i++;
        size_t e = i;
        sy__plan_trim(p.ptr, &s, &e);
        if (e == s)
            continue;
        if (idx++ < parts)
            continue;
        if (o > 1)
            buf[o++] = '/';
        memcpy(buf + o, p.ptr + s, e - s);
        o += e - s;
    }
    if (o > 1 && p.len && p.ptr[p.len - 1] == '/')
        buf[o++] = '/';
    buf[o] = '\0';
    r->plan->path = (sy_str){buf, o};
    return true;
}

/* StripPrefix: a slice of the path when that is the result, else the
 * join. */
bool sy__plan_strip_prefix(sy__run *r, int64_t parts) {
    return strip_slice(r->plan->path, parts, &r->plan->path) ||
           strip_join(r, parts);
}

/* PrefixPath: the expanded prefix before the path. SCG: only the first
 * PrefixPath of the chain applies. */
bool sy__plan_prefix_path(sy__run *r, const sy__filter *f) {
    if (r->prefixed)
        return true;
    r->prefixed = true;
    sy_str v;
    size_t len;
    char *buf = NULL;
    if (!sy__plan_expand_uri_path(r, f->value, &v) ||
        !(buf = sy__plan_concat(r->ar, v, r->plan->path, SY_PLAN_EMPTY,
                                SY_PLAN_EMPTY, &len)))
        return false;
    r->plan->path = (sy_str){buf, len};
    return true;
}

/* SetPath: the expanded template is the path. */
bool sy__plan_set_path(sy__run *r, const sy__filter *f) {
    return sy__plan_expand_uri_path(r, f->value, &r->plan->path);
}

/* The output of one RewritePath: `len` of `cap` bytes in the arena, never
 * more than `max`; `oom`: the arena could not grow (as opposed to the
 * output reaching max). */
typedef struct rw_out {
    char *buf;
    size_t len, cap, max;
    bool oom;
} rw_out;

/* Room for `need` more bytes. */
static bool rw_reserve(sy__run *r, rw_out *w, size_t need) {
    if (need > w->max - w->len)
        return false;
    if (w->len + need <= w->cap)
        return true;
    size_t ncap = w->cap * 2 > w->len + need ? w->cap * 2 : w->len + need;
    if (ncap > w->max)
        ncap = w->max;
    char *b = sy__arena_alloc(r->ar, ncap + 1);
    if (!b) {
        w->oom = true;
        return false;
    }
    memcpy(b, w->buf, w->len);
    w->buf = b;
    w->cap = ncap;
    return true;
}

static bool rw_put(sy__run *r, rw_out *w, const char *src, size_t n) {
    if (!rw_reserve(r, w, n))
        return false;
    memcpy(w->buf + w->len, src, n);
    w->len += n;
    return true;
}

/* RewritePath: replace-all on the current raw path, as pcre2_substitute's
 * global mode does (after an empty match, retry at the same place with
 * NOTEMPTY_ATSTART | ANCHORED, else step one byte), but one match at a
 * time under the request's budget (budget.h) and with the output capped
 * at its max_rewrite bytes; each replacement is expanded by
 * pcre2_substitute from the match already made (SUBSTITUTE_MATCHED).
 * switchyard: a regex failure at run time (match limit, budget) or an
 * output over the cap answers 500, as SCG's exception would; running out
 * of memory anywhere (the arena, pcre2_match's frames, pcre2_substitute's
 * own allocation) is SY_ENOMEM, never an answer. */
int sy__plan_rewrite_path(sy__run *r, const sy__filter *f) {
    sy_str p = r->plan->path;
    PCRE2_SPTR subject = (PCRE2_SPTR)(p.ptr ? p.ptr : "");
    size_t len = p.len, copied = 0, start = 0;
    pcre2_match_data *md = r->md;
    rw_out w = {NULL, 0, len + f->value.len + 64, sy__budget_max_rewrite(),
                false};
    if (w.cap > w.max)
        w.cap = w.max;
    if (!(w.buf = sy__arena_alloc(r->ar, w.cap + 1)))
        return SY_ENOMEM;
    bool ok = md && pcre2_get_ovector_count(md) >= f->groups;
    uint32_t retry = 0; /* after an empty match */
    while (ok) {
        int rc = sy__re_match(f->re, subject, len, start, retry, md, f->mctx,
                              SY_FILTER_MATCH_LIMIT);
        if (rc == PCRE2_ERROR_NOMATCH) {
            if (!retry || start >= len)
                break;
            start++; /* copied with the next fragment */
            retry = 0;
            continue;
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (rc < 0 || ov[0] < copied || ov[1] < ov[0]) {
            /* pcre2_match's NOMEMORY (HEAP_FAILED before 10.41): its heap
             * frames could not be had, not a limit */
            w.oom = rc == PCRE2_ERROR_NOMEMORY || rc == PCRE2_ERROR_HEAP_FAILED;
            ok = false;
            break;
        }
        ok = rw_put(r, &w, (const char *)subject + copied, ov[0] - copied);
        /* PCRE2 copies a MATCHED match data into one it allocates with
         * the match context's allocator and frees with the match data's:
         * the two must be one allocator, so the context is the match
         * data's own sy_match_ctx's (a router's may differ) */
        pcre2_match_context *sub = sy__budget_mctx(f->mctx);
        for (int attempt = 0; ok && attempt < 2; attempt++) {
            PCRE2_SIZE n = w.cap - w.len + 1;
            rc = pcre2_substitute(
                f->re, subject, len, start,
                PCRE2_SUBSTITUTE_MATCHED | PCRE2_SUBSTITUTE_REPLACEMENT_ONLY |
                    PCRE2_SUBSTITUTE_UNSET_EMPTY |
                    PCRE2_SUBSTITUTE_OVERFLOW_LENGTH,
                md, sub, (PCRE2_SPTR)f->value.ptr, f->value.len,
                (PCRE2_UCHAR *)w.buf + w.len, &n);
            if (rc >= 0) {
                w.len += n;
                break;
            }
            /* NOMEMORY is two things here. The output did not fit: n is
             * then the bytes needed, terminator included (OVERFLOW_LENGTH);
             * grow and retry once. Or PCRE2 could not allocate (the copy
             * of the match data SUBSTITUTE_MATCHED makes): n is still
             * PCRE2_UNSET, as pcre2_substitute sets it first. Any other
             * error is the regex's at run time: the 500 below. */
            if (rc == PCRE2_ERROR_NOMEMORY && n == PCRE2_UNSET) {
                w.oom = true;
                ok = false;
                break;
            }
            ok = rc == PCRE2_ERROR_NOMEMORY && attempt == 0 &&
                 rw_reserve(r, &w, n - 1);
        }
        copied = ov[1];
        if (ov[0] == ov[1]) {
            if (ov[0] >= len)
                break;
            retry = PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED;
        } else {
            retry = 0;
        }
        start = ov[1];
    }
    if (ok)
        ok = rw_put(r, &w, (const char *)subject + copied, len - copied);
    if (ok) {
        w.buf[w.len] = '\0';
        r->plan->path = (sy_str){w.buf, w.len};
        return 0;
    }
    if (w.oom)
        return SY_ENOMEM;
    if (!sy__plan_short_circuited(r))
        sy__plan_respond(r, SY_ACTION_RESPOND, 500);
    return 0;
}
