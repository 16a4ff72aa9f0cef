/*
 * regex.c - owns the PCRE2 environment: the allocator shim that puts all of
 * PCRE2's memory on the sy__alloc hooks, compile/match contexts with a
 * backtracking budget, compile errors as sy__errors, and sy__regex (the
 * whole-value regex of Header, Query and Cookie predicates) with the
 * per-document cache that shares one compiled regex among many routes.
 */
#include "base/regex.h"

#include "base/budget.h"

#include <stdio.h>

/* ------------------------------------------------------------------ */
/* The allocator shim                                                   */
/* ------------------------------------------------------------------ */

static void *re_malloc(size_t n, void *data) {
    return sy__malloc((const sy__alloc *)data, n);
}

static void re_free(void *p, void *data) {
    sy__free((const sy__alloc *)data, p);
}

pcre2_general_context *sy__re_general_context_new(const sy__alloc *a) {
    return pcre2_general_context_create(re_malloc, re_free, (void *)a);
}

/* ------------------------------------------------------------------ */
/* Compile environment                                                  */
/* ------------------------------------------------------------------ */

void sy__re_env_init(sy__re_env *env, const sy__alloc *a, uint32_t match_limit,
                     uint32_t depth_limit) {
    *env = (sy__re_env){a, match_limit, depth_limit, NULL, NULL, NULL};
}

static bool env_ready(sy__re_env *env) {
    if (env->c && env->m)
        return true;
    if (!env->g)
        env->g = sy__re_general_context_new(env->a);
    if (!env->g)
        return false;
    if (!env->c)
        env->c = pcre2_compile_context_create(env->g);
    if (!env->m) {
        env->m = pcre2_match_context_create(env->g);
        if (env->m && env->match_limit)
            pcre2_set_match_limit(env->m, env->match_limit);
        if (env->m && env->depth_limit)
            pcre2_set_depth_limit(env->m, env->depth_limit);
    }
    return env->c && env->m;
}

void sy__re_env_done(sy__re_env *env, bool keep_match) {
    pcre2_compile_context_free(env->c);
    env->c = NULL;
    if (!keep_match) {
        pcre2_match_context_free(env->m);
        env->m = NULL;
    }
    /* contexts copy the memory functions: the general one can go now */
    pcre2_general_context_free(env->g);
    env->g = NULL;
}

pcre2_code *sy__re_env_compile(sy__re_env *env, const char *src, size_t len,
                               uint32_t flags, int *ec, size_t *eo) {
    if (!env_ready(env)) {
        *ec = PCRE2_ERROR_HEAP_FAILED;
        *eo = 0;
        return NULL;
    }
    PCRE2_SIZE off = 0;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(src ? src : ""), len, flags, ec,
                                   &off, env->c);
    *eo = off;
    if (re)
        (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back */
    return re;
}

uint32_t sy__re_capture_count(const pcre2_code *re) {
    uint32_t n = 0;
    (void)pcre2_pattern_info(re, PCRE2_INFO_CAPTURECOUNT, &n);
    return n;
}

int sy__re_error(sy_error *err, const char *path, int ec, size_t off) {
    if (ec == PCRE2_ERROR_HEAP_FAILED || ec == PCRE2_ERROR_NOMEMORY)
        return sy__error_set(err, SY_ENOMEM, path ? path : "", "out of memory");
    PCRE2_UCHAR msg[200];
    if (pcre2_get_error_message(ec, msg, sizeof msg) < 0)
        snprintf((char *)msg, sizeof msg, "invalid regular expression");
    sy__error_set(err, SY_EREGEX, path ? path : "", "%s", (const char *)msg);
    if (err)
        err->offset = off;
    return SY_EREGEX;
}

/* ------------------------------------------------------------------ */
/* sy__regex                                                             */
/* ------------------------------------------------------------------ */

/*
 * A whole-value regex simple enough to answer without PCRE2, exactly as
 * PCRE2 would (bytes, no flags): a row of atoms, each one byte of a set
 * (a literal, an escaped punctuation byte, \d, or a class of alphanumeric
 * bytes and ranges), all matched once except the last, which may carry
 * one quantifier (+ * ?). One way to split a subject at most, so no
 * backtracking: "t\d+", "v[12]", "application/json".
 */
#define SIMPLE_ATOMS_MAX 32
/* Subjects up to this long are answered without PCRE2: PCRE2 needs far
 * fewer than SY_BUDGET_FIRST_LIMIT match-limit units for them, so the
 * charge is the first step's (sy__budget_charge_first_step); longer ones
 * go to PCRE2 under its limits. */
#define SIMPLE_SUBJECT_MAX 64

typedef struct simple_re {
    uint8_t n;                         /* atoms */
    uint8_t last_min, last_max;        /* the last atom's count; max 0xff:
                                          any */
    uint8_t set[SIMPLE_ATOMS_MAX][32]; /* each atom's bytes, a bit each */
} simple_re;

