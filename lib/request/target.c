/*
 * target.c - the target of a match: everything a proxy needs to send the
 * request upstream, in one call. It joins the filter plan (path, query,
 * headers, PreserveHostHeader) with the route's upstream or, for lb://
 * routes, the instance chosen by select.c (skipping the instances the host
 * already tried), and works out the Host header to send as SCG does: the
 * upstream's authority (worked out once, when the route or the instance
 * was built) unless PreserveHostHeader keeps the client's. The header list
 * without Host lives in the match context's scratch arena.
 */
#include "request/match_plan.h"
#include "request/select.h"
#include "service/service.h"

/* A header name "Host" in any case, as sy__str_ieq(name, "host", 4) says
 * without its call and loop: x | 0x20 is 'h', 'o', 's' or 't' only for
 * that letter in either case. */
static bool is_host(sy_str name) {
    return name.len == 4 && (name.ptr[0] | 0x20) == 'h' &&
           (name.ptr[1] | 0x20) == 'o' && (name.ptr[2] | 0x20) == 's' &&
           (name.ptr[3] | 0x20) == 't';
}

/* The plan's headers without Host: the target carries it apart. *host
 * gets the plan's last Host header (SetRequestHostHeader, or the client's
 * when the host passed it among the headers), or stays as it was. */
static int headers_without_host(sy__arena *scratch, const sy__plan *p,
                                sy_target *out, sy_str *host) {
    size_t hosts = 0, at = 0;
    for (size_t i = 0; i < p->header_count; i++)
        if (is_host(p->headers[i].name)) {
            *host = p->headers[i].value;
            hosts++;
            at = i;
        }
    size_t n = p->header_count - hosts;
    if (!hosts || !n || (hosts == 1 && at == n)) {
        /* the list as it is, none left, or all but the last */
        out->headers = p->headers;
        out->header_count = n;
        return SY_OK;
    }
    if (hosts == 1 && at == 0) { /* all but the first (the usual place) */
        out->headers = p->headers + 1;
        out->header_count = n;
        return SY_OK;
    }
    sy_header *h = sy__arena_alloc(scratch, n * sizeof *h);
    if (!h)
        return SY_ENOMEM;
    if (hosts == 1) { /* the one at `at` left out */
        memcpy(h, p->headers, at * sizeof *h);
        memcpy(h + at, p->headers + at + 1, (n - at) * sizeof *h);
    } else {
        size_t k = 0;
        for (size_t i = 0; i < p->header_count; i++)
            if (!is_host(p->headers[i].name))
                h[k++] = p->headers[i];
    }
    out->headers = h;
    out->header_count = n;
    return SY_OK;
}

/* A target's fields of an lb:// instance, for one that has none. */
static void no_instance(sy_target *out) {
    out->service = out->instance_id = out->version = out->zone = NULL;
    out->metadata = NULL;
    out->metadata_count = 0;
    out->health = NULL;
}

/* An error: out zeroed, the code returned. */
static int failed(sy_target *out, int rc) {
    memset(out, 0, sizeof *out);
    return rc;
}

int sy_match_target(const sy_match *m, const char *const *exclude,
                    size_t exclude_count, sy_target *out, sy_error *err) {
    if (!m || !out || (exclude_count && !exclude))
        return sy__error_set(err, SY_EINVAL, "", "NULL argument");
    sy__plan *p = sy__match_plan(m);
    if (m->plan_rc)
        return failed(out, sy__error_set(err, m->plan_rc, "", "%s",
                                         sy_strerror(m->plan_rc)));
    if (p->action != SY_ACTION_PROXY)
        return failed(out,
                      sy__error_set(err, SY_EINVAL, "",
                                    "route '%s' answers the request itself "
                                    "(status %d): it has no upstream target",
                                    m->route->id, p->status));
    /* every field of *out is set below, each once (no zeroing first) */
    sy__arena *scratch = &m->ctx->scratch;
    const struct sy_route *r = m->route; /* its upstream as
                                            sy_route_upstream reads it */
    sy_upstream_kind kind = (sy_upstream_kind)r->up_kind;
    out->kind = kind;
    out->path = p->path;
    out->query = p->query;
    sy_str kept_host = m->req->host; /* with PreserveHostHeader */
    if (headers_without_host(scratch, p, out, &kept_host))
        return failed(out, sy__error_set(err, SY_ENOMEM, "", "out of memory"));
    sy_str authority;
    if (kind == SY_UPSTREAM_URL) {
        out->scheme = sy__route_schemes[r->up_scheme];
        out->host = r->up_host;
        out->port = r->up_port;
        no_instance(out);
        authority = (sy_str){r->authority, strlen(r->authority)};
    } else if (kind == SY_UPSTREAM_SERVICE) {
        sy_selection sel;
        sy__pick pick;
        int rc =
            sy__select_for_match(m, exclude, exclude_count, &sel, &pick, err);
        if (rc)
            return failed(out, rc);
        out->scheme = sel.scheme;
        out->host = sel.host;
        out->port = sel.port;
        out->service = sel.service;
        out->instance_id = sel.id;
        out->version = pick.version;
        out->zone = pick.zone;
        out->metadata = pick.instance->metadata;
        out->metadata_count = pick.instance->metadata_count;
        out->health = pick.health;
        authority = (sy_str){pick.authority, pick.authority_len};
    } else { /* forward: / no://: path and query only */
        out->scheme = out->host = NULL;
        out->port = 0;
        no_instance(out);
        out->host_header = (sy_str){NULL, 0};
        return SY_OK;
    }
    out->host_header = p->preserve_host ? kept_host : authority;
    return SY_OK;
}
