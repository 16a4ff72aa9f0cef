/* test_util.c - arenas, buffers, hashing, errors, version. */
#include "base/util.h"
#include "testutil.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(version_macros_match_runtime) {
    ck_assert_int_eq(sy_version_number(), SY_VERSION_NUMBER);
    ck_assert_str_eq(sy_version(), SY_VERSION_STRING);
}
END_TEST

START_TEST(arena_allocations_are_aligned_and_reset_keeps_a_chunk) {
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy__arena ar;
    sy__arena_init(&ar, &a, 64);
    char *prev = NULL;
    size_t prev_size = 0;
    const sy__arena_chunk *prev_head = NULL;
    for (int i = 0; i < 100; i++) {
        char *p = sy__arena_alloc(&ar, (size_t)i + 1);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq((uintptr_t)p % 8, 0);
        /* packed to 8 bytes within a chunk: no 16-byte padding */
        if (ar.head == prev_head)
            ck_assert_ptr_eq(p, prev + ((prev_size + 7) & ~(size_t)7));
        prev_head = ar.head;
        prev = p;
        prev_size = (size_t)i + 1;
    }
    /* a chunk holds less than 4 GiB: larger requests fail, not wrap */
    ck_assert_ptr_null(sy__arena_alloc(&ar, (size_t)UINT32_MAX));
    ck_assert_ptr_null(sy__arena_alloc_bytes(&ar, (size_t)UINT32_MAX));
    ck_assert_ptr_null(sy__arena_alloc(&ar, SIZE_MAX));
    sy__arena_reset(&ar);
    ck_assert_ptr_nonnull(ar.head);
    ck_assert_ptr_null(ar.head->next);
    sy__arena_free(&ar);
}
END_TEST

START_TEST(buf_escapes_json_strings) {
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy__buf b;
    sy__buf_init(&b, &a);
    sy__buf_json_string(&b, "a\"b\\\n\x01", 6);
    ck_assert_str_eq(b.ptr, "\"a\\\"b\\\\\\n\\u0001\"");
    sy__buf_free(&b);
}
END_TEST

START_TEST(hash_is_stable_and_sensitive) {
    ck_assert_uint_eq(sy__hash64("abc", 3, 0), sy__hash64("abc", 3, 0));
    ck_assert_uint_ne(sy__hash64("abc", 3, 0), sy__hash64("abd", 3, 0));
    ck_assert_uint_ne(sy__hash64("abc", 3, 0), sy__hash64("abc", 3, 1));
    ck_assert_uint_ne(sy__hash64("", 0, 0), sy__hash64("a", 1, 0));
}
END_TEST

/* The hash in steps equals the one-shot hash for every length up to 80
 * and steps of every size, including steps that stop inside a block. */
START_TEST(hash_in_steps_equals_the_one_shot_hash) {
    unsigned char text[80];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = (unsigned char)(i * 37 + 11);
    for (size_t len = 0; len <= sizeof text; len++)
        for (size_t step = 1; step <= 40; step++) {
            sy__hash_stream hs;
            sy__hash64_begin(&hs, text, len, 0x5eed + step);
            for (size_t at = step; at < len + step; at += step)
                sy__hash64_advance(&hs, at);
            ck_assert_uint_eq(sy__hash64_end(&hs),
                              sy__hash64(text, len, 0x5eed + step));
        }
}
END_TEST

START_TEST(error_prefix_joins_paths) {
    sy_error e;
    sy__error_set(&e, SY_EARG, "args.regexp", "bad %s", "thing");
    sy__error_prefix_path(&e, "routes[3].predicates[1]");
    ck_assert_str_eq(e.path, "routes[3].predicates[1].args.regexp");
    ck_assert_str_eq(e.message, "bad thing");
    ck_assert_int_eq(e.code, SY_EARG);
    ck_assert_str_eq(sy_strerror(SY_ENOMEM), "out of memory");
}
END_TEST

/* The word-at-a-time byte tests answer as a byte loop does, for words
 * with the byte sought (or one below the bound) at every position, with
 * bytes next to the answer's edges, and for random words. */
