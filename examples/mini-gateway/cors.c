/*
 * cors.c - per-route CORS from a route's `cors` metadata, as SCG reads it
 * (CorsGatewayFilterApplicationListener: allowedOrigins,
 * allowedOriginPatterns, allowedMethods, allowedHeaders, exposedHeaders,
 * allowCredentials, maxAge) and as Spring's DefaultCorsProcessor applies
 * it: a preflight is answered by the gateway (200 with the Allow headers,
 * or 403), a cross-origin request whose origin or method is not allowed is
 * answered 403 "Invalid CORS request", an allowed one goes upstream and its
 * response gets Access-Control-Allow-Origin (and -Expose-Headers,
 * -Allow-Credentials) unless the upstream sent them. The configuration is
 * parsed once per route (route_attach) and only read by the workers.
 */
#define _DEFAULT_SOURCE
#include "proxy.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- checks ---- */

static const sy_str *req_header(const gw_request *q, const char *name) {
    size_t l = strlen(name);
    for (size_t i = 0; i < q->sreq.header_count; i++) {
        const sy_header *h = &q->sreq.headers[i];
        if (h->name.len == l && strncasecmp(h->name.ptr, name, l) == 0)
            return &h->value;
    }
    return NULL;
}

static bool str_ieq(sy_str a, const char *b) {
    size_t l = strlen(b);
    return a.len == l && strncasecmp(a.ptr, b, l) == 0;
}

sy_str gw_cors_preflight_method(const gw_request *q) {
    const sy_str *m = req_header(q, "access-control-request-method");
    if (!m || !str_ieq(q->sreq.method, "OPTIONS") || !req_header(q, "origin"))
        return (sy_str){NULL, 0};
    return *m;
}

/* A pattern of allowedOriginPatterns: '*' stands for any text, and a port
 * list ":[8080,8081]" (or ":[*]") at the end for one of those ports. */
static bool glob(const char *p, const char *s, size_t n) {
    if (!*p)
        return n == 0;
    if (*p == '*') {
        for (size_t i = 0; i <= n; i++)
            if (glob(p + 1, s + i, n - i))
                return true;
        return false;
    }
    return n && (*p | 0x20) == (*s | 0x20) && glob(p + 1, s + 1, n - 1);
}

static bool pattern_matches(const char *pat, sy_str o) {
    const char *br = strstr(pat, ":[");
    size_t plen = strlen(pat);
    if (!br || pat[plen - 1] != ']') {
        char *pp = strndup(pat, plen);
        bool ok = pp && glob(pp, o.ptr, o.len);
        free(pp);
        return ok;
    }
    /* split the origin's port off */
    size_t colon = o.len;
    while (colon > 0 && o.ptr[colon - 1] >= '0' && o.ptr[colon - 1] <= '9')
        colon--;
    bool has_port = colon > 0 && colon < o.len && o.ptr[colon - 1] == ':';
    sy_str host = {o.ptr, has_port ? colon - 1 : o.len};
    sy_str port = {o.ptr + colon, has_port ? o.len - colon : 0};
    char *hp = strndup(pat, (size_t)(br - pat));
    bool ok = hp && glob(hp, host.ptr, host.len);
    free(hp);
    if (!ok)
        return false;
    const char *ports = br + 2, *end = pat + plen - 1;
    if (end - ports == 1 && *ports == '*')
        return true;
    if (!port.len)
        return false;
    while (ports < end) {
        const char *c = memchr(ports, ',', (size_t)(end - ports));
        if (!c)
            c = end;
        const char *a = ports, *b = c;
        while (a < b && *a == ' ')
            a++;
        while (b > a && b[-1] == ' ')
            b--;
        if ((size_t)(b - a) == port.len && memcmp(a, port.ptr, port.len) == 0)
            return true;
        ports = c + 1;
    }
    return false;
}

/* The Access-Control-Allow-Origin value for origin o, or NULL. */
static const char *check_origin(const gw_cors *c, sy_str o) {
    while (o.len && o.ptr[o.len - 1] == '/')
        o.len--;
    if (!o.len)
        return NULL;
    if (c->origins.all)
        return "*";
    for (size_t i = 0; i < c->origins.n; i++) {
        const char *a = c->origins.v[i];
        size_t al = strlen(a);
        while (al && a[al - 1] == '/')
            al--;
        if (al == o.len && strncasecmp(a, o.ptr, al) == 0)
            return "";
    }
    for (size_t i = 0; i < c->patterns.n; i++)
        if (c->patterns.all || pattern_matches(c->patterns.v[i], o))
            return "";
    return NULL;
}

static bool method_allowed(const gw_cors *c, sy_str m) {
    if (!c->methods.set) /* Spring's default: GET, HEAD */
        return str_ieq(m, "GET") || str_ieq(m, "HEAD");
    if (c->methods.all)
        return true;
    for (size_t i = 0; i < c->methods.n; i++)
        if (m.len == strlen(c->methods.v[i]) &&
            memcmp(m.ptr, c->methods.v[i], m.len) == 0)
            return true;
    return false;
}

