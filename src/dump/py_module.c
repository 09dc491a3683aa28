/* Module mode: global forward pre/post hooks (torch >= 1.13) see every module
 * call. Names come from the root module (one called while no other module's
 * forward is active): at its first forward we walk root.named_modules() and
 * remember, per module, its record prefix and the directions selected.
 *
 * Names (msprobe-dump(5)): the first root model keeps msprobe's names,
 * "Module.<path>.<Class>", and is itself "Module.<Class>". A later root
 * (a GAN's discriminator after its generator, a teacher beside a student)
 * gets a namespace, its class name, so that the two "main" of dcgan differ:
 * "Module.<RootClass>.<path>.<Class>" and "Module.<RootClass>"; if that would
 * still collide with a name already given, "<RootClass>_1", "_2"... A module
 * shared by two roots keeps the name it got first.
 *
 * A forward record takes its inputs in the pre hook, before the forward runs:
 * an in-place module (ReLU(inplace=True)) overwrites them.
 *
 * Backward does not use torch's full backward hooks: they wrap the module's
 * inputs and outputs in a BackwardHookFunction, and torch then rejects an
 * in-place op on the output (Conv2d followed by ReLU(inplace=True) fails).
 * Instead, as for APIs, the forward pre hook notes the inputs, the forward
 * hook walks the module's own part of the autograd graph and hooks its nodes:
 * the graph is left as it is. */
#include "dump_py.h"

#include <stdlib.h>
#include <string.h>

static _Thread_local int t_mod_depth;
#define MSP_MOD_STACK 256
/* What the pre hook at each depth started for the post hook to finish. */
static _Thread_local struct mod_frame {
    msp_bwd_pending_t *pending;
    msp_dq_rec_t *rec;
    int64_t n;
    int64_t order_begin; /* the step's order counter when the forward began */
    int listed;          /* counted in msp_t_listed */
    int scope_closes;    /* the last name of msprobe's scope: its end closes the range */
    int scope_listed;    /* msprobe's scope at mix: a listed module, open till its end */
} t_frame[MSP_MOD_STACK];
static PyObject *g_info;      /* module -> (prefix str, dirs int) for selected modules */
static PyObject *g_roots;     /* root modules already walked */
static PyObject *g_used;      /* prefixes given so far -> True */
static PyObject *g_fwd_count; /* module -> calls in this step */
static int g_nroots;          /* roots walked */
static int g_record;          /* module or mix mode */
static int g_script_root;     /* the script named its model (msp_module_set_root) */

static int path_matches(const char *path, const char *pat)
{
    size_t lp = strlen(path), lq = strlen(pat);
    if (lp == lq)
        return strcmp(path, pat) == 0;
    /* dotted suffix either way: "layer1.0.conv1" names "net.layer1.0.conv1",
     * and "my_model.layer1.0.conv1" names the path "layer1.0.conv1". */
    if (lp > lq)
        return path[lp - lq - 1] == '.' && strcmp(path + lp - lq, pat) == 0;
    return pat[lq - lp - 1] == '.' && strcmp(pat + lq - lp, path) == 0;
}

static unsigned char *g_matched; /* api_list entries that named a module seen so far */

int msp_module_entry_matched(size_t i)
{
    return g_matched && i < msp_cfg->n_api_list && g_matched[i];
}

/* The directions every call of the module at path is recorded in; *calls
 * gets a tuple of (call, dirs) for the entries that name one call of it
 * (msprobe's "Module.fc.Linear.forward.0"), NULL when none do. */
static unsigned module_dirs(const char *path, const char *prefix, PyObject **calls)
{
    const msp_config_t *c = msp_cfg;
    *calls = NULL;
    if (c->n_api_list == 0)
        return msp_dump_dirs();
    if (!g_matched)
        g_matched = calloc(c->n_api_list, 1);
    unsigned d = 0;
    for (size_t i = 0; i < c->n_api_list; i++)
        if (c->api_list[i].fragment) {
            /* msprobe's name fragment: a module whose record name holds it, at
             * L0 and mix (at L1 msprobe hooks no module) */
            if (c->dump_mode != MSP_DUMP_API && strstr(prefix, c->api_list[i].name)) {
                d |= c->api_list[i].dirs;
                if (g_matched)
                    g_matched[i] = 1;
            }
        } else if (strncmp(c->api_list[i].name, "torch.", 6) != 0 &&
                   path_matches(path, c->api_list[i].name)) {
            if (!c->api_list[i].has_call)
                d |= c->api_list[i].dirs;
            else if ((*calls || (*calls = PyList_New(0)))) {
                PyObject *e = Py_BuildValue("(LI)", (long long)c->api_list[i].call,
                                            c->api_list[i].dirs);
                if (e)
                    PyList_Append(*calls, e);
                Py_XDECREF(e);
            }
            if (g_matched)
                g_matched[i] = 1;
        }
    PyErr_Clear();
    return msp_scope_on() ? msp_dump_dirs() : d; /* a scope: every module asks it */
}

