/*
 * filter.c - compiling filter entries (route model section 5) into
 * sy__filter objects: argument parsing and defaults, regexes compiled once
 * (through regex.c's PCRE2 environment), Java replacement strings translated
 * to pcre2_substitute syntax, and the entries handed to the host
 * (stateful built-ins and host-registered filters, validated here).
 * The plan itself is computed in filter_plan.c.
 */
#include "base/values.h"
#include "policy/breaker.h"
#include "policy/ratelimit.h"
#include "policy/retry.h"
#include "route/filter_int.h"

#include <stdio.h>

/* Backtracking budget of RewritePath's regex per request. */

/* RequestSize's default in SCG is DataSize.ofBytes(5000000), not 5MB. */
#define SY_REQUEST_SIZE_DEFAULT 5000000

typedef struct sy__fc {
    const sy__def_entry *e;
    const char *path; /* the entry's JSON path */
    sy__filter *f;
    sy_error *err;
    sy__arena *ar; /* for its strings: the route's, else f->arena */
    const sy_registry *registry;
} sy__fc;

/* ---- small helpers ---- */

static int fail(sy__fc *c, int code, const char *field, const char *fmt,
                const char *detail) {
    char p[600];
    if (field)
        snprintf(p, sizeof p, "%s.args.%s", c->path ? c->path : "", field);
    else
        snprintf(p, sizeof p, "%s", c->path ? c->path : "");
    return sy__error_set(c->err, code, p, fmt, detail ? detail : "");
}

static int oom(sy__fc *c) {
    return sy__error_set(c->err, SY_ENOMEM, c->path, "out of memory");
}

static bool keep(sy__fc *c, const char *s, sy_str *out) {
    char *p = sy__arena_strdup(c->ar, s ? s : "");
    if (!p)
        return false;
    out->ptr = p;
    out->len = strlen(p);
    return true;
}

/* The value of a field (or its default); NULL and an error when it is
 * required and missing. */
static const char *need(sy__fc *c, const char *field, int *rc) {
    const char *v = sy__def_arg_or_default(c->e, field);
    if (!v)
        *rc = fail(c, SY_EMISSING, field, "%smissing required argument", NULL);
    return v;
}

static int get_bool(sy__fc *c, const char *field, bool dflt, bool *out) {
    const char *v = sy__def_arg_or_default(c->e, field), *why = NULL;
    *out = dflt;
    if (v && !sy__value_bool(v, out, &why))
        return fail(c, SY_EARG, field, "%s", why);
    return 0;
}

static int get_size(sy__fc *c, const char *field, int64_t *out) {
    const char *v = sy__def_arg_or_default(c->e, field), *why = NULL;
    if (!v)
        return fail(c, SY_EMISSING, field, "%smissing required argument", NULL);
    if (!sy__value_size(v, out, &why))
        return fail(c, SY_EARG, field, "%s", why);
    if (*out <= 0)
        return fail(c, SY_EARG, field, "%smaxSize must be greater than 0",
                    NULL);
    return 0;
}

static int get_status(sy__fc *c, const char *field, int *out) {
    int rc = 0;
    const char *v = need(c, field, &rc), *why = NULL;
    if (!v)
        return rc;
    if (!sy__value_status(v, out, &why))
        return fail(c, SY_EARG, field, "%s", why);
    return 0;
}

/* Name and value strings from `name_field` / `value_field`. */
static int name_value(sy__fc *c, const char *name_field,
                      const char *value_field) {
    int rc = 0;
    const char *n = need(c, name_field, &rc);
    if (!n)
        return rc;
    const char *v = need(c, value_field, &rc);
    if (!v)
        return rc;
    if (!keep(c, n, &c->f->name) || !keep(c, v, &c->f->value))
        return oom(c);
    c->f->value_has_vars = strchr(v, '{') != NULL;
    return 0;
}

/* ---- regexes and replacements ---- */

