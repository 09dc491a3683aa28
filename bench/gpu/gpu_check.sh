#!/bin/bash
# One-shot GPU check of msprobe with the prebuilt bundle in .dev (see make_bundle.sh).
#   OUT=/some/empty/dir [PY=python3] bash .dev/gpu_check.sh
# Steps (each under `timeout`, log in $OUT/logs/<step>.log, one line in
# $OUT/summary.txt): setup, a_list_apis, b_resnet_cuda, c_bf16_compare,
# d_compile, e_overhead, f_tests. f runs in the background beside a-d (CPU
# tests, 2 threads each); e runs alone at the end. The whole script keeps to
# GC_DEADLINE seconds (default 335). At the end the logs are packed into
# $OUT/logs.tar.gz and the folder removed (<= 8 files come back).
# GC_STEPS="a c" runs only those steps (setup always runs; default all).
# TEST_JOBS (8), TEST_TIMEOUT (90 s per file), F_BUDGET (170 s) tune step f.
# GC_DEVICE=cpu runs b, c, e on the CPU (a dry run of the checks on a
# machine without CUDA); by default they need CUDA and SKIP without it.
set -u
DEV=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$DEV")
: "${OUT:?set OUT to the output folder}"
mkdir -p "$OUT/logs"
OUT=$(cd "$OUT" && pwd)
L=$OUT/logs
if [ -z "${PY:-}" ]; then  # the first python that imports torch
    for p in python3 /opt/torch/.venv/bin/python3; do
        "$p" -c 'import torch' 2>/dev/null && { PY=$p; break; }
    done
fi
PY=$(command -v "${PY:-python3}") || { echo "no python: ${PY:-python3}" | tee -a "$OUT/summary.txt"; exit 1; }
W=$(mktemp -d /tmp/mspgc.XXXXXX)
DEADLINE=${GC_DEADLINE:-335}
START=$SECONDS
MSPROBE=$DEV/bin/msprobe
GC="$PY $DEV/gpu/gc.py"
export DEV ROOT OUT L PY W MSPROBE GC
export PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$DEV/py
export PATH=$DEV/bin:$PATH

summary() { echo "$*" | tee -a "$OUT/summary.txt"; }
left() { echo $((DEADLINE - (SECONDS - START))); }
# verdict WORD detail...: a step's result, read by run_step
verdict() { echo "$*" > "$W/verdict.$STEP"; }
export -f verdict

# run_step NAME BUDGET RESERVE: run function NAME under timeout, at most BUDGET
# seconds and never into the last RESERVE seconds before the deadline.
run_step() {
    local name=$1 budget=$2 reserve=${3:-0} t0=$SECONDS rc v
    case " setup ${GC_STEPS:-a b c d e f} " in
        *" ${name%%_*} "*) ;;
        *) summary "$(printf '%-15s SKIP  not in GC_STEPS' "$name")"; return;;
    esac
    local avail=$(( $(left) - reserve ))
    (( avail < budget )) && budget=$avail
    if (( budget < 10 )); then
        summary "$(printf '%-15s SKIP  no time left' "$name")"
        return
    fi
    rm -f "$W/verdict.$name"
    STEP=$name timeout -k 5 "$budget" bash -c "STEP=$name; $name" > "$L/$name.log" 2>&1
    rc=$?
    if [ -s "$W/verdict.$name" ]; then v=$(cat "$W/verdict.$name"); else v="FAIL  no verdict"; fi
    (( rc == 124 || rc == 137 )) && v="FAIL  timeout after ${budget}s (partial: $v)"
    summary "$(printf '%-15s %s  (%ds, rc %d)' "$name" "$v" $((SECONDS - t0)) "$rc")"
}

