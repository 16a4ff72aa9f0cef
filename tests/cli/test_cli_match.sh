#!/usr/bin/env bash
# test_cli_match.sh - TAP tests of `switchyard match` and `explain` on the
# example gateway routes: chosen route, variables, upstream request after
# filters, redirects, instance selection, --json shape, explain's first
# failing predicate, exit codes (0 matched, 1 no route or no instance for an
# lb:// route, 2 usage/bad file/malformed method or URL), invalid routes
# reported and skipped unless --strict, --help of every command.
# Usage: test_cli_match.sh PATH/TO/switchyard SOURCE_ROOT
set -u
bin=${1:?switchyard binary}
root=${2:?source root}
r="$root/examples/routes"
py=/usr/bin/python3

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
    n=$((n + 1)); echo "not ok $n - $1"; shift
    for l in "$@"; do printf '%s\n' "$l" | sed 's/^/# /'; done
}
# expect NAME WANT_RC WANT_SUBSTRING... -- ARGS: exit code and every
# substring in stdout
expect() {
    local name=$1 want=$2; shift 2
    local subs=()
    while [[ $1 != -- ]]; do subs+=("$1"); shift; done
    shift
    local out rc
    out=$("$bin" "$@" 2>&1); rc=$?
    if [[ $rc -ne $want ]]; then not_ok "$name" "exit $rc, want $want" "$out"; return; fi
    for s in "${subs[@]}"; do
        if [[ $out != *"$s"* ]]; then not_ok "$name" "missing: $s" "$out"; return; fi
    done
    ok "$name"
}
# json NAME PYTHON_ASSERTION -- ARGS: the --json output parsed by python
json() {
    local name=$1 check=$2; shift 3
    local out
    out=$("$bin" "$@" 2>&1)
    if echo "$out" | "$py" -c "import json,sys; d=json.load(sys.stdin); assert $check, d" 2>/dev/null; then
        ok "$name"
    else
        not_ok "$name" "$out"
    fi
}

expect "path variable, StripPrefix and AddRequestHeader" 0 \
    "route:    orders-read" "var:      id = 42" "request:  GET /orders/42?expand=items" \
    "header: X-Order-Id: 42" -- match --instances "$r/instances.json" "$r/gateway.json" GET 'http://shop.example.com/api/orders/42?expand=items'
expect "host variable, {*rest} and SetPath" 0 \
    "route:    users" "var:      tenant = acme" "request:  GET /v2/acme/users/17/profile" \
    "response: add X-Tenant: acme" -- match "$r/gateway.json" GET http://acme.example.com/users/17/profile
expect "RedirectTo answers without upstream" 0 \
    "answer:   302 redirect to https://docs.example.com" -- match "$r/gateway.json" GET http://shop.example.com/docs/intro
expect "Header regexp decides between routes" 0 "route:    orders-write" \
    -- match --instances "$r/instances.json" -H 'Authorization: Bearer abc' "$r/gateway.json" POST http://shop.example.com/api/orders/42
expect "disabled route is never chosen" 0 "route:    fallback" \
    -- match "$r/gateway.json" GET 'http://shop.example.com/api/x?maintenance'