/* Compile `src` (field `field`). The code is kept in *out when out is
 * non-NULL, else freed (validation only). */
static int compile_regex(sy__fc *c, const char *field, const char *src,
                         pcre2_code **out) {
    sy__re_env env;
    sy__re_env_init(&env, c->f->alloc, SY_FILTER_MATCH_LIMIT, 0);
    int code = 0;
    size_t off = 0;
    pcre2_code *re = sy__re_env_compile(&env, src, strlen(src), 0, &code, &off);
    if (!re) {
        sy__re_env_done(&env, false);
        char p[600];
        snprintf(p, sizeof p, "%s.args.%s", c->path ? c->path : "", field);
        return sy__re_error(c->err, p, code, off);
    }
    if (!out) { /* validation only */
        pcre2_code_free(re);
        sy__re_env_done(&env, false);
        return 0;
    }
    sy__re_env_done(&env, true);
    c->f->mctx = env.m;
    *out = re;
    return 0;
}

static bool is_alnum(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9');
}

/*
 * Translate a Java Matcher.replaceAll replacement into pcre2_substitute
 * syntax, as SCG uses it: first every "$\" becomes "$" (so YAML users can
 * write $\{name}), then Java's rules: "\x" is a literal x, "${name}" a
 * named group, "$n" the longest group number that exists (Java reads "$12"
 * as group 1 then '2' when there is one group). Java reports bad references
 * only when a match happens; switchyard rejects them at compile time.
 * Output: literal '$' as "$$", every reference as "${n}".
 */
static int translate_replacement(sy__fc *c, const char *field, const char *java,
                                 const pcre2_code *re, sy_str *out) {
    size_t n = strlen(java);
    /* at most: each byte -> "$$", each "$d" -> "${d}" */
    char *pre = sy__arena_alloc(c->ar, n + 1);
    char *dst = sy__arena_alloc(c->ar, 2 * n + 16);
    if (!pre || !dst)
        return oom(c);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        pre[m++] = java[i];
        if (java[i] == '$' && java[i + 1] == '\\')
            i++;
    }
    pre[m] = '\0';
    uint32_t groups = 0;
    (void)pcre2_pattern_info(re, PCRE2_INFO_CAPTURECOUNT, &groups);
    size_t o = 0;
    for (size_t i = 0; i < m;) {
        char ch = pre[i];
        if (ch == '\\') {
            if (i + 1 >= m)
                return fail(c, SY_EARG, field,
                            "%scharacter to be escaped is missing", NULL);
            ch = pre[i + 1];
            i += 2;
            if (ch == '$')
                dst[o++] = '$';
            dst[o++] = ch;
            continue;
        }
        if (ch != '$') {
            dst[o++] = ch;
            i++;
            continue;
        }
        i++;
        if (i >= m)
            return fail(c, SY_EARG, field,
                        "%sillegal group reference: group index is missing",
                        NULL);
        uint32_t num;
        if (pre[i] == '{') {
            size_t s = ++i;
            while (i < m && is_alnum(pre[i]))
                i++;
            if (i == s)
                return fail(c, SY_EARG, field,
                            "%snamed capturing group has 0 length name", NULL);
            if (i >= m || pre[i] != '}')
                return fail(c, SY_EARG, field,
                            "%snamed capturing group is missing trailing '}'",
                            NULL);
            if (pre[s] >= '0' && pre[s] <= '9')
                return fail(c, SY_EARG, field,
                            "%scapturing group name starts with a digit", NULL);
            char name[128];
            size_t len = i - s < sizeof name - 1 ? i - s : sizeof name - 1;
            memcpy(name, pre + s, len);
            name[len] = '\0';
            i++;
            int r = pcre2_substring_number_from_name(re, (PCRE2_SPTR)name);
            if (r < 0)
                return fail(c, SY_EARG, field, "no group named {%s}", name);
            num = (uint32_t)r;
        } else {
            if (pre[i] < '0' || pre[i] > '9')
                return fail(c, SY_EARG, field, "%sillegal group reference",
                            NULL);
            num = (uint32_t)(pre[i++] - '0');
            if (num > groups)
                return fail(c, SY_EARG, field, "%sno such group", NULL);
            while (i < m && pre[i] >= '0' && pre[i] <= '9') {
                uint32_t next = num * 10 + (uint32_t)(pre[i] - '0');
                if (next > groups)
                    break;
                num = next;
                i++;
            }
        }
        o += (size_t)sprintf(dst + o, "${%u}", (unsigned)num);
    }
    dst[o] = '\0';
    out->ptr = dst;
    out->len = o;
    return 0;
}

