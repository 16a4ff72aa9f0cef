"""test_etcd_large.py - the etcd source on a large prefix.

One etcd (taking transactions of thousands of operations) and the etcd
driver. Under the prefix: 200 route sources and 40,000 instances of one
service (about 3 MB of keys and values), written in an order unrelated
to their keys, as a registry fills. Covers: the first full read lists
them all (157 range pages of 256 keys with limit/more, at one revision);
a compaction past the watch's revision while the driver is cut off, then
the full read that diffs the 40,000 applied keys against etcd's holds
the loop well under a second (it was quadratic in the keys: about 10 s
here); a transaction changing many keys at one revision is applied as
one commit; more route sources than the router holds (256): the ones
beyond refused with their key and error, the rest applied, the watch
going on; a delete of a whole prefix (every instance) as one commit, the
routes kept, in well under 200 ms (each delete used to move the rest of
its service's list: 737 ms here); and the state then equals a fresh full
read (which refuses the same sources). Then a range page of 1.6 MB over
a link passing 400 KB/s (a proxy) to a driver whose requests time out
after 1.5 s: it arrives (the timeout is of silence, not of the answer).
TAP on stdout.
"""
import json
import os
import random
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_harness import (Driver, Etcd, Tap, b64, free_port, instance,
                          route, routes_doc)



class SlowProxy:
    """A TCP proxy on loopback passing the answers of port `to` at `rate`
    bytes a second (16 KB at a time), the requests as they come."""

    def __init__(self, to, rate):
        self.to, self.rate = to, rate
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(16)
        self.port = self.srv.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.srv.accept()
                u = socket.create_connection(("127.0.0.1", self.to))
            except OSError:
                continue
            threading.Thread(target=self._pump, args=(c, u, 0),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, self.rate),
                             daemon=True).start()

    def _pump(self, src, dst, rate):
        try:
            while True:
                b = src.recv(16384)
                if not b:
                    break
                dst.sendall(b)
                if rate:
                    time.sleep(len(b) / rate)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.closed = True
        self.srv.close()


P = "/switchyard/"
SOURCES, INSTANCES, SERVICES = 200, 40000, 1
t = Tap()
started = time.monotonic()

etcd = Etcd("large")
etcd.extra_args = ["--max-txn-ops", "8192"]
etcd.start()


def inst_key(k):
    return P + "instances/svc%02d/i%05d" % (k % SERVICES, k)


def inst_val(k, port=8080):
    return instance("10.%d.%d.%d" % (k >> 16, (k >> 8) & 255, k & 255), port)


order = list(range(INSTANCES))
random.Random(50).shuffle(order)  # creation order unrelated to key order
for i in range(0, INSTANCES, 4000):
    etcd.txn_put([(inst_key(k), inst_val(k)) for k in order[i:i + 4000]])
srcs = list(range(SOURCES))
random.Random(51).shuffle(srcs)
for i in range(0, SOURCES, 100):
    rev = etcd.txn_put([(P + "routes/s%03d" % k, routes_doc(1, [
        route("s%03d" % k, "/s%03d/**" % k, uri="lb://svc%02d" % (
            k % SERVICES))])) for k in srcs[i:i + 100]])


def live(st):
    return sum(s["instances"] for s in st["etcd"]["services"])


# --- the first full read: every page ------------------------------------
d = Driver(etcd.url)
t.ok(d.wait_revision(rev, 30), "the first full read reaches the revision",
     d.status()["etcd"].get("last_error"))
st = d.status()
t.ok(len(st["routes"]) == SOURCES and live(st) == INSTANCES and
     st["etcd"]["last_full_read_keys"] == SOURCES + INSTANCES,
     "every key of the prefix is listed (range pages with limit/more)",
     (len(st["routes"]), live(st), st["etcd"]["last_full_read_keys"]))
m = d.match("GET", "h", "/s007/x")
t.ok(m.get("route") == "s007" and m.get("instance", "").startswith("i"),
     "a route serves an instance of its service", m)

# --- compaction while cut off: the full read diffs 40,000 keys ----------
etcd.kill()
side = free_port()
etcd.start(ports=[side])  # the driver cannot reach this one
base = "http://127.0.0.1:%d" % side
etcd.delete(inst_key(7), base=base)
etcd.put(P + "instances/moved/m1", inst_val(1, 9090), base=base)
rev = etcd.put(P + "routes/s007", routes_doc(2, [
    route("s007", "/s007/**", uri="lb://moved")]), base=base)
etcd.compact(rev, base=base)
etcd.kill()
etcd.start()
t.ok(d.wait_revision(rev, 20), "after the compaction the driver catches up",
     d.status()["etcd"]["last_error"])
st = d.status()
e = st["etcd"]
t.ok(e["full_reads"] == 2 and live(st) == INSTANCES,
     "one full read applied what changed meanwhile", (e["full_reads"],
                                                      live(st)))
t.ok(e["last_full_read_us"] < 1000000,
     "the full read of %d keys held the loop %.0f ms (< 1 s)" %
     (e["last_full_read_keys"], e["last_full_read_us"] / 1000.0))
m = d.match("GET", "h", "/s007/x")
t.ok(m.get("target", "").endswith(":9090"),
     "the changed route and instance serve", m)

