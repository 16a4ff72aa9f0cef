/*
 * def_single.c - one JSON value parsed on its own, outside a document:
 * a single route (for upserts), a live route again with its
 * enabled/disabled status, and the router's default filters (def.h).
 */
#include "def/def_build.h"
#include "route/filter.h"

static int resolve_opts(const sy_parse_options **opts, sy__alloc *a,
                        sy_limits *lim, sy_error *err) {
    static const sy_parse_options defaults = SY_PARSE_OPTIONS_INIT;
    if (!*opts)
        *opts = &defaults;
    if ((*opts)->size < offsetof(sy_parse_options, host_runs))
        return sy__error_set(err, SY_EINVAL, "",
                             "sy_parse_options.size is not set");
    sy__alloc_init(a, (*opts)->allocator);
    sy__limits_resolve(lim, &(*opts)->limits);
    return 0;
}

/* One JSON value, a single route or the default filters: its allocator
 * and its tree (in `tree`, or cJSON's own when `own`). */
typedef struct one_value {
    sy__alloc a;
    sy__arena tree;
    cJSON *root;
    bool own;
} one_value;

static void one_value_free(one_value *v) {
    if (v->own)
        cJSON_Delete(v->root);
    v->own = false;
    sy__arena_free(&v->tree);
}

/* The start of sy__def_parse_route and sy__def_parse_filters: the
 * arguments checked (*out NULL), the options resolved and json parsed
 * under the limits into v (nothing to free on failure). */
static int one_value_parse(const char *json, size_t len,
                           const sy_parse_options **opts, struct sy_route **out,
                           one_value *v, sy_error *err) {
    if (!out || (!json && len))
        return sy__error_set(err, SY_EINVAL, "", "json and out are required");
    *out = NULL;
    sy_limits lim = {0, 0, 0, 0};
    int rc = resolve_opts(opts, &v->a, &lim, err);
    if (rc)
        return rc;
    v->root = NULL;
    v->own = false;
    sy__arena_init(&v->tree, &v->a, 4096);
    rc = sy__def_parse_json(&v->tree, json ? json : "", len, &lim, &v->root,
                            &v->own, err);
    if (rc)
        one_value_free(v);
    return rc;
}

int sy__def_parse_route(const char *json, size_t len,
                        const sy_parse_options *opts, const char *path,
                        struct sy_route **out, sy_error *err) {
    one_value v;
    int rc = one_value_parse(json, len, &opts, out, &v, err);
    if (rc)
        return rc;
    sy__def_ctx ctx = {&v.a, opts->registry,          NULL, NULL, NULL, NULL,
                       len,  sy__def_host_runs(opts), NULL};
    rc = sy__def_build_route(&ctx, v.root, path ? path : "", out, err);
    one_value_free(&v);
    return rc;
}

int sy__def_route_with_enabled(const struct sy_route *r, bool enabled,
                               const sy_parse_options *opts,
                               struct sy_route **out, sy_error *err) {
    if (!r || !out)
        return sy__error_set(err, SY_EINVAL, "", "route and out are required");
    *out = NULL;
    sy__alloc a;
    sy_limits lim = {0, 0, 0, 0};
    int rc = resolve_opts(&opts, &a, &lim, err);
    if (rc)
        return rc;
    struct sy_route *c = sy__def_clone(r);
    if (!c)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    if (!sy__def_set_status(c, enabled)) {
        sy__route_unref(c);
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    }
    sy__compile_env env = {c->alloc, opts->registry, NULL, NULL,
                           sy__def_host_runs(opts)};
    if ((rc = sy__route_compile(c, &env, "", err))) {
        sy__route_unref(c);
        return rc;
    }
    /* last: the fingerprint lies over the arena's first chunk's header */
    if (sy__def_canonicalize(c)) {
        sy__route_unref(c);
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    }
    *out = c;
    return 0;
}

int sy__def_parse_filters(const char *json, size_t len,
                          const sy_parse_options *opts, struct sy_route **out,
                          sy_error *err) {
    static const char *path = "defaultFilters";
    one_value v;
    int rc = one_value_parse(json, len, &opts, out, &v, err);
    if (rc)
        return rc;
    struct sy_route *r = sy__route_new(&v.a);
    sy__def_ctx ctx = {&v.a, opts->registry,          NULL, NULL, NULL, NULL,
                       0,    sy__def_host_runs(opts), NULL};
    if (!r)
        rc = sy__error_set(err, SY_ENOMEM, path, "out of memory");
    else if (!cJSON_IsArray(v.root))
        rc = sy__error_set(err, SY_ETYPE, path,
                           "default filters must be an array");
    else
        rc = sy__def_build_entries_in(&ctx, r, NULL, SY_FACTORY_FILTER, v.root,
                                      path, err);
    one_value_free(&v);
    if (!rc && sy__def_canonicalize(r))
        rc = sy__error_set(err, SY_ENOMEM, path, "out of memory");
    if (!rc && r->more->filter_count) { /* then r owns its more */
        sy__compile_env env = {r->alloc, opts->registry, NULL, &r->arena,
                               sy__def_host_runs(opts)};
        sy__route_more *m = (sy__route_more *)(uintptr_t)r->more;
        m->cfilters = sy__route_calloc(r, m->filter_count, sizeof *m->cfilters);
        if (!m->cfilters)
            rc = sy__error_set(err, SY_ENOMEM, path, "out of memory");
        for (size_t i = 0; !rc && i < m->filter_count; i++) {
            char p[64];
            sy__def_path(p, sizeof p, "%s[%zu]", path, i);
            rc = sy__filter_compile(&m->filters[i], &env, p, &m->cfilters[i],
                                    err);
            if (rc && m->filters[i].shortcut)
                sy__def_shortcut_error(err, p);
        }
        if (!rc)
            rc = sy__route_check_host(r, sy__def_host_runs(opts), path, path,
                                      err);
    }
    if (rc) {
        sy__route_unref(r);
        return rc;
    }
    *out = r;
    return 0;
}
