"""Culprit scenarios shared by tests/compare/test_cmp_scenarios.py and
bench/culprit/run.py: dump real training runs (culprit_models.py) under the
real preload shim, compare them with msprobe, and score the ranked suspects.

The planted record of an argument plant is found from the dumps alone
(h5py): the step-0 forward record whose recorded non-tensor arguments differ
between the two runs. A hidden plant (hid_*: same arguments, another kernel
below the recorded API) is named from the model code (HIDDEN_RECORD), and
hidden_check() confirms it in the dumps: that record's arguments equal, its
output not. So the score never depends on msprobe's own naming of the plant.
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import h5py
from msp_h5dump import record_attrs

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "culprit_models.py")
PYTHON = os.environ.get("MSPROBE_PYTHON", "/usr/bin/python3")
PRELOAD = os.environ.get("MSPROBE_PRELOAD_LIB", "")
BIN = os.environ.get("MSPROBE_BIN", "msprobe")

# (model, noise, plant): plant "none" is a control. The bench side of every
# scenario is (model, "bench", "none").
SCENARIOS = [
    ("gpt", "none", "gelu_tanh"), ("gpt", "fp32", "gelu_tanh"),
    ("gpt", "fp32", "ln_eps"), ("gpt", "fp32", "attn_scale"), ("gpt", "fp32", "smoothing"),
    ("gpt", "bf16", "ln_eps"), ("gpt", "bf16", "attn_scale"),
    ("gpt", "fp32", "none"), ("gpt", "bf16", "none"),
    ("vit", "fp32", "gelu_tanh"), ("vit", "fp32", "ln_eps"), ("vit", "bf16", "ln_eps"),
    ("vit", "fp32", "smoothing"), ("vit", "fp32", "none"), ("vit", "bf16", "none"),
    ("resnet", "none", "bn_eps"), ("resnet", "fp32", "bn_eps"), ("resnet", "bf16", "bn_eps"),
    ("resnet", "fp32", "smoothing"), ("resnet", "fp32", "none"), ("resnet", "bf16", "none"),
    ("lstm", "fp32", "smoothing"), ("lstm", "fp32", "none"), ("lstm", "bf16", "none"),
]


def config(dump_path, level="api", task="tensor"):
    return {"dump": {"common_dump_settings": {"dump_mode": level, "dump_path": dump_path,
                                              "dump_iter": "all", "task": task},
                     "api_list": []}}


def full(sc):
    """A scenario as (model, noise, plant, optimizer, level); the short form
    (model, noise, plant) trains with plain SGD and dumps at api level."""
    return tuple(sc) + ("sgd", "api")[len(sc) - 3:]


def bench_of(sc):
    """The trusted run a scenario is compared against: same model, optimizer, level."""
    m, _, _, opt, level = full(sc)
    return (m, "bench", "none", opt, level)


def tag_of(sc):
    m, noise, plant, opt, level = full(sc)
    tag = "%s-%s-%s" % (m, noise, plant)
    if opt != "sgd":
        tag += "-" + opt
    if level != "api":
        tag += "-" + level
    return tag


def run_dump(work, model, noise, plant, opt="sgd", level="api"):
    """Dump one run into work/<tag>; returns that dump root."""
    tag = tag_of((model, noise, plant, opt, level))
    root = os.path.join(work, tag)
    if os.path.isdir(root):
        return root
    cfg = os.path.join(work, tag + ".json")
    with open(cfg, "w") as f:
        json.dump(config(root, level), f)
    env = dict(os.environ, LD_PRELOAD=PRELOAD, MSPROBE_PATH=cfg, OMP_NUM_THREADS="2")
    env.pop("MSPROBE_LOG_FILE", None)
    env.pop("ATEN_CPU_CAPABILITY", None)
    if noise == "kernel":  # the generic (no AVX2/AVX512) CPU kernels, read at import
        env["ATEN_CPU_CAPABILITY"] = "default"
    p = subprocess.run([PYTHON, MODELS, model, noise, plant, opt], cwd=work, env=env,
                       capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError("%s failed:\n%s" % (tag, p.stderr[-3000:]))
    return root


def run_dumps(work, runs, jobs=2):
    """Dump several scenarios' runs, jobs at a time."""
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        list(ex.map(lambda r: run_dump(work, *full(r)), runs))