# --- a transaction of many keys: one commit -----------------------------
c0 = d.status()["etcd"]["commits"]
rev = etcd.txn_put([(inst_key(k), inst_val(k, 7070)) for k in range(2000)] +
                   [(P + "routes/s%03d" % k, routes_doc(3, [
                       route("s%03d" % k, "/t%03d/**" % k,
                             uri="lb://svc%02d" % (k % SERVICES))]))
                    for k in range(50)])
t.ok(d.wait_revision(rev, 10), "a transaction of 2,050 keys arrives")
st = d.status()
t.ok(st["etcd"]["commits"] == c0 + 1 and
     d.match("GET", "h", "/t001/x").get("route") == "s001",
     "applied as one commit", (c0, st["etcd"]["commits"]))

# --- more sources than the router holds (256): those refused -----------
# a transaction adding 60 sources (260 in all) and changing another: the 4
# the router cannot register are refused with their error, the rest of
# the transaction is applied and the watch goes on (it used to fail the
# whole change, then every full read after it: nothing applied again)
r0 = st["etcd"]["rejected"]
extra = ["x%03d" % k for k in range(60)]
rev = etcd.txn_put([(P + "routes/" + n, routes_doc(1, [
    route(n, "/%s/**" % n)])) for n in extra] + [
    (P + "routes/s002", routes_doc(4, [
        route("s002", "/u002/**", uri="lb://svc02")]))])
t.ok(d.wait_revision(rev, 10), "a transaction adding 60 sources arrives",
     d.status()["etcd"]["last_error"])
st = d.status()
src = {s["name"]: s for s in st["etcd"]["sources"]}
refused = [n for n in extra
           if "at most 256 sources" in (src.get(n, {}).get("error") or "")]
t.ok(refused == extra[-4:] and st["etcd"]["rejected"] == r0 + 4 and
     all(src[n]["key"] == P + "routes/" + n for n in refused),
     "the 4 sources beyond the router's 256 are refused, each with its "
     "key and error", (refused, st["etcd"]["rejected"] - r0))
t.ok(d.match("GET", "h", "/u002/x").get("route") == "s002" and
     d.match("GET", "h", "/x055/x").get("route") == "x055" and
     d.match("GET", "h", "/x056/x").get("route") is None and
     st["etcd"]["state"] == "watching",
     "the rest of the transaction is applied, the watch goes on",
     st["etcd"]["last_error"])

# --- a delete of the whole instances prefix: one commit -----------------
nroutes = len(st["routes"])
c0 = st["etcd"]["commits"]
r = etcd.call("/v3/kv/deleterange", {"key": b64(P + "instances/"),
                                      "range_end": b64(P + "instances0")})
rev = int(r["header"]["revision"])
t.ok(d.wait_revision(rev, 10), "a delete of every instance arrives")
st = d.status()
t.ok(st["etcd"]["commits"] == c0 + 1 and live(st) == 0 and
     len(st["routes"]) == nroutes,
     "applied as one commit: no instance left, the routes kept",
     (c0, st["etcd"]["commits"], live(st), len(st["routes"])))
t.ok(st["etcd"]["last_commit_us"] < 200000,
     "the delete of %d instances held the loop %.0f ms (< 200 ms)" %
     (INSTANCES, st["etcd"]["last_commit_us"] / 1000.0))

# --- a slow link: a range page slower than the request timeout ---------
# Four 300 KB documents under another prefix: one range page of 1.6 MB,
# through a proxy that passes etcd's answers at 400 KB/s (4 s), to a
# driver whose requests time out after 1.5 s of silence. Bytes keep
# coming, so the page arrives (a timeout of the whole answer failed
# every attempt: the prefix was never read).
Q = "/slow/"
big = [route("big-%d" % k, "/big/%d/**" % k) for k in range(2200)]
for i in range(4):
    qrev = etcd.put(Q + "routes/d%d" % i, routes_doc(1, [
        dict(r, id="d%d-%s" % (i, r["id"]),
             predicates=["Path=/d%d%s" % (i, r["predicates"][0][5:])])
        for r in big]))
proxy = SlowProxy(etcd.port, 400 << 10)
slow = Driver("http://127.0.0.1:%d" % proxy.port, prefix=Q,
              extra=["--request-timeout-ms", "1500"])
t0 = time.monotonic()
ok = slow.wait_revision(qrev, 20)
e = slow.status()["etcd"]
t.ok(ok and len(slow.status()["routes"]) == 4 * 2200,
     "a range page that takes %.1f s to arrive over a slow link is read "
     "with a 1.5 s request timeout" % (time.monotonic() - t0),
     e["last_error"])
t.ok(slow.quit() == 0, "that driver stops cleanly")
proxy.close()

# --- the state equals a fresh full read ---------------------------------
fresh = Driver(etcd.url)
t.ok(fresh.wait_revision(rev, 20), "a fresh driver reads the prefix")
a, b = d.status(), fresh.status()
t.ok(a["fingerprint"] == b["fingerprint"] and a["routes"] == b["routes"],
     "the watched state equals a fresh full read",
     json.dumps([a["fingerprint"], b["fingerprint"]]))
t.ok(d.quit() == 0 and fresh.quit() == 0, "drivers stop cleanly")
t.ok(time.monotonic() - started < 90, "within the time bound (%.0f s)" %
     (time.monotonic() - started))
t.done()
