#!/bin/sh
# Two builds of the dump shim side by side, in one run (not a test): what a
# change costs the training it dumps. Round by round, interleaved so that a
# disturbance hits both builds alike, each of
#   examples/train.py's Net (CNN) and the LSTM cell loop in small ops
#   (~400 API calls a step), under
#     (a) no step selected, every API wrapped,
#     (b) statistics of every API, every step,
#     (c) full tensors of every API, every step,
#   and the cost of one wrapped call outside the dumped steps,
# runs under BASE's library, then HEAD's, and a plain run for reference.
# Prints each build's best median step (least disturbed round) and HEAD/BASE;
# within 1.03 is what a refactor should keep. The shim's own lines go to
# BENCH_DIR/shim.log. On a machine with few cores, OMP_NUM_THREADS=1 steadies
# the CNN's step times.
# Usage: bench/dump/side.sh BASE_PRELOAD_LIB HEAD_PRELOAD_LIB
#        (env: PYTHON, STEPS (default 20), ROUNDS (default 3), MODELS (default
#        "cnn lstmcell"), BENCH_DIR)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 2 ] || { echo "usage: $0 BASE_PRELOAD_LIB HEAD_PRELOAD_LIB" >&2; exit 2; }
for l in "$1" "$2"; do
  [ -f "$l" ] || { echo "side.sh: no preload library at $l" >&2; exit 2; }
done
base=$(realpath "$1")
head=$(realpath "$2")
py=${PYTHON:-/usr/bin/python3}
steps=${STEPS:-20}
rounds=${ROUNDS:-3}
models=${MODELS:-cnn lstmcell}
work=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/msp-bench-side.XXXXXX")}
mkdir -p "$work"
cd "$work"

cfg() { # task steps file
  printf '{"dump":{"common_dump_settings":{"dump_mode":"api","dump_path":"%s","dump_iter":"%s","task":"%s"},"api_list":[]}}\n' \
    "$work/out" "$2" "$1" > "$3"
}
cfg tensor 999999 a.json
cfg statistics all b.json
cfg tensor all c.json

# One median step time in ms: model (cnn, lstmcell), library or "", config.
one() {
  rm -rf "$work/out"
  if [ -z "$2" ]; then
    out=$("$py" "$here/steptime.py" --model "$1" --steps "$steps")
  else
    out=$(MSPROBE_LOG_FILE=$work/shim.log MSPROBE_PATH=$3 LD_PRELOAD=$2 \
      "$py" "$here/steptime.py" --model "$1" --steps "$steps")
  fi
  "$py" -c "import json,sys; print(json.loads(sys.argv[1])['median_ms'])" "$out"
}

# Results as "key value" lines, one per run, in results.txt.
: > results.txt
i=0
while [ $i -lt "$rounds" ]; do
  # Odd rounds run HEAD first, so that running second favours neither build.
  order="base head"
  [ $((i % 2)) = 1 ] && order="head base"
  for model in $models; do
    echo "$model.plain $(one $model "" "")" >> results.txt
    for c in a b c; do
      for side in $order; do
        lib=$base
        [ $side = head ] && lib=$head
        echo "$model.$c.$side $(one $model "$lib" $c.json)" >> results.txt
      done
    done
  done
  for side in base head; do
    lib=$base
    [ $side = head ] && lib=$head
    echo "call.$side $(MSPROBE_LOG_FILE=$work/shim.log MSPROBE_PATH=a.json LD_PRELOAD=$lib \
      "$py" "$here/callcost.py" |
      "$py" -c "import json,sys; d=json.load(sys.stdin); print(d['relu_ns'], d['add_ns'])")" >> results.txt
  done
  i=$((i + 1))
done
echo "call.plain $("$py" "$here/callcost.py" |
  "$py" -c "import json,sys; d=json.load(sys.stdin); print(d['relu_ns'], d['add_ns'])")" >> results.txt

"$py" - "$base" "$head" "$steps" "$rounds" <<'PY'
import collections, sys
runs = collections.defaultdict(list)
for line in open("results.txt"):
    k, *v = line.split()
    runs[k].append([float(x) for x in v])
best = lambda k: min(r[0] for r in runs[k])
print("dump shim, two builds side by side: %d timed steps, best of %s rounds" % (int(sys.argv[3]), sys.argv[4]))
print("  BASE %s\n  HEAD %s" % (sys.argv[1], sys.argv[2]))
names = {"a": "(a) no step selected, all APIs wrapped", "b": "(b) statistics, every API, every step",
         "c": "(c) tensor, every API, every step"}
for model, title in (("cnn", "examples/train.py's Net, batch 64"), ("lstmcell", "LSTM cell loop in small ops")):
    if model + ".plain" not in runs:
        continue
    p = best(model + ".plain")
    print("%s: plain %.2f ms" % (title, p))
    print("  %-40s %9s %9s %9s" % ("", "BASE ms", "HEAD ms", "HEAD/BASE"))
    for c in "abc":
        b, h = best("%s.%s.base" % (model, c)), best("%s.%s.head" % (model, c))
        print("  %-40s %9.2f %9.2f %9.3f   (vs plain: %.3fx, %.3fx)" % (names[c], b, h, h / b, b / p, h / p))
cp = runs["call.plain"][0]
cb = [min(r[i] for r in runs["call.base"]) for i in (0, 1)]
ch = [min(r[i] for r in runs["call.head"]) for i in (0, 1)]
print("cost per wrapped call outside dumped steps (ns above plain): F.relu BASE %.0f HEAD %.0f, "
      "x + y BASE %.0f HEAD %.0f" % (cb[0] - cp[0], ch[0] - cp[0], cb[1] - cp[1], ch[1] - cp[1]))
print("load average while measuring: %s" % open("/proc/loadavg").read().split()[0])
PY
[ -n "${BENCH_DIR:-}" ] || rm -rf "$work"
