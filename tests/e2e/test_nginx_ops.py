#!/usr/bin/env python3
"""End-to-end tests of ngx_http_switchyard_module as an operator runs it
(TAP for meson, suite e2e): every $switchyard_* variable in an http-level
access log (admin requests included), configurations that `nginx -t`
refuses and reloads that fail, and admin changes that survive a reload, a
failed reload and a restart through the state file. Same fixture as
test_nginx_module.py (Debian's nginx, 2 workers, two backends, loopback).
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402
import test_nginx_module as base  # noqa: E402
from test_nginx_module import NGINX, check, request  # noqa: E402

VARS = ["route", "upstream", "uri", "host", "instance", "version"]


class OpsEnv(base.Env):
    def __init__(self):
        super().__init__()
        fmt = "|".join("$switchyard_" + v for v in VARS)
        # the workers (nobody under a root master) write the state file
        os.mkdir(os.path.join(self.dir, "state"))
        os.chmod(os.path.join(self.dir, "state"), 0o777)
        self.http_extra = (
            "log_format sy '$request_uri %s';\n"
            "    access_log %s/access.log sy;\n"
            "    switchyard_state %s/state/switchyard.state;" % (fmt, self.dir, self.dir))

    def conf(self):
        with open(os.path.join(self.dir, "nginx.conf")) as f:
            return f.read()

    def reload_with(self, conf):
        """Write conf as nginx.conf and send SIGHUP to the master (as
        `kill -HUP` does: `nginx -s reload` would refuse a configuration
        that fails `nginx -t` before signalling); the old one is
        returned."""
        old = self.conf()
        with open(os.path.join(self.dir, "nginx.conf"), "w") as f:
            f.write(conf)
        os.kill(self.nginx.pid, signal.SIGHUP)
        return old

    def stop(self):
        self.stop_masters()
        super().stop()

    def stop_masters(self):
        # the daemonized masters of the binary upgrade test are not our
        # children: stop them by their pid files
        for name in ("nginx.pid.oldbin", "nginx.pid"):
            try:
                with open(os.path.join(self.dir, name)) as f:
                    pid = int(f.read().strip())
                os.kill(pid, signal.SIGTERM)
                deadline = time.time() + 5
                while os.path.exists("/proc/%d" % pid) and \
                        time.time() < deadline:
                    time.sleep(0.05)
            except (OSError, ValueError):
                pass
        self.stop_nginx()

    def worker_pids(self):
        return {w["pid"] for w in self.status()["workers"]}


def route(ident, port, path):
    return {"id": ident, "uri": "http://127.0.0.1:%d" % port,
            "predicates": ["Path=%s" % path]}


def served(env, path, timeout=5.0):
    deadline = time.time() + timeout
    while True:
        r = request(env.port, "GET", path)
        if r.status == 200:
            return r
        check(time.time() < deadline, "%s answered %d" % (path, r.status))
        time.sleep(0.05)


def no_crash(env):
    check("exited on signal" not in env.error_log(),
          "a worker crashed: %s" % env.error_log()[-1500:])


def test_variables_logged_for_admin_requests(env):
    """Every variable is logged for admin GETs and PUTs (their context is
    not a routing context), for routed and unrouted requests."""
    for _ in range(4):  # both workers answer some
        check(env.status()["generation"] >= 0, "status")
        check(request(env.port, "GET", "/switchyard/metrics").status == 200,
              "metrics")
        check(request(env.port, "GET", "/a/x").status == 200, "routed")
        check(request(env.port, "GET", "/nowhere").status == 404, "404")
    r = env.put("routes/live/logged", route("logged", env.pa, "/logged"))
    check(r.status == 200, "PUT answered %d %r" % (r.status, r.body))
    r = env.put("routes/live/bad", b"{not json")
    check(r.status == 400, "bad PUT answered %d" % r.status)
    served(env, "/logged")
    time.sleep(0.2)
    no_crash(env)
    with open(os.path.join(env.dir, "access.log")) as f:
        lines = f.read().splitlines()
    admin = [l for l in lines if l.startswith("/switchyard/")]
    check(len(admin) >= 10, "admin requests not logged: %r" % lines[-5:])
    check(all(l.split(" ", 1)[1] == "|".join(["-"] * 6) for l in admin),
          "an admin request logged a routing variable: %r" % admin[:3])
    routed = [l for l in lines if l.startswith("/a/x ")]
    check(routed and routed[0].split(" ", 1)[1].startswith("a|http://"),
          "routed request's variables: %r" % routed[:1])


def test_variables_logged_for_refused_requests(env):
    """Requests nginx refuses before any location (a bad request line, too
    big a header, HTTP/0.9, a bad Host) are logged with every variable
    empty, and no worker crashes."""
    import socket
    raws = [b"GET /a/x HTTP/1.1\r\nNo colon\r\n\r\n",
            b"GET /a/x HTTP/1.1\r\nHost: a\r\nX-Big: " + b"b" * 20000 +
            b"\r\n\r\n",
            b"GET /a/x\r\n",
            b"GET /a/x HTTP/1.1\r\nHost: ../..\r\n\r\n",
            b"GET a/x HTTP/1.1\r\nHost: a\r\n\r\n"]
    for raw in raws:
        with socket.create_connection(("127.0.0.1", env.port), 5) as s:
            s.sendall(raw)
            try:
                s.recv(200)
            except OSError:
                pass
    time.sleep(0.3)
    no_crash(env)
    with open(os.path.join(env.dir, "access.log")) as f:
        lines = f.read().splitlines()
    none = " " + "|".join(["-"] * 6)
    empty = [l for l in lines[-len(raws):] if l.endswith(none)]
    check(len(empty) >= 4, "refused requests not logged empty: %r"
          % lines[-len(raws):])
    check(request(env.port, "GET", "/a/x").status == 200, "still routing")


def test_duplicate_id_across_files_refused_by_test_and_reload(env):
    """The same route id in two files: nginx -t fails naming the file and
    the id; a reload with it fails and the old workers keep serving."""
    dup = os.path.join(env.dir, "dup.json")
    with open(dup, "w") as f:
        import json
        json.dump({"version": "1", "routes": [route("a", env.pb, "/dup")]}, f)
    conf = env.conf().replace(
        "live.json;", "live.json;\n    switchyard_routes %s;" % dup)
    rc, err = env.test_conf(conf)
    check(rc != 0, "nginx -t accepted a duplicate route id")
    check("dup.json" in err and "'a'" in err and "main" in err,
          "error not located: %r" % err[-400:])
    pids = env.worker_pids()
    old = env.reload_with(conf)
    try:
        time.sleep(0.5)
        check(env.worker_pids() == pids, "workers changed by a bad reload")
        served(env, "/a/x")
        check("dup.json" in env.error_log(), "reload error not logged")
    finally:
        with open(os.path.join(env.dir, "nginx.conf"), "w") as f:
            f.write(old)
    no_crash(env)


def test_small_zone_refused_naming_the_zone(env):
    """switchyard_zone below what the zone needs fails nginx -t, naming
    the zone and the least size."""
    rc, err = env.test_conf(env.conf().replace("switchyard_zone 8m;",
                                               "switchyard_zone 32k;"))
    check(rc != 0 and 'zone "switchyard"' in err and "at least" in err,
          "nginx -t: %r" % err[-300:])


def test_eject_time_out_of_bounds_refused_at_its_line(env):
    """switchyard_eject_time 0 (or over 1h) fails nginx -t located at the
    directive's own line (it was reported at the end of the http
    block)."""
    for bad in ("0", "2h"):
        conf = env.conf().replace(
            "switchyard_zone 8m;",
            "switchyard_zone 8m;\n    switchyard_eject_time %s;" % bad)
        line = conf[:conf.index("switchyard_eject_time")].count("\n") + 1
        rc, err = env.test_conf(conf)
        check(rc != 0 and "switchyard_eject_time" in err and
              "1ms to 1h" in err and "test.conf:%d" % line in err,
              "%s: %d %r" % (bad, rc, err[-300:]))


def test_admin_in_a_location_without_prefix_refused(env):
    """switchyard_admin in a regex, exact or named location fails nginx -t
    at its line (the API's paths follow the location's prefix: every
    request there was a 404); a ^~ prefix location passes."""
    admin = "location /switchyard/ {"
    for loc, ok in (("location ~ ^/adm/ {", False),
                    ("location = /adm {", False),
                    ("location @adm {", False),
                    ("location ^~ /adm/ {", True)):
        conf = env.conf().replace(admin, loc + " switchyard_admin; }\n        "
                                  + admin)
        line = conf[:conf.index(loc)].count("\n") + 1
        rc, err = env.test_conf(conf)
        if ok:
            check(rc == 0, "%s refused: %s" % (loc, err[-300:]))
        else:
            check(rc != 0 and "needs a prefix location" in err and
                  "test.conf:%d" % line in err,
                  "%s: %d %r" % (loc, rc, err[-300:]))


def until_not_503(call, timeout=10.0):
    """call() again while it answers 503: the reloads of the tests before
    may still be retiring workers ("the configuration is being reloaded:
    retry")."""
    deadline = time.time() + timeout
    while True:
        r = call()
        if r.status != 503 or time.time() > deadline:
            return r
        time.sleep(0.1)


def test_stored_change_a_file_now_conflicts_with_said_by_test(env):
    """A route PUT into one source, then defined by another source's file:
    `nginx -t` (which reads the state file) says the stored change would
    not be applied by the new workers, with the library's error, and
    passes (the workers start and serve the files)."""
    r = until_not_503(lambda: env.put("routes/live/clash",
                                      route("clash", env.pa, "/clash")))
    check(r.status == 200, "PUT answered %d %r" % (r.status, r.body))
    main = env.main_routes()
    main["routes"].append(route("clash", env.pb, "/clash2"))
    env.write("main.json", main)
    try:
        rc, err = env.test_conf(env.conf())
    finally:
        env.write("main.json", env.main_routes())
    check(rc == 0, "nginx -t failed: %s" % err[-400:])
    check('stored route "clash" (generation' in err and "not applied" in err
          and "'clash' is already defined by source 'main'" in err and
          "would not be applied by the workers" in err,
          "nginx -t did not say it: %s" % err[-600:])
    r = until_not_503(lambda: request(env.port, "DELETE",
                                      "/switchyard/routes/live/clash"))
    check(r.status == 200, "DELETE answered %d" % r.status)


def test_unwritable_state_file_said_at_start(env):
    """A switchyard_state whose directory the workers cannot write is
    logged at error when the workers start (a reload here), naming the
    directory, not first found out at a PUT; the fixture's own, writable,
    is not."""
    said = "the worker processes cannot write its directory"
    check(said not in env.error_log(), "a writable state file reported")
    ro = os.path.join(env.dir, "rostate")
    os.mkdir(ro)
    os.chmod(ro, 0o555)
    conf = env.conf().replace("%s/state/switchyard.state" % env.dir,
                              "%s/switchyard.state" % ro)
    check(conf != env.conf(), "fixture changed")
    pids = env.worker_pids()
    old = env.reload_with(conf)
    try:
        deadline = time.time() + 10
        while said not in env.error_log():
            check(time.time() < deadline, "not said at start: %s"
                  % env.error_log()[-600:])
            time.sleep(0.05)
        check('switchyard_state "%s/switchyard.state": %s "%s": admin '
              'changes will not survive a restart' % (ro, said, ro)
              in env.error_log(), "not located: %s" % env.error_log()[-600:])
    finally:
        env.reload_with(old)
    deadline = time.time() + 10
    while env.worker_pids() & pids or len(env.worker_pids()) != 2:
        check(time.time() < deadline, "workers not replaced")
        time.sleep(0.05)


def test_failed_reload_keeps_admin_changes(env):
    """A reload that fails on bind() leaves the stored changes in place
    and PUTs keep working."""
    r = env.put("routes/live/kept", route("kept", env.pa, "/kept"))
    check(r.status == 200, "PUT answered %d" % r.status)
    served(env, "/kept")
    busy = free_port()
    import socket
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 0)
    holder.bind(("127.0.0.1", busy))
    holder.listen(1)
    conf = env.conf().replace(
        "listen 127.0.0.1:%d;" % env.port,
        "listen 127.0.0.1:%d;\n        listen 127.0.0.1:%d;" % (env.port,
                                                            busy))
    pids = env.worker_pids()
    old = env.reload_with(conf)
    try:
        deadline = time.time() + 5
        while "bind() to 127.0.0.1:%d failed" % busy not in env.error_log():
            check(time.time() < deadline, "the reload did not fail on bind")
            time.sleep(0.05)
    finally:
        holder.close()
        with open(os.path.join(env.dir, "nginx.conf"), "w") as f:
            f.write(old)
    check(env.worker_pids() == pids, "workers changed by a failed reload")
    served(env, "/kept")
    names = [d["name"] for d in env.status()["documents"]]
    check("kept" in names, "stored change lost: %r" % names)
    r = env.put("routes/live/after", route("after", env.pb, "/after"))
    check(r.status == 200, "PUT after a failed reload: %d %r"
          % (r.status, r.body))
    served(env, "/after")


