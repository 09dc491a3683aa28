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

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char g_dev_src[] =
    "import torch\n"
    "def stats(x, eps):\n"
    "    x = x.detach()\n"
    "    n = x.numel()\n"
    "    if n == 0:\n"
    "        return None\n"
    "    f = x if x.is_floating_point() else x.double()\n"
    "    return torch.stack([f.min().double(), f.max().double(),\n"
    "                        f.sum(dtype=torch.float64) / n,\n"
    "                        torch.linalg.vector_norm(f, dtype=torch.float64),\n"
    "                        (f.abs() < eps).sum().double() / n,\n"
    "                        torch.isnan(f).sum().double()])\n"
    "def fetch(results):\n"
    "    by = {}\n"
    "    for i, r in enumerate(results):\n"
    "        by.setdefault(r.device, []).append(i)\n"
    "    out = [None] * len(results)\n"
    "    for idx in by.values():\n"
    "        vals = torch.stack([results[i] for i in idx]).cpu().tolist()\n"
    "        for i, v in zip(idx, vals):\n"
    "            out[i] = v\n"
    "    return out\n";

static PyObject *g_ns, *g_stats_fn, *g_fetch_fn;
static PyObject *g_pending;    /* list of device results (6 float64s each) */
static size_t *g_pending_rows; /* their rows */
static size_t g_cap_rows;
static PyObject *s_is_cpu, *s_dtype, *s_shape, *s_data_ptr, *s_is_contiguous, *s_numel;

/* The dtypes read in place, by their torch name. */
enum { D_F32 = 0, D_F64, D_F16, D_BF16, D_NREAD };
static PyObject *g_dt[D_NREAD];
static const char *const g_dt_name[D_NREAD] = {"float32", "float64", "float16", "bfloat16"};

int msp_mon_stats_init(PyObject *torch)
{
    g_ns = msp_py_run_source(g_dev_src, "msprobe_monitor_stats");
    g_stats_fn = g_ns ? PyDict_GetItemString(g_ns, "stats") : NULL;
    g_fetch_fn = g_ns ? PyDict_GetItemString(g_ns, "fetch") : NULL;
    g_pending = PyList_New(0);
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
    return g_stats_fn && g_fetch_fn && g_pending ? 0 : -1;
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

static void host_pass(const void *data, int64_t n, int dt, double eps, msp_mon_stat_t *s)
{
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
    int bad = nans > 0;
    s->v[MSP_MON_MIN] = bad ? NAN : mn;
    s->v[MSP_MON_MAX] = bad ? NAN : mx;
    s->v[MSP_MON_MEAN] = bad ? NAN : sum / (double)n;
    s->v[MSP_MON_NORM] = bad ? NAN : sqrt(sq);
    s->v[MSP_MON_ZEROS] = (double)nz / (double)n;
    s->v[MSP_MON_NANS] = (double)nans;
    s->have = 1;
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
    PyObject *txt = ok ? PyObject_Str(dtype) : NULL;
    PyObject *b = txt ? PyUnicode_AsUTF8String(txt) : NULL;
    snprintf(s->dtype, sizeof s->dtype, "%s", b ? PyBytes_AsString(b) : "?");
    Py_XDECREF(b);
    Py_XDECREF(txt);
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
    PyObject *e = PyFloat_FromDouble(eps);
    PyObject *r = e ? PyObject_CallFunctionObjArgs(g_stats_fn, t, e, NULL) : NULL;
    Py_XDECREF(e);
    if (!r || r == Py_None) {
        Py_XDECREF(r);
        PyErr_Clear();
        return;
    }
    if (g_cap_rows <= (size_t)PyList_Size(g_pending)) {
        size_t cap = g_cap_rows ? 2 * g_cap_rows : 256;
        size_t *nr = realloc(g_pending_rows, cap * sizeof *nr);
        if (!nr) {
            Py_DECREF(r);
            return;
        }
        g_pending_rows = nr;
        g_cap_rows = cap;
    }
    g_pending_rows[PyList_Size(g_pending)] = row;
    PyList_Append(g_pending, r);
    Py_DECREF(r);
    s->have = 2; /* waiting */
}

void msp_mon_stats_flush(msp_mon_stat_t *(*at)(size_t row))
{
    Py_ssize_t n = g_pending ? PyList_Size(g_pending) : 0;
    if (n == 0)
        return;
    PyObject *vals = PyObject_CallFunctionObjArgs(g_fetch_fn, g_pending, NULL);
    for (Py_ssize_t i = 0; i < n; i++) {
        msp_mon_stat_t *s = at(g_pending_rows[i]);
        PyObject *v = vals ? PyList_GetItem(vals, i) : NULL;
        s->have = 0;
        if (!v || PyList_Size(v) != MSP_MON_NOPS)
            continue;
        for (int k = 0; k < MSP_MON_NOPS; k++)
            s->v[k] = PyFloat_AsDouble(PyList_GetItem(v, k));
        if (s->v[MSP_MON_NANS] > 0)
            s->v[MSP_MON_MIN] = s->v[MSP_MON_MAX] = NAN;
        s->have = 1;
    }
    if (!vals)
        msp_py_warn_error("monitor", "cannot read the statistics of device tensors");
    Py_XDECREF(vals);
    msp_mon_stats_reset();
}

void msp_mon_stats_reset(void)
{
    if (g_pending)
        PyList_SetSlice(g_pending, 0, PyList_Size(g_pending), NULL);
    if (PyErr_Occurred())
        PyErr_Clear();
}
