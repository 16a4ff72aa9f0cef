/*
 * ngx_http_switchyard.h - types shared by the files of
 * ngx_http_switchyard_module: configuration, the shared-memory zone that
 * carries route and instance documents between nginx workers, and the
 * per-worker router state. docs/nginx.md describes the protocol.
 */
#ifndef NGX_HTTP_SWITCHYARD_H
#define NGX_HTTP_SWITCHYARD_H

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <switchyard.h>

/* Worker slots in the zone (status per worker); workers past this many
 * route normally but do not report a fingerprint. */
#define SW_MAX_WORKERS 64
/* How often an idle worker looks at the zone's generation. */
#define SW_POLL_MS 100
#define SW_DEFAULT_ZONE_SIZE (32 * 1024 * 1024)

/* What a stored document is. One entry per (kind, name) for the first
 * two kinds, one per (source, route id) for the last two (the newest
 * change of a route in a source wins: sw_doc_same_key); a routes document
 * for a source supersedes the stored route changes of that source (the
 * library replaces upserted routes too). Keyed by id alone, DELETE
 * /routes/S1/R then PUT /routes/S2/R kept only the PUT, and a worker that
 * replayed it still had S1's R (its file's) beside S2's. Route ids are
 * unique per router (the library refuses R in two sources at once), so a
 * route id has at most one upsert among its stored changes that the
 * replay finds in force; the removals of other sources are replayed only
 * while their source holds the route (sw_stage_doc). */
typedef enum {
    SW_DOC_ROUTES = 0,      /* name: source; data: routes document */
    SW_DOC_INSTANCES = 1,   /* name: service; data: instances list */
    SW_DOC_ROUTE = 2,       /* name: route id; source; data: one route */
    SW_DOC_ROUTE_REMOVE = 3 /* name: route id; source; no data */
} sw_doc_kind;

#define SW_IS_ROUTE_OP(k) ((k) == SW_DOC_ROUTE || (k) == SW_DOC_ROUTE_REMOVE)

/* A document read from a file at configuration time (cycle pool). */
typedef struct {
    ngx_str_t path;
    ngx_str_t name; /* source name (routes) */
    ngx_str_t text;
    uint64_t hash; /* of text (sw_hash): what stored changes were made on */
} sw_file_t;

/* What a request's module context is: a routed request's (sw_req_ctx_t)
 * or an admin request's (sw_admin_ctx_t). Both structs start with it, and
 * whatever reads the context checks it first. */
typedef enum { SW_CTX_REQUEST = 1, SW_CTX_ADMIN = 2 } sw_ctx_kind;

/* Where a stored document came from (/status). */
typedef enum { SW_ORIGIN_ADMIN = 0, SW_ORIGIN_STATE = 1 } sw_origin;

/* The pipes that wake workers (ngx_http_switchyard_notify.c): fd[i][0]
 * is read by worker i, fd[i][1] written by the others. */
typedef struct {
    ngx_fd_t fd[SW_MAX_WORKERS][2];
    ngx_uint_t count;
} sw_notify_t;

typedef struct {
    ngx_array_t route_files;    /* sw_file_t, one source each */
    ngx_array_t instance_files; /* sw_file_t */
    size_t zone_size;
    ngx_shm_zone_t *zone;
    sw_notify_t *notify; /* NULL: one worker, or no master */
    ngx_flag_t used;     /* any switchyard directive was seen */
    /* an upstream block has switchyard_balancer; which ones */
    ngx_flag_t balancer;
    ngx_array_t balancers; /* ngx_http_upstream_srv_conf_t * */
    /* a directive uses $switchyard_upstream (the variable form), which
     * cannot apply a route's timeouts, Retry or CircuitBreaker. Which
     * location serves a route is not known at load: with this set, or
     * without a balancer, such routes are refused (sw_router_create) */
    ngx_flag_t variable_form;
    /* a switchyard location's proxy_pass is http://UPSTREAM with nothing
     * after it: nginx gives it no SSL context, so https and wss targets
     * (routes, secure instances) are refused (sw_host_runs) */
    ngx_flag_t plain_form;
    /* a switchyard location does not pass a WebSocket upgrade (nginx
     * sends Upgrade "" and HTTP/1.0 unless the location says otherwise):
     * ws and wss targets are refused (sw_host_runs) */
    ngx_flag_t upgrade_lost;
    /* what the module runs, as sy_router_options.host_runs: set at
     * postconfiguration (sw_host_runs), in the cycle's pool */
    const char *const *host_runs;
    /* every proxy_pass of the http block, checked once merged
     * (ngx_http_switchyard_location.c) */
    ngx_array_t proxy_passes;
    /* every rewrite of a location or its `if` that does not redirect:
     * refused in a switchyard location once merged */
    ngx_array_t rewrites;
    /* every switchyard_admin location (sw_loc_conf_t *) */
    ngx_array_t admins;
    /* every fastcgi_pass, uwsgi_pass, scgi_pass, grpc_pass and
     * memcached_pass: none may send to a switchyard_balancer upstream */
    ngx_array_t other_passes;
    /* every location with switchyard on (sw_loc_conf_t *) */
    ngx_array_t routed;
    uint64_t instances_hash; /* of every instances file, in order */
    ngx_str_t state_path;    /* switchyard_state, or empty */
    /* router options */
    ngx_flag_t strip_host_port;
    ngx_flag_t merge_slashes;
    ngx_uint_t escaped_slashes; /* sy_escaped_slashes */
    /* switchyard_eject_time: the first ejection of an instance; the n-th
     * lasts n times it, at most SW_EJECT_MAX_TIMES times */
    ngx_msec_t eject_ms;
} sw_main_conf_t;

