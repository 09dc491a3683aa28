/* Asynchronous writer thread with a byte-bounded queue.
 *
 * The training thread pays for one memcpy of each tensor (done by the caller
 * before msp_dq_push) and waits only when the queue holds more than
 * queue_bytes. A statistics thread computes each tensor's statistics (the
 * CPU-heavy part: min/max/mean/norm and CRC-32) ahead of the writer, so the
 * two overlap. Everything HDF5 happens on the writer thread, which owns the
 * msp_writer_t of the step being written; a step's file is closed when the
 * END_STEP marker of that step comes through, so a crash loses at most the
 * step in flight. Failures (full disk, unwritable dir) become one warning
 * per kind and the affected record or step is dropped: training goes on. */
#include "dump_writer.h"
#include "dump_lost.h"
#include "shim_log.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full, idle;
    msp_dq_rec_t *head, *tail;
    size_t bytes;
    int started, busy;
    pthread_t thread;
    pthread_cond_t work;      /* records for the statistics thread */
    msp_dq_rec_t *stats_next; /* first record it has not seen */
    pthread_t sthread;
    char *dump_path, *task, *dump_mode, *framework_version;
    int statistics, durable;
    int overflow; /* task overflow_check (msp_dq_params_t) */
    int64_t overflow_nums;
    int64_t pack_below;
    size_t cap;
    int64_t world_size;
    pthread_cond_t ended; /* an END_STEP marker went through */
    uint64_t ends_queued, ends_done;
    int stats_waiting;        /* the statistics thread sleeps on work */
    unsigned unsignalled;     /* records queued since, without waking it */
    size_t unsignalled_bytes; /* and their tensor bytes */
} q = {PTHREAD_MUTEX_INITIALIZER,
       PTHREAD_COND_INITIALIZER,
       PTHREAD_COND_INITIALIZER,
       PTHREAD_COND_INITIALIZER,
       NULL,
       NULL,
       0,
       0,
       0,
       0,
       PTHREAD_COND_INITIALIZER,
       NULL,
       0,
       NULL,
       NULL,
       NULL,
       NULL,
       0,
       0,
       0,
       0,
       0,
       0,
       1,
       PTHREAD_COND_INITIALIZER,
       0,
       0,
       0,
       0,
       0};

/* The statistics thread is woken once per this many records or bytes (or at
 * once for a step end, shutdown, or a queue filling up), not for every
 * record: on a loop of small ops, one wake-up per record (a futex call and a
 * context switch on each side) cost the training thread more than the
 * statistics. Big tensors still start at once: their statistics and write
 * should overlap the training that follows (MSPROBE_SYNC=1 waits for them).
 * 32 records / 512 KB still woke it ~45 times a step of the LSTM cell loop
 * (1200 records, 22 MB); 128 / 2 MB: ~11, and the futex wakes left the
 * training thread's profile. The statistics thread wakes the writer in the
 * same batches (it used to on every record). */
#define MSP_WAKE_BATCH 128
#define MSP_WAKE_BYTES ((size_t)2 << 20)

/* ---- records ----------------------------------------------------------- */

int msp_dq_init(const msp_dq_params_t *p)
{
    q.dump_path = strdup(p->dump_path);
    q.task = strdup(p->task);
    q.dump_mode = strdup(p->dump_mode);
    q.framework_version = strdup("unknown");
    q.statistics = p->statistics;
    q.durable = p->durable;
    q.overflow = p->overflow;
    q.overflow_nums = p->overflow_nums;
    q.pack_below = p->pack_below;
    q.cap = p->queue_bytes ? p->queue_bytes : (size_t)256 << 20;
    msp_dq_pool_caps(q.cap / 2, q.cap / 8);
    return (q.dump_path && q.task && q.dump_mode && q.framework_version) ? 0 : -1;
}

void msp_dq_set_framework(const char *version)
{
    char *v = strdup(version);
    if (!v)
        return;
    pthread_mutex_lock(&q.mu);
    free(q.framework_version);
    q.framework_version = v;
    pthread_mutex_unlock(&q.mu);
}

