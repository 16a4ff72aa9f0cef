/*
 * ngx_http_switchyard_zone.c - the shared-memory zone: its format stamp
 * (checked before a kept or replaced zone is read), the documents PUT to
 * the admin location (one per routes source, service, or source and
 * route id; the newest wins), the zone generation workers poll, and the
 * slots where workers publish what they applied. Everything is changed under
 * the slab pool's mutex; workers read the generation without it (one atomic
 * load).
 */
#include "ngx_http_switchyard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void sw_doc_free_locked(sw_zone_ctx_t *z, sw_shm_doc_t *d) {
    ngx_slab_free_locked(z->shpool, d->name);
    ngx_slab_free_locked(z->shpool, d->source);
    ngx_slab_free_locked(z->shpool, d->data);
    ngx_slab_free_locked(z->shpool, d);
}

uint64_t sw_hash(const u_char *p, size_t len, uint64_t h) {
    /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

uint64_t sw_doc_base(sw_main_conf_t *mcf, ngx_uint_t kind, ngx_str_t *source) {
    sw_file_t *f = mcf->route_files.elts;

    if (kind == SW_DOC_INSTANCES)
        return mcf->instances_hash;
    for (ngx_uint_t i = 0; i < mcf->route_files.nelts; i++)
        if (f[i].name.len == source->len &&
            ngx_strncmp(f[i].name.data, source->data, source->len) == 0)
            return f[i].hash;
    return 0;
}

/* The zone of the running configuration that this one replaces when
 * nginx made a new zone instead of keeping it (a reload that changed
 * switchyard_zone: nginx keeps a zone only at the same size). During a
 * reload the master still has the old cycle (ngx_cycle) and its zones
 * mapped. NULL at a start, a binary upgrade's new master or nginx -t
 * (no running configuration in this process), when the zone was kept,
 * or when the old zone is not this build's format (logged): its
 * documents are not read. Read through the old zone's slab pool, not its
 * sw_zone_ctx_t (another module's struct after a module upgrade). */
static ngx_shm_zone_t *sw_zone_replaced(ngx_shm_zone_t *zone) {
    ngx_cycle_t *old = (ngx_cycle_t *)ngx_cycle;
    ngx_list_part_t *part;

    if (old == NULL || old->shared_memory.part.elts == NULL)
        return NULL;
    for (part = &old->shared_memory.part; part; part = part->next) {
        ngx_shm_zone_t *o = part->elts;
        for (ngx_uint_t i = 0; i < part->nelts; i++) {
            const char *why;
            if (&o[i] == zone || o[i].tag != zone->tag || o[i].data == NULL ||
                o[i].shm.addr == NULL || o[i].shm.addr == zone->shm.addr ||
                o[i].shm.name.len != zone->shm.name.len ||
                ngx_strncmp(o[i].shm.name.data, zone->shm.name.data,
                            zone->shm.name.len) != 0)
                continue;
            why = sw_zone_format_why(((ngx_slab_pool_t *)o[i].shm.addr)->data);
            if (why) {
                ngx_log_error(NGX_LOG_WARN, zone->shm.log, 0,
                              "switchyard: zone \"%V\" resized: the stored "
                              "documents of the replaced zone are not "
                              "handed over: %s (this module's zone format "
                              "is %d)",
                              &zone->shm.name, why, SW_ZONE_VERSION);
                return NULL;
            }
            return &o[i];
        }
    }
    return NULL;
}

static int sw_shm_doc_cmp(const void *a, const void *b) {
    const sw_shm_doc_t *x = *(sw_shm_doc_t *const *)a,
                       *y = *(sw_shm_doc_t *const *)b;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Hand the stored documents of the replaced zone `from` over to the new
 * zone z, in replay order (their seq in z follows it: see
 * sw_shm_doc_t.order) (what the new zone read from a state file is
 * superseded by the running zone's newer or equal copy), then bump the
 * old zone's epoch: its workers, draining, stop following it and answer
 * a change 503, so none is taken there after the copy. Both mutexes are
 * held (the old workers may be storing a change). A document the new
 * zone has no room for is dropped, logged at error. Rate-limit buckets,
 * breakers and ejections start afresh in the new zone (logged). */
static void sw_zone_hand_over(ngx_cycle_t *cycle, sw_zone_ctx_t *z,
                              ngx_shm_zone_t *ozone) {
    ngx_uint_t n = 0, moved = 0, k = 0;
    sw_shm_doc_t *d, **docs = NULL;
    ngx_slab_pool_t *opool = (ngx_slab_pool_t *)ozone->shm.addr;
    sw_zone_ctx_t of = {opool->data, opool, NULL}, *from = &of;

    ngx_shmtx_lock(&from->shpool->mutex);
    for (d = from->sh->docs; d; d = d->next)
        n++;
    if (n && (docs = ngx_alloc(n * sizeof *docs, cycle->log)) == NULL) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "switchyard: out of memory handing over the %ui "
                      "stored documents of the replaced zone: they are lost",
                      n);
        n = 0;
    }
    for (d = from->sh->docs; d && docs; d = d->next)
        docs[k++] = d;
    if (n > 1)
        ngx_qsort(docs, n, sizeof *docs, sw_shm_doc_cmp);
    ngx_shmtx_lock(&z->shpool->mutex);
    for (k = 0; k < n; k++) {
        ngx_str_t name = {docs[k]->name_len, docs[k]->name};
        ngx_str_t source = {docs[k]->source_len, docs[k]->source};
        sw_shm_doc_t *c = sw_zone_prepare_locked(z, docs[k]->kind, &name,
                                                 &source, docs[k]->len);
        if (c == NULL) {
            ngx_log_error(NGX_LOG_ERR, cycle->log, 0,
                          "switchyard: stored %s \"%V\" dropped: zone "
                          "\"%V\" (%uz bytes) has no room for it",
                          sw_kind_name(docs[k]->kind), &name,
                          &z->mcf->zone->shm.name, z->mcf->zone->shm.size);
            continue;
        }
        ngx_memcpy(c->data, docs[k]->data, docs[k]->len);
        c->base = docs[k]->base;
        c->changed_us = docs[k]->changed_us;
        c->origin = docs[k]->origin;
        c->flags = docs[k]->flags;
        sw_zone_link_locked(z, c);
        moved++;
    }
    ngx_shmtx_unlock(&z->shpool->mutex);
    from->sh->epoch++;
    ngx_shmtx_unlock(&from->shpool->mutex);
    ngx_free(docs);
    ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                  "switchyard: zone \"%V\" resized: %ui of %ui stored "
                  "documents of zone \"%V\" (%uz bytes) handed over; rate "
                  "limits, breakers and ejections start afresh",
                  &z->mcf->zone->shm.name, moved, n, &z->mcf->zone->shm.name,
                  ozone->shm.size);
}

