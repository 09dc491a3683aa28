/* A tensor's monitor statistics (msprobe's ops: min, max, mean, norm, zeros,
 * nans), as msprobe's monitor computes them: min and max in the tensor's
 * dtype, mean and norm in float64, zeros the share of |x| < eps, nans the
 * count of NaNs; a NaN anywhere makes min, max, mean and norm NaN.
 *
 * A dense host tensor of a floating dtype is read in place in one fused pass
 * over its memory: no copy, no Python object per element, six numbers out.
 * Any other tensor (an accelerator's, or an unusual dtype or layout) is
 * reduced by torch where it lives, to six float64s on its device; a step's
 * results wait there and cross to the host in one copy per device at the
 * step's end (msp_mon_stats_flush), so no tensor leaves the device and the
 * device is synchronised once a step. */
#include "py_monitor_stats.h"

#include "py_monitor_thread.h"

#include "msprobe/cpu.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef MSP_CPU_X86
#include <immintrin.h>
#endif

static const char g_dev_src[] =
    "import torch\n"
    "_lens = {}\n"
    "def _lengths(ns, dev):\n"
    "    key = (tuple(ns), dev)\n"
    "    t = _lens.get(key)\n"
    "    if t is None:\n"
    "        t = torch.tensor(ns, dtype=torch.int64)\n"
    "        if dev.type != 'cpu':\n"
    "            t = t.pin_memory().to(dev, non_blocking=True)\n"
    "        if len(_lens) > 4096:\n"
    "            _lens.clear()\n"
    "        _lens[key] = t\n"
    "    return t\n"
    "def one(x, eps):\n"
    "    x = x.detach()\n"
    "    n = x.numel()\n"
    "    f = x if x.is_floating_point() else x.double()\n"
    "    mn, mx = torch.aminmax(f)\n"
    "    return torch.stack([mn.double(), mx.double(), f.sum(dtype=torch.float64) / n,\n"
    "                        torch.linalg.vector_norm(f, dtype=torch.float64),\n"
    "                        (f.abs() < eps).sum().double() / n,\n"
    "                        torch.isnan(f).sum().double()]).view(1, 6)\n"
    "def many(ts, eps):\n"
    "    by = {}\n"
    "    for i, x in enumerate(ts):\n"
    "        by.setdefault((x.device, x.dtype), []).append(i)\n"
    "    rows = [None] * len(ts)\n"
    "    for (dev, _), idx in by.items():\n"
    "        ns = [ts[i].numel() for i in idx]\n"
    "        flat = torch.cat([ts[i].detach().reshape(-1) for i in idx])\n"
    "        if not flat.is_floating_point():\n"
    "            flat = flat.double()\n"
    "        lens = _lengths(ns, dev)\n"
    "        d = flat.double()\n"
    "        seg = lambda v, how: torch.segment_reduce(v, how, lengths=lens)\n"
    "        st = torch.stack([seg(flat, 'min').double(), seg(flat, 'max').double(),\n"
    "                          seg(d, 'sum') / lens, seg(d * d, 'sum').sqrt(),\n"
    "                          seg((flat.abs() < eps).double(), 'sum') / lens,\n"
    "                          seg(torch.isnan(flat).double(), 'sum')], 1)\n"
    "        for k, i in enumerate(idx):\n"
    "            rows[i] = st[k]\n"
    "    return torch.stack(rows)\n"
    "def fetch(results):\n"
    "    by = {}\n"
    "    for i, r in enumerate(results):\n"
    "        by.setdefault(r.device, []).append(i)\n"
    "    out = [None] * len(results)\n"
    "    for idx in by.values():\n"
    "        vals = torch.cat([results[i] for i in idx]).cpu().tolist()\n"
    "        at = 0\n"
    "        for i in idx:\n"
    "            k = results[i].shape[0]\n"
    "            out[i] = vals[at:at + k]\n"
    "            at += k\n"
    "    return out\n";

/* Tensors at least this large are reduced alone (their launches cost
 * nothing beside their reading); smaller ones wait for the end of their
 * group (msp_mon_stats_launch) to be reduced together, a few launches for
 * them all instead of a few each. */
