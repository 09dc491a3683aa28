/* msprobe dump: being written in this session; owned by its module's author. */
#include "cli.h"

int msp_cmd_dump(msp_cli_ctx_t *ctx, int argc, char **argv)
{
    (void)ctx;
    (void)argc;
    (void)argv;
    msp_errorf("dump: not built yet");
    return MSP_EXIT_USAGE;
}
