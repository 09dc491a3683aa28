/* The wrapper type: each patched callable (a torch API, optimizer.step,
 * __import__, a seed function) is replaced by an instance of a C type whose
 * tp_call hands the call to the handler registered for the wrapper's kind
 * (py_wrap.h). Bound like a method where the original was a function in a
 * class dict; passes for the original to introspection, deepcopy and
 * TorchScript's function table. */
#include "py_wrap.h"

#include <stddef.h>
#include <stdio.h>

#include <structmember.h>

typedef struct msp_bound {
    PyObject_HEAD msp_wrap_t *w;
    PyObject *self;
} msp_bound_t;

static PyTypeObject *g_wrap_type, *g_bound_type;
static msp_wrap_fn g_handlers[MSP_W_NKINDS];

void msp_wrap_handle(int kind, msp_wrap_fn fn)
{
    if (kind >= 0 && kind < MSP_W_NKINDS)
        g_handlers[kind] = fn;
}

static PyObject *dispatch(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    msp_wrap_fn fn = g_handlers[w->kind];
    return fn ? fn(w, args, kw) : PyObject_Call(w->orig, args, kw);
}

static PyObject *wrap_call(PyObject *self, PyObject *args, PyObject *kw)
{
    return dispatch((msp_wrap_t *)self, args, kw);
}

static PyObject *wrap_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    msp_wrap_t *w = (msp_wrap_t *)self;
    if (!w->bind || !obj || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    msp_bound_t *b = PyObject_New(msp_bound_t, g_bound_type);
    if (!b)
        return NULL;
    Py_INCREF(self);
    Py_INCREF(obj);
    b->w = w;
    b->self = obj;
    return (PyObject *)b;
}

