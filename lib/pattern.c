/*
 * pattern.c - owns Spring PathPatterns (route model 4.1), Ant host patterns
 * ('.' separator), request path/host splitting, and sy_regex (the
 * whole-value regex predicates use). A pattern is parsed into one element
 * per segment; only segments that need one get a PCRE2 regex:
 *
 *   pattern  /api  /{v}  /file*.txt    /{id:\d+}  /{*rest}
 *   element  LIT   VAR   REGEX (mixed) REGEX      MULTI
 *   test     cmp   !=""  file.*\.txt   \d+        0..n segments
 *
 * Regexes are compiled anchored at both ends (never at match time, which
 * would turn the JIT off), JIT-compiled, and matched with a match context
 * that caps backtracking. Matching only reads the pattern.
 */
#include "pattern.h"

#include <stdio.h>

#define SY_RE_MATCH_LIMIT 200000u
#define SY_RE_DEPTH_LIMIT 10000u
#define SY_NONE ((size_t)-1)

/* ------------------------------------------------------------------ */
/* PCRE2 plumbing                                                       */
/* ------------------------------------------------------------------ */

static void *re_malloc(size_t n, void *data) {
    return sy_malloc((const sy_alloc *)data, n);
}

static void re_free(void *p, void *data) {
    sy_free((const sy_alloc *)data, p);
}

/* Contexts for one compile: compile and general contexts are dropped at the
 * end; the match context is kept by the compiled object. */
typedef struct re_env {
    const sy_alloc *a;
    pcre2_general_context *g;
    pcre2_compile_context *c;
    pcre2_match_context *m;
} re_env;

/* Contexts are created on the first regex: most path and host patterns
 * have none and then cost no PCRE2 allocation at all. */
static bool re_env_init(re_env *env, const sy_alloc *a) {
    env->a = a;
    env->g = NULL;
    env->c = NULL;
    env->m = NULL;
    return true;
}

static bool re_env_ready(re_env *env) {
    if (env->c && env->m)
        return true;
    env->g = pcre2_general_context_create(re_malloc, re_free, (void *)env->a);
    env->c = env->g ? pcre2_compile_context_create(env->g) : NULL;
    env->m = env->g ? pcre2_match_context_create(env->g) : NULL;
    if (!env->c || !env->m)
        return false;
    pcre2_set_match_limit(env->m, SY_RE_MATCH_LIMIT);
    pcre2_set_depth_limit(env->m, SY_RE_DEPTH_LIMIT);
    return true;
}

/* Drop the compile-time contexts; the match context too unless kept. */
static void re_env_done(re_env *env, bool keep_match) {
    pcre2_compile_context_free(env->c);
    pcre2_general_context_free(env->g);
    env->c = NULL;
    env->g = NULL;
    if (!keep_match) {
        pcre2_match_context_free(env->m);
        env->m = NULL;
    }
}

