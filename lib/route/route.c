/*
 * route.c - the compiled route object: creation, reference counting,
 * compiling its predicate and filter entries, and the public sy_route_*
 * accessors.
 */
#include "route/route.h"

#include "base/values.h"

#include "policy/breaker.h"
#include "policy/ratelimit.h"
#include "route/filter.h"
#include "route/predicate.h"
#include "service/service.h"

#include <stdio.h>

/* The settings of a route whose metadata sets no selection key: [1] for
 * lb:ws:// and lb:wss:// uris. */
static const sy__route_select select_defaults[2] = {
    {"version", NULL, NULL, NULL, NULL, (int8_t)SY_VERSION_FALLBACK_NONE,
     (int8_t)SY_LB_ROUND_ROBIN, SY_UNTAGGED_LATEST, false, 7},
    {"version", NULL, NULL, NULL, NULL, (int8_t)SY_VERSION_FALLBACK_NONE,
     (int8_t)SY_LB_ROUND_ROBIN, SY_UNTAGGED_LATEST, true, 7},
};
const sy__route_select sy__route_select_default = {
    "version",
    NULL,
    NULL,
    NULL,
    NULL,
    (int8_t)SY_VERSION_FALLBACK_NONE,
    (int8_t)SY_LB_ROUND_ROBIN,
    SY_UNTAGGED_LATEST,
    false,
    7};

/* No metadata, no filters, the default selection settings. */
const sy__route_more sy__route_more_none = {NULL, NULL, NULL, NULL,
                                            NULL, 0,    0,    0};

const char *const sy__route_schemes[SY_SCHEME_COUNT] = {
    "", "http", "https", "ws", "wss", "lb", "lb:ws", "lb:wss", "forward", "no"};

/* A route and, in the same block, the first chunk of its arena (sized by
 * the caller's estimate of what the route holds: its strings, entries and
 * compiled objects), so a route is usually one allocation: the chunk's
 * header is the route's last 16 bytes (cpred and fingerprint,
 * sy__route_first_chunk), its data follows the struct. A route built
 * with the library's default allocator points at the one shared copy of
 * it (stateless: libc plus alloc_map.c); with a host's allocator the
 * block ends with the route's own copy (the route may outlive the router
 * or document whose copy it was given). */
typedef struct sy__route_box {
    struct sy_route route;
    _Alignas(8) unsigned char chunk[]; /* route.arena_embedded: the first
                                          chunk's data, then the allocator
                                          copy if any */
} sy__route_box;

struct sy_route *sy__route_new_sized(const sy__alloc *alloc,
                                     size_t arena_bytes) {
    if (arena_bytes > SY_ARENA_CHUNK_MAX - 8)
        return NULL;
    arena_bytes = (arena_bytes + 7u) & ~(size_t)7u;
    size_t extra = arena_bytes;
    const sy__alloc *shared = sy__alloc_default_shared(alloc);
    sy__route_box *b =
        sy__malloc(alloc, sizeof *b + extra + (shared ? 0 : sizeof *alloc));
    if (!b)
        return NULL;
#if SY_ROUTE_ADDR_BITS
    if ((uint64_t)(uintptr_t)(void *)b >> SY_ROUTE_ADDR_BITS) {
        sy__free(alloc, b); /* the index could not pack its pointer */
        return NULL;
    }
#endif
    memset(b, 0, sizeof *b);
    struct sy_route *r = &b->route;
    if (shared) {
        r->alloc = shared;
    } else {
        sy__alloc *own = (sy__alloc *)(void *)(b->chunk + extra);
        *own = *alloc;
        r->alloc = own;
    }
    atomic_init(&r->refs, 1);
    sy__arena_init(&r->arena, r->alloc, 0);
    r->arena.chunk_size = 0; /* small chunks, and canonical stays NULL */
    if (arena_bytes) {
        sy__arena_chunk *c = sy__route_first_chunk(r);
        c->next = NULL; /* cpred */
        c->size = (uint32_t)arena_bytes;
        c->used = 0;
        r->arena.head = c;
        r->arena_embedded = true;
    }
    r->id = "";
    r->uri = "";
    atomic_init(&r->canonical, NULL);
    r->up_kind = SY_UPSTREAM_NONE;
    r->up_scheme = SY_SCHEME_NONE;
    r->up_host = "";
    r->literal_path = -1;
    r->literal_host = -1;
    r->key = UINT32_MAX;
    r->more = &sy__route_more_none;
    return r;
}

