/*
 * factory.h - the built-in predicate and filter factories: names, shortcut
 * types, field names in shortcut order, field types and defaults. The table
 * is the single description that parsing, validation, canonicalisation and
 * compilation all read.
 */
#ifndef SY_FACTORY_H
#define SY_FACTORY_H

#include "base/util.h"

typedef enum sy__field_type {
    SY_FT_STRING = 0,   /* any text */
    SY_FT_NONEMPTY,     /* non-empty text */
    SY_FT_REGEX,        /* PCRE2 pattern (compiled by the compilers) */
    SY_FT_INT,          /* integer (int32) */
    SY_FT_UINT,         /* integer >= 0 */
    SY_FT_POSINT,       /* integer >= 1 */
    SY_FT_BOOL,         /* true/false, any case */
    SY_FT_DURATION,     /* 10ms, 5s, 1m, 2h, 1d, or bare milliseconds */
    SY_FT_SIZE,         /* 5MB, 16000B, 1KB, bare bytes */
    SY_FT_DATETIME,     /* ISO-8601 with offset/zone, or epoch millis */
    SY_FT_CIDR,         /* IPv4/IPv6 address with optional /prefix */
    SY_FT_STATUS,       /* HTTP status 100..599 or a name like NOT_FOUND */
    SY_FT_METHOD,       /* HTTP method token, upper-cased */
    SY_FT_PATH_PATTERN, /* PathPattern (compiled by pattern.c) */
    SY_FT_HOST_PATTERN, /* Ant host pattern (compiled by pattern.c) */
    SY_FT_HEADER_NAME,  /* RFC 7230 token */
    SY_FT_KEYVALUE,     /* Name:Value */
    SY_FT_STRATEGY,     /* RETAIN_FIRST / RETAIN_LAST / RETAIN_UNIQUE */
    SY_FT_STRIP_MODE,   /* NEVER_STRIP / AS_IN_REQUEST / ALWAYS_STRIP */
    SY_FT_URL,          /* absolute or relative URL for RedirectTo */
    SY_FT_FIELD_VALUE,  /* a header value: no control byte but HTAB */
    SY_FT_HOST,         /* a non-empty header value (SetRequestHostHeader) */
    SY_FT_PATH_TEXT     /* text sent as a request path: no space, control or
                           non-ASCII byte (RewritePath's replacement) */
} sy__field_type;

typedef struct sy__field_spec {
    const char *name;
    sy__field_type type;
    bool required;
    bool list;        /* the GATHER_LIST field */
    const char *dflt; /* default value text, or NULL */
    /* the name as a JSON object key, quoted, with its colon: "\"name\":"
     * (the canonical form writes it as is) */
    const char *json_key;
    size_t json_key_len;
} sy__field_spec;

typedef enum sy__factory_kind {
    SY_FACTORY_PREDICATE = 0,
    SY_FACTORY_FILTER = 1
} sy__factory_kind;

typedef enum sy__builtin {
    /* predicates */
    SY_P_AFTER,
    SY_P_BEFORE,
    SY_P_BETWEEN,
    SY_P_COOKIE,
    SY_P_HEADER,
    SY_P_HOST,
    SY_P_METHOD,
    SY_P_PATH,
    SY_P_QUERY,
    SY_P_REMOTE_ADDR,
    SY_P_XFORWARDED_REMOTE_ADDR,
    SY_P_WEIGHT,
    /* pure filters */
    SY_F_ADD_REQUEST_HEADER,
    SY_F_ADD_REQUEST_HEADERS_IF_NOT_PRESENT,
    SY_F_ADD_REQUEST_PARAMETER,
    SY_F_ADD_RESPONSE_HEADER,
    SY_F_DEDUPE_RESPONSE_HEADER,
    SY_F_MAP_REQUEST_HEADER,
    SY_F_PREFIX_PATH,
    SY_F_PRESERVE_HOST_HEADER,
    SY_F_REDIRECT_TO,
    SY_F_REMOVE_REQUEST_HEADER,
    SY_F_REMOVE_RESPONSE_HEADER,
    SY_F_REMOVE_REQUEST_PARAMETER,
    SY_F_REQUEST_HEADER_SIZE,
    SY_F_REQUEST_SIZE,
    SY_F_REWRITE_PATH,
    SY_F_REWRITE_LOCATION_RESPONSE_HEADER,
    SY_F_REWRITE_RESPONSE_HEADER,
    SY_F_SET_PATH,
    SY_F_SET_REQUEST_HEADER,
    SY_F_SET_RESPONSE_HEADER,
    SY_F_SET_REQUEST_HOST_HEADER,
    SY_F_SET_STATUS,
    SY_F_STRIP_PREFIX,
    SY_F_REWRITE_REQUEST_PARAMETER,
    /* stateful filters, handed to the host */
    SY_F_RETRY,
    SY_F_REQUEST_RATE_LIMITER,
    SY_F_CIRCUIT_BREAKER,
    SY_BUILTIN_COUNT,
    SY_HOST_FACTORY = 1000 /* registered by the host */
} sy__builtin;

#define SY_MAX_FIELDS 9

typedef struct sy__factory_spec {
    const char *name;
    sy__builtin id;
    sy__factory_kind kind;
    sy_shortcut_type shortcut;
    bool shortcut_allowed; /* false: object form only (RequestSize) */
    bool open_args;        /* extra keys allowed (stateful filters) */
    size_t field_count;
    sy__field_spec fields[SY_MAX_FIELDS]; /* shortcut order */
    /* the canonical form's opening of an entry of this built-in:
     * {"name":"<name>","args":{ */
    const char *canon_head;
    size_t canon_head_len;
} sy__factory_spec;

/* The built-in spec of that name and kind, or NULL. */
const sy__factory_spec *sy__factory_find(sy__factory_kind kind,
                                         const char *name, size_t len);
/* The field spec of that name, or NULL. */
const sy__field_spec *sy__factory_field(const sy__factory_spec *spec,
                                        const char *name);

/* The built-in key resolvers of RequestRateLimiter ("#{@name}";
 * header and pathVariable take an argument: "#{@header:X-User}"). */
typedef enum sy__key_resolver_kind {
    SY_KR_PRINCIPAL = 0, /* principalNameKeyResolver (SCG's default) */
    SY_KR_REMOTE_ADDR,   /* remoteAddrKeyResolver */
    SY_KR_HOST,          /* hostKeyResolver */
    SY_KR_ROUTE,         /* routeKeyResolver */
    SY_KR_HEADER,        /* header:<name> */
    SY_KR_PATH_VAR,      /* pathVariable:<name> */
    SY_KR_BUILTIN_COUNT,
    SY_KR_REGISTERED = 100 /* sy_registry_add_key_resolver */
} sy__key_resolver_kind;
extern const char *const sy__key_resolver_names[SY_KR_BUILTIN_COUNT];

/* Host-registered factories (registry.c), or NULL when absent. */
const sy_predicate_factory *sy__registry_find_predicate(const sy_registry *reg,
                                                        const char *name,
                                                        size_t len);
const sy_filter_factory *sy__registry_find_filter(const sy_registry *reg,
                                                  const char *name, size_t len);
const sy_key_resolver *sy__registry_find_key_resolver(const sy_registry *reg,
                                                      const char *name,
                                                      size_t len);

#endif
