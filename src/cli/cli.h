/* Shared by the msprobe front end's subcommands. The CLI owns stdout/stderr:
 * help goes to stdout, errors to stderr as "msprobe: ...". Exit codes:
 *   0  success (compare/config_check: everything passed)
 *   1  compare or config_check found a failing record or item
 *   2  usage error, or bad input (missing path, malformed file, bad config)
 */
#ifndef MSPROBE_CLI_H
#define MSPROBE_CLI_H

#include "msprobe/common.h"

#define MSP_EXIT_OK 0
#define MSP_EXIT_FAIL 1
#define MSP_EXIT_USAGE 2

typedef struct msp_cli_ctx {
    const char *framework; /* from -f; "pytorch" */
    int verbosity;         /* 0 quiet, 1 normal, 2 verbose (-v), 3 debug (-vv) */
} msp_cli_ctx_t;

typedef int (*msp_cmd_fn)(msp_cli_ctx_t *ctx, int argc, char **argv);

int msp_cmd_compare(msp_cli_ctx_t *ctx, int argc, char **argv);
int msp_cmd_ls(msp_cli_ctx_t *ctx, int argc, char **argv);
int msp_cmd_dump(msp_cli_ctx_t *ctx, int argc, char **argv);
int msp_cmd_config_check(msp_cli_ctx_t *ctx, int argc, char **argv);

/* "msprobe: <formatted>\n" on stderr. */
void msp_errorf(const char *fmt, ...) MSP_PRINTF(1, 2);
/* "msprobe: warning: <formatted>\n" on stderr unless quiet. */
void msp_warnf(const msp_cli_ctx_t *ctx, const char *fmt, ...) MSP_PRINTF(2, 3);
/* Print msp_last_error() (or msp_strerror(rc)) as an error; returns MSP_EXIT_USAGE. */
int msp_report_error(msp_err rc);
/* Install a log sink honouring ctx->verbosity. */
void msp_cli_install_log(const msp_cli_ctx_t *ctx);

#endif
