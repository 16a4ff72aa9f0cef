/*
 * predicate.c - owns the compiled predicates of route model section 4:
 * compiling each built-in kind (and host-registered ones) from its mapped
 * definition entry once; testing it per request is predicate_eval.c's. A
 * compiled predicate is immutable; testing reads the request and sy__eval only,
 * takes no lock and allocates nothing except, rarely, from the per-request
 * scratch arena (joined {*x} captures, long escaped header values or query
 * values).
 *
 * switchyard choices documented here:
 *   - Header: a quoted value "a, b" is one value; backslash escapes inside
 *     quotes are undone; empty values count as absent when no regexp.
 *   - Query: a pair without '=' (?x) is present with the empty value.
 *   - Cookie: "a=1; b=2"; a value in double quotes is unquoted; a cookie
 *     without '=' has the empty value.
 *   - XForwardedRemoteAddr (as SCG): the entries of the one
 *     X-Forwarded-For header line, comma separated, trimmed, empty ones
 *     skipped; maxTrustedIndex N picks the N-th from the right, or the
 *     left-most when N exceeds the entry count. No line, several lines or
 *     no entry: the socket address.
 *   - Addresses may carry a port ("1.2.3.4:80", "[::1]:80"); it is ignored.
 */
#include "route/predicate_int.h"

#include "base/budget.h"
#include "base/values.h"

#include <stdio.h>

/* ------------------------------------------------------------------ */
/* Errors                                                               */
/* ------------------------------------------------------------------ */

static void path_append(sy_error *err, size_t *o, const char *s) {
    size_t cap = sizeof err->path - 1;
    while (*s && *o < cap)
        err->path[(*o)++] = *s++;
    err->path[*o] = '\0';
}

/* "<path>.args.<field>" (field NULL: "<path>.args"), code, message, offset
 * inside the value. */
static int fail(sy_error *err, int code, const char *path, const char *field,
                size_t offset, const char *msg) {
    sy__error_set(err, code, "", "%s", msg);
    if (!err)
        return code;
    size_t o = 0;
    if (path && *path) {
        path_append(err, &o, path);
        path_append(err, &o, ".");
    }
    path_append(err, &o, "args");
    if (field) {
        path_append(err, &o, ".");
        path_append(err, &o, field);
    }
    err->offset = offset;
    return code;
}

static int fail_nomem(sy_error *err, const char *path) {
    return fail(err, SY_ENOMEM, path, NULL, 0, "out of memory");
}

/* Re-file an error of a pattern or regex compile under the field. */
static int refile(sy_error *err, int rc, const sy_error *local,
                  const char *path, const char *field, const char *value) {
    char msg[sizeof local->message];
    snprintf(msg, sizeof msg, "%s", local->message);
    int code = fail(err, rc, path, field, local->offset, msg);
    if (err && rc != SY_ENOMEM) {
        size_t n = strlen(err->message);
        snprintf(err->message + n, sizeof err->message - n, " in \"%.80s\"",
                 value);
    }
    return code;
}

/* ------------------------------------------------------------------ */
/* Compiling                                                            */
/* ------------------------------------------------------------------ */

_Static_assert(((sizeof(struct sy__pred) + 7) & ~(size_t)7) <=
                   SY_PRED_OBJECT_BYTES,
               "SY_PRED_OBJECT_BYTES is what a predicate takes");

/* Zeroed memory for the predicate object and its pattern list: from the
 * route's arena when there is one (the top of its first chunk first,
 * sy__compile_obj). */
