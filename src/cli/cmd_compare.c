/* msprobe compare: being written in this session; owned by its module's author. */
#include "cli.h"

int msp_cmd_compare(msp_cli_ctx_t *ctx, int argc, char **argv)
{
    (void)ctx;
    (void)argc;
    (void)argv;
    msp_errorf("compare: not built yet");
    return MSP_EXIT_USAGE;
}