/* Access-Control-Request-Headers against allowedHeaders: the allowed ones
 * (", " separated) in *out; false when some were asked and none allowed. */
static bool headers_allowed(const gw_cors *c, const sy_str *asked,
                            gw_buf *out) {
    if (!asked)
        return true;
    const char *p = asked->ptr, *end = p + asked->len;
    bool any = false, listed = false;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma ? comma : end, *a = p;
        while (a < e && (*a == ' ' || *a == '\t'))
            a++;
        const char *b = e;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        p = comma ? comma + 1 : end;
        if (a == b)
            continue;
        listed = true;
        bool ok = c->headers.all;
        for (size_t i = 0; !ok && i < c->headers.n; i++)
            ok = strlen(c->headers.v[i]) == (size_t)(b - a) &&
                 strncasecmp(c->headers.v[i], a, (size_t)(b - a)) == 0;
        if (!ok)
            continue;
        if (any)
            gw_buf_adds(out, ", ");
        gw_buf_add(out, a, (size_t)(b - a));
        any = true;
    }
    return any || !listed;
}

static void add_list(gw_buf *h, const char *name, const gw_list *l) {
    gw_buf_adds(h, name);
    gw_buf_adds(h, ": ");
    for (size_t i = 0; i < l->n; i++) {
        if (i)
            gw_buf_adds(h, ", ");
        gw_buf_adds(h, l->v[i]);
    }
    gw_buf_adds(h, "\r\n");
}

/* The request's own origin (scheme://host[:port]): not a CORS request. */
static bool same_origin(const gw_request *q, sy_str o) {
    static const char http[] = "http://";
    if (o.len < sizeof http - 1 || strncasecmp(o.ptr, http, sizeof http - 1))
        return false;
    sy_str rest = {o.ptr + sizeof http - 1, o.len - (sizeof http - 1)};
    sy_str host = q->sreq.host;
    if (rest.len == host.len && strncasecmp(rest.ptr, host.ptr, host.len) == 0)
        return true;
    /* an explicit default port on either side */
    if (rest.len == host.len + 3 && memcmp(rest.ptr + host.len, ":80", 3) == 0)
        return strncasecmp(rest.ptr, host.ptr, host.len) == 0;
    if (host.len == rest.len + 3 && memcmp(host.ptr + rest.len, ":80", 3) == 0)
        return strncasecmp(rest.ptr, host.ptr, rest.len) == 0;
    return false;
}

bool gw_cors_is_cross_origin(const gw_request *q) {
    const sy_str *origin = req_header(q, "origin");
    return origin && !same_origin(q, *origin);
}

int gw_cors_check(const gw_cors *c, const gw_request *q, gw_buf *h) {
    gw_buf_adds(h, "Vary: Origin, Access-Control-Request-Method, "
                   "Access-Control-Request-Headers\r\n");
    const sy_str *origin = req_header(q, "origin");
    if (!origin || same_origin(q, *origin))
        return 0;
    sy_str pre = gw_cors_preflight_method(q);
    const char *allow = check_origin(c, *origin);
    if (!allow || !method_allowed(c, pre.len ? pre : q->sreq.method))
        return 403;
    gw_buf allowed = {0};
    if (pre.len &&
        !headers_allowed(c, req_header(q, "access-control-request-headers"),
                         &allowed)) {
        gw_buf_free(&allowed);
        return 403;
    }
    gw_buf_adds(h, "Access-Control-Allow-Origin: ");
    if (allow[0])
        gw_buf_adds(h, allow);
    else
        gw_buf_add(h, origin->ptr, origin->len);
    gw_buf_adds(h, "\r\n");
    if (pre.len) {
        if (!c->methods.set)
            gw_buf_adds(h, "Access-Control-Allow-Methods: GET, HEAD\r\n");
        else if (c->methods.all)
            gw_buf_printf(h, "Access-Control-Allow-Methods: %.*s\r\n",
                          (int)pre.len, pre.ptr);
        else
            add_list(h, "Access-Control-Allow-Methods", &c->methods);
        if (allowed.len)
            gw_buf_printf(h, "Access-Control-Allow-Headers: %s\r\n", allowed.p);
    } else if (c->exposed.n) {
        add_list(h, "Access-Control-Expose-Headers", &c->exposed);
    }
    gw_buf_free(&allowed);
    if (c->credentials)
        gw_buf_adds(h, "Access-Control-Allow-Credentials: true\r\n");
    if (pre.len && c->max_age >= 0)
        gw_buf_printf(h, "Access-Control-Max-Age: %lld\r\n", c->max_age);
    return pre.len ? 200 : 0;
}
