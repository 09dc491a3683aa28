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

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <structmember.h>

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

static _Thread_local int t_trigger_depth; /* nested optimizer.step / backward calls */
static _Thread_local int t_import_depth;
static size_t g_npending; /* api_list callables outside torch not wrapped yet */
/* What became of each api_list entry, for the warning at exit (E_UNKNOWN_SAID:
 * unknown, and said so before training). */
enum { E_NONE = 0, E_UNKNOWN, E_PENDING, E_WRAPPED, E_BAD, E_UNKNOWN_SAID };
static unsigned char *g_estate;

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
} msp_wrap_t;

typedef struct msp_bound {
    PyObject_HEAD
    msp_wrap_t *w;
    PyObject *self;
} msp_bound_t;

/* A backward record: the hook on the grad_fn of the op's output sees the
 * grads of the outputs (input.*); the grads of the op's inputs (output.*) are
 * taken, for this op alone, on the edges that leave the op's own part of the
 * autograd graph towards its inputs. That part is found by walking from the
 * output node until the inputs' nodes (or their AccumulateGrad): nothing is
 * added to the graph, so training computes exactly what it would without us. */
#define MSP_BWD_MAX_IN 32
#define MSP_BWD_MAX_EDGES 16
#define MSP_BWD_MAX_NODES 64        /* an API's own part of the graph */
#define MSP_BWD_MAX_MODULE_NODES 8192 /* a module's: a whole block of layers */
typedef struct msp_bwd_state {
    PyObject_HEAD
    char name[224];
    int done;
    int nin, nnone;
    int pending;                             /* input-edge hooks still to fire */
    char role[MSP_BWD_MAX_IN][48];           /* "output.0", "output.1.2", "output.kwarg.w" */
    char none_role[MSP_BWD_MAX_IN][48];      /* tensor inputs needing no grad */
    PyObject *in_grads[MSP_BWD_MAX_IN];
    PyObject *out_grads;
    /* msprobe's view of the same backward (see add_node_view): the grads the
     * output node hands on, in autograd order, and for each the op's input
     * its edge reaches directly (-1: none, or an inner node of the op) */
    PyObject *node_grads;
    signed char node_in[MSP_BWD_MAX_IN];
    char *stack;                             /* the call site (py_stack.c), or NULL */
} msp_bwd_state_t;

typedef struct msp_bwd_hook {
    PyObject_HEAD
    msp_bwd_state_t *st;
    int is_out;
    int nedges;
    int edge_k[MSP_BWD_MAX_EDGES];           /* index into the node's grad_inputs */
    int edge_j[MSP_BWD_MAX_EDGES];           /* which input of the op */
} msp_bwd_hook_t;

static PyTypeObject *g_wrap_type, *g_bound_type, *g_bwd_type, *g_state_type;

/* Every attribute patched, so torch.jit.script can compile against the
 * originals (TorchScript cannot compile through a C callable). */
typedef struct patched {
    PyObject *owner, *wrapper;
    char attr[64];
} patched_t;
static patched_t *g_patched;
static size_t g_npatched, g_cap_patched;
static PyObject *g_grad_enabled;
static PyTypeObject *g_acc_type; /* AccumulateGrad, learned at first sight */

/* ---- the API list: discovered from the running torch, else the table ------ */

/* Sorted names the shim may wrap: what api_discover.py found in this torch at
 * boot, or the committed table of torch 1.13 (api_table.c) when discovery
 * failed, was turned off (MSPROBE_API_TABLE=1) or has not run yet. */
static char **g_found;
static size_t g_nfound;
static int g_list_state;       /* 0 not tried, 1 discovered, 2 table */
static double g_discover_ms;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static const char *const *active_list(size_t *n)
{
    if (g_list_state == 1) {
        *n = g_nfound;
        return (const char *const *)g_found;
    }
    *n = msp_api_table_len;
    return msp_api_table;
}

