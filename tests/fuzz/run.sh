#!/usr/bin/env bash
# run.sh - run every libFuzzer target of a fuzz build for a bounded time.
# Usage: tests/fuzz/run.sh BUILD_DIR [SECONDS]   (default 60 s per target)
# Builds nothing: configure and build BUILD_DIR as tests/fuzz/meson.build
# says. Seeds are tests/data/valid and tests/data/invalid (copied to a
# temporary corpus directory). Leak detection is on. Exits non-zero when a
# target crashes, leaks or times out; the crashing input is kept under
# BUILD_DIR/fuzz-artifacts/.
set -u
build=${1:?usage: run.sh BUILD_DIR [SECONDS]}
secs=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
data="$here/../data"
[[ -d $build/tests/fuzz ]] || { echo "run.sh: no $build/tests/fuzz (configure with -Dfuzz=true)" >&2; exit 2; }

mapfile -t targets < <(find "$build/tests/fuzz" -maxdepth 1 -type f -name 'fuzz_*' -perm -u+x | sort)
[[ ${#targets[@]} -gt 0 ]] || { echo "run.sh: no fuzz_* binaries in $build/tests/fuzz" >&2; exit 2; }

artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
status=0
n=0
echo "1..${#targets[@]}"
for t in "${targets[@]}"; do
    n=$((n + 1))
    name=$(basename "$t")
    corpus=$(mktemp -d)
    cp "$data"/valid/*.json "$data"/invalid/*.json "$corpus"/ 2>/dev/null
    [[ -d "$here/corpus/$name" ]] && cp "$here/corpus/$name"/* "$corpus"/ 2>/dev/null
    echo "# $name for ${secs}s"
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
        "$t" "$corpus" -max_total_time="$secs" -detect_leaks=1 -timeout=10 \
        -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
        -artifact_prefix="$artifacts/$name-" >"$artifacts/$name.log" 2>&1
    rc=$?
    tail -n 3 "$artifacts/$name.log" | sed 's/^/# /'
    if [[ $rc -eq 0 ]]; then
        echo "ok $n - $name: no crash, leak or timeout in ${secs}s"
    else
        echo "not ok $n - $name (exit $rc)"
        echo "run.sh: $name failed (exit $rc); see $artifacts/$name.log" >&2
        grep -E "ERROR|SUMMARY|Test unit written" "$artifacts/$name.log" >&2
        status=1
    fi
    rm -rf "$corpus"
done
exit $status