/* A reload or a start with a state file: the stored documents made on a
 * file that changed since (or for a source that is gone) are dropped,
 * logged at notice; the others stay. Runs in the master once the new
 * configuration is committed (init_module: a reload that fails before,
 * e.g. on bind(), leaves the zone as it was), and bumps the epoch, which
 * tells the old workers to stop following the zone. */
void sw_zone_reconcile(ngx_cycle_t *cycle, sw_main_conf_t *mcf) {
    sw_zone_ctx_t *z = mcf->zone->data;
    ngx_shm_zone_t *from = sw_zone_replaced(mcf->zone);
    sw_shm_doc_t *d, **pp;
    ngx_uint_t dropped = 0;

    /* the zone was made anew (its size changed): the running one's
     * changes come over first, then face the same checks */
    if (from && !ngx_test_config)
        sw_zone_hand_over(cycle, z, from);
    ngx_shmtx_lock(&z->shpool->mutex);
    for (pp = &z->sh->docs; (d = *pp) != NULL;) {
        ngx_str_t src = {SW_IS_ROUTE_OP(d->kind) ? d->source_len : d->name_len,
                         SW_IS_ROUTE_OP(d->kind) ? d->source : d->name};
        uint64_t base = sw_doc_base(mcf, d->kind, &src);
        const char *why = NULL;

        if (d->kind != SW_DOC_INSTANCES && base == 0)
            why = "its source is no longer configured";
        else if (base != d->base)
            why = d->kind == SW_DOC_INSTANCES
                      ? "the instances files changed"
                      : "the source's file changed: the file is taken";
        if (why == NULL) {
            pp = &d->next;
            continue;
        }
        /* nginx -t reads the state file into a zone of its own and
         * changes nothing: it says what loading the configuration will do */
        ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                      "switchyard: stored %s \"%*s\" (source \"%*s\") "
                      "%s: %s",
                      sw_kind_name(d->kind), d->name_len, d->name,
                      d->source_len, d->source,
                      ngx_test_config ? "will be dropped when this "
                                        "configuration is loaded (nginx -t: "
                                        "nothing changed yet)"
                                      : "dropped",
                      why);
        *pp = d->next;
        sw_doc_free_locked(z, d);
        dropped++;
    }
    ngx_memzero(z->sh->slots, sizeof(z->sh->slots));
    z->sh->epoch++;
    if (dropped && !ngx_test_config) {
        ngx_fd_t fd = sw_state_lock(mcf, cycle->log);
        sw_state_write_locked(z, mcf, cycle->log);
        sw_state_unlock(fd);
    }
    ngx_shmtx_unlock(&z->shpool->mutex);
}

