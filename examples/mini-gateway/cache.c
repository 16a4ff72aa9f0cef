/*
 * cache.c - LocalResponseCache, as SCG runs it, per worker: a GET without
 * a body on a route with the filter is answered from the worker's cache
 * when an answer for the same route, host, path, query, Authorization and
 * Cookie is there and younger than the route's timeToLive; else it goes
 * upstream and a 200, 206 or 301 answer is kept (its status, its
 * headers after the route's edits and its body) unless the request says
 * Cache-Control no-store or the answer no-store or private, or its body
 * is larger than the route's size. An answer kept (or being kept) gets
 * Cache-Control max-age (the seconds the kept answer has left). A request with
 * Cache-Control no-cache for a kept answer gets 304 without a body, as SCG's.
 * The answers of one route in one worker take at most `size` bytes: the oldest
 * go first. Vary as SCG's ResponseCacheManager: an answer with `Vary: *` is not
 * kept; else the names its Vary lists are kept for the request's key (a
 * metadata entry) and the answer under that key extended with the request's
 * values of those headers, so a later request is answered from the cache only
 * when its values are the same. Args checked in host_filters.c. Worker thread
 * only.
 */
#define _DEFAULT_SOURCE
#include "host_filters.h"
#include "proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define BUCKETS 256

typedef struct entry {
    struct entry *next; /* in its bucket */
    uint64_t hash;
    char *key; /* route id, NUL, then the rest */
    size_t key_len;
    uint64_t stored_ms, expires_ms;
    char *head; /* header lines, without Cache-Control */
    size_t head_len;
    char *body;
    size_t body_len;
    bool meta;  /* the Vary names for a request key (head: "name\n"...) */
    int status; /* 200, 206 or 301 */
} entry;

struct gw_cache {
    entry *b[BUCKETS];
};

/* One answer being kept (the request's). */
struct gw_cache_cap {
    uint64_t ttl_ms, size;
    gw_buf key, head, body;
    gw_buf reqh; /* the request's headers, "name:value\n" each */
    gw_buf vary; /* the answer's Vary names, lower case, sorted, "name\n" */
    bool on;     /* still to be kept */
    int status;
};

static void cap_free(struct gw_cache_cap *cap);

static const sy_filter_entry *cache_filter(sy_match *m) {
    size_t n = sy_match_host_filter_count(m);
    for (size_t i = 0; i < n; i++) {
        const sy_filter_entry *e = sy_match_host_filter(m, i);
        if (strcmp(e->name, "LocalResponseCache") == 0)
            return e;
    }
    return NULL;
}

static uint64_t fnv(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

static const sy_str *header(const gw_request *q, const char *name) {
    for (size_t i = 0; i < q->sreq.header_count; i++) {
        sy_str n = q->sreq.headers[i].name;
        if (n.len == strlen(name) && strncasecmp(n.ptr, name, n.len) == 0)
            return &q->sreq.headers[i].value;
    }
    return NULL;
}

/* A directive in a Cache-Control value (case-insensitive, as a token). */
static bool directive(const char *v, size_t len, const char *d) {
    size_t dl = strlen(d);
    for (size_t i = 0; i + dl <= len; i++)
        if (strncasecmp(v + i, d, dl) == 0 &&
            (i == 0 || strchr(" ,\t", v[i - 1])) &&
            (i + dl == len || strchr(" ,\t=", v[i + dl])))
            return true;
    return false;
}

static void add_part(gw_buf *k, const sy_str *s) {
    if (s)
        gw_buf_add(k, s->ptr, s->len);
    gw_buf_add(k, "\n", 1);
}

/* The request's values of header `name` (sorted, joined by ","), as
 * "name=values\n", or "\n" when it has none: one part of an answer's key.
 * `reqh` holds the request's headers as "name:value\n" lines. */
static void add_vary_part(gw_buf *k, const char *reqh, size_t len,
                          const char *name, size_t nl) {
    const char *vals[32];
    size_t lens[32], n = 0;
    for (const char *p = reqh, *end = reqh + len; p < end && n < 32;) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        if (colon && (size_t)(colon - p) == nl &&
            strncasecmp(p, name, nl) == 0) {
            vals[n] = colon + 1;
            lens[n++] = (size_t)(eol - colon - 1);
        }
        p = eol + 1;
    }
    for (size_t i = 1; i < n; i++) /* sorted, as SCG's key */
        for (size_t j = i; j > 0; j--) {
            size_t m = lens[j] < lens[j - 1] ? lens[j] : lens[j - 1];
            int c = memcmp(vals[j], vals[j - 1], m);
            if (c > 0 || (c == 0 && lens[j] >= lens[j - 1]))
                break;
            const char *tv = vals[j];
            size_t tl = lens[j];
            vals[j] = vals[j - 1], lens[j] = lens[j - 1];
            vals[j - 1] = tv, lens[j - 1] = tl;
        }
    if (n) {
        gw_buf_add(k, name, nl);
        gw_buf_add(k, "=", 1);
    }
    for (size_t i = 0; i < n; i++) {
        if (i)
            gw_buf_add(k, ",", 1);
        gw_buf_add(k, vals[i], lens[i]);
    }
    gw_buf_add(k, "\n", 1);
}

