/* msprobe acc_check and msprobe api_precision_compare: msprobe's API
 * pre-check. acc_check replays every API record of a tensor dump on the CPU
 * in float64 (msp_acc_check) and writes accuracy_checking_result_*.csv and
 * accuracy_checking_details_*.csv; api_precision_compare judges an NPU run's
 * details against a GPU run's (msp_api_precision_compare).
 *
 * msprobe spells some options with one dash and several letters (-api_info,
 * -npu, -gpu); they are read as their long forms. The stdout lines are
 * documented in msprobe-acc_check(1). */
#include "cli.h"

#include "msprobe/precheck.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum {
    MSP_OPT_API_INFO = 256,
    MSP_OPT_PYTHON,
    MSP_OPT_REFERENCE,
    MSP_OPT_SHOW,
    MSP_OPT_NPU,
    MSP_OPT_GPU,
    MSP_OPT_BUDGET,
    MSP_OPT_CSV_PATH,
    MSP_OPT_SAVE_ERROR,
};

/* The options as parsed (bound in the tables below). */
typedef struct msp_acc_args {
    const char *dump, *api_info, *out_dir, *python, *npu, *gpu, *csv_path;
    int quiet, workers, show, budget, jit, save_error;
} msp_acc_args_t;
static msp_acc_args_t msp_aa;

static const msp_opt_t msp_acc_opts[] = {
    MSP_OPT('d', "dump", "DUMP",
            "the tensor dump to check: a dump file (dump.h5, or msprobe's\n"
            "dump.json) or its rank directory",
            MSP_BIND(STRING, &msp_aa.dump)),
    MSP_OPT(MSP_OPT_API_INFO, "api_info_file", "FILE",
            "msprobe's name for -d (also -api_info FILE); with it,\n"
            "-d N... are msprobe's device ids, ignored",
            MSP_BIND(STRING, &msp_aa.api_info)),
    MSP_OPT('o', "out_path", "DIR", "where the two CSVs go (default ./)",
            MSP_BIND(STRING, &msp_aa.out_dir)),
    MSP_OPT('n', "workers", "N", "replay workers in parallel (default: one per CPU, at most 8)",
            MSP_BIND_INT(&msp_aa.workers, 1, 64)),
    MSP_OPT(MSP_OPT_PYTHON, "python", "PATH",
            "the Python with torch that replays (default:\n"
            "$MSPROBE_PYTHON, else the build's)",
            MSP_BIND(STRING, &msp_aa.python)),
    MSP_OPT(MSP_OPT_REFERENCE, "reference", "NAME=FUNC",
            "replay Custom.NAME records (api_list callables\n"
            "outside torch) with the Python function FUNC\n"
            "(pkg.module.function); repeatable"),
    MSP_OPT(MSP_OPT_SHOW, "show", "N",
            "outputs that miss their standard listed on stdout (default 20)",
            MSP_BIND_INT(&msp_aa.show, 0, 1000000)),
    MSP_OPT(MSP_OPT_BUDGET, "budget", "SECONDS",
            "wall time for the whole check (default 600; 0: no\n"
            "limit); records not started by then are skipped",
            MSP_BIND_INT(&msp_aa.budget, 0, 10000000)),
    MSP_OPT(MSP_OPT_CSV_PATH, "result_csv_path", "CSV",
            "continue the interrupted check whose\n"
            "accuracy_checking_result_{time}.csv this is: skip its\n"
            "APIs, append to it and its details CSV (also -csv_path)",
            MSP_BIND(STRING, &msp_aa.csv_path)),
    MSP_OPT(MSP_OPT_SAVE_ERROR, "save_error_data", NULL,
            "save the inputs, outputs and float64 benchmark\n"
            "outputs of each API that misses its standard in\n"
            "./ut_error_data{time} (also -save_error_data)",
            MSP_BIND(TRUE, &msp_aa.save_error)),
    MSP_OPT('j', "jit_compile", NULL,
            "msprobe's NPU jit-compile switch: accepted, changes\n"
            "nothing (no NPU kernel runs here)",
            MSP_BIND(TRUE, &msp_aa.jit)),
    MSP_OPT('q', "quiet", NULL, "print only the summary line", MSP_BIND(TRUE, &msp_aa.quiet)),
    MSP_OPT('h', "help", NULL, "this help"),
    {.id = 0},
};

