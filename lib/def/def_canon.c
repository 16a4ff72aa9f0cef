/*
 * def_canon.c - the canonical form of a route (compact JSON of its
 * meaning: normalised uri, values and defaults, fields in spec order,
 * sorted metadata) and the fingerprints hashed from it; deep copies of
 * route definitions; the stable key sort used for args and metadata.
 */
#include "base/values.h"
#include "def/def_build.h"
#include "def/def_memo.h"

#include <stdio.h>

#define SEED_ROUTE 0x5359524f555445ull /* "SYROUTE" */

/* Stable merge sort of kv pairs by key. */
bool sy__def_sort_kv(const sy__alloc *a, sy_kv *kv, size_t n) {
    if (n < 2)
        return true;
    bool sorted = true;
    for (size_t i = 1; i < n && sorted; i++)
        sorted = strcmp(kv[i - 1].key, kv[i].key) <= 0;
    if (sorted)
        return true;
    sy_kv *tmp = sy__calloc(a, n, sizeof *tmp);
    if (!tmp)
        return false;
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = strcmp(kv[j].key, kv[i].key) < 0 ? kv[j++] : kv[i++];
            while (i < mid)
                tmp[k++] = kv[i++];
            while (j < hi)
                tmp[k++] = kv[j++];
        }
        memcpy(kv, tmp, n * sizeof *kv);
    }
    sy__free(a, tmp);
    return true;
}

/* ---- writing: sy__buf appends with the common case inline ----
 *
 * The text is terminated once, at the end of canon_write, not after each
 * append (sy__buf's own calls, the rare slow path, terminate as they go). */

static inline void put(sy__buf *b, const char *s, size_t n) {
    if (b->len + n < b->cap) {
        memcpy(b->ptr + b->len, s, n);
        b->len += n;
    } else {
        sy__buf_append(b, s, n);
    }
}

static inline void putc1(sy__buf *b, char c) {
    if (b->len + 1 < b->cap)
        b->ptr[b->len++] = c;
    else
        sy__buf_append(b, &c, 1);
}

#define PUTS(b, lit) put((b), (lit), sizeof(lit) - 1)

/* Bytes a JSON string spells with an escape: controls, '"' and '\\'. */
static const unsigned char needs_escape[256] = {
    [0] = 1,  [1] = 1,  [2] = 1,  [3] = 1,  [4] = 1,   [5] = 1,   [6] = 1,
    [7] = 1,  [8] = 1,  [9] = 1,  [10] = 1, [11] = 1,  [12] = 1,  [13] = 1,
    [14] = 1, [15] = 1, [16] = 1, [17] = 1, [18] = 1,  [19] = 1,  [20] = 1,
    [21] = 1, [22] = 1, [23] = 1, [24] = 1, [25] = 1,  [26] = 1,  [27] = 1,
    [28] = 1, [29] = 1, [30] = 1, [31] = 1, ['"'] = 1, ['\\'] = 1};

/* Non-zero when a byte of the word needs an escape. */
static inline uint64_t escape_in(uint64_t w) {
    return sy__swar_has_below(w, 0x20) | sy__swar_has_byte(w, '"') |
           sy__swar_has_byte(w, '\\');
}

/* The length of the run of s[0..n) that needs no escape. */
static inline size_t plain_run(const char *s, size_t n) {
    size_t i = 0;
    while (i + 8 <= n && !escape_in(sy__load_u64(s + i)))
        i += 8;
    while (i < n && !needs_escape[(unsigned char)s[i]])
        i++;
    return i;
}

/* s as a JSON string literal: copied and checked a word at a time (the
 * last word overlapping the one before when n is not a multiple of 8);
 * text that needs an escape (rare) goes to sy__buf_json_string instead. */
