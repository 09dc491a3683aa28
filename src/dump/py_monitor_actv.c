/* Activations for monitor mode (msprobe-monitor(1), xy_distribution), named
 * and ordered as msprobe's module hooks name them:
 *
 *   actv       a global forward hook: "NAME.input" for the module's tensor
 *              arguments, "NAME.output" for what it returns ("_i" after the
 *              role for each element when there are several; an output
 *              element that is no tensor is a row of nan, as msprobe's)
 *   actv_grad  a global full backward hook: "NAME.input" for the gradients
 *              of the module's inputs (nan where an input has none),
 *              "NAME.output" for those of its outputs, in the order autograd
 *              calls the hooks
 *
 * Only the model's modules (those py_monitor.c names) are taken, and only in
 * training mode for actv, as msprobe does. A full backward hook makes torch
 * pass a module's inputs and outputs through BackwardHookFunction, whose
 * results may not be changed in place (ReLU(inplace=True) after a
 * convolution would raise). msprobe clones them all, a copy of every
 * activation twice a step; here they are detached aliases instead (see
 * g_alias_src), with the same values in every row and no copy but where an
 * in-place change needs one. */
#include "py_monitor_actv.h"

#include <stdio.h>

static const int *g_collect;
static PyObject *g_names;    /* module -> b"name", set when the model is found */
static PyObject *g_alias_ns; /* g_alias_src's globals, kept */

/* torch's BackwardHookFunction hands the module its own arguments back, so
 * autograd forbids changing them in place; this one hands back detached
 * aliases (the same memory and version counter, a gradient edge of their
 * own), so an in-place change after a module is allowed and is checked by
 * autograd exactly as without hooks. Where an in-place change of an alias
 * would leave another name of the same memory with the unchanged gradient
 * edge, it is a copy instead, as msprobe copies every input and output:
 * the inputs of a module that changes its input in place (torch's
 * ReLU(inplace=True) and the like, or one seen doing it), and an output
 * that is a view or one of the module's inputs. */
static const char g_alias_src[] =
    "import torch, weakref\n"
    "from torch.utils import hooks\n"
    "import torch.nn.modules._functions as _fns\n"
    "class BackwardHookFunction(torch.autograd.Function):\n"
    "    @staticmethod\n"
    "    def forward(ctx, *args):\n"
    "        out = tuple(a.detach() for a in args)\n"
    "        ctx.mark_non_differentiable(*[o for a, o in zip(args, out) if not a.requires_grad])\n"
    "        return out\n"
    "    @staticmethod\n"
    "    def backward(ctx, *args):\n"
    "        return args\n"
    "BackwardHookFunction.msprobe_monitor = True\n"
    "_changes = weakref.WeakSet()\n"
    "copies = [0]\n"
    "def _copy(x):\n"
    "    if isinstance(x, tuple):\n"
    "        return tuple(_copy(v) for v in x)\n"
    "    if not isinstance(x, torch.Tensor):\n"
    "        return x\n"
    "    copies[0] += 1\n"
    "    return x.clone()\n"
    "def _wrap_in(setup):\n"
    "    def wrapped(self, args):\n"
    "        res = setup(self, args)\n"
    "        if self.input_tensors_index is None:\n"
    "            return res\n"
    "        m = self.module\n"
    "        if getattr(m, 'inplace', False) is True or m in _changes:\n"
    "            return _copy(res)\n"
    "        self.msprobe_in = [(t, t._version) for t in res if isinstance(t, torch.Tensor)]\n"
    "        return res\n"
    "    wrapped.msprobe_monitor = True\n"
    "    return wrapped\n"
    "def _wrap_out(setup):\n"
    "    def wrapped(self, args):\n"
    "        seen = self.__dict__.pop('msprobe_in', None) or ()\n"
    "        if any(t._version != v for t, v in seen):\n"
    "            _changes.add(self.module)\n"
    "            _changed(self.module)\n"
    "        res = setup(self, args)\n"
    "        idx = self.output_tensors_index\n"
    "        if idx is None:\n"
    "            return res\n"
    "        one = not isinstance(args, tuple)\n"
    "        outs, new = ((args,), [res]) if one else (args, list(res))\n"
    "        copied = False\n"
    "        for i in idx:\n"
    "            o = outs[i]\n"
    "            if o._is_view() or any(o is t for t, _ in seen):\n"
    "                new[i], copied = _copy(new[i]), True\n"
    "        if not copied:\n"
    "            return res\n"
    "        if one:\n"
    "            return new[0]\n"
    "        return type(res)(*new) if hasattr(res, '_fields') else type(res)(new)\n"
    "    wrapped.msprobe_monitor = True\n"
    "    return wrapped\n"
    "if not getattr(_fns.BackwardHookFunction, 'msprobe_monitor', False):\n"
    "    _fns.BackwardHookFunction = BackwardHookFunction\n"
    "for _n, _w in (('setup_input_hook', _wrap_in), ('setup_output_hook', _wrap_out)):\n"
    "    _f = getattr(hooks.BackwardHook, _n)\n"
    "    if not getattr(_f, 'msprobe_monitor', False):\n"
    "        setattr(hooks.BackwardHook, _n, _w(_f))\n";