#define MSP_MON_ALONE (1 << 20)

static PyObject *g_ns, *g_one_fn, *g_many_fn, *g_fetch_fn;
static PyObject *g_results; /* device results, [k, 6] float64 each, of rows g_rows in order */
static PyObject *g_small;   /* small tensors waiting for msp_mon_stats_launch */
static size_t *g_rows, g_nrows, g_caprows;    /* the rows of g_results, then of g_small */
static size_t *g_srows, g_nsrows, g_capsrows; /* the rows of g_small */
static double g_eps;
static PyObject *s_is_cpu, *s_dtype, *s_shape, *s_data_ptr, *s_is_contiguous, *s_numel, *s_version;

/* The dtypes read in place, by their torch name. */
enum { D_F32 = 0, D_F64, D_F16, D_BF16, D_NREAD };
static PyObject *g_dt[D_NREAD];
static const char *const g_dt_name[D_NREAD] = {"float32", "float64", "float16", "bfloat16"};

int msp_mon_stats_init(PyObject *torch)
{
    g_ns = msp_py_run_source(g_dev_src, "msprobe_monitor_stats");
    g_one_fn = g_ns ? PyDict_GetItemString(g_ns, "one") : NULL;
    g_many_fn = g_ns ? PyDict_GetItemString(g_ns, "many") : NULL;
    g_fetch_fn = g_ns ? PyDict_GetItemString(g_ns, "fetch") : NULL;
    g_results = PyList_New(0);
    g_small = PyList_New(0);
    s_is_cpu = PyUnicode_InternFromString("is_cpu");
    s_dtype = PyUnicode_InternFromString("dtype");
    s_shape = PyUnicode_InternFromString("shape");
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    s_is_contiguous = PyUnicode_InternFromString("is_contiguous");
    s_numel = PyUnicode_InternFromString("numel");
    s_version = PyUnicode_InternFromString("_version");
    for (int i = 0; i < D_NREAD; i++)
        g_dt[i] = PyObject_GetAttrString(torch, g_dt_name[i]);
    if (PyErr_Occurred())
        PyErr_Clear();
    return g_one_fn && g_many_fn && g_fetch_fn && g_results && g_small ? 0 : -1;
}

