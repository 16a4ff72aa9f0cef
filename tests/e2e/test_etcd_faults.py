"""test_etcd_faults.py - an allocation that fails never loses a change.

One etcd and the etcd driver built with allocation faults
(etcd_driver_faults: "fail-alloc N" makes the source's Nth allocation from
now fail, once). For N = 1, 2, ... a transaction moves the one instance
of service `pool` to a new id (a put and a delete in one revision) while
the Nth allocation fails somewhere on its way: in the HTTP client, the
decoding of the watch response, the records or the staging of the commit.
Whatever failed, the router ends with exactly the new instance at the
etcd revision of the transaction: an out-of-memory never drops a change
while moving the revision past it. TAP on stdout.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_harness import (Driver, Etcd, Tap, b64, route, routes_doc,
                          wait_until)

P = "/switchyard/"
ROUNDS = 30
t = Tap()
try:
    etcd = Etcd().start()
    etcd.put(P + "routes/edge", routes_doc(1, [
        route("pool", "/p/**", uri="lb://pool")]))
    etcd.put(P + "instances/pool/i0",
             json.dumps({"host": "127.0.0.1", "port": 9000}))
    d = Driver(etcd.url, binary=os.environ["ETCD_DRIVER_FAULTS"])

    def served():
        m = d.match("GET", "example.org", "/p/x")
        return m.get("instance")

    t.ok(wait_until(lambda: served() == "i0", 10), "the first instance serves")
    bad = []
    felt = 0  # rounds whose fault made the source reconnect
    for n in range(1, ROUNDS + 1):
        before = d.status()["etcd"]["reconnects"]
        old, new = "i%d" % (n - 1), "i%d" % n
        d.cmd("fail-alloc %d" % n)
        r = etcd.call("/v3/kv/txn", {"success": [
            {"request_put": {"key": b64(P + "instances/pool/" + new),
                             "value": b64(json.dumps(
                                 {"host": "127.0.0.1", "port": 9000 + n,
                                  "metadata": {"round": str(n)}}))}},
            {"request_delete_range": {"key": b64(P + "instances/pool/" +
                                                 old)}}]})
        rev = int(r["header"]["revision"])
        ok = wait_until(lambda: served() == new and
                        d.status()["etcd"]["revision"] >= rev, 15)
        if not ok:
            bad.append((n, served(), d.status()["etcd"]))
        felt += d.status()["etcd"]["reconnects"] > before
        d.cmd("fail-alloc 0")
    t.ok(not bad, "every move applied whatever allocation failed "
         "(%d rounds)" % ROUNDS, bad[:2])
    print("# %d of %d faults made the source reconnect" % (felt, ROUNDS))
    t.ok(felt >= ROUNDS // 3, "the faults hit the watch's path (%d rounds "
         "reconnected)" % felt)
    st = d.status()["etcd"]
    t.ok(st["revision"] == etcd.revision(),
         "the router reflects etcd's revision at the end", st)
    d.quit()
except Exception:  # noqa: BLE001 - reported as a failed test
    import traceback
    t.ok(False, "no exception", traceback.format_exc())
finally:
    t.done()
