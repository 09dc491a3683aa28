/* Reading tensors and plain values into pack entries. */
#include "py_cc_tensor.h"

#include <string.h>

char *msp_cc_py_text(PyObject *o, int use_repr)
{
    PyObject *s = NULL, *b = NULL;
    char *out = NULL;
    if (!o)
        return NULL;
    if (!use_repr && PyUnicode_Check(o)) {
        s = o;
        Py_INCREF(s);
    } else {
        s = use_repr ? PyObject_Repr(o) : PyObject_Str(o);
    }
    if (s)
        b = PyUnicode_AsUTF8String(s);
    if (b) {
        const char *t = PyBytes_AsString(b);
        if (t)
            out = strdup(t);
    }
    Py_XDECREF(s);
    Py_XDECREF(b);
    if (!out)
        PyErr_Clear();
    return out;
}

static void msp_cc_add_error_entry(cJSON *arr, const char *name, const char *why)
{
    cJSON *e = cJSON_CreateObject();
    if (!e)
        return;
    cJSON_AddStringToObject(e, "name", name);
    cJSON_AddStringToObject(e, "hash", "unavailable");
    cJSON_AddStringToObject(e, "error", why);
    cJSON_AddItemToArray(arr, e);
}

void msp_cc_py_tensor_entry(PyObject *tensor, const char *name, cJSON *arr)
{
    PyObject *dtype = NULL, *shape = NULL, *layout = NULL;
    char *dtype_name = NULL, *layout_name = NULL;
    cJSON *e = NULL;
    msp_dq_rec_t *r = NULL;
    if (!(dtype = PyObject_GetAttrString(tensor, "dtype")) ||
        !(dtype_name = msp_cc_py_text(dtype, 0)))
        goto fail;
    if (!(shape = PyObject_GetAttrString(tensor, "shape")))
        goto fail;
    if (!(layout = PyObject_GetAttrString(tensor, "layout")) ||
        !(layout_name = msp_cc_py_text(layout, 0)))
        goto fail;
    if (!(e = cJSON_CreateObject()))
        goto fail;
    cJSON_AddStringToObject(e, "name", name);
    cJSON *sh = cJSON_AddArrayToObject(e, "shape");
    Py_ssize_t nd = PySequence_Size(shape);
    for (Py_ssize_t i = 0; i < nd; i++) {
        PyObject *dim = PySequence_GetItem(shape, i);
        long long v = dim ? PyLong_AsLongLong(dim) : -1;
        Py_XDECREF(dim);
        cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)v));
    }
    cJSON_AddStringToObject(e, "dtype", dtype_name);
    if (strcmp(layout_name, "torch.strided") != 0) {
        /* Sparse and other layouts: no flat buffer to hash; densify would compute. */
        cJSON_AddStringToObject(e, "layout", layout_name);
        cJSON_AddStringToObject(e, "hash", "unavailable");
        cJSON_AddItemToArray(arr, e);
        e = NULL;
        goto cleanup;
    }
    /* The runtime's one tensor reader: a C-contiguous host copy of the bytes. */
    if (!(r = msp_dq_rec_new("config_check")))
        goto fail;
    msp_rec_add_value(r, name, tensor, 0);
    if (r->nt != 1)
        goto fail;
    const msp_dq_tensor_t *t = &r->t[0];
    size_t es = msp_dtype_size(t->dtype);
    msp_cc_stats_t st;
    msp_cc_tensor_stats(t->nbytes ? t->data : NULL, es ? t->nbytes / es : 0, es,
                        msp_cc_dtype_from_name(dtype_name), &st);
    if (st.valid) {
        cJSON_AddItemToObject(e, "max", msp_cc_json_double(st.max));
        cJSON_AddItemToObject(e, "min", msp_cc_json_double(st.min));
        cJSON_AddItemToObject(e, "mean", msp_cc_json_double(st.mean));
        cJSON_AddItemToObject(e, "norm", msp_cc_json_double(st.norm));
    }
    cJSON_AddStringToObject(e, "hash", st.hash);
    cJSON_AddItemToArray(arr, e);
    e = NULL;
    goto cleanup;
fail:
    PyErr_Clear();
    msp_cc_add_error_entry(arr, name, "cannot read the tensor");
cleanup:
    msp_dq_rec_free(r);
    cJSON_Delete(e);
    free(dtype_name);
    free(layout_name);
    Py_XDECREF(dtype);
    Py_XDECREF(shape);
    Py_XDECREF(layout);
}

