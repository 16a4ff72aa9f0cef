#!/usr/bin/env python3
"""End-to-end tests of `switchyard_balancer` (TAP for meson, suite e2e):
an upstream block whose peer is the matched route's target, so nginx's
keepalive pool, proxy_next_upstream and tries work; retries go to another
instance; passive health is shared by the workers through the zone (one
ejection, named with `eject` in /status); route timeouts apply. Same
fixture as test_nginx_module.py, with every location proxying through the
balancer (a second server on bport besides the admin's): no location uses
$switchyard_upstream, so routes with timeouts and policies are run.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402
import test_nginx_module as base  # noqa: E402
from test_nginx_module import check, request  # noqa: E402

# the location on cport: proxy_pass without variables (no SSL context)
PLAIN_SERVER = """
    server {{
        listen 127.0.0.1:{cport};
        location / {{
            switchyard on;
            proxy_pass http://sy_pool;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $switchyard_host;
            proxy_next_upstream error timeout http_502;
            proxy_connect_timeout 1s;
            add_header X-Upstream-Addr $upstream_addr always;
        }}
    }}"""

UPSTREAM = """
    upstream sy_pool {{
        switchyard_balancer;
        keepalive 8;
    }}
    server {{
        listen 127.0.0.1:{bport};
        location / {{
            switchyard on;
            proxy_pass http://sy_pool$switchyard_uri;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $switchyard_host;
            proxy_next_upstream error timeout http_502;
            proxy_connect_timeout 1s;
            add_header X-Switchyard-Instance $switchyard_instance always;
            add_header X-Upstream-Addr $upstream_addr always;
        }}
    }}""" + PLAIN_SERVER


# the location on env.port in the balancer form too
BALANCED = ('proxy_pass http://sy_pool$switchyard_uri;\n'
            '            proxy_http_version 1.1;\n'
            '            proxy_set_header Connection "";\n'
            '            proxy_next_upstream error timeout http_502;')


class BalancerEnv(base.Env):
    def __init__(self, mixed=False):
        super().__init__()
        self.bport = free_port()
        self.cport = free_port()  # proxy_pass http://sy_pool; (no variable)
        self.http_extra = base.LOG_ALL + UPSTREAM.format(bport=self.bport,
                                                         cport=self.cport)
        if not mixed:  # mixed: env.port keeps the variable form
            self.proxy = BALANCED

    def get(self, path):
        return request(self.bport, "GET", path)


# (the policy tests import it from here)
reload_and_wait = base.reload_and_wait


def test_keepalive_reuses_upstream_connections(env):
    """30 requests through the balancer use a handful of upstream
    connections (nginx's keepalive pool), not one each."""
    peers = set()
    for _ in range(30):
        r = env.get("/a/x")
        check(r.status == 200, "balancer answered %d" % r.status)
        check(r.json()["path"] == "/x", "filters applied: %r" % r.json())
        peers.add(r.json()["peer"])
    check(len(peers) <= 4, "%d upstream connections for 30 requests"
          % len(peers))


def test_retry_on_another_instance_one_ejection(env):
    """An instance nobody listens on: proxy_next_upstream retries on the
    other one (no client error); the zone ejects it once for both workers
    and /status names it with `eject`."""
    dead = free_port()
    r = env.put("instances/flaky", [
        {"id": "live-a", "host": "127.0.0.1", "port": env.pa},
        {"id": "dead-1", "host": "127.0.0.1", "port": dead}])
    check(r.status == 200, "PUT instances: %d" % r.status)
    env.converged()
    statuses = [env.get("/flaky/x").status for _ in range(40)]
    check(statuses == [200] * 40, "client errors: %r" % statuses)
    log = env.error_log()
    n = log.count('instance "dead-1" of service "flaky" ejected')
    check(n == 1, "%d ejections logged (one zone-wide wanted)" % n)
    s = env.status()
    flaky = [x for x in s["services"] if x["name"] == "flaky"]
    check(flaky, "service not in status: %r" % s["services"])
    inst = {i["id"]: i for i in flaky[0]["instances"]}
    check(inst["dead-1"]["ejected"] and "eject" in inst["dead-1"]["health"],
          "dead instance not ejected in status: %r" % inst)
    check(not inst["live-a"]["ejected"], "live instance ejected")


def test_next_upstream_http_502_retries(env):
    """A 502 from one instance: proxy_next_upstream http_502 retries on the
    other, excluding the one tried."""
    r = env.put("routes/live/two", {
        "id": "two", "uri": "lb://two", "predicates": ["Path=/two/**"]})
    check(r.status == 200, "PUT route: %d %r" % (r.status, r.body))
    r = env.put("instances/two", [
        {"id": "ta", "host": "127.0.0.1", "port": env.pa},
        {"id": "tb", "host": "127.0.0.1", "port": env.pb}])
    check(r.status == 200, "PUT instances: %d" % r.status)
    env.converged()
    ids = set()
    for _ in range(12):
        r = env.get("/two/x?fail=B")
        check(r.status == 200, "answered %d" % r.status)
        ids.add(r.json()["id"])
    check(ids == {"A"}, "answers from %r" % ids)


def test_unresolvable_instance_skipped(env):
    """An instance whose host name does not resolve fails as a refused
    connection: another instance answers (no client error; it was a 500
    every time it was chosen), its failures eject it, the failed lookup is
    not made again per request (each blocks the worker), and a service
    with no instance that resolves answers 502 (no live upstreams)."""
    r = env.put("routes/live/unres", {
        "id": "unres", "uri": "lb://unres", "predicates": ["Path=/unres/**"]})
    check(r.status == 200, "PUT route: %d %r" % (r.status, r.body))
    r = env.put("instances/unres", [
        {"id": "nowhere", "host": "nowhere.invalid", "port": 80},
        {"id": "here", "host": "127.0.0.1", "port": env.pa}])
    check(r.status == 200, "PUT instances: %d" % r.status)
    env.converged()
    statuses = [env.get("/unres/x").status for _ in range(20)]
    check(statuses == [200] * 20, "client errors: %r" % statuses)
    check('cannot resolve "nowhere.invalid:80"' in env.error_log(),
          "the lookup failure not logged")
    # a failed lookup is remembered (10 s): one blocking lookup per
    # worker, not one per choice of the instance
    looked = env.error_log().count(
        'cannot resolve "nowhere.invalid:80": host not found')
    check(1 <= looked <= 2, "%d lookups of the name for 20 requests" % looked)
    inst = {i["id"]: i for x in env.status()["services"]
            if x["name"] == "unres" for i in x["instances"]}
    check(inst["nowhere"]["ejected"], "not ejected: %r" % inst)
    r = env.put("instances/unres", [
        {"id": "nowhere", "host": "nowhere.invalid", "port": 80}])
    check(r.status == 200, "PUT instances: %d" % r.status)
    env.converged()
    check(env.get("/unres/x").status == 502, "no instance resolves")


def test_route_response_timeout_applied(env):
    """response-timeout metadata: a slow answer is cut at the route's
    timeout (504), not nginx's 60 s."""
    r = env.put("routes/live/slow", {
        "id": "slow", "uri": "http://127.0.0.1:%d" % env.pb,
        "predicates": ["Path=/slow/**"],
        "metadata": {"response-timeout": 300}})
    check(r.status == 200, "PUT route: %d %r" % (r.status, r.body))
    env.converged()
    t0 = time.time()
    r = env.get("/slow/x?sleep=1.5")
    took = time.time() - t0
    check(r.status == 504 and took < 1.2, "answered %d after %.2f s"
          % (r.status, took))
    r = env.get("/slow/x?sleep=0.05")
    check(r.status == 200, "a fast answer: %d" % r.status)


def stalled_listener():
    """A port whose SYNs go unanswered: a listener with backlog 0 that
    never accepts, its queue filled by connections of ours (Linux drops
    a SYN while the accept queue is full). (listener, fillers)."""
    import socket
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(0)
    fillers = []
    for _ in range(4):
        c = socket.socket()
        c.setblocking(False)
        c.connect_ex(lst.getsockname())
        fillers.append(c)
    time.sleep(0.2)
    return lst, fillers


def test_route_connect_timeout_applied(env):
    """connect-timeout metadata: a connection that is never accepted is
    given up at the route's timeout (504 after ~0.3 s), not at the
    location's proxy_connect_timeout (60 s on env.port); the accepted
    change is logged at notice."""
    lst, fillers = stalled_listener()
    try:
        r = env.put("routes/live/stall", {
            "id": "stall", "uri": "http://127.0.0.1:%d" % lst.getsockname()[1],
            "predicates": ["Path=/stall/**"],
            "metadata": {"connect-timeout": 300}})
        check(r.status == 200, "PUT route: %d %r" % (r.status, r.body))
        check('route "stall" (source "live") accepted' in env.error_log(),
              "accepted change not logged")
        env.converged()
        t0 = time.time()
        r = request(env.port, "GET", "/stall/x")
        took = time.time() - t0
        check(r.status == 504 and 0.25 < took < 2.0,
              "answered %d after %.2f s" % (r.status, took))
    finally:
        for c in fillers:
            c.close()
        lst.close()


def tls_backend(env):
    """An HTTPS backend in this process (a throwaway self-signed
    certificate; nginx does not verify upstream certificates unless
    told): answers {"tls": true, "path": ...}. (server, port)."""
    import json
    import ssl
    import subprocess
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    key, crt = (os.path.join(env.dir, n) for n in ("tls.key", "tls.crt"))
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
                    "-out", crt, "-days", "1", "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True, timeout=20)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            body = json.dumps({"tls": True, "path": self.path}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, srv.server_address[1]


def test_location_not_sending_the_filters_refused(env):
    """A balancer location whose proxy_pass lacks $switchyard_uri (the
    client's path would go upstream, StripPrefix ignored), which does not
    send Host $switchyard_host, or which proxies to an upstream without
    switchyard_balancer (the route's target ignored) fails nginx -t,
    naming the proxy_pass, what would be lost and its file:line; so does a
    location without `switchyard on` proxying to the balancer (its
    requests have no route: each was answered 500); the fixture's wired
    location passes."""
    with open(os.path.join(env.dir, "nginx.conf")) as f:
        conf = f.read()
    rc, err = env.test_conf(conf)
    check(rc == 0, "the fixture fails nginx -t: %s" % err[-400:])
    wired = "proxy_pass http://sy_pool$switchyard_uri;"
    at = conf.index(wired)
    line = conf[:at].count("\n") + 1
    block = conf[at:conf.index("}", at)]
    on = conf.rindex("switchyard on;", 0, at)
    for bad, want in (
            (conf[:on] + "switchyard off;" + conf[on + len("switchyard on;"):],
             'sends to an upstream with switchyard_balancer from a location '
             'without "switchyard on"'),
            (conf[:at] + "proxy_pass http://sy_pool/;" +
             conf[at + len(wired):], "does not send $switchyard_uri"),
            (conf[:at] + "proxy_pass http://sy_pool/v2$switchyard_uri;" +
             conf[at + len(wired):], "sends more than $switchyard_uri"),
            (conf[:at] + block.replace(
                "proxy_set_header Host $switchyard_host;", "") +
             conf[at + len(block):], "sends Host $proxy_host"),
            (conf[:at] + "proxy_pass http://127.0.0.1:%d$switchyard_uri;"
             % env.pa + conf[at + len(wired):],
             "sends to neither $switchyard_upstream nor an upstream with "
             "switchyard_balancer")):
        rc, err = env.test_conf(bad)
        check(rc != 0 and want in err and "test.conf:%d" % line in err,
              "%r: %d %s" % (want, rc, err[-400:]))


def without_plain_server(env, drop):
    """The fixture's nginx.conf with (drop False) or without (drop True)
    the cport server (proxy_pass without variables), reloaded."""
    path = os.path.join(env.dir, "nginx.conf")
    plain = PLAIN_SERVER.format(cport=env.cport)
    with open(path) as f:
        conf = f.read()
    if drop:
        check(plain in conf, "the fixture has no plain server")
        conf = conf.replace(plain, "")
    else:
        at = conf.index(UPSTREAM.format(bport=env.bport, cport=env.cport)
                        .replace(plain, ""))
        conf = conf.replace(conf[at:], conf[at:].replace(
            UPSTREAM.format(bport=env.bport, cport=env.cport)
            .replace(plain, ""),
            UPSTREAM.format(bport=env.bport, cport=env.cport), 1), 1)
    with open(path, "w") as f:
        f.write(conf)
    reload_and_wait(env)


def test_https_targets_through_an_http_proxy_pass(env):
    """proxy_pass http://UPSTREAM$switchyard_uri has variables, so nginx
    gives it an SSL context: an https route is proxied over TLS, and an
    lb:// service mixing a secure instance with a plain one that refuses
    connections retries across the schemes (no client error). Run
    without the fixture's location whose proxy_pass has no variables,
    where both are refused (test_proxy_pass_without_variables); a reload
    that brings it back leaves the stored https route not applied,
    logged (404, not 500 at every request)."""
    srv, tport = tls_backend(env)
    without_plain_server(env, True)
    plain = False
    try:
        r = env.put("routes/live/tls", {
            "id": "tls", "uri": "https://127.0.0.1:%d" % tport,
            "predicates": ["Path=/tls/**"]})
        check(r.status == 200, "PUT route: %d %r" % (r.status, r.body))
        r = env.put("routes/live/mixs", {
            "id": "mixs", "uri": "lb://mixs",
            "predicates": ["Path=/mixs/**"]})
        check(r.status == 200, "PUT route: %d %r" % (r.status, r.body))
        r = env.put("instances/mixs", [
            {"id": "mixs-tls", "host": "127.0.0.1", "port": tport,
             "secure": True},
            {"id": "mixs-dead", "host": "127.0.0.1", "port": free_port()}])
        check(r.status == 200, "PUT instances: %d" % r.status)
        env.converged()
        for port in (env.bport, env.port):
            r = request(port, "GET", "/tls/x")
            check(r.status == 200 and r.json() == {"tls": True,
                                                   "path": "/tls/x"},
                  "https route: %d %r" % (r.status, r.body[:200]))
        got = [env.get("/mixs/y") for _ in range(12)]
        check(all(r.status == 200 and r.json()["tls"] for r in got),
              "mixed schemes: %r" % [(r.status, r.body[:80]) for r in got])
        check(any("," in (r.header("X-Upstream-Addr") or "") for r in got),
              "no retry from the plain instance to the secure one: %r"
              % [r.header("X-Upstream-Addr") for r in got])
        check("exited on signal" not in env.error_log(),
              "a worker crashed: %s" % env.error_log()[-1500:])
        # a reload that adds the location without variables: the stored
        # https route is not applied (logged, 404), not answered 500
        without_plain_server(env, False)
        plain = True
        log = env.error_log()
        check('stored route "tls"' in log and "not applied" in log and
              "a proxy_pass without variables" in log,
              "refusal not logged: %s" % log[-1200:])
        check("instance 'mixs-tls' of service 'mixs' is secure" in log,
              "stored secure instance not refused: %s" % log[-1200:])
        r = request(env.bport, "GET", "/tls/x")
        check(r.status == 404, "https route after the reload: %d" % r.status)
    finally:
        srv.shutdown()
        srv.server_close()
        for rid in ("tls", "mixs"):
            request(env.port, "DELETE", "/switchyard/routes/live/" + rid)
        env.put("instances/mixs", [])
        if not plain:
            without_plain_server(env, False)


def test_every_response_filter_applied(env):
    """Response filters on headers nginx keeps in its list and on those it
    keeps outside (Content-Type, Server, Location)."""
    r = env.put("routes/live/resp", {
        "id": "resp", "uri": "http://127.0.0.1:%d" % env.pa,
        "predicates": ["Path=/resp/**"],
        "filters": [
            "SetResponseHeader=Content-Type,text/plain",
            "RemoveResponseHeader=Server",
            "RewriteResponseHeader=X-Secret,token=[^&]+,token=***",
            "DedupeResponseHeader=X-Dup,RETAIN_FIRST",
            "SetResponseHeader=Location,http://example.com/moved"]})
    check(r.status == 200, "PUT route: %d %r" % (r.status, r.body))
    env.converged()
    for port in (env.bport, env.port):  # both forms in a mixed env
        r = request(port, "GET", "/resp/x?rh=X-Secret:a%3D1%26token%3Ds3cr3t"
                    "&rh=X-Dup:one&rh=X-Dup:two&rh=Location:/old")
        check(r.status == 200, "answered %d" % r.status)
        names = [k.lower() for k, _ in r.headers]
        check(names.count("content-type") == 1 and
              r.header("Content-Type") == "text/plain",
              "Content-Type: %r" % r.headers)
        check("server" not in names, "Server kept: %r" % r.headers)
        check(r.header("X-Secret") == "a=1&token=***",
              "secret not masked: %r" % r.header("X-Secret"))
        check([v for k, v in r.headers if k.lower() == "x-dup"] == ["one"],
              "X-Dup: %r" % r.headers)
        check([v for k, v in r.headers if k.lower() == "location"] ==
              ["http://example.com/moved"], "Location: %r" % r.headers)


def test_ejection_ends_and_recovery_logged(env):
    """switchyard_eject_time 1s (a reload): an instance that refuses
    connections is ejected for 1 s, logged; once it listens and its
    ejection ran out it is tried again, answers, and its recovery is
    logged at notice; /status says healthy. The recovery took one off its
    count of ejections: refusing again, it is ejected for 1 s again (the
    first ejection's time), not 2 s."""
    import subprocess
    with open(os.path.join(env.dir, "nginx.conf")) as f:
        conf = f.read()
    check("switchyard_zone 8m;" in conf, "fixture changed")
    with open(os.path.join(env.dir, "nginx.conf"), "w") as f:
        f.write(conf.replace("switchyard_zone 8m;",
                             "switchyard_zone 8m; switchyard_eject_time 1s;"))
    reload_and_wait(env)
    hport = free_port()
    r = env.put("routes/live/heal", {
        "id": "heal", "uri": "lb://heal", "predicates": ["Path=/heal/**"]})
    check(r.status == 200, "PUT route: %d" % r.status)
    r = env.put("instances/heal", [
        {"id": "heal-a", "host": "127.0.0.1", "port": env.pa},
        {"id": "heal-b", "host": "127.0.0.1", "port": hport}])
    check(r.status == 200, "PUT instances: %d" % r.status)
    deadline = time.time() + 10
    while 'instance "heal-b" of service "heal" ejected for 1000 ms' \
            not in env.error_log():
        check(time.time() < deadline, "no ejection: %s"
              % env.error_log()[-800:])
        check(env.get("/heal/x").status == 200, "a client error")
    t_ejected = time.time()
    proc = subprocess.Popen([sys.executable, base.__file__, "--backend", "H",
                             str(hport)], preexec_fn=base.die_with_parent)
    try:
        base.wait_port(hport, time.time() + 10)
        ids = set()
        while 'instance "heal-b" of service "heal" recovered' \
                not in env.error_log():
            check(time.time() < deadline, "no recovery: %s"
                  % env.error_log()[-800:])
            r = env.get("/heal/x")
            check(r.status == 200, "answered %d" % r.status)
            ids.add(r.json()["id"])
            time.sleep(0.02)
        check(time.time() - t_ejected >= 0.9, "tried again within its "
              "ejection")
        heal = [x for x in env.status()["services"] if x["name"] == "heal"]
        inst = {i["id"]: i for i in heal[0]["instances"]}
        check(inst["heal-b"]["health"] == "healthy" and
              not inst["heal-b"]["ejected"], "status: %r" % inst)
    finally:
        proc.kill()
        proc.wait()
    deadline = time.time() + 10
    while env.error_log().count('instance "heal-b" of service "heal" '
                                'ejected for') < 2:
        check(time.time() < deadline, "no second ejection: %s"
              % env.error_log()[-800:])
        check(env.get("/heal/x").status == 200, "a client error")
    last = env.error_log().split('instance "heal-b" of service "heal" '
                                 'ejected for')[-1]
    check(last.startswith(" 1000 ms") and "ejection 1)" in last,
          "the ejection after a recovery: %r" % last[:120])


def test_proxy_pass_without_variables(env):
    """proxy_pass http://UPSTREAM; (no $switchyard_uri: nginx evaluates no
    variable for it) sends what the variable form sends: the route's path
    and query in the request line (StripPrefix, SetPath, escapes, an empty
    query, lb:// services), the same headers and body, on a retry too
    (proxy_next_upstream http_502 on another instance), through nginx's
    keepalive pool; nginx gives it no SSL context, so an https or wss
    route and a secure instance are refused, located, by the admin
    location and by nginx -t (not answered 500 at every request)."""
    r = env.put("routes/live/bare2", {
        "id": "bare2", "uri": "lb://bare2", "predicates": ["Path=/bare2/**"],
        "filters": ["StripPrefix=1"]})
    check(r.status == 200, "PUT route: %d %r" % (r.status, r.body))
    r = env.put("instances/bare2", [
        {"id": "ba", "host": "127.0.0.1", "port": env.pa},
        {"id": "bb", "host": "127.0.0.1", "port": env.pb}])
    check(r.status == 200, "PUT instances: %d" % r.status)
    env.converged()
    body = "x" * 3000
    for method, path, data in (
            ("GET", "/a/x/y?q=1&r=2", None),
            ("GET", "/a/x%41y%20z?s=%2F&t", None),
            ("GET", "/a/", None),
            ("GET", "/a/x?", None),
            ("GET", "/b/thing?k=v", None),
            ("GET", "/shop/x/y?z=1", None),
            ("POST", "/post?p=1", body),
            ("PUT", "/a/put/it", body),
            ("GET", "/bare2/r", None)):
        got = []
        for port in (env.bport, env.cport):
            r = request(port, method, path, headers={"X-Secret": "s"},
                        body=data)
            check(r.status == 200, "%s %s on %d: %d %r"
                  % (method, path, port, r.status, r.body[:200]))
            j = r.json()
            got.append((j["method"], j["path"], j["body"], sorted(
                (k.lower(), v) for k, v in j["headers"]
                if k.lower() != "host"), j["id"], r.echo_header("Host")))
        # (an lb:// route's two requests may go to two instances: each
        # sends its instance's Host; retries are checked below)
        check(got[0][:4] == got[1][:4] and
              (got[0][4] != got[1][4] or got[0][5] == got[1][5]),
              "%s %s: the variable form sent %r, the form without "
              "variables %r" % (method, path, got[0], got[1]))
    retried = 0
    for _ in range(8):  # each worker's round robin reaches bb
        r = request(env.cport, "GET", "/bare2/r?fail=B")
        check(r.status == 200 and r.json()["id"] == "A" and
              r.json()["path"] == "/r?fail=B",
              "answered %d %r" % (r.status, r.body[:200]))
        retried += ", " in (r.header("X-Upstream-Addr") or "")
    check(retried, "no request was retried on another instance")
    peers = set()
    for _ in range(30):
        r = request(env.cport, "GET", "/a/x")
        check(r.status == 200 and r.json()["path"] == "/x",
              "answered %d %r" % (r.status, r.body[:200]))
        peers.add(r.json()["peer"])
    check(len(peers) <= 4, "%d upstream connections for 30 requests"
          % len(peers))
    # no SSL context there: what needs TLS is refused, located, and
    # what was live stays
    for scheme in ("https", "wss"):
        r = env.put("routes/live/baretls", {
            "id": "baretls", "uri": "%s://127.0.0.1:%d" % (scheme, env.pa),
            "predicates": ["Path=/baretls/**"]})
        err = r.json().get("error", {}) if r.status == 400 else {}
        check(err.get("path") == "route.uri" and
              "%s: uri: host 'nginx with a proxy_pass without variables"
              % scheme in err.get("message", "") and
              "does not run this scheme" in err.get("message", ""),
              "%s route: %d %r" % (scheme, r.status, r.body))
    r = env.put("instances/bare2", [
        {"id": "ba", "host": "127.0.0.1", "port": env.pa},
        {"id": "bs", "host": "127.0.0.1", "port": env.pb, "secure": True}])
    err = r.json().get("error", {}) if r.status == 400 else {}
    check(err.get("path", "").endswith("instances[1].secure") and
          "instance 'bs' of service 'bare2' is secure" in
          err.get("message", ""),
          "secure instance: %d %r" % (r.status, r.body))
    inst = sorted(i["id"] for x in env.status()["services"]
                  if x["name"] == "bare2" for i in x["instances"])
    check(inst == ["ba", "bb"], "the list before changed: %r" % inst)
    r = request(env.cport, "GET", "/bare2/r")
    check(r.status == 200, "bare2 after the refusals: %d" % r.status)
    # and nginx -t refuses a routes file with an https route, located
    with open(os.path.join(env.dir, "tls.json"), "w") as f:
        json.dump([{"id": "t", "uri": "https://127.0.0.1:%d" % env.pa,
                    "predicates": ["Path=/t/**"]}], f)
    with open(os.path.join(env.dir, "nginx.conf")) as f:
        conf = f.read().replace(
            "live.json;", "live.json; switchyard_routes %s/tls.json;"
            % env.dir)
    rc, err = env.test_conf(conf)
    check(rc != 0 and "tls.json: [0].uri: " in err and
          "a proxy_pass without variables" in err,
          "nginx -t: %d %s" % (rc, err[-600:]))


def test_balancer_configuration_errors(env):
    """switchyard_balancer after keepalive, with a server line, or with a
    zone (before or after it: nginx's upstream zone copies round-robin
    peers the balancer does not have; nginx -t crashed on it), fails
    nginx -t with the upstream named; so does a fastcgi_pass, uwsgi_pass,
    scgi_pass or grpc_pass to it, located."""
    with open(os.path.join(env.dir, "nginx.conf")) as f:
        conf = f.read()
    # an upstream with switchyard_balancer is proxy_pass's: another
    # module's *_pass to it was accepted, then every request answered 500
    # (no route in a location without switchyard on, no proxy_pass in one
    # with it)
    for d in ("fastcgi_pass sy_pool;", "uwsgi_pass sy_pool;",
              "scgi_pass sy_pool;", "grpc_pass grpc://sy_pool;"):
        for on in ("", "switchyard on; "):
            bad = conf.replace(
                "location /switchyard/ {",
                "location /g/ { %s%s }\n        location /switchyard/ {"
                % (on, d), 1)
            rc, err = env.test_conf(bad)
            check(rc != 0 and d.split()[0] in err and "sy_pool" in err and
                  "test.conf:%d" % (bad[:bad.index(d)].count("\n") + 1)
                  in err, "%s%s: %d %s" % (on, d, rc, err[-300:]))
    rc, err = env.test_conf(conf.replace(
        "location /switchyard/ {",
        "location /g/ { fastcgi_pass 127.0.0.1:%d; }\n        "
        "location /switchyard/ {" % env.pa, 1))
    check(rc == 0, "a fastcgi_pass elsewhere refused: %s" % err[-300:])
    for bad, want in (
            (conf.replace("switchyard_balancer;\n        keepalive 8;",
                          "keepalive 8;\n        switchyard_balancer;"),
             "before keepalive"),
            (conf.replace("switchyard_balancer;",
                          "switchyard_balancer;\n        server 127.0.0.1:1;"),
             "takes no server"),
            (conf.replace("switchyard_balancer;",
                          "switchyard_balancer;\n        zone sy_uz 64k;"),
             "takes no zone"),
            (conf.replace("switchyard_balancer;",
                          "zone sy_uz 64k;\n        switchyard_balancer;"),
             "takes no zone")):
        rc, err = env.test_conf(bad)
        check(rc != 0 and want in err and "sy_pool" in err,
              "%r: %r" % (want, err[-300:]))


def ws_backend():
    """A WebSocket backend in this process: a handshake that reached it
    with `Upgrade: websocket` and `Connection: upgrade` is answered 101,
    then what the client sends next is echoed; any other request is
    answered 400 "no upgrade". (socket, port)."""
    import socket
    import threading
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)

    def serve(c):
        with c:
            c.settimeout(5)
            head = b""
            while b"\r\n\r\n" not in head:
                got = c.recv(4096)
                if not got:
                    return
                head += got
            lines = head.decode("latin-1").lower().split("\r\n")
            up = "upgrade: websocket" in lines
            conn = any(ln.startswith("connection:") and "upgrade" in ln
                       for ln in lines)
            if not (up and conn):
                c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: "
                          b"10\r\nConnection: close\r\n\r\nno upgrade")
                return
            c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: "
                      b"websocket\r\nConnection: Upgrade\r\n\r\n")
            data = c.recv(4096)
            if data:
                c.sendall(data)

    def accept():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return srv, srv.getsockname()[1]


