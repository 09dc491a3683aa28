/* Parameter and buffer names (msprobe-dump(5), record attribute param.ROLE):
 * which forward input of a record is a parameter or buffer of a model, by its
 * qualified name ("fc1.weight"), so that compare can name a weight that
 * differs before any op of a step used it (a checkpoint loaded differently)
 * instead of the first op that read it. A root module's named_parameters()
 * and named_buffers() are listed when its forward begins in a dumped step;
 * a later root (a GAN's discriminator) puts its class name in front. The
 * table holds weak references only: it keeps no tensor alive, and an entry
 * counts only while its tensor is the very object looked up. */
#include "dump_py.h"

#include <stdio.h>
#include <string.h>

static PyObject *g_names;  /* id(tensor) -> (weakref, b"qualified.name") */
static PyObject *g_walked; /* id(root) -> weakref, roots listed in this step */
static PyObject *g_first;  /* weakref to the first root ever listed */

static int64_t g_step = -1; /* the step the table is of (it holds the roots' tensors
                               of that step: a later step lists them afresh) */

int msp_params_install(void)
{
    g_names = PyDict_New();
    g_walked = PyDict_New();
    return g_names && g_walked ? 0 : -1;
}

/* Note each (name, tensor) of root.<method>() under prefix. */
static void params_note(PyObject *root, const char *method, const char *prefix)
{
    PyObject *it = PyObject_CallMethod(root, method, NULL);
    PyObject *iter = it ? PyObject_GetIter(it) : NULL;
    PyObject *pair;
    while (iter && (pair = PyIter_Next(iter)) != NULL) {
        PyObject *name = PyTuple_Check(pair) && PyTuple_Size(pair) == 2 ? PyTuple_GetItem(pair, 0)
                                                                        : NULL;
        PyObject *t = name ? PyTuple_GetItem(pair, 1) : NULL;
        PyObject *key = t && t != Py_None ? PyLong_FromVoidPtr(t) : NULL;
        PyObject *nb = key ? PyUnicode_AsUTF8String(name) : NULL;
        if (nb && !PyDict_GetItem(g_names, key)) {
            PyObject *full = *prefix ? PyBytes_FromFormat("%s.%s", prefix, PyBytes_AsString(nb))
                                     : (Py_INCREF(nb), nb);
            PyObject *ref = full ? PyWeakref_NewRef(t, NULL) : NULL;
            PyObject *val = ref ? PyTuple_Pack(2, ref, full) : NULL;
            if (val)
                PyDict_SetItem(g_names, key, val);
            Py_XDECREF(val);
            Py_XDECREF(ref);
            Py_XDECREF(full);
        }
        Py_XDECREF(nb);
        Py_XDECREF(key);
        Py_DECREF(pair);
    }
    Py_XDECREF(iter);
    Py_XDECREF(it);
    if (PyErr_Occurred())
        PyErr_Clear();
}

void msp_params_root(PyObject *root)
{
    if (!g_names || !root || !msp_g.dumping)
        return;
    if (g_step != msp_g.step) {
        PyDict_Clear(g_names);
        PyDict_Clear(g_walked);
        g_step = msp_g.step;
    }
    PyObject *key = PyLong_FromVoidPtr(root);
    PyObject *seen = key ? PyDict_GetItem(g_walked, key) : NULL;
    if (!key || (seen && PyWeakref_GetObject(seen) == root)) {
        Py_XDECREF(key);
        return;
    }
    msp_quiet_t quiet = msp_quiet_begin();
    PyObject *ref = PyWeakref_NewRef(root, NULL);
    if (ref)
        PyDict_SetItem(g_walked, key, ref);
    if (!g_first && ref) {
        g_first = ref;
        Py_INCREF(g_first);
    }
    char prefix[160] = "";
    if (g_first && PyWeakref_GetObject(g_first) != root) {
        PyObject *cls = PyObject_GetAttrString((PyObject *)Py_TYPE(root), "__name__");
        PyObject *cb = cls ? PyUnicode_AsUTF8String(cls) : NULL;
        if (cb)
            snprintf(prefix, sizeof prefix, "%s", PyBytes_AsString(cb));
        Py_XDECREF(cb);
        Py_XDECREF(cls);
    }
    params_note(root, "named_parameters", prefix);
    params_note(root, "named_buffers", prefix);
    Py_XDECREF(ref);
    Py_DECREF(key);
    if (PyErr_Occurred())
        PyErr_Clear();
    msp_quiet_end(quiet);
}

const char *msp_param_name(PyObject *t)
{
    if (!g_names || g_step != msp_g.step || !PyDict_Size(g_names))
        return NULL;
    PyObject *key = PyLong_FromVoidPtr(t);
    PyObject *val = key ? PyDict_GetItem(g_names, key) : NULL;
    Py_XDECREF(key);
    if (!val || PyWeakref_GetObject(PyTuple_GetItem(val, 0)) != t)
        return NULL;
    return PyBytes_AsString(PyTuple_GetItem(val, 1));
}