START_TEST(swar_byte_tests_answer_as_a_byte_loop) {
    static const unsigned char cs[] = {0, '"', '\\', ':', 0x7f, 0x80, 0xff};
    static const unsigned char ns[] = {1, 0x20, 0x21, 0x80};
    static const unsigned char edge[] = {0,    1,    0x1f, 0x20, 0x21, 0x22,
                                         0x23, 0x5b, 0x5c, 0x5d, 0x7f, 0x80,
                                         0x81, 0xa2, 0xdc, 0xfe, 0xff};
    uint64_t st = 0x9e3779b97f4a7c15ull;
    for (size_t round = 0; round < 200000; round++) {
        unsigned char b[8];
        for (int i = 0; i < 8; i++) {
            st ^= st << 13, st ^= st >> 7, st ^= st << 17;
            b[i] = round & 1 ? edge[st % sizeof edge] : (unsigned char)st;
        }
        char w8[8];
        memcpy(w8, b, 8);
        uint64_t w = sy__load_u64(w8);
        for (size_t k = 0; k < sizeof cs; k++) {
            int first = -1;
            for (int i = 7; i >= 0; i--)
                first = b[i] == cs[k] ? i : first;
            uint64_t got = sy__swar_has_byte(w, cs[k]);
            ck_assert_int_eq(got != 0, first >= 0);
#if SY_SWAR_FIRST_OK
            if (got)
                ck_assert_int_eq((int)sy__swar_first(got), first);
#endif
        }
        for (size_t k = 0; k < sizeof ns; k++) {
            int first = -1;
            for (int i = 7; i >= 0; i--)
                first = b[i] < ns[k] ? i : first;
            uint64_t got = sy__swar_has_below(w, ns[k]);
            ck_assert_int_eq(got != 0, first >= 0);
#if SY_SWAR_FIRST_OK
            if (got)
                ck_assert_int_eq((int)sy__swar_first(got), first);
            /* an OR of answers: the first byte either one found */
            uint64_t both = got | sy__swar_has_byte(w, '"');
            int f2 = -1;
            for (int i = 7; i >= 0; i--)
                f2 = b[i] < ns[k] || b[i] == '"' ? i : f2;
            if (both)
                ck_assert_int_eq((int)sy__swar_first(both), f2);
#endif
        }
    }
}
END_TEST

/* sy__path_join and sy__path_index write what sy__path_printf writes for
 * "%s.%s" and "%s[%zu]", truncated alike, at every buffer size. */
START_TEST(path_join_and_index_match_path_printf) {
    static const char *const bases[] = {"", "routes[3]", "a"};
    static const char *const fields[] = {"predicates", "uri", ""};
    static const size_t idx[] = {0, 7, 9, 10, 123, 999999};
    for (size_t b = 0; b < 3; b++)
        for (size_t f = 0; f < 3; f++)
            for (size_t cap = 1; cap < 40; cap++) {
                char want[64], got[64];
                sy__path_printf(want, cap, "%s%s%s", bases[b],
                                *bases[b] ? "." : "", fields[f]);
                size_t at = sy__path_join(got, cap, bases[b], fields[f]);
                ck_assert_str_eq(got, want);
                ck_assert_uint_eq(at, strlen(want));
                for (size_t i = 0; i < 6; i++) {
                    char w2[64], g2[64];
                    sy__path_printf(w2, cap, "%s[%zu]", want, idx[i]);
                    memcpy(g2, got, at + 1);
                    sy__path_index(g2, cap, at, idx[i]);
                    ck_assert_str_eq(g2, w2);
                }
            }
}
END_TEST

/* Text allocations pack without padding; aligned ones stay aligned after
 * them. */
START_TEST(arena_bytes_pack_and_alignment_holds_after_them) {
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy__arena ar;
    sy__arena_init(&ar, &a, 256);
    char *x = sy__arena_alloc_bytes(&ar, 3);
    char *y = sy__arena_alloc_bytes(&ar, 5);
    ck_assert_ptr_eq(y, x + 3);
    void *p = sy__arena_alloc(&ar, 20);
    ck_assert_ptr_eq(p, x + 8); /* after the 8 bytes, 8-aligned */
    ck_assert_uint_eq((uintptr_t)p % 8, 0);
    char *s = sy__arena_strdup(&ar, "abc");
    ck_assert_ptr_eq(s, (char *)p + 24);
    ck_assert_str_eq(s, "abc");
    /* a request larger than what is left opens a chunk */
    void *big = sy__arena_alloc(&ar, 512);
    ck_assert_ptr_nonnull(big);
    ck_assert_uint_eq((uintptr_t)big % 8, 0);
    sy__arena_free(&ar);
}
END_TEST

/* sy__sort_by_u64: ascending and stable over random keys (many equal, some
 * differing only in high bytes), input already ascending (with equal runs),
 * ascending but for its last key, and descending, for a record size with
 * the key at an odd place and for 16-byte records keyed by their first 8
 * (the layout every caller sorts, moved two words at a time); equal keys
 * keep their input order (the seq field), and nothing is lost. */
