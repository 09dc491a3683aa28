/* Optimizer records (msprobe-dump(5), OPTIMIZER RECORDS).
 *
 * An optimizer's step changes parameters and its state in place, through ops
 * the API wrappers either do not see (mul_, addcmul_, addcdiv_) or see only
 * in part (Adam's zeros_like and sqrt). Compare could then only guess where a
 * parameter's error came from. So the step is one record, like an API call:
 * "Optimizer.<Class>.<n>.step", its hyperparameters as attributes
 * ("class", "group.<g>.<key>", "group.<g>.params" = how many parameters the
 * group holds, numbered on across groups), and for every parameter i that has
 * a gradient: input.param.<i>, input.grad.<i>, input.state.<i>.<key> before
 * the step and output.param.<i> after it. That is what a replay needs to
 * re-run the step, and the ops inside the step are not recorded separately
 * (unless the step takes a closure: LBFGS runs the model inside it). */
#include "dump_py.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct msp_opt_pending {
    msp_dq_rec_t *rec;
    PyObject *params; /* list of (index, parameter) that had a gradient */
};

static int64_t g_count_step = -1, g_count;
static int g_off = -1; /* MSPROBE_DUMP_OPTIMIZER=0 */

static int opt_records_on(void)
{
    if (g_off < 0) {
        const char *v = getenv("MSPROBE_DUMP_OPTIMIZER");
        g_off = v && strcmp(v, "0") == 0;
    }
    /* an api_list or a scope selects what is dumped: the optimizer only when
     * neither is given */
    return !g_off && msp_g.dumping && !msp_g.disabled && (msp_g.api_on || msp_g.module_on) &&
           msp_cfg->n_api_list == 0 && !msp_cfg->scope[0];
}

/* "module.qualname" of the optimizer's class into buf ("" on failure). */
static void class_path(PyObject *opt, char *buf, size_t n, char *cls, size_t ncls)
{
    buf[0] = cls[0] = '\0';
    PyObject *tp = (PyObject *)Py_TYPE(opt);
    PyObject *mod = PyObject_GetAttrString(tp, "__module__");
    PyObject *qn = PyObject_GetAttrString(tp, "__qualname__");
    PyObject *mb = mod ? PyUnicode_AsUTF8String(mod) : NULL;
    PyObject *qb = qn ? PyUnicode_AsUTF8String(qn) : NULL;
    if (mb && qb) {
        snprintf(buf, n, "%s.%s", PyBytes_AsString(mb), PyBytes_AsString(qb));
        snprintf(cls, ncls, "%s", PyBytes_AsString(qb));
    }
    Py_XDECREF(mb);
    Py_XDECREF(qb);
    Py_XDECREF(mod);
    Py_XDECREF(qn);
    if (PyErr_Occurred())
        PyErr_Clear();
}

/* A group's hyperparameters (every key but "params") as attributes. */
/* The model's name of a parameter the step updates (msprobe-dump(5),
 * param.ROLE), as forward records name theirs, so that compare and a
 * reader of the report see "fc1.weight" and not input.param.0. */
static void param_name(msp_dq_rec_t *r, const char *role, PyObject *prm)
{
    const char *pname = msp_param_name(prm);
    if (pname) {
        char key[160];
        snprintf(key, sizeof key, "param.%s", role);
        msp_dq_rec_add_attr(r, key, pname);
    }
}

static void add_group(msp_dq_rec_t *r, int64_t g, PyObject *group, Py_ssize_t nparams)
{
    char key[160];
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(group, &pos, &k, &v)) {
        PyObject *kb = PyUnicode_Check(k) ? PyUnicode_AsUTF8String(k) : NULL;
        if (!kb) {
            PyErr_Clear();
            continue;
        }
        const char *ks = PyBytes_AsString(kb);
        if (strcmp(ks, "params") != 0) {
            snprintf(key, sizeof key, "group.%lld.%s", (long long)g, ks);
            msp_rec_add_value(r, key, v, 0);
        }
        Py_DECREF(kb);
    }
    char num[24];
    snprintf(key, sizeof key, "group.%lld.params", (long long)g);
    snprintf(num, sizeof num, "%zd", nparams);
    msp_dq_rec_add_attr(r, key, num);
}

/* Parameter i's state tensors and values, as input.state.<i>.<key>. */
static void add_state(msp_dq_rec_t *r, int64_t i, PyObject *st)
{
    char role[160];
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (st && PyDict_Check(st) && PyDict_Next(st, &pos, &k, &v)) {
        PyObject *kb = PyUnicode_Check(k) ? PyUnicode_AsUTF8String(k) : NULL;
        if (!kb) {
            PyErr_Clear();
            continue;
        }
        snprintf(role, sizeof role, "input.state.%lld.%s", (long long)i, PyBytes_AsString(kb));
        msp_rec_add_value(r, role, v, 0);
        Py_DECREF(kb);
    }
}

