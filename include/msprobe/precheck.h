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
    MSP_ANOM_ORIGIN = 0,   /* finite inputs, abnormal outputs: it made them */
    MSP_ANOM_SENT = 1,     /* a communication record whose input was abnormal */
    MSP_ANOM_RECEIVED = 2  /* a communication record with finite inputs that
                              returned what another rank sent it */
} msp_anomaly_role_t;

/* Which abnormal values an origin made. */
typedef enum msp_anomaly_kind {
    MSP_ANOM_INF = 1,      /* Inf only: a finite value overflowed (or x/0, log 0) */
    MSP_ANOM_NAN = 2,      /* NaN only: an invalid operation on finite inputs */
    MSP_ANOM_INF_NAN = 3   /* both */
} msp_anomaly_kind_t;

typedef struct msp_anomaly_node {
    int64_t step, rank, order;
    char *record;              /* record name, "Torch.log.0.forward" */
    msp_anomaly_role_t role;
    msp_anomaly_kind_t kind;   /* of its outputs */
    int64_t from_rank;         /* MSP_ANOM_RECEIVED: the rank that sent it, else -1 */
    char *reason;              /* one line, never NULL */
    char *json;                /* msprobe's node object (op_name, data_info,
                                  construct_info, stack_info, and ours: reason,
                                  role, step), unformatted JSON text */
} msp_anomaly_node_t;

typedef struct msp_overflow_opts {
    /* Steps of a dump root to scan (NULL: all); a step or rank directory or
     * a single file is scanned whatever it says. */
    const msp_step_set_t *steps;
} msp_overflow_opts_t;

typedef struct msp_overflow_result {
    int found;                 /* an origin was found */
    int64_t step;              /* the step it was found in (the first such step) */
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
    char **skipped;            /* "PATH: why", files that could not be read */
    size_t n_skipped;
} msp_overflow_result_t;

/* Scan path: a dump file, a rank directory, a step directory (every rank) or
 * a dump root (each step of opts->steps in order, stopping at the first step
 * with an origin); our HDF5 dumps (statistics or tensor task: the NaN/Inf
 * counts of every tensor) and msprobe's dump.json directories (Max/Min).
 * Nothing found is MSP_OK with found = 0. opts may be NULL. *out is owned by
 * the caller (msp_overflow_result_free); NULL on failure. */
msp_err msp_overflow_check(const char *path, const msp_overflow_opts_t *opts,
                           msp_overflow_result_t **out);
/* Write out_dir/anomaly_analyze_{time_ns}.json (created; atomically):
 * {"rank_R": [node, ...], ...}, the origin's rank first. *written gets the
 * path (malloc'd) when not NULL. MSP_ERR_USAGE when nothing was found. */
msp_err msp_overflow_write_json(const msp_overflow_result_t *res, const char *out_dir,
                                char **written);
void msp_overflow_result_free(msp_overflow_result_t *res); /* NULL-safe */

#ifdef __cplusplus
}
#endif
#endif
