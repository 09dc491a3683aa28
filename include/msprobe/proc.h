/* msprobe proc: the one way msprobe runs a child process and waits on
 * descriptors with a deadline (src/common/proc.c), after git's run-command.
 *
 * Every child msprobe starts (the reader helper msprobe-catalogue, the
 * replay worker, the Python that lists packages) is started here, so each
 * gets the same discipline: posix_spawn (never a bare fork: the caller may
 * have threads), an empty signal mask, SIGPIPE and SIGCHLD at their default
 * (a child whose reader is gone dies writing; a child may wait for its own
 * children) while every other disposition stays as exec keeps it (SIGHUP
 * ignored under nohup), and no descriptor of ours but the three it is given
 * (a child holding another thread's dump file would hold its lock too).
 * Library code: nothing here prints or exits. */
#ifndef MSPROBE_PROC_H
#define MSPROBE_PROC_H

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a child's stdin, stdout or stderr is: one of these, or a descriptor
 * of ours (>= 0) duplicated onto it (the caller still owns and closes it:
 * make pipes and sockets O_CLOEXEC, then only the child's copy stays open). */
enum {
    MSP_CHILD_INHERIT = -1, /* ours, as it is */
    MSP_CHILD_DEVNULL = -2  /* /dev/null */
};

typedef struct msp_child {
    char **argv;      /* NULL-terminated; argv[0] is the program */
    int search_path;  /* 1: look argv[0] up in PATH when it has no '/' */
    int in, out, err; /* MSP_CHILD_* or a descriptor */
    int new_group;    /* 1: the child leads a process group of its own (kill(-pid) ends
                          it and whatever it forks) */
    int fd3;          /* > 3: a descriptor the child gets as 3 (a listening socket);
                          0: none, every descriptor from 3 up is closed */
    char **envp;      /* the child's environment; NULL: ours */
    pid_t pid;        /* set by msp_child_start */
} msp_child_t;

/* Starts c: 0 with c->pid set, or an errno (nothing started). */
int msp_child_start(msp_child_t *c);

/* Waits for pid to end (retrying on EINTR); its wait status. */
int msp_child_wait(pid_t pid);

/* How reading a child's answer ended (msp_fd_collect, msp_child_end). The
 * values are fixed: the catalogue server sends them over its socket. */
enum {
    MSP_CHILD_ENDED = 0,     /* the data ended (the child closed its end) */
    MSP_CHILD_TIMEOUT = 1,   /* the deadline passed first */
    MSP_CHILD_TOO_BIG = 2,   /* more than the cap */
    MSP_CHILD_FAILED = 3,    /* the child could not be started (an errno goes with it) */
    MSP_CHILD_NOMEM = 4,     /* no memory for the answer */
    MSP_CHILD_STOPPED = 5,   /* found stopped (SIGSTOP, a debugger) at the deadline, then killed */
    MSP_CHILD_WATCH_GONE = 6 /* msp_fd_collect's watched descriptor hung up first */
};

/* Reads fd to its end: fewer than cap bytes, each wait bounded by deadline
 * (msp_monotonic() seconds). MSP_CHILD_ENDED with *out malloc'd (NUL-
 * terminated, the NUL not counted in *out_n); else the reason, nothing kept.
 * watch (-1: none): a descriptor whose hang-up ends the wait first
 * (MSP_CHILD_WATCH_GONE), as the catalogue server watches its caller. */
int msp_fd_collect(int fd, int watch, size_t cap, double deadline, unsigned char **out,
                   size_t *out_n);

/* After msp_fd_collect on child pid's output ended as *kind: its wait
 * status, the child killed first unless its output ended; one found stopped
 * at a timeout turns *kind into MSP_CHILD_STOPPED (it was not hung). */
int msp_child_end(pid_t pid, int *kind);

/* Exactly n bytes from fd, or to it with out (a socket: send() without
 * SIGPIPE), each wait bounded by deadline (msp_monotonic() seconds; 0: none):
 * 0, -1 on EOF or error, -2 past the deadline. */
int msp_fd_exact(int fd, void *p, size_t n, int out, double deadline);

/* Seconds on the monotonic clock. */
double msp_monotonic(void);

/* poll()'s timeout for `left` seconds: 0 when none is left, -1 (no limit)
 * for a time too large for an int of milliseconds (inf, 1e300). */
int msp_poll_ms(double left);

/* Called first thing in main() by the programs that compare (msprobe,
 * cmp_bench): OpenMP's idle threads then sleep instead of spinning, unless
 * the user chose how they wait (OMP_WAIT_POLICY or GOMP_SPINCOUNT set).
 * libgomp reads its environment before main(), so this restarts the program
 * once (execv of its own path, as /proc/self/exe names it, with the same
 * argv) with OMP_WAIT_POLICY=PASSIVE and MSPROBE_OMP_PASSIVE=1; in the
 * restarted program it takes both out of the environment again, so every
 * child sees the environment as given. The one function here that may not
 * return: it returns when it did not restart (already done, the user's
 * choice, started through ld.so or valgrind, or an exec that failed: the
 * program then runs as libgomp set it up). */
void msp_omp_passive_restart(char **argv);

#ifdef __cplusplus
}
#endif
#endif
