#!/usr/bin/env python3
"""End-to-end tests of the library's policies run by the nginx module (TAP
for meson, suite e2e): RequestRateLimiter with its buckets in the zone
(one rate for every worker, 429 and X-RateLimit-* headers), Retry mapped
onto the balancer's tries (its statuses and methods), and CircuitBreaker
(an open breaker forwards to its fallbackUri by an internal redirect, a
status in statusCodes too, the client's method kept; a worker killed amid
traffic and breaker renames gives back its breaker entries). What the module
cannot run (Retry's backoff; timeouts and policies wherever a location
proxies with $switchyard_upstream) is refused, located. Same fixture as
test_nginx_balancer.py (every location through the balancer).
"""
import os
import shutil
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402
import test_nginx_module as base  # noqa: E402
from test_nginx_balancer import (BALANCED, UPSTREAM,  # noqa: E402
                                 BalancerEnv, reload_and_wait,
                                 test_every_response_filter_applied)
from test_nginx_module import check, request  # noqa: E402


def put_route(env, doc):
    r = env.put("routes/live/" + doc["id"], doc)
    check(r.status == 200, "PUT %s: %d %r" % (doc["id"], r.status, r.body))


def limited_route(env, rid, burst):
    """A route /RID/** limited to 1 request/s per client address, with a
    burst of `burst`."""
    put_route(env, {
        "id": rid, "uri": "http://127.0.0.1:%d" % env.pa,
        "predicates": ["Path=/%s/**" % rid],
        "filters": [{"name": "RequestRateLimiter", "args": {
            "redis-rate-limiter.replenishRate": "1",
            "redis-rate-limiter.burstCapacity": str(burst),
            "key-resolver": "#{@remoteAddrKeyResolver}"}}]})


def test_rate_limiter_429_shared_by_workers(env):
    """A burst of 3: of 10 quick requests on fresh connections (spread
    over both workers) 3 pass, the others get 429 with X-RateLimit-*; per
    worker buckets would let up to 6 through."""
    limited_route(env, "limited", 3)
    env.converged()
    answers = [request(env.port, "GET", "/limited/x") for _ in range(10)]
    ok = [r for r in answers if r.status == 200]
    limited = [r for r in answers if r.status == 429]
    check(len(ok) in (3, 4) and len(ok) + len(limited) == 10,
          "statuses %r" % [r.status for r in answers])
    check(limited[0].header("X-RateLimit-Remaining") == "0" and
          limited[0].header("X-RateLimit-Burst-Capacity") == "3",
          "headers %r" % limited[0].headers)
    check(ok[0].header("X-RateLimit-Replenish-Rate") == "1",
          "headers of an allowed answer %r" % ok[0].headers)
    check(env.status()["policy"]["limited"] >= len(limited),
          "status: %r" % env.status().get("policy"))


def retry_service(env, name):
    put_route(env, {"id": name, "uri": "lb://" + name,
                    "predicates": ["Path=/%s/**" % name],
                    "filters": ["Retry=2,SERVICE_UNAVAILABLE,GET"]})
    r = env.put("instances/" + name, [
        {"id": name + "-a", "host": "127.0.0.1", "port": env.pa},
        {"id": name + "-b", "host": "127.0.0.1", "port": env.pb}])
    check(r.status == 200, "PUT instances: %d" % r.status)


def test_retry_statuses_and_methods(env):
    """Retry=2,SERVICE_UNAVAILABLE,GET: a 503 from one instance is retried
    on the other for a GET although the location's proxy_next_upstream
    does not name http_503; a POST is not retried."""
    retry_service(env, "rtg")
    retry_service(env, "rtp")
    env.converged()
    gets = [env.get("/rtg/x?fail=B&failcode=503") for _ in range(8)]
    check([r.status for r in gets] == [200] * 8,
          "GETs: %r" % [r.status for r in gets])
    check(any("," in (r.header("X-Upstream-Addr") or "") for r in gets),
          "no GET was retried: %r" % [r.header("X-Upstream-Addr")
                                      for r in gets])
    posts = [request(env.bport, "POST", "/rtp/x?fail=B&failcode=503",
                     body=b"x").status for _ in range(8)]
    check(503 in posts, "POSTs retried: %r" % posts)


