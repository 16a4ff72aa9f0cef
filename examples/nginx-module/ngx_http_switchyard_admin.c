/*
 * ngx_http_switchyard_admin.c - the admin location (switchyard_admin):
 * PUT <admin>/routes/<source> and PUT <admin>/instances/<service> validate
 * a document against this worker's router and store it in the zone;
 * GET <admin>/status reports every worker's generation and fingerprint.
 */
#include "ngx_http_switchyard.h"

#include <cJSON.h>
#include <stdio.h>
#include <string.h>

#include "utf8.h" /* the mini-gateway's judge (examples/mini-gateway) */

/* s as a JSON string at p (room for 6 bytes a byte and the quotes);
 * utf8: a byte that is not part of well-formed UTF-8 written \ufffd (an
 * answer others read), else as it is (a document parsed back). */
static u_char *json_str(u_char *p, const u_char *s, size_t len, bool utf8) {
    static const char hex[] = "0123456789abcdef";
    *p++ = '"';
    for (size_t i = 0; i < len; i++) {
        u_char c = s[i];
        if (c >= 0x80 && utf8) {
            size_t n = utf8_seq_len(s + i, len - i);
            if (n) {
                p = ngx_cpymem(p, s + i, n);
                i += n - 1;
            } else {
                p = ngx_cpymem(p, "\\ufffd", 6);
            }
        } else if (c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = c;
        } else if (c < 0x20) {
            p = ngx_cpymem(p, "\\u00", 4);
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
        } else {
            *p++ = c;
        }
    }
    *p++ = '"';
    return p;
}

u_char *sw_json_str(u_char *p, const u_char *s, size_t len) {
    return json_str(p, s, len, false);
}

/* Every string of an admin answer: its bytes that are not UTF-8 (a
 * route's id, a source's name, an error quoting them) went raw before,
 * and the answer was no JSON a strict reader takes. */
static u_char *sw_json_utf8(u_char *p, const u_char *s, size_t len) {
    return json_str(p, s, len, true);
}

static ngx_int_t sw_send(ngx_http_request_t *r, ngx_uint_t status, ngx_buf_t *b,
                         const char *type) {
    ngx_chain_t out = {b, NULL};
    ngx_int_t rc;

    r->headers_out.status = status;
    r->headers_out.content_length_n = b->last - b->pos;
    r->headers_out.content_type.data = (u_char *)type;
    r->headers_out.content_type.len = ngx_strlen(type);
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    b->last_buf = (r == r->main);
    b->last_in_chain = 1;
    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only)
        return rc;
    return ngx_http_output_filter(r, &out);
}

static ngx_int_t sw_send_json(ngx_http_request_t *r, ngx_uint_t status,
                              ngx_buf_t *b) {
    return sw_send(r, status, b, "application/json");
}

static ngx_int_t sw_send_error(ngx_http_request_t *r, ngx_uint_t status,
                               const sy_error *err) {
    size_t pl = strlen(err->path), ml = strlen(err->message);
    const char *name = sy_strerror(err->code);
    ngx_buf_t *b =
        ngx_create_temp_buf(r->pool, 6 * (pl + ml + strlen(name)) + 256);
    if (b == NULL)
        return sw_500(r, "out of memory for an error answer");
    b->last =
        ngx_sprintf(b->last, "{\"error\":{\"code\":%d,\"name\":", err->code);
    b->last = sw_json_utf8(b->last, (u_char *)name, strlen(name));
    b->last = ngx_cpymem(b->last, ",\"path\":", 8);
    b->last = sw_json_utf8(b->last, (u_char *)err->path, pl);
    b->last = ngx_cpymem(b->last, ",\"message\":", 11);
    b->last = sw_json_utf8(b->last, (u_char *)err->message, ml);
    b->last =
        ngx_sprintf(b->last, ",\"line\":%uD,\"column\":%uD,\"offset\":%uz}}\n",
                    err->line, err->column, err->offset);
    return sw_send_json(r, status, b);
}

static ngx_int_t sw_send_message(ngx_http_request_t *r, ngx_uint_t status,
                                 int code, const char *msg) {
    sy_error err;
    ngx_memzero(&err, sizeof err);
    err.code = code;
    snprintf(err.message, sizeof err.message, "%s", msg);
    return sw_send_error(r, status, &err);
}

/* The request's body discarded, then the message (an answer before any
 * body was read). */
static ngx_int_t sw_refuse(ngx_http_request_t *r, ngx_uint_t status, int code,
                           const char *msg) {
    ngx_int_t rc = ngx_http_discard_request_body(r);
    return rc != NGX_OK ? rc : sw_send_message(r, status, code, msg);
}

/* This worker's view of its sources (sy_router_source_status). Needs
 * SW_SOURCE_JSON_MAX bytes per source. */
#define SW_SOURCE_JSON_MAX (6 * (128 + 128 + 256 + 256) + 400)
static u_char *sw_sources_json(u_char *p, const char **origins) {
    size_t n = sy_router_source_count(sw_worker.router);
    sy_source_status st;
    sy_error err;

    p = ngx_cpymem(p, ",\"sources\":[", 12);
    for (size_t i = 0; i < n; i++) {
        if (sy_router_source_status(sw_worker.router, i, &st, &err))
            break;
        p = ngx_cpymem(p, i ? ",{\"name\":" : "{\"name\":", i ? 9 : 8);
        p = sw_json_utf8(p, (u_char *)st.name, ngx_strlen(st.name));
        p = ngx_cpymem(p, ",\"version\":", 11);
        p = sw_json_utf8(p, (u_char *)st.version, ngx_strlen(st.version));
        /* where the live document came from: the configured file, or
         * changes stored through the admin location (this run, or read
         * from the state file at start) */
        p = ngx_sprintf(p, ",\"origin\":\"%s\"",
                        i < sw_worker.mcf->route_files.nelts && origins[i]
                            ? origins[i]
                            : "file");
        p = ngx_sprintf(p,
                        ",\"applied\":%s,\"checksum\":\"%016uxL\","
                        "\"fingerprint\":\"%016uxL\",\"routes\":%uz,"
                        "\"last_apply_ms\":%L,\"last_result\":%d,"
                        "\"applied_count\":%uL,\"skipped_count\":%uL,"
                        "\"failed_count\":%uL,\"last_error\":",
                        st.applied ? "true" : "false", st.checksum,
                        st.fingerprint, st.routes, st.last_apply_ms,
                        st.last_result, st.applied_count, st.skipped_count,
                        st.failed_count);
        if (st.last_error.code) {
            p = ngx_cpymem(p, "{\"path\":", 8);
            p = sw_json_utf8(p, (u_char *)st.last_error.path,
                             ngx_strlen(st.last_error.path));
            p = ngx_cpymem(p, ",\"message\":", 11);
            p = sw_json_utf8(p, (u_char *)st.last_error.message,
                             ngx_strlen(st.last_error.message));
            *p++ = '}';
        } else {
            p = ngx_cpymem(p, "null", 4);
        }
        *p++ = '}';
    }
    *p++ = ']';
    return p;
}

