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

#endif
