/* Monitor outputs compared (src/monitor, msprobe-compare(1), MONITOR OUTPUTS):
 * msprobe's monitor CSVs read back, the first step where two runs' per-step
 * fingerprints part beyond their own step-to-step noise, and its reports
 * (result.xlsx, result.html). The locate driver (msprobe-locate(1)) runs on
 * top of these.
 *
 * Library code: nothing here prints; errors come back as msp_err with
 * msp_last_error() naming the file or row at fault. */
#ifndef MSPROBE_MONCMP_H
#define MSPROBE_MONCMP_H

#include "msprobe/common.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One fingerprint series of a run: one metric (norm, min, ...) of one row
 * name (a parameter, or a module's input or output) of one file kind
 * (param_origin, actv, grad_reduced, ...) on one rank, over the steps. */
typedef struct msp_mon_series {
    int64_t rank, vpp, micro; /* micro: -1 where the file has no micro_step */
    char *kind;               /* the file's prefix, as msprobe names it */
    int phase;                /* where the kind falls in a step (msp_mon_phase) */
    char *name;               /* the row's name, without its vpp stage */
    char *module;             /* the module it belongs to ("(root)" for the model) */
    char *metric;             /* min, max, mean, norm, zeros, nans */
    int64_t row_step;         /* the step whose file gave row */
    size_t row;               /* its row in that file: execution order within the kind */
    size_t n, cap;
    int64_t *steps; /* ascending */
    double *vals;   /* NaN/Inf as written */
} msp_mon_series_t;

/* A monitor output read: every series of every rank. */
typedef struct msp_mon_run {
    char *path;
    msp_mon_series_t *s;
    size_t n, cap;
    msp_index_t idx; /* series by key */
    size_t files, rows;
    int decimals; /* most digits after the point of any value: the CSVs' resolution */
    int64_t first_step, last_step; /* -1 when nothing was read */
} msp_mon_run_t;

/* 1 when dir is a monitor output: msprobe's CSVs ({kind}_{a}-{b}.csv) in it,
 * or in the {time}-rank{R}-{id} directories MONITOR_OUTPUT_DIR holds. */
int msp_mon_is_output(const char *dir);
/* Read every CSV of a monitor output (either form above). A directory of
 * several runs of one rank is refused, naming them. *out is the caller's
 * (msp_mon_run_free). */
msp_err msp_mon_read(const char *dir, msp_mon_run_t **out);
void msp_mon_run_free(msp_mon_run_t *r); /* NULL-safe */
/* The order of a file kind within a step: weights before, forward,
 * backward, gradients, optimizer state, weights after, others last. */
int msp_mon_phase(const char *kind);

/* The divergence rule (msprobe-compare(1), MONITOR OUTPUTS, lays it out). */
typedef struct msp_mon_divrule {
    int window;       /* W: steps of the trailing window (16) */
    int persist;      /* P: steps the difference must last (3) */
    double k_noise;   /* K: multiple of the series' own step-to-step change (8) */
    double k_base;    /* B: multiple of the runs' earlier difference (8) */
    double rel_floor; /* F: smallest difference counted, relative to the value (1e-2); and
                         never under 2 units of the CSVs' last written digit */
} msp_mon_divrule_t;
void msp_mon_divrule_default(msp_mon_divrule_t *r);

/* A series present in both runs, on the steps both have. */
typedef struct msp_mon_pair {
    const msp_mon_series_t *b, *c;
    size_t n;
    int64_t *steps;
    double *vb, *vc; /* the two runs' values */
    double *diff;    /* |vb - vc|: 0 when equal (NaN too), Inf when one only is finite */
    double *thr;     /* what the difference must pass at that step */
    long first;      /* index of its first divergent step that lasted, or -1 */
    int from_start;  /* the runs differ beyond the threshold at their first step */
} msp_mon_pair_t;

/* Where a run's fingerprints first carry a NaN or Inf (step -1: never). */
typedef struct msp_mon_nan {
    int64_t step, rank;
    const msp_mon_series_t *s;
} msp_mon_nan_t;

/* The first step of run r whose fingerprints carry a NaN or Inf (a nans
 * count above 0, or a min, max, mean or norm not finite); of that step's,
 * the series first in the step. */
msp_mon_nan_t msp_mon_first_nan(const msp_mon_run_t *r);

typedef struct msp_mon_cmp {
    msp_mon_divrule_t rule;
    double quantum; /* the coarser run's resolution, 10^-decimals */
    msp_mon_pair_t *pairs;
    size_t n_pairs;
    size_t only_bench, only_cmp; /* series one run has and the other not */
    long div;                    /* pair named at the first divergent step, or -1 */
    long div_at;                 /* its index in that pair's steps */
    size_t div_series;           /* series that diverge at that step and last */
    int exact;                   /* the runs agree bit for bit before that step */
    size_t from_start;           /* series that differ at their first step */
    long start;                  /* of those, the one furthest beyond its threshold, or -1 */
    long near, near_at;          /* the pair and index after its first step nearest to (or
                                    furthest beyond) its threshold, or -1 */
    msp_mon_nan_t nan_bench, nan_cmp;
    /* The heat map: steps x modules, each cell the largest diff/thr of the
     * module's series at that step (NaN: no series there). */
    int64_t *steps;
    size_t n_steps;
    char **modules; /* in execution order: the first row each module holds */
    size_t n_modules;
    double *heat; /* n_steps * n_modules, row major by step */
} msp_mon_cmp_t;

/* Pair the series of bench and cmp, apply rule (NULL: the default) and find
 * the first divergent step and the first NaN of each run. *out is the
 * caller's (msp_mon_cmp_free); it points into bench and cmp, which must
 * outlive it. */
msp_err msp_mon_compare(const msp_mon_run_t *bench, const msp_mon_run_t *cmp,
                        const msp_mon_divrule_t *rule, msp_mon_cmp_t **out);
void msp_mon_cmp_free(msp_mon_cmp_t *c); /* NULL-safe */

/* The reports: out_dir/result.xlsx (sheets summary, series, heatmap) and
 * out_dir/result.html (the step x module heat map with the divergence
 * marked, and each module's trend), written atomically; out_dir is created. */
msp_err msp_mon_report_xlsx(const msp_mon_cmp_t *c, const char *bench, const char *cmp,
                            const char *out_dir);
msp_err msp_mon_report_html(const msp_mon_cmp_t *c, const char *bench, const char *cmp,
                            const char *out_dir);

#ifdef __cplusplus
}
#endif
#endif
