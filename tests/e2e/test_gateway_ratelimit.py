"""mini-gateway end to end: RequestRateLimiter run for real. Local buckets
(burstCapacity=1 lets one of 20 through, 429 with the four X-RateLimit-*
headers); with --redis two gateways share one bucket through a real
redis-server under SCG's key names; Redis killed mid-run and Redis stopped
(SIGSTOP): requests are allowed with X-RateLimit-Remaining -1, none waits
long, errors are counted. Batches: 40 concurrent requests on one bucket of
10 (the gateway sends the calls of a loop iteration on one bucket as one
script call) let exactly 10 through with remaining 9..0 and leave the keys
as SCG's script would; a gateway's batches and another's single calls
(SCG's script) draw from one bucket in turn; the batch script's reply of
two numbers (how many draws allowed, the tokens left) against N runs of
SCG's script on the same bucket (running out mid-batch, ttl 0, requested
tokens > 1); both scripts against SCG's lines written out
(ratelimit_ref.py) over sequences with time steps and edge values."""
import http.client
import json
import re
import shutil
import signal
import subprocess
import sys
import time

import gwharness as h
import ratelimit_ref

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

    # a bucket of 21 drawn down: Remaining's text, edited in place when
    # only its last digit moves (policy.c), is each number's own text
    # across 20 -> 19 and 10 -> 9, one less a request, then 0 on the
    # denials; the bucket refills at 1/s, so over the whole draw-down the
    # numbers may fall short of one a request by at most one a second the
    # requests took, and a stalled machine does not fail it
    gw = procs.gateway("--routes", procs.write_file("local21.json",
                                                    doc(be, 21)))
    t_draw = time.monotonic()
    res = [gw.request("GET", "/l/x") for _ in range(26)]
    refill = 1 + int(time.monotonic() - t_draw)
    left = [hd.get("x-ratelimit-remaining") for _, hd, _ in res]
    codes = [st for st, _, _ in res]
    first = codes.index(429) if 429 in codes else len(codes)
    c.ok(all(v is not None and v == str(int(v)) for v in left),
         "each Remaining a number's own text: %r" % left)
    nums = [int(v) for v in left[:first]]
    steps = list(zip(nums, nums[1:]))
    c.ok(first >= 21 and nums[0] == 20 and
         all(b >= a - 1 for a, b in steps) and
         sum(b - (a - 1) for a, b in steps) <= refill and
         all(v == "0" for v in left[first:]),
         "Remaining 20 down to 0 a request, then 0: %r" % left)
    gw.proc.terminate()
    gw.proc.wait(10)

    # Redis: two gateways, one bucket of 5
    rproc, rport = procs.redis(unix=True)
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
    unix_socket(procs, c, f, rport)
    long_keys(procs, c, be, rport)

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

    redis_batches(procs, c, be)


def unix_socket(procs, c, f, rport):
    """--redis unix:PATH: the same bucket through Redis's Unix socket; a
    bad PATH refused at start with the option named."""
    g3 = procs.gateway("--routes", f, "--redis",
                       "unix:" + procs.redis_socket(rport))
    # an empty bucket stamped ahead of Redis's clock: no refill
    ahead = str(redis_second(rport) + 100)
    bucket = "request_rate_limiter.{limited.127.0.0.1}."
    h.redis_cmd(rport, "SETEX", bucket + "tokens", "20", "0")
    h.redis_cmd(rport, "SETEX", bucket + "timestamp", "20", ahead)
    st, hd, _ = g3.request("GET", "/l/x")
    c.eq((st, hd.get("x-ratelimit-remaining")), (429, "0"),
         "unix:PATH: the bucket in Redis, empty: denied")
    run = within_one_second(rport, lambda: [
        (st, hd.get("x-ratelimit-remaining"))
        for st, hd, _ in (g3.request("GET", "/l/x") for _ in range(2))])
    c.eq(run and run[0], [(200, "4"), (200, "3")],
         "unix:PATH: a fresh bucket of 5 drawn")
    c.eq(g3.metric("gateway_rate_limit_redis_errors_total"), 0,
         "unix:PATH: no Redis error")
    g3.proc.terminate()
    g3.proc.wait(10)
    for bad in ("unix:", "unix:/" + "d" * 120):
        r = subprocess.run([h.binary(), "--listen", "127.0.0.1:0", "--redis",
                            bad], capture_output=True, text=True, timeout=30)
        c.ok(r.returncode != 0 and
             ("bad --redis %s (unix:PATH" % bad) in r.stderr,
             "--redis %s refused: %r" % (bad[:12], r.stderr[-200:]))


