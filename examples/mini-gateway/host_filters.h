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

/* One arg of a host filter: its name, what it sets, its default. */
typedef struct gw_filter_field {
    const char *arg, *header, *dflt;
} gw_filter_field;

/* SecureHeaders: arg, the response header it sets, its default value. */
extern const gw_filter_field gw_secure_fields[];
/* FallbackHeaders: arg, what it carries, the default header name. */
extern const gw_filter_field gw_fallback_fields[];

/* Add SecureHeaders, FallbackHeaders and CacheRequestBody (and the
 * refusal of LocalResponseCache, which the gateway does not run) to reg.
 * Returns 0 or a negative SY_E* with err filled. */
int gw_host_filters_register(sy_registry *reg, sy_error *err);

#endif