def test_retry_any_status_and_backoff_refused(env):
    """Retry=2,NOT_IMPLEMENTED: a 501 (no proxy_next_upstream condition
    names it) is retried on the other instance. A backoff, which nginx's
    tries cannot wait for, is refused at the admin location and by
    `nginx -t`, located at the arg and naming the host."""
    put_route(env, {"id": "r501", "uri": "lb://r501",
                    "predicates": ["Path=/r501/**"],
                    "filters": ["Retry=2,NOT_IMPLEMENTED,GET"]})
    env.put("instances/r501", [
        {"id": "r501-a", "host": "127.0.0.1", "port": env.pa},
        {"id": "r501-b", "host": "127.0.0.1", "port": env.pb}])
    env.converged()
    got = [env.get("/r501/x?fail=B&failcode=501").status for _ in range(8)]
    check(got == [200] * 8, "501 not retried: %r" % got)
    bo = {"id": "bo", "uri": "http://127.0.0.1:%d" % env.pa,
          "predicates": ["Path=/bo/**"],
          "filters": [{"name": "Retry", "args": {
              "retries": 2, "backoff.firstBackoff": "50ms"}}]}
    r = env.put("routes/live/bo", bo)
    check(r.status == 400 and b"filters[0].args.backoff" in r.body and
          b"nginx" in r.body, "backoff: %d %r" % (r.status, r.body))
    env.write("bo.json", {"routes": [bo]})
    with open(os.path.join(env.dir, "nginx.conf")) as f:
        conf = f.read().replace("live.json;", "live.json; switchyard_routes "
                                + env.dir + "/bo.json;")
    rc, err = env.test_conf(conf)
    check(rc != 0 and "routes[0].filters[0].args.backoff" in err,
          "nginx -t: %d %s" % (rc, err))


def test_breaker_status_code_to_fallback_keeps_method(env):
    """A status in statusCodes answered by the upstream goes to the
    fallbackUri, not to the client; a POST arrives there as a POST with
    its body (SCG's forward keeps the method). The breaker route's
    response filters leave the fallback's proxied answer alone (in SCG
    they run after the fallback route wrote it)."""
    put_route(env, {"id": "fb2", "uri": "http://127.0.0.1:%d" % env.pa,
                    "predicates": ["Path=/fb2/**"]})
    put_route(env, {
        "id": "cbs", "uri": "http://127.0.0.1:%d" % env.pb,
        "predicates": ["Path=/cbs/**"],
        "filters": ["AddResponseHeader=X-Cb,cbs", {
            "name": "CircuitBreaker", "args": {
                "name": "cbs", "fallbackUri": "forward:/fb2/from-cbs",
                "statusCodes": ["500"], "slidingWindowSize": 50,
                "minimumNumberOfCalls": 50}}]})
    env.converged()
    for method, body in (("GET", None), ("POST", b"hello")):
        r = request(env.bport, method, "/cbs/x?fail=B&failcode=500",
                    body=body)
        check(r.status == 200 and r.json()["path"] == "/fb2/from-cbs" and
              r.json()["method"] == method and
              r.json()["body"] == (body or b"").decode() and
              r.header("X-Cb") is None,
              "%s: %d %r %r" % (method, r.status, r.body[:300], r.headers))
    r = request(env.bport, "GET", "/cbs/x?fail=B&failcode=503")
    check(r.status == 503, "a status not listed: %d" % r.status)


