/*
 * etcd_decode.c - the etcd source's reading of etcd's answers
 * (etcd_decode.h): base64, an in-place JSON tokenizer for watch lines,
 * keys to changes, range answers, non-200 answers, instance values.
 */
#include "etcd_decode.h"

#include <uv.h>

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

char *etcd_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

void *etcd_grow(void *v, size_t *cap, size_t n, size_t size, size_t first) {
    if (n < *cap)
        return v;
    size_t c = *cap ? *cap * 2 : first;
    void *p = realloc(v, c * size);
    if (p)
        *cap = c;
    return p;
}

char *etcd_strndup(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* ------------------------------------------------------------------ */
/* Base64                                                               */
/* ------------------------------------------------------------------ */

static const char b64_chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Standard base64 with padding; malloc'd, NUL-terminated. */
char *etcd_b64_encode(const char *src, size_t n) {
    const unsigned char *s = (const unsigned char *)src;
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out)
        return NULL;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *o++ = b64_chars[v >> 18];
        *o++ = b64_chars[v >> 12 & 63];
        *o++ = b64_chars[v >> 6 & 63];
        *o++ = b64_chars[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)s[i + 1] << 8;
        *o++ = b64_chars[v >> 18];
        *o++ = b64_chars[v >> 12 & 63];
        *o++ = i + 1 < n ? b64_chars[v >> 6 & 63] : '=';
        *o++ = '=';
    }
    *o = '\0';
    return out;
}

/* The sextet of each byte in base64 (standard and URL-safe alphabets);
 * X for every other byte. */
#define X 0x80
/* clang-format off */
static const unsigned char b64_tab[256] = {
    X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    X, X, X, X, X, X, X, X, X, X, X, 62, X, 62, X, 63,
    52, 53, 54, 55, 56, 57, 58, 59, 60, 61, X, X, X, X, X, X,
    X, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
    15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, X, X, X, X, 63,
    X, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
    41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, X, X, X, X, X,
    X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
};
/* clang-format on */
#undef X

/*
 * The sextet of each character pre-shifted to where its bits land in the
 * 3 decoded bytes of its group of 4, read as a little-endian word: byte 0
 * holds the first byte. A group decodes with 4 loads and 3 ORs; a byte
 * outside the alphabets sets bit 24 or above (B64_BAD), which one compare
 * per 8 characters catches. Built once (b64_init).
 */
#define B64_BAD 0x01ffffffu
static uint32_t b64_d0[256], b64_d1[256], b64_d2[256], b64_d3[256];
static uv_once_t b64_once = UV_ONCE_INIT;

static void b64_build(void) {
    for (int c = 0; c < 256; c++) {
        uint32_t s = b64_tab[c];
        if (s & 0x80) {
            b64_d0[c] = b64_d1[c] = b64_d2[c] = b64_d3[c] = B64_BAD;
            continue;
        }
        b64_d0[c] = s << 2;
        b64_d1[c] = s >> 4 | (s & 0x0f) << 12;
        b64_d2[c] = (s >> 2) << 8 | (s & 0x03) << 22;
        b64_d3[c] = s << 16;
    }
}

static void b64_init(void) {
    uv_once(&b64_once, b64_build);
}

static inline uint32_t b64_group(const unsigned char *in) {
    return b64_d0[in[0]] | b64_d1[in[1]] | b64_d2[in[2]] | b64_d3[in[3]];
}

/* The 3 bytes of a decoded group: its word's bytes 0, 1, 2. */
static inline void b64_put3(unsigned char *out, uint32_t w) {
    out[0] = (unsigned char)w;
    out[1] = (unsigned char)(w >> 8);
    out[2] = (unsigned char)(w >> 16);
}

/* Decode base64 in place (padding optional): 4 characters become 3 bytes,
 * so the output never overtakes the input. Returns the decoded length
 * (the byte after it, when it is within the len bytes, is set to NUL), or
 * -1 on a character outside the alphabets or a dangling sextet. */
