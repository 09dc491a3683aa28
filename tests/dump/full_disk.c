/* Test helper preloaded beside the shim: a disk that is full for some
 * files. A file opened under a path holding one of the comma-separated
 * substrings in FULL_DISK_PATHS (e.g. "/step2/,/step3/") takes no byte:
 * every write, pwrite and fallocate on it fails with ENOSPC, as on a full
 * disk, while other files write normally. Lets test_dump_disk_full.py check
 * which steps the shim says were lost, and test_cmp_report_full_disk.py what
 * compare says when its report's temp files cannot grow (mkstemp's files,
 * written through stdio: fwrite is refused on them too). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FD 65536
static unsigned char full[MAX_FD];

static int is_full_path(const char *path)
{
    const char *list = getenv("FULL_DISK_PATHS");
    if (!list || !path)
        return 0;
    char buf[1024];
    size_t n = strlen(list);
    if (n >= sizeof buf)
        return 0;
    memcpy(buf, list, n + 1);
    for (char *save = NULL, *s = strtok_r(buf, ",", &save); s; s = strtok_r(NULL, ",", &save))
        if (*s && strstr(path, s))
            return 1;
    return 0;
}

static int mark(int fd, const char *path)
{
    if (fd >= 0 && fd < MAX_FD)
        full[fd] = (unsigned char)is_full_path(path);
    return fd;
}

static int is_full(int fd)
{
    if (fd >= 0 && fd < MAX_FD && full[fd]) {
        errno = ENOSPC;
        return 1;
    }
    return 0;
}

#define REAL(name, type) ((type)dlsym(RTLD_NEXT, name))
#define EXPORT __attribute__((visibility("default")))

EXPORT int open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t m = (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
    va_end(ap);
    return mark(REAL("open", int (*)(const char *, int, ...))(path, flags, m), path);
}

EXPORT int open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t m = (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
    va_end(ap);
    return mark(REAL("open64", int (*)(const char *, int, ...))(path, flags, m), path);
}

EXPORT int close(int fd)
{
    if (fd >= 0 && fd < MAX_FD)
        full[fd] = 0;
    return REAL("close", int (*)(int))(fd);
}

EXPORT ssize_t write(int fd, const void *b, size_t n)
{
    return is_full(fd) ? -1 : REAL("write", ssize_t(*)(int, const void *, size_t))(fd, b, n);
}

EXPORT ssize_t pwrite(int fd, const void *b, size_t n, off_t o)
{
    return is_full(fd) ? -1
                       : REAL("pwrite", ssize_t(*)(int, const void *, size_t, off_t))(fd, b, n, o);
}

EXPORT ssize_t pwrite64(int fd, const void *b, size_t n, off_t o)
{
    return is_full(fd)
               ? -1
               : REAL("pwrite64", ssize_t(*)(int, const void *, size_t, off_t))(fd, b, n, o);
}

EXPORT ssize_t writev(int fd, const struct iovec *v, int n)
{
    return is_full(fd) ? -1 : REAL("writev", ssize_t(*)(int, const struct iovec *, int))(fd, v, n);
}

EXPORT int fallocate(int fd, int mode, off_t o, off_t n)
{
    return is_full(fd) ? -1 : REAL("fallocate", int (*)(int, int, off_t, off_t))(fd, mode, o, n);
}

EXPORT int posix_fallocate(int fd, off_t o, off_t n)
{
    return fd >= 0 && fd < MAX_FD && full[fd]
               ? ENOSPC
               : REAL("posix_fallocate", int (*)(int, off_t, off_t))(fd, o, n);
}

EXPORT int mkstemp(char *tmpl)
{
    return mark(REAL("mkstemp", int (*)(char *))(tmpl), tmpl);
}

EXPORT int mkostemp(char *tmpl, int flags)
{
    return mark(REAL("mkostemp", int (*)(char *, int))(tmpl, flags), tmpl);
}

/* stdio writes through glibc's own write, which no preload sees */
EXPORT size_t fwrite(const void *b, size_t size, size_t n, FILE *f)
{
    return is_full(fileno(f))
               ? 0
               : REAL("fwrite", size_t(*)(const void *, size_t, size_t, FILE *))(b, size, n, f);
}
