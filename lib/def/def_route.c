/*
 * def_route.c - one route object of a document (route model section 2):
 * id, uri and upstream, order; metadata and enabled are def_metadata.c's,
 * entries def_entry.c's; then the canonical form and compilation.
 */
#include "base/values.h"
#include "def/def_build.h"
#include "def/def_memo.h"
#include "route/filter.h"
#include "route/predicate.h"

#include <math.h>
#include <stdio.h>
#include <strings.h>

/* ---- uri ---- */

static bool scheme_char(char c, bool first) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return !first &&
           ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.');
}

/* The scheme in lower case, for comparing: kept only when it is named in
 * an error (the upstream's scheme is one of the static names below). */
static void lower_copy(char *out, size_t cap, const char *s, size_t n) {
    if (n >= cap)
        n = cap - 1;
    for (size_t i = 0; i < n; i++)
        out[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] + 32) : s[i];
    out[n] = '\0';
}

/* The bytes that end a uri's authority. */
static const unsigned char authority_end[256] = {
    [0] = 1, ['/'] = 1, ['?'] = 1, ['#'] = 1};

/* The length of a uri's authority at s: up to '/', '?', '#' or the end
 * (strcspn, without its set up for these few bytes; one table test a
 * byte). */
static size_t authority_len(const char *s) {
    size_t n = 0;
    while (!authority_end[(unsigned char)s[n]])
        n++;
    return n;
}

/* The scheme a uri takes named by lower-case `s` (n bytes), by its
 * length first, or SY_SCHEME_NONE. */
static sy__route_scheme scheme_of(const char *s, size_t n) {
    switch (n) {
    case 2:
        return memcmp(s, "lb", 2) == 0   ? SY_SCHEME_LB
               : memcmp(s, "ws", 2) == 0 ? SY_SCHEME_WS
               : memcmp(s, "no", 2) == 0 ? SY_SCHEME_NO
                                         : SY_SCHEME_NONE;
    case 3: return memcmp(s, "wss", 3) == 0 ? SY_SCHEME_WSS : SY_SCHEME_NONE;
    case 4: return memcmp(s, "http", 4) == 0 ? SY_SCHEME_HTTP : SY_SCHEME_NONE;
    case 5:
        return memcmp(s, "https", 5) == 0 ? SY_SCHEME_HTTPS : SY_SCHEME_NONE;
    case 7:
        return memcmp(s, "forward", 7) == 0 ? SY_SCHEME_FORWARD
                                            : SY_SCHEME_NONE;
    default: return SY_SCHEME_NONE;
    }
}

/* The Host header for host h and r->up_port, in r's strings (exactly its
 * length: the arena estimate counts it so). */
static const char *route_authority(struct sy_route *r, const char *h,
                                   bool secure) {
    char small[128];
    size_t hl = strlen(h);
    if (hl + 9 > sizeof small)
        return sy__arena_authority(&r->arena, h, r->up_port, secure);
    size_t n = sy__authority_format(small, h, hl, r->up_port, secure);
    return sy__route_strndup(r, small, n);
}

/* A uri's authority ("user@host:port"), in the uri's own bytes. */
typedef struct uri_authority {
    const char *text; /* after the user info */
    size_t len;
    const char *host;
    size_t host_len;
    const char *port; /* NULL: none given */
} uri_authority;

/* Phase 1 of parse_uri: the scheme and the port it implies; *rest: the
 * uri after it ("lb:ws:" both). *done: the uri says all there is
 * (forward:, no:). */
