"""Shared harness for the mini-gateway end-to-end tests (stdlib only).

Starts the gateway and test backends on free loopback ports, waits until
they answer, and stops them (SIGTERM, then SIGKILL) even when a test fails.
Each test script takes the mini-gateway binary as its first argument.
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402,F401 (tests use gwharness.free_port)

BINARY = None


def binary():
    global BINARY
    if BINARY is None:
        if len(sys.argv) < 2:
            sys.exit("usage: %s path/to/mini-gateway" % sys.argv[0])
        BINARY = os.path.abspath(sys.argv[1])
    return BINARY


class PortTaken(RuntimeError):
    """Another process listens on a port picked for ours: picked again."""


def _listeners(port):
    """Inodes of the sockets listening on 127.0.0.1:port or *:port."""
    mine = {"0100007F:%04X" % port, "00000000:%04X" % port}
    try:
        with open("/proc/net/tcp") as f:
            rows = [ln.split() for ln in f.readlines()[1:]]
    except OSError:
        return None
    return {r[9] for r in rows if len(r) > 9 and r[1] in mine and r[3] == "0A"}


def _sockets_of(pid):
    fds = "/proc/%d/fd" % pid
    out = set()
    try:
        for fd in os.listdir(fds):
            try:
                link = os.readlink(os.path.join(fds, fd))
            except OSError:
                continue
            if link.startswith("socket:["):
                out.add(link[8:-1])
    except OSError:
        pass
    return out


def wait_port(port, deadline_s=10.0, proc=None):
    """Until the port answers; with proc, until proc itself listens there
    and nobody else does: free_port()'s pick is free when made, but another
    test's server may bind it before ours does, and a greeting from it is
    no readiness (two SO_REUSEPORT listeners even share the connections).
    PortTaken when that happened."""
    end = time.time() + deadline_s
    while time.time() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("process exited with %s" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        except OSError:
            time.sleep(0.02)
            continue
        if proc is None:
            return
        listening = _listeners(port)
        if listening is None:  # no /proc/net/tcp: the greeting it is
            return
        ours = listening & _sockets_of(proc.pid)
        if ours and ours == listening:
            return
        if ours or proc.poll() is not None:
            raise PortTaken("port %d: another process listens there" % port)
        time.sleep(0.02)  # someone else's: ours binds beside it or exits
    raise RuntimeError("port %d never opened" % port)


class RawUpstream:
    """A hand-written upstream on a free loopback port: each connection is
    served on a thread of its own by the subclass's serve(sock), so a test
    can send bytes no real backend would (subclasses: test_gateway_hop,
    test_gateway_resphead)."""

    def __init__(self, backlog=64, nodelay=False):
        self.nodelay = nodelay
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(backlog)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            if self.nodelay:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self.serve, args=(s,),
                             daemon=True).start()

    def serve(self, s):
        raise NotImplementedError

    @staticmethod
    def heads(s):
        """The request heads read from s one after another, until the
        peer closes (bodies are not read: for requests without one)."""
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                d = s.recv(65536)
                if not d:
                    return
                buf += d
            head, buf = buf.split(b"\r\n\r\n", 1)
            yield head


class Procs:
    """Every process started by a test; all stopped by stop_all()."""

    def __init__(self):
        self.procs = []
        self.dir = tempfile.mkdtemp(prefix="gw-e2e-")

    def start(self, args, log_name):
        log = open(os.path.join(self.dir, log_name), "wb")
        p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def start_listening(self, nports, make_args, log_name):
        """Start make_args(*ports) on nports fresh ports and wait until it
        listens on all of them; a port another process took meanwhile
        (wait_port: PortTaken, or ours exited on "address already in
        use") is picked again, twice at most."""
        for attempt in range(3):
            ports = [free_port() for _ in range(nports)]
            args = make_args(*ports)
            p = self.start(args, log_name(*ports) if callable(log_name)
                           else log_name)
            try:
                for port in ports:
                    wait_port(port, proc=p)
                return p, ports
            except RuntimeError as e:  # PortTaken among them
                taken = isinstance(e, PortTaken)
                if p.poll() is None:
                    p.kill()
                p.wait()
                log = self.log(log_name(*ports) if callable(log_name)
                               else log_name).lower()
                taken = taken or "address already in use" in log
                if not taken or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def backend(self, ident, version="1"):
        p, (port,) = self.start_listening(1, lambda port: [
            binary(), "--backend", "--id", ident, "--version", version,
            "--listen", "127.0.0.1:%d" % port], "backend-%s.log" % ident)
        return p, port

    def gateway(self, *extra, workers=1, admin_token=None,
                log="gateway.log"):
        def args(port, admin):
            a = [binary(), "--listen", "127.0.0.1:%d" % port, "--admin",
                 "127.0.0.1:%d" % admin, "--workers", str(workers), "--quiet"]
            if admin_token:
                a += ["--admin-token", admin_token]
            return a + list(extra)
        p, (port, admin) = self.start_listening(2, args, log)
        return Gateway(p, port, admin, admin_token, self)

    def redis(self, unix=False, extra=()):
        """A redis-server on a free loopback port, nothing persisted;
        unix: also on the Unix socket redis_socket(port); extra: more
        arguments (--requirepass PW, --user NAME RULES...)."""
        p, (port,) = self.start_listening(1, lambda port: [
            "redis-server", "--port", str(port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no"] + (
                ["--unixsocket", self.redis_socket(port),
                 "--unixsocketperm", "700"] if unix else []) + list(extra),
            lambda port: "redis-%d.log" % port)
        return p, port

    def redis_socket(self, port):
        return os.path.join(self.dir, "redis-%d.sock" % port)

    def log(self, name):
        try:
            with open(os.path.join(self.dir, name), "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        end = time.time() + 5
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, end - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def write_file(self, name, text):
        """Write atomically (temp file + rename), as config tools do."""
        path = os.path.join(self.dir, name)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, path)
        return path


class Gateway:
    def __init__(self, proc, port, admin, token, procs):
        self.proc, self.port, self.admin, self.token = proc, port, admin, token
        self.procs = procs

    def request(self, method, path, body=None, headers=None, timeout=10):
        return http_call(self.port, method, path, body, headers, timeout)

    def admin_call(self, method, path, body=None, token=True):
        h = {}
        if token and self.token:
            h["Authorization"] = "Bearer " + self.token
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        return http_call(self.admin, method, path, body, h, 10)

    def status(self):
        st, _, body = self.admin_call("GET", "/status")
        assert st == 200, (st, body)
        return json.loads(body)

    def source(self, name):
        for s in self.status()["sources"]:
            if s["name"] == name:
                return s
        return None

    def wait_source_version(self, name, version, deadline_s=5.0):
        end = time.time() + deadline_s
        while time.time() < end:
            s = self.source(name)
            if s and s["version"] == version:
                return time.time()
            time.sleep(0.003)
        raise AssertionError("source %s never reached version %s (now %r)"
                             % (name, version, self.source(name)))

    def metric(self, name):
        st, _, body = self.admin_call("GET", "/metrics")
        total = 0.0
        found = False
        for line in body.decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
                found = True
        return total if found else None


class Load:
    """GETs of one path through a gateway, on a thread of their own, until
    stop(): `sent` counts them, `failures` keeps each that failed (a status
    other than 200, or the exception)."""

    def __init__(self, gw, path, pause=0.005):
        self.sent, self.failures = 0, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run,
                                        args=(gw, path, pause), daemon=True)
        self._thread.start()

    def _run(self, gw, path, pause):
        while not self._stop.is_set():
            try:
                st, _, _ = gw.request("GET", path, timeout=5)
                if st != 200:
                    self.failures.append(st)
            except Exception as e:  # noqa: BLE001 - any failure counts
                self.failures.append(repr(e))
            self.sent += 1
            time.sleep(pause)

    def stop(self):
        self._stop.set()
        self._thread.join(10)


def wait_for(cond, what, deadline_s=5.0):
    """Poll cond() until it is true; AssertionError naming `what` if it
    never is within the deadline."""
    end = time.time() + deadline_s
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.02)
    raise AssertionError("never: " + what)


