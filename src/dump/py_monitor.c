/* Monitor mode (msprobe-monitor(1)): msprobe's TrainerMon without its code in
 * the training script. MSPROBE_MONITOR_CONFIG names msprobe's monitor
 * config.json; the shim then dumps nothing, and each outermost
 * optimizer.step() is a monitored step, counted from 0 as msprobe's
 * optimizer context counts them:
 *
 *   the model      the first root module to run forward (the runtime's
 *                  root-forward event), named as msprobe names it: its
 *                  named_parameters() and named_modules(), "" for itself
 *   activations    xy_distribution: py_monitor_actv.c
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
#include "py_monitor_actv.h"
#include "py_monitor_ahead.h"
#include "py_monitor_dyn.h"

#include <stdlib.h>
#include <string.h>

static msp_mon_config_t g_mc;
static PyObject *g_params;  /* list of (param, b"name") of the model, msprobe's order */
static PyObject *g_modules; /* module -> b"name" (activations) */
static PyObject *g_accs;    /* the AccumulateGrad nodes hooked (kept alive) */
static PyObject *g_model;   /* the root module named (weak use: identity only) */
static int64_t g_step, g_collected;
static int g_collect;      /* this step is written */
static int g_active = 1;   /* monitoring (DYNAMIC_MONITOR: once dynamic_on is true) */
static int g_rank_ok = -1; /* module_ranks: this rank writes */
static int g_installed;
static int g_silent_rank; /* a root forward found this rank writing nothing */
/* Per parameter (g_params' order), statistics computed on the helper
 * thread (py_monitor_ahead.c): its gradient while the optimizer's step runs
 * (which only reads it; its row, g_grad_row, waits for them), and AdamW's
 * state while the next forward and backward run. */
enum { MEMO_GRAD = 0, MEMO_M, MEMO_V, MEMO_PARAM, MEMO_N };
static msp_mon_memo_t *g_memo[MEMO_N];
static int64_t *g_grad_row, *g_param_row;
static int g_grad_moved; /* said once: a gradient written during the step */

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
    if (msp_mon_out_init(&g_mc) != 0) {
        *msg = strdup("out of memory");
        return -1;
    }
    msp_g.mon_on = 1;
    if (msp_mon_dyn_on()) {
        g_active = 0;
        msp_shim_msg("monitor: DYNAMIC_MONITOR is set: monitoring starts at the step after %s "
                     "says \"dynamic_on\": true",
                     path);
    }
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
    g_collect = g_active && g_step >= g_mc.start_step &&
                (g_step - g_mc.start_step) % g_mc.step_interval == 0 &&
                g_collected < g_mc.collect_times && rank_writes();
    /* armed until the model is known: its first forward runs before the
     * first decision that knows the rank, and a module's backward hooks are
     * taken when its forward starts */
    msp_mon_actv_arm(g_mc.xy && (g_collect || (!g_model && !g_silent_rank)));
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
        int64_t t0 = msp_mon_clock();
        msp_quiet_t q = msp_quiet_begin();
        msp_mon_row(MSP_MT_GRAD_UNREDUCED, PyBytes_AsString(PyTuple_GetItem(e, 1)), -1, grad);
        msp_mon_rows_end();
        msp_quiet_end(q);
        msp_mon_spent(MSP_MON_T_HOOKS, t0);
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

/* Whether module has a parameter that requires grad: a root without one (a
 * transform run as a module, a loss) is not the model. */
static int has_trainable(PyObject *module)
{
    PyObject *it = PyObject_CallMethod(module, "parameters", NULL);
    PyObject *iter = it ? PyObject_GetIter(it) : NULL, *p;
    int found = 0;
    while (!found && iter && (p = PyIter_Next(iter))) {
        PyObject *rg = PyObject_GetAttrString(p, "requires_grad");
        found = rg == Py_True;
        Py_XDECREF(rg);
        Py_DECREF(p);
    }
    Py_XDECREF(iter);
    Py_XDECREF(it);
    PyErr_Clear();
    return found;
}

