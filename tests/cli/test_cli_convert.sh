#!/usr/bin/env bash
# test_cli_convert.sh - TAP tests of `switchyard convert`: Spring Cloud
# Gateway application.yml / .properties samples (tests/data/scg/) become
# route documents that `switchyard check` accepts and `match` routes by;
# default-filters interleave into each route's filters; metadata is kept;
# placeholders resolve from --set, the environment and the file, and an
# unresolved one is reported with FILE:LINE; bad input is located.
# Usage: test_cli_convert.sh PATH/TO/switchyard SOURCE_ROOT
set -u
bin=${1:?switchyard binary}
root=${2:?source root}
d="$root/tests/data/scg"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset USERS_SERVICE ORDERS_URI SPRING_PROFILES_ACTIVE
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
same() { # name want got
    if [[ "$3" == "$2" ]]; then ok "$1"; else not_ok "$1" "got:" "$3" "want:" "$2"; fi
}
# jq-like: python expression over the document `d` read from file $1
jpy() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

"$bin" convert "$d/application.yml" >"$tmp/yml.json" 2>"$tmp/yml.err"
same "application.yml converts" 0 "$?"
same "switchyard check accepts it" "$tmp/yml.json: ok, 3 routes" "$("$bin" check "$tmp/yml.json" | head -1)"
"$bin" check --quiet "$tmp/yml.json" >/dev/null
same "switchyard check exits 0 on it" 0 "$?"
same "route ids in order" "orders rewrite users" "$(jpy "$tmp/yml.json" '" ".join(r["id"] for r in d)')"
same "default-filters interleave with the route's (SCG's order)" \
    '["AddResponseHeader=X-Gateway, edge", "StripPrefix=1", {"name": "AddRequestHeader", "args": {"name": "X-Trace", "value": "on"}}]' \
    "$(jpy "$tmp/yml.json" 'json.dumps(d[0]["filters"])')"
same "metadata kept, YAML integers as numbers" \
    '{"response-timeout": 2500, "connect-timeout": 500, "owner": "team-a"}' \
    "$(jpy "$tmp/yml.json" 'json.dumps(d[0]["metadata"])')"
same "order kept" "-1" "$(jpy "$tmp/yml.json" 'd[0]["order"]')"
same "\${backend.orders} resolved from the file's own property" \
    "http://127.0.0.1:9101" "$(jpy "$tmp/yml.json" 'd[0]["uri"]')"
same "\${USERS_SERVICE:users} takes its default" "lb://users" \
    "$(jpy "$tmp/yml.json" 'd[2]["uri"]')"
same "a list of args is a list, the expanded form kept" \
    '{"name": "Path", "args": {"patterns": ["/red/**", "/blue/**"]}}' \
    "$(jpy "$tmp/yml.json" 'json.dumps(d[1]["predicates"][0])')"
same "RewritePath's \${group} is a group reference, not a placeholder" \
    '/${rest} /$\{segment}' \
    "$(jpy "$tmp/yml.json" 'd[1]["filters"][3]["args"]["replacement"] + " " + d[1]["filters"][1].split(", ")[1]')"
same "a quoted value is kept as text" "on" \
    "$(jpy "$tmp/yml.json" 'd[0]["filters"][2]["args"]["value"]')"
same "what is not a route is named, not silently dropped" \
    "warning: $d/application.yml:14: spring.cloud.gateway.httpclient.pool: not converted (convert reads routes, default-filters and the httpclient timeouts)" \
    "$(grep '^warning' "$tmp/yml.err")"
same "httpclient.connect-timeout: the metadata of routes without their own" \
    "500 1000" \
    "$(jpy "$tmp/yml.json" 'str(d[0]["metadata"]["connect-timeout"]) + " " + str(d[1]["metadata"]["connect-timeout"])')"
same "the converted routes route" "route:    orders (order -1)" \
    "$("$bin" match "$tmp/yml.json" GET http://shop/orders/42 | head -1)"

USERS_SERVICE=people "$bin" convert "$d/application.yml" 2>/dev/null >"$tmp/env.json"
same "the environment resolves a placeholder" "lb://people" "$(jpy "$tmp/env.json" 'd[2]["uri"]')"
USERS_SERVICE=people "$bin" convert --set USERS_SERVICE=staff --set backend.orders=http://10.1.1.1:81 \
    "$d/application.yml" 2>/dev/null >"$tmp/set.json"
