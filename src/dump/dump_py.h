/* Internals shared by the Python side of the dump shim (libmsprobe_py.so).
 * Built against the limited API so one binary loads into every CPython >= 3.8.
 *
 * Its layers, each calling only those below it (declared in scripts/layers.txt,
 * which scripts/callgraph.py checks in ctest):
 *   state and messages     py_state.c, py_log.c (a Python error as a message)
 *   helpers                py_accel.c, py_stack.c, py_args.c, py_dist.c, py_apilist.c,
 *                          py_sig.c
 *   identity, events       py_ident.c, py_events.c (listeners, never called by name)
 *   records                py_devwin.c < py_devstats.c < py_devhold.c < py_links.c,
 *                          py_recent.c, py_params.c < py_tensor.c < py_values.c
 *                          < py_optim.c, py_record.c (a record's way out)
 *   the wrapper type       py_wrap.c (handlers registered per kind), py_bwd.c
 *   steps                  py_step.c (layers above watch a step's end)
 *   calls                  py_module.c < py_apirec.c, py_patch.c
 *   runtime                py_proc.c (process identity, ways out), py_cc*.c (a listener)
 *   script API             py_debugger.c (msprobe's PrecisionDebugger)
 *   boot                   py_boot.c
 * The writer (dump_writer.c, its memory dump_pool.c) is below them all, and
 * has no Python; below it, the one logger (shim_log.c, shim_log.h). */
#ifndef MSP_DUMP_PY_H
#define MSP_DUMP_PY_H

#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x03080000
#endif
#include <Python.h>

#include <stdint.h>
#include <sys/types.h>

#include "msprobe/common.h"
#include "msprobe/config.h"
#include "msprobe/format.h"
#include "dump_writer.h"
#include "shim_log.h"

#define MSP_EXPORT __attribute__((visibility("default")))

/* ---- the API list (py_apilist.c) ----
 * Discovered at boot from the running torch by api_discover.py (compiled in
 * as msp_api_discover_py); the table of torch 1.13 (api_table.c) is the
 * fallback when discovery fails or MSPROBE_API_TABLE=1. */
extern const char *const msp_api_table[];
extern const size_t msp_api_table_len;
extern const char msp_api_discover_py[];
extern const char msp_accel_copy_py[];
extern const char msp_msprobe_api_py[];
/* exec Python source src in a fresh namespace named name: the namespace
 * dict (new reference), or NULL with the error set (py_state.c). */
PyObject *msp_py_run_source(const char *src, const char *name);
/* Discover once (GIL held); 1: discovered, 2: the table is used. */
int msp_api_discover(PyObject *torch);
/* Whether name is in the list in use (the table until discovery ran). */
int msp_api_known(const char *name);
/* The sorted list in use, *n names. */
const char *const *msp_api_list(size_t *n);
/* Write "NAME<TAB>RECORD" lines of this torch's list to path; 0 on success. */
int msp_api_write_list(PyObject *torch, const char *path);
/* Closest entry by edit distance, or NULL when nothing is close. */
const char *msp_api_near(const char *name);
/* The namespace a full API name is in ("torch.nn.functional." holds
 * "torch.nn.functional.relu", attribute "relu", records "Functional.relu"),
 * or NULL; *attr: what follows the namespace. */
typedef struct msp_api_space {
    const char *path, *prefix;
    int bind; /* its functions are methods (torch.Tensor) */
} msp_api_space_t;
const msp_api_space_t *msp_api_space(const char *full, const char **attr);

/* ---- shared state; touched with the GIL held unless noted ---- */
/* The config the dump runs with (py_state.c), read-only: written only by the
 * boot (py_boot.c) and by a script's PrecisionDebugger, which is a late boot
 * (py_debugger.c), through msp_cfg_boot(). What changes during the run
 * (msprobe's dump_enable) is msp_g.dump_off, never the config. */
