/* Internals shared by the Python side of the dump shim (libmsprobe_py.so).
 * Built against the limited API so one binary loads into every CPython >= 3.8. */
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

#define MSP_EXPORT __attribute__((visibility("default")))

/* ---- the curated API list (api_table.c) ---- */
extern const char *const msp_api_table[];
extern const size_t msp_api_table_len;
int msp_api_known(const char *name);
/* Closest entry by edit distance, or NULL when nothing is close. */
const char *msp_api_near(const char *name);

/* ---- shared state; touched with the GIL held unless noted ---- */
typedef struct msp_shim {
    msp_config_t cfg;
    int have_cfg;
    volatile int disabled;    /* forked child, or boot gave up: every hook passes through */
    int booted;
    int api_on, module_on;
    int64_t step;
    int dumping;              /* the current step is in dump_iter and dump is configured */
    int64_t order;            /* records made in this step */
    int64_t rank, world_size;
    int rank_final;
    int64_t rank_step;        /* step for which rank was last looked up */
    int cc_on;
    pid_t pid;
} msp_shim_t;

extern msp_shim_t msp_g;
/* Nesting depth of wrapped calls on this thread: only depth 0 is recorded, and
 * the shim raises it around its own torch calls so they are never recorded. */
extern _Thread_local int msp_t_depth;

/* ---- messages (py_log.c): "msprobe: ..." to stderr or MSPROBE_LOG_FILE; any thread ---- */
void msp_shim_log_init(void);
void msp_shim_msg(const char *fmt, ...) MSP_PRINTF(1, 2);
/* "msprobe: warning: ..." the first time `kind` is seen; silent afterwards. */
void msp_shim_warn_once(const char *kind, const char *fmt, ...) MSP_PRINTF(2, 3);

/* ---- tensors (py_tensor.c) ---- */
int msp_tensor_init(PyObject *torch);
int msp_is_tensor(PyObject *o);
/* Add o under role: a tensor (bytes copied), a list/tuple (roles "role.i"),
 * or anything else as a string attribute. Never raises. */
void msp_rec_add_value(msp_dq_rec_t *r, const char *role, PyObject *o, int depth);
/* Add every positional arg as input.i and keyword as kwarg.k. */
void msp_rec_add_args(msp_dq_rec_t *r, PyObject *args, PyObject *kw);
/* Add a return value: tuple/list -> output.i, else output.0. */
void msp_rec_add_output(msp_dq_rec_t *r, PyObject *out, const char *prefix);
/* Producer links (see msprobe-dump(5)): while msp_t_links is MSP_LINK_FIND,
 * each tensor added gets the "RECORD/ROLE" of the earlier forward output it is;
 * while MSP_LINK_NOTE, each tensor added is noted as an output of its record.
 * Set by the forward paths only, around adding inputs and outputs. */
enum { MSP_LINK_OFF = 0, MSP_LINK_FIND, MSP_LINK_NOTE };
extern _Thread_local int msp_t_links;
/* Forget every noted output (step end). */
void msp_links_reset(void);
/* Stamp step/rank/order and queue it. */
void msp_rec_submit(msp_dq_rec_t *r);
/* Clear a pending Python error, as one warning. */
void msp_py_warn_error(const char *kind, const char *what);

/* ---- API wrappers (py_api.c) ---- */
int msp_api_types_init(void);
/* Replace every selected API of torch; 0 on success. */
int msp_patch_torch(PyObject *torch);
enum { MSP_W_API = 0, MSP_W_OPT_INIT, MSP_W_OPT_STEP, MSP_W_STEP_TRIGGER, MSP_W_IMPORT,
       MSP_W_JIT, MSP_W_NORECORD };
/* A C callable replacing orig. bind: behaves like a method in a class dict. */
PyObject *msp_wrap_new(PyObject *orig, const char *name, int kind, unsigned dirs, int bind);
int msp_is_wrap(PyObject *o);
/* Nothing is recorded while a DataLoader iterator fetches a batch in this
 * process (dataset transforms, __getitem__, collate): they are not the model. */
void msp_patch_dataloader(void);

/* Backward record of a module call: inputs noted before the call (begin; NULL
 * when grad is off), output node walked after it (finish, which frees). */
typedef struct msp_bwd_pending msp_bwd_pending_t;
msp_bwd_pending_t *msp_bwd_begin(PyObject *args);
void msp_bwd_finish(msp_bwd_pending_t *p, const char *name, PyObject *out, PyObject *args);
void msp_bwd_cancel(msp_bwd_pending_t *p);

/* ---- modules (py_module.c) ---- */
int msp_module_install(PyObject *torch);
void msp_module_step_reset(void);

/* ---- steps (py_step.c) ---- */
int msp_step_install(PyObject *torch);
/* End the current step (GIL held). */
void msp_step_end(void);
int64_t msp_current_rank(void);
int msp_module_selected(const char *path);

#endif
