"""mini-gateway end to end: hostile clients each get their error status
and the gateway stays up: a slowloris head (408 after --header-timeout),
silent connections, an oversized header and too many headers (431), a
malformed request line and header (400), request smuggling with both
Content-Length and chunked (400), a path climbing above the root with
`..` or `%2e%2e` (400, never forwarded), an encoded slash `%2F` (400 by
default: --escaped-slashes reject), and dot segments inside the root
normalised before matching and forwarding. The connection deadlines (armed
lazily, examples/mini-gateway/util.c) fire on time in every order: a
keep-alive connection idle past --idle-timeout is closed, not before and not
at the earlier header deadline, and a second head trickling in on it gets
its 408 after --header-timeout."""
import json
import socket
import threading
import time

import gwharness as h

# How the timing checks below are bounded. The gateway arms a deadline on
# a libuv timer at uv_now() + timeout, uv_now() being read after epoll
# returned with the bytes that armed it, and fires it no earlier than that
# (examples/mini-gateway/util.c); its clock is CLOCK_MONOTONIC in whole
# milliseconds (possibly the coarse clock, one tick behind), as is
# time.monotonic(). So, timed from just before the client sends those
# bytes, an answer or a close never comes before timeout - EARLY: a lower
# bound that holds however loaded the machine is. How late it comes is
# the scheduler's: the upper bounds only tell a deadline that fired from
# one that did not (or fired at another deadline), with LATE seconds for a
# gateway and a client waiting for a CPU on a loaded runner.
EARLY = 0.005
LATE = 0.8