def _string_attrs(attrs):
    """A record's arguments: its attributes but the autocast state it ran
    under (the noise of a bf16 run, not a plant) and its call site (a line
    number of culprit_models.py: dumps kept in CULPRIT_WORK across an edit
    of it differ there, and no plant is a call site)."""
    return {k: v for k, v in attrs.items() if k not in ("autocast", "stack")}


def _records(f):
    """A step file's records in execution order, and their attributes."""
    order = {r["record"].decode(): int(r["order"]) for r in f["index"][()]}
    attrs = record_attrs(f)
    return sorted(order, key=order.get), lambda name: _string_attrs(attrs.get(name, {}))


def planted_record(bench_root, cmp_root):
    """The step-0 forward record whose non-tensor arguments differ, or None."""
    with h5py.File(os.path.join(bench_root, "step0", "rank0", "dump.h5"), "r") as b, \
            h5py.File(os.path.join(cmp_root, "step0", "rank0", "dump.h5"), "r") as c:
        (bnames, battrs), (cnames, cattrs) = _records(b), _records(c)
        for name in cnames:
            if name.endswith(".forward") and name in bnames and battrs(name) != cattrs(name):
                return name
    return None


SUSPECT = re.compile(r"^\s+(\d+)\. step (\d+) rank (\d+) (before )?(\S+)")


def compare(bench_root, cmp_root, out, top=5):
    """Run msprobe compare; returns (exit code, [(step, rank, record, is_gap)], stdout)."""
    p = subprocess.run([BIN, "compare", "-b", bench_root, "-c", cmp_root, "-o", out,
                        "--csv", "--top", str(top)], capture_output=True, text=True,
                       timeout=600)
    if p.returncode not in (0, 1):
        raise RuntimeError("compare failed (%d): %s" % (p.returncode, p.stderr))
    sus = []
    for line in p.stdout.splitlines():
        m = SUSPECT.match(line)
        if m:
            sus.append((int(m.group(2)), int(m.group(3)), m.group(5), bool(m.group(4))))
    return p.returncode, sus, p.stdout


# ---- msprobe 8.x's published rules, as the baseline -------------------------

def _rec_of(tensor_name):
    return re.sub(r"\.(input|output|kwarg)\.[^.]+$", "", tensor_name)


def _num(v):
    try:
        return float(v)
    except ValueError:
        return float("nan")


def msprobe8_suspects(csv_path):
    """Records msprobe 8.x would colour, red ones first then yellow ones, each in
    execution order (the details csv is in step, rank, order order). Rules:
    red = the compare side holds NaN/Inf, or MaxAbsErr > 1e10, or every input
    reached accuracy and an output did not; yellow = an output's MaxAbsErr is
    >= 10x the largest input MaxAbsErr, or its Cosine fell > 0.1 below the
    lowest input Cosine."""
    recs = []
    by = {}
    with open(csv_path, newline="") as f:
        for row in csv.DictReader(f):
            name = row["NPU Name"] or row["Bench Name"]
            key = (row.get("Step", "0"), row.get("Rank", "0"), _rec_of(name))
            if key not in by:
                by[key] = []
                recs.append(key)
            by[key].append(row)
    red, yellow = [], []
    for key in recs:
        rows = by[key]
        ins = [r for r in rows if ".output." not in (r["NPU Name"] or r["Bench Name"])]
        outs = [r for r in rows if ".output." in (r["NPU Name"] or r["Bench Name"])]
        if not ins or not outs:
            continue
        in_abs = max((_num(r["MaxAbsErr"]) for r in ins), default=float("nan"))
        in_cos = min((_num(r["Cosine"]) for r in ins), default=float("nan"))
        all_yes = all(r["Accuracy Reached or Not"] == "Yes" for r in ins)
        colour = None
        for r in outs:
            err, cos = _num(r["MaxAbsErr"]), _num(r["Cosine"])
            nonfinite = any(not (abs(_num(r[k])) < float("inf"))
                            for k in ("NPU max", "NPU min") if r[k] != "N/A")
            if nonfinite or err > 1e10 or (all_yes and r["Accuracy Reached or Not"] != "Yes"):
                colour = "red"
            elif colour is None and ((err > 0 and err >= 10 * in_abs) or cos < in_cos - 0.1):
                colour = "yellow"
        step, rank, name = key
        item = (int(_num(step)), int(_num(rank)), name, False)
        if colour == "red":
            red.append(item)
        elif colour == "yellow":
            yellow.append(item)
    return red + yellow


