/* In-process collection for config_check, driven by the dump shim's Python
 * side (msp_cc_py_boot / after_import / step_end, GIL held).
 *
 * Rules: never raise into training code, never change what it computes.
 * Seed functions and Optimizer.__init__ are replaced by a wrapper object that
 * calls the original with the same arguments and returns its result; weights
 * and inputs are read at root-module forwards through torch's global forward
 * pre-hook; the pack is written by an atexit handler and optionally when a
 * configured step ends. */
#include "cc_py.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

enum { MSP_CC_WRAP_SEED = 0, MSP_CC_WRAP_OPTIM_INIT = 1 };

typedef struct msp_cc_wrap {
    PyObject_HEAD
    PyObject *orig;
    int kind;
    const char *api;
} msp_cc_wrap_t;

static struct {
    int booted, enabled;
    char *zip_path;
    int64_t write_at_step, dataset_batches;
    pid_t pid;
    int busy;              /* our own Python calls must not re-enter collection */
    int seed_depth;        /* seed calls made by seed functions are not the user's */
    int64_t fwd_depth, batches_done;
    int done_random, done_numpy, done_torch;
    PyTypeObject *wrap_type;
    PyObject *roots;       /* id(root module) -> name */
    PyObject *tensor_type; /* torch.Tensor */
    PyObject *torch;
    cJSON *calls, *weights, *dataset, *optimizers, *root_counts;
    cJSON *pip;            /* cached after the first write: sys.path scans are slow */
    int warned;
} msp_cc;

/* The shim's voice: one "msprobe:" line per write(2), on stderr or appended
 * to MSPROBE_LOG_FILE. A few warnings are enough to say collection is degraded. */
