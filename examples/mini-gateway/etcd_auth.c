/*
 * etcd_auth.c - etcd authentication for the etcd source (--etcd-user,
 * --etcd-password-file): a token from /v3/auth/authenticate, sent as the
 * Authorization header of every request (full reads, the watch, the
 * liveness probe, admin writes). etcd's tokens expire (--auth-token-ttl,
 * 5 minutes by default, or a JWT's lifetime), so the token is renewed
 * before that, by a login of its own beside the watch: at two thirds of
 * a JWT's lifetime (its "exp" claim), else (a simple token, whose TTL
 * etcd does not tell) every gw_etcd_options.auth_renew_ms (100 s by
 * default, a third of etcd's default TTL); a watch then never meets a
 * rejected token. Should one be rejected all the same (etcd restarted,
 * a shorter TTL), an answer "invalid auth token" (401) drops the token,
 * and the next attempt logs in again first. The password stays in memory
 * only for that. With --etcd-password-file, each login reads the file's
 * first line again: a password rotated in etcd (which drops the user's
 * tokens at once) and in the file is used at the next login, without a
 * restart.
 */
#include "etcd_source_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RENEW_DEFAULT_MS 100000u /* simple tokens: etcd's TTL is 300 s */
#define RENEW_RETRY_MS 1000u     /* a renewal that failed, again */
#define RENEW_MIN_MS 200u

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
    if (e->auth_header) { /* etcd rejected it (or the source stops) */
        uv_mutex_lock(&e->mu);
        e->auth_rejections++;
        uv_mutex_unlock(&e->mu);
    }
    free(e->auth_header);
    e->auth_header = NULL;
}

/* When to renew `token` (ms from now): at two thirds of a JWT's lifetime
 * (header.payload.signature, the payload's "exp" in seconds), else every
 * auth_renew_ms. */
static uint64_t renew_in_ms(const gw_etcd *e, const char *token) {
    uint64_t every =
        e->opts.auth_renew_ms ? e->opts.auth_renew_ms : RENEW_DEFAULT_MS;
    const char *p1 = strchr(token, '.');
    const char *p2 = p1 ? strchr(p1 + 1, '.') : NULL;
    if (!p2 || p2 - p1 - 1 <= 0 || p2 - p1 > 4096)
        return every;
    char b64[4100];
    size_t n = 0;
    for (const char *c = p1 + 1; c < p2; c++) /* base64url to base64 */
        b64[n++] = *c == '-' ? '+' : *c == '_' ? '/' : *c;
    while (n % 4)
        b64[n++] = '=';
    size_t len = 0;
    char *json = etcd_b64_decode_n(b64, n, &len);
    cJSON *j = json ? cJSON_ParseWithLength(json, len) : NULL;
    const cJSON *exp = cJSON_GetObjectItemCaseSensitive(j, "exp");
    double exp_s = cJSON_IsNumber(exp) ? exp->valuedouble : 0;
    cJSON_Delete(j);
    free(json);
    if (exp_s <= 0)
        return every;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double left_ms = exp_s * 1000.0 -
                     ((double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6);
    uint64_t at = left_ms > 0 ? (uint64_t)(left_ms * 2 / 3) : 0;
    return at < RENEW_MIN_MS ? RENEW_MIN_MS : at;
}

static void auth_log(gw_etcd *e, gw_etcd_log_level lvl, const char *msg) {
    if (e->opts.on_log)
        e->opts.on_log(e->opts.data, lvl, msg);
    else
        fprintf(stderr, "etcd: %s\n", msg);
}

/* The password of the next login: the password file's first line, read
 * again each time; the one read last while the file cannot be read (or
 * its first line is empty), with the failure logged. */
static const char *login_password(gw_etcd *e) {
    const char *file = e->password_file;
    if (!file)
        return e->password ? e->password : "";
    char line[1024];
    FILE *f = fopen(file, "r");
    const char *why = !f ? strerror(errno) : NULL;
    if (f && !fgets(line, sizeof line, f))
        why = ferror(f) ? strerror(errno) : "it is empty";
    if (f)
        fclose(f);
    if (!why) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0])
            why = "its first line is empty (the password is the first line)";
    }
    char msg[1200];
    if (why) {
        snprintf(msg, sizeof msg,
                 "--etcd-password-file %s: %s; logging in with the password "
                 "read before",
                 file, why);
        auth_log(e, GW_ETCD_LOG_WARN, msg);
    } else if (!e->password || strcmp(line, e->password) != 0) {
        char *p = etcd_strdup(line);
        if (p) {
            if (e->password) {
                memset(e->password, 0, strlen(e->password));
                free(e->password);
                snprintf(msg, sizeof msg,
                         "--etcd-password-file %s: a new password, used from "
                         "this login on",
                         file);
                auth_log(e, GW_ETCD_LOG_INFO, msg);
            }
            e->password = p;
        }
    }
    memset(line, 0, sizeof line);
    return e->password ? e->password : "";
}

static void on_renew_timer(uv_timer_t *t);

/* Arm the renewal timer for `ms` from now. */
static void renew_after(gw_etcd *e, uint64_t ms) {
    if (e->stopping)
        return;
    if (!e->auth_timer) {
        e->auth_timer = calloc(1, sizeof *e->auth_timer);
        if (!e->auth_timer)
            return; /* no renewal: the rejection path still works */
        uv_timer_init(e->loop, e->auth_timer);
        e->auth_timer->data = e;
    }
    uv_timer_start(e->auth_timer, on_renew_timer, ms, 0);
}

static void on_renewed(gw_etcd *e, void *data, const char *err) {
    (void)data;
    if (err) /* the token held may still be good: try again soon */
        renew_after(e, RENEW_RETRY_MS);
}

static void on_renew_timer(uv_timer_t *t) {
    gw_etcd *e = t->data;
    if (e->stopping || e->auth_http)
        return;
    uv_mutex_lock(&e->mu);
    e->auth_renewals++;
    uv_mutex_unlock(&e->mu);
    etcd_auth_login(e, &e->auth_http, on_renewed, NULL);
}

void etcd_auth_stop(gw_etcd *e) {
    etcd_close_timed(&e->auth_http, &e->auth_timer);
    free(e->auth_login); /* a closed exchange does not call back */
    e->auth_login = NULL;
}

static void login_done(void *data, int status, const char *body, size_t n,
                       const char *err) {
    login *l = data;
    gw_etcd *e = l->e;
    if (l == e->auth_login)
        e->auth_login = NULL;
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
                free(e->auth_header); /* replaced, not rejected */
                e->auth_header = h;
                uv_mutex_lock(&e->mu);
                e->auth_logins++;
                uv_mutex_unlock(&e->mu);
                renew_after(e, renew_in_ms(e, tok->valuestring));
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
    snprintf(what, sizeof what, "authentication as %s: %s", e->opts.user, msg);
    done(e, d, msg[0] ? what : NULL);
}

void etcd_auth_login(gw_etcd *e, etcd_http **slot,
                     void (*done)(gw_etcd *e, void *data, const char *err),
                     void *data) {
    login *l = calloc(1, sizeof *l);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", e->opts.user);
    cJSON_AddStringToObject(j, "password", login_password(e));
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
    } else if (slot == &e->auth_http) {
        e->auth_login = l;
    }
}
