/*
 * pattern_host.c - Ant host patterns: SCG's Host predicate matches with
 * AntPathMatcher('.'), so a host pattern is compiled to one element per
 * label and matched with Ant's doMatch over the request's labels.
 *
 *   pattern  **.{sub}.example.*        host  a.b.api.example.com
 *   labels   **  VAR   LIT     STAR          a b api example com
 *            any number of labels; several ** may stand anywhere
 *
 * Both sides are split on '.' with empty labels dropped, as Ant tokenizes;
 * whether each starts and ends with '.' is compared apart (lead, trail).
 * Each pattern label is read with Ant's glob: '?' one character, '*' any
 * text, "{name}" any text captured, "{name:regex}"; a label without globs
 * is literal. Names need not be identifiers and may repeat (the last
 * capture wins, as in Ant's variable map).
 */
#include "route/pattern_int.h"

/* Steps of Ant's brace glob per label: a pathological pattern gives up
 * (the brace is then literal text) instead of backtracking for long. */
#define GLOB_BUDGET 4096u

/*
 * Ant's glob for a variable with '.' as separator,
 * "\{((?:\{[^.]+?\}|[^.{}]|\\[{}])+?)\}", run from just after a '{' as
 * the regex engine runs it (lazy, alternatives in order, backtracking). A
 * label holds no '.', so only the braces are special. Returns the end
 * (exclusive) of the match, or 0. `any`: a unit was consumed, so a '}'
 * may close.
 */
static size_t glob_brace(const char *s, size_t n, size_t i, bool any,
                         unsigned *budget) {
    for (;;) {
        if (*budget == 0)
            return 0;
        (*budget)--;
        if (any && i < n && s[i] == '}')
            return i + 1;
        if (i >= n || s[i] == '}')
            return 0;
        if (s[i] != '{' && s[i] != '\\') { /* only [^.{}] applies */
            i++;
            any = true;
            continue;
        }
        size_t r;
        if (s[i] == '{') { /* \{[^.]+?\} */
            for (size_t k = i + 2; k < n; k++)
                if (s[k] == '}' && (r = glob_brace(s, n, k + 1, true, budget)))
                    return r;
            return 0;
        }
        /* a backslash: [^.{}] first, then \\[{}] */
        if ((r = glob_brace(s, n, i + 1, true, budget)))
            return r;
        if (i + 1 < n && (s[i + 1] == '{' || s[i + 1] == '}'))
            return glob_brace(s, n, i + 2, true, budget);
        return 0;
    }
}

/* Read the label src[b, e) into tokens; *glob: it has a wildcard or a
 * variable (else it is compared as text). */
static int scan_label(const sy__pattern *p, size_t b, size_t e, tok *t,
                      size_t *nt, bool *glob, sy_error *err) {
    const char *s = p->src;
    size_t n = 0, lit = b;
    unsigned budget = GLOB_BUDGET;
    *glob = false;
    for (size_t j = b; j < e;) {
        char c = s[j];
        size_t end = 0;
        if (c != '?' && c != '*' &&
            !(c == '{' && (end = glob_brace(s, e, j + 1, false, &budget)))) {
            j++;
            continue;
        }
        if (j > lit)
            t[n++] = (tok){T_LIT, lit, j - lit, 0, 0, 0, 0};
        *glob = true;
        if (c != '{') {
            t[n++] = (tok){c == '?' ? T_Q : T_STAR, j, 1, 0, 0, 0, 0};
            lit = ++j;
            continue;
        }
        if (s[j + 1] == '*')
            return sy__pat_error(err, SY_EPATTERN, j,
                                 "{*name} is not allowed in a host pattern");
        tok v = {T_VAR, j, end - j, j + 1, end - j - 2, 0, 0};
        const char *colon = memchr(s + j + 1, ':', end - j - 2);
        if (colon) {
            v.kind = T_RVAR;
            v.nlen = (size_t)(colon - (s + j + 1));
            v.roff = (size_t)(colon - s) + 1;
            v.rlen = end - 1 - v.roff;
        }
        t[n++] = v;
        lit = j = end;
    }
    if (e > lit)
        t[n++] = (tok){T_LIT, lit, e - lit, 0, 0, 0, 0};
    *nt = n;
    return SY_OK;
}

static void add_literal(sy__pattern *p, size_t off, sy_str text) {
    sy__pelem *el = &p->elems[p->n++];
    el->kind = PE_LITERAL;
    el->offset = (uint32_t)off;
    el->var = p->nvars;
    el->len = (uint32_t)text.len; /* the text is src[off, off + len) */
}

