#!/usr/bin/env bash
# test_cli_diff.sh - TAP tests of `switchyard diff`: added, removed,
# updated with the changed parts, unchanged count, the --json shape, and
# that the same route spelled differently is unchanged.
# Usage: test_cli_diff.sh PATH/TO/switchyard SOURCE_ROOT
set -u
bin=${1:?switchyard binary}
root=${2:?source root}
r="$root/examples/routes"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
same() { # name want got
    if [[ "$3" == "$2" ]]; then ok "$1"; else not_ok "$1" "got:" "$3" "want:" "$2"; fi
}

same "text diff of the example gateway" "- legacy-docs
- maintenance
~ orders-write (predicates)
~ search-new (predicates)
~ search-old (predicates)
3 unchanged" "$("$bin" diff "$r/gateway.json" "$r/gateway-v2.json")"

same "json diff of the example gateway" \
    '{"added":[],"removed":["legacy-docs","maintenance"],"updated":[{"id":"orders-write","changed":["predicates"]},{"id":"search-new","changed":["predicates"]},{"id":"search-old","changed":["predicates"]}],"reordered":[],"unchanged":3}' \
    "$("$bin" diff --json "$r/gateway.json" "$r/gateway-v2.json")"

cat >"$tmp/a.json" <<'JSON'
[{"id":"r","uri":"http://a:80","order":1,"predicates":["Path=/a/**","Method=GET"],
  "filters":["StripPrefix=1"],"metadata":{"k":"v"}},
 {"id":"gone","uri":"http://g:80"}]
JSON
cat >"$tmp/b.json" <<'JSON'
{"version":"2","routes":[
 {"metadata":{"k":"w"},"order":3,"uri":"http://b:80","id":"r",
  "predicates":[{"name":"Path","args":{"patterns":"/a/**"}},{"name":"Method","args":{"methods":["get"]}}],
  "filters":[{"name":"StripPrefix","args":{"parts":2}}]},
 {"id":"new","uri":"lb://svc"}]}
JSON
cat >"$tmp/a2.json" <<'JSON'
[{"predicates":[{"name":"Path","args":{"_genkey_0":"/a/**"}},{"name":"Method","args":{"methods":"GET"}}],
  "uri":"http://a","metadata":{"k":"v"},"filters":[{"name":"StripPrefix"}],"order":1,"id":"r"},
 {"id":"gone","uri":"http://g"}]
JSON
same "every part of a route can change" \
    '{"added":["new"],"removed":["gone"],"updated":[{"id":"r","changed":["filters","uri","metadata","order"]}],"reordered":[],"unchanged":0}' \
    "$("$bin" diff --json "$tmp/a.json" "$tmp/b.json")"
same "the same routes spelled differently are unchanged" \
    '{"added":[],"removed":[],"updated":[],"reordered":[],"unchanged":2}' \
    "$("$bin" diff --json "$tmp/a.json" "$tmp/a2.json")"
"$bin" diff "$tmp/a.json" >/dev/null 2>&1
same "one file is a usage error" 2 "$?"
echo '[{"id":1}]' >"$tmp/bad.json"
"$bin" diff "$tmp/a.json" "$tmp/bad.json" >/dev/null 2>"$tmp/err"
same "an invalid document exits 2" 2 "$?"
same "and says where" "$tmp/bad.json: [0].id: id must be a string" "$(head -1 "$tmp/err")"
# diff --requests: replayed traffic, three request formats, --json
cat >"$tmp/old.json" <<'JSON'
{"version":"1","routes":[
 {"id":"users","uri":"http://u:1","predicates":["Path=/api/users/**"]},
 {"id":"api","uri":"http://a:1","predicates":["Path=/api/**"]},
 {"id":"gray","uri":"lb://svc","predicates":["Path=/svc/**"],"metadata":{"version-default":"oldest"}},
 {"id":"gone","uri":"http://g:1","predicates":["Path=/old/**"]}]}
JSON
cat >"$tmp/new.json" <<'JSON'
{"version":"2","routes":[
 {"id":"api","uri":"http://a:1","predicates":["Path=/api/**"]},
 {"id":"users","uri":"http://u:1","predicates":["Path=/api/users/**"]},
 {"id":"gray","uri":"lb://svc","predicates":["Path=/svc/**"],"metadata":{"version-default":"2"}},
 {"id":"fresh","uri":"http://f:1","predicates":["Path=/new/**"]}]}