static void msp_cc_warn(const char *what)
{
    if (msp_cc.warned++ >= 3)
        return;
    msp_log(MSP_LOG_WARN, "config_check: %s", what);
    char line[1024];
    int n = snprintf(line, sizeof line, "msprobe: warning: config_check: %s\n", what);
    if (n <= 0)
        return;
    size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    const char *lf = getenv("MSPROBE_LOG_FILE");
    int fd = lf && *lf ? open(lf, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : STDERR_FILENO;
    if (fd < 0)
        fd = STDERR_FILENO;
    ssize_t w = write(fd, line, len);
    (void)w;
    if (fd != STDERR_FILENO)
        close(fd);
}

/* ---- wrapper type ------------------------------------------------------- */

static void msp_cc_record_seed(const char *api, PyObject *args, PyObject *kwargs)
{
    PyObject *value = NULL, *frame = NULL, *code = NULL, *fname = NULL, *lineno = NULL;
    if (PyTuple_Size(args) > 0) {
        value = PyTuple_GetItem(args, 0);
    } else if (kwargs && PyDict_Size(kwargs) > 0) {
        value = PyDict_GetItemString(kwargs, "seed");
        if (!value)
            value = PyDict_GetItemString(kwargs, "a");
    }
    cJSON *e = cJSON_CreateObject();
    if (!e)
        return;
    cJSON_AddStringToObject(e, "api", api);
    if (!value || value == Py_None) {
        cJSON_AddNullToObject(e, "value"); /* seeded from system entropy */
    } else {
        /* str() so numpy integers print like ints ("3", not "np.int64(3)");
         * repr() for strings and bytes, where quotes tell types apart. */
        int quoted = PyUnicode_Check(value) || PyBytes_Check(value);
        char *t = msp_cc_py_text(value, quoted);
        if (t && strlen(t) > 256)
            t[256] = '\0';
        cJSON_AddStringToObject(e, "value", t ? t : "?");
        free(t);
    }
    /* A C call has no frame of its own: frame 0 is the caller's. */
    PyObject *getframe = PySys_GetObject("_getframe");
    char *file = NULL;
    long line = 0;
    if (getframe && (frame = PyObject_CallFunction(getframe, "i", 0)) &&
        (code = PyObject_GetAttrString(frame, "f_code")) && (fname = PyObject_GetAttrString(code, "co_filename")) &&
        (lineno = PyObject_GetAttrString(frame, "f_lineno"))) {
        file = msp_cc_py_text(fname, 0);
        line = PyLong_AsLong(lineno);
    }
    PyErr_Clear();
    cJSON_AddStringToObject(e, "file", file ? file : "?");
    cJSON_AddNumberToObject(e, "line", (double)line);
    cJSON_AddNumberToObject(e, "order", cJSON_GetArraySize(msp_cc.calls));
    cJSON_AddItemToArray(msp_cc.calls, e);
    free(file);
    Py_XDECREF(frame);
    Py_XDECREF(code);
    Py_XDECREF(fname);
    Py_XDECREF(lineno);
}

static void msp_cc_record_optimizer(PyObject *opt)
{
    PyObject *cls = PyObject_GetAttrString(opt, "__class__");
    PyObject *mod = cls ? PyObject_GetAttrString(cls, "__module__") : NULL;
    PyObject *qn = cls ? PyObject_GetAttrString(cls, "__qualname__") : NULL;
    PyObject *groups = PyObject_GetAttrString(opt, "param_groups");
    char *m = msp_cc_py_text(mod, 0), *q = msp_cc_py_text(qn, 0);
    cJSON *o = cJSON_CreateObject(), *gs = cJSON_CreateArray();
    if (o && gs) {
        char *full = msp_asprintf("%s.%s", m ? m : "?", q ? q : "?");
        cJSON_AddStringToObject(o, "class", full ? full : "?");
        free(full);
        Py_ssize_t n = groups ? PySequence_Size(groups) : 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *g = PySequence_GetItem(groups, i);
            PyObject *items = g && PyDict_Check(g) ? PyDict_Items(g) : NULL;
            cJSON *go = cJSON_CreateObject();
            Py_ssize_t k = items ? PyList_Size(items) : 0;
            for (Py_ssize_t j = 0; go && j < k; j++) {
                PyObject *kv = PyList_GetItem(items, j);
                char *key = msp_cc_py_text(PyTuple_GetItem(kv, 0), 0);
                if (key && strcmp(key, "params") == 0) {
                    /* Not the parameters themselves: only how many. */
                    Py_ssize_t np = PySequence_Size(PyTuple_GetItem(kv, 1));
                    cJSON_AddNumberToObject(go, "num_params", (double)np);
                } else if (key) {
                    cJSON_AddItemToObject(go, key, msp_cc_py_to_json(PyTuple_GetItem(kv, 1), 0));
                }
                free(key);
            }
            if (go)
                cJSON_AddItemToArray(gs, go);
            Py_XDECREF(items);
            Py_XDECREF(g);
            PyErr_Clear();
        }
        cJSON_AddItemToObject(o, "param_groups", gs);
        gs = NULL;
        cJSON_AddItemToArray(msp_cc.optimizers, o);
        o = NULL;
    }
    PyErr_Clear();
    cJSON_Delete(o);
    cJSON_Delete(gs);
    free(m);
    free(q);
    Py_XDECREF(cls);
    Py_XDECREF(mod);
    Py_XDECREF(qn);
    Py_XDECREF(groups);
}

static PyObject *msp_cc_wrap_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    msp_cc_wrap_t *w = (msp_cc_wrap_t *)self;
    if (w->kind == MSP_CC_WRAP_SEED)
        msp_cc.seed_depth++;
    PyObject *res = PyObject_Call(w->orig, args, kwargs);
    if (w->kind == MSP_CC_WRAP_SEED)
        msp_cc.seed_depth--;
    if (!res || !msp_cc.enabled || msp_cc.busy || getpid() != msp_cc.pid)
        return res;
    if (w->kind == MSP_CC_WRAP_SEED && msp_cc.seed_depth > 0)
        return res;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    msp_cc.busy = 1;
    if (w->kind == MSP_CC_WRAP_SEED)
        msp_cc_record_seed(w->api, args, kwargs);
    else if (PyTuple_Size(args) > 0)
        msp_cc_record_optimizer(PyTuple_GetItem(args, 0));
    msp_cc.busy = 0;
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    return res;
}

