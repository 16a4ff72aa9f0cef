/*
 * ngx_http_switchyard_balancer.c - `switchyard_balancer` in an upstream
 * block: nginx's upstream machinery (keepalive, proxy_next_upstream,
 * tries, timeouts) around the instance the matched route chose. The first
 * attempt goes where the request phase's selection went; each retry
 * matches the request again on the same snapshot and selects another
 * instance, excluding the ones tried (the library's exclude list). Every
 * attempt's outcome feeds the passive health shared by all workers
 * through the zone (one ejection for the whole server, logged at notice
 * with its recovery).
 */
#include "ngx_http_switchyard.h"

#include <string.h>

#define SW_MAX_TRIES 8

typedef struct {
    ngx_http_request_t *r;
    sw_req_ctx_t *ctx;
    uint32_t attempts;               /* nginx's tries taken */
    uint32_t ntried;                 /* in tried: attempts, unresolved */
    const char *tried[SW_MAX_TRIES]; /* instance ids, r->pool */
    ngx_str_t name;                  /* host:port of the current attempt */
    const char *instance;            /* of the current attempt, or NULL */
} sw_peer_t;

/* sw_init_peer places it in the request's context */
_Static_assert(sizeof(sw_peer_t) <= SW_PEER_WORDS * sizeof(uint64_t),
               "sw_peer_t does not fit in sw_req_ctx_t.peer");

/* ---- addresses: host:port to sockaddr, cached per worker ---- */

typedef struct sw_addr_s sw_addr_t;
struct sw_addr_s {
    sw_addr_t *next;
    ngx_str_t key; /* host:port */
    socklen_t socklen;
    struct sockaddr_storage sa;
    /* "http://" and "https://" before key, made on first use: a routed
     * request's $switchyard_upstream (sw_target_addr) */
    ngx_str_t up[2];
};

#define SW_ADDR_BUCKETS 4096
#define SW_ADDR_MAX 65536
static sw_addr_t *sw_addrs[SW_ADDR_BUCKETS];
static ngx_uint_t sw_addr_count;

/* The bucket of a host:port, eight bytes a step (ngx_hash_key's byte a
 * step cost a request ~100 instructions). */
static ngx_uint_t sw_addr_bucket(const u_char *p, size_t len) {
    uint64_t h = len, w;

    for (; len >= 8; p += 8, len -= 8) {
        ngx_memcpy(&w, p, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
        h ^= h >> 29;
    }
    for (w = 0; len; len--)
        w = (w << 8) | p[len - 1];
    h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
    return (ngx_uint_t)(h >> 32) % SW_ADDR_BUCKETS;
}

/* The cached address of "host:port" in bucket h, or NULL. */
static sw_addr_t *sw_addr_cached(ngx_uint_t h, const ngx_str_t *key) {
    for (sw_addr_t *a = sw_addrs[h]; a; a = a->next)
        if (a->key.len == key->len &&
            ngx_memcmp(a->key.data, key->data, key->len) == 0)
            return a;
    return NULL;
}

/* Names that did not resolve, remembered for SW_ADDR_RETRY_MS: a name
 * that does not resolve costs a worker one blocking lookup per 10 s, not
 * one per request (each stalled the worker's event loop: a service of
 * such names took a worker's requests, admin changes included, down to a
 * few a second). */
#define SW_ADDR_FAILED 16
#define SW_ADDR_RETRY_MS 10000
static struct {
    u_char key[256];
    size_t len;
    ngx_msec_t until;
} sw_addr_failed[SW_ADDR_FAILED];
static ngx_uint_t sw_addr_failed_next;

static ngx_flag_t sw_addr_failed_recently(const ngx_str_t *key) {
    for (ngx_uint_t i = 0; i < SW_ADDR_FAILED; i++)
        if (sw_addr_failed[i].len == key->len &&
            (ngx_msec_int_t)(sw_addr_failed[i].until - ngx_current_msec) > 0 &&
            ngx_memcmp(sw_addr_failed[i].key, key->data, key->len) == 0)
            return 1;
    return 0;
}

static void sw_addr_failed_note(const ngx_str_t *key) {
    if (key->len > sizeof sw_addr_failed[0].key)
        return;
    ngx_uint_t i = sw_addr_failed_next++ % SW_ADDR_FAILED;
    ngx_memcpy(sw_addr_failed[i].key, key->data, key->len);
    sw_addr_failed[i].len = key->len;
    sw_addr_failed[i].until = ngx_current_msec + SW_ADDR_RETRY_MS;
}

/* The address of "host:port" (an IP literal, or a name resolved once per
 * worker, blocking: give instances and URLs as addresses to avoid it).
 * Once the cache is full, an address not in it is resolved for this
 * request only, in the request's pool. */
static sw_addr_t *sw_addr(ngx_http_request_t *r, ngx_log_t *log,
                          ngx_str_t *key) {
    ngx_uint_t h = sw_addr_bucket(key->data, key->len);
    sw_addr_t *a = sw_addr_cached(h, key);
    ngx_url_t u;
    ngx_pool_t *pool;

    if (a)
        return a;
    if (sw_addr_failed_recently(key)) {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "switchyard_balancer: cannot resolve \"%V\": its "
                      "lookup failed less than %d s ago (not looked up "
                      "again yet)",
                      key, SW_ADDR_RETRY_MS / 1000);
        return NULL;
    }
    pool = ngx_create_pool(1024, log);
    if (pool == NULL)
        return NULL;
    ngx_memzero(&u, sizeof u);
    u.url = *key;
    u.default_port = 80;
    if (ngx_parse_url(pool, &u) != NGX_OK || u.naddrs == 0) {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "switchyard_balancer: cannot resolve \"%V\": %s", key,
                      u.err ? u.err : "no address");
        ngx_destroy_pool(pool);
        sw_addr_failed_note(key);
        return NULL;
    }
    a = sw_addr_count < SW_ADDR_MAX ? ngx_alloc(sizeof *a + key->len, log)
                                    : ngx_palloc(r->pool, sizeof *a + key->len);
    if (a == NULL) {
        ngx_destroy_pool(pool);
        return NULL;
    }
    a->key.data = (u_char *)(a + 1);
    a->key.len = key->len;
    ngx_str_null(&a->up[0]);
    ngx_str_null(&a->up[1]);
    ngx_memcpy(a->key.data, key->data, key->len);
    a->socklen = u.addrs[0].socklen;
    ngx_memcpy(&a->sa, u.addrs[0].sockaddr, u.addrs[0].socklen);
    ngx_destroy_pool(pool);
    a->next = NULL;
    if (sw_addr_count < SW_ADDR_MAX) {
        a->next = sw_addrs[h];
        sw_addrs[h] = a;
        sw_addr_count++;
    }
    return a;
}