void msp_dq_set_world_size(int64_t world_size)
{
    pthread_mutex_lock(&q.mu);
    q.world_size = world_size;
    pthread_mutex_unlock(&q.mu);
}

/* ---- the writer thread ------------------------------------------------ */

/* HDF5 1.10 keeps the id of a file whose final flush failed (disk full) and
 * crashes closing it again in its own atexit handler, turning a finished
 * training run into exit status 139. Once a write has failed, an on_exit
 * handler registered after HDF5's (so it runs first) ends the process with
 * the status it was exiting with, skipping that handler. */
static volatile int g_write_failed;

static void exit_guard(int status, void *arg)
{
    (void)arg;
    if (g_write_failed) {
        fflush(NULL);
        _exit(status);
    }
}

static void arm_exit_guard(void)
{
    static int armed;
    if (!armed) {
        armed = 1;
        on_exit(exit_guard, NULL);
    }
}

typedef struct wstate {
    msp_writer_t *w;
    int64_t step, rank;  /* of the open file */
    int64_t failed_step; /* a step whose file could not be opened: drop its records */
    int64_t failed_rank;
    char *dir, *part; /* rank directory and part file of the open file */
    uint64_t serial;  /* of the open file, counted from 1: which APIs' /defaults
                              rows it has (msp_dq_sig_t.file_mark) */
} wstate_t;

/* ---- rank directory claims (writer thread only) ----------------------- */

#define MSP_MAX_CLAIMS 64
static struct {
    int64_t rank;
    char name[40]; /* "rank0", or "rank0-1" when rank0 belongs to another process */
} g_claims[MSP_MAX_CLAIMS];
static int g_nclaims;
static char g_tag[64]; /* "pid nonce": who we are in an owner file */

static void make_tag(void)
{
    if (g_tag[0])
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    /* The pid alone repeats across containers; the boot time tells runs apart. */
    snprintf(g_tag, sizeof g_tag, "%ld %lld.%09ld\n", (long)getpid(), (long long)ts.tv_sec,
             ts.tv_nsec);
}

