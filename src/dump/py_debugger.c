/* msprobe's script API under the shim: a script written against Huawei's
 * msprobe (PrecisionDebugger, seed_all) runs under `msprobe dump` without that
 * package, and its calls drive this dump. The modules themselves are a small
 * embedded Python file (msprobe_api.py: an import finder and two classes are
 * far shorter in Python than through the limited API); the functions here are
 * what it calls:
 *   configure  PrecisionDebugger(config_path, task, dump_path, level, step):
 *              its steps (and ranks) replace the boot config's; what cannot
 *              change once the shim runs (level, task, dump_path, api list)
 *              is one warning when it differs; a bad config or argument is
 *              "msprobe: FILE: what" and SystemExit(2), before training.
 *              From then on the script's debugger.step() alone ends steps and
 *              nothing is recorded outside start() .. stop().
 *   start(model)  records from now on; model, when given, is the root module
 *                 (py_module.c names its modules, and only its).
 *   stop(), step(), quiet(fn), warn(text).
 * In a process the shim found no config for, the stub boots this side when
 * the script imports msprobe (msp_py_boot_script), and PrecisionDebugger's
 * config_path is the config, its task, dump_path, level and step arguments
 * applied in full (nothing has started): the rest of the boot runs then
 * (late_load, late_boot: functions of py_boot.c handed down, so this layer
 * calls none above it). */
#include "dump_py.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int fail_exit(const char *msg)
{
    msp_shim_msg("%s", msg);
    PyObject *code = PyLong_FromLong(2);
    PyErr_SetObject(PyExc_SystemExit, code);
    Py_XDECREF(code);
    msp_state_disable(); /* as a bad config at boot: the run is over */
    return -1;
}

/* Whether a and b name the same file (NULL names none). */
static int same_file(const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];
    if (!a || !b)
        return a == b;
    if (realpath(a, ra) && realpath(b, rb))
        return strcmp(ra, rb) == 0;
    return strcmp(a, b) == 0;
}