static long b64_decode_inplace(char *s, size_t len) {
    const unsigned char *in = (const unsigned char *)s;
    unsigned char *out = (unsigned char *)s;
    size_t o = 0, i = 0, room = len;

    b64_init();
    while (len && s[len - 1] == '=')
        len--;
    if (len % 4 == 1)
        return -1;
    /* Two groups per step: 8 characters in, 6 bytes out. The output of
     * a step ends before the input of the next one begins. */
    for (; i + 8 <= len; i += 8) {
        uint32_t w0 = b64_group(in + i), w1 = b64_group(in + i + 4);
        if ((w0 | w1) >= 0x01000000u)
            return -1;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* one 8-byte store: its last 2 bytes land on characters of this
         * step, already read, and are overwritten by the next one */
        uint64_t v = (uint64_t)w0 | (uint64_t)w1 << 24;
        memcpy(out + o, &v, 8);
#else
        b64_put3(out + o, w0);
        b64_put3(out + o + 3, w1);
#endif
        o += 6;
    }
    for (; i + 4 <= len; i += 4) {
        uint32_t w = b64_group(in + i);
        if (w >= 0x01000000u)
            return -1;
        b64_put3(out + o, w);
        o += 3;
    }
    if (i < len) { /* 2 or 3 characters left: 1 or 2 bytes */
        uint32_t a = b64_tab[in[i]], b = b64_tab[in[i + 1]],
                 c = i + 2 < len ? b64_tab[in[i + 2]] : 0;
        if ((a | b | c) & 0x80)
            return -1;
        uint32_t v = a << 18 | b << 12 | c << 6;
        out[o++] = (unsigned char)(v >> 16);
        if (i + 2 < len)
            out[o++] = (unsigned char)(v >> 8);
    }
    if (o < room)
        out[o] = '\0';
    return (long)o;
}

/* Decode base64 (padding optional) into a new buffer; malloc'd and
 * NUL-terminated, *n gets the length. NULL on a bad character or a
 * dangling sextet. */
char *etcd_b64_decode_n(const char *src, size_t len, size_t *n) {
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    memcpy(out, src, len);
    long got = b64_decode_inplace(out, len);
    if (got < 0) {
        free(out);
        return NULL;
    }
    out[got] = '\0';
    *n = (size_t)got;
    return out;
}

/* ------------------------------------------------------------------ */
/* Watch responses: an in-place JSON tokenizer                          */
/* ------------------------------------------------------------------ */

/*
 * A watch line can carry megabytes of base64 (a route document). cJSON
 * would copy every string out of the line and build a tree of it; this
 * tokenizer only records where each value lies in the line, so the big
 * value is found with two memchr() and decoded in place, once. Tokens are
 * in document order; `next` is the index of the token after a value and
 * everything inside it, so a reader skips a subtree in one step. An
 * object's tokens alternate key, value.
 */
typedef enum jt_type { JT_OBJ, JT_ARR, JT_STR, JT_PRIM } jt_type;

typedef struct jtok {
    uint8_t type;
    bool escaped;      /* a string with a backslash in it */
    size_t start, end; /* [start, end) in the line; strings without quotes */
    uint32_t next;
} jtok;

typedef struct jdoc {
    char *s;
    size_t n;
    jtok *t;
    uint32_t count, cap;
} jdoc;

#define JDOC_MAX_DEPTH 32

static size_t jws(const jdoc *d, size_t i) {
    while (i < d->n && (d->s[i] == ' ' || d->s[i] == '\t' || d->s[i] == '\n' ||
                        d->s[i] == '\r'))
        i++;
    return i;
}

static long jpush(jdoc *d, jt_type type, size_t start) {
    if (d->count == d->cap) {
        uint32_t cap = d->cap ? d->cap * 2 : 64;
        jtok *t = realloc(d->t, cap * sizeof *t);
        if (!t)
            return -1;
        d->t = t;
        d->cap = cap;
    }
    d->t[d->count] = (jtok){(uint8_t)type, false, start, start, d->count + 1};
    return d->count++;
}

/* A string starting at the quote d->s[*pos]. */
static bool jstring(jdoc *d, size_t *pos) {
    size_t i = *pos + 1;
    const char *q = i < d->n ? memchr(d->s + i, '"', d->n - i) : NULL;
    if (!q)
        return false;
    bool esc = memchr(d->s + i, '\\', (size_t)(q - (d->s + i))) != NULL;
    if (esc) { /* walk it: a quote may be escaped */
        size_t j = i;
        while (j < d->n && d->s[j] != '"')
            j += d->s[j] == '\\' ? 2 : 1;
        if (j >= d->n)
            return false;
        q = d->s + j;
    }
    long k = jpush(d, JT_STR, i);
    if (k < 0)
        return false;
    d->t[k].end = (size_t)(q - d->s);
    d->t[k].escaped = esc;
    *pos = d->t[k].end + 1;
    return true;
}