/* 1: the owner file names this process; 0: another one; -1: unreadable. */
static int owned_by_us(const char *owner)
{
    char buf[64] = {0};
    int fd = open(owner, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n > 0 && strcmp(buf, g_tag) == 0;
}

/* The directory name this process writes rank `rank` under, claimed once. */
static const char *rank_dir_name(int64_t rank)
{
    for (int i = 0; i < g_nclaims; i++)
        if (g_claims[i].rank == rank)
            return g_claims[i].name;
    if (g_nclaims == MSP_MAX_CLAIMS)
        return NULL;
    make_tag();
    char name[40];
    int got = 0;
    for (int k = 0; k < 1000 && !got; k++) {
        if (k)
            snprintf(name, sizeof name, "rank%lld-%d", (long long)rank, k);
        else
            snprintf(name, sizeof name, "rank%lld", (long long)rank);
        char *owner = msp_asprintf("%s/.%s.owner", q.dump_path, name);
        if (!owner)
            return NULL;
        int fd = open(owner, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0) {
            ssize_t w = write(fd, g_tag, strlen(g_tag));
            got = w == (ssize_t)strlen(g_tag) ? 1 : -1;
            close(fd);
            if (got < 0) {
                unlink(owner);
                msp_shim_warn_once("claim", "cannot write %s: %s; records are dropped", owner,
                                   strerror(errno));
            }
        } else if (errno == EEXIST) {
            got = owned_by_us(owner) == 1;
        } else {
            msp_shim_warn_once("claim", "cannot create %s: %s; records are dropped", owner,
                               strerror(errno));
            got = -1;
        }
        free(owner);
    }
    if (got != 1)
        return NULL;
    if (strchr(name, '-'))
        msp_shim_warn_once("rankdir",
                           "another process already writes rank %lld under %s; this "
                           "one (pid %ld) writes %s instead, so no finished step is replaced",
                           (long long)rank, q.dump_path, (long)getpid(), name);
    g_claims[g_nclaims].rank = rank;
    snprintf(g_claims[g_nclaims].name, sizeof g_claims[0].name, "%s", name);
    return g_claims[g_nclaims++].name;
}

/* Durable mode: the directories made for the file must survive a machine
 * crash too, and so must the name the finished file was given. */
static void sync_dirs(const char *rank_dir)
{
    char *step_dir = msp_parent_dir(rank_dir);
    if (!step_dir || msp_sync_dir(rank_dir) != MSP_OK || msp_sync_dir(step_dir) != MSP_OK ||
        msp_sync_dir(q.dump_path) != MSP_OK)
        msp_shim_warn_once("sync", "%s may not be on disk: %s", rank_dir,
                           step_dir ? msp_last_error() : "out of memory");
    free(step_dir);
}

/* Remove what a failed file left: its part file and the directories made for
 * it when they are empty, so no reader finds a broken or empty step. */
static void drop_part(wstate_t *s)
{
    if (s->part)
        unlink(s->part);
    if (s->dir && rmdir(s->dir) == 0) {
        char *step_dir = msp_parent_dir(s->dir);
        if (step_dir)
            rmdir(step_dir);
        free(step_dir);
    }
}

static void forget_file(wstate_t *s)
{
    free(s->dir);
    free(s->part);
    s->dir = s->part = NULL;
    s->w = NULL;
}

static void close_file(wstate_t *s)
{
    if (!s->w)
        return;
    if (msp_writer_close(s->w) != MSP_OK && (g_write_failed = 1)) {
        msp_shim_warn_once("io",
                           "cannot finish step %lld's dump file: %s; that step is "
                           "dropped",
                           (long long)s->step, msp_last_error());
        msp_dq_note_lost(s->step, 1);
        drop_part(s);
        forget_file(s);
        return;
    }
    char *final = msp_asprintf("%s/dump.h5", s->dir);
    if (!final) {
        msp_shim_warn_once("nomem", "out of memory finishing a dump file; step dropped");
        msp_dq_note_lost(s->step, 1);
        drop_part(s);
    } else if (link(s->part, final) != 0) {
        int e = errno;
        if (e == EEXIST)
            msp_shim_warn_once("exists",
                               "%s already exists and is never replaced; step %lld of "
                               "this run is dropped",
                               final, (long long)s->step);
        else
            msp_shim_warn_once("io", "cannot name %s: %s; step %lld is dropped", final, strerror(e),
                               (long long)s->step);
        msp_dq_note_lost(s->step, 1);
        unlink(s->part);
    } else {
        unlink(s->part);
        if (q.durable)
            sync_dirs(s->dir);
    }
    free(final);
    forget_file(s);
}

static int open_file(wstate_t *s, int64_t step, int64_t rank)
{
    const char *rname = rank_dir_name(rank);
    char *dir = rname ? msp_asprintf("%s/step%lld/%s", q.dump_path, (long long)step, rname) : NULL;
    char *path = dir ? msp_asprintf("%s/.dump.h5.%ld.part", dir, (long)getpid()) : NULL;
    int ok = 0;
    if (!path) {
        if (rname)
            msp_shim_warn_once("nomem", "out of memory opening a dump file; records dropped");
        goto cleanup;
    }
    if (msp_mkdirs(dir) != MSP_OK) {
        msp_shim_warn_once("io", "cannot create %s: %s; records of this step are dropped", dir,
                           msp_last_error());
        goto cleanup;
    }
    pthread_mutex_lock(&q.mu);
    msp_dump_meta_t meta = {"pytorch", q.framework_version, q.task,      q.dump_mode, step,
                            rank,      q.world_size,        q.pack_below};
    pthread_mutex_unlock(&q.mu);
    msp_err orc = msp_writer_open(path, &meta, &s->w);
    arm_exit_guard(); /* HDF5 is initialised now: its atexit handler is registered */
    s->dir = dir;
    s->part = path;
    dir = path = NULL;
    if (orc != MSP_OK) {
        g_write_failed = 1;
        msp_shim_warn_once("io",
                           "cannot create a dump file in %s: %s; records of this step "
                           "are dropped",
                           s->dir, msp_last_error());
        drop_part(s);
        forget_file(s);
        goto cleanup;
    }
    msp_writer_set_durable(s->w, q.durable);
    s->serial++;
    ok = 1;
cleanup:
    if (!ok) {
        s->failed_step = step;
        s->failed_rank = rank;
        if (rname)
            msp_dq_note_lost(step, 1);
    } else {
        s->step = step;
        s->rank = rank;
    }
    free(dir);
    free(path);
    return ok;
}

static void write_record(wstate_t *s, msp_dq_rec_t *r)
{
    if (s->w && (s->step != r->step || s->rank != r->rank))
        close_file(s);
    if (!s->w) {
        if (s->failed_step == r->step && s->failed_rank == r->rank)
            return;
        if (!open_file(s, r->step, r->rank))
            return;
    }
    msp_err rc = msp_writer_begin_record(s->w, r->name, r->order);
    if (rc != MSP_OK) {
        msp_shim_warn_once("record", "record %s not written: %s", r->name, msp_last_error());
        msp_dq_note_lost(r->step, 0);
        return;
    }
    for (size_t i = 0; i < r->nt && rc == MSP_OK; i++) {
        msp_dq_tensor_t *t = &r->t[i];
        msp_tensor_in_t in = {t->role,   t->dtype,         t->ndim,
                              t->shape,  t->data,          t->has_stats ? &t->stats : NULL,
                              t->device, t->requires_grad, t->producer};
        if (q.statistics && t->has_stats && !r->keep_data)
            in.data = NULL;
        rc = msp_writer_add_tensor(s->w, &in);
        if (rc != MSP_OK && (g_write_failed = 1)) {
            msp_shim_warn_once(rc == MSP_ERR_IO || rc == MSP_ERR_HDF5 ? "io" : "tensor",
                               "%s/%s not written: %s", r->name, t->role, msp_last_error());
            msp_dq_note_lost(r->step, 0);
        }
    }
    /* the API's signature, once a file: its rows are all a record costs */
    msp_dq_sig_t *sig = r->sig;
    if (sig && sig->file_mark != s->serial) {
        sig->file_mark = s->serial;
        if (msp_writer_add_defaults(s->w, sig->api, (const char *const *)sig->keys,
                                    (const char *const *)sig->values, sig->n) != MSP_OK)
            msp_shim_warn_once("attr", "%s: its signature is not written: %s", sig->api,
                               msp_last_error());
    }
    for (size_t i = 0; i < r->na; i++)
        if (msp_writer_set_attr(s->w, r->a[i].key, r->a[i].value) != MSP_OK)
            msp_shim_warn_once("attr", "%s: attribute %s not written: %s", r->name, r->a[i].key,
                               msp_last_error());
    if (msp_writer_end_record(s->w) != MSP_OK) {
        msp_shim_warn_once("record", "record %s not finished: %s", r->name, msp_last_error());
        msp_dq_note_lost(r->step, 0);
    }
}

/* ---- task overflow_check (writer thread only) ------------------------ */

/* The writer holds back the last record whose outputs are finite: when the
 * next one's outputs hold NaN or Inf, both are written (the call that made it
 * and the call before, which fed it); otherwise the held one is dropped. */
static struct {
    msp_dq_rec_t *held;
    int64_t found; /* records with NaN/Inf outputs written */
} ovf;
static atomic_int ovf_done; /* overflow_nums reached: nothing more is written */

int msp_dq_accepting(void)
{
    return !atomic_load_explicit(&ovf_done, memory_order_relaxed);
}

static int outputs_abnormal(const msp_dq_rec_t *r)
{
    for (size_t i = 0; i < r->nt; i++) {
        const msp_dq_tensor_t *t = &r->t[i];
        if (t->has_stats && !strncmp(t->role, "output", 6) &&
            (t->stats.nan_count > 0 || t->stats.inf_count > 0))
            return 1;
    }
    return 0;
}

static void ovf_drop_held(void)
{
    msp_dq_rec_free(ovf.held);
    ovf.held = NULL;
}

/* Take record r; 1 when it is held (the caller must not free it). Its bytes
 * leave the queue's count either way: a held record is not waiting, and the
 * training thread must not wait on it. */
static int ovf_take(wstate_t *s, msp_dq_rec_t *r)
{
    if (atomic_load_explicit(&ovf_done, memory_order_relaxed))
        return 0;
    if (!outputs_abnormal(r)) {
        ovf_drop_held();
        ovf.held = r;
        return 1;
    }
    if (ovf.held && ovf.held->step == r->step && ovf.held->rank == r->rank)
        write_record(s, ovf.held);
    ovf_drop_held();
    write_record(s, r);
    if (q.overflow_nums > 0 && ++ovf.found >= q.overflow_nums)
        atomic_store_explicit(&ovf_done, 1, memory_order_relaxed);
    return 0;
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The writer's own CPU time: on a machine with fewer cores than busy threads
 * the wall-clock busy time also counts the time it waited for a core. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* MSPROBE_WRITER_STATS=1: one line at exit with the writer's own throughput
 * (bench/dump/run.sh compares it with dd), its time a step, and how long the
 * training thread waited for the previous step's file (bench/gpu: is a step
 * bound by the writer?). */
static int writer_stats(void)
{
    static int on = -1;
    if (on < 0)
        on = msp_env_flag("MSPROBE_WRITER_STATS");
    return on;
}
static double g_end_wait;    /* seconds msp_dq_end_step waited (q.mu) */
static uint64_t g_steps_end; /* steps ended */

static void *writer_main(void *arg)
{
    (void)arg;
    wstate_t s = {NULL, -1, -1, -1, -1, NULL, NULL, 0};
    pthread_setname_np(pthread_self(), "msprobe-writer"); /* top -H, perf, gdb */
    int stats = writer_stats();
    double busy = 0, oncpu = 0;
    uint64_t written = 0;
    for (;;) {
        pthread_mutex_lock(&q.mu);
        while (!q.head || !q.head->stats_ready) {
            q.busy = 0;
            pthread_cond_broadcast(&q.idle);
            pthread_cond_wait(&q.not_empty, &q.mu);
        }
        q.busy = 1;
        msp_dq_rec_t *r = q.head;
        q.head = r->next;
        if (!q.head)
            q.tail = NULL;
        pthread_mutex_unlock(&q.mu);

        int kind = r->kind, held = 0;
        size_t bytes = r->bytes;
        double t0 = stats ? mono_now() : 0, c0 = stats ? cpu_now() : 0;
        if (kind != MSP_DQ_RECORD && q.overflow)
            ovf_drop_held(); /* the call before belongs to the same step */
        if (kind == MSP_DQ_RECORD && q.overflow)
            held = ovf_take(&s, r);
        else if (kind == MSP_DQ_RECORD)
            write_record(&s, r);
        else if (kind == MSP_DQ_END_STEP && s.w && s.step == r->step)
            close_file(&s);
        else if (kind == MSP_DQ_SHUTDOWN)
            close_file(&s);
        if (stats) {
            busy += mono_now() - t0;
            oncpu += cpu_now() - c0;
            written += bytes;
        }
        if (stats && kind == MSP_DQ_SHUTDOWN) {
            pthread_mutex_lock(&q.mu);
            double waited = g_end_wait;
            uint64_t steps = g_steps_end;
            pthread_mutex_unlock(&q.mu);
            msp_shim_msg("writer: %llu bytes of tensors in %.3f s busy (%.0f MB/s), %.3f s of it "
                         "on a CPU; %llu steps: %.2f ms busy a step, the training thread waited "
                         "%.2f ms a step for the previous step's file",
                         (unsigned long long)written, busy,
                         busy > 0 ? (double)written / busy / 1e6 : 0.0, oncpu,
                         (unsigned long long)steps, steps ? busy * 1e3 / (double)steps : 0.0,
                         steps ? waited * 1e3 / (double)steps : 0.0);
        }
        if (!held)
            msp_dq_rec_free(r);

        /* The bytes are released only now that they are freed: the bound is
         * on memory held, not on records waiting. */
        pthread_mutex_lock(&q.mu);
        q.bytes -= bytes;
        pthread_cond_broadcast(&q.not_full);
        if (kind == MSP_DQ_END_STEP) {
            q.ends_done++;
            pthread_cond_broadcast(&q.ended);
        }
        if (kind == MSP_DQ_SHUTDOWN) {
            q.busy = 0;
            pthread_cond_broadcast(&q.idle);
            pthread_mutex_unlock(&q.mu);
            return NULL;
        }
        pthread_mutex_unlock(&q.mu);
    }
}

static void *stats_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "msprobe-stats");
    unsigned unannounced = 0; /* records ready since the writer was last woken */
    for (;;) {
        pthread_mutex_lock(&q.mu);
        while (!q.stats_next) {
            q.stats_waiting = 1;
            q.unsignalled = 0;
            q.unsignalled_bytes = 0;
            pthread_cond_wait(&q.work, &q.mu);
        }
        q.stats_waiting = 0;
        msp_dq_rec_t *r = q.stats_next;
        pthread_mutex_unlock(&q.mu);

        for (size_t i = 0; r->kind == MSP_DQ_RECORD && i < r->nt; i++) {
            msp_dq_tensor_t *t = &r->t[i];
            if (t->stats_given)
                continue;
            /* a buffer shared with an earlier tensor has them already */
            if (!t->data || !msp_dq_buf_stats(t->data, &t->stats)) {
                size_t es = msp_dtype_size(t->dtype);
                msp_stats_compute(t->dtype, t->data, es ? t->nbytes / es : 0, &t->stats);
                if (t->data)
                    msp_dq_buf_set_stats(t->data, &t->stats);
            }
            t->has_stats = 1;
        }

        pthread_mutex_lock(&q.mu);
        r->stats_ready = 1;
        q.stats_next = r->next;
        int last = r->kind == MSP_DQ_SHUTDOWN;
        /* The writer in batches too: when this thread runs out of work, at a
         * marker, or when memory should be released soon. */
        if (++unannounced >= MSP_WAKE_BATCH || !q.stats_next || r->kind != MSP_DQ_RECORD ||
            q.bytes >= q.cap / 2) {
            unannounced = 0;
            pthread_cond_broadcast(&q.not_empty);
        }
        pthread_mutex_unlock(&q.mu);
        if (last)
            return NULL;
    }
}