/* ---- one compiler per filter kind ---- */

static int compile_headers_if_not_present(sy__fc *c) {
    const sy__def_entry *e = c->e;
    size_t n = 0;
    for (size_t i = 0; i < e->arg_count; i++)
        if (strcmp(e->args[i].key, "headers") == 0)
            n++;
    if (n == 0)
        return fail(c, SY_EMISSING, "headers", "%smissing required argument",
                    NULL);
    c->f->items = sy__arena_alloc(c->ar, n * sizeof(sy_header));
    if (!c->f->items)
        return oom(c);
    for (size_t i = 0; i < e->arg_count; i++) {
        if (strcmp(e->args[i].key, "headers") != 0)
            continue;
        const char *kv = e->args[i].value;
        const char *colon = strchr(kv, ':');
        if (!colon || colon == kv)
            return fail(c, SY_EARG, "headers",
                        "expected Name:Value, got \"%s\"", kv);
        sy_header *h = &c->f->items[c->f->item_count++];
        char *name = sy__arena_strndup(c->ar, kv, (size_t)(colon - kv));
        char *value = sy__arena_strdup(c->ar, colon + 1);
        if (!name || !value)
            return oom(c);
        h->name = (sy_str){name, strlen(name)};
        h->value = (sy_str){value, strlen(value)};
    }
    return 0;
}

static int compile_redirect(sy__fc *c) {
    int rc = get_status(c, "status", &c->f->status);
    if (rc)
        return rc;
    if (c->f->status < 300 || c->f->status > 399)
        return fail(c, SY_EARG, "status", "status must be a 3xx code, got %s",
                    sy__def_arg(c->e, "status"));
    const char *url = need(c, "url", &rc);
    if (!url)
        return rc;
    if (!keep(c, url, &c->f->value))
        return oom(c);
    return get_bool(c, "includeRequestParams", false, &c->f->flag);
}

static int compile_rewrite_path(sy__fc *c) {
    int rc = 0;
    const char *re = need(c, "regexp", &rc);
    if (!re)
        return rc;
    const char *repl = need(c, "replacement", &rc);
    if (!repl)
        return rc;
    if ((rc = compile_regex(c, "regexp", re, &c->f->re)) != 0)
        return rc;
    uint32_t groups = 0;
    (void)pcre2_pattern_info(c->f->re, PCRE2_INFO_CAPTURECOUNT, &groups);
    c->f->groups = groups + 1;
    return translate_replacement(c, "replacement", repl, c->f->re,
                                 &c->f->value);
}

static int compile_rewrite_response_header(sy__fc *c) {
    int rc = 0;
    const char *name = need(c, "name", &rc);
    if (!name)
        return rc;
    const char *re = need(c, "regexp", &rc);
    if (!re)
        return rc;
    const char *repl = need(c, "replacement", &rc);
    if (!repl)
        return rc;
    pcre2_code *code = NULL;
    /* Compiled here only to check it and resolve group references. */
    if ((rc = compile_regex(c, "regexp", re, &code)) != 0)
        return rc;
    rc = translate_replacement(c, "replacement", repl, code, &c->f->value);
    pcre2_code_free(code);
    pcre2_match_context_free(c->f->mctx);
    c->f->mctx = NULL;
    if (rc)
        return rc;
    if (!keep(c, name, &c->f->name) || !keep(c, re, &c->f->arg))
        return oom(c);
    return 0;
}

