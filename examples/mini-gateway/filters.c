/*
 * filters.c - SCG filters the library does not know, registered with it
 * as host filters (their names, args and checks at apply in
 * host_filters.c, shared with `switchyard check --host gateway`; the
 * entries handed over per request) and run here:
 *
 *   SecureHeaders    the response gets SCG's eight security headers
 *                    unless the upstream sent them or the route's disable
 *                    list names them; each value settable by its arg;
 *                    Permissions-Policy too with enable: permissions-policy.
 *   FallbackHeaders  on the route a breaker's fallback reached: the request
 *                    sent upstream gets the failure's exception type and
 *                    message, and its root cause's, as headers (their
 *                    names settable by its args).
 *   CacheRequestBody the request body is kept (up to --retry-body-bytes)
 *                    as for a retry (policy.c).
 */
#define _DEFAULT_SOURCE
#include "host_filters.h"
#include "proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sy_registry *registry;

const sy_registry *gw_registry(void) {
    if (registry)
        return registry;
    sy_error err;
    if (sy_registry_new(NULL, &registry, &err) ||
        gw_host_filters_register(registry, &err)) {
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

static const char *relaxed_or(const sy_filter_entry *e, const char *name,
                              const char *dflt) {
    const char *v = gw_filter_arg(e, name);
    return v ? v : dflt;
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

bool gw_caches_body(sy_match *m) {
    size_t n = sy_match_host_filter_count(m);
    for (size_t i = 0; i < n; i++)
        if (strcmp(sy_match_host_filter(m, i)->name, "CacheRequestBody") == 0)
            return true;
    return false;
}

void gw_host_filters(gw_request *q, sy_match *m) {
    size_t n = sy_match_host_filter_count(m);
    for (size_t i = 0; i < n; i++) {
        const sy_filter_entry *e = sy_match_host_filter(m, i);
        if (strcmp(e->name, "SecureHeaders") == 0) {
            const char *off = gw_filter_arg(e, "disable");
            const char *on = gw_filter_arg(e, "enable");
            for (const gw_filter_field *f = gw_secure_fields; f->arg; f++)
                if (!gw_list_has(off, f->header))
                    gw_buf_printf(&q->xhdrs, "%s: %s\r\n", f->header,
                                  relaxed_or(e, f->arg, f->dflt));
            const gw_filter_field *pp = &gw_permissions_policy;
            if (gw_list_has(on, "permissions-policy"))
                gw_buf_printf(&q->xhdrs, "%s: %s\r\n", pp->header,
                              relaxed_or(e, pp->arg, pp->dflt));
        } else if (strcmp(e->name, "FallbackHeaders") == 0 && q->fb_kind) {
            const char *type, *root, *root_msg;
            char msg[256];
            failure(q, &type, msg, sizeof msg, &root, &root_msg);
            const char *v[4] = {type, msg, root, root_msg};
            for (size_t k = 0; k < 4; k++)
                gw_buf_printf(&q->req_xhdrs, "%s: %s\r\n",
                              arg_or(e, gw_fallback_fields[k].arg,
                                     gw_fallback_fields[k].dflt),
                              v[k]);
        }
    }
}