static bool jvalue(jdoc *d, size_t *pos, int depth) {
    size_t i = jws(d, *pos);
    if (i >= d->n || depth > JDOC_MAX_DEPTH)
        return false;
    char c = d->s[i];
    if (c == '"') {
        *pos = i;
        return jstring(d, pos);
    }
    if (c == '{' || c == '[') {
        bool obj = c == '{';
        long k = jpush(d, obj ? JT_OBJ : JT_ARR, i);
        if (k < 0)
            return false;
        i = jws(d, i + 1);
        if (i < d->n && d->s[i] == (obj ? '}' : ']')) {
            i++;
        } else {
            for (;;) {
                if (obj) {
                    i = jws(d, i);
                    if (i >= d->n || d->s[i] != '"' || !jstring(d, &i))
                        return false;
                    i = jws(d, i);
                    if (i >= d->n || d->s[i] != ':')
                        return false;
                    i++;
                }
                if (!jvalue(d, &i, depth + 1))
                    return false;
                i = jws(d, i);
                if (i < d->n && d->s[i] == ',') {
                    i++;
                    continue;
                }
                if (i < d->n && d->s[i] == (obj ? '}' : ']')) {
                    i++;
                    break;
                }
                return false;
            }
        }
        d->t[k].end = i;
        d->t[k].next = d->count;
        *pos = i;
        return true;
    }
    size_t j = i; /* number, true, false, null */
    while (j < d->n && (d->s[j] == '-' || d->s[j] == '+' || d->s[j] == '.' ||
                        (d->s[j] >= '0' && d->s[j] <= '9') ||
                        (d->s[j] >= 'a' && d->s[j] <= 'z') ||
                        (d->s[j] >= 'A' && d->s[j] <= 'Z')))
        j++;
    if (j == i)
        return false;
    long k = jpush(d, JT_PRIM, i);
    if (k < 0)
        return false;
    d->t[k].end = j;
    *pos = j;
    return true;
}

/* Tokenize s[0, n): false on malformed JSON (or out of memory). */
static bool jparse(jdoc *d, char *s, size_t n) {
    *d = (jdoc){.s = s, .n = n};
    size_t pos = 0;
    return jvalue(d, &pos, 0) && jws(d, pos) == n;
}

static void jfree(jdoc *d) {
    free(d->t);
    d->t = NULL;
}

/* The value of member `key` of object token `obj`, or -1. */
static long jget(const jdoc *d, long obj, const char *key) {
    if (obj < 0 || d->t[obj].type != JT_OBJ)
        return -1;
    size_t kl = strlen(key);
    for (uint32_t i = (uint32_t)obj + 1; i < d->t[obj].next;
         i = d->t[i + 1].next) {
        const jtok *k = &d->t[i];
        if (k->end - k->start == kl && !k->escaped &&
            memcmp(d->s + k->start, key, kl) == 0)
            return (long)i + 1;
    }
    return -1;
}

static bool jis(const jdoc *d, long k, jt_type type) {
    return k >= 0 && d->t[k].type == type;
}

/* A string token equal to `text` / a primitive token `true`. */
static bool jeq(const jdoc *d, long k, const char *text) {
    size_t l = strlen(text);
    return k >= 0 && d->t[k].end - d->t[k].start == l &&
           memcmp(d->s + d->t[k].start, text, l) == 0;
}

/* Undo a string token's escapes in place (the text only shrinks);
 * \uXXXX beyond ASCII becomes '?'. Returns its new length. */
static size_t junescape(jdoc *d, long k) {
    jtok *t = &d->t[k];
    if (!t->escaped)
        return t->end - t->start;
    char *p = d->s + t->start, *o = p, *end = d->s + t->end;
    while (p < end) {
        if (*p != '\\' || p + 1 >= end) {
            *o++ = *p++;
            continue;
        }
        char c = p[1];
        p += 2;
        switch (c) {
        case 'n': *o++ = '\n'; break;
        case 't': *o++ = '\t'; break;
        case 'r': *o++ = '\r'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'u': {
            unsigned v = 0;
            int got = 0;
            while (got < 4 && p < end && isxdigit((unsigned char)*p)) {
                v = v * 16 +
                    (unsigned)(isdigit((unsigned char)*p)
                                   ? *p - '0'
                                   : (tolower((unsigned char)*p) - 'a' + 10));
                p++;
                got++;
            }
            *o++ = v < 0x80 ? (char)v : '?';
            break;
        }
        default: *o++ = c; /* \" \\ \/ */
        }
    }
    t->end = t->start + (size_t)(o - (d->s + t->start));
    t->escaped = false;
    return t->end - t->start;
}

