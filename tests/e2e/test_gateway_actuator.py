"""mini-gateway end to end: SCG's actuator API, and no admin edit silently
undone by a file.

Asserted: /actuator/gateway/routes lists every live route with SCG's
fields (route_id, uri, order, predicate, filters); POST
/actuator/gateway/routes/{id} with a RouteDefinition (_genkey_N args)
answers 201 and the route serves, from a source of its own; GET and DELETE
of it; a bad definition is 400 with its located error; a route of a file is
not the actuator's to change (409 naming the file); routedefinitions,
globalfilters, routefilters, routepredicates, refresh answer. The admin
API refuses a change to a file's source or service with 409 naming the
file; with --admin-overrides-files the change is kept across file changes
and listed in /status.
"""
import json

import gwharness as h


def ipv6_backend():
    """A backend on [::1] (a free port) answering "SIX", served by a
    thread; shutdown() stops it."""
    import socket
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "3")
            self.end_headers()
            self.wfile.write(b"SIX")

        def log_message(self, *args):
            pass

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6
        daemon_threads = True

    srv = Server(("::1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def doc(port, tag):
    return json.dumps({"version": tag, "routes": [
        {"id": "file-a", "uri": "http://127.0.0.1:%d" % port,
         "predicates": ["Path=/a/**"],
         "filters": ["AddRequestHeader=X-Tag,%s" % tag]},
        {"id": "file-b", "uri": "http://127.0.0.1:%d" % port,
         "predicates": ["Path=/b/**", "Method=GET"]}]})


def actuator(procs, c, port):
    routes = procs.write_file("edge.json", doc(port, "1"))
    inst = procs.write_file("inst.json", json.dumps(
        {"services": {"svc": [{"id": "i1", "host": "127.0.0.1",
                               "port": port}]}}))
    gw = procs.gateway("--routes", routes, "--instances", inst)
    A = "/actuator/gateway"
    st, hd, data = gw.admin_call("GET", A + "/routes")
    lst = json.loads(data)
    c.eq(st, 200, "GET routes")
    c.eq([r["route_id"] for r in lst], ["file-a", "file-b"],
         "every live route listed by route_id, in rank order")
    b = lst[1]
    c.eq(sorted(b), ["filters", "order", "predicate", "route_id", "uri"],
         "SCG's fields")
    c.eq((b["uri"], b["order"]), ("http://127.0.0.1:%d" % port, 0),
         "uri and order")
    c.ok("Paths: [/b/**]" in b["predicate"] and "&&" in b["predicate"],
         "predicate in SCG's text form: %r" % b["predicate"])
    c.eq(lst[0]["filters"], ["[[AddRequestHeader X-Tag = '1'], order = 1]"],
         "filters in SCG's text form")

    body = {"predicates": [{"name": "Path", "args": {"_genkey_0": "/new/**"}}],
            "filters": [{"name": "AddRequestHeader",
                         "args": {"_genkey_0": "X-New", "_genkey_1": "yes"}}],
            "uri": "http://127.0.0.1:%d" % port, "order": -5}
    st, _, _ = gw.admin_call("POST", A + "/routes/new", body)
    c.eq(st, 201, "POST a RouteDefinition with _genkey_ args: 201")
    st, _, data = gw.request("GET", "/new/x")
    c.eq((st, h.echoed_header(data, "X-New")), (200, "yes"),
         "the actuator's route serves at once")
    c.eq(gw.source("actuator")["routes"], 1,
         "it lives in a source of its own, \"actuator\"")
    st, _, data = gw.admin_call("GET", A + "/routes/new")
    one = json.loads(data)
    # SCG's GatewayControllerEndpoint.route(id): serialize(route), the
    # form of the list (its actuator-api page, "Retrieving Information
    # about a Particular Route")
    c.eq((st, one.get("route_id"), one["uri"], one["order"],
          one.get("predicate")),
         (200, "new", "http://127.0.0.1:%d" % port, -5,
          "Paths: [/new/**], match trailing slash: true"),
         "GET routes/{id}: the route in the list's form")
    lst = json.loads(gw.admin_call("GET", A + "/routes")[2])
    c.eq(lst[0]["route_id"], "new", "ranked first by its order")

    body2 = dict(body, id="ignored", predicates=["Path=/new/**", "Nope=1"])
    st, _, data = gw.admin_call("POST", A + "/routes/new", body2)
    err = json.loads(data)["error"]
    c.ok(st == 400 and err["path"].endswith("predicates[1]"),
         "a bad definition: 400 with its located error (%s %r)" % (st, err))
    st, _, data = gw.request("GET", "/new/x")
    c.eq(h.echoed_header(data, "X-New"), "yes", "and nothing changed")

    st, _, data = gw.admin_call("POST", A + "/routes/file-a", body)
    c.ok(st == 409 and routes in json.loads(data)["error"],
         "a file's route is not the actuator's: 409 naming the file")
    st, _, _ = gw.admin_call("DELETE", A + "/routes/file-b")
    c.eq(st, 409, "nor to delete")

    # a change with a query is refused, not made as if it were not there
    # (?dry_run=1 saved and deleted for real)
    for m, path, b in (("POST", "/routes/dry?dry_run=1", body),
                       ("POST", "/routes?dry_run=true", [dict(body, id="dry")]),
                       ("DELETE", "/routes/new?dry_run=1", None),
                       ("POST", "/refresh?metadata=group:a", None)):
        st, _, data = gw.admin_call(m, A + path, b)
        c.ok(st == 400 and "query parameter" in data.decode(),
             "%s %s: 400, nothing changed (%s %r)" % (m, path, st, data[:160]))
    c.eq(gw.admin_call("GET", A + "/routes/dry")[0], 404,
         "the dry runs saved no route")
    c.eq(gw.request("GET", "/new/x")[0], 200, "nor deleted one")
    st, _, _ = gw.admin_call("DELETE", A + "/routes/new")
    c.eq(st, 200, "DELETE routes/{id}")
    c.eq(gw.request("GET", "/new/x")[0], 404, "the route is gone")
    c.eq(gw.admin_call("DELETE", A + "/routes/new")[0], 404,
         "DELETE of a missing route: 404")
    c.eq(gw.admin_call("GET", A + "/routes/new")[0], 404,
         "GET of a missing route: 404")

    st, _, data = gw.admin_call("GET", A + "/routedefinitions")
    c.eq([d["id"] for d in json.loads(data)], ["file-a", "file-b"],
         "routedefinitions")
    st, _, data = gw.admin_call("GET", A + "/routefilters")
    rf = json.loads(data)
    c.ok(st == 200 and "RewritePathGatewayFilterFactory" in rf and
         "SecureHeadersGatewayFilterFactory" in rf and
         "ModifyRequestBodyGatewayFilterFactory" not in rf,
         "routefilters: what this gateway runs (%s)" % sorted(rf))
    st, _, data = gw.admin_call("GET", A + "/routepredicates")
    c.ok(st == 200 and "PathRoutePredicateFactory" in json.loads(data) and
         "NopeRoutePredicateFactory" not in json.loads(data),
         "routepredicates")
    st, _, data = gw.admin_call("GET", A + "/globalfilters")
    c.ok(st == 200 and all(isinstance(v, int)
                           for v in json.loads(data).values()),
         "globalfilters: {name: order}")
    st, _, _ = gw.admin_call("POST", A + "/refresh")
    c.eq(st, 200, "refresh")

    # the admin API: a file's source and service are the file's
    st, _, data = gw.admin_call("PUT", "/routes/edge/file-a",
                                {"id": "file-a", "uri": "http://x:1"})
    c.ok(st == 409 and routes in json.loads(data)["error"],
         "admin PUT to a file's source: 409 naming the file")
    c.eq(gw.admin_call("DELETE", "/routes/edge/file-b")[0], 409,
         "admin DELETE too")
    c.eq(gw.admin_call("PUT", "/routes/edge", "[]")[0], 409,
         "a whole document too")
    st, _, data = gw.admin_call("PUT", "/instances/svc", [])
    c.ok(st == 409 and inst in json.loads(data)["error"],
         "instances of a service the instances file names: 409")
    c.eq(gw.admin_call("PUT", "/instances/other", [])[0], 200,
         "a service no file names is the admin's")
    c.eq(gw.admin_call("PUT", "/routes/mine/r1",
                       {"id": "r1", "uri": "http://x:1"})[0], 200,
         "a source no file owns is the admin's")
    # an instance given as [::1] was looked up as the name "[::1]" and
    # every request answered 502; it is the address ::1 now. A host with
    # its port is refused at its field.
    six = ipv6_backend()
    c.eq(gw.admin_call("PUT", "/routes/mine/six", {
        "id": "six", "uri": "lb://other", "order": -1,
        "predicates": ["Path=/six/**"]})[0], 200, "an lb:// route")
    st, _, data = gw.admin_call("PUT", "/instances/other", [
        {"id": "v6", "host": "[::1]", "port": six.server_address[1]}])
    c.eq(st, 200, "an instance given as [::1]: %r" % data)
    st, _, data = gw.request("GET", "/six/x")
    c.ok(st == 200 and b"SIX" in data, "[::1] instance reached: %d %r" %
         (st, data))
    six.shutdown()
    st, _, data = gw.admin_call("PUT", "/instances/other", [
        {"id": "v6", "host": "127.0.0.1:80", "port": 80}])
    c.ok(st == 400 and b"[0].host" in data,
         "a host with its port: 400 at [0].host: %d %r" % (st, data))
    st, _, data = gw.request("GET", "/a/x")
    c.eq(h.echoed_header(data, "X-Tag"), "1", "file routes untouched")


def overrides(procs, c, port):
    routes = procs.write_file("ov.json", doc(port, "1"))
    gw = procs.gateway("--routes", routes, "--admin-overrides-files")
    st, _, _ = gw.admin_call("PUT", "/routes/ov/file-a", {
        "id": "file-a", "uri": "http://127.0.0.1:%d" % port,
        "predicates": ["Path=/a/**"],
        "filters": ["AddRequestHeader=X-Tag,admin"]})
    c.eq(st, 200, "override mode: the admin change to a file's route goes on")
    c.eq(gw.admin_call("DELETE", "/routes/ov/file-b")[0], 200,
         "and a removal")
    procs.write_file("ov.json", doc(port, "2"))
    h.wait_for(lambda: gw.source("ov")["version"] == "2", "the file re-read")
    st, _, data = gw.request("GET", "/a/x")
    c.eq(h.echoed_header(data, "X-Tag"), "admin",
         "the override is kept across the file change")
    c.eq(gw.request("GET", "/b/x")[0], 404, "so is the removal")
    ov = gw.status()["overrides"]
    c.eq([(o["source"], o["route"], o["change"], o["file"]) for o in ov],
         [("ov", "file-a", "upsert", routes), ("ov", "file-b", "remove",
                                               routes)],
         "/status lists the overrides with their file")
    c.eq(gw.admin_call("POST", "/rollback/ov?version=1")[0], 200,
         "a rollback of a file's source")
    c.eq([o["change"] for o in gw.status()["overrides"]], ["rollback"],
         "the rollback replaces the source's other overrides")
    before = gw.status()["commits"]
    procs.write_file("ov.json", doc(port, "3"))
    h.wait_for(lambda: gw.status()["commits"] > before, "the file re-read")
    st, _, data = gw.request("GET", "/a/x")
    c.eq((gw.source("ov")["version"], h.echoed_header(data, "X-Tag")),
         ("1", "1"), "the rollback is kept across the next file change")


def body(procs, c):
    _, port = procs.backend("b1")
    actuator(procs, c, port)
    overrides(procs, c, port)


h.run("gateway_actuator", body)
