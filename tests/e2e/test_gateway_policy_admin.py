"""mini-gateway end to end: a policy changed through the admin API under
load takes effect at the next request (a generous limiter replaced by a
tight one), an unchanged policy keeps its state across publishes, and the
run-or-refuse rule: what the gateway does not run is
refused at apply with a located error, the live routes untouched."""
import http.client
import json
import threading
import time

import gwharness as h


def limiter(rate, burst):
    return {"name": "RequestRateLimiter", "args": {
        "redis-rate-limiter.replenishRate": str(rate),
        "redis-rate-limiter.burstCapacity": str(burst),
        "key-resolver": "#{@remoteAddrKeyResolver}"}}


def body(procs, c):
    _, bport = procs.backend("b1")
    be = "http://127.0.0.1:%d" % bport
    route = {"id": "r", "uri": be, "predicates": ["Path=/r/**"],
             "filters": [limiter(100000, 100000)]}
    gw = procs.gateway()  # routes through the admin API only: source api
    st, _, rep = gw.admin_call("PUT", "/routes/api",
                               {"version": "1", "routes": [route]})
    c.eq(st, 200, "the document through the admin API: %r" % rep[:200])

    results, lock, stop = [], threading.Lock(), threading.Event()

    def load():
        conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
        while not stop.is_set():
            t0 = time.monotonic()
            conn.request("GET", "/r/x")
            r = conn.getresponse()
            r.read()
            with lock:
                results.append((t0, r.status))

    threads = [threading.Thread(target=load) for _ in range(3)]
    for t in threads:
        t.start()
    def counted(cond, timeout=10.0):
        # (a loaded machine, an ASan build: the counts, not a fixed time)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with lock:
                if cond(time.monotonic()):
                    return
            time.sleep(0.02)

    counted(lambda now: sum(t0 < now - 0.05 for t0, _ in results) > 20)
    tight = dict(route, filters=[limiter(1, 1)])
    st, _, rep = gw.admin_call("PUT", "/routes/api/r", tight)
    changed = time.monotonic()
    c.eq(st, 200, "PUT the tight limiter: %r" % rep[:200])
    counted(lambda now: sum(t0 > changed for t0, _ in results) > 20)
    stop.set()
    for t in threads:
        t.join(10)
    before = [s for t0, s in results if t0 < changed - 0.05]
    after = [s for t0, s in results if t0 > changed]
    c.ok(len(before) > 20 and all(s == 200 for s in before),
         "generous limiter: all allowed (%d)" % len(before))
    c.ok(len(after) > 20 and after.count(200) <= 2,
         "tight limiter from the next request on: %d of %d allowed"
         % (after.count(200), len(after)))

    # state survives publishes: the tight bucket is empty; another route
    # changing (a publish) does not refill it
    c.eq(gw.request("GET", "/r/x")[0], 429, "the tight bucket is empty")
    other = {"id": "o", "uri": be, "predicates": ["Path=/o/**"]}
    st, _, _ = gw.admin_call("PUT", "/routes/api/o", other)
    c.eq(st, 200, "another route published")
    c.eq(gw.request("GET", "/r/x")[0], 429,
         "after the publish: still empty (the bucket was kept)")

    # run or refuse: a ws:// upstream is not run by the gateway
    bad = {"id": "ws", "uri": "ws://127.0.0.1:1", "predicates": ["Path=/ws"]}
    st, _, data = gw.admin_call("PUT", "/routes/api/ws", bad)
    c.eq(st, 400, "a ws:// route is refused")
    err = json.loads(data).get("error", {}) if st == 400 else {}
    c.ok("ws" in err.get("message", "") and "uri" in err.get("path", ""),
         "the error names the item and where: %r" % err)
    # an https:// upstream too: the gateway has no TLS client, and an
    # accepted https route answered 502 to every request
    bad = {"id": "tls", "uri": "https://127.0.0.1:1",
           "predicates": ["Path=/tls"]}
    st, _, data = gw.admin_call("PUT", "/routes/api/tls", bad)
    c.eq(st, 400, "an https:// route is refused")
    err = json.loads(data).get("error", {}) if st == 400 else {}
    c.ok("https" in err.get("message", "") and
         err.get("path", "").endswith("uri"),
         "the error names https and the uri: %r" % err)
    # and a secure (TLS) instance, through which every request was 502
    st, _, data = gw.admin_call("PUT", "/instances/tls", [
        {"id": "t1", "host": "127.0.0.1", "port": bport},
        {"id": "t2", "host": "127.0.0.1", "port": 1, "secure": True}])
    c.eq(st, 400, "a secure instance is refused")
    err = json.loads(data).get("error", {}) if st == 400 else {}
    c.eq(err.get("path"), "[1].secure", "the error names the instance")
    # an unknown filter (not run anywhere) is refused too
    bad = {"id": "sh", "uri": be, "predicates": ["Path=/sh"],
           "filters": ["SecureHeadersTypo"]}
    st, _, data = gw.admin_call("PUT", "/routes/api/sh", bad)
    c.eq(st, 400, "an unknown filter is refused")
    c.eq(gw.request("GET", "/ws")[0], 404, "nothing refused went live")
    c.eq(gw.request("GET", "/tls")[0], 404, "the https route is not live")
    c.eq(gw.request("GET", "/r/x")[0] in (200, 429), True,
         "the live route still answers")


h.run("gateway_policy_admin", body)