expect "no route exits 1" 1 "no route matches" -- match "$root/tests/data/github-api-routes.json" GET /nothing/here
expect "missing file exits 2" 2 "cannot read" -- match /nonexistent.json GET /
expect "bad --seed exits 2" 2 "--seed" -- match --seed x "$r/gateway.json" GET /
expect "--seed -1 exits 2" 2 "--seed" -- match --seed -1 "$r/gateway.json" GET /
expect "--seed 0 (no seed) exits 2" 2 "--seed 0 reads as no seed" -- match --seed 0 "$r/gateway.json" GET /
expect "--seed '' exits 2" 2 "--seed" -- match --seed '' "$r/gateway.json" GET /
expect "--seed ' 5' exits 2" 2 "--seed" -- match --seed ' 5' "$r/gateway.json" GET /
# every value given is used or refused naming its flag: these were taken
# and answered as if not given (or given otherwise)
expect "--remote-addr not an IP exits 2" 2 "--remote-addr" -- match --remote-addr notanip "$r/gateway.json" GET /
expect "--remote-addr IP:port is the IP" 0 "route:" -- match --remote-addr 10.0.0.1:5555 "$r/gateway.json" GET http://shop.example.com/docs/intro
expect "--remote-addr [IPv6]:port is the IP" 0 "route:" -- match --remote-addr '[::1]:5555' "$r/gateway.json" GET http://shop.example.com/docs/intro
expect "--remote-addr [IPv6] without a port is the IP" 0 "route:" -- match --remote-addr '[::1]' "$r/gateway.json" GET http://shop.example.com/docs/intro
expect "--remote-addr [IPv6]junk exits 2" 2 "--remote-addr" -- match --remote-addr '[::1]x' "$r/gateway.json" GET /
expect "--remote-addr [IPv4] exits 2" 2 "--remote-addr" -- match --remote-addr '[10.0.0.1]' "$r/gateway.json" GET /
expect "--remote-addr twice exits 2" 2 "--remote-addr" -- match --remote-addr 10.0.0.1 --remote-addr 10.0.0.2 "$r/gateway.json" GET /
expect "--now twice exits 2" 2 "--now" -- match --now 0 --now 1 "$r/gateway.json" GET /
expect "--seed twice exits 2" 2 "--seed" -- match --seed 1 --seed 2 "$r/gateway.json" GET /
expect "--instances twice exits 2" 2 "--instances" -- match --instances "$r/instances.json" --instances "$r/instances.json" "$r/gateway.json" GET /
expect "--now month 13 exits 2" 2 "--now" -- match --now 2024-13-02T03:04:05Z "$r/gateway.json" GET /
expect "--now hour 99 exits 2" 2 "--now" -- match --now 2024-01-02T99:04:05Z "$r/gateway.json" GET /
expect "--now text after Z exits 2" 2 "--now" -- match --now 2024-01-02T03:04:05Zjunk "$r/gateway.json" GET /
expect "--now 0 (the library's not given) exits 2" 2 "--now 0 (1970-01-01T00:00:00Z)" -- match --now 0 "$r/gateway.json" GET /
expect "--now epoch as ISO exits 2" 2 "--now 0 (1970-01-01T00:00:00Z)" -- explain --now 1970-01-01T00:00:00Z "$r/gateway.json" GET /
expect "a Content-Length that is not a number exits 2" 2 "Content-Length" -- match -H 'Content-Length: abc' "$r/gateway.json" POST /
expect "explain: --remote-addr twice exits 2" 2 "--remote-addr" -- explain --remote-addr 10.0.0.1 --remote-addr 10.0.0.2 "$r/gateway.json" GET /
json "json: route, vars, path and headers" \
    "d['route']=='orders-read' and d['vars']=={'id':'7'} and d['path']=='/orders/7' and ['X-Order-Id','7'] in d['headers'] and d['status'] is None and d['redirect'] is None" \
    -- match --json "$r/gateway.json" GET http://shop.example.com/api/orders/7
json "json: version header selects the instance" \
    "d['instance']=={'id':'orders-3','host':'10.0.0.13','port':8080,'scheme':'http'}" \
    -- match --json --instances "$r/instances.json" -H 'X-Version: 1.10' "$r/gateway.json" GET http://shop.example.com/api/orders/7
json "json: no instance gives null and a reason" \
    "d['instance'] is None and 'no known instances' in d['instance_error']" \
    -- match --json "$r/gateway.json" GET http://shop.example.com/api/orders/7
json "json: redirect and status" \
    "d['status']==302 and d['redirect']=='https://docs.example.com'" \
    -- match --json "$r/gateway.json" GET http://shop.example.com/docs/intro
json "json: no route is null" "d['route'] is None" \
    -- match --json "$root/tests/data/github-api-routes.json" GET /nothing
json "json: github request matches its endpoint" \
    "d['route']=='gh8' and d['vars']=={'owner':'o','repo':'r'}" \
    -- match --json "$root/tests/data/github-api-routes.json" GET /repos/o/r/events
expect "--now drives time predicates" 0 "route:    late" \
    -- match --now 2030-01-01T00:00:00Z "$root/tests/cli/timed.json" GET /
expect "--now before the bound falls through" 0 "route:    early" \
    -- match --now 1999-12-31T23:00:00-01:00 "$root/tests/cli/timed.json" GET /
expect "--remote-addr drives RemoteAddr" 0 "route:    inside" \
    -- match --remote-addr 10.1.2.3 "$root/tests/cli/timed.json" GET /net
expect "explain lists every route in rank order" 0 \
    "1. maintenance" "skipped: disabled" "2. orders-read" "predicates[1] Method does not hold" \
    "3. orders-write" "predicates[2] Header does not hold" "8. fallback" "MATCH" "=> fallback" \
    -- explain "$r/gateway.json" POST http://shop.example.com/api/orders/42
json "explain --json" \
    "d['route']=='fallback' and d['routes'][0]=={'route':'maintenance','order':-10,'matched':False,'failed':'disabled'} and d['routes'][1]['failed_predicate']==1" \
    -- explain --json "$r/gateway.json" POST http://shop.example.com/api/orders/42
expect "lb:// route without an instance exits 1 and says why" 1 \
    "route:    orders-read" "instance: none (service 'orders' has no known instances; the gateway answers 503)" \
    -- match "$r/gateway.json" GET http://shop.example.com/api/orders/7
expect "unknown version without fallback exits 1" 1 "instance: none (" \
    -- match --instances "$r/instances.json" -H 'version: 9.9' -H 'Authorization: Bearer a' \
    "$r/gateway.json" POST http://shop.example.com/api/orders/7
expect "an instance found exits 0" 0 "instance: orders-" \
    -- match --instances "$r/instances.json" "$r/gateway.json" GET http://shop.example.com/api/orders/7
