"""mini-gateway end to end: reloads under load are a non-event.

Load threads send requests without pause on keep-alive connections while
one mutator changes routes 220+ times (route files rewritten and the admin
API, on a source no file owns), churns extra routes, moves a service's
instances up and down (through the instances file: an admin edit of what a
file owns is refused, test_gateway_actuator.py), and pushes broken
documents. Asserted:
  - no request fails (every answer is 200);
  - each answer comes from the route version live when its request started
    or a later one (never an older one), and never from one not yet issued;
  - an instance removed (or marked down) by a publish gets no request
    started after that publish (unless a later publish brought it back);
  - a broken document is rejected with its located error (admin: 400;
    file: the source's error in /status) and the old routes keep serving.
"""
import http.client
import json
import threading
import time

import gwharness as h

CHANGES = 220


def file_doc(version, b1, extra):
    routes = [{"id": "file-live", "uri": "http://127.0.0.1:%d" % b1,
               "predicates": ["Path=/file/**"],
               "filters": ["AddRequestHeader=X-Route-Version,%d" % version]}]
    for n in extra:
        routes.append({"id": "file-extra-%d" % n,
                       "uri": "http://127.0.0.1:%d" % b1,
                       "predicates": ["Path=/extra-%d/**" % n]})
    return json.dumps({"version": str(version), "routes": routes})


def admin_route(version):
    return {"id": "admin-live", "uri": "lb://svc",
            "predicates": ["Path=/admin/**"],
            "filters": ["AddRequestHeader=X-Route-Version,%d" % version]}


def inst_list(ids, ports, mark_down=False):
    """The instances of `ids`; with mark_down the others are listed too,
    in state "down" (an instance going down rather than away)."""
    out = []
    for i in sorted(ports):
        if i in ids:
            out.append({"id": i, "host": "127.0.0.1", "port": ports[i]})
        elif mark_down:
            out.append({"id": i, "host": "127.0.0.1", "port": ports[i],
                        "state": "DOWN"})
    return out


SETS = [("b1", "b2", "b3"), ("b1", "b2"), ("b2", "b3"), ("b3",), ("b1",),
        ("b1", "b3"), ("b2",), ("b1", "b2", "b3")]


