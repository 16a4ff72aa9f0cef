/*
 * route_host_check.c - run or refuse: the host-run items a compiled route
 * uses (filters, the uri's scheme, metadata keys), checked against what a
 * host declared it runs (sy__route_check_host) and listed for the host
 * (sy_route_host_runs); the route's first path filter.
 */
#include "route/route.h"

#include "policy/breaker.h"
#include "policy/host_runs.h"
#include "policy/ratelimit.h"
#include "policy/retry.h"
#include "route/filter.h"

#include <stdio.h>
#include <strings.h>

/* The uri's scheme as host_runs.c names it ("lb:ws" counts as "ws"). */
static const char *uri_scheme_item(const struct sy_route *r) {
    static const char *const names[] = {
        [SY_SCHEME_HTTPS] = "https", [SY_SCHEME_WS] = "ws",
        [SY_SCHEME_WSS] = "wss",     [SY_SCHEME_LB_WS] = "ws",
        [SY_SCHEME_LB_WSS] = "wss",  [SY_SCHEME_FORWARD] = "forward"};
    unsigned s = r->up_scheme;
    return s < SY_ARRAY_LEN(names) && names[s] ? sy__host_item_scheme(names[s])
                                               : NULL;
}

/* Calls fn for each host-run item of r, in route order; stops at and
 * returns fn's first non-zero result. */
static int each_host_item(const struct sy_route *r,
                          int (*fn)(void *data, const char *item, int where,
                                    size_t i),
                          void *data) {
    int rc;
    for (size_t i = 0; i < r->more->filter_count; i++) {
        const sy__def_entry *e = &r->more->filters[i];
        const char *it = e->host ? NULL : sy__host_item_filter(sy__def_name(e));
        if (it && (rc = fn(data, it, 0, i)))
            return rc;
    }
    const char *it = uri_scheme_item(r);
    if (it && (rc = fn(data, it, 1, 0)))
        return rc;
    for (size_t i = 0; i < r->more->metadata_count; i++) {
        it = sy__host_item_metadata(r->more->metadata[i].key);
        if (it && (rc = fn(data, it, 2, i)))
            return rc;
    }
    return 0;
}

typedef struct host_check {
    const struct sy_route *r;
    const char *const *runs;
    const char *path, *filters_path;
    sy_error *err;
} host_check;

static int check_item(void *data, const char *item, int where, size_t i) {
    host_check *c = data;
    if (sy__host_runs(c->runs, item))
        return 0;
    char p[300], who[128];
    sy__host_name(c->runs, who, sizeof who);
    if (where == 0) {
        snprintf(p, sizeof p, "%s[%zu]", c->filters_path, i);
        return sy__error_set(c->err, SY_ENOTRUN, p,
                             "%s: %s does not run this filter", item, who);
    }
    if (where == 1) {
        sy__path_join(p, sizeof p, c->path, "uri");
        return sy__error_set(c->err, SY_ENOTRUN, p,
                             "%s uri: %s does not run this scheme", item, who);
    }
    char key[120];
    snprintf(key, sizeof key, "metadata.%s", c->r->more->metadata[i].key);
    sy__path_join(p, sizeof p, c->path, key);
    return sy__error_set(c->err, SY_ENOTRUN, p,
                         "%s: %s does not run this metadata key", item, who);
}

/* The parts of a host-run filter the host declared it does not run
 * ("!Retry.backoff", "!CircuitBreaker.resumeWithoutError",
 * "!CircuitBreaker.fallbackUriVariables", "!RequestRateLimiter.principal"),
 * refused at the filter's arg. */
