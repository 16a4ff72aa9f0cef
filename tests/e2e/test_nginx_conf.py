#!/usr/bin/env python3
"""End-to-end tests of what ngx_http_switchyard_module refuses in an nginx
configuration and what a worker does when it cannot load its routes (TAP
for meson, suite e2e). A `switchyard on` location in the variable form
(proxy_pass $switchyard_upstream$switchyard_uri) that would not send the
route's Host ($switchyard_host) or request headers fails `nginx -t` and a
reload (the old workers keep serving); a correct one serves
PreserveHostHeader and SetRequestHostHeader. A worker whose routes cannot
be loaded answers 503 and logs why. Same fixture as test_nginx_module.py
(Debian's nginx, 2 workers, two backends, loopback).
"""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402
import test_nginx_module as base  # noqa: E402
from test_nginx_module import check, request  # noqa: E402
from test_nginx_ops import OpsEnv  # noqa: E402
from test_nginx_policy import zone_store_header  # noqa: E402

HOST = "proxy_set_header Host $switchyard_host;"
PROXY = "proxy_pass $switchyard_upstream$switchyard_uri;"
# a location that sets request headers itself (nginx then passes no
# request header of those names) and adds response headers after the
# route's response filters
HEADERS = """
    server {{
        listen 127.0.0.1:{hport};
        location / {{
            switchyard on;
            proxy_pass $switchyard_upstream$switchyard_uri;
            proxy_set_header Host $switchyard_host;
            proxy_set_header X-Added fixed;
            proxy_set_header X-Secret "";
            proxy_set_header X-Pass $http_x_pass;
            add_header X-Loc loc always;
            expires 1h;
            if ($http_x_if) {{
                add_header X-If yes;
            }}
        }}
        # proxied only from an if
        location /viaif/ {{
            switchyard on;
            proxy_set_header Host $switchyard_host;
            if ($http_x_go) {{
                proxy_pass $switchyard_upstream$switchyard_uri;
            }}
        }}
    }}"""


class ConfEnv(OpsEnv):
    """The ops fixture (conf(), reload_with()) without its access log and
    state file."""

    def __init__(self):
        super().__init__()
        self.hport = free_port()
        self.http_extra = base.LOG_ALL + HEADERS.format(hport=self.hport)
        # which worker answered, also on the module's own 503
        self.location_extra = "add_header X-Pid $pid always;"

    def workers(self):
        """The master's children (the workers) by /proc."""
        path = "/proc/%d/task/%d/children" % (self.nginx.pid, self.nginx.pid)
        with open(path) as f:
            return {int(p) for p in f.read().split()}


def line_of(conf, needle):
    """The line of needle's last occurrence (the main server's location
    comes after HEADERS' server)."""
    return conf[:conf.rindex(needle)].count("\n") + 1


def last(conf, old, new):
    """conf with the last occurrence of old (in the main server's
    location) replaced by new."""
    at = conf.rindex(old)
    return conf[:at] + new + conf[at + len(old):]


def test_location_without_host_refused_by_test(env):
    """A variable-form location whose Host is not $switchyard_host (the
    line missing, another value, or shadowed by the location's own
    proxy_set_header lines, which inherit none from above), or with
    proxy_pass_request_headers off, or proxying somewhere else, fails
    nginx -t naming the proxy_pass, what it sends and its file:line.
    The Host line inherited from the server level passes, and so does a
    location without `switchyard on`."""
    conf = env.conf()
    moved = last(conf, HOST, "").replace(
        "listen 127.0.0.1:%d;" % env.port,
        "listen 127.0.0.1:%d;\n        %s" % (env.port, HOST))
    other = moved.replace(
        "location /switchyard/ {",
        "location /static/ { proxy_pass http://127.0.0.1:%d; }\n"
        "        location /switchyard/ {" % env.pa)
    rc, err = env.test_conf(other)
    check(rc == 0, "Host from the server level refused: %s" % err[-400:])
    braces = last(conf, PROXY,
                  "proxy_pass ${switchyard_upstream}${switchyard_uri};")
    rc, err = env.test_conf(braces)
    check(rc == 0, "${...} refused: %s" % err[-400:])
    for bad, want in (
            (last(conf, HOST, ""), "sends Host $proxy_host"),
            (last(conf, HOST, "proxy_set_header Host $host;"),
             "sends Host $host"),
            (last(conf, HOST, 'proxy_set_header Host "";'),
             'sends Host "" (none)'),
            (last(moved, PROXY, PROXY + " proxy_set_header X-A b;"),
             "sends Host $proxy_host"),
            (last(conf, HOST, HOST + " proxy_pass_request_headers off;"),
             "has proxy_pass_request_headers off"),
            (last(conf, PROXY, "proxy_pass http://127.0.0.1:%d"
                          "$switchyard_uri;" % env.pa),
             "sends to neither $switchyard_upstream"),
            (last(conf, PROXY, PROXY[:-1] + "/v2;"),
             "sends more than $switchyard_uri after the upstream")):
        rc, err = env.test_conf(bad)
        line = line_of(bad, "switchyard on;") + 1  # its proxy_pass
        check(rc != 0 and want in err and "switchyard on" in err and
              "test.conf:%d" % line in err,
              "%r: %d %s" % (want, rc, err[-400:]))
    rc, err = env.test_conf(last(conf, HOST, ""))
    check("PreserveHostHeader" in err and
          "add proxy_set_header Host $switchyard_host" in err,
          "the error does not say what is lost and the fix: %s" % err)


