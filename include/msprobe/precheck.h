/* Checks of one run's dump, no second run needed (src/compare):
 *
 *  - overflow_check (msprobe-overflow_check(1)): where the first NaN or Inf
 *    came from. Per rank, the first record in execution order whose inputs
 *    are finite and whose outputs are not; across ranks, the first by the
 *    order communication records impose, with the chain of ranks and
 *    records that carried it.
 *  - acc_check and api_precision_compare (msprobe-acc_check(1)): every API
 *    record of a tensor dump replayed on the CPU in float64 and judged by
 *    msprobe's precision standard for its API and dtype.
 *
 * Library code: nothing here prints; errors come back as msp_err with
 * msp_last_error() naming the file or record at fault.
 */
#ifndef MSPROBE_PRECHECK_H
#define MSPROBE_PRECHECK_H

#include "msprobe/common.h"
#include "msprobe/config.h"
#include "msprobe/format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- overflow_check ----------------------------------------------------- */

/* What a record did with the NaN or Inf. */
typedef enum msp_anomaly_role {
    MSP_ANOM_ORIGIN = 0,  /* finite inputs, abnormal outputs: it made them */
    MSP_ANOM_SENT = 1,    /* a communication record whose input was abnormal */
    MSP_ANOM_RECEIVED = 2 /* a communication record with finite inputs that
                              returned what another rank sent it */
} msp_anomaly_role_t;

/* Which abnormal values an origin made. */
typedef enum msp_anomaly_kind {
    MSP_ANOM_INF = 1,    /* Inf only: a finite value overflowed (or x/0, log 0) */
    MSP_ANOM_NAN = 2,    /* NaN only: an invalid operation on finite inputs */
    MSP_ANOM_INF_NAN = 3 /* both */
} msp_anomaly_kind_t;

typedef struct msp_anomaly_node {
    int64_t step, rank, order;
    char *record; /* record name, "Torch.log.0.forward" */
    msp_anomaly_role_t role;
    msp_anomaly_kind_t kind; /* of its outputs */
    int64_t from_rank;       /* MSP_ANOM_RECEIVED: the rank that sent it, else -1 */
    char *reason;            /* one line, never NULL */
    char *json;              /* msprobe's node object (op_name, data_info,
                                  construct_info, stack_info, and ours: reason,
                                  role, step), unformatted JSON text */
} msp_anomaly_node_t;

typedef struct msp_overflow_opts {
    /* Steps of a dump root to scan (NULL: all); a step or rank directory or
     * a single file is scanned whatever it says. */
    const msp_step_set_t *steps;
} msp_overflow_opts_t;

typedef struct msp_overflow_result {
    int found;    /* an origin was found */
    int64_t step; /* the step it was found in (the first such step) */
    msp_anomaly_node_t origin;
    /* After the origin, in the order they happened: the communication
     * records that sent it on and those that received it. */
    msp_anomaly_node_t *chain;
    size_t n_chain;
    /* Of the origin's step, by rank: each rank's first anomalous record (its
     * own origin, or where it received the NaN/Inf); what the JSON lists. */
    msp_anomaly_node_t *ranks;
    size_t n_ranks;
    size_t steps_scanned, files, records;
    /* Set when no origin was found but some record held NaN/Inf: its inputs
     * were abnormal already (data, parameters or an earlier step, or code
     * the dump did not record): "step S rank R RECORD: input.0 holds NaN". */
    char *abnormal_input;
    char **skipped; /* "PATH: why", files that could not be read */
    size_t n_skipped;
} msp_overflow_result_t;

/* Scan path: a dump file, a rank directory, a step directory (every rank) or
 * a dump root (each step of opts->steps in order, stopping at the first step
 * with an origin); our HDF5 dumps and msprobe's dump.json directories. A
 * tensor whose data the dump holds is judged by its data (read, NaN and Inf
 * counted, its CRC-32 checked), never by the statistics stored beside it; a
 * statistics-only tensor by its NaN/Inf counts (msprobe's: Max/Min), and a
 * file whose counts cannot be true (more than the tensor's elements) is
 * refused naming the record: the error of a single file, a skipped file
 * (res->skipped) in a directory. Nothing found is MSP_OK with found = 0.
 * opts may be NULL. *out is owned by the caller (msp_overflow_result_free);
 * NULL on failure. */
