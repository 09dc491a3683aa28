/* Backward records: of an API call (py_apirec.c) and of a module call
 * (py_module.c). Before the call, the tensor inputs that need a grad are
 * noted (msp_bwd_begin); after it, the op's own part of the autograd graph
 * is found from the first output's grad_fn and hooked (msp_bwd_finish): the
 * node's hook sees the grads of the op's outputs (our input.*) and the edges
 * towards the inputs the grads of its inputs (our output.*). The graph is
 * left as it is, so training computes exactly what it would without us. */
#include "dump_py.h"

#include <stdlib.h>
#include <string.h>

/* Names looked up on every wrapped call, interned once: PyObject_GetAttrString
 * and PyObject_CallMethod make a string object per lookup (bench/dump). */
static PyObject *s_grad_fn, *s_requires_grad, *s_next_functions, *s_variable, *s_register_hook;

static PyObject *interned(PyObject **slot, const char *text)
{
    if (!*slot)
        *slot = PyUnicode_InternFromString(text);
    return *slot;
}

static PyObject *attr_named(PyObject *o, PyObject **slot, const char *text)
{
    PyObject *name = interned(slot, text);
    return name ? PyObject_GetAttr(o, name) : NULL;
}

/* A backward record: the hook on the grad_fn of the op's output sees the
 * grads of the outputs (input.*); the grads of the op's inputs (output.*) are
 * taken, for this op alone, on the edges that leave the op's own part of the
 * autograd graph towards its inputs. That part is found by walking from the
 * output node until the inputs' nodes (or their AccumulateGrad): nothing is
 * added to the graph, so training computes exactly what it would without us. */
#define MSP_BWD_MAX_IN 32
#define MSP_BWD_MAX_EDGES 16
typedef struct msp_bwd_state {
    PyObject_HEAD char name[224];
    int done;
    int nin, nnone;
    int pending;                        /* input-edge hooks still to fire */
    char role[MSP_BWD_MAX_IN][48];      /* "output.0", "output.1.2", "output.kwarg.w" */
    char none_role[MSP_BWD_MAX_IN][48]; /* tensor inputs needing no grad */
    PyObject *in_grads[MSP_BWD_MAX_IN];
    PyObject *out_grads;
    /* msprobe's view of the same backward (see add_node_view): the grads the
     * output node hands on, in autograd order, and for each the op's input
     * its edge reaches directly (-1: none, or an inner node of the op) */
    PyObject *node_grads;
    signed char node_in[MSP_BWD_MAX_IN];
    char *stack; /* the call site (py_stack.c), or NULL */
} msp_bwd_state_t;

typedef struct msp_bwd_hook {
    PyObject_HEAD msp_bwd_state_t *st;
    int is_out;
    int nedges;
    int edge_k[MSP_BWD_MAX_EDGES]; /* index into the node's grad_inputs */
    int edge_j[MSP_BWD_MAX_EDGES]; /* which input of the op */
} msp_bwd_hook_t;

static PyTypeObject *g_bwd_type, *g_state_type;
static PyObject *g_grad_enabled; /* torch.is_grad_enabled */
static PyTypeObject *g_acc_type; /* AccumulateGrad, learned at first sight */

typedef struct bwd_inputs bwd_inputs_t;
static PyObject *inplace_grad_fn(PyObject *t, const bwd_inputs_t *in);

static PyObject *first_grad_fn(PyObject *out, PyObject *args, const bwd_inputs_t *in)
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
            PyObject *g = msp_is_tensor(it) ? attr_named(it, &s_grad_fn, "grad_fn") : NULL;
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
     * contiguous x) owns no node: the node found would be someone else's. Unless
     * it wrote into it (relu_, ReLU(inplace=True)): autograd then gave that
     * tensor a new grad_fn, the op's own node. */
    Py_ssize_t na = args && PyTuple_Check(args) ? PyTuple_Size(args) : 0;
    for (Py_ssize_t i = 0; i < na; i++)
        if (PyTuple_GetItem(args, i) == cand) {
            PyObject *g = inplace_grad_fn(cand, in);
            Py_DECREF(cand);
            return g;
        }
    PyObject *g = attr_named(cand, &s_grad_fn, "grad_fn");
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

