/* The runtime's process identity and ways out; the wrappers that raise its
 * events (py_events.c).
 *
 * Identity: spawn children and multiprocessing's helpers are told apart
 * from the command line at boot (which process may write: py_ident.c).
 * Ways out: a normal exit (Python's atexit, then Py_AtExit), os._exit, and
 * SIGTERM all end with the same steps: listeners' exit (the config_check
 * pack), then the writer drained and its last file in place, then the
 * warnings' counts. Ctrl-C keeps its exit status and SIGTERM its signal. */
#include "py_wrap.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_dump_done;
static volatile int g_keyboard_interrupt; /* the script ended with an unhandled Ctrl-C */
static PyObject *g_orig_os_exit;

/* ---- identity ----------------------------------------------------------- */

/* The command line as the interpreter got it (sys.orig_argv, Python >= 3.10),
 * else sys.argv, which at boot still holds what follows -c. */
static void classify_command_line(void)
{
    PyObject *argv = PySys_GetObject("orig_argv"); /* borrowed */
    if (!argv)
        argv = PySys_GetObject("argv");
    Py_ssize_t n = argv && PyList_Check(argv) ? PyList_Size(argv) : 0;
    int after_c = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyList_GetItem(argv, i);
        PyObject *b = a && PyUnicode_Check(a) ? PyUnicode_AsUTF8String(a) : NULL;
        const char *s = b ? PyBytes_AsString(b) : NULL;
        if (s && strcmp(s, "--multiprocessing-fork") == 0) {
            msp_ident_mp_child();
        } else if (s && after_c) {
            /* multiprocessing's own helpers run "python -c 'from multiprocessing.X ...'":
             * spawn children (pools, DataLoader workers, torch.multiprocessing.spawn
             * ranks) may become ranks; the resource tracker and forkserver never write. */
            if (strncmp(s, "from multiprocessing.spawn import", 33) == 0)
                msp_ident_mp_child();
            else if (strncmp(s, "from multiprocessing.", 21) == 0)
                msp_state_disable();
        }
        after_c = s && strcmp(s, "-c") == 0;
        Py_XDECREF(b);
    }
    PyErr_Clear();
}

/* ---- ways out ------------------------------------------------------------ */

/* Every way out: what the dump still holds goes to the writer, the warnings
 * only the end can give, then the listeners' exit (the config_check pack). */
static void run_exit(const char *how)
{
    msp_prep_release();     /* a script that never ran a module: its records are its dump */
    msp_dev_drain();        /* records held for device statistics, before anything ends */
    msp_api_exit_report();  /* api_list entries never dumped: one warning */
    msp_step_exit_report(); /* dump_iter steps never reached: one warning */
    if (msp_proc_may_write())
        msp_scope_exit_report(); /* a scope whose first record never ran: one warning */
    msp_ev_exit(how);
}

/* A spawned child that trained (ended steps) but may not write (it joined
 * no process group: mnist_hogwild's mp.Process trainers) leaves a note
 * beside the dump for the process that started it, which says in one line
 * at its exit how many such processes there were:
 *   DUMP_PATH/.undumped.<parent pid>.<child pid>  holding its step count. */
static void note_undumped_child(void)
{
    if (!msp_g.mp_child || msp_g.joined_group || msp_g.step == 0 || !msp_g.have_cfg ||
        !msp_cfg->has_dump || !msp_cfg->dump_path)
        return;
    char *p = msp_asprintf("%s/.undumped.%ld.%ld", msp_cfg->dump_path, (long)getppid(),
                           (long)getpid());
    char text[32];
    int n = snprintf(text, sizeof text, "%lld\n", (long long)msp_g.step);
    if (p && msp_mkdirs(msp_cfg->dump_path) == MSP_OK)
        (void)msp_write_file_atomic(p, text, (size_t)n);
    msp_clear_error();
    free(p);
}

/* The notes of this process's undumped children, counted and removed:
 * how many, and their steps in all. */
static int count_undumped_children(int64_t *steps)
{
    *steps = 0;
    if (!msp_g.have_cfg || !msp_cfg->has_dump || !msp_cfg->dump_path)
        return 0;
    char prefix[64];
    snprintf(prefix, sizeof prefix, ".undumped.%ld.", (long)getpid());
    DIR *d = opendir(msp_cfg->dump_path);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        char *p = msp_asprintf("%s/%s", msp_cfg->dump_path, e->d_name), *text = NULL;
        if (p && msp_read_file(p, 64, &text, NULL) == MSP_OK)
            *steps += strtoll(text, NULL, 10);
        if (p)
            unlink(p);
        free(text);
        free(p);
        n++;
    }
    if (d)
        closedir(d);
    msp_clear_error();
    return n;
}

/* The writer drained, the last file in place, then what only the end can say.
 * No Python here: it also runs after the interpreter is finalised. */
