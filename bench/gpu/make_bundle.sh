#!/bin/bash
# The GPU check kit (not a test; CI never runs it): a bundle that runs msprobe
# on a machine with a GPU, newer torch and Python, where our build
# dependencies are not installed, and no network.
#
#   bench/gpu/make_bundle.sh BUILD_DIR [BUNDLE_DIR]
#
# BUILD_DIR: a Release build of this tree (tests and benchmarks built).
# BUNDLE_DIR (default: .dev in the repository root, ignored by git) receives
#   bin/{msprobe,msprobe-catalogue}  lib/{libmsprobe_*.so, every non-glibc
#   library they need}  build/<test helpers at their build-tree paths>
#   py/{openpyxl,et_xmlfile} (Debian's)  gpu_check.sh  gpubench.sh
#   gpuprofile.sh  gpumonitor.sh  gpu/gc.py  BUILD_INFO  (and perf.tar.xz: MSP_BUNDLE_PERF=1).
# libmsprobe_py.so uses the limited C API (3.8), so a build made here loads in
# the remote Python 3.12. Then, with the device tool, from the repository root:
#   run(command="bash .dev/gpu_check.sh", carry=[".dev"], timeout_s=400)
# (GC_STEPS="b e" for a subset; see gpu_check.sh), and the overhead benchmark
#   run(command="bash .dev/gpubench.sh", carry=[".dev"], timeout_s=480)
# (gpubench.py's header), and where a step's time goes
#   run(command="bash .dev/gpuprofile.sh", carry=[".dev"], timeout_s=300)
# (gpuprofile.sh's header), and the monitor's checks (issue 41)
#   run(command="bash .dev/gpumonitor.sh", carry=[".dev"], timeout_s=480)
# (gpumonitor.sh's header). gpu_check.sh writes summary.txt and
# logs.tar.gz to $OUT. GC_DEVICE=cpu PY=/usr/bin/python3 OUT=/tmp/o runs the
# same checks on the CPU here.
set -euo pipefail
B=$(cd "${1:?usage: make_bundle.sh BUILD_DIR [BUNDLE_DIR]}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
D=${2:-$HERE/../../.dev}
mkdir -p "$D"
D=$(cd "$D" && pwd)
rm -rf "$D/bin" "$D/lib" "$D/build" "$D/py" "$D/gpu"
mkdir -p "$D/bin" "$D/lib" "$D/py" "$D/gpu"
install -m755 "$HERE/gpu_check.sh" "$D/gpu_check.sh"
install -m755 "$HERE/gpubench.sh" "$D/gpubench.sh"
install -m755 "$HERE/gpuprofile.sh" "$D/gpuprofile.sh"
install -m755 "$HERE/gpumonitor.sh" "$D/gpumonitor.sh"
install -m644 "$HERE/bundle_libs.sh" "$D/bundle_libs.sh"
install -m644 "$HERE/gc.py" "$D/gpu/gc.py"
install -m755 "$B/src/cli/msprobe" "$B/src/cli/msprobe-catalogue" "$D/bin/"
install -m755 "$B/src/dump/libmsprobe_preload.so" "$B/src/dump/libmsprobe_py.so" "$D/lib/"
helpers="tests/compare/cmp_dump_metrics tests/configcheck/cc_sha256_cli tests/dump/libmsp_slow_disk.so tests/dump/libmsp_sync_spy.so bench/compare/msprobe-gen"
for h in $helpers; do mkdir -p "$D/build/$(dirname $h)"; install -m755 "$B/$h" "$D/build/$h"; done
# MSP_BUNDLE_PERF=1: the shim keeps its symbols (build BUILD_DIR with
# -fno-omit-frame-pointer for whole call chains) and this machine's perf comes
# along, with the libraries it needs, as perf.tar.xz (gpuprofile.sh uses it)
if [ "${MSP_BUNDLE_PERF:-0}" = 1 ]; then
  strip --strip-unneeded "$D"/bin/* "$D"/lib/libmsprobe_preload.so
else
  strip --strip-unneeded "$D"/bin/* "$D"/lib/*.so
fi
for h in $helpers; do strip --strip-unneeded "$D/build/$h"; done
glibc='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|libmvec|ld-linux-x86-64)\.so'
for f in "$D"/bin/* "$D"/lib/libmsprobe_py.so $(for h in $helpers; do echo "$D/build/$h"; done); do
  ldd "$f" | awk '/=> \//{print $1" "$3}'
done | sort -u | while read -r soname path; do
  [[ $soname =~ $glibc ]] && continue
  cp -L "$path" "$D/lib/$soname"
done
strip --strip-unneeded "$D"/lib/lib*.so.* 2>/dev/null || true
rm -f "$D/perf.tar.xz"
if [ "${MSP_BUNDLE_PERF:-0}" = 1 ]; then
  P=$(mktemp -d); mkdir -p "$P/perf/lib"
  install -m755 "$(command -v perf)" "$P/perf/perf"
  ldd "$(command -v perf)" | awk '/=> \//{print $1" "$3}' | while read -r soname path; do
    [[ $soname =~ $glibc ]] || [ -e "$D/lib/$soname" ] || cp -L "$path" "$P/perf/lib/$soname"
  done
  strip --strip-unneeded "$P"/perf/lib/* 2>/dev/null || true
  tar -cJf "$D/perf.tar.xz" -C "$P" perf
  rm -rf "$P"
fi
cp -r /usr/lib/python3/dist-packages/openpyxl /usr/lib/python3/dist-packages/et_xmlfile "$D/py/"
find "$D/py" -name __pycache__ -prune -exec rm -rf {} +
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$B/CMakeCache.txt")
echo "built from $(git -C "$SRC" rev-parse --short HEAD)$(git -C "$SRC" diff --quiet HEAD || echo '+dirty') ($(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$B/CMakeCache.txt"), $(date -u +%FT%TZ))" > "$D/BUILD_INFO"
cat "$D/BUILD_INFO"
du -sh "$D"
