/* An API's signature for the dump's /defaults (msprobe-dump(5), THE DEFAULTS
 * TABLE): its positional parameters in order and the repr of each default,
 * so that compare can tell F.gelu(h) from F.gelu(h, approximate='none') as
 * the same call. Made once per wrapped API, at its first recorded call, and
 * cached on the wrapper; records point at it and the writer thread puts its
 * rows into each file once. From inspect.signature where that works (Python
 * functions such as F.layer_norm), else from torch's table of stand-in
 * lambdas (torch.overrides.get_testing_overrides(), built once per process
 * and only when a builtin such as F.gelu or a Tensor method needs it),
 * checked against the schemas of the ATen op of that name: a stand-in shows
 * one overload of several (torch.max's is (input, out=None), so
 * torch.max(x, 1) would name its 1 "out"), and often without its defaults
 * (torch.add's alpha=1). */
#include "py_wrap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* torch.overrides.get_testing_overrides(): {torch callable: lambda with its
 * signature}; built at first need (about 20 ms), kept for the process. */
static PyObject *g_overrides;
static int g_overrides_tried;

static PyObject *overrides(void)
{
    if (g_overrides_tried)
        return g_overrides;
    g_overrides_tried = 1;
    PyObject *mod = PyImport_ImportModule("torch.overrides");
    PyObject *d = mod ? PyObject_CallMethod(mod, "get_testing_overrides", NULL) : NULL;
    Py_XDECREF(mod);
    if (d && PyDict_Check(d))
        g_overrides = d;
    else
        Py_XDECREF(d);
    PyErr_Clear();
    return g_overrides;
}

/* The parameters of inspect.signature(fn) as a list, or NULL (cleared) when
 * there is none or it names nothing (boolean_dispatch's (*args, **kwargs)). */
static PyObject *params_of(PyObject *inspect, PyObject *fn)
{
    PyObject *sig = PyObject_CallMethod(inspect, "signature", "O", fn);
    PyObject *ps = sig ? PyObject_GetAttrString(sig, "parameters") : NULL;
    PyObject *vals = ps ? PyObject_CallMethod(ps, "values", NULL) : NULL;
    PyObject *list = vals ? PySequence_List(vals) : NULL;
    Py_XDECREF(vals);
    Py_XDECREF(ps);
    Py_XDECREF(sig);
    int named = 0;
    for (Py_ssize_t i = 0; list && i < PyList_Size(list) && !named; i++) {
        PyObject *kind = PyObject_GetAttrString(PyList_GetItem(list, i), "kind");
        long k = kind ? PyLong_AsLong(kind) : -1;
        Py_XDECREF(kind);
        named = k == 0 || k == 1 || k == 3; /* not *args, not **kwargs */
    }
    if (!named) {
        Py_XDECREF(list);
        list = NULL;
    }
    PyErr_Clear();
    return list;
}

/* aten_fix(attr, params): what the ATen op attr's overloads say of a stand-in's
 * parameters (inspect.Parameter objects), or None when there is no such op:
 * (names, defaults). names[K] is the K-th positional parameter's name (None:
 * not named): the stand-in's where some overload has that name there, else
 * the one name every overload that takes a non-tensor there gives it (a
 * tensor stays input.K). defaults: the default every overload that has the
 * parameter gives it, for each non-tensor parameter that has one. */
