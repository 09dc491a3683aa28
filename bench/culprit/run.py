"""Culprit benchmark (not a test): accuracy of msprobe compare's ranked
suspects over the culprit scenarios, side by side with msprobe 8.x's published
red/yellow rules applied to the same compare, in one run.

Scenarios: tests/compare/culprit_suite.SCENARIOS plus the bf16 variant of every
plant. A planted scenario is scored unless it runs under bf16 and the plant's
own effect (its record's output error between the bench run and the same run
with the plant and no noise, measured with h5py) is below bfloat16's floor
(8 * 2^-8): no method can resolve a change smaller than bf16's rounding. Those
are listed as unresolvable and left out of the accuracy, as are controls,
which are counted separately (a control is clean when no suspect is named).

  first  the planted call (forward record, or its backward record) is suspect 1
  top 5  it is among the first five suspects
msprobe 8.x's list: red records in execution order, then yellow ones.
"""
import os
import sys
import tempfile
import time

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, os.pardir, "tests", "compare"))
import culprit_suite as S  # noqa: E402

BF16_FLOOR = 8 * 2.0 ** -8
EXTRA = [("gpt", "bf16", "gelu_tanh"), ("gpt", "bf16", "smoothing"), ("vit", "bf16", "gelu_tanh"),
         ("vit", "bf16", "smoothing"), ("resnet", "bf16", "smoothing"), ("lstm", "bf16", "smoothing"),
         ("gpt", "none", "ln_eps"), ("gpt", "none", "attn_scale"), ("gpt", "none", "smoothing"),
         ("vit", "none", "gelu_tanh"), ("vit", "none", "ln_eps"), ("vit", "none", "smoothing"),
         ("resnet", "none", "smoothing"), ("lstm", "none", "smoothing")]


def hit(sus, want, k):
    names = (want, want[:-len("forward")] + "backward")
    return any(s[0] == 0 and s[2] in names and not s[3] for s in sus[:k])


def plant_effect(work, model, plant, want):
    """Output error of the planted record, bench vs plant without noise (step 0)."""
    b = os.path.join(S.run_dump(work, model, "bench", "none"), "step0", "rank0", "dump.h5")
    c = os.path.join(S.run_dump(work, model, "none", plant), "step0", "rank0", "dump.h5")
    worst = 0.0
    with h5py.File(b, "r") as fb, h5py.File(c, "r") as fc:
        for role in fb[want]:
            if not role.startswith("output"):
                continue
            x = fb[want][role][()].astype(np.float64)
            y = fc[want][role][()].astype(np.float64)
            nb = np.linalg.norm(x)
            e = np.linalg.norm(y - x) / nb if nb > 0 else (0.0 if np.array_equal(x, y) else np.inf)
            worst = max(worst, e)
    return worst


def main():
    scen = list(dict.fromkeys(S.SCENARIOS + EXTRA))
    keep = os.environ.get("CULPRIT_WORK")
    with tempfile.TemporaryDirectory(prefix="msp-culprit-bench-") as tmp:
        work = keep or tmp
        os.makedirs(work, exist_ok=True)
        t0 = time.time()
        res = S.score(work, scen, jobs=int(os.environ.get("JOBS", "2")))
        print("%-7s %-5s %-10s %-36s %-11s %-11s %s" % ("model", "noise", "plant", "planted record",
                                                       "ours 1st/5", "8.x 1st/5", "ours first suspect"))
        tot = {"scored": 0, "o1": 0, "o5": 0, "b1": 0, "b5": 0, "ctrl": 0, "oc": 0, "bc": 0,
               "ctrl32": 0, "oc32": 0, "bc32": 0, "unres": []}
        for r in res:
            first = ("%s@step%d" % (r["ours"][0][2], r["ours"][0][0])) if r["ours"] else "-"
            if r["plant"] == "none":
                oc, bc = not r["ours"], not r["msprobe8"]
                tot["ctrl"] += 1
                tot["oc"] += oc
                tot["bc"] += bc
                if r["noise"] == "fp32":
                    tot["ctrl32"] += 1
                    tot["oc32"] += oc
                    tot["bc32"] += bc
                print("%-7s %-5s %-10s %-36s %-11s %-11s %s" % (
                    r["model"], r["noise"], "control", "-", "clean" if oc else "FALSE",
                    "clean" if bc else "FALSE", first))
                continue
            want = r["planted"]
            o1, o5 = hit(r["ours"], want, 1), hit(r["ours"], want, 5)
            b1, b5 = hit(r["msprobe8"], want, 1), hit(r["msprobe8"], want, 5)
            note = ""
            if r["noise"] == "bf16":
                eff = plant_effect(work, r["model"], r["plant"], want)
                if eff < BF16_FLOOR:
                    note = " (unresolvable: plant effect %.2g < bf16 floor %.3g)" % (eff, BF16_FLOOR)
                    tot["unres"].append((r["model"], r["noise"], r["plant"], o1))
            if not note:
                tot["scored"] += 1
                tot["o1"] += o1
                tot["o5"] += o5
                tot["b1"] += b1
                tot["b5"] += b5
            print("%-7s %-5s %-10s %-36s %-11s %-11s %s%s" % (
                r["model"], r["noise"], r["plant"], want, "%s/%s" % ("Y" if o1 else "n", "Y" if o5 else "n"),
                "%s/%s" % ("Y" if b1 else "n", "Y" if b5 else "n"), first, note))
        n = max(tot["scored"], 1)
        print()
        print("scored planted scenarios: %d (unresolvable bf16 plants left out: %d)" %
              (tot["scored"], len(tot["unres"])))
        print("first-suspect accuracy:  msprobe %5.1f %%   msprobe 8.x rules %5.1f %%" %
              (100.0 * tot["o1"] / n, 100.0 * tot["b1"] / n))
        print("in top 5:                msprobe %5.1f %%   msprobe 8.x rules %5.1f %%" %
              (100.0 * tot["o5"] / n, 100.0 * tot["b5"] / n))
        print("controls clean (fp32):   msprobe %d/%d   msprobe 8.x rules %d/%d" %
              (tot["oc32"], tot["ctrl32"], tot["bc32"], tot["ctrl32"]))
        print("controls clean (all):    msprobe %d/%d   msprobe 8.x rules %d/%d" %
              (tot["oc"], tot["ctrl"], tot["bc"], tot["ctrl"]))
        print("wall time %.0f s (dumps and compares)" % (time.time() - t0))


if __name__ == "__main__":
    main()