def test_host_filters_served(env):
    """With the Host line, the variable form sends what the route says:
    the client's Host (PreserveHostHeader), the route's
    (SetRequestHostHeader), otherwise the target's host and port."""
    r = request(env.port, "GET", "/keep/1", headers={"Host": "shop.example"})
    check(r.status == 200 and r.echo_header("Host") == "shop.example",
          "PreserveHostHeader: %d %r" % (r.status, r.echo_header("Host")))
    r = env.put("routes/live/sethost", {
        "id": "sethost", "uri": "http://127.0.0.1:%d" % env.pa,
        "predicates": ["Path=/sethost"],
        "filters": ["SetRequestHostHeader=set.example"]})
    check(r.status == 200, "PUT: %d %r" % (r.status, r.body))
    env.converged()
    r = request(env.port, "GET", "/sethost", headers={"Host": "c.example"})
    check(r.status == 200 and r.echo_header("Host") == "set.example",
          "SetRequestHostHeader: %d %r" % (r.status, r.echo_header("Host")))
    r = request(env.port, "GET", "/a/x", headers={"Host": "c.example"})
    check(r.echo_header("Host") == "127.0.0.1:%d" % env.pa,
          "no host filter: %r" % r.echo_header("Host"))


def test_reload_without_host_refused(env):
    """A reload to a configuration whose location lost the Host line is
    refused (logged with the file and line); the old workers keep serving
    PreserveHostHeader and SetRequestHostHeader."""
    pids = env.workers()
    conf = last(env.conf(), HOST, "")
    old = env.reload_with(conf)
    try:
        deadline = time.time() + 5
        while "sends Host $proxy_host" not in env.error_log():
            check(time.time() < deadline, "the reload was not refused: %s"
                  % env.error_log()[-600:])
            time.sleep(0.05)
    finally:
        with open(os.path.join(env.dir, "nginx.conf"), "w") as f:
            f.write(old)
    check("nginx.conf:%d" % line_of(conf, PROXY) in env.error_log(),
          "not located: %s" % env.error_log()[-600:])
    time.sleep(0.3)
    check(env.workers() == pids, "workers changed by a refused reload")
    r = request(env.port, "GET", "/keep/1", headers={"Host": "shop.example"})
    check(r.status == 200 and r.echo_header("Host") == "shop.example",
          "PreserveHostHeader after the refused reload: %d %r"
          % (r.status, r.echo_header("Host")))
    r = request(env.port, "GET", "/sethost")
    check(r.echo_header("Host") == "set.example",
          "SetRequestHostHeader after the refused reload: %r"
          % r.echo_header("Host"))


