/* Compare two dumps (files, rank dirs or dump roots) tensor by tensor.
 *
 * msp_compare_run() matches records, computes the metrics msprobe-compare(1)
 * lists (METRICS) in float64 over every tensor pair (OpenMP across pairs and
 * inside large tensors), applies msprobe's verdict rules, classifies every
 * forward record as introducing or inheriting an error, and picks the
 * root-cause candidate. The reports of a result are msprobe/report.h's
 * (src/report).
 */
#ifndef MSPROBE_COMPARE_H
#define MSPROBE_COMPARE_H

#include "msprobe/common.h"
#include "msprobe/format.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum msp_level {
    MSP_LEVEL_ALL = 0,   /* every record */
    MSP_LEVEL_API = 1,   /* records not starting with "Module." */
    MSP_LEVEL_MODULE = 2 /* records starting with "Module." */
} msp_level_t;

typedef struct msp_compare_opts {
    msp_level_t level;
    int fuzzy; /* match by name without call index, in order, equal shapes (not by exact name) */
    const char *mapping_path; /* optional file of "bench_record_name cmp_record_name" lines */
    int threads;              /* 0 = OpenMP default */
    /* verdict: No if (cos < cos_warn && max_abs > abs_warn) || cos < cos_fail || max_abs > abs_fail || N/A */
    double cos_warn;          /* 0.99 */
    double abs_warn;          /* 0.001 */
    double cos_fail;          /* 0.9 */
    double abs_fail;          /* 1.0 */
    double stats_warn;        /* statistics mode: relative difference > this -> Warning (0.5) */
    msp_progress_cb progress; /* called with bytes of tensor data compared; may be NULL */
    void *progress_ud;
    size_t chunk_bytes; /* bytes per side read and compared as one unit of work;
                                  0 = default (1 MiB). Results depend on it, never on threads. */
    int io_mode;        /* how tensor data with a file offset is read: MSP_IO_DEFAULT
                                  (= MSP_IO_PREAD), MSP_IO_PREAD or MSP_IO_MMAP; same results;
                                  a mapped file that shrinks while read raises SIGBUS */
    int top;            /* suspects marked in the report (5); <= 0: all */
    /* Replay (msprobe-compare(1), REPLAY): re-run records of a tensor dump on
     * the CPU in a Python worker with torch. */
    int replay;                /* MSP_REPLAY_AUTO (records whose outputs differ, most
                                  suspicious first), MSP_REPLAY_OFF, MSP_REPLAY_ALL */
    double replay_budget;      /* seconds of wall time for replay (60); <= 0: no limit */
    const char *replay_python; /* the Python to run it; NULL: $MSPROBE_PYTHON, else the
                                  build's default (MSP_DEFAULT_PYTHON) */
    void (*replay_progress)(size_t done, size_t total, void *ud); /* may be NULL */
    void *replay_progress_ud;
    const char *cell_mapping_path; /* msprobe's cell_mapping.yaml, or NULL: "NPU: BENCH" lines,
                                  each a module's "name.Class" (the whole of it, else the
                                  first place it appears in a compare-side module record's
                                  name) renamed before matching */
    int no_samples;                /* 1: take no samples of the likely suspects' rows while
                                      the pairs' files are open (no page shows them) */
    const char *spool_dir;         /* msp_compare_stream's temporary file goes here (unlinked at
                                  once); NULL: $TMPDIR, else /tmp */
} msp_compare_opts_t;

enum { MSP_REPLAY_AUTO = 0, MSP_REPLAY_OFF = 1, MSP_REPLAY_ALL = 2 };

enum { MSP_IO_DEFAULT = 0, MSP_IO_PREAD = 1, MSP_IO_MMAP = 2 };

/* Fill opts with the defaults above. */
void msp_compare_opts_default(msp_compare_opts_t *opts);

typedef enum msp_verdict {
    MSP_VERDICT_YES = 0,
    MSP_VERDICT_NO = 1,
    MSP_VERDICT_WARNING = 2, /* statistics mode only */
    MSP_VERDICT_NA = 3       /* "N/A": a record found on one side only when the other side
                                 is msprobe's own dump (its wrap lists differ by version);
                                 not a failure, as msprobe reports it */
} msp_verdict_t;

