/*
 * gw.h - the mini-gateway's shared types: configuration, workers, the
 * per-route host data (connection pools), the small HTTP server used by the
 * admin API and the test backend, and helpers shared by the modules.
 *
 * Threads: the main thread runs the config loop (route and instance files,
 * inotify, the admin API, signals) and is the router's only writer besides
 * the optional etcd source; each worker thread runs its own libuv loop with
 * its own SO_REUSEPORT listener and match context.
 */
#ifndef GW_H
#define GW_H

#include <http_parser.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <switchyard.h>
#include <uv.h>

/* An intrusive doubly linked list whose members know whether they are on
 * it: the worker's lists of connections with output queued (proxy.c,
 * upstream.c). GW_OWNER gives the struct a link is embedded in. */
typedef struct gw_link {
    struct gw_link *prev, *next;
    bool on;
} gw_link;

#define GW_OWNER(link, type, member)                                           \
    ((type *)(void *)((char *)(link)-offsetof(type, member)))

/* Put l at the head of *head unless it is on the list already. */
static inline void gw_link_push(gw_link **head, gw_link *l) {
    if (l->on)
        return;
    l->on = true;
    l->prev = NULL;
    l->next = *head;
    if (l->next)
        l->next->prev = l;
    *head = l;
}

/* Take l off the list *head if it is on it. */
static inline void gw_link_unlink(gw_link **head, gw_link *l) {
    if (!l->on)
        return;
    l->on = false;
    if (l->prev)
        l->prev->next = l->next;
    else
        *head = l->next;
    if (l->next)
        l->next->prev = l->prev;
    l->next = l->prev = NULL;
}

#define GW_MAX_FILES 64
#define GW_MAX_WORKERS 64
#define GW_MAX_HEADERS 128
/* a route timeout of "no limit" (sy_route_timeout): ~35 years */
#define GW_NO_TIME_LIMIT_MS (UINT64_C(1) << 40)

/* ------------------------------------------------------------------ */
/* Growable byte buffer, and the out-of-memory policy                   */
/* ------------------------------------------------------------------ */

/*
 * The gateway's one out-of-memory policy: a failed allocation fails the
 * piece of work it was for -- the client or upstream connection (closed),
 * the request (answered 500, or closed when the answer cannot be built),
 * the admin call (500, nothing changed), the config change (rejected and
 * logged, the last good config keeps serving, retried on the next change)
 * -- and never the process: nothing aborts.
 *
 * A gw_buf follows it with a sticky flag: once an allocation failed,
 * `failed` is set and later additions do nothing, so a builder appends
 * freely and its owner checks `failed` once, before the bytes are used.
 */
typedef struct gw_buf {
    char *p;
    size_t len, cap;
    bool failed; /* an allocation failed: the contents are incomplete */
} gw_buf;

/* Room for `extra` more bytes; false (and `failed` set) when there is none. */
bool gw_buf_reserve(gw_buf *b, size_t extra);
void gw_buf_add_grow(gw_buf *b, const void *data, size_t len);
/* Inline: a request's heads are built from ~40 small appends, most of
 * literal strings whose length and copy the compiler folds; only an
 * append that needs room (or a failed buffer) calls out. */
static inline void gw_buf_add(gw_buf *b, const void *data, size_t len) {
    if (b->failed || !b->p || b->len + len + 1 > b->cap) {
        gw_buf_add_grow(b, data, len);
        return;
    }
    if (len)
        memcpy(b->p + b->len, data, len);
    b->len += len;
    b->p[b->len] = 0;
}
static inline void gw_buf_adds(gw_buf *b, const char *s) {
    gw_buf_add(b, s, strlen(s));
}
void gw_buf_addu(gw_buf *b, uint64_t v); /* decimal, without printf */
/* "HTTP/1.1 <status> <gw_status_text>\r\n" and "Content-Length: <v>\r\n",
 * each in one append (a response head's, upstream.c) */