/* The zone's policy store: rate limits and breakers of every worker.
 * Needs SW_POLICY_JSON_MAX bytes. */
#define SW_POLICY_JSON_MAX 400
static u_char *sw_policy_json(u_char *p) {
    sy_policy_stats st;
    sy_policy_store *store = sy_router_policy_store(sw_worker.router);

    if (store == NULL)
        return p;
    sy_policy_store_stats(store, &st);
    return ngx_sprintf(p,
                       ",\"policy\":{\"slots\":%uD,\"breakers\":%uD,"
                       "\"buckets_used\":%uL,\"breakers_used\":%uL,"
                       "\"limited\":%uL,\"store_full\":%uL,"
                       "\"breaker_rejected\":%uL,\"breaker_opened\":%uL,"
                       "\"breaker_half_opened\":%uL,\"breaker_closed\":%uL}",
                       st.slots, st.breakers, st.buckets_used, st.breakers_used,
                       st.limited, st.store_full, st.breaker_rejected,
                       st.breaker_opened, st.breaker_half_opened,
                       st.breaker_closed);
}

/* ---- each service's instances with their shared health ---- */

typedef struct {
    const char *service; /* NULL: every service of doc (a file) */
    sy_instances *doc;
} sw_inst_src_t;

/* Whether service i of src[k] is the one in force: no later source
 * (zone documents come after the files, newest last) lists it. */
static bool sw_inst_in_force(sw_inst_src_t *src, size_t n, size_t k,
                             const char *service) {
    for (size_t j = k + 1; j < n; j++)
        if (src[j].service ? ngx_strcmp(src[j].service, service) == 0
                           : sy_instances_find(src[j].doc, service) != SIZE_MAX)
            return false;
    return true;
}

static size_t sw_inst_json_size(sw_inst_src_t *src, size_t n) {
    size_t size = 32;
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < sy_instances_service_count(src[k].doc); i++) {
            size += 6 * ngx_strlen(sy_instances_service(src[k].doc, i)) + 64;
            for (size_t j = 0; j < sy_instances_count(src[k].doc, i); j++) {
                const sy_instance *in = &sy_instances_list(src[k].doc, i)[j];
                size += 6 * (ngx_strlen(in->id) + ngx_strlen(in->host)) + 220;
            }
        }
    return size;
}

static u_char *sw_inst_json(u_char *p, sw_inst_src_t *src, size_t n) {
    static const char *states[] = {"up", "draining", "down"};
    bool first = true;
    ngx_time_t *tp = ngx_timeofday();
    int64_t now = (int64_t)tp->sec * 1000 + tp->msec;

    p = ngx_cpymem(p, ",\"services\":[", 13);
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < sy_instances_service_count(src[k].doc); i++) {
            const char *svc = sy_instances_service(src[k].doc, i);
            if ((src[k].service && ngx_strcmp(svc, src[k].service) != 0) ||
                !sw_inst_in_force(src, n, k, svc))
                continue;
            p = ngx_cpymem(p,
                           first ? "{\"name\":" : ",{\"name\":", first ? 8 : 9);
            first = false;
            p = sw_json_utf8(p, (u_char *)svc, ngx_strlen(svc));
            p = ngx_cpymem(p, ",\"instances\":[", 14);
            for (size_t j = 0; j < sy_instances_count(src[k].doc, i); j++) {
                const sy_instance *in = &sy_instances_list(src[k].doc, i)[j];
                const sw_health_t *e = sw_health_get(svc, in->id);
                bool ejected = e && e->ejected && (int64_t)e->until_ms > now;
                p = ngx_cpymem(p, j ? ",{\"id\":" : "{\"id\":", j ? 7 : 6);
                p = sw_json_utf8(p, (u_char *)in->id, ngx_strlen(in->id));
                p = ngx_cpymem(p, ",\"host\":", 8);
                p = sw_json_utf8(p, (u_char *)in->host, ngx_strlen(in->host));
                p = ngx_sprintf(
                    p,
                    ",\"port\":%uD,\"state\":\"%s\",\"health\":\"%s\","
                    "\"consecutive_failures\":%uA,\"ejections\":%uA,"
                    "\"ejected\":%s,\"eject_remaining_ms\":%L}",
                    (uint32_t)in->port, states[in->state % 3],
                    ejected            ? "ejected"
                    : e && e->ejected  ? "probation"
                    : e && e->failures ? "failing"
                                       : "healthy",
                    e ? e->failures : 0, e ? e->ejections : 0,
                    ejected ? "true" : "false",
                    ejected ? (int64_t)e->until_ms - now : (int64_t)0);
            }
            p = ngx_cpymem(p, "]}", 2);
        }
    *p++ = ']';
    return p;
}

/* The "services" member of /status: the instance lists in force (the
 * files', replaced by the zone's newest document of a service). */
