/*
 * route.h - the compiled route: its definition (id, uri, order, metadata,
 * predicate and filter entries with mapped args, canonical form and
 * fingerprints) and its compiled predicates and filters. A route is
 * immutable once built and refcounted, so consecutive snapshots share it.
 * All its strings live in its own arena.
 */
#ifndef SY_ROUTE_H
#define SY_ROUTE_H

#include "route/compile_env.h"
#include "route/predicate.h"

struct sy__pred;
struct sy__filter;

/* Instance selection settings read from the metadata once, at compile
 * (version-header, version-fallback, version-default, lb-policy,
 * lb-hash-header, lb-hash-cookie, lb-zone), validated at parse by
 * sy__route_check_select; strings point into the metadata. */
typedef struct sy__route_select {
    const char *version_header;                   /* "version" unless set */
    const char *hash_header, *hash_cookie, *zone; /* or NULL */
    const char *default_version;                  /* or NULL: see untagged */
    int8_t fallback, policy; /* sy__version_fallback, sy__lb_policy */
    /* requests without the version header: SY_UNTAGGED_* and, for
     * SY_UNTAGGED_PINNED, the version they are treated as carrying
     * (default_version) */
    int8_t untagged;
    bool websocket;              /* lb:ws:// */
    uint32_t version_header_len; /* strlen(version_header) (in the padding) */
} sy__route_select;

/* What few routes have: metadata, filters, selection settings other than
 * the defaults, and the host's data of a live route. In the route's arena
 * (sy__route_more_own); a route without any points at the one shared
 * empty block, sy__route_more_none, so a reader never tests for NULL.
 * Immutable once the route is built, but host_data (and, for a route
 * that had none, the block: sy__route_set_host_data). */
typedef struct sy__route_more {
    sy_kv *metadata; /* sorted by key; values JSON text unless strings */
    struct sy__def_entry *filters;
    struct sy__filter **cfilters; /* compiled, parallel to filters[] */
    /* instance selection settings: shared static defaults unless the
     * metadata sets one of the keys (then in the route's arena); NULL
     * only in sy__route_more_none (read with sy__route_select_of) */
    const sy__route_select *select;
    /* Set by the router when the route becomes live (again, after a
     * rollback put it back): what the host's route_attach returned (NULL
     * again when no snapshot can reach the route). Written before the
     * route is published; read-only while live. */
    void *host_data;
    uint32_t metadata_count;
    uint16_t filter_count; /* SY_ROUTE_ENTRIES_MAX */
    /* SY_MORE_* bits, set by sy__route_compile once cfilters are all
     * compiled (in the padding: no byte more a route); SY_MORE_HEAP alone
     * in a block made for host data only */
    uint16_t policies;
} sy__route_more;

/* sy__route_more.policies: the filters are compiled (the bits below are
 * known), and which of the policies that a router checks against its
 * default filters they hold (a commit then skips a route of neither
 * without reading its filters: sy__route_policy_free). */
enum { SY_MORE_COMPILED = 1, SY_MORE_RETRY = 2, SY_MORE_BREAKER = 4 };
/* And whether they hold a RequestRateLimiter (the request path's count of
 * limiters skips the walk of a route without one; no router check reads
 * it: sy__route_policy_free leaves it out). */
enum { SY_MORE_RATELIMIT = 8 };
/* The block is not in the route's arena but its own allocation (r->alloc),
 * made for the host's data of a route that shared sy__route_more_none (no
 * filters: its policies are never compiled), freed with the route. */
enum { SY_MORE_HEAP = 0x8000 };

extern const sy__route_more sy__route_more_none;
/* The default selection settings (a route without a selection key and
 * without an lb:ws / lb:wss uri). */
extern const sy__route_select sy__route_select_default;

/* Laid out without holes, and the rarely set fields in `more`: most
 * routes are simple, and 1,000,000 of them are held at once
 * (docs/performance.md, memory/route). */
struct sy_route {
    _Atomic uint32_t refs;
    /* Set by the router when the route becomes live (with more->host_data):
     * a small key, UINT32_MAX while not live. The router releases a route
     * (route_detach, the key back to its free list) itself when no
     * snapshot can reach it any more: a route keeps no pointer back. */
    uint32_t key;
    /* the allocator is the arena's (one field, two names: sy__arena starts
     * with it), and the canonical text lies over the arena's chunk_size
     * and pad, which stay 0 (chunk_size 0: small chunks) while the route
     * is built, the only time its arena allocates: 8 bytes a route */
    union {
        struct {
            const sy__alloc *alloc;
            sy__arena_chunk *arena_head_; /* arena.head */
            /* The canonical JSON the fingerprints hash: not kept by the
             * parse, built by the first sy_route_canonical (def_canon.c,
             * published with a CAS) and then kept (r->alloc); NULL until
             * then. */
            _Atomic(char *) canonical;
        };
        /* every string and array below; strings are taken from the top
         * of its first chunk, the one in the route's block
         * (sy__route_text) */
        sy__arena arena;
    };

