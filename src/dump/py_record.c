/* A record's way out, in one file: submitted (msp_rec_submit: the config's
 * rank and direction filter, DataLoader workers), held while it may be data
 * preparation (below), queued with its order (msp_rec_queue: its call site
 * deduplicated, held back for device statistics in flight, then to the
 * writer's queue), or dropped (msp_rec_drop).
 *
 * Data preparation is not the model (msprobe-dump(1), WHAT GETS WRITTEN).
 *
 * Calls a script makes before its training loop (building a dataset,
 * normalising the whole of it, making a table of inputs) are data
 * preparation, not model ops: a dump of them can be the biggest part of a
 * step (torchvision's MNIST views its whole dataset). Calls in the loop's
 * body before the model runs (resizing or normalising the batch, in the
 * body or a function it calls) are the step's own, as they are in every
 * later step. Which is which is told by where a call is made, once: until
 * the forward of a root module first begins in this process, each record is
 * held back here instead of queued, with the frames of its call (identities
 * and positions, no references: msp_stack_refs). When that forward begins,
 * the frame that calls it (or the nearest one outwards that has one) and the
 * loops of its code around the call are found (msp_stack_call_loop); a held
 * record whose call passed through that very frame at a place inside the
 * innermost of them is loop body and is queued, in its order; one made in an
 * outer loop only waits, its place in the order kept, for the step's first
 * optimizer step (msp_prep_optimizer_step): the loop of a step is the one
 * that holds both the forward and the optimizer's step, so with gradient
 * accumulation (micro-batches in an inner loop, the batch prepared and the
 * step taken in the outer one) the outer body is the step's too. Without an
 * optimizer step in the step those are dropped at its end, as is every
 * record made outside the loops (one line says how many). No loop found (a
 * model called once, at the top of the script): all are dropped. A script
 * that never runs a module (a purely functional one) loses nothing: at the
 * end of each step and at exit the held records go to the queue in their
 * order. Holding is bounded: past MSP_PREP_MAX_BYTES of tensor data or
 * MSP_PREP_MAX_RECORDS records the held records are queued and holding
 * stops. MSPROBE_DUMP_DATA_PREP=1 keeps them all, and so does an api_list
 * (what it names is wanted wherever it is called). The calls inside a
 * Dataset's constructor or a DataLoader fetch are never recorded in the first
 * place (py_patch.c).
 *
 * A pre-loop call of an API the loop body calls too still takes its number
 * (records are named when made), so those loop-body records of step 0 are
 * numbered after it, unlike step 1's. */
#include "dump_py.h"

#include <stdlib.h>

#define MSP_PREP_MAX_BYTES ((size_t)64 << 20)
#define MSP_PREP_MAX_RECORDS 65536
#define MSP_PREP_FRAMES 64 /* frames kept of a held record's call */

static msp_dq_rec_t *g_head, *g_tail;
static size_t g_n, g_bytes;
static int g_done = -1; /* -1 unknown yet; 1: holding is over (model ran, gave up, or off) */
static uint64_t g_dropped;
/* Records made in an outer loop only, waiting for the optimizer's step to
 * say whether that loop is the step's (their order already given), each
 * with the index of the innermost of g_loop's loops it was made in. */
static msp_dq_rec_t *g_outer, *g_outer_tail;
static int *g_outer_depth;
static size_t g_n_outer, g_cap_outer;
static msp_frame_loop_t g_loop;
/* The frames of each held record's call: held record i has g_span[i].n of
 * them, from g_refs[g_span[i].at]. */
typedef struct {
    size_t at;
    int n;
} span_t;
static msp_frame_ref_t *g_refs;
static span_t *g_span;
static size_t g_nrefs, g_caprefs, g_capspans;

/* Notes where held record number g_n is made (nothing when out of memory:
 * then it counts as made outside the loop). */
static void note_frames(void)
{
    span_t *span = msp_grow(g_span, &g_capspans, g_n, sizeof *g_span, 256);
    if (!span)
        return;
    g_span = span;
    span[g_n] = (span_t){g_nrefs, 0};
    msp_frame_ref_t *refs = msp_grow(g_refs, &g_caprefs, g_nrefs + MSP_PREP_FRAMES, sizeof *g_refs,
                                     4096);
    if (!refs)
        return;
    g_refs = refs;
    span[g_n].n = msp_stack_refs(refs + g_nrefs, MSP_PREP_FRAMES);
    g_nrefs += (size_t)span[g_n].n;
}