static ngx_buf_t *sw_services_status(ngx_http_request_t *r) {
    sw_zone_ctx_t *z = sw_worker.zone;
    sw_file_t *f = sw_worker.mcf->instance_files.elts;
    size_t nf = sw_worker.mcf->instance_files.nelts, n = 0, nz = 0;
    sw_doc_copy_t *docs = NULL;
    sw_inst_src_t *src;
    ngx_buf_t *b = NULL;
    uint64_t gen;
    sy_error err;

    if (sw_zone_copy(z, false, sw_worker.epoch, 0, &docs, &nz, &gen) != NGX_OK)
        nz = 0;
    src = ngx_pcalloc(r->pool, (nf + nz + 1) * sizeof *src);
    if (src == NULL)
        goto done;
    for (size_t i = 0; i < nf; i++)
        if (sw_instances_doc(NULL, (char *)f[i].text.data, f[i].text.len,
                             &src[n].doc, &err) == 0)
            n++;
    for (size_t i = 0; i < nz; i++) /* by generation, oldest first */
        if (docs[i].kind == SW_DOC_INSTANCES &&
            sw_instances_doc(docs[i].name, docs[i].data, docs[i].len,
                             &src[n].doc, &err) == 0) {
            src[n].service = docs[i].name;
            n++;
        }
    b = ngx_create_temp_buf(r->pool, sw_inst_json_size(src, n));
    if (b)
        b->last = sw_inst_json(b->last, src, n);
    for (size_t i = 0; i < n; i++)
        sy_instances_free(src[i].doc);
done:
    sw_docs_free(docs, nz);
    return b;
}

/* GET <admin>/status */
static ngx_int_t sw_status(ngx_http_request_t *r) {
    sw_zone_ctx_t *z = sw_worker.zone;
    sw_shm_doc_t *d;
    size_t size = 512 + SW_POLICY_JSON_MAX + SW_MAX_WORKERS * (520 + 6 * 520) +
                  sy_router_source_count(sw_worker.router) * SW_SOURCE_JSON_MAX,
           ndocs = 0;
    ngx_buf_t *b;
    sw_slot_t slots[SW_MAX_WORKERS];
    uint64_t gen, epoch;
    bool converged = true, first = true;
    uint64_t fp0 = 0;
    int nslots = 0;

    const char **origins = ngx_pcalloc(
        r->pool, (sw_worker.mcf->route_files.nelts + 1) * sizeof(char *));
    sw_file_t *files = sw_worker.mcf->route_files.elts;

    if (origins == NULL)
        return sw_500(r, "status: out of memory");
    sw_worker_sync(r->connection->log);
    ngx_buf_t *sb = sw_services_status(r);
    if (sb == NULL)
        return sw_500(r, "status: out of memory");
    size += sb->last - sb->pos;
    ngx_shmtx_lock(&z->shpool->mutex);
    for (d = z->sh->docs; d; d = d->next) {
        ndocs++, size += 6 * (d->name_len + d->source_len) + 140;
        /* docs are newest first: the first one of a source says */
        if (d->kind == SW_DOC_INSTANCES)
            continue;
        for (ngx_uint_t i = 0; i < sw_worker.mcf->route_files.nelts; i++)
            if (origins[i] == NULL && files[i].name.len == d->source_len &&
                ngx_strncmp(files[i].name.data, d->source, d->source_len) == 0)
                origins[i] =
                    d->origin == SW_ORIGIN_STATE ? "state file" : "admin";
    }
    b = ngx_create_temp_buf(r->pool, size);
    if (b == NULL) {
        ngx_shmtx_unlock(&z->shpool->mutex);
        return sw_500(r, "status: out of memory");
    }
    gen = z->sh->generation;
    epoch = z->sh->epoch;
    ngx_memcpy(slots, z->sh->slots, sizeof slots);
    b->last = ngx_sprintf(b->last,
                          "{\"generation\":%uL,\"epoch\":%uL,"
                          "\"documents\":[",
                          gen, epoch);
    for (d = z->sh->docs; d; d = d->next) {
        b->last =
            ngx_sprintf(b->last, "%s{\"kind\":\"%s\",\"name\":",
                        d == z->sh->docs ? "" : ",", sw_kind_name(d->kind));
        b->last = sw_json_utf8(b->last, d->name, d->name_len);
        if (SW_IS_ROUTE_OP(d->kind)) {
            b->last = ngx_cpymem(b->last, ",\"source\":", 10);
            b->last = sw_json_utf8(b->last, d->source, d->source_len);
        }
        b->last =
            ngx_sprintf(b->last,
                        ",\"generation\":%uL,\"bytes\":%uz,"
                        "\"origin\":\"%s\"}",
                        d->seq, d->len,
                        d->origin == SW_ORIGIN_STATE ? "state file" : "admin");
    }
    ngx_shmtx_unlock(&z->shpool->mutex);

    b->last = ngx_cpymem(b->last, "],\"workers\":[", 13);
    for (int i = 0; i < SW_MAX_WORKERS; i++) {
        sw_slot_t *s = &slots[i];
        if (s->pid == 0 || s->epoch != epoch)
            continue;
        if (first)
            fp0 = s->fingerprint, first = false;
        if (s->fingerprint != fp0 || s->generation != gen)
            converged = false;
        b->last = ngx_sprintf(b->last,
                              "%s{\"worker\":%d,\"pid\":%P,\"generation\":%uL,"
                              "\"fingerprint\":\"%016uxL\",\"routes\":%uL,"
                              "\"updated_ms\":%L,\"updated_us\":%L,"
                              "\"copy_us\":%uL,"
                              "\"apply_us\":%uL,\"apply_cpu_us\":%uL,"
                              "\"publish_us\":%uL,\"wakeups\":%uL,\"error\":",
                              nslots ? "," : "", i, s->pid, s->generation,
                              s->fingerprint, s->routes, s->updated_ms,
                              s->updated_us, s->copy_us, s->apply_us,
                              s->apply_cpu_us, s->publish_us, s->wakeups);
        if (s->last_rc)
            b->last = sw_json_utf8(b->last, (u_char *)s->last_error,
                                   strlen(s->last_error));
        else
            b->last = ngx_cpymem(b->last, "null", 4);
        *b->last++ = '}';
        nslots++;
    }
    b->last = ngx_sprintf(b->last, "],\"converged\":%s,\"this_worker\":%P",
                          converged && nslots ? "true" : "false", ngx_pid);
    b->last = sw_sources_json(b->last, origins);
    b->last = sw_policy_json(b->last);
    b->last = ngx_cpymem(b->last, sb->pos, sb->last - sb->pos);
    b->last = ngx_cpymem(b->last, "}\n", 2);
    return sw_send_json(r, NGX_HTTP_OK, b);
}

