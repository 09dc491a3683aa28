/* Statistics of accelerator tensors, computed where they live (statistics task).
 *
 * Only the numbers come back, never the tensor, and the CPU never waits for
 * the GPU inside a step: a record whose statistics are in flight is held back
 * (in submission order) and submitted when they arrive, polled at each
 * submission and waited for when too many records are held, before a step
 * ends and before exit.
 *
 * Two ways, both in accel_copy.py:
 * - windows (float32, bfloat16, float16): tensors take their place in a
 *   window, a float32 buffer per device, when their call adds them, and are
 *   copied into it many at a time, in one launch (see "Deferred copies"
 *   below); a full window, or one whose records must be written, is reduced
 *   in a fixed number of launches and read back in one copy. Rows of CHUNK
 *   elements give max, min, sum and norm; rows that hold a boundary between
 *   tensors are gathered and reduced piece by piece (summed in float64).
 *   This file cuts the window into rows and pieces and combines the partial
 *   results of each tensor in float64.
 * - wide windows (float64, the integer types, bool): the same in a float64
 *   buffer per device (every value of these converts exactly, int64 up to
 *   2^53, as the float64 results always did). Their tensors wait as the
 *   float ones do; a call that writes only into them (num_batches_tracked
 *   .add_(1)) has only the wide windows' waiting tensors copied first
 *   (msp_dev_put_pending by kind). A step's integer tensors are few and small
 *   (counters, labels, token ids): a copy shared by many instead of about ten
 *   launches each alone.
 * - one tensor at a time (stats(): complex and other dtypes, a tensor larger
 *   than its window): about ten launches, the float64 results read back.
 *
 * Deferred copies. A launch costs the CPU about as much as recording the
 * call (10-20 us), so the tensors of many calls go in one copy: an API
 * call's outputs, its inputs when it does not write into them, backward
 * records' gradients and optimizer records (a record's dev_defer) wait in their
 * window, with a reference (the memory cannot be reused; a parameter's
 * gradient held so is cloned by AccumulateGrad, not stolen) and their
 * version counter, until MSP_PUT_TENSORS of them or MSP_PUT_ELEMS elements
 * wait, or something may write into them: a call that may
 * (msp_dev_put_pending: by its name, its out=/inplace, or as learned at its
 * first call), a module's record (its batches are copied at once and take
 * the waiting ones with them), a step trigger, a window reduced, another
 * stream. A version that moved all the same (a write msprobe does not
 * record) is said once, and from then on every batch is copied at its end.
 * A tensor added while it waits, unchanged (an output given to the next
 * call), shares the waiting copy: a segment with dup set, no bytes of its
 * own (about a third of a transformer step's elements).
 * The GIL guards every queue here.
 *
 * Here: adding tensors to windows, launching their copies and reductions,
 * one tensor at a time, and collecting what came back (dev_poll). A window's rows, pieces and results: py_devwin.c.
 * Holding records until their statistics are in: py_devhold.c. */
#include "dump_py.h"
#include "dlpack.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "py_devstats.h"

dpend_t *g_dp;
size_t g_dp_head, g_ndp, g_capdp;
win_t *g_open[8]; /* one open window per device, by creation */
size_t g_nopen;
win_t **g_retired; /* retired windows not yet flushed (a copy or
                                       their reduction in progress) */
size_t g_nretired, g_capretired;
win_t *g_flushed, **g_flushed_tail = &g_flushed;
size_t g_nflushed;
int g_on, g_test;       /* msp_dev_stats_init */
int64_t g_wincap;       /* elements (setup()) */
int64_t g_widecap;      /* elements of a wide window */
int g_alone;            /* MSPROBE_DEVICE_STATS_ALONE: no windows (bench/gpu) */
int g_skip;             /* MSPROBE_DEVICE_STATS_SKIP: records, no statistics (bench/gpu) */
int g_defer_off;        /* MSPROBE_DEVICE_STATS_DEFER=0, or a version moved: no waiting */
PyObject *g_raw_stream; /* accel_copy.py's _raw_stream(device index) */
_Thread_local wput_t *t_put;
_Thread_local size_t t_nput, t_capput;
int g_dev_polling;      /* a dev_poll is running (perhaps waiting, GIL released) */
pthread_t g_dev_poller; /* in that thread */