def ws_handshake(port, path):
    """A WebSocket handshake through nginx on `port`, then b"ping": (the
    status line, what came back after the answer's head)."""
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(("GET %s HTTP/1.1\r\nHost: ws.example\r\nUpgrade: "
                   "websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: "
                   "dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13"
                   "\r\n\r\n" % path).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            got = s.recv(4096)
            if not got:
                break
            head += got
        status, _, rest = head.partition(b"\r\n")
        rest = rest.partition(b"\r\n\r\n")[2]
        if status.startswith(b"HTTP/1.1 101"):
            s.sendall(b"ping")
            while len(rest) < 4:
                got = s.recv(4096)
                if not got:
                    break
                rest += got
        return status.decode("latin-1"), rest


# every proxying location of the fixture, made to pass WebSocket upgrades
WS_MAP = ("map $http_upgrade $sy_conn_upgrade "
          "{ default upgrade; \"\" \"\"; }\n    ")
WS_LINES = ("proxy_set_header Upgrade $http_upgrade;\n"
            "            proxy_set_header Connection $sy_conn_upgrade;")


def test_websocket_routes_need_upgrading_locations(env):
    """nginx sends no Upgrade header upstream unless the location says so
    (proxy_http_version 1.1, proxy_set_header Upgrade and Connection): in
    the fixture, whose locations keep Connection "" for keepalive, a ws://
    route is refused, located, by the admin location and by nginx -t (it
    was accepted, and its handshakes went upstream as plain GETs: the
    backend's 400); once every switchyard location passes upgrades, the
    same route is accepted and its handshake answered 101, the frames
    relayed both ways."""
    srv, wport = ws_backend()
    path = os.path.join(env.dir, "nginx.conf")
    with open(path) as f:
        conf = f.read()
    route = {"id": "wsr", "uri": "ws://127.0.0.1:%d" % wport,
             "predicates": ["Path=/wsr/**"]}
    try:
        for uri in ("ws://127.0.0.1:%d" % wport, "lb:ws://wsr"):
            r = env.put("routes/live/wsr", dict(route, uri=uri))
            err = r.json().get("error", {}) if r.status == 400 else {}
            shake = ws_handshake(env.bport, "/wsr/x") if r.status == 200 \
                else None
            check(err.get("path") == "route.uri" and
                  "ws: uri: host 'nginx" in err.get("message", "") and
                  "without WebSocket upgrades" in err.get("message", ""),
                  "%s route: %d %r (a handshake: %r)"
                  % (uri, r.status, r.body, shake))
        with open(os.path.join(env.dir, "ws.json"), "w") as f:
            json.dump([route], f)
        rc, err = env.test_conf(conf.replace(
            "live.json;", "live.json; switchyard_routes %s/ws.json;"
            % env.dir))
        check(rc != 0 and "ws.json: [0].uri: " in err and
              "without WebSocket upgrades" in err,
              "nginx -t: %d %s" % (rc, err[-600:]))
        # every switchyard location passes upgrades: run
        with open(path, "w") as f:
            f.write(conf.replace("switchyard_routes", WS_MAP +
                                 "switchyard_routes", 1)
                    .replace('proxy_set_header Connection "";', WS_LINES))
        reload_and_wait(env)
        r = env.put("routes/live/wsr", route)
        check(r.status == 200, "PUT ws route: %d %r" % (r.status, r.body))
        env.converged()
        for port in (env.bport, env.cport):
            status, echoed = ws_handshake(port, "/wsr/x")
            check(status.startswith("HTTP/1.1 101") and echoed == b"ping",
                  "handshake on %d: %r %r" % (port, status, echoed))
        r = env.get("/a/x")
        check(r.status == 200, "a plain route: %d" % r.status)
    finally:
        srv.close()
        request(env.port, "DELETE", "/switchyard/routes/live/wsr")
        with open(path, "w") as f:
            f.write(conf)
        reload_and_wait(env)


TESTS = [
    test_keepalive_reuses_upstream_connections,
    test_retry_on_another_instance_one_ejection,
    test_next_upstream_http_502_retries,
    test_unresolvable_instance_skipped,
    test_route_response_timeout_applied,
    test_route_connect_timeout_applied,
    test_https_targets_through_an_http_proxy_pass,
    test_location_not_sending_the_filters_refused,
    test_every_response_filter_applied,
    test_balancer_configuration_errors,
    test_proxy_pass_without_variables,
    test_websocket_routes_need_upgrading_locations,
    test_ejection_ends_and_recovery_logged,  # reloads: last
]

if __name__ == "__main__":
    sys.exit(base.run(TESTS, BalancerEnv))