/* A string token copied (unescaped) into out, NUL-terminated. */
static void jcopy(jdoc *d, long k, char *out, size_t cap) {
    if (!jis(d, k, JT_STR)) {
        snprintf(out, cap, "%s", "");
        return;
    }
    size_t l = junescape(d, k);
    snprintf(out, cap, "%.*s", (int)l, d->s + d->t[k].start);
}

/* An int64 sent as a JSON string or number; 0 when absent or bad. */
static int64_t jint(const jdoc *d, long k) {
    if (!jis(d, k, JT_STR) && !jis(d, k, JT_PRIM))
        return 0;
    char tmp[32];
    size_t l = d->t[k].end - d->t[k].start;
    if (l >= sizeof tmp)
        return 0;
    memcpy(tmp, d->s + d->t[k].start, l);
    tmp[l] = '\0';
    return strtoll(tmp, NULL, 10);
}

/* An int64 that etcd's gateway sends as a JSON string (or a number). */
static int64_t json_i64(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (cJSON_IsString(v))
        return strtoll(v->valuestring, NULL, 10);
    if (cJSON_IsNumber(v))
        return (int64_t)v->valuedouble;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Keys to changes                                                      */
/* ------------------------------------------------------------------ */

void etcd_change_free(etcd_change *c) {
    free(c->name);
    free(c->id);
    free(c->key);
    if (!c->borrowed)
        free(c->value);
}

void etcd_changes_clear(etcd_change_list *l) {
    for (size_t i = 0; i < l->n; i++)
        etcd_change_free(&l->v[i]);
    free(l->v);
    *l = (etcd_change_list){0};
}

/*
 * Classify a key: PREFIX routes/<source> or PREFIX instances/<service>/<id>.
 * Fills name/id (malloc'd) and returns 1; 0 for other keys (one under the
 * prefix told to e->on_other, with what it lacks); -1 when out of memory.
 */
static const char *key_why(const char *rest, size_t rlen) {
    if (memchr(rest, '\0', rlen))
        return "it holds a NUL byte";
    if (rest[0] == '/')
        return "it is PREFIX followed by '/' (the prefix names the directory "
               "with its trailing '/', e.g. /switchyard/)";
    if (rlen >= 7 && memcmp(rest, "routes/", 7) == 0)
        return "a routes/<source> key's source is 1 to 127 bytes without '/'";
    if (rlen >= 9 && memcmp(rest, "instances", 9) == 0)
        return "an instance key is instances/<service>/<id>, both non-empty";
    return "it is neither routes/<source> nor instances/<service>/<id>";
}

static int classify_key(const etcd_keys *e, const char *key, size_t klen,
                        bool del, etcd_change *c) {
    if (klen <= e->prefix_len || memcmp(key, e->prefix, e->prefix_len))
        return 0;
    const char *rest = key + e->prefix_len;
    size_t rlen = klen - e->prefix_len;
    if (memchr(rest, '\0', rlen))
        goto other;
    if (rlen > 7 && memcmp(rest, "routes/", 7) == 0) {
        const char *name = rest + 7;
        size_t nlen = rlen - 7;
        if (nlen > 127 || memchr(name, '/', nlen))
            goto other;
        c->is_route = true;
        c->name = etcd_strndup(name, nlen);
        return c->name ? 1 : -1;
    }
    if (rlen > 10 && memcmp(rest, "instances/", 10) == 0) {
        const char *svc = rest + 10;
        const char *slash = memchr(svc, '/', rlen - 10);
        if (!slash || slash == svc || slash + 1 == rest + rlen)
            goto other;
        c->is_route = false;
        c->name = etcd_strndup(svc, (size_t)(slash - svc));
        c->id = etcd_strndup(slash + 1, (size_t)(rest + rlen - slash - 1));
        return c->name && c->id ? 1 : -1;
    }
other:
    if (e->on_other)
        e->on_other(e->data, key, klen, del, key_why(rest, rlen));
    return 0;
}

/* A kv as etcd's JSON gives it: key and value in base64. */
typedef struct kv_view {
    const char *key;
    size_t key_len;
    char *value; /* NULL: absent (the gateway omits an empty value) */
    size_t value_len;
    int64_t mod_revision, create_revision;
} kv_view;

/* A kv (or delete) into a change: 1, or 0 to ignore it (another key,
 * bad base64), or -1 when out of memory (nothing to free then).
 * `in_place`: the value is decoded where it lies and the change borrows it
 * (it must outlive the change), else the change gets a decoded copy. */
static int change_from_view(const etcd_keys *e, kv_view *v, bool del,
                            bool in_place, etcd_change *c) {
    static char empty[1];
    *c = (etcd_change){0};
    char *key = malloc(v->key_len + 1);
    if (!key)
        return -1;
    memcpy(key, v->key, v->key_len);
    long klen = b64_decode_inplace(key, v->key_len);
    if (klen >= 0)
        key[klen] = '\0';
    int got = klen < 0 ? 0 : classify_key(e, key, (size_t)klen, del, c);
    if (got <= 0) {
        free(key);
        etcd_change_free(c);
        return got;
    }
    c->key = key;
    c->del = del;
    c->mod_revision = v->mod_revision;
    c->create_revision = v->create_revision;
    if (del)
        return 1;
    long vlen = 0;
    if (!v->value) {
        c->value = in_place ? empty : etcd_strdup("");
        c->borrowed = in_place;
    } else if (in_place) {
        c->value = v->value;
        c->borrowed = true;
    } else {
        c->value = etcd_strndup(v->value, v->value_len);
    }
    if (!c->value) {
        etcd_change_free(c);
        return -1;
    }
    if (v->value) {
        vlen = b64_decode_inplace(c->value, v->value_len);
        if (vlen < 0) { /* not base64: not a value */
            etcd_change_free(c);
            return 0;
        } /* NUL-terminated by the decoder (or strndup's when empty) */
    }
    c->len = (size_t)vlen;
    return 1;
}

/* A kv of a range answer (cJSON) into a change that owns its value; as
 * change_from_view. */
static int change_from_kv(const etcd_keys *e, const cJSON *kv, bool del,
                          etcd_change *c) {
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(kv, "key");
    const cJSON *val = cJSON_GetObjectItemCaseSensitive(kv, "value");
    if (!cJSON_IsString(k))
        return 0;
    kv_view v = {k->valuestring,
                 strlen(k->valuestring),
                 cJSON_IsString(val) ? val->valuestring : NULL,
                 cJSON_IsString(val) ? strlen(val->valuestring) : 0,
                 json_i64(kv, "mod_revision"),
                 json_i64(kv, "create_revision")};
    return change_from_view(e, &v, del, false, c);
}

bool etcd_changes_push(etcd_change_list *l, etcd_change *c) {
    etcd_change *v = etcd_grow(l->v, &l->cap, l->n, sizeof *v, 16);
    if (!v)
        return false;
    l->v = v;
    l->v[l->n++] = *c;
    return true;
}

/* ------------------------------------------------------------------ */
/* Answers                                                              */
/* ------------------------------------------------------------------ */

/* The error of a non-200 answer: etcd's "message", else the first line
 * of a text answer (etcd's own HTTP layer answers some refusals in plain
 * text), else the status. */
void etcd_decode_answer_error(int status, const char *body, size_t n, char *out,
                              size_t cap, int *code) {
    *code = -1;
    cJSON *o = body ? cJSON_ParseWithLength(body, n) : NULL;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "message");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "code");
    if (cJSON_IsNumber(c))
        *code = (int)c->valuedouble;
    size_t line = 0; /* printable text up to the first line's end */
    while (!o && body && line < n && line < 300 &&
           (unsigned char)body[line] >= 0x20 && body[line] != 0x7f)
        line++;
    if (cJSON_IsString(m))
        snprintf(out, cap, "HTTP %d: %s", status, m->valuestring);
    else if (line)
        snprintf(out, cap, "HTTP %d: %.*s", status, (int)line, body);
    else
        snprintf(out, cap, "HTTP %d", status);
    cJSON_Delete(o);
}