static const msp_cmd_doc_t msp_acc_doc = {
    .cmd = "acc_check",
    .usage = "Usage: msprobe acc_check -d DUMP [-o OUT] [-n WORKERS] [--reference NAME=FUNC]",
    .about =
        "msprobe's API pre-check: replay every API record of a tensor dump on the CPU\n"
        "in float64 with its recorded inputs and arguments, judge each output by\n"
        "msprobe's precision standard for its API and dtype (absolute threshold,\n"
        "benchmark comparison, binary consistency, ULP error, dual thousandths), and\n"
        "write accuracy_checking_result_{time}.csv and accuracy_checking_details_{time}.csv.\n",
    .tail = "Exit status: 0 every output meets its standard, 1 some output does not or\n"
            "no record could be checked, 2 usage error or bad input. See msprobe-acc_check(1).\n",
    .opts = msp_acc_opts,
    .help_width = 22,
};

static const msp_opt_t msp_apc_opts[] = {
    MSP_OPT(MSP_OPT_NPU, "npu_csv_path", "CSV",
            "accuracy_checking_details_*.csv of the run under\n"
            "suspicion (also -npu CSV)",
            MSP_BIND(STRING, &msp_aa.npu)),
    MSP_OPT(MSP_OPT_GPU, "gpu_csv_path", "CSV", "the same of the trusted run (also -gpu CSV)",
            MSP_BIND(STRING, &msp_aa.gpu)),
    MSP_OPT('o', "out_path", "DIR", "where the two CSVs go (default ./)",
            MSP_BIND(STRING, &msp_aa.out_dir)),
    MSP_OPT('q', "quiet", NULL, "print only the summary line", MSP_BIND(TRUE, &msp_aa.quiet)),
    MSP_OPT('h', "help", NULL, "this help"),
    {.id = 0},
};

static const msp_cmd_doc_t msp_apc_doc = {
    .cmd = "api_precision_compare",
    .usage = "Usage: msprobe api_precision_compare -npu NPU_DETAILS -gpu GPU_DETAILS [-o OUT]",
    .about =
        "Judge each API of two acc_check details CSVs by msprobe's precision standard,\n"
        "the run under suspicion (NPU) against the trusted one (GPU), and write\n"
        "api_precision_compare_result_{time}.csv and api_precision_compare_details_{time}.csv.\n",
    .tail = "Exit status: 0 every API passes, 1 some API does not, 2 usage error or bad\n"
            "input. See msprobe-acc_check(1).\n",
    .opts = msp_apc_opts,
    .help_width = 22,
};

/* msprobe's one-dash long options, as getopt_long reads them. */
static char **msp_acc_argv(int argc, char **argv)
{
    static const char *const map[][2] = {{"-api_info", "--api_info_file"},
                                         {"-npu", "--npu_csv_path"},
                                         {"-gpu", "--gpu_csv_path"},
                                         {"-csv_path", "--result_csv_path"},
                                         {"-save_error_data", "--save_error_data"}};
    char **v = calloc((size_t)argc + 1, sizeof *v);
    for (int i = 0; v && i < argc; i++) {
        v[i] = argv[i];
        for (size_t k = 0; k < sizeof map / sizeof map[0]; k++)
            if (!strcmp(argv[i], map[k][0]))
                v[i] = (char *)map[k][1];
    }
    return v;
}

/* A device id of msprobe's -d (a whole number). */
static int msp_acc_device_id(const char *s)
{
    size_t n = strspn(s, "0123456789");
    return n > 0 && n < 6 && s[n] == '\0';
}

/* msprobe's -save_error_data directory: ./ut_error_data{time} (msprobe's
 * error_data_path defaults to ./), time that of the result CSV continued
 * (-csv_path), else of now. */
static void msp_acc_error_dir(char *buf, size_t n, const char *csv)
{
    const char *base = csv ? strrchr(csv, '/') : NULL;
    base = base ? base + 1 : csv;
    if (base && strlen(base) == strlen("accuracy_checking_result_20261203120000.csv")) {
        snprintf(buf, n, "./ut_error_data%.14s", base + strlen("accuracy_checking_result_"));
        return;
    }
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d%H%M%S", &tm);
    snprintf(buf, n, "./ut_error_data%s", stamp);
}

/* The directory renamed to the result CSV's time when the CSV was stamped a
 * second later than the check began: msprobe's names share one time. */
static void msp_acc_error_dir_follow(char *dir, size_t n, const char *result_csv)
{
    char want[64];
    msp_acc_error_dir(want, sizeof want, result_csv);
    if (strcmp(want, dir) != 0 && rename(dir, want) == 0)
        snprintf(dir, n, "%s", want);
}

/* Called from the replay threads, in any order: the bar only moves forward. */
static void msp_acc_progress(size_t done, size_t total, void *ud)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static size_t shown;
    (void)total;
    pthread_mutex_lock(&mu);
    if (done > shown) {
        msp_progress_add(ud, done - shown);
        shown = done;
    }
    pthread_mutex_unlock(&mu);
}

static const char *msp_acc_status_word(msp_acc_status_t s)
{
    static const char *const w[] = {" ", "pass", "warning", "error", "SKIP"};
    return w[s];
}

