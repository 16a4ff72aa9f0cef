"""mini-gateway end to end: HTTP/1.1 pipelining to upstreams
(--upstream-pipeline N). Requests of one loop turn for one pool go out in
one write on one connection; each answer reaches its own client, in
order; HEAD answers have no body; a connection that breaks before an
answer began has its unanswered requests sent again (no client error); a
response timeout answers the slow request 504 and sends those behind it
again; a client that goes away while queued breaks nobody else; POST is
never pipelined. A recording upstream (a Python server on loopback) shows
what arrived in each read of each connection; the test backend
(backend.c on httpd.c) serves pipelined requests in order."""
import json
import signal
import socket
import threading
import time

import gwharness as h


class Upstream:
    """An HTTP/1.1 server that records each recv (the requests it held)
    and answers in order: {"path": ...}. mode "drop": on a connection's
    first recv holding 2 or more requests, answer the first only, then
    close (an upstream dying mid-pipeline). A path with "slow" is answered
    after `slow_s`."""

    def __init__(self, mode="", slow_s=0.0):
        self.mode, self.slow_s = mode, slow_s
        self.lock = threading.Lock()
        self.recvs = []  # (conn id, [(method, path)])
        self.drops = 0
        self.conns = 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.stop = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.stop:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.conns += 1
                cid = self.conns
            threading.Thread(target=self.serve, args=(s, cid),
                             daemon=True).start()

    def serve(self, s, cid):
        buf = b""
        first = True
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    return
                buf += data
                reqs = []
                while b"\r\n\r\n" in buf:
                    head, rest = buf.split(b"\r\n\r\n", 1)
                    lines = head.decode("latin-1").split("\r\n")
                    method, path = lines[0].split(" ")[:2]
                    n = 0
                    for ln in lines[1:]:
                        k, _, v = ln.partition(":")
                        if k.strip().lower() == "content-length":
                            n = int(v.strip())
                    if len(rest) < n:
                        break
                    buf = rest[n:]
                    reqs.append((method, path))
                if not reqs:
                    continue
                with self.lock:
                    self.recvs.append((cid, reqs))
                drop = self.mode == "drop" and first and len(reqs) >= 2
                first = False
                out = b""
                for method, path in reqs:
                    if "slow" in path:
                        s.sendall(out)
                        out = b""
                        time.sleep(self.slow_s)
                    body = json.dumps({"path": path}).encode()
                    out += (b"HTTP/1.1 200 OK\r\nContent-Type: application/"
                            b"json\r\nContent-Length: %d\r\n\r\n" % len(body))
                    if method != "HEAD":
                        out += body
                    if drop:
                        break
                s.sendall(out)
                if drop:
                    with self.lock:
                        self.drops += 1
                    return
        except OSError:
            return
        finally:
            s.close()

    def count(self, cond):
        """The recvs whose list of paths holds cond(paths)."""
        with self.lock:
            return sum(1 for _, r in self.recvs if cond([p for _, p in r]))

    def batched(self):
        """The most requests one recv held."""
        with self.lock:
            return max([len(r) for _, r in self.recvs] or [0])

    def close(self):
        self.stop = True
        self.sock.close()


def routes(procs, name, uri):
    return procs.write_file(name, json.dumps({"version": "1", "routes": [
        {"id": "p", "uri": uri, "predicates": ["Path=/p/**"]}]}))


def burst(gw, reqs, timeout=10.0, close_after_send=()):
    """Send each raw request on its own connection while the gateway is
    stopped (SIGSTOP), so that it reads them all in one loop turn, then
    read each answer: [(status, headers, body)] in the order of reqs; None
    for a socket in close_after_send (closed right after its request
    went)."""
    socks = [socket.create_connection(("127.0.0.1", gw.port),
                                      timeout=timeout) for _ in reqs]
    time.sleep(0.05)  # accepted
    gw.proc.send_signal(signal.SIGSTOP)
    try:
        for i, (s, r) in enumerate(zip(socks, reqs)):
            s.sendall(r)
        for i in close_after_send:
            socks[i].close()
        time.sleep(0.02)
    finally:
        gw.proc.send_signal(signal.SIGCONT)
    out = []
    for i, (s, r) in enumerate(zip(socks, reqs)):
        if i in close_after_send:
            out.append(None)
            continue
        out.append(read_response(s, r.startswith(b"HEAD ")))
        s.close()
    return out


def read_response(s, head):
    f = s.makefile("rb")
    try:
        line = f.readline()
        if not line:
            return (-1, {}, b"")
        status = int(line.split()[1])
        hdrs = {}
        while True:
            ln = f.readline().rstrip(b"\r\n")
            if not ln:
                break
            k, _, v = ln.decode("latin-1").partition(":")
            hdrs[k.strip().lower()] = v.strip()
        n = 0 if head else int(hdrs.get("content-length", "0"))
        return (status, hdrs, f.read(n) if n else b"")
    except (OSError, ValueError) as e:
        return (-1, {}, repr(e).encode())
    finally:
        f.close()