typedef struct {
    ngx_flag_t enable;
    ngx_flag_t admin;
    /* the add_header names and whether expires is on at this level, as
     * the headers module inherits them (ngx_http_switchyard_location.c) */
    ngx_array_t *added; /* ngx_str_t */
    ngx_flag_t expires;
    /* an `if` block of this location has a proxy_pass (set on the if's
     * conf as parsed, on the location's at the merge) */
    ngx_flag_t proxy_in_if;
    /* switchyard_admin's location (its content handler must stay the
     * admin API's) and the directive's file:line, for sw_location_check */
    ngx_http_core_loc_conf_t *admin_clcf;
    ngx_str_t admin_file;
    ngx_uint_t admin_line;
    /* the `switchyard on` this level has (its own or inherited): where */
    ngx_str_t on_file;
    ngx_uint_t on_line;
    /* a real location (not an if, not the server's) with switchyard on:
     * its core conf, checked for a proxy_pass (sw_location_check) */
    ngx_http_core_loc_conf_t *routed_clcf;
} sw_loc_conf_t;

/* ---- the shared zone ---- */

/* Passive health shared by the workers: one entry per instance that
 * ever failed (ngx_http_switchyard_balancer.c). */
#define SW_HEALTH_SLOTS 1024
#define SW_HEALTH_NAME 64
#define SW_EJECT_FAILURES 5
#define SW_EJECT_BASE_MS 30000 /* switchyard_eject_time's default */
#define SW_EJECT_MAX_TIMES 10

typedef struct {
    ngx_atomic_t key; /* hash of service and id; 0 free, 1 being claimed */
    u_char service[SW_HEALTH_NAME];
    u_char id[SW_HEALTH_NAME];
    ngx_atomic_t failures;  /* consecutive, from every worker */
    ngx_atomic_t ejections; /* so far, less one a recovery */
    ngx_atomic_t ejected;   /* 1 from an ejection to the next success */
    ngx_atomic_t until_ms;  /* end of the current ejection */
} sw_health_t;

/* One document stored by the admin location (slab memory). */
typedef struct sw_shm_doc_s sw_shm_doc_t;
struct sw_shm_doc_s {
    sw_shm_doc_t *next;
    ngx_uint_t kind; /* sw_doc_kind */
    uint64_t seq;    /* zone generation that stored it */
    /* the hash of the file it was made on (its source's routes file; for
     * instances, every instances file): a reload whose file differs drops
     * it (sw_zone_reconcile) */
    uint64_t base;
    uint64_t changed_us; /* when it was accepted (wall clock): the newer of
                          * two changes of a key wins when the
                          * state file of another nginx is taken */
    ngx_uint_t origin;   /* sw_origin */
    size_t name_len;
    u_char *name;
    size_t source_len; /* route changes: the route's source */
    u_char *source;
    size_t len;
    u_char *data;
    /* where a worker that did not see the changes live replays it (a
     * respawn, a reload's or an upgrade's new workers, a worker behind by
     * several): documents are replayed by order, not seq. A route change
     * that updated its route in place inherits the order (and flags) of
     * the change of that route it replaces, so the route keeps the rank
     * position it had when it was inserted; every other document: its
     * seq (set by sw_zone_link_locked when 0). */
    uint64_t order;
    ngx_uint_t flags; /* SW_DOC_INSERTED, SW_DOC_INSERT_NOW */
};

