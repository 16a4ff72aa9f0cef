#!/usr/bin/env python3
"""Benchmark: nginx with N static location blocks vs nginx routing with
ngx_http_switchyard_module, at 10 and 10,000 routes; and how long a route
change takes to be served: the module's admin PUT vs `nginx -s reload` of
the 10,000-location configuration.

  bench_nginx.py MODULE.so [--duration S] [--connections C] [--threads T]
                 [--repeat N] [--sizes 10,10000] [--changes K]

  only the route changes at 10,000 routes, 5 rounds:
  bench_nginx.py MODULE.so --sizes 10000 --repeat 0 --changes 5

Everything runs on 127.0.0.1 free ports: a backend nginx (one worker,
`return 200`), the measured nginx (2 workers) and wrk (with a Lua script
that spreads requests over all routes). Prints figures; asserts nothing.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

NGINX = os.environ.get("SY_NGINX", "/usr/sbin/nginx")
COMMON = """
worker_processes {workers};
error_log {d}/error.log warn;
pid {d}/nginx.pid;
events {{ worker_connections 4096; }}
"""
TEMPS = """
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
"""


def die_with_parent():
    """preexec_fn: nginx gets SIGTERM when this script dies."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("port %d did not open" % port)


def get(port, path, method="GET", body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request(method, path, body=body)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


class Nginx:
    def __init__(self, name, conf_text):
        self.dir = tempfile.mkdtemp(prefix="sy-bench-%s-" % name)
        os.chmod(self.dir, 0o755)  # workers of a root master run as nobody
        self.conf = os.path.join(self.dir, "nginx.conf")
        self.write(conf_text)
        self.proc = None

    def write(self, text):
        with open(self.conf, "w") as f:
            f.write(text.replace("{d}", self.dir))

    def start(self, port):
        self.proc = subprocess.Popen(
            [NGINX, "-p", self.dir, "-c", self.conf, "-g", "daemon off;"],
            stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
        wait_port(port)

    def reload(self):
        subprocess.run([NGINX, "-p", self.dir, "-c", self.conf, "-s",
                        "reload"], check=True, timeout=60,
                       capture_output=True)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def static_conf(n, port, backend, probe_version):
    locs = ["        location /svc%d/ { proxy_pass http://127.0.0.1:%d/; }"
            % (i, backend) for i in range(n)]
    locs.append("        location /probe/ { proxy_pass "
                "http://127.0.0.1:%d/v%d/; }" % (backend, probe_version))
    return (COMMON.format(workers=2, d="{d}") + "http {\n" +
            TEMPS.format(d="{d}") +
            "    server {\n        listen 127.0.0.1:%d;\n" % port +
            "\n".join(locs) + "\n    }\n}\n")


def routes_doc(n, backend, probe_version):
    uri = "http://127.0.0.1:%d" % backend
    routes = [{"id": "svc%d" % i, "uri": uri,
               "predicates": ["Path=/svc%d/**" % i],
               "filters": ["StripPrefix=1"]} for i in range(n)]
    routes.append({"id": "probe", "uri": uri, "predicates": ["Path=/probe/**"],
                   "filters": ["StripPrefix=1",
                               "PrefixPath=/v%d" % probe_version]})
    return {"version": str(probe_version), "routes": routes}


def module_conf(module, port):
    return ("load_module %s;\n" % module +
            COMMON.format(workers=2, d="{d}") + "http {\n" +
            TEMPS.format(d="{d}") +
            "    switchyard_routes {d}/bench.json;\n"
            "    switchyard_zone 64m;\n"
            "    server {\n        listen 127.0.0.1:%d;\n" % port +
            "        location /switchyard/ { switchyard_admin; "
            "client_max_body_size 64m; client_body_buffer_size 8m; }\n"
            "        location / { switchyard on; "
            "proxy_pass $switchyard_upstream$switchyard_uri; "
            "proxy_set_header Host $switchyard_host; }\n"
            "    }\n}\n")


LUA = """
local n = %d
request = function()
  return wrk.format("GET", "/svc" .. math.random(0, n - 1) .. "/x")
end
"""


def run_wrk(port, n, args, workdir):
    script = os.path.join(workdir, "routes.lua")
    with open(script, "w") as f:
        f.write(LUA % n)
    out = subprocess.run(
        ["wrk", "-t%d" % args.threads, "-c%d" % args.connections,
         "-d%ds" % args.duration, "--latency", "-s", script,
         "http://127.0.0.1:%d" % port],
        check=True, capture_output=True, text=True,
        timeout=args.duration + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[p99.group(2)]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sockerr = re.search(r"Socket errors: (.*)", out)
    return {"rps": rps, "p99_ms": float(p99.group(1)) * scale,
            "non2xx": int(errors.group(1)) if errors else 0,
            "socket_errors": sockerr.group(1) if sockerr else ""}


def load_line(when):
    """A comment line: the time and the load average at `when`."""
    return "# %s UTC, load average at the %s %s" % (
        time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), when,
        " ".join("%.2f" % x for x in os.getloadavg()))


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def spread(xs, fmt="%.3f"):
    """median (min-max) of xs"""
    return (fmt + " (" + fmt + "-" + fmt + ")") % (median(xs), min(xs),
                                                    max(xs))


PROBE = b"GET /probe/x HTTP/1.0\r\nHost: bench\r\n\r\n"


def exchange(port, request, timeout, stamps=None):
    """Send a pre-built request on a fresh plain socket (connected to an
    address tuple: no name lookup) and read the answer until nginx closes
    the connection. Returns the answer's bytes. A list `stamps` gets the
    time.perf_counter() when connected, when the request is all in the
    kernel (sendall returns) and at the answer's first bytes."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(("127.0.0.1", port))
        if stamps is not None:
            stamps.append(time.perf_counter())
        s.sendall(request)
        if stamps is not None:
            stamps.append(time.perf_counter())
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            if stamps is not None and not chunks:
                stamps.append(time.perf_counter())
            chunks.append(chunk)
    finally:
        s.close()
    return b"".join(chunks)


def probe_once(port):
    """GET /probe/x on a fresh connection, as cheaply as a Python client
    can: a plain socket connected to an address tuple (no name lookup, which
    socket.create_connection does at every call), one pre-built request,
    read until nginx closes (HTTP/1.0). About 100 us here, most of it
    nginx's and the backend's; http.client costs several times that, which
    would dominate the "20 in a row" figure. Returns (status, body)."""
    head, _, body = exchange(port, PROBE, 10).partition(b"\r\n\r\n")
    parts = head.split(b" ", 2)
    return (int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0,
            body)


def wait_served(port, version, timeout=120):
    """Probe /probe/ on fresh connections (they spread over the workers)
    until 20 in a row are answered by the new route version. Returns the
    seconds from the call until the first new response, until the first
    response of the final run of 20 (from then on every probe saw the new
    version: the change is served by every worker that answered) and until
    the 20th."""
    t0 = time.perf_counter()
    first, run_start, streak = None, None, 0
    want = ("/v%d/x" % version).encode()
    while streak < 20:
        if time.perf_counter() - t0 > timeout:
            raise RuntimeError("version %d not served" % version)
        try:
            status, body = probe_once(port)
        except OSError:
            streak = 0
            continue
        if status == 200 and want in body:
            now = time.perf_counter() - t0
            if first is None:
                first = now
            if streak == 0:
                run_start = now
            streak += 1
        else:
            streak = 0
    return first, run_start, time.perf_counter() - t0


def put(port, path, body):
    """PUT body (bytes) on a fresh connection with a plain socket: the
    request (headers and body) is built before the clock starts and sent
    with one sendall, the answer read until nginx closes (http.client adds
    ~0.3 ms per call here). Returns (seconds, the JSON answer, the wall
    clock time.time() at the start); the answer gets "client_ms": seconds
    from the start to connected, to the request all sent, to the answer's
    first bytes (ms)."""
    req = (b"PUT %s HTTP/1.1\r\nHost: bench\r\nContent-Length: %d\r\n"
           b"Connection: close\r\n\r\n" % (path.encode(), len(body)) + body)
    t0_wall = time.time()
    stamps = []
    t0 = time.perf_counter()
    answer = exchange(port, req, 30, stamps)
    took = time.perf_counter() - t0
    head, _, reply = answer.partition(b"\r\n\r\n")
    status = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b"0"
    if status != b"200":
        raise RuntimeError("PUT %s: %r %r" % (path, status, reply[:300]))
    reply = json.loads(reply)
    reply["client_ms"] = [(t - t0) * 1e3 for t in stamps]
    return took, reply, t0_wall


def worker_times(port, generation, t0_wall, timeout=30):
    """Wait until every worker reports `generation` (or a later one);
    returns each worker's last apply as the module reports it (copy, apply
    wall, apply CPU; ms) and the seconds from t0_wall (time.time()) to the
    last worker's publish of it (updated_ms, wall clock)."""
    end = time.time() + timeout
    while True:
        _, body = get(port, "/switchyard/status")
        ws = json.loads(body)["workers"]
        if ws and all(w["generation"] >= generation for w in ws):
            break
        if time.time() > end:
            raise RuntimeError("workers not at generation %d: %r"
                               % (generation, ws))
        time.sleep(0.005)
    # updated_us: the worker's wall clock (CLOCK_REALTIME, as time.time())
    # when it published the change
    # (a module without updated_us: updated_ms, whose 1 ms resolution can
    # put a change applied in the call's first millisecond before the
    # call; it then counts as that resolution)
    us = all("updated_us" in w for w in ws)
    every = max(w["updated_us"] / 1e6 if us else w["updated_ms"] / 1e3
                for w in ws) - t0_wall
    return ([(w["copy_us"] / 1e3, w["apply_us"] / 1e3,
              w["apply_cpu_us"] / 1e3) for w in ws],
            max(every, 1e-6 if us else 1e-3))


def record(rounds, call_s, served, extra=None):
    first, run, all_ = served
    r = {"signal_s": call_s, "first_s": call_s + first,
         "run_s": call_s + run, "all_s": call_s + all_}
    r.update(extra or {})
    rounds.append(r)


def put_figures(port, reply, t0_wall):
    workers, every = worker_times(port, reply["generation"], t0_wall)
    return {"every_s": every, "commit_ms": reply["commit_us"] / 1e3,
            "commit_cpu_ms": reply["commit_cpu_us"] / 1e3,
            # (0 from a module that does not split its commit)
            "store_cpu_ms": reply.get("store_cpu_us", 0) / 1e3,
            "stage_cpu_ms": reply.get("stage_cpu_us", 0) / 1e3,
            # (0 from a module without them, or nginx's body reader)
            "body_ms": reply.get("body_us", 0) / 1e3,
            "body_reads": reply.get("body_reads", 0),
            "client_ms": reply["client_ms"],
            "workers": workers}


def measure_changes(st, md, sport, mport, n, bport, args, change):
    """args.changes rounds of: `nginx -s reload` of the static
    configuration with the probe's target changed; the same with SIGHUP
    sent straight to the master (the cheapest reload a client can ask
    for: `nginx -s reload` first parses the configuration itself); a PUT
    of the module's whole document with the probe changed (every other
    route the same bytes as live); a PUT of the probe route alone. Each
    records the call and the time until the new target is served (first
    response; first and last of 20 in a row on fresh connections), all
    from the call's start, with the same client code."""
    sversion, mversion = 2, 2
    for _ in range(args.changes):
        st.write(static_conf(n, sport, bport, sversion))
        t0 = time.perf_counter()
        st.reload()
        call_s = time.perf_counter() - t0
        record(change.setdefault("reload", []), call_s,
               wait_served(sport, sversion))
        sversion += 1

        st.write(static_conf(n, sport, bport, sversion))
        t0 = time.perf_counter()
        os.kill(st.proc.pid, signal.SIGHUP)  # daemon off: proc is the master
        call_s = time.perf_counter() - t0
        record(change.setdefault("reload (SIGHUP)", []), call_s,
               wait_served(sport, sversion))
        sversion += 1

        body = json.dumps(routes_doc(n, bport, mversion)).encode()
        put_s, reply, t0_wall = put(mport, "/switchyard/routes/bench", body)
        served = wait_served(mport, mversion)
        record(change.setdefault("admin PUT document", []), put_s, served,
               put_figures(mport, reply, t0_wall))
        mversion += 1

        probe = routes_doc(0, bport, mversion)["routes"][0]
        put_s, reply, t0_wall = put(mport, "/switchyard/routes/bench/probe",
                                    json.dumps(probe).encode())
        served = wait_served(mport, mversion)
        record(change.setdefault("admin PUT one route", []), put_s, served,
               put_figures(mport, reply, t0_wall))
        mversion += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("module")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sizes", default="10,10000")
    ap.add_argument("--repeat", type=int, default=3,
                    help="wrk runs per configuration (0: none)")
    ap.add_argument("--changes", type=int, default=5,
                    help="rounds of route changes at 10,000 routes")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    module = os.path.abspath(args.module)

    bport = free_port()
    backend = Nginx("backend", COMMON.format(workers=1, d="{d}") +
                    "http {\n" + TEMPS.format(d="{d}") +
                    "    server { listen 127.0.0.1:%d; "
                    "location / { return 200 \"$uri\\n\"; } }\n}\n" % bport)
    results = {}
    change = {}
    print(load_line("start"), flush=True)
    try:
        backend.start(bport)
        for n in [int(x) for x in args.sizes.split(",")]:
            sport, mport = free_port(), free_port()
            st = Nginx("static%d" % n, static_conf(n, sport, bport, 1))
            md = Nginx("module%d" % n, module_conf(module, mport))
            try:
                with open(os.path.join(md.dir, "bench.json"), "w") as f:
                    json.dump(routes_doc(n, bport, 1), f)
                st.start(sport)
                md.start(mport)
                # alternate the two on a shared machine; keep the medians
                runs = {"static": [], "module": []}
                for _ in range(args.repeat):
                    runs["static"].append(run_wrk(sport, n, args, st.dir))
                    runs["module"].append(run_wrk(mport, n, args, md.dir))
                for kind, rs in runs.items():
                    if not rs:
                        continue
                    results[(kind, n)] = {
                        "rps": median([r["rps"] for r in rs]),
                        "p99_ms": median([r["p99_ms"] for r in rs]),
                        "non2xx": sum(r["non2xx"] for r in rs),
                        "socket_errors": "; ".join(r["socket_errors"]
                                                   for r in rs
                                                   if r["socket_errors"]),
                        "all_rps": [r["rps"] for r in rs]}
                if n >= 10000:
                    measure_changes(st, md, sport, mport, n, bport, args,
                                    change)
            finally:
                st.stop()
                md.stop()
    finally:
        backend.stop()

    print(load_line("end"))
    print("nginx %s, wrk -t%d -c%d -d%ds, requests spread over all routes; "
          "median of %d alternating runs"
          % (subprocess.run([NGINX, "-v"], capture_output=True,
                            text=True).stderr.strip().split("/")[-1],
             args.threads, args.connections, args.duration, args.repeat))
    print("%-8s %8s %12s %10s %8s" % ("routes", "config", "req/s", "p99 ms",
                                      "errors"))
    for (kind, n), r in sorted(results.items(), key=lambda x: (x[0][1],
                                                               x[0][0])):
        print("%-8d %8s %12.0f %10.2f %8s   runs: %s" % (
            n, kind, r["rps"], r["p99_ms"],
            r["non2xx"] or r["socket_errors"] or 0,
            " ".join("%.0f" % x for x in r["all_rps"])))
    for n in sorted({n for _, n in results}):
        s, m = results.get(("static", n)), results.get(("module", n))
        if s and m:
            print("routes %d: module/static req/s = %.3f" % (n, m["rps"] /
                                                             s["rps"]))
    for k, rounds in change.items():
        print("route change (%s), %d rounds; medians (min-max), from the "
              "call's start:\n    call returns %s s, first new response %s s,"
              " 20 in a row from its first response %s s, to its last %s s"
              % (k, len(rounds), spread([r["signal_s"] for r in rounds]),
                 spread([r["first_s"] for r in rounds]),
                 spread([r["run_s"] for r in rounds]),
                 spread([r["all_s"] for r in rounds])))
        if "commit_ms" in rounds[0]:
            print("    every worker applied it (the last worker's publish): "
                  "%s s" % spread([r["every_s"] for r in rounds]))
            print("    the answering worker's commit: %s ms wall, %s ms CPU "
                  "= zone room + body copy %s + the library's staging %s + "
                  "the library's commit %s" % (
                      spread([r["commit_ms"] for r in rounds], "%.2f"),
                      spread([r["commit_cpu_ms"] for r in rounds], "%.2f"),
                      spread([r["store_cpu_ms"] for r in rounds], "%.2f"),
                      spread([r["stage_cpu_ms"] for r in rounds], "%.2f"),
                      spread([r["commit_cpu_ms"] - r["store_cpu_ms"] -
                              r["stage_cpu_ms"] for r in rounds], "%.2f")))
            print("    the call, from its start: connected %s ms, request "
                  "all sent (sendall returns) %s ms, the answer's first "
                  "bytes %s ms; nginx's read of the body (headers' end to "
                  "last byte) %s ms in %s reads" % (
                      spread([r["client_ms"][0] for r in rounds], "%.2f"),
                      spread([r["client_ms"][1] for r in rounds], "%.2f"),
                      spread([r["client_ms"][2] for r in rounds], "%.2f"),
                      spread([r["body_ms"] for r in rounds], "%.2f"),
                      spread([r["body_reads"] for r in rounds], "%d")))
            print("    each worker's last apply (copy + apply wall / CPU ms):"
                  " %s" % "; ".join(", ".join("%.1f+%.1f/%.1f" % w
                                              for w in r["workers"])
                                    for r in rounds))
    for rk in ("reload", "reload (SIGHUP)"):
        for k in ("admin PUT document", "admin PUT one route"):
            if rk not in change or k not in change:
                continue
            rl, ch = change[rk], change[k]

            def ratio(key, other=None):
                return (median([r[key] for r in rl]) /
                        median([r[other or key] for r in ch]))
            print("%s / %s (medians): %.1fx first new response, %.1fx "
                  "20 in a row from its first, %.1fx to its last, %.1fx "
                  "(reload's 20 in a row from its first / every worker "
                  "applied)" % (rk, k, ratio("first_s"), ratio("run_s"),
                                ratio("all_s"), ratio("run_s", "every_s")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