static void finish_dump(void)
{
    if (g_dump_done || getpid() != msp_g.pid)
        return;
    g_dump_done = 1;
    int wrote = msp_proc_may_write();
    msp_state_disable();
    msp_dq_shutdown();
    if (!wrote)
        note_undumped_child();
    int64_t child_steps = 0;
    int children = wrote ? count_undumped_children(&child_steps) : 0;
    if (children)
        msp_shim_msg("warning: %d process%s this one started (multiprocessing, spawn) ran "
                     "training (%lld steps in all) and %s not dumped: a spawned process "
                     "writes only once it joins a process group; to dump %s, call "
                     "torch.distributed.init_process_group in %s (each a rank, as "
                     "torch.multiprocessing.spawn ranks are), or run %s as a script of its own "
                     "under msprobe dump",
                     children, children == 1 ? "" : "es", (long long)child_steps,
                     children == 1 ? "was" : "were", children == 1 ? "it" : "them",
                     children == 1 ? "it" : "each", children == 1 ? "it" : "each");
    /* "manual": the script said it ends steps itself; one step can be what it
     * meant. Only a run that trained (a backward pass was recorded) gets the
     * step_trigger advice: not one that crashed before training, nor a parent
     * whose children trained. */
    if (wrote && msp_g.have_cfg && msp_cfg->has_dump && msp_g.step == 0 && msp_g.order > 0 &&
        msp_cfg->step_trigger != MSP_STEP_MANUAL && !msp_g.script_steps &&
        msp_dq_backward_records() > 0)
        msp_shim_msg("warning: no step ended in this run (step_trigger \"%s\"), so the whole "
                     "run was step 0: set step_trigger (\"backward\", \"forward\") in "
                     "msprobe.json, or call msprobe_step() where a step ends",
                     msp_cfg->step_trigger == MSP_STEP_OPTIMIZER  ? "optimizer"
                     : msp_cfg->step_trigger == MSP_STEP_BACKWARD ? "backward"
                                                                  : "forward");
    msp_shim_warn_summary();
}

static void at_exit(void)
{
    if (getpid() != msp_g.pid)
        return;
    finish_dump();
    /* CPython ends a run stopped by Ctrl-C by killing itself with SIGINT
     * (status 130), but importing a module at exit (the pack's collectors
     * do) clears the flag it keeps for that: re-raise it ourselves. */
    if (g_keyboard_interrupt) {
        signal(SIGINT, SIG_DFL);
        kill(getpid(), SIGINT);
    }
}

static void atfork_child(void)
{
    /* DataLoader workers and other forks dump nothing; the writer thread does
     * not exist here, so its state is dropped, not joined. */
    msp_state_disable();
    msp_dq_forget_after_fork();
    msp_dev_forget_after_fork();
}

static PyObject *py_atexit(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (getpid() != msp_g.pid)
        Py_RETURN_NONE;
    /* Set by the interpreter when the script ended with an unhandled exception. */
    PyObject *lt = PySys_GetObject("last_type"); /* borrowed */
    if (lt && PyType_Check(lt) && PyObject_IsSubclass(lt, PyExc_KeyboardInterrupt) == 1)
        g_keyboard_interrupt = 1;
    PyErr_Clear();
    run_exit("exit");
    Py_RETURN_NONE;
}

static PyObject *os_exit_hook(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    Py_ssize_t nargs = PyTuple_Size(args) + (kwargs ? PyDict_Size(kwargs) : 0);
    /* Only a call that will really end the process (one status argument):
     * a wrong call raises from the real function and training goes on. */
    if (nargs == 1 && getpid() == msp_g.pid) {
        run_exit("os._exit");
        Py_BEGIN_ALLOW_THREADS finish_dump();
        Py_END_ALLOW_THREADS
    }
    return PyObject_Call(g_orig_os_exit, args, kwargs);
}

/* SIGTERM (how Slurm and Kubernetes stop a job) kills a Python left with the
 * default disposition without any exit processing. Where the script had not
 * chosen a disposition, this Python-level handler writes what is pending,
 * then puts the default back and re-raises, so the process still dies of
 * SIGTERM (status 143). A handler the script installs later replaces it. */