def test_header_the_location_sets_refused_per_request(env):
    """nginx passes no request header whose name the location sets with
    proxy_set_header: a route whose filters change such a header is
    refused per request (500, logged with the route and the header), not
    proxied with its filter ignored. A line that sends what the route
    asks ("" for a header the route removes, $http_NAME) and a route that
    does not touch the header pass. A forward: route's change is checked
    in the location that proxies the forwarded request."""
    r = request(env.port, "GET", "/a/x")
    check(r.status == 200 and r.echo_header("X-Added") == "yes",
          "without the lines: %d %r" % (r.status, r.body[:200]))
    r = request(env.hport, "GET", "/a/x")
    check(r.status == 500, "AddRequestHeader=X-Added under proxy_set_header "
          "X-Added answered %d %r" % (r.status, r.body[:200]))
    check('route "a" refused: its filters change the request header '
          '"X-Added", which the location sets with proxy_set_header'
          in env.error_log(), "not logged: %s" % env.error_log()[-600:])
    for ident, path, filt in (("rm", "/rm", "RemoveRequestHeader=X-Secret"),
                              ("pass", "/pass", "SetRequestHeader=X-Pass,v")):
        r = env.put("routes/live/" + ident, {
            "id": ident, "uri": "http://127.0.0.1:%d" % env.pa,
            "predicates": ["Path=" + path], "filters": [filt]})
        check(r.status == 200, "PUT %s: %d %r" % (ident, r.status, r.body))
    env.converged()
    r = request(env.hport, "GET", "/rm", headers={"X-Secret": "s"})
    check(r.status == 200 and r.echo_header("X-Secret") is None,
          "RemoveRequestHeader under X-Secret \"\": %d %r"
          % (r.status, r.body[:200]))
    r = request(env.hport, "GET", "/pass", headers={"X-Pass": "client"})
    check(r.status == 200 and r.echo_header("X-Pass") == "v",
          "SetRequestHeader under $http_x_pass: %d %r"
          % (r.status, r.body[:200]))
    r = request(env.hport, "GET", "/keep/1", headers={"X-Added": "c"})
    check(r.status == 200 and r.echo_header("X-Added") == "fixed",
          "a route without header filters: %d %r" % (r.status, r.body[:200]))
    # a forward: route's change is checked where the request is proxied
    for doc in ({"id": "fwd", "uri": "forward:/fwdtarget",
                 "predicates": ["Path=/fwd/**"],
                 "filters": ["AddRequestHeader=X-Added,fwd"]},
                {"id": "fwdtarget", "uri": "http://127.0.0.1:%d" % env.pa,
                 "predicates": ["Path=/fwdtarget"]}):
        r = env.put("routes/live/" + doc["id"], doc)
        check(r.status == 200, "PUT %s: %d %r" % (doc["id"], r.status,
                                                  r.body))
    env.converged()
    r = request(env.port, "GET", "/fwd/x")
    check(r.status == 200 and r.echo_header("X-Added") == "fwd",
          "forward without the lines: %d %r" % (r.status, r.body[:200]))
    r = request(env.hport, "GET", "/fwd/x")
    check(r.status == 500 and 'route "fwdtarget" refused: its filters '
          'change the request header "X-Added"' in env.error_log(),
          "a forward's header change under proxy_set_header: %d %s"
          % (r.status, env.error_log()[-400:]))


def test_header_the_location_adds_refused(env):
    """The location's add_header and expires add their headers after the
    route's response filters ran: a route that removes or sets such a
    header is refused (500, logged with the route, the header and the
    directive), also when the add_header is in an `if` block that only
    the request's final location knows; AddResponseHeader is sent beside
    the location's value; without those lines the same routes run."""
    for ident, filt in (("rmloc", "RemoveResponseHeader=X-Loc"),
                        ("cc", "SetResponseHeader=Cache-Control,no-store"),
                        ("addloc", "AddResponseHeader=X-Loc,route"),
                        ("rmif", "RemoveResponseHeader=X-If")):
        r = env.put("routes/live/" + ident, {
            "id": ident, "uri": "http://127.0.0.1:%d" % env.pa,
            "predicates": ["Path=/" + ident], "filters": [filt]})
        check(r.status == 200, "PUT %s: %d %r" % (ident, r.status, r.body))
    env.converged()
    for ident, name, directive in (("rmloc", "X-Loc", "add_header"),
                                   ("cc", "Cache-Control", "expires")):
        r = request(env.hport, "GET", "/" + ident)
        check(r.status == 500, "%s answered %d %r"
              % (ident, r.status, r.headers))
        check('route "%s" refused: its response filters set, remove or '
              'rewrite "%s", which the location adds after them with %s'
              % (ident, name, directive) in env.error_log(),
              "not logged: %s" % env.error_log()[-600:])
        r = request(env.port, "GET", "/" + ident)
        check(r.status == 200, "%s without the lines: %d" % (ident, r.status))
    r = request(env.port, "GET", "/cc")
    check(r.header("Cache-Control") == "no-store", "cc: %r" % r.headers)
    r = request(env.hport, "GET", "/addloc")
    got = sorted(v for k, v in r.headers if k.lower() == "x-loc")
    check(r.status == 200 and got == ["loc", "route"],
          "AddResponseHeader beside add_header: %d %r" % (r.status, got))
    r = request(env.hport, "GET", "/rmif")
    check(r.status == 200 and r.header("X-Loc") == "loc",
          "rmif without the if: %d %r" % (r.status, r.headers))
    r = request(env.hport, "GET", "/rmif", headers={"X-If": "1"})
    check(r.status == 500 and r.header("X-If") is None,
          "rmif in the if: %d %r" % (r.status, r.headers))
    check('route "rmif" refused' in env.error_log(),
          "if not logged: %s" % env.error_log()[-600:])


