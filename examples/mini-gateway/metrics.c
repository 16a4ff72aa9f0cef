/*
 * metrics.c - the gateway's own series for GET /metrics: requests by route
 * and status, the request latency histogram, connection gauges. Each
 * worker counts into its own hashed table under its own (uncontended)
 * lock; the admin thread sums them when scraped.
 *
 * The lock is a spin flag (one xchg, one release store), not a mutex: a
 * worker holds it for a request's few counts, and the uncontended
 * pthread mutex took ~50 instructions and two locked operations a
 * request; a taker that spins yields every 64 turns (the admin's sum,
 * its holder for longest, may be switched out).
 */
#define _DEFAULT_SOURCE
#include "gw.h"
#include "utf8.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

static void m_lock(gw_wmetrics *m) {
    for (unsigned spins = 0;
         atomic_exchange_explicit(&m->lock, 1, memory_order_acquire);)
        if (++spins % 64 == 0)
            sched_yield();
}

static void m_unlock(gw_wmetrics *m) {
    atomic_store_explicit(&m->lock, 0, memory_order_release);
}

const double gw_lat_bounds_s[GW_LAT_BUCKETS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1,    0.25,  0.5,    1,     2.5,  5,     10};

void gw_metrics_init(gw_wmetrics *m) {
    memset(m, 0, sizeof *m);
}

static uint64_t route_hash(const char *route) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)route; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return h;
}

/* rh: route_hash(route), computed once for the entries of one request */
static uint64_t count_hash(uint64_t rh, int status) {
    return (rh ^ (uint64_t)(unsigned)status) * 0x9e3779b97f4a7c15ull;
}

