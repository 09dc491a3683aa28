#!/usr/bin/env bash
# Did a refactor change any output? Build two revisions side by side, run the
# same workloads under each, and compare everything they wrote.
#   scripts/sameout.sh BASE_REV [HEAD_REV]      (HEAD_REV: this checkout's HEAD;
#                                                uncommitted changes are not seen)
# Scratch dir SAMEOUT_DIR (default /tmp/sameout):
#   wt/{base,head}     detached git worktrees of the two revisions
#   build/{base,head}  their Release builds (reused when the worktree already
#                      sits at that commit; moved and rebuilt incrementally if not)
#   run/               where every workload runs, under each build in turn, so
#                      absolute paths (stack attributes, packs' env) are equal
#   out/{base,head}    what run/ held after each side
# Workloads (inputs taken from BASE_REV for both sides, so only the build differs):
#   examples/train.py with examples/msprobe.json (2 steps, dumped through
#   `msprobe dump --`), tensor and statistics task, fp32 and bf16 autocast;
#   tests/compare/culprit_models.py through LD_PRELOAD as the tests run it:
#   torchvision resnet18 + SGD momentum (mix, statistics), fp32 noise against
#   bench, and the small GPT + AdamW (api, tensor), bench against bf16 with a
#   planted LayerNorm eps; the torchvision MLP script of
#   tests/dump/test_dump_msprobe_config.py with msprobe's config.json (md5, mix);
#   msprobe compare of each pair (--csv, replay without a time budget),
#   msprobe ls of one dump, msprobe config_check of the two train.py packs.
# Then every file is compared; what is left out, and why, is printed first.
# Prints SAME or DIFF (with the first difference) per artifact; exit status 0
# when all are the same, 1 when something differs, 2 when a workload or a
# build failed. JOBS (default 1) sets make -j; MSPROBE_PYTHON the Python
# (default /usr/bin/python3, which has torch, h5py, numpy and openpyxl);
# SAMEOUT_COMPARE_ONLY=1 compares out/ again without building or running.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 BASE_REV [HEAD_REV]" >&2
  exit 2
fi
scratch=${SAMEOUT_DIR:-/tmp/sameout}
mkdir -p "$scratch"
scratch=$(cd "$scratch" && pwd)
# LD_PRELOAD splits on spaces and colons: the shim's path must have neither.
case "$scratch" in *[\ :]*) echo "sameout: $scratch: no spaces or colons, please" >&2; exit 2 ;; esac
jobs=${JOBS:-1}
py=${MSPROBE_PYTHON:-/usr/bin/python3}
base=$(git -C "$here" rev-parse --verify "$1^{commit}")
head=$(git -C "$here" rev-parse --verify "${2:-HEAD}^{commit}")
run=$scratch/run
t0=$SECONDS
echo "== sameout: base $(git -C "$here" log -1 --format='%h %s' "$base")"
echo "== sameout: head $(git -C "$here" log -1 --format='%h %s' "$head")"

# A worktree at COMMIT in wt/SIDE, built in build/SIDE.
build() {
  local side=$1 commit=$2 wt=$scratch/wt/$1 bd=$scratch/build/$1 how=reused
  mkdir -p "$scratch/wt" "$scratch/build"
  if [ "$(git -C "$wt" rev-parse --show-toplevel 2>/dev/null)" = "$wt" ]; then
    if [ "$(git -C "$wt" rev-parse HEAD)" != "$commit" ]; then
      git -C "$wt" checkout -q --detach "$commit"
      how=rebuilt
    fi
  else
    # --force: the path may still be registered from a scratch dir wiped since.
    rm -rf "$wt"
    git -C "$here" worktree add -q --force --detach "$wt" "$commit"
    how=built
  fi
  # Tests and benchmarks are not needed to run the workloads.
  if [ ! -f "$bd/CMakeCache.txt" ]; then
    nice -n 10 cmake -S "$wt" -B "$bd" -DCMAKE_BUILD_TYPE=Release -DMSPROBE_WERROR=OFF \
      -DMSPROBE_TESTS=OFF -DMSPROBE_BENCH=OFF -DMSPROBE_PYTHON="$py" >"$bd.log" 2>&1 || {
      tail -20 "$bd.log" >&2 || true; echo "sameout: cmake failed for $side, see $bd.log" >&2; exit 2; }
    how=built
  fi
  local t=$SECONDS
  nice -n 10 make -C "$bd" -j"$jobs" >>"$bd.log" 2>&1 || {
    tail -20 "$bd.log" >&2 || true; echo "sameout: build failed for $side, see $bd.log" >&2; exit 2; }
  echo "== build $side: $how at ${commit:0:7} ($((SECONDS - t)) s in make), $bd"
}

