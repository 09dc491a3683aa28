/* Patching: each selected torch API replaced by an MSP_W_API wrapper
 * (recorded by py_apirec.c), api_list entries outside torch wrapped as their
 * modules finish importing, torch.jit.script compiled against the originals,
 * torch.compile noted, and data loading (a DataLoader fetch, a Dataset's
 * constructor) run unrecorded. At exit, one warning names every api_list
 * entry this run never dumped. */
#include "py_wrap.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t g_npending; /* api_list callables outside torch not wrapped yet */
/* What became of each api_list entry, for the warning at exit (E_UNKNOWN_SAID:
 * unknown, and said so before training). */
enum { E_NONE = 0, E_UNKNOWN, E_PENDING, E_WRAPPED, E_BAD, E_UNKNOWN_SAID };
static unsigned char *g_estate;

/* Every attribute patched, so torch.jit.script can compile against the
 * originals (TorchScript cannot compile through a C callable). */
typedef struct patched {
    PyObject *owner, *wrapper;
    char attr[64];
} patched_t;
static patched_t *g_patched;
static size_t g_npatched, g_cap_patched;

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
        msp_shim_warn_once(w->name,
                           "more than %d single calls of %s listed; every call of it "
                           "is dumped",
                           MSP_SEL_CALLS, w->name);
        w->dirs |= dirs;
        return;
    }
    w->sel_call[w->nsel] = sel->call;
    w->sel_dirs[w->nsel++] = (unsigned char)dirs;
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

/* torch.compile (torch >= 2.0): what runs inside a compiled graph never goes
 * through Python, so the wrappers cannot see it; say so once, when the
 * script first compiles something, and change nothing. */
static PyObject *compile_call(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    static int said;
    if (!said && msp_proc_may_write()) {
        said = 1;
        msp_shim_warn_once("torch.compile",
                           "torch.compile: what runs inside compiled graphs is "
                           "not visible to msprobe (only what runs eagerly: outside compiled "
                           "code, at graph breaks, and module boundaries in module/mix mode); "
                           "dump a run without torch.compile to see every API");
    }
    return PyObject_Call(w->orig, args, kw);
}

static PyObject *norecord_call(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    msp_quiet_t quiet = msp_quiet_begin();
    msp_t_data_depth++;
    PyObject *out = PyObject_Call(w->orig, args, kw);
    msp_t_data_depth--;
    msp_quiet_end(quiet);
    return out;
}

void msp_patch_kinds(void)
{
    msp_wrap_handle(MSP_W_API, msp_api_call);
    msp_wrap_handle(MSP_W_JIT, jit_call);
    msp_wrap_handle(MSP_W_COMPILE, compile_call);
    msp_wrap_handle(MSP_W_NORECORD, norecord_call);
}

/* ---- Dataset constructors: data preparation, not model calls ---------------- */

/* A Dataset's constructor prepares data (torchvision's MNIST reads the whole
 * set and views it with Tensor.view: most of a step's bytes): nothing it runs
 * is the model's. The own __init__ of each Dataset subclass is wrapped like a
 * DataLoader fetch: those that exist when torch is patched (a script that
 * imports torchvision first), and through Dataset.__init_subclass__ those
 * defined later. */
static PyObject *g_dataset_cls;      /* torch.utils.data.Dataset */
static PyObject *g_ds_subclass_orig; /* Dataset's own __init_subclass__, if it had one */
static PyObject *g_ds_function_type; /* types.FunctionType (the limited API has no check) */

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
        PyObject *sup = super_type
                            ? PyObject_CallFunctionObjArgs(super_type, g_dataset_cls, cls, NULL)
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

static PyMethodDef g_ds_subclass_def = {"__init_subclass__",
                                        (PyCFunction)(void (*)(void))ds_init_subclass,
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
            msp_py_warn_error("dataloader",
                              "cannot hook DataLoader iteration; what a dataset "
                              "computes in this process may be dumped as model calls");
        Py_XDECREF(w);
    } else if (!next) {
        msp_py_warn_error("dataloader",
                          "this torch has no DataLoader iterator to hook; what "
                          "a dataset computes in this process may be dumped as model calls");
    }
    Py_XDECREF(next);
    Py_XDECREF(cls);
    Py_XDECREF(m);
    if (PyErr_Occurred())
        PyErr_Clear();
}

/* ---- patching ------------------------------------------------------------- */

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
    const char *attr;
    const msp_api_space_t *sp = msp_api_space(full, &attr);
    if (!sp)
        return 0;
    PyObject *owner = owner_object(torch, sp->path);
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
        snprintf(name, sizeof name, "%s.%s", sp->prefix, attr);
        PyObject *w = msp_wrap_new(orig, name, MSP_W_API, 0, sp->bind);
        if (w)
            add_selection((msp_wrap_t *)w, dirs, sel);
        if (!w || PyObject_SetAttrString(owner, attr, w) < 0) {
            msp_py_warn_error("patch", "cannot wrap an API; it is not dumped");
            rc = -1;
        } else if (strlen(attr) < sizeof g_patched[0].attr) {
            patched_t *np = msp_grow(g_patched, &g_cap_patched, g_npatched, sizeof *np, 256);
            if (np) {
                g_patched = np;
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
                     "it",
                     c->source ? c->source : "config", entry_key(&c->api_list[i], kb, sizeof kb),
                     near ? " (did you mean \""
                          : " that msprobe dumps (see msprobe dump "
                            "--list-apis)",
                     near ? near : "", near ? "\"?)" : "");
        g_estate[i] = E_UNKNOWN_SAID;
    }
}