/* The stdout lines of a check (msprobe-acc_check(1), OUTPUT). */
static void msp_acc_print(const msp_acc_result_t *res, const char *rpath, const char *dpath,
                          const char *errdir, size_t n_checked, int quiet, int show)
{
    printf("acc_check: %zu records of %s replayed in %.3f s by %d worker%s (%.1f records/s); "
           "%zu skipped\n",
           res->records, res->path, res->seconds, res->workers, res->workers == 1 ? "" : "s",
           res->seconds > 0 ? (double)res->records / res->seconds : 0.0, res->skipped);
    if (msp_aa.csv_path)
        printf("continued: %zu APIs of %s were checked before and left as they are\n", n_checked,
               msp_aa.csv_path);
    printf("outputs: %zu pass, %zu warning, %zu error\n", res->pass, res->warning, res->error);
    if (!quiet) {
        int listed = 0;
        for (size_t i = 0; i < res->n_outputs && listed < show; i++) {
            const msp_acc_output_t *o = &res->outputs[i];
            if (o->status != MSP_ACC_ERROR && o->status != MSP_ACC_WARNING)
                continue;
            printf("  %s %s: %s\n", msp_acc_status_word(o->status), o->name, o->message);
            listed++;
        }
        printf("result: %s\ndetails: %s\n", rpath, dpath);
        if (errdir[0])
            printf("error data: %s (%zu files)\n", res->error_files ? errdir : "none",
                   res->error_files);
    }
}

int msp_cmd_acc_check(msp_cli_ctx_t *ctx, int argc, char **argv)
{
    char **av = msp_acc_argv(argc, argv);
    const char **refs = calloc((size_t)argc + 1, sizeof *refs);
    msp_aa = (msp_acc_args_t){
        .out_dir = ".", .quiet = ctx->verbosity == 0, .show = 20, .budget = 600};
    size_t nrefs = 0;
    int rc = MSP_EXIT_OK, c;
    msp_acc_opts_t opts;
    memset(&opts, 0, sizeof opts);
    if (!av || !refs) {
        msp_errorf("acc_check: out of memory");
        free(av);
        free(refs);
        return MSP_EXIT_USAGE;
    }
    while ((c = msp_opt_next(&msp_acc_doc, argc, av)) != -1) {
        switch (c) {
        case MSP_OPT_REFERENCE:
            if (!strchr(optarg, '=') || optarg[0] == '=' || !strchr(strchr(optarg, '=') + 1, '.')) {
                rc = msp_cmd_usage_error(&msp_acc_doc,
                                         "--reference: '%s' is not NAME=pkg.module."
                                         "function",
                                         optarg);
                goto done;
            }
            refs[nrefs++] = optarg;
            break;
        case 'h':
            msp_cmd_help(&msp_acc_doc, stdout);
            goto done;
        default:
            rc = MSP_EXIT_USAGE;
            goto done;
        }
    }
    const char *dump = msp_aa.dump, *out_dir = msp_aa.out_dir;
    int quiet = msp_aa.quiet, show = msp_aa.show;
    opts.python = msp_aa.python;
    if (msp_aa.api_info) {
        /* msprobe's command line: -api_info names the dump and -d its device
         * ids (-d 0 1 ...), which a CPU replay has no use for */
        if (dump && !msp_acc_device_id(dump)) {
            rc = msp_cmd_usage_error(&msp_acc_doc,
                                     "-d '%s' and -api_info both name a dump: give one", dump);
            goto done;
        }
        while (dump && optind < argc && msp_acc_device_id(av[optind]))
            optind++;
        dump = msp_aa.api_info;
    }
    if (optind < argc) {
        rc = msp_cmd_usage_error(&msp_acc_doc, "unexpected argument '%s'", av[optind]);
        goto done;
    }
    if (!dump) {
        rc = msp_cmd_usage_error(&msp_acc_doc, "-d DUMP is required");
        goto done;
    }
    struct stat st;
    if (stat(dump, &st) != 0) {
        msp_errorf("acc_check: cannot open '%s': %s", dump, strerror(errno));
        rc = MSP_EXIT_USAGE;
        goto done;
    }
    opts.workers = msp_aa.workers;
    opts.budget = msp_aa.budget > 0 ? (double)msp_aa.budget : -1.0;
    opts.references = refs;
    opts.n_references = nrefs;
    msp_progress_t *bar = NULL;
    if (!quiet && isatty(fileno(stderr))) {
        msp_dump_file_t *f = NULL;
        if (msp_dump_open(dump, &f) == MSP_OK)
            bar = msp_progress_new(stderr, "replaying", f->n_records);
        msp_clear_error();
        msp_dump_close(f);
    }
    opts.progress = bar ? msp_acc_progress : NULL;
    opts.progress_ud = bar;
    msp_acc_result_t *res = NULL;
    char *rpath = NULL, *dpath = NULL, **checked = NULL;
    size_t n_checked = 0;
    int failed_before = 0;
    msp_err err = MSP_OK;
    if (msp_aa.csv_path) { /* msprobe's -csv_path: continue where it stopped */
        err = msp_acc_read_checked(msp_aa.csv_path, &checked, &n_checked, &failed_before);
        opts.checked = (const char *const *)checked;
        opts.n_checked = n_checked;
    }
    char errdir[64] = "";
    if (err == MSP_OK && msp_aa.save_error) {
        msp_acc_error_dir(errdir, sizeof errdir, msp_aa.csv_path);
        opts.error_data_dir = errdir;
    }
    if (err == MSP_OK)
        err = msp_acc_check(dump, &opts, &res);
    msp_progress_finish(bar);
    if (err == MSP_OK && msp_aa.csv_path) {
        err = msp_acc_append_csv(res, msp_aa.csv_path, &dpath);
        if (err == MSP_OK && !(rpath = strdup(msp_aa.csv_path)))
            err = msp_fail(MSP_ERR_NOMEM, "out of memory");
    } else if (err == MSP_OK) {
        err = msp_acc_write_csv(res, out_dir, &rpath, &dpath);
    }
    msp_free_strings(checked, n_checked);
    if (err == MSP_OK && errdir[0] && res->error_files)
        msp_acc_error_dir_follow(errdir, sizeof errdir, rpath);
    if (err != MSP_OK) {
        rc = msp_report_error(err);
        msp_acc_result_free(res);
        goto done;
    }
    msp_acc_print(res, rpath, dpath, errdir, n_checked, quiet, show);
    /* a continued check is judged whole: the rows written before count too */
    rc = res->error || res->warning || failed_before ? MSP_EXIT_FAIL : MSP_EXIT_OK;
    if (res->replayed == 0 && !(msp_aa.csv_path && res->records == 0 && n_checked)) {
        /* an empty check is no pass (a continued one may have nothing left) */
        msp_errorf("acc_check: nothing was checked: none of the %zu records of %s could be "
                   "replayed (the details CSV says why for each)",
                   res->records, res->path);
        rc = MSP_EXIT_FAIL;
    }
    free(rpath);
    free(dpath);
    msp_acc_result_free(res);
done:
    free(av);
    free(refs);
    fflush(stdout);
    return rc;
}

