"""test_etcd_policy.py - policies changed through etcd, under load.

Real processes on loopback: one etcd, one test backend, one mini-gateway
started with --etcd. While a client keeps sending requests to a route
with a generous RequestRateLimiter, the route document in etcd is
changed:
  1. the limiter made tight in etcd: once the gateway has the revision,
     the client's requests are limited (429 with SCG's headers) at the
     next request, and no request fails otherwise;
  2. a route whose limiter did not change keeps its bucket (an emptied
     bucket stays empty across the publish), and a breaker whose args did
     not change stays open;
  3. the breaker's args changed in etcd: it starts closed at the next
     request.
TAP on stdout.
"""
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gwharness
from etcd_harness import Etcd, Tap, routes_doc, wait_until

gwharness.BINARY = os.environ["MINI_GATEWAY"]
P = "/switchyard/"
t = Tap()
procs = gwharness.Procs()


def limiter(rate, burst, requested=1):
    return {"name": "RequestRateLimiter", "args": {
        "redis-rate-limiter.replenishRate": rate,
        "redis-rate-limiter.burstCapacity": burst,
        "redis-rate-limiter.requestedTokens": requested,
        "key-resolver": "#{@routeKeyResolver}"}}


def breaker(window):
    return {"name": "CircuitBreaker", "args": {
        "name": "orders", "statusCodes": "500",
        "slidingWindowSize": window, "minimumNumberOfCalls": 4,
        "failureRateThreshold": 50, "waitDurationInOpenState": "60s"}}


def doc(version, be, lim, window):
    return routes_doc(version, [
        {"id": "lim", "uri": be, "predicates": ["Path=/lim/**"],
         "filters": [lim]},
        # three tokens a request, one a second: emptied, it stays empty
        # for three seconds (a reset bucket would be full)
        {"id": "keep", "uri": be, "predicates": ["Path=/keep/**"],
         "filters": [limiter(1, 3, 3)]},
        {"id": "cb", "uri": be, "predicates": ["Path=/cb/**"],
         "filters": [breaker(window)]}])


try:
    etcd = Etcd().start()
    _, bport = procs.backend("b1")
    be = "http://127.0.0.1:%d" % bport
    rev = etcd.put(P + "routes/api", doc(1, be, limiter(1000, 1000), 4))
    gw = procs.gateway("--etcd", etcd.url)

    def revision():
        return gw.status().get("etcd", {}).get("revision", 0)

    t.ok(wait_until(lambda: revision() >= rev, 10),
         "the gateway read etcd at start", revision())

    # --- a client on the generous limiter, all along -------------------
    seen = []  # (monotonic time, status, X-RateLimit-Burst-Capacity)
    other = []
    stop = threading.Event()

    def load():
        while not stop.is_set():
            try:
                st, hd, _ = gw.request("GET", "/lim/x", timeout=5)
                seen.append((time.monotonic(), st,
                             hd.get("x-ratelimit-burst-capacity")))
                if st not in (200, 429):
                    other.append(st)
            except Exception as e:  # noqa: BLE001 - any failure counts
                other.append(repr(e))
            time.sleep(0.005)

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    t.ok(wait_until(lambda: len(seen) >= 20, 10), "load is running",
         len(seen))

    # empty the unchanged route's bucket, open the unchanged breaker
    st, hd, _ = gw.request("GET", "/keep/x")
    t.ok((st, hd.get("x-ratelimit-remaining")) == (200, "0"),
         "keep: the first request takes the whole bucket", (st, hd))
    t.ok(gw.request("GET", "/keep/x")[0] == 429, "keep: then limited")
    for _ in range(4):
        gw.request("GET", "/cb/x?status=500")
    t.ok(gw.request("GET", "/cb/x")[0] == 503,
         "cb: open after 4 failures of 4")

    # --- 1. the limiter made tight in etcd ------------------------------
    before = [s for s in seen]
    t.ok(before and all(s[1] == 200 for s in before),
         "generous limiter: every request allowed",
         [s for s in before if s[1] != 200][:5])
    rev = etcd.put(P + "routes/api", doc(2, be, limiter(1, 1), 4))
    t.ok(wait_until(lambda: revision() >= rev, 10),
         "the gateway has the change", revision())
    applied = time.monotonic()
    t.ok(wait_until(lambda: len([s for s in seen if s[0] > applied]) >= 40,
                    10), "load went on after the change")
    after = [s for s in seen if s[0] > applied]
    # the bucket: one token, one more a second (plus one for a request
    # timed at the edge of the change)
    span = after[-1][0] - applied
    allowed = sum(1 for s in after if s[1] == 200)
    t.ok(allowed <= 2 + int(span) + 1,
         "tight limiter: at most its burst plus its refill allowed "
         "(%d of %d in %.2f s)" % (allowed, len(after), span))
    t.ok(any(s[1] == 429 and s[2] == "1" for s in after),
         "tight limiter: 429 with the new X-RateLimit-Burst-Capacity",
         after[:5])
    t.ok(not other, "no request failed otherwise", other[:5])

    # --- 2. unchanged policies kept their state -------------------------
    st, hd, _ = gw.request("GET", "/keep/x")
    t.ok(st == 429, "keep: its emptied bucket survived the publish",
         (st, hd.get("x-ratelimit-remaining")))
    t.ok(gw.request("GET", "/cb/x")[0] == 503,
         "cb: still open after a publish that did not change it")

    # --- 3. the breaker's args changed in etcd --------------------------
    rev = etcd.put(P + "routes/api", doc(3, be, limiter(1, 1), 8))
    t.ok(wait_until(lambda: revision() >= rev, 10),
         "the gateway has the breaker change", revision())
    st, _, data = gw.request("GET", "/cb/x")
    t.ok(st == 200 and json.loads(data)["instance"] == "b1",
         "cb: a changed breaker starts closed at the next request",
         (st, data[:200]))
    stop.set()
    loader.join(10)
    t.ok(not other, "no request failed otherwise, to the end", other[:5])
except Exception as e:  # noqa: BLE001 - reported as a failed test
    import traceback
    traceback.print_exc()
    t.ok(False, "exception: %r" % (e,))
finally:
    procs.stop_all()
t.done()
