/* Test helper preloaded beside the shim: a slow disk. Every write of
 * SLOW_DISK_MIN bytes or more (default 64 KiB: tensor data, not log lines)
 * first sleeps SLOW_DISK_US microseconds (default 20000), so the dump writer
 * falls behind training as it does on a network file system. Lets
 * test_dump_crashsafe.py check that a killed run still keeps its finished
 * steps when the writer lags. */
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static void slow(size_t n)
{
    const char *m = getenv("SLOW_DISK_MIN"), *u = getenv("SLOW_DISK_US");
    size_t min = m ? (size_t)atol(m) : 65536;
    long us = u ? atol(u) : 20000;
    if (n < min || us <= 0)
        return;
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

__attribute__((visibility("default"))) ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    ssize_t (*real)(int, const void *, size_t,
                    off_t) = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT,
                                                                                 "pwrite");
    slow(n);
    return real ? real(fd, buf, n, off) : -1;
}

__attribute__((visibility("default"))) ssize_t pwrite64(int fd, const void *buf, size_t n,
                                                        off_t off)
{
    ssize_t (*real)(int, const void *, size_t,
                    off_t) = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT,
                                                                                 "pwrite64");
    slow(n);
    return real ? real(fd, buf, n, off) : -1;
}

__attribute__((visibility("default"))) ssize_t write(int fd, const void *buf, size_t n)
{
    ssize_t (*real)(int, const void *,
                    size_t) = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    slow(n);
    return real ? real(fd, buf, n) : -1;
}
