/*
 * switchyard.h - the whole public API of libswitchyard.
 *
 * switchyard is an embeddable HTTP routing core: it parses Spring Cloud
 * Gateway route documents, compiles them into immutable indexed snapshots,
 * publishes snapshots lock-free, diffs them, and selects service instances.
 * It never performs I/O: the host feeds bytes in and gets decisions out.
 *
 * Conventions (see docs/api.md):
 *   - every fallible call returns int: 0 (SY_OK) or a negative SY_E* code,
 *     and fills an optional caller-supplied sy_error;
 *   - no global mutable state: two routers never see each other;
 *   - _new/_free and _acquire/_release pairs say who owns what; borrowed
 *     pointers are valid until the event named in the comment; a call
 *     that fails leaves its out-pointer (sy_document **out, ...) NULL;
 *   - the hot path (acquire, match, select, release) takes no lock,
 *     allocates nothing once warmed up, and makes no syscall.
 */
#ifndef SWITCHYARD_H
#define SWITCHYARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Version and export                                                   */
/* ------------------------------------------------------------------ */

#define SY_VERSION_MAJOR 0
#define SY_VERSION_MINOR 3
#define SY_VERSION_PATCH 0
#define SY_VERSION_STRING "0.3.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH */
#define SY_VERSION_NUMBER                                                      \
    (SY_VERSION_MAJOR * 10000 + SY_VERSION_MINOR * 100 + SY_VERSION_PATCH)

#if defined(SY_BUILDING_LIBRARY) && defined(__GNUC__)
#define SY_API __attribute__((visibility("default")))
#else
#define SY_API
#endif

/* The library's version string, e.g. "0.2.0". Any thread. */
SY_API const char *sy_version(void);
/* The library's SY_VERSION_NUMBER, to compare with the header's. */
SY_API int sy_version_number(void);

/* ------------------------------------------------------------------ */
/* Errors                                                               */
/* ------------------------------------------------------------------ */

typedef enum sy_code {
    SY_OK = 0,
    SY_ENOMEM = -1,       /* an allocation failed */
    SY_EINVAL = -2,       /* bad argument to an API call */
    SY_ESYNTAX = -3,      /* JSON syntax error or trailing garbage */
    SY_ETYPE = -4,        /* a JSON value of the wrong type */
    SY_EMISSING = -5,     /* a required field is missing or empty */
    SY_EDUPLICATE = -6,   /* a route id already used (document or source) */
    SY_ERANGE = -7,       /* a number outside its range */
    SY_EURI = -8,         /* uri without scheme or with an unsupported one */
    SY_EUNKNOWN = -9,     /* unknown predicate or filter name */
    SY_EARG = -10,        /* an argument value invalid for its type */
    SY_ESPEL = -11,       /* a SpEL #{...} value (not supported) */
    SY_ELIMIT = -12,      /* a configured limit was exceeded */
    SY_EREGEX = -13,      /* a regular expression does not compile */
    SY_EPATTERN = -14,    /* a path or host pattern does not compile */
    SY_ENOTFOUND = -15,   /* no such source, route, service or version */
    SY_EEXIST = -16,      /* already exists (e.g. a source name) */
    SY_EBUSY = -17,       /* too many retired snapshots still held, or a
                             source to remove still in use */
    SY_ENOINSTANCE = -18, /* no instance is eligible for this request */
    SY_ECALLBACK = -19,   /* a host callback reported failure */
    SY_EINVALIDDOC = -20, /* lenient apply: no route of the document is valid */
    SY_EREENTRANT = -21,  /* a writer call made from inside a router callback */
    SY_ETOOSMALL = -22,   /* a caller buffer is too small (*needed says how
                             much) */
    SY_ENOTRUN = -23      /* the document uses a host-run filter, uri scheme
                             or metadata key this host does not run
                             (sy_router_options.host_runs) */
} sy_code;

/*
 * A caller-supplied error report. Every fallible call takes an optional
 * `sy_error *` (NULL is fine) and fills it on failure. Nothing is global.
 */
typedef struct sy_error {
    int code;          /* a negative sy_code, or SY_OK */
    uint32_t line;     /* 1-based line of a JSON syntax error, else 0 */
    uint32_t column;   /* 1-based column (bytes) of a JSON syntax error */
    size_t offset;     /* byte offset in the document, or in the pattern
                          named by path for regex/pattern errors */
    char path[256];    /* JSON path, e.g. routes[3].predicates[1].args.regexp;
                          "" when the error is not about one place */
    char message[256]; /* human-readable, no trailing newline */
} sy_error;

/* A static, human-readable name for a code ("out of memory", ...). */
SY_API const char *sy_strerror(int code);

/* ------------------------------------------------------------------ */
/* Allocation and limits                                                */
/* ------------------------------------------------------------------ */

/*
 * Allocator hooks, per router (or per document). Any member NULL means the
 * whole struct is ignored and the library's default allocator is used: on
 * glibc/Linux it keeps every block out of libc's heap (large ones mapped
 * one by one, smaller ones in spans it maps itself), so that the library's
 * frees never make glibc trim its heap inside a publish, and its
 * long-lived blocks pin nothing of the host's (docs/architecture.md,
 * "Small blocks"); elsewhere it is malloc/realloc/free. `free` receives
 * NULL never. Hooks may be called from the writer thread and from the thread
 * that creates a match context; never from the hot path after warm-up. Two
 * lazy builds may call them from any reader thread, once per object: the
 * first sy_route_canonical() of a route, and the first round-robin pick
 * of a service group of several weights (its smooth cycle). Hooks must
 * therefore be thread-safe when either is used off the writer thread. On x86-64
 * a block must lie below 2^48 (any allocator that maps without asking the
 * kernel for a higher address does; the index packs a route's details
 * into its pointer's top 16 bits): a route block above it is refused as
 * out of memory.
 */
typedef struct sy_allocator {
    void *(*malloc)(void *data, size_t size);
    void *(*realloc)(void *data, void *ptr, size_t size);
    void (*free)(void *data, void *ptr);
    void *data;
} sy_allocator;

/* Limits on documents. A zero member takes the default shown. */
typedef struct sy_limits {
    size_t max_document_bytes; /* 64 MiB */
    size_t max_routes;         /* 1,000,000 per document */
    size_t max_string_bytes;   /* 64 KiB per JSON string */
    uint32_t max_depth;        /* 32 levels of JSON nesting (never over
                                  1,000, whatever is set) */
} sy_limits;

/* ------------------------------------------------------------------ */
/* Slices and requests                                                  */
/* ------------------------------------------------------------------ */

/* A borrowed byte slice; not NUL-terminated. */
typedef struct sy_str {
    const char *ptr;
    size_t len;
} sy_str;

typedef struct sy_header {
    sy_str name;
    sy_str value;
} sy_header;

/* A string key/value pair (NUL-terminated). */
typedef struct sy_kv {
    const char *key;
    const char *value;
} sy_kv;

/*
 * A request as the host sees it, described without copying: every slice
 * points into the host's buffers and must stay valid for the match call and
 * for as long as the match result is used. Fill with SY_REQUEST_INIT and
 * set what you have; this struct only ever grows at the end.
 */
typedef struct sy_request {
    uint32_t size; /* sizeof(sy_request) */
    sy_str method; /* "GET" */
    sy_str scheme; /* "http" or "https"; may be empty */
    sy_str host;   /* the Host header / :authority, port included */
    sy_str path;   /* raw path, still percent-encoded, no query */
    sy_str query;  /* raw query without '?'; empty if none */
    const sy_header *headers;
    size_t header_count;
    sy_str remote_addr;     /* client socket address, textual IPv4 or IPv6 */
    int64_t now_ms;         /* epoch milliseconds for After/Before/Between;
                               0: the router's clock callback, else real time */
    uint64_t seed;          /* seed for the Weight draws of this request;
                               0: the router's random callback, else the
                               match context's own generator */
    int64_t content_length; /* -1 when unknown (RequestSize) */
    /* since 0.3: the authenticated principal's name, as the host knows it
     * (SCG's principalNameKeyResolver, the default key resolver of
     * RequestRateLimiter); empty when none */
    sy_str principal;
} sy_request;