/* 1: queued; 0: nothing to do (a marker before any record); -1: failed. */
static int enqueue(msp_dq_rec_t *r)
{
    pthread_mutex_lock(&q.mu);
    if (!q.started) {
        if (r->kind != MSP_DQ_RECORD) { /* nothing was ever written: nothing to close */
            pthread_mutex_unlock(&q.mu);
            msp_dq_rec_free(r);
            return 0;
        }
        sigset_t all, old;
        sigfillset(&all);
        /* Signals stay with the training threads (Ctrl-C must reach Python). */
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int rc = pthread_create(&q.thread, NULL, writer_main, NULL);
        if (rc == 0 && (rc = pthread_create(&q.sthread, NULL, stats_main, NULL)) != 0) {
            /* The writer thread must not wait for statistics that never come. */
            msp_dq_rec_t *stop = msp_dq_rec_new(NULL);
            if (stop) {
                stop->kind = MSP_DQ_SHUTDOWN;
                stop->stats_ready = 1;
                q.head = q.tail = stop;
                pthread_cond_signal(&q.not_empty);
                pthread_mutex_unlock(&q.mu);
                pthread_join(q.thread, NULL);
                pthread_mutex_lock(&q.mu);
            }
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc != 0) {
            pthread_mutex_unlock(&q.mu);
            msp_shim_warn_once("thread", "cannot start the writer thread: %s; nothing is dumped",
                               strerror(rc));
            msp_dq_rec_free(r);
            return -1;
        }
        q.started = 1;
    }
    /* A record larger than the whole bound still goes through, alone. */
    while (q.bytes > 0 && q.bytes + r->bytes > q.cap) {
        pthread_cond_signal(&q.work); /* records held back from it must drain */
        pthread_cond_wait(&q.not_full, &q.mu);
    }
    q.bytes += r->bytes;
    if (q.tail)
        q.tail->next = r;
    else
        q.head = r;
    q.tail = r;
    if (!q.stats_next)
        q.stats_next = r;
    if (r->kind == MSP_DQ_END_STEP)
        q.ends_queued++;
    if (q.stats_waiting) {
        q.unsignalled++;
        q.unsignalled_bytes += r->bytes;
        if (r->kind != MSP_DQ_RECORD || q.unsignalled >= MSP_WAKE_BATCH ||
            q.unsignalled_bytes >= MSP_WAKE_BYTES || q.bytes >= q.cap / 2) {
            q.unsignalled = 0;
            q.unsignalled_bytes = 0;
            pthread_cond_signal(&q.work);
        }
    }
    pthread_mutex_unlock(&q.mu);
    return 1;
}

