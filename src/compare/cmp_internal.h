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
    char *bench;               /* record names */
    char *cmp;
    /* a line of msprobe's data_mapping.yaml names tensors: their roles
     * (ours: "input.0", "kwarg.w", "output.1"); NULL for a record line */
    char *bench_role, *cmp_role;
    size_t line;
    int bench_seen, cmp_seen;  /* set by cmp_match_records: the name was found */
    int cell;                  /* a cell_mapping.yaml line: cmp and bench are the
                                  "name.Class" (or a part of it) of module records */
} cmp_map_entry_t;

typedef struct cmp_mapping {
    cmp_map_entry_t *e;
    size_t n;
} cmp_mapping_t;

/* Lines "bench_record cmp_record" (ours), or msprobe's data_mapping.yaml
 * "NPU_TENSOR: BENCH_TENSOR" (compare side first, full tensor names such as
 * Functional.linear.0.forward.input.0; quotes allowed), mixed freely; '#'
 * starts a comment. */
msp_err cmp_mapping_load(const char *path, cmp_mapping_t *out);
void cmp_mapping_free(cmp_mapping_t *m);
/* Append the lines of msprobe's cell_mapping.yaml ("NPU: BENCH") to out as
 * cell entries; an error names file:line. */
msp_err cmp_mapping_load_cell(const char *path, cmp_mapping_t *out);
/* The role a data_mapping entry gives bench tensor `role` of the record pair
 * (bench_rec, cmp_rec), or NULL. */
const char *cmp_mapping_role(const cmp_mapping_t *m, const char *bench_rec, const char *cmp_rec,
                             const char *role);

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
/* "Torch.empty_like" when name (a record, or "RECORD/ROLE") is a call of an
 * allocator that leaves memory uninitialized (empty, empty_like,
 * empty_strided, new_empty, new_empty_strided), else NULL. Static storage. */
const char *cmp_uninit_api(const char *name);
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
                           size_t *n_pairs, msp_compare_result_t *res);
void cmp_file_pairs_free(cmp_file_pair_t *p, size_t n);
/* A pair from directories skipped because a file cannot be read (detail:
 * why, naming it): one warning and one line in res->unpaired and res->unread. */
msp_err cmp_note_skipped(msp_compare_result_t *res, const cmp_file_pair_t *fp,
                         const char *detail);

/* ---- msprobe 26's Result (cmp_result.c) ---------------------------------- */

/* Each row's and record's Result by msprobe 26's checkers (md5: the dumps
 * hold CRC-32 only), their findings appended to the rows' Err_message; a
 * record whose non-tensor arguments (arg_diff) or a requires_grad differ
 * gets setup_differs. Run once every record is finished. */
msp_err cmp_apply_results(msp_compare_result_t *res, int md5);

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
/* "X.backward" / "Module.m.T.backward.0" -> the forward record's name
 * (malloc'd), NULL when name has no backward token. */
char *cmp_forward_name(const char *name);

/* Replay (cmp_replay.c; msprobe-compare(1), REPLAY): an output introduced
 * error when its distance from the float64 replay of its own inputs exceeds
 * CMP_REPLAY_FACTOR times the same-dtype replay's distance and
 * CMP_REPLAY_ULPS unit roundoffs of its dtype. */
#define CMP_REPLAY_FACTOR 4.0
#define CMP_REPLAY_ULPS 4.0
/* Replay the records chosen by o->replay within o->replay_budget, filling
 * each record's replay fields and res's replay summary. Replay that cannot
 * start (no Python with torch) is one warning and res->replay_unavailable. */
msp_err cmp_replay_run(msp_compare_result_t *res, const cmp_file_pair_t *fps, size_t nfp,
                       const msp_compare_opts_t *o);

/* Judge each backward record again with its forward record's input and
 * output errors counted as inputs (what the forward saved for it). */
msp_err cmp_link_backward(msp_compare_result_t *res);
/* Module records hide their parameters: in a step after an optimizer record,
 * the worst parameter error it wrote counts as an input error of theirs. */
msp_err cmp_module_params(msp_compare_result_t *res);
/* Module records judged by the records inside them (order_begin): floor of
 * the coarsest dtype computed inside; explained_by when something inside
 * accounts for the error. Runs after replay, before ranking. */
msp_err cmp_judge_modules(msp_compare_result_t *res);
/* Rank every introduced record and producer gap into res->suspects and mark
 * the first top of them (opts->top) on the records. */
msp_err cmp_rank_suspects(msp_compare_result_t *res, int top);

#endif