    const char *id;
    const char *uri;
    int32_t order;
    /* Writer only: the live table's references to the route (+1 at each
     * publish that makes it live, -1 when such a reference is buried).
     * At 0 no snapshot can reach it: the host's data and key go then,
     * even if a kept document of the history still holds the route.
     * UINT16_MAX: saturated, the router keeps the route (a reference of
     * its own) until it is freed, and releases it then. */
    uint16_t live;
    /* bits, so that the struct has no hole: */
    unsigned disabled : 1;       /* metadata.status == "disabled" */
    unsigned arena_embedded : 1; /* the arena's first chunk is in the
                                    route's block */
    unsigned up_kind : 2;        /* the upstream's sy_upstream_kind */
    unsigned up_scheme : 4;      /* sy__route_scheme (sy__route_schemes[]) */
    /* index of the first Path (Host) predicate when every one of its
     * patterns is all literal segments (labels): the index can prove it;
     * -1: none (or past the SY_ROUTE_LITERAL_MAX-th predicate: then
     * tested as usual) */
    signed literal_path : 4, literal_host : 4;
    /* the upstream, compact (up_kind, up_scheme above, up_port below):
     * sy_route_upstream gives it as a sy_upstream */
    const char *up_host; /* URL: host; SERVICE: service name; else "" */
    /* (FORWARD's path is the uri's text after "forward:") */
    const char *authority; /* URL upstreams: the Host header to send */

    /* NULL in a compiled route whose every predicate is a one-pattern
     * Path or Host shortcut: its entries are rebuilt from the compiled
     * patterns when asked (sy__route_pred_entry), 40 bytes a predicate
     * not kept (docs/performance.md, memory/route) */
    sy__def_entry *predicates;
    /* metadata, filters, selection settings: never NULL */
    const sy__route_more *more;
    uint16_t predicate_count; /* SY_ROUTE_ENTRIES_MAX */
    uint16_t up_port;         /* URL: explicit or 80/443; else 0 */
    uint32_t doc_index;       /* position in the document that built it (ranks
                                 come from the snapshot slot key, not this) */

    /* (The exact bytes of the route object a document built it from, their
     * hash and length and the id's hash, are the source's memo's: def.h
     * sy__span_memo, 16 bytes a route kept once, not here.) */
    /* (The host's data of a live route is more->host_data: 16 bytes a
     * route with the pointer back to its router, which the router does
     * without, docs/performance.md round 11.) */

    /* The last 16 bytes are the header of the arena's first chunk when it
     * is in the route's block (arena_embedded, route.c): its data follows
     * the struct. cpred lies over the chunk's next, which stays NULL (the
     * first chunk is the oldest: the arena never reads its next, and
     * sy__route_unref stops before it); fingerprint over its size and
     * used, so it is set only once the route's arena allocates no more
     * (def_route.c, def_single.c): 16 bytes a route. */

    /* compiled, parallel to predicates[]: predicate_count objects of
     * SY_PRED_OBJECT_BYTES in a row (read with sy__route_cpred), NULL
     * until compiled */
    struct sy__pred *cpred;
    /* of the whole canonical form (what changed in an updated route:
     * sy__def_route_changes); 0 until computed: a parse with no live
     * route to share leaves it to the first reader (sy__def_route_fp) */
    _Atomic uint64_t fingerprint;
};

/* canonical lies exactly over the arena's chunk_size and pad. */
_Static_assert(offsetof(struct sy_route, canonical) ==
                       offsetof(struct sy_route, arena) +
                           offsetof(sy__arena, chunk_size) &&
                   sizeof(_Atomic(char *)) == 2 * sizeof(uint32_t) &&
                   sizeof(sy__arena) == 3 * sizeof(void *),
               "sy_route: canonical over arena.chunk_size and pad");

/* cpred and fingerprint lie exactly over the first chunk's header, and its
 * data starts at the struct's end. */
_Static_assert(offsetof(sy__arena_chunk, next) == 0 &&
                   offsetof(sy__arena_chunk, size) == sizeof(void *) &&
                   sizeof(sy__arena_chunk) == 16 &&
                   offsetof(sy__arena_chunk, data) == 16 &&
                   offsetof(struct sy_route, fingerprint) ==
                       offsetof(struct sy_route, cpred) + sizeof(void *) &&
                   offsetof(struct sy_route, cpred) + 16 ==
                       sizeof(struct sy_route),
               "sy_route: cpred and fingerprint over the first chunk's "
               "header");

