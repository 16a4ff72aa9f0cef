/*
 * change_set.c - staging changes for one commit: each sy_change_set_* call
 * checks its arguments and copies them (bytes, strings, instance lists with
 * their metadata) into the change set's arena, so the caller's buffers may
 * go away before the commit. The router (router.c) commits them.
 */
#include "router/change_set.h"
#include "router/router_int.h"

#include <stdio.h>

int sy_change_set_new(sy_router *r, sy_change_set **out, sy_error *err) {
    if (out)
        *out = NULL;
    if (!r || !out)
        return sy__error_set(err, SY_EINVAL, "", "router or out is NULL");
    const sy__alloc *a = sy__router_allocator(r);
    sy_change_set *cs = sy__calloc(a, 1, sizeof *cs);
    if (!cs)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    cs->router = r;
    cs->alloc = *a;
    sy__arena_init(&cs->arena, &cs->alloc, 4096);
    *out = cs;
    return SY_OK;
}

void sy_change_set_free(sy_change_set *cs) {
    if (!cs)
        return;
    sy__arena_free(&cs->arena);
    sy__alloc a = cs->alloc;
    sy__free(&a, cs->items);
    sy__free(&a, cs);
}

size_t sy_change_set_count(const sy_change_set *cs) {
    return cs ? cs->count : 0;
}

const char *sy__change_kind_name(sy__change_kind k) {
    switch (k) {
    case SY_CHANGE_APPLY: return "apply";
    case SY_CHANGE_ROLLBACK: return "rollback";
    case SY_CHANGE_UPSERT: return "upsert";
    case SY_CHANGE_REMOVE: return "remove";
    case SY_CHANGE_ENABLE: return "enable";
    case SY_CHANGE_SET_INSTANCES: return "set instances of";
    case SY_CHANGE_UPDATE_INSTANCES: return "update instances of";
    }
    return "change";
}

/* A new item with its name copied in *out (counted by done()), or the
 * error code (err set; SY_ENOMEM stays SY_ENOMEM without an err too). */
static int stage(sy_change_set *cs, sy__change_kind kind, const char *name,
                 const char *what, sy_error *err, sy__change **out) {
    if (!cs || !name || !*name)
        return sy__error_set(err, SY_EINVAL, "", "%s is NULL or empty",
                             cs ? what : "change set");
    if (cs->count >= SY_MAX_CHANGE_SET_SIZE)
        return sy__error_set(err, SY_ELIMIT, "",
                             "a change set holds at most %u changes",
                             SY_MAX_CHANGE_SET_SIZE);
    if (cs->count == cs->cap) {
        sy__change *v = sy__grow(&cs->alloc, cs->items, &cs->cap, cs->count + 1,
                                 8, sizeof *v);
        if (!v)
            return sy__error_set(err, SY_ENOMEM, "", "out of memory");
        cs->items = v;
    }
    sy__change *c = &cs->items[cs->count];
    memset(c, 0, sizeof *c);
    c->kind = kind;
    if (!(c->name = sy__arena_strdup(&cs->arena, name)))
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    *out = c;
    return SY_OK;
}

static int done(sy_change_set *cs) {
    cs->count++;
    return SY_OK;
}

static int copy_bytes(sy_change_set *cs, sy__change *c, const char *bytes,
                      size_t len, sy_error *err) {
    char *b = sy__arena_strndup(&cs->arena, bytes, len);
    if (!b)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    c->bytes = b;
    c->len = len;
    return done(cs);
}

int sy_change_set_apply(sy_change_set *cs, const char *source, const char *json,
                        size_t len, sy_error *err) {
    if (!json)
        return sy__error_set(err, SY_EINVAL, "", "document is NULL");
    sy__change *c = NULL;
    int rc = stage(cs, SY_CHANGE_APPLY, source, "source name", err, &c);
    return rc ? rc : copy_bytes(cs, c, json, len, err);
}

int sy_change_set_upsert_route(sy_change_set *cs, const char *source,
                               const char *route_json, size_t len,
                               sy_error *err) {
    if (!route_json)
        return sy__error_set(err, SY_EINVAL, "", "route is NULL");
    sy__change *c = NULL;
    int rc = stage(cs, SY_CHANGE_UPSERT, source, "source name", err, &c);
    return rc ? rc : copy_bytes(cs, c, route_json, len, err);
}

int sy_change_set_remove_route(sy_change_set *cs, const char *id,
                               sy_error *err) {
    sy__change *c = NULL;
    int rc = stage(cs, SY_CHANGE_REMOVE, id, "route id", err, &c);
    return rc ? rc : done(cs);
}

