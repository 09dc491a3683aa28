/* Library logging goes through a sink the front end installs; none = silent. */
#include "msprobe/common.h"

#include <stdarg.h>
#include <stdio.h>

static msp_log_fn msp_sink;
static void *msp_sink_ud;
static msp_log_level_t msp_sink_max = MSP_LOG_WARN;

void msp_log_set_sink(msp_log_fn fn, void *ud, msp_log_level_t max_level)
{
    msp_sink = fn;
    msp_sink_ud = ud;
    msp_sink_max = max_level;
}

void msp_log(msp_log_level_t level, const char *fmt, ...)
{
    if (!msp_sink || level > msp_sink_max)
        return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    msp_sink(level, buf, msp_sink_ud);
}

const char *msp_log_prefix(msp_log_level_t level)
{
    static const char *const names[] = {"error: ", "warning: ", "", "debug: "};
    return level >= MSP_LOG_ERROR && level <= MSP_LOG_DEBUG ? names[level] : "";
}