/* Bound through a class (Optimizer.__init__): behave like a function would. */
static PyObject *msp_cc_wrap_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (!obj || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    PyObject *functools = PyImport_ImportModule("functools");
    PyObject *partial = functools ? PyObject_GetAttrString(functools, "partial") : NULL;
    PyObject *bound = partial ? PyObject_CallFunctionObjArgs(partial, self, obj, NULL) : NULL;
    Py_XDECREF(functools);
    Py_XDECREF(partial);
    return bound;
}

/* __name__, __doc__, __module__ ... of the original, so introspection sees it. */
static PyObject *msp_cc_wrap_getattro(PyObject *self, PyObject *name)
{
    PyObject *r = PyObject_GetAttr(((msp_cc_wrap_t *)self)->orig, name);
    if (r)
        return r;
    PyErr_Clear();
    return PyObject_GenericGetAttr(self, name);
}

static void msp_cc_wrap_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    Py_XDECREF(((msp_cc_wrap_t *)self)->orig);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static PyType_Slot msp_cc_wrap_slots[] = {
    {Py_tp_call, (void *)msp_cc_wrap_call},
    {Py_tp_descr_get, (void *)msp_cc_wrap_get},
    {Py_tp_getattro, (void *)msp_cc_wrap_getattro},
    {Py_tp_dealloc, (void *)msp_cc_wrap_dealloc},
    {0, NULL},
};

static PyType_Spec msp_cc_wrap_spec = {
    "msprobe.config_check_wrapper", sizeof(msp_cc_wrap_t), 0, Py_TPFLAGS_DEFAULT, msp_cc_wrap_slots,
};

/* Replace owner.attr by a wrapper (once; a wrapper is never wrapped again).
 * Returns the wrapper installed or found (borrowed), or NULL. */
static PyObject *msp_cc_patch(PyObject *owner, const char *attr, const char *api, int kind, PyObject *reuse)
{
    PyObject *orig = PyObject_GetAttrString(owner, attr);
    PyObject *w = NULL;
    if (!orig) {
        PyErr_Clear();
        return NULL;
    }
    if (PyObject_TypeCheck(orig, msp_cc.wrap_type)) {
        Py_DECREF(orig); /* owner keeps it alive */
        return orig;
    }
    if (reuse && ((msp_cc_wrap_t *)reuse)->orig == orig) {
        w = reuse;
        Py_INCREF(w);
    } else {
        msp_cc_wrap_t *nw = PyObject_New(msp_cc_wrap_t, msp_cc.wrap_type);
        if (!nw) {
            Py_DECREF(orig);
            PyErr_Clear();
            return NULL;
        }
        nw->orig = orig;
        Py_INCREF(orig);
        nw->kind = kind;
        nw->api = api;
        w = (PyObject *)nw;
    }
    Py_DECREF(orig);
    if (PyObject_SetAttrString(owner, attr, w) != 0) {
        PyErr_Clear();
        Py_DECREF(w);
        msp_cc_warn("cannot wrap a seed function or Optimizer.__init__; that item will be incomplete");
        return NULL;
    }
    Py_DECREF(w); /* the owner holds it now */
    return w;
}

/* ---- module forward hooks ----------------------------------------------- */

/* Distinct root modules remembered; bounds memory when a script builds
 * modules on the fly. */
#define MSP_CC_MAX_ROOTS 1024

static int msp_cc_has_parameters(PyObject *module)
{
    PyObject *it = PyObject_CallMethod(module, "parameters", NULL);
    PyObject *iter = it ? PyObject_GetIter(it) : NULL;
    PyObject *first = iter ? PyIter_Next(iter) : NULL;
    int has = first != NULL;
    Py_XDECREF(first);
    Py_XDECREF(iter);
    Py_XDECREF(it);
    PyErr_Clear();
    return has;
}

