#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every test; then
# the same suite (less the tests that preload the shim into Python, which an
# ASan runtime cannot join late) under AddressSanitizer + UBSan.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)

"$here/scripts/bootstrap.sh" "$here/build"
ctest --test-dir "$here/build" --output-on-failure -j"$jobs"

"$here/scripts/bootstrap.sh" "$here/build-asan" -DMSPROBE_SANITIZE=ON -DMSPROBE_BENCH=OFF
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$here/build-asan" --output-on-failure -j"$jobs" -LE preload
