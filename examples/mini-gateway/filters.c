/*
 * filters.c - SCG filters the library does not know, registered with it
 * as host filters (sy_registry_add_filter: their args validated at apply,
 * the entries handed over per request) and run here:
 *
 *   SecureHeaders    the response gets SCG's eight security headers
 *                    unless the upstream sent them; each value settable
 *                    by its arg (xssProtectionHeader, strictTransportSecurity,
 *                    frameOptions, contentTypeOptions, referrerPolicy,
 *                    contentSecurityPolicy, downloadOptions,
 *                    permittedCrossDomainPolicies).
 *   FallbackHeaders  on the route a breaker's fallback reached: the request
 *                    sent upstream gets the failure's exception type and
 *                    message, and its root cause's, as headers
 *                    (executionExceptionTypeHeaderName, ...MessageHeaderName,
 *                    rootCauseExceptionTypeHeaderName, ...MessageHeaderName
 *                    name them).
 *
 * Any other arg, or a shortcut value (neither takes one), is refused with
 * its path.
 */
#define _DEFAULT_SOURCE
#include "proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct field {
    const char *arg, *header, *dflt;
} field;

static const field secure[] = {
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

/* arg: the name of the header carrying what; dflt: its default name */
static const field fallback[] = {
    {"executionExceptionTypeHeaderName", "type", "Execution-Exception-Type"},
    {"executionExceptionMessageHeaderName", "message",
     "Execution-Exception-Message"},
    {"rootCauseExceptionTypeHeaderName", "root-type",
     "Root-Cause-Exception-Type"},
    {"rootCauseExceptionMessageHeaderName", "root-message",
     "Root-Cause-Exception-Message"},
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

/* Every arg must be one of the fields; header names (`names`) tokens,
 * header values without CR/LF. */
static int check(const field *fs, bool names, const sy_kv *args, size_t n,
                 sy_error *err) {
    for (size_t i = 0; i < n; i++) {
        const field *f = fs;
        while (f->arg && strcmp(f->arg, args[i].key) != 0)
            f++;
        const char *v = args[i].value, *why = NULL;
        if (!f->arg)
            why = strncmp(args[i].key, "_genkey_", 8) == 0
                      ? "takes no shortcut value (use the object form)"
                      : "unknown argument";
        else if (names && !token(v))
            why = "must be a header name";
        else if (!names && strpbrk(v, "\r\n"))
            why = "must not contain CR or LF";
        if (why) {
            memset(err, 0, sizeof *err);
            err->code = SY_EARG;
            snprintf(err->path, sizeof err->path, "args.%s", args[i].key);
            snprintf(err->message, sizeof err->message, "%s", why);
            return SY_EARG;
        }
    }
    return 0;
}

static int check_secure(void *data, const sy_kv *args, size_t n,
                        sy_error *err) {
    (void)data;
    return check(secure, false, args, n, err);
}

static int check_fallback(void *data, const sy_kv *args, size_t n,
                          sy_error *err) {
    (void)data;
    return check(fallback, true, args, n, err);
}

static sy_registry *registry;

const sy_registry *gw_registry(void) {
    if (registry)
        return registry;
    sy_error err;
    sy_filter_factory sf = {NULL, SY_SHORTCUT_DEFAULT, check_secure, NULL};
    sy_filter_factory ff = {NULL, SY_SHORTCUT_DEFAULT, check_fallback, NULL};
    if (sy_registry_new(NULL, &registry, &err) ||
        sy_registry_add_filter(registry, "SecureHeaders", &sf, &err) ||
        sy_registry_add_filter(registry, "FallbackHeaders", &ff, &err)) {
        gw_log("registry: %s", err.message);
        sy_registry_free(registry);
        registry = NULL;
    }
    return registry;
}

static const char *arg_or(const sy_filter_entry *e, const char *key,
                          const char *dflt) {
    for (size_t i = 0; i < e->arg_count; i++)
        if (strcmp(e->args[i].key, key) == 0)
            return e->args[i].value;
    return dflt;
}

/* What a fallback gets told about the failure, as SCG's Resilience4j
 * breaker names it. */
static void failure(const gw_request *q, const char **type, char *msg,
                    size_t cap, const char **root, const char **root_msg) {
    *root = *type = "java.util.concurrent.TimeoutException";
    *root_msg = msg;
    switch (q->fb_kind) {
    case GW_FB_OPEN:
        *root = *type = "io.github.resilience4j.circuitbreaker."
                        "CallNotPermittedException";
        snprintf(msg, cap,
                 "CircuitBreaker '%s' is OPEN and does not permit further "
                 "calls",
                 q->permit.name ? q->permit.name : "");
        break;
    case GW_FB_STATUS:
        *root = *type = "org.springframework.cloud.gateway.filter.factory."
                        "SpringCloudCircuitBreakerFilterFactory$"
                        "CircuitBreakerStatusCodeException";
        snprintf(msg, cap, "%d %s", q->fb_status, gw_status_text(q->fb_status));
        break;
    case GW_FB_CONNECT:
        *root = *type = "java.net.ConnectException";
        snprintf(msg, cap, "Connection refused");
        break;
    default:
        snprintf(msg, cap,
                 "Did not observe any item or terminal signal "
                 "within the time limit");
        break;
    }
}

void gw_host_filters(gw_request *q, sy_match *m) {
    size_t n = sy_match_host_filter_count(m);
    for (size_t i = 0; i < n; i++) {
        const sy_filter_entry *e = sy_match_host_filter(m, i);
        if (strcmp(e->name, "SecureHeaders") == 0) {
            for (const field *f = secure; f->arg; f++)
                gw_buf_printf(&q->xhdrs, "%s: %s\r\n", f->header,
                              arg_or(e, f->arg, f->dflt));
        } else if (strcmp(e->name, "FallbackHeaders") == 0 && q->fb_kind) {
            const char *type, *root, *root_msg;
            char msg[256];
            failure(q, &type, msg, sizeof msg, &root, &root_msg);
            const char *v[4] = {type, msg, root, root_msg};
            for (size_t k = 0; k < 4; k++)
                gw_buf_printf(&q->req_xhdrs, "%s: %s\r\n",
                              arg_or(e, fallback[k].arg, fallback[k].dflt),
                              v[k]);
        }
    }
}