/* A routed request's target to its cached address without a string or a
 * hash: a worker's hint per (snapshot generation, the target's host
 * string, port). The host string is the snapshot's, unchanged while it
 * lives, and a newer snapshot has a newer generation: a hint of another
 * generation is never taken, whatever its pointer (as sw_route_facts). */
#define SW_ADDR_HINTS 256
typedef struct {
    uint64_t gen;
    const char *host;
    uint32_t port;
    sw_addr_t *a;
} sw_addr_hint_t;
static sw_addr_hint_t sw_hints[SW_ADDR_HINTS];

/* "http://" or "https://" and the entry's host:port, in worker memory
 * (the entry is never freed). */
static ngx_str_t *sw_addr_up(sw_addr_t *a, ngx_uint_t https) {
    static const char *pre[2] = {"http://", "https://"};
    ngx_str_t *up = &a->up[https];
    size_t pl = 7 + https;

    if (up->data)
        return up;
    up->data = ngx_alloc(pl + a->key.len, ngx_cycle->log);
    if (up->data == NULL)
        return NULL;
    ngx_memcpy(up->data, pre[https], pl);
    ngx_memcpy(up->data + pl, a->key.data, a->key.len);
    up->len = pl + a->key.len;
    return up;
}

const void *sw_target_addr(const sy_target *t, uint64_t gen, ngx_uint_t https,
                           ngx_str_t *upstream) {
    sw_addr_hint_t *hint =
        &sw_hints[((((uintptr_t)t->host * 0x9E3779B97F4A7C15ULL) >> 32) ^
                   t->port) %
                  SW_ADDR_HINTS];
    sw_addr_t *a;
    ngx_str_t *up;

    if (hint->gen == gen && hint->host == t->host && hint->port == t->port) {
        a = hint->a;
    } else {
        /* "host:port", "[host]:port" for IPv6 (sw_peer_set's key) */
        u_char buf[300];
        ngx_str_t key;
        size_t hl = ngx_strlen(t->host);
        bool v6 =
            ngx_strlchr((u_char *)t->host, (u_char *)t->host + hl, ':') != NULL;
        if (hl + 10 > sizeof buf)
            return NULL;
        key.data = buf;
        key.len = ngx_sprintf(buf, v6 ? "[%s]:%uD" : "%s:%uD", t->host,
                              (uint32_t)t->port) -
                  buf;
        /* not resolved yet: the balancer resolves it (sw_get_peer) */
        a = sw_addr_cached(sw_addr_bucket(key.data, key.len), &key);
        if (a == NULL)
            return NULL;
        hint->gen = gen;
        hint->host = t->host;
        hint->port = t->port;
        hint->a = a;
    }
    up = sw_addr_up(a, https);
    if (up == NULL)
        return NULL;
    *upstream = *up;
    return a;
}

