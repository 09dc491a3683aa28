/* API mode: each selected torch API is replaced by an instance of a C type
 * whose tp_call runs the original and hands inputs/outputs to the writer.
 *
 * Outside the steps of dump_iter a call costs the wrapper's dispatch and a
 * flag test. Inside, only the outermost wrapped call of a nest is recorded
 * (thread-local depth), named "<Prefix>.<api>.<n>.forward" with n counting
 * that API's calls within the step. Backward data comes from a hook on the
 * grad_fn of the first output that has one: the node's hook sees the grads
 * of the op's outputs (our input.*) and of its inputs (our output.*). */
#include "dump_py.h"

#include <stdlib.h>
#include <string.h>

_Thread_local int msp_t_depth;
static _Thread_local int t_trigger_depth; /* nested optimizer.step / backward calls */
static _Thread_local int t_import_depth;

typedef struct msp_wrap {
    PyObject_HEAD
    PyObject *orig;
    char name[96];      /* "Functional.conv2d"; for other kinds, the attribute name */
    int kind;
    unsigned dirs;
    int bind;
    int64_t count_step, count;
} msp_wrap_t;

typedef struct msp_bound {
    PyObject_HEAD
    msp_wrap_t *w;
    PyObject *self;
} msp_bound_t;

/* One backward record is put together by two node hooks: the hook on the
 * grad_fn of the op's output fires first (grads of the outputs), the hook on
 * the identity node in front of the op's inputs fires later (grads of the
 * inputs, from this op alone even when an input is used elsewhere too). */
#define MSP_BWD_MAX_POS 64
typedef struct msp_bwd_state {
    PyObject_HEAD
    char name[160];
    int want_in;            /* an input-side hook was registered */
    int done;
    int npos;
    int pos[MSP_BWD_MAX_POS]; /* forward input index of each identity output */
    int nnone;
    int none_pos[MSP_BWD_MAX_POS]; /* tensor inputs that need no grad: output.i = None */
    PyObject *out_grads;    /* grads of the op's outputs, once seen */
} msp_bwd_state_t;

typedef struct msp_bwd_hook {
    PyObject_HEAD
    msp_bwd_state_t *st;
    int input_side;
} msp_bwd_hook_t;

static PyTypeObject *g_wrap_type, *g_bound_type, *g_bwd_type, *g_state_type;
static PyObject *g_bhf_apply, *g_grad_enabled;

/* ---- the curated list ---------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int msp_api_known(const char *name)
{
    return bsearch(&name, msp_api_table, msp_api_table_len, sizeof *msp_api_table, cmp_str) != NULL;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 120 || lb > 120)
        return (size_t)-1;
    size_t prev[121], cur[121];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof *prev);
    }
    return prev[lb];
}

static int ns_rank(const char *e)
{
    if (strncmp(e, "torch.nn.functional.", 20) == 0)
        return 0;
    if (strncmp(e, "torch.Tensor.", 13) == 0)
        return 2;
    if (strncmp(e, "torch.distributed.", 18) == 0)
        return 3;
    return 1;
}

const char *msp_api_near(const char *name)
{
    const char *best = NULL;
    size_t best_score = (size_t)-1, best_d = (size_t)-1;
    const char *leaf = strrchr(name, '.');
    leaf = leaf ? leaf + 1 : name;
    for (size_t i = 0; i < msp_api_table_len; i++) {
        const char *e = msp_api_table[i];
        size_t d = edit_distance(name, e);
        /* The same function under another namespace (torch.nn.functional.matmul
         * for torch.matmul) counts as a one-letter typo; among those, prefer
         * functional, then torch, then Tensor. */
        const char *eleaf = strrchr(e, '.');
        size_t score = d * 10;
        if (eleaf && strcmp(eleaf + 1, leaf) == 0 && d > 1) {
            d = 1;
            score = 10 + (size_t)ns_rank(e);
        }
        if (score < best_score) {
            best_score = score;
            best_d = d;
            best = e;
        }
    }
    size_t len = strlen(name);
    size_t limit = len / 4 > 3 ? len / 4 : 3;
    return best_d <= limit ? best : NULL;
}

