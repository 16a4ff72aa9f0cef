/*
 * util.h - the leaf module: allocator hooks, growable arrays, arenas,
 * growable buffers, hashing and error filling. Nothing here knows about
 * routes.
 */
#ifndef SY_UTIL_H
#define SY_UTIL_H

#include "base/alloc_map.h"
#include "switchyard.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>

#define SY_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
/* "No slot": an empty entry, or a missing index, in every uint32_t table
 * of lib/ (slots, groups, nodes, instances). The one definition. */
#define SY_NONE UINT32_MAX

/* The size of a hash table: the least power of two >= n, from `least`
 * (itself a power of two) up. */
static inline size_t sy__pow2_at_least(size_t least, size_t n) {
    size_t cap = least;
    while (cap < n)
        cap *= 2;
    return cap;
}

/* Resolve user hooks (NULL or incomplete: sy__alloc_default). */
void sy__alloc_init(sy__alloc *out, const sy_allocator *user);
/* libc's malloc, realloc and free as they are. */
void sy__alloc_libc(sy__alloc *out);
void *sy__malloc(const sy__alloc *a, size_t size);
void *sy__calloc(const sy__alloc *a, size_t n, size_t size); /* overflow-safe */
void *sy__realloc(const sy__alloc *a, void *ptr, size_t size);
void sy__free(const sy__alloc *a, void *ptr);
/* The one "grow an array by doubling" of lib/: `items` (*cap items of
 * `size` bytes; *cap 0: none yet) reallocated to hold at least `need`,
 * the capacity doubled from *cap (from `first` when 0) until it does.
 * Returns the new array and sets *cap; NULL, items and *cap untouched,
 * when out of memory or the count or its bytes overflow size_t. */
void *sy__grow(const sy__alloc *a, void *items, size_t *cap, size_t need,
               size_t first, size_t size);
char *sy__strndup(const sy__alloc *a, const char *s, size_t n);
char *sy__strdup(const sy__alloc *a, const char *s);

/*
 * Arena: bump allocation in chunks, freed all at once. Used for everything
 * a parsed route owns, and (with reset) for per-match scratch.
 */
typedef struct sy__arena_chunk {
    struct sy__arena_chunk *next;
    /* usable bytes after the 16-byte header, and those handed out: 32
     * bits, so a chunk holds less than 4 GiB (a larger allocation fails) */
    uint32_t size;
    uint32_t used;
    _Alignas(8) unsigned char data[];
} sy__arena_chunk;
/* The most a chunk holds. */
#define SY_ARENA_CHUNK_MAX ((size_t)UINT32_MAX - 16u)
typedef struct sy__arena {
    const sy__alloc *alloc;
    sy__arena_chunk *head;
    /* default size of a new chunk; 0 (set by the owner after init):
     * SY_ARENA_SMALL_CHUNK, and then chunk_size and pad stay 0, so an
     * owner may lay a pointer that is NULL while it allocates over the
     * two (struct sy_route's canonical text) */
    uint32_t chunk_size;
    uint32_t pad; /* 0 */
} sy__arena;
/* A new chunk of an arena whose chunk_size is 0. */
#define SY_ARENA_SMALL_CHUNK 256u

void sy__arena_init(sy__arena *ar, const sy__alloc *alloc, size_t chunk_size);
/* util.c: a new head chunk holding the `size` bytes asked for. */
void *sy__arena_alloc_new(sy__arena *ar, size_t size);

/* 8-byte aligned (enough for every object the library keeps: pointers,
 * 64-bit integers, doubles; nothing needs max_align_t's 16), so a route's
 * small objects are not padded to 16. Inline: trees and routes make many
 * small ones. */
static inline void *sy__arena_alloc(sy__arena *ar, size_t size) {
    if (size > SY_ARENA_CHUNK_MAX)
        return NULL;
    size = (size + 7u) & ~(size_t)7u;
    if (size == 0)
        size = 8;
    sy__arena_chunk *c = ar->head;
    if (c) {
        uint32_t at = (c->used + 7u) & ~(uint32_t)7u;
        if (at <= c->size && c->size - at >= size) {
            c->used = at + (uint32_t)size;
            return c->data + at;
        }
    }
    return sy__arena_alloc_new(ar, size);
}