/* One label src[b, e) of a host pattern. */
static int label(sy__pattern *p, sy__re_env *env, tok *t, size_t b, size_t e,
                 sy_error *err) {
    const char *s = p->src;
    if (e - b == 2 && s[b] == '*' && s[b + 1] == '*') {
        sy__pelem *el = &p->elems[p->n++];
        el->kind = PE_MULTI;
        el->offset = b;
        el->var = p->nvars;
        return SY_OK;
    }
    size_t nt = 0;
    bool glob = false;
    int rc = scan_label(p, b, e, t, &nt, &glob, err);
    if (rc)
        return rc;
    if (!glob) {
        add_literal(p, b, (sy_str){s + b, e - b});
        return SY_OK;
    }
    sy__pelem *el = &p->elems[p->n++];
    el->offset = b;
    el->var = p->nvars;
    for (size_t i = 0; i < nt; i++)
        if ((t[i].kind == T_VAR || t[i].kind == T_RVAR) &&
            (rc = sy__pat_add_var(p, (sy_str){s + t[i].noff, t[i].nlen}, b,
                                  false, err)))
            return rc;
    if ((rc = sy__pat_set_nvars(p, el, b, err)))
        return rc;
    return sy__pat_compile_glob(p, env, el, t, nt, err);
}

/* "*" then literal labels, the host pattern's whole text: the literals
 * one run of src joined by single dots (no empty label dropped between
 * them), no '.' first or last (sy__pred_host_star). */
static bool star_suffix(const sy__pattern *p, size_t len) {
    if (p->lead || p->trail || p->last - p->first < 2 ||
        p->elems[p->first].kind != PE_STAR)
        return false;
    size_t sum = 0;
    for (size_t k = p->first + 1; k < p->last; k++) {
        if (p->elems[k].kind != PE_LITERAL)
            return false;
        sum += p->elems[k].len + 1;
    }
    const sy__pelem *a = &p->elems[p->first + 1];
    return p->src[0] == '*' && p->src[1] == '.' && a->offset == 2 &&
           a->offset + sum - 1 == len;
}

/*
 * Elements: a virtual empty label for a leading '.', the real labels
 * elems[first, last), and a virtual empty label for a trailing '.' - the
 * same shape split_host gives a request, so the index can walk both. Ant
 * ignores the trailing '.' when the last label is "**", so no virtual
 * label is added then. Virtual labels are never matched: the matcher
 * reads elems[first, last) and the lead/trail flags.
 */
int sy__pat_parse_host(sy__pattern *p, sy__re_env *env, tok *t, sy_error *err) {
    const char *s = p->src;
    size_t len = strlen(s);
    p->lead = len > 0 && s[0] == '.';
    p->trail = len > 0 && s[len - 1] == '.';
    if (p->lead)
        add_literal(p, 0, (sy_str){"", 0});
    p->first = p->n;
    for (size_t i = 0; i < len;) {
        const char *q = memchr(s + i, '.', len - i);
        size_t e = q ? (size_t)(q - s) : len;
        if (e > i) {
            int rc = label(p, env, t, i, e, err);
            if (rc)
                return rc;
        }
        i = e + 1;
    }
    p->last = p->n;
    p->star_suffix = star_suffix(p, len);
    bool any_multi = false;
    for (size_t k = p->first; k < p->last; k++)
        any_multi = any_multi || p->elems[k].kind == PE_MULTI;
    if (!p->trail ||
        (p->last > p->first && p->elems[p->last - 1].kind == PE_MULTI))
        return SY_OK;
    add_literal(p, len - 1, (sy_str){"", 0});
    /* Ant lets a last "*" stand for nothing when the host ends with '.'
     * ("*.*." matches "a."): then the labels need not line up, and the
     * index is told "anything may follow" instead (SY_SEG_REST) */
    if (!any_multi && p->last > p->first &&
        p->elems[p->last - 1].kind == PE_STAR)
        p->elems[p->n - 1].kind = PE_MULTI;
    return SY_OK;
}

