/*
 * cache.c - LocalResponseCache, as SCG runs it, per worker: a GET without
 * a body on a route with the filter is answered from the worker's cache
 * when an answer for the same route, host, path, query, Authorization and
 * Cookie is there and younger than the route's timeToLive; else it goes
 * upstream and a 200 answer is kept (its headers after the route's edits
 * and its body) unless the request says Cache-Control no-store or the
 * answer no-store or private, or its body is larger than the route's
 * size. An answer kept (or being kept) gets Cache-Control max-age (the
 * seconds the kept answer has left). A request with Cache-Control
 * no-cache for a kept answer gets 304 without a body, as SCG's. The
 * answers of one route in one worker take at most `size` bytes: the
 * oldest go first. Args checked in host_filters.c. Worker thread only.
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
} entry;

struct gw_cache {
    entry *b[BUCKETS];
};

/* One answer being kept (the request's). */
struct gw_cache_cap {
    uint64_t ttl_ms, size, hash;
    gw_buf key, head, body;
    bool on; /* still to be kept */
};

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

static void entry_free(entry *e) {
    free(e->key);
    free(e->head);
    free(e->body);
    free(e);
}

static entry *find(struct gw_cache *c, const gw_buf *key, uint64_t h,
                   uint64_t now) {
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
    q->status = not_mod ? 304 : 200;
    gw_buf out = {0};
    gw_buf_printf(&out, "HTTP/1.1 %d %s\r\n", q->status,
                  gw_status_text(q->status));
    if (e->head_len)
        gw_buf_add(&out, e->head, e->head_len);
    gw_buf_printf(&out, "Cache-Control: max-age=%llu\r\n",
                  (unsigned long long)((e->expires_ms - now) / 1000));
    if (!not_mod)
        gw_buf_printf(&out, "Content-Length: %zu\r\n", e->body_len);
    if (!q->keep_alive)
        gw_buf_adds(&out, "Connection: close\r\n");
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
        gw_buf_free(&cap->key);
        free(cap);
        return false;
    }
    cap->hash = fnv(cap->key.p, cap->key.len);
    const sy_str *cc = header(q, "Cache-Control");
    uint64_t now = gw_now_ns() / 1000000;
    entry *e = find(q->w->cache, &cap->key, cap->hash, now);
    if (e) {
        bool nc = cc && directive(cc->ptr, cc->len, "no-cache");
        gw_buf_free(&cap->key);
        free(cap);
        answer(q, e, now, nc);
        return true;
    }
    cap->on = !(cc && directive(cc->ptr, cc->len, "no-store"));
    q->cache_cap = cap;
    return false;
}

const char *gw_cache_head(gw_request *q, int status, const char *cc, char *buf,
                          size_t cap_len) {
    struct gw_cache_cap *cap = q->cache_cap;
    if (!cap)
        return NULL;
    if (status != 200 || q->head_req ||
        (cc && (directive(cc, strlen(cc), "no-store") ||
                directive(cc, strlen(cc), "private"))))
        cap->on = false;
    if (!cap->on)
        return NULL; /* the answer goes out as it is */
    /* the upstream's directives but max-age, then the route's max-age */
    size_t o = 0;
    buf[0] = '\0';
    for (const char *p = cc; p && *p;) {
        size_t n = strcspn(p, ",");
        const char *s = p;
        size_t k = n;
        while (k && (*s == ' ' || *s == '\t'))
            s++, k--;
        while (k && (s[k - 1] == ' ' || s[k - 1] == '\t'))
            k--;
        if (k && strncasecmp(s, "max-age", 7) != 0 && o + k + 2 < cap_len) {
            memcpy(buf + o, s, k);
            o += k;
            memcpy(buf + o, ", ", 2);
            o += 2;
        }
        p += n + (p[n] == ',');
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
                if (strcmp((*pe)->key, route) == 0) {
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
    entry *old = find(c, &cap->key, cap->hash, now);
    entry *e = calloc(1, sizeof *e);
    if (!e) {
        gw_cache_request_free(q);
        return;
    }
    if (old) /* another request of this worker kept it meanwhile */
        old->expires_ms = 0;
    make_room(c, cap->key.p, cap->size, cap->body.len);
    e->hash = cap->hash;
    e->key = cap->key.p;
    e->key_len = cap->key.len;
    e->head = cap->head.p;
    e->head_len = cap->head.len;
    e->body = cap->body.p;
    e->body_len = cap->body.len;
    e->stored_ms = now;
    e->expires_ms = now + cap->ttl_ms;
    e->next = c->b[e->hash % BUCKETS];
    c->b[e->hash % BUCKETS] = e;
    free(cap); /* its buffers now belong to the entry */
    q->cache_cap = NULL;
}

void gw_cache_request_free(gw_request *q) {
    struct gw_cache_cap *cap = q->cache_cap;
    if (!cap)
        return;
    gw_buf_free(&cap->key);
    gw_buf_free(&cap->head);
    gw_buf_free(&cap->body);
    free(cap);
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
