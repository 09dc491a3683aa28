/* The device statistics' state, shared by py_devstats.c (adding tensors to
 * windows, launching their copies and reductions, collecting results),
 * py_devwin.c (a window's rows and pieces, and its results into each
 * tensor) and py_devhold.c (records held until their statistics are in). Private to the
 * dump module; see py_devstats.c for how it works. */
#ifndef MSP_PY_DEVSTATS_H
#define MSP_PY_DEVSTATS_H

#include "dump_py.h"

#include <pthread.h>

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
extern dpend_t *g_dp;
extern size_t g_dp_head, g_ndp, g_capdp;

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

extern win_t *g_open[8];            /* one open window per device, by creation */
extern size_t g_nopen;
extern win_t **g_retired;           /* retired windows not yet flushed (a copy or
                                       their reduction in progress) */
extern size_t g_nretired, g_capretired;
extern win_t *g_flushed, **g_flushed_tail;
extern size_t g_nflushed;
extern int g_on, g_test;           /* msp_dev_stats_init */
extern int64_t g_chunk, g_wincap;  /* elements (py_devstats.c's setup()) */
extern int64_t g_widecap;          /* elements of a wide window */
extern int g_alone;                /* MSPROBE_DEVICE_STATS_ALONE: no windows (bench/gpu) */
extern int g_skip;                 /* MSPROBE_DEVICE_STATS_SKIP: records, no statistics (bench/gpu) */
extern int g_defer_off;            /* MSPROBE_DEVICE_STATS_DEFER=0, or a version moved: no waiting */
extern PyObject *g_raw_stream;     /* accel_copy.py's _raw_stream(device index) */

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
extern _Thread_local wput_t *t_put;
extern _Thread_local size_t t_nput, t_capput;

extern msp_dq_rec_t **g_held;
extern size_t g_held_head, g_nheld, g_capheld;
extern int g_dev_polling;      /* a dev_poll is running (perhaps waiting, GIL released) */
extern unsigned g_hold_tick;   /* records held so far (msp_dev_hold polls every few) */
extern pthread_t g_dev_poller; /* in that thread */

/* The rows and pieces of a window's segments, as win_flush takes them:
 * int64 row numbers (a row holding pieces, once), then int64 piece lengths,
 * in one buffer. A Python list of ints each, parsed by torch.tensor, cost
 * about 60 us a window of ~1000 pieces; a bytearray is read by frombuffer. */
typedef struct cut {
    int64_t *rows, *lens;
    size_t nrows, np, caprows, caplens;
    int64_t last; /* the row of the last piece */
} cut_t;

/* py_devstats.c */
int dev_done(PyObject *event);
void dev_poll(int wait);
void win_free(win_t *w);
void win_retire(win_t *w);
/* py_devwin.c */
PyObject *call_fn(const char *name, PyObject *args);
void dev_fill(msp_dq_tensor_t *t, const double *v, size_t nv);
const double *host_doubles(PyObject *cap, size_t *nv, size_t want);
void cut_free(cut_t *c);
int win_cut(win_t *w, cut_t *c);
PyObject *cut_bytes(const cut_t *c);
void seg_fill(win_t *w, const seg_t *s, int ok);

#endif
