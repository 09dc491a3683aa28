/* msprobe export: our dump in msprobe's own layout (dump.json and .pt or
 * .npy files), for msprobe's own tools: its compare, visualization, monitor. */
#include "cli.h"
#include "msprobe/format.h"

#include <getopt.h>
#include <stdio.h>

/* The options as parsed (bound in the table below). */
static struct {
    const char *out;
    int npy;
} msp_ea;

static const msp_opt_t msp_export_opts[] = {
    MSP_OPT('o', "output", "DIR", "where msprobe's layout is written (required)",
            MSP_BIND(STRING, &msp_ea.out)),
    MSP_OPT(256, "npy", NULL, "tensor files as numpy .npy instead of torch .pt",
            MSP_BIND(TRUE, &msp_ea.npy)),
    MSP_OPT('h', "help", NULL, "this help"),
    {.id = 0},
};

static const msp_cmd_doc_t msp_export_doc = {
    .cmd = "export",
    .usage = "Usage: msprobe export [-h] [--npy] -o DIR DUMP",
    .about = "Write a dump of ours (a dump.h5, a rank or step directory, or a dump root)\n"
             "in msprobe's own layout, for msprobe's own tools:\n"
             "DIR/step{N}/rank{R}/dump.json, stack.json, construct.json and\n"
             "dump_tensor_data/<record>.<input|output>.<i>.pt (torch.save's format; .npy\n"
             "with --npy). Backward records list their outputs in msprobe's autograd\n"
             "order. A statistics or md5 dump is written without tensor files.\n",
    .tail = "Exit status: 0 written, 2 usage error or unreadable dump.\n"
            "See msprobe-export(1).\n",
    .opts = msp_export_opts,
    .help_width = 12,
};

int msp_cmd_export(msp_cli_ctx_t *ctx, int argc, char **argv)
{
    msp_ea.out = NULL;
    msp_ea.npy = 0;
    int c;
    while ((c = msp_opt_next(&msp_export_doc, argc, argv)) != -1) {
        switch (c) {
        case 'h':
            msp_cmd_help(&msp_export_doc, stdout);
            return MSP_EXIT_OK;
        default:
            return MSP_EXIT_USAGE;
        }
    }
    const char *out = msp_ea.out;
    int npy = msp_ea.npy;
    if (optind != argc - 1)
        return msp_cmd_usage_error(&msp_export_doc, "expected exactly one DUMP");
    if (!out)
        return msp_cmd_usage_error(&msp_export_doc, "-o DIR is required");
    size_t n = 0;
    msp_err rc = msp_export_msprobe(argv[optind], out, npy, &n);
    if (rc)
        return msp_report_error(rc);
    if (ctx->verbosity > 0)
        printf("exported %zu dump%s to %s\n", n, n == 1 ? "" : "s", out);
    return MSP_EXIT_OK;
}
