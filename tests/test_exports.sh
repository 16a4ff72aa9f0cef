#!/usr/bin/env bash
# test_exports.sh - TAP check of the naming convention of docs/architecture.md
# ("Names"): the shared library exports exactly public API, i.e. every
# symbol it exports is declared with SY_API in include/switchyard.h, and
# nothing internal (sy_ functions declared only in lib/*.h, module
# prefixes such as svc_) leaks out.
# Usage: test_exports.sh PATH/TO/libswitchyard.so SOURCE_ROOT
set -u
lib=${1:?shared library}
root=${2:?source root}
header="$root/include/switchyard.h"

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
    n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"
    shift
    for l in "$@"; do echo "# $l"; done
}

exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' |
    sort -u)
declared=$(grep -oE '^SY_API[^;(]*[^a-z0-9_](sy_[a-z0-9_]+) *\(' "$header" |
    grep -oE 'sy_[a-z0-9_]+ *\($' | tr -d '( ' | sort -u)

if [[ -n $exported ]]; then
    ok "the library exports symbols ($(wc -l <<<"$exported"))"
else
    not_ok "the library exports symbols" "nm found none in $lib"
fi
if [[ $(wc -l <<<"$declared") -ge 50 ]]; then
    ok "switchyard.h declares the public API ($(wc -l <<<"$declared") calls)"
else
    not_ok "switchyard.h declares the public API" \
        "found $(wc -l <<<"$declared") SY_API calls in $header"
fi

leaked=$(comm -23 <(echo "$exported") <(echo "$declared"))
if [[ -z $leaked ]]; then
    ok "every exported symbol is an SY_API call of switchyard.h"
else
    not_ok "every exported symbol is an SY_API call of switchyard.h" \
        "exported but not public:" $leaked
fi

echo "1..$n"
[[ $failed -eq 0 ]]
