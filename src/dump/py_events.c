/* The runtime's events and their listeners (config_check's collectors).
 * The dump side raises them (an import returned, an optimizer created, a
 * root forward about to run, a step ended, a seed call, a parsed command
 * line, the exit); listeners act on them instead of patching torch a second
 * time, and are never called by name. */
#include "dump_py.h"

#include <string.h>
#include <unistd.h>

#define MSP_MAX_LISTENERS 4
static msp_listener_t g_listeners[MSP_MAX_LISTENERS];
static int g_nlisteners;
static int g_exit_done;
static _Thread_local int t_seed_depth; /* seed calls made by seed functions */

/* ---- events --------------------------------------------------------------- */

int msp_listen(const msp_listener_t *l)
{
    if (g_nlisteners == MSP_MAX_LISTENERS)
        return -1;
    g_listeners[g_nlisteners++] = *l;
    return 0;
}

/* The fork guard of every event: forked children and disabled processes are silent. */
static int events_on(void)
{
    return g_nlisteners > 0 && !msp_g.disabled && getpid() == msp_g.pid;
}

/* Listeners run with the training's pending exception set aside and the
 * shim's depth raised: nothing they call is dumped or raises into training. */
typedef struct saved {
    PyObject *t, *v, *tb;
    msp_quiet_t quiet;
} saved_t;

static saved_t enter_listener(void)
{
    saved_t s;
    PyErr_Fetch(&s.t, &s.v, &s.tb);
    s.quiet = msp_quiet_begin();
    return s;
}

static void leave_listener(saved_t s)
{
    msp_quiet_end(s.quiet);
    if (PyErr_Occurred())
        PyErr_Clear();
    PyErr_Restore(s.t, s.v, s.tb);
}

/* Each listener's handler of event EV, if it has one, called with the
 * arguments given, between enter_listener and leave_listener. */
#define RAISE(EV, ...)                                                                             \
    do {                                                                                           \
        saved_t s_ = enter_listener();                                                             \
        for (int i_ = 0; i_ < g_nlisteners; i_++)                                                  \
            if (g_listeners[i_].EV)                                                                \
                g_listeners[i_].EV(__VA_ARGS__);                                                   \
        leave_listener(s_);                                                                        \
    } while (0)

void msp_ev_after_import(void)
{
    if (!events_on())
        return;
    RAISE(after_import, );
}

void msp_ev_optimizer_created(PyObject *optimizer)
{
    if (!events_on() || !optimizer)
        return;
    RAISE(optimizer_created, optimizer);
}

void msp_ev_root_forward(PyObject *module, PyObject *input)
{
    if (!events_on() || !module || !input || msp_t_depth > 0)
        return;
    RAISE(root_forward, module, input);
}

void msp_ev_step_end(int64_t step)
{
    if (!events_on())
        return;
    RAISE(step_end, step);
}

void msp_ev_optimizer_step(PyObject *optimizer, int after)
{
    if (!events_on() || !optimizer)
        return;
    RAISE(optimizer_step, optimizer, after);
}

/* Once per process, and only where this process may write (a DataLoader
 * worker, a pool child or the resource tracker never writes a pack). */
void msp_ev_exit(const char *how)
{
    if (g_exit_done || !events_on())
        return;
    g_exit_done = 1;
    if (!msp_proc_may_write())
        return;
    RAISE(exit, how);
}

/* parse_known_args: the namespace of the outermost call (a subparser's own
 * call parses into a scratch namespace that the outer one then absorbs). */
static _Thread_local int t_parse_depth;
static PyObject *parse_call(PyObject *orig, PyObject *args, PyObject *kw)
{
    t_parse_depth++;
    PyObject *out = PyObject_Call(orig, args, kw);
    t_parse_depth--;
    if (!out || t_parse_depth > 0 || msp_t_depth > 0 || !events_on() || !PyTuple_Check(out) ||
        PyTuple_Size(out) < 1)
        return out;
    RAISE(args_parsed, PyTuple_GetItem(out, 0));
    return out;
}

static PyObject *msp_ev_call(PyObject *orig, const char *name, PyObject *args, PyObject *kw)
{
    int seed = strncmp(name, "seed:", 5) == 0;
    t_seed_depth += seed;
    PyObject *out = PyObject_Call(orig, args, kw);
    t_seed_depth -= seed;
    /* the shim's own calls raise no event; data loading (a dataset seeding
     * each sample, as torchvision's FakeData does) is the script's own */
    if (!out || msp_t_depth > msp_t_data_depth || !events_on())
        return out;
    if (seed && t_seed_depth == 0) {
        RAISE(seed, name + 5, args, kw);
    }
    return out;
}

/* torch.distributed.init_process_group: a spawned child that joins a process
 * group is a rank (torch.multiprocessing.spawn): it writes from now on. */
static PyObject *group_call(PyObject *orig, PyObject *args, PyObject *kw)
{
    PyObject *out = PyObject_Call(orig, args, kw);
    if (out && !msp_g.disabled && getpid() == msp_g.pid) {
        msp_ident_joined_group();
    }
    return out;
}

PyObject *msp_ev_dispatch(PyObject *orig, const char *name, PyObject *args, PyObject *kw)
{
    if (strcmp(name, "init_process_group") == 0)
        return group_call(orig, args, kw);
    if (strcmp(name, "parse_known_args") == 0)
        return parse_call(orig, args, kw);
    return msp_ev_call(orig, name, args, kw);
}
