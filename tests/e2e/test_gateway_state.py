"""mini-gateway end to end: admin changes survive a restart (--state FILE).

Asserted, with real gateway processes stopped and started again: a route
(PUT /routes/<source>/<id>), an instance list (PUT /instances/<service>), a
disabled route and an actuator route made through the admin API are served
the same after a restart with the same --state, and /status says the
source's document came from the state ("origin") and how many changes were
replayed; the state file is JSON on disk before the admin call is answered;
an override of a file's route (--admin-overrides-files) survives a restart
together with a change of the file made while the gateway was down; a
state file that does not parse (syntax, or a change without its route)
fails the start with the file and the located error, and so does one the
gateway cannot write; a change that no
longer applies (its source now a file's, without --admin-overrides-files)
is logged, left out, and the file as it was kept; a change to a source
not known yet that fails at replay registers no source (the ones that
pass do); a gateway with the admin API and no --state warns once that
admin changes live in memory only; the built-in demo's source has the
origin "demo".
"""
import json
import os
import signal
import subprocess
import time

import gwharness as h


def stop(gw):
    gw.proc.send_signal(signal.SIGTERM)
    gw.proc.wait(timeout=10)


def route(rid, path, uri, tag):
    return {"id": rid, "uri": uri, "predicates": ["Path=%s" % path],
            "filters": ["AddRequestHeader=X-Tag,%s" % tag]}


def tag_of(gw, path):
    st, _, data = gw.request("GET", path)
    return st, (h.echoed_header(data, "X-Tag") if st == 200 else None)


def restart_keeps_admin_changes(procs, c, port, port2):
    state = os.path.join(procs.dir, "state.json")
    gw = procs.gateway("--state", state)
    c.ok("in memory only" not in procs.log("gateway.log"),
         "no memory-only warning with --state")
    st, _, _ = gw.admin_call("PUT", "/routes/mine/r1", route(
        "r1", "/r1/**", "http://127.0.0.1:%d" % port, "one"))
    c.eq(st, 200, "PUT a route into an admin source")
    with open(state) as f:
        saved = json.load(f)
    c.eq([(x["change"], x["source"], x["route"]) for x in saved["changes"]],
         [("upsert", "mine", "r1")],
         "the state file holds the change once the call is answered")
    st, _, _ = gw.admin_call("PUT", "/instances/svc", [
        {"id": "b2", "host": "127.0.0.1", "port": port2}])
    c.eq(st, 200, "PUT an instance list")
    st, _, _ = gw.admin_call("PUT", "/routes/mine/r2", route(
        "r2", "/r2/**", "lb://svc", "two"))
    c.eq(st, 200, "a route to the admin's service")
    st, _, _ = gw.admin_call("PUT", "/routes/mine/r3", route(
        "r3", "/r3/**", "http://127.0.0.1:%d" % port, "three"))
    c.eq(gw.admin_call("POST", "/routes/mine/r3/disable")[0], 200,
         "disable a route")
    c.eq(gw.admin_call("POST", "/actuator/gateway/routes/act", {
        "uri": "http://127.0.0.1:%d" % port,
        "predicates": ["Path=/act/**"]})[0], 201, "an actuator route")
    # two routes for the same paths, equal order: the first upserted
    # ranks first, and keeps its rank when upserted again
    for rid, tag in (("o1", "o1"), ("o2", "o2"), ("o1", "o1-again")):
        c.eq(gw.admin_call("PUT", "/routes/mine/" + rid, route(
            rid, "/o/**", "http://127.0.0.1:%d" % port, tag))[0], 200,
            "upsert %s" % rid)
    c.eq(tag_of(gw, "/o/x"), (200, "o1-again"),
         "a route upserted again keeps its rank")
    st, _, data = gw.request("GET", "/r2/x")
    c.eq((st, json.loads(data)["instance"]), (200, "b2"),
         "served by the admin's instance before the restart")
    c.eq(gw.source("mine")["origin"], "admin", "/status: origin admin")
    stop(gw)

    gw = procs.gateway("--state", state)
    c.eq(tag_of(gw, "/r1/x"), (200, "one"), "the route survives the restart")
    st, _, data = gw.request("GET", "/r2/x")
    c.eq((st, json.loads(data)["instance"] if st == 200 else None),
         (200, "b2"), "the instance list survives the restart")
    c.eq(gw.request("GET", "/r3/x")[0], 404, "the route is still disabled")
    c.eq(gw.request("GET", "/act/x")[0], 200, "the actuator's route too")
    c.eq(tag_of(gw, "/o/x"), (200, "o1-again"),
         "the route upserted again keeps its rank after the restart")
    s = gw.status()
    c.eq(gw.source("mine")["origin"], "state",
         "/status: the source's document came from the state")
    c.eq((s["state"]["file"], s["state"]["replayed"],
          s["state"]["not_replayed"]), (state, 8, 0),
         "/status: the state file and what was replayed")
    c.ok("replayed changes[0] (upsert mine/r1)" in procs.log("gateway.log"),
         "the replay is logged per change")
    # a change after the replay is kept on top of the replayed ones
    c.eq(gw.admin_call("DELETE", "/routes/mine/r1")[0], 200, "remove r1")
    stop(gw)
    gw = procs.gateway("--state", state)
    c.eq(gw.request("GET", "/r1/x")[0], 404,
         "the removal survives the next restart")
    c.eq(tag_of(gw, "/r2/x")[0], 200, "and the other routes are there")
    stop(gw)


