/* msprobe locate: from "the loss drifted somewhere" to the op, in one command
 * (msprobe-locate(1)). Both training commands run under msprobe monitor;
 * the monitor outputs give the first divergent step (cmd_compare_monitor.c's
 * rule); both commands run again dumping that step alone in tensor mode, and
 * msprobe compare names the culprit. With AnomalyNan in the monitor config,
 * the compare side's first step whose fingerprints carry a NaN is named at
 * once and msprobe overflow_check runs on that step's dump. The bench command
 * runs twice under monitor first: two runs that differ say it is not
 * reproducible (data order, dropout), and a divergence between bench and
 * compare could not be told from that.
 *
 * Every step runs as a child of this process (msprobe itself, through
 * /proc/self/exe), its output in OUT/logs/; what is printed also goes to
 * the transcript under OUT (msprobe-locate(1), FILES). The stdout lines are
 * documented in msprobe-locate(1). */
#include "cli.h"

#include "msprobe/moncmp.h"
#include "msprobe/monitor.h"
#include "msprobe/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MSP_EXIT_NOT_REPRODUCIBLE 3

enum { MSP_OPT_BENCH = 256, MSP_OPT_CMP, MSP_OPT_DUMP_MODE, MSP_OPT_NO_REPRO };

static struct msp_locate_args {
    const char *out, *bench, *cmp, *config, *dump_mode;
    int no_repro;
} msp_la;

static const msp_opt_t msp_locate_opts[] = {
    MSP_OPT('o', "output", "DIR",
            "where everything goes (default ./locate_result; must\nnot hold an earlier locate)",
            MSP_BIND(STRING, &msp_la.out)),
    MSP_OPT(MSP_OPT_BENCH, "bench", "CMD", "the trusted training command (run by /bin/sh -c)",
            MSP_BIND(STRING, &msp_la.bench)),
    MSP_OPT(MSP_OPT_CMP, "cmp", "CMD", "the training command under suspicion",
            MSP_BIND(STRING, &msp_la.cmp)),
    MSP_OPT('c', "config", "FILE",
            "msprobe's monitor config.json (default: weights,\ngradients, optimizer state and "
            "activations, every step;\nOUT/monitor.json)",
            MSP_BIND(STRING, &msp_la.config)),
    MSP_OPT(MSP_OPT_DUMP_MODE, "dump-mode", "MODE",
            "dump_mode of the divergent step's dump: api, module\nor mix (default mix)",
            MSP_BIND(STRING, &msp_la.dump_mode)),
    MSP_OPT(MSP_OPT_NO_REPRO, "no-repro-check", NULL,
            "run the bench command once, not twice (its\nreproducibility unchecked)",
            MSP_BIND(TRUE, &msp_la.no_repro)),
    MSP_OPT('h', "help", NULL, "this help"),
    {.id = 0},
};

static const msp_cmd_doc_t msp_locate_doc = {
    .cmd = "locate",
    .usage = "Usage: msprobe locate --bench CMD --cmp CMD [-c monitor.json] [-o OUT]",
    .about = "Find where two trainings part and what did it: run both under msprobe monitor,\n"
             "find the first step where their per-step statistics part beyond their own\n"
             "step-to-step noise, run both again dumping only that step (tensor mode),\n"
             "compare the dumps and print the culprit. The bench command runs twice\n"
             "first: runs that differ are said not reproducible. With AnomalyNan in the\n"
             "config, the compare side's first step holding a NaN or Inf is named at once\n"
             "and overflow_check finds its origin.\n",
    .tail = "Everything is written under OUT: monitor.json, monitor/{bench,bench_again,cmp},\n"
            "monitor_compare/result.{xlsx,html}, dump/, compare/result.{xlsx,html} (or\n"
            "overflow/), logs/ and locate.txt (what was printed).\n"
            "\n"
            "Exit status: 0 no divergent step and no NaN, 1 a divergent step (or NaN)\n"
            "located, 2 usage error, bad config, or a command that failed, 3 the bench\n"
            "command is not reproducible. See msprobe-locate(1).\n",
    .opts = msp_locate_opts,
    .help_width = 20,
};

