/* A call's values into its record: tensors (read by py_tensor.c), Python
 * values as text attributes, tuples and lists walked into roles "role.i".
 * A finished record's way out is py_record.c's. */
#include "dump_py.h"

#include <stdio.h>
#include <string.h>

/* A non-tensor argument as its repr, the text a replay rebuilds it from
 * (msprobe-dump(5), ARGUMENTS); a repr longer than the buffer is cut and ends
 * in "...", and such a call is not replayed. */
static void add_attr(msp_dq_rec_t *r, const char *role, PyObject *o)
{
    char text[1024];
    if (o == Py_None)
        snprintf(text, sizeof text, "None");
    else
        msp_obj_text(o, 1, text, sizeof text);
    msp_dq_rec_add_attr(r, role, text);
}

static void add_value(msp_dq_rec_t *r, const char *role, PyObject *o, int depth);

void msp_rec_add_value(msp_dq_rec_t *r, const char *role, PyObject *o, int depth)
{
    msp_tensor_batch_begin();
    add_value(r, role, o, depth);
    msp_tensor_batch_end(r);
}

static void add_value(msp_dq_rec_t *r, const char *role, PyObject *o, int depth)
{
    if (msp_is_tensor(o)) {
        msp_alias_note(r, role, o);
        msp_rec_add_tensor(r, role, o);
        return;
    }
    if (PyTuple_Check(o) || PyList_Check(o)) {
        Py_ssize_t n = PySequence_Size(o);
        if (depth >= 3 || n > 256) {
            char text[64];
            snprintf(text, sizeof text, "<%s of %zd>", PyTuple_Check(o) ? "tuple" : "list", n);
            msp_dq_rec_add_attr(r, role, text);
            return;
        }
        int has_tensor = 0;
        for (Py_ssize_t i = 0; i < n && !has_tensor; i++) {
            PyObject *it = PySequence_GetItem(o, i);
            if (!it) {
                PyErr_Clear();
                break;
            }
            has_tensor = msp_is_tensor(it) || PyTuple_Check(it) || PyList_Check(it);
            Py_DECREF(it);
        }
        if (!has_tensor) {
            add_attr(r, role, o);
            return;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *it = PySequence_GetItem(o, i);
            if (!it) {
                PyErr_Clear();
                break;
            }
            char sub[128];
            msp_role_at(sub, sizeof sub, role, i);
            add_value(r, sub, it, depth + 1);
            Py_DECREF(it);
        }
        return;
    }
    add_attr(r, role, o);
}

void msp_rec_add_args(msp_dq_rec_t *r, PyObject *args, PyObject *kw)
{
    char role[128];
    msp_tensor_batch_begin();
    msp_alias_begin();
    Py_ssize_t n = args ? PyTuple_Size(args) : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        msp_role_at(role, sizeof role, "input", i);
        add_value(r, role, PyTuple_GetItem(args, i), 0);
    }
    if (kw && PyDict_Check(kw)) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(kw, &pos, &k, &v)) {
            char key[96];
            msp_obj_text(k, 0, key, sizeof key);
            snprintf(role, sizeof role, "kwarg.%s", key);
            add_value(r, role, v, 0);
        }
    }
    msp_alias_end();
    msp_tensor_batch_end(r);
}

static void add_output(msp_dq_rec_t *r, PyObject *out, const char *prefix);

void msp_rec_add_output(msp_dq_rec_t *r, PyObject *out, const char *prefix)
{
    msp_tensor_batch_begin();
    add_output(r, out, prefix);
    msp_tensor_batch_end(r);
}

static void add_output(msp_dq_rec_t *r, PyObject *out, const char *prefix)
{
    char role[128];
    if (PyTuple_Check(out) || PyList_Check(out)) {
        Py_ssize_t n = PySequence_Size(out);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *it = PySequence_GetItem(out, i);
            if (!it) {
                PyErr_Clear();
                break;
            }
            msp_role_at(role, sizeof role, prefix, i);
            add_value(r, role, it, 1);
            Py_DECREF(it);
        }
        return;
    }
    msp_role_at(role, sizeof role, prefix, 0);
    add_value(r, role, out, 1);
}
