/*
 * etcd_write.c - admin changes written through to etcd (etcd_write.h):
 * one /v3/kv/txn per change, compares on the keys' mod revisions as this
 * gateway last saw them (from the source's records), the puts and
 * deletes as its success branch. Sent to the source's current endpoint;
 * when it does not answer, to the next ones of --etcd (a follower
 * forwards a write to the leader itself).
 */
#include "etcd_write.h"

#include "etcd_source_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct write_op {
    gw_etcd *e;
    char *body; /* the txn request */
    size_t tries;
    size_t ep; /* the endpoint of this try */
    gw_etcd_write_cb cb;
    void *data;
    etcd_http *h;  /* the exchange in flight */
    bool relogged; /* the token was renewed once for this write */
} write_op;

void gw_etcd_source_key(gw_etcd *e, const char *source, char *out, size_t cap) {
    snprintf(out, cap, "%sroutes/%s", e->prefix, source);
}

static void op_free(write_op *w) {
    free(w->body);
    free(w);
}

static void send_try(write_op *w);

static void on_relogin(gw_etcd *e, void *data, const char *err) {
    (void)e;
    write_op *w = data;
    if (err) {
        w->cb(w->data, 502, 0, err);
        op_free(w);
    } else {
        send_try(w);
    }
}

static void on_txn(void *data, int status, const char *body, size_t n,
                   const char *err) {
    write_op *w = data;
    etcd_http_close(w->h); /* the owner closes its exchange */
    w->h = NULL;
    if (!w->relogged && w->e->opts.user &&
        etcd_auth_expired(err ? 0 : status, err ? err : body)) {
        w->relogged = true; /* the token expired: a new one, then again */
        etcd_auth_drop(w->e);
        etcd_auth_login(w->e, &w->h, on_relogin, w);
        return;
    }
    char msg[512];
    if (!err && status == 200) {
        cJSON *j = cJSON_ParseWithLength(body, n);
        const cJSON *hdr = cJSON_GetObjectItemCaseSensitive(j, "header");
        const cJSON *rev = cJSON_GetObjectItemCaseSensitive(hdr, "revision");
        int64_t revision =
            cJSON_IsString(rev) ? strtoll(rev->valuestring, NULL, 10) : 0;
        bool ok =
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "succeeded"));
        cJSON_Delete(j);
        if (ok)
            w->cb(w->data, 200, revision, "written to etcd");
        else
            w->cb(w->data, 409, revision,
                  "etcd holds a newer value than this gateway applied (a "
                  "concurrent write): nothing written; read the current "
                  "state and try again");
        op_free(w);
        return;
    }
    snprintf(msg, sizeof msg, "%s: %s", w->e->eps[w->ep].host,
             err ? err : "etcd answered an error");
    if (!err && status >= 400 && status < 500) { /* etcd refused it */
        snprintf(msg, sizeof msg, "etcd refused the write (%d): %.*s", status,
                 (int)(n > 300 ? 300 : n), body ? body : "");
        w->cb(w->data, 502, 0, msg);
        op_free(w);
        return;
    }
    if (++w->tries < w->e->ep_count) {
        w->ep = (w->ep + 1) % w->e->ep_count;
        send_try(w);
        return;
    }
    w->cb(w->data, 502, 0, msg);
    op_free(w);
}

static void send_try(write_op *w) {
    etcd_http_request req = {.loop = w->e->loop,
                             .ep = &w->e->eps[w->ep],
                             .path = "/v3/kv/txn",
                             .body = w->body,
                             .headers = w->e->auth_header,
                             .timeout_ms = w->e->opts.request_timeout_ms,
                             .on_done = on_txn,
                             .data = w,
                             .transport =
                                 etcd_transport(w->e, &w->e->eps[w->ep])};
    if (!(w->h = etcd_http_post(&req))) {
        w->cb(w->data, 502, 0, "cannot start a request to etcd");
        op_free(w);
    }
}

static int start_op(gw_etcd *e, cJSON *txn, gw_etcd_write_cb cb, void *data) {
    write_op *w = calloc(1, sizeof *w);
    char *body = txn ? cJSON_PrintUnformatted(txn) : NULL;
    cJSON_Delete(txn);
    if (!w || !body) {
        free(w);
        free(body);
        return -1;
    }
    *w = (write_op){e, body, 0, e->ep_index, cb, data, NULL, false};
    send_try(w);
    return 0;
}

