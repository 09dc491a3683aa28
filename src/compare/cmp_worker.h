/* The replay worker (replay.py in a Python with torch) and its transport,
 * private to src/compare: compare's replay (cmp_replay.c) and acc_check
 * (pc_acc.c) both start workers, send them jobs and read their answers
 * through these.
 *
 * A job is a frame: [u32 little-endian length][JSON header], then the raw
 * bytes of each tensor the header lists; a length of 0 ends the session. The
 * worker answers one JSON line per job (replay.py's docstring has the
 * fields). */
#ifndef MSPROBE_CMP_WORKER_H
#define MSPROBE_CMP_WORKER_H

#include "cmp_internal.h"

#include "msprobe/proc.h" /* every deadline below is msp_monotonic() seconds */

#include <cjson/cJSON.h>
#include <sys/types.h>

typedef struct cmp_worker {
    pid_t pid;         /* it leads its own process group (its jobs' children are in it) */
    char *dir;         /* its private working directory, the only place it may write */
    int fd;            /* our end of the socket: jobs out, answers in */
    int err_fd;        /* its stderr (an unlinked temp file) */
    char *line;        /* answer buffer */
    size_t len, cap;
    int kept;          /* 1: a session of a kept worker (cmp_worker_keep.c): stopping ends
                          the session, the worker stays for the next compare */
    long server;       /* the kept worker's pid, and this compare's session number in it */
    long session;
    char **apis;       /* the record APIs it may call ("Functional.gelu"), sorted, from its
                          ready line; NULL when it sent none (then resolve() alone decides) */
    size_t n_apis;
    /* replay on a sample (its ready line's "sample"; cmp_worker_every): the
     * elementwise APIs ("gelu") and optimizer classes ("AdamW"), sorted; past
     * sample_min elements, about sample_keep of a record's elements are sent */
    char **ew_apis, **ew_opts;
    size_t n_ew_apis, n_ew_opts;
    uint64_t sample_min, sample_keep;
    int joined;        /* cmp_worker_prestart's session, its ready line not read yet */
    int released;      /* cmp_worker_release ended the session; stop waits for its end */
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
/* Memory a job may take beyond what the worker maps, before 16 bytes for
 * each byte of its tensors (replay.py's job_limits sets it as RLIMIT_AS). */
#define CMP_JOB_MEM_BASE ((uint64_t)1 << 30)
/* A job's limits into its header: "limit_s", the wall time it may run (the
 * sooner of per_record seconds and the deadline; none when both are <= 0),
 * and "mem", the bytes it may map for tensors of `bytes` bytes. */
void cmp_job_limits(cJSON *job, uint64_t bytes, double deadline, double per_record);
/* Send n bytes by the deadline: 0, -1 (worker gone), -2 (time up). */
int cmp_worker_send(cmp_worker_t *w, const void *p, size_t n, double deadline);
/* One answer line (NUL-terminated, without its newline) in w->line:
 * 0, -1 (worker gone), -2 (time up). */
int cmp_worker_recv_line(cmp_worker_t *w, double deadline);
/* Drop the line just read from the buffer. */
void cmp_worker_consume_line(cmp_worker_t *w);
/* The last bytes the worker wrote to stderr, one line, for a message. */
void cmp_worker_err_tail(const cmp_worker_t *w, char *buf, size_t n);

/* The kept worker (cmp_worker_keep.c). cmp_keep_seconds: how long a
 * worker stays after its last session (MSPROBE_REPLAY_KEEP, default 60; 0:
 * none is kept). cmp_keep_place: the socket of the worker for this Python,
 * source, sandbox settings cfg and environment, and in *dir its working
 * directory (both malloc'd), or NULL (logged when say) when none can be kept.
 * cmp_keep_connect: a connection to it, or -1 with errno. cmp_keep_listen:
 * the socket bound and listening, as a descriptor above 3, or -1 with errno
 * (EADDRINUSE: a live worker holds it). cmp_keep_hello: a session's first
 * message, which hands the worker err_fd for the session's stderr. */
double cmp_keep_seconds(void);
char *cmp_keep_place(const char *python, const char *src, const char *cfg, char **dir, int say);
int cmp_keep_connect(const char *path);
int cmp_keep_listen(const char *path);
int cmp_keep_hello(int fd, int err_fd);

/* A file's records sorted by name (n_records + 1 slots), for cmp_name_find;
 * NULL on out of memory. */
const msp_record_info_t **cmp_name_index(const msp_dump_file_t *f);
const msp_record_info_t *cmp_name_find(const msp_dump_file_t *f, const msp_record_info_t **idx,
                                       const char *name);

/* The job a record of an API makes: "optimizer" (Optimizer.*), "forward",
 * "backward"; NULL with *why (static) for a name that is none of them. */
const char *cmp_job_kind(const char *name, const char **why);

/* One tensor a job sends: which record and which tensor of it. */
typedef struct cmp_job_tensor {
    const msp_record_info_t *rec;
    const msp_tensor_info_t *t;
    uint64_t every; /* > 1: only every k-th element (flattened) is sent */
} cmp_job_tensor_t;

/* A record's attributes into args (those not there yet), except the call's
 * context (autocast, alias.*), which goes to ctx (may be NULL: dropped).
 * 0, or -1 when they cannot be read. */
int cmp_job_add_attrs(cJSON *args, cJSON *ctx, msp_dump_file_t *f, const msp_record_info_t *r);
/* List rec's tensors (which: CMP_JOB_ALL, CMP_JOB_INPUTS, CMP_JOB_OUTPUTS)
 * in the header array arr, tagged tag, and in *v; NULL, or why the record
 * cannot be sent (static). */
enum { CMP_JOB_ALL = 0, CMP_JOB_INPUTS = 1, CMP_JOB_OUTPUTS = 2 };
const char *cmp_job_add_tensors(cJSON *arr, cmp_job_tensor_t **v, size_t *n, size_t *cap,
                                const msp_record_info_t *rec, const char *tag, int which,
                                uint64_t *bytes);
/* Replay on a sample (msprobe-compare(1), REPLAY): for a job of kind
 * (forward, backward, optimizer) of record name (the forward's, for a
 * backward), optimizer class cls (NULL for a call) and the tensors in v,
 * the k such that sending every k-th element of each is the same job on
 * fewer elements; 1 when it is not. An elementwise API's tensors must all
 * have one shape; an elementwise optimizer's parameters, gradients and
 * states are sampled alike, each by its parameter's number of elements
 * (scalars are sent whole). cmp_job_sample: each tensor's every, and its
 * shape and nbytes in the header array arr (parallel to v), and *bytes,
 * set for k. */
uint64_t cmp_worker_every(const cmp_worker_t *w, const char *kind, const char *name,
                          const char *cls, const cmp_job_tensor_t *v, size_t n);
void cmp_job_sample(uint64_t k, const char *kind, cmp_job_tensor_t *v, size_t n, cJSON *arr,
                    uint64_t *bytes);
/* ||c - b|| / ||b|| over every k-th element of tensor ct of crec in cf and
 * bt of brec in bf (flattened; any float dtypes), streamed; NaN when it
 * cannot be computed (not floats, sizes differ, statistics only). */
double cmp_sampled_err(msp_dump_file_t *cf, const msp_record_info_t *crec,
                       const msp_tensor_info_t *ct, msp_dump_file_t *bf,
                       const msp_record_info_t *brec, const msp_tensor_info_t *bt, uint64_t k);
/* Stream one tensor's bytes (its every-th elements) to the worker: 0, -1
 * gone, -2 time up, -3 read error. */
int cmp_worker_send_tensor(cmp_worker_t *w, msp_dump_file_t *f, const cmp_job_tensor_t *x,
                           void *buf, size_t bufsz, double deadline);

#endif
