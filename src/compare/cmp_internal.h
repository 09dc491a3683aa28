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
    uint64_t cnt_1e3, cnt_5e3; /* elements with rel err < 0.001, < 0.005 */
    uint64_t viol;             /* elements failing |n-b| <= atol + rtol*|b| */
    /* side statistics over the raw values, torch semantics (NaN poisons) */
    double n_max, n_min, n_sum, n_sq, b_max, b_min, b_sum, b_sq;
    uint64_t n_nan, b_nan, n_inf, b_inf;
    int pos_mismatch;      /* NaN/Inf at different places */
    int inf_sign_mismatch; /* +Inf against -Inf at the same place */
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
    char *bench; /* record names */
    char *cmp;
    /* a line of msprobe's data_mapping.yaml names tensors: their roles
     * (ours: "input.0", "kwarg.w", "output.1"); NULL for a record line */
    char *bench_role, *cmp_role;
    size_t line;
    int bench_seen, cmp_seen; /* set by cmp_match_records: the name was found */
    int cell;                 /* a cell_mapping.yaml line: cmp and bench are the
                                  "name.Class" (or a part of it) of module records */
} cmp_map_entry_t;

typedef struct cmp_mapping {
    cmp_map_entry_t *e;
    size_t n;
} cmp_mapping_t;

/* The mapping files (cmp_mapping.c): lines "bench_record cmp_record" (ours;
 * '#' starts a comment), or a file that is msprobe's data_mapping.yaml, a
 * YAML mapping "NPU_TENSOR: BENCH_TENSOR" (compare side first, full tensor
 * names such as Functional.linear.0.forward.input.0; quotes allowed), read
 * by libyaml. An error names file:line and leaves out empty. */
msp_err cmp_mapping_load(const char *path, cmp_mapping_t *out);
void cmp_mapping_free(cmp_mapping_t *m);
/* Append the pairs of msprobe's cell_mapping.yaml (a YAML mapping "NPU:
 * BENCH") to out as cell entries; an error names file:line. */
msp_err cmp_mapping_load_cell(const char *path, cmp_mapping_t *out);

/* 1 when both sides gave all four statistics (MSP_STATS_ALL). */
int cmp_all4(const msp_tensor_info_t *n, const msp_tensor_info_t *b);
/* Fills t's statistics diff columns from its npu_* and bench_* values, mean
 * and norm only when all4; returns the largest warning measure (a mean
 * difference within the rounding floor of numel values counting as none);
 * *nonfinite_mismatch (may be NULL): a statistic finite on one side only. */
double cmp_fill_diffs(msp_tensor_cmp_t *t, int all4, int64_t numel, int *nonfinite_mismatch);

/* One matched (or one-sided) record pair; indexes into the files' records, -1 if absent.
 * stray: a one-sided record while the other side also holds one of the same
 * API or module (its name without call index) that paired with nothing: a
 * pairing that failed, never a record one side simply does not wrap. */
typedef struct cmp_pair {
    long b, c;
    int stray;
} cmp_pair_t;

/* Pair the records of two files; bnames and cnames, when not NULL, their
 * records by name (cmp_name_index), which spares a sort. Caller frees
 * *pairs. */
msp_err cmp_match_records(const msp_dump_file_t *bf, const msp_dump_file_t *cf,
                          const msp_record_info_t *const *bnames,
                          const msp_record_info_t *const *cnames, const msp_compare_opts_t *opts,
                          const cmp_mapping_t *map, cmp_pair_t **pairs, size_t *n_pairs);
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
    int in_tree; /* from directories: an unreadable file is skipped */
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
msp_err cmp_note_skipped(msp_compare_result_t *res, const cmp_file_pair_t *fp, const char *detail);

/* ---- msprobe 26's Result (cmp_result.c) ---------------------------------- */

/* Each row's and record's Result by msprobe 26's checkers (md5: the dumps
 * hold CRC-32 only), their findings appended to the rows' Err_message; a
 * record whose non-tensor arguments (arg_diff) or a requires_grad differ
 * gets setup_differs. Run once every record is finished. */