/* GET <admin>/metrics: the answering worker's router metrics in the
 * Prometheus text format. */
static ngx_int_t sw_metrics(ngx_http_request_t *r) {
    size_t need = 0;
    ngx_buf_t *b;
    ngx_int_t rc;

    sw_worker_sync(r->connection->log);
    if (sy_router_metrics_text(sw_worker.router, NULL, 0, &need, NULL) !=
            SY_ETOOSMALL &&
        need == 0)
        return sw_500(r, "metrics: the library gave no size");
    need += 256; /* room for a source added meanwhile */
    b = ngx_create_temp_buf(r->pool, need);
    if (b == NULL || sy_router_metrics_text(sw_worker.router, (char *)b->pos,
                                            need, &need, NULL) != SY_OK)
        return sw_500(r, "metrics: out of memory or the metrics grew");
    b->last = b->pos + need;
    rc = sw_send(r, NGX_HTTP_OK, b, "text/plain; version=0.0.4");
    return rc;
}

/* The request body's length (a buffer may be in a temporary file). */
static size_t sw_body_len(ngx_http_request_t *r) {
    size_t n = 0;
    ngx_chain_t *cl;

    if (r->request_body == NULL)
        return 0;
    for (cl = r->request_body->bufs; cl; cl = cl->next)
        n += cl->buf->in_file ? (size_t)(cl->buf->file_last - cl->buf->file_pos)
                              : (size_t)(cl->buf->last - cl->buf->pos);
    return n;
}

/* Copy the request body (sw_body_len bytes) to dst. */
static ngx_int_t sw_body_copy(ngx_http_request_t *r, u_char *dst) {
    ngx_chain_t *cl;

    if (r->request_body == NULL)
        return NGX_OK;
    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        ngx_buf_t *b = cl->buf;
        if (b->in_file) {
            ssize_t got = ngx_read_file(b->file, dst,
                                        (size_t)(b->file_last - b->file_pos),
                                        b->file_pos);
            if (got != b->file_last - b->file_pos)
                return NGX_ERROR;
            dst += got;
        } else {
            dst = ngx_cpymem(dst, b->pos, b->last - b->pos);
        }
    }
    return NGX_OK;
}

typedef struct {
    ngx_uint_t ctx_kind; /* SW_CTX_ADMIN: not a routing context */
    ngx_uint_t kind;
    ngx_str_t name;   /* source, service or route id */
    ngx_str_t source; /* route changes: the source */
    /* the body read straight into room in the zone (sw_read_into_zone),
     * unseen by the workers; NULL once linked or freed, or when nginx read
     * the body */
    sw_shm_doc_t *doc;
    size_t got; /* bytes of the body in doc so far */
    /* the body's read into the zone, for the answer: from the headers'
     * end to its last byte (sw_now_us), and the reads that got bytes
     * (each after an event-loop turn but the first) */
    uint64_t body_t0, body_t1;
    ngx_uint_t body_reads;
} sw_admin_ctx_t;

static void sw_cstr(char *dst, size_t cap, ngx_str_t *s) {
    size_t n = ngx_min(s->len, cap - 1);
    ngx_memcpy(dst, s->data, n);
    dst[n] = '\0';
}

/* A one-route body must name the route of its URL. */
static int sw_check_route_id(sw_admin_ctx_t *a, const u_char *body, size_t len,
                             sy_error *err) {
    cJSON *root = cJSON_ParseWithLength((const char *)body, len);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
    int rc = 0;

    if (root && cJSON_IsString(id) &&
        (ngx_strlen(id->valuestring) != a->name.len ||
         ngx_strncmp(id->valuestring, a->name.data, a->name.len) != 0)) {
        ngx_memzero(err, sizeof *err);
        err->code = rc = SY_EARG;
        ngx_cpystrn((u_char *)err->path, (u_char *)"id", sizeof err->path);
        ngx_snprintf((u_char *)err->message, sizeof err->message - 1,
                     "the route's id is not the one of the URL (%V)%Z",
                     &a->name);
    }
    cJSON_Delete(root); /* other shape errors are the library's to report */
    return rc;
}

/* An instances document PUT to instances/<service> must list that service
 * alone: its other services would be dropped (only the URL's is staged). */
static int sw_check_instances_only(sw_admin_ctx_t *a, const u_char *body,
                                   size_t len, sy_error *err) {
    const u_char *p = body, *end = body + len;
    cJSON *root, *services;
    const cJSON *s;
    int rc = 0;

    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    if (p == end || *p != '{') /* an array of instances */
        return 0;
    root = cJSON_ParseWithLength((const char *)body, len);
    services = cJSON_GetObjectItemCaseSensitive(root, "services");
    if (!cJSON_IsObject(services)) /* the bare map */
        services = NULL;
    for (s = root ? (services ? services : root)->child : NULL; s && rc == 0;
         s = s->next) {
        if (s->string == NULL ||
            (ngx_strlen(s->string) == a->name.len &&
             ngx_strncmp(s->string, a->name.data, a->name.len) == 0))
            continue;
        ngx_memzero(err, sizeof *err);
        err->code = rc = SY_EARG;
        ngx_snprintf((u_char *)err->path, sizeof err->path - 1, "%s%s%Z",
                     services ? "services." : "", s->string);
        ngx_snprintf((u_char *)err->message, sizeof err->message - 1,
                     "the document lists the service '%s' besides '%V': "
                     "instances/%V changes that service alone; PUT "
                     "instances/%s for it%Z",
                     s->string, &a->name, &a->name, s->string);
    }
    cJSON_Delete(root); /* other shape errors are the library's to report */
    return rc;
}

/* What the library does not check of an admin body: a one-route body's
 * id, an instances document's other services. */
static int sw_check_body(sw_admin_ctx_t *a, const u_char *body, size_t len,
                         sy_error *err) {
    return a->kind == SW_DOC_ROUTE ? sw_check_route_id(a, body, len, err)
           : a->kind == SW_DOC_INSTANCES
               ? sw_check_instances_only(a, body, len, err)
               : 0;
}