extern const msp_config_t *const msp_cfg;
msp_config_t *msp_cfg_boot(void);

typedef struct msp_shim {
    int have_cfg;          /* msp_cfg holds a config that was read */
    volatile int disabled; /* forked child, or boot gave up: every hook passes through */
    int booted;
    int api_on, module_on;
    int64_t step;
    int dumping;   /* the current step is in dump_iter and dump is configured */
    int64_t order; /* records made in this step */
    int cc_on;
    /* process identity: written by py_ident.c alone */
    pid_t pid;
    int torch_seen;   /* torch was imported and patched in this process */
    int mp_child;     /* a multiprocessing spawn child: writes only once it
                                 joins a process group (torch.multiprocessing.spawn ranks) */
    int joined_group; /* torch.distributed.init_process_group returned */
    /* a script driving the dump through msprobe's PrecisionDebugger (py_debugger.c) */
    int script_steps; /* only its debugger.step() ends a step */
    int paused;       /* outside its start() .. stop(): nothing is recorded */
    /* msprobe's dump_enable, as the config file says now (py_step.c reads it
     * again at each step's end while cfg.dump_enable_set) */
    int dump_off;
    int mon_on; /* monitor mode (MSPROBE_MONITOR_CONFIG; py_monitor.c) */
} msp_shim_t;

extern msp_shim_t msp_g;
/* From now on every hook passes through (a forked child, a DataLoader
 * worker, a boot that gave up, a run a script ended): the one writer of
 * msp_g.disabled, which is never cleared. */
void msp_state_disable(void);

/* The directions (MSP_DIR_*) whose records the config keeps (msprobe's
 * data_mode forward / backward): what an API or module is hooked for when no
 * list names it, and what msp_rec_wanted lets through. */
static inline unsigned msp_dump_dirs(void)
{
    unsigned d = msp_g.have_cfg ? msp_cfg->dump_dirs : 0;
    return d ? d : MSP_DIR_FORWARD | MSP_DIR_BACKWARD;
}

/* The tests' switches, read once at boot, in one place (not documented to
 * users): MSPROBE_TEST_HOST_COPY sends CPU tensors through the accelerator
 * copy path (py_tensor.c), MSPROBE_TEST_DEVICE_STATS through the device
 * statistics (py_devstats.c), so both run on a machine without a GPU;
 * MSPROBE_TEST_STACK_ATTRS walks call sites by frame attributes, the way of a
 * Python without PyFrame_GetBack, and MSPROBE_TEST_STACK_LINES by their line
 * numbers, the way of a Python without PyFrame_GetLasti (py_stack.c);
 * MSPROBE_TEST_MONITOR_ALONE reduces every device tensor of monitor mode
 * alone, as a large one is (py_monitor_stats.c). */
typedef struct msp_test_hooks {
    int host_copy, device_stats, stack_attrs, stack_lines, monitor_alone;
} msp_test_hooks_t;
extern msp_test_hooks_t msp_test;
void msp_test_hooks_init(void);
/* Nesting depth of wrapped calls on this thread: only depth 0 is recorded, and
 * the shim raises it around its own torch calls so they are never recorded. */
extern _Thread_local int msp_t_depth;
/* A stretch of the shim's own work, whose Python calls are not the model's
 * (nothing inside is recorded or dispatched as an event): msp_quiet_begin
 * raises the thread's depth and returns a token of the depth it found;
 * msp_quiet_end(token) puts that depth back, however the stretch left it.
 * msp_quiet_begin_if(0) is a token that changes nothing. */
typedef struct msp_quiet {
    int depth;
} msp_quiet_t;
static inline msp_quiet_t msp_quiet_begin_if(int on)
{
    msp_quiet_t q = {msp_t_depth};
    msp_t_depth += on != 0;
    return q;
}
static inline msp_quiet_t msp_quiet_begin(void)
{
    return msp_quiet_begin_if(1);
}
static inline void msp_quiet_end(msp_quiet_t q)
{
    msp_t_depth = q.depth;
}
/* The part of msp_t_depth that is data loading (a DataLoader fetch, a
 * Dataset's constructor): not recorded as model calls, but the script's
 * own code all the same, so its events (a per-sample seed call) still count. */
