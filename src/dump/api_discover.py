"""Which torch APIs the dump shim wraps: the rules, applied to the running torch.

The shim runs discover() at boot, inside the training process, on the torch
that is there (this file is compiled into libmsprobe_py.so as a string);
gen_api_table.py runs it once to write api_table.c, the fallback used when
discovery fails (and the proof, in the tests, that discovery reproduces it).
How the list is made:
  * Candidates are the public attributes of torch, torch.nn.functional and
    torch.Tensor that torch.overrides.get_testing_overrides() knows: that is
    torch's own list of callables that take tensors and dispatch
    __torch_function__, i.e. functions with tensor semantics. Classes, dtypes,
    factories with no tensor input (zeros, randn, arange...) and utilities
    are not in it.
  * Kept: in-place Tensor methods (trailing "_"), the in-place operators
    (__iadd__ ...) and __setitem__, as msprobe wraps them: an optimizer's
    param.add_(...) or x[mask] = 0 changes values, and unrecorded it would
    show only as a gap in the data flow. The shim copies their inputs before
    the call runs. Not kept among them: those that compute nothing
    (requires_grad_, share_memory_, detach_, rename_, set_, resize/sparse
    bookkeeping, apply_/map_ which run Python callables) and those that
    overwrite a tensor from nothing or copy whole tensors in (uniform_,
    normal_, random_, bernoulli_, cauchy_, exponential_, geometric_,
    log_normal_, fill_, zero_, copy_): the dump's step 0 starts before the
    model is built, so they would record every parameter at its init and at
    load_state_dict.
  * Dropped: anything private ("_x"); a hand list of calls that compute
    nothing a precision debugger wants (shape/metadata queries, conversions
    to Python objects, autograd plumbing, printing).
  * Kept dunder operators: the arithmetic, matmul, comparison, bitwise and
    __getitem__ operators, so "a + b" or "x[0]" is dumped as Tensor.__add__.
  * Added by hand: torch.distributed collectives (not overridable, so not in
    torch's list), and the torch._VF RNN kernels that nn.LSTM, nn.GRU, nn.RNN
    and their cells call directly (torch.lstm is another object: wrapping it
    would never see an nn.LSTM).
Wrapping an RNG op (dropout) is safe: the shim calls the original exactly once
and draws no random numbers itself.
"""
OPERATORS = {
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
    "__matmul__", "__rmatmul__", "__truediv__", "__rtruediv__", "__div__", "__rdiv__",
    "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__",
    "__neg__", "__abs__", "__invert__", "__and__", "__rand__", "__or__", "__ror__",
    "__xor__", "__rxor__", "__lshift__", "__rlshift__", "__rshift__", "__rrshift__",
    "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__", "__getitem__",
    "__setitem__",
}
# in-place operators: not in torch's overridable list under their own names
INPLACE_OPERATORS = {
    "__iadd__", "__isub__", "__imul__", "__imatmul__", "__itruediv__", "__idiv__",
    "__ifloordiv__", "__imod__", "__ipow__", "__iand__", "__ior__", "__ixor__",
    "__ilshift__", "__irshift__",
}
# in-place methods left out (see above)
INPLACE_SKIPPED = {
    "requires_grad_", "share_memory_", "detach_", "rename_", "set_", "apply_", "map_",
    "map2_", "resize_", "resize_as_", "resize_as_sparse_", "sparse_resize_",
    "sparse_resize_and_clear_", "as_strided_",
    "uniform_", "normal_", "random_", "bernoulli_", "cauchy_", "exponential_", "geometric_",
    "log_normal_", "fill_", "zero_", "copy_",
}
NOT_COMPUTE = {
    # metadata and Python conversions
    "size", "dim", "ndimension", "nelement", "numel", "stride", "storage_offset",
    "element_size", "data_ptr", "get_device", "is_contiguous", "is_complex",
    "is_floating_point", "is_nonzero", "is_same_size", "is_set_to", "is_shared",
    "is_signed", "is_pinned", "is_coalesced", "is_inference", "is_conj", "is_neg",
    "is_distributed", "has_names", "item", "tolist", "numpy", "storage",
    "untyped_storage", "_storage", "dim_order", "type", "new", "new_empty",
    "new_empty_strided", "new_full", "new_ones", "new_zeros", "new_tensor",
    "pin_memory", "share_memory_", "as_subclass", "refine_names", "rename",
    "align_as", "align_to", "unflatten", "names", "is_leaf", "nbytes", "itemsize",
    # autograd plumbing
    "backward", "register_hook", "retain_grad", "detach", "requires_grad_",
    "data", "grad", "grad_fn", "output_nr", "_version",
    # Python protocol methods that are not computations
    "__len__", "__iter__", "__bool__", "__index__", "__int__", "__float__",
    "__complex__", "__format__", "__repr__", "__hash__", "__reduce_ex__",
    "__setstate__", "__deepcopy__", "__dir__", "__contains__", "__array__",
    "__array_wrap__", "__reversed__", "__long__", "__nonzero__",
    # torch namespace utilities that take tensors but compute nothing
    "is_tensor", "is_storage", "numel", "result_type", "can_cast", "promote_types",
    "broadcast_shapes", "typename", "is_grad_enabled", "get_default_dtype",
    "equal", "allclose", "isclose", "is_same_size",
    "obj",  # a loop variable that torch's torch/__init__.py leaks into the namespace
}
DISTRIBUTED = ["all_reduce", "all_gather", "all_gather_into_tensor",
               "_all_gather_base", "broadcast", "reduce", "reduce_scatter",
               "reduce_scatter_tensor", "_reduce_scatter_base", "gather", "scatter",
               "all_to_all", "all_to_all_single", "send", "recv", "isend", "irecv",
               "all_gather_object", "broadcast_object_list"]