/* What a locate shares between its stages. */
typedef struct {
    const char *out;
    char *out_abs; /* OUT made absolute (realpath's) */
    FILE *log;     /* the transcript under OUT */
    char self[PATH_MAX];
} msp_locate_t;

/* A line on stdout and in the transcript under OUT. */
static void msp_say(msp_locate_t *lc, const char *fmt, ...) MSP_PRINTF(2, 3);
static void msp_say(msp_locate_t *lc, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    msp_tprintf(stdout, "%s", buf);
    fflush(stdout);
    if (lc->log) {
        fputs(buf, lc->log);
        fflush(lc->log);
    }
}

/* Runs argv (argv[0] msprobe itself), its stdout and stderr into
 * OUT/logs/NAME.log: its exit status, or -1 when it could not start or was
 * ended by a signal (said). */
static int msp_locate_run(msp_locate_t *lc, const char *name, char **argv)
{
    char *logp = msp_asprintf("%s/logs/%s.log", lc->out, name);
    int fd = logp ? open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
    if (fd < 0) {
        msp_errorf("locate: cannot write %s: %s", logp ? logp : name, strerror(errno));
        free(logp);
        return -1;
    }
    msp_child_t c = {.argv = argv, .in = MSP_CHILD_INHERIT, .out = fd, .err = fd};
    int e = msp_child_start(&c);
    close(fd);
    int st = e ? -1 : msp_child_wait(c.pid);
    int rc = e ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (e)
        msp_errorf("locate: cannot start %s: %s", argv[0], strerror(e));
    else if (!WIFEXITED(st))
        msp_errorf("locate: %s was ended by signal %d (log %s)", name,
                   WIFSIGNALED(st) ? WTERMSIG(st) : 0, logp);
    free(logp);
    return rc;
}

/* The command under monitor into OUT/monitor/WHICH: 0, else said. */
static int msp_locate_monitor(msp_locate_t *lc, const char *which, const char *cmd, const char *cfg)
{
    char *dir = msp_asprintf("%s/monitor/%s", lc->out, which);
    char *argv[] = {lc->self, "monitor", "-c", (char *)cfg, "-o", dir,
                    "--",     "/bin/sh", "-c", (char *)cmd, NULL};
    msp_say(lc, "monitor %s: %s (log %s/logs/monitor_%s.log)\n", which, cmd, lc->out, which);
    char name[64];
    snprintf(name, sizeof name, "monitor_%s", which);
    int rc = dir ? msp_locate_run(lc, name, argv) : -1;
    if (rc != 0 && rc != -1)
        msp_errorf("locate: the %s command under monitor exited with status %d (log "
                   "%s/logs/%s.log)",
                   which, rc, lc->out, name);
    free(dir);
    return rc ? MSP_EXIT_USAGE : 0;
}

/* OUT/dump/WHICH.json, selecting step in tensor mode, and the command under
 * msprobe dump with it: 0, else said. */
static int msp_locate_dump(msp_locate_t *lc, const char *which, const char *cmd, int64_t step)
{
    char *cfg = msp_asprintf("%s/dump/%s.json", lc->out, which);
    char *dir = msp_asprintf("%s/dump/%s", lc->out, which);
    char *text = msp_asprintf("{\n  \"dump\": {\n    \"common_dump_settings\": {\n"
                              "      \"dump_mode\": \"%s\",\n      \"dump_path\": \"%s\",\n"
                              "      \"dump_iter\": \"%lld\",\n      \"task\": \"tensor\"\n"
                              "    }\n  }\n}\n",
                              msp_la.dump_mode, dir ? dir : "", (long long)step);
    int rc = MSP_EXIT_USAGE;
    if (!cfg || !dir || !text || strchr(dir, '"') || strchr(dir, '\\')) {
        msp_errorf("locate: cannot write the dump config in %s/dump (a quote or backslash "
                   "in the path?)",
                   lc->out);
        goto cleanup;
    }
    msp_err err = msp_write_file_atomic(cfg, text, strlen(text));
    if (err != MSP_OK) {
        rc = msp_report_error(err);
        goto cleanup;
    }
    msp_say(lc, "dump %s, step %lld alone: %s (config %s, log %s/logs/dump_%s.log)\n", which,
            (long long)step, cmd, cfg, lc->out, which);
    char name[64];
    snprintf(name, sizeof name, "dump_%s", which);
    char *argv[] = {lc->self, "dump", "-c", cfg, "--", "/bin/sh", "-c", (char *)cmd, NULL};
    int st = msp_locate_run(lc, name, argv);
    if (st != 0 && st != -1)
        msp_errorf("locate: the %s command under dump exited with status %d (log %s/logs/%s.log)",
                   which, st, lc->out, name);
    rc = st ? MSP_EXIT_USAGE : 0;
cleanup:
    free(cfg);
    free(dir);
    free(text);
    return rc;
}

