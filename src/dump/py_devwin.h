/* A device statistics window (py_devwin.c): its segments, its rows and
 * pieces as accel_copy.py's reduction takes them, and its results into each
 * tensor. Below py_devstats.c, which fills and reduces windows (py_devstats.h).
 * Private to the dump module. */
#ifndef MSP_PY_DEVWIN_H
#define MSP_PY_DEVWIN_H

#include "dump_py.h"

typedef struct seg {
    msp_dq_rec_t *rec; /* NULL: the record was dropped */
    size_t ti;
    int64_t off, n;  /* in the window */
    int64_t c0, c1;  /* whole rows [c0, c1) */
    int64_t ph, pt;  /* head and tail pieces, -1: none */
    PyObject *t;     /* the tensor, until its copy is launched (win_issue) */
    int64_t ver;     /* its version counter when added; -1: copied at once */
    int bad;         /* its copy failed: statistics NaN */
    int64_t dup;     /* -1, or the earlier segment of the same tensor (or of the
                           same dense memory: a view of it), unchanged: this one
                           shares its copy (no bytes of its own) */
    const void *ptr; /* its first element, when dense (else NULL): found by it */
    msp_dtype_t dtype;
    int flat; /* one-dimensional: the copy takes it as it is (no reshape) */
} seg_t;

typedef struct win {
    struct win *next; /* flushed windows, oldest first */
    char device[24];
    int kind; /* MSP_DEV_FLOAT (float32) or MSP_DEV_WIDE (float64), kind_cap elements */
    PyObject *buf;
    PyObject *ws;           /* its stream (accel_copy.py's win_new), or None */
    PyObject *dev_index;    /* ws's device index (an int), or NULL (the CPU) */
    unsigned long long raw; /* ws's raw handle: the current stream is compared to it */
    int64_t used;           /* of g_wincap elements */
    int busy;               /* copies being launched (the GIL is let go inside them) */
    int retired;            /* no more segments: flushed when all are copied and busy is 0 */
    seg_t *seg;
    size_t nseg, capseg;
    size_t issued;         /* segments [0, issued) have their copy launched */
    msp_index_t by_tensor; /* segments by tensor (or dense memory), while they wait */
    int64_t waiting;       /* elements of the segments not yet copied */
    size_t nwaiting;       /* those segments, shared ones (dup) left out: tensors held */
    /* once flushed */
    PyObject *host, *hcap, *event;
    const double *v; /* [4][width]: max, min, mean, mean of squares of rows,
                           then max, min, sum, sum of squares of pieces */
    int64_t nrows, width;
} win_t;

/* The rows and pieces of a window's segments, as win_flush takes them:
 * int64 row numbers (a row holding pieces, once), then int64 piece lengths,
 * in one buffer. A Python list of ints each, parsed by torch.tensor, cost
 * about 60 us a window of ~1000 pieces; a bytearray is read by frombuffer. */
typedef struct cut {
    int64_t *rows, *lens;
    size_t nrows, np, caprows, caplens;
    int64_t last; /* the row of the last piece */
} cut_t;

extern int64_t g_chunk; /* elements of a row (py_devstats.c's setup()) */

/* py_devwin.c */
PyObject *call_fn(const char *name, PyObject *args);
void dev_fill(msp_dq_tensor_t *t, const double *v, size_t nv);
const double *host_doubles(PyObject *cap, size_t *nv, size_t want);
void cut_free(cut_t *c);
int win_cut(win_t *w, cut_t *c);
PyObject *cut_bytes(const cut_t *c);
void seg_fill(win_t *w, const seg_t *s, int ok);

#endif
