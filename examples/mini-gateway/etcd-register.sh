#!/bin/sh
# etcd-register.sh - register one backend instance in etcd under a lease and
# keep it alive, as a service registers itself (a Nacos ephemeral instance).
#
#   etcd-register.sh [-e URL] [-p PREFIX] [-t TTL] SERVICE ID HOST PORT [JSON]
#
# Writes PREFIX instances/SERVICE/ID = {"id","host","port",JSON...} tied to a
# lease of TTL seconds (default 5) and keeps the lease alive until stopped.
# SIGTERM / SIGINT revoke the lease: the instance leaves every gateway at
# once. If this process dies without revoking (kill -9, crash, host lost),
# etcd expires the lease after TTL seconds and the instance leaves then.
# JSON is extra members, e.g. '"weight": 3, "metadata": {"version": "2"}'.
# Needs etcdctl (Debian: etcd-client). Prints "registered KEY lease ID".
set -eu

url=http://127.0.0.1:2379
prefix=/switchyard/
ttl=5
while getopts e:p:t:h opt; do
    case $opt in
    e) url=$OPTARG ;;
    p) prefix=$OPTARG ;;
    t) ttl=$OPTARG ;;
    *) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -lt 4 ] || [ $# -gt 5 ]; then
    echo "usage: etcd-register.sh [-e URL] [-p PREFIX] [-t TTL] SERVICE ID HOST PORT [JSON]" >&2
    exit 2
fi
service=$1 id=$2 host=$3 port=$4 extra=${5:-}
case $port in *[!0-9]* | '') echo "etcd-register: PORT must be a number" >&2; exit 2 ;; esac
case $service$id in */*) echo "etcd-register: SERVICE and ID must not contain '/'" >&2; exit 2 ;; esac

export ETCDCTL_API=3
ctl() { etcdctl --endpoints="$url" --dial-timeout=3s --command-timeout=5s "$@"; }

# The trap is set before the lease exists: a stop that comes right after
# the registration (or during it) still revokes what was granted.
keeper=
lease=
stop() {
    trap - TERM INT
    [ -n "$keeper" ] && kill "$keeper" 2>/dev/null
    [ -n "$lease" ] && ctl lease revoke "$lease" >/dev/null 2>&1
    exit 0
}
trap stop TERM INT

# "lease 694d7d0b5d8c1a0b granted with TTL(5s)"
lease=$(ctl lease grant "$ttl" | awk '/granted/ {print $2}')
[ -n "$lease" ] || { echo "etcd-register: cannot grant a lease at $url" >&2; exit 1; }

json="{\"id\": \"$id\", \"host\": \"$host\", \"port\": $port${extra:+, $extra}}"
key="${prefix}instances/$service/$id"
ctl put --lease="$lease" "$key" "$json" >/dev/null
echo "registered $key lease $lease"
# keep-alive renews at a third of the TTL; if etcd goes away for longer
# than the TTL the lease (and the instance) is gone, so register again.
while :; do
    ctl lease keep-alive "$lease" >/dev/null 2>&1 &
    keeper=$!
    wait "$keeper" || true
    keeper=
    sleep 1
    if ! ctl lease timetolive "$lease" 2>/dev/null | grep -q 'remaining'; then
        lease=$(ctl lease grant "$ttl" 2>/dev/null | awk '/granted/ {print $2}') || true
        [ -n "$lease" ] && ctl put --lease="$lease" "$key" "$json" >/dev/null 2>&1 &&
            echo "registered again $key lease $lease"
    fi
done
