"""mini-gateway end to end: the shared rate limits through a Redis that
wants a password. A redis-server started with --requirepass, and one with
an ACL user (--user NAME on >PW ~request_rate_limiter.* +@all): with
--redis-password-file (and --redis-user) the gateway AUTHs on its
connection and the limit is enforced from Redis's bucket (a 429 once the
burst is drawn, the keys in Redis); with a wrong password, or none, every
request is allowed with X-RateLimit-Remaining -1 (fail open, as SCG) and
the refusal is visible: logged with Redis's reason (WRONGPASS, or NOAUTH
naming --redis-password-file), counted in
gateway_rate_limit_redis_auth_failures_total, shown in /status's "redis"
(auth "refused", auth_error); the password is in none of them. The flags:
either without --redis, --redis-user without --redis-password-file, an
unreadable file, an empty first line: exit 2 naming the flag. (Before:
no AUTH was ever sent; Redis answered NOAUTH to every call and every
limit failed open while the gateway started fine.)"""
import json
import os
import shutil
import subprocess
import sys
import time

import gwharness as h

PASSWORD = "s3cret-Redis-pw"
USER, USER_PASSWORD = "limiter", "acl-Pw-4-limiter"


def doc(be):
    return json.dumps({"version": "1", "routes": [
        {"id": "limited", "uri": be, "predicates": ["Path=/l/**"],
         "filters": [{"name": "RequestRateLimiter", "args": {
             "redis-rate-limiter.replenishRate": "1",
             "redis-rate-limiter.burstCapacity": "2",
             "key-resolver": "#{@remoteAddrKeyResolver}"}}]}]})


def remaining(gw, n):
    out = []
    for _ in range(n):
        st, hd, _ = gw.request("GET", "/l/x")
        out.append((st, hd.get("x-ratelimit-remaining")))
    return out


def enforced(c, procs, gw, rport, auth, what):
    got = remaining(gw, 4)
    c.ok(got[:2] == [(200, "1"), (200, "0")] and
         all(g == (429, "0") for g in got[2:]),
         "%s: the burst of 2 from Redis's bucket, then 429: %r" % (what, got))
    keys = h.redis_cmd(rport, "KEYS", "request_rate_limiter.*", auth=auth)
    c.eq(len(keys), 2, "%s: the bucket's two keys in Redis" % what)
    st = gw.status().get("redis") or {}
    c.eq((st.get("auth"), st.get("auth_error"), st.get("auth_failures"),
          st.get("password")), ("ok", None, 0, True),
         "%s: /status redis auth ok, no error" % what)
    c.eq(gw.metric("gateway_rate_limit_redis_auth_failures_total"), 0.0,
         "%s: no AUTH failure counted" % what)
    h.redis_cmd(rport, "DEL", *keys, auth=auth)


def refused(c, procs, gw, log, reason, hint, secret, what):
    got = remaining(gw, 5)
    c.ok(got == [(200, "-1")] * 5,
         "%s: every request allowed, remaining -1 (fail open): %r"
         % (what, got))
    st = {}
    end = time.time() + 3
    while time.time() < end and st.get("auth") != "refused":
        st = gw.status().get("redis") or {}
        time.sleep(0.05)
    c.ok(st.get("auth") == "refused" and
         (st.get("auth_error") or "").startswith(reason) and
         st.get("auth_failures", 0) >= 1,
         "%s: /status redis shows the refusal: %r" % (what, st))
    n = gw.metric("gateway_rate_limit_redis_auth_failures_total")
    c.ok(n is not None and n >= 1, "%s: auth failures counted: %r"
         % (what, n))
    e = gw.metric("gateway_rate_limit_redis_errors_total")
    c.ok(e is not None and e >= 1, "%s: errors counted: %r" % (what, e))
    text = procs.log(log)
    lines = [ln for ln in text.splitlines() if reason in ln]
    c.ok(len(lines) >= 1 and hint in lines[0],
         "%s: logged with the reason and %r: %r" % (what, hint, lines[:2]))
    # once per connection: 5 requests within the second, one connection
    c.ok(len(lines) == 1, "%s: logged once, not per call: %d lines"
         % (what, len(lines)))
    _, _, sbody = gw.admin_call("GET", "/status")
    _, _, mbody = gw.admin_call("GET", "/metrics")
    for name, blob in (("log", text.encode()), ("/status", sbody),
                       ("/metrics", mbody)):
        c.ok(secret.encode() not in blob,
             "%s: the password is not in %s" % (what, name))


