#!/bin/sh
# What `msprobe monitor` costs a training step (not a test): plain training
# and monitored training side by side, in one run, round by round and
# interleaved so that a disturbance hits all alike, on real models under
# AdamW (steptime.py): a nanoGPT-style GPT (2 M parameters) and torchvision's
# resnet18 (11 M), each
#   (w) weights, gradients (reduced and unreduced) and exp_avg/exp_avg_sq,
#       every step, all six ops (msprobe's target: within 1 %),
#   (x) activations and their gradients of every module, every step
#       (msprobe's target: within 5 %),
# Prints each case's best median step over the rounds (least disturbed) and
# its ratio to plain, by wall clock and by the training thread's CPU time
# (steadier on a shared machine). On few cores, OMP_NUM_THREADS=1 steadies it.
# A shared machine whose speed drifts by a tenth between runs hides a cost of
# a few percent, so the cost is also measured inside one process, where the
# steps being compared are seconds apart:
#   (xi), (wi) the x and w configs with step_interval 2: each written step
#       against the mean of the two unwritten steps beside it (the median
#       over the rounds' written steps, and their range). The monitor's
#       module hooks are registered only while a step is written, so an
#       unwritten step is plain training: xi is the whole cost of the
#       activations, hooks, copies and statistics, beside its reference;
#   (x idle) the monitor loaded with x's config but no step written
#       (start_step past the run), against plain training in other
#       processes: what is left between written steps.
# With BASE_LIB (another build's preload library, today's main), the same
# two cases run under it too, in the same rounds: (w base), (x base).
# Every case runs with glibc's malloc keeping what torch frees (its mmap and
# trim thresholds raised, as a caching allocator would; STEADY=0 leaves
# malloc alone): where a page fault is dear (a VM), torch's CPU allocator
# otherwise maps and faults in each step's activations anew, and the step
# time swings by a quarter from run to run.
# Usage: bench/monitor/side.sh [PRELOAD_LIB]
#        (env: PYTHON, STEPS (default 8), ROUNDS (default 3), MODELS (default
#        "gpt resnet18"), BATCH (steptime.py's default: gpt 4, resnet18 4),
#        IMAGE (resnet18's image side, default 64), DEVICE (cpu, or cuda on a
#        GPU: the statistics are then reduced on the device),
#        BASE_LIB, STEADY, BENCH_DIR, CASES (default "plain w x idle xi wi"))
set -eu
here=$(cd "$(dirname "$0")" && pwd)
lib=${1:-$here/../../build/src/dump/libmsprobe_preload.so}
[ -f "$lib" ] || { echo "side.sh: no preload library at $lib" >&2; exit 2; }
lib=$(realpath "$lib")
py=${PYTHON:-/usr/bin/python3}
base=${BASE_LIB:+$(realpath "$BASE_LIB")}
if [ "${STEADY:-1}" != 0 ]; then
  steady=glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=17179869184
  GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}$steady
  export GLIBC_TUNABLES
fi
steps=${STEPS:-8}
batch="${BATCH:+--batch $BATCH} ${IMAGE:+--image $IMAGE} ${DEVICE:+--device $DEVICE}"
rounds=${ROUNDS:-3}
models=${MODELS:-gpt resnet18}
work=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/msp-bench-monitor.XXXXXX")}
mkdir -p "$work"
cd "$work"
ops='"ops": ["min", "max", "mean", "norm", "zeros", "nans"]'
printf '{"targets": {}, "wg_distribution": true, "param_distribution": true, "mv_distribution": true, %s}\n' \
  "$ops" > w.json
printf '{"targets": {}, "xy_distribution": true, %s}\n' "$ops" > x.json
printf '{"targets": {}, "xy_distribution": true, "start_step": 1000000000, %s}\n' "$ops" > idle.json
printf '{"targets": {}, "xy_distribution": true, "step_interval": 2, %s}\n' "$ops" > xi.json
printf '{"targets": {}, "wg_distribution": true, "param_distribution": true, "mv_distribution": true, "step_interval": 2, %s}\n' \
  "$ops" > wi.json
cases=${CASES:-plain w x idle xi wi}

