#!/usr/bin/env python3
"""counts.py - what a proxied request costs the mini-gateway (or nginx) in
counts that the machine's load barely moves, where run.sh's CPU time per
request moves with every other process on a shared machine:

  instr   user-space instructions per request of the proxy's process
          (callgrind, all its threads, collected only while the measured
          requests run)
  sys     system calls per request of the proxy (perf's raw_syscalls
          tracepoint), and the commonest ones by name
  cs      context switches per request of the proxy (perf, all threads)
  us      its CPU time per request (utime + stime, /proc): load-dependent,
          printed only as a cross-check
  misses  with --cache-sim: callgrind's simulated cache misses per request
          of the same run (I1, D1 read and write, and the last level's),
          for a change that saves instructions but spreads the code

wrk (-t1 -cC, keep-alive) sends a fixed number of requests (a Lua script
stops it after N responses); the request count is read from the gateway's
GET /metrics (nginx: its stub_status). Cases: `one` (1 route), `many` (ROUTES
routes, the request hits the last), `limit` (a local RequestRateLimiter
that never denies), `breaker` (a closed CircuitBreaker), `redis` (the
`limit` route with --redis on a redis-server started here; its line adds
Redis's script calls per request and usec per call, INFO commandstats).

  python3 counts.py --gw build/examples/mini-gateway/mini-gateway \
      [--nginx /usr/sbin/nginx] [--cases one,many,limit,breaker] \
      [--n 20000] [--cn 4000] [--no-callgrind] [--cache-sim] [--plain-nginx] \
      [--pace MS] \
      [--pipeline 1,8,16]

nginx sends the headers the gateway sent upstream before session 49
(X-Forwarded-For/Proto/Host, a traceparent); the gateway now sends the
X-Forwarded-* (and Forwarded) only with --trusted-proxies (--gw-arg passes
it), so by default nginx's answers are the longer; --plain-nginx leaves
them out. --pace MS has each
connection wait MS ms between a response and its next request: the proxies
then run below saturation, where each request pays its own wakeups.
--pipeline 1,8 measures the gateway at each --upstream-pipeline depth
(rows `gw` for 1, `gw-p8` for 8: requests pipelined to the backend).

--ab ROUNDS reads what a policy costs by CPU time with everything else
held equal: one gateway serving three routes, `/p/` (no policy), `/l/`
(the `limit` route's limiter) and `/b/` (the `breaker` route's breaker),
and plain wrk loading them in turn for --duration seconds a phase (p l p
b, ROUNDS times, then p), each phase's CPU per request the process's
scheduler run time over the requests served. Each policy phase is read
against the mean of the two no-policy phases beside it, and the median
of those ratios printed: the same process, backend, connections and
machine moment, so neither the order of the cases nor a process's
placement on the cores moves the ratio (as it moves run.sh's, which
starts a gateway per case).

A benchmark: it prints figures and asserts nothing.
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request


def cache_sim_args():
    """--cache-sim: callgrind's I1, D1 and LL as this machine's L1i, L1d
    and L2 (per core, from sysfs: lscpu prints totals over the cores);
    32 KiB 8-way L1s and a 1 MiB 8-way LL where sysfs does not say, or
    where a level's set count is not a power of two (callgrind's rule)."""
    want = {("Instruction", "1"): ("--I1", 32768, 8, 64),
            ("Data", "1"): ("--D1", 32768, 8, 64),
            ("Unified", "2"): ("--LL", 1048576, 8, 64)}
    got = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    for d in (os.listdir(base) if os.path.isdir(base) else []):
        try:
            f = {k: open(os.path.join(base, d, k)).read().strip() for k in
                 ("type", "level", "size", "ways_of_associativity",
                  "coherency_line_size")}
            size = int(f["size"].rstrip("K")) * 1024
            ways, line = int(f["ways_of_associativity"]), int(
                f["coherency_line_size"])
        except (OSError, ValueError):
            continue
        sets = size // (ways * line) if ways and line else 0
        key = (f["type"], f["level"])
        if key in want and sets and sets & (sets - 1) == 0:
            got[key] = (want[key][0], size, ways, line)
    return ["%s=%d,%d,%d" % got.get(k, v) for k, v in want.items()]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(p, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", p), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("port %d never opened" % p)


LUA = r"""
local n, limit = 0, tonumber(os.getenv("WRK_N"))
function response(status, headers, body)
  if status ~= 200 then
    io.stderr:write("status " .. status .. "\n")
    os.exit(1)
  end
  n = n + 1
  -- wrk's main thread sleeps for -d whatever its threads do: leave at once
  if n >= limit then os.exit(0) end
