/* A device statistics window's layout and results (py_devstats.c fills
 * and reduces windows): its segments cut into whole rows and head and tail
 * pieces, as accel_copy.py's reduction takes them, and each segment's
 * statistics put together, in float64, from its rows' and pieces'. */
#include "py_devwin.h"
#include "dlpack.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int64_t g_chunk; /* elements of a row (py_devstats.c's setup()) */

/* Call accel_copy.py's name(*args) (args: a new reference, taken); its
 * torch calls are the shim's own, never recorded. */
PyObject *call_fn(const char *name, PyObject *args)
{
    PyObject *f = msp_accel_fn(name);
    msp_quiet_t quiet = msp_quiet_begin();
    PyObject *r = f && args ? PyObject_CallObject(f, args) : NULL;
    msp_quiet_end(quiet);
    Py_XDECREF(args);
    return r;
}

/* t's statistics from [max, min, sum, norm] and for floating types the NaN
 * and Inf counts; NULL: they could not be had, all NaN. NaN anywhere makes
 * the four values NaN, as msp_stats_compute does. */
void dev_fill(msp_dq_tensor_t *t, const double *v, size_t nv)
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
const double *host_doubles(PyObject *cap, size_t *nv, size_t want)
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

void cut_free(cut_t *c)
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
int win_cut(win_t *w, cut_t *c)
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
PyObject *cut_bytes(const cut_t *c)
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

/* ---- windows: results -------------------------------------------------------------- */

/* Segment s's statistics from w's results into its tensor. */
void seg_fill(win_t *w, const seg_t *s, int ok)
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
#define TAKE(c, scale)                                                                             \
    do {                                                                                           \
        if (mx[c] > v[0])                                                                          \
            v[0] = mx[c];                                                                          \
        if (mn[c] < v[1])                                                                          \
            v[1] = mn[c];                                                                          \
        v[2] += sm[c] * (scale);                                                                   \
        sq += sq2[c] * (scale);                                                                    \
        finite &= isfinite(sm[c]) && isfinite(sq2[c]) &&                                           \
                  (sq2[c] > 0 || !(fabs(mx[c]) > 0 || fabs(mn[c]) > 0)); /* underflow */           \
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
        PyObject *h = call_fn("win_exact",
                              Py_BuildValue("(OLL)", w->buf, (long long)s->off, (long long)s->n));
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
