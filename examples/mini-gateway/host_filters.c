/*
 * host_filters.c - what the mini-gateway's own filters are and accept
 * (host_filters.h): names, args and their checks at apply, shared by the
 * gateway (filters.c runs them) and `switchyard check --host gateway`.
 *
 *   SecureHeaders     args: xssProtectionHeader, strictTransportSecurity,
 *                     frameOptions, contentTypeOptions, referrerPolicy,
 *                     contentSecurityPolicy, downloadOptions,
 *                     permittedCrossDomainPolicies (header values);
 *                     disable (lowercase names of those headers), enable
 *                     (permissions-policy) and permissionsPolicy, as SCG's
 *                     route args; names in Spring's relaxed forms
 *                     (frame-options = frameOptions).
 *   FallbackHeaders   args: executionExceptionTypeHeaderName,
 *                     ...MessageHeaderName, rootCauseExceptionTypeHeaderName,
 *                     ...MessageHeaderName (header names).
 *   CacheRequestBody  arg: bodyClass (a Java class name; shortcut form
 *                     too): the gateway keeps the request body, up to
 *                     --retry-body-bytes, as it does for retries.
 *   LocalResponseCache  args: timeToLive (duration, 5m), size (size, 1MB):
 *                     GET 200 answers kept per route and worker
 *                     (cache.c).
 *
 * Any other arg, or a shortcut value where none is taken, is refused with
 * its path.
 */
#include "host_filters.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

const gw_filter_field gw_secure_fields[] = {
    {"xssProtectionHeader", "X-Xss-Protection", "1 ; mode=block"},
    {"strictTransportSecurity", "Strict-Transport-Security",
     "max-age=631138519"},
    {"frameOptions", "X-Frame-Options", "DENY"},
    {"contentTypeOptions", "X-Content-Type-Options", "nosniff"},
    {"referrerPolicy", "Referrer-Policy", "no-referrer"},
    {"contentSecurityPolicy", "Content-Security-Policy",
     "default-src 'self' https:; font-src 'self' https: data:; img-src "
     "'self' https: data:; object-src 'none'; script-src https:; style-src "
     "'self' https: 'unsafe-inline'"},
    {"downloadOptions", "X-Download-Options", "noopen"},
    {"permittedCrossDomainPolicies", "X-Permitted-Cross-Domain-Policies",
     "none"},
    {NULL, NULL, NULL}};

const gw_filter_field gw_permissions_policy = {
    "permissionsPolicy", "Permissions-Policy",
    "accelerometer=(), ambient-light-sensor=(), autoplay=(), battery=(), "
    "camera=(), cross-origin-isolated=(), display-capture=(), "
    "document-domain=(), encrypted-media=(), "
    "execution-while-not-rendered=(), execution-while-out-of-viewport=(), "
    "fullscreen=(), geolocation=(), gyroscope=(), keyboard-map=(), "
    "magnetometer=(), microphone=(), midi=(), navigation-override=(), "
    "payment=(), picture-in-picture=(), publickey-credentials-get=(), "
    "screen-wake-lock=(), sync-xhr=(), usb=(), web-share=(), "
    "xr-spatial-tracking=()"};

bool gw_arg_is(const char *key, const char *name) {
    for (;;) {
        while (*key == '-' || *key == '_')
            key++;
        if (!*key || !*name)
            return !*key && !*name;
        if ((*key | 0x20) != (*name | 0x20))
            return false;
        key++, name++;
    }
}

/* The next item of a comma-separated list at *p: *p moved to it, its
 * length without trailing blanks in *len; false at the end. */
static bool next_item(const char **p, size_t *len) {
    while (*p && (**p == ' ' || **p == ','))
        (*p)++;
    if (!*p || !**p)
        return false;
    *len = strcspn(*p, ",");
    return true;
}

bool gw_list_has(const char *list, const char *name) {
    size_t n = strlen(name);
    const char *p = list;
    for (size_t len; next_item(&p, &len); p += len) {
        size_t l = len;
        while (l && p[l - 1] == ' ')
            l--;
        if (l == n && strncasecmp(p, name, n) == 0)
            return true;
    }
    return false;
}

const char *gw_filter_arg(const sy_filter_entry *e, const char *name) {
    for (size_t i = 0; i < e->arg_count; i++)
        if (gw_arg_is(e->args[i].key, name))
            return e->args[i].value;
    return NULL;
}

const gw_filter_field gw_fallback_fields[] = {
    {"executionExceptionTypeHeaderName", "type", "Execution-Exception-Type"},
    {"executionExceptionMessageHeaderName", "message",
     "Execution-Exception-Message"},
    {"rootCauseExceptionTypeHeaderName", "root-type",
     "Root-Cause-Exception-Type"},
    {"rootCauseExceptionMessageHeaderName", "root-message",
     "Root-Cause-Exception-Message"},
    {NULL, NULL, NULL}};

static const gw_filter_field cache_body_fields[] = {{"bodyClass", NULL, NULL},
                                                    {NULL, NULL, NULL}};

