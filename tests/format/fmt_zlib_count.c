/* A test's LD_PRELOAD library: each call to zlib's inflate() in a process
 * that loads it appends "inflate PID" to the file MSP_ZLIB_COUNT_LOG names,
 * and each call to crc32_combine() (or its 64-bit name) "crc32_combine PID",
 * then goes on to zlib's own. A line a call, written at once: the reader
 * helper ends with _exit, past any destructor that could count. */
#include "fmt_count_log.h"

#include <dlfcn.h>
#include <stdio.h>
#include <zlib.h>

#undef crc32_combine /* zlib.h may name crc32_combine64 so */

static void count_call(const char *what)
{
    char line[64];
    snprintf(line, sizeof line, "%s %ld\n", what, (long)getpid());
    msp_count_log("MSP_ZLIB_COUNT_LOG", line);
}

__attribute__((visibility("default"))) int inflate(z_streamp strm, int flush)
{
    static int (*real)(z_streamp, int);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "inflate");
    count_call("inflate");
    return real ? real(strm, flush) : Z_STREAM_ERROR;
}

/* zlib's two names for the one combine, with zlib.h's own types */
static uLong combine(const char *name, uLong a, uLong b, z_off64_t len)
{
    static uLong (*real[2])(uLong, uLong, z_off64_t);
    int k = name[13] != '\0';
    if (!real[k])
        *(void **)&real[k] = dlsym(RTLD_NEXT, name);
    count_call("crc32_combine");
    return real[k] ? real[k](a, b, len) : 0;
}

__attribute__((visibility("default"))) uLong crc32_combine(uLong a, uLong b, z_off_t len)
{
    return combine("crc32_combine", a, b, len);
}

__attribute__((visibility("default"))) uLong crc32_combine64(uLong a, uLong b, z_off64_t len)
{
    return combine("crc32_combine64", a, b, len);
}
