/* msprobe compare: check the arguments, run the engine with a progress bar,
 * write the reports, and print a short summary plus the root-cause line.
 *
 * The stdout lines are documented in msprobe-compare(1) and scripts read them;
 * change them only together with the man page and tests/cli. */
#include "cli.h"

#include "msprobe/compare.h"
#include "msprobe/report.h"

#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <malloc.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Records the HTML report and --print-log take at most (msprobe-compare(1)). */
#define MSP_WHOLE_MAX_RECORDS 200000
/* --mpi-timeout's default: a process that is alive says so every second
 * whatever it is doing, so two minutes of silence is a stopped or cut-off
 * process, never a slow one (msprobe-compare(1), MPI). */
#define MSP_MPI_TIMEOUT_DEFAULT 120.0

enum {
    MSP_OPT_FUZZY = 256,
    MSP_OPT_MAPPING,
    MSP_OPT_CSV,
    MSP_OPT_THREADS,
    MSP_OPT_COS_WARN,
    MSP_OPT_ABS_WARN,
    MSP_OPT_COS_FAIL,
    MSP_OPT_ABS_FAIL,
    MSP_OPT_STATS_WARN,
    MSP_OPT_TOP,
    MSP_OPT_REPLAY,
    MSP_OPT_REPLAY_BUDGET,
    MSP_OPT_CELL_MAPPING,
    MSP_OPT_PRINT_LOG,
    MSP_OPT_INPUT_JSON,
    MSP_OPT_MODE,
    MSP_OPT_NO_HTML,
    MSP_OPT_MPI_TIMEOUT,
    MSP_OPT_MSPROBE_OUTPUTS,
    MSP_OPT_XLSX,
    MSP_OPT_DIFF_ANALYZE,
};

/* The options as parsed: those that are only stored are bound to their field
 * in the table below; the others are checked in msp_compare_main's switch. */
typedef struct msp_compare_args {
    const char *bench, *cmp, *out_dir;
    int csv, html, quiet, print_log;
    int msprobe, xlsx, diff_analyze; /* --msprobe-outputs, --xlsx, --diff-analyze */
    double mpi_timeout;
    msp_compare_opts_t opts;
} msp_compare_args_t;
static msp_compare_args_t msp_ca;

static const msp_opt_word_t msp_level_words[] = {
    {"api", MSP_LEVEL_API}, {"module", MSP_LEVEL_MODULE}, {"all", MSP_LEVEL_ALL}, {NULL, 0}};
static const msp_opt_word_t msp_replay_words[] = {
    {"auto", MSP_REPLAY_AUTO}, {"all", MSP_REPLAY_ALL}, {"off", MSP_REPLAY_OFF}, {NULL, 0}};