def test_put_survives_reload(env):
    """A route PUT is still served after nginx -s reload, and /status says
    the source's live document came from the admin location."""
    r = env.put("routes/live/reloaded", route("reloaded", env.pa,
                                              "/reloaded"))
    check(r.status == 200, "PUT answered %d" % r.status)
    pids = env.worker_pids()
    env.reload()
    deadline = time.time() + 10
    while env.worker_pids() & pids:
        check(time.time() < deadline, "no new workers")
        time.sleep(0.05)
    served(env, "/reloaded")
    s = env.converged()
    live = [x for x in s["sources"] if x["name"] == "live"]
    check(live and live[0]["origin"] == "admin", "origin: %r" % live)
    main = [x for x in s["sources"] if x["name"] == "main"]
    check(main and main[0]["origin"] in ("file", "admin"), "main: %r" % main)


def test_delete_on_a_draining_worker_is_503(env):
    """A DELETE that a worker replaced by a reload (draining, its
    listening sockets closed) answers is a 503 to retry, as a PUT there
    is: that worker no longer follows the zone, so a route the new workers
    stored since is not in its router, and it answered 404 "no such
    route" for a route that exists (nginx_ops failed so under load, the
    old workers still accepting the test's next DELETE). The DELETE is
    held on an old worker: pipelined behind a GET on one connection, its
    head cut short, so the worker is in the middle of it when the reload
    comes, and it is finished after the new workers stored the route."""
    import socket
    s = socket.create_connection(("127.0.0.1", env.port), 10)
    try:
        s.sendall(b"GET /switchyard/status HTTP/1.1\r\nHost: a\r\n\r\n"
                  b"DELETE /switchyard/routes/live/drained HTTP/1.1\r\n"
                  b"Host: a\r\n")
        got = b""
        while b"\r\n\r\n" not in got:  # the status answered
            part = s.recv(65536)
            check(part, "connection closed: %r" % got[:200])
            got += part
        head, _, rest = got.partition(b"\r\n\r\n")
        check(head.startswith(b"HTTP/1.1 200"), "status: %r" % head[:100])
        clen = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
        while len(rest) < clen:
            part = s.recv(65536)
            check(part, "status cut short")
            rest += part
        epoch = base.json.loads(rest[:clen])["epoch"]
        env.reload()
        deadline = time.time() + 10
        while env.status()["epoch"] == epoch:
            check(time.time() < deadline, "the reload did not take")
            time.sleep(0.05)
        r = until_not_503(lambda: env.put("routes/live/drained", route(
            "drained", env.pa, "/drained")))
        check(r.status == 200, "PUT answered %d %r" % (r.status, r.body))
        s.sendall(b"\r\n")
        got = b""
        while True:
            part = s.recv(65536)
            if not part:
                break
            got += part
        check(got.startswith(b"HTTP/1.1 503") and b"being reloaded" in got,
              "the draining worker's DELETE: %r" % got[:300])
    finally:
        s.close()
    r = until_not_503(lambda: request(env.port, "DELETE",
                                      "/switchyard/routes/live/drained"))
    check(r.status == 200, "DELETE answered %d %r" % (r.status, r.body))
    deadline = time.time() + 10
    while request(env.port, "GET", "/drained").status != 404:
        check(time.time() < deadline, "a deleted route still served")
        time.sleep(0.05)