/* What a change carries from one phase of sw_change to the next. */
typedef struct {
    size_t len; /* of the body */
    char name[256], source[256];
    sy_error err;
    int rc;       /* SY_OK or the change's error */
    uint64_t seq; /* the zone generation that stored it */
    /* wall clock: from the request to the mutex and the catch-up (t0..t1),
     * the commit (t1..t2); CPU time: the commit (c0..c1), the body's copy
     * into the zone, the library's staging */
    uint64_t t0, t1, t2, c0, c1, c_store, c_stage;
} sw_change_t;

typedef enum { SW_TAKEN, SW_TAKE_RELOADED, SW_TAKE_NO_ROOM } sw_take_t;

/* Does this worker's router hold route `id` in `source`? */
static bool sw_route_in_source(const char *id, ngx_str_t *source) {
    const char *src = NULL;
    sy_snapshot *snap = sy_router_acquire(sw_worker.router);
    bool in = sy_snapshot_find_route(snap, id, &src) != NULL && src &&
              ngx_strlen(src) == source->len &&
              ngx_strncmp(src, source->data, source->len) == 0;
    sy_snapshot_release(snap);
    return in;
}

/* Under the zone's mutex, caught up with the zone: the body into room
 * in the zone (when nginx's reader read it), the commit to this worker's
 * router, and the link as the zone's newest document (written to the
 * state file) if it held, the room freed if not. NULL: no room. */
static sw_shm_doc_t *sw_change_commit_locked(ngx_http_request_t *r,
                                             sw_admin_ctx_t *a, sw_change_t *c,
                                             bool current) {
    sw_zone_ctx_t *z = sw_worker.zone;
    sw_shm_doc_t *doc = a->doc ? a->doc
                               : sw_zone_prepare_locked(z, a->kind, &a->name,
                                                        &a->source, c->len);
    bool in_place = false;

    if (doc == NULL)
        return NULL;
    if (a->doc != NULL) {
        a->doc = NULL; /* linked or freed below */
    } else if (sw_body_copy(r, doc->data) != NGX_OK) {
        c->rc = SY_ENOMEM;
        ngx_memzero(&c->err, sizeof c->err);
        c->err.code = c->rc;
        ngx_cpystrn((u_char *)c->err.message,
                    (u_char *)"cannot read the request body",
                    sizeof c->err.message);
    }
    c->c_store = sw_cpu_us() - c->c0;
    if (c->rc == 0)
        c->rc = sw_check_body(a, doc->data, c->len, &c->err);
    if (c->rc == 0 && a->kind == SW_DOC_ROUTE)
        in_place = sw_route_in_source(c->name, &a->source);
    /* the route must still live in that source once caught up (the
     * library removes by id: another worker may have moved it since the
     * request's check) */
    if (c->rc == 0 && a->kind == SW_DOC_ROUTE_REMOVE &&
        !sw_route_in_source(c->name, &a->source)) {
        c->rc = SY_ENOTFOUND;
        ngx_memzero(&c->err, sizeof c->err);
        c->err.code = c->rc;
        ngx_cpystrn((u_char *)c->err.message,
                    (u_char *)"no such route in this source",
                    sizeof c->err.message);
    }
    if (c->rc == 0) {
        c->rc = sw_worker_apply(a->kind, c->name, c->source, (char *)doc->data,
                                c->len, &c->err);
        c->c_stage = sw_worker.stage_cpu_us;
    }
    if (c->rc) {
        sw_zone_discard_locked(z, doc);
        return doc;
    }
    /* this worker was at the zone's generation and committed the change:
     * it is at the new one without applying it again */
    doc->base = sw_doc_base(sw_worker.mcf, a->kind, &a->source);
    doc->origin = SW_ORIGIN_ADMIN;
    doc->changed_us = (uint64_t)sw_now_real_us();
    if (a->kind == SW_DOC_ROUTE)
        sw_zone_route_order_locked(z, doc, in_place);
    c->seq = sw_zone_link_locked(z, doc);
    if (current)
        sw_worker.generation = c->seq;
    sw_state_write_locked(z, sw_worker.mcf, r->connection->log);
    return doc;
}

/* Holding the zone's mutex (and the state file's lock) from the catch-up
 * to the store: what another nginx wrote to the state file, then the
 * zone's documents this worker has not applied, then the change. */
static sw_take_t sw_change_take(ngx_http_request_t *r, sw_admin_ctx_t *a,
                                sw_change_t *c) {
    sw_zone_ctx_t *z = sw_worker.zone;
    sy_error ferr;
    sw_shm_doc_t *doc;
    int frc = 0;
    bool followed, current;
    ngx_fd_t slock;

    c->t0 = sw_now_us();
    sw_zone_lock(z);
    if (z->sh->epoch != sw_worker.epoch) {
        sw_zone_unlock(z);
        return SW_TAKE_RELOADED;
    }
    /* what another nginx wrote to the state file comes first (a binary
     * upgrade's two generations serve at once); the file's lock is held
     * until this change is written on it */
    slock = sw_state_lock(sw_worker.mcf, r->connection->log);
    if (sw_state_follow_locked(r->connection->log) > 0)
        sw_notify_others(sw_worker.mcf->notify);
    followed = sw_worker_follow_locked(r->connection->log, &frc, &ferr);
    /* false only when the catch-up could not copy the zone (memory) */
    current = z->sh->generation == sw_worker.generation;
    c->t1 = sw_now_us();
    c->c0 = sw_cpu_us();
    doc = sw_change_commit_locked(r, a, c, current);
    sw_state_unlock(slock);
    sw_zone_unlock(z);
    c->c1 = sw_cpu_us();
    c->t2 = sw_now_us();
    if (followed)
        sw_worker_publish(frc, &ferr);
    return doc ? SW_TAKEN : SW_TAKE_NO_ROOM;
}

/* The zone is full: the change is only checked (a copy of the body in
 * the request's pool), so that a bad change still gets its error; a good
 * one is answered 507. NGX_DECLINED: c->rc says why it is refused. */
