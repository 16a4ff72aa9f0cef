"""bench_etcd.py - time from an etcd write to every router serving it.

Not a test: prints figures (docs/performance.md, section "etcd").

One etcd, three consumers of its watch (SY_BENCH_CONSUMERS), 3 sources of
N routes each. Each change rewrites one source's document with one route
changed (its uri), written with a put; the next change waits until all
consumers committed it. Latency of a change = the last consumer's commit
time minus the time the put was sent.

    ETCD_DRIVER=build/tests/e2e/etcd_driver python3 tests/e2e/bench_etcd.py \
        [--gateways [--poll]] [--grpc-put] [--pprof] [routes-per-source ...]
        (default sizes: 10 10000)

Consumers: etcd drivers (tests/e2e/etcd_driver: the mini-gateway's etcd
source and a router, one libuv loop), or with --gateways three
mini-gateways (MINI_GATEWAY=path/to/mini-gateway) run with --etcd-trace.
Either prints one line per commit with the module's own stamps
(gw_etcd_trace, wall clock): first and last byte of the watch event
received, decoded, committed (published: the next request is routed by
it). "Serving" is that commit stamp. --poll instead polls each gateway's
admin GET /status (2 ms between polls) and takes the first poll showing
the revision, as earlier rounds did: kept to show that the polling's CPU
(a status document per poll in each gateway, JSON parsing in the bench)
slowed what it measured.

Writes: by default through etcd's JSON gateway (/v3/kv/put: the request
body is the value in base64 inside JSON, which etcd's gateway decodes);
--grpc-put writes through etcd's gRPC API as etcdctl and the client
libraries do (a minimal HTTP/2 client below). The consumers always read
through the JSON gateway (no gRPC in the gateway). The put
requests are built before the clock starts and sent on one connection.

Printed per run: latency median/p99/max; the put's round trip; per
consumer the median/p99 of each stamp after the put was sent and of the
stages between them; the CPU time per change of etcd, of each consumer and
of the bench (from /proc); with --pprof a CPU profile of etcd over the
first PPROF_S seconds of the changes, split by what etcd spent it on.

SY_ETCD_TMP=/dev/shm puts etcd's data dir (its WAL) in memory.
SY_BENCH_CHANGES sets the number of changes (200).
"""
import http.client
import json
import os
import threading
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_harness import Driver, Etcd, _cleanup, b64, routes_doc

P = "/switchyard/"
CHANGES = int(os.environ.get("SY_BENCH_CHANGES", "200"))
SOURCES = 3
CONSUMERS = int(os.environ.get("SY_BENCH_CONSUMERS", "3"))
POLL_PAUSE = 0.002
PPROF_S = 5  # seconds of etcd CPU profile with --pprof  # seconds between two status polls of one gateway


def doc(src, n, version, changed):
    routes = []
    for i in range(n):
        port = 8080 + (version % 1000 if i == changed else 0)
        routes.append({"id": "%s-%d" % (src, i),
                       "uri": "http://%s-%d:%d" % (src, i % 50, port),
                       "predicates": ["Path=/%s/%d/**" % (src, i),
                                      "Method=GET"]})
    return routes_doc(version, routes)


class Writer:
    """Puts whose request bodies (JSON, base64) are built before the clock
    starts, on one keep-alive connection: the time measured from the put
    is etcd's and the consumers', not the Python client's."""

    def __init__(self, etcd):
        self.port = etcd.port
        self.conn = None

    def body(self, key, value):
        return json.dumps({"key": b64(key), "value": b64(value)}).encode()

    def put(self, body):
        for attempt in (0, 1):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(
                        "127.0.0.1", self.port, timeout=30)
                self.conn.request("POST", "/v3/kv/put", body,
                                  {"Content-Type": "application/json"})
                r = self.conn.getresponse()
                answer = json.loads(r.read())
                return int(answer["header"]["revision"])
            except (OSError, http.client.HTTPException):
                self.conn = None
                if attempt:
                    raise


