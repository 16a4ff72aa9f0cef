/*
 * def_canon.c - the canonical form of a route (compact JSON of its
 * meaning: normalised uri, values and defaults, fields in spec order,
 * sorted metadata) and the fingerprints hashed from it; deep copies of
 * route definitions; the stable key sort used for args and metadata.
 */
#include "def_build.h"
#include "values.h"

#include <stdio.h>

#define SEED_ROUTE 0x5359524f555445ull /* "SYROUTE" */

/* Stable merge sort of kv pairs by key. */
bool sy_def_sort_kv(const sy_alloc *a, sy_kv *kv, size_t n) {
    if (n < 2)
        return true;
    bool sorted = true;
    for (size_t i = 1; i < n && sorted; i++)
        sorted = strcmp(kv[i - 1].key, kv[i].key) <= 0;
    if (sorted)
        return true;
    sy_kv *tmp = sy_calloc(a, n, sizeof *tmp);
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
    sy_free(a, tmp);
    return true;
}

/* Append the normalised form of a value of type t. */
static void canon_value(sy_buf *b, sy_field_type t, const char *v) {
    char num[32];
    int64_t iv;
    bool bv;
    int st;
    switch (t) {
    case SY_FT_INT:
    case SY_FT_UINT:
    case SY_FT_POSINT:
        if (sy_value_int64(v, INT64_MIN, INT64_MAX, &iv, NULL)) {
            snprintf(num, sizeof num, "%lld", (long long)iv);
            v = num;
        }
        break;
    case SY_FT_BOOL:
        if (sy_value_bool(v, &bv, NULL))
            v = bv ? "true" : "false";
        break;
    case SY_FT_DURATION:
        if (sy_value_duration_ms(v, &iv, NULL)) {
            snprintf(num, sizeof num, "%lldms", (long long)iv);
            v = num;
        }
        break;
    case SY_FT_SIZE:
        if (sy_value_size(v, &iv, NULL)) {
            snprintf(num, sizeof num, "%lldB", (long long)iv);
            v = num;
        }
        break;
    case SY_FT_DATETIME:
        if (sy_value_datetime_ms(v, &iv, NULL)) {
            snprintf(num, sizeof num, "%lld", (long long)iv);
            v = num;
        }
        break;
    case SY_FT_STATUS:
        if (sy_value_status(v, &st, NULL)) {
            snprintf(num, sizeof num, "%d", st);
            v = num;
        }
        break;
    case SY_FT_METHOD: {
        sy_buf_putc(b, '"');
        for (const char *p = v; *p; p++)
            sy_buf_putc(b, (*p >= 'a' && *p <= 'z') ? (char)(*p - 32) : *p);
        sy_buf_putc(b, '"');
        return;
    }
    default: break;
    }
    sy_buf_json_string(b, v, strlen(v));
}

/* Args of one entry from i (all with the same key, consecutive) as a JSON
 * value: one string, or an array when `list` or repeated. */
static size_t canon_group(sy_buf *b, const sy_def_entry *e, size_t i,
                          sy_field_type t, bool list) {
    size_t j = i;
    while (j < e->arg_count && strcmp(e->args[j].key, e->args[i].key) == 0)
        j++;
    bool arr = list || j - i > 1;
    if (arr)
        sy_buf_putc(b, '[');
    for (size_t k = i; k < j; k++) {
        if (k > i)
            sy_buf_putc(b, ',');
        canon_value(b, t, e->args[k].value);
    }
    if (arr)
        sy_buf_putc(b, ']');
    return j;
}

