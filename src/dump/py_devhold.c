/* Records whose device statistics are in flight (py_devstats.c launches
 * them and collects them, dev_poll): held back in submission order and
 * submitted when all their statistics are in, looked at every few
 * submissions, waited for when too many are held, before a step ends and at
 * exit; and what a record dropped, or a forked child, leaves behind. */
#include "py_devstats.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

msp_dq_rec_t **g_held;
size_t g_held_head, g_nheld, g_capheld;
unsigned g_hold_tick; /* records held so far (msp_dev_hold polls every few) */

/* Submit the held records whose statistics are all in, oldest first. */
static void held_release(void)
{
    while (g_held_head < g_nheld && g_held[g_held_head]->dev_pending == 0)
        msp_dq_push(g_held[g_held_head++]);
    if (g_held_head == g_nheld)
        g_held_head = g_nheld = 0;
}

static void flush_open(void)
{
    while (g_nopen > 0)
        win_retire(g_open[g_nopen - 1]);
}

int msp_dev_hold(msp_dq_rec_t *r)
{
    if (!r->dev_pending && g_held_head == g_nheld)
        return 0;
    if (g_nheld == g_capheld && g_held_head > 0) { /* full: released ones make room */
        memmove(g_held, g_held + g_held_head, (g_nheld - g_held_head) * sizeof *g_held);
        g_nheld -= g_held_head;
        g_held_head = 0;
    }
    msp_dq_rec_t **n = msp_grow(g_held, &g_capheld, g_nheld, sizeof *n, 64);
    if (!n) { /* keep the order: everything in, then this one */
        msp_dev_drain();
        return 0;
    }
    g_held = n;
    g_held[g_nheld++] = r;
    size_t held = g_nheld - g_held_head;
    if (held > MSP_DEV_HELD_FLUSH && held % MSP_DEV_HELD_FLUSH == 1)
        flush_open(); /* their results start coming; nothing waits */
    /* An event's query() costs a Python call and a driver call (5-10 us on
     * an H100 host): asked every MSP_DEV_POLL_EVERY records, not at each */
    if (++g_hold_tick % MSP_DEV_POLL_EVERY == 0) {
        dev_poll(0);
        held_release();
    }
    if (g_nheld - g_held_head > MSP_DEV_HELD_MAX) {
        flush_open();
        dev_poll(1);
        held_release();
    }
    return 1;
}

void msp_dev_drain(void)
{
    if (g_ndp == 0 && g_nheld == 0 && g_nopen == 0 && !g_flushed && !g_nretired)
        return;
    flush_open();
    /* another thread's poll, or put into a retired window: let it finish
     * first (this thread's own, from a signal handler run inside it: nothing
     * to wait for, it goes on after) */
    while ((g_dev_polling && !pthread_equal(g_dev_poller, pthread_self())) ||
           (g_nretired && !g_dev_polling)) {
        Py_BEGIN_ALLOW_THREADS usleep(200);
        Py_END_ALLOW_THREADS
    }
    dev_poll(1);
    held_release();
}

void msp_dev_forget_after_fork(void)
{
    /* the parent's: neither waited for nor freed here (this process dumps nothing) */
    g_dp_head = g_ndp = 0;
    g_held_head = g_nheld = 0;
    g_nopen = 0;
    g_nretired = 0;
    g_flushed = NULL;
    g_flushed_tail = &g_flushed;
    g_nflushed = 0;
    t_nput = 0;
}

static void win_forget(win_t *w, msp_dq_rec_t *r)
{
    for (size_t i = 0; r->dev_pending && i < w->nseg; i++)
        if (w->seg[i].rec == r) {
            w->seg[i].rec = NULL;
            r->dev_pending--;
        }
}

void msp_dev_forget(msp_dq_rec_t *r)
{
    /* its statistics in flight lose their record; the next poll releases them */
    for (size_t i = g_dp_head; r && r->dev_pending && i < g_ndp; i++)
        if (g_dp[i].rec == r) {
            g_dp[i].rec = NULL;
            r->dev_pending--;
        }
    for (size_t i = 0; r && r->dev_pending && i < t_nput; i++)
        if (t_put[i].rec == r) {
            t_put[i].rec = NULL;
            r->dev_pending--;
        }
    for (size_t i = 0; r && r->dev_pending && i < g_nopen; i++)
        win_forget(g_open[i], r);
    for (size_t i = 0; r && r->dev_pending && i < g_nretired; i++)
        win_forget(g_retired[i], r);
    for (win_t *w = g_flushed; r && r->dev_pending && w; w = w->next)
        win_forget(w, r);
}
