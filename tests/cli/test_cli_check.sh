#!/usr/bin/env bash
# test_cli_check.sh - TAP tests of `switchyard check` and `--version`:
# exit codes (0 valid, 1 invalid, 2 usage/unreadable) and exact lines.
# Usage: test_cli_check.sh PATH/TO/switchyard SOURCE_ROOT
set -u
bin=${1:?switchyard binary}
root=${2:?source root}
data="$root/tests/data"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
    n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"
    shift
    for l in "$@"; do echo "# $l"; done
}

# run NAME WANT_STATUS WANT_STDOUT [ARGS...]: stdout compared exactly
run() {
    local name=$1 want_rc=$2 want_out=$3
    shift 3
    local out rc
    out=$(cd "$tmp" && "$bin" "$@" 2>"$tmp/stderr")
    rc=$?
    if [[ $rc -ne $want_rc ]]; then
        not_ok "$name" "exit $rc, want $want_rc" "stdout: $out" \
            "stderr: $(cat "$tmp/stderr")"
    elif [[ "$out" != "$want_out" ]]; then
        not_ok "$name" "stdout:" "$out" "want:" "$want_out"
    else
        ok "$name"
    fi
}

# uris.json's routes have no predicates: each would shadow the ones after
# it; a Path of its own per route keeps good.json free of warnings
sed -E 's/\{"id": "([^"]+)"/{"id": "\1", "predicates": ["Path=\/\1"]/' \
    "$data/valid/uris.json" >"$tmp/good.json"
# what `check` says of good.json: it is valid, and what the host must run
hostrun() {
    printf '%s\n' "$1: host-run [forward:]: 'forward'" \
        "$1: host-run [https:]: 'https'" \
        "$1: host-run [ws:]: 'ws', 'lb-ws'" "$1: host-run [wss:]: 'wss'"
}
good_ok="good.json: ok, 12 routes
$(hostrun good.json)"
cp "$data/valid/empty-array.json" "$tmp/empty.json"
cat >"$tmp/bad.json" <<'JSON'
{"version": "1", "routes": [
  {"id": "a", "uri": "http://x", "predicates": ["Path=/a"]},
  {"id": "b", "uri": "ftp://x"},
  {"id": "a", "uri": "http://y"},
  {"id": "c", "uri": "http://x", "predicates": [{"name": "Cookie", "args": {"name": "n"}}]},
  {"id": "d", "uri": "http://x", "filters": ["StripPrefix=-1"]}
]}
JSON
printf '[\n  {"id": "a",\n   "uri" "x"}\n]\n' >"$tmp/syntax.json"
printf '[] []' >"$tmp/trailing.json"
printf '"text"' >"$tmp/shape.json"

run "--version prints the version" 0 "switchyard 0.3.0" --version
run "valid file: an ok line and its host-run items, exit 0" 0 "$good_ok" \
    check good.json
run "several valid files" 0 "$good_ok
empty.json: ok, 0 routes" check good.json empty.json
run "--quiet prints nothing for valid files" 0 "" check --quiet good.json
run "every bad route is listed with its path, exit 1" 1 \
"bad.json: routes[1].uri: unsupported uri scheme 'ftp' (use http, https, ws, wss, lb, forward or no)
bad.json: routes[2].id: route id 'a' is already used
bad.json: routes[3].predicates[0].args.regexp: Cookie: regexp: missing required argument
bad.json: routes[4].filters[0]: StripPrefix: parts: must be an integer from 0 to 2147483647" \
    check bad.json
run "syntax errors give line and column" 1 \
    "syntax.json: line 3, column 10: JSON syntax error: unexpected '\"'" \
    check syntax.json
run "trailing data is a syntax error" 1 \
    "trailing.json: line 1, column 4: JSON syntax error: unexpected data after the document" \
    check trailing.json
run "document-level errors have no path" 1 \
    "shape.json: a document is an array of routes or an object with \"routes\"" \
    check shape.json
run "a bad file among good ones fails the run" 1 "$good_ok
trailing.json: line 1, column 4: JSON syntax error: unexpected data after the document
empty.json: ok, 0 routes" check good.json trailing.json empty.json
run "standard input with -" 0 "-: ok, 12 routes
$(hostrun -)" check - <"$tmp/good.json"

run "unreadable file exits 2" 2 "" check missing.json
if grep -q "missing.json" "$tmp/stderr"; then
    ok "unreadable file is named on stderr"
else
    not_ok "unreadable file is named on stderr" "$(cat "$tmp/stderr")"
fi
run "unreadable file wins over invalid ones" 2 \
    "trailing.json: line 1, column 4: JSON syntax error: unexpected data after the document" \
    check trailing.json missing.json