/* ---- recording ------------------------------------------------------------ */

static PyObject *first_grad_fn(PyObject *out, PyObject *args)
{
    PyObject *cand = NULL;
    if (msp_is_tensor(out)) {
        cand = out;
        Py_INCREF(cand);
    } else if (PyTuple_Check(out) || PyList_Check(out)) {
        Py_ssize_t n = PySequence_Size(out);
        for (Py_ssize_t i = 0; i < n && !cand; i++) {
            PyObject *it = PySequence_GetItem(out, i);
            if (!it) {
                PyErr_Clear();
                break;
            }
            PyObject *g = msp_is_tensor(it) ? PyObject_GetAttrString(it, "grad_fn") : NULL;
            if (g && g != Py_None)
                cand = it;
            else
                Py_DECREF(it);
            Py_XDECREF(g);
            if (PyErr_Occurred())
                PyErr_Clear();
        }
    }
    if (!cand)
        return NULL;
    /* An op that hands back one of its inputs (x.to(x.dtype), x.contiguous() on a
     * contiguous x) owns no node: the node found would be someone else's. */
    Py_ssize_t na = PyTuple_Size(args);
    for (Py_ssize_t i = 0; i < na; i++)
        if (PyTuple_GetItem(args, i) == cand) {
            Py_DECREF(cand);
            return NULL;
        }
    PyObject *g = PyObject_GetAttrString(cand, "grad_fn");
    Py_DECREF(cand);
    if (!g) {
        PyErr_Clear();
        return NULL;
    }
    if (g == Py_None) {
        Py_DECREF(g);
        return NULL;
    }
    return g;
}

static int hook_node(PyObject *node, msp_bwd_state_t *st, int input_side)
{
    msp_bwd_hook_t *h = PyObject_New(msp_bwd_hook_t, g_bwd_type);
    if (!h) {
        PyErr_Clear();
        return -1;
    }
    Py_INCREF(st);
    h->st = st;
    h->input_side = input_side;
    PyObject *handle = PyObject_CallMethod(node, "register_hook", "O", (PyObject *)h);
    Py_DECREF(h);
    if (!handle) {
        msp_py_warn_error("grad hook", "cannot hook the backward of an API; its backward is "
                          "not dumped");
        return -1;
    }
    Py_DECREF(handle);
    return 0;
}

static void submit_backward(msp_bwd_state_t *st, PyObject *in_grads)
{
    if (st->done || msp_g.disabled || !msp_g.dumping)
        return;
    st->done = 1;
    msp_dq_rec_t *r = msp_dq_rec_new(st->name);
    if (!r)
        return;
    if (st->out_grads)
        msp_rec_add_output(r, st->out_grads, "input");
    Py_ssize_t n = in_grads ? PyTuple_Size(in_grads) : 0;
    for (Py_ssize_t i = 0; i < n && i < st->npos; i++) {
        char role[32];
        snprintf(role, sizeof role, "output.%d", st->pos[i]);
        msp_rec_add_value(r, role, PyTuple_GetItem(in_grads, i), 1);
    }
    for (int i = 0; in_grads && i < st->nnone; i++) {
        char role[32];
        snprintf(role, sizeof role, "output.%d", st->none_pos[i]);
        msp_dq_rec_add_attr(r, role, "None");
    }
    msp_rec_submit(r);
}

