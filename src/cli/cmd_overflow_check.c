/* msprobe overflow_check: where the first NaN or Inf came from. The engine is
 * msp_overflow_check (src/precheck/pc_overflow.c); this prints the origin in
 * one line, the chain that carried it, each rank's first anomaly, and writes
 * msprobe's anomaly_analyze_{timestamp}.json.
 *
 * The stdout lines are documented in msprobe-overflow_check(1); change them
 * only together with the man page and the tests. */
#include "cli.h"

#include "msprobe/precheck.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { MSP_OPT_STEPS = 256 };

/* The options as parsed (bound in the table below). */
static struct {
    const char *in, *out_dir, *steps_text;
    int quiet;
} msp_oa;

static const msp_opt_t msp_ovf_opts[] = {
    MSP_OPT('i', "input_path", "PATH",
            "dump to scan: a dump root, a step or rank directory, or a dump\n"
            "file; ours (dump.h5) or msprobe's (dump.json)",
            MSP_BIND(STRING, &msp_oa.in)),
    MSP_OPT('o', "output_path", "DIR",
            "where anomaly_analyze_{timestamp}.json goes (default ./output)",
            MSP_BIND(STRING, &msp_oa.out_dir)),
    MSP_OPT(MSP_OPT_STEPS, "steps", "STEPS",
            "steps of a dump root to scan, \"0-9\", \"3|5\" or \"all\"\n"
            "(default all); the first step with an origin is named",
            MSP_BIND(STRING, &msp_oa.steps_text)),
    MSP_OPT('q', "quiet", NULL, "print only the origin line", MSP_BIND(TRUE, &msp_oa.quiet)),
    MSP_OPT('h', "help", NULL, "this help"),
    {.id = 0},
};

static const msp_cmd_doc_t msp_ovf_doc = {
    .cmd = "overflow_check",
    .usage = "Usage: msprobe overflow_check -i DUMP [-o OUT] [--steps STEPS]",
    .about = "Find where the first NaN or Inf came from: on each rank the first record, in\n"
             "execution order, whose inputs are finite and whose outputs are not; across\n"
             "ranks the first by the order communication imposes, with the chain of\n"
             "communication records that carried it to the other ranks.\n",
    .tail = "Exit status: 0 no NaN or Inf in the dump, 1 NaN or Inf found, 2 usage error\n"
            "or bad input. See msprobe-overflow_check(1).\n",
    .opts = msp_ovf_opts,
};

static const char *const msp_ovf_roles[] = {"made it", "sent it", "received it"};

static void msp_ovf_print(const msp_overflow_result_t *res, const char *report, int quiet)
{
    const msp_anomaly_node_t *o = &res->origin;
    if (!quiet)
        printf("scanned %zu step%s, %zu file%s, %zu records\n", res->steps_scanned,
               res->steps_scanned == 1 ? "" : "s", res->files, res->files == 1 ? "" : "s",
               res->records);
    printf("origin: step %" PRId64 " rank %" PRId64 " %s (#%" PRId64 " in execution order): %s\n",
           o->step, o->rank, o->record, o->order, o->reason);
    if (quiet)
        return;
    printf("chain:\n  rank %" PRId64 " %s  %s\n", o->rank, o->record, msp_ovf_roles[0]);
    for (size_t i = 0; i < res->n_chain; i++) {
        const msp_anomaly_node_t *c = &res->chain[i];
        printf("  rank %" PRId64 " %s  %s", c->rank, c->record, msp_ovf_roles[c->role]);
        if (c->role == MSP_ANOM_RECEIVED)
            printf(" from rank %" PRId64, c->from_rank);
        putchar('\n');
    }
    printf("first anomaly per rank:\n");
    for (size_t i = 0; i < res->n_ranks; i++) {
        const msp_anomaly_node_t *r = &res->ranks[i];
        printf("  rank %" PRId64 ": %s  %s\n", r->rank, r->record, r->reason);
    }
    printf("report: %s\n", report);
}

int msp_cmd_overflow_check(msp_cli_ctx_t *ctx, int argc, char **argv)
{
    msp_oa.in = msp_oa.steps_text = NULL;
    msp_oa.out_dir = "./output";
    msp_oa.quiet = ctx->verbosity == 0;
    int c;
    while ((c = msp_opt_next(&msp_ovf_doc, argc, argv)) != -1) {
        switch (c) {
        case 'h':
            msp_cmd_help(&msp_ovf_doc, stdout);
            return MSP_EXIT_OK;
        default:
            return MSP_EXIT_USAGE;
        }
    }
    const char *in = msp_oa.in, *out_dir = msp_oa.out_dir, *steps_text = msp_oa.steps_text;
    int quiet = msp_oa.quiet;
    if (optind < argc)
        return msp_cmd_usage_error(&msp_ovf_doc, "unexpected argument '%s'", argv[optind]);
    if (!in)
        return msp_cmd_usage_error(&msp_ovf_doc, "-i DUMP is required");
    msp_step_set_t steps;
    memset(&steps, 0, sizeof steps);
    if (steps_text && msp_step_set_parse(steps_text, &steps) != MSP_OK)
        return msp_cmd_usage_error(&msp_ovf_doc, "--steps: %s", msp_last_error());
    struct stat st;
    if (stat(in, &st) != 0) {
        msp_step_set_free(&steps);
        msp_errorf("overflow_check: cannot open '%s': %s", in, strerror(errno));
        return MSP_EXIT_USAGE;
    }
    msp_overflow_opts_t opts = {steps_text ? &steps : NULL};
    msp_overflow_result_t *res = NULL;
    char *report = NULL;
    int rc;
    msp_err err = msp_overflow_check(in, &opts, &res);
    if (err != MSP_OK) {
        rc = msp_report_error(err);
        goto done;
    }
    for (size_t i = 0; i < res->n_skipped; i++)
        msp_warnf(ctx, "skipped %s", res->skipped[i]);
    if (!res->found) {
        printf("Cannot find any anomaly node, no need to generate analyze file.\n");
        if (res->abnormal_input)
            printf("NaN/Inf present, but every record holding it had abnormal inputs already "
                   "(the data, the parameters, an earlier step or unrecorded code made it); "
                   "first: %s\n",
                   res->abnormal_input);
        rc = res->abnormal_input ? MSP_EXIT_FAIL : MSP_EXIT_OK;
        goto done;
    }
    if ((err = msp_overflow_write_json(res, out_dir, &report)) != MSP_OK) {
        rc = msp_report_error(err);
        goto done;
    }
    msp_ovf_print(res, report, quiet);
    rc = MSP_EXIT_FAIL;
done:
    free(report);
    msp_overflow_result_free(res);
    msp_step_set_free(&steps);
    fflush(stdout);
    return rc;
}
