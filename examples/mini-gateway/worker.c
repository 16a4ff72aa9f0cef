/*
 * worker.c - the worker threads: one libuv loop each, with its own
 * SO_REUSEPORT listener and sy_match_ctx, and a prepare handle that hands
 * the output queued during a loop iteration to the sockets before the loop
 * waits again; the message queue the config side uses to reach them (stop,
 * drop a route's pools); and the route host data
 * (sy_router_options.route_attach / route_detach) that holds each route's
 * connection pools, one list per worker.
 */
#define _DEFAULT_SOURCE
#include "proxy.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The name of the route's CircuitBreaker (its canonical form's filter
 * args), for the per-name state gauge of /metrics; NULL when none. */
static char *breaker_name(const sy_route *route) {
    cJSON *c = cJSON_Parse(sy_route_canonical(route));
    cJSON *fs = cJSON_GetObjectItemCaseSensitive(c, "filters"), *f;
    char *name = NULL;
    cJSON_ArrayForEach(f, fs) {
        cJSON *n = cJSON_GetObjectItemCaseSensitive(f, "name");
        cJSON *a = cJSON_GetObjectItemCaseSensitive(f, "args");
        cJSON *bn = cJSON_GetObjectItemCaseSensitive(a, "name");
        if (cJSON_IsString(n) &&
            strcmp(n->valuestring, "CircuitBreaker") == 0) {
            name = strdup(cJSON_IsString(bn) ? bn->valuestring : "");
            break;
        }
    }
    cJSON_Delete(c);
    return name;
}

/* A route's timeout as the library reads its metadata (Spring's reading):
 * unset: the gateway's default; no limit: a deadline no request reaches. */
static uint64_t route_timeout_ms(const sy_route *r, sy_timeout_kind kind,
                                 uint64_t dflt) {
    uint64_t ms = dflt;
    switch (sy_route_timeout(r, kind, &ms)) {
    case SY_TIMEOUT_MS: return ms;
    case SY_TIMEOUT_NONE: return GW_NO_TIME_LIMIT_MS;
    default: return dflt;
    }
}

void *gw_route_attach(void *data, const sy_route *route) {
    (void)data;
    size_t n = (size_t)G.nworkers;
    /* the messages that drop the pools come with it: a detach cannot fail */
    gw_route_data *rd =
        calloc(1, sizeof *rd + n * (sizeof(gw_pool *) + sizeof(gw_msg)));
    if (!rd)
        return NULL; /* the route works without pools */
    rd->drop_msgs = (gw_msg *)(void *)(rd->pools + n);
    rd->id = strdup(sy_route_id(route));
    atomic_init(&rd->parts, (int)n);
    rd->connect_timeout_ms =
        route_timeout_ms(route, SY_TIMEOUT_CONNECT, G.cfg.connect_timeout_ms);
    rd->response_timeout_ms =
        route_timeout_ms(route, SY_TIMEOUT_RESPONSE, G.cfg.response_timeout_ms);
    rd->breaker = breaker_name(route);
    const char *cors = sy_route_metadata(route, "cors");
    if (cors) {
        char err[256] = "";
        rd->cors = gw_cors_parse(cors, err, sizeof err);
        if (!rd->cors) {
            gw_log("route %s: metadata.cors: %s", rd->id, err);
            for (char *e = err; *e; e++) /* it goes into a JSON string */
                if (*e == '"' || *e == '\\' || (unsigned char)*e < 0x20)
                    *e = '\'';
            rd->cors_error = strdup(err);
        }
    }
    return rd;
}

static void rd_free(gw_route_data *rd) {
    gw_cors_free(rd->cors);
    free(rd->cors_error);
    free(rd->breaker);
    free(rd->id);
    free(rd);
}

/* One worker is done with rd: its pools are gone. */
static void rd_part_done(gw_route_data *rd) {
    if (atomic_fetch_sub(&rd->parts, 1) == 1)
        rd_free(rd);
}