static const msp_opt_t msp_compare_opts[] = {
    MSP_OPT('b', "bench", "PATH", "dump of the trusted run (bench side)",
            MSP_BIND(STRING, &msp_ca.bench)),
    MSP_OPT('c', "compare", "PATH", "dump of the run under suspicion (compare side)",
            MSP_BIND(STRING, &msp_ca.cmp)),
    MSP_OPT('o', "output", "DIR",
            "report directory (default ./compare_result;\n"
            "./output with --msprobe-outputs, as msprobe)",
            MSP_BIND(STRING, &msp_ca.out_dir)),
    MSP_OPT('l', "level", "LEVEL", "records to compare: api, module or all (default all)",
            MSP_BIND_ENUM(&msp_ca.opts.level, msp_level_words)),
    MSP_OPT(MSP_OPT_FUZZY, "fuzzy", NULL,
            "match records by order, name without call index and shapes",
            MSP_BIND(TRUE, &msp_ca.opts.fuzzy)),
    MSP_OPT(MSP_OPT_MAPPING, "mapping", "FILE",
            "extra pairs, one \"bench_record cmp_record\" per line,\n"
            "or msprobe's data_mapping.yaml (\"npu_tensor: bench_tensor\")",
            MSP_BIND(STRING, &msp_ca.opts.mapping_path)),
    MSP_OPT(MSP_OPT_CELL_MAPPING, "cell-mapping", "FILE",
            "msprobe's cell_mapping.yaml: compare-side module\n"
            "names renamed to the bench's before matching",
            MSP_BIND(STRING, &msp_ca.opts.cell_mapping_path)),
    MSP_OPT(MSP_OPT_CSV, "csv", NULL, "also write OUT/result.csv", MSP_BIND(TRUE, &msp_ca.csv)),
    MSP_OPT(MSP_OPT_MSPROBE_OUTPUTS, "msprobe-outputs", NULL,
            "write msprobe's files and exit as msprobe does:\n"
            "compare_result_rank{N}_{time}.csv per rank (no\n"
            "result.xlsx), exit 0 whatever the verdicts; implied\n"
            "by msprobe's own -tp/-gp or -i (msprobe-compare(1))",
            MSP_BIND(TRUE, &msp_ca.msprobe)),
    MSP_OPT(MSP_OPT_XLSX, "xlsx", NULL,
            "with --msprobe-outputs: workbooks, not csv\n"
            "(msprobe 26's --xlsx; 8.x's -i implies it)",
            MSP_BIND(TRUE, &msp_ca.xlsx)),
    MSP_OPT(MSP_OPT_DIFF_ANALYZE, "diff-analyze", NULL,
            "also write OUT/diff_analyze_{ns}.json, each rank's\n"
            "first error of its own (msprobe's -da)",
            MSP_BIND(TRUE, &msp_ca.diff_analyze)),
    MSP_OPT(MSP_OPT_NO_HTML, "no-html", NULL, "do not write OUT/result.html (the charts page)",
            MSP_BIND(FALSE, &msp_ca.html)),
    MSP_OPT(MSP_OPT_THREADS, "threads", "N", "worker threads (default: all cores)",
            MSP_BIND_INT(&msp_ca.opts.threads, 1, 4096)),
    MSP_OPT(MSP_OPT_COS_WARN, "cos-warn", "X",
            "verdict No if Cosine < X and MaxAbsErr > --abs-warn (0.99)",
            MSP_BIND(DOUBLE, &msp_ca.opts.cos_warn)),
    MSP_OPT(MSP_OPT_ABS_WARN, "abs-warn", "X", "(0.001)", MSP_BIND(DOUBLE, &msp_ca.opts.abs_warn)),
    MSP_OPT(MSP_OPT_COS_FAIL, "cos-fail", "X", "verdict No if Cosine < X (0.9)",
            MSP_BIND(DOUBLE, &msp_ca.opts.cos_fail)),
    MSP_OPT(MSP_OPT_ABS_FAIL, "abs-fail", "X", "verdict No if MaxAbsErr > X (1)",
            MSP_BIND(DOUBLE, &msp_ca.opts.abs_fail)),
    MSP_OPT(MSP_OPT_STATS_WARN, "stats-warn", "X",
            "statistics dumps: Warning if a relative difference > X (0.5)",
            MSP_BIND(DOUBLE, &msp_ca.opts.stats_warn)),
    MSP_OPT(MSP_OPT_TOP, "top", "N", "suspects listed and marked in the report (default 5)",
            MSP_BIND_INT(&msp_ca.opts.top, 1, 100000)),
    MSP_OPT(MSP_OPT_REPLAY, "replay", "MODE",
            "re-run records on the CPU to settle the culprit: auto "
            "(records whose verdict a replay can change, most suspicious first), all "
            "(every record whose outputs differ), or off (default auto)",
            MSP_BIND_ENUM(&msp_ca.opts.replay, msp_replay_words)),
    MSP_OPT(MSP_OPT_REPLAY_BUDGET, "replay-budget", "SEC",
            "wall-time budget of replay in seconds, 0 "
            "for none (default 60)"),
    MSP_OPT(MSP_OPT_PRINT_LOG, "print-log", NULL, "also print one line per compared tensor",
            MSP_BIND(TRUE, &msp_ca.print_log)),
    MSP_OPT(MSP_OPT_INPUT_JSON, "input-json", "FILE",
            "bench and compare dumps from msprobe 8.x's compare.json"),
    MSP_OPT(MSP_OPT_MODE, "mode", "MODE", "msprobe 26's -m: only \"auto\" (what compare does)"),
    MSP_OPT(MSP_OPT_MPI_TIMEOUT, "mpi-timeout", "SEC",
            "under mpirun/srun: a process silent for SEC seconds\n"
            "is named and the launch ended (default 120; 0: never)"),
    MSP_OPT('q', "quiet", NULL, "print only the root-cause line", MSP_BIND(TRUE, &msp_ca.quiet)),
    MSP_OPT('h', "help", NULL, "this help"),
    {.id = 0},
};

