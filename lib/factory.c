/*
 * factory.c - the table of built-in predicate and filter factories
 * (route model sections 4 and 5): names, shortcut kinds, fields in
 * shortcut order with their types and defaults.
 */
#include "factory.h"

#include <pthread.h>
#include <stdio.h>

#define F(n, t, req, dflt)                                                     \
    { n, t, req, false, dflt, "\"" n "\":", sizeof(n) + 2 }
#define L(n, t)                                                                \
    { n, t, true, true, NULL, "\"" n "\":", sizeof(n) + 2 }
#define P SY_FACTORY_PREDICATE
#define FI SY_FACTORY_FILTER
#define DEF SY_SHORTCUT_DEFAULT
#define GL SY_SHORTCUT_GATHER_LIST
#define GLT SY_SHORTCUT_GATHER_LIST_TAIL_FLAG

static const sy_factory_spec builtins[] = {
    /* ---- predicates ---- */
    {"After",
     SY_P_AFTER,
     P,
     DEF,
     true,
     false,
     1,
     {F("datetime", SY_FT_DATETIME, true, NULL)}},
    {"Before",
     SY_P_BEFORE,
     P,
     DEF,
     true,
     false,
     1,
     {F("datetime", SY_FT_DATETIME, true, NULL)}},
    {"Between",
     SY_P_BETWEEN,
     P,
     DEF,
     true,
     false,
     2,
     {F("datetime1", SY_FT_DATETIME, true, NULL),
      F("datetime2", SY_FT_DATETIME, true, NULL)}},
    {"Cookie",
     SY_P_COOKIE,
     P,
     DEF,
     true,
     false,
     2,
     {F("name", SY_FT_NONEMPTY, true, NULL),
      F("regexp", SY_FT_REGEX, true, NULL)}},
    {"Header",
     SY_P_HEADER,
     P,
     DEF,
     true,
     false,
     2,
     {F("header", SY_FT_HEADER_NAME, true, NULL),
      F("regexp", SY_FT_REGEX, false, NULL)}},
    {"Host",
     SY_P_HOST,
     P,
     GL,
     true,
     false,
     1,
     {L("patterns", SY_FT_HOST_PATTERN)}},
    {"Method",
     SY_P_METHOD,
     P,
     GL,
     true,
     false,
     1,
     {L("methods", SY_FT_METHOD)}},
    {"Path",
     SY_P_PATH,
     P,
     GLT,
     true,
     false,
     2,
     {L("patterns", SY_FT_PATH_PATTERN),
      F("matchTrailingSlash", SY_FT_BOOL, false, "true")}},
    {"Query",
     SY_P_QUERY,
     P,
     DEF,
     true,
     false,
     2,
     {F("param", SY_FT_NONEMPTY, true, NULL),
      F("regexp", SY_FT_REGEX, false, NULL)}},
    {"RemoteAddr",
     SY_P_REMOTE_ADDR,
     P,
     GL,
     true,
     false,
     1,
     {L("sources", SY_FT_CIDR)}},
    {"XForwardedRemoteAddr",
     SY_P_XFORWARDED_REMOTE_ADDR,
     P,
     GL,
     true,
     false,
     2,
     {L("sources", SY_FT_CIDR),
      F("maxTrustedIndex", SY_FT_POSINT, false, "1")}},
    {"Weight",
     SY_P_WEIGHT,
     P,
     DEF,
     true,
     false,
     2,
     {F("weight.group", SY_FT_NONEMPTY, true, NULL),
      F("weight.weight", SY_FT_UINT, true, NULL)}},

    /* ---- pure filters ---- */
    {"AddRequestHeader",
     SY_F_ADD_REQUEST_HEADER,
     FI,
     DEF,
     true,
     false,
     2,
     {F("name", SY_FT_HEADER_NAME, true, NULL),
      F("value", SY_FT_STRING, true, NULL)}},
    {"AddRequestHeadersIfNotPresent",
     SY_F_ADD_REQUEST_HEADERS_IF_NOT_PRESENT,
     FI,
     GL,
     true,
     false,
     1,
     {L("headers", SY_FT_KEYVALUE)}},
    {"AddRequestParameter",
     SY_F_ADD_REQUEST_PARAMETER,
     FI,
     DEF,
     true,
     false,
     2,
     {F("name", SY_FT_NONEMPTY, true, NULL),
      F("value", SY_FT_STRING, true, NULL)}},
    {"AddResponseHeader",
     SY_F_ADD_RESPONSE_HEADER,
     FI,
     DEF,
     true,
     false,
     3,
     {F("name", SY_FT_HEADER_NAME, true, NULL),
      F("value", SY_FT_STRING, true, NULL),
      F("override", SY_FT_BOOL, false, "true")}},
    {"DedupeResponseHeader",
     SY_F_DEDUPE_RESPONSE_HEADER,
     FI,
     DEF,
     true,
     false,
     2,
     {F("name", SY_FT_NONEMPTY, true, NULL),
      F("strategy", SY_FT_STRATEGY, false, "RETAIN_FIRST")}},
    {"MapRequestHeader",
     SY_F_MAP_REQUEST_HEADER,
     FI,
     DEF,
     true,
     false,
     2,
     {F("fromHeader", SY_FT_HEADER_NAME, true, NULL),
      F("toHeader", SY_FT_HEADER_NAME, true, NULL)}},
    {"PrefixPath",
     SY_F_PREFIX_PATH,
     FI,
     DEF,
     true,
     false,
     1,
     {F("prefix", SY_FT_NONEMPTY, true, NULL)}},
    {"PreserveHostHeader",
     SY_F_PRESERVE_HOST_HEADER,
     FI,
     DEF,
     true,
     false,
     0,
     {{0}}},
    {"RedirectTo",
     SY_F_REDIRECT_TO,
     FI,
     DEF,
     true,
     false,
     3,
     {F("status", SY_FT_STATUS, true, NULL), F("url", SY_FT_URL, true, NULL),
      F("includeRequestParams", SY_FT_BOOL, false, "false")}},
    {"RemoveRequestHeader",
     SY_F_REMOVE_REQUEST_HEADER,
     FI,
     DEF,
     true,
     false,
     1,
     {F("name", SY_FT_HEADER_NAME, true, NULL)}},
    {"RemoveResponseHeader",
     SY_F_REMOVE_RESPONSE_HEADER,
     FI,
     DEF,
     true,
     false,
     1,
     {F("name", SY_FT_HEADER_NAME, true, NULL)}},
    {"RemoveRequestParameter",
     SY_F_REMOVE_REQUEST_PARAMETER,
     FI,
     DEF,
     true,
     false,
     1,
     {F("name", SY_FT_NONEMPTY, true, NULL)}},
    {"RequestHeaderSize",
     SY_F_REQUEST_HEADER_SIZE,
     FI,
     DEF,
     true,
     false,
     2,
     {F("maxSize", SY_FT_SIZE, false, "16000B"),
      F("errorHeaderName", SY_FT_STRING, false, NULL)}},
    {"RequestSize",
     SY_F_REQUEST_SIZE,
     FI,
     DEF,
     false,
     false,
     1,
     {F("maxSize", SY_FT_SIZE, false, "5MB")}},
    {"RewritePath",
     SY_F_REWRITE_PATH,
     FI,
     DEF,
     true,
     false,
     2,
     {F("regexp", SY_FT_REGEX, true, NULL),
      F("replacement", SY_FT_STRING, true, NULL)}},
    {"RewriteLocationResponseHeader",
     SY_F_REWRITE_LOCATION_RESPONSE_HEADER,
     FI,
     DEF,
     true,
     false,
     4,
     {F("stripVersion", SY_FT_STRIP_MODE, false, "AS_IN_REQUEST"),
      F("locationHeaderName", SY_FT_HEADER_NAME, false, "Location"),
      F("hostValue", SY_FT_STRING, false, NULL),
      F("protocols", SY_FT_REGEX, false, "https?|ftps?")}},
    {"RewriteResponseHeader",
     SY_F_REWRITE_RESPONSE_HEADER,
     FI,
     DEF,
     true,
     false,
     3,
     {F("name", SY_FT_HEADER_NAME, true, NULL),
      F("regexp", SY_FT_REGEX, true, NULL),
      F("replacement", SY_FT_STRING, true, NULL)}},
    {"SetPath",
     SY_F_SET_PATH,
     FI,
     DEF,
     true,
     false,
     1,
     {F("template", SY_FT_NONEMPTY, true, NULL)}},
    {"SetRequestHeader",
     SY_F_SET_REQUEST_HEADER,
     FI,
     DEF,
     true,
     false,
     2,
     {F("name", SY_FT_HEADER_NAME, true, NULL),
      F("value", SY_FT_STRING, true, NULL)}},
    {"SetResponseHeader",
     SY_F_SET_RESPONSE_HEADER,
     FI,
     DEF,
     true,
     false,
     2,
     {F("name", SY_FT_HEADER_NAME, true, NULL),
      F("value", SY_FT_STRING, true, NULL)}},
    {"SetRequestHostHeader",
     SY_F_SET_REQUEST_HOST_HEADER,
     FI,
     DEF,
     true,
     false,
     1,
     {F("host", SY_FT_NONEMPTY, true, NULL)}},
    {"SetStatus",
     SY_F_SET_STATUS,
     FI,
     DEF,
     true,
     false,
     1,
     {F("status", SY_FT_STATUS, true, NULL)}},
    {"StripPrefix",
     SY_F_STRIP_PREFIX,
     FI,
     DEF,
     true,
     false,
     1,
     {F("parts", SY_FT_UINT, false, "1")}},

    /* ---- stateful filters: shape only, run by the host ---- */
    {"Retry",
     SY_F_RETRY,
     FI,
     DEF,
     true,
     true,
     7,
     {F("retries", SY_FT_UINT, false, NULL),
      F("statuses", SY_FT_STRING, false, NULL),
      F("methods", SY_FT_STRING, false, NULL),
      F("backoff.firstBackoff", SY_FT_DURATION, false, NULL),
      F("backoff.maxBackoff", SY_FT_DURATION, false, NULL),
      F("backoff.factor", SY_FT_POSINT, false, NULL),
      F("backoff.basedOnPreviousValue", SY_FT_BOOL, false, NULL)}},
    {"RequestRateLimiter",
     SY_F_REQUEST_RATE_LIMITER,
     FI,
     DEF,
     false,
     true,
     0,
     {{0}}},
    {"CircuitBreaker",
     SY_F_CIRCUIT_BREAKER,
     FI,
     DEF,
     true,
     true,
     2,
     {F("name", SY_FT_STRING, false, NULL),
      F("fallbackUri", SY_FT_STRING, false, NULL)}},
};