/* The events of a watch response newer than `applied`, their values
 * decoded where they lie. -1: out of memory. */
static int watch_events(jdoc *d, long res, const etcd_keys *keys,
                        int64_t applied, etcd_watch_msg *m) {
    long events = jget(d, res, "events");
    m->top = applied;
    if (!jis(d, events, JT_ARR))
        return 0;
    for (uint32_t ev = (uint32_t)events + 1; ev < d->t[events].next;
         ev = d->t[ev].next) {
        bool del = jeq(d, jget(d, ev, "type"), "DELETE");
        long kv = jget(d, ev, "kv");
        int64_t rev = jint(d, jget(d, kv, "mod_revision"));
        if (rev <= applied)
            continue;     /* already applied: never twice */
        if (rev > m->top) /* a key not ours moves the revision too */
            m->top = rev;
        long k = jget(d, kv, "key"), v = jget(d, kv, "value");
        if (!jis(d, k, JT_STR))
            continue;
        kv_view view = {d->s + d->t[k].start,
                        junescape(d, k),
                        NULL,
                        0,
                        rev,
                        jint(d, jget(d, kv, "create_revision"))};
        if (jis(d, v, JT_STR)) {
            view.value_len = junescape(d, v);
            view.value = d->s + d->t[v].start;
        }
        etcd_change c;
        int got = change_from_view(keys, &view, del, true, &c);
        if (got < 0 || (got > 0 && !etcd_changes_push(&m->changes, &c))) {
            if (got > 0)
                etcd_change_free(&c);
            return -1;
        }
    }
    return 0;
}