def test_state_file_survives_restart(env):
    """A stop and a start (as a binary upgrade starts a new zone): the
    stored changes come back from switchyard_state."""
    env.stop_nginx()
    env.launch()
    served(env, "/reloaded")
    served(env, "/kept")
    s = env.converged()
    origins = {d["name"]: d["origin"] for d in s["documents"]}
    check(origins.get("reloaded") == "state file", "origins %r" % origins)
    check(re.search(r"\d+ stored documents read from", env.error_log()),
          "state read not logged")


def test_changed_file_wins_over_stored_changes(env):
    """The operator edits a file: at reload its source comes from the file
    and the dropped admin changes are logged at notice. `nginx -t` before
    the reload (it reads the state file) says they will be dropped, and
    drops nothing."""
    env.write("live.json", env.live_routes(77))
    state = os.path.join(env.dir, "state", "switchyard.state")
    with open(state, "rb") as f:
        before = f.read()
    rc, err = env.test_conf(env.conf())
    check(rc == 0, "nginx -t: %s" % err[-300:])
    check('stored route "reloaded" (source "live") will be dropped when '
          'this configuration is loaded' in env.error_log(),
          "nginx -t did not say what the reload drops: %s"
          % env.error_log()[-600:])
    check('(source "live") dropped' not in env.error_log(),
          "nginx -t logged a drop it did not make: %s"
          % env.error_log()[-600:])
    with open(state, "rb") as f:
        check(f.read() == before, "nginx -t rewrote the state file")
    check(request(env.port, "GET", "/reloaded").status == 200,
          "nginx -t dropped a stored change")
    env.reload()
    env.wait_live_version(77, "file not taken")
    # (old workers may answer a moment longer)
    deadline = time.time() + 10
    while request(env.port, "GET", "/reloaded").status != 404:
        check(time.time() < deadline, "a dropped change still served")
        time.sleep(0.05)
    check('stored route "reloaded" (source "live") dropped' in
          env.error_log(), "drop not logged")
    s = env.converged()
    live = [x for x in s["sources"] if x["name"] == "live"]
    check(live[0]["origin"] == "file", "origin %r" % live)