static void put_json(sy__buf *b, const char *s, size_t n) {
    if (b->len + n + 2 < b->cap) {
        char *o = b->ptr + b->len + 1;
        if (n >= 8) {
            size_t i = 0;
            for (; i + 8 < n; i += 8) {
                uint64_t w = sy__load_u64(s + i);
                if (escape_in(w))
                    goto escaped;
                memcpy(o + i, &w, 8);
            }
            uint64_t w = sy__load_u64(s + n - 8);
            if (escape_in(w))
                goto escaped;
            memcpy(o + n - 8, &w, 8);
        } else {
            for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                if (needs_escape[c])
                    goto escaped;
                o[i] = (char)c;
            }
        }
        o[-1] = '"';
        o[n] = '"';
        b->len += n + 2;
        return;
    }
escaped:
    sy__buf_json_string(b, s, n);
}

static void put_json_str(sy__buf *b, const char *s) {
    put_json(b, s, strlen(s));
}

/* Append the normalised form of a value of type t. */
static inline __attribute__((always_inline)) void
canon_value(sy__buf *b, sy__field_type t, const char *v) {
    char num[32];
    int64_t iv;
    bool bv;
    int st;
    size_t n;
    switch (t) {
    case SY_FT_INT:
    case SY_FT_UINT:
    case SY_FT_POSINT:
        if (sy__value_int64(v, INT64_MIN, INT64_MAX, &iv, NULL)) {
            sy__int_text(iv, num);
            v = num;
        }
        break;
    case SY_FT_BOOL:
        /* the lower-case spellings (every default) as they are */
        if (v[0] == 't' && v[1] == 'r' && v[2] == 'u' && v[3] == 'e' && !v[4]) {
            PUTS(b, "\"true\"");
            return;
        }
        if (v[0] == 'f' && v[1] == 'a' && v[2] == 'l' && v[3] == 's' &&
            v[4] == 'e' && !v[5]) {
            PUTS(b, "\"false\"");
            return;
        }
        if (sy__value_bool(v, &bv, NULL))
            v = bv ? "true" : "false";
        break;
    case SY_FT_DURATION:
        if (sy__value_duration_ms(v, &iv, NULL)) {
            n = sy__int_text(iv, num);
            memcpy(num + n, "ms", 3);
            v = num;
        }
        break;
    case SY_FT_SIZE:
        if (sy__value_size(v, &iv, NULL)) {
            n = sy__int_text(iv, num);
            memcpy(num + n, "B", 2);
            v = num;
        }
        break;
    case SY_FT_DATETIME:
        if (sy__value_datetime_ms(v, &iv, NULL)) {
            sy__int_text(iv, num);
            v = num;
        }
        break;
    case SY_FT_STATUS:
        if (sy__value_status(v, &st, NULL)) {
            sy__int_text(st, num);
            v = num;
        }
        break;
    case SY_FT_METHOD: {
        putc1(b, '"');
        for (const char *p = v; *p; p++)
            putc1(b, (*p >= 'a' && *p <= 'z') ? (char)(*p - 32) : *p);
        putc1(b, '"');
        return;
    }
    default: break;
    }
    put_json_str(b, v);
}

/* Args of one entry from i (all with the same key, consecutive) as a JSON
 * value: one string, or an array when `list` or repeated. */
static size_t canon_group(sy__buf *b, const sy__def_entry *e, size_t i,
                          sy__field_type t, bool list) {
    size_t j = i + 1;
    while (j < e->arg_count && (e->args[j].key == e->args[i].key ||
                                strcmp(e->args[j].key, e->args[i].key) == 0))
        j++;
    bool arr = list || j - i > 1;
    if (arr)
        putc1(b, '[');
    for (size_t k = i; k < j; k++) {
        if (k > i)
            putc1(b, ',');
        canon_value(b, t, e->args[k].value);
    }
    if (arr)
        putc1(b, ']');
    return j;
}