# The workloads' inputs, from the base worktree: scripts and configs.
inputs() {
  local wt=$scratch/wt/base in=$scratch/inputs side task dtype
  rm -rf "$in"; mkdir -p "$in"
  cp "$wt/examples/train.py" "$wt/tests/compare/culprit_models.py" "$in/"
  # The MLP scenario lives in a test file: take its SCRIPT as the test does.
  PYTHONDONTWRITEBYTECODE=1 "$py" - "$wt/tests/dump" "$in/mlp.py" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import test_dump_msprobe_config as t
open(sys.argv[2], "w").write(t.SCRIPT)
PY
  # examples/msprobe.json with the dump path, steps and task replaced (comments kept).
  for task in tensor statistics; do
    for dtype in fp32 bf16; do
      side=train_${task}_$dtype
      sed -e "s|\"dump_path\": *\"[^\"]*\"|\"dump_path\": \"./$side\"|" \
          -e 's/"dump_iter": *"[^"]*"/"dump_iter": "0|1"/' \
          -e "s|\"task\": *\"[^\"]*\"|\"task\": \"$task\"|" \
          -e "s|^}\$|  , \"config_check\": { \"output_zip_path\": \"./${side}_pack.zip\" }\n}|" \
          "$wt/examples/msprobe.json" >"$in/$side.json"
      if ! grep -q "\"dump_path\": \"./$side\"" "$in/$side.json" ||
         ! grep -q '"dump_iter": "0|1"' "$in/$side.json" ||
         ! grep -q "\"task\": \"$task\"" "$in/$side.json" ||
         ! grep -q output_zip_path "$in/$side.json"; then
        echo "sameout: examples/msprobe.json no longer has the keys this script sets" >&2
        exit 2
      fi
    done
  done
  # As tests/compare/culprit_suite.py writes them (every API, every step).
  for side in resnet_bench resnet_fp32; do
    printf '{"dump": {"common_dump_settings": {"dump_mode": "mix", "dump_path": "./%s",
      "dump_iter": "all", "task": "statistics"}, "api_list": []}}\n' "$side" >"$in/$side.json"
  done
  for side in gpt_bench gpt_bf16_ln_eps; do
    printf '{"dump": {"common_dump_settings": {"dump_mode": "api", "dump_path": "./%s",
      "dump_iter": "all", "task": "tensor"}, "api_list": []}}\n' "$side" >"$in/$side.json"
  done
  # msprobe's own config.json format, as in test_dump_msprobe_config.py.
  echo '{"task": "md5", "dump_path": "./mlp_md5", "rank": [], "step": [], "level": "mix",
  "statistics": {"scope": [], "list": [], "data_mode": ["all"]}}' >"$in/mlp_config.json"
}

# One workload: NAME MAXRC CMD... in run/, with a fixed, minimal environment.
# Its stdout, stderr and exit status are outputs too (logs/NAME.*).
failed=0
step() {
  local name=$1 maxrc=$2 rc=0
  shift 2
  env -i PATH=/usr/bin:/bin HOME="$scratch/home" LANG=C.UTF-8 LC_ALL=C.UTF-8 TZ=UTC \
    OMP_NUM_THREADS=2 PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1 MSPROBE_PYTHON="$py" \
    nice -n 10 "$@" >"logs/$name.out" 2>"logs/$name.err" || rc=$?
  echo "$rc" >"logs/$name.rc"
  if [ "$rc" -gt "$maxrc" ]; then
    echo "sameout: $side: $name failed (exit $rc):" >&2
    tail -5 "logs/$name.err" | sed 's/^/    /' >&2
    failed=$((failed + 1))
  fi
}

