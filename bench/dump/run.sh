#!/bin/sh
# Dump shim overhead on CPU, measured side by side in one run (not a test).
#   (a) shim loaded, every API wrapped, no step selected   target <= 1.03x
#   (b) statistics of every API, every step                target <= 1.5x
#   (a), (b) and (c) also on a small-op-heavy loop: an LSTM cell written out
#       in small ops, unrolled over 32 time steps (~400 API calls a step)
#   the cost per wrapped call outside dumped steps, in us   target <= 1 us
#   the time the shim takes at boot to discover the APIs of this torch
#   (e) task overflow_check, every API, every step, on a run without NaN:
#       what leaving it on until the first anomaly costs (nothing is written)
#   (c) full tensors of every API, every step: write throughput against the
#       raw sequential write speed of the same disk (dd, same byte count):
#       the writer with MSPROBE_SYNC=1 (each step's file on disk when it
#       closes) against dd conv=fdatasync                   target >= 70%
#       and, for reference, the writer without sync against dd into the
#       page cache (which measures memory copies, not the disk).
# Usage: bench/dump/run.sh [PRELOAD_LIB]   (env: PYTHON, BENCH_DIR, STEPS, ROUNDS)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
lib=${1:-${MSPROBE_PRELOAD_LIB:-$here/../../build/src/dump/libmsprobe_preload.so}}
py=${PYTHON:-/usr/bin/python3}
steps=${STEPS:-30}
rounds=${ROUNDS:-3}
work=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/msp-bench-dump.XXXXXX")}
[ -f "$lib" ] || { echo "run.sh: no preload library at $lib (pass its path)" >&2; exit 2; }
lib=$(realpath "$lib")
mkdir -p "$work"
cd "$work"

cfg() { # task steps file
  printf '{"dump":{"common_dump_settings":{"dump_mode":"api","dump_path":"%s","dump_iter":"%s","task":"%s"},"api_list":[]}}\n' \
    "$work/out" "$2" "$1" > "$3"
}
cfg tensor 999999 none.json
cfg statistics all stats.json
cfg tensor all tensor.json
cfg overflow_check all ovf.json

field() { "$py" -c "import json,sys; print(json.loads(sys.argv[1])['$2'])" "$1"; }
now() { date +%s.%N; }

run_plain() { "$py" "$here/steptime.py" --steps "$steps"; }
run_shim() { # config [sync]
  rm -rf "$work/out"
  sync
  MSPROBE_SYNC=${2:-0} MSPROBE_WRITER_STATS=1 MSPROBE_LOG_FILE=$work/shim.log MSPROBE_PATH=$1 LD_PRELOAD=$lib \
    "$py" "$here/steptime.py" --steps "$steps"
}

# Interleave plain and shim runs; keep the best (least disturbed) median of each.
best() { "$py" -c "import sys; print(min(float(x) for x in sys.argv[1:]))" "$@"; }
plain_all=""; a_all=""; b_all=""; c_all=""; c_tp=""; c_wtp=""; c_wcpu=""; d_wtp=""; d_all=""
plain_cpu=""; a_cpu=""; b_cpu=""; c_cpu=""; e_all=""; e_cpu=""
i=0
while [ $i -lt "$rounds" ]; do
  out=$(run_plain); plain_all="$plain_all $(field "$out" median_ms)"; plain_cpu="$plain_cpu $(field "$out" cpu_ms)"
  out=$(run_shim none.json); a_all="$a_all $(field "$out" median_ms)"; a_cpu="$a_cpu $(field "$out" cpu_ms)"
  out=$(run_shim stats.json); b_all="$b_all $(field "$out" median_ms)"; b_cpu="$b_cpu $(field "$out" cpu_ms)"
  out=$(run_shim ovf.json); e_all="$e_all $(field "$out" median_ms)"; e_cpu="$e_cpu $(field "$out" cpu_ms)"
  rm -f "$work/shim.log"
  out=$(run_shim tensor.json); end=$(now)
  # "msprobe: writer: N bytes of tensors in S s busy (R MB/s), C s of it on a CPU"
  c_wtp="$c_wtp $(sed -n 's/.*busy (\([0-9]*\) MB\/s).*/\1/p' "$work/shim.log" | tail -1)"
  c_wcpu="$c_wcpu $(sed -n 's/.*writer: \([0-9]*\) bytes.*, \([0-9.]*\) s of it on a CPU.*/\1 \2/p' "$work/shim.log" |
    tail -1 | awk '{ if ($2 > 0) printf "%.0f", $1 / $2 / 1e6; else print 0 }')"
  c_all="$c_all $(field "$out" median_ms)"; c_cpu="$c_cpu $(field "$out" cpu_ms)"
  start=$(field "$out" start)
  bytes=$(du -sb "$work/out" | cut -f1)
  c_tp="$c_tp $("$py" -c "print($bytes / ($end - $start) / 1e6)")"
  rm -f "$work/shim.log"
  out=$(run_shim tensor.json 1)
  d_wtp="$d_wtp $(sed -n 's/.*busy (\([0-9]*\) MB\/s).*/\1/p' "$work/shim.log" | tail -1)"
  d_all="$d_all $(field "$out" median_ms)"
  i=$((i + 1))