static inline __attribute__((always_inline)) void
canon_entry(sy__buf *b, const sy__def_entry *e) {
    if (sy__def_spec(e)) { /* a built-in's opening text is in its spec */
        put(b, sy__def_spec(e)->canon_head, sy__def_spec(e)->canon_head_len);
    } else {
        PUTS(b, "{\"name\":");
        put_json_str(b, sy__def_name(e));
        PUTS(b, ",\"args\":{");
    }
    bool first = true;
    size_t i = 0;
    if (sy__def_spec(e)) {
        /* fields in spec order, defaults filled in */
        for (size_t f = 0; f < sy__def_spec(e)->field_count; f++) {
            const sy__field_spec *fs = &sy__def_spec(e)->fields[f];
            /* mapped args carry the spec's own name: equal pointers */
            bool present =
                i < e->arg_count && (e->args[i].key == fs->name ||
                                     strcmp(e->args[i].key, fs->name) == 0);
            if (!present && !fs->dflt)
                continue;
            if (!first)
                putc1(b, ',');
            first = false;
            put(b, fs->json_key, fs->json_key_len);
            if (present) {
                i = canon_group(b, e, i, fs->type, fs->list);
            } else if (fs->list) {
                putc1(b, '[');
                canon_value(b, fs->type, fs->dflt);
                putc1(b, ']');
            } else {
                canon_value(b, fs->type, fs->dflt);
            }
        }
    }
    /* extra keys (open factories) or host factory args: sorted by key */
    size_t start = i;
    size_t n = e->arg_count - start;
    const sy_kv *rest = n ? e->args + start : NULL;
    bool sorted = true;
    for (size_t k = 1; k < n; k++)
        sorted = sorted && strcmp(rest[k - 1].key, rest[k].key) <= 0;
    /* host factories keep mapped order in args; sort a view here */
    sy_kv small[32];
    sy__def_entry view = *e;
    if (!sorted && n <= SY_ARRAY_LEN(small)) {
        memcpy(small, rest, n * sizeof *small); /* n > 1 here */
        for (size_t a = 1; a < n; a++)          /* stable insertion sort */
            for (size_t c = a;
                 c > 0 && strcmp(small[c - 1].key, small[c].key) > 0; c--) {
                sy_kv t = small[c];
                small[c] = small[c - 1];
                small[c - 1] = t;
            }
        view.args = small;
        view.arg_count = n;
        start = 0;
    } else {
        view.args = e->args;
    }
    for (size_t k = start; k < view.arg_count;) {
        if (!first)
            putc1(b, ',');
        first = false;
        put_json_str(b, view.args[k].key);
        putc1(b, ':');
        k = canon_group(b, &view, k, SY_FT_STRING, false);
    }
    PUTS(b, "}}");
}

/* Entry i of a list: es[i], or (es NULL) predicate i of r rebuilt from
 * its compiled form (route.h predicates). */
static const sy__def_entry *entry_at(const struct sy_route *r,
                                     const sy__def_entry *es, size_t i,
                                     sy__entry_view *tmp) {
    return es ? &es[i] : sy__route_pred_entry(r, i, tmp);
}

/* The n entries es of r (es NULL: r's predicates, rebuilt). hints (or
 * NULL): entry i's memo slot (or NULL), whose text is copied when it has
 * one, else written and kept there. */
static void canon_entries(sy__buf *b, const struct sy_route *r,
                          const sy__def_entry *es, size_t n,
                          sy__memo_slot *const *hints) {
    sy__entry_view tmp;
    putc1(b, '[');
    for (size_t i = 0; i < n; i++) {
        if (i)
            putc1(b, ',');
        sy__memo_slot *s = hints ? hints[i] : NULL;
        if (s && s->canon_len) {
            put(b, s->bytes + s->canon_at, s->canon_len);
            continue;
        }
        size_t at = b->len;
        canon_entry(b, entry_at(r, es, i, &tmp));
        if (s && !b->failed &&
            b->len - at <= (size_t)(SY_MEMO_BYTES - s->canon_at)) {
            memcpy(s->bytes + s->canon_at, b->ptr + at, b->len - at);
            s->canon_len = (uint16_t)(b->len - at);
        }
    }
    putc1(b, ']');
}

/* The uri's canonical text, quoted: the opening quote, the text written
 * in place, then the closing quote; text that needs escapes (hosts and
 * paths rarely do) is taken out and written again escaped. */
