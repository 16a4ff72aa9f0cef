"""mini-gateway end to end: forward: routes re-dispatched through the
gateway's own routes (headers and query of the forwarding route kept, its
response edits left off a proxied answer, loops bounded with
508), per-route CORS from the `cors` metadata (preflights answered by the
gateway, disallowed origins 403, headers on allowed answers) and
RewriteLocationResponseHeader, SecureHeaders, CacheRequestBody, and default
filters (--default-filters run
with every route's; a document's own default-filters refused)."""
import json
import urllib.parse

import gwharness as h


def body(procs, c):
    _, bport = procs.backend("b1")
    be = "http://127.0.0.1:%d" % bport
    routes = [
        {"id": "fwd", "uri": "forward:/new/x",
         "predicates": ["Path=/old/**"],
         "filters": ["AddRequestHeader=X-Fwd,yes",
                     "AddResponseHeader=X-Outer,1", "SetStatus=201"]},
        {"id": "new", "uri": be, "predicates": ["Path=/new/**"],
         "filters": ["AddResponseHeader=X-Inner,1"]},
        {"id": "loop", "uri": "forward:/loop", "predicates": ["Path=/loop"]},
        {"id": "to-noop", "uri": "forward:/noop/ok",
         "predicates": ["Path=/answer"]},
        {"id": "noop", "uri": "no://op", "predicates": ["Path=/noop/**"],
         "filters": ["SetStatus=202", "SetResponseHeader=X-Noop,yes"]},
        {"id": "cors", "uri": be, "predicates": ["Path=/cors/**"],
         "metadata": {"cors": {
             "allowedOrigins": "https://a.example",
             "allowedMethods": ["GET", "POST"],
             "allowedHeaders": "X-Token", "exposedHeaders": "X-Id",
             "maxAge": 30, "allowCredentials": True}}},
        {"id": "cors-get", "uri": be,
         "predicates": ["Path=/cg/**", "Method=GET"],
         "metadata": {"cors": {"allowedOriginPatterns": "https://*.example",
                               "allowedMethods": "*",
                               "allowedHeaders": "*"}}},
        {"id": "sec", "uri": be, "predicates": ["Path=/sec/**"],
         "filters": [{"name": "SecureHeaders",
                      "args": {"frameOptions": "SAMEORIGIN"}}]},
        # SCG's documented route form: disable, enable, permissions-policy
        {"id": "sec2", "uri": be, "predicates": ["Path=/sec2/**"],
         "filters": [{"name": "SecureHeaders", "args": {
             "disable": "x-frame-options,strict-transport-security",
             "enable": "permissions-policy",
             "permissions-policy": 'geolocation=("https://a.example")'}}]},
        {"id": "sec3", "uri": be, "predicates": ["Path=/sec3/**"],
         "filters": [{"name": "SecureHeaders", "args": {
             "enable": "permissions-policy",
             "referrer-policy": "same-origin"}}]},
        {"id": "rrp", "uri": be, "predicates": ["Path=/rrp/**"],
         "filters": ["RewriteRequestParameter=campaign,fall 2023"]},
        {"id": "cached-body", "uri": be, "predicates": ["Path=/cb/**"],
         "filters": ["CacheRequestBody=java.lang.String"]},
        {"id": "loc", "uri": be, "predicates": ["Path=/loc/**"],
         "filters": ["RewriteLocationResponseHeader=AS_IN_REQUEST,Location"]},
        {"id": "loc2", "uri": be, "predicates": ["Path=/v1/loc/**"],
         "filters": [{"name": "RewriteLocationResponseHeader",
                      "args": {"stripVersion": "NEVER_STRIP",
                               "hostValue": "api.example.com"}}]},
    ]
    f = procs.write_file("routes.json", json.dumps({"version": "1",
                                                    "routes": routes}))
    dflt = procs.write_file("default.json", json.dumps(
        ["AddResponseHeader=X-Default,1", "AddRequestHeader=X-Dreq,2"]))
    gw = procs.gateway("--routes", f, "--default-filters", dflt)

    # default filters run with every route's
    st, hd, data = gw.request("GET", "/new/a")
    c.eq((st, hd.get("x-default"), h.echoed_header(data, "X-Dreq")),
         (200, "1", "2"), "--default-filters: run on every route")
    doc = {"default-filters": ["AddResponseHeader=X-No,1"],
           "routes": [{"id": "d", "uri": be, "predicates": ["Path=/d"]}]}
    st, _, data = gw.admin_call("PUT", "/routes/other", doc)
    err = json.loads(data).get("error", {}) if st == 400 else {}
    c.eq((st, err.get("path")), (400, "default-filters"),
         "a document's own default-filters: refused, located")
    c.eq(gw.request("GET", "/d")[0], 404, "nothing of it went live")

    # forward: the answering route is "new", with the outer route's
    # request header, the client's query, and only its own response edits
    # on its proxied answer (SCG: the forwarding route's AddResponseHeader
    # runs after the inner dispatch wrote the answer, and skips a committed
    # response)
    st, hd, data = gw.request("GET", "/old/a?q=1")
    c.eq(st, 200, "forward: answered, the outer SetStatus left off")
    echo = json.loads(data)
    c.eq(echo["path"], "/new/x", "forward: the uri's path")
    c.eq(echo["query"], "q=1", "forward: the query kept")
    c.eq(h.echoed_header(data, "X-Fwd"), "yes", "forward: outer filters ran")
    c.eq((hd.get("x-inner"), hd.get("x-outer")), ("1", None),
         "forward: the answering route's response edits only")
    st, hd, data = gw.request("GET", "/loop")
    c.eq(st, 508, "forward loop: 508")
    st, hd, _ = gw.request("GET", "/answer")
    c.eq((st, hd.get("x-noop")), (202, "yes"), "forward to a no://op route")

    # CORS: preflight answered by the gateway
    pre = {"Origin": "https://a.example",
           "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "x-token"}
    st, hd, data = gw.request("OPTIONS", "/cors/x", headers=pre)
    c.eq(st, 200, "preflight: 200")
    c.eq(data, b"", "preflight: no body (not proxied)")
    c.eq(hd.get("access-control-allow-origin"), "https://a.example",
         "preflight: origin")
    c.eq(hd.get("access-control-allow-methods"), "GET, POST",
         "preflight: methods")
    c.eq(hd.get("access-control-allow-headers"), "x-token",
         "preflight: headers")
    c.eq(hd.get("access-control-max-age"), "30", "preflight: max age")
    c.eq(hd.get("access-control-allow-credentials"), "true",
         "preflight: credentials")
    bad = dict(pre, **{"Access-Control-Request-Headers": "x-other"})
    st, _, data = gw.request("OPTIONS", "/cors/x", headers=bad)
    c.eq((st, data), (403, b"Invalid CORS request"), "preflight: bad header")
    bad = dict(pre, **{"Access-Control-Request-Method": "DELETE"})
    st, _, _ = gw.request("OPTIONS", "/cors/x", headers=bad)
    c.eq(st, 403, "preflight: method not allowed")
    # actual requests
    st, hd, data = gw.request("GET", "/cors/x",
                              headers={"Origin": "https://a.example"})
    c.eq(st, 200, "cors GET proxied")
    c.eq(json.loads(data)["instance"], "b1", "cors GET reached the backend")
    c.eq(hd.get("access-control-allow-origin"), "https://a.example",
         "cors GET: allow origin")
    c.eq(hd.get("access-control-expose-headers"), "X-Id",
         "cors GET: exposed headers")
    st, _, data = gw.request("GET", "/cors/x",
                             headers={"Origin": "https://evil.example"})
    c.eq((st, data), (403, b"Invalid CORS request"), "cors: bad origin 403")
    st, hd, _ = gw.request("GET", "/cors/x")
    c.ok(st == 200 and "access-control-allow-origin" not in hd,
         "no Origin: not a CORS request")
    # a preflight on a GET-only route finds the route by the announced
    # method; origin by pattern, any method and header
    st, hd, data = gw.request("OPTIONS", "/cg/1", headers={
        "Origin": "https://b.example", "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "X-A, X-B"})
    c.eq((st, hd.get("access-control-allow-origin"),
          hd.get("access-control-allow-methods"),
          hd.get("access-control-allow-headers")),
         (200, "https://b.example", "GET", "X-A, X-B"),
         "preflight on a GET route, origin pattern")
    st, _, _ = gw.request("OPTIONS", "/cg/1", headers={
        "Origin": "https://b.other", "Access-Control-Request-Method": "GET"})
    c.eq(st, 403, "origin pattern refuses another domain")

    # a cors metadata the gateway cannot read is refused at apply, located
    typo = {"id": "ct2", "uri": be, "predicates": ["Path=/ct2"],
            "metadata": {"cors": {"allowedOrigns": "*"}}}
    st, _, data = gw.admin_call("PUT", "/routes/other/ct2", typo)
    err = json.loads(data).get("error", {}) if st == 400 else {}
    c.ok(st == 400 and err.get("path") == "route.metadata.cors" and
         "allowedOrigns" in err.get("message", ""),
         "an unreadable cors metadata refused at apply: %r" % (err,))
    st, _, data = gw.admin_call("PUT", "/routes/other", {"routes": [typo]})
    err = json.loads(data).get("error", {}) if st == 400 else {}
    c.eq((st, err.get("path")), (400, "routes[0].metadata.cors"),
         "in a whole document too")

    # SecureHeaders: SCG's defaults, one of them set by its arg
    st, hd, _ = gw.request("GET", "/sec/x")
    c.eq((hd.get("x-frame-options"), hd.get("x-content-type-options"),
          hd.get("strict-transport-security")),
         ("SAMEORIGIN", "nosniff", "max-age=631138519"), "SecureHeaders")
    bad = {"id": "sb", "uri": be, "predicates": ["Path=/sb"],
           "filters": [{"name": "SecureHeaders", "args": {"frameOption": "x"}}]}
    st, _, data = gw.admin_call("PUT", "/routes/other/sb", bad)
    err = json.loads(data).get("error", {}) if st == 400 else {}
    c.ok(st == 400 and
         err.get("path", "").endswith("filters[0].args.frameOption"),
         "SecureHeaders: an unknown arg refused, located: %r" % (err,))

    st, hd, _ = gw.request("GET", "/sec2/x")
    c.eq((st, hd.get("x-frame-options"), hd.get("strict-transport-security"),
          hd.get("x-content-type-options"), hd.get("permissions-policy")),
         (200, None, None, "nosniff", 'geolocation=("https://a.example")'),
         "SecureHeaders: the route's disable list, enable permissions-policy")
    st, hd, _ = gw.request("GET", "/sec3/x")
    c.ok(st == 200 and hd.get("x-frame-options") == "DENY" and
         hd.get("referrer-policy") == "same-origin" and
         hd.get("permissions-policy", "").startswith("accelerometer=(), ") and
         hd.get("permissions-policy", "").endswith("xr-spatial-tracking=()"),
         "SecureHeaders: a relaxed arg name, SCG's default Permissions-Policy"
         " (%r)" % (hd,))
    for args, where in [({"disable": "x-frame-option"}, "args.disable"),
                        ({"disable": "X-Frame-Options"}, "args.disable"),
                        ({"enable": "x-frame-options"}, "args.enable"),
                        ({"permissionsPolicy": "a=()"},
                         "args.permissionsPolicy"),
                        ({"disable": "x-frame-options",
                          "frameOptions": "DENY"}, "args.frameOptions")]:
        bad = {"id": "sb", "uri": be, "predicates": ["Path=/sb"],
               "filters": [{"name": "SecureHeaders", "args": args}]}
        st, _, data = gw.admin_call("PUT", "/routes/other/sb", bad)
        err = json.loads(data).get("error", {}) if st == 400 else {}
        c.ok(st == 400 and err.get("path", "").endswith(where),
             "SecureHeaders %r: refused at %s (%r)" % (args, where, err))

    # RewriteRequestParameter (the library's filter plan)
    st, _, data = gw.request("GET", "/rrp/x?campaign=old&q=1&campaign=x")
    c.eq((st, json.loads(data).get("query")), (200, "q=1&campaign=fall%202023"),
         "RewriteRequestParameter: one value, last, encoded")

    # CacheRequestBody: run (the body kept as for a retry), its arg checked
    # (LocalResponseCache: test_gateway_cache.py)
    st, _, data = gw.request("POST", "/cb/x", body=b"z" * 3000,
                             headers={"Content-Type": "text/plain"})
    c.eq((st, json.loads(data).get("body_bytes")), (200, 3000),
         "CacheRequestBody: the body goes upstream whole")
    for flt, where, says in [
            ("CacheRequestBody=java lang", "filters[0]", "Java class name")]:
        st, _, data = gw.admin_call("PUT", "/routes/other/lr", {
            "id": "lr", "uri": be, "predicates": ["Path=/lr"],
            "filters": [flt]})
        err = json.loads(data).get("error", {}) if st == 400 else {}
        c.ok(st == 400 and err.get("path", "").endswith(where) and
             says in err.get("message", ""),
             "%s: refused at apply, located: %r" % (flt, err))
    c.eq(gw.request("GET", "/lr")[0], 404, "nothing of them went live")

    # RewriteLocationResponseHeader
    loc = urllib.parse.quote("http://backend.internal:8080/v2/items/7", safe="")
    st, hd, _ = gw.request("GET", "/loc/x?location=" + loc,
                           headers={"Host": "shop.example"})
    c.eq(hd.get("location"), "http://shop.example/items/7",
         "Location: host and version rewritten (AS_IN_REQUEST)")
    st, hd, _ = gw.request("GET", "/v1/loc/x?location=" + loc)
    c.eq(hd.get("location"), "http://api.example.com/v2/items/7",
         "Location: hostValue, version kept (NEVER_STRIP)")
    nohost = urllib.parse.quote("http://backend.internal:8080", safe="")
    st, hd, _ = gw.request("GET", "/loc/x?location=" + nohost)
    c.eq(hd.get("location"), "http://backend.internal:8080",
         "Location without a path after the host: unchanged (as SCG)")
    forward_query(gw, c, be)
    cors_items(gw, c, be)


def cors_items(gw, c, be):
    """A cors list item the gateway would write into a header as it is, or
    compare with a request's: a line break in exposedHeaders became a
    header of the answer (X-Evil), one in an origin or a method never
    matched (every CORS request 403). Refused at apply, the key named."""
    crlf = "a\r\nX-Evil: 1"
    for i, (key, val) in enumerate([
            ("exposedHeaders", [crlf]), ("allowedHeaders", crlf),
            ("allowedMethods", ["GET\r\nX-Evil: 1"]),
            ("allowedMethods", "GET POST"),
            ("allowedOrigins", "https://a.example\r\nX-Evil: 1"),
            ("allowedOriginPatterns", "https://*.example x")]):
        cors = {"allowedOrigins": "*"}
        cors[key] = val
        r = {"id": "ci%d" % i, "uri": be, "predicates": ["Path=/ci%d" % i],
             "metadata": {"cors": cors}}
        st, _, out = gw.admin_call("PUT", "/routes/ci/ci%d" % i, r)
        err = json.loads(out).get("error", {}) if st == 400 else {}
        c.ok(st == 400 and err.get("path") == "route.metadata.cors" and
             key in err.get("message", ""),
             "cors %s %r is refused, named (%d %r)" % (key, val, st, out[:200]))


def forward_query(gw, c, be):
    """A forward: uri's or fallbackUri's path is dispatched again and sent
    upstream as written. Accepted before: a query or fragment (taken as
    part of the path, the client's query appended after it: "fq=1?q=9"),
    a space (the upstream answered 400 to the request line), a control or
    non-ASCII byte (sent raw), a bad %-escape, no leading '/' or an
    authority. Refused at the uri or the arg, the path named."""
    bad = ["/new/x?fq=1", "/new/x#top", "/new/a b", "/new/a\tb",
           "/new/\u00e9", "/new/%zz", "new/x", "//host/new/x"]
    cases = [({"id": "fq%d" % i, "uri": "forward:" + p,
               "predicates": ["Path=/fq%d/**" % i]}, "route.uri")
             for i, p in enumerate(bad)]
    cases += [
        ({"id": "cq", "uri": be, "predicates": ["Path=/cq/**"],
          "filters": [{"name": "CircuitBreaker", "args": {
              "fallbackUri": "forward:/new/y?cq=2"}}]},
         "route.filters[0].args.fallbackUri"),
        ({"id": "cb", "uri": be, "predicates": ["Path=/cb/**"],
          "filters": [{"name": "CircuitBreaker", "args": {
              "fallbackUri": "forward:/new/a b"}}]},
         "route.filters[0].args.fallbackUri"),
        ({"id": "cs", "uri": be, "predicates": ["Path=/cs/**"],
          "filters": ["CircuitBreaker=cs, forward:/new/y?cq=2"]},
         "route.filters[0]"),
    ]
    for route, where in cases:
        st, _, out = gw.admin_call("PUT", "/routes/fq/" + route["id"], route)
        err = json.loads(out).get("error", {}) if st == 400 else {}
        c.ok(st == 400 and err.get("path") == where and
             "forward:" in err.get("message", ""),
             "%s: %r is refused at %s (%d %r)"
             % (route["id"], route["uri"], where, st, out[:300]))
    for i in range(len(bad)):
        c.eq(gw.request("GET", "/fq%d/a?q=9" % i)[0], 404,
             "and no route fq%d serves" % i)


h.run("gateway_forward", body)