done
plain=$(best $plain_all); a=$(best $a_all); b=$(best $b_all); c=$(best $c_all)
pc=$(best $plain_cpu); ac=$(best $a_cpu); bc=$(best $b_cpu); cc=$(best $c_cpu)
e=$(best $e_all); ec=$(best $e_cpu)
tp=$("$py" -c "import sys; print(max(float(x) for x in sys.argv[1:]))" $c_tp)
wtp=$("$py" -c "import sys; print(max(float(x) for x in sys.argv[1:]))" $c_wtp)
wcpu=$("$py" -c "import sys; print(max([float(x) for x in sys.argv[1:]] or [0]))" $c_wcpu)
dtp=$("$py" -c "import sys; print(max([float(x) for x in sys.argv[1:]] or [0]))" $d_wtp)
d=$(best $d_all)

# The small-op-heavy loop, interleaved the same way.
run_lstm() { # [config]
  if [ -z "$1" ]; then
    "$py" "$here/steptime.py" --model lstmcell --steps "$steps"
  else
    rm -rf "$work/out"
    MSPROBE_PATH=$1 LD_PRELOAD=$lib "$py" "$here/steptime.py" --model lstmcell --steps "$steps"
  fi
}
l_plain=""; l_a=""; l_b=""; l_c=""; l_tp=""; l_tb=""; l_e=""
i=0
while [ $i -lt "$rounds" ]; do
  out=$(run_lstm ""); l_plain="$l_plain $(field "$out" median_ms)"; l_tp="$l_tp $(field "$out" thread_cpu_ms)"
  l_a="$l_a $(field "$(run_lstm none.json)" median_ms)"
  out=$(run_lstm stats.json); l_b="$l_b $(field "$out" median_ms)"; l_tb="$l_tb $(field "$out" thread_cpu_ms)"
  l_c="$l_c $(field "$(run_lstm tensor.json)" median_ms)"
  l_e="$l_e $(field "$(run_lstm ovf.json)" median_ms)"
  i=$((i + 1))
done
lp=$(best $l_plain); la=$(best $l_a); lb=$(best $l_b); lc=$(best $l_c); le=$(best $l_e)
ltp=$(best $l_tp); ltb=$(best $l_tb)

# What one API call costs outside the dumped steps, measured on tiny tensors
# where the call overhead is all there is.
cc_plain=$("$py" "$here/callcost.py")
cc_shim=$(MSPROBE_PATH=none.json LD_PRELOAD=$lib "$py" "$here/callcost.py")

# The API list discovered at boot from this torch: its cost, as the shim
# measured it ("# torch V: N APIs, discovered at run time in X ms").
MSPROBE_LIST_APIS=$work/apis.txt LD_PRELOAD=$lib "$py" -c "import torch"
discovery=$(head -1 "$work/apis.txt" | sed 's/^# //')

# Raw sequential write of the same byte count on the same disk, page cache as
# for the dump (no sync), then with fdatasync for reference.
mb=$(( (bytes + 1048575) / 1048576 ))
raw() {
  rm -rf "$work/dd.bin" "$work/out"
  sync
  s=$(now)
  dd if=/dev/zero of="$work/dd.bin" bs=1M count="$mb" "$@" 2>/dev/null
  e=$(now)
  rm -f "$work/dd.bin"
  "$py" -c "print($mb * 1048576 / ($e - $s) / 1e6)"
}
raw_best=0
for k in 1 2 3; do r=$(raw); raw_best=$("$py" -c "print(max($raw_best, $r))"); done
raw_sync=0
for k in 1 2; do r=$(raw conv=fdatasync); raw_sync=$("$py" -c "print(max($raw_sync, $r))"); done
raw_direct=$(raw oflag=direct)

