/*
 * forwarded.c - the forwarding headers of a proxied request (X-Forwarded-*
 * and Forwarded) and the trusted proxies that decide them, as SCG 4.3.5+
 * runs them (XForwardedHeadersFilter, ForwardedHeadersFilter and their
 * Remove* counterparts, spring.cloud.gateway.trusted-proxies):
 *   - without --trusted-proxies the gateway sends none of them and drops
 *     a client's (every X-Forwarded-* name, and Forwarded);
 *   - with it, a client whose address the regex matches whole gets
 *     X-Forwarded-For (its lines the regex matches whole, then the
 *     client), -Proto, -Prefix (the part of the path a filter stripped),
 *     -Port and -Host, each the client's lines and the gateway's value in
 *     one comma-joined line, and Forwarded: the client's entries whose
 *     for= the regex matches, one line each, then the gateway's own
 *     (proto, host, for with the client's port); a client it does not
 *     match gets its forwarding headers dropped, as without the flag.
 * gw_upstream_head (upstream_head.c) leaves these names to this file.
 */
#define _DEFAULT_SOURCE
#define PCRE2_CODE_UNIT_WIDTH 8
#include "proxy.h"

#include <pcre2.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int gw_trusted_compile(gw_config *cfg, const char *flag, const char *re) {
    int err;
    PCRE2_SIZE at;
    /* anchored at both ends when compiled (Java's matches()), so that
     * the JIT runs it: at match time these options leave it out */
    pcre2_code *code =
        pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED,
                      PCRE2_ANCHORED | PCRE2_ENDANCHORED, &err, &at, NULL);
    if (!code) {
        char msg[160];
        pcre2_get_error_message(err, (PCRE2_UCHAR *)msg, sizeof msg);
        fprintf(stderr, "mini-gateway: %s %s: %s at offset %zu\n", flag, re,
                msg, (size_t)at);
        return -1;
    }
    if (!*re) { /* SCG: an empty trusted-proxies is none */
        pcre2_code_free(code);
        fprintf(stderr, "mini-gateway: %s takes a regex, not \"\"\n", flag);
        return -1;
    }
    if (cfg->trusted_re)
        pcre2_code_free(cfg->trusted_re);
    /* JIT when the platform has it (pcre2_match then runs it): ~880
     * instructions a match with the interpreter (counts.py) */
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    cfg->trusted_re = code;
    cfg->trusted_proxies = re;
    return 0;
}

void gw_trusted_free(gw_worker *w) {
    pcre2_match_data_free(w->trusted_md);
    w->trusted_md = NULL;
}

/* True when the trusted-proxies regex matches s[0..n) whole (Java's
 * Pattern.matcher(s).matches()). The worker's match data is kept: a
 * fresh one a call was a malloc and pcre2's frame vector each time. */
static bool trusted(gw_worker *w, const char *s, size_t n) {
    pcre2_code *re = G.cfg.trusted_re;
    if (!w->trusted_md)
        w->trusted_md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!w->trusted_md)
        return false;
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, w->trusted_md, NULL);
    return rc >= 0;
}

/* n is the name s of l bytes (a lowercase literal), ASCII case aside: the
 * length first, inline (every header is tested 6 times a request). */
static inline bool name_is(sy_str n, const char *s, size_t l) {
    return n.len == l && gw_eq_lower(n.ptr, s, l);
}

/* The X-Forwarded-* headers the gateway writes, in SCG's order. */
enum { XFOR, XPROTO, XPREFIX, XPORT, XHOST, NX };
static const struct {
    const char *name;
    size_t len;
} xnames[NX] = {{"X-Forwarded-For", 15},
                {"X-Forwarded-Proto", 17},
                {"X-Forwarded-Prefix", 18},
                {"X-Forwarded-Port", 16},
                {"X-Forwarded-Host", 16}};
static const char *const xlower[NX] = {"x-forwarded-for", "x-forwarded-proto",
                                       "x-forwarded-prefix", "x-forwarded-port",
                                       "x-forwarded-host"};

static inline char *put(char *w, const void *s, size_t n) {
    memcpy(w, s, n);
    return w + n;
}

size_t gw_forwarded_room(const gw_request *q, const sy_target *t) {
    if (!G.cfg.trusted_re)
        return 0;
    /* the lines' names and the gateway's values (client, "http", the
     * path, Host's port, Host twice, the Forwarded entry), a kept Forwarded
     * entry's line at most 16 bytes a byte of the client's line */
    size_t room =
        512 + 3 * q->c->peer_len + q->sreq.path.len + 3 * q->sreq.host.len;
    for (size_t i = 0; i < t->header_count; i++)
        if (name_is(t->headers[i].name, "forwarded", 9))
            room += 16 * (t->headers[i].value.len + 1);
    return room;
}

/* The prefix a filter stripped: the request's path (a trailing '/'
 * aside) less the path sent, when that is its end; as SCG's
 * XForwardedHeadersFilter finds it. */
static sy_str strip_prefix(sy_str orig, sy_str sent) {
    if (orig.len && orig.ptr[orig.len - 1] == '/')
        orig.len--;
    if (sent.len && sent.ptr[sent.len - 1] == '/')
        sent.len--;
    if (sent.len > orig.len ||
        memcmp(orig.ptr + orig.len - sent.len, sent.ptr, sent.len) != 0)
        return (sy_str){NULL, 0};
    return (sy_str){orig.ptr, orig.len - sent.len};
}