def test_location_that_does_not_proxy_refused(env):
    """A `switchyard on` location (its own or inherited from the server)
    without a proxy_pass (a return, static files) would answer every
    routed request 500 (the route's target ignored) and every other 404
    (its own content ignored: a `location = /health { return 200; }` in a
    switchyard server never answered 200): nginx -t refuses it, naming the
    location and the `switchyard on` line. With `switchyard off` it
    passes. A location that proxies from an `if` block passes the test,
    proxies when the `if` holds and refuses per request otherwise."""
    conf = env.conf()
    adm = "location /switchyard/ {"
    server_on = last(conf, adm, "switchyard on;\n        " + adm)
    for bad, where, want in (
            (conf.replace(adm, 'location /ret/ { switchyard on; return 200 '
                          '"static"; }\n        ' + adm), "location /ret/",
             '"/ret/"'),
            (conf.replace(adm, "location /files/ { switchyard on; "
                          "root /nonexistent; }\n        " + adm),
             "location /files/", '"/files/"'),
            (last(server_on, adm, "location = /health { return 200; }\n"
                  "        " + adm), "switchyard on;\n        location = "
             "/health", '"/health"')):
        rc, err = env.test_conf(bad)
        line = bad[:bad.rindex(where)].count("\n") + 1
        check(rc != 0 and want in err and "no proxy_pass" in err and
              "test.conf:%d" % line in err,
              "%s: %d %s" % (want, rc, err[-400:]))
    rc, err = env.test_conf(last(
        server_on, adm, "location = /health { switchyard off; return 200; }"
        "\n        " + adm))
    check(rc == 0, "switchyard off refused: %s" % err[-400:])
    r = env.put("routes/live/elsewhere", {
        "id": "elsewhere", "uri": "http://127.0.0.1:%d" % env.pa,
        "predicates": ["Path=/viaif/**"]})
    check(r.status == 200, "PUT: %d %r" % (r.status, r.body))
    env.converged()
    r = request(env.hport, "GET", "/viaif/x")
    check(r.status == 500, "/viaif/x answered %d %r"
          % (r.status, r.body[:100]))
    check('route "elsewhere" refused: the location does not proxy'
          in env.error_log(), "not logged: %s" % env.error_log()[-600:])
    r = request(env.hport, "GET", "/viaif/x", headers={"X-Go": "1"})
    check(r.status == 200 and r.json()["path"] == "/viaif/x",
          "proxied from the if: %d %r" % (r.status, r.body[:200]))


def respawn_workers(env):
    """SIGKILL every worker; the master starts new ones. Returns them."""
    old = env.workers()
    for pid in old:
        os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 10
    while True:
        now = env.workers()
        if len(now) == 2 and not now & old:
            return now
        check(time.time() < deadline, "workers not respawned: %r" % now)
        time.sleep(0.05)