/* msprobe's name fragments ("relu"): every API whose record name
 * ("Functional.relu", "Tensor.relu_", "Functional.leaky_relu") holds one, in
 * every call, both directions (msprobe's check_api_list: `api_str in
 * api_name`). At level L0 they select modules only (py_module.c). */
static void patch_fragments(PyObject *torch, const msp_config_t *c, const char *const *l, size_t nl)
{
    if (c->dump_mode == MSP_DUMP_MODULE)
        return;
    for (size_t j = 0; j < c->n_api_list; j++) {
        const msp_api_sel_t *e = &c->api_list[j];
        if (!e->fragment)
            continue;
        for (size_t i = 0; i < nl; i++) {
            const char *attr;
            const msp_api_space_t *sp = msp_api_space(l[i], &attr);
            char rec[160];
            if (!sp)
                continue;
            snprintf(rec, sizeof rec, "%s.%s", sp->prefix, attr);
            if (strstr(rec, e->name) && patch_one(torch, l[i], e->dirs, 0, e) == 0 && g_estate)
                g_estate[j] = E_WRAPPED;
        }
    }
}

int msp_patch_torch(PyObject *torch)
{
    if (msp_bwd_init(torch) != 0)
        return -1;
    PyErr_Clear();
    msp_api_discover(torch);
    const msp_config_t *c = msp_cfg;
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
    const char *const *l = msp_api_list(&nl);
    /* data_mode forward: no grad_fn is hooked for backward records that
     * would be dropped (the hook costs more than the forward's record) */
    if (!explicit_api && c->n_api_list == 0)
        for (size_t i = 0; i < nl; i++)
            patch_one(torch, l[i], msp_dump_dirs(), 0, NULL);
    /* mix mode, a module in the list: the APIs called inside it are dumped
     * too (msprobe's level mix), so every API is wrapped, selected by none */
    int lists_module = 0;
    for (size_t i = 0; i < c->n_api_list; i++)
        lists_module |= strncmp(c->api_list[i].name, "torch.", 6) != 0;
    patch_fragments(torch, c, l, nl);
    /* a scope: every API, each call asking whether it is in the range */
    if ((c->n_api_list && lists_module && c->dump_mode == MSP_DUMP_MIX) || msp_scope_on())
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
    const msp_config_t *c = msp_cfg;
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
    const msp_api_sel_t *e = &msp_cfg->api_list[i];
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
        for (size_t i = 0; i < msp_cfg->n_api_list && g_npending > 0; i++)
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
    const msp_config_t *c = msp_cfg;
    char item[640], kb[300];
    msp_buf_t m = {0}; /* `"name" (why)` items, "; "-separated */
    for (size_t i = 0; i < c->n_api_list; i++) {
        const char *n = c->api_list[i].name, *k = entry_key(&c->api_list[i], kb, sizeof kb);
        item[0] = '\0';
        if (g_estate[i] == E_UNKNOWN) {
            const char *near = msp_api_near(n);
            if (near)
                snprintf(item, sizeof item,
                         "%s (not an API of this torch; did you mean "
                         "\"%s\"?)",
                         k, near);
            else
                snprintf(item, sizeof item,
                         "%s (not an API of this torch that msprobe "
                         "dumps: see msprobe dump --list-apis)",
                         k);
        } else if (g_estate[i] == E_PENDING && !msp_module_entry_matched(i)) {
            snprintf(item, sizeof item,
                     "%s (no module of the model has that path, and no "
                     "imported module has that callable)",
                     k);
        } else if (g_estate[i] == E_BAD && !msp_module_entry_matched(i)) {
            snprintf(item, sizeof item,
                     "%s (found, but not a function or method msprobe "
                     "can wrap)",
                     k);
        } else if (g_estate[i] == E_NONE && strncmp(n, "torch.", 6) != 0 &&
                   !msp_module_entry_matched(i)) {
            if (c->api_list[i].fragment)
                snprintf(item, sizeof item, "%s (%s has a name that holds it)", k,
                         c->dump_mode == MSP_DUMP_API      ? "no API of this torch"
                         : c->dump_mode == MSP_DUMP_MODULE ? "no module of the model"
                                                           : "no API of this torch and no "
                                                             "module of the model");
            else if (strncmp(n, "Aten.", 5) == 0)
                snprintf(item, sizeof item,
                         "%s (msprobe's aten-level record: torch.ops.aten "
                         "is not wrapped here; the Torch. or Tensor. API that called it is)",
                         k);
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