int msp_api_known(const char *name)
{
    size_t n;
    const char *const *l = active_list(&n);
    return bsearch(&name, l, n, sizeof *l, cmp_str) != NULL;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Run api_discover.py's discover(torch); a list of str, or NULL with an error set. */
static PyObject *run_discover(PyObject *torch)
{
    PyObject *ns = msp_py_run_source(msp_api_discover_py, "msprobe_api_discover");
    PyObject *fn = ns ? PyDict_GetItemString(ns, "discover") : NULL; /* borrowed */
    PyObject *out = NULL;
    if (fn)
        out = PyObject_CallFunctionObjArgs(fn, torch, NULL);
    else if (ns)
        PyErr_SetString(PyExc_RuntimeError, "api_discover.py defines no discover()");
    if (out && (!PyList_Check(out) || PyList_Size(out) == 0)) {
        Py_CLEAR(out);
        PyErr_SetString(PyExc_RuntimeError, "discover() found no API");
    }
    Py_XDECREF(ns);
    return out;
}

int msp_api_discover(PyObject *torch)
{
    if (g_list_state)
        return g_list_state;
    g_list_state = 2;
    if (msp_env_flag("MSPROBE_API_TABLE"))
        return g_list_state;
    msp_t_depth++; /* what discovery calls is not dumped */
    double t0 = now_ms();
    PyObject *names = run_discover(torch);
    Py_ssize_t n = names ? PyList_Size(names) : 0;
    char **v = n > 0 ? calloc((size_t)n, sizeof *v) : NULL;
    Py_ssize_t k = 0;
    for (; v && k < n; k++) {
        PyObject *b = PyUnicode_AsUTF8String(PyList_GetItem(names, k));
        v[k] = b ? strdup(PyBytes_AsString(b)) : NULL;
        Py_XDECREF(b);
        if (!v[k])
            break;
    }
    if (v && k == n) {
        qsort(v, (size_t)n, sizeof *v, cmp_str);
        g_found = v;
        g_nfound = (size_t)n;
        g_list_state = 1;
    } else {
        for (Py_ssize_t i = 0; v && i < k; i++)
            free(v[i]);
        free(v);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        msp_py_warn_error("api discovery", "cannot list the APIs of this torch; using the "
                          "built-in list of torch 1.13 instead (APIs added since are not dumped)");
    }
    g_discover_ms = now_ms() - t0;
    Py_XDECREF(names);
    PyErr_Clear();
    msp_t_depth--;
    return g_list_state;
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
    size_t nl;
    const char *const *l = active_list(&nl);
    for (size_t i = 0; i < nl; i++) {
        const char *e = l[i];
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
        int w = snprintf(map + at, sizeof map - at, "%s%s", k ? "," : "", name);
        if (w < 0 || (size_t)w >= sizeof map - at)
            return;
        at += (size_t)w;
    }
    msp_dq_rec_add_attr(r, "grad_fn_outputs", map);
}

static void submit_backward(msp_bwd_state_t *st)
{
    if (st->done || msp_g.disabled || !msp_g.dumping)
        return;
    st->done = 1;
    msp_dq_rec_t *r = msp_dq_rec_new(st->name);
    if (!r)
        return;
    if (st->out_grads)
        msp_rec_add_output(r, st->out_grads, "input");
    for (int j = 0; j < st->nin; j++)
        if (st->in_grads[j])
            msp_rec_add_value(r, st->role[j], st->in_grads[j], 1);
    for (int j = 0; j < st->nnone; j++)
        msp_dq_rec_add_attr(r, st->none_role[j], "None");
    add_node_view(r, st);
    r->stack = st->stack;
    st->stack = NULL;
    msp_rec_submit(r);
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
    msp_t_depth++;
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
    msp_t_depth--;
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

static int64_t next_index(msp_wrap_t *w)
{
    if (w->count_step != msp_g.step) {
        w->count_step = msp_g.step;
        w->count = 0;
    }
    return w->count++;
}

/* "NAME.IDX.DIR" without snprintf (once or twice per wrapped call), cut to
 * size as snprintf would. */
static void call_name(char *buf, size_t size, const char *api, int64_t idx, const char *dir)
{
    char num[24];
    size_t k = sizeof num;
    uint64_t v = idx < 0 ? 0 : (uint64_t)idx;
    do {
        num[--k] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    const char *parts[5] = {api, ".", num + k, ".", dir};
    size_t lens[5] = {strlen(api), 1, sizeof num - k, 1, strlen(dir)};
    size_t at = 0;
    for (int i = 0; i < 5 && at + 1 < size; i++) {
        size_t n = lens[i] < size - 1 - at ? lens[i] : size - 1 - at;
        memcpy(buf + at, parts[i], n);
        at += n;
    }
    buf[at] = '\0';
}

/* What an api_list entry asks of wrapper w: every call in its directions,
 * or the one call it names. Past MSP_SEL_CALLS single calls, every call. */
static void add_selection(msp_wrap_t *w, unsigned dirs, const msp_api_sel_t *sel)
{
    if (!sel || !sel->has_call) {
        w->dirs |= dirs;
        return;
    }
    for (int i = 0; i < w->nsel; i++)
        if (w->sel_call[i] == sel->call) {
            w->sel_dirs[i] |= (unsigned char)dirs;
            return;
        }
    if (w->nsel == MSP_SEL_CALLS) {
        msp_shim_warn_once(w->name, "more than %d single calls of %s listed; every call of it "
                           "is dumped", MSP_SEL_CALLS, w->name);
        w->dirs |= dirs;
        return;
    }
    w->sel_call[w->nsel] = sel->call;
    w->sel_dirs[w->nsel++] = (unsigned char)dirs;
}

/* The directions call number idx of w is recorded in: its own, a single
 * call's, and both inside a module the list names at level mix. */
static unsigned call_dirs(const msp_wrap_t *w, int64_t idx)
{
    unsigned d = w->dirs;
    for (int i = 0; i < w->nsel; i++)
        if (w->sel_call[i] == idx)
            d |= w->sel_dirs[i];
    if (msp_t_listed > 0)
        d |= MSP_DIR_FORWARD | MSP_DIR_BACKWARD;
    return d;
}

static PyObject *api_call(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    if (!msp_g.dumping || msp_t_depth > 0 || msp_g.disabled || !msp_dq_accepting())
        return PyObject_Call(w->orig, args, kw);

    /* An RNN op (_VF.lstm) is one call but, on CPU, a whole graph of nodes. */
    int max_nodes = strncmp(w->name, "VF.", 3) == 0 ? MSP_BWD_MAX_MODULE_NODES : MSP_BWD_MAX_NODES;
    char name[224];
    int64_t idx = next_index(w);
    unsigned dirs = call_dirs(w, idx);
    if (!dirs)
        return PyObject_Call(w->orig, args, kw);
    msp_dq_rec_t *r = NULL;
    msp_bwd_state_t *st = NULL;
    bwd_inputs_t in;
    in.n = 0;
    char *stack = msp_stack_capture(); /* before the depth rises: the caller's frames */
    msp_t_depth++;
    if (dirs & MSP_DIR_FORWARD) {
        call_name(name, sizeof name, w->name, idx, "forward");
        /* Inputs are copied before the call: an op that writes into its input
         * (F.relu(x, inplace=True), all_reduce) must show what it was given. */
        if ((r = msp_dq_rec_new(name))) {
            const char *parent = msp_module_parent();
            if (parent)
                msp_dq_rec_add_attr(r, "parent", parent);
            msp_t_links = MSP_LINK_FIND;
            msp_rec_add_args(r, args, kw);
            msp_t_links = MSP_LINK_OFF;
            msp_rec_add_autocast(r);
            r->stack = stack ? strdup(stack) : NULL;
        }
    }
    if ((dirs & MSP_DIR_BACKWARD) && strncmp(w->name, "Distributed.", 12) != 0 &&
        g_grad_enabled) {
        PyObject *ge = PyObject_CallFunctionObjArgs(g_grad_enabled, NULL);
        int enabled = ge && PyObject_IsTrue(ge) == 1;
        Py_XDECREF(ge);
        PyErr_Clear();
        call_name(name, sizeof name, w->name, idx, "backward");
        if (enabled && (st = state_new(name))) {
            collect_inputs(st, &in, args, kw);
            st->stack = stack;
            stack = NULL;
        }
    }
    free(stack);
    PyObject *out = PyObject_Call(w->orig, args, kw);
    if (!out) {
        msp_rec_drop(r);
        free_inputs(&in);
        Py_XDECREF(st);
        msp_t_depth--;
        return NULL;
    }
    PyObject *exc_t, *exc_v, *exc_tb;
    PyErr_Fetch(&exc_t, &exc_v, &exc_tb); /* nothing pending normally; keep it if so */
    if (r) {
        msp_t_links = MSP_LINK_NOTE;
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
            msp_dist_add_context(r, w->name, w->orig, args, kw, out);
        } else {
            msp_rec_add_output(r, out, "output");
        }
        msp_t_links = MSP_LINK_OFF;
        msp_rec_submit(r);
    }
    if (st) {
        PyObject *node = first_grad_fn(out, args, &in);
        if (node)
            hook_backward(st, &in, node, max_nodes);
        Py_XDECREF(node);
        Py_DECREF(st);
    }
    free_inputs(&in);
    msp_t_depth--;
    if (PyErr_Occurred())
        PyErr_Clear();
    PyErr_Restore(exc_t, exc_v, exc_tb);
    return out;
}

/* ---- backward records for modules (py_module.c) ---- */

struct msp_bwd_pending {
    msp_bwd_state_t *st;
    bwd_inputs_t in;
};

msp_bwd_pending_t *msp_bwd_begin(PyObject *args)
{
    if (!g_grad_enabled) { /* module mode alone: msp_patch_torch did not run */
        PyObject *mods = PySys_GetObject("modules");
        PyObject *torch = mods ? PyDict_GetItemString(mods, "torch") : NULL;
        g_grad_enabled = torch ? PyObject_GetAttrString(torch, "is_grad_enabled") : NULL;
        if (!g_grad_enabled) {
            PyErr_Clear();
            return NULL;
        }
    }
    PyObject *ge = PyObject_CallFunctionObjArgs(g_grad_enabled, NULL);
    int enabled = ge && PyObject_IsTrue(ge) == 1;
    Py_XDECREF(ge);
    PyErr_Clear();
    if (!enabled)
        return NULL;
    msp_bwd_pending_t *p = calloc(1, sizeof *p);
    if (!p || !(p->st = state_new("?"))) {
        free(p);
        return NULL;
    }
    collect_inputs(p->st, &p->in, args, NULL);
    return p;
}

void msp_bwd_finish(msp_bwd_pending_t *p, const char *name, PyObject *out, PyObject *args)
{
    if (!p)
        return;
    msp_role_at(p->st->name, sizeof p->st->name, name, -1);
    PyObject *node = first_grad_fn(out, args, &p->in);
    if (node)
        hook_backward(p->st, &p->in, node, MSP_BWD_MAX_MODULE_NODES);
    Py_XDECREF(node);
    msp_bwd_cancel(p);
}

void msp_bwd_cancel(msp_bwd_pending_t *p)
{
    if (!p)
        return;
    free_inputs(&p->in);
    Py_XDECREF(p->st);
    free(p);
    if (PyErr_Occurred())
        PyErr_Clear();
}

/* optimizer.step(), Tensor.backward(), autograd.backward(): a step ends when
 * the outermost of them returns. The outermost optimizer.step() is also
 * recorded (py_optim.c), and what it calls is not: its in-place updates are
 * the record. A step given a closure (LBFGS) runs the model inside: those
 * calls are recorded as usual. */
static int g_end_deferred; /* the global post hook fired inside a wrapped step */

int msp_trigger_defer_step_end(void)
{
    if (t_trigger_depth == 0)
        return 0;
    g_end_deferred = 1;
    return 1;
}

static PyObject *trigger_call(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    msp_opt_pending_t *op = NULL;
    int quiet = 0;
    if (w->kind == MSP_W_OPT_STEP && t_trigger_depth == 0 && PyTuple_Size(args) >= 1) {
        op = msp_opt_begin(PyTuple_GetItem(args, 0));
        PyObject *closure = kw ? PyDict_GetItemString(kw, "closure") : NULL;
        quiet = PyTuple_Size(args) == 1 && (!closure || closure == Py_None);
    }
    t_trigger_depth++;
    msp_t_depth += quiet;
    PyObject *out = PyObject_Call(w->orig, args, kw);
    msp_t_depth -= quiet;
    t_trigger_depth--;
    if (op) {
        PyObject *et, *ev, *etb;
        PyErr_Fetch(&et, &ev, &etb);
        if (out)
            msp_opt_finish(op);
        else
            msp_opt_cancel(op);
        PyErr_Restore(et, ev, etb);
    }
    int ends = w->kind != MSP_W_OPT_STEP || msp_g.opt_step_by_init || g_end_deferred;
    if (t_trigger_depth == 0)
        g_end_deferred = 0;
    if (out && t_trigger_depth == 0 && ends && !msp_g.disabled)
        msp_step_end();
    return out;
}

/* Optimizer.__init__: raises the runtime's "optimizer created" event and
 * makes sure the class of each new optimizer has its step wrapped once. */
static PyObject *opt_init_call(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    PyObject *out = PyObject_Call(w->orig, args, kw);
    if (!out || PyTuple_Size(args) < 1)
        return out;
    /* runtime event (py_proc.c): config_check records the optimizer */
    msp_ev_optimizer_created(PyTuple_GetItem(args, 0));
    /* Every optimizer class has its step wrapped once: its step is a record
     * (py_optim.c), and on torch 1.13 it also ends the step (opt_step_by_init). */
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

static void set_patched(int on)
{
    for (size_t i = 0; i < g_npatched; i++) {
        patched_t *p = &g_patched[i];
        PyObject *v = on ? p->wrapper : ((msp_wrap_t *)p->wrapper)->orig;
        if (PyObject_SetAttrString(p->owner, p->attr, v) < 0)
            PyErr_Clear();
    }
}

/* torch.jit.script: compile with the original APIs in place, then put the
 * wrappers back. Compiled code runs in TorchScript, never through Python APIs. */
static PyObject *jit_call(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    set_patched(0);
    PyObject *out = PyObject_Call(w->orig, args, kw);
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    set_patched(1);
    PyErr_Restore(t, v, tb);
    return out;
}


static PyObject *import_call(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    t_import_depth++;
    PyObject *out = PyObject_Call(w->orig, args, kw);
    t_import_depth--;
    /* At every depth: a package that imports a listed module and binds its
     * function (from vendor import fn) must bind our wrapper. */
    if (out && g_npending > 0 && !msp_g.disabled)
        msp_custom_resolve();
    if (out && t_import_depth == 0 && !msp_g.disabled)
        msp_after_import();
    return out;
}

/* torch.compile (torch >= 2.0): what runs inside a compiled graph never goes
 * through Python, so the wrappers cannot see it; say so once, when the
 * script first compiles something, and change nothing. */
static PyObject *compile_call(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    static int said;
    if (!said && msp_proc_may_write()) {
        said = 1;
        msp_shim_warn_once("torch.compile", "torch.compile: what runs inside compiled graphs is "
                           "not visible to msprobe (only what runs eagerly: outside compiled "
                           "code, at graph breaks, and module boundaries in module/mix mode); "
                           "dump a run without torch.compile to see every API");
    }
    return PyObject_Call(w->orig, args, kw);
}

static PyObject *norecord_call(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    msp_t_depth++;
    msp_t_data_depth++;
    PyObject *out = PyObject_Call(w->orig, args, kw);
    msp_t_data_depth--;
    msp_t_depth--;
    return out;
}

/* ---- Dataset constructors: data preparation, not model calls ---------------- */

/* A Dataset's constructor prepares data (torchvision's MNIST reads the whole
 * set and views it with Tensor.view: most of a step's bytes): nothing it runs
 * is the model's. The own __init__ of each Dataset subclass is wrapped like a
 * DataLoader fetch: those that exist when torch is patched (a script that
 * imports torchvision first), and through Dataset.__init_subclass__ those
 * defined later. */
static PyObject *g_dataset_cls;       /* torch.utils.data.Dataset */
static PyObject *g_ds_subclass_orig;  /* Dataset's own __init_subclass__, if it had one */
static PyObject *g_ds_function_type;  /* types.FunctionType (the limited API has no check) */

static PyObject *builtin_named(const char *name)
{
    PyObject *b = PyEval_GetBuiltins(); /* borrowed */
    PyObject *o = b ? PyDict_GetItemString(b, name) : NULL;
    Py_XINCREF(o);
    return o;
}

static void wrap_dataset_init(PyObject *cls)
{
    PyObject *dict = PyObject_GetAttrString(cls, "__dict__");
    PyObject *init = dict ? PyMapping_GetItemString(dict, "__init__") : NULL;
    PyErr_Clear();
    if (init && g_ds_function_type && (PyObject *)Py_TYPE(init) == g_ds_function_type) {
        PyObject *w = msp_wrap_new(init, "__init__", MSP_W_NORECORD, 0, 1);
        if (!w || PyObject_SetAttrString(cls, "__init__", w) < 0)
            PyErr_Clear(); /* a class that refuses it: its constructor may be dumped */
        Py_XDECREF(w);
    }
    Py_XDECREF(init);
    Py_XDECREF(dict);
}

static void wrap_dataset_tree(PyObject *cls, int depth)
{
    if (depth > 64)
        return;
    wrap_dataset_init(cls);
    PyObject *subs = PyObject_CallMethod(cls, "__subclasses__", NULL);
    Py_ssize_t n = subs && PyList_Check(subs) ? PyList_Size(subs) : 0;
    for (Py_ssize_t i = 0; i < n; i++)
        wrap_dataset_tree(PyList_GetItem(subs, i), depth + 1);
    Py_XDECREF(subs);
    PyErr_Clear();
}

/* Dataset.__init_subclass__(cls, **kw): wraps the new class's constructor,
 * then does what the next __init_subclass__ in line does. */
static PyObject *ds_init_subclass(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    PyObject *cls = PyTuple_Size(args) > 0 ? PyTuple_GetItem(args, 0) : NULL;
    if (!cls || !PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "__init_subclass__ expects the new class");
        return NULL;
    }
    wrap_dataset_init(cls);
    PyObject *next = NULL;
    if (g_ds_subclass_orig) {
        next = PyObject_CallMethod(g_ds_subclass_orig, "__get__", "OO", Py_None, cls);
    } else {
        PyObject *super_type = builtin_named("super");
        PyObject *sup = super_type ? PyObject_CallFunctionObjArgs(super_type, g_dataset_cls,
                                                                  cls, NULL)
                                   : NULL;
        next = sup ? PyObject_GetAttrString(sup, "__init_subclass__") : NULL;
        Py_XDECREF(sup);
        Py_XDECREF(super_type);
    }
    PyObject *empty = next ? PyTuple_New(0) : NULL;
    PyObject *out = empty ? PyObject_Call(next, empty, kw) : NULL;
    Py_XDECREF(empty);
    Py_XDECREF(next);
    return out;
}

static PyMethodDef g_ds_subclass_def = {"__init_subclass__", (PyCFunction)(void (*)(void))ds_init_subclass,
                                        METH_VARARGS | METH_KEYWORDS, NULL};

static void patch_datasets(PyObject *data_module)
{
    if (g_dataset_cls)
        return;
    PyObject *ds = PyObject_GetAttrString(data_module, "Dataset");
    PyObject *dict = ds ? PyObject_GetAttrString(ds, "__dict__") : NULL;
    PyObject *fn = ds ? PyCFunction_NewEx(&g_ds_subclass_def, NULL, NULL) : NULL;
    PyObject *classmethod = builtin_named("classmethod");
    PyObject *cm = fn && classmethod ? PyObject_CallFunctionObjArgs(classmethod, fn, NULL) : NULL;
    Py_XDECREF(classmethod);
    PyObject *types = PyImport_ImportModule("types");
    if (types && !g_ds_function_type)
        g_ds_function_type = PyObject_GetAttrString(types, "FunctionType");
    Py_XDECREF(types);
    PyErr_Clear();
    if (ds && dict && cm) {
        g_ds_subclass_orig = PyMapping_GetItemString(dict, "__init_subclass__");
        PyErr_Clear();
        g_dataset_cls = ds;
        Py_INCREF(ds);
        if (PyObject_SetAttrString(ds, "__init_subclass__", cm) < 0)
            msp_py_warn_error("dataset", "cannot hook Dataset subclasses; what a dataset's "
                              "constructor computes may be dumped as model calls");
        wrap_dataset_tree(ds, 0);
    }
    Py_XDECREF(cm);
    Py_XDECREF(fn);
    Py_XDECREF(dict);
    Py_XDECREF(ds);
    PyErr_Clear();
}

void msp_patch_dataloader(void)
{
    PyObject *data = PyImport_ImportModule("torch.utils.data");
    if (data)
        patch_datasets(data);
    Py_XDECREF(data);
    PyErr_Clear();
    PyObject *m = PyImport_ImportModule("torch.utils.data.dataloader");
    PyObject *cls = m ? PyObject_GetAttrString(m, "_BaseDataLoaderIter") : NULL;
    PyObject *next = cls ? PyObject_GetAttrString(cls, "__next__") : NULL;
    if (next && !msp_is_wrap(next)) {
        PyObject *w = msp_wrap_new(next, "__next__", MSP_W_NORECORD, 0, 1);
        if (!w || PyObject_SetAttrString(cls, "__next__", w) < 0)
            msp_py_warn_error("dataloader", "cannot hook DataLoader iteration; what a dataset "
                              "computes in this process may be dumped as model calls");
        Py_XDECREF(w);
    } else if (!next) {
        msp_py_warn_error("dataloader", "this torch has no DataLoader iterator to hook; what "
                          "a dataset computes in this process may be dumped as model calls");
    }
    Py_XDECREF(next);
    Py_XDECREF(cls);
    Py_XDECREF(m);
    if (PyErr_Occurred())
        PyErr_Clear();
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
    case MSP_W_JIT:
        return jit_call(w, args, kw);
    case MSP_W_NORECORD:
        return norecord_call(w, args, kw);
    case MSP_W_COMPILE:
        return compile_call(w, args, kw);
    case MSP_W_EVENT: /* runtime events (py_proc.c): seeds, init_process_group */
        return msp_ev_dispatch(w->orig, w->name, args, kw);
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

static PyMemberDef wrap_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(msp_wrap_t, weaklist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

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
    w->weaklist = NULL;
    w->nsel = 0;
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
    {"torch._VF.", "VF", 0}, /* what nn.LSTM/GRU/RNN and their cells call */
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

static int patch_one(PyObject *torch, const char *full, unsigned dirs, int explicit_entry,
                     const msp_api_sel_t *sel)
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
            add_selection((msp_wrap_t *)orig, dirs, sel);
        } else {
            char name[96];
            snprintf(name, sizeof name, "%s.%s", g_spaces[s].prefix, attr);
            PyObject *w = msp_wrap_new(orig, name, MSP_W_API, 0, g_spaces[s].bind);
            if (w)
                add_selection((msp_wrap_t *)w, dirs, sel);
            if (!w || PyObject_SetAttrString(owner, attr, w) < 0) {
                msp_py_warn_error("patch", "cannot wrap an API; it is not dumped");
                rc = -1;
            } else if (strlen(attr) < sizeof g_patched[0].attr) {
                if (g_npatched == g_cap_patched) {
                    size_t cap = g_cap_patched ? 2 * g_cap_patched : 256;
                    patched_t *np = realloc(g_patched, cap * sizeof *np);
                    if (np) {
                        g_patched = np;
                        g_cap_patched = cap;
                    }
                }
                if (g_npatched < g_cap_patched) {
                    patched_t *p = &g_patched[g_npatched++];
                    Py_INCREF(owner);
                    Py_INCREF(w);
                    p->owner = owner;
                    p->wrapper = w;
                    snprintf(p->attr, sizeof p->attr, "%s", attr);
                }
            }
            Py_XDECREF(w);
        }
        Py_XDECREF(orig);
        Py_DECREF(owner);
        return rc;
    }
    return 0;
}


/* Replaces mod.name by a wrapper of the given kind, once; a missing
 * attribute (torch.compile before 2.0) or a failure leaves it as it is. */
static void wrap_attr(PyObject *mod, const char *name, int kind)
{
    PyObject *f = PyObject_GetAttrString(mod, name);
    if (f && !msp_is_wrap(f)) {
        PyObject *w = msp_wrap_new(f, name, kind, 0, 0);
        if (!w || PyObject_SetAttrString(mod, name, w) < 0)
            PyErr_Clear();
        Py_XDECREF(w);
    }
    Py_XDECREF(f);
    PyErr_Clear();
}

/* Where an api_list entry was written, for messages: its config key and
 * text ("statistics.list[0] \"Functional.conv2e.0.forward\""). */
static const char *entry_key(const msp_api_sel_t *e, char *buf, size_t size)
{
    if (e->key)
        return e->key;
    snprintf(buf, size, "\"%s\"", e->name);
    return buf;
}

/* A name this torch does not have, said when torch is patched (before any
 * training), naming the key the user wrote it under; the exit report then
 * leaves it out. Spawned children that may yet become ranks say it at exit. */
static void warn_unknown_now(const msp_config_t *c)
{
    if (!g_estate || msp_g.disabled || getpid() != msp_g.pid || msp_g.mp_child)
        return;
    for (size_t i = 0; i < c->n_api_list; i++) {
        if (g_estate[i] != E_UNKNOWN)
            continue;
        char kb[300];
        const char *near = msp_api_near(c->api_list[i].name);
        msp_shim_msg("warning: %s: %s: not an API of this torch%s%s%s; nothing is dumped for "
                     "it", c->source ? c->source : "config", entry_key(&c->api_list[i], kb, sizeof kb),
                     near ? " (did you mean \"" : " that msprobe dumps (see msprobe dump "
                                                  "--list-apis)",
                     near ? near : "", near ? "\"?)" : "");
        g_estate[i] = E_UNKNOWN_SAID;
    }
}

int msp_patch_torch(PyObject *torch)
{
    g_grad_enabled = PyObject_GetAttrString(torch, "is_grad_enabled");
    if (!g_grad_enabled)
        return -1;
    PyErr_Clear();
    msp_api_discover(torch);
    const msp_config_t *c = &msp_g.cfg;
    int explicit_api = 0;
    for (size_t i = 0; i < c->n_api_list; i++)
        if (strncmp(c->api_list[i].name, "torch.", 6) == 0) {
            explicit_api = 1;
            /* Checked here, not at parse time: the list is this torch's own. */
            if (!msp_api_known(c->api_list[i].name)) {
                if (g_estate)
                    g_estate[i] = E_UNKNOWN;
                continue;
            }
            patch_one(torch, c->api_list[i].name, c->api_list[i].dirs, 1, &c->api_list[i]);
        }
    warn_unknown_now(c);
    size_t nl;
    const char *const *l = active_list(&nl);
    if (!explicit_api && c->n_api_list == 0)
        for (size_t i = 0; i < nl; i++)
            patch_one(torch, l[i], MSP_DIR_FORWARD | MSP_DIR_BACKWARD, 0, NULL);
    /* mix mode, a module in the list: the APIs called inside it are dumped
     * too (msprobe's level mix), so every API is wrapped, selected by none */
    int lists_module = 0;
    for (size_t i = 0; i < c->n_api_list; i++)
        lists_module |= strncmp(c->api_list[i].name, "torch.", 6) != 0;
    if (c->n_api_list && lists_module && c->dump_mode == MSP_DUMP_MIX)
        for (size_t i = 0; i < nl; i++)
            patch_one(torch, l[i], 0, 0, NULL);
    if (g_npatched > 0) {
        PyObject *jit = PyImport_ImportModule("torch.jit");
        if (jit)
            wrap_attr(jit, "script", MSP_W_JIT);
        Py_XDECREF(jit);
        PyErr_Clear();
    }
    wrap_attr(torch, "compile", MSP_W_COMPILE); /* torch >= 2.0 */
    return 0;
}

/* ---- the list this torch offers (msprobe dump --list-apis) ---------------- */

static const char *space_prefix(const char *full, const char **attr)
{
    for (size_t s = 0; s < sizeof g_spaces / sizeof g_spaces[0]; s++) {
        size_t pl = strlen(g_spaces[s].path);
        if (strncmp(full, g_spaces[s].path, pl) == 0 && !strchr(full + pl, '.')) {
            *attr = full + pl;
            return g_spaces[s].prefix;
        }
    }
    *attr = full;
    return "?";
}

int msp_api_write_list(PyObject *torch, const char *path)
{
    int state = msp_api_discover(torch);
    PyObject *v = PyObject_GetAttrString(torch, "__version__");
    PyObject *vs = v ? PyObject_Str(v) : NULL;
    PyObject *vb = vs ? PyUnicode_AsUTF8String(vs) : NULL;
    const char *ver = vb ? PyBytes_AsString(vb) : "?";
    size_t n;
    const char *const *l = active_list(&n);
    FILE *f = fopen(path, "w");
    int rc = -1;
    if (f) {
        if (state == 1)
            fprintf(f, "# torch %s: %zu APIs, discovered at run time in %.1f ms\n", ver, n,
                    g_discover_ms);
        else
            fprintf(f, "# torch %s: %zu APIs from the built-in list of torch 1.13 (%s)\n", ver,
                    n, msp_env_flag("MSPROBE_API_TABLE") ? "MSPROBE_API_TABLE is set"
                                                         : "discovery failed");
        fprintf(f, "# NAME\tRECORD (dump record prefix, before .N.forward)\n");
        for (size_t i = 0; i < n; i++) {
            const char *attr;
            const char *pre = space_prefix(l[i], &attr);
            fprintf(f, "%s\t%s.%s\n", l[i], pre, attr);
        }
        rc = fclose(f) == 0 ? 0 : -1;
    }
    Py_XDECREF(vb);
    Py_XDECREF(vs);
    Py_XDECREF(v);
    PyErr_Clear();
    return rc;
}

/* ---- any callable by name ------------------------------------------------- *
 *
 * An api_list entry outside torch whose every part is a Python identifier
 * ("torch_npu.npu_rms_norm", "mypkg.ops.fused_gelu", "pkg.Class.method") may
 * name a callable: the longest prefix found in sys.modules is its module, the
 * rest a chain of attributes. It is wrapped, as "Custom.<entry>", as soon as
 * an import statement returns with that module completely imported, so the
 * wrapper is what `import mod; mod.fn(...)` and every `from mod import fn`
 * executed afterwards get. A reference taken before (inside the module
 * itself, or by a package that the module imports first) keeps the original.
 * The same entry may also be a module path (py_module.c): only an entry that
 * is neither is reported at exit. */

static int ident_path(const char *n)
{
    int parts = 0;
    for (const char *p = n; *p;) {
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_'))
            return 0;
        while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
               *p == '_')
            p++;
        parts++;
        if (*p == '.')
            p++;
        else if (*p)
            return 0;
    }
    return parts >= 2;
}

