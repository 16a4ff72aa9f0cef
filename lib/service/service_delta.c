/*
 * service_delta.c - changing an instance list: applying deltas (add,
 * update, remove by id) to a service to get the next one, and the
 * instance diff between two services (added, removed, changed) that
 * reports and events carry. Service objects themselves are service.c's.
 */
#include "service/service_int.h"

#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- */
/* Deltas                                                             */
/* ---------------------------------------------------------------- */

typedef struct sy__svc_work {
    const sy__alloc *a;
    sy_instance *list;
    bool *gone;
    size_t n, cap;
    sy__idtab ids; /* id -> index into list[] */
} sy__svc_work;

static const char *sy__svc_work_id(const void *ctx, uint32_t i) {
    return ((const sy__svc_work *)ctx)->list[i].id;
}

static uint32_t sy__svc_work_find(const sy__svc_work *w, const char *id) {
    size_t len = strlen(id);
    uint32_t pos;
    return sy__idtab_find(&w->ids, id, len, sy__idtab_hash(id, len),
                          sy__svc_work_id, w, &pos);
}

static void sy__svc_work_put(sy__svc_work *w, uint32_t idx) {
    const char *id = w->list[idx].id;
    sy__idtab_add(&w->ids, sy__idtab_hash(id, strlen(id)), idx);
}

static int sy__svc_apply_one(sy__svc_work *w, const sy_instance_delta *d,
                             size_t i, sy_error *err) {
    sy__svc_where where = {true, i};
    char path[80];
    if (!d->instance.id || !*d->instance.id) {
        sy__svc_path(path, sizeof path, where, ".id");
        return sy__error_set(err, SY_EINVAL, path, "instance id is empty");
    }
    uint32_t at = sy__svc_work_find(w, d->instance.id);
    bool known = at != SY_NONE && !w->gone[at];
    switch (d->op) {
    case SY_INSTANCE_ADD: {
        int rc = sy__svc_validate(&d->instance, where, err);
        if (rc)
            return rc;
        if (at == SY_NONE) {
            at = (uint32_t)w->n++;
            w->list[at] = d->instance;
            sy__svc_work_put(w, at);
        } else {
            w->list[at] = d->instance;
        }
        w->gone[at] = false;
        return 0;
    }
    case SY_INSTANCE_REMOVE:
    case SY_INSTANCE_WEIGHT:
    case SY_INSTANCE_STATE:
        if (!known) {
            sy__svc_path(path, sizeof path, where, ".id");
            return sy__error_set(err, SY_ENOTFOUND, path, "no instance \"%s\"",
                                 d->instance.id);
        }
        if (d->op == SY_INSTANCE_REMOVE) {
            w->gone[at] = true;
        } else if (d->op == SY_INSTANCE_WEIGHT) {
            w->list[at].weight = d->instance.weight;
        } else {
            if ((unsigned)d->instance.state > SY_INSTANCE_DOWN) {
                sy__svc_path(path, sizeof path, where, ".state");
                return sy__error_set(err, SY_EINVAL, path, "unknown state %u",
                                     (unsigned)d->instance.state);
            }
            w->list[at].state = d->instance.state;
        }
        return 0;
    }
    snprintf(path, sizeof path, "deltas[%zu].op", i);
    return sy__error_set(err, SY_EINVAL, path, "unknown operation %d",
                         (int)d->op);
}

int sy__service_apply_deltas(const sy__service *old, const sy_instance_delta *d,
                             size_t n, sy__service **out, sy_error *err) {
    if (!old || !out || (n && !d))
        return sy__error_set(err, SY_EINVAL, "", "NULL service or deltas");
    sy__svc_work w = {.a = &old->alloc};
    w.cap = old->n + n;
    if (w.cap < old->n)
        return sy__error_set(err, SY_ELIMIT, "deltas", "too many deltas");
    size_t id_cap = sy__idtab_capacity(w.cap);
    w.list = sy__calloc(w.a, w.cap ? w.cap : 1, sizeof *w.list);
    w.gone = sy__calloc(w.a, w.cap ? w.cap : 1, sizeof *w.gone);
    sy__idtab_entry *ids = sy__malloc(w.a, id_cap * sizeof *ids);
    w.ids.e = ids;
    int rc = SY_ENOMEM;
    if (!w.list || !w.gone || !ids) {
        sy__error_set(err, rc, "", "out of memory");
        goto out;
    }
    sy__idtab_init(&w.ids, ids, id_cap);
    for (size_t i = 0; i < old->n; i++) {
        w.list[w.n] = old->inst[i].pub;
        sy__svc_work_put(&w, (uint32_t)w.n++);
    }
    for (size_t i = 0; i < n; i++)
        if ((rc = sy__svc_apply_one(&w, &d[i], i, err)))
            goto out;
    size_t k = 0;
    for (size_t i = 0; i < w.n; i++)
        if (!w.gone[i])
            w.list[k++] = w.list[i];
    sy__service *s;
    if ((rc = sy__service_new(&old->alloc, old->name, w.list, k, &s, err)))
        goto out;
    sy__service_inherit_rr(s, old);
    *out = s;
out:
    sy__free(w.a, w.list);
    sy__free(w.a, w.gone);
    sy__free(w.a, w.ids.e);
    return rc;
}