def http_call(port, method, path, body=None, headers=None, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data
    finally:
        c.close()


def redis_cmd(port, *args, auth=None):
    """One Redis command (RESP), its reply as Python values; auth: the
    arguments of an AUTH sent first (its reply checked)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        out = b""
        for cmd in ([["AUTH"] + list(auth)] if auth else []) + [args]:
            out += b"*%d\r\n" % len(cmd)
            for a in cmd:
                a = a if isinstance(a, bytes) else str(a).encode()
                out += b"$%d\r\n%s\r\n" % (len(a), a)
        s.sendall(out)
        f = s.makefile("rb")

        def read():
            line = f.readline().rstrip(b"\r\n")
            t, rest = line[:1], line[1:]
            if t == b"+":
                return rest.decode()
            if t == b"-":
                raise RuntimeError(rest.decode())
            if t == b":":
                return int(rest)
            if t == b"$":
                n = int(rest)
                if n < 0:
                    return None
                data = f.read(n + 2)[:-2]
                return data.decode()
            if t == b"*":
                return [read() for _ in range(int(rest))]
            raise RuntimeError("bad reply %r" % line)
        if auth:
            read()
        return read()
    finally:
        s.close()


def raw(port, data, timeout=5.0, read_all=True):
    """Send raw bytes, return what comes back until close or timeout."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            out += chunk
            if not read_all and b"\r\n\r\n" in out:
                break
        return out
    finally:
        s.close()


def echoed_header(body, name):
    """A header the backend received, from its JSON echo."""
    d = json.loads(body)
    for k, v in d["headers"]:
        if k.lower() == name.lower():
            return v
    return None


class Checks:
    """Counts assertions and prints a summary; exit code 1 on failure, 77
    (meson's "skipped") when a part of the test could not run and nothing
    failed: a test that ran only in part is never counted as passed."""

    def __init__(self, name):
        self.name, self.n, self.failed, self.skipped = name, 0, [], []

    def skip(self, why):
        """A part of the test that cannot run here, and why."""
        self.skipped.append(why)
        print("SKIP: %s" % why, flush=True)

    def ok(self, cond, what):
        self.n += 1
        if not cond:
            self.failed.append(what)
            print("FAIL: %s" % what, flush=True)
        return cond

    def eq(self, got, want, what):
        return self.ok(got == want, "%s: got %r, want %r" % (what, got, want))

    def done(self, procs=None):
        if self.failed and procs is not None:
            print("--- gateway log ---\n" + procs.log("gateway.log")[-4000:])
        print("%s: %d checks, %d failed, %d parts skipped%s" % (
            self.name, self.n, len(self.failed), len(self.skipped),
            "".join("\n  skipped: " + w for w in self.skipped)), flush=True)
        sys.exit(1 if self.failed else 77 if self.skipped else 0)


def run(name, body):
    """Run body(procs, checks) with cleanup and a hard time limit."""
    binary()
    procs = Procs()
    checks = Checks(name)

    def on_alarm(sig, frame):
        raise TimeoutError("%s took too long" % name)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(85)
    try:
        body(procs, checks)
    except Exception as e:  # reported as a failed check, with the log
        import traceback
        traceback.print_exc()
        checks.ok(False, "exception: %r" % (e,))
    finally:
        signal.alarm(0)
        procs.stop_all()
    for name in os.listdir(procs.dir):  # sanitizer reports fail the test
        log = procs.log(name)
        checks.ok("ERROR: AddressSanitizer" not in log and
                  "ERROR: LeakSanitizer" not in log and
                  "runtime error:" not in log and
                  "ThreadSanitizer" not in log,
                  "no sanitizer report in %s" % name)
    if not checks.failed:
        import shutil
        shutil.rmtree(procs.dir, ignore_errors=True)
    checks.done(procs)
