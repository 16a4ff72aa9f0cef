/*
 * scg_tree.h - inside the SCG converter (scg_convert.h): the tree that
 * Spring Boot configuration files are read into (scg_read.c) and that the
 * route document is made from (scg_convert.c). Property names are split
 * as Spring Boot splits them; a later source merges into the tree key by
 * key, a list replacing the whole list.
 */
#ifndef SCG_TREE_H
#define SCG_TREE_H

#include "scg_convert.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum nkind { N_MAP, N_LIST, N_SCALAR } nkind;

typedef struct node {
    nkind kind;
    char *key;   /* in a map: the key as written */
    long index;  /* in a list: the index given */
    char *value; /* N_SCALAR; NULL for a YAML null */
    bool plain;  /* a plain (unquoted) YAML scalar */
    const char *file;
    unsigned line;
    struct node **kids;
    size_t n, cap;
} node;

struct scg_converter {
    scg_options opt;
    node *root;
    char **files; /* names, owned, for the nodes' locations */
    size_t nfiles;
    scg_issue *issues;
    size_t nissues, cap, errors;
    size_t walked;            /* YAML nodes walked (an alias bomb stops) */
    const node *filter_props; /* <gateway>.filter, while the document is
                                 made (scg_convert.c folds it into args) */
    unsigned fold_checked;    /* said once: filter groups checked (bit per
                                 group), bad httpclient timeouts (30, 31) */
    const node *httpclient;   /* <gateway>.httpclient: its timeouts are the
                                 routes' default metadata */
    char *defaults_json;      /* the document's default-filters, or NULL */
    const node *global_cors;  /* globalcors' catch-all configuration: every
                                 route's cors metadata */
    const node *gateway;      /* the <gateway> map read (its trusted-proxies:
                                 scg_settings.c forwarding) */
    bool oom;
};

#define MAX_DEPTH 64
#define MAX_WALK 2000000
typedef struct seg {
    const char *p; /* name or bracket content */
    size_t len;
    bool index; /* [digits] */
} seg;

/* A growable string (NUL-terminated once anything was added). */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

node *scg_node_new(nkind k, const char *file, unsigned line);
void scg_node_free(node *n);
/* key equals canon in Spring's relaxed form (lower case, no '-' '_'). */
bool scg_relaxed_eq(const char *key, const char *canon);
/* The last kid of map m whose key is canon (relaxed), or NULL. */
node *scg_map_get(const node *m, const char *canon);
/* Split "a.b[0].c[x.y]" into at most cap segments; -1: a bad name. */
int scg_split_name(const char *s, size_t len, seg *out, int cap);
void scg_sb_add(sbuf *b, const char *s, size_t n);
void scg_sb_addc(sbuf *b, char ch);
/* An issue at FILE:LINE (no line: FILE: ...). */
void scg_issue_add(scg_converter *c, bool error, const char *file,
                   unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Read a text into c's tree; 0, or -1 with an error issue. */
int scg_add_yaml(scg_converter *c, const char *file, const char *text,
                 size_t len);
int scg_add_properties(scg_converter *c, const char *file, const char *text,
                       size_t len);

/* scg_convert.c: placeholders and values, for scg_settings.c too */
struct cJSON;
typedef struct where {
    const char *file;
    unsigned line;
    const char *path;   /* property name, for messages */
    const char *groups; /* a RewritePath regexp: ${g} of its groups stay */
} where;
/* s with its ${placeholders} resolved (malloc'd), or NULL (an issue). */
char *scg_resolve(scg_converter *c, const char *s, const where *w, int depth);
/* A scalar node as a JSON string (typed: plain YAML numbers and booleans
 * keep their type); a metadata value (maps and lists kept). */
struct cJSON *scg_scalar_json(scg_converter *c, const node *n, const char *path,
                              const char *groups, bool typed);
struct cJSON *scg_meta_json(scg_converter *c, const node *m, const char *path);
/* A decimal int32-sized integer text, optional sign. */
bool scg_integer_text(const char *s);

/* scg_settings.c: the gateway settings SCG applies to every route */
/* SPRING_CLOUD_GATEWAY_* environment variables: refused or warned of. */
void scg_environment_overrides(scg_converter *c);
/* One key of <gateway> besides routes and default-filters: true when it
 * is carried or refused here (the caller warns of the rest). */
bool scg_gateway_setting(scg_converter *c, const node *k, const char *gpath);
/* The global filter properties folded into a filter entry (may replace
 * it: the result is the entry to keep). */
struct cJSON *scg_fold(scg_converter *c, struct cJSON *e);
/* httpclient timeouts and globalcors as a route's metadata. */
void scg_timeout_defaults(scg_converter *c, struct cJSON *route);
void scg_cors_default(scg_converter *c, struct cJSON *route, const char *path);

#endif
