"""test_etcd_source.py - the mini-gateway's etcd source against a real etcd.

One etcd and the etcd driver (a router fed by examples/mini-gateway/
etcd_source.c). Covers: the full read at start, watch updates applied as
one change per watch response, a broken document rejected with its located
error while the other sources serve, a deleted key emptying its source,
instances and lease expiry, etcd down at start, etcd killed and restarted,
a compaction while disconnected (full read), an etcd that lost its data,
and that an incremental state always equals a fresh full read.
TAP on stdout.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_harness import (Driver, Etcd, Tap, free_port, instance, route,
                          routes_doc, wait_until)

P = "/switchyard/"
t = Tap()
deadline = time.monotonic() + 110

etcd = Etcd().start()
etcd.put(P + "routes/orders", routes_doc(1, [
    route("orders", "/orders/**", uri="lb://orders"),
]))
etcd.put(P + "routes/users", routes_doc(7, [
    route("users", "/users/**", uri="http://users:8080"),
]))
etcd.put(P + "instances/orders/o1", instance("10.0.0.1", 8080))
etcd.put("/elsewhere/routes/x", "not ours")  # outside the prefix: ignored
# under the prefix but no route or instance key (a typo): changes nothing,
# and is told (counted, the last one in the status, logged)
etcd.put(P + "route/typo", "[]")
rev = etcd.revision()

# --- full read at start -------------------------------------------------
d = Driver(etcd.url)
t.ok(d.wait_revision(rev), "driver reaches the etcd revision after start")
st = d.status()
t.ok(sorted(st["routes"]) == ["orders", "users"], "both sources' routes live",
     st["routes"])
src = {s["name"]: s for s in st["etcd"]["sources"]}
t.ok(src.get("users", {}).get("key") == P + "routes/users" and
     src["users"]["version"] == "7" and src["users"]["error"] is None and
     src["users"]["mod_revision"] > 0 and src["users"]["checksum"],
     "per-source key, version, mod revision, checksum", src)
m = d.match("GET", "h", "/orders/1")
t.ok(m.get("route") == "orders" and m.get("instance") == "o1" and
     m.get("target") == "10.0.0.1:8080", "lb route selects the etcd instance",
     m)
t.ok(st["etcd"]["fingerprint"] == st["fingerprint"],
     "the module's fingerprint is the live snapshot's", st)
t.ok(st["etcd"]["ignored_keys"] == 1 and
     st["etcd"]["last_ignored_key"]["key"] == P + "route/typo" and
     "neither" in st["etcd"]["last_ignored_key"]["why"],
     "a key under the prefix that is no route or instance key is told",
     st["etcd"].get("last_ignored_key"))
rev = etcd.put(P + "instances/orders", instance("10.0.0.9", 8080))
d.wait_revision(rev)
st = d.status()
t.ok(st["etcd"]["ignored_keys"] == 2 and
     st["etcd"]["last_ignored_key"]["key"] == P + "instances/orders" and
     "instances/<service>/<id>" in st["etcd"]["last_ignored_key"]["why"] and
     "ignored" in d.stderr() and "instances/orders" in d.stderr(),
     "a watched put of an instance key without an id is told and logged",
     (st["etcd"].get("last_ignored_key"), d.stderr()[-400:]))

# --- watch: one commit per watch response ------------------------------
s0 = d.status()
c0, g0 = s0["etcd"]["commits"], s0["generation"]
rev = etcd.txn_put([
    (P + "routes/users", routes_doc(8, [
        route("users", "/users/**", uri="http://users:8080"),
        route("users-v2", "/v2/users/**", uri="http://users2:8080")])),
    (P + "instances/orders/o2", instance("10.0.0.2", 8080)),
])
d.wait_revision(rev)
st = d.status()
t.ok("users-v2" in st["routes"] and
     st["etcd"]["services"][0]["instances"] == 2,
     "a transaction's route and instance changes are applied", st)
t.ok(st["etcd"]["commits"] == c0 + 1 and st["generation"] == g0 + 1,
     "one watch response is one commit and one publish",
     (c0, st["etcd"]["commits"], g0, st["generation"]))

# --- a broken document is rejected, the rest keeps serving -------------
broken = routes_doc(9, [
    route("users", "/users/**"),
    {"id": "bad", "uri": "http://a:80",
     "predicates": [{"name": "Header",
                     "args": {"header": "X", "regexp": "[0-9+"}}]}])
rev = etcd.put(P + "routes/users", broken)
d.wait_revision(rev)
st = d.status()
src = {s["name"]: s for s in st["etcd"]["sources"]}
err = src["users"]["error"] or ""
t.ok("routes[1].predicates[0].args.regexp" in err,
     "the broken document's error names its JSON path", err)
t.ok(src["users"]["version"] == "8" and "users-v2" in st["routes"],
     "the previous document of the source keeps serving", src["users"])
t.ok(d.match("GET", "h", "/orders/9").get("route") == "orders",
     "other sources keep serving")
metrics = d.cmd("metrics")["text"]
t.ok('switchyard_etcd_source_error{source="users"} 1' in metrics,
     "the error shows in the metrics", metrics)
g0 = d.status()["generation"]
rev = etcd.txn_put([
    (P + "routes/users", routes_doc(10, [
        route("users", "/users/**", uri="http://users:8080")])),
    (P + "routes/third", broken),
    (P + "routes/fourth", routes_doc(1, [route("fourth", "/fourth")]))])
d.wait_revision(rev)
st = d.status()
src = {s["name"]: s for s in st["etcd"]["sources"]}
t.ok(src["users"]["error"] is None and src["users"]["version"] == "10",
     "a fixed document clears the error", src["users"])
t.ok("routes[1]" in (src["third"]["error"] or "") and
     src["fourth"]["error"] is None and "fourth" in st["routes"] and
     st["generation"] == g0 + 1,
     "a broken document in a transaction is dropped, the rest is "
     "published once", st)
rev = etcd.delete(P + "routes/third")
rev = etcd.delete(P + "routes/fourth")
d.wait_revision(rev)

# --- instances: bad value rejected, delete, lease expiry ----------------
rev = etcd.put(P + "instances/orders/o3", '{"host": "10.0.0.3", "port": 0}')
d.wait_revision(rev)
svc = d.status()["etcd"]["services"][0]
t.ok(svc["instances"] == 2 and "port" in (svc["error"] or ""),
     "a bad instance is rejected with its field", svc)
# a TLS instance: the gateway has no TLS client (it answered 502 to all)
rev = etcd.put(P + "instances/orders/o3",
               '{"host": "10.0.0.3", "port": 8443, "secure": true}')
d.wait_revision(rev)
svc = d.status()["etcd"]["services"][0]
t.ok(svc["instances"] == 2 and "secure" in (svc["error"] or ""),
     "a secure instance is refused with its field", svc)
# the instances file's format: a key it does not have ("wieght") and a
# weight of 0 (which counts as 1: an instance meant to take no traffic
# took a full share) were accepted, the setting lost
for value, field in [('{"host": "10.0.0.3", "port": 8080, "wieght": 3}',
                      "wieght"),
                     ('{"host": "10.0.0.3", "port": 8080, "weight": 0}',
                      "weight")]:
    rev = etcd.put(P + "instances/orders/o3", value)
    d.wait_revision(rev)
    svc = d.status()["etcd"]["services"][0]
    t.ok(svc["instances"] == 2 and field in (svc["error"] or ""),
         "an instance with %s is refused with its field" % field, svc)
# a host with its port, a URL, and an empty version were taken: every
# request to the first two failed at connect, the third kept o3 out of
# untagged traffic; a metadata key given twice was refused at the commit
# with the whole list of orders (any other change to it held back).
# Each is refused by its key, with the field; o1 and o2 keep serving.
for value, field in [('{"host": "10.0.0.3:8080", "port": 8080}', "host"),
                     ('{"host": "http://10.0.0.3", "port": 8080}', "host"),
                     ('{"host": "10.0.0.3", "port": 8080, '
                      '"metadata": {"version": ""}}', "version"),
                     ('{"host": "10.0.0.3", "port": 8080, '
                      '"metadata": {"zone": "a", "zone": "b"}}', "zone")]:
    rev = etcd.put(P + "instances/orders/o3", value)
    d.wait_revision(rev)
    svc = d.status()["etcd"]["services"][0]
    t.ok(svc["instances"] == 2 and field in (svc["error"] or ""),
         "an instance with a bad %s is refused with its field (%s)" %
         (field, value), svc)
# what the instances file (and PUT /instances, which writes its list here
# with --etcd) accepts: a state in any case, an integer or boolean
# metadata value as its text. Refused here before, so an admin PUT the
# gateway answered 200 never took effect.
rev = etcd.put(P + "instances/orders/o3",
               '{"host": "10.0.0.3", "port": 8080, "state": "Draining", '
               '"metadata": {"version": 2, "canary": true}}')
d.wait_revision(rev)
svc = d.status()["etcd"]["services"][0]
t.ok(svc["instances"] == 3 and svc["error"] is None,
     "an instance in the file's spelling (state Draining, version 2) is "
     "taken", svc)
rev = etcd.put(P + "instances/orders/o3",
               '{"host": "10.0.0.3", "port": 8080, '
               '"metadata": {"version": 1.10}}')
d.wait_revision(rev)
svc = d.status()["etcd"]["services"][0]
t.ok("metadata.version" in (svc["error"] or ""),
     "a fraction in metadata is refused, as in the file (1.10 reads 1.1)",
     svc)
rev = etcd.delete(P + "instances/orders/o3")
rev = etcd.delete(P + "instances/orders/o2")
d.wait_revision(rev)
svc = d.status()["etcd"]["services"][0]
t.ok(svc["instances"] == 1 and svc["error"] is None,
     "deleted instance keys leave the service", svc)

ttl = 2
lease = etcd.grant(ttl)
granted = time.monotonic()
rev = etcd.put(P + "instances/orders/o9",
               instance("10.0.0.9", 9090, weight=1000), lease=lease)
d.wait_revision(rev)
t.ok(d.status()["etcd"]["services"][0]["instances"] == 2,
     "an instance with a lease is registered")
gone = wait_until(
    lambda: d.status()["etcd"]["services"][0]["instances"] == 1, ttl + 5)
elapsed = time.monotonic() - granted
# etcd's lessor checks expiry every 500 ms; one watch delivery is ms.
t.ok(gone and elapsed <= ttl + 1.5,
     "lease expiry removes the instance within TTL + one delivery "
     "(%.2f s for TTL %d s)" % (elapsed, ttl))
t.ok(d.match("GET", "h", "/orders/1").get("instance") == "o1",
     "requests go to the remaining instance")

# --- delete a route key: its source empties -----------------------------
rev = etcd.delete(P + "routes/users")
d.wait_revision(rev)
st = d.status()
src = {s["name"]: s for s in st["etcd"]["sources"]}
t.ok(not any(r.startswith("users") for r in st["routes"]) and
     src["users"]["present"] is False,
     "a deleted key removes its source's routes", st)

# --- etcd killed and restarted: keeps serving, resumes ------------------
before = d.status()
etcd.kill()
time.sleep(0.5)
served = all(d.match("GET", "h", "/orders/%d" % i).get("route") == "orders"
             for i in range(50))
st = d.status()
t.ok(served and st["fingerprint"] == before["fingerprint"],
     "etcd down: the last snapshot keeps serving")
t.ok(wait_until(lambda: not d.status()["etcd"]["connected"], 5),
     "etcd down: the status says disconnected",
     d.status()["etcd"])
ev0 = d.status()["etcd"]["events"]
etcd.start()
rev = etcd.put(P + "routes/users", routes_doc(11, [
    route("users", "/users/**", uri="http://users:8080")]))
t.ok(d.wait_revision(rev, 15), "after a restart the watch resumes",
     d.status()["etcd"])
st = d.status()
t.ok("users" in st["routes"] and st["etcd"]["connected"] and
     st["etcd"]["full_reads"] == 1,
     "resumed from the last revision (no full read)", st["etcd"])
t.ok(st["etcd"]["events"] == ev0 + 1,
     "after the restart only the new event was applied (none twice)",
     (ev0, st["etcd"]["events"]))

# --- compaction while disconnected: a full read -------------------------
etcd.kill()
side = free_port()
etcd.start(ports=[side])  # the driver cannot reach this one
base = "http://127.0.0.1:%d" % side
etcd.put(P + "routes/users", routes_doc(12, [
    route("users", "/users/**", uri="http://users:8080"),
    route("users-v3", "/v3/users/**", uri="http://users3:8080")]), base=base)
etcd.delete(P + "instances/orders/o1", base=base)
etcd.put(P + "instances/orders/o4", instance("10.0.0.4", 8080), base=base)
rev = etcd.put(P + "routes/extra", routes_doc(1, [
    route("extra", "/extra/**")]), base=base)
etcd.compact(rev, base=base)
etcd.kill()
etcd.start()
t.ok(d.wait_revision(rev, 15), "after a compaction the driver catches up",
     d.status()["etcd"])
st = d.status()
t.ok(st["etcd"]["full_reads"] == 2, "the compacted revision forced one "
     "full read", st["etcd"])
t.ok("users-v3" in st["routes"] and "extra" in st["routes"],
     "changes made while disconnected are all applied", st["routes"])
m = d.match("GET", "h", "/orders/1")
t.ok(m.get("instance") == "o4", "an instance deleted meanwhile is gone", m)

# --- incremental state equals a fresh full read -------------------------
fresh = Driver(etcd.url)
fresh.wait_revision(rev)
a, b = d.status(), fresh.status()
t.ok(a["fingerprint"] == b["fingerprint"] and a["routes"] == b["routes"],
     "the watched state equals a fresh full read",
     json.dumps({"watched": a["routes"], "fresh": b["routes"]}))
fresh.quit()

# --- etcd lost its data: what it holds now wins --------------------------
etcd.kill()
etcd.start(data_dir=etcd.dir + "/data2")
rev = etcd.put(P + "routes/orders", routes_doc(2, [
    route("orders", "/orders/**", uri="http://orders:8080")]))
ok = wait_until(lambda: d.status()["routes"] == ["orders"], 15)
st = d.status()
t.ok(ok and st["etcd"]["revision"] == rev,
     "an etcd whose revision went back is read in full", st)

# --- down at start -------------------------------------------------------
etcd2 = Etcd("etcd2")
late = Driver(etcd2.url)
time.sleep(0.5)
st = late.status()
t.ok(st["etcd"]["connected"] is False and st["routes"] == [] and
     st["etcd"]["last_error"], "etcd down at start: an empty router and "
     "the error", st["etcd"])
etcd2.start()
rev = etcd2.put(P + "routes/late", routes_doc(1, [route("late", "/late")]))
t.ok(late.wait_revision(rev, 15) and late.status()["routes"] == ["late"],
     "the driver connects when etcd comes up")

# --- an endpoint list: a dead endpoint first, then a live one ---------
dead = "http://127.0.0.1:%d" % free_port()
multi = Driver(dead + "," + etcd2.url)
t.ok(multi.wait_revision(rev, 15) and multi.status()["routes"] == ["late"],
     "with a list of endpoints the next one is tried after a failure",
     multi.status()["etcd"])
t.ok(multi.quit() == 0, "that driver stops cleanly")

# --- bad flags are refused at start, naming the value -------------------
import subprocess
bad = subprocess.run([os.environ["ETCD_DRIVER"], "--etcd",
                      "http://127.0.0.1:1,ftp://h:2379"],
                     capture_output=True, timeout=10, stdin=subprocess.PIPE)
t.ok(bad.returncode == 2 and b"ftp://h:2379" in bad.stderr and
     b"offset 19" in bad.stderr,
     "a URL that is not http(s):// in --etcd is refused with where it is",
     bad.stderr)
bad = subprocess.run([os.environ["ETCD_DRIVER"], "--etcd", etcd2.url,
                      "--etcd-prefix", ""],
                     capture_output=True, timeout=10, stdin=subprocess.PIPE)
t.ok(bad.returncode == 2 and b"--etcd-prefix" in bad.stderr,
     "an empty --etcd-prefix is refused", bad.stderr)

# --- values of every length modulo 3, with raw UTF-8 and escapes -------
# (the watch line is tokenized in place and each value's base64 decoded
# where it lies: padding of 0, 1 and 2 characters, and bytes above 0x7f)
seen = set()
for version in ("1", "12", "123"):
    doc = json.dumps({"version": version, "routes": [
        {"id": "caf\u00e9-" + version, "uri": "http://backend:80",
         "predicates": ["Path=/bytes/**"],
         "filters": ["AddRequestHeader=X-Quote,\"na\u00efve\" \\ /"]}]},
        ensure_ascii=False)
    seen.add(len(doc.encode()) % 3)
    rev = etcd2.put(P + "routes/bytes", doc)
    late.wait_revision(rev, 10)
    st = late.status()
    src = {x["name"]: x for x in st["etcd"]["sources"]}
    m = late.match("GET", "h", "/bytes/x")
    t.ok(src.get("bytes", {}).get("version") == version and
         src["bytes"]["error"] is None and
         m.get("route") == "caf\u00e9-" + version,
         "a %d-byte document (version %s) arrives intact" %
         (len(doc.encode()), version), (src.get("bytes"), m))
t.ok(seen == {0, 1, 2}, "documents of every length modulo 3", seen)

# --- the trace of a change (gw_etcd_trace, read by the benchmark) ------
# a document of ~290 KB: its watch line (~390 KB of base64) comes in
# several reads; the stamps are in the order the module took them
tr = Driver(etcd2.url, commits=True)
tr.wait_revision(etcd2.revision(), 10)
big = routes_doc(5, [route("big-%d" % i, "/big/%d/**" % i)
                     for i in range(3000)])
rev = etcd2.put(P + "routes/big", big)
c = None
try:
    while c is None or c["commit"] < rev:
        c = tr.commits.get(timeout=10)
except Exception:
    pass
t.ok(c is not None and c["commit"] == rev and
     0 < c["first_us"] <= c["last_us"] <= c["decoded_us"] <=
     c["committed_us"] <= c["us"] and
     c["bytes"] > len(big) * 4 // 3 and c["reads"] >= 2 and
     c["decode_cpu_us"] >= 0 and c["commit_cpu_us"] > 0,
     "a commit's trace: first byte <= last byte <= decoded <= committed, "
     "the line's size and reads", c)
m = tr.match("GET", "h", "/big/2999/x")
t.ok(m.get("route") == "big-2999", "the large document arrives intact", m)
t.ok(tr.quit() == 0, "the tracing driver stops cleanly")

t.ok(d.quit() == 0 and late.quit() == 0, "drivers stop cleanly")
t.ok(time.monotonic() < deadline, "within the time bound")
t.done()