static void pools_free_in_place(gw_route_data *rd) {
    for (int i = 0; i < G.nworkers; i++) {
        gw_pool *p = rd->pools[i];
        while (p) {
            gw_pool *next = p->next;
            free(p->host);
            free(p);
            p = next;
        }
        rd->pools[i] = NULL;
    }
}

void gw_route_detach(void *data, const sy_route *route, void *host_data) {
    (void)data;
    (void)route;
    gw_route_data *rd = host_data;
    if (!rd)
        return;
    bool running = false;
    for (int i = 0; i < G.nworkers; i++)
        running |= G.workers[i].started;
    if (!running || atomic_load(&G.workers_gone)) {
        pools_free_in_place(rd);
        rd_free(rd);
        return;
    }
    for (int i = 0; i < G.nworkers; i++) {
        gw_msg *m = &rd->drop_msgs[i];
        m->kind = GW_MSG_DROP_ROUTE;
        m->rd = rd;
        gw_worker_post(&G.workers[i], m);
    }
}

void gw_worker_post(gw_worker *w, gw_msg *msg) {
    uv_mutex_lock(&w->mq_lock);
    msg->next = w->mq;
    w->mq = msg;
    uv_mutex_unlock(&w->mq_lock);
    uv_async_send(&w->wake);
}

static void worker_maybe_exit(gw_worker *w);

static void start_drain(gw_worker *w) {
    if (w->draining)
        return;
    w->draining = true;
    uv_close((uv_handle_t *)&w->listener, NULL);
    gw_clients_drain(w);
    worker_maybe_exit(w);
}

/* Messages are handled in arrival order. */
static void on_wake(uv_async_t *a) {
    gw_worker *w = a->data;
    uv_mutex_lock(&w->mq_lock);
    gw_msg *m = w->mq;
    w->mq = NULL;
    uv_mutex_unlock(&w->mq_lock);
    gw_msg *rev = NULL;
    while (m) {
        gw_msg *next = m->next;
        m->next = rev;
        rev = m;
        m = next;
    }
    while (rev) { /* the messages are not ours: rd's or the worker's */
        gw_msg *next = rev->next;
        if (rev->kind == GW_MSG_DROP_ROUTE) {
            gw_route_data *rd = rev->rd;
            gw_pools_drop(w, rd);
            rd_part_done(rd); /* may free rd, and rev with it */
        } else {
            start_drain(w);
        }
        rev = next;
    }
}

/* Called by proxy.c whenever a client connection closes. */
void gw_worker_client_closed(gw_worker *w) {
    worker_maybe_exit(w);
}

static void worker_maybe_exit(gw_worker *w) {
    if (!w->draining || w->clients > 0)
        return;
    gw_upstream_close_all(w);
    gw_redis_close(w);
    if (!uv_is_closing((uv_handle_t *)&w->wake)) {
        uv_close((uv_handle_t *)&w->wake, NULL);
        uv_close((uv_handle_t *)&w->flush, NULL);
        uv_close((uv_handle_t *)&w->pass_end, NULL);
    }
}

static void on_flush(uv_prepare_t *p) {
    gw_worker *w = p->data;
    gw_flush_pending(w);
    w->now_ns = 0; /* the loop waits next: gw_loop_ns reads the clock again */
}

/* after the events of a pass, before the next pass's timers */
static void on_pass_end(uv_check_t *h) {
    ((gw_worker *)h->data)->now_ns = 0;
}

static void on_connection(uv_stream_t *server, int status) {
    gw_worker *w = server->data;
    if (status < 0 || w->draining)
        return;
    gw_client_accept(w, server);
}

static void worker_main(void *arg) {
    gw_worker *w = arg;
    uv_run(&w->loop, UV_RUN_DEFAULT);
    gw_request_blocks_free();
    gw_policy_blocks_free();
}

/* The port a listener was bound to (> 0), or a negative libuv error. */
static int bound_port(const uv_tcp_t *tcp) {
    struct sockaddr_storage ss;
    int len = sizeof ss;
    int rc = uv_tcp_getsockname(tcp, (struct sockaddr *)&ss, &len);
    if (rc)
        return rc;
    return ss.ss_family == AF_INET
               ? ntohs(((const struct sockaddr_in *)&ss)->sin_port)
               : -1;
}