static pcre2_code *re_compile(re_env *env, const char *src, size_t len, int *ec,
                              size_t *eo) {
    if (!re_env_ready(env)) {
        *ec = PCRE2_ERROR_HEAP_FAILED;
        *eo = 0;
        return NULL;
    }
    PCRE2_SIZE off = 0;
    pcre2_code *re =
        pcre2_compile((PCRE2_SPTR)src, len, PCRE2_ANCHORED | PCRE2_ENDANCHORED,
                      ec, &off, env->c);
    *eo = off;
    if (re)
        (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back */
    return re;
}

static uint32_t re_capture_count(const pcre2_code *re) {
    uint32_t n = 0;
    (void)pcre2_pattern_info(re, PCRE2_INFO_CAPTURECOUNT, &n);
    return n;
}

/* Fill err for a failed pcre2_compile at `off` (offset in the pattern). */
static int re_error(sy_error *err, int ec, size_t off) {
    if (ec == PCRE2_ERROR_HEAP_FAILED)
        return sy_error_set(err, SY_ENOMEM, "", "out of memory");
    PCRE2_UCHAR msg[200];
    if (pcre2_get_error_message(ec, msg, sizeof msg) < 0)
        snprintf((char *)msg, sizeof msg, "invalid regular expression");
    sy_error_set(err, SY_EREGEX, "", "%s", (const char *)msg);
    if (err)
        err->offset = off;
    return SY_EREGEX;
}

static int pat_error(sy_error *err, int code, size_t off, const char *msg) {
    sy_error_set(err, code, "", "%s", msg);
    if (err)
        err->offset = off;
    return code;
}

/* ------------------------------------------------------------------ */
/* sy_regex                                                             */
/* ------------------------------------------------------------------ */

struct sy_regex {
    _Atomic long refs;
    sy_alloc a; /* a copy: PCRE2 keeps a pointer to it */
    pcre2_code *code;
    pcre2_match_context *mctx;
    uint32_t groups;
};

int sy_regex_compile(const sy_alloc *a, const char *src, sy_regex **out,
                     sy_error *err) {
    *out = NULL;
    sy_regex *re = sy_calloc(a, 1, sizeof *re);
    re_env env = {0};
    if (re)
        re->a = *a;
    if (!re || !re_env_init(&env, &re->a)) {
        re_env_done(&env, false);
        sy_free(a, re);
        return sy_error_set(err, SY_ENOMEM, "", "out of memory");
    }
    int ec = 0;
    size_t eo = 0;
    re->code = re_compile(&env, src, strlen(src), &ec, &eo);
    if (!re->code) {
        re_env_done(&env, false);
        sy_free(a, re);
        return re_error(err, ec, eo);
    }
    re_env_done(&env, true);
    re->mctx = env.m;
    re->groups = re_capture_count(re->code) + 1;
    atomic_init(&re->refs, 1);
    *out = re;
    return SY_OK;
}

/* Drop one reference; the last frees the regex. */
void sy_regex_free(sy_regex *re) {
    if (!re ||
        atomic_fetch_sub_explicit(&re->refs, 1, memory_order_acq_rel) != 1)
        return;
    pcre2_code_free(re->code);
    pcre2_match_context_free(re->mctx);
    sy_alloc a = re->a;
    sy_free(&a, re);
}

typedef struct regex_entry {
    uint64_t hash;
    char *src;
    sy_regex *re;
} regex_entry;

struct sy_regex_cache {
    sy_alloc a;
    regex_entry *e;
    size_t cap, count; /* cap: power of two, or 0 */
};

sy_regex_cache *sy_regex_cache_new(const sy_alloc *a) {
    sy_regex_cache *c = sy_calloc(a, 1, sizeof *c);
    if (c)
        c->a = *a;
    return c;
}

void sy_regex_cache_free(sy_regex_cache *c) {
    if (!c)
        return;
    for (size_t i = 0; i < c->cap; i++)
        if (c->e[i].re) {
            sy_regex_free(c->e[i].re);
            sy_free(&c->a, c->e[i].src);
        }
    sy_free(&c->a, c->e);
    sy_alloc a = c->a;
    sy_free(&a, c);
}

static regex_entry *cache_slot(regex_entry *e, size_t cap, uint64_t h,
                               const char *src) {
    for (size_t i = h & (cap - 1);; i = (i + 1) & (cap - 1))
        if (!e[i].re || (e[i].hash == h && strcmp(e[i].src, src) == 0))
            return &e[i];
}

static bool cache_grow(sy_regex_cache *c) {
    size_t cap = c->cap ? c->cap * 2 : 16;
    regex_entry *e = sy_calloc(&c->a, cap, sizeof *e);
    if (!e)
        return false;
    for (size_t i = 0; i < c->cap; i++)
        if (c->e[i].re)
            *cache_slot(e, cap, c->e[i].hash, c->e[i].src) = c->e[i];
    sy_free(&c->a, c->e);
    c->e = e;
    c->cap = cap;
    return true;
}

int sy_regex_compile_cached(sy_regex_cache *c, const sy_alloc *a,
                            const char *src, sy_regex **out, sy_error *err) {
    if (!c)
        return sy_regex_compile(a, src, out, err);
    uint64_t h = sy_hash64(src, strlen(src), 0x7e);
    regex_entry *slot = c->cap ? cache_slot(c->e, c->cap, h, src) : NULL;
    if (slot && slot->re) {
        atomic_fetch_add_explicit(&slot->re->refs, 1, memory_order_relaxed);
        *out = slot->re;
        return SY_OK;
    }
    int rc = sy_regex_compile(a, src, out, err);
    if (rc)
        return rc;
    /* remember it when there is room; a full cache only costs speed */
    if ((c->count + 1) * 4 > c->cap * 3 && !cache_grow(c))
        return SY_OK;
    char *copy = sy_strdup(&c->a, src);
    if (!copy)
        return SY_OK;
    slot = cache_slot(c->e, c->cap, h, src);
    atomic_fetch_add_explicit(&(*out)->refs, 1, memory_order_relaxed);
    *slot = (regex_entry){h, copy, *out};
    c->count++;
    return SY_OK;
}

uint32_t sy_regex_groups(const sy_regex *re) {
    return re ? re->groups : 1;
}

bool sy_regex_full_match(const sy_regex *re, const char *s, size_t n,
                         pcre2_match_data *md) {
    if (!re || !md)
        return false;
    if (!s)
        s = "";
    /* rc == 0: matched, the match data just has no room for groups */
    return pcre2_match(re->code, (PCRE2_SPTR)s, n, 0, 0, md, re->mctx) >= 0;
}

/* ------------------------------------------------------------------ */
/* Splitting requests                                                   */
/* ------------------------------------------------------------------ */

static bool segs_reserve(sy_segments *s, size_t n, const sy_alloc *a) {
    if (n <= s->cap)
        return true;
    size_t cap = s->cap ? s->cap : 8;
    while (cap < n) {
        if (cap > SIZE_MAX / (2 * sizeof(sy_str)))
            return false;
        cap *= 2;
    }
    sy_str *d = sy_realloc(a, s->dec, cap * sizeof *d);
    if (!d)
        return false;
    s->dec = d;
    sy_str *r = sy_realloc(a, s->raw, cap * sizeof *r);
    if (!r)
        return false;
    s->raw = r;
    s->cap = cap;
    return true;
}

/* Matrix parameters dropped, then percent-decoded (into scratch only when
 * there is a '%'). Invalid escapes stay as they are. */
static bool decode_segment(sy_str raw, sy_arena *scratch, sy_str *out) {
    size_t n = raw.len;
    const char *semi = n ? memchr(raw.ptr, ';', n) : NULL;
    if (semi)
        n = (size_t)(semi - raw.ptr);
    if (n == 0 || !memchr(raw.ptr, '%', n)) {
        *out = (sy_str){n ? raw.ptr : "", n};
        return true;
    }
    char *buf = scratch ? sy_arena_alloc(scratch, n) : NULL;
    if (!buf)
        return false;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (raw.ptr[i] == '%' && i + 2 < n &&
            (hi = sy_hexval(raw.ptr[i + 1])) >= 0 &&
            (lo = sy_hexval(raw.ptr[i + 2])) >= 0) {
            buf[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            buf[o++] = raw.ptr[i];
        }
    }
    *out = (sy_str){buf, o};
    return true;
}

static bool push_segment(sy_segments *segs, size_t n, sy_str raw, bool special,
                         sy_arena *scratch, const sy_alloc *alloc) {
    if (n == segs->cap && !segs_reserve(segs, n + 1, alloc))
        return false;
    segs->raw[n] = raw;
    if (special)
        return decode_segment(raw, scratch, &segs->dec[n]);
    segs->dec[n] = raw;
    return true;
}

/* Split a path after its leading '/'. A segment is decoded only when it
 * holds a '%' or a ';'; when the whole path has neither (the common case)
 * segments are plain slices found with memchr. */
static bool split_path(sy_segments *segs, sy_str s, sy_arena *scratch,
                       const sy_alloc *alloc) {
    segs->count = 0;
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

/* Split a host on '.', raw. */
static bool split_host(sy_segments *segs, sy_str s, const sy_alloc *alloc) {
    segs->count = 0;
    if (s.len == 0)
        return true;
    const char *p = s.ptr, *end = s.ptr + s.len;
    size_t n = 0;
    for (;;) {
        const char *q = memchr(p, '.', (size_t)(end - p));
        if (!q)
            q = end;
        if (!push_segment(segs, n++, (sy_str){p, (size_t)(q - p)}, false, NULL,
                          alloc))
            return false;
        if (q == end)
            break;
        p = q + 1;
    }
    segs->count = n;
    return true;
}

bool sy_segments_split(sy_segments *segs, sy_str path, sy_arena *scratch,
                       const sy_alloc *alloc) {
    return split_path(segs, path, scratch, alloc);
}

bool sy_segments_split_host(sy_segments *segs, sy_str host,
                            const sy_alloc *alloc) {
    return split_host(segs, host, alloc);
}

void sy_segments_free(sy_segments *segs, const sy_alloc *alloc) {
    sy_free(alloc, segs->dec);
    sy_free(alloc, segs->raw);
    segs->dec = segs->raw = NULL;
    segs->count = segs->cap = 0;
}

/* ------------------------------------------------------------------ */
/* Patterns                                                             */
/* ------------------------------------------------------------------ */

typedef enum pe_kind {
    PE_LITERAL, /* memcmp */
    PE_STAR,    /* "*": any non-empty segment, or the empty last one */
    PE_VAR,     /* "{name}": any non-empty segment, captured */
    PE_REGEX,   /* anything else within one segment: one anchored regex */
    PE_MULTI    /* "**" or "{*name}" */
} pe_kind;

typedef struct sy_pelem {
    pe_kind kind;
    bool whole;     /* PE_REGEX from "{name:regex}" alone: capture = segment */
    uint32_t var;   /* index of the element's first variable in vars[] */
    uint32_t nvars; /* PE_REGEX (mixed): variable i is group i + 1 */
    sy_str lit;     /* PE_LITERAL text, into src */
    size_t offset;  /* of the segment in src */
    pcre2_code *re;
} sy_pelem;

struct sy_pattern {
    sy_alloc a; /* a copy: PCRE2 keeps a pointer to it */
    char *src;
    bool host;
    size_t n;
    sy_pelem *elems;
    size_t multi; /* index of the PE_MULTI element, or SY_NONE */
    uint32_t nvars;
    sy_str *vars; /* names, into src */
    uint32_t max_groups;
    pcre2_match_context *mctx;
};

typedef enum tok_kind { T_LIT, T_Q, T_STAR, T_VAR, T_RVAR } tok_kind;
typedef struct tok {
    tok_kind kind;
    size_t off, len;   /* T_LIT: the text */
    size_t roff, rlen; /* T_RVAR: the regex */
} tok;

/* Index of the '}' closing the '{' at i (nesting counted, backslash
 * escapes skipped), or SY_NONE. */
static size_t find_close(const char *s, size_t end, size_t i) {
    unsigned depth = 0;
    for (; i < end; i++) {
        if (s[i] == '\\' && i + 1 < end)
            i++;
        else if (s[i] == '{')
            depth++;
        else if (s[i] == '}' && --depth == 0)
            return i;
    }
    return SY_NONE;
}

static int add_var(sy_pattern *p, sy_str name, size_t off, sy_error *err) {
    for (uint32_t i = 0; i < p->nvars; i++) {
        if (sy_str_eq(p->vars[i], name.ptr, name.len)) {
            char msg[160];
            snprintf(msg, sizeof msg, "duplicate variable name '%.*s'",
                     (int)(name.len > 100 ? 100 : name.len), name.ptr);
            return pat_error(err, SY_EPATTERN, off, msg);
        }
    }
    p->vars[p->nvars++] = name;
    return SY_OK;
}

static void put_literal(sy_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
            (c >= 'A' && c <= 'Z')) {
            sy_buf_putc(b, (char)c);
        } else {
            char e[6] = {'\\', 'x', '{', hex[c >> 4], hex[c & 15], '}'};
            sy_buf_append(b, e, sizeof e);
        }
    }
}