/* The filter entry handed to the host: name and args copied. With
 * `defaults`, missing fields that have a default are added in field
 * order (RewriteLocationResponseHeader). */
static int make_entry(sy__fc *c, bool defaults) {
    const sy__def_entry *e = c->e;
    size_t extra = 0;
    const sy__factory_spec *spec = sy__def_spec(e);
    if (defaults && spec)
        for (size_t i = 0; i < spec->field_count; i++)
            if (spec->fields[i].dflt && !sy__def_arg(e, spec->fields[i].name))
                extra++;
    sy_kv *args =
        sy__arena_alloc(c->ar, (e->arg_count + extra + 1) * sizeof(sy_kv));
    char *name = sy__arena_strdup(c->ar, sy__def_name(e));
    if (!args || !name)
        return oom(c);
    size_t n = 0;
    for (size_t i = 0; i < e->arg_count; i++) {
        args[n].key = sy__arena_strdup(c->ar, e->args[i].key);
        args[n].value = sy__arena_strdup(c->ar, e->args[i].value);
        if (!args[n].key || !args[n].value)
            return oom(c);
        n++;
    }
    if (defaults && spec)
        for (size_t i = 0; i < spec->field_count; i++) {
            const sy__field_spec *fs = &spec->fields[i];
            if (fs->dflt && !sy__def_arg(e, fs->name))
                args[n++] = (sy_kv){fs->name, fs->dflt};
        }
    c->f->entry = (sy_filter_entry){name, args, n};
    return 0;
}

static int compile_rewrite_location(sy__fc *c) {
    const char *strip = sy__def_arg_or_default(c->e, "stripVersion");
    const char *header = sy__def_arg_or_default(c->e, "locationHeaderName");
    const char *host = sy__def_arg_or_default(c->e, "hostValue");
    const char *protocols = sy__def_arg_or_default(c->e, "protocols");
    int rc;
    if (protocols && (rc = compile_regex(c, "protocols", protocols, NULL)))
        return rc;
    if (!keep(c, header ? header : "Location", &c->f->name) ||
        !keep(c, host, &c->f->value) ||
        !keep(c, strip ? strip : "AS_IN_REQUEST", &c->f->arg))
        return oom(c);
    return make_entry(c, true);
}

static int compile_host_filter(sy__fc *c) {
    const sy_filter_factory *hf = sy__def_host(c->e);
    if (!hf)
        return fail(c, SY_EUNKNOWN, NULL, "unknown filter %s",
                    sy__def_name(c->e));
    if (hf->validate) {
        sy_error local;
        sy__error_clear(&local);
        int rc = hf->validate(hf->data, c->e->args, c->e->arg_count, &local);
        if (rc != 0) {
            if (rc > 0 || rc == SY_OK)
                rc = SY_ECALLBACK;
            char p[600];
            if (local.path[0])
                snprintf(p, sizeof p, "%s.%s", c->path ? c->path : "",
                         local.path);
            else
                snprintf(p, sizeof p, "%s", c->path ? c->path : "");
            sy__error_set(c->err, rc, p, "%s",
                          local.message[0] ? local.message
                                           : "host filter rejected its args");
            if (c->err)
                c->err->offset = local.offset;
            return rc;
        }
    }
    return make_entry(c, false);
}

/* A stateful filter: its entry for the host, and its config compiled
 * from the entry's args (policy/), every field checked as SCG binds it. */
