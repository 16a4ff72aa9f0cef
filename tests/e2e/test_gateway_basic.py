"""mini-gateway end to end: routing, filters, answers from the gateway,
keep-alive and pools, bodies both ways, timeouts, and the admin API
(its contract: /status fields, PUT/DELETE routes, PUT instances, 400 with
the located error, bearer token, /metrics)."""
import http.client
import json
import re
import socket
import time

import gwharness as h

TOKEN = "s3cret-token"


def routes_doc(b1, dead, version="1"):
    return json.dumps({"version": version, "routes": [
        {"id": "echo", "uri": "http://127.0.0.1:%d" % b1,
         "predicates": ["Path=/echo/{name}"],
         "filters": ["StripPrefix=1", "AddRequestHeader=X-Name,{name}",
                     "AddResponseHeader=X-Via,mini-gateway",
                     "RemoveResponseHeader=X-Drop"]},
        {"id": "svc", "uri": "lb://svc", "predicates": ["Path=/svc/**"],
         "metadata": {"version-header": "version"}},
        {"id": "get-only", "uri": "lb://svc",
         "predicates": ["Path=/only-get/**", "Method=GET"]},
        {"id": "teapot", "uri": "http://127.0.0.1:%d" % b1,
         "predicates": ["Path=/teapot"], "filters": ["SetStatus=418"]},
        {"id": "resp", "uri": "http://127.0.0.1:%d" % b1,
         "predicates": ["Path=/resp/**"],
         "filters": ["AddResponseHeader=X-D,1", "AddResponseHeader=X-D,1",
                     "DedupeResponseHeader=X-D",
                     "RewriteResponseHeader=Content-Type,json,JSON",
                     "SetResponseHeader=X-Set,yes"]},
        {"id": "gone", "uri": "no://op", "predicates": ["Path=/gone/**"],
         "filters": ["SetStatus=410", "AddResponseHeader=X-Why,retired"]},
        {"id": "moved", "uri": "no://op", "predicates": ["Path=/old/**"],
         "filters": ["RedirectTo=301,http://example.org/new"]},
        {"id": "slow", "uri": "http://127.0.0.1:%d" % b1,
         "predicates": ["Path=/slow/**"],
         "metadata": {"response-timeout": 300}},
        {"id": "unlimited", "uri": "http://127.0.0.1:%d" % b1,
         "predicates": ["Path=/unlimited/**"],
         "metadata": {"response-timeout": -1}},
        {"id": "dead", "uri": "http://127.0.0.1:%d" % dead,
         "predicates": ["Path=/dead/**"]},
        {"id": "by-name", "uri": "http://localhost:%d" % b1,
         "predicates": ["Path=/by-name/**"]},
        {"id": "no-such-name", "uri": "http://no-such-host.invalid:80",
         "predicates": ["Path=/bad-name/**"]},
        {"id": "preserve", "uri": "http://127.0.0.1:%d" % b1,
         "predicates": ["Path=/keep-host/**"],
         "filters": ["PreserveHostHeader"]},
    ]})


