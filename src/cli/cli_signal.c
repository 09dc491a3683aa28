/* A long command stopped by SIGTERM, SIGINT or SIGHUP (msprobe-compare(1),
 * EXIT STATUS): one line on stderr saying which signal and what became of
 * the report, the temp files of reports being written removed, then the
 * process ends by that very signal, so its status is 128+N to a shell and
 * "killed by signal N" to a parent that asks (a shell loop stops on Ctrl-C;
 * mpirun names the signal). Without this the default action left no line,
 * and under mpirun a stopped compare looked like one that found a failing
 * record.
 *
 * The handler runs at any instruction of any thread, inside malloc or an MPI
 * call: it only formats into a local buffer and calls write, unlink, signal,
 * raise (async-signal-safe). What it says is set beforehand in plain ints and
 * pointers to strings that live as long as the process. */
#include "cli.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

static const char *volatile msp_stop_cmd = "msprobe";
static const char *volatile msp_stop_out; /* the report directory, or NULL */
static volatile sig_atomic_t msp_stop_stage = MSP_STOP_NO_REPORT;
static volatile sig_atomic_t msp_stop_rank = -1, msp_stop_size = 0;
/* under MPI: process msp_stop_silent sent no sign of life for
 * msp_stop_silent_s seconds, as process msp_stop_seen_by found (-1: none) */
static volatile sig_atomic_t msp_stop_silent = -1, msp_stop_seen_by = -1, msp_stop_silent_s = 0;

typedef struct {
    char *p, *end;
} msp_line_t;

static void msp_put(msp_line_t *l, const char *s)
{
    while (s && *s && l->p < l->end)
        *l->p++ = *s++;
}

static void msp_put_int(msp_line_t *l, long v)
{
    char digits[24];
    int n = 0;
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    do
        digits[n++] = (char)('0' + u % 10);
    while ((u /= 10) && n < (int)sizeof digits);
    if (v < 0 && l->p < l->end)
        *l->p++ = '-';
    while (n && l->p < l->end)
        *l->p++ = digits[--n];
}

static const char *msp_sig_name(int sig)
{
    return sig == SIGTERM  ? "SIGTERM"
           : sig == SIGINT ? "SIGINT"
           : sig == SIGHUP ? "SIGHUP"
                           : "a signal";
}

static void msp_stop_handler(int sig)
{
    msp_atomic_unlink_pending();
    char buf[1024];
    msp_line_t l = {buf, buf + sizeof buf - 1};
    msp_put(&l, "msprobe: ");
    msp_put(&l, msp_stop_cmd);
    msp_put(&l, ": stopped by ");
    msp_put(&l, msp_sig_name(sig));
    msp_put(&l, " (signal ");
    msp_put_int(&l, sig);
    msp_put(&l, ")");
    if (msp_stop_size > 1) {
        msp_put(&l, " on process ");
        msp_put_int(&l, msp_stop_rank);
        msp_put(&l, " of ");
        msp_put_int(&l, msp_stop_size);
    }
    if (msp_stop_silent >= 0) {
        msp_put(&l, ", after process ");
        msp_put_int(&l, msp_stop_seen_by);
        msp_put(&l, " found process ");
        msp_put_int(&l, msp_stop_silent);
        msp_put(&l, " silent for ");
        msp_put_int(&l, msp_stop_silent_s);
        msp_put(&l, " s");
    }
    switch (msp_stop_stage) {
    case MSP_STOP_WRITING:
        msp_put(&l, ": the report in ");
        msp_put(&l, msp_stop_out);
        msp_put(&l, " is incomplete (the file being written was removed)");
        break;
    case MSP_STOP_WRITTEN:
        msp_put(&l, ": the report in ");
        msp_put(&l, msp_stop_out);
        msp_put(&l, " was written");
        break;
    case MSP_STOP_OTHERS_WRITE:
        msp_put(&l, ": no report written (process 0 writes it)");
        break;
    default:
        msp_put(&l, ": no report written");
        break;
    }
    *l.p++ = '\n';
    for (const char *p = buf; p < l.p;) {
        ssize_t w = write(STDERR_FILENO, p, (size_t)(l.p - p));
        if (w <= 0)
            break;
        p += w;
    }
    /* End by the signal itself: blocked while this handler runs, it is
     * delivered, with its default action, as the handler returns. */
    signal(sig, SIG_DFL);
    raise(sig);
}

void msp_cli_stop_arm(const char *cmd, const char *out_dir)
{
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    msp_stop_cmd = cmd;
    msp_stop_out = out_dir;
    msp_stop_stage = MSP_STOP_NO_REPORT;
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        /* what the caller ignores stays ignored: SIGHUP under nohup, SIGINT in
         * a background job of a shell without job control */
        if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN)
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = msp_stop_handler;
        sigfillset(&sa.sa_mask); /* one signal's line at a time */
        sigaction(sigs[i], &sa, NULL);
    }
}

void msp_cli_stop_stage(int stage)
{
    msp_stop_stage = stage;
}

void msp_cli_stop_where(int rank, int size)
{
    msp_stop_rank = rank;
    msp_stop_size = size;
}

void msp_cli_stop_peer_silent(int silent, int seen_by, int seconds)
{
    msp_stop_seen_by = seen_by;
    msp_stop_silent_s = seconds;
    msp_stop_silent = silent;
}