# The innermost module around each plant, from the model code in
# culprit_models.py (module level has no API records to name).
PLANT_MODULE = {
    ("gpt", "gelu_tanh"): "Module.blocks.1.Block.forward.0",
    ("gpt", "ln_eps"): "Module.blocks.1.Block.forward.0",
    ("gpt", "attn_scale"): "Module.blocks.1.Block.forward.0",
    ("vit", "ln_eps"): "Module.encoder.layers.encoder_layer_1.ln_2.LayerNorm.forward.0",
    ("vit", "gelu_tanh"): "Module.encoder.layers.encoder_layer_1.mlp.1.GELU.forward.0",
    ("resnet", "bn_eps"): "Module.layer1.0.bn1.BatchNorm2d.forward.0",
    ("gpt", "hid_ln_eps"): "Module.blocks.1.Block.forward.0",
    ("vit", "hid_ln_eps"): "Module.encoder.layers.encoder_layer_1.ln_2.LayerNorm.forward.0",
    ("resnet", "hid_bn_eps"): "Module.layer1.0.bn1.BatchNorm2d.forward.0",
    ("gpt", "hid_gelu_tanh"): "Module.blocks.1.Block.forward.0",
    ("vit", "hid_gelu_tanh"): "Module.encoder.layers.encoder_layer_1.mlp.1.GELU.forward.0",
}

# A hidden plant's record at api and mix level, counted from the model code:
# gpt's layer_norm calls run block 0 ln1, ln2, block 1 ln1 (planted); vit's
# layer 0 ln_1, ln_2, layer 1 ln_1, ln_2 (planted); resnet's batch_norm calls
# run the stem's bn1, then layer1[0].bn1 (planted); one gelu a block or encoder
# layer, the planted one in the last of two; one cross_entropy a step.
HIDDEN_RECORD = {
    ("gpt", "hid_ln_eps"): "Functional.layer_norm.2.forward",
    ("vit", "hid_ln_eps"): "Functional.layer_norm.3.forward",
    ("resnet", "hid_bn_eps"): "Functional.batch_norm.1.forward",
    ("gpt", "hid_gelu_tanh"): "Functional.gelu.1.forward",
    ("vit", "hid_gelu_tanh"): "Functional.gelu.1.forward",
    ("gpt", "hid_smoothing"): "Functional.cross_entropy.0.forward",
    ("vit", "hid_smoothing"): "Functional.cross_entropy.0.forward",
    ("resnet", "hid_smoothing"): "Functional.cross_entropy.0.forward",
    ("lstm", "hid_smoothing"): "Functional.cross_entropy.0.forward",
}
HIDDEN_PLANTS = {"gpt": ["hid_ln_eps", "hid_gelu_tanh", "hid_smoothing"],
                 "vit": ["hid_ln_eps", "hid_gelu_tanh", "hid_smoothing"],
                 "resnet": ["hid_bn_eps", "hid_smoothing"], "lstm": ["hid_smoothing"]}


