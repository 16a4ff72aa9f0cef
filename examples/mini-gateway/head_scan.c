/* head_scan.c - the gateway's fast path for a plainly common request
 * head, and for an upstream's response head with its Content-Length body:
 * one pass over bytes already in the buffer giving what http-parser's
 * callbacks and fields would give, at a fraction of its instructions.
 * http-parser stays the parser: anything this file does not take for
 * certain (gw_head_scan_request, gw_head_scan_response) is handed to it
 * unchanged, and a response parser is driven through
 * gw_fast_execute_response, http_parser_execute's stand-in.
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
 * parsing after it, a state this path does not make). A response: the
 * same lines after "HTTP/1.(0|1) NNN reason" CRLF, see head_scan.h. */
#include "head_scan.h"

#include <http_parser.h>
#include <string.h>

/* Byte classes, one table lookup a byte: TCHAR RFC 9110's tchar (as
 * http-parser's tokens[]), VALUE a header value's byte here (visible ASCII,
 * SP, HTAB), VIS visible ASCII (a target's byte here). 128-255: none. */
enum { TCHAR = 1, VALUE = 2, VIS = 4 };
/* clang-format off */
static const unsigned char cls[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, /* 00 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 10 */
    2, 7, 6, 7, 7, 7, 7, 7, 6, 6, 7, 7, 6, 7, 7, 6, /* 20 */
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 6, /* 30 */
    6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, /* 40 */
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 7, 7, /* 50 */
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, /* 60 */
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 6, 7, 6, 7, 0, /* 70 */
};
/* clang-format on */

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

/* The header lines and the blank line from p: the end of the head, or NULL
 * when they are not all there or not of the plainly common form. */
static const unsigned char *scan_fields(const unsigned char *p,
                                        const unsigned char *end,
                                        sy_header *hdrs, size_t max_hdrs,
                                        unsigned *flags, uint64_t *cl_out,
                                        size_t *nh_out) {
    size_t nh = 0;
    *flags = 0;
    *cl_out = UINT64_MAX;
    for (;;) {
        if (p == end)
            return NULL;
        if (*p == '\r') {
            if (end - p < 2 || p[1] != '\n')
                return NULL;
            p += 2;
            break;
        }
        const unsigned char *n = p;
        while (p < end && (cls[*p] & TCHAR))
            p++;
        if (p == end || *p != ':' || p == n)
            return NULL;
        size_t nlen = (size_t)(p - n);
        p++;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        const unsigned char *v = p;
        while (p < end && (cls[*p] & VALUE))
            p++;
        if (end - p < 2 || p[0] != '\r' || p[1] != '\n' || p == v ||
            p[-1] == ' ' || p[-1] == '\t')
            return NULL;
        size_t vlen = (size_t)(p - v);
        p += 2;
        if (nh == max_hdrs)
            return NULL;
        switch (name_kind(n, nlen)) {
        case H_CL: {
            if ((*flags & F_CONTENTLENGTH) || vlen > 15 ||
                (v[0] == '0' && vlen > 1))
                return NULL;
            uint64_t cl = 0;
            for (size_t i = 0; i < vlen; i++) {
                if (v[i] < '0' || v[i] > '9')
                    return NULL;
                cl = cl * 10 + (uint64_t)(v[i] - '0');
            }
            *flags |= F_CONTENTLENGTH;
            *cl_out = cl;
            break;
        }
        case H_CONN:
            if ((*flags & F_CONNECTION_KEEP_ALIVE) || vlen != 10 ||
                !eq_lower(v, LIT("keep-alive")))
                return NULL;
            *flags |= F_CONNECTION_KEEP_ALIVE;
            break;
        case H_BAIL: return NULL;
        default: break;
        }
        hdrs[nh].name = (sy_str){(const char *)n, nlen};
        hdrs[nh].value = (sy_str){(const char *)v, vlen};
        nh++;
    }
    *nh_out = nh;
    return p;
}

bool gw_head_scan_request(const char *buf, size_t len, size_t max_head,
                          sy_header *hdrs, size_t max_hdrs, gw_head_req *out) {
    /* http-parser paused at on_headers_complete (as the gateway pauses it)
     * counts the head's last LF again when resumed: a head of exactly
     * HTTP_MAX_HEADER_SIZE bytes is then refused (HPE_HEADER_OVERFLOW) */
    if (max_head > HTTP_MAX_HEADER_SIZE - 1)
        max_head = HTTP_MAX_HEADER_SIZE - 1;
    if (len > max_head)
        len = max_head; /* the head must end within max_head bytes */
    const unsigned char *s = (const unsigned char *)buf, *end = s + len;
    if (len < 16)
        return false;
    size_t ml = method_of(s, len, &out->method);
    if (!ml || s[ml] != '/')
        return false;
    const unsigned char *p = s + ml, *u = p;
    while (p < end && (cls[*p] & VIS))
        p++;
    if (end - p < 11 || memcmp(p, " HTTP/1.", 8) ||
        (p[8] != '0' && p[8] != '1') || p[9] != '\r' || p[10] != '\n')
        return false;
    out->url = (const char *)u;
    out->url_len = (size_t)(p - u);
    out->http_minor = (unsigned)(p[8] - '0');
    p = scan_fields(p + 11, end, hdrs, max_hdrs, &out->flags,
                    &out->content_length, &out->nh);
    if (!p)
        return false;
    if (out->http_minor == 0 && !(out->flags & F_CONNECTION_KEEP_ALIVE))
        return false;
    out->head_len = (size_t)(p - s);
    return true;
}

