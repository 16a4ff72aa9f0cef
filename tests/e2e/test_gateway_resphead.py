"""mini-gateway end to end: an upstream's response head however it comes
in reads. The gateway keeps the head's header names and values as slices
of its read buffer while the head is whole in one read, and copies them
when a read ends inside the head (upstream.c r_spill): an upstream here
sends its head in two writes split at every offset, one byte at a time,
after a 100 Continue, as a 70 KB head in pieces, and pipelined answers
whose last head is cut; each answer must come out with the same header
lines, in order, and the same body, on a plain route, on a route with
response edits (Add, Set, Remove, Dedupe, Rewrite, RewriteLocation), on
ones whose lines are added when absent (SecureHeaders, a rate
limiter's X-RateLimit-*) and through LocalResponseCache."""
import json
import socket
import threading
import time

import gwharness as h

# the head an answer carries (the body follows: the request's path)
LINES = [("X-A", "alpha"), ("X-Bee", "b value\twith spaces"),
         ("Set-Cookie", "s=1"), ("Set-Cookie", "s=2"),
         ("X-Rw", "a secret=1234 b"),
         ("Location", "http://backend.internal:8080/v1/some/path?q=1"),
         ("Cache-Control", "public, max-age=60"), ("Vary", "Accept")]
BIG = [("X-Big-%03d" % i, ("v%03d-" % i) * 140) for i in range(100)]


def answer(path, lines, cl=b"Content-Length"):
    body = path.encode()
    head = b"HTTP/1.1 200 OK\r\n" + b"".join(
        b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in lines)
    head += b"%s: %d\r\n\r\n" % (cl, len(body))
    return head, body