int sy__route_set_host_data(struct sy_route *r, void *data) {
    if (r->more == &sy__route_more_none) {
        if (!data)
            return SY_OK;
        sy__route_more *m = sy__malloc(r->alloc, sizeof *m);
        if (!m)
            return SY_ENOMEM;
        *m = sy__route_more_none;
        m->policies = SY_MORE_HEAP;
        r->more = m;
    }
    ((sy__route_more *)(uintptr_t)r->more)->host_data = data;
    return SY_OK;
}

sy__route_more *sy__route_more_own(struct sy_route *r) {
    if (r->more != &sy__route_more_none)
        return (sy__route_more *)(uintptr_t)r->more;
    sy__route_more *m = sy__arena_alloc(&r->arena, sizeof *m);
    if (!m)
        return NULL;
    *m = sy__route_more_none;
    r->more = m;
    return m;
}

struct sy_route *sy__route_new(const sy__alloc *alloc) {
    return sy__route_new_sized(alloc, 0);
}

void *sy__route_text(struct sy_route *r, size_t n) {
    if (n == 0)
        n = 1;
    sy__arena_chunk *c = r->arena.head;
    if (r->arena_embedded && c == sy__route_first_chunk(r) &&
        c->size - c->used >= n) {
        c->size -= (uint32_t)n; /* n <= the chunk's size: fits */
        return c->data + c->size;
    }
    return sy__arena_alloc_bytes(&r->arena, n);
}

char *sy__route_strndup(struct sy_route *r, const char *s, size_t n) {
    if (n == SIZE_MAX)
        return NULL;
    char *p = sy__route_text(r, n + 1);
    if (p) {
        if (n)
            memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

char *sy__route_strdup(struct sy_route *r, const char *s) {
    return sy__route_strndup(r, s, strlen(s));
}

struct sy_route *sy__route_ref(const struct sy_route *r) {
    struct sy_route *m = (struct sy_route *)(uintptr_t)r;
    if (m)
        atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
    return m;
}

/* The compiled objects' own resources (patterns, regexes, host state);
 * the arrays and the objects themselves are in the route's arena. */
static void free_preds(struct sy__pred *slots, size_t n, const sy__alloc *a) {
    for (size_t i = 0; i < n; i++)
        sy__pred_free((sy__pred *)(void *)((char *)(void *)slots +
                                           i * SY_PRED_OBJECT_BYTES),
                      a);
}

static void free_compiled(struct sy_route *r) {
    if (r->cpred) { /* set once every predicate is compiled */
        free_preds(r->cpred, r->predicate_count, r->alloc);
        r->cpred = NULL;
    }
    if (r->more->cfilters) { /* then r owns its more */
        sy__route_more *m = (sy__route_more *)(uintptr_t)r->more;
        for (size_t i = 0; i < m->filter_count; i++)
            if (m->cfilters[i])
                sy__filter_free(m->cfilters[i], r->alloc);
        m->cfilters = NULL;
        m->policies = 0;
    }
}

void *sy__route_calloc(struct sy_route *r, size_t n, size_t size) {
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = sy__arena_alloc(&r->arena, n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

void sy__route_unref(struct sy_route *r) {
    if (!r)
        return;
    if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
        return;
    free_compiled(r);
    if (r->more->policies & SY_MORE_HEAP)
        sy__free(r->alloc, (void *)(uintptr_t)r->more);
    sy__free(r->alloc,
             atomic_load_explicit(&r->canonical, memory_order_relaxed));
    /* the first chunk is part of the box: out of the list before the
     * arena frees its chunks (it is the last one, the oldest) */
    if (r->arena_embedded) {
        sy__arena_chunk *first = sy__route_first_chunk(r);
        sy__arena_chunk **c = &r->arena.head;
        while (*c && *c != first)
            c = &(*c)->next;
        *c = NULL;
    }
    sy__arena_free(&r->arena);
    sy__alloc a = *r->alloc; /* the box holding it is freed below */
    sy__free(&a, r);
}

/* The first predicate of `kind` (Path or Host), if all its patterns are
 * literal segments or labels; else -1. */
static int literal_pred_index(const struct sy_route *r, sy__pred_kind kind) {
    for (size_t i = 0; i < r->predicate_count && i <= SY_ROUTE_LITERAL_MAX;
         i++) {
        const sy__pred *p = sy__route_cpred(r, i);
        if (sy__pred_get_kind(p) != kind)
            continue;
        return sy__pred_all_literal(p) ? (int)i : -1;
    }
    return -1;
}

/* ---- entries rebuilt from the compiled form ---- */

/* The built-in spec of a Path or Host predicate (else NULL). */
static const sy__factory_spec *pattern_spec(sy__pred_kind kind) {
    if (kind != SY_PK_PATH && kind != SY_PK_HOST)
        return NULL;
    return sy__factory_find(SY_FACTORY_PREDICATE,
                            kind == SY_PK_PATH ? "Path" : "Host", 4);
}

const sy__def_entry *sy__route_pred_entry(const struct sy_route *r, size_t i,
                                          sy__entry_view *tmp) {
    if (r->predicates)
        return &r->predicates[i];
    const sy__pred *p = sy__route_cpred(r, i);
    const sy__factory_spec *spec = pattern_spec(sy__pred_get_kind(p));
    memset(tmp, 0, sizeof *tmp);
    sy__def_set_factory(&tmp->e, spec, NULL);
    /* the parse maps a shortcut's value to the field by the spec's own
     * name (the same pointer), and the pattern borrows the value */
    tmp->arg = (sy_kv){spec->fields[0].name,
                       sy__pattern_source(sy__pred_pattern(p, 0))};
    tmp->e.args = &tmp->arg;
    tmp->e.arg_count = 1;
    tmp->e.shortcut = true;
    return &tmp->e;
}

bool sy__route_entries_rebuildable(const struct sy_route *r) {
    if (!r->cpred || !r->predicates)
        return false;
    for (size_t i = 0; i < r->predicate_count; i++) {
        const sy__def_entry *e = &r->predicates[i];
        const sy__pred *p = sy__route_cpred(r, i);
        sy__pred_kind kind = sy__pred_get_kind(p);
        const sy__factory_spec *spec = sy__def_spec(e);
        /* a built-in compiled to a Path (Host) predicate is Path (Host):
         * the spec pattern_spec finds */
        if ((kind != SY_PK_PATH && kind != SY_PK_HOST) || !spec ||
            spec->id != (kind == SY_PK_PATH ? SY_P_PATH : SY_P_HOST) ||
            !e->shortcut || e->arg_count != 1 ||
            sy__pred_pattern_count(p) != 1 ||
            e->args[0].key != spec->fields[0].name ||
            e->args[0].value != sy__pattern_source(sy__pred_pattern(p, 0)))
            return false;
    }
    return true;
}

/* ---- selection settings ---- */

static const char *const select_keys[] = {
    "lb-hash-cookie",  "lb-hash-header",   "lb-policy",      "lb-zone",
    "version-default", "version-fallback", "version-header",
};

bool sy__route_is_select_key(const char *key) {
    for (size_t i = 0; i < SY_ARRAY_LEN(select_keys); i++)
        if (strcmp(key, select_keys[i]) == 0)
            return true;
    return false;
}

/* An HTTP token (RFC 9110 tchar), the shape of header and cookie names. */
static bool is_token(const char *s) {
    if (!*s)
        return false;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c)))
            return false;
    }
    return true;
}

