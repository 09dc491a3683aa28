/* Contained reading (msprobe-dump(5) "Reading untrusted files"): libhdf5
 * parses a file's metadata in a short-lived helper process,
 * msprobe-catalogue, started with posix_spawn (never a bare fork: the
 * caller may have threads, and a forked child of a threaded process may
 * only call async-signal-safe functions). The helper loads and verifies the
 * catalogue with the in-process reader and sends it back over a pipe in the
 * wire form below; a crash, a hang or a memory bomb in libhdf5 kills the
 * helper, not the caller, and becomes an error naming the file. Tensor
 * bytes at a verified offset are then read here with pread; the rare tensor
 * without one (chunked, compressed, converted) is read by the helper too.
 *
 * Catalogues come from a few long-lived `msprobe-catalogue --serve`
 * processes (one per thread asking at the same time, at most
 * MSP_SERVERS), each of which forks a child per file: the child is the
 * per-file helper, crash for crash, but starts in a fraction of a
 * millisecond instead of the several a fresh program (loader, libhdf5's
 * initialisation) takes. MSPROBE_READER_SERVER=0 spawns a helper per file.
 *
 * The wire form is written by the helper (fmt_contain_put.c, which reads the
 * file with the in-process reader) and read by fmt_contain_get.c.
 *
 * The contained backend (msp_reader_contained, fmt_backend.h) at the end of
 * this file is what msp_dump_open uses for every HDF5 dump: its catalogue
 * and record attributes come whole from the helper; tensor bytes at an
 * offset are read here, the others streamed by the helper. */
#include "fmt_backend.h"
#include "fmt_internal.h"

#include "msprobe/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A catalogue is a few hundred bytes a tensor; a file holds at least one
 * /index row (about 100 bytes) a tensor, so this bound is never reached by a
 * real file and stops a helper that was tricked into producing garbage. */
#define MSP_WIRE_MIN_CAP ((size_t)16 << 20)
#define MSP_WIRE_PER_FILE_BYTE 8

/* ---- the helper process -------------------------------------------------------- */

/* Starts the helper with argv (argv[0] is set here), in as its stdin
 * (MSP_CHILD_DEVNULL or a descriptor) and out as its stdout; its stderr is
 * /dev/null, and nothing else of ours is open in it (msp_child_start):
 * libhdf5 opens files without O_CLOEXEC, and a helper holding another
 * thread's dump file would hold its lock too. */
static msp_err msp_helper_spawn_fds(const char *path, char *argv[], int in, int out, pid_t *pid)
{
    char *helper = msp_helper_path();
    if (!helper)
        return msp_fail(MSP_ERR_INTERNAL,
                        "file %s: cannot find msprobe-catalogue, the helper "
                        "that parses dump files out of harm's way (install it next to msprobe "
                        "or set MSPROBE_CATALOGUE_HELPER)",
                        path);
    argv[0] = helper;
    char *tunables;
    char **env = msp_helper_env(&tunables);
    msp_child_t c = {.argv = argv, .in = in, .out = out, .err = MSP_CHILD_DEVNULL, .envp = env};
    int e = msp_child_start(&c);
    free(env);
    free(tunables);
    if (e != 0) {
        msp_err rc = msp_fail(MSP_ERR_IO, "file %s: cannot start the reader helper %s: %s", path,
                              helper, strerror(e));
        free(helper);
        return rc;
    }
    free(helper);
    *pid = c.pid;
    return MSP_OK;
}

/* Starts the helper with argv, its stdout on *rfd. */
static msp_err msp_helper_spawn(const char *path, char *argv[], pid_t *pid, int *rfd)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return msp_fail(MSP_ERR_IO, "file %s: cannot start the reader helper: %s", path,
                        strerror(errno));
    msp_err rc = msp_helper_spawn_fds(path, argv, MSP_CHILD_DEVNULL, fds[1], pid);
    close(fds[1]);
    if (rc) {
        close(fds[0]);
        return rc;
    }
    *rfd = fds[0];
    return MSP_OK;
}

/* A signal a parse does not raise itself (a fault, an abort, SIGXCPU at its
 * limit of work) but someone sends: the OOM killer's SIGKILL, a hangup, an interrupt. */