class GrpcWriter:
    """Puts over etcd's gRPC API, as etcdctl and the Go, Java or Python
    clients write (the gateways read through the JSON gateway, which the
    issue requires of them; a writer need not). A minimal HTTP/2 client,
    cleartext with prior knowledge (etcd's client port takes HTTP/2 as
    gRPC): one connection, one stream per put, HPACK literals only (it
    never decodes the server's headers: a put succeeded when its answer
    carries a PutResponse), flow control honoured (WINDOW_UPDATE, SETTINGS,
    PING answered). Request messages are built before the clock starts."""

    PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    DATA, HEADERS, RST, SETTINGS, PING, GOAWAY, WINDOW = 0, 1, 3, 4, 6, 7, 8
    END_STREAM, ACK, END_HEADERS = 1, 1, 4

    def __init__(self, etcd):
        self.port = etcd.port
        self.sock = None

    @staticmethod
    def _varint(n):
        out = bytearray()
        while True:
            b = n & 0x7f
            n >>= 7
            out.append(b | (0x80 if n else 0))
            if not n:
                return bytes(out)

    def body(self, key, value):
        """A gRPC message: flag 0, length, PutRequest{1: key, 2: value}."""
        k, v = key.encode(), value.encode()
        pb = (b"\x0a" + self._varint(len(k)) + k +
              b"\x12" + self._varint(len(v)) + v)
        return b"\x00" + len(pb).to_bytes(4, "big") + pb

    @staticmethod
    def _hpack_int(n, prefix_bits):
        lim = (1 << prefix_bits) - 1
        if n < lim:
            return bytes([n])
        out, n = bytearray([lim]), n - lim
        while n >= 128:
            out.append(n & 0x7f | 0x80)
            n >>= 7
        out.append(n)
        return bytes(out)

    def _headers(self):
        block = b""
        for name, val in ((":method", "POST"), (":scheme", "http"),
                          (":path", "/etcdserverpb.KV/Put"),
                          (":authority", "127.0.0.1:%d" % self.port),
                          ("content-type", "application/grpc"),
                          ("te", "trailers")):
            n, v = name.encode(), val.encode()
            # literal header field without indexing, new name, no Huffman
            block += (b"\x00" + self._hpack_int(len(n), 7) + n +
                      self._hpack_int(len(v), 7) + v)
        return block

    def _send(self, ftype, flags, sid, payload=b""):
        self.sock.sendall(len(payload).to_bytes(3, "big") +
                          bytes([ftype, flags]) + sid.to_bytes(4, "big") +
                          payload)

    def _recv(self, n):
        while len(self.rbuf) < n:
            got = self.sock.recv(1 << 20)
            if not got:
                raise OSError("etcd closed the gRPC connection")
            self.rbuf += got
        out, self.rbuf = self.rbuf[:n], self.rbuf[n:]
        return out

    def _frame(self):
        """Read one frame; handle the connection's own frames. Returns
        (type, flags, stream id, payload)."""
        h = self._recv(9)
        n = int.from_bytes(h[:3], "big")
        ftype, flags = h[3], h[4]
        sid = int.from_bytes(h[5:9], "big") & 0x7fffffff
        payload = self._recv(n) if n else b""
        if ftype == self.SETTINGS and not flags & self.ACK:
            for i in range(0, len(payload), 6):
                ident = int.from_bytes(payload[i:i + 2], "big")
                val = int.from_bytes(payload[i + 2:i + 6], "big")
                if ident == 4:  # INITIAL_WINDOW_SIZE
                    delta = val - self.init_window
                    self.init_window = val
                    for k in self.windows:
                        self.windows[k] += delta
                elif ident == 5:  # MAX_FRAME_SIZE
                    self.max_frame = val
            self._send(self.SETTINGS, self.ACK, 0)
        elif ftype == self.PING and not flags & self.ACK:
            self._send(self.PING, self.ACK, 0, payload)
        elif ftype == self.WINDOW:
            inc = int.from_bytes(payload, "big") & 0x7fffffff
            if sid == 0:
                self.conn_window += inc
            elif sid in self.windows:
                self.windows[sid] += inc
        elif ftype == self.GOAWAY:
            raise OSError("etcd sent GOAWAY")
        elif ftype == self.RST and sid in self.windows:
            raise OSError("etcd reset stream %d" % sid)
        return ftype, flags, sid, payload

    def _connect(self):
        import socket
        self.sock = socket.create_connection(("127.0.0.1", self.port),
                                             timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rbuf = b""
        self.conn_window = self.init_window = 65535
        self.max_frame = 16384
        self.windows = {}
        self.next_sid = 1
        # our SETTINGS (defaults), and a large window for the answers
        self.sock.sendall(self.PREFACE)
        self._send(self.SETTINGS, 0, 0)
        self._send(self.WINDOW, 0, 0, (1 << 30).to_bytes(4, "big"))
        self.hblock = self._headers()

    def put(self, body):
        if self.sock is None:
            self._connect()
        sid = self.next_sid
        self.next_sid += 2
        self.windows[sid] = self.init_window
        self._send(self.HEADERS, self.END_HEADERS, sid, self.hblock)
        off, data, done = 0, b"", False
        while off < len(body):
            room = min(self.conn_window, self.windows[sid], self.max_frame,
                       len(body) - off)
            if room <= 0:  # wait for the server's WINDOW_UPDATE
                ftype, flags, fsid, payload = self._frame()
                if fsid == sid and ftype == self.DATA:
                    data += payload
                if fsid == sid and flags & self.END_STREAM:
                    done = True
                    break
                continue
            last = off + room == len(body)
            self._send(self.DATA, self.END_STREAM if last else 0, sid,
                       body[off:off + room])
            self.conn_window -= room
            self.windows[sid] -= room
            off += room
        while not done:
            ftype, flags, fsid, payload = self._frame()
            if fsid != sid:
                continue
            if ftype == self.DATA:
                data += payload
                if payload:
                    self._send(self.WINDOW, 0, 0,
                               len(payload).to_bytes(4, "big"))
            done = bool(flags & self.END_STREAM)
        del self.windows[sid]
        # PutResponse{1: ResponseHeader{3: revision}} after the 5-byte
        # gRPC prefix; no message: the put failed (grpc-status in the
        # trailers, which this client does not decode)
        if len(data) < 5:
            raise OSError("etcd refused the put (no PutResponse)")
        return self._revision(data[5:])

    def _revision(self, pb):
        for f, w, v in _fields(pb):
            if f == 1 and w == 2:
                for f2, w2, v2 in _fields(v):
                    if f2 == 3 and w2 == 0:
                        return v2
        raise OSError("PutResponse without a revision")


def pct(v, p):
    v = sorted(v)
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


# --- etcd's own CPU profile (--pprof) ------------------------------------
# etcd serves Go's pprof with --enable-pprof; a profile is a gzipped
# protobuf (github.com/google/pprof, proto/profile.proto), read here with a
# small wire-format reader: samples (location ids, values), locations
# (lines -> function ids), functions (name = string index), strings.

def _varint(b, i):
    r = sh = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7f) << sh
        sh += 7
        if c < 0x80:
            return r, i


