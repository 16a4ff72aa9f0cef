/*
 * pattern.c - owns Spring PathPatterns (route model 4.1) and Ant host
 * patterns ('.' separator); request splitting is in pattern_split.c. A
 * pattern is parsed into one element per segment; only segments that need
 * one get a PCRE2 regex:
 *
 *   pattern  /api  /{v}  /file*.txt    /{id:\d+}  /{*rest}
 *   element  LIT   VAR   REGEX (mixed) REGEX      MULTI
 *   test     cmp   !=""  file.*\.txt   \d+        0..n segments
 *
 * Regexes are compiled through regex.c, anchored at both ends (never at
 * match time, which would turn the JIT off), JIT-compiled, and matched with
 * a match context that caps backtracking. Matching only reads the pattern.
 * A route's patterns are compiled into its arena (sy__pattern_compile_in):
 * no allocation of their own unless they hold regexes.
 */
#include "route/pattern_int.h"

#include "base/budget.h"
#include "route/compile_env.h" /* sy__compile_obj */

#include <stdio.h>

/* Byte classes for the scans of a pattern's text. */
enum { C_SLASH = 1, C_DOT = 2, C_BRACE = 4, C_GLOB = 8 };
static const unsigned char cls[256] = {
    ['/'] = C_SLASH, ['.'] = C_DOT,  ['{'] = C_BRACE | C_GLOB,
    ['}'] = C_GLOB,  ['?'] = C_GLOB, ['*'] = C_GLOB,
};

/* What count_classes adds a byte: four 16-bit counts in a word ('/',
 * '.', '{', glob characters), so a byte costs one load and one add. */
#define K_SLASH 1ull
#define K_DOT (1ull << 16)
#define K_BRACE (1ull << 32)
#define K_GLOB (1ull << 48)
static const uint64_t class_add[256] = {
    ['/'] = K_SLASH, ['.'] = K_DOT,  ['{'] = K_BRACE | K_GLOB,
    ['}'] = K_GLOB,  ['?'] = K_GLOB, ['*'] = K_GLOB,
};

/* Separators ('/' or '.'), '{' and glob characters of src[0, len). */
static void count_classes(const char *src, size_t len, bool host, size_t *nsep,
                          size_t *nbrace, size_t *nglob) {
    size_t n[4];
    sy__count_classes4((const unsigned char *)src, len, class_add, n);
    *nsep = n[host ? 1 : 0];
    *nbrace = n[2];
    if (nglob)
        *nglob = n[3];
}

/* One piece (segment or label) that holds a glob character: true unless
 * it is "*", "**", "{name}" or "{*name}", which compile without a regex. */
static bool piece_may_regex(const char *s, size_t n) {
    if ((n == 1 && s[0] == '*') || (n == 2 && s[0] == '*' && s[1] == '*'))
        return false;
    if (n < 3 || s[0] != '{' || s[n - 1] != '}')
        return true;
    size_t i = s[1] == '*' ? 2 : 1;
    if (i + 1 >= n)
        return true;
    for (; i + 1 < n; i++)
        if (cls[(unsigned char)s[i]] & C_GLOB || s[i] == ':')
            return true;
    return false;
}

static bool piece_end(char c, char sep, bool commas) {
    return c == sep || (commas && c == ',');
}

/* Only the pieces around a glob character are looked at: the bytes
 * between are skipped one table test each (most of a pattern's text). */
/* The piece around the glob character at i: [*start, *end). */
static void piece_at(const char *s, size_t len, size_t i, char sep, bool commas,
                     size_t *start, size_t *end) {
    size_t b = i, e = i + 1;
    while (b > 0 && !piece_end(s[b - 1], sep, commas))
        b--;
    while (e < len && !piece_end(s[e], sep, commas))
        e++;
    *start = b;
    *end = e;
}

/* The glob characters of a piece: those piece_may_regex passes ("*",
 * "**", "{name}", "{*name}") told by their form, others counted. */