static int msp_signal_from_outside(int sig)
{
    return sig == SIGKILL || sig == SIGHUP || sig == SIGTERM || sig == SIGINT || sig == SIGQUIT ||
           sig == SIGPIPE || sig == SIGUSR1 || sig == SIGUSR2 || sig == SIGALRM;
}

/* What the helper's end says: its signal, an MSPE answer in buf (exit 2),
 * or another failing status; MSP_OK for a clean exit. *outside is set when
 * the end says nothing about the file (a signal sent from outside). work:
 * its limit of work, which SIGXCPU says it reached. */
static msp_err msp_helper_status(const char *path, int st, const unsigned char *buf, size_t n,
                                 double work, int *outside)
{
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGXCPU)
        return msp_helper_work_error(path, work);
    if (WIFSIGNALED(st) && msp_signal_from_outside(WTERMSIG(st))) {
        *outside = 1;
        return msp_fail(MSP_ERR_IO,
                        "file %s: the reader helper was killed by signal %d (%s) "
                        "from outside while parsing it",
                        path, WTERMSIG(st), strsignal(WTERMSIG(st)));
    }
    if (WIFSIGNALED(st))
        return msp_fail(MSP_ERR_FORMAT,
                        "file %s: corrupt or not a dump (libhdf5 was killed by "
                        "signal %d, %s, parsing it)",
                        path, WTERMSIG(st), strsignal(WTERMSIG(st)));
    if (WIFEXITED(st) && WEXITSTATUS(st) == 2 && n >= 4 && memcmp(buf, "MSPE", 4) == 0) {
        int64_t code;
        char *detail;
        int bad = msp_wire_get_error(buf + 4, n - 4, &code, &detail);
        if (bad || code <= 0 || code > MSP_ERR_INTERNAL)
            code = MSP_ERR_FORMAT;
        msp_err rc = msp_fail((msp_err)code, "%s", detail ? detail : "the reader helper failed");
        free(detail);
        return rc;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return msp_fail(MSP_ERR_FORMAT,
                        "file %s: corrupt or not a dump (the reader helper "
                        "exited with status %d%s)",
                        path, WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                        WIFEXITED(st) && WEXITSTATUS(st) == 127 ? ": it could not run" : "");
    return MSP_OK;
}

/* What a helper's end means for the caller: kind as msp_collect (or the
 * server) reports it, status its wait status (MSP_CHILD_FAILED: an errno);
 * *outside as msp_helper_status sets it, and for a helper that could not be
 * started (the file is then tried once more); timeout its limit of work, whose
 * wall-clock backstop MSP_CHILD_TIMEOUT says it reached. */
static msp_err msp_serve_outcome(const char *path, int kind, int status, const unsigned char *buf,
                                 size_t n, size_t cap, double timeout, int *outside)
{
    switch (kind) {
    case MSP_CHILD_ENDED:
        return msp_helper_status(path, status, buf, n, timeout, outside);
    case MSP_CHILD_TIMEOUT:
        return msp_helper_wall_error(path, timeout);
    case MSP_CHILD_STOPPED:
        *outside = 1;
        return msp_fail(MSP_ERR_IO,
                        "file %s: the reader helper was stopped (SIGSTOP or a "
                        "debugger) for the whole %.0f s it had to parse it",
                        path, msp_helper_wall(timeout));
    case MSP_CHILD_TOO_BIG:
        return msp_fail(MSP_ERR_FORMAT,
                        "file %s: corrupt or not a dump (its catalogue exceeds "
                        "%zu bytes)",
                        path, cap);
    case MSP_CHILD_NOMEM:
        return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory reading the catalogue", path);
    default: /* no helper started (no process, descriptor or memfd): not the file's doing */
        *outside = 1;
        return msp_fail(MSP_ERR_IO, "file %s: cannot start the reader helper: %s", path,
                        strerror(status));
    }
}

/* Runs the helper with argv, collecting at most cap bytes of its answer
 * into *out: it limits its own work to timeout seconds (it computes the same
 * limit); here the wall clock waits for it up to the backstop. */
