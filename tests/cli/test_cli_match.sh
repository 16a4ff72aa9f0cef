#!/usr/bin/env bash
# test_cli_match.sh - TAP tests of `switchyard match` and `explain` on the
# example gateway routes: chosen route, variables, upstream request after
# filters, redirects, instance selection, --json shape, explain's first
# failing predicate, exit codes (0 matched, 1 no route, 2 usage/bad file).
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
    for l in "$@"; do echo "# $l"; done
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
    "header: X-Order-Id: 42" -- match "$r/gateway.json" GET 'http://shop.example.com/api/orders/42?expand=items'
expect "host variable, {*rest} and SetPath" 0 \
    "route:    users" "var:      tenant = acme" "request:  GET /v2/acme/users/17/profile" \
    "response: add X-Tenant: acme" -- match "$r/gateway.json" GET http://acme.example.com/users/17/profile
expect "RedirectTo answers without upstream" 0 \
    "answer:   302 redirect to https://docs.example.com" -- match "$r/gateway.json" GET http://shop.example.com/docs/intro
expect "Header regexp decides between routes" 0 "route:    orders-write" \
    -- match -H 'Authorization: Bearer abc' "$r/gateway.json" POST http://shop.example.com/api/orders/42
expect "disabled route is never chosen" 0 "route:    fallback" \
    -- match "$r/gateway.json" GET 'http://shop.example.com/api/x?maintenance'
expect "no route exits 1" 1 "no route matches" -- match "$root/tests/data/github-api-routes.json" GET /nothing/here
expect "missing file exits 2" 2 "cannot read" -- match /nonexistent.json GET /
expect "bad --seed exits 2" 2 "--seed" -- match --seed x "$r/gateway.json" GET /
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
echo "1..$n"