static void note_groups(sy_pattern *p, const pcre2_code *re) {
    uint32_t g = re_capture_count(re) + 1;
    if (g > p->max_groups)
        p->max_groups = g;
}

/* A segment that is neither literal, "*", "{x}" nor "{x:re}": one regex
 * with literal parts quoted and one group per variable. */
static int compile_mixed(sy_pattern *p, re_env *env, sy_pelem *el, const tok *t,
                         size_t nt, sy_error *err) {
    const char *s = p->src;
    int ec = 0;
    size_t eo = 0;
    for (size_t i = 0; i < nt; i++) {
        if (t[i].kind != T_RVAR)
            continue;
        pcre2_code *re = re_compile(env, s + t[i].roff, t[i].rlen, &ec, &eo);
        if (!re)
            return re_error(err, ec, t[i].roff + eo);
        uint32_t groups = re_capture_count(re);
        pcre2_code_free(re);
        if (groups)
            return pat_error(err, SY_EPATTERN, t[i].roff,
                             "capturing groups are not allowed in a regex "
                             "inside a mixed segment; use (?:...)");
    }
    sy_buf b;
    sy_buf_init(&b, &p->a);
    for (size_t i = 0; i < nt; i++) {
        switch (t[i].kind) {
        case T_LIT: put_literal(&b, s + t[i].off, t[i].len); break;
        case T_Q: /* one UTF-8 character (or one stray byte) */
            sy_buf_puts(&b, "(?:[^\\x80-\\xbf][\\x80-\\xbf]*|[\\x80-\\xbf])");
            break;
        case T_STAR: sy_buf_puts(&b, "(?s:.*)"); break;
        case T_VAR: sy_buf_puts(&b, "((?s:.*))"); break;
        case T_RVAR:
            sy_buf_putc(&b, '(');
            sy_buf_append(&b, s + t[i].roff, t[i].rlen);
            sy_buf_putc(&b, ')');
            break;
        }
    }
    if (b.failed) {
        sy_buf_free(&b);
        return sy_error_set(err, SY_ENOMEM, "", "out of memory");
    }
    el->re = re_compile(env, b.ptr, b.len, &ec, &eo);
    sy_buf_free(&b);
    if (!el->re)
        return re_error(err, ec, el->offset);
    if (re_capture_count(el->re) != el->nvars)
        return pat_error(err, SY_EPATTERN, el->offset,
                         "a regex changes the groups of its segment");
    note_groups(p, el->re);
    return SY_OK;
}

