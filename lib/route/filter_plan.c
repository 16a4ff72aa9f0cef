/*
 * filter_plan.c - computing the filter plan of a matched request: the
 * chain of default and route filters as SCG orders them, each filter
 * dispatched to its edit of the working copy of the request (path and
 * query: filter_path.c, filter_query.c; header list: filter_headers.c),
 * and the response side kept here: response header operations, status,
 * redirect, short-circuit answers and the entries the host runs.
 * Everything it builds lives in the scratch arena.
 */
#include "route/filter_plan_int.h"

#include <stdio.h>

/* host_add past the plan's first four host filters: into the arena. */
static __attribute__((noinline)) bool host_grow(sy__run *r,
                                                const sy_filter_entry *e) {
    sy__plan *p = r->plan;
    void *arr = (void *)p->host_filters;
    if (!sy__plan_grow(r->ar, &arr, &p->host_filter_cap, p->host_filter_count,
                       sizeof(const sy_filter_entry *)))
        return false;
    p->host_filters = arr;
    p->host_filters[p->host_filter_count++] = e;
    return true;
}

/* One more entry the host runs; the first four in the plan itself (a
 * route's usual policy or two: two stores, no call). */
static inline bool host_add(sy__run *r, const sy_filter_entry *e) {
    sy__plan *p = r->plan;
    size_t n = p->host_filter_count;
    if (n < sizeof p->host_local / sizeof *p->host_local) {
        p->host_filters = p->host_local;
        p->host_filter_cap = sizeof p->host_local / sizeof *p->host_local;
        p->host_local[n] = e;
        p->host_filter_count = n + 1;
        return true;
    }
    return host_grow(r, e);
}

/* The built-ins whose state the library keeps and the host asks about
 * (policy/): in the plan as host entries, nothing else (apply's
 * default). */
static inline bool is_policy(sy__builtin id) {
    return id == SY_F_CIRCUIT_BREAKER || id == SY_F_REQUEST_RATE_LIMITER ||
           id == SY_F_RETRY;
}

/* ---- the response side ---- */

static bool redirect_to(sy__run *r, const sy__filter *f) {
    sy_str url = f->value, q = r->req->query;
    if (!f->flag || q.len == 0) {
        r->plan->redirect = url;
        return true;
    }
    /* the request's query goes before any #fragment of the url */
    const char *hash = memchr(url.ptr, '#', url.len);
    size_t head = hash ? (size_t)(hash - url.ptr) : url.len;
    const char *qm = memchr(url.ptr, '?', head);
    sy_str sep = sy__plan_cstr("?");
    if (qm)
        sep =
            (head > 0 && (url.ptr[head - 1] == '?' || url.ptr[head - 1] == '&'))
                ? SY_PLAN_EMPTY
                : sy__plan_cstr("&");
    size_t len;
    char *buf = sy__plan_concat(r->ar, (sy_str){url.ptr, head}, sep, q,
                                (sy_str){url.ptr + head, url.len - head}, &len);
    if (!buf)
        return false;
    r->plan->redirect = (sy_str){buf, len};
    return true;
}

/* SCG's getReadableByteCount: 1000-based, one decimal. */
static int readable_bytes(char *dst, size_t cap, int64_t bytes) {
    static const char prefix[] = "kMGTPE";
    if (bytes < 1000)
        return snprintf(dst, cap, "%lld B", (long long)bytes);
    int exp = 0;
    double v = (double)bytes;
    while (v >= 1000.0 && exp < 6) {
        v /= 1000.0;
        exp++;
    }
    return snprintf(dst, cap, "%.1f %cB", v, prefix[exp - 1]);
}

