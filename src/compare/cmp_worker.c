/* The replay worker and its transport (cmp_worker.h): the process, the
 * socket it is fed through (not a pipe: a worker that dies mid-job must give
 * an error here, not a SIGPIPE), and the pieces of a job every caller sends
 * the same way (a record's attributes and tensors). */
#include "cmp_worker.h"
#include "cmp_worker_keep.h"

#include "msprobe/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern const char msp_replay_py[];
extern const char msp_replay_acc_py[];
extern const char msp_replay_apis_py[];
extern const char msp_replay_args_py[];
extern const char msp_replay_bound_py[];
extern const char msp_replay_backward_py[];
extern const char msp_replay_worker_py[];

/* The worker's rlimits on files (its stderr is a file) and descriptors. */
#define CMP_WORKER_FSIZE ((long long)64 << 20)
#define CMP_WORKER_NOFILE 256

#ifndef MSP_DEFAULT_PYTHON
#define MSP_DEFAULT_PYTHON "python3"
#endif

const char *cmp_worker_python(const char *opt)
{
    const char *py = opt;
    if (!py || !*py)
        py = getenv("MSPROBE_PYTHON");
    if (!py || !*py)
        py = MSP_DEFAULT_PYTHON;
    return py;
}

/* The last bytes the worker wrote to stderr, one line, for a message. */
void cmp_worker_err_tail(const cmp_worker_t *w, char *buf, size_t n)
{
    buf[0] = '\0';
    if (w->err_fd < 0)
        return;
    off_t end = lseek(w->err_fd, 0, SEEK_END);
    off_t from = end > (off_t)(n - 1) ? end - (off_t)(n - 1) : 0;
    ssize_t got = pread(w->err_fd, buf, n - 1, from);
    buf[got > 0 ? got : 0] = '\0';
    msp_excerpt(buf, n, buf, n - 1, MSP_EXCERPT_BLANKS);
}

static int cmp_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    (void)(flag == FTW_DP ? rmdir(path) : unlink(path));
    return 0;
}

