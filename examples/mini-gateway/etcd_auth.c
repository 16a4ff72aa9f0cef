/*
 * etcd_auth.c - etcd authentication for the etcd source (--etcd-user,
 * --etcd-password-file): a token from /v3/auth/authenticate, sent as the
 * Authorization header of every request (full reads, the watch, the
 * liveness probe, admin writes). etcd's tokens expire (--auth-token-ttl,
 * 5 minutes by default, or a JWT's lifetime): an answer "invalid auth
 * token" (401) drops the token, and the next attempt logs in again first.
 * The password stays in memory only for that.
 */
#include "etcd_source_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct login {
    gw_etcd *e;
    etcd_http **slot; /* where the owner keeps the exchange */
    void (*done)(gw_etcd *e, void *data, const char *err);
    void *data;
} login;

bool etcd_auth_needed(const gw_etcd *e) {
    return e->opts.user && !e->auth_header;
}

bool etcd_auth_expired(int status, const char *text) {
    return status == 401 ||
           (text && (strstr(text, "invalid auth token") ||
                     strstr(text, "auth token is not provided") ||
                     strstr(text, "user name is empty")));
}

void etcd_auth_drop(gw_etcd *e) {
    free(e->auth_header);
    e->auth_header = NULL;
}

static void login_done(void *data, int status, const char *body, size_t n,
                       const char *err) {
    login *l = data;
    gw_etcd *e = l->e;
    etcd_http_close(*l->slot);
    *l->slot = NULL;
    char msg[512] = "";
    if (!err && status == 200) {
        cJSON *j = cJSON_ParseWithLength(body, n);
        const cJSON *tok = cJSON_GetObjectItemCaseSensitive(j, "token");
        if (cJSON_IsString(tok) && tok->valuestring[0] &&
            !strpbrk(tok->valuestring, "\r\n")) {
            size_t cap = strlen(tok->valuestring) + 32;
            char *h = malloc(cap);
            if (h) {
                snprintf(h, cap, "Authorization: %s\r\n", tok->valuestring);
                etcd_auth_drop(e);
                e->auth_header = h;
            } else {
                snprintf(msg, sizeof msg, "out of memory");
            }
        } else {
            snprintf(msg, sizeof msg, "no token in etcd's answer");
        }
        cJSON_Delete(j);
    } else if (err) {
        snprintf(msg, sizeof msg, "%s", err);
    } else {
        int code;
        etcd_decode_answer_error(status, body, n, msg, sizeof msg, &code);
    }
    void (*done)(gw_etcd *, void *, const char *) = l->done;
    void *d = l->data;
    free(l);
    char what[600];
    snprintf(what, sizeof what, "authentication as %s: %s", e->opts.user,
             msg);
    done(e, d, msg[0] ? what : NULL);
}

void etcd_auth_login(gw_etcd *e, etcd_http **slot,
                     void (*done)(gw_etcd *e, void *data, const char *err),
                     void *data) {
    login *l = calloc(1, sizeof *l);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", e->opts.user);
    cJSON_AddStringToObject(j, "password",
                            e->opts.password ? e->opts.password : "");
    char *body = l ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!body) {
        free(l);
        done(e, data, "authentication: out of memory");
        return;
    }
    *l = (login){e, slot, done, data};
    const etcd_endpoint *ep = &e->eps[e->ep_index];
    etcd_http_request req = {.loop = e->loop,
                             .ep = ep,
                             .path = "/v3/auth/authenticate",
                             .body = body,
                             .timeout_ms = e->opts.request_timeout_ms,
                             .on_done = login_done,
                             .data = l,
                             .transport = etcd_transport(e, ep)};
    *slot = etcd_http_post(&req);
    memset(body, 0, strlen(body)); /* the password */
    free(body);
    if (!*slot) {
        free(l);
        done(e, data, "authentication: cannot start a request");
    }
}
