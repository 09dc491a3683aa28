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
 * records' gradients and optimizer records (msp_t_dev_defer) wait in their
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
 * The GIL guards every queue here. */
#include "dump_py.h"
#include "dlpack.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MSP_DEV_HELD_FLUSH 1024   /* records held: the open windows are reduced */
#define MSP_DEV_HELD_MAX 16384    /* records held: the oldest are waited for */
#define MSP_WIN_INFLIGHT 2        /* windows reduced, results not yet read: a third waits */
#define MSP_PUT_TENSORS 64        /* tensors waiting in a window: copied, in one launch */
#define MSP_PUT_ELEMS (16 << 20)  /* elements waiting in a window (memory kept alive): copied */
#define MSP_DEV_POLL_EVERY 16     /* records held between two looks at the results */

/* ---- one tensor at a time ---------------------------------------------------- */
typedef struct dpend {
    msp_dq_rec_t *rec;  /* NULL: the record was dropped */
    size_t ti;          /* rec->t[ti] */
    const double *v;    /* the pinned float64s */
    size_t nv;
    PyObject *cap, *event;
} dpend_t;
static dpend_t *g_dp;
static size_t g_dp_head, g_ndp, g_capdp;

/* ---- windows ------------------------------------------------------------------ */
typedef struct seg {
    msp_dq_rec_t *rec;  /* NULL: the record was dropped */
    size_t ti;
    int64_t off, n;     /* in the window */
    int64_t c0, c1;     /* whole rows [c0, c1) */
    int64_t ph, pt;     /* head and tail pieces, -1: none */
    PyObject *t;        /* the tensor, until its copy is launched (win_issue) */
    int64_t ver;        /* its version counter when added; -1: copied at once */
    int bad;            /* its copy failed: statistics NaN */
    int64_t dup;        /* -1, or the earlier segment of the same tensor (or of the
                           same dense memory: a view of it), unchanged: this one
                           shares its copy (no bytes of its own) */
    const void *ptr;    /* its first element, when dense (else NULL): found by it */
    msp_dtype_t dtype;
    int flat;           /* one-dimensional: the copy takes it as it is (no reshape) */
} seg_t;

typedef struct win {
    struct win *next;   /* flushed windows, oldest first */
    char device[24];
    int kind;           /* MSP_DEV_FLOAT (float32) or MSP_DEV_WIDE (float64), kind_cap elements */
    PyObject *buf;
    PyObject *ws;       /* its stream (accel_copy.py's win_new), or None */
    PyObject *dev_index;    /* ws's device index (an int), or NULL (the CPU) */
    unsigned long long raw; /* ws's raw handle: the current stream is compared to it */
    int64_t used;       /* of g_wincap elements */
    int busy;           /* copies being launched (the GIL is let go inside them) */
    int retired;        /* no more segments: flushed when all are copied and busy is 0 */
    seg_t *seg;
    size_t nseg, capseg;
    size_t issued;      /* segments [0, issued) have their copy launched */
    size_t *hs, nhs;    /* segments by tensor (index + 1; 0: empty), while they wait */
    int64_t waiting;    /* elements of the segments not yet copied */
    size_t nwaiting;    /* those segments, shared ones (dup) left out: tensors held */
    /* once flushed */
    PyObject *host, *hcap, *event;
    const double *v;    /* [4][width]: max, min, mean, mean of squares of rows,
                           then max, min, sum, sum of squares of pieces */
    int64_t nrows, width;
} win_t;

static win_t *g_open[8];            /* one open window per device, by creation */
static size_t g_nopen;
static win_t **g_retired;           /* retired windows not yet flushed (a copy or
                                       their reduction in progress) */
static size_t g_nretired, g_capretired;
static win_t *g_flushed, **g_flushed_tail = &g_flushed;
static size_t g_nflushed;
static int g_on, g_test;           /* msp_dev_stats_init */
static int64_t g_chunk, g_wincap;  /* elements (setup()) */
static int64_t g_widecap;          /* elements of a wide window */
static int g_alone;                /* MSPROBE_DEVICE_STATS_ALONE: no windows (bench/gpu) */
static int g_skip;                 /* MSPROBE_DEVICE_STATS_SKIP: records, no statistics (bench/gpu) */
static int g_defer_off;            /* MSPROBE_DEVICE_STATS_DEFER=0, or a version moved: no waiting */
static PyObject *g_raw_stream;     /* accel_copy.py's _raw_stream(device index) */
_Thread_local int msp_t_dev_defer;

