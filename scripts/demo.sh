#!/usr/bin/env bash
# The main job on bundled example data, on the CPU:
#   1. install what is missing and build;
#   2. train examples/train.py twice under the dump shim: fp32 (the bench run)
#      and bf16 autocast (the suspect run), each dumping its tensors and packing
#      its configuration;
#   3. msprobe config_check on the two packs, msprobe compare on the two dumps:
#      bf16 noise alone: no operator introduced error beyond bf16's floor.
#   4. a small GPT (tests/compare/culprit_models.py) in fp32 and under bf16 with
#      one LayerNorm eps planted: compare ranks the suspects, the plant first,
#      and draws them in compare_planted/result.html (its path is the last line).
# Results land in OUT (default ./out): bench_dump/, npu_dump/, *_pack.zip,
# config_check/result.{xlsx,html}, compare/result.{xlsx,html}, gpt_*_dump/,
# compare_planted/result.{xlsx,html}.
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

# bf16 noise alone introduces nothing above bf16's floor. Now a planted bug: the
# small GPT of the culprit scenarios, under bf16 autocast, with one LayerNorm's
# eps changed; compare ranks the suspects and names that call first.
rm -rf "$out"/gpt_bench_dump "$out"/gpt_planted_dump "$out"/compare_planted
gpt="$here/tests/compare/culprit_models.py"
for side in gpt_bench gpt_planted; do
  cat > "$out/$side.json" <<JSON
{ "dump": { "common_dump_settings": { "dump_mode": "mix", "dump_path": "$out/${side}_dump",
                                      "dump_iter": "all", "task": "tensor" },
            "api_list": [] } }
JSON
done
echo "== planted run: small GPT, bf16 autocast, one LayerNorm eps=1.0"
"$msprobe" dump -c "$out/gpt_bench.json" -- "$py" "$gpt" gpt bench none
"$msprobe" dump -c "$out/gpt_planted.json" -- "$py" "$gpt" gpt bf16 ln_eps
# The dumps are mix (APIs and modules): each API record names the module it ran
# in, so the page's model tree shows the GPT's modules; -l api ranks the API
# calls alone (a module under autocast computes in bf16 inside while its
# outputs are fp32, which the ranking of whole modules does not weigh yet).
echo "== compare (planted)"
rc=0; "$msprobe" compare -l api -b "$out/gpt_bench_dump" -c "$out/gpt_planted_dump" -o "$out/compare_planted" --top 3 || rc=$?
[ "$rc" -le 1 ] || exit "$rc"
echo "== done: $out/compare/result.xlsx, $out/compare_planted/result.xlsx, $out/config_check/result.xlsx"
echo "== the planted run's page (open it in a browser; it needs no network):"
echo "$out/compare_planted/result.html"