void msp_mon_actv_model(PyObject *modules)
{
    PyObject *old = g_names;
    Py_XINCREF(modules);
    g_names = modules;
    Py_XDECREF(old);
}

/* Rows for the elements of v (a tensor, or a tuple or list of values):
 * tensors_only keeps only its tensors (a module's arguments), else every
 * element is a row (nan when it is no tensor). */
static void rows(msp_mon_task_t task, const char *name, const char *role, PyObject *v,
                 int tensors_only)
{
    char row[600];
    if (msp_is_tensor(v)) {
        snprintf(row, sizeof row, "%s.%s", name, role);
        msp_mon_row(task, row, 0, v);
        return;
    }
    if (!PyTuple_Check(v) && !PyList_Check(v))
        return;
    Py_ssize_t n = PySequence_Size(v), k = 0, count = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PySequence_GetItem(v, i);
        count += !tensors_only || (x && msp_is_tensor(x));
        Py_XDECREF(x);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PySequence_GetItem(v, i);
        if (x && (!tensors_only || msp_is_tensor(x))) {
            if (count == 1)
                snprintf(row, sizeof row, "%s.%s", name, role);
            else
                snprintf(row, sizeof row, "%s.%s_%zd", name, role, k);
            msp_mon_row(task, row, 0, msp_is_tensor(x) ? x : NULL);
            k++;
        }
        Py_XDECREF(x);
    }
    PyErr_Clear();
}

/* The model's name of mod while a step is written, else NULL. */
static const char *taken(PyObject *mod)
{
    if (!*g_collect || !g_names || msp_g.disabled || msp_t_depth > 0)
        return NULL;
    PyObject *name = PyDict_GetItem(g_names, mod);
    return name ? PyBytes_AsString(name) : NULL;
}

static PyObject *fwd_hook(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *mod, *in, *out;
    const char *name = NULL;
    if (PyArg_UnpackTuple(args, "hook", 3, 3, &mod, &in, &out))
        name = taken(mod);
    PyObject *training = name ? PyObject_GetAttrString(mod, "training") : NULL;
    if (training == Py_True) {
        int64_t t0 = msp_mon_clock();
        msp_quiet_t q = msp_quiet_begin();
        rows(MSP_MT_ACTV, name, "input", in, 1);
        rows(MSP_MT_ACTV, name, "output", out, 0);
        msp_mon_rows_end();
        msp_quiet_end(q);
        msp_mon_spent(MSP_MON_T_HOOKS, t0);
    }
    Py_XDECREF(training);
    PyErr_Clear();
    Py_RETURN_NONE;
}

static PyObject *bwd_hook(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *mod, *gin, *gout;
    const char *name = NULL;
    if (PyArg_UnpackTuple(args, "hook", 3, 3, &mod, &gin, &gout))
        name = taken(mod);
    if (name) {
        int64_t t0 = msp_mon_clock();
        msp_quiet_t q = msp_quiet_begin();
        rows(MSP_MT_ACTV_GRAD, name, "input", gin, 0);
        rows(MSP_MT_ACTV_GRAD, name, "output", gout, 0);
        msp_mon_rows_end();
        msp_quiet_end(q);
        msp_mon_spent(MSP_MON_T_HOOKS, t0);
    }
    PyErr_Clear();
    Py_RETURN_NONE;
}