def override_survives(procs, c, port):
    def doc(tag):
        return json.dumps({"version": tag, "routes": [
            route("file-a", "/a/**", "http://127.0.0.1:%d" % port, tag),
            route("file-b", "/b/**", "http://127.0.0.1:%d" % port, tag)]})
    routes = procs.write_file("ov.json", doc("1"))
    state = os.path.join(procs.dir, "ov-state.json")
    gw = procs.gateway("--routes", routes, "--admin-overrides-files",
                       "--state", state)
    st, _, _ = gw.admin_call("PUT", "/routes/ov/file-a", route(
        "file-a", "/a/**", "http://127.0.0.1:%d" % port, "admin"))
    c.eq(st, 200, "an override of a file's route")
    c.eq(gw.source("ov")["origin"], "admin", "origin admin after it")
    stop(gw)
    procs.write_file("ov.json", doc("2"))  # the file changes meanwhile
    gw = procs.gateway("--routes", routes, "--admin-overrides-files",
                       "--state", state)
    c.eq(tag_of(gw, "/a/x"), (200, "admin"),
         "the override survives a restart and a file change")
    c.eq(tag_of(gw, "/b/x"), (200, "2"), "the file's change applies")
    c.eq([(o["source"], o["route"], o["change"])
          for o in gw.status()["overrides"]], [("ov", "file-a", "upsert")],
         "/status lists the replayed override")
    procs.write_file("ov.json", doc("3"))
    h.wait_for(lambda: gw.source("ov")["version"] == "3", "the file re-read")
    c.eq(tag_of(gw, "/a/x"), (200, "admin"),
         "and it is staged over the next file change as before")
    stop(gw)
    # the same state, without --admin-overrides-files: the file's route
    # is the file's; the change is logged as not replayed, the file kept
    gw = procs.gateway("--routes", routes, "--state", state)
    c.eq(tag_of(gw, "/a/x"), (200, "3"), "without the flag, the file serves")
    s = gw.status()["state"]
    c.ok(s["not_replayed"] == 1 and "ov.json" in s["errors"][0],
         "/status names the change not replayed and the file (%r)" % s)
    c.ok("not replayed" in procs.log("gateway.log") and
         os.path.exists(state + ".not-replayed"),
         "logged, and the state as it was kept in FILE.not-replayed")
    stop(gw)


def bad_state(procs, c):
    for name, text, where in [
            ("syntax.json", '{"changes": [ {"change": "upsert",,] }',
             "JSON syntax error at offset"),
            ("noroute.json", json.dumps({"changes": [
                {"change": "document", "source": "s", "body": []},
                {"change": "upsert", "source": "s", "body": {}}]}),
             "changes[1].route"),
            ("kind.json", json.dumps({"changes": [{"change": "zap"}]}),
             "changes[0].change"),
            ("nodir", None, "state.json.tmp failed")]:
        path = procs.write_file(name, text) if text else os.path.join(
            procs.dir, "no-such-dir", "state.json")
        args = [h.binary(), "--listen", "127.0.0.1:%d" % h.free_port(),
                "--admin", "127.0.0.1:%d" % h.free_port(), "--state", path]
        r = subprocess.run(args, capture_output=True, timeout=10)
        err = (r.stdout + r.stderr).decode()
        c.ok(r.returncode != 0 and path in err and where in err,
             "a state file that does not parse (%s) fails the start with the "
             "file and %r: %d %r" % (name, where, r.returncode, err[-300:]))


