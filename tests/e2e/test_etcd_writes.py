"""test_etcd_writes.py - admin changes written through to etcd.

One real etcd, two mini-gateways on it (--etcd). An admin change made on
one gateway is written to etcd (answered after etcd accepted it, with the
key and the revision) and applied by both from their watches: a whole
document stored under PREFIX routes/<source>, one route added and
removed, a route disabled, a service's instances (PREFIX
instances/<service>/<id>), an actuator route (source "actuator"). A bad
route is 400 and writes nothing. Concurrent writes of one source from
both gateways: each answer is 200 or 409 (the etcd transaction compares
the key's mod revision with what the gateway saw), at least one conflict
is detected, and etcd ends with the last accepted write. The fleet ends
with one fingerprint. A document put into etcd directly with a cors
metadata or default filters the gateway refuses from files and its
admin API is refused from etcd too (located error in /status, the last
good document serving). An admin PUT of a source beyond the 256 the
router holds is answered 400 with the watch's refusal and the key it was
written to (it was answered 200); once a source's key is deleted, its
place goes to the 257th (put again) on both gateways. TAP on stdout.
"""
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gwharness
from etcd_harness import Etcd, Tap, b64, unb64, wait_until

gwharness.BINARY = os.environ["MINI_GATEWAY"]
P = "/switchyard/"
t = Tap()
procs = gwharness.Procs()


def get(etcd, key):
    r = etcd.call("/v3/kv/range", {"key": b64(key)})
    kvs = r.get("kvs") or []
    return (unb64(kvs[0]["value"]).decode(), int(kvs[0]["mod_revision"])) \
        if kvs else (None, 0)


def serves(g, path, want=200):
    return lambda: g.request("GET", path)[0] == want


