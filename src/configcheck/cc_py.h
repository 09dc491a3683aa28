/* Shared by the in-process collectors (cc_py_*.c). Python limited API only:
 * the library is loaded into whatever CPython >= 3.8 runs the training. */
#ifndef MSPROBE_CC_PY_H
#define MSPROBE_CC_PY_H

#define PY_SSIZE_T_CLEAN
#define Py_LIMITED_API 0x03080000
#include <Python.h>

#include "cc_internal.h"

/* UTF-8 copy of str(o) (or of o itself when it is a str); NULL on failure
 * with the Python error cleared. Caller frees. */
char *msp_cc_py_text(PyObject *o, int use_repr);

/* Look up the tensor methods the readers use (from torch._C's tensor base
 * class, beneath any patch of torch.Tensor). 0 on success. */
int msp_cc_py_tensor_init(PyObject *torch);

/* Append to arr one tensor entry {name, shape, dtype, max, min, mean, norm,
 * hash}, read from host memory without running torch operators that
 * compute. Never leaves a Python error set. */
void msp_cc_py_tensor_entry(PyObject *tensor, const char *name, cJSON *arr);

/* Append entries for a (possibly nested) forward input: tensors as above,
 * plain values as {name, type, value, hash}. */
void msp_cc_py_value_entries(PyObject *torch_tensor_type, PyObject *v, const char *name, cJSON *arr, int depth,
                             size_t *budget);

/* A JSON rendering of a hyperparameter value (numbers, strings, nested
 * containers; anything else as its str()). Never NULL unless out of memory. */
cJSON *msp_cc_py_to_json(PyObject *v, int depth);

#endif