/* The output node's grad_inputs, kept for add_node_view (API records only:
 * msprobe takes a module's backward from its full backward hook, in
 * argument order, as we do). */
static void note_node_grads(msp_bwd_state_t *st, const msp_bwd_hook_t *h, PyObject *gin)
{
    if (strncmp(st->name, "Module.", 7) == 0 || !PyTuple_Check(gin))
        return;
    Py_XDECREF(st->node_grads);
    Py_INCREF(gin);
    st->node_grads = gin;
    memset(st->node_in, -1, sizeof st->node_in);
    for (int e = 0; e < h->nedges; e++)
        if (h->edge_k[e] < MSP_BWD_MAX_IN)
            st->node_in[h->edge_k[e]] = (signed char)h->edge_j[e];
}

/* msprobe records an API's backward outputs as the grads its output node
 * (grad_fn) hands on, in autograd order: linear's addmm gives bias, input,
 * weight.t(); cross_entropy's NllLoss the grad of its inner log_softmax. We
 * record the grads of the op's own inputs, in argument order. So that a dump
 * of ours compares with msprobe's, the record also says, in the attribute
 * "grad_fn_outputs", what msprobe's output.K would be for each K: one of our
 * roles (that input's grad, when the edge reaches it directly and alone),
 * "grad_fn.K" (a dataset of its own, when it is a grad inside the op) or
 * "None". Compare uses it only against msprobe's dumps. */
static void add_node_view(msp_dq_rec_t *r, msp_bwd_state_t *st)
{
    Py_ssize_t n = st->node_grads ? PyTuple_Size(st->node_grads) : 0;
    if (n <= 0 || n > MSP_BWD_MAX_IN)
        return;
    char map[MSP_BWD_MAX_IN * 52] = "", role[48];
    size_t at = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *g = PyTuple_GetItem(st->node_grads, k);
        int j = st->node_in[k];
        const char *name = "None";
        if (g && g != Py_None && j >= 0 && j < st->nin && st->in_grads[j] == g) {
            name = st->role[j]; /* the same tensor object: no sum, no copy */
        } else if (g && msp_is_tensor(g)) {
            msp_role_at(role, sizeof role, "grad_fn", k);
            msp_rec_add_value(r, role, g, 1);
            name = role;
        }
        if ((k && msp_str_add(map, sizeof map, &at, ",") != 0) ||
            msp_str_add(map, sizeof map, &at, name) != 0)
            return;
    }
    msp_dq_rec_add_attr(r, "grad_fn_outputs", map);
}

static void submit_backward(msp_bwd_state_t *st)
{
    if (st->done || msp_g.disabled || !msp_g.dumping)
        return;
    st->done = 1;
    /* msprobe's scope: a backward record is in the range or not when it runs */
    msp_dq_rec_t *r = msp_scope_on() && !msp_scope_backward(st->name) ? NULL
                                                                      : msp_dq_rec_new(st->name);
    if (!r)
        goto clear;
    /* gradients: their copies may wait for later records' (py_devstats.c) */
    r->dev_defer = msp_dev_defers();
    if (st->out_grads)
        msp_rec_add_output(r, st->out_grads, "input");
    for (int j = 0; j < st->nin; j++)
        if (st->in_grads[j])
            msp_rec_add_value(r, st->role[j], st->in_grads[j], 1);
    for (int j = 0; j < st->nnone; j++)
        msp_dq_rec_add_attr(r, st->none_role[j], "None");
    add_node_view(r, st);
    r->dev_defer = 0;
    r->stack = st->stack;
    st->stack = NULL;
    msp_rec_submit(r);
clear:
    /* The bytes are copied: do not keep the grads alive with the graph. */
    Py_CLEAR(st->out_grads);
    Py_CLEAR(st->node_grads);
    for (int j = 0; j < st->nin; j++)
        Py_CLEAR(st->in_grads[j]);
}