msp_err cmp_apply_results(msp_compare_result_t *res, int md5);
/* ---- one pair at a time (cmp_run.c) --------------------------------------- */

/* The metric engine: read buffers, the mapping file, and the reader helpers
 * of the pair being opened next. */
typedef struct cmp_engine cmp_engine_t;
msp_err cmp_engine_open(const msp_compare_opts_t *opts, cmp_engine_t **out);
/* Compare fp's two files into res, appending records (by order) and tensor
 * rows: their metrics, not yet the record verdicts (cmp_record_finish). A
 * pair from directories whose file cannot be read adds a line to
 * res->unpaired instead (*compared 0). ahead[0..n_ahead) (NULL entries
 * allowed) are the pairs the caller compares next, in order: the first
 * cmp_engine_ahead() of them are opened meanwhile. Sets res->stats_mode and
 * adds to res->bytes_compared. */
msp_err cmp_engine_pair(cmp_engine_t *e, msp_compare_result_t *res, const cmp_file_pair_t *fp,
                        const cmp_file_pair_t *const *ahead, size_t n_ahead, int *compared);
/* How many pairs the engine opens ahead. */
size_t cmp_engine_ahead(const cmp_engine_t *e);
/* Whether a pair it compared was of md5 (hash-only) dumps. */
int cmp_engine_md5(const cmp_engine_t *e);
/* The last pair's files stay open after cmp_engine_pair until the next pair,
 * this call or the close: sample res's likely suspects from them
 * (cmp_sample_part; res has its verdicts by now), then close them. */
msp_err cmp_engine_sample(cmp_engine_t *e, msp_compare_result_t *res);
void cmp_engine_close(cmp_engine_t *e); /* NULL-safe */

/* ---- the engine's parts (cmp_data.c, cmp_rows.c, cmp_attrs.c; cmp_run.c) --- */

/* A window of units is compared in one parallel loop: at most this many units
 * and bytes (both sides; also the granularity of progress reports). */
#define CMP_WINDOW_UNITS 4096
#define CMP_WINDOW_BYTES ((uint64_t)256 << 20)

/* The records' names and the rows' names, data names and producers of a
 * result the compare builds (msp_compare_result_t.names), carved from
 * blocks that double in size: each malloc'd and freed on its own, they
 * were a third of a statistics compare's allocations (issue 42).
 * cmp_names_join: lead (when not 0), a, sep (when not 0) and b (when not
 * NULL), joined in r's blocks; NULL when out of memory. cmp_names_hold:
 * whether s lies in one of r's blocks (never to be freed alone). */
char *cmp_names_join(msp_compare_result_t *r, char lead, const char *a, char sep, const char *b);
int cmp_names_hold(const msp_compare_result_t *r, const char *s);
void cmp_names_free(msp_compare_result_t *r);

/* The result a file pair's rows are appended to, with its arrays' capacities. */
typedef struct cmp_build {
    msp_compare_result_t *res;
    size_t cap_rec, cap_ten;
} cmp_build_t;

/* One tensor pair's data, compared a unit (chunk_bytes per side) at a time. */
typedef struct cmp_job {
    size_t row;
    msp_dtype_t ndt, bdt;
    const msp_record_info_t *nrec, *brec;
    const msp_tensor_info_t *nt, *bt;
    uint64_t numel;
    size_t unit, n_units;
    double rtol, atol;
    int side; /* 1: compute side statistics; 0: both sides have them as attributes */
    cmp_acc_t acc;
    uint32_t crc[2];  /* CRC-32 of the bytes read: npu, bench (checked against the files') */
    char *read_error; /* a tensor file that cannot be read (msprobe's .pt): its row's error */
} cmp_job_t;

/* One unit of a job, compared by one thread; merged into its job in unit order. */
typedef struct cmp_item {
    size_t job, unit;
    cmp_acc_t acc;
    int err;         /* errno of a failed read, or -1 for a short read */
    int err_side;    /* 0 npu, 1 bench */
    uint32_t crc[2]; /* of this unit's bytes: npu, bench */
} cmp_item_t;

