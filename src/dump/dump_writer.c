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
#include "dump_py.h"

#include <errno.h>
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
    pthread_cond_t work;           /* records for the statistics thread */
    msp_dq_rec_t *stats_next;      /* first record it has not seen */
    pthread_t sthread;
    char *dump_path, *task, *dump_mode, *framework_version;
    int statistics, durable;
    size_t cap;
    int64_t world_size;
} q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
       PTHREAD_COND_INITIALIZER, NULL, NULL, 0, 0, 0, 0, PTHREAD_COND_INITIALIZER, NULL, 0,
       NULL, NULL, NULL, NULL, 0, 0, 0, 1};

/* ---- buffer pool ------------------------------------------------------ */

#define MSP_POOL_MIN ((size_t)64 << 10) /* below this malloc is cheap enough */
#define MSP_POOL_SLOTS 512

static struct {
    pthread_mutex_t mu;
    void *buf[MSP_POOL_SLOTS];
    size_t size[MSP_POOL_SLOTS];
    int n;
    size_t bytes, cap;
} pool = {PTHREAD_MUTEX_INITIALIZER, {NULL}, {0}, 0, 0, (size_t)128 << 20};

void *msp_dq_buf_get(size_t nbytes)
{
    if (nbytes >= MSP_POOL_MIN) {
        pthread_mutex_lock(&pool.mu);
        for (int i = pool.n - 1; i >= 0; i--)
            if (pool.size[i] == nbytes) {
                void *b = pool.buf[i];
                pool.n--;
                pool.buf[i] = pool.buf[pool.n];
                pool.size[i] = pool.size[pool.n];
                pool.bytes -= nbytes;
                pthread_mutex_unlock(&pool.mu);
                return b;
            }
        pthread_mutex_unlock(&pool.mu);
    }
    return malloc(nbytes ? nbytes : 1);
}

void msp_dq_buf_put(void *buf, size_t nbytes)
{
    if (!buf)
        return;
    if (nbytes >= MSP_POOL_MIN) {
        pthread_mutex_lock(&pool.mu);
        /* Full pool: the oldest buffer makes room (shapes of past steps go first). */
        while (pool.n > 0 && (pool.n == MSP_POOL_SLOTS || pool.bytes + nbytes > pool.cap)) {
            free(pool.buf[0]);
            pool.bytes -= pool.size[0];
            pool.n--;
            memmove(pool.buf, pool.buf + 1, (size_t)pool.n * sizeof *pool.buf);
            memmove(pool.size, pool.size + 1, (size_t)pool.n * sizeof *pool.size);
        }
        if (pool.bytes + nbytes <= pool.cap) {
            pool.buf[pool.n] = buf;
            pool.size[pool.n++] = nbytes;
            pool.bytes += nbytes;
            buf = NULL;
        }
        pthread_mutex_unlock(&pool.mu);
    }
    free(buf);
}

/* ---- records ----------------------------------------------------------- */

int msp_dq_init(const msp_dq_params_t *p)
{
    q.dump_path = strdup(p->dump_path);
    q.task = strdup(p->task);
    q.dump_mode = strdup(p->dump_mode);
    q.framework_version = strdup("unknown");
    q.statistics = p->statistics;
    q.durable = p->durable;
    q.cap = p->queue_bytes ? p->queue_bytes : (size_t)256 << 20;
    pool.cap = q.cap / 2;
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

msp_dq_rec_t *msp_dq_rec_new(const char *name)
{
    msp_dq_rec_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    if (name && !(r->name = strdup(name))) {
        free(r);
        return NULL;
    }
    return r;
}

int msp_dq_rec_add_tensor(msp_dq_rec_t *r, const char *role, msp_dtype_t dt, int ndim,
                          const int64_t *shape, void *data, size_t nbytes, const char *device,
                          int requires_grad)
{
    if (r->nt == r->cap_t) {
        size_t cap = r->cap_t ? 2 * r->cap_t : 4;
        msp_dq_tensor_t *t = realloc(r->t, cap * sizeof *t);
        if (!t) {
            msp_dq_buf_put(data, nbytes);
            return -1;
        }
        r->t = t;
        r->cap_t = cap;
    }
    msp_dq_tensor_t *t = &r->t[r->nt];
    memset(t, 0, sizeof *t);
    if (!(t->role = strdup(role))) {
        msp_dq_buf_put(data, nbytes);
        return -1;
    }
    t->dtype = dt;
    t->ndim = ndim;
    if (ndim > 0)
        memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->data = data;
    t->nbytes = nbytes;
    snprintf(t->device, sizeof t->device, "%s", device ? device : "cpu");
    t->requires_grad = requires_grad;
    r->bytes += nbytes;
    r->nt++;
    return 0;
}

int msp_dq_rec_add_attr(msp_dq_rec_t *r, const char *key, const char *value)
{
    if (r->na == r->cap_a) {
        size_t cap = r->cap_a ? 2 * r->cap_a : 4;
        msp_dq_attr_t *a = realloc(r->a, cap * sizeof *a);
        if (!a)
            return -1;
        r->a = a;
        r->cap_a = cap;
    }
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return -1;
    }
    r->a[r->na].key = k;
    r->a[r->na].value = v;
    r->na++;
    return 0;
}

