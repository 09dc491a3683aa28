/* The test preload libraries' log (fmt_zlib_count.c, fmt_call_count.c):
 * one line appended, written at once, to the file the environment variable
 * var names; nothing when it is unset or cannot be opened. */
#ifndef MSP_FMT_COUNT_LOG_H
#define MSP_FMT_COUNT_LOG_H

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void msp_count_log(const char *var, const char *line)
{
    const char *log = getenv(var);
    int fd = log ? open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600) : -1;
    if (fd < 0)
        return;
    if (write(fd, line, strlen(line)) < 0) {
        /* nothing to do: the test then finds a line missing */
    }
    close(fd);
}

#endif