def get(path, method="GET"):
    return (b"%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            % (method.encode(), path.encode()))


def own_paths(res, paths, what):
    """Every answer 200, naming its own path."""
    bad = []
    for r, p in zip(res, paths):
        if r is None:
            continue
        ok = r[0] == 200
        if ok and not p.startswith("HEAD "):
            try:
                ok = json.loads(r[2])["path"] == p
            except ValueError:
                ok = False
        if not ok:
            bad.append((p, r[0], r[2][:80]))
    return bad


def body(procs, c):
    # refused values, located by the flag's name
    for v in ("0", "65", "x", "-1"):
        p = procs.start([h.binary(), "--upstream-pipeline", v, "--admin",
                         "off"], "bad-%s.log" % v)
        rc = p.wait(10)
        log = procs.log("bad-%s.log" % v)
        c.ok(rc != 0 and "--upstream-pipeline takes 1 to 64" in log,
             "--upstream-pipeline %s refused (%d: %r)" % (v, rc, log[-200:]))

    # 1. the recording upstream: depth 1 never batches, depth 8 does; each
    # answer to its own client
    for depth in (1, 8):
        up = Upstream()
        gw = procs.gateway("--routes", routes(procs, "r%d.json" % depth,
                           "http://127.0.0.1:%d" % up.port),
                           "--upstream-pipeline", str(depth))
        paths = ["/p/%d/%d" % (depth, i) for i in range(24)]
        most = 0
        for rnd in range(5):
            res = burst(gw, [get(p) for p in paths])
            c.eq(own_paths(res, paths, ""), [],
                 "depth %d round %d: every answer its own" % (depth, rnd))
            most = max(most, up.batched())
        if depth == 1:
            c.eq(most, 1, "depth 1: one request a write")
        else:
            c.ok(most >= 2, "depth 8: requests batched in one write "
                 "(most in one recv: %d)" % most)
            c.ok(most <= 8, "depth 8: at most 8 in flight (%d)" % most)
        gw.proc.terminate()
        gw.proc.wait(10)
        up.close()

    # 2. the test backend: many keep-alive clients, GET and HEAD mixed,
    # each answer to its own client in order
    bp, bport = procs.backend("b1")
    gw = procs.gateway("--routes", routes(procs, "rb.json",
                       "http://127.0.0.1:%d" % bport),
                       "--upstream-pipeline", "16")
    bad = []
    lock = threading.Lock()

    def client(t):
        s = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
        try:
            for i in range(30):
                head = i % 5 == 3
                p = "/p/%d/%d" % (t, i)
                s.sendall((b"%s %s HTTP/1.1\r\nHost: x\r\n\r\n" % (
                    b"HEAD" if head else b"GET", p.encode())))
                st, hd, data = read_response(s, head)
                ok = st == 200
                if ok and head:
                    ok = data == b"" and int(hd.get("content-length", 0)) > 0
                elif ok:
                    ok = json.loads(data)["path"] == p
                if not ok:
                    with lock:
                        bad.append((p, st, data[:80]))
        finally:
            s.close()

    threads = [threading.Thread(target=client, args=(t,)) for t in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    c.eq(bad[:5], [], "32 clients x 30 GET/HEAD via the backend")
    connects = gw.metric("gateway_upstream_connects_total")
    c.ok(connects is not None and connects < 32 * 30,
         "connections kept (%r connects)" % connects)
    # HEAD inside one pipeline of the backend's: raw burst
    paths = ["/p/h/%d" % i for i in range(16)]
    reqs = [get(p, "HEAD" if i % 2 else "GET") for i, p in enumerate(paths)]
    res = burst(gw, reqs)
    c.eq(own_paths(res, [("HEAD " if i % 2 else "") + p
                         for i, p in enumerate(paths)], ""), [],
         "GET and HEAD burst via the backend")
    c.ok(all(r[2] == b"" for i, r in enumerate(res) if i % 2),
         "HEAD answers without a body")
    gw.proc.terminate()
    gw.proc.wait(10)

    # 3. an upstream dying mid-pipeline: the unanswered are sent again
    up = Upstream(mode="drop")
    gw = procs.gateway("--routes", routes(procs, "rd.json",
                       "http://127.0.0.1:%d" % up.port),
                       "--upstream-pipeline", "8")
    paths = ["/p/d/%d" % i for i in range(24)]
    for rnd in range(4):
        res = burst(gw, [get(p) for p in paths])
        c.eq(own_paths(res, paths, ""), [],
             "dropped pipeline round %d: every client answered" % rnd)
    c.ok(up.drops > 0, "an upstream connection died mid-pipeline (%d)"
         % up.drops)
    gw.proc.terminate()
    gw.proc.wait(10)
    up.close()

    # 4. a slow request in a pipeline with --response-timeout: it is
    # answered 504; those behind it are sent again and answered
    up = Upstream(slow_s=1.5)
    gw = procs.gateway("--routes", routes(procs, "rs.json",
                       "http://127.0.0.1:%d" % up.port),
                       "--upstream-pipeline", "8", "--response-timeout",
                       "400")
    behind = 0
    for rnd in range(3):
        paths = ["/p/slow/%d" % rnd] + ["/p/f/%d/%d" % (rnd, i)
                                        for i in range(12)]
        t0 = time.monotonic()
        res = burst(gw, [get(p) for p in paths])
        took = time.monotonic() - t0
        c.eq(res[0][0], 504, "round %d: the slow request timed out" % rnd)
        c.eq(own_paths(res[1:], paths[1:], ""), [],
             "round %d: the others answered" % rnd)
        c.ok(took < 5, "round %d within the timeout's bound (%.2fs)"
             % (rnd, took))
        behind += up.count(lambda ps, slow=paths[0]: slow in ps[:-1])
    c.ok(behind > 0, "requests were queued behind a slow one (%d)" % behind)
    gw.proc.terminate()
    gw.proc.wait(10)
    up.close()

    # 5. a client that goes away while queued behind a slow one
    up = Upstream(slow_s=0.5)
    gw = procs.gateway("--routes", routes(procs, "rc.json",
                       "http://127.0.0.1:%d" % up.port),
                       "--upstream-pipeline", "8")
    shared = 0
    for rnd in range(3):
        paths = ["/p/slow/c%d" % rnd] + ["/p/c/%d/%d" % (rnd, i)
                                         for i in range(10)]
        res = burst(gw, [get(p) for p in paths],
                    close_after_send=(2, 5))
        c.eq(own_paths(res, paths, ""), [],
             "round %d: the clients that stayed answered" % rnd)
        shared += up.count(lambda ps, gone=(paths[2], paths[5]): len(ps) > 1
                           and (gone[0] in ps or gone[1] in ps))
    c.ok(shared > 0, "a client that went away shared a pipeline (%d)"
         % shared)
    st, _, data = gw.request("GET", "/p/after")
    c.eq((st, json.loads(data)["path"] if st == 200 else data),
         (200, "/p/after"), "served after")
    gw.proc.terminate()
    gw.proc.wait(10)
    up.close()

    # 6. POST never pipelined (GETs beside it are)
    up = Upstream()
    gw = procs.gateway("--routes", routes(procs, "rp.json",
                       "http://127.0.0.1:%d" % up.port),
                       "--upstream-pipeline", "8")
    for rnd in range(3):
        reqs, paths = [], []
        for i in range(16):
            p = "/p/m/%d/%d" % (rnd, i)
            paths.append(p)
            if i % 3 == 0:
                reqs.append(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length:"
                            b" 2\r\nConnection: close\r\n\r\nhi" % p.encode())
            else:
                reqs.append(get(p))
        res = burst(gw, reqs)
        c.eq(own_paths(res, paths, ""), [], "round %d: mixed burst" % rnd)
    with up.lock:
        mixed = [r for _, r in up.recvs
                 if any(m == "POST" for m, _ in r) and len(r) > 1]
    c.eq(mixed, [], "no POST shared a write")
    c.ok(up.batched() >= 2, "GETs beside were batched (%d)" % up.batched())
    up.close()

    # 7. lb:// of two backends, one killed under pipelined load: no error
    ports, bprocs = {}, {}
    for ident in ("k1", "k2"):
        bprocs[ident], ports[ident] = procs.backend(ident)
    rl = procs.write_file("rl.json", json.dumps({"version": "1", "routes": [
        {"id": "svc", "uri": "lb://svc", "predicates": ["Path=/p/**"]}]}))
    inst = procs.write_file("inst.json", json.dumps({"services": {"svc": [
        {"id": i, "host": "127.0.0.1", "port": ports[i]}
        for i in ("k1", "k2")]}}))
    gw = procs.gateway("--routes", rl, "--instances", inst,
                       "--upstream-pipeline", "8")
    results, stop = [], threading.Event()

    def load(t):
        n = 0
        while not stop.is_set():
            p = "/p/k/%d/%d" % (t, n)
            n += 1
            try:
                st, _, data = h.http_call(gw.port, "GET", p)
                ok = st == 200 and json.loads(data)["path"] == p
            except Exception as e:
                ok, st = False, repr(e)
            with lock:
                results.append((ok, p, st))

    threads = [threading.Thread(target=load, args=(t,)) for t in range(16)]
    for t in threads:
        t.start()
    h.wait_for(lambda: len(results) > 200, "load before the kill", 20)
    bprocs["k2"].kill()
    bprocs["k2"].wait()
    n_kill = len(results)
    h.wait_for(lambda: len(results) > n_kill + 300, "load after the kill",
               30)
    stop.set()
    for t in threads:
        t.join(20)
    bad = [r for r in results if not r[0]]
    c.eq(bad[:5], [], "no client error with a backend killed "
         "(%d requests)" % len(results))


h.run("gateway_pipeline", body)
