#!/bin/sh
# Compare at scale (a benchmark, not a test): a generated tree of RANKS ranks
# x STEPS steps, timed in one run, side by side:
#   - statistics dumps, LAYERS forward + LAYERS backward records a rank and
#     step (5,000 with the defaults, 12,500 tensor rows): msprobe compare
#     alone, reports included (the default ones: a workbook a rank and the
#     summary; then with --csv too), and under `mpirun -np NP` with --csv,
#     each against the BASE build where one is given; peak RSS of
#     msp_compare_run (everything in memory) against msp_compare_stream (a
#     pair at a time) on the whole tree and on a quarter of its ranks;
#   - a tensor subset, SMALL_LAYERS records a rank and step of NUMEL-element
#     tensors (small: 4 KiB fp32 against 2 KiB bf16), against a few large
#     tensors of the same total bytes, and the same records with float32 on
#     both sides (4 KiB against 4 KiB, as a GPU-vs-NPU pair of one dtype): the per-tensor cost, split into the
#     reader helper's catalogue (msprobe-catalogue, libhdf5 opening every
#     dataset to check /index) and compare's own; and the same subset
#     written with its small tensors packed (msprobe-gen --pack-kib 64,
#     format_version 4: msprobe-dump(5) PACKED TENSORS), side by side.
# Prints one summary at the end; deletes the trees (WORK keeps them when set).
# BASE (another build, e.g. of the last release) runs the same one-process
# compare beside ours, and its cmp_bench the tensor subsets; WHOLE=0 skips the everything-in-memory run and
# SMALL_LAYERS=0 the tensor subset (both long past a few hundred ranks).
#
#   bench/compare/tree.sh [BUILD_DIR]
#     env: RANKS=64 STEPS=2 LAYERS=2500 SMALL_LAYERS=250 NUMEL=1024 NP=2 WORK= BASE= WHOLE=1
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:-$HERE/../../build}
RANKS=${RANKS:-64}
STEPS=${STEPS:-2}
LAYERS=${LAYERS:-2500}
SMALL_LAYERS=${SMALL_LAYERS:-250}
NUMEL=${NUMEL:-1024}
NP=${NP:-2}
BASE=${BASE:-}
WHOLE=${WHOLE:-1}
GEN=$BUILD/bench/compare/msprobe-gen
CB=$BUILD/bench/compare/cmp_bench
MSP=$BUILD/src/cli/msprobe
CAT=$BUILD/src/cli/msprobe-catalogue
for b in "$GEN" "$CB" "$MSP" "$CAT"; do
    [ -x "$b" ] || { echo "tree.sh: $b not built (cmake --build $BUILD)" >&2; exit 2; }
done
KEEP=${WORK:-}
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/var/tmp}/msprobe-tree-bench.XXXXXX")}
[ -n "$KEEP" ] || trap 'rm -rf "$WORK"' EXIT INT TERM
mkdir -p "$WORK"

field() { # field NAME LINE
    echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"
}
now() { date +%s.%N; }
rss_of() { # rss_of FILE: peak RSS in MiB from /usr/bin/time -v output
    sed -n 's/.*Maximum resident set size (kbytes): //p' "$1" | awk '{printf "%.1f", $1 / 1024}'
}

if [ ! -d "$WORK/stats" ]; then
    echo "== generating $RANKS ranks x $STEPS steps: statistics, $((2 * LAYERS)) records a rank and step"
    "$GEN" --out "$WORK/stats" --steps "$STEPS" --ranks "$RANKS" --layers "$LAYERS" --numel 256 \
        --task statistics --dtype bf16 --plant $((LAYERS / 3)) --plant-step $((STEPS - 1)) \
        --plant-rank $((RANKS / 2 + 5)) --magnitude 0.3 --seed 5
    if [ "$SMALL_LAYERS" -gt 0 ]; then
        echo "== generating the tensor subset: $((2 * SMALL_LAYERS)) records of $NUMEL elements"
        for pk in 0 64; do
            out=$WORK/small
            [ "$pk" -eq 0 ] || out=$WORK/packed
            "$GEN" --out "$out" --steps "$STEPS" --ranks "$RANKS" --layers "$SMALL_LAYERS" \
                --numel "$NUMEL" --dtype bf16 --plant $((SMALL_LAYERS / 3)) \
                --plant-step $((STEPS - 1)) --plant-rank $((RANKS / 2 + 5)) --magnitude 0.3 \
                --seed 5 --pack-kib "$pk"
        done
        # the same bytes in 16 large tensors a side and step
        big=$((RANKS * SMALL_LAYERS * NUMEL / 8))
        "$GEN" --out "$WORK/large" --steps "$STEPS" --ranks 2 --layers 4 --numel "$big" \
            --dtype bf16 --seed 5
    fi
    # a quarter of the ranks, for memory against tree size
    mkdir -p "$WORK/quarter/bench" "$WORK/quarter/npu"
    for side in bench npu; do
        s=0
        while [ $s -lt "$STEPS" ]; do
            mkdir -p "$WORK/quarter/$side/step$s"
            r=0
            while [ $r -lt $((RANKS / 4)) ]; do
                mkdir -p "$WORK/quarter/$side/step$s/rank$r"
                ln "$WORK/stats/$side/step$s/rank$r/dump.h5" "$WORK/quarter/$side/step$s/rank$r/"
                r=$((r + 1))
            done
            s=$((s + 1))
        done
    done
