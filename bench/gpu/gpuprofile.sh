#!/bin/bash
# Where a statistics step's time goes on the device machine (not a test), with
# the bundle make_bundle.sh wrote. From the repository root, with the device tool:
#   run(command="bash .dev/gpuprofile.sh", carry=[".dev"], timeout_s=300)
# For each of MODELS (default "resnet18 llama"), in DTYPE (default fp32), one
# profiled statistics step: the torch profiler's tables (CPU and CUDA) and the
# step's timeline, summarised by tracegaps.py (the GPU's idle gaps and what the
# CPU ran meanwhile, the CPU's waits for the GPU); the timeline itself comes back
# gzipped: MODEL.txt and MODEL_trace.json.gz. With a bundle made with
# MSP_BUNDLE_PERF=1, perf also samples a resnet18 statistics run in its steady
# state (attached after 15 steps, Python frames named): perf.txt. Everything
# goes to $OUT (five files: the device tool brings eight back). About 2 minutes.
set -u
DEV=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$DEV")
cd "$ROOT"
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpuprofile}; mkdir -p "$OUT"
. "$DEV/bundle_libs.sh"
M=$DEV/bin/msprobe
W=/tmp/gpuprofile_work; rm -rf "$W"; mkdir -p "$W"
printf '{"dump":{"common_dump_settings":{"dump_path":"%s","task":"statistics","dump_iter":"all","dump_mode":"api"}}}' \
    "$W/d" > "$W/s.json"
# GP_PYTHON, GP_EXTRA: a dry run here, e.g. GP_PYTHON=/usr/bin/python3
# GP_EXTRA="--device cpu --size tiny" MSPROBE_TEST_DEVICE_STATS=1
B="${GP_PYTHON:-python3} bench/gpu/gpubench.py train ${GP_EXTRA:-}"
for model in ${MODELS:-resnet18 llama}; do
    rm -rf "$W/d"
    timeout 120 env MSPROBE_WRITER_STATS=1 "$M" dump -c "$W/s.json" -- $B --model "$model" \
        --dtype "${DTYPE:-fp32}" --warmup 3 --steps 2 --profile-step 4 --profile-table 30 \
        --trace "$W/$model.json" 2>&1 | grep -v "^LOSS" > "$W/tables.txt"
    python3 bench/gpu/tracegaps.py "$W/$model.json" > "$W/gaps.txt" 2>&1
    cat "$W/gaps.txt" "$W/tables.txt" > "$OUT/$model.txt"
    gzip -c "$W/$model.json" > "$OUT/${model}_trace.json.gz"
    cat "$W/gaps.txt"
done
if [ -f "$DEV/perf.tar.xz" ]; then
    mkdir -p /tmp/perf && tar -xJf "$DEV/perf.tar.xz" -C /tmp/perf
    PERF="env LD_LIBRARY_PATH=/tmp/perf/perf/lib:$DEV/lib /tmp/perf/perf/perf"
    rm -rf "$W/d"
    PYTHONPERFSUPPORT=1 "$M" dump -c "$W/s.json" -- $B --model resnet18 --warmup 3 \
        --steps 2000 > "$W/r.log" 2>&1 &
    bg=$!
    for _ in $(seq 120); do grep -q "^LOSS 15 " "$W/r.log" && break; sleep 0.5; done
    pid=$(pgrep -f "bench/gpu/gpubench.py train" -n) # the newest: the trainer, not msprobe
    timeout 30 $PERF record -e cpu-clock -F 1999 -g -p "$pid" -o "$W/p.data" -- sleep 5 2>&1 | tail -1
    kill "$bg" 2>/dev/null; pkill -f "gpubench.py train"; sleep 1
    {
        echo "== by thread and library"
        $PERF report -i "$W/p.data" --no-children -s comm,dso -g none 2>/dev/null | grep "%" | head -30
        echo "== by symbol (self)"
        $PERF report -i "$W/p.data" --no-children -s comm,dso,sym -g none --percent-limit 0.2 \
            2>/dev/null | grep "%" | head -150
        echo "== by symbol (with callees)"
        $PERF report -i "$W/p.data" --children -s sym -g none --percent-limit 0.4 2>/dev/null |
            grep "%" | head -200
    } > "$OUT/perf.txt"
    head -14 "$OUT/perf.txt"
fi