/* Runs msprobe CMD ARGS... (a compare or an overflow_check), its lines
 * echoed indented; the one starting with key copied to *line (malloc'd,
 * NULL when none). Its exit status, or -1. */
static int msp_locate_tool(msp_locate_t *lc, const char *name, char **argv, const char *key,
                           char **line)
{
    *line = NULL;
    int st = msp_locate_run(lc, name, argv);
    char *logp = msp_asprintf("%s/logs/%s.log", lc->out, name), *text = NULL;
    size_t len = 0;
    if (logp && msp_read_file(logp, 16 << 20, &text, &len) == MSP_OK) {
        for (char *p = text, *nl; p && *p; p = nl ? nl + 1 : NULL) {
            nl = strchr(p, '\n');
            if (nl)
                *nl = 0;
            if (*p)
                msp_say(lc, "  %s\n", p);
            if (!*line && !strncmp(p, key, strlen(key)))
                *line = strdup(p);
        }
    }
    free(text);
    free(logp);
    return st;
}

/* The default monitor config, OUT/monitor.json: every kind of statistic,
 * every step, a file per 100 steps. */
static int msp_locate_default_config(msp_locate_t *lc, char **path)
{
    static const char text[] =
        "{\n  \"targets\": {},\n  \"param_distribution\": true,\n"
        "  \"wg_distribution\": true,\n  \"mv_distribution\": true,\n"
        "  \"xy_distribution\": true,\n  \"all_xy\": true,\n  \"format\": \"csv\",\n"
        "  \"ops\": [\"min\", \"max\", \"mean\", \"norm\", \"zeros\", \"nans\"],\n"
        "  \"ndigits\": 12,\n  \"step_count_per_record\": 100\n}\n";
    *path = msp_asprintf("%s/monitor.json", lc->out);
    msp_err err = *path ? msp_write_file_atomic(*path, text, sizeof text - 1)
                        : msp_fail(MSP_ERR_NOMEM, "out of memory");
    return err == MSP_OK ? 0 : msp_report_error(err);
}

/* Reads OUT/monitor/WHICH: 0, else said. */
static int msp_locate_read(msp_locate_t *lc, const char *which, msp_mon_run_t **run)
{
    char *dir = msp_asprintf("%s/monitor/%s", lc->out, which);
    msp_err err = dir ? msp_mon_read(dir, run) : msp_fail(MSP_ERR_NOMEM, "out of memory");
    free(dir);
    return err == MSP_OK ? 0 : msp_report_error(err);
}

/* The first step two runs of the bench command differ at all, and whether
 * they diverge: 0 reproducible, else said (MSP_EXIT_NOT_REPRODUCIBLE when
 * they diverge; a bit-level difference within noise is a warning). */