static size_t piece_globs(const char *s, size_t n, bool may_regex) {
    if (!may_regex)
        return s[0] == '*' ? n : s[1] == '*' ? 3 : 2;
    size_t g = 0;
    for (size_t k = 0; k < n; k++)
        g += (cls[(unsigned char)s[k]] & C_GLOB) != 0;
    return g;
}

size_t sy__pattern_regex_pieces(const char *s, size_t len, char sep,
                                bool commas, size_t globs) {
    size_t count = 0, seen = 0, start, end;
    if (sep == '/') { /* from the end */
        for (size_t i = len; i > 0 && seen < globs;) {
            if (!(cls[(unsigned char)s[--i]] & C_GLOB))
                continue;
            piece_at(s, len, i, sep, commas, &start, &end);
            bool rx = piece_may_regex(s + start, end - start);
            count += rx;
            seen += piece_globs(s + start, end - start, rx);
            i = start; /* next: before the piece's separator */
        }
        return count;
    }
    for (size_t i = 0; i < len && seen < globs;) {
        if (!(cls[(unsigned char)s[i]] & C_GLOB)) {
            i++;
            continue;
        }
        piece_at(s, len, i, sep, commas, &start, &end);
        bool rx = piece_may_regex(s + start, end - start);
        count += rx;
        seen += piece_globs(s + start, end - start, rx);
        i = end + 1; /* past the piece's separator */
    }
    return count;
}

/* Offset of the k-th (from 1) `sep` of src[0, len), or len. */
static size_t nth_sep(const char *src, size_t len, char sep, size_t k) {
    for (size_t i = 0; i < len; i++)
        if (src[i] == sep && --k == 0)
            return i;
    return len;
}

/* Character.isJavaIdentifierStart / Part as Spring's parser uses them for
 * variable names ('-' is also allowed after the first character). Bytes
 * of multi-byte UTF-8 characters count as letters. */
static bool id_start(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           c == '$' || c >= 0x80;
}

static bool id_part(unsigned char c) {
    return id_start(c) || (c >= '0' && c <= '9') || c == '-';
}

/*
 * Spring's skipCaptureRegex: from the ':' at `colon`, find the '}' that
 * closes the variable. Nested {...} pairs are counted, a backslash escapes
 * the next character, and an unescaped '/' cuts the variable.
 */
static int skip_regex(const sy__pattern *p, size_t len, size_t colon,
                      size_t *close, sy_error *err) {
    const char *s = p->src;
    size_t start = colon + 1, depth = 0;
    for (size_t i = start; i < len; i++) {
        char c = s[i];
        if (c == '\\') {
            i++;
            continue;
        }
        if (c == '{') {
            depth++;
        } else if (c == '}') {
            if (depth == 0) {
                if (i == start)
                    return sy__pat_error(err, SY_EPATTERN, start,
                                         "empty regex in {name:regex}");
                *close = i;
                return SY_OK;
            }
            depth--;
        } else if (c == '/') {
            return sy__pat_error(err, SY_EPATTERN, i,
                                 "'{' is not closed before this '/'");
        }
    }
    return sy__pat_error(err, SY_EPATTERN, len ? len - 1 : 0,
                         "'{' is not closed");
}

/* Scan the variable starting with the '{' at `j` into *t (T_VAR, T_RVAR or
 * T_REST), as Spring's parser checks it; *next = after its '}'. */