int etcd_decode_watch(char *line, size_t n, const etcd_keys *keys,
                      int64_t applied, etcd_watch_msg *m) {
    memset(m, 0, sizeof *m);
    jdoc d;
    bool parsed = jparse(&d, line, n);
    long res = parsed ? jget(&d, 0, "result") : -1;
    if (!jis(&d, res, JT_OBJ)) {
        long msg = parsed ? jget(&d, jget(&d, 0, "error"), "message") : -1;
        jcopy(&d, msg, m->message, sizeof m->message);
        if (!m->message[0])
            snprintf(m->message, sizeof m->message, "%s",
                     parsed ? "unexpected message"
                            : "malformed watch response");
        jfree(&d);
        m->kind = ETCD_WATCH_ERROR;
        return 0;
    }
    long hdr = jget(&d, res, "header");
    m->revision = jint(&d, jget(&d, hdr, "revision"));
    int rc = 0;
    if (jeq(&d, jget(&d, res, "canceled"), "true")) {
        m->kind = ETCD_WATCH_CANCELED;
        m->compact_revision = jint(&d, jget(&d, res, "compact_revision"));
        jcopy(&d, jget(&d, res, "cancel_reason"), m->message,
              sizeof m->message); /* why, when etcd says */
    } else if (jeq(&d, jget(&d, res, "created"), "true")) {
        m->kind = ETCD_WATCH_CREATED;
        jcopy(&d, jget(&d, hdr, "cluster_id"), m->cluster_id,
              sizeof m->cluster_id);
    } else if (!jis(&d, jget(&d, res, "events"), JT_ARR)) {
        m->kind = ETCD_WATCH_PROGRESS;
    } else {
        m->kind = ETCD_WATCH_EVENTS;
        rc = watch_events(&d, res, keys, applied, m);
        if (rc) {
            etcd_changes_clear(&m->changes);
            m->top = applied;
        }
    }
    jfree(&d);
    return rc;
}

/* Where the page after the one that ended at key `last` (base64) starts:
 * the key + "\0", in base64; NULL on a bad key or no memory. */
static char *next_page_key(const char *last) {
    size_t klen;
    char *key = etcd_b64_decode_n(last, strlen(last), &klen);
    char *next = NULL;
    if (key) { /* decoded with a NUL after it: encode one byte more */
        next = etcd_b64_encode(key, klen + 1);
        free(key);
    }
    return next;
}

