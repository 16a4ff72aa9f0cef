/*
 * filter_path.c - rewriting the plan's raw path: StripPrefix, PrefixPath,
 * SetPath and RewritePath (regex replace-all under the request's budget,
 * output capped). New paths live in the scratch arena.
 */
#include "budget.h"
#include "filter_plan_int.h"

/* StripPrefix as SCG: tokenize the raw path on '/' (tokens trimmed, empty
 * ones dropped), drop the first `parts`, re-join behind '/', and keep a
 * trailing '/' when the original had one and the result is not "/". */
bool sy_plan_strip_prefix(sy_run *r, int64_t parts) {
    sy_str p = r->plan->path;
    char *buf = sy_arena_alloc(r->ar, p.len + 2);
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
        sy_plan_trim(p.ptr, &s, &e);
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

/* PrefixPath: the expanded prefix before the path. SCG: only the first
 * PrefixPath of the chain applies. */
bool sy_plan_prefix_path(sy_run *r, const sy_filter *f) {
    if (r->prefixed)
        return true;
    r->prefixed = true;
    sy_str v;
    size_t len;
    char *buf = NULL;
    if (!sy_plan_expand_uri_path(r, f->value, &v) ||
        !(buf = sy_plan_concat(r->ar, v, r->plan->path, SY_PLAN_EMPTY,
                               SY_PLAN_EMPTY, &len)))
        return false;
    r->plan->path = (sy_str){buf, len};
    return true;
}

/* SetPath: the expanded template is the path. */
bool sy_plan_set_path(sy_run *r, const sy_filter *f) {
    return sy_plan_expand_uri_path(r, f->value, &r->plan->path);
}

/* Room for `need` more bytes in the rewrite output (*out holding *o of
 * *cap bytes, grown in the arena, never past `max`). */
static bool rw_reserve(sy_run *r, char **out, size_t o, size_t *cap, size_t max,
                       size_t need) {
    if (need > max - o)
        return false;
    if (o + need <= *cap)
        return true;
    size_t ncap = *cap * 2 > o + need ? *cap * 2 : o + need;
    if (ncap > max)
        ncap = max;
    char *b = sy_arena_alloc(r->ar, ncap + 1);
    if (!b)
        return false;
    memcpy(b, *out, o);
    *out = b;
    *cap = ncap;
    return true;
}

static bool rw_put(sy_run *r, char **out, size_t *o, size_t *cap, size_t max,
                   const char *src, size_t n) {
    if (!rw_reserve(r, out, *o, cap, max, n))
        return false;
    memcpy(*out + *o, src, n);
    *o += n;
    return true;
}

/* RewritePath: replace-all on the current raw path, as pcre2_substitute's
 * global mode does (after an empty match, retry at the same place with
 * NOTEMPTY_ATSTART | ANCHORED, else step one byte), but one match at a
 * time under the request's budget (budget.h) and with the output capped
 * at its max_rewrite bytes; each replacement is expanded by
 * pcre2_substitute from the match already made (SUBSTITUTE_MATCHED).
 * switchyard: a regex failure at run time (match limit, budget) or an
 * output over the cap answers 500, as SCG's exception would. */
int sy_plan_rewrite_path(sy_run *r, const sy_filter *f) {
    sy_str p = r->plan->path;
    PCRE2_SPTR subject = (PCRE2_SPTR)(p.ptr ? p.ptr : "");
    size_t len = p.len, max = sy_budget_max_rewrite();
    pcre2_match_data *md = r->md;
    size_t cap = len + f->value.len + 64, o = 0, copied = 0, start = 0;
    if (cap > max)
        cap = max;
    char *out = sy_arena_alloc(r->ar, cap + 1);
    if (!out)
        return SY_ENOMEM;
    bool ok = md && pcre2_get_ovector_count(md) >= f->groups;
    uint32_t retry = 0; /* after an empty match */
    while (ok) {
        int rc = sy_re_match(f->re, subject, len, start, retry, md, f->mctx,
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
            ok = false;
            break;
        }
        ok = rw_put(r, &out, &o, &cap, max, (const char *)subject + copied,
                    ov[0] - copied);
        for (int attempt = 0; ok && attempt < 2; attempt++) {
            PCRE2_SIZE n = cap - o + 1;
            rc = pcre2_substitute(f->re, subject, len, start,
                                  PCRE2_SUBSTITUTE_MATCHED |
                                      PCRE2_SUBSTITUTE_REPLACEMENT_ONLY |
                                      PCRE2_SUBSTITUTE_UNSET_EMPTY |
                                      PCRE2_SUBSTITUTE_OVERFLOW_LENGTH,
                                  md, f->mctx, (PCRE2_SPTR)f->value.ptr,
                                  f->value.len, (PCRE2_UCHAR *)out + o, &n);
            if (rc >= 0) {
                o += n;
                break;
            }
            /* n: the bytes needed, terminator included; grow, retry once */
            ok = rc == PCRE2_ERROR_NOMEMORY && attempt == 0 &&
                 rw_reserve(r, &out, o, &cap, max, n - 1);
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
        ok = rw_put(r, &out, &o, &cap, max, (const char *)subject + copied,
                    len - copied);
    if (ok) {
        out[o] = '\0';
        r->plan->path = (sy_str){out, o};
        return 0;
    }
    if (!sy_plan_short_circuited(r))
        sy_plan_respond(r, SY_ACTION_RESPOND, 500);
    return 0;
}