void msp_custom_setup(void)
{
    const msp_config_t *c = &msp_g.cfg;
    if (c->n_api_list == 0 || !(g_estate = calloc(c->n_api_list, 1)))
        return;
    for (size_t i = 0; i < c->n_api_list; i++)
        if (strncmp(c->api_list[i].name, "torch.", 6) != 0 && ident_path(c->api_list[i].name)) {
            g_estate[i] = E_PENDING;
            g_npending++;
        }
}

/* Still running its body (importlib marks the spec while it does). */
static int module_initializing(PyObject *m)
{
    PyObject *spec = PyObject_GetAttrString(m, "__spec__");
    int init = 0;
    if (spec && spec != Py_None) {
        PyObject *f = PyObject_GetAttrString(spec, "_initializing");
        init = f && PyObject_IsTrue(f) == 1;
        Py_XDECREF(f);
    }
    Py_XDECREF(spec);
    PyErr_Clear();
    return init;
}

static PyObject *g_function_type; /* types.FunctionType: a plain method in a class dict */

/* A class attribute can be wrapped when it is a plain function (it binds like
 * one); static and class methods and builtins are left alone. */
static int class_attr_is_function(PyObject *owner, const char *attr)
{
    if (!g_function_type) {
        PyObject *types = PyImport_ImportModule("types");
        g_function_type = types ? PyObject_GetAttrString(types, "FunctionType") : NULL;
        Py_XDECREF(types);
    }
    PyObject *d = PyObject_GetAttrString(owner, "__dict__");
    PyObject *raw = d ? PyMapping_GetItemString(d, attr) : NULL;
    int yes = raw && g_function_type && (PyObject *)Py_TYPE(raw) == g_function_type;
    Py_XDECREF(raw);
    Py_XDECREF(d);
    PyErr_Clear();
    return yes;
}