/* The tensors of the call being added on this thread, put at its end. */
typedef struct wput {
    msp_dq_rec_t *rec;
    size_t ti;
    PyObject *t;
    int64_t n;
    int kind;        /* its window's (MSP_DEV_*) */
    const void *ptr; /* dense memory from here (else NULL) */
    msp_dtype_t dtype;
    int flat;        /* one-dimensional (seg_t's) */
    char device[24];
} wput_t;
static _Thread_local wput_t *t_put;
static _Thread_local size_t t_nput, t_capput;

static msp_dq_rec_t **g_held;
static size_t g_held_head, g_nheld, g_capheld;
static int g_dev_polling;      /* a dev_poll is running (perhaps waiting, GIL released) */
static unsigned g_hold_tick;   /* records held so far (msp_dev_hold polls every few) */
static pthread_t g_dev_poller; /* in that thread */

/* Call accel_copy.py's name(*args) (args: a new reference, taken); its
 * torch calls are the shim's own, never recorded. */
static PyObject *call_fn(const char *name, PyObject *args)
{
    PyObject *f = msp_accel_fn(name);
    msp_t_depth++;
    PyObject *r = f && args ? PyObject_CallObject(f, args) : NULL;
    msp_t_depth--;
    Py_XDECREF(args);
    return r;
}

/* t's statistics from [max, min, sum, norm] and for floating types the NaN
 * and Inf counts; NULL: they could not be had, all NaN. NaN anywhere makes
 * the four values NaN, as msp_stats_compute does. */
static void dev_fill(msp_dq_tensor_t *t, const double *v, size_t nv)
{
    uint64_t numel = 1;
    for (int i = 0; i < t->ndim; i++)
        numel *= (uint64_t)t->shape[i];
    msp_stats_t *st = &t->stats;
    memset(st, 0, sizeof *st); /* crc32 0: not known (no bytes were read) */
    st->nan_count = v && nv >= 6 ? (int64_t)v[4] : 0;
    st->inf_count = v && nv >= 6 ? (int64_t)v[5] : 0;
    if (!v || st->nan_count > 0) {
        st->max = st->min = st->mean = st->norm = NAN;
    } else {
        st->max = v[0];
        st->min = v[1];
        st->mean = v[2] / (double)numel;
        st->norm = v[3];
    }
    t->has_stats = 1;
}

/* The float64s of a host tensor's DLPack capsule: 1-D, nv in {4, 6} (or
 * want elements when want > 0), CPU or pinned memory; NULL otherwise. */
static const double *host_doubles(PyObject *cap, size_t *nv, size_t want)
{
    msp_dl_managed_t *hm = cap ? PyCapsule_GetPointer(cap, "dltensor") : NULL;
    const msp_dl_tensor_t *h = hm ? &hm->dl_tensor : NULL;
    size_t n = 1;
    for (int i = 0; h && i < h->ndim; i++)
        n *= (size_t)h->shape[i];
    if (!h || h->dtype.code != MSP_DL_FLOAT || h->dtype.bits != 64 ||
        (h->device.device_type != MSP_DL_CPU && h->device.device_type != MSP_DL_CUDA_HOST) ||
        (want ? n != want : (h->ndim != 1 || (n != 4 && n != 6))))
        return NULL;
    if (h->strides) { /* C order only */
        int64_t expect = 1;
        for (int i = h->ndim - 1; i >= 0; i--) {
            if (h->shape[i] != 1 && h->strides[i] != expect)
                return NULL;
            expect *= h->shape[i];
        }
    }
    *nv = n;
    return (const double *)(const void *)((const char *)h->data + h->byte_offset);
}

/* 1 when the event's work is done (query() without waiting), 0 if not yet. */
static int dev_done(PyObject *event)
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

