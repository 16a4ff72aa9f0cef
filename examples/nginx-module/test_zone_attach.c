/*
 * test_zone_attach.c - unit test (TAP) of how the module attaches a zone
 * nginx hands it: sw_zone_init on a new zone and on one kept across a
 * reload, sw_zone_reconcile handing a replaced (resized) zone's documents
 * over. A zone of this build's format is taken as it is; one of another
 * format (the unversioned zone of the modules before, another version,
 * other structure sizes) is not read: a new header is made in the same
 * memory (logged at warn), a replaced one is not handed over (warn), and
 * the old bytes are left as they were. And the replay order the state
 * file is written in (sw_docs_replay_order: sorted, the same order as the
 * one-pass-per-document walk it replaced). Links ngx_http_switchyard_zone.c
 * and the library, with the few nginx and module calls the file makes
 * stubbed over malloc; built by build.sh against the configured nginx
 * tree (its headers give the structures their layout).
 */
#include "ngx_http_switchyard.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- what the zone file calls ---- */

volatile ngx_cycle_t *ngx_cycle;
ngx_module_t ngx_http_switchyard_module;
ngx_uint_t ngx_test_config, ngx_inherited, ngx_pagesize = 4096;
static int state_reads, warns;
static char last_why[256];

void *ngx_slab_alloc(ngx_slab_pool_t *pool, size_t size) {
    return calloc(1, size);
}
void *ngx_slab_calloc(ngx_slab_pool_t *pool, size_t size) {
    return calloc(1, size);
}
void *ngx_slab_alloc_locked(ngx_slab_pool_t *pool, size_t size) {
    return calloc(1, size);
}
void *ngx_slab_calloc_locked(ngx_slab_pool_t *pool, size_t size) {
    return calloc(1, size);
}
void ngx_slab_free_locked(ngx_slab_pool_t *pool, void *p) {
    free(p);
}
void ngx_shmtx_lock(ngx_shmtx_t *mtx) {}
void ngx_shmtx_unlock(ngx_shmtx_t *mtx) {}
void *ngx_alloc(size_t size, ngx_log_t *log) {
    return malloc(size);
}

/* The warnings of a zone of another format: the reason is kept. */
void ngx_log_error_core(ngx_uint_t level, ngx_log_t *log, ngx_err_t err,
                        const char *fmt, ...) {
    va_list ap;

    if (level != NGX_LOG_WARN)
        return;
    warns++;
    va_start(ap, fmt);
    (void)va_arg(ap, ngx_str_t *); /* the zone's name */
    snprintf(last_why, sizeof last_why, "%s", va_arg(ap, const char *));
    va_end(ap);
}

void sw_state_read(sw_zone_ctx_t *z, sw_main_conf_t *mcf, ngx_log_t *log) {
    state_reads++;
}
ngx_fd_t sw_state_lock(sw_main_conf_t *mcf, ngx_log_t *log) {
    return NGX_INVALID_FILE;
}
void sw_state_unlock(ngx_fd_t fd) {}
ngx_int_t sw_state_write_locked(sw_zone_ctx_t *z, sw_main_conf_t *mcf,
                                ngx_log_t *log) {
    return NGX_OK;
}
const char *sw_kind_name(ngx_uint_t kind) {
    return "route";
}

/* ---- the test ---- */

static int failed, n;

static void ok(int cond, const char *what) {
    printf("%s %d - %s\n", cond ? "ok" : "not ok", ++n, what);
    failed |= !cond;
}

static ngx_log_t logger = {.log_level = NGX_LOG_DEBUG};
static sw_main_conf_t mcf;

/* A zone as nginx gives it to sw_zone_init: its memory starts with the
 * slab pool, whose data is what the module keeps there. */
static ngx_shm_zone_t *zone_new(size_t size, void *data_of_pool) {
    ngx_shm_zone_t *z = calloc(1, sizeof *z);
    sw_zone_ctx_t *ctx = calloc(1, sizeof *ctx);
    ngx_slab_pool_t *pool = calloc(1, sizeof *pool);

    pool->data = data_of_pool;
    z->shm.addr = (u_char *)pool;
    z->shm.size = size;
    z->shm.log = &logger;
    ngx_str_set(&z->shm.name, "switchyard");
    z->tag = &ngx_http_switchyard_module;
    ctx->mcf = &mcf;
    z->data = ctx;
    mcf.zone = z;
    return z;
}

/* The header of a zone of the modules before the format stamp (as
 * large as this build's, so that a misread stays in bounds): their
 * sw_shm_t started with the generation and the epoch. */
