"""Dump overhead on a GPU, measured side by side in one run (not a test).

    python3 bench/gpu/gpubench.py run --msprobe BIN [--models resnet18,llama,mlp]
        [--dtypes fp32,bf16] [--steps N] [--warmup W] [--work DIR]
        [--skip-alone] [--skip-percall] [--skip-tensor] [--skip-again] [--bisect]
        [--device cpu --size tiny --device-path]

The last three make a CPU proxy where no GPU is lent: small shapes, so that a
step is made of launches, and CPU tensors down the device-statistics path
(its CPU share measured; "launch/tensor" then counts the CPU's operations).

For each model and dtype, the same training script runs
  plain        without the shim
  stats        task statistics, every step (statistics computed on the GPU,
               many calls' tensors per launch: py_devstats.c)
  stats-percall the same, each call's tensors copied into the window when it
               returns (MSPROBE_DEVICE_STATS_DEFER=0: the way before copies waited)
  stats-alone  the same, each tensor reduced alone (MSPROBE_DEVICE_STATS_ALONE=1:
               the path before windows, about ten launches a tensor)
  records-only every call recorded, no statistics computed (MSPROBE_DEVICE_STATS_SKIP=1,
               NaN written): what the shim's recording costs by itself
  tensor       task tensor, two steps (resnet18 only: each step writes GBs)
and, with --bisect, where records-only's time goes:
  idle         the shim loaded and torch patched, no step selected: what the
               wrappers cost when they record nothing
  rec-nostack  records-only without call sites ("stack": false)
  rec-nobwd    records-only without backward records (msprobe's data_mode
               forward), so no grad_fn is hooked
and prints the median step time of each against plain, the writer's time a
step and how long training waited for it (MSPROBE_WRITER_STATS), the losses compared
(bit-identical, or the run says which differ), and, from one profiled step,
the CUDA kernels launched per tensor recorded. Targets (issue 25): stats <=
1.5x on both models, tensor <= 3x for resnet18. The tensor task's bound is
printed beside it: the bytes a step writes over the device-to-host copy
bandwidth measured here.

    python3 bench/gpu/gpubench.py train --model M --dtype D [--steps N]
        [--warmup W] [--profile-step K] [--profile-table N] [--trace FILE]
        [--device cuda]
The training script itself: prints "LOSS i hex", "TIMES [...]" (seconds,
after warm-up), and with --profile-step "KERNELS n" for that step."""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import time


def build(torch, model, device, tiny=False):
    if model == "resnet18":
        import torchvision
        m = torchvision.models.resnet18(num_classes=1000)
        batch, size = (2, 32) if tiny else (32, 224)

        def data(g):
            x = torch.randn(batch, 3, size, size, generator=g)
            y = torch.randint(0, 1000, (batch,), generator=g)
            return x, y

        def loss_fn(m, x, y):
            return torch.nn.functional.cross_entropy(m(x), y)
        opt = lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9)  # noqa: E731
        return m.to(device), data, loss_fn, opt
    if model == "mlp":
        # 100 Linear+Tanh layers: a step made of small calls, the shim's cost
        # per call with little else (about 1000 tensors a step)
        width, batch = (16, 4) if tiny else (256, 64)
        m = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(width, width),
                                                      torch.nn.Tanh()) for _ in range(100)])

        def data(g):
            return torch.randn(batch, width, generator=g), torch.randn(batch, width, generator=g)

        def loss_fn(m, x, y):
            return torch.nn.functional.mse_loss(m(x), y)
        opt = lambda ps: torch.optim.SGD(ps, lr=0.01)  # noqa: E731
        return m.to(device), data, loss_fn, opt
    # a small Llama-style decoder from a config, random weights
    vocab, seq, batch = (512, 16, 2) if tiny else (32000, 512, 8)
    kw = dict(vocab_size=vocab, hidden_size=64 if tiny else 1024,
              intermediate_size=176 if tiny else 2816,
              num_hidden_layers=8, num_attention_heads=4 if tiny else 16,
              num_key_value_heads=2 if tiny else 8, max_position_embeddings=seq)
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
        try:
            cfg = LlamaConfig(attn_implementation="sdpa", **kw)
        except TypeError:
            cfg = LlamaConfig(**kw)
        m = LlamaForCausalLM(cfg)
        fwd = lambda m, ids: m(input_ids=ids).logits  # noqa: E731
    except ImportError:
        m = tiny_llama(torch, **kw)
        fwd = lambda m, ids: m(ids)  # noqa: E731

    def data(g):
        ids = torch.randint(0, vocab, (batch, seq + 1), generator=g)
        return ids[:, :-1], ids[:, 1:]

    def loss_fn(m, x, y):
        logits = fwd(m, x)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, vocab).float(), y.reshape(-1))
    opt = lambda ps: torch.optim.AdamW(ps, lr=1e-4)  # noqa: E731
    return m.to(device), data, loss_fn, opt


