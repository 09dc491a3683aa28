/* accel_copy.py inside the training process: loaded at the first tensor that
 * is not on the CPU (or that a test sends the device's way), never on a
 * CPU-only run; its functions by name, its events waited for, DLPack capsules
 * of the host tensors it returns. Used by py_tensor.c (copies to the host)
 * and py_devstats.c (statistics on the device); it calls neither. */
#include "dump_py.h"

static PyObject *g_ns, *g_to_dlpack;
static int g_state; /* 0 not loaded, 1 loaded, -1 failed: synchronous .cpu() */

void msp_accel_init(PyObject *to_dlpack)
{
    g_to_dlpack = to_dlpack;
}

PyObject *msp_accel_fn(const char *name)
{
    if (g_state == 0) {
        g_ns = msp_py_run_source(msp_accel_copy_py, "msprobe_accel_copy");
        g_state = g_ns && PyDict_GetItemString(g_ns, "start") ? 1 : -1;
        if (g_state < 0)
            msp_py_warn_error("accel copy",
                              "cannot set up asynchronous copies of device "
                              "tensors; they are copied synchronously (training waits)");
    }
    PyObject *f = g_state == 1 ? PyDict_GetItemString(g_ns, name) : NULL;
    if (!f && !PyErr_Occurred())
        PyErr_Format(PyExc_RuntimeError, "accel_copy.py has no %s", name);
    return f;
}

int64_t msp_tensor_version(PyObject *t)
{
    static PyObject *s_version;
    if (!s_version && !(s_version = PyUnicode_InternFromString("_version"))) {
        PyErr_Clear();
        return -1;
    }
    PyObject *v = PyObject_GetAttr(t, s_version);
    int64_t n = v ? PyLong_AsLongLong(v) : -1;
    Py_XDECREF(v);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        n = -1;
    }
    return n;
}

PyObject *msp_to_dlpack(PyObject *t)
{
    return PyObject_CallFunctionObjArgs(g_to_dlpack, t, NULL);
}

/* Wait for one copy; 0 when its bytes can be read. */
int msp_wait_event(PyObject *event)
{
    PyObject *r = event ? PyObject_CallMethod(event, "synchronize", NULL) : NULL;
    if (event && !r) {
        msp_py_warn_error("accel sync", "cannot wait for the copy of a device tensor; its "
                                        "values are dumped as zeros");
        return -1;
    }
    Py_XDECREF(r);
    return 0;
}