static const char g_aten_py[] =
    "import inspect, torch\n"
    "P = inspect.Parameter\n"
    "MISSING = object()\n"
    "def same(a, b):\n"
    "    return type(a) is type(b) and (a == b or a != a and b != b)\n"
    "def aten_fix(attr, params):\n"
    "    try:\n"
    "        pk = getattr(torch.ops.aten, attr)\n"
    "        schemas = [getattr(pk, o)._schema for o in pk.overloads()]\n"
    "    except Exception:\n"
    "        return None\n"
    "    if not schemas:\n"
    "        return None\n"
    "    names = []\n"
    "    for p in params:\n"
    "        if p.kind == P.VAR_POSITIONAL:\n"
    "            break\n"
    "        if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD):\n"
    "            names.append(p.name)\n"
    "    pos = [[a for a in s.arguments if not a.kwarg_only] for s in schemas]\n"
    "    for k in range(1, max(len(q) for q in pos)):\n"
    "        here = {q[k].name for q in pos if len(q) > k}\n"
    "        cands = {q[k].name for q in pos if len(q) > k and 'Tensor' not in str(q[k].type)}\n"
    "        cur = names[k] if k < len(names) else None\n"
    "        if cur in here:\n"
    "            continue\n"
    "        names += [None] * (k + 1 - len(names))\n"
    "        names[k] = cands.pop() if len(cands) == 1 else None\n"
    "    seen = {}\n"
    "    for s in schemas:\n"
    "        for a in s.arguments:\n"
    "            if 'Tensor' in str(a.type) or a.name in ('self', 'out'):\n"
    "                continue\n"
    "            seen.setdefault(a.name, []).append(a.default_value if a.has_default_value() "
    "else MISSING)\n"
    "    defaults = {n: v[0] for n, v in seen.items()\n"
    "                if v[0] is not MISSING and all(same(x, v[0]) for x in v)}\n"
    "    return names, defaults\n";

static int sig_add(msp_dq_sig_t *s, size_t *cap, const char *k, const char *v)
{
    if (s->n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        char **ks = realloc(s->keys, c * sizeof *ks);
        if (ks)
            s->keys = ks;
        char **vs = ks ? realloc(s->values, c * sizeof *vs) : NULL;
        if (!vs)
            return -1;
        s->values = vs;
        *cap = c;
    }
    char *kk = strdup(k), *vv = strdup(v);
    if (!kk || !vv) {
        free(kk);
        free(vv);
        return -1;
    }
    s->keys[s->n] = kk;
    s->values[s->n++] = vv;
    return 0;
}

/* The text the shim records a value as (py_tensor.c), for a default. */
static void default_text(PyObject *dflt, char *text, size_t n)
{
    if (dflt == Py_None)
        snprintf(text, n, "None");
    else
        msp_obj_text(dflt, 1, text, n);
}

/* Rows of params (inspect.Parameter objects): "#K" -> the name of the K-th
 * parameter a call may pass by position (up to a *args), and NAME -> the
 * repr of NAME's default, the text the shim records an argument as
 * (py_tensor.c). -1 on out of memory. */
static int sig_fill(msp_dq_sig_t *s, PyObject *params, PyObject *empty)
{
    size_t cap = 0;
    int positional = 1, k = 0, rc = 0;
    for (Py_ssize_t i = 0; i < PyList_Size(params) && !rc; i++) {
        PyObject *p = PyList_GetItem(params, i);
        PyObject *name = PyObject_GetAttrString(p, "name");
        PyObject *kind = PyObject_GetAttrString(p, "kind");
        PyObject *dflt = PyObject_GetAttrString(p, "default");
        long kd = kind ? PyLong_AsLong(kind) : -1;
        char nm[96], key[32], text[1024];
        if (name && dflt && kd >= 0) {
            msp_obj_text(name, 0, nm, sizeof nm);
            if (kd == 2) /* *args: what follows is keyword-only */
                positional = 0;
            if ((kd == 0 || kd == 1) && positional) {
                snprintf(key, sizeof key, "#%d", k++);
                rc = sig_add(s, &cap, key, nm);
            }
            if (!rc && (kd == 0 || kd == 1 || kd == 3) && dflt != empty) {
                default_text(dflt, text, sizeof text);
                rc = sig_add(s, &cap, nm, text);
            }
        }
        Py_XDECREF(name);
        Py_XDECREF(kind);
        Py_XDECREF(dflt);
        PyErr_Clear();
    }
    return rc;
}

/* The rows of a stand-in's params as its ATen op's schemas correct them
 * (g_aten_py), into s; 1 done, 0 when there is no such op (s untouched),
 * -1 on out of memory. */