"$py" - "$plain" "$a" "$b" "$c" "$tp" "$raw_best" "$raw_sync" "$bytes" "$steps" "$wtp" \
  "$pc" "$ac" "$bc" "$cc" "$cc_plain" "$cc_shim" "$wcpu" "$dtp" "$d" "$raw_direct" \
  "$lp" "$la" "$lb" "$lc" "$ltp" "$ltb" "$discovery" "$e" "$ec" "$le" <<'PY'
import json, sys
plain, a, b, c, tp, raw, raw_sync, nbytes, steps, wtp, pc, ac, bc, cc = map(float, sys.argv[1:15])
cp, cs = json.loads(sys.argv[15]), json.loads(sys.argv[16])
wcpu, dtp, d, raw_direct = map(float, sys.argv[17:21])
print("dump shim on CPU: examples/train.py's Net, batch 64, 3x32x32, width 16, %d timed steps" % steps)
print("                                          wall step        CPU step (all threads)")
print("  plain                                   %8.2f ms          %8.2f ms" % (plain, pc))
print("  (a) no step selected, all APIs wrapped  %8.2f ms %.3fx   %8.2f ms %.3fx  (target <= 1.03x)"
      % (a, a / plain, ac, ac / pc))
print("      per call outside dumped steps: F.relu %.0f -> %.0f ns, x + y %.0f -> %.0f ns"
      % (cp["relu_ns"], cs["relu_ns"], cp["add_ns"], cs["add_ns"]))
print("      cost per wrapped call: F.relu %.3f us, x + y %.3f us  (target <= 1 us)"
      % ((cs["relu_ns"] - cp["relu_ns"]) / 1e3, (cs["add_ns"] - cp["add_ns"]) / 1e3))
print("      API list at boot: %s" % sys.argv[27])
print("  (b) statistics, every API, every step   %8.2f ms %.3fx   %8.2f ms %.3fx  (target <= 1.5x)"
      % (b, b / plain, bc, bc / pc))
print("  (c) tensor, every API, every step       %8.2f ms %.3fx   %8.2f ms %.3fx"
      % (c, c / plain, cc, cc / pc))
print("      with MSPROBE_SYNC=1                 %8.2f ms %.3fx" % (d, d / plain))
e, ec, le = map(float, sys.argv[28:31])
print("  (e) task overflow_check, no NaN         %8.2f ms %.3fx   %8.2f ms %.3fx  (every call's"
      % (e, e / plain, ec, ec / pc))
print("      tensors copied and checked, nothing written: its cost until the first anomaly)")
print("      the disk, %.1f MB: dd conv=fdatasync %.0f MB/s, dd oflag=direct %.0f MB/s"
      % (nbytes / 1e6, raw_sync, raw_direct))
print("      writer while busy, each step's file on disk at close (MSPROBE_SYNC=1):")
print("        %.0f MB/s = %.0f%% of dd conv=fdatasync  (target >= 70%%)"
      % (dtp, 100 * dtp / raw_sync))
print("      the page cache (memory copies, not the disk): dd %.0f MB/s" % raw)
print("        writer while busy, no sync: %.0f MB/s = %.0f%% of it" % (wtp, 100 * wtp / raw))
# Busy wall time also counts the writer waiting for a core (training, the
# statistics thread and the writer share them); its own CPU time does not.
print("        writer per second of its own CPU: %.0f MB/s = %.0f%% of it"
      % (wcpu, 100 * wcpu / raw))
print("      end to end, training included, no sync: %.0f MB/s" % tp)
lp, la, lb, lc = map(float, sys.argv[21:25])
print("LSTM cell loop in small ops (hidden 64, batch 16, 32 time steps, ~400 API calls a step)")
print("  plain                                   %8.2f ms" % lp)
print("  (a) no step selected, all APIs wrapped  %8.2f ms %.3fx  (target <= 1.03x)" % (la, la / lp))
print("  (b) statistics, every API, every step   %8.2f ms %.3fx  (target <= 1.5x)" % (lb, lb / lp))
ltp, ltb = map(float, sys.argv[25:27])
print("      the training thread's own CPU in (b): %.2f ms %.3fx (the rest of the step is"
      % (ltb, ltb / ltp))
print("      waiting for the writer thread: step end waits for the previous step's file)")
print("  (c) tensor, every API, every step       %8.2f ms %.3fx" % (lc, lc / lp))
print("  (e) task overflow_check, no NaN         %8.2f ms %.3fx" % (le, le / lp))
print("      load average while measuring: %s" % open("/proc/loadavg").read().split()[0])
PY
[ -n "${BENCH_DIR:-}" ] || rm -rf "$work"