static int scan_var(const sy__pattern *p, size_t len, size_t j, tok *t,
                    size_t *next, sy_error *err) {
    const char *s = p->src;
    size_t k = j + 1, close = 0;
    bool rest = k < len && s[k] == '*';
    if (rest)
        k++;
    size_t name = k;
    *t = (tok){rest ? T_REST : T_VAR, j, 0, name, 0, 0, 0};
    for (;; k++) {
        if (k >= len)
            return sy__pat_error(err, SY_EPATTERN, len, "'{' is not closed");
        unsigned char c = (unsigned char)s[k];
        if (c == '}') {
            close = k;
            break;
        }
        if (c == ':' && !rest) {
            int rc = skip_regex(p, len, k, &close, err);
            if (rc)
                return rc;
            t->kind = T_RVAR;
            t->roff = k + 1;
            t->rlen = close - k - 1;
            break;
        }
        if (c == '/')
            return sy__pat_error(err, SY_EPATTERN, k,
                                 "'{' is not closed before this '/'");
        if (c == '{')
            return sy__pat_error(err, SY_EPATTERN, k,
                                 "'{' inside a variable name");
        if (k == name ? !id_start(c) : !id_part(c))
            return sy__pat_error(err, SY_EPATTERN, k,
                                 k == name
                                     ? "a variable name must start with a "
                                       "letter, '_' or '$'"
                                     : "a variable name holds only letters, "
                                       "digits, '_', '$' and '-'");
    }
    t->nlen = (t->kind == T_RVAR ? t->roff - 1 : close) - name;
    t->len = close + 1 - j;
    *next = close + 1;
    return SY_OK;
}

static int add_multi(sy__pattern *p, size_t off, const sy_str *name,
                     sy_error *err) {
    sy__pelem *el = &p->elems[p->n];
    el->kind = PE_MULTI;
    el->offset = (uint32_t)off;
    el->var = p->nvars;
    if (name) {
        int rc = sy__pat_add_var(p, *name, off, true, err);
        if (rc)
            return rc;
        el->nvars = 1;
    }
    p->n++;
    return SY_OK;
}

/* Scan the segment starting at s0 up to the next '/' (or the end) into
 * tokens; *end = where it stops. */
static int scan_segment(const sy__pattern *p, size_t len, size_t s0, tok *t,
                        size_t *nt, size_t *end, sy_error *err) {
    const char *s = p->src;
    size_t j = s0, n = 0;
    while (j < len && s[j] != '/') {
        char c = s[j];
        if (c == '{') {
            int rc = scan_var(p, len, j, &t[n++], &j, err);
            if (rc)
                return rc;
        } else if (c == '}') {
            return sy__pat_error(err, SY_EPATTERN, j,
                                 "'}' without a matching '{'");
        } else if (c == '?' || c == '*') {
            t[n++] = (tok){c == '?' ? T_Q : T_STAR, j, 1, 0, 0, 0, 0};
            j++;
        } else {
            size_t b = j;
            while (j < len && !(cls[(unsigned char)s[j]] & (C_SLASH | C_GLOB)))
                j++;
            t[n++] = (tok){T_LIT, b, j - b, 0, 0, 0, 0};
        }
    }
    *nt = n;
    *end = j;
    return SY_OK;
}

/* Build the element of segment src[s0, e) from its tokens. */
static int segment(sy__pattern *p, sy__re_env *env, tok *t, size_t nt,
                   size_t s0, size_t e, sy_error *err) {
    const char *s = p->src;
    if (e - s0 == 2 && s[s0] == '*' && s[s0 + 1] == '*')
        return add_multi(p, s0, NULL, err);
    for (size_t i = 0; i < nt; i++)
        if (t[i].kind == T_REST) {
            if (nt != 1)
                return sy__pat_error(err, SY_EPATTERN, s0,
                                     "{*name} must be a whole segment");
            sy_str name = {s + t[i].noff, t[i].nlen};
            return add_multi(p, s0, &name, err);
        }
    /* a nameless "{}" inside a longer segment is literal text to Spring's
     * RegexPathElement (its glob needs a character) */
    for (size_t i = 0; nt > 1 && i < nt; i++)
        if (t[i].kind == T_VAR && t[i].nlen == 0)
            t[i].kind = T_LIT;
    sy__pelem *el = &p->elems[p->n++];
    el->offset = (uint32_t)s0;
    el->var = p->nvars;
    for (size_t i = 0; i < nt; i++)
        if (t[i].kind == T_VAR || t[i].kind == T_RVAR) {
            int rc = sy__pat_add_var(p, (sy_str){s + t[i].noff, t[i].nlen}, s0,
                                     true, err);
            if (rc)
                return rc;
        }
    int rc = sy__pat_set_nvars(p, el, s0, err);
    if (rc)
        return rc;
    bool lit = true;
    for (size_t i = 0; i < nt; i++)
        lit = lit && t[i].kind == T_LIT;
    if (lit) {
        el->kind = PE_LITERAL;
        el->len = (uint32_t)(e - s0);
        return SY_OK;
    }
    return sy__pat_compile_glob(p, env, el, t, nt, err);
}

