/* The replay worker and its transport (cmp_worker.h): the process, the
 * socket it is fed through (not a pipe: a worker that dies mid-job must give
 * an error here, not a SIGPIPE), and the pieces of a job every caller sends
 * the same way (a record's attributes and tensors). */
#include "cmp_worker.h"

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
    uint32_t zero = 0;
    if (!w->released && w->fd >= 0 &&
        send(w->fd, &zero, sizeof zero, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof zero) {
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
    cmp_worker_take_list(cJSON_GetObjectItemCaseSensitive(s, "apis"), &w->ew_apis,
                         &w->n_ew_apis);
    cmp_worker_take_list(cJSON_GetObjectItemCaseSensitive(s, "optimizers"), &w->ew_opts,
                         &w->n_ew_opts);
}

/* Whether some API of the worker's list starts with the n bytes of pfx
 * ("Functional."): the list is sorted, so the first entry not below them
 * tells. */
static int cmp_worker_has_prefix(const cmp_worker_t *w, const char *pfx, size_t n)
{
    size_t lo = 0, hi = w->n_apis;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strncmp(w->apis[mid], pfx, n) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
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
    char *why = NULL;
    if (!j || !cJSON_GetObjectItemCaseSensitive(j, "ready")) {
        why = msp_asprintf("%s: %s (set MSPROBE_PYTHON to a Python with torch)", python,
                           cJSON_IsString(err) ? err->valuestring : "not a replay worker");
    } else {
        if (cJSON_IsString(sb) && sb->valuestring[0])
            msp_log(MSP_LOG_INFO, "replay worker sandbox: %s", sb->valuestring);
        w->server = cJSON_IsNumber(srv) ? (long)srv->valuedouble : 0;
        w->session = cJSON_IsNumber(ses) ? (long)ses->valuedouble : 0;
        cmp_worker_take_list(cJSON_GetObjectItemCaseSensitive(j, "replayable"), &w->apis,
                             &w->n_apis);
        cmp_worker_take_sample(w, cJSON_GetObjectItemCaseSensitive(j, "sample"));
    }
    cJSON_Delete(j);
    cmp_worker_consume_line(w);
    return why;
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
                w->kept = 1;
                msp_log(MSP_LOG_INFO, "replay: kept worker %ld, session %ld", w->server,
                        w->session);
                return 0;
            }
            msp_log(MSP_LOG_INFO, "replay: the kept worker at %s did not answer (%s): one "
                                  "for this compare alone", sock, why);
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
 * that calls them (replay.py, its arguments, bound and process); NULL when
 * out of memory. */
static char *cmp_worker_source(void)
{
    return msp_asprintf("%s\n%s\n%s\n%s\n%s\n%s", msp_replay_apis_py, msp_replay_acc_py,
                        msp_replay_py, msp_replay_args_py, msp_replay_bound_py,
                        msp_replay_worker_py);
}

/* The kept worker's socket for python and src (and its directory in *kdir),
 * both malloc'd, or NULL when none is kept (say: log why). */
static char *cmp_worker_sock(const char *python, const char *src, double keep, char **kdir,
                             int say)
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
            w->kept = 1;
            msp_log(MSP_LOG_INFO, "replay: kept worker %ld, session %ld", w->server, w->session);
            return NULL;
        }
        msp_log(MSP_LOG_INFO, "replay: the kept worker did not answer (%s): one for this "
                              "compare alone", why);
        free(why);
        cmp_worker_stop(w);
    }
    memset(w, 0, sizeof *w);
    w->fd = -1;
    int efd = w->err_fd = cmp_worker_err_file();
    /* -I: no working directory, user site or PYTHON* on the path (a json.py
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
                                     "(%s): %s", w->dir ? w->dir : "?", strerror(errno));
            free(w->dir);
            w->dir = NULL;
            free(src);
            cmp_worker_stop(w);
            return why;
        }
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        char *why = msp_asprintf("cannot make a socket for the replay worker: %s",
                                 strerror(errno));
        free(src);
        free(kdir);
        if (lfd >= 0)
            close(lfd);
        cmp_worker_stop(w);
        return why;
    }
    char *cfg = cmp_worker_config(kdir ? kdir : w->dir, keep);
    char *argv[] = {(char *)python, (char *)"-I", (char *)"-B", (char *)"-c", src, cfg, NULL};
    msp_child_t c = {.argv = argv, .search_path = 1, .in = sv[1], .out = sv[1],
                     .err = efd >= 0 ? efd : MSP_CHILD_DEVNULL, .new_group = 1,
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
        msp_log(MSP_LOG_INFO, "replay: kept worker %ld started, session %ld (it stays %g s "
                              "after its last session)", w->server, w->session, keep);
    }
    return why;
}

void cmp_job_limits(cJSON *job, uint64_t bytes, double deadline, double per_record)
{
    double left = per_record;
    if (deadline > 0) {
        double d = deadline - msp_monotonic();
        left = left > 0 ? fmin(left, d) : d;
    }
    if (left > 0)
        cJSON_AddNumberToObject(job, "limit_s", fmax(1.0, ceil(left)));
    /* what replay needs grows with the job's tensors (float64 copies of the
     * inputs and outputs, each mode's outputs, gradients); a dump that asks
     * for more through its arguments is refused there */
    cJSON_AddNumberToObject(job, "mem", (double)CMP_JOB_MEM_BASE + 16.0 * (double)bytes);
}

