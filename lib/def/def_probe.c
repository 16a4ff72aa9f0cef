/*
 * def_probe.c - every error of an invalid route, for lenient parses (what
 * `switchyard check` lists). Building a route stops at its first error;
 * here each independent part of the route object (id, uri, order, each
 * predicate, each filter, metadata) is built alone in a scratch route and
 * its errors are collected, with the part's path in the whole route. Runs
 * only for routes that already failed, so valid documents pay nothing.
 */
#include "def/def_build.h"

#include <stdio.h>

typedef struct probe {
    const sy__def_ctx *ctx; /* without reuse: scratch routes share nothing */
    const char *path;       /* the route's, e.g. "routes[3]" */
    sy_error *out;
    size_t max, n;
    bool oom;
} probe;

static bool same_error(const sy_error *a, const sy_error *b) {
    return strcmp(a->path, b->path) == 0 && strcmp(a->message, b->message) == 0;
}

static void keep(probe *pr, const sy_error *e) {
    if (e->code == SY_ENOMEM) {
        pr->oom = true;
        return;
    }
    for (size_t i = 0; i < pr->n; i++)
        if (same_error(&pr->out[i], e))
            return;
    if (pr->n < pr->max)
        pr->out[pr->n++] = *e;
}

/* "<path>.<list>[0]..." becomes "<path>.<list>[i]...": the entry was
 * built alone, as the first of a one-entry list. */
static void reindex(sy_error *e, const char *path, const char *list, size_t i) {
    char from[300];
    sy__def_path(from, sizeof from, "%s%s%s[0]", path, *path ? "." : "", list);
    size_t len = strlen(from);
    if (strncmp(e->path, from, len) != 0)
        return;
    char p[sizeof e->path];
    from[len - 3] = '\0'; /* drop "[0]" */
    sy__def_path(p, sizeof p, "%s[%zu]%s", from, i, e->path + len);
    memcpy(e->path, p, sizeof p);
}

/* Build `obj` as a route; its error, if any, goes to pr (entry errors of
 * `list` renumbered to index i). */
static void try_build(probe *pr, cJSON *obj, const char *list, size_t i) {
    if (!obj) {
        pr->oom = true;
        return;
    }
    struct sy_route *r = NULL;
    sy_error e;
    sy__error_clear(&e);
    if (sy__def_build_route(pr->ctx, obj, pr->path, &r, &e)) {
        if (list)
            reindex(&e, pr->path, list, i);
        keep(pr, &e);
    }
    sy__route_unref(r);
}

/* A scratch route object {"id", "uri"} plus, by reference, `key` -> `v`. */
static cJSON *scratch(const cJSON *id, const char *uri, const char *key,
                      const cJSON *v) {
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok = true;
    if (id)
        ok = cJSON_AddItemReferenceToObject(o, "id", (cJSON *)(uintptr_t)id);
    else
        ok = cJSON_AddStringToObject(o, "id", "probe") != NULL;
    ok = ok && cJSON_AddStringToObject(o, "uri", uri) != NULL;
    if (ok && key && v)
        ok = cJSON_AddItemReferenceToObject(o, key, (cJSON *)(uintptr_t)v);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Each entry of a predicates / filters list alone; a filter with the
 * route's predicates when they build (`preds`, else NULL): a filter may
 * name a variable they capture (#{@pathVariable:NAME}, a fallbackUri's
 * {NAME}), refused without them. */
static void probe_entries(probe *pr, const cJSON *obj, const char *uri,
                          const char *list, const cJSON *preds) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(obj, list);
    if (!arr || cJSON_IsNull(arr))
        return;
    if (!cJSON_IsArray(arr)) { /* the list's own error */
        cJSON *o = scratch(NULL, uri, list, arr);
        try_build(pr, o, NULL, 0);
        cJSON_Delete(o);
        return;
    }
    size_t i = 0;
    for (const cJSON *c = arr->child; c && !pr->oom; c = c->next, i++) {
        /* a reference copies the item as it is: fill `one` first */
        cJSON *one = cJSON_CreateArray();
        cJSON *o = NULL;
        if (one && cJSON_AddItemReferenceToArray(one, (cJSON *)(uintptr_t)c))
            o = scratch(NULL, uri, list, one);
        if (o && preds &&
            !cJSON_AddItemReferenceToObject(o, "predicates",
                                            (cJSON *)(uintptr_t)preds)) {
            cJSON_Delete(o);
            o = NULL;
        }
        if (o)
            try_build(pr, o, list, i);
        else
            pr->oom = true;
        cJSON_Delete(o);
        cJSON_Delete(one);
    }
}

