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

/* a name or value equal, ASCII case aside, to a lowercase literal of n >= 4
 * bytes; exact for the bytes compared here (tchar or value bytes: only
 * letters change under | 0x20 into letters or '-', and every literal's
 * byte has 0x20 set). Compared a word at a time, the last word overlapping
 * the one before it: s[0..n) only; n <= 24. */
static bool eq_lower(const unsigned char *s, const char *lit, size_t n) {
    uint64_t a, b, c, d;
    if (n < 8) {
        uint32_t e, f, g, h;
        memcpy(&e, s, 4), memcpy(&f, lit, 4);
        memcpy(&g, s + n - 4, 4), memcpy(&h, lit + n - 4, 4);
        return ((e | 0x20202020u) == f) & ((g | 0x20202020u) == h);
    }
    memcpy(&a, s, 8), memcpy(&b, lit, 8);
    memcpy(&c, s + n - 8, 8), memcpy(&d, lit + n - 8, 8);
    if (n > 16) { /* transfer-encoding */
        uint64_t e, f;
        memcpy(&e, s + 8, 8), memcpy(&f, lit + 8, 8);
        if ((e | UINT64_C(0x2020202020202020)) != f)
            return false;
    }
    return ((a | UINT64_C(0x2020202020202020)) == b) &
           ((c | UINT64_C(0x2020202020202020)) == d);
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

/* the names http-parser acts on (it matches them by prefix); the shortest
 * is 7 bytes, so the commonest names (Host, Date, Accept) end at the test
 * of the length */
static int name_kind(const unsigned char *n, size_t len) {
    if (len < 7)
        return H_OTHER;
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
    case 'u': return eq_lower(n, LIT("upgrade")) ? H_BAIL : H_OTHER;
    default: return H_OTHER;
    }
}

/* line_stop(p, end): the first byte in [p, end) that no header line holds
 * before its CR: a control byte other than HTAB (CR, LF, NUL...), DEL or
 * 0x80-0xFF; end when there is none. Every byte of [p, result) is then a
 * value's byte (VALUE). The buffer must hold at least 16 bytes before end
 * (the callers' heads are longer): a line's last part is read as the
 * buffer's last 16 (or 8) bytes, so nothing outside it is ever read.
 * Three ways, the same result: SSE2 16 bytes at a time (x86-64's
 * baseline), 8-byte words (a little-endian GCC/clang target without
 * SSE2), one byte at a time (anything else). GW_HEAD_SCAN_WORDS or
 * GW_HEAD_SCAN_BYTES picks one of the other two: tests/test_head_scan.c is
 * built each way. */
#if defined(GW_HEAD_SCAN_BYTES)
#define LINE_STOP_BYTES 1
#elif defined(GW_HEAD_SCAN_WORDS)
#define LINE_STOP_WORDS 1
#elif defined(__SSE2__)
#define LINE_STOP_SSE2 1
#elif defined(__GNUC__) && defined(__BYTE_ORDER__) &&                          \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define LINE_STOP_WORDS 1
#else
#define LINE_STOP_BYTES 1
#endif

#if defined(LINE_STOP_SSE2)
#include <emmintrin.h>

/* a bit a stop byte: b + 1 (mod 256), signed, below 0x21 holds for
 * 0x00-0x1F and 0x7F-0xFF and nothing else; HTAB is taken apart after */
static inline unsigned stop_mask(const unsigned char *at) {
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)at);
    v = _mm_add_epi8(v, _mm_set1_epi8(1));
    return (unsigned)_mm_movemask_epi8(_mm_cmplt_epi8(v, _mm_set1_epi8(0x21)));
}

static const unsigned char *line_stop(const unsigned char *p,
                                      const unsigned char *end) {
    for (;;) {
        unsigned m;
        if (end - p >= 16) {
            m = stop_mask(p);
            if (!m) {
                p += 16;
                continue;
            }
        } else {
            if (p == end)
                return end;
            m = stop_mask(end - 16) >> (16 - (end - p));
            if (!m)
                return end;
        }
        p += __builtin_ctz(m);
        if (*p != '\t')
            return p;
        p++;
    }
}

/* name_end(p, end): the first byte at or after p that is not a tchar, as
 * the loop below gives it; a line's CR (which is not one) must come before
 * end, and 16 bytes be in the buffer before end. Letters, digits and '-'
 * (all of most names) are passed 16 at a time; any other byte then goes
 * through the table. */