static int check_parts(const host_check *c) {
    const struct sy_route *r = c->r;
    bool backoff = sy__host_excludes(c->runs, "Retry.backoff"),
         resume =
             sy__host_excludes(c->runs, "CircuitBreaker.resumeWithoutError"),
         vars =
             sy__host_excludes(c->runs, "CircuitBreaker.fallbackUriVariables"),
         noprin = sy__host_excludes(c->runs, "RequestRateLimiter.principal");
    if (!r->more->cfilters || !(backoff || resume || vars || noprin))
        return 0;
    for (size_t i = 0; i < r->more->filter_count; i++) {
        sy__builtin id;
        const void *pol = r->more->cfilters[i]
                              ? sy__filter_policy(r->more->cfilters[i], &id)
                              : NULL;
        const struct sy_retry_policy *rp = pol && id == SY_F_RETRY ? pol : NULL;
        const sy__brk_cfg *bc = pol && id == SY_F_CIRCUIT_BREAKER ? pol : NULL;
        const sy__rl_cfg *rl =
            pol && id == SY_F_REQUEST_RATE_LIMITER ? pol : NULL;
        char p[300], who[128];
        /* a host that authenticates nobody has no principal: keyed by it
         * (SCG's default resolver), deny-empty-key false lets every
         * request through unlimited */
        if (rl && noprin && rl->kr.kind == SY_KR_PRINCIPAL && !rl->deny_empty) {
            snprintf(p, sizeof p, "%s[%zu].args.deny-empty-key",
                     c->filters_path, i);
            sy__host_name(c->runs, who, sizeof who);
            return sy__error_set(
                c->err, SY_ENOTRUN, p,
                "RequestRateLimiter: keyed by the principal (the default "
                "key-resolver), which %s does not have: with deny-empty-key "
                "false nothing is limited; name another key-resolver "
                "(#{@remoteAddrKeyResolver}) or keep deny-empty-key true",
                who);
        }
        if (rp && backoff && rp->backoff) {
            if (r->more->filters[i].shortcut)
                snprintf(p, sizeof p, "%s[%zu]", c->filters_path, i);
            else
                snprintf(p, sizeof p, "%s[%zu].args.backoff", c->filters_path,
                         i);
            sy__host_name(c->runs, who, sizeof who);
            return sy__error_set(c->err, SY_ENOTRUN, p,
                                 "Retry: backoff: %s does not wait between "
                                 "tries (it retries at once); remove backoff",
                                 who);
        }
        if (bc && vars && bc->fallback && strchr(bc->fallback, '{')) {
            snprintf(p, sizeof p, "%s[%zu]%s", c->filters_path, i,
                     r->more->filters[i].shortcut ? "" : ".args.fallbackUri");
            sy__host_name(c->runs, who, sizeof who);
            return sy__error_set(c->err, SY_ENOTRUN, p,
                                 "CircuitBreaker: fallbackUri: %s goes to "
                                 "the path as written, without expanding "
                                 "{variables}",
                                 who);
        }
        /* without a fallbackUri, SCG answers a connect failure with an
         * empty 200 (SY_BREAKER_RESUME) */
        if (bc && resume && bc->resume_without_error && !bc->fallback) {
            snprintf(p, sizeof p, "%s[%zu].args.resumeWithoutError",
                     c->filters_path, i);
            sy__host_name(c->runs, who, sizeof who);
            return sy__error_set(c->err, SY_ENOTRUN, p,
                                 "CircuitBreaker: resumeWithoutError without "
                                 "a fallbackUri: %s answers a connect "
                                 "failure 502, not SCG's empty 200; give a "
                                 "fallbackUri or remove it",
                                 who);
        }
    }
    return 0;
}

/* A forwarding header's name: Forwarded, or X-Forwarded-anything. */
static bool forwarding_name(const char *n, size_t len) {
    return (len == 9 && strncasecmp(n, "forwarded", 9) == 0) ||
           (len >= 12 && strncasecmp(n, "x-forwarded-", 12) == 0);
}

/* The request header filters naming a forwarding header, where the host
 * writes those headers itself and drops every other
 * ("!RequestHeader.forwarding": the mini-gateway, as SCG 4.3.5+ with its
 * trusted-proxies): the filter's effect would be dropped, so it is
 * refused at its name. */
