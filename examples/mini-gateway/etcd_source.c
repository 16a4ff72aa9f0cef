/*
 * etcd_source.c - routes and instances from etcd v3 (issue 11).
 *
 * Owns: the etcd source of the mini-gateway: HTTP/1.1 exchanges with etcd's
 * JSON gateway on the host's libuv loop (responses parsed by http-parser,
 * bodies by cJSON), the base64 codec for keys and values, the full range
 * read (paged, at one revision), the watch stream, the mapping from keys to
 * router changes, backoff and resynchronisation, and the per-source status.
 *
 * Revision bookkeeping: `revision` is the etcd revision the router
 * reflects. A full read sets it to the read's header revision; a watch
 * response sets it to its last event's mod_revision. Reconnecting watches
 * from revision + 1, so nothing is missed or applied twice; a watch that
 * is cancelled because that revision was compacted, or an etcd whose
 * revision went back (data lost) or whose cluster changed, triggers a full
 * read, which is diffed against what is applied (by mod_revision).
 */
#include "etcd_source.h"

#include <http_parser.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_PREFIX "/switchyard/"
#define RANGE_PAGE 256
#define READ_CHUNK 65536

/* ------------------------------------------------------------------ */
/* Small helpers: growable buffer, base64                               */
/* ------------------------------------------------------------------ */

typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

static bool buf_add(buf *b, const char *p, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q)
            return false;
        b->p = q;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = '\0';
    return true;
}

static void buf_free(buf *b) {
    free(b->p);
    *b = (buf){0};
}

