"""mini-gateway end to end: upstream faults, against a raw-socket
upstream on loopback. An upstream that dies mid-body (a Content-Length
body, a chunked one): the client's connection is closed with the body
cut short (a chunked one without its last chunk), never a short body
presented as whole; the access log says `"cut":true`, it is logged with
the route and the body bytes and counted
(gateway_upstream_body_cuts_total; before, the access log and metrics
showed a plain 200). A 204 or a 304 whose upstream gave it
a Content-Length has no body (RFC 9112 6.3): answered at once, the next
request on the client's connection too (before, the gateway waited for
that many body bytes: the client's connection held until the body
timeout cut it), a 204 without the Content-Length (RFC 9110 8.6; nginx
drops it too). An answer whose
body is longer than its Content-Length (the extra bytes a second,
unasked-for answer) is passed on as framed, and its connection is closed,
never pooled: a later request must not be read against those bytes
(response desync; nginx's "upstream sent more data than specified in
Content-Length"), and it is logged. A pooled connection that the upstream
closes on a request without answering: an idempotent request (GET) is
sent once more on a fresh connection and answered; a POST, though it has
no body, is not sent twice (the upstream may have acted on it): 502, as
nginx's proxy_next_upstream without non_idempotent. (Before the fixes
the extra bytes' connection went back to the pool, the bytes dropped
unseen, and the POST was sent twice.)"""
import json
import threading
import time

import gwharness as h


class Upstream(h.RawUpstream):
    """Answers by path: /p/long: 'hello' with Content-Length 5 followed in
    the same write by a second answer ('evil'); /p/die: closes the
    connection without answering; else 'ok'. `seen` lists (connection
    number, request line)."""

    def __init__(self):
        self.n = 0
        self.seen = []
        self.lock = threading.Lock()
        super().__init__()

    def serve(self, s):
        with self.lock:
            self.n += 1
            cid = self.n
        try:
            for head in self.heads(s):
                line = head.split(b"\r\n")[0].decode()
                with self.lock:
                    self.seen.append((cid, line))
                path = line.split()[1]
                if path.startswith("/p/long"):
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
                              b"hello" b"HTTP/1.1 200 OK\r\n"
                              b"Content-Length: 4\r\n\r\nevil")
                elif path.startswith("/p/nc"):  # a 204 with a length
                    s.sendall(b"HTTP/1.1 204 No Content\r\nX-A: 1\r\n"
                              b"Content-Length: 5\r\n\r\n")
                elif path.startswith("/p/nm"):  # a 304 with its length
                    s.sendall(b"HTTP/1.1 304 Not Modified\r\nETag: \"e\"\r\n"
                              b"Content-Length: 1234\r\n\r\n")
                elif path.startswith("/p/crlf"):  # one CRLF too many
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                              b"\r\nok\r\n")
                elif path.startswith("/p/die"):
                    return
                elif path.startswith("/p/cut-cl"):  # 40 of 100, then gone
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n"
                              b"\r\n" + b"x" * 40)
                    time.sleep(0.1)
                    return
                elif path.startswith("/p/cut-ch"):  # one chunk, then gone
                    s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: "
                              b"chunked\r\n\r\n5\r\nhello\r\n")
                    time.sleep(0.1)
                    return
                else:
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"
                              b"ok")
        finally:
            s.close()

    def take(self):
        with self.lock:
            seen, self.seen = self.seen, []
        return seen


