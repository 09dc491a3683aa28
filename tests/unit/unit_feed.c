/* The reports' feed (src/compare/cmp_feed.c): one read of a tree's parts
 * shared by writers on threads of their own. Parts here are made by a loader
 * that counts its calls and marks each part with its index (n_pairs), so
 * the checks are against counts and indexes worked out here:
 *   - three readers taking every part get each part once, in order, and the
 *     loader runs once a part;
 *   - a reader that wants only some parts gets those, and the others pass
 *     it by (parts nobody wants are never loaded);
 *   - one reader served by four threads, each holding its part a while (the
 *     per-rank workbooks), beside a reader of every part: no wait goes round
 *     in a circle;
 *   - a part that fails to load is an error with the loader's message for
 *     every reader that wants it, and the others finish;
 *   - a reader that leaves early holds up no one.
 * Every scenario runs under a watchdog: a hang is a failure, not a stuck
 * test. */
#include "cmp_internal.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "unit_check.h"

#define PARTS 200
#define WINDOW 3

typedef struct loader {
    atomic_int calls[PARTS];
    long fail_at; /* -1: none */
} loader_t;

/* Part i, marked with i; a count of the calls for it. */
static msp_err load(const void *ud, size_t i, msp_compare_result_t **part)
{
    loader_t *l = (loader_t *)ud;
    atomic_fetch_add(&l->calls[i], 1);
    if ((long)i == l->fail_at)
        return msp_fail(MSP_ERR_IO, "part %zu: the disk is gone", i);
    msp_compare_result_t *p = cmp_result_new();
    if (!p)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    p->n_pairs = i; /* the mark readers check */
    *part = p;
    return MSP_OK;
}

static int wants_even(const void *ud, int reader, size_t i)
{
    (void)ud;
    return reader != 1 || i % 2 == 0;
}

static void nap(void)
{
    struct timespec ts = {0, (long)(rand() % 50) * 1000L};
    nanosleep(&ts, NULL);
}

typedef struct reader {
    cmp_feed_t *f;
    int id;
    size_t step;  /* 1: every part, 2: every other */
    size_t leave; /* leave before this part (PARTS: at the end) */
    size_t got, wrong, errors;
    char first_error[256];
} reader_t;

static void *read_all(void *arg)
{
    reader_t *r = arg;
    for (size_t i = 0; i < r->leave; i += r->step) {
        msp_compare_result_t *p = NULL;
        msp_err rc = cmp_feed_get(r->f, r->id, i, &p);
        if (rc) {
            if (!r->errors++)
                snprintf(r->first_error, sizeof r->first_error, "%s", msp_last_error());
            msp_clear_error();
            continue;
        }
        r->got++;
        r->wrong += p->n_pairs != i;
        nap();
        cmp_feed_put(r->f, r->id, p);
    }
    cmp_feed_leave(r->f, r->id);
    return NULL;
}

static void watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "unit_feed: a scenario hung (a wait went round in a circle)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

/* Three readers of every part. */
static void every_part_once(void)
{
    static loader_t l;
    memset(&l, 0, sizeof l);
    l.fail_at = -1;
    cmp_feed_t *f = NULL;
    CHECK_INT(cmp_feed_new(load, NULL, &l, 3, WINDOW, &f), MSP_OK);
    reader_t r[3];
    pthread_t th[3];
    for (int k = 0; k < 3; k++) {
        r[k] = (reader_t){.f = f, .id = k, .step = 1, .leave = PARTS};
        pthread_create(&th[k], NULL, read_all, &r[k]);
    }
    for (int k = 0; k < 3; k++) {
        pthread_join(th[k], NULL);
        CHECK_INT(r[k].got, PARTS);
        CHECK_INT(r[k].wrong, 0);
        CHECK_INT(r[k].errors, 0);
    }
    int loads = 0, twice = 0;
    for (int i = 0; i < PARTS; i++) {
        loads += l.calls[i];
        twice += l.calls[i] > 1;
    }
    CHECK_INT(loads, PARTS);
    CHECK_INT(twice, 0);
    cmp_feed_free(f);
}

/* Reader 1 wants the even parts; reader 0 stops after part 99 and leaves.
 * While it is there the feed may load an odd part for it, at most a
 * window past part 99 (reader 1 cannot get further ahead of it); after it
 * left, the odd parts are passed over, never loaded. */
