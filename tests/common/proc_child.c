/* msprobe/proc.h and msp_buf's cap, against values known by hand: a child
 * started by msp_child_start has an empty signal mask, SIGPIPE at its
 * default and no descriptor of ours but 0-2; msp_fd_collect keeps fewer
 * than cap bytes and refuses more; a child that outlives its deadline is
 * killed; one that cannot start is an errno, nothing running. */
#include "msprobe/common.h"
#include "msprobe/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "msp_check.h"

/* Runs sh -c script with its stdout collected (cap bytes, timeout seconds). */
static int run_sh(const char *script, size_t cap, double timeout, char **out, size_t *n, int *st)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
    msp_child_t c = {.argv = argv, .in = MSP_CHILD_DEVNULL, .out = p[1], .err = MSP_CHILD_DEVNULL};
    int e = msp_child_start(&c);
    close(p[1]);
    if (e) {
        close(p[0]);
        return -1;
    }
    unsigned char *buf;
    int kind = msp_fd_collect(p[0], -1, cap, msp_monotonic() + timeout, &buf, n);
    close(p[0]);
    *st = msp_child_end(c.pid, &kind);
    *out = (char *)buf;
    return kind;
}

static void check_buf_cap(void)
{
    msp_buf_t b = {.max = 10};
    msp_buf_puts(&b, "0123456789"); /* exactly max: fits */
    CHECK(!b.oom && !b.too_big && b.len == 10 && strcmp(b.data, "0123456789") == 0);
    size_t room = 99;
    CHECK(msp_buf_room(&b, 1, &room) == NULL && b.too_big && b.oom); /* full: no room */
    msp_buf_free(&b);

    msp_buf_t c = {.max = 5, .first = 2};
    char *at = msp_buf_room(&c, 100, &room); /* want clipped to what max leaves */
    CHECK(at != NULL && room >= 1 && room <= 5);
    memcpy(at, "abc", 3);
    msp_buf_grew(&c, 3);
    CHECK(c.len == 3 && strcmp(c.data, "abc") == 0);
    at = msp_buf_room(&c, 100, &room);
    CHECK(at != NULL && room == 2); /* 5 - 3 */
    msp_buf_put(&c, "xyz", 3);      /* 6 > 5: too big, nothing appended */
    CHECK(c.too_big && c.len == 3);
    msp_buf_free(&c);
}

int main(void)
{
    check_buf_cap();

    /* a descriptor of ours without O_CLOEXEC, and a blocked, ignored signal */
    int stray = open("/dev/null", O_RDONLY);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigprocmask(SIG_BLOCK, &block, &old);
    signal(SIGPIPE, SIG_IGN);
    char *out = NULL;
    size_t n = 0;
    int st = 0;
    char script[160];
    snprintf(script, sizeof script,
             "[ -e /proc/self/fd/%d ] && echo stray; grep -E '^(SigBlk|SigIgn):' /proc/self/status",
             stray);
    int kind = run_sh(script, 4096, 30, &out, &n, &st);
    CHECK(kind == MSP_CHILD_ENDED && WIFEXITED(st));
    CHECK(out && !strstr(out, "stray"));                    /* closed in the child */
    CHECK(out && strstr(out, "SigBlk:\t0000000000000000")); /* empty mask */
    /* SIGPIPE (13) is bit 12: not ignored in the child although we ignore it */
    const char *ig = out ? strstr(out, "SigIgn:\t") : NULL;
    CHECK(ig && !(strtoull(ig + 8, NULL, 16) & (1ull << 12)));
    free(out);
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(stray);

    /* the cap: fewer than cap bytes pass, cap bytes do not */
    kind = run_sh("printf 123456789", 10, 30, &out, &n, &st);
    CHECK(kind == MSP_CHILD_ENDED && n == 9 && out && strcmp(out, "123456789") == 0);
    free(out);
    kind = run_sh("printf 1234567890; exec sleep 30", 10, 30, &out, &n, &st);
    CHECK(kind == MSP_CHILD_TOO_BIG && out == NULL && n == 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL); /* at once, not after the sleep */

    /* the deadline: a child that says nothing is killed at it */
    double t0 = msp_monotonic();
    kind = run_sh("exec sleep 120", 4096, 0.3, &out, &n, &st);
    CHECK(kind == MSP_CHILD_TIMEOUT && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* well before the sleep's end, however busy the machine */
    CHECK(msp_monotonic() - t0 < 60);

    /* a program that does not exist: an errno, no child */
    char *argv[] = {"/nonexistent/msprobe-no-such-program", NULL};
    msp_child_t c = {
        .argv = argv, .in = MSP_CHILD_DEVNULL, .out = MSP_CHILD_DEVNULL, .err = MSP_CHILD_DEVNULL};
    CHECK(msp_child_start(&c) == ENOENT && c.pid == -1);

    if (failures)
        return 1;
    printf("msp_child and msp_buf caps: all checks passed\n");
    return 0;
}