int msp_cmd_api_precision_compare(msp_cli_ctx_t *ctx, int argc, char **argv)
{
    char **av = msp_acc_argv(argc, argv);
    msp_aa = (msp_acc_args_t){.out_dir = ".", .quiet = ctx->verbosity == 0};
    int rc = MSP_EXIT_OK, c;
    if (!av) {
        msp_errorf("api_precision_compare: out of memory");
        return MSP_EXIT_USAGE;
    }
    while ((c = msp_opt_next(&msp_apc_doc, argc, av)) != -1) {
        switch (c) {
        case 'h':
            msp_cmd_help(&msp_apc_doc, stdout);
            goto done;
        default:
            rc = MSP_EXIT_USAGE;
            goto done;
        }
    }
    const char *npu = msp_aa.npu, *gpu = msp_aa.gpu, *out_dir = msp_aa.out_dir;
    int quiet = msp_aa.quiet;
    if (optind < argc) {
        rc = msp_cmd_usage_error(&msp_apc_doc, "unexpected argument '%s'", av[optind]);
        goto done;
    }
    if (!npu || !gpu) {
        rc = msp_cmd_usage_error(&msp_apc_doc, "%s is required", !npu ? "-npu CSV" : "-gpu CSV");
        goto done;
    }
    if ((rc = msp_opt_file(&msp_apc_doc, "--npu_csv_path", npu)) ||
        (rc = msp_opt_file(&msp_apc_doc, "--gpu_csv_path", gpu)))
        goto done;
    msp_apc_summary_t s;
    msp_err err = msp_api_precision_compare(npu, gpu, out_dir, &s);
    if (err != MSP_OK) {
        rc = msp_report_error(err);
        msp_apc_summary_free(&s);
        goto done;
    }
    printf("api_precision_compare: %zu APIs: %zu pass, %zu warning, %zu error, %zu skipped; %zu "
           "rows not in the GPU CSV\n",
           s.apis, s.pass, s.warning, s.error, s.skip, s.unmatched);
    if (!quiet)
        printf("result: %s\ndetails: %s\n", s.result_path, s.details_path);
    rc = s.error || s.warning ? MSP_EXIT_FAIL : MSP_EXIT_OK;
    msp_apc_summary_free(&s);
done:
    free(av);
    fflush(stdout);
    return rc;
}