def body(procs, c):
    ports = {}
    for ident in ("b1", "b2", "b3"):
        _, ports[ident] = procs.backend(ident)
    b1 = ports["b1"]
    fpath = procs.write_file("filesrc.json", file_doc(0, b1, []))
    ipath = procs.write_file("inst.json", json.dumps(
        {"services": {"svc": inst_list(SETS[0], ports)}}))
    gw = procs.gateway("--routes", fpath, "--instances", ipath, workers=2)
    st, _, data = gw.admin_call("PUT", "/routes/adminsrc", json.dumps(
        {"version": "0", "routes": [admin_route(0)]}))
    c.eq(st, 200, "the admin's source: %s" % data[:200])

    # history: per key, (issued, confirmed, value) in order
    hist = {"file": [(0.0, 0.0, 0)], "admin": [(0.0, 0.0, 0)],
            "inst": [(0.0, 0.0, frozenset(SETS[0]))]}
    results = []
    stop = threading.Event()
    lock = threading.Lock()

    def load(which):
        conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
        i = 0
        while not stop.is_set():
            path = "/file/x" if (i + which) % 2 == 0 else "/admin/x"
            i += 1
            t0 = time.monotonic()
            try:
                conn.request("GET", path)
                r = conn.getresponse()
                data = r.read()
                t1 = time.monotonic()
                ver = h.echoed_header(data, "X-Route-Version") \
                    if r.status == 200 else None
                inst = json.loads(data)["instance"] if r.status == 200 \
                    else None
                rec = (path, t0, t1, r.status, ver, inst, data[:200])
            except Exception as e:  # a failed request is a finding
                rec = (path, t0, time.monotonic(), -1, None, None, repr(e))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", gw.port,
                                                  timeout=10)
            with lock:
                results.append(rec)
        conn.close()

    threads = [threading.Thread(target=load, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()

    def wait_instances(before):
        end = time.time() + 5
        while time.time() < end:
            if gw.status()["instance_updates"] > before:
                return time.monotonic()
            time.sleep(0.003)
        raise AssertionError("instance change never published")

    extra = []
    set_i = 0
    route_changes = 0
    file_v = admin_v = 0
    broken_checked = False
    for step in range(1, CHANGES + 1):
        if step % 2:  # a route file rewritten
            file_v += 1
            extra = [step] + extra[:2]
            issued = time.monotonic()
            procs.write_file("filesrc.json", file_doc(file_v, b1, extra))
            gw.wait_source_version("filesrc", str(file_v))
            hist["file"].append((issued, time.monotonic(), file_v))
            route_changes += 1
        else:  # one route through the admin API, plus churn
            admin_v += 1
            issued = time.monotonic()
            st, _, data = gw.admin_call("PUT", "/routes/adminsrc/admin-live",
                                        admin_route(admin_v))
            c.eq(st, 200, "admin PUT %d: %s" % (admin_v, data[:200]))
            hist["admin"].append((issued, time.monotonic(), admin_v))
            route_changes += 1
            st, _, _ = gw.admin_call(
                "PUT", "/routes/adminsrc/churn-%d" % step,
                {"id": "churn-%d" % step, "uri": "http://127.0.0.1:%d" % b1,
                 "predicates": ["Path=/churn-%d" % step]})
            c.eq(st, 200, "churn add")
            if step > 2:
                st, _, _ = gw.admin_call("DELETE",
                                         "/routes/adminsrc/churn-%d" %
                                         (step - 2))
                c.eq(st, 200, "churn remove")
            route_changes += 2
        if step % 10 == 0:  # instances move
            set_i = (set_i + 1) % len(SETS)
            ids = SETS[set_i]
            before = gw.status()["instance_updates"]
            issued = time.monotonic()
            down = step % 30 == 0  # every third move: down, not away
            procs.write_file("inst.json", json.dumps(
                {"services": {"svc": inst_list(ids, ports, down)}}))
            confirmed = wait_instances(before)
            hist["inst"].append((issued, confirmed, frozenset(ids)))
        if step == CHANGES // 2 and not broken_checked:
            broken_checked = True
            bad = {"version": "bad", "routes": [
                {"id": "admin-live", "uri": "lb://svc",
                 "predicates": ["Path=/admin/**", "NoSuchPredicate=1"]}]}
            st, _, data = gw.admin_call("PUT", "/routes/adminsrc", bad)
            c.eq(st, 400, "broken document through the admin API")
            err = json.loads(data).get("error", {})
            c.eq(err.get("path"), "routes[0].predicates[1]",
                 "admin: located error")
            procs.write_file("filesrc.json",
                             '{"version": "broken", "routes": [{"id": "x", '
                             '"uri": "http://h", "predicates": '
                             '["Path=/x/{"]}]}')
            end = time.time() + 5
            src = None
            while time.time() < end:
                src = gw.source("filesrc")
                if src and src["error"]:
                    break
                time.sleep(0.005)
            c.ok(src and src["error"] and
                 src["error"]["path"] == "routes[0].predicates[0]",
                 "file: located error in /status: %r" % (src,))
            c.eq(src["version"], str(file_v), "file: old version still live")
            # the next step's file write repairs it
            time.sleep(0.05)
    time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(20)

    c.ok(route_changes >= 200, "%d route changes" % route_changes)
    c.ok(len(results) > 500, "%d requests under load" % len(results))
    failed = [r for r in results if r[3] != 200]
    c.eq(len(failed), 0, "requests that failed: %r" % failed[:5])

    def allowed(key, t0, t1):
        """Values live at t0 or published later, up to issue time t1."""
        rows = hist[key]
        lo = 0
        for i, (issued, confirmed, _) in enumerate(rows):
            if confirmed < t0:
                lo = i
        hi = max(i for i, (issued, _, _) in enumerate(rows) if issued <= t1)
        return rows[lo:hi + 1]

    stale = []
    ghost = []
    for path, t0, t1, st, ver, inst, _ in results:
        if st != 200:
            continue
        key = "file" if path.startswith("/file") else "admin"
        vals = [v for _, _, v in allowed(key, t0, t1)]
        if ver is None or int(ver) not in vals:
            stale.append((path, ver, vals[:3], vals[-1:]))
        if key == "admin":
            live = set()
            for _, _, s in allowed("inst", t0, t1):
                live |= s
            if inst not in live:
                ghost.append((inst, sorted(live)))
    c.eq(len(stale), 0, "answers from an older route version: %r" % stale[:5])
    c.eq(len(ghost), 0, "requests to a removed instance: %r" % ghost[:5])
    s = gw.status()
    c.ok(s["failed_commits"] >= 2, "broken documents counted as failed "
         "commits (%d)" % s["failed_commits"])
    print("reload: %d requests, %d route changes, %d publishes" %
          (len(results), route_changes, s["publishes"]))


h.run("gateway_reload", body)