static int uri_scheme(struct sy_route *r, const char *path, const char **rest,
                      bool *done, sy_error *err) {
    const char *u = r->uri;
    size_t n = 0;
    *done = false;
    while (u[n] && scheme_char(u[n], n == 0))
        n++;
    if (n == 0 || u[n] != ':')
        return sy__error_set(err, SY_EURI, path,
                             "uri '%.100s' has no scheme (such as http://)", u);
    char scheme[48]; /* longer than any scheme we take: none matches */
    lower_copy(scheme, sizeof scheme, u, n);
    *rest = u + n + 1;
    sy__route_scheme sc =
        n < sizeof scheme ? scheme_of(scheme, n) : SY_SCHEME_NONE;
    r->up_port = 0;
    r->up_host = "";
    r->up_scheme = sc;
    if (sc == SY_SCHEME_FORWARD) {
        const char *why = NULL; /* dispatched again to the path, as is */
        if (!sy__value_forward_path(*rest, false, &why))
            return sy__error_set(err, SY_EURI, path, "forward: uri: %s", why);
        r->up_kind = SY_UPSTREAM_FORWARD;
        /* the path: the uri after "forward:" (sy_route_upstream) */
        *done = true;
    } else if (sc == SY_SCHEME_NO) {
        r->up_kind = SY_UPSTREAM_NONE;
        *done = true;
    } else if (sc == SY_SCHEME_LB && (strncmp(*rest, "ws:", 3) == 0 ||
                                      strncmp(*rest, "wss:", 4) == 0)) {
        bool wss = (*rest)[2] == 's';
        r->up_scheme = wss ? SY_SCHEME_LB_WSS : SY_SCHEME_LB_WS;
        *rest += wss ? 4 : 3;
    } else if (sc == SY_SCHEME_HTTP || sc == SY_SCHEME_WS) {
        r->up_port = 80;
    } else if (sc == SY_SCHEME_HTTPS || sc == SY_SCHEME_WSS) {
        r->up_port = 443;
    } else if (sc != SY_SCHEME_LB) {
        r->up_scheme = SY_SCHEME_NONE;
        return sy__error_set(err, SY_EURI, path,
                             "unsupported uri scheme '%.40s' (use http, "
                             "https, ws, wss, lb, forward or no)",
                             scheme);
    }
    return SY_OK;
}

/* Phase 2 of parse_uri: "//authority" at rest split into host and port
 * (user info dropped, an IPv6 host in brackets). */
static int uri_split_authority(const struct sy_route *r, const char *rest,
                               bool lb, const char *path, uri_authority *a,
                               sy_error *err) {
    const char *u = r->uri;
    if (strncmp(rest, "//", 2) != 0)
        return sy__error_set(err, SY_EURI, path, "uri '%.100s' needs '//host'",
                             u);
    rest += 2;
    size_t alen = authority_len(rest);
    const char *at = memchr(rest, '@', alen); /* drop user info */
    if (at) {
        alen -= (size_t)(at + 1 - rest);
        rest = at + 1;
    }
    *a = (uri_authority){rest, alen, rest, 0, NULL};
    if (alen && rest[0] == '[') {
        const char *close = memchr(rest, ']', alen);
        if (!close)
            return sy__error_set(err, SY_EURI, path,
                                 "uri '%.100s' has an unclosed '['", u);
        a->host = rest + 1;
        a->host_len = (size_t)(close - a->host);
        if ((size_t)(close + 1 - rest) < alen) {
            if (close[1] != ':')
                return sy__error_set(err, SY_EURI, path,
                                     "uri '%.100s' has a bad authority", u);
            a->port = close + 2;
        }
    } else {
        const char *colon = memchr(rest, ':', alen);
        a->host_len = colon ? (size_t)(colon - rest) : alen;
        if (colon)
            a->port = colon + 1;
    }
    if (a->host_len == 0)
        return sy__error_set(err, SY_EURI, path, "uri '%.100s' has no %s", u,
                             lb ? "service name" : "host");
    size_t bad = sy__host_bad_byte(a->host, a->host_len);
    if (bad < a->host_len) /* it would reach the Host header */
        return sy__error_set(err, SY_EURI, path,
                             "uri '%.100s': byte 0x%02x at %zu is not "
                             "allowed in a host",
                             u, (unsigned char)a->host[bad],
                             (size_t)(a->host + bad - u));
    return SY_OK;
}

/* Phase 3 of parse_uri: the port given, 1..65535 (a service's is checked
 * and not used). */
static int uri_port(struct sy_route *r, const uri_authority *a, bool lb,
                    const char *path, sy_error *err) {
    const char *u = r->uri, *port = a->port;
    size_t plen = (size_t)(a->text + a->len - port);
    long v = 0;
    if (plen == 0 || plen > 5)
        return sy__error_set(err, SY_EURI, path, "uri '%.100s' has a bad port",
                             u);
    for (size_t i = 0; i < plen; i++) {
        if (port[i] < '0' || port[i] > '9')
            return sy__error_set(err, SY_EURI, path,
                                 "uri '%.100s' has a bad port", u);
        v = v * 10 + (port[i] - '0');
    }
    if (v < 1 || v > 65535)
        return sy__error_set(err, SY_EURI, path,
                             "uri '%.100s': port out of range 1..65535", u);
    if (!lb)
        r->up_port = (uint16_t)v;
    return SY_OK;
}