static void canon_entry(sy_buf *b, const sy_def_entry *e) {
    sy_buf_puts(b, "{\"name\":");
    sy_buf_json_string(b, e->name, strlen(e->name));
    sy_buf_puts(b, ",\"args\":{");
    bool first = true;
    size_t i = 0;
    if (e->spec) {
        /* fields in spec order, defaults filled in */
        for (size_t f = 0; f < e->spec->field_count; f++) {
            const sy_field_spec *fs = &e->spec->fields[f];
            bool present =
                i < e->arg_count && strcmp(e->args[i].key, fs->name) == 0;
            if (!present && !fs->dflt)
                continue;
            if (!first)
                sy_buf_putc(b, ',');
            first = false;
            sy_buf_json_string(b, fs->name, strlen(fs->name));
            sy_buf_putc(b, ':');
            if (present) {
                i = canon_group(b, e, i, fs->type, fs->list);
            } else if (fs->list) {
                sy_buf_putc(b, '[');
                canon_value(b, fs->type, fs->dflt);
                sy_buf_putc(b, ']');
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
    sy_def_entry view = *e;
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
            sy_buf_putc(b, ',');
        first = false;
        sy_buf_json_string(b, view.args[k].key, strlen(view.args[k].key));
        sy_buf_putc(b, ':');
        k = canon_group(b, &view, k, SY_FT_STRING, false);
    }
    sy_buf_puts(b, "}}");
}

static void canon_entries(sy_buf *b, const sy_def_entry *es, size_t n) {
    sy_buf_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        if (i)
            sy_buf_putc(b, ',');
        canon_entry(b, &es[i]);
    }
    sy_buf_putc(b, ']');
}

static void canon_uri(sy_buf *b, const struct sy_route *r) {
    const sy_upstream *u = &r->upstream;
    sy_buf tmp;
    sy_buf_init(&tmp, b->alloc);
    switch (u->kind) {
    case SY_UPSTREAM_URL: {
        sy_buf_puts(&tmp, u->scheme);
        sy_buf_puts(&tmp, "://");
        bool v6 = strchr(u->host, ':') != NULL;
        if (v6)
            sy_buf_putc(&tmp, '[');
        for (const char *p = u->host; *p; p++)
            sy_buf_putc(&tmp, (*p >= 'A' && *p <= 'Z') ? (char)(*p + 32) : *p);
        if (v6)
            sy_buf_putc(&tmp, ']');
        sy_buf_putc(&tmp, ':');
        sy_buf_put_int(&tmp, u->port);
        break;
    }
    case SY_UPSTREAM_SERVICE:
        sy_buf_puts(&tmp, u->scheme);
        sy_buf_puts(&tmp, "://");
        sy_buf_puts(&tmp, u->host);
        break;
    case SY_UPSTREAM_FORWARD:
        sy_buf_puts(&tmp, "forward:");
        sy_buf_puts(&tmp, u->path);
        break;
    case SY_UPSTREAM_NONE: sy_buf_puts(&tmp, *r->uri ? "no://op" : ""); break;
    }
    if (tmp.failed)
        b->failed = true;
    sy_buf_json_string(b, tmp.ptr ? tmp.ptr : "", tmp.len);
    sy_buf_free(&tmp);
}

int sy_def_canonicalize(struct sy_route *r) {
    sy_buf b;
    sy_buf_init(&b, r->alloc);
    size_t m0, m1, p0, p1, f0, f1, u0, u1;
    sy_buf_puts(&b, "{\"id\":");
    sy_buf_json_string(&b, r->id, strlen(r->id));
    sy_buf_puts(&b, ",\"uri\":");
    u0 = b.len;
    canon_uri(&b, r);
    u1 = b.len;
    sy_buf_puts(&b, ",\"order\":");
    sy_buf_put_int(&b, r->order);
    sy_buf_puts(&b, ",\"predicates\":");
    p0 = b.len;
    canon_entries(&b, r->predicates, r->predicate_count);
    p1 = b.len;
    sy_buf_puts(&b, ",\"filters\":");
    f0 = b.len;
    canon_entries(&b, r->filters, r->filter_count);
    f1 = b.len;
    sy_buf_puts(&b, ",\"metadata\":");
    m0 = b.len;
    sy_buf_putc(&b, '{');
    for (size_t i = 0; i < r->metadata_count; i++) {
        if (i)
            sy_buf_putc(&b, ',');
        sy_buf_json_string(&b, r->metadata[i].key, strlen(r->metadata[i].key));
        sy_buf_putc(&b, ':');
        sy_buf_json_string(&b, r->metadata[i].value,
                           strlen(r->metadata[i].value));
    }
    sy_buf_putc(&b, '}');
    m1 = b.len;
    sy_buf_putc(&b, '}');
    if (b.failed) {
        sy_buf_free(&b);
        return SY_ENOMEM;
    }
    char *c = sy_arena_strndup(&r->arena, b.ptr, b.len);
    if (!c) {
        sy_buf_free(&b);
        return SY_ENOMEM;
    }
    r->canonical = c;
    r->fingerprint = sy_hash64(c, b.len, SEED_ROUTE);
    r->fp_uri = sy_hash64(c + u0, u1 - u0, SEED_ROUTE + 1);
    r->fp_predicates = sy_hash64(c + p0, p1 - p0, SEED_ROUTE + 2);
    r->fp_filters = sy_hash64(c + f0, f1 - f0, SEED_ROUTE + 3);
    r->fp_metadata = sy_hash64(c + m0, m1 - m0, SEED_ROUTE + 4);
    sy_buf_free(&b);
    return SY_OK;
}

/* ---- copies ---- */

static const char *dup_or_static(sy_arena *ar, const char *s, bool *fail) {
    if (!s)
        return NULL;
    char *p = sy_arena_strdup(ar, s);
    if (!p)
        *fail = true;
    return p ? p : "";
}

static sy_def_entry *clone_entries(sy_arena *ar, const sy_def_entry *es,
                                   size_t n, bool *fail) {
    if (!n)
        return NULL;
    sy_def_entry *out = sy_arena_alloc(ar, n * sizeof *out);
    if (!out) {
        *fail = true;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        out[i] = es[i];
        out[i].name = dup_or_static(ar, es[i].name, fail);
        out[i].args = NULL;
        if (es[i].arg_count) {
            out[i].args = sy_arena_alloc(ar, es[i].arg_count * sizeof(sy_kv));
            if (!out[i].args) {
                *fail = true;
                out[i].arg_count = 0;
                continue;
            }
        }
        for (size_t k = 0; k < es[i].arg_count; k++) {
            out[i].args[k].key = dup_or_static(ar, es[i].args[k].key, fail);
            out[i].args[k].value = dup_or_static(ar, es[i].args[k].value, fail);
        }
    }
    return out;
}

struct sy_route *sy_def_clone(const struct sy_route *r) {
    struct sy_route *c = sy_route_new(r->alloc);
    if (!c)
        return NULL;
    bool fail = false;
    sy_arena *ar = &c->arena;
    c->id = dup_or_static(ar, r->id, &fail);
    c->uri = dup_or_static(ar, r->uri, &fail);
    c->order = r->order;
    c->disabled = r->disabled;
    c->doc_index = r->doc_index;
    c->upstream = r->upstream;
    c->upstream.host = dup_or_static(ar, r->upstream.host, &fail);
    c->upstream.path = dup_or_static(ar, r->upstream.path, &fail);
    c->upstream.scheme = dup_or_static(ar, r->upstream.scheme, &fail);
    c->authority = dup_or_static(ar, r->authority, &fail);
    c->predicates = clone_entries(ar, r->predicates, r->predicate_count, &fail);
    c->predicate_count = r->predicate_count;
    c->filters = clone_entries(ar, r->filters, r->filter_count, &fail);
    c->filter_count = r->filter_count;
    if (r->metadata_count) {
        c->metadata =
            sy_arena_alloc(ar, (r->metadata_count + 1) * sizeof *c->metadata);
        if (c->metadata) {
            for (size_t i = 0; i < r->metadata_count; i++) {
                c->metadata[i].key =
                    dup_or_static(ar, r->metadata[i].key, &fail);
                c->metadata[i].value =
                    dup_or_static(ar, r->metadata[i].value, &fail);
            }
            c->metadata_count = r->metadata_count;
        } else {
            fail = true;
        }
    }
    if (fail) {
        sy_route_unref(c);
        return NULL;
    }
    return c;
}