/* The answer's key: the request's key, "#", then a part per Vary name. */
static void answer_key(gw_buf *out, const gw_buf *key, const char *names,
                       size_t nlen, const char *reqh, size_t rlen) {
    gw_buf_add(out, key->p, key->len);
    gw_buf_add(out, "#", 1);
    for (const char *p = names, *end = names + nlen; p < end;) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        add_vary_part(out, reqh, rlen, p, (size_t)(eol - p));
        p = eol + 1;
    }
}

/* The metadata entry's key: the request's key and "#meta" (an answer's
 * key has "#" and a part with "=" or "\n", never "meta"). */
static void meta_key(gw_buf *out, const gw_buf *key) {
    gw_buf_add(out, key->p, key->len);
    gw_buf_adds(out, "#meta");
}

static void entry_free(entry *e) {
    free(e->key);
    free(e->head);
    free(e->body);
    free(e);
}

static entry *find(struct gw_cache *c, const gw_buf *key, uint64_t now) {
    uint64_t h = fnv(key->p, key->len);
    for (entry **pe = &c->b[h % BUCKETS]; *pe;) {
        entry *e = *pe;
        if (e->expires_ms <= now) { /* gone stale: dropped on the way */
            *pe = e->next;
            entry_free(e);
            continue;
        }
        if (e->hash == h && e->key_len == key->len &&
            memcmp(e->key, key->p, key->len) == 0)
            return e;
        pe = &e->next;
    }
    return NULL;
}

static void answer(gw_request *q, const entry *e, uint64_t now, bool not_mod) {
    gw_client *c = q->c;
    if (c->w->draining)
        q->keep_alive = false;
    q->status = not_mod ? 304 : e->status;
    gw_buf out = {0};
    gw_buf_printf(&out, "HTTP/1.1 %d %s\r\n", q->status,
                  gw_status_text(q->status));
    if (e->head_len)
        gw_buf_add(&out, e->head, e->head_len);
    gw_buf_printf(&out, "Cache-Control: max-age=%llu\r\n",
                  (unsigned long long)((e->expires_ms - now) / 1000));
    if (!not_mod)
        gw_buf_printf(&out, "Content-Length: %zu\r\n", e->body_len);
    gw_buf_adds(&out, gw_conn_line(q));
    gw_buf_adds(&out, "\r\n");
    if (!not_mod && !q->head_req && e->body_len)
        gw_buf_add(&out, e->body, e->body_len);
    gw_client_write(c, out.p, out.len);
    c->out.failed |= out.failed;
    gw_buf_free(&out);
    gw_client_flush(c);
    q->resp_started = true;
    q->body_flow = true;
    gw_request_response_done(q);
}

