#!/bin/sh
# Compare-engine benchmark (not a test). Generates two dump roots of SIZE_MB
# each with msprobe-gen, warms the page cache, then in one run times
#   - msp_compare_run (cmp_bench compare), best of REPS, mmap and pread paths,
#   - the same metrics in numpy (bench/compare/numpy_ref.py under /usr/bin/python3),
#   - the machine's read bandwidth: an OpenMP reduction over a buffer of the
#     same size (cmp_bench membw, built -O2, all cores),
# and prints GB/s of tensor data compared (both sides counted), the ratio to
# numpy, the share of memory bandwidth, and the compare's peak RSS on a small
# and on the big dump (it should not grow with the dump). Deletes the dumps.
# With BASE_BUILD set to another build tree (an older commit's), its cmp_bench
# compares the same dumps too, alternating run by run with ours, and the
# summary prints ours / theirs: the side-by-side speed check of a change.
# Last, the CLI on the big pair (reports written), alternating run by run:
# `msprobe compare` with its default replay against `--replay off`, best of
# REPS each, printed as a ratio (replay's cost on large tensors; the kept
# worker is warmed by one compare first, as for a user's second compare).
#
#   bench/compare/run.sh [BUILD_DIR]     env: SIZE_MB=2048 DTYPE=fp32 THREADS=0 REPS=3 BASE_BUILD=
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:-$HERE/../../build}
SIZE_MB=${SIZE_MB:-2048}
DTYPE=${DTYPE:-fp32}
THREADS=${THREADS:-0}
REPS=${REPS:-3}
PY=${MSPROBE_PYTHON:-/usr/bin/python3}
GEN=$BUILD/bench/compare/msprobe-gen
CB=$BUILD/bench/compare/cmp_bench
for b in "$GEN" "$CB"; do
    [ -x "$b" ] || { echo "run.sh: $b not built (cmake --build $BUILD)" >&2; exit 2; }
done
WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/msprobe-cmp-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM

field() { # field NAME LINE
    echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"
}

echo "== generating: 2 steps x 16 layers, bench fp32, npu $DTYPE, >= $SIZE_MB MiB a side"
"$GEN" --out "$WORK/big" --steps 2 --layers 16 --size-mb "$SIZE_MB" --dtype "$DTYPE" \
    --plant 5 --plant-step 1 --magnitude 0.05 --seed 1
# the small dump has tensors of the same size as the big one, 1/32 of the data:
# the RSS comparison then isolates the dump size
"$GEN" --out "$WORK/small" --steps 1 --layers 1 --size-mb $((SIZE_MB / 32)) --dtype "$DTYPE" \
    --seed 1
du -sh "$WORK/big/bench" "$WORK/big/npu"
cat "$WORK"/big/*/*/*/dump.h5 "$WORK"/small/*/*/*/dump.h5 > /dev/null   # warm the page cache

echo "== msp_compare_run (threads=${THREADS:-0}; 0 = all cores)"
small=$("$CB" compare "$WORK/small/bench" "$WORK/small/npu" "$THREADS")
echo "small: $small"
BASE_CB=""
if [ -n "${BASE_BUILD:-}" ]; then
    BASE_CB=$BASE_BUILD/bench/compare/cmp_bench
    [ -x "$BASE_CB" ] || { echo "run.sh: $BASE_CB not built" >&2; exit 2; }
fi
gmax() { # gmax BEST_LINE NEW_LINE -> the faster of the two
    if [ -z "$1" ] || [ "$(echo "$(field gbps "$2") > $(field gbps "$1")" | bc -l)" = 1 ]; then
        echo "$2"
    else
        echo "$1"
    fi
}
best=""
base_best=""
for io in mmap pread; do
    i=0
    while [ $i -lt "$REPS" ]; do
        line=$("$CB" compare "$WORK/big/bench" "$WORK/big/npu" "$THREADS" 0 "$io")
        echo "big/$io: $line"
        best=$(gmax "$best" "$line")
        if [ -n "$BASE_CB" ]; then
            line=$("$BASE_CB" compare "$WORK/big/bench" "$WORK/big/npu" "$THREADS" 0 "$io")
            echo "base big/$io: $line"
            base_best=$(gmax "$base_best" "$line")
        fi
        i=$((i + 1))
    done