# losses NAME LOG: the LOSS lines of a training log, as "i:hex ..."
losses() { grep '^LOSS' "$1" | awk '{printf "%s:%s ", $2, $3}'; }
export -f losses
# cfg FILE PATH TASK ITER [MODE]: write an msprobe.json
cfg() { printf '{"dump":{"common_dump_settings":{"dump_path":"%s","task":"%s","dump_iter":"%s","dump_mode":"%s"}}}\n' "$2" "$3" "$4" "${5:-api}" > "$1"; }
export -f cfg
# the device b, c, e use: $GCDEV, or empty when they must skip
need_dev() {
    if [ -z "$GCDEV" ]; then verdict "SKIP  no CUDA"; exit 0; fi
}
export -f need_dev

############################################################ setup
setup() {
    echo "== host"; uname -a; nproc; free -g | head -2
    echo "== nvidia-smi -L"; nvidia-smi -L 2>&1 || true
    echo "== python $PY"
    "$PY" - <<'EOF'
import sys, platform
print("python", sys.version.split()[0], platform.machine())
for m in ("torch", "torchvision", "numpy", "h5py", "pandas", "transformers", "openpyxl", "triton"):
    try:
        mod = __import__(m)
        print(f"{m:12s} {getattr(mod, '__version__', '?'):14s} {getattr(mod, '__file__', '')}")
    except Exception as e:
        print(f"{m:12s} MISSING ({type(e).__name__}: {e})")
import torch
print("cuda available", torch.cuda.is_available(), "torch.version.cuda", torch.version.cuda,
      "cudnn", torch.backends.cudnn.version() if torch.cuda.is_available() else None)
if torch.cuda.is_available():
    print("device 0:", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))