end
"""

SYSCALLS = ["read", "write", "writev", "sendto", "sendmsg", "recvfrom",
            "recvmsg", "epoll_wait", "epoll_pwait", "epoll_ctl", "futex",
            "getsockopt", "setsockopt", "accept4", "close", "connect",
            "clock_gettime", "ioctl", "getpid", "openat", "brk", "mmap",
            "munmap", "madvise", "timerfd_settime"]


# The headers the gateway sends upstream, sent by nginx too (not with
# --plain-nginx): the backend echoes every header it receives, so without
# them nginx's answers are ~180 bytes shorter than the gateway's. The
# traceparent is fixed, of the length of the gateway's (which makes a span
# id a request; nginx's $request_id would cost it more).
SAME_HEADERS = ("proxy_set_header Host 127.0.0.1:%d; "
                "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; "
                "proxy_set_header X-Forwarded-Proto $scheme; "
                "proxy_set_header X-Forwarded-Host $http_host; "
                "proxy_set_header traceparent "
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01; ")


class Proxy:
    """A gateway or nginx under test, with its request counter."""

    def __init__(self, args, work, kind, case, bp):
        self.args, self.work, self.kind, self.case = args, work, kind, case
        self.port = free_port()
        self.admin = free_port()
        self.bp = bp
        self.proc = None

    def start(self, callgrind=False):
        pre = []
        if callgrind:
            self.cgout = os.path.join(self.work, "cg.%s.%s.out" %
                                      (self.kind, self.case))
            pre = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                   "--callgrind-out-file=" + self.cgout]
            if self.args.cache_sim:
                pre[2:2] = ["--cache-sim=yes"] + cache_sim_args()
        if self.kind.startswith("gw"):
            cmd = pre + [self.args.gw, "--listen", "127.0.0.1:%d" % self.port,
                         "--admin", "127.0.0.1:%d" % self.admin,
                         "--workers", "1", "--quiet", "--routes",
                         os.path.join(self.work, (
                             "limit" if self.case == "redis" else self.case)
                             + ".json")]
            if self.case == "redis":
                cmd += ["--redis", "127.0.0.1:%d" % self.args.redis_port]
            if self.kind != "gw":  # gw-pN: --upstream-pipeline N
                cmd += ["--upstream-pipeline", self.kind[4:]]
            cmd += self.args.gw_arg
        else:
            conf = os.path.join(self.work, "nginx-%s.conf" % self.case)
            txt = open(os.path.join(self.work, "nginx.tmpl")).read()
            loc = ("    location %s { proxy_pass http://backend; "
                   "proxy_http_version 1.1; proxy_set_header Connection \"\"; "
                   + ("" if self.args.plain_nginx else SAME_HEADERS %
                      self.bp) + "}\n")
            if self.case == "many":
                locs = "".join(loc % ("/r%d/" % i)
                               for i in range(self.args.routes))
            else:
                locs = loc % "/"
            open(conf, "w").write(txt.replace("PORT", str(self.port))
                                  .replace("LOCS", locs)
                                  .replace("MASTER", "off" if callgrind
                                           else "on"))
            for d in ("body", "proxy", "fcgi", "uwsgi", "scgi"):
                os.makedirs(os.path.join(self.work, "tmp-" + d), exist_ok=True)
            cmd = pre + [self.args.nginx, "-p", self.work, "-c", conf,
                         "-g", "daemon off;"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(
                                         self.work, "proxy.log"), "a"))
        wait_port(self.port, 300 if callgrind else 60)
        if self.kind.startswith("gw"):
            wait_port(self.admin, 300 if callgrind else 60)

    def pid(self):
        """The process serving requests (nginx: its worker)."""
        if self.kind == "nginx" and not self.args_callgrind:
            out = subprocess.run(["pgrep", "-P", str(self.proc.pid)],
                                 capture_output=True, text=True).stdout.split()
            return int(out[0])
        return self.proc.pid

    def served(self):
        """Requests served so far (the gateway's /metrics, nginx's
        stub_status, whose own request counts: -1)."""
        if not self.kind.startswith("gw"):
            t = urllib.request.urlopen("http://127.0.0.1:%d/nginx_status" %
                                       self.port, timeout=30).read().decode()
            return int(t.splitlines()[2].split()[2]) - 1
        t = urllib.request.urlopen("http://127.0.0.1:%d/metrics" %
                                   self.admin, timeout=30).read().decode()
        return sum(int(m.group(1)) for m in re.finditer(
            r"^gateway_requests_total\{[^}]*\} (\d+)$", t, re.M))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def redis_cmd(port, *words):
    """One Redis command, its reply's text (RESP, read until quiet)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"*%d\r\n" % len(words) + b"".join(
        b"$%d\r\n%s\r\n" % (len(w.encode()), w.encode()) for w in words))
    out = b""
    s.settimeout(0.3)
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
    except socket.timeout:
        pass
    s.close()
    return out.decode("utf-8", "replace")