done
bytes=$(field bytes "$best")

echo "== numpy (same metrics, same bytes)"
np_line=$("$PY" "$HERE/numpy_ref.py" "$WORK/big/bench" "$WORK/big/npu")
echo "$np_line"

echo "== memory bandwidth (read-only reduction over $bytes bytes)"
bw_line=$("$CB" membw "$bytes")
echo "$bw_line"

ours=$(field gbps "$best")
np_g=$(field gbps "$np_line")
bw=$(field gbps "$bw_line")
cpu=$(field cpu_s "$best")
wall=$(field seconds "$best")
MSP=$BUILD/src/cli/msprobe
cli_best() { # cli_best BEST SECONDS -> the smaller
    if [ -z "$1" ] || [ "$(echo "$2 < $1" | bc -l)" = 1 ]; then echo "$2"; else echo "$1"; fi
}
cli_on=""
cli_off=""
cli_rline=""
cli_line=""
if [ -x "$MSP" ]; then
    echo "== msprobe compare (CLI, reports written): default replay against --replay off"
    "$MSP" compare -b "$WORK/big/bench" -c "$WORK/big/npu" -o "$WORK/cli" >/dev/null 2>&1 || true
    i=0
    while [ $i -lt "$REPS" ]; do
        for mode in on off; do
            set -- -b "$WORK/big/bench" -c "$WORK/big/npu" -o "$WORK/cli"
            [ $mode = off ] && set -- "$@" --replay off
            t0=$(date +%s.%N)
            out=$("$MSP" compare "$@" 2>&1) || true
            t=$(echo "$(date +%s.%N) - $t0" | bc -l)
            echo "cli/$mode: $(printf '%.2f' "$t") s $(echo "$out" | grep '^replay:' || true)"
            if [ $mode = on ]; then
                [ "$(cli_best "$cli_on" "$t")" = "$t" ] && cli_rline=$(echo "$out" | grep '^replay:' || true)
                cli_on=$(cli_best "$cli_on" "$t")
            else
                cli_off=$(cli_best "$cli_off" "$t")
            fi
        done
        i=$((i + 1))
    done
    cli_line=$(printf 'msprobe compare: %.2f s default, %.2f s --replay off -> the default takes %.0f%% more' \
        "$cli_on" "$cli_off" "$(echo "100 * ($cli_on - $cli_off) / $cli_off" | bc -l)")
    # compare's own account of that best run: replay's seconds of its compare seconds
    rs=$(echo "$cli_rline" | sed -n 's/^replay: \([0-9.]*\) s,.*/\1/p')
    cs=$(echo "$cli_rline" | sed -n 's/.*; compare \([0-9.]*\) s$/\1/p')
    if [ -n "$rs" ] && [ -n "$cs" ]; then
        cli_line=$(printf '%s\n                 replay %s s of the default'"'"'s %s s compare (%.0f%%)' \
            "$cli_line" "$rs" "$cs" "$(echo "100 * $rs / $cs" | bc -l)")
    fi
fi

echo "== summary"
printf 'compare:        %s GB/s (wall %s s, cpu %s s, both sides counted)\n' "$ours" "$wall" "$cpu"
printf 'numpy:          %s GB/s  -> compare is %.1fx numpy\n' "$np_g" "$(echo "$ours / $np_g" | bc -l)"
printf 'memory bw:      %s GB/s  -> compare reaches %.0f%% of it\n' "$bw" "$(echo "100 * $ours / $bw" | bc -l)"
if [ -n "$BASE_CB" ]; then
    bg=$(field gbps "$base_best")
    printf 'baseline:       %s GB/s (%s)  -> ours is %.0f%% of it\n' "$bg" "$BASE_BUILD" \
        "$(echo "100 * $ours / $bg" | bc -l)"
fi
printf 'peak RSS:       %s MiB on %s bytes, %s MiB on %s bytes\n' \
    "$(field rss_mib "$small")" "$(field bytes "$small")" "$(field rss_mib "$best")" "$bytes"
[ -n "$cli_line" ] && echo "$cli_line"
printf 'load average:   %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
