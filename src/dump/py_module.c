/* Module mode: global forward pre/post hooks (torch >= 1.13) see every module
 * call. Names come from the root module (one called while no other module's
 * forward is active): at its first forward we walk root.named_modules() and
 * remember, per module, "Module.<path>.<Class>" and the directions selected.
 * Roots themselves have no path and are not recorded.
 *
 * Backward does not use torch's full backward hooks: they wrap the module's
 * inputs and outputs in a BackwardHookFunction, and torch then rejects an
 * in-place op on the output (Conv2d followed by ReLU(inplace=True) fails).
 * Instead, as for APIs, the forward pre hook notes the inputs, the forward
 * hook walks the module's own part of the autograd graph and hooks its nodes:
 * the graph is left as it is. */
#include "dump_py.h"

#include <string.h>

static _Thread_local int t_mod_depth;
#define MSP_MOD_STACK 256
static _Thread_local msp_bwd_pending_t *t_pending[MSP_MOD_STACK]; /* by depth */
static PyObject *g_info;      /* module -> (prefix str, dirs int) for selected modules */
static PyObject *g_roots;     /* root modules already walked */
static PyObject *g_fwd_count; /* module -> calls in this step */
static int g_record;          /* module or mix mode */

static int path_matches(const char *path, const char *pat)
{
    size_t lp = strlen(path), lq = strlen(pat);
    if (lp == lq)
        return strcmp(path, pat) == 0;
    /* dotted suffix either way: "layer1.0.conv1" names "net.layer1.0.conv1",
     * and "my_model.layer1.0.conv1" names the path "layer1.0.conv1". */
    if (lp > lq)
        return path[lp - lq - 1] == '.' && strcmp(path + lp - lq, pat) == 0;
    return pat[lq - lp - 1] == '.' && strcmp(pat + lq - lp, path) == 0;
}

static unsigned module_dirs(const char *path)
{
    const msp_config_t *c = &msp_g.cfg;
    if (c->n_api_list == 0)
        return MSP_DIR_FORWARD | MSP_DIR_BACKWARD;
    unsigned d = 0;
    for (size_t i = 0; i < c->n_api_list; i++)
        if (strncmp(c->api_list[i].name, "torch.", 6) != 0 && path_matches(path, c->api_list[i].name))
            d |= c->api_list[i].dirs;
    return d;
}

int msp_module_selected(const char *path)
{
    return module_dirs(path) != 0;
}

static int64_t bump(PyObject *counts, PyObject *module)
{
    PyObject *v = PyDict_GetItem(counts, module);
    int64_t n = v ? PyLong_AsLongLong(v) : 0;
    PyObject *nv = PyLong_FromLongLong(n + 1);
    if (nv) {
        PyDict_SetItem(counts, module, nv);
        Py_DECREF(nv);
    }
    return n;
}

static void walk_root(PyObject *root)
{
    PyObject *it = PyObject_CallMethod(root, "named_modules", NULL);
    PyObject *iter = it ? PyObject_GetIter(it) : NULL;
    PyObject *pair;
    while (iter && (pair = PyIter_Next(iter))) {
        PyObject *pname = PyTuple_GetItem(pair, 0), *mod = PyTuple_GetItem(pair, 1);
        PyObject *b = pname ? PyUnicode_AsUTF8String(pname) : NULL;
        const char *path = b ? PyBytes_AsString(b) : NULL;
        if (path && *path && !PyDict_GetItem(g_info, mod)) {
            unsigned dirs = module_dirs(path);
            PyObject *cls = PyObject_GetAttrString((PyObject *)Py_TYPE(mod), "__name__");
            PyObject *cb = cls ? PyUnicode_AsUTF8String(cls) : NULL;
            if (dirs && cb) {
                PyObject *prefix = PyUnicode_FromFormat("Module.%s.%s", path, PyBytes_AsString(cb));
                PyObject *val = prefix ? Py_BuildValue("(OI)", prefix, dirs) : NULL;
                if (val)
                    PyDict_SetItem(g_info, mod, val);
                Py_XDECREF(val);
                Py_XDECREF(prefix);
            }
            Py_XDECREF(cb);
            Py_XDECREF(cls);
        }
        Py_XDECREF(b);
        Py_DECREF(pair);
        if (PyErr_Occurred())
            PyErr_Clear();
    }
    Py_XDECREF(iter);
    Py_XDECREF(it);
    if (PyErr_Occurred())
        msp_py_warn_error("module walk", "cannot list the modules of a model; module names are "
                          "incomplete");
}

