#!/usr/bin/env bash
# The main job on bundled example data, on the CPU:
#   1. install what is missing and build;
#   2. train examples/train.py twice under the dump shim: fp32 (the bench run)
#      and bf16 autocast (the suspect run), each dumping its tensors and packing
#      its configuration;
#   3. msprobe config_check on the two packs, msprobe compare on the two dumps:
#      prints the first operator that introduced an error.
# Results land in OUT (default ./out): bench_dump/, npu_dump/, *_pack.zip,
# config_check/result.xlsx, compare/result.xlsx.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$here/out}" && cd "${1:-$here/out}" && pwd)
py=${MSPROBE_PYTHON:-/usr/bin/python3}

"$here/scripts/bootstrap.sh" "$here/build"
msprobe="$here/build/src/cli/msprobe"

rm -rf "$out"/bench_dump "$out"/npu_dump "$out"/compare "$out"/config_check "$out"/*_pack.zip
for side in bench npu; do
  cat > "$out/$side.json" <<JSON
// msprobe.json for the $side run (see man msprobe.json.5)
{
  "dump": {
    "common_dump_settings": {
      "dump_mode": "mix",            // APIs and modules
      "dump_path": "$out/${side}_dump",
      "dump_iter": "0|1",            // the first two steps
      "task": "tensor"
    },
    "api_list": []                   // every supported API
  },
  "config_check": { "output_zip_path": "$out/${side}_pack.zip" }
}
JSON
done

echo "== bench run: fp32"
"$msprobe" dump -c "$out/bench.json" -- "$py" "$here/examples/train.py" --steps 3
echo "== suspect run: bf16 autocast"
"$msprobe" dump -c "$out/npu.json" -- "$py" "$here/examples/train.py" --steps 3 --bf16

# Exit status 1 means "found differences": expected here; 2 would be an error.
echo "== config_check"
rc=0; "$msprobe" config_check -c "$out/bench_pack.zip" "$out/npu_pack.zip" -o "$out/config_check" || rc=$?
[ "$rc" -le 1 ] || exit "$rc"
echo "== compare"
rc=0; "$msprobe" -f pytorch compare -b "$out/bench_dump" -c "$out/npu_dump" -o "$out/compare" || rc=$?
[ "$rc" -le 1 ] || exit "$rc"
echo "== done: $out/compare/result.xlsx, $out/config_check/result.xlsx"
