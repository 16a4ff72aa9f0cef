"""mini-gateway end to end: a backend killed under load. Connect failures
are retried on another instance (no request fails), reported as outcomes,
and passive health ejects the dead instance so retries stop piling up."""
import http.client
import json
import threading
import time

import gwharness as h


def body(procs, c):
    ports, bprocs = {}, {}
    for ident in ("b1", "b2", "b3"):
        bprocs[ident], ports[ident] = procs.backend(ident)
    routes = procs.write_file("routes.json", json.dumps({"version": "1",
        "routes": [{"id": "svc", "uri": "lb://svc",
                    "predicates": ["Path=/svc/**"]}]}))
    inst = procs.write_file("inst.json", json.dumps({"services": {"svc": [
        {"id": i, "host": "127.0.0.1", "port": ports[i]}
        for i in ("b1", "b2", "b3")]}}))
    gw = procs.gateway("--routes", routes, "--instances", inst)

    results = []
    lock = threading.Lock()
    stop = threading.Event()

    def load():
        conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                conn.request("GET", "/svc/x")
                r = conn.getresponse()
                data = r.read()
                inst = json.loads(data)["instance"] if r.status == 200 \
                    else None
                rec = (t0, r.status, inst)
            except Exception as e:
                rec = (t0, -1, repr(e))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", gw.port,
                                                  timeout=10)
            with lock:
                results.append(rec)
        conn.close()

    def count(since=None):
        with lock:
            return len(results) if since is None else \
                sum(1 for r in results if r[0] > since)

    def run_until(seconds, enough, deadline_s=20.0):
        """At least `seconds` of load and until enough() holds: the
        counts asserted below are reached by polling, not assumed of a
        fixed sleep (a loaded runner serves fewer requests per second).
        Bounded: after deadline_s the checks below say what was short."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < deadline_s:
            if time.monotonic() - t0 >= seconds and enough():
                return
            time.sleep(0.02)

    threads = [threading.Thread(target=load) for _ in range(3)]
    for t in threads:
        t.start()
    run_until(0.5, lambda: count() > 50)
    before = count()
    bprocs["b2"].kill()
    bprocs["b2"].wait()
    killed_at = time.monotonic()
    run_until(2.0, lambda: count(killed_at) > 200)
    stop.set()
    for t in threads:
        t.join(20)

    after = [r for r in results if r[0] > killed_at]
    c.ok(before > 50, "%d requests before the kill" % before)
    c.ok(len(after) > 200, "%d requests after the kill" % len(after))
    bad = [r for r in results if r[1] != 200]
    c.eq(len(bad), 0, "failed requests: %r" % bad[:5])
    c.ok(all(r[2] != "b2" for r in results if r[0] > killed_at + 0.05),
         "nothing answered by the killed instance")
    c.ok({r[2] for r in after} == {"b1", "b3"}, "the others share the load")
    retries = gw.metric("gateway_upstream_retries_total")
    c.ok(retries is not None and retries >= 1,
         "connect failures were retried (%r)" % retries)
    s = gw.status()
    c.ok(s["ejections"] >= 1, "the dead instance was ejected (%r)" %
         s["ejections"])
    # once ejected it is no longer tried: retries stay far below requests
    c.ok(retries < 20, "retries bounded by ejection: %r for %d requests" %
         (retries, len(after)))
    outcomes = gw.metric("switchyard_outcomes_total")
    c.ok(outcomes is not None and outcomes >= len(results),
         "every attempt reported an outcome (%r)" % outcomes)


h.run("gateway_failover", body)