static int add_multi(sy_pattern *p, size_t off, const sy_str *name,
                     sy_error *err) {
    sy_pelem *el = &p->elems[p->n];
    el->kind = PE_MULTI;
    el->offset = off;
    el->var = p->nvars;
    if (name) {
        int rc = add_var(p, *name, off, err);
        if (rc)
            return rc;
        el->nvars = 1;
    }
    p->n++;
    return SY_OK;
}

/* Parse and compile one segment src[s0, e). */
static int segment(sy_pattern *p, re_env *env, tok *t, size_t s0, size_t e,
                   sy_error *err) {
    const char *s = p->src;
    if (e - s0 == 2 && s[s0] == '*' && s[s0 + 1] == '*')
        return add_multi(p, s0, NULL, err);
    sy_pelem *el = &p->elems[p->n];
    el->offset = s0;
    el->var = p->nvars;
    size_t nt = 0;
    for (size_t j = s0; j < e;) {
        char c = s[j];
        if (c == '{') {
            size_t k = find_close(s, e, j); /* balanced: checked by caller */
            size_t nb = j + 1, ne = nb;
            while (ne < k && s[ne] != ':')
                ne++;
            if (nb < k && s[nb] == '*') {
                if (p->host)
                    return pat_error(err, SY_EPATTERN, j,
                                     "{*name} is not allowed in a host "
                                     "pattern");
                if (j != s0 || k != e - 1)
                    return pat_error(err, SY_EPATTERN, j,
                                     "{*name} must be a whole segment");
                if (ne != k)
                    return pat_error(err, SY_EPATTERN, j,
                                     "{*name} takes no regex");
                if (ne == nb + 1)
                    return pat_error(err, SY_EPATTERN, j,
                                     "empty variable name");
                sy_str name = {s + nb + 1, ne - nb - 1};
                return add_multi(p, j, &name, err);
            }
            if (ne == nb)
                return pat_error(err, SY_EPATTERN, j, "empty variable name");
            tok v = {T_VAR, j, k + 1 - j, 0, 0};
            if (ne < k) {
                v.kind = T_RVAR;
                v.roff = ne + 1;
                v.rlen = k - ne - 1;
                if (v.rlen == 0)
                    return pat_error(err, SY_EPATTERN, j,
                                     "empty regex in {name:regex}");
            }
            int rc = add_var(p, (sy_str){s + nb, ne - nb}, j, err);
            if (rc)
                return rc;
            t[nt++] = v;
            j = k + 1;
        } else if (c == '?' || c == '*') {
            t[nt++] = (tok){c == '?' ? T_Q : T_STAR, j, 1, 0, 0};
            j++;
        } else {
            size_t b = j;
            while (j < e && s[j] != '{' && s[j] != '?' && s[j] != '*')
                j++;
            t[nt++] = (tok){T_LIT, b, j - b, 0, 0};
        }
    }
    el->nvars = p->nvars - el->var;
    p->n++;
    if (nt == 0 || (nt == 1 && t[0].kind == T_LIT)) {
        el->kind = PE_LITERAL;
        el->lit = (sy_str){s + s0, e - s0};
        return SY_OK;
    }
    if (nt == 1 && t[0].kind == T_STAR) {
        el->kind = PE_STAR;
        return SY_OK;
    }
    if (nt == 1 && t[0].kind == T_VAR) {
        el->kind = PE_VAR;
        return SY_OK;
    }
    el->kind = PE_REGEX;
    if (nt == 1 && t[0].kind == T_RVAR) {
        int ec = 0;
        size_t eo = 0;
        el->whole = true;
        el->re = re_compile(env, s + t[0].roff, t[0].rlen, &ec, &eo);
        if (!el->re)
            return re_error(err, ec, t[0].roff + eo);
        note_groups(p, el->re);
        return SY_OK;
    }
    return compile_mixed(p, env, el, t, nt, err);
}