def test_breaker_fallback_on_failure_and_when_open(env):
    """Connections refused: each failed call goes to the fallbackUri's
    route (nginx's error_page machinery, an internal redirect); after 4
    the breaker opens and requests go there without a call. The breaker
    route's response filters and SetStatus apply to a no://op fallback's
    answer (the outer SetStatus wins), not to a proxied one."""
    dead = free_port()
    put_route(env, {"id": "fb", "uri": "http://127.0.0.1:%d" % env.pa,
                    "predicates": ["Path=/fallback/**"]})
    put_route(env, {
        "id": "cb", "uri": "http://127.0.0.1:%d" % dead,
        "predicates": ["Path=/cb/**"],
        "filters": ["AddResponseHeader=X-Cb,cb", "SetStatus=203", {
            "name": "CircuitBreaker", "args": {
                "name": "cbt", "fallbackUri": "forward:/fallback/from-cb",
                "slidingWindowSize": 4, "minimumNumberOfCalls": 4,
                "waitDurationInOpenState": "30s"}}]})
    put_route(env, {"id": "fbn", "uri": "no://op",
                    "predicates": ["Path=/fbnoop/**"],
                    "filters": ["SetStatus=418", "SetResponseHeader=X-Fb,in"]})
    put_route(env, {
        "id": "cbn", "uri": "http://127.0.0.1:%d" % dead,
        "predicates": ["Path=/cbn/**"],
        "filters": ["AddResponseHeader=X-Cb,cbn", "SetStatus=203",
                    "SetResponseHeader=X-Fb,out", {
                        "name": "CircuitBreaker", "args": {
                            "name": "cbn", "fallbackUri": "forward:/fbnoop/x",
                            "slidingWindowSize": 4,
                            "minimumNumberOfCalls": 4,
                            "waitDurationInOpenState": "30s"}}]})
    env.converged()
    for i in range(6):  # failed calls, then the open breaker's
        r = env.get("/cb/x")
        check(r.status == 200 and r.json()["path"] == "/fallback/from-cb"
              and r.header("X-Cb") is None,
              "call %d: %d %r %r" % (i, r.status, r.body[:200], r.headers))
        r = env.get("/cbn/x")
        check(r.status == 203 and r.header("X-Cb") == "cbn" and
              [v for k, v in r.headers if k.lower() == "x-fb"] == ["out"]
              and r.body == b"",
              "no://op fallback, call %d: %d %r %r"
              % (i, r.status, r.body[:200], r.headers))
    p = env.status()["policy"]
    check(p["breaker_opened"] >= 2 and p["breaker_rejected"] >= 2,
          "status: %r" % p)


def test_breaker_settings_changed_across_workers(env):
    """A breaker's settings changed by the admin location: the route is
    applied by each worker in turn (each its own router on the zone's
    store), so for a moment the workers give the breaker two settings; the
    change is taken (told in the log, not refused: refusing made it
    impossible, every worker's commit found another's old settings), and
    then both run the new ones: a window of 2 opens on 2 failed calls,
    where the old window of 50 would not."""
    dead = free_port()
    put_route(env, {"id": "fbchg", "uri": "http://127.0.0.1:%d" % env.pa,
                    "predicates": ["Path=/fbchg/**"]})

    def doc(window):
        return {"id": "chg", "uri": "http://127.0.0.1:%d" % dead,
                "predicates": ["Path=/chg/**"],
                "filters": [{"name": "CircuitBreaker", "args": {
                    "name": "chg", "fallbackUri": "forward:/fbchg/x",
                    "slidingWindowSize": window,
                    "minimumNumberOfCalls": window,
                    "waitDurationInOpenState": "30s"}}]}
    put_route(env, doc(50))
    env.converged()
    put_route(env, doc(2))
    env.converged()
    opened = env.status()["policy"]["breaker_opened"]
    for i in range(4):
        r = env.get("/chg/x")
        check(r.status == 200 and r.json()["path"] == "/fbchg/x",
              "call %d: %d %r" % (i, r.status, r.body[:200]))
    p = env.status()["policy"]
    check(p["breaker_opened"] > opened, "status: %r (was %d opened)"
          % (p, opened))


def breaker_route(env, rid, name, port):
    """Route /RID/** to `port` with CircuitBreaker `name` (opens after 2
    failed calls of 2) falling back to /kfb/RID."""
    put_route(env, {
        "id": rid, "uri": "http://127.0.0.1:%d" % port,
        "predicates": ["Path=/%s/**" % rid],
        "filters": [{"name": "CircuitBreaker", "args": {
            "name": name, "fallbackUri": "forward:/kfb/" + rid,
            "slidingWindowSize": 2, "minimumNumberOfCalls": 2,
            "waitDurationInOpenState": "30s"}}]})


