/*
 * util.c - small helpers for the mini-gateway: a growable buffer (the
 * gateway's out-of-memory policy, gw.h), address parsing, the one clock,
 * lazily re-armed deadlines, logging, status reasons, SO_REUSEPORT
 * listeners.
 */
#define _DEFAULT_SOURCE
#include "gw.h"
#include "utf8.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

bool gw_buf_reserve(gw_buf *b, size_t extra) {
    if (b->failed)
        return false;
    if (b->len + extra + 1 <= b->cap && b->p)
        return true;
    if (extra > SIZE_MAX / 4 - b->len) {
        b->failed = true;
        return false;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = true; /* the owner sees it once, when it is done */
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void gw_buf_add_grow(gw_buf *b, const void *data, size_t len) {
    if (!gw_buf_reserve(b, len))
        return;
    if (len)
        memcpy(b->p + b->len, data, len);
    b->len += len;
    b->p[b->len] = 0;
}

size_t gw_u64_text(char *dst, uint64_t v) {
    static const char two[] = "0001020304050607080910111213141516171819"
                              "2021222324252627282930313233343536373839"
                              "4041424344454647484950515253545556575859"
                              "6061626364656667686970717273747576777879"
                              "8081828384858687888990919293949596979899";
    static const uint64_t ten[20] = {1u,
                                     10u,
                                     100u,
                                     1000u,
                                     10000u,
                                     100000u,
                                     1000000u,
                                     10000000u,
                                     100000000u,
                                     1000000000u,
                                     10000000000u,
                                     100000000000u,
                                     1000000000000u,
                                     10000000000000u,
                                     100000000000000u,
                                     1000000000000000u,
                                     10000000000000000u,
                                     100000000000000000u,
                                     1000000000000000000u,
                                     10000000000000000000u};
    /* the digit count from the bit width (1233 / 4096 ~ log10 2), then
     * the digits straight into dst from its end, two a division */
    unsigned bits = 64u - (unsigned)__builtin_clzll(v | 1u);
    size_t n = (bits * 1233u >> 12) + 1u;
    n -= (v | 1u) < ten[n - 1]; /* v | 1: one digit for 0 */
    char *p = dst + n;
    while (v >= 100) {
        p -= 2;
        memcpy(p, two + 2 * (v % 100), 2);
        v /= 100;
    }
    if (v >= 10)
        memcpy(p - 2, two + 2 * v, 2);
    else
        p[-1] = (char)('0' + v);
    return n;
}

void gw_buf_addu(gw_buf *b, uint64_t v) {
    char d[20];
    gw_buf_add(b, d, gw_u64_text(d, v));
}

void gw_buf_status_line(gw_buf *b, int status) {
    if (status == 200) { /* most answers: one literal, nothing to build */
        gw_buf_add(b, "HTTP/1.1 200 OK\r\n", 17);
        return;
    }
    const char *why = gw_status_text(status);
    size_t wl = strlen(why);
    char line[64];
    memcpy(line, "HTTP/1.1 ", 9);
    size_t n = 9 + gw_u64_text(line + 9, (uint64_t)(status < 0 ? 0 : status));
    line[n++] = ' ';
    if (wl + 2 > sizeof line - n) { /* no reason text is this long */
        gw_buf_add(b, line, n);
        gw_buf_add(b, why, wl);
        gw_buf_add(b, "\r\n", 2);
        return;
    }
    memcpy(line + n, why, wl);
    memcpy(line + n + wl, "\r\n", 2);
    gw_buf_add(b, line, n + wl + 2);
}

void gw_buf_content_length(gw_buf *b, uint64_t v) {
    char line[16 + 20 + 2];
    memcpy(line, "Content-Length: ", 16);
    size_t n = 16 + gw_u64_text(line + 16, v);
    memcpy(line + n, "\r\n", 2);
    gw_buf_add(b, line, n + 2);
}

void gw_copy_str(char *dst, size_t cap, const char *src) {
    size_t n = src ? strnlen(src, cap - 1) : 0;
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
}

void gw_buf_printf(gw_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char tmp[512];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof tmp) {
        gw_buf_add(b, tmp, (size_t)n);
        return;
    }
    if (!gw_buf_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static bool json_plain_byte(unsigned char ch) {
    return ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\';
}

/* How many of s's first bytes a JSON string holds as they are (none
 * below 0x20, '"', '\\', 0x7f or from 0x80: those are checked as UTF-8):
 * sixteen bytes a step with SSE2. */
static size_t json_plain(const char *s, size_t len) {
    size_t i = 0;
#ifdef __SSE2__
    const __m128i ctl = _mm_set1_epi8(0x1f), quote = _mm_set1_epi8('"'),
                  bsl = _mm_set1_epi8('\\'), del = _mm_set1_epi8(0x7f);
    for (; i + 16 <= len; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i m = _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(x, ctl), x),
                         _mm_cmpeq_epi8(x, quote)),
            _mm_or_si128(_mm_cmpeq_epi8(x, bsl), _mm_cmpeq_epi8(x, del)));
        unsigned bits = (unsigned)(_mm_movemask_epi8(m) | _mm_movemask_epi8(x));
        if (bits)
            return i + (size_t)__builtin_ctz(bits);
    }
#endif
    while (i < len && json_plain_byte((unsigned char)s[i]))
        i++;
    return i;
}