static void canon_uri_any(sy__buf *b, const struct sy_route *r) {
    sy_upstream up;
    sy_route_upstream(r, &up);
    const sy_upstream *u = &up;
    putc1(b, '"');
    size_t at = b->len;
    char num[24];
    switch (u->kind) {
    case SY_UPSTREAM_URL: {
        put(b, u->scheme, strlen(u->scheme));
        PUTS(b, "://");
        bool v6 = strchr(u->host, ':') != NULL;
        if (v6)
            putc1(b, '[');
        size_t hl = strlen(u->host);
        if (b->len + hl < b->cap || sy__buf_reserve(b, hl)) {
            char *o = b->ptr + b->len;
            for (size_t i = 0; i < hl; i++) {
                char c = u->host[i];
                o[i] = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
            }
            b->len += hl;
        }
        if (v6)
            putc1(b, ']');
        putc1(b, ':');
        put(b, num, sy__int_text(u->port, num));
        break;
    }
    case SY_UPSTREAM_SERVICE:
        put(b, u->scheme, strlen(u->scheme));
        PUTS(b, "://");
        put(b, u->host, strlen(u->host));
        break;
    case SY_UPSTREAM_FORWARD:
        PUTS(b, "forward:");
        put(b, u->path, strlen(u->path));
        break;
    case SY_UPSTREAM_NONE:
        if (*r->uri)
            PUTS(b, "no://op");
        break;
    }
    if (b->failed)
        return;
    size_t n = b->len - at;
    if (plain_run(b->ptr + at, n) == n) {
        putc1(b, '"');
        return;
    }
    /* rare: escapes needed; quote a copy of the text */
    char *t = sy__strndup(b->alloc, b->ptr + at, n);
    if (!t) {
        b->failed = true;
        return;
    }
    b->len = at - 1;
    sy__buf_json_string(b, t, n);
    sy__free(b->alloc, t);
}

/* canon_uri_any for the common upstreams, a URL or a service, written
 * in one pass: the host's bytes lowered (a URL's) and tested for an
 * escape and a ':' (IPv6) as they are copied; anything else, and a host
 * that needs an escape or brackets, goes to canon_uri_any. */
static void canon_uri(sy__buf *b, const struct sy_route *r) {
    bool url = r->up_kind == SY_UPSTREAM_URL;
    if (!url && r->up_kind != SY_UPSTREAM_SERVICE) {
        canon_uri_any(b, r);
        return;
    }
    const char *scheme = sy__route_schemes[r->up_scheme], *host = r->up_host;
    size_t sl = strlen(scheme), hl = strlen(host), start = b->len;
    /* '"' scheme "://" host ':' port '"' */
    if (b->len + sl + hl + 16 >= b->cap && !sy__buf_reserve(b, sl + hl + 16))
        return;
    char *o = b->ptr + b->len;
    *o++ = '"';
    memcpy(o, scheme, sl);
    memcpy(o + sl, "://", 3);
    o += sl + 3;
    uint64_t odd = 0; /* an escape needed, or a ':' */
    size_t i = 0;
    for (; i + 8 <= hl; i += 8) { /* a word at a time: 'A'-'Z' get 0x20 */
        uint64_t w = sy__load_u64(host + i);
        odd |= escape_in(w) | sy__swar_has_byte(w, ':');
        uint64_t h7 = w & 0x7f7f7f7f7f7f7f7full;
        uint64_t upper = (h7 + 0x3f3f3f3f3f3f3f3full) &
                         ~(h7 + 0x2525252525252525ull) & ~w & SY_SWAR_HIGHS;
        if (url)
            w |= upper >> 2;
        memcpy(o + i, &w, 8);
    }
    for (; i < hl; i++) {
        unsigned char c = (unsigned char)host[i];
        odd |= needs_escape[c] | (c == ':');
        o[i] = (char)(url && (unsigned)(c - 'A') < 26u ? c + 32 : c);
    }
    if (odd) { /* rare: written again as before */
        b->len = start;
        canon_uri_any(b, r);
        return;
    }
    o += hl;
    if (url) {
        *o++ = ':';
        o += sy__int_text(r->up_port, o);
    }
    *o++ = '"';
    b->len = (size_t)(o - b->ptr);
}

