/* API records: the handler of MSP_W_API wrappers (py_wrap.c), which the
 * patching (py_patch.c) puts in place of each selected torch API.
 *
 * Outside the steps of dump_iter a call costs the wrapper's dispatch and a
 * flag test. Inside, only the outermost wrapped call of a nest is recorded
 * (thread-local depth), named "<Prefix>.<api>.<n>.forward" with n counting
 * that API's calls within the step; its backward record is py_bwd.c's. */
#include "py_wrap.h"

#include <stdlib.h>
#include <string.h>

static int64_t next_index(msp_wrap_t *w)
{
    if (w->count_step != msp_g.step) {
        w->count_step = msp_g.step;
        w->count = 0;
    }
    return w->count++;
}

/* "NAME.IDX.DIR" without snprintf (once or twice per wrapped call), cut to
 * size as snprintf would. */
static void call_name(char *buf, size_t size, const char *api, int64_t idx, const char *dir)
{
    char num[24];
    size_t k = sizeof num;
    uint64_t v = idx < 0 ? 0 : (uint64_t)idx;
    do {
        num[--k] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    const char *parts[5] = {api, ".", num + k, ".", dir};
    size_t lens[5] = {strlen(api), 1, sizeof num - k, 1, strlen(dir)};
    size_t at = 0;
    for (int i = 0; i < 5 && at + 1 < size; i++) {
        size_t n = lens[i] < size - 1 - at ? lens[i] : size - 1 - at;
        memcpy(buf + at, parts[i], n);
        at += n;
    }
    buf[at] = '\0';
}

/* The directions call number idx of w is recorded in: its own, a single
 * call's, and both inside a module the list names at level mix. */
static unsigned call_dirs(const msp_wrap_t *w, int64_t idx)
{
    unsigned d = w->dirs;
    for (int i = 0; i < w->nsel; i++)
        if (w->sel_call[i] == idx)
            d |= w->sel_dirs[i];
    if (msp_t_listed > 0)
        d |= MSP_DIR_FORWARD | MSP_DIR_BACKWARD;
    return d;
}

/* ---- calls that write into what they are given ----
 * Device statistics let a call's tensors wait for a later copy
 * (py_devstats.c); a call that may write into a tensor it is given must
 * have them, and every tensor that waits, copied before it runs. It may when
 * its name says so (add_, __iadd__, __setitem__, a collective, batch norm's
 * running statistics), when it is given out= or inplace=True (or True as a
 * later argument: F.relu(x, True)), or when its first call did: that call's
 * inputs are copied first and their versions compared after it. A call given
 * no float tensor cannot write what waits (other dtypes never wait). */
static const char *const g_inplace_dunders[] = {
    "__iadd__",    "__isub__",      "__imul__",    "__itruediv__",
    "__idiv__",    "__ifloordiv__", "__imod__",    "__ipow__",
    "__iand__",    "__ior__",       "__ixor__",    "__ilshift__",
    "__irshift__", "__imatmul__",   "__setitem__", NULL};

static int writes_by_name(const char *name)
{
    const char *dot = strrchr(name, '.'), *last = dot ? dot + 1 : name;
    size_t n = strlen(last);
    if (strncmp(name, "Distributed.", 12) == 0 || strstr(last, "batch_norm") ||
        strstr(last, "instance_norm"))
        return 1;
    if (n >= 2 && last[n - 1] == '_' && last[n - 2] != '_')
        return 1; /* add_, relu_, clip_grad_norm_ */
    for (int i = 0; g_inplace_dunders[i]; i++)
        if (strcmp(last, g_inplace_dunders[i]) == 0)
            return 1;
    return 0;
}

/* The kinds of window (MSP_DEV_*) of the tensors a call is given: a call
 * that writes must have what waits in those copied first, and only those
 * (num_batches_tracked.add_(1) has nothing to do with the float windows). */
static int gives_kinds(PyObject *args, PyObject *kw)
{
    int kinds = 0;
    for (Py_ssize_t i = 0; i < PyTuple_Size(args) && kinds != MSP_DEV_ALL; i++)
        kinds |= msp_window_kinds(PyTuple_GetItem(args, i), 0);
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (kinds != MSP_DEV_ALL && kw && PyDict_Check(kw) && PyDict_Next(kw, &pos, &k, &v))
        kinds |= msp_window_kinds(v, 0);
    return kinds;
}

/* The kinds of window the call may write into (gives_kinds), or 0. */
static int may_write(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    if (!w->writes_known) {
        w->writes_known = 1;
        w->writes = writes_by_name(w->name) ? 1 : 2; /* 2: not known yet (its first call tells) */
    }
    if (w->writes != 0)
        return gives_kinds(args, kw);
    if (kw && PyDict_Check(kw)) {
        PyObject *o = PyDict_GetItemString(kw, "out"), *ip = PyDict_GetItemString(kw, "inplace");
        if ((o && o != Py_None) || (ip && PyObject_IsTrue(ip) == 1))
            return gives_kinds(args, kw);
        PyErr_Clear();
    }
    Py_ssize_t n = PyTuple_Size(args);
    for (Py_ssize_t i = 1; i < n; i++)
        if (PyTuple_GetItem(args, i) == Py_True)
            return gives_kinds(args, kw);
    return 0;
}

#define MSP_VER_MAX 32
typedef struct vers {
    PyObject *t[MSP_VER_MAX]; /* borrowed: the call's arguments hold them */
    int64_t v[MSP_VER_MAX];
    int n;
} vers_t;

static void vers_take(vers_t *vs, PyObject *o, int depth)
{
    if (vs->n < MSP_VER_MAX && msp_is_tensor(o)) {
        vs->t[vs->n] = o;
        vs->v[vs->n++] = msp_tensor_version(o);
    } else if (depth == 0 && PyTuple_Check(o)) {
        for (Py_ssize_t i = 0; i < PyTuple_Size(o); i++)
            vers_take(vs, PyTuple_GetItem(o, i), 1);
    } else if (depth == 0 && PyList_Check(o)) {
        for (Py_ssize_t i = 0; i < PyList_Size(o); i++)
            vers_take(vs, PyList_GetItem(o, i), 1);
    }
}

/* The versions of the tensors a call is given, before it runs. */
static void vers_before(vers_t *vs, PyObject *args, PyObject *kw)
{
    vs->n = 0;
    for (Py_ssize_t i = 0; i < PyTuple_Size(args); i++)
        vers_take(vs, PyTuple_GetItem(args, i), 0);
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (kw && PyDict_Check(kw) && PyDict_Next(kw, &pos, &k, &v))
        vers_take(vs, v, 0);
}

static int vers_moved(const vers_t *vs)
{
    for (int i = 0; i < vs->n; i++)
        if (msp_tensor_version(vs->t[i]) != vs->v[i])
            return 1;
    return 0;
}

PyObject *msp_api_call(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    if (!msp_g.dumping || msp_t_depth > 0 || msp_g.disabled || !msp_dq_accepting())
        return PyObject_Call(w->orig, args, kw);
    if (msp_stack_msprobe_call((PyObject *)w)) {
        /* Huawei's msprobe at work: neither this call nor what it calls is
         * the script's, and it takes no call index from the script's own. */
        msp_quiet_t quiet = msp_quiet_begin();
        PyObject *out = PyObject_Call(w->orig, args, kw);
        msp_quiet_end(quiet);
        return out;
    }

    /* An RNN op (_VF.lstm) is one call but, on CPU, a whole graph of nodes. */
    int max_nodes = strncmp(w->name, "VF.", 3) == 0 ? MSP_BWD_MAX_MODULE_NODES : MSP_BWD_MAX_NODES;
    char name[224];
    int64_t idx = next_index(w);
    unsigned dirs;
    if (msp_scope_on()) { /* msprobe's scope: in the range or not (py_scope.c) */
        call_name(name, sizeof name, w->name, idx, "forward");
        dirs = msp_scope_api(name);
    } else {
        dirs = call_dirs(w, idx);
    }
    int defers = msp_dev_defers(), writes = defers ? may_write(w, args, kw) : 0;
    if (!dirs) {
        if (writes)
            msp_dev_put_pending(writes);
        return PyObject_Call(w->orig, args, kw);
    }
    msp_dq_rec_t *r = NULL;
    msp_bwd_pending_t *bwd = NULL;
    char *stack = msp_stack_capture(); /* before the depth rises: the caller's frames */
    msp_quiet_t quiet = msp_quiet_begin();
    if (dirs & MSP_DIR_FORWARD) {
        call_name(name, sizeof name, w->name, idx, "forward");
        /* Inputs are copied before the call: an op that writes into its input
         * (F.relu(x, inplace=True), all_reduce) must show what it was given. */
        if ((r = msp_dq_rec_new(name))) {
            const char *parent = msp_module_parent();
            if (parent)
                msp_dq_rec_add_attr(r, "parent", parent);
            r->sig = msp_api_sig(w);
            r->links = MSP_LINK_FIND;
            r->dev_defer = defers & ~writes;
            msp_rec_add_args(r, args, kw);
            r->dev_defer = 0;
            r->links = MSP_LINK_OFF;
            msp_rec_add_autocast(r);
            r->stack = stack ? strdup(stack) : NULL;
        }
    }
    if ((dirs & MSP_DIR_BACKWARD) && strncmp(w->name, "Distributed.", 12) != 0) {
        call_name(name, sizeof name, w->name, idx, "backward");
        bwd = msp_bwd_begin(name, args, kw, &stack);
    }
    free(stack);
    vers_t vs;
    int check = defers && w->writes == 2; /* its first call: does it write? */
    if (writes)
        msp_dev_put_pending(writes);
    if (check)
        vers_before(&vs, args, kw);
    PyObject *out = PyObject_Call(w->orig, args, kw);
    if (check && out)
        w->writes = vers_moved(&vs);
    if (!out) {
        msp_rec_drop(r);
        msp_bwd_cancel(bwd);
        msp_quiet_end(quiet);
        return NULL;
    }
    PyObject *exc_t, *exc_v, *exc_tb;
    PyErr_Fetch(&exc_t, &exc_v, &exc_tb); /* nothing pending normally; keep it if so */
    if (r) {
        r->links = MSP_LINK_NOTE;
        r->dev_defer = defers;
        if (strncmp(w->name, "Distributed.", 12) == 0) {
            /* Collectives write their result into their tensor arguments. */
            char role[64];
            Py_ssize_t n = PyTuple_Size(args);
            for (Py_ssize_t i = 0; i < n; i++) {
                PyObject *a = PyTuple_GetItem(args, i);
                snprintf(role, sizeof role, "output.%zd", i);
                if (msp_is_tensor(a) || PyList_Check(a))
                    msp_rec_add_value(r, role, a, 0);
            }
            if (out != Py_None && msp_is_tensor(out))
                msp_rec_add_output(r, out, "output.ret");
            msp_dist_add_context(r, w->name, w->orig, args, kw, out);
        } else {
            msp_rec_add_output(r, out, "output");
        }
        r->links = MSP_LINK_OFF;
        r->dev_defer = 0;
        msp_rec_submit(r);
    }
    msp_bwd_finish(bwd, NULL, out, args, max_nodes);
    msp_quiet_end(quiet);
    if (PyErr_Occurred())
        PyErr_Clear();
    PyErr_Restore(exc_t, exc_v, exc_tb);
    return out;
}