static atomic_ullong g_backward_pushed;

void msp_dq_push(msp_dq_rec_t *r)
{
    r->kind = MSP_DQ_RECORD;
    if (r->name && strstr(r->name, ".backward"))
        atomic_fetch_add_explicit(&g_backward_pushed, 1, memory_order_relaxed);
    enqueue(r);
}

uint64_t msp_dq_backward_records(void)
{
    return (uint64_t)atomic_load_explicit(&g_backward_pushed, memory_order_relaxed);
}

void msp_dq_end_step(int64_t step)
{
    msp_dq_rec_t *r = msp_dq_rec_new(NULL);
    if (!r)
        return;
    r->kind = MSP_DQ_END_STEP;
    r->step = step;
    pthread_mutex_lock(&q.mu);
    uint64_t mine = q.ends_queued + 1;
    pthread_mutex_unlock(&q.mu);
    if (enqueue(r) != 1)
        return;
    /* Bounded lag: the previous step's file is in place before this step
     * returns (durable mode: this step's own file). */
    uint64_t need = q.durable ? mine : mine - 1;
    int stats = writer_stats();
    double t0 = stats ? mono_now() : 0;
    pthread_mutex_lock(&q.mu);
    while (q.started && q.ends_done < need)
        pthread_cond_wait(&q.ended, &q.mu);
    if (stats) {
        g_end_wait += mono_now() - t0;
        g_steps_end++;
    }
    pthread_mutex_unlock(&q.mu);
}

