"""mini-gateway end to end: "run or refuse" as a Spring Cloud Gateway team
tries it, through every door a document comes in (admin PUT, its dry run,
SCG's actuator POST), for the cases an adversarial pass found accepted and
ignored: each check names what SCG does (route-model.md section 9).

Argument: the mini-gateway binary.
"""
import json

import gwharness as h


def body(procs, c):
    _, bport = procs.backend("b1")
    B = "http://127.0.0.1:%d" % bport
    g = procs.gateway()

    # A dry run answers what the real PUT would do: the gateway's own checks
    # of a document (a route's cors metadata) refuse it in both.
    typo = [{"id": "c1", "uri": B, "predicates": ["Path=/c1"],
             "metadata": {"cors": {"allowedOrigins": "*",
                                   "alowedMethods": "GET"}}}]
    st, _, real = g.admin_call("PUT", "/routes/s1", typo)
    c.eq(st, 400, "PUT of a cors typo is refused (%r)" % real[:200])
    st, _, dry = g.admin_call("PUT", "/routes/s1?dry_run=1", typo)
    d = json.loads(dry)
    c.ok(st == 400 and d.get("ok") is False and
         d["error"]["path"] == "[0].metadata.cors" and
         "alowedMethods" in d["error"]["message"],
         "the dry run of a cors typo is refused at its key, as the PUT "
         "(%d %r)" % (st, dry[:300]))

    # The key written with a JSON escape is the same key: the library reads
    # it as "cors", so the gateway's check must too (it was accepted, and
    # every CORS request of the route answered 500).
    esc = ('[{"id": "c2", "uri": "%s", "predicates": ["Path=/c2"], '
           '"metadata": {"\\u0063ors": {"allowedOrigns": "*"}}}]' % B)
    st, _, real = g.admin_call("PUT", "/routes/s1", esc)
    err = json.loads(real).get("error", {}) if st == 400 else {}
    c.ok(st == 400 and err.get("path") == "[0].metadata.cors",
         "a cors key written \\u0063ors is checked as cors (%d %r)"
         % (st, real[:200]))
    st, _, _ = g.request("GET", "/c2", headers={"Origin": "https://a.example"})
    c.eq(st, 404, "and the route does not serve")

    # SCG binds Retry's statuses and methods as lists: a YAML list (what
    # `switchyard convert` writes as a JSON array) is one list, not a field
    # "given twice"; the route runs with both statuses.
    rt = {"id": "rt", "uri": B, "predicates": ["Path=/rt/**"],
          "filters": [{"name": "Retry", "args": {
              "retries": "2", "statuses": ["BAD_GATEWAY", "503"],
              "methods": ["GET", "POST"]}}]}
    st, _, out = g.admin_call("POST", "/actuator/gateway/routes/rt", rt)
    c.eq(st, 201, "actuator POST of a Retry with status and method lists "
         "(%r)" % out[:300])
    if st == 201:
        before = g.metric("gateway_retry_attempts_total") or 0
        st, _, _ = g.request("POST", "/rt/x?status=503", body=b"x")
        c.eq(st, 503, "a POST answered 503 stays 503 after the tries")
        after = g.metric("gateway_retry_attempts_total") or 0
        c.eq(after - before, 2, "both retries were made (503 and POST are "
             "in the lists)")

    # An empty list is an empty list (Spring binds `series: []` as ""), not
    # a missing key that brings SERVER_ERROR back: with no series, a 500 is
    # not retried.
    rs = {"id": "rs", "uri": B, "predicates": ["Path=/rs/**"],
          "filters": [{"name": "Retry", "args": {
              "retries": "2", "statuses": "BAD_GATEWAY", "series": []}}]}
    st, _, out = g.admin_call("PUT", "/routes/s2/rs", rs)
    c.eq(st, 200, "PUT of a Retry with an empty series (%r)" % out[:300])
    if st == 200:
        before = g.metric("gateway_retry_attempts_total") or 0
        st, _, _ = g.request("GET", "/rs/x?status=500")
        c.eq(st, 500, "the 500 is answered")
        after = g.metric("gateway_retry_attempts_total") or 0
        c.eq(after - before, 0, "a 500 is not retried with series: []")


    # SCG runs a forward: route's path filters on the uri's path; the
    # gateway forwards to the uri's path as written: refused, not dropped.
    fw = {"id": "fw", "uri": "forward:/rt/x", "predicates": ["Path=/fw/**"],
          "filters": ["StripPrefix=1"]}
    st, _, out = g.admin_call("PUT", "/routes/s3/fw", fw)
    err = json.loads(out).get("error", {}) if st == 400 else {}
    c.ok(st == 400 and err.get("path") == "route.filters[0]" and
         "forward:" in err.get("message", ""),
         "a StripPrefix on a forward: route is refused at the filter "
         "(%d %r)" % (st, out[:300]))

    # A header value (or name) the route writes holds a line break: it was
    # accepted and sent as written, one header becoming two upstream or in
    # the client's answer. Refused at the arg.
    crlf = "a\r\nX-Evil: 1"
    for i, (f, where) in enumerate([
            ({"name": "AddRequestHeader", "args": {"name": "X-A",
                                                   "value": crlf}}, "value"),
            ({"name": "SetResponseHeader", "args": {"name": "X-A",
                                                    "value": crlf}}, "value"),
            ({"name": "AddResponseHeader", "args": {"name": "X-A",
                                                    "value": crlf}}, "value"),
            ({"name": "SetRequestHeader", "args": {"name": "X-A",
                                                   "value": crlf}}, "value"),
            ({"name": "SetRequestHostHeader", "args": {"host": crlf}},
             "host"),
            ({"name": "AddRequestHeadersIfNotPresent",
              "args": {"headers": "X-A:" + crlf}}, "headers"),
            ({"name": "RewriteResponseHeader", "args": {
                "name": "X-A", "regexp": "a", "replacement": crlf}},
             "replacement"),
            ({"name": "RewriteLocationResponseHeader", "args": {
                "hostValue": crlf}}, "hostValue"),
            ({"name": "RequestHeaderSize", "args": {
                "maxSize": "1KB", "errorHeaderName": "X-E\r\nX-Evil"}},
             "errorHeaderName"),
            ({"name": "RequestHeaderSize", "args": {
                "maxSize": "1KB", "errorHeaderName": ""}},
             "errorHeaderName")]):
        r = {"id": "h%d" % i, "uri": B, "predicates": ["Path=/h%d" % i],
             "filters": [f]}
        st, _, out = g.admin_call("PUT", "/routes/hv/h%d" % i, r)
        err = json.loads(out).get("error", {}) if st == 400 else {}
        c.ok(st == 400 and
             err.get("path") == "route.filters[0].args." + where,
             "%s: a line break or empty name in %s is refused at it "
             "(%d %r)" % (f["name"], where, st, out[:200]))

    # RewritePath's replacement is the path sent upstream: a space or a
    # line break in it went into the request line as written (the upstream
    # answered 400, or read a header of the route's making).
    for i, rep in enumerate(["/x y/${s}", "/x\r\nX-Evil: 1/${s}",
                             "/caf\u00e9/${s}"]):
        r = {"id": "rp%d" % i, "uri": B, "predicates": ["Path=/rp%d/**" % i],
             "filters": [{"name": "RewritePath", "args": {
                 "regexp": "/rp%d/(?<s>.*)" % i, "replacement": rep}}]}
        st, _, out = g.admin_call("PUT", "/routes/rp/rp%d" % i, r)
        err = json.loads(out).get("error", {}) if st == 400 else {}
        c.ok(st == 400 and
             err.get("path") == "route.filters[0].args.replacement",
             "RewritePath replacement %r is refused at it (%d %r)"
             % (rep, st, out[:200]))

    # An admin change's query says how to make it: a key the gateway does
    # not read (a misspelt ?version= of a rollback) must not leave a
    # different change made (the previous version rolled back to).
    for v in ("1", "2", "3"):
        st, _, out = g.admin_call("PUT", "/routes/rb", {
            "version": v, "routes": [
                {"id": "rb", "uri": B, "predicates": ["Path=/rb/**"],
                 "filters": ["SetResponseHeader=X-V, %s" % v]}]})
        c.eq(st, 200, "rb version %s (%r)" % (v, out[:200]))
    for q in ("?versoin=1", "?version=1&version=2", "?version=1&x=2"):
        st, _, out = g.admin_call("POST", "/rollback/rb" + q)
        c.ok(st == 400 and b"nothing changed" in out,
             "POST /rollback/rb%s is refused (%d %r)" % (q, st, out[:200]))
    st, hd, _ = g.request("GET", "/rb/x")
    c.eq(hd.get("x-v"), "3", "and the route is as it was")
    for m, path, doc in (("PUT", "/routes/rb?force=1", []),
                         ("DELETE", "/routes/rb/rb?x=1", None),
                         ("PUT", "/instances/svc?replace=0", [])):
        st, _, out = g.admin_call(m, path, doc)
        c.ok(st == 400 and b"nothing changed" in out,
             "%s %s is refused (%d %r)" % (m, path, st, out[:200]))
    st, hd, _ = g.request("GET", "/rb/x")
    c.eq(hd.get("x-v"), "3", "the route is still there")
    st, _, out = g.admin_call("POST", "/rollback/rb?version=1")
    c.eq(st, 200, "?version=1 rolls back (%r)" % out[:200])
    st, hd, _ = g.request("GET", "/rb/x")
    c.eq(hd.get("x-v"), "1", "to version 1's route")


if __name__ == "__main__":
    h.run("gateway_audit", body)
