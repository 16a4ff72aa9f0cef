#!/usr/bin/env python3
"""End-to-end tests of ngx_http_switchyard_module (TAP for meson, suite e2e).

Starts Debian's nginx (2 workers) with the module built by -Dnginx=true and
two backends (this script in --backend mode: each answers with its id, the
path, method and headers it received), all on 127.0.0.1 free ports, runs the
checks below and stops everything, also on failure. Environment:
SY_NGINX_MODULE (the .so), SY_NGINX (the nginx binary).
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402

MODULE = os.environ.get("SY_NGINX_MODULE", "")
NGINX = os.environ.get("SY_NGINX", "/usr/sbin/nginx")
TIMEOUT = 5.0


# ---------------------------------------------------------------- backend

def ipv6_backend(ident):
    """A one-answer-fits-all backend on [::1] (a free port), served by a
    thread: {"id": ident}. Returns the server (shutdown() stops it)."""
    import socket
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            body = json.dumps({"id": ident}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6
        daemon_threads = True

    srv = Server(("::1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def run_backend(ident, port):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        # keep-alive (the balancer tests count connections)
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # no 40 ms delayed-ACK stalls

        def answer(self):
            n = int(self.headers.get("Content-Length") or 0)
            body_in = self.rfile.read(n) if n else b""
            if "sleep=" in self.path:
                time.sleep(float(self.path.split("sleep=")[1].split("&")[0]))
            body = json.dumps({
                "id": ident, "method": self.command, "path": self.path,
                "headers": [[k, v] for k, v in self.headers.items()],
                "body": body_in.decode("utf-8", "replace"),
                "peer": self.client_address[1],
            }).encode()
            # "fail=<id>" in the path: this backend answers 502, or the
            # status of "failcode=NNN"
            code = 200
            if "fail=" + ident in self.path:
                code = 502
                if "failcode=" in self.path:
                    code = int(self.path.split("failcode=")[1][:3])
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            # "rh=Name:Value" in the query: a response header to send
            from urllib.parse import parse_qs, urlsplit
            for h in parse_qs(urlsplit(self.path).query).get("rh", []):
                k, _, v = h.partition(":")
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = answer

        def log_message(self, *args):
            pass

    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 256
    srv = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    srv.serve_forever()


# ---------------------------------------------------------------- helpers

def die_with_parent():
    """preexec_fn: the child gets SIGTERM when this script dies, so that
    nothing outlives a killed test run (Linux prctl PR_SET_PDEATHSIG)."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


def wait_port(port, deadline):
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("port %d did not open" % port)


class Resp:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def json(self):
        return json.loads(self.body)

    def echo_header(self, name):
        """A header as the backend received it."""
        for k, v in self.json()["headers"]:
            if k.lower() == name.lower():
                return v
        return None


