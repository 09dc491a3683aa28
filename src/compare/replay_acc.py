"""acc_check's metrics for the replay worker (replay.py): msprobe's precision
standards measured on one output.

compare starts the worker with this source before replay.py's (both compiled
in: src/compare/CMakeLists.txt), so a job with "acc": true gets, per output,
acc_metrics of the output and of its same-dtype replay against the float64
replay (msprobe-acc_check(1), METRICS). torch is the worker's: these run only
after replay.py's main() imported it.

An output x is measured against its float64 replay b the way msprobe's API
pre-check measures a device output against its CPU benchmark, with msprobe's
constants per dtype. msprobe's benchmark is the inputs raised one step
(float16/bfloat16 to float32, float32 to float64); here it is float64, and
each constant that comes from the benchmark's dtype (the epsilon added to
|b|, the dtype b is rounded to for the error balance) is the one msprobe's
would have.
"""
import base64
import math

# What one answer line may carry of benchmark outputs for -save_error_data,
# raw bytes (base64 adds a third): well under the line compare reads (64 MiB).
ACC_KEEP_BYTES = 24 << 20


def acc_bench(t, left):
    """The float64 benchmark of an output for acc_check's -save_error_data:
    {"shape", "b64" (its little-endian bytes)}, or {"omitted": why} once the
    answer's budget (left[0] bytes, spent here) would be exceeded."""
    b = t.detach().to(torch.float64).contiguous()
    n = b.numel() * 8
    if n > left[0]:
        return {"omitted": "over the %d MiB an answer carries" % (ACC_KEEP_BYTES >> 20)}
    left[0] -= n
    raw = b.numpy().astype("<f8", copy=False).tobytes()
    return {"shape": list(b.shape), "b64": base64.b64encode(raw).decode("ascii")}


def _acc_consts(dt):
    f16 = dict(eps=2.0 ** -23, small=2.0 ** -10, atol_b=1e-16, atol_t=2.0 ** -16,
               rtol=2.0 ** -10, min_eb=-14, mant=10, ulp_thr=1.0, round_to=torch.float16,
               lim=65504.0)
    bf16 = dict(eps=2.0 ** -8, small=2.0 ** -10, atol_b=1e-16, atol_t=1e-16, rtol=2.0 ** -8,
                min_eb=-126, mant=7, ulp_thr=1.0, round_to=torch.float32,
                lim=3.3895313892515355e38)
    f32 = dict(eps=2.0 ** -52, small=2.0 ** -20, atol_b=2.0 ** -30, atol_t=2.0 ** -30,
               rtol=2.0 ** -20, min_eb=-126, mant=23, ulp_thr=32.0, round_to=torch.float32,
               lim=3.4028234663852886e38)
    f64 = dict(f32, eps=2.0 ** -52, round_to=torch.float64, lim=1.7976931348623157e308,
               mant=None)
    return {torch.float16: f16, torch.bfloat16: bf16, torch.float32: f32}.get(dt, f64)


def _num(v):
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _share(mask, of=None):
    """sum(mask) / sum(of) (of: every element), 0 when of is empty."""
    total = mask.numel() if of is None else int(of.sum())
    return 0.0 if total == 0 else float(mask.sum()) / total


def _cosine(d, b):
    """msprobe's cosine: each side scaled by its largest magnitude first; (value
    or None, passes, note)."""
    if d.numel() == 1:
        return None, True, "one element: cosine not computed"
    eps = 2.0 ** -52
    nmax, bmax = float(d.abs().max()), float(b.abs().max())
    if nmax <= eps and bmax <= eps:
        return None, True, "both outputs are all zero"
    if nmax <= eps or bmax <= eps:
        return None, False, "the %s output is all zero" % ("device" if nmax <= eps else "bench")
    dn, bn = d / nmax, b / bmax
    cos = float(torch.dot(dn, bn) / (dn.norm() * bn.norm()))
    if math.isnan(cos):
        return float("nan"), True, "NaN in the outputs: cosine is NaN"
    cos = min(1.0, max(-1.0, cos))
    return cos, cos > 0.99, ""


