/* A test's LD_PRELOAD library: counts the calls to malloc(), to libhdf5's
 * H5Lexists(), H5Tget_fields() and H5Dopen2(), to vsnprintf(), to
 * open_memstream() and to qsort() a process makes after
 * its last fork (a server's child counts its own), and when it ends through
 * _exit() (as the reader helper's children do), or through exit() with
 * MSP_CALL_COUNT_AT_EXIT=1, appends a line "FUNCTION PID COUNT PROGRAM" for
 * each to the file MSP_CALL_COUNT_LOG names. The allocation itself is
 * glibc's own, __libc_malloc; the others go on to the function past this
 * library. */
#include "fmt_count_log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>

extern void *__libc_malloc(size_t size);

static unsigned long count, lookups, formats, fields, memstreams, opens, sorts;

static void count_reset(void)
{
    count = 0;
    lookups = 0;
    formats = 0;
    fields = 0;
    memstreams = 0;
    opens = 0;
    sorts = 0;
}

__attribute__((constructor)) static void count_init(void)
{
    pthread_atfork(NULL, NULL, count_reset);
}

__attribute__((visibility("default"))) void *malloc(size_t size)
{
    __atomic_add_fetch(&count, 1, __ATOMIC_RELAXED);
    return __libc_malloc(size);
}

/* Each interposer below begins so: real, the next library's function of
 * that name, looked up once, and the call counted in counter. */
#define COUNTED(real, name, counter)                                                               \
    do {                                                                                           \
        if (!(real))                                                                               \
            *(void **)&(real) = dlsym(RTLD_NEXT, name);                                            \
        __atomic_add_fetch(&(counter), 1, __ATOMIC_RELAXED);                                       \
    } while (0)

/* libhdf5's htri_t H5Lexists(hid_t, const char *, hid_t), hid_t 64 bits
 * (1.10 and later), declared here so the library needs no HDF5 headers */
int H5Lexists(int64_t loc, const char *name, int64_t lapl);
__attribute__((visibility("default"))) int H5Lexists(int64_t loc, const char *name, int64_t lapl)
{
    static int (*real)(int64_t, const char *, int64_t);
    COUNTED(real, "H5Lexists", lookups);
    return real ? real(loc, name, lapl) : -1;
}

/* libhdf5's herr_t H5Tget_fields(hid_t, size_t *, size_t *, size_t *, size_t *,
 * size_t *): a floating-point type taken apart */
int H5Tget_fields(int64_t t, size_t *spos, size_t *epos, size_t *esize, size_t *mpos,
                  size_t *msize);
__attribute__((visibility("default"))) int H5Tget_fields(int64_t t, size_t *spos, size_t *epos,
                                                         size_t *esize, size_t *mpos, size_t *msize)
{
    static int (*real)(int64_t, size_t *, size_t *, size_t *, size_t *, size_t *);
    COUNTED(real, "H5Tget_fields", fields);
    return real ? real(t, spos, epos, esize, mpos, msize) : -1;
}

/* libhdf5's hid_t H5Dopen2(hid_t, const char *, hid_t): a dataset opened */
int64_t H5Dopen2(int64_t loc, const char *name, int64_t dapl);
__attribute__((visibility("default"))) int64_t H5Dopen2(int64_t loc, const char *name, int64_t dapl)
{
    static int64_t (*real)(int64_t, const char *, int64_t);
    COUNTED(real, "H5Dopen2", opens);
    return real ? real(loc, name, dapl) : -1;
}

/* glibc's vsnprintf, the one a formatted print into a buffer of msprobe's
 * goes through (msp_buf_printf); snprintf and the rest do not come here */
__attribute__((visibility("default"))) int vsnprintf(char *s, size_t n, const char *fmt, va_list ap)
{
    static int (*real)(char *, size_t, const char *, va_list);
    COUNTED(real, "vsnprintf", formats);
    return real ? real(s, n, fmt, ap) : -1;
}

/* glibc's open_memstream: text formatted into memory by stdio (what
 * result.csv's pieces were, before msprobe's own buffers) */
__attribute__((visibility("default"))) FILE *open_memstream(char **ptr, size_t *size)
{
    static FILE *(*real)(char **, size_t *);
    COUNTED(real, "open_memstream", memstreams);
    return real ? real(ptr, size) : NULL;
}

/* glibc's qsort: a sort msprobe did not find done already (msp_sort) */
__attribute__((visibility("default"))) void qsort(void *base, size_t n, size_t size,
                                                  int (*cmp)(const void *, const void *))
{
    static void (*real)(void *, size_t, size_t, int (*)(const void *, const void *));
    COUNTED(real, "qsort", sorts);
    if (real)
        real(base, n, size, cmp);
}

static void count_write(void)
{
    extern char *program_invocation_short_name;
    char line[560];
    const char *who = program_invocation_short_name;
    long pid = (long)getpid();
    snprintf(line, sizeof line,
             "malloc %ld %lu %s\nH5Lexists %ld %lu %s\nvsnprintf %ld %lu %s\n"
             "H5Tget_fields %ld %lu %s\nopen_memstream %ld %lu %s\nH5Dopen2 %ld %lu %s\n"
             "qsort %ld %lu %s\n",
             pid, count, who, pid, lookups, who, pid, formats, who, pid, fields, who, pid,
             memstreams, who, pid, opens, who, pid, sorts, who);
    msp_count_log("MSP_CALL_COUNT_LOG", line);
}

__attribute__((visibility("default"), noreturn)) void _exit(int status)
{
    count_write();
    for (;;)
        syscall(SYS_exit_group, status);
}

/* a process that ends through exit() (msprobe itself, reading in process)
 * writes its counts too when MSP_CALL_COUNT_AT_EXIT is set */
__attribute__((destructor)) static void count_at_exit(void)
{
    const char *e = getenv("MSP_CALL_COUNT_AT_EXIT");
    if (e && *e == '1')
        count_write();
}