/* The built-ins by name: an open-addressed table of indexes into builtins
 * (0: empty, else index + 1), hashed on the kind, the length and three of
 * the name's bytes (today's 38 names land in 38 distinct slots: one probe
 * each); filled once (pthread_once), then only read. Every predicate and
 * filter entry of a document is looked up here. */
#define FIND_SLOTS 128u
static uint8_t find_table[FIND_SLOTS];
static uint8_t find_len[SY_ARRAY_LEN(builtins)];
/* {"name":"<name>","args":{ of each built-in, for the canonical form */
#define HEAD_MAX 64
static char canon_head[SY_ARRAY_LEN(builtins)][HEAD_MAX];
static uint8_t canon_head_len[SY_ARRAY_LEN(builtins)];
static pthread_once_t find_once = PTHREAD_ONCE_INIT;
_Static_assert(SY_ARRAY_LEN(builtins) < FIND_SLOTS / 2 &&
                   SY_ARRAY_LEN(builtins) < UINT8_MAX,
               "the find table holds the built-ins' indexes, half empty");

static unsigned find_hash(sy_factory_kind kind, const char *name, size_t len) {
    const unsigned char *u = (const unsigned char *)name;
    return ((unsigned)len + u[0] * 19u + u[len - 1] + u[len / 2] +
            (unsigned)kind * 17u) &
           (FIND_SLOTS - 1);
}