EOF
    echo "== cc"; command -v cc gcc clang 2>&1 || echo "no C compiler (inductor/triton may need one)"
    echo "== libraries linked from .dev/lib (missing on this system): $(ls /tmp/msplib 2>/dev/null | tr '\n' ' ')"
    local bad=0
    for f in "$DEV"/bin/* "$DEV"/lib/libmsprobe_*.so "$DEV"/build/tests/*/* "$DEV"/build/bench/*/*; do
        echo "== ldd $f"
        ldd "$f" 2>&1 | tee "$W/ldd.out"
        grep -Eq 'not found|version .* not found' "$W/ldd.out" && { echo "!! unresolved in $f"; bad=1; }
    done
    echo "== readelf -d libmsprobe_py.so (no libpython expected)"
    readelf -d "$DEV/lib/libmsprobe_py.so" 2>/dev/null | grep -E 'NEEDED|RPATH|RUNPATH' || echo "(no readelf)"
    readelf -d "$DEV/lib/libmsprobe_py.so" 2>/dev/null | grep -q 'libpython' && { echo "!! links libpython"; bad=1; }
    echo "== msprobe --version"; "$MSPROBE" --version || bad=1
    if (( bad )); then verdict "FAIL  unresolved libraries or msprobe does not start (see setup.log)"
    else verdict "PASS  $(nvidia-smi -L 2>/dev/null | head -1 | cut -c1-60); libs ok; $(cat "$W/torchver" 2>/dev/null)"; fi
}
export -f setup

############################################################ a. --list-apis
a_list_apis() {
    "$MSPROBE" dump --list-apis -- "$PY" > "$W/apis.txt" 2> "$W/apis.err"
    local rc=$? n
    echo "rc $rc"; cat "$W/apis.err"; grep '^#' "$W/apis.txt"
    n=$(grep -vc '^#' "$W/apis.txt")
    echo "apis listed: $n"
    grep -i 'scaled_dot_product' "$W/apis.txt"
    cp "$W/apis.txt" "$L/a_apis.txt"
    if grep -q 'scaled_dot_product_attention' "$W/apis.txt"; then
        verdict "PASS  $n APIs, scaled_dot_product_attention listed (rc $rc)"
    elif [ "$TORCH_MAJOR" -lt 2 ]; then
        verdict "SKIP  torch $TORCH_VER < 2 has no scaled_dot_product_attention ($n APIs, rc $rc)"
    else
        verdict "FAIL  scaled_dot_product_attention not listed ($n APIs, rc $rc)"
    fi
}
export -f a_list_apis

############################################################ b. resnet18 under the shim on cuda
b_resnet_cuda() {
    need_dev
    local d=$W/b fails=""
    mkdir -p "$d"
    cfg "$d/stats.json" "$d/dump_stats" statistics all
    cfg "$d/tensor.json" "$d/dump_tensor" tensor all
    echo "== no shim"
    $GC resnet --device "$GCDEV" --steps 2 --save-input "$d/x.npy" > "$d/plain.log" 2>&1; echo "rc $?"; cat "$d/plain.log"
    echo "== statistics"
    "$MSPROBE" dump -c "$d/stats.json" -- $GC resnet --device "$GCDEV" --steps 2 > "$d/stats.log" 2>&1; local rs=$?
    echo "rc $rs"; cat "$d/stats.log"
    echo "== tensor"
    "$MSPROBE" dump -c "$d/tensor.json" -- $GC resnet --device "$GCDEV" --steps 2 > "$d/tensor.log" 2>&1; local rt=$?
    echo "rc $rt"; cat "$d/tensor.log"
    local lp ls lt
    lp=$(losses "$d/plain.log"); ls=$(losses "$d/stats.log"); lt=$(losses "$d/tensor.log")
    echo "losses plain : $lp"; echo "losses stats : $ls"; echo "losses tensor: $lt"
    [ -n "$lp" ] && [ "$lp" = "$ls" ] && [ "$lp" = "$lt" ] || fails+="losses differ or missing; "
    (( rs == 0 && rt == 0 )) || fails+="training rc stats $rs tensor $rt; "
    echo "== check tensor dump"
    $GC check --dump "$d/dump_tensor" --task tensor --input "$d/x.npy" --device "$DEVNAME" || fails+="tensor dump check; "
    echo "== check statistics dump (and vs the tensor run's data)"
    $GC check --dump "$d/dump_stats" --task statistics --input "$d/x.npy" --device "$DEVNAME" \
        --tensor-dump "$d/dump_tensor" || fails+="statistics dump check; "
    echo "== msprobe ls (head)"
    "$MSPROBE" ls "$d/dump_stats" > "$d/ls.txt" 2>&1; local rl=$?
    head -40 "$d/ls.txt"; echo "ls rc $rl"
    (( rl == 0 )) || fails+="msprobe ls rc $rl; "
    du -sh "$d"/dump_*
    if [ -z "$fails" ]; then verdict "PASS  losses bit-identical ($lp), devices $DEVNAME, stats/data/crc match"
    else verdict "FAIL  $fails"; fi
}
export -f b_resnet_cuda

############################################################ c. fp32 vs bf16 + compare
c_bf16_compare() {
    need_dev
    local d=$W/c fails="" model=encoder note=""
    mkdir -p "$d"
    "$PY" -c "from transformers import LlamaConfig, LlamaForCausalLM" 2>/dev/null && model=llama
    local models=$model; [ $model = llama ] && models="llama encoder"
    for model in $models; do
        fails=""
        for t in fp32 bf16; do
            cfg "$d/$t.json" "$d/dump_${model}_$t" tensor "0|1" mix
            echo "== $model $t"
            "$MSPROBE" dump -c "$d/$t.json" -- $GC lm --device "$GCDEV" --dtype $t --model $model > "$d/${model}_$t.log" 2>&1
            local r=$?; echo "rc $r"; cat "$d/${model}_$t.log"
            (( r == 0 )) || fails+="$model $t run rc $r; "
        done
        [ -z "$fails" ] && break
        if [ $model = llama ]; then
            # a shim failure, or a llama that does not run here at all?
            echo "== llama fp32 without the shim"
            $GC lm --device "$GCDEV" --dtype fp32 --model llama > "$d/llama_plain.log" 2>&1
            local rp=$?; echo "rc $rp"; tail -30 "$d/llama_plain.log"
            if (( rp == 0 )); then break; fi
            note="llama does not run here even without the shim (rc $rp), encoder used; "
        fi
    done
    if [ -n "$fails" ]; then verdict "FAIL  $note$fails"; exit 0; fi
    echo "losses fp32: $(losses "$d/${model}_fp32.log")"; echo "losses bf16: $(losses "$d/${model}_bf16.log")"
    echo "== msprobe compare"
    ( cd "$d" && time "$MSPROBE" compare -b "dump_${model}_fp32" -c "dump_${model}_bf16" -o out ) > "$d/cmp.log" 2>&1
    local rc=$?
    cat "$d/cmp.log"; echo "compare rc $rc"
    cp "$d/cmp.log" "$L/c_compare_stdout.txt"
    local first
    first=$(grep -m1 -E 'first introduced error|no introduced error' "$d/cmp.log" | cut -c1-160)
    echo "== result.xlsx"
    $GC xlsx "$d/out/result.xlsx" > "$d/xlsx.log" 2>&1; local rx=$?
    cat "$d/xlsx.log"
    local rows; rows=$(awk '/^ROWS/{print $2}' "$d/xlsx.log")
    (( rx == 0 )) || fails+="xlsx unreadable (rc $rx); "
    (( rc == 0 || rc == 1 )) || fails+="compare rc $rc; "
    if [ -z "$fails" ]; then verdict "PASS  $note$model: compare rc $rc, xlsx rows $rows; $first"
    else verdict "FAIL  $note$model: $fails compare rc $rc, rows ${rows:-?}; $first"; fi
}
export -f c_bf16_compare

############################################################ d. torch.compile under the shim
d_compile_pair() {  # BACKEND: no-shim and shim runs side by side, fresh caches each
    local d=$W/d b=$1
    cfg "$d/cfg_$b.json" "$d/dump_$b" statistics all
    TORCHINDUCTOR_CACHE_DIR=$d/cache_plain_$b TRITON_CACHE_DIR=$d/triton_plain_$b \
        $GC compile --device "$GCDEV" --backend "$b" > "$d/plain_$b.log" 2>&1 &
    local p1=$!
    TORCHINDUCTOR_CACHE_DIR=$d/cache_shim_$b TRITON_CACHE_DIR=$d/triton_shim_$b \
        "$MSPROBE" dump -c "$d/cfg_$b.json" -- $GC compile --device "$GCDEV" --backend "$b" \
        > "$d/shim_$b.out" 2> "$d/shim_$b.err" &
    local p2=$!
    wait $p1; echo $? > "$d/rc_plain_$b"
    wait $p2; echo $? > "$d/rc_shim_$b"
}
export -f d_compile_pair
d_compile() {
    if [ "$TORCH_MAJOR" -lt 2 ]; then verdict "SKIP  torch $TORCH_VER has no torch.compile"; exit 0; fi
    need_dev
    local d=$W/d b fails=""
    mkdir -p "$d"
    for b in inductor aot_eager; do
        echo "== backend $b (plain and shim, in parallel)"
        d_compile_pair $b
        echo "-- plain rc $(cat "$d/rc_plain_$b")"; tail -30 "$d/plain_$b.log"
        echo "-- shim rc $(cat "$d/rc_shim_$b")"; cat "$d/shim_$b.out"; tail -40 "$d/shim_$b.err"
        [ "$(cat "$d/rc_plain_$b")" = 0 ] && break
        echo "backend $b fails without the shim too: trying the next"
    done
    local lp ls n rcs
    lp=$(losses "$d/plain_$b.log"); ls=$(losses "$d/shim_$b.out"); rcs=$(cat "$d/rc_shim_$b")
    n=$(grep -c 'what runs inside compiled graphs' "$d/shim_$b.err")
    echo "backend $b; losses plain: $lp"; echo "losses shim : $ls"; echo "compile warnings: $n"
    local dirs; dirs=$(cd "$d/dump_$b" 2>/dev/null && ls -d step*/rank* | tr '\n' ' ')
    echo "dump files: $dirs"
    local other; other=$(grep -c 'another process already writes' "$d/shim_$b.err")
    [ "$(cat "$d/rc_plain_$b")" = 0 ] || fails+="plain run fails with every backend; "
    [ "$rcs" = 0 ] || fails+="shim run rc $rcs; "
    [ -n "$lp" ] && [ "$lp" = "$ls" ] || fails+="losses differ; "
    [ "$n" = 1 ] || fails+="compile warning printed $n times; "
    local note="dump dirs: $(echo $dirs | cut -c1-80); 'another process writes' warnings: $other"
    if [ -z "$fails" ]; then verdict "PASS  backend $b, losses identical, 1 compile warning; $note"
    else verdict "FAIL  backend $b: $fails $note"; fi
}
export -f d_compile