/* Bytes without alignment (text): no padding between strings. */
static inline void *sy__arena_alloc_bytes(sy__arena *ar, size_t size) {
    if (size == 0)
        size = 1;
    if (size > SY_ARENA_CHUNK_MAX)
        return NULL;
    sy__arena_chunk *c = ar->head;
    if (c && c->size - c->used >= size) {
        void *p = c->data + c->used;
        c->used += (uint32_t)size;
        return p;
    }
    return sy__arena_alloc_new(ar, size);
}
char *sy__arena_strndup(sy__arena *ar, const char *s, size_t n);
char *sy__arena_strdup(sy__arena *ar, const char *s);
/* "host", "host:port", "[v6]" or "[v6]:port" (the port left out when it is
 * the scheme's default: 443 when `secure`, else 80), in the arena: the
 * Host header an upstream expects. NULL when out of memory. */
/* The same into buf (room for hl + 9 bytes: host[0, hl), brackets, ':',
 * five digits, NUL); returns its length. */
size_t sy__authority_format(char *buf, const char *host, size_t hl,
                            uint16_t port, bool secure);
char *sy__arena_authority(sy__arena *ar, const char *host, uint16_t port,
                          bool secure);
/* Forget all allocations but keep the largest chunk for reuse. */
void sy__arena_reset(sy__arena *ar);
void sy__arena_free(sy__arena *ar);

/* Growable byte buffer, always NUL-terminated when non-empty. */
typedef struct sy__buf {
    const sy__alloc *alloc;
    char *ptr;
    size_t len;
    size_t cap;
    bool failed; /* an append ran out of memory */
} sy__buf;

void sy__buf_init(sy__buf *b, const sy__alloc *alloc);
void sy__buf_free(sy__buf *b);
bool sy__buf_reserve(sy__buf *b, size_t extra);
void sy__buf_append(sy__buf *b, const char *s, size_t n);
void sy__buf_puts(sy__buf *b, const char *s);
void sy__buf_putc(sy__buf *b, char c);
/* Append a decimal integer. */
void sy__buf_put_int(sy__buf *b, int64_t v);
/* Append s as a JSON string literal (quoted, escaped). */
void sy__buf_json_string(sy__buf *b, const char *s, size_t n);

/* 64-bit hash (wyhash-style mixing); stable across runs and machines. */
/* Sort n records of `size` bytes at `base` by the uint64_t at byte offset
 * `key_off` of each, ascending and stable (an LSD radix sort, 8 bits a pass,
 * passes over bytes every key shares skipped). Needs n * size bytes of
 * scratch from `a`; false (base untouched) when out of memory. */
bool sy__sort_by_u64(const sy__alloc *a, void *base, size_t n, size_t size,
                     size_t key_off);
uint64_t sy__hash64(const void *data, size_t len, uint64_t seed);
uint64_t sy__hash_mix(uint64_t a, uint64_t b);
/* sy__hash64 of data[0..len) computed in steps: begin, advance over the
 * bytes before `upto` (any number of times, upto increasing), end returns
 * the value sy__hash64(data, len, seed) returns. For a large text already
 * read piece by piece for other reasons, so it is read once. */
typedef struct sy__hash_stream {
    const unsigned char *p;
    size_t len, done;
    uint64_t h;
} sy__hash_stream;
void sy__hash64_begin(sy__hash_stream *s, const void *data, size_t len,
                      uint64_t seed);
void sy__hash64_advance(sy__hash_stream *s, size_t upto);
uint64_t sy__hash64_end(sy__hash_stream *s);

/* snprintf for JSON paths, fast: only %s and %zu conversions. */
void sy__path_printf(char *out, size_t cap, const char *fmt, ...);
/* "<base>.<field>" ("<field>" when base is empty) into out, truncated as
 * sy__path_printf truncates; returns its length. */
size_t sy__path_join(char *out, size_t cap, const char *base,
                     const char *field);
/* "[i]" written at out + at, where out holds a path of `at` bytes (from
 * sy__path_join or strlen): each index of a list formatted without
 * formatting the list's path again. Truncated as sy__path_printf. */
void sy__path_index(char *out, size_t cap, size_t at, size_t i);
/* Decimal text of v into num (at least 24 bytes), NUL-ended; its length.
 * No printf: for paths that format numbers per request. */
size_t sy__int_text(int64_t v, char *num);
/* The index of the first byte of host[0..len) that no upstream host may
 * hold (a control byte, space, DEL, or one of "#/<>?@\\^`{|}), or len:
 * hosts go into the Host header a proxy writes. ':' '[' ']' and '%' stay
 * (IPv6 literals, zone ids). */
static inline size_t sy__host_bad_byte(const char *host, size_t len) {
    /* bit c: byte c refused; from 0x80 on, bytes pass */
    static const uint64_t bad[2] = {0xd000800dffffffffull,
                                    0xb800000150000001ull};
    const unsigned char *p = (const unsigned char *)host;
    for (size_t i = 0; i < len; i++)
        if (p[i] < 128 && (bad[p[i] >> 6] >> (p[i] & 63)) & 1)
            return i;
    return len;
}

