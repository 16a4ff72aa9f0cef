#!/usr/bin/env bash
# test_pip.sh - TAP: `pip install --no-build-isolation .` builds the Python
# package through pyproject.toml (meson-python) and installs it into a venv
# made with --system-site-packages (cffi and the build tools from Debian).
# Offline: --no-index, pip's configuration ignored, so nothing is fetched.
# The installed package then runs from / without the build tree.
# Usage: test_pip.sh SOURCE_ROOT
set -u
root=${1:?source root}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
    n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; shift
    for l in "$@"; do printf '%s\n' "$l" | tail -n 40 | sed 's/^/# /'; done
}
finish() { echo "1..$n"; [[ $failed -eq 0 ]]; exit $?; }

# Nothing from the build tree or the environment's pip settings.
clean_env=(env -u LD_LIBRARY_PATH -u PYTHONPATH -u PIP_FIND_LINKS
           -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null
           PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
           PYTHONDONTWRITEBYTECODE=1)

if out=$("${clean_env[@]}" /usr/bin/python3 -m venv --system-site-packages "$tmp/venv" 2>&1); then
    ok "python3 -m venv --system-site-packages"
else
    not_ok "python3 -m venv --system-site-packages" "$out"
    finish
fi
py=$tmp/venv/bin/python

# Build from a copy, so the test never writes into the source tree.
mkdir "$tmp/src"
(cd "$root" && tar --exclude='./build*' --exclude=./.git --exclude='./.mesonpy*' -cf - .) |
    (cd "$tmp/src" && tar -xf -)
if out=$(cd "$tmp" && "${clean_env[@]}" "$py" -m pip install --no-index \
        --no-build-isolation "$tmp/src" 2>&1); then
    ok "pip install --no-index --no-build-isolation . into the venv"
else
    not_ok "pip install --no-index --no-build-isolation . into the venv" "$out"
    finish
fi

want=$(sed -n "s/^ *version : '\([^']*\)'.*/\1/p" "$root/meson.build" | head -n 1)
got=$("${clean_env[@]}" "$py" -m pip show switchyard 2>/dev/null | sed -n 's/^Version: //p')
if [[ -n $want && $got == "$want" ]]; then
    ok "pip knows switchyard $got (the project's version)"
else
    not_ok "pip knows the project's version" "pip show: '$got'" "meson.build: '$want'"
fi

out=$(cd / && "${clean_env[@]}" "$py" -c '
import os, sys, switchyard, switchyard._native as n
print(os.path.realpath(switchyard.__file__))
print(os.path.realpath(n.__file__))
maps = open("/proc/self/maps").read()
print("shared-lib" if "libswitchyard.so" in maps else "self-contained")
' 2>&1)
rc=$?
venv_real=$(readlink -f "$tmp/venv")
if [[ $rc -eq 0 && $(sed -n 1p <<<"$out") == "$venv_real"/lib/python3*/site-packages/switchyard/__init__.py &&
      $(sed -n 2p <<<"$out") == "$venv_real"/lib/python3*/site-packages/switchyard/_native*.so &&
      $(sed -n 3p <<<"$out") == self-contained ]]; then
    ok "the venv's package and extension load, without an installed libswitchyard"
else
    not_ok "the venv's package and extension load, without an installed libswitchyard" "exit $rc" "$out"
fi

out=$(cd / && "${clean_env[@]}" "$py" -m switchyard --version 2>&1)
rc=$?
if [[ $rc -eq 0 && $out == "switchyard $want" ]]; then
    ok "python -m switchyard --version: $out"
else
    not_ok "python -m switchyard --version" "exit $rc" "$out"
fi
out=$(cd / && "${clean_env[@]}" "$py" -m switchyard match --instances "$root/examples/routes/instances.json" \
    "$root/examples/routes/gateway.json" GET http://shop.example.com/api/orders/7 2>&1)
rc=$?
if [[ $rc -eq 0 && $out == "route:    orders-read"* && $out == *"instance: orders-"* ]]; then
    ok "python -m switchyard matches a request"
else
    not_ok "python -m switchyard matches a request" "exit $rc" "$out"
fi
out=$(cd / && "${clean_env[@]}" "$py" -c '
import switchyard as sy
with sy.Router() as r:
    r.add_source("s")
    r.apply("s", [{"id": "a", "uri": "http://x", "predicates": ["Path=/a/{n}"]}])
    with r.acquire() as snap:
        m = snap.match(method="GET", url="/a/7")
        print(m.route_id, m.vars["n"])
' 2>&1)
if [[ $out == "a 7" ]]; then
    ok "the installed bindings route a request"
else
    not_ok "the installed bindings route a request" "$out"
fi

if out=$("${clean_env[@]}" "$py" -m pip uninstall -y switchyard 2>&1) &&
   ! (cd / && "${clean_env[@]}" "$py" -c 'import switchyard' 2>/dev/null); then
    ok "pip uninstall removes it"
else
    not_ok "pip uninstall removes it" "$out"
fi
finish