# Every workload under build/SIDE, in run/ (ms: the build, by a link whose path
# is the same for both sides), then run/ becomes out/SIDE.
run_side() {
  side=$1
  local t=$SECONDS m=./ms/src/cli/msprobe shim=$run/ms/src/dump/libmsprobe_preload.so
  rm -rf "${run:?}" "${scratch:?}/home"
  mkdir -p "$run/logs" "$scratch/home"
  cp "$scratch/inputs/"* "$run/"
  ln -s "$scratch/build/$side" "$run/ms"
  cd "$run"
  # msprobe dump finds the shim beside its executable's real path (build/SIDE):
  # MSPROBE_PRELOAD_LIB names it through the link, so LD_PRELOAD reads the same.
  for task in tensor statistics; do
    step "train_${task}_fp32" 0 env MSPROBE_PRELOAD_LIB="$shim" "$m" dump -c "train_${task}_fp32.json" \
      -- "$py" train.py --steps 2 --print-losses
    step "train_${task}_bf16" 0 env MSPROBE_PRELOAD_LIB="$shim" "$m" dump -c "train_${task}_bf16.json" \
      -- "$py" train.py --steps 2 --print-losses --bf16
  done
  # The scenario scripts as the tests start them: LD_PRELOAD and MSPROBE_PATH.
  step resnet_bench 0 env LD_PRELOAD="$shim" MSPROBE_PATH="$run/resnet_bench.json" \
    "$py" culprit_models.py resnet bench none sgdm
  step resnet_fp32 0 env LD_PRELOAD="$shim" MSPROBE_PATH="$run/resnet_fp32.json" \
    "$py" culprit_models.py resnet fp32 none sgdm
  step gpt_bench 0 env LD_PRELOAD="$shim" MSPROBE_PATH="$run/gpt_bench.json" \
    "$py" culprit_models.py gpt bench none adamw
  step gpt_bf16_ln_eps 0 env LD_PRELOAD="$shim" MSPROBE_PATH="$run/gpt_bf16_ln_eps.json" \
    "$py" culprit_models.py gpt bf16 ln_eps adamw
  step mlp_md5 0 env LD_PRELOAD="$shim" MSPROBE_PATH="$run/mlp_config.json" "$py" mlp.py x.npy
  # Exit status 1 is "found differences", expected. No replay budget: a time
  # limit would make the verdicts depend on the machine's load.
  for task in tensor statistics; do
    step "cmp_train_$task" 1 "$m" -f pytorch compare -b "train_${task}_fp32" \
      -c "train_${task}_bf16" -o "cmp_train_$task" --csv --replay-budget 0
  done
  step cmp_resnet 1 "$m" compare -b resnet_bench -c resnet_fp32 -o cmp_resnet --csv --replay-budget 0
  step cmp_gpt 1 "$m" compare -l api -b gpt_bench -c gpt_bf16_ln_eps -o cmp_gpt --csv --top 3 \
    --replay-budget 0
  step ls_train 0 "$m" ls train_tensor_fp32
  step cc_train 1 "$m" -v config_check -c train_tensor_fp32_pack.zip train_tensor_bf16_pack.zip \
    -o cc_train
  cd "$scratch"
  rm "$run/ms"
  rm -rf "$scratch/out/$side"
  mkdir -p "$scratch/out"
  mv "$run" "$scratch/out/$side"
  echo "== run $side: $((SECONDS - t)) s"
}

if [ "${SAMEOUT_COMPARE_ONLY:-0}" = 0 ]; then
  build base "$base"
  build head "$head"
  inputs
  run_side base
  run_side head
fi

# Compare out/base with out/head, file by file. What is not compared, and why,
# is printed first.
echo "== compare out/base with out/head"
rc=0
"$py" - "$scratch/out/base" "$scratch/out/head" "$scratch/inputs" <<'PY' || rc=$?
import csv, fnmatch, io, itertools, json, os, re, sys, zipfile

import h5py
import numpy as np
import openpyxl
from openpyxl.utils import get_column_letter

base_dir, head_dir, inputs_dir = sys.argv[1:4]