def flags(c, procs, rport):
    good = procs.write_file("pw", PASSWORD + "\n")
    empty = procs.write_file("empty", "\nsecond line\n")
    missing = os.path.join(procs.dir, "no-such-file")
    redis = ["--redis", "127.0.0.1:%d" % rport]
    cases = [
        (["--redis-password-file", good], "--redis-password-file"),
        (["--redis-user", USER, "--redis-password-file", good],
         "--redis-user"),
        (redis + ["--redis-user", USER], "--redis-user"),
        (redis + ["--redis-password-file", missing],
         "--redis-password-file"),
        (redis + ["--redis-password-file", empty], "--redis-password-file"),
        (redis + ["--redis-password-file", procs.dir],
         "--redis-password-file"),
    ]
    for args, flag in cases:
        r = subprocess.run([h.binary(), "--listen", "127.0.0.1:0"] + args,
                           capture_output=True, timeout=10)
        err = r.stderr.decode("utf-8", "replace")
        c.ok(r.returncode == 2 and flag in err and PASSWORD not in err,
             "%r: exit 2 naming %s: %s %r" % (args, flag, r.returncode,
                                              err.strip()[-200:]))


def body(procs, c):
    _, bport = procs.backend("b1")
    routes = procs.write_file("routes.json",
                              doc("http://127.0.0.1:%d" % bport))
    pw = procs.write_file("pw", PASSWORD + "\n")
    wrong = procs.write_file("wrong", "not-the-password\n")

    # requirepass: the default user's password
    _, rport = procs.redis(extra=["--requirepass", PASSWORD])
    flags(c, procs, rport)
    addr = "127.0.0.1:%d" % rport
    g = procs.gateway("--routes", routes, "--redis", addr,
                      "--redis-password-file", pw, log="gw-ok.log")
    enforced(c, procs, g, rport, [PASSWORD], "requirepass")
    g.proc.terminate()
    g.proc.wait(10)

    g = procs.gateway("--routes", routes, "--redis", addr,
                      "--redis-password-file", wrong, log="gw-wrong.log")
    refused(c, procs, g, "gw-wrong.log", "WRONGPASS", "AUTH to " + addr,
            "not-the-password", "wrong password")
    # Redis's password is changed to the gateway's: AUTH again, a second
    # later at most, and the limits hold again
    h.redis_cmd(rport, "CONFIG", "SET", "requirepass", "not-the-password",
                auth=[PASSWORD])
    h.wait_for(lambda: g.request("GET", "/l/x")[1].get(
        "x-ratelimit-remaining") not in (None, "-1"),
        "from the bucket once the password matches", 5)
    c.eq(g.status()["redis"]["auth"], "ok", "wrong password fixed: auth ok")
    h.redis_cmd(rport, "CONFIG", "SET", "requirepass", PASSWORD,
                auth=["not-the-password"])
    h.redis_cmd(rport, "FLUSHALL", auth=[PASSWORD])
    g.proc.terminate()
    g.proc.wait(10)

    g = procs.gateway("--routes", routes, "--redis", addr, log="gw-none.log")
    refused(c, procs, g, "gw-none.log", "NOAUTH", "--redis-password-file",
            PASSWORD, "no password")
    g.proc.terminate()
    g.proc.wait(10)

    # an ACL user (Redis 6+): AUTH user password
    _, aport = procs.redis(extra=[
        "--user", USER, "on", ">" + USER_PASSWORD,
        "~request_rate_limiter.*", "+@all"])
    upw = procs.write_file("upw", USER_PASSWORD + "\n")
    aaddr = "127.0.0.1:%d" % aport
    g = procs.gateway("--routes", routes, "--redis", aaddr, "--redis-user",
                      USER, "--redis-password-file", upw, log="gw-acl.log")
    enforced(c, procs, g, aport, [USER, USER_PASSWORD], "ACL user")
    c.eq(g.status()["redis"]["user"], USER, "/status names the ACL user")
    g.proc.terminate()
    g.proc.wait(10)
    g = procs.gateway("--routes", routes, "--redis", aaddr, "--redis-user",
                      USER, "--redis-password-file", pw, log="gw-aclw.log")
    refused(c, procs, g, "gw-aclw.log", "WRONGPASS",
            "AUTH to %s as %s" % (aaddr, USER), PASSWORD,
            "ACL user, wrong password")


if shutil.which("redis-server") is None:
    print("gateway_redis_auth: SKIP: redis-server is not installed "
          "(tests/install-deps.sh)")
    sys.exit(77)  # meson: skipped
h.run("gateway_redis_auth", body)