ngx_int_t sw_upstream_resolve(ngx_http_request_t *r, ngx_str_t *upstream) {
    u_char *b = upstream->data, *e = b + upstream->len, *p, *colon, *out;
    ngx_str_t key;
    sw_addr_t *a;
    size_t sl;

    p = ngx_strlcasestrn(b, e, (u_char *)"://", 3 - 1);
    if (p == NULL)
        return NGX_DECLINED;
    sl = p + 3 - b;
    key.data = p + 3;
    key.len = e - key.data;
    colon = key.len ? ngx_strlchr(key.data, e, ':') : NULL;
    if (key.len == 0 || key.data[0] == '[' || colon == NULL ||
        ngx_inet_addr(key.data, colon - key.data) != INADDR_NONE)
        return NGX_DECLINED; /* an IPv6 or IPv4 address */
    a = sw_addr(r, r->connection->log, &key);
    if (a == NULL)
        return NGX_ERROR;
    out = ngx_pnalloc(r->pool, sl + NGX_SOCKADDR_STRLEN);
    if (out == NULL)
        return NGX_ERROR;
    ngx_memcpy(out, b, sl);
    upstream->len = sl + ngx_sock_ntop((struct sockaddr *)&a->sa, a->socklen,
                                       out + sl, NGX_SOCKADDR_STRLEN, 1);
    upstream->data = out;
    return NGX_OK;
}

/* ---- the shared passive health table ---- */

static uint64_t sw_health_key(const char *service, const char *id) {
    uint64_t h = sw_hash((u_char *)service, ngx_strlen(service), SW_HASH_INIT);
    h = sw_hash((u_char *)"\0", 1, h);
    h = sw_hash((u_char *)id, ngx_strlen(id), h);
    return h < 2 ? h + 2 : h;
}

static int64_t sw_health_now(void) {
    ngx_time_t *tp = ngx_timeofday();
    return (int64_t)tp->sec * 1000 + (int64_t)tp->msec;
}

/* The entry of (service, id); create: claim a free one. NULL when the
 * table is full around its slot or the names are too long. */
static sw_health_t *sw_health_find(sw_shm_t *sh, const char *service,
                                   const char *id, bool create) {
    size_t sl = ngx_strlen(service), il = ngx_strlen(id);
    ngx_atomic_uint_t key;

    if (sl >= SW_HEALTH_NAME || il >= SW_HEALTH_NAME)
        return NULL;
    key = (ngx_atomic_uint_t)sw_health_key(service, id);
    for (ngx_uint_t probe = 0; probe < 64; probe++) {
        sw_health_t *e = &sh->health[(key + probe) % SW_HEALTH_SLOTS];
        ngx_atomic_uint_t k = e->key;
        if (k == key && ngx_strcmp(e->service, service) == 0 &&
            ngx_strcmp(e->id, id) == 0)
            return e;
        if (k == 0) {
            if (!create)
                return NULL;
            if (!ngx_atomic_cmp_set(&e->key, 0, 1))
                continue;
            (void)ngx_atomic_fetch_add(&sh->health_claimed, 1);
            ngx_memcpy(e->service, service, sl + 1);
            ngx_memcpy(e->id, id, il + 1);
            ngx_memory_barrier();
            e->key = key;
            return e;
        }
    }
    return NULL;
}

const sw_health_t *sw_health_get(const char *service, const char *id) {
    return sw_worker.zone
               ? sw_health_find(sw_worker.zone->sh, service, id, false)
               : NULL;
}