/* Phase 4 of parse_uri: the upstream's host, and for a url its Host
 * header. */
static int uri_host(struct sy_route *r, const uri_authority *a, bool lb,
                    const char *path, sy_error *err) {
    sy__route_scheme sc = r->up_scheme;
    /* the host ends the uri ("lb://svc"): the uri's own bytes (r->uri is
     * the route's copy), else a copy */
    const char *h = a->host[a->host_len] == '\0'
                        ? a->host
                        : sy__route_strndup(r, a->host, a->host_len);
    if (!h)
        return sy__error_set(err, SY_ENOMEM, path, "out of memory");
    r->up_host = h;
    r->up_kind = lb ? SY_UPSTREAM_SERVICE : SY_UPSTREAM_URL;
    bool secure = sc == SY_SCHEME_HTTPS || sc == SY_SCHEME_WSS;
    if (lb)
        return SY_OK;
    if (r->up_port == (secure ? 443 : 80) && !strchr(h, ':'))
        r->authority = h; /* the Host header is the host itself */
    else if (a->port && a->port[0] != '0' && a->text[a->len] == '\0')
        r->authority = a->text; /* "host:port" ends the uri, spelled as
                                   sy__arena_authority would spell it */
    else if (!(r->authority = route_authority(r, h, secure)))
        return sy__error_set(err, SY_ENOMEM, path, "out of memory");
    return SY_OK;
}

/* Fill r's upstream (up_*) and authority from r->uri (section 2 and 6):
 * its scheme, then its authority's host and port. */

static int parse_uri(struct sy_route *r, const char *path, sy_error *err) {
    const char *rest = NULL;
    bool done;
    int rc = uri_scheme(r, path, &rest, &done, err);
    if (rc || done)
        return rc;
    bool lb = r->up_scheme == SY_SCHEME_LB || r->up_scheme == SY_SCHEME_LB_WS ||
              r->up_scheme == SY_SCHEME_LB_WSS;
    uri_authority a = {NULL, 0, NULL, 0, NULL};
    rc = uri_split_authority(r, rest, lb, path, &a, err);
    if (!rc && a.port)
        rc = uri_port(r, &a, lb, path, err);
    if (!rc)
        rc = uri_host(r, &a, lb, path, err);
    return rc;
}

/* ---- the route object ---- */

static int build_order(struct sy_route *r, const cJSON *o, const char *path,
                       sy_error *err) {
    char p[256];
    r->order = 0;
    if (!o || sy__def_is_null(o))
        return 0;
    if (sy__def_is_number(o) && o->valuedouble >= (double)INT32_MIN &&
        o->valuedouble <= (double)INT32_MAX &&
        o->valuedouble == (double)(int32_t)o->valuedouble) {
        r->order = (int32_t)o->valuedouble; /* the common case */
        return 0;
    }
    sy__def_path(p, sizeof p, "%s.order", path);
    if (!sy__def_is_number(o))
        return sy__error_set(err, SY_ETYPE, p, "order must be an integer");
    double v = o->valuedouble;
    if (!isfinite(v) || v != floor(v)) {
        if (isfinite(v))
            return sy__error_set(err, SY_ETYPE, p, "order must be an integer");
        return sy__error_set(err, SY_ERANGE, p,
                             "order out of the 32-bit integer range");
    }
    if (v < (double)INT32_MIN || v > (double)INT32_MAX)
        return sy__error_set(err, SY_ERANGE, p,
                             "order out of the 32-bit integer range");
    r->order = (int32_t)v;
    return 0;
}

/* The members of a route object that a route reads, found in one walk
 * over its keys: the first of repeated keys, as
 * cJSON_GetObjectItemCaseSensitive finds. */
typedef struct route_fields {
    const cJSON *id, *uri, *order, *predicates, *filters, *metadata, *enabled;
} route_fields;

static inline bool key_eq(const char *k, const char *lit) {
    while (*lit && *k == *lit)
        k++, lit++;
    return *k == *lit;
}