def unsaved_change_refused(procs, c, port):
    """A change that cannot be saved is refused and nothing changes: the
    state file's directory moved away, every kind of change (a rollback
    is saved once committed, so it is undone)."""
    where = os.path.join(procs.dir, "statedir")
    os.mkdir(where)
    state = os.path.join(where, "state.json")
    gw = procs.gateway("--state", state)
    uri = "http://127.0.0.1:%d" % port
    doc = {"version": "v1", "routes": [route("d1", "/d/**", uri, "v1")]}
    c.eq(gw.admin_call("PUT", "/routes/docs", doc)[0], 200, "document v1")
    doc["version"] = "v2"
    doc["routes"] = [route("d1", "/d/**", uri, "v2")]
    c.eq(gw.admin_call("PUT", "/routes/docs", doc)[0], 200, "document v2")
    with open(state) as f:
        before = f.read()
    gen = gw.status()["generation"]
    os.rename(where, where + ".away")
    tries = [("PUT", "/routes/mine/u1", route("u1", "/u1/**", uri, "u")),
             ("PUT", "/routes/fresh", {"version": "1", "routes": [
                 route("f1", "/f1/**", uri, "f")]}),
             ("POST", "/routes/docs/d1/disable", None),
             ("DELETE", "/routes/docs/d1", None),
             ("PUT", "/instances/svc", [{"id": "i1", "host": "127.0.0.1",
                                         "port": port}]),
             ("POST", "/rollback/docs", None)]
    for method, path, body in tries:
        st, _, data = gw.admin_call(method, path, body)
        c.eq((st, b"state.json.tmp failed" in data), (500, True),
             "%s %s with a state file that cannot be written: refused, "
             "saying why (%r)" % (method, path, data[:200]))
    c.eq(tag_of(gw, "/d/x"), (200, "v2"),
         "nothing changed: the document, its route enabled, no rollback")
    c.eq((gw.request("GET", "/u1/x")[0], gw.request("GET", "/f1/x")[0]),
         (404, 404), "nothing changed: no route added")
    c.eq([s["name"] for s in gw.status()["sources"]].count("fresh"), 0,
         "nothing changed: no source registered")
    c.ok(gw.status()["generation"] in (gen, gen + 2),
         "published nothing but the rollback and its undo (generation %d, "
         "was %d)" % (gw.status()["generation"], gen))
    os.rename(where + ".away", where)
    with open(state) as f:
        c.eq(f.read(), before, "the state file as it was")
    c.eq(gw.admin_call("PUT", "/routes/mine/u1", route(
        "u1", "/u1/**", uri, "u"))[0], 200, "writable again: accepted")
    stop(gw)
    gw = procs.gateway("--state", state)
    c.eq((tag_of(gw, "/d/x"), tag_of(gw, "/u1/x")),
         ((200, "v2"), (200, "u")),
         "after a restart: what was accepted, and only that")
    stop(gw)


def failed_replay_registers_nothing(procs, c, port):
    """A replayed change of an unknown source is tried before the source
    is registered: one that fails leaves no empty source behind."""
    up = "http://127.0.0.1:%d" % port
    bad = route("g1", "/g1/**", up, "g")
    bad["predicates"] = ["Path=/g1/{x:[}"]  # a regex that does not compile
    state = procs.write_file("ghost-state.json", json.dumps({
        "format": "mini-gateway-state/1", "changes": [
            {"change": "upsert", "source": "ghost", "route": "g1",
             "body": bad},
            {"change": "document", "source": "ghost2",
             "body": {"version": "1", "routes": [bad]}},
            {"change": "upsert", "source": "fine", "route": "f1",
             "body": route("f1", "/f1/**", up, "f")}]}))
    gw = procs.gateway("--state", state)
    s = gw.status()
    names = [x["name"] for x in s["sources"]]
    c.ok("ghost" not in names and "ghost2" not in names,
         "failed replays of unknown sources register none: %r" % names)
    c.eq((s["state"]["replayed"], s["state"]["not_replayed"]), (1, 2),
         "/status: one replayed, two not")
    c.eq(tag_of(gw, "/f1/x"), (200, "f"), "the change that passes applies")
    c.eq(gw.source("fine")["origin"], "state", "its source's origin")
    # the admin API then creates the source as if it never was
    c.eq(gw.admin_call("PUT", "/routes/ghost/g2", route(
        "g2", "/g2/**", up, "g2"))[0], 200, "the source can be made later")
    stop(gw)


def demo_origin(procs, c):
    """The demo's built-in routes: origin "demo" in /status. Its backends
    listen on 127.0.0.1:9101 and :9102; taken by something else, the
    check is reported as skipped."""
    import socket
    for p in (9101, 9102):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            c.skip("the demo's origin (127.0.0.1:%d is taken)" % p)
            return
        finally:
            s.close()
    port, admin = h.free_port(), h.free_port()
    p = procs.start([h.binary(), "--demo", "--listen", "127.0.0.1:%d" % port,
                     "--admin", "127.0.0.1:%d" % admin], "demo.log")
    h.wait_port(admin, proc=p)
    st, _, data = h.http_call(admin, "GET", "/status")
    c.eq([(s["name"], s["origin"]) for s in json.loads(data)["sources"]],
         [("demo", "demo")], "/status: the demo's source has origin demo")
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=10)


def memory_only_warning(procs, c):
    gw = procs.gateway()
    time.sleep(0.1)
    log = procs.log("gateway.log")
    c.eq(log.count("kept in memory only"), 1,
         "without --state, one warning that admin changes live in memory")
    c.eq(gw.status()["state"], None, "/status: state null")
    stop(gw)


def body(procs, c):
    _, port = procs.backend("b1")
    _, port2 = procs.backend("b2")
    restart_keeps_admin_changes(procs, c, port, port2)
    override_survives(procs, c, port)
    bad_state(procs, c)
    unsaved_change_refused(procs, c, port)
    failed_replay_registers_nothing(procs, c, port)
    memory_only_warning(procs, c)
    demo_origin(procs, c)


h.run("gateway_state", body)