static int parse_path(sy__pattern *p, sy__re_env *env, tok *t, sy_error *err) {
    const char *s = p->src;
    size_t len = strlen(s);
    p->rooted = len > 0 && s[0] == '/';
    if (len == 0)
        return SY_OK;
    for (size_t i = p->rooted ? 1 : 0;; i++) {
        size_t start = i, nt = 0;
        int rc = scan_segment(p, len, start, t, &nt, &i, err);
        if (rc == SY_OK)
            rc = segment(p, env, t, nt, start, i, err);
        if (rc)
            return rc;
        if (i >= len)
            break;
    }
    /* Spring: one ** or {*x}, in the first segment or ending the pattern */
    for (size_t k = 0; k < p->n; k++) {
        if (p->elems[k].kind != PE_MULTI)
            continue;
        if (p->multi != PE_NONE)
            return sy__pat_error(err, SY_EPATTERN, p->elems[k].offset,
                                 "at most one ** or {*name} per pattern");
        if (k != 0 && k + 1 != p->n)
            return sy__pat_error(err, SY_EPATTERN, p->elems[k].offset,
                                 "** and {*name} may only stand first or "
                                 "last");
        p->multi = (uint16_t)k;
    }
    return SY_OK;
}

/* A path without '{', '}', '?' or '*' (nor, then, "**"): every segment
 * is literal text, split on '/' as parse_path splits it. */
static void parse_literal_path(sy__pattern *p, size_t len) {
    const char *s = p->src;
    p->rooted = len > 0 && s[0] == '/';
    if (len == 0)
        return;
    for (size_t i = p->rooted ? 1 : 0;;) {
        const char *q = memchr(s + i, '/', len - i);
        size_t e = q ? (size_t)(q - s) : len;
        sy__pelem *el = &p->elems[p->n++];
        el->kind = PE_LITERAL;
        el->offset = (uint32_t)i;
        el->len = (uint32_t)(e - i);
        if (!q)
            return;
        i = e + 1;
    }
}

/* Tokens of one segment fit here for patterns shorter than this. */
#define SMALL_TOKENS 32

