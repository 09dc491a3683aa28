/* Child processes and descriptors with a deadline (msprobe/proc.h): the one
 * place msprobe starts a program, reads its answer and ends it. */
#include "msprobe/proc.h"

#include "msprobe/common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

double msp_monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int msp_poll_ms(double left)
{
    if (!(left > 0))
        return 0;
    /* a deadline of 1e300 or inf: converting it to int would be undefined */
    if (left >= (double)(INT_MAX / 1000 - 1))
        return -1;
    return (int)(left * 1000.0) + 1;
}

/* One of the child's standard descriptors: target gets what `how` says. */
static void msp_child_fd(posix_spawn_file_actions_t *fa, int how, int target, int flags)
{
    if (how >= 0)
        posix_spawn_file_actions_adddup2(fa, how, target);
    else if (how == MSP_CHILD_DEVNULL)
        posix_spawn_file_actions_addopen(fa, target, "/dev/null", flags, 0);
}

int msp_child_start(msp_child_t *c)
{
    c->pid = -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    msp_child_fd(&fa, c->in, 0, O_RDONLY);
    msp_child_fd(&fa, c->out, 1, O_WRONLY);
    msp_child_fd(&fa, c->err, 2, O_WRONLY);
    /* above 3, so that the dup2 is never one onto itself (which would keep
     * the descriptor's close-on-exec flag on some C libraries) */
    if (c->fd3 > 3)
        posix_spawn_file_actions_adddup2(&fa, c->fd3, 3);
    posix_spawn_file_actions_addclosefrom_np(&fa, c->fd3 > 3 ? 4 : 3);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    /* Only SIGPIPE and SIGCHLD are reset; every other disposition stays as
     * exec keeps it: SIGHUP ignored under nohup, SIGINT in a background job.
     * Resetting them all let a terminal's hangup kill the helpers of a
     * compare that nohup was keeping alive. */
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    sigaddset(&dfl, SIGCHLD);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &dfl);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (c->new_group) {
        posix_spawnattr_setpgroup(&at, 0);
        flags |= POSIX_SPAWN_SETPGROUP;
    }
    posix_spawnattr_setflags(&at, flags);
    pid_t pid;
    char **env = c->envp ? c->envp : environ;
    int e = c->search_path ? posix_spawnp(&pid, c->argv[0], &fa, &at, c->argv, env)
                           : posix_spawn(&pid, c->argv[0], &fa, &at, c->argv, env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (e == 0)
        c->pid = pid;
    return e;
}

int msp_child_wait(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return st;
}

/* Whether child pid is stopped (1), or has ended and is reaped with its
 * status in *status (2), or neither (0); never blocks. */
static int msp_stopped_or_reaped(pid_t pid, int *status)
{
    int st = 0;
    pid_t r;
    while ((r = waitpid(pid, &st, WNOHANG | WUNTRACED)) < 0 && errno == EINTR)
        ;
    if (r != pid)
        return 0;
    *status = st;
    return WIFSTOPPED(st) ? 1 : 2;
}

int msp_child_end(pid_t pid, int *kind)
{
    int st = 0;
    if (*kind == MSP_CHILD_TIMEOUT) { /* a stopped child is not a hung one */
        int w = msp_stopped_or_reaped(pid, &st);
        if (w == 2)
            return st;
        if (w == 1)
            *kind = MSP_CHILD_STOPPED;
    }
    if (*kind != MSP_CHILD_ENDED)
        kill(pid, SIGKILL);
    return msp_child_wait(pid);
}