static void msp_cc_record_root(PyObject *module, PyObject *input)
{
    PyObject *key = PyLong_FromVoidPtr(module);
    if (!key)
        return;
    PyObject *nameobj = PyDict_GetItem(msp_cc.roots, key);
    int have = nameobj != NULL;
    int want_data = msp_cc.batches_done < msp_cc.dataset_batches;
    /* Roots without parameters (a loss module, an activation called on its
     * own) are neither weights nor the model's input batches. */
    if ((have && !want_data) ||
        (!have && (PyDict_Size(msp_cc.roots) >= MSP_CC_MAX_ROOTS || !msp_cc_has_parameters(module)))) {
        Py_DECREF(key);
        return;
    }
    char *root = NULL;
    if (nameobj) {
        root = msp_cc_py_text(nameobj, 0);
    } else {
        PyObject *cls = PyObject_GetAttrString(module, "__class__");
        PyObject *qn = cls ? PyObject_GetAttrString(cls, "__name__") : NULL;
        char *cn = msp_cc_py_text(qn, 0);
        Py_XDECREF(cls);
        Py_XDECREF(qn);
        const char *c = cn ? cn : "Module";
        cJSON *cnt = cJSON_GetObjectItemCaseSensitive(msp_cc.root_counts, c);
        int k = cnt ? cnt->valueint : 0;
        if (cnt)
            cJSON_SetNumberValue(cnt, k + 1);
        else
            cJSON_AddNumberToObject(msp_cc.root_counts, c, 1);
        /* Two root modules of one class: the second is Class#1, and so on. */
        root = k ? msp_asprintf("%s#%d", c, k) : strdup(c);
        free(cn);
        PyObject *rn = root ? PyUnicode_FromString(root) : NULL;
        if (rn)
            PyDict_SetItem(msp_cc.roots, key, rn);
        Py_XDECREF(rn);
    }
    Py_DECREF(key);
    if (!root) {
        PyErr_Clear();
        return;
    }
    /* torch.no_grad(): nothing read here may join the autograd graph. */
    PyObject *ng = PyObject_CallMethod(msp_cc.torch, "no_grad", NULL);
    PyObject *entered = ng ? PyObject_CallMethod(ng, "__enter__", NULL) : NULL;
    Py_XDECREF(entered);
    PyErr_Clear();
    if (!have) {
        PyObject *it = PyObject_CallMethod(module, "named_parameters", NULL);
        PyObject *iter = it ? PyObject_GetIter(it) : NULL, *kv;
        while (iter && (kv = PyIter_Next(iter))) {
            char *pn = msp_cc_py_text(PyTuple_GetItem(kv, 0), 0);
            char *full = msp_asprintf("%s.%s", root, pn ? pn : "?");
            if (full)
                msp_cc_py_tensor_entry(PyTuple_GetItem(kv, 1), full, msp_cc.weights);
            free(full);
            free(pn);
            Py_DECREF(kv);
        }
        Py_XDECREF(iter);
        Py_XDECREF(it);
        PyErr_Clear();
    }
    if (want_data) {
        char *base = msp_asprintf("batch%lld.%s.input", (long long)msp_cc.batches_done, root);
        size_t budget = 4096;
        Py_ssize_t n = PyTuple_Check(input) ? PyTuple_Size(input) : -1;
        if (base && n >= 0) {
            for (Py_ssize_t i = 0; i < n; i++) {
                char *sub = msp_asprintf("%s.%zd", base, i);
                if (sub)
                    msp_cc_py_value_entries(msp_cc.tensor_type, PyTuple_GetItem(input, i), sub, msp_cc.dataset, 0,
                                            &budget);
                free(sub);
            }
        } else if (base) {
            msp_cc_py_value_entries(msp_cc.tensor_type, input, base, msp_cc.dataset, 0, &budget);
        }
        free(base);
        msp_cc.batches_done++;
    }
    if (ng) {
        PyObject *ex = PyObject_CallMethod(ng, "__exit__", "OOO", Py_None, Py_None, Py_None);
        Py_XDECREF(ex);
        Py_DECREF(ng);
    }
    PyErr_Clear();
    free(root);
}

static PyObject *msp_cc_pre_hook(PyObject *self, PyObject *args)
{
    (void)self;
    int root = msp_cc.fwd_depth == 0;
    msp_cc.fwd_depth++;
    if (root && msp_cc.enabled && !msp_cc.busy && PyTuple_Size(args) == 2 && getpid() == msp_cc.pid) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        msp_cc.busy = 1;
        msp_cc_record_root(PyTuple_GetItem(args, 0), PyTuple_GetItem(args, 1));
        msp_cc.busy = 0;
        PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
    Py_RETURN_NONE; /* None: the input is left as it was */
}