static bool request_size(sy__run *r, const sy__filter *f) {
    int64_t cl = r->req->content_length;
    if (cl < 0 || cl <= f->size)
        return true;
    char a[32], b[32], text[160];
    readable_bytes(a, sizeof a, cl);
    readable_bytes(b, sizeof b, f->size);
    int n = snprintf(text, sizeof text,
                     "Request size is larger than permissible limit. Request "
                     "size is %s where permissible limit is %s",
                     a, b);
    size_t len = n < 0                      ? 0
                 : (size_t)n >= sizeof text ? sizeof text - 1
                                            : (size_t)n;
    char *msg = sy__arena_strndup(r->ar, text, len);
    if (!msg)
        return false;
    sy__plan_respond(r, SY_ACTION_RESPOND, 413);
    return sy__plan_resp_add(r, SY_RESP_ADD,
                             sy__plan_cstr(SY_FILTER_ERROR_HEADER),
                             (sy_str){msg, len}, SY_PLAN_EMPTY);
}

/* Apply one filter. Returns 0 or SY_ENOMEM. */
static int apply(sy__run *r, const sy__filter *f) {
    sy__plan *p = r->plan;
    sy_str v;
    bool ok = true;
    switch (f->id) {
    case SY_F_ADD_REQUEST_HEADER:
        ok =
            sy__plan_expand(r, f->value, &v) && sy__plan_hdr_add(r, f->name, v);
        break;
    case SY_F_ADD_REQUEST_HEADERS_IF_NOT_PRESENT:
        ok = sy__plan_headers_if_not_present(r, f);
        break;
    case SY_F_ADD_REQUEST_PARAMETER: ok = sy__plan_add_param(r, f); break;
    case SY_F_ADD_RESPONSE_HEADER:
        ok = sy__plan_expand(r, f->value, &v) &&
             sy__plan_resp_add(r, f->flag ? SY_RESP_ADD : SY_RESP_ADD_IF_ABSENT,
                               f->name, v, SY_PLAN_EMPTY);
        break;
    case SY_F_DEDUPE_RESPONSE_HEADER:
        ok = sy__plan_resp_add(r, SY_RESP_DEDUPE, f->name, SY_PLAN_EMPTY,
                               f->arg);
        break;
    case SY_F_MAP_REQUEST_HEADER: ok = sy__plan_map_header(r, f); break;
    case SY_F_PREFIX_PATH: ok = sy__plan_prefix_path(r, f); break;
    case SY_F_PRESERVE_HOST_HEADER: p->preserve_host = true; break;
    case SY_F_REDIRECT_TO:
        if (sy__plan_short_circuited(r))
            break;
        ok = redirect_to(r, f);
        if (ok)
            sy__plan_respond(r, SY_ACTION_REDIRECT, f->status);
        break;
    case SY_F_REMOVE_REQUEST_HEADER: sy__plan_hdr_remove(p, f->name, 0); break;
    case SY_F_REMOVE_RESPONSE_HEADER:
        ok = sy__plan_resp_add(r, SY_RESP_REMOVE, f->name, SY_PLAN_EMPTY,
                               SY_PLAN_EMPTY);
        break;
    case SY_F_REMOVE_REQUEST_PARAMETER:
        ok = sy__plan_remove_param(r, f->name, NULL);
        break;
    case SY_F_REWRITE_REQUEST_PARAMETER:
        ok = sy__plan_remove_param(r, f->name, &f->value);
        break;
    case SY_F_REQUEST_HEADER_SIZE:
        if (!sy__plan_short_circuited(r))
            ok = sy__plan_header_size(r, f);
        break;
    case SY_F_REQUEST_SIZE:
        if (!sy__plan_short_circuited(r))
            ok = request_size(r, f);
        break;
    case SY_F_REWRITE_PATH: return sy__plan_rewrite_path(r, f);
    case SY_F_REWRITE_LOCATION_RESPONSE_HEADER:
        ok = sy__plan_resp_add(r, SY_RESP_REWRITE_LOCATION, f->name, f->value,
                               f->arg) &&
             host_add(r, &f->entry);
        break;
    case SY_F_REWRITE_RESPONSE_HEADER:
        ok = sy__plan_resp_add(r, SY_RESP_REWRITE, f->name, f->value, f->arg);
        break;
    case SY_F_SET_PATH: ok = sy__plan_set_path(r, f); break;
    case SY_F_SET_REQUEST_HEADER:
        ok =
            sy__plan_expand(r, f->value, &v) && sy__plan_hdr_set(r, f->name, v);
        break;
    case SY_F_SET_RESPONSE_HEADER:
        ok = sy__plan_expand(r, f->value, &v) &&
             sy__plan_resp_add(r, SY_RESP_SET, f->name, v, SY_PLAN_EMPTY);
        break;
    case SY_F_SET_REQUEST_HOST_HEADER:
        /* SCG: remove Host, add the new one, keep it upstream */
        ok = sy__plan_expand(r, f->value, &v);
        if (ok) {
            sy__plan_hdr_remove(p, sy__plan_cstr("Host"), 0);
            ok = sy__plan_hdr_add(r, sy__plan_cstr("Host"), v);
            p->preserve_host = true;
        }
        break;
    case SY_F_SET_STATUS:
        if (!sy__plan_short_circuited(r))
            p->status = f->status;
        break;
    case SY_F_STRIP_PREFIX: ok = sy__plan_strip_prefix(r, f->size); break;
    default: /* stateful built-ins and host filters */
        ok = host_add(r, &f->entry);
        break;
    }
    return ok ? 0 : SY_ENOMEM;
}

