"""The error bound any correct kernel of a reducing op is allowed
(msprobe-compare(1), REPLAY), judged with the float64 replay. Embedded after
replay.py (src/compare/CMakeLists.txt): one namespace."""

# ---- what any correct kernel may do -------------------------------------------
#
# The same-dtype replay on this CPU is one kernel: another correct kernel of the
# op (another summation order, blocking, fused multiply-add) may differ more.
# For an op that sums K terms per output element (its reduction length), any
# correct kernel that accumulates in float32 (float64 for float64) is, with
# high probability, within lambda*sqrt(K)*u of the exact sum of the terms'
# magnitudes (Higham and Mary, "A new approach to probabilistic rounding
# error analysis", SISC 2019); compare allows that, in the norm it measures:
#   multilinear ops (matmul family, convolutions, sum, mean), forward and
#     backward: KERNEL_LAMBDA*sqrt(K)*u * ||op(|inputs|)|| / ||op(inputs)||,
#     the call re-run in float64 on the inputs' magnitudes;
#   other reductions (norms, softmax, layer/batch/group norm, losses): the
#     float64 call's own sensitivity, ||op(x*(1+e*r)) - op(x)|| / ||op(x)||
#     with r random signs and e = KERNEL_LAMBDA*sqrt(K)*u (what perturbing
#     each input by a correct kernel's backward error does), and for a loss or
#     a reduction to few elements at least KERNEL_LAMBDA*sqrt(K)*u;
#   elementwise ops (K = 1): nothing beyond compare's few units of roundoff.

KERNEL_LAMBDA = 1.0
MATMUL = {"linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "mv", "addmv", "dot",
          "vdot", "inner", "__matmul__", "__rmatmul__", "bilinear", "tensordot", "chain_matmul"}
