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
    '{"added":[],"removed":["legacy-docs","maintenance"],"updated":[{"id":"orders-write","changed":["predicates"]},{"id":"search-new","changed":["predicates"]},{"id":"search-old","changed":["predicates"]}],"unchanged":3}' \
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
    '{"added":["new"],"removed":["gone"],"updated":[{"id":"r","changed":["filters","uri","metadata","order"]}],"unchanged":0}' \
    "$("$bin" diff --json "$tmp/a.json" "$tmp/b.json")"
same "the same routes spelled differently are unchanged" \
    '{"added":[],"removed":[],"updated":[],"unchanged":2}' \
    "$("$bin" diff --json "$tmp/a.json" "$tmp/a2.json")"
"$bin" diff "$tmp/a.json" >/dev/null 2>&1
same "one file is a usage error" 2 "$?"
echo '[{"id":1}]' >"$tmp/bad.json"
"$bin" diff "$tmp/a.json" "$tmp/bad.json" >/dev/null 2>"$tmp/err"
same "an invalid document exits 2" 2 "$?"
same "and says where" "$tmp/bad.json: [0].id: id must be a string" "$(head -1 "$tmp/err")"
echo "1..$n"