static void root_forward(PyObject *module, PyObject *input)
{
    (void)input;
    if (g_model)
        return;
    if (!rank_writes()) {
        g_silent_rank = 1;
        decide(); /* no module hooks on a rank that writes nothing */
        return;
    }
    if (!has_trainable(module))
        return;
    g_model = module;
    Py_INCREF(g_model);
    g_params = named(module, "named_parameters", 0);
    g_modules = named(module, "named_modules", 1); /* DYNAMIC_MONITOR may ask later */
    if (g_mc.xy)
        msp_mon_actv_model(g_modules);
    Py_ssize_t n = g_params ? PyList_Size(g_params) : 0;
    for (int k = 0; k < MEMO_N && n > 0; k++)
        g_memo[k] = calloc((size_t)n, sizeof *g_memo[k]);
    g_grad_row = n > 0 ? calloc((size_t)n, sizeof *g_grad_row) : NULL;
    g_param_row = n > 0 ? calloc((size_t)n, sizeof *g_param_row) : NULL;
    if (g_mc.wg && g_params)
        hook_accs();
    if (!g_collect)
        decide();
}

/* ---- the optimizer's step ------------------------------------------------------- */

static int64_t numel(PyObject *t)
{
    PyObject *n = PyObject_CallMethod(t, "numel", NULL);
    int64_t v = n ? (int64_t)PyLong_AsLongLong(n) : 0;
    Py_XDECREF(n);
    PyErr_Clear();
    return v;
}

/* The weights' rows, read now (before the optimizer's step writes them, or
 * after it, before anything else may): the helper thread takes every tensor
 * that keeps its share of the elements no larger than this thread's, and
 * this thread waits for it, so the pass takes about half the time and no
 * tensor is read after this returns. */
static void param_rows(msp_mon_task_t task)
{
    Py_ssize_t n = g_params ? PyList_Size(g_params) : 0;
    int64_t mine = 0, theirs = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyList_GetItem(g_params, i), *p = PyTuple_GetItem(e, 0);
        const char *name = PyBytes_AsString(PyTuple_GetItem(e, 1));
        msp_mon_memo_t *m = g_memo[MEMO_PARAM] ? &g_memo[MEMO_PARAM][i] : NULL;
        int64_t k = numel(p);
        g_param_row[i] = -1;
        if (m && theirs + k <= mine + k / 2) {
            msp_mon_ahead(m, p, g_mc.eps);
            if (m->state == 2) {
                g_param_row[i] = msp_mon_row_later(task, name, -1);
                theirs += k;
                continue;
            }
        }
        msp_mon_row(task, name, -1, p);
        mine += k;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        msp_mon_memo_t *m = g_memo[MEMO_PARAM] ? &g_memo[MEMO_PARAM][i] : NULL;
        msp_mon_stat_t st;
        if (g_param_row[i] >= 0 &&
            msp_mon_memo_get(m, PyTuple_GetItem(PyList_GetItem(g_params, i), 0), &st))
            msp_mon_row_fill(g_param_row[i], &st);
        if (m)
            msp_mon_memo_clear(m);
    }
}

/* Before the optimizer's step: each gradient's row, its statistics computed
 * beside the step when the helper thread can read it (a host tensor), else
 * now. */
static void grad_rows(void)
{
    for (Py_ssize_t i = 0; g_params && i < PyList_Size(g_params); i++) {
        PyObject *e = PyList_GetItem(g_params, i);
        const char *name = PyBytes_AsString(PyTuple_GetItem(e, 1));
        PyObject *g = PyObject_GetAttrString(PyTuple_GetItem(e, 0), "grad");
        msp_mon_memo_t *m = g_memo[MEMO_GRAD] ? &g_memo[MEMO_GRAD][i] : NULL;
        if (m)
            msp_mon_memo_clear(m);
        if (g_grad_row)
            g_grad_row[i] = -1;
        if (g && g != Py_None) { /* msprobe: "grad is None", and no row */
            if (m)
                msp_mon_ahead(m, g, g_mc.eps);
            if (m && m->state == 2)
                g_grad_row[i] = msp_mon_row_later(MSP_MT_GRAD_REDUCED, name, -1);
            else
                msp_mon_row(MSP_MT_GRAD_REDUCED, name, -1, g);
        }
        Py_XDECREF(g);
    }
    PyErr_Clear();
}