/* Room for the errors of sy__route_check_select. */
typedef struct select_errors {
    const char *path; /* the route's */
    sy_error *errs;
    size_t max, n;
    char msg[256];
} select_errors;

/* Record se->msg as an error of metadata.<key>. */
static void select_error(select_errors *se, const char *key) {
    if (se->n < se->max) {
        char p[256];
        sy__path_printf(p, sizeof p, "%s%smetadata.%s", se->path,
                        *se->path ? "." : "", key);
        sy__error_set(&se->errs[se->n], SY_EARG, p, "%s", se->msg);
    }
    se->n++;
}

size_t sy__route_check_select(const struct sy_route *r, const char *path,
                              sy_error *errs, size_t max) {
    if (!r->more->metadata_count)
        return 0; /* nothing set: nothing to check */
    select_errors se = {path ? path : "", errs, max, 0, {0}};
    const char *v;
    sy__lb_policy pol = SY_LB_ROUND_ROBIN;
    if ((v = sy_route_metadata(r, "lb-policy")) &&
        sy__lb_policy_parse(v, strlen(v), &pol)) {
        snprintf(se.msg, sizeof se.msg,
                 "lb-policy must be round-robin, random or hash, not '%.80s'",
                 v);
        select_error(&se, "lb-policy");
    }
    sy__version_fallback fb;
    if ((v = sy_route_metadata(r, "version-fallback")) &&
        sy__version_fallback_parse(v, strlen(v), &fb)) {
        snprintf(se.msg, sizeof se.msg,
                 "version-fallback must be none, latest or any, not '%.80s'",
                 v);
        select_error(&se, "version-fallback");
    }
    if ((v = sy_route_metadata(r, "version-default")) && !*v) {
        snprintf(se.msg, sizeof se.msg,
                 "version-default must be latest, oldest or a version, not "
                 "empty");
        select_error(&se, "version-default");
    }
    static const char *const names[][2] = {
        {"version-header", "a header name"},
        {"lb-hash-header", "a header name"},
        {"lb-hash-cookie", "a cookie name"},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(names); i++)
        if ((v = sy_route_metadata(r, names[i][0])) && !is_token(v)) {
            snprintf(se.msg, sizeof se.msg,
                     "%s must be %s (letters, digits and !#$%%&'*+-.^_`|~), "
                     "not '%.80s'",
                     names[i][0], names[i][1], v);
            select_error(&se, names[i][0]);
        }
    if ((v = sy_route_metadata(r, "lb-zone")) && !*v) {
        snprintf(se.msg, sizeof se.msg,
                 "lb-zone must name a zone, not be "
                 "empty");
        select_error(&se, "lb-zone");
    }
    const char *hh = sy_route_metadata(r, "lb-hash-header");
    const char *hc = sy_route_metadata(r, "lb-hash-cookie");
    bool hash =
        (v = sy_route_metadata(r, "lb-policy")) && strcmp(v, "hash") == 0;
    if (hash && !hh && !hc) {
        snprintf(se.msg, sizeof se.msg,
                 "lb-policy hash needs lb-hash-header or lb-hash-cookie (the "
                 "key to hash)");
        select_error(&se, "lb-policy");
    }
    if (hh && hc) {
        snprintf(se.msg, sizeof se.msg,
                 "lb-hash-header and lb-hash-cookie exclude each other (one "
                 "key is hashed)");
        select_error(&se, "lb-hash-cookie");
    }
    if (!hash && (hh || hc)) {
        const char *k = hh ? "lb-hash-header" : "lb-hash-cookie";
        snprintf(se.msg, sizeof se.msg,
                 "%s is used only with lb-policy hash (the policy is %s)", k,
                 v ? v : "round-robin by default");
        select_error(&se, k);
    }
    /* run or refuse: instance selection runs only for lb:// routes, the
     * timeouts only where an upstream is called */
    for (size_t i = 0; i < r->more->metadata_count; i++) {
        const char *k = r->more->metadata[i].key;
        bool sel = sy__route_is_select_key(k);
        bool tmo =
            !strcmp(k, "response-timeout") || !strcmp(k, "connect-timeout");
        if (r->up_scheme == SY_SCHEME_NONE)
            break; /* no uri (or a bad one, reported): nothing to say */
        if ((sel && r->up_kind != SY_UPSTREAM_SERVICE) ||
            (tmo && (r->up_kind == SY_UPSTREAM_FORWARD ||
                     r->up_kind == SY_UPSTREAM_NONE))) {
            snprintf(se.msg, sizeof se.msg,
                     "%s has no effect on this route: %s", k,
                     sel ? "instances are selected for lb:// routes only"
                         : "a forward: or no://op route calls no upstream");
            select_error(&se, k);
        }
    }
    return se.n;
}

