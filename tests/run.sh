#!/usr/bin/env bash
# The test command: installs what it needs, then builds and runs every
# suite three ways (-Werror build with the Python bindings and the nginx
# module; ASan+UBSan, the end-to-end suites of the mini-gateway and the
# etcd source included; TSan on the concurrency suites), runs the fuzzers
# for a bounded time, and prints "N passed, N failed" summed over
# everything as its last line. The end-to-end suites start and stop their
# own nginx, etcd, gateways and backends on loopback.
#   FUZZ_SECONDS=60 (per target; 0 skips fuzzing)
# Each phase line says when it started (UTC) and the seconds since the
# start; the last phase line is followed by the summary.
set -uo pipefail
cd "$(dirname "$0")/.."
phase() { echo "== [$(date -u +%H:%M:%S) +${SECONDS}s] $*"; }
phase "install-deps"
bash tests/install-deps.sh || exit 1
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
logs=()
rc=0

build() { # dir, meson options...
  local dir=$1; shift
  if [ ! -d "$dir" ]; then
    meson setup "$dir" "$@" >/dev/null || return 1
  else
    meson configure "$dir" "$@" >/dev/null || return 1
  fi
  if ! ninja -C "$dir" > "$dir/ninja.log" 2>&1; then
    tail -30 "$dir/ninja.log"
    return 1
  fi
}

run() { # dir, meson test args...
  local dir=$1; shift
  meson test -C "$dir" --print-errorlogs "$@" | grep -E '^ *[0-9]+/[0-9]+ |^(Ok|Fail|Timeout):' || true
  logs+=("$dir/meson-logs/testlog.json")
}

phase "build (-Dwerror=true) and test"
if build build-test -Dwerror=true -Dpython=true -Dnginx=true; then run build-test; else rc=1; logs+=(build-test/missing); fi

phase "ASan+UBSan"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if build build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dpython=false; then
  run build-asan --no-suite slow
else rc=1; logs+=(build-asan/missing); fi

phase "TSan (concurrency suites)"
if CC=clang build build-tsan -Db_sanitize=thread -Db_lundef=false -Dpython=false -Dbench=false; then
  TSAN_OPTIONS=halt_on_error=1 run build-tsan --suite concurrency
else rc=1; logs+=(build-tsan/missing); fi

if [ "$FUZZ_SECONDS" != 0 ]; then
  phase "libFuzzer (${FUZZ_SECONDS}s per target, two at a time)"
  if CC=clang build build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
       -Dc_args=-fsanitize=fuzzer-no-link -Dpython=false -Dbench=false -Dtests=true; then
    bash tests/fuzz/run.sh build-fuzz "$FUZZ_SECONDS" > build-fuzz/fuzz.tap 2>build-fuzz/fuzz.log
    fuzz_rc=$?
    # Passed only when run.sh exited 0, announced a plan of at least one
    # target and printed exactly that many "ok" lines and no "not ok".
    python3 - "$PWD/build-fuzz/fuzz.tap" "$fuzz_rc" > build-fuzz/fuzz.json <<'PY'
import json, re, sys
out = open(sys.argv[1]).read()
plan = re.search(r"^1\.\.(\d+)$", out, re.M)
oks = len(re.findall(r"^ok \d+", out, re.M))
bad = len(re.findall(r"^not ok \d+", out, re.M))
good = (sys.argv[2] == "0" and plan is not None and int(plan.group(1)) > 0
        and oks == int(plan.group(1)) and bad == 0)
print(json.dumps({"name": "fuzz", "result": "OK" if good else "FAIL", "stdout": out}))
PY
    grep -E '^(ok|not ok)' build-fuzz/fuzz.tap || true
    logs+=("build-fuzz/fuzz.json")
  else rc=1; logs+=(build-fuzz/missing); fi
fi

phase "done"
summary=$(/usr/bin/python3 tests/summarize.py "${logs[@]}")
echo "$summary" | head -n -1
last=$(echo "$summary" | tail -n 1)
case "$last" in *" 0 failed") ;; *) rc=1 ;; esac
echo "$last"
exit $rc