static const msp_cmd_doc_t msp_compare_doc = {
    .cmd = "compare",
    .usage = "Usage: msprobe [-f pytorch] compare -b BENCH -c CMP [options]",
    .about = "Compare two dumps tensor by tensor, write OUT/result.xlsx and print the\n"
             "operators that added the most error (ranked suspects; the first is the root cause).\n"
             "BENCH and CMP are two dump.h5 files, two rank directories, or two dump roots\n"
             "(step{N}/rank{R}/dump.h5, paired by step and rank).\n",
    .tail = "msprobe's own flags work too: 26's -tp/-gp/-fm/-dm/-cm/-da/-tensor_log/--xlsx/-m,\n"
            "8.x's -i compare.json/-s/-f/-c/-hl (table in msprobe-compare(1)); given\n"
            "msprobe's -tp/-gp or -i, compare writes msprobe's files and exits as\n"
            "msprobe does (--msprobe-outputs).\n"
            "\n"
            "Exit status: 0 every record passed (--msprobe-outputs: whatever the\n"
            "verdicts), 1 some record is No or Warning,\n"
            "2 usage error or bad input, 3 report written but a step could not be read\n"
            "or tensor data fails its stored CRC-32 (named on stdout), 4 under MPI a\n"
            "process sent no sign of life for --mpi-timeout seconds, 128+N stopped by\n"
            "signal N (one line on stderr says so). See msprobe-compare(1).\n",
    .opts = msp_compare_opts,
};

/* One line on stderr and exit status 2, for everything the user typed wrong. */
#define msp_compare_usage_error(...) msp_cmd_usage_error(&msp_compare_doc, __VA_ARGS__)

/* ---- progress: the total is estimated from the size of the .h5 files ---- */

static uint64_t msp_h5_bytes; /* nftw has no user pointer */

static int msp_sum_h5(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)ftw;
    size_t n = strlen(path);
    if (type == FTW_F && n >= 3 && strcmp(path + n - 3, ".h5") == 0)
        msp_h5_bytes += (uint64_t)st->st_size;
    return 0;
}

static uint64_t msp_dump_size(const char *path)
{
    msp_h5_bytes = 0;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
        return (uint64_t)st.st_size;
    nftw(path, msp_sum_h5, 16, FTW_PHYS);
    return msp_h5_bytes;
}

static void msp_compare_progress(uint64_t inc, void *ud)
{
    msp_progress_add(ud, inc);
}

/* Replay's bar starts with its first record (the compare bar is done by then). */
typedef struct {
    msp_progress_t *bar;
    size_t done;
} msp_replay_bar_t;

static void msp_replay_progress(size_t done, size_t total, void *ud)
{
    msp_replay_bar_t *rb = ud;
    if (!rb->bar)
        rb->bar = msp_progress_new(stderr, "replaying", total);
    msp_progress_add(rb->bar, done - rb->done);
    rb->done = done;
}

/* ---- output ---------------------------------------------------------- */

static void msp_human_bytes(char *buf, size_t n, double b)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024.0 && u < 4) {
        b /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, n, "%.0f B", b);
    else
        snprintf(buf, n, "%.2f %s", b, unit[u]);
}

/* fixed: "%.6f" (cosines, whose digits after the point matter), else "%.6g". */
static void msp_print_metric(const char *label, double v, int fixed)
{
    if (isnan(v))
        msp_tprintf(stdout, "%s N/A", label);
    else if (isinf(v))
        msp_tprintf(stdout, "%s %s", label, v > 0 ? "inf" : "-inf");
    else if (fixed)
        msp_tprintf(stdout, "%s %.6f", label, v);
    else
        msp_tprintf(stdout, "%s %.6g", label, v);
}

/* "first introduced error: step S rank R RECORD ROLE (cosine C, max abs err M)"
 * or "no introduced error found"; the one line quiet mode keeps. */
