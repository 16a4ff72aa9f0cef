#!/usr/bin/env bash
# Benchmark: wrk against the test backend directly, the mini-gateway, and
# Debian's nginx as a plain reverse proxy (proxy_pass, keep-alive
# upstream), one worker each, at 1 route and at 10,000 routes (nginx with
# the equivalent location blocks), then the gateway during a reload storm
# (one admin publish every 10 ms) and beside the same admin client only
# reading GET /status every 10 ms (the control: what the driver and the
# admin thread cost without a publish). Prints requests/s, p50/p99 latency,
# errors, the proxy's own CPU time per request (its run time, all
# processes and threads), its context switches per request (voluntary + involuntary,
# all threads: how often it went to sleep or was preempted) and the whole
# machine's context switches per request (/proc/stat), and the gateway/nginx
# ratios. A benchmark, not a test: it prints figures and asserts nothing.
# WORKERS=N runs the gateway with --workers N and nginx with
# worker_processes N (default 1; the machine's cores are shared with wrk
# and the backend).
# nginx runs twice at 1 route and at ROUTES routes: as a plain reverse
# proxy, and also sending the headers the gateway sends upstream (Host: the
# upstream's authority, X-Forwarded-For/Proto/Host/Port and Forwarded, which
# the gateway sends with --trusted-proxies (given here), a traceparent of the
# same length), so the backend does the same work behind both and the same
# bytes come back (it echoes every header it receives: without them nginx's
# answers are ~180 bytes shorter). The CPU ratio docs/performance.md gives
# is read against that nginx ("same headers"); the plain one is kept for comparison.
# Then the gateway at 1 route with a policy on it: a local rate limit
# (RequestRateLimiter that never denies), a circuit breaker (closed), and
# the same rate limit shared through a redis-server (--redis; one Redis
# round trip per request at most, pipelined on each worker's connection,
# the calls of a loop iteration on one bucket in one script call), with
# the redis-server's own CPU time and script calls per request; with
# REDIS_UNIX=1 the gateway reaches it through its Unix socket (--redis
# unix:PATH; default 0: loopback TCP, the rows of earlier runs). The local
# limit and the breaker run beside a control (the 1-route gateway again),
# the three rotated from round to round, and their ratios are to the
# control, not to the 1-route row (second in the round): the storm's
# control, the same gateway and route with an admin read every 10 ms, once
# read 1.12x that row's CPU a request, more than a policy's work costs.
# Then the gateway pipelining its requests to the backend
# (--upstream-pipeline PIPELINE, default 8; 0: no such rows), at 1 route, at
# ROUTES routes, with the local limit and with the breaker, with their
# ratios to the nginx of the same headers (the gateway's default, 1, is the
# rows above).
# Each case runs ROUNDS times, interleaved, and the median round is shown
# (a shared machine is noisy: compare figures of one run only).
# Pinning (PIN=1, the default): the proxy under test (the gateway or nginx,
# all its threads and processes) runs on its own CPU(s), the last WORKERS
# of the CPUs this script may use, and everything else (wrk, the backend,
# redis-server, the admin client, this script) on the others, the same for
# both proxies (taskset); PIN=0, a single CPU, fewer CPUs than WORKERS + 1
# or no taskset: no pinning, and the conditions line says so. Unpinned, the
# scheduler placed each new proxy process beside wrk or the backend or not,
# and the CPU a request cost moved with where it landed. PIN=shared puts
# everything on one CPU (the proxy then shares it with the load: read its
# CPU per request, not its requests/s).
# The proxy's CPU time is its scheduler run time (/proc/PID/task/*/schedstat,
# ns, all threads of it and its children; where schedstat is missing,
# utime + stime, which the kernel scales to the same run time but reports
# in 1/CLK_TCK = 10 ms steps per thread), measured over the DURATION s
# run only: a WARMUP s run of wrk (default 1) against the same process
# comes first, so connection set-up, first-touch page faults and cold
# caches count for neither proxy. With pinning, the ksoftirqd of the
# proxy's CPU is printed beside it (sirq): loopback delivers a packet on
# the sender's CPU, in the sender's context, or in that ksoftirqd when the
# kernel defers it, so that column is receive work of the proxy's own
# sends that its own figure does not hold.
# CASES=one,many,storm,policy,pipeline,pairs (default all): which groups
# run (one: the gateway and both nginx at 1 route; many: the same at
# ROUTES; storm: the storm and its control; policy: the policy rows and
# their control, and once after the rounds each policy's gateway
# alternated with one without a policy, PAIRS pairs of PHASE s phases
# (its req/s and CPU per request: the ratio of the phases' medians, the
# pairs' min-max); pipeline: the pipelined rows; pairs, once after the
# rounds: the gateway and nginx with the same headers running side by
# side, loaded in turn for PHASE s (default 2), PAIRS times each (default
# 10), at 1 route and at ROUTES, and the median of the pairs' CPU ratios);
# the backend-direct row always.
#   DURATION=10 CONNECTIONS=50 ROUNDS=3 bash examples/mini-gateway/bench/run.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-50}
ROUTES=${ROUTES:-10000}
ROUNDS=${ROUNDS:-3}
WORKERS=${WORKERS:-1}
PIPELINE=${PIPELINE:-8}
WARMUP=${WARMUP:-1}
PIN=${PIN:-1}
CASES=${CASES:-one,many,storm,policy,pipeline,pairs}
PAIRS=${PAIRS:-10}
PHASE=${PHASE:-2}
REDIS_UNIX=${REDIS_UNIX:-0}
has_case() { case ",$CASES," in *",$1,"*) return 0 ;; esac; return 1; }
# a setting this script would not act on is refused, not ignored
case "$PIN" in 0|1|shared) ;; *) echo "run.sh: PIN=$PIN: 0, 1 or shared" >&2; exit 2 ;; esac
case "$REDIS_UNIX" in 0|1) ;; *) echo "run.sh: REDIS_UNIX=$REDIS_UNIX: 0 or 1" >&2; exit 2 ;; esac
IFS=, read -r -a case_list <<< "$CASES"
for c in "${case_list[@]}"; do
  case "$c" in one|many|storm|policy|pipeline|pairs) ;;
    *) echo "run.sh: CASES: '$c' is none of one,many,storm,policy,pipeline,pairs" >&2; exit 2 ;;
  esac