/* The first chunk of r's arena when it is in the route's block
 * (r->arena_embedded): its header is r's last 16 bytes. */
static inline sy__arena_chunk *sy__route_first_chunk(struct sy_route *r) {
    return (sy__arena_chunk *)(void *)&r->cpred;
}

/* The highest predicate index literal_path / literal_host hold. */
#define SY_ROUTE_LITERAL_MAX 7

/* The compiled predicate i of r (r compiled, i < predicate_count). */
static inline const struct sy__pred *sy__route_cpred(const struct sy_route *r,
                                                     size_t i) {
    return (const struct sy__pred *)(const void *)((const char *)(const void *)
                                                       r->cpred +
                                                   i * SY_PRED_OBJECT_BYTES);
}

/* A predicate's entry rebuilt from its compiled form: the entry and its
 * one argument (sy__route_pred_entry). */
typedef struct sy__entry_view {
    sy__def_entry e;
    sy_kv arg;
} sy__entry_view;

/* The definition entry of predicate i of r (i < predicate_count):
 * &r->predicates[i], or, in a route that keeps none (predicates NULL),
 * the entry its parse built, rebuilt into *tmp from the compiled pattern
 * (valid while r and *tmp are). */
const sy__def_entry *sy__route_pred_entry(const struct sy_route *r, size_t i,
                                          sy__entry_view *tmp);

/* True when compiled r's predicate entries are exactly what
 * sy__route_pred_entry rebuilds: each a Path or Host shortcut of one
 * pattern, whose argument is the text the compiled pattern keeps. Then
 * its parse may keep no entries (def_route.c). */
bool sy__route_entries_rebuildable(const struct sy_route *r);

/* r's instance selection settings (never NULL). */
static inline const sy__route_select *
sy__route_select_of(const struct sy_route *r) {
    return r->more->select ? r->more->select : &sy__route_select_default;
}

/* True when compiled r runs neither a Retry nor a CircuitBreaker, known
 * without reading its filters (sy__route_more.policies); false also when
 * not known. */
static inline bool sy__route_policy_free(const struct sy_route *r) {
    return !r->more->filter_count ||
           (r->more->policies & ~SY_MORE_RATELIMIT) == SY_MORE_COMPILED;
}

/* r's own `more` block, made (in its arena, zeroed but for the shared
 * selection defaults) when r still points at sy__route_more_none; NULL
 * when out of memory. Only while r is built (nothing reads it yet). */
sy__route_more *sy__route_more_own(struct sy_route *r);

/* Most predicates (filters) of one route: their counts are 16-bit. */
#define SY_ROUTE_ENTRIES_MAX 65535u

/* The upstream's scheme (struct sy_route up_scheme). */
typedef enum sy__route_scheme {
    SY_SCHEME_NONE, /* "" (a route not parsed from a uri) */
    SY_SCHEME_HTTP,
    SY_SCHEME_HTTPS,
    SY_SCHEME_WS,
    SY_SCHEME_WSS,
    SY_SCHEME_LB,
    SY_SCHEME_LB_WS,
    SY_SCHEME_LB_WSS,
    SY_SCHEME_FORWARD,
    SY_SCHEME_NO,
    SY_SCHEME_COUNT
} sy__route_scheme;
/* Their names: "", "http", "https", "ws", "wss", "lb", "lb:ws", "lb:wss",
 * "forward", "no". */
extern const char *const sy__route_schemes[SY_SCHEME_COUNT];

/* Seed of a document element's span hash (def.h sy__span_memo). */
#define SY_ROUTE_SPAN_SEED 0x5359535041ull /* "SYSPA" */

/* What metadata.version-default asks for requests without the version
 * header (route model section 7, step 2). */
enum {
    SY_UNTAGGED_LATEST = 0, /* unversioned instances, else the latest */
    SY_UNTAGGED_OLDEST = 1, /* unversioned instances, else the oldest */
    SY_UNTAGGED_PINNED = 2  /* as if the header said default_version */
};

/* True for the metadata keys that configure instance selection. */
bool sy__route_is_select_key(const char *key);

/*
 * Check the selection keys of r's metadata (already set, sorted): known
 * values for lb-policy, version-fallback and version-default; header and
 * cookie names that are HTTP tokens; a non-empty lb-zone; lb-policy hash
 * with exactly one of lb-hash-header / lb-hash-cookie, and those only with
 * it. SY_EARG with path "<path>.metadata.<key>" (path: the route's, e.g.
 * "routes[0]"). Up to `max` errors go to errs[] (err receives the first);
 * returns the number found, so lenient checks list them all.
 */