static void some_parts(void)
{
    static loader_t l;
    memset(&l, 0, sizeof l);
    l.fail_at = -1;
    cmp_feed_t *f = NULL;
    CHECK_INT(cmp_feed_new(load, wants_even, &l, 2, WINDOW, &f), MSP_OK);
    reader_t r0 = {.f = f, .id = 0, .step = 1, .leave = 100};
    reader_t r1 = {.f = f, .id = 1, .step = 2, .leave = PARTS};
    pthread_t t0, t1;
    pthread_create(&t0, NULL, read_all, &r0);
    pthread_create(&t1, NULL, read_all, &r1);
    pthread_join(t0, NULL);
    pthread_join(t1, NULL);
    CHECK_INT(r0.got, 100);
    CHECK_INT(r1.got, PARTS / 2);
    CHECK_INT(r0.wrong + r1.wrong, 0);
    int odd_after = 0, even = 0;
    for (int i = 0; i < PARTS; i++) {
        odd_after += i >= 100 + WINDOW && i % 2 && l.calls[i];
        even += i % 2 == 0 && l.calls[i] == 1;
    }
    CHECK_INT(odd_after, 0);
    CHECK_INT(even, PARTS / 2);
    cmp_feed_free(f);
}

/* Reader 1 is four threads taking the next part from a counter, each
 * holding it a while; reader 0 takes every part. */
typedef struct books {
    cmp_feed_t *f;
    pthread_mutex_t mu;
    size_t next, got, wrong;
} books_t;

static void *book_thread(void *arg)
{
    books_t *b = arg;
    for (;;) {
        pthread_mutex_lock(&b->mu);
        size_t i = b->next++;
        pthread_mutex_unlock(&b->mu);
        if (i >= PARTS)
            return NULL;
        msp_compare_result_t *p = NULL;
        if (cmp_feed_get(b->f, 1, i, &p) != MSP_OK)
            return NULL;
        nap();
        nap();
        pthread_mutex_lock(&b->mu);
        b->got++;
        b->wrong += p->n_pairs != i;
        pthread_mutex_unlock(&b->mu);
        cmp_feed_put(b->f, 1, p);
    }
}

static void one_reader_on_four_threads(void)
{
    static loader_t l;
    memset(&l, 0, sizeof l);
    l.fail_at = -1;
    cmp_feed_t *f = NULL;
    CHECK_INT(cmp_feed_new(load, NULL, &l, 2, 4 + 2, &f), MSP_OK);
    books_t b = {f, PTHREAD_MUTEX_INITIALIZER, 0, 0, 0};
    reader_t r0 = {.f = f, .id = 0, .step = 1, .leave = PARTS};
    pthread_t th[5];
    pthread_create(&th[4], NULL, read_all, &r0);
    for (int k = 0; k < 4; k++)
        pthread_create(&th[k], NULL, book_thread, &b);
    for (int k = 0; k < 4; k++)
        pthread_join(th[k], NULL);
    cmp_feed_leave(f, 1);
    pthread_join(th[4], NULL);
    CHECK_INT(b.got, PARTS);
    CHECK_INT(b.wrong, 0);
    CHECK_INT(r0.got, PARTS);
    int loads = 0;
    for (int i = 0; i < PARTS; i++)
        loads += l.calls[i];
    CHECK_INT(loads, PARTS);
    cmp_feed_free(f);
}

/* Part 50 fails: both readers get its error, once, and read the rest. */
static void a_part_that_fails(void)
{
    static loader_t l;
    memset(&l, 0, sizeof l);
    l.fail_at = 50;
    cmp_feed_t *f = NULL;
    CHECK_INT(cmp_feed_new(load, NULL, &l, 2, WINDOW, &f), MSP_OK);
    reader_t r[2];
    pthread_t th[2];
    for (int k = 0; k < 2; k++) {
        r[k] = (reader_t){.f = f, .id = k, .step = 1, .leave = PARTS};
        pthread_create(&th[k], NULL, read_all, &r[k]);
    }
    for (int k = 0; k < 2; k++) {
        pthread_join(th[k], NULL);
        CHECK_INT(r[k].errors, 1);
        CHECK_INT(r[k].got, PARTS - 1);
        CHECK_HAS(r[k].first_error, "part 50: the disk is gone");
    }
    CHECK_INT(l.calls[50], 1);
    cmp_feed_free(f);
}

int main(void)
{
    signal(SIGALRM, watchdog);
    alarm(50);
    srand(7);
    every_part_once();
    some_parts();
    one_reader_on_four_threads();
    a_part_that_fails();
    return unit_done("unit_feed");
}
