/*
 * trace.c - W3C Trace Context (traceparent, tracestate) for proxied
 * requests. An incoming valid traceparent keeps its trace id and flags;
 * the gateway's own span gets a new id, and the traceparent sent upstream
 * names that span as the parent. Without one (or with an invalid one, as
 * the spec says) a new trace is started, sampled. tracestate goes on as
 * it came (it is an ordinary header of the request).
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

static uint64_t next_random(void) {
    if (!rng_state) {
        if (getrandom(&rng_state, sizeof rng_state, 0) != sizeof rng_state)
            rng_state = gw_now_ns() ^ (uint64_t)(uintptr_t)&rng_state;
        rng_state |= 1;
    }
    uint64_t x = rng_state; /* xorshift64* */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* the two hex digits of each byte value, high digit first */
static const char hex_pairs[] = "000102030405060708090a0b0c0d0e0f"
                                "101112131415161718191a1b1c1d1e1f"
                                "202122232425262728292a2b2c2d2e2f"
                                "303132333435363738393a3b3c3d3e3f"
                                "404142434445464748494a4b4c4d4e4f"
                                "505152535455565758595a5b5c5d5e5f"
                                "606162636465666768696a6b6c6d6e6f"
                                "707172737475767778797a7b7c7d7e7f"
                                "808182838485868788898a8b8c8d8e8f"
                                "909192939495969798999a9b9c9d9e9f"
                                "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
                                "b0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
                                "c0c1c2c3c4c5c6c7c8c9cacbcccdcecf"
                                "d0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
                                "e0e1e2e3e4e5e6e7e8e9eaebecedeeef"
                                "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";

/* n even: two digits a byte of each random word (one table read a byte:
 * 48 digits a request, for the trace and span ids) */
static void random_hex(char *out, size_t n) {
    for (size_t i = 0; i < n;) {
        uint64_t r = next_random();
        for (int k = 0; k < 8 && i < n; k++, r >>= 8) {
            memcpy(out + i, hex_pairs + 2 * (r & 255), 2);
            i += 2;
        }
    }
    out[n] = '\0';
}

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
    if (count != 1 || !parse_traceparent(found->value, t)) {
        random_hex(t->trace_id, 32);
        memcpy(t->flags, "01", 3);
        t->parent_id[0] = '\0';
    }
    random_hex(t->span_id, 16);
}

bool gw_trace_is_header(sy_str name) {
    return name.len == 11 && strncasecmp(name.ptr, "traceparent", 11) == 0;
}

/* one copy of a fixed layout (no printf per request): the ids are always
 * 32 and 16 hex digits and the flags 2 (gw_trace_begin) */
void gw_trace_write(const gw_trace *t, gw_buf *h) {
    char line[16 + 32 + 1 + 16 + 1 + 2 + 2];
    memcpy(line, "traceparent: 00-", 16);
    memcpy(line + 16, t->trace_id, 32);
    line[48] = '-';
    memcpy(line + 49, t->span_id, 16);
    line[65] = '-';
    memcpy(line + 66, t->flags, 2);
    memcpy(line + 68, "\r\n", 2);
    gw_buf_add(h, line, sizeof line);
}