def test_worker_that_cannot_load_answers_503(env):
    """A worker that cannot load its routes at its start (here: the
    zone's policy store is not one it can attach to, its version number
    rewritten in the master's mapping, and the workers respawned) stays
    up, logs an alert with the cause, and answers every routed and admin
    request 503, logging why per request: it neither exits (the master
    would be left without workers) nor routes with no routes. Once the
    store is whole again, respawned workers route."""
    size = 8 * 1024 * 1024  # switchyard_zone 8m (the fixture)
    heads = zone_store_header(env.nginx.pid, size)
    check(len(heads) == 1, "store headers found: %r" % heads)
    with open("/proc/%d/mem" % env.nginx.pid, "r+b") as mem:
        mem.seek(heads[0] + 8)  # uint32 version after the magic
        version = mem.read(4)
        mem.seek(heads[0] + 8)
        mem.write((1).to_bytes(4, "little"))
    try:
        broken = respawn_workers(env)
        deadline = time.time() + 5
        while request(env.port, "GET", "/a/x").status != 503:
            check(time.time() < deadline, "no 503 from the new workers")
            time.sleep(0.05)
        seen = set()
        for _ in range(20):
            r = request(env.port, "GET", "/a/x")
            check(r.status == 503, "a broken worker answered %d" % r.status)
            seen.add(int(r.header("X-Pid")))
        check(seen <= broken, "answered by %r, not %r" % (seen, broken))
        r = request(env.port, "GET", "/switchyard/status")
        check(r.status == 503, "admin status answered %d" % r.status)
        with open(os.path.join(env.dir, "error.log")) as f:
            log = f.read()
        for pid in seen:
            check("] %d#%d: switchyard: this worker cannot load its routes"
                  % (pid, pid) in log,
                  "no alert from worker %d: %s" % (pid, log[-900:]))
        check("[alert]" in log and "it answers 503" in log,
              "alert: %s" % log[-900:])
        check("this worker has no routes" in log,
              "503 not logged per request: %s" % log[-900:])
        check(env.nginx.poll() is None, "the master exited")
    finally:
        with open("/proc/%d/mem" % env.nginx.pid, "r+b") as mem:
            mem.seek(heads[0] + 8)
            mem.write(version)
    respawn_workers(env)
    deadline = time.time() + 5
    while request(env.port, "GET", "/a/x").status != 200:
        check(time.time() < deadline, "whole store: still not routing")
        time.sleep(0.05)
    check(" exited on signal 11" not in env.error_log(), "a worker crashed")