static int msp_locate_repro(msp_locate_t *lc, const msp_mon_run_t *a, const msp_mon_run_t *b)
{
    msp_mon_cmp_t *c = NULL;
    msp_err err = msp_mon_compare(a, b, NULL, &c);
    if (err != MSP_OK)
        return msp_report_error(err);
    const msp_mon_pair_t *first = NULL;
    size_t at = 0;
    for (size_t i = 0; i < c->n_pairs; i++)
        for (size_t k = 0; k < c->pairs[i].n; k++)
            if (c->pairs[i].diff[k] > 0 || isnan(c->pairs[i].diff[k])) {
                if (!first || c->pairs[i].steps[k] < first->steps[at])
                    first = &c->pairs[i], at = k;
                break;
            }
    int rc = 0;
    if (c->div >= 0) {
        const msp_mon_pair_t *p = &c->pairs[c->div];
        msp_say(lc,
                "not reproducible: two runs of the bench command diverge at step %lld (%s %s "
                "%s) and differ from step %lld on: unseeded data order, dropout or "
                "nondeterministic kernels; a divergence between bench and compare cannot be "
                "told from that\n",
                (long long)p->steps[c->div_at], p->b->kind, p->b->name, p->b->metric,
                (long long)first->steps[at]);
        rc = MSP_EXIT_NOT_REPRODUCIBLE;
    } else if (first)
        msp_say(lc,
                "not bit-reproducible: two runs of the bench command differ from step %lld on "
                "(%s %s %s), within their own noise; the dumps' compare carries that "
                "difference too\n",
                (long long)first->steps[at], first->b->kind, first->b->name, first->b->metric);
    else
        msp_say(lc,
                "reproducible: two runs of the bench command agree bit for bit (%zu series, "
                "%zu steps)\n",
                c->n_pairs, c->n_steps);
    msp_mon_cmp_free(c);
    return rc;
}

/* AnomalyNan: the compare side's first NaN step named, that step dumped and
 * overflow_check run on it. 1 when a NaN was found and handled (*rc set). */
static int msp_locate_nan(msp_locate_t *lc, const msp_mon_run_t *cmp, int *rc)
{
    msp_mon_nan_t n = msp_mon_first_nan(cmp);
    if (n.step < 0) {
        msp_say(lc, "AnomalyNan: no NaN or Inf in the compare side's statistics\n");
        return 0;
    }
    msp_mon_print_nan(stdout, "compare", &n);
    if (lc->log)
        msp_mon_print_nan(lc->log, "compare", &n);
    if ((*rc = msp_locate_dump(lc, "cmp", msp_la.cmp, n.step)) != 0)
        return 1;
    char *in = msp_asprintf("%s/dump/cmp", lc->out), *out = msp_asprintf("%s/overflow", lc->out);
    char step[32], *line = NULL;
    snprintf(step, sizeof step, "%lld", (long long)n.step);
    char *argv[] = {lc->self, "overflow_check", "-i", in, "-o", out, "--steps", step, NULL};
    msp_say(lc, "overflow_check on step %lld (log %s/logs/overflow_check.log):\n",
            (long long)n.step, lc->out);
    int st = in && out ? msp_locate_tool(lc, "overflow_check", argv, "origin:", &line) : -1;
    if (st == 1 && line)
        msp_say(lc, "first NaN/Inf made at: %s\n", line + strlen("origin: "));
    *rc = st == 0 || st == 1 ? MSP_EXIT_FAIL : MSP_EXIT_USAGE;
    if (*rc == MSP_EXIT_USAGE)
        msp_errorf("locate: overflow_check on step %lld's dump failed (exit status %d): see "
                   "%s/logs/overflow_check.log",
                   (long long)n.step, st, lc->out);
    if (st == 0)
        msp_say(lc, "overflow_check found no NaN or Inf in step %lld's dump\n", (long long)n.step);
    free(line);
    free(in);
    free(out);
    return 1;
}

