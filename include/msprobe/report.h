/* The reports of a compare (src/report, msprobe-compare(1), REPORT and HTML
 * REPORT): result.xlsx (and its per-rank books), result.csv and result.html,
 * written from a finished compare (msp_compare_tree_t or msp_compare_result_t,
 * msprobe/compare.h). */
#ifndef MSPROBE_REPORT_H
#define MSPROBE_REPORT_H

#include "msprobe/compare.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The reports of a tree (msprobe-compare(1), REPORT): as msp_report_write_xlsx
 * and _csv write them for the same result, one pair in memory at a time;
 * result.xlsx has the ranks sheet first when there are several ranks, and
 * when the details would not fit one sheet, one workbook per rank
 * (result_rank{R}.xlsx) holds its summary and details while result.xlsx
 * keeps the ranks and the suspects. */
msp_err msp_report_tree_xlsx(const msp_compare_tree_t *t, const char *out_dir);
msp_err msp_report_tree_csv(const msp_compare_tree_t *t, const char *out_dir);
/* msprobe's own result files (compare --msprobe-outputs, msprobe-compare(1),
 * MSPROBE'S OUTPUTS): the details rows, in result.csv's columns, as
 * out_dir/compare_result_rank{R}_{stamp}.csv, one per rank (.xlsx with xlsx:
 * the details sheets alone); with tag set, one file of every row,
 * compare_result_{tag}_{stamp} (tag "": compare_result_{stamp}, two files
 * compared; "rank", "proc4401": the one directory msprobe names it after). */
typedef struct msp_msprobe_outputs {
    const char *stamp; /* YYYYMMDDhhmmss, local time, as msprobe stamps its files */
    int xlsx;          /* workbooks (msprobe 26's --xlsx, 8.x always), else csv */
    const char *tag;   /* NULL: one file per rank */
} msp_msprobe_outputs_t;
/* *names (n of them, each malloc'd, the vector too; the caller frees them
 * even on failure) gets the file names written, without out_dir. */
msp_err msp_report_tree_msprobe(const msp_compare_tree_t *t, const char *out_dir,
                                const msp_msprobe_outputs_t *o, char ***names, size_t *n);
/* The reports of a tree written together from one read of its parts
 * (msp_report_tree_write): what to write, and where. */
typedef struct msp_html_opts msp_html_opts_t;
typedef struct msp_report_set {
    const char *out_dir;
    int xlsx;                     /* result.xlsx (and per-rank books) */
    int csv;                      /* result.csv */
    int html;                     /* result.html, when the tree has at most whole_max records */
    int whole;                    /* the tree as one result even without the page,
                                     every row in it (without it, the page's result
                                     may hold the suspect records' rows alone) */
    size_t whole_max;             /* records past which no whole result is made (no page) */
    const msp_html_opts_t *hopts; /* the page's options, or NULL */
    /* msprobe's own files instead of result.xlsx (msp_report_tree_msprobe):
     * *ms_names and *ms_n get their names (the caller frees them) */
    const msp_msprobe_outputs_t *msprobe;
    char ***ms_names;
    size_t *ms_n;
    /* msprobe's -da file (msp_report_diff_analyze) as out_dir/da_file, when
     * set; *da_written says whether there was one to write */
    const char *da_file;
    int *da_written;
} msp_report_set_t;
/* Write the reports s names, each part of t read once for all of them
 * (per-rank files of several steps read their rank's parts again); *whole (whole may be
 * NULL) gets the whole result when one was made (the page, or s->whole, and
 * at most whole_max records), else NULL; the caller frees it. Unless
 * s->whole, its rows outside the suspect records may be left zero.
 * The first failure, workbook (or msprobe's files) first, is returned. */
msp_err msp_report_tree_write(const msp_compare_tree_t *t, const msp_report_set_t *s,
                              msp_compare_result_t **whole);

/* msprobe's -da file, out_dir/file (diff_analyze_{nanoseconds}.json):
 * {"rank_R": [{"op_name", "data_info": {"input": {TENSOR: {"NPU max", "NPU
 * min", "NPU mean", "NPU l2norm"}}, "output": {..}}, "stack_info"}]} naming
 * each rank's first error of its own (one rank: the root cause). As msprobe,
 * no file when there is none (*written 0). */
msp_err msp_report_diff_analyze(const msp_compare_tree_t *t, const char *out_dir, const char *file,
                                int *written);

/* Write out_dir/result.xlsx (atomically: temp file then rename). out_dir is created. */
msp_err msp_report_write_xlsx(const msp_compare_result_t *res, const char *out_dir);
/* Write out_dir/result.csv (details rows, same columns), atomically. */
msp_err msp_report_write_csv(const msp_compare_result_t *res, const char *out_dir);

/* ---- the HTML report (rep_html.c, rep_sample.c) ------------------ */

/* Sample n tensor rows of res (tensors[i], indexes into res->tensors), reading
 * them again from the dumps compare read (bench and cmp as given to
 * msp_compare_run), a block at a time: memory stays bounded. A row that
 * cannot be sampled gets why set; only bad arguments and out of memory fail.
 * out has n slots, each filled (free with msp_tensor_sample_free). The
 * page takes the samples the compare kept (res->samples) first. */
msp_err msp_compare_sample(const char *bench, const char *cmp, const msp_compare_result_t *res,
                           const long *tensors, size_t n, size_t max_points,
                           msp_tensor_sample_t *out);

struct msp_html_opts {
    const char *bench, *cmp; /* the dumps compared, for the suspects' samples;
                                  NULL: cards without histogram and scatter */
    int top;                 /* suspect cards (0: the suspects marked, suspect_rank > 0) */
    size_t max_points;       /* error-flow points per step and rank before the
                                  page aggregates (0: 4000) */
    size_t max_records;      /* records listed in the page (0: 150000) */
};

/* Write out_dir/result.html atomically: one page that opens offline (Chart.js
 * embedded) with the error flow of every step and rank, the model tree, the
 * suspect cards and the across-steps view (msprobe-compare(1), HTML REPORT).
 * opts may be NULL. */
msp_err msp_report_write_html(const msp_compare_result_t *res, const char *out_dir,
                              const msp_html_opts_t *opts);

#ifdef __cplusplus
}
#endif
#endif