struct sy__regex {
    _Atomic long refs;
    sy__alloc a; /* a copy: PCRE2 keeps a pointer to it */
    pcre2_code *code;
    pcre2_match_context *mctx;
    simple_re *simple; /* NULL: PCRE2 answers */
    uint32_t groups;
};

static bool is_alnum(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z');
}

static void set_range(uint8_t *set, unsigned lo, unsigned hi) {
    for (unsigned c = lo; c <= hi; c++)
        set[c >> 3] |= (uint8_t)(1u << (c & 7));
}

/* "[...]" at src[*i]: alphanumeric bytes and ranges between them only. */
static bool simple_class(const char *src, size_t len, size_t *i, uint8_t *set) {
    size_t k = *i + 1;
    if (k >= len || src[k] == ']')
        return false; /* "[]..." means ']' is a member in PCRE2 */
    while (k < len && src[k] != ']') {
        char lo = src[k];
        if (!is_alnum(lo))
            return false;
        if (k + 2 < len && src[k + 1] == '-' && src[k + 2] != ']') {
            char hi = src[k + 2];
            if (!is_alnum(hi) || (unsigned char)hi < (unsigned char)lo)
                return false;
            set_range(set, (unsigned char)lo, (unsigned char)hi);
            k += 3;
        } else {
            set_range(set, (unsigned char)lo, (unsigned char)lo);
            k++;
        }
    }
    if (k >= len)
        return false;
    *i = k + 1;
    return true;
}

/* The simple form of src[0..len), or false when it has anything else. */
static bool simple_parse(const char *src, size_t len, simple_re *out) {
    memset(out, 0, sizeof *out);
    out->last_min = out->last_max = 1;
    for (size_t i = 0; i < len;) {
        if (out->n == SIMPLE_ATOMS_MAX)
            return false;
        uint8_t *set = out->set[out->n++];
        char c = src[i];
        if (c == '\\') {
            char d = i + 1 < len ? src[i + 1] : '\0';
            if (d == 'd')
                set_range(set, '0', '9');
            else if (d > ' ' && d < 0x7f && !is_alnum(d))
                set_range(set, (unsigned char)d, (unsigned char)d);
            else
                return false;
            i += 2;
        } else if (c == '[') {
            if (!simple_class(src, len, &i, set))
                return false;
        } else if (is_alnum(c) || (c && strchr("-_,:/=@%!~;'\"<>& ", c))) {
            set_range(set, (unsigned char)c, (unsigned char)c);
            i++;
        } else {
            return false;
        }
        if (i < len && (src[i] == '+' || src[i] == '*' || src[i] == '?')) {
            if (i + 1 != len)
                return false; /* a quantifier on the last atom only */
            out->last_min = src[i] == '+' ? 1 : 0;
            out->last_max = src[i] == '?' ? 1 : 0xff;
            i++;
        }
    }
    return true;
}

static bool in_set(const uint8_t *set, unsigned char c) {
    return (set[c >> 3] >> (c & 7)) & 1u;
}

/* What PCRE2 answers for a whole-value match of s[0..n). */
static bool simple_match(const simple_re *m, const unsigned char *s, size_t n) {
    if (m->n == 0)
        return n == 0;
    size_t fixed = m->n - 1u, rest = n - fixed;
    if (n < fixed + m->last_min || (m->last_max != 0xff && rest > m->last_max))
        return false;
    for (size_t i = 0; i < fixed; i++)
        if (!in_set(m->set[i], s[i]))
            return false;
    for (size_t i = fixed; i < n; i++)
        if (!in_set(m->set[fixed], s[i]))
            return false;
    return true;
}

int sy__regex_compile(const sy__alloc *a, const char *src, sy__regex **out,
                      sy_error *err) {
    *out = NULL;
    sy__regex *re = sy__calloc(a, 1, sizeof *re);
    if (!re)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    re->a = *a;
    sy__re_env env;
    sy__re_env_init(&env, &re->a, SY_RE_MATCH_LIMIT, SY_RE_DEPTH_LIMIT);
    int ec = 0;
    size_t eo = 0;
    re->code =
        sy__re_env_compile(&env, src, strlen(src), SY_RE_WHOLE, &ec, &eo);
    if (!re->code) {
        sy__re_env_done(&env, false);
        sy__free(a, re);
        return sy__re_error(err, "", ec, eo);
    }
    sy__re_env_done(&env, true);
    re->mctx = env.m;
    simple_re m;
    if (simple_parse(src, strlen(src), &m)) {
        /* without memory for it, PCRE2 answers */
        re->simple = sy__malloc(a, sizeof m);
        if (re->simple)
            *re->simple = m;
    }
    re->groups = sy__re_capture_count(re->code) + 1;
    atomic_init(&re->refs, 1);
    *out = re;
    return SY_OK;
}

