/*
 * etcd_probe.c - is the member the watch listens to still part of the
 * cluster? A watch on a member that stopped (SIGSTOP, a hung process) or
 * was cut off from the others (a partition) goes silent rather than
 * failing: TCP stays up and no event comes, while the other members go on
 * taking writes. So while watching, the source asks that member a
 * linearizable read every second (a range of one key of the prefix,
 * keys only), which only a member in touch with the leader can answer. No
 * answer within 1.5 s: the watch is dropped and resumed on the next
 * endpoint of --etcd from the last applied revision, so nothing is missed
 * (etcd_source.c, etcd_source_fail).
 */
#include "etcd_source_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROBE_EVERY_MS 1000
#define PROBE_TIMEOUT_MS 1500

static void probe_done(void *data, int status, const char *body, size_t n,
                       const char *err) {
    gw_etcd *e = data;
    etcd_http_close(e->probe_http);
    e->probe_http = NULL;
    if (!err && status == 200)
        return;
    /* An error answer says why (etcd's message): "invalid auth token" (a
     * password changed, a member that forgot its simple tokens) then
     * drops the token (etcd_source_fail) and the next attempt logs in
     * first; it is no silent member. */
    char why[512], msg[900];
    int code;
    if (!err)
        etcd_decode_answer_error(status, body, n, why, sizeof why, &code);
    snprintf(msg, sizeof msg,
             err ? "%.255s:%.7s stopped answering reads (%s); the watch "
                   "moves on"
                 : "%.255s:%.7s refused the liveness read (%s); the watch "
                   "moves on",
             e->eps[e->ep_index].host, e->eps[e->ep_index].port,
             err ? err : why);
    if (e->st == ST_WATCHING && !e->stopping)
        etcd_source_fail(e, "probe", msg);
}

static void on_probe(uv_timer_t *t) {
    gw_etcd *e = t->data;
    if (e->stopping || e->st != ST_WATCHING || e->probe_http)
        return;
    char body[512];
    snprintf(body, sizeof body,
             "{\"key\":\"%s\",\"range_end\":\"%s\",\"limit\":\"1\","
             "\"keys_only\":true}",
             e->key_b64, e->end_b64);
    etcd_http_request req = {.loop = e->loop,
                             .ep = &e->eps[e->ep_index],
                             .path = "/v3/kv/range",
                             .body = body,
                             .headers = e->auth_header,
                             .timeout_ms = PROBE_TIMEOUT_MS,
                             .on_done = probe_done,
                             .data = e,
                             .transport =
                                 etcd_transport(e, &e->eps[e->ep_index])};
    e->probe_http = etcd_http_post(&req);
}

int etcd_probe_start(gw_etcd *e) {
    e->probe_timer = calloc(1, sizeof *e->probe_timer);
    if (!e->probe_timer)
        return -1;
    uv_timer_init(e->loop, e->probe_timer);
    e->probe_timer->data = e;
    uv_timer_start(e->probe_timer, on_probe, PROBE_EVERY_MS, PROBE_EVERY_MS);
    return 0;
}

static void timer_closed(uv_handle_t *h) {
    free(h);
}

void etcd_close_timed(etcd_http **http, uv_timer_t **timer) {
    etcd_http_close(*http);
    *http = NULL;
    if (*timer)
        uv_close((uv_handle_t *)*timer, timer_closed);
    *timer = NULL;
}

void etcd_probe_stop(gw_etcd *e) {
    etcd_close_timed(&e->probe_http, &e->probe_timer);
}
