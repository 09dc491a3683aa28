/* Statistics remembered and computed ahead (monitor mode), so that the
 * training thread reads each tensor as few times as it can:
 *
 *   remembered  a tensor whose version counter (torch's _version, which
 *               every in-place write moves) has not moved since its
 *               statistics were taken has the same statistics: the
 *               gradient taken at its AccumulateGrad hook (grad_unreduced)
 *               is grad_reduced at the optimizer's step unless something
 *               (DDP's all-reduce, clipping, another micro-batch) wrote to
 *               it; the weights after a step (param_updated) are the next
 *               step's param_origin.
 *   ahead       AdamW's exp_avg and exp_avg_sq change only in the
 *               optimizer's step, so after one step their statistics for
 *               the next are computed on a helper thread while the next
 *               forward and backward run, and checked by version when
 *               they are used.
 *
 * The helper thread never touches Python: it reads tensors in place, of
 * which the memo holds a reference until it is done (GIL held to take and
 * drop them). */
#include "py_monitor_ahead.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct job {
    msp_mon_memo_t *m; /* statistics into m; or, when NULL, fn(arg) */
    msp_mon_host_t h;
    double eps;
    void (*fn)(void *);
    void *arg;
} job_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_work = PTHREAD_COND_INITIALIZER, g_idle = PTHREAD_COND_INITIALIZER;
static job_t *g_jobs;
static size_t g_head, g_n, g_cap;
static int g_busy, g_started, g_failed;
static pthread_t g_thread;

static void *helper(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_mu);
    for (;;) {
        while (g_head == g_n)
            pthread_cond_wait(&g_work, &g_mu);
        job_t j = g_jobs[g_head++];
        g_busy = 1;
        pthread_mutex_unlock(&g_mu);
        msp_mon_stat_t st;
        if (j.m) {
            st = j.m->st; /* shape and dtype, filled when asked */
            msp_mon_stats_pass(&j.h, j.eps, &st);
        } else
            j.fn(j.arg);
        pthread_mutex_lock(&g_mu);
        if (j.m) {
            j.m->st = st;
            j.m->state = 1;
        }
        g_busy = 0;
        if (g_head == g_n) {
            g_head = g_n = 0;
            pthread_cond_broadcast(&g_idle);
        }
    }
    return NULL;
}

void msp_mon_ahead_join(void)
{
    if (!g_started)
        return;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&g_mu);
    while (g_head != g_n || g_busy)
        pthread_cond_wait(&g_idle, &g_mu);
    pthread_mutex_unlock(&g_mu);
    Py_END_ALLOW_THREADS
}

/* The helper is done with m, and what it wrote is seen (the join's lock). */
static void settle(msp_mon_memo_t *m)
{
    if (m->ahead) {
        msp_mon_ahead_join();
        m->ahead = 0;
    }
}

void msp_mon_memo_clear(msp_mon_memo_t *m)
{
    settle(m);
    Py_CLEAR(m->obj);
    m->state = 0;
}

void msp_mon_memo_note(msp_mon_memo_t *m, PyObject *t, const msp_mon_stat_t *st)
{
    msp_mon_memo_clear(m);
    int64_t v = st && st->have == 1 ? msp_tensor_version(t) : -1;
    if (v < 0)
        return;
    Py_INCREF(t);
    m->obj = t;
    m->version = v;
    m->st = *st;
    m->state = 1;
}

int msp_mon_memo_get(msp_mon_memo_t *m, PyObject *t, msp_mon_stat_t *out)
{
    settle(m);
    if (m->state != 1 || m->obj != t || msp_tensor_version(t) != m->version)
        return 0;
    *out = m->st;
    return 1;
}

/* Queue j (g_mu held): 0, or -1 when there is no helper or no room. */
static int enqueue(job_t j)
{
    if (!g_started && !g_failed) {
        g_started = pthread_create(&g_thread, NULL, helper, NULL) == 0;
        g_failed = !g_started;
        if (g_started)
            pthread_detach(g_thread);
    }
    if (g_n == g_cap && !g_failed) {
        size_t cap = g_cap ? 2 * g_cap : 64;
        job_t *nj = realloc(g_jobs, cap * sizeof *nj);
        if (nj) {
            g_jobs = nj;
            g_cap = cap;
        }
    }
    if (g_failed || g_n == g_cap)
        return -1;
    g_jobs[g_n++] = j;
    pthread_cond_signal(&g_work);
    return 0;
}

void msp_mon_helper(void (*fn)(void *), void *arg)
{
    pthread_mutex_lock(&g_mu);
    int rc = enqueue((job_t){NULL, {NULL, 0, 0}, 0, fn, arg});
    pthread_mutex_unlock(&g_mu);
    if (rc != 0)
        fn(arg);
}

void msp_mon_ahead(msp_mon_memo_t *m, PyObject *t, double eps)
{
    msp_mon_memo_clear(m);
    msp_mon_host_t h;
    int64_t v = msp_tensor_version(t);
    if (g_failed || v < 0 || !msp_mon_stats_host(t, &m->st, &h))
        return;
    pthread_mutex_lock(&g_mu);
    if (enqueue((job_t){m, h, eps, NULL, NULL}) == 0) {
        Py_INCREF(t);
        m->obj = t;
        m->version = v;
        m->state = 2;
        m->ahead = 1;
    }
    pthread_mutex_unlock(&g_mu);
}