int etcd_decode_range(const char *body, size_t n, const etcd_keys *keys,
                      etcd_change_list *into, etcd_range_page *page, char *err,
                      size_t err_len) {
    memset(page, 0, sizeof *page);
    cJSON *o = cJSON_ParseWithLength(body, n);
    const cJSON *hdr = cJSON_GetObjectItemCaseSensitive(o, "header");
    if (!cJSON_IsObject(hdr)) {
        cJSON_Delete(o);
        snprintf(err, err_len, "answer without a header");
        return -1;
    }
    page->has_header = true;
    page->revision = json_i64(hdr, "revision");
    const cJSON *cid = cJSON_GetObjectItemCaseSensitive(hdr, "cluster_id");
    snprintf(page->cluster_id, sizeof page->cluster_id, "%s",
             cJSON_IsString(cid) ? cid->valuestring : "");
    const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(o, "kvs");
    const cJSON *kv;
    const char *last = NULL;
    int rc = 0;
    cJSON_ArrayForEach(kv, kvs) {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(kv, "key");
        if (cJSON_IsString(k))
            last = k->valuestring;
        etcd_change c;
        int got = change_from_kv(keys, kv, false, &c);
        if (got < 0 || (got > 0 && !etcd_changes_push(into, &c))) {
            if (got > 0)
                etcd_change_free(&c);
            rc = -2;
            break;
        }
    }
    page->more = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "more"));
    if (!rc && page->more && last) {
        page->next_b64 = next_page_key(last);
        if (!page->next_b64) {
            snprintf(err, err_len, "bad key in answer");
            rc = -1;
        }
    }
    cJSON_Delete(o);
    if (rc == -2)
        snprintf(err, err_len, "out of memory");
    return rc;
}

/* ------------------------------------------------------------------ */
/* Instance values                                                      */
/* ------------------------------------------------------------------ */

void etcd_instance_clear(etcd_instance *v) {
    cJSON_Delete(v->json);
    free(v->md);
    *v = (etcd_instance){0};
}

/* The instances format's own checks (sy_instances_parse) on the value as
 * decoded, its id the key's: what the library refuses beyond the checks
 * below (a host with a port or a scheme, an empty version, a metadata key
 * given twice) is refused here, by its key, while the others of the
 * service go on; at the commit it refused the service's whole list. 0,
 * -1 (err filled) or -2 (out of memory). */
static int etcd_instance_check(const cJSON *o, const char *key_id, char *err,
                               size_t err_len) {
    cJSON *doc = cJSON_CreateObject();
    cJSON *arr = doc ? cJSON_AddArrayToObject(doc, "i") : NULL;
    cJSON *c = arr ? cJSON_Duplicate(o, true) : NULL;
    if (c) {
        cJSON_AddItemToArray(arr, c);
        cJSON_DeleteItemFromObjectCaseSensitive(c, "id");
    }
    char *text = c && cJSON_AddStringToObject(c, "id", key_id)
                     ? cJSON_PrintUnformatted(doc)
                     : NULL;
    cJSON_Delete(doc);
    if (!text)
        return -2;
    sy_instances *d = NULL;
    sy_error e;
    int rc = sy_instances_parse(text, strlen(text), NULL, &d, &e);
    cJSON_free(text);
    sy_instances_free(d);
    if (rc == SY_ENOMEM)
        return -2;
    if (rc) { /* "i[0].host" -> "host" */
        const char *p = strncmp(e.path, "i[0].", 5) == 0 ? e.path + 5 : e.path;
        snprintf(err, err_len, "%s: %s", p, e.message);
        return -1;
    }
    return 0;
}

/*
 * Parse one instance object (an entry of the instances file format) into
 * r (replacing its value only on success). The key's id is the instance's
 * id; an "id" member, when present, must equal it.
 */