static PyObject *bwd_hook_call(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)kw;
    msp_bwd_hook_t *h = (msp_bwd_hook_t *)self;
    msp_bwd_state_t *st = h->st;
    PyObject *gin = NULL, *gout = NULL;
    if (msp_g.disabled || st->done || !PyArg_UnpackTuple(args, "hook", 2, 2, &gin, &gout)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    msp_quiet_t quiet = msp_quiet_begin();
    if (h->is_out) {
        Py_XDECREF(st->out_grads);
        Py_INCREF(gout);
        st->out_grads = gout;
        note_node_grads(st, h, gin);
    }
    for (int e = 0; e < h->nedges; e++) {
        PyObject *g = PyTuple_Check(gin) ? PyTuple_GetItem(gin, h->edge_k[e]) : NULL;
        int j = h->edge_j[e];
        if (!g || g == Py_None)
            continue;
        if (!st->in_grads[j]) {
            Py_INCREF(g);
            st->in_grads[j] = g;
        } else {
            /* The op used this input twice: its grad is the sum of both edges. */
            PyObject *sum = PyNumber_Add(st->in_grads[j], g);
            if (sum) {
                Py_DECREF(st->in_grads[j]);
                st->in_grads[j] = sum;
            }
        }
    }
    if (h->nedges > 0)
        st->pending--;
    if (st->pending <= 0)
        submit_backward(st);
    msp_quiet_end(quiet);
    if (PyErr_Occurred())
        PyErr_Clear();
    Py_RETURN_NONE; /* never replaces the gradients */
}

/* Backward states freed (GIL held) and kept for the next calls: at ~3.6 KB
 * each is too big for pymalloc, and one per wrapped call came from glibc's
 * malloc (free, consolidation) on the training thread. */
#define MSP_SPARE_STATES 256
static msp_bwd_state_t *g_spare_states[MSP_SPARE_STATES];
static int g_nspare_states;

static msp_bwd_state_t *state_new(const char *name)
{
    msp_bwd_state_t *st = NULL;
    if (g_nspare_states > 0)
        st = (msp_bwd_state_t *)PyObject_Init((PyObject *)g_spare_states[--g_nspare_states],
                                              g_state_type);
    else
        st = PyObject_New(msp_bwd_state_t, g_state_type);
    if (!st) {
        PyErr_Clear();
        return NULL;
    }
    msp_role_at(st->name, sizeof st->name, name, -1);
    st->done = st->nin = st->nnone = st->pending = 0;
    memset(st->in_grads, 0, sizeof st->in_grads);
    st->out_grads = NULL;
    st->node_grads = NULL;
    st->stack = NULL;
    return st;
}

/* The op's inputs, as seen before the call: tensor, its grad_fn (NULL for a
 * leaf, matched through AccumulateGrad.variable). */
struct bwd_inputs {
    int n;
    PyObject *t[MSP_BWD_MAX_IN];
    PyObject *node[MSP_BWD_MAX_IN];
};

/* t, an input handed back as the output: its grad_fn now when the call gave
 * it a new one (an in-place op), else NULL. An input that needed no grad
 * before the call is not in `in` and had no grad_fn. */
static PyObject *inplace_grad_fn(PyObject *t, const bwd_inputs_t *in)
{
    if (!in)
        return NULL;
    PyObject *before = NULL;
    for (int j = 0; j < in->n; j++)
        if (in->t[j] == t)
            before = in->node[j];
    PyObject *g = attr_named(t, &s_grad_fn, "grad_fn");
    if (!g) {
        PyErr_Clear();
        return NULL;
    }
    if (g == Py_None || g == before) {
        Py_DECREF(g);
        return NULL;
    }
    return g;
}

