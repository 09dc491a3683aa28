/* The wrapper type (py_wrap.c): a C callable that stands in for a Python
 * callable and hands each call to the handler of its kind. The layers above
 * it own the kinds (API records, step triggers, events, imports) and register
 * their handlers; this layer calls none of them by name. */
#ifndef MSP_PY_WRAP_H
#define MSP_PY_WRAP_H

#include "dump_py.h"

#define MSP_SEL_CALLS 16

typedef struct msp_wrap {
    PyObject_HEAD
    PyObject *orig;
    char name[160];     /* "Functional.conv2d", "Custom.pkg.fn"; other kinds: the attribute */
    int kind;
    unsigned dirs;
    int bind;
    int64_t count_step, count;
    PyObject *weaklist;   /* TorchScript keys a WeakKeyDictionary by function */
    /* calls selected one by one (msprobe's "Functional.relu.1.forward"), in
     * the directions beside each; dirs above holds what every call gets */
    int nsel;
    int64_t sel_call[MSP_SEL_CALLS];
    unsigned char sel_dirs[MSP_SEL_CALLS];
    /* whether a call may write into the tensors it is given (py_apirec.c):
     * by its name, or as seen at its first call */
    unsigned char writes_known, writes;
} msp_wrap_t;

/* The handler of one kind: runs w->orig with args and kw, and what the kind
 * does around it. A kind with no handler calls w->orig alone. */
typedef PyObject *(*msp_wrap_fn)(msp_wrap_t *w, PyObject *args, PyObject *kw);
void msp_wrap_handle(int kind, msp_wrap_fn fn);

/* MSP_W_API (py_apirec.c): a torch API's call, recorded in the steps dumped. */
PyObject *msp_api_call(msp_wrap_t *w, PyObject *args, PyObject *kw);

#endif
