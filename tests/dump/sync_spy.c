/* Test helper preloaded beside the shim: logs every fdatasync, fsync
 * and sync_file_range call (file path, file size at the call, range) to the file
 * named by SYNC_SPY_LOG, then does the real call. Lets test_dump_durable.py
 * see from outside the shim which files were put on disk, and when. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "msp_fd_path.h"

static void spy_log(const char *what, int fd, long long off, long long n)
{
    const char *log = getenv("SYNC_SPY_LOG");
    if (!log)
        return;
    char path[4096];
    if (msp_fd_path(fd, path, sizeof path))
        return;
    struct stat st;
    long long size = fstat(fd, &st) == 0 ? (long long)st.st_size : -1;
    FILE *f = fopen(log, "a");
    if (!f)
        return;
    fprintf(f, "%s\t%s\t%lld\t%lld\t%lld\n", what, path, size, off, n);
    fclose(f);
}

__attribute__((visibility("default"))) int fdatasync(int fd)
{
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    spy_log("fdatasync", fd, 0, 0);
    return real ? real(fd) : -1;
}

__attribute__((visibility("default"))) int fsync(int fd)
{
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    spy_log("fsync", fd, 0, 0);
    return real ? real(fd) : -1;
}

__attribute__((visibility("default"))) int sync_file_range(int fd, off_t off, off_t n,
                                                           unsigned int flags)
{
    int (*real)(int, off_t, off_t,
                unsigned int) = (int (*)(int, off_t, off_t, unsigned int))dlsym(RTLD_NEXT,
                                                                                "sync_file_range");
    spy_log("sync_file_range", fd, (long long)off, (long long)n);
    return real ? real(fd, off, n, flags) : -1;
}