static void note_input(msp_bwd_state_t *st, bwd_inputs_t *in, const char *role, PyObject *a)
{
    if (!msp_is_tensor(a))
        return;
    PyObject *rg = attr_named(a, &s_requires_grad, "requires_grad");
    int need = rg && PyObject_IsTrue(rg) == 1;
    Py_XDECREF(rg);
    if (!need) {
        if (st->nnone < MSP_BWD_MAX_IN)
            msp_role_at(st->none_role[st->nnone++], sizeof st->none_role[0], role, -1);
        return;
    }
    if (in->n >= MSP_BWD_MAX_IN)
        return;
    PyObject *g = attr_named(a, &s_grad_fn, "grad_fn");
    if (!g)
        PyErr_Clear();
    if (g == Py_None)
        Py_CLEAR(g);
    Py_INCREF(a);
    in->t[in->n] = a;
    in->node[in->n] = g;
    msp_role_at(st->role[in->n], sizeof st->role[0], role, -1);
    in->n++;
    st->nin = in->n;
}

static void collect_inputs(msp_bwd_state_t *st, bwd_inputs_t *in, PyObject *args, PyObject *kw)
{
    char role[48];
    Py_ssize_t n = PyTuple_Size(args);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GetItem(args, i);
        msp_role_at(role, sizeof role, "output", i);
        if (PyList_Check(a) || PyTuple_Check(a)) {
            Py_ssize_t m = PySequence_Size(a);
            for (Py_ssize_t k = 0; k < m && k < MSP_BWD_MAX_IN; k++) {
                PyObject *it = PySequence_GetItem(a, k);
                if (!it) {
                    PyErr_Clear();
                    break;
                }
                char sub[48];
                msp_role_at(sub, sizeof sub, role, k);
                note_input(st, in, sub, it);
                Py_DECREF(it);
            }
        } else {
            note_input(st, in, role, a);
        }
    }
    if (kw && PyDict_Check(kw)) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(kw, &pos, &k, &v)) {
            PyObject *kb = PyUnicode_AsUTF8String(k);
            snprintf(role, sizeof role, "output.kwarg.%s", kb ? PyBytes_AsString(kb) : "?");
            Py_XDECREF(kb);
            note_input(st, in, role, v);
        }
    }
    if (PyErr_Occurred())
        PyErr_Clear();
}

static void free_inputs(bwd_inputs_t *in)
{
    for (int j = 0; j < in->n; j++) {
        Py_XDECREF(in->t[j]);
        Py_XDECREF(in->node[j]);
    }
    in->n = 0;
}

static int is_accumulate(PyObject *m)
{
    if (g_acc_type)
        return Py_TYPE(m) == g_acc_type;
    PyObject *nm = PyObject_GetAttrString((PyObject *)Py_TYPE(m), "__name__");
    int yes = nm && PyUnicode_CompareWithASCIIString(nm, "AccumulateGrad") == 0;
    Py_XDECREF(nm);
    PyErr_Clear();
    if (yes)
        g_acc_type = Py_TYPE(m);
    return yes;
}

/* Which input of the op is node m the grad_fn (or AccumulateGrad) of; -1 if none. */
static int input_of(const bwd_inputs_t *in, PyObject *m)
{
    for (int j = 0; j < in->n; j++)
        if (in->node[j] == m)
            return j;
    if (!is_accumulate(m))
        return -1;
    PyObject *v = attr_named(m, &s_variable, "variable");
    int found = -1;
    for (int j = 0; v && j < in->n && found < 0; j++)
        if (!in->node[j] && in->t[j] == v)
            found = j;
    Py_XDECREF(v);
    PyErr_Clear();
    return found == -1 ? -2 : found; /* -2: someone else's leaf: stop there too */
}