def changed(env, what, doc=None):
    """PUT (doc) or DELETE `what`, again while a worker dies under it."""
    deadline = time.time() + 10
    while True:
        try:
            r = (env.put(what, doc) if doc is not None else
                 request(env.port, "DELETE", "/switchyard/" + what))
            if r.status in (200, 204):
                return
        except OSError:
            r = None
        check(time.time() < deadline, "%s: %r" % (what, r and r.body))
        time.sleep(0.05)


def test_worker_killed_amid_traffic_and_changes(env):
    """kill -9 of a worker while requests and route changes that claim
    and free breaker entries run: the other worker keeps answering and
    taking changes, the master's new worker loads the routes, the
    breakers open on both workers and a removed breaker's entry is freed
    (in the zone's store, shared by every worker)."""
    dead = free_port()
    put_route(env, {"id": "kfb", "uri": "http://127.0.0.1:%d" % env.pa,
                    "predicates": ["Path=/kfb/**"]})
    put_route(env, {"id": "kok", "uri": "http://127.0.0.1:%d" % env.pa,
                    "predicates": ["Path=/kok/**"]})
    env.converged()
    used0 = env.status()["policy"]["breakers_used"]
    stop = threading.Event()
    answered = []

    def traffic():
        while not stop.is_set():
            try:
                answered.append(request(env.port, "GET", "/kok/x").status)
            except OSError:
                answered.append(0)  # the killed worker's connection

    t = threading.Thread(target=traffic)
    t.start()
    try:
        victim = env.converged()["workers"][0]["pid"]
        for i in range(12):
            breaker_route(env, "kc", "kill-%d" % i, dead)
            if i == 5:
                os.kill(victim, signal.SIGKILL)
        base.wait_respawned(env, victim)
        env.converged()
        n = len(answered)
        deadline = time.time() + 10
        while len(answered) < n + 5 and time.time() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        t.join()
    check(answered[n:].count(200) == len(answered[n:]) > 0,
          "answers after the respawn: %r" % answered[n:])
    # the breaker opens, whichever worker answers (fresh connections)
    for i in range(6):
        r = request(env.port, "GET", "/kc/x")
        check(r.status == 200 and r.json()["path"] == "/kfb/kc",
              "call %d: %d %r" % (i, r.status, r.body[:200]))
    info = env.status()["policy"]
    check(info["breaker_rejected"] >= 1, "never open: %r" % info)
    # the renamed breakers' entries were given back: one left, then none
    check(info["breakers_used"] == used0 + 1, "entries: %r" % info)
    changed(env, "routes/live/kc")
    env.converged()
    deadline = time.time() + 5
    while env.status()["policy"]["breakers_used"] != used0:
        check(time.time() < deadline,
              "kc's entry not freed: %r" % env.status()["policy"])
        changed(env, "routes/live/kok", {
            "id": "kok", "uri": "http://127.0.0.1:%d" % env.pa,
            "predicates": ["Path=/kok/**"],
            "filters": ["AddResponseHeader=X-N,%f" % time.time()]})
        time.sleep(0.1)


def zone_store_header(pid, size):
    """The address of the policy store's header in nginx's zone (the
    shared mapping of `size` bytes in the master), found by its magic."""
    magic = (0x3152545359505953).to_bytes(8, "little")  # SY_STORE_MAGIC
    found = []
    with open("/proc/%d/maps" % pid) as maps, \
            open("/proc/%d/mem" % pid, "rb") as mem:
        for line in maps:
            f = line.split()
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            if hi - lo != size or "s" not in f[1]:
                continue
            mem.seek(lo)
            data = mem.read(hi - lo)
            at = data.find(magic)
            while at >= 0:
                if at % 8 == 0:
                    found.append(lo + at)
                at = data.find(magic, at + 1)
    return found