/* The innermost of loop's loops that frames refs[0..n) passed through, or
 * -1 when none. */
static int loop_depth(const msp_frame_ref_t *refs, int n, const msp_frame_loop_t *loop)
{
    int best = -1;
    for (int k = 0; k < n; k++) {
        int d = msp_stack_loop_of(&refs[k], loop);
        if (d >= 0 && (best < 0 || d < best))
            best = d;
    }
    return best;
}

/* Where held record i was made: loop_depth of its call's frames. */
static int made_in(size_t i, const msp_frame_loop_t *loop)
{
    if (i >= g_capspans)
        return -1;
    return loop_depth(g_refs + g_span[i].at, g_span[i].n, loop);
}

static void frames_free(void)
{
    free(g_refs);
    free(g_span);
    g_refs = NULL;
    g_span = NULL;
    g_nrefs = g_caprefs = g_capspans = 0;
}

static int prep_off(void)
{
    if (g_done < 0) {
        /* an api_list names what the user wants, wherever it is called */
        g_done = msp_env_flag("MSPROBE_DUMP_DATA_PREP") ||
                 (msp_g.have_cfg && msp_cfg->n_api_list > 0);
    }
    return g_done;
}

/* r at the end of the list head .. tail. */
static void list_append(msp_dq_rec_t **head, msp_dq_rec_t **tail, msp_dq_rec_t *r)
{
    r->next = NULL;
    if (*tail)
        (*tail)->next = r;
    else
        *head = r;
    *tail = r;
}

int msp_prep_hold(msp_dq_rec_t *r)
{
    if (prep_off())
        return 0;
    if (g_n >= MSP_PREP_MAX_RECORDS || g_bytes + r->bytes > MSP_PREP_MAX_BYTES) {
        /* too much to hold: keep it all, in order, from here on */
        msp_prep_release();
        frames_free();
        g_done = 1;
        return 0;
    }
    note_frames();
    list_append(&g_head, &g_tail, r);
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
    g_nrefs = 0;
    return r;
}

/* The next held record, r detached from the list. */
static msp_dq_rec_t *prep_next(msp_dq_rec_t *r)
{
    msp_dq_rec_t *next = r->next;
    r->next = NULL;
    return next;
}

/* r to the queue with the order it has. */
static void queue_ordered(msp_dq_rec_t *r)
{
    msp_stack_commit(r);
    if (!msp_dev_hold(r))
        msp_dq_push(r);
}

void msp_rec_queue(msp_dq_rec_t *r)
{
    r->order = msp_g.order++;
    queue_ordered(r);
}

/* r waits for the optimizer's step, its order taken now; 0, or -1 when
 * there is no room to note its depth (then it is dropped). */
static int outer_wait(msp_dq_rec_t *r, int depth)
{
    int *d = msp_grow(g_outer_depth, &g_cap_outer, g_n_outer, sizeof *d, 64);
    if (!d)
        return -1;
    g_outer_depth = d;
    d[g_n_outer++] = depth;
    r->order = msp_g.order++;
    list_append(&g_outer, &g_outer_tail, r);
    return 0;
}

static void say_dropped(uint64_t n, const char *where)
{
    if (n)
        msp_shim_msg("%llu call%s made %s %s data preparation and %s not dumped "
                     "(MSPROBE_DUMP_DATA_PREP=1 keeps them)",
                     (unsigned long long)n, n == 1 ? "" : "s", where, n == 1 ? "is" : "are",
                     n == 1 ? "is" : "are");
}

/* The waiting records: those made in loop keep (or an inner one) queued,
 * the rest dropped; keep -1 drops them all. */