/* A module's directions for its call n: every call's and that call's. */
static unsigned module_call_dirs(PyObject *info, int64_t n)
{
    unsigned d = (unsigned)PyLong_AsUnsignedLong(PyTuple_GetItem(info, 1));
    PyObject *calls = PyTuple_GetItem(info, 2);
    Py_ssize_t k = calls && PyList_Check(calls) ? PyList_Size(calls) : 0;
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *e = PyList_GetItem(calls, i);
        if (PyLong_AsLongLong(PyTuple_GetItem(e, 0)) == n)
            d |= (unsigned)PyLong_AsUnsignedLong(PyTuple_GetItem(e, 1));
    }
    PyErr_Clear();
    return d;
}

static int64_t bump(PyObject *counts, PyObject *module)
{
    PyObject *v = PyDict_GetItem(counts, module);
    int64_t n = v ? PyLong_AsLongLong(v) : 0;
    PyObject *nv = PyLong_FromLongLong(n + 1);
    if (nv) {
        PyDict_SetItem(counts, module, nv);
        Py_DECREF(nv);
    }
    return n;
}

static PyObject *class_name(PyObject *mod)
{
    PyObject *cls = PyObject_GetAttrString((PyObject *)Py_TYPE(mod), "__name__");
    PyObject *b = cls ? PyUnicode_AsUTF8String(cls) : NULL;
    Py_XDECREF(cls);
    return b;
}

/* The modules of root not named yet, as a list of (module, path, class),
 * the root itself first with path "". */
static PyObject *new_modules(PyObject *root)
{
    PyObject *list = PyList_New(0);
    PyObject *it = list ? PyObject_CallMethod(root, "named_modules", NULL) : NULL;
    PyObject *iter = it ? PyObject_GetIter(it) : NULL;
    PyObject *pair;
    while (iter && (pair = PyIter_Next(iter))) {
        PyObject *pname = PyTuple_GetItem(pair, 0), *mod = PyTuple_GetItem(pair, 1);
        PyObject *b = pname ? PyUnicode_AsUTF8String(pname) : NULL;
        PyObject *cb = b && mod && !PyDict_GetItem(g_info, mod) ? class_name(mod) : NULL;
        PyObject *e = cb ? Py_BuildValue("(OOO)", mod, b, cb) : NULL;
        if (e)
            PyList_Append(list, e);
        Py_XDECREF(e);
        Py_XDECREF(cb);
        Py_XDECREF(b);
        Py_DECREF(pair);
        if (PyErr_Occurred())
            PyErr_Clear();
    }
    Py_XDECREF(iter);
    Py_XDECREF(it);
    return list;
}

/* Record prefix (without "Module.") and the path api_list entries match
 * against, for a module at path (class cls) under namespace ns ("" for the
 * first root, whose root is named by its class). */
static void names_for(const char *ns, const char *path, const char *cls, char *prefix, size_t np,
                      char *match, size_t nm)
{
    if (!*path) {
        snprintf(prefix, np, "Module.%s", *ns ? ns : cls);
        snprintf(match, nm, "%s", *ns ? ns : cls);
    } else if (*ns) {
        snprintf(prefix, np, "Module.%s.%s.%s", ns, path, cls);
        snprintf(match, nm, "%s.%s", ns, path);
    } else {
        snprintf(prefix, np, "Module.%s.%s", path, cls);
        snprintf(match, nm, "%s", path);
    }
}