def test_zone_store_of_another_format_replaced_on_reload(env):
    """A reload keeps the zone; if the policy store it holds is not this
    module's format (an older store version, as after a module upgrade),
    a new store is made beside it, logged at notice, and the limiters run
    on it, fresh. Provoked by writing an older version number into the
    store's header in the master's mapping of the zone."""
    size = 8 * 1024 * 1024  # switchyard_zone 8m (the fixture)
    reload_and_wait(env)
    check("not this module's format" not in env.error_log(),
          "a reload of the same module replaced the store")
    heads = zone_store_header(env.nginx.pid, size)
    check(len(heads) == 1, "store headers found: %r" % heads)
    with open("/proc/%d/mem" % env.nginx.pid, "r+b") as mem:
        mem.seek(heads[0] + 8)  # uint32 version after the magic
        mem.write((1).to_bytes(4, "little"))
    reload_and_wait(env)
    check("not this module's format" in env.error_log(),
          "no notice: %s" % env.error_log()[-800:])
    check(len(zone_store_header(env.nginx.pid, size)) == 2,
          "no new store beside the old one")
    limited_route(env, "fresh", 2)
    env.converged()
    got = [request(env.port, "GET", "/fresh/x").status for _ in range(6)]
    check(got.count(200) in (2, 3) and got.count(429) == 6 - got.count(200),
          "limiter on the new store: %r" % got)
    limited = env.status()["policy"]["limited"]
    check(limited == got.count(429),
          "the new store counts only its own: %d limited" % limited)


def test_variable_form_anywhere_refuses_policies(env):
    """A route with a CircuitBreaker (its time limit), Retry or a timeout
    runs only through switchyard_balancer, and which location serves a
    route is not known at load: `nginx -t` passes it when no proxy_pass
    uses $switchyard_upstream (the fixture's access log reads it: that is
    not the variable form), and refuses it, located in its file and
    naming why, as soon as one does (both forms), as without any
    balancer."""
    env.write("cbv.json", {"routes": [{
        "id": "cbv", "uri": "http://127.0.0.1:%d" % env.pa,
        "filters": [{"name": "CircuitBreaker", "args": {"name": "v"}}]}]})
    with open(os.path.join(env.dir, "nginx.conf")) as f:
        balanced = f.read().replace("live.json;", "live.json; "
                                    "switchyard_routes %s/cbv.json;" % env.dir)
    check(BALANCED in balanced, "the fixture's location is not balanced")
    check("$switchyard_upstream" in balanced, "the log reads no variable")
    rc, err = env.test_conf(balanced)
    check(rc == 0 and "cbv" not in err, "balancer only: %d %s" % (rc, err))
    both = balanced.replace(
        BALANCED, "proxy_pass $switchyard_upstream$switchyard_uri;")
    rc, err = env.test_conf(both)
    check(rc != 0 and "cbv.json" in err and "routes[0].filters[0]" in err
          and "CircuitBreaker" in err and
          "with a $switchyard_upstream location" in err,
          "both forms: %d %s" % (rc, err))
    conf = both.replace(UPSTREAM.format(bport=env.bport,
                                        cport=env.cport), "")
    check("switchyard_balancer" not in conf, "balancer left in the conf")
    rc, err = env.test_conf(conf)
    check(rc != 0 and "routes[0].filters[0]" in err and
          "without switchyard_balancer" in err, "nginx -t: %d %s" % (rc, err))


def test_variable_form_without_the_uri_is_refused(env):
    """proxy_pass $switchyard_upstream without $switchyard_uri would send
    the client's path, so a route's StripPrefix, RewritePath or SetPath
    would be accepted and ignored: `nginx -t` refuses that proxy_pass,
    naming it and the fix; with $switchyard_uri the directive passes."""
    with open(os.path.join(env.dir, "nginx.conf")) as f:
        balanced = f.read()
    check(BALANCED in balanced, "the fixture's location is not balanced")
    check("$switchyard_upstream" in balanced, "the log reads no variable")
    for bare in ("proxy_pass $switchyard_upstream;",
                 "proxy_pass ${switchyard_upstream}/v1;"):
        rc, err = env.test_conf(balanced.replace(BALANCED, bare))
        check(rc != 0 and '"proxy_pass" directive' in err and
              "without $switchyard_uri" in err and "test.conf:" in err,
              "%s: %d %s" % (bare, rc, err))
    rc, err = env.test_conf(balanced.replace(
        BALANCED, "proxy_pass $switchyard_upstream$switchyard_uri;"))
    check("without $switchyard_uri" not in err, "with the uri: %s" % err)
    # the wrap is the module's alone: plain proxy_pass elsewhere unchanged
    rc, err = env.test_conf(balanced)
    check(rc == 0, "the fixture itself: %d %s" % (rc, err))


