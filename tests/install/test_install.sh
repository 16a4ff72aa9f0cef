#!/usr/bin/env bash
# test_install.sh - TAP: an installed switchyard runs from wherever it was
# installed. Installs this build with `meson install --destdir` into a fresh
# temporary directory (so the files land somewhere other than the configured
# prefix, as after moving an install tree), then, with LD_LIBRARY_PATH and
# PYTHONPATH cleared, runs the installed tool and
# `/usr/bin/python3 -m switchyard` from there and checks they load the
# installed libswitchyard through a relative ($ORIGIN) run path.
# Usage: test_install.sh BUILD_DIR SOURCE_ROOT WITH_PYTHON(0|1) [B_SANITIZE]
set -u
build=${1:?build dir}
root=${2:?source root}
with_python=${3:-0}
# a sanitized build's library needs its runtime in the programs built here
sanitize=${4:-none}
san_flags=()
[[ $sanitize != none ]] && san_flags=("-fsanitize=$sanitize")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
    n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; shift
    for l in "$@"; do printf '%s\n' "$l" | sed 's/^/# /'; done
}
finish() { echo "1..$n"; [[ $failed -eq 0 ]]; exit $?; }

if out=$(meson install -C "$build" --destdir "$tmp/root" --no-rebuild 2>&1); then
    ok "meson install --destdir succeeds"
else
    not_ok "meson install --destdir succeeds" "$out"
    finish
fi

# Nothing of the build tree may leak into what the installed files see.
clean_env=(env -u LD_LIBRARY_PATH -u PYTHONPATH -u LD_PRELOAD)

tool=$(find "$tmp/root" -path '*/bin/switchyard' -type f | head -n 1)
lib=$(find "$tmp/root" -regex '.*/libswitchyard\.so\.[0-9]+' | head -n 1)
if [[ -x $tool && -n $lib ]]; then
    ok "the tool and libswitchyard.so.N are installed"
else
    not_ok "the tool and libswitchyard.so.N are installed" "tool: $tool" "lib: $lib"
    finish
fi

runpath=$(readelf -d "$tool" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
if [[ $runpath == '$ORIGIN/'* ]]; then
    ok "the tool's RUNPATH is relative: $runpath"
else
    not_ok "the tool's RUNPATH is relative" "RUNPATH: '$runpath'"
fi

# The run path resolves to the installed library, not the build's.
resolved=$(cd / && "${clean_env[@]}" ldd "$tool" | sed -n 's/.*libswitchyard\.so\.[0-9]* => \([^ ]*\).*/\1/p')
if [[ -n $resolved && $(readlink -f "$resolved") == "$(readlink -f "$lib")" ]]; then
    ok "the tool loads the installed libswitchyard"
else
    not_ok "the tool loads the installed libswitchyard" "resolved: '$resolved'" "installed: $lib"
fi

# The library as README.md's "Linking" tells a C host to use it: its
# soname, and a program built with pkg-config against the installed tree
# (PKG_CONFIG_SYSROOT_DIR puts the destdir in front of its -I and -L),
# shared and then static with the README's exact recipe.
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [[ $soname == libswitchyard.so.1 && -f $(dirname "$lib")/libswitchyard.so.$(
        sed -n 's/^#define SY_VERSION_STRING "\(.*\)"/\1/p' "$root/include/switchyard.h") ]]; then
    ok "soname $soname, libswitchyard.so.VERSION installed"
else
    not_ok "soname libswitchyard.so.1, libswitchyard.so.VERSION installed" \
        "soname: $soname" "$(ls "$(dirname "$lib")")"
fi
pc=$(find "$tmp/root" -name switchyard.pc | head -n 1)
cat > "$tmp/app.c" <<'APP'
#include <switchyard.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    const char *doc = "[{\"id\":\"orders\",\"uri\":\"http://o:8080\","
                      "\"predicates\":[\"Path=/orders/{id}\"]}]";
    sy_router *r;
    sy_error err;
    if (sy_version_number() != SY_VERSION_NUMBER ||
        sy_router_new(NULL, &r, &err) || sy_router_add_source(r, "s", &err) ||
        sy_router_apply(r, "s", doc, strlen(doc), NULL, &err))
        return 1;
    sy_match_ctx *ctx;
    sy_match_ctx_new(NULL, &ctx, &err);
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){"/orders/7", 9};
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m;
    int rc = sy_snapshot_match(s, ctx, &req, &m);
    printf("%s %s\n", sy_version(), !rc && m ? sy_route_id(sy_match_route(m)) : "-");
    sy_snapshot_release(s);
    sy_match_ctx_free(ctx);
    sy_router_free(r);
    return 0;
}
APP
pcfg=(env PKG_CONFIG_PATH="$(dirname "$pc")" PKG_CONFIG_SYSROOT_DIR="$tmp/root" pkg-config)
want="$(sed -n 's/^#define SY_VERSION_STRING "\(.*\)"/\1/p' "$root/include/switchyard.h") orders"
libdir=$(dirname "$lib")
modversion=$("${pcfg[@]}" --modversion switchyard 2>&1)
if [[ "$modversion ${want#* }" == "$want" ]]; then
    ok "pkg-config --modversion switchyard is the header's SY_VERSION_STRING: $modversion"