same "--set wins over the environment and the file" "lb://staff http://10.1.1.1:81" \
    "$(jpy "$tmp/set.json" 'd[2]["uri"] + " " + d[0]["uri"]')"
# a value given twice was taken and the first dropped (Spring reads a
# repeated --NAME as the list of both): refused, exit 2, naming it
"$bin" convert --set USERS_SERVICE=a --set USERS_SERVICE=b "$d/application.yml" >/dev/null 2>"$tmp/dup.err"
same "--set of one NAME twice exits 2 naming it" "2 1" "$? $(grep -c 'USERS_SERVICE' "$tmp/dup.err")"
"$bin" convert -o "$tmp/o1.json" -o "$tmp/o2.json" "$d/application.yml" >/dev/null 2>"$tmp/dup.err"
same "-o twice exits 2 naming it, nothing written" "2 1 no no" \
    "$? $(grep -c -- '-o given twice' "$tmp/dup.err") $([[ -e $tmp/o1.json ]] && echo yes || echo no) $([[ -e $tmp/o2.json ]] && echo yes || echo no)"
USERS_SERVICE=people "$bin" convert --no-env "$d/application.yml" 2>/dev/null >"$tmp/noenv.json"
same "--no-env leaves the environment out" "lb://users" "$(jpy "$tmp/noenv.json" 'd[2]["uri"]')"

"$bin" convert "$d/application.properties" >"$tmp/p.out" 2>"$tmp/p.err"
same "an unresolved placeholder fails" 1 "$?"
same "and is reported with FILE:LINE, nothing printed" \
    "$d/application.properties:4: spring.cloud.gateway.routes[0].uri: unresolved placeholder \${ORDERS_URI} (give it with --set NAME=VALUE or the environment)|0" \
    "$(cat "$tmp/p.err")|$(wc -c <"$tmp/p.out")"
"$bin" convert --keep-unresolved "$d/application.properties" >"$tmp/keep.json" 2>"$tmp/keep.err"
same "--keep-unresolved: converted, the text kept, a warning" \
    "0|\${ORDERS_URI}|1" \
    "$?|$(jpy "$tmp/keep.json" 'd[0]["uri"]')|$(grep -c '^warning: .*application.properties:4: .*ORDERS_URI' "$tmp/keep.err")"

ORDERS_URI=http://127.0.0.1:9101 "$bin" convert "$d/application.properties" >"$tmp/p.json" 2>/dev/null
same "application.properties converts and checks" "$tmp/p.json: ok, 2 routes" "$("$bin" check "$tmp/p.json" | head -1)"
same "properties: shortcut, expanded, args[key], continuation, order" \
    '[{"id": "orders", "uri": "http://127.0.0.1:9101", "predicates": ["Path=/orders/**"], "filters": ["AddResponseHeader=X-Gateway, edge", "StripPrefix=1"], "metadata": {"response-timeout": "2500"}}, {"id": "users", "uri": "http://127.0.0.1:9102", "predicates": [{"name": "Path", "args": {"pattern": "/users/{id}"}}, {"name": "Header", "args": {"header": "X-Tenant"}}], "filters": ["AddResponseHeader=X-Gateway, edge", {"name": "AddRequestHeader", "args": {"name": "X-User", "value": "{id}"}}], "order": 5}]' \
    "$(jpy "$tmp/p.json" 'json.dumps(d)')"

"$bin" convert "$d/webflux.yaml" >"$tmp/wf.json" 2>"$tmp/wf.err"
same "spring.cloud.gateway.server.webflux.routes converts" "$tmp/wf.json: ok, 1 route" "$("$bin" check "$tmp/wf.json" | head -1)"
same "webflux: a dotted YAML key, lists, nested metadata, YAML 1.1 booleans" \
    '{"id": "api", "uri": "http://127.0.0.1:9103", "predicates": ["Path=/api/{segment}", {"name": "Method", "args": {"methods": ["GET", "POST"]}}], "filters": ["AddResponseHeader=X-Edge, webflux", {"name": "SetPath", "args": {"template": "/v2/{segment}"}}], "metadata": {"owner": "x-version", "enabled": true, "labels": {"tier": "gold"}}}' \
    "$(jpy "$tmp/wf.json" 'json.dumps(d[0])')"
