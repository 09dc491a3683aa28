#!/bin/bash
# Issue 41's checks of `msprobe monitor` on a GPU (not a test; CI never runs
# it), with the bundle make_bundle.sh wrote. From the repository root, with
# the device tool:
#   run(command="bash .dev/gpumonitor.sh", carry=[".dev"], timeout_s=480)
# Three parts, each under `timeout`, one verdict line each in
# $OUT/gpumonitor.txt (and on stdout), their logs after it:
#   copies  steptime.py's GPT and resnet18 on the GPU, plain and under the
#           monitor (weights, gradients, AdamW state and every module's
#           activations and their gradients, every step), under
#           torch.profiler: the device-to-host copies a step. Only six
#           float64s a row may leave the device: PASS when the monitor's
#           extra bytes a step are at most 48 x its rows a step (+ 4 KiB) in
#           at most 4 extra copies a step.
#   values  step 0 of the GPT under the monitor on the GPU and on the CPU,
#           from the same weights and data (TF32 off): every row of every
#           file of step 0 in both, min, max, mean and norm within 1e-3 of
#           each other (relative to the row's largest magnitude), zeros
#           within 1e-3, nans equal.
#   cost    bench/monitor/side.sh with DEVICE=cuda: plain training against
#           the monitor's w and x cases, the idle hooks and the in-process
#           pairs (xi), for resnet18 (batch 128 of 224x224) and the GPT
#           (batch 64).
# MON_PARTS="copies values" runs only those; MON_DEVICE=cpu is a dry run on a
# machine without CUDA (copies then SKIPs: nothing leaves a host tensor),
# with PY=/usr/bin/python3 and a smaller cost part.
set -u
DEV=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$DEV")
export PYTHONUNBUFFERED=1
. "$DEV/bundle_libs.sh"
PY=${PY:-python3}
LIB=$DEV/lib/libmsprobe_preload.so
ST=$ROOT/bench/monitor/steptime.py
W=$(mktemp -d /tmp/mspmon.XXXXXX)
R=${OUT:-$W}/gpumonitor.txt
DEVICE=${MON_DEVICE:-cuda}
: > "$R"
say() { echo "$*" | tee -a "$R"; }
say "msprobe gpumonitor $(date -u +%FT%TZ) $(nvidia-smi -L 2>/dev/null | head -1 | cut -c1-60)"
say "python $($PY -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)')"
OPS='"ops": ["min", "max", "mean", "norm", "zeros", "nans"]'
printf '{"targets": {}, "wg_distribution": true, "param_distribution": true, "mv_distribution": true, "xy_distribution": true, "ndigits": 12, %s}\n' \
    "$OPS" > "$W/all.json"

# mon OUTDIR ARGS...: steptime.py under the monitor's preload, all.json
mon() {
    local out=$1; shift
    MSPROBE_MONITOR_CONFIG=$W/all.json MONITOR_OUTPUT_DIR=$out LD_PRELOAD=$LIB \
        MSPROBE_LOG_FILE=$out.log "$PY" "$ST" "$@"
}
wants() { case " ${MON_PARTS:-copies values cost} " in *" $1 "*) return 0;; esac; return 1; }

copies() {
    [ "$DEVICE" = cuda ] || { echo "SKIP  not on a GPU"; return; }
    local fails="" m
    for m in gpt resnet18; do
        local args="--model $m --device cuda --warmup 2 --steps 3 --batch 16"
        "$PY" "$ST" $args --copies "$W/$m.plain.trace" > "$W/$m.plain.json" || fails+="$m plain rc $?; "
        mon "$W/out.$m" $args --copies "$W/$m.mon.trace" > "$W/$m.mon.json" || fails+="$m monitored rc $?; "
        cat "$W/$m.plain.json" "$W/$m.mon.json" "$W/out.$m.log" >&2
        "$PY" - "$W" "$m" 3 <<'EOF' || fails+="$m; "
import csv, glob, json, os, sys
w, m, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
plain, mon = (json.load(open(f"{w}/{m}.{k}.json")) for k in ("plain", "mon"))
rows = 0
for f in glob.glob(f"{w}/out.{m}/*/*.csv"):
    lo, hi = os.path.basename(f).rsplit("_", 1)[1][:-4].split("-")
    if int(lo) >= 2:  # the timed steps (after 2 warmup steps)
        rows += sum(1 for _ in csv.reader(open(f))) - 1
rows /= steps
extra_b = mon["d2h_bytes_per_step"] - plain["d2h_bytes_per_step"]
extra_n = mon["d2h_copies_per_step"] - plain["d2h_copies_per_step"]
ok = rows > 0 and extra_b <= 48 * rows + 4096 and extra_n <= 4
print(f"{m}: {rows:.0f} rows a step; device-to-host a step: plain {plain['d2h_copies_per_step']:.1f} "
      f"copies {plain['d2h_bytes_per_step']:.0f} B, monitored {mon['d2h_copies_per_step']:.1f} copies "
      f"{mon['d2h_bytes_per_step']:.0f} B (extra {extra_b:.0f} B, {extra_b / max(rows, 1):.1f} B a row) "
      f"{'ok' if ok else 'TOO MUCH'}")
sys.exit(0 if ok else 1)
EOF
    done
    [ -z "$fails" ] && echo "PASS" || echo "FAIL  $fails"
}