static int compile(const sy__alloc *a, sy__arena *ar, sy__arena_chunk *top,
                   const char *src, bool host, sy__pattern **out,
                   sy_error *err) {
    *out = NULL;
    if (!src)
        return sy__error_set(err, SY_EINVAL, "", "no pattern");
    /* elements: a path has one per '/' (and one more without a leading
     * '/'), a host at most one per label and two virtual ones */
    size_t len = strlen(src), nsep = 0, nbrace = 0, nglob = 0;
    if (len > SY_PATTERN_MAX)
        return sy__pat_error(err, SY_EPATTERN, SY_PATTERN_MAX,
                             "pattern too long");
    count_classes(src, len, host, &nsep, &nbrace, &nglob);
    /* a slot for the match context only when a regex may be made */
    bool slot = nglob && sy__pattern_regex_pieces(src, len, host ? '.' : '/',
                                                  false, nglob) > 0;
    size_t nelem = host ? nsep + 3 : len ? nsep + (src[0] == '/' ? 0 : 1) : 0;
    if (nelem > SY_PATTERN_ELEMS_MAX) {
        /* the separator that makes one element too many */
        size_t k = host ? SY_PATTERN_ELEMS_MAX - 2
                        : SY_PATTERN_ELEMS_MAX + (src[0] == '/' ? 1 : 0);
        char msg[96];
        snprintf(msg, sizeof msg, "more than %zu %s", SY_PATTERN_ELEMS_MAX,
                 host ? "labels" : "segments");
        return sy__pat_error(err, SY_EPATTERN,
                             nth_sep(src, len, host ? '.' : '/', k), msg);
    }
    /* one piece: the pattern, its elements and variable names (and, in
     * a block of its own, the allocator copy and the source), so
     * matching touches adjacent memory (see pattern_int.h); a glob may
     * make a regex, whose match context goes after the names */
    size_t text = sizeof(sy__pattern) + nelem * sizeof(sy__pelem) +
                  nbrace * sizeof(sy_str) +
                  (slot ? sizeof(pcre2_match_context *) : 0);
    sy__pattern *p;
    if (ar) {
        if (!(p = sy__compile_obj(top, ar, text)))
            return sy__error_set(err, SY_ENOMEM, "", "out of memory");
        memset(p, 0, text);
        p->in_arena = true;
    } else {
        sy__alloc *copy = sy__malloc(a, sizeof *copy + text + len + 1);
        if (!copy)
            return sy__error_set(err, SY_ENOMEM, "", "out of memory");
        *copy = *a; /* PCRE2 keeps a pointer to it */
        a = copy;
        p = (sy__pattern *)(void *)(copy + 1);
        memset(p, 0, text);
    }
    p->host = host;
    p->multi = PE_NONE;
    p->max_groups = 1;
    p->vars = (sy_str *)(void *)(p->elems + nelem);
    if (ar) {
        p->src = src;
    } else {
        char *copy = (char *)(p->vars + nbrace) +
                     (slot ? sizeof(pcre2_match_context *) : 0);
        memcpy(copy, src, len + 1);
        p->src = copy;
    }
    if (nglob == 0) { /* every segment (label) literal */
        if (host)
            sy__pat_parse_host_literal(p, len);
        else
            parse_literal_path(p, len);
        *out = p;
        return SY_OK;
    }
    /* scratch for the tokens of one segment (at most one per byte) */
    tok small[SMALL_TOKENS];
    tok *t = len < SMALL_TOKENS ? small : sy__malloc(a, (len + 1) * sizeof *t);
    sy__re_env env;
    sy__re_env_init(&env, a, SY_RE_MATCH_LIMIT, SY_RE_DEPTH_LIMIT);
    int rc;
    if (!t)
        rc = sy__error_set(err, SY_ENOMEM, "", "out of memory");
    else
        rc = host ? sy__pat_parse_host(p, &env, t, err)
                  : parse_path(p, &env, t, err);
    if (t != small)
        sy__free(a, t);
    sy__re_env_done(&env, rc == SY_OK);
    if (rc) {
        sy__pattern_free(p);
        return rc;
    }
    if (env.m) { /* after the names (nvars <= nbrace): a regex was made, so
                    the slot is there */
        memcpy(p->vars + p->nvars, &env.m, sizeof env.m);
        p->has_mctx = true;
    }
    *out = p;
    return SY_OK;
}

int sy__pattern_compile_path(const sy__alloc *a, const char *src,
                             sy__pattern **out, sy_error *err) {
    return compile(a, NULL, NULL, src, false, out, err);
}

int sy__pattern_compile_host(const sy__alloc *a, const char *src,
                             sy__pattern **out, sy_error *err) {
    return compile(a, NULL, NULL, src, true, out, err);
}

int sy__pattern_compile_in(const sy__alloc *a, sy__arena *ar, const char *src,
                           bool host, sy__pattern **out, sy_error *err) {
    return compile(a, ar, NULL, src, host, out, err);
}

int sy__pattern_compile_at(const sy__alloc *a, sy__arena *ar,
                           sy__arena_chunk *top, const char *src, bool host,
                           sy__pattern **out, sy_error *err) {
    return compile(a, ar, top, src, host, out, err);
}