static const char b64_chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Standard base64 with padding; malloc'd, NUL-terminated. */
static char *b64_encode(const char *src, size_t n) {
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
static char *b64_decode_n(const char *src, size_t len, size_t *n) {
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

static char *b64_decode(const char *src, size_t *n) {
    return b64_decode_n(src, strlen(src), n);
}

/* The wall clock (CLOCK_REALTIME) in microseconds: the trace's stamps,
 * comparable across processes. */
static int64_t wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* This thread's CPU time in microseconds. */
static uint64_t cpu_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
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
/* State                                                                */
/* ------------------------------------------------------------------ */

typedef struct endpoint {
    char host[256];
    char port[8];
} endpoint;

/* One route source: PREFIX routes/<name>. */
typedef struct source_rec {
    char *name;
    char *key;
    int64_t mod_revision;    /* of the last value (or delete) seen */
    int64_t create_revision; /* of the key's current incarnation */
    bool present;            /* the key exists */
    bool applied;            /* a document from etcd is live */
    char version[128];       /* of the live document, "" if none */
    bool has_version;
    uint64_t checksum; /* of the live document's bytes */
    char *error;       /* last attempt's error, NULL if it succeeded */
    size_t lib_index;  /* the router's index of the source, or SIZE_MAX */
    bool stale;        /* committed since applied/version/checksum were read */
} source_rec;

/* One instance: PREFIX instances/<service>/<id>. */
typedef struct inst_rec {
    char *id;
    int64_t mod_revision;
    cJSON *json; /* the live value (valid), or NULL */
    sy_instance inst;
    sy_kv *md;
    char *error; /* last put's error, NULL if it was accepted */
} inst_rec;

typedef struct service_rec {
    char *name;
    inst_rec *v; /* sorted by id */
    size_t n, cap;
    bool touched;
    char *error; /* the router rejected the list (NULL: accepted) */
} service_rec;

/* A key change to apply (from a watch event or a full read). */
typedef struct change {
    bool is_route;
    bool del;
    char *name; /* source, or service */
    char *id;   /* instance id */
    char *key;
    char *value;
    size_t len;
    bool borrowed; /* value points into a watch line: not freed here */
    int64_t mod_revision;
    int64_t create_revision;
} change;

typedef struct change_list {
    change *v;
    size_t n, cap;
} change_list;

typedef enum state {
    ST_CONNECTING = 0,
    ST_READING,
    ST_WATCHING,
    ST_BACKOFF,
    ST_STOPPED
} state;

static const char *state_names[] = {"connecting", "reading", "watching",
                                    "backoff", "stopped"};

typedef struct gw_http gw_http;

struct gw_etcd {
    uv_loop_t *loop;
    sy_router *router;
    gw_etcd_options opts;
    char *url;
    char *prefix;
    size_t prefix_len;
    char *key_b64, *end_b64; /* the prefix range */
    endpoint *eps;
    size_t ep_count, ep_index;

    uv_timer_t retry_timer;
    uint32_t backoff_ms;
    uint64_t rng;  /* jitter */
    gw_http *http; /* the one exchange in flight, or NULL */
    bool stopping;

    /* full read in progress */
    int64_t read_revision;
    change_list pending;
    bool need_full_read;
    bool force_full; /* the next full read applies every key */
    char cluster_id[32];

    /* everything below is shared with status readers: under mu */
    uv_mutex_t mu;
    state st;
    bool connected;
    int64_t revision;
    char *last_error;
    uint64_t reconnects, full_reads, commits, events, rejected;
    uint64_t last_commit_us, commit_us_total; /* time spent committing */
    /* the CPU time of the commits; the time spent reading fingerprints */
    uint64_t commit_cpu_us_total, fingerprint_us_total;
    /* time spent parsing watch lines and decoding their values */
    uint64_t last_decode_us, decode_us_total;
    /* the watch response being applied, and the last one committed */
    gw_etcd_trace trace, last_trace;
    source_rec *src;
    size_t src_n, src_cap;
    service_rec *svc;
    size_t svc_n, svc_cap;
};

static void etcd_log(gw_etcd *e, gw_etcd_log_level lvl, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (e->opts.on_log)
        e->opts.on_log(e->opts.data, lvl, msg);
    else
        fprintf(stderr, "etcd: %s\n", msg);
}

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

static char *xstrndup(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

static void set_str(char **slot, const char *s) {
    free(*slot);
    *slot = s ? xstrdup(s) : NULL;
}

/* ------------------------------------------------------------------ */
/* HTTP exchanges with etcd (one request per connection)               */
/* ------------------------------------------------------------------ */

/* One line of a streamed body; the line may be changed in place (it is
 * the exchange's buffer, discarded once the callback returns). */
typedef void (*http_line_fn)(gw_etcd *e, char *line, size_t n);
/* Exactly once per exchange unless the owner closed it first: status and
 * body on a complete response, or err on failure. */
typedef void (*http_done_fn)(gw_etcd *e, int status, const char *body, size_t n,
                             const char *err);

struct gw_http {
    gw_etcd *e;
    uv_getaddrinfo_t gai;
    uv_tcp_t tcp;
    uv_connect_t conn;
    uv_write_t wr;
    uv_timer_t timer;
    http_parser parser;
    char *req;
    size_t req_len;
    buf body;
    char rbuf[READ_CHUNK];
    int status;
    bool streaming;      /* body delivered line by line (watch) */
    bool complete;       /* message complete */
    bool closing;        /* the owner is done with it */
    bool gai_pending;    /* getaddrinfo not called back yet */
    size_t scanned;      /* streaming: body bytes already searched for '\n' */
    int64_t read_us;     /* wall clock of the read being parsed */
    int64_t line_us;     /* wall clock of the read that began the open line */
    uint32_t line_reads; /* reads that brought the open line so far */
    int handles;         /* open libuv handles */
    http_line_fn on_line;
    http_done_fn on_done;
};

static void http_maybe_free(gw_http *h) {
    if (h->closing && h->handles == 0 && !h->gai_pending) {
        free(h->req);
        buf_free(&h->body);
        free(h);
    }
}

static void http_handle_closed(uv_handle_t *hd) {
    gw_http *h = hd->data;
    h->handles--;
    http_maybe_free(h);
}

/* The owner is done: no more callbacks; freed once libuv lets go. */
static void http_close(gw_http *h) {
    if (!h || h->closing)
        return;
    h->closing = true;
    if (h->gai_pending)
        uv_cancel((uv_req_t *)&h->gai);
    if (!uv_is_closing((uv_handle_t *)&h->timer))
        uv_close((uv_handle_t *)&h->timer, http_handle_closed);
    if (h->handles == 2 && !uv_is_closing((uv_handle_t *)&h->tcp))
        uv_close((uv_handle_t *)&h->tcp, http_handle_closed);
    http_maybe_free(h);
}

static void http_fail(gw_http *h, const char *err) {
    if (h->closing)
        return;
    http_done_fn done = h->on_done;
    gw_etcd *e = h->e;
    done(e, h->status, NULL, 0, err);
}

static int on_hp_status(http_parser *p, const char *at, size_t n) {
    (void)at;
    (void)n;
    gw_http *h = p->data;
    h->status = (int)p->status_code;
    return 0;
}

static int on_hp_headers_complete(http_parser *p) {
    gw_http *h = p->data;
    h->status = (int)p->status_code;
    /* A watch stream stays open: only connecting and the response head
     * are timed. */
    if (h->streaming && h->status == 200)
        uv_timer_stop(&h->timer);
    return 0;
}

static int on_hp_body(http_parser *p, const char *at, size_t n) {
    gw_http *h = p->data;
    if (!h->body.len) { /* a line begins */
        h->line_us = h->read_us;
        h->line_reads = 0;
    }
    h->line_reads++;
    if (!buf_add(&h->body, at, n))
        return -1;
    if (!h->streaming || h->status != 200)
        return 0;
    /* One JSON object per line; bytes before `scanned` hold no newline. */
    size_t start = 0;
    for (size_t i = h->scanned; i < h->body.len; i++) {
        const char *nl = memchr(h->body.p + i, '\n', h->body.len - i);
        if (!nl)
            break;
        i = (size_t)(nl - h->body.p);
        if (i > start)
            h->on_line(h->e, h->body.p + start, i - start);
        start = i + 1;
        if (h->closing)
            return -1;
    }
    if (start) {
        memmove(h->body.p, h->body.p + start, h->body.len - start);
        h->body.len -= start;
        h->body.p[h->body.len] = '\0';
        h->line_us = h->read_us; /* the rest begins the next line */
        h->line_reads = 1;
    }
    h->scanned = h->body.len;
    return 0;
}

static int on_hp_complete(http_parser *p) {
    gw_http *h = p->data;
    h->complete = true;
    return 0;
}

static const http_parser_settings hp_settings = {
    .on_status = on_hp_status,
    .on_headers_complete = on_hp_headers_complete,
    .on_body = on_hp_body,
    .on_message_complete = on_hp_complete,
};

static void http_finish(gw_http *h) {
    if (h->closing)
        return;
    if (h->streaming && h->status == 200) {
        /* A watch stream that ends, even cleanly, means reconnecting. */
        if (h->body.len)
            h->on_line(h->e, h->body.p, h->body.len);
        if (!h->closing)
            http_fail(h, "watch stream ended");
        return;
    }
    h->on_done(h->e, h->status, h->body.p ? h->body.p : "", h->body.len, NULL);
}

static void http_alloc(uv_handle_t *hd, size_t hint, uv_buf_t *b) {
    (void)hint;
    gw_http *h = hd->data;
    *b = uv_buf_init(h->rbuf, sizeof h->rbuf);
}

static void http_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b) {
    gw_http *h = s->data;
    if (h->closing)
        return;
    if (nread == UV_EOF) {
        http_parser_execute(&h->parser, &hp_settings, NULL, 0);
        if (h->complete)
            http_finish(h);
        else
            http_fail(h, "connection closed by etcd");
        return;
    }
    if (nread < 0) {
        char msg[128];
        snprintf(msg, sizeof msg, "read: %s", uv_strerror((int)nread));
        http_fail(h, msg);
        return;
    }
    h->read_us = wall_us();
    size_t done =
        http_parser_execute(&h->parser, &hp_settings, b->base, (size_t)nread);
    if (h->closing)
        return;
    if (h->parser.http_errno != HPE_OK || done != (size_t)nread) {
        char msg[160];
        snprintf(msg, sizeof msg, "bad HTTP response at byte %zu: %s", done,
                 http_errno_description(HTTP_PARSER_ERRNO(&h->parser)));
        http_fail(h, msg);
        return;
    }
    if (h->complete)
        http_finish(h);
}

static void http_written(uv_write_t *w, int status) {
    gw_http *h = w->data;
    if (status < 0 && !h->closing) {
        char msg[128];
        snprintf(msg, sizeof msg, "write: %s", uv_strerror(status));
        http_fail(h, msg);
    }
}

static void http_connected(uv_connect_t *c, int status) {
    gw_http *h = c->data;
    if (h->closing)
        return;
    if (status < 0) {
        char msg[128];
        snprintf(msg, sizeof msg, "connect: %s", uv_strerror(status));
        http_fail(h, msg);
        return;
    }
    uv_tcp_nodelay(&h->tcp, 1);
    uv_tcp_keepalive(&h->tcp, 1, 10);
    uv_buf_t b = uv_buf_init(h->req, (unsigned)h->req_len);
    h->wr.data = h;
    int rc = uv_write(&h->wr, (uv_stream_t *)&h->tcp, &b, 1, http_written);
    if (!rc)
        rc = uv_read_start((uv_stream_t *)&h->tcp, http_alloc, http_read);
    if (rc) {
        char msg[128];
        snprintf(msg, sizeof msg, "write: %s", uv_strerror(rc));
        http_fail(h, msg);
    }
}

static void http_resolved(uv_getaddrinfo_t *g, int status,
                          struct addrinfo *res) {
    gw_http *h = g->data;
    h->gai_pending = false;
    if (h->closing) {
        uv_freeaddrinfo(res);
        http_maybe_free(h);
        return;
    }
    if (status < 0 || !res) {
        char msg[128];
        snprintf(msg, sizeof msg, "resolve: %s", uv_strerror(status));
        uv_freeaddrinfo(res);
        http_fail(h, msg);
        return;
    }
    int rc = uv_tcp_init(h->e->loop, &h->tcp);
    if (!rc) {
        h->tcp.data = h;
        h->handles++;
        h->conn.data = h;
        rc = uv_tcp_connect(&h->conn, &h->tcp, res->ai_addr, http_connected);
    }
    uv_freeaddrinfo(res);
    if (rc) {
        char msg[128];
        snprintf(msg, sizeof msg, "connect: %s", uv_strerror(rc));
        http_fail(h, msg);
    }
}

static void http_timeout(uv_timer_t *t) {
    gw_http *h = t->data;
    http_fail(h, "timed out");
}

/* POST `path` with a JSON body to the current endpoint. Streaming: the
 * body goes to on_line line by line and only the head is timed. */
static gw_http *http_post(gw_etcd *e, const char *path, const char *json,
                          bool streaming, http_line_fn on_line,
                          http_done_fn on_done) {
    gw_http *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    const endpoint *ep = &e->eps[e->ep_index];
    size_t jlen = strlen(json);
    size_t cap = jlen + strlen(path) + strlen(ep->host) + 256;
    h->req = malloc(cap);
    if (!h->req) {
        free(h);
        return NULL;
    }
    int n = snprintf(h->req, cap,
                     "POST %s HTTP/1.1\r\nHost: %s:%s\r\n"
                     "Content-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     path, ep->host, ep->port, jlen, json);
    h->req_len = (size_t)n;
    h->e = e;
    h->streaming = streaming;
    h->on_line = on_line;
    h->on_done = on_done;
    http_parser_init(&h->parser, HTTP_RESPONSE);
    h->parser.data = h;
    uv_timer_init(e->loop, &h->timer);
    h->timer.data = h;
    h->handles = 1;
    uint32_t tmo = e->opts.request_timeout_ms;
    uv_timer_start(&h->timer, http_timeout, tmo, 0);
    struct addrinfo hints = {0};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    h->gai.data = h;
    h->gai_pending = true;
    int rc = uv_getaddrinfo(e->loop, &h->gai, http_resolved, ep->host, ep->port,
                            &hints);
    if (rc) {
        h->gai_pending = false;
        http_close(h);
        return NULL;
    }
    return h;
}

/* ------------------------------------------------------------------ */
/* Records                                                              */
/* ------------------------------------------------------------------ */

static source_rec *find_source(gw_etcd *e, const char *name) {
    for (size_t i = 0; i < e->src_n; i++)
        if (strcmp(e->src[i].name, name) == 0)
            return &e->src[i];
    return NULL;
}

static source_rec *add_source(gw_etcd *e, const char *name, const char *key) {
    if (e->src_n == e->src_cap) {
        size_t cap = e->src_cap ? e->src_cap * 2 : 8;
        source_rec *v = realloc(e->src, cap * sizeof *v);
        if (!v)
            return NULL;
        e->src = v;
        e->src_cap = cap;
    }
    source_rec *s = &e->src[e->src_n];
    *s = (source_rec){0};
    s->name = xstrdup(name);
    s->key = xstrdup(key);
    if (!s->name || !s->key) {
        free(s->name);
        free(s->key);
        return NULL;
    }
    e->src_n++;
    return s;
}

static service_rec *find_service(gw_etcd *e, const char *name, bool create) {
    for (size_t i = 0; i < e->svc_n; i++)
        if (strcmp(e->svc[i].name, name) == 0)
            return &e->svc[i];
    if (!create)
        return NULL;
    if (e->svc_n == e->svc_cap) {
        size_t cap = e->svc_cap ? e->svc_cap * 2 : 8;
        service_rec *v = realloc(e->svc, cap * sizeof *v);
        if (!v)
            return NULL;
        e->svc = v;
        e->svc_cap = cap;
    }
    service_rec *s = &e->svc[e->svc_n];
    *s = (service_rec){0};
    s->name = xstrdup(name);
    if (!s->name)
        return NULL;
    e->svc_n++;
    return s;
}

/* Index of id in the sorted list, or where it would go (*found false). */
static size_t find_inst(const service_rec *s, const char *id, bool *found) {
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->v[mid].id, id);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

static void inst_clear_value(inst_rec *r) {
    cJSON_Delete(r->json);
    free(r->md);
    r->json = NULL;
    r->md = NULL;
    memset(&r->inst, 0, sizeof r->inst);
}

static void inst_free(inst_rec *r) {
    inst_clear_value(r);
    free(r->id);
    free(r->error);
}

/*
 * Parse one instance object (an entry of the instances file format) into
 * r (replacing its value only on success). The key's id is the instance's
 * id; an "id" member, when present, must equal it.
 */
static int parse_instance(inst_rec *r, const char *json, size_t len, char *err,
                          size_t err_len) {
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
    in.id = r->id;
    if (!cJSON_IsObject(o))
        what = "$: expected an object";
    else if (id && (!cJSON_IsString(id) || strcmp(id->valuestring, r->id)))
        what = "id: must equal the key's instance id";
    else if (!cJSON_IsString(host) || !host->valuestring[0])
        what = "host: expected a non-empty string";
    else if (!cJSON_IsNumber(port) || port->valuedouble < 1 ||
             port->valuedouble > 65535 ||
             port->valuedouble != (double)(int)port->valuedouble)
        what = "port: expected an integer in 1..65535";
    else if (weight && (!cJSON_IsNumber(weight) || weight->valuedouble < 0 ||
                        weight->valuedouble > 4294967295.0))
        what = "weight: expected an integer in 0..4294967295";
    else if (secure && !cJSON_IsBool(secure))
        what = "secure: expected true or false";
    else if (st && !cJSON_IsString(st))
        what = "state: expected \"up\", \"draining\" or \"down\"";
    else if (md && !cJSON_IsObject(md))
        what = "metadata: expected an object of strings";
    if (!what && st) {
        const char *s = st->valuestring;
        if (strcmp(s, "up") == 0)
            in.state = SY_INSTANCE_UP;
        else if (strcmp(s, "draining") == 0)
            in.state = SY_INSTANCE_DRAINING;
        else if (strcmp(s, "down") == 0)
            in.state = SY_INSTANCE_DOWN;
        else
            what = "state: expected \"up\", \"draining\" or \"down\"";
    }
    size_t nmd = md ? (size_t)cJSON_GetArraySize(md) : 0;
    sy_kv *kvs = NULL;
    if (!what && nmd) {
        kvs = calloc(nmd, sizeof *kvs);
        if (!kvs)
            what = "out of memory";
        size_t k = 0;
        const cJSON *kv;
        cJSON_ArrayForEach(kv, md) {
            if (what)
                break;
            if (!cJSON_IsString(kv)) {
                snprintf(err, err_len, "metadata.%s: expected a string",
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
    in.host = host->valuestring;
    in.port = (uint16_t)port->valuedouble;
    in.weight = weight ? (uint32_t)weight->valuedouble : 1;
    in.secure = secure && cJSON_IsTrue(secure);
    in.metadata = kvs;
    in.metadata_count = nmd;
    inst_clear_value(r);
    r->json = o;
    r->md = kvs;
    r->inst = in;
    return 0;
}

static void format_error(char *out, size_t cap, const sy_error *err) {
    if (err->path[0])
        snprintf(out, cap, "%s: %s", err->path, err->message);
    else if (err->line)
        snprintf(out, cap, "line %u, column %u: %s", err->line, err->column,
                 err->message);
    else
        snprintf(out, cap, "%s", err->message);
}

/* ------------------------------------------------------------------ */
/* Applying changes                                                     */
/* ------------------------------------------------------------------ */

static void change_free(change *c) {
    free(c->name);
    free(c->id);
    free(c->key);
    if (!c->borrowed)
        free(c->value);
}

static void changes_clear(change_list *l) {
    for (size_t i = 0; i < l->n; i++)
        change_free(&l->v[i]);
    free(l->v);
    *l = (change_list){0};
}

/*
 * Classify a key: PREFIX routes/<source> or PREFIX instances/<service>/<id>.
 * Fills name/id (malloc'd) and returns true; false for other keys.
 */
static bool classify_key(gw_etcd *e, const char *key, size_t klen, change *c) {
    if (klen <= e->prefix_len || memcmp(key, e->prefix, e->prefix_len))
        return false;
    const char *rest = key + e->prefix_len;
    size_t rlen = klen - e->prefix_len;
    if (memchr(rest, '\0', rlen))
        return false;
    if (rlen > 7 && memcmp(rest, "routes/", 7) == 0) {
        const char *name = rest + 7;
        size_t nlen = rlen - 7;
        if (nlen > 127 || memchr(name, '/', nlen))
            return false;
        c->is_route = true;
        c->name = xstrndup(name, nlen);
        return c->name != NULL;
    }
    if (rlen > 10 && memcmp(rest, "instances/", 10) == 0) {
        const char *svc = rest + 10;
        const char *slash = memchr(svc, '/', rlen - 10);
        if (!slash || slash == svc || slash + 1 == rest + rlen)
            return false;
        c->is_route = false;
        c->name = xstrndup(svc, (size_t)(slash - svc));
        c->id = xstrndup(slash + 1, (size_t)(rest + rlen - slash - 1));
        return c->name && c->id;
    }
    return false;
}

/* A kv as etcd's JSON gives it: key and value in base64. */
typedef struct kv_view {
    const char *key;
    size_t key_len;
    char *value; /* NULL: absent (the gateway omits an empty value) */
    size_t value_len;
    int64_t mod_revision, create_revision;
} kv_view;

/* A kv (or delete) into a change; false to ignore it. `in_place`: the
 * value is decoded where it lies and the change borrows it (it must
 * outlive the change), else the change gets a decoded copy. */
static bool change_from_view(gw_etcd *e, kv_view *v, bool del, bool in_place,
                             change *c) {
    static char empty[1];
    *c = (change){0};
    size_t klen;
    char *key = b64_decode_n(v->key, v->key_len, &klen);
    if (!key)
        return false;
    if (!classify_key(e, key, klen, c)) {
        free(key);
        change_free(c);
        return false;
    }
    c->key = key;
    c->del = del;
    c->mod_revision = v->mod_revision;
    c->create_revision = v->create_revision;
    if (del)
        return true;
    if (!v->value) {
        c->value = in_place ? empty : xstrdup("");
        c->borrowed = in_place;
    } else if (in_place) {
        long got = b64_decode_inplace(v->value, v->value_len);
        if (got >= 0) {
            c->value = v->value;
            c->len = (size_t)got;
            c->borrowed = true;
        }
    } else {
        c->value = b64_decode_n(v->value, v->value_len, &c->len);
    }
    if (!c->value) {
        change_free(c);
        return false;
    }
    return true;
}

/* A kv of a range answer (cJSON) into a change that owns its value. */
static bool change_from_kv(gw_etcd *e, const cJSON *kv, bool del, change *c) {
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(kv, "key");
    const cJSON *val = cJSON_GetObjectItemCaseSensitive(kv, "value");
    if (!cJSON_IsString(k))
        return false;
    kv_view v = {k->valuestring,
                 strlen(k->valuestring),
                 cJSON_IsString(val) ? val->valuestring : NULL,
                 cJSON_IsString(val) ? strlen(val->valuestring) : 0,
                 json_i64(kv, "mod_revision"),
                 json_i64(kv, "create_revision")};
    return change_from_view(e, &v, del, false, c);
}

static bool changes_push(change_list *l, change *c) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        change *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *c;
    return true;
}

/* Apply one instance change to the records (under mu). */
static void stage_instance(gw_etcd *e, change *c) {
    service_rec *s = find_service(e, c->name, !c->del);
    if (!s)
        return;
    bool found;
    size_t i = find_inst(s, c->id, &found);
    if (c->del) {
        if (!found)
            return;
        inst_free(&s->v[i]);
        memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof *s->v);
        s->n--;
        s->touched = true;
        return;
    }
    if (!found) {
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 8;
            inst_rec *v = realloc(s->v, cap * sizeof *v);
            if (!v)
                return;
            s->v = v;
            s->cap = cap;
        }
        memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof *s->v);
        s->v[i] = (inst_rec){0};
        s->v[i].id = xstrdup(c->id);
        s->n++;
    }
    inst_rec *r = &s->v[i];
    r->mod_revision = c->mod_revision;
    char err[512];
    if (parse_instance(r, c->value, c->len, err, sizeof err)) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s: %s", c->key, err);
        set_str(&r->error, msg);
        e->rejected++;
        etcd_log(e, GW_ETCD_LOG_WARN, "instance rejected: %s", msg);
        /* the previous value, if any, keeps serving */
    } else {
        set_str(&r->error, NULL);
    }
    s->touched = true;
}

/* The router's index of a source (registration order), cached. */
static size_t lib_source_index(gw_etcd *e, source_rec *s) {
    size_t n = sy_router_source_count(e->router);
    if (s->lib_index < n)
        return s->lib_index;
    for (size_t i = 0; i < n; i++) {
        sy_source_status st;
        if (sy_router_source_status(e->router, i, &st, NULL) == 0 &&
            strcmp(st.name, s->name) == 0)
            return s->lib_index = i;
    }
    return SIZE_MAX;
}

/* The source's record, registering it with the router on first sight. */
static source_rec *source_for(gw_etcd *e, change *c) {
    source_rec *s = find_source(e, c->name);
    if (s)
        return s;
    sy_error err;
    int rc = sy_router_add_source(e->router, c->name, &err);
    if (rc && rc != SY_EEXIST) {
        etcd_log(e, GW_ETCD_LOG_ERROR, "source %s: %s", c->name, err.message);
        return NULL;
    }
    s = add_source(e, c->name, c->key);
    if (s)
        s->lib_index = SIZE_MAX;
    return s;
}

/* One staged change of a commit: a route document or a service's list. */
typedef struct staged {
    change *c;        /* route change, or NULL */
    service_rec *svc; /* instance list, or NULL */
    bool dropped;     /* rejected by an earlier commit attempt */
    char *error;      /* why, when dropped */
} staged;

/* The error of a failed commit without its "change N (kind 'name'): ". */
static void commit_error(char *out, size_t cap, sy_error *err) {
    const char *m = err->message;
    if (strncmp(m, "change ", 7) == 0) {
        const char *p = strstr(m, "): ");
        if (p)
            m = p + 3;
    }
    char msg[sizeof err->message];
    snprintf(msg, sizeof msg, "%s", m);
    memcpy(err->message, msg, sizeof msg);
    format_error(out, cap, err);
}

/* Stage every change not dropped yet; instance lists first. */
static int stage_all(gw_etcd *e, sy_change_set *cs, staged *st, size_t n,
                     size_t *map, size_t *count) {
    sy_error err;
    *count = 0;
    for (size_t i = 0; i < n; i++) {
        if (st[i].dropped)
            continue;
        int rc;
        if (st[i].svc) {
            service_rec *s = st[i].svc;
            sy_instance *list = calloc(s->n + 1, sizeof *list);
            if (!list)
                return SY_ENOMEM;
            size_t k = 0;
            for (size_t j = 0; j < s->n; j++)
                if (s->v[j].json)
                    list[k++] = s->v[j].inst;
            rc = sy_change_set_set_instances(cs, s->name, list, k, &err);
            free(list);
        } else {
            change *c = st[i].c;
            /* A deleted key empties its source. */
            rc = sy_change_set_apply(cs, c->name, c->del ? "[]" : c->value,
                                     c->del ? 2 : c->len, &err);
        }
        if (rc) {
            etcd_log(e, GW_ETCD_LOG_ERROR, "staging: %s", err.message);
            return rc;
        }
        map[(*count)++] = i;
    }
    return 0;
}

/*
 * Apply a list of changes as ONE commit (sy_router_commit: one publish)
 * and record `revision` as what the router reflects (a watch only moves
 * it forward). Instance lists are staged first, so a new route never
 * points at a service whose instances are not there yet. A change the
 * router rejects (a broken document) is dropped with its error and the
 * rest committed again: the other sources keep going.
 */
static bool apply_changes(gw_etcd *e, change_list *l, int64_t revision,
                          bool full_read) {
    uint64_t t0 = uv_hrtime(), c0 = cpu_us();
    uv_mutex_lock(&e->mu);
    for (size_t i = 0; i < l->n; i++)
        if (!l->v[i].is_route)
            stage_instance(e, &l->v[i]);
    size_t n = 0;
    staged *st = calloc(l->n + e->svc_n + 1, sizeof *st);
    size_t *map = calloc(l->n + e->svc_n + 1, sizeof *map);
    for (size_t i = 0; st && map && i < e->svc_n; i++)
        if (e->svc[i].touched) {
            e->svc[i].touched = false;
            st[n++] = (staged){.svc = &e->svc[i]};
        }
    for (size_t i = 0; st && map && i < l->n; i++) {
        change *c = &l->v[i];
        if (!c->is_route)
            continue;
        source_rec *s = c->del ? find_source(e, c->name) : source_for(e, c);
        if (!s)
            continue;
        s->mod_revision = c->mod_revision;
        s->present = !c->del;
        if (!c->del)
            s->create_revision = c->create_revision;
        st[n++] = (staged){.c = c};
    }
    bool committed = false, failed_all = !st || !map;
    while (st && map && !committed) {
        sy_change_set *cs = NULL;
        sy_report *rep = NULL;
        sy_error err;
        size_t count = 0;
        if (sy_change_set_new(e->router, &cs, &err) ||
            stage_all(e, cs, st, n, map, &count)) {
            sy_change_set_free(cs);
            break;
        }
        int rc = count ? sy_router_commit(e->router, cs, &rep, &err) : 0;
        sy_change_set_free(cs);
        if (!rc) {
            committed = true;
            sy_report_free(rep);
            break;
        }
        long f = rep ? sy_report_failed_change(rep) : -1;
        sy_report_free(rep);
        char msg[1024];
        commit_error(msg, sizeof msg, &err);
        if (f < 0 || (size_t)f >= count) {
            etcd_log(e, GW_ETCD_LOG_ERROR, "commit failed: %s", msg);
            failed_all = true;
            break;
        }
        staged *bad = &st[map[f]];
        bad->dropped = true;
        bad->error = xstrdup(msg);
        e->rejected++;
        if (bad->c)
            etcd_log(e, GW_ETCD_LOG_WARN,
                     "%s rejected (mod_revision %" PRId64 "): %s", bad->c->key,
                     bad->c->mod_revision, msg);
        else
            etcd_log(e, GW_ETCD_LOG_WARN, "instances of %s rejected: %s",
                     bad->svc->name, msg);
    }
    /* Per-source outcome, in staging order: the last attempt wins. */
    for (size_t i = 0; i < n; i++) {
        if (st[i].svc) {
            set_str(&st[i].svc->error, st[i].dropped ? st[i].error : NULL);
            continue;
        }
        source_rec *s = find_source(e, st[i].c->name);
        if (!s)
            continue;
        if (st[i].dropped || !committed) {
            set_str(&s->error, st[i].error ? st[i].error : "commit failed");
            continue;
        }
        set_str(&s->error, NULL);
        /* version and checksum are read from the router when asked
         * (refresh_source_locked): its source status walks the source's
         * routes, which need not delay the next change */
        s->stale = true;
    }
    for (size_t i = 0; st && i < n; i++)
        free(st[i].error);
    free(st);
    free(map);
    if (failed_all) {
        /* Nothing was published (out of memory, most likely) but the
         * records moved on: the revision stays, and the caller reads
         * everything again, applying every key. */
        e->force_full = true;
        uv_mutex_unlock(&e->mu);
        return false;
    }
    e->events += l->n;
    /* A full read is the truth, even when etcd went back (lost data). */
    if (full_read || revision > e->revision)
        e->revision = revision;
    /* the fingerprint is read when asked (live_fingerprint_locked): a
     * walk of every route, which need not delay the next change */
    sy_snapshot *snap = sy_router_acquire(e->router);
    uint64_t gen = sy_snapshot_generation(snap);
    sy_snapshot_release(snap);
    e->commits++;
    e->last_commit_us = (uv_hrtime() - t0) / 1000;
    e->commit_us_total += e->last_commit_us;
    uint64_t cpu = cpu_us() - c0;
    e->commit_cpu_us_total += cpu;
    int64_t rev = e->revision;
    if (full_read)
        e->trace = (gw_etcd_trace){0};
    e->trace.revision = rev;
    e->trace.committed_us = wall_us();
    e->trace.commit_cpu_us = cpu;
    e->last_trace = e->trace;
    uv_mutex_unlock(&e->mu);
    if (e->opts.on_commit)
        e->opts.on_commit(e->opts.data, rev, gen);
    return true;
}

/* A source's applied/version/checksum from the router, if it committed
 * since they were read (under mu). */
static void refresh_source_locked(gw_etcd *e, source_rec *s) {
    if (!s->stale)
        return;
    sy_source_status ss;
    size_t k = lib_source_index(e, s);
    if (k != SIZE_MAX &&
        sy_router_source_status(e->router, k, &ss, NULL) == 0) {
        s->applied = ss.applied && s->present;
        s->has_version = ss.applied && ss.version[0];
        snprintf(s->version, sizeof s->version, "%s", ss.version);
        s->checksum = ss.checksum;
    }
    s->stale = false;
}

/* The fingerprint of the router's live snapshot (under mu, so that it goes
 * with `revision`: the module commits under mu too). The library keeps it
 * per snapshot once computed; the first reader pays a walk of the routes. */
static uint64_t live_fingerprint_locked(gw_etcd *e) {
    uint64_t t = uv_hrtime();
    sy_snapshot *snap = sy_router_acquire(e->router);
    uint64_t fp = sy_snapshot_fingerprint(snap);
    sy_snapshot_release(snap);
    e->fingerprint_us_total += (uv_hrtime() - t) / 1000;
    return fp;
}

/* ------------------------------------------------------------------ */
/* The protocol: full read, watch, backoff                              */
/* ------------------------------------------------------------------ */

static void start_full_read(gw_etcd *e);
static void start_watch(gw_etcd *e);

static void set_state(gw_etcd *e, state st, const char *err) {
    uv_mutex_lock(&e->mu);
    e->st = st;
    if (st == ST_BACKOFF)
        e->connected = false;
    if (err)
        set_str(&e->last_error, err);
    uv_mutex_unlock(&e->mu);
}

static void drop_http(gw_etcd *e) {
    http_close(e->http);
    e->http = NULL;
}

static void on_retry(uv_timer_t *t) {
    gw_etcd *e = t->data;
    if (e->stopping)
        return;
    uv_mutex_lock(&e->mu);
    e->reconnects++;
    bool synced = e->revision > 0;
    uv_mutex_unlock(&e->mu);
    if (synced && !e->need_full_read)
        start_watch(e);
    else
        start_full_read(e);
}

/* Something failed: keep serving, try again after the backoff (the next
 * endpoint of the list, if any). */
static void fail(gw_etcd *e, const char *what, const char *err) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s: %s", what, err);
    drop_http(e);
    changes_clear(&e->pending);
    if (e->stopping)
        return;
    uint32_t wait = e->backoff_ms;
    /* up to a quarter of jitter, so a fleet does not reconnect in step */
    e->rng ^= e->rng << 13;
    e->rng ^= e->rng >> 7;
    e->rng ^= e->rng << 17;
    wait += (uint32_t)(e->rng % (wait / 4 + 1));
    etcd_log(e, GW_ETCD_LOG_WARN, "%s (%s); retrying in %u ms", msg,
             e->eps[e->ep_index].host, wait);
    set_state(e, ST_BACKOFF, msg);
    e->ep_index = (e->ep_index + 1) % e->ep_count;
    e->backoff_ms = e->backoff_ms * 2 > e->opts.backoff_max_ms
                        ? e->opts.backoff_max_ms
                        : e->backoff_ms * 2;
    uv_timer_start(&e->retry_timer, on_retry, wait, 0);
}

/* The error of a non-200 answer: etcd's "message", else the status. */
static void answer_error(int status, const char *body, size_t n, char *out,
                         size_t cap, int *code) {
    *code = -1;
    cJSON *o = body ? cJSON_ParseWithLength(body, n) : NULL;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "message");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "code");
    if (cJSON_IsNumber(c))
        *code = (int)c->valuedouble;
    if (cJSON_IsString(m))
        snprintf(out, cap, "HTTP %d: %s", status, m->valuestring);
    else
        snprintf(out, cap, "HTTP %d", status);
    cJSON_Delete(o);
}