msp_err msp_overflow_check(const char *path, const msp_overflow_opts_t *opts,
                           msp_overflow_result_t **out);
/* Write out_dir/anomaly_analyze_{time_ns}.json (created; atomically):
 * {"rank_R": [node, ...], ...}, the origin's rank first. *written gets the
 * path (malloc'd) when not NULL. MSP_ERR_USAGE when nothing was found. */
msp_err msp_overflow_write_json(const msp_overflow_result_t *res, const char *out_dir,
                                char **written);
void msp_overflow_result_free(msp_overflow_result_t *res); /* NULL-safe */

/* ---- acc_check and api_precision_compare ------------------------------------- */

/* A verdict of msprobe's precision standards. */
typedef enum msp_acc_status {
    MSP_ACC_NONE = 0, /* no row (an API without backward): " " in the CSVs */
    MSP_ACC_PASS = 1,
    MSP_ACC_WARNING = 2,
    MSP_ACC_ERROR = 3,
    MSP_ACC_SKIP = 4 /* not replayed or not judged; the message says why */
} msp_acc_status_t;

/* msprobe's metric columns of accuracy_checking_details_*.csv, in order. */
enum {
    MSP_ACC_COSINE = 0,     /* 余弦相似度 */
    MSP_ACC_MAX_ABS,        /* 最大绝对误差 */
    MSP_ACC_HUNDREDTH,      /* 双百指标: share of elements with relative error < 0.01 */
    MSP_ACC_THOUSANDTH,     /* 双千指标: < 0.001 */
    MSP_ACC_TEN_THOUSANDTH, /* 双万指标: < 0.0001 */
    MSP_ACC_ERROR_RATE,     /* 二进制一致错误率: share of elements not bit-equal */
    MSP_ACC_EB,             /* 误差均衡性: |#above - #below| / n */
    MSP_ACC_RMSE,           /* 均方根误差 */
    MSP_ACC_SMALL_VALUE,    /* 小值域错误占比 */
    MSP_ACC_MAX_REL,        /* 相对误差最大值 */
    MSP_ACC_MEAN_REL,       /* 相对误差平均值 */
    MSP_ACC_INF_NAN,        /* inf/nan错误率 */
    MSP_ACC_REL_ERR_RATIO,  /* 相对误差错误率 */
    MSP_ACC_ABS_ERR_RATIO,  /* 绝对误差错误率 */
    MSP_ACC_MAX_ULP,        /* ULP误差最大值 */
    MSP_ACC_MEAN_ULP,       /* ULP误差平均值 */
    MSP_ACC_ULP_PROPORTION, /* ULP误差大于阈值占比 */
    MSP_ACC_NMETRICS
};

/* One output of one record: a row of the details CSV. */
typedef struct msp_acc_output {
    char *name;                      /* "Functional.conv2d.0.forward.output.0" */
    char bench_dtype[24];            /* "torch.float64" (the replay) */
    char device_dtype[24];           /* the recorded output's dtype */
    char shape[96];                  /* "(4, 8)", msprobe's tuple text */
    double metric[MSP_ACC_NMETRICS]; /* valid where (have >> i) & 1 */
    unsigned have;
    const char *standard;    /* "benchmark", "absolute threshold", "binary consistency",
                                  "ULP error", "dual thousandths", or NULL (not judged) */
    msp_acc_status_t status; /* by the standard of its API and dtype (see
                                  msprobe-acc_check(1), JUDGING) */
    char *message;           /* never NULL */
} msp_acc_output_t;

/* One API (forward and backward records together): a row of the result CSV. */
typedef struct msp_acc_api {
    char *name; /* "Functional.conv2d.0" */
    msp_acc_status_t forward, backward;
    char *message;   /* why it was skipped, or ""; never NULL */
    size_t first, n; /* its outputs: outputs[first .. first + n) */
} msp_acc_api_t;