extern _Thread_local int msp_t_data_depth;
/* Forwards running on this thread of modules the api_list names, in mix mode:
 * every API called inside them is recorded (py_module.c, py_apirec.c). */
extern _Thread_local int msp_t_listed;

/* ---- messages: shim_log.h (shim_log.c), and Python's side of them (py_log.c) ---- */
/* Clear a pending Python error, as one warning (py_log.c). */
void msp_py_warn_error(const char *kind, const char *what);
/* Text of a Python object into buf (UTF-8, cut with "..."); never raises. */
void msp_obj_text(PyObject *o, int use_repr, char *buf, size_t n);

/* ---- accel_copy.py (py_accel.c): loaded at the first device tensor ----
 * A function of it (borrowed; NULL with the error set: then the caller copies
 * synchronously), to_dlpack (new reference), and waiting for a copy's event
 * (0: done; -1: a warning was given). msp_accel_init: torch's to_dlpack. */
void msp_accel_init(PyObject *to_dlpack);
PyObject *msp_accel_fn(const char *name);
PyObject *msp_to_dlpack(PyObject *t);
int msp_wait_event(PyObject *event);
/* A tensor's version counter (_version: every in-place write moves it), or
 * -1 when it has none (inference mode); never raises. */
int64_t msp_tensor_version(PyObject *t);

/* ---- call context beside the arguments (py_args.c) ---- */
void msp_args_init(PyObject *torch);
/* Around adding one call's arguments: a tensor argument that is the object
 * of an earlier one gets the attribute "alias.<role>" = its first role. */
void msp_alias_begin(void);
void msp_alias_end(void);
void msp_alias_note(msp_dq_rec_t *r, const char *role, PyObject *o);
/* The attribute "autocast" when autocast is on for the call. */
void msp_rec_add_autocast(msp_dq_rec_t *r);
/* ---- call sites (py_stack.c) ---- */
/* The user code's frames of the current call (torch's own skipped), as text
 * to put in a record's `stack` (malloc'd), or NULL (off, or none found). */
char *msp_stack_capture(void);
/* At submit: r->stack becomes the record's attribute "stack", or "@RECORD"
 * when an earlier record of this step carries the same text. */
void msp_stack_commit(msp_dq_rec_t *r);
/* Whether the call about to be recorded, of callee (the shim's wrapper), is
 * made by Huawei's msprobe package's own code (its hooks' statistics, copies,
 * saves) rather than by the script: 1 only while a package named msprobe is
 * imported from files. A script's call that reaches callee through msprobe's
 * own API wrapper is the script's. */
int msp_stack_msprobe_call(PyObject *callee);
/* Where data preparation ends (py_record.c). A frame of the current call, by
 * identity (never dereferenced: it may be gone when looked at), and where in
 * its code it is. */
typedef struct msp_frame_ref {
    const void *frame, *code;
    long pos;
} msp_frame_ref_t;
/* The loops that call the model: a frame, and the ranges of its code that
 * the loops around its call cover, innermost first (lo[0]..hi[0]), at most
 * MSP_FRAME_LOOPS of them. */
#define MSP_FRAME_LOOPS 4
typedef struct msp_frame_loop {
    const void *frame, *code;
    long lo[MSP_FRAME_LOOPS], hi[MSP_FRAME_LOOPS];
    int n;
} msp_frame_loop_t;
/* The current call's frames, innermost first, at most max: how many (0 when
 * frames cannot be walked). Costs no Python call. */