static float bf16_f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static float f16_f(uint16_t h)
{
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
    if (e == 0x1f)
        u = s | 0x7f800000u | (m << 13);
    else if (e == 0) {
        if (!m)
            u = s;
        else { /* subnormal: normalise */
            int k = -1;
            do {
                k++;
                m <<= 1;
            } while (!(m & 0x400));
            u = s | ((uint32_t)(127 - 15 - k) << 23) | ((m & 0x3ff) << 13);
        }
    } else
        u = s | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The fused pass: one read of each element. Four partial sums let the
 * compiler keep the loop's adds independent. */
#define MSP_MON_PASS(TYPE, CONV)                                                                   \
    do {                                                                                           \
        const TYPE *p_ = (const TYPE *)data;                                                       \
        double mn_ = INFINITY, mx_ = -INFINITY, sum_[4] = {0}, sq_[4] = {0};                       \
        int64_t nz_ = 0, nan_ = 0, i_ = 0;                                                         \
        for (; i_ + 4 <= n; i_ += 4) {                                                             \
            for (int k_ = 0; k_ < 4; k_++) {                                                       \
                double x_ = (double)CONV(p_[i_ + k_]);                                             \
                sum_[k_] += x_;                                                                    \
                sq_[k_] += x_ * x_;                                                                \
                mn_ = x_ < mn_ ? x_ : mn_;                                                         \
                mx_ = x_ > mx_ ? x_ : mx_;                                                         \
                nz_ += fabs(x_) < eps;                                                             \
                nan_ += isnan(x_);                                                                 \
            }                                                                                      \
        }                                                                                          \
        for (; i_ < n; i_++) {                                                                     \
            double x_ = (double)CONV(p_[i_]);                                                      \
            sum_[0] += x_;                                                                         \
            sq_[0] += x_ * x_;                                                                     \
            mn_ = x_ < mn_ ? x_ : mn_;                                                             \
            mx_ = x_ > mx_ ? x_ : mx_;                                                             \
            nz_ += fabs(x_) < eps;                                                                 \
            nan_ += isnan(x_);                                                                     \
        }                                                                                          \
        sum = (sum_[0] + sum_[1]) + (sum_[2] + sum_[3]);                                           \
        sq = (sq_[0] + sq_[1]) + (sq_[2] + sq_[3]);                                                \
        mn = mn_;                                                                                  \
        mx = mx_;                                                                                  \
        nz = nz_;                                                                                  \
        nans = nan_;                                                                               \
    } while (0)

#define MSP_ID(x) (x)

/* One pass's accumulators over a run of elements: min and max of those that
 * are no NaN, their sum and sum of squares in float64, the counts. */
typedef struct part {
    double mn, mx, sum, sq;
    int64_t zeros, nans;
} part_t;

/* s from the accumulators of n elements: min, max, mean and norm are NaN
 * when any element was (msprobe's), zeros a share, nans a count. */
static void stats_of(msp_mon_stat_t *s, int64_t n, const part_t *a)
{
    s->v[MSP_MON_MIN] = a->nans ? NAN : a->mn;
    s->v[MSP_MON_MAX] = a->nans ? NAN : a->mx;
    s->v[MSP_MON_MEAN] = a->nans ? NAN : a->sum / (double)n;
    s->v[MSP_MON_NORM] = a->nans ? NAN : sqrt(a->sq);
    s->v[MSP_MON_ZEROS] = (double)a->zeros / (double)n;
    s->v[MSP_MON_NANS] = (double)a->nans;
    s->have = 1;
}

#ifdef MSP_CPU_X86
/* The bits of the least float t with (double)t >= eps: for a float x that is
 * no NaN, (double)|x| < eps exactly when the bits of |x| are below these
 * (non-negative floats order as their bits do). 0 (nothing counted) for an
 * eps <= 0 or NaN. */
static int32_t zero_below(double eps)
{
    if (!(eps > 0))
        return 0;
    float t = eps >= (double)FLT_MAX ? INFINITY : (float)eps;
    if ((double)t < eps)
        t = nextafterf(t, INFINITY);
    int32_t b;
    memcpy(&b, &t, sizeof b);
    return b;
}

/* float32 with AVX2 and FMA, sixteen elements a round (chosen at run time
 * by msp_cpu_use(MSP_CPU_STATS_AVX2), as the dump's statistics are): min and
 * max in float32 (maxps and minps skip a NaN, which is counted apart), sums
 * and squares in float64 as msprobe's x.to(float64) computes them, in eight
 * independent accumulators so that no add waits for the one before, and the
 * |x| < eps test on the bits of |x| (zero_below). Counts are kept in int32
 * lanes and added up every 2^28 elements. */
__attribute__((target("avx2,fma"))) static void f32_avx2(const float *p, int64_t n, double eps,
                                                         part_t *out)
{
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff), infbits = _mm256_set1_epi32(0x7f800000),
                  below = _mm256_set1_epi32(zero_below(eps));
    __m256 mx = _mm256_set1_ps(-INFINITY), mn = _mm256_set1_ps(INFINITY), mx2 = mx, mn2 = mn;
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0, q0 = s0, q1 = s0, q2 = s0, q3 = s0;
    int64_t i = 0, nans = 0, zeros = 0;
    while (i + 16 <= n) {
        int64_t end = n - i > (INT64_C(1) << 28) ? i + (INT64_C(1) << 28) : n;
        __m256i nanc = _mm256_setzero_si256(), nz = nanc;
        for (; i + 16 <= end; i += 16) {
            __m256 x = _mm256_loadu_ps(p + i), y = _mm256_loadu_ps(p + i + 8);
            __m256i ax = _mm256_and_si256(_mm256_castps_si256(x), absmask);
            __m256i ay = _mm256_and_si256(_mm256_castps_si256(y), absmask);
            nanc = _mm256_sub_epi32(nanc, _mm256_cmpgt_epi32(ax, infbits));
            nanc = _mm256_sub_epi32(nanc, _mm256_cmpgt_epi32(ay, infbits));
            nz = _mm256_sub_epi32(nz, _mm256_cmpgt_epi32(below, ax));
            nz = _mm256_sub_epi32(nz, _mm256_cmpgt_epi32(below, ay));
            mx = _mm256_max_ps(x, mx);
            mn = _mm256_min_ps(x, mn);
            mx2 = _mm256_max_ps(y, mx2);
            mn2 = _mm256_min_ps(y, mn2);
            __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
            __m256d b = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
            __m256d c = _mm256_cvtps_pd(_mm256_castps256_ps128(y));
            __m256d d = _mm256_cvtps_pd(_mm256_extractf128_ps(y, 1));
            s0 = _mm256_add_pd(s0, a);
            s1 = _mm256_add_pd(s1, b);
            s2 = _mm256_add_pd(s2, c);
            s3 = _mm256_add_pd(s3, d);
            q0 = _mm256_fmadd_pd(a, a, q0);
            q1 = _mm256_fmadd_pd(b, b, q1);
            q2 = _mm256_fmadd_pd(c, c, q2);
            q3 = _mm256_fmadd_pd(d, d, q3);
        }
        int32_t cn[8], cz[8];
        _mm256_storeu_si256((__m256i *)(void *)cn, nanc);
        _mm256_storeu_si256((__m256i *)(void *)cz, nz);
        for (int k = 0; k < 8; k++) {
            nans += cn[k];
            zeros += cz[k];
        }
    }
    float fmx[8], fmn[8];
    double ds[4], dq[4];
    _mm256_storeu_ps(fmx, _mm256_max_ps(mx, mx2));
    _mm256_storeu_ps(fmn, _mm256_min_ps(mn, mn2));
    _mm256_storeu_pd(ds, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
    _mm256_storeu_pd(dq, _mm256_add_pd(_mm256_add_pd(q0, q1), _mm256_add_pd(q2, q3)));
    double mnv = INFINITY, mxv = -INFINITY, sum = (ds[0] + ds[1]) + (ds[2] + ds[3]);
    double sq = (dq[0] + dq[1]) + (dq[2] + dq[3]);
    for (int k = 0; k < 8; k++) {
        mxv = fmx[k] > mxv ? fmx[k] : mxv;
        mnv = fmn[k] < mnv ? fmn[k] : mnv;
    }
    for (; i < n; i++) {
        double x = p[i];
        nans += isnan(x);
        if (isnan(x))
            continue;
        sum += x;
        sq += x * x;
        mnv = x < mnv ? x : mnv;
        mxv = x > mxv ? x : mxv;
        zeros += fabs(x) < eps;
    }
    *out = (part_t){mnv, mxv, sum, sq, zeros, nans};
}
#endif

/* The accumulators of n elements of dtype dt at data. */
static void host_part(const void *data, int64_t n, int dt, double eps, part_t *out)
{
#ifdef MSP_CPU_X86
    if (dt == D_F32 && msp_cpu_use(MSP_CPU_STATS_AVX2)) {
        f32_avx2(data, n, eps, out);
        return;
    }
#endif
    double sum = 0, sq = 0, mn = 0, mx = 0;
    int64_t nz = 0, nans = 0;
    switch (dt) {
    case D_F32:
        MSP_MON_PASS(float, MSP_ID);
        break;
    case D_F64:
        MSP_MON_PASS(double, MSP_ID);
        break;
    case D_F16:
        MSP_MON_PASS(uint16_t, f16_f);
        break;
    default:
        MSP_MON_PASS(uint16_t, bf16_f);
        break;
    }
    *out = (part_t){mn, mx, sum, sq, nz, nans};
}

/* A tensor at least twice this large is read in pieces of at least this
 * many elements (a few tens of microseconds each), by the training thread
 * and the monitor's helper thread together (msp_mon_thread_split); at most
 * MSP_MON_PIECES pieces. The pieces depend on the size alone, and their
 * accumulators are added in their order, so that the numbers do not depend
 * on which thread read what. */
#define MSP_MON_PIECE (INT64_C(1) << 18)
#define MSP_MON_PIECES 64

typedef struct pieces {
    const char *p;
    int64_t n, piece;
    size_t esize;
    int dt;
    double eps;
    part_t part[MSP_MON_PIECES];
} pieces_t;

static void piece_pass(void *arg, int i)
{
    pieces_t *w = arg;
    int64_t at = (int64_t)i * w->piece, n = w->n - at < w->piece ? w->n - at : w->piece;
    host_part(w->p + (size_t)at * w->esize, n, w->dt, w->eps, &w->part[i]);
}

/* s from n elements of dtype dt at data; shared: in pieces with the helper
 * thread when large enough. 1 when read in pieces, else 0. */
static int host_pass(const void *data, int64_t n, int dt, double eps, msp_mon_stat_t *s, int shared)
{
    static const size_t esize[D_NREAD] = {4, 8, 2, 2};
    part_t a;
    if (!shared || n < 2 * MSP_MON_PIECE) {
        host_part(data, n, dt, eps, &a);
        stats_of(s, n, &a);
        return 0;
    }
    int64_t piece = (n + MSP_MON_PIECES - 1) / MSP_MON_PIECES;
    /* a multiple of 16 elements: each piece starts where the one before
     * would have gone on with a whole round of the vector loop */
    piece = piece < MSP_MON_PIECE ? MSP_MON_PIECE : (piece + 15) / 16 * 16;
    pieces_t w = {.p = data, .n = n, .piece = piece, .esize = esize[dt], .dt = dt, .eps = eps};
    int k = (int)((n + piece - 1) / piece);
    msp_mon_thread_split(piece_pass, &w, k);
    a = w.part[0];
    for (int i = 1; i < k; i++) {
        const part_t *b = &w.part[i];
        a.mn = b->mn < a.mn ? b->mn : a.mn;
        a.mx = b->mx > a.mx ? b->mx : a.mx;
        a.sum += b->sum;
        a.sq += b->sq;
        a.zeros += b->zeros;
        a.nans += b->nans;
    }
    stats_of(s, n, &a);
    return 1;
}

/* "[16, 8]" and "torch.float32" as msprobe writes them; the element count. */
static int describe(PyObject *t, msp_mon_stat_t *s, int64_t *numel, int *dt)
{
    PyObject *shape = PyObject_GetAttr(t, s_shape);
    PyObject *dtype = PyObject_GetAttr(t, s_dtype);
    int ok = shape && dtype && PyTuple_Check(shape);
    int64_t n = 1;
    size_t at = 0;
    s->shape[at++] = '[';
    for (Py_ssize_t i = 0; ok && i < PyTuple_Size(shape); i++) {
        long long d = PyLong_AsLongLong(PyTuple_GetItem(shape, i));
        n *= d;
        int w = snprintf(s->shape + at, sizeof s->shape - at, "%s%lld", i ? ", " : "", d);
        at += w > 0 && (size_t)w < sizeof s->shape - at ? (size_t)w : 0;
    }
    snprintf(s->shape + at, sizeof s->shape - at, "]");
    *dt = -1;
    for (int i = 0; ok && i < D_NREAD; i++)
        if (dtype == g_dt[i])
            *dt = i;
    if (*dt >= 0) { /* no str() a tensor for the common dtypes */
        snprintf(s->dtype, sizeof s->dtype, "torch.%s", g_dt_name[*dt]);
    } else {
        PyObject *txt = ok ? PyObject_Str(dtype) : NULL;
        PyObject *b = txt ? PyUnicode_AsUTF8String(txt) : NULL;
        snprintf(s->dtype, sizeof s->dtype, "%s", b ? PyBytes_AsString(b) : "?");
        Py_XDECREF(b);
        Py_XDECREF(txt);
    }
    Py_XDECREF(shape);
    Py_XDECREF(dtype);
    *numel = n;
    return ok && !PyErr_Occurred() ? 0 : -1;
}

/* Where a dense tensor's elements are, and whether they have changed: its
 * data_ptr and autograd's version counter (shared by the tensor's views and
 * detached aliases, bumped by every in-place change). */
typedef struct mem_key {
    uintptr_t p;
    int64_t version;
    int cpu;
} mem_key_t;

static int64_t version_of(PyObject *t)
{
    PyObject *v = PyObject_GetAttr(t, s_version);
    int64_t n = v ? (int64_t)PyLong_AsLongLong(v) : -1;
    Py_XDECREF(v);
    return n;
}

/* 0 with k set when t is dense (contiguous); else -1. seen_again: t may be
 * seen again (the version is read, a device tensor keyed too); else only a
 * host tensor read in place is keyed, with version 0. */
static int key_of(PyObject *t, mem_key_t *k, int seen_again)
{
    PyObject *cpu = PyObject_GetAttr(t, s_is_cpu);
    k->cpu = cpu == Py_True;
    Py_XDECREF(cpu);
    if (!seen_again && (!k->cpu || msp_test.device_stats))
        return -1; /* reduced by torch, nothing to key */
    PyObject *contig = PyObject_CallMethodObjArgs(t, s_is_contiguous, NULL);
    int dense = contig == Py_True;
    Py_XDECREF(contig);
    PyObject *ptr = dense ? PyObject_CallMethodObjArgs(t, s_data_ptr, NULL) : NULL;
    k->p = ptr ? (uintptr_t)PyLong_AsVoidPtr(ptr) : 0;
    Py_XDECREF(ptr);
    k->version = !dense ? -1 : seen_again ? version_of(t) : 0;
    if (PyErr_Occurred())
        PyErr_Clear();
    return dense && k->p && k->version >= 0 ? 0 : -1;
}

/* A dense host tensor of a dtype read in place: its memory; else NULL. */
static const void *host_data(const mem_key_t *k, int keyed)
{
    return keyed && k->cpu && !msp_test.device_stats ? (const void *)k->p : NULL;
}

static int push_row(size_t **rows, size_t *n, size_t *cap, size_t row)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 256;
        size_t *nr = realloc(*rows, c * sizeof *nr);
        if (!nr)
            return -1;
        *rows = nr;
        *cap = c;
    }
    (*rows)[(*n)++] = row;
    return 0;
}