/* Consecutive items of a window read together without a mapping (pread): a
 * run of small tensors that lie close together in both files, read with
 * one call a side into a thread's buffers (cmp_data.c); len 0: one item,
 * read on its own. */
typedef struct cmp_group {
    size_t first, n;
    uint64_t off[2], len[2]; /* npu, bench: the span read */
} cmp_group_t;

/* The file pair being compared: its files, maps, rows' jobs and the threads'
 * read buffers (the engine's, kept from pair to pair). */
typedef struct cmp_ctx {
    const msp_compare_opts_t *o;
    size_t pairs_done; /* file pairs compared (not skipped) */
    size_t chunk;
    int nthreads;
    unsigned char *bufs; /* nthreads x 2 x chunk */
    msp_dump_file_t *bf, *cf;
    int bfd, cfd;
    int use_mmap;
    int has_producers;                          /* either file of the pair carries producer links */
    const msp_record_info_t **bnames, **cnames; /* records by name, for producer lookups */
    const cmp_mapping_t *map;                   /* --mapping, or NULL */
    int stray;                                  /* the record being built: cmp_pair_t.stray */
    int md5;                                    /* some pair was of md5 (hash-only) dumps */
    const unsigned char *bmap, *cmap;           /* whole-file read-only maps, or NULL */
    size_t bmap_len, cmap_len;
    cmp_job_t *jobs;
    size_t n_jobs, cap_jobs;
    cmp_item_t *items;
    cmp_group_t *groups; /* CMP_WINDOW_UNITS of them, as items */
} cmp_ctx_t;

/* Queue a data job for tensor row `row` (both sides have data to compare). */
/* The parameter name at position pos of the API of forward record fwd_name,
 * from the bench dump's /defaults (else the compare dump's); malloc'd, or
 * NULL when no signature names it. */
char *cmp_sig_param(cmp_ctx_t *cx, const char *fwd_name, unsigned long pos);
msp_err cmp_add_job(cmp_ctx_t *cx, size_t row, const msp_record_info_t *nrec,
                    const msp_tensor_info_t *nt, const msp_record_info_t *brec,
                    const msp_tensor_info_t *bt);
/* Run the jobs whose both sides have a file offset (mapped or pread), then
 * those streamed through the format module; each adds the bytes it compared
 * to *bytes_done. A failed read of a directory dump's tensor file is its
 * job's read_error; other errors stop the pair. */
msp_err cmp_run_offset_jobs(cmp_ctx_t *cx, uint64_t *bytes_done);
msp_err cmp_run_stream_jobs(cmp_ctx_t *cx, uint64_t *bytes_done);
/* Whether any tensor of f carries a producer link. */
int cmp_file_has_producers(const msp_dump_file_t *f);
/* Room in bld's arrays for the rows of a file pair of files b and c, as
 * many as the larger file has (more still grow as before): one allocation
 * of what the rows take, not doublings copied and zeroed past them. */
msp_err cmp_rows_reserve(cmp_build_t *bld, const msp_dump_file_t *b, const msp_dump_file_t *c);
/* Append the record row of brec/crec (either NULL when one-sided) and its
 * tensor rows to bld, queueing data jobs on cx. stats_file: 1 a statistics
 * dump on either side, 2 an md5 dump. */
msp_err cmp_record_rows(cmp_ctx_t *cx, cmp_build_t *bld, int64_t step, int64_t rank,
                        const msp_record_info_t *brec, const msp_record_info_t *crec,
                        int stats_file);
/* The finished jobs' metrics onto their rows: verdicts, CRC checks, unreadable data. */
void cmp_finish_jobs(cmp_ctx_t *cx, msp_compare_result_t *res);
/* The attributes of brec and crec (either NULL) that rec carries (cmp_attrs.c). */
msp_err cmp_record_attrs(cmp_ctx_t *cx, msp_record_cmp_t *rec, const msp_record_info_t *brec,
                         const msp_record_info_t *crec);

/* ---- verdicts ---------------------------------------------------------- */

