/* Steps and ranks.
 *
 * A step ends at optimizer.step() (default), at the outermost backward()
 * (step_trigger "backward"), at the end of a root module's forward
 * ("forward"), or when the script calls the exported msprobe_step(). Whether
 * the new step is dumped is decided once, here, so a call in a step outside
 * dump_iter tests one flag. */
#include "dump_py.h"

#include <stdlib.h>
#include <string.h>

static PyObject *g_torch;

static int env_int(const char *name, int64_t *out)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    long long x = strtoll(v, &end, 10);
    if (*end || x < 0)
        return 0;
    *out = x;
    return 1;
}

/* RANK / LOCAL_RANK win; otherwise torch.distributed once initialised; looked
 * up at most once per step until known for good. */
int64_t msp_current_rank(void)
{
    if (msp_g.rank_final || msp_g.rank_step == msp_g.step)
        return msp_g.rank;
    msp_g.rank_step = msp_g.step;
    if (env_int("RANK", &msp_g.rank) || env_int("LOCAL_RANK", &msp_g.rank)) {
        msp_g.rank_final = 1;
        int64_t ws;
        if (env_int("WORLD_SIZE", &ws))
            msp_dq_set_world_size(ws);
        return msp_g.rank;
    }
    if (!g_torch)
        return msp_g.rank;
    msp_t_depth++;
    PyObject *dist = PyObject_GetAttrString(g_torch, "distributed");
    PyObject *init = dist ? PyObject_CallMethod(dist, "is_available", NULL) : NULL;
    if (init && PyObject_IsTrue(init) == 1) {
        Py_DECREF(init);
        init = PyObject_CallMethod(dist, "is_initialized", NULL);
        if (init && PyObject_IsTrue(init) == 1) {
            PyObject *r = PyObject_CallMethod(dist, "get_rank", NULL);
            PyObject *ws = PyObject_CallMethod(dist, "get_world_size", NULL);
            if (r && ws) {
                msp_g.rank = PyLong_AsLongLong(r);
                msp_dq_set_world_size(PyLong_AsLongLong(ws));
                msp_g.rank_final = 1;
            }
            Py_XDECREF(r);
            Py_XDECREF(ws);
        }
    }
    Py_XDECREF(init);
    Py_XDECREF(dist);
    if (PyErr_Occurred())
        PyErr_Clear();
    msp_t_depth--;
    return msp_g.rank;
}

int msp_step_wanted(int64_t step)
{
    if (!(msp_g.have_cfg && msp_g.cfg.has_dump &&
          msp_step_set_contains(&msp_g.cfg.dump_iter, step) && msp_proc_may_write()))
        return 0;
    /* A rank outside the config's rank set, once its rank is known, runs with
     * every hook passing straight through: nothing of it is read or copied,
     * so it trains at full speed. Until then records are only filtered when
     * submitted. */
    int64_t rank = msp_current_rank();
    if (msp_g.rank_final && !msp_step_set_contains(&msp_g.cfg.ranks, rank)) {
        static int told;
        if (!told++)
            msp_shim_msg("rank %lld is not in the config's rank set: it dumps nothing and its "
                         "calls pass straight through", (long long)rank);
        return 0;
    }
    return 1;
}

void msp_step_end(void)
{
    if (msp_g.disabled)
        return;
    if (msp_g.dumping) {
        msp_prep_release(); /* no model ran in this step: what it held is the step's */
        msp_dev_drain(); /* the step's records held for device statistics go first */
        /* Waits for the previous step's file (bounded lag): no Python needed. */
        Py_BEGIN_ALLOW_THREADS
        msp_dq_end_step(msp_g.step);
        Py_END_ALLOW_THREADS
    }
    msp_ev_step_end(msp_g.step);
    msp_g.step++;
    msp_g.order = 0;
    msp_g.dumping = msp_step_wanted(msp_g.step);
    msp_module_step_reset();
}

/* At exit: the steps of dump_iter the run never reached, in one warning (an
 * empty dump directory says nothing about why). */
void msp_step_exit_report(void)
{
    static int done;
    const msp_step_set_t *s = &msp_g.cfg.dump_iter;
    if (done || !msp_g.have_cfg || !msp_g.cfg.has_dump || s->all || !msp_proc_may_write() ||
        !msp_g.torch_seen)
        return;
    done = 1;
    char list[512] = "";
    size_t at = 0;
    for (size_t i = 0; i < s->n_ranges && at < sizeof list - 32; i++) {
        const msp_step_range_t *r = &s->ranges[i];
        if (r->last <= msp_g.step)
            continue;
        int64_t first = r->first > msp_g.step ? r->first : msp_g.step + 1;
        int n = first == r->last
                    ? snprintf(list + at, sizeof list - at, "%s%lld", at ? ", " : "",
                               (long long)first)
                    : snprintf(list + at, sizeof list - at, "%s%lld-%lld", at ? ", " : "",
                               (long long)first, (long long)r->last);
        if (n > 0)
            at += (size_t)n < sizeof list - at ? (size_t)n : sizeof list - at - 1;
    }
    if (at)
        msp_shim_msg("warning: %s: step %s of the dump never reached: the run ended in step "
                     "%lld (steps count from 0, one per %s)", msp_g.cfg.source ? msp_g.cfg.source
                                                                                : "config",
                     list, (long long)msp_g.step,
                     msp_g.cfg.step_trigger == MSP_STEP_BACKWARD  ? "backward()"
                     : msp_g.cfg.step_trigger == MSP_STEP_FORWARD ? "root forward"
                     : msp_g.cfg.step_trigger == MSP_STEP_MANUAL  ? "step() call"
                                                                  : "optimizer.step()");
}

