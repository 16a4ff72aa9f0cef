/*
 * trace.c - W3C Trace Context (traceparent, tracestate) for proxied
 * requests. An incoming valid traceparent keeps its trace id and flags;
 * the gateway's own span gets a new id, and the traceparent sent upstream
 * names that span as the parent. Without one (or with an invalid one, as
 * the spec says) a new trace is started, sampled. tracestate goes on as
 * it came with the client's trace; the client's is dropped with a new
 * one, a route filter's goes on.
 *
 *   in:   traceparent: 00-<trace id 32 hex>-<client span 16 hex>-<flags>
 *   up:   traceparent: 00-<same trace id>-<gateway span 16 hex>-<flags>
 */
#define _DEFAULT_SOURCE
#include "proxy.h"

#include <string.h>
#include <strings.h>
#include <sys/random.h>

static _Thread_local uint64_t rng_state;

/* The thread's xorshift64* generator, seeded once from getrandom: its
 * state is never 0, and its output (the state times an odd constant) is
 * then never 0 either, so no id it makes is all zeros (W3C: invalid). */
static uint64_t rng_seed(void) {
    uint64_t s;
    if (getrandom(&s, sizeof s, 0) != sizeof s)
        s = gw_now_ns() ^ (uint64_t)(uintptr_t)&rng_state;
    return s | 1;
}

static inline uint64_t rng_next(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

#ifdef __SSE2__
#include <emmintrin.h>

/* the 32 nibbles of two random words as 32 lower-case hex digits: '0' + n,
 * and 'a' - '0' - 10 = 39 more where n > 9 (the digits of random bits are
 * random in any order) */
static inline void hex32(char *out, uint64_t a, uint64_t b) {
    const __m128i low = _mm_set1_epi8(0x0f);
    __m128i v = _mm_set_epi64x((long long)b, (long long)a);
    __m128i lo = _mm_and_si128(v, low);
    __m128i hi = _mm_and_si128(_mm_srli_epi64(v, 4), low);
    __m128i d0 = _mm_unpacklo_epi8(lo, hi), d1 = _mm_unpackhi_epi8(lo, hi);
    const __m128i zero = _mm_set1_epi8('0'), nine = _mm_set1_epi8(9),
                  gap = _mm_set1_epi8(39);
    d0 = _mm_add_epi8(_mm_add_epi8(d0, zero),
                      _mm_and_si128(_mm_cmpgt_epi8(d0, nine), gap));
    d1 = _mm_add_epi8(_mm_add_epi8(d1, zero),
                      _mm_and_si128(_mm_cmpgt_epi8(d1, nine), gap));
    _mm_storeu_si128((__m128i *)out, d0);
    _mm_storeu_si128((__m128i *)(out + 16), d1);
}

/* one word's 16 digits */
static inline void hex16(char *out, uint64_t a) {
    const __m128i low = _mm_set1_epi8(0x0f);
    __m128i v = _mm_cvtsi64_si128((long long)a);
    __m128i d = _mm_unpacklo_epi8(_mm_and_si128(v, low),
                                  _mm_and_si128(_mm_srli_epi64(v, 4), low));
    d = _mm_add_epi8(
        _mm_add_epi8(d, _mm_set1_epi8('0')),
        _mm_and_si128(_mm_cmpgt_epi8(d, _mm_set1_epi8(9)), _mm_set1_epi8(39)));
    _mm_storeu_si128((__m128i *)out, d);
}
#else
/* eight random nibbles (one a byte, values 0-15) to eight lower-case hex
 * digits at once: '0' + n, and 'a' - '0' - 10 = 39 more where n >= 10
 * (n + 6 carries into bit 4 exactly then; no byte carries into the next) */
static inline uint64_t hex_digits8(uint64_t nibbles) {
    const uint64_t ones = 0x0101010101010101ull;
    uint64_t ge10 = ((nibbles + 6 * ones) >> 4) & ones;
    return nibbles + '0' * ones + ge10 * 39;
}

static inline void hex16(char *out, uint64_t r) {
    const uint64_t low_nibbles = 0x0f0f0f0f0f0f0f0full;
    uint64_t lo = hex_digits8(r & low_nibbles);
    uint64_t hi = hex_digits8((r >> 4) & low_nibbles);
    memcpy(out, &lo, 8);
    memcpy(out + 8, &hi, 8);
}

static inline void hex32(char *out, uint64_t a, uint64_t b) {
    hex16(out, a);
    hex16(out + 16, b);
}
#endif

static bool lower_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

static bool all_zero(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != '0')
            return false;
    return true;
}