def _fields(b):
    i = 0
    while i < len(b):
        k, i = _varint(b, i)
        f, w = k >> 3, k & 7
        if w == 0:
            v, i = _varint(b, i)
        elif w == 1:
            v, i = b[i:i + 8], i + 8
        elif w == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif w == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("pprof: wire type %d" % w)
        yield f, w, v


def _packed(v, w):
    if w == 0:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = _varint(v, i)
        out.append(x)
    return out


def pprof_stacks(data):
    """[(function names leaf first, CPU nanoseconds)] of a CPU profile."""
    import gzip
    b = gzip.decompress(data)
    strings, samples, locs, funcs = [], [], {}, {}
    for f, w, v in _fields(b):
        if f == 6:
            strings.append(v.decode(errors="replace"))
        elif f == 2:
            ids, vals = [], []
            for f2, w2, v2 in _fields(v):
                if f2 == 1:
                    ids += _packed(v2, w2)
                elif f2 == 2:
                    vals += _packed(v2, w2)
            samples.append((ids, vals))
        elif f == 4:
            lid, fids = 0, []
            for f2, w2, v2 in _fields(v):
                if f2 == 1:
                    lid = v2
                elif f2 == 4:
                    fids += [v3 for f3, _, v3 in _fields(v2) if f3 == 1]
            locs[lid] = fids
        elif f == 5:
            fid = name = 0
            for f2, _, v2 in _fields(v):
                if f2 == 1:
                    fid = v2
                elif f2 == 2:
                    name = v2
            funcs[fid] = name
    return [([strings[funcs.get(fid, 0)] for lid in ids
              for fid in locs.get(lid, [])], vals[-1] if vals else 0)
            for ids, vals in samples]