/* A module changed its input in place under the alias: said once a module. */
int64_t msp_mon_actv_copies(void)
{
    PyObject *c = g_alias_ns ? PyDict_GetItemString(g_alias_ns, "copies") : NULL;
    PyObject *n = c && PyList_Check(c) && PyList_Size(c) == 1 ? PyList_GetItem(c, 0) : NULL;
    int64_t v = n ? (int64_t)PyLong_AsLongLong(n) : 0;
    PyErr_Clear();
    return v;
}

static PyObject *changed(PyObject *self, PyObject *mod)
{
    (void)self;
    PyObject *name = g_names ? PyDict_GetItem(g_names, mod) : NULL;
    PyObject *cls = name ? NULL : PyObject_GetAttrString((PyObject *)Py_TYPE(mod), "__name__");
    PyObject *b = cls ? PyUnicode_AsUTF8String(cls) : NULL;
    const char *what = name ? PyBytes_AsString(name) : b ? PyBytes_AsString(b) : NULL;
    msp_shim_msg("warning: monitor: module %s changed its input in place: its inputs are copied "
                 "from now on, as msprobe copies them; in this call, a caller that reads the "
                 "input again gets a gradient that skips the change",
                 what ? what : "?");
    Py_XDECREF(b);
    Py_XDECREF(cls);
    PyErr_Clear();
    Py_RETURN_NONE;
}

static PyMethodDef g_changed_def = {"msprobe_monitor_changed", changed, METH_O, NULL};
static PyMethodDef g_fwd_def = {"msprobe_monitor_forward_hook", fwd_hook, METH_VARARGS, NULL};
static PyMethodDef g_bwd_def = {"msprobe_monitor_backward_hook", bwd_hook, METH_VARARGS, NULL};

/* The two global hooks, registered only while a step is written
 * (msp_mon_actv_arm): between written steps torch's modules run as in plain
 * training, with no BackwardHook, no alias and no copy. */
static const struct {
    const char *reg, *fail;
    PyMethodDef *def;
} g_hooks[2] = {
    {"register_module_forward_hook", "cannot hook module forwards: no activations", &g_fwd_def},
    {"register_module_full_backward_hook", "cannot hook module backwards: no actv_grad",
     &g_bwd_def},
};
static PyObject *g_hook_mod;  /* torch.nn.modules.module */
static PyObject *g_handle[2]; /* torch's RemovableHandles while armed */
static int g_want[2];         /* the hooks the config asks for */

void msp_mon_actv_arm(int on)
{
    for (int k = 0; k < 2; k++) {
        if (!g_want[k] || !on == !g_handle[k])
            continue;
        if (on) {
            PyObject *hook = PyCFunction_NewEx(g_hooks[k].def, NULL, NULL);
            g_handle[k] = hook ? PyObject_CallMethod(g_hook_mod, g_hooks[k].reg, "O", hook) : NULL;
            Py_XDECREF(hook);
            if (!g_handle[k]) {
                msp_py_warn_error("monitor", g_hooks[k].fail);
                g_want[k] = 0;
            }
        } else {
            PyObject *r = PyObject_CallMethod(g_handle[k], "remove", NULL);
            Py_XDECREF(r);
            Py_CLEAR(g_handle[k]);
        }
        PyErr_Clear();
    }
}

void msp_mon_actv_install(const msp_mon_config_t *cfg, const int *collect)
{
    static int installed;
    if (installed++) /* once: DYNAMIC_MONITOR may turn xy_distribution on later */
        return;
    g_collect = collect;
    if (cfg->forward_only && cfg->backward_only) {
        msp_shim_msg("warning: monitor: %s: forward_only and backward_only are both true: no "
                     "activations (as msprobe)",
                     cfg->source);
        return;
    }
    g_hook_mod = PyImport_ImportModule("torch.nn.modules.module");
    if (!g_hook_mod) {
        msp_py_warn_error("monitor", g_hooks[0].fail);
        return;
    }
    g_want[0] = !cfg->backward_only;
    if (!cfg->forward_only) {
        PyObject *ns = msp_py_run_source(g_alias_src, "msprobe_monitor_backward");
        PyObject *cb = ns ? PyCFunction_NewEx(&g_changed_def, NULL, NULL) : NULL;
        g_want[1] = cb && PyDict_SetItemString(ns, "_changed", cb) == 0;
        if (!g_want[1])
            msp_py_warn_error("monitor", g_hooks[1].fail);
        Py_XDECREF(cb);
        g_alias_ns = ns;
    }
    msp_mon_actv_arm(1);
}