/* 1 when the event's work is done (query() without waiting), 0 if not yet. */
int dev_done(PyObject *event)
{
    PyObject *r = PyObject_CallMethod(event, "query", NULL);
    int done = r ? PyObject_IsTrue(r) == 1 : 1; /* a broken event: the wait will say */
    Py_XDECREF(r);
    PyErr_Clear();
    return done;
}

/* ---- windows: filling ---------------------------------------------------------- */

/* Once: accel_copy.py loaded (else 0: tensors go the host's way), the
 * windows' sizes and the bench switches read. */
static int setup(void)
{
    static int ok = -1;
    if (ok >= 0)
        return ok;
    ok = msp_accel_fn("stats") != NULL;
    PyErr_Clear();
    int test = g_test;
    /* The tests send small CPU tensors: small rows and windows, so that their
     * tensors span rows and fill windows. */
    const char *e = getenv("MSPROBE_DEVICE_STATS_MB");
    if (e && *e)
        test = 0; /* sizes as on a device (profiling the CPU path) */
    g_chunk = test ? 64 : 8192;
    g_alone = msp_env_flag("MSPROBE_DEVICE_STATS_ALONE");
    g_skip = msp_env_flag("MSPROBE_DEVICE_STATS_SKIP");
    const char *df = getenv("MSPROBE_DEVICE_STATS_DEFER");
    g_defer_off = df && strcmp(df, "0") == 0;
    g_raw_stream = ok ? msp_accel_fn("_raw_stream") : NULL;
    PyErr_Clear();
    int64_t mb = msp_env_mib("MSPROBE_DEVICE_STATS_MB", 1024);
    g_wincap = test ? 64 * 64 : mb * 1024 * 1024 / 4;
    g_wincap -= g_wincap % g_chunk;
    if (g_wincap < g_chunk)
        g_wincap = g_chunk;
    g_widecap = g_wincap / 2 < (4 << 20) ? g_wincap / 2 : (4 << 20); /* at most 32 MiB */
    g_widecap -= g_widecap % g_chunk;
    if (g_widecap < g_chunk)
        g_widecap = g_chunk;
    return ok;
}

/* The elements a window of this kind holds. */
static int64_t kind_cap(int kind)
{
    return kind == MSP_DEV_WIDE ? g_widecap : g_wincap;
}

void win_free(win_t *w)
{
    for (size_t i = 0; i < w->nseg; i++)
        Py_XDECREF(w->seg[i].t);
    Py_XDECREF(w->buf);
    Py_XDECREF(w->ws);
    Py_XDECREF(w->dev_index);
    msp_index_free(&w->by_tensor);
    Py_XDECREF(w->host);
    Py_XDECREF(w->hcap);
    Py_XDECREF(w->event);
    free(w->seg);
    free(w);
}

/* Reduce w (launches queued; nothing waited for) and append it to the
 * flushed list; it left the open ones, and its copies are all launched. */
static void win_flush(win_t *w)
{
    PyObject *cuts = NULL, *pair = NULL;
    cut_t c = {0};
    size_t nv = 0;
    if (w->used > 0 && win_cut(w, &c) == 0 && (cuts = cut_bytes(&c)) &&
        (pair = call_fn("win_flush",
                        Py_BuildValue("(OOLLOn)", w->buf, w->ws, (long long)w->nrows,
                                      (long long)g_chunk, cuts, (Py_ssize_t)c.nrows))) &&
        PyTuple_Check(pair) && PyTuple_Size(pair) == 2) {
        w->host = PyTuple_GetItem(pair, 0);
        w->event = PyTuple_GetItem(pair, 1);
        Py_INCREF(w->host);
        Py_INCREF(w->event);
        if ((w->hcap = msp_to_dlpack(w->host)))
            w->v = host_doubles(w->hcap, &nv, (size_t)(4 * w->width));
    }
    if (w->used > 0 && !w->v)
        msp_py_warn_error("device stats", "cannot reduce a window of device tensors; their "
                                          "statistics are dumped as NaN");
    PyErr_Clear();
    cut_free(&c);
    Py_XDECREF(cuts);
    Py_XDECREF(pair);
    w->next = NULL;
    *g_flushed_tail = w;
    g_flushed_tail = &w->next;
    g_nflushed++;
}

