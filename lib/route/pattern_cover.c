/*
 * pattern_cover.c - containment of patterns: does pattern q match every
 * request path (host) that pattern p matches? For the shadowed-route
 * check (snapshot/shadow.c). The answer must be exact when it says yes
 * and may say no when it cannot tell.
 *
 * A path pattern matches the request's decoded segments (pattern.c
 * match_core), so both patterns are read as automata over segments, with
 * every segment the two patterns can tell apart as a letter:
 *
 *   letters   ""b  ""m   other    "api"  "v1" ...   (the literals of p, q)
 *             bare empty; empty with matrix parameters ("/a/;x")
 *
 *   p = /api/{v} then a ** element:  0 -"api"-> 1 -(not empty)-> 2,
 *   then 2 -(any)-> 2 (accepting)
 *
 * and p is included in q when no word reaches an accepting set of p's
 * subsets without one of q's (a walk over pairs of subsets). A regex
 * element of p is read as "any segment" (more than it matches: safe for
 * p), one of q as "no segment" (less than it matches: safe for q). An
 * all-literal p is instead matched by q's own matcher on each request
 * shape p admits (exact). Hosts: equal texts, or an all-literal p that q's
 * matcher accepts.
 */
#include "route/pattern_int.h"

#include <string.h>

/* Most elements a pattern may have here (states are bits of a word). */
#define COVER_ELEMS_MAX 60u
/* Most pairs of subsets walked before giving up (answer: not included). */
#define COVER_PAIRS_MAX 1024u
/* Letters: 0 bare empty, 1 empty with parameters, 2 other non-empty,
 * 3... the literals. */
#define L_BARE 0u
#define L_MATRIX 1u
#define L_OTHER 2u
#define LETTERS_MAX (3u + 2u * COVER_ELEMS_MAX)

typedef struct cover_side {
    const sy__pattern *pat;
    bool is_p;  /* p: regexes read as "any", else as "none" */
    bool extra; /* an accepted word may take one more bare empty segment */
} cover_side;

typedef struct letters {
    sy_str lit[LETTERS_MAX];
    size_t n; /* 3 + literals */
} letters;

static sy_str elem_text(const sy__pattern *p, const sy__pelem *el) {
    return (sy_str){p->src + el->offset, el->len};
}

static void add_letters(letters *ls, const sy__pattern *p) {
    for (size_t i = 0; i < p->n; i++) {
        const sy__pelem *el = &p->elems[i];
        if (el->kind != PE_LITERAL || el->len == 0)
            continue;
        sy_str t = elem_text(p, el);
        size_t k = 3;
        while (k < ls->n && !(ls->lit[k].len == t.len &&
                              memcmp(ls->lit[k].ptr, t.ptr, t.len) == 0))
            k++;
        if (k == ls->n)
            ls->lit[ls->n++] = t;
    }
}

/* Element i of s's pattern takes letter x. */
static bool elem_takes(const cover_side *s, const letters *ls, size_t i,
                       size_t x) {
    const sy__pattern *p = s->pat;
    const sy__pelem *el = &p->elems[i];
    bool empty = x == L_BARE || x == L_MATRIX;
    switch ((pe_kind)el->kind) {
    case PE_LITERAL:
        if (el->len == 0)
            return empty;
        return x >= 3 && ls->lit[x].len == el->len &&
               memcmp(ls->lit[x].ptr, p->src + el->offset, el->len) == 0;
    case PE_STAR: return !empty || i + 1 == p->n;
    case PE_VAR: return !empty;
    case PE_REGEX: return s->is_p;
    case PE_MULTI: return true;
    }
    return false;
}

/* States: bit i (0..n) = i elements matched; bit n + 1 = the accepted
 * word plus one bare empty segment. */
static uint64_t closure(const sy__pattern *p, uint64_t set) {
    for (size_t i = 0; i < p->n; i++)
        if ((set >> i & 1u) && p->elems[i].kind == PE_MULTI)
            set |= 1ull << (i + 1);
    return set;
}

static uint64_t step(const cover_side *s, const letters *ls, uint64_t set,
                     size_t x) {
    const sy__pattern *p = s->pat;
    size_t n = p->n;
    uint64_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(set >> i & 1u))
            continue;
        if (p->elems[i].kind == PE_MULTI)
            out |= 1ull << i;
        else if (elem_takes(s, ls, i, x))
            out |= 1ull << (i + 1);
    }
    if (s->extra && (set >> n & 1u) && x == L_BARE)
        out |= 1ull << (n + 1);
    return closure(p, out);
}

static bool accepting(const sy__pattern *p, uint64_t set) {
    return (set >> p->n & 3u) != 0;
}

typedef struct pair {
    uint64_t p, q;
} pair;

