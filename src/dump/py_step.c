/* Steps.
 *
 * A step ends at optimizer.step() (default), at the outermost backward()
 * (step_trigger "backward"), at the end of a root module's forward
 * ("forward", py_module.c), or when the script calls the exported
 * msprobe_step(). Whether the new step is dumped is decided once, here, so a
 * call in a step outside dump_iter tests one flag. The wrappers of
 * optimizer.step(), backward() and Optimizer.__init__ are this file's kinds. */
#include "py_wrap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MSP_STEP_WATCHERS 4
static void (*g_watchers[MSP_STEP_WATCHERS])(void);
static int g_nwatchers;

void msp_step_watch(void (*fn)(void))
{
    for (int i = 0; i < g_nwatchers; i++)
        if (g_watchers[i] == fn)
            return;
    if (g_nwatchers < MSP_STEP_WATCHERS)
        g_watchers[g_nwatchers++] = fn;
}

/* msprobe 26's dynamic dump_enable: while the config gives dump_enable, the
 * file is read again at each step's end when it changed (modification time,
 * size), and its dump_enable decides whether the steps from the next on are
 * dumped (msprobe rereads it at its debugger's start/stop/step, and so does
 * the PrecisionDebugger of py_debugger.c); a file
 * without the key keeps the state, other keys keep what they were at start.
 * A file that no longer parses turns the dump off, as msprobe's does. */
static char *g_watched; /* the file followed, when not the one the dump started with */

void msp_step_watch_config(const char *path)
{
    char *p = path ? strdup(path) : NULL;
    if (p || !path) {
        free(g_watched);
        g_watched = p;
    }
}

void msp_step_config_poll(void)
{
    static int64_t seen_ns = -1, seen_size = -1;
    const msp_config_t *c = msp_cfg;
    const char *file = g_watched ? g_watched : c->source;
    struct stat st;
    if (!msp_g.have_cfg || !c->dump_enable_set || !file || stat(file, &st) != 0)
        return;
    int64_t ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    if (ns == seen_ns && (int64_t)st.st_size == seen_size)
        return;
    seen_ns = ns;
    seen_size = (int64_t)st.st_size;
    msp_config_t now;
    int off = msp_g.dump_off;
    if (msp_config_load(file, &now) != MSP_OK) {
        if (!off)
            msp_shim_msg("warning: %s no longer reads (%s): the dump is off from step %lld", file,
                         msp_last_error(), (long long)msp_g.step);
        off = 1;
    } else {
        if (now.dump_enable_set)
            off = now.dump_disabled;
        msp_config_free(&now);
    }
    if (off != msp_g.dump_off)
        msp_shim_msg("%s: dump_enable is %s: %s from step %lld", file, off ? "false" : "true",
                     off ? "nothing is dumped" : "dumping", (long long)msp_g.step);
    msp_g.dump_off = off;
}

void msp_step_end(void)
{
    if (msp_g.disabled)
        return;
    /* A step the script stopped recording in (debugger.stop() before
     * debugger.step()) still closes its file now. */
    if (msp_g.dumping || (msp_g.paused && msp_cfg->has_dump && msp_proc_may_write())) {
        msp_prep_release(); /* no model ran in this step: what it held is the step's */
        msp_dev_drain();    /* the step's records held for device statistics go first */
        /* Waits for the previous step's file (bounded lag): no Python needed. */
        Py_BEGIN_ALLOW_THREADS msp_dq_end_step(msp_g.step);
        Py_END_ALLOW_THREADS
    }
    msp_ev_step_end(msp_g.step);
    msp_g.step++;
    msp_g.order = 0;
    msp_step_config_poll();
    msp_step_decide();
    msp_links_reset();
    for (int i = 0; i < g_nwatchers; i++)
        g_watchers[i]();
}

/* At exit: the steps of dump_iter the run never reached, in one warning (an
 * empty dump directory says nothing about why). */