/* is_scalar: a 0-d or one-element tensor, judged by MaxAbsErr alone. */
void cmp_tensor_verdict(msp_tensor_cmp_t *t, const msp_compare_opts_t *opts, int is_scalar);
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
/* --replay auto leaves out records whose output error is under this many
 * times their inputs' (cmp_replay.c, rp_in_doubt). */
#define CMP_REPLAY_GROWTH 4.0
/* The most a number argument computed from the run's tensors may differ by
 * between the sides (relative), and still be taken for data: see
 * msp_record_cmp_t.args_are_data. */
#define CMP_DATA_ARG_MAX 1e-2
/* The numbers of an argument's text ("1e-05", "(2, 2)", "True") into v, at
 * most max: how many, or -1 when it is not numbers only (cmp_attrs.c). */
int cmp_scalars(const char *s, double *v, int max);
#define CMP_REPLAY_ULPS 4.0
/* Replay the records chosen by o->replay within o->replay_budget, filling
 * each record's replay fields and res's replay summary. Replay that cannot
 * start (no Python with torch) is one warning and res->replay_unavailable.
 * w: the caller's worker (cmp_worker.h; zeroed, or cmp_worker_prestart's),
 * started here when needed and released at the end (the caller stops it);
 * NULL: one of this call's own. */
struct cmp_worker;
msp_err cmp_replay_run(msp_compare_result_t *res, const cmp_file_pair_t *fps, size_t nfp,
                       const msp_compare_opts_t *o, struct cmp_worker *w);
/* One more record of verdict v in res's replay summary (introduced,
 * inherited, not replayable, left by the budget; nothing for the others). */
void cmp_replay_count(msp_compare_result_t *res, msp_replay_verdict_t v);
/* Whether cmp_replay_run would replay r, and then its priority (higher
 * first; ties go to the earlier record). A record it never could replay is
 * marked MSP_RV_SKIPPED with its replay_note here. The one rule, so that a
 * streamed compare (cmp_stream.c) chooses as msp_compare_run does. */
int cmp_replay_choose(msp_record_cmp_t *r, const msp_compare_opts_t *o, double *prio);
/* Whether r's error leaves in doubt who made it (a changed argument, an
 * introduced verdict, an output error well past its inputs'): what replay
 * settles, whatever --replay says. */
int cmp_replay_in_doubt(const msp_record_cmp_t *r);

/* Judge each backward record again with its forward record's input and
 * output errors counted as inputs (what the forward saved for it). */
msp_err cmp_link_backward(msp_compare_result_t *res);
/* Module records hide their parameters: in a step after an optimizer record,
 * the worst parameter error it wrote counts as an input error of theirs.
 * seed: that error for a step whose earlier step res does not hold (a
 * streamed compare's part), 0 when none. */
msp_err cmp_module_params(msp_compare_result_t *res, double seed);
/* Module records judged by the records inside them (order_begin): floor of
 * the coarsest dtype computed inside; explained_by when something inside
 * accounts for the error. Runs after replay, before ranking. */
msp_err cmp_judge_modules(msp_compare_result_t *res);
/* Rank every introduced record and producer gap into res->suspects and mark
 * the first top of them (opts->top) on the records. */
msp_err cmp_rank_suspects(msp_compare_result_t *res, int top);
/* Drop the gaps after a NaN/Inf root that only carry its NaN on
 * (cmp_suspects.c); the streamed compare runs it again over every step. */
void cmp_drop_nan_echoes(msp_compare_result_t *res);

/* What cmp_suspects.c borrows from cmp_verdict.c: res's records by step,
 * rank and name, for lookups by name (cmp_index_free releases it; {0} is an
 * empty one); a row's unit roundoff (its coarser side's dtype); whether a
 * record is an optimizer's. */
typedef struct cmp_rec_index {
    const msp_compare_result_t *res;
    msp_index_t h;
} cmp_rec_index_t;
msp_err cmp_index_build(const msp_compare_result_t *res, cmp_rec_index_t *ix);
void cmp_index_free(cmp_rec_index_t *ix);
msp_record_cmp_t *cmp_index_find(const cmp_rec_index_t *ix, int64_t step, int64_t rank,
                                 const char *name);
