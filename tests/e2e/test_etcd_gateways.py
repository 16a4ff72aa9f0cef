"""test_etcd_gateways.py - a fleet of three mini-gateways on one etcd.

Real processes on loopback: one etcd, four test backends, three
mini-gateways started with --etcd. While a client keeps sending requests
to a route that never changes, through all three gateways:
  1. 200 random route and instance changes are written to etcd; every
     gateway converges to the etcd revision of the last write within a
     bound, with the same fingerprint (admin /status), and requests sent
     after convergence get the same answer (status, backend) from all three;
  2. an instance registered with a lease and never renewed leaves routing
     within the TTL plus one watch delivery;
  3. etcd is killed during the changes and restarted, with a compaction in
     between: the gateways keep serving, then converge with nothing missed;
  4. a broken document is rejected by every gateway with its located
     error in the admin API, and the other keys keep working.
Through it all, no request to the unchanged route fails. TAP on stdout.
"""
import difflib
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gwharness
from etcd_harness import (RECONNECT_S, Etcd, Tap, free_port, routes_doc,
                          wait_until)

gwharness.BINARY = os.environ["MINI_GATEWAY"]
P = "/switchyard/"
BOUND_S = 5.0
seed = int(os.environ.get("SY_FLEET_SEED", str(int(time.time()))))
rng = random.Random(seed)
print("# seed %d" % seed)
t = Tap()
started = time.monotonic()
procs = gwharness.Procs()


def finish():
    procs.stop_all()
    t.done()


