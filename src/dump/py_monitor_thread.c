/* The monitor's helper thread (monitor mode; what it is given to do:
 * py_monitor_ahead.c): one thread started at the first need, running queued
 * work in order; and, ahead of that queue whenever it is free, pieces of
 * work the training thread is doing at that moment (msp_mon_thread_split),
 * taken piece by piece from a shared counter, so that the training thread
 * never waits for the helper's other work. It never touches Python. (A
 * process forked from a monitored one raises no monitor events: py_ident.c.) */
#include "py_monitor_thread.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef struct job {
    void (*fn)(void *);
    void *arg;
} job_t;

/* Work shared by the two threads (msp_mon_thread_split). */
typedef struct split {
    void (*work)(void *arg, int i);
    void *arg;
    int n;
    atomic_int next; /* the next piece not taken */
    int inside;      /* the helper is taking pieces (g_mu) */
} split_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_work = PTHREAD_COND_INITIALIZER, g_idle = PTHREAD_COND_INITIALIZER,
                      g_left = PTHREAD_COND_INITIALIZER;
static job_t *g_jobs;
static size_t g_head, g_n, g_cap;
static int g_busy, g_started, g_failed;
static pthread_t g_thread;
static split_t *g_split;   /* work to share now, or NULL (g_mu) */
static unsigned g_split_n; /* how many were offered: the helper takes each once */

/* Pieces of s until none is left. */
static void split_take(split_t *s)
{
    for (int i; (i = atomic_fetch_add(&s->next, 1)) < s->n;)
        s->work(s->arg, i);
}

/* The helper's share of g_split (g_mu held, and held again on return). */
static void split_help(void)
{
    split_t *s = g_split;
    s->inside = 1;
    pthread_mutex_unlock(&g_mu);
    split_take(s);
    pthread_mutex_lock(&g_mu);
    s->inside = 0;
    pthread_cond_signal(&g_left);
}

static void *helper(void *arg)
{
    (void)arg;
    unsigned helped = 0;
    pthread_mutex_lock(&g_mu);
    for (;;) {
        while (g_head == g_n && !(g_split && helped != g_split_n))
            pthread_cond_wait(&g_work, &g_mu);
        if (g_split && helped != g_split_n) {
            helped = g_split_n;
            split_help();
            continue;
        }
        job_t j = g_jobs[g_head++];
        g_busy = 1;
        pthread_mutex_unlock(&g_mu);
        j.fn(j.arg);
        pthread_mutex_lock(&g_mu);
        g_busy = 0;
        if (g_head == g_n) {
            g_head = g_n = 0;
            pthread_cond_broadcast(&g_idle);
        }
    }
    return NULL;
}

/* The helper thread running, started if need be (g_mu held): 1, or 0 when
 * it cannot be. */
static int started(void)
{
    if (!g_started && !g_failed) {
        g_started = pthread_create(&g_thread, NULL, helper, NULL) == 0;
        g_failed = !g_started;
        if (g_started)
            pthread_detach(g_thread);
    }
    return g_started;
}

int msp_mon_thread_queue(void (*fn)(void *), void *arg)
{
    pthread_mutex_lock(&g_mu);
    int rc = -1;
    if (started() && g_n == g_cap) {
        size_t cap = g_cap ? 2 * g_cap : 64;
        job_t *nj = realloc(g_jobs, cap * sizeof *nj);
        if (nj) {
            g_jobs = nj;
            g_cap = cap;
        }
    }
    if (g_started && g_n < g_cap) {
        g_jobs[g_n++] = (job_t){fn, arg};
        pthread_cond_signal(&g_work);
        rc = 0;
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

int msp_mon_thread_started(void)
{
    return g_started;
}

int msp_mon_thread_failed(void)
{
    return g_failed;
}

void msp_mon_thread_join(void)
{
    pthread_mutex_lock(&g_mu);
    while (g_started && (g_head != g_n || g_busy))
        pthread_cond_wait(&g_idle, &g_mu);
    pthread_mutex_unlock(&g_mu);
}

void msp_mon_thread_split(void (*work)(void *arg, int i), void *arg, int n)
{
    split_t s = {work, arg, n, 0, 0};
    pthread_mutex_lock(&g_mu);
    int offered = started() && !g_split;
    if (offered) {
        g_split = &s;
        g_split_n++;
        pthread_cond_signal(&g_work);
    }
    pthread_mutex_unlock(&g_mu);
    split_take(&s);
    if (!offered)
        return;
    pthread_mutex_lock(&g_mu);
    g_split = NULL;
    while (s.inside)
        pthread_cond_wait(&g_left, &g_mu);
    pthread_mutex_unlock(&g_mu);
}