same "a profile's document is named as not converted" 1 \
    "$(grep -c "^warning: $d/webflux.yaml:24: document 2 is for profile prod" "$tmp/wf.err")"

"$bin" convert --profile prod "$d/webflux.yaml" >"$tmp/prod.json" 2>/dev/null
same "--profile prod: its document is read after the default one (its list replaces the list; default-filters stay)" \
    'prod-only ["AddResponseHeader=X-Edge, webflux"]' \
    "$(jpy "$tmp/prod.json" 'd[0]["id"] + " " + json.dumps(d[0]["filters"])' 2>&1)"

SPRING_PROFILES_ACTIVE=dev,prod "$bin" convert "$d/webflux.yaml" 2>/dev/null >"$tmp/envprod.json"
same "SPRING_PROFILES_ACTIVE makes a profile active, as in Spring Boot" \
    "prod-only" "$(jpy "$tmp/envprod.json" 'd[0]["id"]' 2>&1)"

# later files override earlier ones; a list replaces the whole list
cat >"$tmp/override.properties" <<'P'
spring.cloud.gateway.routes[0].id=only
spring.cloud.gateway.routes[0].uri=http://127.0.0.1:1
backend.orders=http://unused
P
"$bin" convert "$d/application.yml" "$tmp/override.properties" >"$tmp/o.json" 2>/dev/null
same "a later file's list replaces the earlier list" "only http://127.0.0.1:1 2" \
    "$(jpy "$tmp/o.json" 'd[0]["id"] + " " + d[0]["uri"] + " " + str(len(d[0]["filters"]))')"

cat >"$tmp/bad.yml" <<'Y'
spring:
  cloud:
    gateway:
      routes:
        - id: a
          uri: http://x
          predicate:
            - Path=/a
        - uri: http://y
          order: first
Y
"$bin" convert "$tmp/bad.yml" >/dev/null 2>"$tmp/bad.err"
same "bad routes fail" 1 "$?"
same "every error located" \
    "$tmp/bad.yml:7: spring.cloud.gateway.routes[0].predicate: not a route field (id, uri, predicates, filters, metadata, order, enabled)
$tmp/bad.yml:9: spring.cloud.gateway.routes[1]: no id (switchyard needs one; SCG would make up a random one)
$tmp/bad.yml:10: spring.cloud.gateway.routes[1].order: expected an integer, not \"first\"" \
    "$(cat "$tmp/bad.err")"
# SCG 4.2's enabled: false turns a route off; it stays in the document,
# disabled (what switchyard check and the router read as such)
cat >"$tmp/off.yml" <<'Y'
spring:
  cloud:
    gateway:
      routes:
        - id: off
          uri: http://x
          enabled: false
        - id: on
          uri: http://y
          enabled: "TRUE"
        - id: bad
          uri: http://z
          enabled: maybe
Y
"$bin" convert "$tmp/off.yml" >/dev/null 2>"$tmp/off.err"
same "an enabled that is not a boolean fails, located" \
    "1|$tmp/off.yml:13: spring.cloud.gateway.routes[2].enabled: expected true or false, not \"maybe\"" \
    "$?|$(cat "$tmp/off.err")"
head -n 10 "$tmp/off.yml" >"$tmp/off2.yml"
"$bin" convert "$tmp/off2.yml" >"$tmp/off.json" 2>/dev/null
same "enabled carried over as a boolean" "False True" \
    "$(jpy "$tmp/off.json" 'str(d[0]["enabled"]) + " " + str(d[1]["enabled"])')"
# spring.data.redis is not a route's: named in a warning, not left unread
cat >"$tmp/redis.yml" <<'Y'
spring:
  data:
    redis:
      host: redis.prod
      password: Sekr1t-redis
  cloud:
    gateway:
      routes:
        - id: rl
          uri: http://x
Y
"$bin" convert "$tmp/redis.yml" >/dev/null 2>"$tmp/redis.err"
same "spring.data.redis is warned about, located" \
    "0|1" "$?|$(grep -c "^warning: $tmp/redis.yml:3: spring.data.redis: not converted: .*--redis HOST:PORT" "$tmp/redis.err")"
same "the warning names the AUTH flags (the password goes in a file)" "1" \
    "$(grep -c "spring.data.redis: .*--redis-password-file FILE .*--redis-user NAME" "$tmp/redis.err")"