############################################################ e. step-time overhead
e_overhead() {
    need_dev
    local d=$W/e
    mkdir -p "$d"
    cfg "$d/all.json" "$d/dump_all" statistics all
    cfg "$d/none.json" "$d/dump_none" statistics 100000
    local common="resnet --device $GCDEV --batch 32 --size 224 --warmup 5 --steps 20"
    [ "$GCDEV" = cpu ] && common="resnet --device cpu --batch 4 --size 64 --warmup 2 --steps 5"
    echo "== plain";  $GC $common > "$d/plain.log" 2>&1; echo "rc $?"; cat "$d/plain.log"
    echo "== shim, statistics, every step"
    "$MSPROBE" dump -c "$d/all.json" -- $GC $common > "$d/all.log" 2>&1; echo "rc $?"; cat "$d/all.log"
    echo "== shim, statistics, no step selected"
    "$MSPROBE" dump -c "$d/none.json" -- $GC $common > "$d/none.log" 2>&1; echo "rc $?"; cat "$d/none.log"
    du -sh "$d/dump_all" "$d/dump_none" 2>/dev/null
    "$PY" - "$d" <<'EOF' | tee "$d/ratio.txt"
import json, statistics, sys
d = sys.argv[1]
def times(n):
    for line in open(f"{d}/{n}.log"):
        if line.startswith("TIMES"):
            return json.loads(line[6:])
    return None
t = {n: times(n) for n in ("plain", "all", "none")}
for n, v in t.items():
    if v:
        print(f"{n:6s} median {statistics.median(v)*1e3:8.2f} ms  mean {statistics.mean(v)*1e3:8.2f} ms  min {min(v)*1e3:8.2f} ms  n {len(v)}")
if all(t.values()):
    p = statistics.median(t["plain"])
    print(f"RATIO all-steps {statistics.median(t['all'])/p:.2f}x  no-step {statistics.median(t['none'])/p:.3f}x (medians)")
EOF
    local lp la ln; lp=$(losses "$d/plain.log"); la=$(losses "$d/all.log"); ln=$(losses "$d/none.log")
    local r; r=$(grep '^RATIO' "$d/ratio.txt")
    if [ -z "$r" ]; then verdict "FAIL  a run gave no timings"
    elif [ "$lp" != "$la" ] || [ "$lp" != "$ln" ]; then verdict "FAIL  losses differ; $r"
    else verdict "PASS  ${r#RATIO } ($GCDEV, losses identical)"; fi
}
export -f e_overhead

