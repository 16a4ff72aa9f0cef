/*
 * keyresolve.h - RequestRateLimiter's key resolvers, named as SCG names
 * beans ("#{@remoteAddrKeyResolver}"): the built-ins of factory.h
 * (principal name, client address, host, route, "header:<name>",
 * "pathVariable:<name>") and those the host registers.
 */
#ifndef SY_POLICY_KEYRESOLVE_H
#define SY_POLICY_KEYRESOLVE_H

#include "base/factory.h"

#define SY_KEYRES_ARG_MAX 64

typedef struct sy__keyres {
    sy__key_resolver_kind kind;
    const sy_key_resolver *host; /* SY_KR_REGISTERED */
    char arg[SY_KEYRES_ARG_MAX]; /* the header's or variable's name */
    size_t arg_len;              /* its length */
} sy__keyres;

/* Parse a bean reference "#{@name}" (spaces around allowed). false and
 * *why when it is not one, or names no resolver of reg. */
bool sy__keyres_parse(const char *text, const sy_registry *reg, sy__keyres *out,
                      const char **why);

/* Whether a Path or Host pattern's text declares variable `name` (n
 * bytes): "{name}", "{name:regex}", "{*name}". */
bool sy__keyres_pattern_captures(const char *pattern, const char *name,
                                 size_t n);

/* Captured variables of the match, for pathVariable. */
typedef sy_str (*sy__var_fn)(const void *data, const char *name);

/* The whole key of a request (len 0: no key): the request's bytes for a
 * built-in resolver, scratch (cap bytes) for a registered one, which
 * writes there (its key cut at cap). */
sy_str sy__keyres_resolve(const sy__keyres *kr, const sy_request *req,
                          const struct sy_route *route, const char *route_id,
                          sy__var_fn var, const void *var_data, char *scratch,
                          size_t cap);

/* The text of a whole key (len > 0) that sy_ratelimit.key reports and the
 * Redis key names hold, NUL-ended, returning its length: the key itself
 * up to 255 bytes (SCG's names), else its first 238 bytes, "~" and 16 hex
 * digits of sy__hash64 of the whole key (255 bytes). */
size_t sy__keyres_text(sy_str key, char out[SY_POLICY_KEY_MAX]);

#endif