JSON
cat >"$tmp/inst.json" <<'JSON'
{"services":{"svc":[{"id":"svc-1","host":"10.0.0.1","port":80,"metadata":{"version":"1"}},
                    {"id":"svc-2","host":"10.0.0.2","port":80,"metadata":{"version":"2"}}]}}
JSON
printf 'GET /api/users/1\nGET /api/orders\tX-A: 1\nPOST /old/x?y=1\n# a comment\n\nGET http://h.example/new/a\nGET /svc/a\nGET /svc/b\tversion: 1\n' >"$tmp/plain.txt"
same "replay: re-routed requests, then the summary by route pair" \
"GET /api/users/1: users -> api [upstream http://u:1 -> http://a:1]
POST /old/x?y=1: gone -> (no route)
GET http://h.example/new/a: (no route) -> fresh
GET /svc/a: gray -> gray [instance svc-1 -> svc-2]
4 of 6 requests re-routed:
       1  users -> api
       1  gone -> (no route)
       1  (no route) -> fresh
       1  gray -> gray" \
    "$("$bin" diff --requests "$tmp/plain.txt" --instances "$tmp/inst.json" "$tmp/old.json" "$tmp/new.json")"
cat >"$tmp/nginx.log" <<'LOG'
10.0.0.1 - - [10/Oct/2024:13:55:36 +0000] "GET /api/users/7 HTTP/1.1" 200 512 "-" "curl/8.0"
10.0.0.2 - - [10/Oct/2024:13:55:37 +0000] "\x16\x03\x01" 400 150 "-" "-"
10.0.0.3 - bob [10/Oct/2024:13:55:38 +0000] "GET /api/orders?x=1 HTTP/1.1" 200 10 "http://r/" "ua"
LOG
same "replay --json of an nginx combined log (a line without a request skipped)" \
    '{"requests":2,"changed":[{"method":"GET","url":"/api/users/7","line":1,"old_route":"users","new_route":"api","old_upstream":"http://u:1","new_upstream":"http://a:1","old_instance":null,"new_instance":null}],"summary":[{"old_route":"users","new_route":"api","count":1}]}' \
    "$("$bin" diff --requests "$tmp/nginx.log" --json "$tmp/old.json" "$tmp/new.json" 2>"$tmp/err")"
same "and says what it skipped" "$tmp/nginx.log: 1 line without a request skipped (first: line 2)" "$(cat "$tmp/err")"
printf '{"time":"2024-10-10T13:55:36Z","method":"GET","path":"/api/users/2","query":"a=1","status":200,"route":"users","trace_id":"0af7651916cd43dd8448eb211c80319c"}\n{"method":"DELETE","path":"/old/1"}\n' >"$tmp/access.log"
same "replay of the mini-gateway access log, null for no route" \
    '{"requests":2,"changed":[{"method":"GET","url":"/api/users/2?a=1","line":1,"old_route":"users","new_route":"api","old_upstream":"http://u:1","new_upstream":"http://a:1","old_instance":null,"new_instance":null},{"method":"DELETE","url":"/old/1","line":2,"old_route":"gone","new_route":null,"old_upstream":"http://g:1","new_upstream":null,"old_instance":null,"new_instance":null}],"summary":[{"old_route":"users","new_route":"api","count":1},{"old_route":"gone","new_route":null,"count":1}]}' \
    "$("$bin" diff --requests "$tmp/access.log" --json "$tmp/old.json" "$tmp/new.json")"
# lines the gateway writes for requests it answered without routing them:
# CONNECT (405, path null) and OPTIONS * (400, path "*"); they made the
# whole replay exit 2 ("needs method and path") on a real access log
printf '{"method":"GET","path":"/api/users/2","query":null}\n{"method":"CONNECT","path":null,"query":null,"status":405}\n{"method":"OPTIONS","path":"*","query":null,"status":400}\n{"method":"DELETE","path":"/old/1"}\n' >"$tmp/unrouted.log"
same "replay of an access log with CONNECT and OPTIONS * lines: skipped" \
    '2 of 2 requests re-routed:' \
    "$("$bin" diff --requests "$tmp/unrouted.log" "$tmp/old.json" "$tmp/new.json" 2>"$tmp/err" | grep 'requests re-routed')"