void sy__pat_parse_host_literal(sy__pattern *p, size_t len) {
    /* as sy__pat_parse_host reads such a host: no label is "**" or a
     * glob, none is a star (so no star suffix), the trailing '.' adds its
     * virtual label */
    const char *s = p->src;
    p->lead = len > 0 && s[0] == '.';
    p->trail = len > 0 && s[len - 1] == '.';
    if (p->lead)
        add_literal(p, 0, (sy_str){"", 0});
    p->first = p->n;
    for (size_t i = 0; i < len;) {
        const char *q = memchr(s + i, '.', len - i);
        size_t e = q ? (size_t)(q - s) : len;
        if (e > i)
            add_literal(p, i, (sy_str){s + i, e - i});
        i = e + 1;
    }
    p->last = p->n;
    p->star_suffix = false;
    if (p->trail)
        add_literal(p, len - 1, (sy_str){"", 0});
}

/* ------------------------------------------------------------------ */
/* Matching: AntPathMatcher.doMatch                                     */
/* ------------------------------------------------------------------ */

static bool all_multi(const sy__pelem *pt, long from, long to) {
    for (long i = from; i <= to; i++)
        if (pt[i].kind != PE_MULTI)
            return false;
    return true;
}

/* sy__pat_elem_match for one label (last: a '*' may stand for an empty
 * one), a literal or a '*' without the call: most labels of a host
 * pattern are one of the two ("*.t5.example.org"). */
static inline bool label_match(const sy__pattern *p, const sy__pelem *el,
                               sy_str lab, sy__capture *caps, size_t *nc,
                               pcre2_match_data *md) {
    if (el->kind == PE_LITERAL)
        return lab.len == el->len &&
               sy__bytes_eq(lab.ptr, p->src + el->offset, lab.len);
    if (el->kind == PE_STAR)
        return true;
    return sy__pat_elem_match(p, el, lab, true, caps, nc, md);
}

bool sy__pattern_match_host(const sy__pattern *p, const sy__segments *labels,
                            sy__capture *caps, size_t *ncaps,
                            pcre2_match_data *md) {
    size_t dummy = 0;
    if (!ncaps)
        ncaps = &dummy;
    /* no labels at all: the Host was empty or missing; SCG reads a missing
     * Host as null, which AntPathMatcher never matches (switchyard cannot
     * tell the two apart, so an empty Host matches nothing either) */
    if (labels->count == 0 || p->lead != labels->lead ||
        labels->count < (size_t)labels->lead + labels->trail)
        return false;
    const sy__pelem *pt = p->elems + p->first;
    const sy_str *ht = labels->dec + labels->lead;
    long pn = (long)(p->last - p->first);
    long hn = (long)(labels->count - labels->lead - labels->trail);
    bool trail_eq = p->trail == labels->trail;
    size_t nc = *ncaps;
    long ps = 0, pe = pn - 1, hs = 0, he = hn - 1;
    bool ok;

    /* up to the first ** */
    for (; ps <= pe && hs <= he && pt[ps].kind != PE_MULTI; ps++, hs++)
        if (!label_match(p, &pt[ps], ht[hs], caps, &nc, md))
            return false;
    if (hs > he) { /* host used up: only ** (or one '*' for a '.') left */
        if (ps > pe)
            ok = trail_eq;
        else if (ps == pe && pt[ps].kind == PE_STAR && labels->trail)
            ok = true;
        else
            ok = all_multi(pt, ps, pe);
        goto done;
    }
    if (ps > pe)
        return false;
    /* from the end down to the last ** */
    for (; ps <= pe && hs <= he && pt[pe].kind != PE_MULTI; pe--, he--) {
        if (!label_match(p, &pt[pe], ht[he], caps, &nc, md))
            return false;
        if (pe == pn - 1 && !trail_eq)
            return false;
    }
    if (hs > he) {
        ok = all_multi(pt, ps, pe);
        goto done;
    }
    /* each run of labels between two ** : its first place in the host */
    while (ps != pe && hs <= he) {
        long next = ps + 1;
        while (pt[next].kind != PE_MULTI)
            next++;
        if (next == ps + 1) {
            ps++;
            continue;
        }
        long plen = next - ps - 1, slen = he - hs + 1, found = -1;
        for (long i = 0; i <= slen - plen && found < 0; i++) {
            size_t save = nc;
            long j = 0;
            while (j < plen && label_match(p, &pt[ps + j + 1], ht[hs + i + j],
                                           caps, &nc, md))
                j++;
            if (j == plen)
                found = hs + i;
            else
                nc = save;
        }
        if (found < 0)
            return false;
        ps = next;
        hs = found + plen;
    }
    ok = all_multi(pt, ps, pe);
done:
    if (ok)
        *ncaps = nc;
    return ok;
}