static void table_free(gw_count_table *t) {
    for (size_t i = 0; i < t->len; i++)
        free(t->counts[i].route);
    free(t->counts);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

/* The slot of (route, status): its entry's, or the empty one to fill. */
static uint32_t *table_slot(gw_count_table *t, const char *route, uint64_t rh,
                            int status) {
    size_t mask = t->nslots - 1;
    for (size_t i = count_hash(rh, status) & mask;; i = (i + 1) & mask) {
        uint32_t *s = &t->slots[i];
        if (*s == 0)
            return s;
        const gw_route_count *e = &t->counts[*s - 1];
        if (e->status == status && strcmp(e->route, route) == 0)
            return s;
    }
}

/* arr (*cap elements of size, len used) with room for one more: itself,
 * or grown to twice (first when empty), *cap updated; NULL when out of
 * memory (arr and *cap unchanged). */
static void *room_for_one(void *arr, size_t *cap, size_t len, size_t first,
                          size_t size) {
    if (len < *cap)
        return arr;
    size_t n = *cap ? *cap * 2 : first;
    void *a = realloc(arr, n * size);
    if (a)
        *cap = n;
    return a;
}

/* The entry of (route, status), made (count 0) when missing: its index
 * + 1; 0 when memory ran out. */
static uint32_t table_at(gw_count_table *t, const char *route, uint64_t rh,
                         int status) {
    if (t->nslots < 2 * (t->len + 1)) { /* grow the index */
        size_t ns = t->nslots ? t->nslots * 2 : 64;
        uint32_t *slots = calloc(ns, sizeof *slots);
        if (!slots)
            return false;
        free(t->slots);
        t->slots = slots;
        t->nslots = ns;
        for (size_t i = 0; i < t->len; i++)
            *table_slot(t, t->counts[i].route, route_hash(t->counts[i].route),
                        t->counts[i].status) = (uint32_t)(i + 1);
    }
    uint32_t *s = table_slot(t, route, rh, status);
    if (*s)
        return *s;
    gw_route_count *c = room_for_one(t->counts, &t->cap, t->len, 32, sizeof *c);
    if (!c)
        return 0;
    t->counts = c;
    char *r = strdup(route);
    if (!r)
        return 0;
    t->counts[t->len++] = (gw_route_count){r, status, 0, 0};
    *s = (uint32_t)t->len;
    return *s;
}

/* Add n to (route, status); false when memory ran out (not counted). */
static bool table_add_h(gw_count_table *t, const char *route, uint64_t rh,
                        int status, uint64_t n) {
    uint32_t i = table_at(t, route, rh, status);
    if (i)
        t->counts[i - 1].count += n;
    return i != 0;
}

static bool table_add(gw_count_table *t, const char *route, int status,
                      uint64_t n) {
    return table_add_h(t, route, route_hash(route), status, n);
}

void gw_metrics_destroy(gw_wmetrics *m) {
    table_free(&m->requests);
    free(m->lat);
    table_free(&m->policy);
}

void gw_metrics_request(gw_wmetrics *m, const char *route, int status) {
    m_lock(m);
    table_add(&m->requests, route ? route : "", status, 1);
    m_unlock(m);
}

void gw_metrics_policy(gw_wmetrics *m, const char *route, int kind) {
    m_lock(m);
    table_add(&m->policy, route ? route : "", kind, 1);
    m_unlock(m);
}

/* The per-route latency histogram: a worker keeps it in a gw_route_lat,
 * which its (route, LAT_SUM_US) entry of the requests table names, and
 * each (route, status) entry too once found, so that a request counts
 * with one probe; the sum over workers (gw_metrics_text) keeps it in its
 * table under statuses no response has: LAT_BUCKET - b for bucket b,
 * LAT_SUM_US for the sum in microseconds. */
#define LAT_BUCKET (-1)
#define LAT_SUM_US (-100)

/* The gw_route_lat of entry i's route (index + 1), made when missing; 0
 * when memory ran out. */
static uint32_t route_lat(gw_wmetrics *m, uint32_t i, uint64_t rh) {
    gw_count_table *t = &m->requests;
    uint32_t s = table_at(t, t->counts[i - 1].route, rh, LAT_SUM_US);
    if (!s)
        return 0;
    if (!t->counts[s - 1].lat) {
        gw_route_lat *a =
            room_for_one(m->lat, &m->cap_lat, m->nlat, 16, sizeof *a);
        if (!a)
            return 0;
        m->lat = a;
        m->lat[m->nlat++] = (gw_route_lat){{0}, 0};
        t->counts[s - 1].lat = (uint32_t)m->nlat;
    }
    return t->counts[i - 1].lat = t->counts[s - 1].lat;
}

void gw_metrics_done(gw_wmetrics *m, const char *route, int status, double s,
                     double up_s) {
    size_t b = 0;
    while (b < GW_LAT_BUCKETS && s > gw_lat_bounds_s[b])
        b++;
    size_t ub = 0;
    while (ub < GW_LAT_BUCKETS && up_s > gw_lat_bounds_s[ub])
        ub++;
    route = route ? route : "";
    uint64_t rh = route_hash(route);
    m_lock(m);
    if (up_s >= 0) {
        m->up_buckets[ub]++;
        m->up_sum += up_s;
        m->up_count++;
    }
    uint32_t i = table_at(&m->requests, route, rh, status);
    if (i) {
        m->requests.counts[i - 1].count++;
        uint32_t l = m->requests.counts[i - 1].lat;
        if (l || (l = route_lat(m, i, rh)) != 0) {
            m->lat[l - 1].buckets[b]++;
            m->lat[l - 1].sum_us += (uint64_t)(s * 1e6 + 0.5);
        }
    }
    m_unlock(m);
}

void gw_metrics_upstream_latency(gw_wmetrics *m, double s) {
    size_t b = 0;
    while (b < GW_LAT_BUCKETS && s > gw_lat_bounds_s[b])
        b++;
    m_lock(m);
    m->up_buckets[b]++;
    m->up_sum += s;
    m->up_count++;
    m_unlock(m);
}

static void histogram(gw_buf *out, const char *name, const char *help,
                      const uint64_t *buckets, double sum, uint64_t count) {
    gw_buf_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (size_t b = 0; b < GW_LAT_BUCKETS; b++) {
        cum += buckets[b];
        gw_buf_printf(out, "%s_bucket{le=\"%g\"} %llu\n", name,
                      gw_lat_bounds_s[b], (unsigned long long)cum);
    }
    cum += buckets[GW_LAT_BUCKETS];
    gw_buf_printf(out,
                  "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n"
                  "%s_count %llu\n",
                  name, (unsigned long long)cum, name, sum, name,
                  (unsigned long long)count);
}

/* A label value: Prometheus text is UTF-8, so a byte of a route id that
 * is not part of well-formed UTF-8 is written U+FFFD (utf8.h, as the JSON
 * answers write it); '"', '\\' and LF escaped. */
static void label(gw_buf *out, const char *s) {
    size_t left = strlen(s);
    while (left) {
        size_t n = utf8_seq_len((const unsigned char *)s, left);
        if (!n) {
            gw_buf_adds(out, "\xef\xbf\xbd");
            n = 1;
        } else if (*s == '"' || *s == '\\') {
            gw_buf_add(out, "\\", 1);
            gw_buf_add(out, s, 1);
        } else if (*s == '\n') {
            gw_buf_adds(out, "\\n");
        } else {
            gw_buf_add(out, s, n);
        }
        s += n;
        left -= n;
    }
}

static void per_route(gw_buf *out, const gw_count_table *t, int kind,
                      const char *name, const char *help) {
    gw_buf_printf(out, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
    for (size_t i = 0; i < t->len; i++) {
        if (t->counts[i].status != kind)
            continue;
        gw_buf_printf(out, "%s{route=\"", name);
        label(out, t->counts[i].route);
        gw_buf_printf(out, "\"} %llu\n",
                      (unsigned long long)t->counts[i].count);
    }
}

/* The breakers of the live routes: state gauge per name (0 closed, 1 open,
 * 2 half-open), and the store's transition counts. */
static void breakers_text(gw_buf *out) {
    sy_policy_store *st = sy_router_policy_store(G.router);
    sy_policy_stats ps;
    sy_policy_store_stats(st, &ps);
    gw_buf_adds(out, "# HELP gateway_circuit_breaker_state State of each "
                     "circuit breaker: 0 closed, 1 open, 2 half-open.\n"
                     "# TYPE gateway_circuit_breaker_state gauge\n");
    sy_snapshot *snap = sy_router_acquire(G.router);
    const char **seen = NULL;
    size_t nseen = 0;
    for (size_t i = 0; i < sy_snapshot_route_count(snap); i++) {
        gw_route_data *rd = sy_route_host_data(sy_snapshot_route_at(snap, i));
        const char *name = rd ? rd->breaker : NULL;
        bool dup = !name;
        for (size_t j = 0; !dup && j < nseen; j++)
            dup = strcmp(seen[j], name) == 0;
        if (dup)
            continue;
        const char **ns = realloc(seen, (nseen + 1) * sizeof *ns);
        if (!ns)
            break;
        seen = ns;
        seen[nseen++] = name;
        sy_breaker_info bi;
        sy_error err;
        if (sy_policy_store_breaker(st, name, &bi, &err))
            bi.state = SY_BREAKER_CLOSED; /* not used yet */
        gw_buf_adds(out, "gateway_circuit_breaker_state{name=\"");
        label(out, name);
        gw_buf_printf(out, "\"} %d\n", (int)bi.state);
    }
    free(seen);
    sy_snapshot_release(snap);
    gw_buf_printf(out,
                  "# HELP gateway_circuit_breaker_transitions_total Breaker "
                  "state changes, by the state entered.\n"
                  "# TYPE gateway_circuit_breaker_transitions_total counter\n"
                  "gateway_circuit_breaker_transitions_total{to=\"open\"} "
                  "%llu\n"
                  "gateway_circuit_breaker_transitions_total{to=\"half_open\"} "
                  "%llu\n"
                  "gateway_circuit_breaker_transitions_total{to=\"closed\"} "
                  "%llu\n"
                  "# HELP gateway_circuit_breaker_rejected_total Calls not "
                  "permitted by an open breaker.\n"
                  "# TYPE gateway_circuit_breaker_rejected_total counter\n"
                  "gateway_circuit_breaker_rejected_total %llu\n",
                  (unsigned long long)ps.breaker_opened,
                  (unsigned long long)ps.breaker_half_opened,
                  (unsigned long long)ps.breaker_closed,
                  (unsigned long long)ps.breaker_rejected);
}

static void policy_text(gw_buf *out, const gw_count_table *pol, uint64_t rcalls,
                        uint64_t rerr, uint64_t rtimeouts, uint64_t rauth) {
    per_route(out, pol, GW_POLICY_LIMITED, "gateway_rate_limit_limited_total",
              "Requests denied by a RequestRateLimiter, by route.");
    per_route(out, pol, GW_POLICY_FAILED_OPEN,
              "gateway_rate_limit_failed_open_total",
              "Requests allowed because Redis failed or was late, by route.");
    gw_buf_printf(out,
                  "# HELP gateway_rate_limit_redis_calls_total Limiter "
                  "calls sent to Redis.\n"
                  "# TYPE gateway_rate_limit_redis_calls_total counter\n"
                  "gateway_rate_limit_redis_calls_total %llu\n"
                  "# HELP gateway_rate_limit_redis_errors_total Redis "
                  "errors: refused or lost connections, error replies.\n"
                  "# TYPE gateway_rate_limit_redis_errors_total counter\n"
                  "gateway_rate_limit_redis_errors_total %llu\n"
                  "# HELP gateway_rate_limit_redis_timeouts_total Redis calls "
                  "not answered within --redis-timeout.\n"
                  "# TYPE gateway_rate_limit_redis_timeouts_total counter\n"
                  "gateway_rate_limit_redis_timeouts_total %llu\n"
                  "# HELP gateway_rate_limit_redis_auth_failures_total Redis "
                  "AUTH refused, or NOAUTH (no --redis-password-file).\n"
                  "# TYPE gateway_rate_limit_redis_auth_failures_total "
                  "counter\n"
                  "gateway_rate_limit_redis_auth_failures_total %llu\n",
                  (unsigned long long)rcalls, (unsigned long long)rerr,
                  (unsigned long long)rtimeouts, (unsigned long long)rauth);
    breakers_text(out);
    per_route(out, pol, GW_POLICY_REJECTED,
              "gateway_circuit_breaker_rejected_by_route_total",
              "Calls not permitted by an open breaker, by route.");
    per_route(out, pol, GW_POLICY_FALLBACK,
              "gateway_circuit_breaker_fallbacks_total",
              "Requests sent to a breaker's fallbackUri, by route.");
    per_route(out, pol, GW_POLICY_RETRIED, "gateway_retry_attempts_total",
              "Attempts made again by a Retry filter, by route.");
    per_route(out, pol, GW_POLICY_NOT_REPLAYED,
              "gateway_body_not_replayed_total",
              "Retries and breaker fallbacks not made because the request "
              "body was over --retry-body-bytes, by route.");
    per_route(out, pol, GW_UPGRADE_DROPPED, "gateway_upgrade_dropped_total",
              "Upgrade requests (WebSocket) proxied as plain requests, the "
              "upgrade dropped, by route.");
}

/* gateway_request_duration_seconds with a route label (route="" for
 * requests no route took), from the buckets kept per route. */
static void route_histograms(gw_buf *out, gw_count_table *all) {
    static const char name[] = "gateway_request_duration_seconds";
    gw_buf_printf(out,
                  "# HELP %s Time from the request head to the end of the "
                  "response, by route.\n# TYPE %s histogram\n",
                  name, name);
    for (size_t i = 0; i < all->len; i++) {
        const char *route = all->counts[i].route;
        if (all->counts[i].status != LAT_SUM_US)
            continue;
        uint64_t cum = 0, rh = route_hash(route);
        for (int b = 0; b <= GW_LAT_BUCKETS; b++) {
            uint32_t *s = table_slot(all, route, rh, LAT_BUCKET - b);
            cum += *s ? all->counts[*s - 1].count : 0;
            gw_buf_printf(out, "%s_bucket{route=\"", name);
            label(out, route);
            if (b < GW_LAT_BUCKETS)
                gw_buf_printf(out, "\",le=\"%g\"} %llu\n", gw_lat_bounds_s[b],
                              (unsigned long long)cum);
            else
                gw_buf_printf(out, "\",le=\"+Inf\"} %llu\n",
                              (unsigned long long)cum);
        }
        gw_buf_printf(out, "%s_sum{route=\"", name);
        label(out, route);
        gw_buf_printf(out, "\"} %.6f\n%s_count{route=\"",
                      (double)all->counts[i].count / 1e6, name);
        label(out, route);
        gw_buf_printf(out, "\"} %llu\n", (unsigned long long)cum);
    }
}

long gw_active_requests(void) {
    long n = 0;
    for (int w = 0; w < G.nworkers; w++)
        n += atomic_load(&G.workers[w].metrics.active_requests);
    return n;
}

void gw_metrics_text(gw_buf *out) {
    /* requests by route and status, summed over workers */
    gw_count_table all = {0};
    uint64_t ubuckets[GW_LAT_BUCKETS + 1] = {0}, up_count = 0;
    double up_sum = 0;
    uint64_t retries = 0, connects = 0, reuses = 0, body_timeouts = 0;
    uint64_t body_cuts = 0;
    gw_count_table pol = {0};
    uint64_t rerr = 0, rtimeouts = 0, rcalls = 0, rauth = 0;
    for (int w = 0; w < G.nworkers; w++) {
        gw_wmetrics *m = &G.workers[w].metrics;
        m_lock(m);
        for (size_t i = 0; i < m->policy.len; i++) {
            const gw_route_count *e = &m->policy.counts[i];
            table_add(&pol, e->route, e->status, e->count);
        }
        rerr += atomic_load(&m->redis_errors);
        rtimeouts += atomic_load(&m->redis_timeouts);
        rcalls += atomic_load(&m->redis_calls);
        rauth += atomic_load(&m->redis_auth_failures);
        for (size_t i = 0; i < m->requests.len; i++) {
            const gw_route_count *e = &m->requests.counts[i];
            if (e->status != LAT_SUM_US) {
                table_add(&all, e->route, e->status, e->count);
                continue;
            }
            const gw_route_lat *l = e->lat ? &m->lat[e->lat - 1] : NULL;
            table_add(&all, e->route, LAT_SUM_US, l ? l->sum_us : 0);
            for (int b = 0; l && b <= GW_LAT_BUCKETS; b++)
                if (l->buckets[b])
                    table_add(&all, e->route, LAT_BUCKET - b, l->buckets[b]);
        }
        for (size_t b = 0; b <= GW_LAT_BUCKETS; b++)
            ubuckets[b] += m->up_buckets[b];
        up_sum += m->up_sum;
        up_count += m->up_count;
        retries += atomic_load(&m->retries);
        connects += atomic_load(&m->upstream_connects);
        reuses += atomic_load(&m->upstream_reuses);
        body_timeouts += atomic_load(&m->upstream_body_timeouts);
        body_cuts += atomic_load(&m->upstream_body_cuts);
        m_unlock(m);
    }
    gw_buf_adds(out, "# HELP gateway_requests_total Requests answered, by "
                     "route and status.\n"
                     "# TYPE gateway_requests_total counter\n");
    for (size_t i = 0; i < all.len; i++) {
        if (all.counts[i].status < 0)
            continue; /* a latency bucket */
        gw_buf_adds(out, "gateway_requests_total{route=\"");
        label(out, all.counts[i].route);
        gw_buf_printf(out, "\",status=\"%d\"} %llu\n", all.counts[i].status,
                      (unsigned long long)all.counts[i].count);
    }
    route_histograms(out, &all);
    table_free(&all);
    histogram(out, "gateway_upstream_latency_seconds",
              "Time from sending the request upstream to its response head.",
              ubuckets, up_sum, up_count);
    gw_buf_printf(out,
                  "# HELP gateway_active_connections Open client "
                  "connections.\n"
                  "# TYPE gateway_active_connections gauge\n"
                  "gateway_active_connections %ld\n"
                  "# HELP gateway_active_requests Requests in flight.\n"
                  "# TYPE gateway_active_requests gauge\n"
                  "gateway_active_requests %ld\n"
                  "# HELP gateway_upstream_retries_total Attempts made again "
                  "on another instance after a connect failure.\n"
                  "# TYPE gateway_upstream_retries_total counter\n"
                  "gateway_upstream_retries_total %llu\n"
                  "# HELP gateway_upstream_connects_total New upstream "
                  "connections.\n"
                  "# TYPE gateway_upstream_connects_total counter\n"
                  "gateway_upstream_connects_total %llu\n"
                  "# HELP gateway_upstream_reuses_total Requests sent on a "
                  "pooled keep-alive connection.\n"
                  "# TYPE gateway_upstream_reuses_total counter\n"
                  "gateway_upstream_reuses_total %llu\n"
                  "# HELP gateway_upstream_body_timeouts_total Responses "
                  "cut short: the upstream sent nothing of the body for "
                  "the response timeout.\n"
                  "# TYPE gateway_upstream_body_timeouts_total counter\n"
                  "gateway_upstream_body_timeouts_total %llu\n"
                  "# HELP gateway_upstream_body_cuts_total Responses cut "
                  "short: the upstream's connection ended (closed, reset, "
                  "bad framing) before the body did.\n"
                  "# TYPE gateway_upstream_body_cuts_total counter\n"
                  "gateway_upstream_body_cuts_total %llu\n"
                  "# HELP gateway_access_log_lost_total Access log lines "
                  "that could not be written (a write error).\n"
                  "# TYPE gateway_access_log_lost_total counter\n"
                  "gateway_access_log_lost_total %llu\n",
                  atomic_load(&G.active_clients), gw_active_requests(),
                  (unsigned long long)retries, (unsigned long long)connects,
                  (unsigned long long)reuses, (unsigned long long)body_timeouts,
                  (unsigned long long)body_cuts,
                  (unsigned long long)gw_access_log_lost());
    policy_text(out, &pol, rcalls, rerr, rtimeouts, rauth);
    table_free(&pol);
}