size_t sy__route_check_select(const struct sy_route *r, const char *path,
                              sy_error *errs, size_t max);

/* Set the host's data of r (writer only, r not reachable by any
 * snapshot): in its own `more`, or, when r shares sy__route_more_none and
 * data is not NULL, in a block made for it (SY_MORE_HEAP, kept until r is
 * freed). SY_ENOMEM: not set (r unchanged). */
int sy__route_set_host_data(struct sy_route *r, void *data);

/*
 * Compile every predicate and filter of `r` (sets cpred / more->cfilters).
 * `path` is the route's JSON path ("routes[3]"); errors get
 * "<path>.predicates[i].args.<field>" and the offset in the pattern.
 */
int sy__route_compile(struct sy_route *r, const sy__compile_env *env,
                      const char *path, sy_error *err);

/* On x86-64 a route lies below 2^SY_ROUTE_ADDR_BITS: the index packs its
 * predicates' place into a candidate's copy of the pointer above them
 * (snapshot/index_cand.h); 0 elsewhere (no packing, no limit). */
#if defined(__x86_64__)
#define SY_ROUTE_ADDR_BITS 48
#else
#define SY_ROUTE_ADDR_BITS 0
#endif

/* A new empty route (refs = 1) that owns a copy of `alloc` and an arena
 * built on it; NULL when out of memory, or (x86-64) when the allocator
 * gave a block at or above 2^SY_ROUTE_ADDR_BITS. */
struct sy_route *sy__route_new(const sy__alloc *alloc);
/* The same with the arena's first `arena_bytes` in the same block as the
 * route: an estimate of what it will hold (more is allocated when it
 * holds more). */
struct sy_route *sy__route_new_sized(const sy__alloc *alloc,
                                     size_t arena_bytes);
/* Zeroed memory in r's arena (freed with the route); NULL on overflow or
 * out of memory. */
void *sy__route_calloc(struct sy_route *r, size_t n, size_t size);
/* `n` bytes (at least 1) for r's strings, without alignment: from the top
 * of the first chunk (in the route's block) while it has room, so the
 * aligned objects below need no padding after strings and the arena
 * estimate can be exact; else from the arena as sy__arena_alloc_bytes.
 * NULL when out of memory. */
void *sy__route_text(struct sy_route *r, size_t n);
char *sy__route_strndup(struct sy_route *r, const char *s, size_t n);
char *sy__route_strdup(struct sy_route *r, const char *s);
struct sy_route *sy__route_ref(const struct sy_route *r);
void sy__route_unref(struct sy_route *r); /* frees at zero */

/* Run or refuse: SY_ENOTRUN, located, when r uses a host-run item
 * (policy/host_runs.h) that `runs` lacks (NULL: nothing declared).
 * Filter i is named "<filters_path>[i]", the uri and metadata
 * "<path>.uri" / "<path>.metadata.<key>". */
int sy__route_check_host(const struct sy_route *r, const char *const *runs,
                         const char *path, const char *filters_path,
                         sy_error *err);

/* The index of r's first path filter (StripPrefix, PrefixPath, SetPath,
 * RewritePath), or -1: a host forwards a forward: route to the uri's path
 * as written, so one there (or in the default filters) is refused. */
int sy__route_path_filter(const struct sy_route *r);

/* The first {NAME} of filter e's template (a header value, a host,
 * AddRequestParameter's value, SetPath, PrefixPath: *field names the
 * arg) that not every request of r has, *n its length; NULL when none
 * (or e has no template). */
const char *sy__route_template_unbound(const struct sy_route *r,
                                       const sy__def_entry *e,
                                       const char **field, size_t *n);
/* sy__route_template_unbound for r's filter i (at JSON path p), as a
 * located SY_EARG. */
int sy__route_check_templates(const struct sy_route *r, size_t i, const char *p,
                              sy_error *err);

/* The first '{' of a fallback path whose {NAME} not every request of r
 * has (or malformed: no name or no '}'), *n its name's length; NULL when
 * each is bound. */
const char *sy__route_fallback_unbound(const struct sy_route *r,
                                       const char *fallback, size_t *n);

/* Whether r's requests give limiter rl a key: true unless rl is keyed by
 * #{@pathVariable:NAME} and no Path or Host pattern of r captures NAME
 * (every request would get the empty key: its status, never a limit). */
struct sy__rl_cfg;
bool sy__route_keys_limiter(const struct sy_route *r,
                            const struct sy__rl_cfg *rl);

#endif
