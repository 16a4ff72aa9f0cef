"""bench_etcd.py - time from an etcd write to every router serving it.

Not a test: prints figures (docs/performance.md, section "etcd").

One etcd, three etcd drivers (routers fed by the mini-gateway's etcd
source, each its own process with its own libuv loop), 3 sources of N
routes each. Each change rewrites one source's document with one route
changed (its uri), written with a put; the next change waits until all
three routers committed it. Latency of a change = the last of the three
commit times (taken right after sy_router_apply published, in the driver)
minus the time the put was sent. Also shown: the put's own round trip
(etcd's raft + fsync), which is part of the latency.

    ETCD_DRIVER=build/tests/e2e/etcd_driver python3 tests/e2e/bench_etcd.py \
        [--gateways] [routes-per-source ...]        (default: 10 10000)

SY_ETCD_TMP=/dev/shm puts etcd's data dir (its WAL) in memory: the figures
then leave out this machine's disk (each put of a 1 MB document is a WAL
fsync of ~1.4 MB), which a production etcd has on its own SSD.

--gateways: three mini-gateways (MINI_GATEWAY=path/to/mini-gateway) instead
of the drivers; "serving" is then seen by polling each gateway's admin
GET /status until its "etcd"."revision" reaches the write's revision (one
thread and one keep-alive connection per gateway, 2 ms between polls), so
the figures include up to one poll round trip and pause.

The put requests are built before the clock starts and sent on one
keep-alive connection. SY_BENCH_CHANGES sets the number of changes (200).
"""
import http.client
import json
import os
import threading
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_harness import Driver, Etcd, _cleanup, b64, routes_doc

P = "/switchyard/"
CHANGES = int(os.environ.get("SY_BENCH_CHANGES", "200"))
SOURCES = 3
POLL_PAUSE = 0.002  # seconds between two status polls of one gateway


def doc(src, n, version, changed):
    routes = []
    for i in range(n):
        port = 8080 + (version % 1000 if i == changed else 0)
        routes.append({"id": "%s-%d" % (src, i),
                       "uri": "http://%s-%d:%d" % (src, i % 50, port),
                       "predicates": ["Path=/%s/%d/**" % (src, i),
                                      "Method=GET"]})
    return routes_doc(version, routes)


class Writer:
    """Puts whose request bodies (JSON, base64) are built before the clock
    starts, on one keep-alive connection: the time measured from the put
    is etcd's and the consumers', not the Python client's."""

    def __init__(self, etcd):
        self.port = etcd.port
        self.conn = None

    def body(self, key, value):
        return json.dumps({"key": b64(key), "value": b64(value)}).encode()

    def put(self, body):
        for attempt in (0, 1):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(
                        "127.0.0.1", self.port, timeout=30)
                self.conn.request("POST", "/v3/kv/put", body,
                                  {"Content-Type": "application/json"})
                r = self.conn.getresponse()
                answer = json.loads(r.read())
                return int(answer["header"]["revision"])
            except (OSError, http.client.HTTPException):
                self.conn = None
                if attempt:
                    raise


def pct(v, p):
    v = sorted(v)
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


class GatewayWatcher:
    """A mini-gateway, and a thread that polls its /status: the time each
    etcd revision was first seen applied (queued like driver commits)."""

    def __init__(self, procs, etcd_url):
        import queue
        self.g = procs.gateway("--etcd", etcd_url)
        self.commits = queue.Queue()
        self.stop = False
        self.seen = 0
        threading.Thread(target=self.poll, daemon=True).start()

    def revision(self):
        c = self.conn
        c.request("GET", "/status")
        return json.loads(c.getresponse().read())["etcd"]["revision"]

    def poll(self):
        self.conn = http.client.HTTPConnection("127.0.0.1", self.g.admin,
                                               timeout=30)
        while not self.stop:
            try:
                rev = self.revision()
            except Exception:
                self.conn = http.client.HTTPConnection(
                    "127.0.0.1", self.g.admin, timeout=30)
                time.sleep(0.01)
                continue
            if rev > self.seen:
                self.seen = rev
                self.commits.put({"commit": rev, "us": time.time() * 1e6})
            # a short pause: three pollers back to back (each status a
            # JSON document of the gateway's sources) take CPU from the
            # commits being measured
            time.sleep(POLL_PAUSE)

    def wait_revision(self, rev, timeout):
        end = time.time() + timeout
        while self.seen < rev and time.time() < end:
            time.sleep(0.01)

    def status(self):
        return self.g.status()

    def quit(self):
        self.stop = True