static int parse(sy_pattern *p, re_env *env, tok *t, sy_error *err) {
    const char *s = p->src;
    size_t len = strlen(s);
    char sep = p->host ? '.' : '/';
    if (len == 0)
        return SY_OK;
    size_t i = (!p->host && s[0] == '/') ? 1 : 0;
    for (;;) {
        size_t start = i;
        while (i < len && s[i] != sep) {
            if (s[i] == '{') {
                size_t k = find_close(s, len, i);
                if (k == SY_NONE)
                    return pat_error(err, SY_EPATTERN, i, "unclosed '{'");
                i = k + 1;
            } else if (s[i] == '}') {
                return pat_error(err, SY_EPATTERN, i,
                                 "'}' without a matching '{'");
            } else {
                i++;
            }
        }
        int rc = segment(p, env, t, start, i, err);
        if (rc)
            return rc;
        if (i >= len)
            break;
        i++;
    }
    for (size_t k = 0; k < p->n; k++) {
        if (p->elems[k].kind != PE_MULTI)
            continue;
        if (p->multi != SY_NONE)
            return pat_error(err, SY_EPATTERN, p->elems[k].offset,
                             "at most one ** or {*name} per pattern");
        if (!p->host && k != 0 && k != p->n - 1)
            return pat_error(err, SY_EPATTERN, p->elems[k].offset,
                             "** and {*name} may only stand first or last");
        p->multi = k;
    }
    return SY_OK;
}