/* ---------------------------------------------------------------- */
/* Diff                                                               */
/* ---------------------------------------------------------------- */

static bool sy__svc_inst_equal(const sy_instance *a, const sy_instance *b) {
    if (strcmp(a->host, b->host) || a->port != b->port ||
        a->secure != b->secure || a->weight != b->weight ||
        a->state != b->state || a->metadata_count != b->metadata_count)
        return false;
    for (size_t j = 0; j < a->metadata_count; j++)
        if (strcmp(a->metadata[j].key, b->metadata[j].key) ||
            strcmp(a->metadata[j].value, b->metadata[j].value))
            return false;
    return true;
}

int sy__service_diff_compute(const sy__alloc *a, const sy__service *from,
                             const sy__service *to, sy__service_diff *out,
                             sy_error *err) {
    if (!out)
        return sy__error_set(err, SY_EINVAL, "", "NULL diff");
    memset(out, 0, sizeof *out);
    if (!a)
        return sy__error_set(err, SY_EINVAL, "", "NULL allocator");
    out->alloc = *a;
    /* cls[i]: the class of to's instance i; gone[j]: from's instance j has
     * no instance of its id in `to` (matched by position first) */
    size_t nt = to ? to->n : 0, nf = from ? from->n : 0;
    uint8_t *cls = sy__malloc(&out->alloc, nt + nf + 1);
    if (!cls)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    uint8_t *gone = cls + nt;
    memset(gone, 2, nf);
    size_t cnt[4] = {0}, bytes = 0;
    for (size_t i = 0; i < nt; i++) {
        uint32_t j = from ? sy__svc_match(to, i, from) : SY_NONE;
        if (j != SY_NONE)
            gone[j] = 0;
        cls[i] = j == SY_NONE                                               ? 1
                 : sy__svc_inst_equal(&to->inst[i].pub, &from->inst[j].pub) ? 0
                                                                            : 3;
        cnt[cls[i]]++;
        bytes += cls[i] ? to->inst[i].idlen + 1 : 0;
    }
    for (size_t j = 0; j < nf; j++) {
        cnt[gone[j]]++;
        bytes += gone[j] ? from->inst[j].idlen + 1 : 0;
    }
    size_t total = cnt[1] + cnt[2] + cnt[3];
    char **ptrs =
        total ? sy__malloc(&out->alloc, total * sizeof(char *) + bytes) : NULL;
    if (total && !ptrs) {
        sy__free(&out->alloc, cls);
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    }
    out->block = ptrs;
    char *str = ptrs ? (char *)(ptrs + total) : NULL;
    const char **lists[4] = {NULL, NULL, NULL, NULL};
    if (ptrs) { /* no offsets from NULL when the diff is empty */
        lists[1] = (const char **)ptrs;
        lists[2] = lists[1] + cnt[1];
        lists[3] = lists[2] + cnt[2];
    }
    out->added = cnt[1] ? lists[1] : NULL;
    out->removed = cnt[2] ? lists[2] : NULL;
    out->changed = cnt[3] ? lists[3] : NULL;
    size_t fill[4] = {0};
    for (int side = 0; side < 2 && total; side++) {
        const sy__service *self = side ? from : to;
        const uint8_t *c = side ? gone : cls;
        for (size_t i = 0; i < (side ? nf : nt); i++) {
            if (!c[i])
                continue;
            size_t len = self->inst[i].idlen + 1;
            memcpy(str, self->inst[i].pub.id, len);
            lists[c[i]][fill[c[i]]++] = str;
            str += len;
        }
    }
    sy__free(&out->alloc, cls);
    out->added_count = cnt[1];
    out->removed_count = cnt[2];
    out->changed_count = cnt[3];
    return 0;
}

void sy__service_diff_free(sy__service_diff *d) {
    if (!d)
        return;
    if (d->block)
        sy__free(&d->alloc, d->block);
    d->block = NULL;
    d->added = d->removed = d->changed = NULL;
    d->added_count = d->removed_count = d->changed_count = 0;
}
