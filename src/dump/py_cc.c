/* config_check's in-process collection: a listener of the Python side's one
 * runtime (py_proc.c). Seeds come from the runtime's seed wrappers, the
 * optimizer from its Optimizer.__init__ event, weights and the first batches
 * from its root-forward event (the module hooks the dump uses), the pack is
 * written at its step-end and exit events, in a writing process only.
 *
 * Rules: never raise into training code, never change what it computes. */
#include "py_cc_tensor.h"

#include <fcntl.h>
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static struct {
    int enabled;
    char *zip_path;
    int64_t write_at_step, dataset_batches;
    int64_t batches_done;
    int done_random, done_numpy, done_torch, done_argparse;
    PyObject *namespaces;  /* each argparse namespace the script parsed, in order */
    PyObject *roots;       /* id(root module) -> name */
    PyObject *tensor_type; /* torch.Tensor */
    PyObject *torch;
    cJSON *calls, *weights, *dataset, *optimizers, *root_counts;
    cJSON *pip; /* cached after the first write: sys.path scans are slow */
} msp_cc;

/* Through the runtime's logger: one line per kind, counted at exit. */
static void msp_cc_warn(const char *what)
{
    msp_shim_warn_once("config_check", "config_check: %s", what);
}

/* ---- listeners: what the runtime's events record ------------------------ */

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
        (code = PyObject_GetAttrString(frame, "f_code")) &&
        (fname = PyObject_GetAttrString(code, "co_filename")) &&
        (lineno = PyObject_GetAttrString(frame, "f_lineno"))) {
        file = msp_cc_py_text(fname, 0);
        line = PyLong_AsLong(lineno);
        /* the caller's function: config_check groups seed calls by call site */
        PyObject *co_name = PyObject_GetAttrString(code, "co_name");
        char *fn = co_name ? msp_cc_py_text(co_name, 0) : NULL;
        if (fn)
            cJSON_AddStringToObject(e, "function", fn);
        free(fn);
        Py_XDECREF(co_name);
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
    if ((have && !want_data) || (!have && (PyDict_Size(msp_cc.roots) >= MSP_CC_MAX_ROOTS ||
                                           !msp_cc_has_parameters(module)))) {
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
                    msp_cc_py_value_entries(msp_cc.tensor_type, PyTuple_GetItem(input, i), sub,
                                            msp_cc.dataset, 0, &budget);
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

static void msp_cc_on_root_forward(PyObject *module, PyObject *input)
{
    if (msp_cc.enabled)
        msp_cc_record_root(module, input);
}

/* ---- patching as modules appear ------------------------------------------ */

/* Seed functions get the runtime's wrapper (one per attribute, shared with
 * any other use); Optimizer.__init__ and module forwards are the runtime's
 * own events, so nothing of torch is patched twice. */
static void msp_cc_seed_torch(PyObject *torch)
{
    PyObject *random = PyObject_GetAttrString(torch, "random");
    PyErr_Clear();
    PyObject *cuda = PyObject_GetAttrString(torch, "cuda");
    PyErr_Clear();
    PyObject *cuda_random = cuda ? PyObject_GetAttrString(cuda, "random") : NULL;
    PyErr_Clear();
    msp_cc.done_torch = 1;
    Py_INCREF(torch);
    msp_cc.torch = torch;
    msp_cc.tensor_type = PyObject_GetAttrString(torch, "Tensor");
    PyErr_Clear();
    int rc = msp_proc_wrap_seed(torch, "manual_seed", "torch.manual_seed");
    if (random)
        rc |= msp_proc_wrap_seed(random, "manual_seed", "torch.manual_seed");
    if (cuda) {
        rc |= msp_proc_wrap_seed(cuda, "manual_seed", "torch.cuda.manual_seed");
        rc |= msp_proc_wrap_seed(cuda, "manual_seed_all", "torch.cuda.manual_seed_all");
    }
    if (cuda_random) {
        rc |= msp_proc_wrap_seed(cuda_random, "manual_seed", "torch.cuda.manual_seed");
        rc |= msp_proc_wrap_seed(cuda_random, "manual_seed_all", "torch.cuda.manual_seed_all");
    }
    if (rc)
        msp_cc_warn("cannot wrap a seed function; the random item will be incomplete");
    Py_XDECREF(random);
    Py_XDECREF(cuda);
    Py_XDECREF(cuda_random);
    PyErr_Clear();
}

static void msp_cc_on_import(void)
{
    if (!msp_cc.enabled || (msp_cc.done_random && msp_cc.done_numpy && msp_cc.done_torch))
        return;
    PyObject *mods = PyImport_GetModuleDict();
    PyObject *m;
    if (!msp_cc.done_random && (m = PyDict_GetItemString(mods, "random"))) {
        msp_cc.done_random = 1;
        msp_proc_wrap_seed(m, "seed", "random.seed");
    }
    if (!msp_cc.done_numpy && (m = PyDict_GetItemString(mods, "numpy.random")) &&
        PyObject_HasAttrString(m, "seed")) {
        msp_cc.done_numpy = 1;
        msp_proc_wrap_seed(m, "seed", "numpy.random.seed");
        PyObject *mt = PyDict_GetItemString(mods, "numpy.random.mtrand");
        if (mt)
            msp_proc_wrap_seed(mt, "seed", "numpy.random.seed");
    }
    if (!msp_cc.done_argparse && (m = PyDict_GetItemString(mods, "argparse"))) {
        msp_cc.done_argparse = 1;
        if (msp_proc_wrap_argparse(m))
            msp_cc_warn("cannot wrap argparse; hyperparameters hold argv only");
    }
    /* torch's modules are complete only once torch itself is patched. */
    if (!msp_cc.done_torch && msp_g.torch_seen && (m = PyDict_GetItemString(mods, "torch")))
        msp_cc_seed_torch(m);
    PyErr_Clear();
}

static void msp_cc_on_seed(const char *api, PyObject *args, PyObject *kw)
{
    if (msp_cc.enabled)
        msp_cc_record_seed(api, args, kw);
}

/* Kept by reference and read at the pack's writing: a script that adjusts
 * its arguments after parsing (lr scaled by the world size) trains with the
 * adjusted values. */
static void msp_cc_on_args_parsed(PyObject *ns)
{
    if (!msp_cc.enabled || !ns)
        return;
    if (!msp_cc.namespaces && !(msp_cc.namespaces = PyList_New(0)))
        return;
    if (PySequence_Contains(msp_cc.namespaces, ns) != 1)
        PyList_Append(msp_cc.namespaces, ns);
    PyErr_Clear();
}

/* vars(ns) of each parsed namespace, secrets (by name or by value) in their
 * stored form (msp_cc_redact_json). */
static cJSON *msp_cc_namespaces_json(void)
{
    cJSON *arr = cJSON_CreateArray();
    Py_ssize_t n = msp_cc.namespaces ? PyList_Size(msp_cc.namespaces) : 0;
    for (Py_ssize_t i = 0; arr && i < n; i++) {
        PyObject *d = PyObject_GetAttrString(PyList_GetItem(msp_cc.namespaces, i), "__dict__");
        cJSON *o = d && PyDict_Check(d) ? msp_cc_py_to_json(d, 0) : NULL;
        Py_XDECREF(d);
        PyErr_Clear();
        if (!cJSON_IsObject(o)) {
            cJSON_Delete(o);
            continue;
        }
        msp_cc_redact_json(o, 0);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

static void msp_cc_on_optimizer(PyObject *opt)
{
    if (msp_cc.enabled)
        msp_cc_record_optimizer(opt);
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
    code = Py_CompileString(msp_cc_pip_py, "<msprobe config_check pip>", Py_file_input);
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
    char **texts = calloc((size_t)(n > 0 ? n : 1), sizeof *texts);
    size_t nt = 0;
    for (Py_ssize_t i = 0; texts && i < n; i++) {
        PyObject *a = PySequence_GetItem(argv, i);
        char *t = msp_cc_py_text(a, 0);
        Py_XDECREF(a);
        if (!t)
            continue;
        if (i == 0) {
            /* The script by name: two checkouts in different places are alike. */
            const char *base = strrchr(t, '/');
            char *r = msp_cc_redact_value(NULL, base ? base + 1 : t);
            cJSON_AddStringToObject(h, "script", r ? r : base ? base + 1 : t);
            free(r);
            free(t);
        } else {
            texts[nt++] = t;
        }
    }
    /* --token X, --db-url=postgres://u:pw@h/db, a bare token: never in clear. */
    cJSON *args = texts ? msp_cc_redact_argv((const char *const *)texts, nt) : NULL;
    for (size_t i = 0; i < nt; i++)
        free(texts[i]);
    free(texts);
    PyErr_Clear();
    cJSON_AddItemToObject(h, "args", args);
    if (msp_cc.namespaces && PyList_Size(msp_cc.namespaces) > 0)
        cJSON_AddItemToObject(h, "namespaces", msp_cc_namespaces_json());
    msp_cc_redact_json(msp_cc.optimizers,
                       0); /* param_group strings: a scheduler's name, rarely a key */
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

/* The pack's name for this process, taken at its first write: a pack that
 * exists already (another process's or an earlier run's) is never replaced;
 * this process then writes NAME-1.zip (NAME-2.zip, ...) with a warning. The
 * name is taken atomically when the pack is written (msp_cc_pack_write_new):
 * processes of one rank exiting together each keep their pack. Later writes
 * of this process replace its own. */
static char *g_cc_chosen;

static msp_err msp_cc_write_pack(const char *want, const msp_cc_member_t *members, size_t n,
                                 const char **path)
{
    if (g_cc_chosen) {
        *path = g_cc_chosen;
        return msp_cc_pack_write(g_cc_chosen, members, n);
    }
    msp_err rc = msp_cc_pack_write_new(want, members, n, &g_cc_chosen);
    *path = g_cc_chosen ? g_cc_chosen : want;
    if (!rc && strcmp(g_cc_chosen, want) != 0)
        msp_shim_warn_once("config_check_exists",
                           "config_check: %s exists and is never "
                           "replaced; this process (pid %ld) writes %s",
                           want, (long)getpid(), g_cc_chosen);
    return rc;
}

static void msp_cc_write(const char *when)
{
    char *want = NULL;
    cJSON *manifest = NULL, *env = NULL, *random = NULL, *weights = NULL, *dataset = NULL,
          *hyper = NULL;
    /* The runtime's rank rule (RANK, LOCAL_RANK, then torch.distributed), as the dump's. */
    int64_t rank = msp_current_rank(), world = msp_cc_env_int("WORLD_SIZE", -1);
    /* _rank<R> when there are ranks to tell apart, or the launcher named
     * one: not for a single process that merely initialised a world of 1 */
    int rank_named = getenv("RANK") || getenv("LOCAL_RANK");
    if (world < 0)
        world = msp_cc_dist("get_world_size");
    if (world < 1)
        world = 1;
    want = (rank_named || world > 1) ? msp_cc_rank_path(msp_cc.zip_path, rank)
                                     : strdup(msp_cc.zip_path);
    if (!msp_cc.pip)
        msp_cc.pip = msp_cc_pip_json();
    env = msp_cc_env_json(environ);
    if (msp_cc_salt_refused())
        msp_shim_warn_once("config_check_salt", "config_check: %s", MSP_CC_SALT_WEAK_WARNING);
    manifest = msp_cc_manifest_json("run", rank, world, msp_cc_item_names, MSP_CC_N_ITEMS);
    random = msp_cc_ref_object("calls", msp_cc.calls);
    weights = msp_cc_ref_object("tensors", msp_cc.weights);
    dataset = msp_cc_ref_object("tensors", msp_cc.dataset);
    hyper = msp_cc_hyper_json();
    if (manifest)
        cJSON_AddStringToObject(manifest, "written_at", when);
    if (!want || !env || !manifest || !random || !weights || !dataset || !hyper || !msp_cc.pip) {
        msp_cc_warn(msp_cc.pip ? "out of memory building the pack"
                               : "cannot list installed packages");
    } else {
        msp_cc_member_t members[] = {
            {"manifest.json", manifest},     {"env.json", env},         {"pip.json", msp_cc.pip},
            {"dataset.json", dataset},       {"weights.json", weights}, {"random.json", random},
            {"hyperparameters.json", hyper},
        };
        const char *path = want;
        if (msp_cc_write_pack(want, members, sizeof members / sizeof members[0], &path) != MSP_OK)
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
    free(want);
}

static void msp_cc_on_exit(const char *how)
{
    (void)how;
    /* Only a process that trained (ran a model or made an optimizer) leaves a
     * pack at exit: helpers that merely import torch (compile workers, an
     * evaluation script's subprocess) would otherwise leave packs with no
     * weights that compare as equal. */
    if (msp_cc.enabled &&
        (cJSON_GetArraySize(msp_cc.weights) > 0 || cJSON_GetArraySize(msp_cc.optimizers) > 0 ||
         cJSON_GetArraySize(msp_cc.dataset) > 0))
        msp_cc_write("exit");
    msp_cc.enabled = 0; /* written once: nothing runs after an exit */
}

static void msp_cc_on_step_end(int64_t step)
{
    if (msp_cc.enabled && msp_cc.write_at_step >= 0 && step == msp_cc.write_at_step) {
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

/* An output_zip_path that cannot work stops the run before training, as a bad
 * dump_path does: found at exit, the whole run's pack would be lost. */
static msp_err msp_cc_check_path(const char *path, const char *key)
{
    struct stat st;
    char *dir = NULL;
    msp_err rc = MSP_OK;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        rc = msp_fail(MSP_ERR_CONFIG,
                      "%s: \"%s\" is a directory; name the pack's file, e.g. "
                      "\"%s/config_check_pack.zip\"",
                      key, path, path);
        goto cleanup;
    }
    if (!(dir = msp_parent_dir(path))) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    if (msp_mkdirs(dir) != MSP_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", msp_last_error()); /* msp_fail reuses its buffer */
        rc = msp_fail(MSP_ERR_CONFIG,
                      "%s: cannot create the directory of \"%s\" (%s); choose a "
                      "writable place",
                      key, path, why);
    } else {
        /* Create a file where the pack's temporary file will go: access()
         * says yes to root in /proc or on a read-only mount, and only a real
         * creation proves the rename at exit can work. */
        char *probe = msp_asprintf("%s/.msprobe-probe.%ld", dir, (long)getpid());
        int fd = probe ? open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
        if (fd >= 0) {
            close(fd);
            unlink(probe);
        } else if (!probe || errno != EEXIST) {
            rc = probe ? msp_fail(MSP_ERR_CONFIG,
                                  "%s: cannot write in \"%s\" (%s); choose a writable place", key,
                                  dir, strerror(errno))
                       : msp_fail(MSP_ERR_NOMEM, "out of memory");
        }
        free(probe);
    }
cleanup:
    free(dir);
    return rc;
}

msp_err msp_cc_setup(const msp_config_t *cfg)
{
    static const msp_listener_t listener = {
        msp_cc_on_import,   msp_cc_on_seed, msp_cc_on_optimizer,   msp_cc_on_root_forward,
        msp_cc_on_step_end, msp_cc_on_exit, msp_cc_on_args_parsed, NULL};
    const char *env_path = getenv("MSPROBE_CONFIG_CHECK");
    if (env_path && strcmp(env_path, "0") == 0)
        env_path = NULL; /* "0" means off, as the shim reads it */
    int from_cfg = cfg && cfg->has_config_check;
    const char *path = env_path && *env_path ? env_path
                       : from_cfg            ? (cfg->cc_output_zip_path && *cfg->cc_output_zip_path
                                                    ? cfg->cc_output_zip_path
                                                    : "./config_check_pack.zip")
                                             : NULL;
    if (!path)
        return MSP_OK; /* config_check not requested */
    /* The script may chdir; the pack goes where the user pointed at start. */
    msp_cc.zip_path = msp_cc_absolute(path);
    if (!msp_cc.zip_path)
        return msp_fail(MSP_ERR_NOMEM, "config_check: out of memory at start");
    char *key = env_path && *env_path
                    ? strdup("MSPROBE_CONFIG_CHECK")
                    : msp_asprintf("%s: config_check.output_zip_path",
                                   cfg && cfg->source ? cfg->source : "msprobe.json");
    msp_err prc = key ? msp_cc_check_path(msp_cc.zip_path, key)
                      : msp_fail(MSP_ERR_NOMEM, "out of memory");
    free(key);
    if (prc != MSP_OK)
        return prc;
    msp_cc.write_at_step = msp_cc_env_int("MSPROBE_CONFIG_CHECK_WRITE_AT_STEP",
                                          from_cfg ? cfg->cc_write_at_step : -1);
    msp_cc.dataset_batches = msp_cc_env_int("MSPROBE_CONFIG_CHECK_BATCHES",
                                            from_cfg ? cfg->cc_dataset_batches : 1);
    msp_cc.calls = cJSON_CreateArray();
    msp_cc.weights = cJSON_CreateArray();
    msp_cc.dataset = cJSON_CreateArray();
    msp_cc.optimizers = cJSON_CreateArray();
    msp_cc.root_counts = cJSON_CreateObject();
    msp_cc.roots = PyDict_New();
    if (!msp_cc.calls || !msp_cc.weights || !msp_cc.dataset || !msp_cc.optimizers ||
        !msp_cc.root_counts || !msp_cc.roots) {
        PyErr_Clear();
        return msp_fail(MSP_ERR_NOMEM, "config_check: out of memory at start");
    }
    if (msp_listen(&listener) != 0)
        return msp_fail(MSP_ERR_INTERNAL, "config_check: no room for another listener");
    msp_cc.enabled = 1;
    return MSP_OK;
}