/* Full read done: diff what etcd holds at read_revision against what is
 * applied (by mod_revision), apply the difference, then watch. */
static void finish_full_read(gw_etcd *e) {
    change_list diff = {0};
    change_list *got = &e->pending;
    /* Register new sources in creation order, as watching gateways saw
     * them: registration order breaks rank ties between sources. */
    for (size_t i = 1; i < got->n; i++) {
        change c = got->v[i];
        size_t j = i;
        while (j > 0 && got->v[j - 1].create_revision > c.create_revision) {
            got->v[j] = got->v[j - 1];
            j--;
        }
        got->v[j] = c;
    }
    uv_mutex_lock(&e->mu);
    for (size_t i = 0; i < got->n; i++) {
        change *c = &got->v[i];
        bool same = false; /* already applied at this mod revision */
        if (e->force_full) {
            /* a failed commit left the records ahead of the router */
        } else if (c->is_route) {
            source_rec *s = find_source(e, c->name);
            same = s && s->present && s->mod_revision == c->mod_revision;
        } else {
            service_rec *s = find_service(e, c->name, false);
            bool found = false;
            size_t k = s ? find_inst(s, c->id, &found) : 0;
            same = found && s->v[k].mod_revision == c->mod_revision;
        }
        if (!same) {
            changes_push(&diff, c);
            *c = (change){0};
        }
    }
    /* Keys that are gone. */
    for (size_t i = 0; i < e->src_n; i++) {
        source_rec *s = &e->src[i];
        if (!s->present)
            continue;
        bool seen = false;
        for (size_t k = 0; k < got->n && !seen; k++)
            seen = got->v[k].is_route && got->v[k].key &&
                   strcmp(got->v[k].key, s->key) == 0;
        for (size_t k = 0; k < diff.n && !seen; k++)
            seen = diff.v[k].is_route && strcmp(diff.v[k].key, s->key) == 0;
        if (!seen) {
            change c = {.is_route = true,
                        .del = true,
                        .name = xstrdup(s->name),
                        .key = xstrdup(s->key),
                        .mod_revision = e->read_revision};
            changes_push(&diff, &c);
        }
    }
    for (size_t i = 0; i < e->svc_n; i++) {
        service_rec *s = &e->svc[i];
        for (size_t j = 0; j < s->n; j++) {
            bool seen = false;
            for (size_t k = 0; k < got->n + diff.n && !seen; k++) {
                change *c = k < got->n ? &got->v[k] : &diff.v[k - got->n];
                seen = !c->is_route && c->name && c->id &&
                       strcmp(c->name, s->name) == 0 &&
                       strcmp(c->id, s->v[j].id) == 0;
            }
            if (!seen) {
                change c = {.is_route = false,
                            .del = true,
                            .name = xstrdup(s->name),
                            .id = xstrdup(s->v[j].id),
                            .mod_revision = e->read_revision};
                changes_push(&diff, &c);
            }
        }
    }
    e->full_reads++;
    uv_mutex_unlock(&e->mu);
    changes_clear(got);
    etcd_log(e, GW_ETCD_LOG_INFO,
             "full read at revision %" PRId64 ": %zu change(s)",
             e->read_revision, diff.n);
    e->force_full = false;
    bool ok = apply_changes(e, &diff, e->read_revision, true);
    changes_clear(&diff);
    if (!ok) {
        e->need_full_read = true;
        fail(e, "commit", "the router refused the changes");
        return;
    }
    e->need_full_read = false;
    start_watch(e);
}