int gw_workers_init(void) {
    G.nworkers = G.cfg.workers > 0 ? G.cfg.workers : 1;
    if (G.nworkers > GW_MAX_WORKERS)
        G.nworkers = GW_MAX_WORKERS;
    G.workers = calloc((size_t)G.nworkers, sizeof *G.workers);
    if (!G.workers)
        return -1;
    for (int i = 0; i < G.nworkers; i++) {
        gw_worker *w = &G.workers[i];
        w->index = i;
        w->rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1) ^ gw_now_ns();
        uv_loop_init(&w->loop);
        uv_mutex_init(&w->mq_lock);
        uv_async_init(&w->loop, &w->wake, on_wake);
        w->wake.data = w;
        /* runs before each wait for events; does not keep the loop alive */
        uv_prepare_init(&w->loop, &w->flush);
        w->flush.data = w;
        uv_prepare_start(&w->flush, on_flush);
        uv_unref((uv_handle_t *)&w->flush);
        uv_check_init(&w->loop, &w->pass_end);
        w->pass_end.data = w;
        uv_check_start(&w->pass_end, on_pass_end);
        uv_unref((uv_handle_t *)&w->pass_end);
        gw_metrics_init(&w->metrics);
        sy_error err;
        if (sy_match_ctx_new(NULL, &w->ctx, &err)) {
            gw_log("match context: %s", err.message);
            return -1;
        }
        if (G.cfg.redis && gw_redis_init(w, sy_ratelimit_redis_script()))
            return -1;
        w->listener.data = w;
        int rc = gw_listen_tcp(&w->loop, &w->listener, G.cfg.listen_host,
                               G.cfg.listen_port, true, on_connection);
        if (rc) {
            gw_log("cannot listen on %s:%d: %s", G.cfg.listen_host,
                   G.cfg.listen_port, uv_strerror(rc));
            return -1;
        }
        /* --listen ADDR:0: the first worker's port is everyone's (each
         * SO_REUSEPORT listener would get a port of its own), and the
         * one logged and shown */
        if (G.cfg.listen_port == 0 && (rc = bound_port(&w->listener)) > 0)
            G.cfg.listen_port = rc;
    }
    return 0;
}

int gw_workers_start(void) {
    for (int i = 0; i < G.nworkers; i++) {
        gw_worker *w = &G.workers[i];
        w->started = true;
        if (uv_thread_create(&w->thread, worker_main, w)) {
            w->started = false;
            return -1;
        }
    }
    return 0;
}

void gw_workers_stop(void) {
    for (int i = 0; i < G.nworkers; i++) {
        gw_msg *m = &G.workers[i].stop_msg;
        m->kind = GW_MSG_STOP;
        gw_worker_post(&G.workers[i], m);
    }
    for (int i = 0; i < G.nworkers; i++)
        if (G.workers[i].started)
            uv_thread_join(&G.workers[i].thread);
    atomic_store(&G.workers_gone, true);
    /* messages that arrived after a loop ended */
    for (int i = 0; i < G.nworkers; i++) {
        gw_worker *w = &G.workers[i];
        uv_mutex_lock(&w->mq_lock);
        gw_msg *m = w->mq;
        w->mq = NULL;
        uv_mutex_unlock(&w->mq_lock);
        while (m) {
            gw_msg *next = m->next;
            if (m->kind == GW_MSG_DROP_ROUTE) {
                gw_pools_drop(w, m->rd);
                rd_part_done(m->rd);
            }
            free(m);
            m = next;
        }
        sy_match_ctx_free(w->ctx);
        w->ctx = NULL;
        gw_cache_free(w);
        gw_trusted_free(w);
    }
}

/* After sy_router_free: the loops have no handles left. */
void gw_workers_free(void) {
    for (int i = 0; i < G.nworkers; i++) {
        gw_worker *w = &G.workers[i];
        uv_loop_close(&w->loop);
        uv_mutex_destroy(&w->mq_lock);
        gw_metrics_destroy(&w->metrics);
    }
    free(G.workers);
    G.workers = NULL;
}