static PyObject *on_sigterm(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    if (getpid() == msp_g.pid && !g_dump_done) {
        run_exit("SIGTERM");
        Py_BEGIN_ALLOW_THREADS finish_dump();
        Py_END_ALLOW_THREADS
    }
    signal(SIGTERM, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    raise(SIGTERM);
    Py_RETURN_NONE; /* not reached */
}

static PyMethodDef g_atexit_def = {"msprobe_atexit", py_atexit, METH_NOARGS, NULL};
static PyMethodDef g_sigterm_def = {"msprobe_sigterm", on_sigterm, METH_VARARGS, NULL};
static PyMethodDef g_os_exit_def = {"_exit", (PyCFunction)(void (*)(void))os_exit_hook,
                                    METH_VARARGS | METH_KEYWORDS,
                                    "Exit to the system with the given status, without normal "
                                    "exit processing (msprobe writes its dump first)."};

/* os._exit skips Python's atexit handlers and C's, ours included: a script
 * ending with it (a common way to skip a hanging process-group teardown)
 * would lose the steps still queued and the config_check pack. */
static void hook_os_exit(void)
{
    PyObject *os = PyImport_ImportModule("os");
    g_orig_os_exit = os ? PyObject_GetAttrString(os, "_exit") : NULL;
    PyObject *hook = g_orig_os_exit ? PyCFunction_NewEx(&g_os_exit_def, NULL, NULL) : NULL;
    if (!hook || PyObject_SetAttrString(os, "_exit", hook) < 0) {
        PyErr_Clear();
        msp_shim_warn_once("os_exit", "cannot watch os._exit: a script ending with it loses "
                                      "the steps not yet written");
    }
    Py_XDECREF(hook);
    Py_XDECREF(os);
}

static void hook_sigterm(void)
{
    PyObject *sig = PyImport_ImportModule("signal");
    PyObject *cur = sig ? PyObject_CallMethod(sig, "getsignal", "i", SIGTERM) : NULL;
    PyObject *dfl = sig ? PyObject_GetAttrString(sig, "SIG_DFL") : NULL;
    if (cur && dfl && PyObject_RichCompareBool(cur, dfl, Py_EQ) == 1) {
        PyObject *h = PyCFunction_NewEx(&g_sigterm_def, NULL, NULL);
        PyObject *r = h ? PyObject_CallMethod(sig, "signal", "iO", SIGTERM, h) : NULL;
        if (!r)
            msp_py_warn_error("sigterm", "cannot watch SIGTERM: a job stopped with it loses "
                                         "the steps not yet written");
        Py_XDECREF(r);
        Py_XDECREF(h);
    }
    Py_XDECREF(cur);
    Py_XDECREF(dfl);
    Py_XDECREF(sig);
    PyErr_Clear();
}

void msp_proc_boot(void)
{
    classify_command_line();
    if (msp_g.disabled)
        return;
    pthread_atfork(NULL, NULL, atfork_child);
    Py_AtExit(at_exit);
    hook_os_exit();
    hook_sigterm();
    PyObject *atexit_mod = PyImport_ImportModule("atexit");
    PyObject *cb = atexit_mod ? PyCFunction_NewEx(&g_atexit_def, NULL, NULL) : NULL;
    PyObject *r = cb ? PyObject_CallMethod(atexit_mod, "register", "O", cb) : NULL;
    if (!r)
        msp_py_warn_error("atexit", "cannot run at exit: the config_check pack will be missing");
    Py_XDECREF(r);
    Py_XDECREF(cb);
    Py_XDECREF(atexit_mod);
    PyErr_Clear();
}

static PyObject *event_call(msp_wrap_t *w, PyObject *args, PyObject *kw)
{
    return msp_ev_dispatch(w->orig, w->name, args, kw);
}

/* bind: orig is a function in a class dict, and the wrapper must bind like one. */
static int wrap_event_as(PyObject *owner, const char *attr, const char *name, int bind)
{
    msp_wrap_handle(MSP_W_EVENT, event_call);
    PyObject *orig = owner ? PyObject_GetAttrString(owner, attr) : NULL;
    int rc = -1;
    if (orig && msp_is_wrap(orig)) {
        rc = 0; /* already ours: one wrapper per attribute */
    } else if (orig) {
        PyObject *w = msp_wrap_new(orig, name, MSP_W_EVENT, 0, bind);
        rc = w && PyObject_SetAttrString(owner, attr, w) == 0 ? 0 : -1;
        Py_XDECREF(w);
    }
    Py_XDECREF(orig);
    PyErr_Clear();
    return rc;
}

static int wrap_event(PyObject *owner, const char *attr, const char *name)
{
    return wrap_event_as(owner, attr, name, 0);
}

int msp_proc_wrap_argparse(PyObject *argparse_module)
{
    PyObject *cls = PyObject_GetAttrString(argparse_module, "ArgumentParser");
    int rc = cls ? wrap_event_as(cls, "parse_known_args", "parse_known_args", 1) : -1;
    Py_XDECREF(cls);
    PyErr_Clear();
    return rc;
}

int msp_proc_wrap_seed(PyObject *owner, const char *attr, const char *api)
{
    char name[96];
    snprintf(name, sizeof name, "seed:%s", api);
    return wrap_event(owner, attr, name);
}

void msp_proc_install(PyObject *torch)
{
    if (msp_g.mp_child) {
        PyObject *dist = PyObject_GetAttrString(torch, "distributed");
        PyErr_Clear();
        PyObject *c10d = PyImport_ImportModule("torch.distributed.distributed_c10d");
        PyErr_Clear();
        if (dist && PyObject_HasAttrString(dist, "init_process_group"))
            wrap_event(dist, "init_process_group", "init_process_group");
        if (c10d && PyObject_HasAttrString(c10d, "init_process_group"))
            wrap_event(c10d, "init_process_group", "init_process_group");
        Py_XDECREF(dist);
        Py_XDECREF(c10d);
        PyErr_Clear();
    }
    msp_ident_torch_seen();
}