expect "explain does not select: exits 0 on an lb:// match" 0 "=> orders-read" \
    -- explain "$r/gateway.json" GET http://shop.example.com/api/orders/7
expect "a method with a space is rejected" 2 "method 'G ET' is not an HTTP method token" \
    -- match "$r/gateway.json" 'G ET' /
expect "an empty method is rejected" 2 "method '' is not" -- match "$r/gateway.json" '' /
# HTTP methods are case-sensitive (RFC 9110 9.1): 'get' is not GET, and
# the gateway answers a request line 'get / HTTP/1.1' 400; both tools
# matched it before (Method=GET routes failing, the fallback chosen)
expect "a lower-case method is refused naming METHOD" 2 \
    "METHOD 'get' has lower-case letters: HTTP methods are case-sensitive (RFC 9110 9.1), 'get' is not 'GET'" \
    -- match "$r/gateway.json" get http://shop.example.com/api/orders/42
expect "explain refuses it too" 2 "METHOD 'Get' has lower-case letters" \
    -- explain "$r/gateway.json" Get http://shop.example.com/api/orders/42
expect "an upper-case method the routes do not name is still explained" 1 \
    "no route matches PURGE" -- match "$root/tests/data/github-api-routes.json" PURGE /nothing/here
expect "a URL without a leading slash or scheme is rejected" 2 \
    "URL 'shop/x' is neither /path[?query] nor scheme://host[:port]/path[?query]" \
    -- explain "$r/gateway.json" GET shop/x
expect "a URL with a space is rejected" 2 "URL '/a b' has a space or control character at offset 2" \
    -- match "$r/gateway.json" GET '/a b'
expect "a URL without a host is rejected" 2 "has no host after '://'" \
    -- match "$r/gateway.json" GET 'http:///x'
expect "a URL with a bad port is rejected" 2 "has a bad port '65536'" \
    -- match "$r/gateway.json" GET 'http://h:65536/x'
expect "a bracketed IPv6 host with a port is accepted" 1 "no route matches" \
    -- match "$root/tests/data/github-api-routes.json" GET 'http://[::1]:8080/nothing'
expect "invalid routes are reported and skipped, the rest load" 0 \
    "broken.json: routes[2].uri: unsupported uri scheme 'backend'" "(route skipped)" "route:    ok" \
    -- match "$r/broken.json" GET /ok
expect "--strict fails on the first invalid route" 2 "broken.json: routes[1].predicates[0].args.regexp" \
    -- match --strict "$r/broken.json" GET /ok
out=$("$bin" match "$r/broken.json" GET /ok 2>/dev/null)
if [[ $out != *skipped* && $out == "route:    ok"* ]]; then ok "warnings go to stderr, not stdout"
else not_ok "warnings go to stderr, not stdout" "$out"; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/inst-num.json" <<'JSON'
{"orders": [
  {"id": "n2", "host": "10.0.0.2", "port": 8080, "state": "UP", "metadata": {"version": 2}},
  {"id": "n1", "host": "10.0.0.1", "port": 8080, "state": "Down", "metadata": {"version": 1}}
]}
JSON
cat >"$tmp/inst-port.json" <<'JSON'
{"services": {"orders": [
  {"id": "p1", "host": "10.0.0.1", "port": 8080},
  {"id": "p2", "host": "10.0.0.2", "port": "8080"}
]}}
JSON
cat >"$tmp/inst-state.json" <<'JSON'
{"services": {"orders": [{"id": "s1", "host": "h", "port": 1, "state": "healthy"}]}}
JSON
expect "instances: a numeric version is text, UP is up (bare map form)" 0 "instance: n2 http://10.0.0.2:8080" \
    -- match --instances "$tmp/inst-num.json" -H 'X-Version: 2' "$r/gateway.json" GET http://shop.example.com/api/orders/7
expect "instances: a Down instance is never chosen" 1 "instance: none (" \
    -- match --instances "$tmp/inst-num.json" -H 'version: 1' -H 'Authorization: Bearer a' \
    "$r/gateway.json" POST http://shop.example.com/api/orders/7
expect "instances: a string port is rejected with its path" 2 \
    "inst-port.json: services.orders[1].port: port must be a number, not a string" \
    -- match --instances "$tmp/inst-port.json" "$r/gateway.json" GET http://shop.example.com/api/orders/7
expect "instances: an unknown state is rejected with its path" 2 \
    "inst-state.json: services.orders[0].state: state must be up, draining or down" \
    -- match --instances "$tmp/inst-state.json" "$r/gateway.json" GET http://shop.example.com/api/orders/7
for c in check match explain diff; do
    out=$("$bin" $c --help); rc=$?
    if [[ $rc -eq 0 && $out == "usage: switchyard $c"* && $out == *"options:"* && \
          $out == *$'\nexample'*"  switchyard $c "* ]]; then
        ok "$c --help: usage, options and an example"
    else
        not_ok "$c --help: usage, options and an example" "exit $rc" "$out"
    fi
done
echo "1..$n"
