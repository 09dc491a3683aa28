/* A test's LD_PRELOAD library: counts the calls to malloc() a process makes
 * after its last fork (a server's child counts its own), and when it ends
 * through _exit() (as the reader helper's children do) appends
 * "malloc PID COUNT" to the file MSP_MALLOC_COUNT_LOG names. The allocation
 * itself is glibc's own, __libc_malloc. */
#include "fmt_count_log.h"

#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>

extern void *__libc_malloc(size_t size);

static unsigned long count;

static void count_reset(void)
{
    count = 0;
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

__attribute__((visibility("default"), noreturn)) void _exit(int status)
{
    char line[64];
    snprintf(line, sizeof line, "malloc %ld %lu\n", (long)getpid(), count);
    msp_count_log("MSP_MALLOC_COUNT_LOG", line);
    for (;;)
        syscall(SYS_exit_group, status);
}
