/*
 * select.c - instance selection for a matched lb:// route: the route's
 * selection settings (read from its metadata at compile: version-header,
 * version-fallback, lb-policy, lb-hash-header, lb-hash-cookie, lb-zone) and
 * the request's headers go to the service module (service.c), which
 * chooses. Lock-free, no allocation.
 */
#include "request/select.h"
#include "service/service.h"

/* A present header's value: an empty one may come as {NULL, 0} (the
 * Python bindings' spelling) or as a pointer into the host's buffer; both
 * are "present, empty", never "absent" (ptr NULL means absent below). */
static sy_str present(sy_str v) {
    return v.ptr ? v : (sy_str){"", 0};
}

/* First value of a request header (case-insensitive name of `len`
 * bytes), or ptr NULL. */
static sy_str header_value(const sy_request *req, const char *name,
                           size_t len) {
    for (size_t i = 0; i < req->header_count; i++)
        if (req->headers[i].name.len == len && /* (no call for most) */
            sy__str_ieq(req->headers[i].name, name, len))
            return present(req->headers[i].value);
    return (sy_str){NULL, 0};
}

/* The value of cookie `name` in the request's Cookie headers. */
static sy_str cookie_value(const sy_request *req, const char *name) {
    size_t nlen = strlen(name);
    for (size_t i = 0; i < req->header_count; i++) {
        if (!sy__str_ieq(req->headers[i].name, "cookie", 6))
            continue;
        const char *p = req->headers[i].value.ptr;
        const char *end = p + req->headers[i].value.len;
        while (p < end) {
            while (p < end && (*p == ' ' || *p == ';'))
                p++;
            const char *eq = p;
            while (eq < end && *eq != '=' && *eq != ';')
                eq++;
            const char *v = eq < end && *eq == '=' ? eq + 1 : eq;
            const char *ve = v;
            while (ve < end && *ve != ';')
                ve++;
            if ((size_t)(eq - p) == nlen && memcmp(p, name, nlen) == 0)
                return (sy_str){v, (size_t)(ve - v)};
            p = ve;
        }
    }
    return (sy_str){NULL, 0};
}

static sy_str cstr(const char *s) {
    return s ? (sy_str){s, strlen(s)} : (sy_str){NULL, 0};
}

#define HINT_HEADER "X-SC-LB-Hint"
#define HINT_LEN (sizeof HINT_HEADER - 1)

/* The first values of the version header (sel's name) and of the hint
 * header, in one pass over the request's headers (ptr NULL: none). */
static void selection_headers(const sy_request *req,
                              const sy__route_select *sel, sy_str *version,
                              sy_str *hint) {
    size_t vlen = sel->version_header_len;
    bool v = false, h = false;
    *version = *hint = (sy_str){NULL, 0};
    for (size_t i = 0; i < req->header_count && !(v && h); i++) {
        sy_str n = req->headers[i].name;
        if (!v && n.len == vlen && sy__str_ieq(n, sel->version_header, vlen)) {
            *version = present(req->headers[i].value);
            v = true;
        }
        if (!h && n.len == HINT_LEN && sy__str_ieq(n, HINT_HEADER, HINT_LEN)) {
            *hint = req->headers[i].value;
            h = true;
        }
    }
}

/* The route's settings and the request's headers as selection input,
 * with the exclude list and the snapshot's clock (every field of *p). */
static void params_of(const struct sy_route *r, const sy_request *req,
                      const sy_snapshot *s, const char *const *exclude,
                      size_t exclude_count, sy__select_params *p) {
    const sy__route_select *sel = sy__route_select_of(r);
    sy_str version, hint;
    selection_headers(req, sel, &version, &hint);
    bool has_version = version.ptr != NULL;
    /* untagged traffic: metadata version-default (the latest unless set) */
    if (!has_version && sel->untagged == SY_UNTAGGED_PINNED) {
        has_version = true;
        version = cstr(sel->default_version);
    }
    sy_str hash_key = {NULL, 0};
    if (sel->hash_header)
        hash_key =
            header_value(req, sel->hash_header, strlen(sel->hash_header));
    else if (sel->hash_cookie)
        hash_key = cookie_value(req, sel->hash_cookie);
    /* each field stored once, no zeroing first (a field added to
     * sy__select_params must be set here) */
    p->has_version = has_version;
    p->version = version;
    p->fallback = (sy__version_fallback)sel->fallback;
    p->hint = hint;
    p->zone = cstr(sel->zone);
    p->policy = (sy__lb_policy)sel->policy;
    p->hash_key = hash_key;
    p->seed = req->seed;
    p->websocket = sel->websocket;
    p->untagged_oldest = sel->untagged == SY_UNTAGGED_OLDEST;
    p->exclude = exclude;
    p->exclude_count = exclude_count;
    p->clock_ms = s->clock_ms;
    p->clock_data = s->clock_data;
}

/* The service `name` (a route's uri string) in snapshot s, through the
 * context's table: looked up by name the first time a context meets
 * that route's name in that snapshot, read from the table after. */
static const struct sy__service *
route_service(sy_match_ctx *c, const sy_snapshot *s, const char *name) {
    size_t k = (size_t)(((uint64_t)(uintptr_t)name * 0x9E3779B97F4A7C15ull) >>
                        59); /* the top 5 bits: SY_MATCH_SERVICES */
    if (c->services[k].serial == s->serial && c->services[k].name == name)
        return c->services[k].svc;
    const struct sy__service *svc = sy__snapshot_service(s, name, strlen(name));
    c->services[k].serial = s->serial;
    c->services[k].name = name;
    c->services[k].svc = svc;
    return svc;
}

int sy__select_for_match(const sy_match *m, const char *const *exclude,
                         size_t exclude_count, sy_selection *out,
                         sy__pick *pick, sy_error *err) {
    const sy_snapshot *s = m->snap;
    const struct sy_route *r = m->route;
    if (r->up_kind != SY_UPSTREAM_SERVICE)
        return sy__error_set(err, SY_EINVAL, "",
                             "route '%s' is not an lb:// route", r->id);
    const char *name = r->up_host;
    const struct sy__service *svc = route_service(m->ctx, s, name);
    if (!svc)
        return sy__error_set(err, SY_ENOINSTANCE, "",
                             "service '%s' has no known instances", name);
    sy__select_params p;
    params_of(r, m->req, s, exclude, exclude_count, &p);
    /* seed 0: the router's random callback or the context's generator,
     * as for Weight draws (never the constant 0) */
    if (!p.seed && p.policy == SY_LB_RANDOM)
        p.seed = sy__match_draw_seed(m);
    return sy__service_select_ex(svc, &p, out, pick, err);
}

int sy_snapshot_select(const sy_snapshot *h, sy_match_ctx *ctx,
                       const sy_match *m, const sy_request *req,
                       sy_selection *out, sy_error *err) {
    SY_UNUSED(ctx);
    if (!h || !m || !req || !out)
        return sy__error_set(err, SY_EINVAL, "", "NULL argument");
    return sy__select_for_match(m, NULL, 0, out, NULL, err);
}
