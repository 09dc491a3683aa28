"""A backward record's replay (embedded after replay.py: one namespace;
src/compare/CMakeLists.txt), in either layout.

Ours (msprobe-dump(5)): a backward record holds the gradients of the API's
arguments, output.K (or output.kwarg.NAME) for input.K (kwarg.NAME), and
input.K the gradient arriving at the forward's output.K: the call is re-run
with the arguments whose gradient was recorded as leaves, and autograd runs
from its outputs with the recorded incoming gradients (replay_backward).

msprobe's own layout (a job with "grad_layout": "grad_fn", which acc_check
sends for msprobe's dump.json): msprobe (8.x and 26: pt_hook_manager's
_register_backward_pre_hook) records an API's backward with a hook on the
grad_fn of the API's first output tensor, so its backward record holds what
that one autograd node saw, not the gradients of the API's arguments:

  input.K   the gradient arriving at the node's K-th output
  output.K  the gradient the node hands on at its K-th edge, after autograd
            has checked it against that edge's shape

For F.linear on a 2-d input the node is addmm's: output.0 is the bias's
gradient, output.1 the input's, output.2 that of weight.t() ([in, out], not
the weight's shape); on a 3-d input it is the view after addmm, whose only
gradient is addmm's output gradient ([N*L, out]). For F.cross_entropy it is
nll_loss's: output.0 is the gradient of the log_softmax inside the call
(-1/N at each target), not of the logits. layer_norm's node hands on input,
weight, bias: the bias is output.2, where argument order would put the
weight. Mapped by argument order, these compare different tensors.

So they are replayed as msprobe recorded them: the call re-run with the
arguments that took a gradient in the run (requires_grad as recorded), a
hook on the same node of the replayed call, and autograd run from that
node's outputs with the recorded incoming gradients; the hook's gradients
are the replay's output.K.
"""


def _grad_role(fwd_role):
    # forward input.N[.M] <-> backward output.N[.M]; kwarg.NAME <-> output.kwarg.NAME
    if fwd_role.startswith("input."):
        return "output." + fwd_role[len("input."):]
    return "output." + fwd_role


def backward_start(job, tensors):
    """What a backward replay starts from, in either layout: the API and its
    callable, the forward call's arguments (checked as any replay's), the
    record's incoming and recorded gradients, and the dtypes the forward's
    outputs had (they say how the compare side computed: autocast)."""
    prefix, api, fn = resolve(job["forward"], job.get("references"))
    fwd_args = job["args"]
    grads_in = {role: t for (r, role), t in tensors.items() if r == "b" and role.startswith("input")}
    recorded = {role: t for (r, role), t in tensors.items() if r == "b" and role.startswith("output")}
    if not grads_in:
        raise Skip("the backward record holds no incoming gradient")
    args, kwargs = build_call(call_tensors(tensors, fwd_args, "f"), fwd_args)
    check_random(api, kwargs, args)
    if prefix != "Custom":
        check_strings(fn, "%s.%s" % (prefix, api), args, kwargs)
    fwd_want = {r: getattr(torch, d.split(".")[-1]) for r, d in job.get("forward_dtypes", {}).items()}
    return api, fn, fwd_args, args, kwargs, grads_in, recorded, fwd_want


def backward_forward(tensors, fwd_args, fn, api, wants, fc, grad):
    """The forward call again, cast by fc (None: as recorded); with grad, the
    floating arguments whose ids are in wants are leaves that take a
    gradient. (the call's tensors by role, its outputs)."""
    def leaf(t):
        v = t if fc is None else fc(t)
        if grad and v.is_floating_point() and id(t) in wants:
            v = v.detach().clone().requires_grad_(True)
        return v
    objs = call_tensors(tensors, fwd_args, "f", leaf)
    a, k = build_call(objs, fwd_args)
    return objs, run(fn, api, a, k)


def mode_parts(mode):
    """A Mode's cast and context, or a bare cast's (to64) with no context."""
    import contextlib
    if isinstance(mode, Mode):
        return mode.fcast(), mode.context()
    return mode, contextlib.nullcontext()


def backward_judge(job, call, forward, api, fwd_args, args, kwargs, recorded, fwd_want, keep):
    """A backward replay's verdict: call(mode) run in float64 and in the mode
    the forward's dtypes (or the recorded gradients') say, keep(recorded,
    r64) the recorded gradients to judge, each against the kernels' bound."""
    def fwd_only(mode):
        with torch.no_grad(), mode.context():
            return forward(mode.fcast(), False)[1]

    r64 = call(to64)
    if fwd_want:
        mode, _ = choose_mode(fwd_only, fwd_want, fwd_args)
        rn = call(mode)
    else:
        mode, rn = choose_mode(call, {r: t.dtype for r, t in recorded.items()}, fwd_args)
    recorded = keep(recorded, r64)
    bounds = kernel_bounds(call, api, args, kwargs, recorded, r64, backward=True)
    return judge(recorded, r64, rn, sampled(job, mode.name), job.get("acc"), bounds)