static void find_fields(const cJSON *obj, route_fields *f) {
    memset(f, 0, sizeof *f);
    for (const cJSON *c = obj->child; c; c = c->next) {
        const char *k = c->string;
        const cJSON **slot = NULL;
        if (!k)
            continue;
        switch (k[0]) {
        case 'i': slot = key_eq(k + 1, "d") ? &f->id : NULL; break;
        case 'u': slot = key_eq(k + 1, "ri") ? &f->uri : NULL; break;
        case 'o': slot = key_eq(k + 1, "rder") ? &f->order : NULL; break;
        case 'p':
            slot = key_eq(k + 1, "redicates") ? &f->predicates : NULL;
            break;
        case 'f': slot = key_eq(k + 1, "ilters") ? &f->filters : NULL; break;
        case 'e': slot = key_eq(k + 1, "nabled") ? &f->enabled : NULL; break;
        case 'm': slot = key_eq(k + 1, "etadata") ? &f->metadata : NULL; break;
        default: break;
        }
        if (slot && !*slot)
            *slot = c;
    }
}

static int required_string(const cJSON *v, const char *key, const char *path,
                           const char **out, sy_error *err) {
    if (v && sy__def_is_string(v) && *v->valuestring) {
        *out = v->valuestring;
        return 0;
    }
    char p[256];
    sy__path_join(p, sizeof p, path, key);
    if (!v || sy__def_is_null(v))
        return sy__error_set(err, SY_EMISSING, p, "%s is missing", key);
    if (!sy__def_is_string(v))
        return sy__error_set(err, SY_ETYPE, p, "%s must be a string", key);
    return sy__error_set(err, SY_EMISSING, p, "%s is empty", key);
}

static int fill_route(const sy__def_ctx *ctx, struct sy_route *r, sy__arena *ea,
                      const route_fields *f, const char *path, sy_error *err) {
    char p[256];
    const char *id, *uri;
    int rc = required_string(f->id, "id", path, &id, err);
    if (rc)
        return rc;
    if (!(r->id = sy__route_strdup(r, id)))
        return sy__error_set(err, SY_ENOMEM, path, "out of memory");
    if ((rc = required_string(f->uri, "uri", path, &uri, err)))
        return rc;
    if (!(r->uri = sy__route_strdup(r, uri)))
        return sy__error_set(err, SY_ENOMEM, path, "out of memory");
    if ((rc = parse_uri(r, "", err))) {
        if (err) /* its errors are the uri's: named here, not per call */
            sy__path_join(err->path, sizeof err->path, path, "uri");
        return rc;
    }
    if ((rc = build_order(r, f->order, path, err)))
        return rc;
    /* the entries' path ("routes[3].predicates[1]") only names errors:
     * built without it, and once more with it when they fail */
    rc = sy__def_build_entries_in(ctx, r, ea, SY_FACTORY_PREDICATE,
                                  f->predicates, NULL, err);
    if (rc) {
        sy__path_join(p, sizeof p, path, "predicates");
        rc = sy__def_build_entries_in(ctx, r, ea, SY_FACTORY_PREDICATE,
                                      f->predicates, p, err);
    }
    if (rc)
        return rc;
    rc = sy__def_build_entries_in(ctx, r, NULL, SY_FACTORY_FILTER, f->filters,
                                  NULL, err);
    if (rc) {
        sy__path_join(p, sizeof p, path, "filters");
        rc = sy__def_build_entries_in(ctx, r, NULL, SY_FACTORY_FILTER,
                                      f->filters, p, err);
    }
    if (rc)
        return rc;
    rc = sy__def_build_metadata(r, f->metadata, path, ctx->alloc, err);
    if (!rc)
        rc = sy__def_build_enabled(r, f->enabled, path, err);
    if (!rc && sy__route_check_select(r, path, err, err ? 1 : 0))
        rc = SY_EARG;
    return rc;
}