double cmp_row_unit(const msp_tensor_cmp_t *t);
int cmp_is_optimizer(const msp_record_cmp_t *r);

/* ---- a pair's result as bytes (cmp_spool.c) ------------------------------- */

/* Pack part (records, tensors, suspects, unpaired lines and its counts) into
 * *out (malloc'd); unpack checks every length and index. */
msp_err cmp_part_pack(const msp_compare_result_t *part, unsigned char **out, size_t *len);
msp_err cmp_part_unpack(const unsigned char *buf, size_t len, msp_compare_result_t **out);
/* An unlinked temp file of packed parts in dir (NULL: $TMPDIR, else /tmp),
 * packed and written by a thread of its own: a part is read back once
 * written, and a failed packing or write is the error of the next give or
 * get. Gives from one thread; gets from any. */
typedef struct cmp_spool cmp_spool_t;
msp_err cmp_spool_open(const char *dir, cmp_spool_t **out);
/* The dir that keeps the spool in memory (an anonymous file; a temp file in
 * $TMPDIR where the kernel has none): compared by address, not by text. */
extern const char cmp_spool_memory[];
/* The part is the spool's from here on (freed there once written), whatever
 * the outcome. */
msp_err cmp_spool_give(cmp_spool_t *s, msp_compare_result_t *part);
size_t cmp_spool_count(cmp_spool_t *s);
msp_err cmp_spool_get(cmp_spool_t *s, size_t i, msp_compare_result_t **part);
/* The same part with its strings in one block (msp_compare_result_t.strs):
 * for a caller that changes none of them and moves none elsewhere. */
msp_err cmp_spool_get_shared(cmp_spool_t *s, size_t i, msp_compare_result_t **part);
msp_err cmp_spool_get_packed(cmp_spool_t *s, size_t i, unsigned char **out, size_t *len);
void cmp_spool_close(cmp_spool_t *s); /* NULL-safe */

/* ---- who compares what (cmp_plan.c; msprobe-compare(1), MPI) ------------- */

typedef struct cmp_plan {
    cmp_file_pair_t *fps; /* every pair of the tree, by step, rank, writer (this process's
                              paths for the pairs it owns; NULL paths for the others') */
    size_t nfp;
    int *owner;  /* per pair: the process that compares it */
    char **only; /* one-sided and unreadable steps/ranks, one line each */
    size_t n_only;
} cmp_plan_t;

/* Resolve bench and cmp as this process sees them and, with net (more than
 * one process), agree with the others on every pair of the tree and its
 * owner: a process that sees both of its files, the ranks dealt out in turn
 * among those that see them. Collective under net. */
msp_err cmp_stream_plan(const char *bench, const char *cmp, const msp_compare_net_t *net,
                        cmp_plan_t *plan);
void cmp_plan_free(cmp_plan_t *p);
/* Append a copy of s to *v. */
msp_err cmp_line_push(char ***v, size_t *n, const char *s);

/* ---- samples of a suspect's rows (cmp_sample.c) -------------------------- */

/* Stream the tensor pair (ct of record cr in cf, bt of br in bf) and fill s
 * (max_points element pairs at most, and the histogram). Returns an msp_err
 * whose recorded detail says why there is no sample (s is then the
 * caller's to clear). */
msp_err cmp_sample_tensor(msp_dump_file_t *cf, const msp_record_info_t *cr,
                          const msp_tensor_info_t *ct, msp_dump_file_t *bf,
                          const msp_record_info_t *br, const msp_tensor_info_t *bt,
                          size_t max_points, msp_tensor_sample_t *s);
/* The role part of "<record>.<role>", or NULL; the tensor of r under role, or NULL. */
const char *cmp_tensor_role(const char *tensor_name, const char *record);
const msp_tensor_info_t *cmp_record_tensor(const msp_record_info_t *r, const char *role);
/* Phase A, while the pair's files are open (bf and cf, their records by
 * name in bnames and cnames: cmp_name_index): sample the worst output row of
 * each record of part that may become a suspect (cmp_may_suspect), at most
 * CMP_SAMPLE_RECORDS of them in execution order, into part->samples. A row
 * that cannot be sampled is left out (the page says why when it reopens
 * it); only out of memory fails. */