/* After the optimizer's step: the gradients' statistics into their rows. */
static void grad_rows_fill(void)
{
    for (Py_ssize_t i = 0; g_grad_row && i < PyList_Size(g_params); i++) {
        msp_mon_memo_t *m = &g_memo[MEMO_GRAD][i];
        msp_mon_stat_t st;
        if (g_grad_row[i] >= 0 && m->obj) {
            PyObject *g = m->obj;
            Py_INCREF(g);
            if (msp_mon_memo_get(m, g, &st))
                msp_mon_row_fill(g_grad_row[i], &st);
            else if (!g_grad_moved++)
                msp_shim_msg("warning: monitor: a gradient was written during the optimizer's "
                             "step (step %lld): its grad_reduced row is nan",
                             (long long)g_step);
            Py_DECREF(g);
        }
        msp_mon_memo_clear(m); /* the gradient is not kept alive past its step */
        g_grad_row[i] = -1;
    }
}

/* AdamW's state of parameter i, key k (0 exp_avg, 1 exp_avg_sq), or NULL;
 * borrowed from the optimizer's state while it holds it. */
static PyObject *state_of(PyObject *state, Py_ssize_t i, int k)
{
    static const char *const keys[2] = {"exp_avg", "exp_avg_sq"};
    PyObject *e = PyList_GetItem(g_params, i);
    PyObject *st = PyObject_GetItem(state, PyTuple_GetItem(e, 0));
    PyObject *t = st && PyDict_Check(st) ? PyDict_GetItemString(st, keys[k]) : NULL;
    Py_XDECREF(st); /* the optimizer's dict still holds it, and t */
    PyErr_Clear();
    return t;
}

/* A state's row: from the helper thread's statistics when the tensor has
 * not moved since, else taken now. */
static void state_row(msp_mon_task_t task, msp_mon_memo_t *m, Py_ssize_t i, PyObject *t)
{
    const char *name = PyBytes_AsString(PyTuple_GetItem(PyList_GetItem(g_params, i), 1));
    msp_mon_stat_t st;
    if (m && msp_mon_memo_get(m, t, &st))
        msp_mon_row_with(task, name, -1, &st);
    else
        msp_mon_row(task, name, -1, t);
    if (m)
        msp_mon_memo_clear(m);
}

static void state_rows(PyObject *opt, int ahead)
{
    PyObject *state = PyObject_GetAttrString(opt, "state");
    for (int k = 0; state && k < 2; k++) {
        for (Py_ssize_t i = 0; g_params && i < PyList_Size(g_params); i++) {
            PyObject *t = state_of(state, i, k);
            msp_mon_memo_t *m = g_memo[MEMO_M + k] ? &g_memo[MEMO_M + k][i] : NULL;
            if (t && ahead && m)
                msp_mon_ahead(m, t, g_mc.eps);
            else if (t && !ahead)
                state_row(k ? MSP_MT_EXP_AVG_SQ : MSP_MT_EXP_AVG, m, i, t);
        }
    }
    Py_XDECREF(state);
    PyErr_Clear();
}

/* DYNAMIC_MONITOR: a changed config with dynamic_on true replaces the one in
 * use from the next step on (collect_times counted again). */
static void dyn_poll(void)
{
    msp_mon_config_t fresh;
    if (!msp_mon_dyn_poll(g_mc.source, &fresh))
        return;
    msp_mon_ahead_join(); /* the helper may be writing with the old config */
    msp_mon_config_free(&g_mc);
    g_mc = fresh;
    g_mc.start_step = g_step;
    g_collected = 0;
    g_active = 1;
    if (g_mc.xy)
        msp_mon_actv_install(&g_mc, &g_collect);
    if (g_mc.xy && g_modules)
        msp_mon_actv_model(g_modules);
    if (g_mc.wg && g_params && !g_accs)
        hook_accs();
    msp_shim_msg("monitor: %s: dynamic_on is true: monitoring from step %lld", g_mc.source,
                 (long long)g_step);
}