/* Compile, moving errors of shortcut entries to the entry's path. */
static int compile_route(const sy__def_ctx *ctx, struct sy_route *r,
                         const char *path, sy_error *err) {
    sy_error local; /* as sy__error_clear leaves it, without writing all
                       its ~500 bytes per route */
    local.code = 0;
    local.line = local.column = 0;
    local.offset = 0;
    local.path[0] = local.message[0] = '\0';
    sy__compile_env env = {r->alloc, ctx->registry, ctx->regex_cache, NULL,
                           ctx->host_runs};
    int rc = sy__route_compile(r, &env, path, &local);
    if (!rc)
        return 0;
    char p[256];
    const char *sep = *path ? "." : "";
    for (size_t i = 0; i < r->predicate_count; i++) {
        sy__def_path(p, sizeof p, "%s%spredicates[%zu]", path, sep, i);
        if (r->predicates[i].shortcut)
            sy__def_shortcut_error(&local, p);
    }
    for (size_t i = 0; i < r->more->filter_count; i++) {
        sy__def_path(p, sizeof p, "%s%sfilters[%zu]", path, sep, i);
        if (r->more->filters[i].shortcut)
            sy__def_shortcut_error(&local, p);
    }
    if (local.code == 0)
        local.code = rc;
    if (err)
        *err = local;
    return rc;
}

/* The separator of a Path or Host predicate named by `name` (up to '='
 * or the end), else 0. */
static char pattern_sep(const char *name) {
    if ((name[0] != 'P' && name[0] != 'H') || !name[1] || !name[2] ||
        !name[3] || (name[4] != '=' && name[4]))
        return 0;
    if (memcmp(name, "Path", 4) == 0)
        return '/';
    if (memcmp(name, "Host", 4) == 0)
        return '.';
    return 0;
}

/* What count_text found in argument texts. */
typedef struct text_counts {
    size_t commas, seps, braces;
    size_t regex;  /* pieces that may make a regex */
    size_t rooted; /* list items that start with '/' (after blanks) */
} text_counts;

static bool item_rooted(const char *s) {
    while (*s == ' ')
        s++;
    return *s == '/';
}

/* What count_text adds a byte of a pattern predicate's text: four 16-bit
 * counts in a word (',', the separator, '{', the globs "{}*?"), one
 * table a separator, so a byte costs a load and an add. */
#define T_COMMA 1ull
#define T_SEP (1ull << 16)
#define T_BRACE (1ull << 32)
#define T_GLOB (1ull << 48)
static const uint64_t text_add_path[256] = {
    [','] = T_COMMA, ['/'] = T_SEP,  ['{'] = T_BRACE | T_GLOB,
    ['}'] = T_GLOB,  ['*'] = T_GLOB, ['?'] = T_GLOB,
};
static const uint64_t text_add_host[256] = {
    [','] = T_COMMA, ['.'] = T_SEP,  ['{'] = T_BRACE | T_GLOB,
    ['}'] = T_GLOB,  ['*'] = T_GLOB, ['?'] = T_GLOB,
};

/* One pass over an argument text: its ',' (list items) and, for a
 * pattern predicate (`sep` '/' or '.', not 0), its `sep` and '{'
 * characters, the items that start with '/' and the pieces that may make
 * a regex; returns its length. */
static size_t count_text(const char *s, char sep, text_counts *tc) {
    const char *p = s;
    if (!sep) { /* the list items only */
        while ((p = strchr(p, ',')))
            tc->commas++, p++;
        return strlen(s);
    }
    const uint64_t *add = sep == '/' ? text_add_path : text_add_host;
    size_t len = strlen(s), n[4];
    sy__count_classes4((const unsigned char *)s, len, add, n);
    size_t commas = n[0], glob = n[3];
    tc->seps += n[1];
    tc->braces += n[2];
    tc->commas += commas;
    tc->rooted += item_rooted(s);
    for (p = s; commas && (p = strchr(p, ',')); p++, commas--)
        tc->rooted += item_rooted(p + 1);
    if (glob) /* the pieces that may make a regex (a match context each) */
        tc->regex += sy__pattern_regex_pieces(s, len, sep, true, glob);
    return len;
}

/* A Method shortcut's text names standard methods only (in any case,
 * blanks around them): its compiled predicate keeps none of its text. */
static bool standard_methods(const char *s) {
    static const char *const names[] = {"GET",     "HEAD",  "POST",
                                        "PUT",     "PATCH", "DELETE",
                                        "OPTIONS", "TRACE", "CONNECT"};
    static const unsigned char lens[] = {3, 4, 4, 3, 5, 6, 7, 5, 7};
    for (;;) {
        while (*s == ' ')
            s++;
        size_t n = 0;
        while (s[n] && s[n] != ',' && s[n] != ' ')
            n++;
        /* the length and the first letter (either case) before the
         * case-blind compare */
        char c0 = (char)(s[0] & ~0x20);
        bool known = false;
        for (size_t i = 0; i < sizeof names / sizeof *names && !known; i++)
            known = lens[i] == n && names[i][0] == c0 &&
                    strncasecmp(names[i], s, n) == 0;
        if (!known)
            return false;
        s += n;
        while (*s == ' ')
            s++;
        if (!*s)
            return true;
        if (*s++ != ',')
            return false;
    }
}