int msp_stack_refs(msp_frame_ref_t *out, int max);
/* As a root module's forward begins: the frame that calls it (torch's own
 * skipped), or the nearest frame outwards from it, whose code has a loop
 * around where it is; 1 with *loop set, 0 when no such frame is found. */
int msp_stack_call_loop(msp_frame_loop_t *loop);
/* The innermost of loop's loops that ref is inside (ref in loop's frame, at a
 * place inside it): its index, or -1 when none. */
int msp_stack_loop_of(const msp_frame_ref_t *ref, const msp_frame_loop_t *loop);

/* ---- torch.distributed calls (py_dist.c) ----
 * The attributes "group" (the global ranks of the call's process group, as
 * ranges: "0-3") and "peer" (the rank at the other end: send's dst, recv's
 * src, a rooted collective's src or dst), when they can be told. api is the
 * record's API name ("Distributed.send"), fn the wrapped function, out what
 * it returned. GIL held; never raises. */
void msp_dist_add_context(msp_dq_rec_t *r, const char *api, PyObject *fn, PyObject *args,
                          PyObject *kw, PyObject *out);

/* ---- who this process is (py_ident.c) ----
 *
 * Which processes write: the booted process once it imported torch, and the
 * ranks it starts; never forked children (DataLoader workers), spawn-pool
 * children that join no process group, multiprocessing helpers (resource
 * tracker, forkserver) or a Python that never imports torch. */
int msp_proc_may_write(void);
/* torch, for the rank (once; at step install). */
void msp_ident_init(PyObject *torch);
int64_t msp_current_rank(void);
/* torch.distributed.init_process_group returned: a spawned child is a rank
 * from now on, its rank is looked up again, and the step may be dumped. */
void msp_ident_joined_group(void);
/* The rest of the identity, written here only: the booted process's pid
 * (a forked child differs from it), a multiprocessing spawn child (writes
 * only once it joins a group), torch imported and patched (the step may be
 * dumped from now on). */
void msp_ident_boot(void);
void msp_ident_mp_child(void);
void msp_ident_torch_seen(void);
/* Whether the step now starting is dumped (dump_iter, not paused by the script's
 * debugger.stop(), and this process may write). */
int msp_step_wanted(int64_t step);
/* Sets msp_g.dumping: the one place that decides it (from msp_step_wanted,
 * beside it here, below the steps layer so that every layer may call it). */
void msp_step_decide(void);

/* ---- msprobe's scope (py_scope.c): one range of records, in execution order ---- */
/* A scope is configured (msp_cfg->scope): every API and module is hooked and
 * asks below whether its forward record is in the range. */
int msp_scope_on(void);
/* An API call's forward record `name`: the directions it is recorded in (the
 * range opens at the first name and closes after the last). */
unsigned msp_scope_api(const char *name);
/* A module's forward `name` starts: its directions; *closes set when it is the
 * last name, whose end closes the range, *listed when (at mix) the list names
 * it, letting what runs inside it through until its end. */
unsigned msp_scope_module_begin(const char *name, int *closes, int *listed);
/* That module's forward ended: what msp_scope_module_begin set. */
void msp_scope_module_end(int closes, int listed);
/* A backward record `name` is being made: whether it is in the range (a
 * backward name opens and closes it as an API's does). */
int msp_scope_backward(const char *name);
/* At exit: the first name never ran (one warning). */
void msp_scope_exit_report(void);

/* ---- events (py_events.c) ---- */
/* Listeners of the runtime's events (config_check's collectors). Each
 * callback runs with the GIL held, in a writing process only, with the
 * shim's re-entrancy depth raised (what it calls is not dumped); a NULL
 * callback is skipped. */