static void win_issue(win_t *w);

/* A retired window: its waiting copies launched, then reduced, unless a
 * launch is in progress (its end comes back here). */
static void win_settle(win_t *w)
{
    if (w->busy)
        return;
    if (w->issued < w->nseg) {
        win_issue(w);
        return;
    }
    w->retired = 0;
    win_flush(w); /* lets the GIL go: w stays a retired one (found by msp_rec_drop) until it
                     is a flushed one */
    for (size_t i = 0; i < g_nretired; i++)
        if (g_retired[i] == w) {
            g_retired[i] = g_retired[--g_nretired];
            break;
        }
}

/* No more segments in w: it leaves the open ones, and is reduced once its
 * copies are launched. */
void win_retire(win_t *w)
{
    for (size_t i = 0; i < g_nopen; i++)
        if (g_open[i] == w) {
            g_open[i] = g_open[--g_nopen];
            break;
        }
    w->retired = 1;
    win_t **nr = msp_grow(g_retired, &g_capretired, g_nretired, sizeof *nr, 8);
    if (nr) {
        g_retired = nr;
        g_retired[g_nretired++] = w;
    }
    win_settle(w);
}

/* The current stream of w's device is still w's (always, on the CPU). */
static int win_same_stream(win_t *w)
{
    if (!w->dev_index || !g_raw_stream)
        return 1;
    PyObject *r = PyObject_CallFunctionObjArgs(g_raw_stream, w->dev_index, NULL);
    unsigned long long raw = r ? PyLong_AsUnsignedLongLongMask(r) : 0;
    Py_XDECREF(r);
    PyErr_Clear();
    return r && raw == w->raw;
}

/* The open window of this kind on device, on the current stream, with room
 * for n more elements, opened if needed; NULL when none can be had. */
static win_t *win_for(const char *device, int kind, int64_t n)
{
    win_t *w = NULL;
    int64_t cap = kind_cap(kind);
    for (size_t i = 0; i < g_nopen; i++)
        if (g_open[i]->kind == kind && strcmp(g_open[i]->device, device) == 0)
            w = g_open[i];
    if (w && w->used + n <= cap && win_same_stream(w))
        return w;
    if (w)
        win_retire(w);
    while (g_nflushed >= MSP_WIN_INFLIGHT && g_flushed && !g_dev_polling)
        dev_poll(1); /* memory: the GPU is two windows behind; wait for it */
    if (g_nopen == sizeof g_open / sizeof g_open[0])
        win_retire(g_open[0]);
    w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    snprintf(w->device, sizeof w->device, "%s", device);
    w->kind = kind;
    PyObject *pair = call_fn("win_new",
                             Py_BuildValue("(sLi)", device, (long long)cap, kind == MSP_DEV_WIDE));
    if (pair && PyTuple_Check(pair) && PyTuple_Size(pair) == 2) {
        w->buf = PyTuple_GetItem(pair, 0);
        w->ws = PyTuple_GetItem(pair, 1);
        Py_INCREF(w->buf);
        Py_INCREF(w->ws);
        if (PyTuple_Check(w->ws) && PyTuple_Size(w->ws) == 3) {
            w->dev_index = PyTuple_GetItem(w->ws, 1);
            Py_INCREF(w->dev_index);
            w->raw = PyLong_AsUnsignedLongLongMask(PyTuple_GetItem(w->ws, 2));
        }
    }
    Py_XDECREF(pair);
    PyErr_Clear();
    if (!w->buf) {
        msp_py_warn_error("device stats",
                          "cannot allocate a window for device statistics "
                          "(MSPROBE_DEVICE_STATS_MB sets its size); their statistics are "
                          "dumped as NaN");
        win_free(w);
        return NULL;
    }
    g_open[g_nopen++] = w;
    return w;
}