/* ---- records by name ------------------------------------------------------ */

static int cmp_name_cmp(const void *x, const void *y)
{
    return strcmp((*(const msp_record_info_t *const *)x)->name,
                  (*(const msp_record_info_t *const *)y)->name);
}

static int cmp_name_key_cmp(const void *key, const void *elem)
{
    return strcmp(key, (*(const msp_record_info_t *const *)elem)->name);
}

const msp_record_info_t **cmp_name_index(const msp_dump_file_t *f)
{
    const msp_record_info_t **v = calloc(f->n_records + 1, sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < f->n_records; i++)
        v[i] = &f->records[i];
    qsort(v, f->n_records, sizeof *v, cmp_name_cmp);
    return v;
}

const msp_record_info_t *cmp_name_find(const msp_dump_file_t *f, const msp_record_info_t **idx,
                                        const char *name)
{
    if (!f || !idx || !name)
        return NULL;
    const msp_record_info_t **hit = bsearch(name, idx, f->n_records, sizeof *idx, cmp_name_key_cmp);
    return hit ? *hit : NULL;
}

/* ---- the pieces of a job ---------------------------------------------------- */

const char *cmp_job_kind(const char *name, const char **why)
{
    if (!strncmp(name, "Optimizer.", 10))
        return "optimizer";
    if (cmp_is_forward(name))
        return "forward";
    char *fw = cmp_forward_name(name);
    if (fw) {
        free(fw);
        return "backward";
    }
    *why = "not a forward, backward or optimizer record";
    return NULL;
}

/* A record's attributes into args (those not there yet), except the call's
 * context (autocast, alias.*), which goes to ctx: each side is replayed in
 * its own context but with the bench side's arguments. */
int cmp_job_add_attrs(cJSON *args, cJSON *ctx, msp_dump_file_t *f, const msp_record_info_t *r)
{
    char **k = NULL, **v = NULL;
    size_t n = 0;
    if (!r)
        return 0;
    if (msp_dump_record_attrs(f, r, &k, &v, &n) != MSP_OK) {
        msp_clear_error();
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        cJSON *into = !strcmp(k[i], "autocast") || !strncmp(k[i], "alias.", 6) ? ctx : args;
        if (into && !cJSON_GetObjectItemCaseSensitive(into, k[i]))
            cJSON_AddStringToObject(into, k[i], v[i]);
    }
    msp_free_strings(k, n);
    msp_free_strings(v, n);
    return 0;
}

/* List rec's tensors (the roles inputs_only allows) in the header and in v. */
const char *cmp_job_add_tensors(cJSON *arr, cmp_job_tensor_t **v, size_t *n, size_t *cap,
                                  const msp_record_info_t *rec, const char *tag, int which,
                                  uint64_t *bytes)
{
    for (size_t i = 0; i < rec->n_tensors; i++) {
        const msp_tensor_info_t *t = &rec->tensors[i];
        int out = !strncmp(t->role, "output", 6);
        if ((which == CMP_JOB_INPUTS && out) || (which == CMP_JOB_OUTPUTS && !out))
            continue;
        if (!t->has_data)
            return "the compare side holds statistics only for it";
        if (t->dtype == MSP_DTYPE_INVALID || !msp_dtype_size(t->dtype))
            return "a tensor of a dtype msprobe cannot read";
        cmp_job_tensor_t *nv = msp_grow(*v, cap, *n, sizeof **v, 16);
        cJSON *o = cJSON_CreateObject();
        cJSON *sh = cJSON_CreateArray();
        if (!nv || !o || !sh) {
            cJSON_Delete(o);
            cJSON_Delete(sh);
            return "out of memory";
        }
        *v = nv;
        nv[(*n)++] = (cmp_job_tensor_t){rec, t, 1};
        for (int d = 0; d < t->ndim; d++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
        cJSON_AddStringToObject(o, "rec", tag);
        cJSON_AddStringToObject(o, "role", t->role);
        cJSON_AddStringToObject(o, "dtype", msp_dtype_name(t->dtype));
        cJSON_AddItemToObject(o, "shape", sh);
        cJSON_AddNumberToObject(o, "nbytes", (double)t->nbytes);
        cJSON_AddItemToArray(arr, o);
        *bytes += (uint64_t)t->nbytes;
    }
    return NULL;
}

static uint64_t cmp_numel(const msp_tensor_info_t *t)
{
    size_t es = msp_dtype_size(t->dtype);
    return es ? (uint64_t)t->nbytes / es : 0;
}

/* The parameter an optimizer record's role belongs to ("input.param.3",
 * "input.grad.3", "input.state.3.exp_avg", "output.param.3": 3), or -1. */
static long cmp_opt_index(const char *role)
{
    static const char *const pre[] = {"input.param.", "input.grad.", "input.state.",
                                      "output.param."};
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++) {
        size_t l = strlen(pre[i]);
        if (strncmp(role, pre[i], l) || role[l] < '0' || role[l] > '9')
            continue;
        char *e;
        unsigned long v = strtoul(role + l, &e, 10);
        return (*e == '\0' || *e == '.') && v < 1UL << 30 ? (long)v : -1;
    }
    return -1;
}

