/* The wrapper type (py_wrap.c): a C callable that stands in for a Python
 * callable and hands each call to the handler of its kind. The layers above
 * it own the kinds (API records, step triggers, events, imports) and register
 * their handlers; this layer calls none of them by name. */
#ifndef MSP_PY_WRAP_H
#define MSP_PY_WRAP_H

#include "dump_py.h"

#define MSP_SEL_CALLS 16

typedef struct msp_wrap {
    PyObject_HEAD PyObject *orig;
    char name[160]; /* "Functional.conv2d", "Custom.pkg.fn"; other kinds: the attribute */
    int kind;
    unsigned dirs;
    int bind;
    int64_t count_step, count;
    PyObject *weaklist; /* TorchScript keys a WeakKeyDictionary by function */
    /* calls selected one by one (msprobe's "Functional.relu.1.forward"), in
     * the directions beside each; dirs above holds what every call gets */
    int nsel;
    int64_t sel_call[MSP_SEL_CALLS];
    unsigned char sel_dirs[MSP_SEL_CALLS];
    /* whether a call may write into the tensors it is given (py_apirec.c):
     * by its name, or as seen at its first call */
    unsigned char writes_known, writes;
    /* the API's signature for /defaults (py_sig.c): made at its first
     * recorded call (sig_state 1 from then on), NULL when none is known;
     * immortal, records point at it */
    unsigned char sig_state;
    msp_dq_sig_t *sig;
} msp_wrap_t;

/* The handler of one kind: runs w->orig with args and kw, and what the kind
 * does around it. A kind with no handler calls w->orig alone. */
typedef PyObject *(*msp_wrap_fn)(msp_wrap_t *w, PyObject *args, PyObject *kw);
void msp_wrap_handle(int kind, msp_wrap_fn fn);

/* MSP_W_API (py_apirec.c): a torch API's call, recorded in the steps dumped. */
PyObject *msp_api_call(msp_wrap_t *w, PyObject *args, PyObject *kw);

/* w's signature (py_sig.c), made at the first call and kept; NULL when
 * neither inspect nor torch's override table knows one. Holds the GIL; may
 * run Python code (call with the shim's depth raised: nothing recorded). */
msp_dq_sig_t *msp_api_sig(msp_wrap_t *w);

#endif
