#!/usr/bin/env bash
# run.sh - run every libFuzzer target of a fuzz build for a bounded time.
# Usage: tests/fuzz/run.sh BUILD_DIR [SECONDS]   (default 60 s per target)
# Builds nothing: configure and build BUILD_DIR as tests/fuzz/meson.build
# says. Seeds are tests/data/valid and tests/data/invalid (copied to a
# temporary corpus directory). Leak detection is on. Exits non-zero when a
# target crashes, leaks or times out, when an expected target is missing
# from the build, or when a target stopped before its time was up (no
# "Done N runs in S second(s)" line with N > 0 and S close to SECONDS);
# the crashing input is kept under BUILD_DIR/fuzz-artifacts/. Targets run
# FUZZ_JOBS at a time (default the cores, up to 2; FUZZ_KEEP=1: one).
#
# A longer campaign, on demand (not in CI): FUZZ_KEEP=1 with more seconds,
#   nice -n 19 env FUZZ_KEEP=1 bash tests/fuzz/run.sh build-fuzz 180
# then merges (libFuzzer -merge=1) each target's run into
# tests/fuzz/corpus/<target>/: only the inputs that reach edges the seeds
# and the corpus already there do not, so the next runs start from them.
# Crashing inputs are never merged: minimise them (-minimize_crash=1),
# fix, and add them to the corpus with a regression test.
set -u
build=${1:?usage: run.sh BUILD_DIR [SECONDS]}
secs=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
data="$here/../data"
[[ -d $build/tests/fuzz ]] || { echo "run.sh: no $build/tests/fuzz (configure with -Dfuzz=true)" >&2; exit 2; }

# Every target of tests/fuzz/meson.build: a missing binary is a failure,
# never a silently shorter run.
expected=(fuzz_document fuzz_instances fuzz_match fuzz_pattern)
targets=()
for name in "${expected[@]}"; do targets+=("$build/tests/fuzz/$name"); done

artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"

# One target, numbered n: its TAP lines to stdout, its diagnostics to
# stderr, exit status 1 when it failed.
fuzz_one() {
    local n=$1 t=$2 name status=0
    name=$(basename "$t")
    if [[ ! -x $t ]]; then
        echo "not ok $n - $name: not built"
        echo "run.sh: $t missing" >&2
        return 1
    fi
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
    # libFuzzer ends a full run with "Done <runs> runs in <s> second(s)".
    done_line=$(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "$artifacts/$name.log" | tail -n 1)
    runs=$(echo "$done_line" | awk '{print $2}')
    took=$(echo "$done_line" | awk '{print $5}')
    if [[ $rc -eq 0 && -z $done_line ]]; then
        echo "not ok $n - $name: no final 'Done N runs' line (stopped early?)"
        status=1
    elif [[ $rc -eq 0 && ${runs:-0} -eq 0 ]]; then
        echo "not ok $n - $name: ran no input"
        status=1
    elif [[ $rc -eq 0 && ${took:-0} -lt $((secs - 1)) ]]; then
        echo "not ok $n - $name: stopped after ${took}s of ${secs}s"
        status=1
    elif [[ $rc -eq 0 ]]; then
        echo "ok $n - $name: no crash, leak or timeout in ${took}s ($runs runs)"
    else
        echo "not ok $n - $name (exit $rc)"
        echo "run.sh: $name failed (exit $rc); see $artifacts/$name.log" >&2
        grep -E "ERROR|SUMMARY|Test unit written" "$artifacts/$name.log" >&2
        status=1
    fi
    if [[ ${FUZZ_KEEP:-0} == 1 && $rc -eq 0 ]]; then
        keep="$here/corpus/$name"
        base=$(mktemp -d)
        cp "$data"/valid/*.json "$data"/invalid/*.json "$base"/ 2>/dev/null
        mkdir -p "$keep"
        cp "$keep"/* "$base"/ 2>/dev/null
        before=$(ls "$base" | wc -l)
        # new edges only (no counters, no comparison operands): a few
        # inputs a target, not every variation the run found
        "$t" -merge=1 "$base" "$corpus" -use_counters=0 -use_cmp=0 \
            -use_value_profile=0 -max_len=65536 -timeout=10 \
            -rss_limit_mb=2048 >"$artifacts/$name-merge.log" 2>&1
        added=0
        for f in "$base"/*; do
            b=$(basename "$f")
            [[ -e "$corpus/$b" && ! -e "$data/valid/$b" && ! -e "$data/invalid/$b" && ! -e "$keep/$b" ]] || continue
            cp "$f" "$keep/" && added=$((added + 1))
        done
        echo "# $name: kept $added new input(s) in tests/fuzz/corpus/$name (base $before)"
        rm -rf "$base"
    fi
    rm -rf "$corpus"
    return $status
}

# FUZZ_JOBS targets at a time (default: the machine's cores, at most 2),
# each for the full SECONDS on a core of its own; the TAP lines printed in
# the targets' order whatever the order they finish in.
# (FUZZ_KEEP=1: one at a time, the campaign niced behind other work)
par=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
[[ -z ${FUZZ_JOBS:-} ]] && ((par > 2)) && par=2
[[ -z ${FUZZ_JOBS:-} && ${FUZZ_KEEP:-0} == 1 ]] && par=1
((par >= 1)) || par=1
out=$(mktemp -d)
status=0
echo "1..${#targets[@]}"
n=0
for t in "${targets[@]}"; do
    n=$((n + 1))
    while (($(jobs -rp | wc -l) >= par)); do wait -n; done
    (fuzz_one "$n" "$t" >"$out/$n.tap" 2>"$out/$n.err"; echo $? >"$out/$n.rc") &
done
wait
for ((i = 1; i <= n; i++)); do
    cat "$out/$i.tap"
    cat "$out/$i.err" >&2
    [[ $(cat "$out/$i.rc" 2>/dev/null) == 0 ]] || status=1
done
rm -rf "$out"
exit $status