def replay_backward(job, tensors):
    api, fn, fwd_args, args, kwargs, grads_in, recorded, fwd_want = backward_start(job, tensors)
    # roles whose gradient was recorded (an aliased tensor is one leaf: see call);
    # only those inputs take one: batch_norm's running statistics, for one, must not
    grad_roles = [role for (r, role) in tensors if r == "f" and _grad_role(role) in recorded]
    wants = {id(t) for (r, role), t in tensors.items() if r == "f" and role in grad_roles}

    def forward(fc, grad):
        return backward_forward(tensors, fwd_args, fn, api, wants, fc, grad)

    def call(mode):
        fc, ctx = mode_parts(mode)
        with ctx, torch.enable_grad():
            objs, out = forward(fc, True)
            outs, gos = [], []
            for role, o in out.items():
                g = grads_in.get("input" + role[len("output"):])
                if g is not None and o.requires_grad:
                    outs.append(o)
                    gos.append((g if fc is None else fc(g)).to(o.dtype))
            roles = [r for r in grad_roles if objs[r].requires_grad]
            leaves, seen = [], set()
            for r in roles:  # an aliased tensor is one leaf
                if id(objs[r]) not in seen:
                    seen.add(id(objs[r]))
                    leaves.append(objs[r])
            if not outs or not leaves:
                raise Skip("no output of the forward call takes a gradient")
            gr = torch.autograd.grad(outs, leaves, gos, allow_unused=True)
        by_obj = {id(t): g for t, g in zip(leaves, gr)}
        res = {}
        for r in roles:
            g = by_obj.get(id(objs[r]))
            if g is not None:
                res[_grad_role(r)] = g
        return res

    def keep(recorded, r64):
        return {r: t for r, t in recorded.items() if r in r64}

    return backward_judge(job, call, forward, api, fwd_args, args, kwargs, recorded, fwd_want,
                          keep)


def _first_tensor(out):
    """The output msprobe hooks: the first tensor, walking into lists and
    tuples (flatten_out keeps that order)."""
    for role, t in out.items():
        return role, t
    return None, None


def replay_backward_grad_fn(job, tensors):
    api, fn, fwd_args, args, kwargs, grads_in, recorded, fwd_want = backward_start(job, tensors)
    # the arguments that took a gradient in the run; a dump that does not say:
    # every floating argument (an edge without one only adds a gradient the
    # record does not hold)
    said = job.get("requires_grad")
    wants = {id(t) for (r, role), t in tensors.items()
             if r == "f" and (said is None or role in said)}

    def forward(fc, grad):
        return backward_forward(tensors, fwd_args, fn, api, wants, fc, grad)

    def call(mode):
        fc, ctx = mode_parts(mode)
        with ctx, torch.enable_grad():
            objs, out = forward(fc, True)
            _, first = _first_tensor(out)
            node = first.grad_fn if first is not None else None
            if node is None:
                raise Skip("the forward call's first output takes no gradient")
            roots, gos = [], []
            for o in out.values():
                if o.grad_fn is not node:
                    continue
                g = grads_in.get("input.%d" % o.output_nr)
                if g is not None:
                    roots.append(o)
                    gos.append((g if fc is None else fc(g)).to(o.dtype))
            leaves, seen = [], set()
            for t in objs.values():
                if torch.is_tensor(t) and t.requires_grad and id(t) not in seen:
                    seen.add(id(t))
                    leaves.append(t)
            if not roots or not leaves:
                raise Skip("no output of the forward call takes a recorded gradient")
            got = []
            h = node.register_hook(lambda gi, go: got.append(gi))
            try:
                torch.autograd.grad(roots, leaves, gos, allow_unused=True)
            finally:
                h.remove()
        if not got:
            raise Skip("autograd did not run the output's node")
        return {"output.%d" % k: g.detach() for k, g in enumerate(got[0]) if g is not None}

    def keep(recorded, r64):
        missing = [r for r in recorded if r not in r64]
        if missing:
            raise Skip("the replayed call's output node hands on no %s: the call is not rebuilt "
                       "exactly" % missing[0])
        return recorded

    return backward_judge(job, call, forward, api, fwd_args, args, kwargs, recorded, fwd_want,
                          keep)
