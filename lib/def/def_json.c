/*
 * def_json.c - the JSON text of route and instance documents: the default
 * limits, the cJSON parse of text def_scan.c accepted, the tree parse into
 * def_tree.c's arena (a whole document's routes one span at a time for
 * def.c; a single route, default filters or instances whole for
 * def_single.c and instances.c), and the parse options' host list.
 */
#include "def/def_build.h"
#include "def/def_scan.h"

#define SY_DEFAULT_MAX_DOC ((size_t)64 << 20)
#define SY_DEFAULT_MAX_ROUTES ((size_t)1000000)
#define SY_DEFAULT_MAX_STRING ((size_t)64 << 10)
#define SY_DEFAULT_MAX_DEPTH 32u

void sy__limits_resolve(sy_limits *out, const sy_limits *in) {
    sy_limits l = {0, 0, 0, 0};
    if (in)
        l = *in;
    if (!l.max_document_bytes)
        l.max_document_bytes = SY_DEFAULT_MAX_DOC;
    if (!l.max_routes)
        l.max_routes = SY_DEFAULT_MAX_ROUTES;
    if (!l.max_string_bytes)
        l.max_string_bytes = SY_DEFAULT_MAX_STRING;
    if (!l.max_depth)
        l.max_depth = SY_DEFAULT_MAX_DEPTH;
    *out = l;
}

/* cJSON text that def_scan.c accepted: a NULL from cJSON can only be an
 * allocation failure (cJSON allocates with malloc, outside the router's
 * allocator), reported as such and never as a syntax error. */
int sy__def_parse_scanned(const char *json, size_t start, size_t end,
                          cJSON **out, sy_error *err) {
    const char *stop = NULL;
    *out = cJSON_ParseWithLengthOpts(json + start, end - start, &stop, 0);
    if (*out)
        return 0;
    return sy__error_set(err, SY_ENOMEM, "",
                         "out of memory while parsing the JSON text");
}

/* The tree of json[start, end), which def_scan.c accepted: its nodes in
 * `tree` (def_tree.c: no malloc per node, and none in libc's heap with
 * the default allocator), or cJSON's own where def_tree.c leaves the text
 * to cJSON (*own set: the caller deletes it). */
int sy__def_parse_tree(sy__arena *tree, const char *json, size_t start,
                       size_t end, cJSON **out, bool *own, sy_error *err) {
    *own = false;
    int rc = sy__def_tree_parse(tree, json, start, end, out);
    if (rc == SY_DEF_TREE_CJSON) {
        *own = true;
        return sy__def_parse_scanned(json, start, end, out, err);
    }
    if (rc)
        return sy__error_set(err, SY_ENOMEM, "",
                             "out of memory while parsing the JSON text");
    return 0;
}

/* Scan `json` under the limits (def_scan.c): for single routes and
 * default filters, whose size the scan caps at SY_MAX_ROUTE_VALUES
 * values. */
static int scan_json(const sy__alloc *a, const char *json, size_t len,
                     const sy_limits *lim, sy_error *err) {
    if (len > lim->max_document_bytes)
        return sy__error_set(err, SY_ELIMIT, "",
                             "document of %zu bytes exceeds the limit of %zu",
                             len, lim->max_document_bytes);
    sy__json_scan scan;
    int rc = sy__json_scan_text(a, json, len, lim, false, &scan, err);
    sy__free(a, scan.routes);
    return rc;
}

/* scan_json, then the whole text's tree (parse_tree; the caller frees
 * `tree`, and deletes *out when *own). */
static int parse_json(const sy__alloc *a, sy__arena *tree, const char *json,
                      size_t len, const sy_limits *lim, cJSON **out, bool *own,
                      sy_error *err) {
    *out = NULL;
    *own = false;
    int rc = scan_json(a, json, len, lim, err);
    return rc ? rc : sy__def_parse_tree(tree, json, 0, len, out, own, err);
}

const char *const *sy__def_host_runs(const sy_parse_options *o) {
    return o && o->size >= offsetof(sy_parse_options, host_runs) +
                               sizeof o->host_runs
               ? o->host_runs
               : NULL;
}

int sy__def_parse_json(sy__arena *tree, const char *json, size_t len,
                       const sy_limits *lim, cJSON **out, bool *own,
                       sy_error *err) {
    return parse_json(tree->alloc, tree, json, len, lim, out, own, err);
}
