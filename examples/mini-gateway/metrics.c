/*
 * metrics.c - the gateway's own series for GET /metrics: requests by route
 * and status, the request latency histogram, connection gauges. Each
 * worker counts into its own table under its own (uncontended) lock; the
 * admin thread sums them when scraped.
 */
#define _DEFAULT_SOURCE
#include "gw.h"

#include <stdlib.h>
#include <string.h>

const double gw_lat_bounds_s[GW_LAT_BUCKETS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1,    0.25,  0.5,    1,     2.5,  5,     10};

void gw_metrics_init(gw_wmetrics *m) {
    memset(m, 0, sizeof *m);
    uv_mutex_init(&m->lock);
}

void gw_metrics_destroy(gw_wmetrics *m) {
    for (size_t i = 0; i < m->count_len; i++)
        free(m->counts[i].route);
    free(m->counts);
    uv_mutex_destroy(&m->lock);
}

void gw_metrics_request(gw_wmetrics *m, const char *route, int status) {
    uv_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->count_len; i++)
        if (m->counts[i].status == status &&
            strcmp(m->counts[i].route, route) == 0) {
            m->counts[i].count++;
            uv_mutex_unlock(&m->lock);
            return;
        }
    if (m->count_len == m->count_cap) {
        size_t cap = m->count_cap ? m->count_cap * 2 : 32;
        gw_route_count *n = realloc(m->counts, cap * sizeof *n);
        if (!n) {
            uv_mutex_unlock(&m->lock);
            return;
        }
        m->counts = n;
        m->count_cap = cap;
    }
    char *r = strdup(route);
    if (r)
        m->counts[m->count_len++] = (gw_route_count){r, status, 1};
    uv_mutex_unlock(&m->lock);
}

void gw_metrics_latency(gw_wmetrics *m, double s) {
    size_t b = 0;
    while (b < GW_LAT_BUCKETS && s > gw_lat_bounds_s[b])
        b++;
    uv_mutex_lock(&m->lock);
    m->lat_buckets[b]++;
    m->lat_sum += s;
    m->lat_count++;
    uv_mutex_unlock(&m->lock);
}

void gw_metrics_upstream_latency(gw_wmetrics *m, double s) {
    size_t b = 0;
    while (b < GW_LAT_BUCKETS && s > gw_lat_bounds_s[b])
        b++;
    uv_mutex_lock(&m->lock);
    m->up_buckets[b]++;
    m->up_sum += s;
    m->up_count++;
    uv_mutex_unlock(&m->lock);
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

static void label(gw_buf *out, const char *s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            gw_buf_add(out, "\\", 1);
        if (*s == '\n') {
            gw_buf_adds(out, "\\n");
            continue;
        }
        gw_buf_add(out, s, 1);
    }
}

void gw_metrics_text(gw_buf *out) {
    /* requests by route and status, summed over workers */
    gw_route_count *all = NULL;
    size_t n = 0, cap = 0;
    uint64_t buckets[GW_LAT_BUCKETS + 1] = {0}, lat_count = 0;
    uint64_t ubuckets[GW_LAT_BUCKETS + 1] = {0}, up_count = 0;
    double lat_sum = 0, up_sum = 0;
    uint64_t retries = 0, connects = 0, reuses = 0;
    for (int w = 0; w < G.nworkers; w++) {
        gw_wmetrics *m = &G.workers[w].metrics;
        uv_mutex_lock(&m->lock);
        for (size_t i = 0; i < m->count_len; i++) {
            size_t j = 0;
            while (j < n && !(all[j].status == m->counts[i].status &&
                              strcmp(all[j].route, m->counts[i].route) == 0))
                j++;
            if (j == n) {
                if (n == cap) {
                    cap = cap ? cap * 2 : 32;
                    gw_route_count *na = realloc(all, cap * sizeof *na);
                    if (!na)
                        break;
                    all = na;
                }
                all[n++] = (gw_route_count){strdup(m->counts[i].route),
                                            m->counts[i].status, 0};
            }
            all[j].count += m->counts[i].count;
        }
        for (size_t b = 0; b <= GW_LAT_BUCKETS; b++)
            buckets[b] += m->lat_buckets[b];
        lat_sum += m->lat_sum;
        lat_count += m->lat_count;
        for (size_t b = 0; b <= GW_LAT_BUCKETS; b++)
            ubuckets[b] += m->up_buckets[b];
        up_sum += m->up_sum;
        up_count += m->up_count;
        retries += atomic_load(&m->retries);
        connects += atomic_load(&m->upstream_connects);
        reuses += atomic_load(&m->upstream_reuses);
        uv_mutex_unlock(&m->lock);
    }
    gw_buf_adds(out, "# HELP gateway_requests_total Requests answered, by "
                     "route and status.\n"
                     "# TYPE gateway_requests_total counter\n");
    for (size_t i = 0; i < n; i++) {
        gw_buf_adds(out, "gateway_requests_total{route=\"");
        label(out, all[i].route ? all[i].route : "");
        gw_buf_printf(out, "\",status=\"%d\"} %llu\n", all[i].status,
                      (unsigned long long)all[i].count);
        free(all[i].route);
    }
    free(all);
    histogram(out, "gateway_request_duration_seconds",
              "Time from the request head to the end of the response.", buckets,
              lat_sum, lat_count);
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
                  "gateway_upstream_reuses_total %llu\n",
                  atomic_load(&G.active_clients),
                  atomic_load(&G.active_requests), (unsigned long long)retries,
                  (unsigned long long)connects, (unsigned long long)reuses);
}