fi
if [ "$SMALL_LAYERS" -gt 0 ] && [ ! -d "$WORK/same" ]; then
    echo "== generating the tensor subset with float32 on both sides"
    "$GEN" --out "$WORK/same" --steps "$STEPS" --ranks "$RANKS" --layers "$SMALL_LAYERS" \
        --numel "$NUMEL" --dtype fp32 --plant $((SMALL_LAYERS / 3)) --plant-step $((STEPS - 1)) \
        --plant-rank $((RANKS / 2 + 5)) --magnitude 0.3 --seed 5
fi
du -sh "$WORK/stats/bench" "$WORK/stats/npu"
[ "$SMALL_LAYERS" -gt 0 ] && du -sh "$WORK/small/bench" "$WORK/small/npu" "$WORK/packed/bench" \
    "$WORK/packed/npu" "$WORK/large/bench" \
    "$WORK/large/npu"
# settled DIR...: the last run's reports on disk (their writeback would
# slow the next timed run: a gigabyte of reports a run) and DIR's dumps read
# once, so that every timed run starts alike
settled() {
    sync
    find "$@" -name dump.h5 -exec cat {} + >/dev/null
}
settled "$WORK/stats"

# report_sizes DIR: the workbooks (how many, MiB), result.csv and result.html
report_sizes() {
    nb=$(find "$1" -maxdepth 1 -name 'result*.xlsx' | wc -l)
    xl=$(find "$1" -maxdepth 1 -name 'result*.xlsx' -printf '%s\n' | awk '{s += $1} END {printf "%.1f", s / 1048576}')
    csv=$(find "$1" -maxdepth 1 -name result.csv -printf '%s' | awk '{printf "%.1f", $1 / 1048576}')
    html=$(find "$1" -maxdepth 1 -name result.html -printf '%s' | awk '{printf "%.1f", $1 / 1048576}')
    echo "$nb workbooks $xl MiB, result.csv ${csv:-0} MiB, result.html ${html:-0} MiB"
}
records=$((RANKS * STEPS * 2 * LAYERS))

# one_run BIN NAME [ARG...]: BIN's one-process compare of the statistics tree
# into $WORK/NAME (reports included; its stdout in NAME.stdout, /usr/bin/time's
# in NAME.time); prints the wall seconds
one_run() {
    bin=$1 name=$2
    shift 2
    rm -rf "${WORK:?}/$name"
    settled "$WORK/stats"
    t0=$(now)
    /usr/bin/time -v -o "$WORK/$name.time" "$bin" compare -b "$WORK/stats/bench" \
        -c "$WORK/stats/npu" -o "$WORK/$name" --replay off "$@" > "$WORK/$name.stdout" ||
        [ $? -eq 1 ]
    t1=$(now)
    echo "$t1 - $t0" | bc -l
}
compared_s() { sed -n 's/^compared .* in \([0-9.]*\) s.*/\1/p' "$WORK/$1.stdout"; }

# The reports msprobe writes for many ranks (a workbook a rank and the
# summary) by default, then with result.csv too (--csv: every row of every
# rank in one text file, 1.3 KB a record)
echo "== statistics tree: msprobe compare, one process (reports included)"
one_wall=$(one_run "$MSP" out1)
sed -n '1,6p' "$WORK/out1.stdout"
one_cmp=$(compared_s out1)
one_rss=$(rss_of "$WORK/out1.time")
one_sizes=$(report_sizes "$WORK/out1")
rm -rf "$WORK/out1"
echo "== statistics tree: msprobe compare --csv, one process (reports included)"
csv_wall=$(one_run "$MSP" out1c --csv)
csv_cmp=$(compared_s out1c)
csv_rss=$(rss_of "$WORK/out1c.time")
csv_sizes=$(report_sizes "$WORK/out1c")