static int compile(const sy_alloc *a, const char *src, bool host,
                   sy_pattern **out, sy_error *err) {
    *out = NULL;
    if (!src)
        return sy_error_set(err, SY_EINVAL, "", "no pattern");
    size_t len = strlen(src), nseg = 1, nbrace = 1;
    for (size_t i = 0; i < len; i++) {
        nseg += src[i] == (host ? '.' : '/');
        nbrace += src[i] == '{';
    }
    /* one block: the pattern, its elements, variable names and source,
     * so matching touches adjacent memory */
    if (nseg > SIZE_MAX / 4 / sizeof(sy_pelem) ||
        nbrace > SIZE_MAX / 4 / sizeof(sy_str))
        return sy_error_set(err, SY_ENOMEM, "", "out of memory");
    size_t size = sizeof(sy_pattern) + nseg * sizeof(sy_pelem) +
                  nbrace * sizeof(sy_str) + len + 1;
    sy_pattern *p = sy_calloc(a, 1, size);
    if (!p)
        return sy_error_set(err, SY_ENOMEM, "", "out of memory");
    p->a = *a;
    a = &p->a;
    p->host = host;
    p->multi = SY_NONE;
    p->max_groups = 1;
    p->elems = (sy_pelem *)(void *)(p + 1);
    p->vars = (sy_str *)(void *)(p->elems + nseg);
    p->src = (char *)(p->vars + nbrace);
    memcpy(p->src, src, len);
    tok *t = sy_calloc(a, len + 1, sizeof *t);
    re_env env = {0};
    int rc;
    if (!t || !re_env_init(&env, a))
        rc = sy_error_set(err, SY_ENOMEM, "", "out of memory");
    else
        rc = parse(p, &env, t, err);
    sy_free(a, t);
    re_env_done(&env, rc == SY_OK);
    if (rc) {
        sy_pattern_free(p);
        return rc;
    }
    p->mctx = env.m;
    *out = p;
    return SY_OK;
}

