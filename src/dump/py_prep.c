/* Data preparation is not the model (msprobe-dump(1), DATA PREPARATION).
 *
 * Calls a script makes before its model first runs (building a dataset,
 * normalising the whole of it, making a table of inputs) are data
 * preparation, not model ops: a dump of them can be the biggest part of a
 * step (torchvision's MNIST views its whole dataset). So until the forward
 * of a root module first begins in this process, each record is held back
 * here instead of queued; when that forward begins the held records are
 * dropped (one line says how many). A script that never runs a module (a
 * purely functional one) loses nothing: at the end of each step and at exit
 * the held records go to the queue in their order. Holding is bounded: past
 * MSP_PREP_MAX_BYTES of tensor data or MSP_PREP_MAX_RECORDS records the held
 * records are queued and holding stops. MSPROBE_DUMP_DATA_PREP=1 keeps them
 * all, and so does an api_list (what it names is wanted wherever it is
 * called). The calls inside a Dataset's constructor or a DataLoader fetch are
 * never recorded in the first place (py_patch.c). */
#include "dump_py.h"

#include <stdlib.h>

#define MSP_PREP_MAX_BYTES ((size_t)64 << 20)
#define MSP_PREP_MAX_RECORDS 65536

static msp_dq_rec_t *g_head, *g_tail;
static size_t g_n, g_bytes;
static int g_done = -1; /* -1 unknown yet; 1: holding is over (model ran, gave up, or off) */
static uint64_t g_dropped;

static int prep_off(void)
{
    if (g_done < 0) {
        /* an api_list names what the user wants, wherever it is called */
        g_done = msp_env_flag("MSPROBE_DUMP_DATA_PREP") ||
                 (msp_g.have_cfg && msp_g.cfg.n_api_list > 0);
    }
    return g_done;
}

int msp_prep_hold(msp_dq_rec_t *r)
{
    if (prep_off())
        return 0;
    if (g_n >= MSP_PREP_MAX_RECORDS || g_bytes + r->bytes > MSP_PREP_MAX_BYTES) {
        /* too much to hold: keep it all, in order, from here on */
        msp_prep_release();
        g_done = 1;
        return 0;
    }
    r->next = NULL;
    if (g_tail)
        g_tail->next = r;
    else
        g_head = r;
    g_tail = r;
    g_n++;
    g_bytes += r->bytes;
    return 1;
}

/* Empties the hold; returns what it held, in order, for the caller to pass
 * on one by one (queued or dropped). */
static msp_dq_rec_t *prep_take(void)
{
    msp_dq_rec_t *r = g_head;
    g_head = g_tail = NULL;
    g_n = g_bytes = 0;
    return r;
}

/* The next held record, r detached from the list. */
static msp_dq_rec_t *prep_next(msp_dq_rec_t *r)
{
    msp_dq_rec_t *next = r->next;
    r->next = NULL;
    return next;
}

void msp_rec_queue(msp_dq_rec_t *r)
{
    r->order = msp_g.order++;
    msp_stack_commit(r);
    if (!msp_dev_hold(r))
        msp_dq_push(r);
}

void msp_prep_release(void)
{
    for (msp_dq_rec_t *r = prep_take(), *next; r; r = next) {
        next = prep_next(r);
        msp_rec_queue(r);
    }
}

void msp_prep_model_started(void)
{
    if (prep_off())
        return;
    g_done = 1;
    for (msp_dq_rec_t *r = prep_take(), *next; r; r = next) {
        next = prep_next(r);
        msp_rec_drop(r);
        g_dropped++;
    }
    /* no input may name a dropped record as its producer (a weight scaled
     * in place before training would look produced by an op not in the file) */
    if (g_dropped)
        msp_links_reset();
    if (g_dropped)
        msp_shim_msg("%llu call%s made before the model's first forward %s data preparation "
                     "and %s not dumped (MSPROBE_DUMP_DATA_PREP=1 keeps them)",
                     (unsigned long long)g_dropped, g_dropped == 1 ? "" : "s",
                     g_dropped == 1 ? "is" : "are", g_dropped == 1 ? "is" : "are");
}