static bool token(const char *s) {
    if (!*s)
        return false;
    for (; *s; s++)
        if (!strchr("!#$%&'*+-.^_`|~", *s) &&
            !((*s >= '0' && *s <= '9') ||
              ((*s | 0x20) >= 'a' && (*s | 0x20) <= 'z')))
            return false;
    return true;
}

/* A Java class name: dotted identifiers ($ and _ allowed). */
static bool class_name(const char *s) {
    bool start = true;
    for (; *s; s++) {
        bool alpha = ((*s | 0x20) >= 'a' && (*s | 0x20) <= 'z') || *s == '_' ||
                     *s == '$';
        if (*s == '.' && !start)
            start = true;
        else if (alpha || (!start && *s >= '0' && *s <= '9'))
            start = false;
        else
            return false;
    }
    return !start;
}

static int refuse(sy_error *err, const char *key, const char *why) {
    memset(err, 0, sizeof *err);
    err->code = SY_EARG;
    if (key)
        snprintf(err->path, sizeof err->path, "args.%s", key);
    snprintf(err->message, sizeof err->message, "%s", why);
    return SY_EARG;
}

typedef enum kind { HEADER_NAMES, CLASS_NAMES } kind;

/* Every arg must be one of the fields, its value of the kind. */
static int check(const gw_filter_field *fs, kind k, const sy_kv *args, size_t n,
                 sy_error *err) {
    for (size_t i = 0; i < n; i++) {
        const gw_filter_field *f = fs;
        while (f->arg && strcmp(f->arg, args[i].key) != 0)
            f++;
        const char *v = args[i].value, *why = NULL;
        if (!f->arg)
            why = strncmp(args[i].key, "_genkey_", 8) == 0
                      ? "takes no shortcut value (use the object form)"
                      : "unknown argument";
        else if (k == HEADER_NAMES && !token(v))
            why = "must be a header name";
        else if (k == CLASS_NAMES && !class_name(v))
            why = "must be a Java class name (java.lang.String)";
        if (why)
            return refuse(err, args[i].key, why);
    }
    return 0;
}

/* True when the len bytes at p are `name` in lowercase (blanks after). */
static bool lowercase_of(const char *p, size_t len, const char *name) {
    while (len && p[len - 1] == ' ')
        len--;
    if (strlen(name) != len)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c =
            name[i] >= 'A' && name[i] <= 'Z' ? (char)(name[i] | 0x20) : name[i];
        if (p[i] != c)
            return false;
    }
    return true;
}

/* SecureHeaders' disable: a list of the lowercase full names of the
 * headers it adds (SCG compares them lowercase); enable: only
 * permissions-policy; each one-header arg takes a value without CR/LF. A
 * value set for a header the route disables, or a permissionsPolicy
 * without enable, would be accepted and not sent: refused. */
static int check_secure(void *data, const sy_kv *args, size_t n,
                        sy_error *err) {
    (void)data;
    const char *disable = NULL, *enable = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *k = args[i].key;
        if (gw_arg_is(k, "disable"))
            disable = args[i].value;
        else if (gw_arg_is(k, "enable"))
            enable = args[i].value;
    }
    const char *p = disable;
    for (size_t len; next_item(&p, &len); p += len) {
        bool known = false;
        for (const gw_filter_field *f = gw_secure_fields; f->arg; f++)
            known = known || lowercase_of(p, len, f->header);
        if (!known) {
            char why[200];
            snprintf(why, sizeof why,
                     "'%.*s' is not the lowercase name of a header "
                     "SecureHeaders adds (x-frame-options, "
                     "strict-transport-security, ...)",
                     (int)(len > 80 ? 80 : len), p);
            return refuse(err, "disable", why);
        }
    }
    p = enable;
    for (size_t len; next_item(&p, &len); p += len)
        if (!lowercase_of(p, len, "permissions-policy"))
            return refuse(err, "enable",
                          "only permissions-policy can be enabled");
    for (size_t i = 0; i < n; i++) {
        const char *k = args[i].key, *v = args[i].value;
        if (gw_arg_is(k, "disable") || gw_arg_is(k, "enable"))
            continue;
        const gw_filter_field *f = gw_secure_fields;
        while (f->arg && !gw_arg_is(k, f->arg))
            f++;
        const char *header = f->arg ? f->header : NULL;
        if (!f->arg && gw_arg_is(k, gw_permissions_policy.arg))
            header = gw_permissions_policy.header;
        if (!header)
            return refuse(err, k,
                          strncmp(k, "_genkey_", 8) == 0
                              ? "takes no shortcut value (use the object form)"
                              : "unknown argument");
        if (strpbrk(v, "\r\n"))
            return refuse(err, k, "must not contain CR or LF");
        if (f->arg && gw_list_has(disable, header))
            return refuse(err, k,
                          "sets a header the route's disable list leaves "
                          "out");
        if (!f->arg && !gw_list_has(enable, "permissions-policy"))
            return refuse(err, k,
                          "is sent only with enable: permissions-policy");
    }
    return 0;
}

static int check_fallback(void *data, const sy_kv *args, size_t n,
                          sy_error *err) {
    (void)data;
    return check(gw_fallback_fields, HEADER_NAMES, args, n, err);
}

