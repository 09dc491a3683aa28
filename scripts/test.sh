#!/usr/bin/env bash
# The whole test suite, as CI runs it: install what is missing, then
#  1. gcc RelWithDebInfo with -Werror: every test;
#  2. gcc Release, gcc Debug and clang with -Werror: built (tests included,
#     benchmarks too but for Debug) so that every build type a packager picks
#     is warning-free; the suite is not run again on them (time: about a
#     minute and a half per tree on 2 cores);
#  3. gcc with AddressSanitizer + UBSan: the suite less the tests that preload
#     the shim into Python (an ASan runtime cannot join late).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)

"$here/scripts/bootstrap.sh" "$here/build" -DMSPROBE_WERROR=ON
ctest --test-dir "$here/build" --output-on-failure -j"$jobs"

"$here/scripts/bootstrap.sh" "$here/build-release" -DCMAKE_BUILD_TYPE=Release -DMSPROBE_WERROR=ON
# -O0 adds no warning the benchmarks could show that the others miss: skip them there.
"$here/scripts/bootstrap.sh" "$here/build-debug" -DCMAKE_BUILD_TYPE=Debug -DMSPROBE_WERROR=ON -DMSPROBE_BENCH=OFF
CC=clang "$here/scripts/bootstrap.sh" "$here/build-clang" -DMSPROBE_WERROR=ON

"$here/scripts/bootstrap.sh" "$here/build-asan" -DMSPROBE_SANITIZE=ON -DMSPROBE_BENCH=OFF -DMSPROBE_WERROR=ON
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$here/build-asan" --output-on-failure -j"$jobs" -LE preload