int sy_pattern_compile_path(const sy_alloc *a, const char *src,
                            sy_pattern **out, sy_error *err) {
    return compile(a, src, false, out, err);
}

int sy_pattern_compile_host(const sy_alloc *a, const char *src,
                            sy_pattern **out, sy_error *err) {
    return compile(a, src, true, out, err);
}

void sy_pattern_free(sy_pattern *p) {
    if (!p)
        return;
    if (p->elems)
        for (size_t i = 0; i < p->n; i++)
            pcre2_code_free(p->elems[i].re);
    pcre2_match_context_free(p->mctx);
    sy_alloc a = p->a;
    sy_free(&a, p); /* elements, names and source live in the same block */
}

uint32_t sy_pattern_max_groups(const sy_pattern *p) {
    return p->max_groups;
}
uint32_t sy_pattern_var_count(const sy_pattern *p) {
    return p->nvars;
}

/* ------------------------------------------------------------------ */
/* Matching                                                             */
/* ------------------------------------------------------------------ */

static void put_cap(sy_capture *caps, size_t *nc, sy_str name, sy_str v) {
    if (caps) {
        caps[*nc].name = name;
        caps[*nc].value = v;
        (*nc)++;
    }
}

static bool elem_match(const sy_pattern *p, const sy_pelem *el, sy_str seg,
                       bool last, sy_capture *caps, size_t *nc,
                       pcre2_match_data *md) {
    switch (el->kind) {
    case PE_LITERAL:
        return seg.len == el->lit.len &&
               (seg.len == 0 || memcmp(seg.ptr, el->lit.ptr, seg.len) == 0);
    case PE_STAR: return seg.len > 0 || last;
    case PE_VAR:
        if (seg.len == 0)
            return false;
        put_cap(caps, nc, p->vars[el->var], seg);
        return true;
    case PE_REGEX: break;
    case PE_MULTI: return false;
    }
    if (seg.len == 0 || !md)
        return false;
    int rc =
        pcre2_match(el->re, (PCRE2_SPTR)seg.ptr, seg.len, 0, 0, md, p->mctx);
    if (rc < 0)
        return false;
    if (el->whole) {
        put_cap(caps, nc, p->vars[el->var], seg);
        return true;
    }
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    uint32_t oc = pcre2_get_ovector_count(md);
    for (uint32_t v = 0; v < el->nvars; v++) {
        uint32_t g = v + 1;
        sy_str val = {"", 0};
        if (g < oc && ov[2 * g] != PCRE2_UNSET)
            val = (sy_str){seg.ptr + ov[2 * g], ov[2 * g + 1] - ov[2 * g]};
        put_cap(caps, nc, p->vars[el->var + v], val);
    }
    return true;
}

