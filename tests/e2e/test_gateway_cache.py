"""mini-gateway end to end: LocalResponseCache (cache.c), as SCG runs it.
A GET 200 (or 301, 206, as SCG) of a route with the filter is kept per
route and worker (its status too) and answered from there for the same
host, path, query (a backend that echoes a per-request header shows
which answer came back); an answer kept gets
Cache-Control max-age (one not kept goes out as it is); not kept: other
statuses, a POST, a request with Cache-Control no-store, an answer with
Cache-Control private, a body larger than `size`; a request with no-cache
for a kept answer gets 304 without a body; past timeToLive the upstream
answers again; bad args are refused at apply with their path. Vary as
SCG's ResponseCacheManager: an answer with Vary: Accept-Language is kept
per value of the request's Accept-Language (another value, or none, goes
upstream; each value's answer served to that value); Vary: * is not
kept."""
import json
import time

import gwharness as h


def body(procs, c):
    _, bport = procs.backend("b1")
    be = "http://127.0.0.1:%d" % bport
    routes = [
        {"id": "c", "uri": be, "predicates": ["Path=/c/**"],
         "filters": ["LocalResponseCache=2s,10KB"]},
        {"id": "priv", "uri": be, "predicates": ["Path=/priv/**"],
         "filters": [{"name": "LocalResponseCache",
                      "args": {"timeToLive": "30s"}},
                     "SetResponseHeader=Cache-Control,private"]},
        {"id": "plain", "uri": be, "predicates": ["Path=/plain/**"]},
        {"id": "v", "uri": be, "predicates": ["Path=/v/**"],
         "filters": ["LocalResponseCache=30s,10KB",
                     "SetResponseHeader=Vary,Accept-Language"]},
        {"id": "vstar", "uri": be, "predicates": ["Path=/vstar/**"],
         "filters": ["LocalResponseCache=30s,10KB",
                     "SetResponseHeader=Vary,*"]},
    ]
    f = procs.write_file("routes.json", json.dumps({"version": "1",
                                                    "routes": routes}))
    gw = procs.gateway("--routes", f)
    n = [0]

    def get(path, method="GET", headers=None):
        n[0] += 1
        hd = {"X-N": str(n[0])}
        hd.update(headers or {})
        st, rh, data = gw.request(method, path, headers=hd)
        seen = h.echoed_header(data, "X-N") if st != 304 else None
        return st, rh, data, seen

    st, hd, _, seen = get("/c/a")
    c.eq((st, seen, hd.get("cache-control")), (200, "1", "max-age=2"),
         "first GET: upstream, max-age")
    st, hd, _, seen = get("/c/a")
    c.eq((st, seen), (200, "1"), "second GET: the kept answer")
    c.ok(hd.get("cache-control", "").startswith("max-age="),
         "a kept answer: max-age %r" % hd.get("cache-control"))
    c.eq(get("/c/a?x=1")[3], "3", "another query: upstream")
    st, _, data, _ = get("/c/a", headers={"Cache-Control": "no-cache"})
    c.eq((st, data), (304, b""), "no-cache for a kept answer: 304, no body")
    c.eq(get("/c/a", method="POST")[3], "5", "POST: upstream")
    c.eq(get("/c/b", headers={"Cache-Control": "no-store"})[3], "6",
         "request no-store: upstream")
    c.eq(get("/c/b")[3], "7", "... and not kept")
    c.eq(get("/c/b")[3], "7", "the next one is")
    c.eq([get("/c/s?status=503")[3] for _ in range(2)], ["9", "10"],
         "503: not kept")
    c.eq(get("/c/s?status=503")[1].get("cache-control"), None,
         "503: no max-age")
    m = [get("/c/m?status=301&location=/elsewhere") for _ in range(2)]
    c.eq([(p[0], p[3], p[1].get("location")) for p in m],
         [(301, "12", "/elsewhere"), (301, "12", "/elsewhere")],
         "301 is kept (as SCG: 200, 206, 301), its status and Location")
    big = [get("/c/big?size=20000") for _ in range(2)]
    c.eq([(p[3], p[1].get("cache-control")) for p in big],
         [("14", None), ("15", None)],
         "a body larger than size (its Content-Length): not kept, and no "
         "max-age that would have a client or CDN keep it")
    pv = [get("/priv/x") for _ in range(2)]
    c.eq([(p[3], p[1].get("cache-control")) for p in pv],
         [("16", "private"), ("17", "private")],
         "answer Cache-Control private: not kept, sent as it is")
    c.eq([get("/plain/x")[1].get("cache-control") for _ in range(1)], [None],
         "a route without the filter: no max-age")
    time.sleep(2.2)
    c.eq(get("/c/a")[3], "19", "past timeToLive: upstream again")

    def lang(v):
        return get("/v/x", headers={"Accept-Language": v} if v else None)[3]
    c.eq([lang("en"), lang("en")], ["20", "20"],
         "Vary: Accept-Language: the answer kept for 'en'")
    c.eq([lang("de"), lang("de")], ["22", "22"],
         "another value goes upstream, its answer kept for it")
    c.eq([lang("en"), lang("de")], ["20", "22"],
         "each value gets its own answer")
    c.eq([lang(None), lang(None)], ["26", "26"],
         "a request without the header: its own answer")
    vs = [get("/vstar/x") for _ in range(2)]
    c.eq([(p[3], p[1].get("cache-control")) for p in vs],
         [("28", None), ("29", None)], "Vary: *: not kept, no max-age")

    for flt, where, says in [
            ("LocalResponseCache=abc", "filters[0]", "must be a duration"),
            ("LocalResponseCache=1m,-5MB", "filters[0]", "must be a size"),
            ({"name": "LocalResponseCache", "args": {"sizes": "1MB"}},
             "filters[0].args.sizes", "unknown argument")]:
        st, _, data = gw.admin_call("PUT", "/routes/other/lr", {
            "id": "lr", "uri": be, "predicates": ["Path=/lr"],
            "filters": [flt]})
        err = json.loads(data).get("error", {}) if st == 400 else {}
        c.ok(st == 400 and err.get("path", "").endswith(where) and
             says in err.get("message", ""),
             "%r refused at apply, located: %r" % (flt, err))


h.run("gateway_cache", body)