# What etcd's CPU goes to, by the first rule whose marker is in a
# sample's stack (markers are substrings of Go function names).
PPROF_RULES = [
    ("put: JSON gateway decodes the request", ["gw.request_KV_Put_0"]),
    ("put: JSON gateway encodes the answer",
     ["gw.RegisterKVHandlerClient"]),
    ("watch: JSON gateway encodes events (per watcher)",
     ["gw.RegisterWatchHandlerClient", "gw.request_Watch_Watch_0",
      "runtime.ForwardResponseStream"]),
    ("watch: gRPC server sends events", ["v3rpc.(*serverWatchStream)",
                                         "mvcc.(*watchableStore)"]),
    ("raft, WAL, apply, backend (bbolt)",
     ["go.etcd.io/etcd/raft", "go.etcd.io/etcd/wal", "go.etcd.io/bbolt",
      "mvcc/backend", "etcdserver.(*EtcdServer).apply",
      "etcdserver.(*raftNode)", "etcdserver.(*EtcdServer).run"]),
    ("gRPC transport (the gateway's loopback connection)",
     ["google.golang.org/grpc"]),
    ("Go garbage collector", ["runtime.gcBgMarkWorker", "runtime.bgsweep",
                              "runtime.bgscavenge"]),
]


def pprof_summary(data, changes):
    stacks = pprof_stacks(data)
    total = sum(v for _, v in stacks) or 1
    by = {}
    for st, v in stacks:
        name = "other"
        for label, marks in PPROF_RULES:
            if any(m in fn for fn in st for m in marks):
                name = label
                break
        by[name] = by.get(name, 0) + v
    parts = sorted(by.items(), key=lambda kv: -kv[1])
    return ("    etcd CPU profile: %.1f ms per change: " % (total / 1e6 / changes)
            + "; ".join("%s %.1f ms (%.0f%%)" % (k, v / 1e6 / changes,
                                                 100.0 * v / total)
                        for k, v in parts))


def proc_cpu_s(pid):
    """User + system CPU seconds of a process (all its threads)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def reader(stream, commits):
    """Commit lines of a consumer's stdout into a queue, stamped with the
    time the bench read them."""
    for line in stream:
        line = line.strip()
        if line.startswith(b"{"):
            o = json.loads(line)
            if "commit" in o:
                o["seen_us"] = time.time() * 1e6
                commits.put(o)


class TracedGateway:
    """A mini-gateway with --etcd-trace: one JSON line per commit from
    etcd on its stdout, with the module's own stamps (gw_etcd_trace)."""

    def __init__(self, procs, etcd_url):
        import gwharness
        import queue
        port, admin = gwharness.free_port(), gwharness.free_port()
        self.admin = admin
        self.log = os.path.join(procs.dir, "gateway-%d.log" % admin)
        self.proc = subprocess.Popen(
            [gwharness.binary(), "--listen", "127.0.0.1:%d" % port,
             "--admin", "127.0.0.1:%d" % admin, "--workers", "1", "--quiet",
             "--etcd", etcd_url, "--etcd-trace"],
            stdout=subprocess.PIPE, stderr=open(self.log, "wb"),
            stdin=subprocess.DEVNULL)
        procs.procs.append(self.proc)
        gwharness.wait_port(port, proc=self.proc)
        gwharness.wait_port(admin, proc=self.proc)
        self.commits = queue.Queue()
        self.seen = 0
        threading.Thread(target=reader, args=(self.proc.stdout, self.commits),
                         daemon=True).start()

    def status(self):
        c = http.client.HTTPConnection("127.0.0.1", self.admin, timeout=30)
        c.request("GET", "/status")
        o = json.loads(c.getresponse().read())
        c.close()
        return o

    def stderr(self):
        with open(self.log, "rb") as f:
            return f.read().decode(errors="replace")

    def quit(self):
        pass


class PolledGateway(TracedGateway):
    """--poll: the earlier way of seeing "serving": a thread that polls
    the gateway's /status (keep-alive, POLL_PAUSE between polls) and
    stamps the first poll showing each revision. Kept to show what the
    polling itself costs; the trace lines are still read for the split."""

    def __init__(self, procs, etcd_url):
        import queue
        TracedGateway.__init__(self, procs, etcd_url)
        self.traces = self.commits
        self.commits = queue.Queue()
        self.stop = False
        threading.Thread(target=self.poll, daemon=True).start()

    def poll(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.admin, timeout=30)
        seen = 0
        while not self.stop:
            try:
                conn.request("GET", "/status")
                rev = json.loads(conn.getresponse().read())["etcd"]["revision"]
            except Exception:
                conn = http.client.HTTPConnection("127.0.0.1", self.admin,
                                                  timeout=30)
                time.sleep(0.01)
                continue
            if rev > seen:
                seen = rev
                o = {"commit": rev, "seen_us": time.time() * 1e6}
                # the module's trace of the same revision
                while True:
                    try:
                        t = self.traces.get(timeout=5)
                    except Exception:
                        break
                    if t["commit"] >= rev:
                        o.update({k: v for k, v in t.items()
                                  if k not in ("commit", "seen_us")})
                        break
                o["committed_us"] = o.get("committed_us", 0)
                o["polled_us"] = o["seen_us"]
                self.commits.put(o)
            time.sleep(POLL_PAUSE)

    def quit(self):
        self.stop = True