static uint64_t *old_header(uint64_t generation, uint64_t epoch) {
    uint64_t *h = calloc(1, sizeof(sw_shm_t));
    h[0] = generation;
    h[1] = epoch;
    return h;
}

/* A kept zone whose header is `sh`: sw_zone_init's outcome. */
static sw_zone_ctx_t *attach_kept(void *sh, ngx_int_t *rc) {
    ngx_shm_zone_t *z = zone_new(1 << 20, sh);
    sw_zone_ctx_t old = {sh, (ngx_slab_pool_t *)z->shm.addr, NULL};

    warns = 0, state_reads = 0, last_why[0] = '\0';
    *rc = sw_zone_init(z, &old);
    return z->data;
}

static void test_attach(void) {
    ngx_shm_zone_t *z = zone_new(1 << 20, NULL);
    sw_zone_ctx_t *ctx = z->data, *k;
    ngx_int_t rc;

    ok(offsetof(sw_shm_t, format) == 0,
       "the format stamp is the header's first word");
    rc = sw_zone_init(z, NULL);
    ok(rc == NGX_OK && ctx->sh && ctx->sh->format == SW_ZONE_FORMAT &&
           ctx->sh->shm_size == sizeof(sw_shm_t) &&
           ctx->sh->doc_size == sizeof(sw_shm_doc_t) &&
           ((ngx_slab_pool_t *)z->shm.addr)->data == ctx->sh &&
           state_reads == 1,
       "a new zone is stamped with this build's format, read from the "
       "state file");
    ctx->sh->generation = 41;
    k = attach_kept(ctx->sh, &rc);
    ok(rc == NGX_OK && k->sh == ctx->sh && k->sh->generation == 41 &&
           warns == 0 && state_reads == 0,
       "a kept zone of this format is taken as it is (no warning)");

    /* what the modules before this format left: the header started with
     * the generation and the epoch */
    uint64_t *before = old_header(7, 3), *copy = old_header(7, 3);
    k = attach_kept(before, &rc);
    ok(rc == NGX_OK && k->sh != (sw_shm_t *)before &&
           k->sh->format == SW_ZONE_FORMAT && k->sh->generation == 0 &&
           k->sh->docs == NULL &&
           ((ngx_slab_pool_t *)k->mcf->zone->shm.addr)->data == k->sh,
       "an unversioned zone is not read: a new header in its memory");
    ok(warns == 1 && strstr(last_why, "no format stamp") && state_reads == 1,
       "... said at warn (why: no format stamp), the state file read");
    ok(memcmp(before, copy, sizeof(sw_shm_t)) == 0,
       "... the old header's bytes untouched (its workers still use it)");

    sw_shm_t other = *ctx->sh;
    other.format = SW_ZONE_MAGIC | (SW_ZONE_VERSION + 1);
    k = attach_kept(&other, &rc);
    ok(rc == NGX_OK && k->sh != &other && warns == 1 &&
           strstr(last_why, "version"),
       "a zone of another format version is not read (warn: version)");
    other = *ctx->sh;
    other.doc_size += 8;
    k = attach_kept(&other, &rc);
    ok(rc == NGX_OK && k->sh != &other && warns == 1 &&
           strstr(last_why, "sizes"),
       "a zone whose structures have other sizes is not read (warn)");
}

/* A running configuration (ngx_cycle) with one zone of the same name at
 * another size, whose header is `sh`. */
static void running_with(sw_shm_t *sh) {
    static ngx_cycle_t cycle;
    static ngx_shm_zone_t old;
    static ngx_slab_pool_t pool;
    static sw_zone_ctx_t octx;

    memset(&old, 0, sizeof old);
    pool.data = sh;
    octx.sh = sh;
    octx.shpool = &pool;
    old.shm.addr = (u_char *)&pool;
    old.shm.size = 1 << 19;
    ngx_str_set(&old.shm.name, "switchyard");
    old.tag = &ngx_http_switchyard_module;
    old.data = &octx;
    memset(&cycle, 0, sizeof cycle);
    cycle.shared_memory.part.elts = &old;
    cycle.shared_memory.part.nelts = 1;
    cycle.log = &logger;
    ngx_cycle = &cycle;
}