static void canon_metadata(sy__buf *b, const struct sy_route *r) {
    putc1(b, '{');
    for (size_t i = 0; i < r->more->metadata_count; i++) {
        if (i)
            putc1(b, ',');
        put_json_str(b, r->more->metadata[i].key);
        putc1(b, ':');
        put_json_str(b, r->more->metadata[i].value);
    }
    putc1(b, '}');
}

/* The parts a diff reports (SY_CHANGED_*), in canonical order. */
enum { PART_URI, PART_PREDICATES, PART_FILTERS, PART_METADATA };

static void canon_part(sy__buf *b, const struct sy_route *r, int part) {
    switch (part) {
    case PART_URI: canon_uri(b, r); break;
    case PART_PREDICATES:
        canon_entries(b, r, r->predicates, r->predicate_count, NULL);
        break;
    case PART_FILTERS:
        canon_entries(b, r, r->more->filters, r->more->filter_count, NULL);
        break;
    default: canon_metadata(b, r); break;
    }
}

/* The canonical form of r into b (from b->len); hints[0] and [1] (or
 * NULL) for its predicates and filters (canon_entries). */
static void canon_write(sy__buf *b, const struct sy_route *r,
                        sy__memo_slot *const *const *hints) {
    PUTS(b, "{\"id\":");
    put_json_str(b, r->id);
    PUTS(b, ",\"uri\":");
    canon_uri(b, r);
    PUTS(b, ",\"order\":");
    char num[24];
    put(b, num, sy__int_text(r->order, num));
    PUTS(b, ",\"predicates\":");
    canon_entries(b, r, r->predicates, r->predicate_count,
                  hints ? hints[0] : NULL);
    PUTS(b, ",\"filters\":");
    canon_entries(b, r, r->more->filters, r->more->filter_count,
                  hints ? hints[1] : NULL);
    PUTS(b, ",\"metadata\":");
    canon_metadata(b, r);
    putc1(b, '}');
    if (!b->failed)
        b->ptr[b->len] = '\0'; /* appends leave room for it */
}

static int canonicalize(const struct sy_route *r, sy__buf *scratch,
                        sy__memo_slot *const *const *hints,
                        uint64_t *fingerprint) {
    scratch->len = 0;
    scratch->failed = false;
    if (scratch->ptr)
        scratch->ptr[0] = '\0';
    canon_write(scratch, r, hints);
    if (scratch->failed)
        return SY_ENOMEM;
    *fingerprint = sy__hash64(scratch->ptr, scratch->len, SEED_ROUTE);
    return SY_OK;
}

int sy__def_canonicalize_into(const struct sy_route *r, sy__buf *scratch,
                              uint64_t *fingerprint) {
    return canonicalize(r, scratch, NULL, fingerprint);
}

int sy__def_canonicalize_memo(const struct sy_route *r, sy__buf *scratch,
                              struct sy__def_memo *memo,
                              uint64_t *fingerprint) {
    /* the hints name this route's entries when their counts are its own
     * (each list's are set as it is built, 0 when it has more than fit) */
    sy__memo_slot *const *hints[2] = {NULL, NULL};
    if (memo && r->predicate_count && memo->hint_n[0] == r->predicate_count)
        hints[0] = memo->hint[0];
    if (memo && r->more->filter_count &&
        memo->hint_n[1] == r->more->filter_count)
        hints[1] = memo->hint[1];
    return canonicalize(r, scratch, hints[0] || hints[1] ? hints : NULL,
                        fingerprint);
}

/* ---- what changed ---- */