static int check_cache_body(void *data, const sy_kv *args, size_t n,
                            sy_error *err) {
    (void)data;
    return check(cache_body_fields, CLASS_NAMES, args, n, err);
}

/* "<digits>[unit]" with the units given (factor each; the first unit is
 * the one of a bare number). */
static bool scaled(const char *v, const char *const *units,
                   const uint64_t *factors, uint64_t *out) {
    uint64_t n = 0;
    const char *s = v;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (n > (UINT64_MAX - 9) / 10)
            return false;
        n = n * 10 + (uint64_t)(*s - '0');
    }
    if (s == v)
        return false;
    for (size_t i = 0; units[i]; i++)
        if ((!*s && i == 0) || strcasecmp(s, units[i]) == 0) {
            if (factors[i] && n > UINT64_MAX / factors[i])
                return false;
            *out = n * factors[i];
            return true;
        }
    return false;
}

int gw_response_cache_args(const sy_kv *args, size_t n, uint64_t *ttl_ms,
                           uint64_t *size, sy_error *err) {
    static const char *const tu[] = {"ms", "s", "m", "h", "d", NULL};
    static const uint64_t tf[] = {1, 1000, 60000, 3600000, 86400000};
    static const char *const su[] = {"B", "KB", "MB", "GB", NULL};
    static const uint64_t sf[] = {1, 1024, 1024 * 1024, 1024 * 1024 * 1024};
    *ttl_ms = 5 * 60000; /* SCG's default time-to-live */
    *size = 1024 * 1024; /* a bound per route and worker */
    for (size_t i = 0; i < n; i++) {
        const char *k = args[i].key, *v = args[i].value;
        if (strcmp(k, "timeToLive") == 0) {
            if (!scaled(v, tu, tf, ttl_ms) || !*ttl_ms)
                return refuse(err, k,
                              "must be a duration above 0 (30s, 5m, 500ms, "
                              "or milliseconds)");
        } else if (strcmp(k, "size") == 0) {
            if (!scaled(v, su, sf, size) || !*size)
                return refuse(err, k,
                              "must be a size above 0 (500KB, 10MB, or "
                              "bytes)");
        } else {
            return refuse(err, k, "unknown argument");
        }
    }
    return 0;
}

static int check_response_cache(void *data, const sy_kv *args, size_t n,
                                sy_error *err) {
    (void)data;
    uint64_t ttl, size;
    return gw_response_cache_args(args, n, &ttl, &size, err);
}

/* A host that does not run the gateway's own filters (`switchyard check
 * --host nginx`): each is registered with this check, so a route using one
 * is refused at its entry naming the host, not as an unknown filter. */
typedef struct not_run {
    const char *filter, *host;
} not_run;

static int refuse_not_run(void *data, const sy_kv *args, size_t n,
                          sy_error *err) {
    const not_run *nr = data;
    (void)args;
    (void)n;
    memset(err, 0, sizeof *err);
    err->code = SY_ENOTRUN;
    snprintf(err->message, sizeof err->message,
             "%s: host '%s' does not run this filter (the mini-gateway does)",
             nr->filter, nr->host);
    return SY_ENOTRUN;
}

int gw_host_filters_refuse(sy_registry *reg, const char *host, sy_error *err) {
    static const char *const body_class[] = {"bodyClass", NULL};
    static const char *const cache_fields[] = {"timeToLive", "size", NULL};
    static not_run nr[4] = {{"SecureHeaders", NULL},
                            {"FallbackHeaders", NULL},
                            {"CacheRequestBody", NULL},
                            {"LocalResponseCache", NULL}};
    const char *const *fields[4] = {NULL, NULL, body_class, cache_fields};
    int rc = 0;
    for (size_t i = 0; i < 4 && !rc; i++) {
        nr[i].host = host;
        sy_filter_factory f = {fields[i], SY_SHORTCUT_DEFAULT, refuse_not_run,
                               &nr[i]};
        rc = sy_registry_add_filter(reg, nr[i].filter, &f, err);
    }
    return rc;
}

int gw_host_filters_register(sy_registry *reg, sy_error *err) {
    static const char *const body_class[] = {"bodyClass", NULL};
    static const char *const cache_fields[] = {"timeToLive", "size", NULL};
    sy_filter_factory sf = {NULL, SY_SHORTCUT_DEFAULT, check_secure, NULL};
    sy_filter_factory ff = {NULL, SY_SHORTCUT_DEFAULT, check_fallback, NULL};
    sy_filter_factory cf = {body_class, SY_SHORTCUT_DEFAULT, check_cache_body,
                            NULL};
    sy_filter_factory lf = {cache_fields, SY_SHORTCUT_DEFAULT,
                            check_response_cache, NULL};
    int rc = sy_registry_add_filter(reg, "SecureHeaders", &sf, err);
    if (!rc)
        rc = sy_registry_add_filter(reg, "FallbackHeaders", &ff, err);
    if (!rc)
        rc = sy_registry_add_filter(reg, "CacheRequestBody", &cf, err);
    if (!rc)
        rc = sy_registry_add_filter(reg, "LocalResponseCache", &lf, err);
    return rc;
}
