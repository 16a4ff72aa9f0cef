/*
 * host_runs.c - the host-run items and the hosts' lists (host_runs.h,
 * sy_host_runs_all, sy_host_profile). The lists of the project's own
 * hosts live here, in one place: the mini-gateway and the nginx module
 * pass them as sy_router_options.host_runs, and `switchyard check --host`
 * checks documents against them.
 */
#include "policy/host_runs.h"

#include <stdio.h>

static const char *const all_items[] = {"RequestRateLimiter",
                                        "CircuitBreaker",
                                        "Retry",
                                        "RewriteLocationResponseHeader",
                                        "forward:",
                                        "https:",
                                        "ws:",
                                        "wss:",
                                        "metadata.cors",
                                        "metadata.response-timeout",
                                        "metadata.connect-timeout",
                                        NULL};

/* examples/mini-gateway: it speaks plain HTTP upstream (no TLS client), so
 * an https:// route is refused at apply rather than answered 502 */
static const char *const gateway_runs[] = {"host=gateway",
                                           "RequestRateLimiter",
                                           "!RequestRateLimiter.principal",
                                           "!RequestHeader.forwarding",
                                           "CircuitBreaker",
                                           "Retry",
                                           "RewriteLocationResponseHeader",
                                           "forward:",
                                           "metadata.cors",
                                           "metadata.response-timeout",
                                           "metadata.connect-timeout",
                                           NULL};

/* examples/nginx-module: its tries follow one another at once (nginx's
 * upstream machinery has no wait between them); a connect failure is
 * nginx's 502 once its breaker learns of it (no empty 200 of SCG's
 * resumeWithoutError); its fallback is the fallbackUri's path as written
 * (no {variables} expanded) */
static const char *const nginx_runs[] = {"host=nginx",
                                         "RequestRateLimiter",
                                         "!RequestRateLimiter.principal",
                                         "CircuitBreaker",
                                         "!CircuitBreaker.resumeWithoutError",
                                         "!CircuitBreaker.fallbackUriVariables",
                                         "Retry",
                                         "!Retry.backoff",
                                         "forward:",
                                         "https:",
                                         "ws:",
                                         "wss:",
                                         "metadata.response-timeout",
                                         "metadata.connect-timeout",
                                         NULL};

/* The parts a host may exclude ("!PART"): what the library refuses at an
 * arg when the host lists them (route.c's host check). */
static const char *const parts[] = {"Retry.backoff",
                                    "CircuitBreaker.resumeWithoutError",
                                    "CircuitBreaker.fallbackUriVariables",
                                    "RequestRateLimiter.principal",
                                    "RequestHeader.forwarding",
                                    NULL};

int sy__host_runs_check(const char *const *runs, sy_error *err) {
    for (size_t i = 0; runs && runs[i]; i++) {
        const char *e = runs[i];
        bool ok = false;
        if (strncmp(e, "host=", 5) == 0)
            ok = e[5] != '\0';
        for (size_t k = 0; !ok && e[0] == '!' && parts[k]; k++)
            ok = strcmp(e + 1, parts[k]) == 0;
        for (size_t k = 0; !ok && all_items[k]; k++)
            ok = strcmp(e, all_items[k]) == 0;
        if (!ok)
            return sy__error_set(
                err, SY_EINVAL, "",
                "host_runs[%zu]: '%.80s' is not a host-run item "
                "(sy_host_runs_all()), \"host=NAME\" or a \"!PART\" "
                "(\"!Retry.backoff\", ...: the list in docs/policies.md)",
                i, e);
    }
    return 0;
}

const char *const *sy_host_runs_all(void) {
    return all_items;
}

const char *const *sy_host_profile(const char *host) {
    if (!host)
        return NULL;
    if (strcmp(host, "gateway") == 0)
        return gateway_runs;
    if (strcmp(host, "nginx") == 0)
        return nginx_runs;
    return NULL;
}

static const char *find(const char *prefix, const char *name) {
    size_t pl = strlen(prefix);
    for (size_t i = 0; all_items[i]; i++) {
        const char *it = all_items[i];
        if (pl && strncmp(it, prefix, pl) != 0)
            continue;
        if (!strcmp(prefix, "") && strchr(it, ':'))
            continue;
        if (!strcmp(prefix, "") && !strncmp(it, "metadata.", 9))
            continue;
        size_t nl = strlen(it) - pl;
        if (!strcmp(prefix, "")
                ? strcmp(it, name) == 0
                : strncmp(it + pl, name, nl) == 0 && name[nl] == '\0')
            return it;
    }
    return NULL;
}

const char *sy__host_item_filter(const char *name) {
    return name ? find("", name) : NULL;
}

const char *sy__host_item_scheme(const char *scheme) {
    if (!scheme)
        return NULL;
    for (size_t i = 0; all_items[i]; i++) {
        const char *it = all_items[i];
        size_t n = strlen(it);
        if (it[n - 1] == ':' && strlen(scheme) == n - 1 &&
            strncmp(it, scheme, n - 1) == 0)
            return it;
    }
    return NULL;
}

const char *sy__host_item_metadata(const char *key) {
    return key ? find("metadata.", key) : NULL;
}

bool sy__host_runs(const char *const *runs, const char *item) {
    if (!runs)
        return true;
    for (size_t i = 0; runs[i]; i++)
        if (strcmp(runs[i], item) == 0)
            return true;
    return false;
}

bool sy__host_excludes(const char *const *runs, const char *part) {
    for (size_t i = 0; runs && runs[i]; i++)
        if (runs[i][0] == '!' && strcmp(runs[i] + 1, part) == 0)
            return true;
    return false;
}

const char *sy__host_name(const char *const *runs, char *buf, size_t cap) {
    for (size_t i = 0; runs && runs[i]; i++)
        if (strncmp(runs[i], "host=", 5) == 0) {
            snprintf(buf, cap, "host '%s'", runs[i] + 5);
            return buf;
        }
    snprintf(buf, cap, "this host");
    return buf;
}