static PyObject *bwd_hook_call(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)kw;
    msp_bwd_hook_t *h = (msp_bwd_hook_t *)self;
    msp_bwd_state_t *st = h->st;
    PyObject *gin = NULL, *gout = NULL;
    if (msp_g.disabled || !PyArg_UnpackTuple(args, "hook", 2, 2, &gin, &gout)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    msp_t_depth++;
    if (!h->input_side) {
        Py_XDECREF(st->out_grads);
        Py_INCREF(gout);
        st->out_grads = gout;
        if (!st->want_in)
            submit_backward(st, NULL);
    } else {
        /* The identity node's grad_outputs are the grads reaching the op's inputs. */
        submit_backward(st, gout);
    }
    msp_t_depth--;
    if (PyErr_Occurred())
        PyErr_Clear();
    Py_RETURN_NONE; /* never replaces the gradients */
}

static msp_bwd_state_t *state_new(const char *name)
{
    msp_bwd_state_t *st = PyObject_New(msp_bwd_state_t, g_state_type);
    if (!st) {
        PyErr_Clear();
        return NULL;
    }
    snprintf(st->name, sizeof st->name, "%s", name);
    st->want_in = st->done = st->npos = st->nnone = 0;
    st->out_grads = NULL;
    return st;
}

/* An op told to write into its input must see the tensor itself: torch refuses
 * in-place writes to the identity node's outputs. */
static int writes_input(PyObject *kw)
{
    PyObject *v = kw ? PyDict_GetItemString(kw, "inplace") : NULL;
    return v && PyObject_IsTrue(v) == 1;
}

/* Put the identity node in front of the positional tensor inputs that need
 * grad; returns the args to call with (new ref) and fills st. */
static PyObject *wrap_inputs(PyObject *args, PyObject *kw, msp_bwd_state_t *st)
{
    Py_ssize_t n = PyTuple_Size(args);
    PyObject *tensors = NULL, *res = NULL, *out = NULL;
    if (!g_bhf_apply || writes_input(kw))
        goto fallback;
    PyObject *ge = PyObject_CallFunctionObjArgs(g_grad_enabled, NULL);
    int enabled = ge && PyObject_IsTrue(ge) == 1;
    Py_XDECREF(ge);
    if (!enabled)
        goto fallback;
    tensors = PyList_New(0);
    for (Py_ssize_t i = 0; tensors && i < n && st->npos < MSP_BWD_MAX_POS; i++) {
        PyObject *a = PyTuple_GetItem(args, i);
        if (!msp_is_tensor(a))
            continue;
        PyObject *rg = PyObject_GetAttrString(a, "requires_grad");
        int need = rg && PyObject_IsTrue(rg) == 1;
        Py_XDECREF(rg);
        if (need) {
            PyList_Append(tensors, a);
            st->pos[st->npos++] = (int)i;
        } else if (st->nnone < MSP_BWD_MAX_POS) {
            st->none_pos[st->nnone++] = (int)i;
        }
    }
    if (!tensors || st->npos == 0)
        goto fallback;
    PyObject *tt = PyList_AsTuple(tensors);
    res = tt ? PyObject_Call(g_bhf_apply, tt, NULL) : NULL;
    Py_XDECREF(tt);
    if (!res || !PyTuple_Check(res) || PyTuple_Size(res) != st->npos)
        goto fallback;
    PyObject *node = PyObject_GetAttrString(PyTuple_GetItem(res, 0), "grad_fn");
    int ok = node && node != Py_None && hook_node(node, st, 1) == 0;
    Py_XDECREF(node);
    if (!ok)
        goto fallback;
    out = PyTuple_New(n);
    for (Py_ssize_t i = 0, k = 0; out && i < n; i++) {
        PyObject *a = (k < st->npos && st->pos[k] == i) ? PyTuple_GetItem(res, k++)
                                                        : PyTuple_GetItem(args, i);
        Py_INCREF(a);
        PyTuple_SetItem(out, i, a);
    }
    if (!out)
        goto fallback;
    st->want_in = 1;
    Py_DECREF(tensors);
    Py_DECREF(res);
    return out;
fallback:
    if (PyErr_Occurred())
        PyErr_Clear();
    st->npos = st->nnone = 0;
    Py_XDECREF(tensors);
    Py_XDECREF(res);
    Py_INCREF(args);
    return args;
}