/* ---- a tensor seen again --------------------------------------------------
 * A module's output is the next module's input (and its container's output),
 * and a gradient passes through the hooks of every module it crosses: the
 * same memory, unchanged, reaches the monitor two to four times a step. The
 * last few tensors reduced are kept here, each held (so that its memory
 * cannot be reused while here), with its statistics or, for a device
 * tensor's queued result, its row: a tensor whose memory, shape, dtype and
 * version match one of them takes its numbers instead of a second pass.
 * Activations keep more (a block's input comes back at the block's end) than
 * gradients (which are short-lived: holding them would raise the peak); the
 * kind changing (forward, then backward) and a step's end empty it. */
enum { SEEN_MAX = 16 };
static const int g_seen_cap[MSP_MON_SEEN_N] = {SEEN_MAX, 6};
typedef struct seen {
    PyObject *t;
    mem_key_t k;
    size_t row;
    msp_mon_stat_t st;
} seen_t;
static seen_t g_seen[SEEN_MAX]; /* the most recent last */
static int g_nseen, g_seen_kind = -1;
static int64_t g_passes, g_reused, g_pieced;          /* for MSPROBE_MONITOR_PROFILE */
static size_t (*g_copies)[2], g_ncopies, g_capcopies; /* {row, from row}, filled at the flush */