same "the warning shows no password" "0" "$(grep -c "Sekr1t" "$tmp/redis.err")"
# x-forwarded.*: SCG 4.3.5+ sends X-Forwarded-* and Forwarded only with
# trusted-proxies set; the mini-gateway all of them with --trusted-proxies,
# none without. Turning one off is refused when the files set
# trusted-proxies, warned about (no effect) when they do not.
cat >"$tmp/xf.yml" <<'Y'
spring:
  cloud:
    gateway:
      x-forwarded:
        enabled: false
        prefix-append: false
      forwarded:
        by:
          enabled: true
      routes:
        - id: r
          uri: http://x
Y
"$bin" convert "$tmp/xf.yml" >/dev/null 2>"$tmp/xf.err"
same "x-forwarded.* off without trusted-proxies: converted, warned, located" \
    "0|3" "$?|$(grep -c "^warning: $tmp/xf.yml:\(5\|6\|9\): .*: no effect: without trusted-proxies" "$tmp/xf.err")"
sed 's/^      routes:/      trusted-proxies: 10\\..*\n      routes:/' "$tmp/xf.yml" >"$tmp/xft.yml"
"$bin" convert "$tmp/xft.yml" >/dev/null 2>"$tmp/xft.err"
same "x-forwarded.* off with trusted-proxies: refused, located" \
    "1|3" "$?|$(grep -c "^$tmp/xft.yml:\(5\|6\|9\): spring.cloud.gateway.\(x-\)\?forwarded.*switchyard does not run this setting" "$tmp/xft.err")"
same "trusted-proxies: named with the gateway's flag" "1" \
    "$(grep -c "^warning: $tmp/xft.yml:10: spring.cloud.gateway.trusted-proxies: not converted: .*--trusted-proxies '10[\\]\\.\\.\\*'" "$tmp/xft.err")"
printf 'spring:\n  cloud: [a\n' >"$tmp/syntax.yml"
"$bin" convert "$tmp/syntax.yml" >/dev/null 2>"$tmp/syn.err"
same "a YAML syntax error fails, with its line" "1|1" \
    "$?|$(grep -c "^$tmp/syntax.yml:[0-9]*: column [0-9]*: YAML: " "$tmp/syn.err")"
printf 'spring.cloud.gateway.routes[0].id=a\nspring.cloud.gateway.routes[0].uri=http://a\nspring.cloud.gateway.routes[2].id=c\n' >"$tmp/gap.properties"
"$bin" convert "$tmp/gap.properties" >/dev/null 2>"$tmp/gap.err"
same "a gap in list indexes is located" \
    "$tmp/gap.properties:3: spring.cloud.gateway.routes[2]: the list has no element [1] (indexes must run from 0 without gaps)" \
    "$(cat "$tmp/gap.err")"
echo 'server.port=1' >"$tmp/none.properties"
"$bin" convert "$tmp/none.properties" >/dev/null 2>&1
same "no routes at all is an error" 1 "$?"
"$bin" convert "$tmp/missing.yml" >/dev/null 2>&1
same "an unreadable file exits 2" 2 "$?"
"$bin" convert "$tmp/o.json" >/dev/null 2>&1
same "a file that is not .yml/.yaml/.properties fails" 1 "$?"
# check reads Spring Boot files through the same conversion
same "check application.yml: converted, then checked" \
    "$d/application.yml: ok, 3 routes|0" \
    "$("$bin" check "$d/application.yml" | grep ': ok,')|$("$bin" check -q "$d/application.yml" >/dev/null; echo $?)"
"$bin" check "$d/application.properties" >"$tmp/chk.out" 2>&1
same "check of a file that does not convert: 1, with FILE:LINE" \
    "1|$d/application.properties:4: spring.cloud.gateway.routes[0].uri: unresolved placeholder \${ORDERS_URI} (give it with --set NAME=VALUE or the environment)" \
    "$?|$(cat "$tmp/chk.out")"
same "match reads application.yml through the conversion" \
    "route:    orders (order -1)" \
    "$("$bin" match "$d/application.yml" GET http://shop/orders/42 2>/dev/null | head -1)"
same "diff of application.yml and its converted document: nothing differs" \
    "3 unchanged" "$("$bin" diff "$d/application.yml" "$tmp/yml.json" 2>/dev/null)"
echo "1..$n"
