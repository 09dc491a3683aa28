/* A test's LD_PRELOAD library: counts the calls to malloc() and to libhdf5's
 * H5Lexists() a process makes after its last fork (a server's child counts
 * its own), and when it ends through _exit() (as the reader helper's
 * children do), or through exit() with MSP_CALL_COUNT_AT_EXIT=1, appends
 * "malloc PID COUNT" and "H5Lexists PID COUNT" to the file
 * MSP_CALL_COUNT_LOG names. The allocation itself is glibc's own,
 * __libc_malloc; the lookup libhdf5's, found past this library. */
#include "fmt_count_log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>

extern void *__libc_malloc(size_t size);

static unsigned long count, lookups;

static void count_reset(void)
{
    count = 0;
    lookups = 0;
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

/* libhdf5's htri_t H5Lexists(hid_t, const char *, hid_t), hid_t 64 bits
 * (1.10 and later), declared here so the library needs no HDF5 headers */
int H5Lexists(int64_t loc, const char *name, int64_t lapl);
__attribute__((visibility("default"))) int H5Lexists(int64_t loc, const char *name, int64_t lapl)
{
    static int (*real)(int64_t, const char *, int64_t);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "H5Lexists");
    __atomic_add_fetch(&lookups, 1, __ATOMIC_RELAXED);
    return real ? real(loc, name, lapl) : -1;
}

static void count_write(void)
{
    char line[96];
    snprintf(line, sizeof line, "malloc %ld %lu\nH5Lexists %ld %lu\n", (long)getpid(), count,
             (long)getpid(), lookups);
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