static void seen_clear(void)
{
    for (int i = 0; i < g_nseen; i++)
        Py_DECREF(g_seen[i].t);
    g_nseen = 0;
}

/* Entry i, taken out (its reference with it). */
static seen_t seen_take(int i)
{
    seen_t e = g_seen[i];
    memmove(&g_seen[i], &g_seen[i + 1], (size_t)(g_nseen - i - 1) * sizeof g_seen[0]);
    g_nseen--;
    return e;
}

static void seen_drop(int i)
{
    Py_DECREF(seen_take(i).t);
}

/* The entry t's memory matches, made the most recent; else NULL. */
static seen_t *seen_find(int kind, const mem_key_t *k, const msp_mon_stat_t *s)
{
    if (kind != g_seen_kind) {
        seen_clear();
        g_seen_kind = kind;
        return NULL;
    }
    for (int i = g_nseen - 1; i >= 0; i--) {
        seen_t *e = &g_seen[i];
        if (e->k.p != k->p || e->k.cpu != k->cpu || e->k.version != k->version ||
            strcmp(e->st.shape, s->shape) != 0 || strcmp(e->st.dtype, s->dtype) != 0)
            continue;
        if (version_of(e->t) != e->k.version) { /* changed in place since */
            seen_drop(i);
            return NULL;
        }
        seen_t hit = seen_take(i); /* then appended: the most recent */
        g_seen[g_nseen] = hit;
        return &g_seen[g_nseen++];
    }
    return NULL;
}