/* The route change inserted its route (it was not in its source when the
 * change was taken: new, or removed before): a worker that holds a route
 * of that id from before (its file's, or one removed since) removes it
 * first, so that the route is added at the end as it was live. */
#define SW_DOC_INSERTED 1u
/* This very change inserted its route (SW_DOC_INSERTED is kept by the
 * in-place updates that follow it): what another nginx's state file says
 * of its change, taken into this zone (sw_state_follow_locked). */
#define SW_DOC_INSERT_NOW 2u

/* What each worker publishes after applying the zone's documents. */
typedef struct {
    ngx_pid_t pid;
    ngx_uint_t epoch;     /* configuration epoch the worker belongs to */
    uint64_t generation;  /* zone generation applied */
    uint64_t fingerprint; /* of the worker's live snapshot */
    uint64_t routes;
    int64_t updated_ms;
    int64_t updated_us; /* the same in microseconds (wall clock) */
    /* the last change applied, in microseconds: reading the documents
     * out of the zone (staged on a change set under the zone's mutex; 0
     * for the worker that took the change), committing them (wall; CPU
     * time of both), reading the new snapshot's fingerprint */
    uint64_t copy_us, apply_us, apply_cpu_us, publish_us;
    uint64_t wakeups; /* notifications from other workers received */
    int last_rc;      /* SY_OK or the code of the last failed sync */
    char last_error[520];
} sw_slot_t;

/* The zone's format: "SWZONE" and a version, the first word of sw_shm_t
 * (with the sizes of sw_shm_t and sw_shm_doc_t after it). A zone nginx
 * keeps across a reload is attached only when all three match this
 * build's (sw_zone_format_why); bump the version with any change of the
 * zone's structures that keeps their sizes. A zone of the modules before
 * (version 1, unversioned) starts with its generation, a counter that
 * never reads as SW_ZONE_MAGIC. */
#define SW_ZONE_MAGIC 0x53575a4f4e450000ULL /* "SWZONE\0\0" */
#define SW_ZONE_VERSION 2
#define SW_ZONE_FORMAT (SW_ZONE_MAGIC | SW_ZONE_VERSION)

typedef struct {
    uint64_t format;         /* SW_ZONE_FORMAT */
    uint32_t shm_size;       /* sizeof(sw_shm_t) */
    uint32_t doc_size;       /* sizeof(sw_shm_doc_t) */
    ngx_atomic_t generation; /* bumped by every stored document */
    ngx_atomic_t epoch;      /* bumped by every (re)load of the config */
    sw_shm_doc_t *docs;
    sw_slot_t slots[SW_MAX_WORKERS];
    ngx_atomic_t ejected_count; /* health entries with ejected set */
    /* the library's policy store (rate-limit buckets, breakers), shared
     * by every worker: sy_policy_store_init'ed in the zone */
    void *policy;
    size_t policy_len;
    /* the state file as this zone last wrote or read it */
    uint64_t state_ino, state_size, state_mtime_ns;
    sw_health_t health[SW_HEALTH_SLOTS];
    /* health entries ever claimed: while none is, a success has no
     * entry to look up (sw_health_report) */
    ngx_atomic_t health_claimed;
} sw_shm_t;

typedef struct {
    sw_shm_t *sh;
    ngx_slab_pool_t *shpool;
    sw_main_conf_t *mcf; /* the configuration that mapped it */
} sw_zone_ctx_t;

/* A copy of stored documents taken under the zone lock. */
typedef struct {
    ngx_uint_t kind;
    uint64_t seq;
    uint64_t order;   /* sw_shm_doc_t.order */
    ngx_uint_t flags; /* sw_shm_doc_t.flags */
    char *name;       /* NUL-terminated, malloc */
    char *source;     /* NUL-terminated, malloc ("" unless a route change) */
    char *data;       /* malloc */
    size_t len;
} sw_doc_copy_t;

ngx_int_t sw_zone_init(ngx_shm_zone_t *zone, void *data);
/* Why a zone's header (the first bytes of its sw_shm_t) is not this
 * build's format (a zone kept across a reload that loaded a module of
 * another format), or NULL when it is. */