def redis_scripts(port):
    """(calls, usec) of EVAL/EVALSHA since the last CONFIG RESETSTAT."""
    t = redis_cmd(port, "INFO", "commandstats")
    calls = usec = 0
    for m in re.finditer(r"cmdstat_(?:eval|evalsha):calls=(\d+),usec=(\d+)",
                         t):
        calls += int(m.group(1))
        usec += int(m.group(2))
    return calls, usec


def wrk(args, port, n, path):
    env = dict(os.environ, WRK_N=str(n))
    r = subprocess.run(["wrk", "-t1", "-c%d" % args.connections, "-d3600s",
                        "-s", os.path.join(args.work, "stop.lua"),
                        "http://127.0.0.1:%d/%s" % (port, path)],
                       capture_output=True, text=True, env=env,
                       timeout=1800)
    if r.returncode != 0:
        raise SystemExit("wrk: " + r.stdout + r.stderr)
    return n


def proc_ticks(pid):
    t = 0
    for task in os.listdir("/proc/%d/task" % pid):
        st = open("/proc/%d/task/%s/stat" % (pid, task)).read()
        f = st[st.rindex(")") + 2:].split()
        t += int(f[11]) + int(f[12])
    return t


def proc_runtime(pid):
    """ns the process's threads ran (the scheduler's own sum, not ticks)"""
    return sum(int(open("/proc/%d/task/%s/schedstat" % (pid, t)).read()
                   .split()[0]) for t in os.listdir("/proc/%d/task" % pid))


def measure_cpu(args, px, path):
    """CPU per request under plain wrk for --duration seconds, as run.sh
    loads the proxy: by ticks (run.sh's reading) and by the scheduler's
    run time."""
    wrk(args, px.port, 2000, path)
    pid = px.pid()
    c0, t0, r0 = px.served(), proc_ticks(pid), proc_runtime(pid)
    paced = ["-s", os.path.join(args.work, "pace.lua")] if args.pace else []
    subprocess.run(["wrk", "-t1", "-c%d" % args.connections,
                    "-d%ds" % args.duration] + paced +
                   ["http://127.0.0.1:%d/%s" % (px.port, path)],
                   capture_output=True, check=True)
    t1, r1, c1 = proc_ticks(pid), proc_runtime(pid), px.served()
    n = c1 - c0
    return n, (t1 - t0) * 1e6 / os.sysconf("SC_CLK_TCK") / n, \
        (r1 - r0) / 1e3 / n


