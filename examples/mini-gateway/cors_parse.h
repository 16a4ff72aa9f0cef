/*
 * cors_parse.h - a route's `cors` metadata as the mini-gateway reads it
 * (cors_parse.c): the parsed configuration, shared by the gateway (cors.c
 * applies it) and `switchyard check --host gateway` (which refuses what
 * the gateway would refuse at apply).
 */
#ifndef GW_CORS_PARSE_H
#define GW_CORS_PARSE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct gw_list {
    char **v;
    size_t n;
    bool all; /* "*" is one of them */
    bool set; /* given in the metadata */
} gw_list;

struct gw_cors {
    gw_list origins, patterns, methods, headers, exposed;
    bool credentials;
    long long max_age; /* -1: not given */
};

typedef struct gw_cors gw_cors;

/* Parse the metadata value (JSON object text); NULL and a message in
 * err[cap] when it is not valid. */
gw_cors *gw_cors_parse(const char *json, char *err, size_t cap);
void gw_cors_free(gw_cors *c);

#endif