/* A deferred tensor whose version moved before its copy: written in place
 * by something msprobe did not see. Its statistics are those after the
 * write; from now on nothing waits. */
static void seg_changed(const seg_t *s)
{
    if (g_defer_off)
        return; /* said for the first; the others of its launch went the same way */
    g_defer_off = 1;
    const msp_dq_tensor_t *t = &s->rec->t[s->ti];
    msp_shim_warn_once("devstats-changed",
                       "%s/%s was written in place after its call returned and before its "
                       "statistics were taken, by code msprobe does not record; its statistics "
                       "are those after the write. From now on the tensors of each call are "
                       "copied when it returns (MSPROBE_DEVICE_STATS_DEFER=0 does so from the "
                       "start)",
                       s->rec->name, t->role);
}

/* Launch the copy of w's segments not yet copied, all in one. Their places
 * are taken: other threads may add segments while the GIL is let go. */
static void win_issue(win_t *w)
{
    /* busy from the first call that may let the GIL go (a tensor's last
     * reference, a warning) to the last use of w: no other thread reduces,
     * then frees, the window meanwhile */
    w->busy++;
    size_t a = w->issued, b = w->nseg;
    size_t nt = 0;
    for (size_t k = a; k < b; k++)
        nt += w->seg[k].dup < 0;
    w->issued = b;
    w->nwaiting = w->nwaiting > nt ? w->nwaiting - nt : 0;
    if (nt > 0) {
        PyObject *ts = PyList_New((Py_ssize_t)nt);
        PyObject *flat = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)nt);
        char *fl = flat ? PyBytes_AsString(flat) : NULL;
        int64_t off = -1, n = 0;
        for (size_t k = a, at = 0; k < b; k++) {
            seg_t *s = &w->seg[k];
            if (s->dup >= 0)
                continue;
            if (s->ver >= 0 && s->rec && msp_tensor_version(s->t) != s->ver)
                seg_changed(s);
            if (off < 0)
                off = s->off;
            n += s->n;
            if (fl)
                fl[at] = (char)s->flat;
            PyObject *t = s->t;
            s->t = NULL;
            if (ts)
                PyList_SetItem(ts, (Py_ssize_t)at++, t);
            else
                Py_DECREF(t); /* may run Python: s may have moved (w->seg grown) */
        }
        w->waiting -= n;
        PyObject *r = ts && fl ? call_fn("win_put",
                                         Py_BuildValue("(OOLLOO)", w->buf, w->ws, (long long)off,
                                                       (long long)n, ts, flat))
                               : NULL;
        Py_XDECREF(flat);
        Py_XDECREF(ts);
        int failed = r != Py_True;
        Py_XDECREF(r);
        if (failed) {
            msp_py_warn_error("device stats", "cannot copy device tensors into a window; their "
                                              "statistics are dumped as NaN");
            for (size_t k = a; k < b; k++)
                w->seg[k].bad = 1;
        }
        PyErr_Clear();
    }
    w->busy--;
    if (w->retired)
        win_settle(w);
}

/* Where a waiting segment is found: by its dense memory (a view of the same
 * elements finds it too), else by its tensor. */
static uint64_t seg_hash(PyObject *t, const void *ptr, int64_t n, msp_dtype_t dtype)
{
    return ptr ? msp_mix64((uint64_t)(uintptr_t)ptr ^ (uint64_t)n << 8 ^ (uint64_t)dtype)
               : msp_mix64((uint64_t)(uintptr_t)t);
}

typedef struct {
    const win_t *w;
    PyObject *t;
    const void *ptr;
    int64_t n;
    msp_dtype_t dtype;
} seg_key_t;

static int seg_is(const void *ctx, size_t i)
{
    const seg_key_t *k = ctx;
    const seg_t *s = &k->w->seg[i];
    return s->t &&
           (k->ptr ? s->ptr == k->ptr && s->n == k->n && s->dtype == k->dtype : s->t == k->t);
}

/* The segment that holds t (or the same dense elements) and waits for its
 * copy, or -1. Its tensor is held while it waits: the memory is not reused. */