# dump.h5 attributes ignored as timestamps, durations, host or pid. The writer
# (src/format/fmt_writer.c root and tensor attributes, src/dump/py_*.c record
# attributes) writes none at this revision, so none is ignored: a new one shows
# up as a difference. Object-header times (H5Pset_obj_track_times) are not
# attributes: the root group keeps HDF5's creation times, which is why dump.h5
# bytes differ between two identical runs and files are compared by structure.
H5_IGNORED_ATTRS = []
# Files holding only a pid and a start time (dump_writer.c's directory claim).
IGNORED_FILES = [".rank*.owner"]
# config_check packs: manifest.json fields that say where and when the pack was
# written (cc_pack_write.c); zip entry dates are not compared either.
PACK_IGNORED = {"manifest.json": ["host", "time", "pid"]}
# xlsx: cell values of every sheet, then every member but the one carrying the
# workbook's creation date.
XLSX_IGNORED_MEMBERS = ["docProps/core.xml"]
# result.csv holds the details sheet's columns: no timing column, compared as bytes.
CSV_TIMING_COLUMNS = []
# Terminal output (logs/*.out, *.err): durations and rates vary from run to run.
LOG_MASKS = [(re.compile(r"\b\d+(?:\.\d+)? s\b"), "<secs> s"),
             (re.compile(r"\(\d+(?:\.\d+)? [KMGT]?i?B/s\)"), "(<rate>)"),
             (re.compile(r"\bpid \d+"), "pid <pid>")]

print("not compared: dump.h5 attributes %s (the dump writes no timestamp, duration, host or pid "
      "attribute); files %s; pack %s; xlsx members %s; csv columns %s; in logs %s"
      % (H5_IGNORED_ATTRS or "none", IGNORED_FILES,
         ", ".join("%s %s" % (k, v) for k, v in PACK_IGNORED.items()) + " and zip dates",
         XLSX_IGNORED_MEMBERS, CSV_TIMING_COLUMNS or "none",
         ", ".join(m.pattern for m, _ in LOG_MASKS)))


def short(v, n=60):
    s = repr(v)
    return s if len(s) <= n else s[:n] + "..."


def first_byte_diff(a, b):
    n = min(len(a), len(b))
    i = next((i for i in range(n) if a[i] != b[i]), n)
    if i == n:
        return "length %d vs %d" % (len(a), len(b))
    line = a.count(b"\n", 0, i) + 1
    return "byte %d (line %d): base %s vs head %s" % (i, line, short(a[max(0, i - 20):i + 30]),
                                                       short(b[max(0, i - 20):i + 30]))


# ---- dump.h5 ----------------------------------------------------------------

def value_key(v):
    """A value as comparable bytes: numbers bit for bit (NaN equals NaN)."""
    if isinstance(v, np.ndarray):
        if v.dtype.hasobject:
            return (v.dtype.str, v.shape, tuple(value_key(x) for x in v.flat))
        return (v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, np.generic):
        return (v.dtype.str, v.tobytes())
    if isinstance(v, (bytes, str)):
        return (type(v).__name__, v)
    return (type(v).__name__, repr(v))


def attrs_diff(path, oa, ob):
    ka = sorted(k for k in oa.attrs if k not in H5_IGNORED_ATTRS)
    kb = sorted(k for k in ob.attrs if k not in H5_IGNORED_ATTRS)
    if ka != kb:
        return "%s: attributes only in base %s, only in head %s" % (
            path, sorted(set(ka) - set(kb)), sorted(set(kb) - set(ka)))
    for k in ka:
        ta, tb = oa.attrs.get_id(k).get_type(), ob.attrs.get_id(k).get_type()
        if not ta.equal(tb):
            return "%s attribute %s: HDF5 type differs" % (path, k)
        va, vb = oa.attrs[k], ob.attrs[k]
        if value_key(va) != value_key(vb):
            return "%s attribute %s: base %s vs head %s" % (path, k, short(va), short(vb))
    return None


