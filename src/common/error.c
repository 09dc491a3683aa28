/* Error codes, their one message table, and per-thread error detail. */
#include "msprobe/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const msp_messages[MSP_ERR_COUNT_] = {
    [MSP_OK] = "success",
    [MSP_ERR_NOMEM] = "out of memory",
    [MSP_ERR_IO] = "input/output error",
    [MSP_ERR_NOT_FOUND] = "not found",
    [MSP_ERR_FORMAT] = "malformed input",
    [MSP_ERR_CONFIG] = "invalid configuration",
    [MSP_ERR_USAGE] = "invalid usage",
    [MSP_ERR_UNSUPPORTED] = "unsupported",
    [MSP_ERR_MISMATCH] = "inputs do not match",
    [MSP_ERR_HDF5] = "HDF5 error",
    [MSP_ERR_ZIP] = "zip archive error",
    [MSP_ERR_XLSX] = "xlsx writer error",
    [MSP_ERR_PYTHON] = "Python error",
    [MSP_ERR_LIMIT] = "limit exceeded",
    [MSP_ERR_INTERNAL] = "internal error",
};

/* Detail text lives per thread: the writer thread, OpenMP workers and the
 * training thread each keep their own last error. */
static _Thread_local char msp_detail[1024];
static _Thread_local msp_err msp_last_code;

const char *msp_strerror(msp_err code)
{
    if ((int)code < 0 || code >= MSP_ERR_COUNT_ || !msp_messages[code])
        return "unknown error";
    return msp_messages[code];
}

msp_err msp_fail(msp_err code, const char *fmt, ...)
{
    msp_last_code = code;
    if (!fmt) {
        msp_detail[0] = '\0';
        return code;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msp_detail, sizeof msp_detail, fmt, ap);
    va_end(ap);
    return code;
}

const char *msp_last_error(void)
{
    if (msp_detail[0])
        return msp_detail;
    if (msp_last_code != MSP_OK)
        return msp_strerror(msp_last_code);
    return "";
}

void msp_clear_error(void)
{
    msp_detail[0] = '\0';
    msp_last_code = MSP_OK;
}