def routed_by_all(env, path, want, what):
    """Every answer to `path` (30 connections: both workers answer some)
    comes from backend `want`."""
    got = set()
    for _ in range(30):
        r = request(env.port, "GET", path)
        check(r.status == 200, "%s: %s answered %d" % (what, path, r.status))
        got.add(r.json()["id"])
    check(got == {want}, "%s: %s routed to %r, not %s by every worker"
          % (what, path, sorted(got), want))


def respawn_one(env, what):
    """kill -9 one worker (the master starts another, which replays the
    zone): both workers converge on one fingerprint, the one they had."""
    before = env.converged()
    victim = before["workers"][0]["pid"]
    os.kill(victim, signal.SIGKILL)
    base.wait_respawned(env, victim)
    try:
        after = env.converged()
    except AssertionError as e:
        raise AssertionError("%s: %s" % (what, e))
    check({w["fingerprint"] for w in after["workers"]} ==
          {before["workers"][1]["fingerprint"]},
          "%s: fingerprints %r -> %r" % (what, before["workers"],
                                         after["workers"]))


def test_replayed_routes_keep_the_live_rank_order(env):
    """A worker that replays the zone (a respawn after kill -9, a restart
    from the state file) ranks a source's routes as the workers that took
    the changes live: an upserted route keeps its position on update and a
    removed then re-added one goes to the end, also a file's route. Two
    routes of equal order overlap (/ord/x; /live/x): the first in rank
    answers, A or B."""
    def put(ident, port, path, extra=None):
        doc = route(ident, port, path)
        doc.update(extra or {})
        r = env.put("routes/live/" + ident, doc)
        check(r.status == 200, "PUT %s: %d %r" % (ident, r.status, r.body))

    def delete(ident):
        r = request(env.port, "DELETE", "/switchyard/routes/live/" + ident)
        check(r.status == 200, "DELETE %s: %d %r" % (ident, r.status, r.body))

    # PUT A, PUT B, PUT A again (in place): [A, B]
    put("ordA", env.pa, "/ord/**")
    put("ordB", env.pb, "/ord/x")
    put("ordA", env.pa, "/ord/**", {"metadata": {"again": 1}})
    routed_by_all(env, "/ord/x", "A", "A, B, A live")
    respawn_one(env, "A, B, A")
    routed_by_all(env, "/ord/x", "A", "A, B, A after a respawn")
    # DELETE A, PUT A: [B, A]
    delete("ordA")
    put("ordA", env.pa, "/ord/**")
    routed_by_all(env, "/ord/x", "B", "A removed and put live")
    respawn_one(env, "A removed and put")
    routed_by_all(env, "/ord/x", "B", "A removed and put after a respawn")
    # the file's route "live" (/live/**, backend A): re-PUT in place, then
    # removed and put after an admin route of /live/x (backend B)
    with open(os.path.join(env.dir, "live.json")) as f:
        filed = json.load(f)["routes"][0]
    put("lx", env.pb, "/live/x")
    r = env.put("routes/live/live", filed)
    check(r.status == 200, "PUT live: %d %r" % (r.status, r.body))
    routed_by_all(env, "/live/x", "A", "file route put in place live")
    respawn_one(env, "file route put in place")
    routed_by_all(env, "/live/x", "A", "file route put in place, respawn")
    delete("live")
    r = env.put("routes/live/live", filed)
    check(r.status == 200, "PUT live: %d %r" % (r.status, r.body))
    routed_by_all(env, "/live/x", "B", "file route removed and put live")
    respawn_one(env, "file route removed and put")
    routed_by_all(env, "/live/x", "B", "file route removed and put, respawn")
    routed_by_all(env, "/ord/x", "B", "A removed and put, later respawn")
    fp = env.converged()["workers"][0]["fingerprint"]
    # a restart replays the state file
    env.stop_nginx()
    env.launch()
    s = env.converged(timeout=10)
    check({w["fingerprint"] for w in s["workers"]} == {fp},
          "fingerprints after a restart from the state file: %r"
          % s["workers"])
    routed_by_all(env, "/ord/x", "B", "A removed and put, restart")
    routed_by_all(env, "/live/x", "B", "file route removed and put, restart")
    # a state file written before the flags field (its header lines end at
    # the time) is read as it was: every document, route changes in file
    # order (the file's route upserted in its place in the file)
    env.stop_nginx()
    path = os.path.join(env.dir, "state", "switchyard.state")
    with open(path, "rb") as f:
        state = f.read()
    old, n = re.subn(rb"(?m)^(doc \d+ [0-9a-f]+ \d+ \d+ \d+ \d+) \d+$",
                     rb"\1", state)
    check(n >= 4, "state file without flags fields: %r" % state[:300])
    with open(path, "wb") as f:
        f.write(old)
    env.launch()
    env.converged(timeout=10)
    check("%d stored documents read from" % n in env.error_log(),
          "the former state file not read whole: %s" % env.error_log()[-800:])
    routed_by_all(env, "/ord/x", "B", "A removed and put, former state file")
    routed_by_all(env, "/live/x", "A", "file route put, former state file")
    # the other tests' routes
    for ident in ("ordA", "ordB", "lx"):
        delete(ident)
    check(not base.crashed(env), "a worker crashed: %r" % base.crashed(env))


