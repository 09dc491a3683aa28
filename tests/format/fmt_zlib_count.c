/* A test's LD_PRELOAD library: each call to zlib's inflate() in a process
 * that loads it appends "inflate PID" to the file MSP_ZLIB_COUNT_LOG names,
 * then goes on to the real inflate. A line a call, written at once: the
 * reader helper ends with _exit, past any destructor that could count. */
#include "fmt_count_log.h"

#include <dlfcn.h>
#include <stdio.h>
#include <zlib.h>

__attribute__((visibility("default"))) int inflate(z_streamp strm, int flush)
{
    static int (*real)(z_streamp, int);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "inflate");
    char line[48];
    snprintf(line, sizeof line, "inflate %ld\n", (long)getpid());
    msp_count_log("MSP_ZLIB_COUNT_LOG", line);
    return real ? real(strm, flush) : Z_STREAM_ERROR;
}
