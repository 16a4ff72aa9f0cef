"""Every JSON answer of the mini-gateway's admin port is well-formed UTF-8
(RFC 8259 8.1), even when it echoes bytes that are not: a request's
(/explain's url, decoded from %XX), a route's (its id, its predicates'
values, taken as bytes from a document), an error quoting either; and
/metrics' labels (Prometheus text is UTF-8). Each
byte that is not part of well-formed UTF-8 is written \\ufffd, as the
access log writes it; well-formed text (e, a 4-byte emoji) as it is.

Usage: test_gateway_utf8.py MINI_GATEWAY
"""
import json

import gwharness as h

BAD_ID = b"r\xff\xfe"          # two stray bytes
BAD_PATH = b"/b/\xc3\x28/**"    # a lead byte without its continuation
SURROGATE = b"\xed\xa0\x80"     # U+D800 encoded: not UTF-8
GOOD = "caf\u00e9-\U0001f600"   # well-formed: kept as it is


def doc(port):
    uri = b"http://127.0.0.1:%d" % port
    return (b'{"routes":[{"id":"' + BAD_ID + b'","uri":"' + uri +
            b'","predicates":["Path=' + BAD_PATH + b'"],'
            b'"metadata":{"note":"' + SURROGATE + b'"}},'
            b'{"id":"' + GOOD.encode() + b'","uri":"' + uri +
            b'","predicates":["Path=/b/**"]},'
            b'{"id":"shadowed-' + BAD_ID + b'","uri":"' + uri +
            b'","predicates":["Path=/b/\xc3\x28/x"]}]}')


def body(procs, c):
    _, bport = procs.backend("b1")
    gw = procs.gateway()

    def answer(method, path, data=None, want=200):
        st, hd, raw = gw.admin_call(method, path, data)
        c.eq(st, want, "%s %s status" % (method, path))
        try:
            text = raw.decode("utf-8")  # strict: a stray byte raises
        except UnicodeDecodeError as e:
            c.ok(False, "%s %s: not UTF-8 (%s): %r" % (method, path, e,
                                                        raw[:300]))
            return None
        c.ok(True, "%s %s: well-formed UTF-8" % (method, path))
        try:
            return json.loads(text) if text else None
        except ValueError as e:
            c.ok(False, "%s %s: not JSON (%s): %r" % (method, path, e, text))
            return None

    answer("PUT", "/routes/bytes", doc(bport))
    rid = "r\ufffd\ufffd"
    got = answer("GET", "/routes")
    if got:
        ids = [r["id"] for r in got["routes"]]
        c.ok(rid in ids and GOOD in ids and "shadowed-" + rid in ids,
             "/routes: the stray bytes as U+FFFD, the well-formed id as it "
             "is: %r" % ids)
        r = [r for r in got["routes"] if r["id"] == rid]
        c.ok(r and r[0]["definition"]["metadata"]["note"] ==
             "\ufffd\ufffd\ufffd", "/routes: a surrogate's 3 bytes, 3 U+FFFD")
    got = answer("GET", "/explain?method=GET&url=/b/%C3(/x%FF")
    if got:
        c.eq(got["path"], "/b/\ufffd(/x\ufffd", "/explain echoes the url")
        c.eq(got["route"], rid, "/explain: the route matched")
    got = answer("GET", "/shadowed")
    if got:
        c.ok(any(s["route"] == "shadowed-" + rid
                 for s in got["shadowed"]), "/shadowed: %r" % got)
    answer("GET", "/report")
    answer("GET", "/changes")
    answer("GET", "/status")
    answer("GET", "/actuator/gateway/routes")
    answer("GET", "/actuator/gateway/routedefinitions")
    got = answer("GET", "/actuator/gateway/routes/r%FF%FE")
    if got:
        c.eq(got.get("route_id"), rid, "actuator: the route by its id")
    # an error quoting a request's bytes and a route's
    got = answer("GET", "/explain?method=G%FFT&url=/b", want=400)
    c.ok(got and "G\ufffdT" in json.dumps(got, ensure_ascii=False),
         "explain: the method quoted, U+FFFD for its stray byte: %r" % got)
    bad = doc(bport).replace(b"Path=", b"Pa\xffth=", 1)
    got = answer("PUT", "/routes/bytes", bad, want=400)
    c.ok(got and "Pa\ufffdth" in json.dumps(got, ensure_ascii=False),
         "a refused document: the error names the predicate, U+FFFD for "
         "its stray byte: %r" % got)
    got = answer("PUT", "/routes/bytes?dry_run=1", bad.replace(
        b"Pa\xffth=", b"Path=").replace(b"shadowed-", b"new-"))
    if got:
        c.ok("new-" + rid in json.dumps(got, ensure_ascii=False),
             "the dry run names the new route: %r" % got)
    # the stray bytes reach the routes as they are (only the answers are
    # written otherwise): a request for the path they make is routed
    out = h.raw(gw.port, b"GET /b/\xc3(/q HTTP/1.1\r\nHost: a\r\n"
                b"Connection: close\r\n\r\n")
    c.ok(out.startswith(b"HTTP/1.1 200"),
         "the route with the stray bytes still routes them: %r" % out[:80])
    # /metrics (Prometheus text, UTF-8) labels the request with its route
    st, _, raw = gw.admin_call("GET", "/metrics")
    c.eq(st, 200, "GET /metrics status")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        text = ""
        c.ok(False, "/metrics: not UTF-8 (%s)" % e)
    c.ok('route="%s"' % rid in text, "/metrics: the route label with "
         "U+FFFD for its stray bytes")
    c.done(procs)


h.run("gateway_utf8", body)