static void msp_print_root_cause(const msp_compare_result_t *res)
{
    if (res->root_record < 0 || (size_t)res->root_record >= res->n_records) {
        msp_tprintf(stdout, "no introduced error found\n");
        return;
    }
    const msp_record_cmp_t *rec = &res->records[res->root_record];
    /* a producer gap names the input that changed: "before RECORD ROLE" */
    int gap = res->n_suspects ? res->suspects[0].is_gap : 0;
    msp_tprintf(stdout, "first introduced error: step %lld rank %lld %s%s", (long long)rec->step,
                (long long)rec->rank, gap ? "before " : "", rec->name ? rec->name : "?");
    const msp_tensor_cmp_t *t = NULL;
    if (res->root_tensor >= 0 && (size_t)res->root_tensor < res->n_tensors)
        t = &res->tensors[res->root_tensor];
    if (t) {
        const char *tn = t->npu_name ? t->npu_name : t->bench_name;
        size_t rl = rec->name ? strlen(rec->name) : 0;
        /* The tensor name is "<record>.<role>": print the role alone. */
        const char *role = tn && rl && strncmp(tn, rec->name, rl) == 0 && tn[rl] == '.'
                               ? tn + rl + 1
                               : tn;
        if (role)
            msp_tprintf(stdout, " %s", role);
        /* a parameter that differed before any op used it: its name */
        size_t n = role ? strlen(role) : 0;
        for (const char *p = gap == 2 ? rec->params : NULL; p && *p && n;) {
            const char *nl = strchr(p, '\n');
            if (!nl)
                break;
            if (!strncmp(p, role, n) && p[n] == '=')
                msp_tprintf(stdout, ", parameter %.*s", (int)(nl - p - n - 1), p + n + 1);
            p = nl + 1;
        }
    }
    fputs(" (", stdout);
    if (res->stats_mode && t) {
        msp_print_metric("max diff", t->max_diff, 0);
        msp_print_metric(", l2norm relative diff", t->norm_rel_diff, 0);
    } else {
        msp_print_metric("cosine", t ? t->cosine : rec->worst_cosine, 1);
        msp_print_metric(", max abs err", t ? t->max_abs_err : rec->worst_max_abs, 0);
    }
    fputs(")\n", stdout);
}

/* With several ranks: "ranks: N, error first on rank R (step S RECORD); inherited
 * through communication by rank R2 from rank R via RECORD, ...; K other ranks
 * introduced error of their own", or "ranks: N, no introduced error" (then
 * the same inherited part when a rank's error, below every suspect's, came
 * in through communication). */
static void msp_print_ranks(const msp_compare_result_t *res, int quiet)
{
    if (res->n_ranks <= 1 || quiet)
        return;
    printf("ranks: %zu", res->n_ranks);
    if (res->first_rank < 0 || (size_t)res->first_rank >= res->n_ranks) {
        printf(", no introduced error");
    } else {
        const msp_rank_summary_t *f = &res->ranks[res->first_rank];
        printf(", error first on rank %lld (step %lld %s)", (long long)f->rank,
               (long long)f->at_step, f->at ? f->at : "?");
    }
    size_t shown = 0;
    for (size_t i = 0; i < res->n_ranks; i++) {
        const msp_rank_summary_t *k = &res->ranks[i];
        if (k->origin != MSP_ORIGIN_INHERITED)
            continue;
        if (shown < 8)
            printf("%s rank %lld from rank %lld via %s",
                   shown ? "," : "; inherited through communication by", (long long)k->rank,
                   (long long)k->from_rank, k->at ? k->at : "?");
        shown++;
    }
    if (shown > 8)
        printf(" and %zu more", shown - 8);
    size_t other = 0;
    for (size_t i = 0; i < res->n_ranks; i++)
        other += res->ranks[i].origin == MSP_ORIGIN_INTRODUCED && (long)i != res->first_rank;
    if (other)
        printf("; %zu other rank%s introduced error of %s own", other, other == 1 ? "" : "s",
               other == 1 ? "its" : "their");
    printf("\n");
}

/* "replay: S s, N records replayed (I introduced, H inherited), K not
 * replayable, U left by the budget; compare T s" or why it did not run. */
static void msp_print_replay(const msp_compare_result_t *res, const msp_compare_opts_t *o,
                             double total)
{
    if (o->replay == MSP_REPLAY_OFF)
        return;
    if (res->replay_unavailable) {
        msp_tprintf(stdout, "replay: not run: %s\n", res->replay_unavailable);
        return;
    }
    if (!res->replay_candidates && !res->replay_skipped)
        return;
    msp_tprintf(stdout,
                "replay: %.3f s, %zu records replayed (%zu introduced, %zu inherited), %zu not "
                "replayable, %zu left by the %g s budget; compare %.3f s\n",
                res->replay_seconds, res->replay_done, res->replay_introduced,
                res->replay_inherited, res->replay_skipped, res->replay_unfinished,
                o->replay_budget, total);
}