def body(procs, c):
    _, b1 = procs.backend("b1", "1")
    _, b2 = procs.backend("b2", "2")
    dead = h.free_port()
    routes = procs.write_file("public.json", routes_doc(b1, dead))
    inst = procs.write_file("instances.json", json.dumps({"services": {"svc": [
        {"id": "b1", "host": "127.0.0.1", "port": b1},
        {"id": "b2", "host": "127.0.0.1", "port": b2,
         "metadata": {"version": "2"}}]}}))
    # the admin API edits the files' routes and instances below: kept as
    # overrides (without the flag such an edit is refused, 409: see
    # test_gateway_actuator.py)
    # X-Forwarded-*: sent to trusted clients' requests only (SCG 4.3.5's
    # trusted-proxies; without the flag none, test_gateway_hop.py)
    gw = procs.gateway("--routes", routes, "--instances", inst,
                       "--admin-overrides-files", "--response-timeout", "2000",
                       "--trusted-proxies", r"127\.0\.0\.1|10\..*",
                       admin_token=TOKEN)

    # --- routing and request filters
    st, hd, data = gw.request("GET", "/echo/alice?q=1",
                              headers={"Host": "front.example"})
    d = json.loads(data)
    c.eq(st, 200, "echo status")
    c.eq(d["path"], "/alice", "StripPrefix path")
    c.eq(d["query"], "q=1", "query forwarded")
    c.eq(h.echoed_header(data, "X-Name"), "alice", "AddRequestHeader {name}")
    c.eq(h.echoed_header(data, "Host"), "127.0.0.1:%d" % b1,
         "Host is the upstream authority")
    c.eq(h.echoed_header(data, "X-Forwarded-For"), "127.0.0.1", "XFF")
    c.eq(h.echoed_header(data, "X-Forwarded-Proto"), "http", "XF-Proto")
    c.eq(h.echoed_header(data, "X-Forwarded-Host"), "front.example",
         "XF-Host")
    c.eq(hd.get("x-via"), "mini-gateway", "AddResponseHeader")
    st, _, data = gw.request("GET", "/keep-host/x",
                             headers={"Host": "front.example"})
    c.eq(h.echoed_header(data, "Host"), "front.example", "PreserveHostHeader")
    st, _, data = gw.request("GET", "/echo/carol",
                             headers={"Connection": "keep-alive, X-Hop",
                                      "X-Hop": "1", "X-Kept": "2"})
    c.eq(h.echoed_header(data, "X-Hop"), None,
         "a header named by Connection is not forwarded")
    c.eq(h.echoed_header(data, "X-Kept"), "2", "other headers are")
    c.eq(h.echoed_header(data, "Connection"), None, "Connection dropped")
    st, _, data = gw.request("GET", "/echo/bob",
                             headers={"X-Forwarded-For": "10.1.2.3"})
    c.eq(h.echoed_header(data, "X-Forwarded-For"), "10.1.2.3,127.0.0.1",
         "XFF appended (comma-joined, as SCG)")
    # two X-Forwarded-For lines are one list (RFC 9110 5.3): the client
    # is appended once, at its end, the list sent as one line
    out = h.raw(gw.port, b"GET /echo/xff2 HTTP/1.1\r\nHost: a\r\n"
                b"X-Forwarded-For: 10.0.0.1\r\nX-Trace: t\r\n"
                b"X-Forwarded-For: 10.0.0.2\r\nConnection: close\r\n\r\n")
    got = [v for k, v in json.loads(out.split(b"\r\n\r\n", 1)[1])["headers"]
           if k.lower() == "x-forwarded-for"]
    c.eq(got, ["10.0.0.1,10.0.0.2,127.0.0.1"],
         "two X-Forwarded-For lines: the client appended once, last")

    # --- lb:// and gray release by header
    seen = set()
    for _ in range(4):
        st, _, data = gw.request("GET", "/svc/x")
        seen.add(json.loads(data)["instance"])
    c.eq(seen, {"b1"}, "no version header: the unversioned instances")
    for _ in range(3):
        st, _, data = gw.request("GET", "/svc/x", headers={"version": "2"})
        c.eq(json.loads(data)["instance"], "b2", "version: 2 goes to b2")

    # --- answers from the gateway
    st, hd, data = gw.request("GET", "/nothing/here")
    c.eq(st, 404, "no route: 404")
    st, hd, data = gw.request("POST", "/only-get/1", body=b"x")
    c.eq(st, 405, "method mismatch: 405")
    c.ok("GET" in hd.get("allow", ""), "405 has Allow: %r" % hd.get("allow"))
    st, hd, _ = gw.request("GET", "/teapot")
    c.eq(st, 418, "SetStatus applied to the upstream's answer")
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
    conn.request("GET", "/resp/x")
    r = conn.getresponse()
    r.read()
    c.eq(r.msg.get_all("X-D"), ["1"], "DedupeResponseHeader")
    c.eq(r.getheader("Content-Type"), "application/JSON",
         "RewriteResponseHeader")
    c.eq(r.getheader("X-Set"), "yes", "SetResponseHeader")
    conn.close()
    st, hd, _ = gw.request("GET", "/gone/x")
    c.eq(st, 410, "no://op with SetStatus answered by the gateway")
    c.eq(hd.get("x-why"), "retired", "its response header")
    st, hd, _ = gw.request("GET", "/old/page")
    c.eq(st, 301, "RedirectTo status")
    c.eq(hd.get("location"), "http://example.org/new", "RedirectTo location")
    st, _, data = gw.request("GET", "/by-name/x")
    c.eq(st, 200, "upstream given by name (resolved off the loop)")
    c.eq(h.echoed_header(data, "Host"), "localhost:%d" % b1, "its Host")
    st, _, _ = gw.request("GET", "/bad-name/x")
    c.eq(st, 502, "a name that does not resolve: 502")
    st, _, _ = gw.request("GET", "/dead/x")
    c.eq(st, 502, "connection refused: 502")
    t0 = time.time()
    st, _, _ = gw.request("GET", "/slow/x?delay=2000")
    c.eq(st, 504, "response-timeout metadata: 504")
    c.ok(time.time() - t0 < 1.5, "504 came after ~300 ms, not 2 s")
    # Spring's reading: a negative response-timeout is no limit at all,
    # where the gateway's own (--response-timeout 2000) cuts other routes
    st, _, _ = gw.request("GET", "/unlimited/x?delay=2500")
    c.eq(st, 200, "response-timeout -1: no limit, answered after 2.5 s")
    st, _, _ = gw.request("GET", "/echo/x?delay=2500")
    c.eq(st, 504, "a route without the key: the gateway's 2 s")

    # --- bodies both ways, keep-alive on one connection
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
    payload = bytes(range(256)) * 4000  # ~1 MB
    conn.request("POST", "/echo/up", body=payload)
    r = conn.getresponse()
    d = json.loads(r.read())
    c.eq(d["body_bytes"], len(payload), "Content-Length body forwarded")

    def chunks():
        for i in range(50):
            yield b"y" * (1000 + i)
    conn.request("POST", "/echo/up", body=chunks(),
                 encode_chunked=True,
                 headers={"Transfer-Encoding": "chunked"})
    r = conn.getresponse()
    d = json.loads(r.read())
    c.eq(d["body_bytes"], sum(1000 + i for i in range(50)),
         "chunked body forwarded")
    conn.request("GET", "/echo/big?size=3000000")
    r = conn.getresponse()
    big = r.read()
    c.ok(len(big) >= 3000000, "3 MB response streamed (%d)" % len(big))
    # a client that stops reading: the response waits (the gateway stops
    # reading the upstream above its write queue limit) and then arrives
    # whole and in order once the client reads again
    slow = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    slow.sendall(b"GET /echo/big?size=8000000 HTTP/1.1\r\nHost: a\r\n\r\n"
                 b"GET /echo/after HTTP/1.1\r\nHost: a\r\n"
                 b"Connection: close\r\n\r\n")
    time.sleep(1.5)
    got = b""
    while True:
        part = slow.recv(1 << 16)
        if not part:
            break
        got += part
    slow.close()
    head, _, rest = got.partition(b"\r\n\r\n")
    clen = int([ln.split(b":")[1] for ln in head.split(b"\r\n")
                if ln.lower().startswith(b"content-length:")][0])
    first, second = rest[:clen], rest[clen:]
    c.ok(clen >= 8000000 and first.endswith(b'"}\n')
         and first.count(b"x") >= 7999000,
         "8 MB response to a client that paused reading: whole (%d of %d)"
         % (len(first), clen))
    c.ok(second.startswith(b"HTTP/1.1 200") and b'"path":"/after"' in second,
         "the pipelined request after it answered next")
    conn.request("HEAD", "/echo/head")
    r = conn.getresponse()
    c.eq(r.read(), b"", "HEAD has no body")
    c.eq(r.status, 200, "HEAD status")
    conn.request("GET", "/echo/last")
    r = conn.getresponse()
    r.read()
    c.eq(r.status, 200, "still the same keep-alive connection")
    conn.close()
    c.ok((gw.metric("gateway_upstream_reuses_total") or 0) > 0,
         "upstream connections reused from the pool")
    out = h.raw(gw.port, b"POST /echo/x HTTP/1.1\r\nHost: a\r\n"
                b"Content-Length: %d\r\n\r\n" % (11 << 20))
    c.ok(out.startswith(b"HTTP/1.1 413 "),
         "body over --max-body-bytes: 413 (%r)" % out[:40])

    # pipelining: three requests in one write, answered in order
    out = h.raw(gw.port, b"GET /echo/p1 HTTP/1.1\r\nHost: a\r\n\r\n"
                b"POST /echo/p2 HTTP/1.1\r\nHost: a\r\nContent-Length: 3"
                b"\r\n\r\nabc"
                b"GET /echo/p3 HTTP/1.1\r\nHost: a\r\nConnection: close"
                b"\r\n\r\n")
    paths = [json.loads(part.split(b"\r\n\r\n", 1)[1].split(b"\n")[0])
             ["path"] for part in out.split(b"HTTP/1.1 200 OK")[1:]]
    c.eq(paths, ["/p1", "/p2", "/p3"], "pipelined requests answered in order")
    # HTTP/1.0: answered and closed
    out = h.raw(gw.port, b"GET /echo/old HTTP/1.0\r\nHost: a\r\n\r\n")
    c.ok(out.startswith(b"HTTP/1.1 200") and b"Connection: close" in out,
         "HTTP/1.0 request answered with Connection: close")
    # HTTP/1.0 with keep-alive: each answer says it (RFC 9112 C.2.2), else
    # a 1.0 client takes the connection for closed (ab -k reads to EOF)
    s10 = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
    for path, want in ((b"/echo/ka1", 200), (b"/gone/x", 410),
                       (b"/nothing-here", 404), (b"/echo/ka2", 200)):
        s10.sendall(b"GET %s HTTP/1.0\r\nHost: a\r\n"
                    b"Connection: keep-alive\r\n\r\n" % path)
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = s10.recv(65536)
            if not chunk:
                break
            got += chunk
        head, _, rest = got.partition(b"\r\n\r\n")
        lines = head.decode("latin1").split("\r\n")
        n = [int(x.split(":")[1]) for x in lines
             if x.lower().startswith("content-length:")]
        while n and len(rest) < n[0]:
            rest += s10.recv(65536)
        c.ok(lines[0].startswith("HTTP/1.1 %d" % want) and
             "connection: keep-alive" in head.decode("latin1").lower(),
             "HTTP/1.0 keep-alive %s: %d with Connection: keep-alive (%r)"
             % (path.decode(), want, head[:200]))
    s10.close()
    # a WebSocket upgrade on an http:// route (SCG would upgrade it): the
    # gateway proxies no upgrades, so it goes as a plain GET, not silently
    before = gw.metric("gateway_upgrade_dropped_total") or 0
    out = h.raw(gw.port, b"GET /echo/ws HTTP/1.1\r\nHost: a\r\n"
                b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                b"Sec-WebSocket-Version: 13\r\n\r\n", timeout=2)
    c.ok(out.startswith(b"HTTP/1.1 200") and b"Upgrade" not in
         out.split(b"\r\n\r\n")[1], "the upgrade went as a plain GET")
    c.eq((gw.metric("gateway_upgrade_dropped_total") or 0) - before, 1,
         "the dropped upgrade is counted")
    c.ok("route echo: Upgrade: websocket dropped" in procs.log("gateway.log"),
         "and logged")
    # Expect: 100-continue: the client waits for 100 before its body (the
    # gateway takes Expect off the upstream request, so it must say it)
    se = socket.create_connection(("127.0.0.1", gw.port), timeout=2)
    se.sendall(b"POST /echo/expect HTTP/1.1\r\nHost: a\r\n"
               b"Content-Length: 5\r\nExpect: 100-continue\r\n\r\n")
    try:
        first = se.recv(65536)
    except socket.timeout:
        first = b"(nothing within 2 s)"
    c.eq(first, b"HTTP/1.1 100 Continue\r\n\r\n",
         "Expect: 100-continue answered 100 before the body")
    se.sendall(b"hello")
    got = b""
    while b"body_bytes" not in got:
        chunk = se.recv(65536)
        if not chunk:
            break
        got += chunk
    c.ok(got.startswith(b"HTTP/1.1 200") and b'"body_bytes":5' in got,
         "then the body went upstream: %r" % got[-60:])
    se.close()
    out = h.raw(gw.port, b"POST /nothing-here HTTP/1.1\r\nHost: a\r\n"
                b"Content-Length: 5\r\nExpect: 100-continue\r\n\r\n")
    c.ok(out.startswith(b"HTTP/1.1 404"),
         "a refused request with Expect: the final status, no 100 (%r)"
         % out[:30])

    # --- admin API
    st, _, _ = gw.admin_call("GET", "/status", token=False)
    c.eq(st, 401, "admin without the token: 401")
    s = gw.status()
    c.ok(isinstance(s["fingerprint"], str) and len(s["fingerprint"]) == 16,
         "fingerprint is hex")
    c.ok(isinstance(s["generation"], int), "generation")
    src = [x for x in s["sources"] if x["name"] == "public"]
    c.eq(len(src), 1, "source named by the file's base name")
    for k in ("name", "version", "checksum", "error"):
        c.ok(k in src[0], "source has %s" % k)
    c.eq(src[0]["version"], "1", "source version")
    c.eq(src[0]["error"], None, "no error")

    new_route = {"id": "added", "uri": "http://127.0.0.1:%d" % b2,
                 "predicates": ["Path=/added/**"]}
    st, _, data = gw.admin_call("PUT", "/routes/public/added", new_route)
    c.eq(st, 200, "PUT one route")
    st, _, data = gw.request("GET", "/added/x")
    c.eq(json.loads(data)["instance"], "b2", "new route live at once")
    st, _, _ = gw.admin_call("POST", "/routes/public/added/disable")
    c.eq(st, 200, "disable")
    c.eq(gw.request("GET", "/added/x")[0], 404, "disabled route: 404")
    st, _, _ = gw.admin_call("POST", "/routes/public/added/enable")
    c.eq(gw.request("GET", "/added/x")[0], 200, "enabled again")
    st, _, _ = gw.admin_call("DELETE", "/routes/other/added")
    c.eq(st, 404, "DELETE names the route's own source")
    st, _, _ = gw.admin_call("DELETE", "/routes/public/added")
    c.eq(st, 200, "DELETE one route")
    c.eq(gw.request("GET", "/added/x")[0], 404, "deleted route: 404")
    st, _, _ = gw.admin_call("DELETE", "/routes/public/added")
    c.eq(st, 404, "DELETE of a missing route: 404")

    st, _, _ = gw.admin_call("PUT", "/routes/ops/ops-only", {
        "id": "ops-only", "uri": "http://127.0.0.1:%d" % b1,
        "predicates": ["Path=/ops/**"]})
    c.eq(st, 200, "PUT one route into a new source")
    c.ok(gw.source("ops") is not None, "the new source is listed")
    c.eq(gw.request("GET", "/ops/x")[0], 200, "and its route serves")

    bad = {"id": "broken", "uri": "http://x",
           "predicates": ["Path=/b/**", "Nope=1"]}
    st, _, data = gw.admin_call("PUT", "/routes/public/broken", bad)
    c.eq(st, 400, "broken route: 400")
    err = json.loads(data)["error"]
    c.ok("predicates[1]" in err["path"], "located error: %r" % err)
    doc = {"version": "9", "routes": [{"id": "x", "uri": "http://h",
                                        "predicates": ["Path=/x/{"]}]}
    st, _, data = gw.admin_call("PUT", "/routes/public", doc)
    c.eq(st, 400, "broken document: 400")
    c.ok("routes[0].predicates[0]" in json.loads(data)["error"]["path"],
         "document error located: %s" % data)
    c.eq(gw.request("GET", "/echo/still")[0], 200, "old routes serve on")

    st, _, data = gw.admin_call("PUT", "/instances/svc", [
        {"id": "b2", "host": "127.0.0.1", "port": b2}])
    c.eq(st, 200, "PUT instances")
    c.eq(json.loads(gw.request("GET", "/svc/x")[2])["instance"], "b2",
         "instances replaced")
    st, _, data = gw.admin_call("PUT", "/instances/svc", [
        {"id": "b9", "host": "127.0.0.1", "port": "80"}])
    c.eq(st, 400, "bad instance list: 400")
    c.ok("port" in json.loads(data)["error"]["path"], "instance error path")

    doc2 = json.loads(routes_doc(b1, dead, "2"))
    doc2["routes"] = doc2["routes"][:1]
    st, _, _ = gw.admin_call("PUT", "/routes/public", doc2)
    c.eq(st, 200, "PUT a whole document")
    c.eq(gw.request("GET", "/teapot")[0], 404, "document replaced routes")
    st, _, data = gw.admin_call("POST", "/rollback/public?version=1")
    c.eq(st, 200, "rollback: %s" % data)
    c.eq(gw.request("GET", "/teapot")[0], 418, "rolled back")
    st, _, data = gw.admin_call("GET", "/report")
    c.eq(json.loads(data)["ok"], True, "last report")
    st, _, data = gw.admin_call("GET", "/fingerprint")
    c.eq(json.loads(data)["fingerprint"], gw.status()["fingerprint"],
         "/fingerprint agrees with /status")
    st, _, data = gw.admin_call("GET", "/metrics")
    text = data.decode()
    for name in ("switchyard_generation", "gateway_requests_total",
                 "gateway_request_duration_seconds_bucket",
                 "gateway_upstream_latency_seconds_bucket",
                 "gateway_active_connections"):
        c.ok(name in text, "metrics have %s" % name)
    c.ok('gateway_requests_total{route="echo",status="200"}' in text,
         "requests by route and status")
    # exact counts per (route, status), summed over the workers
    series = ['gateway_requests_total{route="teapot",status="418"}',
              'gateway_requests_total{route="gone",status="410"}',
              'gateway_requests_total{route="",status="404"}']
    before = [gw.metric(x) or 0 for x in series]
    for path, n in (("/teapot", 3), ("/gone/x", 2), ("/no/such/route", 4)):
        for _ in range(n):
            h.http_call(gw.port, "GET", path)
    after = [gw.metric(x) or 0 for x in series]
    c.eq([a - b for a, b in zip(after, before)], [3, 2, 4],
         "request counts by route and status are exact")

    # --listen ADDR:0 with two workers: one port for both (each
    # SO_REUSEPORT listener took a port of its own, and :0 was logged)
    listen_port_zero(procs, c, b1)