static PyObject *msp_cc_post_hook(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    if (msp_cc.fwd_depth > 0)
        msp_cc.fwd_depth--;
    Py_RETURN_NONE; /* None: the output is left as it was */
}

static PyMethodDef msp_cc_pre_def = {"msprobe_config_check_pre_hook", msp_cc_pre_hook, METH_VARARGS, NULL};
static PyMethodDef msp_cc_post_def = {"msprobe_config_check_post_hook", msp_cc_post_hook, METH_VARARGS, NULL};

static int msp_cc_register_hook(PyObject *modmod, const char *reg, PyMethodDef *def)
{
    PyObject *f = PyCFunction_NewEx(def, NULL, NULL);
    PyObject *h = f ? PyObject_CallMethod(modmod, reg, "O", f) : NULL;
    int ok = h != NULL;
    Py_XDECREF(h); /* the handle is dropped: hooks stay for the process lifetime */
    Py_XDECREF(f);
    PyErr_Clear();
    return ok;
}

/* ---- patching as modules appear ------------------------------------------ */

static void msp_cc_patch_torch(PyObject *torch)
{
    PyObject *nn = PyObject_GetAttrString(torch, "nn");
    PyObject *modules = nn ? PyObject_GetAttrString(nn, "modules") : NULL;
    PyObject *modmod = modules ? PyObject_GetAttrString(modules, "module") : NULL;
    PyObject *optim = PyObject_GetAttrString(torch, "optim");
    PyObject *optcls = optim ? PyObject_GetAttrString(optim, "Optimizer") : NULL;
    PyObject *random = PyObject_GetAttrString(torch, "random");
    PyObject *cuda = PyObject_GetAttrString(torch, "cuda");
    PyObject *cuda_random = cuda ? PyObject_GetAttrString(cuda, "random") : NULL;
    PyErr_Clear();
    if (!modmod || !optcls) {
        /* torch not fully imported yet (or not torch at all): try again later. */
        goto cleanup;
    }
    msp_cc.done_torch = 1;
    Py_INCREF(torch);
    msp_cc.torch = torch;
    msp_cc.tensor_type = PyObject_GetAttrString(torch, "Tensor");
    PyErr_Clear();
    if (msp_cc_py_tensor_init(torch) != 0)
        msp_cc_warn("cannot find torch's tensor methods; weights and dataset entries will be unavailable");
    PyObject *w = msp_cc_patch(torch, "manual_seed", "torch.manual_seed", MSP_CC_WRAP_SEED, NULL);
    if (random)
        msp_cc_patch(random, "manual_seed", "torch.manual_seed", MSP_CC_WRAP_SEED, w);
    if (cuda) {
        PyObject *a = msp_cc_patch(cuda, "manual_seed", "torch.cuda.manual_seed", MSP_CC_WRAP_SEED, NULL);
        PyObject *b = msp_cc_patch(cuda, "manual_seed_all", "torch.cuda.manual_seed_all", MSP_CC_WRAP_SEED, NULL);
        if (cuda_random) {
            msp_cc_patch(cuda_random, "manual_seed", "torch.cuda.manual_seed", MSP_CC_WRAP_SEED, a);
            msp_cc_patch(cuda_random, "manual_seed_all", "torch.cuda.manual_seed_all", MSP_CC_WRAP_SEED, b);
        }
    }
    msp_cc_patch(optcls, "__init__", "torch.optim.Optimizer.__init__", MSP_CC_WRAP_OPTIM_INIT, NULL);
    if (!msp_cc_register_hook(modmod, "register_module_forward_pre_hook", &msp_cc_pre_def) ||
        !msp_cc_register_hook(modmod, "register_module_forward_hook", &msp_cc_post_def))
        msp_cc_warn("cannot register global module forward hooks; weights and dataset will be empty");
cleanup:
    PyErr_Clear();
    Py_XDECREF(nn);
    Py_XDECREF(modules);
    Py_XDECREF(modmod);
    Py_XDECREF(optim);
    Py_XDECREF(optcls);
    Py_XDECREF(random);
    Py_XDECREF(cuda);
    Py_XDECREF(cuda_random);
}