def acc_metrics(x, b64):
    """Every metric of msprobe's details CSV for output x against its float64
    replay b64 (non-finite values as the strings "nan", "inf", "-inf")."""
    if x.numel() == 0:
        return {"empty": True}
    if not x.is_floating_point():
        same = x.reshape(-1).to(torch.int64) == b64.reshape(-1).to(torch.int64)
        return {"error_rate": _share(~same)}
    c = _acc_consts(x.dtype)
    d, b = x.double().reshape(-1), b64.double().reshape(-1)
    n = d.numel()
    absb = b.abs()
    ae = (d - b).abs()
    rel = ae / (absb + c["eps"])
    m = {}
    cos, cos_ok, note = _cosine(d, b)
    m["cosine"] = None if cos is None else _num(cos)
    m["cosine_ok"] = cos_ok
    m["cosine_note"] = note
    # binary consistency: not bit-equal to the benchmark in the output's dtype
    m["error_rate"] = _share(b.to(x.dtype).double() != d)
    m["max_abs_err"] = _num(ae.max())
    m["rel_err_hundredth"] = _share(rel < 0.01)
    m["rel_err_thousandth"] = _share(rel < 0.001)
    m["rel_err_ten_thousandth"] = _share(rel < 0.0001)
    # finite where both are: the benchmark as it reads in the device's dtype
    # (a float64 value past float16's range is Inf there)
    fin = torch.isfinite(d) & torch.isfinite(b.to(c["round_to"]))
    inf_nan = ~fin
    small = (absb <= c["small"]) & fin
    # benchmark comparison
    relb = torch.where(small | inf_nan, torch.full_like(rel, -1.0), rel)
    top = float(relb.max())
    m["max_rel_error"] = _num(top if top >= 0 else 0.0)
    pos = relb[relb >= 0]
    m["mean_rel_error"] = _num(pos.mean() if pos.numel() else 0.0)
    m["small_value_err_ratio"] = _share(small & (ae > c["atol_b"]), small)
    masked = torch.where(inf_nan | small, torch.zeros_like(ae), ae)
    cnt = int((inf_nan | small).sum())
    mse = float((masked * masked).mean()) * (n / (n - cnt + 0.0001) + 0.0001)
    m["rmse"] = _num(math.sqrt(mse) if mse >= 0 else float("nan"))
    diff = d - b.to(c["round_to"]).double()
    m["eb"] = abs(int((diff > 0).sum()) - int((diff < 0).sum())) / n
    # absolute threshold
    normal = fin & ~small
    m["inf_nan_error_ratio"] = _acc_inf_nan(d, b, inf_nan, c)
    m["rel_err_ratio"] = _share((rel > c["rtol"]) & normal, normal)
    m["abs_err_ratio"] = _share((ae > c["atol_t"]) & small, small)
    # ULP error
    if c["mant"] is not None:
        eb = torch.where(absb == 0, torch.zeros_like(absb), torch.floor(torch.log2(absb)))
        eb = torch.clamp(eb, min=float(c["min_eb"]))
        ulp = ((d - b) * torch.exp2(-eb + c["mant"])).abs()
        m["max_ulp_error"] = _num(ulp.max())
        m["mean_ulp_error"] = _num(ulp.mean())
        m["ulp_error_proportion"] = _share(ulp > c["ulp_thr"])
    return m


def _acc_inf_nan(d, b, inf_nan, c):
    """Share of the places where either side is NaN/Inf that disagree: both
    clipped to the dtype's finite range, then within rtol, or both NaN."""
    if not bool(inf_nan.any()):
        return 0.0
    g = b.to(c["round_to"]).double().clamp(-c["lim"], c["lim"])
    dc = d.clamp(-c["lim"], c["lim"])
    ok = ((dc - g).abs() / (b.abs() + c["eps"]) <= c["rtol"]) | (torch.isnan(d) & torch.isnan(g))
    return _share(~ok & inf_nan, inf_nan)