values() {
    local fails="" d
    for d in cpu $DEVICE; do
        mon "$W/val.$d" --model gpt --device "$d" --warmup 0 --steps 2 --batch 8 > "$W/val.$d.json" ||
            fails+="$d rc $?; "
        cat "$W/val.$d.json" "$W/val.$d.log" >&2
    done
    [ -z "$fails" ] || { echo "FAIL  $fails"; return; }
    "$PY" - "$W/val.cpu" "$W/val.$DEVICE" <<'EOF'
import csv, glob, math, os, sys
a_dir, b_dir = (glob.glob(d + "/*/")[0] for d in sys.argv[1:3])
def rows(d):
    out = {}
    for f in glob.glob(d + "*_0-0.csv"):
        head, *body = list(csv.reader(open(f)))
        for r in body:
            out[(os.path.basename(f), r[1], r[2])] = dict(zip(head, r))
    return out
a, b = rows(a_dir), rows(b_dir)
bad, n = [], 0
if set(a) != set(b):
    bad.append(f"rows differ: {sorted(set(a) ^ set(b))[:5]}")
for k in sorted(set(a) & set(b)):
    ra, rb = a[k], b[k]
    big = max(abs(float(ra.get("min", 0))), abs(float(ra.get("max", 0))), 1e-30)
    for c in ("min", "max", "mean", "norm", "zeros", "nans"):
        if c not in ra:
            continue
        x, y = float(ra[c]), float(rb[c])
        if math.isnan(x) or math.isnan(y):  # a row of nan: an input without a gradient
            same = math.isnan(x) and math.isnan(y)
        elif c == "nans":
            same = x == y
        elif c == "zeros":
            same = abs(x - y) <= 1e-3
        elif c == "norm":
            same = abs(x - y) <= 1e-3 * max(abs(x), 1e-30)
        else:
            same = abs(x - y) <= 1e-3 * big + 1e-9
        n += 1
        if not same:
            bad.append(f"{k} {c}: cpu {x} gpu {y}")
print(f"{len(set(a) & set(b))} rows of step 0, {n} numbers compared; {len(bad)} apart")
for line in bad[:20]:
    print("  " + line)
print("PASS" if n and not bad else "FAIL  " + (bad[0] if bad else "nothing compared"))
EOF
}

cost() {
    # "model sizes" each: on the GPU at a size it is kept busy by, else small
    local steps=20 runs=("resnet18 BATCH=128 IMAGE=224" "gpt BATCH=64") run
    [ "$DEVICE" = cuda ] || { steps=6; runs=("resnet18 BATCH=4 IMAGE=64" "gpt BATCH=4"); }
    for run in "${runs[@]}"; do
        set -- $run
        env MODELS=$1 "${@:2}" DEVICE=$DEVICE STEPS=$steps ROUNDS=2 CASES="plain w x idle xi" \
            PYTHON=$PY bash "$ROOT/bench/monitor/side.sh" "$LIB"
    done
    echo "DONE"
}

export W LIB ST PY DEVICE ROOT
export -f mon copies values cost
for part in copies values cost; do
    wants $part || continue
    t0=$SECONDS
    budget=${MON_BUDGET:-150}; [ $part = cost ] && budget=${MON_COST_BUDGET:-260}
    timeout -k 5 "$budget" bash -c $part > "$W/$part.out" 2> "$W/$part.err"
    rc=$?
    say "$(printf '%-7s %s  (%ds, rc %d)' "$part" "$(tail -1 "$W/$part.out")" $((SECONDS - t0)) $rc)"
    sed 's/^/    /' "$W/$part.out" | tee -a "$R"
done
for part in copies values cost; do
    [ -s "$W/$part.err" ] && { echo "==== $part stderr"; tail -80 "$W/$part.err"; } >> "$R"
done
[ -n "${OUT:-}" ] && tar czf "$OUT/gpumonitor_logs.tar.gz" -C "$W" . 2>/dev/null
true