size_t sy__pattern_bytes_max(size_t npatterns, size_t rooted, size_t nsep,
                             size_t nbrace, size_t nregex, bool host) {
    /* a path has one element per '/', and one more without a leading '/';
     * a host at most three more than its '.' (see compile) */
    size_t nelem =
        host ? nsep + 3 * npatterns
             : nsep + npatterns - (rooted < npatterns ? rooted : npatterns);
    /* a match context slot in each pattern that may make a regex */
    /* (every piece is a multiple of 8 bytes: a pattern after another
     * aligned object needs no padding) */
    return npatterns * sizeof(sy__pattern) + nelem * sizeof(sy__pelem) +
           nbrace * sizeof(sy_str) +
           (nregex < npatterns ? nregex : npatterns) *
               sizeof(pcre2_match_context *);
}

void sy__pattern_free(sy__pattern *p) {
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        if (p->elems[i].kind == PE_REGEX)
            pcre2_code_free(p->elems[i].re);
    pcre2_match_context_free(sy__pat_mctx(p));
    if (p->in_arena)
        return; /* elements, names and source: the arena's */
    sy__alloc *copy = (sy__alloc *)(void *)p - 1;
    sy__alloc a = *copy;
    sy__free(&a, copy); /* the pattern, elements, names and source */
}

uint32_t sy__pattern_max_groups(const sy__pattern *p) {
    return p->max_groups;
}
uint32_t sy__pattern_var_count(const sy__pattern *p) {
    return p->nvars;
}

/* ------------------------------------------------------------------ */
/* Matching path patterns                                               */
/* ------------------------------------------------------------------ */

static bool join_rest(const sy__segments *segs, size_t b, size_t e,
                      sy__arena *scratch, sy_str *out) {
    if (b == e) {
        *out = (sy_str){"", 0};
        return true;
    }
    size_t total = 0;
    for (size_t i = b; i < e; i++)
        total += segs->dec[i].len + 1;
    if (segs->flat.ptr) {
        /* plain segments of one rooted path, "/" + dec[0] + "/" + ...:
         * the joined rest is that path's own text from the '/' before
         * segment b, no copy */
        size_t pos = 0;
        for (size_t i = 0; i < b; i++)
            pos += segs->dec[i].len + 1;
        *out = (sy_str){segs->flat.ptr + pos, total};
        return true;
    }
    char *buf = scratch ? sy__arena_alloc(scratch, total) : NULL;
    if (!buf)
        return false;
    size_t o = 0;
    for (size_t i = b; i < e; i++) {
        buf[o++] = '/';
        if (segs->dec[i].len)
            memcpy(buf + o, segs->dec[i].ptr, segs->dec[i].len);
        o += segs->dec[i].len;
    }
    *out = (sy_str){buf, total};
    return true;
}

/* An empty segment that is only a separator (no matrix parameters). */
static bool bare_empty(const sy__segments *segs, size_t i) {
    return segs->dec[i].len == 0 && (!segs->raw || segs->raw[i].len == 0);
}

