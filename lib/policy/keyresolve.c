/*
 * keyresolve.c - parsing "#{@name}" key-resolver references and resolving
 * a request's key (keyresolve.h).
 */
#include "policy/keyresolve.h"
#include "base/values.h"

#include <ctype.h>

static bool bean_char(char c, bool first) {
    return c == '_' || c == '$' || isalpha((unsigned char)c) ||
           (!first && isdigit((unsigned char)c));
}

bool sy__keyres_parse(const char *text, const sy_registry *reg, sy__keyres *out,
                      const char **why) {
    memset(out, 0, sizeof *out);
    const char *s = text, *e = text + strlen(text);
    while (s < e && isspace((unsigned char)*s))
        s++;
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    if (e - s < 5 || memcmp(s, "#{@", 3) != 0 || e[-1] != '}') {
        *why = "expected a bean reference such as "
               "\"#{@remoteAddrKeyResolver}\"";
        return false;
    }
    s += 3, e--;
    const char *colon = memchr(s, ':', (size_t)(e - s));
    const char *name_end = colon ? colon : e;
    for (const char *c = s; c < name_end; c++)
        if (!bean_char(*c, c == s)) {
            *why = "expected a bean name inside #{@...}";
            return false;
        }
    size_t len = (size_t)(name_end - s);
    if (!len) {
        *why = "expected a bean name inside #{@...}";
        return false;
    }
    for (int k = 0; k < SY_KR_BUILTIN_COUNT; k++) {
        const char *n = sy__key_resolver_names[k];
        if (strlen(n) != len || memcmp(n, s, len) != 0)
            continue;
        bool takes_arg = k == SY_KR_HEADER || k == SY_KR_PATH_VAR;
        if (takes_arg != (colon != NULL)) {
            *why = takes_arg ? "this resolver takes a name: "
                               "\"#{@header:X-User}\", "
                               "\"#{@pathVariable:segment}\""
                             : "this resolver takes no argument";
            return false;
        }
        out->kind = (sy__key_resolver_kind)k;
        if (colon) {
            size_t al = (size_t)(e - colon - 1);
            if (!al || al >= sizeof out->arg) {
                *why = "the resolver's name argument is empty or longer "
                       "than 63 bytes";
                return false;
            }
            memcpy(out->arg, colon + 1, al);
            out->arg_len = al;
            /* a name no request can carry keys every request as empty
             * (deny-empty-key: 403 to all), never a limit: refused */
            const char *bad = NULL;
            if (k == SY_KR_HEADER && !sy__value_token(out->arg, &bad)) {
                *why = "#{@header:NAME}: NAME must be a header name (an "
                       "HTTP token: no spaces)";
                return false;
            }
            for (size_t i = 0; k == SY_KR_PATH_VAR && i < al; i++)
                if (!bean_char(out->arg[i], i == 0) &&
                    !(i && out->arg[i] == '-')) {
                    *why = "#{@pathVariable:NAME}: NAME must be a variable "
                           "name of the route's patterns ({NAME})";
                    return false;
                }
        }
        return true;
    }
    if (!colon) {
        const sy_key_resolver *h = sy__registry_find_key_resolver(reg, s, len);
        if (h) {
            out->kind = SY_KR_REGISTERED;
            out->host = h;
            return true;
        }
    }
    *why = "no such key resolver (built in: principalNameKeyResolver, "
           "remoteAddrKeyResolver, hostKeyResolver, routeKeyResolver, "
           "header:<name>, pathVariable:<name>; others must be registered "
           "by the host)";
    return false;
}

bool sy__keyres_pattern_captures(const char *pattern, const char *name,
                                 size_t n) {
    for (const char *s = pattern; s && *s; s++) {
        if (*s != '{')
            continue;
        const char *v = s + 1 + (s[1] == '*');
        size_t l = strcspn(v, ":}");
        if (l == n && memcmp(v, name, n) == 0)
            return true;
        s = v + l;
        /* past a regex ("{id:[0-9]{2}}"): its braces nest */
        for (int depth = *s == ':'; *s && depth; s++)
            depth += (s[1] == '{') - (s[1] == '}');
        if (!*s)
            break;
    }
    return false;
}

