/* Replay (msprobe-compare(1), REPLAY): records of a tensor dump re-run on the
 * CPU with the compare side's own inputs, by replay.py in a Python that has
 * torch, to settle what error ratios cannot: did this call make its output
 * error, or did its inputs bring it?
 *
 * The worker is one process for the whole compare, fed one job at a time
 * over a socket (not a pipe: a worker that dies mid-job must give an error
 * here, not a SIGPIPE), in priority order (most suspicious first), until the
 * time budget runs out. Its answers are numbers; the decision is made here:
 * a record introduced error when an output's e_cmp (its distance from the
 * float64 replay) exceeds CMP_REPLAY_FACTOR times e_ref (the same-dtype
 * replay's distance) and CMP_REPLAY_ULPS unit roundoffs of its dtype. */
#include "cmp_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;
extern const char msp_replay_py[];

#ifndef MSP_DEFAULT_PYTHON
#define MSP_DEFAULT_PYTHON "python3"
#endif
/* One job's tensors together at most (both records of a backward job). */
#define RP_MAX_JOB_BYTES ((uint64_t)2 << 30)
/* Workers started at most in one compare (a crash on one job restarts it). */
#define RP_MAX_STARTS 4
/* Files kept open while jobs move between step/rank pairs. */
#define RP_OPEN_FILES 4

static double rp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the worker process ---------------------------------------------------- */

typedef struct rp_worker {
    pid_t pid;
    int fd;            /* our end of the socket: jobs out, answers in */
    int err_fd;        /* its stderr (an unlinked temp file) */
    char *line;        /* answer buffer */
    size_t len, cap;
} rp_worker_t;

/* The last bytes the worker wrote to stderr, one line, for a message. */
static void rp_err_tail(const rp_worker_t *w, char *buf, size_t n)
{
    buf[0] = '\0';
    if (w->err_fd < 0)
        return;
    off_t end = lseek(w->err_fd, 0, SEEK_END);
    off_t from = end > (off_t)(n - 1) ? end - (off_t)(n - 1) : 0;
    ssize_t got = pread(w->err_fd, buf, n - 1, from);
    buf[got > 0 ? got : 0] = '\0';
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t')
            *p = ' ';
}

