"""etcd_harness.py - what the etcd end-to-end tests share.

A real etcd (started and killed by the test, loopback, free ports, its own
data dir), a client for its JSON gateway (urllib; keys and values base64),
the etcd driver (tests/e2e/etcd_driver.c) as a subprocess spoken to over
stdin/stdout, and a small TAP writer. Every process started here is killed
at exit, also on failure.
"""
import atexit
import base64
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from ports import free_port  # noqa: F401 (the tests import it from here)

_procs = []
_dirs = []

# How long a router may still be waiting to reconnect after etcd returns:
# its backoff doubles up to 5 s plus up to a quarter of jitter
# (docs/config-sources.md). A bound on convergence after an etcd restart
# is the usual bound plus this; the longer etcd was down (slow machine,
# slow disk), the closer a router's next try is to the maximum.
RECONNECT_S = 5.0 * 1.25


def _cleanup():
    for p in _procs:
        if p.poll() is None:
            try:
                p.kill()
                p.wait(timeout=5)
            except Exception:
                pass
    for d in _dirs:
        shutil.rmtree(d, ignore_errors=True)


atexit.register(_cleanup)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))


def tmpdir(name):
    """A fresh directory under $SY_ETCD_TMP (e.g. /dev/shm: etcd's WAL in
    memory, so a benchmark times the path from etcd's commit to serving
    rather than the machine's disk), else under the system's temp dir."""
    d = tempfile.mkdtemp(prefix="sy-" + name + "-",
                         dir=os.environ.get("SY_ETCD_TMP") or None)
    _dirs.append(d)
    return d


def b64(s):
    if isinstance(s, str):
        s = s.encode()
    return base64.b64encode(s).decode()


def unb64(s):
    return base64.b64decode(s)


def prefix_end(prefix):
    p = prefix.encode()
    return p[:-1] + bytes([p[-1] + 1])


