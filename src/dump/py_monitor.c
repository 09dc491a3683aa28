/* Monitor mode (msprobe-monitor(1)): msprobe's TrainerMon without its code in
 * the training script. MSPROBE_MONITOR_CONFIG names msprobe's monitor
 * config.json; the shim then dumps nothing, and each outermost
 * optimizer.step() is a monitored step, counted from 0 as msprobe's
 * optimizer context counts them:
 *
 *   the model      the first root module to run forward (the runtime's
 *                  root-forward event), named as msprobe names it: its
 *                  named_parameters() and named_modules(), "" for itself
 *   activations    xy_distribution: a global forward hook, rows "NAME.input"
 *                  and "NAME.output" ("_i" after each when there are several)
 *   grad_unreduced wg_distribution: a hook on each parameter's AccumulateGrad
 *                  node, param.grad as it stands once accumulated
 *   grad_reduced   wg_distribution: param.grad before optimizer.step()
 *   exp_avg(_sq)   mv_distribution: optimizer.state[param] before the step
 *   param_origin   param_distribution: the weights before the step, and
 *   param_updated  after it
 *
 * start_step, step_interval and collect_times choose the steps written;
 * module_ranks the ranks. Rows go to py_monitor_out.c, statistics are
 * computed by py_monitor_stats.c. */
#include "py_monitor_out.h"

#include <stdlib.h>
#include <string.h>

static msp_mon_config_t g_mc;
static PyObject *g_params;  /* list of (param, b"name") of the model, msprobe's order */
static PyObject *g_modules; /* module -> b"name" (activations) */
static PyObject *g_accs;    /* the AccumulateGrad nodes hooked (kept alive) */
static PyObject *g_model;   /* the root module named (weak use: identity only) */
static int64_t g_step, g_collected;
static int g_collect;      /* this step is written */
static int g_rank_ok = -1; /* module_ranks: this rank writes */
static int g_installed;

int msp_mon_boot(const char *path, char **msg)
{
    *msg = NULL;
    if (msp_mon_config_load(path, &g_mc) != MSP_OK) {
        *msg = strdup(msp_last_error());
        return -1;
    }
    char *keys = msp_mon_config_unsupported_text(&g_mc);
    if (keys)
        msp_shim_msg("%s: not supported, ignored: %s", path, keys);
    free(keys);
    if (g_mc.xy && !g_mc.forward_only)
        msp_shim_msg("%s: xy_distribution: activations are written, their gradients "
                     "(actv_grad) not yet",
                     path);
    if (msp_mon_out_init(&g_mc) != 0) {
        *msg = strdup("out of memory");
        return -1;
    }
    msp_g.mon_on = 1;
    return 0;
}

/* msprobe's _is_target_param / _is_target_module: no targets, everything; else
 * a name that starts with a target ("0:" prefixes allowed, as msprobe's vpp). */
static int targeted(const char *name, int module)
{
    if (g_mc.n_targets == 0 || (module && g_mc.all_xy))
        return 1;
    for (size_t i = 0; i < g_mc.n_targets; i++) {
        const char *t = g_mc.targets[i];
        if (!strncmp(t, "0:", 2))
            t += 2;
        if (module ? !strcmp(name, t) : !strncmp(name, t, strlen(t)))
            return 1;
    }
    return 0;
}

static int rank_writes(void)
{
    if (g_rank_ok < 0 || g_mc.n_module_ranks) {
        int64_t r = msp_current_rank();
        g_rank_ok = g_mc.n_module_ranks == 0;
        for (size_t i = 0; i < g_mc.n_module_ranks; i++)
            g_rank_ok |= g_mc.module_ranks[i] == (r < 0 ? 0 : r);
    }
    return g_rank_ok && msp_proc_may_write();
}

/* Whether step g_step is written (msprobe's step_final_hook condition). */
static void decide(void)
{
    g_collect = g_step >= g_mc.start_step && (g_step - g_mc.start_step) % g_mc.step_interval == 0 &&
                g_collected < g_mc.collect_times && rank_writes();
}

/* ---- grad_unreduced: AccumulateGrad hooks --------------------------------------- */

static PyObject *acc_hook(PyObject *self, PyObject *args)
{
    (void)args;
    if (!g_collect || msp_g.disabled || !g_params)
        Py_RETURN_NONE;
    Py_ssize_t i = PyLong_AsSsize_t(self);
    PyObject *e = i >= 0 && i < PyList_Size(g_params) ? PyList_GetItem(g_params, i) : NULL;
    PyObject *grad = e ? PyObject_GetAttrString(PyTuple_GetItem(e, 0), "grad") : NULL;
    if (grad && grad != Py_None) {
        msp_quiet_t q = msp_quiet_begin();
        msp_mon_row(MSP_MT_GRAD_UNREDUCED, PyBytes_AsString(PyTuple_GetItem(e, 1)), -1, grad);
        msp_quiet_end(q);
    }
    Py_XDECREF(grad);
    if (PyErr_Occurred())
        PyErr_Clear();
    Py_RETURN_NONE;
}