/* The metadata with every selection setting error, not just the first. */
static void probe_metadata(probe *pr, const cJSON *md) {
    if (!md || cJSON_IsNull(md))
        return;
    struct sy_route *r = sy__route_new(pr->ctx->alloc);
    if (!r) {
        pr->oom = true;
        return;
    }
    sy_error e;
    sy__error_clear(&e);
    if (sy__def_build_metadata(r, md, pr->path, pr->ctx->alloc, &e)) {
        keep(pr, &e);
    } else {
        sy_error found[16];
        size_t n = sy__route_check_select(r, pr->path, found, 16);
        for (size_t i = 0; i < n && i < 16; i++)
            keep(pr, &found[i]);
    }
    sy__route_unref(r);
}

size_t sy__def_route_errors(const sy__def_ctx *ctx, const cJSON *obj,
                            const char *path, const sy_error *first,
                            sy_error *out, size_t max) {
    if (max == 0)
        return 0;
    sy__def_ctx solo = *ctx;
    solo.reuse = NULL;
    probe pr = {&solo, path, out, max, 0, false};
    if (cJSON_IsObject(obj)) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(obj, "id");
        const cJSON *uri = cJSON_GetObjectItemCaseSensitive(obj, "uri");
        /* id alone (with a harmless uri), then uri alone */
        cJSON *o = cJSON_CreateObject();
        if (o && id)
            cJSON_AddItemReferenceToObject(o, "id", (cJSON *)(uintptr_t)id);
        if (o && cJSON_AddStringToObject(o, "uri", "no://op"))
            try_build(&pr, o, NULL, 0);
        cJSON_Delete(o);
        size_t before = pr.n;
        o = cJSON_CreateObject();
        if (o && cJSON_AddStringToObject(o, "id", "probe") && uri)
            cJSON_AddItemReferenceToObject(o, "uri", (cJSON *)(uintptr_t)uri);
        try_build(&pr, o, NULL, 0);
        cJSON_Delete(o);
        /* the other parts with the route's own uri when it is valid (an
         * entry may depend on the upstream), else a neutral one */
        const char *u = pr.n == before && cJSON_IsString(uri) ? uri->valuestring
                                                              : "no://op";
        const cJSON *order = cJSON_GetObjectItemCaseSensitive(obj, "order");
        if (order) {
            o = scratch(NULL, u, "order", order);
            try_build(&pr, o, NULL, 0);
            cJSON_Delete(o);
        }
        size_t clean = pr.n;
        probe_entries(&pr, obj, u, "predicates", NULL);
        const cJSON *preds =
            cJSON_GetObjectItemCaseSensitive(obj, "predicates");
        probe_entries(&pr, obj, u, "filters",
                      pr.n == clean && cJSON_IsArray(preds) ? preds : NULL);
        probe_metadata(&pr, cJSON_GetObjectItemCaseSensitive(obj, "metadata"));
    }
    /* the error that failed the build is always listed */
    bool listed = false;
    for (size_t i = 0; i < pr.n && !listed; i++)
        listed = same_error(&out[i], first);
    if (!listed) {
        if (pr.n == max)
            pr.n--;
        memmove(out + 1, out, pr.n * sizeof *out);
        out[0] = *first;
        pr.n++;
    }
    return pr.n;
}
