/*
 * forward.c - forward:/path routes and fallbacks: the request is dispatched
 * again through the gateway's own routes with a new path, as SCG's
 * ForwardPathFilter and ForwardRoutingFilter hand it back to the gateway's
 * handler mapping. The re-dispatched request keeps the client's Host and
 * carries the query and headers the forwarding route's filters produced;
 * its response gets the answering route's response edits, and the
 * forwarding route's after them only when the gateway answers itself
 * (no://op): SCG's outer filters find a proxied answer already written
 * (gw_resp_op.outer). At most GW_MAX_FORWARDS hops: past that the loop is
 * answered with 508.
 */
#define _DEFAULT_SOURCE
#include "proxy.h"

#include <stdlib.h>
#include <string.h>

#define GW_MAX_FORWARDS 8

void gw_forward_free(gw_request *q) {
    gw_buf_free(&q->fwd);
    free(q->fwd_hdrs);
    q->fwd_hdrs = NULL;
}

bool gw_request_client_header(const gw_request *q, sy_header hd) {
    const gw_client *c = q->c;
    for (size_t i = 0; i < c->nh; i++)
        if (c->hdrs[i].name.ptr == hd.name.ptr &&
            c->hdrs[i].value.ptr == hd.value.ptr &&
            c->hdrs[i].value.len == hd.value.len)
            return true;
    return false;
}

void gw_request_forward(gw_request *q, sy_str path, sy_str query,
                        const sy_header *h, size_t n) {
    if (q->forwards++ >= GW_MAX_FORWARDS) {
        gw_request_respond(q, 508, NULL,
                           "{\"status\":508,\"error\":\"forward loop\"}\n");
        return;
    }
    if (q->forwards == 1) { /* the client's request: access_log.c */
        q->client_req = q->sreq;
        q->client_route_id = q->route_id;
        q->client_rd = q->rd;
    }
    /* copy first: the slices may point into q->fwd or the match context;
     * a header of the client's, as it sent it, is kept where it is (its
     * bytes last as long as the request): still the client's when the
     * upstream head is written (gw_trace_drops) */
    gw_buf b = {0};
    gw_buf_reserve(&b, path.len + query.len + 2);
    gw_buf_add(&b, path.ptr, path.len);
    gw_buf_add(&b, "", 1);
    gw_buf_add(&b, query.ptr, query.len);
    gw_buf_add(&b, "", 1);
    for (size_t i = 0; i < n; i++) {
        if (gw_request_client_header(q, h[i]))
            continue;
        gw_buf_add(&b, h[i].name.ptr, h[i].name.len);
        gw_buf_add(&b, "", 1);
        gw_buf_add(&b, h[i].value.ptr, h[i].value.len);
        gw_buf_add(&b, "", 1);
    }
    sy_header *hv = malloc((n ? n : 1) * sizeof *hv);
    if (!hv) {
        gw_buf_free(&b);
        gw_request_respond(q, 500, NULL, NULL);
        return;
    }
    const char *p = b.p;
    sy_str np = {p, path.len};
    p += path.len + 1;
    sy_str nq = {p, query.len};
    p += query.len + 1;
    for (size_t i = 0; i < n; i++) {
        if (gw_request_client_header(q, h[i])) {
            hv[i] = h[i];
            continue;
        }
        hv[i].name = (sy_str){p, h[i].name.len};
        p += h[i].name.len + 1;
        hv[i].value = (sy_str){p, h[i].value.len};
        p += h[i].value.len + 1;
    }
    gw_forward_free(q);
    q->fwd = b;
    q->fwd_hdrs = hv;
    q->sreq.path = np;
    q->sreq.query = nq;
    q->sreq.headers = hv;
    q->sreq.header_count = n;
    /* instances tried belong to the route left behind */
    for (size_t i = 0; i < q->ntried; i++)
        free(q->tried[i]);
    q->ntried = 0;
    gw_request_dispatch(q);
}

void gw_forward_route(gw_request *q, sy_match *m, const char *path) {
    sy_target t;
    sy_error err;
    if (sy_match_target(m, NULL, 0, &t, &err)) {
        gw_request_respond(q, 500, NULL, NULL);
        return;
    }
    gw_request_forward(q, (sy_str){path, strlen(path)}, t.query, t.headers,
                       t.header_count);
}