/* The divergent step of bench and cmp dumped on both sides and compared. */
static int msp_locate_culprit(msp_locate_t *lc, int64_t step, const char *module)
{
    int rc;
    if ((rc = msp_locate_dump(lc, "bench", msp_la.bench, step)) ||
        (rc = msp_locate_dump(lc, "cmp", msp_la.cmp, step)))
        return rc;
    char *b = msp_asprintf("%s/dump/bench", lc->out), *c = msp_asprintf("%s/dump/cmp", lc->out);
    char *o = msp_asprintf("%s/compare", lc->out), *line = NULL;
    char *argv[] = {lc->self, "compare", "-b", b, "-c", c, "-o", o, NULL};
    msp_say(lc, "compare of step %lld's dumps (log %s/logs/compare.log):\n", (long long)step,
            lc->out);
    int st = b && c && o ? msp_locate_tool(lc, "compare", argv, "first introduced error:", &line)
                         : -1;
    if (st == 0 || st == 1 || st == 3) {
        if (line) {
            msp_say(lc, "culprit: %s (the monitor saw it first in module %s)\n",
                    line + strlen("first introduced error: "), module);
        } else
            msp_say(lc, "culprit: none: compare found no introduced error in step %lld\n",
                    (long long)step);
        rc = MSP_EXIT_FAIL;
    } else {
        msp_errorf("locate: the compare of step %lld's dumps failed (exit status %d): see "
                   "%s/logs/compare.log",
                   (long long)step, st, lc->out);
        rc = MSP_EXIT_USAGE;
    }
    free(line);
    free(b);
    free(c);
    free(o);
    return rc;
}

/* The options checked and OUT made: 0, or the exit status. */
static int msp_locate_setup(msp_locate_t *lc, int argc, char **argv)
{
    int c;
    while ((c = msp_opt_next(&msp_locate_doc, argc, argv)) != -1) {
        if (c == 'h') {
            msp_cmd_help(&msp_locate_doc, stdout);
            return -1;
        }
        return MSP_EXIT_USAGE;
    }
    if (optind < argc)
        return msp_cmd_usage_error(&msp_locate_doc, "unexpected argument '%s'", argv[optind]);
    if (!msp_la.bench || !msp_la.cmp)
        return msp_cmd_usage_error(&msp_locate_doc, "%s is required",
                                   !msp_la.bench ? "--bench CMD" : "--cmp CMD");
    if (strcmp(msp_la.dump_mode, "api") && strcmp(msp_la.dump_mode, "module") &&
        strcmp(msp_la.dump_mode, "mix"))
        return msp_cmd_usage_error(&msp_locate_doc, "--dump-mode: '%s' is not api, module or mix",
                                   msp_la.dump_mode);
    lc->out = msp_la.out;
    char *prev = msp_asprintf("%s/locate.txt", lc->out);
    struct stat st;
    int taken = prev && stat(prev, &st) == 0;
    free(prev);
    if (taken)
        return msp_cmd_usage_error(&msp_locate_doc,
                                   "%s holds an earlier locate (locate.txt): give another -o "
                                   "or remove it",
                                   lc->out);
    ssize_t n = readlink("/proc/self/exe", lc->self, sizeof lc->self - 1);
    if (n <= 0) {
        msp_errorf("locate: cannot find msprobe itself (/proc/self/exe): %s", strerror(errno));
        return MSP_EXIT_USAGE;
    }
    lc->self[n] = 0;
    char *logs = msp_asprintf("%s/logs", lc->out), *dump = msp_asprintf("%s/dump", lc->out);
    msp_err err = !logs || !dump ? msp_fail(MSP_ERR_NOMEM, "out of memory") : msp_mkdirs(logs);
    if (err == MSP_OK)
        err = msp_mkdirs(dump);
    free(logs);
    free(dump);
    if (err != MSP_OK)
        return msp_report_error(err);
    /* the commands may change directory: every path handed to them absolute */
    if (!(lc->out_abs = realpath(lc->out, NULL))) {
        msp_errorf("locate: %s: %s", lc->out, strerror(errno));
        return MSP_EXIT_USAGE;
    }
    lc->out = lc->out_abs;
    char *txt = msp_asprintf("%s/locate.txt", lc->out);
    lc->log = txt ? fopen(txt, "w") : NULL;
    free(txt);
    if (!lc->log) {
        msp_errorf("locate: cannot write %s/locate.txt: %s", lc->out, strerror(errno));
        return MSP_EXIT_USAGE;
    }
    return 0;
}