/* msprobe 26's "Result" of a row and of a record (msprobe-compare(1), RESULT). */
typedef enum msp_result {
    MSP_RESULT_PASS = 0,
    MSP_RESULT_WARNING = 1,
    MSP_RESULT_ERROR = 2
} msp_result_t;

typedef enum msp_cause {
    MSP_CAUSE_NONE = 0,       /* outputs agree, or not a forward record */
    MSP_CAUSE_INTRODUCED = 1, /* output error clearly above its inputs' and its precision's floor */
    MSP_CAUSE_INHERITED = 2   /* output error explained by the error its inputs carry */
} msp_cause_t;

/* What replay said of a record. */
typedef enum msp_replay_verdict {
    MSP_RV_NONE = 0,       /* not replayed (off, outputs equal, not a tensor dump) */
    MSP_RV_INTRODUCED = 1, /* its output departs from the replay of its own inputs */
    MSP_RV_INHERITED = 2,  /* the replay of its own inputs reproduces its output */
    MSP_RV_SKIPPED = 3,    /* cannot be replayed; replay_note says why */
    MSP_RV_UNFINISHED = 4  /* the time budget ran out first */
} msp_replay_verdict_t;

typedef enum msp_highlight { MSP_HL_NONE = 0, MSP_HL_YELLOW = 1, MSP_HL_RED = 2 } msp_highlight_t;

/* One row of the details sheet. Doubles that are NaN are written as "N/A". */
typedef struct msp_tensor_cmp {
    char *npu_name;   /* "<record>.<role>" on the compare side; NULL if missing there */
    char *bench_name; /* same on the bench side; NULL if missing there */
    char npu_dtype[40], bench_dtype[40];        /* torch names, "" if missing */
    char npu_shape[96], bench_shape[96];        /* "[2, 3, 4]", "[]" for 0-d, "" if missing */
    int npu_requires_grad, bench_requires_grad; /* 0/1; -1 when the tensor is missing */
    int is_output;                              /* role starts with "output" */
    /* tensor mode */
    double cosine, euc_dist, max_abs_err, max_rel_err;
    double one_thousandth_ratio, five_thousandths_ratio;
    /* both modes: side statistics (max, min, mean, l2norm) */
    double npu_max, npu_min, npu_mean, npu_norm;
    double bench_max, bench_min, bench_mean, bench_norm;
    /* statistics mode: npu - bench, and msprobe 26's |(npu - bench) / bench| x 100, a
     * percentage written "x%" in the reports (NaN = "N/A" when bench is 0) */
    double max_diff, min_diff, mean_diff, norm_diff;
    double max_rel_diff, min_rel_diff, mean_rel_diff, norm_rel_diff;
    msp_verdict_t verdict;
    int agree; /* allclose at the less precise dtype: 1 yes, 0 no, -1 not compared */
    msp_highlight_t highlight;
    char *err_message; /* "" when none; never NULL */
    uint64_t bytes;    /* tensor bytes read, both sides */
    /* error-origin model (see msp_compare_run) */
    double rel_err;      /* ||n-b||/||b|| (one element: |n-b|/|b|); statistics rows:
                                  |norm_n-norm_b|/norm_b; +Inf when b is 0 and n is not or
                                  NaN/Inf sit apart; NaN when not comparable */
    char *producer;      /* "RECORD/ROLE" this input was produced as (compare side,
                                  else bench side), NULL when the dump does not say */
    int gap;             /* 1: on some side this input differs from its producer's
                                  output: something unrecorded changed it in between;
                                  2: the dump records producers but none for this float
                                  input: an unrecorded op (or a leaf) made it */
    msp_result_t result; /* msprobe 26's rules, row by row; its reasons are appended
                                  to err_message ("error: The shape of NPU and Bench ...") */
    char *npu_data_name, *bench_data_name; /* where the data is: msprobe's .pt/.npy file
                                  name, "/RECORD/ROLE" in our dump.h5; NULL: no data */
    uint32_t npu_crc32, bench_crc32;       /* CRC-32 of the data as the dump says (msprobe's
                                  "md5"), 0 when it does not */
    int npu_nonfinite, bench_nonfinite;    /* that side holds NaN or Inf (its statistics or
                                  its data say so) */
} msp_tensor_cmp_t;