/* One Forwarded entry of the client's ("k=v;k=v", trimmed) at w when its
 * for= is trusted, as its own line; the byte after. */
static char *forwarded_entry(gw_worker *wk, char *w, const char *p,
                             const char *end) {
    char *start = w;
    const char *forv = NULL;
    size_t forl = 0;
    bool any = false;
    w = put(w, "Forwarded: ", 11);
    while (p < end) {
        const char *e = memchr(p, ';', (size_t)(end - p));
        e = e ? e : end;
        const char *eq = memchr(p, '=', (size_t)(e - p));
        if (eq) { /* k=v, each trimmed; a pair without '=' is skipped */
            const char *k = p, *ke = eq, *v = eq + 1, *ve = e;
            while (k < ke && (*k == ' ' || *k == '\t'))
                k++;
            while (ke > k && (ke[-1] == ' ' || ke[-1] == '\t'))
                ke--;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            if (ke - k == 3 && strncasecmp(k, "for", 3) == 0) {
                forv = v;
                forl = (size_t)(ve - v);
            }
            if (any)
                *w++ = ';';
            w = put(w, k, (size_t)(ke - k));
            *w++ = '=';
            w = put(w, v, (size_t)(ve - v));
            any = true;
        }
        p = e + (e < end);
    }
    /* an entry without for= is dropped (SCG's isTrusted(null) fails) */
    if (!any || !forv || !trusted(wk, forv, forl))
        return start;
    return put(w, "\r\n", 2);
}

char *gw_forwarded_put(gw_request *q, const sy_target *t, char *w) {
    if (!G.cfg.trusted_re)
        return w;
    const gw_client *c = q->c;
    if (!trusted(q->w, c->peer, c->peer_len))
        return w; /* the client's were dropped: nothing added */
    const sy_request *r = &q->sreq;
    /* the Host header: host and port (80 when it names none: the gateway
     * listens for http only) */
    sy_str host = r->host, port = {"80", 2};
    const char *colon = NULL;
    for (size_t i = host.len; i > 0; i--) {
        if (host.ptr[i - 1] == ':') {
            colon = host.ptr + i - 1;
            break;
        }
        if (host.ptr[i - 1] == ']' || host.ptr[i - 1] < '0' ||
            host.ptr[i - 1] > '9')
            break;
    }
    if (colon && colon + 1 < host.ptr + host.len) {
        port = (sy_str){colon + 1, (size_t)(host.ptr + host.len - colon - 1)};
        if (port.len == 2 && memcmp(port.ptr, "80", 2) == 0)
            host.len = (size_t)(colon - host.ptr); /* the default: not said */
    }
    sy_str own[NX] = {{c->peer, c->peer_len},
                      {"http", 4},
                      strip_prefix(r->path, t->path),
                      port,
                      host};
    if (!own[XPREFIX].len)
        own[XPREFIX].ptr = NULL;
    if (!host.len)
        own[XHOST].ptr = NULL;
    for (int x = 0; x < NX; x++) {
        char *line = w;
        bool any = false;
        w = put(w, xnames[x].name, xnames[x].len);
        w = put(w, ": ", 2);
        for (size_t i = 0; i < t->header_count; i++) {
            sy_header hd = t->headers[i];
            if (!name_is(hd.name, xlower[x], xnames[x].len) ||
                (x == XFOR && !trusted(q->w, hd.value.ptr, hd.value.len)))
                continue;
            if (any)
                *w++ = ',';
            w = put(w, hd.value.ptr, hd.value.len);
            any = true;
        }
        if (own[x].ptr) {
            if (any)
                *w++ = ',';
            w = put(w, own[x].ptr, own[x].len);
            any = true;
        }
        w = any ? put(w, "\r\n", 2) : line;
    }
    for (size_t i = 0; i < t->header_count; i++) {
        sy_header hd = t->headers[i];
        if (!name_is(hd.name, "forwarded", 9))
            continue;
        const char *p = hd.value.ptr, *end = p + hd.value.len;
        while (p < end) {
            const char *e = memchr(p, ',', (size_t)(end - p));
            e = e ? e : end;
            w = forwarded_entry(q->w, w, p, e);
            p = e + (e < end);
        }
    }
    /* the gateway's entry, in the order SCG's HashMap gives (proto,
     * host, for), a value with ':' quoted; for= with the client's port,
     * only when trusted in its bracketed form (an IPv6 address) too */
    w = put(w, "Forwarded: proto=http", 21);
    bool v6 = memchr(c->peer, ':', c->peer_len) != NULL;
    bool hq = memchr(r->host.ptr, ':', r->host.len) != NULL;
    if (r->host.len) {
        w = put(w, ";host=", 6);
        if (hq)
            *w++ = '"';
        w = put(w, r->host.ptr, r->host.len);
        if (hq)
            *w++ = '"';
    }
    char *forv = w + 7; /* ;for=" then the address, bracketed if v6 */
    w = put(w, ";for=\"", 6);
    if (v6)
        *w++ = '[';
    w = put(w, c->peer, c->peer_len);
    if (v6)
        *w++ = ']';
    if (v6 && !trusted(q->w, forv - 1, (size_t)(w - forv + 1))) {
        w = forv - 7; /* no for= */
    } else {
        *w++ = ':';
        w += gw_u64_text(w, c->peer_port);
        *w++ = '"';
    }
    return put(w, "\r\n", 2);
}
