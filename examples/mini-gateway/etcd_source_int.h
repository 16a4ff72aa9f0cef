/*
 * etcd_source_int.h - the etcd source's private state, shared by the
 * source (etcd_source.c: records, applying, the protocol) and its status
 * (etcd_status.c). Not for the host: etcd_source.h is the module's API.
 */
#ifndef GW_ETCD_SOURCE_INT_H
#define GW_ETCD_SOURCE_INT_H

#include "etcd_decode.h"
#include "etcd_http.h"
#include "etcd_source.h"

#include <stdbool.h>
#include <stdint.h>

/* One route source: PREFIX routes/<name>. */
typedef struct source_rec {
    char *name;
    char *key;
    int64_t mod_revision;    /* of the last value (or delete) seen */
    int64_t create_revision; /* of the key's current incarnation */
    bool present;            /* the key exists */
    bool applied;            /* a document from etcd is live */
    char version[128];       /* of the live document, "" if none */
    bool has_version;
    uint64_t checksum; /* of the live document's bytes */
    char *error;       /* last attempt's error, NULL if it succeeded */
    sy_error refused;  /* code != 0: the host's check refused the last
                          document (gw_etcd_options.check_document) */
    size_t lib_index;  /* the router's index of the source, or SIZE_MAX */
    bool stale;        /* committed since applied/version/checksum were read */
    bool seen;         /* listed by the full read being diffed */
    bool registered;   /* the router has the source (it holds at most 256:
                          the changes of one it refused are refused) */
    bool owned;        /* registered by the etcd source itself (not a
                          route file's): removed after its key's deletion
                          when the router is full (make_room) */
} source_rec;

/* One instance: PREFIX instances/<service>/<id>. */
typedef struct inst_rec {
    char *id;
    int64_t mod_revision;
    etcd_instance val; /* the live value (val.json NULL: none valid) */
    char *error;       /* last put's error, NULL if it was accepted */
    bool seen;         /* listed by the full read being diffed */
    bool gone;         /* deleted by the change being staged: leaves the
                          list once it is staged (etcd_source.c) */
} inst_rec;

typedef struct service_rec {
    char *name;
    inst_rec *v; /* sorted by id */
    size_t n, cap;
    bool touched;
    size_t gone_n; /* instances marked gone, not dropped yet */
    char *error;   /* the router rejected the list (NULL: accepted) */
} service_rec;

typedef enum state {
    ST_CONNECTING = 0,
    ST_READING,
    ST_WATCHING,
    ST_BACKOFF,
    ST_STOPPED
} state;

struct gw_etcd {
    uv_loop_t *loop;
    sy_router *router;
    gw_etcd_options opts;
    char *url;
    char *prefix;
    size_t prefix_len;
    etcd_keys keys;          /* prefix and prefix_len, for decoding */
    char *key_b64, *end_b64; /* the prefix range */
    etcd_endpoint *eps;
    size_t ep_count, ep_index;
    /* every request's extra headers ("Authorization: ...\r\n" with
     * --etcd-user) and transport (TLS), NULL when none */
    char *auth_header;
    /* the token's renewal before it expires (etcd_auth.c): its timer and
     * its login exchange */
    uv_timer_t *auth_timer;
    etcd_http *auth_http;
    void *auth_login;    /* its state, freed if the source stops meanwhile */
    char *password;      /* the next login's (a copy; the file's last read) */
    char *password_file; /* opts.password_file's copy, or NULL */
    void *tls;           /* the SSL_CTX of https:// endpoints (etcd_tls.c) */
    char tls_error[320]; /* the last exchange's TLS failure, for fail() */
    /* the watched member's liveness (etcd_probe.c) */
    uv_timer_t *probe_timer;
    etcd_http *probe_http;

    uv_timer_t retry_timer;
    uint32_t backoff_ms;
    uint64_t rng;    /* jitter */
    etcd_http *http; /* the one exchange in flight, or NULL */
    bool stopping;

    /* full read in progress */
    int64_t read_revision;
    etcd_change_list pending;
    bool need_full_read;
    bool force_full; /* the next full read applies every key */
    char cluster_id[32];