/* One row of the summary sheet. */
typedef struct msp_record_cmp {
    char *name;       /* compare-side record name (bench name if missing there) */
    char *bench_name; /* bench-side record name, NULL if unmatched */
    int64_t step, rank, order;
    size_t first_tensor; /* index into result->tensors */
    size_t n_tensors;
    double worst_cosine;   /* min Cosine over outputs (NaN if none) */
    double worst_max_abs;  /* max MaxAbsErr over outputs (NaN if none) */
    msp_verdict_t verdict; /* worst verdict over its tensors */
    msp_cause_t cause;
    int is_root_cause;         /* the first introduced error overall */
    msp_highlight_t highlight; /* worst of its tensors */
    double in_err;             /* worst input rel_err (NaN: no comparable input) */
    double out_err;            /* worst output rel_err (NaN: no comparable output) */
    double floor;              /* rel_err its compute precision explains */
    double score;              /* out_err / max(CMP_AMPLIFY * in_err, floor) */
    int suspect_rank;          /* 1-based place among the suspects, 0 if none */
    char *npu_stack;           /* the call stack the compare side recorded (msprobe's
                                  stack.json; record attribute "stack"), NULL if none */
    int64_t order_begin;       /* module forward records: records of this step and rank
                                  with order in [order_begin, order) ran inside it
                                  (attribute order_begin); -1 when unknown */
    char *arg_diff;            /* the non-tensor arguments (and optimizer hyperparameters)
                                  that differ between the sides, "kwarg.stride: NPU (2, 2),
                                  bench (1, 1)" joined by "; "; NULL if none */
    msp_replay_verdict_t replay;
    double replay_err;      /* worst output's ||npu - R64|| / ||R64|| */
    double replay_ref;      /* what the same-dtype replay departs from R64 (e_ref) */
    char *replay_note;      /* how it was replayed ("autocast bfloat16") or why not */
    int explained_by;       /* module records: 1 when records inside it explain its
                                  error (it is then never a suspect) */
    int tier;               /* suspects: 0 decisive (replay, a changed argument, a
                                  NaN made from finite inputs), 1 from error ratios
                                  alone, 2 a changed argument replay did not confirm */
    double autocast_u;      /* unit roundoff of the autocast dtype the record ran
                                  under (attribute autocast), 0 when none */
    int args_scalar_differ; /* one of arg_diff's arguments is a Python scalar (or a
                                  tuple of them): msprobe 26's check of arguments */
    msp_result_t result;    /* worst Result of its rows */
    int setup_differs;      /* a scalar argument or a requires_grad differs: the two
                                  runs did not do the same thing; fails the compare
                                  whatever the metrics */
    char *parent;           /* compare-side record of the module it ran in (record
                                  attribute "parent": module and mix dumps, msprobe's
                                  construct.json), NULL if none */
    char *comm_group;       /* Distributed records: the global ranks of the call's
                                  process group ("0-3", attribute group), NULL if unknown */
    int64_t comm_peer;      /* Distributed records: the rank at the other end (attribute
                                  peer), -1 if none */
    double arg_reldiff;     /* the largest relative difference of arg_diff's arguments
                                  when each is one finite number on both sides; -1 when
                                  one is not (text, a tuple, absent on a side); 0: none */
    int args_are_data;      /* arg_diff's numbers differ by no more than the larger of
                                  the record's input error and its rounding floor (and at
                                  most 1 %): scalars computed from the run's
                                  tensors (float(t.max()), t.item()), inputs with an error
                                  of their own, not changed settings */
    char *params;           /* inputs that are a model's parameters or buffers, "ROLE=NAME"
                                  lines ("input.1=fc1.weight"; attributes param.ROLE, module
                                  records' parameters.NAME), NULL if none */
} msp_record_cmp_t;

/* A ranked suspect: a record that introduced error, or a gap between a
 * recorded output and the input that should equal it. */