/* The well-formed UTF-8 sequence at s (left bytes on) appended as it is,
 * or "\ufffd" for its first byte when it is not one; how many bytes of s
 * it took. The one place a byte from 0x80 of JSON text others read is
 * judged: a string (json_str) and a whole answer (gw_json_text_utf8). */
static size_t utf8_or_fffd(gw_buf *b, const char *s, size_t left) {
    size_t n = utf8_seq_len((const unsigned char *)s, left);
    if (n) {
        gw_buf_add(b, s, n);
        return n;
    }
    gw_buf_add(b, "\\ufffd", 6);
    return 1;
}

/* s as a JSON string; utf8: a byte that is not part of well-formed UTF-8
 * written U+FFFD, else as it is (gw.h). */
static void json_str(gw_buf *b, const char *s, size_t len, bool utf8) {
    if (!gw_buf_reserve(b, len + 2))
        return;
    size_t run = json_plain(s, len);
    if (run == len) { /* the common string: nothing to escape */
        char *d = b->p + b->len;
        d[0] = '"';
        if (len)
            memcpy(d + 1, s, len);
        d[len + 1] = '"';
        d[len + 2] = '\0';
        b->len += len + 2;
        return;
    }
    gw_buf_add(b, "\"", 1);
    for (size_t i = 0;; run = json_plain(s + i, len - i)) {
        /* each run of plain bytes in one append */
        gw_buf_add(b, s + i, run);
        i += run;
        if (i == len)
            break;
        unsigned char ch = (unsigned char)s[i++];
        if (ch == '"' || ch == '\\') {
            char e[2] = {'\\', (char)ch};
            gw_buf_add(b, e, 2);
        } else if (ch >= 0x80 && utf8) {
            i += utf8_or_fffd(b, s + i - 1, len - i + 1) - 1;
        } else if (ch >= 0x80) {
            gw_buf_add(b, s + i - 1, 1);
        } else {
            gw_buf_printf(b, "\\u%04x", ch);
        }
    }
    gw_buf_add(b, "\"", 1);
}

void gw_buf_json_str(gw_buf *b, const char *s, size_t len) {
    json_str(b, s, len, false);
}

void gw_buf_json_utf8(gw_buf *b, const char *s, size_t len) {
    json_str(b, s, len, true);
}

/* How many of s's first bytes are ASCII: sixteen a step with SSE2. */
static size_t ascii_run(const char *s, size_t len) {
    size_t i = 0;
#ifdef __SSE2__
    for (; i + 16 <= len; i += 16) {
        unsigned bits = (unsigned)_mm_movemask_epi8(
            _mm_loadu_si128((const __m128i *)(s + i)));
        if (bits)
            return i + (size_t)__builtin_ctz(bits);
    }
#endif
    while (i < len && (unsigned char)s[i] < 0x80)
        i++;
    return i;
}