def test_unrun_filters_refused_with_location(env):
    """What the module does not run is refused, located, by the library
    (the module declares what it runs: sy_host_profile("nginx")): by the
    admin location (400, logged at notice) and by nginx -t for a file."""
    bad = dict(route("relocate", env.pa, "/relocate"),
               filters=["AddRequestHeader=X-A,1",
                        "RewriteLocationResponseHeader"])
    r = env.put("routes/live/relocate", bad)
    check(r.status == 400, "RewriteLocationResponseHeader accepted: %d"
          % r.status)
    e = r.json()["error"]
    check(e["path"].endswith("filters[1]") and
          "RewriteLocationResponseHeader" in e["message"] and
          "nginx" in e["message"], "not located: %r" % e)
    doc = {"version": "9", "routes": [
        route("fine", env.pa, "/fine"),
        dict(route("cors", env.pa, "/cors"),
             metadata={"cors": {"allowedOrigins": "*"}})]}
    r = env.put("routes/live", doc)
    check(r.status == 400 and
          r.json()["error"]["path"].startswith("routes[1].metadata"),
          "cors accepted: %d %r" % (r.status, r.body))
    check(request(env.port, "GET", "/relocate").status == 404,
          "a refused route is served")
    check('route "relocate" (source "live") rejected' in env.error_log(),
          "rejection not logged")
    with open(os.path.join(env.dir, "cors.json"), "w") as f:
        import json
        json.dump([dict(route("cors", env.pa, "/cors"),
                        metadata={"cors": {"allowedOrigins": "*"}})], f)
    conf = env.conf().replace(
        "live.json;", "live.json;\n    switchyard_routes %s/cors.json;"
        % env.dir)
    rc, err = env.test_conf(conf)
    check(rc != 0 and "cors.json" in err and "[0]" in err and
          "cors" in err, "nginx -t: %r" % err[-300:])


def test_two_nginx_lose_no_state_write(env):
    """A second nginx (its own zone, as a binary upgrade's new master)
    shares the state file; PUTs to both at the same instant: every change
    is in the file (each write is made under the file's lock, on what the
    other wrote)."""
    import threading
    port2 = free_port()
    conf = env.conf().replace("127.0.0.1:%d;" % env.port,
                              "127.0.0.1:%d;" % port2)
    conf = conf.replace("nginx.pid;", "nginx2.pid;").replace(
        "error.log", "error2.log").replace("access.log", "access2.log")
    with open(os.path.join(env.dir, "nginx2.conf"), "w") as f:
        f.write(conf)
    p2 = subprocess.Popen([NGINX, "-p", env.dir, "-c", env.dir +
                           "/nginx2.conf", "-g", "daemon off;"])
    try:
        deadline = time.time() + 10
        while True:
            try:
                if request(port2, "GET", "/switchyard/status").status == 200:
                    break
            except OSError:
                pass
            check(time.time() < deadline, "second nginx not up")
            time.sleep(0.05)
        bad = []

        def puts(port, tag):
            for i in range(12):
                doc = route("%s%d" % (tag, i), env.pa, "/%s%d" % (tag, i))
                r = request(port, "PUT", "/switchyard/routes/live/%s%d"
                                 % (tag, i), body=base.json.dumps(doc))
                if r.status != 200:
                    bad.append(r.status)
        tags = [(port, "g%d%s" % (k, c)) for k, port in
                enumerate((env.port, port2)) for c in "xyzw"]
        ts = [threading.Thread(target=puts, args=a) for a in tags]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        check(not bad, "PUTs refused: %r" % bad)
        with open(os.path.join(env.dir, "state/switchyard.state"), "rb") as f:
            state = f.read()
        lost = [t + str(i) for _, t in tags for i in range(12)
                if b'"%s%d"' % (t.encode(), i) not in state]
        check(not lost, "changes lost from the state file: %r" % lost)
    finally:
        p2.terminate()
        p2.wait(timeout=10)


