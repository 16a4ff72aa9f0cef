#!/usr/bin/env bash
# .ci/tsan.sh - build switchyard with ThreadSanitizer in build-tsan and run
# the concurrency suites (the publication protocol's tests among them).
# Usage: .ci/tsan.sh [extra meson test args]
set -euo pipefail
cd "$(dirname "$0")/.."
export CC=${CC:-clang}
opts=(-Db_sanitize=thread -Db_lundef=false -Dpython=false -Dbench=false)
if [ -d build-tsan ]; then
  meson configure build-tsan "${opts[@]}"
else
  meson setup build-tsan "${opts[@]}"
fi
ninja -C build-tsan
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
meson test -C build-tsan --suite concurrency --print-errorlogs "$@"