def status_of(resp):
    try:
        return int(resp.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def forwarded_path(resp):
    """The path the backend saw (it echoes it as JSON), or what came back
    instead: the check always runs, whatever the status."""
    try:
        return json.loads(resp.split(b"\r\n\r\n", 1)[1])["path"]
    except (IndexError, ValueError, KeyError, TypeError):
        return "no echo from the backend: %r" % resp[:120]


def body(procs, c):
    _, b1 = procs.backend("b1")
    routes = procs.write_file("routes.json", json.dumps({"version": "1",
        "routes": [
            {"id": "api", "uri": "http://127.0.0.1:%d" % b1,
             "predicates": ["Path=/api/**"]},
            {"id": "files", "uri": "http://127.0.0.1:%d" % b1,
             "predicates": ["Path=/files/{name}"],
             "filters": ["SetPath=/store/{name}"]},
            {"id": "inj", "uri": "http://127.0.0.1:%d" % b1,
             "predicates": ["Path=/inj/{seg}"],
             "filters": ["AddRequestHeader=X-Seg, v-{seg}",
                         "AddResponseHeader=X-RSeg, v-{seg}",
                         "SetRequestHeader=X-Set, {seg}"]}]}))
    gw = procs.gateway("--routes", routes, "--header-timeout", "1000",
                       "--max-header-bytes", "16384")
    port = gw.port

    def alive(what):
        st, _, data = gw.request("GET", "/api/ok")
        c.eq(st, 200, "still serving after %s" % what)

    # slowloris: a head trickling in, one byte at a time
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    t0 = time.monotonic()  # before the bytes that arm the header deadline
    s.sendall(b"GET /api/x HTTP/1.1\r\nHost: a\r\n")
    got = trickle(s, [bytes([ch]) for ch in b"X-Slow: " + b"z" * 100], 0.05)
    took = time.monotonic() - t0
    s.close()
    c.eq(status_of(got), 408, "slowloris: 408")
    c.ok(1.0 - EARLY <= took < 3, "slowloris cut after ~1 s (%.2f s)" % took)

    # many silent connections do not block others, and are closed
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(50)]
    opened = time.monotonic()
    alive("50 silent connections")
    # each is closed 1 s after its accept (after `opened` at the latest on
    # an idle gateway): polled until then plus 2 s for a loaded one
    closed = 0
    for s in silent:
        s.settimeout(max(0.05, opened + 1.0 + 2.0 - time.monotonic()))
        try:
            if s.recv(100) == b"":
                closed += 1
        except OSError:
            pass
        s.close()
    c.eq(closed, 50, "silent connections closed after the header timeout")

    big = b"GET /api/x HTTP/1.1\r\nHost: a\r\nX-Big: " + b"a" * 20000 + \
        b"\r\n\r\n"
    c.eq(status_of(h.raw(port, big)), 431, "oversized header: 431")
    many = b"GET /api/x HTTP/1.1\r\nHost: a\r\n" + \
        b"".join(b"X-H%d: v\r\n" % i for i in range(300)) + b"\r\n"
    c.eq(status_of(h.raw(port, many)), 431, "too many headers: 431")
    c.eq(status_of(h.raw(port, b"GARBAGE\r\n\r\n")), 400,
         "malformed request line: 400")
    c.eq(status_of(h.raw(port, b"GET /api/x HTTP/1.1 extra\r\n\r\n")), 400,
         "junk after the version: 400")
    c.eq(status_of(h.raw(port, b"GET /api/x HTTP/1.1\r\nBad Header\r\n\r\n")),
         400, "malformed header: 400")
    smuggle = (b"POST /api/x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /api/evil "
               b"HTTP/1.1\r\nHost: a\r\n\r\n")
    c.eq(status_of(h.raw(port, smuggle)), 400,
         "Content-Length with chunked: 400")
    # (the gateway keeps these two connections open after its 400: the
    # answer's head is read, not the 5 s until raw()'s timeout)
    c.eq(status_of(h.raw(port, b"GET /api/x HTTP/1.1\r\n\r\n",
                         read_all=False)), 400, "HTTP/1.1 without Host: 400")
    c.eq(status_of(h.raw(port, b"GET /api/x HTTP/1.1\r\nHost: a\r\n"
                         b"Host: b\r\n\r\n", read_all=False)), 400,
         "two Host headers: 400")
    alive("malformed requests")

    for path in (b"/api/../../etc/passwd", b"/api/%2e%2e/%2e%2e/etc/passwd",
                 b"/../api/x"):
        resp = h.raw(port, b"GET " + path + b" HTTP/1.1\r\nHost: a\r\n"
                     b"Connection: close\r\n\r\n")
        c.eq(status_of(resp), 400, "%s climbs above the root: 400" %
             path.decode())
    resp = h.raw(port, b"GET /files/a%2Fb HTTP/1.1\r\nHost: a\r\n"
                 b"Connection: close\r\n\r\n")
    c.eq(status_of(resp), 400, "encoded slash: 400")
    resp = h.raw(port, b"GET /api/x/../y/./z HTTP/1.1\r\nHost: a\r\n"
                 b"Connection: close\r\n\r\n")
    c.eq(status_of(resp), 200, "dot segments inside the root: routed")
    c.eq(forwarded_path(resp), "/api/y/z", "forwarded path is normalised")
    resp = h.raw(port, b"GET /admin/../api/x HTTP/1.1\r\nHost: a\r\n"
                 b"Connection: close\r\n\r\n")
    c.eq(status_of(resp), 200, "/admin/../api/x is routed as /api/x")
    c.eq(forwarded_path(resp), "/api/x", "/admin/../api/x forwarded as /api/x")
    # a {var} in a header value is the path's decoded segment: an encoded
    # CR LF in it injected a header upstream and into the client's answer
    # (response splitting). Kept encoded instead, no line break sent.
    st, hd, data = gw.request("GET", "/inj/a%0d%0aX-Evil:%201%00")
    sent = json.loads(data).get("headers", []) if st == 200 else []
    names = [n.lower() for n, _ in sent]
    c.ok(st == 200 and "x-evil" not in names and "x-evil" not in hd,
         "an encoded CR LF in a {var} injects no header (%d %r %r)"
         % (st, sent, sorted(hd)))
    c.eq((h.echoed_header(data, "X-Seg"), hd.get("x-rseg")),
         ("v-a%0D%0AX-Evil: 1%00", "v-a%0D%0AX-Evil: 1%00"),
         "the control bytes go out percent-encoded, as the client sent them")
    alive("hostile paths")
    c.eq(gw.proc.poll(), None, "the gateway process is up")

    deadlines(procs, c, routes)


