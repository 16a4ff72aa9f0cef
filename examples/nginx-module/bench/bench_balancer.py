#!/usr/bin/env python3
"""Benchmark: ngx_http_switchyard_module through `switchyard_balancer` with
keepalive against plain nginx with the equivalent `upstream` + `keepalive`
configuration, at 10 and 10,000 routes (requests spread over all routes);
then a backend killed under load: client errors of each (idempotent GETs,
`proxy_next_upstream error timeout http_502` in both).

  bench_balancer.py MODULE.so [--duration S] [--connections C]
                    [--threads T] [--repeat N] [--sizes 10,10000]
                    [--kill-duration S] [--kill-rate R] [--control]
                    [--no-kill] [--form bare|uri]
  bench_balancer.py MODULE.so --callgrind [--sizes 10] [--requests 500,2500]
                    [--form bare|uri]

Everything runs on 127.0.0.1 free ports: two backend nginx processes
(`master_process off`, `return 200`), the measured nginx (2 workers each)
and wrk. Prints, per size and configuration, the median requests/s and
p99 and the client errors (non-2xx answers and socket errors), the
balancer/plain ratios of both, and each one's client errors with a
backend killed. Asserts nothing. Every run's p99 is printed beside the
median: on a shared 2-core box they spread by a millisecond; and so is
how the run's client connections were spread over the two workers (read
half way through each run): nginx's workers take connections as they
wake, a run can go 29/3, and such a run's p99 is one worker's queue,
whatever the configuration. The module's location sends `proxy_pass
http://routed;` (--form bare, the default) or `proxy_pass
http://routed$switchyard_uri;` (--form uri): docs/nginx.md. --control
adds a second plain nginx with the very same configuration, alternated
with the other two: its ratio to the first plain is what the bench's
noise alone gives (an A/A comparison), the yardstick for the balancer's
ratio. --callgrind measures without the clock instead: each nginx with
one worker (`master_process off`) under callgrind, one keepalive client
sending a fixed number of GETs spread over the routes, and prints the
worker's instructions a request (the difference of two runs' totals over
the difference of their request counts: start-up and exit cancel out).
The plain configuration has one
location per route, as an operator would write it; the module has one
location and N routes.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_nginx import (COMMON, NGINX, TEMPS, Nginx, free_port,  # noqa: E402
                         load_line, median, run_wrk, spread, wait_port)

PROXY = ("proxy_http_version 1.1; proxy_set_header Connection \"\"; "
         "proxy_next_upstream error timeout http_502; "
         "proxy_connect_timeout 1s;")


def backend_conf(port):
    return ("master_process off;\n" + COMMON.format(workers=1, d="{d}") +
            "http {\n" + TEMPS.format(d="{d}") +
            "    server { listen 127.0.0.1:%d; keepalive_requests 100000; "
            "location / { return 200 \"$uri\\n\"; } }\n}\n" % port)


def plain_conf(n, port, backends, keepalive):
    servers = "".join("        server 127.0.0.1:%d;\n" % b for b in backends)
    locs = ["        location /svc%d/ { proxy_pass http://be/; %s }"
            % (i, PROXY) for i in range(n)]
    return (COMMON.format(workers=2, d="{d}") + "http {\n" +
            TEMPS.format(d="{d}") +
            "    upstream be {\n%s        keepalive %d;\n    }\n"
            % (servers, keepalive) +
            "    server {\n        listen 127.0.0.1:%d;\n" % port +
            "\n".join(locs) + "\n    }\n}\n")


def module_conf(module, port, keepalive, form="bare"):
    """form "bare": proxy_pass http://routed; (no variable: the balancer
    sets the route's path and query in the request line); "uri": proxy_pass
    http://routed$switchyard_uri; (nginx evaluates and parses the URL per
    request). docs/nginx.md documents both."""
    target = "http://routed" + ("$switchyard_uri" if form == "uri" else "")
    return ("load_module %s;\n" % module +
            COMMON.format(workers=2, d="{d}") + "http {\n" +
            TEMPS.format(d="{d}") +
            "    switchyard_routes {d}/bench.json;\n"
            "    switchyard_instances {d}/instances.json;\n"
            "    switchyard_zone 64m;\n"
            "    upstream routed {\n        switchyard_balancer;\n"
            "        keepalive %d;\n    }\n" % keepalive +
            "    server {\n        listen 127.0.0.1:%d;\n" % port +
            "        location / { switchyard on; "
            "proxy_pass %s; "
            "proxy_set_header Host $switchyard_host; %s }\n" % (target, PROXY) +
            "    }\n}\n")


def routes_doc(n):
    return {"version": "1", "routes": [
        {"id": "svc%d" % i, "uri": "lb://be",
         "predicates": ["Path=/svc%d/**" % i], "filters": ["StripPrefix=1"]}
        for i in range(n)]}


def instances_doc(backends):
    return {"services": {"be": [
        {"id": "be%d" % i, "host": "127.0.0.1", "port": b}
        for i, b in enumerate(backends)]}}


def pair(module, n, backends, keepalive, form="bare"):
    """The plain and the module nginx for n routes, started."""
    pport, mport = free_port(), free_port()
    plain = Nginx("plain%d" % n, plain_conf(n, pport, backends, keepalive))
    mod = Nginx("balancer%d" % n, module_conf(module, mport, keepalive, form))
    with open(os.path.join(mod.dir, "bench.json"), "w") as f:
        json.dump(routes_doc(n), f)
    with open(os.path.join(mod.dir, "instances.json"), "w") as f:
        json.dump(instances_doc(backends), f)
    plain.start(pport)
    mod.start(mport)
    return (plain, pport), (mod, mport)


def kill_run(port, n, args, workdir, victim):
    """wrk for --kill-duration seconds at --kill-rate connections; the
    victim backend is killed a third of the way in."""
    a = argparse.Namespace(threads=args.threads,
                           connections=args.kill_rate,
                           duration=args.kill_duration)
    proc = victim["proc"]
    import threading

    def kill():
        time.sleep(args.kill_duration / 3.0)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
    t = threading.Thread(target=kill)
    t.start()
    r = run_wrk(port, n, a, workdir)
    t.join()
    return r


def worker_split(port):
    """How the established client connections to port are spread over
    nginx's workers: their counts, largest first ("20/12")."""
    out = subprocess.run(["ss", "-tnpH", "state", "established",
                          "( sport = :%d )" % port], capture_output=True,
                         text=True).stdout
    pids = re.findall(r"pid=(\d+)", out)
    return "/".join(str(c) for c in sorted(
        (pids.count(p) for p in set(pids)), reverse=True)) or "?"