static void resolve_one(size_t i, PyObject *mods)
{
    const msp_api_sel_t *e = &msp_g.cfg.api_list[i];
    char buf[256], attr[128];
    if (snprintf(buf, sizeof buf, "%s", e->name) >= (int)sizeof buf) {
        g_estate[i] = E_BAD;
        g_npending--;
        return;
    }
    PyObject *m = NULL;
    size_t cut = 0;
    for (size_t k = strlen(buf); k > 0 && !m; k--)
        if (buf[k - 1] == '.') {
            buf[k - 1] = '\0';
            m = PyDict_GetItemString(mods, buf); /* borrowed */
            cut = k;
        }
    if (!m || module_initializing(m))
        return;
    PyObject *owner = m, *obj = NULL;
    Py_INCREF(owner);
    for (const char *p = e->name + cut;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        if (len >= sizeof attr) {
            Py_DECREF(owner);
            return;
        }
        memcpy(attr, p, len);
        attr[len] = '\0';
        obj = PyObject_GetAttrString(owner, attr);
        if (!obj) { /* not there yet: a submodule still to be imported */
            PyErr_Clear();
            Py_DECREF(owner);
            return;
        }
        if (!dot)
            break;
        Py_DECREF(owner);
        owner = obj;
        p = dot + 1;
    }
    g_npending--;
    g_estate[i] = E_BAD;
    int is_class = PyType_Check(owner);
    if (msp_is_wrap(obj)) { /* listed twice, or one function under two names */
        add_selection((msp_wrap_t *)obj, e->dirs, e);
        g_estate[i] = E_WRAPPED;
    } else if (PyCallable_Check(obj) && !PyType_Check(obj) &&
               (!is_class || class_attr_is_function(owner, attr))) {
        char name[160];
        /* torch_npu's functions keep msprobe's record names: NPU.npu_rms_norm */
        if (strncmp(e->name, "torch_npu.", 10) == 0)
            snprintf(name, sizeof name, "NPU.%s", e->name + 10);
        else
            snprintf(name, sizeof name, "Custom.%s", e->name);
        PyObject *w = msp_wrap_new(obj, name, MSP_W_API, 0, is_class);
        if (w)
            add_selection((msp_wrap_t *)w, e->dirs, e);
        if (w && PyObject_SetAttrString(owner, attr, w) == 0)
            g_estate[i] = E_WRAPPED;
        Py_XDECREF(w);
    }
    Py_DECREF(obj);
    Py_DECREF(owner);
    PyErr_Clear();
}

