/* libmsprobe_preload.so: the LD_PRELOAD stub.
 *
 * It links neither Python nor HDF5, so it is harmless in every process that
 * inherits LD_PRELOAD (bash, gcc, make...). In a Python process it registers an
 * audit hook; at the first cpython.run_* event the interpreter is ready, and
 * only then, and only when there is something to do (a msprobe.json to read
 * or config_check asked for), it dlopen()s libmsprobe_py.so from its own
 * directory and hands over. With nothing to do it keeps watching the "import"
 * event for one name, msprobe: a script written against msprobe's
 * PrecisionDebugger names its config there (py_debugger.c). Python symbols in that library resolve from the
 * running interpreter: the executable exports them when libpython is linked
 * statically (Debian), libpython.so provides them globally otherwise (pyenv).
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MSP_EXPORT __attribute__((visibility("default")))

typedef int (*audit_hook_fn)(const char *event, void *args, void *ud);
typedef int (*add_audit_hook_fn)(audit_hook_fn hook, void *ud);
typedef int (*py_boot_fn)(void);
typedef void (*py_step_fn)(void);

static int g_booted; /* touched only with the GIL held */
/* No config at the first run event: the Python side is loaded only if the
 * script imports msprobe (its PrecisionDebugger names the config then). */
static int g_watch_msprobe;
typedef void *(*tuple_item_fn)(void *tuple, long i);
typedef int (*compare_ascii_fn)(void *str, const char *s);
static tuple_item_fn g_tuple_item;
static compare_ascii_fn g_compare_ascii;
static py_step_fn g_py_step; /* set once by the boot, read by msprobe_step */

MSP_EXPORT void msprobe_step(void);

static void stub_msg(const char *what, const char *detail)
{
    char line[PATH_MAX + 256];
    int n = snprintf(line, sizeof line, "msprobe: %s%s%s\n", what, detail ? ": " : "",
                     detail ? detail : "");
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, line,
                          (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
}

/* Only a config file, MSPROBE_CONFIG_CHECK, MSPROBE_LIST_APIS (msprobe dump
 * --list-apis) or MSPROBE_MONITOR_CONFIG (msprobe monitor) makes the shim do anything; a Python run without them (pip, a
 * helper script) never loads HDF5. */
static int shim_wanted(void)
{
    const char *p = getenv("MSPROBE_PATH");
    const char *cc = getenv("MSPROBE_CONFIG_CHECK");
    const char *ls = getenv("MSPROBE_LIST_APIS");
    const char *mon = getenv("MSPROBE_MONITOR_CONFIG");
    if ((p && *p) || (cc && *cc) || (ls && *ls) || (mon && *mon))
        return 1;
    return access("msprobe.json", F_OK) == 0;
}

static int boot_python_side(const char *entry)
{
    Dl_info info;
    char path[PATH_MAX];
    if (!dladdr((void *)&boot_python_side, &info) || !info.dli_fname) {
        stub_msg("cannot find where libmsprobe_preload.so lives; dump disabled", NULL);
        return 0;
    }
    const char *slash = strrchr(info.dli_fname, '/');
    int dirlen = slash ? (int)(slash - info.dli_fname) : 1;
    snprintf(path, sizeof path, "%.*s/libmsprobe_py.so", dirlen, slash ? info.dli_fname : ".");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        stub_msg("cannot load the Python side; dump disabled", dlerror());
        return 0;
    }
    py_boot_fn boot = (py_boot_fn)dlsym(h, entry);
    py_step_fn step = (py_step_fn)dlsym(h, "msp_py_step");
    if (!boot || !step) {
        stub_msg("libmsprobe_py.so lacks its entry points; dump disabled", path);
        return 0;
    }
    /* The boot returns -1 with SystemExit(2) set when the config is bad: the
     * interpreter then reports nothing more and exits 2 before the script runs. */
    int rc = boot();
    if (rc == 0)
        __atomic_store_n(&g_py_step, step, __ATOMIC_RELEASE);
    return rc;
}

/* The "import" event's module name (its first argument, raised before any
 * finder runs) is msprobe or under it. */
static int imports_msprobe(void *args)
{
    void *name = g_tuple_item(args, 0);
    if (!name)
        return 0;
    return g_compare_ascii(name, "msprobe") == 0 || g_compare_ascii(name, "msprobe.pytorch") == 0;
}

/* Runs for every audit event of the process, with the GIL held: after the
 * first run event it costs one load and a branch. */
static int audit_hook(const char *event, void *args, void *ud)
{
    (void)args;
    (void)ud;
    if (g_booted) {
        if (!g_watch_msprobe || strcmp(event, "import") != 0 || !imports_msprobe(args))
            return 0;
        g_watch_msprobe = 0;
        return boot_python_side("msp_py_boot_script");
    }
    if (strncmp(event, "cpython.run_", 12) != 0)
        return 0;
    g_booted = 1;
    if (!shim_wanted()) {
        g_watch_msprobe = g_tuple_item && g_compare_ascii;
        return 0;
    }
    return boot_python_side("msp_py_boot");
}

__attribute__((constructor)) static void msp_preload_init(void)
{
    add_audit_hook_fn add = (add_audit_hook_fn)dlsym(RTLD_DEFAULT, "PySys_AddAuditHook");
    if (!add)
        return; /* not a Python process */
    g_tuple_item = (tuple_item_fn)dlsym(RTLD_DEFAULT, "PyTuple_GetItem");
    g_compare_ascii = (compare_ascii_fn)dlsym(RTLD_DEFAULT, "PyUnicode_CompareWithASCIIString");
    add(audit_hook, NULL);
}

/* Lets a training script mark step ends itself:
 *   ctypes.CDLL(None).msprobe_step()
 * ctypes releases the GIL around the call; the Python side takes it back. */
void msprobe_step(void)
{
    py_step_fn step = __atomic_load_n(&g_py_step, __ATOMIC_ACQUIRE);
    if (step)
        step();
}