void gw_buf_status_line(gw_buf *b, int status);
void gw_buf_content_length(gw_buf *b, uint64_t v);
/* v in decimal at dst (room for 20), not NUL-ended; its length. */
size_t gw_u64_text(char *dst, uint64_t v);
void gw_buf_printf(gw_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A JSON string literal (quotes included) for len bytes of s; bytes from
 * 0x80 as they are (names and ids the gateway reads back as bytes: the
 * --state file). */
void gw_buf_json_str(gw_buf *b, const char *s, size_t len);
/* The same, each byte that is not part of well-formed UTF-8 written as
 * U+FFFD: JSON text others read (the access log). */
void gw_buf_json_utf8(gw_buf *b, const char *s, size_t len);
/* JSON text (a whole answer: cJSON's, or gw_buf_json_str's strings) as
 * well-formed UTF-8, each byte that is not part of it written \ufffd as
 * gw_buf_json_utf8 writes it (a byte from 0x80 of JSON text is inside a
 * string, where the escape is one): appended to out, true; false when
 * text already is (out untouched, the common answer). */
bool gw_json_text_utf8(gw_buf *out, const char *text, size_t len);
void gw_buf_free(gw_buf *b);

/* ------------------------------------------------------------------ */
/* Configuration                                                        */
/* ------------------------------------------------------------------ */

typedef struct gw_config {
    char listen_host[64];
    int listen_port;
    char admin_host[64];
    int admin_port;
    const char *routes[GW_MAX_FILES];
    size_t route_count;
    const char *instances;
    int workers;
    const char *admin_token;      /* NULL: no token */
    uint64_t header_timeout_ms;   /* request head must arrive within */
    uint64_t idle_timeout_ms;     /* keep-alive client connection idle */
    uint64_t connect_timeout_ms;  /* default; route metadata overrides */
    uint64_t response_timeout_ms; /* default; route metadata overrides */
    uint64_t upstream_idle_ms;    /* pooled upstream connection idle */
    size_t max_header_bytes;      /* request line + headers */
    uint64_t max_body_bytes;      /* request body */
    int retries;                  /* extra attempts on connect failure */
    size_t pool_max_idle;         /* idle connections kept per instance */
    unsigned upstream_pipeline;   /* requests in flight on one connection,
                                     1 to GW_PIPE_MAX */
    sy_escaped_slashes escaped_slashes;
    bool merge_slashes;
    const char *etcd_url, *etcd_prefix;
    /* etcd authentication and TLS (etcd_source.h) */
    const char *etcd_user, *etcd_password_file;
    uint64_t etcd_token_renew_ms; /* 0: etcd_auth.c's default */
    const char *etcd_cacert, *etcd_cert, *etcd_key;
    bool admin_overrides_files; /* admin changes to file sources kept */
    const char *state_file;     /* --state FILE: admin changes kept */
    const char *redis;          /* --redis HOST:PORT or unix:PATH */
    uint64_t redis_timeout_ms;  /* a Redis call answers within this */
    /* Redis AUTH: --redis-user (an ACL user, or NULL: the default user),
     * --redis-password-file and its first line (never printed) */
    const char *redis_user, *redis_password_file, *redis_password;
    uint64_t retry_body_bytes;   /* request bodies kept for a retry */
    const char *default_filters; /* --default-filters FILE */
    bool quiet;                  /* no access log */
    const char *access_log; /* --access-log FILE, "-": stdout; NULL: none */
    bool demo;
    /* --trusted-proxies REGEX and its compiled form (a pcre2_code; NULL:
     * no forwarding headers are sent, forwarded.c) */
    const char *trusted_proxies;
    void *trusted_re;
} gw_config;

/* forwarded.c: compiles --trusted-proxies; 0, or -1 after a message. */
int gw_trusted_compile(gw_config *cfg, const char *flag, const char *re);

/* The command line (options.c): the config and what only main needs. */
typedef struct gw_options {
    gw_config cfg;
    const char *listen; /* --listen as given (the backend parses it) */
    bool help;          /* --help: print the usage and exit */
    bool etcd_trace;    /* one JSON line per etcd commit on stdout */
    bool backend;       /* run as the test backend */
    const char *backend_id, *backend_version;
} gw_options;

/* access_log.c: --access-log (0, or -1 after a message) and the ring of
 * the last requests taken (proxy.h gw_recent_remember), for the admin dry
 * run. */
int gw_access_log_open(const char *path);
/* The access log file opened again by its name (after a rotation); 0, or
 * -1 (kept writing to the old one); what happened in msg. */
int gw_access_log_reopen(char *msg, size_t cap);
/* Access log lines lost to write errors so far (any thread). */
uint64_t gw_access_log_lost(void);
void gw_access_log_close(void);
#define GW_RECENT_MAX 256
#define GW_RECENT_HEADERS 16
typedef struct gw_recent {
    char method[16], host[256], path[1024], query[512], remote[64];
    char hbuf[1024]; /* header names and values */
    uint16_t hname[GW_RECENT_HEADERS], hname_len[GW_RECENT_HEADERS];
    uint16_t hval[GW_RECENT_HEADERS], hval_len[GW_RECENT_HEADERS];
    size_t nh;
    bool cut; /* a string longer than its room, or headers past hbuf or
                 GW_RECENT_HEADERS: replayed without what did not fit */
} gw_recent;
/* Up to max of the last requests, oldest first; any thread. */
size_t gw_recent_copy(gw_recent *out, size_t max);
/* e as a request (hs: GW_RECENT_HEADERS slots; both borrow from e). */
void gw_recent_request(const gw_recent *e, sy_header *hs, sy_request *r);

/* Defaults, then argv; 0, or -1 after a message on stderr (exit 2). */
int gw_options_parse(gw_options *o, int argc, char **argv);
void gw_options_usage(FILE *f);

/* ------------------------------------------------------------------ */
/* Metrics                                                              */
/* ------------------------------------------------------------------ */

#define GW_LAT_BUCKETS 14
extern const double gw_lat_bounds_s[GW_LAT_BUCKETS];

typedef struct gw_route_count {
    char *route; /* route id or "" (no route) */
    int status;
    /* a worker's requests table: the route's gw_route_lat (index + 1 in
     * gw_wmetrics.lat), found once per entry; 0 not yet */
    uint32_t lat;
    uint64_t count;
} gw_route_count;

/* One route's request latency histogram in a worker (metrics.c). */
typedef struct gw_route_lat {
    uint64_t buckets[GW_LAT_BUCKETS + 1]; /* last: +Inf */
    uint64_t sum_us;
} gw_route_lat;

/* Request counts by (route, status): an array in first-seen order and an
 * open-addressing index over it, so counting costs one hash and a probe
 * or two whatever the number of routes. */
typedef struct gw_count_table {
    gw_route_count *counts;
    size_t len, cap;
    uint32_t *slots; /* index + 1 into counts; 0: empty */
    size_t nslots;   /* a power of two, at least twice len */
} gw_count_table;

/* One worker's counters; the admin thread reads them under `lock`. */
typedef struct gw_wmetrics {
    atomic_uint lock; /* a spin flag (metrics.c: held for a few stores) */
    gw_count_table requests;
    gw_route_lat *lat; /* by route: see gw_route_count.lat */
    size_t nlat, cap_lat;
    uint64_t up_buckets[GW_LAT_BUCKETS + 1]; /* upstream: head sent ->
                                                response head */
    double up_sum;
    uint64_t up_count;
    atomic_ullong retries, upstream_connects, upstream_reuses; /* lock-free */
    atomic_ullong upstream_body_timeouts; /* a body stalled (upstream.c) */
    atomic_ullong upstream_body_cuts;     /* its connection ended mid-body */
    atomic_long active_requests;          /* in flight (GW_OWN_ADD) */
    /* policies (policy.c): by (route, GW_POLICY_*) */
    gw_count_table policy;
    atomic_ullong redis_errors, redis_timeouts, redis_calls;
    atomic_ullong redis_auth_failures; /* AUTH refused, or NOAUTH */
} gw_wmetrics;

enum {
    GW_POLICY_LIMITED = 1,      /* answered by a rate limiter (429) */
    GW_POLICY_FAILED_OPEN = 2,  /* allowed because Redis failed */
    GW_POLICY_RETRIED = 3,      /* a Retry attempt */
    GW_POLICY_REJECTED = 4,     /* not permitted by an open breaker */
    GW_POLICY_FALLBACK = 5,     /* sent to the breaker's fallback */
    GW_POLICY_NOT_REPLAYED = 6, /* a retry or fallback not made: the body
                                   was over --retry-body-bytes */
    GW_UPGRADE_DROPPED = 7      /* an Upgrade (WebSocket) sent as plain */
};
void gw_metrics_policy(gw_wmetrics *m, const char *route, int kind);

void gw_metrics_init(gw_wmetrics *m);
void gw_metrics_destroy(gw_wmetrics *m);
void gw_metrics_request(gw_wmetrics *m, const char *route, int status);
/* A finished request: its count by (route, status) and its latency, and
 * its upstream's latency when up_seconds >= 0 (its last response head's;
 * one an earlier attempt had went in by gw_metrics_upstream_latency),
 * under one lock and one hash of the route id. */
void gw_metrics_done(gw_wmetrics *m, const char *route, int status,
                     double seconds, double up_seconds);
void gw_metrics_upstream_latency(gw_wmetrics *m, double seconds);
/* The gateway's own series in Prometheus text (all workers). */
void gw_metrics_text(gw_buf *out);
/* Requests in flight, summed over the workers. */
long gw_active_requests(void);
/* Add d to a counter that only its worker's thread writes (others read
 * it): a relaxed load and store, no locked add a request. */
#define GW_OWN_ADD(c, d)                                                       \
    atomic_store_explicit(                                                     \
        (c), atomic_load_explicit((c), memory_order_relaxed) + (d),            \
        memory_order_relaxed)

/* ------------------------------------------------------------------ */
/* Workers and per-route host data                                      */
/* ------------------------------------------------------------------ */

typedef struct gw_worker gw_worker;
typedef struct gw_upconn gw_upconn;
#define GW_PIPE_MAX 64 /* the most --upstream-pipeline */

/* Idle keep-alive connections to one host:port, owned by one worker. */
typedef struct gw_pool {
    struct gw_pool *next;
    char *host;
    uint16_t port;
    gw_upconn *idle; /* singly linked through gw_upconn.next_idle */
    size_t idle_count;
    gw_upconn *pipe; /* takes more pipelined requests until its flush */
} gw_pool;

/* A message to a worker's loop (uv_async). Messages are preallocated by
 * their senders (the worker's stop_msg, the route data's drop_msgs): a
 * post cannot fail. */
typedef struct gw_msg {
    struct gw_msg *next;
    enum { GW_MSG_STOP, GW_MSG_DROP_ROUTE } kind;
    struct gw_route_data *rd;
} gw_msg;

/* The host data of one live route (sy_router_options.route_attach): one
 * list of pools per worker, each touched only by its worker's thread. */
typedef struct gw_route_data {
    atomic_int parts; /* workers that still have to drop their pools */
    char *id;
    uint64_t connect_timeout_ms, response_timeout_ms;
    struct gw_cors *cors; /* metadata `cors` (cors.c), or NULL */
    char *cors_error;     /* why metadata `cors` could not be read */
    char *breaker;        /* its CircuitBreaker's name, or NULL */
    /* which host filters run per request the route has under a snapshot
     * (proxy.c): generation << 8 | 0x80 | GW_HF_* bits; 0: none known */
    _Atomic uint64_t host_flags;
    gw_msg *drop_msgs; /* [worker count], in the same block after pools */
    gw_pool *pools[];  /* [worker count] */
} gw_route_data;

struct gw_worker {
    int index;
    uv_loop_t loop;
    uv_thread_t thread;
    uv_tcp_t listener;
    uv_async_t wake;
    /* Output is handed to the sockets once per loop iteration, before the
     * loop waits again (proxy.c, gw_flush_pending): the connections with
     * bytes queued since then. */
    uv_prepare_t flush;
    /* gw_loop_ns's reading of this loop pass, 0 until taken: cleared
     * after the pass's events (pass_end) and before the loop waits (flush) */
    uint64_t now_ns;
    uv_check_t pass_end;
    gw_link *dirty_clients, *dirty_ups;
    uv_mutex_t mq_lock;
    gw_msg *mq;
    gw_msg stop_msg;
    sy_match_ctx *ctx;
    uint64_t rng;
    bool draining, started;
    size_t clients;         /* open client connections */
    void *client_list;      /* gw_client list (proxy.c) */
    void *upconn_list;      /* every gw_upconn (upstream.c) */
    void *redis;            /* the Redis connection (redis.c), --redis only */
    struct gw_cache *cache; /* LocalResponseCache's answers (cache.c) */
    void *trusted_md;       /* --trusted-proxies' match data (forwarded.c) */
    char rbuf[65536];       /* shared read buffer for upstream reads */
    gw_wmetrics metrics;
};

/* ------------------------------------------------------------------ */
/* The process                                                          */
/* ------------------------------------------------------------------ */

typedef struct gw_state {
    gw_config cfg;
    sy_router *router;
    int nworkers;
    gw_worker *workers;
    atomic_bool workers_gone; /* loops stopped: host data freed in place */
    atomic_long active_clients;
    uv_loop_t *main_loop;
    /* the last apply report as JSON (admin GET /report), main thread */
    gw_buf last_report;
    long last_failed_change; /* of the last failed gw_commit, or -1 */
    void *etcd; /* the gw_etcd source (etcd_source.h) when --etcd is on */
} gw_state;

extern gw_state G;

/* worker.c: worker threads */
int gw_workers_init(void);  /* loops, listeners, contexts (main thread) */
int gw_workers_start(void); /* threads */
void gw_workers_stop(void); /* drain and join */
void gw_workers_free(void); /* after stop, once the router is freed */
void gw_worker_post(gw_worker *w, gw_msg *msg);
void *gw_route_attach(void *data, const sy_route *route);
void gw_route_detach(void *data, const sy_route *route, void *host_data);

/* config.c: the router and its sources (main thread) */
int gw_config_init(void);
int gw_config_load_all(void); /* initial load; non-zero: fatal */
int gw_config_watch(uv_loop_t *loop);
void gw_config_close(void); /* handles; the loop runs on to close them */
void gw_config_free(void);  /* after the loop stopped */
/* Parse an instances document ({"services": {...}}, or a bare array for
 * one service when `service` is set) and stage it into cs. */
int gw_instances_stage(sy_change_set *cs, const char *json, size_t len,
                       const char *service, sy_error *err);
/* Re-read every file and apply what changed (the actuator's refresh), as
 * a file change is applied; 0, or the located error of the first file
 * refused (its old config keeps serving, the other files applied). */
int gw_config_refresh(sy_error *err);
/* SIGHUP (main.c): every file read again as gw_config_refresh does, its
 * outcome logged (a refused file with its located error); without files,
 * logged that there is nothing to reload. */
void gw_config_reload(void);
/* The file a source comes from / the instances file when it names the
 * service; NULL when none does. */
const char *gw_config_source_file(const char *source);
/* The default-filters (a JSON array text) of the Spring route files as
 * applied, or NULL: *file names the file; *other, when set, a file whose
 * default-filters differ. Main thread. */
const char *gw_config_default_filters(const char **file, const char **other);
const char *gw_config_service_file(const char *service);
/* Commit cs and remember its report for GET /report (and, when it failed,
 * the index of the failed change in G.last_failed_change). */
int gw_commit(sy_change_set *cs, const char *what, sy_error *err);
/* The watched files as a JSON array for /status: [{"path", "source"
 * (null for the instances file), "error" (null, or the last attempt's
 * located error while the file's previous config keeps serving)}]. */
void gw_config_files_json(gw_buf *b);
/* Is `name` a source of the live router? */
bool gw_source_exists(const char *name);
/* A new router with the gateway's options and no host data, to try a
 * change on without touching the live one; free it with sy_router_free. */
int gw_scratch_router(sy_router **out, sy_error *err);
/* A change to a source the router does not know yet: registering it is a
 * change too, so the change (stage's) is tried first on a scratch router
 * with the gateway's options (its new route ids against the other
 * sources' live routes); 0 when it passes, and only then may the caller
 * register the source (admin.c; state.c's replay). */
int gw_try_new_source(const char *source,
                      int (*stage)(void *data, sy_change_set *cs,
                                   sy_error *err),
                      void *data, sy_error *err);
/* The last error of the route file of `source`, or NULL when it applied
 * (or the source has no file). */
const sy_error *gw_config_source_error(const char *source);
void gw_error_json(gw_buf *b, const sy_error *err);
/* One part of an apply report as JSON: source, version, added, removed,
 * updated, instance changes (config.c). */
void gw_report_part_json(gw_buf *b, const sy_report *p);

/* filters.c: the registry of the filters the gateway adds (built once,
 * before the routers) */
const sy_registry *gw_registry(void);
/* policy.c */
/* What the library leaves to the gateway, checked before a document (or
 * with `single`, one route) is staged: a document's own `default-filters`
 * (an envelope key the library ignores) and a `cors` metadata the gateway
 * cannot read are refused, SY_EARG at their path; else 0. Config thread. */
int gw_document_check(const char *json, size_t len, bool single, sy_error *err);

/* admin.c */
int gw_admin_start(uv_loop_t *loop);
void gw_admin_close(void);

/* owner.c: who may change what. A source or service that a file owns is
 * refused to the admin API (409 naming the file), unless
 * --admin-overrides-files: then the admin change is kept as an override,
 * staged again after every read of the file, listed in /status. */
/* 0: the change may go on; else the HTTP status to refuse with, msg
 * filled. `source` (a route source) or `service` (instances). */
int gw_owner_check(const char *source, const char *service, char *msg,
                   size_t cap);
/* state.c: the admin changes kept (the overrides above; with --state
 * FILE every accepted admin change, saved durably to FILE before it is
 * committed and replayed at start). Around the commit of an admin change
 * (method and path segments as the admin API got them):
 * gw_state_begin saves the state with the change in it when it is to be
 * kept: -1 with msg filled when it cannot (the change must not be
 * committed); gw_state_end keeps it once committed, or saves the state
 * as it was when the commit failed. A rollback is saved at the end (its
 * routes are known then): -1 when it cannot be, and the rollback was
 * undone (msg says so, or that it is live but not kept). `source`: the
 * route source changed (NULL for instances), its origin "admin". */
int gw_state_begin(const char *method, char *const *seg, int ns,
                   const char *body, size_t len, char *msg, size_t cap);
int gw_state_end(bool committed, const char *source, char *msg, size_t cap);
/* At start, after the files are read: replay --state FILE, each change as
 * one change set (logged; one that no longer applies is logged, left out
 * and the file as it was copied to FILE.not-replayed); -1 when the file
 * does not parse (logged with its JSON path). Without --state, the
 * warning that admin changes live in memory only. */
int gw_state_load(void);
void gw_state_free(void);
/* ,"state":{...} for /status (null without --state). */
void gw_state_json(gw_buf *b);
/* Where a source's live document came from: "file", "admin", "state",
 * "etcd"; NULL when unknown (the demo). */
void gw_origin_set(const char *source, const char *from);
const char *gw_origin(const char *source);
/* Stage the overrides of `source` (NULL: of the instances file's
 * services) into cs, after the file's own content. */
int gw_overrides_stage(sy_change_set *cs, const char *source, sy_error *err);
/* ,"overrides":[...] for /status. */
void gw_overrides_json(gw_buf *b);

/* backend.c: the test backend (also started in-process by the demo) */
int gw_backend_main(const char *listen, const char *id, const char *version);
int gw_backend_spawn(const char *host, int port, const char *id,
                     const char *version);

/* util */
int gw_parse_addr(const char *s, char *host, size_t hostcap, int *port);

/* A deadline on a libuv timer, re-armed lazily: a connection sets and
 * clears its deadline on every request (header, response, idle), and
 * restarting a uv timer each time costs a heap removal and insertion. The
 * timer stays armed at or before the earliest deadline set: a later
 * deadline is only stored, a cleared one is only forgotten, and when the
 * timer fires before the stored deadline it re-arms for the rest. A
 * deadline never fires late. `timer.data` is the caller's, as with a plain
 * uv timer; close the handle with uv_close((uv_handle_t *)&d->timer, ...). */
typedef struct gw_deadline {
    /* what a set or a clear reads, in one line before the timer's (whose
     * lines are cold when a connection's next request comes) */
    uv_loop_t *loop;
    uint64_t due;   /* loop time (ms) of the deadline; 0: none */
    uint64_t armed; /* loop time the timer fires at while active; else 0 */
    uv_timer_cb cb;
    uv_timer_t timer;
} gw_deadline;
void gw_deadline_init(uv_loop_t *loop, gw_deadline *d, void *data);
void gw_deadline_set(gw_deadline *d, uv_timer_cb cb, uint64_t ms);
void gw_deadline_clear(gw_deadline *d);
/* The gateway's one clock: CLOCK_MONOTONIC in nanoseconds (the clock
 * uv_hrtime reads; libuv's loop time, uv_now, is it in milliseconds). Any
 * thread. */
uint64_t gw_now_ns(void);
/* gw_now_ns read once a loop pass of w (at the first call after the loop
 * woke, or after its timers ran), the same for the rest of the pass, as
 * nginx caches its time per event-loop pass: a request's start, its
 * upstream head's send, the response head and its end (latency metrics,
 * the access log, the breaker's outcome) are at the resolution of one pass
 * (the events of one wake-up, tens of microseconds under load), without a
 * clock read each (~4 a request: 2 % of the gateway's user time on a VM).
 * w's thread only. */
static inline uint64_t gw_loop_ns(gw_worker *w) {
    if (!w->now_ns)
        w->now_ns = gw_now_ns();
    return w->now_ns;
}
/* The wall clock: CLOCK_REALTIME in epoch milliseconds, for what an
 * operator reads (stamps, the breaker's clock as the library's default);
 * never for durations. Any thread. */
int64_t gw_wall_ms(void);
/* Copy `src` (NULL: "") into dst[cap], cut to fit; always terminated. */
void gw_copy_str(char *dst, size_t cap, const char *src);
void gw_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* redis.c: /status's "redis": the address, the user, whether a password is
 * given (never the password), AUTH's last result and Redis's reason for the
 * last refusal, the counts summed over workers. */
void gw_redis_status_json(gw_buf *b);
const char *gw_status_text(int status);
/* A listening socket with SO_REUSEPORT, opened into a uv_tcp_t. */
int gw_listen_tcp(uv_loop_t *loop, uv_tcp_t *tcp, const char *host, int port,
                  bool reuseport, uv_connection_cb cb);
char *gw_read_file(const char *path, size_t *len);

/* ------------------------------------------------------------------ */
/* httpd.c: a small buffered HTTP/1.1 server (admin API, test backend)  */
/* ------------------------------------------------------------------ */

typedef struct httpd httpd;
typedef struct httpd_conn httpd_conn;

typedef struct httpd_req {
    const char *method;
    char *url, *path, *query; /* path and query split from url */
    sy_header headers[GW_MAX_HEADERS];
    size_t header_count;
    char *body;
    size_t body_len;
    bool keep_alive;
    int http_minor;
} httpd_req;

/* Called once per request; answer now or later with httpd_respond. */
typedef void (*httpd_handler)(httpd_conn *c, httpd_req *r, void *data);

httpd *httpd_new(uv_loop_t *loop, const char *host, int port, httpd_handler h,
                 void *data, size_t max_body);
void httpd_close(httpd *s);
/* Answer the current request of c; `headers` is "Name: v\r\n"... or NULL.
 * Copies everything. */
void httpd_respond(httpd_conn *c, int status, const char *content_type,
                   const char *headers, const char *body, size_t len);
/* The value of a request header, or NULL (case-insensitive name). */
const char *httpd_header(const httpd_req *r, const char *name, size_t *len);
uv_loop_t *httpd_loop(httpd_conn *c);

/* One admin request: its connection and request, and its path split into
 * decoded segments (seg[0] is the endpoint's name). admin.c. */
typedef struct gw_admin_call {
    httpd_conn *c;
    httpd_req *r;       /* the request; NULL for an actuator's change */
    const char *method; /* as a change is kept (state.c) */
    const char *query;
    const char *body;
    size_t len;
    char *seg[5];
    int ns;
    const char *what; /* the change's name from its caller, or NULL */
} gw_admin_call;

/* A row of the admin port's table of endpoints that another file answers:
 * the methods it takes (GW_M_GET takes HEAD too), its path as segments
 * joined by '/' ("*": any one segment), its answer. */
enum { GW_M_GET = 1, GW_M_PUT = 2, GW_M_POST = 4, GW_M_DELETE = 8 };
typedef void (*gw_admin_answer)(gw_admin_call *a);
typedef struct gw_admin_page {
    unsigned methods;
    const char *pattern;
    gw_admin_answer answer;
} gw_admin_page;

/* admin.c: the admin port's JSON answers, every admin file's: a built
 * body (500 {"error": "out of memory"} when it failed, gw.h), a cJSON
 * value (taken; NULL or unprintable: 500), {"error": msg},
 * {"error": {located error}}. */
struct cJSON;
void gw_reply_json(httpd_conn *c, int status, const gw_buf *b);
void gw_reply_cjson(httpd_conn *c, int status, struct cJSON *j);
void gw_reply_error(httpd_conn *c, int status, const char *msg);
void gw_reply_sy_error(httpd_conn *c, int status, const sy_error *e);
/* A route of `source` upserted (json) or removed (json NULL) through the
 * admin API's one stage-and-commit helper, as PUT or DELETE
 * /routes/<source>/<id> (kept likewise; the owner and etcd questions are
 * the caller's), named `what`: answered ok_status with an empty body, or
 * the located error. With id NULL, json is the source's whole document
 * (PUT /routes/<source>). The actuator's writes. */
void gw_admin_route_change(httpd_conn *c, const char *source, const char *id,
                           const char *json, size_t len, const char *what,
                           int ok_status);

/* admin_ops.c: the operator's admin endpoints (main thread) */
/* console_html.c (made from console.html at build time): the page */
extern const char gw_console_html[];
void gw_admin_console(gw_admin_call *a);
void gw_admin_explain(gw_admin_call *a);
void gw_admin_shadowed(gw_admin_call *a);
void gw_admin_changes(gw_admin_call *a);
void gw_admin_instances(gw_admin_call *a);
/* A committed change's report, kept for GET /changes. */
void gw_changes_note(const gw_buf *report);
/* Does the query parameter p (n bytes, up to '&') have a key that reads
 * as dry_run (dryRun, dry-run, ...)? */
bool gw_dry_run_key(const char *p, size_t n);
/* ?dry_run=1 (or true) in the query: 1; none, or dry_run=0 (false): 0;
 * anything else that reads as dry_run (a bare one, another value or
 * spelling): -1, and two of them -2, refused rather than taken as a real
 * change. */
int gw_dry_run(const char *query);
/* PUT /routes/<source>?dry_run=1: the diff and the impact, nothing
 * changed. */
void gw_admin_dry_run(httpd_conn *c, const char *source, const char *body,
                      size_t len);
/* store.c: with --etcd, an admin change (method and decoded path
 * segments, as admin.c got them) written through to etcd and answered
 * once etcd accepted it; false when there is no store (apply it here). */
bool gw_store_admin(httpd_conn *c, const char *method, char *const *seg, int ns,
                    const char *body, size_t len);
/* One route of `source` upserted (json) or removed (NULL) through the
 * store; answered with ok_status once etcd accepted it. */
void gw_store_route(httpd_conn *c, const char *source, const char *id,
                    const char *json, size_t len, int ok_status,
                    const char *what);

/* actuator.c: SCG's /actuator/gateway/... endpoints, rows of admin.c's
 * table. */
extern const gw_admin_page gw_actuator_pages[];
extern const size_t gw_actuator_page_count;

#endif /* GW_H */