def test_reload_to_both_forms_refuses_stored_policies(env):
    """Routes with Retry PUT while every location used the balancer, then
    a reload that adds the variable form: the workers start, each refuses
    the stored route with its located error (logged, and in /status), the
    route is not served (404) rather than served without its Retry; a
    reload back to the balancer applies it again."""
    retry_service(env, "rback")
    env.converged()
    check(env.get("/rback/x").status == 200, "not served before")
    with open(os.path.join(env.dir, "nginx.conf")) as f:
        balanced = f.read()
    both = balanced.replace(
        BALANCED, "proxy_pass $switchyard_upstream$switchyard_uri;")
    try:
        with open(os.path.join(env.dir, "nginx.conf"), "w") as f:
            f.write(both)
        reload_and_wait(env)
        log = env.error_log()
        check('stored route "rback"' in log and "not applied" in log and
              "filters[0]" in log and "$switchyard_upstream" in log,
              "refusal not logged: %s" % log[-800:])
        s = env.status()
        check(all(w["error"] and "$switchyard_upstream" in w["error"]
                  for w in s["workers"]), "status: %r" % s["workers"])
        for port in (env.bport, env.port):
            r = request(port, "GET", "/rback/x")
            check(r.status == 404, "served without its Retry: %d" % r.status)
    finally:
        with open(os.path.join(env.dir, "nginx.conf"), "w") as f:
            f.write(balanced)
        reload_and_wait(env)
    check(env.get("/rback/x").status == 200, "not served again")


def test_both_forms_refuse_policies_at_the_admin_location(env):
    """A running nginx with both forms (its own, started here): a route
    PUT with Retry, a CircuitBreaker or a timeout is answered 400 with the
    located error and logged, never accepted to fail later; routes
    without them are served by both locations (response filters and
    forward: in the variable form too)."""
    m = BalancerEnv(mixed=True)
    try:
        m.start()
        base_route = {"uri": "http://127.0.0.1:%d" % m.pa,
                      "predicates": ["Path=/p/**"]}
        for rid, extra, where in (
                ("rt", {"filters": ["Retry=2,BAD_GATEWAY,GET"]},
                 "filters[0]"),
                ("cbm", {"filters": ["AddRequestHeader=X-A,1", {
                    "name": "CircuitBreaker", "args": {"name": "m"}}]},
                 "filters[1]"),
                ("tmo", {"metadata": {"response-timeout": 300}},
                 "metadata.response-timeout")):
            r = m.put("routes/live/" + rid, dict(base_route, id=rid, **extra))
            check(r.status == 400, "%s: %d %r" % (rid, r.status, r.body))
            e = r.json()["error"]
            check(e["path"].endswith(where) and
                  "$switchyard_upstream" in e["message"],
                  "%s not located: %r" % (rid, e))
        check('route "tmo" (source "live") rejected' in m.error_log(),
              "rejection not logged: %s" % m.error_log()[-500:])
        test_every_response_filter_applied(m)
        test_forward_route_dispatched_again(m)
    finally:
        m.stop()
        shutil.rmtree(m.dir, ignore_errors=True)


