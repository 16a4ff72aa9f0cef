#!/usr/bin/env bash
# The demo command: installs what it needs, builds switchyard, then walks
# through the example gateway routes with the `switchyard` tool: check a
# good and a broken document, match requests (with instance selection),
# explain a miss, and diff two versions of the routes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/install-deps.sh
[ -d build-demo ] || meson setup build-demo -Dtests=false >/dev/null
ninja -C build-demo >/dev/null
sy=build-demo/examples/switchyard
r=examples/routes
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@" || true; }

step $sy check $r/gateway.json
step $sy check $r/broken.json
step $sy match --instances $r/instances.json $r/gateway.json GET 'http://shop.example.com/api/orders/42?expand=items'
step $sy match --json --instances $r/instances.json -H 'X-Version: 1.10' $r/gateway.json GET http://shop.example.com/api/orders/7
step $sy match $r/gateway.json GET http://acme.example.com/users/17/profile
step $sy match --seed 3 $r/gateway.json GET http://shop.example.com/search/q
step $sy match $r/gateway.json GET http://shop.example.com/docs/intro
step $sy explain $r/gateway.json POST http://shop.example.com/api/orders/42
step $sy diff $r/gateway.json $r/gateway-v2.json
step $sy diff --json $r/gateway.json $r/gateway-v2.json