############################################################ f. project tests using the preload
f_tests() {
    local B=$DEV/build d=$W/f
    mkdir -p "$d"
    # name|env|script args ; longest first
    cat > "$d/list" <<EOF
dump_every_op_seen_once||tests/dump/test_dump_ops.py
compare_culprit_scenarios_real_models|CMP_DUMP_METRICS=$B/tests/compare/cmp_dump_metrics|tests/compare/test_cmp_scenarios.py
dump_crash_safe_steps_and_signals||tests/dump/test_dump_crashsafe.py $B/tests/dump/libmsp_slow_disk.so
dump_fork_workers_and_ranks||tests/dump/test_dump_procs.py
config_check_real_runs_under_shim||tests/configcheck/test_cc_runs.py
dump_steps_names_and_triggers||tests/dump/test_dump_steps.py
dump_values_bit_identical||tests/dump/test_dump_values.py
dump_values_through_deferred_host_copies|MSPROBE_TEST_HOST_COPY=1|tests/dump/test_dump_values.py
dump_apis_discovered_and_callables_by_name||tests/dump/test_dump_discovery.py
dump_writing_processes_one_runtime||tests/dump/test_dump_writers.py
dump_config_errors_exit_before_training||tests/dump/test_dump_errors.py
dump_driven_by_msprobe_config_json||tests/dump/test_dump_msprobe_config.py
config_check_gpu_vs_npu_meanings||tests/configcheck/test_cc_gpu_npu.py
config_check_collects_parsed_arguments||tests/configcheck/test_cc_collect_args.py
config_check_secrets_corpus||tests/configcheck/test_cc_secrets_corpus.py
dump_durable_files_synced||tests/dump/test_dump_durable.py $B/tests/dump/libmsp_sync_spy.so
dump_preload_harmless_outside_torch||tests/dump/test_dump_preload.py
dump_producer_links||tests/dump/test_dump_links.py
dump_statistics_match_numpy||tests/dump/test_dump_statistics.py
dump_accel_copy_order_of_operations||tests/dump/test_accel_copy.py
EOF
    export FD=$d B
    one_test() {
        local name=${1%%|*} rest=${1#*|} envs script t0=$SECONDS rc
        envs=${rest%%|*}; script=${rest#*|}
        local sargs=($script)
        mkdir -p "$FD/run/$name"
        cd "$FD/run/$name" || return
        # env execs timeout, which leads a process group of its own: $! names it
        env MSPROBE_BIN="$DEV/bin/msprobe" MSPROBE_SOURCE_DIR="$ROOT" \
            MSPROBE_BUILD_DIR="$B" MSPROBE_PYTHON="$PY" PYTHONPATH="$ROOT/tests/lib:$DEV/py" \
            MSPROBE_PRELOAD_LIB="$DEV/lib/libmsprobe_preload.so" OMP_NUM_THREADS=2 $envs \
            timeout -s INT -k 5 "${TEST_TIMEOUT:-90}" "$PY" "$ROOT/tests/lib/msp_run_unittest.py" "$ROOT/${sargs[0]}" "${sargs[@]:1}" \
            > "$FD/$name.log" 2>&1 &
        echo $! >> "$FD/pids"
        wait $!
        rc=$?
        local v=FAIL; case $rc in 0) v=PASS;; 77) v=SKIP;; 124|137) v=TIMEOUT;; esac
        printf '%-48s %-7s rc %-3d %3ds\n' "$name" "$v" "$rc" $((SECONDS - t0)) >> "$FD/table"
    }
    export -f one_test
    tr '\n' '\0' < "$d/list" | xargs -0 -P "${TEST_JOBS:-8}" -I{} bash -c 'one_test "$@"' _ {}
    sort -k2,2 -k1,1 "$d/table" > "$L/f_table.txt"
    cat "$L/f_table.txt"
    local n np nf ns
    n=$(wc -l < "$d/table"); np=$(grep -c ' PASS ' "$d/table"); ns=$(grep -c ' SKIP ' "$d/table")
    nf=$((n - np - ns))
    : > "$L/f_failures.txt"
    for name in $(awk '$2!="PASS"{print $1}' "$d/table"); do
        { echo "######## $name ($(awk -v n="$name" '$1==n{print $2, $3, $4}' "$d/table"))"
          tail -60 "$d/$name.log"; echo; } >> "$L/f_failures.txt"
    done
    mkdir -p "$L/f_logs"; cp "$d"/*.log "$L/f_logs/" 2>/dev/null
    local failed; failed=$(awk '$2!="PASS" && $2!="SKIP"{printf "%s ", $1}' "$d/table")
    if (( nf == 0 )); then verdict "PASS  $np passed, $ns skipped of $n files"
    else verdict "FAIL  $nf failed, $np passed, $ns skipped of $n: $failed"; fi
}
export -f f_tests

############################################################ main
: > "$OUT/summary.txt"
summary "msprobe gpu_check $(date -u +%FT%TZ) on $(hostname); python $PY; tree $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'); bundle: $(cat "$DEV/BUILD_INFO" 2>/dev/null)"
# libraries the system lacks: link them into /tmp/msplib (system ones stay in use)
LIBD=/tmp/msplib
rm -rf "$LIBD"; mkdir -p "$LIBD"
LDCONFIG=$(command -v ldconfig || echo /sbin/ldconfig)
"$LDCONFIG" -p > "$W/ldcache" 2>/dev/null || : > "$W/ldcache"
for f in "$DEV"/lib/*.so*; do
    so=$(basename "$f")
    case $so in libmsprobe_*) continue;; esac
    grep -q "^[[:space:]]*$so " "$W/ldcache" || ln -sf "$f" "$LIBD/$so"
done
export LD_LIBRARY_PATH=$LIBD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# then whatever ldd still cannot find (no ldconfig, odd paths): until nothing changes
for i in 1 2 3 4 5; do
    added=0
    for f in "$DEV"/bin/* "$DEV"/lib/libmsprobe_py.so "$DEV"/build/tests/*/* "$DEV"/build/bench/*/*; do
        for so in $(ldd "$f" 2>/dev/null | awk '/not found/{print $1}'); do
            [ -e "$DEV/lib/$so" ] && [ ! -e "$LIBD/$so" ] && { ln -sf "$DEV/lib/$so" "$LIBD/$so"; added=1; }
        done
    done
    (( added )) || break
done
TORCH_VER=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)
TORCH_MAJOR=${TORCH_VER%%.*}; [[ $TORCH_MAJOR =~ ^[0-9]+$ ]] || TORCH_MAJOR=0
TORCH_MAJOR=${GC_TORCH_MAJOR:-$TORCH_MAJOR}   # override: local dry runs only
HAS_CUDA=$("$PY" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)
if [ -n "${GC_DEVICE:-}" ]; then GCDEV=$GC_DEVICE
elif [ "$HAS_CUDA" = 1 ]; then GCDEV=cuda
else GCDEV=""; fi
DEVNAME=$GCDEV; [ "$GCDEV" = cuda ] && DEVNAME=cuda:0
echo "torch $TORCH_VER cuda $HAS_CUDA" > "$W/torchver"
export TORCH_VER TORCH_MAJOR HAS_CUDA GCDEV DEVNAME
export -f summary left

run_step setup 60 0
# f: CPU tests in the background, beside the GPU steps a-d
( run_step f_tests "${F_BUDGET:-170}" 90 ) &
FPID=$!
RES_E=${E_RESERVE:-95}   # kept for e, which runs alone at the end
run_step a_list_apis 45 "$RES_E"
run_step b_resnet_cuda 80 "$RES_E"
run_step c_bf16_compare 90 "$RES_E"
run_step d_compile 120 "$RES_E"
wait $FPID
# a test still running past f's own timeout (its `timeout` leads a process group
# of its own): end those groups before the timing step
for p in $(cat "$W/f/pids" 2>/dev/null); do
    if ps -o pid=,etimes=,args= -g "$p" > "$W/left" 2>/dev/null; then
        summary "leftover processes of test group $p, killed: $(cut -c1-150 "$W/left" | tr '\n' ';')"
        kill -- -"$p" 2>/dev/null
    fi
done
run_step e_overhead 100 8
summary "total $((SECONDS - START))s"

# pack: summary.txt, f_table.txt, f_failures.txt, c_compare_stdout.txt, logs.tar.gz
for f in f_table.txt f_failures.txt c_compare_stdout.txt; do [ -f "$L/$f" ] && cp "$L/$f" "$OUT/"; done
tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$L"
ls -la "$OUT"
rm -rf "$W"