void msp_dq_rec_free(msp_dq_rec_t *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nt; i++) {
        free(r->t[i].role);
        free(r->t[i].producer);
        msp_dq_buf_put(r->t[i].data, r->t[i].nbytes);
    }
    for (size_t i = 0; i < r->na; i++) {
        free(r->a[i].key);
        free(r->a[i].value);
    }
    free(r->t);
    free(r->a);
    free(r->name);
    free(r);
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
    int64_t step, rank;    /* of the open file */
    int64_t failed_step;   /* a step whose file could not be opened: drop its records */
    int64_t failed_rank;
} wstate_t;

/* Durable mode: the step and rank directories made for the file must
 * survive a machine crash too (the file's own entry is synced at its close). */
static void sync_step_dirs(int64_t step)
{
    char *dir = msp_asprintf("%s/step%lld", q.dump_path, (long long)step);
    if (!dir || msp_sync_dir(dir) != MSP_OK || msp_sync_dir(q.dump_path) != MSP_OK)
        msp_shim_warn_once("sync", "step %lld's directories may not be on disk: %s",
                           (long long)step, dir ? msp_last_error() : "out of memory");
    free(dir);
}

static void close_file(wstate_t *s)
{
    if (!s->w)
        return;
    if (msp_writer_close(s->w) != MSP_OK && (g_write_failed = 1))
        msp_shim_warn_once("io", "cannot finish step %lld's dump file: %s; that file may "
                           "lack its index or not be on disk", (long long)s->step,
                           msp_last_error());
    else if (q.durable)
        sync_step_dirs(s->step);
    s->w = NULL;
}