/* What a predicate adds to the fixed share per entry: an argument
 * (sy_kv) per value past the first, its compiled patterns (one per list
 * item: more than there are otherwise) and, for a shortcut, the text it
 * keeps (*text: its arguments; a compiled Header, Query, Cookie or Weight
 * keeps a name too, patterns borrow theirs). *one: a Path or Host
 * shortcut of one pattern. */
static size_t predicate_estimate(const cJSON *c, size_t *text, bool *one) {
    char sep;
    text_counts tc = {0, 0, 0, 0, 0};
    *one = false;
    if (sy__def_is_string(c)) {
        const char *eq = strchr(c->valuestring, '=');
        sep = pattern_sep(c->valuestring);
        size_t len = count_text(eq ? eq + 1 : c->valuestring, sep, &tc);
        /* "Path=..." or "Host=..." of one pattern: the entry
         * sy__route_pred_entry rebuilds from the compiled pattern */
        *one = sep && eq == c->valuestring + 4 && !tc.commas;
        /* a pattern borrows its text; a Method of standard ones keeps no
         * text; others may keep a name too */
        bool bare = sep || (strncmp(c->valuestring, "Method=", 7) == 0 &&
                            standard_methods(c->valuestring + 7));
        *text += (bare ? len + 1 : 2 * (len + 1) + 8) + tc.commas;
        return tc.commas * sizeof(sy_kv) +
               (sep ? sy__pattern_bytes_max(tc.commas + 1, tc.rooted, tc.seps,
                                            tc.braces, tc.regex, sep == '.') +
                          (tc.commas ? (tc.commas + 1) * sizeof(void *) : 0)
                    : 0);
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(c, "args");
    sep = sy__def_is_string(name) ? pattern_sep(name->valuestring) : 0;
    size_t values = 0;
    for (const cJSON *a = args ? args->child : NULL; a; a = a->next) {
        if (sy__def_is_string(a) || sy__def_is_number(a) || cJSON_IsBool(a))
            values++;
        if (sy__def_is_string(a))
            count_text(a->valuestring, sep, &tc);
        for (const cJSON *v = sy__def_is_array(a) ? a->child : NULL; v;
             v = v->next) {
            values++;
            if (sy__def_is_string(v))
                count_text(v->valuestring, sep, &tc);
        }
    }
    size_t n = values > 1 ? (values - 1) * sizeof(sy_kv) : 0;
    if (sep)
        n += sy__pattern_bytes_max(values + tc.commas, tc.rooted, tc.seps,
                                   tc.braces, tc.regex, sep == '.') +
             (values + tc.commas > 1 ? (values + tc.commas) * sizeof(void *)
                                     : 0);
    return n;
}

/* The strings a compiled filter keeps in the route's arena, about: its
 * arguments reworked (twice their text at most: a rewrite's pattern and
 * replacement), its name. */
static size_t filter_estimate(const cJSON *c) {
    if (sy__def_is_string(c))
        return 2 * (strlen(c->valuestring) + 4);
    size_t n = 16;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "name");
    if (sy__def_is_string(name))
        n += strlen(name->valuestring) + 1;
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(c, "args");
    for (const cJSON *a = args ? args->child : NULL; a; a = a->next) {
        size_t k = a->string ? strlen(a->string) + 2 : 2;
        if (sy__def_is_string(a))
            n += 2 * (k + strlen(a->valuestring));
        for (const cJSON *v = sy__def_is_array(a) ? a->child : NULL; v;
             v = v->next)
            if (sy__def_is_string(v))
                n += 2 * (k + strlen(v->valuestring));
    }
    return n;
}

/* predicate_estimate of predicate i, c, of the route: a shortcut text
 * the memo holds gives the share it keeps, once it has one; its lookup
 * is kept for the entry's build (sy__memo_pre). */