void msp_custom_resolve(void)
{
    static int busy; /* a lazy module's __getattr__ may import: no re-entry */
    if (busy || !g_estate || g_npending == 0)
        return;
    busy = 1;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyObject *mods = PySys_GetObject("modules"); /* borrowed */
    if (mods && PyDict_Check(mods)) {
        if (!g_grad_enabled) { /* module mode: msp_patch_torch did not run */
            PyObject *torch = PyDict_GetItemString(mods, "torch");
            g_grad_enabled = torch ? PyObject_GetAttrString(torch, "is_grad_enabled") : NULL;
            PyErr_Clear();
        }
        for (size_t i = 0; i < msp_g.cfg.n_api_list && g_npending > 0; i++)
            if (g_estate[i] == E_PENDING)
                resolve_one(i, mods);
    }
    PyErr_Clear();
    PyErr_Restore(t, v, tb);
    busy = 0;
}

int msp_custom_pending(void)
{
    return g_npending > 0;
}

void msp_api_exit_report(void)
{
    static int done;
    if (done || !g_estate || !msp_proc_may_write())
        return;
    done = 1;
    msp_custom_resolve(); /* imported by importlib.import_module since the last import */
    const msp_config_t *c = &msp_g.cfg;
    char item[640], kb[300];
    msp_buf_t m = {0}; /* `"name" (why)` items, "; "-separated */
    for (size_t i = 0; i < c->n_api_list; i++) {
        const char *n = c->api_list[i].name, *k = entry_key(&c->api_list[i], kb, sizeof kb);
        item[0] = '\0';
        if (g_estate[i] == E_UNKNOWN) {
            const char *near = msp_api_near(n);
            if (near)
                snprintf(item, sizeof item, "%s (not an API of this torch; did you mean "
                         "\"%s\"?)", k, near);
            else
                snprintf(item, sizeof item, "%s (not an API of this torch that msprobe "
                         "dumps: see msprobe dump --list-apis)", k);
        } else if (g_estate[i] == E_PENDING && !msp_module_entry_matched(i)) {
            snprintf(item, sizeof item, "%s (no module of the model has that path, and no "
                     "imported module has that callable)", k);
        } else if (g_estate[i] == E_BAD && !msp_module_entry_matched(i)) {
            snprintf(item, sizeof item, "%s (found, but not a function or method msprobe "
                     "can wrap)", k);
        } else if (g_estate[i] == E_NONE && strncmp(n, "torch.", 6) != 0 &&
                   !msp_module_entry_matched(i)) {
            if (strncmp(n, "Aten.", 5) == 0)
                snprintf(item, sizeof item, "%s (msprobe's aten-level record: torch.ops.aten "
                         "is not wrapped here; the Torch. or Tensor. API that called it is)", k);
            else
                snprintf(item, sizeof item, "%s (no module of the model has that path)", k);
        }
        if (item[0])
            msp_buf_printf(&m, "%s%s", m.len ? "; " : "", item);
    }
    if (m.data)
        msp_shim_msg("warning: %s names what this run never dumped: %s",
                     c->source ? c->source : "the config", m.data);
    msp_buf_free(&m);
}