static int64_t win_lookup(const win_t *w, PyObject *t, const void *ptr, int64_t n,
                          msp_dtype_t dtype)
{
    seg_key_t key = {w, t, ptr, n, dtype};
    size_t at = msp_index_find(&w->by_tensor, seg_hash(t, ptr, n, dtype), seg_is, &key);
    return at == SIZE_MAX ? -1 : (int64_t)at;
}

/* Segment k (w->seg[k].t set) can be found by its tensor; without memory
 * for the index it is not found later, and copied again: no harm. */
static void win_index(win_t *w, size_t k)
{
    const seg_t *s = &w->seg[k];
    (void)msp_index_put(&w->by_tensor, seg_hash(s->t, s->ptr, s->n, s->dtype), k);
}

/* Puts [i, j) of this thread's batch (one device, n elements at most: they
 * fit a window) in w: their places taken, the tensors held (defer: with
 * their versions) until their copy. A tensor that already waits there,
 * unchanged (an earlier call's output given to this one), shares that copy. */
static int win_add(win_t *w, size_t i, size_t j, int defer)
{
    seg_t *ns = msp_grow(w->seg, &w->capseg, w->nseg + (j - i) - 1, sizeof *ns, 64);
    if (!ns)
        return -1;
    w->seg = ns;
    for (size_t k = i; k < j; k++) {
        PyObject *t = t_put[k].t;
        int64_t ver = defer ? msp_tensor_version(t) : -1;
        int64_t m = win_lookup(w, t, t_put[k].ptr, t_put[k].n, t_put[k].dtype);
        if (m >= 0 && w->seg[m].ver >= 0 && ver < 0)
            ver = msp_tensor_version(t);
        if (m >= 0 && (w->seg[m].ver < 0 || w->seg[m].ver == ver)) {
            /* waiting since its call (version unchanged), or given twice to this one */
            w->seg[w->nseg++] = (seg_t){t_put[k].rec,
                                        t_put[k].ti,
                                        w->seg[m].off,
                                        w->seg[m].n,
                                        0,
                                        0,
                                        -1,
                                        -1,
                                        NULL,
                                        -1,
                                        0,
                                        m,
                                        NULL,
                                        t_put[k].dtype,
                                        0};
            continue;
        }
        w->seg[w->nseg] = (seg_t){t_put[k].rec,
                                  t_put[k].ti,
                                  w->used,
                                  t_put[k].n,
                                  0,
                                  0,
                                  -1,
                                  -1,
                                  t,
                                  defer ? ver : -1,
                                  0,
                                  -1,
                                  t_put[k].ptr,
                                  t_put[k].dtype,
                                  t_put[k].flat};
        t_put[k].t = NULL;
        win_index(w, w->nseg++);
        w->used += t_put[k].n;
        w->waiting += t_put[k].n;
        w->nwaiting++;
        if (defer && ver < 0)
            defer = 0; /* no version to check (inference mode): copied now */
    }
    return defer;
}

void msp_dev_put_pending(int kinds)
{
    for (size_t i = 0; i < g_nopen; i++)
        if (g_open[i]->issued < g_open[i]->nseg && (kinds & g_open[i]->kind)) {
            win_issue(g_open[i]);
            i = (size_t)-1; /* the open windows may have changed meanwhile */
        }
}

void msp_dev_call_end(int defer)
{
    defer = g_defer_off ? 0 : defer; /* the kinds whose tensors wait */
    if (t_nput == 0 && (defer || !g_nopen))
        return;
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb);
    size_t i = 0;
    while (i < t_nput) {
        /* the longest run from i on one device and kind of window that fits one */
        int64_t n = t_put[i].n;
        int kind = t_put[i].kind;
        size_t j = i + 1;
        while (j < t_nput && t_put[j].kind == kind &&
               strcmp(t_put[j].device, t_put[i].device) == 0 && n + t_put[j].n <= kind_cap(kind))
            n += t_put[j++].n;
        win_t *w = win_for(t_put[i].device, kind, n);
        int rc = w ? win_add(w, i, j, (defer & kind) != 0) : -1;
        if (rc < 0) {
            if (w)
                msp_shim_warn_once("nomem", "device statistics: out of memory; they are "
                                            "dumped as NaN");
            for (size_t k = i; k < j; k++)
                if (t_put[k].rec) {
                    dev_fill(&t_put[k].rec->t[t_put[k].ti], NULL, 0);
                    t_put[k].rec->dev_pending--;
                }
        } else if (!rc || w->nwaiting >= MSP_PUT_TENSORS || w->waiting >= MSP_PUT_ELEMS) {
            win_issue(w);
        }
        i = j;
    }
    for (size_t k = 0; k < t_nput; k++)
        Py_XDECREF(t_put[k].t);
    t_nput = 0;
    if (!defer)
        msp_dev_put_pending(MSP_DEV_ALL); /* what waits goes with them */
    PyErr_Restore(et, ev, etb);
}

