"""mini-gateway end to end: CircuitBreaker run for real. A backend that
fails (statusCodes) opens the breaker: calls go to fallbackUri
(forward:/path, answered by another route) without reaching the backend;
after waitDurationInOpenState it is half-open, and healthy calls close it.
Slow calls trip the slow-call model; SCG's default 1 s time limit answers
504. Breaker state per name is in /metrics. FallbackHeaders tells the
fallback what failed. Without a fallbackUri, resumeWithoutError answers
as SCG's resumed exchange: a connect failure an empty 200, a listed
status the upstream's answer, a timeout still 504."""
import json
import subprocess
import time

import gwharness as h


def state(gw, name):
    st, _, body = gw.admin_call("GET", "/metrics")
    for line in body.decode().splitlines():
        if line.startswith('gateway_circuit_breaker_state{name="%s"}' % name):
            return int(float(line.rsplit(" ", 1)[1]))
    return None


def body(procs, c):
    _, bport = procs.backend("b1")
    _, fport = procs.backend("fb")
    be, fb = "http://127.0.0.1:%d" % bport, "http://127.0.0.1:%d" % fport
    routes = [
        {"id": "cb", "uri": be, "predicates": ["Path=/cb/**"],
         "filters": [{"name": "CircuitBreaker", "args": {
             "name": "svc", "fallbackUri": "forward:/fallback/svc",
             "statusCodes": ["500", "BAD_GATEWAY"],
             "slidingWindowSize": "4", "minimumNumberOfCalls": "4",
             "failureRateThreshold": "50", "waitDurationInOpenState": "1s",
             "permittedNumberOfCallsInHalfOpenState": "2"}}]},
        {"id": "fallback", "uri": fb, "predicates": ["Path=/fallback/**"],
         "filters": ["RemoveRequestParameter=status", "FallbackHeaders"]},
        {"id": "slow", "uri": be, "predicates": ["Path=/slow/**"],
         "filters": [{"name": "CircuitBreaker", "args": {
             "name": "slow", "slowCallDurationThreshold": "100ms",
             "slowCallRateThreshold": "50", "slidingWindowSize": "4",
             "minimumNumberOfCalls": "4", "timeoutDuration": "2s",
             "waitDurationInOpenState": "30s"}}]},
        {"id": "tl", "uri": be, "predicates": ["Path=/tl/**"],
         "filters": ["CircuitBreaker=tl"]},
    ]
    dead = "http://127.0.0.1:%d" % h.free_port()  # nothing listens there
    for rid, uri, resume in (("rw", dead, True), ("nrw", dead, False),
                             ("rws", be, True), ("rwt", be, True)):
        routes.append(
            {"id": rid, "uri": uri, "predicates": ["Path=/%s/**" % rid],
             "filters": [{"name": "CircuitBreaker", "args": {
                 "name": rid, "resumeWithoutError": resume,
                 "statusCodes": ["500"], "timeoutDuration": "300ms"}}]})
    # SCG's fallbackUri with the route's variables in it
    routes.append({"id": "vars", "uri": dead,
                   "predicates": ["Host={sub}.example.com",
                                  "Path=/vars/{*segments}"],
                   "filters": [{"name": "CircuitBreaker", "args": {
                       "name": "vars",
                       "fallbackUri": "forward:/fallback/{sub}{segments}"}}]})
    gw = procs.gateway("--routes", procs.write_file(
        "routes.json", json.dumps({"version": "1", "routes": routes})))

    def who(path):
        st, _, data = gw.request("GET", path)
        try:
            return st, json.loads(data)["instance"]
        except ValueError:
            return st, None

    c.eq(who("/cb/x"), (200, "b1"), "closed: the backend answers")
    c.eq(state(gw, "svc"), 0, "closed in /metrics")
    # failures: each goes to the fallback, the fourth opens the breaker
    st, _, data = gw.request("GET", "/cb/x?status=502")
    c.ok(h.echoed_header(data, "Execution-Exception-Type").endswith(
        "CircuitBreakerStatusCodeException") and
        h.echoed_header(data, "Execution-Exception-Message") ==
        "502 Bad Gateway", "FallbackHeaders: the status failure")
    fails = [who("/cb/x?status=500") for _ in range(3)]
    c.ok(all(f == (200, "fb") for f in fails),
         "a listed status goes to the fallback: %r" % fails)
    c.eq(state(gw, "svc"), 1, "open after 4 of 4 failed")
    st, _, data = gw.request("GET", "/cb/x?status=500")
    c.eq(h.echoed_header(data, "Execution-Exception-Type"),
         "io.github.resilience4j.circuitbreaker.CallNotPermittedException",
         "FallbackHeaders: the open breaker's exception")
    # open: the healthy backend is not called
    c.eq(who("/cb/x"), (200, "fb"), "open: the fallback answers")
    st, _, data = gw.request("GET", "/cb/x")
    c.eq(json.loads(data)["path"], "/fallback/svc",
         "the fallback got the fallbackUri's path")
    time.sleep(1.2)
    c.eq(who("/cb/x"), (200, "b1"), "after the wait: half-open, permitted")
    c.eq(state(gw, "svc"), 2, "half-open in /metrics")
    c.eq(who("/cb/x"), (200, "b1"), "second permitted call")
    c.eq(state(gw, "svc"), 0, "closed again after healthy calls")
    opened = gw.metric('gateway_circuit_breaker_transitions_total{to="open"}')
    c.ok(opened is not None and opened >= 1, "transitions counted")

    # the slow-call model: 4 slow successes open it; then 503 (no fallback)
    slow = [gw.request("GET", "/slow/x?delay=200")[0] for _ in range(4)]
    c.eq(slow, [200] * 4, "slow calls still answer")
    # (the backend would answer this one at once with 200)
    st = gw.request("GET", "/slow/x")[0]
    c.eq(st, 503, "slow-call rate over the threshold: open, 503")

    # SCG's default time limit: 1 s, then 504
    t0 = time.monotonic()
    st = gw.request("GET", "/tl/x?delay=3000")[0]
    took = time.monotonic() - t0
    c.eq(st, 504, "past the 1 s time limit: 504")
    c.ok(0.9 < took < 1.8, "answered at the time limit (%.2f s)" % took)

    # the fallback path expands the route's variables (a value's bytes a
    # path cannot carry as they are %XX-encoded), the query kept
    st, _, data = gw.request("GET", "/vars/users/a%20b?q=1",
                             headers={"Host": "shop.example.com"})
    echo = json.loads(data) if st == 200 else {}
    c.eq((st, echo.get("instance"), echo.get("path"), echo.get("query")),
         (200, "fb", "/fallback/shop/users/a%20b", "q=1"),
         "fallbackUri {variables} expanded")
    # a variable no pattern of the route captures: refused at apply
    bad = {"id": "badvars", "uri": dead, "predicates": ["Path=/bv/{x}"],
           "filters": [{"name": "CircuitBreaker", "args": {
               "fallbackUri": "forward:/fallback/{y}"}}]}
    st, _, data = gw.admin_call("PUT", "/routes/other/badvars", bad)
    err = json.loads(data).get("error", {}) if st == 400 else {}
    c.ok(st == 400 and err.get("path", "").endswith("args.fallbackUri") and
         "{y}" in err.get("message", ""),
         "a fallbackUri variable the route lacks: refused (%r)" % (err,))
    # captured by one of the Path's patterns only: a request the other one
    # matched had no {x} and its fallback was answered 500
    part = {"id": "partvars", "uri": dead,
            "predicates": ["Path=/pv/{x},/pw/**"],
            "filters": [{"name": "CircuitBreaker", "args": {
                "fallbackUri": "forward:/fallback/{x}"}}]}
    st, _, data = gw.admin_call("PUT", "/routes/other/partvars", part)
    err = json.loads(data).get("error", {}) if st == 400 else {}
    c.ok(st == 400 and err.get("path", "").endswith("args.fallbackUri") and
         "{x}" in err.get("message", ""),
         "a fallbackUri variable only some patterns capture: refused (%r)"
         % (err,))
    c.eq(gw.request("GET", "/pw/1")[0], 404, "and the route does not serve")
    # a default filters' breaker with a variable a route lacks: refused at
    # the default filter, naming the route (its requests were answered 500)
    df = procs.write_file("df.json", json.dumps([
        {"name": "CircuitBreaker", "args": {
            "fallbackUri": "forward:/fallback/{x}"}}]))
    r2 = procs.write_file("r2.json", json.dumps([
        {"id": "hasx", "uri": dead, "predicates": ["Path=/hx/{x}"]},
        {"id": "nox", "uri": dead, "predicates": ["Path=/nx/**"]}]))
    try:  # an accepted start serves (killed after 5 s)
        r = subprocess.run([h.binary(), "--routes", r2, "--default-filters",
                            df, "--listen", "127.0.0.1:%d" % h.free_port(),
                            "--admin", "off"], capture_output=True, timeout=5)
        rc, out = r.returncode, r.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        rc, out = 0, "started"
    c.ok(rc != 0 and "defaultFilters[0].args.fallbackUri" in out
         and "nox" in out,
         "a default breaker's variable a route lacks: the start is refused "
         "naming it (%s: %r)" % (rc, out[-300:]))

    # resumeWithoutError without a fallbackUri (SCG's
    # handleErrorWithoutFallback): the error is dropped, the exchange ends
    st, hdrs, data = gw.request("GET", "/rw/x")
    c.eq((st, data, hdrs.get("content-length")), (200, b"", "0"),
         "resumeWithoutError, upstream down: an empty 200")
    c.eq(gw.request("GET", "/nrw/x")[0], 502,
         "without resumeWithoutError, upstream down: 502")
    st, _, data = gw.request("GET", "/rws/x?status=500")
    c.eq((st, json.loads(data)["instance"]), (500, "b1"),
         "resumeWithoutError, a listed status: the upstream's answer")
    c.eq(gw.request("GET", "/rwt/x?delay=1500")[0], 504,
         "resumeWithoutError, past the time limit: still 504")


h.run("gateway_breaker", body)