#define SW_POLICY_SLOTS 16384
#define SW_POLICY_BREAKERS 256

/* The library's policy store, in the zone: every worker's limiters and
 * breakers use the same buckets (one rate for the server, not one per
 * worker). */
static ngx_int_t sw_zone_policy_init(sw_zone_ctx_t *ctx, ngx_shm_zone_t *zone) {
    size_t len = sy_policy_store_bytes(SW_POLICY_SLOTS, SW_POLICY_BREAKERS);
    sy_policy_store *st;
    sy_error err;
    void *mem = ngx_slab_alloc(ctx->shpool, len);

    if (mem == NULL || sy_policy_store_init(mem, len, SW_POLICY_SLOTS,
                                            SW_POLICY_BREAKERS, &st, &err)) {
        ngx_log_error(NGX_LOG_EMERG, zone->shm.log, 0,
                      "switchyard: zone \"%V\" (%uz bytes) is too small for "
                      "the policy store: it needs at least %uz bytes",
                      &zone->shm.name, zone->shm.size, sw_zone_min_size());
        return NGX_ERROR;
    }
    ctx->sh->policy = mem;
    ctx->sh->policy_len = len;
    return NGX_OK;
}

/* A zone kept across a reload holds the store the previous module
 * formatted. If this build cannot use it (another store format, after an
 * upgrade of the module), a new store is made beside it: the old workers
 * keep the one they attached to until they exit, the new ones start with
 * fresh limiter and breaker state, and the log says so. */
static ngx_int_t sw_zone_policy_reuse(sw_zone_ctx_t *ctx,
                                      ngx_shm_zone_t *zone) {
    sy_policy_store *st;
    sy_error err;

    if (ctx->sh->policy &&
        sy_policy_store_attach(ctx->sh->policy, ctx->sh->policy_len, &st,
                               &err) == 0)
        return NGX_OK;
    ngx_log_error(NGX_LOG_NOTICE, zone->shm.log, 0,
                  "switchyard: zone \"%V\": the policy store it holds is "
                  "not this module's format (%s): a new one is made, rate "
                  "limits and breakers start afresh",
                  &zone->shm.name, ctx->sh->policy ? err.message : "none");
    return sw_zone_policy_init(ctx, zone);
}

