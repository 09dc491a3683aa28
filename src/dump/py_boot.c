/* Boot of the Python side, called by the stub from the audit hook at the first
 * cpython.run_* event: the interpreter is ready and the user's script has not
 * run yet. This is the one place the shim may end the process: a bad config
 * is reported ("msprobe: <file>: <what>") and SystemExit(2) is raised from the
 * audit hook, so Python exits with status 2 before training starts. */
#include "py_wrap.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static PyObject *g_builtins, *g_orig_import;
static int g_torch_done;
static _Thread_local int t_import_depth;

static void after_import(void);

/* builtins.__import__ (MSP_W_IMPORT): torch patched once it is complete,
 * api_list callables wrapped as their modules finish importing. */
static PyObject *import_call(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    t_import_depth++;
    PyObject *out = PyObject_Call(w->orig, args, kw);
    t_import_depth--;
    /* At every depth: a package that imports a listed module and binds its
     * function (from vendor import fn) must bind our wrapper. */
    if (out && msp_custom_pending() && !msp_g.disabled)
        msp_custom_resolve();
    if (out && t_import_depth == 0 && !msp_g.disabled)
        after_import();
    return out;
}

static int fail_boot(const char *msg)
{
    msp_shim_msg("%s", msg);
    PyObject *code = PyLong_FromLong(2);
    PyErr_SetObject(PyExc_SystemExit, code);
    Py_XDECREF(code);
    msp_state_disable();
    return -1;
}

/* Only the form of each name is checked here: which APIs exist is known once
 * torch is imported (discovered from that torch), and a callable outside
 * torch once its module is; names never found are one warning at exit. A
 * malformed name still stops the run before training. */
static int check_api_list(const msp_config_t *c, char **msg)
{
    for (size_t i = 0; i < c->n_api_list; i++) {
        const char *n = c->api_list[i].name;
        int is_torch = strncmp(n, "torch.", 6) == 0, bad = 0;
        for (const char *p = n; *p && !bad; p++) {
            if (*p == '.')
                bad = p == n || p[1] == '.' || p[1] == '\0';
            else if (is_torch)
                bad = !(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                        (*p >= '0' && *p <= '9' && p[-1] != '.'));
        }
        if (bad) {
            *msg = msp_asprintf("[%zu].name: \"%s\" is not a well-formed %s", i, n,
                                is_torch ? "torch API name (dotted Python identifiers, e.g. "
                                           "\"torch.nn.functional.conv2d\")"
                                         : "module path or callable name (no empty part "
                                           "between dots)");
            return -1;
        }
    }
    return 0;
}

/* msprobe dump --list-apis: MSPROBE_LIST_APIS names the file to write the
 * list of this torch into; nothing is patched or dumped. */
static const char *g_list_path;

static void patch_torch_now(PyObject *torch)
{
    if (g_list_path) {
        msp_quiet_t quiet = msp_quiet_begin();
        if (msp_api_write_list(torch, g_list_path) != 0)
            msp_shim_msg("warning: cannot write the API list to %s", g_list_path);
        msp_quiet_end(quiet);
        return;
    }
    msp_quiet_t quiet = msp_quiet_begin();
    PyObject *v = PyObject_GetAttrString(torch, "__version__");
    PyObject *vs = v ? PyObject_Str(v) : NULL;
    PyObject *vb = vs ? PyUnicode_AsUTF8String(vs) : NULL;
    if (vb)
        msp_dq_set_framework(PyBytes_AsString(vb));
    Py_XDECREF(vb);
    Py_XDECREF(vs);
    Py_XDECREF(v);
    PyErr_Clear();
    /* The one tensor reader serves the dump and config_check's collectors. */
    if ((msp_g.have_cfg && msp_cfg->has_dump) || msp_g.cc_on || msp_g.mon_on) {
        if (msp_tensor_init(torch) != 0) {
            msp_py_warn_error("torch", "this torch lacks what the shim reads tensors with; "
                                       "nothing is dumped");
            msp_state_disable();
            msp_quiet_end(quiet);
            return;
        }
    }
    if (msp_g.have_cfg && msp_cfg->has_dump)
        msp_args_init(torch);
    if (msp_g.have_cfg && msp_cfg->has_dump && msp_g.api_on)
        msp_patch_torch(torch);
    msp_patch_dataloader(); /* every mode: what a DataLoader computes is never the model's */
    msp_module_install(torch);
    if (msp_params_install() != 0)
        PyErr_Clear();
    msp_step_install(torch);
    msp_proc_install(torch);
    msp_mon_install(torch); /* monitor mode only: listens to the steps and root modules */
    if (PyErr_Occurred())
        PyErr_Clear();
    msp_quiet_end(quiet);
}