/* The optimizer's step is over: the next step, and whether it is written. */
static void step_done(void)
{
    g_step++;
    if (msp_mon_dyn_on())
        dyn_poll();
    decide();
}

/* Whether opt trains the model (holds one of its parameters): the steps of
 * another optimizer (a GAN's other network's) are not the model's steps.
 * Decided once per optimizer. */
static int trains_model(PyObject *opt)
{
    static PyObject *seen; /* optimizer -> bool */
    if (!seen && !(seen = PyDict_New()))
        return 0;
    PyObject *known = PyDict_GetItem(seen, opt);
    if (known)
        return known == Py_True;
    int yes = 0;
    PyObject *all = PyObject_CallMethod(g_model, "parameters", NULL);
    PyObject *mine = all ? PySet_New(all) : NULL; /* targeted or not */
    Py_XDECREF(all);
    PyObject *groups = mine ? PyObject_GetAttrString(opt, "param_groups") : NULL;
    PyObject *iter = groups ? PyObject_GetIter(groups) : NULL, *g;
    while (!yes && iter && (g = PyIter_Next(iter))) {
        PyObject *ps = PyDict_Check(g) ? PyDict_GetItemString(g, "params") : NULL;
        for (Py_ssize_t k = 0; !yes && ps && PyList_Check(ps) && k < PyList_Size(ps); k++)
            yes = PySet_Contains(mine, PyList_GetItem(ps, k)) == 1;
        Py_DECREF(g);
    }
    Py_XDECREF(iter);
    Py_XDECREF(groups);
    Py_XDECREF(mine);
    PyErr_Clear();
    if (mine)
        PyDict_SetItem(seen, opt, yes ? Py_True : Py_False);
    PyErr_Clear();
    return yes;
}

static void optimizer_step(PyObject *opt, int after)
{
    if (!g_model || !trains_model(opt))
        return; /* no model yet, or not the model's optimizer */
    if (!g_collect) {
        if (after)
            step_done();
        return;
    }
    int64_t t0 = msp_mon_clock();
    if (!after) {
        if (g_mc.wg)
            grad_rows();
        if (g_mc.mv)
            state_rows(opt, 0);
        if (g_mc.param)
            param_rows(MSP_MT_PARAM_ORIGIN);
        msp_mon_rows_end(); /* before the optimizer changes them */
        msp_mon_spent(MSP_MON_T_STEP, t0);
        return;
    }
    if (g_mc.wg)
        grad_rows_fill();
    if (g_mc.param)
        param_rows(MSP_MT_PARAM_UPDATED);
    msp_mon_rows_end();
    msp_mon_spent(MSP_MON_T_STEP, t0);
    void *batch = msp_mon_out_step(g_step);
    if (batch) /* the CSV files are written beside the next step */
        msp_mon_helper(msp_mon_out_write, batch);
    g_collected++;
    if (g_collected == g_mc.collect_times) {
        msp_shim_msg("monitor: collect_times (%lld) reached at step %lld: monitoring ends",
                     (long long)g_mc.collect_times, (long long)g_step);
        if (msp_mon_dyn_on()) {
            g_active = 0;
            msp_mon_dyn_finished(g_mc.source);
        }
    }
    step_done();
    /* The state changes only in the optimizer's step: its statistics for the
     * next step are computed now, beside the next forward and backward. */
    if (g_collect && g_mc.mv)
        state_rows(opt, 1);
}

static void mon_exit(const char *how)
{
    (void)how;
    msp_mon_ahead_join(); /* the helper reads nothing once Python winds down */
    msp_mon_profile_report(msp_mon_actv_copies());
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
    l.exit = mon_exit;
    if (msp_listen(&l) != 0) {
        msp_shim_msg("warning: monitor: too many listeners; nothing is monitored");
        return;
    }
    if (g_mc.xy)
        msp_mon_actv_install(&g_mc, &g_collect);
    decide();
}