try:
    etcd = Etcd().start()
    backends = {}
    for bid in ["b1", "b2", "b3", "b4"]:
        backends[bid] = procs.backend(bid)[1]

    def inst(bid):
        return json.dumps({"host": "127.0.0.1", "port": backends[bid]})

    # The route that never changes, on two instances without a lease.
    etcd.put(P + "routes/stable", routes_doc(1, [{
        "id": "stable", "uri": "lb://stable",
        "predicates": ["Path=/stable/**"],
        "metadata": {"lb-policy": "hash", "lb-hash-header": "X-User"}}]))
    etcd.put(P + "instances/stable/b1", inst("b1"))
    etcd.put(P + "instances/stable/b2", inst("b2"))
    gws = [procs.gateway("--etcd", etcd.url) for _ in range(3)]
    rev = etcd.revision()

    def status(g):
        return g.status()

    def revs():
        return [status(g).get("etcd", {}).get("revision", 0) for g in gws]

    t.ok(wait_until(lambda: min(revs()) >= rev, 10),
         "three gateways read etcd at start", revs())

    # --- a client on the unchanged route, all along --------------------
    failures = []
    sent = [0]
    stop_load = threading.Event()

    def load():
        while not stop_load.is_set():
            for g in gws:
                try:
                    st, _, body = g.request("GET", "/stable/ping", timeout=5)
                    ok = st == 200 and json.loads(body)["instance"] in ("b1", "b2")
                    if not ok:
                        failures.append((st, body[:200]))
                except Exception as e:  # noqa: BLE001 - any failure counts
                    failures.append(repr(e))
                sent[0] += 1
            time.sleep(0.002)

    loader = threading.Thread(target=load, daemon=True)
    loader.start()

    services = ["alpha", "beta", "gamma"]
    live = {}
    inst_live = {s: set() for s in services}
    counter = [0]
    broken_now = set()

    def doc(name):
        counter[0] += 1
        routes = []
        for i in range(rng.randint(1, 5)):
            svc = rng.choice(services)
            if rng.random() < 0.7:
                uri = "lb://" + svc
            else:
                uri = "http://127.0.0.1:%d" % backends[rng.choice(
                    sorted(backends))]
            # a hash on a request header: the same instance on every
            # gateway holding the same snapshot (a selection key only on
            # lb:// routes: elsewhere the document would be refused, and a
            # refused document leaves each gateway the last good one it
            # saw, which need not agree: docs/config-sources.md)
            r = {"id": "%s-%d" % (name, i), "uri": uri,
                 "order": rng.choice([0, 0, 1]),
                 "predicates": ["Path=/r/%s/%d/**" % (
                     rng.choice(["a", "b"]), i)]}
            if uri.startswith("lb://"):
                r["metadata"] = {"lb-policy": "hash",
                                 "lb-hash-header": "X-User"}
            routes.append(r)
        return routes_doc(counter[0], routes)

    def broken():
        counter[0] += 1
        return json.dumps({"version": str(counter[0]), "routes": [
            {"id": "ok", "uri": "http://a:80", "predicates": ["Path=/ok"]},
            {"id": "bad", "uri": "http://a:80",
             "predicates": [{"name": "Header", "args": {
                 "header": "X", "regexp": "[0-9+"}}]}]})

    def change():
        r = rng.random()
        if r < 0.12 or not live:
            name = "s%02d" % len(live)
            live[name] = 1
            return etcd.put(P + "routes/" + name, doc(name))
        if r < 0.45:
            name = rng.choice(sorted(live))
            broken_now.discard(name)
            return etcd.put(P + "routes/" + name, doc(name))
        if r < 0.80:
            svc = rng.choice(services)
            bid = rng.choice(sorted(backends))
            inst_live[svc].add(bid)
            return etcd.put(P + "instances/%s/%s" % (svc, bid), inst(bid))
        svc = rng.choice(services)
        if inst_live[svc]:
            bid = rng.choice(sorted(inst_live[svc]))
            inst_live[svc].discard(bid)
            return etcd.delete(P + "instances/%s/%s" % (svc, bid))
        name = rng.choice(sorted(live))
        broken_now.discard(name)
        return etcd.put(P + "routes/" + name, doc(name))

    def explain_difference(fps):
        """What the gateway whose fingerprint differs holds otherwise."""
        views = []
        for g in gws:
            view = []
            for path in ("/routes", "/instances"):
                body = g.admin_call("GET", path)[2].decode()
                view += json.dumps(json.loads(body), indent=1,
                                   sort_keys=True).splitlines()
            views.append(view)
        odd = [i for i in range(3) if fps.count(fps[i]) == 1][:1] or [0]
        other = 1 if odd[0] == 0 else 0
        for line in difflib.unified_diff(views[other], views[odd[0]],
                                         "gateway %d" % other,
                                         "gateway %d" % odd[0], n=2):
            print("# " + line.rstrip())

    def converge(last, what, bound=BOUND_S):
        t0 = time.monotonic()
        ok = wait_until(lambda: min(revs()) >= last, bound + 5)
        took = time.monotonic() - t0
        t.ok(ok and took <= bound,
             "%s: all gateways reflect revision %d within %.2f s (%.2f s)" %
             (what, last, bound, took), revs())
        sts = [status(g) for g in gws]
        errors = [(x["name"], x["error"]) for st in sts
                  for x in st["etcd"]["sources"] if x["error"]]
        t.ok(not errors, "%s: every document written was accepted" % what,
             errors[:5])
        fps = [s["fingerprint"] for s in sts]
        same = t.ok(len(set(fps)) == 1 and
                    all(s["etcd"]["fingerprint"] == s["fingerprint"]
                        for s in sts),
                    "%s: one snapshot fingerprint on all three" % what, fps)
        if not same:
            explain_difference(fps)
        want = 'switchyard_etcd_info{revision="%d",fingerprint="%s"} 1' % (
            sts[0]["etcd"]["revision"], fps[0])
        texts = [g.admin_call("GET", "/metrics")[2].decode() for g in gws]
        t.ok(all(want in x for x in texts),
             "%s: /metrics shows the revision and its fingerprint" % what,
             want)
        paths = ["/r/%s/%d/x" % (a, i) for a in "ab" for i in range(5)]
        paths += ["/stable/x", "/nothing"]
        answers = []
        for g in gws:
            row = []
            for p in paths:
                st, _, body = g.request("GET", p, headers={"X-User": "u7"})
                bid = json.loads(body)["instance"] if st == 200 else None
                row.append((p, st, bid))
            answers.append(row)
        t.ok(all(a == answers[0] for a in answers),
             "%s: the same answer from all three to %d requests" %
             (what, len(paths)), json.dumps(answers))
        return sts[0]

    # --- 1. 200 random changes ------------------------------------------
    last = 0
    for i in range(200):
        last = change()
    converge(last, "200 changes")

    # --- 2. lease expiry ------------------------------------------------
    etcd.put(P + "routes/leased", routes_doc(1, [{
        "id": "leased", "uri": "lb://leased",
        "predicates": ["Path=/leased/**"]}]))
    ttl = 2
    lease = etcd.grant(ttl)
    granted = time.monotonic()
    last = etcd.put(P + "instances/leased/b3", inst("b3"), lease=lease)
    wait_until(lambda: min(revs()) >= last, BOUND_S)
    t.ok(all(g.request("GET", "/leased/x")[0] == 200 for g in gws),
         "a leased instance serves on every gateway")
    gone = wait_until(lambda: all(g.request("GET", "/leased/x")[0] == 503
                                  for g in gws), ttl + 5, 0.01)
    took = time.monotonic() - granted
    t.ok(gone and took <= ttl + 1.5,
         "lease expiry: every gateway stops routing to it within TTL + one "
         "delivery (%.2f s for TTL %d s)" % (took, ttl))

    # --- 3. etcd killed during changes, restarted, compaction between ---
    for i in range(20):
        last = change()
    etcd.kill()
    time.sleep(0.5)
    t.ok(all(g.request("GET", "/stable/x")[0] == 200 for g in gws),
         "etcd down: the gateways keep serving")
    side = free_port()
    etcd.start(ports=[side])
    main_port, etcd.port = etcd.port, side
    for i in range(30):
        last = change()
    etcd.compact(last)
    etcd.kill()
    etcd.port = main_port
    etcd.start()
    for i in range(10):
        last = change()
    # the gateways may be in their longest backoff when etcd comes back
    converge(last, "restart with compaction", BOUND_S + RECONNECT_S)
    fulls = [status(g)["etcd"]["full_reads"] for g in gws]
    t.ok(all(f >= 2 for f in fulls),
         "the compaction made each gateway read in full once more", fulls)

    # --- 4. a broken document -------------------------------------------
    target = sorted(live)[0]
    last = etcd.put(P + "routes/" + target, broken())
    sts = [None] * 3
    wait_until(lambda: min(revs()) >= last, BOUND_S)
    errs = []
    for g in gws:
        st = status(g)
        e1 = [s["error"] for s in st["etcd"]["sources"]
              if s["name"] == target][0]
        e2 = [s["error"] for s in st["sources"] if s["name"] == target][0]
        errs.append((e1, json.dumps(e2)))
    t.ok(all(e1 and "routes[1].predicates[0].args.regexp" in e1 and
             "routes[1].predicates[0].args.regexp" in e2
             for e1, e2 in errs),
         "a broken document: rejected on every gateway, located error in "
         "the admin API", errs)
    t.ok(all(g.request("GET", "/stable/x")[0] == 200 for g in gws),
         "the other keys keep working")

    stop_load.set()
    loader.join(10)
    t.ok(sent[0] > 100 and not failures,
         "no failed request on the unchanged route (%d sent)" % sent[0],
         failures[:10])
    t.ok(time.monotonic() - started < 110, "within the time bound (%.1f s)"
         % (time.monotonic() - started))
except Exception as e:  # noqa: BLE001 - report, then clean up
    import traceback
    t.ok(False, "the scenario ran to its end", traceback.format_exc())
finally:
    finish()