void msp_cc_py_after_import(void)
{
    if (!msp_cc.enabled || msp_cc.busy || (msp_cc.done_random && msp_cc.done_numpy && msp_cc.done_torch))
        return;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    msp_cc.busy = 1;
    PyObject *mods = PyImport_GetModuleDict();
    PyObject *m;
    if (!msp_cc.done_random && (m = PyDict_GetItemString(mods, "random"))) {
        msp_cc.done_random = 1;
        msp_cc_patch(m, "seed", "random.seed", MSP_CC_WRAP_SEED, NULL);
    }
    if (!msp_cc.done_numpy && (m = PyDict_GetItemString(mods, "numpy.random")) &&
        PyObject_HasAttrString(m, "seed")) {
        msp_cc.done_numpy = 1;
        PyObject *w = msp_cc_patch(m, "seed", "numpy.random.seed", MSP_CC_WRAP_SEED, NULL);
        PyObject *mt = PyDict_GetItemString(mods, "numpy.random.mtrand");
        if (mt && w)
            msp_cc_patch(mt, "seed", "numpy.random.seed", MSP_CC_WRAP_SEED, w);
    }
    if (!msp_cc.done_torch && (m = PyDict_GetItemString(mods, "torch")))
        msp_cc_patch_torch(m);
    msp_cc.busy = 0;
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
}

/* ---- writing the pack --------------------------------------------------- */

static int64_t msp_cc_env_int(const char *name, int64_t dflt)
{
    const char *v = getenv(name);
    char *end = NULL;
    if (!v || !*v)
        return dflt;
    long long x = strtoll(v, &end, 10);
    return (end && *end == '\0') ? (int64_t)x : dflt;
}

/* torch.distributed.get_rank()/get_world_size() once initialised, else -1. */
static int64_t msp_cc_dist(const char *fn)
{
    PyObject *mods = PyImport_GetModuleDict();
    PyObject *dist = PyDict_GetItemString(mods, "torch.distributed");
    int64_t v = -1;
    if (dist) {
        PyObject *av = PyObject_CallMethod(dist, "is_available", NULL);
        PyObject *in = av == Py_True ? PyObject_CallMethod(dist, "is_initialized", NULL) : NULL;
        PyObject *r = in == Py_True ? PyObject_CallMethod(dist, fn, NULL) : NULL;
        if (r)
            v = PyLong_AsLongLong(r);
        Py_XDECREF(av);
        Py_XDECREF(in);
        Py_XDECREF(r);
    }
    PyErr_Clear();
    return v;
}

static cJSON *msp_cc_pip_json(void)
{
    PyObject *globals = PyDict_New(), *code = NULL, *res = NULL;
    cJSON *out = NULL;
    if (!globals)
        goto cleanup;
    PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
    code = Py_CompileString(MSP_CC_PIP_SCRIPT, "<msprobe config_check pip>", Py_file_input);
    if (code)
        res = PyEval_EvalCode(code, globals, globals);
    PyObject *text = res ? PyDict_GetItemString(globals, "result") : NULL;
    char *t = text ? msp_cc_py_text(text, 0) : NULL;
    if (t)
        out = cJSON_Parse(t);
    free(t);
cleanup:
    PyErr_Clear();
    Py_XDECREF(globals);
    Py_XDECREF(code);
    Py_XDECREF(res);
    return out;
}