/* The elements of v[i] that every k-th one covers: 0 when it is sent whole. */
static uint64_t cmp_sampled_numel(const cmp_job_tensor_t *v, size_t n, size_t i, int opt)
{
    uint64_t m = cmp_numel(v[i].t);
    if (!opt)
        return m;
    long p = cmp_opt_index(v[i].t->role);
    if (p < 0 || m <= 1)
        return 0;
    char want[48];
    snprintf(want, sizeof want, "input.param.%ld", p);
    for (size_t j = 0; j < n; j++)
        if (!strcmp(v[j].t->role, want))
            return cmp_numel(v[j].t) == m ? m : UINT64_MAX; /* MAX: not elementwise */
    return UINT64_MAX;
}

uint64_t cmp_worker_every(const cmp_worker_t *w, const char *kind, const char *name,
                          const char *cls, const cmp_job_tensor_t *v, size_t n)
{
    if (!w->sample_keep || !n)
        return 1;
    int opt = !strcmp(kind, "optimizer");
    uint64_t total = 0;
    if (opt) {
        if (!cls || !cmp_worker_listed(w->ew_opts, w->n_ew_opts, cls))
            return 1;
        for (size_t i = 0; i < n; i++)
            if (!strncmp(v[i].t->role, "input.param.", 12))
                total += cmp_numel(v[i].t);
    } else {
        /* PREFIX.API.N.PASS: an elementwise API, every tensor of one shape */
        const char *dot = strchr(name, '.');
        const char *num = dot ? strchr(dot + 1, '.') : NULL;
        char api[128];
        if (!num || (size_t)(num - dot - 1) >= sizeof api)
            return 1;
        memcpy(api, dot + 1, (size_t)(num - dot - 1));
        api[num - dot - 1] = '\0';
        if (!cmp_worker_listed(w->ew_apis, w->n_ew_apis, api))
            return 1;
        for (size_t i = 1; i < n; i++)
            if (v[i].t->ndim != v[0].t->ndim ||
                memcmp(v[i].t->shape, v[0].t->shape, (size_t)v[0].t->ndim * sizeof *v[0].t->shape))
                return 1;
        total = cmp_numel(v[0].t);
    }
    if (total <= w->sample_min)
        return 1;
    for (size_t i = 0; i < n; i++)
        if (cmp_sampled_numel(v, n, i, opt) == UINT64_MAX)
            return 1;
    return (total + w->sample_keep - 1) / w->sample_keep;
}

void cmp_job_sample(uint64_t k, const char *kind, cmp_job_tensor_t *v, size_t n, cJSON *arr,
                    uint64_t *bytes)
{
    int opt = !strcmp(kind, "optimizer");
    cJSON *it = arr ? arr->child : NULL;
    for (size_t i = 0; i < n && it; i++, it = it->next) {
        uint64_t m = cmp_sampled_numel(v, n, i, opt);
        if (m <= 1)
            continue;
        uint64_t keep = (m + k - 1) / k, nb = keep * msp_dtype_size(v[i].t->dtype);
        v[i].every = k;
        *bytes = *bytes - (uint64_t)v[i].t->nbytes + nb;
        cJSON *sh = cJSON_CreateArray();
        if (sh)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)keep));
        cJSON_ReplaceItemInObjectCaseSensitive(it, "shape", sh);
        cJSON_ReplaceItemInObjectCaseSensitive(it, "nbytes", cJSON_CreateNumber((double)nb));
    }
}