static void walk_root(PyObject *root)
{
    PyObject *mods = new_modules(root);
    Py_ssize_t n = mods ? PyList_Size(mods) : 0;
    char ns[160] = "", prefix[512], match[400];
    PyObject *rcls = n > 0 ? class_name(root) : NULL;
    /* A later root gets a namespace under which none of its names is taken. */
    for (int k = 0; rcls && g_nroots > 0 && k < 1000; k++) {
        if (k == 0)
            snprintf(ns, sizeof ns, "%s", PyBytes_AsString(rcls));
        else
            snprintf(ns, sizeof ns, "%s_%d", PyBytes_AsString(rcls), k);
        int clash = 0;
        for (Py_ssize_t i = 0; i < n && !clash; i++) {
            PyObject *e = PyList_GetItem(mods, i);
            names_for(ns, PyBytes_AsString(PyTuple_GetItem(e, 1)),
                      PyBytes_AsString(PyTuple_GetItem(e, 2)), prefix, sizeof prefix, match,
                      sizeof match);
            clash = PyDict_GetItemString(g_used, prefix) != NULL;
        }
        if (!clash)
            break;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyList_GetItem(mods, i);
        names_for(ns, PyBytes_AsString(PyTuple_GetItem(e, 1)),
                  PyBytes_AsString(PyTuple_GetItem(e, 2)), prefix, sizeof prefix, match,
                  sizeof match);
        PyObject *calls = NULL;
        unsigned dirs = module_dirs(match, prefix, &calls);
        PyObject *pv = dirs || calls ? PyUnicode_FromString(prefix) : NULL;
        PyObject *val = pv ? Py_BuildValue("(OIO)", pv, dirs, calls ? calls : Py_None) : NULL;
        Py_XDECREF(calls);
        if (val && PyDict_SetItem(g_info, PyTuple_GetItem(e, 0), val) == 0)
            PyDict_SetItem(g_used, pv, Py_True);
        Py_XDECREF(val);
        Py_XDECREF(pv);
    }
    if (n > 0)
        g_nroots++;
    Py_XDECREF(rcls);
    Py_XDECREF(mods);
    if (PyErr_Occurred())
        msp_py_warn_error("module walk", "cannot list the modules of a model; module names are "
                                         "incomplete");
}

static void frame_drop(struct mod_frame *f)
{
    msp_bwd_cancel(f->pending);
    msp_rec_drop(f->rec);
    f->pending = NULL;
    f->rec = NULL;
    if (f->listed && msp_t_listed > 0)
        msp_t_listed--;
    f->listed = 0;
    if (f->scope_listed) /* a listed module whose forward raised lets nothing more through */
        msp_scope_module_end(0, 1);
    f->scope_closes = 0;
    f->scope_listed = 0;
}

/* In mix mode a module the api_list names opens a span in which every API
 * is recorded (msprobe's level mix: a module in "list" dumps what runs
 * inside it); its frame closes the span. */
static void frame_listed(struct mod_frame *f)
{
    if (msp_cfg->dump_mode == MSP_DUMP_MIX && msp_cfg->n_api_list > 0) {
        f->listed = 1;
        msp_t_listed++;
    }
}

/* The record of the innermost module forward in flight on this thread below
 * depth (frames 1..depth-1), or NULL: the "parent" attribute of a record
 * (msprobe-dump(5)), msprobe's construct.json in the file itself. */
static const char *module_in_flight(int depth)
{
    for (int d = (depth < MSP_MOD_STACK ? depth : MSP_MOD_STACK) - 1; d >= 1; d--)
        if (t_frame[d].rec)
            return t_frame[d].rec->name;
    return NULL;
}

const char *msp_module_parent(void)
{
    /* Statistics and md5 records are /index rows alone: an attribute would
     * cost each record a group (~100 us); only tensor dumps carry parent. */
    if (msp_cfg->task != MSP_TASK_TENSOR)
        return NULL;
    return module_in_flight(t_mod_depth + 1);
}

/* The module's own parameters (not its children's) as parameters.NAME, as
 * msprobe's module records hold them; each gets its param.ROLE name through
 * the producer-link pass (the record's links are MSP_LINK_FIND here). */
static void module_params(msp_dq_rec_t *r, PyObject *mod)
{
    PyObject *kw = Py_BuildValue("{s:O}", "recurse", Py_False);
    PyObject *fn = PyObject_GetAttrString(mod, "named_parameters");
    PyObject *empty = PyTuple_New(0);
    PyObject *it = fn && kw && empty ? PyObject_Call(fn, empty, kw) : NULL;
    PyObject *iter = it ? PyObject_GetIter(it) : NULL;
    PyObject *pair;
    while (iter && (pair = PyIter_Next(iter)) != NULL) {
        PyObject *name = PyTuple_Check(pair) && PyTuple_Size(pair) == 2 ? PyTuple_GetItem(pair, 0)
                                                                        : NULL;
        PyObject *nb = name ? PyUnicode_AsUTF8String(name) : NULL;
        if (nb) {
            char role[160];
            snprintf(role, sizeof role, "parameters.%s", PyBytes_AsString(nb));
            msp_rec_add_value(r, role, PyTuple_GetItem(pair, 1), 1);
        }
        Py_XDECREF(nb);
        Py_DECREF(pair);
    }
    Py_XDECREF(iter);
    Py_XDECREF(it);
    Py_XDECREF(empty);
    Py_XDECREF(fn);
    Py_XDECREF(kw);
    if (PyErr_Occurred())
        PyErr_Clear();
}

