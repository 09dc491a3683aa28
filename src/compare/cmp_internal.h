/* Private to src/compare: the metric accumulator shared by the kernel and the
 * driver, record matching, and verdict rules. */
#ifndef MSPROBE_CMP_INTERNAL_H
#define MSPROBE_CMP_INTERNAL_H

#include "msprobe/compare.h"

#include <stdint.h>

/* Partial results over a run of elements. Two accumulators of adjacent runs
 * combine with cmp_acc_merge(); combining in a fixed order (chunk order) makes
 * the result independent of the number of threads. */
typedef struct cmp_acc {
    uint64_t count;
    /* over values with NaN/Inf (same places on both sides) zeroed, as msprobe */
    double dot, nn, bb, dd;
    double max_abs, max_rel;
    uint64_t cnt_1e3, cnt_5e3;   /* elements with rel err < 0.001, < 0.005 */
    uint64_t viol;               /* elements failing |n-b| <= atol + rtol*|b| */
    /* side statistics over the raw values, torch semantics (NaN poisons) */
    double n_max, n_min, n_sum, n_sq, b_max, b_min, b_sum, b_sq;
    uint64_t n_nan, b_nan, n_inf, b_inf;
    int pos_mismatch;            /* NaN/Inf at different places */
    int inf_sign_mismatch;       /* +Inf against -Inf at the same place */
} cmp_acc_t;

void cmp_acc_init(cmp_acc_t *a);
void cmp_acc_merge(cmp_acc_t *into, const cmp_acc_t *part);
/* Bytes per side read and compared as one unit of work. */
#define CMP_DEFAULT_CHUNK ((size_t)1 << 20)
/* Elements per unit for a dtype pair: a multiple of the kernel's block. */
size_t cmp_unit_elems(msp_dtype_t ndt, msp_dtype_t bdt, size_t chunk_bytes);
/* Accumulate count elements of native data (any supported dtype pair).
 * side 0: the caller takes the side statistics from the dump attributes, so
 * blocks free of NaN/Inf skip them (the side fields of a are then partial). */
void cmp_acc_run(msp_dtype_t ndt, const void *n, msp_dtype_t bdt, const void *b, size_t count,
                 double rtol, double atol, int side, cmp_acc_t *a);
/* Element i of native data of dtype dt as a double (the kernel's own load). */
double cmp_load_at(msp_dtype_t dt, const void *p, size_t i);
/* Turn an accumulator into metrics. is_scalar: 0-d or one element. */
void cmp_acc_finish(const cmp_acc_t *a, int is_scalar, msp_metrics_t *out);

/* ---- matching ---------------------------------------------------------- */

typedef struct cmp_map_entry {
    char *bench;
    char *cmp;
} cmp_map_entry_t;

typedef struct cmp_mapping {
    cmp_map_entry_t *e;
    size_t n;
} cmp_mapping_t;

msp_err cmp_mapping_load(const char *path, cmp_mapping_t *out);
void cmp_mapping_free(cmp_mapping_t *m);

/* One matched (or one-sided) record pair; indexes into the files' records, -1 if absent. */
typedef struct cmp_pair {
    long b, c;
} cmp_pair_t;

/* Pair the records of two files. Caller frees *pairs. */
msp_err cmp_match_records(const msp_dump_file_t *bf, const msp_dump_file_t *cf,
                          const msp_compare_opts_t *opts, const cmp_mapping_t *map,
                          cmp_pair_t **pairs, size_t *n_pairs);
int cmp_level_keeps(msp_level_t level, const char *name);
/* Name with the call index removed: "Functional.conv2d.0.forward" -> "Functional.conv2d.forward". */
char *cmp_fuzzy_key(const char *name);
int cmp_is_forward(const char *name);
/* Row order and pairing use format's one role order (msp_role_cmp). */
#define cmp_role_cmp msp_role_cmp

/* ---- inputs ------------------------------------------------------------ */

typedef struct cmp_file_pair {
    int64_t step, rank, writer; /* writer: K of rank{R}-{K} directories, else 0 */
    char *bench, *cmp;
    int in_tree;                /* from directories: an unreadable file is skipped */
} cmp_file_pair_t;

/* Resolve the two command-line paths into file pairs (sorted by step, rank).
 * One-sided steps/ranks, and rank directories holding no dump, are logged as
 * warnings and listed in *only (malloc'd strings). Files are not opened
 * here: a pair whose file cannot be read is skipped when it is opened
 * (cmp_note_skipped), so each file is parsed once. */
msp_err cmp_resolve_inputs(const char *bench, const char *cmp, cmp_file_pair_t **pairs,
                           size_t *n_pairs, char ***only, size_t *n_only);
void cmp_file_pairs_free(cmp_file_pair_t *p, size_t n);
/* A pair from directories skipped because a file cannot be read (detail:
 * why, naming it): one warning and one line in *only. */
msp_err cmp_note_skipped(char ***only, size_t *n_only, const cmp_file_pair_t *fp,
                         const char *detail);

/* ---- verdicts ---------------------------------------------------------- */

void cmp_tensor_verdict(msp_tensor_cmp_t *t, const msp_compare_opts_t *opts, int stats_row);
/* Cause, highlight and record aggregates for rec (its tensors already final). */
void cmp_record_finish(msp_record_cmp_t *rec, msp_tensor_cmp_t *tensors);

/* Error-origin model constants; why these values: msprobe-compare(1), ROOT CAUSE.
 * An output error must exceed CMP_AMPLIFY times the worst input error, and the
 * floor CMP_FLOOR_ULPS unit roundoffs of the op's compute dtype plus
 * CMP_FLOOR_ABS (the reordering noise of fp32 accumulation). */
#define CMP_AMPLIFY 8.0
#define CMP_FLOOR_ULPS 8.0
#define CMP_FLOOR_ABS 1e-5
/* A backward op may flip a mask on a share e of elements: error up to about
 * sqrt(e); this factor gives that bound room (see cmp_link_backward). */
#define CMP_MASK_FLIP 2.0
/* Unit roundoff of a torch dtype name (bf16 2^-8, fp16 2^-11, fp32 2^-24,
 * fp64 2^-53); 0 for integer and bool. */
double cmp_unit_roundoff(const char *dtype);
/* Relative error a dtype of unit roundoff u explains (0 for exact dtypes). */
double cmp_floor_for(double u);
/* Judge each backward record again with its forward record's input and
 * output errors counted as inputs (what the forward saved for it). */
msp_err cmp_link_backward(msp_compare_result_t *res);
/* Rank every introduced record and producer gap into res->suspects and mark
 * the first top of them (opts->top) on the records. */
msp_err cmp_rank_suspects(msp_compare_result_t *res, int top);

#endif