/* Selection settings from the metadata, so selection reads no strings.
 * Values were checked at parse (sy__route_check_select); an unknown one
 * here (a route built around the parser) keeps the default. The plain
 * defaults need no `more` of r's own. False: out of memory (the
 * selection is then the defaults). */
static bool read_select(struct sy_route *r) {
    const char *v;
    bool ws = strncmp(r->uri, "lb:ws", 5) == 0;
    if (r->more != &sy__route_more_none)
        ((sy__route_more *)(uintptr_t)r->more)->select = NULL;
    bool any = false; /* the defaults, without seven lookups */
    for (size_t i = 0; i < r->more->metadata_count && !any; i++)
        any = sy__route_is_select_key(r->more->metadata[i].key);
    if (!any && !ws)
        return true;
    sy__route_more *m = sy__route_more_own(r);
    if (!m)
        return false;
    m->select = &select_defaults[ws];
    if (!any)
        return true;
    sy__route_select *s = sy__route_calloc(r, 1, sizeof *s);
    if (!s)
        return false;
    *s = select_defaults[ws];
    s->version_header =
        (v = sy_route_metadata(r, "version-header")) ? v : "version";
    s->version_header_len = (uint32_t)strlen(s->version_header);
    if ((v = sy_route_metadata(r, "version-default")) && *v) {
        if (strcmp(v, "oldest") == 0) {
            s->untagged = SY_UNTAGGED_OLDEST;
        } else if (strcmp(v, "latest") != 0) {
            s->untagged = SY_UNTAGGED_PINNED;
            s->default_version = v;
        }
    }
    s->hash_header = sy_route_metadata(r, "lb-hash-header");
    s->hash_cookie = sy_route_metadata(r, "lb-hash-cookie");
    s->zone = sy_route_metadata(r, "lb-zone");
    sy__version_fallback fb = SY_VERSION_FALLBACK_NONE;
    if ((v = sy_route_metadata(r, "version-fallback")))
        sy__version_fallback_parse(v, strlen(v), &fb);
    sy__lb_policy pol = SY_LB_ROUND_ROBIN;
    if ((v = sy_route_metadata(r, "lb-policy")))
        sy__lb_policy_parse(v, strlen(v), &pol);
    s->fallback = (int8_t)fb;
    s->policy = (int8_t)pol;
    m->select = s;
    return true;
}

