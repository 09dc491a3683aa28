/* A test's LD_PRELOAD library: counts the calls to malloc() a process makes
 * after its last fork (a server's child counts its own), and when it ends
 * through _exit() (as the reader helper's children do) appends
 * "malloc PID COUNT" to the file MSP_MALLOC_COUNT_LOG names. The allocation
 * itself is glibc's own, __libc_malloc. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

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
    const char *log = getenv("MSP_MALLOC_COUNT_LOG");
    int fd = log ? open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600) : -1;
    if (fd >= 0) {
        char line[64];
        int n = snprintf(line, sizeof line, "malloc %ld %lu\n", (long)getpid(), count);
        if (write(fd, line, (size_t)n) != n)
            n = -1;
        close(fd);
    }
    for (;;)
        syscall(SYS_exit_group, status);
}