void sw_health_report(ngx_log_t *log, const char *service, const char *id,
                      sy_outcome outcome) {
    sw_shm_t *sh;
    sw_health_t *e;
    int64_t now;

    if (service == NULL || id == NULL || sw_worker.zone == NULL)
        return;
    sh = sw_worker.zone->sh;
    /* the common case touches the zone only to look, and only when some
     * instance ever failed */
    if (outcome == SY_OUTCOME_SUCCESS && sh->health_claimed == 0)
        return;
    now = sw_health_now();
    if (outcome == SY_OUTCOME_SUCCESS) {
        e = sw_health_find(sh, service, id, false);
        if (e == NULL)
            return;
        if (e->failures)
            e->failures = 0;
        if (e->ejected && (int64_t)e->until_ms <= now &&
            ngx_atomic_cmp_set(&e->ejected, 1, 0)) {
            (void)ngx_atomic_fetch_add(&sh->ejected_count, -1);
            /* back and well: its next ejection is one step shorter, as the
             * routers' passive health does (service_health.c); only the
             * worker that cleared the ejection takes the step */
            ngx_atomic_uint_t n = e->ejections;
            while (n && !ngx_atomic_cmp_set(&e->ejections, n, n - 1))
                n = e->ejections;
            ngx_log_error(NGX_LOG_NOTICE, log, 0,
                          "switchyard: instance \"%s\" of service \"%s\" "
                          "recovered (it answered after its ejection)",
                          id, service);
        }
        return;
    }
    e = sw_health_find(sh, service, id, true);
    if (e == NULL)
        return;
    ngx_atomic_uint_t f = ngx_atomic_fetch_add(&e->failures, 1) + 1;
    ngx_atomic_uint_t until = e->until_ms;
    bool probation = e->ejected && (int64_t)until <= now;
    if (f < SW_EJECT_FAILURES && !probation)
        return;
    if (e->ejected && !probation)
        return; /* ejected already (a late report) */
    /* one worker wins the ejection: the one that moves until_ms */
    ngx_atomic_uint_t n = e->ejections + 1;
    int64_t ms = (int64_t)sw_worker.mcf->eject_ms *
                 (int64_t)ngx_min(n, SW_EJECT_MAX_TIMES);
    if (!ngx_atomic_cmp_set(&e->until_ms, until, (ngx_atomic_uint_t)(now + ms)))
        return;
    e->ejections = n;
    e->failures = 0;
    if (ngx_atomic_cmp_set(&e->ejected, 0, 1))
        (void)ngx_atomic_fetch_add(&sh->ejected_count, 1);
    ngx_log_error(NGX_LOG_NOTICE, log, 0,
                  "switchyard: instance \"%s\" of service \"%s\" ejected for "
                  "%L ms (%s, ejection %uA)",
                  id, service, ms,
                  probation ? "it failed again after its ejection"
                            : "5 consecutive failures",
                  n);
}

size_t sw_health_ejected(const char *service, const char **ids, size_t max) {
    sw_shm_t *sh;
    size_t n = 0;
    int64_t now;

    if (sw_worker.zone == NULL)
        return 0;
    sh = sw_worker.zone->sh;
    if (sh->ejected_count == 0)
        return 0;
    now = sw_health_now();
    for (ngx_uint_t i = 0; i < SW_HEALTH_SLOTS && n < max; i++) {
        sw_health_t *e = &sh->health[i];
        if (e->key > 1 && e->ejected && (int64_t)e->until_ms > now &&
            ngx_strcmp(e->service, service) == 0)
            ids[n++] = (const char *)e->id;
    }
    return n;
}

/* ---- the balancer ---- */

/* Point the connection at the target's host:port. */
static ngx_int_t sw_peer_set(ngx_peer_connection_t *pc, sw_peer_t *p,
                             const char *host, uint16_t port) {
    size_t hl = ngx_strlen(host);
    bool v6 = ngx_strlchr((u_char *)host, (u_char *)host + hl, ':') != NULL;
    sw_addr_t *a;

    p->name.data = ngx_pnalloc(p->r->pool, hl + 10);
    if (p->name.data == NULL)
        return NGX_ERROR;
    p->name.len = ngx_sprintf(p->name.data, v6 ? "[%s]:%uD" : "%s:%uD", host,
                              (uint32_t)port) -
                  p->name.data;
    a = sw_addr(p->r, pc->log, &p->name);
    if (a == NULL)
        return NGX_DECLINED; /* logged */
    pc->sockaddr = (struct sockaddr *)&a->sa;
    pc->socklen = a->socklen;
    pc->name = &p->name;
    return NGX_OK;
}

/* True for the scheme "https" or "wss" (alone, or of a URL). */
static bool sw_secure(const u_char *p, size_t len) {
    const u_char *c = ngx_strlchr((u_char *)p, (u_char *)p + len, ':');
    size_t n = c ? (size_t)(c - p) : len;

    return (n == 5 && ngx_strncmp(p, "https", 5) == 0) ||
           (n == 3 && ngx_strncmp(p, "wss", 3) == 0);
}

/* The attempt's connection speaks TLS when its target is https. The
 * location's proxy_pass has variables ($switchyard_uri), so nginx made it
 * an SSL context whatever its scheme (as for any proxy_pass with
 * variables): the target's scheme decides, per attempt. A configuration
 * with a proxy_pass http://UPSTREAM; (no context) refuses https targets
 * at load (sw_host_runs): the 500 below is a guard, not a path. */
