/* The shim's shared state (dump_py.h says what each is) and the one helper
 * every layer uses to run embedded Python: defined here, at the bottom, so
 * that using them calls no file above. */
#include "dump_py.h"

msp_shim_t msp_g;
static msp_config_t g_cfg;
const msp_config_t *const msp_cfg = &g_cfg;
_Thread_local int msp_t_depth;
_Thread_local int msp_t_data_depth;
_Thread_local int msp_t_listed;
msp_test_hooks_t msp_test;

msp_config_t *msp_cfg_boot(void)
{
    return &g_cfg;
}

void msp_state_disable(void)
{
    msp_g.disabled = 1;
}

void msp_test_hooks_init(void)
{
    msp_test.host_copy = msp_env_flag("MSPROBE_TEST_HOST_COPY");
    msp_test.device_stats = msp_env_flag("MSPROBE_TEST_DEVICE_STATS");
    msp_test.stack_attrs = msp_env_flag("MSPROBE_TEST_STACK_ATTRS");
    msp_test.stack_lines = msp_env_flag("MSPROBE_TEST_STACK_LINES");
    msp_test.monitor_alone = msp_env_flag("MSPROBE_TEST_MONITOR_ALONE");
}

PyObject *msp_py_run_source(const char *src, const char *name)
{
    PyObject *bi = PyImport_ImportModule("builtins");
    PyObject *ns = PyDict_New();
    PyObject *nm = PyUnicode_FromString(name);
    PyObject *r = NULL;
    if (bi && ns && nm && PyDict_SetItemString(ns, "__name__", nm) == 0)
        r = PyObject_CallMethod(bi, "exec", "sO", src, ns);
    Py_XDECREF(nm);
    Py_XDECREF(bi);
    if (!r)
        Py_CLEAR(ns);
    Py_XDECREF(r);
    return ns;
}
