/* The reader helper's time limits (msprobe-dump(5), "Reading untrusted
 * files"). The limit is on the helper's work: the CPU time it spends, counted
 * by the kernel in the helper itself (a CPU-time timer that raises SIGXCPU,
 * and RLIMIT_CPU a second later should the timer be missing). A loaded
 * machine slows a parse down without making it do more work, so a healthy
 * file is never refused because others ran beside it (issue 42: on two busy
 * cores a wall-clock limit called a good dump corrupt). The wall clock only
 * backs the limit up, many times longer, for a helper that is blocked rather
 * than working (a hung file system, a stopped process). Each limit reached is
 * reported as what it is, naming the file and MSPROBE_READER_TIMEOUT, never
 * as a corrupt file. */
#include "fmt_internal.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

/* The default: a short floor and one second more per
 * MSP_TIMEOUT_BYTES_PER_S of the file. A healthy file parses in milliseconds
 * of work (its metadata is a small part of it); a fixed minute would make
 * every endless parse of a small file cost that minute. */
#define MSP_TIMEOUT_FLOOR_S 10.0
#define MSP_TIMEOUT_BYTES_PER_S (16.0 * 1024 * 1024)
/* Beyond this many seconds a limit is no limit (a day of CPU time). */
#define MSP_TIMEOUT_NONE_S 86400.0
/* The wall-clock backstop: this many times the limit, and never less than
 * MSP_WALL_FLOOR_S, so that a parse starved of CPU by others on the machine
 * (a helper that gets a few per cent of a core) still finishes within it. */
#define MSP_WALL_PER_WORK 10.0
#define MSP_WALL_FLOOR_S 60.0

double msp_helper_timeout(int64_t file_size)
{
    const char *e = getenv("MSPROBE_READER_TIMEOUT");
    char *end;
    double s = e ? strtod(e, &end) : 0;
    if (!(e && end != e && s > 0)) /* NaN is not > 0 */
        s = MSP_TIMEOUT_FLOOR_S + (file_size > 0 ? (double)file_size / MSP_TIMEOUT_BYTES_PER_S : 0);
    return s > MSP_TIMEOUT_NONE_S ? INFINITY : s;
}

/* Streaming one tensor (msprobe-catalogue --read) may inflate gigabytes
 * from a small compressed file: at least MSP_READ_FLOOR_S of work, as
 * before the limit counted work. */
#define MSP_READ_FLOOR_S 120.0

double msp_helper_read_work(int64_t file_size)
{
    double w = msp_helper_timeout(file_size);
    return w > MSP_READ_FLOOR_S ? w : MSP_READ_FLOOR_S;
}

double msp_helper_wall(double work)
{
    double w = work * MSP_WALL_PER_WORK;
    return w > MSP_WALL_FLOOR_S ? w : MSP_WALL_FLOOR_S;
}

void msp_helper_limit_work(double work)
{
    /* SIGXCPU ends the helper as the kernel's own default does, whatever
     * disposition it inherited: a helper that ignored it would run on to
     * RLIMIT_CPU's hard limit and die of a SIGKILL that reads as sent from
     * outside. */
    signal(SIGXCPU, SIG_DFL);
    if (!isfinite(work)) {
        struct rlimit none = {RLIM_INFINITY, RLIM_INFINITY};
        setrlimit(RLIMIT_CPU, &none);
        return;
    }
    timer_t t;
    struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGXCPU};
    if (timer_create(CLOCK_PROCESS_CPUTIME_ID, &ev, &t) == 0) {
        double whole = floor(work);
        struct itimerspec its = {.it_value = {(time_t)whole, (long)((work - whole) * 1e9)}};
        if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
            its.it_value.tv_nsec = 1;
        timer_settime(t, 0, &its, NULL);
    }
    /* whole seconds only: the timer's second line */
    rlim_t soft = (rlim_t)ceil(work) + 1;
    struct rlimit cpu = {soft, soft + 1};
    setrlimit(RLIMIT_CPU, &cpu);
}

/* "1.5 s" or "10 s": the limit as the user wrote it, or as it was worked out. */
static void msp_seconds(char *buf, size_t size, double s)
{
    snprintf(buf, size, s > floor(s) ? "%.3g s" : "%.0f s", s);
}

msp_err msp_helper_work_error(const char *path, double work)
{
    char s[32];
    msp_seconds(s, sizeof s, work);
    const char *e = getenv("MSPROBE_READER_TIMEOUT");
    return msp_fail(MSP_ERR_LIMIT,
                    "file %s: timed out after %s of work parsing it (the reader helper's "
                    "CPU time; %s)",
                    path, s,
                    e && *e ? "the limit MSPROBE_READER_TIMEOUT sets"
                            : "the limit for a file of its size; MSPROBE_READER_TIMEOUT sets "
                              "another");
}

msp_err msp_helper_wall_error(const char *path, double work)
{
    char s[32], w[32];
    msp_seconds(s, sizeof s, work);
    msp_seconds(w, sizeof w, msp_helper_wall(work));
    return msp_fail(MSP_ERR_IO,
                    "file %s: not read: its reader helper was still at it after %s of wall-clock "
                    "time without reaching its limit of %s of work (blocked, on a hung file "
                    "system for one, or starved of CPU; MSPROBE_READER_TIMEOUT sets the limit, "
                    "the wall clock allows %.0f times it and at least %.0f s)",
                    path, w, s, MSP_WALL_PER_WORK, MSP_WALL_FLOOR_S);
}