else
    not_ok "pkg-config --modversion switchyard is the header's SY_VERSION_STRING" \
        "pkg-config: $modversion" "header: ${want% *}"
fi
if out=$(cc "${san_flags[@]}" "$tmp/app.c" $("${pcfg[@]}" --cflags --libs switchyard) -o "$tmp/app_shared" 2>&1) &&
   out=$("${clean_env[@]}" LD_LIBRARY_PATH="$libdir" "$tmp/app_shared" 2>&1) && [[ $out == "$want" ]]; then
    ok "a program linked with pkg-config --libs switchyard runs: $out"
else
    not_ok "a program linked with pkg-config --libs switchyard runs" "$out"
fi
if out=$(cc "${san_flags[@]}" "$tmp/app.c" $("${pcfg[@]}" --cflags --libs-only-L switchyard) \
        -Wl,-Bstatic -lswitchyard -Wl,-Bdynamic \
        $("${pcfg[@]}" --libs --static switchyard | sed 's/-lswitchyard//') \
        -o "$tmp/app_static" 2>&1) &&
   ! readelf -d "$tmp/app_static" | grep -q 'libswitchyard' &&
   out=$("${clean_env[@]}" "$tmp/app_static" 2>&1) && [[ $out == "$want" ]]; then
    ok "a program linked statically as README.md shows runs: $out"
else
    not_ok "a program linked statically as README.md shows runs" "$out" \
        "$(readelf -d "$tmp/app_static" 2>&1 | grep NEEDED)"
fi

out=$(cd / && "${clean_env[@]}" "$tool" --version 2>&1)
rc=$?
if [[ $rc -eq 0 && $out == "switchyard "* ]]; then
    ok "installed tool runs: $out"
else
    not_ok "installed tool runs" "exit $rc" "$out"
fi
out=$(cd / && "${clean_env[@]}" "$tool" check "$root/examples/routes/gateway.json" 2>&1)
rc=$?
if [[ $rc -eq 0 && $(head -n 1 <<< "$out") == *": ok, "*" routes" ]]; then
    ok "installed tool checks a document"
else
    not_ok "installed tool checks a document" "exit $rc" "$out"
fi

if [[ $with_python != 1 ]]; then
    finish
fi

main_py=$(find "$tmp/root" -path '*/switchyard/__main__.py' | head -n 1)
ext=$(find "$tmp/root" -path '*/switchyard/_native*.so' | head -n 1)
if [[ -n $main_py && -n $ext ]]; then
    ok "the Python package and its extension are installed"
else
    not_ok "the Python package and its extension are installed" "main: $main_py" "ext: $ext"
    finish
fi
site=$(dirname "$(dirname "$main_py")")

runpath=$(readelf -d "$ext" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
if [[ $runpath == '$ORIGIN/'* ]]; then
    ok "the extension's RUNPATH is relative: $runpath"
else
    not_ok "the extension's RUNPATH is relative" "RUNPATH: '$runpath'"
fi

# Run from / with only the installed site directory on the path: the
# package, its extension and the library must all be the installed ones.
out=$(cd / && "${clean_env[@]}" PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 \
    /usr/bin/python3 -m switchyard --version 2>&1)
rc=$?
if [[ $rc -eq 0 && $out == "switchyard "* ]]; then
    ok "installed python3 -m switchyard runs: $out"
else
    not_ok "installed python3 -m switchyard runs" "exit $rc" "$out"
fi
out=$(cd / && "${clean_env[@]}" PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 \
    /usr/bin/python3 -c '
import os, sys, switchyard, switchyard._native as n
maps = open("/proc/self/maps").read().split()
libs = sorted({p for p in maps if "libswitchyard.so" in p})
print(os.path.realpath(n.__file__))
print(" ".join(os.path.realpath(p) for p in libs))
' 2>&1)
rc=$?
ext_seen=$(sed -n 1p <<<"$out")
libs_seen=$(sed -n 2p <<<"$out")
if [[ $rc -eq 0 && $ext_seen == "$(readlink -f "$ext")" &&
      $libs_seen == "$(readlink -f "$lib")" ]]; then
    ok "python loads the installed extension and libswitchyard"
else
    not_ok "python loads the installed extension and libswitchyard" "exit $rc" "$out" \
        "want: $(readlink -f "$ext")" "and:  $(readlink -f "$lib")"
fi
out=$(cd / && "${clean_env[@]}" PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 \
    /usr/bin/python3 -m switchyard match --instances "$root/examples/routes/instances.json" \
    "$root/examples/routes/gateway.json" GET http://shop.example.com/api/orders/7 2>&1)
rc=$?
if [[ $rc -eq 0 && $out == "route:    orders-read"* && $out == *"instance: orders-"* ]]; then
    ok "installed python3 -m switchyard matches a request"
else
    not_ok "installed python3 -m switchyard matches a request" "exit $rc" "$out"
fi
finish
