/* Test helper preloaded into msprobe: counts the bytes read with pread from
 * every file whose path holds READ_SPY_PATHS (one substring), and the
 * largest size the file had at a read, and the opens (open, openat) of every
 * path that holds READ_SPY_OPENS; at exit writes one line per file,
 * "read<TAB>bytes_read<TAB>size<TAB>path" or "open<TAB>count<TAB>0<TAB>path",
 * to the file READ_SPY_LOG, from a process named msprobe only (READ_SPY_NAME
 * names another; the reader helpers it starts inherit the preload). Lets test_cmp_report_full_disk.py
 * see from outside compare how many times the reports read the spool (an
 * unlinked file: its path ends in " (deleted)"), and test_cmp_html_report.py
 * how many times compare opened each dump. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "msp_fd_path.h"

#define SPY_FILES 64

static struct {
    int open; /* an open count, else bytes read */
    char path[512];
    long long bytes, size;
} spy[SPY_FILES];
static int n_spy;
static pthread_mutex_t spy_mu = PTHREAD_MUTEX_INITIALIZER;

static void spy_add(int open, const char *path, long long n, long long size)
{
    pthread_mutex_lock(&spy_mu);
    int i = 0;
    while (i < n_spy && (spy[i].open != open || strcmp(spy[i].path, path) != 0))
        i++;
    if (i == n_spy && n_spy < SPY_FILES) {
        spy[n_spy].open = open;
        snprintf(spy[n_spy++].path, sizeof spy[0].path, "%s", path);
    }
    if (i < n_spy) {
        spy[i].bytes += n;
        if (size > spy[i].size)
            spy[i].size = size;
    }
    pthread_mutex_unlock(&spy_mu);
}

static void spy_count(int fd, ssize_t got)
{
    const char *want = getenv("READ_SPY_PATHS");
    if (!want || got <= 0)
        return;
    char path[512];
    if (msp_fd_path(fd, path, sizeof path))
        return;
    if (!strstr(path, want))
        return;
    struct stat st;
    spy_add(0, path, got, fstat(fd, &st) == 0 ? (long long)st.st_size : -1);
}

static void spy_open(const char *path, int fd)
{
    const char *want = getenv("READ_SPY_OPENS");
    if (want && path && fd >= 0 && strstr(path, want))
        spy_add(1, path, 1, 0);
}

static int spy_real_open(const char *name, int dirfd, const char *path, int flags, mode_t mode)
{
    int saved = errno;
    int fd;
    if (dirfd == -1) {
        int (*real)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT,
                                                                                     name);
        errno = saved;
        fd = real ? real(path, flags, mode) : -1;
    } else {
        int (*real)(int, const char *, int,
                    ...) = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, name);
        errno = saved;
        fd = real ? real(dirfd, path, flags, mode) : -1;
    }
    saved = errno;
    spy_open(path, fd);
    errno = saved;
    return fd;
}

static mode_t spy_mode(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

__attribute__((visibility("default"))) int open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = spy_mode(flags, ap);
    va_end(ap);
    return spy_real_open("open", -1, path, flags, mode);
}

__attribute__((visibility("default"))) int open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = spy_mode(flags, ap);
    va_end(ap);
    return spy_real_open("open64", -1, path, flags, mode);
}

__attribute__((visibility("default"))) int openat(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = spy_mode(flags, ap);
    va_end(ap);
    return spy_real_open("openat", dirfd, path, flags, mode);
}

__attribute__((visibility("default"))) int openat64(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = spy_mode(flags, ap);
    va_end(ap);
    return spy_real_open("openat64", dirfd, path, flags, mode);
}

__attribute__((visibility("default"))) ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    ssize_t (*real)(int, void *, size_t,
                    off_t) = (ssize_t(*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread");
    ssize_t got = real ? real(fd, buf, n, off) : -1;
    spy_count(fd, got);
    return got;
}

__attribute__((visibility("default"))) ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
    ssize_t (*real)(int, void *, size_t,
                    off_t) = (ssize_t(*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread64");
    ssize_t got = real ? real(fd, buf, n, off) : -1;
    spy_count(fd, got);
    return got;
}

__attribute__((destructor)) static void spy_write(void)
{
    extern char *program_invocation_short_name;
    const char *log = getenv("READ_SPY_LOG"), *name = getenv("READ_SPY_NAME");
    if (strcmp(program_invocation_short_name, name ? name : "msprobe") != 0)
        return;
    FILE *f = log ? fopen(log, "a") : NULL;
    if (!f)
        return;
    for (int i = 0; i < n_spy; i++)
        fprintf(f, "%s\t%lld\t%lld\t%s\n", spy[i].open ? "open" : "read", spy[i].bytes, spy[i].size,
                spy[i].path);
    fclose(f);
}