static size_t memo_estimate(sy__def_memo *memo, size_t i, const cJSON *c,
                            size_t *text, bool *one) {
    if (!memo || !sy__def_is_string(c) || i >= SY_MEMO_HINTS)
        return predicate_estimate(c, text, one);
    sy__memo_pre *pre = &memo->pre[i];
    pre->item = c;
    pre->len = strlen(c->valuestring);
    pre->slot = sy__def_memo_find(memo, SY_FACTORY_PREDICATE, c->valuestring,
                                  pre->len, &pre->hash);
    memo->pre_n = i + 1;
    sy__memo_slot *s = pre->slot;
    if (s && s->est_set) {
        *text += s->est_text;
        *one = s->est_one;
        return s->est_n;
    }
    size_t t0 = *text, n = predicate_estimate(c, text, one);
    if (s && n <= UINT32_MAX && *text - t0 <= UINT32_MAX) {
        s->est_n = (uint32_t)n;
        s->est_text = (uint32_t)(*text - t0);
        s->est_one = *one;
        s->est_set = true;
    }
    return n;
}

/* What a route built from `obj` will hold in its arena, about: its text
 * (ids, values and the uri's parts are copied from it: fewer bytes than
 * its JSON spelling), per predicate and filter its entry, args, compiled
 * object (and a filter's slot), and the compiled patterns of Path and Host
 * predicates. *drop: every predicate is a one-pattern Path or Host
 * shortcut, so the route will keep no predicate entries (counted out).
 * A route that holds more gets another chunk. */
static size_t arena_estimate(const sy__def_ctx *ctx, const route_fields *f,
                             bool *drop) {
    size_t json = ctx->text_len ? ctx->text_len : 256;
    /* the text: for the common route of an id, a uri and shortcut
     * predicates, from the strings themselves (the id, the uri and its
     * host or authority, the predicates' texts); else the JSON text's
     * length, which holds all of them */
    bool simple = !f->filters && !f->metadata && sy__def_is_string(f->id) &&
                  sy__def_is_string(f->uri) &&
                  (!f->predicates || sy__def_is_array(f->predicates));
    size_t text = 0, n = 0;
    if (simple) {
        const char *uri = f->uri->valuestring, *slashes = strstr(uri, "//");
        const char *auth = slashes ? slashes + 2 : uri;
        size_t alen = authority_len(auth);
        text = strlen(f->id->valuestring) + 1 + strlen(uri) + 1;
        if (auth[0] == '[' || memchr(auth, '@', alen)) {
            /* rare: at most the authority twice */
            text += 2 * (alen + 9);
        } else {
            /* as parse_uri keeps them: the host, unless it ends the uri
             * (then the uri's own bytes); the Host header to send, unless
             * it is the host (no port) or the uri's "host:port" ending it,
             * else built: "host:port" at most as long as the uri spells it */
            const char *colon = memchr(auth, ':', alen);
            size_t hl = colon ? (size_t)(colon - auth) : alen;
            text += auth[hl] ? hl + 1 : 0;
            if (colon && auth[alen]) {
                bool secure = strncasecmp(uri, "https:", 6) == 0 ||
                              strncasecmp(uri, "wss:", 4) == 0;
                long port = strtol(colon + 1, NULL, 10);
                text += port != (secure ? 443 : 80) ? alen + 1 : 0;
            }
        }
    }
    size_t entries = 0;
    if (ctx->memo)
        ctx->memo->pre_n = 0;
    *drop = sy__def_is_array(f->predicates) && f->predicates->child;
    if (sy__def_is_array(f->predicates)) {
        size_t i = 0;
        for (const cJSON *c = f->predicates->child; c; c = c->next, i++) {
            bool one;
            simple = simple && sy__def_is_string(c);
            /* the compiled object (in a row with the route's others: no
             * slot); the entry and an argument */
            n += SY_PRED_OBJECT_BYTES +
                 memo_estimate(ctx->memo, i, c, &text, &one);
            entries += sizeof(sy__def_entry) + sizeof(sy_kv);
            *drop = *drop && one;
        }
    }
    if (!*drop)
        n += entries;
    n += simple && text < json ? text : json;
    /* a route's own `more`: metadata, filters, an lb:ws uri's selection */
    if (f->filters || f->metadata ||
        (sy__def_is_string(f->uri) &&
         strncmp(f->uri->valuestring, "lb:ws", 5) == 0))
        n += sizeof(sy__route_more);
    if (sy__def_is_array(f->filters)) {
        for (const cJSON *c = f->filters->child; c; c = c->next)
            n += sizeof(sy__def_entry) + 32 + 8 + SY_FILTER_OBJECT_BYTES +
                 filter_estimate(c);
    }
    return n;
}