static PyObject *wrap_getattro(PyObject *self, PyObject *name)
{
    msp_wrap_t *w = (msp_wrap_t *)self;
    /* torch 1.13's Optimizer._hook_for_profile wraps step again unless it
     * sees step.hooked: ours counts as hooked. */
    if (w->kind == MSP_W_OPT_STEP && PyUnicode_CompareWithASCIIString(name, "hooked") == 0)
        Py_RETURN_TRUE;
    if (PyUnicode_CompareWithASCIIString(name, "__wrapped__") == 0) {
        Py_INCREF(w->orig);
        return w->orig;
    }
    static const char *const fwd[] = {"__doc__",    "__name__",           "__qualname__",
                                      "__module__", "__text_signature__", "__signature__"};
    for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
        if (PyUnicode_CompareWithASCIIString(name, fwd[i]) == 0)
            return PyObject_GetAttr(w->orig, name);
    PyObject *r = PyObject_GenericGetAttr(self, name);
    if (r || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return r;
    PyErr_Clear();
    return PyObject_GetAttr(w->orig, name);
}

/* copy.deepcopy and pickle treat a function as a global reference: a module
 * holding F.relu (TransformerEncoderLayer.activation) must still deepcopy. */
static PyObject *wrap_reduce(PyObject *self, PyObject *unused)
{
    (void)unused;
    msp_wrap_t *w = (msp_wrap_t *)self;
    PyObject *q = PyObject_GetAttrString(w->orig, "__qualname__");
    if (q)
        return q;
    PyErr_Clear();
    return PyObject_GetAttrString(w->orig, "__name__");
}

static PyObject *wrap_repr(PyObject *self)
{
    msp_wrap_t *w = (msp_wrap_t *)self;
    PyObject *inner = PyObject_Repr(w->orig);
    if (!inner)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("<msprobe wrapper of %U>", inner);
    Py_DECREF(inner);
    return r;
}

static void wrap_dealloc(PyObject *self)
{
    msp_wrap_t *w = (msp_wrap_t *)self;
    PyTypeObject *tp = Py_TYPE(self);
    if (w->weaklist)
        PyObject_ClearWeakRefs(self);
    Py_XDECREF(w->orig);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static PyObject *bound_call(PyObject *self, PyObject *args, PyObject *kw)
{
    msp_bound_t *b = (msp_bound_t *)self;
    Py_ssize_t n = PyTuple_Size(args);
    PyObject *full = PyTuple_New(n + 1);
    if (!full)
        return NULL;
    Py_INCREF(b->self);
    PyTuple_SetItem(full, 0, b->self);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GetItem(args, i);
        Py_INCREF(a);
        PyTuple_SetItem(full, i + 1, a);
    }
    PyObject *out = dispatch(b->w, full, kw);
    Py_DECREF(full);
    return out;
}

/* A bound wrapper passes for a bound method: torch's LR schedulers wrap
 * optimizer.step through step.__self__ and step.__func__. */
static PyObject *bound_getattro(PyObject *self, PyObject *name)
{
    msp_bound_t *b = (msp_bound_t *)self;
    if (PyUnicode_CompareWithASCIIString(name, "__self__") == 0) {
        Py_INCREF(b->self);
        return b->self;
    }
    if (PyUnicode_CompareWithASCIIString(name, "__func__") == 0) {
        Py_INCREF((PyObject *)b->w);
        return (PyObject *)b->w;
    }
    PyObject *r = PyObject_GenericGetAttr(self, name);
    if (r || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return r;
    PyErr_Clear();
    return PyObject_GetAttr((PyObject *)b->w, name);
}

static void bound_dealloc(PyObject *self)
{
    msp_bound_t *b = (msp_bound_t *)self;
    PyTypeObject *tp = Py_TYPE(self);
    Py_XDECREF((PyObject *)b->w);
    Py_XDECREF(b->self);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static PyMemberDef wrap_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(msp_wrap_t, weaklist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef wrap_methods[] = {
    {"__reduce__", wrap_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int msp_wrap_types_init(void)
{
    if (g_wrap_type)
        return 0;
    PyType_Slot wslots[] = {
        {Py_tp_call, (void *)wrap_call},
        {Py_tp_descr_get, (void *)wrap_descr_get},
        {Py_tp_getattro, (void *)wrap_getattro},
        {Py_tp_repr, (void *)wrap_repr},
        {Py_tp_dealloc, (void *)wrap_dealloc},
        {Py_tp_methods, (void *)wrap_methods},
        {Py_tp_members, (void *)wrap_members}, /* honoured from Python 3.9 */
        {0, NULL},
    };
    PyType_Spec wspec = {"msprobe.Wrapper", sizeof(msp_wrap_t), 0, Py_TPFLAGS_DEFAULT, wslots};
    PyType_Slot bslots[] = {
        {Py_tp_call, (void *)bound_call},
        {Py_tp_getattro, (void *)bound_getattro},
        {Py_tp_dealloc, (void *)bound_dealloc},
        {0, NULL},
    };
    PyType_Spec bspec = {"msprobe.BoundWrapper", sizeof(msp_bound_t), 0, Py_TPFLAGS_DEFAULT,
                         bslots};
    g_wrap_type = (PyTypeObject *)PyType_FromSpec(&wspec);
    g_bound_type = (PyTypeObject *)PyType_FromSpec(&bspec);
    return g_wrap_type && g_bound_type ? 0 : -1;
}

PyObject *msp_wrap_new(PyObject *orig, const char *name, int kind, unsigned dirs, int bind)
{
    msp_wrap_t *w = PyObject_New(msp_wrap_t, g_wrap_type);
    if (!w)
        return NULL;
    Py_INCREF(orig);
    w->orig = orig;
    snprintf(w->name, sizeof w->name, "%s", name);
    w->kind = kind;
    w->dirs = dirs;
    w->bind = bind;
    w->count_step = -1;
    w->count = 0;
    w->weaklist = NULL;
    w->nsel = 0;
    w->writes_known = w->writes = 0;
    w->sig_state = 0;
    w->sig = NULL;
    return (PyObject *)w;
}

int msp_is_wrap(PyObject *o)
{
    return g_wrap_type && Py_TYPE(o) == g_wrap_type;
}