static int sig_fill_aten(msp_dq_sig_t *s, msp_wrap_t *w, PyObject *params, PyObject *empty)
{
    static PyObject *fn; /* the helper, made once */
    static int failed;
    if (!fn && !failed) {
        PyObject *ns = msp_py_run_source(g_aten_py, "msprobe_aten_sig");
        fn = ns ? PyDict_GetItemString(ns, "aten_fix") : NULL;
        Py_XINCREF(fn);
        Py_XDECREF(ns);
        failed = !fn;
        PyErr_Clear();
    }
    const char *dot = strrchr(w->name, '.');
    PyObject *r = fn && dot ? PyObject_CallFunction(fn, "sO", dot + 1, params) : NULL;
    PyObject *names = r && PyTuple_Check(r) && PyTuple_Size(r) == 2 ? PyTuple_GetItem(r, 0) : NULL;
    PyObject *dflts = names ? PyTuple_GetItem(r, 1) : NULL;
    if (!names || !PyList_Check(names) || !dflts || !PyDict_Check(dflts)) {
        Py_XDECREF(r);
        PyErr_Clear();
        return 0;
    }
    size_t cap = 0;
    int rc = 0;
    char nm[96], key[32], text[1024];
    for (Py_ssize_t k = 0; k < PyList_Size(names) && !rc; k++) {
        PyObject *name = PyList_GetItem(names, k);
        if (name == Py_None)
            continue;
        msp_obj_text(name, 0, nm, sizeof nm);
        snprintf(key, sizeof key, "#%zd", k);
        rc = sig_add(s, &cap, key, nm);
    }
    /* the stand-in's defaults, where its op's overloads do not all agree */
    for (Py_ssize_t i = 0; i < PyList_Size(params) && !rc; i++) {
        PyObject *p = PyList_GetItem(params, i);
        PyObject *name = PyObject_GetAttrString(p, "name");
        PyObject *dflt = PyObject_GetAttrString(p, "default");
        if (name && dflt && dflt != empty && !PyDict_GetItem(dflts, name)) {
            msp_obj_text(name, 0, nm, sizeof nm);
            default_text(dflt, text, sizeof text);
            rc = sig_add(s, &cap, nm, text);
        }
        Py_XDECREF(name);
        Py_XDECREF(dflt);
    }
    PyObject *k, *v;
    Py_ssize_t at = 0;
    while (!rc && PyDict_Next(dflts, &at, &k, &v)) {
        msp_obj_text(k, 0, nm, sizeof nm);
        default_text(v, text, sizeof text);
        rc = sig_add(s, &cap, nm, text);
    }
    Py_DECREF(r);
    PyErr_Clear();
    return rc ? -1 : 1;
}

static msp_dq_sig_t *sig_make(msp_wrap_t *w)
{
    PyObject *inspect = PyImport_ImportModule("inspect");
    PyObject *param = inspect ? PyObject_GetAttrString(inspect, "Parameter") : NULL;
    PyObject *empty = param ? PyObject_GetAttrString(param, "empty") : NULL;
    PyObject *params = empty ? params_of(inspect, w->orig) : NULL;
    int stand_in_used = 0;
    if (empty && !params) {
        PyObject *d = overrides();
        PyObject *stand_in = d ? PyDict_GetItem(d, w->orig) : NULL; /* borrowed */
        /* torch built the table from its attributes: our wrappers, once patched */
        if (d && !stand_in)
            stand_in = PyDict_GetItem(d, (PyObject *)w);
        if (stand_in)
            params = params_of(inspect, stand_in);
        stand_in_used = params != NULL;
    }
    msp_dq_sig_t *s = params ? calloc(1, sizeof *s) : NULL;
    int filled = s && stand_in_used ? sig_fill_aten(s, w, params, empty) : 0;
    if (s && (filled < 0 || !(s->api = strdup(w->name)) ||
              (!filled && sig_fill(s, params, empty) != 0) || !s->n)) {
        for (size_t i = 0; i < s->n; i++) {
            free(s->keys[i]);
            free(s->values[i]);
        }
        free(s->keys);
        free(s->values);
        free(s->api);
        free(s);
        s = NULL;
    }
    Py_XDECREF(params);
    Py_XDECREF(empty);
    Py_XDECREF(param);
    Py_XDECREF(inspect);
    PyErr_Clear();
    return s;
}

msp_dq_sig_t *msp_api_sig(msp_wrap_t *w)
{
    /* Python code runs below and may let another thread in: that thread's
     * first call of the same API goes without (sig_state already 1). */
    if (w->sig_state)
        return w->sig;
    w->sig_state = 1;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    w->sig = sig_make(w);
    PyErr_Restore(et, ev, tb);
    return w->sig;
}
