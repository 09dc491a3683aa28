/* The device statistics' state, shared by py_devstats.c (adding tensors to
 * windows, launching their copies and reductions, collecting results) and
 * py_devhold.c (records held until their statistics are in); a window's
 * layout, rows and pieces are py_devwin.c's (py_devwin.h), below both.
 * Private to the dump module; see py_devstats.c for how it works. */
#ifndef MSP_PY_DEVSTATS_H
#define MSP_PY_DEVSTATS_H

#include "py_devwin.h" /* a window's layout, rows and pieces */

#include <pthread.h>

#define MSP_DEV_HELD_FLUSH 1024  /* records held: the open windows are reduced */
#define MSP_DEV_HELD_MAX 16384   /* records held: the oldest are waited for */
#define MSP_WIN_INFLIGHT 2       /* windows reduced, results not yet read: a third waits */
#define MSP_PUT_TENSORS 64       /* tensors waiting in a window: copied, in one launch */
#define MSP_PUT_ELEMS (16 << 20) /* elements waiting in a window (memory kept alive): copied */
#define MSP_DEV_POLL_EVERY 16    /* records held between two looks at the results */

/* ---- one tensor at a time ---------------------------------------------------- */
typedef struct dpend {
    msp_dq_rec_t *rec; /* NULL: the record was dropped */
    size_t ti;         /* rec->t[ti] */
    const double *v;   /* the pinned float64s */
    size_t nv;
    PyObject *cap, *event;
} dpend_t;
extern dpend_t *g_dp;
extern size_t g_dp_head, g_ndp, g_capdp;

/* ---- windows (their layout: py_devwin.h) --------------------------------------- */
extern win_t *g_open[8]; /* one open window per device, by creation */
extern size_t g_nopen;
extern win_t **g_retired; /* retired windows not yet flushed (a copy or
                                       their reduction in progress) */
extern size_t g_nretired, g_capretired;
extern win_t *g_flushed, **g_flushed_tail;
extern size_t g_nflushed;
extern int g_on, g_test;       /* msp_dev_stats_init */
extern int64_t g_wincap;       /* elements (py_devstats.c's setup()) */
extern int64_t g_widecap;      /* elements of a wide window */
extern int g_alone;            /* MSPROBE_DEVICE_STATS_ALONE: no windows (bench/gpu) */
extern int g_skip;             /* MSPROBE_DEVICE_STATS_SKIP: records, no statistics (bench/gpu) */
extern int g_defer_off;        /* MSPROBE_DEVICE_STATS_DEFER=0, or a version moved: no waiting */
extern PyObject *g_raw_stream; /* accel_copy.py's _raw_stream(device index) */

/* The tensors of the call being added on this thread, put at its end. */
typedef struct wput {
    msp_dq_rec_t *rec;
    size_t ti;
    PyObject *t;
    int64_t n;
    int kind;        /* its window's (MSP_DEV_*) */
    const void *ptr; /* dense memory from here (else NULL) */
    msp_dtype_t dtype;
    int flat; /* one-dimensional (seg_t's) */
    char device[24];
} wput_t;
extern _Thread_local wput_t *t_put;
extern _Thread_local size_t t_nput, t_capput;

extern msp_dq_rec_t **g_held;
extern size_t g_held_head, g_nheld, g_capheld;
extern int g_dev_polling;      /* a dev_poll is running (perhaps waiting, GIL released) */
extern unsigned g_hold_tick;   /* records held so far (msp_dev_hold polls every few) */
extern pthread_t g_dev_poller; /* in that thread */

/* py_devstats.c */
int dev_done(PyObject *event);
void dev_poll(int wait);
void win_free(win_t *w);
void win_retire(win_t *w);

#endif