static const unsigned char *name_end(const unsigned char *p,
                                     const unsigned char *end) {
    const __m128i lc = _mm_set1_epi8(0x20);
    for (;;) {
        __m128i v;
        int k = 0; /* bytes before p in v */
        if (end - p >= 16) {
            v = _mm_loadu_si128((const __m128i *)(const void *)p);
        } else {
            k = 16 - (int)(end - p);
            v = _mm_loadu_si128((const __m128i *)(const void *)(end - 16));
        }
        /* letters as x = v | 0x20 in 'a'..'z' (no other byte goes
         * there), digits and '-' as they are: x + 0x1F (v + 0x50), signed,
         * below -128 + 26 (+ 10) for the 26 letters (10 digits) only */
        __m128i x = _mm_or_si128(v, lc);
        __m128i al = _mm_cmplt_epi8(_mm_add_epi8(x, _mm_set1_epi8(0x1F)),
                                    _mm_set1_epi8(-128 + 26));
        __m128i dg = _mm_cmplt_epi8(_mm_add_epi8(v, _mm_set1_epi8(0x50)),
                                    _mm_set1_epi8(-128 + 10));
        __m128i da = _mm_cmpeq_epi8(v, _mm_set1_epi8('-'));
        unsigned ok =
            (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(al, dg), da));
        unsigned m = ~ok >> k; /* (bits above end: not ok) */
        if (!(m & 0xffff) && !k) {
            p += 16;
            continue;
        }
        p += __builtin_ctz(m);
        while (cls[*p] & TCHAR)
            p++;
        return p;
    }
}
#elif defined(LINE_STOP_WORDS)
#define ONES UINT64_C(0x0101010101010101)
#define HIGHS (ONES * 0x80)

/* a byte's high bit for a stop byte of x, exact up to the first one (where
 * the caller looks: a borrow or carry runs only from a stop byte up) */
static inline uint64_t stop_word(uint64_t x) {
    uint64_t ctl = (x - ONES * 0x20) & ~x & HIGHS; /* < 0x20 */
    uint64_t hi = ((x + ONES) | x) & HIGHS;        /* >= 0x7F */
    return ctl | hi;
}

static const unsigned char *line_stop(const unsigned char *p,
                                      const unsigned char *end) {
    for (;;) {
        uint64_t x;
        size_t i;
        if (end - p >= 8) {
            memcpy(&x, p, 8);
            uint64_t m = stop_word(x);
            if (!m) {
                p += 8;
                continue;
            }
            i = (size_t)__builtin_ctzll(m) >> 3;
        } else {
            size_t k = (size_t)(end - p);
            if (!k)
                return end;
            /* the buffer's last 8 bytes, those before p shifted out: the
             * NULs shifted in above end stop it (and start no borrow below
             * them) */
            memcpy(&x, end - 8, 8);
            i = (size_t)__builtin_ctzll(stop_word(x >> (8 * (8 - k)))) >> 3;
            if (i >= k)
                return end;
        }
        p += i;
        if (*p != '\t')
            return p;
        p++;
    }
}
#else
static const unsigned char *line_stop(const unsigned char *p,
                                      const unsigned char *end) {
    while (p < end && (cls[*p] & VALUE))
        p++;
    return p;
}
#endif

#if !defined(LINE_STOP_SSE2)
static const unsigned char *name_end(const unsigned char *p,
                                     const unsigned char *end) {
    (void)end;
    while (cls[*p] & TCHAR) /* a CR comes before end, and is not one */
        p++;
    return p;
}
#endif

/* The header lines and the blank line from p: the end of the head, or NULL
 * when they are not all there or not of the plainly common form. A line is
 * walked once for its end (line_stop: every byte before it a value's
 * byte), then its name (its tchar bytes up to the colon, which the line's
 * CR bounds) and the whitespace after the colon: the value's bytes are not
 * walked again. */
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
        const unsigned char *n = p, *cr = line_stop(p, end);
        if (end - cr < 2 || cr[0] != '\r' || cr[1] != '\n')
            return NULL;
        p = name_end(p, end);
        if (*p != ':' || p == n)
            return NULL;
        size_t nlen = (size_t)(p - n);
        p++;
        p += *p == ' ';
        while (*p == ' ' || *p == '\t')
            p++;
        const unsigned char *v = p;
        if (p == cr || cr[-1] == ' ' || cr[-1] == '\t')
            return NULL;
        size_t vlen = (size_t)(cr - v);
        p = cr + 2;
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
        if (f->on_headers && f->on_headers(p, hs, h.nh)) {
            p->http_errno = HPE_CB_header_field;
            return off + 1;
        }
        for (size_t i = 0; i < h.nh && !f->on_headers; i++) {
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
        f->lines = true;
        int hc = s->on_headers_complete ? s->on_headers_complete(p) : 0;
        f->lines = false;
        switch (hc) {
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

void gw_head_trim_values(sy_header *hdrs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        sy_str *v = &hdrs[i].value;
        while (v->len &&
               (v->ptr[v->len - 1] == ' ' || v->ptr[v->len - 1] == '\t'))
            v->len--;
    }
}