static void range_page(gw_etcd *e, const char *from_b64);

static void on_range(gw_etcd *e, int status, const char *body, size_t n,
                     const char *err) {
    drop_http(e);
    if (err) {
        fail(e, "range", err);
        return;
    }
    if (status != 200) {
        char msg[512];
        int code;
        answer_error(status, body, n, msg, sizeof msg, &code);
        if (code == 11) { /* compacted between pages: read again */
            changes_clear(&e->pending);
            start_full_read(e);
            return;
        }
        fail(e, "range", msg);
        return;
    }
    cJSON *o = cJSON_ParseWithLength(body, n);
    const cJSON *hdr = cJSON_GetObjectItemCaseSensitive(o, "header");
    if (!cJSON_IsObject(hdr)) {
        cJSON_Delete(o);
        fail(e, "range", "answer without a header");
        return;
    }
    if (!e->read_revision) {
        e->read_revision = json_i64(hdr, "revision");
        const cJSON *cid = cJSON_GetObjectItemCaseSensitive(hdr, "cluster_id");
        snprintf(e->cluster_id, sizeof e->cluster_id, "%s",
                 cJSON_IsString(cid) ? cid->valuestring : "");
    }
    const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(o, "kvs");
    const cJSON *kv;
    const char *last = NULL;
    cJSON_ArrayForEach(kv, kvs) {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(kv, "key");
        if (cJSON_IsString(k))
            last = k->valuestring;
        change c;
        if (change_from_kv(e, kv, false, &c) && !changes_push(&e->pending, &c))
            change_free(&c);
    }
    bool more = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "more"));
    if (more && last) {
        /* the next page starts just after the last key: key + "\0" */
        size_t klen;
        char *key = b64_decode(last, &klen);
        char *next = NULL;
        if (key) {
            char *k2 = malloc(klen + 1);
            if (k2) {
                memcpy(k2, key, klen);
                k2[klen] = '\0';
                next = b64_encode(k2, klen + 1);
                free(k2);
            }
            free(key);
        }
        cJSON_Delete(o);
        if (!next) {
            fail(e, "range", "bad key in answer");
            return;
        }
        range_page(e, next);
        free(next);
        return;
    }
    cJSON_Delete(o);
    finish_full_read(e);
}

