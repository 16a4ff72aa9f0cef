/*
 * host_filters.h - the SCG filters the mini-gateway runs itself (the
 * library does not know them): their names, args and arg checks, in one
 * place. The gateway registers them with its routers (filters.c runs
 * them); `switchyard check --host gateway` registers the same ones, so it
 * accepts exactly what the gateway runs. Only switchyard.h is needed.
 */
#ifndef GW_HOST_FILTERS_H
#define GW_HOST_FILTERS_H

#include <switchyard.h>

#include <stdbool.h>

/* One arg of a host filter: its name, what it sets, its default. */
typedef struct gw_filter_field {
    const char *arg, *header, *dflt;
} gw_filter_field;

/* SecureHeaders: arg, the response header it sets, its default value. */
extern const gw_filter_field gw_secure_fields[];
/* SecureHeaders' opt-in Permissions-Policy (enable: permissions-policy):
 * its arg, header and SCG's default value. */
extern const gw_filter_field gw_permissions_policy;
/* True when arg name `key` is `name` in one of Spring's relaxed forms
 * (frame-options, frame_options, frameOptions, FRAMEOPTIONS). */
bool gw_arg_is(const char *key, const char *name);
/* True when the comma-separated `list` (NULL: empty) has `name`, blanks
 * around items ignored, in any case. */
bool gw_list_has(const char *list, const char *name);
/* The value of the arg of `e` named `name` (relaxed), or NULL. */
const char *gw_filter_arg(const sy_filter_entry *e, const char *name);
/* FallbackHeaders: arg, what it carries, the default header name. */
extern const gw_filter_field gw_fallback_fields[];

/* LocalResponseCache's args: timeToLive (duration: N[ms|s|m|h|d], bare
 * milliseconds; default 5m) and size (N[B|KB|MB|GB], bare bytes; default
 * 1MB). Returns 0, or SY_EARG with err located at args.<key>. */
int gw_response_cache_args(const sy_kv *args, size_t n, uint64_t *ttl_ms,
                           uint64_t *size, sy_error *err);

/* Add SecureHeaders, FallbackHeaders, CacheRequestBody and
 * LocalResponseCache to reg.
 * Returns 0 or a negative SY_E* with err filled. */
int gw_host_filters_register(sy_registry *reg, sy_error *err);

/* Register the same four names for a host that does not run them (the
 * nginx module, for `switchyard check --host nginx`): a route using one is
 * refused at its entry with SY_ENOTRUN naming `host`, which must outlive
 * reg. Returns 0 or a negative SY_E* with err filled. */
int gw_host_filters_refuse(sy_registry *reg, const char *host, sy_error *err);

#endif