/* Whether a Path or Host pattern of r captures {name} (n bytes). */
static bool captures(const struct sy_route *r, const char *name, size_t n) {
    for (size_t k = 0; k < r->predicate_count; k++) {
        sy__entry_view tmp;
        const sy__def_entry *e = sy__route_pred_entry(r, k, &tmp);
        const sy__factory_spec *s = sy__def_spec(e);
        for (size_t a = 0; s && (s->id == SY_P_PATH || s->id == SY_P_HOST) &&
                           a < e->arg_count;
             a++)
            if (sy__keyres_pattern_captures(e->args[a].value, name, n))
                return true;
    }
    return false;
}

/* Whether every request r matches has {name}: a Path or Host predicate
 * each of whose patterns captures it (a pattern that does not leaves it
 * out of the requests it matches). */
static bool always_captures(const struct sy_route *r, const char *name,
                            size_t n) {
    for (size_t k = 0; k < r->predicate_count; k++) {
        sy__entry_view tmp;
        const sy__def_entry *e = sy__route_pred_entry(r, k, &tmp);
        const sy__factory_spec *s = sy__def_spec(e);
        size_t pats = 0, with = 0;
        for (size_t a = 0; s && (s->id == SY_P_PATH || s->id == SY_P_HOST) &&
                           a < e->arg_count;
             a++)
            if (strcmp(e->args[a].key, "patterns") == 0) {
                pats++;
                with += sy__keyres_pattern_captures(e->args[a].value, name, n);
            }
        if (pats && with == pats)
            return true;
    }
    return false;
}

const char *sy__route_fallback_unbound(const struct sy_route *r,
                                       const char *fallback, size_t *n) {
    for (const char *s = fallback; s && (s = strchr(s, '{'));) {
        *n = strcspn(s + 1, "}");
        if (s[1 + *n] != '}' || !*n || !always_captures(r, s + 1, *n))
            return s;
        s += *n + 2;
    }
    return NULL;
}

/* ---- run or refuse: the {NAME}s of a route's filter templates (header
 * values, SetRequestHostHeader's host, AddRequestParameter's value,
 * SetPath, PrefixPath) must be variables every request of the route has.
 * The plan expands an unknown one to "" (filter_template.c); SCG fails
 * such a request (500): refused at compile (and, for the default filters,
 * at each route that lacks it: router_core.c). ---- */

/* The template field of built-in filter `id`, or NULL. */
static const char *template_field(sy__builtin id) {
    switch (id) {
    case SY_F_ADD_REQUEST_HEADER:
    case SY_F_SET_REQUEST_HEADER:
    case SY_F_ADD_RESPONSE_HEADER:
    case SY_F_SET_RESPONSE_HEADER:
    case SY_F_ADD_REQUEST_PARAMETER: return "value";
    case SY_F_ADD_REQUEST_HEADERS_IF_NOT_PRESENT: return "headers";
    case SY_F_SET_REQUEST_HOST_HEADER: return "host";
    case SY_F_SET_PATH: return "template";
    case SY_F_PREFIX_PATH: return "prefix";
    default: return NULL;
    }
}

static bool space(char ch) {
    return ch == ' ' || (unsigned char)(ch - '\t') <= '\r' - '\t';
}

/* The first variable of t, read as the plan's expansion reads them ('{',
 * no '/' before the next '}', the name up to a ':', trimmed), that not
 * every request of r has: its name at *name (*n bytes); NULL when none. */
static const char *unbound_in(const struct sy_route *r, const char *t,
                              size_t *n) {
    for (const char *s = t; (s = strchr(s, '{'));) {
        size_t j = strcspn(s + 1, "}/");
        if (s[1 + j] != '}' || !j) {
            s++;
            continue;
        }
        const char *a = s + 1, *e = s + 1 + strcspn(s + 1, ":}");
        while (a < e && space(*a))
            a++;
        while (e > a && space(e[-1]))
            e--;
        *n = (size_t)(e - a);
        if (!*n || !always_captures(r, a, *n))
            return a;
        s += j + 2;
    }
    return NULL;
}