static void find_init(void) {
    for (size_t i = 0; i < SY_ARRAY_LEN(builtins); i++) {
        const sy_factory_spec *s = &builtins[i];
        size_t len = strlen(s->name);
        find_len[i] = (uint8_t)len;
        int n = snprintf(canon_head[i], HEAD_MAX, "{\"name\":\"%s\",\"args\":{",
                         s->name);
        canon_head_len[i] = (uint8_t)(n > 0 && n < HEAD_MAX ? n : 0);
        unsigned h = find_hash(s->kind, s->name, len);
        while (find_table[h])
            h = (h + 1) & (FIND_SLOTS - 1);
        find_table[h] = (uint8_t)(i + 1);
    }
}

const sy_factory_spec *sy_factory_find(sy_factory_kind kind, const char *name,
                                       size_t len) {
    if (!len || len > UINT8_MAX)
        return NULL; /* every built-in has a short, non-empty name */
    pthread_once(&find_once, find_init);
    for (unsigned h = find_hash(kind, name, len);;
         h = (h + 1) & (FIND_SLOTS - 1)) {
        unsigned k = find_table[h];
        if (!k)
            return NULL;
        const sy_factory_spec *s = &builtins[k - 1];
        if (find_len[k - 1] == len && s->kind == kind &&
            memcmp(s->name, name, len) == 0)
            return s;
    }
}

const char *sy_factory_canon_head(const sy_factory_spec *spec, size_t *len) {
    pthread_once(&find_once, find_init);
    size_t i = (size_t)(spec - builtins);
    *len = canon_head_len[i];
    return canon_head[i];
}

const sy_field_spec *sy_factory_field(const sy_factory_spec *spec,
                                      const char *name) {
    for (size_t i = 0; i < spec->field_count; i++) /* mapped args: the */
        if (spec->fields[i].name == name)          /* spec's own text */
            return &spec->fields[i];
    for (size_t i = 0; i < spec->field_count; i++)
        if (strcmp(spec->fields[i].name, name) == 0)
            return &spec->fields[i];
    return NULL;
}