def dataset_diff(path, da, db):
    if da.shape != db.shape:
        return "%s: shape %s vs %s" % (path, da.shape, db.shape)
    ta, tb = da.id.get_type(), db.id.get_type()
    if da.dtype != db.dtype or not ta.equal(tb):
        return "%s: dtype %s vs %s (HDF5 type)" % (path, da.dtype, db.dtype)
    la, lb = da.id.get_create_plist().get_layout(), db.id.get_create_plist().get_layout()
    if la != lb:
        return "%s: layout %d vs %d" % (path, la, lb)
    if da.shape is None:                    # null dataspace: no data
        return None
    if da.dtype.hasobject:                  # /index: compound with strings and sequences
        xa, xb = da[()], db[()]
        for i, (ra, rb) in enumerate(zip(xa.flat, xb.flat)):
            for f in (da.dtype.names or [None]):
                fa, fb = (ra[f], rb[f]) if f else (ra, rb)
                if value_key(fa) != value_key(fb):
                    return "%s row %d column %s: base %s vs head %s" % (path, i, f, short(fa),
                                                                        short(fb))
        return None
    # Everything else as the stored bytes, read in the file's own type
    # (bfloat16 stays its 2-byte patterns).
    n = ta.get_size()
    ba = np.empty(da.shape + (n,), np.uint8)
    bb = np.empty(db.shape + (n,), np.uint8)
    if ba.size:
        da.id.read(h5py.h5s.ALL, h5py.h5s.ALL, ba, mtype=ta)
        db.id.read(h5py.h5s.ALL, h5py.h5s.ALL, bb, mtype=tb)
    if not np.array_equal(ba, bb):
        ea, eb = ba.reshape(-1, n), bb.reshape(-1, n)
        i = int(np.nonzero((ea != eb).any(axis=1))[0][0])
        idx = np.unravel_index(i, da.shape) if da.shape else ()
        return "%s: data differs at %s: base %s vs head %s" % (
            path, tuple(int(j) for j in idx), short(da[idx] if da.shape else da[()]),
            short(db[idx] if db.shape else db[()]))
    return None


def h5_diff(a, b):
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        todo = [("/", fa, fb)]
        while todo:
            path, ga, gb = todo.pop(0)
            d = attrs_diff(path, ga, gb)
            if d:
                return d
            if isinstance(ga, h5py.Dataset) or isinstance(gb, h5py.Dataset):
                if not (isinstance(ga, h5py.Dataset) and isinstance(gb, h5py.Dataset)):
                    return "%s: a dataset on one side only" % path
                d = dataset_diff(path, ga, gb)
                if d:
                    return d
                continue
            na, nb = sorted(ga), sorted(gb)
            if na != nb:
                return "%s: members only in base %s, only in head %s" % (
                    path, short(sorted(set(na) - set(nb))), short(sorted(set(nb) - set(na))))
            todo += [(path.rstrip("/") + "/" + n, ga[n], gb[n]) for n in na]
    return None


# ---- xlsx, csv, zip packs, logs ---------------------------------------------

def sheet_rows(ws):
    return ws.iter_rows(values_only=True) if hasattr(ws, "iter_rows") else iter(())


def xlsx_diff(a, b):
    wa = openpyxl.load_workbook(a, read_only=True)
    wb = openpyxl.load_workbook(b, read_only=True)
    try:
        if wa.sheetnames != wb.sheetnames:
            return "sheets %s vs %s" % (wa.sheetnames, wb.sheetnames)
        for name in wa.sheetnames:
            rows = itertools.zip_longest(sheet_rows(wa[name]), sheet_rows(wb[name]), fillvalue=())
            for r, (ra, rb) in enumerate(rows, 1):
                for c, (va, vb) in enumerate(itertools.zip_longest(ra, rb), 1):
                    if value_key(va) != value_key(vb):
                        return "sheet %s cell %s%d: base %s vs head %s" % (
                            name, get_column_letter(c), r, short(va), short(vb))
    finally:
        wa.close()
        wb.close()
    # Same values: the rest (styles and colours, charts, links) byte for byte.
    with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
        ma = [m for m in za.namelist() if m not in XLSX_IGNORED_MEMBERS]
        mb = [m for m in zb.namelist() if m not in XLSX_IGNORED_MEMBERS]
        if ma != mb:
            return "cell values same; members %s vs %s" % (short(ma), short(mb))
        for m in ma:
            if za.read(m) != zb.read(m):
                return "cell values same; member %s: %s" % (m, first_byte_diff(za.read(m),
                                                                               zb.read(m)))
    return None