static msp_err msp_helper_run(const char *path, char *argv[], size_t cap, double timeout,
                              unsigned char **out, size_t *out_n, int *outside)
{
    *out = NULL;
    *out_n = 0;
    pid_t pid;
    int rfd;
    msp_err src = msp_helper_spawn(path, argv, &pid, &rfd);
    if (src)
        return src;
    unsigned char *buf;
    size_t n;
    int kind = msp_fd_collect(rfd, -1, cap, msp_monotonic() + msp_helper_wall(timeout), &buf, &n);
    close(rfd);
    int st = msp_child_end(pid, &kind);
    msp_err rc = msp_serve_outcome(path, kind, st, buf, n, cap, timeout, outside);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    *out_n = n;
    return MSP_OK;
}

/* ---- the catalogue servers --------------------------------------------------- */

#define MSP_SERVERS 4
struct msp_server {
    pid_t pid; /* 0: not running */
    int fd;    /* our end of its socket */
    int busy;  /* a thread is talking to it */
};
static pthread_mutex_t msp_srv_mu = PTHREAD_MUTEX_INITIALIZER;
static struct msp_server msp_srv[MSP_SERVERS];
static pid_t msp_srv_owner; /* the process that started them (a fork's child must not share) */

static int msp_server_wanted(void)
{
    const char *e = getenv("MSPROBE_READER_SERVER");
    return !(e && strcmp(e, "0") == 0);
}

/* A server slot for this thread, started if need be; NULL when all are busy
 * or none can start (the caller then spawns a helper for the file). */
static struct msp_server *msp_server_take(const char *path)
{
    pthread_mutex_lock(&msp_srv_mu);
    if (msp_srv_owner != getpid()) { /* inherited through fork: the parent's, not ours */
        for (int i = 0; i < MSP_SERVERS; i++) {
            if (msp_srv[i].pid > 0)
                close(msp_srv[i].fd);
            msp_srv[i] = (struct msp_server){0, -1, 0};
        }
        msp_srv_owner = getpid();
    }
    struct msp_server *s = NULL; /* busy read first: a busy slot's pid is its taker's */
    for (int i = 0; i < MSP_SERVERS && !s; i++)
        if (!msp_srv[i].busy && msp_srv[i].pid > 0)
            s = &msp_srv[i];
    for (int i = 0; i < MSP_SERVERS && !s; i++)
        if (!msp_srv[i].busy && msp_srv[i].pid <= 0)
            s = &msp_srv[i];
    if (s)
        s->busy = 1;
    pthread_mutex_unlock(&msp_srv_mu);
    if (!s || s->pid > 0)
        return s;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        goto fail;
    char *argv[] = {NULL, "--serve", NULL};
    if (msp_helper_spawn_fds(path, argv, sv[1], sv[1], &s->pid) != MSP_OK) {
        close(sv[0]);
        close(sv[1]);
        goto fail;
    }
    close(sv[1]);
    s->fd = sv[0];
    return s;
fail:
    pthread_mutex_lock(&msp_srv_mu);
    s->pid = 0;
    s->busy = 0;
    pthread_mutex_unlock(&msp_srv_mu);
    return NULL;
}

/* A server that misbehaved (or that we stopped waiting for) is killed; the
 * next request starts another. */
static void msp_server_give(struct msp_server *s, int kill_it)
{
    if (kill_it && s->pid > 0) {
        close(s->fd);
        kill(s->pid, SIGKILL);
        (void)msp_child_wait(s->pid);
        s->pid = 0;
        s->fd = -1;
    }
    pthread_mutex_lock(&msp_srv_mu);
    s->busy = 0;
    pthread_mutex_unlock(&msp_srv_mu);
}

/* The catalogue of path through a server: 1 when no server could take it
 * (the caller spawns a helper), else 0 with *rc the outcome as
 * msp_helper_run reports it; a server that died, stopped or answered out of
 * turn sets *outside (its answer says nothing about the file). */