/* After compiling a route built with its predicate entries outside its
 * arena: none kept when the compiled patterns give them back exactly,
 * else (unforeseen by the estimate) copied into its arena. False: out of
 * memory. */
static bool keep_entries(struct sy_route *r) {
    if (sy__route_entries_rebuildable(r)) {
        r->predicates = NULL;
        return true;
    }
    size_t n = r->predicate_count, args = 0;
    for (size_t i = 0; i < n; i++)
        args += r->predicates[i].arg_count;
    sy__def_entry *es = sy__arena_alloc(&r->arena, n * sizeof *es);
    sy_kv *kv = args ? sy__arena_alloc(&r->arena, args * sizeof *kv) : NULL;
    if (!es || (args && !kv))
        return false;
    for (size_t i = 0; i < n; i++) {
        es[i] = r->predicates[i];
        if (es[i].arg_count) {
            memcpy(kv, es[i].args, es[i].arg_count * sizeof *kv);
            es[i].args = kv;
            kv += es[i].arg_count;
        }
    }
    r->predicates = es;
    return true;
}

int sy__def_build_route(const sy__def_ctx *ctx, const cJSON *obj,
                        const char *path, struct sy_route **out,
                        sy_error *err) {
    *out = NULL;
    if (!sy__def_is_object(obj))
        return sy__error_set(err, SY_ETYPE, path, "a route must be an object");
    route_fields f;
    find_fields(obj, &f);
    bool drop;
    struct sy_route *r =
        sy__route_new_sized(ctx->alloc, arena_estimate(ctx, &f, &drop));
    if (!r)
        return sy__error_set(err, SY_ENOMEM, path, "out of memory");
    /* a route that will keep no predicate entries builds them here, on
     * the stack (a chunk of the allocator's past a few predicates) */
    enum { STACK = 8 * (sizeof(sy__def_entry) + sizeof(sy_kv)) };
    _Alignas(8) unsigned char stack[sizeof(sy__arena_chunk) + STACK];
    sy__arena_chunk *first = (sy__arena_chunk *)(void *)stack;
    sy__arena ea;
    if (drop) {
        *first = (sy__arena_chunk){NULL, STACK, 0};
        ea = (sy__arena){ctx->alloc, first, STACK, 0};
    }
    int rc = fill_route(ctx, r, drop ? &ea : NULL, &f, path, err);
    /* the fingerprint is stored last: it lies over the header of the
     * arena's first chunk, which the compile still allocates from */
    uint64_t fp = 0;
    sy__buf own;
    /* needed now only to share a live route; else left to its first
     * reader (sy__def_route_fp): a first document writes no canonical */
    if (!rc && ctx->reuse) {
        sy__buf *b = ctx->scratch;
        if (!b)
            sy__buf_init(b = &own, r->alloc);
        if (sy__def_canonicalize_memo(r, b, ctx->memo, &fp))
            rc = sy__error_set(err, SY_ENOMEM, path, "out of memory");
        if (b == &own)
            sy__buf_free(&own);
    }
    const struct sy_route *same =
        !rc && ctx->reuse ? ctx->reuse(ctx->reuse_data, r->id, fp) : NULL;
    if (same && sy__def_route_fp(same) == fp) {
        /* already compiled and live: share it */
        sy__route_unref(r);
        r = sy__route_ref(same);
    } else {
        if (!rc)
            rc = compile_route(ctx, r, path, err);
        if (!rc && drop && !keep_entries(r))
            rc = sy__error_set(err, SY_ENOMEM, path, "out of memory");
        if (rc) {
            sy__route_unref(r);
            r = NULL;
        } else {
            r->fingerprint = fp;
        }
    }
    if (drop && ea.head != first) { /* the stack chunk is the oldest: out
                                       before the free */
        sy__arena_chunk **c = &ea.head;
        while (*c != first)
            c = &(*c)->next;
        *c = NULL;
        sy__arena_free(&ea);
    }
    *out = r;
    return rc;
}