static ngx_inline const char *sw_zone_format_why(const sw_shm_t *sh) {
    if (sh == NULL)
        return "it holds no switchyard header";
    if ((sh->format & ~0xffffULL) != SW_ZONE_MAGIC)
        return "it has no format stamp (a module before zone format 2)";
    if (sh->format != SW_ZONE_FORMAT)
        return "its format version is not this module's";
    if (sh->shm_size != sizeof(sw_shm_t) ||
        sh->doc_size != sizeof(sw_shm_doc_t))
        return "its structures' sizes are not this module's";
    return NULL;
}
/* The least switchyard_zone accepts. */
size_t sw_zone_min_size(void);
#define SW_HASH_INIT 0xcbf29ce484222325ULL
uint64_t sw_hash(const u_char *p, size_t len, uint64_t h);
/* The hash a change of this kind for this source is made on (0: no such
 * source). */
uint64_t sw_doc_base(sw_main_conf_t *mcf, ngx_uint_t kind, ngx_str_t *source);
void sw_zone_reconcile(ngx_cycle_t *cycle, sw_main_conf_t *mcf);
/* The state file (ngx_http_switchyard_state.c): read into a new zone;
 * followed by worker 0 once a second (what another nginx wrote). */
void sw_state_read(sw_zone_ctx_t *z, sw_main_conf_t *mcf, ngx_log_t *log);
void sw_state_follow(ngx_log_t *log);
/* nginx -t: the stored changes read from the state file that would not
 * apply to the files, logged (ngx_http_switchyard_worker.c). */
void sw_test_stored(ngx_cycle_t *cycle, sw_main_conf_t *mcf);
/* A worker can write the state file (its directory, its lock): logged at
 * start when it cannot. */
void sw_state_check_access(sw_main_conf_t *mcf, ngx_log_t *log);
/* The same with the zone's mutex held (before a change is stored, so
 * that the file written after it keeps what another nginx wrote): the
 * number of documents taken. */
ngx_int_t sw_state_follow_locked(ngx_log_t *log);
/* The state file's flock (FILE.lock), held from sw_state_follow_locked
 * to sw_state_write_locked when a change is stored (after the zone's
 * mutex), so that no nginx writes on a file it has not read; -1 without
 * a state file or when the lock fails (logged). */
ngx_fd_t sw_state_lock(sw_main_conf_t *mcf, ngx_log_t *log);
void sw_state_unlock(ngx_fd_t fd);
/* Write every stored document to switchyard_state (if set). */
ngx_int_t sw_state_write_locked(sw_zone_ctx_t *z, sw_main_conf_t *mcf,
                                ngx_log_t *log);
/* The zone's mutex, held by the admin location from its sync to the
 * store of a change (the _locked calls). */
void sw_zone_lock(sw_zone_ctx_t *z);
void sw_zone_unlock(sw_zone_ctx_t *z);
/* Copies of the documents stored after generation `after` (all: 0),
 * sorted by order (the replay's order); *gen gets the generation they bring the
 * reader to. NGX_DECLINED when the zone belongs to a newer configuration epoch.
 * `locked`: the caller holds the zone's mutex. */
ngx_int_t sw_zone_copy(sw_zone_ctx_t *z, bool locked, ngx_uint_t epoch,
                       uint64_t after, sw_doc_copy_t **out, size_t *count,
                       uint64_t *gen);
void sw_docs_free(sw_doc_copy_t *docs, size_t count);
/* Storing a change takes two steps, so that the admin location can commit
 * it to its own router in between and store only what committed:
 * sw_zone_prepare_locked makes room for a document of len bytes (filled
 * by the caller; NULL: the zone is full), unseen by the workers;
 * sw_zone_link_locked makes it the newest document of its key
 * (sw_doc_same_key) and returns its generation, or sw_zone_discard_locked frees
 * it. */
sw_shm_doc_t *sw_zone_prepare_locked(sw_zone_ctx_t *z, ngx_uint_t kind,
                                     ngx_str_t *name, ngx_str_t *source,
                                     size_t len);
uint64_t sw_zone_link_locked(sw_zone_ctx_t *z, sw_shm_doc_t *d);
/* Is o the stored document of that key (what a new one replaces)? Route
 * changes (SW_IS_ROUTE_OP: an upsert and a removal are one key) by
 * (source, id), the other kinds by (kind, name). */
bool sw_doc_same_key(const sw_shm_doc_t *o, ngx_uint_t kind, ngx_str_t *name,
                     ngx_str_t *source);
/* The replay order and flags of a route upsert before its link: in_place,
 * the route was in its source when the change was taken. */
void sw_zone_route_order_locked(sw_zone_ctx_t *z, sw_shm_doc_t *d,
                                bool in_place);
void sw_zone_discard_locked(sw_zone_ctx_t *z, sw_shm_doc_t *d);
/* The replay order of the documents listed from `docs` (by order, then
 * seq, both ascending; seq is unique): the first after `after` (NULL: the
 * very first), or NULL past the last. One pass over the list. */
