/* msprobe front end: global options, then a table of subcommands, each of
 * which parses its own getopt_long table (git's commands[] shape). */
#include "cli.h"
#include "msprobe/proc.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct msp_command {
    const char *name;
    msp_cmd_fn fn;
    const char *help;
};

static const struct msp_command msp_commands[] = {
    {"dump", msp_cmd_dump, "run a training command with the dump shim preloaded"},
    {"monitor", msp_cmd_monitor,
     "run a training command writing msprobe's per-step monitor CSVs (no code change)"},
    {"compare", msp_cmd_compare,
     "compare two dumps into result.xlsx; print the first op that introduced an error"},
    {"locate", msp_cmd_locate,
     "monitor two trainings, find their first divergent step, dump and compare it"},
    {"config_check", msp_cmd_config_check,
     "pack a run's configuration (-d) or compare two packs (-c)"},
    {"ls", msp_cmd_ls, "list the records and tensors of a dump"},
    {"export", msp_cmd_export, "write a dump in msprobe's own layout (dump.json, .pt)"},
    {"overflow_check", msp_cmd_overflow_check,
     "find where the first NaN or Inf came from, on which rank"},
    {"acc_check", msp_cmd_acc_check,
     "replay every API of a tensor dump in float64 and judge it by msprobe's standards"},
    {"run_ut", msp_cmd_acc_check, "msprobe 8.x's name for acc_check"},
    {"multi_run_ut", msp_cmd_acc_check,
     "msprobe 8.x's name for acc_check in parallel (-n: workers)"},
    {"api_precision_compare", msp_cmd_api_precision_compare,
     "judge an NPU run's acc_check against a GPU run's"},
    {"merge_result", msp_cmd_merge_result,
     "put chosen APIs' compare metrics of every rank side by side"},
};

static const msp_opt_t msp_global_opts[] = {
    MSP_OPT('f', "framework", "NAME", "framework of the dumps; only \"pytorch\" (default)"),
    MSP_OPT('v', "verbose", NULL, "more messages (repeat for debug)"),
    MSP_OPT('q', "quiet", NULL, "errors only"),
    MSP_OPT('h', "help", NULL, "this help; \"msprobe <command> --help\" for a command"),
    MSP_OPT('V', "version", NULL, "print the version"),
    {.id = 0},
};

static const msp_cmd_doc_t msp_global_doc = {
    .cmd = NULL,
    .usage = "Usage: msprobe [-f pytorch] [-v|-q] <command> [options]\n"
             "       msprobe --help | --version",
    .about = "A numerical-precision debugger for PyTorch training: dump what two runs\n"
             "computed, check they were configured alike, and find the first operator\n"
             "that went wrong.\n",
    .tail = "Exit status: 0 success or all passed, 1 some record or item failed,\n"
            "2 usage error or bad input. See msprobe(1).\n",
    .opts = msp_global_opts,
    .stop_at_operand = 1, /* the command owns the rest */
};

static void msp_usage(FILE *out)
{
    /* The commands table sits between the description and the options. */
    msp_cmd_doc_t d = msp_global_doc;
    fprintf(out, "%s\n\n%s\nCommands:\n", d.usage, d.about);
    int width = 13;
    for (size_t i = 0; i < sizeof msp_commands / sizeof msp_commands[0]; i++)
        if ((int)strlen(msp_commands[i].name) > width)
            width = (int)strlen(msp_commands[i].name);
    for (size_t i = 0; i < sizeof msp_commands / sizeof msp_commands[0]; i++)
        fprintf(out, "  %-*s %s\n", width, msp_commands[i].name, msp_commands[i].help);
    d.usage = d.about = NULL;
    d.options_title = "Global options";
    msp_cmd_help(&d, out);
}

static void msp_cli_log_sink(msp_log_level_t level, const char *msg, void *ud)
{
    (void)ud;
    msp_tprintf(stderr, "msprobe: %s%s\n", msp_log_prefix(level), msg);
}

void msp_cli_install_log(const msp_cli_ctx_t *ctx)
{
    msp_log_level_t max = MSP_LOG_WARN;
    if (ctx->verbosity == 0)
        max = MSP_LOG_ERROR;
    else if (ctx->verbosity == 2)
        max = MSP_LOG_INFO;
    else if (ctx->verbosity >= 3)
        max = MSP_LOG_DEBUG;
    msp_log_set_sink(msp_cli_log_sink, NULL, max);
}

int main(int argc, char **argv)
{
    msp_omp_passive_restart(argv);
    msp_cli_ctx_t ctx = {.framework = "pytorch", .verbosity = 1};
    int c;
    while ((c = msp_opt_next(&msp_global_doc, argc, argv)) != -1) {
        switch (c) {
        case 'f':
            ctx.framework = optarg;
            break;
        case 'v':
            ctx.verbosity = ctx.verbosity < 1 ? 2 : ctx.verbosity + 1;
            break;
        case 'q':
            ctx.verbosity = 0;
            break;
        case 'h':
            msp_usage(stdout);
            return MSP_EXIT_OK;
        case 'V':
            printf("msprobe %s\n", MSP_VERSION);
            return MSP_EXIT_OK;
        default:
            return MSP_EXIT_USAGE;
        }
    }
    if (strcmp(ctx.framework, "pytorch") != 0) {
        msp_errorf("unsupported framework '%s': only 'pytorch' is supported", ctx.framework);
        return MSP_EXIT_USAGE;
    }
    if (optind >= argc)
        return msp_cmd_usage_error(&msp_global_doc, "no command given");
    const char *name = argv[optind];
    for (size_t i = 0; i < sizeof msp_commands / sizeof msp_commands[0]; i++) {
        if (strcmp(name, msp_commands[i].name) == 0) {
            msp_cli_install_log(&ctx);
            /* The subcommand sees argv[0] = its name, getopt state reset. */
            int sub_argc = argc - optind;
            char **sub_argv = argv + optind;
            optind = 0;
            return msp_commands[i].fn(&ctx, sub_argc, sub_argv);
        }
    }
    msp_errorf("unknown command '%s' (try 'msprobe --help')", name);
    return MSP_EXIT_USAGE;
}