/* The ranked suspects, most likely first, after the root-cause line. */
static void msp_print_suspects(const msp_compare_result_t *res, int top)
{
    /* a record that only passed another rank's error on is no suspect (the
     * ranks line names it); the cross-rank pass put those last */
    size_t own = 0;
    while (own < res->n_suspects && !(res->suspect_from && res->suspect_from[own] >= 0))
        own++;
    if (!own)
        return;
    size_t n = own < (size_t)top ? own : (size_t)top;
    msp_tprintf(stdout,
                "suspects (%zu of %zu, most likely first; error = ||npu-bench||/||bench||):\n", n,
                own);
    for (size_t i = 0; i < n; i++) {
        const msp_suspect_t *s = &res->suspects[i];
        const msp_record_cmp_t *rec = &res->records[s->record];
        const msp_tensor_cmp_t *t = s->tensor >= 0 ? &res->tensors[s->tensor] : NULL;
        const char *tn = t ? (t->npu_name ? t->npu_name : t->bench_name) : NULL;
        size_t rl = strlen(rec->name);
        /* the worst output's role; a tensor of another record (a module named
         * for what its own code did to a child's input) by its full name */
        const char *role = !tn                                                ? ""
                           : strncmp(tn, rec->name, rl) == 0 && tn[rl] == '.' ? tn + rl + 1
                                                                              : tn;
        msp_tprintf(stdout,
                    "  %zu. step %lld rank %lld %s%s%s%s: input err %.3g, output err %.3g, "
                    "amplification %.3g, #%lld in execution order\n     %s\n",
                    i + 1, (long long)rec->step, (long long)rec->rank, s->is_gap ? "before " : "",
                    rec->name, role[0] ? " " : "", role, s->in_err, s->out_err, s->amplification,
                    (long long)rec->order, s->reason);
    }
}

static double msp_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int msp_check_path(const char *what, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        msp_errorf("compare: cannot open %s '%s': %s", what, path, strerror(errno));
        return MSP_EXIT_USAGE;
    }
    return MSP_EXIT_OK;
}

/* --print-log (msprobe's -tensor_log): one line per compared tensor. */
static void msp_print_tensor_log(const msp_compare_result_t *res)
{
    for (size_t i = 0; i < res->n_tensors; i++) {
        const msp_tensor_cmp_t *t = &res->tensors[i];
        printf("%s vs %s:", t->npu_name ? t->npu_name : "N/A",
               t->bench_name ? t->bench_name : "N/A");
        if (res->stats_mode)
            msp_print_metric(" max diff", t->max_diff, 0);
        else {
            msp_print_metric(" cosine", t->cosine, 1);
            msp_print_metric(", max abs err", t->max_abs_err, 0);
        }
        printf(", %s%s%s\n",
               t->verdict == MSP_VERDICT_YES       ? "Yes"
               : t->verdict == MSP_VERDICT_NO      ? "No"
               : t->verdict == MSP_VERDICT_WARNING ? "Warning"
                                                   : "N/A",
               t->err_message && *t->err_message ? ": " : "", t->err_message ? t->err_message : "");
    }
}

/* The paths of an 8.x compare.json (--input-json), freed after the run. */
static char *msp_json_bench, *msp_json_cmp;

/* compare's options into msp_ca (those msp_compare_doc binds are stored by
 * msp_opt_next itself): MSP_COMPARE_GO when the compare is to run, else the
 * exit status (--help, a usage error). */
#define MSP_COMPARE_GO (-1)
static int msp_compare_options(int argc, char **argv)
{
    int c, rc;
    while ((c = msp_opt_next(&msp_compare_doc, argc, argv)) != -1) {
        switch (c) {
        case MSP_OPT_REPLAY_BUDGET:
            if ((rc = msp_opt_double(&msp_compare_doc, "--replay-budget", optarg,
                                     &msp_ca.opts.replay_budget)))
                return rc;
            if (msp_ca.opts.replay_budget < 0)
                return msp_compare_usage_error("--replay-budget: '%s' is negative", optarg);
            break;
        case MSP_OPT_INPUT_JSON:
            free(msp_json_bench);
            free(msp_json_cmp);
            msp_json_bench = msp_json_cmp = NULL;
            if ((rc = msp_opt_file(&msp_compare_doc, "--input-json", optarg)) ||
                (rc = msp_compare_input_json(optarg, &msp_json_bench, &msp_json_cmp,
                                             &msp_ca.print_log)))
                return rc;
            msp_ca.bench = msp_ca.bench ? msp_ca.bench : msp_json_bench;
            msp_ca.cmp = msp_ca.cmp ? msp_ca.cmp : msp_json_cmp;
            break;
        case MSP_OPT_MPI_TIMEOUT:
            if ((rc = msp_opt_double(&msp_compare_doc, "--mpi-timeout", optarg,
                                     &msp_ca.mpi_timeout)))
                return rc;
            if (msp_ca.mpi_timeout < 0)
                return msp_compare_usage_error("--mpi-timeout: '%s' is negative", optarg);
            break;
        case MSP_OPT_MODE:
            if (strcmp(optarg, "auto") != 0)
                return msp_compare_usage_error("--mode: '%s' is not supported: only 'auto' (two "
                                               "PyTorch dumps)",
                                               optarg);
            break;
        case 'h':
            msp_cmd_help(&msp_compare_doc, stdout);
            return MSP_EXIT_OK;
        default:
            return MSP_EXIT_USAGE;
        }
    }
    return MSP_COMPARE_GO;
}