/* Drop one reference; the last frees the regex. */
void sy__regex_free(sy__regex *re) {
    if (!re ||
        atomic_fetch_sub_explicit(&re->refs, 1, memory_order_acq_rel) != 1)
        return;
    pcre2_code_free(re->code);
    pcre2_match_context_free(re->mctx);
    sy__alloc a = re->a;
    sy__free(&a, re->simple);
    sy__free(&a, re);
}

uint32_t sy__regex_groups(const sy__regex *re) {
    return re ? re->groups : 1;
}

bool sy__regex_full_match(const sy__regex *re, const char *s, size_t n,
                          pcre2_match_data *md) {
    if (!re || !md)
        return false;
    if (!s)
        s = "";
    if (re->simple && n <= SIMPLE_SUBJECT_MAX &&
        sy__budget_charge_first_step(SY_RE_MATCH_LIMIT))
        return simple_match(re->simple, (const unsigned char *)s, n);
    /* rc == 0: matched, the match data just has no room for groups */
    /* under the request's budget (budget.h) */
    return sy__re_match(re->code, (PCRE2_SPTR)s, n, 0, 0, md, re->mctx,
                        SY_RE_MATCH_LIMIT) >= 0;
}

int sy__regex_full_match_on(const sy__regex *re, const char *s, size_t n,
                            struct sy__budget *b) {
    if (!re || !s || !re->simple || n > SIMPLE_SUBJECT_MAX ||
        !sy__budget_charge_first_step_on(b, SY_RE_MATCH_LIMIT))
        return -1;
    return simple_match(re->simple, (const unsigned char *)s, n);
}

/* ------------------------------------------------------------------ */
/* The per-document cache (open addressing on the source's hash)        */
/* ------------------------------------------------------------------ */

typedef struct regex_entry {
    uint64_t hash;
    char *src;
    sy__regex *re;
} regex_entry;

struct sy__regex_cache {
    sy__alloc a;
    regex_entry *e;
    size_t cap, count; /* cap: power of two, or 0 */
};

sy__regex_cache *sy__regex_cache_new(const sy__alloc *a) {
    sy__regex_cache *c = sy__calloc(a, 1, sizeof *c);
    if (c)
        c->a = *a;
    return c;
}

void sy__regex_cache_free(sy__regex_cache *c) {
    if (!c)
        return;
    for (size_t i = 0; i < c->cap; i++)
        if (c->e[i].re) {
            sy__regex_free(c->e[i].re);
            sy__free(&c->a, c->e[i].src);
        }
    sy__free(&c->a, c->e);
    sy__alloc a = c->a;
    sy__free(&a, c);
}

static regex_entry *cache_slot(regex_entry *e, size_t cap, uint64_t h,
                               const char *src) {
    for (size_t i = h & (cap - 1);; i = (i + 1) & (cap - 1))
        if (!e[i].re || (e[i].hash == h && strcmp(e[i].src, src) == 0))
            return &e[i];
}

static bool cache_grow(sy__regex_cache *c) {
    size_t cap = c->cap ? c->cap * 2 : 16;
    regex_entry *e = sy__calloc(&c->a, cap, sizeof *e);
    if (!e)
        return false;
    for (size_t i = 0; i < c->cap; i++)
        if (c->e[i].re)
            *cache_slot(e, cap, c->e[i].hash, c->e[i].src) = c->e[i];
    sy__free(&c->a, c->e);
    c->e = e;
    c->cap = cap;
    return true;
}

int sy__regex_compile_cached(sy__regex_cache *c, const sy__alloc *a,
                             const char *src, sy__regex **out, sy_error *err) {
    if (!c)
        return sy__regex_compile(a, src, out, err);
    uint64_t h = sy__hash64(src, strlen(src), 0x7e);
    regex_entry *slot = c->cap ? cache_slot(c->e, c->cap, h, src) : NULL;
    if (slot && slot->re) {
        atomic_fetch_add_explicit(&slot->re->refs, 1, memory_order_relaxed);
        *out = slot->re;
        return SY_OK;
    }
    int rc = sy__regex_compile(a, src, out, err);
    if (rc)
        return rc;
    /* remember it when there is room; a full cache only costs speed */
    if ((c->count + 1) * 4 > c->cap * 3 && !cache_grow(c))
        return SY_OK;
    char *copy = sy__strdup(&c->a, src);
    if (!copy)
        return SY_OK;
    slot = cache_slot(c->e, c->cap, h, src);
    atomic_fetch_add_explicit(&(*out)->refs, 1, memory_order_relaxed);
    *slot = (regex_entry){h, copy, *out};
    c->count++;
    return SY_OK;
}