done
bash tests/install-deps.sh
# release (-O3: the gateway links the library statically, see
# examples/mini-gateway/meson.build) with link-time optimization; an older
# build-bench made without LTO is switched to it here
[ -d build-bench ] || meson setup build-bench --buildtype=release \
  -Db_lto=true -Dtests=false -Dbench=false >/dev/null
meson configure build-bench -Db_lto=true >/dev/null
ninja -C build-bench >/dev/null
GW=$PWD/build-bench/examples/mini-gateway/mini-gateway
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

# pinning: the proxy on the last WORKERS CPUs this script may use, the rest
# (this script and so everything it starts but the proxies) on the others
cpus=$(python3 -c 'import os; print(" ".join(map(str, sorted(os.sched_getaffinity(0)))))')
read -r -a cpu_list <<< "$cpus"
proxy_cpus="" load_cpus="" pin_note=""
if [ "$PIN" = 0 ]; then
  pin_note="not pinned (PIN=0)"
elif [ "$PIN" = shared ] && command -v taskset >/dev/null; then
  # everything on one CPU: each loopback send wakes its peer on the same
  # CPU (the cheapest placement, which unpinned runs get at random)
  proxy_cpus=${cpu_list[-1]} load_cpus=${cpu_list[-1]}
  taskset -pc "$load_cpus" $$ >/dev/null
  pin_note="pinned: proxy, wrk, backend and redis all on CPU $proxy_cpus (PIN=shared)"
elif ! command -v taskset >/dev/null; then
  pin_note="not pinned (no taskset: util-linux)"
elif [ "${#cpu_list[@]}" -lt $((WORKERS + 1)) ]; then
  pin_note="not pinned (${#cpu_list[@]} CPU(s) for $WORKERS proxy worker(s) and the load)"
