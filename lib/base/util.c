/*
 * util.c - allocator hooks, growable arrays, arenas, buffers, hashing and
 * error filling.
 */
#include "base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void *libc_malloc(void *d, size_t n) {
    SY_UNUSED(d);
    return malloc(n);
}
static void *libc_realloc(void *d, void *p, size_t n) {
    SY_UNUSED(d);
    return realloc(p, n);
}
static void libc_free(void *d, void *p) {
    SY_UNUSED(d);
    free(p);
}

void sy__alloc_init(sy__alloc *out, const sy_allocator *user) {
    if (user && user->malloc && user->realloc && user->free) {
        out->malloc = user->malloc;
        out->realloc = user->realloc;
        out->free = user->free;
        out->data = user->data;
    } else {
        sy__alloc_default(out);
    }
}

void sy__alloc_libc(sy__alloc *out) {
    out->malloc = libc_malloc;
    out->realloc = libc_realloc;
    out->free = libc_free;
    out->data = NULL;
}

void *sy__malloc(const sy__alloc *a, size_t size) {
    return a->malloc(a->data, size ? size : 1);
}

void *sy__calloc(const sy__alloc *a, size_t n, size_t size) {
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = sy__alloc_default_calloc(a, n * size);
    if (p != SY_ALLOC_NOT_DEFAULT)
        return p;
    p = sy__malloc(a, n * size);
    if (p)
        memset(p, 0, (n * size) > 0 ? n * size : 1);
    return p;
}

void *sy__realloc(const sy__alloc *a, void *ptr, size_t size) {
    return a->realloc(a->data, ptr, size ? size : 1);
}

void *sy__grow(const sy__alloc *a, void *items, size_t *cap, size_t need,
               size_t first, size_t size) {
    size_t n = *cap ? *cap : first ? first : 1;
    while (n < need) {
        if (n > SIZE_MAX / 2)
            return NULL;
        n *= 2;
    }
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = sy__realloc(a, items, n * size);
    if (p)
        *cap = n;
    return p;
}

void sy__free(const sy__alloc *a, void *ptr) {
    if (ptr)
        a->free(a->data, ptr);
}

