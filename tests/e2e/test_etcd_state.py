"""test_etcd_state.py - --state together with --etcd.

With --etcd, an admin change to a source that is not a file's is written
through to etcd (store.c): etcd keeps it, every gateway applies it from
its watch, and it is not kept in the state file too (a replay of it
would put back, over etcd's newer word, what the fleet has moved on
from). The state file keeps only what etcd does not: overrides of a
file's routes (--admin-overrides-files). Asserted with one real etcd and
gateway processes stopped and started again: a state file written by a
gateway without --etcd (a change of an admin source, an override of a
file's route) is replayed in part: the override is, the admin source's
change is not (logged, in /status with its reason, the file as it was
kept in FILE.not-replayed); an admin change of an etcd source is in etcd
and not in the state file, an override is in the state file and not in
etcd; after a restart the etcd source comes from etcd (origin "etcd"),
the overrides from the state, nothing is left not replayed. TAP.
"""
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gwharness
from etcd_harness import Etcd, Tap, b64, wait_until

gwharness.BINARY = os.environ["MINI_GATEWAY"]
P = "/switchyard/"
t = Tap()
procs = gwharness.Procs()


def route(rid, path, uri, tag):
    return {"id": rid, "uri": uri, "predicates": ["Path=%s" % path],
            "filters": ["AddRequestHeader=X-Tag,%s" % tag]}


def tag_of(gw, path):
    st, _, data = gw.request("GET", path)
    return st, (gwharness.echoed_header(data, "X-Tag") if st == 200 else None)


def etcd_has(etcd, key):
    r = etcd.call("/v3/kv/range", {"key": b64(key)})
    return bool(r.get("kvs"))


def kept(state):
    with open(state) as f:
        return [(x["change"], x["source"], x.get("route"))
                for x in json.load(f)["changes"]]


def stop(gw):
    gw.proc.send_signal(signal.SIGTERM)
    gw.proc.wait(timeout=10)


try:
    etcd = Etcd().start()
    _, bport = procs.backend("b1")
    up = "http://127.0.0.1:%d" % bport
    routes = procs.write_file("ov.json", json.dumps({"version": "1", "routes": [
        route("file-a", "/a/**", up, "file"),
        route("file-b", "/b/**", up, "file")]}))
    # what a gateway without --etcd kept: an admin source's route, and an
    # override of the file's route
    state = procs.write_file("state.json", json.dumps({
        "format": "mini-gateway-state/1", "changes": [
            {"change": "upsert", "source": "mine", "route": "m1",
             "body": route("m1", "/m1/**", up, "mine")},
            {"change": "upsert", "source": "ov", "route": "file-a",
             "body": route("file-a", "/a/**", up, "override-a")}]}))
    args = ("--etcd", etcd.url, "--routes", routes, "--admin-overrides-files",
            "--state", state)
    gw = procs.gateway(*args)
    s = gw.status()["state"]
    t.ok((s["replayed"], s["not_replayed"]) == (1, 1) and
         "written through to etcd" in s["errors"][0] and
         "mine" in s["errors"][0],
         "with --etcd, the admin source's kept change is not replayed; the "
         "override is", s)
    t.ok(tag_of(gw, "/a/x") == (200, "override-a") and
         gw.request("GET", "/m1/x")[0] == 404,
         "the override serves; the admin source's route does not",
         (tag_of(gw, "/a/x"), gw.request("GET", "/m1/x")[0]))
    t.ok(os.path.exists(state + ".not-replayed") and
         kept(state) == [("upsert", "ov", "file-a")],
         "the file as it was kept aside; the state holds the override only",
         kept(state))

    # an admin change of a source etcd owns: in etcd, not in the state
    st, _, body = gw.admin_call("PUT", "/routes/orders/o1",
                                route("o1", "/o1/**", up, "etcd"))
    t.ok(st == 200 and json.loads(body)["etcd"]["key"] ==
         P + "routes/orders" and etcd_has(etcd, P + "routes/orders"),
         "an admin change of an etcd source is written to etcd", body)
    t.ok(kept(state) == [("upsert", "ov", "file-a")],
         "and not kept in the state file", kept(state))
    # an override of the file's other route: in the state, not in etcd
    st, _, body = gw.admin_call("PUT", "/routes/ov/file-b",
                                route("file-b", "/b/**", up, "override-b"))
    t.ok(st == 200 and not etcd_has(etcd, P + "routes/ov") and
         kept(state) == [("upsert", "ov", "file-a"),
                         ("upsert", "ov", "file-b")],
         "an override is kept in the state file, not written to etcd",
         (st, body, kept(state)))
    stop(gw)

    gw = procs.gateway(*args)
    t.ok(wait_until(lambda: tag_of(gw, "/o1/x") == (200, "etcd"), 5),
         "after a restart the etcd source's route comes from etcd",
         tag_of(gw, "/o1/x"))
    s = gw.status()["state"]
    t.ok((s["replayed"], s["not_replayed"]) == (2, 0) and
         tag_of(gw, "/a/x") == (200, "override-a") and
         tag_of(gw, "/b/x") == (200, "override-b"),
         "both overrides replayed from the state, nothing left out", s)
    t.ok(gw.source("orders")["origin"] == "etcd" and
         gw.source("ov")["origin"] == "state",
         "/status: origin etcd for the etcd source, state for the file's",
         gw.status()["sources"])
    stop(gw)
except Exception as e:  # noqa: BLE001
    import traceback
    t.ok(False, "exception: %r" % e, traceback.format_exc())
finally:
    procs.stop_all()
t.done()