/* Match against the first `count` segments. */
static bool match_core(const sy__pattern *p, const sy__segments *segs,
                       size_t count, sy__capture *caps, size_t *ncaps,
                       pcre2_match_data *md, sy__arena *scratch) {
    size_t n = p->n, nc = *ncaps;
    if (p->multi == PE_NONE) {
        /* Spring: a last regex element without variables that matches ""
         * also takes a separator that ends the path (pattern "/" + "****"
         * matches "//"): one more, empty, segment. */
        if (count == n + 1 && n > 0 && p->elems[n - 1].kind == PE_REGEX &&
            !p->elems[n - 1].nvars && bare_empty(segs, n - 1) &&
            bare_empty(segs, n))
            count = n;
        if (count != n)
            return false;
        for (size_t i = 0; i < n; i++)
            if (!sy__pat_elem_match(p, &p->elems[i], segs->dec[i], i + 1 == n,
                                    caps, &nc, md))
                return false;
        *ncaps = nc;
        return true;
    }
    size_t m = p->multi, tail = n - m - 1;
    if (count < n - 1)
        return false;
    for (size_t i = 0; i < m; i++)
        if (!sy__pat_elem_match(p, &p->elems[i], segs->dec[i], false, caps, &nc,
                                md))
            return false;
    const sy__pelem *mul = &p->elems[m];
    size_t slot = nc;
    if (caps && mul->nvars)
        nc++;
    size_t rest = count - tail;
    for (size_t t = 0; t < tail; t++)
        if (!sy__pat_elem_match(p, &p->elems[m + 1 + t], segs->dec[rest + t],
                                t + 1 == tail, caps, &nc, md))
            return false;
    if (caps && mul->nvars) {
        caps[slot].name = p->vars[mul->var];
        if (!join_rest(segs, m, rest, scratch, &caps[slot].value))
            return false;
    }
    *ncaps = nc;
    return true;
}

bool sy__pattern_match_path(const sy__pattern *p, const sy__segments *segs,
                            bool match_trailing_slash, sy__capture *caps,
                            size_t *ncaps, pcre2_match_data *md,
                            sy__arena *scratch) {
    size_t dummy = 0;
    if (!ncaps)
        ncaps = &dummy;
    if (!sy__pattern_can_match(p))
        return false;
    size_t c = segs->count;
    if (p->n == 0) /* "": the empty path, or "/" with the option */
        return c == 0 ||
               (match_trailing_slash && c == 1 && bare_empty(segs, 0));
    if (match_core(p, segs, c, caps, ncaps, md, scratch))
        return true;
    /* "/a" also matches "/a/": retry without the empty last segment. */
    if (match_trailing_slash && c >= 2 && bare_empty(segs, c - 1))
        return match_core(p, segs, c - 1, caps, ncaps, md, scratch);
    return false;
}

/* ------------------------------------------------------------------ */
/* Introspection                                                        */
/* ------------------------------------------------------------------ */

bool sy__pattern_can_match(const sy__pattern *p) {
    /* Spring: "foo" never matches "/foo"; "**" and "{*x}" stand for the
     * leading separator themselves */
    return p->host || p->rooted || p->n == 0 || p->elems[0].kind == PE_MULTI;
}

size_t sy__pattern_segment_count(const sy__pattern *p) {
    return p->n;
}

sy__seg_kind sy__pattern_segment_kind(const sy__pattern *p, size_t i) {
    const sy__pelem *el = &p->elems[i];
    /* the kind first (a literal, the most, is never SY_SEG_REST); see
     * SY_SEG_REST; a host's virtual labels lie outside [first, last) */
    switch (el->kind) {
    case PE_LITERAL: return SY_SEG_LITERAL;
    case PE_MULTI: return p->host && i >= p->last ? SY_SEG_REST : SY_SEG_MULTI;
    case PE_REGEX:
        return !p->host && i + 1 == p->n && p->multi == PE_NONE && !el->nvars
                   ? SY_SEG_REST
                   : SY_SEG_SINGLE;
    default: return SY_SEG_SINGLE;
    }
}

sy__seg_kind sy__pattern_segment(const sy__pattern *p, size_t i, sy_str *lit) {
    const sy__pelem *el = &p->elems[i];
    if (el->kind != PE_LITERAL)
        return sy__pattern_segment_kind(p, i);
    *lit = (sy_str){p->src + el->offset, el->len};
    return SY_SEG_LITERAL;
}

sy_str sy__pattern_literal(const sy__pattern *p, size_t i) {
    const sy__pelem *el = &p->elems[i];
    if (el->kind != PE_LITERAL)
        return (sy_str){"", 0};
    return (sy_str){p->src + el->offset, el->len};
}