static int check_forwarding(const host_check *c) {
    const struct sy_route *r = c->r;
    if (!sy__host_excludes(c->runs, "RequestHeader.forwarding"))
        return 0;
    for (size_t i = 0; i < r->more->filter_count; i++) {
        const sy__def_entry *f = &r->more->filters[i];
        const sy__factory_spec *s = sy__def_spec(f);
        const char *key = NULL;
        if (s && (s->id == SY_F_ADD_REQUEST_HEADER ||
                  s->id == SY_F_SET_REQUEST_HEADER))
            key = "name";
        else if (s && s->id == SY_F_MAP_REQUEST_HEADER)
            key = "toHeader";
        else if (s && s->id == SY_F_ADD_REQUEST_HEADERS_IF_NOT_PRESENT)
            key = "headers";
        if (!key)
            continue;
        for (uint32_t k = 0; k < f->arg_count; k++) {
            const char *ak = f->args[k].key, *v = f->args[k].value;
            size_t kl = strlen(key);
            if (!ak || !v || strncmp(ak, key, kl) != 0 ||
                (ak[kl] && ak[kl] != '['))
                continue;
            size_t n = strlen(v);
            if (s->id == SY_F_ADD_REQUEST_HEADERS_IF_NOT_PRESENT) {
                const char *colon = strchr(v, ':');
                n = colon ? (size_t)(colon - v) : n;
            }
            while (n && v[0] == ' ')
                v++, n--;
            while (n && v[n - 1] == ' ')
                n--;
            if (!forwarding_name(v, n))
                continue;
            char p[300], who[128];
            if (f->shortcut)
                snprintf(p, sizeof p, "%s[%zu]", c->filters_path, i);
            else
                snprintf(p, sizeof p, "%s[%zu].args.%s", c->filters_path, i,
                         ak);
            sy__host_name(c->runs, who, sizeof who);
            return sy__error_set(
                c->err, SY_ENOTRUN, p,
                "%s: %.*s: %s writes the forwarding headers itself "
                "(--trusted-proxies) and drops any other, as SCG does; "
                "remove this header",
                s->name, (int)(n > 60 ? 60 : n), v, who);
        }
    }
    return 0;
}

int sy__route_path_filter(const struct sy_route *r) {
    for (size_t i = 0; r && i < r->more->filter_count; i++) {
        const sy__factory_spec *s = sy__def_spec(&r->more->filters[i]);
        if (s && (s->id == SY_F_STRIP_PREFIX || s->id == SY_F_PREFIX_PATH ||
                  s->id == SY_F_SET_PATH || s->id == SY_F_REWRITE_PATH))
            return (int)i;
    }
    return -1;
}

/* A forward: route's path filters: SCG sets the path to the uri's
 * (ForwardPathFilter, order 0) and runs them on it; a host forwards to the
 * uri's path as written (sy_route_upstream), so they would be accepted and
 * their effect dropped: refused at the filter. */
static int check_forward_path(const host_check *c) {
    const struct sy_route *r = c->r;
    if (r->up_scheme != SY_SCHEME_FORWARD ||
        !sy__host_runs(c->runs, "forward:"))
        return 0;
    int i = sy__route_path_filter(r);
    if (i < 0)
        return 0;
    char p[300], who[128];
    snprintf(p, sizeof p, "%s[%d]", c->filters_path, i);
    sy__host_name(c->runs, who, sizeof who);
    return sy__error_set(c->err, SY_ENOTRUN, p,
                         "%s: on a forward: route SCG applies it to the "
                         "uri's path; %s forwards to the uri's path as "
                         "written: put it on the route that answers",
                         sy__def_spec(&r->more->filters[i])->name, who);
}

int sy__route_check_host(const struct sy_route *r, const char *const *runs,
                         const char *path, const char *filters_path,
                         sy_error *err) {
    if (!runs)
        return 0;
    host_check c = {r, runs, path ? path : "", filters_path, err};
    int rc = each_host_item(r, check_item, &c);
    if (!rc)
        rc = check_forward_path(&c);
    if (!rc)
        rc = check_parts(&c);
    return rc ? rc : check_forwarding(&c);
}

typedef struct host_list {
    const char **names;
    size_t cap, n;
    const char *seen[64]; /* the first 64, to count each once */
} host_list;

static int list_item(void *data, const char *item, int where, size_t i) {
    (void)where, (void)i;
    host_list *l = data;
    for (size_t k = 0; k < l->n && k < SY_ARRAY_LEN(l->seen); k++)
        if (strcmp(l->seen[k], item) == 0)
            return 0;
    if (l->n < l->cap)
        l->names[l->n] = item;
    if (l->n < SY_ARRAY_LEN(l->seen))
        l->seen[l->n] = item;
    l->n++;
    return 0;
}

size_t sy_route_host_runs(const sy_route *r, const char **names, size_t cap) {
    if (!r)
        return 0;
    host_list l = {names, names ? cap : 0, 0, {0}};
    each_host_item(r, list_item, &l);
    /* host-registered filters are host-run too (by their own name) */
    for (size_t i = 0; i < r->more->filter_count; i++)
        if (r->more->filters[i].host)
            list_item(&l, sy__def_name(&r->more->filters[i]), 0, i);
    return l.n;
}