typedef struct msp_acc_opts {
    int workers;        /* replay workers run in parallel; <= 0: one per CPU, at most 8 */
    double budget;      /* seconds of wall time for the whole check: records not
                                  started by then are skipped; 0: 600; < 0: no limit */
    const char *python; /* NULL: $MSPROBE_PYTHON, else the build's default */
    /* "NAME=pkg.mod.fn": replay Custom.NAME records (api_list callables outside
     * torch) with the function named, imported in the worker */
    const char *const *references;
    size_t n_references;
    void (*progress)(size_t done, size_t total, void *ud); /* may be NULL; any thread */
    void *progress_ud;
    /* APIs an earlier, interrupted check already wrote ("Functional.relu.0",
     * msp_acc_read_checked): their records are not replayed, nor listed */
    const char *const *checked;
    size_t n_checked;
    /* msprobe's -save_error_data: the directory that gets, for each API that
     * missed its standard, its inputs, recorded outputs and float64 benchmark
     * outputs as .pt files (msprobe-acc_check(1)); NULL: none */
    const char *error_data_dir;
} msp_acc_opts_t;

typedef struct msp_acc_result {
    char *path;          /* the dump file checked */
    msp_acc_api_t *apis; /* in execution order of their first record */
    size_t n_apis;
    msp_acc_output_t *outputs;
    size_t n_outputs;
    size_t records, replayed, skipped; /* records sent to replay, answered ok, skipped */
    size_t pass, warning, error;       /* outputs by status */
    double seconds;                    /* wall time of the replay */
    int workers;                       /* workers that ran */
    size_t error_files;                /* .pt files written to opts->error_data_dir */
} msp_acc_result_t;

/* Replay every API record (forward, backward, optimizer step) of one tensor
 * dump (a dump file or a rank directory; ours or msprobe's) on the CPU in
 * float64, in opts->workers parallel workers, and judge each output by
 * msprobe's precision standard for its API and dtype. A record that cannot
 * be replayed is an API row with SKIP and the reason. MSP_ERR_USAGE for a
 * path holding several dump files or a statistics dump; MSP_ERR_UNSUPPORTED
 * when no worker starts (no Python with torch). */
msp_err msp_acc_check(const char *path, const msp_acc_opts_t *opts, msp_acc_result_t **out);
/* Write out_dir/accuracy_checking_result_{stamp}.csv and
 * accuracy_checking_details_{stamp}.csv (msprobe's columns; created,
 * atomically); stamp is YYYYmmddHHMMSS of now. The paths go to *result_path
 * and *details_path (malloc'd) when not NULL. */
msp_err msp_acc_write_csv(const msp_acc_result_t *res, const char *out_dir, char **result_path,
                          char **details_path);
/* Continue an interrupted check (msprobe's -csv_path): the API names of the
 * result CSV result_csv (an accuracy_checking_result_{stamp}.csv, with its
 * accuracy_checking_details_{stamp}.csv beside it) into *names (malloc'd,
 * free with msp_free_strings); *failed 1 when a row of it is error or
 * warning. A name that is not msprobe's, or a missing details CSV:
 * MSP_ERR_USAGE naming the file. */
msp_err msp_acc_read_checked(const char *result_csv, char ***names, size_t *n, int *failed);
/* Append res's rows to result_csv and its details CSV (written anew to a temp
 * name and renamed, header kept); the details path to *details_path. */
msp_err msp_acc_append_csv(const msp_acc_result_t *res, const char *result_csv,
                           char **details_path);
void msp_acc_result_free(msp_acc_result_t *res); /* NULL-safe */

/* api_precision_compare: the rows of two details CSVs (an NPU run's and a
 * GPU run's acc_check, msprobe's or ours) paired by API Name and judged by
 * msprobe's standard of each API (ratios NPU/GPU where the standard compares
 * the devices). Writes out_dir/api_precision_compare_result_{stamp}.csv and
 * api_precision_compare_details_{stamp}.csv. APIs are counted in *summary by
 * the worse verdict of their forward and backward rows. A CSV
 * without msprobe's required columns is MSP_ERR_FORMAT naming the file and
 * the columns. */
typedef struct msp_apc_summary {
    size_t apis, pass, warning, error, skip, unmatched;
    char *result_path, *details_path; /* malloc'd */
} msp_apc_summary_t;
msp_err msp_api_precision_compare(const char *npu_csv, const char *gpu_csv, const char *out_dir,
                                  msp_apc_summary_t *summary);
void msp_apc_summary_free(msp_apc_summary_t *s); /* NULL-safe */

#ifdef __cplusplus
}
#endif
#endif