/* "{*x}": "/" + each segment of [b, e), or "" for none. */
static bool join_rest(const sy_segments *segs, size_t b, size_t e,
                      sy_arena *scratch, sy_str *out) {
    if (b == e) {
        *out = (sy_str){"", 0};
        return true;
    }
    size_t total = 0;
    for (size_t i = b; i < e; i++)
        total += segs->dec[i].len + 1;
    char *buf = scratch ? sy_arena_alloc(scratch, total) : NULL;
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

/* Match against the first `count` segments. */
static bool match_core(const sy_pattern *p, const sy_segments *segs,
                       size_t count, sy_capture *caps, size_t *ncaps,
                       pcre2_match_data *md, sy_arena *scratch) {
    size_t n = p->n, nc = *ncaps;
    if (p->multi == SY_NONE) {
        if (count != n)
            return false;
        for (size_t i = 0; i < n; i++)
            if (!elem_match(p, &p->elems[i], segs->dec[i], i + 1 == n, caps,
                            &nc, md))
                return false;
        *ncaps = nc;
        return true;
    }
    size_t m = p->multi, tail = n - m - 1;
    if (count < n - 1)
        return false;
    for (size_t i = 0; i < m; i++)
        if (!elem_match(p, &p->elems[i], segs->dec[i], false, caps, &nc, md))
            return false;
    const sy_pelem *mul = &p->elems[m];
    size_t slot = nc;
    if (caps && mul->nvars)
        nc++;
    size_t rest = count - tail;
    for (size_t t = 0; t < tail; t++)
        if (!elem_match(p, &p->elems[m + 1 + t], segs->dec[rest + t],
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

bool sy_pattern_match_path(const sy_pattern *p, const sy_segments *segs,
                           bool match_trailing_slash, sy_capture *caps,
                           size_t *ncaps, pcre2_match_data *md,
                           sy_arena *scratch) {
    size_t dummy = 0;
    if (!ncaps)
        ncaps = &dummy;
    if (match_core(p, segs, segs->count, caps, ncaps, md, scratch))
        return true;
    size_t c = segs->count;
    /* "/a" also matches "/a/": retry without the empty last segment. */
    if (match_trailing_slash && c >= 2 && segs->dec[c - 1].len == 0 &&
        (!segs->raw || segs->raw[c - 1].len == 0))
        return match_core(p, segs, c - 1, caps, ncaps, md, scratch);
    return false;
}

bool sy_pattern_match_host(const sy_pattern *p, const sy_segments *labels,
                           sy_capture *caps, size_t *ncaps,
                           pcre2_match_data *md) {
    size_t dummy = 0;
    if (!ncaps)
        ncaps = &dummy;
    return match_core(p, labels, labels->count, caps, ncaps, md, NULL);
}

/* ------------------------------------------------------------------ */
/* Introspection                                                        */
/* ------------------------------------------------------------------ */

size_t sy_pattern_segment_count(const sy_pattern *p) {
    return p->n;
}

sy_seg_kind sy_pattern_segment_kind(const sy_pattern *p, size_t i) {
    switch (p->elems[i].kind) {
    case PE_LITERAL: return SY_SEG_LITERAL;
    case PE_MULTI: return SY_SEG_MULTI;
    default: return SY_SEG_SINGLE;
    }
}

sy_str sy_pattern_literal(const sy_pattern *p, size_t i) {
    if (p->elems[i].kind != PE_LITERAL)
        return (sy_str){"", 0};
    return p->elems[i].lit;
}

sy_str sy_pattern_segment_var(const sy_pattern *p, size_t i) {
    if (p->elems[i].kind != PE_VAR)
        return (sy_str){NULL, 0};
    return p->vars[p->elems[i].var];
}

bool sy_pattern_segment_is_star(const sy_pattern *p, size_t i) {
    return p->elems[i].kind == PE_STAR;
}

const char *sy_pattern_source(const sy_pattern *p) {
    return p->src;
}