bool gw_head_scan_response(const char *buf, size_t len, size_t max_head,
                           sy_header *hdrs, size_t max_hdrs,
                           gw_head_resp *out) {
    if (len > max_head)
        len = max_head;
    const unsigned char *s = (const unsigned char *)buf, *end = s + len, *p;
    if (len < 19 || memcmp(s, "HTTP/1.", 7) || (s[7] != '0' && s[7] != '1') ||
        s[8] != ' ' || s[9] < '2' || s[9] > '5' || s[10] < '0' || s[10] > '9' ||
        s[11] < '0' || s[11] > '9' || s[12] != ' ')
        return false;
    unsigned st = (unsigned)(s[9] - '0') * 100 + (unsigned)(s[10] - '0') * 10 +
                  (unsigned)(s[11] - '0');
    if (st == 204 || st == 304)
        return false; /* no body whatever the head says: http-parser's */
    for (p = s + 13; p < end && (cls[*p] & VALUE);)
        p++;
    if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
        return false;
    out->status = st;
    out->http_minor = (unsigned)(s[7] - '0');
    p = scan_fields(p + 2, end, hdrs, max_hdrs, &out->flags,
                    &out->content_length, &out->nh);
    if (!p || !(out->flags & F_CONTENTLENGTH))
        return false; /* chunked, or to the connection's end */
    if (out->http_minor == 0 && !(out->flags & F_CONNECTION_KEEP_ALIVE))
        return false;
    out->head_len = (size_t)(p - s);
    return true;
}

/* on_message_complete, then true when the parser stops there */
static bool message_done(http_parser *p, const http_parser_settings *s) {
    if (s->on_message_complete && s->on_message_complete(p))
        p->http_errno = HPE_CB_message_complete;
    return HTTP_PARSER_ERRNO(p) != HPE_OK;
}

#define FAST_MAX_HDRS 64

size_t gw_fast_execute_response(http_parser *p, const http_parser_settings *s,
                                gw_fast_msg *f, const char *data, size_t len) {
    if (HTTP_PARSER_ERRNO(p) != HPE_OK)
        return http_parser_execute(p, s, data, len);
    if (!len) {
        if (!f->left)
            return http_parser_execute(p, s, data, len);
        p->http_errno = HPE_INVALID_EOF_STATE; /* a body cut short */
        return 1;
    }
    size_t off = 0;
    for (;;) {
        if (f->left && off == len)
            return off; /* (no on_body without a byte) */
        if (f->left) {  /* http-parser's s_body_identity */
            size_t n = len - off < f->left ? len - off : (size_t)f->left;
            f->left -= n;
            p->content_length -= n;
            off += n;
            if (s->on_body && s->on_body(p, data + off - n, n)) {
                p->http_errno = HPE_CB_body;
                return f->left ? off : off - 1;
            }
            if (f->left)
                return off;
            if (message_done(p, s))
                return off;
        }
        if (off == len)
            return off;
        sy_header hs[FAST_MAX_HDRS];
        gw_head_resp h;
        if (f->mid ||
            !gw_head_scan_response(data + off, len - off, HTTP_MAX_HEADER_SIZE,
                                   hs, FAST_MAX_HDRS, &h))
            return off + http_parser_execute(p, s, data + off, len - off);
        p->flags = 0;
        p->uses_transfer_encoding = 0;
        p->content_length = UINT64_MAX;
        if (s->on_message_begin && s->on_message_begin(p))
            p->http_errno = HPE_CB_message_begin;
        if (HTTP_PARSER_ERRNO(p) != HPE_OK)
            return off + 1;
        p->http_major = 1;
        p->http_minor = h.http_minor;
        p->status_code = h.status;
        for (size_t i = 0; i < h.nh; i++) {
            if (s->on_header_field &&
                s->on_header_field(p, hs[i].name.ptr, hs[i].name.len))
                p->http_errno = HPE_CB_header_field;
            else if (s->on_header_value &&
                     s->on_header_value(p, hs[i].value.ptr, hs[i].value.len))
                p->http_errno = HPE_CB_header_value;
            if (HTTP_PARSER_ERRNO(p) != HPE_OK)
                return (size_t)(hs[i].value.ptr - data);
        }
        p->flags = (uint8_t)h.flags;
        p->content_length = h.content_length;
        p->upgrade = 0;
        off += h.head_len - 1; /* where http-parser is at headers_complete */
        switch (s->on_headers_complete ? s->on_headers_complete(p) : 0) {
        case 0: break;
        case 2: p->upgrade = 1; /* fall through */
        case 1: p->flags |= F_SKIPBODY; break;
        default: p->http_errno = HPE_CB_headers_complete; return off;
        }
        if (HTTP_PARSER_ERRNO(p) != HPE_OK)
            return off;
        off++; /* the head's last LF */
        p->nread = 0;
        if (p->upgrade) { /* the rest is another protocol's */
            message_done(p, s);
            return off;
        }
        if ((p->flags & F_SKIPBODY) || !h.content_length) {
            if (message_done(p, s))
                return off;
        } else {
            f->left = h.content_length;
        }
    }
}