sw_shm_doc_t *sw_docs_replay_next(sw_shm_doc_t *docs,
                                  const sw_shm_doc_t *after);
/* All of them in replay order, sorted (n log n): a malloc'd array of *n
 * (the caller frees it), or NULL with *n set when there is no memory (then
 * walk them with sw_docs_replay_next, n passes) or no document. */
sw_shm_doc_t **sw_docs_replay_order(sw_shm_doc_t *docs, size_t *n);
void sw_zone_publish(sw_zone_ctx_t *z, ngx_uint_t slot, const sw_slot_t *s);

/* ---- a routed request ---- */

/* The balancer's per-request peer (ngx_http_switchyard_balancer.c), in
 * 8-byte words. */
#define SW_PEER_WORDS 14

/* What routing decided for one request; strings live in r->pool, or in
 * snap (route, service, instance, version) while the request holds it. */
typedef struct {
    ngx_uint_t kind; /* SW_CTX_REQUEST */
    ngx_str_t route;
    ngx_str_t upstream; /* scheme://host:port */
    ngx_str_t uri;      /* path?query */
    ngx_str_t host;     /* Host header to send */
    ngx_str_t instance;
    ngx_str_t version;
    ngx_str_t service; /* lb:// routes: the service */
    ngx_int_t status;  /* SetStatus on a proxied response, or 0 */
    sy_response_op *ops;
    ngx_uint_t op_count;
    /* lb:// routes: the snapshot the target (below) came from, held until
     * the request's pool goes */
    sy_snapshot *snap; /* released with the context (sw_ctx_put) */
    /* the route's connect-timeout / response-timeout metadata (0: none),
     * applied by the balancer */
    ngx_msec_t connect_timeout, response_timeout;
    /* policies (ngx_http_switchyard_policy.c): the breaker's permit
     * (borrowed from snap), an open breaker's fallback path, Retry as
     * next-upstream conditions and tries */
    sy_breaker_permit permit;
    ngx_str_t fallback;
    void (*finalize)(ngx_http_request_t *r, ngx_int_t rc); /* proxy's */
    /* the proxy's header parser and reinit, wrapped so that every answer
     * is seen by the route's Retry and breaker (sw_policy_hook) */
    ngx_int_t (*process_header)(ngx_http_request_t *r);
    ngx_int_t (*reinit_request)(ngx_http_request_t *r);
    const sy_retry_policy *rp; /* borrowed from snap */
    ngx_msec_t retry_timeout;  /* Retry's timeout, 0: none */
    ngx_uint_t next_upstream, tries;
    unsigned balanced : 1;       /* the balancer reports each attempt */
    unsigned needs_balancer : 1; /* timeouts, Retry or a breaker's limit */
    unsigned retry : 1;
    unsigned breaker_recorded : 1;
    unsigned answered : 1;  /* the current attempt's status was read */
    unsigned uri_read : 1;  /* $switchyard_uri was evaluated (proxy_pass) */
    unsigned host_read : 1; /* $switchyard_host was (proxy_set_header) */
    /* answered by the module: a no://op route, a RequestSize or
     * RequestHeaderSize status (SY_ACTION_RESPOND) */
    unsigned noop : 1;
    unsigned respond : 1;
    unsigned peer_used : 1;
    unsigned https : 1; /* upstream is https:// (wss: the route's) */
    /* the variable form looked at upstream's name (sw_upstream_resolve) */
    unsigned resolved : 1;
    /* the balancer's address of upstream (sw_target_addr), or NULL: the
     * balancer looks it up */
    const void *addr;
    /* Not zeroed for a new context (sw_ctx_get), but target.health:
     * what a retry needs to match the request again on snap (the balancer
     * picks another instance): the client's headers before the filters,
     * and the time and seed of the first match (set first by sw_route);
     * lb:// routes' target, for the outcome report (set when its health
     * is); the balancer's peer (sw_init_peer, which zeroes it), in the
     * context: no allocation from the request's pool */
    ngx_list_t orig_headers;
    int64_t now_ms;
    uint64_t seed;
    sy_target target;
    uint64_t peer[SW_PEER_WORDS];
} sw_req_ctx_t;

/* The route's rate limiters, breaker and Retry for a matched request:
 * NGX_DECLINED to go on, a status to answer (429, 403, 503), or NGX_DONE
 * (an open breaker's fallback: sw_policy_redirect once the match is
 * released). *none: the route has no rate limiter, breaker or Retry
 * (set when the phase went on, NGX_DECLINED). */