def test_state_file_follower_ranks_as_the_writer(env):
    """A second nginx sharing the state file (a binary upgrade's two
    generations) takes the first one's route changes from it as they were
    taken: an in-place PUT of an admin-added route keeps its position
    there too, a removed and re-added one goes to the end."""
    port2 = free_port()
    conf = env.conf().replace("127.0.0.1:%d;" % env.port,
                              "127.0.0.1:%d;" % port2)
    conf = conf.replace("nginx.pid;", "nginx3.pid;").replace(
        "error.log", "error3.log").replace("access.log", "access3.log")
    with open(os.path.join(env.dir, "nginx3.conf"), "w") as f:
        f.write(conf)
    p2 = subprocess.Popen([NGINX, "-p", env.dir, "-c", env.dir +
                           "/nginx3.conf", "-g", "daemon off;"])

    def status2():
        return request(port2, "GET", "/switchyard/status").json()

    def followed(what):
        """nginx 2 (its workers converged) reaches nginx 1's fingerprint."""
        want = env.converged()["workers"][0]["fingerprint"]
        deadline = time.time() + 10
        while True:
            try:
                s = status2()
                fps = {w["fingerprint"] for w in s["workers"]}
                if fps == {want} and s["converged"]:
                    return
            except OSError:
                s = None
            check(time.time() < deadline, "%s: nginx 2 at %r, nginx 1 at %s"
                  % (what, s and s["workers"], want))
            time.sleep(0.1)

    def put(ident, port, path, extra=None):
        doc = route(ident, port, path)
        doc.update(extra or {})
        r = env.put("routes/live/" + ident, doc)
        check(r.status == 200, "PUT %s: %d %r" % (ident, r.status, r.body))

    def answers(path, want, what):
        for port in (env.port, port2):
            for _ in range(10):
                r = request(port, "GET", path)
                check(r.status == 200 and r.json()["id"] == want,
                      "%s: %s on port %d answered %d %r, not %s"
                      % (what, path, port, r.status, r.body[:80], want))

    try:
        put("ordC", env.pa, "/ordc/**")
        put("ordD", env.pb, "/ordc/x")
        followed("C, D")
        put("ordC", env.pa, "/ordc/**", {"metadata": {"again": 1}})
        followed("C, D, C")
        answers("/ordc/x", "A", "C, D, C")
        r = request(env.port, "DELETE", "/switchyard/routes/live/ordC")
        check(r.status == 200, "DELETE ordC: %d" % r.status)
        put("ordC", env.pa, "/ordc/**")
        followed("C removed and put")
        answers("/ordc/x", "B", "C removed and put")
    finally:
        p2.terminate()
        p2.wait(timeout=10)
    for ident in ("ordC", "ordD"):
        r = request(env.port, "DELETE", "/switchyard/routes/live/" + ident)
        check(r.status == 200, "DELETE %s: %d" % (ident, r.status))


def test_binary_upgrade_keeps_changes(env):
    """USR2 starts a new master with a new zone (read from the state
    file); changes PUT while both generations serve, to either, reach the
    new workers (they follow the state file); after WINCH and QUIT of the
    old master every change is served."""
    pidfile = os.path.join(env.dir, "nginx.pid")
    # nginx ignores USR2 while the master's parent is the one it started
    # with: run it as a daemon, as an upgrade is done in production
    env.stop_nginx()
    subprocess.run([NGINX, "-p", env.dir, "-c", env.dir + "/nginx.conf"],
                   check=True, timeout=10, capture_output=True)
    served(env, "/a/x")
    with open(pidfile) as f:
        old = int(f.read().strip())
    os.kill(old, signal.SIGUSR2)
    deadline = time.time() + 10
    while True:
        try:
            with open(pidfile) as f:
                new = int(f.read().strip() or 0)
        except (OSError, ValueError):
            new = 0
        if new and new != old and os.path.exists(pidfile + ".oldbin"):
            break
        check(time.time() < deadline, "no new master after USR2")
        time.sleep(0.05)
    time.sleep(0.5)  # the new workers are up
    for i in range(6):
        r = env.put("routes/live/up%d" % i, route("up%d" % i, env.pa,
                                                  "/up%d" % i))
        check(r.status == 200, "PUT during the upgrade: %d %r"
              % (r.status, r.body))
    os.kill(old, signal.SIGWINCH)
    time.sleep(1.5)  # a follow period of the state file
    os.kill(old, signal.SIGQUIT)
    deadline = time.time() + 10
    while os.path.exists("/proc/%d" % old):
        check(time.time() < deadline, "the old master did not exit")
        time.sleep(0.05)
    for i in range(6):
        served(env, "/up%d" % i)


