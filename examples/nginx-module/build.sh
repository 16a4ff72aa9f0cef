#!/bin/bash
# Build ngx_http_switchyard_module.so against Debian's nginx-dev.
#
#   build.sh OUT.so MODULE_DIR LIBSWITCHYARD.a INCLUDE_DIR SCRATCH_DIR
#
# Copies /usr/share/nginx/src (the configured source tree of Debian's
# nginx) into SCRATCH_DIR, configures it with the flags Debian built nginx
# with (conf_flags, --with-compat among them) plus --add-dynamic-module,
# and builds only the modules. The static library is linked into the
# module (it is built with -fPIC; its symbols stay hidden), so the .so
# loads into the stock nginx without libswitchyard installed.
# NGINX_SRC overrides the source tree.
set -euo pipefail
out=$1 moddir=$(cd "$2" && pwd) lib=$(realpath "$3") inc=$(realpath "$4")
scratch=$5
src=${NGINX_SRC:-/usr/share/nginx/src}
[ -f "$src/conf_flags" ] || { echo "build.sh: $src/conf_flags not found (apt-get install nginx-dev)" >&2; exit 1; }

export SWITCHYARD_INC="$inc $(pkg-config --cflags-only-I libcjson | sed "s/-I//g")"
export SWITCHYARD_LIBS="$lib $(pkg-config --libs libpcre2-8 libcjson) -lm -lpthread -Wl,--version-script=$moddir/exports.map"
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