static bool str_same(const char *a, const char *b) {
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* How two parts compare without writing their texts. */
enum { SAME, DIFFERENT, UNKNOWN };

/* canon_value writes a value of type t as its own JSON string (no
 * normalising): different texts, different canonical forms. */
static bool verbatim_type(sy__field_type t) {
    switch (t) {
    case SY_FT_INT:
    case SY_FT_UINT:
    case SY_FT_POSINT:
    case SY_FT_BOOL:
    case SY_FT_DURATION:
    case SY_FT_SIZE:
    case SY_FT_DATETIME:
    case SY_FT_STATUS:
    case SY_FT_METHOD: return false;
    default: return true;
    }
}

/* Two lists of entries: SAME when every field is equal (then so are the
 * texts); DIFFERENT when the texts surely differ: another count of
 * entries (top-level elements), or in entries of one factory and the
 * same keys a value that canon_value writes verbatim; else UNKNOWN. */
static int entries_compare(const struct sy_route *ra, const sy__def_entry *a,
                           size_t na, const struct sy_route *rb,
                           const sy__def_entry *b, size_t nb) {
    if (na != nb)
        return DIFFERENT;
    int r = SAME;
    sy__entry_view ta, tb;
    for (size_t i = 0; i < na; i++) {
        const sy__def_entry *x = entry_at(ra, a, i, &ta);
        const sy__def_entry *y = entry_at(rb, b, i, &tb);
        if (x->host != y->host || sy__def_spec(x) != sy__def_spec(y) ||
            sy__def_host(x) != sy__def_host(y) ||
            x->arg_count != y->arg_count ||
            !str_same(sy__def_name(x), sy__def_name(y))) {
            r = UNKNOWN;
            continue;
        }
        for (size_t k = 0; k < x->arg_count; k++) {
            if (!str_same(x->args[k].key, y->args[k].key)) {
                r = UNKNOWN;
                break;
            }
            if (str_same(x->args[k].value, y->args[k].value))
                continue;
            const sy__factory_spec *spec = sy__def_spec(x);
            const sy__field_spec *fs =
                spec ? sy__factory_field(spec, x->args[k].key) : NULL;
            /* (keys outside the spec are written verbatim, sorted alike
             * in both: the same keys) */
            if (!x->args[k].value || !y->args[k].value ||
                (fs && !verbatim_type(fs->type)))
                r = UNKNOWN;
            else
                return DIFFERENT;
        }
    }
    return r;
}

/* What fields say of a part's canonical texts (SAME, DIFFERENT, UNKNOWN):
 * the quick answer for what an update left alone or plainly changed. */
static int part_compare(const struct sy_route *a, const struct sy_route *b,
                        int part) {
    switch (part) {
    case PART_URI:
        return a->up_kind == b->up_kind && a->up_scheme == b->up_scheme &&
                       a->up_port == b->up_port &&
                       str_same(a->up_host, b->up_host) &&
                       ((a->up_kind != SY_UPSTREAM_FORWARD &&
                         a->up_kind != SY_UPSTREAM_NONE) ||
                        str_same(a->uri, b->uri))
                   ? SAME
                   : UNKNOWN;
    case PART_PREDICATES:
        return entries_compare(a, a->predicates, a->predicate_count, b,
                               b->predicates, b->predicate_count);
    case PART_FILTERS:
        return entries_compare(a, a->more->filters, a->more->filter_count, b,
                               b->more->filters, b->more->filter_count);
    default: /* keys and values written verbatim, in key order */
        if (a->more->metadata_count != b->more->metadata_count)
            return DIFFERENT;
        for (size_t i = 0; i < a->more->metadata_count; i++)
            if (!str_same(a->more->metadata[i].key, b->more->metadata[i].key) ||
                !str_same(a->more->metadata[i].value,
                          b->more->metadata[i].value))
                return DIFFERENT;
        return SAME;
    }
}

/* The part's canonical texts differ (out of memory: say they do). */
static bool part_differs(const struct sy_route *a, const struct sy_route *b,
                         int part, sy__buf *buf) {
    int c = part_compare(a, b, part);
    if (c != UNKNOWN)
        return c == DIFFERENT;
    buf->len = 0;
    buf->failed = false;
    canon_part(buf, a, part);
    size_t na = buf->len;
    canon_part(buf, b, part);
    return buf->failed || buf->len - na != na ||
           memcmp(buf->ptr, buf->ptr + na, na) != 0;
}

unsigned sy__def_route_changes(const struct sy_route *a,
                               const struct sy_route *b) {
    static const unsigned bits[4] = {SY_CHANGED_URI, SY_CHANGED_PREDICATES,
                                     SY_CHANGED_FILTERS, SY_CHANGED_METADATA};
    unsigned m = a->order != b->order ? SY_CHANGED_ORDER : 0;
    sy__buf buf;
    sy__buf_init(&buf, a->alloc);
    for (int part = PART_URI; part <= PART_METADATA; part++)
        if (part_differs(a, b, part, &buf))
            m |= bits[part];
    sy__buf_free(&buf);
    return m;
}

int sy__def_canonicalize(struct sy_route *r) {
    sy__buf b;
    sy__buf_init(&b, r->alloc);
    uint64_t fp;
    int rc = sy__def_canonicalize_into(r, &b, &fp);
    sy__buf_free(&b);
    if (!rc)
        r->fingerprint = fp;
    return rc;
}

/* The scratch of sy__def_route_fp: a stack buffer first, the route's
 * allocator only for a canonical text longer than it (so a reader of a
 * fingerprint allocates nothing for most routes). */
enum { FP_STACK = 4096 };
typedef struct fp_scratch {
    const sy__alloc *under;
    char *stack;
} fp_scratch;

static void *fp_malloc(void *data, size_t n) {
    const fp_scratch *f = data;
    return f->under->malloc(f->under->data, n);
}

static void *fp_realloc(void *data, void *p, size_t n) {
    const fp_scratch *f = data;
    if (p != f->stack)
        return f->under->realloc(f->under->data, p, n);
    char *q = f->under->malloc(f->under->data, n); /* n > FP_STACK */
    if (q)
        memcpy(q, p, FP_STACK);
    return q;
}

static void fp_free(void *data, void *p) {
    const fp_scratch *f = data;
    if (p != f->stack)
        f->under->free(f->under->data, p);
}

/* The hash of the canonical text, computed on the first call for a
 * route whose parse did not need it (def_route.c: no live route to
 * share it with, as in a fresh router's first document): written into a
 * scratch and not kept, as the parse would have. Readers racing compute
 * and store the same value. Out of memory (a text past FP_STACK bytes):
 * 0, not kept. */
uint64_t sy__def_route_fp(const struct sy_route *r) {
    struct sy_route *m = (struct sy_route *)(uintptr_t)r;
    uint64_t fp = atomic_load_explicit(&m->fingerprint, memory_order_relaxed);
    if (fp)
        return fp;
    _Alignas(16) char stack[FP_STACK];
    fp_scratch f = {r->alloc, stack};
    sy__alloc a = {fp_malloc, fp_realloc, fp_free, &f};
    sy__buf b = {&a, stack, 0, FP_STACK, false};
    if (canonicalize(r, &b, NULL, &fp) == SY_OK)
        atomic_store_explicit(&m->fingerprint, fp, memory_order_relaxed);
    else
        fp = 0;
    sy__buf_free(&b);
    return fp;
}

uint64_t sy_route_fingerprint(const sy_route *r) {
    return r ? sy__def_route_fp(r) : 0;
}

/* Built on the first call, from the route's fields (the same text the
 * fingerprints hashed), and kept with the route: most routes are never
 * asked, and the text is about a quarter of a small route. */
const char *sy_route_canonical(const sy_route *r) {
    if (!r)
        return NULL;
    struct sy_route *m = (struct sy_route *)(uintptr_t)r;
    char *c = atomic_load_explicit(&m->canonical, memory_order_acquire);
    if (c)
        return c;
    sy__buf b;
    sy__buf_init(&b, r->alloc);
    canon_write(&b, r, NULL);
    if (b.failed || !b.ptr) {
        sy__buf_free(&b);
        return NULL;
    }
    char *expect = NULL;
    if (!atomic_compare_exchange_strong_explicit(&m->canonical, &expect, b.ptr,
                                                 memory_order_acq_rel,
                                                 memory_order_acquire)) {
        sy__buf_free(&b); /* another thread was first: use its text */
        return expect;
    }
    return b.ptr;
}

/* ---- copies ---- */

static const char *dup_or_static(sy__arena *ar, const char *s, bool *fail) {
    if (!s)
        return NULL;
    char *p = sy__arena_strdup(ar, s);
    if (!p)
        *fail = true;
    return p ? p : "";
}

/* The n entries es of r (es NULL: r's predicates, rebuilt), copied. */
static sy__def_entry *clone_entries(sy__arena *ar, const struct sy_route *r,
                                    const sy__def_entry *list, size_t n,
                                    bool *fail) {
    if (!n)
        return NULL;
    sy__def_entry *out = sy__arena_alloc(ar, n * sizeof *out);
    if (!out) {
        *fail = true;
        return NULL;
    }
    sy__entry_view tmp;
    for (size_t i = 0; i < n; i++) {
        const sy__def_entry *e = entry_at(r, list, i, &tmp);
        out[i] = *e;
        if (e->host && e->f.ref) { /* the name as written, copied */
            sy__def_host_ref *ref = sy__arena_alloc(ar, sizeof *ref);
            if (ref) {
                ref->factory = e->f.ref->factory;
                ref->name = dup_or_static(ar, e->f.ref->name, fail);
            } else {
                *fail = true;
            }
            out[i].f.ref = ref;
        }
        out[i].args = NULL;
        if (e->arg_count) {
            out[i].args = sy__arena_alloc(ar, e->arg_count * sizeof(sy_kv));
            if (!out[i].args) {
                *fail = true;
                out[i].arg_count = 0;
                continue;
            }
        }
        for (size_t k = 0; k < e->arg_count; k++) {
            out[i].args[k].key = dup_or_static(ar, e->args[k].key, fail);
            out[i].args[k].value = dup_or_static(ar, e->args[k].value, fail);
        }
    }
    return out;
}

struct sy_route *sy__def_clone(const struct sy_route *r) {
    struct sy_route *c = sy__route_new(r->alloc);
    if (!c)
        return NULL;
    bool fail = false;
    sy__arena *ar = &c->arena;
    c->id = dup_or_static(ar, r->id, &fail);
    c->uri = dup_or_static(ar, r->uri, &fail);
    c->order = r->order;
    c->disabled = r->disabled;
    c->doc_index = r->doc_index;
    c->up_kind = r->up_kind;
    c->up_scheme = r->up_scheme;
    c->up_port = r->up_port;
    c->up_host = dup_or_static(ar, r->up_host, &fail);
    c->authority = dup_or_static(ar, r->authority, &fail);
    c->predicates =
        clone_entries(ar, r, r->predicates, r->predicate_count, &fail);
    c->predicate_count = r->predicate_count;
    const sy__route_more *rm = r->more;
    /* (a block of host data only holds nothing a copy keeps) */
    if (rm != &sy__route_more_none && !(rm->policies & SY_MORE_HEAP)) {
        sy__route_more *m = sy__route_more_own(c);
        if (!m) {
            sy__route_unref(c);
            return NULL;
        }
        m->filters = clone_entries(ar, r, rm->filters, rm->filter_count, &fail);
        m->filter_count = rm->filter_count;
        if (rm->metadata_count) {
            m->metadata = sy__arena_alloc(ar, (rm->metadata_count + 1) *
                                                  sizeof *m->metadata);
            if (m->metadata) {
                for (size_t i = 0; i < rm->metadata_count; i++) {
                    m->metadata[i].key =
                        dup_or_static(ar, rm->metadata[i].key, &fail);
                    m->metadata[i].value =
                        dup_or_static(ar, rm->metadata[i].value, &fail);
                }
                m->metadata_count = rm->metadata_count;
            } else {
                fail = true;
            }
        }
    }
    if (fail) {
        sy__route_unref(c);
        return NULL;
    }
    return c;
}