static ngx_int_t sw_change_unstored(ngx_http_request_t *r, sw_admin_ctx_t *a,
                                    sw_change_t *c) {
    u_char *body = ngx_pnalloc(r->pool, c->len + 1);

    if (body == NULL || sw_body_copy(r, body) != NGX_OK)
        return sw_500(r, "cannot read the request body");
    c->rc = sw_check_body(a, body, c->len, &c->err);
    if (c->rc == 0)
        c->rc = sw_worker_check(a->kind, c->name, c->source, (char *)body,
                                c->len, &c->err);
    ngx_pfree(r->pool, body);
    if (c->rc)
        return NGX_DECLINED;
    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "switchyard: zone \"%V\" (%uz bytes) is full: "
                  "change not stored (switchyard_zone)",
                  &sw_worker.mcf->zone->shm.name,
                  sw_worker.mcf->zone->shm.size);
    return sw_send_message(r, NGX_HTTP_INSUFFICIENT_STORAGE, SY_ENOMEM,
                           "the switchyard zone is full (switchyard_zone)");
}

/* A refused change: logged (notice; error when memory ran out) and
 * answered with the located error. */
static ngx_int_t sw_change_rejected(ngx_http_request_t *r, sw_admin_ctx_t *a,
                                    sw_change_t *c) {
    ngx_uint_t level = c->rc == SY_ENOMEM ? NGX_LOG_ERR : NGX_LOG_NOTICE;

    ngx_log_error(level, r->connection->log, 0,
                  "switchyard: %s \"%V\" (source \"%V\") rejected: "
                  "%s%s%s (line %uD, column %uD)",
                  sw_kind_name(a->kind), &a->name, &a->source, c->err.path,
                  c->err.path[0] ? ": " : "", c->err.message, c->err.line,
                  c->err.column);
    return sw_send_error(r,
                         c->rc == SY_ENOTFOUND && a->kind == SW_DOC_ROUTE_REMOVE
                             ? NGX_HTTP_NOT_FOUND
                         : c->rc == SY_ENOMEM ? NGX_HTTP_INTERNAL_SERVER_ERROR
                                              : NGX_HTTP_BAD_REQUEST,
                         &c->err);
}

/* A stored change: logged at notice, answered with its generation and
 * timings; then the other workers are woken (after the answer: on a busy
 * machine a woken worker may take this one's CPU for its apply) and this
 * worker's state is published. */
static ngx_int_t sw_change_accepted(ngx_http_request_t *r, sw_admin_ctx_t *a,
                                    sw_change_t *c) {
    ngx_buf_t *b = ngx_create_temp_buf(r->pool, 6 * a->name.len + 300);
    ngx_int_t rc;

    ngx_log_error(NGX_LOG_NOTICE, r->connection->log, 0,
                  "switchyard: %s \"%V\" (source \"%V\") accepted: "
                  "generation %uL, %uz bytes",
                  sw_kind_name(a->kind), &a->name, &a->source, c->seq, c->len);
    if (b != NULL) {
        b->last = ngx_sprintf(
            b->last, "{\"kind\":\"%s\",\"name\":", sw_kind_name(a->kind));
        b->last = sw_json_utf8(b->last, a->name.data, a->name.len);
        b->last = ngx_sprintf(b->last,
                              ",\"generation\":%uL,\"wait_us\":%uL,"
                              "\"commit_us\":%uL,\"commit_cpu_us\":%uL,"
                              "\"store_cpu_us\":%uL,\"stage_cpu_us\":%uL,"
                              "\"body_us\":%uL,\"body_reads\":%ui}\n",
                              c->seq, c->t1 - c->t0, c->t2 - c->t1,
                              c->c1 - c->c0, c->c_store, c->c_stage,
                              a->body_t1 - a->body_t0, a->body_reads);
    }
    rc = b ? sw_send_json(r, NGX_HTTP_OK, b)
           : sw_500(r, "out of memory for the answer (the change was stored)");
    sw_notify_others(sw_worker.mcf->notify);
    sw_worker.slot.copy_us = 0;
    sw_worker.slot.apply_us = c->t2 - c->t1;
    sw_worker.slot.apply_cpu_us = c->c1 - c->c0;
    sw_worker_publish(0, NULL);
    return rc;
}

/* A change, from the request to the answer. The body is in room made in
 * the zone (unseen by the other workers) already (sw_read_into_zone), or
 * is copied there from nginx's reader. Under the zone's mutex: this
 * worker catches up with the zone, the change is committed to this
 * worker's router, and only when that held is it linked as the zone's
 * newest document. One change at a time across the workers, so the
 * zone's order is the order of the commits: a change that conflicts with
 * one stored just before fails here with its error, and a failed change is
 * stored nowhere and changes nothing. One parse on this worker (the
 * commit, which reuses the unchanged routes of a document); the others
 * are woken once the answer is written (sw_notify_others). */
static ngx_int_t sw_change(ngx_http_request_t *r, sw_admin_ctx_t *a) {
    sw_change_t *c = ngx_pcalloc(r->pool, sizeof *c);
    ngx_int_t rc;

    if (c == NULL)
        return sw_500(r, "out of memory for the change");
    c->len = a->kind == SW_DOC_ROUTE_REMOVE ? 0
             : a->doc                       ? a->doc->len
                                            : sw_body_len(r);
    sw_cstr(c->name, sizeof c->name, &a->name);
    sw_cstr(c->source, sizeof c->source, &a->source);
    switch (sw_change_take(r, a, c)) {
    case SW_TAKE_RELOADED:
        return sw_send_message(r, NGX_HTTP_SERVICE_UNAVAILABLE, SY_EBUSY,
                               "the configuration is being reloaded: retry");
    case SW_TAKE_NO_ROOM:
        rc = sw_change_unstored(r, a, c);
        if (rc != NGX_DECLINED)
            return rc;
        break;
    case SW_TAKEN: break;
    }
    return c->rc ? sw_change_rejected(r, a, c) : sw_change_accepted(r, a, c);
}