def test_binary_upgrade_without_state_file_warns(env):
    """Without switchyard_state the old nginx's zone is out of the new
    master's reach: the new master says so at warn (the changes are not
    lost silently)."""
    env.stop_masters()
    for name in ("nginx.pid", "nginx.pid.oldbin"):
        try:
            os.unlink(os.path.join(env.dir, name))
        except OSError:
            pass
    conf = re.sub(r"switchyard_state [^;]*;", "", env.conf())
    with open(os.path.join(env.dir, "nginx.conf"), "w") as f:
        f.write(conf)
    open(os.path.join(env.dir, "error.log"), "w").close()
    pidfile = os.path.join(env.dir, "nginx.pid")
    subprocess.run([NGINX, "-p", env.dir, "-c", env.dir + "/nginx.conf"],
                   check=True, timeout=10, capture_output=True)
    served(env, "/a/x")
    r = env.put("routes/live/stateless", route("stateless", env.pa,
                                               "/stateless"))
    check(r.status == 200, "PUT answered %d" % r.status)
    with open(pidfile) as f:
        old = int(f.read().strip())
    os.kill(old, signal.SIGUSR2)
    deadline = time.time() + 10
    while "without switchyard_state" not in env.error_log():
        check(time.time() < deadline, "no warning from the new master: %s"
              % env.error_log()[-800:])
        time.sleep(0.05)
    check("[warn]" in [l for l in env.error_log().splitlines()
                       if "without switchyard_state" in l][0],
          "not at warn")


def log_size(env):
    return os.path.getsize(os.path.join(env.dir, "error.log"))