# steptime.py's JSON line of one run: model, config or "" (plain), and the
# preload library (default: lib).
one() {
  rm -rf "$work/out" "$work/shim.log"
  if [ -z "$2" ]; then
    out=$("$py" "$here/steptime.py" --model "$1" --steps "$steps" $batch)
  else
    out=$(MSPROBE_LOG_FILE=$work/shim.log MONITOR_OUTPUT_DIR=$work/out MSPROBE_MONITOR_PROFILE=1 \
      MSPROBE_MONITOR_CONFIG=$2 LD_PRELOAD=${3:-$lib} "$py" "$here/steptime.py" --model "$1" --steps "$steps" $batch)
    grep "training thread's CPU time" "$work/shim.log" | tail -1 |
      sed "s/^/$1.$(basename "$2" .json)${3:+ base}: /" >> "$work/profile.txt"
  fi
  echo "$out"
}

: > results.txt
: > profile.txt
i=0
while [ $i -lt "$rounds" ]; do
  for model in $models; do
    # odd rounds run the cases in reverse order
    order=$cases
    [ -z "$base" ] || order="$order xb wb"
    [ $((i % 2)) = 0 ] || order=$(printf '%s\n' $order | tac | tr '\n' ' ')
    for c in $order; do
      cfg=""
      [ "$c" = plain ] || cfg=$work/${c%b}.json
      case $c in ?b) with=$base ;; *) with="" ;; esac
      echo "$model.$c $(one "$model" "$cfg" "$with")" >> results.txt
    done
  done
  i=$((i + 1))
done

"$py" - "$steps" "$rounds" <<'PY'
import collections, json, statistics, sys
runs = collections.defaultdict(list)
for line in open("results.txt"):
    k, v = line.split(" ", 1)
    runs[k].append(json.loads(v))
best = lambda k, f: min(r[f] for r in runs[k])


def pairs(k):
    """Each written step (even monitor steps: start_step 0, step_interval 2)
    over the mean of the unwritten steps on either side, in one process."""
    out = {"steps_ms": [], "steps_thread_cpu_ms": []}
    for r in runs[k]:
        for f in out:
            t = r[f]
            for i in range(1, len(t) - 1):
                if (r["first_step"] + i) % 2 == 0:
                    out[f].append(2 * t[i] / (t[i - 1] + t[i + 1]))
    return out


print("msprobe monitor vs plain training: %s timed steps, best of %s rounds" % tuple(sys.argv[1:3]))
names = {"w": "(w) weights, grads, exp_avg(_sq), every step",
         "x": "(x) activations and their grads, every module",
         "idle": "(x idle) x's config, no step written",
         "wb": "(w base) the same under BASE_LIB",
         "xb": "(x base) the same under BASE_LIB"}
inproc = {"wi": "(wi) w every other step: written / unwritten",
          "xi": "(xi) x every other step: written / unwritten"}
for model, title in (("gpt", "nanoGPT-style GPT, 2 M params, AdamW"),
                     ("resnet18", "torchvision resnet18, 11 M params, AdamW")):
    if not any(k.startswith(model + ".") for k in runs):
        continue
    pk = model + ".plain"
    if pk in runs:
        pw, pc = best(pk, "median_ms"), best(pk, "thread_cpu_ms")
        print("%s: plain %.1f ms a step (thread CPU %.1f ms)" % (title, pw, pc))
    else:
        print("%s:" % title)
    for c in [c for c in names if "%s.%s" % (model, c) in runs and pk in runs]:
        w, cpu = best("%s.%s" % (model, c), "median_ms"), best("%s.%s" % (model, c), "thread_cpu_ms")
        print("  %-48s %8.1f ms  %.3fx wall  %.3fx CPU" % (names[c], w, w / pw, cpu / pc))
    for c in [c for c in inproc if "%s.%s" % (model, c) in runs]:
        p = pairs("%s.%s" % (model, c))
        if not p["steps_ms"]:
            continue
        w, cpu = p["steps_ms"], p["steps_thread_cpu_ms"]
        print("  %-48s %8s     %.3fx wall  %.3fx CPU  (%.3f-%.3f, %d steps)"
              % (inproc[c], "", statistics.median(w), statistics.median(cpu), min(w), max(w), len(w)))
print("load average while measuring: %s" % open("/proc/loadavg").read().split()[0])
PY
echo "inside the monitor (last run of each):"
sort -u -t: -k1,1 profile.txt | sed 's/msprobe: monitor: //; s/^/  /' 
[ -n "${BENCH_DIR:-}" ] || rm -rf "$work"