void msp_step_exit_report(void)
{
    static int done;
    const msp_step_set_t *s = &msp_cfg->dump_iter;
    if (done || !msp_g.have_cfg || !msp_cfg->has_dump || s->all || !msp_proc_may_write() ||
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
        int n = first == r->last ? snprintf(list + at, sizeof list - at, "%s%lld", at ? ", " : "",
                                            (long long)first)
                                 : snprintf(list + at, sizeof list - at, "%s%lld-%lld",
                                            at ? ", " : "", (long long)first, (long long)r->last);
        if (n > 0)
            at += (size_t)n < sizeof list - at ? (size_t)n : sizeof list - at - 1;
    }
    if (at)
        msp_shim_msg("warning: %s: step %s of the dump never reached: the run ended in step "
                     "%lld (steps count from 0, one per %s)",
                     msp_cfg->source ? msp_cfg->source : "config", list, (long long)msp_g.step,
                     msp_g.script_steps                           ? "debugger.step() call"
                     : msp_cfg->step_trigger == MSP_STEP_BACKWARD ? "backward()"
                     : msp_cfg->step_trigger == MSP_STEP_FORWARD  ? "root forward"
                     : msp_cfg->step_trigger == MSP_STEP_MANUAL   ? "step() call"
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

/* torch 1.13: Optimizer.__init__ wraps each class's step, which ends the step. */
static int g_opt_step_by_init;
static _Thread_local int t_trigger_depth; /* nested optimizer.step / backward calls */
/* optimizer.step(), Tensor.backward(), autograd.backward(): a step ends when
 * the outermost of them returns. The outermost optimizer.step() is also
 * recorded (py_optim.c), and what it calls is not: its in-place updates are
 * the record. A step given a closure (LBFGS) runs the model inside: those
 * calls are recorded as usual. */
static int g_end_deferred; /* the global post hook fired inside a wrapped step */

static int trigger_defer_step_end(void)
{
    if (t_trigger_depth == 0)
        return 0;
    g_end_deferred = 1;
    return 1;
}

static PyObject *trigger_call(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    msp_opt_pending_t *op = NULL;
    PyObject *opt_obj = NULL; /* borrowed from args */
    int quiet = 0;
    if (w->kind == MSP_W_OPT_STEP && t_trigger_depth == 0 && PyTuple_Size(args) >= 1) {
        msp_prep_optimizer_step(); /* which loop is the step's (py_record.c) */
        msp_ev_optimizer_step(PyTuple_GetItem(args, 0), 0); /* the monitor's pre-step */
        opt_obj = PyTuple_GetItem(args, 0);
        op = msp_opt_begin(opt_obj);
        PyObject *closure = kw ? PyDict_GetItemString(kw, "closure") : NULL;
        quiet = PyTuple_Size(args) == 1 && (!closure || closure == Py_None);
    }
    if (t_trigger_depth == 0)
        msp_dev_put_pending(MSP_DEV_ALL); /* the optimizer writes into what waits for its copy */
    t_trigger_depth++;
    msp_quiet_t q = msp_quiet_begin_if(quiet);
    PyObject *out = PyObject_Call(w->orig, args, kw);
    msp_quiet_end(q);
    t_trigger_depth--;
    if (op) {
        PyObject *et, *ev, *etb;
        PyErr_Fetch(&et, &ev, &etb);
        if (out)
            msp_opt_finish(op);
        else
            msp_opt_cancel(op);
        PyErr_Restore(et, ev, etb);
    }
    if (out && opt_obj)
        msp_ev_optimizer_step(opt_obj, 1); /* the monitor's post-step, before the step ends */
    /* A script with msprobe's PrecisionDebugger ends its steps itself. */
    int ends = (w->kind != MSP_W_OPT_STEP || g_opt_step_by_init || g_end_deferred) &&
               !msp_g.script_steps;
    if (t_trigger_depth == 0)
        g_end_deferred = 0;
    if (out && t_trigger_depth == 0 && ends && !msp_g.disabled)
        msp_step_end();
    return out;
}

/* Optimizer.__init__: raises the runtime's "optimizer created" event and
 * makes sure the class of each new optimizer has its step wrapped once. */
static PyObject *opt_init_call(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    PyObject *out = PyObject_Call(w->orig, args, kw);
    if (!out || PyTuple_Size(args) < 1)
        return out;
    /* runtime event (py_proc.c): config_check records the optimizer */
    msp_ev_optimizer_created(PyTuple_GetItem(args, 0));
    /* Every optimizer class has its step wrapped once: its step is a record
     * (py_optim.c), and on torch 1.13 it also ends the step (opt_step_by_init). */
    PyObject *cls = (PyObject *)Py_TYPE(PyTuple_GetItem(args, 0));
    PyObject *step = PyObject_GetAttrString(cls, "step");
    if (step && !msp_is_wrap(step)) {
        PyObject *nw = msp_wrap_new(step, "step", MSP_W_OPT_STEP, 0, 1);
        if (!nw || PyObject_SetAttrString(cls, "step", nw) < 0)
            msp_py_warn_error("optimizer", "cannot hook optimizer.step(); steps will not advance");
        Py_XDECREF(nw);
    }
    Py_XDECREF(step);
    if (PyErr_Occurred())
        PyErr_Clear();
    return out;
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
    if (!msp_g.disabled && !msp_g.script_steps && !trigger_defer_step_end())
        msp_step_end();
    Py_RETURN_NONE;
}

static PyMethodDef g_opt_hook_def = {"msprobe_step_hook", opt_post_hook, METH_VARARGS, NULL};

int msp_step_install(PyObject *torch)
{
    msp_ident_init(torch);
    msp_wrap_handle(MSP_W_OPT_STEP, trigger_call);
    msp_wrap_handle(MSP_W_STEP_TRIGGER, trigger_call);
    msp_wrap_handle(MSP_W_OPT_INIT, opt_init_call);
    int rc = 0;
    PyObject *m = NULL, *fn = NULL, *cls = NULL;
    switch (msp_cfg->step_trigger) {
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
        g_opt_step_by_init = 1;
        rc = cls ? wrap_attr(cls, "__init__", MSP_W_OPT_INIT, 1) : -1;
        break;
    case MSP_STEP_BACKWARD:
        cls = PyObject_GetAttrString(torch, "Tensor");
        m = PyImport_ImportModule("torch.autograd");
        rc = (cls && m && wrap_attr(cls, "backward", MSP_W_STEP_TRIGGER, 1) == 0 &&
              wrap_attr(m, "backward", MSP_W_STEP_TRIGGER, 0) == 0)
                 ? 0
                 : -1;
        break;
    default:
        break; /* forward: module hooks; manual: msprobe_step() only */
    }
    if (rc != 0)
        msp_py_warn_error("step", "cannot hook the end of a step; every record goes to step 0");
    if (!g_opt_step_by_init || rc != 0) {
        /* One wrapper of Optimizer.__init__ for every trigger: the "optimizer
         * created" event (config_check) and each class's step wrapped, which
         * makes the optimizer records (py_optim.c). */
        PyObject *om = PyImport_ImportModule("torch.optim.optimizer");
        PyObject *oc = om ? PyObject_GetAttrString(om, "Optimizer") : NULL;
        if (!oc || wrap_attr(oc, "__init__", MSP_W_OPT_INIT, 1) != 0)
            msp_py_warn_error("optimizer",
                              "cannot watch optimizers: config_check's "
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
