"""The operator's side of the mini-gateway, end to end: the JSON access
log, W3C trace context carried upstream, the route label of the latency
histogram, /explain, /shadowed, /changes, the dry run of a document (its
diff and its impact on the last requests, nothing changed), and the web
console rendered in headless Chromium (route ids, source names, the
/status fingerprint and an explain result in the DOM; a screenshot kept
under the build directory; no src/href to another host).

Usage: test_gateway_ops.py MINI_GATEWAY [ARTEFACT_DIR]
"""
import base64
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys

import gwharness as h

TOKEN = "console-token"
CHROMIUM = "/usr/bin/chromium"


def routes_doc(port, version):
    return json.dumps({"version": version, "routes": [
        {"id": "api", "uri": "http://127.0.0.1:%d" % port,
         "predicates": ["Path=/api/**"]},
        {"id": "users", "uri": "http://127.0.0.1:%d" % port,
         "predicates": ["Path=/api/users/{id}"]},
        {"id": "echo", "uri": "http://127.0.0.1:%d" % port,
         "predicates": ["Path=/echo/**"]}]})


def log_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def chromium(args, timeout=60):
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--hide-scrollbars", "--virtual-time-budget=8000"] + args,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=timeout)


class Page:
    """A page in headless Chromium driven over its DevTools protocol (a
    WebSocket; the few lines of the protocol the test needs), for what
    --dump-dom cannot do: type into the page and click."""

    def __init__(self, url, profile, timeout=20):
        os.makedirs(profile, exist_ok=True)
        err = os.path.join(profile, "devtools.err")
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
             "--user-data-dir=" + profile, "--remote-debugging-port=0", url],
            stdout=subprocess.DEVNULL, stderr=open(err, "wb"),
            start_new_session=True)
        self.n = 0
        got = {}

        def devtools():
            m = re.search(rb"DevTools listening on ws://127.0.0.1:(\d+)/",
                          open(err, "rb").read())
            if m:
                got["port"] = int(m.group(1))
            return m
        h.wait_for(devtools, "Chromium's DevTools port", timeout)
        port = got["port"]

        def page_ws():
            _, _, data = h.http_call(port, "GET", "/json/list")
            pages = [t for t in json.loads(data) if t.get("type") == "page"]
            if pages:
                got["ws"] = pages[0]["webSocketDebuggerUrl"]
            return pages
        h.wait_for(page_ws, "a page target", timeout)
        ws = got["ws"]
        self.s = socket.create_connection(("127.0.0.1", port), timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                        "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13"
                        "\r\n\r\n" % (ws.split(str(port), 1)[1], port, key))
                       .encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.s.recv(1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def _read(self, n):
        out = b""
        while len(out) < n:
            chunk = self.s.recv(n - len(out))
            if not chunk:
                raise OSError("DevTools closed")
            out += chunk
        return out

    def _frame(self):
        payload, fin = b"", False
        while not fin:
            b0, b1 = self._read(2)
            fin, n = b0 & 0x80, b1 & 0x7f
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload += self._read(n)
        return payload

    def eval(self, expr):
        self.n += 1
        msg = json.dumps({"id": self.n, "method": "Runtime.evaluate",
                          "params": {"expression": expr,
                                     "returnByValue": True}}).encode()
        mask = os.urandom(4)
        head = bytes([0x81])
        head += (bytes([0x80 | len(msg)]) if len(msg) < 126 else
                 bytes([0x80 | 126]) + struct.pack(">H", len(msg)))
        self.s.sendall(head + mask + bytes(b ^ mask[i % 4]
                                           for i, b in enumerate(msg)))
        while True:
            r = json.loads(self._frame())
            if r.get("id") == self.n:
                return r.get("result", {}).get("result", {}).get("value")

    def close(self):
        self.s.close()
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        self.proc.wait(10)


def body(procs, c):
    _, bport = procs.backend("b1")
    routes = procs.write_file("ops.json", routes_doc(bport, "1"))
    inst = procs.write_file("inst.json", json.dumps({"services": {"svc": [
        {"id": "svc-1", "host": "127.0.0.1", "port": bport,
         "metadata": {"version": "1"}},
        {"id": "svc-2", "host": "127.0.0.1", "port": bport,
         "state": "draining"}]}}))
    access = os.path.join(procs.dir, "access.jsonl")
    gw = procs.gateway("--routes", routes, "--instances", inst,
                       "--access-log", access, admin_token=TOKEN)

    # --- trace context ---
    incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    st, _, data = gw.request("GET", "/echo/a", headers={
        "traceparent": incoming, "tracestate": "vendor=x"})
    c.eq(st, 200, "proxied")
    sent = h.echoed_header(data, "traceparent")
    c.ok(sent is not None and re.fullmatch(
        r"00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01", sent),
        "traceparent upstream keeps the trace id: %r" % sent)
    c.ok(sent and sent.split("-")[2] != "b7ad6b7169203331",
         "with the gateway's own span id as the parent")
    c.eq(h.echoed_header(data, "tracestate"), "vendor=x", "tracestate passed on")
    st, _, data = gw.request("GET", "/echo/b")
    fresh = h.echoed_header(data, "traceparent")
    c.ok(fresh is not None and re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01",
                                            fresh),
         "a traceparent is generated when absent: %r" % fresh)
    st, _, data = gw.request("GET", "/echo/c", headers={
        "traceparent": "00-00000000000000000000000000000000-b7ad6b7169203331-01"})
    bad = h.echoed_header(data, "traceparent")
    c.ok(bad and "00000000000000000000000000000000" not in bad,
         "an invalid traceparent starts a new trace")
    gw.request("GET", "/api/users/7")
    gw.request("GET", "/nowhere")
    # refused before the head is read: a bad request line, too big a head
    for raw in (b"GET /a HTTP/1.1\r\nNo colon here\r\n\r\n",
                b"GET /echo/a HTTP/1.1\r\nX-Big: " + b"a" * 70000 +
                b"\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", gw.port), 5) as s:
            try:
                s.sendall(raw)
                s.recv(100)
            except OSError:
                pass

    # --- the access log ---
    h.wait_for(lambda: len(log_lines(access)) >= 5, "five access log lines")
    lines = log_lines(access)
    first = lines[0]
    for key in ("time", "method", "path", "status", "route", "source",
                "upstream", "instance", "version", "bytes", "duration_ms",
                "upstream_ms", "retries", "rate_limited", "breaker",
                "trace_id"):
        c.ok(key in first, "access log line has %s" % key)
    c.eq((first["method"], first["path"], first["status"], first["route"],
          first["source"]), ("GET", "/echo/a", 200, "echo", "ops"),
         "first line: request, status, route, source")
    c.eq(first["trace_id"], "0af7651916cd43dd8448eb211c80319c",
         "the log line carries the incoming trace id")
    c.eq(first["parent_id"], "b7ad6b7169203331", "and the client's span")
    c.eq(sent.split("-")[2], first["span_id"],
         "the span sent upstream is the one logged")
    c.eq(lines[1]["trace_id"], fresh.split("-")[1],
         "a generated trace id is logged")
    c.ok(first["bytes"] > 0 and first["duration_ms"] >= 0,
         "bytes and duration")
    with open(access) as f:
        raw = f.readline()
    c.ok(re.match(r'\{"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z",'
                  r'"method":"GET",', raw) and
         re.search(r',"status":200,.*,"bytes_in":0,"bytes":\d+,"cut":false,'
                   r'"duration_ms":\d+\.\d{3},"upstream_ms":\d+\.\d{3},'
                   r'"retries":0,"rate_limited":false,"fallback":false,', raw),
         "the line's time, numbers and durations as written: %r" % raw)
    c.eq((lines[4]["status"], lines[4]["route"]), (404, None),
         "no route: 404, route null")
    h.wait_for(lambda: len(log_lines(access)) >= 7, "the refused requests")
    lines = log_lines(access)
    c.eq(sorted((x["status"], x["method"], x["path"], x["remote_addr"])
                for x in lines[5:7]),
         [(400, None, None, "127.0.0.1"), (431, None, None, "127.0.0.1")],
         "requests refused before their head was read are logged")

    # --- the access log read back by switchyard diff --requests ---
    cli = os.path.join(os.path.dirname(h.binary()), "..", "cli", "switchyard")
    doc2 = json.loads(routes_doc(bport, "2"))
    doc2["routes"] = [doc2["routes"][1], doc2["routes"][0]]  # users first
    new_doc = procs.write_file("ops-v2.json", json.dumps(doc2))
    if os.path.exists(cli):
        out = subprocess.run([cli, "diff", "--requests", access, "--json",
                              routes, new_doc], stdout=subprocess.PIPE,
                             timeout=30)
        rep = json.loads(out.stdout)
        c.eq((out.returncode, rep["requests"]), (0, 5),
             "switchyard diff --requests reads the access log")
        c.eq(sorted((x["url"], x["old_route"], x["new_route"])
                    for x in rep["changed"]),
             [("/api/users/7", "api", "users"), ("/echo/a", "echo", None),
              ("/echo/b", "echo", None), ("/echo/c", "echo", None)],
             "and tells what the new document re-routes")
    else:
        c.skip("the impact preview: no switchyard tool at %s" % cli)

    # --- metrics: the latency histogram by route ---
    st, _, data = gw.admin_call("GET", "/metrics")
    text = data.decode()
    c.ok('gateway_request_duration_seconds_count{route="echo"} 3' in text,
         "latency histogram count by route")
    c.ok('gateway_request_duration_seconds_bucket{route="users",le="+Inf"}'
         not in text, "users took no request")
    c.ok('gateway_request_duration_seconds_bucket{route="api",le="+Inf"} 1'
         in text, "api took /api/users/7")

    # --- explain, shadowed, changes ---
    st, _, data = gw.admin_call(
        "GET", "/explain?method=GET&url=/api/users/7&header=X-A:%201")
    ex = json.loads(data)
    c.eq((st, ex["route"], ex["routes"][0]["route"]), (200, "api", "api"),
         "explain: the route and the walk in rank order")
    st, _, data = gw.admin_call("GET", "/explain?method=GET&url=/zzz")
    ex = json.loads(data)
    c.eq((ex["route"], ex["routes"][0]["failed"]), (None, "Path"),
         "explain: no route, the failed predicate")
    # every parameter is read or the call refused: these were answered 200
    # for another request than asked (the parameter dropped, the first of
    # two taken, a header past the 16th dropped, a value cut)
    for q, what in (
            ("method=POST&url=/api/users/7&headr=X-A:%201", "'headr'"),
            ("url=/api/users/7&url=/zzz", "'url' given twice"),
            ("method=GET&method=POST&url=/a", "'method' given twice"),
            ("url=/a" + "&header=X-%d:%%201" * 17 % tuple(range(17)),
             "at most 16"),
            ("url=/" + "a" * 2100, "'url' is longer"),
            ("url=/a&header=X-A:%20" + "v" * 600, "'header' is longer"),
            ("method=" + "M" * 40 + "&url=/a", "'method' is longer"),
            # a method the gateway never routes: explained before, as a
            # request no client can send (the gateway answers 400 or 405)
            ("method=&url=/api/users/7", "method ''"),
            ("method=get&url=/api/users/7", "method 'get'"),
            ("method=G%20T&url=/api/users/7", "method 'G T'"),
            ("method=CONNECT&url=/api/users/7", "method 'CONNECT'")):
        st, _, data = gw.admin_call("GET", "/explain?" + q)
        c.ok(st == 400 and what in data.decode(),
             "explain ?%s...: 400 naming %s (%s %r)"
             % (q[:40], what, st, data[:200]))
    st, _, data = gw.admin_call("GET", "/shadowed")
    c.eq(json.loads(data)["shadowed"][0]["shadowed_by"], ["api"],
         "/shadowed: users is shadowed by api")
    # the reading endpoints take no parameter: one is refused naming it.
    # Answered 200 before with the whole answer, as if not written (the
    # shadowed routes of every source for ?source=ops, all 16 changes for
    # ?limit=1)
    for path in ("/shadowed?source=ops", "/changes?limit=1",
                 "/instances?service=svc", "/routes?source=ops",
                 "/status?verbose", "/report?x=1", "/fingerprint?source=ops",
                 "/metrics?name[]=gateway_requests_total"):
        st, _, data = gw.admin_call("GET", path)
        key = path.split("?")[1].split("=")[0]
        c.ok(st == 400 and ("'%s'" % key) in data.decode(),
             "GET %s: 400 naming %s (%s %r)" % (path, key, st, data[:160]))
    st, _, data = gw.admin_call("GET", "/shadowed?")
    c.eq(st, 200, "an empty query is none")
    st, _, data = gw.admin_call("GET", "/instances")
    svcs = json.loads(data)["services"]
    c.eq([(s["name"], [(i["id"], i["state"], i["version"], i["ejected"])
                       for i in s["instances"]]) for s in svcs],
         [("svc", [("svc-1", "up", "1", False),
                   ("svc-2", "draining", None, False)])],
         "/instances: services, instances, state, version, health")
    st, _, data = gw.admin_call("GET", "/changes")
    ch = json.loads(data)["changes"]
    c.ok(ch and ch[0]["report"]["parts"][0]["added"] == ["api", "users",
                                                        "echo"],
         "/changes: the load, with its three-way diff")

    # --- dry run ---
    status_before = gw.status()
    st, _, data = gw.admin_call("PUT", "/routes/ops?dry_run=1", doc2)
    c.eq(st, 200, "dry run answers 200: %s" % data[:300])
    dr = json.loads(data)
    c.eq((dr["dry_run"], dr["diff"]["removed"]), (True, ["echo"]),
         "dry run: the diff")
    c.eq((dr["diff"]["updated"], dr["diff"]["reordered"]), ([], ["users"]),
         "dry run: users moved ahead of api is reordered, not updated")
    imp = dr["impact"]
    c.eq(imp["requests"], 5, "dry run replays the last requests")
    moved = {(x["url"], x["old_route"], x["new_route"])
             for x in imp["changed"]}
    c.ok(("/api/users/7", "api", "users") in moved,
         "impact: /api/users/7 goes from api to users: %r" % moved)
    c.ok(("/echo/a", "echo", None) in moved, "impact: /echo/a loses its route")
    c.eq(dr["shadowed"], [],
         "after the change no route is shadowed (users now ranks first)")
    # the replay carries each request's headers, Host, method and address:
    # echo narrowed to the first request's tracestate keeps /echo/a only
    doc4 = json.loads(routes_doc(bport, "4"))
    doc4["routes"][2]["predicates"] += [
        "Header=tracestate, vendor=x", "Host=127.0.0.1",
        "Method=GET", "RemoteAddr=127.0.0.1"]
    st, _, data = gw.admin_call("PUT", "/routes/ops?dry_run=1", doc4)
    c.eq(sorted((x["url"], x["old_route"], x["new_route"])
                for x in json.loads(data)["impact"]["changed"]),
         [("/echo/b", "echo", None), ("/echo/c", "echo", None)],
         "the impact replays the requests' headers, Host, method, address")
    c.ok("the file %s" % routes in dr.get("put_refused", ""),
         "a file's source: previewed, and the answer says the real PUT is "
         "refused, naming the file: %r" % dr.get("put_refused"))
    st, _, data = gw.admin_call("PUT", "/routes/other?dry_run=1",
                                {"routes": [{"id": "o", "uri": "http://o:1",
                                             "predicates": ["Path=/o"]}]})
    dr = json.loads(data)
    c.eq((st, dr["diff"]["added"], "put_refused" in dr), (200, ["o"], False),
         "a source no file owns: no put_refused")
    doc3 = json.loads(routes_doc(bport, "3"))
    doc3["routes"].append({"id": "late", "uri": "http://127.0.0.1:1",
                           "predicates": ["Path=/echo/late"]})
    st, _, data = gw.admin_call("PUT", "/routes/ops?dry_run=1", doc3)
    c.eq([(x["route"], x["shadowed_by"]) for x in json.loads(data)["shadowed"]],
         [("users", ["api"]), ("late", ["echo"])],
         "a dry run names the routes the change would leave unreachable")
    # a document that only moves a route's rank shows in the diff
    docr = json.loads(routes_doc(bport, "5"))
    docr["routes"] = [docr["routes"][2]] + docr["routes"][:2]  # echo first
    st, _, data = gw.admin_call("PUT", "/routes/ops?dry_run=1", docr)
    d = json.loads(data)["diff"]
    c.eq((st, d["added"], d["removed"], d["updated"], d["reordered"]),
         (200, [], [], [], ["echo"]),
         "a reorder-only dry run names the moved route (reordered)")
    # a misspelt dry run, or one of another change, must not change
    # anything (the source is a file's, so check the answers too)
    for path in ("/routes/ops?dry_run", "/routes/ops?dryRun=1",
                 "/routes/ops?dry-run=1", "/routes/ops?dry_run=yes",
                 "/routes/ops?x=1&dry_run=", "/routes/ops/api?dry_run=1",
                 # given twice: one value was taken, whichever said 1
                 "/routes/ops?dry_run=0&dry_run=1",
                 "/routes/ops?dry_run=0&dry_run=0",
                 "/routes/ops?dry_run=1&dryRun=1"):
        body = doc2["routes"][0] if path.count("/") == 3 else doc2
        st, _, data = gw.admin_call("PUT", path, body)
        c.eq((st, "nothing changed" in data.decode()), (400, True),
             "PUT %s: refused, 400" % path)
    st, _, data = gw.admin_call("DELETE", "/routes/ops/api?dry_run=1")
    c.eq(st, 400, "DELETE ...?dry_run=1: refused, 400")
    st, _, data = gw.admin_call("PUT", "/routes/ops?dry_run=0", doc2)
    c.eq(st, 409, "dry_run=0 is a real PUT (409: the file's source)")
    after = gw.status()
    c.eq((after["fingerprint"], after["generation"]),
         (status_before["fingerprint"], status_before["generation"]),
         "a dry run changes nothing")
    st, _, data = gw.admin_call("PUT", "/routes/ops?dry_run=1",
                                {"routes": [{"id": "x"}]})
    c.eq((st, json.loads(data)["error"]["path"]), (400, "routes[0].uri"),
         "a bad document: 400 with the located error")
    st, _, _ = gw.admin_call("GET", "/explain?url=/a", token=False)
    c.eq(st, 401, "the admin endpoints still need the token")
    # a new source's dry run: the diff the real PUT reports, version and
    # all (it lacked "version", "skipped" and "version_not_bumped")
    newsrc = {"version": "7", "routes": [
        {"id": "n7", "uri": "http://127.0.0.1:%d" % bport,
         "predicates": ["Path=/n7/**"]}]}
    st, _, data = gw.admin_call("PUT", "/routes/fresh?dry_run=1", newsrc)
    dry_diff = json.loads(data)["diff"]
    st, _, data = gw.admin_call("PUT", "/routes/fresh", newsrc)
    c.eq(st, 200, "the real PUT of the new source")
    c.eq(dry_diff, json.loads(data)["parts"][0],
         "a new source's dry-run diff is the real PUT's report")

    # --- policy outcomes in the access log, and what a forward logs ---
    up = "http://127.0.0.1:%d" % bport
    pol = procs.write_file("pol.json", json.dumps([
        {"id": "rl", "uri": up, "predicates": ["Path=/rl/**"], "filters": [
            {"name": "RequestRateLimiter", "args": {
                "redis-rate-limiter.replenishRate": "1",
                "redis-rate-limiter.burstCapacity": "1",
                "key-resolver": "#{@header:X-User}"}}]},
        {"id": "cb", "uri": "http://127.0.0.1:1",
         "predicates": ["Path=/cb/**"], "filters": [
             {"name": "CircuitBreaker", "args": {
                 "name": "c1", "fallbackUri": "forward:/fb"}}]},
        {"id": "rt", "uri": "http://127.0.0.1:1",
         "predicates": ["Path=/rt/**"], "filters": ["Retry=2"]},
        {"id": "fw", "uri": "forward:/fb", "predicates": ["Path=/fw/**"]},
        {"id": "fb", "uri": up, "predicates": ["Path=/fb"]},
        {"id": "ts", "uri": up, "predicates": ["Path=/ts/**"], "filters": [
            "AddRequestHeader=tracestate, gw=op",
            "SetRequestHeader=X-Other, 1"]},
        {"id": "fwts", "uri": "forward:/ts/f", "predicates": ["Path=/fwts"],
         "filters": ["AddRequestHeader=tracestate, first=op"]}]))
    plog = os.path.join(procs.dir, "policy.jsonl")
    pg = procs.gateway("--routes", pol, "--access-log", plog,
                       log="policy-gw.log")
    sts = [pg.request("GET", "/rl/x", headers={"X-User": "u"})[0]
           for _ in range(2)]
    sts += [pg.request("GET", p)[0] for p in ("/cb/x?q=1", "/rt/x", "/fw/y")]
    c.eq(sts, [200, 429, 200, 502, 200], "policy routes answer")
    h.wait_for(lambda: len(log_lines(plog)) >= 5, "five policy log lines")
    got = [(x["path"], x["query"], x["status"], x["route"], x["forwarded_to"],
            x["retries"], x["rate_limited"], x["fallback"], x["breaker"])
           for x in log_lines(plog)]
    c.eq(got, [
        ("/rl/x", None, 200, "rl", None, 0, False, False, None),
        ("/rl/x", None, 429, "rl", None, 0, True, False, None),
        ("/cb/x", "q=1", 200, "cb", "fb", 0, False, True, "closed"),
        ("/rt/x", None, 502, "rt", None, 2, False, False, None),
        ("/fw/y", None, 200, "fw", "fb", 0, False, False, None)],
        "the access log: rate limited, retries, a fallback logged with the "
        "client's path, its route and breaker, and the route that answered")

    # --- trace context: a new trace, and a header's trailing whitespace ---
    # a tracestate belongs to the trace its traceparent names: with none,
    # an invalid one or several, the gateway starts a new trace and sends
    # no tracestate (W3C: discarded); it went on with the new trace before
    tid = "0af7651916cd43dd8448eb211c80319c"
    for what, hdrs in (
            ("no traceparent", [("tracestate", "vendor=x")]),
            ("an invalid traceparent", [
                ("traceparent", "00-%s-b7ad6b7169203331-0" % tid),
                ("tracestate", "vendor=x")]),
            ("two traceparents", [
                ("traceparent", "00-%s-b7ad6b7169203331-01" % tid),
                ("traceparent", "00-%s-b7ad6b7169203332-01" % tid),
                ("tracestate", "vendor=x")])):
        data = h.raw(pg.port, b"GET /fb HTTP/1.1\r\nHost: x\r\n" + b"".join(
            b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in hdrs) +
            b"Connection: close\r\n\r\n")
        body_ = data.split(b"\r\n\r\n", 1)[-1]
        sent = h.echoed_header(body_, "traceparent")
        c.ok(sent and tid not in sent, "%s: a new trace (%r)" % (what, sent))
        c.eq(h.echoed_header(body_, "tracestate"), None,
             "%s: no tracestate upstream" % what)
    # a field value's trailing whitespace is not part of it (RFC 9110 5.5):
    # a valid traceparent followed by a space started a new trace
    data = h.raw(pg.port, b"GET /fb HTTP/1.1\r\nHost: x\r\ntraceparent: "
                 b"00-%s-b7ad6b7169203331-01 \t\r\ntracestate: vendor=x\r\n"
                 b"Connection: close\r\n\r\n" % tid.encode())
    body_ = data.split(b"\r\n\r\n", 1)[-1]
    sent = h.echoed_header(body_, "traceparent")
    c.ok(sent and sent.startswith("00-%s-" % tid),
         "a traceparent with trailing whitespace keeps its trace: %r" % sent)
    c.eq(h.echoed_header(body_, "tracestate"), "vendor=x",
         "and its tracestate goes on")
    # a tracestate a route's filter adds is the operator's, not the
    # client's: it reaches the upstream with a new trace too, where the
    # client's is dropped (it was dropped with the client's: the drop ran
    # on the headers after the filters)
    def states(path, hdrs):
        data = h.raw(pg.port, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n" +
                     b"".join(b"%s: %s\r\n" % (k.encode(), v.encode())
                              for k, v in hdrs) +
                     b"Connection: close\r\n\r\n")
        body_ = data.split(b"\r\n\r\n", 1)[-1]
        return [v for k, v in json.loads(body_)["headers"]
                if k.lower() == "tracestate"]
    c.eq(states(b"/ts/a", []), ["gw=op"],
         "a new trace: the route's tracestate goes up")
    c.eq(states(b"/ts/a", [("tracestate", "vendor=x")]), ["gw=op"],
         "a new trace: the client's tracestate dropped, the route's kept")
    c.eq(states(b"/ts/a", [
        ("traceparent", "00-%s-b7ad6b7169203331-01" % tid),
        ("tracestate", "vendor=x")]), ["vendor=x", "gw=op"],
        "the client's trace: both go up")
    c.eq(states(b"/fwts", [("tracestate", "vendor=x")]),
         ["first=op", "gw=op"],
         "forwarded: both routes' tracestates, not the client's")

    # --- the access log is JSON (UTF-8) whatever bytes a request carries ---
    # a path's bytes that are not UTF-8 were written raw: the line was no
    # JSON a reader takes (jq, json.loads of the bytes); now each is U+FFFD
    # and UTF-8 is kept as it is
    n_before = len(log_lines(plog))
    data = h.raw(pg.port, b"GET /fw/\xff\xfe-\xc3\xa9-\xc0\xaf-\xed\xa0\x80"
                 b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    c.ok(data.startswith(b"HTTP/1.1 200"), "a path with raw bytes is served")
    h.wait_for(lambda: len(open(plog, "rb").read().splitlines()) > n_before,
               "its access log line")
    last = open(plog, "rb").read().splitlines()[-1]
    try:
        got = json.loads(last)["path"]
    except ValueError as e:
        got = "not JSON: %s" % e
    c.eq(got, "/fw/\ufffd\ufffd-\u00e9-\ufffd\ufffd-\ufffd\ufffd\ufffd",
         "the line is JSON: bytes not UTF-8 as U+FFFD (overlong, surrogate "
         "too), UTF-8 kept")

    # --- a dry run sees the instance choice change (a gray release) ---
    def gray(version):
        return [{"id": "gray", "uri": "lb://svc", "predicates": ["Path=/svc/**"],
                 "metadata": {"version-default": version}}]
    gdoc = procs.write_file("gray.json", json.dumps(gray("1")))
    ginst = procs.write_file("ginst.json", json.dumps({"services": {"svc": [
        {"id": "svc-1", "host": "127.0.0.1", "port": bport,
         "metadata": {"version": "1"}},
        {"id": "svc-2", "host": "127.0.0.1", "port": bport,
         "metadata": {"version": "2"}}]}}))
    gg = procs.gateway("--routes", gdoc, "--instances", ginst,
                       admin_token=TOKEN)
    c.eq([gg.request("GET", p)[0] for p in ("/svc/a", "/svc/b")], [200, 200],
         "gray: served by version 1")
    st, _, data = gg.admin_call("PUT", "/routes/gray?dry_run=1", gray("2"))
    imp = json.loads(data)["impact"]
    c.eq([(x["url"], x["old_route"], x["new_route"], x["old_instance"],
           x["new_instance"]) for x in imp["changed"]],
         [("/svc/a", "gray", "gray", "svc-1", "svc-2"),
          ("/svc/b", "gray", "gray", "svc-1", "svc-2")],
         "a dry run lists the requests whose instance choice changes")

    # --- the ring past its 256 slots, and the generated trace ids ---
    # 300 more requests: the dry run replays the last 256, oldest first
    # (the ring's slots are claimed without a lock: access_log.c)
    ids = []
    for i in range(300):
        st, _, data = gg.request("GET", "/svc/t%d" % i)
        ids.append(h.echoed_header(data, "traceparent"))
    gone = [{"id": "gray", "uri": "lb://svc", "predicates": ["Path=/none/**"]}]
    st, _, data = gg.admin_call("PUT", "/routes/gray?dry_run=1", gone)
    imp = json.loads(data)["impact"]
    c.eq((imp["requests"], [x["url"] for x in imp["changed"]]),
         (256, ["/svc/t%d" % i for i in range(44, 300)]),
         "past 256 requests the dry run replays the last 256 in order")
    # a request the ring could not keep whole (its headers past 1 KB or
    # the 16th, a path past 1023 bytes) is replayed with less than it
    # carried: the impact says how many, where it said nothing
    c.eq(imp.get("cut"), 0, "none of them cut")
    gg.request("GET", "/svc/big", headers={"Cookie": "c=" + "v" * 1500})
    gg.request("GET", "/svc/" + "p" * 1100)
    gg.request("GET", "/svc/many", headers={
        "X-H%d" % i: "1" for i in range(20)})
    st, _, data = gg.admin_call("PUT", "/routes/gray?dry_run=1", gone)
    c.eq(json.loads(data)["impact"].get("cut"), 3,
         "the dry run counts the requests it replays cut")
    # a field exactly as long as its room (path 1023 bytes, query 511,
    # Host 255) is kept whole: not cut (each was counted cut before)
    gg.request("GET", "/svc/" + "p" * 1018)
    gg.request("GET", "/svc/q?" + "q" * 511)
    gg.request("GET", "/svc/h", headers={"Host": "h" * 255})
    st, _, data = gg.admin_call("PUT", "/routes/gray?dry_run=1", gone)
    c.eq(json.loads(data)["impact"].get("cut"), 3,
         "a path, query and Host as long as their rooms are not cut")
    gg.request("GET", "/svc/" + "p" * 1019)  # a byte past: cut
    gg.request("GET", "/svc/q?" + "q" * 512)
    gg.request("GET", "/svc/h", headers={"Host": "h" * 256})
    st, _, data = gg.admin_call("PUT", "/routes/gray?dry_run=1", gone)
    c.eq(json.loads(data)["impact"].get("cut"), 6,
         "a byte past the room is cut")
    ok = [x for x in ids if x and re.fullmatch(
        r"00-[0-9a-f]{32}-[0-9a-f]{16}-01", x)]
    c.eq(len(ok), 300, "300 generated traceparents, all well formed")
    traces = [x.split("-")[1] for x in ok]
    spans = [x.split("-")[2] for x in ok]
    c.eq((len(set(traces)), len(set(spans))), (300, 300),
         "every generated trace id and span id differs")
    # each digit place of the ids takes many values (no place stuck), and
    # together the ids use all sixteen digits
    stuck = [i for i in range(48)
             if len({(t + s)[i] for t, s in zip(traces, spans)}) < 8]
    c.eq(stuck, [], "no digit place of the ids is stuck")
    c.eq("".join(sorted(set("".join(traces + spans)))), "0123456789abcdef",
         "the ids use all sixteen hex digits")

    # --- rotation: the file renamed, SIGUSR1 reopens it by its name ---
    # (SIGUSR1 ended the gateway at once before: its default action)
    before = len(open(plog, "rb").read().splitlines())
    os.rename(plog, plog + ".1")
    c.eq(pg.request("GET", "/fb")[0], 200, "served into the renamed file")
    os.kill(pg.proc.pid, signal.SIGUSR1)
    try:  # the file exists once opened, the descriptor swapped after
        h.wait_for(lambda: "reopened" in procs.log("policy-gw.log"),
                   "the log reopened by name")
    except AssertionError as e:
        c.ok(False, "SIGUSR1: %s (gateway exit %r)" % (e, pg.proc.poll()))
    else:
        c.eq(pg.request("GET", "/fb?after=1")[0], 200, "served after SIGUSR1")
        h.wait_for(lambda: log_lines(plog), "a line in the new file")
        c.eq([(x["path"], x["query"]) for x in log_lines(plog)],
             [("/fb", "after=1")], "the new file has the request after")
        c.eq(len(open(plog + ".1", "rb").read().splitlines()), before + 1,
             "the renamed file the ones before")
    c.eq(pg.proc.poll(), None, "the gateway still runs")

    # --- lines the log cannot take are counted and said, not lost unsaid ---
    if os.path.exists("/dev/full"):  # every write: ENOSPC
        fg = procs.gateway("--routes", pol, "--access-log", "/dev/full",
                           log="full.log")
        c.eq([fg.request("GET", "/fb")[0] for _ in range(3)], [200] * 3,
             "served with a full disk under the log")
        try:
            h.wait_for(lambda: fg.metric("gateway_access_log_lost_total")
                       == 3, "three lost lines counted")
            c.ok(True, "gateway_access_log_lost_total counts the lines")
        except AssertionError:
            c.ok(False, "gateway_access_log_lost_total counts the lines: %r"
                 % fg.metric("gateway_access_log_lost_total"))
        err = procs.log("full.log")
        c.ok(err.count("access log") == 1 and "No space left" in err,
             "and the first loss is logged once: %r" % err[-300:])

    # --- an access log that cannot be opened: the start refused, named ---
    # ('' printed only "No such file or directory", naming nothing)
    for path in ("", procs.dir, os.path.join(procs.dir, "no", "x.log")):
        try:
            r = subprocess.run([h.binary(), "--listen", "127.0.0.1:%d" %
                                h.free_port(), "--admin", "off",
                                "--routes", routes, "--access-log", path],
                               capture_output=True, timeout=5)
            rc, err = r.returncode, r.stderr.decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            rc, err = None, "started"
        c.ok(rc not in (0, None) and "--access-log '%s'" % path in err,
             "--access-log %r: refused at start naming it (exit %s: %r)"
             % (path, rc, err[-200:]))

    # --- the console ---
    st, hdrs, page = gw.admin_call("GET", "/", token=False)
    c.eq(st, 200, "the console page is served without the token")
    html = page.decode()
    outside = re.findall(r'(?:src|href)\s*=\s*["\']?\s*(?:[a-z]+:)?//', html,
                         re.I)
    c.eq(outside, [], "no src/href to another host")
    if not os.path.exists(CHROMIUM):
        c.skip("the console in a browser: %s missing "
               "(tests/install-deps.sh installs chromium)" % CHROMIUM)
        return
    # the page shows what /changes answers (16; it showed the first 8) and
    # a source's error with its location (a line and column were dropped)
    for v in range(8, 17):
        newsrc["version"] = str(v)
        st, _, _ = gw.admin_call("PUT", "/routes/fresh", newsrc)
        c.eq(st, 200, "PUT fresh version %d" % v)
    # the predicate cells as a route document writes them: each with its
    # name (Path=/c/**), a default left out (the trailing slash matched),
    # a flag that is not the default named, a time as a time
    st, _, _ = gw.admin_call("PUT", "/routes/cells", {"routes": [
        {"id": "cells-1", "uri": "http://127.0.0.1:%d" % bport,
         "predicates": ["Path=/c/**", "Host=**.example.com",
                        "Header=X-A, v.*", "After=2020-01-01T00:00:00Z"]},
        {"id": "cells-2", "uri": "http://127.0.0.1:%d" % bport,
         "predicates": ["Path=/e/{x},false", "Method=GET,POST"]}]})
    c.eq(st, 200, "PUT the cells source")
    with open(routes, "w") as f:
        f.write('{"version": "9",\n "routes": [ oops ]}\n')
    h.wait_for(lambda: (gw.source("ops") or {}).get("error"),
               "the broken file's error in /status")
    url = "http://127.0.0.1:%d/#token=%s&explain=/api/users/7" % (gw.admin,
                                                                  TOKEN)
    dom = chromium(["--dump-dom", url]).stdout.decode("utf-8", "replace")
    # the address's keys: token and explain; another (a misspelling) or
    # one twice is said on the page, where it was ignored unsaid
    for frag, what in (("explian=/api/users/7", "#explian"),
                       ("explain=/a&explain=/b", "#explain given twice")):
        d2 = chromium(["--dump-dom", "http://127.0.0.1:%d/#token=%s&%s"
                       % (gw.admin, TOKEN, frag)]).stdout.decode(
                           "utf-8", "replace")
        c.ok(re.search(r'id="address-msg"[^>]*>[^<]*%s' % re.escape(what),
                       d2), "the page says %s is not read" % what)
    c.ok(re.search(r'id="address-msg"[^>]*></p>', dom),
         "and nothing for #token= and #explain=")
    c.eq(dom.count("source fresh (version "), 10,
         "the DOM lists every change /changes answers (fresh 7 to 16)")
    c.ok(re.search(r'class="bad">line 2, column 14: JSON syntax error', dom),
         "the DOM shows a source's error with its line and column")
    fp = gw.status()["fingerprint"]
    c.ok('id="fingerprint">%s<' % fp in dom, "the DOM shows the fingerprint")
    for rid in ("api", "users", "echo"):
        c.ok('route-id mono">%s<' % rid in dom, "the DOM shows route %s" % rid)
    c.ok('source-name">ops<' in dom, "the DOM shows the source name")
    for rid, cell in (
            ("api", "Path=/api/**"),
            ("cells-1", "Path=/c/**\nHost=**.example.com\nHeader=X-A, v.*\n"
                        "After=2020-01-01T00:00:00Z"),
            ("cells-2", "Path=/e/{x}, matchTrailingSlash=false\n"
                        "Method=GET,POST")):
        got = re.search(r'route-id mono">%s</td><td>[^<]*</td>'
                        r'<td class="mono">([^<]*)<' % re.escape(rid), dom)
        c.eq(got and got.group(1), cell, "the predicate cell of %s" % rid)
    c.ok('instance-id mono">svc-2<' in dom, "the DOM shows the instances")
    c.ok("shadowed by api" in dom, "the DOM shows the shadow warning")
    c.ok(re.search(r">3 req, p99 &lt;= [0-9.]+ ms<", dom),
         "the DOM shows the traffic of route echo")
    c.ok(re.search(r'explain-winner">GET /api/users/7 =&gt; <b>api</b>', dom),
         "the DOM shows an explain result")
    # #explain= in the address with the token typed in when asked: the
    # explain ran before the token was there (401) and never after
    page = Page("http://127.0.0.1:%d/#explain=/api/users/7" % gw.admin,
                os.path.join(procs.dir, "profile"))
    try:
        h.wait_for(lambda: page.eval(
            'document.getElementById("token-bar").style.display') == "block",
            "the console asks for the token", 15)
        page.eval('document.getElementById("token").value = %s; '
                  'document.getElementById("token-set").click()'
                  % json.dumps(TOKEN))
        try:
            h.wait_for(lambda: "=> api" in (page.eval(
                '(document.getElementById("explain-winner") || {})'
                '.textContent') or ""), "the explain result", 10)
            c.ok(True, "#explain= runs once the token is typed in")
        except AssertionError as e:
            c.ok(False, "#explain= runs once the token is typed in: %s" % e)
    finally:
        page.close()
    out_dir = sys.argv[2] if len(sys.argv) > 2 else procs.dir
    shot = os.path.join(out_dir, "console.png")
    chromium(["--window-size=1280,1100", "--screenshot=" + shot, url])
    c.ok(os.path.exists(shot) and os.path.getsize(shot) > 10000,
         "a screenshot of the console at %s" % shot)


h.run("gateway_ops", body)