bool gw_cache_lookup(gw_request *q, sy_match *m) {
    gw_cache_request_free(q);
    const sy_filter_entry *f = cache_filter(m);
    sy_str meth = q->sreq.method;
    if (!f || q->has_body || meth.len != 3 || memcmp(meth.ptr, "GET", 3))
        return false;
    uint64_t ttl, size;
    sy_error err;
    if (gw_response_cache_args(f->args, f->arg_count, &ttl, &size, &err))
        return false; /* checked at apply: cannot happen */
    if (!q->w->cache && !(q->w->cache = calloc(1, sizeof *q->w->cache)))
        return false;
    struct gw_cache_cap *cap = calloc(1, sizeof *cap);
    if (!cap)
        return false;
    cap->ttl_ms = ttl;
    cap->size = size;
    gw_buf_adds(&cap->key, q->route_id);
    gw_buf_add(&cap->key, "", 1);
    add_part(&cap->key, &q->sreq.host);
    add_part(&cap->key, &q->sreq.path);
    add_part(&cap->key, &q->sreq.query);
    add_part(&cap->key, header(q, "Authorization"));
    add_part(&cap->key, header(q, "Cookie"));
    if (cap->key.failed) {
        cap_free(cap);
        return false;
    }
    const sy_str *cc = header(q, "Cache-Control");
    uint64_t now = gw_now_ns() / 1000000;
    /* the Vary names of the answer kept for this request's key, if any,
     * then the answer under the key extended with the request's values */
    gw_buf mk = {0}, ak = {0};
    meta_key(&mk, &cap->key);
    entry *meta = mk.failed ? NULL : find(q->w->cache, &mk, now);
    gw_buf_free(&mk);
    for (size_t i = 0; i < q->sreq.header_count; i++) {
        const sy_header *hd = &q->sreq.headers[i];
        gw_buf_add(&cap->reqh, hd->name.ptr, hd->name.len);
        gw_buf_add(&cap->reqh, ":", 1);
        gw_buf_add(&cap->reqh, hd->value.ptr, hd->value.len);
        gw_buf_add(&cap->reqh, "\n", 1);
    }
    if (cap->reqh.failed) {
        cap_free(cap);
        return false;
    }
    answer_key(&ak, &cap->key, meta ? meta->head : "",
               meta ? meta->head_len : 0, cap->reqh.p, cap->reqh.len);
    entry *e = ak.failed ? NULL : find(q->w->cache, &ak, now);
    gw_buf_free(&ak);
    if (e) {
        bool nc = cc && directive(cc->ptr, cc->len, "no-cache");
        cap_free(cap);
        answer(q, e, now, nc);
        return true;
    }
    cap->on = !(cc && directive(cc->ptr, cc->len, "no-store"));
    q->cache_cap = cap;
    return false;
}

/* The next item of a comma-separated list at *p, without the blanks
 * around it (*len bytes; may be 0); *p moves past it and its comma. */
static const char *list_item(const char **p, size_t *len) {
    size_t n = strcspn(*p, ",");
    const char *s = *p;
    size_t k = n;
    while (k && (*s == ' ' || *s == '\t'))
        s++, k--;
    while (k && (s[k - 1] == ' ' || s[k - 1] == '\t'))
        k--;
    *p += n + ((*p)[n] == ',');
    *len = k;
    return s;
}

/* The answer's Vary names into cap->vary (lower case, sorted, once
 * each); false for `Vary: *` (not kept, as SCG). */