static ngx_inline ngx_int_t sw_peer_ssl(ngx_http_request_t *r,
                                        sw_req_ctx_t *ctx, bool https) {
    ngx_http_upstream_t *u = r->upstream;

#if (NGX_HTTP_SSL)
    if (!https || u->conf->ssl)
        u->ssl = https;
#endif
    if (https == (u->ssl != 0))
        return NGX_OK;
    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "switchyard_balancer: route \"%V\" goes to %V, but the "
                  "location has no SSL context for it (a proxy_pass without "
                  "variables): answering 500",
                  &ctx->route, &ctx->upstream);
    return NGX_ERROR;
}

/* An instance whose host does not resolve failed as a refused
 * connection would: its failure goes to the shared health (five eject
 * it, so the blocking lookup is not made per request) and it is
 * excluded; the balancer takes another instance without using one of
 * nginx's tries. */
static void sw_unresolved(ngx_peer_connection_t *pc, sw_peer_t *p,
                          const char *instance) {
    sw_health_report(pc->log, (char *)p->ctx->service.data, instance,
                     SY_OUTCOME_CONNECT_FAILURE);
    if (p->ntried < SW_MAX_TRIES)
        p->tried[p->ntried++] = instance;
}

static ngx_int_t sw_get_peer(ngx_peer_connection_t *pc, void *data) {
    sw_peer_t *p = data;
    sw_req_ctx_t *ctx = p->ctx;
    ngx_int_t rc;

    pc->cached = 0;
    pc->connection = NULL;
    if ((p->attempts == 0 || ctx->service.len == 0) && ctx->addr) {
        /* the request phase's selection, its address known then */
        sw_addr_t *a = (sw_addr_t *)ctx->addr;
        p->name = a->key;
        pc->sockaddr = (struct sockaddr *)&a->sa;
        pc->socklen = a->socklen;
        pc->name = &p->name;
        p->instance = ctx->instance.len ? (char *)ctx->instance.data : NULL;
    } else if (p->attempts == 0 || ctx->service.len == 0) {
        /* the request phase's selection; a URL has one address (Retry
         * tries it again) */
        u_char *h = ctx->upstream.data, *end = h + ctx->upstream.len;
        u_char *s = ngx_strlchr(h, end, ':');
        ngx_str_t key;
        if (s == NULL || end - s < 4) {
            ngx_log_error(NGX_LOG_ERR, pc->log, 0,
                          "switchyard_balancer: route \"%V\": upstream "
                          "\"%V\" is not scheme://host:port",
                          &ctx->route, &ctx->upstream);
            return NGX_ERROR;
        }
        key.data = s + 3; /* after "://" */
        key.len = end - key.data;
        sw_addr_t *a = sw_addr(p->r, pc->log, &key);
        if (a == NULL && ctx->service.len && ctx->instance.len) {
            sw_unresolved(pc, p, (char *)ctx->instance.data);
            goto another;
        }
        if (a == NULL)
            return NGX_ERROR;
        p->name = key;
        pc->sockaddr = (struct sockaddr *)&a->sa;
        pc->socklen = a->socklen;
        pc->name = &p->name;
        p->instance = ctx->instance.len ? (char *)ctx->instance.data : NULL;
    } else {
        /* a retry: another instance of the route's service */
        sy_target t;
    another:
        if (p->ntried >= SW_MAX_TRIES)
            return NGX_BUSY;
        rc = sw_reselect(p->r, ctx, p->tried, p->ntried, &t);
        if (rc == NGX_DECLINED) {
            ngx_log_error(NGX_LOG_WARN, pc->log, 0,
                          "switchyard_balancer: route \"%V\": no instance of "
                          "service \"%V\" left to retry on",
                          &ctx->route, &ctx->service);
            return NGX_BUSY;
        }
        if (rc != NGX_OK || t.instance_id == NULL) {
            ngx_log_error(NGX_LOG_ERR, pc->log, 0,
                          "switchyard_balancer: route \"%V\": the retry's "
                          "match failed",
                          &ctx->route);
            return NGX_ERROR;
        }
        bool https = sw_secure((u_char *)t.scheme, ngx_strlen(t.scheme));
        ngx_str_t id = {ngx_strlen(t.instance_id), NULL};
        id.data = ngx_pnalloc(p->r->pool, id.len + 1);
        if (id.data == NULL)
            return NGX_ERROR;
        ngx_memcpy(id.data, t.instance_id, id.len + 1);
        rc = sw_peer_set(pc, p, t.host, t.port);
        if (rc == NGX_DECLINED) {
            sw_unresolved(pc, p, (char *)id.data);
            goto another;
        }
        if (rc != NGX_OK || sw_peer_ssl(p->r, ctx, https) != NGX_OK)
            return NGX_ERROR;
        ctx->instance = id; /* $switchyard_instance: the last attempt's */
        p->instance = (char *)id.data;
        /* the upstream variable follows too */
        u_char *up = ngx_pnalloc(p->r->pool, p->name.len + 8);
        if (up) {
            ctx->upstream.len =
                ngx_sprintf(up, "%s://%V", t.scheme, &p->name) - up;
            ctx->upstream.data = up;
            ctx->addr = NULL; /* (sw_target_addr's, of the old one) */
            ctx->https = https;
        }
    }
    if (p->instance && p->ntried < SW_MAX_TRIES)
        p->tried[p->ntried++] = p->instance;
    p->attempts++;
    return NGX_OK;
}

