/* What the monitor gives its helper thread (py_monitor_thread.c), so that
 * the training thread reads as little as it can:
 *
 *   beside     the gradients, while the optimizer's step (which only reads
 *              them) runs; AdamW's exp_avg and exp_avg_sq, which change
 *              only in the optimizer's step, for the next step while its
 *              forward and backward run; half of the weights' passes while
 *              the training thread does the other half and waits.
 *   checked    a result is used only if the tensor's version counter
 *              (torch's _version, which every in-place write through it
 *              moves) has not moved since the pass was asked for: a tensor
 *              written meanwhile may have been read half old, half new.
 *   the files  the CSV files of a step (msp_mon_helper), in step order.
 *
 * (A large activation or gradient read in a hook is shared with it piece by
 * piece: py_monitor_stats.c.) The helper thread never touches Python: it
 * reads tensors in place, of which the memo holds a reference until it is
 * done (GIL held to take and drop them). */
#include "py_monitor_ahead.h"

#include "py_monitor_thread.h"

void msp_mon_ahead_join(void)
{
    if (!msp_mon_thread_started())
        return;
    Py_BEGIN_ALLOW_THREADS msp_mon_thread_join();
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

int msp_mon_memo_get(msp_mon_memo_t *m, PyObject *t, msp_mon_stat_t *out)
{
    settle(m);
    if (m->state != 1 || m->obj != t || msp_tensor_version(t) != m->version)
        return 0;
    *out = m->st;
    return 1;
}

void msp_mon_helper(void (*fn)(void *), void *arg)
{
    if (msp_mon_thread_queue(fn, arg) != 0)
        fn(arg);
}

/* On the helper thread: m's pass (read by the training thread only once
 * settled). */
static void memo_pass(void *arg)
{
    msp_mon_memo_t *m = arg;
    msp_mon_stats_pass(&m->h, m->eps, &m->st);
    m->state = 1;
}

void msp_mon_ahead(msp_mon_memo_t *m, PyObject *t, double eps)
{
    msp_mon_memo_clear(m);
    int64_t v = msp_tensor_version(t);
    if (msp_mon_thread_failed() || v < 0 || !msp_mon_stats_host(t, &m->st, &m->h))
        return;
    m->eps = eps;
    m->version = v;
    m->state = 2;
    if (msp_mon_thread_queue(memo_pass, m) != 0) {
        m->state = 0;
        return;
    }
    Py_INCREF(t);
    m->obj = t;
    m->ahead = 1;
}