static int has_key(const char *keys, const char *k)
{
    size_t n = strlen(k);
    for (const char *p = keys; (p = strstr(p, k)) != NULL; p += n)
        if ((p == keys || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

static void take_string(char **dst, char **src)
{
    free(*dst);
    *dst = *src;
    *src = NULL;
}

/* Take what may change while the shim runs from t (read from src; keys: those
 * it sets, NULL for all); one warning naming what differs and stays. early:
 * the dump has not started (a late boot), and level, task and dump_path are
 * taken too. */
static void adopt(msp_config_t *t, const char *src, const char *keys, int early)
{
    msp_config_t *c = msp_cfg_boot();
    if (early) {
        if (has_key(keys, "level"))
            c->dump_mode = t->dump_mode;
        if (has_key(keys, "task"))
            c->task = t->task;
        if (has_key(keys, "dump_path"))
            take_string(&c->dump_path, &t->dump_path);
    }
    if (!keys || has_key(keys, "step")) {
        msp_step_set_free(&c->dump_iter);
        c->dump_iter = t->dump_iter;
        memset(&t->dump_iter, 0, sizeof t->dump_iter);
    }
    if (!keys) {
        msp_step_set_free(&c->ranks);
        c->ranks = t->ranks;
        memset(&t->ranks, 0, sizeof t->ranks);
    }
    if (!keys && t->dump_enable_set) { /* msprobe's dynamic dump_enable follows this file */
        c->dump_enable_set = 1;
        c->dump_disabled = t->dump_disabled;
        msp_g.dump_off = t->dump_disabled;
        msp_step_watch_config(src);
    }
    char what[160] = "";
    if ((!keys || has_key(keys, "level")) && t->dump_mode != c->dump_mode)
        strcat(what, ", level");
    if ((!keys || has_key(keys, "task")) && t->task != c->task)
        strcat(what, ", task");
    if ((!keys || has_key(keys, "dump_path")) && t->dump_path &&
        !same_file(t->dump_path, c->dump_path))
        strcat(what, ", dump_path");
    if (!keys && t->n_api_list != c->n_api_list)
        strcat(what, ", the list");
    const char *cs = c->source ? c->source : "the config";
    const char *it = strchr(what + 2, ',') ? "them" : "it";
    if (*what && keys)
        msp_shim_msg("warning: %s: %s differ%s from %s, which the dump started with and which "
                     "decides %s; set %s there instead",
                     src, what + 2, *it == 't' ? "" : "s", cs, it, it);
    else if (*what)
        msp_shim_msg("warning: %s: %s differ%s from %s, which the dump started with and which "
                     "decides %s; give that config to msprobe dump -c (or MSPROBE_PATH) instead",
                     src, what + 2, *it == 't' ? "" : "s", cs, it);
}

static int take_config(const char *path, const char *text, const char *keys, int early)
{
    msp_config_t t;
    msp_err rc = text ? msp_config_parse(text, path, &t) : msp_config_load(path, &t);
    if (rc != MSP_OK) {
        const char *d = msp_last_error();
        size_t pl = strlen(path);
        char *m = strncmp(d, path, pl) == 0 && d[pl] == ':' ? NULL
                                                            : msp_asprintf("%s: %s", path, d);
        fail_exit(m ? m : d);
        free(m);
        return -1;
    }
    adopt(&t, path, keys, early);
    msp_config_free(&t);
    return 0;
}

static int (*g_late_load)(const char *path);
static int (*g_late_boot)(void);

static PyObject *dbg_configure(PyObject *self, PyObject *args)
{
    (void)self;
    const char *path = NULL, *json = NULL, *keys = "";
    int late = 0;
    if (!PyArg_ParseTuple(args, "zzs", &path, &json, &keys))
        return NULL;
    if (!msp_g.have_cfg) {
        /* no config at boot: config_path is the config, and the boot is now */
        if (!path) {
            fail_exit("PrecisionDebugger(): no config_path, and no configuration was given to "
                      "the shim (msprobe dump -c FILE, MSPROBE_PATH, ./msprobe.json)");
            return NULL;
        }
        if (!g_late_load || g_late_load(path) != 0) {
            if (!PyErr_Occurred())
                fail_exit("PrecisionDebugger(): the shim cannot start");
            return NULL;
        }
        late = 1;
    } else if (path && !same_file(path, msp_cfg->source) && take_config(path, NULL, NULL, 0) != 0) {
        return NULL;
    }
    if (json && *json == '{' && json[1] != '}') {
        /* Read as msprobe's config.json; its layout is told by task, level or
         * dump_path: the config's task when the script gave none. */
        char *text = has_key(keys, "task") ? NULL
                                           : msp_asprintf("{\"task\": \"%s\", %s",
                                                          msp_task_names[msp_cfg->task], json + 1);
        int rc = take_config("PrecisionDebugger()", text ? text : json, keys, late);
        free(text);
        if (rc != 0)
            return NULL;
    }
    if (late && g_late_boot() != 0) {
        if (!PyErr_Occurred())
            fail_exit("PrecisionDebugger(): the shim cannot start");
        return NULL;
    }
    msp_g.script_steps = 1;
    msp_g.paused = 1;
    msp_step_decide();
    Py_RETURN_NONE;
}

static PyObject *dbg_start(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *model = Py_None;
    if (!PyArg_ParseTuple(args, "|O", &model))
        return NULL;
    msp_g.paused = 0;
    if (!msp_g.booted || msp_g.disabled)
        Py_RETURN_NONE;
    if (model != Py_None)
        msp_module_set_root(model);
    msp_step_config_poll(); /* as msprobe's start() rereads a changed config */
    msp_step_decide();
    Py_RETURN_NONE;
}

static PyObject *dbg_stop(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    msp_g.paused = 1;
    msp_step_decide();
    Py_RETURN_NONE;
}

static PyObject *dbg_step(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    if (msp_g.booted && !msp_g.disabled)
        msp_step_end();
    Py_RETURN_NONE;
}

/* fn() recording nothing, as a DataLoader fetch (py_patch.c): seed_all's
 * torch calls are no op of the model, but its seeds are still the script's
 * own for config_check's random item. */
static PyObject *dbg_quiet(PyObject *self, PyObject *fn)
{
    (void)self;
    msp_quiet_t quiet = msp_quiet_begin();
    msp_t_data_depth++;
    PyObject *out = PyObject_CallObject(fn, NULL);
    msp_t_data_depth--;
    msp_quiet_end(quiet);
    return out;
}

static PyObject *dbg_warn(PyObject *self, PyObject *text)
{
    (void)self;
    PyObject *b = PyUnicode_AsUTF8String(text);
    if (!b)
        return NULL;
    msp_shim_msg("warning: %s", PyBytes_AsString(b));
    Py_DECREF(b);
    Py_RETURN_NONE;
}

static PyMethodDef g_defs[] = {
    {"_shim_configure", dbg_configure, METH_VARARGS, NULL},
    {"_shim_start", dbg_start, METH_VARARGS, NULL},
    {"_shim_stop", dbg_stop, METH_NOARGS, NULL},
    {"_shim_step", dbg_step, METH_NOARGS, NULL},
    {"_shim_quiet", dbg_quiet, METH_O, NULL},
    {"_shim_warn", dbg_warn, METH_O, NULL},
};

void msp_debugger_install(int (*late_load)(const char *path), int (*late_boot)(void))
{
    g_late_load = late_load;
    g_late_boot = late_boot;
    PyObject *bi = PyImport_ImportModule("builtins");
    PyObject *ns = PyDict_New();
    PyObject *nm = PyUnicode_FromString("msprobe-c");
    int ok = bi && ns && nm && PyDict_SetItemString(ns, "__name__", nm) == 0;
    for (size_t i = 0; ok && i < sizeof g_defs / sizeof g_defs[0]; i++) {
        PyObject *f = PyCFunction_NewEx(&g_defs[i], NULL, NULL);
        ok = f && PyDict_SetItemString(ns, g_defs[i].ml_name, f) == 0;
        Py_XDECREF(f);
    }
    /* Named, so that a traceback or a call site (config_check's seeds) says whose code it is. */
    PyObject *code = ok ? PyObject_CallMethod(bi, "compile", "sss", msp_msprobe_api_py,
                                              "<msprobe-c msprobe_api.py>", "exec")
                        : NULL;
    PyObject *r = code ? PyObject_CallMethod(bi, "exec", "OO", code, ns) : NULL;
    Py_XDECREF(code);
    if (!r)
        msp_py_warn_error("boot", "cannot provide msprobe's PrecisionDebugger; a script that "
                                  "imports msprobe fails as without the shim");
    Py_XDECREF(r);
    Py_XDECREF(nm);
    Py_XDECREF(ns);
    Py_XDECREF(bi);
    if (PyErr_Occurred())
        PyErr_Clear();
}