def split_wrk(port, n, args, workdir):
    """run_wrk, with the connections' spread over the workers read half
    way through (r["split"]): with one accept queue the workers take the
    connections as they wake, and a run whose 32 connections went 29/3
    has one worker doing nearly all the work, whatever the
    configuration (its p99 shows it)."""
    import threading
    seen = {}

    def look():
        time.sleep(args.duration / 2.0)
        seen["split"] = worker_split(port)
    t = threading.Thread(target=look)
    t.start()
    r = run_wrk(port, n, args, workdir)
    t.join()
    r["split"] = seen.get("split", "?")
    return r


def client_errors(r):
    """What the clients saw fail in a wrk run: non-2xx/3xx answers and
    socket errors (connect, read, write, timeout)."""
    return r["non2xx"] + sum(int(x) for x in
                             re.findall(r"\d+", r["socket_errors"]))


def start_backends(name):
    """Two backend nginx on free ports, started: (them, their ports)."""
    ports = [free_port(), free_port()]
    backs = [Nginx("%s%d" % (name, i + 1), backend_conf(p))
             for i, p in enumerate(ports)]
    try:
        for b, p in zip(backs, ports):
            b.start(p)
    except BaseException:
        for b in backs:
            b.stop()
        raise
    return backs, ports


def one_worker(conf):
    """A configuration of this bench for a callgrind run: no master, one
    worker, every request on one connection."""
    return "master_process off;\n" + conf.replace(
        "worker_processes 2;", "worker_processes 1;").replace(
        "http {\n", "http {\n    keepalive_requests 100000;\n", 1)