def long_keys(procs, c, be, rport):
    """Keys sharing their first 255 bytes (cut there once, so the second
    client was limited by the first): each its own bucket, locally and in
    Redis, where a key past 255 bytes is named by its first 238 bytes, "~"
    and 16 hex digits of the whole key's hash."""
    lim = json.loads(json.dumps(LIMIT))
    lim["args"]["redis-rate-limiter.burstCapacity"] = "1"
    lim["args"]["key-resolver"] = "#{@header:X-User}"
    f = procs.write_file("long.json", json.dumps({"version": "1", "routes": [
        {"id": "long", "uri": be, "predicates": ["Path=/l/**"],
         "filters": [lim]}]}))
    users = ["a" * 255 + "-ann", "a" * 255 + "-bob"]
    for mode, extra in (("local", ()), ("Redis", ("--redis",
                                                  "127.0.0.1:%d" % rport))):
        g = procs.gateway("--routes", f, *extra)
        codes = [g.request("GET", "/l/x", headers={"X-User": u})[0]
                 for u in users for _ in range(2)]
        c.eq(codes, [200, 429, 200, 429],
             "%s: two keys sharing 255 bytes, a bucket each" % mode)
        g.proc.terminate()
        g.proc.wait(10)
    keys = sorted(k for k in h.redis_cmd(rport, "KEYS",
                                         "request_rate_limiter.{long.*"))
    c.ok(len(keys) == 4 and all(
        re.fullmatch(r"request_rate_limiter\.\{long\.a{238}~[0-9a-f]{16}\}"
                     r"\.(tokens|timestamp)", k) for k in keys) and
         len({k.split("}")[0] for k in keys}) == 2,
         "Redis: two buckets named by the keys' first bytes and hash: %r"
         % [k[-30:] for k in keys])
    h.redis_cmd(rport, "DEL", *keys)


def burst_doc(be):
    lim = json.loads(json.dumps(LIMIT))
    lim["args"]["redis-rate-limiter.burstCapacity"] = "10"
    return json.dumps({"version": "1", "routes": [
        {"id": "burst", "uri": be, "predicates": ["Path=/b/**"],
         "filters": [lim]}]})


def burst(gw, n):
    """n requests at once on n keep-alive connections (all connected
    first, then sent one after the other from this thread, then read):
    [(status, X-RateLimit-Remaining)] in sending order."""
    conns = [http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
             for _ in range(n)]
    try:
        for x in conns:
            x.connect()
        for x in conns:
            x.request("GET", "/b/x")
        out = []
        for x in conns:
            r = x.getresponse()
            r.read()
            out.append((r.status, r.getheader("X-RateLimit-Remaining")))
        return out
    finally:
        for x in conns:
            x.close()


def redis_second(rport):
    return int(h.redis_cmd(rport, "TIME")[0])


def within_one_second(rport, scenario):
    """Run scenario() inside one second of Redis's clock (the bucket refills
    by whole seconds: a run across a second boundary gets one more token);
    the keys are deleted first. Returns (its result, that second), or None
    when three tries all crossed a boundary."""
    for _ in range(3):
        for k in h.redis_cmd(rport, "KEYS", "request_rate_limiter.*"):
            h.redis_cmd(rport, "DEL", k)
        t = h.redis_cmd(rport, "TIME")
        time.sleep(max(0.0, 1.02 - int(t[1]) / 1e6))  # just after a tick
        s0 = redis_second(rport)
        res = scenario()
        if redis_second(rport) == s0:
            return res, s0
    return None


def batch_sizes(rport):
    """The N of each batched EVALSHA in Redis's slow log (every command is
    logged: slowlog-log-slower-than 0)."""
    sizes = []
    for e in h.redis_cmd(rport, "SLOWLOG", "GET", "100000"):
        args = e[3]
        if args and args[0].upper() == "EVALSHA" and len(args) == 10:
            sizes.append(int(args[9]))
    return sizes