ngx_int_t sw_policy_phase(ngx_http_request_t *r, sw_req_ctx_t *ctx, sy_match *m,
                          bool *none);
ngx_int_t sw_policy_redirect(ngx_http_request_t *r, sw_req_ctx_t *ctx);
/* Retry's conditions and tries, the breaker's time limit, on the
 * request's copy of the upstream settings (the balancer). */
void sw_policy_conf(sw_req_ctx_t *ctx, ngx_http_upstream_conf_t *conf,
                    ngx_peer_connection_t *pc);
/* Record a permitted call's outcome with its breaker (once). */
sy_breaker_verdict sw_policy_record(ngx_http_request_t *r, sw_req_ctx_t *ctx,
                                    sy_outcome outcome, int status);
/* Retry or a breaker: hook the upstream (the balancer's peer init) so
 * that an answered status Retry lists is retried on the next try (any
 * status, not only those proxy_next_upstream names), a status in a
 * breaker's statusCodes and a call that fails without an answer go to
 * its fallback. */
void sw_policy_hook(ngx_http_request_t *r, sw_req_ctx_t *ctx);
/* An internal request that is a breaker's fallback gets the client's
 * method back (nginx's error_page made it a GET): the phase handler. */
void sw_policy_restore_method(ngx_http_request_t *r);

/* Match the request of ctx again on ctx->snap (its route must be the one
 * matched first) and select an instance outside `exclude` and the zone's
 * ejected ones: the balancer's retry. NGX_OK (t filled, borrowed until
 * the next match), NGX_DECLINED (no instance left), NGX_ERROR. */
ngx_int_t sw_reselect(ngx_http_request_t *r, sw_req_ctx_t *ctx,
                      const char **exclude, size_t n, sy_target *t);

/* At most this many instance ids are excluded from a selection (tried
 * ones and ejected ones). */
#define SW_MAX_EXCLUDE 32

/* The balancer's cached address of the target's host and port, and
 * "http[s]://host:port" (worker memory) in *upstream; NULL when the
 * worker has not resolved it yet (the balancer does) or out of memory.
 * gen: the generation of the snapshot t comes from, held by the caller. */
/* The variable form in a location without `resolver`: the name in
 * scheme://name:port resolved by the worker (once, cached), upstream made
 * scheme://address:port. NGX_DECLINED: an address already; NGX_ERROR: it
 * does not resolve (logged). */
ngx_int_t sw_upstream_resolve(ngx_http_request_t *r, ngx_str_t *upstream);
const void *sw_target_addr(const sy_target *t, uint64_t gen, ngx_uint_t https,
                           ngx_str_t *upstream);

/* Apply the route's SetStatus and response header operations (the
 * header filter). */
ngx_int_t sw_response_ops(ngx_http_request_t *r, sw_req_ctx_t *ctx);
/* True (logged, with `outcome`) when the request's location adds a
 * header the ops set, remove or rewrite (sw_location_response_lost). */
ngx_flag_t sw_response_refused(ngx_http_request_t *r, ngx_str_t *route,
                               const sy_response_op *ops, ngx_uint_t n,
                               const char *outcome);
/* Keep them for the answer of an internal redirect (a forward: route, a
 * breaker's fallback), which clears the context; the header filter
 * applies what was kept (sw_response_ops_kept) after the answering
 * route's own (ctx: the answering request's, whose own are skipped),
 * and only to an answer the module makes (a no://op, where their
 * SetStatus wins, or a 413/431), never to a proxied one. */
ngx_int_t sw_response_ops_keep(ngx_http_request_t *r, sw_req_ctx_t *ctx);
ngx_int_t sw_response_ops_kept(ngx_http_request_t *r, sw_req_ctx_t *ctx);
/* Kept entries some pool of the worker holds: while 0, the header filter
 * has none to look for (no call). */
extern ngx_uint_t sw_kept_live;

/* ---- passive health shared by the workers (the zone's table) ---- */

/* Report one attempt to instance `id` of `service`. */
void sw_health_report(ngx_log_t *log, const char *service, const char *id,
                      sy_outcome outcome);
/* The entry of an instance that ever failed, or NULL. */
const sw_health_t *sw_health_get(const char *service, const char *id);
/* The ids of the service's instances ejected now (at most max; borrowed
 * from the zone, which never frees an entry). */
size_t sw_health_ejected(const char *service, const char **ids, size_t max);

/* ---- the worker's router ---- */