same "and counted as lines without a request" "$tmp/unrouted.log: 2 lines without a request skipped (first: line 2)" "$(cat "$tmp/err")"
printf '{"method":"GET","path":"api/x"}\n' >"$tmp/relpath.log"
"$bin" diff --requests "$tmp/relpath.log" "$tmp/old.json" "$tmp/new.json" >/dev/null 2>"$tmp/err"
same "a path the gateway never logs is still an error" "2 yes" "$? $(grep -q 'relpath.log:1: needs' "$tmp/err" && echo yes)"
# a Host up to the gateway's header room is replayed: one over 255 bytes
# (a 253-byte name and a port) was dropped, and its Host route not seen
long="$(printf 'a%.0s' $(seq 250)).example"
printf '[{"id":"long","uri":"http://x:1","predicates":["Host=%s"]}]' "$long" >"$tmp/hold.json"
printf '[]' >"$tmp/hnew.json"
printf '{"method":"GET","path":"/a","host":"%s:8080"}\n' "$long" >"$tmp/longhost.log"
same "replay of an access log line with a 263-byte host" \
    "GET /a: long -> (no route)" \
    "$("$bin" diff --requests "$tmp/longhost.log" "$tmp/hold.json" "$tmp/hnew.json" | head -1)"
# a header written after a space, not a tab, was dropped and the request
# replayed without it; a trailing HTTP version is still taken
printf 'GET /api/users/1 HTTP/1.1\nGET /api/orders X-A: 1\n' >"$tmp/spaced.txt"
"$bin" diff --requests "$tmp/spaced.txt" "$tmp/old.json" "$tmp/new.json" >/dev/null 2>"$tmp/err"
same "text after the URL exits 2" 2 "$?"
same "and names the line" "$tmp/spaced.txt:2: text after the URL (a header goes after a tab) (read as plain lines)" "$(cat "$tmp/err")"
# nginx's stock "main" format is combined and "$http_x_forwarded_for"
# after it: the User-Agent is the field after the referer, not the last
printf '10.0.0.1 - - [10/Oct/2024:13:55:36 +0000] "GET /m/a HTTP/1.1" 200 5 "-" "curl/8.0" "10.9.9.9"\n' >"$tmp/main.log"
printf '[{"id":"curl","uri":"http://c:1","predicates":["Path=/m/**","Header=User-Agent,curl/.*"]},{"id":"rest","uri":"http://r:1","predicates":["Path=/m/**"]}]' >"$tmp/ua-old.json"
printf '[{"id":"rest","uri":"http://r:1","predicates":["Path=/m/**"]}]' >"$tmp/ua-new.json"
same "replay of nginx's main format reads the User-Agent, not X-Forwarded-For" \
    "GET /m/a: curl -> rest [upstream http://c:1 -> http://r:1]" \
    "$("$bin" diff --requests "$tmp/main.log" "$tmp/ua-old.json" "$tmp/ua-new.json" | head -1)"
# the gateway logs the Host header as sent (with its port) and matches
# Host routes without the port: the replay does the same
printf '[{"id":"hosted","uri":"http://x:1","predicates":["Host=h.example"]}]' >"$tmp/ho.json"
printf '{"method":"GET","path":"/a","host":"h.example:8080"}\n{"method":"GET","path":"/b","host":"[::1]:8080"}\n' >"$tmp/hostport.log"
same "replay of an access log host with a port, as the gateway matched it" \
    "GET /a: hosted -> (no route)" \
    "$("$bin" diff --requests "$tmp/hostport.log" "$tmp/ho.json" "$tmp/hnew.json" | head -1)"
printf 'GET /a\nGET\n' >"$tmp/badreq.txt"
"$bin" diff --requests "$tmp/badreq.txt" "$tmp/old.json" "$tmp/new.json" >/dev/null 2>"$tmp/err"
same "a bad request line exits 2" 2 "$?"
same "and names the file and line" "$tmp/badreq.txt:2: expected METHOD URL (read as plain lines)" "$(cat "$tmp/err")"
# a one-value flag given twice was taken and its first value dropped
"$bin" diff --requests "$tmp/badreq.txt" --requests "$tmp/plain.txt" "$tmp/old.json" "$tmp/new.json" >/dev/null 2>"$tmp/err"
same "--requests twice exits 2" "2 yes" "$? $(grep -q -- '--requests' "$tmp/err" && echo yes)"
"$bin" diff --requests "$tmp/plain.txt" --instances "$tmp/inst.json" --instances "$tmp/inst.json" "$tmp/old.json" "$tmp/new.json" >/dev/null 2>"$tmp/err"
same "--instances twice exits 2" "2 yes" "$? $(grep -q -- '--instances' "$tmp/err" && echo yes)"
echo "1..$n"