else
  n=${#cpu_list[@]}
  proxy_cpus=$(IFS=,; echo "${cpu_list[*]:$((n - WORKERS))}")
  load_cpus=$(IFS=,; echo "${cpu_list[*]:0:$((n - WORKERS))}")
  taskset -pc "$load_cpus" $$ >/dev/null
  pin_note="pinned: proxy on CPU $proxy_cpus, wrk/backend/redis on CPU $load_cpus"
fi
[ -n "$proxy_cpus" ] || echo "note: $pin_note; the proxies' CPU per request moves more between runs" >&2
on_proxy_cpus() { # command...: runs it on the proxy's CPUs (exec: same pid)
  if [ -n "$proxy_cpus" ]; then exec taskset -c "$proxy_cpus" "$@"; else exec "$@"; fi
}
work=$(mktemp -d /tmp/gw-bench-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
  for _ in $(seq 200); do
    (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "port $1 never opened" >&2; exit 1
}

BP=$(port); GP=$(port); AP=$(port); NP=$(port)
"$GW" --backend --id bench --version 1 --listen 127.0.0.1:$BP 2>/dev/null &
pids+=($!)
wait_port $BP

# route documents: 1 route, and ROUTES routes (the request hits the last)
python3 - "$work" "$BP" "$ROUTES" <<'PY'
import json, sys
work, bp, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
up = "http://127.0.0.1:%d" % bp
json.dump({"version": "1", "routes": [
    {"id": "all", "uri": up, "predicates": ["Path=/**"]}]},
    open(work + "/one.json", "w"))
json.dump({"version": "1", "routes": [
    {"id": "r%d" % i, "uri": up, "predicates": ["Path=/r%d/**" % i]}
    for i in range(n)]}, open(work + "/many.json", "w"))
def nginx(locs):
    return """worker_processes WORKERS;
pid %(w)s/nginx.pid;
error_log %(w)s/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  # nginx closes a keep-alive connection after 1,000 requests by default,
  # client side and upstream side (1.19.10+); the gateway never does, so
  # nginx would pay a reconnect both ways every 1,000 requests
  keepalive_requests 1000000;
  client_body_temp_path %(w)s/tmp-body;
  proxy_temp_path %(w)s/tmp-proxy;
  fastcgi_temp_path %(w)s/tmp-fcgi;
  uwsgi_temp_path %(w)s/tmp-uwsgi;
  scgi_temp_path %(w)s/tmp-scgi;
  upstream backend {
    server 127.0.0.1:%(bp)d;
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:NGINX_PORT;
%(locs)s
  }
}
""" % {"w": work, "bp": bp, "locs": locs}
loc = """    location %s {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";%s
    }
"""
# the headers the gateway sends upstream (Host: the upstream's authority,
# X-Forwarded-For/Proto/Host/Port and Forwarded with --trusted-proxies,
# traceparent): the backend echoes every header
# it gets, so with them it parses and answers more (a 300-byte body instead
# of 117). The gateway makes a new span id a request; nginx sends a fixed
# traceparent of the same length (its one random variable, $request_id,
# would cost it more than the gateway's ids cost the gateway)
xff = """
      proxy_set_header Host 127.0.0.1:%d;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Host $http_host;
      proxy_set_header X-Forwarded-Port $server_port;
      proxy_set_header Forwarded
        "proto=$scheme;host=\\"$http_host\\";for=\\"$remote_addr:$remote_port\\"";
      proxy_set_header traceparent
        00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01;""" % bp
# the policies, each on the one route (limits that never deny)
lim = {"name": "RequestRateLimiter", "args": {
    "redis-rate-limiter.replenishRate": "2000000000",
    "redis-rate-limiter.burstCapacity": "2000000000",
    "key-resolver": "#{@remoteAddrKeyResolver}"}}
brk = {"name": "CircuitBreaker", "args": {"name": "bench"}}
for name, f in (("limit", lim), ("breaker", brk)):
    json.dump({"version": "1", "routes": [
        {"id": "all", "uri": up, "predicates": ["Path=/**"],
         "filters": [f]}]}, open(work + "/%s.json" % name, "w"))
open(work + "/nginx-one.conf", "w").write(nginx(loc % ("/", "")))
open(work + "/nginx-one-xff.conf", "w").write(nginx(loc % ("/", xff)))
open(work + "/nginx-many.conf", "w").write(
    nginx("".join(loc % ("/r%d/" % i, "") for i in range(n))))
open(work + "/nginx-many-xff.conf", "w").write(
    nginx("".join(loc % ("/r%d/" % i, xff) for i in range(n))))
PY
sed -i "s/NGINX_PORT/$NP/; s/WORKERS/$WORKERS/" "$work"/nginx-*.conf

results="$work/results.txt"
: > "$results"
# the proxy's CPU time: scheduler run time (ns) where the kernel has
# schedstat, else utime + stime (the same run time, the kernel scales its
# tick samples to it, but in steps of 1/CLK_TCK s, 10 ms, per thread)
if [ -r /proc/self/schedstat ]; then cpu_src="schedstat run time"; else
  cpu_src="utime+stime (10 ms steps)"; fi
hz=$(getconf CLK_TCK)
cpu_ns() { # pid... -> "ns switches": CPU time and context switches
  # (voluntary + involuntary) of all threads of each pid and its children
  # (nginx's workers)
  local t=0 cs=0 p task v
  for p in "$@" $(for q in "$@"; do pgrep -P "$q" || true; done); do
    for task in /proc/"$p"/task/*; do # (a task may end while read: 0)
      if [ -r "$task/schedstat" ]; then
        v=$(cut -d' ' -f1 "$task/schedstat" 2>/dev/null || true)
      else
        v=$(sed 's/.*) //' "$task/stat" 2>/dev/null |
          awk -v hz="$hz" '{printf "%d", ($12 + $13) * 1e9 / hz}' || true)
      fi
      t=$((t + ${v:-0}))
      v=$(awk '/ctxt_switches/ {n += $2} END {print n + 0}' \
        "$task/status" 2>/dev/null || true)
      cs=$((cs + ${v:-0}))
    done
  done
  echo "$t $cs"
}
# the ksoftirqd threads of the proxy's CPUs (with pinning only)
sirq_pids=""
for c in ${proxy_cpus//,/ }; do
  sirq_pids="$sirq_pids $(pgrep -x "ksoftirqd/$c" || true)"
done
sirq_ns() { [ -n "${sirq_pids// /}" ] && cpu_ns $sirq_pids | cut -d' ' -f1 || echo 0; }
sys_ctxt() { awk '/^ctxt/ {print $2}' /proc/stat; }
run_wrk() { # name url [pid of the proxy, for its CPU time]
  local out c0="0 0" c1="0 0" s0 s1 q0 q1
  # the warm-up: same connections, same process, not measured
  [ "$WARMUP" = 0 ] || wrk -t1 -c"$CONNECTIONS" -d"${WARMUP}s" "$2" >/dev/null
  [ -n "${3:-}" ] && c0=$(cpu_ns "$3")
  q0=$(sirq_ns)
  s0=$(sys_ctxt)
  out=$(wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency "$2")
  s1=$(sys_ctxt)
  q1=$(sirq_ns)
  [ -n "${3:-}" ] && c1=$(cpu_ns "$3")
  python3 - "$1" "$results" "$c0" "$c1" "$((s1 - s0))" "$((q1 - q0))" <<PY
import re, sys
out = """$out"""
name, res = sys.argv[1], sys.argv[2]
(t0, x0), (t1, x1) = (map(int, a.split()) for a in sys.argv[3:5])
ns, pcs, scs, sirq = t1 - t0, x1 - x0, int(sys.argv[5]), int(sys.argv[6])
def ms(s):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", s)
    if not m:
        return float("nan")
    return float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000,
                                "m": 60000}[m.group(2)]
m = re.search(r"Requests/sec:\s+([\d.]+)", out)
if not m:
    print("%-28s wrk failed: %s" % (name, out.strip()[-200:]))
    sys.exit(0)
rps = float(m.group(1))
m50 = re.search(r"^\s+50%\s+(\S+)", out, re.M)
m99 = re.search(r"^\s+99%\s+(\S+)", out, re.M)
p50 = ms(m50.group(1)) if m50 else float("nan")
p99 = ms(m99.group(1)) if m99 else float("nan")
errs = 0
m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
if m: errs += int(m.group(1))
m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
if m: errs += sum(int(x) for x in m.groups())
total = int(re.search(r"(\d+) requests in", out).group(1))
cpu = ns / 1e3 / total if ns and total else float("nan")
pcs = pcs / total if ns and total else float("nan")
scs = scs / total if total else float("nan")
sirq = sirq / 1e3 / total if total else float("nan")
line = "%-28s %10.0f %9.3f %9.3f %8d %9d %8.2f %7.3f %7.3f %6.2f" % (
    name, rps, p50, p99, errs, total, cpu, pcs, scs, sirq)
print(line, flush=True)
open(res, "a").write("%s|%f|%f|%f|%d|%f|%f|%f|%f\n" % (
    name, rps, p50, p99, errs, cpu, pcs, scs, sirq))
PY
}

echo "wrk -t1 -c$CONNECTIONS -d${DURATION}s after ${WARMUP}s warm-up, median of $ROUNDS rounds; ${#cpu_list[@]} cores; $WORKERS proxy worker(s); $pin_note; CPU: $cpu_src$([ "$REDIS_UNIX" = 1 ] && echo "; Redis on its Unix socket"); load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-28s %10s %9s %9s %8s %9s %8s %7s %7s %6s\n" case "req/s" "p50 ms" "p99 ms" errors requests "us/req" "cs/req" "sys-cs" "sirq"
# us/req: the proxy's CPU time (all its threads) per request; cs/req: its
# context switches per request; sys-cs: the machine's context switches per
# request (every process; others' work counts too); none for the proxy in
# the backend-direct case; sirq: the ksoftirqd of the proxy's CPU, us per
# request (pinned only; 0 when the kernel deferred none of its work)

start_gw() { # routes file [more flags]
  # --trusted-proxies: wrk's address trusted, so the gateway sends the
  # forwarding headers (SCG sends none without trusted-proxies) that nginx's
  # "same headers" config sends too
  on_proxy_cpus "$GW" --listen 127.0.0.1:$GP --admin 127.0.0.1:$AP --workers "$WORKERS" --quiet \
    --trusted-proxies '127\.0\.0\.1' --routes "$@" 2>"$work/gw.log" &
  gwpid=$!; pids+=($gwpid)
  wait_port $GP; wait_port $AP
}
stop_pid() { kill "$1"; wait "$1" 2>/dev/null || true; }
start_nginx() { # conf
  mkdir -p "$work"/tmp-{body,proxy,fcgi,uwsgi,scgi}
  on_proxy_cpus "$NGINX" -p "$work" -c "$1" -g 'daemon off;' 2>>"$work/nginx-error.log" &
  ngpid=$!; pids+=($ngpid)
  wait_port $NP
}
url_end="r$((ROUTES-1))/x"
run_proxy() { # "gw|routes file|name" or "ng|nginx conf|name": start, load, stop
  local kind=${1%%|*} rest=${1#*|}
  if [ "$kind" = gw ]; then
    start_gw "$work/${rest%%|*}"
    run_wrk "${rest#*|}" "http://127.0.0.1:$GP/$url_end" $gwpid
    stop_pid $gwpid
  else
    start_nginx "$work/${rest%%|*}"
    run_wrk "${rest#*|}" "http://127.0.0.1:$NP/$url_end" $ngpid
    stop_pid $ngpid
  fi
}
cp "$work/one.json" "$work/single.json"
cp "$work/many.json" "$work/bench-routes.json"
admin_client() { # storm|control: one admin request every 10 ms, in the background
  python3 - "$AP" "$BP" "$((DURATION + WARMUP))" "$1" > "$work/storm.txt" <<'PY' &
import http.client, json, sys, time
ap, bp, dur, mode = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
c = http.client.HTTPConnection("127.0.0.1", ap, timeout=5)
n = bad = 0
end = time.time() + dur + 0.5
while time.time() < end:
    t = time.time()
    if mode == "storm":
        body = json.dumps({"id": "storm", "uri": "http://127.0.0.1:%d" % bp,
                           "predicates": ["Path=/storm/%d/**" % n],
                           "filters": ["AddRequestHeader=X-Storm,%d" % n]})
        c.request("PUT", "/routes/storm/storm", body=body)
    else:
        c.request("GET", "/status")
    r = c.getresponse(); r.read()
    n += 1; bad += r.status != 200
    time.sleep(max(0, 0.01 - (time.time() - t)))
print(n, bad)
PY
  stormpid=$!
}
RP=$(port)
redis-server --port "$RP" --bind 127.0.0.1 --save "" --appendonly no \
  --unixsocket "$work/redis.sock" --unixsocketperm 700 \
  >"$work/redis.log" 2>&1 &
redispid=$!; pids+=($redispid)
wait_port $RP
redis_addr=127.0.0.1:$RP
if [ "$REDIS_UNIX" = 1 ]; then redis_addr=unix:$work/redis.sock; fi
redis_snap() { # "cpu-ns script-calls script-usec" of the redis-server
  echo "$(cpu_ns "$redispid" | cut -d' ' -f1)" \
    "$(redis-cli -p "$RP" INFO commandstats | tr -d '\r' | python3 -c '
import re, sys
c = u = 0
for l in sys.stdin:
    m = re.match(r"cmdstat_(eval|evalsha):calls=(\d+),usec=(\d+)", l)
    if m: c += int(m.group(2)); u += int(m.group(3))
print(c, u)')"
}
redis_row() { # before after: Redis's share of the last Redis-limit run, per
  # limited request (the gateway's redis_calls_total counts them)
  python3 - "$1" "$2" "$AP" "$work/redis-rows.txt" <<'PY'
import re, sys, urllib.request
(t0, c0, u0), (t1, c1, u1) = (map(int, a.split()) for a in sys.argv[1:3])
body = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[3]).read().decode()
m = re.search(r"^gateway_rate_limit_redis_calls_total (\d+)", body, re.M)
n = int(m.group(1)) if m else 0
if not n:
    sys.exit(0)
cpu, calls = (t1 - t0) / 1e3 / n, (c1 - c0) / n
each = (u1 - u0) / (c1 - c0) if c1 > c0 else 0
print("  redis-server: %.1f us CPU/request, %.3f script calls/request, "
      "%.1f us each (%d limited requests)" % (cpu, calls, each, n), flush=True)
open(sys.argv[4], "a").write("%f %f %f\n" % (cpu, calls, each))
PY
}
# a CASES group of three proxies (kind|conf|label), run in this order in
# odd rounds and in the reverse order in even ones
proxy_group() {
  has_case "$1" || return 0
  shift
  local g=("$@") pc
  [ $((round % 2)) = 1 ] || g=("${g[2]}" "${g[1]}" "${g[0]}")
  for pc in "${g[@]}"; do run_proxy "$pc"; done
}

storm_total=0; storm_bad_total=0
for round in $(seq "$ROUNDS"); do
  run_wrk "backend direct" "http://127.0.0.1:$BP/$url_end"
  # the gateway and the two nginx, at 1 route and at ROUTES: the order
  # reversed every other round, so neither proxy always runs first
  proxy_group one "gw|single.json|mini-gateway, 1 route" \
    "ng|nginx-one.conf|nginx, 1 location" \
    "ng|nginx-one-xff.conf|nginx same headers, 1 loc."
  proxy_group many "gw|bench-routes.json|mini-gateway, $ROUTES routes" \
    "ng|nginx-many.conf|nginx, $ROUTES locations" \
    "ng|nginx-many-xff.conf|nginx same headers, $ROUTES loc."

  # the reload storm: one publish every 10 ms through the admin API (a
  # route other than the one under load changes, as in a real fleet), and
  # its control: the same client reading GET /status every 10 ms, so the
  # storm's cost reads apart from the driver's and the admin thread's
  if has_case storm; then
  start_gw "$work/single.json"
  admin_client control
  run_wrk "mini-gateway, storm control" "http://127.0.0.1:$GP/$url_end" $gwpid
  wait $stormpid || true
  admin_client storm
  run_wrk "mini-gateway, reload storm" "http://127.0.0.1:$GP/$url_end" $gwpid
  wait $stormpid || true
  read -r publishes storm_bad < "$work/storm.txt"
  storm_total=$((storm_total + publishes)); storm_bad_total=$((storm_bad_total + storm_bad))
  stop_pid $gwpid
  fi

  # policies on the one route, and the same route without one (the
  # control), the three in an order rotated each round; each policy is
  # read against the control, not against the 1-route row above: where a
  # case runs in the round moves its CPU per request by more than a
  # policy's work does (the control / 1 route row prints how much)
  if has_case policy; then
  pol=("single.json|no policy" "limit.json|local limit"
       "breaker.json|breaker")
  for i in 0 1 2; do
    pc=${pol[$(( (i + round - 1) % 3 ))]}
    start_gw "$work/${pc%%|*}"
    run_wrk "mini-gateway, ${pc#*|}" "http://127.0.0.1:$GP/$url_end" $gwpid
    stop_pid $gwpid
  done
  start_gw "$work/limit.json" --redis "$redis_addr"
  rs0=$(redis_snap)
  run_wrk "mini-gateway, Redis limit" "http://127.0.0.1:$GP/$url_end" $gwpid
  redis_row "$rs0" "$(redis_snap)"
  stop_pid $gwpid
  fi

  # pipelined to the backend (after the rows above: their order is read)
  if [ "$PIPELINE" -gt 1 ] && has_case pipeline; then
    for pc in "single.json|1 route" "bench-routes.json|$ROUTES routes" \
              "limit.json|local limit" "breaker.json|breaker"; do
      start_gw "$work/${pc%%|*}" --upstream-pipeline "$PIPELINE"
      run_wrk "mini-gateway p$PIPELINE, ${pc#*|}" "http://127.0.0.1:$GP/$url_end" $gwpid
      stop_pid $gwpid
    done
  fi
done

# the gateway and nginx (same headers) alternated: both running at once on
# the same CPU, wrk loading one for PHASE s, then the other, PAIRS times
# each (the order reversed every other pair: g n n g g n ...), each phase's
# CPU per request its process's run time over the requests it served; a
# pair's ratio is read from two phases seconds apart, so the load others
# put on the machine, which drifts over minutes, moves both alike
pair_ratio() { # label routes-file nginx-conf
  local k first second kind pid url c0 c1 n out
  start_gw "$work/$2"; start_nginx "$work/$3"
  for kind in gw ng; do
    [ "$WARMUP" = 0 ] || wrk -t1 -c"$CONNECTIONS" -d"${WARMUP}s" \
      "http://127.0.0.1:$([ $kind = gw ] && echo $GP || echo $NP)/$url_end" >/dev/null || true
  done
  : > "$work/pairs.txt"
  for k in $(seq "$PAIRS"); do
    if [ $((k % 2)) = 1 ]; then set -- "$1" "$2" "$3" gw ng; else set -- "$1" "$2" "$3" ng gw; fi
    for kind in "$4" "$5"; do
      if [ $kind = gw ]; then pid=$gwpid url="http://127.0.0.1:$GP/$url_end"
      else pid=$ngpid url="http://127.0.0.1:$NP/$url_end"; fi
      c0=$(cpu_ns "$pid")
      out=$(wrk -t1 -c"$CONNECTIONS" -d"${PHASE}s" "$url" 2>&1) ||
        echo "pair $k, $kind: wrk failed: ${out: -200}" >&2
      kill -0 "$pid" 2>/dev/null || { echo "pair $k: the $kind proxy ended" >&2; break 2; }
      c1=$(cpu_ns "$pid")
      n=$(echo "$out" | awk '/requests in/ {print $1}')
      echo "$k $kind ${n:-0} $(( ${c1% *} - ${c0% *} ))" >> "$work/pairs.txt"
    done
  done
  stop_pid $gwpid; stop_pid $ngpid
  python3 - "$1" "$work/pairs.txt" <<'PY'
import sys
ph = {}
for l in open(sys.argv[2]):
    k, kind, n, ns = l.split()
    if int(n):
        ph[(int(k), kind)] = int(ns) / 1e3 / int(n)
ks = sorted({k for k, _ in ph if (k, "gw") in ph and (k, "ng") in ph})
r = [ph[(k, "gw")] / ph[(k, "ng")] for k in ks]
if not r:
    print("%-44s no figures" % sys.argv[1]); sys.exit(0)
med = lambda xs: sorted(xs)[len(xs) // 2]
print("%-44s cpu/req %.2f (median of %d pairs; %.2f-%.2f); "
      "gateway %.2f, nginx %.2f us/req (medians)" % (
          sys.argv[1], med(r), len(r), min(r), max(r),
          med([ph[(k, "gw")] for k in ks]), med([ph[(k, "ng")] for k in ks])))
PY
}
if has_case pairs; then
  echo "alternating: ${PAIRS} pairs of ${PHASE}s phases, each proxy's CPU per request"
  pair_ratio "alternating gateway / nginx same headers, 1:" \
    single.json nginx-one-xff.conf
  pair_ratio "alternating gateway / nginx same headers, many:" \
    bench-routes.json nginx-many-xff.conf
fi
# the policy rows again, alternated: a gateway without a policy and one
# with each policy (the local limit, the breaker, the Redis-shared limit)
# running side by side on the proxy's CPU, wrk loading the no-policy one
# and a policy one in turn for PHASE s each, PAIRS pairs a policy (the
# order reversed every other pair: n l n b n r, then l n b n r n, ...).
# The rows above read each policy from one gateway started for it in its
# slot of the round, three rounds: one round's ratio moved 0.94-1.20 for
# the Redis limit's CPU. Here each pair's two phases run seconds apart on
# processes started once; printed: the ratio of the phases' medians and
# the pairs' own ratios, min-max
policy_pairs() {
  local GP AP k i kind name pid url c0 c1 r0 r1 out n
  local names=(none limit breaker redis) conf=(single.json limit.json
    breaker.json limit.json) pport=() ppid=()
  for i in 0 1 2 3; do
    GP=$(port) AP=$(port)
    if [ $i = 3 ]; then start_gw "$work/${conf[$i]}" --redis "$redis_addr"
    else start_gw "$work/${conf[$i]}"; fi
    pport[$i]=$GP ppid[$i]=$gwpid
    [ "$WARMUP" = 0 ] || wrk -t1 -c"$CONNECTIONS" -d"${WARMUP}s" \
      "http://127.0.0.1:$GP/$url_end" >/dev/null || true
  done
  : > "$work/policy-pairs.txt"
  for k in $(seq "$PAIRS"); do
    for i in 1 2 3; do
      for kind in $([ $((k % 2)) = 1 ] && echo "0 $i" || echo "$i 0"); do
        pid=${ppid[$kind]} url="http://127.0.0.1:${pport[$kind]}/$url_end"
        c0=$(cpu_ns "$pid"); r0=$(cpu_ns "$redispid")
        out=$(wrk -t1 -c"$CONNECTIONS" -d"${PHASE}s" "$url" 2>&1) ||
          echo "policy pair $k, ${names[$kind]}: wrk failed: ${out: -200}" >&2
        c1=$(cpu_ns "$pid"); r1=$(cpu_ns "$redispid")
        n=$(echo "$out" | awk '/requests in/ {print $1}')
        echo "$k ${names[$i]} ${names[$kind]} ${n:-0} $(echo "$out" |
          awk '/Requests\/sec/ {print $2}') $(( ${c1% *} - ${c0% *} ))" \
          "$(( ${r1% *} - ${r0% *} ))" >> "$work/policy-pairs.txt"
      done
    done
  done
  for i in 0 1 2 3; do stop_pid "${ppid[$i]}"; done
  python3 - "$work/policy-pairs.txt" <<'PY'
import sys
ph = {}  # (pair, policy) -> {"none"|policy: (req/s, us/req, redis us/req)}
for l in open(sys.argv[1]):
    k, pol, kind, n, rps, ns, rns = l.split()
    if int(n) and rps:
        ph.setdefault((int(k), pol), {})[kind] = (
            float(rps), int(ns) / 1e3 / int(n), int(rns) / 1e3 / int(n))
med = lambda xs: sorted(xs)[len(xs) // 2]
for pol, label, tgt in (("limit", "local limit", 0.97),
                        ("breaker", "breaker", 0.97),
                        ("redis", "Redis limit", 0.85)):
    ps = [v for (k, p), v in sorted(ph.items())
          if p == pol and "none" in v and pol in v]
    head = "alternating %s / no policy (target >= %.2f):" % (label, tgt)
    if not ps:
        print("%-44s no figures" % head)
        continue
    rate = [v[pol][0] / v["none"][0] for v in ps]
    cpu = [v[pol][1] / v["none"][1] for v in ps if v["none"][1]]
    line = ("%-44s req/s %.2f (medians %.0f / %.0f, %d pairs; pairs "
            "%.2f-%.2f)  cpu/req %.2f (pairs %.2f-%.2f)" % (
                head, med([v[pol][0] for v in ps]) /
                med([v["none"][0] for v in ps]),
                med([v[pol][0] for v in ps]), med([v["none"][0] for v in ps]),
                len(ps), min(rate), max(rate),
                med([v[pol][1] for v in ps]) / med([v["none"][1] for v in ps]),
                min(cpu or [0]), max(cpu or [0])))
    if pol == "redis":
        line += "  redis-server %.1f us/req" % med([v[pol][2] for v in ps])
    print(line)
PY
}
if has_case policy; then
  echo "alternating: ${PAIRS} pairs of ${PHASE}s phases a policy, its gateway and one without a policy"
  policy_pairs
fi
has_case storm && echo "reload storm: $storm_total publishes in $ROUNDS x ~${DURATION}s ($storm_bad_total rejected)"

python3 - "$results" "$ROUTES" <<'PY'
import sys
runs = {}
for line in open(sys.argv[1]):
    name, rps, p50, p99, errs, cpu, pcs, scs, sirq = line.strip().split("|")
    runs.setdefault(name, []).append((float(rps), float(p50), float(p99),
                                      int(errs), float(cpu), float(pcs),
                                      float(scs), float(sirq)))
R = sys.argv[2]
rows = {}
print("\nmedian round (by req/s) of each case; us/req, cs/req, sys-cs, sirq: median")
print("%-28s %10s %9s %9s %8s %8s %7s %7s %6s" % ("case", "req/s", "p50 ms",
      "p99 ms", "errors", "us/req", "cs/req", "sys-cs", "sirq"))
def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]
for name, rs in runs.items():
    m = sorted(rs)[len(rs) // 2]
    rows[name] = m[:3] + (sum(r[3] for r in rs), median(r[4] for r in rs),
                          median(r[5] for r in rs), median(r[6] for r in rs),
                          median(r[7] for r in rs))
    print("%-28s %10.0f %9.3f %9.3f %8d %8.2f %7.3f %7.3f %6.2f" % (
        (name,) + rows[name]))
def ratio(a, b, label):
    if a in rows and b in rows:
        ra, rb = rows[a], rows[b]
        # the same ratio round by round (the two cases of a round ran
        # close together): how far one round's figure is from the median
        per = ["%.2f" % (x[4] / y[4]) for x, y in zip(runs[a], runs[b])
               if y[4] == y[4] and y[4]]
        print("%-44s req/s %.2f  p99 %.2f  cpu/req %.2f  (rounds: %s)" % (
            label, ra[0] / rb[0], ra[2] / rb[2] if rb[2] else 0,
            ra[4] / rb[4] if rb[4] else 0, " ".join(per)))
print()
gw1, ng1, ngx = ("mini-gateway, 1 route", "nginx, 1 location",
                 "nginx same headers, 1 loc.")
gwn, ngn, ngnx = ("mini-gateway, %s routes" % R, "nginx, %s locations" % R,
                  "nginx same headers, %s loc." % R)
ctl, storm = "mini-gateway, storm control", "mini-gateway, reload storm"
names = list(rows)
# the policy rows by name (their order rotates from round to round)
pol = {n.split(", ", 1)[1]: n for n in names if n.startswith("mini-gateway, ")}
nopol = pol.get("no policy")
lim, brk, rlim = (pol.get(k, k) for k in ("local limit", "breaker",
                                          "Redis limit"))
ratio(gw1, ngx, "gateway / nginx same headers, 1 route:")
ratio(gwn, ngnx, "gateway / nginx same headers, many routes:")
ratio(gw1, ng1, "gateway / plain nginx, 1 route:")
ratio(gwn, ngn, "gateway / plain nginx, many routes:")
ratio(storm, ctl, "gateway storm / its control:")
ratio(storm, gw1, "gateway storm / gateway quiet:")
# the policies against the control run beside them; the control against
# the 1-route row (the same gateway and route: what the slot alone moves)
ratio(nopol, gw1, "no policy / 1 route (the same gateway):")
ratio(lim, nopol, "local limit / no policy (target >= 0.97):")
ratio(brk, nopol, "breaker / no policy (target >= 0.97):")
ratio(rlim, nopol, "Redis limit / no policy (target >= 0.85):")
pp = [n for n in names if n.startswith("mini-gateway p")]
if len(pp) == 4:  # --upstream-pipeline N: 1 route, many, limit, breaker
    d = pp[0].split(",")[0][len("mini-gateway p"):]
    p1, pn, plim, pbrk = pp
    ratio(p1, ngx, "gateway / nginx same headers, 1 route, p%s:" % d)
    ratio(pn, ngnx, "gateway / nginx same headers, many, p%s:" % d)
    ratio(plim, ngx, "local limit / nginx same headers, 1, p%s:" % d)
    ratio(pbrk, ngx, "breaker / nginx same headers, 1, p%s:" % d)
    ratio(p1, gw1, "gateway p%s / gateway, 1 route:" % d)
    ratio(pn, gwn, "gateway p%s / gateway, many routes:" % d)
PY
if [ -s "$work/redis-rows.txt" ]; then # medians of the Redis-limit rounds
  python3 - "$work/redis-rows.txt" <<'PY'
import sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
med = [sorted(c)[len(c) // 2] for c in zip(*rows)]
print("Redis limit, redis-server (median): %.1f us CPU/request, %.3f script "
      "calls/request, %.1f us each" % tuple(med))
PY
fi