class Upstream(h.RawUpstream):
    """Answers each request in the order it came; how its bytes are cut
    into writes follows the path (see plan)."""

    def __init__(self):
        self.hits = {}
        self.lock = threading.Lock()
        super().__init__(backlog=128, nodelay=True)

    @staticmethod
    def plan(path):
        """(bytes, cut offsets) of the answer to path"""
        parts = path.split("/")
        lines = BIG if "big" in parts else LINES
        if "empty" in parts:  # a value http-parser has to read
            lines = lines[:2] + [("X-Empty", "")] + lines[2:]
        if "hop" in parts:  # hop-by-hop names in other cases: dropped
            lines = [("KEEP-ALIVE", "timeout=5")] + lines[:3] + [
                ("te", "trailers"), ("Trailer", "X-T")] + lines[3:]
        if "own" in parts:  # names the gateway adds on /s/ and /l/
            lines = lines + [("X-Frame-Options", "SAMEORIGIN"),
                             ("X-RateLimit-Remaining", "own")]
        head, body = answer(path, lines,
                            b"CONTENT-length" if "hop" in parts else
                            b"Content-Length")
        pre = b""
        if "interim" in parts:
            pre = b"HTTP/1.1 100 Continue\r\nX-Interim: 1\r\n\r\n"
        if "split" in parts:
            cuts = [len(pre) + int(parts[-1])]
        elif "trickle" in parts:
            cuts = list(range(len(pre) + 1, len(pre) + len(head)))
        elif "big" in parts:
            cuts = [len(head) // 4, len(head) // 2, len(head) * 3 // 4]
        else:
            cuts = []
        return pre + head + body, cuts

    def serve(self, s):
        buf = b""
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    return
                buf += data
                paths = []
                while b"\r\n\r\n" in buf:
                    head, buf = buf.split(b"\r\n\r\n", 1)
                    paths.append(head.split(b" ")[1].decode())
                out, cuts = b"", []
                for p in paths:
                    with self.lock:
                        self.hits[p] = self.hits.get(p, 0) + 1
                    b, cs = self.plan(p)
                    if len(paths) > 1 and p == paths[-1]:
                        cs = [len(b) // 3]  # the last of several: cut
                    cuts = [len(out) + x for x in cs]
                    out += b
                at = 0
                for x in cuts + [len(out)]:
                    s.sendall(out[at:x])
                    at = x
                    if x < len(out):
                        time.sleep(0.002 if len(cuts) > 50 else 0.02)
        except OSError:
            return
        finally:
            s.close()


def lines_of(resp):
    """(status, [(name, value)] but Content-Length and Connection, the
    body), from one whole answer read to its Content-Length"""
    head, _, rest = resp.partition(b"\r\n\r\n")
    ls = head.decode("latin-1").split("\r\n")
    out, n = [], None
    for ln in ls[1:]:
        k, _, v = ln.partition(":")
        if k.lower() == "content-length":
            n = int(v)
        elif k.lower() != "connection":
            out.append((k, v.strip(" \t")))
    status = int(ls[0].split(" ")[1]) if len(ls[0].split(" ")) > 1 else -1
    return status, out, rest[:n] if n is not None else b"<no length>"


def get(port, path, extra=b""):
    return h.raw(port, b"GET %s HTTP/1.1\r\nHost: front.example\r\n%s"
                 b"Connection: close\r\n\r\n" % (path.encode(), extra))


def body(procs, c):
    up = Upstream()
    u = "http://127.0.0.1:%d" % up.port
    routes = procs.write_file("routes.json", json.dumps({
        "version": "1", "routes": [
            {"id": "edits", "uri": u, "predicates": ["Path=/e/**"],
             "filters": ["AddResponseHeader=X-Added,1",
                         "SetResponseHeader=X-Bee,set",
                         "RemoveResponseHeader=X-A",
                         "DedupeResponseHeader=Set-Cookie",
                         "RewriteResponseHeader=X-Rw,secret=\\d+,secret=***",
                         "RewriteLocationResponseHeader=AS_IN_REQUEST, "
                         "Location, , "]},
            {"id": "cache", "uri": u, "predicates": ["Path=/c/**"],
             "filters": ["LocalResponseCache=30s,10KB"]},
            {"id": "sec", "uri": u, "predicates": ["Path=/s/**"],
             "filters": ["SecureHeaders"]},
            {"id": "limit", "uri": u, "predicates": ["Path=/l/**"],
             "filters": [{"name": "RequestRateLimiter", "args": {
                 "redis-rate-limiter.replenishRate": "1000000",
                 "redis-rate-limiter.burstCapacity": "1000000",
                 "key-resolver": "#{@remoteAddrKeyResolver}"}}]},
            {"id": "plain", "uri": u, "predicates": ["Path=/**"]}]}))
    gw = procs.gateway("--routes", routes)
    whole = answer("/p", LINES)[0]
    # the upstream's lines, unchanged, wherever the head is cut
    bad = []
    for k in range(1, len(whole)):
        p = "/p/split/%d" % k
        st, ls, b = lines_of(get(gw.port, p))
        if (st, ls, b) != (200, LINES, p.encode()):
            bad.append((k, st, ls, b))
    c.eq(bad[:2], [], "a head cut at each of its %d offsets" % len(whole))
    for p in ("/p/trickle", "/p/empty/trickle", "/p/interim/split/30",
              "/p/interim/trickle", "/p/empty/split/40"):
        want = LINES[:2] + [("X-Empty", "")] + LINES[2:] if "empty" in p \
            else LINES
        c.eq(lines_of(get(gw.port, p)), (200, want, p.encode()), p)
    for p in ("/p/hop/x", "/p/hop/split/70", "/p/hop/trickle"):
        got = get(gw.port, p)
        c.eq(lines_of(got), (200, LINES, p.encode()), p + ": hop-by-hop out")
        c.eq(got.lower().count(b"content-length:"), 1,
             p + ": one Content-Length")
    c.eq(lines_of(get(gw.port, "/p/big")), (200, BIG, b"/p/big"),
         "a 70 KB head of 100 lines in four writes")
    # lines the gateway adds when absent (SecureHeaders, a rate limiter's)
    # after the upstream's as they came, none of a name the upstream sent
    own = [("X-Frame-Options", "SAMEORIGIN"), ("X-RateLimit-Remaining", "own")]
    for p, name, want in (
            ("/s/x", "x-frame-options", ["DENY"]),
            ("/s/hop/x", "x-frame-options", ["DENY"]),
            ("/s/own/x", "x-frame-options", ["SAMEORIGIN"]),
            ("/s/own/trickle", "x-frame-options", ["SAMEORIGIN"]),
            ("/l/x", "x-ratelimit-remaining", ["<digits>"]),
            ("/l/hop/x", "x-ratelimit-remaining", ["<digits>"]),
            ("/l/own/x", "x-ratelimit-remaining", ["own"]),
            ("/l/own/split/40", "x-ratelimit-remaining", ["own"])):
        st, ls, b = lines_of(get(gw.port, p))
        up_lines = LINES + own if "own" in p else LINES
        got = [v for n, v in ls if n.lower() == name]
        got = ["<digits>" if v.isdigit() else v for v in got]  # the bucket's
        c.eq((st, ls[:len(up_lines)], b, got),
             (200, up_lines, p.encode(), want),
             p + ": the upstream's lines, then the gateway's absent ones")
        added = ("X-Content-Type-Options", "nosniff") if "/s/" in p else (
            "X-RateLimit-Burst-Capacity", "1000000")
        c.ok(added in ls, p + ": the gateway's other lines (%r)" % (ls,))
    # the edits, on a whole head and on cut ones
    want = [("X-Bee", "set"), ("Set-Cookie", "s=1"),
            ("X-Rw", "a secret=*** b"),
            ("Location", "http://front.example/some/path?q=1"),
            ("Cache-Control", "public, max-age=60"), ("Vary", "Accept"),
            ("X-Added", "1")]
    for p in ["/e/x", "/e/trickle", "/e/empty/trickle"] + [
            "/e/split/%d" % k for k in range(1, len(whole), 7)]:
        st, ls, b = lines_of(get(gw.port, p))
        c.eq((st, sorted(l for l in ls if l[0] != "X-Empty"), b),
             (200, sorted(want), p.encode()), "response edits on " + p)
        c.eq([n for n, _ in ls if n not in ("X-Added", "X-Bee", "X-Empty")],
             [n for n, _ in want if n not in ("X-Added", "X-Bee")],
             "the upstream's lines kept in their order on " + p)
    # the cache keeps what a cut head said
    for p in ("/c/split/50", "/c/trickle"):
        first = lines_of(get(gw.port, p))
        again = lines_of(get(gw.port, p))
        c.eq(up.hits.get(p), 1, p + ": the second answer from the cache")
        c.eq(first, (200, [l for l in LINES if l[0] != "Cache-Control"] +
                     [("Cache-Control", "public, max-age=30")], p.encode()),
             p + ": the upstream's lines, the route's max-age last")
        c.eq((again[0], again[1][:-1], again[2]),
             (first[0], first[1][:-1], first[2]),
             p + ": the cached answer as the first")
    # pipelined answers, the last one's head cut (--upstream-pipeline)
    gw.proc.terminate()
    gw.proc.wait(10)
    gw = procs.gateway("--routes", routes, "--upstream-pipeline", "8")
    for rnd in range(5):
        paths = ["/p/pipe/%d/%d" % (rnd, i) for i in range(6)]
        socks = [socket.create_connection(("127.0.0.1", gw.port), timeout=10)
                 for _ in paths]
        time.sleep(0.05)
        for s, p in zip(socks, paths):
            s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % p.encode())
        for s, p in zip(socks, paths):
            got = b""
            while b"\r\n\r\n" not in got or not got.endswith(p.encode()):
                d = s.recv(65536)
                if not d:
                    break
                got += d
            s.close()
            c.eq(lines_of(got), (200, LINES, p.encode()), "pipelined " + p)


if __name__ == "__main__":
    h.run("gateway_resphead", body)
