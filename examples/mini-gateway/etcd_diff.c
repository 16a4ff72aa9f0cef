/*
 * etcd_diff.c - the etcd source's full read, diffed: what etcd holds
 * under the prefix at the read's revision against what the records say is
 * applied. The keys read whose mod_revision is not the applied one are
 * changes; the records the read did not list are deletes. Linear in the
 * keys (a prefix may hold tens of thousands): each key's record is looked
 * up once (a service's instances by binary search), the records not
 * listed found in one pass over them, and the route keys sorted by
 * creation. Called by etcd_source.c under its mutex.
 */
#include "etcd_source_int.h"

#include <stdlib.h>
#include <string.h>

/* Route keys by create_revision; keys created at one revision (one
 * transaction) in key order, the order etcd lists a range in. */
static int by_creation(const void *pa, const void *pb) {
    const etcd_change *a = pa, *b = pb;
    if (a->create_revision != b->create_revision)
        return a->create_revision < b->create_revision ? -1 : 1;
    return strcmp(a->key, b->key);
}

/* New sources are registered in creation order, as watching gateways saw
 * them: registration order breaks rank ties between sources. So the route
 * keys go first, sorted by creation (keys are unique, so the order is
 * total: n log n, a prefix may hold tens of thousands); the instance keys
 * follow in the key order etcd listed them, each service's together
 * (their order changes nothing, and in key order each service's record is
 * found once and its instances are appended to its sorted list). False:
 * out of memory. */
static bool sort_by_creation(etcd_change_list *got) {
    size_t n = got->n, routes = 0;
    etcd_change *v = got->v;
    if (!n) /* an empty prefix: v may be NULL */
        return true;
    etcd_change *tmp = malloc(n * sizeof *tmp);
    if (!tmp)
        return false;
    for (size_t i = 0; i < n; i++) /* routes, then instances, in order */
        if (v[i].is_route)
            tmp[routes++] = v[i];
    for (size_t i = 0, k = routes; i < n; i++)
        if (!v[i].is_route)
            tmp[k++] = v[i];
    memcpy(v, tmp, n * sizeof *v);
    free(tmp);
    qsort(v, routes, sizeof *v, by_creation);
    return true;
}

/* Is c applied already, at its mod revision? */
static bool applied_already(gw_etcd *e, const etcd_change *c) {
    if (e->force_full) /* a failed commit left the records ahead */
        return false;
    if (c->is_route) {
        source_rec *s = etcd_find_source(e, c->name);
        return s && s->present && s->mod_revision == c->mod_revision;
    }
    service_rec *s = etcd_find_service(e, c->name, false);
    bool found = false;
    size_t k = s ? etcd_find_inst(s, c->id, &found) : 0;
    return found && s->v[k].mod_revision == c->mod_revision;
}

/* The keys read that are not applied at their revision, moved from got
 * into diff. False: out of memory. */
static bool diff_changed(gw_etcd *e, etcd_change_list *got,
                         etcd_change_list *diff) {
    for (size_t i = 0; i < got->n; i++) {
        etcd_change *c = &got->v[i];
        if (applied_already(e, c))
            continue;
        if (!etcd_changes_push(diff, c))
            return false;
        *c = (etcd_change){0};
    }
    return true;
}

/* A delete of a key that is gone (name and id copied). False: out of
 * memory. */
static bool push_gone(etcd_change_list *diff, bool is_route, const char *name,
                      const char *key, const char *id, int64_t revision) {
    etcd_change c = {.is_route = is_route,
                     .del = true,
                     .name = etcd_strdup(name),
                     .key = key ? etcd_strdup(key) : NULL,
                     .id = id ? etcd_strdup(id) : NULL,
                     .mod_revision = revision};
    if (c.name && (!key || c.key) && (!id || c.id) &&
        etcd_changes_push(diff, &c))
        return true;
    etcd_change_free(&c);
    return false;
}

/* Mark the records of the keys the read listed (seen); the others are
 * gone. One lookup per key: the instance keys come in key order, a
 * service's together (sort_by_creation), and are found by binary search
 * within their service. */
static void mark_seen(gw_etcd *e, const etcd_change_list *got) {
    for (size_t i = 0; i < e->src_n; i++)
        e->src[i].seen = false;
    for (size_t i = 0; i < e->svc_n; i++)
        for (size_t j = 0; j < e->svc[i].n; j++)
            e->svc[i].v[j].seen = false;
    for (size_t k = 0; k < got->n; k++) {
        const etcd_change *c = &got->v[k];
        if (c->is_route) {
            source_rec *s = etcd_find_source(e, c->name);
            if (s)
                s->seen = true;
            continue;
        }
        service_rec *s = etcd_find_service(e, c->name, false);
        bool found = false;
        size_t j = s ? etcd_find_inst(s, c->id, &found) : 0;
        if (found)
            s->v[j].seen = true;
    }
}

/* A delete for every source whose key the read did not see (mark_seen). */
static bool diff_gone_sources(gw_etcd *e, etcd_change_list *diff) {
    bool ok = true;
    for (size_t i = 0; i < e->src_n; i++) {
        source_rec *s = &e->src[i];
        if (s->present && !s->seen &&
            !push_gone(diff, true, s->name, s->key, NULL, e->read_revision))
            ok = false;
    }
    return ok;
}

/* A delete for every instance the read did not see (mark_seen). */
static bool diff_gone_instances(gw_etcd *e, etcd_change_list *diff) {
    bool ok = true;
    for (size_t i = 0; i < e->svc_n; i++) {
        service_rec *s = &e->svc[i];
        for (size_t j = 0; j < s->n; j++)
            if (!s->v[j].seen && !push_gone(diff, false, s->name, NULL,
                                            s->v[j].id, e->read_revision))
                ok = false;
    }
    return ok;
}

/* See etcd_source_int.h. */
bool etcd_full_read_diff(gw_etcd *e, etcd_change_list *got,
                         etcd_change_list *diff) {
    if (!sort_by_creation(got))
        return false;
    mark_seen(e, got);
    bool ok = diff_changed(e, got, diff);
    ok &= diff_gone_sources(e, diff);
    ok &= diff_gone_instances(e, diff);
    return ok;
}
