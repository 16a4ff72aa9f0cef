/*
 * fuzz_pattern.c - libFuzzer target for pattern.c: the input is compiled as
 * a path pattern and as a host pattern; what compiles is matched against
 * a few paths/hosts derived from the input. Must never crash or leak.
 */
#include "route/pattern.h"

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

static void try_match(const sy__pattern *p, bool host, char **inputs, size_t n,
                      const sy__alloc *a) {
    sy__segments segs = {0};
    sy__arena scratch;
    sy__arena_init(&scratch, a, 256);
    pcre2_match_data *md =
        pcre2_match_data_create(sy__pattern_max_groups(p), NULL);
    uint32_t nv = sy__pattern_var_count(p);
    sy__capture *caps = calloc(nv + 1, sizeof *caps);
    for (size_t i = 0; i < n && md && caps; i++) {
        if (!inputs[i])
            continue;
        sy_str s = {inputs[i], strlen(inputs[i])};
        size_t nc = 0;
        sy__arena_reset(&scratch);
        if (host) {
            if (sy__segments_split_host(&segs, s, a) &&
                sy__pattern_match_host(p, &segs, caps, &nc, md) && nc > nv)
                abort();
        } else {
            for (int mts = 0; mts < 2; mts++) {
                nc = 0;
                if (sy__segments_split(&segs, s, &scratch, a) &&
                    sy__pattern_match_path(p, &segs, mts, caps, &nc, md,
                                           &scratch) &&
                    nc > nv)
                    abort();
            }
        }
    }
    for (size_t i = 0; i < sy__pattern_segment_count(p); i++)
        if (sy__pattern_segment_kind(p, i) == SY_SEG_LITERAL)
            (void)sy__pattern_literal(p, i);
    free(caps);
    pcre2_match_data_free(md);
    sy__segments_free(&segs, a);
    sy__arena_free(&scratch);
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
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    char *inputs[8] = {0};
    size_t n = derive(src, len, inputs, SY_ARRAY_LEN(inputs));
    for (int host = 0; host < 2; host++) {
        sy__pattern *p = NULL;
        sy_error err;
        int rc = host ? sy__pattern_compile_host(&a, src, &p, &err)
                      : sy__pattern_compile_path(&a, src, &p, &err);
        if (rc == 0) {
            try_match(p, host, inputs, n, &a);
            sy__pattern_free(p);
        } else if (p || err.offset > len) {
            abort(); /* errors leave nothing and point inside the input */
        }
    }
    sy__regex *re = NULL;
    if (sy__regex_compile(&a, src, &re, NULL) == 0) {
        pcre2_match_data *md = pcre2_match_data_create(1, NULL);
        for (size_t i = 0; i < n; i++)
            if (inputs[i])
                (void)sy__regex_full_match(re, inputs[i], strlen(inputs[i]),
                                           md);
        pcre2_match_data_free(md);
        sy__regex_free(re);
    }
    for (size_t i = 0; i < n; i++)
        free(inputs[i]);
    free(src);
    return 0;
}
