/* msprobe.json: the dump and config_check configuration (see man/msprobe.json.5).
 *
 * The seed format is accepted verbatim, // and block comments included.
 * Unknown keys and wrong types are errors whose detail names the file and the
 * key path (e.g. "msprobe.json: dump.common_dump_settings.task: expected
 * \"tensor\" or \"statistics\", got \"tensors\""). Invalid JSON is reported with
 * line:column in the original text. Relative paths (dump_path,
 * output_zip_path) are taken from the training process's working directory.
 */
#ifndef MSPROBE_CONFIG_H
#define MSPROBE_CONFIG_H

#include "msprobe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum msp_dump_mode {
    MSP_DUMP_API = 0,
    MSP_DUMP_MODULE = 1,
    MSP_DUMP_MIX = 2
} msp_dump_mode_t;

typedef enum msp_task {
    MSP_TASK_TENSOR = 0,
    MSP_TASK_STATISTICS = 1,
    MSP_TASK_MD5 = 2,     /* hash-only: what statistics stores (the crc32 included), compared
                         by crc32 alone; msprobe's summary_mode "md5" */
    MSP_TASK_OVERFLOW = 3 /* "overflow_check": tensors of the calls whose outputs hold
                             NaN/Inf and of the call before each, up to overflow_nums */
} msp_task_t;

/* What ends a step. */
typedef enum msp_step_trigger {
    MSP_STEP_OPTIMIZER = 0, /* each optimizer.step() (default) */
    MSP_STEP_BACKWARD = 1,  /* each Tensor.backward() / autograd.backward() */
    MSP_STEP_FORWARD = 2,   /* each root-module forward */
    MSP_STEP_MANUAL = 3     /* only the exported step() */
} msp_step_trigger_t;

/* Each enum's names as msprobe.json and the dump file write them, indexed
 * by value: msp_task_names[MSP_TASK_MD5] is "md5". */
extern const char *const msp_dump_mode_names[3];
extern const char *const msp_task_names[4];
extern const char *const msp_step_trigger_names[4];

/* Roles a dump keeps (msprobe's data_mode "input" / "output"): input.* and
 * kwarg.* are inputs, output.* outputs. */
#define MSP_ROLE_INPUT 1u
#define MSP_ROLE_OUTPUT 2u

/* Directions an api_list entry selects. */
#define MSP_DIR_FORWARD 1u
#define MSP_DIR_BACKWARD 2u

typedef struct msp_api_sel {
    char *name;    /* "torch.nn.functional.conv2d" or a module path "layer1.0.conv1" */
    unsigned dirs; /* MSP_DIR_FORWARD | MSP_DIR_BACKWARD */
    char *key;     /* where the user wrote it, as messages name it:
                          "statistics.list[0] \"Functional.conv2e.0.forward\"" or
                          "dump.api_list[0].name \"torch.foo\"" (NULL when built by hand) */
    int has_call;  /* 1: only call number `call` of it in each step (msprobe's
                          "Functional.relu.1.forward"); 0: every call */
    int64_t call;
    char *text;   /* msprobe's list entry as written ("Functional.relu"), which a
                          scope's range is filtered by (held in the record's name);
                          NULL in our layout */
    int fragment; /* 1: msprobe's bare name fragment ("relu"): selects every API
                          whose record name ("Functional.relu", "Tensor.relu_",
                          "Functional.leaky_relu") holds it and, at level L0 or mix,
                          every module whose record name ("Module.act.ReLU") does */
} msp_api_sel_t;

/* A set of steps: inclusive ranges; all=1 selects every step. */
typedef struct msp_step_range {
    int64_t first, last;
} msp_step_range_t;

typedef struct msp_step_set {
    int all;
    msp_step_range_t *ranges;
    size_t n_ranges;
} msp_step_set_t;

typedef struct msp_config {
    char *source; /* file name used in messages */

    int has_dump;                    /* "dump" section present */
    msp_dump_mode_t dump_mode;       /* default api */
    char *dump_path;                 /* default "./msprobe_dump_data" */
    msp_step_set_t dump_iter;        /* default all */
    msp_task_t task;                 /* default tensor */
    int64_t overflow_nums;           /* task overflow_check: calls with NaN/Inf outputs recorded
                                     before it stops looking (msprobe's overflow_nums);
                                     -1 unlimited; default 1 */
    msp_step_trigger_t step_trigger; /* default optimizer */
    msp_api_sel_t *api_list;         /* empty = every supported API */
    size_t n_api_list;
    msp_step_set_t ranks; /* ranks that dump; default all */
    unsigned dump_dirs;   /* MSP_DIR_* records kept; default both */
    unsigned dump_roles;  /* MSP_ROLE_* tensors kept; default both */

    int msprobe_format;  /* 1: read from msprobe's own config.json layout */
    int dump_disabled;   /* msprobe's dump_enable false: nothing is dumped until the
                                     file says true (the shim reads it again at each
                                     step's end while dump_enable_set) */
    int dump_enable_set; /* msprobe's dump_enable was given (true or false): the dump
                                     follows the file's dump_enable during the run */
    int stacks;          /* record each call site (attribute "stack"); default 1,
                                     msprobe's extra_info */
    char *scope[2];      /* msprobe's scope: the records from the start of the one
                                     named scope[0] to the end of the one named scope[1]
                                     (API records at L1, module records at L0, either at
                                     mix), those whose name holds a list entry's text
                                     when the list is not empty; NULL when not given */
    char **tensor_list;  /* msprobe's tensor_list: a statistics dump keeps the data
                                     of the records whose name holds one of these */
    size_t n_tensor_list;
    char **ignored; /* msprobe keys accepted but not applied ("async_dump",
                                     "acc_check", "tensor.bench_path"), for one notice */
    size_t n_ignored;

    int has_config_check;       /* "config_check" section present */
    char *cc_output_zip_path;   /* default "./config_check_pack.zip" */
    int64_t cc_write_at_step;   /* also write the pack when this step ends; -1 = only at exit */
    int64_t cc_dataset_batches; /* first N root-module forwards recorded; default 1 */
} msp_config_t;

/* Two layouts are read, told apart by their top-level keys: ours ("dump",
 * "config_check") and msprobe's config.json ("task", "dump_path", "rank",
 * "step", "level", "statistics", "tensor", ...; see msprobe.json(5) for the
 * mapping). In msprobe's layout, keys that do not apply here (async_dump,
 * acc_check, ...) are collected in cfg->ignored; any other key is an error.
 * Parse text (source names it in messages). On error *cfg is left freed/zeroed. */
msp_err msp_config_parse(const char *text, const char *source, msp_config_t *cfg);
/* Read and parse a file. */
msp_err msp_config_load(const char *path, msp_config_t *cfg);
/* Free everything inside cfg (cfg itself is caller-owned); safe on a zeroed cfg. */
void msp_config_free(msp_config_t *cfg);

/* Parse "10|20", "5-8", "1|3-5", "all" (also "" = all). */
msp_err msp_step_set_parse(const char *text, msp_step_set_t *out);
int msp_step_set_contains(const msp_step_set_t *s, int64_t step);
void msp_step_set_free(msp_step_set_t *s);

#ifdef __cplusplus
}
#endif
#endif