def measure_perf(args, px, path):
    """syscalls, context switches and CPU time per request."""
    wrk(args, px.port, 2000, path)  # warm: pools, caches
    pid = px.pid()
    if px.case == "redis":
        redis_cmd(args.redis_port, "CONFIG", "RESETSTAT")
    c0, t0 = px.served(), proc_ticks(pid)
    evs = ["raw_syscalls:sys_enter", "context-switches"] + \
        ["syscalls:sys_enter_" + s for s in SYSCALLS]
    out = os.path.join(args.work, "perf.txt")
    perf = subprocess.Popen(["perf", "stat", "-x,", "-o", out, "-p", str(pid),
                             "-e", ",".join(evs)])
    time.sleep(0.5)
    n = wrk(args, px.port, args.n, path)
    time.sleep(0.2)
    perf.send_signal(signal.SIGINT)
    perf.wait()
    t1 = proc_ticks(pid)
    c1 = px.served()
    n = c1 - c0
    res = {}
    for line in open(out):
        f = line.strip().split(",")
        if len(f) > 2 and f[0].replace(".", "").isdigit():
            res[f[2]] = float(f[0])
    hz = os.sysconf("SC_CLK_TCK")
    per = {k: v / n for k, v in res.items()}
    if px.case == "redis":
        calls, usec = redis_scripts(args.redis_port)
        per["redis-calls"] = calls / n
        per["redis-usec-per-call"] = usec / max(calls, 1)
    return n, per, (t1 - t0) * 1e6 / hz / n