static void test_hand_over(void) {
    ngx_shm_zone_t *z = zone_new(1 << 20, NULL);
    sw_zone_ctx_t *ctx = z->data;
    sw_zone_ctx_t oz = {0};
    ngx_str_t name = ngx_string("r1"), source = ngx_string("");

    /* a replaced zone of this format holding one instances document */
    ngx_shm_zone_t *o = zone_new(1 << 19, NULL);
    sw_zone_init(o, NULL);
    oz = *(sw_zone_ctx_t *)o->data;
    sw_shm_doc_t *d =
        sw_zone_prepare_locked(&oz, SW_DOC_INSTANCES, &name, &source, 2);
    memcpy(d->data, "[]", 2);
    d->base = mcf.instances_hash;
    sw_zone_link_locked(&oz, d);
    uint64_t epoch = oz.sh->epoch;

    ngx_cycle = NULL;
    mcf.zone = z;
    sw_zone_init(z, NULL);
    running_with(oz.sh);
    warns = 0;
    sw_zone_reconcile((ngx_cycle_t *)ngx_cycle, &mcf);
    ok(ctx->sh->docs && ctx->sh->docs->kind == SW_DOC_INSTANCES &&
           oz.sh->epoch == epoch + 1 && warns == 0,
       "a replaced zone of this format hands its documents over");

    /* one of another format: nothing read from it, nothing written */
    uint64_t *before = old_header(9, 4), *copy = old_header(9, 4);
    z = zone_new(1 << 20, NULL);
    ctx = z->data;
    ngx_cycle = NULL;
    sw_zone_init(z, NULL);
    running_with((sw_shm_t *)before);
    warns = 0;
    sw_zone_reconcile((ngx_cycle_t *)ngx_cycle, &mcf);
    ok(ctx->sh->docs == NULL && warns == 1 &&
           strstr(last_why, "no format stamp") &&
           memcmp(before, copy, sizeof(sw_shm_t)) == 0,
       "a replaced zone of another format is not handed over (warn), "
       "its bytes untouched");
    ngx_cycle = NULL;
}

/* ---- the replay order of the stored documents ---- */

/* The order the state file was written in before session 50 (one pass
 * over the list per document written): the reference. */
static sw_shm_doc_t *old_next(sw_shm_doc_t *docs, ngx_uint_t k, uint64_t lo,
                              uint64_t lseq) {
    sw_shm_doc_t *d = NULL, *o;
    for (o = docs; o; o = o->next)
        if ((k == 0 || o->order > lo || (o->order == lo && o->seq > lseq)) &&
            (d == NULL || o->order < d->order ||
             (o->order == d->order && o->seq < d->seq)))
            d = o;
    return d;
}

/* A mixed sequence of n stored changes, as the zone keeps them: each has
 * its own seq; a new one's order is its seq, an in-place update takes the
 * order of a change before it (many share one order); the list is in
 * link order (newest first) with some moved, as removals and replaced
 * keys leave it. */
static sw_shm_doc_t *mixed_docs(size_t n, unsigned seed, sw_shm_doc_t **block) {
    sw_shm_doc_t *v = *block = calloc(n + 1, sizeof *v), *head = NULL;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i].seq = i + 1;
        v[i].order = i > 0 && (seed >> 16) % 3 == 0
                         ? v[(seed >> 8) % i].order /* in place */
                         : v[i].seq;
        v[i].kind = (seed >> 20) % 4;
    }
    for (size_t i = 0; i < n; i++) { /* swap some neighbours in the list */
        seed = seed * 1103515245u + 12345u;
        size_t j = (seed >> 16) % n;
        sw_shm_doc_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    for (size_t i = 0; i < n; i++) {
        v[i].next = head;
        head = &v[i];
    }
    return head;
}

static void test_replay_order(void) {
    static const size_t sizes[] = {0, 1, 2, 3, 50, 1000};
    int same = 1;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        sw_shm_doc_t *block,
            *docs = mixed_docs(sizes[s], 7u + (unsigned)s, &block);
        size_t n;
        sw_shm_doc_t **v = sw_docs_replay_order(docs, &n);
        sw_shm_doc_t *ref = NULL, *walk = NULL;
        same &= n == sizes[s] && (v != NULL) == (n > 0);
        for (size_t k = 0; same && k < n; k++) {
            ref = old_next(docs, k, ref ? ref->order : 0, ref ? ref->seq : 0);
            walk = sw_docs_replay_next(docs, walk);
            same &= v[k] == ref && walk == ref;
        }
        same &= sw_docs_replay_next(docs, walk) == NULL || n == 0;
        free(v);
        free(block);
    }
    ok(same, "the stored changes are written in the replay order of the "
             "one-pass-per-document writer (mixed sequences of 0 to 1,000, "
             "sorted and walked)");
}

int main(void) {
    test_attach();
    test_hand_over();
    test_replay_order();
    printf("1..%d\n", n);
    return failed;
}