base_wall=""
if [ -n "$BASE" ]; then
    echo "== statistics tree: the base build's msprobe compare, one process, then with --csv"
    base_wall=$(one_run "$BASE/src/cli/msprobe" outb)
    base_rss=$(rss_of "$WORK/outb.time")
    base_sizes=$(report_sizes "$WORK/outb")
    rm -rf "$WORK/outb"
    basec_wall=$(one_run "$BASE/src/cli/msprobe" outbc --csv)
    basec_rss=$(rss_of "$WORK/outbc.time")
    cmp -s "$WORK/out1c/result.csv" "$WORK/outbc/result.csv" && bsame=identical || bsame=DIFFERENT
    rm -rf "$WORK/outbc"
fi

echo "== statistics tree: mpirun -np $NP msprobe compare (reports included)"
mpi_wall=""
if command -v mpirun >/dev/null 2>&1 && ldd "$MSP" | grep -q libmpi; then
    root=""
    [ "$(id -u)" = 0 ] && root="--allow-run-as-root"
    rm -rf "$WORK/outn"
    settled "$WORK/stats"
    t0=$(now)
    OMPI_MCA_btl=self,tcp mpirun $root --oversubscribe -np "$NP" "$MSP" compare \
        -b "$WORK/stats/bench" -c "$WORK/stats/npu" -o "$WORK/outn" --csv --replay off \
        > "$WORK/stdoutn" || [ $? -eq 1 ]
    t1=$(now)
    sed -n '1,4p' "$WORK/stdoutn"
    mpi_wall=$(echo "$t1 - $t0" | bc -l)
    mpi_cmp=$(sed -n 's/^compared .* in \([0-9.]*\) s.*/\1/p' "$WORK/stdoutn")
    cmp -s "$WORK/out1c/result.csv" "$WORK/outn/result.csv" && same=identical || same=DIFFERENT
    echo "result.csv against one process: $same"
else
    echo "(msprobe built without MPI, or no mpirun: skipped)"
fi

echo "== memory: everything in memory against a pair at a time"
whole="rss_mib=skipped"
if [ "$WHOLE" = 1 ]; then
    whole=$("$CB" compare "$WORK/stats/bench" "$WORK/stats/npu")
    echo "msp_compare_run, $RANKS ranks:    $whole"
fi
tree=$("$CB" tree "$WORK/stats/bench" "$WORK/stats/npu")
echo "msp_compare_stream, $RANKS ranks: $tree"
quarter=$("$CB" tree "$WORK/quarter/bench" "$WORK/quarter/npu")
echo "msp_compare_stream, $((RANKS / 4)) ranks: $quarter"

rows=$(field tensors "$tree")
if [ "$SMALL_LAYERS" -gt 0 ]; then
    echo "== tensors: small against large, the same bytes"
    settled "$WORK/small" "$WORK/packed" "$WORK/large" "$WORK/same"
    small=$("$CB" tree "$WORK/small/bench" "$WORK/small/npu")
    echo "small: $small"
    fp32=$("$CB" tree "$WORK/same/bench" "$WORK/same/npu")
    echo "float32 both sides: $fp32"
    packed=$("$CB" tree "$WORK/packed/bench" "$WORK/packed/npu")
    echo "packed: $packed"
    large=$("$CB" tree "$WORK/large/bench" "$WORK/large/npu")
    echo "large: $large"
    # the reader helper's part: every file's catalogue, one after the other,
    # as compare gets them (through the helper's server)
    nfiles=$(find "$WORK/small" -name dump.h5 | wc -l)
    # shellcheck disable=SC2046 # the paths are ours: no blanks
    cat_s=$(field seconds "$("$CB" open $(find "$WORK/small" -name dump.h5 | sort))")
    # shellcheck disable=SC2046
    pcat_s=$(field seconds "$("$CB" open $(find "$WORK/packed" -name dump.h5 | sort))")

    srows=$(field tensors "$small")
    # the base build's compare of the same subsets, right after ours
    bsmall="" bpacked="" bfp32=""
    if [ -n "$BASE" ] && [ -x "$BASE/bench/compare/cmp_bench" ]; then
        bsmall=$("$BASE/bench/compare/cmp_bench" tree "$WORK/small/bench" "$WORK/small/npu")
        echo "base small: $bsmall"
        bpacked=$("$BASE/bench/compare/cmp_bench" tree "$WORK/packed/bench" "$WORK/packed/npu")
        echo "base packed: $bpacked"
        bfp32=$("$BASE/bench/compare/cmp_bench" tree "$WORK/same/bench" "$WORK/same/npu")
        echo "base float32 both sides: $bfp32"
    fi
fi
echo "== summary (load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores)"
printf 'statistics tree:  %s ranks x %s steps, %s records, %s tensor rows\n' "$RANKS" "$STEPS" \
    "$records" "$rows"