/* What every request of a route finds the same within one snapshot (its
 * filters, the snapshot's default filters, its metadata): its timeouts
 * and whether it has a rate limiter, breaker or Retry, asked once per
 * snapshot generation (sw_route_facts) instead of per request. */
#define SW_FACTS 256
typedef struct {
    const sy_route *route; /* NULL: a free slot */
    ngx_str_t id;          /* its id (the snapshot's string) */
    ngx_msec_t connect_timeout, response_timeout;
    unsigned policy_free : 1; /* none of the three: no policy phase */
} sw_route_facts_t;

typedef struct {
    sy_router *router;
    sy_match_ctx *mctx;
    sw_main_conf_t *mcf;
    sw_zone_ctx_t *zone;
    ngx_uint_t epoch;
    uint64_t generation; /* zone generation applied */
    ngx_event_t timer;
    sy_header *hdrs; /* scratch for a request's headers */
    size_t hdr_cap;
    sw_slot_t slot;        /* what this worker last published */
    ngx_uint_t ticks;      /* of the timer */
    ngx_fd_t notify_fd;    /* read end of this worker's pipe, or -1 */
    uint64_t stage_cpu_us; /* CPU time of the last sw_worker_apply's
                            * staging (the library's copy of the body) */
    /* sw_route_facts: the routes of snapshot generation facts_gen (a
     * route's address is its own only while its snapshot lives) */
    uint64_t facts_gen;
    sw_route_facts_t facts[SW_FACTS];
    uint64_t seed; /* the requests' seeds (splitmix64), from ngx_random */
} sw_worker_t;

extern sw_worker_t sw_worker;
extern ngx_module_t ngx_http_switchyard_module;

/* True when the zone's health table has an instance ejected (now or
 * until its next success): sw_health_ejected is worth asking. */
static ngx_inline ngx_flag_t sw_health_any_ejected(void) {
    return sw_worker.zone && sw_worker.zone->sh->ejected_count != 0;
}

ngx_int_t sw_worker_start(ngx_cycle_t *cycle, sw_main_conf_t *mcf);
/* A router with the configured options and sources. */
int sw_router_create(sw_main_conf_t *mcf, sy_router **out, sy_error *err);
#define SW_MAX_FILE_CHANGES 4096
int sw_load_files(sy_router *router, sw_main_conf_t *mcf, sy_error *err,
                  ngx_str_t **path);
void sw_worker_stop(void);
/* Bring the worker's router up to the zone's generation: one atomic read
 * when nothing changed. */
void sw_worker_sync(ngx_log_t *log);
/* The same with the zone's mutex held and without publishing the slot:
 * true when something was applied (*rc, *err: its outcome; the caller
 * publishes with sw_worker_publish once it released the mutex). */
bool sw_worker_follow_locked(ngx_log_t *log, int *rc, sy_error *err);
/* Apply one document to this worker's router (the admin location's
 * validation); err is filled on failure. */
int sw_worker_apply(ngx_uint_t kind, const char *name, const char *source,
                    const char *data, size_t len, sy_error *err);
/* The same checked against this worker's live state without publishing
 * (sy_router_check): the admin location's validation. */
int sw_worker_check(ngx_uint_t kind, const char *name, const char *source,
                    const char *data, size_t len, sy_error *err);
/* "routes", "instances", "route", "route-remove" */
const char *sw_kind_name(ngx_uint_t kind);
void sw_worker_publish(int rc, const sy_error *err);
/* The body of PUT <admin>/instances/<service> (an array of instances or
 * an instances document listing the service; service NULL: an instances
 * file) parsed by the library; errors located in the body. */
int sw_instances_doc(const char *service, const char *json, size_t len,
                     sy_instances **out, sy_error *err);
/* Check an instances file {"services": {name: [...]}} at config time. */
int sw_instances_file_check(const char *json, size_t len, sy_error *err);

/* ---- waking the other workers ---- */

/* In the master, before the workers are forked (init_module): one pipe
 * per worker in mcf->notify. */
ngx_int_t sw_notify_init(ngx_cycle_t *cycle, sw_main_conf_t *mcf);
/* In a worker: sync whenever another worker writes to this one's pipe. */
ngx_int_t sw_notify_watch(ngx_cycle_t *cycle, sw_notify_t *n);
/* Wake every other worker (a change was stored). */
void sw_notify_others(sw_notify_t *n);

