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

#include "msprobe/cpu.h"

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
static PyObject *s_is_cpu, *s_dtype, *s_shape, *s_data_ptr, *s_is_contiguous, *s_numel;

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

/* s from one pass's accumulators over n elements: min, max, mean and norm
 * are NaN when any element was (msprobe's), zeros a share, nans a count. */
static void stats_of(msp_mon_stat_t *s, int64_t n, double mn, double mx, double sum, double sq,
                     int64_t zeros, int64_t nans)
{
    s->v[MSP_MON_MIN] = nans ? NAN : mn;
    s->v[MSP_MON_MAX] = nans ? NAN : mx;
    s->v[MSP_MON_MEAN] = nans ? NAN : sum / (double)n;
    s->v[MSP_MON_NORM] = nans ? NAN : sqrt(sq);
    s->v[MSP_MON_ZEROS] = (double)zeros / (double)n;
    s->v[MSP_MON_NANS] = (double)nans;
    s->have = 1;
}

#ifdef MSP_CPU_X86
/* float32 with AVX2 and FMA, eight lanes (chosen at run time by
 * msp_cpu_use(MSP_CPU_STATS_AVX2), as the dump's statistics are; about four
 * times the portable pass): min and max in float32 (maxps and minps skip a
 * NaN, which is counted apart), sums, squares and the |x| < eps test in
 * float64, as msprobe's x.to(float64) computes them. */
__attribute__((target("avx2,fma"))) static void f32_avx2(const float *p, int64_t n, double eps,
                                                         msp_mon_stat_t *s)
{
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff), infbits = _mm256_set1_epi32(0x7f800000);
    const __m256d absd = _mm256_castsi256_pd(_mm256_set1_epi64x(INT64_MAX)),
                  veps = _mm256_set1_pd(eps);
    __m256 mx = _mm256_set1_ps(-INFINITY), mn = _mm256_set1_ps(INFINITY);
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, q0 = s0, q1 = s0;
    __m256i nanc = _mm256_setzero_si256(), nz = nanc;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(p + i);
        __m256i ax = _mm256_and_si256(_mm256_castps_si256(x), absmask);
        nanc = _mm256_sub_epi32(nanc, _mm256_cmpgt_epi32(ax, infbits));
        mx = _mm256_max_ps(x, mx);
        mn = _mm256_min_ps(x, mn);
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
        __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
        s0 = _mm256_add_pd(s0, lo);
        s1 = _mm256_add_pd(s1, hi);
        q0 = _mm256_fmadd_pd(lo, lo, q0);
        q1 = _mm256_fmadd_pd(hi, hi, q1);
        __m256d zl = _mm256_cmp_pd(_mm256_and_pd(lo, absd), veps, _CMP_LT_OQ);
        __m256d zh = _mm256_cmp_pd(_mm256_and_pd(hi, absd), veps, _CMP_LT_OQ);
        nz = _mm256_sub_epi64(nz, _mm256_castpd_si256(zl));
        nz = _mm256_sub_epi64(nz, _mm256_castpd_si256(zh));
    }
    float fmx[8], fmn[8];
    double ds[4], dq[4];
    int32_t cn[8];
    int64_t cz[4];
    _mm256_storeu_ps(fmx, mx);
    _mm256_storeu_ps(fmn, mn);
    _mm256_storeu_pd(ds, _mm256_add_pd(s0, s1));
    _mm256_storeu_pd(dq, _mm256_add_pd(q0, q1));
    _mm256_storeu_si256((__m256i *)(void *)cn, nanc);
    _mm256_storeu_si256((__m256i *)(void *)cz, nz);
    double mnv = INFINITY, mxv = -INFINITY, sum = (ds[0] + ds[1]) + (ds[2] + ds[3]);
    double sq = (dq[0] + dq[1]) + (dq[2] + dq[3]);
    int64_t nans = 0, zeros = cz[0] + cz[1] + cz[2] + cz[3];
    for (int k = 0; k < 8; k++) {
        mxv = fmx[k] > mxv ? fmx[k] : mxv;
        mnv = fmn[k] < mnv ? fmn[k] : mnv;
        nans += cn[k];
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
    stats_of(s, n, mnv, mxv, sum, sq, zeros, nans);
}
#endif

static void host_pass(const void *data, int64_t n, int dt, double eps, msp_mon_stat_t *s)
{
#ifdef MSP_CPU_X86
    if (dt == D_F32 && msp_cpu_use(MSP_CPU_STATS_AVX2)) {
        f32_avx2(data, n, eps, s);
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
    stats_of(s, n, mn, mx, sum, sq, nz, nans);
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

/* A dense host tensor of a dtype read in place: its memory; else NULL. */
static const void *host_data(PyObject *t)
{
    PyObject *cpu = PyObject_GetAttr(t, s_is_cpu);
    int is_cpu = cpu == Py_True;
    Py_XDECREF(cpu);
    if (!is_cpu || msp_test.device_stats)
        return NULL;
    PyObject *contig = PyObject_CallMethodObjArgs(t, s_is_contiguous, NULL);
    int dense = contig == Py_True;
    Py_XDECREF(contig);
    PyObject *ptr = dense ? PyObject_CallMethodObjArgs(t, s_data_ptr, NULL) : NULL;
    const void *p = ptr ? PyLong_AsVoidPtr(ptr) : NULL;
    Py_XDECREF(ptr);
    return p;
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

int msp_mon_stats_host(PyObject *t, msp_mon_stat_t *s, msp_mon_host_t *h)
{
    memset(s, 0, sizeof *s);
    h->p = NULL;
    if (!t || !msp_is_tensor(t) || describe(t, s, &h->n, &h->dt) != 0 || h->n == 0 || h->dt < 0 ||
        !(h->p = host_data(t))) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

void msp_mon_stats_pass(const msp_mon_host_t *h, double eps, msp_mon_stat_t *s)
{
    host_pass(h->p, h->n, h->dt, eps, s);
}

void msp_mon_stats_take(PyObject *t, double eps, msp_mon_stat_t *s, size_t row)
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
    const void *p = dt >= 0 ? host_data(t) : NULL;
    if (p) {
        host_pass(p, n, dt, eps, s);
        return;
    }
    PyErr_Clear();
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
    if (PyErr_Occurred())
        PyErr_Clear();
}
