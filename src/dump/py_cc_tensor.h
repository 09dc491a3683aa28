/* config_check's collectors inside the Python side (py_cc*.c): listeners of
 * the one runtime (dump_py.h); the pack itself is built by msp_cc_core. This
 * header is py_cc_tensor.c's: the entries of tensors and values it makes for
 * py_cc.c. */
#ifndef MSP_PY_CC_TENSOR_H
#define MSP_PY_CC_TENSOR_H

#define PY_SSIZE_T_CLEAN
#include "dump_py.h"

#include "msprobe/ccpack.h"
#include "msprobe/configcheck.h"

/* UTF-8 copy of str(o) (or of o itself when it is a str); NULL on failure
 * with the Python error cleared. Caller frees. */
char *msp_cc_py_text(PyObject *o, int use_repr);

/* Append to arr one tensor entry {name, shape, dtype, max, min, mean, norm,
 * hash}, read through the runtime's tensor reader (the dump's: nothing it
 * calls is dumped, no torch operator computes). Never leaves a Python error set. */
void msp_cc_py_tensor_entry(PyObject *tensor, const char *name, cJSON *arr);

/* Append entries for a (possibly nested) forward input: tensors as above,
 * plain values as {name, type, value, hash}. */
void msp_cc_py_value_entries(PyObject *torch_tensor_type, PyObject *v, const char *name, cJSON *arr,
                             int depth, size_t *budget);

/* A JSON rendering of a hyperparameter value (numbers, strings, nested
 * containers; anything else as its str()). Never NULL unless out of memory. */
cJSON *msp_cc_py_to_json(PyObject *v, int depth);

#endif
