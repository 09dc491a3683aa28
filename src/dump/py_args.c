/* What a call's arguments alone do not say, recorded beside them so that a
 * replay can rebuild the call exactly (msprobe-dump(5), ARGUMENTS):
 *  - "alias.<role>" = "<earlier role>": this tensor argument is the very
 *    object passed earlier (self-attention's query, key and value); autograd
 *    then gives one gradient for all of them, and a kernel may take another
 *    path for it;
 *  - "autocast" = "cpu:torch.bfloat16" (comma-separated devices): the
 *    autocast state the call ran under; absent when autocast was off. */
#include "dump_py.h"

#include <stdio.h>
#include <string.h>

#define MSP_ALIAS_MAX 16

static _Thread_local struct {
    PyObject *obj; /* borrowed: the call's arguments hold it */
    char role[64];
} t_alias[MSP_ALIAS_MAX];
static _Thread_local int t_nalias, t_alias_on;

void msp_alias_begin(void)
{
    t_nalias = 0;
    t_alias_on = 1;
}

void msp_alias_end(void)
{
    t_alias_on = 0;
    t_nalias = 0;
}

void msp_alias_note(msp_dq_rec_t *r, const char *role, PyObject *o)
{
    if (!t_alias_on)
        return;
    for (int i = 0; i < t_nalias; i++)
        if (t_alias[i].obj == o) {
            char key[160] = "alias.";
            size_t at = 6;
            msp_str_add(key, sizeof key, &at, role);
            msp_dq_rec_add_attr(r, key, t_alias[i].role);
            return;
        }
    if (t_nalias < MSP_ALIAS_MAX) {
        t_alias[t_nalias].obj = o;
        size_t at = 0;
        msp_str_add(t_alias[t_nalias].role, sizeof t_alias[t_nalias].role, &at, role);
        t_nalias++;
    }
}

/* torch >= 2.4: is_autocast_enabled(device) / get_autocast_dtype(device);
 * before: is_autocast_cpu_enabled() / get_autocast_cpu_dtype() and
 * is_autocast_enabled() / get_autocast_gpu_dtype() for CUDA. */
static PyObject *g_en, *g_dt, *g_cpu_en, *g_cpu_dt, *g_gpu_en, *g_gpu_dt;
static int g_by_device; /* 1: the device-argument API */

void msp_args_init(PyObject *torch)
{
    g_en = PyObject_GetAttrString(torch, "is_autocast_enabled");
    g_dt = PyObject_GetAttrString(torch, "get_autocast_dtype");
    PyErr_Clear();
    if (g_en && g_dt) {
        PyObject *v = PyObject_CallFunction(g_en, "s", "cpu");
        g_by_device = v != NULL;
        Py_XDECREF(v);
        PyErr_Clear();
    }
    if (!g_by_device) {
        g_cpu_en = PyObject_GetAttrString(torch, "is_autocast_cpu_enabled");
        g_cpu_dt = PyObject_GetAttrString(torch, "get_autocast_cpu_dtype");
        g_gpu_dt = PyObject_GetAttrString(torch, "get_autocast_gpu_dtype");
        PyErr_Clear();
        g_gpu_en = g_en;
        Py_XINCREF(g_gpu_en);
    }
}

static PyObject *call_dev(PyObject *by_device, PyObject *old, const char *dev)
{
    if (g_by_device)
        return PyObject_CallFunction(by_device, "s", dev);
    return old ? PyObject_CallObject(old, NULL) : NULL;
}

/* The dtype text autocast uses on dev ("" when it is off there). */
static void autocast_of(const char *dev, char *buf, size_t n)
{
    buf[0] = '\0';
    int cpu = strcmp(dev, "cpu") == 0;
    PyObject *en = call_dev(g_en, cpu ? g_cpu_en : g_gpu_en, dev);
    if (en && PyObject_IsTrue(en) == 1) {
        PyObject *dt = call_dev(g_dt, cpu ? g_cpu_dt : g_gpu_dt, dev);
        PyObject *s = dt ? PyObject_Str(dt) : NULL;
        PyObject *b = s ? PyUnicode_AsUTF8String(s) : NULL;
        if (b)
            snprintf(buf, n, "%s:%s", dev, PyBytes_AsString(b));
        Py_XDECREF(b);
        Py_XDECREF(s);
        Py_XDECREF(dt);
    }
    Py_XDECREF(en);
    if (PyErr_Occurred())
        PyErr_Clear();
}

void msp_rec_add_autocast(msp_dq_rec_t *r)
{
    char cpu[64], cuda[64], both[136];
    autocast_of("cpu", cpu, sizeof cpu);
    autocast_of("cuda", cuda, sizeof cuda);
    if (!cpu[0] && !cuda[0])
        return;
    snprintf(both, sizeof both, "%s%s%s", cpu, cpu[0] && cuda[0] ? "," : "", cuda);
    msp_dq_rec_add_attr(r, "autocast", both);
}