typedef struct sort_rec {
    uint32_t seq;
    uint64_t key;
    char pad[5];
} sort_rec;

typedef struct sort_rec16 {
    uint64_t key, seq;
} sort_rec16;

START_TEST(sort_by_u64_is_ascending_and_stable) {
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t n = 0; n < 3000; n = n * 3 + 1) {
        for (int shape = 0; shape < 7; shape++) {
            sort_rec *r = malloc((n ? n : 1) * sizeof *r);
            sort_rec16 *r16 = malloc((n ? n : 1) * sizeof *r16);
            bool *seen = calloc(n ? n : 1, 1);
            for (size_t i = 0; i < n; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                uint64_t k = shape == 0   ? x % 7         /* many equal */
                             : shape == 1 ? (x % 5) << 56 /* high bytes */
                             : shape == 2 ? 42            /* all equal */
                             : shape == 3 ? x             /* spread */
                             : shape == 6 ? (uint64_t)(n - i) / 2  /* down */
                                          : (uint64_t)i / 3 << 40; /* sorted */
                r[i] = (sort_rec){(uint32_t)i, k, {0}};
            }
            if (shape == 5 && n > 1) /* sorted but the last: out of order */
                r[n - 1].key = 0;
            for (size_t i = 0; i < n; i++)
                r16[i] = (sort_rec16){r[i].key, i};
            ck_assert(
                sy__sort_by_u64(&a, r, n, sizeof *r, offsetof(sort_rec, key)));
            ck_assert(sy__sort_by_u64(&a, r16, n, sizeof *r16, 0));
            for (size_t i = 0; i < n; i++) {
                ck_assert(r16[i].key == r[i].key && r16[i].seq == r[i].seq);
                ck_assert(r[i].seq < n && !seen[r[i].seq]);
                seen[r[i].seq] = true;
                if (i && r[i - 1].key == r[i].key)
                    ck_assert_uint_lt(r[i - 1].seq, r[i].seq);
                else if (i)
                    ck_assert(r[i - 1].key < r[i].key);
            }
            free(seen);
            free(r16);
            free(r);
        }
    }
}
END_TEST

START_TEST(grow_doubles_from_first_and_fails_whole_on_overflow) {
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    size_t cap = 0;
    uint32_t *v = sy__grow(&a, NULL, &cap, 1, 16, sizeof *v);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(cap, 16);
    for (uint32_t i = 0; i < 16; i++)
        v[i] = i;
    uint32_t *w = sy__grow(&a, v, &cap, 17, 16, sizeof *w); /* doubled */
    ck_assert_ptr_nonnull(w);
    ck_assert_uint_eq(cap, 32);
    v = sy__grow(&a, w, &cap, 200, 16, sizeof *v); /* doubled until 200 fit */
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(cap, 256);
    for (uint32_t i = 0; i < 16; i++)
        ck_assert_uint_eq(v[i], i);
    /* a count whose bytes, or whose doubling, overflow: NULL, cap kept */
    ck_assert_ptr_null(sy__grow(&a, v, &cap, SIZE_MAX / 2, 16, sizeof *v));
    ck_assert_ptr_null(sy__grow(&a, v, &cap, SIZE_MAX, 16, 1));
    ck_assert_uint_eq(cap, 256);
    ck_assert_uint_eq(v[15], 15);
    sy__free(&a, v);
}
END_TEST

int main(void) {
    Suite *s = suite_create("util");
    TCase *tc = tcase_create("util");
    tcase_add_test(tc, version_macros_match_runtime);
    tcase_add_test(tc, arena_allocations_are_aligned_and_reset_keeps_a_chunk);
    tcase_add_test(tc, buf_escapes_json_strings);
    tcase_add_test(tc, swar_byte_tests_answer_as_a_byte_loop);
    tcase_add_test(tc, hash_is_stable_and_sensitive);
    tcase_add_test(tc, hash_in_steps_equals_the_one_shot_hash);
    tcase_add_test(tc, path_join_and_index_match_path_printf);
    tcase_add_test(tc, arena_bytes_pack_and_alignment_holds_after_them);
    tcase_add_test(tc, error_prefix_joins_paths);
    tcase_add_test(tc, sort_by_u64_is_ascending_and_stable);
    tcase_add_test(tc, grow_doubles_from_first_and_fails_whole_on_overflow);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
