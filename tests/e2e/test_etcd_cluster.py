"""test_etcd_cluster.py - the mini-gateway on a 3-member etcd cluster.

Real processes on loopback: three etcd members (one cluster), a backend,
a mini-gateway started with --etcd URL,URL,URL. A client sends requests
without pause through the gateway all along; route changes are written
to the cluster (through whichever member takes them) after each failure:
  1. the leader is killed (SIGKILL), then started again;
  2. the member the gateway watches is paused (SIGSTOP: it answers
     nothing, the way a partitioned member does), then resumed;
  3. a rolling restart: each member in turn stopped and started again.
Asserted: no request fails, every change made after a failure is served
by the gateway within a bound, an admin write goes through while a member
is paused, and an admin PUT on one gateway is served by a second one on
the cluster. TAP on stdout.
"""
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gwharness
from etcd_harness import Cluster, Tap, routes_doc, wait_until

gwharness.BINARY = os.environ["MINI_GATEWAY"]
P = "/switchyard/"
BOUND_S = 8.0  # probe (1 s) + its timeout (1.5 s) + backoff + reconnect
t = Tap()
procs = gwharness.Procs()


def watched(gw, cl):
    ep = gw.status()["etcd"].get("endpoint", "")
    for i in range(cl.n):
        if ep.endswith(":%d" % cl.ports[i]):
            return i
    return None


try:
    started = time.monotonic()
    cl = Cluster(3).start_all()
    _, bport = procs.backend("b1")
    up = "http://127.0.0.1:%d" % bport
    cl.put(P + "routes/stable", routes_doc(1, [{
        "id": "stable", "uri": up, "predicates": ["Path=/stable/**"]}]))
    gw = procs.gateway("--etcd", cl.urls())
    t.ok(wait_until(lambda: gw.request("GET", "/stable/x")[0] == 200, 10),
         "the gateway reads the cluster")

    load = gwharness.Load(gw, "/stable/x")
    n = [0]

    def change(what, avoid=()):
        n[0] += 1
        tag = str(n[0])
        cl.put(P + "routes/changes", routes_doc(n[0], [{
            "id": "chg", "uri": up, "predicates": ["Path=/chg/**"],
            "filters": ["AddRequestHeader=X-Change," + tag]}]), avoid)
        t0 = time.monotonic()

        def arrived():
            st, _, body = gw.request("GET", "/chg/x")
            return st == 200 and gwharness.echoed_header(body,
                                                         "X-Change") == tag
        ok = wait_until(arrived, BOUND_S)
        t.ok(ok, "%s: a change made after it is served (%.1f s)" %
             (what, time.monotonic() - t0), gw.status().get("etcd"))

    change("baseline")

    # 1. the leader is lost
    lead = cl.leader()
    cl.kill(lead)
    change("leader %d killed" % lead)
    cl.start(lead, state="existing")
    t.ok(wait_until(lambda: cl.healthy(lead), 10), "the old leader rejoins")
    change("old leader back")

    # 2. the watched member is partitioned away (paused: it answers nothing)
    w = watched(gw, cl)
    t.ok(w is not None, "the gateway says which member it watches")
    cl.kill(w, signal.SIGSTOP)
    change("member %d paused" % w, avoid=(w,))
    t.ok(watched(gw, cl) != w, "the watch moved to another member")
    st, _, body = gw.admin_call("PUT", "/routes/paused", [{
        "id": "paused", "uri": up, "predicates": ["Path=/paused/**"]}])
    t.ok(st == 200 and gw.request("GET", "/paused/x")[0] == 200,
         "an admin write through the cluster while a member is paused",
         body)
    cl.kill(w, signal.SIGCONT)
    t.ok(wait_until(lambda: cl.healthy(w), 10), "the paused member is back")

    # 3. a rolling restart
    for i in range(cl.n):
        cl.kill(i, signal.SIGTERM)
        change("member %d stopped (rolling restart)" % i)
        cl.start(i, state="existing")
        t.ok(wait_until(lambda: cl.healthy(i), 10),
             "member %d restarted" % i)
    change("after the rolling restart")

    # the fleet: an admin PUT on one gateway, stored under
    # PREFIX routes/<source>, served by every gateway on the cluster
    gw2 = procs.gateway("--etcd", cl.urls())
    st, _, body = gw.admin_call("PUT", "/routes/fleet", {
        "version": "1", "routes": [{"id": "fleet", "uri": up,
                                    "predicates": ["Path=/fleet/**"]}]})
    key = json.loads(body).get("etcd", {}).get("key")
    t.ok(st == 200 and key == P + "routes/fleet" and
         wait_until(lambda: gw2.request("GET", "/fleet/x")[0] == 200, 5),
         "admin PUT /routes/<source> on one gateway: stored under "
         "PREFIX routes/<source>, served by the other", body)

    load.stop()
    t.ok(load.sent > 200 and not load.failures,
         "%d requests under the failures, none failed" % load.sent,
         load.failures[:5])
    t.ok(time.monotonic() - started < 60, "within a minute (%.0f s)" %
         (time.monotonic() - started))
except Exception as e:  # noqa: BLE001
    import traceback
    t.ok(False, "exception: %r" % e, traceback.format_exc())
finally:
    procs.stop_all()
t.done()
