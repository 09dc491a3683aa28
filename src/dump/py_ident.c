/* Who this process is, for the dump: whether it may write (see
 * msp_proc_may_write in dump_py.h), its rank, and whether the step now
 * starting is dumped. The bottom of the runtime: it calls only the state. */
#include "dump_py.h"

#include <stdlib.h>
#include <unistd.h>

int msp_proc_may_write(void)
{
    return !msp_g.disabled && getpid() == msp_g.pid && msp_g.torch_seen &&
           (!msp_g.mp_child || msp_g.joined_group);
}

static PyObject *g_torch;
/* The rank: from the environment or torch.distributed, looked up at most once
 * a step (g_rank_step) until known for good (g_rank_final). */
static int64_t g_rank, g_rank_step = -1;
static int g_rank_final;

void msp_ident_init(PyObject *torch)
{
    if (!g_torch) {
        g_torch = torch;
        Py_INCREF(torch);
    }
}

static int env_int(const char *name, int64_t *out)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    long long x = strtoll(v, &end, 10);
    if (*end || x < 0)
        return 0;
    *out = x;
    return 1;
}

/* RANK / LOCAL_RANK win; otherwise torch.distributed once initialised; looked
 * up at most once per step until known for good. */
int64_t msp_current_rank(void)
{
    if (g_rank_final || g_rank_step == msp_g.step)
        return g_rank;
    g_rank_step = msp_g.step;
    if (env_int("RANK", &g_rank) || env_int("LOCAL_RANK", &g_rank)) {
        g_rank_final = 1;
        int64_t ws;
        if (env_int("WORLD_SIZE", &ws))
            msp_dq_set_world_size(ws);
        return g_rank;
    }
    if (!g_torch)
        return g_rank;
    msp_quiet_t quiet = msp_quiet_begin();
    PyObject *dist = PyObject_GetAttrString(g_torch, "distributed");
    PyObject *init = dist ? PyObject_CallMethod(dist, "is_available", NULL) : NULL;
    if (init && PyObject_IsTrue(init) == 1) {
        Py_DECREF(init);
        init = PyObject_CallMethod(dist, "is_initialized", NULL);
        if (init && PyObject_IsTrue(init) == 1) {
            PyObject *r = PyObject_CallMethod(dist, "get_rank", NULL);
            PyObject *ws = PyObject_CallMethod(dist, "get_world_size", NULL);
            if (r && ws) {
                g_rank = PyLong_AsLongLong(r);
                msp_dq_set_world_size(PyLong_AsLongLong(ws));
                g_rank_final = 1;
            }
            Py_XDECREF(r);
            Py_XDECREF(ws);
        }
    }
    Py_XDECREF(init);
    Py_XDECREF(dist);
    if (PyErr_Occurred())
        PyErr_Clear();
    msp_quiet_end(quiet);
    return g_rank;
}

int msp_step_wanted(int64_t step)
{
    if (msp_g.paused || msp_g.dump_off)
        return 0; /* the script's debugger.stop() (py_debugger.c), dump_enable false */
    if (!(msp_g.have_cfg && msp_cfg->has_dump && msp_step_set_contains(&msp_cfg->dump_iter, step) &&
          msp_proc_may_write()))
        return 0;
    /* A rank outside the config's rank set, once its rank is known, runs with
     * every hook passing straight through: nothing of it is read or copied,
     * so it trains at full speed. Until then records are only filtered when
     * submitted. */
    int64_t rank = msp_current_rank();
    if (g_rank_final && !msp_step_set_contains(&msp_cfg->ranks, rank)) {
        static int told;
        if (!told++)
            msp_shim_msg("rank %lld is not in the config's rank set: it dumps nothing and its "
                         "calls pass straight through",
                         (long long)rank);
        return 0;
    }
    return 1;
}

/* The one place that decides whether the current step is dumped: torch is
 * imported, the script has not paused the dump, and the step, the process
 * and its rank are the config's (msp_step_wanted). Called whenever one of
 * those changes: a step ends, torch arrives, the rank becomes known, the
 * script's PrecisionDebugger starts or stops. */
void msp_step_decide(void)
{
    msp_g.dumping = msp_g.torch_seen && msp_step_wanted(msp_g.step);
}

void msp_ident_boot(void)
{
    msp_g.pid = getpid();
}

void msp_ident_mp_child(void)
{
    msp_g.mp_child = 1;
}

void msp_ident_torch_seen(void)
{
    msp_g.torch_seen = 1;
    msp_step_decide();
}

void msp_ident_joined_group(void)
{
    msp_g.joined_group = 1;
    g_rank_step = -1; /* its rank is torch.distributed's now */
    msp_step_decide();
}
