"""mini-gateway end to end: a Redis that is not there, comes, goes and
comes back (losing its keys), under a route with a Redis
RequestRateLimiter (burst 3). Redis dead at start: every request is
allowed at once with X-RateLimit-Remaining -1 (fail open, as SCG's
RedisRateLimiter), counted (gateway_rate_limit_failed_open_total), and
the failure is logged once, not once a reconnection attempt (a worker
tries once a second: before, each attempt logged a line, 3,600 an hour a
worker while Redis was down); Redis started: the limit is enforced from
its bucket within 3 s, without a restart, and the reconnection is logged
with the failures it ended; Redis killed and started again (its keys
lost): the same, from a full bucket."""
import json
import shutil
import subprocess
import time

import gwharness as h

LIMIT = {"name": "RequestRateLimiter", "args": {
    "redis-rate-limiter.replenishRate": "1",
    "redis-rate-limiter.burstCapacity": "3",
    "key-resolver": "#{@remoteAddrKeyResolver}"}}


def body(procs, c):
    if not shutil.which("redis-server"):
        c.skip("no redis-server")
        return
    _, bport = procs.backend("b1")
    rport = h.free_port()
    routes = procs.write_file("routes.json", json.dumps({"version": "1",
        "routes": [{"id": "l", "uri": "http://127.0.0.1:%d" % bport,
                    "predicates": ["Path=/l/**"], "filters": [LIMIT]}]}))
    gw = procs.gateway("--routes", routes, "--redis", "127.0.0.1:%d" % rport)
    addr = "127.0.0.1:%d" % rport

    def call():
        t0 = time.monotonic()
        st, hd, _ = gw.request("GET", "/l/x", timeout=5)
        return st, hd.get("x-ratelimit-remaining"), time.monotonic() - t0

    def start_redis():
        p = subprocess.Popen(["redis-server", "--port", str(rport), "--bind",
                              "127.0.0.1", "--save", "", "--appendonly",
                              "no"], stdout=subprocess.DEVNULL)
        procs.procs.append(p)
        h.wait_port(rport, proc=p)
        return p

    def limited_within(what):
        """Until a 429 (the bucket of 3 drawn), 3 s at most."""
        end = time.monotonic() + 3
        seen = []
        while time.monotonic() < end:
            seen.append(call()[:2])
            if seen[-1][0] == 429:
                break
            time.sleep(0.05)
        c.ok(seen[-1][0] == 429 and (200, "2") in seen, "%s: the limit from Redis's bucket "
             "(remaining 2, ..., a 429) within 3 s: %r" % (what, seen[-8:]))

    # dead at start, for 2.5 s: two or three reconnection attempts
    seen = []
    end = time.monotonic() + 2.5
    while time.monotonic() < end:
        seen.append(call())
        time.sleep(0.05)
    c.ok(all(st == 200 and rem == "-1" for st, rem, _ in seen),
         "dead at start: allowed, remaining -1 (%d requests)" % len(seen))
    c.ok(max(t for _, _, t in seen) < 1.0, "none waits for Redis")
    c.ok(gw.metric('gateway_rate_limit_failed_open_total{route="l"}')
         == len(seen), "each counted as failed open")
    log = procs.log("gateway.log")
    c.eq(log.count("redis: cannot connect to %s" % addr), 1,
         "the refusals logged once (%d attempts)" %
         gw.metric("gateway_rate_limit_redis_errors_total"))
    c.ok(gw.metric("gateway_rate_limit_redis_errors_total") >= 2,
         "each attempt counted")

    # started: enforced without a restart, the reconnection logged
    redis = start_redis()
    limited_within("Redis started")
    h.wait_for(lambda: "redis: %s answers again, after" % addr in
               procs.log("gateway.log"), "the reconnection logged")

    # killed, then started again (its keys lost)
    redis.kill()
    redis.wait()
    st, rem, _ = call()
    c.eq((st, rem), (200, "-1"), "Redis killed: fail open")
    time.sleep(1.2)  # an attempt refused: another line, a new outage
    call()
    start_redis()
    limited_within("Redis started again, its keys lost")
    log = procs.log("gateway.log")
    c.eq(log.count("redis: lost the connection to %s" % addr), 1,
         "the loss logged once")
    c.eq(log.count("redis: %s answers again" % addr), 2,
         "each reconnection logged")


h.run("gateway_redis_down", body)