static void win_free(win_t *w)
{
    for (size_t i = 0; i < w->nseg; i++)
        Py_XDECREF(w->seg[i].t);
    Py_XDECREF(w->buf);
    Py_XDECREF(w->ws);
    Py_XDECREF(w->dev_index);
    free(w->hs);
    Py_XDECREF(w->host);
    Py_XDECREF(w->hcap);
    Py_XDECREF(w->event);
    free(w->seg);
    free(w);
}

static void dev_poll(int wait);

/* The rows and pieces of a window's segments, as win_flush takes them:
 * int64 row numbers (a row holding pieces, once), then int64 piece lengths,
 * in one buffer. A Python list of ints each, parsed by torch.tensor, cost
 * about 60 us a window of ~1000 pieces; a bytearray is read by frombuffer. */
typedef struct cut {
    int64_t *rows, *lens;
    size_t nrows, np, caprows, caplens;
    int64_t last; /* the row of the last piece */
} cut_t;

static void cut_free(cut_t *c)
{
    free(c->rows);
    free(c->lens);
}

/* One piece of len elements in row: its number, or -1 (no memory). */
static int64_t cut_piece(cut_t *c, int64_t row, int64_t len)
{
    if (row != c->last) {
        int64_t *r = msp_grow(c->rows, &c->caprows, c->nrows, sizeof *r, 64);
        if (!r)
            return -1;
        c->rows = r;
        c->rows[c->nrows++] = row;
        c->last = row;
    }
    int64_t *l = msp_grow(c->lens, &c->caplens, c->np, sizeof *l, 64);
    if (!l)
        return -1;
    c->lens = l;
    c->lens[c->np] = len;
    return (int64_t)c->np++;
}

/* Rows and pieces of w's segments into c. 0, or -1 (no memory). */
static int win_cut(win_t *w, cut_t *c)
{
    const int64_t C = g_chunk;
    *c = (cut_t){.last = -1};
    for (size_t i = 0; i < w->nseg; i++) {
        seg_t *s = &w->seg[i];
        if (s->dup >= 0) { /* its copy's rows and pieces (cut already: it came first) */
            const seg_t *d = &w->seg[s->dup];
            s->c0 = d->c0;
            s->c1 = d->c1;
            s->ph = d->ph;
            s->pt = d->pt;
            continue;
        }
        int64_t o = s->off, e = s->off + s->n;
        int64_t a = (o + C - 1) / C, b = e / C;
        s->ph = s->pt = -1;
        s->c0 = s->c1 = 0;
        if (a > b) { /* inside one row */
            if ((s->ph = cut_piece(c, o / C, e - o)) < 0)
                return -1;
            continue;
        }
        if (o % C && (s->ph = cut_piece(c, o / C, a * C - o)) < 0)
            return -1;
        s->c0 = a;
        s->c1 = b;
        if (e % C && (s->pt = cut_piece(c, b, e - b * C)) < 0)
            return -1;
    }
    /* the rest of the last row: never written, not read */
    if (w->used % C && cut_piece(c, w->used / C, C - w->used % C) < 0)
        return -1;
    w->nrows = (w->used + C - 1) / C;
    w->width = w->nrows + (int64_t)c->np;
    return 0;
}

/* c's rows, then its lengths, as one bytearray (win_flush's cuts). */
static PyObject *cut_bytes(const cut_t *c)
{
    size_t n = c->np ? c->nrows + c->np : 0;
    PyObject *b = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(int64_t)));
    char *at = b ? PyByteArray_AsString(b) : NULL;
    if (at && n) {
        memcpy(at, c->rows, c->nrows * sizeof(int64_t));
        memcpy(at + c->nrows * sizeof(int64_t), c->lens, c->np * sizeof(int64_t));
    }
    return b;
}

/* Reduce w (launches queued; nothing waited for) and append it to the
 * flushed list; it left the open ones, and its copies are all launched. */