MSP_EXPORT void msp_py_step(void);
void msp_py_step(void)
{
    if (msp_g.disabled || !msp_g.booted)
        return;
    PyGILState_STATE st = PyGILState_Ensure();
    msp_step_end();
    PyGILState_Release(st);
}

static int wrap_attr(PyObject *owner, const char *attr, int kind, int bind)
{
    PyObject *orig = PyObject_GetAttrString(owner, attr);
    if (!orig)
        return -1;
    int rc = 0;
    if (!msp_is_wrap(orig)) {
        PyObject *w = msp_wrap_new(orig, attr, kind, 0, bind);
        rc = (w && PyObject_SetAttrString(owner, attr, w) == 0) ? 0 : -1;
        Py_XDECREF(w);
    }
    Py_DECREF(orig);
    return rc;
}

static PyObject *opt_post_hook(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    if (!msp_g.disabled && !msp_trigger_defer_step_end())
        msp_step_end();
    Py_RETURN_NONE;
}

static PyMethodDef g_opt_hook_def = {"msprobe_step_hook", opt_post_hook, METH_VARARGS, NULL};

int msp_step_install(PyObject *torch)
{
    g_torch = torch;
    Py_INCREF(torch);
    int rc = 0;
    PyObject *m = NULL, *fn = NULL, *cls = NULL;
    switch (msp_g.cfg.step_trigger) {
    case MSP_STEP_OPTIMIZER:
        m = PyImport_ImportModule("torch.optim.optimizer");
        if (!m)
            break;
        /* torch >= 2.0: one global hook after every optimizer's step. */
        fn = PyObject_GetAttrString(m, "register_optimizer_step_post_hook");
        if (fn) {
            PyObject *hook = PyCFunction_NewEx(&g_opt_hook_def, NULL, NULL);
            PyObject *h = hook ? PyObject_CallFunctionObjArgs(fn, hook, NULL) : NULL;
            rc = h ? 0 : -1;
            Py_XDECREF(h);
            Py_XDECREF(hook);
            break;
        }
        PyErr_Clear();
        /* torch 1.13: subclasses define their own step, which Optimizer.__init__
         * already rewraps for the profiler; wrap each class's step there. */
        cls = PyObject_GetAttrString(m, "Optimizer");
        msp_g.opt_step_by_init = 1;
        rc = cls ? wrap_attr(cls, "__init__", MSP_W_OPT_INIT, 1) : -1;
        break;
    case MSP_STEP_BACKWARD:
        cls = PyObject_GetAttrString(torch, "Tensor");
        m = PyImport_ImportModule("torch.autograd");
        rc = (cls && m && wrap_attr(cls, "backward", MSP_W_STEP_TRIGGER, 1) == 0 &&
              wrap_attr(m, "backward", MSP_W_STEP_TRIGGER, 0) == 0) ? 0 : -1;
        break;
    default:
        break; /* forward: module hooks; manual: msprobe_step() only */
    }
    if (rc != 0)
        msp_py_warn_error("step", "cannot hook the end of a step; every record goes to step 0");
    if (!msp_g.opt_step_by_init || rc != 0) {
        /* One wrapper of Optimizer.__init__ for every trigger: the "optimizer
         * created" event (config_check) and each class's step wrapped, which
         * makes the optimizer records (py_optim.c). */
        PyObject *om = PyImport_ImportModule("torch.optim.optimizer");
        PyObject *oc = om ? PyObject_GetAttrString(om, "Optimizer") : NULL;
        if (!oc || wrap_attr(oc, "__init__", MSP_W_OPT_INIT, 1) != 0)
            msp_py_warn_error("optimizer", "cannot watch optimizers: config_check's "
                              "hyperparameters will be incomplete and optimizer steps are "
                              "not recorded");
        Py_XDECREF(oc);
        Py_XDECREF(om);
    }
    Py_XDECREF(m);
    Py_XDECREF(fn);
    Py_XDECREF(cls);
    if (PyErr_Occurred())
        PyErr_Clear();
    return rc;
}