typedef struct msp_suspect {
    long record;    /* index into records (the consumer, for a gap) */
    long tensor;    /* worst output row (gap: the consumer's input row), -1 none */
    int is_gap;     /* 1: "between PRODUCER and record.role"; 2: a parameter
                                  (or buffer) that differs before any op of its step used
                                  it, record.role being its first use */
    int from_stats; /* 1: judged from statistics only */
    double in_err, out_err, amplification, score;
    char *reason; /* one line, never NULL */
} msp_suspect_t;

/* One rank of the compared tree, as the ranks sheet shows it (msprobe-compare(1),
 * RANKS): its counts, and where its error came from. */
typedef struct msp_rank_summary {
    int64_t rank;
    size_t pairs, records, tensors, failing;
    double worst_cosine;       /* min over its records' worst output Cosine, NaN if none */
    long first_suspect;        /* index into suspects of its first suspect, -1 if none */
    int origin;                /* MSP_ORIGIN_* below */
    int64_t from_rank;         /* MSP_ORIGIN_INHERITED: the rank the error came from */
    int64_t at_step, at_order; /* where its error begins (its first suspect, or where it
                                  came in); -1 when none */
    char *at;                  /* that record's name; NULL when none */
} msp_rank_summary_t;

enum {
    MSP_ORIGIN_NONE = 0,       /* no record of it introduced or received error */
    MSP_ORIGIN_INTRODUCED = 1, /* its first error is one of its own suspects */
    MSP_ORIGIN_INHERITED = 2   /* its first error came in through a communication record */
};

/* A bounded look at one compared tensor pair (a suspect card's histogram and
 * scatter): every stride-th element pair from the first, at most max_points,
 * and a histogram of |npu - bench| over every element. */
#define MSP_SAMPLE_BINS 64 /* 4 a decade, edges 10^-12 ... 10^4 */
#define MSP_SAMPLE_LO_EXP (-12)
#define MSP_SAMPLE_PER_DECADE 4
#define MSP_SAMPLE_POINTS 2000 /* element pairs a suspect card plots */
typedef struct msp_tensor_sample {
    long tensor; /* row in res->tensors */
    char *why;   /* NULL, or why there is no sample (statistics dump,
                                  file gone, shapes differ); the rest is then zero */
    uint64_t numel;
    /* the elements read: all (every 1), or past 65,536 those of every
     * every-th run of 1,024, counted in all; the histogram is theirs */
    uint64_t counted, every;
    uint64_t stride;     /* the points: 1 in stride of the elements read */
    size_t n;            /* pairs sampled */
    double *npu, *bench; /* n values each, as read (NaN/Inf kept) */
    /* |npu - bench|: bins[k] counts e in [10^(LO + k/PER), 10^(LO + (k+1)/PER)) */
    uint64_t bins[MSP_SAMPLE_BINS];
    uint64_t zero;         /* e == 0 */
    uint64_t below, above; /* 0 < e < 10^LO, e >= the last edge */
    uint64_t nonfinite;    /* NaN or Inf on either side */
} msp_tensor_sample_t;

void msp_tensor_sample_free(msp_tensor_sample_t *s); /* NULL-safe; frees the contents */