static void msp_cc_value_entry(PyObject *v, const char *name, cJSON *arr)
{
    const char *type = Py_None == v         ? "NoneType"
                       : PyBool_Check(v)    ? "bool"
                       : PyLong_Check(v)    ? "int"
                       : PyFloat_Check(v)   ? "float"
                       : PyUnicode_Check(v) ? "str"
                                            : NULL;
    char *text = NULL;
    char *tname = NULL;
    if (type) {
        text = msp_cc_py_text(v, 1);
    } else {
        /* repr of arbitrary objects carries addresses that differ run to run. */
        PyObject *t = PyObject_GetAttrString((PyObject *)Py_TYPE(v), "__qualname__");
        tname = t ? msp_cc_py_text(t, 0) : NULL;
        Py_XDECREF(t);
        PyErr_Clear();
        text = msp_asprintf("<%s>", tname ? tname : "object");
    }
    cJSON *e = cJSON_CreateObject();
    if (e && text) {
        char hex[65];
        msp_cc_sha256_hex(text, strlen(text), hex);
        cJSON_AddStringToObject(e, "name", name);
        cJSON_AddStringToObject(e, "type", type ? type : (tname ? tname : "object"));
        cJSON_AddStringToObject(e, "value", strlen(text) > 256 ? "<long value>" : text);
        cJSON_AddStringToObject(e, "hash", hex);
        cJSON_AddItemToArray(arr, e);
        e = NULL;
    }
    cJSON_Delete(e);
    free(text);
    free(tname);
}

void msp_cc_py_value_entries(PyObject *tensor_type, PyObject *v, const char *name, cJSON *arr,
                             int depth, size_t *budget)
{
    if (*budget == 0)
        return;
    (*budget)--;
    if (tensor_type && PyObject_IsInstance(v, tensor_type) == 1) {
        msp_cc_py_tensor_entry(v, name, arr);
        return;
    }
    PyErr_Clear();
    if (depth < 4 && (PyTuple_Check(v) || PyList_Check(v))) {
        Py_ssize_t n = PySequence_Size(v);
        for (Py_ssize_t i = 0; i < n && *budget; i++) {
            PyObject *x = PySequence_GetItem(v, i);
            char *sub = msp_asprintf("%s.%zd", name, i);
            if (x && sub)
                msp_cc_py_value_entries(tensor_type, x, sub, arr, depth + 1, budget);
            free(sub);
            Py_XDECREF(x);
            PyErr_Clear();
        }
        return;
    }
    if (depth < 4 && PyDict_Check(v)) {
        PyObject *items = PyDict_Items(v);
        Py_ssize_t n = items ? PyList_Size(items) : 0;
        for (Py_ssize_t i = 0; i < n && *budget; i++) {
            PyObject *kv = PyList_GetItem(items, i);
            char *k = msp_cc_py_text(PyTuple_GetItem(kv, 0), 0);
            char *sub = msp_asprintf("%s.%s", name, k ? k : "?");
            if (sub)
                msp_cc_py_value_entries(tensor_type, PyTuple_GetItem(kv, 1), sub, arr, depth + 1,
                                        budget);
            free(sub);
            free(k);
        }
        Py_XDECREF(items);
        PyErr_Clear();
        return;
    }
    msp_cc_value_entry(v, name, arr);
}

cJSON *msp_cc_py_to_json(PyObject *v, int depth)
{
    if (v == Py_None)
        return cJSON_CreateNull();
    if (PyBool_Check(v))
        return cJSON_CreateBool(v == Py_True);
    if (PyLong_Check(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (!overflow && !PyErr_Occurred())
            return cJSON_CreateNumber((double)x);
        PyErr_Clear();
    } else if (PyFloat_Check(v)) {
        return msp_cc_json_double(PyFloat_AsDouble(v));
    } else if (PyUnicode_Check(v)) {
        char *t = msp_cc_py_text(v, 0);
        cJSON *j = cJSON_CreateString(t ? t : "");
        free(t);
        return j;
    } else if (depth < 8 && (PyTuple_Check(v) || PyList_Check(v))) {
        cJSON *a = cJSON_CreateArray();
        Py_ssize_t n = PySequence_Size(v);
        for (Py_ssize_t i = 0; a && i < n; i++) {
            PyObject *x = PySequence_GetItem(v, i);
            cJSON_AddItemToArray(a, x ? msp_cc_py_to_json(x, depth + 1) : cJSON_CreateNull());
            Py_XDECREF(x);
        }
        PyErr_Clear();
        return a;
    } else if (depth < 8 && PyDict_Check(v)) {
        cJSON *o = cJSON_CreateObject();
        PyObject *items = PyDict_Items(v);
        Py_ssize_t n = items ? PyList_Size(items) : 0;
        for (Py_ssize_t i = 0; o && i < n; i++) {
            PyObject *kv = PyList_GetItem(items, i);
            char *k = msp_cc_py_text(PyTuple_GetItem(kv, 0), 0);
            cJSON_AddItemToObject(o, k ? k : "?",
                                  msp_cc_py_to_json(PyTuple_GetItem(kv, 1), depth + 1));
            free(k);
        }
        Py_XDECREF(items);
        PyErr_Clear();
        return o;
    } else {
        /* A one-element tensor (a learning rate held as a tensor) reads as its value. */
        PyObject *item = PyObject_HasAttrString(v, "item") && PyObject_HasAttrString(v, "numel")
                             ? PyObject_CallMethod(v, "item", NULL)
                             : NULL;
        PyErr_Clear();
        if (item && (PyFloat_Check(item) || PyLong_Check(item) || PyBool_Check(item))) {
            cJSON *j = msp_cc_py_to_json(item, depth + 1);
            Py_DECREF(item);
            return j;
        }
        Py_XDECREF(item);
    }
    char *t = msp_cc_py_text(v, 0);
    cJSON *j = cJSON_CreateString(t ? t : "?");
    free(t);
    return j;
}