/* The monitor runs, the divergent step or the NaN, and what follows. */
static int msp_locate_go(msp_locate_t *lc, const char *cfg, int nan_rule)
{
    msp_mon_run_t *b = NULL, *b2 = NULL, *c = NULL;
    msp_mon_cmp_t *res = NULL;
    int rc;
    if ((rc = msp_locate_monitor(lc, "cmp", msp_la.cmp, cfg)) ||
        (rc = msp_locate_read(lc, "cmp", &c)))
        goto cleanup;
    if (nan_rule && msp_locate_nan(lc, c, &rc))
        goto cleanup;
    if ((rc = msp_locate_monitor(lc, "bench", msp_la.bench, cfg)) ||
        (rc = msp_locate_read(lc, "bench", &b)))
        goto cleanup;
    if (!msp_la.no_repro &&
        ((rc = msp_locate_monitor(lc, "bench_again", msp_la.bench, cfg)) ||
         (rc = msp_locate_read(lc, "bench_again", &b2)) || (rc = msp_locate_repro(lc, b, b2))))
        goto cleanup;
    msp_err err = msp_mon_compare(b, c, NULL, &res);
    char *mdir = msp_asprintf("%s/monitor_compare", lc->out);
    if (err == MSP_OK)
        err = mdir ? msp_mon_report_xlsx(res, b->path, c->path, mdir)
                   : msp_fail(MSP_ERR_NOMEM, "out of memory");
    if (err == MSP_OK)
        err = msp_mon_report_html(res, b->path, c->path, mdir);
    free(mdir);
    if (err != MSP_OK) {
        rc = msp_report_error(err);
        goto cleanup;
    }
    msp_mon_print_verdict(stdout, res);
    msp_mon_print_verdict(lc->log, res);
    msp_say(lc, "report: %s/monitor_compare/result.html\n", lc->out);
    if (res->div < 0) {
        if (res->start >= 0)
            msp_say(lc,
                    "the runs differ from their first step (step %lld) on: the monitor does not "
                    "judge that difference; dump that step of both (dump_iter \"%lld\") and "
                    "compare the dumps to judge it op by op\n",
                    (long long)res->pairs[res->start].steps[0],
                    (long long)res->pairs[res->start].steps[0]);
        rc = MSP_EXIT_OK;
        goto cleanup;
    }
    const msp_mon_pair_t *p = &res->pairs[res->div];
    rc = msp_locate_culprit(lc, p->steps[res->div_at], p->b->module);
    if (rc == MSP_EXIT_FAIL)
        msp_say(lc, "report: %s/compare/result.html\n", lc->out);
cleanup:
    msp_mon_cmp_free(res);
    msp_mon_run_free(b);
    msp_mon_run_free(b2);
    msp_mon_run_free(c);
    return rc;
}

int msp_cmd_locate(msp_cli_ctx_t *ctx, int argc, char **argv)
{
    (void)ctx;
    msp_la = (struct msp_locate_args){.out = "./locate_result", .dump_mode = "mix"};
    msp_locate_t lc = {0};
    int rc = msp_locate_setup(&lc, argc, argv);
    char *cfg = NULL;
    if (rc)
        goto cleanup;
    msp_mon_config_t mc = {0};
    if (msp_la.config)
        cfg = realpath(msp_la.config, NULL);
    else if ((rc = msp_locate_default_config(&lc, &cfg)))
        goto cleanup;
    if (!cfg || msp_mon_config_load(cfg, &mc) != MSP_OK) {
        if (cfg)
            msp_errorf("locate: %s", msp_last_error());
        else
            msp_errorf("locate: -c %s: %s", msp_la.config, strerror(errno));
        msp_mon_config_free(&mc);
        rc = MSP_EXIT_USAGE;
        goto cleanup;
    }
    int nan_rule = 0;
    for (size_t i = 0; i < mc.n_rules; i++)
        nan_rule |= mc.rules[i].kind == MSP_MON_NAN;
    msp_mon_config_free(&mc);
    rc = msp_locate_go(&lc, cfg, nan_rule);
cleanup:
    free(cfg);
    free(lc.out_abs);
    if (lc.log)
        fclose(lc.log);
    return rc < 0 ? MSP_EXIT_OK : rc;
}
