/* msprobe's monitor config (msprobe-monitor(1)): the keys of Huawei msprobe's
 * TrainerMon config.json, read once by the CLI (checked before training
 * starts) and once by the shim, from the same loader. */
#ifndef MSPROBE_MONITOR_H
#define MSPROBE_MONITOR_H

#include "msprobe/common.h"

#include <stddef.h>
#include <stdint.h>

/* The statistics msprobe's "ops" names, in the order a row holds them
 * (the config's order; shape and dtype always follow). */
typedef enum msp_mon_op {
    MSP_MON_MIN = 0,
    MSP_MON_MAX,
    MSP_MON_MEAN,
    MSP_MON_NORM,
    MSP_MON_ZEROS,
    MSP_MON_NANS,
    MSP_MON_NOPS
} msp_mon_op_t;
extern const char *const msp_mon_op_names[MSP_MON_NOPS];

/* An alert rule: AnomalyTurbulence (threshold required) or AnomalyNan
 * (threshold optional: values whose magnitude passes it alert too). */
typedef enum { MSP_MON_TURBULENCE = 0, MSP_MON_NAN } msp_mon_rule_kind_t;
typedef struct msp_mon_rule {
    msp_mon_rule_kind_t kind;
    int has_threshold;
    double threshold;
} msp_mon_rule_t;

#define MSP_MON_MAX_RULES 8

typedef struct msp_mon_config {
    char *source;   /* the file's name, for messages */
    char **targets; /* module or parameter names (prefixes); none: every module */
    size_t n_targets;
    int64_t *module_ranks; /* ranks that write; none: every rank */
    size_t n_module_ranks;
    int wg, param, mv, xy, all_xy, forward_only, backward_only;
    msp_mon_op_t ops[MSP_MON_NOPS]; /* as the config orders them */
    size_t n_ops;
    double eps;  /* "zeros" counts |x| < eps */
    int ndigits; /* decimals written */
    int64_t step_count_per_record, start_step, step_interval, collect_times;
    msp_mon_rule_t rules[MSP_MON_MAX_RULES];
    size_t n_rules;
    int alert_dump; /* anomalies written to anomaly_detected/ */
    int dynamic_on;
    /* Keys msprobe knows that change nothing here (said once, as a warning). */
    char **unsupported;
    size_t n_unsupported;
} msp_mon_config_t;

/* Read and check path into *out (zeroed first; free with msp_mon_config_free
 * on every path). MSP_ERR_CONFIG with "FILE: KEY: what is wrong" for a bad
 * value or an unknown key; MSP_ERR_IO / MSP_ERR_FORMAT for an unreadable or
 * malformed file. */
msp_err msp_mon_config_load(const char *path, msp_mon_config_t *out);
void msp_mon_config_free(msp_mon_config_t *c);
/* The unsupported keys as one "a, b, c" string (malloc'd), or NULL when none. */
char *msp_mon_config_unsupported_text(const msp_mon_config_t *c);

#endif