def csv_diff(a, b):
    ba, bb = open(a, "rb").read(), open(b, "rb").read()
    if ba == bb:
        return None
    # Name the first differing field by its column.
    ra = list(csv.reader(io.StringIO(ba.decode("utf-8", "replace"), newline="")))
    rb = list(csv.reader(io.StringIO(bb.decode("utf-8", "replace"), newline="")))
    header = ra[0] if ra else []
    for i, (x, y) in enumerate(itertools.zip_longest(ra, rb, fillvalue=[]), 1):
        for c, (u, v) in enumerate(itertools.zip_longest(x, y)):
            if u != v:
                col = header[c] if c < len(header) else "#%d" % (c + 1)
                return "line %d column %s: base %s vs head %s" % (i, col, short(u), short(v))
    return first_byte_diff(ba, bb)             # same fields, other quoting or line ends


def json_diff(path, a, b):
    if type(a) != type(b):
        return "%s: base %s vs head %s" % (path, short(a), short(b))
    if isinstance(a, dict):
        if list(a) != list(b):
            return "%s: keys %s vs %s" % (path, short(list(a)), short(list(b)))
        for k in a:
            d = json_diff("%s.%s" % (path, k), a[k], b[k])
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return "%s: %d vs %d entries" % (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = json_diff("%s[%d]" % (path, i), x, y)
            if d:
                return d
        return None
    return None if a == b else "%s: base %s vs head %s" % (path, short(a), short(b))


def pack_diff(a, b):
    with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
        if za.namelist() != zb.namelist():
            return "members %s vs %s" % (za.namelist(), zb.namelist())
        for m in za.namelist():
            xa, xb = za.read(m), zb.read(m)
            if m in PACK_IGNORED:
                ja, jb = json.loads(xa), json.loads(xb)
                for k in PACK_IGNORED[m]:
                    ja.pop(k, None)
                    jb.pop(k, None)
                d = json_diff(m, ja, jb)
                if d:
                    return d
            elif xa != xb:
                return "member %s: %s" % (m, first_byte_diff(xa, xb))
    return None


def masked(data):
    text = data.decode("utf-8", "replace")
    for rx, rep in LOG_MASKS:
        text = rx.sub(rep, text)
    return text.encode()


def log_diff(a, b):
    ba, bb = masked(open(a, "rb").read()), masked(open(b, "rb").read())
    return None if ba == bb else first_byte_diff(ba, bb)


def bytes_diff(a, b):
    ba, bb = open(a, "rb").read(), open(b, "rb").read()
    return None if ba == bb else first_byte_diff(ba, bb)


def kind(rel):
    name = os.path.basename(rel)
    if name.endswith(".h5"):
        return "h5", h5_diff
    if name.endswith(".xlsx"):
        return "xlsx", xlsx_diff
    if name.endswith(".csv"):
        return "csv", csv_diff
    if name.endswith(".zip"):
        return "pack", pack_diff
    if rel.startswith("logs/"):
        return "log", log_diff
    return "bytes", bytes_diff


def files(root):
    out = set()
    for d, _, names in os.walk(root):
        for n in names:
            rel = os.path.relpath(os.path.join(d, n), root)
            if any(fnmatch.fnmatch(n, g) for g in IGNORED_FILES):
                continue
            # The inputs copied in (scripts, configs) are the same by construction.
            if os.path.dirname(rel) == "" and os.path.exists(os.path.join(inputs_dir, rel)):
                continue
            out.add(rel)
    return out


fa, fb = files(base_dir), files(head_dir)
ndiff = 0
for rel in sorted(fa | fb):
    k, fn = kind(rel)
    if rel not in fb or rel not in fa:
        d = "only in " + ("base" if rel in fa else "head")
    else:
        try:
            d = fn(os.path.join(base_dir, rel), os.path.join(head_dir, rel))
        except Exception as e:              # an unreadable file on either side
            d = "cannot compare: %s: %s" % (type(e).__name__, e)
    print("%s  %-5s %s%s" % ("DIFF" if d else "SAME", k, rel, ": " + d if d else ""))
    ndiff += bool(d)
print("%d artifacts, %d differ" % (len(fa | fb), ndiff))
sys.exit(1 if ndiff else 0)
PY
if [ "$failed" -gt 0 ]; then
  echo "== sameout: $failed workload(s) failed (see above): outputs not trusted"
  rc=2
fi
echo "== sameout: $([ "$rc" = 0 ] && echo ALL SAME || echo NOT SAME) ($((SECONDS - t0)) s)"
exit "$rc"