#define CMP_SAMPLE_RECORDS 50
msp_err cmp_sample_part(msp_compare_result_t *part, msp_dump_file_t *bf, msp_dump_file_t *cf,
                        const msp_record_info_t **bnames, const msp_record_info_t **cnames);
/* Whether a record may be named a suspect with its worst output once
 * replay and the suspects' pass have run: what replay holds in doubt
 * (cmp_replay.c), or an output error that is not finite. */
int cmp_may_suspect(const msp_record_cmp_t *r);
/* rec's output row with the largest relative error (as its suspect names
 * it), -1 when none has one (cmp_suspects.c). */
long cmp_worst_output(const msp_compare_result_t *res, const msp_record_cmp_t *rec);
/* Keep only the samples of rows part's suspects name (phase B). */
void cmp_sample_keep_suspects(msp_compare_result_t *part);
/* A deep copy of src into dst (MSP_ERR_NOMEM recorded; dst then cleared). */
msp_err cmp_sample_copy(msp_tensor_sample_t *dst, const msp_tensor_sample_t *src);

/* ---- a streamed compare's result, for the report writers (cmp_tree.c) ------ */

size_t cmp_tree_parts(const msp_compare_tree_t *t);
/* Part i's first global record and tensor row, its step and rank (-1 when empty). */
void cmp_tree_part_info(const msp_compare_tree_t *t, size_t i, size_t *rec_base, size_t *ten_base,
                        int64_t *step, int64_t *rank);
/* Part i's records and rows (the caller frees), with the report's marks. */
msp_err cmp_tree_load(const msp_compare_tree_t *t, size_t i, msp_compare_result_t **part);
/* The reason of a global record (the first suspect that names it), NULL. */
const char *cmp_tree_reason(const msp_compare_tree_t *t, size_t record);
/* The root cause's row, as a global tensor index; -1 if none. */
long cmp_tree_root_tensor(const msp_compare_tree_t *t);

/* One read of a tree's parts shared by `readers` writers (1..8, numbered
 * 0..readers-1) on threads of their own (cmp_feed.c): part i is loaded once
 * with load(ud, i, &part), by the first reader to ask, and freed when every
 * reader that wants it (wants(ud, reader, i); NULL: all of them) has put it
 * back; the part is shared, read it only. A reader takes the parts it
 * wants in order and holds none while it asks for the next (several
 * threads of one reader may each hold one); it leaves when done or failed,
 * holding nothing, or the others wait for it. At most `window` parts
 * (1..16) are held at once. A failed get has nothing to put back. */
typedef struct cmp_feed cmp_feed_t;
typedef msp_err (*cmp_feed_load_fn)(const void *ud, size_t i, msp_compare_result_t **part);
typedef int (*cmp_feed_wants_fn)(const void *ud, int reader, size_t i);
msp_err cmp_feed_new(cmp_feed_load_fn load, cmp_feed_wants_fn wants, const void *ud, int readers,
                     size_t window, cmp_feed_t **out);
msp_err cmp_feed_get(cmp_feed_t *f, int reader, size_t i, msp_compare_result_t **part);
void cmp_feed_put(cmp_feed_t *f, int reader, const msp_compare_result_t *part);
void cmp_feed_leave(cmp_feed_t *f, int reader);
void cmp_feed_free(cmp_feed_t *f); /* NULL-safe; every reader has left */
/* msp_compare_tree_whole, read from the feed as its reader `reader` (the
 * parts' rows copied, not moved: others read them too); it leaves the feed
 * when done. lean: only the suspect records' rows are copied, each at its
 * index (the others zero: no names, no err_message), what result.html
 * reads; not for --print-log, which prints every row. */
msp_err cmp_tree_whole_fed(const msp_compare_tree_t *t, size_t max_records, cmp_feed_t *f,
                           int reader, int lean, msp_compare_result_t **out);

/* ---- the ranks as one (cmp_ranks.c; msprobe-compare(1), RANKS) ---------- */