/* Element i of a chunk of dtype dt as a double; 0 when dt is not a float. */
static double cmp_elem(msp_dtype_t dt, const unsigned char *p, size_t i)
{
    switch (dt) {
    case MSP_DTYPE_FLOAT32: {
        float f;
        memcpy(&f, p + i * 4, 4);
        return f;
    }
    case MSP_DTYPE_FLOAT64: {
        double d;
        memcpy(&d, p + i * 8, 8);
        return d;
    }
    case MSP_DTYPE_FLOAT16:
    case MSP_DTYPE_BFLOAT16: {
        uint16_t h;
        memcpy(&h, p + i * 2, 2);
        return dt == MSP_DTYPE_FLOAT16 ? msp_half_to_float(h) : msp_bf16_to_float(h);
    }
    default:
        return 0.0;
    }
}

double cmp_sampled_err(msp_dump_file_t *cf, const msp_record_info_t *crec,
                       const msp_tensor_info_t *ct, msp_dump_file_t *bf,
                       const msp_record_info_t *brec, const msp_tensor_info_t *bt, uint64_t k)
{
    msp_dtype_t cd = ct->dtype, bd = bt->dtype;
    int fl = (cd == MSP_DTYPE_FLOAT32 || cd == MSP_DTYPE_FLOAT64 || cd == MSP_DTYPE_FLOAT16 ||
              cd == MSP_DTYPE_BFLOAT16) &&
             (bd == MSP_DTYPE_FLOAT32 || bd == MSP_DTYPE_FLOAT64 || bd == MSP_DTYPE_FLOAT16 ||
              bd == MSP_DTYPE_BFLOAT16);
    uint64_t n = cmp_numel(ct);
    if (!fl || !k || n != cmp_numel(bt) || !ct->has_data || !bt->has_data)
        return NAN;
    size_t ce = msp_dtype_size(cd), be = msp_dtype_size(bd), chunk = (size_t)1 << 16;
    unsigned char *cb = malloc(chunk * ce), *bb = malloc(chunk * be);
    msp_tensor_stream_t *cs = NULL, *bs = NULL;
    double dd = 0.0, nb = 0.0, r = NAN;
    if (!cb || !bb || msp_tensor_stream_open(cf, crec, ct, &cs) != MSP_OK ||
        msp_tensor_stream_open(bf, brec, bt, &bs) != MSP_OK) {
        msp_clear_error();
        goto done;
    }
    for (uint64_t at = 0; at < n;) {
        size_t m = n - at < chunk ? (size_t)(n - at) : chunk;
        if (msp_tensor_stream_read(cs, cb, m * ce) != MSP_OK ||
            msp_tensor_stream_read(bs, bb, m * be) != MSP_OK) {
            msp_clear_error();
            goto done;
        }
        for (uint64_t i = (at + k - 1) / k * k; i < at + m; i += k) {
            double x = cmp_elem(cd, cb, (size_t)(i - at)), y = cmp_elem(bd, bb, (size_t)(i - at));
            dd += (x - y) * (x - y);
            nb += y * y;
        }
        at += m;
    }
    r = nb > 0.0 ? sqrt(dd / nb) : (dd > 0.0 ? INFINITY : 0.0);
done:
    msp_tensor_stream_close(cs);
    msp_tensor_stream_close(bs);
    free(cb);
    free(bb);
    return r;
}

int cmp_worker_send_tensor(cmp_worker_t *w, msp_dump_file_t *f, const cmp_job_tensor_t *x,
                           void *buf, size_t bufsz, double deadline)
{
    msp_tensor_stream_t *s = NULL;
    if (msp_tensor_stream_open(f, x->rec, x->t, &s) != MSP_OK)
        return -3;
    size_t es = msp_dtype_size(x->t->dtype);
    uint64_t k = x->every > 1 ? x->every : 1, left = (uint64_t)x->t->nbytes, at = 0;
    bufsz -= bufsz % es; /* chunks of whole elements */
    int r = 0;
    while (left && !r) {
        size_t n = left < bufsz ? (size_t)left : bufsz, m = n;
        if (msp_tensor_stream_read(s, buf, n) != MSP_OK) {
            r = -3;
            break;
        }
        if (k > 1) { /* this chunk's elements at multiples of k, packed to its front */
            uint64_t first = at / es, cnt = n / es, i = (first + k - 1) / k * k;
            char *p = buf;
            m = 0;
            for (; i < first + cnt; i += k, m += es)
                memmove(p + m, p + (i - first) * es, es);
        }
        r = m ? cmp_worker_send(w, buf, m, deadline) : 0;
        left -= n;
        at += n;
    }
    msp_tensor_stream_close(s);
    return r;
}