static PyObject *pre_hook(PyObject *self, PyObject *args)
{
    (void)self;
    if (msp_g.disabled)
        Py_RETURN_NONE;
    PyObject *mod = PyTuple_Size(args) > 0 ? PyTuple_GetItem(args, 0) : NULL;
    PyObject *in = PyTuple_Size(args) > 1 ? PyTuple_GetItem(args, 1) : NULL;
    if (++t_mod_depth == 1 && mod && g_record && !PyDict_GetItem(g_roots, mod)) {
        msp_t_depth++;
        PyDict_SetItem(g_roots, mod, Py_True);
        walk_root(mod);
        msp_t_depth--;
    }
    /* runtime event (py_proc.c): a root module is about to run (config_check) */
    if (t_mod_depth == 1 && mod && in)
        msp_ev_root_forward(mod, in);
    if (t_mod_depth < MSP_MOD_STACK) {
        t_pending[t_mod_depth] = NULL;
        PyObject *info = g_record && msp_g.dumping && msp_t_depth == 0 && mod && in &&
                                 PyTuple_Check(in) ? PyDict_GetItem(g_info, mod) : NULL;
        if (info && ((unsigned)PyLong_AsUnsignedLong(PyTuple_GetItem(info, 1)) & MSP_DIR_BACKWARD)) {
            msp_t_depth++;
            t_pending[t_mod_depth] = msp_bwd_begin(in);
            msp_t_depth--;
        }
    }
    if (PyErr_Occurred())
        PyErr_Clear();
    Py_RETURN_NONE;
}

static PyObject *post_hook(PyObject *self, PyObject *args)
{
    (void)self;
    if (msp_g.disabled)
        Py_RETURN_NONE;
    msp_bwd_pending_t *pending = NULL;
    if (t_mod_depth > 0 && t_mod_depth < MSP_MOD_STACK) {
        pending = t_pending[t_mod_depth];
        t_pending[t_mod_depth] = NULL;
    }
    if (t_mod_depth > 0)
        t_mod_depth--;
    PyObject *mod, *in, *out;
    if (g_record && msp_g.dumping && msp_t_depth == 0 &&
        PyArg_UnpackTuple(args, "hook", 3, 3, &mod, &in, &out)) {
        PyObject *info = PyDict_GetItem(g_info, mod);
        if (info) {
            unsigned dirs = (unsigned)PyLong_AsUnsignedLong(PyTuple_GetItem(info, 1));
            msp_t_depth++;
            int64_t n = bump(g_fwd_count, mod);
            PyObject *pb = PyUnicode_AsUTF8String(PyTuple_GetItem(info, 0));
            char name[256];
            if (pb && (dirs & MSP_DIR_FORWARD)) {
                snprintf(name, sizeof name, "%s.forward.%lld", PyBytes_AsString(pb), (long long)n);
                msp_dq_rec_t *r = msp_dq_rec_new(name);
                if (r) {
                    msp_rec_add_output(r, in, "input");
                    msp_rec_add_output(r, out, "output");
                    msp_rec_submit(r);
                }
            }
            if (pb && pending) {
                snprintf(name, sizeof name, "%s.backward.%lld", PyBytes_AsString(pb), (long long)n);
                msp_bwd_finish(pending, name, out, PyTuple_Check(in) ? in : NULL);
                pending = NULL;
            }
            Py_XDECREF(pb);
            msp_t_depth--;
        }
    }
    msp_bwd_cancel(pending);
    if (PyErr_Occurred())
        PyErr_Clear();
    if (t_mod_depth == 0 && msp_g.cfg.step_trigger == MSP_STEP_FORWARD)
        msp_step_end();
    Py_RETURN_NONE;
}

static PyMethodDef g_pre_def = {"msprobe_module_pre_hook", pre_hook, METH_VARARGS, NULL};
static PyMethodDef g_post_def = {"msprobe_module_hook", post_hook, METH_VARARGS, NULL};

void msp_module_step_reset(void)
{
    if (g_fwd_count)
        PyDict_Clear(g_fwd_count);
    /* A forward that raised never reached its post hook. */
    if (msp_g.cfg.step_trigger != MSP_STEP_FORWARD)
        t_mod_depth = 0;
}

int msp_module_install(PyObject *torch)
{
    (void)torch;
    g_record = msp_g.module_on;
    if (!g_record && msp_g.cfg.step_trigger != MSP_STEP_FORWARD && !msp_g.cc_on)
        return 0; /* config_check's root-forward event needs these same hooks */
    g_info = PyDict_New();
    g_roots = PyDict_New();
    g_fwd_count = PyDict_New();
    PyObject *m = PyImport_ImportModule("torch.nn.modules.module");
    PyObject *pre = PyCFunction_NewEx(&g_pre_def, NULL, NULL);
    PyObject *post = PyCFunction_NewEx(&g_post_def, NULL, NULL);
    PyObject *h1 = NULL, *h2 = NULL;
    if (m && pre && post && g_info && g_roots && g_fwd_count) {
        h1 = PyObject_CallMethod(m, "register_module_forward_pre_hook", "O", pre);
        h2 = h1 ? PyObject_CallMethod(m, "register_module_forward_hook", "O", post) : NULL;
    }
    int rc = h2 ? 0 : -1;
    if (rc != 0)
        msp_py_warn_error("module install", "cannot install the module hooks; modules are not "
                          "dumped");
    Py_XDECREF(h1);
    Py_XDECREF(h2);
    Py_XDECREF(pre);
    Py_XDECREF(post);
    Py_XDECREF(m);
    return rc;
}