static void win_flush(win_t *w)
{
    PyObject *cuts = NULL, *pair = NULL;
    cut_t c = {0};
    size_t nv = 0;
    if (w->used > 0 && win_cut(w, &c) == 0 && (cuts = cut_bytes(&c)) &&
        (pair = call_fn("win_flush", Py_BuildValue("(OOLLOn)", w->buf, w->ws, (long long)w->nrows,
                                                    (long long)g_chunk, cuts,
                                                    (Py_ssize_t)c.nrows))) &&
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
static void win_retire(win_t *w)
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
    PyObject *pair = call_fn("win_new", Py_BuildValue("(sLi)", device, (long long)cap,
                                                      kind == MSP_DEV_WIDE));
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
        msp_py_warn_error("device stats", "cannot allocate a window for device statistics "
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
                       "start)", s->rec->name, t->role);
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
        PyObject *r = ts && fl ? call_fn("win_put", Py_BuildValue("(OOLLOO)", w->buf, w->ws,
                                                                 (long long)off, (long long)n,
                                                                 ts, flat))
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
static size_t seg_hash(PyObject *t, const void *ptr, int64_t n, msp_dtype_t dtype)
{
    return ptr ? (size_t)msp_mix64((uint64_t)(uintptr_t)ptr ^ (uint64_t)n << 8 ^ (uint64_t)dtype)
               : (size_t)msp_mix64((uint64_t)(uintptr_t)t);
}

/* The segment that holds t (or the same dense elements) and waits for its
 * copy, or -1. Its tensor is held while it waits: the memory is not reused. */
static int64_t win_lookup(const win_t *w, PyObject *t, const void *ptr, int64_t n,
                          msp_dtype_t dtype)
{
    if (!w->nhs)
        return -1;
    size_t mask = w->nhs - 1;
    for (size_t i = seg_hash(t, ptr, n, dtype) & mask; w->hs[i]; i = (i + 1) & mask) {
        const seg_t *s = &w->seg[w->hs[i] - 1];
        if (s->t && (ptr ? s->ptr == ptr && s->n == n && s->dtype == dtype : s->t == t))
            return (int64_t)(w->hs[i] - 1);
    }
    return -1;
}

/* Segment k (w->seg[k].t set) can be found by its tensor; a full table is
 * rebuilt from the segments still waiting. */
static void win_index(win_t *w, size_t k)
{
    if (2 * (w->nseg + 1) > w->nhs) {
        size_t cap = w->nhs ? w->nhs : 256;
        while (cap < 4 * (w->nseg + 1))
            cap *= 2;
        size_t *hs = calloc(cap, sizeof *hs);
        if (!hs)
            return; /* not found later: copied again, no harm */
        free(w->hs);
        w->hs = hs;
        w->nhs = cap;
        for (size_t j = w->issued; j < w->nseg; j++)
            if (j != k && w->seg[j].t && w->seg[j].dup < 0)
                win_index(w, j);
    }
    const seg_t *s = &w->seg[k];
    size_t mask = w->nhs - 1, i = seg_hash(s->t, s->ptr, s->n, s->dtype) & mask;
    while (w->hs[i])
        i = (i + 1) & mask;
    w->hs[i] = k + 1;
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
            w->seg[w->nseg++] = (seg_t){t_put[k].rec, t_put[k].ti, w->seg[m].off, w->seg[m].n,
                                        0, 0, -1, -1, NULL, -1, 0, m, NULL, t_put[k].dtype,
                                        0};
            continue;
        }
        w->seg[w->nseg] = (seg_t){t_put[k].rec, t_put[k].ti, w->used, t_put[k].n, 0, 0, -1, -1,
                                  t, defer ? ver : -1, 0, -1, t_put[k].ptr, t_put[k].dtype,
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
        if (g_open[i]->issued < g_open[i]->nseg &&
            (kinds & g_open[i]->kind)) {
            win_issue(g_open[i]);
            i = (size_t)-1; /* the open windows may have changed meanwhile */
        }
}

void msp_dev_call_end(void)
{
    int defer = g_defer_off ? 0 : msp_t_dev_defer; /* the kinds whose tensors wait */
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

/* ---- windows: results -------------------------------------------------------------- */

/* Segment s's statistics from w's results into its tensor. */
static void seg_fill(win_t *w, const seg_t *s, int ok)
{
    msp_dq_tensor_t *t = &s->rec->t[s->ti];
    if (!ok || !w->v) {
        dev_fill(t, NULL, 0);
        return;
    }
    /* a row's mean and mean of squares (float32) times its length, a piece's
     * sum and sum of squares (float64) as they are */
    const double *mx = w->v, *mn = w->v + w->width, *sm = mx + 2 * w->width,
                 *sq2 = mx + 3 * w->width;
    double v[6] = {-INFINITY, INFINITY, 0, 0, 0, 0}, sq = 0;
    int finite = 1;
    int64_t cols[2] = {s->ph < 0 ? -1 : w->nrows + s->ph, s->pt < 0 ? -1 : w->nrows + s->pt};
#define TAKE(c, scale)                                                                        \
    do {                                                                                      \
        if (mx[c] > v[0])                                                                     \
            v[0] = mx[c];                                                                     \
        if (mn[c] < v[1])                                                                     \
            v[1] = mn[c];                                                                     \
        v[2] += sm[c] * (scale);                                                              \
        sq += sq2[c] * (scale);                                                               \
        finite &= isfinite(sm[c]) && isfinite(sq2[c]) &&                                      \
                  (sq2[c] > 0 || !(fabs(mx[c]) > 0 || fabs(mn[c]) > 0)); /* underflow */    \
    } while (0)
    for (int64_t c = s->c0; c < s->c1; c++)
        TAKE(c, (double)g_chunk);
    for (int k = 0; k < 2; k++)
        if (cols[k] >= 0)
            TAKE(cols[k], 1.0);
#undef TAKE
    v[3] = sqrt(sq);
    /* NaN, Inf, a float32 sum or square that overflowed, or a row or piece
     * whose squares all underflowed: read the tensor again, exactly (rare;
     * waits for it) */
    if (!finite || !isfinite(v[2]) || !isfinite(sq)) {
        PyObject *h = call_fn("win_exact", Py_BuildValue("(OLL)", w->buf, (long long)s->off,
                                                         (long long)s->n));
        PyObject *cap = h ? msp_to_dlpack(h) : NULL;
        size_t nv = 0;
        const double *e = host_doubles(cap, &nv, 0);
        if (!e)
            msp_py_warn_error("device stats", "cannot read a device tensor's statistics "
                              "again; they are dumped as NaN");
        dev_fill(t, e, nv);
        Py_XDECREF(cap);
        Py_XDECREF(h);
        PyErr_Clear();
        return;
    }
    dev_fill(t, v, 6);
}

/* ---- polling ---------------------------------------------------------------------- */

/* Collect statistics in queue order: those already back, or (wait) all. */
static void dev_poll(int wait)
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
        Py_BEGIN_ALLOW_THREADS
        usleep(200);
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

void msp_rec_drop(msp_dq_rec_t *r)
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
    msp_dq_rec_free(r);
}

/* ---- adding a tensor ------------------------------------------------------------- */

void msp_dev_stats_init(void)
{
    const char *ds = getenv("MSPROBE_DEVICE_STATS");
    g_on = msp_g.have_cfg && msp_g.cfg.task == MSP_TASK_STATISTICS && !(ds && strcmp(ds, "0") == 0);
    g_test = g_on && msp_test.device_stats;
}

/* Float32 windows take the 16- and 32-bit floats (they convert exactly);
 * wide (float64) ones float64 and the integers and bool, whose every value
 * float64 holds exactly (int64 up to 2^53). */
int msp_dev_kind(msp_dtype_t dtype)
{
    switch (dtype) {
    case MSP_DTYPE_FLOAT32: case MSP_DTYPE_BFLOAT16: case MSP_DTYPE_FLOAT16:
        return MSP_DEV_FLOAT;
    case MSP_DTYPE_FLOAT64: case MSP_DTYPE_INT8: case MSP_DTYPE_INT16: case MSP_DTYPE_INT32:
    case MSP_DTYPE_INT64: case MSP_DTYPE_UINT8: case MSP_DTYPE_BOOL:
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
                      const int64_t *shape, const char *device, int rg, const void *ptr,
                      int dense)
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