typedef struct msp_compare_result {
    int stats_mode;            /* 1 if either side is a statistics-only dump */
    msp_record_cmp_t *records; /* by step, rank, then order */
    size_t n_records;
    msp_tensor_cmp_t *tensors;
    size_t n_tensors;
    long root_record;        /* the first suspect's record (the consumer for a gap), -1 if none */
    long root_tensor;        /* its worst output (a gap: the changed input), -1 if none */
    size_t n_failed;         /* records whose verdict is not Yes */
    size_t n_pairs;          /* step x rank file pairs compared */
    uint64_t bytes_compared; /* tensor bytes read, both sides */
    char **unpaired;         /* "step N rank R only in the bench dump (path)", one per
                                  step/rank present on one side only (also logged as warnings) */
    size_t n_unpaired;
    char **unread; /* "step N rank R skipped: why", one per step/rank whose file
                                  could not be read (also in unpaired): the report is incomplete */
    size_t n_unread;
    size_t n_crc_bad;        /* tensors whose data fails the CRC-32 its dump stores */
    size_t n_unreadable;     /* tensors whose data file cannot be read (msprobe's .pt
                                  missing, truncated, refused): their rows' error */
    char *first_unreadable;  /* "RECORD.ROLE: why" of the first of them, or NULL */
    msp_suspect_t *suspects; /* most likely first; every introduced record and gap */
    size_t n_suspects;
    /* replay summary */
    size_t replay_candidates; /* records chosen for replay */
    size_t replay_done;       /* replayed (introduced + inherited) */
    size_t replay_introduced, replay_inherited, replay_skipped, replay_unfinished;
    double replay_seconds;     /* wall time spent replaying */
    char *replay_unavailable;  /* why replay did not run at all, NULL if it ran or was off */
    int64_t *suspect_from;     /* parallel to suspects, set by the cross-rank pass
                                  (msprobe-compare(1), RANKS): the rank whose error a
                                  communication record only passed on (that suspect
                                  inherited it), -1 for every other suspect; NULL before */
    msp_rank_summary_t *ranks; /* one per rank compared, by rank (the cross-rank pass) */
    size_t n_ranks;
    long first_rank; /* index into ranks of the rank the error started on, -1 */
    /* the suspects' rows sampled while the compare had their files open
     * (at most MSP_SAMPLE_POINTS element pairs each), by row; a suspect's
     * row without one is sampled by msp_compare_sample (report.h) */
    msp_tensor_sample_t *samples;
    size_t n_samples;
    /* NULL: every row is held. Else the records (ascending, n_held_records)
     * whose rows alone are: the others are zero, index kept (the lean
     * result a report page reads, report.h's msp_report_set_t.whole) */
    size_t *held_records;
    size_t n_held_records;
    /* NULL: each string of the result is malloc'd on its own. Else one
     * block that holds every string of its records, tensors and suspects
     * (a part read back from the spool for the reports, which only read
     * it): msp_compare_result_free frees the block, none of them alone */
    char *strs;
    /* NULL, or blocks that hold the records' names and the rows' names,
     * data names and producers as the compare built them: freed with the
     * result, none of those alone */
    struct cmp_names *names;
    /* The reports' texts of the rows' numbers, made once when two reports
     * read this part (share_texts, set by the report that loads it; texts
     * NULL until one asks): freed with the result by texts_free */
    int share_texts;
    void *texts;
    void (*texts_free)(void *);
} msp_compare_result_t;