static int msp_server_run(const char *path, size_t cap, double timeout, unsigned char **out,
                          size_t *out_n, msp_err *rc, int *outside)
{
    size_t len = strlen(path);
    if (len == 0 || len >= 65536)
        return 1;
    struct msp_server *s = msp_server_take(path);
    if (!s)
        return 1;
    unsigned char hd[24] = "MSPQ";
    uint64_t cap64 = cap;
    uint32_t len32 = (uint32_t)len;
    memcpy(hd + 4, &cap64, 8);
    memcpy(hd + 12, &timeout, 8);
    memcpy(hd + 20, &len32, 4);
    if (msp_fd_exact(s->fd, hd, sizeof hd, 1, 0) || msp_fd_exact(s->fd, (char *)path, len, 1, 0)) {
        msp_server_give(s, 1); /* it died idle: a fresh one can still do this file */
        return 1;
    }
    /* the child limits its work to timeout and the server kills it at the
     * backstop; this margin is for the server */
    double wall = msp_helper_wall(timeout) + 5.0;
    double deadline = msp_monotonic() + wall;
    unsigned char rp[20];
    int e = msp_fd_exact(s->fd, rp, sizeof rp, 0, deadline);
    uint32_t kind = 0;
    int32_t status = 0;
    uint64_t n = 0;
    if (!e) {
        memcpy(&kind, rp + 4, 4);
        memcpy(&status, rp + 8, 4);
        memcpy(&n, rp + 12, 8);
        if (memcmp(rp, "MSPR", 4) != 0 || kind > MSP_CHILD_STOPPED || n > cap)
            e = -1;
    }
    unsigned char *buf = NULL;
    if (!e && n) {
        buf = malloc((size_t)n);
        e = buf ? msp_fd_exact(s->fd, buf, (size_t)n, 0, deadline) : -3;
    }
    msp_server_give(s, e != 0);
    if (e == -3)
        *rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory reading the catalogue", path);
    else if (e == -2) {
        *outside = 1;
        *rc = msp_fail(MSP_ERR_IO,
                       "file %s: the reader helper's server did not answer within "
                       "%.0f s (stopped, or starved of CPU)",
                       path, wall);
    } else if (e) {
        *outside = 1;
        *rc = msp_fail(MSP_ERR_IO,
                       "file %s: the reader helper's server failed (it ended "
                       "or answered out of turn)",
                       path);
    } else {
        *rc = msp_serve_outcome(path, (int)kind, status, buf, (size_t)n, cap, timeout, outside);
    }
    if (*rc) {
        free(buf);
        return 0;
    }
    *out = buf;
    *out_n = (size_t)n;
    return 0;
}

/* The last error without its leading "file PATH: " (it is said once). */
static void msp_detail_of(const char *path, char *buf, size_t size)
{
    const char *e = msp_last_error();
    size_t pl = strlen(path);
    if (strncmp(e, "file ", 5) == 0 && strncmp(e + 5, path, pl) == 0 && e[5 + pl] == ':' &&
        e[6 + pl] == ' ')
        e += 7 + pl;
    snprintf(buf, size, "%s", e);
}

/* The caller's side: fill f (path set, open on fd) from the helper's
 * catalogue of it, or the one it sent for the same unchanged file before;
 * attrs receives record i's attributes at [i], defs the /defaults rows. */
static msp_err msp_contained_open(msp_dump_file_t *f, int fd, int64_t file_size,
                                  struct msp_rattrs **attrs, struct msp_attr_row **defs,
                                  size_t *n_defs)
{
    size_t cap = MSP_WIRE_MIN_CAP;
    if (file_size > 0 && (uint64_t)file_size < (SIZE_MAX - cap) / MSP_WIRE_PER_FILE_BYTE)
        cap += (size_t)file_size * MSP_WIRE_PER_FILE_BYTE;
    char *argv[] = {NULL, "--", f->path, NULL};
    unsigned char *buf = NULL;
    size_t n = 0;
    msp_err rc = MSP_OK;
    if (msp_cat_cache_get(fd, &buf, &n)) {
        rc = msp_wire_get_file(buf, n, f, attrs, defs, n_defs);
        free(buf);
        return rc;
    }
    double timeout = msp_helper_timeout(file_size);
    int outside = 0;
    if (!msp_server_wanted() || msp_server_run(f->path, cap, timeout, &buf, &n, &rc, &outside))
        rc = msp_helper_run(f->path, argv, cap, timeout, &buf, &n, &outside);
    if (rc && outside) {
        /* Killed, stopped or hung up from outside (the OOM killer, a closed
         * terminal): that says nothing of the file. Once more, on a helper
         * of its own; a second such end is an error that says so, never a
         * verdict on the file. */
        char first[1024], second[1024];
        msp_detail_of(f->path, first, sizeof first);
        outside = 0;
        rc = msp_helper_run(f->path, argv, cap, timeout, &buf, &n, &outside);
        if (rc && outside) {
            msp_detail_of(f->path, second, sizeof second);
            rc = msp_fail(MSP_ERR_IO,
                          "file %s: not read: its reader helper failed twice for "
                          "reasons outside the file (%s; then, on a fresh helper: %s)",
                          f->path, first, second);
        }
    }
    if (rc)
        return rc;
    rc = msp_wire_get_file(buf, n, f, attrs, defs, n_defs);
    if (!rc) /* an answer that parses: a catalogue, not an error */
        msp_cat_cache_put(fd, buf, n);
    else
        free(buf);
    return rc;
}