ngx_int_t sw_admin_handler(ngx_http_request_t *r);
/* ngx_http_switchyard_module.c, called from the module context of
 * ngx_http_switchyard_conf.c: preconfiguration wraps proxy_pass and adds
 * the $switchyard_* variables; postconfiguration checks the locations and
 * files, adds the zone and installs the phase handlers and the header
 * filter. */
ngx_int_t sw_preconfiguration(ngx_conf_t *cf);
ngx_int_t sw_postconfiguration(ngx_conf_t *cf);
/* ngx_http_switchyard_conf.c: every routes and instances file loaded
 * together, as a worker will; NGX_ERROR logged at the configuration. */
ngx_int_t sw_check_files(ngx_conf_t *cf, sw_main_conf_t *mcf);
/* The switchyard_balancer directive (ngx_http_switchyard_balancer.c). */
char *sw_balancer(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
/* True for an upstream block with switchyard_balancer. */
ngx_flag_t sw_is_balancer(sw_main_conf_t *mcf,
                          ngx_http_upstream_srv_conf_t *us);

/* ngx_http_switchyard_location.c: the proxy_pass handler wrapped while an
 * http block is parsed (undone by unwrap, also when the cycle's pool
 * goes); at postconfiguration, a switchyard location that would not send
 * the route's target, path, Host or request headers is refused. */
ngx_int_t sw_location_wrap(ngx_conf_t *cf);
void sw_location_unwrap(void *data);
ngx_int_t sw_location_check(ngx_conf_t *cf, sw_main_conf_t *mcf);
/* True when a proxy_pass of the http block sends to $switchyard_upstream
 * (the variable form). A log_format, add_header or set reading the
 * variable is not: it proxies nothing (sw_var_upstream refuses, per
 * request, a route only the balancer runs should a location proxy to the
 * variable some other way). */
ngx_flag_t sw_location_variable_form(sw_main_conf_t *mcf);
/* ngx_http_switchyard_worker.c: the host_runs list of the configuration
 * (its balancer, variable and plain forms); NULL: out of memory. */
const char *const *sw_host_runs(ngx_conf_t *cf, sw_main_conf_t *mcf);
/* The name of a request header the route's filters changed (plan against
 * orig) that the request's location sets itself with proxy_set_header,
 * so that nginx would not pass the route's; NULL when there is none.
 * Worker, request path: no allocation. */
const ngx_str_t *sw_location_header_lost(ngx_http_request_t *r,
                                         const ngx_list_t *orig,
                                         const sy_header *plan, size_t n);
/* Keep the client's headers (orig) over a redirect, once: the final
 * location's sw_location_header_lost compares the last plan with them, so
 * a forwarding route's header changes are checked too. */
ngx_int_t sw_location_keep_headers(ngx_http_request_t *r,
                                   const ngx_list_t *orig);
/* True (logged) when the request was routed to a target but its location
 * does not proxy (its content handler is not proxy_pass's): in the
 * rewrite phase (final 0: an `if` block with proxy_pass may still make
 * it proxy) and before the content phase (final 1). */
ngx_flag_t sw_location_refuses(ngx_http_request_t *r, sw_req_ctx_t *ctx,
                               ngx_flag_t final);
/* The directive ("add_header" or "expires") of the location (lcf) that
 * adds a response header one of the route's response operations sets,
 * removes or rewrites (so nginx would send it anyway), its name in
 * `name`; NULL when there is none. Request path: no allocation. */
const char *sw_location_response_lost(const sw_loc_conf_t *lcf,
                                      const sy_response_op *ops, size_t n,
                                      ngx_str_t *name);
/* Write a JSON string literal (quotes included) of s into p; returns the
 * end. p needs 6 * len + 2 bytes. */
u_char *sw_json_str(u_char *p, const u_char *s, size_t len);
/* Log the cause of a 500 (every 500 the module answers says why) and
 * return NGX_HTTP_INTERNAL_SERVER_ERROR. */
ngx_int_t sw_500(ngx_http_request_t *r, const char *cause);
/* Room for data kept in the request's pool over an internal redirect,
 * which clears the module's context: a cleanup entry whose handler `mark`
 * (a no-op) tells it from the others when the list is walked. NULL: out
 * of memory. */
void *sw_keep_add(ngx_http_request_t *r, ngx_pool_cleanup_pt mark, size_t size);
int64_t sw_now_ms(void);
/* CLOCK_REALTIME in microseconds. */
int64_t sw_now_real_us(void);
/* CLOCK_MONOTONIC in microseconds (durations). */
uint64_t sw_now_us(void);
/* This thread's CPU time in microseconds. */
uint64_t sw_cpu_us(void);

#endif
