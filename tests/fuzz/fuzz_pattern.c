/*
 * fuzz_pattern.c - libFuzzer target for pattern.c: the input is compiled as
 * a path pattern and as a host pattern; what compiles is matched against
 * a few paths/hosts derived from the input. Must never crash or leak.
 */
#include "pattern.h"

#include <stdlib.h>

/* Inputs derived from the pattern text: itself, with wildcards and braces
 * replaced by letters, a prefix, and a few fixed ones. */
static size_t derive(const char *src, size_t len, char **out, size_t max) {
    size_t n = 0;
    out[n++] = strdup(src);
    char *plain = strdup(src);
    for (size_t i = 0; plain && i < len; i++)
        if (strchr("*?{}:", plain[i]))
            plain[i] = 'x';
    out[n++] = plain;
    out[n++] = strndup(src, len / 2);
    static const char *fixed[] = {"/", "", "/a/b/c", "/a//b/", "a.b.c:80"};
    for (size_t i = 0; i < SY_ARRAY_LEN(fixed) && n < max; i++)
        out[n++] = strdup(fixed[i]);
    return n;
}

static void try_match(const sy_pattern *p, bool host, char **inputs, size_t n,
                      const sy_alloc *a) {
    sy_segments segs = {0};
    sy_arena scratch;
    sy_arena_init(&scratch, a, 256);
    pcre2_match_data *md =
        pcre2_match_data_create(sy_pattern_max_groups(p), NULL);
    uint32_t nv = sy_pattern_var_count(p);
    sy_capture *caps = calloc(nv + 1, sizeof *caps);
    for (size_t i = 0; i < n && md && caps; i++) {
        if (!inputs[i])
            continue;
        sy_str s = {inputs[i], strlen(inputs[i])};
        size_t nc = 0;
        sy_arena_reset(&scratch);
        if (host) {
            if (sy_segments_split_host(&segs, s, a) &&
                sy_pattern_match_host(p, &segs, caps, &nc, md) && nc > nv)
                abort();
        } else {
            for (int mts = 0; mts < 2; mts++) {
                nc = 0;
                if (sy_segments_split(&segs, s, &scratch, a) &&
                    sy_pattern_match_path(p, &segs, mts, caps, &nc, md,
                                          &scratch) &&
                    nc > nv)
                    abort();
            }
        }
    }
    for (size_t i = 0; i < sy_pattern_segment_count(p); i++)
        if (sy_pattern_segment_kind(p, i) == SY_SEG_LITERAL)
            (void)sy_pattern_literal(p, i);
    free(caps);
    pcre2_match_data_free(md);
    sy_segments_free(&segs, a);
    sy_arena_free(&scratch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096)
        return 0;
    char *src = malloc(size + 1);
    if (!src)
        return 0;
    memcpy(src, data, size);
    src[size] = '\0';
    size_t len = strlen(src); /* stop at an embedded NUL */
    sy_alloc a;
    sy_alloc_init(&a, NULL);
    char *inputs[8] = {0};
    size_t n = derive(src, len, inputs, SY_ARRAY_LEN(inputs));
    for (int host = 0; host < 2; host++) {
        sy_pattern *p = NULL;
        sy_error err;
        int rc = host ? sy_pattern_compile_host(&a, src, &p, &err)
                      : sy_pattern_compile_path(&a, src, &p, &err);
        if (rc == 0) {
            try_match(p, host, inputs, n, &a);
            sy_pattern_free(p);
        } else if (p || err.offset > len) {
            abort(); /* errors leave nothing and point inside the input */
        }
    }
    sy_regex *re = NULL;
    if (sy_regex_compile(&a, src, &re, NULL) == 0) {
        pcre2_match_data *md = pcre2_match_data_create(1, NULL);
        for (size_t i = 0; i < n; i++)
            if (inputs[i])
                (void)sy_regex_full_match(re, inputs[i], strlen(inputs[i]), md);
        pcre2_match_data_free(md);
        sy_regex_free(re);
    }
    for (size_t i = 0; i < n; i++)
        free(inputs[i]);
    free(src);
    return 0;
}