const char *sy__route_template_unbound(const struct sy_route *r,
                                       const sy__def_entry *e,
                                       const char **field, size_t *n) {
    const sy__factory_spec *spec = sy__def_spec(e);
    const char *f = spec ? template_field(spec->id) : NULL;
    if (!f)
        return NULL;
    *field = f;
    for (uint32_t a = 0; a < e->arg_count; a++) {
        if (strcmp(e->args[a].key, f) != 0)
            continue;
        const char *v = unbound_in(r, e->args[a].value, n);
        if (v)
            return v;
    }
    return NULL;
}

int sy__route_check_templates(const struct sy_route *r, size_t i, const char *p,
                              sy_error *err) {
    const sy__def_entry *e = &r->more->filters[i];
    const char *field = NULL;
    size_t n = 0;
    const char *v = sy__route_template_unbound(r, e, &field, &n);
    if (!v)
        return 0;
    char at[300];
    snprintf(at, sizeof at, "%s%s%s", p, e->shortcut ? "" : ".args.",
             e->shortcut ? "" : field);
    return sy__error_set(err, SY_EARG, at,
                         "%s: %s: {%.*s}: not every request of the route has "
                         "it (no Path or Host predicate each of whose "
                         "patterns captures it): SCG fails such a request "
                         "(500), it would be sent with \"\" there",
                         sy__def_name(e), field, (int)(n > 80 ? 80 : n), v);
}

bool sy__route_keys_limiter(const struct sy_route *r, const sy__rl_cfg *rl) {
    return rl->kr.kind != SY_KR_PATH_VAR ||
           captures(r, rl->kr.arg, rl->kr.arg_len);
}

/* A CircuitBreaker's fallbackUri with a {NAME} not every request of r
 * has (SCG expands them from the route's variables and fails the fallback
 * on a missing one): refused at the filter at p. */
static int check_fallback_vars(const struct sy_route *r, size_t i,
                               const sy__brk_cfg *bc, const char *p,
                               sy_error *err) {
    size_t n = 0;
    const char *s = sy__route_fallback_unbound(r, bc->fallback, &n);
    if (!s)
        return 0;
    char at[300];
    snprintf(at, sizeof at, "%s%s", p,
             r->more->filters[i].shortcut ? "" : ".args.fallbackUri");
    if (s[1 + n] != '}' || !n)
        return sy__error_set(err, SY_EARG, at,
                             "CircuitBreaker: fallbackUri: '%.80s': a "
                             "'{' without a variable name and '}'",
                             bc->fallback);
    return sy__error_set(err, SY_EARG, at,
                         "CircuitBreaker: fallbackUri: {%.*s}: not every "
                         "request of the route has it (no Path or Host "
                         "predicate each of whose patterns captures it); the "
                         "fallback path expands the route's variables",
                         (int)(n > 80 ? 80 : n), s + 1);
}

/* A RequestRateLimiter's #{@pathVariable:NAME} (rl, of the filter at p)
 * that no Path or Host pattern of r captures: every request's key would
 * be empty (deny-empty-key: 403 to all), never a limit; refused there. */
static int check_key_var(const struct sy_route *r, const sy__rl_cfg *rl,
                         const char *p, sy_error *err) {
    if (sy__route_keys_limiter(r, rl))
        return 0;
    char at[300];
    snprintf(at, sizeof at, "%s.args.key-resolver", p);
    return sy__error_set(err, SY_EARG, at,
                         "RequestRateLimiter: key-resolver: "
                         "#{@pathVariable:%s}: no Path or Host pattern of the "
                         "route captures {%s}: every request would get the "
                         "empty key (its status), never a limit",
                         rl->kr.arg, rl->kr.arg);
}

/* "<path>.<list>[i]" in p, "<path>.<list>" kept there after the first
 * call (*at its length, 0 before): an entry's path, written only for an
 * error or a host's factory */
static const char *entry_path(char *p, size_t cap, size_t *at, const char *path,
                              const char *list, size_t i) {
    if (!*at)
        *at = sy__path_join(p, cap, path, list);
    sy__path_index(p, cap, *at, i);
    return p;
}