/* ---- a document's body read straight into the zone ----
 *
 * nginx's own reader (ngx_http_read_client_request_body) reads a body into
 * a buffer of its own, or into a temporary file when the body is larger
 * than client_body_buffer_size; the change then copied it into the zone
 * (1 MB: ~0.13 ms of the commit window, more from the file). For a body of
 * known length on HTTP/1.x, the admin location instead makes room for it
 * in the zone first (unseen by the workers) and has the connection read
 * into that room: no copy of its own, no temporary file. It answers
 * "Expect: 100-continue", honours client_body_timeout and leaves a
 * pipelined request after the body where nginx looks for it, as nginx's
 * reader does. Chunked bodies, HTTP/2, bodies larger than a quarter of the
 * zone (a client that stalls holds its room until client_body_timeout)
 * and a zone without room go through nginx's reader as before. */

/* Frees the room when the request ends before the change linked it. */
static void sw_room_cleanup(void *data) {
    sw_admin_ctx_t *a = data;
    /* (no zone: the worker is past its exit hook, the zone goes with it) */
    if (a->doc != NULL && sw_worker.zone != NULL) {
        sw_zone_lock(sw_worker.zone);
        sw_zone_discard_locked(sw_worker.zone, a->doc);
        sw_zone_unlock(sw_worker.zone);
        a->doc = NULL;
    }
}

/* "Expect: 100-continue" on HTTP/1.1: send the interim answer. */
static ngx_int_t sw_expect(ngx_http_request_t *r) {
    static const char cont[] = "HTTP/1.1 100 Continue" CRLF CRLF;
    ngx_str_t *v;
    ssize_t n;

    if (r->expect_tested || r->headers_in.expect == NULL ||
        r->http_version < NGX_HTTP_VERSION_11)
        return NGX_OK;
    r->expect_tested = 1;
    v = &r->headers_in.expect->value;
    if (v->len != sizeof("100-continue") - 1 ||
        ngx_strncasecmp(v->data, (u_char *)"100-continue", v->len) != 0)
        return NGX_OK;
    n = r->connection->send(r->connection, (u_char *)cont, sizeof cont - 1);
    return n == (ssize_t)(sizeof cont - 1) ? NGX_OK : NGX_ERROR;
}

/* Read what the connection has of the body into the room: NGX_OK when
 * it is all there, NGX_AGAIN to wait for more, or an HTTP status. */
static ngx_int_t sw_room_read(ngx_http_request_t *r, sw_admin_ctx_t *a) {
    ngx_connection_t *c = r->connection;
    size_t len = a->doc->len;
    ssize_t n;

    while (a->got < len) {
        n = c->recv(c, a->doc->data + a->got, len - a->got);
        if (n == NGX_AGAIN) {
            ngx_http_core_loc_conf_t *clcf =
                ngx_http_get_module_loc_conf(r, ngx_http_core_module);
            ngx_add_timer(c->read, clcf->client_body_timeout);
            if (ngx_handle_read_event(c->read, 0) != NGX_OK)
                return sw_500(r, "cannot wait for the request body (event)");
            return NGX_AGAIN;
        }
        if (n == 0)
            ngx_log_error(NGX_LOG_INFO, c->log, 0,
                          "client prematurely closed connection");
        if (n == 0 || n == NGX_ERROR) {
            c->error = 1;
            return NGX_HTTP_BAD_REQUEST;
        }
        a->got += n;
        a->body_reads++;
        r->request_length += n;
    }
    if (c->read->timer_set)
        ngx_del_timer(c->read);
    a->body_t1 = sw_now_us();
    r->reading_body = 0;
    r->read_event_handler = ngx_http_block_reading;
    return NGX_OK;
}

static void sw_room_read_handler(ngx_http_request_t *r) {
    sw_admin_ctx_t *a = ngx_http_get_module_ctx(r, ngx_http_switchyard_module);
    ngx_int_t rc;

    if (r->connection->read->timedout) {
        r->connection->timedout = 1;
        ngx_http_finalize_request(r, NGX_HTTP_REQUEST_TIME_OUT);
        return;
    }
    rc = sw_room_read(r, a);
    if (rc == NGX_AGAIN)
        return;
    ngx_http_finalize_request(r, rc == NGX_OK ? sw_change(r, a) : rc);
}

/* NGX_DECLINED: not for this body (nginx's reader takes it); otherwise
 * what the content handler returns. */
static ngx_int_t sw_read_into_zone(ngx_http_request_t *r, sw_admin_ctx_t *a) {
    off_t len = r->headers_in.content_length_n;
    ngx_pool_cleanup_t *cln;
    size_t pre;
    ngx_int_t rc;

    if (r != r->main || r->request_body || r->discard_body ||
        r->headers_in.chunked || len <= 0 ||
        len > (off_t)(sw_worker.mcf->zone->shm.size / 4))
        return NGX_DECLINED;
#if (NGX_HTTP_V2)
    if (r->stream)
        return NGX_DECLINED;
#endif
    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL)
        return sw_500(r, "out of memory for the body's cleanup");
    sw_zone_lock(sw_worker.zone);
    a->doc = sw_zone_prepare_locked(sw_worker.zone, a->kind, &a->name,
                                    &a->source, (size_t)len);
    sw_zone_unlock(sw_worker.zone);
    if (a->doc == NULL)
        return NGX_DECLINED; /* the zone is full: sw_change answers */
    cln->handler = sw_room_cleanup;
    cln->data = a;
    if (sw_expect(r) != NGX_OK)
        return sw_500(r, "cannot answer Expect: 100-continue");

    r->main->count++;
    r->reading_body = 1;
    a->body_t0 = sw_now_us();
    /* the part of the body that came with the headers */
    pre =
        ngx_min((size_t)(r->header_in->last - r->header_in->pos), (size_t)len);
    ngx_memcpy(a->doc->data, r->header_in->pos, pre);
    r->header_in->pos += pre;
    r->request_length += pre;
    a->got = pre;
    ngx_http_set_ctx(r, a, ngx_http_switchyard_module);
    r->read_event_handler = sw_room_read_handler;
    r->write_event_handler = ngx_http_request_empty_handler;
    rc = sw_room_read(r, a);
    if (rc == NGX_AGAIN)
        return NGX_DONE;
    if (rc == NGX_OK) {
        ngx_http_finalize_request(r, sw_change(r, a));
        return NGX_DONE;
    }
    r->main->count--;
    return rc;
}

static void sw_body_handler(ngx_http_request_t *r) {
    sw_admin_ctx_t *a = ngx_http_get_module_ctx(r, ngx_http_switchyard_module);
    ngx_http_finalize_request(r, sw_change(r, a));
}