/* Fill err (if non-NULL) with code, path and a formatted message. Returns
 * code, so `return sy__error_set(...)` reads naturally. */
int sy__error_set(sy_error *err, int code, const char *path, const char *fmt,
                  ...) __attribute__((format(printf, 4, 5)));
/* Prefix err->path with `prefix` (e.g. a route's path). */
void sy__error_prefix_path(sy_error *err, const char *prefix);
void sy__error_clear(sy_error *err);

/* Monotonic and real-time clocks (writer side only). */
uint64_t sy__now_monotonic_us(void);
int64_t sy__now_realtime_ms(void);

/* 8 and 4 bytes at p in the machine's byte order, from any alignment:
 * for keys compared within one process (index segment keys, the path
 * split); hashes use util.c's fixed byte order instead. */
static inline uint64_t sy__load_u64(const char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static inline uint32_t sy__load_u32(const char *p) {
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}

/* Four counts of byte classes over s[0, len) in one pass: add[b] is what
 * byte b adds, one 16-bit field a class (class k at bit 16 * k), so a
 * byte costs a load and an add; summed in runs of at most 0xffff bytes,
 * so no field carries into the next. out[k]: the count of class k. */
static inline void sy__count_classes4(const unsigned char *s, size_t len,
                                      const uint64_t add[256], size_t out[4]) {
    out[0] = out[1] = out[2] = out[3] = 0;
    for (size_t i = 0; i < len;) {
        size_t stop = len - i > 0xffff ? i + 0xffff : len;
        uint64_t acc = 0;
        for (; i < stop; i++)
            acc += add[s[i]];
        for (int k = 0; k < 4; k++)
            out[k] += (size_t)(acc >> (16 * k)) & 0xffff;
    }
}

/* Eight bytes tested at once (a word from sy__load_u64): non-zero when a
 * byte of w equals c, or is below n (n <= 128). Exact as a yes/no answer
 * (the bits set above the first such byte may be wrong): a scan for the
 * end of a run of plain bytes reads a word, and only a word that answers
 * yes is looked at byte by byte. */
#define SY_SWAR_ONES 0x0101010101010101ull
#define SY_SWAR_HIGHS 0x8080808080808080ull
static inline uint64_t sy__swar_has_byte(uint64_t w, unsigned char c) {
    uint64_t x = w ^ (SY_SWAR_ONES * c);
    return (x - SY_SWAR_ONES) & ~x & SY_SWAR_HIGHS;
}

static inline uint64_t sy__swar_has_below(uint64_t w, unsigned char n) {
    return (w - SY_SWAR_ONES * n) & ~w & SY_SWAR_HIGHS;
}

/* The index (0-7) of the first byte that a non-zero answer above (or an
 * OR of them) found: its lowest flagged byte, always a true one. Only for
 * little-endian machines (SY_SWAR_FIRST_OK); others look byte by byte. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ &&    \
    (defined(__GNUC__) || defined(__clang__))
#define SY_SWAR_FIRST_OK 1
static inline unsigned sy__swar_first(uint64_t answer) {
    return (unsigned)__builtin_ctzll(answer) >> 3;
}
#else
#define SY_SWAR_FIRST_OK 0
#endif

/* n bytes at a and b are equal: overlapping word loads, no call (for the short
 * texts of the request path: segments, labels, header names). */
static inline bool sy__bytes_eq(const char *a, const char *b, size_t n) {
    if (n >= 8) { /* the first and last words; up to 16 bytes, no loop */
        uint64_t x, y, u, v;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        memcpy(&u, a + n - 8, 8);
        memcpy(&v, b + n - 8, 8);
        if (((x ^ y) | (u ^ v)) != 0)
            return false;
        for (size_t i = 8; i + 8 < n; i += 8) {
            memcpy(&x, a + i, 8);
            memcpy(&y, b + i, 8);
            if (x != y)
                return false;
        }
        return true;
    }
    if (n >= 4) {
        uint32_t x0, y0, x1, y1;
        memcpy(&x0, a, 4);
        memcpy(&y0, b, 4);
        memcpy(&x1, a + n - 4, 4);
        memcpy(&y1, b + n - 4, 4);
        return x0 == y0 && x1 == y1;
    }
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

static inline bool sy__str_eq(sy_str a, const char *b, size_t blen) {
    return a.len == blen && (blen == 0 || memcmp(a.ptr, b, blen) == 0);
}
bool sy__str_ieq(sy_str a, const char *b, size_t blen); /* ASCII nocase */

/* The value of a hex digit, or -1 (percent-decoding). */
static inline int sy__hexval(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#endif