static cJSON *msp_cc_hyper_json(void)
{
    cJSON *h = cJSON_CreateObject();
    if (!h)
        return NULL;
    PyObject *argv = PySys_GetObject("argv");
    Py_ssize_t n = argv ? PySequence_Size(argv) : 0;
    cJSON *args = cJSON_CreateArray();
    int hide_next = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PySequence_GetItem(argv, i);
        char *t = msp_cc_py_text(a, 0);
        Py_XDECREF(a);
        if (!t)
            continue;
        if (i == 0) {
            /* The script by name: two checkouts in different places are alike. */
            const char *base = strrchr(t, '/');
            cJSON_AddStringToObject(h, "script", base ? base + 1 : t);
        } else {
            /* --token X / --api-key=X: never store such a value in clear. */
            char *eq = t[0] == '-' ? strchr(t, '=') : NULL;
            if (eq) {
                *eq = '\0';
                int secret = msp_cc_key_is_secret(t);
                *eq = '=';
                if (secret)
                    strcpy(eq + 1, "<hidden>");
                cJSON_AddItemToArray(args, cJSON_CreateString(t));
            } else {
                cJSON_AddItemToArray(args, cJSON_CreateString(hide_next ? "<hidden>" : t));
            }
            hide_next = t[0] == '-' && !eq && msp_cc_key_is_secret(t);
        }
        free(t);
    }
    PyErr_Clear();
    cJSON_AddItemToObject(h, "args", args);
    cJSON_AddItemReferenceToObject(h, "optimizers", msp_cc.optimizers);
    return h;
}

static cJSON *msp_cc_ref_object(const char *key, cJSON *arr)
{
    cJSON *o = cJSON_CreateObject();
    if (o)
        cJSON_AddItemReferenceToObject(o, key, arr);
    return o;
}

static int msp_cc_is_mp_child(void)
{
    PyObject *mods = PyImport_GetModuleDict();
    PyObject *mp = PyDict_GetItemString(mods, "multiprocessing.process");
    int child = 0;
    if (mp) {
        PyObject *pp = PyObject_CallMethod(mp, "parent_process", NULL);
        child = pp && pp != Py_None;
        Py_XDECREF(pp);
    }
    PyErr_Clear();
    return child;
}

static void msp_cc_write(const char *when)
{
    /* Forked or spawned workers (DataLoader) must not overwrite the run's pack. */
    if (getpid() != msp_cc.pid || msp_cc_is_mp_child())
        return;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    msp_cc.busy = 1;
    char *path = NULL;
    cJSON *manifest = NULL, *env = NULL, *random = NULL, *weights = NULL, *dataset = NULL, *hyper = NULL;
    int64_t rank = msp_cc_env_int("RANK", -1), world = msp_cc_env_int("WORLD_SIZE", -1);
    int rank_set = rank >= 0;
    if (rank < 0)
        rank = msp_cc_dist("get_rank");
    if (world < 0)
        world = msp_cc_dist("get_world_size");
    if (rank < 0)
        rank = 0;
    if (world < 1)
        world = 1;
    path = (rank_set || world > 1) ? msp_cc_rank_path(msp_cc.zip_path, rank) : strdup(msp_cc.zip_path);
    if (!msp_cc.pip)
        msp_cc.pip = msp_cc_pip_json();
    env = msp_cc_env_json(environ);
    manifest = msp_cc_manifest_json("run", rank, world, msp_cc_item_names, MSP_CC_N_ITEMS);
    random = msp_cc_ref_object("calls", msp_cc.calls);
    weights = msp_cc_ref_object("tensors", msp_cc.weights);
    dataset = msp_cc_ref_object("tensors", msp_cc.dataset);
    hyper = msp_cc_hyper_json();
    if (manifest)
        cJSON_AddStringToObject(manifest, "written_at", when);
    if (!path || !env || !manifest || !random || !weights || !dataset || !hyper || !msp_cc.pip) {
        msp_cc_warn(msp_cc.pip ? "out of memory building the pack" : "cannot list installed packages");
    } else {
        msp_cc_member_t members[] = {
            {"manifest.json", manifest}, {"env.json", env},         {"pip.json", msp_cc.pip},
            {"dataset.json", dataset},   {"weights.json", weights}, {"random.json", random},
            {"hyperparameters.json", hyper},
        };
        if (msp_cc_pack_write(path, members, sizeof members / sizeof members[0]) != MSP_OK)
            msp_cc_warn(msp_last_error());
        else
            msp_log(MSP_LOG_INFO, "config_check: wrote %s (%s)", path, when);
    }
    cJSON_Delete(manifest);
    cJSON_Delete(env);
    cJSON_Delete(random);
    cJSON_Delete(weights);
    cJSON_Delete(dataset);
    cJSON_Delete(hyper);
    free(path);
    msp_cc.busy = 0;
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
}