/* After each outermost import statement: patch torch once it is fully there. */
static void after_import(void)
{
    PyObject *exc_t, *exc_v, *exc_tb;
    PyErr_Fetch(&exc_t, &exc_v, &exc_tb);
    if (!g_torch_done) {
        PyObject *mods = PySys_GetObject("modules"); /* borrowed */
        PyObject *torch = mods ? PyDict_GetItemString(mods, "torch") : NULL;
        if (torch) {
            g_torch_done = 1;
            Py_INCREF(torch);
            patch_torch_now(torch);
            Py_DECREF(torch);
        }
    }
    /* After torch is patched: listeners see torch complete at its first import. */
    msp_ev_after_import();
    /* Nothing left to watch imports for: give builtins.__import__ back. */
    if (g_torch_done && !msp_g.cc_on && !msp_custom_pending() && g_orig_import && g_builtins) {
        PyObject_SetAttrString(g_builtins, "__import__", g_orig_import);
        Py_CLEAR(g_orig_import);
    }
    if (PyErr_Occurred())
        PyErr_Clear();
    PyErr_Restore(exc_t, exc_v, exc_tb);
}

/* Read the config at path into the boot config (msp_cfg_boot); by_env: MSPROBE_PATH names it. */
static int load_config(const char *path, int by_env)
{
    if (msp_config_load(path, msp_cfg_boot()) != MSP_OK) {
        const char *d = msp_last_error();
        size_t pl = strlen(path);
        /* The loader starts its detail with the file name ("f.json:3:7: ...",
         * "f.json: dump.x: ..."); say which file otherwise. */
        if (strncmp(d, path, pl) == 0 && d[pl] == ':')
            return fail_boot(d);
        char *m = access(path, F_OK) != 0
                      ? msp_asprintf("%s: cannot read the config (%s)%s", path, strerror(errno),
                                     by_env ? "; MSPROBE_PATH names it" : "")
                      : msp_asprintf("%s: %s", path, d);
        int rc = fail_boot(m ? m : d);
        free(m);
        return rc;
    }
    msp_g.have_cfg = 1;
    return 0;
}

static int boot_with(const char *path, int cc_env);

/* A script's PrecisionDebugger(config_path=...) in a process the shim found
 * no config for (msp_py_boot_script): the config is read, the script's
 * arguments applied to it, and the boot goes on. */
static int late_load(const char *path)
{
    return load_config(path, 0);
}

static int late_boot(void)
{
    return boot_with(msp_cfg->source, msp_env_flag("MSPROBE_CONFIG_CHECK"));
}

static void boot_init(void)
{
    msp_shim_log_init();
    msp_test_hooks_init();
    msp_ident_boot();
}

/* The stub saw `import msprobe` in a process it found no config for: provide
 * msprobe's modules (unless it is installed); the script's PrecisionDebugger
 * names the config, and the rest of the boot waits for it. */
MSP_EXPORT int msp_py_boot_script(void);
int msp_py_boot_script(void)
{
    boot_init();
    msp_debugger_install(late_load, late_boot);
    return 0;
}

MSP_EXPORT int msp_py_boot(void);
int msp_py_boot(void)
{
    boot_init();
    const char *env = getenv("MSPROBE_PATH");
    const char *path = (env && *env) ? env
                                     : (access("msprobe.json", F_OK) == 0 ? "msprobe.json" : NULL);
    int cc_env = msp_env_flag("MSPROBE_CONFIG_CHECK");

    const char *list = getenv("MSPROBE_LIST_APIS");
    if (list && *list) {
        g_list_path = list; /* the environment outlives the process's Python */
        path = NULL;
        cc_env = 0;
    }
    /* Monitor mode (msprobe-monitor(1)): msprobe's monitor config, checked now;
     * a dump config is then read only when MSPROBE_PATH names one. */
    const char *mon = getenv("MSPROBE_MONITOR_CONFIG");
    if (mon && *mon && !g_list_path) {
        char *msg = NULL;
        if (msp_mon_boot(mon, &msg) != 0) {
            int rc = fail_boot(msg ? msg : "monitor: out of memory");
            free(msg);
            return rc;
        }
        if (!(env && *env))
            path = NULL;
    }
    if (path && load_config(path, env && *env) != 0)
        return -1;
    /* A script written against msprobe imports it: provide it, unless it is there. */
    if (msp_g.have_cfg)
        msp_debugger_install(NULL, NULL);
    return boot_with(path, cc_env);
}