CONV = {"conv1d", "conv2d", "conv3d", "conv_tbc", "convolution", "_convolution"}
CONV_T = {"conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}
LINEAR_SUM = {"sum", "mean", "nansum", "nanmean", "avg_pool1d", "avg_pool2d", "avg_pool3d",
              "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "trace"}
REDUCE = {"norm", "var", "std", "var_mean", "std_mean", "prod", "logsumexp", "cross_entropy",
          "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
          "binary_cross_entropy", "binary_cross_entropy_with_logits", "cosine_similarity",
          "pairwise_distance", "dist", "cdist", "pdist", "frobenius_norm", "nuclear_norm",
          "vector_norm", "matrix_norm", "soft_margin_loss", "multilabel_soft_margin_loss",
          "poisson_nll_loss", "gaussian_nll_loss", "ctc_loss", "cosine_embedding_loss",
          "margin_ranking_loss", "triplet_margin_loss", "hinge_embedding_loss"}
ALONG_DIM = {"softmax", "log_softmax", "softmin", "cumsum", "cumprod", "logcumsumexp",
             "_softmax", "_log_softmax"}
NORMS = {"layer_norm", "batch_norm", "group_norm", "instance_norm", "rms_norm", "normalize",
         "local_response_norm", "native_layer_norm", "native_batch_norm"}


def _arg(args, kwargs, i, name):
    if name in kwargs:
        return kwargs[name]
    return args[i] if len(args) > i else None


def _numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def reduction_len(api, args, kwargs, backward):
    """(K, kind): how many terms an output element of the call sums, and
    which bound applies ("multilinear", "reduce", "sensitive"), or (1, None)
    for an elementwise op (or one this table does not know)."""
    name = api.lstrip("_") if api not in ("__matmul__", "__rmatmul__") else api
    ts = [a for a in list(args) + list(kwargs.values()) if torch.is_tensor(a)]
    x = ts[0] if ts else None
    try:
        if name in MATMUL or api in MATMUL:
            m = args[1] if name in ("addmm", "baddbmm", "addbmm", "addmv") and len(args) > 1 \
                else x
            k = int(m.shape[-1]) if m is not None and m.dim() else 1
            if backward and x is not None and x.dim() > 1:
                k = max(k, x.numel() // max(int(x.shape[-1]), 1))  # weight grads sum rows
            return k, "multilinear"
        if name in CONV or name in CONV_T:
            w = _arg(args, kwargs, 1, "weight")
            if w is None or w.dim() < 2:
                return 1, None
            k = w.numel() // max(int(w.shape[0 if name in CONV else 1]), 1)
            if backward and x is not None and x.dim() > 2:
                k = max(k, x.numel() // max(int(x.shape[1]), 1))  # N*H*W for the weight's
            return max(k, 1), "multilinear"
        if name in LINEAR_SUM or name in REDUCE:
            if x is None:
                return 1, None
            kind = "multilinear" if name in LINEAR_SUM else "reduce"
            return -1, kind  # from the output's size (reduction_len_out)
        if name in ALONG_DIM:
            d = _arg(args, kwargs, 1, "dim")
            d = d if isinstance(d, int) else -1
            return (int(x.shape[d]) if x is not None and x.dim() else 1), "sensitive"
        if name in NORMS:
            if x is None or x.dim() == 0:
                return 1, None
            if name in ("layer_norm", "native_layer_norm", "rms_norm"):
                s = _arg(args, kwargs, 1, "normalized_shape")
                s = [s] if isinstance(s, int) else list(s or [x.shape[-1]])
                k = _numel(s)
                if backward:
                    k = max(k, x.numel() // max(k, 1))  # weight grads sum rows
            elif name in ("batch_norm", "native_batch_norm"):
                k = x.numel() // max(int(x.shape[1]), 1) if x.dim() > 1 else x.numel()
            elif name == "group_norm":
                g = _arg(args, kwargs, 1, "num_groups")
                k = x.numel() // max(int(x.shape[0]) * (g if isinstance(g, int) else 1), 1)
            elif name == "instance_norm":
                k = _numel(x.shape[2:])
            else:
                k = int(x.shape[-1])
            return max(k, 1), "sensitive"
    except (IndexError, TypeError, ValueError, RuntimeError):
        return 1, None
    return 1, None


def acc_unit(dt):
    """The unit roundoff a correct kernel accumulates in: float32 for the
    low-precision floats and float32, float64 for float64."""
    return 2.0 ** -53 if dt == torch.float64 else 2.0 ** -24


def kernel_bounds(call, api, args, kwargs, recorded, r64, backward=False):
    """role -> the output error any correct kernel may make (see above); call(fc)
    re-runs the call in float64 with every tensor passed through fc; {} for an
    elementwise op."""
    k, kind = reduction_len(api, args, kwargs, backward)
    if kind is None or not r64:
        return {}
    if k < 0:  # a reduction: the terms an output element sums
        ins = max((a.numel() for a in list(args) + list(kwargs.values()) if torch.is_tensor(a)),
                  default=1)
        k = max(ins // max(min(o.numel() for o in r64.values()), 1), 1)
    if k <= 1:
        return {}
    eps32 = KERNEL_LAMBDA * math.sqrt(k) * 2.0 ** -24
    g = torch.Generator().manual_seed(20261202)

    def shake(t):
        if not t.is_floating_point():
            return t.clone()
        r = torch.randint(0, 2, t.shape, generator=g).to(torch.float64) * 2 - 1
        return t.double() * (1 + eps32 * r)

    try:
        if kind == "multilinear":
            alt = call(lambda t: t.double().abs() if t.is_floating_point() else t.clone())
        else:
            alt = call(shake)
    except Exception:  # the bound is an extra: the replay's own verdict stands
        return {}
    out = {}
    for role, c in recorded.items():
        ref, m = r64.get(role), alt.get(role)
        if ref is None or m is None or not c.is_floating_point() or m.shape != ref.shape:
            continue
        scale = acc_unit(c.dtype) / 2.0 ** -24
        n = float(ref.double().norm())
        if not (n > 0.0) or not math.isfinite(n):
            continue
        if kind == "multilinear":
            b = eps32 * scale * float(m.double().norm()) / n
        else:
            b = rel_err(m.double(), ref.double()) * scale
            if kind == "reduce":
                b = max(b, eps32 * scale)
        if math.isfinite(b):
            out[role] = b
    return out