static PyMethodDef g_acc_def = {"msprobe_monitor_grad_hook", acc_hook, METH_VARARGS, NULL};

static void hook_accs(void)
{
    g_accs = PyList_New(0);
    for (Py_ssize_t i = 0; g_accs && i < PyList_Size(g_params); i++) {
        PyObject *p = PyTuple_GetItem(PyList_GetItem(g_params, i), 0);
        PyObject *ex = PyObject_CallMethod(p, "expand_as", "O", p);
        PyObject *fn = ex ? PyObject_GetAttrString(ex, "grad_fn") : NULL;
        PyObject *nf = fn && fn != Py_None ? PyObject_GetAttrString(fn, "next_functions") : NULL;
        PyObject *first = nf && PyTuple_Check(nf) && PyTuple_Size(nf) > 0 ? PyTuple_GetItem(nf, 0)
                                                                          : NULL;
        PyObject *acc = first && PyTuple_Check(first) ? PyTuple_GetItem(first, 0) : NULL;
        PyObject *idx = PyLong_FromSsize_t(i);
        PyObject *hook = idx ? PyCFunction_NewEx(&g_acc_def, idx, NULL) : NULL;
        PyObject *h = acc && hook ? PyObject_CallMethod(acc, "register_hook", "O", hook) : NULL;
        if (h)
            PyList_Append(g_accs, acc);
        Py_XDECREF(h);
        Py_XDECREF(hook);
        Py_XDECREF(idx);
        Py_XDECREF(nf);
        Py_XDECREF(fn);
        Py_XDECREF(ex);
        if (PyErr_Occurred())
            msp_py_warn_error("monitor", "cannot hook a parameter's gradient: grad_unreduced "
                                         "misses it");
    }
}

/* ---- the model: the first root module ---------------------------------------- */

static PyObject *named(PyObject *root, const char *method, int module)
{
    PyObject *out = module ? PyDict_New() : PyList_New(0);
    PyObject *it = out ? PyObject_CallMethod(root, method, NULL) : NULL;
    PyObject *iter = it ? PyObject_GetIter(it) : NULL;
    PyObject *pair;
    while (iter && (pair = PyIter_Next(iter))) {
        PyObject *b = PyUnicode_AsUTF8String(PyTuple_GetItem(pair, 0));
        PyObject *obj = PyTuple_GetItem(pair, 1);
        PyObject *rg = !module && obj ? PyObject_GetAttrString(obj, "requires_grad") : NULL;
        if (b && module && targeted(PyBytes_AsString(b), 1))
            PyDict_SetItem(out, obj, b);
        else if (b && !module && rg == Py_True && targeted(PyBytes_AsString(b), 0)) {
            PyObject *e = PyTuple_Pack(2, obj, b);
            if (e)
                PyList_Append(out, e);
            Py_XDECREF(e);
        }
        Py_XDECREF(rg);
        Py_XDECREF(b);
        Py_DECREF(pair);
    }
    Py_XDECREF(iter);
    Py_XDECREF(it);
    if (PyErr_Occurred())
        PyErr_Clear();
    return out;
}

static void root_forward(PyObject *module, PyObject *input)
{
    (void)input;
    if (g_model || !rank_writes())
        return;
    g_model = module;
    Py_INCREF(g_model);
    g_params = named(module, "named_parameters", 0);
    if (g_mc.xy)
        g_modules = named(module, "named_modules", 1);
    if (g_mc.wg && g_params)
        hook_accs();
    if (!g_collect)
        decide();
}

/* ---- activations --------------------------------------------------------------- */

static void actv_rows(const char *name, const char *role, PyObject *v)
{
    char row[600];
    PyObject *list = PyTuple_Check(v) || PyList_Check(v) ? v : NULL;
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; list && i < PySequence_Size(list); i++) {
        PyObject *x = PySequence_GetItem(list, i);
        n += x && msp_is_tensor(x);
        Py_XDECREF(x);
    }
    if (!list) {
        if (!msp_is_tensor(v))
            return;
        snprintf(row, sizeof row, "%s.%s", name, role);
        msp_mon_row(MSP_MT_ACTV, row, 0, v);
        return;
    }
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < PySequence_Size(list); i++) {
        PyObject *x = PySequence_GetItem(list, i);
        if (x && msp_is_tensor(x)) {
            if (n == 1)
                snprintf(row, sizeof row, "%s.%s", name, role);
            else
                snprintf(row, sizeof row, "%s.%s_%zd", name, role, k);
            msp_mon_row(MSP_MT_ACTV, row, 0, x);
            k++;
        }
        Py_XDECREF(x);
    }
    PyErr_Clear();
}