/* A communication record (Distributed.*.forward) as the cross-rank pass needs it. */
typedef struct cmp_comm {
    int64_t step, rank, order;
    char *name;   /* record name */
    char *group;  /* its group's ranks ("0-3"), NULL if unknown */
    int64_t peer; /* -1 if none */
    double in_err, out_err, floor;
} cmp_comm_t;

typedef struct cmp_comm_set {
    cmp_comm_t *v;
    size_t n, cap;
} cmp_comm_set_t;

/* Add part's communication records to cs (copies). */
msp_err cmp_comm_collect(cmp_comm_set_t *cs, const msp_compare_result_t *part);
void cmp_comm_set_free(cmp_comm_set_t *cs);
/* Add part's records to res->ranks (sorted by rank; *cap its capacity):
 * pairs, records, tensors, failing records, worst Cosine. */
msp_err cmp_rank_stats_add(msp_compare_result_t *res, size_t *cap,
                           const msp_compare_result_t *part);
/* The cross-rank pass, after cmp_rank_suspects: suspects whose error came
 * in from another rank through a communication record are annotated
 * (via_comm, from_rank, reason) and move behind the rest of their step
 * (stable); marks (suspect_rank, is_root_cause for the first top, <= 0 all),
 * root_record/root_tensor, each rank's origin and first_rank follow the new
 * order. Needs res->ranks filled (cmp_rank_stats_add) and the records the
 * suspects name; cs holds every communication record of the compare. */
msp_err cmp_ranks_order(msp_compare_result_t *res, const cmp_comm_set_t *cs, int top);

/* ---- a streamed compare's tree and phase B (cmp_tree.c; cmp_stream.c) ------ */

typedef struct cmp_mark cmp_mark_t;
typedef struct cmp_prev cmp_prev_t;

struct msp_compare_tree {
    int is_root;
    msp_compare_result_t *head;            /* suspects with copies of their records and rows */
    size_t n_records, n_tensors, n_failed; /* totals over the tree */
    cmp_spool_t *spool;                    /* the final parts, in (step, rank) order */
    size_t n_parts;
    size_t *rec_base, *ten_base; /* per part */
    int64_t *part_rank, *part_step;
    cmp_mark_t *marks; /* by record */
    size_t n_marks;
    long root_tensor;            /* global */
    size_t *head_rec, *head_ten; /* the global index of each head record and row copy */
    size_t *proc_pairs;          /* pairs each process compared */
    int n_procs;
    struct cmp_worker *worker; /* replay's session, ended: stopped (its end awaited) on free */
};

/* Phase B's state: the tree it fills and what it keeps between pairs. */
typedef struct cmp_finish cmp_finish_t;
struct cmp_finish {
    msp_compare_tree_t *t;
    msp_compare_result_t *head;
    size_t cap_rec, cap_ten, cap_sus, cap_ranks;
    size_t *head_rec_global, *head_ten_global; /* per head copy */
    int *tiers;                                /* per head suspect */
    cmp_comm_set_t comm;
    cmp_prev_t *prev; /* per rank: its last step with records */
    size_t n_prev, cap_prev;
    int top;
};

/* An empty result (no root record, tensor or first rank), NULL when out of memory. */
msp_compare_result_t *cmp_result_new(void);
/* The out-of-memory error, recorded. */
msp_err cmp_oom(void);
/* A copy of s (NULL stays NULL); *oom set when the copy fails. */
char *cmp_dup(const char *s, int *oom);
/* A copy of src into dst, first_tensor 0; stack, parent and tensors left
 * out when lean (replay needs none of them). */
msp_err cmp_copy_record(msp_record_cmp_t *dst, const msp_record_cmp_t *src, int lean);
/* One finished pair (phase A's, replay's answers applied) into f's tree;
 * part's suspects move to the head, and part is the tree's from here on
 * (freed by it), whatever the outcome. */
msp_err cmp_finish_part(cmp_finish_t *f, msp_compare_result_t *part);
/* After the last pair: one order of suspects, the cross-rank pass, the marks. */
msp_err cmp_finish_tree(cmp_finish_t *f);

#endif