def listen_port_zero(procs, c, b1):
    admin = h.free_port()
    routes = procs.write_file("zero.json", json.dumps({"version": "1",
        "routes": [{"id": "echo", "uri": "http://127.0.0.1:%d" % b1,
                    "predicates": ["Path=/echo/**"]}]}))
    p = procs.start([h.binary(), "--listen", "127.0.0.1:0", "--workers", "2",
                     "--admin", "127.0.0.1:%d" % admin, "--routes", routes],
                    "zero.log")
    h.wait_port(admin, proc=p)
    port = 0
    for _ in range(100):
        m = re.search(r"listening on 127\.0\.0\.1:(\d+) \(2 workers\)",
                      procs.log("zero.log"))
        if m:
            port = int(m.group(1))
            break
        time.sleep(0.05)
    c.ok(port > 0, "--listen :0 logs the port it got (%d)" % port)
    ports = set()
    mine = h._sockets_of(p.pid)
    with open("/proc/net/tcp") as f:
        for r in (ln.split() for ln in f.readlines()[1:]):
            if len(r) > 9 and r[3] == "0A" and r[9] in mine:
                ports.add(int(r[1].split(":")[1], 16))
    ports.discard(admin)
    c.eq(sorted(ports), [port], "both workers listen on that one port")
    st, _, _ = h.http_call(port, "GET", "/echo/zero")
    c.eq(st, 200, "a request on the logged port is routed")


h.run("gateway_basic", body)