static void sw_free_peer(ngx_peer_connection_t *pc, void *data,
                         ngx_uint_t state) {
    sw_peer_t *p = data;
    ngx_http_upstream_t *u = p->r->upstream;
    sy_outcome outcome;

    if (pc->tries)
        pc->tries--;
    if (p->instance == NULL || p->ctx->service.len == 0)
        return;
    if ((state & NGX_PEER_FAILED) && p->ctx->answered) {
        /* an answer handed on by Retry or a breaker: its status says */
        outcome =
            u->headers_in.status_n >= 500 ? SY_OUTCOME_5XX : SY_OUTCOME_SUCCESS;
    } else if (state & NGX_PEER_FAILED) {
        if (u->state && u->state->status >= 500 &&
            u->state->status != NGX_HTTP_BAD_GATEWAY &&
            u->state->status != NGX_HTTP_GATEWAY_TIME_OUT)
            outcome = SY_OUTCOME_5XX;
        else if (u->state && u->state->connect_time == (ngx_msec_t)-1)
            outcome = SY_OUTCOME_CONNECT_FAILURE;
        else if (u->peer.connection && u->peer.connection->read->timedout)
            outcome = SY_OUTCOME_TIMEOUT;
        else
            outcome = SY_OUTCOME_5XX;
    } else {
        outcome =
            u->headers_in.status_n >= 500 ? SY_OUTCOME_5XX : SY_OUTCOME_SUCCESS;
    }
    if (p->attempts == 1 && p->ctx->target.health && sw_worker.router)
        sy_router_report_outcome(sw_worker.router, &p->ctx->target, outcome);
    /* (a success when no instance ever failed has nothing to look up) */
    if (outcome != SY_OUTCOME_SUCCESS ||
        (sw_worker.zone && sw_worker.zone->sh->health_claimed))
        sw_health_report(pc->log, (char *)p->ctx->service.data, p->instance,
                         outcome);
}

#if (NGX_HTTP_SSL)
/* TLS to an https target: nginx asks the balancer for a session to
 * resume and hands it the new one; targets change per request, so none
 * is kept (each TLS connection makes a full handshake; keepalive keeps
 * the connection itself). */
static ngx_int_t sw_set_session(ngx_peer_connection_t *pc, void *data) {
    (void)pc;
    (void)data;
    return NGX_OK;
}

static void sw_save_session(ngx_peer_connection_t *pc, void *data) {
    (void)pc;
    (void)data;
}
#endif

/* The form without variables, `proxy_pass http://UPSTREAM;`: nginx built
 * the request line with the client's URI before it asks the balancer
 * (ngx_http_upstream_init_request runs create_request, then peer.init),
 * and evaluates no variable, parses no URL and searches no upstream block
 * by name per request. The route's path and query replace that URI here,
 * as the variable form would send them (an empty one leaves nginx's, one
 * that starts with '?' gets a '/' before it, as ngx_http_proxy_eval
 * does). The line is the proxy's method, a space, the URI and " HTTP/1.0"
 * or " HTTP/1.1" CRLF, first in the header buffer. A URI no longer than
 * the old one is written in place, ending where the old one ended, and
 * the buffer then starts at the method moved before it (no allocation, no
 * buffer added to the chain: each costs nginx's output chain more than
 * the copy); a longer one gets the buffer copied. A retry resends the
 * buffer from its start (ngx_http_upstream_reinit): the new line. */