static msp_bwd_hook_t *hook_new(msp_bwd_state_t *st, int is_out)
{
    msp_bwd_hook_t *h = PyObject_New(msp_bwd_hook_t, g_bwd_type);
    if (!h) {
        PyErr_Clear();
        return NULL;
    }
    Py_INCREF(st);
    h->st = st;
    h->is_out = is_out;
    h->nedges = 0;
    return h;
}

static int register_hook(PyObject *node, msp_bwd_hook_t *h)
{
    PyObject *name = interned(&s_register_hook, "register_hook");
    PyObject *handle = name ? PyObject_CallMethodObjArgs(node, name, (PyObject *)h, NULL) : NULL;
    if (!handle) {
        msp_py_warn_error("grad hook", "cannot hook the backward of an API; its backward is "
                                       "not dumped");
        return -1;
    }
    Py_DECREF(handle);
    return 0;
}

/* Walk the op's own nodes from its output node; hook the output node and every
 * node with an edge to one of the inputs. */
static void hook_backward(msp_bwd_state_t *st, bwd_inputs_t *in, PyObject *out_node, int max_nodes)
{
    PyObject *stack_nodes[MSP_BWD_MAX_NODES];
    msp_bwd_hook_t *stack_hooks[MSP_BWD_MAX_NODES];
    PyObject **nodes = stack_nodes;
    msp_bwd_hook_t **hooks = stack_hooks;
    if (max_nodes > MSP_BWD_MAX_NODES) {
        nodes = malloc((size_t)max_nodes * sizeof *nodes);
        hooks = malloc((size_t)max_nodes * sizeof *hooks);
        if (!nodes || !hooks) {
            free(nodes);
            free(hooks);
            return;
        }
    } else {
        max_nodes = MSP_BWD_MAX_NODES;
    }
    int nn = 0, head = 0, complete = 1;
    Py_INCREF(out_node);
    nodes[nn] = out_node;
    hooks[nn++] = hook_new(st, 1);
    while (head < nn && in->n > 0) {
        PyObject *n = nodes[head];
        msp_bwd_hook_t *h = hooks[head++];
        PyObject *next = attr_named(n, &s_next_functions, "next_functions");
        Py_ssize_t ne = next && PyTuple_Check(next) ? PyTuple_Size(next) : 0;
        for (Py_ssize_t k = 0; k < ne; k++) {
            PyObject *edge = PyTuple_GetItem(next, k);
            PyObject *m = edge && PyTuple_Check(edge) ? PyTuple_GetItem(edge, 0) : NULL;
            if (!m || m == Py_None)
                continue;
            int j = input_of(in, m);
            if (j >= 0) {
                if (h && h->nedges < MSP_BWD_MAX_EDGES) {
                    h->edge_k[h->nedges] = (int)k;
                    h->edge_j[h->nedges++] = j;
                }
                continue;
            }
            if (j == -2)
                continue;
            int seen = 0;
            for (int i = 0; i < nn && !seen; i++)
                seen = nodes[i] == m;
            if (seen)
                continue;
            if (nn == max_nodes) {
                complete = 0; /* left the op: an input we could not see (a global?) */
                break;
            }
            Py_INCREF(m);
            nodes[nn] = m;
            hooks[nn++] = hook_new(st, 0);
        }
        Py_XDECREF(next);
        if (!complete)
            break;
    }
    if (PyErr_Occurred())
        PyErr_Clear();
    /* A walk that ran away found no clean boundary: output grads only. */
    for (int i = 0; i < nn; i++) {
        if (!complete && hooks[i])
            hooks[i]->nedges = 0;
        if (hooks[i] && hooks[i]->nedges > 0)
            st->pending++;
    }
    for (int i = 0; i < nn; i++) {
        if (hooks[i] && (i == 0 || hooks[i]->nedges > 0))
            if (register_hook(nodes[i], hooks[i]) != 0 && hooks[i]->nedges > 0)
                st->pending--;
        Py_XDECREF((PyObject *)hooks[i]);
        Py_DECREF(nodes[i]);
    }
    if (nodes != stack_nodes) {
        free(nodes);
        free(hooks);
    }
}