msp_opt_pending_t *msp_opt_begin(PyObject *opt)
{
    if (!opt || msp_t_depth > 0 || !opt_records_on())
        return NULL;
    msp_opt_pending_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    msp_quiet_t quiet =
        msp_quiet_begin(); /* the attribute reads and copies below are not the model's */
    char path[256], cls[128], name[224], role[64];
    class_path(opt, path, sizeof path, cls, sizeof cls);
    if (g_count_step != msp_g.step) {
        g_count_step = msp_g.step;
        g_count = 0;
    }
    snprintf(name, sizeof name, "Optimizer.%s.%lld.step", cls[0] ? cls : "Optimizer",
             (long long)g_count++);
    PyObject *groups = PyObject_GetAttrString(opt, "param_groups");
    PyObject *state = PyObject_GetAttrString(opt, "state");
    p->params = PyList_New(0);
    p->rec = groups && p->params && PyList_Check(groups) ? msp_dq_rec_new(name) : NULL;
    if (!p->rec)
        goto fail;
    msp_dq_rec_add_attr(p->rec, "class", path);
    /* the copies wait (py_devstats.c): the step's trigger launches them before it runs */
    p->rec->dev_defer = msp_dev_defers();
    int64_t i = 0;
    for (Py_ssize_t g = 0; g < PyList_Size(groups); g++) {
        PyObject *group = PyList_GetItem(groups, g);
        PyObject *ps = group && PyDict_Check(group) ? PyDict_GetItemString(group, "params") : NULL;
        PyObject *seq = ps ? PySequence_List(ps) : NULL;
        if (!seq) {
            PyErr_Clear();
            continue;
        }
        add_group(p->rec, g, group, PyList_Size(seq));
        for (Py_ssize_t k = 0; k < PyList_Size(seq); k++, i++) {
            PyObject *prm = PyList_GetItem(seq, k);
            PyObject *grad = PyObject_GetAttrString(prm, "grad");
            if (!grad || grad == Py_None) {
                Py_XDECREF(grad);
                PyErr_Clear();
                continue; /* the step leaves a parameter without a gradient alone */
            }
            msp_role_at(role, sizeof role, "input.param", i);
            msp_rec_add_value(p->rec, role, prm, 0);
            param_name(p->rec, role, prm);
            msp_role_at(role, sizeof role, "input.grad", i);
            msp_rec_add_value(p->rec, role, grad, 0);
            Py_DECREF(grad);
            /* state is a defaultdict: PyDict_GetItem never creates an entry */
            add_state(p->rec, i, state && PyDict_Check(state) ? PyDict_GetItem(state, prm) : NULL);
            PyObject *e = Py_BuildValue("(LO)", (long long)i, prm);
            if (e)
                PyList_Append(p->params, e);
            Py_XDECREF(e);
        }
        Py_DECREF(seq);
    }
    p->rec->dev_defer = 0;
    Py_XDECREF(groups);
    Py_XDECREF(state);
    if (PyErr_Occurred())
        PyErr_Clear();
    msp_quiet_end(quiet);
    return p;
fail:
    Py_XDECREF(groups);
    Py_XDECREF(state);
    msp_opt_cancel(p);
    msp_quiet_end(quiet);
    if (PyErr_Occurred())
        msp_py_warn_error("optimizer record", "cannot record an optimizer step");
    return NULL;
}

void msp_opt_cancel(msp_opt_pending_t *p)
{
    if (!p)
        return;
    msp_rec_drop(p->rec);
    Py_XDECREF(p->params);
    free(p);
}

void msp_opt_finish(msp_opt_pending_t *p)
{
    if (!p)
        return;
    msp_quiet_t quiet = msp_quiet_begin();
    p->rec->dev_defer = msp_dev_defers(); /* the step's end launches them */
    char role[64];
    for (Py_ssize_t k = 0; k < PyList_Size(p->params); k++) {
        PyObject *e = PyList_GetItem(p->params, k);
        msp_role_at(role, sizeof role, "output.param", PyLong_AsLongLong(PyTuple_GetItem(e, 0)));
        msp_rec_add_value(p->rec, role, PyTuple_GetItem(e, 1), 0);
    }
    p->rec->dev_defer = 0;
    if (PyErr_Occurred())
        PyErr_Clear();
    msp_rec_submit(p->rec);
    p->rec = NULL;
    msp_quiet_end(quiet);
    msp_opt_cancel(p);
}