typedef struct msp_listener {
    void (*after_import)(void);                                  /* an outermost import returned */
    void (*seed)(const char *api, PyObject *args, PyObject *kw); /* a seed call returned */
    void (*optimizer_created)(PyObject *optimizer);
    void (*root_forward)(PyObject *module, PyObject *input); /* before a root module runs */
    void (*step_end)(int64_t step);
    void (*exit)(const char *how);     /* "exit", "os._exit", "SIGTERM" */
    void (*args_parsed)(PyObject *ns); /* an outermost ArgumentParser.parse_known_args returned */
    /* an outermost optimizer.step() is about to run (after 0), or returned (after 1) */
    void (*optimizer_step)(PyObject *optimizer, int after);
} msp_listener_t;
int msp_listen(const msp_listener_t *l);
void msp_ev_after_import(void);
void msp_ev_optimizer_created(PyObject *optimizer);
void msp_ev_root_forward(PyObject *module, PyObject *input);
void msp_ev_step_end(int64_t step);
void msp_ev_optimizer_step(PyObject *optimizer, int after);
void msp_ev_exit(const char *how);
/* The call of an MSP_W_EVENT wrapper (seed functions, init_process_group). */
PyObject *msp_ev_dispatch(PyObject *orig, const char *name, PyObject *args, PyObject *kw);

/* ---- device statistics (py_devstats.c) ----
 * The statistics task and a tensor on an accelerator (or any tensor under
 * MSPROBE_TEST_DEVICE_STATS): its statistics are computed where it lives and
 * only they are read, when they arrive; its record is held until then. 1 when
 * tensor d (dtype, shape, device as the dump names it) was added to r so; 0 to
 * read it as the other tasks do. ptr: its first element's address, and dense:
 * its elements are exactly the memory from there (contiguous, or a permuted
 * dense layout such as a transpose), so that a view of the same memory (a
 * reshape, a flatten, a transpose) shares a waiting copy; NULL: unknown. */
int msp_dev_stats_add(msp_dq_rec_t *r, const char *role, PyObject *d, msp_dtype_t dtype, int ndim,
                      const int64_t *shape, const char *device, int rg, const void *ptr, int dense);
/* The end of one call's tensors (inputs, or outputs): those taken since take
 * their places in the windows. They are copied now, with every tensor that
 * waits, unless defer names their kind of window (then they wait for more). */
void msp_dev_call_end(int defer);
/* The kinds of window whose tensors may wait (MSP_DEV_*): float32 windows
 * (float32, bfloat16, float16 tensors) and float64 ones (float64, integer and
 * bool tensors). A record's dev_defer holds such a mask. */
#define MSP_DEV_FLOAT 1
#define MSP_DEV_WIDE 2
#define MSP_DEV_ALL (MSP_DEV_FLOAT | MSP_DEV_WIDE)
/* Launch the copies of every tensor that waits in windows of these kinds:
 * before a call that may write into such tensors, and a step trigger (all). */
void msp_dev_put_pending(int kinds);
/* MSP_DEV_ALL when tensors may wait (device statistics in windows, deferring
 * not turned off): worth asking whether a call writes into its arguments. */
int msp_dev_defers(void);
/* The kind of window a tensor of this dtype goes to (and may wait in), or 0. */
int msp_dev_kind(msp_dtype_t dtype);
/* 1 when r was held back (statistics of its own in flight, or older records held). */
int msp_dev_hold(msp_dq_rec_t *r);
/* Whether the task computes statistics on devices (MSPROBE_DEVICE_STATS,
 * the config's task; *test: CPU tensors too, MSPROBE_TEST_DEVICE_STATS), read
 * once by msp_dev_stats_init (from msp_tensor_init). */
void msp_dev_stats_init(void);
int msp_dev_stats_enabled(int *test);

/* A record that will not be submitted: its device statistics still in flight
 * forget it (py_devhold.c); msp_rec_drop then frees it. */
void msp_dev_forget(msp_dq_rec_t *r);

/* ---- a record's way out (py_record.c): submit, hold, queue, drop ---- */
/* Stamp step and rank, filter (rank, direction, DataLoader worker), and
 * queue it, or hold it while it may be data preparation. */