def run(n, gateways=False):
    etcd = Etcd("bench").start()
    names = ["src%d" % i for i in range(SOURCES)]
    for s in names:
        etcd.put(P + "routes/" + s, doc(s, n, 0, -1))
    if gateways:
        import gwharness
        gwharness.BINARY = os.environ["MINI_GATEWAY"]
        procs = gwharness.Procs()
        drivers = [GatewayWatcher(procs, etcd.url) for _ in range(3)]
    else:
        drivers = [Driver(etcd.url, commits=True) for _ in range(3)]
    rev = etcd.revision()
    for d in drivers:
        d.wait_revision(rev, 60)
        while not d.commits.empty():
            d.commits.get()
    # documents and put requests built before timing
    writer = Writer(etcd)
    docs = [doc(names[i % SOURCES], n, i + 1, (i * 7919) % n)
            for i in range(CHANGES)]
    size = len(docs[0])
    bodies = [writer.body(P + "routes/" + names[i % SOURCES], docs[i])
              for i in range(CHANGES)]
    del docs
    # the consumers' counters before the changes (the initial full read's
    # commit is not one of them)
    base = [d.status()["etcd"] for d in drivers]
    load0 = os.getloadavg()[0]
    lat, put_rt = [], []
    for i in range(CHANGES):
        t0 = time.time()
        rev = writer.put(bodies[i])
        put_rt.append(time.time() - t0)
        last = 0.0
        for d in drivers:
            while True:
                c = d.commits.get(timeout=60)
                if c["commit"] >= rev:
                    break
            last = max(last, c["us"] / 1e6)
        lat.append(last - t0)
    apply_ms, decode_ms, cpu_ms, fp_ms = [], [], [], []
    for d, b in zip(drivers, base):
        e = d.status()["etcd"]
        k = 1000.0 * max(1, e["commits"] - b["commits"])
        apply_ms.append((e["commit_us_total"] - b["commit_us_total"]) / k)
        cpu_ms.append((e["commit_cpu_us_total"] - b["commit_cpu_us_total"])
                      / k)
        fp_ms.append((e["fingerprint_us_total"] - b["fingerprint_us_total"])
                     / k)
        decode_ms.append((e["decode_us_total"] - b["decode_us_total"]) / k)
        d.quit()
    if gateways:
        procs.stop_all()
    etcd.kill()
    ms = [x * 1000 for x in lat]
    pr = [x * 1000 for x in put_rt]
    print("%s routes/source %6d  doc %8d bytes  changes %d  write->all 3 "
          "serving: median %.2f ms  p99 %.2f ms  max %.2f ms  (put round "
          "trip median %.2f ms; mean per change in a consumer: watch line "
          "parse+decode %.2f ms, commit %.2f ms wall / %.2f ms CPU; "
          "fingerprint reads for status %.2f ms)  [%s UTC, load average "
          "%.2f -> %.2f; etcd data on %s]" %
          ("gateways" if gateways else "drivers ", n, size, CHANGES,
           statistics.median(ms), pct(ms, 99), max(ms),
           statistics.median(pr), statistics.mean(decode_ms),
           statistics.mean(apply_ms), statistics.mean(cpu_ms),
           statistics.mean(fp_ms),
           time.strftime("%H:%M:%S", time.gmtime()), load0,
           os.getloadavg()[0], os.environ.get("SY_ETCD_TMP") or "disk"))
    sys.stdout.flush()


if __name__ == "__main__":
    gw = "--gateways" in sys.argv
    sizes = [int(a) for a in sys.argv[1:] if a != "--gateways"] or [10, 10000]
    try:
        for n in sizes:
            run(n, gw)
    finally:
        _cleanup()