static bool vary_names(struct gw_cache_cap *cap, const char *vary) {
    char names[16][64];
    size_t n = 0;
    cap->vary.len = 0; /* this answer's (a retry's replaces an earlier) */
    for (const char *p = vary; p && *p;) {
        size_t l;
        const char *s = list_item(&p, &l);
        if (l == 1 && *s == '*')
            return false;
        if (!l || l >= sizeof names[0] || n == 16) {
            if (l)
                return false; /* more than the key can hold: not kept */
            continue;
        }
        char name[64];
        for (size_t i = 0; i < l; i++)
            name[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
        name[l] = 0;
        size_t at = 0;
        while (at < n && strcmp(names[at], name) < 0)
            at++;
        if (at < n && strcmp(names[at], name) == 0)
            continue;
        memmove(names[at + 1], names[at], (n - at) * sizeof names[0]);
        memcpy(names[at], name, l + 1);
        n++;
    }
    for (size_t i = 0; i < n; i++) {
        gw_buf_adds(&cap->vary, names[i]);
        gw_buf_add(&cap->vary, "\n", 1);
    }
    return true;
}

const char *gw_cache_head(gw_request *q, int status, const char *cc,
                          const char *vary, int64_t length, char *buf,
                          size_t cap_len) {
    struct gw_cache_cap *cap = q->cache_cap;
    if (!cap)
        return NULL;
    if (cap->on && !vary_names(cap, vary))
        cap->on = false;
    cap->status = status; /* SCG keeps 200, 206 and 301 */
    /* a body known to be over size is never kept: no max-age for it */
    if ((status != 200 && status != 206 && status != 301) || q->head_req ||
        (length >= 0 && (uint64_t)length > cap->size) ||
        (cc && (directive(cc, strlen(cc), "no-store") ||
                directive(cc, strlen(cc), "private"))))
        cap->on = false;
    if (!cap->on)
        return NULL; /* the answer goes out as it is */
    /* the upstream's directives but max-age, then the route's max-age */
    size_t o = 0;
    buf[0] = '\0';
    for (const char *p = cc; p && *p;) {
        size_t k;
        const char *s = list_item(&p, &k);
        if (k && strncasecmp(s, "max-age", 7) != 0 && o + k + 2 < cap_len) {
            memcpy(buf + o, s, k);
            o += k;
            memcpy(buf + o, ", ", 2);
            o += 2;
        }
    }
    snprintf(buf + o, cap_len - o, "max-age=%llu",
             (unsigned long long)(cap->ttl_ms / 1000));
    return buf;
}

void gw_cache_head_text(gw_request *q, const char *text, size_t len) {
    struct gw_cache_cap *cap = q->cache_cap;
    if (cap && cap->on)
        gw_buf_add(&cap->head, text, len);
}

void gw_cache_body(gw_request *q, const char *at, size_t len) {
    struct gw_cache_cap *cap = q->cache_cap;
    if (!cap || !cap->on)
        return;
    if (cap->body.len + len > cap->size) {
        cap->on = false;
        return;
    }
    gw_buf_add(&cap->body, at, len);
}

/* Make room for `bytes` among the route's answers (oldest first). */
static void make_room(struct gw_cache *c, const char *route, uint64_t size,
                      size_t bytes) {
    for (;;) {
        size_t used = 0;
        entry **oldest = NULL;
        for (size_t i = 0; i < BUCKETS; i++)
            for (entry **pe = &c->b[i]; *pe; pe = &(*pe)->next)
                if (!(*pe)->meta && strcmp((*pe)->key, route) == 0) {
                    used += (*pe)->body_len;
                    if (!oldest || (*pe)->stored_ms < (*oldest)->stored_ms)
                        oldest = pe;
                }
        if (!oldest || used + bytes <= size)
            return;
        entry *e = *oldest;
        *oldest = e->next;
        entry_free(e);
    }
}

void gw_cache_done(gw_request *q, bool complete) {
    struct gw_cache_cap *cap = q->cache_cap;
    struct gw_cache *c = q->w->cache;
    if (!cap || !cap->on || !complete || !c || cap->key.failed ||
        cap->head.failed || cap->body.failed) {
        gw_cache_request_free(q);
        return;
    }
    uint64_t now = gw_now_ns() / 1000000;
    gw_buf ak = {0}, mk = {0};
    answer_key(&ak, &cap->key, cap->vary.p, cap->vary.len, cap->reqh.p,
               cap->reqh.len);
    meta_key(&mk, &cap->key);
    entry *e = calloc(1, sizeof *e), *m = calloc(1, sizeof *m);
    if (!e || !m || ak.failed || mk.failed || cap->vary.failed) {
        free(e);
        free(m);
        gw_buf_free(&ak);
        gw_buf_free(&mk);
        gw_cache_request_free(q);
        return;
    }
    entry *old = find(c, &ak, now), *old_meta = find(c, &mk, now);
    if (old) /* another request of this worker kept it meanwhile */
        old->expires_ms = 0;
    if (old_meta) /* the Vary names of the latest answer, as SCG's */
        old_meta->expires_ms = 0;
    make_room(c, cap->key.p, cap->size, cap->body.len);
    e->key = ak.p;
    e->key_len = ak.len;
    e->head = cap->head.p;
    e->head_len = cap->head.len;
    e->body = cap->body.p;
    e->body_len = cap->body.len;
    e->status = cap->status;
    m->key = mk.p;
    m->key_len = mk.len;
    m->head = cap->vary.p;
    m->head_len = cap->vary.len;
    m->meta = true;
    entry *both[2] = {e, m};
    for (int i = 0; i < 2; i++) {
        entry *x = both[i];
        x->hash = fnv(x->key, x->key_len);
        x->stored_ms = now;
        x->expires_ms = now + cap->ttl_ms;
        x->next = c->b[x->hash % BUCKETS];
        c->b[x->hash % BUCKETS] = x;
    }
    /* the head, body and Vary names now belong to the entries */
    gw_buf_free(&cap->key);
    gw_buf_free(&cap->reqh);
    free(cap);
    q->cache_cap = NULL;
}

static void cap_free(struct gw_cache_cap *cap) {
    gw_buf_free(&cap->key);
    gw_buf_free(&cap->head);
    gw_buf_free(&cap->body);
    gw_buf_free(&cap->reqh);
    gw_buf_free(&cap->vary);
    free(cap);
}

void gw_cache_request_free(gw_request *q) {
    if (!q->cache_cap)
        return;
    cap_free(q->cache_cap);
    q->cache_cap = NULL;
}

void gw_cache_free(gw_worker *w) {
    if (!w->cache)
        return;
    for (size_t i = 0; i < BUCKETS; i++)
        while (w->cache->b[i]) {
            entry *e = w->cache->b[i];
            w->cache->b[i] = e->next;
            entry_free(e);
        }
    free(w->cache);
    w->cache = NULL;
}