static ngx_int_t sw_request_line(ngx_http_request_t *r, sw_req_ctx_t *ctx) {
    ngx_chain_t *cl = r->upstream->request_bufs;
    ngx_buf_t *b = cl ? cl->buf : NULL;
    const size_t vlen = sizeof(" HTTP/1.1\r\n") - 1;
    u_char *eol = NULL, *sp = NULL, *ver = NULL, *p;
    size_t mlen, slash, nlen;

    if (ctx->uri.len == 0)
        return NGX_OK;
    if (b && !b->in_file && b->pos && b->last > b->pos) {
        eol = memchr(b->pos, '\n', b->last - b->pos);
        sp = eol ? memchr(b->pos, ' ', eol - b->pos) : NULL;
    }
    if (sp && (size_t)(eol + 1 - sp) > vlen) {
        ver = eol + 1 - vlen;
        if (ngx_strncmp(ver, " HTTP/1.", 8) != 0)
            ver = NULL;
    }
    if (ver == NULL) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "switchyard_balancer: route \"%V\": the upstream "
                      "request has no request line to send the route's "
                      "path in (a proxy_pass without variables): answering "
                      "500",
                      &ctx->route);
        return NGX_ERROR;
    }
    mlen = sp + 1 - b->pos; /* "GET " */
    slash = ctx->uri.data[0] == '?';
    nlen = slash + ctx->uri.len;
    if (nlen <= (size_t)(ver - (sp + 1))) {
        p = ver - nlen;
        ngx_memcpy(p + slash, ctx->uri.data, ctx->uri.len);
        if (slash)
            *p = '/';
        ngx_memmove(p - mlen, b->pos, mlen);
        b->start = b->pos = p - mlen;
        return NGX_OK;
    }
    p = ngx_pnalloc(r->pool, mlen + nlen + (b->last - ver));
    if (p == NULL)
        return NGX_ERROR;
    b->start = p;
    p = ngx_cpymem(p, b->pos, mlen);
    if (slash)
        *p++ = '/';
    p = ngx_cpymem(p, ctx->uri.data, ctx->uri.len);
    p = ngx_cpymem(p, ver, b->last - ver);
    b->pos = b->start;
    b->last = b->end = p;
    return NGX_OK;
}

static ngx_int_t sw_init_peer(ngx_http_request_t *r,
                              ngx_http_upstream_srv_conf_t *us) {
    sw_req_ctx_t *ctx = ngx_http_get_module_ctx(r, ngx_http_switchyard_module);
    ngx_http_upstream_t *u = r->upstream;
    sw_peer_t *p;
    bool bare;

    if (ctx == NULL || ctx->kind != SW_CTX_REQUEST || ctx->upstream.len == 0) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "switchyard_balancer: upstream \"%V\" used for a "
                      "request that switchyard did not route (the location "
                      "needs \"switchyard on\")",
                      &us->host);
        return NGX_ERROR;
    }
    /* run or refuse: the request line and the Host come from the location
     * (proxy_pass, proxy_set_header), evaluated before this; one that
     * does not send $switchyard_uri and $switchyard_host would send the
     * client's path and another Host, the route's filters ignored. A
     * proxy_pass without variables (u->resolved not made) has its path
     * and query set here. */
    bare = u->resolved == NULL;
    if ((!bare && !ctx->uri_read) || !ctx->host_read) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "switchyard_balancer: route \"%V\" refused: the "
                      "location does not send %s, so the route's filters "
                      "would be ignored",
                      &ctx->route,
                      !bare && !ctx->uri_read
                          ? "$switchyard_uri (proxy_pass "
                            "http://UPSTREAM$switchyard_uri)"
                          : "$switchyard_host (proxy_set_header Host "
                            "$switchyard_host)");
        return NGX_ERROR;
    }
    if (bare && sw_request_line(r, ctx) != NGX_OK)
        return NGX_ERROR;
    if (sw_peer_ssl(r, ctx, ctx->https) != NGX_OK)
        return NGX_ERROR;
    if (!ctx->peer_used) { /* (once a request but for a corner case) */
        ctx->peer_used = 1;
        p = (sw_peer_t *)ctx->peer;
        /* (tried[] is read only below ntried) */
        p->attempts = 0;
        p->ntried = 0;
        ngx_str_null(&p->name);
        p->instance = NULL;
    } else if ((p = ngx_pcalloc(r->pool, sizeof *p)) == NULL) {
        return NGX_ERROR;
    }
    p->r = r;
    p->ctx = ctx;
    ctx->balanced = 1;
    u->peer.data = p;
    u->peer.get = sw_get_peer;
    u->peer.free = sw_free_peer;
#if (NGX_HTTP_SSL)
    u->peer.set_session = sw_set_session;
    u->peer.save_session = sw_save_session;
