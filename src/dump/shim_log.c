/* The shim's only voice: "msprobe:" lines on stderr, or appended to
 * MSPROBE_LOG_FILE. One write(2) per line, so lines from the writer thread
 * and the training thread never interleave mid-line. No Python here: the
 * writer (dump_writer.c) sits above this file and below everything that
 * includes Python (py_log.c turns Python errors into these lines). */
#include "shim_log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_fd = STDERR_FILENO;
static pthread_mutex_t g_warn_mu = PTHREAD_MUTEX_INITIALIZER;
#define MSP_MAX_KINDS 64
/* Each kind of warning prints once; how often it fired is said at exit, so a
 * loss repeated every step does not look like one event. */
static struct {
    char kind[48];
    char first[512];
    uint64_t count;
} g_kinds[MSP_MAX_KINDS];
static int g_nkinds;
/* The library's own messages (msp_log: config_check's collectors, the pack
 * writer) become the shim's lines; any thread. */
static void lib_sink(msp_log_level_t level, const char *msg, void *ud)
{
    (void)ud;
    msp_shim_msg("%s%s", msp_log_prefix(level), msg);
}

void msp_shim_log_init(void)
{
    const char *f = getenv("MSPROBE_LOG_FILE");
    if (f && *f) {
        int fd = open(f, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0)
            g_fd = fd;
    }
    /* MSPROBE_VERBOSE as msprobe's -q/-v set it: 0 errors, 1 warnings (the
     * default), 2 information, 3 debug. */
    const char *v = getenv("MSPROBE_VERBOSE");
    int level = v && *v >= '0' && *v <= '3' && !v[1] ? *v - '0' : 1;
    msp_log_set_sink(lib_sink, NULL, (msp_log_level_t)level);
}

MSP_PRINTF(2, 0) static void vmsg(const char *prefix, const char *fmt, va_list ap)
{
    char line[2048];
    int n = snprintf(line, sizeof line, "msprobe: %s", prefix);
    if (n < 0)
        return;
    int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    if (m < 0)
        return;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    /* One message, one line: fold the newlines some libraries put in errors. */
    for (size_t i = 0; i < len; i++)
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    line[len++] = '\n';
    ssize_t w = write(g_fd, line, len);
    (void)w;
}

void msp_shim_msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg("", fmt, ap);
    va_end(ap);
}

void msp_shim_warn_once(const char *kind, const char *fmt, ...)
{
    int seen = 0, slot = -1;
    pthread_mutex_lock(&g_warn_mu);
    for (int i = 0; i < g_nkinds && !seen; i++)
        if (strcmp(g_kinds[i].kind, kind) == 0) {
            seen = 1;
            g_kinds[i].count++;
        }
    if (!seen && g_nkinds < MSP_MAX_KINDS) {
        slot = g_nkinds++;
        snprintf(g_kinds[slot].kind, sizeof g_kinds[0].kind, "%s", kind);
        g_kinds[slot].count = 1;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g_kinds[slot].first, sizeof g_kinds[0].first, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&g_warn_mu);
    if (seen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vmsg("warning: ", fmt, ap);
    va_end(ap);
}

uint64_t msp_shim_warn_count(const char *kind)
{
    uint64_t n = 0;
    pthread_mutex_lock(&g_warn_mu);
    for (int i = 0; i < g_nkinds; i++)
        if (strcmp(g_kinds[i].kind, kind) == 0)
            n = g_kinds[i].count;
    pthread_mutex_unlock(&g_warn_mu);
    return n;
}

void msp_shim_warn_summary(void)
{
    pthread_mutex_lock(&g_warn_mu);
    for (int i = 0; i < g_nkinds; i++)
        if (g_kinds[i].count > 1)
            msp_shim_msg("warning: fired %llu times in all: %s",
                         (unsigned long long)g_kinds[i].count, g_kinds[i].first);
    pthread_mutex_unlock(&g_warn_mu);
}

int64_t msp_env_range(const char *name, int64_t dflt, int64_t lo, int64_t hi, const char *unit)
{
    const char *e = getenv(name);
    if (!e || !*e)
        return dflt;
    char *end;
    errno = 0;
    long long v = strtoll(e, &end, 10);
    if (end != e && *end == '\0' && errno == 0 && v >= lo && v <= hi)
        return v;
    msp_shim_warn_once(name, "%s=%s is not a number of %s from %lld to %lld; using %lld", name, e,
                       unit, (long long)lo, (long long)hi, (long long)dflt);
    return dflt;
}

int64_t msp_env_mib(const char *name, int64_t dflt)
{
    return msp_env_range(name, dflt, 1, (int64_t)1 << 20, "MiB");
}