static PyObject *pre_hook(PyObject *self, PyObject *args)
{
    (void)self;
    if (msp_g.disabled)
        Py_RETURN_NONE;
    PyObject *mod = PyTuple_Size(args) > 0 ? PyTuple_GetItem(args, 0) : NULL;
    PyObject *in = PyTuple_Size(args) > 1 ? PyTuple_GetItem(args, 1) : NULL;
    int depth = ++t_mod_depth;
    if (depth == 1 && mod && g_record && msp_t_depth == 0 && !g_script_root &&
        !PyDict_GetItem(g_roots, mod)) {
        msp_quiet_t quiet = msp_quiet_begin();
        PyDict_SetItem(g_roots, mod, Py_True);
        walk_root(mod);
        msp_quiet_end(quiet);
    }
    /* runtime event (py_proc.c): a root module is about to run (config_check);
     * not for modules a DataLoader fetch calls */
    if (depth == 1 && mod && in && msp_t_depth == 0) {
        msp_prep_model_started(); /* what came before was data preparation (py_record.c) */
        msp_params_root(mod);
        msp_ev_root_forward(mod, in);
    }
    if (depth < MSP_MOD_STACK) {
        struct mod_frame *f = &t_frame[depth];
        frame_drop(f); /* left by a forward that raised */
        PyObject *info = g_record && msp_g.dumping && msp_t_depth == 0 && mod && in &&
                                 PyTuple_Check(in)
                             ? PyDict_GetItem(g_info, mod)
                             : NULL;
        PyObject *pb = info ? PyUnicode_AsUTF8String(PyTuple_GetItem(info, 0)) : NULL;
        unsigned dirs = 0;
        if (pb) {
            msp_quiet_t quiet = msp_quiet_begin();
            f->n = bump(g_fwd_count, mod);
            dirs = module_call_dirs(info, f->n);
            if (msp_scope_on()) { /* msprobe's scope: in the range or not (py_scope.c) */
                char sname[600];
                snprintf(sname, sizeof sname, "%s.forward.%lld", PyBytes_AsString(pb),
                         (long long)f->n);
                dirs = msp_scope_module_begin(sname, &f->scope_closes, &f->scope_listed);
            }
            if (dirs)
                frame_listed(f);
            if (dirs & MSP_DIR_FORWARD) {
                char name[600];
                snprintf(name, sizeof name, "%s.forward.%lld", PyBytes_AsString(pb),
                         (long long)f->n);
                if ((f->rec = msp_dq_rec_new(name))) {
                    f->order_begin = msp_g.order;
                    const char *parent = msp_cfg->task == MSP_TASK_TENSOR ? module_in_flight(depth)
                                                                          : NULL;
                    if (parent)
                        msp_dq_rec_add_attr(f->rec, "parent", parent);
                    f->rec->links = MSP_LINK_FIND;
                    msp_rec_add_output(f->rec, in, "input");
                    module_params(f->rec, mod);
                    f->rec->links = MSP_LINK_OFF;
                    msp_rec_add_autocast(f->rec);
                    f->rec->stack = msp_stack_capture();
                }
            }
            if (dirs & MSP_DIR_BACKWARD)
                f->pending = msp_bwd_begin(NULL, in, NULL, NULL);
            msp_quiet_end(quiet);
        }
        Py_XDECREF(pb);
    }
    if (PyErr_Occurred())
        PyErr_Clear();
    Py_RETURN_NONE;
}