def wait_until(fn, timeout, step=0.02):
    """fn() until it is truthy or timeout seconds passed; its last value."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > end:
            return v
        time.sleep(step)


class Etcd:
    """One etcd member on loopback; kill() and start() keep its data."""

    def __init__(self, name="etcd"):
        self.dir = tmpdir(name)
        self.port = free_port()
        self.peer = free_port()
        self.proc = None
        self.bin = os.environ.get("ETCD_BIN", "etcd")
        self.extra_args = []  # e.g. ["--enable-pprof"] (bench_etcd.py)
        self.started_once = False
        self.tries = 0

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def start(self, ports=None, data_dir=None, wait=True):
        """Listen on `ports` (default: its own client port)."""
        ports = ports or [self.port]
        urls = ",".join("http://127.0.0.1:%d" % p for p in ports)
        peer = "http://127.0.0.1:%d" % self.peer
        log = open(os.path.join(self.dir, "etcd.log"), "ab")
        self.proc = subprocess.Popen(
            [self.bin, "--name", "default",
             "--data-dir", data_dir or os.path.join(self.dir, "data"),
             "--listen-client-urls", urls, "--advertise-client-urls", urls,
             "--listen-peer-urls", peer,
             "--initial-advertise-peer-urls", peer,
             "--initial-cluster", "default=" + peer,
             "--max-request-bytes", str(64 << 20),
             "--quota-backend-bytes", str(4 << 30),
             "--log-level", "error"] + self.extra_args,
            stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        _procs.append(self.proc)
        if wait:
            base = "http://127.0.0.1:%d" % ports[0]
            ok = wait_until(lambda: self.proc.poll() is not None or
                            self._ready(base), 20, 0.05)
            if not ok or self.proc.poll() is not None:
                if self.proc.poll() is not None and not self.started_once:
                    # its first start: nobody knows its ports yet, so a
                    # port taken meanwhile is retried on other ports
                    self.tries += 1
                    if self.tries < 3:
                        self.port, self.peer = free_port(), free_port()
                        shutil.rmtree(data_dir or os.path.join(self.dir,
                                                               "data"),
                                      ignore_errors=True)
                        return self.start(data_dir=data_dir, wait=wait)
                raise RuntimeError("etcd did not start on %s (exit %s): %s" %
                                   (urls, self.proc.poll(), self.log_tail()))
            self.started_once = True
        return self

    def log_tail(self, lines=8):
        try:
            with open(os.path.join(self.dir, "etcd.log"), "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:
            return "(no log)"
        return " | ".join(text.strip().splitlines()[-lines:])

    def _ready(self, base):
        try:
            self.call("/v3/kv/range", {"key": b64("\0")}, base=base, timeout=1)
            return True
        except Exception:
            return False

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def call(self, path, body, base=None, timeout=10):
        req = urllib.request.Request(
            (base or self.url) + path, data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def put(self, key, value, lease=None, base=None):
        body = {"key": b64(key), "value": b64(value)}
        if lease:
            body["lease"] = str(lease)
        return int(self.call("/v3/kv/put", body, base)["header"]["revision"])

    def delete(self, key, base=None):
        r = self.call("/v3/kv/deleterange", {"key": b64(key)}, base)
        return int(r["header"]["revision"])

    def txn_put(self, pairs, base=None):
        """Several puts in one revision (one watch response)."""
        ops = [{"request_put": {"key": b64(k), "value": b64(v)}}
               for k, v in pairs]
        r = self.call("/v3/kv/txn", {"success": ops}, base)
        return int(r["header"]["revision"])

    def revision(self, base=None):
        r = self.call("/v3/kv/range", {"key": b64("\0")}, base)
        return int(r["header"]["revision"])

    def compact(self, revision, base=None):
        self.call("/v3/kv/compaction", {"revision": str(revision)}, base)

    def grant(self, ttl, base=None):
        return int(self.call("/v3/lease/grant", {"TTL": str(ttl)}, base)["ID"])

    def revoke(self, lease, base=None):
        self.call("/v3/lease/revoke", {"ID": str(lease)}, base)


class Cluster:
    """Three (or n) etcd members on loopback forming one cluster, with
    short raft timers so a leader election takes well under a second.
    Members are stopped, paused (SIGSTOP) and started again by index;
    `extra` args go to every member (TLS, auth)."""

    def __init__(self, n=3, scheme="http", extra=None, ctx=None, token=None):
        """ctx: the ssl context of https:// calls; token(i): the auth
        token to send to member i (or None)."""
        self.n, self.scheme, self.extra = n, scheme, list(extra or [])
        self.ctx, self.token = ctx, token
        self.dirs = [tmpdir("m%d" % i) for i in range(n)]
        self.ports = [free_port() for _ in range(n)]
        self.peers = [free_port() for _ in range(n)]
        self.procs = [None] * n
        self.bin = os.environ.get("ETCD_BIN", "etcd")

    def url(self, i):
        return "%s://127.0.0.1:%d" % (self.scheme, self.ports[i])

    def urls(self):
        return ",".join(self.url(i) for i in range(self.n))

    def start(self, i, state="new"):
        cluster = ",".join("m%d=http://127.0.0.1:%d" % (k, self.peers[k])
                           for k in range(self.n))
        log = open(os.path.join(self.dirs[i], "etcd.log"), "ab")
        self.procs[i] = subprocess.Popen(
            [self.bin, "--name", "m%d" % i,
             "--data-dir", os.path.join(self.dirs[i], "data"),
             "--listen-client-urls", self.url(i),
             "--advertise-client-urls", self.url(i),
             "--listen-peer-urls", "http://127.0.0.1:%d" % self.peers[i],
             "--initial-advertise-peer-urls",
             "http://127.0.0.1:%d" % self.peers[i],
             "--initial-cluster", cluster,
             "--initial-cluster-state", state,
             "--initial-cluster-token", "sy-test",
             "--heartbeat-interval", "50", "--election-timeout", "400",
             "--log-level", "error"] + self.extra,
            stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        _procs.append(self.procs[i])

    def start_all(self):
        for i in range(self.n):
            self.start(i)
        if not wait_until(lambda: self.leader() is not None, 20, 0.1):
            raise RuntimeError("no leader: " + self.log_tail(0))
        return self

    def log_tail(self, i, lines=6):
        try:
            with open(os.path.join(self.dirs[i], "etcd.log"), "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:
            return "(no log)"
        return " | ".join(text.strip().splitlines()[-lines:])

    def call(self, i, path, body, timeout=2, token=True):
        h = {"Content-Type": "application/json"}
        tok = self.token(i) if token and self.token else None
        if tok:
            h["Authorization"] = tok
        req = urllib.request.Request(
            self.url(i) + path, data=json.dumps(body).encode(), headers=h)
        with urllib.request.urlopen(req, timeout=timeout,
                                    context=self.ctx) as r:
            return json.loads(r.read())

    def leader(self):
        """The index of the leader, asked of the members that answer."""
        ids = {}
        lead = None
        for i in range(self.n):
            try:
                st = self.call(i, "/v3/maintenance/status", {}, timeout=1)
            except Exception:
                continue
            ids[st["header"]["member_id"]] = i
            lead = st.get("leader", lead)
        return ids.get(lead)

    def healthy(self, i):
        try:
            self.call(i, "/v3/kv/range", {"key": b64("\0")}, timeout=1)
            return True
        except Exception:
            return False

    def put(self, key, value, avoid=()):
        """Through the first member that takes it (not those in avoid)."""
        body = {"key": b64(key), "value": b64(value)}
        last = None
        for _ in range(3):
            for i in range(self.n):
                if i in avoid or self.procs[i].poll() is not None:
                    continue
                try:
                    r = self.call(i, "/v3/kv/put", body, timeout=2)
                    return int(r["header"]["revision"])
                except Exception as e:  # try the next member
                    last = e
            time.sleep(0.2)
        raise RuntimeError("no member took the write: %r" % last)

    def kill(self, i, sig=signal.SIGKILL):
        p = self.procs[i]
        if p and p.poll() is None:
            p.send_signal(sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                p.wait(timeout=10)


class Driver:
    """tests/e2e/etcd_driver: a router fed by the etcd source."""

    def __init__(self, url, prefix=None, commits=False, binary=None,
                 extra=()):
        args = [binary or os.environ["ETCD_DRIVER"], "--etcd", url]
        args += list(extra)
        if prefix:
            args += ["--etcd-prefix", prefix]
        if commits:
            args.append("--commits")
        self.errlog = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE,
                                     stderr=self.errlog)
        _procs.append(self.proc)
        self.answers = queue.Queue()
        self.commits = queue.Queue()
        threading.Thread(target=self._reader, daemon=True).start()

    def _reader(self):
        for line in self.proc.stdout:
            o = json.loads(line)
            if "commit" in o:  # when the reader saw it (benchmarks)
                o["seen_us"] = time.time() * 1e6
            (self.commits if "commit" in o else self.answers).put(o)
        self.answers.put(None)

    def cmd(self, line, timeout=10):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()
        o = self.answers.get(timeout=timeout)
        if o is None:
            raise RuntimeError("driver exited: " + self.stderr())
        return o

    def status(self):
        return self.cmd("status")

    def match(self, method, host, path):
        return self.cmd("match %s %s %s" % (method, host, path))

    def wait_revision(self, rev, timeout=10):
        return wait_until(
            lambda: self.status()["etcd"]["revision"] >= rev, timeout)

    def stderr(self):
        self.errlog.seek(0)
        return self.errlog.read().decode(errors="replace")

    def quit(self):
        try:
            self.proc.stdin.write(b"quit\n")
            self.proc.stdin.flush()
            return self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            return -1


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, name, detail=None):
        self.n += 1
        print("%s %d - %s" % ("ok" if cond else "not ok", self.n, name))
        if not cond:
            self.failed += 1
            if detail is not None:
                for line in str(detail).splitlines()[:40]:
                    print("# " + line)
        sys.stdout.flush()
        return cond

    def done(self):
        print("1..%d" % self.n)
        sys.stdout.flush()
        _cleanup()
        sys.exit(1 if self.failed else 0)


def routes_doc(version, routes):
    return json.dumps({"version": str(version), "routes": routes})


def route(rid, path, uri="http://backend:80", order=0, extra=None):
    r = {"id": rid, "uri": uri, "order": order, "predicates": ["Path=" + path]}
    if extra:
        r.update(extra)
    return r


def instance(host, port, **kw):
    o = {"host": host, "port": port}
    o.update(kw)
    return json.dumps(o)