/* Everything after the config is read (path, or NULL: none). */
static int boot_with(const char *path, int cc_env)
{
    const msp_config_t *c = msp_cfg;
    if (msp_g.have_cfg && c->n_ignored) {
        /* msprobe's config.json: say once which of its keys change nothing here */
        size_t len = 1;
        for (size_t i = 0; i < c->n_ignored; i++)
            len += strlen(c->ignored[i]) + 2;
        char *keys = calloc(1, len);
        for (size_t i = 0; keys && i < c->n_ignored; i++) {
            if (i)
                strcat(keys, ", ");
            strcat(keys, c->ignored[i]);
        }
        msp_shim_msg("%s: ignored (not applicable to msprobe-c): %s", c->source ? c->source : path,
                     keys ? keys : "some keys");
        free(keys);
    }
    if (msp_g.have_cfg && c->dump_enable_set && c->source) {
        /* followed during the run: by its full name, should the script chdir */
        char *abs = realpath(c->source, NULL);
        if (abs)
            msp_step_watch_config(abs);
        free(abs);
    }
    if (msp_g.have_cfg && c->dump_disabled) {
        msp_g.dump_off = 1;
        msp_shim_msg("%s: dump_enable is false: nothing is dumped until it is true (the file is "
                     "read again at the end of each step)",
                     c->source ? c->source : path);
    }
    msp_g.cc_on = cc_env || (msp_g.have_cfg && c->has_config_check);

    if (msp_g.have_cfg && c->has_dump) {
        char *msg = NULL;
        if (check_api_list(c, &msg) != 0) {
            char *m = msp_asprintf("%s: dump.api_list%s", c->source ? c->source : path,
                                   msg ? msg : ": out of memory");
            int rc = fail_boot(m ? m : "dump.api_list: out of memory");
            free(m);
            free(msg);
            return rc;
        }
        const char *why = NULL;
        if (msp_mkdirs(c->dump_path) != MSP_OK)
            why = msp_last_error();
        else if (access(c->dump_path, W_OK) != 0)
            why = strerror(errno);
        if (why) {
            char *m = msp_asprintf("%s: %s: cannot write to \"%s\" (%s); choose a writable "
                                   "directory",
                                   c->source ? c->source : path,
                                   c->msprobe_format ? "dump_path"
                                                     : "dump.common_dump_settings.dump_path",
                                   c->dump_path, why);
            int rc = fail_boot(m ? m : why);
            free(m);
            return rc;
        }
        msp_g.api_on = c->dump_mode == MSP_DUMP_API || c->dump_mode == MSP_DUMP_MIX;
        /* The seed format lists module paths beside API names even in "api"
         * mode ("name: a PyTorch API or a module's full path"): a listed
         * module is dumped whatever the mode; an empty list means every
         * module only in module and mix modes. */
        int lists_module = 0;
        for (size_t i = 0; i < c->n_api_list; i++) /* a fragment: modules at L0 and mix only */
            lists_module |= strncmp(c->api_list[i].name, "torch.", 6) != 0 &&
                            !c->api_list[i].fragment;
        msp_g.module_on = c->dump_mode == MSP_DUMP_MODULE || c->dump_mode == MSP_DUMP_MIX ||
                          lists_module;
        size_t qmb = (size_t)msp_env_mib("MSPROBE_QUEUE_MB", 256);
        msp_dq_params_t p = {c->dump_path,
                             c->task == MSP_TASK_STATISTICS || c->task == MSP_TASK_MD5,
                             msp_task_names[c->task],
                             msp_dump_mode_names[c->dump_mode],
                             qmb << 20,
                             msp_env_flag("MSPROBE_SYNC"),
                             c->task == MSP_TASK_OVERFLOW,
                             c->overflow_nums,
                             msp_env_range("MSPROBE_PACK_KIB", 0, 0, 1024, "KiB") << 10};
        if (msp_dq_init(&p) != 0)
            return fail_boot("out of memory starting the dump");
        /* msp_g.dumping is set once torch is patched (msp_proc_install). */
    }
    if (!(msp_g.have_cfg && c->has_dump) && !msp_g.cc_on && !g_list_path && !msp_g.mon_on)
        return 0; /* a config with nothing to do */
    if (msp_g.have_cfg && c->has_dump)
        msp_custom_setup();

    msp_wrap_handle(MSP_W_IMPORT, import_call);
    msp_patch_kinds();
    if (msp_wrap_types_init() != 0 || msp_bwd_types_init() != 0) {
        msp_py_warn_error("boot", "cannot set up the shim; nothing is dumped");
        msp_state_disable();
        return 0;
    }
    if (!g_list_path)
        msp_proc_boot();
    if (msp_g.disabled)
        return 0; /* a multiprocessing helper: it never writes */

    if (msp_g.cc_on) {
        msp_err crc = msp_cc_setup(msp_g.have_cfg ? c : NULL);
        if (crc == MSP_ERR_CONFIG)
            return fail_boot(msp_last_error());
        if (crc != MSP_OK) {
            msp_shim_msg("warning: config_check is off: %s", msp_last_error());
            msp_g.cc_on = 0;
        }
    }

    g_builtins = PyImport_ImportModule("builtins");
    g_orig_import = g_builtins ? PyObject_GetAttrString(g_builtins, "__import__") : NULL;
    PyObject *hook = g_orig_import ? msp_wrap_new(g_orig_import, "__import__", MSP_W_IMPORT, 0, 0)
                                   : NULL;
    if (!hook || PyObject_SetAttrString(g_builtins, "__import__", hook) < 0) {
        msp_py_warn_error("boot", "cannot watch imports; nothing is dumped");
        Py_XDECREF(hook);
        msp_state_disable();
        return 0;
    }
    Py_DECREF(hook);
    msp_g.booted = 1;
    msp_custom_resolve(); /* modules imported before the script (sitecustomize) */
    after_import();       /* torch may already be there (sitecustomize) */
    return 0;
}