    /* everything below is shared with status readers: under mu */
    uv_mutex_t mu;
    state st;
    bool connected;
    int64_t revision;
    char *last_error;
    uint64_t reconnects, full_reads, commits, events, rejected;
    uint64_t progress_notifies; /* watch lines with no event */
    /* puts of keys under the prefix that are no route or instance key
     * (etcd_keys.on_other), and the last one with what it lacks */
    uint64_t ignored_keys;
    char ignored_key[200];
    const char *ignored_why;
    /* tokens got (the first and renewals), renewals started, tokens
     * dropped because etcd rejected them */
    uint64_t auth_logins, auth_renewals, auth_rejections;
    uint64_t last_commit_us, commit_us_total; /* time spent committing */
    /* the CPU time of the commits; the time spent reading fingerprints */
    uint64_t commit_cpu_us_total, fingerprint_us_total;
    /* the last full read: the keys it listed under the prefix, and the
     * time its last page to its commit held the loop (sort, diff, apply) */
    uint64_t last_full_read_keys, last_full_read_us;
    /* time spent parsing watch lines and decoding their values */
    uint64_t last_decode_us, decode_us_total;
    /* the watch response being applied, and the last one committed */
    gw_etcd_trace trace, last_trace;
    source_rec *src;
    size_t src_n, src_cap;
    service_rec *svc;
    size_t svc_n, svc_cap;
    size_t svc_hint; /* the service found last (find_service) */
};

/* The record of source `name`, or NULL (under mu). */
source_rec *etcd_find_source(gw_etcd *e, const char *name);
/* The record of service `name` (created when asked; NULL: none, or out of
 * memory), and the index of instance `id` in its sorted list, or where it
 * would go (*found false). Under mu. */
service_rec *etcd_find_service(gw_etcd *e, const char *name, bool create);
size_t etcd_find_inst(const service_rec *s, const char *id, bool *found);
/* A full read's keys (got, taken from as they move) against the records
 * (etcd_diff.c): into diff, the keys not applied at their mod_revision,
 * the route keys in creation order, and a delete for every record the
 * read did not list. False: out of memory (apply nothing). Under mu. */
bool etcd_full_read_diff(gw_etcd *e, etcd_change_list *got,
                         etcd_change_list *diff);
/* The router's index of a source (registration order), cached; SIZE_MAX
 * when the router does not know it. */
size_t etcd_lib_source_index(gw_etcd *e, source_rec *s);

/* Something failed: keep serving, drop the exchange, move to the next
 * endpoint after the backoff and resume (etcd_source.c). */
void etcd_source_fail(gw_etcd *e, const char *what, const char *err);
/* The watched member's liveness probe (etcd_probe.c): started with the
 * source, stopped with it. */
int etcd_probe_start(gw_etcd *e);
void etcd_probe_stop(gw_etcd *e);
/* Close an exchange and a calloc'd timer of the source (freed once
 * closed); both set to NULL. */
void etcd_close_timed(etcd_http **http, uv_timer_t **timer);

/* Authentication (etcd_auth.c): is a login due (a user and no token)?
 * Does an answer (its status, its text or the error) say the token is
 * invalid or expired? Forget the token; log in (the exchange kept in
 * *slot for its owner to close), then done(err or NULL). */
bool etcd_auth_needed(const gw_etcd *e);
bool etcd_auth_expired(int status, const char *text);
void etcd_auth_drop(gw_etcd *e);
/* Stop renewing (the source stops). */
void etcd_auth_stop(gw_etcd *e);
void etcd_auth_login(gw_etcd *e, etcd_http **slot,
                     void (*done)(gw_etcd *e, void *data, const char *err),
                     void *data);

/* TLS (etcd_tls.c): the context for https:// endpoints from the options
 * (0, or -1 with err); a transport for one exchange with ep (NULL for
 * http://; freed when the exchange is); the context freed. */
int etcd_tls_init(gw_etcd *e, char *err, size_t cap);
const etcd_http_transport *etcd_transport(gw_etcd *e, const etcd_endpoint *ep);
void etcd_tls_free(gw_etcd *e);

#endif /* GW_ETCD_SOURCE_INT_H */