int sy_change_set_set_route_enabled(sy_change_set *cs, const char *id,
                                    bool enabled, sy_error *err) {
    sy__change *c = NULL;
    int rc = stage(cs, SY_CHANGE_ENABLE, id, "route id", err, &c);
    if (rc)
        return rc;
    c->enabled = enabled;
    return done(cs);
}

int sy_change_set_rollback(sy_change_set *cs, const char *source,
                           const char *version, sy_error *err) {
    sy__change *c = NULL;
    int rc = stage(cs, SY_CHANGE_ROLLBACK, source, "source name", err, &c);
    if (rc)
        return rc;
    if (version && !(c->text = sy__arena_strdup(&cs->arena, version)))
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    return done(cs);
}

int sy__check_instance_counts(const sy_instance *list,
                              const sy_instance_delta *deltas, size_t n,
                              sy_error *err) {
    if (n > SY_MAX_INSTANCES)
        return sy__error_set(err, SY_ELIMIT, deltas ? "deltas" : "instances",
                             "%zu %s: at most %u in one call", n,
                             deltas ? "deltas" : "instances", SY_MAX_INSTANCES);
    for (size_t i = 0; i < n && (list || deltas); i++) {
        const sy_instance *in = deltas ? &deltas[i].instance : &list[i];
        if (in->metadata_count > SY_MAX_INSTANCE_METADATA) {
            char path[64];
            snprintf(path, sizeof path, "%s[%zu]%s.metadata",
                     deltas ? "deltas" : "instances", i,
                     deltas ? ".instance" : "");
            return sy__error_set(err, SY_ELIMIT, path,
                                 "%zu metadata entries: at most %u",
                                 in->metadata_count, SY_MAX_INSTANCE_METADATA);
        }
    }
    return SY_OK;
}

/* NULL stays NULL (validation at commit names it). */
static const char *dup_or_null(sy__arena *ar, const char *s, bool *oom) {
    if (!s)
        return NULL;
    const char *d = sy__arena_strdup(ar, s);
    if (!d)
        *oom = true;
    return d;
}

static bool copy_instance(sy__arena *ar, sy_instance *dst,
                          const sy_instance *src) {
    bool oom = false;
    *dst = *src;
    dst->id = dup_or_null(ar, src->id, &oom);
    dst->host = dup_or_null(ar, src->host, &oom);
    if (src->metadata_count && src->metadata) {
        sy_kv *md = sy__arena_alloc(ar, src->metadata_count * sizeof *md);
        if (!md)
            return false;
        for (size_t i = 0; i < src->metadata_count; i++) {
            md[i].key = dup_or_null(ar, src->metadata[i].key, &oom);
            md[i].value = dup_or_null(ar, src->metadata[i].value, &oom);
        }
        dst->metadata = md;
    }
    return !oom;
}

int sy_change_set_set_instances(sy_change_set *cs, const char *service,
                                const sy_instance *instances, size_t count,
                                sy_error *err) {
    if (count && !instances)
        return sy__error_set(err, SY_EINVAL, "", "instances is NULL");
    int rc = sy__check_instance_counts(instances, NULL, count, err);
    sy__change *c = NULL;
    if (rc == SY_OK)
        rc = stage(cs, SY_CHANGE_SET_INSTANCES, service, "service name", err,
                   &c);
    if (rc)
        return rc;
    sy_instance *v = sy__arena_alloc(&cs->arena, (count + 1) * sizeof *v);
    if (!v)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    for (size_t i = 0; i < count; i++)
        if (!copy_instance(&cs->arena, &v[i], &instances[i]))
            return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    c->instances = v;
    c->count = count;
    return done(cs);
}

int sy_change_set_update_instances(sy_change_set *cs, const char *service,
                                   const sy_instance_delta *deltas,
                                   size_t count, sy_error *err) {
    if (count && !deltas)
        return sy__error_set(err, SY_EINVAL, "", "deltas is NULL");
    int rc = sy__check_instance_counts(NULL, deltas, count, err);
    sy__change *c = NULL;
    if (rc == SY_OK)
        rc = stage(cs, SY_CHANGE_UPDATE_INSTANCES, service, "service name", err,
                   &c);
    if (rc)
        return rc;
    sy_instance_delta *v = sy__arena_alloc(&cs->arena, (count + 1) * sizeof *v);
    if (!v)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    for (size_t i = 0; i < count; i++) {
        v[i].op = deltas[i].op;
        if (!copy_instance(&cs->arena, &v[i].instance, &deltas[i].instance))
            return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    }
    c->deltas = v;
    c->count = count;
    return done(cs);
}