void msp_rec_submit(msp_dq_rec_t *r);
/* Stamp its order and queue it now (a record submitted, or held back and let go). */
void msp_rec_queue(msp_dq_rec_t *r);
/* 1 when r is held back (it is data preparation until the model runs). */
int msp_prep_hold(msp_dq_rec_t *r);
/* A root module's forward begins: the held records made in the innermost
 * loop that calls it, before the call, are queued in order; those made in an
 * outer loop wait for msp_prep_optimizer_step; the rest are dropped;
 * holding ends. */
void msp_prep_model_started(void);
/* An optimizer's step begins: the waiting records made in the loop that
 * holds this call too (or an inner one) are queued with their order, the
 * rest dropped. */
void msp_prep_optimizer_step(void);
/* Step end and exit: the held records are queued in order (no model ran);
 * records still waiting for an optimizer step are dropped. */
void msp_prep_release(void);
/* A record that will not be submitted: forgets its device statistics still
 * in flight, then frees it. */
void msp_rec_drop(msp_dq_rec_t *r);
/* ---- device statistics, again (py_devhold.c) ---- */
/* Waits for every device statistic in flight and submits the records held
 * for them, in order: before a step ends and before the process exits. */
void msp_dev_drain(void);
/* A forked child: the parent's pending statistics and held records are not its own. */
void msp_dev_forget_after_fork(void);
/* ---- tensors (py_tensor.c) ---- */
int msp_tensor_init(PyObject *torch);
int msp_is_tensor(PyObject *o);
/* The kinds of window (msp_dev_kind) of o's tensors: o a tensor, or (depth
 * 0) a list or tuple of them; 0 when none. */
int msp_window_kinds(PyObject *o, int depth);
/* Add tensor t under role (its bytes copied, or its statistics on the
 * device), between msp_tensor_batch_begin/end (pending host copies are
 * flushed and device work ended at the outermost end). */
void msp_rec_add_tensor(msp_dq_rec_t *r, const char *role, PyObject *t);
void msp_tensor_batch_begin(void);
void msp_tensor_batch_end(const msp_dq_rec_t *r);
/* msprobe's tensor_list: whether a statistics dump keeps record name's data. */
int msp_keep_data(const char *name);
/* ---- a call's values into its record (py_values.c) ---- */
/* Add o under role: a tensor (bytes copied), a list/tuple (roles "role.i"),
 * or anything else as a string attribute. Never raises. */
void msp_rec_add_value(msp_dq_rec_t *r, const char *role, PyObject *o, int depth);
/* Add every positional arg as input.i and keyword as kwarg.k. */
void msp_rec_add_args(msp_dq_rec_t *r, PyObject *args, PyObject *kw);
/* Add a return value: tuple/list -> output.i, else output.0. */
void msp_rec_add_output(msp_dq_rec_t *r, PyObject *out, const char *prefix);
/* Producer links (see msprobe-dump(5)), a record's links while tensors are
 * added to it: MSP_LINK_FIND, each tensor added gets the "RECORD/ROLE" of
 * the earlier forward output it is; MSP_LINK_NOTE, each tensor added is
 * noted as an output of its record. Set by the forward paths only, around
 * adding inputs and outputs. */
enum { MSP_LINK_OFF = 0, MSP_LINK_FIND, MSP_LINK_NOTE };
/* Forget every noted output (step end). py_links.c: */
void msp_links_reset(void);
/* Note t (data at ptr, shape) as output `role` of record `rec`. */
void msp_link_note(const char *rec, const char *role, PyObject *t, const void *ptr, int ndim,
                   const int64_t *shape);
/* "RECORD/ROLE" of the earlier output t is (valid until the next note), or NULL. */
const char *msp_link_find(PyObject *t, const void *ptr, int ndim, const int64_t *shape);
/* Parameter names (py_params.c; msprobe-dump(5), attribute param.ROLE):
 * list a root module's parameters and buffers when its forward begins in a
 * dumped step; the qualified name of t when it is one of them (valid until
 * the step ends), else NULL. */