static int compile_policy(sy__fc *c) {
    int rc = make_entry(c, false);
    if (rc)
        return rc;
    const sy_filter_entry *en = &c->f->entry;
    sy__pargs p = {en->args,       en->arg_count, en->name, c->path,
                   c->e->shortcut, c->err,        0};
    size_t size = c->f->id == SY_F_RETRY ? sizeof(struct sy_retry_policy)
                  : c->f->id == SY_F_REQUEST_RATE_LIMITER ? sizeof(sy__rl_cfg)
                                                          : sizeof(sy__brk_cfg);
    void *cfg = sy__arena_alloc(c->ar, size);
    if (!cfg)
        return oom(c);
    if (c->f->id == SY_F_RETRY)
        rc = sy__retry_compile(&p, cfg);
    else if (c->f->id == SY_F_REQUEST_RATE_LIMITER)
        rc = sy__rl_compile(&p, c->registry, cfg);
    else
        rc = sy__brk_compile(&p, cfg);
    if (!rc)
        c->f->policy = cfg;
    return rc;
}

const void *sy__filter_policy(const sy__filter *f, sy__builtin *id) {
    if (!f || (f->id != SY_F_RETRY && f->id != SY_F_REQUEST_RATE_LIMITER &&
               f->id != SY_F_CIRCUIT_BREAKER))
        return NULL;
    *id = f->id;
    return f->policy;
}

static int compile_kind(sy__fc *c) {
    sy__filter *f = c->f;
    int rc = 0;
    const char *v;
    switch (f->id) {
    case SY_F_ADD_REQUEST_HEADER:
    case SY_F_ADD_REQUEST_PARAMETER:
    case SY_F_SET_REQUEST_HEADER:
    case SY_F_SET_RESPONSE_HEADER: return name_value(c, "name", "value");
    case SY_F_ADD_RESPONSE_HEADER:
        if ((rc = name_value(c, "name", "value")) != 0)
            return rc;
        return get_bool(c, "override", true, &f->flag);
    case SY_F_ADD_REQUEST_HEADERS_IF_NOT_PRESENT:
        return compile_headers_if_not_present(c);
    case SY_F_DEDUPE_RESPONSE_HEADER:
        if (!(v = need(c, "name", &rc)))
            return rc;
        if (!keep(c, v, &f->name))
            return oom(c);
        v = sy__def_arg_or_default(c->e, "strategy");
        return keep(c, v ? v : "RETAIN_FIRST", &f->arg) ? 0 : oom(c);
    case SY_F_MAP_REQUEST_HEADER:
        return name_value(c, "fromHeader", "toHeader");
    case SY_F_PREFIX_PATH:
        if (!(v = need(c, "prefix", &rc)))
            return rc;
        return keep(c, v, &f->value) ? 0 : oom(c);
    case SY_F_PRESERVE_HOST_HEADER: return 0;
    case SY_F_REDIRECT_TO: return compile_redirect(c);
    case SY_F_REWRITE_REQUEST_PARAMETER:
        if ((rc = name_value(c, "name", "replacement")) != 0)
            return rc;
        c->f->value_has_vars = false; /* SCG does not expand it */
        return 0;
    case SY_F_REMOVE_REQUEST_HEADER:
    case SY_F_REMOVE_RESPONSE_HEADER:
    case SY_F_REMOVE_REQUEST_PARAMETER:
        if (!(v = need(c, "name", &rc)))
            return rc;
        return keep(c, v, &f->name) ? 0 : oom(c);
    case SY_F_REQUEST_HEADER_SIZE:
        if ((rc = get_size(c, "maxSize", &f->size)) != 0)
            return rc;
        /* SCG: errorHeaderName null -> "errorMessage" (an empty one is
         * kept as it is, like SCG). */
        v = sy__def_arg(c->e, "errorHeaderName");
        return keep(c, v ? v : SY_FILTER_ERROR_HEADER, &f->name) ? 0 : oom(c);
    case SY_F_REQUEST_SIZE:
        if (!sy__def_arg(c->e, "maxSize")) {
            f->size = SY_REQUEST_SIZE_DEFAULT;
            return 0;
        }
        return get_size(c, "maxSize", &f->size);
    case SY_F_REWRITE_PATH: return compile_rewrite_path(c);
    case SY_F_REWRITE_LOCATION_RESPONSE_HEADER:
        return compile_rewrite_location(c);
    case SY_F_REWRITE_RESPONSE_HEADER:
        return compile_rewrite_response_header(c);
    case SY_F_SET_PATH:
        if (!(v = need(c, "template", &rc)))
            return rc;
        return keep(c, v, &f->value) ? 0 : oom(c);
    case SY_F_SET_REQUEST_HOST_HEADER:
        if (!(v = need(c, "host", &rc)))
            return rc;
        return keep(c, v, &f->value) ? 0 : oom(c);
    case SY_F_SET_STATUS: return get_status(c, "status", &f->status);
    case SY_F_STRIP_PREFIX: {
        const char *why = NULL;
        v = sy__def_arg_or_default(c->e, "parts");
        if (!v) {
            f->size = 1;
            return 0;
        }
        if (!sy__value_int64(v, 0, INT32_MAX, &f->size, &why))
            return fail(c, SY_EARG, "parts", "%s", why);
        return 0;
    }
    case SY_F_RETRY:
    case SY_F_REQUEST_RATE_LIMITER:
    case SY_F_CIRCUIT_BREAKER: return compile_policy(c);
    case SY_HOST_FACTORY: return compile_host_filter(c);
    default:
        return fail(c, SY_EUNKNOWN, NULL, "%s is not a filter",
                    sy__def_name(c->e));
    }
}