static void rp_stop(rp_worker_t *w)
{
    if (w->pid > 0) {
        uint32_t zero = 0;
        if (w->fd >= 0)
            (void)send(w->fd, &zero, sizeof zero, MSG_NOSIGNAL | MSG_DONTWAIT);
        for (int i = 0; i < 50; i++) { /* 0.5 s to leave on its own */
            if (waitpid(w->pid, NULL, WNOHANG) == w->pid) {
                w->pid = 0;
                break;
            }
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        if (w->pid > 0) {
            kill(w->pid, SIGKILL);
            waitpid(w->pid, NULL, 0);
        }
    }
    if (w->fd >= 0)
        close(w->fd);
    if (w->err_fd >= 0)
        close(w->err_fd);
    free(w->line);
    memset(w, 0, sizeof *w);
    w->fd = w->err_fd = -1;
}

/* Send n bytes by the deadline: 0, -1 (worker gone), -2 (time up). */
static int rp_send(rp_worker_t *w, const void *p, size_t n, double deadline)
{
    const char *c = p;
    while (n) {
        double left = deadline > 0 ? deadline - rp_now() : 1e9;
        if (left <= 0)
            return -2;
        struct pollfd pf = {w->fd, POLLOUT, 0};
        int r = poll(&pf, 1, left > 1e6 ? -1 : (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r == 0 ? -2 : -1;
        ssize_t k = send(w->fd, c, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* One answer line (NUL-terminated, without its newline) in w->line:
 * 0, -1 (worker gone), -2 (time up). */
static int rp_recv_line(rp_worker_t *w, double deadline)
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
        double left = deadline > 0 ? deadline - rp_now() : 1e9;
        if (left <= 0)
            return -2;
        struct pollfd pf = {w->fd, POLLIN, 0};
        int r = poll(&pf, 1, left > 1e6 ? -1 : (int)(left * 1000) + 1);
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
static void rp_consume_line(rp_worker_t *w)
{
    size_t used = strlen(w->line) + 1;
    memmove(w->line, w->line + used, w->len - used);
    w->len -= used;
}

/* Start the worker and wait for its "ready" line; NULL, or why not
 * (malloc'd). */
static char *rp_start(rp_worker_t *w, const char *python, double deadline)
{
    memset(w, 0, sizeof *w);
    w->fd = w->err_fd = -1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return msp_asprintf("cannot make a socket for the replay worker: %s", strerror(errno));
    FILE *tf = tmpfile();
    int efd = tf ? dup(fileno(tf)) : -1;
    if (tf)
        fclose(tf);
    if (efd >= 0)
        (void)fcntl(efd, F_SETFD, FD_CLOEXEC);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
    if (efd >= 0)
        posix_spawn_file_actions_adddup2(&fa, efd, 2);
    else
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
    char *argv[] = {(char *)python, (char *)"-c", (char *)msp_replay_py, NULL};
    int e = posix_spawnp(&w->pid, python, &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(sv[1]);
    w->fd = sv[0];
    w->err_fd = efd;
    if (e != 0) {
        w->pid = 0;
        rp_stop(w);
        return msp_asprintf("cannot start %s: %s (set MSPROBE_PYTHON to a Python with torch)",
                            python, strerror(e));
    }
    int r = rp_recv_line(w, deadline);
    if (r != 0) {
        char tail[300];
        rp_err_tail(w, tail, sizeof tail);
        rp_stop(w);
        return r == -2 ? msp_asprintf("%s did not start replay within the time budget", python)
                       : msp_asprintf("%s exited before replaying anything%s%s", python,
                                      tail[0] ? ": " : "", tail);
    }
    cJSON *j = cJSON_Parse(w->line);
    cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");
    char *why = NULL;
    if (!j || !cJSON_GetObjectItemCaseSensitive(j, "ready"))
        why = msp_asprintf("%s: %s (set MSPROBE_PYTHON to a Python with torch)", python,
                           cJSON_IsString(err) ? err->valuestring : "not a replay worker");
    cJSON_Delete(j);
    rp_consume_line(w);
    if (why)
        rp_stop(w);
    return why;
}

/* ---- files and records ------------------------------------------------------ */

typedef struct rp_file {
    const cmp_file_pair_t *fp;
    msp_dump_file_t *bf, *cf;
    const msp_record_info_t **bnames, **cnames; /* by name */
    unsigned long used;
} rp_file_t;

static int rp_name_cmp(const void *x, const void *y)
{
    return strcmp((*(const msp_record_info_t *const *)x)->name,
                  (*(const msp_record_info_t *const *)y)->name);
}

static int rp_key_cmp(const void *key, const void *elem)
{
    return strcmp(key, (*(const msp_record_info_t *const *)elem)->name);
}

static const msp_record_info_t **rp_index(const msp_dump_file_t *f)
{
    const msp_record_info_t **v = calloc(f->n_records + 1, sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < f->n_records; i++)
        v[i] = &f->records[i];
    qsort(v, f->n_records, sizeof *v, rp_name_cmp);
    return v;
}

static const msp_record_info_t *rp_find(const msp_dump_file_t *f, const msp_record_info_t **idx,
                                        const char *name)
{
    if (!f || !idx || !name)
        return NULL;
    const msp_record_info_t **hit = bsearch(name, idx, f->n_records, sizeof *idx, rp_key_cmp);
    return hit ? *hit : NULL;
}

static void rp_file_close(rp_file_t *f)
{
    msp_dump_close(f->bf);
    msp_dump_close(f->cf);
    free(f->bnames);
    free(f->cnames);
    memset(f, 0, sizeof *f);
}

/* The open files of the pair holding step/rank (opened into the least
 * recently used slot), or NULL with why set. */
static rp_file_t *rp_files(rp_file_t *slots, unsigned long *clock, const cmp_file_pair_t *fps,
                           size_t nfp, int64_t step, int64_t rank, char **why)
{
    for (int i = 0; i < RP_OPEN_FILES; i++)
        if (slots[i].fp && slots[i].fp->step == step && slots[i].fp->rank == rank) {
            slots[i].used = ++*clock;
            return &slots[i];
        }
    const cmp_file_pair_t *fp = NULL;
    for (size_t i = 0; i < nfp && !fp; i++)
        if (fps[i].step == step && fps[i].rank == rank)
            fp = &fps[i];
    if (!fp && nfp == 1)
        fp = &fps[0]; /* two single files: step and rank came from the file */
    if (!fp) {
        *why = msp_asprintf("no file pair for step %lld rank %lld", (long long)step,
                            (long long)rank);
        return NULL;
    }
    int lru = 0;
    for (int i = 1; i < RP_OPEN_FILES; i++)
        if (slots[i].used < slots[lru].used)
            lru = i;
    rp_file_t *s = &slots[lru];
    rp_file_close(s);
    if (msp_dump_open(fp->cmp, &s->cf) != MSP_OK || msp_dump_open(fp->bench, &s->bf) != MSP_OK) {
        *why = msp_asprintf("cannot reopen the dump: %s", msp_last_error());
        msp_clear_error();
        rp_file_close(s);
        return NULL;
    }
    s->cnames = rp_index(s->cf);
    s->bnames = rp_index(s->bf);
    if (!s->cnames || !s->bnames) {
        *why = msp_asprintf("out of memory");
        rp_file_close(s);
        return NULL;
    }
    s->fp = fp;
    s->used = ++*clock;
    return s;
}

/* ---- jobs ---------------------------------------------------------------------- */

/* What kind of job a record makes, or NULL with *why when none can. */
static const char *rp_kind(const char *name, const char **why)
{
    static const char *const no[][2] = {
        {"Module.", "a module: judged by the records inside it"},
        {"Distributed.", "communication op: not replayed in one process"},
        {"Custom.", "custom callable: not replayed"},
        {"NPU.", "device-only kernel: no CPU kernel to replay it"},
        {"Aten.", "aten op: not replayed"},
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        if (!strncmp(name, no[i][0], strlen(no[i][0]))) {
            *why = no[i][1];
            return NULL;
        }
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
static int rp_add_attrs(cJSON *args, cJSON *ctx, msp_dump_file_t *f, const msp_record_info_t *r)
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

typedef struct rp_tensor {
    const msp_record_info_t *rec;
    const msp_tensor_info_t *t;
} rp_tensor_t;

/* List rec's tensors (the roles inputs_only allows) in the header and in v. */
static const char *rp_add_tensors(cJSON *arr, rp_tensor_t **v, size_t *n, size_t *cap,
                                  const msp_record_info_t *rec, const char *tag, int inputs_only,
                                  uint64_t *bytes)
{
    for (size_t i = 0; i < rec->n_tensors; i++) {
        const msp_tensor_info_t *t = &rec->tensors[i];
        if (inputs_only && !strncmp(t->role, "output", 6))
            continue;
        if (!t->has_data)
            return "the compare side holds statistics only for it";
        if (t->dtype == MSP_DTYPE_INVALID || !msp_dtype_size(t->dtype))
            return "a tensor of a dtype msprobe cannot read";
        rp_tensor_t *nv = msp_grow(*v, cap, *n, sizeof **v, 16);
        cJSON *o = cJSON_CreateObject();
        cJSON *sh = cJSON_CreateArray();
        if (!nv || !o || !sh) {
            cJSON_Delete(o);
            cJSON_Delete(sh);
            return "out of memory";
        }
        *v = nv;
        nv[(*n)++] = (rp_tensor_t){rec, t};
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

/* Stream one tensor's bytes to the worker: 0, -1 gone, -2 time up, -3 read error. */
static int rp_send_tensor(rp_worker_t *w, msp_dump_file_t *f, const rp_tensor_t *x, void *buf,
                          size_t bufsz, double deadline)
{
    msp_tensor_stream_t *s = NULL;
    if (msp_tensor_stream_open(f, x->rec, x->t, &s) != MSP_OK)
        return -3;
    uint64_t left = (uint64_t)x->t->nbytes;
    int r = 0;
    while (left && !r) {
        size_t n = left < bufsz ? (size_t)left : bufsz;
        if (msp_tensor_stream_read(s, buf, n) != MSP_OK) {
            r = -3;
            break;
        }
        r = rp_send(w, buf, n, deadline);
        left -= n;
    }
    msp_tensor_stream_close(s);
    return r;
}

/* The worst output of one side's answer: its e_cmp, the threshold it is held
 * to, and whether any output exceeds its threshold; -1 when none is comparable. */
static double rp_worst(const cJSON *outs, double *thr_out, int *over)
{
    const cJSON *o;
    double worst = -1.0, worst_thr = 0.0, worst_ratio = -1.0;
    *over = 0;
    cJSON_ArrayForEach(o, outs)
    {
        double e = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "e_cmp"));
        double ref = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "e_ref"));
        double u = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "u"));
        int is_float = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "float"));
        if (isnan(e) || e < 0.0)
            continue;
        if (e >= 1e300)
            e = INFINITY;
        if (isnan(ref) || ref < 0.0)
            ref = 0.0;
        if (ref >= 1e300)
            ref = INFINITY;
        double thr = fmax(CMP_REPLAY_FACTOR * ref, is_float ? CMP_REPLAY_ULPS * u : 0.0);
        double ratio = thr > 0.0 ? e / thr : (e > 0.0 ? INFINITY : 0.0);
        if (e > thr)
            *over = 1;
        if (ratio > worst_ratio) {
            worst_ratio = ratio;
            worst = e;
            worst_thr = thr;
        }
    }
    *thr_out = worst_thr;
    return worst;
}

/* Turn the worker's answer into rec's verdict. */
static void rp_apply(msp_record_cmp_t *rec, const cJSON *ans)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(ans, "status");
    if (!cJSON_IsString(st) || strcmp(st->valuestring, "ok") != 0) {
        const cJSON *why = cJSON_GetObjectItemCaseSensitive(ans, "reason");
        rec->replay = MSP_RV_SKIPPED;
        rec->replay_note = strdup(cJSON_IsString(why) ? why->valuestring : "not replayed");
        return;
    }
    /* the bench side's replay must reproduce the bench output, or the call
     * is not rebuilt exactly and replay has nothing to say */
    const cJSON *bench = cJSON_GetObjectItemCaseSensitive(ans, "bench");
    if (bench) {
        const cJSON *bst = cJSON_GetObjectItemCaseSensitive(bench, "status");
        const cJSON *bwhy = cJSON_GetObjectItemCaseSensitive(bench, "reason");
        double bthr = 0.0;
        int bover = 0;
        double be = cJSON_IsString(bst) && !strcmp(bst->valuestring, "ok")
                        ? rp_worst(cJSON_GetObjectItemCaseSensitive(bench, "outputs"), &bthr, &bover)
                        : -1.0;
        if (be < 0.0 || bover) {
            char eb[32], tb[32];
            snprintf(eb, sizeof eb, "%.3g", be);
            snprintf(tb, sizeof tb, "%.3g", bthr);
            rec->replay = MSP_RV_SKIPPED;
            rec->replay_note =
                be < 0.0 ? msp_asprintf("the bench side cannot be replayed (%s)",
                                        cJSON_IsString(bwhy) ? bwhy->valuestring : "?")
                         : msp_asprintf("the call is not rebuilt exactly: the replay of the bench "
                                        "side's own inputs is %s from its output (bound %s)",
                                        eb, tb);
            return;
        }
    }
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(ans, "mode");
    double worst_thr = 0.0;
    int introduced = 0;
    double worst = rp_worst(cJSON_GetObjectItemCaseSensitive(ans, "outputs"), &worst_thr,
                            &introduced);
    if (worst < 0.0) {
        rec->replay = MSP_RV_SKIPPED;
        rec->replay_note = strdup("the replay gave no comparable output");
        return;
    }
    rec->replay = introduced ? MSP_RV_INTRODUCED : MSP_RV_INHERITED;
    rec->replay_err = worst;
    rec->replay_ref = worst_thr;
    rec->replay_note = strdup(cJSON_IsString(mode) ? mode->valuestring : "");
}

typedef struct rp_cand {
    size_t rec;
    double prio;
} rp_cand_t;

static int rp_cand_order(const void *x, const void *y)
{
    const rp_cand_t *a = x, *b = y;
    if (a->prio > b->prio)
        return -1;
    if (a->prio < b->prio)
        return 1;
    return a->rec < b->rec ? -1 : a->rec > b->rec;
}

/* Most suspicious first: what the ratios call introduced (strongest first),
 * then a changed argument, then outputs above their floor, then any
 * difference at all. */
static double rp_priority(const msp_record_cmp_t *r)
{
    double s = isnan(r->score) ? 0.0 : fmin(r->score, 1e6) / 1e6;
    if (r->cause == MSP_CAUSE_INTRODUCED)
        return 3.0 + s;
    if (r->arg_diff)
        return 2.0 + s;
    if (r->out_err > r->floor)
        return 1.0 + s;
    return isnan(r->out_err) ? 0.0 : fmin(r->out_err, 1.0) * 0.5;
}

int cmp_replay_choose(msp_record_cmp_t *r, const msp_compare_opts_t *o, double *prio)
{
    int differs = !isnan(r->out_err) && r->out_err > 0.0;
    if (o->replay == MSP_REPLAY_OFF || !r->bench_name ||
        (!differs && o->replay != MSP_REPLAY_ALL) || isnan(r->out_err))
        return 0;
    const char *why = NULL;
    if (!rp_kind(r->name, &why)) {
        r->replay = MSP_RV_SKIPPED;
        r->replay_note = strdup(why);
        return 0;
    }
    *prio = rp_priority(r);
    return 1;
}

/* Build and run one job; 0 done (answer applied), -1 worker gone, -2 time up. */
static int rp_job(rp_worker_t *w, msp_record_cmp_t *rec, size_t id, rp_file_t *files,
                  const char *kind, double deadline, void *buf, size_t bufsz)
{
    const char *why = NULL;
    rp_tensor_t *tv = NULL;
    size_t nt = 0, cap = 0;
    uint64_t bytes = 0;
    char *fw = NULL, *bfw = NULL, *text = NULL;
    int r = 0;
    size_t ncmp = 0; /* tv[0..ncmp) from the compare file, the rest from the bench file */
    cJSON *job = cJSON_CreateObject(), *args = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    if (!job || !args || !arr) {
        why = "out of memory";
        goto done;
    }
    const msp_record_info_t *crec = rp_find(files->cf, files->cnames, rec->name);
    const msp_record_info_t *brec = rp_find(files->bf, files->bnames, rec->bench_name);
    const msp_record_info_t *cf = crec, *bfr = brec;
    if (!crec) {
        why = "the record is missing on the compare side";
        goto done;
    }
    if (!strcmp(kind, "backward")) {
        fw = cmp_forward_name(rec->name);
        bfw = rec->bench_name ? cmp_forward_name(rec->bench_name) : NULL;
        cf = rp_find(files->cf, files->cnames, fw);
        bfr = rp_find(files->bf, files->bnames, bfw);
        if (!cf) {
            why = "its forward record was not dumped";
            goto done;
        }
        cJSON_AddStringToObject(job, "forward", fw);
        /* its output dtypes tell how each side computed (autocast) */
        for (int side = 0; side < 2; side++) {
            const msp_record_info_t *x = side ? bfr : cf;
            cJSON *fd = x ? cJSON_AddObjectToObject(job, side ? "bench_forward_dtypes"
                                                               : "forward_dtypes")
                          : NULL;
            for (size_t i = 0; fd && i < x->n_tensors; i++)
                if (!strncmp(x->tensors[i].role, "output", 6))
                    cJSON_AddStringToObject(fd, x->tensors[i].role,
                                            msp_dtype_name(x->tensors[i].dtype));
        }
    }
    /* the bench side's non-tensor arguments, the compare side's where it has none */
    rp_add_attrs(args, cJSON_AddObjectToObject(job, "bench_context"), files->bf, bfr);
    rp_add_attrs(args, cJSON_AddObjectToObject(job, "context"), files->cf, cf);
    if (!strcmp(kind, "backward")) {
        why = rp_add_tensors(arr, &tv, &nt, &cap, cf, "f", 1, &bytes);
        if (!why)
            why = rp_add_tensors(arr, &tv, &nt, &cap, crec, "b", 0, &bytes);
    } else {
        why = rp_add_tensors(arr, &tv, &nt, &cap, crec, "f", 0, &bytes);
    }
    if (why)
        goto done;
    /* the bench side too, when it holds the data: the check that the call is
     * rebuilt exactly (a statistics bench dump goes without it) */
    ncmp = nt;
    if (bfr && brec) {
        cJSON *barr = cJSON_CreateArray();
        size_t n0 = nt;
        uint64_t b0 = bytes;
        const char *bwhy = !barr ? "out of memory"
                           : !strcmp(kind, "backward")
                               ? rp_add_tensors(barr, &tv, &nt, &cap, bfr, "F", 1, &bytes)
                               : rp_add_tensors(barr, &tv, &nt, &cap, brec, "F", 0, &bytes);
        if (!bwhy && !strcmp(kind, "backward"))
            bwhy = rp_add_tensors(barr, &tv, &nt, &cap, brec, "B", 0, &bytes);
        cJSON *it;
        if (!bwhy) {
            while ((it = cJSON_DetachItemFromArray(barr, 0)) != NULL)
                cJSON_AddItemToArray(arr, it);
        } else {
            nt = n0;
            bytes = b0;
        }
        cJSON_Delete(barr);
    }
    if (bytes > RP_MAX_JOB_BYTES) {
        why = "its tensors are too large to replay (over 2 GiB)";
        goto done;
    }
    cJSON_AddNumberToObject(job, "id", (double)id);
    cJSON_AddStringToObject(job, "kind", kind);
    cJSON_AddStringToObject(job, "name", rec->name);
    cJSON_AddItemToObject(job, "args", args);
    cJSON_AddItemToObject(job, "tensors", arr);
    args = arr = NULL;
    if (!(text = cJSON_PrintUnformatted(job))) {
        why = "out of memory";
        goto done;
    }
    uint32_t len = (uint32_t)strlen(text);
    if ((r = rp_send(w, &len, sizeof len, deadline)) || (r = rp_send(w, text, len, deadline)))
        goto done;
    for (size_t i = 0; i < nt && !r; i++) {
        r = rp_send_tensor(w, i < ncmp ? files->cf : files->bf, &tv[i], buf, bufsz, deadline);
        if (r == -3) {
            /* the worker waits for bytes it will not get: start afresh */
            why = "a tensor of it cannot be read";
            r = -1;
        }
    }
    if (r)
        goto done;
    if ((r = rp_recv_line(w, deadline)))
        goto done;
    cJSON *ans = cJSON_Parse(w->line);
    rp_consume_line(w);
    if (!ans) {
        r = -1;
        goto done;
    }
    rp_apply(rec, ans);
    cJSON_Delete(ans);
done:
    if (why && !rec->replay_note) {
        rec->replay = MSP_RV_SKIPPED;
        rec->replay_note = strdup(why);
    }
    free(text);
    free(tv);
    free(fw);
    free(bfw);
    cJSON_Delete(job);
    cJSON_Delete(args);
    cJSON_Delete(arr);
    return r;
}

msp_err cmp_replay_run(msp_compare_result_t *res, const cmp_file_pair_t *fps, size_t nfp,
                       const msp_compare_opts_t *o)
{
    if (o->replay == MSP_REPLAY_OFF || res->n_records == 0)
        return MSP_OK;
    double t0 = rp_now();
    double deadline = o->replay_budget > 0 ? t0 + o->replay_budget : 0;
    rp_cand_t *cand = calloc(res->n_records, sizeof *cand);
    if (!cand)
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory for replay");
    size_t nc = 0;
    for (size_t i = 0; i < res->n_records; i++) {
        double prio;
        if (cmp_replay_choose(&res->records[i], o, &prio))
            cand[nc++] = (rp_cand_t){i, prio};
    }
    res->replay_candidates = nc;
    if (!nc) {
        free(cand);
        return MSP_OK;
    }
    qsort(cand, nc, sizeof *cand, rp_cand_order);
    const char *py = o->replay_python;
    if (!py || !*py)
        py = getenv("MSPROBE_PYTHON");
    if (!py || !*py)
        py = MSP_DEFAULT_PYTHON;
    rp_worker_t w;
    memset(&w, 0, sizeof w);
    w.fd = w.err_fd = -1;
    rp_file_t files[RP_OPEN_FILES];
    memset(files, 0, sizeof files);
    unsigned long clock = 0;
    size_t bufsz = (size_t)1 << 20;
    void *buf = malloc(bufsz);
    char *why = buf ? rp_start(&w, py, deadline) : msp_asprintf("out of memory");
    int starts = 1;
    size_t k = 0;
    if (why) {
        res->replay_unavailable = why;
        msp_log(MSP_LOG_WARN, "replay: %s; suspects come from error ratios alone", why);
        k = nc;
    }
    for (; k < nc; k++) {
        msp_record_cmp_t *r = &res->records[cand[k].rec];
        if (deadline > 0 && rp_now() >= deadline)
            break;
        char *fwhy = NULL;
        rp_file_t *f = rp_files(files, &clock, fps, nfp, r->step, r->rank, &fwhy);
        if (!f) {
            r->replay = MSP_RV_SKIPPED;
            r->replay_note = fwhy;
            continue;
        }
        const char *kwhy = NULL;
        const char *kind = rp_kind(r->name, &kwhy);
        int rr = rp_job(&w, r, k, f, kind, deadline, buf, bufsz);
        if (rr == -2)
            break;
        if (rr == -1) {
            char tail[300];
            rp_err_tail(&w, tail, sizeof tail);
            rp_stop(&w);
            if (r->replay == MSP_RV_NONE) {
                r->replay = MSP_RV_SKIPPED;
                r->replay_note = msp_asprintf("the replay worker died on it%s%s",
                                              tail[0] ? ": " : "", tail);
            }
            /* a worker that died on one record is started again for the rest */
            char *again = starts < RP_MAX_STARTS ? rp_start(&w, py, deadline)
                                                 : msp_asprintf("the replay worker died %d times",
                                                                starts);
            starts++;
            if (again) {
                msp_log(MSP_LOG_WARN, "replay stopped: %s", again);
                free(again);
                k++;
                break;
            }
        }
        if (o->replay_progress)
            o->replay_progress(k + 1, nc, o->replay_progress_ud);
    }
    for (size_t j = k; j < nc; j++) {
        msp_record_cmp_t *r = &res->records[cand[j].rec];
        if (r->replay == MSP_RV_NONE && !res->replay_unavailable) {
            r->replay = MSP_RV_UNFINISHED;
            r->replay_note = msp_asprintf("not replayed: the replay budget of %g s ran out",
                                          o->replay_budget);
        }
    }
    if (w.pid > 0 || w.fd >= 0)
        rp_stop(&w);
    for (int i = 0; i < RP_OPEN_FILES; i++)
        rp_file_close(&files[i]);
    free(buf);
    free(cand);
    for (size_t i = 0; i < res->n_records; i++) {
        switch (res->records[i].replay) {
        case MSP_RV_INTRODUCED:
            res->replay_introduced++;
            break;
        case MSP_RV_INHERITED:
            res->replay_inherited++;
            break;
        case MSP_RV_SKIPPED:
            res->replay_skipped++;
            break;
        case MSP_RV_UNFINISHED:
            res->replay_unfinished++;
            break;
        default:
            break;
        }
    }
    res->replay_done = res->replay_introduced + res->replay_inherited;
    res->replay_seconds = rp_now() - t0;
    return MSP_OK;
}