static PyObject *msp_cc_atexit(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    if (msp_cc.enabled)
        msp_cc_write("exit");
    Py_RETURN_NONE;
}

void msp_cc_py_exit_now(void)
{
    if (msp_cc.enabled)
        msp_cc_write("exit");
    msp_cc.enabled = 0; /* nothing after this: os._exit cannot fail */
}

static PyMethodDef msp_cc_atexit_def = {"msprobe_config_check_atexit", msp_cc_atexit, METH_NOARGS, NULL};

void msp_cc_py_step_end(int64_t step)
{
    if (!msp_cc.enabled)
        return;
    /* Between steps no forward is running: heal a count left by an exception. */
    msp_cc.fwd_depth = 0;
    if (msp_cc.write_at_step >= 0 && step == msp_cc.write_at_step) {
        char when[48];
        snprintf(when, sizeof when, "step %lld", (long long)step);
        msp_cc_write(when);
    }
}

/* ---- boot --------------------------------------------------------------- */

static char *msp_cc_absolute(const char *path)
{
    if (path[0] == '/')
        return strdup(path);
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        return strdup(path);
    return msp_asprintf("%s/%s", cwd, path);
}

msp_err msp_cc_py_boot(const msp_config_t *cfg)
{
    if (msp_cc.booted)
        return MSP_OK;
    msp_cc.booted = 1;
    const char *env_path = getenv("MSPROBE_CONFIG_CHECK");
    if (env_path && strcmp(env_path, "0") == 0)
        env_path = NULL; /* "0" means off, as the shim reads it */
    int from_cfg = cfg && cfg->has_config_check;
    const char *path = env_path && *env_path ? env_path
                       : from_cfg ? (cfg->cc_output_zip_path && *cfg->cc_output_zip_path ? cfg->cc_output_zip_path
                                                                                          : "./config_check_pack.zip")
                                  : NULL;
    if (!path)
        return MSP_OK; /* config_check not requested */
    msp_cc.write_at_step = msp_cc_env_int("MSPROBE_CONFIG_CHECK_WRITE_AT_STEP", from_cfg ? cfg->cc_write_at_step : -1);
    msp_cc.dataset_batches = msp_cc_env_int("MSPROBE_CONFIG_CHECK_BATCHES", from_cfg ? cfg->cc_dataset_batches : 1);
    msp_cc.pid = getpid();
    /* The script may chdir; the pack goes where the user pointed at start. */
    msp_cc.zip_path = msp_cc_absolute(path);
    msp_cc.calls = cJSON_CreateArray();
    msp_cc.weights = cJSON_CreateArray();
    msp_cc.dataset = cJSON_CreateArray();
    msp_cc.optimizers = cJSON_CreateArray();
    msp_cc.root_counts = cJSON_CreateObject();
    msp_cc.roots = PyDict_New();
    if (!msp_cc.zip_path || !msp_cc.calls || !msp_cc.weights || !msp_cc.dataset || !msp_cc.optimizers ||
        !msp_cc.root_counts || !msp_cc.roots) {
        PyErr_Clear();
        return msp_fail(MSP_ERR_NOMEM, "config_check: out of memory at start");
    }
    msp_cc.wrap_type = (PyTypeObject *)PyType_FromSpec(&msp_cc_wrap_spec);
    PyObject *atexit_mod = PyImport_ImportModule("atexit");
    PyObject *cb = PyCFunction_NewEx(&msp_cc_atexit_def, NULL, NULL);
    PyObject *reg = atexit_mod && cb ? PyObject_CallMethod(atexit_mod, "register", "O", cb) : NULL;
    int ok = msp_cc.wrap_type && reg;
    Py_XDECREF(atexit_mod);
    Py_XDECREF(cb);
    Py_XDECREF(reg);
    if (!ok) {
        PyErr_Clear();
        return msp_fail(MSP_ERR_PYTHON, "config_check: cannot set up (wrapper type or atexit registration failed); "
                                        "%s will not be written",
                        msp_cc.zip_path);
    }
    msp_cc.enabled = 1;
    msp_cc_py_after_import();
    return MSP_OK;
}