def request(port, method, path, headers=None, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return Resp(r.status, r.getheaders(), r.read())
    finally:
        c.close()


def wait_respawned(env, victim):
    """Poll the status until worker `victim` (killed) is replaced: two
    workers, none of them it."""
    deadline = time.time() + 10
    while True:
        s = env.status()
        pids = {w["pid"] for w in s["workers"]}
        if victim not in pids and len(pids) == 2:
            return
        check(time.time() < deadline, "no respawned worker: %r" % s)
        time.sleep(0.05)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


# ---------------------------------------------------------------- fixture

# Every $switchyard_* variable (and the upstream nginx chose) in an
# http-level access log, as an operator's first log_format would: every
# request of every suite evaluates them (admin requests, retries, 429s,
# fallbacks, refusals); run() fails a suite whose workers crashed.
SY_VARS = ["route", "upstream", "uri", "host", "instance", "version"]
LOG_ALL = ("log_format sy_all '$request_uri $status "
           + "|".join("$switchyard_" + v for v in SY_VARS)
           + " $upstream_addr';\n    access_log {d}/access.log sy_all;")


def crashed(env):
    """The error log lines of workers that died on a signal (but the
    SIGKILL the respawn tests send) or that the master could not respawn
    (every error log of env.dir)."""
    bad = []
    for name in sorted(os.listdir(env.dir)):
        if name.startswith("error") and name.endswith(".log"):
            with open(os.path.join(env.dir, name), errors="replace") as f:
                bad += [ln for ln in f if ("exited on signal" in ln and
                                           "signal 9" not in ln) or
                        "cannot be respawned" in ln]
    return bad


class Env:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sy-nginx-e2e-")
        # workers of a root master run as nobody: they need to reach the
        # temporary files under this directory
        os.chmod(self.dir, 0o755)
        self.procs = []
        self.nginx = None
        self.pa, self.pb, self.port = free_port(), free_port(), free_port()
        # http-level directives (the ops tests log every variable) and
        # directives of the proxying location
        self.http_extra = LOG_ALL
        self.location_extra = ""
        # how the location on self.port proxies (the variable form here)
        self.proxy = "proxy_pass $switchyard_upstream$switchyard_uri;"

    def write(self, name, obj):
        with open(os.path.join(self.dir, name), "w") as f:
            json.dump(obj, f)

    def main_routes(self):
        a = "http://127.0.0.1:%d" % self.pa
        b = "http://127.0.0.1:%d" % self.pb
        return {"version": "1", "routes": [
            {"id": "a", "uri": a, "predicates": ["Path=/a/**"],
             "filters": ["StripPrefix=1", "AddRequestHeader=X-Added,yes",
                         "RemoveRequestHeader=X-Secret"]},
            {"id": "b", "uri": b, "predicates": ["Path=/b/{seg}"],
             "filters": ["SetPath=/set/{seg}",
                         "AddResponseHeader=X-Resp,on"]},
            {"id": "gray", "uri": "lb://shop", "predicates": ["Path=/shop/**"],
             "metadata": {"version-header": "X-Version"}},
            {"id": "post-only", "uri": a,
             "predicates": ["Path=/post", "Method=POST,PUT"]},
            {"id": "redir", "uri": a, "predicates": ["Path=/old"],
             "filters": ["RedirectTo=301,http://example.com/new"]},
            {"id": "teapot", "uri": a, "predicates": ["Path=/tea"],
             "filters": ["SetStatus=418"]},
            {"id": "keep", "uri": b, "predicates": ["Path=/keep/**"],
             "filters": ["PreserveHostHeader"]},
            {"id": "flaky", "uri": "lb://flaky",
             "predicates": ["Path=/flaky/**"]},
            {"id": "hosted", "uri": b,
             "predicates": ["Host=hosted.example", "Path=/hosted"]},
        ]}

    def live_routes(self, version, backend=None):
        port = backend or self.pa
        return {"version": str(version), "routes": [
            {"id": "live", "uri": "http://127.0.0.1:%d" % port,
             "predicates": ["Path=/live/**"],
             "filters": ["AddRequestHeader=X-Route-Version,%s" % version]}]}

    def instances(self):
        return {"services": {"shop": [
            {"id": "shop-a", "host": "127.0.0.1", "port": self.pa},
            {"id": "shop-b", "host": "127.0.0.1", "port": self.pb,
             "metadata": {"version": "2"}}]}}

    def start(self):
        for ident, port in (("A", self.pa), ("B", self.pb)):
            self.procs.append(subprocess.Popen(
                [sys.executable, __file__, "--backend", ident, str(port)],
                preexec_fn=die_with_parent))
        self.write("main.json", self.main_routes())
        self.write("live.json", self.live_routes(0))
        self.write("instances.json", self.instances())
        d = self.dir
        conf = """
load_module {module};
worker_processes 2;
error_log {d}/error.log notice;
pid {d}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
    {http_extra}
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    switchyard_routes {d}/main.json;
    switchyard_routes {d}/live.json;
    switchyard_instances {d}/instances.json;
    switchyard_zone 8m;
    switchyard_strip_host_port on;
    switchyard_escaped_slashes reject;
    server {{
        listen 127.0.0.1:{port};
        location /switchyard/ {{
            switchyard_admin;
            client_max_body_size 16m;
            client_body_buffer_size 128;  # larger bodies go through a file
        }}
        location / {{
            switchyard on;
            {proxy}
            proxy_set_header Host $switchyard_host;
            add_header X-Switchyard-Route $switchyard_route always;
            add_header X-Switchyard-Instance $switchyard_instance always;
            add_header X-Switchyard-Version $switchyard_version always;
            {location_extra}
        }}
    }}
}}
""".format(module=MODULE, d=d, port=self.port,
           http_extra=self.http_extra.replace("{d}", d),
           location_extra=self.location_extra, proxy=self.proxy)
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write(conf)
        self.launch()

    def launch(self):
        """Start nginx on the written configuration (again after stop)."""
        d = self.dir
        self.nginx = subprocess.Popen(
            [NGINX, "-p", d, "-c", d + "/nginx.conf", "-g", "daemon off;"],
            stderr=open(os.path.join(d, "stderr.log"), "w"),
            preexec_fn=die_with_parent)
        deadline = time.time() + 10
        for p in (self.pa, self.pb, self.port):
            wait_port(p, deadline)

    def stop_nginx(self):
        if self.nginx and self.nginx.poll() is None:
            self.nginx.send_signal(signal.SIGTERM)
            try:
                self.nginx.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.nginx.kill()
                self.nginx.wait()

    def reload(self):
        subprocess.run([NGINX, "-p", self.dir, "-c", self.dir + "/nginx.conf",
                        "-s", "reload"], check=True, timeout=10,
                       capture_output=True)

    def wait_live_version(self, version, what, timeout=10):
        """Poll /live/x until the live route of `version` answers."""
        deadline = time.time() + timeout
        while True:
            r = request(self.port, "GET", "/live/x")
            if (r.status == 200 and
                    r.echo_header("X-Route-Version") == str(version)):
                return
            check(time.time() < deadline, what)
            time.sleep(0.05)

    def test_conf(self, conf):
        """nginx -t on the configuration text `conf`: (returncode,
        stderr)."""
        path = os.path.join(self.dir, "test.conf")
        with open(path, "w") as f:
            f.write(conf)
        p = subprocess.run([NGINX, "-t", "-p", self.dir, "-c", path],
                           capture_output=True, text=True, timeout=10)
        return p.returncode, p.stderr

    def put(self, what, doc):
        body = doc if isinstance(doc, (bytes, str)) else json.dumps(doc)
        return request(self.port, "PUT", "/switchyard/" + what, body=body,
                       headers={"Content-Type": "application/json"})

    def status(self):
        r = request(self.port, "GET", "/switchyard/status")
        check(r.status == 200, "status answered %d" % r.status)
        return r.json()

    def converged(self, timeout=5.0):
        """Poll until both workers report the zone's generation and the
        same fingerprint; returns the last status."""
        deadline = time.time() + timeout
        while True:
            s = self.status()
            fps = {w["fingerprint"] for w in s["workers"]}
            if (len(s["workers"]) == 2 and len(fps) == 1 and s["converged"]
                    and all(w["generation"] == s["generation"]
                            for w in s["workers"])):
                return s
            if time.time() > deadline:
                raise AssertionError("workers did not converge: %r" % s)
            time.sleep(0.05)

    def stop(self):
        self.stop_nginx()
        for p in self.procs:
            p.kill()
            p.wait()

    def error_log(self):
        # nginx logs a request's bytes as they came (an error quoting a
        # route's stray byte): read as text, each one U+FFFD
        try:
            with open(os.path.join(self.dir, "error.log"),
                      errors="replace") as f:
                return f.read()[-3000:]
        except OSError:
            return ""


# ---------------------------------------------------------------- tests

def test_routes_and_request_filters(env):
    r = request(env.port, "GET", "/a/x/y?q=1&r=2",
                headers={"X-Secret": "s", "X-Keep": "k"})
    check(r.status == 200, "status %d" % r.status)
    j = r.json()
    check(j["id"] == "A", "backend %s" % j["id"])
    check(j["path"] == "/x/y?q=1&r=2", "path %s" % j["path"])
    check(r.echo_header("X-Added") == "yes", "AddRequestHeader missing")
    check(r.echo_header("X-Secret") is None, "RemoveRequestHeader ignored")
    check(r.echo_header("X-Keep") == "k", "client header lost")
    check(r.echo_header("Host") == "127.0.0.1:%d" % env.pa,
          "Host sent %s" % r.echo_header("Host"))
    check(r.header("X-Switchyard-Route") == "a", "$switchyard_route")


def test_setpath_and_response_header(env):
    r = request(env.port, "GET", "/b/thing")
    check(r.status == 200, "status %d" % r.status)
    j = r.json()
    check(j["id"] == "B" and j["path"] == "/set/thing", repr(j))
    check(r.header("X-Resp") == "on", "AddResponseHeader missing")


def test_unfiltered_headers_sent_as_they_came(env):
    """A route without request header filters sends the client's headers
    (repeated ones included) in their order, and one Host: the route's
    ($switchyard_host), not the client's beside it."""
    r = request(env.port, "GET", "/b/thing",
                headers={"X-One": "1", "Host": "client.example",
                         "X-Two": "2"})
    check(r.status == 200, "status %d" % r.status)
    sent = r.json()["headers"]
    names = [k.lower() for k, _ in sent]
    check(names.count("host") == 1, "Host sent %d times: %r"
          % (names.count("host"), sent))
    check(r.echo_header("Host") == "127.0.0.1:%d" % env.pb,
          "Host sent %s" % r.echo_header("Host"))
    check(names.index("x-one") < names.index("x-two") and
          r.echo_header("X-One") == "1" and r.echo_header("X-Two") == "2",
          "client headers: %r" % sent)


def test_path_normalised_before_matching(env):
    """The module gives the library the raw path: dot segments (also
    encoded ones) are removed before matching and in the path sent; an
    encoded slash is refused with 400 (switchyard_escaped_slashes reject:
    the library's SY_NOMATCH_BAD_PATH); other escapes are sent as they
    came."""
    for raw in ("/a/../b/thing", "/a/%2e%2e/b/thing", "/b/./thing"):
        r = request(env.port, "GET", raw)
        check(r.status == 200, "%s: status %d" % (raw, r.status))
        j = r.json()
        check(j["id"] == "B" and j["path"] == "/set/thing",
              "%s went to %s %s" % (raw, j["id"], j["path"]))
    r = request(env.port, "GET", "/a/x%2Fy")
    check(r.status == 400, "encoded slash: %d %r" % (r.status, r.body[:200]))
    r = request(env.port, "GET", "/a/x%41y")
    check(r.status == 200 and r.json()["path"] == "/x%41y",
          "other escapes: %d %r" % (r.status, r.body[:200]))


def test_preserve_host_header(env):
    r = request(env.port, "GET", "/keep/1", headers={"Host": "shop.example"})
    check(r.status == 200, "status %d" % r.status)
    check(r.echo_header("Host") == "shop.example",
          "Host sent %s" % r.echo_header("Host"))


def test_gray_release_by_version_header(env):
    plain = [request(env.port, "GET", "/shop/p").json()["id"]
             for _ in range(6)]
    gray = [request(env.port, "GET", "/shop/p",
                    headers={"X-Version": "2"}).json()["id"]
            for _ in range(6)]
    check(set(plain) == {"A"}, "without the header: %r" % plain)
    check(set(gray) == {"B"}, "with X-Version: 2: %r" % gray)
    r = request(env.port, "GET", "/shop/p", headers={"X-Version": "2"})
    check(r.header("X-Switchyard-Instance") == "shop-b" and
          r.header("X-Switchyard-Version") == "2",
          "$switchyard_instance/$switchyard_version: %r"
          % [r.header("X-Switchyard-Instance"),
             r.header("X-Switchyard-Version")])


def test_host_predicate_ignores_port(env):
    r = request(env.port, "GET", "/hosted",
                headers={"Host": "hosted.example:8443"})
    check(r.status == 200 and r.json()["id"] == "B",
          "switchyard_strip_host_port: %d" % r.status)
    r = request(env.port, "GET", "/hosted", headers={"Host": "other.example"})
    check(r.status == 404, "other host: %d" % r.status)


def test_no_route_is_404(env):
    r = request(env.port, "GET", "/nowhere")
    check(r.status == 404, "status %d" % r.status)


def test_method_mismatch_is_405_with_allow(env):
    r = request(env.port, "POST", "/post", body="x")
    check(r.status == 200 and r.json()["method"] == "POST",
          "POST answered %d" % r.status)
    check(r.json()["body"] == "x", "request body %r" % r.json()["body"])
    r = request(env.port, "GET", "/post")
    check(r.status == 405, "status %d" % r.status)
    allow = (r.header("Allow") or "").replace(" ", "").split(",")
    check(sorted(allow) == ["POST", "PUT"], "Allow %r" % r.header("Allow"))


def test_redirect_answered_by_module(env):
    r = request(env.port, "GET", "/old")
    check(r.status == 301, "status %d" % r.status)
    check(r.header("Location") == "http://example.com/new",
          "Location %r" % r.header("Location"))


def test_set_status(env):
    r = request(env.port, "GET", "/tea")
    check(r.status == 418, "status %d" % r.status)
    check(r.json()["id"] == "A", "body not from the backend")


def test_noop_route_answered_by_the_module(env):
    """no://op routes are answered by the module (as the mini-gateway and
    SCG): the route's SetStatus (else 200), its response headers, no body;
    a forward: to one gets the forwarding route's headers too."""
    for rid, path, filters in (
            ("noop", "/noop", ["AddResponseHeader=X-Noop,1"]),
            ("noop418", "/noop418", ["SetStatus=418",
                                     "SetResponseHeader=X-Noop,2"])):
        r = env.put("routes/live/" + rid, {
            "id": rid, "uri": "no://op", "predicates": ["Path=" + path],
            "filters": filters})
        check(r.status == 200, "PUT %s: %d %r" % (rid, r.status, r.body))
    r = env.put("routes/live/tonoop", {
        "id": "tonoop", "uri": "forward:/noop418",
        "predicates": ["Path=/tonoop"],
        "filters": ["AddResponseHeader=X-Outer,yes"]})
    check(r.status == 200, "PUT tonoop: %d %r" % (r.status, r.body))
    env.converged()
    for path, status, noop in (("/noop", 200, "1"), ("/noop418", 418, "2"),
                               ("/tonoop", 418, "2")):
        r = request(env.port, "GET", path)
        check(r.status == status and r.header("X-Noop") == noop and
              r.body == b"" and r.header("Content-Length") == "0",
              "%s: %d %r %r" % (path, r.status, r.headers, r.body[:100]))
    check(r.header("X-Outer") == "yes", "forwarding route's header: %r"
          % r.headers)
    check('no://' not in env.error_log(), "logged: %s" % env.error_log())


def test_broken_document_rejected(env):
    before = env.converged()
    bad = env.live_routes(99)
    bad["routes"][0]["predicates"] = ["Path=/live/**", "Paht=/typo"]
    r = env.put("routes/live", bad)
    check(r.status == 400, "status %d" % r.status)
    err = r.json()["error"]
    check(err["path"] == "routes[0].predicates[1]", "path %r" % err["path"])
    check(err["message"], "no message")
    r = env.put("routes/live", b'{"version": "x", "routes": [')
    check(r.status == 400, "syntax: status %d" % r.status)
    check(r.json()["error"]["name"], "no error name")
    r = env.put("routes/nosuch", env.live_routes(1))
    check(r.status == 404, "unknown source: status %d" % r.status)
    after = env.converged()
    check(after["generation"] == before["generation"],
          "generation moved: %r -> %r" % (before, after))
    check({w["fingerprint"] for w in after["workers"]} ==
          {w["fingerprint"] for w in before["workers"]}, "routes changed")
    r = request(env.port, "GET", "/live/x")
    check(r.status == 200 and r.echo_header("X-Route-Version") == "0",
          "live route changed")


def test_instances_put(env):
    doc = [{"id": "shop-a", "host": "127.0.0.1", "port": env.pa},
           {"id": "shop-b", "host": "127.0.0.1", "port": env.pb,
            "metadata": {"version": 3}}]  # a number is taken as text
    r = env.put("instances/shop", doc)
    check(r.status == 200, "status %d %r" % (r.status, r.body))
    ids = {request(env.port, "GET", "/shop/p",
                   headers={"X-Version": "3"}).json()["id"]
           for _ in range(6)}
    check(ids == {"B"}, "X-Version: 3 went to %r" % ids)
    # an IPv6 instance in brackets was taken but handed over as "[::1]":
    # the balancer dialled "[[::1]]:port" and every request failed. It is
    # the address ::1 now; a host with its port is refused at its field.
    six = ipv6_backend("SIX")
    r = env.put("instances/shop", [{"id": "six", "host": "[::1]",
                                    "port": six.server_address[1]}])
    check(r.status == 200, "status %d %r" % (r.status, r.body))
    got = request(env.port, "GET", "/shop/p")
    check(got.status == 200 and got.json()["id"] == "SIX",
          "[::1] instance: %d %r" % (got.status, got.body))
    six.shutdown()
    r = env.put("instances/shop", doc)  # the list the checks below expect
    check(r.status == 200, "status %d %r" % (r.status, r.body))
    r = env.put("instances/shop", [{"id": "x", "host": "127.0.0.1:80",
                                    "port": 80}])
    check(r.status == 400 and r.json()["error"]["path"] == "[0].host",
          "host with a port: %d %r" % (r.status, r.body))
    r = env.put("instances/shop", [{"id": "x", "host": "h", "port": "80"}])
    check(r.status == 400 and r.json()["error"]["path"] == "[0].port",
          "string port: %d %r" % (r.status, r.body))
    r = env.put("instances/shop", [{"id": "x", "host": "h", "port": 80,
                                    "wieght": 2}])
    check(r.status == 400 and r.json()["error"]["path"] == "[0].wieght",
          "unknown key: %d %r" % (r.status, r.body))
    r = env.put("instances/shop", [{"id": "x", "host": "h", "port": 80},
                                   {"id": "x", "host": "h", "port": 81}])
    check(r.status == 400 and r.json()["error"]["path"] == "[1].id",
          "duplicate id: %d %r" % (r.status, r.body))
    body = '[{"id": "x", "host": }]'
    r = env.put("instances/shop", body)
    e = r.json()["error"] if r.status == 400 else {}
    check(e.get("line") == 1 and 0 < e.get("column", 0) <= len(body) and
          e.get("offset", len(body)) < len(body),
          "syntax error located in the body: %d %r" % (r.status, r.body))
    r = env.put("instances/shop", {"services": {"other": doc}})
    check(r.status == 400, "document without the service: %d" % r.status)
    # a document listing other services too: they were dropped (200, the
    # service of the URL alone changed); refused at the first other one
    for body, at in (({"services": {"shop": doc[:1], "other": doc}},
                      "services.other"),
                     ({"shop": doc[:1], "other": doc, "third": doc},
                      "other")):
        r = env.put("instances/shop", body)
        e = r.json()["error"] if r.status == 400 else {}
        check(r.status == 400 and e.get("path") == at and
              "instances/other" in e.get("message", ""),
              "document with other services: %d %r" % (r.status, r.body))
    s = env.status()
    check("other" not in [x["name"] for x in s["services"]] and
          [i["id"] for x in s["services"] if x["name"] == "shop"
           for i in x["instances"]] == ["shop-a", "shop-b"],
          "a refused document changed the services: %r" % s["services"])
    r = env.put("instances/shop", {"services": {"shop": doc}})
    check(r.status == 200, "instances document: %d %r" % (r.status, r.body))
    env.converged()


def test_names_without_a_resolver(env):
    """The fixture's location proxies to $switchyard_upstream and has no
    `resolver`: nginx cannot resolve a name at request time, so a route
    or an instance given by name was accepted and every request answered
    502 ("no resolver defined"). The worker resolves it as the balancer
    does (once, cached) and the variable gives the address; a name that
    does not resolve is refused per request, 500, logged."""
    r = env.put("routes/live/named", {
        "id": "named", "uri": "http://localhost:%d" % env.pa,
        "predicates": ["Path=/named/**"], "filters": ["PreserveHostHeader"]})
    check(r.status == 200, "PUT: %d %r" % (r.status, r.body))
    r = env.put("routes/live/lost", {
        "id": "lost", "uri": "http://no-such-host.invalid:%d" % env.pa,
        "predicates": ["Path=/lost/**"]})
    check(r.status == 200, "PUT: %d %r" % (r.status, r.body))
    r = env.put("instances/shop", [
        {"id": "shop-n", "host": "localhost", "port": env.pb}])
    check(r.status == 200, "PUT instances: %d %r" % (r.status, r.body))
    env.converged()
    try:
        for _ in range(4):  # both workers
            r = request(env.port, "GET", "/named/x",
                        headers={"Host": "named.example"})
            check(r.status == 200 and r.json()["id"] == "A" and
                  r.echo_header("Host") == "named.example",
                  "a URL by name: %d %r" % (r.status, r.body[:200]))
            r = request(env.port, "GET", "/shop/x")
            check(r.status == 200 and r.json()["id"] == "B",
                  "an instance by name: %d %r" % (r.status, r.body[:200]))
        r = request(env.port, "GET", "/lost/x")
        check(r.status == 500, "a name that does not resolve: %d"
              % r.status)
        check("no-such-host.invalid" in env.error_log(),
              "not logged: %s" % env.error_log()[-600:])
    finally:
        for rid in ("named", "lost"):
            request(env.port, "DELETE", "/switchyard/routes/live/" + rid)
        env.put("instances/shop", env.instances()["services"]["shop"])
        env.converged()


def test_passive_health_ejects_a_failing_instance(env):
    """Half the picks go to an instance nobody listens on; after 5
    consecutive failures in a worker (the library's default), that worker
    ejects it, so at most 10 requests fail (2 workers) before 20 in a row
    succeed (without ejection: a chance of one in a million)."""
    dead = free_port()
    r = env.put("instances/flaky", [
        {"id": "up", "host": "127.0.0.1", "port": env.pa},
        {"id": "dead", "host": "127.0.0.1", "port": dead}])
    check(r.status == 200, "PUT instances: %d" % r.status)
    statuses, streak = [], 0
    while streak < 20:
        check(len(statuses) < 300, "no 20 successes in a row: %r"
              % statuses[-40:])
        st = request(env.port, "GET", "/flaky/x").status
        statuses.append(st)
        streak = streak + 1 if st == 200 else 0
    check(set(statuses) <= {200, 502}, "statuses %r" % set(statuses))
    check(1 <= statuses.count(502) <= 10, "%d failures before ejection"
          % statuses.count(502))


def test_single_route_changes(env):
    b = "http://127.0.0.1:%d" % env.pb
    route = {"id": "extra", "uri": b, "predicates": ["Path=/extra/**"]}
    r = env.put("routes/live/extra", route)
    check(r.status == 200, "upsert: %d %r" % (r.status, r.body))
    r = request(env.port, "GET", "/extra/x")
    check(r.status == 200 and r.json()["id"] == "B", "upserted route")
    r = env.put("routes/live/other", route)
    check(r.status == 400 and r.json()["error"]["path"] == "id",
          "id mismatch: %d %r" % (r.status, r.body))
    r = env.put("routes/live/bad", {"id": "bad", "uri": b,
                                    "predicates": ["Nope=1"]})
    check(r.status == 400 and "predicates[0]" in r.json()["error"]["path"],
          "bad route: %d %r" % (r.status, r.body))
    r = request(env.port, "DELETE", "/switchyard/routes/main/extra")
    check(r.status == 404, "remove from the wrong source: %d" % r.status)
    # the admin API reads no query: a change asked with one (a dry run,
    # say) was committed; refused, and nothing changes
    dry = dict(route, predicates=["Path=/dry/**"])
    for method, path, body in (
            ("PUT", "routes/live/extra?dry_run=true", json.dumps(dry)),
            ("PUT", "routes/live?dryRun", json.dumps(
                env.live_routes(0, env.pb))),
            ("PUT", "instances/shop?dry-run=1", "[]"),
            ("DELETE", "routes/live/extra?dry_run=true", None)):
        r = request(env.port, method, "/switchyard/" + path, body=body)
        e = r.json()["error"] if r.status == 400 else {}
        check(r.status == 400 and "query" in e.get("message", ""),
              "%s %s: %d %r" % (method, path, r.status, r.body))
    r = request(env.port, "GET", "/extra/x")
    check(r.status == 200 and r.json()["id"] == "B",
          "a refused change changed the route: %d" % r.status)
    check(request(env.port, "GET", "/dry/x").status == 404,
          "the refused route serves")
    check(request(env.port, "GET", "/shop/x").status == 200,
          "the refused instances applied")
    s = env.converged()
    kinds = sorted((d["kind"], d["name"]) for d in s["documents"])
    check(("route", "extra") in kinds, "stored changes %r" % kinds)
    r = request(env.port, "DELETE", "/switchyard/routes/live/extra")
    check(r.status == 200, "remove: %d %r" % (r.status, r.body))
    r = request(env.port, "GET", "/extra/x")
    check(r.status == 404, "removed route answered %d" % r.status)
    r = request(env.port, "DELETE", "/switchyard/routes/live/extra")
    check(r.status == 404, "second remove: %d" % r.status)
    env.put("routes/live/extra", route)
    # a document for the source replaces its upserted routes
    r = env.put("routes/live", env.live_routes(0))
    check(r.status == 200, "document: %d" % r.status)
    r = request(env.port, "GET", "/extra/x")
    check(r.status == 404, "upsert survived the document: %d" % r.status)
    s = env.converged()
    check(not [d for d in s["documents"] if d["kind"].startswith("route-")
               or d["kind"] == "route"],
          "route changes kept: %r" % s["documents"])


def test_other_worker_woken_by_a_change(env):
    """A stored change wakes the other worker through its pipe: its
    "wakeups" count grows and it applies the change without a request of
    its own (the status requests below are answered by either worker)."""
    before = env.converged()
    woken = sum(w["wakeups"] for w in before["workers"])
    r = env.put("routes/live", env.live_routes(50))
    check(r.status == 200, "PUT: %d %r" % (r.status, r.body))
    gen = r.json()["generation"]
    check(r.json()["commit_us"] > 0, "no commit time: %r" % r.json())
    deadline = time.time() + TIMEOUT
    while True:
        s = env.status()
        if (sum(w["wakeups"] for w in s["workers"]) > woken
                and all(w["generation"] >= gen for w in s["workers"])):
            break
        check(time.time() < deadline, "no worker woken: %r -> %r"
              % (before["workers"], s["workers"]))
        time.sleep(0.02)
    s = env.converged()
    check(all(w["apply_us"] > 0 for w in s["workers"]),
          "apply times %r" % s["workers"])
    r = request(env.port, "GET", "/live/x")
    check(r.echo_header("X-Route-Version") == "50", "new version served")
    check(env.put("routes/live", env.live_routes(0)).status == 200,
          "restore version 0")


def test_large_documents_in_turn(env):
    """Whole documents of several hundred KB (the size the routers'
    allocator keeps freed blocks for), larger and smaller in turn, read
    through nginx's temporary file (client_body_buffer_size 128): each is
    served by every worker; a broken one is rejected with its located
    error and leaves the previous one serving everywhere. The answer
    splits the commit's CPU time and the status gives publish times in
    microseconds."""
    b = "http://127.0.0.1:%d" % env.pb

    def big(version, n):
        doc = env.live_routes(version)
        doc["routes"] += [{"id": "big%d" % i, "uri": b,
                           "predicates": ["Path=/big%d/**" % i]}
                          for i in range(n)]
        return json.dumps(doc)

    for version, n in ((201, 5000), (202, 7000), (203, 1000), (204, 7000)):
        body = big(version, n)
        check(n < 5000 or len(body) > 256 * 1024,
              "document of %d bytes" % len(body))
        r = env.put("routes/live", body)
        check(r.status == 200, "%d routes: %d %r" % (n, r.status, r.body))
        j = r.json()
        check(isinstance(j.get("store_cpu_us"), int) and
              isinstance(j.get("stage_cpu_us"), int) and
              j["store_cpu_us"] + j["stage_cpu_us"] <= j["commit_cpu_us"] + 1,
              "commit split %r" % j)
        # a body of a quarter MB and more cannot come with the headers:
        # it is read straight into the zone, in at least one read, and the
        # read takes time
        check(isinstance(j.get("body_reads"), int) and
              isinstance(j.get("body_us"), int) and
              (n < 5000 or (j["body_reads"] >= 1 and j["body_us"] > 0)),
              "body read %r" % j)
        s = env.converged()
        for w in s["workers"]:
            check(w["updated_us"] // 1000 == w["updated_ms"],
                  "updated_us %r" % w)
        for _ in range(4):  # fresh connections: either worker
            r = request(env.port, "GET", "/big%d/x" % (n - 1))
            check(r.status == 200 and r.json()["id"] == "B",
                  "%d routes: last route answered %d" % (n, r.status))
            r = request(env.port, "GET", "/big%d/x" % n)
            check(r.status == 404, "%d routes: /big%d answered %d"
                  % (n, n, r.status))
            r = request(env.port, "GET", "/live/x")
            check(r.echo_header("X-Route-Version") == str(version),
                  "version %s served" % r.echo_header("X-Route-Version"))
    before = env.converged()
    bad = json.loads(big(205, 7000))
    bad["routes"][-1]["predicates"] = ["Paht=/typo"]
    r = env.put("routes/live", json.dumps(bad))
    check(r.status == 400, "broken document: %d" % r.status)
    check(r.json()["error"]["path"] == "routes[7000].predicates[0]",
          "error %r" % r.json())
    after = env.converged()
    check(after["generation"] == before["generation"] and
          {w["fingerprint"] for w in after["workers"]} ==
          {w["fingerprint"] for w in before["workers"]},
          "the broken document changed something")
    for _ in range(4):
        r = request(env.port, "GET", "/live/x")
        check(r.echo_header("X-Route-Version") == "204",
              "after the broken document: %s"
              % r.echo_header("X-Route-Version"))
    check(env.put("routes/live", env.live_routes(0)).status == 200,
          "restore version 0")
    r = request(env.port, "GET", "/big0/x")
    check(r.status == 404, "big routes left: %d" % r.status)


def raw_http(port, parts, pause=0.0, expect_continue=False):
    """Send parts (bytes) on one fresh connection, pausing between them;
    with expect_continue, wait for the interim 100 answer after the first
    part. Returns everything nginx sent until it closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
        got = b""
        for i, part in enumerate(parts):
            if i and pause:
                time.sleep(pause)
            s.sendall(part)
            if i == 0 and expect_continue:
                while b"\r\n\r\n" not in got:
                    chunk = s.recv(65536)
                    check(chunk, "closed before 100 Continue: %r" % got)
                    got += chunk
                check(got.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"),
                      "no 100 Continue: %r" % got[:200])
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return got
            got += chunk


def put_head(path, length, extra=b""):
    return (b"PUT /switchyard/%s HTTP/1.1\r\nHost: t\r\n"
            b"Content-Length: %d\r\n%s" % (path.encode(), length, extra))


def test_body_read_into_the_zone(env):
    """The admin location reads a body of known length straight into the
    zone: with Expect: 100-continue, in pieces with pauses, followed by a
    pipelined request on the same connection; bodies cut short free their
    room (more of them than the zone holds); a body over a quarter of the
    zone goes through nginx's own reader (a temporary file here)."""
    body = json.dumps(env.live_routes(301)).encode()
    out = raw_http(env.port, [put_head("routes/live", len(body),
                                       b"Expect: 100-continue\r\n"
                                       b"Connection: close\r\n\r\n"),
                              body], expect_continue=True)
    check(out.split(b"\r\n\r\n", 1)[1].startswith(b"HTTP/1.1 200 "),
          "after 100 Continue: %r" % out[:300])
    env.converged()
    r = request(env.port, "GET", "/live/x")
    check(r.echo_header("X-Route-Version") == "301", "version 301 served")

    body = json.dumps(env.live_routes(302)).encode()
    half = len(body) // 2
    out = raw_http(env.port, [put_head("routes/live", len(body),
                                       b"\r\n") + body[:10],
                              body[10:half], body[half:] +
                              b"GET /live/x HTTP/1.1\r\nHost: t\r\n"
                              b"Connection: close\r\n\r\n"], pause=0.2)
    check(out.startswith(b"HTTP/1.1 200") and out.count(b"HTTP/1.1 200") == 2,
          "slow PUT + pipelined GET: %r" % out[:600])
    check(b"X-Route-Version" in out and b"302" in out.split(
        b"HTTP/1.1 200", 2)[2], "pipelined GET: %r" % out[-600:])

    before = env.converged()
    declared = 1536 * 1024  # under a quarter of the 8m zone
    for _ in range(12):  # 18 MB of room in all if it leaked
        with socket.create_connection(("127.0.0.1", env.port),
                                      timeout=TIMEOUT) as c:
            c.sendall(put_head("routes/live", declared, b"\r\n") +
                      b'{"version": "x", "routes": [' + b" " * 1000)
    after = env.converged()
    check(after["generation"] == before["generation"] and
          after["documents"] == before["documents"],
          "cut bodies changed the zone: %r" % after["documents"])
    # the workers free the room when they see the connections close
    deadline = time.time() + TIMEOUT
    while True:
        r = env.put("routes/live", env.live_routes(303))
        if r.status != 507 or time.time() > deadline:
            break
        time.sleep(0.05)
    check(r.status == 200, "after cut bodies: %d %r" % (r.status, r.body))

    doc = env.live_routes(304)
    doc["routes"][0]["metadata"] = {"pad%d" % i: "x" * 60000
                                    for i in range(40)}  # 2.4 MB
    r = env.put("routes/live", doc)
    check(r.status == 200, "2.4 MB through nginx's reader: %d %r"
          % (r.status, r.body[:300]))
    env.converged()
    r = request(env.port, "GET", "/live/x")
    check(r.echo_header("X-Route-Version") == "304", "version 304 served")
    check(env.put("routes/live", env.live_routes(0)).status == 200,
          "restore version 0")


def test_conflicting_changes_at_once(env):
    """Two PUTs of the same route id into two sources, sent at the same
    time (so usually to both workers): one change at a time is committed
    and stored, so one is answered 200 and the other 400 (the id is taken),
    and no worker fails to apply anything."""
    b = "http://127.0.0.1:%d" % env.pb
    for k in range(10):
        rid = "dup%d" % k
        route = {"id": rid, "uri": b, "predicates": ["Path=/%s/**" % rid]}
        out = {}
        go = threading.Barrier(2)

        def send(src):
            go.wait()
            out[src] = env.put("routes/%s/%s" % (src, rid), route)

        threads = [threading.Thread(target=send, args=(src,))
                   for src in ("main", "live")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=2 * TIMEOUT)
        codes = sorted(r.status for r in out.values())
        check(codes == [200, 400], "round %d: %r" % (k, {
            src: (r.status, r.body[:200]) for src, r in out.items()}))
        loser = [r for r in out.values() if r.status == 400][0]
        check(loser.json()["error"]["code"] == -6,
              "not a duplicate id: %r" % loser.body)
        winner = [src for src, r in out.items() if r.status == 200][0]
        r = request(env.port, "DELETE",
                    "/switchyard/routes/%s/%s" % (winner, rid))
        check(r.status == 200, "remove %s: %d" % (rid, r.status))
    s = env.converged()
    check(all(w["error"] is None for w in s["workers"]), repr(s["workers"]))


def test_full_zone_changes_nothing(env):
    """A valid document larger than the zone (8m) is refused with 507."""
    before = env.converged()
    doc = env.live_routes(7)
    doc["routes"][0]["metadata"] = {"pad%d" % i: "x" * 60000
                                    for i in range(160)}  # 9.6 MB
    r = env.put("routes/live", doc)
    check(r.status == 507, "status %d %r" % (r.status, r.body[:200]))
    after = env.converged()
    check(after["generation"] == before["generation"], "generation moved")
    r = request(env.port, "GET", "/live/x")
    check(r.echo_header("X-Route-Version") == "0",
          "live route changed: %d %r" % (r.status, r.body[:300]))


def test_broken_file_fails_configuration_test(env):
    d = env.dir
    with open(os.path.join(d, "broken.json"), "w") as f:
        json.dump([{"id": "x", "uri": "http://127.0.0.1:1",
                    "predicates": ["Path=/x", "Paht=/typo"]}], f)
    with open(os.path.join(d, "nginx.conf")) as f:
        conf = f.read()
    conf = conf.replace("live.json;", "live.json;\n    switchyard_routes "
                        + d + "/broken.json;")
    with open(os.path.join(d, "broken.conf"), "w") as f:
        f.write(conf)
    p = subprocess.run([NGINX, "-t", "-p", d, "-c", d + "/broken.conf"],
                       capture_output=True, text=True, timeout=10)
    check(p.returncode != 0, "nginx -t accepted a broken routes file")
    check("broken.json" in p.stderr and "[0].predicates[1]" in p.stderr,
          "error not located: %r" % p.stderr[-500:])


def test_route_changes_under_load(env):
    """200 PUTs while 4 clients request the changing route: no request
    fails, and each response comes from the version acknowledged before
    the request started, or a later one."""
    acked = [0]
    stop = threading.Event()
    failures, stale, counts = [], [], [0]
    lock = threading.Lock()

    def client():
        while not stop.is_set():
            start = acked[0]
            try:
                r = request(env.port, "GET", "/live/x")
                v = r.echo_header("X-Route-Version") if r.status == 200 \
                    else None
            except Exception as e:  # noqa: BLE001 - any failure counts
                with lock:
                    failures.append(repr(e))
                continue
            with lock:
                counts[0] += 1
                if r.status != 200 or v is None:
                    failures.append("status %d" % r.status)
                elif int(v) < start:
                    stale.append((start, int(v)))
                elif r.json()["id"] != ("A" if int(v) % 2 or not int(v)
                                        else "B"):
                    failures.append("version %s from backend %s"
                                    % (v, r.json()["id"]))

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        for k in range(1, 201):
            backend = env.pa if k % 2 else env.pb
            r = env.put("routes/live", env.live_routes(k, backend))
            check(r.status == 200, "PUT %d: %d %r" % (k, r.status, r.body))
            acked[0] = k
            time.sleep(0.005)
        time.sleep(0.2)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
    check(counts[0] > 200, "only %d requests completed" % counts[0])
    check(not failures, "%d failed requests, e.g. %r" % (len(failures),
                                                         failures[:3]))
    check(not stale, "%d stale responses (acked, served), e.g. %r"
          % (len(stale), stale[:3]))
    s = env.converged()
    r = request(env.port, "GET", "/live/x")
    check(r.echo_header("X-Route-Version") == "200", "final version")
    print("# %d requests during 200 route changes; generation %d"
          % (counts[0], s["generation"]))


def test_workers_converge(env):
    s = env.converged()
    pids = {w["pid"] for w in s["workers"]}
    check(len(pids) == 2, "worker pids %r" % pids)
    check(all(w["error"] is None for w in s["workers"]), repr(s))
    src = {x["name"]: x for x in s["sources"]}
    check(list(src) == ["main", "live"], "sources %r" % list(src))
    check(src["live"]["version"] == "200" and src["live"]["routes"] == 1,
          "live source %r" % src["live"])
    check(src["main"]["version"] == "1" and src["main"]["routes"] == 9,
          "main source %r" % src["main"])
    r = request(env.port, "GET", "/switchyard/metrics")
    check(r.status == 200 and r.header("Content-Type").startswith(
        "text/plain"), "metrics: %d" % r.status)
    lines = r.body.decode().splitlines()
    routes = [ln for ln in lines if ln.startswith("switchyard_routes ")]
    check(routes and routes[0].split()[1] == "10", "routes gauge %r" % routes)


def test_respawned_worker_catches_up(env):
    """A worker started by the master after a crash builds its router from
    the files and the zone's documents: it reaches its peer's fingerprint."""
    before = env.converged()
    victim = before["workers"][0]["pid"]
    os.kill(victim, signal.SIGKILL)
    wait_respawned(env, victim)
    after = env.converged()
    check({w["fingerprint"] for w in after["workers"]} ==
          {before["workers"][1]["fingerprint"]}, "fingerprints %r -> %r"
          % (before["workers"], after["workers"]))
    r = request(env.port, "GET", "/live/x")
    check(r.echo_header("X-Route-Version") == "200", "live version")


def test_reload_rereads_files(env):
    old_pids = {w["pid"] for w in env.converged()["workers"]}
    env.write("live.json", env.live_routes(1000))
    env.reload()
    env.wait_live_version(1000, "reload not served")
    deadline = time.time() + 10
    # old workers keep their configuration until they exit
    while any(os.path.exists("/proc/%d" % p) for p in old_pids):
        check(time.time() < deadline, "old workers did not exit")
        time.sleep(0.05)
    s = env.converged(timeout=10)
    check(not old_pids & {w["pid"] for w in s["workers"]}, "old pids")
    # the changes stored for the source whose file changed are dropped;
    # the others (instances, removals from "main") stay
    check(not [d for d in s["documents"] if d.get("source") == "live"],
          "changes of a changed file kept across reload: %r" % s["documents"])
    check([d for d in s["documents"] if d["name"] == "shop"],
          "changes of an unchanged file dropped at reload: %r"
          % s["documents"])
    check("stored routes \"live\" (source \"live\") dropped" in
          env.error_log(), "drop not logged at notice")
    r = env.put("routes/live", env.live_routes(1001))
    check(r.status == 200, "PUT after reload: %d" % r.status)
    r = request(env.port, "GET", "/live/x")
    check(r.echo_header("X-Route-Version") == "1001", "PUT after reload")
    env.converged()


def reload_and_wait(env):
    """nginx -s reload, then wait for the old workers to exit (one still
    draining answers an admin change 503); the converged status."""
    old = {w["pid"] for w in env.status()["workers"]}
    env.reload()
    deadline = time.time() + 10
    while any(os.path.exists("/proc/%d" % p) for p in old):
        check(time.time() < deadline, "old workers still running")
        time.sleep(0.05)
    return env.converged(timeout=10)


def test_zone_resized_at_reload_keeps_changes(env):
    """A reload that changes switchyard_zone makes nginx map a new zone
    (it keeps a zone only at the same size): the old one hands its stored
    changes over (no state file here), logged, and the old workers stop
    taking changes."""
    r = env.put("routes/live/resized",
                {"id": "resized", "uri": "http://127.0.0.1:%d" % env.pb,
                 "predicates": ["Path=/resized"]})
    check(r.status == 200, "PUT answered %d %r" % (r.status, r.body))
    path = os.path.join(env.dir, "nginx.conf")
    for old, new in (("8m", "12m"), ("12m", "8m")):
        with open(path) as f:
            conf = f.read()
        check("switchyard_zone %s;" % old in conf, "zone %s" % old)
        with open(path, "w") as f:
            f.write(conf.replace("switchyard_zone %s;" % old,
                                 "switchyard_zone %s;" % new))
        s = reload_and_wait(env)
        check([d for d in s["documents"] if d["name"] == "resized"],
              "stored change lost with the zone's size %s -> %s: %r"
              % (old, new, s["documents"]))
        r = request(env.port, "GET", "/resized")
        check(r.status == 200 and r.json()["id"] == "B",
              "/resized answered %d after %s -> %s" % (r.status, old, new))
    check(re.search(r"stored documents of zone \"switchyard\" \(\d+ "
                    r"bytes\) handed over", env.error_log()),
          "hand-over not logged")


TESTS = [
    test_routes_and_request_filters,
    test_setpath_and_response_header,
    test_unfiltered_headers_sent_as_they_came,
    test_path_normalised_before_matching,
    test_preserve_host_header,
    test_gray_release_by_version_header,
    test_host_predicate_ignores_port,
    test_no_route_is_404,
    test_method_mismatch_is_405_with_allow,
    test_redirect_answered_by_module,
    test_set_status,
    test_noop_route_answered_by_the_module,
    test_broken_document_rejected,
    test_instances_put,
    test_single_route_changes,
    test_names_without_a_resolver,
    test_passive_health_ejects_a_failing_instance,
    test_other_worker_woken_by_a_change,
    test_large_documents_in_turn,
    test_body_read_into_the_zone,
    test_conflicting_changes_at_once,
    test_full_zone_changes_nothing,
    test_broken_file_fails_configuration_test,
    test_route_changes_under_load,
    test_workers_converge,
    test_respawned_worker_catches_up,
    test_reload_rereads_files,
    test_zone_resized_at_reload_keeps_changes,
]


def run(tests, make_env):
    """TAP over `tests`, each given the one environment make_env() starts;
    everything is stopped at the end, also on failure."""
    if len(sys.argv) == 4 and sys.argv[1] == "--backend":
        run_backend(sys.argv[2], int(sys.argv[3]))
        return 0
    # meson's timeout sends SIGTERM: unwind through the cleanup below
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    print("1..%d" % (len(tests) + 1))
    if not os.path.isfile(MODULE):
        for i, t in enumerate(tests, 1):
            print("not ok %d - %s # module not found: %r" % (i, t.__name__,
                                                            MODULE))
        print("not ok %d - no worker crashed # module not found"
              % (len(tests) + 1))
        return 1
    env = make_env()
    failed = 0
    try:
        env.start()
        for i, t in enumerate(tests, 1):
            t0 = time.time()
            try:
                t(env)
                print("ok %d - %s (%.2f s)" % (i, t.__name__,
                                               time.time() - t0))
            except Exception:  # noqa: BLE001 - reported as a TAP failure
                failed += 1
                print("not ok %d - %s" % (i, t.__name__))
                for line in traceback.format_exc().splitlines():
                    print("# " + line)
            sys.stdout.flush()
        bad = crashed(env)
        if bad:
            failed += 1
            print("not ok %d - no worker crashed" % (len(tests) + 1))
            for line in bad[:20]:
                print("# " + line.rstrip())
        else:
            print("ok %d - no worker crashed" % (len(tests) + 1))
    except Exception:  # noqa: BLE001 - setup failure fails everything
        for line in traceback.format_exc().splitlines():
            print("# " + line)
        failed = len(tests) + 1
    finally:
        env.stop()
        if failed:
            for line in env.error_log().splitlines():
                print("# nginx: " + line)
        shutil.rmtree(env.dir, ignore_errors=True)
    return 1 if failed else 0


def main():
    return run(TESTS, Env)


if __name__ == "__main__":
    sys.exit(main())