/* compare: key's mod_revision == rev (0: the key is absent). */
static bool add_compare(cJSON *cmp, const char *key, int64_t rev) {
    char *k = etcd_b64_encode(key, strlen(key));
    char r[24];
    snprintf(r, sizeof r, "%lld", (long long)rev);
    cJSON *c = cJSON_CreateObject();
    bool ok = k && c && cJSON_AddStringToObject(c, "key", k) &&
              cJSON_AddStringToObject(c, "target", "MOD") &&
              cJSON_AddStringToObject(c, "mod_revision", r) &&
              cJSON_AddStringToObject(c, "result", "EQUAL");
    free(k);
    if (ok)
        cJSON_AddItemToArray(cmp, c);
    else
        cJSON_Delete(c);
    return ok;
}

/* a put (value) or a delete (value NULL) of key */
static bool add_op(cJSON *ops, const char *key, const char *value, size_t len) {
    char *k = etcd_b64_encode(key, strlen(key));
    char *v = value ? etcd_b64_encode(value, len) : NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON *r = cJSON_AddObjectToObject(o, value ? "request_put"
                                                : "request_delete_range");
    bool ok = k && (v || !value) && r && cJSON_AddStringToObject(r, "key", k) &&
              (!value || cJSON_AddStringToObject(r, "value", v));
    free(k);
    free(v);
    if (ok)
        cJSON_AddItemToArray(ops, o);
    else
        cJSON_Delete(o);
    return ok;
}

int gw_etcd_write_source(gw_etcd *e, const char *source, const char *json,
                         size_t len, gw_etcd_write_cb cb, void *data) {
    char key[640];
    gw_etcd_source_key(e, source, key, sizeof key);
    uv_mutex_lock(&e->mu);
    const source_rec *s = etcd_find_source(e, source);
    int64_t seen = s && s->present ? s->mod_revision : 0;
    uv_mutex_unlock(&e->mu);
    cJSON *txn = cJSON_CreateObject();
    cJSON *cmp = cJSON_AddArrayToObject(txn, "compare");
    cJSON *ops = cJSON_AddArrayToObject(txn, "success");
    if (!cmp || !ops || !add_compare(cmp, key, seen) ||
        !add_op(ops, key, json, len)) {
        cJSON_Delete(txn);
        return -1;
    }
    return start_op(e, txn, cb, data);
}

int gw_etcd_write_instances(gw_etcd *e, const char *service, const cJSON *list,
                            gw_etcd_write_cb cb, void *data, char *msg,
                            size_t cap) {
    cJSON *txn = cJSON_CreateObject();
    cJSON *cmp = cJSON_AddArrayToObject(txn, "compare");
    cJSON *ops = cJSON_AddArrayToObject(txn, "success");
    bool ok = cmp && ops;
    char key[1024];
    int i = 0;
    for (const cJSON *it = list ? list->child : NULL; ok && it;
         it = it->next, i++) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        if (!cJSON_IsString(id) || !id->valuestring[0] ||
            strchr(id->valuestring, '/')) {
            snprintf(msg, cap,
                     "[%d].id: each instance needs an \"id\" "
                     "(its etcd key), without '/'",
                     i);
            cJSON_Delete(txn);
            return -1;
        }
        snprintf(key, sizeof key, "%sinstances/%s/%s", e->prefix, service,
                 id->valuestring);
        char *v = cJSON_PrintUnformatted(it);
        ok = v && add_op(ops, key, v, strlen(v));
        free(v);
    }
    /* compares on every key known now; deletes of those not in the list */
    uv_mutex_lock(&e->mu);
    const service_rec *s = NULL;
    for (size_t k = 0; k < e->svc_n; k++)
        if (strcmp(e->svc[k].name, service) == 0)
            s = &e->svc[k];
    for (size_t k = 0; ok && s && k < s->n; k++) {
        snprintf(key, sizeof key, "%sinstances/%s/%s", e->prefix, service,
                 s->v[k].id);
        ok = add_compare(cmp, key, s->v[k].mod_revision);
        bool listed = false;
        for (const cJSON *it = list ? list->child : NULL; it; it = it->next)
            listed |=
                strcmp(cJSON_GetObjectItemCaseSensitive(it, "id")->valuestring,
                       s->v[k].id) == 0;
        if (ok && !listed)
            ok = add_op(ops, key, NULL, 0);
    }
    uv_mutex_unlock(&e->mu);
    /* an instance new to this gateway must be new to etcd too */
    for (const cJSON *it = list ? list->child : NULL; ok && it; it = it->next) {
        const char *id =
            cJSON_GetObjectItemCaseSensitive(it, "id")->valuestring;
        bool known = false;
        for (size_t k = 0; s && k < s->n; k++)
            known |= strcmp(s->v[k].id, id) == 0;
        snprintf(key, sizeof key, "%sinstances/%s/%s", e->prefix, service, id);
        if (!known)
            ok = add_compare(cmp, key, 0);
    }
    if (!ok) {
        cJSON_Delete(txn);
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    return start_op(e, txn, cb, data);
}