sy_str sy__pattern_segment_var(const sy__pattern *p, size_t i) {
    if (p->elems[i].kind != PE_VAR)
        return (sy_str){NULL, 0};
    sy_str name = p->vars[p->elems[i].var];
    for (uint32_t k = 0; p->host && k < p->nvars; k++)
        if (k != p->elems[i].var && sy__str_eq(p->vars[k], name.ptr, name.len))
            return (sy_str){NULL, 0};
    return name;
}

bool sy__pattern_segment_is_star(const sy__pattern *p, size_t i) {
    return p->elems[i].kind == PE_STAR;
}

const char *sy__pattern_source(const sy__pattern *p) {
    return p->src;
}

bool sy__pattern_literal_form(const sy__pattern *p, bool host, size_t *segs,
                              size_t *len_out, bool *rest_out) {
    size_t n = p->n;
    const char *src = p->src;
    size_t len = strlen(src), pos = 0;
    if (n == 0 || n > UINT16_MAX || len > UINT32_MAX ||
        !sy__pattern_can_match(p))
        return false;
    /* a path's last "**" (no variable): any rest; its source ends so (a
     * path's last PE_MULTI is SY_SEG_MULTI: SY_SEG_REST is a regex's) */
    bool rest = !host && p->elems[n - 1].kind == PE_MULTI && p->nvars == 0 &&
                len >= 3 && memcmp(src + len - 3, "/**", 3) == 0;
    if (rest) {
        n--;
        len -= 3;
    }
    for (size_t i = 0; i < n; i++) {
        /* SY_SEG_LITERAL is exactly a PE_LITERAL (SY_SEG_REST never is) */
        const sy__pelem *el = &p->elems[i];
        if (el->kind != PE_LITERAL)
            return false;
        const char *lit = src + el->offset;
        /* a host: "a.b.c", labels never empty (an empty one would be the
         * virtual label of a leading or trailing '.') */
        size_t sep = host ? i > 0 : 1;
        if (host && !el->len)
            return false;
        if (len - pos < sep + el->len ||
            (sep && src[pos] != (host ? '.' : '/')) ||
            (el->len && lit != src + pos + sep &&
             memcmp(src + pos + sep, lit, el->len) != 0))
            return false;
        pos += sep + el->len;
    }
    if (pos != len)
        return false;
    *segs = n;
    *len_out = len;
    *rest_out = rest;
    return true;
}

bool sy__pattern_tail_form(const sy__pattern *p, bool host, const char **text,
                           size_t *len, size_t *var) {
    const char *src = p->src;
    size_t slen = strlen(src), pos = 0;
    *var = 0;
    if (host) { /* star_suffix: the literals are src[2..] (pattern_host.c) */
        if (!p->star_suffix || slen < 3 || slen - 2 > UINT16_MAX)
            return false;
        *text = src + 2;
        *len = slen - 2;
        return true;
    }
    size_t m = p->multi;
    if (m == PE_NONE || m + 1 != p->n || !p->rooted || slen > UINT16_MAX ||
        !sy__pattern_can_match(p))
        return false;
    for (size_t i = 0; i < m; i++) {
        const sy__pelem *el = &p->elems[i];
        if (el->kind != PE_LITERAL || !el->len || slen - pos < 1 + el->len ||
            src[pos] != '/' ||
            memcmp(src + pos + 1, src + el->offset, el->len) != 0)
            return false;
        pos += 1 + el->len;
    }
    const sy__pelem *mul = &p->elems[m];
    if (mul->nvars) { /* "/{*name}": the name into the source */
        const sy_str *v = &p->vars[mul->var];
        if (mul->nvars != 1 || !v->len || slen - pos < 4 ||
            memcmp(src + pos, "/{*", 3) != 0 || v->ptr != src + pos + 3 ||
            v->len + pos + 4 != slen || src[slen - 1] != '}')
            return false;
        *var = v->len;
    } else if (slen - pos != 3 || memcmp(src + pos, "/**", 3) != 0) {
        return false;
    }
    *text = src;
    *len = pos;
    return true;
}