static bool sw_is_source(ngx_str_t *name) {
    sw_file_t *f = sw_worker.mcf->route_files.elts;
    for (ngx_uint_t i = 0; i < sw_worker.mcf->route_files.nelts; i++)
        if (f[i].name.len == name->len &&
            ngx_strncmp(f[i].name.data, name->data, name->len) == 0)
            return true;
    return false;
}

/* Split "a/b" (or "a"); false for empty parts, more slashes or names
 * longer than 127 bytes. */
static bool sw_split(ngx_str_t *s, ngx_str_t *first, ngx_str_t *second) {
    u_char *slash = ngx_strlchr(s->data, s->data + s->len, '/');
    first->data = s->data;
    first->len = slash ? (size_t)(slash - s->data) : s->len;
    second->len = 0;
    second->data = NULL;
    if (slash) {
        second->data = slash + 1;
        second->len = s->len - first->len - 1;
        if (second->len == 0 || second->len > 127 ||
            ngx_strlchr(second->data, second->data + second->len, '/'))
            return false;
    }
    return first->len > 0 && first->len <= 127;
}

ngx_int_t sw_admin_handler(ngx_http_request_t *r) {
    ngx_http_core_loc_conf_t *clcf =
        ngx_http_get_module_loc_conf(r, ngx_http_core_module);
    u_char *p = r->uri.data, *end = r->uri.data + r->uri.len;
    sw_admin_ctx_t *a;
    ngx_str_t rest, first, second;
    ngx_int_t rc;

    if (sw_worker.router == NULL)
        return NGX_HTTP_SERVICE_UNAVAILABLE;
    if (r->uri.len >= clcf->name.len)
        p += clcf->name.len;
    while (p < end && *p == '/')
        p++;
    rest.data = p;
    rest.len = end - p;

    if (rest.len == 6 && ngx_strncmp(p, "status", 6) == 0) {
        if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD)))
            return NGX_HTTP_NOT_ALLOWED;
        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK)
            return rc;
        return sw_status(r);
    }
    if (rest.len == 7 && ngx_strncmp(p, "metrics", 7) == 0) {
        if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD)))
            return NGX_HTTP_NOT_ALLOWED;
        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK)
            return rc;
        return sw_metrics(r);
    }
    /* a change is made as asked: a query (dry_run=true, say) is read by
     * nothing, so a change asked with one is refused, not committed */
    if (r->args.len) {
        u_char msg[256];
        ngx_snprintf(msg, sizeof msg - 1,
                     "the admin API takes no query (%*s): nothing was "
                     "changed; send the change without it%Z",
                     ngx_min(r->args.len, 100), r->args.data);
        return sw_refuse(r, NGX_HTTP_BAD_REQUEST, SY_EINVAL, (char *)msg);
    }
    a = ngx_pcalloc(r->pool, sizeof *a);
    if (a == NULL)
        return sw_500(r, "out of memory for the admin context");
    a->ctx_kind = SW_CTX_ADMIN;
    if (rest.len > 7 && ngx_strncmp(p, "routes/", 7) == 0) {
        rest.data += 7, rest.len -= 7;
        if (!sw_split(&rest, &first, &second))
            return NGX_HTTP_NOT_FOUND;
        if (second.len == 0) {
            if (r->method != NGX_HTTP_PUT)
                return NGX_HTTP_NOT_ALLOWED;
            a->kind = SW_DOC_ROUTES;
            a->name = first;
        } else {
            if (!(r->method & (NGX_HTTP_PUT | NGX_HTTP_DELETE)))
                return NGX_HTTP_NOT_ALLOWED;
            a->kind =
                r->method == NGX_HTTP_PUT ? SW_DOC_ROUTE : SW_DOC_ROUTE_REMOVE;
            a->name = second;
        }
        a->source = first;
        if (!sw_is_source(&first))
            return sw_refuse(r, NGX_HTTP_NOT_FOUND, SY_ENOTFOUND,
                             "no such source: sources are the files "
                             "of switchyard_routes");
    } else if (rest.len > 10 && ngx_strncmp(p, "instances/", 10) == 0) {
        rest.data += 10, rest.len -= 10;
        if (!sw_split(&rest, &first, &second) || second.len)
            return NGX_HTTP_NOT_FOUND;
        if (r->method != NGX_HTTP_PUT)
            return NGX_HTTP_NOT_ALLOWED;
        a->kind = SW_DOC_INSTANCES;
        a->name = first;
    } else {
        return NGX_HTTP_NOT_FOUND;
    }
    if (a->kind == SW_DOC_ROUTE_REMOVE) {
        /* the route must live in that source. A worker a reload replaced
         * (draining) follows the zone no more: its router lacks what the
         * new workers stored since, so it answers 503 as a change there
         * does (sw_change_take), not a 404 for a route that exists */
        const char *src = NULL;
        char id[256];
        if (sw_worker.zone->sh->epoch != sw_worker.epoch)
            return sw_refuse(r, NGX_HTTP_SERVICE_UNAVAILABLE, SY_EBUSY,
                             "the configuration is being reloaded: retry");
        sw_cstr(id, sizeof id, &a->name);
        sw_worker_sync(r->connection->log);
        sy_snapshot *snap = sy_router_acquire(sw_worker.router);
        bool found = sy_snapshot_find_route(snap, id, &src) != NULL && src &&
                     ngx_strlen(src) == a->source.len &&
                     ngx_strncmp(src, a->source.data, a->source.len) == 0;
        sy_snapshot_release(snap);
        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK)
            return rc;
        if (!found)
            return sw_send_message(r, NGX_HTTP_NOT_FOUND, SY_ENOTFOUND,
                                   "no such route in this source");
        return sw_change(r, a);
    }
    rc = sw_read_into_zone(r, a);
    if (rc != NGX_DECLINED)
        return rc;
    ngx_http_set_ctx(r, a, ngx_http_switchyard_module);
    rc = ngx_http_read_client_request_body(r, sw_body_handler);
    if (rc >= NGX_HTTP_SPECIAL_RESPONSE)
        return rc;
    return NGX_DONE;
}
