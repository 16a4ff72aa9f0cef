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

/* The key of a request into buf (cap bytes, cut there); returns its
 * length, 0 for no key. */
size_t sy__keyres_resolve(const sy__keyres *kr, const sy_request *req,
                          const struct sy_route *route, const char *route_id,
                          sy__var_fn var, const void *var_data, char *buf,
                          size_t cap);

#endif
