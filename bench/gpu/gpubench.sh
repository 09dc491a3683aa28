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
. "$DEV/bundle_libs.sh"
nvidia-smi -L 2>/dev/null
python3 "$ROOT/bench/gpu/gpubench.py" run --msprobe "$DEV/bin/msprobe" --work /tmp/gpubench "$@" \
    2>&1 | tee "${OUT:-/tmp}/gpubench.txt"
