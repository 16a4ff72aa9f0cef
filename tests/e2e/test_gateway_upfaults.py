"""mini-gateway end to end: upstream faults on a kept-alive upstream
connection, against a raw-socket upstream on loopback. An answer whose
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
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    d = s.recv(65536)
                    if not d:
                        return
                    buf += d
                head, buf = buf.split(b"\r\n\r\n", 1)
                line = head.split(b"\r\n")[0].decode()
                with self.lock:
                    self.seen.append((cid, line))
                path = line.split()[1]
                if path.startswith("/p/long"):
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
                              b"hello" b"HTTP/1.1 200 OK\r\n"
                              b"Content-Length: 4\r\n\r\nevil")
                elif path.startswith("/p/die"):
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
    gw = procs.gateway("--routes", routes)

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
