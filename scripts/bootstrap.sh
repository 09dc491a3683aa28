#!/usr/bin/env bash
# Install any missing Debian packages, then configure and build msprobe.
#   scripts/bootstrap.sh [BUILD_DIR] [extra cmake args...]
# Idempotent: a machine that already has everything only rebuilds.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
shift || true

pkgs=(cmake make gcc pkg-config binutils libhdf5-dev libcjson-dev libzip-dev
      libxlsxwriter-dev zlib1g-dev libisal-dev python3-dev python3-torch python3-h5py
      python3-numpy python3-openpyxl python3-torchvision man-db groff-base
      libjs-chart.js chromium openmpi-bin libopenmpi-dev clang-format
      libssl-dev libcsv-dev libyaml-dev libexpat1-dev)
# libisal-dev: ISA-L's deflate, for the big sheets of compare workbooks;
# libssl-dev: libcrypto, config_check's SHA-256; libcsv-dev: csv files read back;
# libyaml-dev: data_mapping.yaml and merge_result's config; libexpat1-dev: the XML
# of compare workbooks read back;
# libjs-chart.js: Chart.js, embedded into msprobe's HTML reports at build time;
# chromium: the browser the report tests load those pages in (headless);
# openmpi: compare spread over processes (mpirun), built when found;
# clang-format: the rules' count of files .clang-format would change.
# CC=clang (scripts/test.sh's clang build) needs clang and its OpenMP runtime.
case "${CC:-}" in clang*) pkgs+=(clang libomp-dev) ;; esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "msprobe: installing missing Debian packages: ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$build" -j"$jobs"
