"""mini-gateway end to end: the response timeout while a response body
streams. route metadata `response-timeout` (300 ms here) is also an idle
read timeout on the body: an upstream that sends a head and part of its
body, then stalls, has its exchange ended within about that time (the
upstream connection closed, never pooled; the client connection closed
with the body cut short: a chunked one never gets its last chunk), it is
logged (route, bytes received) and counted. A client that reads slowly
(the gateway stops reading the upstream: backpressure) is not cut: its
whole body arrives though its pauses are longer than the timeout. The
upstream is a raw-socket Python server on loopback."""
import json
import select
import socket
import threading
import time

import gwharness as h

STALL_S = 6.0  # how long the stalling upstream holds still
BIG = 8 << 20  # the slow client's body: many times the gateway's buffers


class Upstream:
    """Answers by path: /p/cl: Content-Length 10, 5 bytes, stall; /p/chunked:
    chunked, one 5-byte chunk, stall; /p/big: BIG bytes with Content-Length,
    all at once. `closed` records, per stalled path, the seconds from the
    stall to the gateway closing the connection (None: never, within
    STALL_S)."""

    def __init__(self):
        self.closed = {}
        self.lock = threading.Lock()
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(16)
        self.port = self.srv.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,),
                             daemon=True).start()

    def _serve(self, conn):
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            path = data.split(b" ", 2)[1].decode()
            if path == "/p/big":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
                             % BIG + b"x" * BIG)
                time.sleep(STALL_S)
                return
            if path == "/p/cl":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n"
                             b"\r\n12345")
            else:
                conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: "
                             b"chunked\r\n\r\n5\r\n12345\r\n")
            t0 = time.monotonic()
            got = None
            while time.monotonic() - t0 < STALL_S:
                r, _, _ = select.select([conn], [], [], 0.05)
                if r:
                    try:
                        more = conn.recv(4096)
                    except OSError:
                        more = b""
                    if not more:
                        got = time.monotonic() - t0
                        break
            with self.lock:
                self.closed[path] = got
        finally:
            conn.close()

    def close(self):
        self.srv.close()


def fetch(port, path, timeout):
    """GET path; (seconds until the gateway closed, bytes received)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    t0 = time.monotonic()
    out = b""
    try:
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                return None, out
            except ConnectionResetError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        s.close()
    return time.monotonic() - t0, out


def body(procs, c):
    up = Upstream()
    routes = procs.write_file("r.json", json.dumps({"version": "1",
        "routes": [{"id": "stall", "uri": "http://127.0.0.1:%d" % up.port,
                    "predicates": ["Path=/p/**"],
                    "metadata": {"response-timeout": 300}}]}))
    gw = procs.gateway("--routes", routes)

    # 1. Content-Length: 5 of 10 bytes, then the upstream stalls
    took, out = fetch(gw.port, "/p/cl", timeout=STALL_S - 1)
    c.ok(took is not None and took < 3,
         "Content-Length body stalled: the client is let go (%r s)" % took)
    c.ok(out.startswith(b"HTTP/1.1 200 OK\r\n") and out.endswith(b"12345"),
         "Content-Length body stalled: the head and 5 bytes came (%r)"
         % out[-40:])
    h.wait_for(lambda: "/p/cl" in up.closed, "the upstream's verdict",
               STALL_S + 2)
    c.ok(up.closed["/p/cl"] is not None and up.closed["/p/cl"] < 3,
         "Content-Length body stalled: the upstream connection closed "
         "(%r s)" % up.closed["/p/cl"])

    # 2. chunked: one chunk, then the upstream stalls; the client's body
    # must not be ended as if complete
    took, out = fetch(gw.port, "/p/chunked", timeout=STALL_S - 1)
    c.ok(took is not None and took < 3,
         "chunked body stalled: the client is let go (%r s)" % took)
    c.ok(b"12345" in out and not out.endswith(b"0\r\n\r\n"),
         "chunked body stalled: cut short, no last chunk (%r)" % out[-40:])
    h.wait_for(lambda: "/p/chunked" in up.closed, "the upstream's verdict",
               STALL_S + 2)
    c.ok(up.closed["/p/chunked"] is not None and
         up.closed["/p/chunked"] < 3,
         "chunked body stalled: the upstream connection closed (%r s)"
         % up.closed["/p/chunked"])

    c.eq(gw.metric("gateway_upstream_body_timeouts_total"), 2.0,
         "body timeouts counted")
    log = procs.log("gateway.log")
    c.ok(log.count("route stall") >= 2 and "5 body bytes" in log,
         "body timeouts logged with route and bytes: %r" % log[-600:])

    # 3. a slow client: reads nothing for 4 x the timeout, then slowly;
    # the gateway stops reading the upstream meanwhile, and is not cut
    s = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        s.sendall(b"GET /p/big HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(1.2)
        out = b""
        want = None
        while want is None or len(out) < want:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
            if want is None and b"\r\n\r\n" in out:
                want = out.index(b"\r\n\r\n") + 4 + BIG
            if len(out) < (2 << 20):
                time.sleep(0.02)  # slowly, at first
        c.eq(len(out), want, "slow client: the whole body arrived")
    finally:
        s.close()
    c.eq(gw.metric("gateway_upstream_body_timeouts_total"), 2.0,
         "slow client: no body timeout counted")
    up.close()


h.run("gateway_stall", body)
