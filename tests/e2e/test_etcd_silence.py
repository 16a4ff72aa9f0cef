"""test_etcd_silence.py - a silent etcd is noticed; progress notifications.

One etcd (progress notifications every second), one test backend, one
mini-gateway started with --etcd. Asserted:
  1. the watch asks for progress notifications: they arrive while nothing
     changes;
  2. an etcd that keeps the connection but stops answering (SIGSTOP) is
     noticed within 15 s (the liveness read of etcd_probe.c): /status says
     the connection is broken and why, and the last good config keeps
     serving meanwhile;
  3. once etcd answers again (SIGCONT) the watch resumes from the last
     revision (no full read) and a new change applies;
  4. an instance whose weight is not an integer is refused with the
     message that says so.
TAP on stdout.
"""
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gwharness
from etcd_harness import Etcd, Tap, routes_doc, wait_until

gwharness.BINARY = os.environ["MINI_GATEWAY"]
P = "/switchyard/"
t = Tap()
procs = gwharness.Procs()
etcd = None


def finish():
    if etcd and etcd.proc and etcd.proc.poll() is None:
        etcd.proc.send_signal(signal.SIGCONT)
    procs.stop_all()
    t.done()


def etcd_status(gw):
    return gw.status()["etcd"]


try:
    etcd = Etcd()
    etcd.extra_args = ["--experimental-watch-progress-notify-interval", "1s"]
    etcd.start()
    _, bport = procs.backend("b1")
    etcd.put(P + "routes/edge", routes_doc(1, [{
        "id": "s", "uri": "http://127.0.0.1:%d" % bport,
        "predicates": ["Path=/s/**"]}]))
    gw = procs.gateway("--etcd", etcd.url)

    t.ok(wait_until(lambda: gw.request("GET", "/s/1")[0] == 200, 10),
         "the route from etcd serves")
    t.ok(wait_until(lambda: etcd_status(gw)["progress_notifies"] >= 2, 8),
         "progress notifications arrive on a quiet watch",
         etcd_status(gw))
    st = etcd_status(gw)
    t.ok(st["connected"] and st["state"] == "watching", "watching", st)
    full_reads = st["full_reads"]

    # etcd keeps the connection but stops answering
    etcd.proc.send_signal(signal.SIGSTOP)
    t0 = time.monotonic()
    served = []

    def noticed():
        served.append(gw.request("GET", "/s/1")[0])
        return not etcd_status(gw)["connected"]

    t.ok(wait_until(noticed, 15, 0.2), "a silent etcd is noticed within 15 s",
         etcd_status(gw))
    took = time.monotonic() - t0
    st = etcd_status(gw)
    t.ok("stopped answering" in (st["last_error"] or ""),
         "/status says why (%.1f s): %s" % (took, st["last_error"]), st)
    t.ok(served and all(s == 200 for s in served),
         "the last good config kept serving (%d requests)" % len(served),
         served)

    etcd.proc.send_signal(signal.SIGCONT)
    rev = etcd.put(P + "routes/more", routes_doc(1, [{
        "id": "m", "uri": "http://127.0.0.1:%d" % bport,
        "predicates": ["Path=/m/**"]}]))
    t.ok(wait_until(lambda: gw.request("GET", "/m/1")[0] == 200, 20),
         "after etcd answers again a new change applies")
    st = etcd_status(gw)
    t.ok(st["connected"] and st["revision"] >= rev,
         "connected again, at revision %d" % rev, st)
    t.ok(st["full_reads"] == full_reads and st["reconnects"] >= 1,
         "the watch resumed from the last revision (no full read)", st)

    # a fractional weight where the message says "integer"
    etcd.put(P + "instances/svc/i1", json.dumps(
        {"host": "127.0.0.1", "port": bport, "weight": 1.5}))

    def svc_error():
        for s in etcd_status(gw)["services"]:
            if s["name"] == "svc":
                return s["error"]
        return None

    t.ok(wait_until(lambda: svc_error() is not None, 10),
         "an instance with weight 1.5 is refused", etcd_status(gw))
    t.ok("weight" in (svc_error() or "") and "integer" in (svc_error() or ""),
         "with the message that says integer: %r" % svc_error())
    svc = [s for s in etcd_status(gw)["services"] if s["name"] == "svc"]
    t.ok(svc and svc[0]["instances"] == 0, "and it is not live", svc)
except Exception as ex:  # noqa: BLE001 - reported as a failed test
    import traceback
    t.ok(False, "no exception", traceback.format_exc())
    print("# %r" % ex)
finally:
    finish()
