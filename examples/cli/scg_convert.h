/*
 * scg_convert.h - Spring Boot configuration files (application.yml/.yaml,
 * application.properties) to a switchyard route document: the routes of
 * spring.cloud.gateway.routes (or spring.cloud.gateway.server.webflux.
 * routes) with SCG's default-filters merged into each route's filters,
 * and ${placeholders} resolved. Shared by `switchyard convert`
 * (cli_convert.c) and the mini-gateway's .yml route files (config.c).
 *
 * YAML is read with libyaml; the core library stays JSON-only. One
 * converter is used by one thread at a time.
 */
#ifndef SCG_CONVERT_H
#define SCG_CONVERT_H

#include <stdbool.h>
#include <stddef.h>

typedef enum scg_format {
    SCG_FORMAT_UNKNOWN = 0,
    SCG_FORMAT_YAML,      /* .yml, .yaml */
    SCG_FORMAT_PROPERTIES /* .properties */
} scg_format;

/* The format a file name says (by its extension). */
scg_format scg_format_of(const char *path);

typedef struct scg_options {
    /* "name=value" pairs that resolve ${name} first (--set). */
    const char *const *set;
    size_t set_count;
    bool no_env; /* do not look placeholders up in the environment */
    /* Unresolved placeholders are warnings and their text is kept as
     * written (as Spring Boot keeps them); by default they are errors. */
    bool keep_unresolved;
    /* Active profiles: a YAML document for one of them
     * (spring.config.activate.on-profile) is read, in its place after
     * the documents before it, as Spring Boot reads it. None given: the
     * environment's SPRING_PROFILES_ACTIVE (unless no_env), else the
     * files' spring.profiles.active. */
    const char *const *profiles;
    size_t profile_count;
} scg_options;

typedef struct scg_issue {
    bool error;      /* false: a warning, the document is still made */
    char text[1024]; /* "FILE:LINE: message" */
} scg_issue;

typedef struct scg_converter scg_converter;

/* A new converter (opts is copied; its strings must outlive the
 * converter). NULL when out of memory. */
scg_converter *scg_converter_new(const scg_options *opts);
void scg_converter_free(scg_converter *c);

/* Read one file's text (`file` names it in messages). Later files
 * override earlier ones key by key, and a list they give replaces the
 * whole list, as Spring Boot's property sources do. Returns 0, or -1 when
 * the text is not valid YAML/properties (an error issue says where). */
int scg_converter_add(scg_converter *c, const char *file, const char *text,
                      size_t len, scg_format fmt);

/* The route document of everything added: a malloc'd JSON text (a bare
 * array of routes) and its length, or NULL when any error issue was
 * found (every one is listed). *routes gets the number of routes. */
char *scg_converter_document(scg_converter *c, size_t *len, size_t *routes);

/* After a document was made: its default-filters (resolved, as merged
 * into each route) as a JSON array text, or NULL when there are none. The
 * converter keeps it. For routes made later elsewhere (the mini-gateway's
 * actuator), which SCG runs with the default filters too. */
const char *scg_converter_default_filters(const scg_converter *c);

/* Issues found so far (errors and warnings, in the order found). */
size_t scg_converter_issue_count(const scg_converter *c);
const scg_issue *scg_converter_issue(const scg_converter *c, size_t i);
size_t scg_converter_error_count(const scg_converter *c);

#endif
