/* The path a descriptor names, read from /proc/self/fd, for the test helpers
 * preloaded into msprobe that log what it does to files (tests/dump's
 * sync_spy, tests/compare's read_spy). */
#ifndef MSP_TEST_FD_PATH_H
#define MSP_TEST_FD_PATH_H

#include <stdio.h>
#include <unistd.h>

/* fd's path into path (size n), NUL-terminated; 0, or -1 when it has none. */
static inline int msp_fd_path(int fd, char *path, size_t n)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, path, n - 1);
    if (len < 0)
        return -1;
    path[len] = '\0';
    return 0;
}

#endif