#endif
    /* lb:// routes try other instances (nginx caps this with
     * proxy_next_upstream_tries); a URL has one address */
    u->peer.tries = ctx->service.len ? SW_MAX_TRIES : 1;
    if (ctx->needs_balancer) {
        /* the route's timeouts, Retry and breaker: a copy of the
         * location's settings for this request */
        ngx_http_upstream_conf_t *conf = ngx_palloc(r->pool, sizeof *conf);
        if (conf == NULL)
            return NGX_ERROR;
        *conf = *u->conf;
        if (ctx->connect_timeout)
            conf->connect_timeout = ctx->connect_timeout;
        if (ctx->response_timeout)
            conf->read_timeout = ctx->response_timeout;
        sw_policy_conf(ctx, conf, &u->peer);
        sw_policy_hook(r, ctx);
        /* an lb:// service's attempts each exclude the instances tried
         * (tried[] holds SW_MAX_TRIES); a URL's address is tried again
         * as often as Retry asks */
        if (ctx->service.len && u->peer.tries > SW_MAX_TRIES)
            u->peer.tries = SW_MAX_TRIES;
        if (ctx->retry) /* the tries counted by sw_process_header */
            ctx->tries = u->peer.tries;
        u->conf = conf;
    }
    return NGX_OK;
}

static ngx_int_t sw_init_upstream(ngx_conf_t *cf,
                                  ngx_http_upstream_srv_conf_t *us) {
    if (us->servers && us->servers->nelts > 1) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "upstream \"%V\" with switchyard_balancer takes no "
                      "server: the routes choose where requests go",
                      &us->host);
        return NGX_ERROR;
    }
    /* nginx's upstream zone copies the block's round-robin peers into
     * shared memory, which this block does not have (its peer data is
     * not round-robin's: nginx -t crashed); the targets' health is
     * shared through the switchyard zone already. Checked here, once
     * every directive of the block is read, so either order is refused. */
    if (us->shm_zone) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "upstream \"%V\" with switchyard_balancer takes no "
                      "zone: its peers are the routes' targets, whose health "
                      "the switchyard zone shares",
                      &us->host);
        return NGX_ERROR;
    }
    us->peer.init = sw_init_peer;
    return NGX_OK;
}

/* (keepalive replaces peer.init_upstream: the blocks are listed) */
ngx_flag_t sw_is_balancer(sw_main_conf_t *mcf,
                          ngx_http_upstream_srv_conf_t *us) {
    ngx_http_upstream_srv_conf_t **b = mcf->balancers.elts;

    for (ngx_uint_t i = 0; i < mcf->balancers.nelts; i++)
        if (b[i] == us)
            return 1;
    return 0;
}

char *sw_balancer(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    ngx_http_upstream_srv_conf_t *us =
        ngx_http_conf_get_module_srv_conf(cf, ngx_http_upstream_module);
    sw_main_conf_t *mcf =
        ngx_http_conf_get_module_main_conf(cf, ngx_http_switchyard_module);
    ngx_http_upstream_server_t *s;
    ngx_http_upstream_srv_conf_t **ups;

    if (us->peer.init_upstream == sw_init_upstream)
        return "is duplicate";
    if (us->peer.init_upstream) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "switchyard_balancer in upstream \"%V\" must come "
                           "before keepalive and replaces any other balancer",
                           &us->host);
        return NGX_CONF_ERROR;
    }
    if (us->servers && us->servers->nelts) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "upstream \"%V\" with switchyard_balancer takes no "
                           "server: the routes choose where requests go",
                           &us->host);
        return NGX_CONF_ERROR;
    }
    if (mcf->balancers.elts == NULL &&
        ngx_array_init(&mcf->balancers, cf->pool, 2, sizeof(void *)) != NGX_OK)
        return NGX_CONF_ERROR;
    ups = ngx_array_push(&mcf->balancers);
    if (ups == NULL)
        return NGX_CONF_ERROR;
    *ups = us;
    us->peer.init_upstream = sw_init_upstream;
    us->flags = NGX_HTTP_UPSTREAM_CREATE;
    mcf->balancer = 1;
    /* nginx wants a server in every upstream block: a placeholder that
     * no request uses (the balancer never reads the server list) */
    if (us->servers == NULL) {
        us->servers =
            ngx_array_create(cf->pool, 1, sizeof(ngx_http_upstream_server_t));
        if (us->servers == NULL)
            return NGX_CONF_ERROR;
    }
    s = ngx_array_push(us->servers);
    if (s == NULL)
        return NGX_CONF_ERROR;
    ngx_memzero(s, sizeof *s);
    ngx_str_set(&s->name, "switchyard");
    mcf->used = 1;
    return NGX_CONF_OK;
}