def test_forward_route_dispatched_again(env):
    """forward:/b/fw is matched again by the routes (route "b" sets the
    path and adds X-Resp: on) with the forwarding route's request
    headers. Its proxied answer gets route b's response filters only: in
    SCG the forwarding route's (AddResponseHeader, SetStatus) run after
    route b wrote the answer and find it committed. A no://op answer
    gets them after its own, the forwarding route's SetStatus winning; a
    RequestSize 413 too (with the library's errorMessage header and the
    route's own edits), its status kept, as in the mini-gateway.
    Through both servers (the balancer and, in the mixed env of
    test_both_forms_refuse_policies_at_the_admin_location, the variable
    form)."""
    outer = ["AddRequestHeader=X-Forwarded-By,fw", "AddResponseHeader=X-Fw,yes",
             "SetResponseHeader=X-Resp,outer", "SetStatus=203"]
    put_route(env, {"id": "fw", "uri": "forward:/b/fw",
                    "predicates": ["Path=/fw/**"], "filters": outer})
    put_route(env, {"id": "fwnoop", "uri": "no://op",
                    "predicates": ["Path=/fwnoop"],
                    "filters": ["SetStatus=418",
                                "SetResponseHeader=X-Resp,inner"]})
    put_route(env, {"id": "fwn", "uri": "forward:/fwnoop",
                    "predicates": ["Path=/fwn/**"], "filters": outer})
    put_route(env, {"id": "fwbig", "uri": "http://127.0.0.1:%d" % env.pa,
                    "predicates": ["Path=/fwbig"],
                    "filters": [{"name": "RequestSize",
                                 "args": {"maxSize": "5B"}},
                                "AddResponseHeader=X-Resp,big"]})
    put_route(env, {"id": "fwb", "uri": "forward:/fwbig",
                    "predicates": ["Path=/fwb/**"], "filters": outer})
    env.converged()
    for port in (env.bport, env.port):
        r = request(port, "GET", "/fw/x")
        check(r.status == 200 and r.json()["path"] == "/set/fw" and
              r.echo_header("X-Forwarded-By") == "fw",
              "forward: %d %r" % (r.status, r.body[:300]))
        # route b's response filters only
        check(r.header("X-Fw") is None and
              [v for k, v in r.headers if k.lower() == "x-resp"] ==
              ["on"], "response filters: %r" % r.headers)
        r = request(port, "GET", "/fwn/x")
        check(r.status == 203 and r.body == b"" and
              r.header("X-Fw") == "yes" and
              [v for k, v in r.headers if k.lower() == "x-resp"] ==
              ["outer"], "forward to no://op: %d %r" % (r.status, r.headers))
        for path, fw, resp in (("/fwbig", None, "big"),
                               ("/fwb/x", "yes", "outer")):
            r = request(port, "POST", path, body=b"0123456789")
            check(r.status == 413 and
                  (r.header("errorMessage") or "").startswith(
                      "Request size is larger than permissible limit") and
                  r.header("X-Fw") == fw and
                  [v for k, v in r.headers if k.lower() == "x-resp"] ==
                  [resp], "%s: %d %r" % (path, r.status, r.headers))


def test_retry_makes_every_retry_asked_of_a_url(env):
    """Retry's retries on a URL route (one address, tried again) are made
    in full: retries=10 makes 11 attempts (the balancer stopped at 8,
    silently, whatever the route asked), each in $upstream_addr."""
    for n in (3, 10, 20):
        put_route(env, {"id": "rtn", "uri": "http://127.0.0.1:%d" % env.pa,
                        "predicates": ["Path=/rtn/**"],
                        "filters": [{"name": "Retry", "args": {
                            "retries": str(n), "statuses": "BAD_GATEWAY"}}]})
        env.converged()
        r = env.get("/rtn/x?fail=A")
        tries = (r.header("X-Upstream-Addr") or "").split(", ")
        check(r.status == 502 and len(tries) == n + 1,
              "retries=%d: %d, %d attempts %r" % (n, r.status, len(tries),
                                                  tries))
    request(env.port, "DELETE", "/switchyard/routes/live/rtn")


TESTS = [
    test_rate_limiter_429_shared_by_workers,
    test_retry_statuses_and_methods,
    test_retry_any_status_and_backoff_refused,
    test_retry_makes_every_retry_asked_of_a_url,
    test_breaker_status_code_to_fallback_keeps_method,
    test_breaker_fallback_on_failure_and_when_open,
    test_breaker_settings_changed_across_workers,
    test_worker_killed_amid_traffic_and_changes,
    test_forward_route_dispatched_again,
    test_zone_store_of_another_format_replaced_on_reload,
    test_variable_form_anywhere_refuses_policies,
    test_variable_form_without_the_uri_is_refused,
    test_reload_to_both_forms_refuses_stored_policies,
    test_both_forms_refuse_policies_at_the_admin_location,
]

if __name__ == "__main__":
    sys.exit(base.run(TESTS, BalancerEnv))