static int64_t next_index(msp_wrap_t *w)
{
    if (w->count_step != msp_g.step) {
        w->count_step = msp_g.step;
        w->count = 0;
    }
    return w->count++;
}

static PyObject *api_call(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    if (!msp_g.dumping || msp_t_depth > 0 || msp_g.disabled)
        return PyObject_Call(w->orig, args, kw);

    char name[160];
    int64_t idx = next_index(w);
    msp_dq_rec_t *r = NULL;
    msp_bwd_state_t *st = NULL;
    PyObject *call_args = args;
    msp_t_depth++;
    if (w->dirs & MSP_DIR_FORWARD) {
        snprintf(name, sizeof name, "%s.%lld.forward", w->name, (long long)idx);
        /* Inputs are copied before the call: an op that writes into its input
         * (F.relu(x, inplace=True), all_reduce) must show what it was given. */
        if ((r = msp_dq_rec_new(name)))
            msp_rec_add_args(r, args, kw);
    }
    if ((w->dirs & MSP_DIR_BACKWARD) && strncmp(w->name, "Distributed.", 12) != 0) {
        snprintf(name, sizeof name, "%s.%lld.backward", w->name, (long long)idx);
        if ((st = state_new(name)))
            call_args = wrap_inputs(args, kw, st);
    }
    PyObject *out = PyObject_Call(w->orig, call_args, kw);
    if (!out) {
        msp_dq_rec_free(r);
        if (call_args != args)
            Py_DECREF(call_args);
        Py_XDECREF(st);
        msp_t_depth--;
        return NULL;
    }
    PyObject *exc_t, *exc_v, *exc_tb;
    PyErr_Fetch(&exc_t, &exc_v, &exc_tb); /* nothing pending normally; keep it if so */
    if (r) {
        if (strncmp(w->name, "Distributed.", 12) == 0) {
            /* Collectives write their result into their tensor arguments. */
            char role[64];
            Py_ssize_t n = PyTuple_Size(args);
            for (Py_ssize_t i = 0; i < n; i++) {
                PyObject *a = PyTuple_GetItem(args, i);
                snprintf(role, sizeof role, "output.%zd", i);
                if (msp_is_tensor(a) || PyList_Check(a))
                    msp_rec_add_value(r, role, a, 0);
            }
            if (out != Py_None && msp_is_tensor(out))
                msp_rec_add_output(r, out, "output.ret");
        } else {
            msp_rec_add_output(r, out, "output");
        }
        msp_rec_submit(r);
    }
    if (st) {
        PyObject *node = first_grad_fn(out, call_args);
        if (node)
            hook_node(node, st, 0);
        else if (st->want_in)
            st->out_grads = NULL; /* the op returned an input: only input grads */
        Py_XDECREF(node);
        Py_DECREF(st);
    }
    if (call_args != args)
        Py_DECREF(call_args);
    msp_t_depth--;
    if (PyErr_Occurred())
        PyErr_Clear();
    PyErr_Restore(exc_t, exc_v, exc_tb);
    return out;
}

/* optimizer.step(), Tensor.backward(), autograd.backward(): a step ends when
 * the outermost of them returns. */
static PyObject *trigger_call(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    t_trigger_depth++;
    PyObject *out = PyObject_Call(w->orig, args, kw);
    t_trigger_depth--;
    if (out && t_trigger_depth == 0 && !msp_g.disabled)
        msp_step_end();
    return out;
}

/* Optimizer.__init__ on torch without a global step hook: make sure the class
 * of each new optimizer has its step wrapped once. */
