/* Module mode: global forward pre/post hooks (torch >= 1.13) see every module
 * call. Names come from the root module (one called while no other module's
 * forward is active): at its first forward we walk root.named_modules() and
 * remember, per module, "Module.<path>.<Class>" and the directions selected.
 * Roots themselves have no path and are not recorded.
 *
 * Backward uses register_full_backward_hook on the selected modules only,
 * not the global variant: a global full backward hook wraps every module's
 * outputs in a BackwardHookFunction, which makes torch reject an in-place op
 * on any module output anywhere in the model. */
#include "dump_py.h"

#include <string.h>

static _Thread_local int t_mod_depth;
static PyObject *g_info;      /* module -> (prefix str, dirs int) for selected modules */
static PyObject *g_roots;     /* root modules already walked */
static PyObject *g_fwd_count; /* module -> calls in this step */
static PyObject *g_bwd_count;
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

static void record(PyObject *prefix, const char *dir, PyObject *counts, PyObject *module,
                   PyObject *in, const char *in_role, PyObject *out, const char *out_role)
{
    char name[256];
    PyObject *b = PyUnicode_AsUTF8String(prefix);
    if (!b) {
        PyErr_Clear();
        return;
    }
    snprintf(name, sizeof name, "%s.%s.%lld", PyBytes_AsString(b), dir,
             (long long)bump(counts, module));
    Py_DECREF(b);
    msp_dq_rec_t *r = msp_dq_rec_new(name);
    if (!r)
        return;
    msp_rec_add_output(r, in, in_role);
    msp_rec_add_output(r, out, out_role);
    msp_rec_submit(r);
}

static PyObject *bwd_hook(PyObject *prefix, PyObject *args)
{
    PyObject *mod, *gin, *gout;
    if (!msp_g.disabled && msp_g.dumping && PyArg_UnpackTuple(args, "hook", 3, 3, &mod, &gin, &gout)) {
        msp_t_depth++;
        record(prefix, "backward", g_bwd_count, mod, gout, "input", gin, "output");
        msp_t_depth--;
    }
    if (PyErr_Occurred())
        PyErr_Clear();
    Py_RETURN_NONE;
}

static PyMethodDef g_bwd_def = {"msprobe_module_backward_hook", bwd_hook, METH_VARARGS, NULL};

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
                if (prefix && (dirs & MSP_DIR_BACKWARD)) {
                    PyObject *hook = PyCFunction_NewEx(&g_bwd_def, prefix, NULL);
                    PyObject *h = hook ? PyObject_CallMethod(mod, "register_full_backward_hook",
                                                             "O", hook) : NULL;
                    if (!h)
                        msp_py_warn_error("module hook", "cannot hook a module's backward; it is "
                                          "not dumped");
                    Py_XDECREF(h);
                    Py_XDECREF(hook);
                }
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
    if (++t_mod_depth == 1 && mod && g_record && !PyDict_GetItem(g_roots, mod)) {
        msp_t_depth++;
        PyDict_SetItem(g_roots, mod, Py_True);
        walk_root(mod);
        msp_t_depth--;
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
    if (t_mod_depth > 0)
        t_mod_depth--;
    PyObject *mod, *in, *out;
    if (g_record && msp_g.dumping && msp_t_depth == 0 &&
        PyArg_UnpackTuple(args, "hook", 3, 3, &mod, &in, &out)) {
        PyObject *info = PyDict_GetItem(g_info, mod);
        if (info) {
            unsigned dirs = (unsigned)PyLong_AsUnsignedLong(PyTuple_GetItem(info, 1));
            if (dirs & MSP_DIR_FORWARD) {
                msp_t_depth++;
                record(PyTuple_GetItem(info, 0), "forward", g_fwd_count, mod, in, "input", out,
                       "output");
                msp_t_depth--;
            }
        }
    }
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
    if (g_bwd_count)
        PyDict_Clear(g_bwd_count);
    /* A forward that raised never reached its post hook. */
    if (msp_g.cfg.step_trigger != MSP_STEP_FORWARD)
        t_mod_depth = 0;
}

int msp_module_install(PyObject *torch)
{
    (void)torch;
    g_record = msp_g.module_on;
    if (!g_record && msp_g.cfg.step_trigger != MSP_STEP_FORWARD)
        return 0;
    g_info = PyDict_New();
    g_roots = PyDict_New();
    g_fwd_count = PyDict_New();
    g_bwd_count = PyDict_New();
    PyObject *m = PyImport_ImportModule("torch.nn.modules.module");
    PyObject *pre = PyCFunction_NewEx(&g_pre_def, NULL, NULL);
    PyObject *post = PyCFunction_NewEx(&g_post_def, NULL, NULL);
    PyObject *h1 = NULL, *h2 = NULL;
    if (m && pre && post && g_info && g_roots && g_fwd_count && g_bwd_count) {
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