/* ---- tensors streamed by the helper ------------------------------------------- */

/* msprobe-catalogue --read answers with frames: 'D', a 4-byte length and
 * that many data bytes, as it reads the dataset block by block; or 'X', a
 * length and an MSPE error answer (then exit 2). */
struct msp_helper_stream {
    char path[PATH_MAX];
    double timeout;
    pid_t pid;
    int fd;
    uint32_t frame_left;
    uint64_t left; /* data bytes still due */
};

/* Exactly n bytes from the helper, each wait bounded by the wall-clock
 * backstop of its limit of work (a stall, not the whole tensor: a big one
 * may take long; the helper itself ends at its limit of work). 1 on EOF. */
static int msp_hs_get(struct msp_helper_stream *h, void *dst, size_t n, msp_err *rc)
{
    unsigned char *p = dst;
    while (n) {
        struct pollfd pf = {h->fd, POLLIN, 0};
        int pr = poll(&pf, 1, msp_poll_ms(msp_helper_wall(h->timeout)));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr == 0) {
            *rc = msp_helper_wall_error(h->path, h->timeout);
            return -1;
        }
        ssize_t k = read(h->fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return 1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The helper stopped short: its status says why. */
static msp_err msp_hs_ended(struct msp_helper_stream *h, const unsigned char *ans, size_t n)
{
    close(h->fd);
    h->fd = -1;
    int st = msp_child_wait(h->pid);
    h->pid = -1;
    int outside = 0;
    msp_err rc = msp_helper_status(h->path, st, ans, n, h->timeout, &outside);
    if (!rc)
        rc = msp_fail(MSP_ERR_FORMAT,
                      "file %s: the reader helper ended %llu bytes before the "
                      "tensor's end",
                      h->path, (unsigned long long)h->left);
    return rc;
}

/* A tensor without a plain offset, sent by the helper (msprobe-catalogue
 * --read) in frames as it reads it block by block; read exactly n bytes at a
 * time, in order. Close kills a helper not yet done. */
static msp_err msp_contained_stream_open(msp_dump_file_t *f, int64_t file_size,
                                         const msp_record_info_t *r, const msp_tensor_info_t *t,
                                         struct msp_helper_stream **out)
{
    struct msp_helper_stream *h = calloc(1, sizeof *h);
    if (!h)
        return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
    snprintf(h->path, sizeof h->path, "%s", f->path);
    h->timeout = msp_helper_read_work(file_size);
    h->left = t->nbytes > 0 ? (uint64_t)t->nbytes : 0;
    char *argv[] = {NULL, "--read", f->path, r->name, t->role, NULL};
    msp_err rc = msp_helper_spawn(f->path, argv, &h->pid, &h->fd);
    if (rc) {
        free(h);
        return rc;
    }
    *out = h;
    return MSP_OK;
}

static msp_err msp_contained_stream_read(struct msp_helper_stream *h, void *buf, size_t n)
{
    unsigned char *p = buf;
    msp_err rc = MSP_OK;
    if (h->fd < 0)
        return msp_fail(MSP_ERR_FORMAT, "file %s: the reader helper has ended", h->path);
    while (n) {
        if (!h->frame_left) {
            unsigned char hd[5];
            int e = msp_hs_get(h, hd, sizeof hd, &rc);
            if (e < 0)
                return rc;
            if (e > 0)
                return msp_hs_ended(h, NULL, 0);
            uint32_t len = (uint32_t)hd[1] | (uint32_t)hd[2] << 8 | (uint32_t)hd[3] << 16 |
                           (uint32_t)hd[4] << 24;
            if (hd[0] == 'X' && len <= 64 * 1024) {
                unsigned char ans[64 * 1024];
                e = msp_hs_get(h, ans, len, &rc);
                if (e < 0)
                    return rc;
                return msp_hs_ended(h, e ? NULL : ans, e ? 0 : len);
            }
            if (hd[0] != 'D' || !len || len > h->left)
                return msp_fail(MSP_ERR_FORMAT,
                                "file %s: the reader helper sent a malformed "
                                "frame (%u bytes, %llu due)",
                                h->path, (unsigned)len, (unsigned long long)h->left);
            h->frame_left = len;
        }
        size_t k = h->frame_left < n ? h->frame_left : n;
        int e = msp_hs_get(h, p, k, &rc);
        if (e < 0)
            return rc;
        if (e > 0)
            return msp_hs_ended(h, NULL, 0);
        p += k;
        n -= k;
        h->frame_left -= (uint32_t)k;
        h->left -= k;
    }
    return MSP_OK;
}

static void msp_contained_stream_close(struct msp_helper_stream *h)
{
    if (!h)
        return;
    if (h->fd >= 0)
        close(h->fd);
    if (h->pid > 0) {
        if (h->left)
            kill(h->pid, SIGKILL); /* not read to the end: nothing more is wanted */
        (void)msp_child_wait(h->pid);
    }
    free(h);
}

/* ---- the contained backend ---------------------------------------------------- */

struct msp_ct_impl {
    struct msp_dump_base base; /* first: the table */
    int fd;                    /* -1 for a catalogue from the wire alone */
    int64_t file_size;
    struct msp_rattrs *attrs;  /* record i's attributes at [i], as the helper sent them */
    struct msp_attr_row *defs; /* /defaults, sorted by record then key, as sent */
    size_t n_defs;
};

static void msp_ct_close(msp_dump_file_t *f)
{
    struct msp_ct_impl *im = f->impl;
    /* No libhdf5 call here, but the lock as the in-process backend's close
     * takes it: closing a file does the same in either mode (the first lock
     * in a thread also turns libhdf5's error printing off). */
    msp_h5_lock();
    if (im) {
        if (im->fd >= 0)
            close(im->fd);
        for (size_t i = 0; im->attrs && i < f->n_records; i++) {
            msp_free_strings(im->attrs[i].k, im->attrs[i].n);
            msp_free_strings(im->attrs[i].v, im->attrs[i].n);
        }
        free(im->attrs);
        msp_rows_free(im->defs, im->n_defs);
        free(im);
    }
    msp_dump_free(f);
    msp_h5_unlock();
}

/* An empty file object for path: no descriptor yet. */
static msp_err msp_ct_alloc(const char *path, msp_dump_file_t **out)
{
    msp_err rc = msp_dump_alloc(path, &msp_reader_contained, sizeof(struct msp_ct_impl), out);
    if (!rc)
        ((struct msp_ct_impl *)(*out)->impl)->fd = -1;
    return rc;
}

static msp_err msp_ct_open(const char *path, msp_dump_file_t **out)
{
    struct stat sb;
    msp_dump_file_t *f;
    *out = NULL;
    msp_err rc = msp_dump_stat(path, &sb);
    if (rc || (rc = msp_dump_check_regular(path, &sb)) || (rc = msp_ct_alloc(path, &f)))
        return rc;
    struct msp_ct_impl *im = f->impl;
    im->file_size = (int64_t)sb.st_size;
    if (!(rc = msp_dump_open_fd(path, &im->fd)))
        rc = msp_contained_open(f, im->fd, im->file_size, &im->attrs, &im->defs, &im->n_defs);
    if (rc) {
        msp_ct_close(f);
        return rc;
    }
    *out = f;
    return MSP_OK;
}

msp_err msp_dump_from_wire(const char *path, const unsigned char *buf, size_t n,
                           msp_dump_file_t **out)
{
    msp_dump_file_t *f;
    msp_err rc = msp_ct_alloc(path, &f);
    if (rc)
        return rc;
    struct msp_ct_impl *im = f->impl;
    rc = msp_wire_get_file(buf, n, f, &im->attrs, &im->defs, &im->n_defs);
    if (rc) {
        msp_ct_close(f);
        return rc;
    }
    *out = f;
    return MSP_OK;
}

static msp_err msp_attrs_copy(const struct msp_rattrs *a, char ***keys, char ***values, size_t *n,
                              const char *where)
{
    char **ks = calloc(a->n ? a->n : 1, sizeof *ks), **vs = calloc(a->n ? a->n : 1, sizeof *vs);
    int ok = ks && vs;
    for (size_t i = 0; ok && i < a->n; i++)
        ok = (ks[i] = strdup(a->k[i] ? a->k[i] : "")) && (vs[i] = strdup(a->v[i] ? a->v[i] : ""));
    if (!ok) {
        msp_free_strings(ks, ks ? a->n : 0);
        msp_free_strings(vs, vs ? a->n : 0);
        return msp_fail(MSP_ERR_NOMEM, "%s: out of memory", where);
    }
    *keys = ks;
    *values = vs;
    *n = a->n;
    return MSP_OK;
}

/* The helper sent them with the catalogue. */
static msp_err msp_ct_record_attrs(msp_dump_file_t *f, const msp_record_info_t *r, char ***keys,
                                   char ***values, size_t *n)
{
    struct msp_ct_impl *im = f->impl;
    /* named on failure only: a third of this function before (issue 42) */
    msp_err rc = msp_attrs_copy(&im->attrs[r - f->records], keys, values, n, "");
    return rc ? msp_fail(rc, "file %s: record %s: out of memory", f->path, r->name) : MSP_OK;
}

static msp_err msp_ct_api_defaults(msp_dump_file_t *f, const struct msp_attr_row **rows, size_t *n)
{
    struct msp_ct_impl *im = f->impl;
    *rows = im->defs;
    *n = im->n_defs;
    return MSP_OK;
}

static msp_err msp_stream_helper_read(msp_tensor_stream_t *s, void *buf, size_t n)
{
    return msp_contained_stream_read(s->state, buf, n);
}

static void msp_stream_helper_close(msp_tensor_stream_t *s)
{
    msp_contained_stream_close(s->state);
}

static const msp_stream_ops_t msp_stream_helper = {msp_stream_helper_read, msp_stream_helper_close,
                                                   NULL};

static msp_err msp_ct_stream_open(msp_dump_file_t *f, const msp_record_info_t *r,
                                  const msp_tensor_info_t *t, msp_tensor_stream_t *s)
{
    struct msp_ct_impl *im = f->impl;
    if (t->offset >= 0) {
        msp_stream_pread(s, im->fd, t->offset);
        return MSP_OK;
    }
    struct msp_helper_stream *h = NULL;
    s->ops = &msp_stream_helper;
    msp_err rc = msp_contained_stream_open(f, im->file_size, r, t, &h);
    s->state = h;
    return rc;
}

static msp_err msp_ct_read_tensor(msp_dump_file_t *f, const msp_record_info_t *r,
                                  const msp_tensor_info_t *t, void *buf, size_t buf_size)
{
    struct msp_ct_impl *im = f->impl;
    return msp_read_tensor_fd(f, im->fd, r, t, buf, buf_size, msp_ct_stream_open);
}

/* Takes every path no backend before it took. */
static int msp_ct_probe(const char *path, char **file)
{
    (void)path;
    *file = NULL;
    return 1;
}

const msp_reader_ops_t msp_reader_contained = {
    .name = "hdf5-contained",
    .probe = msp_ct_probe,
    .open = msp_ct_open,
    .read_tensor = msp_ct_read_tensor,
    .stream_open = msp_ct_stream_open,
    .record_attrs = msp_ct_record_attrs,
    .api_defaults = msp_ct_api_defaults,
    .close = msp_ct_close,
};