def redis_batches(procs, c, be):
    rproc, rport = procs.redis()
    f = procs.write_file("burst.json", burst_doc(be))
    g1 = procs.gateway("--routes", f, "--redis", "127.0.0.1:%d" % rport)
    g2 = procs.gateway("--routes", f, "--redis", "127.0.0.1:%d" % rport)
    c.eq(g1.request("GET", "/b/warm")[0], 200, "the connection to Redis up")
    g2.request("GET", "/b/warm")
    h.redis_cmd(rport, "CONFIG", "SET", "slowlog-log-slower-than", "0")
    h.redis_cmd(rport, "CONFIG", "SET", "slowlog-max-len", "100000")
    h.redis_cmd(rport, "SLOWLOG", "RESET")

    # 40 at once on a bucket of 10
    run = within_one_second(rport, lambda: burst(g1, 40))
    c.ok(run is not None, "a burst within one second of Redis's clock")
    if run is None:
        return
    res, second = run
    allowed = [r for r in res if r[0] == 200]
    c.eq(len(allowed), 10, "a burst of 40 on a bucket of 10: 10 allowed "
         "(%r)" % res)
    c.eq(sorted(int(r[1]) for r in allowed), list(range(10)),
         "each allowed request its own remaining count, 9..0")
    c.ok(all(r == (429, "0") for r in res if r[0] != 200),
         "the other 30 denied with remaining 0: %r" % res)
    sizes = batch_sizes(rport)
    c.ok(sizes and max(sizes) > 1,
         "calls on one bucket went together (batch sizes %r)" % sizes)
    keys = "request_rate_limiter.{burst.127.0.0.1}."
    c.eq((h.redis_cmd(rport, "GET", keys + "tokens"),
          h.redis_cmd(rport, "GET", keys + "timestamp")), ("0", str(second)),
         "the bucket left as 40 runs of SCG's script leave it: 0 tokens, "
         "stamped with Redis's second")
    ttl = h.redis_cmd(rport, "TTL", keys + "tokens")
    c.ok(18 <= ttl <= 20, "the keys expire as SCG's: 2 x 10 / 1 s (%r)"
         % ttl)

    # a batch on one gateway, single calls (SCG's script) on the other, a
    # batch again: one bucket, drawn in turn
    def turns():
        a = burst(g1, 6)
        b = [g2.request("GET", "/b/x") for _ in range(2)]
        b = [(st, hd.get("x-ratelimit-remaining")) for st, hd, _ in b]
        return a, b, burst(g1, 10)

    run = within_one_second(rport, turns)
    c.ok(run is not None, "the turns within one second of Redis's clock")
    if run is None:
        return
    (a, b, d), _ = run
    c.eq(sorted(int(r[1]) for r in a if r[0] == 200), [4, 5, 6, 7, 8, 9],
         "gateway 1's batch of 6: remaining 9..4 (%r)" % a)
    c.eq(b, [(200, "3"), (200, "2")],
         "gateway 2's single calls go on from there")
    c.eq(sorted(r for r in d if r[0] == 200), [(200, "0"), (200, "1")],
         "gateway 1's batch of 10 gets the last 2 (%r)" % d)
    c.eq(sum(1 for r in d if r == (429, "0")), 8, "and 8 denied")

    batch_sha = single_sha = None
    for e in h.redis_cmd(rport, "SLOWLOG", "GET", "100000"):
        args = e[3]
        if args and args[0].upper() == "EVALSHA":
            if len(args) == 10:
                batch_sha = args[1]
            elif len(args) == 9:
                single_sha = args[1]
    c.ok(batch_sha and single_sha, "both scripts' digests seen (%r, %r)"
         % (batch_sha, single_sha))
    if batch_sha and single_sha:
        batch_equals_runs(c, rport, batch_sha, single_sha)
        ratelimit_ref.compare(c, rport, single_sha, batch_sha)
    held_while_in_flight(procs, c, be, rproc, rport)


