/* head_scan.c - the gateway's fast path for a plainly common request
 * head: one pass over bytes already in the buffer giving what
 * http-parser's callbacks and fields would give, at a fraction of its
 * instructions. http-parser stays the parser: anything this file does not
 * take for certain (see gw_head_scan_request) is handed to it unchanged.
 *
 * The form taken, and nothing else:
 *   METHOD SP origin-form SP HTTP/1.(0|1) CRLF
 *   *( token ":" *(SP/HTAB) value CRLF )  CRLF
 * METHOD one of GET HEAD POST PUT DELETE OPTIONS PATCH; the target '/'
 * then visible ASCII; a value visible ASCII, SP and HTAB, not empty, not
 * ending in SP/HTAB; at most one Content-Length (1-15 digits, no leading
 * zero) and at most one Connection (exactly "keep-alive"); no
 * Transfer-Encoding, Upgrade or Proxy-Connection (nor any name starting
 * so, which http-parser matches by prefix); an HTTP/1.0 head only with
 * Connection: keep-alive (else http-parser would end the connection's
 * parsing after it, a state this path does not make). */
#include "head_scan.h"

#include <http_parser.h>
#include <string.h>

#define BIT(ch) ((uint64_t)1 << ((ch)&63))
/* RFC 9110 tchar, as http-parser's tokens[] table: bytes 0-63, 64-127 */
static const uint64_t tchar_lo = BIT('!') | BIT('#') | BIT('$') | BIT('%') |
                                 BIT('&') | BIT('\'') | BIT('*') | BIT('+') |
                                 BIT('-') | BIT('.') | (0x3FFull << 48);
static const uint64_t tchar_hi = (0x3FFFFFFull << 1) | BIT('^') | BIT('_') |
                                 BIT('`') | (0x3FFFFFFull << 33) | BIT('|') |
                                 BIT('~');

static inline bool is_tchar(unsigned char ch) {
    if (ch < 64)
        return (tchar_lo >> ch) & 1;
    return ch < 128 && ((tchar_hi >> (ch - 64)) & 1);
}

/* a name or value equal, ASCII case aside, to a lowercase literal; exact
 * for the bytes compared here (tchar or value bytes: only letters change
 * under | 0x20 into letters or '-') */
static bool eq_lower(const unsigned char *s, const char *lit, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((s[i] | 0x20) != (unsigned char)lit[i])
            return false;
    return true;
}

#define LIT(s) s, sizeof s - 1

static const struct {
    char name[8];
    unsigned char len, id;
} methods[] = {
    {"GET", 3, HTTP_GET},       {"HEAD", 4, HTTP_HEAD},
    {"POST", 4, HTTP_POST},     {"PUT", 3, HTTP_PUT},
    {"DELETE", 6, HTTP_DELETE}, {"OPTIONS", 7, HTTP_OPTIONS},
    {"PATCH", 5, HTTP_PATCH},
};

/* the method and its SP; 0 when not one of the list */
static size_t method_of(const unsigned char *s, size_t len, unsigned *id) {
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        size_t n = methods[i].len;
        if (s[0] == (unsigned char)methods[i].name[0] && len > n &&
            s[n] == ' ' && !memcmp(s, methods[i].name, n)) {
            *id = methods[i].id;
            return n + 1;
        }
    }
    return 0;
}

enum { H_OTHER, H_CL, H_CONN, H_BAIL };

/* the names http-parser acts on (it matches them by prefix) */
static int name_kind(const unsigned char *n, size_t len) {
    switch (n[0] | 0x20) {
    case 'c':
        if (len >= 14 && eq_lower(n, LIT("content-length")))
            return len == 14 ? H_CL : H_BAIL;
        if (len >= 10 && eq_lower(n, LIT("connection")))
            return len == 10 ? H_CONN : H_BAIL;
        return H_OTHER;
    case 'p':
        return len >= 16 && eq_lower(n, LIT("proxy-connection")) ? H_BAIL
                                                                 : H_OTHER;
    case 't':
        return len >= 17 && eq_lower(n, LIT("transfer-encoding")) ? H_BAIL
                                                                  : H_OTHER;
    case 'u': return len >= 7 && eq_lower(n, LIT("upgrade")) ? H_BAIL : H_OTHER;
    default: return H_OTHER;
    }
}

bool gw_head_scan_request(const char *buf, size_t len, size_t max_head,
                          sy_header *hdrs, size_t max_hdrs, gw_head_req *out) {
    if (len > max_head)
        len = max_head; /* the head must end within max_head bytes */
    const unsigned char *s = (const unsigned char *)buf, *end = s + len;
    if (len < 16)
        return false;
    size_t ml = method_of(s, len, &out->method);
    if (!ml || s[ml] != '/')
        return false;
    const unsigned char *p = s + ml, *u = p;
    while (p<end && * p> 0x20 && *p < 0x7f)
        p++;
    if (end - p < 11 || memcmp(p, " HTTP/1.", 8) ||
        (p[8] != '0' && p[8] != '1') || p[9] != '\r' || p[10] != '\n')
        return false;
    out->url = (const char *)u;
    out->url_len = (size_t)(p - u);
    out->http_minor = (unsigned)(p[8] - '0');
    out->flags = 0;
    out->content_length = UINT64_MAX;
    p += 11;
    size_t nh = 0;
    for (;;) {
        if (p == end)
            return false;
        if (*p == '\r') {
            if (end - p < 2 || p[1] != '\n')
                return false;
            p += 2;
            break;
        }
        const unsigned char *n = p;
        while (p < end && is_tchar(*p))
            p++;
        if (p == end || *p != ':' || p == n)
            return false;
        size_t nlen = (size_t)(p - n);
        p++;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        const unsigned char *v = p;
        while (p < end && ((*p >= 0x20 && *p < 0x7f) || *p == '\t'))
            p++;
        if (end - p < 2 || p[0] != '\r' || p[1] != '\n' || p == v ||
            p[-1] == ' ' || p[-1] == '\t')
            return false;
        size_t vlen = (size_t)(p - v);
        p += 2;
        if (nh == max_hdrs)
            return false;
        switch (name_kind(n, nlen)) {
        case H_CL: {
            if ((out->flags & F_CONTENTLENGTH) || vlen > 15 ||
                (v[0] == '0' && vlen > 1))
                return false;
            uint64_t cl = 0;
            for (size_t i = 0; i < vlen; i++) {
                if (v[i] < '0' || v[i] > '9')
                    return false;
                cl = cl * 10 + (uint64_t)(v[i] - '0');
            }
            out->flags |= F_CONTENTLENGTH;
            out->content_length = cl;
            break;
        }
        case H_CONN:
            if ((out->flags & F_CONNECTION_KEEP_ALIVE) || vlen != 10 ||
                !eq_lower(v, LIT("keep-alive")))
                return false;
            out->flags |= F_CONNECTION_KEEP_ALIVE;
            break;
        case H_BAIL: return false;
        default: break;
        }
        hdrs[nh].name = (sy_str){(const char *)n, nlen};
        hdrs[nh].value = (sy_str){(const char *)v, vlen};
        nh++;
    }
    if (out->http_minor == 0 && !(out->flags & F_CONNECTION_KEEP_ALIVE))
        return false;
    out->nh = nh;
    out->head_len = (size_t)(p - s);
    return true;
}