/* What a compare did, for a person (not under -q): its pairs, records,
 * tensors and failing records, its speed, the processes' shares and replay. */
static void msp_print_totals(msp_compare_tree_t *tree, const msp_compare_result_t *res,
                             const msp_compare_opts_t *opts, double elapsed, size_t n_records,
                             size_t n_tensors, size_t failing)
{
    char done[32], rate[32];
    msp_human_bytes(done, sizeof done, (double)res->bytes_compared);
    double t_cmp = elapsed - res->replay_seconds;
    msp_human_bytes(rate, sizeof rate, t_cmp > 0 ? (double)res->bytes_compared / t_cmp : 0.0);
    msp_tprintf(stdout, "pairs %zu, records %zu, tensors %zu, failing records %zu\n", res->n_pairs,
                n_records, n_tensors, failing);
    /* records a second too: a statistics compare reads no tensor bytes */
    msp_tprintf(stdout, "compared %s in %.3f s (%s/s, %.0f records/s)\n", done, t_cmp, rate,
                t_cmp > 0 ? (double)n_records / t_cmp : 0.0);
    const size_t *each = NULL;
    int nproc = msp_compare_tree_processes(tree, &each);
    if (nproc > 1 && each) {
        msp_tprintf(stdout, "processes: %d, pairs each:", nproc);
        for (int p = 0; p < nproc; p++)
            msp_tprintf(stdout, "%s %zu", p ? "," : "", each[p]);
        msp_tprintf(stdout, "\n");
    }
    msp_print_replay(res, opts, elapsed);
}

/* What was not compared, or not as stored (said whatever -q says). */
static void msp_print_incomplete(const msp_compare_result_t *res)
{
    for (size_t i = 0; i < res->n_unread; i++)
        msp_tprintf(stdout, "not compared: %s\n", res->unread[i]);
    if (res->n_crc_bad)
        msp_tprintf(stdout,
                    "damaged: %zu tensor%s fail%s the CRC-32 stored in its dump (named in "
                    "Err_message): the dump is damaged\n",
                    res->n_crc_bad, res->n_crc_bad == 1 ? "" : "s", res->n_crc_bad == 1 ? "s" : "");
    if (res->n_unreadable)
        msp_tprintf(stdout,
                    "not read: %zu tensor%s could not be read (named in Err_message), "
                    "first %s\n",
                    res->n_unreadable, res->n_unreadable == 1 ? "" : "s",
                    res->first_unreadable ? res->first_unreadable : "?");
    if (res->n_unread)
        msp_tprintf(stdout,
                    "incomplete: %zu step/rank file%s could not be read; the verdicts below "
                    "cover the rest only\n",
                    res->n_unread, res->n_unread == 1 ? "" : "s");
}

/* What the reports are and where they go (--msprobe-outputs, --xlsx,
 * --diff-analyze, -o): 0, or the usage error's exit status. */
static int msp_compare_outputs(msp_msprobe_reports_t *mr)
{
    if (msp_ca.xlsx && !msp_ca.msprobe)
        return msp_compare_usage_error("--xlsx chooses the kind of msprobe's files: it needs "
                                       "--msprobe-outputs (result.xlsx is always written)");
    /* msprobe's default output directory for msprobe's files */
    *mr = (msp_msprobe_reports_t){.out_dir = msp_ca.out_dir   ? msp_ca.out_dir
                                             : msp_ca.msprobe ? "./output"
                                                              : "./compare_result",
                                  .msprobe = msp_ca.msprobe,
                                  .xlsx = msp_ca.xlsx,
                                  .csv = msp_ca.csv,
                                  .diff_analyze = msp_ca.diff_analyze};
    msp_msprobe_stamp(mr);
    return MSP_EXIT_OK;
}

static int msp_compare_main(msp_cli_ctx_t *ctx, int argc, char **argv);

