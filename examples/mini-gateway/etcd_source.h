/*
 * etcd_source.h - routes and instances from etcd v3 for the mini-gateway.
 *
 * A self-contained module: it speaks to etcd 3.4's HTTP/JSON gateway
 * (/v3/kv/range, /v3/watch) on the host's libuv loop, with http-parser and
 * cJSON, and feeds a sy_router. Key layout under PREFIX (default
 * "/switchyard/"):
 *   PREFIX "routes/<source>"          one route document per source
 *   PREFIX "instances/<service>/<id>" one instance object (an entry of the
 *                                     instances file format)
 * A full range read at start, then a watch from the next revision; each
 * watch response is applied as one change. etcd down or compacted: the
 * router keeps its last good snapshot, the module retries with backoff and
 * resynchronises (from the last applied revision, or with a full read when
 * that revision was compacted). --etcd may list the members of a cluster:
 * the watch moves to the next one when its member fails or stops
 * answering a linearizable read each second (etcd_probe.c). With a user
 * it authenticates (etcd_auth.c); https:// members are spoken to with TLS
 * (etcd_tls.c). Admin writes go through etcd_write.h. See
 * docs/config-sources.md.
 *
 * Threads: gw_etcd_start and gw_etcd_stop on the loop's thread; the status
 * and metrics calls on any thread (they copy under an internal mutex).
 */
#ifndef GW_ETCD_SOURCE_H
#define GW_ETCD_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <switchyard.h>
#include <uv.h>

typedef struct gw_etcd gw_etcd;

typedef enum gw_etcd_log_level {
    GW_ETCD_LOG_INFO = 0,
    GW_ETCD_LOG_WARN = 1,
    GW_ETCD_LOG_ERROR = 2
} gw_etcd_log_level;

/*
 * Where the time of one watch response went, for benchmarks: wall-clock
 * stamps (CLOCK_REALTIME, microseconds since the epoch, comparable with
 * other processes' clocks on the same machine) and this thread's CPU time.
 * For a full read, the stamps of the stream are 0.
 */
typedef struct gw_etcd_trace {
    int64_t revision;      /* what the router reflects after it */
    int64_t first_byte_us; /* the read that brought the line's first byte */
    int64_t last_byte_us;  /* the read that brought its newline */
    int64_t decoded_us;    /* the line parsed and its values decoded */
    int64_t committed_us;  /* sy_router_commit returned: published */
    uint64_t line_bytes;   /* the JSON line's length */
    uint32_t reads;        /* reads (HTTP body pieces) that brought it */
    uint64_t decode_cpu_us, commit_cpu_us; /* this thread's CPU time */
} gw_etcd_trace;

typedef struct gw_etcd_options {
    const char *url;             /* "http://127.0.0.1:2379"; a comma-separated
                                    list: the next endpoint after a failure */
    const char *prefix;          /* NULL: "/switchyard/" */
    uint32_t backoff_min_ms;     /* 0: 100 */
    uint32_t backoff_max_ms;     /* 0: 5000 */
    uint32_t request_timeout_ms; /* 0: 10000 (connect, and the silence
                                    within an answer: a range page arrives
                                    as long as its bytes keep coming) */
    /* Optional, called on the loop's thread after every change from etcd
     * was committed (published: requests are routed by it): the etcd
     * revision the router now reflects and the generation of the snapshot
     * the commit published. The module does not read the snapshot's
     * fingerprint here (a walk of every route); sy_snapshot_fingerprint
     * does when the host needs it. */
    void (*on_commit)(void *data, int64_t revision, uint64_t generation);
    /* Optional log sink (loop's thread); NULL: stderr. */
    void (*on_log)(void *data, gw_etcd_log_level level, const char *message);
    void *data;
    /* etcd authentication: a user and its password (NULL: none); the
     * token is fetched, sent with every request and renewed before it
     * expires: at two thirds of a JWT's lifetime, else every
     * auth_renew_ms (0: 100000, a third of etcd's default TTL); and
     * when etcd says it expired (etcd_auth.c). The password is copied.
     * With password_file, every login reads its first line again (a
     * password rotated in etcd and in the file is used without a
     * restart); while it cannot be read, the password read last (or
     * `password`) is used and the failure logged. */
    const char *user, *password;
    const char *password_file;
    uint64_t auth_renew_ms;
    /* TLS for https:// endpoints (etcd_tls.c, OpenSSL): the CA file that
     * signs the members' certificates, and the client's certificate and
     * key files when the members ask for one. */
    const char *cacert, *cert, *key;
    /* Optional: the host's own check of a route document before it is
     * staged (loop's thread), the one its route files and admin API run
     * (the mini-gateway's gw_document_check). Non-zero refuses the
     * document with err's located error, as the router refuses a broken
     * one: the source's last good document keeps serving and its status
     * shows the error. */
    int (*check_document)(const char *json, size_t len, sy_error *err);
} gw_etcd_options;