/* bench and cmp: two dump.h5 files, two rank dirs (holding dump.h5), two step
 * dirs (rank{R}/dump.h5, paired by rank) or two dump roots
 * (step{N}/rank{R}/dump.h5, paired by step and rank); both of one kind, told
 * apart with stat(). A step/rank present on one side only is logged
 * (msp_log warning), listed in res->unpaired and skipped; no common pair is
 * MSP_ERR_MISMATCH. opts may be NULL (defaults). On success *out is owned by
 * the caller (msp_compare_result_free); on failure *out is NULL and
 * msp_last_error() names the file, record or mapping line at fault.
 *
 * Matching (catalogues only, no tensor data): --mapping pairs first, then
 * equal names, or with opts->fuzzy (instead) the same name without its call index
 * ("Torch.matmul.3.forward" ~ "Torch.matmul.forward", "Module.fc.Linear.
 * forward.2" ~ "Module.fc.Linear.forward"), each compare record taking the
 * first bench record after the last one taken with equal roles and shapes.
 * Mapping file: one "bench_name cmp_name" pair a line, or msprobe's
 * data_mapping.yaml "npu_tensor: bench_tensor" (see cmp_mapping_load), '#' starts a comment;
 * any other line is MSP_ERR_USAGE naming file:line. Inside a record pair,
 * tensors pair by role. Rows are ordered input.*, kwarg.*, output.*.
 *
 * Row rules (tensor_cmp):
 *  - one side missing (record or role): metrics NaN, agree -1, verdict No,
 *    err_message "record missing in NPU dump" / "tensor missing in bench record" ...;
 *    the present side's statistics are filled from its dump attributes.
 *  - shapes differ: metrics NaN, agree 0, verdict No.
 *  - either side statistics-only (or a task=statistics file): the four
 *    statistics compared (npu - bench and |npu - bench| / max(|npu|, |bench|),
 *    0 when both are 0; equal NaN or equal Inf count as no difference);
 *    verdict Warning when a relative difference > stats_warn or NaN/Inf sits
 *    in one side's statistic only, else Yes; agree -1; res->stats_mode = 1.
 *  - dtype the reader does not know: metrics NaN, verdict No.
 *  - otherwise metrics over the full tensors in float64 (msprobe's formulas;
 *    MaxRelativeErr adds DBL_EPSILON to both n and b where b == 0). Cosine is
 *    1 when both norms are <= DBL_EPSILON and NaN (with a message) when one is.
 *    NaN/Inf at the same places on both sides are zeroed for the metrics (a
 *    message says so; +Inf against -Inf zeroes too, as msprobe, but does not
 *    agree); at different places every metric is NaN, agree 0, verdict No.
 *    Side max/min/mean/l2norm are the dump's attributes when both tensors
 *    carry them (as msprobe), else computed as torch does over the raw values
 *    (a NaN makes them NaN). The stats-mode diff fields are filled too.
 *  - 0-d and one-element tensors: Cosine NaN ("one element"), every other
 *    metric computed; verdict from MaxAbsErr alone (No if > abs_fail).
 *  - empty tensors (a 0 in the shape): metrics NaN, side max/min/mean NaN,
 *    norms 0, err_message "empty tensor", agree 1, verdict Yes.
 *  - agree: every element |n-b| <= atol + rtol*|b| (msp_tolerance of the
 *    coarser dtype), NaN at the same places, Inf equal.
 * Record rules: verdict = worst of its rows (No > Warning > Yes). Cause, for
 * every record (msprobe-compare(1), ROOT CAUSE): rel_err per row; in_err =
 * worst input (a differing integer input: +Inf; a backward record also counts
 * its forward's in_err/out_err e as max(e, 2 sqrt(e) / 8)); out_err = worst
 * output; floor = 8 unit roundoffs of the coarsest dtype of its rows + 1e-5.
 * out_err <= floor -> NONE; > max(8 in_err, floor) -> INTRODUCED (integer
 * outputs: only with identical inputs); else INHERITED. res->suspects: the
 * introduced records, parameters and producer gaps (tensor gap 1, or gap 2
 * judged against the worst output error recorded before it on its rank), by
 * step, then evidence (parameters, replay, a changed argument before error
 * ratios; msprobe-compare(1), Ranking), then order, then rank; the first
 * opts->top get suspect_rank on their record; the first is the root cause
 * (root_record / root_tensor).
 * Highlight per output row: red when the NPU side holds NaN/Inf, MaxAbsErr
 * (|max diff| in statistics mode) > 1e10, or every input is Yes and the
 * output is not; yellow when its error > 0 and >= 10x the largest input
 * error, or its Cosine < the lowest input Cosine - 0.1; the across-the-op
 * rules need at least one input. Records sort by step, rank, order, name;
 * two single files take step/rank from the compare file's attributes (0 if absent).
 *
 * Speed and memory: tensor data with a file offset is mapped (or pread) in
 * units of opts->chunk_bytes per side and compared in parallel; partial
 * results merge in unit order, so results never depend on opts->threads.
 * Resident memory is a few units per thread plus the catalogues and the
 * result, whatever the dump size. Data without an offset is read whole
 * through msp_dump_read_tensor, one tensor pair at a time.
 *
 * One pipeline: msp_compare_run is msp_compare_stream on one process, its
 * tree then made one result (msp_compare_tree_whole). */
msp_err msp_compare_run(const char *bench, const char *cmp, const msp_compare_opts_t *opts,
                        msp_compare_result_t **out);
void msp_compare_result_free(msp_compare_result_t *res); /* NULL-safe */

/* ---- a whole tree, one pair in memory at a time, on one or many processes ----
 *
 * msp_compare_stream is the compare (msp_compare_run is it, made one result
 * at the end), holding one step x rank pair in memory at a time: finished
 * pairs go to an unlinked temporary file in opts->spool_dir, and the reports
 * are written from it (msprobe-compare(1), SCALE). With net, the processes of
 * one launch share the work (msprobe-compare(1), MPI): each compares the
 * pairs whose files it sees (the plan in cmp_stream.c), and process 0 gathers
 * them in (step, rank) order and alone gets a tree holding the result; every
 * other process gets a tree with nothing in it (msp_compare_tree_is_root 0).
 * Every process must call it with the same arguments. */