int msp_cmd_compare(msp_cli_ctx_t *ctx, int argc, char **argv)
{
    msp_compare_argv_t ca;
    int rc = msp_compare_argv(ctx, argc, argv, &ca);
    if (rc)
        return rc;
    rc = msp_compare_main(ctx, ca.argc, ca.argv);
    msp_compare_argv_free(&ca);
    free(msp_json_bench);
    free(msp_json_cmp);
    msp_json_bench = msp_json_cmp = NULL;
    return rc;
}

/* The reports, each part of the tree read once for the workbook (or
 * msprobe's files), result.csv and result.html (report.h), then -da's file.
 * The page and --print-log need every record at once, so past
 * MSP_WHOLE_MAX_RECORDS the page is not written (the workbook and csv hold
 * them all) and *whole stays NULL. The first failure, recorded here. */
static msp_err msp_write_reports(const msp_compare_tree_t *tree, const char *out_dir, int csv,
                                 int html, const msp_html_opts_t *hopts, int print_log,
                                 const msp_msprobe_reports_t *mr, char **said,
                                 msp_compare_result_t **whole)
{
    msp_report_set_t s = {.out_dir = out_dir,
                          .xlsx = !mr->msprobe,
                          .csv = csv,
                          .html = html,
                          .whole = print_log,
                          .whole_max = MSP_WHOLE_MAX_RECORDS,
                          .hopts = hopts};
    return msp_msprobe_reports_write(tree, mr, &s, said, whole);
}