static void range_page(gw_etcd *e, const char *from_b64) {
    char *body = malloc(strlen(from_b64) + strlen(e->end_b64) + 160);
    if (!body) {
        fail(e, "range", "out of memory");
        return;
    }
    if (e->read_revision)
        sprintf(body,
                "{\"key\":\"%s\",\"range_end\":\"%s\",\"limit\":\"%d\","
                "\"revision\":\"%" PRId64 "\"}",
                from_b64, e->end_b64, RANGE_PAGE, e->read_revision);
    else
        sprintf(body, "{\"key\":\"%s\",\"range_end\":\"%s\",\"limit\":\"%d\"}",
                from_b64, e->end_b64, RANGE_PAGE);
    e->http = http_post(e, "/v3/kv/range", body, false, NULL, on_range);
    free(body);
    if (!e->http)
        fail(e, "range", "cannot start a request");
}

static void start_full_read(gw_etcd *e) {
    drop_http(e);
    changes_clear(&e->pending);
    e->read_revision = 0;
    set_state(e, ST_READING, NULL);
    range_page(e, e->key_b64);
}

/* One line of the watch stream: a JSON object {"result": {...}}, parsed
 * in place (jparse); the values of its events are decoded where they lie
 * and applied from there, without a copy. */
static void on_watch_line(gw_etcd *e, char *line, size_t n) {
    uint64_t t0 = uv_hrtime(), c0 = cpu_us();
    jdoc d;
    bool parsed = jparse(&d, line, n);
    long res = parsed ? jget(&d, 0, "result") : -1;
    if (!jis(&d, res, JT_OBJ)) {
        long m = parsed ? jget(&d, jget(&d, 0, "error"), "message") : -1;
        char msg[512];
        jcopy(&d, m, msg, sizeof msg);
        jfree(&d);
        fail(e, "watch",
             msg[0]   ? msg
             : parsed ? "unexpected message"
                      : "malformed watch response");
        return;
    }
    long hdr = jget(&d, res, "header");
    uv_mutex_lock(&e->mu);
    int64_t applied = e->revision;
    uv_mutex_unlock(&e->mu);
    if (jeq(&d, jget(&d, res, "canceled"), "true")) {
        int64_t compact = jint(&d, jget(&d, res, "compact_revision"));
        jfree(&d);
        if (compact) {
            etcd_log(e, GW_ETCD_LOG_WARN,
                     "revision %" PRId64
                     " was compacted (compact revision %" PRId64 "): full read",
                     applied + 1, compact);
            drop_http(e);
            start_full_read(e);
        } else {
            fail(e, "watch", "canceled by etcd");
        }
        return;
    }
    if (jeq(&d, jget(&d, res, "created"), "true")) {
        char cid[32];
        jcopy(&d, jget(&d, hdr, "cluster_id"), cid, sizeof cid);
        int64_t now = jint(&d, jget(&d, hdr, "revision"));
        bool other_cluster =
            cid[0] && e->cluster_id[0] && strcmp(cid, e->cluster_id) != 0;
        jfree(&d);
        if (now < applied || other_cluster) {
            /* etcd lost data or is another cluster: what it holds now is
             * the truth. */
            etcd_log(e, GW_ETCD_LOG_WARN,
                     "etcd is at revision %" PRId64 " < %" PRId64
                     " or another cluster: full read",
                     now, applied);
            drop_http(e);
            start_full_read(e);
            return;
        }
        uv_mutex_lock(&e->mu);
        e->st = ST_WATCHING;
        e->connected = true;
        uv_mutex_unlock(&e->mu);
        e->backoff_ms = e->opts.backoff_min_ms;
        return;
    }
    long events = jget(&d, res, "events");
    change_list l = {0};
    int64_t top = applied;
    for (uint32_t ev = jis(&d, events, JT_ARR) ? (uint32_t)events + 1 : 0;
         jis(&d, events, JT_ARR) && ev < d.t[events].next; ev = d.t[ev].next) {
        bool del = jeq(&d, jget(&d, ev, "type"), "DELETE");
        long kv = jget(&d, ev, "kv");
        int64_t rev = jint(&d, jget(&d, kv, "mod_revision"));
        if (rev <= applied)
            continue; /* already applied: never twice */
        if (rev > top)
            top = rev;
        long k = jget(&d, kv, "key"), v = jget(&d, kv, "value");
        if (!jis(&d, k, JT_STR))
            continue;
        kv_view view = {d.s + d.t[k].start,
                        junescape(&d, k),
                        NULL,
                        0,
                        rev,
                        jint(&d, jget(&d, kv, "create_revision"))};
        if (jis(&d, v, JT_STR)) {
            view.value_len = junescape(&d, v);
            view.value = d.s + d.t[v].start;
        }
        change c;
        if (change_from_view(e, &view, del, true, &c) && !changes_push(&l, &c))
            change_free(&c);
    }
    jfree(&d);
    uv_mutex_lock(&e->mu);
    e->last_decode_us = (uv_hrtime() - t0) / 1000;
    e->decode_us_total += e->last_decode_us;
    e->trace = (gw_etcd_trace){.first_byte_us = e->http ? e->http->line_us : 0,
                               .last_byte_us = e->http ? e->http->read_us : 0,
                               .decoded_us = wall_us(),
                               .line_bytes = n,
                               .reads = e->http ? e->http->line_reads : 0,
                               .decode_cpu_us = cpu_us() - c0};
    uv_mutex_unlock(&e->mu);
    /* the changes borrow their values from `line`, alive until we return */
    bool ok = top <= applied || apply_changes(e, &l, top, false);
    changes_clear(&l);
    if (!ok) {
        e->need_full_read = true;
        fail(e, "commit", "the router refused the changes");
    }
}