int msp_params_install(void);
void msp_params_root(PyObject *root);
const char *msp_param_name(PyObject *t);
/* Copies shared between records (py_recent.c): the buffer of a copy made in
 * this step from the same nbytes of dtype at src whose bytes are still
 * equal (a new reference to it), or NULL; and a copy just made, kept. */
void *msp_recent_find(const void *src, size_t nbytes, msp_dtype_t dtype);
void msp_recent_keep(const void *src, size_t nbytes, msp_dtype_t dtype, void *buf);
#define MSP_RECENT_MAX ((size_t)4 << 20) /* larger copies are not kept */
/* "PREFIX.IDX" into buf, cut to size as snprintf would; without snprintf
 * (several roles a wrapped call, where glibc's vfprintf showed in profiles).
 * idx < 0: PREFIX alone. */
void msp_role_at(char *buf, size_t size, const char *prefix, int64_t idx);

/* ---- optimizer records (py_optim.c) ----
 * begin: before optimizer.step() runs (GIL held), NULL when no record is
 * made (step not dumped, an api_list, MSPROBE_DUMP_OPTIMIZER=0); finish: after
 * it returned, submits the record and frees p; cancel: the step raised. */
typedef struct msp_opt_pending msp_opt_pending_t;
msp_opt_pending_t *msp_opt_begin(PyObject *optimizer);
void msp_opt_finish(msp_opt_pending_t *p);
void msp_opt_cancel(msp_opt_pending_t *p);
/* ---- the wrapper type (py_wrap.c; its handlers: py_wrap.h) ---- */
int msp_wrap_types_init(void);
enum {
    MSP_W_API = 0,
    MSP_W_OPT_INIT,
    MSP_W_OPT_STEP,
    MSP_W_STEP_TRIGGER,
    MSP_W_IMPORT,
    MSP_W_JIT,
    MSP_W_NORECORD,
    MSP_W_EVENT,
    MSP_W_COMPILE,
    MSP_W_NKINDS
};
/* A C callable replacing orig. bind: behaves like a method in a class dict. */
PyObject *msp_wrap_new(PyObject *orig, const char *name, int kind, unsigned dirs, int bind);
int msp_is_wrap(PyObject *o);

/* ---- backward records (py_bwd.c) ----
 * Of an API or a module call: the inputs noted before the call (begin; NULL
 * when grad is off: nothing to record; name NULL: named at finish; *stack,
 * the call site, is taken when not NULL), the call's own part of the graph
 * hooked after it (finish, at most max_nodes nodes; frees p), or nothing
 * (cancel: the call raised; its error stays set). */
#define MSP_BWD_MAX_NODES 64          /* an API's own part of the graph */
#define MSP_BWD_MAX_MODULE_NODES 8192 /* a module's: a whole block of layers */
int msp_bwd_types_init(void);
/* torch.is_grad_enabled, found once (else at the first begin); 0 on success. */
int msp_bwd_init(PyObject *torch);
typedef struct msp_bwd_pending msp_bwd_pending_t;
msp_bwd_pending_t *msp_bwd_begin(const char *name, PyObject *args, PyObject *kw, char **stack);
void msp_bwd_finish(msp_bwd_pending_t *p, const char *name, PyObject *out, PyObject *args,
                    int max_nodes);
void msp_bwd_cancel(msp_bwd_pending_t *p);

/* ---- steps (py_step.c) ---- */
int msp_step_install(PyObject *torch);
/* End the current step (GIL held). */
void msp_step_end(void);
/* msprobe's dynamic dump_enable: reads the config file again if it changed
 * and sets msp_g.dump_off from it (the caller then decides the step). */
