"""mini-gateway end to end: an SCG team's application.yml, converted with
`switchyard convert` and served, each route checked against what Spring
Cloud Gateway's reference documentation (docs.spring.io/spring-cloud-gateway,
"GatewayFilter Factories" / "Route Predicate Factories" pages, cited by
page name below) and its factory tests say it does: the path, query and
headers the backend sees (the test backend echoes them), the response
headers and the status. Also SCG's actuator API as a team's scripts call
it ("Actuator API" page).

Arguments: the mini-gateway binary, the switchyard CLI.
"""
import json
import os
import subprocess
import sys

import gwharness as h

HERE = os.path.dirname(os.path.abspath(__file__))
YML = os.path.join(HERE, "data", "scg_trial_application.yml")


def echo(data):
    return json.loads(data)


def body(procs, c):
    cli = os.path.abspath(sys.argv[2])
    _, bport = procs.backend("b1")
    _, gport = procs.backend("g1")
    env = dict(os.environ, BACKEND_PORT=str(bport))
    env.pop("SPRING_PROFILES_ACTIVE", None)
    r = subprocess.run([cli, "convert", YML], capture_output=True, env=env,
                       timeout=20)
    err = r.stderr.decode()
    c.eq(r.returncode, 0, "convert exits 0 (%s)" % err)
    # Spring Boot: spring.profiles.active (a map under spring.profiles)
    # activates 'prod'; the document is for every profile, and the prod
    # document's backend.url overrides the first one's.
    c.ok("document 1 is for profile" not in err,
         "spring.profiles.active is not read as the document's profile "
         "(%s)" % err)
    c.ok("not converted" not in err,
         "every setting of the file converted (%s)" % err)
    # Spring Boot's relaxed binding: SPRING_CLOUD_GATEWAY_ROUTES_0_URI binds
    # spring.cloud.gateway.routes[0].uri, and a list the environment names
    # is bound from the environment alone ("Binding from Environment
    # Variables", Spring Boot reference). Never left unread while the
    # files' routes are served: refused, naming the variable.
    bad = dict(env, SPRING_CLOUD_GATEWAY_ROUTES_0_URI="http://other:1")
    rb = subprocess.run([cli, "convert", YML], capture_output=True, env=bad,
                        timeout=20)
    c.ok(rb.returncode == 1 and not rb.stdout and
         b"environment: SPRING_CLOUD_GATEWAY_ROUTES_0_URI:" in rb.stderr,
         "an environment override of the routes is refused (%r)"
         % rb.stderr[-300:])

    def refused(name, old, new, what):
        with open(YML) as f:
            text = f.read().replace(old, new)
        path = procs.write_file(name, text)
        rd = subprocess.run([cli, "convert", path], capture_output=True,
                            env=env, timeout=20)
        c.ok(rd.returncode == 1 and (path + ":").encode() in rd.stderr and
             what.encode() in rd.stderr,
             "%s is refused, located (%r)" % (what, rd.stderr[-300:]))

    # secure-headers.disable (same page) is not a setting switchyard's
    # SecureHeaders has: refused with its place, never left unread.
    refused("disable.yml", "frame-options: SAMEORIGIN",
            "frame-options: SAMEORIGIN\n          disable: x-frame-options",
            "secure-headers.disable")
    # a list where SCG binds one value is no value: refused, not skipped
    refused("shape.yml", "frame-options: SAMEORIGIN",
            "frame-options: [SAMEORIGIN]",
            "secure-headers.frame-options: expected a value")
    # SetStatus page: set-status.original-status-header-name adds the
    # proxied status as a header, which switchyard's SetStatus does not.
    refused("setstatus.yml", "      filter:\n",
            "      set-status:\n        original-status-header-name: "
            "original-http-status\n      filter:\n",
            "set-status.original-status-header-name")
    # Settings that make SCG's routes do something no route field carries,
    # warned about ("not converted") and then not done by the gateway:
    # the discovery locator's route per service, RedisRateLimiter's
    # headers left off or renamed, X-Forwarded-* headers left off (with
    # trusted-proxies set, without which SCG sends none).
    for name, new, what in [
            ("discovery.yml", "      discovery:\n        locator:\n"
             "          enabled: true\n", "discovery.locator.enabled"),
            ("rlheaders.yml", "      redis-rate-limiter:\n"
             "        include-headers: false\n",
             "redis-rate-limiter.include-headers"),
            ("rlname.yml", "      redis-rate-limiter:\n"
             "        remaining-header: X-Left\n",
             "redis-rate-limiter.remaining-header"),
            ("xfwd.yml", "      trusted-proxies: '10\\..*'\n"
             "      x-forwarded:\n        enabled: false\n",
             "x-forwarded.enabled")]:
        refused(name, "      filter:\n", new + "      filter:\n", what)
    routes = procs.write_file("routes.json", r.stdout.decode())
    inst = procs.write_file("instances.json", json.dumps(
        {"services": {"greeter": [
            {"id": "g1", "host": "127.0.0.1", "port": gport}]}}))
    gw = procs.gateway("--routes", routes, "--instances", inst)

    def get(path, headers=None, method="GET", data=None):
        return gw.request(method, path, data, headers)

    # CORS Configuration page: globalcors' '[/**]' allows CORS requests
    # from docs.spring.io for GET on every path (a preflight answered by
    # the gateway; another origin or method refused).
    pre = {"Origin": "https://docs.spring.io",
           "Access-Control-Request-Method": "GET"}
    st, hd, _ = get("/name/blue/red", pre, method="OPTIONS")
    c.eq((st, hd.get("access-control-allow-origin")),
         (200, "https://docs.spring.io"), "globalcors: preflight answered")
    c.eq(get("/name/blue/red", dict(pre, **{
        "Access-Control-Request-Method": "POST"}), method="OPTIONS")[0], 403,
         "globalcors: a method not allowed")
    c.eq(get("/name/blue/red", {"Origin": "https://evil.example"})[0], 403,
         "globalcors: an origin not allowed")
    st, hd, _ = get("/name/blue/red", {"Origin": "https://docs.spring.io"})
    c.eq((st, hd.get("access-control-allow-origin")),
         (200, "https://docs.spring.io"), "globalcors: an allowed GET")
    refused("cors.yml", "          '[/**]':", "          '[/api/**]':",
            "cors-configurations./api/**: a CORS configuration of some")

    # StripPrefix page: /name/blue/red is sent as /red. default-filters
    # (Default Filters page) add their header to every route's answer.
    st, hd, data = get("/name/blue/red")
    c.eq((st, echo(data)["path"]), (200, "/red"), "StripPrefix=2")
    c.eq(hd.get("x-response-default-red"), "Default-Blue",
         "default-filters' AddResponseHeader (from the prod profile's uri)")

    # PrefixPath page: /hello is sent as /mypath/hello.
    st, _, data = get("/pp/x?a=b")
    c.eq((echo(data)["path"], echo(data)["query"]), ("/mypath/pp/x", "a=b"),
         "PrefixPath (expanded args)")

    # RewritePath page: /red/blue is sent as /blue.
    c.eq(echo(get("/red/blue")[2])["path"], "/blue", "RewritePath")

    # SetPath page (/red/blue -> /blue), AddRequestHeader and
    # AddRequestParameter pages (URI variables in the value).
    d = echo(get("/sp/x")[2])
    c.eq((d["path"], d["query"]), ("/x", "foo=bar-x"),
         "SetPath and AddRequestParameter with {segment}")
    c.eq(h.echoed_header(get("/sp/x")[2], "X-Request-Red"), "Blue-x",
         "AddRequestHeader with {segment}")
    # A decoded variable with a space: SCG's UriTemplate encodes the path
    # and java.net.URI the added parameter; never a raw space in the
    # upstream request line (the backend answered 400 before the fix).
    st, _, data = get("/sp/a%20b")
    c.eq(st, 200, "a variable with a space reaches the backend")
    if st == 200:
        c.eq((echo(data)["path"], echo(data)["query"]),
             ("/a%20b", "foo=bar-a%20b"), "path and parameter encoded")

    # AddRequestHeadersIfNotPresent, MapRequestHeader, SetRequestHeader,
    # RemoveRequestHeader, RemoveRequestParameter, SetResponseHeader pages.
    st, hd, data = get("/hdr/a?red=1&blue=2", {
        "Blue": "b1", "X-Request-Red": "r0", "X-Request-Color-1": "mine",
        "X-Request-Foo": "f", "X-Request-Set": "old"})
    d = echo(data)
    seen = [(k.lower(), v) for k, v in d["headers"]]
    c.eq(d["query"], "blue=2", "RemoveRequestParameter=red")
    c.ok(("x-request-color-1", "mine") in seen and
         ("x-request-color-1", "blue") not in seen and
         ("x-request-color-2", "green") in seen,
         "AddRequestHeadersIfNotPresent adds only the missing header")
    c.eq(sorted(v for k, v in seen if k == "x-request-red"), ["b1", "r0"],
         "MapRequestHeader augments X-Request-Red with Blue's value")
    c.eq([v for k, v in seen if k == "x-request-set"], ["Blue"],
         "SetRequestHeader replaces")
    c.ok("x-request-foo" not in dict(seen), "RemoveRequestHeader")
    c.eq(hd.get("x-response-red"), "Blue", "SetResponseHeader")

    # RedirectTo page: 302 to https://acme.org, the request's query kept
    # with includeRequestParams=true.
    st, hd, _ = get("/redir/x?a=1")
    c.eq((st, hd.get("location")), (302, "https://acme.org?a=1"),
         "RedirectTo=302, https://acme.org, true")

    # SetStatus page: UNAUTHORIZED is 401.
    c.eq(get("/status/x")[0], 401, "SetStatus=UNAUTHORIZED")

    # Query, Cookie, Header, Host predicate pages.
    c.eq(get("/q/x?green")[0], 200, "Query=green matches with the param")
    c.eq(get("/q/x")[0], 404, "Query=green: no route without it")
    c.eq(get("/c/x", {"Cookie": "chocolate=chip"})[0], 200,
         "Cookie=chocolate, ch.p")
    c.eq(get("/c/x", {"Cookie": "chocolate=cake"})[0], 404,
         "Cookie regexp not matching: no route")
    c.eq(get("/h/x", {"X-Request-Id": "123"})[0], 200,
         "Header=X-Request-Id, \\d+")
    c.eq(get("/h/x", {"X-Request-Id": "abc"})[0], 404,
         "Header regexp not matching: no route")
    c.eq(h.echoed_header(get("/any", {"Host": "www.myhost.org"})[2], "X-Sub"),
         "www", "Host={sub}.myhost.org: {sub} in AddRequestHeader")

    # SecureHeaders page: the eight headers and their default values;
    # "To change the default values, set the appropriate property in the
    # spring.cloud.gateway.filter.secure-headers namespace" (frame-options
    # is SAMEORIGIN in the file).
    hd = get("/sec/x")[1]
    c.eq((hd.get("x-frame-options"), hd.get("x-content-type-options"),
          hd.get("referrer-policy"), hd.get("strict-transport-security"),
          hd.get("x-download-options"),
          hd.get("x-permitted-cross-domain-policies")),
         ("SAMEORIGIN", "nosniff", "no-referrer", "max-age=631138519",
          "noopen", "none"), "SecureHeaders' defaults, one from the file")

    # RequestHeaderSize page: 431, and the errorMessage header naming the
    # header that is too large (RequestHeaderSizeGatewayFilterFactoryTests).
    st, hd, _ = get("/hs/x", {"X-A": "a" * 1200})
    c.eq(st, 431, "RequestHeaderSize=1000B")
    c.ok("X-A" in (hd.get("errormessage") or ""),
         "the 431 carries errorMessage (%r)" % hd.get("errormessage"))
    c.eq(get("/hs/x", {"X-A": "a" * 600, "X-B": "b" * 600})[0], 200,
         "RequestHeaderSize counts each header, not their total")
    # RequestSize page: 413 and errorMessage: "Request size is larger than
    # permissible limit. Request size is ... where permissible limit is ..."
    st, hd, _ = get("/rs/x", method="POST", data=b"a" * 6000)
    c.eq(st, 413, "RequestSize maxSize 5000")
    c.ok((hd.get("errormessage") or "").startswith(
        "Request size is larger than permissible limit."),
        "the 413 carries errorMessage (%r)" % hd.get("errormessage"))

    # Route Metadata Configuration / per-route timeouts: response-timeout
    # 200 ms, a 500 ms answer is 504 Gateway Timeout.
    c.eq(get("/slow/x?delay=500")[0], 504, "metadata response-timeout")
    # spring.cloud.gateway.httpclient.response-timeout (1500ms in the file)
    # holds for a route without its own ("Configuring global timeouts" on
    # the HTTP timeouts page): 504 past it, through under it.
    c.eq(get("/name/x/y?delay=2000")[0], 504, "the global response-timeout")
    c.eq(get("/name/x/y?delay=300")[0], 200, "under it: answered")

    # RewriteLocationResponseHeader page: .../v2/some/object/id becomes
    # the request's host with the version stripped (AS_IN_REQUEST, the
    # request path has no /vN/).
    loc = "http://object-service.prod.example.net/v2/some/object/id"
    hd = get("/loc/x?location=" + loc)[1]
    c.eq(hd.get("location"), "http://127.0.0.1:%d/some/object/id" % gw.port,
         "RewriteLocationResponseHeader=AS_IN_REQUEST, Location, ,")

    # lb:// (LoadBalancerClient filter page): the service's instance.
    d = echo(get("/lb/x")[2])
    c.eq((d["instance"], d["path"]), ("g1", "/x"), "lb://greeter")

    # RequestRateLimiter page: burstCapacity 2, the third request in a row
    # is 429; the X-RateLimit-* headers on each answer.
    sts = [get("/limited/x") for _ in range(3)]
    c.eq([s[0] for s in sts], [200, 200, 429], "RequestRateLimiter burst 2")
    c.eq(sts[2][1].get("x-ratelimit-burst-capacity"), "2",
         "X-RateLimit-Burst-Capacity")

    # CircuitBreaker and FallbackHeaders pages: the dead upstream goes to
    # forward:/inCaseOfFailureUseThis, whose request carries the
    # Execution-Exception-Type header.
    st, _, data = get("/cb/x")
    c.eq(st, 200, "CircuitBreaker fallbackUri answers")
    # The fallback route's answer is written by its own chain; the breaker
    # route's post filters (AddResponseHeader: "if response has been
    # committed, no more response headers will be added") change nothing:
    # the default filter's header once, not once per route.
    resp = h.raw(gw.port, b"GET /cb/x HTTP/1.1\r\nHost: t\r\n"
                 b"Connection: close\r\n\r\n")
    head = resp.split(b"\r\n\r\n", 1)[0].lower()
    c.eq(head.count(b"x-response-default-red:"), 1,
         "the default filter's header once on the fallback's answer")
    c.ok(h.echoed_header(data, "Execution-Exception-Type"),
         "FallbackHeaders on the forwarded request")

    # application.properties ("the following two examples are equivalent"
    # in SCG's configuration pages) read by the gateway as application.yml
    # is: the source named after the file.
    props = procs.write_file("edge.properties", "\n".join([
        "spring.cloud.gateway.routes[0].id=props",
        "spring.cloud.gateway.routes[0].uri=http://127.0.0.1:%d" % bport,
        "spring.cloud.gateway.routes[0].predicates[0]=Path=/props/**",
        "spring.cloud.gateway.routes[0].filters[0]=StripPrefix=1",
        "spring.cloud.gateway.default-filters[0]=AddResponseHeader=X-Dflt, 1",
        ""]))
    gp = procs.gateway("--routes", props)
    st, hd, data = gp.request("GET", "/props/a")
    c.eq((st, st == 200 and echo(data)["path"], hd.get("x-dflt")),
         (200, "/a", "1"), "mini-gateway --routes application.properties")
    c.ok(gp.source("edge") is not None, "its source is named after the file")
    # Default Filters page: "add a filter and apply it to all routes";
    # SCG's RouteDefinitionRouteLocator adds them to the actuator's routes
    # as well. First in the chain: default 1, then the route's.
    st, _, _ = gp.admin_call("POST", "/actuator/gateway/routes/act", {
        "uri": "http://127.0.0.1:%d" % bport, "predicates": ["Path=/act/**"],
        "filters": ["SetStatus=202"]})
    st, hd, _ = gp.request("GET", "/act/x")
    c.eq((st, hd.get("x-dflt")), (202, "1"),
         "an actuator route runs the file's default-filters and its own")
    st, _, data = gp.admin_call("GET", "/actuator/gateway/routes/act")
    c.eq(len(json.loads(data)["filters"]), 2, "both listed, as SCG lists them")

    # Actuator API page: GET routes (route_id, predicate, filters, uri,
    # order), GET routes/{id} (the definition), POST routes/{id} with
    # _genkey_ args, POST refresh, DELETE routes/{id}.
    st, _, data = gw.admin_call("GET", "/actuator/gateway/routes")
    lst = json.loads(data)
    c.ok(st == 200 and all({"route_id", "uri", "order", "predicate",
                            "filters"} <= set(x) for x in lst),
         "GET /actuator/gateway/routes: SCG's fields")
    c.eq(lst[0]["route_id"], "headers", "in rank order (order -1 first)")
    # "Retrieving Information about a Particular Route": route_id,
    # predicate (one human-readable string), filters, uri, order.
    st, _, data = gw.admin_call("GET", "/actuator/gateway/routes/strip")
    one = json.loads(data)
    c.eq((st, one.get("route_id"), one.get("predicate")),
         (200, "strip", "Paths: [/name/**], match trailing slash: true"),
         "GET /actuator/gateway/routes/{id}: the route as the list has it")
    st, hd, _ = gw.admin_call("POST", "/actuator/gateway/routes/newone", {
        "uri": "http://127.0.0.1:%d" % bport,
        "predicates": [{"name": "Path", "args": {"_genkey_0": "/new/**"}}],
        "filters": [{"name": "StripPrefix", "args": {"_genkey_0": "1"}}]})
    # AbstractGatewayControllerEndpoint.save: ResponseEntity.created(
    # URI.create("/routes/" + id))
    c.eq((st, hd.get("location")), (201, "/routes/newone"),
         "POST /actuator/gateway/routes/{id}: 201 and Location")
    c.eq(gw.admin_call("POST", "/actuator/gateway/refresh")[0], 200,
         "POST /actuator/gateway/refresh")
    c.eq(echo(get("/new/a/b")[2])["path"], "/a/b", "the posted route serves")
    c.eq(gw.admin_call("DELETE", "/actuator/gateway/routes/newone")[0], 200,
         "DELETE /actuator/gateway/routes/{id}")
    c.eq(gw.admin_call("GET", "/actuator/gateway/routes/newone")[0], 404,
         "a deleted route is 404")
    c.eq(get("/new/a/b")[0], 404, "and no longer serves")

    # "Creating multiple Route Definitions" (AbstractGatewayController-
    # Endpoint.save(List<RouteDefinition>)): POST /routes with an array,
    # every route with its id, 200; discarded if any route is in error.
    A = "/actuator/gateway/routes"
    be = "http://127.0.0.1:%d" % bport
    st, _, _ = gw.admin_call("POST", A, [
        {"id": "bulk1", "uri": be, "predicates": ["Path=/bulk1/**"]},
        {"id": "bulk2", "uri": be,
         "predicates": [{"name": "Path", "args": {"_genkey_0": "/bulk2/**"}}],
         "filters": ["StripPrefix=1"]}])
    c.eq(st, 200, "POST /actuator/gateway/routes with two definitions")
    c.eq((get("/bulk1/x")[0], echo(get("/bulk2/x")[2])["path"]),
         (200, "/x"), "both serve")
    st, _, data = gw.admin_call("POST", A, [
        {"id": "bulk3", "uri": be, "predicates": ["Path=/bulk3/**"]},
        {"uri": be, "predicates": ["Path=/noid/**"]}])
    c.ok(st == 400 and "[1].id" in data.decode(),
         "a definition without id: 400, located (%s %r)" % (st, data))
    st, _, data = gw.admin_call("POST", A, [
        {"id": "bulk3", "uri": be, "predicates": ["Path=/bulk3/**"]},
        {"id": "bulk4", "uri": be, "predicates": ["Nope=1"]}])
    c.ok(st == 400 and json.loads(data)["error"]["path"] ==
         "[1].predicates[0]", "a bad definition: 400, located (%r)" % data)
    c.eq(get("/bulk3/x")[0], 404, "all or none: the good one not saved")
    c.eq(get("/bulk1/x")[0], 200, "the actuator's other routes kept")
    c.eq(gw.admin_call("POST", A, [{"id": "strip", "uri": be}])[0], 409,
         "a file's route is not the actuator's: 409")


h.run("gateway_scg_trial", body)