static void on_watch_done(gw_etcd *e, int status, const char *body, size_t n,
                          const char *err) {
    char msg[512];
    if (!err) {
        int code;
        answer_error(status, body, n, msg, sizeof msg, &code);
        err = msg;
    }
    fail(e, "watch", err);
}

static void start_watch(gw_etcd *e) {
    drop_http(e);
    uv_mutex_lock(&e->mu);
    int64_t from = e->revision + 1;
    uv_mutex_unlock(&e->mu);
    char *body = malloc(strlen(e->key_b64) + strlen(e->end_b64) + 160);
    if (!body) {
        fail(e, "watch", "out of memory");
        return;
    }
    sprintf(body,
            "{\"create_request\":{\"key\":\"%s\",\"range_end\":\"%s\","
            "\"start_revision\":\"%" PRId64 "\"}}",
            e->key_b64, e->end_b64, from);
    set_state(e, ST_CONNECTING, NULL);
    e->http =
        http_post(e, "/v3/watch", body, true, on_watch_line, on_watch_done);
    free(body);
    if (!e->http)
        fail(e, "watch", "cannot start a request");
}

/* ------------------------------------------------------------------ */
/* Public calls                                                         */
/* ------------------------------------------------------------------ */

static int parse_endpoints(gw_etcd *e, const char *url, char *err,
                           size_t err_len) {
    size_t count = 1;
    for (const char *p = url; *p; p++)
        count += *p == ',';
    e->eps = calloc(count, sizeof *e->eps);
    if (!e->eps) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    const char *p = url;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        struct http_parser_url u;
        http_parser_url_init(&u);
        if (len == 0 || http_parser_parse_url(p, len, 0, &u) ||
            !(u.field_set & (1 << UF_SCHEMA)) ||
            !(u.field_set & (1 << UF_HOST)) ||
            u.field_data[UF_SCHEMA].len != 4 ||
            memcmp(p + u.field_data[UF_SCHEMA].off, "http", 4) ||
            u.field_data[UF_HOST].len >= sizeof e->eps[0].host) {
            snprintf(err, err_len,
                     "--etcd: \"%.*s\" (offset %zu) is not an "
                     "http://host:port URL",
                     (int)len, p, (size_t)(p - url));
            return -1;
        }
        endpoint *ep = &e->eps[e->ep_count++];
        memcpy(ep->host, p + u.field_data[UF_HOST].off,
               u.field_data[UF_HOST].len);
        ep->host[u.field_data[UF_HOST].len] = '\0';
        snprintf(ep->port, sizeof ep->port, "%u",
                 (u.field_set & (1 << UF_PORT)) ? u.port : 2379u);
        p += len;
        if (*p == ',')
            p++;
    }
    if (!e->ep_count) {
        snprintf(err, err_len, "--etcd: no URL given");
        return -1;
    }
    return 0;
}

