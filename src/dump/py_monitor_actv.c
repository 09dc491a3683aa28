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
 * pass a module's outputs through BackwardHookFunction, whose results may not
 * be changed in place (ReLU(inplace=True) after a convolution would raise):
 * as msprobe does, those results are cloned, which costs a copy of each
 * module's output while actv_grad is asked for and changes no value. */
#include "py_monitor_actv.h"

#include <stdio.h>

static const int *g_collect;
static PyObject *g_names; /* module -> b"name", set when the model is found */

static const char g_clone_src[] = "import torch\n"
                                  "from torch.utils import hooks\n"
                                  "def _clone(x):\n"
                                  "    if isinstance(x, tuple):\n"
                                  "        return tuple(_clone(v) for v in x)\n"
                                  "    return x.clone() if isinstance(x, torch.Tensor) else x\n"
                                  "def _wrap(setup):\n"
                                  "    def wrapped(*args, **kwargs):\n"
                                  "        return _clone(setup(*args, **kwargs))\n"
                                  "    wrapped.msprobe_monitor = True\n"
                                  "    return wrapped\n"
                                  "for _n in ('setup_input_hook', 'setup_output_hook'):\n"
                                  "    _f = getattr(hooks.BackwardHook, _n)\n"
                                  "    if not getattr(_f, 'msprobe_monitor', False):\n"
                                  "        setattr(hooks.BackwardHook, _n, _wrap(_f))\n";

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

static PyMethodDef g_fwd_def = {"msprobe_monitor_forward_hook", fwd_hook, METH_VARARGS, NULL};
static PyMethodDef g_bwd_def = {"msprobe_monitor_backward_hook", bwd_hook, METH_VARARGS, NULL};

static int global_hook(PyObject *m, const char *reg, PyMethodDef *def)
{
    PyObject *hook = PyCFunction_NewEx(def, NULL, NULL);
    PyObject *h = hook ? PyObject_CallMethod(m, reg, "O", hook) : NULL;
    int rc = h ? 0 : -1;
    Py_XDECREF(h);
    Py_XDECREF(hook);
    return rc;
}

void msp_mon_actv_install(const msp_mon_config_t *cfg, const int *collect)
{
    g_collect = collect;
    int fwd = !cfg->backward_only, bwd = !cfg->forward_only;
    if (cfg->forward_only && cfg->backward_only) {
        msp_shim_msg("warning: monitor: %s: forward_only and backward_only are both true: no "
                     "activations (as msprobe)",
                     cfg->source);
        return;
    }
    PyObject *m = PyImport_ImportModule("torch.nn.modules.module");
    if (!m || (fwd && global_hook(m, "register_module_forward_hook", &g_fwd_def) != 0))
        msp_py_warn_error("monitor", "cannot hook module forwards: no activations");
    if (m && bwd) {
        PyObject *ns = msp_py_run_source(g_clone_src, "msprobe_monitor_backward");
        if (!ns || global_hook(m, "register_module_full_backward_hook", &g_bwd_def) != 0)
            msp_py_warn_error("monitor", "cannot hook module backwards: no actv_grad");
        Py_XDECREF(ns);
    }
    Py_XDECREF(m);
}