ngx_int_t sw_zone_init(ngx_shm_zone_t *zone, void *data) {
    sw_zone_ctx_t *ctx = zone->data;
    const char *why;

    ctx->shpool = (ngx_slab_pool_t *)zone->shm.addr;
    /* a reload keeps the zone and what it stores: sw_zone_reconcile
     * decides once the new configuration is committed. Its header is
     * found through the slab pool (nginx's), not the old configuration's
     * sw_zone_ctx_t (data: the old module's), and read only when it is
     * this build's format: a reload that loaded a module of another
     * format would read the old one's fields at other places */
    if (data || zone->shm.exists) {
        why = sw_zone_format_why(ctx->shpool->data);
        if (why == NULL) {
            ctx->sh = ctx->shpool->data;
            return sw_zone_policy_reuse(ctx, zone);
        }
        ngx_log_error(NGX_LOG_WARN, zone->shm.log, 0,
                      "switchyard: zone \"%V\" kept by the reload is not "
                      "read: %s (this module's zone format is %d); this "
                      "configuration starts a new one in the same memory "
                      "from %s, rate limits and breakers start afresh; the "
                      "old workers keep the old one until they exit",
                      &zone->shm.name, why, SW_ZONE_VERSION,
                      ctx->mcf && ctx->mcf->state_path.len
                          ? "the files and the state file"
                          : "the files (no switchyard_state: the admin "
                            "changes stored in it are lost)");
    }
    ctx->sh = ngx_slab_calloc(ctx->shpool, sizeof(sw_shm_t));
    if (ctx->sh == NULL) {
        ngx_log_error(NGX_LOG_EMERG, zone->shm.log, 0,
                      "switchyard: zone \"%V\" (%uz bytes) is too small: "
                      "it needs at least %uz bytes",
                      &zone->shm.name, zone->shm.size, sw_zone_min_size());
        return NGX_ERROR;
    }
    ctx->sh->format = SW_ZONE_FORMAT;
    ctx->sh->shm_size = sizeof(sw_shm_t);
    ctx->sh->doc_size = sizeof(sw_shm_doc_t);
    ctx->sh->epoch = 1;
    ctx->shpool->data = ctx->sh;
    ctx->shpool->log_nomem = 0;
    if (sw_zone_policy_init(ctx, zone) != NGX_OK)
        return NGX_ERROR;
    /* a binary upgrade's new master (its listening sockets inherited from
     * the old one, this its first configuration): the old nginx's zone is
     * out of reach; only a state file carries its changes over. Said, not
     * left to be found out. */
    if (ngx_inherited && !ngx_test_config && ctx->mcf &&
        ctx->mcf->state_path.len == 0 &&
        ((ngx_cycle_t *)ngx_cycle)->shared_memory.part.elts == NULL)
        ngx_log_error(NGX_LOG_WARN, zone->shm.log, 0,
                      "switchyard: started by a binary upgrade without "
                      "switchyard_state: the admin changes the old nginx "
                      "stored in its zone are not carried over (this one "
                      "serves its files); set switchyard_state to keep them");
    sw_state_read(ctx, ctx->mcf, zone->shm.log);
    return NGX_OK;
}

size_t sw_zone_min_size(void) {
    /* the slab pool's own pages and header, the zone's header (worker
     * slots, health table), the policy store and room for a few
     * documents */
    return 8 * ngx_pagesize + sizeof(sw_shm_t) +
           sy_policy_store_bytes(SW_POLICY_SLOTS, SW_POLICY_BREAKERS) +
           64 * 1024;
}

static int sw_doc_cmp(const void *a, const void *b) {
    const sw_doc_copy_t *x = a, *y = b;
    return x->order < y->order ? -1 : x->order > y->order;
}

void sw_docs_free(sw_doc_copy_t *docs, size_t count) {
    for (size_t i = 0; i < count; i++) {
        free(docs[i].name);
        free(docs[i].source);
        free(docs[i].data);
    }
    free(docs);
}

void sw_zone_lock(sw_zone_ctx_t *z) {
    ngx_shmtx_lock(&z->shpool->mutex);
}

void sw_zone_unlock(sw_zone_ctx_t *z) {
    ngx_shmtx_unlock(&z->shpool->mutex);
}