_Static_assert(((sizeof(struct sy__filter) + 15) & ~(size_t)15) <=
                   SY_FILTER_OBJECT_BYTES,
               "SY_FILTER_OBJECT_BYTES is what a filter takes");

int sy__filter_compile(const sy__def_entry *e, const sy__compile_env *env,
                       const char *path, sy__filter **out, sy_error *err) {
    *out = NULL;
    if (!e || !env || !env->alloc)
        return sy__error_set(err, SY_EINVAL, path, "no filter entry");
    if (sy__def_spec(e) && sy__def_spec(e)->kind != SY_FACTORY_FILTER)
        return sy__error_set(err, SY_EUNKNOWN, path, "%s is not a filter",
                             sy__def_spec(e)->name);
    sy__filter *f = env->arena ? sy__arena_alloc(env->arena, sizeof *f)
                               : sy__malloc(env->alloc, sizeof *f);
    if (!f)
        return sy__error_set(err, SY_ENOMEM, path, "out of memory");
    memset(f, 0, sizeof *f);
    f->in_arena = env->arena != NULL;
    f->id = sy__def_spec(e) ? sy__def_spec(e)->id : SY_HOST_FACTORY;
    f->alloc = env->alloc;
    /* its strings are the entry's, reworked: in the route's arena when
     * there is one (no block of its own), else a first chunk near their
     * size (a filter's arena used to start at 256 bytes whatever it held) */
    size_t text = 64;
    for (size_t i = 0; !env->arena && i < e->arg_count; i++)
        text += 2 * (strlen(e->args[i].key) + strlen(e->args[i].value) + 2);
    sy__arena_init(&f->arena, env->alloc, text < 256 ? text : 256);
    sy__fc c = {
        e, path, f, err, env->arena ? env->arena : &f->arena, env->registry};
    int rc = compile_kind(&c);
    if (rc) {
        sy__filter_free(f, env->alloc);
        return rc;
    }
    *out = f;
    return 0;
}

void sy__filter_free(sy__filter *f, const sy__alloc *a) {
    if (!f)
        return;
    pcre2_match_context_free(f->mctx);
    pcre2_code_free(f->re);
    sy__arena_free(&f->arena);
    if (!f->in_arena)
        sy__free(a ? a : f->alloc, f);
}

uint32_t sy__filter_max_groups(const sy__filter *f) {
    return f && f->re ? f->groups : 0;
}