VF = ["lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell", "rnn_tanh_cell",
      "rnn_relu_cell"]

def keep(name, ns):
    if name in OPERATORS:
        return ns == "torch.Tensor"
    if name.startswith("_") or name in NOT_COMPUTE:
        return False
    if name.endswith("_"):
        return ns == "torch.Tensor" and name not in INPLACE_SKIPPED
    return True


def discover(torch):
    """The sorted, de-duplicated names of the APIs the shim can wrap in this torch."""
    import warnings
    import torch.nn.functional as F
    import torch.overrides as ov
    with warnings.catch_warnings():  # nothing on the training's stderr
        warnings.simplefilter("ignore")
        return _discover(torch, F, ov)


def _discover(torch, F, ov):
    overridable = ov.get_testing_overrides()
    ids = {id(f) for f in overridable}
    names = []
    for ns, obj in (("torch.nn.functional", F), ("torch", torch), ("torch.Tensor", torch.Tensor)):
        for name in sorted(dir(obj)):
            # The name first: this runs inside training, where reading some
            # attributes of torch imports a whole subsystem (torch 2.x loads
            # torch._dynamo, torch.onnx... lazily, through a module __getattr__).
            if not keep(name, ns):
                continue
            try:
                if ns != "torch.Tensor":
                    attr = vars(obj).get(name)  # what the module holds, nothing lazy
                else:
                    attr = obj.__dict__.get(name) or getattr(obj, name)
            except Exception:
                continue
            if id(attr) not in ids or not callable(attr) or isinstance(attr, type):
                continue
            names.append(ns + "." + name)
    names += ["torch.Tensor." + n for n in sorted(INPLACE_OPERATORS)
              if callable(getattr(torch.Tensor, n, None))]
    names += ["torch.distributed." + n for n in DISTRIBUTED if not n.startswith("_")]
    from torch import _VF
    names += ["torch._VF." + n for n in VF if callable(getattr(_VF, n, None))]
    return sorted(set(names))