void msp_dq_shutdown(void)
{
    msp_dq_rec_t *r = msp_dq_rec_new(NULL);
    if (!r)
        return;
    r->kind = MSP_DQ_SHUTDOWN;
    pthread_mutex_lock(&q.mu);
    int started = q.started;
    pthread_mutex_unlock(&q.mu);
    if (!started) {
        msp_dq_rec_free(r);
        return;
    }
    enqueue(r);
    pthread_join(q.sthread, NULL);
    pthread_join(q.thread, NULL);
    pthread_mutex_lock(&q.mu);
    q.started = 0;
    pthread_mutex_unlock(&q.mu);
    msp_dq_say_lost(); /* the writer thread is joined: its ranges are final */
}

void msp_dq_forget_after_fork(void)
{
    /* The child has no writer thread and a copy of a mutex the parent's thread
     * may have held at fork time: start over with fresh, unlocked state and
     * leak the parent's queued records (freeing could touch freed memory). */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    memcpy(&q.mu, &fresh, sizeof fresh);
    memcpy(&q.not_empty, &c, sizeof c);
    memcpy(&q.not_full, &c, sizeof c);
    memcpy(&q.idle, &c, sizeof c);
    memcpy(&q.work, &c, sizeof c);
    memcpy(&q.ended, &c, sizeof c);
    q.ends_queued = q.ends_done = 0;
    q.stats_waiting = 0;
    q.unsignalled = 0;
    q.unsignalled_bytes = 0;
    q.stats_next = NULL;
    q.head = q.tail = NULL;
    q.bytes = 0;
    msp_dq_pool_forget_after_fork();
    q.started = 0;
    q.busy = 0;
    ovf.held = NULL;
    ovf.found = 0;
    atomic_store(&ovf_done, 0);
}