def wait_commit(d, rev, timeout=60):
    while True:
        c = d.commits.get(timeout=timeout)
        if c["commit"] >= rev:
            return c


def mean(v):
    return statistics.mean(v) if v else 0.0


def ms_stats(v):
    if not v:
        return "-"
    return "%.2f/%.2f" % (statistics.median(v), pct(v, 99))


def run(n, mode, pprof=False, grpc=False):
    etcd = Etcd("bench")
    if pprof:
        etcd.extra_args = ["--enable-pprof"]
    etcd.start()
    names = ["src%d" % i for i in range(SOURCES)]
    for s in names:
        etcd.put(P + "routes/" + s, doc(s, n, 0, -1))
    procs = None
    if mode != "drivers":
        import gwharness
        gwharness.BINARY = os.environ["MINI_GATEWAY"]
        procs = gwharness.Procs()
        kind = PolledGateway if mode == "gateways-poll" else TracedGateway
        drivers = [kind(procs, etcd.url) for _ in range(CONSUMERS)]
        pids = [d.proc.pid for d in drivers]
    else:
        drivers = [Driver(etcd.url, commits=True) for _ in range(CONSUMERS)]
        pids = [d.proc.pid for d in drivers]
    rev = etcd.revision()
    for d in drivers:
        wait_commit(d, rev)
        while not d.commits.empty():
            d.commits.get()
    # documents and put requests built before timing
    writer = GrpcWriter(etcd) if grpc else Writer(etcd)
    docs = [doc(names[i % SOURCES], n, i + 1, (i * 7919) % n)
            for i in range(CHANGES)]
    size = len(docs[0])
    bodies = [writer.body(P + "routes/" + names[i % SOURCES], docs[i])
              for i in range(CHANGES)]
    del docs
    # the consumers' counters before the changes (the initial full read's
    # commit is not one of them)
    base = [d.status()["etcd"] for d in drivers]
    load0 = os.getloadavg()[0]
    cpu0 = ([proc_cpu_s(etcd.proc.pid)] + [proc_cpu_s(p) for p in pids] +
            [sum(os.times()[:2])])
    prof = {}
    if pprof:
        # a CPU profile of etcd over the first PPROF_S seconds of the
        # changes (which last longer: 200 changes of >= 20 ms)
        import urllib.request

        def profile():
            try:
                prof["data"] = urllib.request.urlopen(
                    etcd.url + "/debug/pprof/profile?seconds=%d" % PPROF_S,
                    timeout=PPROF_S + 30).read()
                prof["changes"] = len(lat)
            except OSError:  # the changes ended first, etcd is gone
                pass
        lat = []
        pt = threading.Thread(target=profile, daemon=True)
        pt.start()
        time.sleep(0.05)
    lat, put_rt = [], []
    # per consumer, per change: ms after the put was sent
    stages = ("first_us", "last_us", "decoded_us", "committed_us")
    split = [{k: [] for k in stages + ("seen_us",)} for _ in drivers]
    bytes_, reads = [], []
    for i in range(CHANGES):
        t0 = time.time()
        rev = writer.put(bodies[i])
        put_rt.append(time.time() - t0)
        last = 0.0
        for k, d in enumerate(drivers):
            c = wait_commit(d, rev)
            # serving: the consumer's own stamp of the published commit
            # (--poll: when a status poll first showed the revision)
            done = c.get("polled_us") or c["committed_us"]
            last = max(last, done / 1e6)
            for st in stages + ("seen_us",):
                split[k][st].append(c[st] / 1e3 - t0 * 1e3)
            bytes_.append(c["bytes"])
            reads.append(c["reads"])
        lat.append(last - t0)
    cpu1 = ([proc_cpu_s(etcd.proc.pid)] + [proc_cpu_s(p) for p in pids] +
            [sum(os.times()[:2])])
    cpu = [(b - a) * 1000.0 / CHANGES for a, b in zip(cpu0, cpu1)]
    apply_ms, decode_ms, cpu_ms, fp_ms = [], [], [], []
    fps = set()
    for d, b in zip(drivers, base):
        st = d.status()
        fps.add((st["fingerprint"], st["etcd"]["revision"]))
        e = st["etcd"]
        k = 1000.0 * max(1, e["commits"] - b["commits"])
        apply_ms.append((e["commit_us_total"] - b["commit_us_total"]) / k)
        cpu_ms.append((e["commit_cpu_us_total"] - b["commit_cpu_us_total"])
                      / k)
        fp_ms.append((e["fingerprint_us_total"] - b["fingerprint_us_total"])
                     / k)
        decode_ms.append((e["decode_us_total"] - b["decode_us_total"]) / k)
        d.quit()
    if procs:
        procs.stop_all()
    for d in drivers:  # a sanitizer build's reports, if any
        err = d.stderr()
        if "Sanitizer" in err or "runtime error" in err:
            print("    consumer stderr:\n" + err[-3000:])
    etcd.kill()
    ms = [x * 1000 for x in lat]
    pr = [x * 1000 for x in put_rt]
    label = {"drivers": "drivers ", "gateways": "gateways",
             "gateways-poll": "gw-poll "}[mode]
    print("%s routes/source %6d  doc %8d bytes  changes %d  write->all %d "
          "serving: median %.2f ms  p99 %.2f ms  max %.2f ms  (put round "
          "trip median %.2f ms; mean per change in a consumer: watch line "
          "parse+decode %.2f ms, commit %.2f ms wall / %.2f ms CPU; "
          "fingerprint reads for status %.2f ms)  [%s UTC, load average "
          "%.2f -> %.2f; etcd data on %s; puts by %s]" %
          (label, n, size, CHANGES, CONSUMERS,
           statistics.median(ms), pct(ms, 99), max(ms),
           statistics.median(pr), mean(decode_ms),
           mean(apply_ms), mean(cpu_ms),
           mean(fp_ms),
           time.strftime("%H:%M:%S", time.gmtime()), load0,
           os.getloadavg()[0], os.environ.get("SY_ETCD_TMP") or "disk",
           "gRPC" if grpc else "the JSON gateway"))
    # Where the time went: per consumer, median/p99 over the changes of
    # each stamp, in ms after the put was sent; then the stages.
    print("    split, ms after the put was sent (median/p99): put acked %s"
          % ms_stats(pr))
    for k, sp in enumerate(split):
        first, lastb = sp["first_us"], sp["last_us"]
        dec, com = sp["decoded_us"], sp["committed_us"]
        print("    consumer %d: first byte %s  last byte %s  decoded %s  "
              "committed %s  seen by the bench %s | stages: transfer %s, "
              "decode %s, commit %s" %
              (k, ms_stats(first), ms_stats(lastb), ms_stats(dec),
               ms_stats(com), ms_stats(sp["seen_us"]),
               ms_stats([b - a for a, b in zip(first, lastb)]),
               ms_stats([b - a for a, b in zip(lastb, dec)]),
               ms_stats([b - a for a, b in zip(dec, com)])))
    print("    the consumers agree at the end (fingerprint, revision): %s" %
          ("yes" if len(fps) == 1 else "NO: %s" % sorted(fps)))
    print("    watch line %d bytes in %.1f reads (mean); CPU per change: "
          "etcd %.2f ms, consumers %s ms, bench %.2f ms" %
          (statistics.median(bytes_ or [0]), mean(reads), cpu[0],
           " ".join("%.2f" % c for c in cpu[1:-1]), cpu[-1]))
    if pprof:
        pt.join(PPROF_S + 30)
        if "data" in prof:
            print(pprof_summary(prof["data"], max(1, prof["changes"])))
            if os.environ.get("SY_BENCH_PPROF_OUT"):  # the raw profile
                with open(os.environ["SY_BENCH_PPROF_OUT"], "wb") as f:
                    f.write(prof["data"])
        else:
            print("    etcd CPU profile: none (the changes took less than "
                  "%d s)" % PPROF_S)
    sys.stdout.flush()


if __name__ == "__main__":
    mode = "drivers"
    if "--gateways" in sys.argv:
        mode = "gateways-poll" if "--poll" in sys.argv else "gateways"
    sizes = [int(a) for a in sys.argv[1:] if not a.startswith("--")]
    try:
        for n in sizes or [10, 10000]:
            run(n, mode, "--pprof" in sys.argv, "--grpc-put" in sys.argv)
    finally:
        _cleanup()
