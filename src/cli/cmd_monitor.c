/* msprobe monitor -c monitor.json -- cmd: msprobe's TrainerMon with no code
 * change, the way `msprobe dump` runs (cmd_dump.c): check the config before
 * any training time is spent, set MSPROBE_MONITOR_CONFIG, append the shim to
 * LD_PRELOAD and exec the command in place, so its exit status, signals and
 * pid are the command's own. */
#include "cli.h"

#include "msprobe/monitor.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MSP_EXIT_NOEXEC 126
#define MSP_EXIT_NOTFOUND 127

static struct {
    const char *config, *output;
} msp_ma;

static const msp_opt_t msp_monitor_opts[] = {
    MSP_OPT('c', "config", "FILE",
            "msprobe's monitor config.json (required; default:\n$MSPROBE_MONITOR_CONFIG)",
            MSP_BIND(STRING, &msp_ma.config)),
    MSP_OPT('o', "output", "DIR",
            "where the output goes (sets MONITOR_OUTPUT_DIR;\ndefault: $MONITOR_OUTPUT_DIR, "
            "else ./monitor_output)",
            MSP_BIND(STRING, &msp_ma.output)),
    MSP_OPT('h', "help", NULL, "this help"),
    {.id = 0},
};

static const msp_cmd_doc_t msp_monitor_doc = {
    .cmd = "monitor",
    .usage = "Usage: msprobe monitor -c monitor.json [-o DIR] [--] COMMAND [ARGS...]",
    .about = "Run COMMAND (e.g. python train.py) with the msprobe shim preloaded in monitor\n"
             "mode: each optimizer step, the statistics msprobe's monitor config asks for\n"
             "(weights, gradients, AdamW's exp_avg and exp_avg_sq, module activations)\n"
             "are written as msprobe's monitor writes them: CSV files under\n"
             "MONITOR_OUTPUT_DIR/<time>-rank<R>-<id>/, and alerts to anomaly_detected/.\n"
             "The training script needs no TrainerMon code. The config is checked before\n"
             "COMMAND starts.\n",
    .tail = "Environment: MSPROBE_MONITOR_CONFIG (the config, also how the shim alone is\n"
            "put in monitor mode: LD_PRELOAD=libmsprobe_preload.so\n"
            "MSPROBE_MONITOR_CONFIG=monitor.json python train.py), MONITOR_OUTPUT_DIR,\n"
            "MSPROBE_PRELOAD_LIB, MSPROBE_LOG_FILE (where the shim's messages go).\n"
            "\n"
            "Exit status: COMMAND's own (msprobe replaces itself with it); 2 when the\n"
            "config is invalid or the shim cannot be found (COMMAND does not run);\n"
            "126 when COMMAND cannot be executed; 127 when it is not found.\n"
            "See msprobe-monitor(1).\n",
    .opts = msp_monitor_opts,
    .help_width = 17,
    .stop_at_operand = 1,
};

/* The config checked; its absolute path in *abs. */
static int msp_monitor_check(const msp_cli_ctx_t *ctx, const char *path, char **abs)
{
    msp_mon_config_t cfg;
    msp_err rc = msp_mon_config_load(path, &cfg);
    if (rc != MSP_OK) {
        msp_errorf("monitor: %s", msp_last_error());
        msp_mon_config_free(&cfg);
        return MSP_EXIT_USAGE;
    }
    /* The keys it ignores are named by the shim, once, as msprobe dump's are. */
    if (!cfg.wg && !cfg.param && !cfg.mv && !cfg.xy)
        msp_warnf(ctx,
                  "monitor: %s: none of wg_distribution, param_distribution, mv_distribution, "
                  "xy_distribution is true: nothing is monitored",
                  path);
    msp_mon_config_free(&cfg);
    *abs = realpath(path, NULL);
    if (!*abs) {
        msp_errorf("monitor: %s: %s", path, strerror(errno));
        return MSP_EXIT_USAGE;
    }
    return MSP_EXIT_OK;
}

int msp_cmd_monitor(msp_cli_ctx_t *ctx, int argc, char **argv)
{
    msp_ma.config = msp_ma.output = NULL;
    char *abscfg = NULL, *lib = NULL, *preload = NULL;
    int ex = MSP_EXIT_USAGE, c;
    while ((c = msp_opt_next(&msp_monitor_doc, argc, argv)) != -1) {
        switch (c) {
        case 'h':
            msp_cmd_help(&msp_monitor_doc, stdout);
            return MSP_EXIT_OK;
        default:
            return MSP_EXIT_USAGE;
        }
    }
    const char *cfgpath = msp_ma.config;
    const char *env = getenv("MSPROBE_MONITOR_CONFIG");
    if (!cfgpath && env && *env)
        cfgpath = env;
    if (!cfgpath)
        return msp_cmd_usage_error(&msp_monitor_doc, "no config: give msprobe's monitor "
                                                     "config.json with -c FILE");
    if (optind >= argc) {
        msp_errorf("monitor: no command to run (e.g. msprobe monitor -c monitor.json -- python "
                   "train.py)");
        return MSP_EXIT_USAGE;
    }
    char **cmd = argv + optind;
    if (msp_opt_file(&msp_monitor_doc, msp_ma.config ? "-c" : "MSPROBE_MONITOR_CONFIG", cfgpath))
        return MSP_EXIT_USAGE;
    if ((ex = msp_monitor_check(ctx, cfgpath, &abscfg)) != MSP_EXIT_OK)
        goto cleanup;
    ex = MSP_EXIT_USAGE;
    if (!(lib = msp_cli_find_preload("monitor")))
        goto cleanup;
    if (msp_ma.output) {
        msp_err rc = msp_mkdirs(msp_ma.output);
        if (rc != MSP_OK || access(msp_ma.output, W_OK | X_OK) != 0) {
            msp_errorf("monitor: -o %s: cannot write there: %s", msp_ma.output,
                       rc != MSP_OK ? msp_last_error() : strerror(errno));
            goto cleanup;
        }
    }
    if (!(preload = msp_cli_ld_preload(getenv("LD_PRELOAD"), lib))) {
        msp_errorf("monitor: out of memory");
        goto cleanup;
    }
    if (setenv("MSPROBE_MONITOR_CONFIG", abscfg, 1) != 0 || setenv("LD_PRELOAD", preload, 1) ||
        (msp_ma.output && setenv("MONITOR_OUTPUT_DIR", msp_ma.output, 1) != 0)) {
        msp_errorf("monitor: cannot set the environment: %s", strerror(errno));
        goto cleanup;
    }
    msp_log(MSP_LOG_INFO, "monitor: MSPROBE_MONITOR_CONFIG=%s LD_PRELOAD=%s", abscfg, preload);
    fflush(NULL);
    execvp(cmd[0], cmd);
    int err = errno;
    ex = (err == ENOENT || err == ENOTDIR) ? MSP_EXIT_NOTFOUND : MSP_EXIT_NOEXEC;
    if (err == ENOENT && !strchr(cmd[0], '/'))
        msp_errorf("monitor: %s: command not found (not in PATH)", cmd[0]);
    else
        msp_errorf("monitor: cannot run %s: %s", cmd[0], strerror(err));
cleanup:
    free(abscfg);
    free(lib);
    free(preload);
    return ex;
}