def held_while_in_flight(procs, c, be, rproc, rport):
    """Calls made while a script call is in flight wait for its reply, then
    go together: A's call sent to a stopped Redis, B and C made in later
    loop iterations meanwhile: after SIGCONT Redis sees A alone, then one
    batch of 2 (each a command of its own without the wait)."""
    g = procs.gateway("--routes", procs.write_file("held.json", burst_doc(be)),
                      "--redis", "127.0.0.1:%d" % rport,
                      "--redis-timeout", "5000")
    # the bucket the part before drained (its last batch ends denied):
    # emptied first, else the warm-up reads 429 until it refills
    keys = "request_rate_limiter.{burst.127.0.0.1}."
    h.redis_cmd(rport, "DEL", keys + "tokens", keys + "timestamp")
    c.eq(g.request("GET", "/b/warm")[0], 200, "held: the connection up")
    h.redis_cmd(rport, "DEL", keys + "tokens", keys + "timestamp")
    h.redis_cmd(rport, "SLOWLOG", "RESET")
    conns = [http.client.HTTPConnection("127.0.0.1", g.port, timeout=10)
             for _ in range(3)]
    for x in conns:
        x.connect()
    rproc.send_signal(signal.SIGSTOP)
    try:
        for x in conns:
            x.request("GET", "/b/held")
            time.sleep(0.15)
    finally:
        rproc.send_signal(signal.SIGCONT)
    res = []
    for x in conns:
        r = x.getresponse()
        r.read()
        res.append((r.status, r.getheader("X-RateLimit-Remaining")))
        x.close()
    c.ok(all(st == 200 and 7 <= int(left) <= 9 for st, left in res),
         "held: all allowed from the bucket (%r)" % (res,))
    sent = [len(e[3]) == 10 and int(e[3][9]) or 1
            for e in reversed(h.redis_cmd(rport, "SLOWLOG", "GET", "100"))
            if e[3] and e[3][0].upper() == "EVALSHA"]
    c.eq(sent, [1, 2], "held: A's call alone, B's and C's as one batch "
         "after A's reply (draws a command: %r)" % sent)


# (rate, capacity, requested, tokens, timestamp, now, N): tokens and
# timestamp None for absent keys; `now` passed as ARGV[3]
EQ_CASES = [
    (1, 10, 1, None, None, 1000, 40),  # a fresh bucket: 10 of 40
    (1, 10, 1, 3, 999, 1000, 8),       # runs out mid-batch: 4 of 8
    (5, 20, 3, 2, 998, 1000, 9),       # requested 3, refilled 10
    (1, 10, 1, 0, 1000, 1000, 5),      # empty: none
    (10, 4, 1, 0, 0, 1000, 6),         # ttl 0: each draw a full bucket
    (10, 4, 5, 0, 0, 1000, 3),         # ttl 0, never enough
    (1, 0, 1, None, None, 1000, 4),    # burstCapacity 0: none
    (1000, 2000000, 7, 5, 990, 1000, 50),  # plenty: all
    (1, 10, 1, 6, 1001, 1000, 3),      # a stamp ahead of the clock
]


def batch_equals_runs(c, rport, batch_sha, single_sha):
    """The batch script's two-number reply against N runs of SCG's script
    on the same bucket at the same second: the allowed draws are the first
    k runs, the reply is {k, the last run's tokens left}, and the keys are
    left with the same values and TTL."""
    tk = "request_rate_limiter.{eq.x}.tokens"
    sk = "request_rate_limiter.{eq.x}.timestamp"

    def reset(tokens, stamp):
        h.redis_cmd(rport, "DEL", tk, sk)
        if tokens is not None:
            h.redis_cmd(rport, "SET", tk, str(tokens))
        if stamp is not None:
            h.redis_cmd(rport, "SET", sk, str(stamp))

    def state():
        return (h.redis_cmd(rport, "GET", tk), h.redis_cmd(rport, "GET", sk),
                h.redis_cmd(rport, "TTL", tk), h.redis_cmd(rport, "TTL", sk))

    for rate, cap, req, tokens, stamp, now, n in EQ_CASES:
        argv = [str(rate), str(cap), str(now), str(req)]
        reset(tokens, stamp)
        runs = [h.redis_cmd(rport, "EVALSHA", single_sha, "2", tk, sk, *argv)
                for _ in range(n)]
        after_runs = state()
        reset(tokens, stamp)
        reply = h.redis_cmd(rport, "EVALSHA", batch_sha, "2", tk, sk, *argv,
                            str(n))
        after_batch = state()
        k = sum(1 for r in runs if r[0] == 1)
        case = (rate, cap, req, tokens, stamp, now, n)
        c.ok(all(r[0] == 1 for r in runs[:k]),
             "%r: the allowed runs are the first ones (%r)" % (case, runs))
        c.eq(reply, [k, runs[-1][1]],
             "%r: the batch replies {allowed, last tokens left}" % (case,))
        c.eq(after_batch, after_runs,
             "%r: the keys left as the runs leave them" % (case,))


if shutil.which("redis-server") is None:
    print("gateway_ratelimit: SKIP: redis-server is not installed "
          "(tests/install-deps.sh)")
    sys.exit(77)  # meson: skipped
h.run("gateway_ratelimit", body)