def tiny_llama(torch, vocab_size, hidden_size, intermediate_size, num_hidden_layers,
               num_attention_heads, num_key_value_heads, max_position_embeddings):
    """Where transformers is missing: RMSNorm, rotary attention with grouped
    KV heads, SwiGLU MLP, as Llama has them."""
    nn, F = torch.nn, torch.nn.functional
    h, nh, nkv = hidden_size, num_attention_heads, num_key_value_heads
    hd = h // nh

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(h))

        def forward(self, x):
            v = x.float().pow(2).mean(-1, keepdim=True)
            return self.weight * (x.float() * torch.rsqrt(v + 1e-6)).to(x.dtype)

    def rotate(x):
        a, b = x.chunk(2, dim=-1)
        return torch.cat((-b, a), dim=-1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = RMSNorm(), RMSNorm()
            self.q = nn.Linear(h, nh * hd, bias=False)
            self.k = nn.Linear(h, nkv * hd, bias=False)
            self.v = nn.Linear(h, nkv * hd, bias=False)
            self.o = nn.Linear(nh * hd, h, bias=False)
            self.gate = nn.Linear(h, intermediate_size, bias=False)
            self.up = nn.Linear(h, intermediate_size, bias=False)
            self.down = nn.Linear(intermediate_size, h, bias=False)

        def forward(self, x, cos, sin):
            b, s, _ = x.shape
            y = self.n1(x)
            q = self.q(y).view(b, s, nh, hd).transpose(1, 2)
            k = self.k(y).view(b, s, nkv, hd).transpose(1, 2)
            v = self.v(y).view(b, s, nkv, hd).transpose(1, 2)
            q, k = q * cos + rotate(q) * sin, k * cos + rotate(k) * sin
            k = k.repeat_interleave(nh // nkv, dim=1)
            v = v.repeat_interleave(nh // nkv, dim=1)
            if hasattr(F, "scaled_dot_product_attention"):
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:  # torch 1.13
                w = (q @ k.transpose(-1, -2)) / hd ** 0.5
                mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
                a = w.masked_fill(mask, float("-inf")).softmax(-1).to(v.dtype) @ v
            x = x + self.o(a.transpose(1, 2).reshape(b, s, h))
            y = self.n2(x)
            return x + self.down(F.silu(self.gate(y)) * self.up(y))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab_size, h)
            self.blocks = nn.ModuleList(Block() for _ in range(num_hidden_layers))
            self.norm = RMSNorm()
            self.head = nn.Linear(h, vocab_size, bias=False)
            inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
            f = torch.outer(torch.arange(max_position_embeddings).float(), inv)
            e = torch.cat((f, f), dim=-1)
            self.register_buffer("cos", e.cos(), persistent=False)
            self.register_buffer("sin", e.sin(), persistent=False)

        def forward(self, ids):
            x = self.emb(ids)
            s = ids.shape[1]
            cos, sin = self.cos[:s].to(x.dtype), self.sin[:s].to(x.dtype)
            for blk in self.blocks:
                x = blk(x, cos, sin)
            return self.head(self.norm(x))

    return Model()


def cmd_train(a):
    import torch
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.manual_seed(0)
    model, data, loss_fn, make_opt = build(torch, a.model, a.device, a.size == "tiny")
    opt = make_opt(model.parameters())
    g = torch.Generator().manual_seed(1)
    amp = a.dtype == "bf16"
    times = []

    def sync():
        if a.device.startswith("cuda"):
            torch.cuda.synchronize()
    for i in range(a.warmup + a.steps):
        x, y = data(g)
        x, y = x.to(a.device), y.to(a.device)
        prof = None
        cuda = a.device.startswith("cuda")
        if i == a.profile_step:
            from torch.profiler import ProfilerActivity, profile
            # on the CPU, the operations the CPU runs stand for the kernels
            acts = [ProfilerActivity.CUDA] if cuda else []
            if a.profile_table or a.trace or not cuda:
                acts.append(ProfilerActivity.CPU)
            prof = profile(activities=acts)
            prof.__enter__()
        sync()
        t0 = time.perf_counter()
        opt.zero_grad()
        with torch.autocast(device_type=a.device.split(":")[0], dtype=torch.bfloat16,
                            enabled=amp):
            loss = loss_fn(model, x, y)
        loss.backward()
        opt.step()
        lv = loss.item()
        sync()
        dt = time.perf_counter() - t0
        if prof is not None:
            prof.__exit__(None, None, None)
            kind = "CUDA" if cuda else "CPU"
            n = sum(1 for e in prof.events()
                    if str(getattr(e, "device_type", "")).endswith(kind))
            print("KERNELS", n, flush=True)
            if a.trace:  # the step's timeline (chrome://tracing, Perfetto): where it waits
                prof.export_chrome_trace(a.trace)
            if a.profile_table:
                ka = prof.key_averages()
                print(ka.table(sort_by="self_cpu_time_total", row_limit=a.profile_table))
                key = "self_cuda_time_total" if hasattr(ka[0], "self_cuda_time_total") \
                    else "self_device_time_total"
                print(ka.table(sort_by=key, row_limit=a.profile_table), flush=True)
        if i >= a.warmup:
            times.append(dt)
        print("LOSS", i, float(lv).hex(), flush=True)
    print("TIMES", json.dumps(times), flush=True)


def d2h_gbps():
    import torch
    x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    h = torch.empty(x.shape, dtype=torch.uint8, pin_memory=True)
    h.copy_(x, non_blocking=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(8):
        h.copy_(x, non_blocking=True)
    torch.cuda.synchronize()
    return 8 * x.numel() / (time.perf_counter() - t0) / 1e9


def parse(log):
    out = {"losses": [], "times": None, "kernels": None}
    for line in log.splitlines():
        if line.startswith("LOSS "):
            out["losses"].append(line.split()[2])
        elif line.startswith("TIMES "):
            out["times"] = json.loads(line[6:])
        elif line.startswith("KERNELS "):
            out["kernels"] = int(line.split()[1])
    return out


def dump_stats(path, step):
    """(tensors, bytes) recorded in step of a dump (h5py)."""
    import h5py
    import numpy as np
    n = nbytes = 0
    for f in glob.glob(os.path.join(path, f"step{step}", "rank*", "dump.h5")):
        with h5py.File(f, "r") as h:
            idx = h["index"][()]
            for r in idx:
                if r["role"]:
                    n += 1
                    nbytes += int(r["nbytes"])
    return n, nbytes


def check_stats(stats_dir, tensor_dir, step, budget_s=40):
    """The statistics run's numbers against float64 numpy over the tensor
    run's data of the same step (same seed, deterministic kernels: the same
    values). Returns a line: tensors checked, worst errors in units of the
    documented tolerance (mean: 1e-6 of mean|x|; norm: 1e-6 relative; max
    and min exact)."""
    import h5py
    import numpy as np
    fs = glob.glob(os.path.join(stats_dir, f"step{step}", "rank*", "dump.h5"))
    ft = glob.glob(os.path.join(tensor_dir, f"step{step}", "rank*", "dump.h5"))
    if not fs or not ft:
        return "no dumps to check"
    t0 = time.time()
    n = bad_mm = 0
    worst_mean = worst_norm = 0.0
    with h5py.File(fs[0], "r") as hs, h5py.File(ft[0], "r") as ht:
        st = {(r["record"], r["role"]): r for r in hs["index"][()] if r["role"]}
        for r in ht["index"][()]:
            k = (r["record"], r["role"])
            if not r["role"] or not r["has_data"] or k not in st or time.time() - t0 > budget_s:
                continue
            if r["dtype"].decode().replace("torch.", "") not in ("float32", "bfloat16", "float16"):
                continue
            x = ht[r["record"].decode()][r["role"].decode()][()].astype(np.float64)
            if x.size == 0 or not np.isfinite(x).all():
                continue
            s_ = st[k]
            n += 1
            if s_["max"] != x.max() or s_["min"] != x.min():
                bad_mm += 1
            scale = np.abs(x).mean()
            if scale > 0:
                worst_mean = max(worst_mean, abs(s_["mean"] - x.mean()) / (1e-6 * scale))
            norm = np.sqrt((x * x).sum())
            if norm > 0:
                worst_norm = max(worst_norm, abs(s_["norm"] - norm) / (1e-6 * norm))
    return (f"stats vs float64 numpy of the tensor run: {n} tensors, max/min mismatches "
            f"{bad_mm}, worst mean err {worst_mean:.3f} and norm err {worst_norm:.3f} "
            f"(units of the tolerance; <= 1 passes)")


def cmd_run(a):
    me = os.path.abspath(__file__)
    work = a.work or os.path.abspath("gpubench_work")
    os.makedirs(work, exist_ok=True)
    py = sys.executable
    rows = []
    bw = d2h_gbps() if a.device.startswith("cuda") else float("inf")
    print(f"device-to-host copy, pinned: {bw:.1f} GB/s", flush=True)

    def cfg(name, task, steps, **extra):
        p = os.path.join(work, name + ".json")
        with open(p, "w") as f:
            json.dump({"dump": {"common_dump_settings": dict({
                "dump_path": os.path.join(work, name), "task": task, "dump_iter": steps,
                "dump_mode": "api"}, **extra)}}, f)
        return p

    def run(tag, model, dtype, config=None, env=None, steps=None, profile=-1):
        argv = [py, me, "train", "--model", model, "--dtype", dtype, "--device", a.device,
                "--size", a.size, "--warmup", str(a.warmup), "--steps", str(steps or a.steps),
                "--profile-step", str(profile)]
        if config:
            argv = [a.msprobe, "dump", "-c", config, "--"] + argv
        e = dict(os.environ, **(env or {}))
        if config:
            e["MSPROBE_WRITER_STATS"] = "1"  # the writer's time a step, and the wait for it
        if config and a.device_path:
            # CPU tensors down the device path, with a device's window sizes
            e.update(MSPROBE_TEST_DEVICE_STATS="1", MSPROBE_DEVICE_STATS_MB="1024")
        t0 = time.time()
        p = subprocess.run(argv, capture_output=True, text=True, env=e, timeout=a.timeout)
        r = parse(p.stdout)
        r["rc"] = p.returncode
        m = re.search(r"([0-9.]+) ms busy a step, the training thread waited ([0-9.]+) ms", p.stderr)
        r["writer"] = (float(m.group(1)), float(m.group(2))) if m else None
        if p.returncode != 0 or r["times"] is None:
            print(f"  {tag}: rc {p.returncode}\n{p.stdout[-1500:]}\n{p.stderr[-3000:]}", flush=True)
        else:
            w = (f", writer {r['writer'][0]:.2f} ms a step, waited for {r['writer'][1]:.2f}"
                 if r["writer"] else "")
            print(f"  {tag}: {time.time() - t0:.0f}s, median step "
                  f"{statistics.median(r['times']) * 1e3:.2f} ms{w}", flush=True)
        return r

    for model in a.models.split(","):
        for dtype in a.dtypes.split(","):
            print(f"== {model} {dtype}", flush=True)
            last = a.warmup + a.steps - 1
            key = f"{model}_{dtype}"
            res = {"plain": run("plain", model, dtype, profile=last)}
            again = res["plain"] if a.skip_again else run("plain again", model, dtype)
            if again["losses"] != res["plain"]["losses"]:
                print("  plain runs differ from each other: this model's kernels are not "
                      "deterministic here, losses cannot be compared", flush=True)
                res["plain"]["nondet"] = True
            res["stats"] = run("stats", model, dtype, cfg(key + "_stats", "statistics", "all"),
                               profile=last)
            if not a.skip_percall:
                res["stats-percall"] = run("stats-percall", model, dtype,
                                           cfg(key + "_percall", "statistics", "all"),
                                           env={"MSPROBE_DEVICE_STATS_DEFER": "0"}, profile=last)
            if not a.skip_alone:
                res["stats-alone"] = run("stats-alone", model, dtype,
                                         cfg(key + "_alone", "statistics", "all"),
                                         env={"MSPROBE_DEVICE_STATS_ALONE": "1"}, profile=last)
            # what recording every call costs, statistics left out: the shim's own share
            res["records-only"] = run("records-only", model, dtype,
                                      cfg(key + "_rec", "statistics", "all"),
                                      env={"MSPROBE_DEVICE_STATS_SKIP": "1"})
            if a.bisect:
                never = str(a.warmup + a.steps + 1000)  # a step the run never reaches
                res["idle"] = run("idle", model, dtype, cfg(key + "_idle", "statistics", never))
                res["rec-nostack"] = run("rec-nostack", model, dtype,
                                         cfg(key + "_nostack", "statistics", "all", stack=False),
                                         env={"MSPROBE_DEVICE_STATS_SKIP": "1"})
                nobwd = os.path.join(work, key + "_nobwd.json")  # msprobe's config.json:
                with open(nobwd, "w") as f:                     # it has data_mode
                    json.dump({"task": "statistics", "level": "L1", "step": [],
                               "dump_path": os.path.join(work, key + "_nobwd"),
                               "statistics": {"list": [], "data_mode": ["forward"]}}, f)
                res["rec-nobwd"] = run("rec-nobwd", model, dtype, nobwd,
                                       env={"MSPROBE_DEVICE_STATS_SKIP": "1"})
            if model == "resnet18" and not a.skip_tensor:
                # two dumped steps, right after warm-up: their times are TIMES[0:2]
                res["tensor"] = run("tensor", model, dtype,
                                    cfg(key + "_tensor", "tensor",
                                        f"{a.warmup}|{a.warmup + 1}"), steps=2)
            base = res["plain"]
            bt = statistics.median(base["times"]) if base["times"] else float("nan")
            n_rec, _ = dump_stats(os.path.join(work, key + "_stats"), last)
            for mode, r in res.items():
                if not r["times"]:
                    rows.append((model, dtype, mode, None, None, None, "FAILED rc %d" % r["rc"]))
                    continue
                t = statistics.median(r["times"])
                k = min(len(r["losses"]), len(base["losses"]))
                same = k > 0 and r["losses"][:k] == base["losses"][:k]
                lpt = None
                if mode.startswith("stats") and r["kernels"] is not None and n_rec:
                    lpt = (r["kernels"] - base["kernels"]) / n_rec
                note = "losses identical" if same else "LOSSES DIFFER"
                if r.get("writer") and mode != "tensor":
                    note += "; writer %.1f ms/step, waited %.1f" % r["writer"]
                if not same and base.get("nondet"):
                    note = "losses differ (so do two plain runs)"
                if mode == "tensor":
                    print("  " + check_stats(os.path.join(work, key + "_stats"),
                                             os.path.join(work, key + "_tensor"), a.warmup),
                          flush=True)
                    n, nb = dump_stats(os.path.join(work, key + "_tensor"), a.warmup)
                    note += f"; {nb / 1e9:.2f} GB/step, D2H bound {nb / 1e9 / bw * 1e3:.0f} ms " \
                            f"= {nb / 1e9 / bw / bt:.1f}x"
                    for d in glob.glob(os.path.join(work, key + "_tensor", "step*")):
                        subprocess.run(["rm", "-rf", d])
                rows.append((model, dtype, mode, t, t / bt, lpt, note))
            for k, row in enumerate(rows):
                if row[:3] == (model, dtype, "stats") and n_rec:
                    rows[k] = row[:6] + (row[6] + f"; {n_rec} tensors/step",)
    print()
    print(f"{'model':10s} {'dtype':5s} {'mode':12s} {'step ms':>9s} {'vs plain':>9s} "
          f"{'launch/tensor':>13s}  notes")
    for m, d, mode, t, ratio, lpt, note in rows:
        ts = f"{t * 1e3:9.2f}" if t else f"{'-':>9s}"
        rs = f"{ratio:8.2f}x" if ratio else f"{'-':>9s}"
        ls = f"{lpt:13.2f}" if lpt is not None else f"{'':13s}"
        print(f"{m:10s} {d:5s} {mode:12s} {ts} {rs} {ls}  {note}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--model", choices=("resnet18", "llama", "mlp"), default="resnet18")
    t.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    t.add_argument("--device", default="cuda")
    t.add_argument("--warmup", type=int, default=5)
    t.add_argument("--steps", type=int, default=20)
    t.add_argument("--profile-step", type=int, default=-1)
    t.add_argument("--size", choices=("full", "tiny"), default="full")
    t.add_argument("--trace", help="with --profile-step: write that step's timeline (CPU "
                   "and CUDA, chrome trace JSON) to this file")
    t.add_argument("--profile-table", type=int, default=0,
                   help="with --profile-step: print the N costliest operations (CPU and CUDA)")
    r = sub.add_parser("run")
    r.add_argument("--msprobe", required=True)
    r.add_argument("--models", default="resnet18,llama")
    r.add_argument("--dtypes", default="fp32,bf16")
    r.add_argument("--warmup", type=int, default=5)
    r.add_argument("--steps", type=int, default=15)
    r.add_argument("--work")
    r.add_argument("--device", default="cuda", help="cpu: a dry run of this script")
    r.add_argument("--timeout", type=int, default=300)
    r.add_argument("--skip-alone", action="store_true")
    r.add_argument("--skip-tensor", action="store_true")
    r.add_argument("--skip-percall", action="store_true")
    r.add_argument("--skip-again", action="store_true",
                   help="no second plain run (whether this model's kernels are deterministic)")
    r.add_argument("--bisect", action="store_true",
                   help="also idle, rec-nostack and rec-nobwd: where records-only's time goes")
    r.add_argument("--size", choices=("full", "tiny"), default="full",
                   help="tiny: small shapes, a step made of launches (the CPU proxy)")
    r.add_argument("--device-path", action="store_true",
                   help="with --device cpu: CPU tensors take the device path "
                   "(MSPROBE_TEST_DEVICE_STATS=1), so its CPU cost is measured here")
    a = p.parse_args()
    (cmd_train if a.cmd == "train" else cmd_run)(a)


if __name__ == "__main__":
    main()
