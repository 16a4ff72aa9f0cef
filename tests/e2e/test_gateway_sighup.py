"""SIGHUP reloads the mini-gateway, never stops it (it was the default
action before: the gateway exited at once, its requests cut).

With route files, SIGHUP reads them again as an edit inotify saw or POST
/actuator/gateway/refresh would: a changed file applied, a bad one
refused with its located error in the log while the routes it had keep
serving. The file here is a symlink into a directory the gateway does not
watch, so only the signal can make it read the new text. Without files,
SIGHUP logs that there is nothing to reload.

Usage: test_gateway_sighup.py MINI_GATEWAY
"""
import json
import os
import signal
import time

import gwharness as h


def doc(port, version):
    return json.dumps({"version": str(version), "routes": [
        {"id": "r%d" % version, "uri": "http://127.0.0.1:%d" % port,
         "predicates": ["Path=/v%d/**" % version]}]})


def body(procs, c):
    _, bport = procs.backend("b1")
    real_dir = os.path.join(procs.dir, "real")
    os.mkdir(real_dir)
    real = os.path.join(real_dir, "routes.json")

    def write_real(text):  # atomically, in the unwatched directory
        with open(real + ".tmp", "w") as f:
            f.write(text)
        os.rename(real + ".tmp", real)
    write_real(doc(bport, 1))
    link = os.path.join(procs.dir, "web.json")
    os.symlink(real, link)
    gw = procs.gateway("--routes", link)
    c.eq(gw.request("GET", "/v1/a")[0], 200, "version 1 serves")

    write_real(doc(bport, 2))
    time.sleep(0.3)  # what inotify would have done by now: nothing here
    c.eq(gw.request("GET", "/v2/a")[0], 404,
         "the new text is not read without the signal")
    os.kill(gw.proc.pid, signal.SIGHUP)
    try:
        h.wait_for(lambda: gw.request("GET", "/v2/a")[0] == 200,
                   "version 2 served after SIGHUP")
        c.ok(True, "SIGHUP read the route file again")
    except Exception as e:
        c.ok(False, "SIGHUP: %s (gateway exit %r)" % (e, gw.proc.poll()))
        c.done(procs)
    c.eq(gw.request("GET", "/v1/a")[0], 404, "version 1 is gone")
    c.eq(gw.source("web")["version"], "2", "/status: the source's version")
    h.wait_for(lambda: "SIGHUP" in procs.log("gateway.log"),
               "the reload logged")
    c.ok("SIGHUP: 1 file read again" in procs.log("gateway.log"),
         "the log says what was read: %r" % procs.log("gateway.log")[-600:])

    # a bad file: its located error logged, version 2 keeps serving
    write_real('{"version": "3", "routes": [{"id": "r3", "uri": '
               '"http://127.0.0.1:%d", "predicates": ["Nope=1"]}]}' % bport)
    os.kill(gw.proc.pid, signal.SIGHUP)
    h.wait_for(lambda: "routes[0].predicates[0]" in procs.log("gateway.log"),
               "the refused file's located error in the log")
    log = procs.log("gateway.log")
    c.ok("web.json rejected, the old config keeps serving: "
         "routes[0].predicates[0]" in log, "located error: %r" % log[-600:])
    c.ok("SIGHUP: 1 file read again, 1 refused" in log,
         "the reload's line says a file was refused: %r" % log[-600:])
    c.eq(gw.proc.poll(), None, "the gateway still runs")
    c.eq(gw.request("GET", "/v2/a")[0], 200, "version 2 still serves")
    c.ok(gw.source("web")["error"] is not None, "/status shows the error")

    # fixed, and signalled again: applied
    write_real(doc(bport, 4))
    os.kill(gw.proc.pid, signal.SIGHUP)
    h.wait_for(lambda: gw.request("GET", "/v4/a")[0] == 200,
               "version 4 after the fix")
    c.ok(gw.source("web")["error"] is None, "/status: the error cleared")

    # no files: nothing to reload, said, and the gateway runs on
    bare = procs.gateway(log="bare.log")
    bare.admin_call("PUT", "/routes/adm", {"routes": [
        {"id": "a", "uri": "http://127.0.0.1:%d" % bport,
         "predicates": ["Path=/a/**"]}]})
    os.kill(bare.proc.pid, signal.SIGHUP)
    h.wait_for(lambda: "SIGHUP" in procs.log("bare.log"), "logged")
    c.ok("SIGHUP: nothing to reload" in procs.log("bare.log"),
         "said: %r" % procs.log("bare.log")[-400:])
    time.sleep(0.1)
    c.eq(bare.proc.poll(), None, "the gateway without files still runs")
    c.eq(bare.request("GET", "/a/x")[0], 200, "its admin routes serve")
    c.done(procs)


h.run("gateway_sighup", body)