def log_since(env, offset):
    with open(os.path.join(env.dir, "error.log"), "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def state_header(env):
    with open(os.path.join(env.dir, "state", "switchyard.state"), "rb") as f:
        return f.readline().decode()


def test_route_moved_between_sources_replays_as_live(env):
    """Route changes are stored per (source, id): DELETE /routes/live/live
    (the file's route) then PUT /routes/main/live keeps both, and a worker
    that replays them (a respawn after kill -9, a reload's new workers, a
    restart from the state file) holds the route in main only, as the
    workers that took them live (keyed by id alone, only the PUT was kept:
    the replaying worker also held the file's route in live, and its PUT
    failed as a duplicate id). Moved back, the removal from main stays
    beside the PUT into live and replays as nothing. Also: R PUT into two
    sources at once is refused, and its DELETE from the other source is a
    404. The same from a source's routes document (PUT /routes/live)."""
    def delete(path, want=200):
        r = request(env.port, "DELETE", "/switchyard/routes/" + path)
        check(r.status == want, "DELETE %s: %d %r" % (path, r.status, r.body))

    def put(path, doc, want=200):
        r = env.put("routes/" + path, doc)
        check(r.status == want, "PUT %s: %d %r" % (path, r.status, r.body))
        return r

    def replays(what, path="/live/x"):
        respawn_one(env, what + ", respawn")
        routed_by_all(env, path, want, what + ", respawn")
        base.reload_and_wait(env)
        routed_by_all(env, path, want, what + ", reload")
        fp = env.converged()["workers"][0]["fingerprint"]
        env.stop_nginx()
        env.launch()
        s = env.converged(timeout=10)
        check({w["fingerprint"] for w in s["workers"]} == {fp},
              "%s: fingerprints after a restart from the state file: %r"
              % (what, s["workers"]))
        routed_by_all(env, path, want, what + ", restart")
        check(not base.crashed(env), "a worker crashed: %r"
              % base.crashed(env))
        said = log_since(env, start)
        check(" not applied: " not in said and "duplicate" not in said,
              "%s: a stored change not applied: %s" % (what, said[-1500:]))

    start = log_size(env)
    with open(os.path.join(env.dir, "live.json")) as f:
        filed = json.load(f)["routes"][0]
    moved = dict(filed, uri="http://127.0.0.1:%d" % env.pb)
    routed_by_all(env, "/live/x", "A", "the file's route")
    # no route id has changes in two sources: the version the modules
    # before read
    check(state_header(env).startswith("switchyard-state 1 "),
          "state file header %r" % state_header(env))
    delete("live/live")
    put("main/live", moved)
    want = "B"
    routed_by_all(env, "/live/x", want, "moved to main, live")
    replays("moved to main")
    docs = {(d["kind"], d.get("source"), d["name"])
            for d in env.converged()["documents"]}
    check({("route-remove", "live", "live"), ("route", "main", "live")}
          <= docs, "both changes of the route not stored: %r" % docs)
    check(state_header(env).startswith("switchyard-state 2 "),
          "state file header %r" % state_header(env))
    # and back: the removal from main is kept beside the PUT into live
    delete("main/live")
    put("live/live", filed)
    want = "A"
    routed_by_all(env, "/live/x", want, "moved back, live")
    docs = {(d["kind"], d.get("source"), d["name"])
            for d in env.converged()["documents"]}
    check({("route-remove", "main", "live"), ("route", "live", "live")}
          <= docs, "the changes of the route moved back: %r" % docs)
    replays("moved back")
    # from a source's routes document (a replaying worker stages the
    # document, then the removal from it, whose route its files lack)
    with open(os.path.join(env.dir, "live.json")) as f:
        doc = json.load(f)
    doc["version"] = "moves"
    doc["routes"].append(route("docmv", env.pa, "/docmv"))
    put("live", doc)
    want = "A"
    routed_by_all(env, "/docmv", want, "a routes document's route")
    delete("live/docmv")
    put("main/docmv", route("docmv", env.pb, "/docmv"))
    want = "B"
    routed_by_all(env, "/docmv", want, "moved from a routes document, live")
    replays("moved from a routes document", "/docmv")
    delete("main/docmv")
    # one id in two sources at once is refused; the other source's
    # DELETE of it is a 404 and stores nothing
    put("main/twice", route("twice", env.pb, "/twice"))
    r = put("live/twice", route("twice", env.pa, "/twice"), want=400)
    check("already defined by source 'main'" in r.body.decode(),
          "PUT into a second source: %r" % r.body)
    delete("live/twice", want=404)
    check(("route-remove", "live", "twice") not in
          {(d["kind"], d.get("source"), d["name"])
           for d in env.converged()["documents"]}, "a refused DELETE stored")
    respawn_one(env, "one id in two sources")
    routed_by_all(env, "/twice", "B", "one id in two sources, respawn")
    delete("main/twice")


def test_state_file_of_another_version_refused_at_its_line(env):
    """A state file of a version this module does not read (3), or with
    a damaged document line, is refused at start with its name and line:
    nothing of it (or nothing from the damage on) is read; the files are
    served."""
    path = os.path.join(env.dir, "state", "switchyard.state")
    with open(path, "rb") as f:
        good = f.read()
    first, rest = good.split(b"\n", 1)
    check(re.match(rb"switchyard-state [12] \d+$", first), "header %r" % first)
    try:
        for text, said in (
                (b"switchyard-state 3 9\n" + rest,
                 'state file "%s", line 1: version 3, a state file of '
                 'another version (this module reads versions 1 and 2): the '
                 'file is not read' % path),
                (first + b"\n" + rest.replace(b"doc ", b"doc x", 1),
                 'state file "%s", line 2: a damaged document line: what '
                 'follows is not read' % path)):
            env.stop_nginx()
            with open(path, "wb") as f:
                f.write(text)
            env.launch()
            s = env.converged(timeout=10)
            check(said in env.error_log(), "not said (%s): %s"
                  % (said, env.error_log()[-800:]))
            check(not s["documents"], "documents read: %r" % s["documents"])
    finally:
        env.stop_nginx()
        with open(path, "wb") as f:
            f.write(good)
        env.launch()
    env.converged(timeout=10)
    check(re.search(r"\d+ stored documents read from", env.error_log()),
          "the good state file not read again")


def test_admin_answers_are_utf8(env):
    """Every admin answer is well-formed UTF-8 JSON (RFC 8259 8.1): the
    bytes it echoes that are not UTF-8 (a predicate's name in an error, an
    instance's id) are written \\ufffd, as the mini-gateway writes them;
    they went raw, and a strict reader refused the answer."""
    def utf8_json(r, what):
        try:
            return json.loads(r.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            check(False, "%s: not UTF-8 JSON (%s): %r" % (what, e,
                                                          r.body[:300]))
    r = env.put("routes/live/u8", b'{"id":"u8","uri":"http://127.0.0.1:%d",'
                b'"predicates":["Pa\xffth=/u8"]}' % env.pa)
    check(r.status == 400, "a bad predicate answered %d" % r.status)
    got = utf8_json(r, "the refused route's error")
    check("Pa\ufffdth" in got["error"]["message"],
          "the error names the predicate, U+FFFD for its stray byte: %r"
          % got)
    r = env.put("instances/shop", b'{"services":{"shop":[{"id":"shop-\xff",'
                b'"host":"127.0.0.1","port":%d}]}}' % env.pa)
    check(r.status == 200, "instances PUT answered %d %r" % (r.status,
                                                             r.body))
    utf8_json(r, "the accepted change's answer")
    deadline = time.time() + 5
    while True:
        s = utf8_json(request(env.port, "GET", "/switchyard/status"),
                      "/status")
        ids = [i["id"] for x in s["services"] if x["name"] == "shop"
               for i in x["instances"]]
        if ids == ["shop-\ufffd"] or time.time() > deadline:
            break
        time.sleep(0.05)
    check(ids == ["shop-\ufffd"], "/status: the instance's id, U+FFFD for "
          "its stray byte: %r" % ids)
    r = env.put("instances/shop", env.instances()["services"]["shop"])
    check(r.status == 200, "instances restored: %d" % r.status)
    no_crash(env)


TESTS = [
    test_admin_answers_are_utf8,
    test_variables_logged_for_admin_requests,
    test_unrun_filters_refused_with_location,
    test_duplicate_id_across_files_refused_by_test_and_reload,
    test_small_zone_refused_naming_the_zone,
    test_eject_time_out_of_bounds_refused_at_its_line,
    test_admin_in_a_location_without_prefix_refused,
    test_unwritable_state_file_said_at_start,
    test_variables_logged_for_refused_requests,
    test_failed_reload_keeps_admin_changes,
    test_put_survives_reload,
    test_delete_on_a_draining_worker_is_503,
    test_stored_change_a_file_now_conflicts_with_said_by_test,
    test_state_file_survives_restart,
    test_changed_file_wins_over_stored_changes,
    test_replayed_routes_keep_the_live_rank_order,
    test_route_moved_between_sources_replays_as_live,
    test_state_file_of_another_version_refused_at_its_line,
    test_two_nginx_lose_no_state_write,
    test_state_file_follower_ranks_as_the_writer,
    test_binary_upgrade_keeps_changes,
    test_binary_upgrade_without_state_file_warns,
]

if __name__ == "__main__":
    sys.exit(base.run(TESTS, OpsEnv))
