"""mini-gateway end to end: RequestRateLimiter run for real. Local buckets
(burstCapacity=1 lets one of 20 through, 429 with the four X-RateLimit-*
headers); with --redis two gateways share one bucket through a real
redis-server under SCG's key names; Redis killed mid-run and Redis stopped
(SIGSTOP): requests are allowed with X-RateLimit-Remaining -1, none waits
long, errors are counted."""
import json
import shutil
import signal
import sys
import time

import gwharness as h

LIMIT = {"name": "RequestRateLimiter", "args": {
    "redis-rate-limiter.replenishRate": "1",
    "redis-rate-limiter.burstCapacity": "5",
    "key-resolver": "#{@remoteAddrKeyResolver}"}}


def doc(be, burst):
    lim = json.loads(json.dumps(LIMIT))
    lim["args"]["redis-rate-limiter.burstCapacity"] = str(burst)
    return json.dumps({"version": "1", "routes": [
        {"id": "limited", "uri": be, "predicates": ["Path=/l/**"],
         "filters": [lim]},
        {"id": "free", "uri": be, "predicates": ["Path=/f/**"]}]})


def body(procs, c):
    _, bport = procs.backend("b1")
    be = "http://127.0.0.1:%d" % bport

    # local buckets
    gw = procs.gateway("--routes", procs.write_file("local.json", doc(be, 1)))
    t0 = time.monotonic()
    codes = [gw.request("GET", "/l/x")[0] for _ in range(20)]
    most = 1 + int(time.monotonic() - t0 + 1)  # the burst, one a second
    c.ok(1 <= codes.count(200) <= most and
         codes.count(200) + codes.count(429) == 20,
         "burstCapacity=1: one of 20 allowed (one more a second): %r"
         % codes)
    st, hd, data = gw.request("GET", "/l/x")
    c.eq(st, 429, "denied: 429")
    c.eq(data, b"", "denied: no body")
    c.eq((hd.get("x-ratelimit-remaining"), hd.get("x-ratelimit-replenish-rate"),
          hd.get("x-ratelimit-burst-capacity"),
          hd.get("x-ratelimit-requested-tokens")), ("0", "1", "1", "1"),
         "the four X-RateLimit-* headers")
    c.eq(gw.request("GET", "/f/x")[0], 200, "a route without a limiter")
    lim = gw.metric("gateway_rate_limit_limited_total")
    c.ok(lim is not None and lim >= 18, "limited requests counted: %r" % lim)
    gw.proc.terminate()
    gw.proc.wait(10)

    # Redis: two gateways, one bucket of 5
    rproc, rport = procs.redis()
    f = procs.write_file("redis.json", doc(be, 5))
    g1 = procs.gateway("--routes", f, "--redis", "127.0.0.1:%d" % rport)
    g2 = procs.gateway("--routes", f, "--redis", "127.0.0.1:%d" % rport)
    res = []
    t0 = time.monotonic()
    for i in range(12):
        g = g1 if i % 2 == 0 else g2
        st, hd, _ = g.request("GET", "/l/x")
        res.append((st, hd.get("x-ratelimit-remaining")))
    allowed = [r for r in res if r[0] == 200]
    most = 5 + int(time.monotonic() - t0 + 1)  # Redis refills by the second
    c.ok(5 <= len(allowed) <= most and len(allowed) < 12,
         "one bucket of 5 shared by both gateways: %r" % res)
    c.ok(any(r[0] == 429 for r in res[0::2]) and
         any(r[0] == 429 for r in res[1::2]), "both gateways deny")
    keys = h.redis_cmd(rport, "KEYS", "request_rate_limiter.*")
    c.eq(sorted(keys), ["request_rate_limiter.{limited.127.0.0.1}.timestamp",
                        "request_rate_limiter.{limited.127.0.0.1}.tokens"],
         "SCG's key names")

    # the script flushed from Redis (as after a restart): loaded again
    h.redis_cmd(rport, "SCRIPT", "FLUSH")
    h.redis_cmd(rport, "DEL", *keys)
    st, hd, _ = g1.request("GET", "/l/x")
    c.eq((st, hd.get("x-ratelimit-remaining")), (200, "4"),
         "NOSCRIPT: the script loaded again, the call repeated")

    # Redis stopped (no answer): fail open within the timeout
    rproc.send_signal(signal.SIGSTOP)
    t0 = time.monotonic()
    st, hd, _ = g1.request("GET", "/l/x")
    took = time.monotonic() - t0
    c.eq((st, hd.get("x-ratelimit-remaining")), (200, "-1"),
         "Redis silent: allowed, remaining -1")
    c.ok(took < 1.0, "Redis silent: answered in %.3f s" % took)
    rproc.send_signal(signal.SIGCONT)

    # Redis killed mid-run: every request allowed, none waits long
    rproc.kill()
    rproc.wait()
    worst, statuses = 0.0, []
    for _ in range(20):
        t0 = time.monotonic()
        st, hd, _ = g2.request("GET", "/l/x")
        worst = max(worst, time.monotonic() - t0)
        statuses.append((st, hd.get("x-ratelimit-remaining")))
    c.ok(all(s == (200, "-1") for s in statuses),
         "Redis down: fail open (%r)" % statuses[:3])
    c.ok(worst < 0.5, "Redis down: slowest request %.3f s" % worst)
    errs = g2.metric("gateway_rate_limit_redis_errors_total")
    c.ok(errs is not None and errs >= 1, "Redis errors counted: %r" % errs)
    fo = g2.metric("gateway_rate_limit_failed_open_total")
    c.ok(fo is not None and fo >= 20, "fail-open requests counted: %r" % fo)


if shutil.which("redis-server") is None:
    print("gateway_ratelimit: SKIP: redis-server is not installed "
          "(tests/install-deps.sh)")
    sys.exit(77)  # meson: skipped
h.run("gateway_ratelimit", body)