static void outer_settle(int keep)
{
    uint64_t dropped = 0;
    size_t i = 0;
    for (msp_dq_rec_t *r = g_outer, *next; r; r = next, i++) {
        next = prep_next(r);
        if (keep >= 0 && i < g_n_outer && g_outer_depth[i] <= keep) {
            queue_ordered(r);
        } else {
            msp_rec_drop(r);
            dropped++;
        }
    }
    g_outer = g_outer_tail = NULL;
    g_n_outer = 0;
    free(g_outer_depth);
    g_outer_depth = NULL;
    g_cap_outer = 0;
    say_dropped(dropped, "in a loop around the model's first forward that takes no optimizer "
                         "step");
}

void msp_prep_optimizer_step(void)
{
    if (!g_outer)
        return;
    msp_frame_ref_t refs[MSP_PREP_FRAMES];
    int n = msp_stack_refs(refs, MSP_PREP_FRAMES);
    outer_settle(loop_depth(refs, n, &g_loop));
}

void msp_prep_release(void)
{
    if (g_outer) /* the step ends (or the process) with no optimizer step */
        outer_settle(-1);
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
    int in_loop = g_head && msp_stack_call_loop(&g_loop);
    size_t i = 0;
    for (msp_dq_rec_t *r = g_head, *next; r; r = next, i++) {
        next = prep_next(r);
        int depth = in_loop ? made_in(i, &g_loop) : -1;
        if (depth == 0) {
            msp_rec_queue(r); /* the loop's body, before the model: the step's own */
        } else if (depth < 0 || outer_wait(r, depth) != 0) {
            msp_rec_drop(r);
            g_dropped++;
        }
    }
    prep_take();
    frames_free();
    /* no input may name a dropped record as its producer (a weight scaled
     * in place before training would look produced by an op not in the file),
     * nor one still waiting, which may be dropped yet */
    if (g_dropped || g_outer)
        msp_links_reset();
    say_dropped(g_dropped, "before the model's first forward");
}

/* ---- submitted, dropped ---------------------------------------------------- */

/* The config's rank selection and direction filter (msprobe's rank and
 * data_mode forward/backward). Records are named "...forward", "...backward"
 * (APIs) or "...forward.N", "...backward.N" (modules). */
static int msp_rec_wanted(const msp_dq_rec_t *r)
{
    const msp_config_t *c = msp_cfg;
    if (!msp_g.have_cfg)
        return 1;
    if (r->rank >= 0 && !msp_step_set_contains(&c->ranks, r->rank))
        return 0;
    unsigned dirs = msp_dump_dirs();
    if (dirs != (MSP_DIR_FORWARD | MSP_DIR_BACKWARD)) {
        int bwd = strstr(r->name, ".backward") != NULL;
        if (!(dirs & (bwd ? MSP_DIR_BACKWARD : MSP_DIR_FORWARD)))
            return 0;
    }
    return 1;
}

/* DataLoader workers started with spawn (not fork) are fresh Pythons that boot
 * the shim too; they must not dump (they would write the parent's files).
 * torch marks them with get_worker_info(); looked at once per step. */
static int in_dataloader_worker(void)
{
    static int64_t checked_step = -1;
    static int worker;
    if (checked_step == msp_g.step)
        return worker;
    checked_step = msp_g.step;
    PyObject *mods = PySys_GetObject("modules");
    PyObject *m = mods ? PyDict_GetItemString(mods, "torch.utils.data._utils.worker") : NULL;
    PyObject *info = m ? PyObject_CallMethod(m, "get_worker_info", NULL) : NULL;
    worker = info && info != Py_None;
    Py_XDECREF(info);
    if (PyErr_Occurred())
        PyErr_Clear();
    if (worker)
        msp_state_disable();
    return worker;
}

void msp_rec_submit(msp_dq_rec_t *r)
{
    r->keep_data = msp_keep_data(r->name);
    if (in_dataloader_worker()) {
        msp_rec_drop(r);
        return;
    }
    r->step = msp_g.step;
    r->rank = msp_current_rank();
    if (!msp_rec_wanted(r)) {
        msp_rec_drop(r);
        return;
    }
    if (msp_prep_hold(r)) /* before the model first runs: data preparation (py_record.c) */
        return;
    msp_rec_queue(r);
}

void msp_rec_drop(msp_dq_rec_t *r)
{
    msp_dev_forget(r);
    msp_dq_rec_free(r);
}