def test_rewrite_in_a_switchyard_location_refused_by_test(env):
    """The module routes a request in the rewrite phase before the
    location's own rewrite directives run: a `rewrite` there (break, last
    or no flag, at the location's level or in its `if`) changed nginx's
    URI after the route was matched and its path computed, and was
    ignored (`rewrite ^/a/(.*)$ /b/$1 break;` still sent /a/x to route a
    as /x). nginx -t refuses it, naming the rewrite and its file:line; a
    rewrite that redirects (redirect, permanent, an absolute URL), one at
    the server level (it runs before the routes are matched: the
    rewritten URI is routed) and one in a location without switchyard
    pass. `set $args` is refused and passes likewise (the query the route
    computed is what is sent). A server-level rewrite cannot carry a
    client's %2F past switchyard_escaped_slashes reject."""
    conf = env.conf()
    at = "switchyard on;\n            " + PROXY
    rw = "rewrite ^/a/(.*)$ /b/$1"
    for flag in (" break", " last", ""):
        bad = last(conf, at, at + "\n            %s%s;" % (rw, flag))
        rc, err = env.test_conf(bad)
        check(rc != 0 and 'rewrite' in err and 'switchyard on' in err and
              "test.conf:%d" % (line_of(bad, at) + 2) in err,
              "rewrite%s: %d %s" % (flag, rc, err[-400:]))
    for extra in ("if ($http_x_rw) { %s break; }" % rw,
                  # the query the route computed is sent: `set $args` there
                  # was ignored as well (/a/x?y=2 still sent ?y=2)
                  'set $args "x=1";',
                  'if ($http_x_rw) { set $args "x=1"; }'):
        bad = last(conf, at, at + "\n            " + extra)
        rc, err = env.test_conf(bad)
        check(rc != 0 and "test.conf:%d" % (line_of(bad, at) + 2) in err,
              "%s: %d %s" % (extra, rc, err[-400:]))
    server = last(conf, "location / {", rw + " break;\n        "
                  "rewrite ^/q/(.*)$ /a/$1 break;\n        location / {")
    for good in (
            last(conf, at, at + "\n            %s redirect;" % rw),
            last(conf, at, at + "\n            %s permanent;" % rw),
            last(conf, at, at + "\n            rewrite ^/old$ "
                 "https://example.com/new;"),
            server,
            last(conf, at, at + '\n            set $sy_x "1";'),
            last(conf, "location / {", 'set $args "x=1";\n        '
                 'location / {'),
            conf.replace("location /switchyard/ {",
                         "location /plain/ { rewrite ^ /x break; "
                         "return 204; }\n        location /switchyard/ {")):
        rc, err = env.test_conf(good)
        check(rc == 0, "refused: %s" % err[-400:])
    # the server level's rewrite is routed
    path = os.path.join(env.dir, "nginx.conf")
    with open(path, "w") as f:
        f.write(server)
    try:
        base.reload_and_wait(env)
        r = request(env.port, "GET", "/a/thing")
        check(r.status == 200 and r.header("X-Switchyard-Route") == "b" and
              r.json()["path"] == "/set/thing",
              "server-level rewrite: %d %r %r"
              % (r.status, r.header("X-Switchyard-Route"), r.body[:200]))
        # the rewritten URI is nginx's decoded one: the client's %2F was a
        # slash by then, and switchyard_escaped_slashes reject (the
        # fixture's) let /q/x%2Fy through to route a as /x/y; the client's
        # own path is held to it (400, as /a/x%2Fy is)
        for path_ in ("/a/x%2Fy", "/q/x%2Fy", "/q/x%5cy"):
            r = request(env.port, "GET", path_)
            check(r.status == 400, "%s with escaped_slashes reject: %d %r"
                  % (path_, r.status, r.body[:200]))
        r = request(env.port, "GET", "/q/x%41y")
        check(r.status == 200 and r.json()["path"] == "/xAy",
              "/q/x%%41y: %d %r" % (r.status, r.body[:200]))
    finally:
        with open(path, "w") as f:
            f.write(conf)
        base.reload_and_wait(env)


def test_admin_location_combinations_refused(env):
    """An admin location answers its requests with the admin API: a
    `switchyard on` written in it, or a proxy_pass (before or after
    switchyard_admin: nginx keeps the last content handler, so either the
    proxy or the admin API was dropped), or another content handler set
    after it, was accepted and ignored; nginx -t refuses each, naming the
    directive and its file:line. `switchyard on` inherited from the server
    level and `switchyard off` pass."""
    conf = env.conf()
    adm = "switchyard_admin;"
    line = line_of(conf, adm)
    for bad, want in (
            (conf.replace(adm, adm + " switchyard on;"), '"switchyard"'),
            (conf.replace(adm, "switchyard on; " + adm), "switchyard_admin"),
            (conf.replace(adm, adm + " proxy_pass http://127.0.0.1:%d;"
                          % env.pa), "proxy_pass http://127.0.0.1"),
            (conf.replace(adm, "proxy_pass http://127.0.0.1:%d; " % env.pa
                          + adm), "proxy_pass http://127.0.0.1"),
            (conf.replace(adm, adm + " fastcgi_pass 127.0.0.1:%d;"
                          % env.pa), "another content handler")):
        rc, err = env.test_conf(bad)
        check(rc != 0 and want in err and "test.conf:%d" % line in err,
              "%r: %d %s" % (want, rc, err[-400:]))
    for good in (
            conf.replace(adm, adm + " switchyard off;"),
            last(conf, "location /switchyard/ {",
                 "switchyard on;\n        location /switchyard/ {")):
        rc, err = env.test_conf(good)
        check(rc == 0, "refused: %s" % err[-400:])


TESTS = [
    test_location_without_host_refused_by_test,
    test_host_filters_served,
    test_reload_without_host_refused,
    test_header_the_location_sets_refused_per_request,
    test_header_the_location_adds_refused,
    test_location_that_does_not_proxy_refused,
    test_rewrite_in_a_switchyard_location_refused_by_test,
    test_admin_location_combinations_refused,
    test_worker_that_cannot_load_answers_503,
]

if __name__ == "__main__":
    sys.exit(base.run(TESTS, ConfEnv))
