"""The backward replay of a record in msprobe's own layout (a job with
"grad_layout": "grad_fn", which acc_check sends for msprobe's dump.json).
Embedded after replay.py (src/compare/CMakeLists.txt): one namespace.

msprobe (8.x and 26: pt_hook_manager's _register_backward_pre_hook) records
an API's backward with a hook on the grad_fn of the API's first output
tensor, so its backward record holds what that one autograd node saw, not
the gradients of the API's arguments:

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