char *sy__strndup(const sy__alloc *a, const char *s, size_t n) {
    char *p = sy__malloc(a, n + 1);
    if (p) {
        if (n)
            memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

char *sy__strdup(const sy__alloc *a, const char *s) {
    return sy__strndup(a, s, strlen(s));
}

/* ---- arena ---- */

void sy__arena_init(sy__arena *ar, const sy__alloc *alloc, size_t chunk_size) {
    ar->alloc = alloc;
    ar->head = NULL;
    if (!chunk_size)
        chunk_size = 1024;
    ar->chunk_size =
        (uint32_t)(chunk_size < SY_ARENA_CHUNK_MAX ? chunk_size
                                                   : SY_ARENA_CHUNK_MAX);
    ar->pad = 0;
}

/* A new chunk of at least `size` bytes at the head. */
static sy__arena_chunk *arena_grow(sy__arena *ar, size_t size) {
    size_t want = ar->chunk_size ? ar->chunk_size : SY_ARENA_SMALL_CHUNK;
    if (want < size)
        want = size;
    if (want > SY_ARENA_CHUNK_MAX)
        return NULL;
    sy__arena_chunk *n = sy__malloc(ar->alloc, sizeof(sy__arena_chunk) + want);
    if (!n)
        return NULL;
    n->size = (uint32_t)want;
    n->used = 0;
    n->next = ar->head;
    ar->head = n;
    return n;
}

/* The slow paths of util.h's inline sy__arena_alloc and
 * sy__arena_alloc_bytes: the head chunk has no room for `size` bytes
 * (rounded as the caller rounds them). */
void *sy__arena_alloc_new(sy__arena *ar, size_t size) {
    sy__arena_chunk *c = arena_grow(ar, size);
    if (!c)
        return NULL;
    c->used = (uint32_t)size;
    return c->data;
}

char *sy__arena_strndup(sy__arena *ar, const char *s, size_t n) {
    char *p = sy__arena_alloc_bytes(ar, n + 1);
    if (p) {
        if (n)
            memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

char *sy__arena_authority(sy__arena *ar, const char *host, uint16_t port,
                          bool secure) {
    size_t hl = strlen(host);
    char *buf = sy__arena_alloc_bytes(ar, hl + 2 + 6 + 1);
    if (buf)
        sy__authority_format(buf, host, hl, port, secure);
    return buf;
}

size_t sy__authority_format(char *buf, const char *host, size_t hl,
                            uint16_t port, bool secure) {
    bool v6 = memchr(host, ':', hl) && host[0] != '[';
    size_t n = 0;
    if (v6)
        buf[n++] = '[';
    memcpy(buf + n, host, hl);
    n += hl;
    if (v6)
        buf[n++] = ']';
    if (port != (secure ? 443 : 80)) {
        char digits[6];
        size_t d = 0;
        do
            digits[d++] = (char)('0' + port % 10);
        while ((port /= 10) != 0);
        buf[n++] = ':';
        while (d)
            buf[n++] = digits[--d];
    }
    buf[n] = '\0';
    return n;
}

char *sy__arena_strdup(sy__arena *ar, const char *s) {
    return sy__arena_strndup(ar, s, strlen(s));
}

void sy__arena_reset(sy__arena *ar) {
    sy__arena_chunk *keep = NULL;
    for (sy__arena_chunk *c = ar->head; c; c = c->next)
        if (!keep || c->size > keep->size)
            keep = c;
    sy__arena_chunk *c = ar->head;
    while (c) {
        sy__arena_chunk *next = c->next;
        if (c != keep)
            sy__free(ar->alloc, c);
        c = next;
    }
    ar->head = keep;
    if (keep) {
        keep->next = NULL;
        keep->used = 0;
        if (keep->size > ar->chunk_size)
            ar->chunk_size = keep->size;
    }
}

void sy__arena_free(sy__arena *ar) {
    sy__arena_chunk *c = ar->head;
    while (c) {
        sy__arena_chunk *next = c->next;
        sy__free(ar->alloc, c);
        c = next;
    }
    ar->head = NULL;
}

/* ---- buffers ---- */

void sy__buf_init(sy__buf *b, const sy__alloc *alloc) {
    b->alloc = alloc;
    b->ptr = NULL;
    b->len = b->cap = 0;
    b->failed = false;
}

void sy__buf_free(sy__buf *b) {
    sy__free(b->alloc, b->ptr);
    b->ptr = NULL;
    b->len = b->cap = 0;
}

bool sy__buf_reserve(sy__buf *b, size_t extra) {
    if (b->failed)
        return false;
    if (extra > SIZE_MAX - b->len - 1) {
        b->failed = true;
        return false;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = sy__realloc(b->alloc, b->ptr, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->ptr = p;
    b->cap = cap;
    return true;
}

void sy__buf_append(sy__buf *b, const char *s, size_t n) {
    if (!sy__buf_reserve(b, n))
        return;
    if (n)
        memcpy(b->ptr + b->len, s, n);
    b->len += n;
    b->ptr[b->len] = '\0';
}

void sy__buf_puts(sy__buf *b, const char *s) {
    sy__buf_append(b, s, strlen(s));
}

void sy__buf_putc(sy__buf *b, char c) {
    sy__buf_append(b, &c, 1);
}

void sy__buf_put_int(sy__buf *b, int64_t v) {
    char digits[24];
    size_t n = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        digits[sizeof digits - 1 - n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        digits[sizeof digits - 1 - n++] = '-';
    sy__buf_append(b, digits + sizeof digits - n, n);
}

void sy__buf_json_string(sy__buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    sy__buf_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        /* a run of characters that need no escape, appended at once */
        size_t j = i;
        while (j < n && (unsigned char)s[j] >= 0x20 && s[j] != '"' &&
               s[j] != '\\')
            j++;
        if (j > i) {
            sy__buf_append(b, s + i, j - i);
            i = j;
            if (i == n)
                break;
        }
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': sy__buf_append(b, "\\\"", 2); break;
        case '\\': sy__buf_append(b, "\\\\", 2); break;
        case '\n': sy__buf_append(b, "\\n", 2); break;
        case '\r': sy__buf_append(b, "\\r", 2); break;
        case '\t': sy__buf_append(b, "\\t", 2); break;
        default:
            if (c < 0x20) {
                char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
                sy__buf_append(b, e, 6);
            } else {
                sy__buf_putc(b, (char)c);
            }
        }
    }
    sy__buf_putc(b, '"');
}

/* ---- hashing ---- */

__extension__ typedef unsigned __int128 sy__u128;

static inline uint64_t mum(uint64_t a, uint64_t b) {
    sy__u128 r = (sy__u128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* Words are read little-endian byte by byte, so a hash (and every
 * fingerprint built on it) is the same on every machine whatever its byte
 * order; compilers turn these into one load on little-endian targets. */
static inline uint64_t rd64(const unsigned char *p) {
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
           (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 |
           (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

static inline uint64_t rd32(const unsigned char *p) {
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
           (uint64_t)p[3] << 24;
}

uint64_t sy__hash_mix(uint64_t a, uint64_t b) {
    return mum(a ^ 0xa0761d6478bd642full, b ^ 0xe7037ed1a0b428dbull);
}

#define HASH_K0 0xa0761d6478bd642full
#define HASH_K1 0xe7037ed1a0b428dbull
#define HASH_K2 0x8ebc6af09c88c6e3ull

/* The last 0..15 bytes folded into the state h of the 16-byte blocks. */
static inline uint64_t hash_tail(const unsigned char *p, size_t len,
                                 uint64_t h) {
    uint64_t a = 0, b = 0;
    if (len >= 8) {
        a = rd64(p);
        b = rd64(p + len - 8);
    } else if (len >= 4) {
        a = rd32(p);
        b = rd32(p + len - 4);
    } else if (len > 0) {
        a = ((uint64_t)p[0] << 16) | ((uint64_t)p[len >> 1] << 8) | p[len - 1];
    }
    return mum(mum(a ^ HASH_K1, b ^ h), (uint64_t)len ^ HASH_K2);
}

uint64_t sy__hash64(const void *data, size_t len, uint64_t seed) {
    const unsigned char *p = data;
    uint64_t h = seed ^ HASH_K0 ^ (uint64_t)len * HASH_K2;
    while (len >= 16) {
        h = mum(rd64(p) ^ HASH_K1, rd64(p + 8) ^ h);
        p += 16;
        len -= 16;
    }
    return hash_tail(p, len, h);
}

/* sy__hash64 in steps over text that is read once for other reasons too:
 * the same 16-byte blocks in the same order, then the same tail, so the
 * value is sy__hash64's. */
void sy__hash64_begin(sy__hash_stream *s, const void *data, size_t len,
                      uint64_t seed) {
    s->p = data;
    s->len = len;
    s->done = 0;
    s->h = seed ^ HASH_K0 ^ (uint64_t)len * HASH_K2;
}

void sy__hash64_advance(sy__hash_stream *s, size_t upto) {
    if (upto > s->len)
        upto = s->len;
    size_t d = s->done;
    uint64_t h = s->h;
    for (const unsigned char *p = s->p + d; d + 16 <= upto; p += 16, d += 16)
        h = mum(rd64(p) ^ HASH_K1, rd64(p + 8) ^ h);
    s->h = h;
    s->done = d;
}

uint64_t sy__hash64_end(sy__hash_stream *s) {
    sy__hash64_advance(s, s->len);
    return hash_tail(s->p + s->done, s->len - s->done, s->h);
}

/* ---- paths ---- */

/* Paths are built for every route and entry, so this formats only what
 * they use (%s and %zu) without going through vsnprintf. Truncates to
 * cap - 1 bytes like snprintf. */
void sy__path_printf(char *out, size_t cap, const char *fmt, ...) {
    if (!cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    size_t o = 0;
    for (const char *f = fmt; *f && o + 1 < cap; f++) {
        if (f[0] == '%' && f[1] == 's') {
            const char *a = va_arg(ap, const char *);
            while (a && *a && o + 1 < cap)
                out[o++] = *a++;
            f++;
        } else if (f[0] == '%' && f[1] == 'z' && f[2] == 'u') {
            char digits[24];
            size_t v = va_arg(ap, size_t), n = 0;
            do {
                digits[n++] = (char)('0' + v % 10);
                v /= 10;
            } while (v);
            while (n && o + 1 < cap)
                out[o++] = digits[--n];
            f += 2;
        } else {
            out[o++] = *f;
        }
    }
    out[o] = '\0';
    va_end(ap);
}

size_t sy__int_text(int64_t v, char *num) {
    char d[24];
    size_t n = 0, k = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do
        d[n++] = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    if (v < 0)
        num[k++] = '-';
    while (n)
        num[k++] = d[--n];
    num[k] = '\0';
    return k;
}

size_t sy__path_join(char *out, size_t cap, const char *base,
                     const char *field) {
    if (!cap)
        return 0;
    size_t bl = strlen(base), fl = strlen(field), o = 0;
    size_t n = bl < cap - 1 ? bl : cap - 1;
    memcpy(out, base, n);
    o = n;
    if (bl && o + 1 < cap)
        out[o++] = '.';
    n = fl < cap - 1 - o ? fl : cap - 1 - o;
    memcpy(out + o, field, n);
    o += n;
    out[o] = '\0';
    return o;
}

void sy__path_index(char *out, size_t cap, size_t at, size_t i) {
    if (i < 10 && cap > 4 && at < cap - 4) { /* "[i]": most lists */
        out[at] = '[';
        out[at + 1] = (char)('0' + i);
        out[at + 2] = ']';
        out[at + 3] = '\0';
        return;
    }
    if (!cap || at + 1 >= cap) {
        if (cap && at < cap)
            out[at] = '\0';
        return;
    }
    if (cap - at > 24) { /* room for any index: no checks per byte */
        char d[20], *o = out + at;
        size_t n = 0;
        do
            d[n++] = (char)('0' + i % 10);
        while ((i /= 10) != 0);
        *o++ = '[';
        while (n)
            *o++ = d[--n];
        o[0] = ']';
        o[1] = '\0';
        return;
    }
    char digits[24];
    size_t n = 0, o = at;
    do
        digits[n++] = (char)('0' + i % 10);
    while ((i /= 10) != 0);
    out[o++] = '[';
    while (n && o + 1 < cap)
        out[o++] = digits[--n];
    if (o + 1 < cap)
        out[o++] = ']';
    out[o] = '\0';
}

/* ---- errors ---- */

int sy__error_set(sy_error *err, int code, const char *path, const char *fmt,
                  ...) {
    if (!err)
        return code;
    err->code = code;
    err->line = err->column = 0;
    err->offset = 0;
    snprintf(err->path, sizeof err->path, "%s", path ? path : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return code;
}

void sy__error_prefix_path(sy_error *err, const char *prefix) {
    if (!err || !prefix || !*prefix)
        return;
    char tmp[2 * sizeof err->path + 2];
    if (err->path[0] && err->path[0] != '[')
        snprintf(tmp, sizeof tmp, "%s.%s", prefix, err->path);
    else
        snprintf(tmp, sizeof tmp, "%s%s", prefix, err->path);
    size_t n = strnlen(tmp, sizeof err->path - 1);
    memcpy(err->path, tmp, n);
    err->path[n] = '\0';
}

void sy__error_clear(sy_error *err) {
    if (err)
        memset(err, 0, sizeof *err);
}

uint64_t sy__now_monotonic_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int64_t sy__now_realtime_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool sy__str_ieq(sy_str a, const char *b, size_t blen) {
    if (a.len != blen)
        return false;
    for (size_t i = 0; i < blen; i++) {
        unsigned char x = (unsigned char)a.ptr[i], y = (unsigned char)b[i];
        if (x >= 'A' && x <= 'Z')
            x = (unsigned char)(x + 32);
        if (y >= 'A' && y <= 'Z')
            y = (unsigned char)(y + 32);
        if (x != y)
            return false;
    }
    return true;
}

const char *sy_version(void) {
    return SY_VERSION_STRING;
}

int sy_version_number(void) {
    return SY_VERSION_NUMBER;
}

const char *sy_strerror(int code) {
    switch (code) {
    case SY_OK: return "success";
    case SY_ENOMEM: return "out of memory";
    case SY_EINVAL: return "invalid argument";
    case SY_ESYNTAX: return "JSON syntax error";
    case SY_ETYPE: return "wrong JSON type";
    case SY_EMISSING: return "required field missing or empty";
    case SY_EDUPLICATE: return "duplicate route id";
    case SY_ERANGE: return "number out of range";
    case SY_EURI: return "invalid uri";
    case SY_EUNKNOWN: return "unknown predicate or filter";
    case SY_EARG: return "invalid argument value";
    case SY_ESPEL: return "SpEL expressions are not supported";
    case SY_ENOTRUN: return "not run by this host";
    case SY_ELIMIT: return "limit exceeded";
    case SY_EREGEX: return "invalid regular expression";
    case SY_EPATTERN: return "invalid path or host pattern";
    case SY_ENOTFOUND: return "not found";
    case SY_EEXIST: return "already exists";
    case SY_EBUSY: return "too many retired snapshots";
    case SY_ENOINSTANCE: return "no eligible instance";
    case SY_ECALLBACK: return "host callback failed";
    case SY_EINVALIDDOC: return "no valid route in document";
    case SY_EREENTRANT: return "writer call from inside a callback";
    case SY_ETOOSMALL: return "buffer too small";
    default: return "unknown error";
    }
}

/* ---- sorting by a 64-bit key (util.h) ---- */

static uint64_t key_at(const unsigned char *rec, size_t key_off) {
    uint64_t k;
    memcpy(&k, rec + key_off, sizeof k);
    return k;
}

/* The passes of sy__sort_by_u64 over records of 16 bytes keyed by their
 * first 8 (every caller's: a key and a slot, a pointer and a position),
 * moved as two words instead of a memcpy call each. */
typedef struct rec16 {
    uint64_t key, rest;
} rec16;

static void sort_passes16(rec16 *src, rec16 *dst, size_t n, uint64_t differ,
                          rec16 *base) {
    for (unsigned shift = 0; shift < 64; shift += 8) {
        if (!((differ >> shift) & 0xff))
            continue;
        size_t count[256] = {0};
        for (size_t i = 0; i < n; i++)
            count[(src[i].key >> shift) & 0xff]++;
        size_t pos = 0;
        for (size_t d = 0; d < 256; d++) {
            size_t c = count[d];
            count[d] = pos;
            pos += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[count[(src[i].key >> shift) & 0xff]++] = src[i];
        rec16 *t = src;
        src = dst;
        dst = t;
    }
    if (src != base)
        memcpy(base, src, n * sizeof *src);
}

bool sy__sort_by_u64(const sy__alloc *a, void *base, size_t n, size_t size,
                     size_t key_off) {
    if (n < 2)
        return true;
    /* bytes where the keys differ: a pass over a byte all keys share moves
     * nothing, so it is skipped */
    uint64_t first = key_at(base, key_off), differ = 0, prev = first;
    bool ascending = true; /* already in order: a stable sort moves none */
    for (size_t i = 1; i < n; i++) {
        uint64_t k = key_at((unsigned char *)base + i * size, key_off);
        differ |= k ^ first;
        ascending &= k >= prev;
        prev = k;
    }
    if (!differ || ascending)
        return true;
    unsigned char *tmp = sy__malloc(a, n * size);
    if (!tmp)
        return false;
    if (size == sizeof(rec16) && key_off == 0 &&
        (uintptr_t)base % _Alignof(rec16) == 0) {
        sort_passes16(base, (rec16 *)(void *)tmp, n, differ, base);
        sy__free(a, tmp);
        return true;
    }
    unsigned char *src = base, *dst = tmp;
    for (unsigned shift = 0; shift < 64; shift += 8) {
        if (!((differ >> shift) & 0xff))
            continue;
        size_t count[256] = {0};
        for (size_t i = 0; i < n; i++)
            count[(key_at(src + i * size, key_off) >> shift) & 0xff]++;
        size_t pos = 0;
        for (size_t d = 0; d < 256; d++) {
            size_t c = count[d];
            count[d] = pos;
            pos += c;
        }
        for (size_t i = 0; i < n; i++) {
            const unsigned char *rec = src + i * size;
            size_t d = (key_at(rec, key_off) >> shift) & 0xff;
            memcpy(dst + count[d]++ * size, rec, size);
        }
        unsigned char *t = src;
        src = dst;
        dst = t;
    }
    if (src != base)
        memcpy(base, src, n * size);
    sy__free(a, tmp);
    return true;
}