void msp_step_config_poll(void);
/* Follow path's dump_enable from now on (a PrecisionDebugger's config_path
 * other than the config the dump started with); NULL: that config again. */
void msp_step_watch_config(const char *path);
/* fn runs at the end of each step, once the next step is set up (a layer
 * above resets what it counts per step). */
void msp_step_watch(void (*fn)(void));
/* At exit: one warning naming the dump_iter steps the run never reached. */
void msp_step_exit_report(void);

/* ---- modules (py_module.c) ---- */
int msp_module_install(PyObject *torch);
/* The forward record of the innermost recorded module running on this thread
 * (module and mix modes), or NULL: an API record's "parent" attribute. */
const char *msp_module_parent(void);
/* Whether api_list entry i named a module of the model. */
int msp_module_entry_matched(size_t i);
/* The script named its model (PrecisionDebugger.start(model)): it is the root,
 * named first, and no other module called outside it becomes a root. */
void msp_module_set_root(PyObject *model);

/* ---- patching (py_patch.c; API records: py_apirec.c) ---- */
/* The kinds of wrapper py_patch.c makes (API, JIT, compile, not recorded):
 * registered once at boot, before any is made. */
void msp_patch_kinds(void);
/* Replace every selected API of torch; 0 on success. */
int msp_patch_torch(PyObject *torch);
/* Nothing is recorded while a DataLoader iterator fetches a batch in this
 * process (dataset transforms, __getitem__, collate): they are not the model. */
void msp_patch_dataloader(void);
/* api_list entries naming callables outside torch: set up at boot, wrapped
 * as their modules finish importing, reported at exit (one warning naming
 * every entry this run never dumped, torch names included). */
void msp_custom_setup(void);
void msp_custom_resolve(void);
int msp_custom_pending(void);
void msp_api_exit_report(void);

/* ---- process identity and ways out (py_proc.c) ---- */
/* At boot, before anything is patched: recognise multiprocessing helpers and
 * spawn children from the command line; install the exit and SIGTERM paths. */
void msp_proc_boot(void);
/* Once torch is patched: wrap what the runtime's events need. */
void msp_proc_install(PyObject *torch);
/* Wrap argparse.ArgumentParser.parse_known_args (parse_args calls it), so
 * listeners see each namespace the script parses; 0 on success. */
int msp_proc_wrap_argparse(PyObject *argparse_module);
/* Replace owner.attr by a wrapper raising the seed event as `api` ("torch.manual_seed"). */
int msp_proc_wrap_seed(PyObject *owner, const char *attr, const char *api);

/* ---- msprobe's script API (py_debugger.c, msprobe_api.py) ----
 * Puts the modules msprobe and msprobe.pytorch (PrecisionDebugger, seed_all)
 * on sys.meta_path, last, for a script that imports them while Huawei's
 * msprobe is absent (boot, once the config is read). When the shim has no
 * config yet, the boot PrecisionDebugger runs: late_load reads its
 * config_path into the boot config, late_boot goes on from there once the
 * script's arguments are applied (each 0, or -1 with SystemExit set);
 * both NULL when the shim has a config. */
void msp_debugger_install(int (*late_load)(const char *path), int (*late_boot)(void));

/* ---- monitor mode (py_monitor*.c): a listener of the runtime ---- */
/* MSPROBE_MONITOR_CONFIG names msprobe's monitor config: read and checked
 * (0; else -1 with *msg, malloc'd, naming the file and the key); sets
 * msp_g.mon_on. */
int msp_mon_boot(const char *path, char **msg);
/* Once torch is imported: the listener and the hooks. */
void msp_mon_install(PyObject *torch);

/* ---- config_check's collectors (py_cc.c): a listener of the runtime ---- */
/* MSP_OK when off or set up; an error (message set) stops the run before
 * training when the configuration cannot work (output_zip_path unusable). */
msp_err msp_cc_setup(const msp_config_t *cfg_or_null);

#endif
