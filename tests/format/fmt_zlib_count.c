/* A test's LD_PRELOAD library: each call to zlib's inflate() in a process
 * that loads it appends "inflate PID" to the file MSP_ZLIB_COUNT_LOG names,
 * then goes on to the real inflate. A line a call, written at once: the
 * reader helper ends with _exit, past any destructor that could count. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

__attribute__((visibility("default"))) int inflate(z_streamp strm, int flush)
{
    static int (*real)(z_streamp, int);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "inflate");
    const char *log = getenv("MSP_ZLIB_COUNT_LOG");
    int fd = log ? open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600) : -1;
    if (fd >= 0) {
        char line[48];
        int n = snprintf(line, sizeof line, "inflate %ld\n", (long)getpid());
        if (write(fd, line, (size_t)n) != n)
            n = -1;
        close(fd);
    }
    return real ? real(strm, flush) : Z_STREAM_ERROR;
}