/* clang-format off */
#define SY_REQUEST_INIT                                                        \
    {                                                                          \
        sizeof(sy_request), {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, 0, 0,      \
            {0, 0}, 0, 0, -1, {0, 0}                                           \
    }
/* clang-format on */

/* ------------------------------------------------------------------ */
/* Host-registered predicate and filter factories                       */
/* ------------------------------------------------------------------ */

typedef enum sy_shortcut_type {
    SY_SHORTCUT_DEFAULT = 0,
    SY_SHORTCUT_GATHER_LIST = 1,
    SY_SHORTCUT_GATHER_LIST_TAIL_FLAG = 2
} sy_shortcut_type;

/*
 * A predicate factory the host registers by name. `compile` runs once per
 * route when a document is parsed (args are the mapped fields, keys are
 * field names; list fields repeat the key in order); it returns 0 and a
 * state, or a negative code with err->message set (the path is filled in by
 * the library). `test` runs per request on any reader thread, concurrently:
 * it must not modify the state. `free` releases the state on the writer side.
 */
typedef struct sy_predicate_factory {
    const char *const *shortcut_fields; /* NULL-terminated, may be NULL */
    sy_shortcut_type shortcut_type;
    int (*compile)(void *data, const sy_kv *args, size_t arg_count,
                   void **state, sy_error *err);
    bool (*test)(void *state, const sy_request *req);
    void (*free)(void *data, void *state);
    void *data;
} sy_predicate_factory;

/*
 * A filter factory the host registers by name: switchyard validates the
 * shape through `validate` (may be NULL) and hands matched requests the
 * entry (name and args) in chain order; the host runs the filter.
 */
typedef struct sy_filter_factory {
    const char *const *shortcut_fields; /* NULL-terminated, may be NULL */
    sy_shortcut_type shortcut_type;
    int (*validate)(void *data, const sy_kv *args, size_t arg_count,
                    sy_error *err);
    void *data;
} sy_filter_factory;

/*
 * A registry of host factories. Build it before creating routers or parsing
 * documents, then treat it as immutable: it must outlive every router and
 * document that uses it. Not thread-safe while being filled.
 */
typedef struct sy_registry sy_registry;
SY_API int sy_registry_new(const sy_allocator *alloc, sy_registry **out,
                           sy_error *err);
SY_API void sy_registry_free(sy_registry *reg);
/* Names must not clash with a built-in or an earlier registration. The
 * factory struct is copied; `name` is copied. A shortcut_type that is not
 * one of sy_shortcut_type is SY_EINVAL (nothing is registered). */
SY_API int sy_registry_add_predicate(sy_registry *reg, const char *name,
                                     const sy_predicate_factory *f,
                                     sy_error *err);
SY_API int sy_registry_add_filter(sy_registry *reg, const char *name,
                                  const sy_filter_factory *f, sy_error *err);

struct sy_route;
/*
 * A key resolver the host registers by bean name, for RequestRateLimiter's
 * `"key-resolver": "#{@name}"` (docs/policies.md). `resolve` runs per
 * request on any reader thread, concurrently, and must not block or
 * allocate: it writes the key into buf (cap bytes, SY_KEY_RESOLVER_CAP) and
 * sets *len (a key longer than cap is cut there); *len == 0 means "no key"
 * (deny-empty-key decides). A negative return is treated as no key. `route` is
 * the matched route.
 */
typedef struct sy_key_resolver {
    int (*resolve)(void *data, const sy_request *req,
                   const struct sy_route *route, char *buf, size_t cap,
                   size_t *len);
    void *data;
} sy_key_resolver;
/* Register a key resolver under `name` (the bean name, without "#{@" and
 * "}"); the name must not be a built-in resolver's or an earlier one's.
 * The struct is copied. A document naming a resolver that is neither
 * built in nor registered is refused (SY_EARG at args.key-resolver). */
SY_API int sy_registry_add_key_resolver(sy_registry *reg, const char *name,
                                        const sy_key_resolver *kr,
                                        sy_error *err);

/* ------------------------------------------------------------------ */
/* Documents: parse, validate, compile                                  */
/* ------------------------------------------------------------------ */

typedef struct sy_parse_options {
    uint32_t size; /* sizeof(sy_parse_options): the struct only grows at
                      the end, and an older header's size (0.2's ends
                      before host_runs) is accepted, the rest defaulted */
    bool lenient;  /* false (strict): any invalid route
                      fails the whole document */
    sy_limits limits;
    const sy_allocator *allocator; /* NULL: the default allocator */
    const sy_registry *registry;   /* host factories, may be NULL */
    /* since 0.3: what the host runs (sy_router_options.host_runs); NULL:
     * not declared, nothing is refused for it */
    const char *const *host_runs;
} sy_parse_options;

#define SY_PARSE_OPTIONS_INIT                                                  \
    { sizeof(sy_parse_options), false, {0, 0, 0, 0}, 0, 0, 0 }

/* A compiled route: immutable, shared between documents and snapshots. */
typedef struct sy_route sy_route;
/* A parsed and compiled document. */
typedef struct sy_document sy_document;

/*
 * Parse, validate and compile one route document (JSON array of routes, or
 * {"version": ..., "routes": [...]}). `json` need not be NUL-terminated.
 * Strict mode: the first invalid route fails the call (err says where).
 * Lenient mode: invalid routes are dropped and listed as issues, every
 * error of each route (not only the first); the call fails only for
 * document-level errors (syntax, shape, limits).
 * Thread-safe: any thread, any number at once.
 */
SY_API int sy_document_parse(const char *json, size_t len,
                             const sy_parse_options *opts, sy_document **out,
                             sy_error *err);
SY_API void sy_document_free(sy_document *doc);
/* The envelope's version as text, or NULL when there is none. */
SY_API const char *sy_document_version(const sy_document *doc);
/* 64-bit fingerprint of the document's meaning (routes in order). */
SY_API uint64_t sy_document_fingerprint(const sy_document *doc);
/* Checksum of the document's bytes. */
SY_API uint64_t sy_document_checksum(const sy_document *doc);
SY_API size_t sy_document_route_count(const sy_document *doc);
/* Valid routes in document order; borrowed until the document is freed. */
SY_API const sy_route *sy_document_route(const sy_document *doc, size_t i);
/* Lenient mode: the errors of the invalid routes that were dropped, in
 * document order, every error of a route (one or more per route). */
SY_API size_t sy_document_issue_count(const sy_document *doc);
SY_API const sy_error *sy_document_issue(const sy_document *doc, size_t i);

/* ------------------------------------------------------------------ */
/* Routes                                                               */
/* ------------------------------------------------------------------ */

typedef enum sy_upstream_kind {
    SY_UPSTREAM_URL = 0,     /* http, https, ws, wss: host and port */
    SY_UPSTREAM_SERVICE = 1, /* lb://service or lb:ws://service */
    SY_UPSTREAM_FORWARD = 2, /* forward:/path */
    SY_UPSTREAM_NONE = 3     /* no://op */
} sy_upstream_kind;

typedef struct sy_upstream {
    sy_upstream_kind kind;
    const char *scheme; /* "http", "https", "ws", "wss", "lb", "forward" */
    const char *host;   /* URL: host; SERVICE: service name; else "" */
    uint16_t port;      /* URL: explicit or 80/443; else 0 */
    const char *path;   /* FORWARD: the path; else "" */
} sy_upstream;

SY_API const char *sy_route_id(const sy_route *r);
SY_API const char *sy_route_uri(const sy_route *r);
SY_API int32_t sy_route_order(const sy_route *r);
SY_API uint64_t sy_route_fingerprint(const sy_route *r);
SY_API bool sy_route_disabled(const sy_route *r);
SY_API void sy_route_upstream(const sy_route *r, sy_upstream *out);
/* Metadata values are JSON text for non-string values. */
SY_API size_t sy_route_metadata_count(const sy_route *r);
SY_API sy_kv sy_route_metadata_at(const sy_route *r, size_t i);
/* The value of one metadata key, or NULL. */
SY_API const char *sy_route_metadata(const sy_route *r, const char *key);
/*
 * A route's `connect-timeout` or `response-timeout` metadata, read as Spring
 * Cloud Gateway reads it: SY_TIMEOUT_UNSET when the route does not set it
 * (the host's own default applies), SY_TIMEOUT_MS with *ms the limit in
 * milliseconds, SY_TIMEOUT_NONE for no limit at all (a negative
 * response-timeout; a connect-timeout of 0). Parsing refuses, located, the
 * values with which Spring fails every request of the route (a negative
 * connect-timeout, a response-timeout of 0). `ms` may be NULL. Any thread.
 */
typedef enum { SY_TIMEOUT_CONNECT, SY_TIMEOUT_RESPONSE } sy_timeout_kind;
typedef enum {
    SY_TIMEOUT_UNSET,
    SY_TIMEOUT_MS,
    SY_TIMEOUT_NONE
} sy_timeout_setting;
SY_API sy_timeout_setting sy_route_timeout(const sy_route *r,
                                           sy_timeout_kind kind, uint64_t *ms);
/* The route's canonical form as JSON (what the fingerprint hashes);
 * borrowed, valid as long as the route. Built on the first call for a
 * route (through the allocator hooks of the router or document that made
 * it) and kept; NULL when out of memory. Any thread. */
SY_API const char *sy_route_canonical(const sy_route *r);
SY_API size_t sy_route_predicate_count(const sy_route *r);
SY_API const char *sy_route_predicate_name(const sy_route *r, size_t i);
/* The host's data for this route (sy_router_options.route_attach), or
 * NULL. Any thread, while the route is reachable. */
SY_API void *sy_route_host_data(const sy_route *r);
/* A small integer naming this live route in its router, usable as an array
 * index: unique among the router's live routes, stable while the route is
 * unchanged, below sy_snapshot_route_key_limit() of every snapshot that
 * holds it; reused only after the route is freed. UINT32_MAX for a route
 * that is not live in a router (e.g. from sy_document_parse). Any thread,
 * while the route is reachable. */
SY_API uint32_t sy_route_key(const sy_route *r);

/* ------------------------------------------------------------------ */
/* Snapshots                                                            */
/* ------------------------------------------------------------------ */

/*
 * An immutable, published route table: routes in rank order, the index,
 * default filters and services. Obtained with sy_router_acquire() and given
 * back with sy_snapshot_release(); everything borrowed from a snapshot
 * (routes, strings) stays valid until that release.
 */
typedef struct sy_snapshot sy_snapshot;

SY_API uint64_t sy_snapshot_generation(const sy_snapshot *s);
/* Fingerprint of the content: equal snapshots (same routes, same order,
 * same instances) have equal fingerprints on every machine. */
SY_API uint64_t sy_snapshot_fingerprint(const sy_snapshot *s);
SY_API size_t sy_snapshot_route_count(const sy_snapshot *s);
/* The i-th route in rank order (order, then source, then position). */
SY_API const sy_route *sy_snapshot_route_at(const sy_snapshot *s, size_t i);
/* Look a route up by id; NULL if absent. `source` (may be NULL) receives
 * the name of the source that defined it. */
SY_API const sy_route *sy_snapshot_find_route(const sy_snapshot *s,
                                              const char *id,
                                              const char **source);
/* Above every sy_route_key() of this snapshot's routes (the router's
 * high-water mark when it was published): size per-route arrays with it.
 * Any thread holding the snapshot. */
SY_API uint32_t sy_snapshot_route_key_limit(const sy_snapshot *s);

/* ------------------------------------------------------------------ */
/* Matching                                                             */
/* ------------------------------------------------------------------ */

/*
 * A per-worker match context: all scratch space for matching (regex match
 * data, decoded segments, captures, the filter plan). Create one per worker
 * thread and reuse it; one thread at a time. It grows (allocates) only when
 * a snapshot needs more scratch than it has seen before.
 */
typedef struct sy_match_ctx sy_match_ctx;
SY_API int sy_match_ctx_new(const sy_allocator *alloc, sy_match_ctx **out,
                            sy_error *err);
SY_API void sy_match_ctx_free(sy_match_ctx *ctx);

/*
 * The result of a match, owned by the context: valid until the next match
 * on the same context or the release of the snapshot, whichever is first.
 */
typedef struct sy_match sy_match;

/*
 * Find the first route (rank order) whose predicates all hold. Returns 0 and
 * *out = the result, or 0 and *out = NULL when no route matches (the host
 * answers 404), or a negative code and *out = NULL (when out is not NULL):
 * SY_EINVAL for a NULL argument, SY_ELIMIT for a request of more than
 * SY_MAX_REQUEST_HEADERS header lines (refused before anything is sized
 * from the count). Wait-free,
 * allocation-free once warm.
 */
#define SY_MAX_REQUEST_HEADERS 65536u /* header lines of one sy_request */
SY_API int sy_snapshot_match(const sy_snapshot *s, sy_match_ctx *ctx,
                             const sy_request *req, sy_match **out);
/* The same through the reference linear scan (the oracle; slow). */
SY_API int sy_snapshot_match_linear(const sy_snapshot *s, sy_match_ctx *ctx,
                                    const sy_request *req, sy_match **out);

/* Why the last match on a context found no route. */
typedef enum sy_nomatch {
    SY_NOMATCH_NONE = 0,     /* the last match found a route */
    SY_NOMATCH_NO_ROUTE = 1, /* no route: answer 404 */
    SY_NOMATCH_METHOD = 2,   /* a route's other predicates held but not its
                                Method: answer 405 with *allow */
    SY_NOMATCH_BAD_PATH = 3, /* the path was rejected by normalisation
                                (climbs above the root, or an encoded slash
                                with SY_SLASHES_REJECT): answer 400 */
    SY_NOMATCH_BUDGET = 4    /* the request exhausted its CPU budget
                                (docs/security.md): answer 400 or 503 and
                                count it */
} sy_nomatch;

/*
 * The reason the last sy_snapshot_match() on `ctx` returned no route
 * (SY_NOMATCH_NONE after a match that found one, after one refused with
 * SY_ELIMIT, and after an explain).
 * For SY_NOMATCH_METHOD, *allow (may be NULL) receives the allowed methods
 * of the routes that failed only on their Method predicate, as an Allow
 * header value ("GET, HEAD"); borrowed from ctx until its next match.
 * Computed during the match at no cost when a route matches. Same thread
 * rules as sy_snapshot_match (the context's thread).
 */
SY_API sy_nomatch sy_match_ctx_nomatch(const sy_match_ctx *ctx, sy_str *allow);

SY_API const sy_route *sy_match_route(const sy_match *m);
/* Captured variables ({name} in Path and Host patterns), in capture order. */
SY_API size_t sy_match_var_count(const sy_match *m);
SY_API void sy_match_var(const sy_match *m, size_t i, sy_str *name,
                         sy_str *value);
/* The value of one variable (the last capture of that name, as the
 * filters expand it), or {NULL, 0}. */
SY_API sy_str sy_match_var_get(const sy_match *m, const char *name);

typedef enum sy_action {
    SY_ACTION_PROXY = 0,   /* send upstream (the plan says how) */
    SY_ACTION_RESPOND = 1, /* answer now with sy_match_status()
                              (431 from RequestHeaderSize, 413 RequestSize)*/
    SY_ACTION_REDIRECT = 2 /* answer sy_match_status() + Location */
} sy_action;

typedef enum sy_response_op_kind {
    SY_RESP_ADD = 0,             /* add header name: value */
    SY_RESP_ADD_IF_ABSENT = 1,   /* AddResponseHeader override=false */
    SY_RESP_SET = 2,             /* replace all values of name */
    SY_RESP_REMOVE = 3,          /* remove header name */
    SY_RESP_DEDUPE = 4,          /* name (space separated), arg = strategy */
    SY_RESP_REWRITE = 5,         /* name, regexp = arg, replacement = value */
    SY_RESP_REWRITE_LOCATION = 6 /* args in the filter entry */
} sy_response_op_kind;

typedef struct sy_response_op {
    sy_response_op_kind kind;
    sy_str name;
    sy_str value;
    sy_str arg;
} sy_response_op;

/* A filter handed to the host (stateful built-ins such as Retry,
 * RequestRateLimiter, CircuitBreaker, and host-registered filters). */
typedef struct sy_filter_entry {
    const char *name;
    const sy_kv *args;
    size_t arg_count;
} sy_filter_entry;

/*
 * The filter plan: default filters then the route's, computed on first use
 * of any of these calls after a match (pure filters are evaluated by the
 * library; the host applies the outcome).
 */
SY_API sy_action sy_match_action(const sy_match *m);
/* Status to answer with (SetStatus, redirect, 431/413), or 0. */
SY_API int sy_match_status(const sy_match *m);
/* Location of a redirect, or {NULL, 0}. */
SY_API sy_str sy_match_redirect(const sy_match *m);
/* Upstream path and raw query after filters. */
SY_API sy_str sy_match_path(const sy_match *m);
SY_API sy_str sy_match_query(const sy_match *m);
/* The full upstream request header list after the filters, in order. */
SY_API size_t sy_match_header_count(const sy_match *m);
SY_API sy_header sy_match_header(const sy_match *m, size_t i);
/* True when the client's Host header must be kept (PreserveHostHeader). */
SY_API bool sy_match_preserve_host(const sy_match *m);
SY_API size_t sy_match_response_op_count(const sy_match *m);
SY_API sy_response_op sy_match_response_op(const sy_match *m, size_t i);
SY_API size_t sy_match_host_filter_count(const sy_match *m);
SY_API const sy_filter_entry *sy_match_host_filter(const sy_match *m, size_t i);

/*
 * Explain: for every route in rank order, call `fn` with whether it matched
 * and, if not, the index and name of the first predicate that failed
 * (index -1 and name "disabled" for disabled routes). Stops early when fn
 * returns non-zero. Same threading as sy_snapshot_match, and it uses the
 * context as a match does: the last match's result and no-match reason
 * are gone. The same request limits (SY_ELIMIT) as sy_snapshot_match.
 */
typedef int (*sy_explain_fn)(void *data, const sy_route *route, bool matched,
                             int failed_predicate, const char *failed_name);
SY_API int sy_snapshot_explain(const sy_snapshot *s, sy_match_ctx *ctx,
                               const sy_request *req, sy_explain_fn fn,
                               void *data);

/* ------------------------------------------------------------------ */
/* Services and instances                                               */
/* ------------------------------------------------------------------ */

typedef enum sy_instance_state {
    SY_INSTANCE_UP = 0,
    SY_INSTANCE_DRAINING = 1,
    SY_INSTANCE_DOWN = 2
} sy_instance_state;

/* An instance as the host describes it; strings are copied. `host` (it
 * reaches sy_target.host_header) holds no control byte, space, DEL or any
 * of "#/<>?@\^`{|}: SY_EINVAL at instances[k].host. */
typedef struct sy_instance {
    const char *id;
    const char *host; /* a DNS name, an IPv4 or IPv6 address ("[::1]" is
                         kept as "::1"); no port, scheme or path (SY_EINVAL) */
    uint16_t port;
    bool secure;
    uint32_t weight; /* 0 means 1 */
    sy_instance_state state;
    const sy_kv *metadata; /* version, zone, hint, ... */
    size_t metadata_count;
} sy_instance;

/* What selection chose: borrowed from the snapshot. */
typedef struct sy_selection {
    const char *id;
    const char *host;
    uint16_t port;
    const char *scheme; /* "http"/"https" (or "ws"/"wss" for lb:ws) */
    const char *service;
} sy_selection;

/*
 * The services and instances a snapshot holds, with each instance's
 * passive health (sy_router_options.outlier), for status pages: services
 * by name (i < sy_snapshot_service_count), instances in their list's
 * order. sy_snapshot_instance_health fills `out` (0) or answers SY_EINVAL
 * for an index out of range. Health is read when asked (passive health
 * is shared by every snapshot holding the instance), without a lock; the
 * instance is borrowed from the snapshot. Any thread holding it.
 */
typedef struct sy_instance_health {
    const sy_instance *instance;
    uint32_t consecutive_failures; /* failed outcomes in a row */
    uint32_t ejections;            /* times ejected so far */
    int64_t ejected_until_ms;      /* epoch ms; ejected while now is before */
} sy_instance_health;
SY_API size_t sy_snapshot_service_count(const sy_snapshot *s);
SY_API const char *sy_snapshot_service_name(const sy_snapshot *s, size_t i);
SY_API size_t sy_snapshot_instance_count(const sy_snapshot *s, size_t service);
SY_API int sy_snapshot_instance_health(const sy_snapshot *s, size_t service,
                                       size_t i, sy_instance_health *out);

/*
 * Choose an instance for a matched lb:// route (section 7 of the route
 * model). Returns 0 and fills out; SY_ENOINSTANCE when nothing is eligible
 * (err->message says why: unknown service, all down, no such version);
 * SY_EINVAL when the route is not an lb:// route. Lock-free, no allocation.
 * Every policy follows the instances' weights (1..2^32-1): round robin
 * exactly per cycle, random and hash (weighted rendezvous hashing: a
 * key's instance depends on the key and on each candidate's id and
 * weight; an instance added or removed moves only its own keys) within
 * sampling error. The hash pick is O(candidates) per request
 * (docs/gray-release.md).
 */
SY_API int sy_snapshot_select(const sy_snapshot *s, sy_match_ctx *ctx,
                              const sy_match *m, const sy_request *req,
                              sy_selection *out, sy_error *err);

/*
 * Everything a proxy needs to send a matched request upstream. All
 * pointers are borrowed from the match context and the snapshot: valid
 * until the next match on the context or the snapshot's release.
 */
typedef struct sy_target {
    sy_upstream_kind kind; /* URL or SERVICE; FORWARD/NONE fill path/query */
    const char *scheme;    /* "http", "https", "ws" or "wss" */
    const char *host;      /* to connect to (the instance's for lb://) */
    uint16_t port;
    sy_str path;              /* path to send, after filters, percent-encoded */
    sy_str query;             /* raw query to send, without '?'; may be empty */
    sy_str host_header;       /* Host header to send: the upstream's authority
                                 ("host" or "host:port" for a non-default port),
                                 or with PreserveHostHeader the client's Host
                                 (the one SetRequestHostHeader set, if any) */
    const sy_header *headers; /* request headers after filters, in order,
                                 without Host (send host_header instead) */
    size_t header_count;
    /* lb:// routes: the chosen instance (all NULL/0 otherwise) */
    const char *service;
    const char *instance_id;
    const char *version; /* its metadata "version", or NULL */
    const char *zone;    /* its metadata "zone", or NULL */
    const sy_kv *metadata;
    size_t metadata_count;
    const void *health; /* private: what sy_router_report_outcome uses */
} sy_target;

/*
 * The target of a match whose action is SY_ACTION_PROXY, in one call:
 * computes the filter plan if needed and, for lb:// routes, selects an
 * instance as sy_snapshot_select() does, skipping the instances whose ids
 * are in `exclude` (the ones already tried for this request; may be NULL)
 * and the instances ejected by passive health. SY_ENOINSTANCE (answer 503)
 * when no instance is eligible, err->message saying why; SY_EINVAL when
 * the action is not PROXY. Lock-free, allocation-free once warm; same
 * thread rules as sy_snapshot_match.
 */
SY_API int sy_match_target(const sy_match *m, const char *const *exclude,
                           size_t exclude_count, sy_target *out, sy_error *err);

/* ------------------------------------------------------------------ */
/* Diffs                                                                */
/* ------------------------------------------------------------------ */

enum {
    SY_CHANGED_PREDICATES = 1u << 0,
    SY_CHANGED_FILTERS = 1u << 1,
    SY_CHANGED_URI = 1u << 2,
    SY_CHANGED_METADATA = 1u << 3,
    SY_CHANGED_ORDER = 1u << 4
};

/* A three-way diff of routes by id and fingerprint. The accessors take a
 * NULL diff (sy_report_diff of an instance change) as an empty one, and
 * answer NULL (updated: *changed 0) past the end. */
typedef struct sy_diff sy_diff;
SY_API int sy_diff_documents(const sy_document *old_doc,
                             const sy_document *new_doc,
                             const sy_allocator *alloc, sy_diff **out,
                             sy_error *err);
SY_API int sy_diff_snapshots(const sy_snapshot *old_snap,
                             const sy_snapshot *new_snap,
                             const sy_allocator *alloc, sy_diff **out,
                             sy_error *err);
SY_API void sy_diff_free(sy_diff *d);
SY_API size_t sy_diff_added_count(const sy_diff *d);
SY_API const char *sy_diff_added(const sy_diff *d, size_t i);
SY_API size_t sy_diff_removed_count(const sy_diff *d);
SY_API const char *sy_diff_removed(const sy_diff *d, size_t i);
SY_API size_t sy_diff_updated_count(const sy_diff *d);
/* The id of the i-th updated route; *changed gets SY_CHANGED_* bits. */
SY_API const char *sy_diff_updated(const sy_diff *d, size_t i,
                                   unsigned *changed);
SY_API size_t sy_diff_unchanged_count(const sy_diff *d);
/* Kept routes (in both lists, updated or not) whose rank order moved
 * against the other kept routes: the fewest such routes, those outside a
 * longest run of kept routes that stayed in order (a swap of two names
 * one). Rank is order, then position in the document (a snapshot's rank
 * order across sources). A reorder is not an update: the route's
 * definition is as it was, only which route matches first changed. A
 * route whose order changed is updated (SY_CHANGED_ORDER) and, when that
 * moved it past another, reordered too. In new rank order; NULL past the
 * end. A one-route change (sy_router_upsert_route) reports none: an order it
 * changed is its SY_CHANGED_ORDER. */
SY_API size_t sy_diff_reordered_count(const sy_diff *d);
SY_API const char *sy_diff_reordered(const sy_diff *d, size_t i);

/*
 * Shadowed and unreachable routes: each route no request can ever reach,
 * either because routes ranked above it take every request it would match
 * (it is shadowed by them) or because its own predicates hold for no
 * request (a Method listing no method, After/Before/Between leaving no
 * instant, Path patterns that match no path). Exact when it reports: a
 * reported route is never chosen, for any request. It may miss some: a
 * route above takes another's requests only when each of its predicates is
 * implied by the other's (Path and Host patterns contained pattern by
 * pattern, Method sets, time windows; any other predicate written exactly
 * alike); regex elements of the route above count as matching nothing; a
 * route above with a Weight or a host-registered predicate takes none.
 * Disabled routes are neither reported nor counted.
 *
 * `fn` is called once per such route, in rank order, with a description
 * valid during the call only; a non-zero return stops the walk and is
 * returned. Quadratic in the routes in the worst case: for checks at
 * publish or CI time, never on the request path. Any thread; the document
 * (snapshot) must stay alive during the call. Returns 0, SY_EINVAL (NULL
 * argument) or SY_ENOMEM.
 */
typedef struct sy_shadow {
    const sy_route *route; /* the route that is never chosen */
    size_t rank;           /* its place in rank order (0: tried first) */
    size_t position;       /* its index in its document's routes array */
    /* documents: its JSON path ("routes[1]", or "[1]" for a bare array);
     * snapshots: "" */
    const char *path;
    /* the routes that take its requests, in rank order, with the same
     * three facts; by_count 0: it can match no request at all */
    size_t by_count;
    const sy_route *const *by;
    const size_t *by_rank;
    const size_t *by_position;
    const char *const *by_path;
    /* one sentence: "every request it matches goes to 'api'", or "it can
     * match no request: ..." */
    const char *reason;
} sy_shadow;
typedef int (*sy_shadow_fn)(void *data, const sy_shadow *shadow);
/* The routes of one document, ranked as a router ranks them (order, then
 * position). */
SY_API int sy_document_shadowed(const sy_document *doc,
                                const sy_allocator *alloc, sy_shadow_fn fn,
                                void *data, sy_error *err);
/* The live routes of a snapshot, every source together. */
SY_API int sy_snapshot_shadowed(const sy_snapshot *s, const sy_allocator *alloc,
                                sy_shadow_fn fn, void *data, sy_error *err);

/* ------------------------------------------------------------------ */
/* The router                                                           */
/* ------------------------------------------------------------------ */

typedef struct sy_router sy_router;

typedef enum sy_log_level {
    SY_LOG_DEBUG = 0,
    SY_LOG_INFO = 1,
    SY_LOG_WARN = 2,
    SY_LOG_ERROR = 3
} sy_log_level;

/* What one apply (or one-route change, or instance change) did. */
typedef struct sy_report sy_report;

/* Returns the document bytes for a source; `release` (may be NULL) is
 * called with `data` when the router is done with them. */
typedef struct sy_loaded {
    const char *bytes;
    size_t len;
    void (*release)(void *data, const char *bytes);
    void *data;
} sy_loaded;
typedef int (*sy_load_fn)(void *data, const char *source, sy_loaded *out,
                          sy_error *err);

/*
 * Request path normalisation, applied before matching: captures, filters
 * and the path sent upstream all see the normalised path.
 */
typedef enum sy_path_normalization {
    /* remove "." and ".." segments of the decoded path (RFC 3986 5.2.4);
     * a path that climbs above the root does not match
     * (SY_NOMATCH_BAD_PATH) */
    SY_PATH_NORMALIZE = 0,
    SY_PATH_AS_IS = 1 /* match the path exactly as received (unsafe) */
} sy_path_normalization;

/* What an encoded slash (%2F, %2f) or backslash (%5C, %5c) in the request
 * path becomes, with SY_PATH_NORMALIZE (SY_PATH_AS_IS ignores it). */
typedef enum sy_escaped_slashes {
    SY_SLASHES_KEEP = 0,   /* stays encoded: part of one segment, and sent
                              upstream still encoded (default) */
    SY_SLASHES_REJECT = 1, /* the request does not match
                              (SY_NOMATCH_BAD_PATH) */
    SY_SLASHES_DECODE = 2  /* both decoded to '/' before normalisation */
} sy_escaped_slashes;

/*
 * Passive health, as Envoy's outlier detection: an instance that fails
 * `consecutive_failures` times in a row (sy_router_report_outcome) is
 * ejected for base_ejection_ms times the number of times it has been
 * ejected, at most max_ejection_ms, then returns by itself. At most
 * max_ejected_percent of a service's instances are ejected at once (at
 * least one may always be), however reports from many threads interleave:
 * a failure that arrives while another report is ejecting ejects nothing
 * then, and its instance's next failure tries again. No publish is needed;
 * ejections are carried across publishes for instances that stay. Zero members
 * take the defaults shown.
 */
typedef struct sy_outlier_options {
    uint32_t consecutive_failures; /* 5 */
    uint32_t base_ejection_ms;     /* 30000 */
    uint32_t max_ejection_ms;      /* 300000 */
    uint32_t max_ejected_percent;  /* 50 */
    bool disabled;                 /* true: outcomes are ignored */
} sy_outlier_options;

typedef struct sy_router_options {
    uint32_t size;                 /* sizeof(sy_router_options) */
    const sy_allocator *allocator; /* NULL: the default allocator */
    bool lenient;                  /* drop invalid routes, keep the rest */
    sy_limits limits;
    bool strip_host_port;        /* Host predicates ignore ":port" */
    const char *default_filters; /* JSON array of filter entries, or NULL */
    const sy_registry *registry; /* host factories, may be NULL */
    /* documents kept per source for rollback (0: 8), as their compiled
     * routes (a reference each, 8 bytes a route), not their text */
    size_t history;
    size_t max_retired;       /* cap on retired snapshots (0: none) */
    uint64_t retired_warn_ms; /* age that triggers on_retired_held */
    /* Callbacks, all optional. on_log, on_event and on_retired_held are
     * called on the writer's thread; clock_ms is called by matching threads
     * (concurrently) for requests with now_ms == 0 when a route has a time
     * predicate, and random for requests with seed == 0 when a route has a
     * Weight predicate: both must be thread-safe. */
    void (*on_log)(void *data, sy_log_level level, const char *message);
    void (*on_event)(void *data, const sy_report *report);
    void (*on_retired_held)(void *data, uint64_t generation, uint64_t age_ms);
    int64_t (*clock_ms)(void *data); /* epoch ms; NULL: real time */
    uint64_t (*random)(void *data);  /* Weight and lb-policy random draws for
                                        seed 0; NULL: per-context generator */
    void *callback_data;

    /* ---- since 0.2 (append only) ---- */

    /*
     * Host data per route. route_attach runs on the writer's thread when a
     * compiled route is about to become live (before the snapshot holding
     * it is published); its result is what sy_route_host_data() returns,
     * at no cost per request. A route that is unchanged by an apply keeps
     * its data across publishes; an updated (or re-enabled) route is a new
     * route and gets new data. route_detach runs on the writer's thread
     * when no snapshot can reach the route any more (it is freed then, or
     * only a document kept for rollback still holds it: a rollback that
     * puts it back attaches it again).
     * Both optional; neither may call a writer call (SY_EREENTRANT).
     */
    void *(*route_attach)(void *data, const sy_route *route);
    void (*route_detach)(void *data, const sy_route *route, void *host_data);
    /* true: a document whose version equals the live one is skipped even
     * when its bytes differ (0.1 behaviour). false (default): it is applied
     * and the report says the version was not bumped. */
    bool skip_same_version;
    /* Request path normalisation (docs/security.md); the defaults are the
     * safe choice. */
    sy_path_normalization path_normalization; /* default SY_PATH_NORMALIZE */
    bool merge_slashes;                       /* "//" -> "/"; default false */
    sy_escaped_slashes escaped_slashes;       /* %2F and %5C; default KEEP */
    /* Passive health (outlier detection) for lb:// instances. */
    sy_outlier_options outlier;
    /*
     * The CPU budget of one request (docs/security.md), 0 = default. One
     * pool of PCRE2 match-limit units shared by every regex the request
     * runs (predicates, pattern regexes, RewritePath): a request that
     * empties it gets no route (SY_NOMATCH_BUDGET). At most
     * max_repeated_values values of one header, query parameter or cookie
     * are examined per predicate (the rest are ignored). A RewritePath
     * result longer than max_rewritten_path bytes answers 500.
     */
    uint64_t regex_budget;        /* default 1,000,000 units (~4 ms) */
    uint32_t max_repeated_values; /* default 32 */
    size_t max_rewritten_path;    /* default 16,384 bytes */

    /* ---- since 0.3 (append only) ---- */

    /*
     * Run or refuse (docs/policies.md): the host-run items this host
     * executes, a NULL-terminated list of names as sy_host_runs_all()
     * spells them ("Retry", "CircuitBreaker", "forward:", "metadata.cors",
     * ...; sy_host_profile() gives the lists of the project's own hosts).
     * A route using a host-run item missing from the list is refused at
     * apply, check and parse with a located error naming the item and
     * saying this host does not run it (SY_ENOTRUN); an entry
     * "host=NAME" names the host in that message. An entry "!PART" says
     * the host runs the item but not that part of it, refused at its arg
     * (SY_ENOTRUN): "!Retry.backoff" (a Retry with backoff.* refused at
     * "...filters[j].args.backoff"; the tries follow one another at once),
     * "!CircuitBreaker.resumeWithoutError" (refused without a fallbackUri)
     * and "!CircuitBreaker.fallbackUriVariables" (a fallbackUri with
     * {NAME}s refused: the host goes to the path as written) and
     * "!RequestRateLimiter.principal" (the host has no principal: a
     * limiter keyed by it with deny-empty-key false refused at
     * "...args.deny-empty-key", it would limit nothing) and
     * "!RequestHeader.forwarding" (the host writes X-Forwarded-* and
     * Forwarded itself and drops others: a request header filter naming
     * one refused at the name). A list
     * without "https:" also refuses, at commit, an instance with secure
     * set (SY_ENOTRUN at instances[k].secure or
     * deltas[k].instance.secure): the host has no TLS client for it.
     * Filters the host registered (sy_registry_add_filter) are run by the host
     * by definition. An entry that is none of these (a misspelled
     * "!Retry.backof") fails sy_router_new and sy_document_parse with
     * SY_EINVAL naming it. NULL: nothing declared, nothing refused for it
     * (tools that only read documents). Not copied: it must stay valid as long
     * as the router (sy_host_profile's lists are static).
     */
    const char *const *host_runs;
    /*
     * Where the policy state (rate-limit buckets, circuit breakers) lives.
     * NULL: the router makes its own store of policy_slots bucket slots in
     * memory it owns. Else a store the host formatted in its own memory
     * (sy_policy_store_init, e.g. in shared memory for several processes);
     * it must outlive the router, and several routers may share it (256
     * at once, of any processes: sy_router_new is refused with SY_ELIMIT
     * past that; a router of a process that is gone, killed, no longer
     * counts and gives back the breaker entries its routes held).
     */
    struct sy_policy_store *policy_store;
    uint32_t policy_slots; /* default 16,384 bucket slots (rounded up to a
                              power of 2, at most 2^30: 16 GiB, allocated
                              and zeroed at sy_router_new) */
    /*
     * Circuit-breaker entries of the router's own store (default 256,
     * rounded up to a power of 2, at least 16, at most 2^30; unused with
     * policy_store).
     * An entry is claimed at the commit that first publishes a breaker
     * name (or, unnamed, a route id) and freed once no snapshot reaches a
     * route naming it (docs/policies.md); a commit that needs one more
     * than the store has free is refused with SY_ELIMIT, located at the
     * CircuitBreaker, and changes nothing live.
     */
    uint32_t policy_breakers;
} sy_router_options;

#ifndef __cplusplus
#define SY_ROUTER_OPTIONS_INIT                                                 \
    { .size = sizeof(sy_router_options) }
#else
/* C++ before C++20 has no designated initializers, and a partly listed
 * aggregate draws -Wmissing-field-initializers: a zeroed struct with its
 * size set, from C++11 on */
#define SY_ROUTER_OPTIONS_INIT                                                 \
    ([] {                                                                      \
        sy_router_options sy_opts_ = {};                                       \
        sy_opts_.size = sizeof sy_opts_;                                       \
        return sy_opts_;                                                       \
    }())
#endif

/* Create a router with an empty published snapshot. */
SY_API int sy_router_new(const sy_router_options *opts, sy_router **out,
                         sy_error *err);
/* Free the router. Every acquired snapshot must have been released, and
 * no other call on r may be running or follow (not from a callback). */
SY_API void sy_router_free(sy_router *r);
/* The `void *data` slot for the host. Not synchronized: set it before
 * other threads use the router. */
SY_API void sy_router_set_data(sy_router *r, void *data);
SY_API void *sy_router_data(const sy_router *r);

/* Register a named config source (at most 256 at a
 * time: SY_ELIMIT beyond). Each source has a place; the order of places is
 * the tie-break order between sources (and of sy_router_source_status).
 * A new source takes the lowest place sy_router_remove_source freed, else
 * the next one: without removals, registration order. Writer side
 * (serialized internally). */
SY_API int sy_router_add_source(sy_router *r, const char *name, sy_error *err);

/* Remove a source that has no live routes (apply an empty document
 * first): its status, history (its rollback versions) and loader go, and
 * its place is free for a later sy_router_add_source. SY_EBUSY while it
 * has live routes or a sy_router_notify of it runs (its loader), and
 * SY_ENOTFOUND for an unknown name; nothing changes then. Snapshots
 * acquired before keep naming the source (sy_snapshot_find_route); a
 * change set staged for it fails at commit (unknown source). Writer side
 * (serialized internally). */
SY_API int sy_router_remove_source(sy_router *r, const char *name,
                                   sy_error *err);

/*
 * Apply a whole document for a source: parse, validate, skip if its version
 * or checksum equals the last applied one, diff, compile only what changed,
 * publish. On failure nothing changes. *report (may be NULL) receives a
 * report to free with sy_report_free(), also on failure when possible.
 * Any thread; writers are serialized by an internal mutex.
 */
SY_API int sy_router_apply(sy_router *r, const char *source, const char *json,
                           size_t len, sy_report **report, sy_error *err);

/* One-route changes, each published at once. `route_json` is one route
 * object. A route keeps its rank position on update. The next document
 * applied to the source replaces all its routes, upserted ones included. */
SY_API int sy_router_upsert_route(sy_router *r, const char *source,
                                  const char *route_json, size_t len,
                                  sy_error *err);
SY_API int sy_router_remove_route(sy_router *r, const char *id, sy_error *err);
SY_API int sy_router_set_route_enabled(sy_router *r, const char *id,
                                       bool enabled, sy_error *err);

/* Roll a source back to an earlier applied version (kept: the last
 * `history` documents). */
SY_API int sy_router_rollback(sy_router *r, const char *source,
                              const char *version, sy_report **report,
                              sy_error *err);

/* Pull sources: register a loader, then call sy_router_notify() from any
 * thread when the source changed. The notifying thread runs the apply
 * unless one is running, in which case the notification is coalesced into
 * one more apply by the running thread. */
SY_API int sy_router_set_loader(sy_router *r, const char *source,
                                sy_load_fn load, void *data, sy_error *err);
SY_API int sy_router_notify(sy_router *r, const char *source, sy_error *err);

/*
 * Limits on the counts the router takes, checked before any size is
 * computed from them, the same way by every call that takes them (the
 * single calls and change-set staging): SY_ELIMIT beyond them, nothing
 * staged or changed.
 */
#define SY_MAX_INSTANCES 16777216u     /* instances or deltas in one call */
#define SY_MAX_INSTANCE_METADATA 1024u /* metadata entries of an instance */

/* Replace a service's whole instance list; published at once. */
SY_API int sy_router_set_instances(sy_router *r, const char *service,
                                   const sy_instance *instances, size_t count,
                                   sy_report **report, sy_error *err);
typedef enum sy_instance_op {
    SY_INSTANCE_ADD = 0,    /* add or replace by id */
    SY_INSTANCE_REMOVE = 1, /* remove by id */
    SY_INSTANCE_WEIGHT = 2, /* change weight */
    SY_INSTANCE_STATE = 3   /* change state */
} sy_instance_op;
typedef struct sy_instance_delta {
    sy_instance_op op;
    sy_instance instance; /* id always; other fields as op needs */
} sy_instance_delta;
SY_API int sy_router_update_instances(sy_router *r, const char *service,
                                      const sy_instance_delta *deltas,
                                      size_t count, sy_report **report,
                                      sy_error *err);

/*
 * Change sets: stage any number of changes, then publish them as ONE
 * snapshot, all or nothing. A config tick that brings two documents and an
 * instance list publishes once, and a new route never points at a service
 * whose instances are not there yet.
 *
 *   sy_change_set *cs;
 *   sy_change_set_new(router, &cs, &err);
 *   sy_change_set_apply(cs, "orders", json, len, &err);
 *   sy_change_set_set_instances(cs, "orders", list, n, &err);
 *   if (sy_router_commit(router, cs, &rep, &err))  ... nothing changed
 *   sy_change_set_free(cs);
 *
 * Staging copies its arguments and checks only what needs no router state
 * (NULL arguments, SY_EINVAL); everything else is checked at commit, in
 * staging order, each change seeing the ones before it. The single calls
 * (sy_router_apply, sy_router_upsert_route, ...) are one-change sets.
 * A change set belongs to one router and is published at most once: after
 * a successful sy_router_commit, committing or checking it again is
 * SY_EINVAL ("the change set was committed already") and changes nothing;
 * a failed commit may be retried, and sy_router_check does not count as a
 * commit. Staging is not thread-safe on one change set (use one per
 * thread). A set holds at most SY_MAX_CHANGE_SET_SIZE changes: staging one
 * more is SY_ELIMIT (nothing staged; the set keeps what it holds). A staged
 * change costs memory in proportion to its own size, at staging (its copy)
 * and at commit (a one-route change about 1 KB beyond its text).
 */
#define SY_MAX_CHANGE_SET_SIZE 65536u
typedef struct sy_change_set sy_change_set;
SY_API int sy_change_set_new(sy_router *r, sy_change_set **out, sy_error *err);
SY_API void sy_change_set_free(sy_change_set *cs);
/* Number of staged changes. */
SY_API size_t sy_change_set_count(const sy_change_set *cs);
SY_API int sy_change_set_apply(sy_change_set *cs, const char *source,
                               const char *json, size_t len, sy_error *err);
SY_API int sy_change_set_upsert_route(sy_change_set *cs, const char *source,
                                      const char *route_json, size_t len,
                                      sy_error *err);
SY_API int sy_change_set_remove_route(sy_change_set *cs, const char *id,
                                      sy_error *err);
SY_API int sy_change_set_set_route_enabled(sy_change_set *cs, const char *id,
                                           bool enabled, sy_error *err);
/* version NULL: the document before the current one. */
SY_API int sy_change_set_rollback(sy_change_set *cs, const char *source,
                                  const char *version, sy_error *err);
SY_API int sy_change_set_set_instances(sy_change_set *cs, const char *service,
                                       const sy_instance *instances,
                                       size_t count, sy_error *err);
SY_API int sy_change_set_update_instances(sy_change_set *cs,
                                          const char *service,
                                          const sy_instance_delta *deltas,
                                          size_t count, sy_error *err);
/*
 * Publish every staged change as one snapshot. On success *report (may be
 * NULL) holds one part per change (sy_report_part) and on_event is called
 * once per change that was not skipped, after the publish. On failure
 * nothing is published, *err is the failing change's error (its JSON path
 * as the change's own call would give it), the message starts with
 * "change N: ", and *report (when possible) says which change failed
 * (sy_report_failed_change). When every change held but the publish was
 * refused (SY_EBUSY, SY_ENOMEM), no change is named (failed change -1) and
 * each source of the set records the failure. An empty change set publishes
 * nothing and succeeds. Any thread; writers are serialized; SY_EREENTRANT from
 * a callback.
 */
SY_API int sy_router_commit(sy_router *r, sy_change_set *cs, sy_report **report,
                            sy_error *err);
/*
 * A dry run of sy_router_commit: every change is checked against the live
 * state exactly as a commit would (parse, validate, duplicate ids across
 * sources, unknown routes...), then nothing is published and nothing
 * changes; no event is delivered. Same result, error and report. Use it to
 * validate before storing a change elsewhere (shared memory, a config
 * store), then commit. The live state may change between the two calls.
 */
SY_API int sy_router_check(sy_router *r, const sy_change_set *cs,
                           sy_report **report, sy_error *err);

/*
 * Acquire the current snapshot: wait-free (one atomic add), any thread, no
 * registration. Never NULL. Must be released exactly once, on any thread.
 */
SY_API sy_snapshot *sy_router_acquire(sy_router *r);
SY_API void sy_snapshot_release(sy_snapshot *s);

/* Free retired snapshots whose readers are gone (also done at publish),
 * and renew the readers' borrow counters, which would overflow after ~2^40
 * acquires on one shard without a publish: a host that publishes rarely
 * should call this now and then (say, every minute). Writer side; from
 * inside a router callback it does nothing and returns 0. */
SY_API size_t sy_router_reclaim(sy_router *r);

/* Filled by the library. Like sy_target and sy_source_status it may grow
 * at the end in a later version, and the library's soversion changes when
 * it does. */
typedef struct sy_metrics {
    uint64_t generation;
    uint64_t publishes;
    uint64_t live_snapshots;    /* current + retired still referenced */
    uint64_t retired_snapshots; /* retired, not yet freed */
    uint64_t reclaimed_snapshots;
    uint64_t retired_bytes;
    uint64_t oldest_retired_age_ms;
    uint64_t routes;
    /* since 0.2 */
    uint64_t commits;          /* successful commits (single calls included) */
    uint64_t failed_commits;   /* commits that published nothing on error */
    uint64_t skipped_applies;  /* documents skipped as already live */
    uint64_t instance_updates; /* instance list changes published */
    uint64_t services;         /* services in the live snapshot */
    uint64_t instances;        /* instances in the live snapshot */
    uint64_t ejections;        /* passive-health ejections so far */
    uint64_t outcomes;         /* outcomes reported */
    uint64_t fingerprint;      /* of the live snapshot */
} sy_metrics;
SY_API void sy_router_metrics(sy_router *r, sy_metrics *out);

/*
 * Write every router metric, per-source status and snapshot gauge in the
 * Prometheus text exposition format (version 0.0.4) into buf, names
 * prefixed "switchyard_", NUL-terminated. *len (may be NULL) gets the
 * length written, or the size needed (NUL included) when cap is too small,
 * in which case the call returns SY_ETOOSMALL. Any thread.
 */
SY_API int sy_router_metrics_text(sy_router *r, char *buf, size_t cap,
                                  size_t *len, sy_error *err);

/* The status of one config source, copied out (no borrowed pointers). */
typedef struct sy_source_status {
    char name[128];        /* source names are at most 127 bytes */
    char version[128];     /* live document's version ("" when none; longer
                              versions are cut at 127 bytes) */
    bool applied;          /* a document has been applied */
    uint64_t checksum;     /* of the live document's bytes */
    uint64_t fingerprint;  /* of the source's live routes (rank order) */
    size_t routes;         /* live routes of the source */
    int64_t last_apply_ms; /* epoch ms (wall clock) of the last attempt, or 0 */
    int last_result;       /* SY_OK or the code of the last attempt */
    sy_error last_error;   /* the last failed attempt's error (code SY_OK if
                              the last attempt succeeded) */
    uint64_t applied_count, skipped_count, failed_count;
} sy_source_status;
/* Number of sources (registration order). Any thread. */
SY_API size_t sy_router_source_count(sy_router *r);
/* The status of source i (registration order); SY_ENOTFOUND past the end.
 * Any thread (takes the writer lock briefly). */
SY_API int sy_router_source_status(sy_router *r, size_t i,
                                   sy_source_status *out, sy_error *err);

/* Outcome of one attempt to an upstream (sy_router_report_outcome). */
typedef enum sy_outcome {
    SY_OUTCOME_SUCCESS = 0,         /* a response other than 5xx */
    SY_OUTCOME_CONNECT_FAILURE = 1, /* refused, reset, connect timeout */
    SY_OUTCOME_5XX = 2,             /* a 5xx response (502, 503, 504...) */
    SY_OUTCOME_TIMEOUT = 3          /* no response in time */
} sy_outcome;
/*
 * Feed passive health (sy_router_options.outlier) with the outcome of an
 * attempt to the instance of `t` (a target of an lb:// route; others are
 * ignored). Only t->health is read, so `t` may be a copy kept past later
 * matches on the context; the snapshot the target came from must still be
 * held. Any thread, lock-free, no allocation.
 */
SY_API void sy_router_report_outcome(sy_router *r, const sy_target *t,
                                     sy_outcome outcome);

/* Reports. Borrowed strings live as long as the report. Every accessor
 * takes a NULL report (a failed call may leave none) and answers nothing:
 * NULL, 0, false, failed change -1. */
SY_API void sy_report_free(sy_report *rep);
SY_API const char *sy_report_source(const sy_report *rep);
SY_API const char *sy_report_version(const sy_report *rep);
SY_API bool sy_report_skipped(const sy_report *rep);
SY_API uint64_t sy_report_generation(const sy_report *rep);
/* The route diff of a document apply, one-route change or rollback; NULL
 * for an instance change, a skipped document and a commit's whole report
 * (its parts have theirs). Borrowed from rep. */
SY_API const sy_diff *sy_report_diff(const sy_report *rep);
/* Microseconds spent parsing+compiling, and building+publishing. */
SY_API uint64_t sy_report_parse_us(const sy_report *rep);
SY_API uint64_t sy_report_publish_us(const sy_report *rep);
SY_API size_t sy_report_issue_count(const sy_report *rep);
SY_API const sy_error *sy_report_issue(const sy_report *rep, size_t i);
/* Instance changes, by id: added, removed and changed (any field). Ids
 * are borrowed from the report; NULL past the end. */
SY_API size_t sy_report_instances_added_count(const sy_report *rep);
SY_API const char *sy_report_instance_added(const sy_report *rep, size_t i);
SY_API size_t sy_report_instances_removed_count(const sy_report *rep);
SY_API const char *sy_report_instance_removed(const sy_report *rep, size_t i);
SY_API size_t sy_report_instances_changed_count(const sy_report *rep);
SY_API const char *sy_report_instance_changed(const sy_report *rep, size_t i);
/* The service of an instance change, or NULL. */
SY_API const char *sy_report_service(const sy_report *rep);
/* True when the document was applied although its version equals the live
 * one (its bytes differ): the publisher forgot to bump it. */
SY_API bool sy_report_version_not_bumped(const sy_report *rep);
/* A commit's report: one part per staged change, in order (a single
 * call's report has no parts: it is the part). Borrowed from rep. */
SY_API size_t sy_report_part_count(const sy_report *rep);
SY_API const sy_report *sy_report_part(const sy_report *rep, size_t i);
/* The index of the change that failed a commit, or -1. */
SY_API long sy_report_failed_change(const sy_report *rep);

/* ------------------------------------------------------------------ */
/* Policies: rate limits, circuit breakers, retries (docs/policies.md)  */
/* ------------------------------------------------------------------ */

/*
 * The library runs SCG's three stateful filters itself: a route's
 * RequestRateLimiter, CircuitBreaker and Retry args are validated exactly
 * as SCG binds them and compiled at publish; the state (token buckets,
 * breakers) lives in a policy store; the host asks at request time and
 * reports outcomes. Nothing here does I/O, takes a lock or allocates: every
 * call below is lock-free (atomics) and may run on any reader thread.
 *
 * State across publishes: a bucket is keyed by (route id, the limiter's
 * args, the resolved key) and a breaker by its `name`, so a route whose
 * policy did not change keeps its bucket levels and breaker state however
 * often other routes or instances change; a changed limiter starts a full
 * bucket and a breaker whose args changed starts closed with an empty
 * window, at the next request.
 */

/* ---- the policy store ---- */

/*
 * A policy store: a fixed-size block with no pointers inside (offsets
 * only), so that it can sit in memory shared by several processes (an
 * nginx shared zone) and be used by all of them at once through atomics.
 * Buckets: an open-addressing table of `slots` entries of 16 bytes; a
 * bucket that is full again frees its slot for another key. Breakers: a
 * table of `breakers` entries (sy_policy_store_bytes says the size).
 */
typedef struct sy_policy_store sy_policy_store;

/* Bytes of sy_ratelimit.key and sy_redis_call.key, NUL included. A key of
 * up to 255 bytes is held whole; a longer one (every byte of which keys its
 * bucket) is held as its first 238 bytes, "~" and 16 hex digits of a hash
 * of the whole key, which the Redis key names hold too (docs/policies.md). */
#define SY_POLICY_KEY_MAX 256
/* Bytes a registered key resolver may write (sy_key_resolver). */
#define SY_KEY_RESOLVER_CAP 4096
/* Most calls in a breaker's sliding window (slidingWindowSize). */
#define SY_BREAKER_WINDOW_MAX 1024

/* Bytes a store of `slots` bucket slots (rounded up to a power of two,
 * at least 64, at most 2^30) and `breakers` breakers (rounded likewise,
 * at least 16) takes. Any thread. */
SY_API size_t sy_policy_store_bytes(uint32_t slots, uint32_t breakers);
/*
 * Format `len` bytes at `mem` (8-byte aligned, zero or not) as an empty
 * store with the most slots and breakers of the given counts that fit, and
 * return it in *out (== mem). SY_ETOOSMALL when len is below
 * sy_policy_store_bytes(64, 16). The memory stays the caller's: nothing is
 * allocated, nothing to free. Call it once, before any other use (e.g. in
 * nginx's zone init); other processes mapping the same memory use
 * sy_policy_store_attach.
 */
SY_API int sy_policy_store_init(void *mem, size_t len, uint32_t slots,
                                uint32_t breakers, sy_policy_store **out,
                                sy_error *err);
/* Use a store that sy_policy_store_init formatted (in this or another
 * process): checks its header against len (SY_EINVAL when it is not a
 * store of this library version). *out == mem. Any thread. */
SY_API int sy_policy_store_attach(void *mem, size_t len, sy_policy_store **out,
                                  sy_error *err);

/* Counters of a store (approximate under concurrent use). */
typedef struct sy_policy_stats {
    uint32_t slots, breakers;  /* capacities */
    uint64_t buckets_used;     /* slots holding a bucket that is not full */
    uint64_t breakers_used;    /* breaker entries in use */
    uint64_t limited;          /* requests denied by a limiter */
    uint64_t store_full;       /* checks that found no slot: allowed,
                                  remaining -1 (fail open) */
    uint64_t breaker_rejected; /* calls not permitted by a breaker */
    uint64_t breaker_opened;   /* transitions to open */
    uint64_t breaker_half_opened, breaker_closed;
} sy_policy_stats;
SY_API void sy_policy_store_stats(const sy_policy_store *st,
                                  sy_policy_stats *out);
/* The store a router uses (its own or sy_router_options.policy_store).
 * Any thread; valid as long as the router. */
SY_API sy_policy_store *sy_router_policy_store(sy_router *r);

/* ---- run or refuse ---- */

/*
 * Every host-run item the library knows, NULL-terminated: the filters whose
 * effect needs the host ("RequestRateLimiter", "CircuitBreaker", "Retry",
 * "RewriteLocationResponseHeader"), uri schemes ("forward:", "ws:",
 * "wss:") and metadata keys ("metadata.cors", "metadata.response-timeout",
 * "metadata.connect-timeout"). Static; any thread.
 */
SY_API const char *const *sy_host_runs_all(void);
/* What one of the project's own hosts runs, NULL-terminated, by name:
 * "gateway" (examples/mini-gateway) or "nginx" (examples/nginx-module);
 * NULL for another name. The hosts pass these as host_runs, and
 * `switchyard check --host NAME` checks against them. Static. */
SY_API const char *const *sy_host_profile(const char *host);
/* The host-run items route `r` uses, in route order (filters, then the
 * uri scheme, then metadata keys), each once; returns how many there are
 * and writes at most `cap` names (static strings, or the route's filter
 * names for host-registered filters) into names. Any thread. */
SY_API size_t sy_route_host_runs(const struct sy_route *r, const char **names,
                                 size_t cap);

/* ---- rate limiting (RequestRateLimiter) ---- */

/* The answer of the limiters of a match. */
typedef struct sy_ratelimit {
    bool limited;      /* a RequestRateLimiter applies to the route; false:
                          allowed is true and the rest zero, send no
                          X-RateLimit-* header */
    bool allowed;      /* false: answer `status` now, without upstream */
    bool empty_key;    /* the resolver gave no key (deny-empty-key decided) */
    bool headers;      /* send the four X-RateLimit-* headers (false for an
                          empty-key answer, as SCG) */
    int status;        /* when denied: status-code (429) or
                          empty-key-status-code (403) */
    int64_t remaining; /* X-RateLimit-Remaining; -1 failing open */
    uint32_t replenish_rate;   /* X-RateLimit-Replenish-Rate */
    uint32_t burst_capacity;   /* X-RateLimit-Burst-Capacity */
    uint32_t requested_tokens; /* X-RateLimit-Requested-Tokens */
    size_t key_len;
    char key[256]; /* the resolved key, NUL-ended: whole up to 255 bytes,
                      else its first 238, "~" and 16 hex digits of its
                      hash (SY_POLICY_KEY_MAX) */
} sy_ratelimit;

/* The number of RequestRateLimiter filters of a match (default filters
 * and the route's, chain order). Same thread rules as sy_snapshot_match. */
SY_API size_t sy_match_ratelimit_count(const sy_match *m);
/*
 * Check every RequestRateLimiter of the match in chain order against the
 * local buckets of the router's store, at `now_ms` (epoch ms, the host's
 * clock; 0: the router's clock callback or real time), taking the tokens
 * of each that allows. *out is the first limiter that denies, else the
 * last one (out->limited false when there is none). A store with no free
 * slot allows (remaining -1) and counts store_full. Lock-free, no
 * allocation; the context's thread, while the match is valid.
 */
SY_API int sy_match_ratelimit(const sy_match *m, int64_t now_ms,
                              sy_ratelimit *out, sy_error *err);
/* Format out's four X-RateLimit-* headers into hdrs (names static, values
 * in buf, at least 96 bytes); returns how many (0 or 4). */
SY_API size_t sy_ratelimit_headers(const sy_ratelimit *rl, sy_header hdrs[4],
                                   char *buf, size_t cap);

/*
 * Redis mode: the host runs SCG's token bucket in Redis (shared with SCG
 * instances). sy_ratelimit_redis_script() is the Lua text (EVAL/EVALSHA;
 * KEYS[1] tokens key, KEYS[2] timestamp key; ARGV rate, capacity, now ("":
 * Redis's own clock, whole seconds), requested; returns {allowed, tokens
 * left}), implementing route-model.md section 9.
 */
SY_API const char *sy_ratelimit_redis_script(void);
/* The same draw for N requests on one bucket in one call (a host batching
 * the calls with the same keys and ARGV): KEYS and ARGV[1..4] as above,
 * ARGV[5] N; Redis's clock read once; returns two numbers, {allowed,
 * tokens_left}: how many of the N draws were allowed (always the first
 * ones: a denied draw leaves the bucket as it was, so every later one is
 * denied too) and the tokens left after the last draw (what the bucket
 * holds); sy_ratelimit_redis_batch_result gives each draw its own. The
 * keys are left as N runs of sy_ratelimit_redis_script() in that second
 * leave them (Redis runs a script atomically: other clients of the bucket
 * see it before or after the batch). Static. */
SY_API const char *sy_ratelimit_redis_batch_script(void);
/* One Redis call for limiter i of a match, self-contained (no borrowed
 * pointers): keep it until the reply. */
typedef struct sy_redis_call {
    bool needed; /* false: answer with `decided` without calling Redis
                    (an empty key, a store-less router, ...) */
    sy_ratelimit decided;
    /* KEYS[1], KEYS[2]: request_rate_limiter.{ROUTE_ID.KEY}.tokens and
     * .timestamp, KEY the text of `key` (SCG's names for keys up to 255
     * bytes; route ids past 300 bytes are cut) */
    char tokens_key[576];
    char timestamp_key[576];
    char rate[16], capacity[16], requested[16]; /* ARGV 1, 2, 4; ARGV 3 "" */
    int status;                                 /* status-code */
    uint32_t replenish_rate, burst_capacity, requested_tokens;
    size_t key_len;
    char key[256]; /* the resolved key, NUL-ended, as sy_ratelimit.key */
} sy_redis_call;
/* Prepare the Redis call of limiter i (< sy_match_ratelimit_count):
 * resolves the key. Same rules as sy_match_ratelimit. */
SY_API int sy_match_ratelimit_redis(const sy_match *m, size_t i,
                                    sy_redis_call *call, sy_error *err);
/* Turn Redis's reply into the decision: ok with (allowed, tokens_left) as
 * the script returned them; ok == false (an error, a timeout, Redis down):
 * allowed with remaining -1 (SCG's fail open). Pure; any thread. */
SY_API void sy_ratelimit_redis_result(const sy_redis_call *call, bool ok,
                                      int64_t allowed, int64_t tokens_left,
                                      sy_ratelimit *out);
/* The decision for draw i (0-based, in the order of the batch) of a batch
 * script call's reply {allowed, tokens_left} (sy_ratelimit_redis_batch_
 * script; `call` the batch's call, all of whose draws share it): draws
 * before `allowed` are allowed, each with the tokens the draws after it
 * took back on top of tokens_left (requested tokens each, when the bucket
 * is kept between draws: ttl > 0), the rest denied with tokens_left, all
 * as N runs of SCG's script answer them. SCG's script's own reply {allowed
 * 0/1, tokens left} is the batch reply of N = 1 (i = 0). ok == false:
 * fail open as sy_ratelimit_redis_result. Pure; any thread. */
SY_API void sy_ratelimit_redis_batch_result(const sy_redis_call *call, bool ok,
                                            int64_t allowed,
                                            int64_t tokens_left, size_t i,
                                            sy_ratelimit *out);

/* ---- circuit breaking (CircuitBreaker on Resilience4j) ---- */

typedef enum sy_breaker_state {
    SY_BREAKER_CLOSED = 0,
    SY_BREAKER_OPEN = 1,
    SY_BREAKER_HALF_OPEN = 2
} sy_breaker_state;

/* Permission for one call through a route's CircuitBreaker. Pointers are
 * borrowed from the snapshot the match came from: keep the permit (and
 * the snapshot) until sy_breaker_record. */
typedef struct sy_breaker_permit {
    bool breaker;           /* the route has a CircuitBreaker */
    bool permitted;         /* false: do not call upstream; go to the
                               fallback, or answer 503 without one */
    sy_breaker_state state; /* the breaker's state when asked */
    uint32_t timeout_ms;    /* time limit of the call (timeoutDuration,
                               SCG's 1 s unless set); report TIMEOUT past it */
    const char *name;       /* the breaker's name */
    const char *fallback;   /* fallbackUri's path ("forward:/x" -> "/x"),
                               or NULL */
    /* private to the library */
    const void *cfg;
    sy_policy_store *store;
    uint32_t entry;
    uint32_t epoch;
    int64_t (*clock_ms)(void *data); /* the router's, for record's now_ms 0 */
    void *clock_data;
} sy_breaker_permit;
/*
 * Ask the route's CircuitBreaker for permission to call upstream now
 * (now_ms as in sy_match_ratelimit). Closed: permitted (during a recovery
 * warm-up after closing, a share of calls that grows with the time since
 * closing); open: not permitted until waitDurationInOpenState has passed,
 * then half-open; half-open: permitted for permittedNumberOfCalls calls.
 * Every permitted call must be recorded. Lock-free; the context's thread
 * while the match is valid.
 */
SY_API int sy_match_breaker_acquire(const sy_match *m, int64_t now_ms,
                                    sy_breaker_permit *out, sy_error *err);
/* What to do with an upstream answer (sy_breaker_record). */
typedef enum sy_breaker_verdict {
    SY_BREAKER_PASS = 0,     /* send the answer to the client */
    SY_BREAKER_FALLBACK = 1, /* a failure: go to the fallback, or answer the
                                error (504 on TIMEOUT, else 502/503) */
    SY_BREAKER_RESUME = 2    /* a connect failure of a breaker
                                with resumeWithoutError and no fallbackUri:
                                answer 200 with an empty body (SCG's
                                resumed exchange) */
} sy_breaker_verdict;
/*
 * Record the outcome of a permitted call: `outcome` as the host saw it,
 * `status` the upstream's answer (0 when none), `duration_ms` the call's
 * time, `now_ms` the time now (epoch ms, read only when the state moves;
 * 0: the clock the permit was asked with, the router's clock callback or
 * real time, as sy_match_breaker_acquire's now_ms 0). A failure is a connect
 * failure, a timeout, or a status listed in statusCodes; a slow call one longer
 * than slowCallDurationThreshold. The window and state change as Resilience4j's
 * count-based breaker does. The verdict is SCG's: a failure goes to the
 * fallbackUri; without one, a timeout is 504 and, under resumeWithoutError, a
 * listed status passes the answer on and a connect failure is an empty 200
 * (RESUME). Any thread (the permit carries what it needs); lock-free.
 */
SY_API sy_breaker_verdict sy_breaker_record(const sy_breaker_permit *p,
                                            sy_outcome outcome, int status,
                                            uint64_t duration_ms,
                                            int64_t now_ms);
/* The state of the breaker `name` in a store (SY_ENOTFOUND when no
 * published route has named it: a commit claims the entry, closed with
 * no call, before the first request), and its window's counts. Any
 * thread. */
typedef struct sy_breaker_info {
    sy_breaker_state state;
    uint32_t calls, failures, slow; /* in the window (or half-open) */
    int64_t state_since_ms;
} sy_breaker_info;
SY_API int sy_policy_store_breaker(const sy_policy_store *st, const char *name,
                                   sy_breaker_info *out, sy_error *err);

/* ---- retries (Retry) ---- */

/* A route's compiled Retry (borrowed from the snapshot), or NULL. */
typedef struct sy_retry_policy sy_retry_policy;
SY_API const sy_retry_policy *sy_match_retry_policy(const sy_match *m);
/*
 * Should the request be retried after attempt number `retries_done` + 1
 * (0 after the first attempt) gave `outcome` and `status` (0 when no
 * answer)? True when fewer than `retries` retries were made, the method
 * is in `methods`, and the status is in `statuses` or its series in
 * `series`, or the failure (CONNECT_FAILURE, TIMEOUT) is in `exceptions`,
 * and the delay keeps the whole within `timeout` (elapsed_ms since the
 * first attempt). *delay_ms gets the backoff to wait (0 without backoff;
 * jitter drawn from `random`, any 64-bit number, used as given: 0 is the
 * shortest delay, not the router's random callback, which this pure call
 * cannot reach; pass a draw of your own, docs/policies.md). The host then
 * targets again with the tried instances in sy_match_target's exclude list.
 * Pure; any thread while the snapshot is held.
 */
SY_API bool sy_retry_next(const sy_retry_policy *p, uint32_t retries_done,
                          sy_str method, sy_outcome outcome, int status,
                          uint64_t elapsed_ms, uint64_t random,
                          uint32_t *delay_ms);
/* The policy's settings, for display. */
typedef struct sy_retry_info {
    uint32_t retries;
    uint32_t first_backoff_ms, max_backoff_ms; /* 0: no backoff / no cap */
    uint32_t factor;
    bool based_on_previous;
    double jitter;      /* randomFactor, 0 without jitter */
    int64_t timeout_ms; /* -1: none */
} sy_retry_info;
SY_API void sy_retry_policy_info(const sy_retry_policy *p, sy_retry_info *out);

/* ------------------------------------------------------------------ */
/* Instances documents                                                  */
/* ------------------------------------------------------------------ */

/*
 * An instances document: service instance lists as JSON, the format that
 * `switchyard match --instances` reads and that hosts can keep in files
 * (docs/route-definitions.md, "Instances documents"). Either the envelope
 *   {"services": {"orders": [{"id": "o1", "host": "10.0.0.1", "port": 8080,
 *                             "weight": 2, "state": "up", "secure": false,
 *                             "metadata": {"version": "1.2"}}, ...], ...}}
 * or the bare map {"orders": [...], ...}. id, host and port are required;
 * port is a number 1..65535 (a string port is SY_ETYPE); weight 1..2^32-1
 * (default 1); state up / draining / down in any case (default up);
 * metadata values are strings, or integers and booleans taken as text
 * ("version": 2 is "2"). Unknown keys, duplicate ids and duplicate services
 * are errors. Errors name the place: services.orders[1].port.
 */
typedef struct sy_instances sy_instances;

/* Parse and check a whole instances document (need not be NUL-terminated;
 * the route documents' default limits apply, and at most 65,536 JSON values
 * in the whole document, SY_ELIMIT). Returns 0 and *out, to free
 * with sy_instances_free(), or a negative code with err filled (nothing to
 * free). Thread-safe: any thread. */
SY_API int sy_instances_parse(const char *json, size_t len,
                              const sy_allocator *alloc, sy_instances **out,
                              sy_error *err);
SY_API void sy_instances_free(sy_instances *doc);
/* Services in document order; borrowed strings and arrays stay valid until
 * sy_instances_free(). */
SY_API size_t sy_instances_service_count(const sy_instances *doc);
SY_API const char *sy_instances_service(const sy_instances *doc, size_t i);
/* Service i's instances, as an array ready for sy_router_set_instances():
 *   sy_router_set_instances(r, sy_instances_service(d, i),
 *                           sy_instances_list(d, i),
 *                           sy_instances_count(d, i), NULL, &err); */
SY_API size_t sy_instances_count(const sy_instances *doc, size_t i);
SY_API const sy_instance *sy_instances_list(const sy_instances *doc, size_t i);
/* Instance k of service i, or NULL. */
SY_API const sy_instance *sy_instances_at(const sy_instances *doc, size_t i,
                                          size_t k);
/* The index of a service by name, or SIZE_MAX. */
SY_API size_t sy_instances_find(const sy_instances *doc, const char *service);

#ifdef __cplusplus
}
#endif

#endif /* SWITCHYARD_H */