/*
 * The chain as SCG builds it (RouteDefinitionRouteLocator.getFilters):
 * each list numbered from 1 in its own order, both stably sorted together
 * by that number, defaults first on ties - default 1, route 1, default 2,
 * route 2, ... NULL entries (a compiler that produced nothing) keep their
 * number and are skipped.
 */
int sy__plan_compute(sy__plan *plan, const sy__filter *const *defaults,
                     size_t default_count, const sy__filter *const *filters,
                     size_t filter_count, const sy_request *req,
                     const sy__capture *vars, size_t var_count,
                     pcre2_match_data *md, sy__arena *scratch) {
    /* every field but host_local (read only below host_filter_count, once
     * host_add pointed host_filters at it), each stored once */
    plan->action = SY_ACTION_PROXY;
    plan->status = 0;
    plan->redirect = (sy_str){NULL, 0};
    plan->path = req->path.ptr ? req->path : SY_PLAN_EMPTY;
    plan->query = req->query.ptr ? req->query : SY_PLAN_EMPTY;
    plan->preserve_host = false;
    plan->headers = NULL;
    plan->header_count = plan->header_cap = 0;
    plan->resp = NULL;
    plan->resp_count = plan->resp_cap = 0;
    plan->host_filters = NULL;
    plan->host_filter_count = plan->host_filter_cap = 0;
    size_t hn = req->header_count;
    if (hn) {
        size_t cap = hn + 8;
        sy_header *h = sy__arena_alloc(scratch, cap * sizeof(sy_header));
        if (!h)
            return SY_ENOMEM;
        if (hn <= 4) /* (a call costs more than a few copies) */
            for (size_t i = 0; i < hn; i++)
                h[i] = req->headers[i];
        else
            memcpy(h, req->headers, hn * sizeof(sy_header));
        plan->headers = h;
        plan->header_count = hn;
        plan->header_cap = cap;
    }
    sy__run r = {plan, req, vars, var_count, md, scratch, false};
    size_t n = default_count > filter_count ? default_count : filter_count;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (i < default_count && defaults[i])
            rc = apply(&r, defaults[i]);
        const sy__filter *f = i < filter_count ? filters[i] : NULL;
        if (rc || !f)
            continue;
        /* a proxied route's usual filters without the dispatch */
        if (f->id == SY_F_STRIP_PREFIX)
            rc = sy__plan_strip_prefix(&r, f->size) ? 0 : SY_ENOMEM;
        else if (is_policy(f->id))
            rc = host_add(&r, &f->entry) ? 0 : SY_ENOMEM;
        else
            rc = apply(&r, f);
    }
    return rc;
}