def trickle(s, pieces, delay):
    """Send pieces of a head `delay` seconds apart until the gateway
    answers; returns the answer's head (b"" if none came). A piece sent
    after the gateway answered and closed may fail (a reset): the answer
    already received is still read."""
    got = b""
    try:
        for piece in pieces:
            try:
                s.sendall(piece)
            except OSError:
                break  # reset after the answer: read it below
            time.sleep(delay)
            s.setblocking(False)
            try:
                got += s.recv(4096)
            except BlockingIOError:
                pass
            s.setblocking(True)
            if got:
                break
        s.settimeout(3)
        while b"\r\n\r\n" not in got:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    return got


def read_response(s):
    """One response with a Content-Length body from socket s."""
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = s.recv(4096)
        if not chunk:
            return got
        got += chunk
    head, rest = got.split(b"\r\n\r\n", 1)
    n = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    while len(rest) < n:
        chunk = s.recv(4096)
        if not chunk:
            break
        rest += chunk
    return head + b"\r\n\r\n" + rest


def closed_within(s, seconds):
    """Seconds until the peer closes s (None: still open after `seconds`)."""
    t0 = time.monotonic()
    s.settimeout(seconds)
    try:
        if s.recv(100) == b"":
            return time.monotonic() - t0
    except socket.timeout:
        return None
    except OSError:
        return time.monotonic() - t0
    return None


def deadlines(procs, c, routes):
    gw = procs.gateway("--routes", routes, "--header-timeout", "600",
                       "--idle-timeout", "1500")
    get = b"GET /api/k HTTP/1.1\r\nHost: a\r\n\r\n"
    # idle after one request: open past the header deadline (0.6 s), closed
    # by the idle deadline (1.5 s after the response). The gateway arms it
    # when it finished the response: after `sent` (it had the request), and
    # before `answered` (the client had the response), so the close comes
    # no earlier than sent + 1.5 - EARLY, and is due by answered + 1.5.
    s = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
    sent = time.monotonic()
    s.sendall(get)
    c.eq(status_of(read_response(s)), 200, "keep-alive request answered")
    answered = time.monotonic()
    left = closed_within(s, 3.0)
    c.ok(left is not None, "an idle keep-alive connection is closed")
    if left is not None:
        gone = answered + left
        c.ok(gone - sent >= 0.6 + 0.4,
             "an idle keep-alive connection outlives the header deadline "
             "(closed %.2f s after its request)" % (gone - sent))
        c.ok(1.5 - EARLY <= gone - sent and gone - answered <= 1.5 + LATE,
             "closed ~1.5 s after its response (%.2f s after the request, "
             "%.2f s after the response)" % (gone - sent, gone - answered))
    s.close()
    # requests keep a connection alive past both deadlines
    s = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
    ok = 0
    for _ in range(8):
        s.sendall(get)
        ok += status_of(read_response(s)) == 200
        time.sleep(0.3)
    c.eq(ok, 8, "8 requests 0.3 s apart on one connection over 2.4 s")
    # a second head trickling in after 0.3 s idle: 408 ~0.6 s after it began
    time.sleep(0.3)
    t0 = time.monotonic()  # before the bytes that arm the header deadline
    s.sendall(b"GET /api/k HTTP/1.1\r\n")
    got = trickle(s, [b"X-Slow: z\r\n"] * 30, 0.1)
    waited = time.monotonic() - t0
    c.eq(status_of(got), 408, "a slow second head on a kept connection: 408")
    c.ok(0.6 - EARLY <= waited <= 0.6 + 0.1 + LATE,
         "408 after the header timeout (%.2f s)" % waited)
    s.close()


h.run("gateway_hostile", body)