/* ---- one call's backward record ------------------------------------------ */

struct msp_bwd_pending {
    msp_bwd_state_t *st;
    bwd_inputs_t in;
};

/* ---- hooks registered without torch's Python --------------------------------
 * grad_fn.register_hook(h) calls torch.autograd.Function._register_hook(dict,
 * h), dict being the node's hooks so far or None, which makes an OrderedDict
 * and a RemovableHandle: about 7,600 instructions (callgrind), the dearest
 * single part of recording a call that has a backward. Ours answers for
 * msprobe's own hooks: the same OrderedDict (a user's RemovableHandle may later
 * hold a weak reference to it), keyed by the hook itself, which no handle's
 * integer id can be, and no handle (msprobe's hooks die with their node).
 * Every other hook goes to torch's own, unchanged. */
static PyObject *g_torch_register, *g_odict;

static PyObject *register_hook_fast(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *dict = PyTuple_Size(args) == 2 ? PyTuple_GetItem(args, 0) : NULL;
    PyObject *hook = dict ? PyTuple_GetItem(args, 1) : NULL;
    PyErr_Clear();
    if (!hook || Py_TYPE(hook) != g_bwd_type || (dict != Py_None && !PyDict_Check(dict)))
        return PyObject_Call(g_torch_register, args, NULL);
    PyObject *d = dict;
    if (d == Py_None)
        d = PyObject_CallObject(g_odict, NULL);
    else
        Py_INCREF(d);
    if (!d || PyObject_SetItem(d, hook, hook) != 0) {
        Py_XDECREF(d);
        return NULL;
    }
    return Py_BuildValue("(NO)", d, Py_None);
}

static PyMethodDef g_register_def = {"_register_hook", register_hook_fast, METH_VARARGS, NULL};

/* Function._register_hook becomes register_hook_fast; where torch has no
 * such method (or it cannot be replaced), hooks go torch's way. */
static void install_register(PyObject *torch)
{
    if (g_torch_register)
        return;
    PyObject *autograd = PyObject_GetAttrString(torch, "autograd");
    PyObject *fn = autograd ? PyObject_GetAttrString(autograd, "Function") : NULL;
    PyObject *orig = fn ? PyObject_GetAttrString(fn, "_register_hook") : NULL;
    PyObject *coll = orig ? PyImport_ImportModule("collections") : NULL;
    PyObject *od = coll ? PyObject_GetAttrString(coll, "OrderedDict") : NULL;
    PyObject *mine = od && PyCallable_Check(orig) ? PyCFunction_NewEx(&g_register_def, NULL, NULL)
                                                  : NULL;
    if (mine && PyObject_SetAttrString(fn, "_register_hook", mine) == 0) {
        g_torch_register = orig;
        g_odict = od;
        orig = od = NULL;
    }
    Py_XDECREF(mine);
    Py_XDECREF(od);
    Py_XDECREF(coll);
    Py_XDECREF(orig);
    Py_XDECREF(fn);
    Py_XDECREF(autograd);
    PyErr_Clear();
}

int msp_bwd_init(PyObject *torch)
{
    if (!g_grad_enabled)
        g_grad_enabled = PyObject_GetAttrString(torch, "is_grad_enabled");
    if (g_grad_enabled && g_bwd_type)
        install_register(torch);
    return g_grad_enabled ? 0 : -1;
}

/* Whether grad is on for this call; torch's is_grad_enabled is found at the
 * first call when msp_bwd_init did not run (module mode alone). */