ngx_int_t sw_zone_copy(sw_zone_ctx_t *z, bool locked, ngx_uint_t epoch,
                       uint64_t after, sw_doc_copy_t **out, size_t *count,
                       uint64_t *gen) {
    sw_shm_doc_t *d;
    sw_doc_copy_t *docs = NULL;
    size_t n = 0, cap = 0;
    ngx_int_t rc = NGX_OK;

    *out = NULL;
    *count = 0;
    if (!locked)
        ngx_shmtx_lock(&z->shpool->mutex);
    *gen = z->sh->generation;
    if (z->sh->epoch != epoch) {
        if (!locked)
            ngx_shmtx_unlock(&z->shpool->mutex);
        return NGX_DECLINED;
    }
    for (d = z->sh->docs; d; d = d->next) {
        if (d->seq <= after)
            continue;
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 8;
            sw_doc_copy_t *nd = realloc(docs, ncap * sizeof *nd);
            if (nd == NULL) {
                rc = NGX_ERROR;
                break;
            }
            docs = nd;
            cap = ncap;
        }
        sw_doc_copy_t *c = &docs[n];
        c->kind = d->kind;
        c->seq = d->seq;
        c->order = d->order;
        c->flags = d->flags;
        c->len = d->len;
        c->name = malloc(d->name_len + 1);
        c->source = malloc(d->source_len + 1);
        c->data = malloc(d->len + 1);
        if (c->name == NULL || c->source == NULL || c->data == NULL) {
            free(c->name);
            free(c->source);
            free(c->data);
            rc = NGX_ERROR;
            break;
        }
        memcpy(c->name, d->name, d->name_len);
        c->name[d->name_len] = '\0';
        memcpy(c->source, d->source, d->source_len);
        c->source[d->source_len] = '\0';
        memcpy(c->data, d->data, d->len);
        c->data[d->len] = '\0';
        n++;
    }
    if (!locked)
        ngx_shmtx_unlock(&z->shpool->mutex);
    if (rc != NGX_OK) {
        sw_docs_free(docs, n);
        return rc;
    }
    qsort(docs, n, sizeof *docs, sw_doc_cmp);
    *out = docs;
    *count = n;
    return NGX_OK;
}

static u_char *sw_slab_copy(sw_zone_ctx_t *z, const u_char *p, size_t len) {
    u_char *c = ngx_slab_alloc_locked(z->shpool, len ? len : 1);
    if (c && p) /* p NULL: room only, filled by the caller */
        ngx_memcpy(c, p, len);
    return c;
}

static bool sw_same(const u_char *a, size_t alen, ngx_str_t *b) {
    return alen == b->len && ngx_memcmp(a, b->data, alen) == 0;
}

sw_shm_doc_t *sw_zone_prepare_locked(sw_zone_ctx_t *z, ngx_uint_t kind,
                                     ngx_str_t *name, ngx_str_t *source,
                                     size_t len) {
    sw_shm_doc_t *d;
    ngx_str_t none = ngx_null_string;

    if (source == NULL)
        source = &none;
    d = ngx_slab_calloc_locked(z->shpool, sizeof *d);
    if (d == NULL)
        return NULL;
    d->kind = kind;
    d->name = sw_slab_copy(z, name->data, name->len);
    d->name_len = name->len;
    d->source = sw_slab_copy(z, source->data, source->len);
    d->source_len = source->len;
    d->data = sw_slab_copy(z, NULL, len);
    d->len = len;
    if (d->name == NULL || d->source == NULL || d->data == NULL) {
        if (d->name)
            ngx_slab_free_locked(z->shpool, d->name);
        if (d->source)
            ngx_slab_free_locked(z->shpool, d->source);
        if (d->data)
            ngx_slab_free_locked(z->shpool, d->data);
        ngx_slab_free_locked(z->shpool, d);
        return NULL;
    }
    return d;
}

/* Where a worker that replays the zone puts the route of an upsert `d`
 * about to be linked (sw_shm_doc_t.order): one that updated its route in
 * place keeps the order and SW_DOC_INSERTED of the stored change of that
 * route it replaces (when none: its route is the file's or the source
 * document's, order 0 is its own seq); one that inserted it (new, or
 * removed before) is SW_DOC_INSERTED | SW_DOC_INSERT_NOW at its own seq,
 * the end of its source. */
void sw_zone_route_order_locked(sw_zone_ctx_t *z, sw_shm_doc_t *d,
                                bool in_place) {
    d->order = 0;
    d->flags = 0;
    if (!in_place) {
        d->flags = SW_DOC_INSERTED | SW_DOC_INSERT_NOW;
        return;
    }
    ngx_str_t name = {d->name_len, d->name};
    ngx_str_t source = {d->source_len, d->source};

    for (sw_shm_doc_t *o = z->sh->docs; o; o = o->next)
        if (o != d && sw_doc_same_key(o, d->kind, &name, &source)) {
            d->order = o->order;
            d->flags = o->flags & SW_DOC_INSERTED;
            return;
        }
}