static void free_records(gw_etcd *e) {
    for (size_t i = 0; i < e->src_n; i++) {
        free(e->src[i].name);
        free(e->src[i].key);
        free(e->src[i].error);
    }
    free(e->src);
    for (size_t i = 0; i < e->svc_n; i++) {
        for (size_t j = 0; j < e->svc[i].n; j++)
            inst_free(&e->svc[i].v[j]);
        free(e->svc[i].v);
        free(e->svc[i].name);
        free(e->svc[i].error);
    }
    free(e->svc);
}

static void etcd_free(gw_etcd *e) {
    free_records(e);
    changes_clear(&e->pending);
    free(e->url);
    free(e->prefix);
    free(e->key_b64);
    free(e->end_b64);
    free(e->eps);
    free(e->last_error);
    uv_mutex_destroy(&e->mu);
    free(e);
}

int gw_etcd_start_opts(uv_loop_t *loop, sy_router *router,
                       const gw_etcd_options *opts, gw_etcd **out, char *err,
                       size_t err_len) {
    *out = NULL;
    if (!loop || !router || !opts || !opts->url) {
        snprintf(err, err_len, "etcd: loop, router and URL are required");
        return -1;
    }
    gw_etcd *e = calloc(1, sizeof *e);
    if (!e || uv_mutex_init(&e->mu)) {
        free(e);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    e->loop = loop;
    e->router = router;
    e->opts = *opts;
    if (!e->opts.backoff_min_ms)
        e->opts.backoff_min_ms = 100;
    if (!e->opts.backoff_max_ms)
        e->opts.backoff_max_ms = 5000;
    if (e->opts.backoff_max_ms < e->opts.backoff_min_ms)
        e->opts.backoff_max_ms = e->opts.backoff_min_ms;
    if (!e->opts.request_timeout_ms)
        e->opts.request_timeout_ms = 10000;
    e->backoff_ms = e->opts.backoff_min_ms;
    e->rng = uv_hrtime() ^ (uint64_t)(uintptr_t)e ^ 0x9e3779b97f4a7c15ull;
    const char *prefix = opts->prefix ? opts->prefix : DEFAULT_PREFIX;
    e->url = xstrdup(opts->url);
    e->prefix = xstrdup(prefix);
    e->prefix_len = strlen(prefix);
    e->opts.url = e->url;
    e->opts.prefix = e->prefix;
    if (!e->url || !e->prefix) {
        snprintf(err, err_len, "out of memory");
        etcd_free(e);
        return -1;
    }
    if (!e->prefix_len || (unsigned char)prefix[e->prefix_len - 1] == 0xff) {
        snprintf(err, err_len,
                 "--etcd-prefix: \"%s\" must be non-empty and not end in "
                 "byte 0xff",
                 prefix);
        etcd_free(e);
        return -1;
    }
    if (parse_endpoints(e, opts->url, err, err_len)) {
        etcd_free(e);
        return -1;
    }
    /* The range of the prefix: [prefix, prefix with its last byte + 1). */
    char *end = xstrdup(prefix);
    if (end)
        end[e->prefix_len - 1]++;
    e->key_b64 = b64_encode(prefix, e->prefix_len);
    e->end_b64 = end ? b64_encode(end, e->prefix_len) : NULL;
    free(end);
    if (!e->key_b64 || !e->end_b64) {
        snprintf(err, err_len, "out of memory");
        etcd_free(e);
        return -1;
    }
    uv_timer_init(loop, &e->retry_timer);
    e->retry_timer.data = e;
    *out = e;
    start_full_read(e);
    return 0;
}

int gw_etcd_start(uv_loop_t *loop, sy_router *router, const char *url,
                  const char *prefix, gw_etcd **out, char *err,
                  size_t err_len) {
    gw_etcd_options o = {0};
    o.url = url;
    o.prefix = prefix;
    return gw_etcd_start_opts(loop, router, &o, out, err, err_len);
}

static void retry_timer_closed(uv_handle_t *h) {
    etcd_free(h->data);
}

void gw_etcd_stop(gw_etcd *e) {
    if (!e || e->stopping)
        return;
    e->stopping = true;
    drop_http(e);
    set_state(e, ST_STOPPED, NULL);
    uv_timer_stop(&e->retry_timer);
    uv_close((uv_handle_t *)&e->retry_timer, retry_timer_closed);
}

void gw_etcd_last_trace(gw_etcd *e, gw_etcd_trace *out) {
    uv_mutex_lock(&e->mu);
    *out = e->last_trace;
    uv_mutex_unlock(&e->mu);
}

int64_t gw_etcd_revision(gw_etcd *e) {
    uv_mutex_lock(&e->mu);
    int64_t r = e->revision;
    uv_mutex_unlock(&e->mu);
    return r;
}

static cJSON *str_or_null(const char *s) {
    return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

cJSON *gw_etcd_status(gw_etcd *e) {
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    char hex[24];
    uv_mutex_lock(&e->mu);
    cJSON_AddStringToObject(o, "url", e->url);
    cJSON_AddStringToObject(o, "prefix", e->prefix);
    cJSON_AddStringToObject(o, "state", state_names[e->st]);
    cJSON_AddBoolToObject(o, "connected", e->connected);
    cJSON_AddNumberToObject(o, "revision", (double)e->revision);
    snprintf(hex, sizeof hex, "%016" PRIx64, live_fingerprint_locked(e));
    cJSON_AddStringToObject(o, "fingerprint", hex);
    cJSON_AddItemToObject(o, "last_error", str_or_null(e->last_error));
    cJSON_AddNumberToObject(o, "reconnects", (double)e->reconnects);
    cJSON_AddNumberToObject(o, "full_reads", (double)e->full_reads);
    cJSON_AddNumberToObject(o, "commits", (double)e->commits);
    cJSON_AddNumberToObject(o, "events", (double)e->events);
    cJSON_AddNumberToObject(o, "rejected", (double)e->rejected);
    cJSON_AddNumberToObject(o, "last_commit_us", (double)e->last_commit_us);
    cJSON_AddNumberToObject(o, "commit_us_total", (double)e->commit_us_total);
    cJSON_AddNumberToObject(o, "commit_cpu_us_total",
                            (double)e->commit_cpu_us_total);
    cJSON_AddNumberToObject(o, "fingerprint_us_total",
                            (double)e->fingerprint_us_total);
    cJSON_AddNumberToObject(o, "last_decode_us", (double)e->last_decode_us);
    cJSON_AddNumberToObject(o, "decode_us_total", (double)e->decode_us_total);
    cJSON *srcs = cJSON_AddArrayToObject(o, "sources");
    for (size_t i = 0; i < e->src_n; i++) {
        source_rec *s = &e->src[i];
        refresh_source_locked(e, s);
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", s->name);
        cJSON_AddStringToObject(j, "key", s->key);
        cJSON_AddNumberToObject(j, "mod_revision", (double)s->mod_revision);
        cJSON_AddBoolToObject(j, "present", s->present);
        cJSON_AddItemToObject(j, "version",
                              str_or_null(s->has_version ? s->version : NULL));
        snprintf(hex, sizeof hex, "%016" PRIx64, s->checksum);
        cJSON_AddItemToObject(j, "checksum",
                              str_or_null(s->applied ? hex : NULL));
        cJSON_AddItemToObject(j, "error", str_or_null(s->error));
        cJSON_AddItemToArray(srcs, j);
    }
    cJSON *svcs = cJSON_AddArrayToObject(o, "services");
    for (size_t i = 0; i < e->svc_n; i++) {
        const service_rec *s = &e->svc[i];
        size_t live = 0;
        const char *error = s->error;
        for (size_t k = 0; k < s->n; k++) {
            live += s->v[k].json != NULL;
            if (!error)
                error = s->v[k].error;
        }
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", s->name);
        cJSON_AddNumberToObject(j, "instances", (double)live);
        cJSON_AddItemToObject(j, "error", str_or_null(error));
        cJSON_AddItemToArray(svcs, j);
    }
    uv_mutex_unlock(&e->mu);
    return o;
}

char *gw_etcd_status_json(gw_etcd *e) {
    cJSON *o = gw_etcd_status(e);
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

int gw_etcd_source_info_get(gw_etcd *e, const char *source,
                            gw_etcd_source_info *out) {
    int rc = -1;
    uv_mutex_lock(&e->mu);
    source_rec *s = find_source(e, source);
    if (s) {
        refresh_source_locked(e, s);
        memset(out, 0, sizeof *out);
        snprintf(out->key, sizeof out->key, "%s", s->key);
        out->mod_revision = s->mod_revision;
        snprintf(out->version, sizeof out->version, "%s",
                 s->has_version ? s->version : "");
        out->checksum = s->applied ? s->checksum : 0;
        snprintf(out->error, sizeof out->error, "%s", s->error ? s->error : "");
        rc = 0;
    }
    uv_mutex_unlock(&e->mu);
    return rc;
}

/* Append to buf as snprintf does, counting what does not fit. */
static void add_text(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*len < cap ? buf + *len : NULL,
                      *len < cap ? cap - *len : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n;
}

size_t gw_etcd_metrics_text(gw_etcd *e, char *buf, size_t cap) {
    size_t len = 0;
    if (cap)
        buf[0] = '\0';
    uv_mutex_lock(&e->mu);
    add_text(buf, cap, &len,
             "# HELP switchyard_etcd_revision The etcd revision the router "
             "reflects.\n"
             "# TYPE switchyard_etcd_revision gauge\n"
             "switchyard_etcd_revision %" PRId64 "\n"
             "# HELP switchyard_etcd_info The fingerprint of the router's "
             "snapshot, which reflects that revision.\n"
             "# TYPE switchyard_etcd_info gauge\n"
             "switchyard_etcd_info{revision=\"%" PRId64
             "\",fingerprint=\"%016" PRIx64 "\"} 1\n"
             "# TYPE switchyard_etcd_connected gauge\n"
             "switchyard_etcd_connected %d\n"
             "# TYPE switchyard_etcd_reconnects_total counter\n"
             "switchyard_etcd_reconnects_total %" PRIu64 "\n"
             "# TYPE switchyard_etcd_full_reads_total counter\n"
             "switchyard_etcd_full_reads_total %" PRIu64 "\n"
             "# TYPE switchyard_etcd_commits_total counter\n"
             "switchyard_etcd_commits_total %" PRIu64 "\n"
             "# TYPE switchyard_etcd_rejected_total counter\n"
             "switchyard_etcd_rejected_total %" PRIu64 "\n"
             "# TYPE switchyard_etcd_source_error gauge\n",
             e->revision, e->revision, live_fingerprint_locked(e),
             e->connected ? 1 : 0, e->reconnects, e->full_reads, e->commits,
             e->rejected);
    for (size_t i = 0; i < e->src_n; i++) {
        /* label value escaping: backslash, quote, newline */
        char name[300];
        size_t k = 0;
        for (const char *p = e->src[i].name; *p && k + 3 < sizeof name; p++) {
            if (*p == '\\' || *p == '"' || *p == '\n')
                name[k++] = '\\';
            name[k++] = *p == '\n' ? 'n' : *p;
        }
        name[k] = '\0';
        add_text(buf, cap, &len,
                 "switchyard_etcd_source_error{source=\"%s\"} %d\n", name,
                 e->src[i].error ? 1 : 0);
    }
    uv_mutex_unlock(&e->mu);
    return len;
}