static int grad_on(void)
{
    if (!g_grad_enabled) {
        PyObject *mods = PySys_GetObject("modules");
        PyObject *torch = mods ? PyDict_GetItemString(mods, "torch") : NULL;
        if (!torch || msp_bwd_init(torch) != 0) {
            PyErr_Clear();
            return 0;
        }
    }
    PyObject *ge = PyObject_CallFunctionObjArgs(g_grad_enabled, NULL);
    int enabled = ge && PyObject_IsTrue(ge) == 1;
    Py_XDECREF(ge);
    PyErr_Clear();
    return enabled;
}

/* Pendings let go (GIL held) and kept for the next calls, as the states are
 * (g_spare_states): one per recorded API call would otherwise come from
 * malloc on the training thread. */
#define MSP_SPARE_PENDING 64
static msp_bwd_pending_t *g_spare_pending[MSP_SPARE_PENDING];
static int g_nspare_pending;

msp_bwd_pending_t *msp_bwd_begin(const char *name, PyObject *args, PyObject *kw, char **stack)
{
    if (!grad_on())
        return NULL;
    msp_bwd_pending_t *p = g_nspare_pending > 0 ? g_spare_pending[--g_nspare_pending]
                                                : malloc(sizeof *p);
    if (!p)
        return NULL;
    p->in.n = 0;
    if (!(p->st = state_new(name ? name : "?"))) {
        msp_bwd_cancel(p);
        return NULL;
    }
    collect_inputs(p->st, &p->in, args, kw);
    if (stack) {
        p->st->stack = *stack;
        *stack = NULL;
    }
    return p;
}

void msp_bwd_finish(msp_bwd_pending_t *p, const char *name, PyObject *out, PyObject *args,
                    int max_nodes)
{
    if (!p)
        return;
    if (name)
        msp_role_at(p->st->name, sizeof p->st->name, name, -1);
    PyObject *node = first_grad_fn(out, args, &p->in);
    if (node)
        hook_backward(p->st, &p->in, node, max_nodes);
    Py_XDECREF(node);
    msp_bwd_cancel(p);
    if (PyErr_Occurred())
        PyErr_Clear();
}

void msp_bwd_cancel(msp_bwd_pending_t *p)
{
    if (!p)
        return;
    free_inputs(&p->in);
    Py_XDECREF(p->st);
    if (g_nspare_pending < MSP_SPARE_PENDING)
        g_spare_pending[g_nspare_pending++] = p;
    else
        free(p);
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
    msp_bwd_state_t *st = (msp_bwd_state_t *)self;
    Py_XDECREF(st->out_grads);
    Py_XDECREF(st->node_grads);
    free(st->stack);
    st->stack = NULL;
    for (int j = 0; j < MSP_BWD_MAX_IN; j++)
        Py_XDECREF(st->in_grads[j]);
    if (g_nspare_states < MSP_SPARE_STATES) {
        g_spare_states[g_nspare_states++] = st; /* PyObject_Init makes it an object again */
    } else {
        freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
        f(self);
    }
    Py_DECREF(tp);
}

int msp_bwd_types_init(void)
{
    if (g_bwd_type)
        return 0;
    PyType_Slot hslots[] = {
        {Py_tp_call, (void *)bwd_hook_call},
        {Py_tp_dealloc, (void *)bwd_dealloc},
        {0, NULL},
    };
    PyType_Spec hspec = {"msprobe.BackwardHook", sizeof(msp_bwd_hook_t), 0, Py_TPFLAGS_DEFAULT,
                         hslots};
    PyType_Slot sslots[] = {
        {Py_tp_dealloc, (void *)state_dealloc},
        {0, NULL},
    };
    PyType_Spec sspec = {"msprobe.BackwardState", sizeof(msp_bwd_state_t), 0, Py_TPFLAGS_DEFAULT,
                         sslots};
    g_bwd_type = (PyTypeObject *)PyType_FromSpec(&hspec);
    g_state_type = (PyTypeObject *)PyType_FromSpec(&sspec);
    return g_bwd_type && g_state_type ? 0 : -1;
}
