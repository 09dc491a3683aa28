/* The replay worker (replay.py in a Python with torch) and its transport,
 * private to src/compare: compare's replay (cmp_replay.c) and acc_check
 * (pc_acc.c) both start workers, send them jobs and read their answers
 * through these.
 *
 * A job is a frame: [u32 little-endian length][JSON header], then the raw
 * bytes of each tensor the header lists; a length of 0 ends the session. The
 * worker answers one JSON line per job (replay.py's docstring has the
 * fields). The pieces of a job are cmp_job.h's; the kept worker's socket
 * is cmp_worker_keep.h's. */
#ifndef MSPROBE_CMP_WORKER_H
#define MSPROBE_CMP_WORKER_H

#include "cmp_internal.h"

#include "msprobe/proc.h" /* every deadline below is msp_monotonic() seconds */

#include <cjson/cJSON.h>
#include <sys/types.h>

typedef struct cmp_worker {
    pid_t pid;  /* it leads its own process group (its jobs' children are in it) */
    char *dir;  /* its private working directory, the only place it may write */
    int fd;     /* our end of the socket: jobs out, answers in */
    int err_fd; /* its stderr (an unlinked temp file) */
    char *line; /* answer buffer */
    size_t len, cap;
    int kept;    /* 1: a session of a kept worker (cmp_worker_keep.c): stopping ends
                          the session, the worker stays for the next compare */
    long server; /* the kept worker's pid, and this compare's session number in it */
    long session;
    long session_pid; /* the session's process (the ready line's "pid") */
    char **apis;      /* the record APIs it may call ("Functional.gelu"), sorted, from its
                          ready line; NULL when it sent none (then resolve() alone decides) */
    size_t n_apis;
    /* replay on a sample (its ready line's "sample"; cmp_job_every): the
     * elementwise APIs ("gelu") and optimizer classes ("AdamW"), sorted; past
     * sample_min elements, about sample_keep of a record's elements are sent */
    char **ew_apis, **ew_opts;
    size_t n_ew_apis, n_ew_opts;
    uint64_t sample_min, sample_keep;
    int joined;   /* cmp_worker_prestart's session, its ready line not read yet */
    int released; /* cmp_worker_release ended the session; stop waits for its end */
    int busy;     /* a job sent, its answer not read: ending it hangs up (the session
                          then kills the job's child) */
} cmp_worker_t;

/* The Python to run replay.py: opt when set, else $MSPROBE_PYTHON, else the
 * build's default (MSP_DEFAULT_PYTHON). */
const char *cmp_worker_python(const char *opt);
/* Start the worker and wait for its "ready" line (deadline 0: none); NULL,
 * or why not (malloc'd; the worker is then stopped). Unless
 * MSPROBE_REPLAY_KEEP is 0, this is a session of a kept worker: one that a
 * compare before this one left, or one started here that stays that many
 * seconds after its last session (cmp_worker_keep.c). */
char *cmp_worker_start(cmp_worker_t *w, const char *python, double deadline);
/* A session of the kept worker for python, asked for ahead of need: the
 * worker forks it (and its job child) while the compare computes metrics,
 * and cmp_worker_start then only reads its ready line. w is zeroed (fds -1)
 * and left so when no kept worker answers; a worker is never started here. */
void cmp_worker_prestart(cmp_worker_t *w, const char *python);
/* Whether the worker may call the API of record name ("Functional.gelu.0.forward"):
 * 1, or 0 with *why (static) when its ready line's list says it may not, so
 * that the record's tensors are never sent. Records of a prefix the list
 * never names (Optimizer, Custom) are the worker's to decide: 1. */
int cmp_worker_may_call(const cmp_worker_t *w, const char *name, const char **why);
/* Ask it to leave (0.5 s), then kill its process group; reap; remove its
 * directory; close; w is zeroed with fds -1. A kept worker's session is
 * ended and the worker left for the next compare. */
void cmp_worker_stop(cmp_worker_t *w);
/* The session's end without waiting for it: a kept worker's session is
 * told to end (it cleans up while the compare writes its reports; a later
 * cmp_worker_stop waits for that); a worker of this compare's own is
 * stopped. */
void cmp_worker_release(cmp_worker_t *w);
/* Whether the worker's sampling policy (its ready line's "sample") names
 * api ("gelu") as elementwise, or optimizer class cls ("AdamW"). */
int cmp_worker_elementwise(const cmp_worker_t *w, const char *api);
int cmp_worker_elementwise_optimizer(const cmp_worker_t *w, const char *cls);
/* Send n bytes by the deadline: 0, -1 (worker gone), -2 (time up). */
int cmp_worker_send(cmp_worker_t *w, const void *p, size_t n, double deadline);
/* One answer line (NUL-terminated, without its newline) in w->line:
 * 0, -1 (worker gone), -2 (time up). */
int cmp_worker_recv_line(cmp_worker_t *w, double deadline);
/* Drop the line just read from the buffer. */
void cmp_worker_consume_line(cmp_worker_t *w);
/* The last bytes the worker wrote to stderr, one line, for a message. */
void cmp_worker_err_tail(const cmp_worker_t *w, char *buf, size_t n);

#endif