int sy__route_compile(struct sy_route *r, const sy__compile_env *env,
                      const char *path, sy_error *err) {
    char p[200];
    if (!path)
        path = "";
    /* compiled objects keep the allocator: use the route's own, which
     * lives exactly as long as they do */
    sy__compile_env own = {r->alloc, env ? env->registry : NULL,
                           env ? env->regex_cache : NULL, &r->arena,
                           env ? env->host_runs : NULL};
    env = &own;
    /* the predicates' objects and patterns from the top of the chunk in
     * the route's block, just below the texts they read (taken there
     * while the route was built), when the build's entries, `more` or
     * filter entries lie at its bottom: a cold candidate reads the
     * route's fields and that one cluster (docs/performance.md, round
     * 11). A route whose block holds nothing yet but its texts (its
     * entries kept outside) keeps them at the bottom, right after the
     * struct, in its line or the next (the top: mixed 100,000, such a
     * route 14.43 -> 15.28 LL misses a lookup) */
    sy__arena_chunk *top = r->arena_embedded ? sy__route_first_chunk(r) : NULL;
    if (top && !top->used)
        top = NULL;
    free_compiled(r);
    /* the objects in a row, r->cpred only once all are compiled; first,
     * so they lie next to the texts and the patterns below them */
    struct sy__pred *slots = NULL;
    if (r->predicate_count) {
        size_t n = r->predicate_count * (size_t)SY_PRED_OBJECT_BYTES;
        slots = sy__compile_obj(top, &r->arena, n);
        if (!slots)
            return sy__error_set(err, SY_ENOMEM, path, "out of memory");
        memset(slots, 0, n);
    }
    if (r->more->filter_count) { /* then r owns its more */
        sy__route_more *m = (sy__route_more *)(uintptr_t)r->more;
        m->cfilters = sy__route_calloc(r, m->filter_count, sizeof *m->cfilters);
        if (!m->cfilters) {
            free_compiled(r);
            return sy__error_set(err, SY_ENOMEM, path, "out of memory");
        }
    }
    size_t at = 0;
    for (size_t i = 0; i < r->predicate_count; i++) {
        /* the entry's path ("routes[3].predicates[1]") only names errors:
         * a built-in is compiled without it, and once more with it when
         * it fails (the same error: compiling is deterministic; after an
         * allocation failure the second try may succeed); a host's
         * factory (a callback, called once) gets it at once */
        const sy__def_entry *e = &r->predicates[i];
        sy__pred *slot = (sy__pred *)(void *)((char *)(void *)slots +
                                              i * SY_PRED_OBJECT_BYTES);
        int rc = 1;
        if (sy__def_spec(e))
            rc = sy__pred_compile_into(e, env, top, "", slot, err);
        if (rc)
            rc = sy__pred_compile_into(
                e, env, top,
                entry_path(p, sizeof p, &at, path, "predicates", i), slot, err);
        if (rc) {
            free_preds(slots, i, r->alloc);
            free_compiled(r);
            return rc;
        }
    }
    r->cpred = slots;
    if (!read_select(r)) {
        free_compiled(r);
        return sy__error_set(err, SY_ENOMEM, path, "out of memory");
    }
    r->literal_path = literal_pred_index(r, SY_PK_PATH);
    r->literal_host = literal_pred_index(r, SY_PK_HOST);
    at = 0;            /* the filters' paths as the predicates' */
    unsigned once = 0; /* a Retry, a CircuitBreaker, a limiter seen */
    for (size_t i = 0; i < r->more->filter_count; i++) {
        const sy__def_entry *e = &r->more->filters[i];
        int rc = 1;
        if (sy__def_spec(e))
            rc = sy__filter_compile(e, env, "", &r->more->cfilters[i], err);
        if (rc || !sy__def_spec(e))
            rc = sy__filter_compile(
                e, env, entry_path(p, sizeof p, &at, path, "filters", i),
                &r->more->cfilters[i], err);
        sy__builtin id = SY_F_REQUEST_RATE_LIMITER;
        const void *pol =
            rc ? NULL : sy__filter_policy(r->more->cfilters[i], &id);
        if (pol && (id == SY_F_CIRCUIT_BREAKER || id == SY_F_RETRY)) {
            unsigned bit = id == SY_F_RETRY ? 1u : 2u;
            entry_path(p, sizeof p, &at, path, "filters", i);
            /* the first one runs: a second would be accepted and ignored
             * (SCG nests them) */
            if (once & bit)
                rc = sy__error_set(err, SY_EARG, p,
                                   "%s: a route runs one %s; this is its "
                                   "second",
                                   sy__def_name(&r->more->filters[i]),
                                   sy__def_name(&r->more->filters[i]));
            else if (bit == 2u && (once & 1u))
                rc = sy__error_set(err, SY_EARG, p, SY__BREAKER_AFTER_RETRY);
            once |= bit;
        }
        if (pol && id == SY_F_REQUEST_RATE_LIMITER)
            once |= 4u;
        if (pol && id == SY_F_REQUEST_RATE_LIMITER)
            rc = check_key_var(
                r, pol, entry_path(p, sizeof p, &at, path, "filters", i), err);
        const char *tf;
        size_t tn;
        if (!rc && sy__route_template_unbound(r, e, &tf, &tn))
            rc = sy__route_check_templates(
                r, i, entry_path(p, sizeof p, &at, path, "filters", i), err);
        if (!rc && pol && id == SY_F_CIRCUIT_BREAKER)
            rc = check_fallback_vars(
                r, i, pol, entry_path(p, sizeof p, &at, path, "filters", i),
                err);
        if (rc) {
            free_compiled(r);
            return rc;
        }
    }
    if (r->more->cfilters)
        ((sy__route_more *)(uintptr_t)r->more)->policies =
            (uint16_t)(SY_MORE_COMPILED | (once & 1u ? SY_MORE_RETRY : 0) |
                       (once & 2u ? SY_MORE_BREAKER : 0) |
                       (once & 4u ? SY_MORE_RATELIMIT : 0));
    if (env->host_runs) {
        char fp[200];
        sy__path_join(fp, sizeof fp, path, "filters");
        int rc = sy__route_check_host(r, env->host_runs, path, fp, err);
        if (rc) {
            free_compiled(r);
            return rc;
        }
    }
    return SY_OK;
}