int etcd_decode_instance(const char *key_id, const char *json, size_t len,
                         etcd_instance *r, char *err, size_t err_len) {
    cJSON *o = cJSON_ParseWithLength(json, len);
    if (!o) {
        const char *at = cJSON_GetErrorPtr();
        size_t off =
            at && at >= json && at <= json + len ? (size_t)(at - json) : 0;
        snprintf(err, err_len, "JSON syntax error at offset %zu", off);
        return -1;
    }
    const char *what = NULL;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
    const cJSON *host = cJSON_GetObjectItemCaseSensitive(o, "host");
    const cJSON *port = cJSON_GetObjectItemCaseSensitive(o, "port");
    const cJSON *weight = cJSON_GetObjectItemCaseSensitive(o, "weight");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "state");
    const cJSON *secure = cJSON_GetObjectItemCaseSensitive(o, "secure");
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    sy_instance in = {0};
    in.id = key_id;
    static const char *const known[] = {"id",    "host",   "port",    "weight",
                                        "state", "secure", "metadata"};
    const size_t nknown = sizeof known / sizeof *known;
    for (const cJSON *it = cJSON_IsObject(o) ? o->child : NULL; it;
         it = it->next) {
        size_t k = 0;
        while (k < nknown && strcmp(it->string, known[k]))
            k++;
        if (k == nknown) { /* the file's format: a typo is not dropped */
            snprintf(err, err_len,
                     "%.60s: not a field of an instance (id, host, port, "
                     "weight, state, secure, metadata)",
                     it->string);
            cJSON_Delete(o);
            return -1;
        }
    }
    if (!cJSON_IsObject(o))
        what = "$: expected an object";
    else if (id && (!cJSON_IsString(id) || strcmp(id->valuestring, key_id)))
        what = "id: must equal the key's instance id";
    else if (!cJSON_IsString(host) || !host->valuestring[0])
        what = "host: expected a non-empty string";
    else if (!cJSON_IsNumber(port) || port->valuedouble < 1 ||
             port->valuedouble > 65535 ||
             port->valuedouble != (double)(int)port->valuedouble)
        what = "port: expected an integer in 1..65535";
    else if (weight && (!cJSON_IsNumber(weight) || weight->valuedouble < 1 ||
                        weight->valuedouble > 4294967295.0 ||
                        weight->valuedouble != floor(weight->valuedouble)))
        what = "weight: expected an integer in 1..4294967295 (0 would count "
               "as 1: to take an instance out, set its state)";
    else if (secure && !cJSON_IsBool(secure))
        what = "secure: expected true or false";
    else if (cJSON_IsTrue(secure)) /* run or refuse: no TLS client */
        what = "secure: host 'gateway' does not run TLS to an instance";
    else if (st && !cJSON_IsString(st))
        what = "state: expected \"up\", \"draining\" or \"down\"";
    else if (md && !cJSON_IsObject(md))
        what = "metadata: expected an object of strings";
    if (!what && st) {
        const char *s = st->valuestring;
        if (strcasecmp(s, "up") == 0) /* any case, as the file's */
            in.state = SY_INSTANCE_UP;
        else if (strcasecmp(s, "draining") == 0)
            in.state = SY_INSTANCE_DRAINING;
        else if (strcasecmp(s, "down") == 0)
            in.state = SY_INSTANCE_DOWN;
        else
            what = "state: expected \"up\", \"draining\" or \"down\"";
    }
    size_t nmd = md ? (size_t)cJSON_GetArraySize(md) : 0;
    sy_kv *kvs = NULL;
    if (!what && nmd) {
        kvs = calloc(nmd, sizeof *kvs);
        if (!kvs) {
            snprintf(err, err_len, "out of memory");
            cJSON_Delete(o);
            return -2;
        }
        size_t k = 0;
        cJSON *kv;
        cJSON_ArrayForEach(kv, md) {
            if (what)
                break;
            /* as the file's: an integer or a boolean is its text */
            double dv = kv->valuedouble;
            char num[32];
            cJSON *text = NULL;
            if (cJSON_IsBool(kv))
                text = cJSON_CreateString(cJSON_IsTrue(kv) ? "true" : "false");
            else if (cJSON_IsNumber(kv) && dv == floor(dv) &&
                     fabs(dv) <= 9007199254740992.0) {
                snprintf(num, sizeof num, "%.0f", dv);
                text = cJSON_CreateString(num);
            }
            if (text && !cJSON_ReplaceItemInObjectCaseSensitive(
                            (cJSON *)md, kv->string, text))
                cJSON_Delete(text);
            else if (text)
                kv = text;
            if (!cJSON_IsString(kv)) {
                snprintf(err, err_len,
                         "metadata.%s: expected a string (an integer or a "
                         "boolean is taken as its text; write a version "
                         "such as 1.10 as a string)",
                         kv->string);
                free(kvs);
                cJSON_Delete(o);
                return -1;
            }
            kvs[k++] = (sy_kv){kv->string, kv->valuestring};
        }
    }
    if (what) {
        snprintf(err, err_len, "%s", what);
        free(kvs);
        cJSON_Delete(o);
        return -1;
    }
    int rc = etcd_instance_check(o, key_id, err, err_len);
    if (rc) {
        if (rc == -2)
            snprintf(err, err_len, "out of memory");
        free(kvs);
        cJSON_Delete(o);
        return rc;
    }
    in.host = host->valuestring;
    in.port = (uint16_t)port->valuedouble;
    in.weight = weight ? (uint32_t)weight->valuedouble : 1;
    in.secure = secure && cJSON_IsTrue(secure);
    in.metadata = kvs;
    in.metadata_count = nmd;
    etcd_instance_clear(r);
    r->json = o;
    r->md = kvs;
    r->inst = in;
    return 0;
}