int msp_fd_collect(int fd, int watch, size_t cap, double deadline, unsigned char **out,
                   size_t *out_n)
{
    msp_buf_t b = {.max = cap, .first = (size_t)64 << 10};
    int kind = MSP_CHILD_ENDED;
    for (;;) {
        double left = deadline - msp_monotonic();
        if (left <= 0) {
            kind = MSP_CHILD_TIMEOUT;
            break;
        }
        struct pollfd p[2] = {{fd, POLLIN, 0}, {watch, 0, 0}}; /* poll skips fd -1 */
        int pr = poll(p, 2, msp_poll_ms(left));
        if (pr == 0 || (pr < 0 && errno == EINTR))
            continue;
        if (p[1].revents & (POLLERR | POLLHUP | POLLNVAL)) {
            kind = MSP_CHILD_WATCH_GONE;
            break;
        }
        size_t room;
        char *at = msp_buf_room(&b, (size_t)64 << 10, &room);
        if (!at) {
            kind = b.too_big ? MSP_CHILD_TOO_BIG : MSP_CHILD_NOMEM;
            break;
        }
        ssize_t k = read(fd, at, room);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        msp_buf_grew(&b, (size_t)k);
        if (b.len >= cap) { /* cap bytes: too big whatever follows, so say so now */
            kind = MSP_CHILD_TOO_BIG;
            break;
        }
    }
    if (kind == MSP_CHILD_ENDED && !msp_buf_room(&b, 0, &(size_t){0}))
        kind = MSP_CHILD_NOMEM; /* nothing read: room for the NUL */
    if (kind != MSP_CHILD_ENDED) {
        msp_buf_free(&b);
        *out = NULL;
        *out_n = 0;
        return kind;
    }
    *out = (unsigned char *)b.data;
    *out_n = b.len;
    return kind;
}

int msp_fd_exact(int fd, void *p, size_t n, int out, double deadline)
{
    unsigned char *q = p;
    while (n) {
        if (deadline > 0) {
            double left = deadline - msp_monotonic();
            if (left <= 0)
                return -2;
            struct pollfd pf = {fd, out ? POLLOUT : POLLIN, 0};
            if (poll(&pf, 1, msp_poll_ms(left)) <= 0)
                continue;
        }
        /* with a deadline, a send never blocks past it on a full socket */
        ssize_t k = out ? send(fd, q, n, MSG_NOSIGNAL | (deadline > 0 ? MSG_DONTWAIT : 0))
                        : read(fd, q, n);
        if (k < 0 && (errno == EINTR || (out && errno == EAGAIN)))
            continue;
        if (k <= 0)
            return -1;
        q += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Why (msprobe(1), ENVIRONMENT): compare's parallel steps are short and come
 * between serial work, and libgomp's idle threads spin for milliseconds after
 * each, on the core that the reader helper (another process) needs. On 2
 * cores, bench/compare/tree.sh's packed small tensors ran at 0.74 GB/s with a
 * fifth of all CPU samples in that spin, and at 0.96 GB/s with passive
 * waiting; large tensors and the statistics tree ran as before. A
 * .preinit_array setenv() is too early: libc's initialiser resets environ. */
void msp_omp_passive_restart(char **argv)
{
    static const char mark[] = "MSPROBE_OMP_PASSIVE";
    const char *m = getenv(mark);
    if (m && !strcmp(m, "1")) {
        unsetenv(mark);
        unsetenv("OMP_WAIT_POLICY");
        return;
    }
    /* any other value of the mark is the user's, and left as it is */
    if (m || getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT") || !argv || !argv[0])
        return;
    /* Not restarted: a program run by naming the dynamic loader
     * (/proc/self/exe is then ld.so, which would take argv[1] for the
     * program), and one run under valgrind (an exec would leave it). */
    const char *pre = getenv("LD_PRELOAD");
    if (!getauxval(AT_BASE) || (pre && strstr(pre, "vgpreload")))
        return;
    if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) || setenv(mark, "1", 1)) {
        unsetenv("OMP_WAIT_POLICY");
        return;
    }
    /* by its own path, so that ps and top name the restarted program as
     * before (an exec of /proc/self/exe would name it "exe") */
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        execv(self, argv);
    }
    unsetenv(mark);
    unsetenv("OMP_WAIT_POLICY");
}
