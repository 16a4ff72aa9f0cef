#!/usr/bin/env bash
# Installs what building and testing switchyard needs on Debian 12.
# Idempotent: does nothing when everything is already there. Needs root
# (or sudo) only when something is missing.
set -euo pipefail
pkgs=(build-essential meson ninja-build pkg-config libpcre2-dev libcjson-dev
      check libsubunit-dev clang llvm libclang-rt-14-dev python3 python3-cffi
      python3-pytest python3-dev python3-mesonpy python3-venv python3-pip
      libuv1-dev libhttp-parser-dev wrk nginx-core nginx-dev etcd-server
      etcd-client curl redis-server libhiredis-dev libyaml-dev libssl-dev openssl
      chromium libr3-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