static void seen_put(int kind, PyObject *t, const mem_key_t *k, const msp_mon_stat_t *s, size_t row)
{
    if (g_nseen == g_seen_cap[kind])
        seen_drop(0);
    Py_INCREF(t);
    g_seen[g_nseen++] = (seen_t){.t = t, .k = *k, .row = row, .st = *s};
}

/* s from what the entry has: its numbers, or its row's once flushed. */
static int seen_use(const seen_t *e, msp_mon_stat_t *s, size_t row)
{
    if (e->st.have == 1) {
        memcpy(s->v, e->st.v, sizeof s->v);
        s->have = 1;
        return 0;
    }
    if (g_ncopies == g_capcopies) {
        size_t c = g_capcopies ? 2 * g_capcopies : 64;
        size_t(*nc)[2] = realloc(g_copies, c * sizeof *nc);
        if (!nc)
            return -1;
        g_copies = nc;
        g_capcopies = c;
    }
    g_copies[g_ncopies][0] = row;
    g_copies[g_ncopies++][1] = e->row;
    s->have = 2;
    return 0;
}

int msp_mon_stats_host(PyObject *t, msp_mon_stat_t *s, msp_mon_host_t *h)
{
    mem_key_t k;
    memset(s, 0, sizeof *s);
    h->p = NULL;
    if (!t || !msp_is_tensor(t) || describe(t, s, &h->n, &h->dt) != 0 || h->n == 0 || h->dt < 0 ||
        !(h->p = host_data(&k, key_of(t, &k, 0) == 0))) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

void msp_mon_stats_pass(const msp_mon_host_t *h, double eps, msp_mon_stat_t *s)
{
    host_pass(h->p, h->n, h->dt, eps, s, 0);
}

/* t's statistics reduced by torch where it lives: queued (s->have 2). */
static void take_device(PyObject *t, double eps, msp_mon_stat_t *s, size_t row, int64_t n)
{
    g_eps = eps;
    if (n < MSP_MON_ALONE && !msp_test.monitor_alone) {
        if (push_row(&g_srows, &g_nsrows, &g_capsrows, row) != 0)
            return;
        if (PyList_Append(g_small, t) != 0) {
            g_nsrows--;
            PyErr_Clear();
            return;
        }
        s->have = 2; /* waiting */
        return;
    }
    PyObject *e = PyFloat_FromDouble(eps);
    PyObject *r = e ? PyObject_CallFunctionObjArgs(g_one_fn, t, e, NULL) : NULL;
    Py_XDECREF(e);
    if (r && push_row(&g_rows, &g_nrows, &g_caprows, row) == 0 && PyList_Append(g_results, r) == 0)
        s->have = 2;
    Py_XDECREF(r);
    PyErr_Clear();
}

void msp_mon_stats_take(PyObject *t, double eps, msp_mon_stat_t *s, size_t row, int seen)
{
    memset(s, 0, sizeof *s);
    if (!t || !msp_is_tensor(t))
        return;
    int64_t n = 0;
    int dt = -1;
    if (describe(t, s, &n, &dt) != 0) {
        PyErr_Clear();
        return;
    }
    if (n == 0) { /* msprobe: torch.min of nothing raises, the metric is nan */
        for (int k = 0; k < MSP_MON_NOPS; k++)
            s->v[k] = NAN;
        s->have = 1;
        return;
    }
    mem_key_t k;
    int keyed = key_of(t, &k, seen >= 0) == 0;
    seen_t *e = keyed && seen >= 0 ? seen_find(seen, &k, s) : NULL;
    if (e && seen_use(e, s, row) == 0) {
        g_reused++;
        return;
    }
    g_passes++;
    const void *p = dt >= 0 ? host_data(&k, keyed) : NULL;
    if (p)
        g_pieced += host_pass(p, n, dt, eps, s, 1);
    else
        take_device(t, eps, s, row, n);
    if (keyed && seen >= 0 && s->have)
        seen_put(seen, t, &k, s, row);
}

void msp_mon_stats_counts(int64_t *passes, int64_t *reused, int64_t *pieced)
{
    *pieced = g_pieced;
    *passes = g_passes;
    *reused = g_reused;
}

void msp_mon_stats_launch(void)
{
    Py_ssize_t n = g_small ? PyList_Size(g_small) : 0;
    if (n == 0)
        return;
    PyObject *e = PyFloat_FromDouble(g_eps);
    PyObject *r = e ? PyObject_CallFunctionObjArgs(g_many_fn, g_small, e, NULL) : NULL;
    Py_XDECREF(e);
    int ok = r && PyList_Append(g_results, r) == 0;
    for (Py_ssize_t i = 0; ok && i < n; i++)
        ok = push_row(&g_rows, &g_nrows, &g_caprows, g_srows[i]) == 0;
    if (!ok)
        msp_py_warn_error("monitor", "cannot reduce device tensors; their rows are nan");
    Py_XDECREF(r);
    PyList_SetSlice(g_small, 0, n, NULL);
    g_nsrows = 0;
    PyErr_Clear();
}

void msp_mon_stats_flush(msp_mon_stat_t *(*at)(size_t row))
{
    msp_mon_stats_launch();
    Py_ssize_t n = g_results ? PyList_Size(g_results) : 0;
    PyObject *vals = n ? PyObject_CallFunctionObjArgs(g_fetch_fn, g_results, NULL) : NULL;
    size_t row = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *group = vals ? PyList_GetItem(vals, i) : NULL;
        Py_ssize_t k = PyObject_Size(PyList_GetItem(g_results, i));
        for (Py_ssize_t j = 0; j < k && row < g_nrows; j++, row++) {
            msp_mon_stat_t *s = at(g_rows[row]);
            PyObject *v = group ? PyList_GetItem(group, j) : NULL;
            s->have = 0;
            if (!v || PyList_Size(v) != MSP_MON_NOPS)
                continue;
            for (int q = 0; q < MSP_MON_NOPS; q++)
                s->v[q] = PyFloat_AsDouble(PyList_GetItem(v, q));
            if (s->v[MSP_MON_NANS] > 0)
                s->v[MSP_MON_MIN] = s->v[MSP_MON_MAX] = s->v[MSP_MON_MEAN] = s->v[MSP_MON_NORM] =
                    NAN;
            s->have = 1;
        }
    }
    for (size_t i = 0; i < g_ncopies; i++) {
        msp_mon_stat_t *to = at(g_copies[i][0]);
        const msp_mon_stat_t *from = at(g_copies[i][1]);
        memcpy(to->v, from->v, sizeof to->v);
        to->have = from->have;
    }
    if (n && !vals)
        msp_py_warn_error("monitor", "cannot read the statistics of device tensors");
    Py_XDECREF(vals);
    msp_mon_stats_reset();
}

void msp_mon_stats_reset(void)
{
    if (g_results)
        PyList_SetSlice(g_results, 0, PyList_Size(g_results), NULL);
    if (g_small)
        PyList_SetSlice(g_small, 0, PyList_Size(g_small), NULL);
    g_nrows = g_nsrows = 0;
    g_ncopies = 0;
    seen_clear();
    g_seen_kind = -1;
    if (PyErr_Occurred())
        PyErr_Clear();
}
