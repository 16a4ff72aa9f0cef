#!/bin/bash
# Build ngx_http_switchyard_module.so against Debian's nginx-dev.
#
#   build.sh OUT.so MODULE_DIR LIBSWITCHYARD.a INCLUDE_DIR SCRATCH_DIR [UNIT]
#
# Copies /usr/share/nginx/src (the configured source tree of Debian's
# nginx) into SCRATCH_DIR, configures it with the flags Debian built nginx
# with (conf_flags, --with-compat among them) plus --add-dynamic-module,
# and builds only the modules. The static library is linked into the
# module (it is built with -fPIC; its symbols stay hidden), so the .so
# loads into the stock nginx without libswitchyard installed.
# NGINX_SRC overrides the source tree. UNIT: where to build the zone's
# unit test (test_zone_attach.c) too.
set -euo pipefail
out=$1 moddir=$(cd "$2" && pwd) lib=$(realpath "$3") inc=$(realpath "$4")
scratch=$5
src=${NGINX_SRC:-/usr/share/nginx/src}
[ -f "$src/conf_flags" ] || { echo "build.sh: $src/conf_flags not found (apt-get install nginx-dev)" >&2; exit 1; }

export SWITCHYARD_INC="$inc $(pkg-config --cflags-only-I libcjson | sed "s/-I//g")"
libs="$lib $(pkg-config --libs libpcre2-8 libcjson) -lm -lpthread"
export SWITCHYARD_LIBS="$libs -Wl,--version-script=$moddir/exports.map"
stamp="$moddir/config $SWITCHYARD_INC $SWITCHYARD_LIBS $src"

mkdir -p "$scratch"
tree="$scratch/nginx"
# configure once per module config / library path (it takes ~20 s)
if [ ! -f "$tree/objs/Makefile" ] || [ "$(cat "$scratch/stamp" 2>/dev/null)" != "$stamp" ] \
   || [ "$moddir/config" -nt "$tree/objs/Makefile" ]; then
    rm -rf "$tree"
    cp -a "$src" "$tree"
    (
        cd "$tree"
        # shellcheck disable=SC1091
        source ./conf_flags
        ./configure "${NGX_CONF_FLAGS[@]}" --add-dynamic-module="$moddir" >"$scratch/configure.log" 2>&1 \
            || { cat "$scratch/configure.log" >&2; exit 1; }
    )
    echo "$stamp" >"$scratch/stamp"
fi
# relink always: the library is not a make dependency of the module
rm -f "$tree/objs/ngx_http_switchyard_module.so"
make -s -C "$tree" -f objs/Makefile modules >"$scratch/make.log" 2>&1 || { cat "$scratch/make.log" >&2; exit 1; }
# a new file renamed over the old one, never the old one rewritten in
# place: an nginx running with the .so mapped (a test, a sample) would
# take SIGSEGV/SIGBUS in its workers and master
cp "$tree/objs/ngx_http_switchyard_module.so" "$out.tmp.$$"
mv -f "$out.tmp.$$" "$out"
# the zone's unit test (test_zone_attach.c, TAP), against the same
# configured headers: the structures' layout is nginx's as built here
if [ -n "${6:-}" ]; then
    unit="$(cd "$(dirname "$6")" && pwd)/$(basename "$6")"
    (
        cd "$tree"
        # shellcheck disable=SC2046,SC2086
        cc -O -g -Wall -Wno-unused-parameter -Werror \
            -I src/core -I src/event -I src/event/modules -I src/os/unix \
            -I objs -I src/http -I src/http/modules -I src/http/v2 \
            $(printf -- '-I %s ' $SWITCHYARD_INC) -I "$moddir" \
            "$moddir/test_zone_attach.c" "$moddir/ngx_http_switchyard_zone.c" \
            $libs -o "$unit.tmp.$$"
    ) || exit 1
    mv -f "$unit.tmp.$$" "$unit"
fi