/* ---- polling ---------------------------------------------------------------------- */

/* Collect statistics in queue order: those already back, or (wait) all. */
void dev_poll(int wait)
{
    /* query() and synchronize() may let another thread run (they release the
     * GIL): that thread may queue more (g_dp moves: entries are found again
     * by index after each call; windows join the end of their list) or drop a
     * record (its entries lose their record), but it does not poll while this
     * poll runs. */
    if (g_dev_polling)
        return;
    g_dev_polling = 1;
    g_dev_poller = pthread_self();
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb);
    while (g_dp_head < g_ndp) {
        size_t i = g_dp_head;
        if (!wait && g_dp[i].rec && !dev_done(g_dp[i].event))
            break;
        int ok = g_dp[i].rec && msp_wait_event(g_dp[i].event) == 0;
        dpend_t *p = &g_dp[i];
        if (p->rec) {
            dev_fill(&p->rec->t[p->ti], ok ? p->v : NULL, p->nv);
            p->rec->dev_pending--;
        }
        Py_DECREF(p->event);
        Py_DECREF(p->cap);
        g_dp_head = i + 1;
    }
    if (g_dp_head == g_ndp)
        g_dp_head = g_ndp = 0;
    while (g_flushed) {
        win_t *w = g_flushed;
        if (w->event && !wait && !dev_done(w->event))
            break;
        int ok = w->event && msp_wait_event(w->event) == 0;
        for (size_t i = 0; i < w->nseg; i++) {
            seg_t *s = &w->seg[i];
            if (s->rec) {
                seg_fill(w, s, ok && !(s->dup >= 0 ? w->seg[s->dup].bad : s->bad));
                s->rec->dev_pending--;
            }
        }
        g_flushed = w->next;
        if (!g_flushed)
            g_flushed_tail = &g_flushed;
        g_nflushed--;
        win_free(w);
    }
    PyErr_Restore(et, ev, etb);
    g_dev_polling = 0;
}

/* ---- adding a tensor ------------------------------------------------------------- */

void msp_dev_stats_init(void)
{
    const char *ds = getenv("MSPROBE_DEVICE_STATS");
    g_on = msp_g.have_cfg && msp_cfg->task == MSP_TASK_STATISTICS && !(ds && strcmp(ds, "0") == 0);
    g_test = g_on && msp_test.device_stats;
}

/* Float32 windows take the 16- and 32-bit floats (they convert exactly);
 * wide (float64) ones float64 and the integers and bool, whose every value
 * float64 holds exactly (int64 up to 2^53). */
int msp_dev_kind(msp_dtype_t dtype)
{
    switch (dtype) {
    case MSP_DTYPE_FLOAT32:
    case MSP_DTYPE_BFLOAT16:
    case MSP_DTYPE_FLOAT16:
        return MSP_DEV_FLOAT;
    case MSP_DTYPE_FLOAT64:
    case MSP_DTYPE_INT8:
    case MSP_DTYPE_INT16:
    case MSP_DTYPE_INT32:
    case MSP_DTYPE_INT64:
    case MSP_DTYPE_UINT8:
    case MSP_DTYPE_BOOL:
        return MSP_DEV_WIDE;
    default:
        return 0;
    }
}

int msp_dev_defers(void)
{
    return g_on && !g_defer_off && !g_alone && !g_skip ? MSP_DEV_ALL : 0;
}