def keepalive_gets(port, n, count):
    """count GETs on one keepalive connection, spread over n routes; each
    answer read whole (Content-Length) before the next is sent."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    buf = b""
    try:
        for i in range(count):
            s.sendall(b"GET /svc%d/x HTTP/1.1\r\nHost: bench\r\n\r\n"
                      % (i % n))
            while b"\r\n\r\n" not in buf:
                chunk = s.recv(65536)
                if not chunk:
                    raise RuntimeError("connection closed")
                buf += chunk
            head, buf = buf.split(b"\r\n\r\n", 1)
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError("answer %r" % head[:40])
            m = re.search(rb"(?i)content-length:\s*(\d+)", head)
            need = int(m.group(1)) if m else 0
            while len(buf) < need:
                chunk = s.recv(65536)
                if not chunk:
                    raise RuntimeError("connection closed")
                buf += chunk
            buf = buf[need:]
    finally:
        s.close()


def callgrind_run(ng, port, n, count):
    """Instructions of one nginx run (start, count requests, stop) under
    callgrind."""
    out = os.path.join(ng.dir, "cg.out")
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
         NGINX, "-p", ng.dir, "-c", ng.conf, "-g", "daemon off;"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, timeout=120)
        keepalive_gets(port, n, count)
    finally:
        proc.send_signal(signal.SIGQUIT)
        proc.wait(timeout=120)
    with open(out) as f:
        total = re.search(r"^summary:\s*(\d+)", f.read(), re.M)
    os.rename(out, "%s.%d" % (out, count))
    return int(total.group(1))


def callgrind(args, module):
    """--callgrind: instructions a request of the plain and the module
    nginx's worker."""
    lo, hi = [int(x) for x in args.requests.split(",")]
    print(load_line("start"), flush=True)
    backs, (b1, b2) = start_backends("backend")
    try:
        for n in [int(x) for x in args.sizes.split(",")]:
            for kind in ("plain", "balancer"):
                port = free_port()
                if kind == "plain":
                    ng = Nginx("cg-plain%d" % n, one_worker(
                        plain_conf(n, port, [b1, b2], args.keepalive)))
                else:
                    ng = Nginx("cg-balancer%d" % n, one_worker(
                        module_conf(module, port, args.keepalive,
                                    args.form)))
                    with open(os.path.join(ng.dir, "bench.json"), "w") as f:
                        json.dump(routes_doc(n), f)
                    with open(os.path.join(ng.dir, "instances.json"),
                              "w") as f:
                        json.dump(instances_doc([b1, b2]), f)
                try:
                    a = callgrind_run(ng, port, n, lo)
                    b = callgrind_run(ng, port, n, hi)
                    print("routes %d %-8s instructions a request: %.0f "
                          "(%d requests %d, %d requests %d; files in %s)%s"
                          % (n, kind, (b - a) / (hi - lo), lo, a, hi, b,
                             ng.dir, "" if kind == "plain" else
                             " [form %s]" % args.form), flush=True)
                finally:
                    if not args.keep:
                        shutil.rmtree(ng.dir, ignore_errors=True)
    finally:
        for b in backs:
            b.stop()
    print(load_line("end"))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("module")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="10,10000")
    ap.add_argument("--keepalive", type=int, default=64)
    ap.add_argument("--kill-duration", type=int, default=9)
    ap.add_argument("--kill-rate", type=int, default=8,
                    help="wrk connections during the backend kill")
    ap.add_argument("--control", action="store_true",
                    help="a second, identical plain nginx (A/A: the noise)")
    ap.add_argument("--no-kill", action="store_true",
                    help="skip the backend kill runs")
    ap.add_argument("--form", choices=("bare", "uri"), default="bare",
                    help="the module's proxy_pass: http://routed; (bare) "
                         "or http://routed$switchyard_uri; (uri)")
    ap.add_argument("--callgrind", action="store_true",
                    help="instructions a request under callgrind, no clock")
    ap.add_argument("--requests", default="500,2500",
                    help="--callgrind: the two runs' request counts")
    ap.add_argument("--keep", action="store_true",
                    help="--callgrind: keep the callgrind files")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    module = os.path.abspath(args.module)
    if args.callgrind:
        return callgrind(args, module)
    results, kills = {}, {}

    print(load_line("start"), flush=True)
    backs, (b1, b2) = start_backends("backend")
    try:
        for n in [int(x) for x in args.sizes.split(",")]:
            (plain, pport), (mod, mport) = pair(module, n, [b1, b2],
                                               args.keepalive, args.form)
            ctl = None
            try:
                runs = {"plain": [], "balancer": []}
                targets = [("plain", pport, plain), ("balancer", mport, mod)]
                if args.control:
                    cport = free_port()
                    ctl = Nginx("control%d" % n,
                                plain_conf(n, cport, [b1, b2], args.keepalive))
                    ctl.start(cport)
                    runs["control"] = []
                    targets.insert(1, ("control", cport, ctl))
                for i in range(args.repeat):  # alternate on a shared box
                    # rotate who goes first: no configuration always
                    # follows the same one
                    for kind, port, ng in targets[i % len(targets):] + \
                            targets[:i % len(targets)]:
                        runs[kind].append(split_wrk(port, n, args, ng.dir))
                for kind, rs in runs.items():
                    if rs:
                        results[(kind, n)] = {
                            "rps": median([r["rps"] for r in rs]),
                            "p99_ms": median([r["p99_ms"] for r in rs]),
                            "errors": sum(client_errors(r) for r in rs),
                            "all": [r["rps"] for r in rs],
                            "splits": [r["split"] for r in rs],
                            "p99s": [r["p99_ms"] for r in rs]}
            finally:
                plain.stop()
                mod.stop()
                if ctl:
                    ctl.stop()
        # a backend killed under load, each configuration on fresh
        # backends (10 routes)
        for kind in () if args.no_kill else ("plain", "balancer"):
            kb, (k1, k2) = start_backends("kill")
            try:
                (plain, pport), (mod, mport) = pair(module, 10, [k1, k2],
                                                   args.keepalive, args.form)
                try:
                    target = (pport, plain) if kind == "plain" else (mport,
                                                                     mod)
                    kills[kind] = kill_run(target[0], 10, args, target[1].dir,
                                           {"proc": kb[1].proc})
                finally:
                    plain.stop()
                    mod.stop()
            finally:
                for b in kb:
                    b.stop()
    finally:
        for b in backs:
            b.stop()

    print(load_line("end"))
    print("nginx %s, wrk -t%d -c%d -d%ds, keepalive %d, requests spread "
          "over all routes; median of %d alternating runs; the module's "
          "proxy_pass %s"
          % (subprocess.run([NGINX, "-v"], capture_output=True,
                            text=True).stderr.strip().split("/")[-1],
             args.threads, args.connections, args.duration, args.keepalive,
             args.repeat, "http://routed;" if args.form == "bare" else
             "http://routed$switchyard_uri;"))
    # errors: client errors summed over the runs (non-2xx + socket errors)
    print("%-8s %9s %12s %10s %8s" % ("routes", "config", "req/s", "p99 ms",
                                      "errors"))
    for (kind, n), r in sorted(results.items(), key=lambda x: (x[0][1],
                                                               x[0][0])):
        print("%-8d %9s %12.0f %10.2f %8d   runs: %s; p99s: %s; "
              "connections per worker: %s" % (
                  n, kind, r["rps"], r["p99_ms"], r["errors"],
                  " ".join("%.0f" % x for x in r["all"]),
                  " ".join("%.2f" % x for x in r["p99s"]),
                  " ".join(r["splits"])))
    for n in sorted({n for _, n in results}):
        p = results.get(("plain", n))
        for kind in ("balancer", "control"):
            m = results.get((kind, n))
            if p and m:
                print("routes %d: %s/plain req/s = %.3f, p99 = %.3f"
                      % (n, kind, m["rps"] / p["rps"],
                         m["p99_ms"] / p["p99_ms"]))
                # round by round (the runs of a round are adjacent in
                # time: the box's load drifts less within a round)
                rr = [a / b for a, b in zip(m["all"], p["all"])]
                rp = [a / b for a, b in zip(m["p99s"], p["p99s"])]
                print("    paired by round: req/s %s, p99 %s"
                      % (spread(rr), spread(rp)))
    for kind, r in kills.items():
        print("backend killed under load (%s, wrk -c%d -d%ds): %d client "
              "errors (%d non-2xx, socket errors: %s)"
              % (kind, args.kill_rate, args.kill_duration, client_errors(r),
                 r["non2xx"], r["socket_errors"] or "0"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