static PyObject *fwd_hook(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *mod, *in, *out;
    if (!g_collect || !g_modules || msp_g.disabled || msp_t_depth > 0 ||
        !PyArg_UnpackTuple(args, "hook", 3, 3, &mod, &in, &out)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *name = PyDict_GetItem(g_modules, mod);
    PyObject *training = name ? PyObject_GetAttrString(mod, "training") : NULL;
    if (training == Py_True && !g_mc.backward_only) {
        msp_quiet_t q = msp_quiet_begin();
        actv_rows(PyBytes_AsString(name), "input", in);
        actv_rows(PyBytes_AsString(name), "output", out);
        msp_quiet_end(q);
    }
    Py_XDECREF(training);
    PyErr_Clear();
    Py_RETURN_NONE;
}

static PyMethodDef g_fwd_def = {"msprobe_monitor_forward_hook", fwd_hook, METH_VARARGS, NULL};

/* ---- the optimizer's step ------------------------------------------------------- */

static void param_rows(msp_mon_task_t task)
{
    for (Py_ssize_t i = 0; g_params && i < PyList_Size(g_params); i++) {
        PyObject *e = PyList_GetItem(g_params, i);
        msp_mon_row(task, PyBytes_AsString(PyTuple_GetItem(e, 1)), -1, PyTuple_GetItem(e, 0));
    }
}

static void grad_rows(void)
{
    for (Py_ssize_t i = 0; g_params && i < PyList_Size(g_params); i++) {
        PyObject *e = PyList_GetItem(g_params, i);
        PyObject *g = PyObject_GetAttrString(PyTuple_GetItem(e, 0), "grad");
        if (g && g != Py_None) /* msprobe: "grad is None", and no row */
            msp_mon_row(MSP_MT_GRAD_REDUCED, PyBytes_AsString(PyTuple_GetItem(e, 1)), -1, g);
        Py_XDECREF(g);
    }
    PyErr_Clear();
}

static void state_rows(PyObject *opt)
{
    PyObject *state = PyObject_GetAttrString(opt, "state");
    static const char *const keys[2] = {"exp_avg", "exp_avg_sq"};
    for (int k = 0; state && k < 2; k++) {
        for (Py_ssize_t i = 0; g_params && i < PyList_Size(g_params); i++) {
            PyObject *e = PyList_GetItem(g_params, i);
            PyObject *st = PyObject_GetItem(state, PyTuple_GetItem(e, 0));
            PyObject *t = st && PyDict_Check(st) ? PyDict_GetItemString(st, keys[k]) : NULL;
            if (t)
                msp_mon_row(k ? MSP_MT_EXP_AVG_SQ : MSP_MT_EXP_AVG,
                            PyBytes_AsString(PyTuple_GetItem(e, 1)), -1, t);
            Py_XDECREF(st);
            PyErr_Clear();
        }
    }
    Py_XDECREF(state);
    PyErr_Clear();
}

static void optimizer_step(PyObject *opt, int after)
{
    if (!g_collect) {
        if (after) {
            g_step++;
            decide();
        }
        return;
    }
    if (!after) {
        if (g_mc.wg)
            grad_rows();
        if (g_mc.mv)
            state_rows(opt);
        if (g_mc.param)
            param_rows(MSP_MT_PARAM_ORIGIN);
        return;
    }
    if (g_mc.param)
        param_rows(MSP_MT_PARAM_UPDATED);
    msp_mon_out_step(g_step);
    g_collected++;
    if (g_collected == g_mc.collect_times)
        msp_shim_msg("monitor: collect_times (%lld) reached at step %lld: monitoring ends",
                     (long long)g_mc.collect_times, (long long)g_step);
    g_step++;
    decide();
}

void msp_mon_install(PyObject *torch)
{
    if (g_installed || !msp_g.mon_on)
        return;
    g_installed = 1;
    if (msp_mon_stats_init(torch) != 0) {
        msp_py_warn_error("monitor", "cannot set up the statistics; nothing is monitored");
        return;
    }
    msp_listener_t l = {0};
    l.root_forward = root_forward;
    l.optimizer_step = optimizer_step;
    if (msp_listen(&l) != 0) {
        msp_shim_msg("warning: monitor: too many listeners; nothing is monitored");
        return;
    }
    if (g_mc.xy) {
        PyObject *m = PyImport_ImportModule("torch.nn.modules.module");
        PyObject *hook = PyCFunction_NewEx(&g_fwd_def, NULL, NULL);
        PyObject *h = m && hook ? PyObject_CallMethod(m, "register_module_forward_hook", "O", hook)
                                : NULL;
        if (!h)
            msp_py_warn_error("monitor", "cannot hook module forwards: no activations");
        Py_XDECREF(h);
        Py_XDECREF(hook);
        Py_XDECREF(m);
    }
    decide();
}