int msp_dev_stats_enabled(int *test)
{
    *test = g_test;
    return g_on;
}

/* Add a tensor whose statistics this file gives: it, or NULL (said once). */
static msp_dq_tensor_t *add_given(msp_dq_rec_t *r, const char *role, msp_dtype_t dtype, int ndim,
                                  const int64_t *shape, const char *device, int rg)
{
    if (msp_dq_rec_add_tensor(r, role, dtype, ndim, shape, NULL, 0, device, rg) != 0) {
        msp_shim_warn_once("nomem", "%s/%s not dumped: out of memory", r->name, role);
        return NULL;
    }
    r->t[r->nt - 1].stats_given = 1;
    return &r->t[r->nt - 1];
}

/* One tensor alone: stats() queues its reductions; 1, or 0 to read it on the host. */
static int dev_alone(msp_dq_rec_t *r, const char *role, PyObject *d, msp_dtype_t dtype, int ndim,
                     const int64_t *shape, const char *device, int rg)
{
    PyObject *pair = call_fn("stats", Py_BuildValue("(O)", d)), *cap = NULL;
    const double *v = NULL;
    size_t nv = 0;
    if (pair && PyTuple_Check(pair) && PyTuple_Size(pair) == 2 &&
        (cap = msp_to_dlpack(PyTuple_GetItem(pair, 0))))
        v = host_doubles(cap, &nv, 0);
    if (!v) {
        msp_py_warn_error("device stats", "cannot compute a tensor's statistics on its device; "
                                          "copying it to the host instead");
        Py_XDECREF(cap);
        Py_XDECREF(pair);
        return 0;
    }
    msp_dq_tensor_t *dt = add_given(r, role, dtype, ndim, shape, device, rg);
    if (dt) {
        PyObject *ev = PyTuple_GetItem(pair, 1);
        dpend_t *n = ev != Py_None ? msp_grow(g_dp, &g_capdp, g_ndp, sizeof *n, 256) : NULL;
        if (n) {
            g_dp = n;
            Py_INCREF(cap);
            Py_INCREF(ev);
            g_dp[g_ndp++] = (dpend_t){r, r->nt - 1, v, nv, cap, ev};
            r->dev_pending++;
        } else if (ev != Py_None && msp_wait_event(ev) != 0) {
            dev_fill(dt, NULL, 0);
        } else {
            dev_fill(dt, v, nv);
        }
    }
    Py_DECREF(cap);
    Py_DECREF(pair);
    return 1;
}

int msp_dev_stats_add(msp_dq_rec_t *r, const char *role, PyObject *d, msp_dtype_t dtype, int ndim,
                      const int64_t *shape, const char *device, int rg, const void *ptr, int dense)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    if (n == 0)
        return 0; /* empty: nothing to compute, the host path says so */
    if (!setup())
        return 0;
    if (g_skip) { /* what recording costs without statistics: they are NaN */
        msp_dq_tensor_t *dt = add_given(r, role, dtype, ndim, shape, device, rg);
        if (dt)
            dev_fill(dt, NULL, 0);
        return 1;
    }
    int kind = msp_dev_kind(dtype);
    if (!kind || n > kind_cap(kind) || g_alone)
        return dev_alone(r, role, d, dtype, ndim, shape, device, rg);
    wput_t *np = msp_grow(t_put, &t_capput, t_nput, sizeof *np, 16);
    if (!np)
        return dev_alone(r, role, d, dtype, ndim, shape, device, rg);
    t_put = np;
    if (!add_given(r, role, dtype, ndim, shape, device, rg))
        return 1;
    wput_t *p = &t_put[t_nput++];
    p->rec = r;
    p->ti = r->nt - 1;
    Py_INCREF(d);
    p->t = d;
    p->n = n;
    p->kind = kind;
    p->ptr = dense ? ptr : NULL;
    p->dtype = dtype;
    p->flat = ndim == 1;
    size_t at = 0;
    msp_str_add(p->device, sizeof p->device, &at, device);
    r->dev_pending++;
    return 1;
}