printf '  one process:    %.1f s wall, %.0f records/s (compare %s s, %.1f us a row; reports the rest), peak RSS %s MiB\n' \
    "$one_wall" "$(echo "$records / $one_wall" | bc -l)" "$one_cmp" \
    "$(echo "1000000 * $one_cmp / $rows" | bc -l)" "$one_rss"
printf '  reports:        %s\n' "$one_sizes"
printf '  with --csv:     %.1f s wall, %.0f records/s (compare %s s), peak RSS %s MiB; %s\n' \
    "$csv_wall" "$(echo "$records / $csv_wall" | bc -l)" "$csv_cmp" "$csv_rss" "$csv_sizes"
if [ -n "$base_wall" ]; then
    printf '  base build:     %.1f s wall, %.0f records/s, peak RSS %s MiB (ours %.2fx its speed); %s\n' \
        "$base_wall" "$(echo "$records / $base_wall" | bc -l)" "$base_rss" \
        "$(echo "$base_wall / $one_wall" | bc -l)" "$base_sizes"
    printf '  base, --csv:    %.1f s wall, %.0f records/s, peak RSS %s MiB (ours %.2fx its speed); result.csv %s\n' \
        "$basec_wall" "$(echo "$records / $basec_wall" | bc -l)" "$basec_rss" \
        "$(echo "$basec_wall / $csv_wall" | bc -l)" "$bsame"
fi
if [ -n "$mpi_wall" ]; then
    printf '  mpirun -np %s:   %.1f s wall, %.0f records/s (compare %s s)\n' "$NP" "$mpi_wall" \
        "$(echo "$records / $mpi_wall" | bc -l)" "$mpi_cmp"
fi
printf '  peak RSS:       %s MiB everything in memory, %s MiB a pair at a time (%s MiB on a quarter of the ranks)\n' \
    "$(field rss_mib "$whole")" "$(field rss_mib "$tree")" "$(field rss_mib "$quarter")"
[ "$SMALL_LAYERS" -gt 0 ] || exit 0
printf 'tensor subset:    %s rows of %s elements, float32 against bfloat16, %s MB: %.3f GB/s; %.1f us a row\n' "$srows" \
    "$NUMEL" "$(echo "$(field bytes "$small") / 1000000" | bc)" "$(field gbps "$small")" \
    "$(echo "1000000 * $(field seconds "$small") / $srows" | bc -l)"
printf '  float32 both sides (4 KiB against 4 KiB), %s MB: %.3f GB/s; %.1f us a row\n' \
    "$(echo "$(field bytes "$fp32") / 1000000" | bc)" "$(field gbps "$fp32")" \
    "$(echo "1000000 * $(field seconds "$fp32") / $srows" | bc -l)"
printf '  packed (--pack-kib 64): %.3f GB/s; %.1f us a row (%.2fx the unpacked speed)\n' \
    "$(field gbps "$packed")" "$(echo "1000000 * $(field seconds "$packed") / $srows" | bc -l)" \
    "$(echo "$(field seconds "$small") / $(field seconds "$packed")" | bc -l)"
if [ -n "$bpacked" ]; then
    printf '  base build:     unpacked %.3f GB/s, packed %.3f GB/s (ours %.2fx and %.2fx its speed)\n' \
        "$(field gbps "$bsmall")" "$(field gbps "$bpacked")" \
        "$(echo "$(field seconds "$bsmall") / $(field seconds "$small")" | bc -l)" \
        "$(echo "$(field seconds "$bpacked") / $(field seconds "$packed")" | bc -l)"
    printf '  base build:     float32 both sides %.3f GB/s (ours %.2fx its speed)\n' \
        "$(field gbps "$bfp32")" "$(echo "$(field seconds "$bfp32") / $(field seconds "$fp32")" | bc -l)"
fi
printf '  large tensors:  %s MB: %.3f GB/s\n' "$(echo "$(field bytes "$large") / 1000000" | bc)" \
    "$(field gbps "$large")"
printf '  catalogues:     %s files in %.1f s one after the other, through the helper'"'"'s server: %.1f us a tensor row (libhdf5 checking /index); packed %.1f s, %.1f us a row\n' \
    "$nfiles" "$cat_s" "$(echo "1000000 * $cat_s / $srows" | bc -l)" "$pcat_s" \
    "$(echo "1000000 * $pcat_s / $srows" | bc -l)"
printf '  compare itself: %.1f s of CPU: %.1f us a row\n' "$(field cpu_s "$small")" \
    "$(echo "1000000 * $(field cpu_s "$small") / $srows" | bc -l)"
