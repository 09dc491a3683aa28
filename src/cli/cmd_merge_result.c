/* msprobe merge_result: msprobe's command of that name. The chosen APIs'
 * compare metrics of every rank side by side, one sheet per metric
 * (msprobe-merge_result(1)). */
#include "cli.h"

#include "msprobe/merge.h"

#include <getopt.h> /* optind */
#include <stdio.h>
#include <string.h>

enum { MSP_OPT_CONFIG_PATH = 256 };

/* The options as parsed (bound in the table below). */
static struct {
    const char *in, *out, *config;
} msp_ma;

static const msp_opt_t msp_merge_opts[] = {
    MSP_OPT('i', "input_dir", "DIR",
            "directory of compare results: msprobe's per-rank\n"
            "workbooks, or what msprobe compare wrote",
            MSP_BIND(STRING, &msp_ma.in)),
    MSP_OPT('o', "output_dir", "DIR", "where multi_ranks_compare_merge.xlsx goes",
            MSP_BIND(STRING, &msp_ma.out)),
    MSP_OPT(MSP_OPT_CONFIG_PATH, "config-path", "FILE",
            "YAML naming the APIs (api) and the\n"
            "metrics (compare_index) to merge; -config FILE\nas msprobe spells it works too",
            MSP_BIND(STRING, &msp_ma.config)),
    MSP_OPT('h', "help", NULL, "this help"),
    {.id = 0},
};

static const msp_cmd_doc_t msp_merge_doc = {
    .cmd = "merge_result",
    .usage = "Usage: msprobe [-f pytorch] merge_result -i DIR -o DIR -config FILE",
    .about = "Put the compare metrics of chosen APIs side by side over the ranks: for\n"
             "every tensor row whose NPU Name contains one of the config's APIs, one\n"
             "column per rank, one sheet per compare index, in\n"
             "OUT/multi_ranks_compare_merge.xlsx.\n",
    .tail = "Exit status: 0 merged, 2 usage error or unreadable input. See\n"
            "msprobe-merge_result(1).\n",
    .opts = msp_merge_opts,
    .help_width = 22,
};

int msp_cmd_merge_result(msp_cli_ctx_t *ctx, int argc, char **argv)
{
    msp_ma.in = msp_ma.out = msp_ma.config = NULL;
    /* msprobe spells the config option "-config": take it as --config-path */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            break;
        if (!strcmp(argv[i], "-config"))
            argv[i] = (char *)"--config-path";
    }
    int c;
    while ((c = msp_opt_next(&msp_merge_doc, argc, argv)) != -1) {
        switch (c) {
        case 'h':
            msp_cmd_help(&msp_merge_doc, stdout);
            return MSP_EXIT_OK;
        default:
            return MSP_EXIT_USAGE;
        }
    }
    const char *in = msp_ma.in, *out = msp_ma.out, *config = msp_ma.config;
    if (optind < argc)
        return msp_cmd_usage_error(&msp_merge_doc, "unexpected argument '%s'", argv[optind]);
    if (!in || !out || !config)
        return msp_cmd_usage_error(&msp_merge_doc, "%s is required",
                                   !in    ? "-i DIR"
                                   : !out ? "-o DIR"
                                          : "-config FILE");
    if (msp_opt_file(&msp_merge_doc, "--config-path", config))
        return MSP_EXIT_USAGE;
    msp_merge_info_t info;
    msp_err rc = msp_merge_result(in, out, config, &info);
    if (rc)
        return msp_report_error(rc);
    if (ctx->verbosity > 0)
        printf("merged %zu rank%s from %zu file%s: %zu rows, %zu sheets\nreport: %s/%s\n",
               info.ranks, info.ranks == 1 ? "" : "s", info.files, info.files == 1 ? "" : "s",
               info.rows, info.sheets, out, "multi_ranks_compare_merge.xlsx");
    return MSP_EXIT_OK;
}