/* Copy n bytes (at most cap) of s to buf: a short key (most are) in two
 * overlapping fixed-size moves, no call. */
static size_t put(char *buf, size_t cap, const char *s, size_t n) {
    if (n > cap)
        n = cap;
    if (n > 16) {
        memcpy(buf, s, n);
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(buf, &a, 8);
        memcpy(buf + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(buf, &a, 4);
        memcpy(buf + n - 4, &b, 4);
    } else if (n) {
        buf[0] = s[0];
        buf[n >> 1] = s[n >> 1];
        buf[n - 1] = s[n - 1];
    }
    return n;
}

/* a and b (n bytes) the same but for ASCII case: the bytes as they are
 * first (the request's hot path), the case folded only when they differ */
static bool same_nocase(const char *a, const char *b, size_t n) {
    if (sy__bytes_eq(a, b, n))
        return true;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)a[i], d = (unsigned char)b[i];
        if (c == d)
            continue;
        c |= 0x20;
        if (c != (d | 0x20) || c < 'a' || c > 'z')
            return false;
    }
    return true;
}

static sy_str header_value(const sy_request *req, const char *name, size_t n) {
    for (size_t i = 0; i < req->header_count; i++) {
        sy_str h = req->headers[i].name;
        if (h.len == n && same_nocase(h.ptr, name, n))
            return req->headers[i].value;
    }
    return (sy_str){NULL, 0};
}

/* The host without a port ("[::1]:80" -> "[::1]"). */
static sy_str host_only(sy_str h) {
    size_t n = h.len;
    for (size_t i = n; i-- > 0;) {
        if (h.ptr[i] == ']')
            break;
        if (h.ptr[i] == ':') {
            n = i;
            break;
        }
    }
    return (sy_str){h.ptr, n};
}

sy_str sy__keyres_resolve(const sy__keyres *kr, const sy_request *req,
                          const struct sy_route *route, const char *route_id,
                          sy__var_fn var, const void *var_data, char *scratch,
                          size_t cap) {
    sy_str v = {NULL, 0};
    switch (kr->kind) {
    case SY_KR_PRINCIPAL:
        if (req->size >= offsetof(sy_request, principal) + sizeof(sy_str))
            v = req->principal;
        break;
    case SY_KR_REMOTE_ADDR: v = req->remote_addr; break;
    case SY_KR_HOST: v = host_only(req->host); break;
    case SY_KR_ROUTE:
        v = (sy_str){route_id, route_id ? strlen(route_id) : 0};
        break;
    case SY_KR_HEADER: v = header_value(req, kr->arg, kr->arg_len); break;
    case SY_KR_PATH_VAR:
        if (var)
            v = var(var_data, kr->arg);
        break;
    case SY_KR_REGISTERED: {
        size_t len = 0;
        if (kr->host->resolve(kr->host->data, req, route, scratch, cap, &len) <
            0)
            return (sy_str){NULL, 0};
        return (sy_str){scratch, len > cap ? cap : len};
    }
    default: break;
    }
    return v.ptr ? v : (sy_str){NULL, 0};
}

size_t sy__keyres_text(sy_str key, char out[SY_POLICY_KEY_MAX]) {
    if (key.len < SY_POLICY_KEY_MAX) {
        size_t n = put(out, key.len, key.ptr, key.len);
        out[n] = '\0';
        return n;
    }
    /* the first bytes, "~" and the whole key's hash in 16 hex digits: 255
     * bytes, a Redis key of its own (sy__hash64 reads bytes in a fixed
     * order: the same text on every host, as a shared bucket needs) */
    static const char hex[] = "0123456789abcdef";
    size_t n = SY_POLICY_KEY_MAX - 1 - 17;
    memcpy(out, key.ptr, n);
    out[n++] = '~';
    uint64_t h = sy__hash64(key.ptr, key.len, 0);
    for (int i = 60; i >= 0; i -= 4)
        out[n++] = hex[(h >> i) & 15];
    out[n] = '\0';
    return n;
}