static PyObject *post_hook(PyObject *self, PyObject *args)
{
    (void)self;
    if (msp_g.disabled)
        Py_RETURN_NONE;
    struct mod_frame f = {NULL, NULL, 0, 0, 0, 0, 0};
    if (t_mod_depth > 0 && t_mod_depth < MSP_MOD_STACK) {
        f = t_frame[t_mod_depth];
        t_frame[t_mod_depth].pending = NULL;
        t_frame[t_mod_depth].rec = NULL;
        t_frame[t_mod_depth].listed = 0;
        t_frame[t_mod_depth].scope_closes = 0;
        t_frame[t_mod_depth].scope_listed = 0;
    }
    if (t_mod_depth > 0)
        t_mod_depth--;
    PyObject *mod, *in, *out;
    PyObject *info = NULL;
    if ((f.rec || f.pending) && g_record && msp_g.dumping && msp_t_depth == 0 &&
        PyArg_UnpackTuple(args, "hook", 3, 3, &mod, &in, &out))
        info = PyDict_GetItem(g_info, mod);
    PyObject *pb = info ? PyUnicode_AsUTF8String(PyTuple_GetItem(info, 0)) : NULL;
    if (pb) {
        msp_quiet_t quiet = msp_quiet_begin();
        if (f.rec) {
            /* Records with order in [order_begin, order) ran inside this
             * forward (msprobe-dump(5)): compare judges a module by them. */
            char ob[24];
            snprintf(ob, sizeof ob, "%lld", (long long)f.order_begin);
            msp_dq_rec_add_attr(f.rec, "order_begin", ob);
            f.rec->links = MSP_LINK_NOTE;
            msp_rec_add_output(f.rec, out, "output");
            f.rec->links = MSP_LINK_OFF;
            msp_rec_submit(f.rec);
            f.rec = NULL;
        }
        if (f.pending) {
            char name[600];
            snprintf(name, sizeof name, "%s.backward.%lld", PyBytes_AsString(pb), (long long)f.n);
            msp_bwd_finish(f.pending, name, out, PyTuple_Check(in) ? in : NULL,
                           MSP_BWD_MAX_MODULE_NODES);
            f.pending = NULL;
        }
        msp_quiet_end(quiet);
    }
    Py_XDECREF(pb);
    if (f.scope_closes || f.scope_listed) { /* the scope's last module, a listed one, ended */
        msp_scope_module_end(f.scope_closes, f.scope_listed);
        f.scope_closes = f.scope_listed = 0;
    }
    frame_drop(&f);
    if (PyErr_Occurred())
        PyErr_Clear();
    if (t_mod_depth == 0 && msp_t_depth == 0 && msp_cfg->step_trigger == MSP_STEP_FORWARD &&
        !msp_g.script_steps)
        msp_step_end();
    Py_RETURN_NONE;
}

void msp_module_set_root(PyObject *model)
{
    if (!g_record || !g_roots || msp_t_depth > 0)
        return;
    g_script_root = 1;
    if (PyDict_GetItem(g_roots, model))
        return;
    msp_quiet_t quiet = msp_quiet_begin();
    if (PyDict_SetItem(g_roots, model, Py_True) == 0)
        walk_root(model);
    msp_quiet_end(quiet);
    if (PyErr_Occurred())
        PyErr_Clear();
}

static PyMethodDef g_pre_def = {"msprobe_module_pre_hook", pre_hook, METH_VARARGS, NULL};
static PyMethodDef g_post_def = {"msprobe_module_hook", post_hook, METH_VARARGS, NULL};

/* A step ended (py_step.c). */
static void step_reset(void)
{
    if (g_fwd_count)
        PyDict_Clear(g_fwd_count);
    /* A forward that raised never reached its post hook. */
    if (msp_cfg->step_trigger != MSP_STEP_FORWARD) {
        t_mod_depth = 0;
        msp_t_listed = 0;
        for (int i = 0; i < MSP_MOD_STACK; i++)
            t_frame[i].listed = 0;
    }
}

int msp_module_install(PyObject *torch)
{
    (void)torch;
    msp_step_watch(step_reset);
    g_record = msp_g.module_on;
    /* the dump needs them too: a root forward ends data preparation (py_record.c) */
    if (!g_record && msp_cfg->step_trigger != MSP_STEP_FORWARD && !msp_g.cc_on &&
        !(msp_g.have_cfg && msp_cfg->has_dump) && !msp_g.mon_on)
        return 0; /* config_check's and the monitor's root-forward event need these hooks */
    g_info = PyDict_New();
    g_roots = PyDict_New();
    g_fwd_count = PyDict_New();
    g_used = PyDict_New();
    PyObject *m = PyImport_ImportModule("torch.nn.modules.module");
    PyObject *pre = PyCFunction_NewEx(&g_pre_def, NULL, NULL);
    PyObject *post = PyCFunction_NewEx(&g_post_def, NULL, NULL);
    PyObject *h1 = NULL, *h2 = NULL;
    if (m && pre && post && g_info && g_roots && g_fwd_count && g_used) {
        h1 = PyObject_CallMethod(m, "register_module_forward_pre_hook", "O", pre);
        h2 = h1 ? PyObject_CallMethod(m, "register_module_forward_hook", "O", post) : NULL;
    }
    int rc = h2 ? 0 : -1;
    if (rc != 0)
        msp_py_warn_error("module install", "cannot install the module hooks; modules are not "
                                            "dumped");
    Py_XDECREF(h1);
    Py_XDECREF(h2);
    Py_XDECREF(pre);
    Py_XDECREF(post);
    Py_XDECREF(m);
    return rc;
}