/* ---- public accessors ---- */

const char *sy_route_id(const sy_route *r) {
    return r ? r->id : NULL;
}

const char *sy_route_uri(const sy_route *r) {
    return r ? r->uri : NULL;
}

int32_t sy_route_order(const sy_route *r) {
    return r ? r->order : 0;
}

bool sy_route_disabled(const sy_route *r) {
    return r && r->disabled;
}

void sy_route_upstream(const sy_route *r, sy_upstream *out) {
    if (!out)
        return;
    if (!r) {
        memset(out, 0, sizeof *out);
        out->kind = SY_UPSTREAM_NONE;
        out->scheme = out->host = out->path = "";
        return;
    }
    out->kind = (sy_upstream_kind)r->up_kind;
    out->scheme = sy__route_schemes[r->up_scheme];
    out->host = r->up_host;
    out->port = r->up_port;
    /* FORWARD: the uri's text after "forward:" (def_route.c parse_uri) */
    const char *colon =
        r->up_kind == SY_UPSTREAM_FORWARD ? strchr(r->uri, ':') : NULL;
    out->path = colon ? colon + 1 : "";
}

size_t sy_route_metadata_count(const sy_route *r) {
    return r ? r->more->metadata_count : 0;
}

sy_kv sy_route_metadata_at(const sy_route *r, size_t i) {
    sy_kv none = {NULL, NULL};
    if (!r || i >= r->more->metadata_count)
        return none;
    return r->more->metadata[i];
}

const char *sy_route_metadata(const sy_route *r, const char *key) {
    if (!r || !key)
        return NULL;
    size_t lo = 0, hi = r->more->metadata_count;
    while (lo < hi) { /* sorted by key (strcmp) */
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(r->more->metadata[mid].key, key);
        if (c == 0)
            return r->more->metadata[mid].value;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

sy_timeout_setting sy_route_timeout(const sy_route *r, sy_timeout_kind kind,
                                    uint64_t *ms) {
    bool connect = kind == SY_TIMEOUT_CONNECT;
    const char *v =
        sy_route_metadata(r, connect ? "connect-timeout" : "response-timeout");
    int64_t n = 0;
    if (!v || !sy__value_int64(v, INT64_MIN, INT64_MAX, &n, NULL))
        return SY_TIMEOUT_UNSET; /* parsing lets no other value through */
    if (connect ? n == 0 : n < 0)
        return SY_TIMEOUT_NONE;
    if (ms)
        *ms = (uint64_t)n;
    return SY_TIMEOUT_MS;
}

size_t sy_route_predicate_count(const sy_route *r) {
    return r ? r->predicate_count : 0;
}

const char *sy_route_predicate_name(const sy_route *r, size_t i) {
    if (!r || i >= r->predicate_count)
        return NULL;
    sy__entry_view tmp;
    return sy__def_name(sy__route_pred_entry(r, i, &tmp));
}
void *sy_route_host_data(const sy_route *r) {
    return r ? r->more->host_data : NULL;
}
uint32_t sy_route_key(const sy_route *r) {
    return r ? r->key : UINT32_MAX;
}