static void cmp_worker_free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void cmp_worker_stop(cmp_worker_t *w)
{
    if (w->kept) {
        /* the session ends; the worker stays (a session's end, not a kill: the
         * worker ends a session whose compare is gone on its own) */
        if (!w->released)
            cmp_worker_release(w);
        if (w->released) {
            /* its end of the socket closes when the session has cleaned up
             * (its directory removed): 1 s for that, as for a worker's exit */
            double end = msp_monotonic() + 1.0;
            char sink[256];
            struct pollfd p = {w->fd, POLLIN, 0};
            while (poll(&p, 1, msp_poll_ms(end - msp_monotonic())) > 0 &&
                   read(w->fd, sink, sizeof sink) > 0)
                ;
        }
        if (w->pid > 0) /* started here: reaped if it has already left */
            (void)waitpid(w->pid, NULL, WNOHANG);
        w->pid = 0;
    }
    if (w->pid > 0) {
        uint32_t zero = 0;
        if (w->fd >= 0)
            (void)send(w->fd, &zero, sizeof zero, MSG_NOSIGNAL | MSG_DONTWAIT);
        for (int i = 0; i < 50; i++) { /* 0.5 s to leave on its own */
            if (waitpid(w->pid, NULL, WNOHANG) == w->pid) {
                w->pid = -w->pid; /* reaped: its group may still hold a job's child */
                break;
            }
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        /* the whole group: the worker and the child it forked for a job */
        kill(-(w->pid > 0 ? w->pid : -w->pid), SIGKILL);
        if (w->pid > 0)
            waitpid(w->pid, NULL, 0);
    }
    if (w->fd >= 0)
        close(w->fd);
    if (w->err_fd >= 0)
        close(w->err_fd);
    if (w->dir) { /* what the worker wrote in its private directory goes with it */
        nftw(w->dir, cmp_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        free(w->dir);
    }
    free(w->line);
    cmp_worker_free_list(w->apis, w->n_apis);
    cmp_worker_free_list(w->ew_apis, w->n_ew_apis);
    cmp_worker_free_list(w->ew_opts, w->n_ew_opts);
    memset(w, 0, sizeof *w);
    w->fd = w->err_fd = -1;
}

void cmp_worker_release(cmp_worker_t *w)
{
    if (!w->kept) {
        cmp_worker_stop(w);
        return;
    }
    /* the zero frame ends an idle job child, which closes its end before it
     * exits: a hang-up here would have the session kill it, and compare then
     * waits for the kernel to unmap it (5-10 ms) before the socket closes */
    uint32_t zero = 0;
    if (!w->released && w->fd >= 0 &&
        send(w->fd, &zero, sizeof zero, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof zero) {
        if (w->busy) /* a job is still running (time ran out): the session kills it */
            (void)shutdown(w->fd, SHUT_WR);
        w->released = 1;
    }
}

static int cmp_str_order(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A list of strings from the ready line into *out, sorted (sorted here so
 * that a bsearch never depends on the worker's order). */
static void cmp_worker_take_list(const cJSON *list, char ***out, size_t *n)
{
    int k = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : 0;
    if (k <= 0 || !(*out = calloc((size_t)k, sizeof **out)))
        return;
    const cJSON *it;
    cJSON_ArrayForEach(it, list)
    {
        if (cJSON_IsString(it) && ((*out)[*n] = strdup(it->valuestring)))
            (*n)++;
    }
    qsort(*out, *n, sizeof **out, cmp_str_order);
}

static int cmp_worker_listed(char *const *v, size_t n, const char *key)
{
    return v && bsearch(&key, v, n, sizeof *v, cmp_str_order) != NULL;
}

/* The ready line's "sample" policy (replay.py, sample_policy) into w. */
static void cmp_worker_take_sample(cmp_worker_t *w, const cJSON *s)
{
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "min");
    const cJSON *kp = cJSON_GetObjectItemCaseSensitive(s, "keep");
    if (!cJSON_IsNumber(mn) || !cJSON_IsNumber(kp) || !(kp->valuedouble >= 1) ||
        !(mn->valuedouble >= 0))
        return;
    w->sample_min = (uint64_t)mn->valuedouble;
    w->sample_keep = (uint64_t)kp->valuedouble;
    cmp_worker_take_list(cJSON_GetObjectItemCaseSensitive(s, "apis"), &w->ew_apis, &w->n_ew_apis);
    cmp_worker_take_list(cJSON_GetObjectItemCaseSensitive(s, "optimizers"), &w->ew_opts,
                         &w->n_ew_opts);
}

/* Whether some API of the worker's list starts with the n bytes of pfx
 * ("Functional."): the list is sorted, so the first entry not below them
 * tells. */
int cmp_worker_elementwise(const cmp_worker_t *w, const char *api)
{
    return cmp_worker_listed(w->ew_apis, w->n_ew_apis, api);
}

int cmp_worker_elementwise_optimizer(const cmp_worker_t *w, const char *cls)
{
    return cmp_worker_listed(w->ew_opts, w->n_ew_opts, cls);
}

struct cmp_prefix_key {
    const cmp_worker_t *w;
    const char *pfx;
    size_t n;
};

static int cmp_api_before(const void *ctx, size_t i)
{
    const struct cmp_prefix_key *k = ctx;
    return strncmp(k->w->apis[i], k->pfx, k->n) < 0;
}

static int cmp_worker_has_prefix(const cmp_worker_t *w, const char *pfx, size_t n)
{
    struct cmp_prefix_key key = {w, pfx, n};
    size_t lo = msp_lower_bound(w->n_apis, cmp_api_before, &key);
    return lo < w->n_apis && !strncmp(w->apis[lo], pfx, n);
}

int cmp_worker_may_call(const cmp_worker_t *w, const char *name, const char **why)
{
    if (!w->apis)
        return 1;
    /* PREFIX.API.N.PASS: the API is what lies between the prefix and the call
     * number. A prefix the list never names (Optimizer, Custom) is the
     * worker's to decide. */
    const char *dot = strchr(name, '.');
    const char *num = dot ? strchr(dot + 1, '.') : NULL;
    if (!num || (size_t)(num - name) >= 256 ||
        !cmp_worker_has_prefix(w, name, (size_t)(dot - name) + 1))
        return 1;
    char api[256];
    memcpy(api, name, (size_t)(num - name));
    api[num - name] = '\0';
    const char *key = api;
    if (cmp_worker_listed(w->apis, w->n_apis, key))
        return 1;
    *why = "not an API this replay worker may call (msprobe-compare(1), SECURITY): its "
           "tensors were not sent";
    return 0;
}

/* Send n bytes by the deadline: 0, -1 (worker gone), -2 (time up). */
int cmp_worker_send(cmp_worker_t *w, const void *p, size_t n, double deadline)
{
    w->busy = 1;
    return msp_fd_exact(w->fd, (void *)p, n, 1, deadline);
}

/* One answer line (NUL-terminated, without its newline) in w->line:
 * 0, -1 (worker gone), -2 (time up). */
int cmp_worker_recv_line(cmp_worker_t *w, double deadline)
{
    for (;;) {
        char *nl = w->len ? memchr(w->line, '\n', w->len) : NULL;
        if (nl) {
            *nl = '\0';
            w->busy = 0;
            return 0;
        }
        if (w->len + 4097 > w->cap) {
            char *nb = msp_grow(w->line, &w->cap, w->len + 4097, 1, 8192);
            if (!nb || w->cap > ((size_t)64 << 20))
                return -1;
            w->line = nb;
        }
        double left = deadline > 0 ? deadline - msp_monotonic() : INFINITY;
        if (left <= 0)
            return -2;
        struct pollfd pf = {w->fd, POLLIN, 0};
        int r = poll(&pf, 1, msp_poll_ms(left));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r == 0 ? -2 : -1;
        ssize_t k = recv(w->fd, w->line + w->len, w->cap - w->len - 1, MSG_DONTWAIT);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k <= 0)
            return -1;
        w->len += (size_t)k;
    }
}

/* Drop the line just read from the buffer. */
void cmp_worker_consume_line(cmp_worker_t *w)
{
    size_t used = strlen(w->line) + 1;
    memmove(w->line, w->line + used, w->len - used);
    w->len -= used;
}

/* The worker's sandbox settings (replay.py's sandbox_enter): its private
 * directory (dir, when not NULL), the user's PYTHONPATH made absolute
 * (python -I ignores the variable and the working directory), rlimits; and
 * either our pid (keep 0: it dies with us) or how long it stays after its
 * last session and its listening socket, descriptor 3 (replay.py's
 * keep_serving). */
static char *cmp_worker_config(const char *dir, double keep)
{
    cJSON *c = cJSON_CreateObject();
    cJSON *path = cJSON_AddArrayToObject(c, "path");
    const char *pp = getenv("PYTHONPATH");
    char cwd[PATH_MAX];
    int have_cwd = getcwd(cwd, sizeof cwd) != NULL;
    while (pp && *pp && path) {
        size_t n = strcspn(pp, ":");
        if (n && (pp[0] == '/' || have_cwd)) {
            char *e = pp[0] == '/' ? msp_asprintf("%.*s", (int)n, pp)
                                   : msp_asprintf("%s/%.*s", cwd, (int)n, pp);
            if (e)
                cJSON_AddItemToArray(path, cJSON_CreateString(e));
            free(e);
        }
        pp += n + (pp[n] == ':');
    }
    if (dir)
        cJSON_AddStringToObject(c, "dir", dir);
    if (keep > 0) {
        cJSON_AddNumberToObject(c, "keep", keep);
        cJSON_AddNumberToObject(c, "listen", 3);
    } else {
        cJSON_AddNumberToObject(c, "parent", (double)getpid());
    }
    cJSON_AddNumberToObject(c, "fsize", (double)CMP_WORKER_FSIZE);
    cJSON_AddNumberToObject(c, "nofile", CMP_WORKER_NOFILE);
    char *text = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    return text;
}

/* The worker's first line: "ready" (the session may start), else why not
 * (malloc'd; the worker is not stopped here). */
static char *cmp_worker_ready(cmp_worker_t *w, const char *python, double deadline)
{
    int r = cmp_worker_recv_line(w, deadline);
    if (r != 0) {
        char tail[300];
        cmp_worker_err_tail(w, tail, sizeof tail);
        return r == -2 ? msp_asprintf("%s did not start replay within the time budget", python)
                       : msp_asprintf("%s exited before replaying anything%s%s", python,
                                      tail[0] ? ": " : "", tail);
    }
    cJSON *j = cJSON_Parse(w->line);
    cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");
    cJSON *sb = cJSON_GetObjectItemCaseSensitive(j, "sandbox");
    cJSON *srv = cJSON_GetObjectItemCaseSensitive(j, "server");
    cJSON *ses = cJSON_GetObjectItemCaseSensitive(j, "session");
    cJSON *spid = cJSON_GetObjectItemCaseSensitive(j, "pid");
    char *why = NULL;
    if (!j || !cJSON_GetObjectItemCaseSensitive(j, "ready")) {
        why = msp_asprintf("%s: %s (set MSPROBE_PYTHON to a Python with torch)", python,
                           cJSON_IsString(err) ? err->valuestring : "not a replay worker");
    } else {
        if (cJSON_IsString(sb) && sb->valuestring[0])
            msp_log(MSP_LOG_INFO, "replay worker sandbox: %s", sb->valuestring);
        w->server = cJSON_IsNumber(srv) ? (long)srv->valuedouble : 0;
        w->session = cJSON_IsNumber(ses) ? (long)ses->valuedouble : 0;
        w->session_pid = cJSON_IsNumber(spid) ? (long)spid->valuedouble : 0;
        cmp_worker_take_list(cJSON_GetObjectItemCaseSensitive(j, "replayable"), &w->apis,
                             &w->n_apis);
        cmp_worker_take_sample(w, cJSON_GetObjectItemCaseSensitive(j, "sample"));
    }
    cJSON_Delete(j);
    cmp_worker_consume_line(w);
    return why;
}

/* w is a session of a kept worker whose ready line was read: -v names it. */
static void cmp_worker_kept(cmp_worker_t *w)
{
    w->kept = 1;
    msp_log(MSP_LOG_INFO, "replay: kept worker %ld, session %ld (process %ld)", w->server,
            w->session, w->session_pid);
}

/* A session of the kept worker at sock, its stderr into err_fd: 0, or -1
 * (nobody there; *lfd is then the socket bound here for a worker this
 * compare starts, or -1 when none can be). */
static int cmp_worker_join(cmp_worker_t *w, const char *sock, const char *python, int err_fd,
                           double deadline, int *lfd)
{
    *lfd = -1;
    for (int i = 0; i < 3; i++) {
        int fd = cmp_keep_connect(sock);
        if (fd >= 0) {
            w->fd = fd;
            char *why = cmp_keep_hello(fd, err_fd) == 0 ? cmp_worker_ready(w, python, deadline)
                                                        : msp_asprintf("%s", strerror(errno));
            if (!why) {
                cmp_worker_kept(w);
                return 0;
            }
            msp_log(MSP_LOG_INFO,
                    "replay: the kept worker at %s did not answer (%s): one "
                    "for this compare alone",
                    sock, why);
            free(why);
            close(fd);
            w->fd = -1;
            w->len = 0;
            return -1;
        }
        *lfd = cmp_keep_listen(sock);
        if (*lfd >= 0 || errno != EADDRINUSE)
            return -1;
    }
    return -1;
}

/* The worker's stderr: an unlinked temp file, close-on-exec; -1 when none. */
static int cmp_worker_err_file(void)
{
    FILE *tf = tmpfile();
    int efd = tf ? dup(fileno(tf)) : -1;
    if (tf)
        fclose(tf);
    if (efd >= 0)
        (void)fcntl(efd, F_SETFD, FD_CLOEXEC);
    return efd;
}

/* One script: the shim's API rules, acc_check's metrics, then the worker
 * that calls them (replay.py, its arguments, bound, msprobe's backward
 * layout and process); NULL when out of memory. */
static char *cmp_worker_source(void)
{
    return msp_asprintf("%s\n%s\n%s\n%s\n%s\n%s\n%s", msp_replay_apis_py, msp_replay_acc_py,
                        msp_replay_py, msp_replay_args_py, msp_replay_bound_py,
                        msp_replay_backward_py, msp_replay_worker_py);
}

/* The kept worker's socket for python and src (and its directory in *kdir),
 * both malloc'd, or NULL when none is kept (say: log why). */
static char *cmp_worker_sock(const char *python, const char *src, double keep, char **kdir, int say)
{
    *kdir = NULL;
    char *kcfg = cmp_worker_config(NULL, keep);
    char *sock = kcfg ? cmp_keep_place(python, src, kcfg, kdir, say) : NULL;
    free(kcfg);
    return sock;
}

void cmp_worker_prestart(cmp_worker_t *w, const char *python)
{
    memset(w, 0, sizeof *w);
    w->fd = w->err_fd = -1;
    double keep = cmp_keep_seconds();
    char *src = keep > 0 ? cmp_worker_source() : NULL, *kdir = NULL;
    char *sock = src ? cmp_worker_sock(python, src, keep, &kdir, 0) : NULL;
    int fd = sock ? cmp_keep_connect(sock) : -1;
    free(src);
    free(sock);
    free(kdir);
    if (fd < 0)
        return;
    int efd = cmp_worker_err_file();
    if (cmp_keep_hello(fd, efd) != 0) {
        close(fd);
        if (efd >= 0)
            close(efd);
        return;
    }
    w->fd = fd;
    w->err_fd = efd;
    w->joined = w->kept = 1; /* stopped unused, it is a session to end */
}

/* Start the worker and wait for its "ready" line; NULL, or why not
 * (malloc'd). */
char *cmp_worker_start(cmp_worker_t *w, const char *python, double deadline)
{
    if (w->joined) { /* cmp_worker_prestart's session: its ready line is all that is left */
        w->joined = 0;
        char *why = cmp_worker_ready(w, python, deadline);
        if (!why) {
            cmp_worker_kept(w);
            return NULL;
        }
        msp_log(MSP_LOG_INFO,
                "replay: the kept worker did not answer (%s): one for this "
                "compare alone",
                why);
        free(why);
        cmp_worker_stop(w);
    }
    memset(w, 0, sizeof *w);
    w->fd = -1;
    int efd = w->err_fd = cmp_worker_err_file();
    /* -I: no working directory, user site or PYTHON* on the path (a json module
     * beside a dump is never imported), -B: no .pyc written */
    char *src = cmp_worker_source();
    if (!src) {
        cmp_worker_stop(w);
        return msp_asprintf("out of memory");
    }
    double keep = cmp_keep_seconds();
    char *sock = NULL, *kdir = NULL;
    int lfd = -1;
    if (keep > 0)
        sock = cmp_worker_sock(python, src, keep, &kdir, 1);
    if (sock && cmp_worker_join(w, sock, python, efd, deadline, &lfd) == 0) {
        free(sock);
        free(kdir);
        free(src);
        return NULL;
    }
    free(sock);
    if (lfd < 0) { /* none kept: a worker of this compare's own, in a directory of its own */
        free(kdir);
        kdir = NULL;
        keep = 0;
        const char *tmp = getenv("TMPDIR");
        w->dir = msp_asprintf("%s/msprobe-replay.XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!w->dir || !mkdtemp(w->dir)) {
            char *why = msp_asprintf("cannot make a private directory for the replay worker "
                                     "(%s): %s",
                                     w->dir ? w->dir : "?", strerror(errno));
            free(w->dir);
            w->dir = NULL;
            free(src);
            cmp_worker_stop(w);
            return why;
        }
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        char *why = msp_asprintf("cannot make a socket for the replay worker: %s", strerror(errno));
        free(src);
        free(kdir);
        if (lfd >= 0)
            close(lfd);
        cmp_worker_stop(w);
        return why;
    }
    char *cfg = cmp_worker_config(kdir ? kdir : w->dir, keep);
    char *argv[] = {(char *)python, (char *)"-I", (char *)"-B", (char *)"-c", src, cfg, NULL};
    msp_child_t c = {.argv = argv,
                     .search_path = 1,
                     .in = sv[1],
                     .out = sv[1],
                     .err = efd >= 0 ? efd : MSP_CHILD_DEVNULL,
                     .new_group = 1,
                     .fd3 = lfd > 3 ? lfd : 0};
    int e = cfg ? msp_child_start(&c) : ENOMEM;
    w->pid = c.pid;
    free(src);
    free(cfg);
    free(kdir);
    if (lfd >= 0)
        close(lfd); /* the worker holds it now; the socket's name stays for the next compare */
    close(sv[1]);
    w->fd = sv[0];
    if (e != 0) {
        w->pid = 0;
        cmp_worker_stop(w);
        return msp_asprintf("cannot start %s: %s (set MSPROBE_PYTHON to a Python with torch)",
                            python, strerror(e));
    }
    char *why = cmp_worker_ready(w, python, deadline);
    if (why)
        cmp_worker_stop(w);
    else if (keep > 0) {
        w->kept = 1;
        msp_log(MSP_LOG_INFO,
                "replay: kept worker %ld started, session %ld (it stays %g s "
                "after its last session)",
                w->server, w->session, keep);
    }
    return why;
}