def body(procs, c):
    up = Upstream()
    routes = procs.write_file("routes.json", json.dumps({"version": "1",
        "routes": [{"id": "p", "uri": "http://127.0.0.1:%d" % up.port,
                    "predicates": ["Path=/p/**"]}]}))
    access = procs.dir + "/access.log"
    gw = procs.gateway("--routes", routes, "--access-log", access)

    # killed mid-body: the client's connection is cut, never a short body
    # presented as complete; logged, counted, and marked in the access log
    out = h.raw(gw.port, b"GET /p/cut-cl HTTP/1.1\r\nHost: x\r\n\r\n")
    c.ok(out.startswith(b"HTTP/1.1 200") and out.endswith(b"x" * 40) and
         b"Content-Length: 100" in out, "Content-Length body: 40 bytes of "
         "100, then the connection closed (%r)" % out[-60:])
    out = h.raw(gw.port, b"GET /p/cut-ch HTTP/1.1\r\nHost: x\r\n\r\n")
    c.ok(out.endswith(b"5\r\nhello\r\n"), "chunked: no last chunk, "
         "the connection closed (%r)" % out[-40:])
    out = h.raw(gw.port, b"GET /p/ok HTTP/1.1\r\nHost: x\r\n"
                b"Connection: close\r\n\r\n")
    c.ok(out.endswith(b"\r\n\r\nok"), "a whole answer")
    h.wait_for(lambda: len(open(access).read().splitlines()) >= 3,
               "three access log lines")
    cuts = {x["path"]: x["cut"] for x in
            map(json.loads, open(access).read().splitlines())}
    c.eq(cuts, {"/p/cut-cl": True, "/p/cut-ch": True, "/p/ok": False},
         "the access log's cut")
    c.eq(gw.metric("gateway_upstream_body_cuts_total"), 2.0,
         "gateway_upstream_body_cuts_total")
    log = procs.log("gateway.log")
    c.ok("route p: upstream connection ended mid-body after 40 body bytes "
         "(closed)" in log and "after 5 body bytes" in log,
         "each cut logged with its route and bytes")
    up.take()

    # a body longer than its Content-Length
    st, _, b = gw.request("GET", "/p/long")
    c.eq((st, b), (200, b"hello"), "the answer as its Content-Length frames")
    st, _, b = gw.request("GET", "/p/ok")
    c.eq((st, b), (200, b"ok"), "the next request's own answer")
    seen = up.take()
    c.eq(len({cid for cid, _ in seen}), 2,
         "the next request on a fresh connection (%r)" % seen)
    h.wait_for(lambda: "route p: upstream sent 42 bytes after its answer"
               in procs.log("gateway.log"), "the extra bytes logged")

    # one CRLF after an answer (some servers' habit) is let be: the
    # connection is kept, nothing logged
    for path in ("/p/crlf", "/p/ok"):
        st, _, b = gw.request("GET", path)
        c.eq((st, b), (200, b"ok"), path)
    seen = up.take()
    c.eq(len({cid for cid, _ in seen}), 1,
         "one connection after a trailing CRLF (%r)" % seen)
    c.ok("bytes after its answer" not in procs.log("gateway.log")
         .split("42 bytes after its answer")[1], "a CRLF not logged")

    # a 204 or a 304 with a Content-Length has no body: answered at once
    # (a 204 without the Content-Length, a 304 with it), and the next
    # answer on the client's connection follows at once, whole
    for path, status, cl in (("/p/nc", b"204", None),
                             ("/p/nm", b"304", b"Content-Length: 1234")):
        t0 = time.monotonic()
        out = h.raw(gw.port, b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n"
                    b"GET /p/ok HTTP/1.1\r\nHost: x\r\n"
                    b"Connection: close\r\n\r\n" % path.encode(), timeout=3)
        took = time.monotonic() - t0
        first, _, rest = out.partition(b"\r\n\r\n")
        c.ok(first.startswith(b"HTTP/1.1 " + status) and
             (cl in first if cl else b"content-length" not in first.lower()),
             "%s: the head, Content-Length %s (%r)" % (
                 path, "kept" if cl else "dropped", first))
        c.ok(rest.startswith(b"HTTP/1.1 200") and
             rest.endswith(b"\r\n\r\nok") and took < 2,
             "%s: the next answer whole, at once (%.1f s, %r)" % (
                 path, took, rest))
    up.take()

    # a pooled connection closed on a request without an answer
    for method, want in (("GET", 200), ("POST", 502)):
        st, _, _ = gw.request("GET", "/p/ok")  # a connection in the pool
        c.eq(st, 200, "the pool filled")
        up.take()
        st, _, _ = gw.request(method, "/p/die/x")
        if method == "GET":
            seen = up.take()
            c.eq([line for _, line in seen], ["GET /p/die/x HTTP/1.1"] * 2,
                 "GET sent once more on a fresh connection")
            c.ok(len({cid for cid, _ in seen}) == 2, "on two connections")
        else:
            c.eq(st, want, "POST on a broken pooled connection: 502")
            c.eq([line for _, line in up.take()], ["POST /p/die/x HTTP/1.1"],
                 "the POST sent once, never again")


h.run("gateway_upfaults", body)