/* version 00 is exactly 55 bytes; a later version may carry more after
 * the flags ("-..."), read the same way (the spec's forward rule) */
static bool parse_traceparent(sy_str v, gw_trace *t) {
    const char *p = v.ptr;
    if (v.len < 55 || (v.len > 55 && p[55] != '-'))
        return false;
    if (!lower_hex(p, 2) || memcmp(p, "ff", 2) == 0 || p[2] != '-' ||
        !lower_hex(p + 3, 32) || p[35] != '-' || !lower_hex(p + 36, 16) ||
        p[52] != '-' || !lower_hex(p + 53, 2))
        return false;
    if ((memcmp(p, "00", 2) == 0 && v.len != 55) || all_zero(p + 3, 32) ||
        all_zero(p + 36, 16))
        return false;
    memcpy(t->trace_id, p + 3, 32);
    t->trace_id[32] = '\0';
    memcpy(t->parent_id, p + 36, 16);
    t->parent_id[16] = '\0';
    memcpy(t->flags, p + 53, 2);
    t->flags[2] = '\0';
    return true;
}

void gw_trace_begin(gw_trace *t, const sy_request *r) {
    memset(t, 0, sizeof *t);
    const sy_header *found = NULL;
    size_t count = 0;
    for (size_t i = 0; i < r->header_count; i++)
        if (r->headers[i].name.len == 11 &&
            strncasecmp(r->headers[i].name.ptr, "traceparent", 11) == 0) {
            found = &r->headers[i];
            count++;
        }
    /* more than one traceparent: none is trusted (a new trace) */
    uint64_t st = rng_state ? rng_state : rng_seed();
    if (count != 1 || !parse_traceparent(found->value, t)) {
        uint64_t a = rng_next(&st);
        hex32(t->trace_id, a, rng_next(&st)); /* trace_id[32] stays 0 */
        memcpy(t->flags, "01", 3);
        t->parent_id[0] = '\0';
    }
    hex16(t->span_id, rng_next(&st)); /* span_id[16] stays 0 */
    rng_state = st;
}

/* A header the upstream request does not carry: traceparent (gw_trace_put
 * writes the gateway's), and the client's tracestate when the gateway
 * started a new trace (no parent): its vendors' entries belong to the
 * client's trace, and W3C has it discarded then. A tracestate a route's
 * filter wrote (AddRequestHeader, SetRequestHeader) is the operator's and
 * goes on: dropping by name after the filters dropped it too. */
bool gw_trace_drops(const gw_request *q, sy_header hd) {
    const gw_trace *t = &q->trace;
    sy_str name = hd.name;
    return (name.len == 11 && strncasecmp(name.ptr, "traceparent", 11) == 0) ||
           (name.len == 10 && !t->parent_id[0] &&
            (name.ptr[0] | 0x20) == 't' && /* not User-Agent, Connection */
            strncasecmp(name.ptr, "tracestate", 10) == 0 &&
            gw_request_client_header(q, hd));
}

/* one copy of a fixed layout (no printf per request): the ids are always
 * 32 and 16 hex digits and the flags 2 (gw_trace_begin) */
char *gw_trace_put(const gw_trace *t, char *w) {
    memcpy(w, "traceparent: 00-", 16);
    memcpy(w + 16, t->trace_id, 32);
    w[48] = '-';
    memcpy(w + 49, t->span_id, 16);
    w[65] = '-';
    memcpy(w + 66, t->flags, 2);
    memcpy(w + 68, "\r\n", 2);
    return w + GW_TRACE_LINE;
}