static int msp_compare_main(msp_cli_ctx_t *ctx, int argc, char **argv)
{
    /* A pair's rows (12,500 of 568 bytes on a statistics rank) and its
     * packed bytes are allocated afresh for every pair: glibc handed such
     * blocks back to the kernel at each free and took them again page by
     * page, faulting and zeroing every page once a pair (a fifth of the
     * compare's time on a statistics tree, issue 42). Blocks are now kept
     * in the heap for the next pair; the peak is what it was. */
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    msp_ca = (msp_compare_args_t){
        .html = 1, .quiet = ctx->verbosity == 0, .mpi_timeout = MSP_MPI_TIMEOUT_DEFAULT};
    msp_compare_opts_default(&msp_ca.opts);

    int rc = msp_compare_options(argc, argv);
    if (rc != MSP_COMPARE_GO)
        return rc;
    msp_compare_opts_t opts = msp_ca.opts;
    opts.no_samples = !msp_ca.html; /* only the page's suspect cards show them */
    msp_msprobe_reports_t mr;
    if ((rc = msp_compare_outputs(&mr)))
        return rc;
    const char *bench = msp_ca.bench, *cmp = msp_ca.cmp, *out_dir = mr.out_dir;
    char *said = NULL;
    int csv = msp_ca.csv, html = msp_ca.html, quiet = msp_ca.quiet, print_log = msp_ca.print_log;
    if (optind < argc)
        return msp_compare_usage_error("unexpected argument '%s'", argv[optind]);
    if (!bench || !cmp)
        return msp_compare_usage_error("%s is required", !bench ? "-b BENCH" : "-c CMP");
    if ((rc = msp_check_path("bench dump", bench)) || (rc = msp_check_path("compare dump", cmp)))
        return rc;
    if (msp_compare_is_monitor(bench, cmp)) /* two monitor outputs: not a tensor compare */
        return msp_compare_monitor(bench, cmp, out_dir, quiet, html);
    if (opts.mapping_path &&
        ((rc = msp_check_path("mapping file", opts.mapping_path)) ||
         (rc = msp_opt_file(&msp_compare_doc, "--mapping", opts.mapping_path))))
        return rc;
    if (opts.cell_mapping_path &&
        ((rc = msp_check_path("cell mapping file", opts.cell_mapping_path)) ||
         (rc = msp_opt_file(&msp_compare_doc, "--cell-mapping", opts.cell_mapping_path))))
        return rc;

    /* A signal from here on says so and leaves no temp file (EXIT STATUS). */
    msp_cli_stop_arm("compare", out_dir);
    /* Under mpirun/srun the processes share the work; process 0 reports
     * (msprobe-compare(1), MPI). */
    const msp_compare_net_t *net = msp_cli_mpi_start(&argc, &argv, msp_ca.mpi_timeout);
    int root = !net || net->rank == 0;
    if (!root) {
        quiet = 1;
        msp_log_set_sink(NULL, NULL, MSP_LOG_ERROR); /* process 0 speaks for all */
        msp_cli_stop_stage(MSP_STOP_OTHERS_WRITE);
    }
    msp_compare_tree_t *tree = NULL;
    const msp_compare_result_t *res = NULL;
    msp_compare_result_t *whole = NULL;
    /* A bar only for a person watching: not in quiet mode, not into a pipe
     * (and then the dump trees are not even walked for their size). */
    msp_progress_t *bar = NULL;
    if (!quiet && isatty(fileno(stderr)))
        bar = msp_progress_new(stderr, "comparing", msp_dump_size(bench) + msp_dump_size(cmp));
    opts.progress = bar ? msp_compare_progress : NULL;
    opts.progress_ud = bar;
    msp_replay_bar_t rbar = {NULL, 0};
    opts.replay_progress = bar ? msp_replay_progress : NULL;
    opts.replay_progress_ud = &rbar;
    double t0 = msp_now_s();
    msp_err err = msp_compare_stream(bench, cmp, &opts, net, &tree);
    double elapsed = msp_now_s() - t0;
    msp_progress_finish(bar);
    msp_progress_finish(rbar.bar);
    if (err != MSP_OK) {
        /* a silent process is named by every process that found it */
        rc = root || msp_cli_mpi_broken() ? msp_report_error(err) : MSP_EXIT_USAGE;
        if (msp_cli_mpi_broken())
            rc = MSP_EXIT_PEER;
        goto cleanup;
    }
    if (!root) {
        rc = MSP_EXIT_OK; /* process 0's status is everyone's (msp_cli_mpi_finish) */
        goto cleanup;
    }
    res = msp_compare_tree_head(tree);
    size_t n_records = 0, n_tensors = 0, failing = 0;
    msp_compare_tree_totals(tree, &n_records, &n_tensors, &failing);
    if (n_records == 0) {
        msp_errorf("compare: nothing to compare: no %srecords in %s and %s",
                   opts.level == MSP_LEVEL_API      ? "API "
                   : opts.level == MSP_LEVEL_MODULE ? "module "
                                                    : "",
                   bench, cmp);
        rc = MSP_EXIT_USAGE;
        goto cleanup;
    }
    msp_cli_stop_stage(MSP_STOP_WRITING);
    mr.bench = bench;
    mr.cmp = cmp;
    msp_html_opts_t hopts = {.bench = bench, .cmp = cmp};
    err = msp_write_reports(tree, out_dir, csv, html, &hopts, print_log, &mr, &said, &whole);
    if (err) {
        rc = msp_report_error(err);
        goto cleanup;
    }
    if (html && !whole) {
        msp_errorf("warning: result.html not written: %zu records, over the %d a page holds "
                   "(result.xlsx and result.csv have them all)",
                   n_records, MSP_WHOLE_MAX_RECORDS);
        html = 0;
    }
    msp_cli_stop_stage(MSP_STOP_WRITTEN);

    /* failing counts the records the summary sheet shows as not Yes, so
     * stdout and the report cannot disagree. */
    if (!quiet)
        msp_print_totals(tree, res, &opts, elapsed, n_records, n_tensors, failing);
    /* What was not compared, or not as stored, is said on stdout whatever
     * -q says: it changes what the verdicts mean, and the exit status. */
    msp_print_incomplete(res);
    msp_print_root_cause(res);
    msp_print_ranks(res, quiet);
    if (!quiet) {
        if (!mr.msprobe)
            msp_tprintf(stdout, "report: %s/result.xlsx\n", out_dir);
        if (csv && !mr.msprobe)
            msp_tprintf(stdout, "report: %s/result.csv\n", out_dir);
        if (said)
            msp_tprintf(stdout, "%s", said);
        if (html)
            msp_tprintf(stdout, "report: %s/result.html\n", out_dir);
        msp_print_suspects(res, opts.top);
    }
    if (print_log && whole)
        msp_print_tensor_log(whole);
    else if (print_log)
        msp_errorf("warning: --print-log: %zu records, over the %d it prints", n_records,
                   MSP_WHOLE_MAX_RECORDS);
    /* msprobe exits 0 once its files are written, whatever they say */
    rc = res->n_unread || res->n_crc_bad || res->n_unreadable ? MSP_EXIT_INCOMPLETE
         : failing && !mr.msprobe                             ? MSP_EXIT_FAIL
                                                              : MSP_EXIT_OK;

cleanup:
    free(said);
    msp_compare_result_free(whole);
    msp_compare_tree_free(tree);
    fflush(stdout);
    return msp_cli_mpi_finish(rc);
}
