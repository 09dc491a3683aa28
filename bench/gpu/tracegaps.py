"""Where a profiled step's time goes (not a test): reads the chrome trace that
`gpubench.py train --profile-step K --trace FILE` wrote and prints

  the step's span, the GPU's busy time in it (kernels, copies, memsets) and
  its largest idle gaps, each with the CPU operations running meanwhile;
  each CPU thread's busy time (its outermost operations);
  the CPU's waits for the GPU (cudaEventSynchronize, cudaStreamSynchronize,
  cudaDeviceSynchronize, synchronous cudaMemcpy): total and largest.

    python3 bench/gpu/tracegaps.py TRACE.json [--top N]

A step bound by the GPU has few gaps; one bound by the CPU has the GPU idle
while the training thread records; a wait shows the CPU idle while the GPU
catches up."""
import argparse
import json

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
SYNCS = ("cudaEventSynchronize", "cudaStreamSynchronize", "cudaDeviceSynchronize",
         "cudaMemcpy", "cudaStreamWaitEvent")


def union(iv):
    """Sorted, merged intervals of (start, end)."""
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trace")
    p.add_argument("--top", type=int, default=6)
    a = p.parse_args()
    with open(a.trace) as f:
        doc = json.load(f)
    if isinstance(doc, dict):  # torch 2.x; 1.13 writes the bare list
        doc = doc.get("traceEvents", [])
    ev = [e for e in doc if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e]
    if not ev:
        print("no complete events in", a.trace)
        return
    gpu = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") in GPU_CATS]
    cpu_ops = [e for e in ev if e.get("cat") in ("cpu_op", "Operator", None)]  # (1.13: no cat)
    t0 = min(e["ts"] for e in ev)
    t1 = max(e["ts"] + e["dur"] for e in ev)
    span = t1 - t0
    busy = union(gpu)
    gb = sum(e - s for s, e in busy)
    print(f"step span {span / 1e3:.2f} ms; GPU busy {gb / 1e3:.2f} ms ({100 * gb / span:.0f}%)")
    gaps = []
    last = t0
    for s, e in busy:
        if s > last:
            gaps.append((s - last, last, s))
        last = max(last, e)
    if t1 > last:
        gaps.append((t1 - last, last, t1))
    gaps.sort(reverse=True)
    print(f"GPU idle {sum(g[0] for g in gaps) / 1e3:.2f} ms in {len(gaps)} gaps; the largest:")
    for d, s, e in gaps[:a.top]:
        running = {}
        for o in cpu_ops:  # the CPU operations overlapping the gap, by time inside it
            ov = min(e, o["ts"] + o["dur"]) - max(s, o["ts"])
            if ov > 0:
                running[o["name"]] = running.get(o["name"], 0) + ov
        top = sorted(running.items(), key=lambda kv: -kv[1])[:4]
        what = ", ".join(f"{n} {v / 1e3:.2f}" for n, v in top) or "no CPU operation"
        print(f"  {d / 1e3:7.2f} ms at +{(s - t0) / 1e3:.2f} ms: {what}")
    by_tid = {}
    for o in cpu_ops:
        by_tid.setdefault(o.get("tid"), []).append((o["ts"], o["ts"] + o["dur"]))
    for tid, iv in sorted(by_tid.items(), key=lambda kv: str(kv[0])):
        b = sum(e - s for s, e in union(iv))
        print(f"CPU thread {tid}: operations {b / 1e3:.2f} ms ({100 * b / span:.0f}% of the span)")
    waits = [e for e in ev if e.get("name") in SYNCS]
    tw = sum(e["dur"] for e in waits)
    print(f"CPU waits for the GPU: {tw / 1e3:.2f} ms in {len(waits)} calls; the largest:")
    for e in sorted(waits, key=lambda e: -e["dur"])[:a.top]:
        print(f"  {e['dur'] / 1e3:7.2f} ms {e['name']} at +{(e['ts'] - t0) / 1e3:.2f} ms")


if __name__ == "__main__":
    main()