/*
 * Start the source on `loop` (which must be running or about to run) for
 * `router`. Returns 0, or -1 with a message in err (bad URL or prefix, out
 * of memory). etcd need not be up: the module connects, and retries, from
 * the loop. The router must outlive the module. Loop's thread.
 */
int gw_etcd_start_opts(uv_loop_t *loop, sy_router *router,
                       const gw_etcd_options *opts, gw_etcd **out, char *err,
                       size_t err_len);
/* The same with default options. */
int gw_etcd_start(uv_loop_t *loop, sy_router *router, const char *url,
                  const char *prefix, gw_etcd **out, char *err, size_t err_len);

/*
 * Stop: cancel requests, close connections and timers. The memory is freed
 * once libuv has closed the handles, so the loop must run again (e.g.
 * uv_run(loop, UV_RUN_DEFAULT) until it returns). Loop's thread.
 */
void gw_etcd_stop(gw_etcd *e);

/* The trace of the last committed change (zeros before one). Any thread. */
void gw_etcd_last_trace(gw_etcd *e, gw_etcd_trace *out);

/* The etcd revision the router reflects (0 before the first full read).
 * Any thread. */
int64_t gw_etcd_revision(gw_etcd *e);

/*
 * The whole status as a new cJSON object the caller owns (cJSON_Delete):
 *   {"url", "prefix", "state" ("connecting"|"reading"|"watching"|"backoff"),
 *    "connected": bool, "revision": N (etcd revision the router reflects),
 *    "fingerprint": "hex16" (of the router's live snapshot, which
 *    reflects that revision; read when asked, not after every commit),
 *    "last_error": string|null, "reconnects", "full_reads", "commits",
 *    "events", "rejected", "progress_notifies" (progress notifications
 *    the watch asked etcd for and got): counters, "last_commit_us" /
 * "commit_us_total": time spent applying changes to the router (the last
 * commit's, all commits'), "commit_cpu_us_total": their CPU time,
 * "fingerprint_us_total": time spent reading fingerprints for status and
 * metrics, "last_decode_us" / "decode_us_total": time spent parsing watch
 *    responses and decoding their values (the last one's, all of them),
 *    "sources": [{"name", "key", "mod_revision", "present" (the key
 *                 exists), "version" (string|null), "checksum"
 *                 ("hex16"|null), "error" (string|null)}],
 *    "services": [{"name", "instances", "error" (string|null)}]}
 * "error" of a source is the last attempt's located error ("path: message")
 * while the previous good document keeps serving. Any thread.
 */
cJSON *gw_etcd_status(gw_etcd *e);
/* The same serialised (unformatted), malloc'd; free() it. Any thread. */
char *gw_etcd_status_json(gw_etcd *e);

/* One source's etcd view, for merging into a host's own source list. */
typedef struct gw_etcd_source_info {
    char key[512];        /* full etcd key */
    int64_t mod_revision; /* of the last value seen for the key */
    char version[128];    /* of the live document, "" when none */
    uint64_t checksum;    /* of the live document's bytes, 0 when none */
    char error[512];      /* last attempt's error, "" when it succeeded */
    sy_error refused;     /* code != 0: that error was the host's check's
                             (check_document), the router never saw it */
} gw_etcd_source_info;
/* Fills out and returns 0, or -1 when the source does not come from etcd.
 * Any thread. */
int gw_etcd_source_info_get(gw_etcd *e, const char *source,
                            gw_etcd_source_info *out);

/*
 * Prometheus text lines ("switchyard_etcd_revision",
 * switchyard_etcd_info{revision,fingerprint} 1, ..._connected,
 * ..._reconnects_total, ..._full_reads_total, ..._commits_total,
 * ..._rejected_total, ..._source_error{source="..."}) into buf, NUL-
 * terminated; returns the length needed without the NUL (as snprintf:
 * call again with a bigger buffer when it is >= cap). Any thread.
 */
size_t gw_etcd_metrics_text(gw_etcd *e, char *buf, size_t cap);

#endif /* GW_ETCD_SOURCE_H */