/* Every word p's automaton accepts, q's does. */
static bool included(const cover_side *ps, const cover_side *qs) {
    static const size_t cap = COVER_PAIRS_MAX;
    letters ls;
    ls.n = 3;
    add_letters(&ls, ps->pat);
    add_letters(&ls, qs->pat);
    pair seen[COVER_PAIRS_MAX];
    size_t nseen = 0, next = 0;
    seen[nseen++] = (pair){closure(ps->pat, 1u), closure(qs->pat, 1u)};
    while (next < nseen) {
        pair cur = seen[next++];
        if (accepting(ps->pat, cur.p) && !accepting(qs->pat, cur.q))
            return false;
        for (size_t x = 0; x < ls.n; x++) {
            pair nx = {step(ps, &ls, cur.p, x), step(qs, &ls, cur.q, x)};
            if (!nx.p)
                continue;
            size_t k = 0;
            while (k < nseen && (seen[k].p != nx.p || seen[k].q != nx.q))
                k++;
            if (k < nseen)
                continue;
            if (nseen == cap)
                return false;
            seen[nseen++] = nx;
        }
    }
    return true;
}

static bool all_literal(const sy__pattern *p) {
    for (size_t i = 0; i < p->n; i++)
        if (p->elems[i].kind != PE_LITERAL)
            return false;
    return true;
}

/* An all-literal path p: q matches each segment list p admits. Only the
 * last two segments' raw text matters to a match (bare_empty), and only
 * when they are empty: both spellings of each are tried. */
static bool literal_path_in(const sy__pattern *q, bool q_trailing,
                            const sy__pattern *p, bool p_trailing) {
    sy_str dec[COVER_ELEMS_MAX + 1], raw[COVER_ELEMS_MAX + 1];
    static const sy_str matrix = {";m", 2};
    size_t n = p->n;
    for (size_t i = 0; i < n; i++)
        dec[i] = raw[i] = elem_text(p, &p->elems[i]);
    /* q's regexes run on p's literal segments (libc's allocator: this is
     * a check at publish time, not a match) */
    pcre2_match_data *md =
        pcre2_match_data_create(sy__pattern_max_groups(q) + 1, NULL);
    bool all = md != NULL;
    for (int extra = 0; all && extra <= (p_trailing ? 1 : 0); extra++) {
        size_t c = n + (size_t)extra;
        if (extra)
            dec[n] = raw[n] = (sy_str){"", 0};
        /* positions whose raw spelling may vary: empty, among the last
         * two, and not the appended bare one */
        size_t vary[2], nv = 0;
        for (size_t i = c >= 2 ? c - 2 : 0; i < n && i < c; i++)
            if (dec[i].len == 0)
                vary[nv++] = i;
        for (unsigned combo = 0; all && combo < (1u << nv); combo++) {
            for (size_t k = 0; k < nv; k++)
                raw[vary[k]] = (combo >> k & 1u) ? matrix : dec[vary[k]];
            sy__segments segs;
            memset(&segs, 0, sizeof segs);
            segs.count = segs.cap = c;
            segs.dec = dec;
            segs.raw = raw;
            all = sy__pattern_match_path(q, &segs, q_trailing, NULL, NULL, md,
                                         NULL);
        }
    }
    pcre2_match_data_free(md);
    return all;
}

bool sy__pattern_covers_path(const sy__pattern *q, bool q_trailing,
                             const sy__pattern *p, bool p_trailing) {
    if (p->host || q->host)
        return false;
    if (!sy__pattern_can_match(p))
        return true; /* p matches nothing */
    if (!sy__pattern_can_match(q) || p->n > COVER_ELEMS_MAX ||
        q->n > COVER_ELEMS_MAX)
        return false;
    if (all_literal(p))
        return literal_path_in(q, q_trailing, p, p_trailing);
    /* Spring's last regex without variables may take one more bare empty
     * segment (match_core): read like a trailing slash */
    bool p_rest = p->multi == PE_NONE && p->n > 0 &&
                  p->elems[p->n - 1].kind == PE_REGEX &&
                  !p->elems[p->n - 1].nvars;
    cover_side ps = {p, true, p_trailing || p_rest};
    cover_side qs = {q, false, q_trailing};
    return included(&ps, &qs);
}

bool sy__pattern_covers_host(const sy__pattern *q, const sy__pattern *p,
                             const sy__alloc *alloc) {
    if (!p->host || !q->host)
        return false;
    if (strcmp(p->src, q->src) == 0)
        return true;
    /* an all-literal p without a leading or trailing '.' matches exactly
     * the hosts whose labels are its own (pattern_host.c) */
    if (p->lead || p->trail || p->first != 0 || p->last != p->n ||
        !all_literal(p))
        return false;
    sy__segments labels;
    memset(&labels, 0, sizeof labels);
    if (!sy__segments_split_host(&labels, (sy_str){p->src, strlen(p->src)},
                                 alloc))
        return false;
    size_t nc = 0;
    bool ok = !labels.lead && !labels.trail &&
              sy__pattern_match_host(q, &labels, NULL, &nc, NULL);
    sy__segments_free(&labels, alloc);
    return ok;
}