bool gw_json_text_utf8(gw_buf *out, const char *text, size_t len) {
    size_t i = 0;
    for (;;) { /* the common answer: well-formed, nothing copied */
        i += ascii_run(text + i, len - i);
        if (i == len)
            return false;
        size_t n = utf8_seq_len((const unsigned char *)text + i, len - i);
        if (!n)
            break;
        i += n;
    }
    gw_buf_add(out, text, i);
    while (i < len) {
        size_t run = ascii_run(text + i, len - i);
        gw_buf_add(out, text + i, run);
        i += run;
        if (i < len)
            i += utf8_or_fffd(out, text + i, len - i);
    }
    return true;
}

void gw_buf_free(gw_buf *b) {
    free(b->p);
    *b = (gw_buf){0};
}

int gw_parse_addr(const char *s, char *host, size_t hostcap, int *port) {
    const char *colon = strrchr(s, ':');
    if (!colon) { /* a bare port */
        char *end;
        long p = strtol(s, &end, 10);
        if (*s == 0 || *end || p < 0 || p > 65535)
            return -1;
        snprintf(host, hostcap, "0.0.0.0");
        *port = (int)p;
        return 0;
    }
    size_t hl = (size_t)(colon - s);
    if (hl >= hostcap)
        return -1;
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (colon[1] == 0 || *end || p < 0 || p > 65535)
        return -1;
    memcpy(host, s, hl);
    host[hl] = 0;
    if (hl == 0)
        snprintf(host, hostcap, "0.0.0.0");
    *port = (int)p;
    return 0;
}

uint64_t gw_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t gw_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void gw_log(const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "mini-gateway: %s\n", line);
}

const char *gw_status_text(int s) {
    switch (s) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 418: return "I'm a teapot";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    case 508: return "Loop Detected";
    }
    return "Status";
}

int gw_listen_tcp(uv_loop_t *loop, uv_tcp_t *tcp, const char *host, int port,
                  bool reuseport, uv_connection_cb cb) {
    struct sockaddr_in sa;
    int rc = uv_ip4_addr(host, port, &sa);
    if (rc)
        return rc;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    void *data = tcp->data;
    if ((rc = uv_tcp_init(loop, tcp))) {
        close(fd);
        return rc;
    }
    tcp->data = data;
    if ((rc = uv_tcp_open(tcp, fd)))
        return rc;
    return uv_listen((uv_stream_t *)tcp, 1024, cb);
}

char *gw_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    gw_buf b = {0};
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        gw_buf_add(&b, tmp, n);
    int bad = ferror(f);
    fclose(f);
    if (!b.p)
        gw_buf_add(&b, "", 0);
    if (bad || b.failed) {
        gw_buf_free(&b);
        return NULL;
    }
    *len = b.len;
    return b.p;
}

/* ---- deadlines (gw.h) ---- */

static void deadline_fire(uv_timer_t *t) {
    gw_deadline *d = GW_OWNER(t, gw_deadline, timer);
    d->armed = 0; /* the timer is no longer active */
    if (!d->due)
        return; /* cleared since it was armed */
    uint64_t now = uv_now(d->loop);
    if (now < d->due) { /* armed for an earlier deadline, since moved on */
        d->armed = d->due;
        uv_timer_start(t, deadline_fire, d->due - now, 0);
        return;
    }
    d->due = 0;
    d->cb(t);
}

void gw_deadline_init(uv_loop_t *loop, gw_deadline *d, void *data) {
    uv_timer_init(loop, &d->timer);
    d->timer.data = data;
    d->loop = loop;
    d->due = d->armed = 0;
    d->cb = NULL;
}

void gw_deadline_set(gw_deadline *d, uv_timer_cb cb, uint64_t ms) {
    uint64_t due = uv_now(d->loop) + ms;
    d->cb = cb;
    d->due = due ? due : 1;
    if (d->armed && d->armed <= due)
        return; /* fires first, then re-arms for the rest */
    d->armed = due ? due : 1;
    uv_timer_start(&d->timer, deadline_fire, ms, 0);
}

void gw_deadline_clear(gw_deadline *d) {
    d->due = 0;
}