/* How the processes of one compare talk (an MPI launch). Each operation
 * returns MSP_OK or an error with its message set. */
typedef struct msp_compare_net {
    int rank, size; /* this process, and how many there are */
    void *ud;
    /* collective: every process gives len bytes; *all gets them all, one after
     * the other by process (malloc'd), lens[p] the length of process p's */
    msp_err (*allgather)(void *ud, const void *mine, size_t len, void **all, size_t *lens);
    /* point to point, blocking; recv's *buf is malloc'd (len 0 allowed) */
    msp_err (*send)(void *ud, int to, const void *buf, size_t len);
    msp_err (*recv)(void *ud, int from, void **buf, size_t *len);
} msp_compare_net_t;

typedef struct msp_compare_tree msp_compare_tree_t;

/* net may be NULL (one process). On success *out is the caller's
 * (msp_compare_tree_free); on failure NULL, and every process of a launch
 * fails with the first failing process's error. */
msp_err msp_compare_stream(const char *bench, const char *cmp, const msp_compare_opts_t *opts,
                           const msp_compare_net_t *net, msp_compare_tree_t **out);
/* 1 on the process that holds the result (process 0). */
int msp_compare_tree_is_root(const msp_compare_tree_t *t);
/* Everything of the result but its rows: stats_mode, n_pairs, bytes_compared,
 * unpaired, n_failed, replay's summary, suspects with root_record/root_tensor,
 * ranks and first_rank. Its records and tensors are copies of those the
 * suspects name (so suspects[i].record indexes them), not the tree's. NULL
 * on the other processes. */
const msp_compare_result_t *msp_compare_tree_head(const msp_compare_tree_t *t);
/* Records, tensor rows and failing records of the whole tree. */
void msp_compare_tree_totals(const msp_compare_tree_t *t, size_t *records, size_t *tensors,
                             size_t *failing);
/* How many processes shared the compare; *pairs (may be NULL) gets the step x
 * rank pairs each was given. Process 0 only. */
int msp_compare_tree_processes(const msp_compare_tree_t *t, const size_t **pairs);
void msp_compare_tree_free(msp_compare_tree_t *t); /* NULL-safe */
/* The whole tree as one result (every part's records and rows, the head's
 * suspects and root at their places), for what needs it all at once (the
 * HTML report, --print-log); *out NULL when the tree has more than
 * max_records records, or on a process other than 0. */
msp_err msp_compare_tree_whole(const msp_compare_tree_t *t, size_t max_records,
                               msp_compare_result_t **out);
/* Metric kernel, exposed for tests and benchmarks: compare count native
 * elements of n (compare side) and b (bench side), any pair of supported
 * dtypes, unaligned pointers allowed, with the row rules of msp_compare_run
 * (count 1: Cosine NaN; count 0: "empty tensor"), side statistics computed
 * from the data, agree against rtol/atol. Parallel (OpenMP) over 1 MiB units
 * merged in order. MSP_ERR_UNSUPPORTED for an unknown dtype. */
typedef struct msp_metrics {
    double cosine, euc_dist, max_abs_err, max_rel_err;
    double one_thousandth_ratio, five_thousandths_ratio;
    double n_max, n_min, n_mean, n_norm, b_max, b_min, b_mean, b_norm;
    int agree;            /* allclose with rtol/atol */
    int nan_inf_mismatch; /* NaN/Inf at different places: metrics N/A */
    const char *message;  /* static text or NULL */
} msp_metrics_t;

msp_err msp_metrics_compute(msp_dtype_t ndt, const void *n, msp_dtype_t bdt, const void *b,
                            size_t count, double rtol, double atol, msp_metrics_t *out);
/* torch.testing.assert_close tolerances for the less precise of two dtypes. */
void msp_tolerance(msp_dtype_t a, msp_dtype_t b, double *rtol, double *atol);

#ifdef __cplusplus
}
#endif
#endif
