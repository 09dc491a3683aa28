#!/bin/bash
# gpubench.py on the device machine, with the bundle make_bundle.sh wrote:
# links the libraries the system lacks from .dev/lib, then runs
#   python3 bench/gpu/gpubench.py run --msprobe .dev/bin/msprobe "$@"
# printing to stdout and to $OUT/gpubench.txt when OUT is set. From the
# repository root, with the device tool:
#   run(command="bash .dev/gpubench.sh --skip-alone --models resnet18,llama,mlp",
#       carry=[".dev"], timeout_s=540)
# (--skip-alone: the per-tensor path of before windows, 20x a step, is known;
# leaving it out keeps the run inside one device call)
set -u
DEV=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$DEV")
export PYTHONUNBUFFERED=1
LIBD=/tmp/msplib
rm -rf "$LIBD"; mkdir -p "$LIBD"
LDCONFIG=$(command -v ldconfig || echo /sbin/ldconfig)
cache=$("$LDCONFIG" -p 2>/dev/null)
for f in "$DEV"/lib/*.so*; do
    so=$(basename "$f")
    case $so in libmsprobe_*) continue;; esac
    grep -q "^[[:space:]]*$so " <<< "$cache" || ln -sf "$f" "$LIBD/$so"
done
export LD_LIBRARY_PATH=$LIBD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi -L 2>/dev/null
python3 "$ROOT/bench/gpu/gpubench.py" run --msprobe "$DEV/bin/msprobe" --work /tmp/gpubench "$@" \
    2>&1 | tee "${OUT:-/tmp}/gpubench.txt"