def kind(plant):
    """argument (a recorded argument differs), hidden (only the kernel below
    the recorded API differs), optimizer (a hyperparameter), or control."""
    if plant == "none":
        return "control"
    if plant in ("wd", "opt_eps"):
        return "optimizer"
    return "hidden" if plant.startswith("hid_") else "argument"


def hidden_check(bench_root, cmp_root, name):
    """(arguments equal, output max abs difference, names recorded on the
    compare side but not the bench side) of one step-0 record, with h5py."""
    with h5py.File(os.path.join(bench_root, "step0", "rank0", "dump.h5"), "r") as b, \
            h5py.File(os.path.join(cmp_root, "step0", "rank0", "dump.h5"), "r") as c:
        (bnames, battrs), (cnames, cattrs) = _records(b), _records(c)
        diff = 0.0
        for role in b[name]:
            if role.startswith("output") and role in c[name]:
                x, y = b[name][role][()], c[name][role][()]
                diff = max(diff, float(abs(x.astype("float64") - y.astype("float64")).max()))
        return battrs(name) == cattrs(name), diff, sorted(set(cnames) - set(bnames))


def planted_optimizer(bench_root, cmp_root):
    """The step-0 optimizer record whose recorded hyperparameters differ, or None."""
    with h5py.File(os.path.join(bench_root, "step0", "rank0", "dump.h5"), "r") as b, \
            h5py.File(os.path.join(cmp_root, "step0", "rank0", "dump.h5"), "r") as c:
        (bnames, battrs), (cnames, cattrs) = _records(b), _records(c)
        for name in cnames:
            if name.startswith("Optimizer.") and name in bnames and \
                    battrs(name) != cattrs(name):
                return name
    return None


def expected(sc, b, c):
    """The record a scenario's plant should be named by, or None for a control."""
    m, _, plant, _, level = full(sc)
    if plant == "none":
        return None
    if plant in ("wd", "opt_eps"):
        return planted_optimizer(b, c)
    if level == "module":
        return PLANT_MODULE.get((m, plant))
    if kind(plant) == "hidden":
        return HIDDEN_RECORD.get((m, plant))
    return planted_record(b, c)


def score(work, scenarios=SCENARIOS, jobs=2):
    """Dump and compare every scenario; returns one dict per scenario."""
    scenarios = [full(s) for s in scenarios]
    runs = sorted({bench_of(s) for s in scenarios} | set(scenarios))
    run_dumps(work, runs, jobs)
    results = []
    for sc in scenarios:
        model, noise, plant, opt, level = sc
        b = run_dump(work, *bench_of(sc))
        c = run_dump(work, *sc)
        out = os.path.join(work, "cmp-" + tag_of(sc))
        rc, ours, stdout = compare(b, c, out)
        base = msprobe8_suspects(os.path.join(out, "result.csv"))
        want = expected(sc, b, c)
        results.append({"model": model, "noise": noise, "plant": plant, "opt": opt,
                        "level": level, "planted": want, "ours": ours, "msprobe8": base,
                        "rc": rc, "stdout": stdout})
    return results


def named(sus, want, k):
    """The planted step-0 record is among the first k suspects."""
    return any(s[0] == 0 and s[2] == want for s in sus[:k])


if __name__ == "__main__":
    import tempfile
    keep = os.environ.get("CULPRIT_WORK")  # reuse dumps across runs when set
    with tempfile.TemporaryDirectory() as d:
        if keep:
            os.makedirs(keep, exist_ok=True)
        for r in score(keep or d, [tuple(a.split(":")) for a in sys.argv[1:]] or SCENARIOS):
            print(r["model"], r["noise"], r["plant"], r["opt"], r["level"], r["planted"])
            print("   ours:", r["ours"][:5])
            print("   8.x: ", r["msprobe8"][:3])