def measure_ab(args, w, bp):
    """--ab: the policy routes against the no-policy route in one gateway,
    phases alternating (see the module's text)."""
    up = "http://127.0.0.1:%d" % bp
    d = json.load(open(os.path.join(w, "limit.json")))["routes"][0]
    lim = d["filters"][0]
    brk = json.load(open(os.path.join(w, "breaker.json")))["routes"][0][
        "filters"][0]
    json.dump({"version": "1", "routes": [
        {"id": "p", "uri": up, "predicates": ["Path=/p/**"]},
        {"id": "l", "uri": up, "predicates": ["Path=/l/**"],
         "filters": [lim]},
        {"id": "b", "uri": up, "predicates": ["Path=/b/**"],
         "filters": [brk]}]}, open(os.path.join(w, "ab.json"), "w"))
    px = Proxy(args, w, "gw", "ab", bp)
    px.args_callgrind = False
    px.start()
    seq = []
    try:
        pid = px.pid()
        wrk(args, px.port, 2000, "p/x")  # warm: pools, caches
        order = ["p", "l", "p", "b"] * args.ab + ["p"]
        for k in order:
            c0, r0 = px.served(), proc_runtime(pid)
            subprocess.run(["wrk", "-t1", "-c%d" % args.connections,
                            "-d%ds" % args.duration,
                            "http://127.0.0.1:%d/%s/x" % (px.port, k)],
                           capture_output=True, check=True)
            r1, c1 = proc_runtime(pid), px.served()
            seq.append((k, (r1 - r0) / 1e3 / (c1 - c0)))
            print("  %s %6.2f us/req  (%d requests, load %s)" % (
                k, seq[-1][1], c1 - c0,
                open("/proc/loadavg").read().split()[0]), flush=True)
    finally:
        px.stop()
    rat = {"l": [], "b": []}
    for i in range(1, len(seq) - 1):
        k, v = seq[i]
        if k in rat:
            rat[k].append(v / ((seq[i - 1][1] + seq[i + 1][1]) / 2))
    for k, name in (("l", "local limit"), ("b", "breaker")):
        xs = sorted(rat[k])
        print("ab %-12s / no policy: CPU per request, median %.3f of %d "
              "(%s)" % (name, xs[len(xs) // 2], len(xs),
                        " ".join("%.2f" % x for x in xs)), flush=True)


def measure_callgrind(args, px, path):
    wrk(args, px.port, 500, path)  # warm (slowly, under valgrind)
    c0 = px.served()
    pid = px.pid()
    subprocess.run(["callgrind_control", "-i", "on", str(pid)],
                   capture_output=True, check=True)
    n = wrk(args, px.port, args.cn, path)
    subprocess.run(["callgrind_control", "-i", "off", str(pid)],
                   capture_output=True, check=True)
    c1 = px.served()
    n = c1 - c0
    px.stop()
    ir, best = 0, {}
    for f in os.listdir(args.work):
        if f.startswith(os.path.basename(px.cgout)):
            events = []
            for line in open(os.path.join(args.work, f)):
                if line.startswith("events:"):
                    events = line.split()[1:]
                if line.startswith("totals:") or line.startswith("summary:"):
                    v = [int(x) for x in line.split()[1:]]
                    # the file of the thread that served the requests
                    if v and v[0] > ir:
                        ir, best = v[0], dict(zip(events, v))
    return n, ir / n, {k: c / n for k, c in best.items() if k != "Ir"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gw", required=True)
    ap.add_argument("--backend", help="binary for --backend (default --gw)")
    ap.add_argument("--gw-arg", action="append", default=[],
                    help="one more argument for the gateway (repeatable): "
                    "--gw-arg=--trusted-proxies '--gw-arg=127\\.0\\.0\\.1'")
    ap.add_argument("--nginx")
    ap.add_argument("--cases", default="one,many,limit,breaker")
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--cn", type=int, default=4000)
    ap.add_argument("--routes", type=int, default=10000)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--plain-nginx", action="store_true",
                    help="nginx without the gateway's upstream headers")
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--cache-sim", action="store_true",
                    help="callgrind's cache simulation too (I1, D1 and "
                    "LL as this machine's L1i, L1d and L2, from sysfs): "
                    "misses a request beside the instructions")
    ap.add_argument("--no-perf", action="store_true")
    ap.add_argument("--cpu", type=int, default=0, metavar="ROUNDS",
                    help="only CPU per request under plain wrk, ROUNDS "
                    "rounds of each case, proxies alternating")
    ap.add_argument("--ab", type=int, default=0, metavar="ROUNDS",
                    help="only the policy routes against the no-policy "
                    "route in one gateway, wrk phases alternating")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--pipeline", default="1", metavar="N[,N...]",
                    help="the gateway at each --upstream-pipeline depth "
                    "(rows gw, gw-pN)")
    ap.add_argument("--pace", type=int, default=0, metavar="MS",
                    help="each connection waits MS ms after a response "
                    "before its next request (wrk's delay()), so "
                    "both proxies serve about connections / (MS ms + "
                    "latency) requests/s instead of all they can")
    args = ap.parse_args()
    args.work = tempfile.mkdtemp(prefix="gw-counts-")
    pace = "function delay() return %d end\n" % args.pace if args.pace \
        else ""
    open(os.path.join(args.work, "stop.lua"), "w").write(LUA + pace)
    open(os.path.join(args.work, "pace.lua"), "w").write(pace)
    bp = free_port()
    rs = None
    if "redis" in args.cases.split(","):
        args.redis_port = free_port()
        rs = subprocess.Popen(["redis-server", "--port", str(args.redis_port),
                               "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no"],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    be = subprocess.Popen([args.backend or args.gw, "--backend", "--id", "b",
                           "--version", "1", "--listen", "127.0.0.1:%d" % bp],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(bp)
        if rs:
            wait_port(args.redis_port)
        up = "http://127.0.0.1:%d" % bp
        w = args.work
        lim = {"name": "RequestRateLimiter", "args": {
            "redis-rate-limiter.replenishRate": "2000000000",
            "redis-rate-limiter.burstCapacity": "2000000000",
            "key-resolver": "#{@remoteAddrKeyResolver}"}}
        brk = {"name": "CircuitBreaker", "args": {"name": "bench"}}
        one = {"id": "all", "uri": up, "predicates": ["Path=/**"]}
        docs = {"one": [one],
                "many": [{"id": "r%d" % i, "uri": up,
                          "predicates": ["Path=/r%d/**" % i]}
                         for i in range(args.routes)],
                "limit": [dict(one, filters=[lim])],
                "breaker": [dict(one, filters=[brk])]}
        for k, v in docs.items():
            json.dump({"version": "1", "routes": v},
                      open(os.path.join(w, k + ".json"), "w"))
        open(os.path.join(w, "nginx.tmpl"), "w").write("""
master_process MASTER;
worker_processes 1;
pid %(w)s/nginx.pid;
error_log %(w)s/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %(w)s/tmp-body;
  proxy_temp_path %(w)s/tmp-proxy;
  fastcgi_temp_path %(w)s/tmp-fcgi;
  uwsgi_temp_path %(w)s/tmp-uwsgi;
  scgi_temp_path %(w)s/tmp-scgi;
  upstream backend { server 127.0.0.1:%(bp)d; keepalive 64; }
  server {
    listen 127.0.0.1:PORT;
    location = /nginx_status { stub_status; }
LOCS
  }
}
""" % {"w": w, "bp": bp})
        path = "r%d/x" % (args.routes - 1)
        kinds = [("gw" if d == 1 else "gw-p%d" % d, c)
                 for c in args.cases.split(",")
                 for d in (int(x) for x in args.pipeline.split(","))]
        if args.nginx:
            kinds += [("nginx", c) for c in args.cases.split(",")
                      if c in ("one", "many")]
        print("load %s; n=%d (callgrind %d), wrk -t1 -c%d" % (
            open("/proc/loadavg").read().split()[:3], args.n, args.cn,
            args.connections), flush=True)
        if args.ab:
            measure_ab(args, w, bp)
            return
        if args.cpu:
            for r in range(args.cpu):
                for case in args.cases.split(","):
                    for kind, c in kinds:
                        if c != case:
                            continue
                        px = Proxy(args, w, kind, case, bp)
                        px.args_callgrind = False
                        px.start()
                        try:
                            n, tk, rt = measure_cpu(args, px, path)
                        finally:
                            px.stop()
                        print("%-6s %-8s round %d  %8.0f req/s  ticks %.1f "
                              "us/req  runtime %.1f us/req  load %s" % (
                                  kind, case, r, n / args.duration, tk, rt,
                                  open("/proc/loadavg").read().split()[0]),
                              flush=True)
            return
        for kind, case in kinds:
            line = "%-6s %-8s" % (kind, case)
            if not args.no_perf:
                px = Proxy(args, w, kind, case, bp)
                px.args_callgrind = False
                px.start()
                try:
                    n, per, us = measure_perf(args, px, path)
                finally:
                    px.stop()
                top = sorted(((v, k.replace("syscalls:sys_enter_", ""))
                              for k, v in per.items()
                              if k.startswith("syscalls:") and v >= 0.005),
                             reverse=True)
                line += " sys %.3f cs %.3f us %.1f (n %d) [%s]" % (
                    per.get("raw_syscalls:sys_enter", 0),
                    per.get("context-switches", 0), us, n,
                    " ".join("%s %.3f" % (k, v) for v, k in top))
                if case == "redis":
                    line += " redis: %.3f script calls/req, %.1f us each" % (
                        per["redis-calls"], per["redis-usec-per-call"])
            if not args.no_callgrind:
                px = Proxy(args, w, kind, case, bp)
                px.args_callgrind = True
                px.start(callgrind=True)
                n, ir, miss = measure_callgrind(args, px, path)
                line += " instr %.0f (n %d)" % (ir, n)
                if args.cache_sim:
                    line += " misses/req " + " ".join(
                        "%s %.1f" % (k, miss[k]) for k in
                        ("I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")
                        if k in miss)
            print(line, flush=True)
    finally:
        be.send_signal(signal.SIGTERM)
        be.wait()
        if rs:
            rs.send_signal(signal.SIGTERM)
            rs.wait()


if __name__ == "__main__":
    main()