void sw_zone_discard_locked(sw_zone_ctx_t *z, sw_shm_doc_t *d) {
    sw_doc_free_locked(z, d);
}

bool sw_doc_same_key(const sw_shm_doc_t *o, ngx_uint_t kind, ngx_str_t *name,
                     ngx_str_t *source) {
    if (SW_IS_ROUTE_OP(o->kind) != SW_IS_ROUTE_OP(kind) ||
        (!SW_IS_ROUTE_OP(kind) && o->kind != kind) ||
        !sw_same(o->name, o->name_len, name))
        return false;
    return !SW_IS_ROUTE_OP(kind) || sw_same(o->source, o->source_len, source);
}

uint64_t sw_zone_link_locked(sw_zone_ctx_t *z, sw_shm_doc_t *d) {
    sw_shm_doc_t **pp;
    ngx_str_t name = {d->name_len, d->name};
    ngx_str_t source = {d->source_len, d->source};

    /* the newest document of a key (sw_doc_same_key) replaces the stored
     * one; a source's document also replaces the route changes stored for
     * that source. A route change of another source stays: DELETE
     * /routes/S1/R then PUT /routes/S2/R keeps both (a replaying worker
     * removes the R of S1's file before it adds the R of S2) */
    for (pp = &z->sh->docs; *pp;) {
        sw_shm_doc_t *o = *pp;
        if (sw_doc_same_key(o, d->kind, &name, &source) ||
            (d->kind == SW_DOC_ROUTES && SW_IS_ROUTE_OP(o->kind) &&
             sw_same(o->source, o->source_len, &name))) {
            *pp = o->next;
            sw_doc_free_locked(z, o);
        } else {
            pp = &o->next;
        }
    }
    d->next = z->sh->docs;
    z->sh->docs = d;
    /* the new generation becomes visible only with the document in place */
    d->seq = z->sh->generation + 1;
    if (d->order == 0)
        d->order = d->seq;
    ngx_memory_barrier();
    z->sh->generation = d->seq;
    return d->seq;
}

/* Does a come before b in replay order? */
static bool sw_doc_replays_before(const sw_shm_doc_t *a,
                                  const sw_shm_doc_t *b) {
    return a->order < b->order || (a->order == b->order && a->seq < b->seq);
}

sw_shm_doc_t *sw_docs_replay_next(sw_shm_doc_t *docs,
                                  const sw_shm_doc_t *after) {
    sw_shm_doc_t *d = NULL, *o;
    for (o = docs; o; o = o->next)
        if ((after == NULL || sw_doc_replays_before(after, o)) &&
            (d == NULL || sw_doc_replays_before(o, d)))
            d = o;
    return d;
}

static int sw_doc_replay_cmp(const void *a, const void *b) {
    const sw_shm_doc_t *x = *(sw_shm_doc_t *const *)a,
                       *y = *(sw_shm_doc_t *const *)b;
    return sw_doc_replays_before(x, y) ? -1 : sw_doc_replays_before(y, x);
}

sw_shm_doc_t **sw_docs_replay_order(sw_shm_doc_t *docs, size_t *n) {
    sw_shm_doc_t **v, *d;
    size_t k = 0;

    *n = 0;
    for (d = docs; d; d = d->next)
        (*n)++;
    if (*n == 0 || (v = malloc(*n * sizeof *v)) == NULL)
        return NULL;
    for (d = docs; d; d = d->next)
        v[k++] = d;
    qsort(v, *n, sizeof *v, sw_doc_replay_cmp);
    return v;
}

void sw_zone_publish(sw_zone_ctx_t *z, ngx_uint_t slot, const sw_slot_t *s) {
    if (slot >= SW_MAX_WORKERS)
        return;
    ngx_shmtx_lock(&z->shpool->mutex);
    if (z->sh->epoch == s->epoch)
        z->sh->slots[slot] = *s;
    ngx_shmtx_unlock(&z->shpool->mutex);
}