static void *obj_calloc(const sy__compile_env *env, sy__arena_chunk *top,
                        size_t n, size_t size) {
    if (!env->arena)
        return sy__calloc(env->alloc, n, size);
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = sy__compile_obj(top, env->arena, n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

/* A string of the predicate (a header or group name): in a route (an
 * arena), the entry's own argument text, which lives as long as the
 * route, next to the predicate's object (no copy); else a copy. */
static char *obj_strdup(const sy__compile_env *env, const char *s) {
    return env->arena ? (char *)(uintptr_t)s : sy__strdup(env->alloc, s);
}

static size_t count_args(const sy__def_entry *e, const char *key) {
    size_t n = 0;
    for (size_t i = 0; i < e->arg_count; i++)
        n += sy__arg_key_is(e->args[i].key, key);
    return n;
}

static void note(sy__pred *p, uint32_t groups, uint32_t vars) {
    if (groups > p->max_groups)
        p->max_groups = groups;
    if (vars > p->var_count) /* <= SY_PATTERN_VARS_MAX: fits */
        p->var_count = (uint16_t)vars;
}

static int compile_patterns(sy__pred *p, const sy__def_entry *e,
                            const sy__compile_env *env, sy__arena_chunk *top,
                            const char *path, bool host, sy_error *err) {
    size_t n = count_args(e, "patterns");
    if (n == 0)
        return fail(err, SY_EMISSING, path, "patterns", 0,
                    "at least one pattern is required");
    p->many = n > 1;
    if (p->many && !(p->pats = obj_calloc(env, top, n, sizeof *p->pats)))
        return fail_nomem(err, path);
    for (size_t i = 0; i < e->arg_count; i++) {
        if (!sy__arg_key_is(e->args[i].key, "patterns"))
            continue;
        const char *v = e->args[i].value;
        /* what refile reads (sy_error is ~500 bytes: not cleared whole
         * per pattern) */
        sy_error local;
        local.code = 0;
        local.offset = 0;
        local.line = local.column = 0;
        local.path[0] = local.message[0] = '\0';
        sy__pattern *pat = NULL;
        /* in the route's arena when there is one: no block of its own;
         * a lone pattern without a glob character is a literal, whose
         * test reads its text, not the pattern (lit_src): at the bottom,
         * leaving the top's cluster to what a test reads (a glob pattern
         * next to the slots) */
        bool lone_literal = n == 1 && !strpbrk(v, "{}*?");
        int rc = env->arena ? sy__pattern_compile_at(env->alloc, env->arena,
                                                     lone_literal ? NULL : top,
                                                     v, host, &pat, &local)
                            : sy__pattern_compile_in(env->alloc, NULL, v, host,
                                                     &pat, &local);
        if (rc)
            return refile(err, rc, &local, path, "patterns", v);
        if (p->many)
            p->pats[p->npats++] = pat;
        else
            p->one = pat;
        note(p, sy__pattern_max_groups(pat), sy__pattern_var_count(pat));
    }
    p->trailing = true;
    if (!host) {
        const char *v = sy__def_arg_or_default(e, "matchTrailingSlash");
        const char *why = NULL;
        bool trailing = true;
        if (v && !sy__value_bool(v, &trailing, &why))
            return fail(err, SY_EARG, path, "matchTrailingSlash", 0,
                        why ? why : "expected true or false");
        p->trailing = trailing;
    }
    sy__pred_note_literal(p);
    return SY_OK;
}

static int compile_methods(sy__pred *p, const sy__def_entry *e,
                           const sy__compile_env *env, const char *path,
                           sy_error *err) {
    size_t n = count_args(e, "methods");
    if (n == 0)
        return fail(err, SY_EMISSING, path, "methods", 0,
                    "at least one method is required");
    for (size_t i = 0; i < e->arg_count; i++) {
        if (!sy__arg_key_is(e->args[i].key, "methods"))
            continue;
        const char *v = e->args[i].value, *why = NULL;
        /* upper-cased on the stack; kept (allocated) only when it is not
         * a standard method, the others array made for the first such */
        char small[16], *up = small;
        size_t len = strlen(v);
        if (len >= sizeof small && !(up = sy__malloc(env->alloc, len + 1)))
            return fail_nomem(err, path);
        if (!sy__value_method(v, up, &why)) {
            if (up != small)
                sy__free(env->alloc, up);
            return fail(err, SY_EARG, path, "methods", 0,
                        why ? why : "expected an HTTP method");
        }
        int bit = sy__method_bit((sy_str){up, strlen(up)});
        p->mask |= 1u << bit;
        if (bit != 31) {
            if (up != small)
                sy__free(env->alloc, up);
            continue;
        }
        if (!p->others &&
            !(p->others = sy__calloc(env->alloc, n, sizeof *p->others))) {
            if (up != small)
                sy__free(env->alloc, up);
            return fail_nomem(err, path);
        }
        if (up == small && !(up = sy__strdup(env->alloc, small)))
            return fail_nomem(err, path);
        p->others[p->nothers++] = up;
    }
    return SY_OK;
}

/* name field (copied) and optional regexp field ("" counts as absent). */
static int compile_name_regex(sy__pred *p, const sy__def_entry *e,
                              const sy__compile_env *env, const char *path,
                              const char *field, bool regex_required,
                              sy_error *err) {
    const char *name = sy__def_arg(e, field);
    if (!name || !*name)
        return fail(err, SY_EMISSING, path, field, 0, "a name is required");
    p->name = obj_strdup(env, name);
    if (!p->name)
        return fail_nomem(err, path);
    p->name_len = (uint32_t)strlen(name);
    const char *rx = sy__def_arg(e, "regexp");
    if (!rx || !*rx) {
        if (regex_required)
            return fail(err, SY_EMISSING, path, "regexp", 0,
                        "a regexp is required");
        return SY_OK;
    }
    sy_error local = {0};
    int rc = sy__regex_compile_cached(env->regex_cache, env->alloc, rx, &p->re,
                                      &local);
    if (rc)
        return refile(err, rc, &local, path, "regexp", rx);
    return SY_OK; /* (its groups: sy__pred_max_groups) */
}

static int compile_time(sy__pred *p, const sy__def_entry *e, sy__builtin id,
                        const char *path, sy_error *err) {
    static const char *const fields[] = {"datetime", "datetime1", "datetime2"};
    const char *lo = id == SY_P_AFTER     ? fields[0]
                     : id == SY_P_BETWEEN ? fields[1]
                                          : NULL;
    const char *hi = id == SY_P_BEFORE    ? fields[0]
                     : id == SY_P_BETWEEN ? fields[2]
                                          : NULL;
    const char *f[2] = {lo, hi};
    int64_t *dst[2] = {&p->lo, &p->hi};
    for (int i = 0; i < 2; i++) {
        if (!f[i])
            continue;
        const char *why = NULL;
        if (!sy__value_datetime_ms(sy__def_arg(e, f[i]), dst[i], &why))
            return fail(err, SY_EARG, path, f[i], 0,
                        why ? why : "expected a date-time");
    }
    p->has_lo = lo != NULL;
    p->has_hi = hi != NULL;
    if (p->has_lo && p->has_hi && !(p->lo < p->hi))
        return fail(err, SY_EARG, path, "datetime2", 0,
                    "datetime2 must be after datetime1");
    return SY_OK;
}

static int compile_cidrs(sy__pred *p, const sy__def_entry *e,
                         const sy__compile_env *env, const char *path, bool xff,
                         sy_error *err) {
    size_t n = count_args(e, "sources");
    if (n == 0)
        return fail(err, SY_EMISSING, path, "sources", 0,
                    "at least one source is required");
    p->cidrs = sy__calloc(env->alloc, n, sizeof *p->cidrs);
    if (!p->cidrs)
        return fail_nomem(err, path);
    for (size_t i = 0; i < e->arg_count; i++) {
        if (!sy__arg_key_is(e->args[i].key, "sources"))
            continue;
        const char *why = NULL;
        if (!sy__value_cidr(e->args[i].value, &p->cidrs[p->ncidrs], &why))
            return fail(err, SY_EARG, path, "sources", 0,
                        why ? why : "expected an address or CIDR");
        p->ncidrs++;
    }
    if (xff) {
        const char *v = sy__def_arg_or_default(e, "maxTrustedIndex"), *why;
        why = NULL;
        if (!v)
            v = "1";
        int64_t trusted = 0;
        if (!sy__value_int64(v, 1, INT32_MAX, &trusted, &why))
            return fail(err, SY_EARG, path, "maxTrustedIndex", 0,
                        "maxTrustedIndex must be a positive integer");
        p->trusted = (int32_t)trusted;
    }
    return SY_OK;
}

static int compile_weight(sy__pred *p, const sy__def_entry *e,
                          const sy__compile_env *env, const char *path,
                          sy_error *err) {
    const char *g = sy__def_arg(e, "weight.group");
    if (!g || !*g)
        return fail(err, SY_EMISSING, path, "weight.group", 0,
                    "a weight group is required");
    int64_t w = 0;
    const char *why = NULL;
    if (!sy__value_int64(sy__def_arg(e, "weight.weight"), 0, UINT32_MAX, &w,
                         &why))
        return fail(err, SY_EARG, path, "weight.weight", 0,
                    why ? why : "expected an integer >= 0");
    p->weight = (uint32_t)w;
    p->name = obj_strdup(env, g);
    if (!p->name)
        return fail_nomem(err, path);
    p->name_len = (uint32_t)strlen(g);
    return SY_OK;
}

static int compile_host_factory(sy__pred *p, const sy__def_entry *e,
                                const char *path, sy_error *err) {
    p->hf = sy__def_host(e);
    if (!p->hf)
        return fail(err, SY_EUNKNOWN, path, NULL, 0,
                    "no factory for this predicate");
    if (!p->hf->compile)
        return SY_OK;
    sy_error local = {0};
    int rc =
        p->hf->compile(p->hf->data, e->args, e->arg_count, &p->state, &local);
    if (rc == 0)
        return SY_OK;
    p->state = NULL; /* a failed compile owns nothing */
    char msg[sizeof local.message];
    snprintf(msg, sizeof msg, "%s",
             local.message[0] ? local.message : "host predicate rejected");
    return fail(err, rc < 0 ? rc : SY_ECALLBACK, path,
                local.path[0] ? local.path : NULL, local.offset, msg);
}

static int compile_in(sy__pred *p, const sy__def_entry *e,
                      const sy__compile_env *env, sy__arena_chunk *top,
                      const char *path, sy_error *err);

int sy__pred_compile(const sy__def_entry *e, const sy__compile_env *env,
                     const char *path, sy__pred **out, sy_error *err) {
    *out = NULL;
    sy__pred *p = obj_calloc(env, NULL, 1, sizeof *p);
    if (!p)
        return fail_nomem(err, path);
    p->in_arena = env->arena != NULL;
    int rc = compile_in(p, e, env, NULL, path, err);
    if (rc) {
        sy__pred_free(p, env->alloc);
        return rc;
    }
    *out = p;
    return SY_OK;
}

int sy__pred_compile_into(const sy__def_entry *e, const sy__compile_env *env,
                          sy__arena_chunk *top, const char *path, sy__pred *p,
                          sy_error *err) {
    memset(p, 0, sizeof *p);
    if (!env->arena) /* the slot's pieces live in the slot's arena */
        return fail(err, SY_EINVAL, path, NULL, 0, "no arena for the slot");
    p->in_arena = true; /* the slot is the caller's */
    int rc = compile_in(p, e, env, top, path, err);
    if (rc) {
        sy__pred_free(p, env->alloc);
        memset(p, 0, sizeof *p);
    }
    return rc;
}

/* Compile entry e into p (zeroed but for in_arena); on failure p holds
 * what sy__pred_free releases. */
static int compile_in(sy__pred *p, const sy__def_entry *e,
                      const sy__compile_env *env, sy__arena_chunk *top,
                      const char *path, sy_error *err) {
    p->max_groups = 1;
    int rc;
    sy__builtin id = sy__def_spec(e) ? sy__def_spec(e)->id : SY_HOST_FACTORY;
    if (sy__def_spec(e) && sy__def_spec(e)->kind != SY_FACTORY_PREDICATE)
        id = SY_BUILTIN_COUNT;
    switch (id) {
    case SY_P_PATH:
        p->kind = SY_PK_PATH;
        rc = compile_patterns(p, e, env, top, path, false, err);
        break;
    case SY_P_HOST:
        p->kind = SY_PK_HOST;
        rc = compile_patterns(p, e, env, top, path, true, err);
        break;
    case SY_P_METHOD:
        p->kind = SY_PK_METHOD;
        rc = compile_methods(p, e, env, path, err);
        break;
    case SY_P_HEADER:
        p->kind = SY_PK_HEADER;
        rc = compile_name_regex(p, e, env, path, "header", false, err);
        break;
    case SY_P_QUERY:
        p->kind = SY_PK_QUERY;
        rc = compile_name_regex(p, e, env, path, "param", false, err);
        break;
    case SY_P_COOKIE:
        p->kind = SY_PK_COOKIE;
        rc = compile_name_regex(p, e, env, path, "name", true, err);
        break;
    case SY_P_AFTER:
    case SY_P_BEFORE:
    case SY_P_BETWEEN:
        p->kind = SY_PK_TIME;
        rc = compile_time(p, e, id, path, err);
        break;
    case SY_P_REMOTE_ADDR:
        p->kind = SY_PK_REMOTE_ADDR;
        rc = compile_cidrs(p, e, env, path, false, err);
        break;
    case SY_P_XFORWARDED_REMOTE_ADDR:
        p->kind = SY_PK_XFF;
        rc = compile_cidrs(p, e, env, path, true, err);
        break;
    case SY_P_WEIGHT:
        p->kind = SY_PK_WEIGHT;
        rc = compile_weight(p, e, env, path, err);
        break;
    case SY_HOST_FACTORY:
        p->kind = SY_PK_HOST_FACTORY;
        rc = compile_host_factory(p, e, path, err);
        break;
    default:
        p->kind = SY_PK_METHOD; /* nothing to free */
        rc = fail(err, SY_EUNKNOWN, path, NULL, 0, "not a predicate");
        break;
    }
    return rc;
}

void sy__pred_free(sy__pred *p, const sy__alloc *a) {
    if (!p)
        return;
    switch (p->kind) {
    case SY_PK_PATH:
    case SY_PK_HOST:
        for (size_t i = 0; i < sy__pred_npats(p); i++)
            sy__pattern_free(sy__pred_pat(p, i));
        if (!p->in_arena && p->many)
            sy__free(a, p->pats);
        break;
    case SY_PK_METHOD:
        for (size_t i = 0; i < p->nothers; i++)
            sy__free(a, p->others[i]);
        sy__free(a, p->others);
        break;
    case SY_PK_HEADER:
    case SY_PK_QUERY:
    case SY_PK_COOKIE:
    case SY_PK_WEIGHT:
        if (!p->in_arena)
            sy__free(a, p->name);
        if (p->kind != SY_PK_WEIGHT)
            sy__regex_free(p->re);
        break;
    case SY_PK_REMOTE_ADDR:
    case SY_PK_XFF: sy__free(a, p->cidrs); break;
    case SY_PK_HOST_FACTORY:
        if (p->hf && p->state && p->hf->free)
            p->hf->free(p->hf->data, p->state);
        break;
    case SY_PK_TIME: break;
    }
    if (!p->in_arena)
        sy__free(a, p);
}

/* ------------------------------------------------------------------ */
/* Introspection                                                        */
/* ------------------------------------------------------------------ */

sy__pred_kind sy__pred_get_kind(const sy__pred *p) {
    return p->kind;
}
bool sy__pred_all_literal(const sy__pred *p) {
    if (p->kind != SY_PK_PATH && p->kind != SY_PK_HOST)
        return false;
    if (p->lit && !p->lit_rest) /* sy__pred_note_literal saw them all */
        return true;
    for (size_t k = 0; k < sy__pred_npats(p); k++) {
        const sy__pattern *pat = sy__pred_pat(p, k);
        for (size_t j = 0; j < sy__pattern_segment_count(pat); j++)
            if (sy__pattern_segment_kind(pat, j) != SY_SEG_LITERAL)
                return false;
    }
    return true;
}

bool sy__pred_path_lit(const sy__pred *p) {
    return p->kind == SY_PK_PATH && p->lit;
}

size_t sy__pred_pattern_count(const sy__pred *p) {
    return p->kind == SY_PK_PATH || p->kind == SY_PK_HOST ? sy__pred_npats(p)
                                                          : 0;
}
const sy__pattern *sy__pred_pattern(const sy__pred *p, size_t i) {
    return i < sy__pred_pattern_count(p) ? sy__pred_pat(p, i) : NULL;
}
uint32_t sy__pred_method_mask(const sy__pred *p) {
    return p->kind == SY_PK_METHOD ? p->mask : 0;
}
size_t sy__pred_method_other_count(const sy__pred *p) {
    return p->kind == SY_PK_METHOD ? p->nothers : 0;
}
const char *sy__pred_method_other(const sy__pred *p, size_t i) {
    return i < sy__pred_method_other_count(p) ? p->others[i] : NULL;
}
const char *sy__pred_weight_group(const sy__pred *p) {
    return p->kind == SY_PK_WEIGHT ? p->name : NULL;
}
uint32_t sy__pred_weight_value(const sy__pred *p) {
    return p->kind == SY_PK_WEIGHT ? p->weight : 0;
}
uint32_t sy__pred_max_groups(const sy__pred *p) {
    switch (p->kind) {
    case SY_PK_PATH:
    case SY_PK_HOST: return p->lit ? 1 : p->max_groups;
    case SY_PK_HEADER:
    case SY_PK_QUERY:
    case SY_PK_COOKIE: {
        uint32_t g = p->re ? sy__regex_groups(p->re) : 1;
        return g > 1 ? g : 1;
    }
    default: return 1;
    }
}
uint32_t sy__pred_var_count(const sy__pred *p) {
    return (p->kind == SY_PK_PATH || p->kind == SY_PK_HOST) && p->lit
               ? 0
               : p->var_count;
}

void sy__pred_note_literal(sy__pred *p) {
    p->lit = p->tail = false;
    bool host = p->kind == SY_PK_HOST;
    if ((p->kind != SY_PK_PATH && !host) || p->many)
        return;
    const sy__pattern *pat = sy__pred_pat(p, 0);
    size_t n, len, var;
    bool rest;
    const char *text;
    if (!sy__pattern_literal_form(pat, host, &n, &len, &rest)) {
        /* the tail's text within 2 GiB of this object (both the route's,
         * in its arena): else the quick tests read the pattern */
        intptr_t off;
        if (sy__pattern_tail_form(pat, host, &text, &len, &var) &&
            (off = (intptr_t)((uintptr_t)text - (uintptr_t)(void *)p)) >=
                INT32_MIN &&
            off <= INT32_MAX) {
            p->tail = true;
            p->tail_off = (int32_t)off;
            p->tail_len = (uint16_t)len;
            p->tail_var = (uint16_t)var;
        }
        return;
    }
    const char *src = sy__pattern_source(pat);
    /* over max_groups (1), var_count (0) and npats (one pattern): the
     * accessors give those for a lit */
    p->lit = true;
    p->lit_len = (uint32_t)len;
    p->lit_segs = (uint16_t)n;
    p->lit_src = src;
    p->lit_rest = rest;
}