static int open_file(wstate_t *s, int64_t step, int64_t rank)
{
    char *dir = msp_asprintf("%s/step%lld/rank%lld", q.dump_path, (long long)step, (long long)rank);
    char *path = dir ? msp_asprintf("%s/dump.h5", dir) : NULL;
    int ok = 0;
    if (!path) {
        msp_shim_warn_once("nomem", "out of memory opening a dump file; records dropped");
        goto cleanup;
    }
    if (msp_mkdirs(dir) != MSP_OK) {
        msp_shim_warn_once("io", "cannot create %s: %s; records of this step are dropped",
                           dir, msp_last_error());
        goto cleanup;
    }
    pthread_mutex_lock(&q.mu);
    msp_dump_meta_t meta = {"pytorch", q.framework_version, q.task, q.dump_mode, step, rank,
                            q.world_size};
    pthread_mutex_unlock(&q.mu);
    msp_err orc = msp_writer_open(path, &meta, &s->w);
    arm_exit_guard(); /* HDF5 is initialised now: its atexit handler is registered */
    if (orc != MSP_OK) {
        s->w = NULL;
        g_write_failed = 1;
        msp_shim_warn_once("io", "cannot create %s: %s; records of this step are dropped",
                           path, msp_last_error());
        goto cleanup;
    }
    msp_writer_set_durable(s->w, q.durable);
    ok = 1;
cleanup:
    if (!ok) {
        s->failed_step = step;
        s->failed_rank = rank;
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
        return;
    }
    for (size_t i = 0; i < r->nt && rc == MSP_OK; i++) {
        msp_dq_tensor_t *t = &r->t[i];
        msp_tensor_in_t in = {t->role, t->dtype, t->ndim, t->shape, t->data,
                              t->has_stats ? &t->stats : NULL, t->device, t->requires_grad,
                              t->producer};
        if (q.statistics && t->has_stats)
            in.data = NULL;
        rc = msp_writer_add_tensor(s->w, &in);
        if (rc != MSP_OK && (g_write_failed = 1))
            msp_shim_warn_once(rc == MSP_ERR_IO || rc == MSP_ERR_HDF5 ? "io" : "tensor",
                               "%s/%s not written: %s", r->name, t->role, msp_last_error());
    }
    for (size_t i = 0; i < r->na; i++)
        if (msp_writer_set_attr(s->w, r->a[i].key, r->a[i].value) != MSP_OK)
            msp_shim_warn_once("attr", "%s: attribute %s not written: %s", r->name, r->a[i].key,
                               msp_last_error());
    if (msp_writer_end_record(s->w) != MSP_OK)
        msp_shim_warn_once("record", "record %s not finished: %s", r->name, msp_last_error());
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

static void *writer_main(void *arg)
{
    (void)arg;
    wstate_t s = {NULL, -1, -1, -1, -1};
    /* MSPROBE_WRITER_STATS=1: one line at exit with the writer's own throughput
     * (bench/dump/run.sh compares it with dd). */
    int stats = msp_env_flag("MSPROBE_WRITER_STATS");
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

        int kind = r->kind;
        double t0 = stats ? mono_now() : 0, c0 = stats ? cpu_now() : 0;
        if (kind == MSP_DQ_RECORD)
            write_record(&s, r);
        else if (kind == MSP_DQ_END_STEP && s.w && s.step == r->step)
            close_file(&s);
        else if (kind == MSP_DQ_SHUTDOWN)
            close_file(&s);
        size_t bytes = r->bytes;
        if (stats) {
            busy += mono_now() - t0;
            oncpu += cpu_now() - c0;
            written += bytes;
        }
        if (stats && kind == MSP_DQ_SHUTDOWN)
            msp_shim_msg("writer: %llu bytes of tensors in %.3f s busy (%.0f MB/s), %.3f s of it "
                         "on a CPU", (unsigned long long)written, busy,
                         busy > 0 ? (double)written / busy / 1e6 : 0.0, oncpu);
        msp_dq_rec_free(r);

        /* The bytes are released only now that they are freed: the bound is
         * on memory held, not on records waiting. */
        pthread_mutex_lock(&q.mu);
        q.bytes -= bytes;
        pthread_cond_broadcast(&q.not_full);
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
    for (;;) {
        pthread_mutex_lock(&q.mu);
        while (!q.stats_next)
            pthread_cond_wait(&q.work, &q.mu);
        msp_dq_rec_t *r = q.stats_next;
        pthread_mutex_unlock(&q.mu);

        for (size_t i = 0; r->kind == MSP_DQ_RECORD && i < r->nt; i++) {
            msp_dq_tensor_t *t = &r->t[i];
            size_t es = msp_dtype_size(t->dtype);
            msp_stats_compute(t->dtype, t->data, es ? t->nbytes / es : 0, &t->stats);
            t->has_stats = 1;
        }

        pthread_mutex_lock(&q.mu);
        r->stats_ready = 1;
        q.stats_next = r->next;
        int last = r->kind == MSP_DQ_SHUTDOWN;
        pthread_cond_broadcast(&q.not_empty);
        pthread_mutex_unlock(&q.mu);
        if (last)
            return NULL;
    }
}

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
    while (q.bytes > 0 && q.bytes + r->bytes > q.cap)
        pthread_cond_wait(&q.not_full, &q.mu);
    q.bytes += r->bytes;
    if (q.tail)
        q.tail->next = r;
    else
        q.head = r;
    q.tail = r;
    if (!q.stats_next)
        q.stats_next = r;
    pthread_cond_signal(&q.work);
    pthread_mutex_unlock(&q.mu);
    return 0;
}

void msp_dq_push(msp_dq_rec_t *r)
{
    r->kind = MSP_DQ_RECORD;
    enqueue(r);
}

void msp_dq_end_step(int64_t step)
{
    msp_dq_rec_t *r = msp_dq_rec_new(NULL);
    if (!r)
        return;
    r->kind = MSP_DQ_END_STEP;
    r->step = step;
    enqueue(r);
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
    q.stats_next = NULL;
    q.head = q.tail = NULL;
    q.bytes = 0;
    memcpy(&pool.mu, &fresh, sizeof fresh);
    pool.n = 0;
    pool.bytes = 0;
    q.started = 0;
    q.busy = 0;
}