try:
    etcd = Etcd().start()
    _, bport = procs.backend("b1")
    g1 = procs.gateway("--etcd", etcd.url)
    g2 = procs.gateway("--etcd", etcd.url)
    up = "http://127.0.0.1:%d" % bport

    doc = {"version": "1", "routes": [
        {"id": "o1", "uri": up, "predicates": ["Path=/o1/**"]}]}
    st, _, body = g1.admin_call("PUT", "/routes/orders", doc)
    ans = json.loads(body)
    t.ok(st == 200 and ans["etcd"]["key"] == P + "routes/orders" and
         ans["etcd"]["revision"] > 0,
         "admin PUT /routes/<source>: answered once etcd took it", body)
    val, mod = get(etcd, P + "routes/orders")
    t.ok(val is not None and json.loads(val) == doc and
         mod == ans["etcd"]["revision"],
         "stored under PREFIX routes/<source> at that revision", val)
    t.ok(wait_until(serves(g2, "/o1/x"), 5) and
         wait_until(serves(g1, "/o1/x"), 5),
         "served by every gateway on that etcd")

    # Written to etcd by something else than a gateway: the gateway's own
    # apply-time checks (a route's cors metadata, a document's default
    # filters) refuse it as its route files and admin API do.
    good = {"version": "1", "routes": [
        {"id": "c1", "uri": up, "predicates": ["Path=/c1/**"],
         "metadata": {"cors": {"allowedOrigins": "https://a.example"}}}]}
    etcd.put(P + "routes/corsy", json.dumps(good))
    t.ok(wait_until(serves(g1, "/c1/x"), 5), "a good cors document from etcd")
    for n, (bad, where) in enumerate([
            ({"allowedOrigins": "https://b.example",
              "allowCredentials": "yes"}, "routes[0].metadata.cors"),
            (None, "default-filters")]):
        doc2 = json.loads(json.dumps(good))
        doc2["version"] = str(2 + n)
        doc2["routes"][0]["predicates"] = ["Path=/c2/**"]
        if bad:
            doc2["routes"][0]["metadata"]["cors"] = bad
        else:
            doc2["default-filters"] = ["AddResponseHeader=X-D,1"]
        rev = etcd.put(P + "routes/corsy", json.dumps(doc2))
        wait_until(lambda: g1.status()["etcd"]["revision"] >= rev, 5)
        st = g1.status()
        e1 = [s["error"] for s in st["etcd"]["sources"]
              if s["name"] == "corsy"][0]
        e2 = [s["error"] for s in st["sources"] if s["name"] == "corsy"][0]
        t.ok(e1 and e1.startswith(where + ": ") and where in json.dumps(e2),
             "etcd: %s refused at apply with its located error in /status"
             % where, (e1, e2))
        pre = {"Origin": "https://a.example",
               "Access-Control-Request-Method": "GET"}
        t.ok(g1.request("GET", "/c1/x")[0] == 200 and
             g1.request("GET", "/c2/x")[0] == 404 and
             g1.request("OPTIONS", "/c1/x", headers=pre)[0] == 200,
             "etcd: the last good document keeps serving (%s)" % where)

    a = g1.admin_call("PUT", "/routes/seq/s1", {
        "id": "s1", "uri": up, "predicates": ["Path=/s1/**"]})[0]
    b = g1.admin_call("PUT", "/routes/seq/s2", {
        "id": "s2", "uri": up, "predicates": ["Path=/s2/**"]})[0]
    ids = [r["id"] for r in json.loads(get(etcd, P + "routes/seq")[0])]
    t.ok((a, b, ids) == (200, 200, ["s1", "s2"]),
         "two changes in a row on one gateway: the second builds on the "
         "first (answered once applied here)", (a, b, ids))
    st, _, body = g2.admin_call("PUT", "/routes/orders/o2", {
        "id": "o2", "uri": up, "predicates": ["Path=/o2/**"]})
    t.ok(st == 200, "PUT one route on the other gateway", body)
    t.ok(wait_until(serves(g1, "/o2/x"), 5), "the first gateway serves it")
    ids = [r["id"] for r in json.loads(get(etcd, P + "routes/orders")[0])]
    t.ok(ids == ["o1", "o2"], "etcd holds the source's whole document", ids)

    st, _, body = g1.admin_call("POST", "/routes/orders/o2/disable")
    t.ok(st == 200 and wait_until(serves(g2, "/o2/x", 404), 5),
         "disable: written as metadata status disabled, every gateway "
         "follows", body)
    st, _, body = g1.admin_call("DELETE", "/routes/orders/o2")
    t.ok(st == 200 and wait_until(lambda: [
        r["id"] for r in json.loads(get(etcd, P + "routes/orders")[0])] ==
        ["o1"], 5), "DELETE one route: gone from etcd", body)
    t.ok(g2.admin_call("DELETE", "/routes/orders/o2")[0] == 404,
         "DELETE of a missing route: 404")

    rev = etcd.revision()
    st, _, body = g1.admin_call("PUT", "/routes/orders/bad", {
        "id": "bad", "uri": up, "predicates": ["Path=/b/**", "Nope=1"]})
    err = json.loads(body).get("error", {})
    t.ok(st == 400 and "predicates[1]" in err.get("path", "") and
         etcd.revision() == rev,
         "a bad route: 400 with its located error, nothing written", body)

    st, _, body = g1.admin_call("PUT", "/routes/orders/sec", {
        "id": "sec", "uri": up, "predicates": ["Path=/sec/**"],
        "filters": ["SecureHeaders"]})
    t.ok(st == 200 and wait_until(serves(g2, "/sec/x"), 5),
         "a filter the gateway registers itself (SecureHeaders) is checked "
         "as the router checks it", body)
    st, _, body = g1.admin_call("PUT", "/instances/svc", [
        {"id": "i1", "host": "127.0.0.1", "port": bport}])
    t.ok(st == 200 and get(etcd, P + "instances/svc/i1")[0] is not None,
         "PUT /instances/<service>: PREFIX instances/<service>/<id>", body)
    g1.admin_call("PUT", "/routes/lb/l1", {
        "id": "l1", "uri": "lb://svc", "predicates": ["Path=/lb/**"]})
    t.ok(wait_until(serves(g2, "/lb/x"), 5),
         "the other gateway routes to the instance")
    st, _, body = g2.admin_call("PUT", "/instances/svc", [])
    t.ok(st == 200 and get(etcd, P + "instances/svc/i1")[0] is None and
         wait_until(serves(g1, "/lb/x", 503), 5),
         "an empty list deletes the service's keys", body)

    st, _, body = g2.admin_call("POST", "/actuator/gateway/routes/act", {
        "uri": up, "predicates": [{"name": "Path",
                                   "args": {"_genkey_0": "/act/**"}}]})
    t.ok(st == 201 and get(etcd, P + "routes/actuator")[0] is not None and
         wait_until(serves(g1, "/act/x"), 5),
         "an actuator route: source actuator in etcd, on every gateway",
         body)

    # concurrent writes of one source from both gateways
    conflicts, lost = 0, []
    for rnd in range(12):
        answers = {}
        go = threading.Barrier(2)

        def write(g, tag):
            go.wait()
            st, _, body = g.admin_call("PUT", "/routes/race", [
                {"id": "race", "uri": up, "predicates": ["Path=/race/**"],
                 "metadata": {"writer": tag}}])
            answers[tag] = (st, json.loads(body))

        ths = [threading.Thread(target=write, args=(g, tag))
               for g, tag in ((g1, "g1-%d" % rnd), (g2, "g2-%d" % rnd))]
        for th in ths:
            th.start()
        for th in ths:
            th.join(15)
        sts = sorted(a[0] for a in answers.values())
        conflicts += sts.count(409)
        ok = [(a[1]["etcd"]["revision"], tag) for tag, a in answers.items()
              if a[0] == 200]
        if not ok or any(s not in (200, 409) for s in sts):
            lost.append((rnd, answers))
            continue
        final = json.loads(get(etcd, P + "routes/race")[0])
        if final[0]["metadata"]["writer"] != max(ok)[1]:
            lost.append((rnd, final, ok))
        wait_until(lambda: g1.status()["etcd"]["revision"] ==
                   g2.status()["etcd"]["revision"] == etcd.revision(), 5)
    t.ok(not lost, "every answer 200 or 409; etcd holds the last accepted "
         "write", lost[:3])
    t.ok(conflicts > 0, "concurrent writes detected: %d conflicts (409)"
         % conflicts)

    # a --routes file's source stays the file's, also with --etcd
    fpath = procs.write_file("local.json", json.dumps([
        {"id": "loc", "uri": up, "predicates": ["Path=/loc/**"]}]))
    g3 = procs.gateway("--etcd", etcd.url, "--routes", fpath)
    st, _, body = g3.admin_call("PUT", "/routes/local/loc2", {
        "id": "loc2", "uri": up, "predicates": ["Path=/loc2/**"]})
    t.ok(st == 409 and fpath in json.loads(body)["error"],
         "with --etcd, an admin change to a file's source: 409 naming it",
         body)
    g4 = procs.gateway("--etcd", etcd.url, "--routes", fpath,
                       "--admin-overrides-files")
    st, _, body = g4.admin_call("PUT", "/routes/local/loc2", {
        "id": "loc2", "uri": up, "predicates": ["Path=/loc2/**"]})
    t.ok(st == 200 and g4.request("GET", "/loc2/x")[0] == 200 and
         get(etcd, P + "routes/local")[0] is None,
         "with --admin-overrides-files it is a local override, not "
         "written to etcd", body)

    rev = etcd.revision()
    fps = lambda: [g.status() for g in (g1, g2)]  # noqa: E731
    t.ok(wait_until(lambda: all(s["etcd"]["revision"] == rev for s in fps())
                    and len({s["fingerprint"] for s in fps()}) == 1, 5),
         "the fleet ends on one fingerprint", fps())

    # The router holds 256 sources: with g1's full (sources put into etcd
    # directly), an admin PUT of one more source passes the document's
    # check, is written, and refused by the watch; the answer says so
    # (400, the error and the key), not 200.
    have = len(g1.status()["sources"])
    names = ["fill%03d" % k for k in range(256 - have)]
    for i in range(0, len(names), 100):
        rev = etcd.txn_put([(P + "routes/" + n, json.dumps({
            "version": "1", "routes": [{"id": n, "uri": up,
                                        "predicates": ["Path=/%s/**" % n]}]}))
            for n in names[i:i + 100]])
    t.ok(wait_until(lambda: g1.status()["etcd"]["revision"] >= rev, 5) and
         len(g1.status()["sources"]) == 256, "g1's router holds 256 sources",
         len(g1.status()["sources"]))
    st, _, body = g1.admin_call("PUT", "/routes/onemore", {
        "version": "1", "routes": [
            {"id": "om", "uri": up, "predicates": ["Path=/om/**"]}]})
    ans = json.loads(body)
    t.ok(st == 400 and "at most 256 sources" in ans.get("error", "") and
         ans["etcd"]["key"] == P + "routes/onemore" and
         g1.request("GET", "/om/x")[0] == 404,
         "an admin PUT of a 257th source: written, refused by the watch, "
         "and the answer says so (400 with the error and the key)", body)

    # A deleted routes/<name> key empties its source; the source keeps its
    # place while the router has room, and leaves it for a new source when
    # the router is full (sy_router_remove_source): then the 257th source
    # fits, on every gateway of the fleet.
    names = lambda g: [s["name"] for s in g.status()["sources"]]  # noqa
    rev = etcd.delete(P + "routes/fill000")
    t.ok(wait_until(lambda: all(
        g.status()["etcd"]["revision"] >= rev for g in (g1, g2)), 5) and
         g1.request("GET", "/fill000/x")[0] == 404 and
         len(names(g1)) == 256 and "fill000" in names(g1),
         "a deleted key's source is emptied and keeps its place while "
         "nothing needs it", len(names(g1)))
    st, _, body = g1.admin_call("PUT", "/routes/onemore", {
        "version": "2", "routes": [
            {"id": "om", "uri": up, "predicates": ["Path=/om/**"]}]})
    rev = etcd.revision()
    t.ok(st == 200 and wait_until(lambda: all(
        g.status()["etcd"]["revision"] >= rev and
        len(names(g)) == 256 and "fill000" not in names(g) and
        "onemore" in names(g) and
        g.request("GET", "/om/x")[0] == 200 for g in (g1, g2)), 5),
         "the 257th source then takes the deleted one's room on both "
         "gateways", body)
    st, _, body = g1.admin_call("PUT", "/routes/fill000", {
        "version": "3", "routes": [
            {"id": "fill000", "uri": up, "predicates": ["Path=/f0/**"]}]})
    t.ok(st == 400 and "at most 256 sources" in json.loads(body)["error"],
         "and the deleted source's name is now the one beyond 256", body)
except Exception as e:  # noqa: BLE001
    import traceback
    t.ok(False, "exception: %r" % e, traceback.format_exc())
finally:
    procs.stop_all()
t.done()
