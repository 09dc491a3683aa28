#!/bin/sh
# Culprit benchmark (not a test): dumps every culprit scenario under the
# preload shim, compares each against its bench run, and prints first-suspect
# and top-5 accuracy for msprobe's ranked suspects and for msprobe 8.x's
# red/yellow rules side by side, plus how many noise-only controls stay clean.
#
#   bench/culprit/run.sh [BUILD_DIR]     env: JOBS=2 CULPRIT_WORK=DIR (keep dumps)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-$HERE/../../build}" && pwd)  # absolute: the runs start in their own folders
export MSPROBE_BIN=$BUILD/src/cli/msprobe
export MSPROBE_PRELOAD_LIB=$BUILD/src/dump/libmsprobe_preload.so
# culprit_suite imports the tests' own h5py reader (tests/lib)
export PYTHONPATH=$HERE/../../tests/lib${PYTHONPATH:+:$PYTHONPATH}
for f in "$MSPROBE_BIN" "$MSPROBE_PRELOAD_LIB"; do
    [ -e "$f" ] || { echo "run.sh: $f not built (cmake --build $BUILD)" >&2; exit 2; }
done
exec "${MSPROBE_PYTHON:-/usr/bin/python3}" "$HERE/run.py"