run "check without files is a usage error" 2 "" check
run "unknown option is a usage error" 2 "" check --bogus good.json
run "unknown command is a usage error" 2 "" frobnicate
run "no command is a usage error" 2 ""
if "$bin" check --help | grep -q "usage: switchyard check"; then
    ok "check --help prints usage"
else
    not_ok "check --help prints usage"
fi

# Every corpus file: valid ones pass, invalid ones fail with their path.
for f in "$data"/valid/*.json; do
    "$bin" check --quiet "$f" >/dev/null 2>&1
    rc=$?
    if [[ $rc -eq 0 ]]; then ok "corpus valid/$(basename "$f")"
    else not_ok "corpus valid/$(basename "$f")" "exit $rc"; fi
done
# Shadowed and unreachable routes: warnings, exit 0 unless --fail-on-warning
cat >"$tmp/shadow.json" <<'JSON'
{"version": "1", "routes": [
  {"id": "api", "uri": "http://x", "predicates": ["Path=/api/**"]},
  {"id": "users", "uri": "http://x", "predicates": ["Path=/api/users/{id}", "Method=GET"]},
  {"id": "a", "uri": "http://x", "predicates": ["Path=/a/**"]},
  {"id": "b", "uri": "http://x", "predicates": ["Path=/b/**", "Method=GET,POST"]},
  {"id": "ab", "uri": "http://x", "predicates": ["Path=/a/x,/b/y", "Method=GET"]},
  {"id": "debug", "uri": "http://x", "predicates": ["Path=/c/**", "Header=X-Debug"]},
  {"id": "c", "uri": "http://x", "predicates": ["Path=/c/d"]},
  {"id": "never", "uri": "http://x", "predicates": ["Path=/n", "Method=GET", "Method=PUT"]}
]}
JSON
shadow_out="shadow.json: routes[1]: warning: route 'users' is shadowed by 'api' (routes[0]): every request it matches goes to 'api'
shadow.json: routes[4]: warning: route 'ab' is shadowed by 'a' (routes[2]) and 'b' (routes[3]): every request it matches goes to 'a' or 'b'
shadow.json: routes[7]: warning: route 'never' is unreachable: it can match no request: no method passes its Method predicates
shadow.json: ok, 8 routes"
run "shadowed routes are warnings naming both routes, exit 0" 0 \
    "$shadow_out" check shadow.json
run "--fail-on-warning makes a warning exit 1" 1 "$shadow_out" \
    check --fail-on-warning shadow.json
run "no warning for valid, unshadowed files with --fail-on-warning" 0 \
    "$good_ok" check --fail-on-warning good.json

while IFS=$'\t' read -r file code path lc; do
    [[ $file == \#* || -z $file ]] && continue
    out=$("$bin" check "$data/invalid/$file" 2>&1)
    rc=$?
    if [[ $path == '""' ]]; then
        want="$data/invalid/$file: "
    else
        want="$data/invalid/$file: $path: "
    fi
    [[ -n ${lc:-} ]] && want="$data/invalid/$file: line ${lc%%:*}, column ${lc##*:}: "
    if [[ $rc -eq 1 && $out == "$want"* ]]; then
        ok "corpus invalid/$file ($code)"
    else
        not_ok "corpus invalid/$file ($code)" "exit $rc" "$out" "want prefix: $want"
    fi
done <"$data/invalid/expect.tsv"

# Run or refuse: what each host runs (docs/policies.md)
cat >"$tmp/policies.json" <<'JSON'
{"routes": [
  {"id": "orders", "uri": "http://o", "predicates": ["Path=/o/**"],
   "filters": [{"name": "CircuitBreaker", "args": {"name": "orders", "fallbackUri": "forward:/fallback"}},
               "Retry=3, BAD_GATEWAY, GET, 10ms, 50ms, 2, false, 0.5, 2s"]},
  {"id": "fallback", "uri": "forward:/down", "predicates": ["Path=/fallback"]},
  {"id": "limited", "uri": "http://l", "predicates": ["Path=/l/**"],
   "filters": [{"name": "RequestRateLimiter", "args": {"redis-rate-limiter.replenishRate": "10",
     "key-resolver": "#{@remoteAddrKeyResolver}"}}]}
]}
JSON
run "check lists every host-run item and the routes using it" 0 \
"policies.json: ok, 3 routes
policies.json: host-run [RequestRateLimiter]: 'limited'
policies.json: host-run [CircuitBreaker]: 'orders'
policies.json: host-run [Retry]: 'orders'
policies.json: host-run [forward:]: 'fallback'" check policies.json
run "--host given twice exits 2 (the first was dropped)" 2 "" \
    check --host nginx --host gateway policies.json
run "--host gateway: the mini-gateway runs them all" 0 \
"policies.json: ok, 3 routes
policies.json: host-run [RequestRateLimiter]: 'limited'
policies.json: host-run [CircuitBreaker]: 'orders'
policies.json: host-run [Retry]: 'orders'
policies.json: host-run [forward:]: 'fallback'" \
    check --host gateway policies.json
run "--host nginx: the nginx module runs these too, not Retry's backoff" 1 \
"policies.json: routes[0].filters[1]: Retry: backoff: host 'nginx' does not wait between tries (it retries at once); remove backoff" \
    check --quiet --host nginx policies.json
# a CircuitBreaker after a Retry: SCG runs it on every try, the hosts once
# around them all (refused, located)
cat >"$tmp/retry-first.json" <<'JSON'
[{"id": "rc", "uri": "http://o", "filters": ["Retry=2", "CircuitBreaker=rc"]}]
JSON
run "a CircuitBreaker after a Retry is refused" 1 \
"retry-first.json: [0].filters[1]: CircuitBreaker: after a Retry, SCG runs the breaker on every try; switchyard runs it once around all the tries: list the CircuitBreaker before the Retry" \
    check --quiet retry-first.json
cat >"$tmp/gateway-only.json" <<'JSON'
{"routes": [
  {"id": "moved", "uri": "http://m", "predicates": ["Path=/m/**"],
   "filters": ["RewriteLocationResponseHeader"]},
  {"id": "open", "uri": "http://c", "predicates": ["Path=/c/**"],
   "metadata": {"cors": {"allowedOrigins": "*"}}}
]}
JSON
run "--host nginx: what nginx does not run is refused where it is" 1 \
"gateway-only.json: routes[0].filters[0]: RewriteLocationResponseHeader: host 'nginx' does not run this filter
gateway-only.json: routes[1].metadata.cors: metadata.cors: host 'nginx' does not run this metadata key" \
    check --quiet --host nginx gateway-only.json
# --host gateway reads the cors metadata as the gateway does at apply
cat >"$tmp/cors.json" <<'JSON'
{"routes": [
  {"id": "open", "uri": "http://c", "predicates": ["Path=/open"], "metadata": {"cors": {"allowedOrigins": "*"}}},
  {"id": "typo", "uri": "http://c", "predicates": ["Path=/typo"], "metadata": {"cors": {"allowedOrigin": "*"}}},
  {"id": "cred", "uri": "http://c", "predicates": ["Path=/cred"], "metadata": {"cors": {"allowedOrigins": "*", "allowCredentials": true}}}
]}
JSON
run "--host gateway: a cors the gateway refuses is refused" 1 \
"cors.json: routes[1].metadata.cors: cors: unknown key 'allowedOrigin' (allowedOrigins, allowedOriginPatterns, allowedMethods, allowedHeaders, exposedHeaders, allowCredentials, maxAge)
cors.json: routes[2].metadata.cors: cors: allowCredentials true cannot go with allowedOrigins '*' (list the origins, or use allowedOriginPatterns)" \
    check --quiet --host gateway cors.json
run "--host with an unknown host is a usage error" 2 "" \
    check --host iis policies.json
# The filters the mini-gateway runs itself (examples/mini-gateway/
# host_filters.c, compiled into both): --host gateway accepts exactly them
cat >"$tmp/host-filters.json" <<'JSON'
{"routes": [
  {"id": "sec", "uri": "http://s", "predicates": ["Path=/s/**"],
   "filters": ["SecureHeaders", {"name": "SecureHeaders", "args": {"frameOptions": "SAMEORIGIN"}}]},
  {"id": "fb", "uri": "http://f", "predicates": ["Path=/f/**"],
   "filters": [{"name": "FallbackHeaders", "args": {"executionExceptionTypeHeaderName": "X-Type"}}]},
  {"id": "body", "uri": "http://b", "predicates": ["Path=/b/**"],
   "filters": ["CacheRequestBody=java.lang.String"]},
  {"id": "cache", "uri": "http://c", "predicates": ["Path=/c/**"],
   "filters": ["LocalResponseCache=30m,500MB"]}
]}
JSON
run "--host gateway: SecureHeaders, FallbackHeaders, CacheRequestBody, LocalResponseCache run there" 0 \
"host-filters.json: ok, 4 routes" check --host gateway host-filters.json
run "--host nginx: the gateway's own filters are refused there, naming the host" 1 \
"host-filters.json: routes[0].filters[0]: SecureHeaders: host 'nginx' does not run this filter (the mini-gateway does)
host-filters.json: routes[0].filters[1]: SecureHeaders: host 'nginx' does not run this filter (the mini-gateway does)
host-filters.json: routes[1].filters[0]: FallbackHeaders: host 'nginx' does not run this filter (the mini-gateway does)
host-filters.json: routes[2].filters[0]: CacheRequestBody: host 'nginx' does not run this filter (the mini-gateway does)
host-filters.json: routes[3].filters[0]: LocalResponseCache: host 'nginx' does not run this filter (the mini-gateway does)" \
    check --quiet --host nginx host-filters.json
cat >"$tmp/host-filters-bad.json" <<'JSON'
{"routes": [
  {"id": "sec", "uri": "http://s", "predicates": ["Path=/s/**"],
   "filters": [{"name": "SecureHeaders", "args": {"frameOption": "DENY"}}]},
  {"id": "fb", "uri": "http://f", "predicates": ["Path=/f/**"],
   "filters": [{"name": "FallbackHeaders", "args": {"executionExceptionTypeHeaderName": "X Type"}}]},
  {"id": "body", "uri": "http://b", "predicates": ["Path=/b/**"],
   "filters": ["CacheRequestBody=java lang"]},
  {"id": "cache", "uri": "http://c", "predicates": ["Path=/c/**"],
   "filters": ["LocalResponseCache=30x"]}
]}
JSON
run "--host gateway: their args checked as the gateway checks them" 1 \
"host-filters-bad.json: routes[0].filters[0].args.frameOption: unknown argument
host-filters-bad.json: routes[1].filters[0].args.executionExceptionTypeHeaderName: must be a header name
host-filters-bad.json: routes[2].filters[0]: bodyClass: must be a Java class name (java.lang.String)
host-filters-bad.json: routes[3].filters[0]: timeToLive: must be a duration above 0 (30s, 5m, 500ms, or milliseconds)" \
    check --quiet --host gateway host-filters-bad.json
printf '%s' '[{"id": "p", "uri": "http://p", "filters": ["RewriteRequestParameter=campaign"]}]' \
    >"$tmp/rrp.json"
run "RewriteRequestParameter: a missing replacement refused at its path" 1 \
"rrp.json: [0].filters[0]: RewriteRequestParameter: missing required argument 'replacement'" \
    check --quiet rrp.json
cat >"$tmp/typos.json" <<'JSON'
[{"id": "t", "uri": "http://t", "filters": [
  {"name": "Retry", "args": {"retires": "3"}},
  {"name": "Retry", "args": {"statuses": "BAD_GATEWY"}},
  {"name": "RequestRateLimiter", "args": {"redis-rate-limiter.replenishRate": "1", "redis-rate-limiter.burstCapacity": "-5"}},
  {"name": "CircuitBreaker", "args": {"fallbackUri": "forwrd:/x"}},
  {"name": "RequestRateLimiter", "args": {"redis-rate-limiter.replenishRate": "1", "key-resolver": "#{@header:X User}"}}]}]
JSON
run "typos in policy args are refused at their path" 1 \
"typos.json: [0].filters[0].args.retires: Retry: retires: unknown argument: did you mean retries?
typos.json: [0].filters[1].args.statuses: Retry: statuses: 'BAD_GATEWY': unknown HTTP status name
typos.json: [0].filters[2].args.redis-rate-limiter.burstCapacity: RequestRateLimiter: redis-rate-limiter.burstCapacity: -5 is out of range 0..2147483647
typos.json: [0].filters[3].args.fallbackUri: CircuitBreaker: fallbackUri: 'forwrd:/x': only forward:/path is run (the request is dispatched again to that path)
typos.json: [0].filters[4].args.key-resolver: RequestRateLimiter: key-resolver: #{@header:NAME}: NAME must be a header name (an HTTP token: no spaces)" \
    check --quiet typos.json

cat >"$tmp/unread.json" <<'JSON'
[{"id": "k", "uri": "http://k", "predicates": ["Path=/u/{user}"], "filters": [
  {"name": "RequestRateLimiter", "args": {"redis-rate-limiter.replenishRate": "1", "key-resolver": "#{@pathVariable:usr}"}}]},
 {"id": "t", "uri": "http://t", "metadata": {"response-timeout": 1e16, "connect-timeout": 1000000000000000}}]
JSON
run "a path variable no pattern captures, a timeout past 2^53: refused at their path" 1 \
"unread.json: [0].filters[0].args.key-resolver: RequestRateLimiter: key-resolver: #{@pathVariable:usr}: no Path or Host pattern of the route captures {usr}: every request would get the empty key (its status), never a limit
unread.json: [1].metadata.response-timeout: response-timeout out of range as a JSON number: at most 9007199254740992 (2^53, exact in a double); write a larger one as a string" \
    check --quiet unread.json

echo "1..$n"
[[ $failed -eq 0 ]]