static PyObject *opt_init_call(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    PyObject *out = PyObject_Call(w->orig, args, kw);
    if (!out || PyTuple_Size(args) < 1)
        return out;
    PyObject *cls = (PyObject *)Py_TYPE(PyTuple_GetItem(args, 0));
    PyObject *step = PyObject_GetAttrString(cls, "step");
    if (step && !msp_is_wrap(step)) {
        PyObject *nw = msp_wrap_new(step, "step", MSP_W_OPT_STEP, 0, 1);
        if (!nw || PyObject_SetAttrString(cls, "step", nw) < 0)
            msp_py_warn_error("optimizer", "cannot hook optimizer.step(); steps will not advance");
        Py_XDECREF(nw);
    }
    Py_XDECREF(step);
    if (PyErr_Occurred())
        PyErr_Clear();
    return out;
}

void msp_after_import(void);

static PyObject *import_call(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    t_import_depth++;
    PyObject *out = PyObject_Call(w->orig, args, kw);
    t_import_depth--;
    if (out && t_import_depth == 0 && !msp_g.disabled)
        msp_after_import();
    return out;
}

static PyObject *dispatch(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    switch (w->kind) {
    case MSP_W_API:
        return api_call(w, args, kw);
    case MSP_W_OPT_STEP:
    case MSP_W_STEP_TRIGGER:
        return trigger_call(w, args, kw);
    case MSP_W_OPT_INIT:
        return opt_init_call(w, args, kw);
    case MSP_W_IMPORT:
        return import_call(w, args, kw);
    default:
        return PyObject_Call(w->orig, args, kw);
    }
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
    static const char *const fwd[] = {"__doc__", "__name__", "__qualname__", "__module__",
                                      "__text_signature__", "__signature__"};
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

static void bwd_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    Py_XDECREF((PyObject *)((msp_bwd_hook_t *)self)->st);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static void state_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    Py_XDECREF(((msp_bwd_state_t *)self)->out_grads);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static PyMethodDef wrap_methods[] = {
    {"__reduce__", wrap_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int msp_api_types_init(void)
{
    PyType_Slot wslots[] = {
        {Py_tp_call, (void *)wrap_call},
        {Py_tp_descr_get, (void *)wrap_descr_get},
        {Py_tp_getattro, (void *)wrap_getattro},
        {Py_tp_repr, (void *)wrap_repr},
        {Py_tp_dealloc, (void *)wrap_dealloc},
        {Py_tp_methods, (void *)wrap_methods},
        {0, NULL},
    };
    PyType_Spec wspec = {"msprobe.Wrapper", sizeof(msp_wrap_t), 0, Py_TPFLAGS_DEFAULT, wslots};
    PyType_Slot bslots[] = {
        {Py_tp_call, (void *)bound_call},
        {Py_tp_dealloc, (void *)bound_dealloc},
        {0, NULL},
    };
    PyType_Spec bspec = {"msprobe.BoundWrapper", sizeof(msp_bound_t), 0, Py_TPFLAGS_DEFAULT, bslots};
    PyType_Slot hslots[] = {
        {Py_tp_call, (void *)bwd_hook_call},
        {Py_tp_dealloc, (void *)bwd_dealloc},
        {0, NULL},
    };
    PyType_Spec hspec = {"msprobe.BackwardHook", sizeof(msp_bwd_hook_t), 0, Py_TPFLAGS_DEFAULT,
                         hslots};
    g_wrap_type = (PyTypeObject *)PyType_FromSpec(&wspec);
    g_bound_type = (PyTypeObject *)PyType_FromSpec(&bspec);
    g_bwd_type = (PyTypeObject *)PyType_FromSpec(&hspec);
    PyType_Slot sslots[] = {
        {Py_tp_dealloc, (void *)state_dealloc},
        {0, NULL},
    };
    PyType_Spec sspec = {"msprobe.BackwardState", sizeof(msp_bwd_state_t), 0, Py_TPFLAGS_DEFAULT,
                         sslots};
    g_state_type = (PyTypeObject *)PyType_FromSpec(&sspec);
    return (g_wrap_type && g_bound_type && g_bwd_type && g_state_type) ? 0 : -1;
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
    return (PyObject *)w;
}

int msp_is_wrap(PyObject *o)
{
    return g_wrap_type && Py_TYPE(o) == g_wrap_type;
}

/* ---- patching ------------------------------------------------------------- */

static const struct {
    const char *path, *prefix;
    int bind;
} g_spaces[] = {
    {"torch.nn.functional.", "Functional", 0},
    {"torch.Tensor.", "Tensor", 1},
    {"torch.distributed.", "Distributed", 0},
    {"torch.", "Torch", 0},
};

static PyObject *owner_object(PyObject *torch, const char *path)
{
    /* path without the trailing dot, below "torch" */
    if (strcmp(path, "torch.") == 0) {
        Py_INCREF(torch);
        return torch;
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%.*s", (int)strlen(path) - 1, path);
    PyObject *m = PyImport_ImportModule(buf);
    if (m)
        return m;
    PyErr_Clear();
    if (strcmp(buf, "torch.Tensor") == 0)
        return PyObject_GetAttrString(torch, "Tensor");
    return NULL;
}

static int patch_one(PyObject *torch, const char *full, unsigned dirs, int explicit_entry)
{
    for (size_t s = 0; s < sizeof g_spaces / sizeof g_spaces[0]; s++) {
        size_t pl = strlen(g_spaces[s].path);
        if (strncmp(full, g_spaces[s].path, pl) != 0 || strchr(full + pl, '.'))
            continue;
        const char *attr = full + pl;
        PyObject *owner = owner_object(torch, g_spaces[s].path);
        if (!owner) {
            PyErr_Clear();
            return 0;
        }
        PyObject *orig = PyObject_GetAttrString(owner, attr);
        int rc = 0;
        if (!orig) {
            PyErr_Clear();
            if (explicit_entry)
                msp_shim_warn_once(full, "%s does not exist in this torch; not dumped", full);
        } else if (msp_is_wrap(orig)) {
            ((msp_wrap_t *)orig)->dirs |= dirs;
        } else {
            char name[96];
            snprintf(name, sizeof name, "%s.%s", g_spaces[s].prefix, attr);
            PyObject *w = msp_wrap_new(orig, name, MSP_W_API, dirs, g_spaces[s].bind);
            if (!w || PyObject_SetAttrString(owner, attr, w) < 0) {
                msp_py_warn_error("patch", "cannot wrap an API; it is not dumped");
                rc = -1;
            }
            Py_XDECREF(w);
        }
        Py_XDECREF(orig);
        Py_DECREF(owner);
        return rc;
    }
    return 0;
}

int msp_patch_torch(PyObject *torch)
{
    /* The identity autograd Function torch's own full backward hooks use
     * (torch 1.13 and 2.x); without it backward records carry output grads only. */
    PyObject *fm = PyImport_ImportModule("torch.nn.modules._functions");
    PyObject *bhf = fm ? PyObject_GetAttrString(fm, "BackwardHookFunction") : NULL;
    g_bhf_apply = bhf ? PyObject_GetAttrString(bhf, "apply") : NULL;
    g_grad_enabled = PyObject_GetAttrString(torch, "is_grad_enabled");
    if (!g_grad_enabled)
        g_bhf_apply = NULL;
    Py_XDECREF(bhf);
    Py_XDECREF(fm);
    PyErr_Clear();
    const msp_config_t *c = &msp_g.cfg;
    int explicit_api = 0;
    for (size_t i = 0; i < c->n_api_list; i++)
        if (strncmp(c->api_list[i].name, "torch.", 6) == 0) {
            explicit_api = 1;
            patch_one(torch, c->api_list[i].name, c->api_list[i].dirs, 1);
        }
    if (!explicit_api && c->n_api_list == 0)
        for (size_t i = 0; i < msp_api_table_len; i++)
            patch_one(torch, msp_api_table[i], MSP_DIR_FORWARD | MSP_DIR_BACKWARD, 0);
    return 0;
}
