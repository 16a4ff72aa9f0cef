"""mini-gateway end to end: Retry run for real. Retries by status (with
exponential backoff, timed), by series, only for the listed methods; a
retry goes to another instance with the request body kept and sent again;
a body larger than --retry-body-bytes is not retried, nor sent to a
breaker's fallback: each such request is logged and counted
(gateway_body_not_replayed_total)."""
import json
import socket
import threading
import time

import gwharness as h


def failing_server(status=503):
    """An upstream that reads each whole request, then answers `status`.
    Returns (port, list of body sizes received)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    got = []

    def serve():
        while True:
            try:
                s, _ = srv.accept()
            except OSError:
                return
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            n = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    n = int(line.split(b":")[1])
            while len(rest) < n:
                chunk = s.recv(65536)
                if not chunk:
                    break
                rest += chunk
            got.append(len(rest))
            s.sendall(b"HTTP/1.1 %d Oops\r\nContent-Length: 0\r\n"
                      b"Connection: close\r\n\r\n" % status)
            s.close()
    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1], got


def body(procs, c):
    _, bport = procs.backend("b1")
    fport, got = failing_server()
    be = "http://127.0.0.1:%d" % bport
    routes = [
        {"id": "status", "uri": be, "predicates": ["Path=/status/**"],
         "filters": [{"name": "Retry", "args": {
             "retries": "2", "statuses": "BAD_GATEWAY",
             "backoff.firstBackoff": "100ms", "backoff.maxBackoff": "1s",
             "backoff.factor": "2"}}]},
        {"id": "series", "uri": be, "predicates": ["Path=/series/**"],
         "filters": ["Retry=1"]},
        {"id": "cbpost", "uri": "http://127.0.0.1:%d" % fport,
         "predicates": ["Path=/cbpost/**"],
         "filters": [{"name": "CircuitBreaker", "args": {
             "name": "cbpost", "fallbackUri": "forward:/fb/x",
             "statusCodes": ["503"], "slidingWindowSize": "100",
             "minimumNumberOfCalls": "100"}}]},
        {"id": "fb", "uri": be, "predicates": ["Path=/fb/**"]},
        {"id": "post", "uri": "lb://svc", "predicates": ["Path=/post/**"],
         "filters": [{"name": "Retry", "args": {
             "retries": "1", "statuses": "503", "methods": "POST"}}]},
    ]
    inst = {"services": {"svc": [
        {"id": "bad", "host": "127.0.0.1", "port": fport, "weight": 1000},
        {"id": "good", "host": "127.0.0.1", "port": bport, "weight": 1}]}}
    gw = procs.gateway(
        "--routes", procs.write_file("routes.json", json.dumps(
            {"version": "1", "routes": routes})),
        "--instances", procs.write_file("inst.json", json.dumps(inst)),
        "--retry-body-bytes", "100000")

    def retries(route):
        st, _, body = gw.admin_call("GET", "/metrics")
        for line in body.decode().splitlines():
            if line.startswith('gateway_retry_attempts_total{route="%s"}'
                               % route):
                return int(float(line.rsplit(" ", 1)[1]))
        return 0

    # by status, with backoff 100 ms then 200 ms
    t0 = time.monotonic()
    st = gw.request("GET", "/status/x?status=502")[0]
    took = time.monotonic() - t0
    c.eq(st, 502, "every attempt 502: the last answer")
    c.eq(retries("status"), 2, "retries=2: two more attempts")
    c.ok(0.3 <= took < 1.5, "backoff 100 + 200 ms: took %.3f s" % took)
    # statuses add to the series (SERVER_ERROR by default), as in SCG
    c.eq(gw.request("GET", "/status/x?status=503")[0], 503, "503 answered")
    c.eq(retries("status"), 4, "503: retried by the default series")
    c.eq(gw.request("GET", "/status/x?status=404")[0], 404, "404 answered")
    c.eq(retries("status"), 4, "404: neither listed nor in the series")
    # the shortcut Retry=1: series SERVER_ERROR, methods GET
    gw.request("GET", "/series/x?status=503")
    c.eq(retries("series"), 1, "5xx series retried once")
    gw.request("GET", "/series/x?status=404")
    c.eq(retries("series"), 1, "4xx not retried")
    gw.request("POST", "/series/x?status=503", body=b"x")
    c.eq(retries("series"), 1, "POST not retried (methods GET)")

    # a retry on another instance, the body sent again
    payload = b"p" * 5000
    st, _, data = gw.request("POST", "/post/x", body=payload)
    c.eq(st, 200, "POST retried on the other instance")
    c.eq(json.loads(data)["body_bytes"], len(payload),
         "the retry carried the whole body")
    c.ok(got and got[-1] == len(payload),
         "the failing instance had the body too: %r" % got[-1:])
    # beyond --retry-body-bytes: no retry, the failure is the answer
    before = retries("post")
    st, _, _ = gw.request("POST", "/post/x", body=b"q" * 200000)
    c.eq(st, 503, "a body over --retry-body-bytes is not retried")
    c.eq(retries("post"), before, "no retry counted")
    # ... and not silently: counted and logged
    def not_replayed(route):
        st, _, body = gw.admin_call("GET", "/metrics")
        for line in body.decode().splitlines():
            if line.startswith('gateway_body_not_replayed_total{route="%s"}'
                               % route):
                return int(float(line.rsplit(" ", 1)[1]))
        return 0
    c.eq(not_replayed("post"), 1, "the retry not made is counted")
    log = procs.log("gateway.log")
    c.ok("route post: Retry not made" in log and "--retry-body-bytes" in log,
         "the retry not made is logged: %r" % log[-400:])
    # a breaker's fallback: taken with a body it kept, not with a longer one
    st, _, data = gw.request("POST", "/cbpost/x", body=b"s" * 5000)
    c.eq(st, 200, "a failed POST goes to the fallback")
    c.eq(json.loads(data)["body_bytes"], 5000, "the fallback had the body")
    c.eq(not_replayed("cbpost"), 0, "nothing counted for a kept body")
    st, _, _ = gw.request("POST", "/cbpost/x", body=b"L" * 200000)
    c.eq(st, 503, "a body over --retry-body-bytes: the failure answers")
    c.eq(not_replayed("cbpost"), 1, "the fallback not taken is counted")
    c.ok("route cbpost: CircuitBreaker fallback not made"
         in procs.log("gateway.log"), "the fallback not taken is logged")


h.run("gateway_retry", body)
