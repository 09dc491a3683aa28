/* Reading torch tensors without changing them, then a copy of the bytes into
 * a queue record. Dense CPU tensors of the dtypes we know are read in place
 * from data_ptr(), shape and (when not contiguous) stride(). Everything else
 * goes through a DLPack capsule of the tensor itself (detached alias only
 * where needed); tensors not on the CPU are copied to host first. bool goes
 * through a uint8 view there because torch 1.13's DLPack refuses bool. The
 * capsule's own destructor calls the DLPack deleter when we drop our reference. */
#include "dump_py.h"
#include "dlpack.h"

#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static PyObject *g_tensor_type, *g_detach, *g_view, *g_cpu, *g_to_dlpack;
static PyObject *s_is_cuda, *g_get_device; /* read_dev_direct */
static PyObject *g_bool, *g_uint8, *g_strided, *s_requires_grad, *s_dtype, *s_layout;

/* ---- CPU tensors read without DLPack ----------------------------------------
 * A DLPack capsule costs a call that builds an ATen alias, a managed struct and
 * a capsule, and a deleter call when it goes: about 1 us a tensor, the largest
 * share of the shim's own time on a loop of small ops. A dense CPU tensor of a
 * dtype we know says where its bytes are in four cheap calls instead (is_cpu,
 * shape, data_ptr(), is_contiguous(); stride() only when it is not). Anything
 * else, or anything unexpected, takes the DLPack path, which is unchanged. */
static PyObject *g_data_ptr, *g_is_contiguous, *g_stride, *s_is_cpu, *s_shape;
static int g_direct_ok; /* this torch has what the direct read needs */
static struct {
    const char *name;
    msp_dtype_t dtype;
    PyObject *obj;
} g_dtypes[] = {
    {"float32", MSP_DTYPE_FLOAT32, NULL},   {"float16", MSP_DTYPE_FLOAT16, NULL},
    {"bfloat16", MSP_DTYPE_BFLOAT16, NULL}, {"float64", MSP_DTYPE_FLOAT64, NULL},
    {"int64", MSP_DTYPE_INT64, NULL},       {"int32", MSP_DTYPE_INT32, NULL},
    {"int16", MSP_DTYPE_INT16, NULL},       {"int8", MSP_DTYPE_INT8, NULL},
    {"uint8", MSP_DTYPE_UINT8, NULL},       {"bool", MSP_DTYPE_BOOL, NULL},
};
#define MSP_NDTYPES (sizeof g_dtypes / sizeof g_dtypes[0])

/* Where a tensor's bytes are, as the copy needs them. */
typedef struct tview {
    const char *src; /* first element */
    int ndim;
    int64_t shape[MSP_MAX_NDIM];
    const int64_t *strides; /* in elements; NULL: C-contiguous */
    int64_t stride_buf[MSP_MAX_NDIM];
    msp_dtype_t dtype;
} tview_t;

/* ---- accelerator tensors ------------------------------------------------------
 * A tensor that is not on the CPU is copied by accel_copy.py's start(): on a
 * side stream, non-blocking, into pinned host memory (see that file). Its
 * bytes are read later, when the outermost msp_rec_add_* call that asked for
 * it returns: then each copy's event is waited for, and the pinned buffer
 * copied into the record's queue buffer. The copies of all the tensors of one
 * call are thus in flight together, and training's own stream is never
 * synchronised. CPU tensors never take this path (a CPU-only run never even
 * loads accel_copy.py), unless MSPROBE_TEST_HOST_COPY sends them through it
 * so that the deferred reads are tested where no accelerator is. */
typedef struct pend {
    void *buf;       /* the record's queue buffer, filled at the flush */
    const void *src; /* the pinned host bytes, C order */
    size_t nbytes;
    PyObject *cap;   /* keeps the host tensor alive */
    PyObject *event; /* NULL: the copy was synchronous */
} pend_t;
static _Thread_local pend_t *t_pend;
static _Thread_local size_t t_npend, t_cappend;
static _Thread_local int t_batch; /* nesting of msp_rec_add_* calls */
/* The statistics task computes a device tensor's statistics on its device
 * (accel_copy.py's stats()); MSPROBE_DEVICE_STATS=0 copies the tensor to the
 * host instead, as the other tasks do. MSPROBE_TEST_DEVICE_STATS sends CPU
 * tensors through that path too, so that the tests check its values. */
static int g_dev_stats, g_dev_stats_test;

void msp_role_at(char *buf, size_t size, const char *prefix, int64_t idx)
{
    if (!size)
        return;
    size_t n = strlen(prefix);
    if (n > size - 1)
        n = size - 1;
    memcpy(buf, prefix, n);
    if (idx >= 0 && n + 1 < size) {
        char num[24];
        size_t k = sizeof num;
        uint64_t v = (uint64_t)idx;
        do {
            num[--k] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        buf[n++] = '.';
        size_t m = sizeof num - k;
        if (m > size - 1 - n)
            m = size - 1 - n;
        memcpy(buf + n, num + k, m);
        n += m;
    }
    buf[n] = '\0';
}

static PyObject *attr_path(PyObject *root, const char *dotted)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", dotted);
    PyObject *cur = root;
    Py_INCREF(cur);
    for (char *save = NULL, *tok = strtok_r(buf, ".", &save); tok;
         tok = strtok_r(NULL, ".", &save)) {
        PyObject *next = PyObject_GetAttrString(cur, tok);
        Py_DECREF(cur);
        if (!next)
            return NULL;
        cur = next;
    }
    return cur;
}

int msp_tensor_init(PyObject *torch)
{
    /* Taken before patching, so the shim's own reads call the originals. */
    g_tensor_type = attr_path(torch, "Tensor");
    g_detach = attr_path(torch, "Tensor.detach");
    g_view = attr_path(torch, "Tensor.view");
    g_cpu = attr_path(torch, "Tensor.cpu");
    g_to_dlpack = attr_path(torch, "utils.dlpack.to_dlpack");
    if (!g_to_dlpack) {
        PyErr_Clear();
        PyObject *m = PyImport_ImportModule("torch.utils.dlpack");
        Py_XDECREF(m);
        g_to_dlpack = attr_path(torch, "utils.dlpack.to_dlpack");
    }
    msp_accel_init(g_to_dlpack);
    g_bool = attr_path(torch, "bool");
    g_uint8 = attr_path(torch, "uint8");
    g_strided = attr_path(torch, "strided");
    s_layout = PyUnicode_InternFromString("layout");
    s_requires_grad = PyUnicode_InternFromString("requires_grad");
    s_dtype = PyUnicode_InternFromString("dtype");
    msp_dev_stats_init();
    g_dev_stats = msp_dev_stats_enabled(&g_dev_stats_test);
    if (!g_tensor_type || !g_detach || !g_view || !g_cpu || !g_to_dlpack || !g_bool || !g_uint8 ||
        !g_strided || !s_layout || !s_requires_grad || !s_dtype)
        return -1;
    g_data_ptr = attr_path(torch, "Tensor.data_ptr");
    g_is_contiguous = attr_path(torch, "Tensor.is_contiguous");
    g_stride = attr_path(torch, "Tensor.stride");
    s_is_cpu = PyUnicode_InternFromString("is_cpu");
    s_is_cuda = PyUnicode_InternFromString("is_cuda");
    g_get_device = attr_path(torch, "Tensor.get_device");
    s_shape = PyUnicode_InternFromString("shape");
    PyObject *has_is_cpu = g_tensor_type && s_is_cpu ? PyObject_GetAttr(g_tensor_type, s_is_cpu)
                                                     : NULL;
    g_direct_ok = g_data_ptr && g_is_contiguous && g_stride && has_is_cpu && s_shape;
    Py_XDECREF(has_is_cpu);
    for (size_t i = 0; i < MSP_NDTYPES; i++) /* all of them: msp_window_kinds reads them */
        if (!(g_dtypes[i].obj = attr_path(torch, g_dtypes[i].name)))
            g_direct_ok = 0;
    PyErr_Clear(); /* an older torch without one of them: DLPack only */
    return 0;
}

int msp_is_tensor(PyObject *o)
{
    if ((PyObject *)Py_TYPE(o) == g_tensor_type)
        return 1;
    if (PyLong_Check(o) || PyFloat_Check(o) || PyUnicode_Check(o) || o == Py_None ||
        PyBool_Check(o))
        return 0;
    int r = PyObject_IsInstance(o, g_tensor_type);
    if (r < 0) {
        PyErr_Clear();
        return 0;
    }
    return r;
}

static msp_dtype_t dl_to_msp(msp_dl_dtype_t d)
{
    if (d.lanes != 1)
        return MSP_DTYPE_INVALID;
    switch (d.code) {
    case MSP_DL_FLOAT:
        return d.bits == 32   ? MSP_DTYPE_FLOAT32
               : d.bits == 16 ? MSP_DTYPE_FLOAT16
               : d.bits == 64 ? MSP_DTYPE_FLOAT64
                              : MSP_DTYPE_INVALID;
    case MSP_DL_BFLOAT:
        return d.bits == 16 ? MSP_DTYPE_BFLOAT16 : MSP_DTYPE_INVALID;
    case MSP_DL_INT:
        return d.bits == 8    ? MSP_DTYPE_INT8
               : d.bits == 16 ? MSP_DTYPE_INT16
               : d.bits == 32 ? MSP_DTYPE_INT32
               : d.bits == 64 ? MSP_DTYPE_INT64
                              : MSP_DTYPE_INVALID;
    case MSP_DL_UINT:
        return d.bits == 8 ? MSP_DTYPE_UINT8 : MSP_DTYPE_INVALID;
    case MSP_DL_BOOL:
        return d.bits == 8 ? MSP_DTYPE_BOOL : MSP_DTYPE_INVALID;
    default:
        return MSP_DTYPE_INVALID;
    }
}

/* Gather a strided tensor into dst, C order. */
static void strided_copy(char *dst, const char *src, int ndim, const int64_t *shape,
                         const int64_t *strides, size_t esize, int dim)
{
    if (dim == ndim - 1) {
        if (strides[dim] == 1) {
            memcpy(dst, src, (size_t)shape[dim] * esize);
            return;
        }
        for (int64_t i = 0; i < shape[dim]; i++)
            memcpy(dst + (size_t)i * esize, src + (size_t)(i * strides[dim]) * esize, esize);
        return;
    }
    size_t inner = esize;
    for (int d = dim + 1; d < ndim; d++)
        inner *= (size_t)shape[d];
    for (int64_t i = 0; i < shape[dim]; i++)
        strided_copy(dst + (size_t)i * inner, src + i * strides[dim] * (int64_t)esize, ndim, shape,
                     strides, esize, dim + 1);
}

static PyObject *call1(PyObject *fn, PyObject *a)
{
    return PyObject_CallFunctionObjArgs(fn, a, NULL);
}

/* Replace *d (a new reference to the tensor to read) by a host copy of it;
 * *event: the copy's event when it is still in flight, else NULL. */
static int to_host(PyObject **d, PyObject **event)
{
    *event = NULL;
    PyObject *alias = call1(g_detach, *d);
    if (!alias)
        return -1;
    Py_DECREF(*d);
    *d = alias;
    PyObject *host = NULL;
    PyObject *start = msp_accel_fn("start");
    if (start) {
        PyObject *pair = call1(start, *d);
        if (pair && PyTuple_Check(pair) && PyTuple_Size(pair) == 2) {
            host = PyTuple_GetItem(pair, 0);
            PyObject *ev = PyTuple_GetItem(pair, 1);
            Py_INCREF(host);
            if (ev != Py_None) {
                Py_INCREF(ev);
                *event = ev;
            }
        } else {
            msp_py_warn_error("accel copy", "cannot copy a device tensor asynchronously; "
                                            "copying it synchronously");
        }
        Py_XDECREF(pair);
    } else {
        PyErr_Clear(); /* accel_copy.py did not load (said once): synchronously */
    }
    if (!host && !(host = call1(g_cpu, *d)))
        return -1;
    Py_DECREF(*d);
    *d = host;
    return 0;
}

/* Room for one more pending read: 0, else -1 (then read at once). */
static int pend_reserve(void)
{
    pend_t *np = msp_grow(t_pend, &t_cappend, t_npend, sizeof *np, 16);
    if (!np)
        return -1;
    t_pend = np;
    return 0;
}

static void pend_push(void *buf, const void *src, size_t nbytes, PyObject *cap, PyObject *event)
{
    Py_INCREF(cap);
    Py_XINCREF(event);
    t_pend[t_npend++] = (pend_t){buf, src, nbytes, cap, event};
}

/* Every copy of this call complete, then its bytes into the queue buffers. */
static void pend_flush(void)
{
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    for (size_t i = 0; i < t_npend; i++) {
        pend_t *p = &t_pend[i];
        if (msp_wait_event(p->event) == 0)
            memcpy(p->buf, p->src, p->nbytes);
        else
            memset(p->buf, 0, p->nbytes);
        Py_XDECREF(p->event);
        Py_DECREF(p->cap);
    }
    t_npend = 0;
    PyErr_Clear();
    PyErr_Restore(t, v, tb);
}

void msp_tensor_batch_begin(void)
{
    t_batch++;
}

void msp_tensor_batch_end(const msp_dq_rec_t *r)
{
    if (--t_batch == 0) {
        if (t_npend > 0)
            pend_flush();
        msp_dev_call_end(r->dev_defer);
    }
}

/* msprobe's data_mode input / output: input.* and kwarg.* are inputs. */
static int msp_role_wanted(const char *role)
{
    unsigned roles = msp_g.have_cfg ? msp_cfg->dump_roles : 0;
    if (!roles || roles == (MSP_ROLE_INPUT | MSP_ROLE_OUTPUT))
        return 1;
    return (roles & (strncmp(role, "output", 6) == 0 ? MSP_ROLE_OUTPUT : MSP_ROLE_INPUT)) != 0;
}

/* msprobe's tensor_list: whether a statistics dump keeps the data of record
 * `name` (one of the list's names is part of it, as msprobe matches). */
int msp_keep_data(const char *name)
{
    const msp_config_t *c = msp_cfg;
    for (size_t i = 0; name && i < c->n_tensor_list; i++)
        if (strstr(name, c->tensor_list[i]))
            return 1;
    return 0;
}

/* int64 items of a tuple (torch.Size, stride()) into out; 0, or -1 when it is
 * not such a tuple of n items. */
static int int_tuple(PyObject *tup, int n, int64_t *out)
{
    if (!tup || !PyTuple_Check(tup) || PyTuple_Size(tup) != n)
        return -1;
    for (int i = 0; i < n; i++) {
        out[i] = PyLong_AsLongLong(PyTuple_GetItem(tup, i));
        if (out[i] == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* The dump's dtype of torch dtype object dt, or MSP_DTYPE_INVALID. */
static msp_dtype_t direct_dtype(PyObject *dt)
{
    for (size_t i = 0; i < MSP_NDTYPES; i++)
        if (g_dtypes[i].obj == dt)
            return g_dtypes[i].dtype;
    return MSP_DTYPE_INVALID;
}

/* t.shape into v->ndim, v->shape: 0, or -1 (an error may be set). */
static int direct_shape(PyObject *t, tview_t *v)
{
    PyObject *shape = PyObject_GetAttr(t, s_shape);
    Py_ssize_t nd = shape && PyTuple_Check(shape) ? PyTuple_Size(shape) : -1;
    int rc = nd < 0 || nd > MSP_MAX_NDIM || int_tuple(shape, (int)nd, v->shape) != 0 ? -1 : 0;
    v->ndim = (int)nd;
    Py_XDECREF(shape);
    return rc;
}

/* t.data_ptr() into v->src, and t's strides into v->strides when it is not
 * C-contiguous (else NULL; v->ndim set): 0, or -1 (an error may be set). */
static int direct_layout(PyObject *t, tview_t *v)
{
    PyObject *ptr = call1(g_data_ptr, t), *contig = ptr ? call1(g_is_contiguous, t) : NULL;
    PyObject *strides = NULL;
    int rc = -1;
    v->strides = NULL;
    if (contig)
        v->src = PyLong_AsVoidPtr(ptr);
    if (!contig || PyErr_Occurred()) {
        /* rc stays -1 */
    } else if (contig == Py_True) {
        rc = 0;
    } else if (int_tuple(strides = call1(g_stride, t), v->ndim, v->stride_buf) == 0) {
        v->strides = v->stride_buf;
        rc = 0;
    }
    Py_XDECREF(strides);
    Py_XDECREF(contig);
    Py_XDECREF(ptr);
    return rc;
}

/* The bytes of a dense CPU tensor t of dtype object dt, without DLPack: 1 and
 * *v filled, or 0 (no error set) when t must take the DLPack path. */
static int read_direct(PyObject *t, PyObject *dt, tview_t *v)
{
    if (!g_direct_ok || msp_test.host_copy || g_dev_stats_test) /* those tests send CPU */
        return 0;                                               /* tensors the device's way */
    if ((v->dtype = direct_dtype(dt)) == MSP_DTYPE_INVALID)
        return 0;
    int ok = 0;
    PyObject *cpu = PyObject_GetAttr(t, s_is_cpu);
    if (cpu != Py_True || direct_shape(t, v) != 0 || direct_layout(t, v) != 0)
        goto out;
    int64_t numel = 1;
    for (int i = 0; i < v->ndim; i++)
        numel *= v->shape[i];
    ok = numel == 0 || v->src != NULL; /* storage-less tensors: let DLPack say why */
out:
    Py_XDECREF(cpu);
    if (PyErr_Occurred())
        PyErr_Clear();
    return ok;
}

/* The elements of a tensor of this shape and these strides (in elements;
 * NULL: C-contiguous) are exactly numel consecutive ones: no overlap, no gap
 * (a transpose or permute of a contiguous tensor is). */
static int dense_layout(int ndim, const int64_t *shape, const int64_t *strides)
{
    if (!strides)
        return 1;
    int64_t expect = 1;
    unsigned used = 0;
    for (int k = 0; k < ndim; k++) { /* the dimension of the smallest stride not yet taken */
        int best = -1;
        for (int i = 0; i < ndim; i++)
            if (!(used >> i & 1) && shape[i] != 1 && (best < 0 || strides[i] < strides[best]))
                best = i;
        if (best < 0)
            break;
        used |= 1u << best;
        if (strides[best] != expect)
            return 0;
        expect *= shape[best];
    }
    return 1;
}

/* A tensor whose statistics are computed where it lives (a CUDA or ROCm
 * tensor; under MSPROBE_TEST_DEVICE_STATS, a CPU one): its dtype, shape,
 * device and data pointer without DLPack, which costs an as_strided, a
 * TensorImpl and a capsule (about 5 us, the dearest part of recording such
 * a tensor). 1 and v, device filled; 0 (no error set): the DLPack path. */
static int read_dev_direct(PyObject *t, PyObject *dt, tview_t *v, char *device, size_t dsize)
{
    if (!g_direct_ok || !g_get_device || !s_is_cuda)
        return 0;
    if ((v->dtype = direct_dtype(dt)) == MSP_DTYPE_INVALID)
        return 0;
    int ok = 0;
    long long index = -1;
    PyObject *cuda = PyObject_GetAttr(t, s_is_cuda), *cpu = NULL, *dev = NULL;
    if (cuda != Py_True && !(g_dev_stats_test && (cpu = PyObject_GetAttr(t, s_is_cpu)) == Py_True))
        goto out;
    /* (the copy flattens it: only dense_layout reads the strides) */
    if (direct_shape(t, v) != 0 || direct_layout(t, v) != 0 ||
        (cuda == Py_True && !(dev = call1(g_get_device, t))))
        goto out;
    if (dev)
        index = PyLong_AsLongLong(dev);
    if (PyErr_Occurred() || (cuda == Py_True && (index < 0 || index > 65535)))
        goto out;
    if (cuda == Py_True)
        snprintf(device, dsize, "cuda:%d", (int)index); /* torch's name on ROCm too */
    else
        snprintf(device, dsize, "cpu");
    ok = 1;
out:
    Py_XDECREF(dev);
    Py_XDECREF(cpu);
    Py_XDECREF(cuda);
    if (PyErr_Occurred())
        PyErr_Clear();
    return ok;
}

/* "record/role not dumped", for add_tensor's warnings only: written into what
 * (MSP_WHAT_SIZE bytes) when a warning first needs it, not per tensor. */
#define MSP_WHAT_SIZE 320
static const char *not_dumped(char *what, const msp_dq_rec_t *r, const char *role)
{
    if (!what[0])
        snprintf(what, MSP_WHAT_SIZE, "%s/%s not dumped", r->name, role);
    return what;
}
#define WHAT not_dumped(what, r, role)

/* x's bytes into a queue buffer, added to r as role: a recent copy's buffer
 * shared, a copy still in flight read later (event, cap: the host copy's).
 * 0, or -1 after a warning (nothing added). */
static int add_view(msp_dq_rec_t *r, const char *role, const tview_t *x, PyObject *d, PyObject *cap,
                    PyObject *event, const char *device, int rg, char *what)
{
    size_t esize = msp_dtype_size(x->dtype), numel = 1;
    int contiguous = 1;
    int64_t expect = 1;
    for (int i = x->ndim - 1; i >= 0; i--) {
        numel *= (size_t)x->shape[i];
        if (x->strides && x->shape[i] != 1 && x->strides[i] != expect)
            contiguous = 0;
        expect *= x->shape[i];
    }
    size_t nbytes = numel * esize;
    const char *src = x->src;
    /* Bytes read in place may be those of a recent copy (see msp_recent_find). */
    int shareable = nbytes && nbytes <= MSP_RECENT_MAX && contiguous && !event &&
                    !msp_test.host_copy && d == NULL;
    void *buf = shareable ? msp_recent_find(src, nbytes, x->dtype) : NULL;
    int shared = buf != NULL;
    if (!buf && !(buf = msp_dq_buf_get(nbytes))) {
        msp_shim_warn_once("nomem", "%s: out of memory copying %zu bytes", WHAT, nbytes);
        return -1;
    }
    /* A copy still in flight (or, under MSPROBE_TEST_HOST_COPY, any host copy):
     * its bytes are read when this call's tensors have all been asked for. */
    int later = nbytes && contiguous && (event || msp_test.host_copy) && pend_reserve() == 0;
    if (nbytes && !later && !shared) {
        if (msp_wait_event(event) != 0)
            memset(buf, 0, nbytes);
        else if (contiguous)
            memcpy(buf, src, nbytes);
        else
            strided_copy(buf, src, x->ndim, x->shape, x->strides, esize, 0);
    }
    if (msp_dq_rec_add_tensor(r, role, x->dtype, x->ndim, x->shape, buf, nbytes, device, rg) != 0) {
        msp_shim_warn_once("nomem", "%s: out of memory", WHAT);
        return -1; /* buf went back to the queue */
    }
    if (shareable && !shared)
        msp_recent_keep(src, nbytes, x->dtype, buf);
    if (later)
        pend_push(buf, src, nbytes, cap, event);
    return 0;
}

/* A device whose tensors DLPack cannot export (an NPU): copy t's tensor d to
 * host first (*d, *event; its capsule in *cap), and name the device as torch
 * does. 0, or -1 with a Python error set (for a CPU tensor, the reason
 * DLPack gave). */
static int dlpack_via_host(PyObject *t, PyObject **d, PyObject **cap, PyObject **event,
                           char *device, size_t dsize)
{
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb);
    PyObject *dev = PyObject_GetAttrString(t, "device");
    char dname[24] = "cpu";
    if (dev)
        msp_obj_text(dev, 0, dname, sizeof dname);
    Py_XDECREF(dev);
    PyErr_Clear();
    if (strncmp(dname, "cpu", 3) == 0) {
        PyErr_Restore(et, ev, etb); /* the reason DLPack gave */
        return -1;
    }
    Py_XDECREF(et);
    Py_XDECREF(ev);
    Py_XDECREF(etb);
    if (to_host(d, event) != 0 || !(*cap = call1(g_to_dlpack, *d)))
        return -1;
    snprintf(device, dsize, "%s", dname);
    return 0;
}

/* The tensor just added to r: which earlier output it is (its producer) and
 * a parameter's name, or a note of it for later inputs, as r's links say
 * (where: its own bytes, its identity). */
static void add_links(msp_dq_rec_t *r, const char *role, PyObject *t, const void *where,
                      const tview_t *x)
{
    if (r->links == MSP_LINK_FIND) {
        const char *producer = msp_link_find(t, where, x->ndim, x->shape);
        if (producer)
            r->t[r->nt - 1].producer = msp_dq_rec_strdup(r, producer);
        /* a model's parameter or buffer: its name (msprobe-dump(5), param.ROLE) */
        const char *pname = msp_param_name(t);
        if (pname) {
            char key[160];
            snprintf(key, sizeof key, "param.%s", role);
            msp_dq_rec_add_attr(r, key, pname);
        }
    } else if (r->links == MSP_LINK_NOTE) {
        msp_link_note(r->name, role, t, where, x->ndim, x->shape);
    }
}

/* The Python error of a failed read as a warning (what: "record/role not
 * dumped"), one per kind of failure (sparse, meta, quantized...); cleared. */
static void warn_read_failed(const char *what)
{
    PyObject *type, *val, *tb;
    char text[160] = "", kind[48];
    PyErr_Fetch(&type, &val, &tb);
    if (val)
        msp_obj_text(val, 0, text, sizeof text);
    char *nl = strchr(text, '\n');
    if (nl)
        *nl = '\0';
    snprintf(kind, sizeof kind, "read %.40s", text);
    msp_shim_warn_once(kind, "%s: %s; such tensors are skipped", what, text);
    Py_XDECREF(type);
    Py_XDECREF(val);
    Py_XDECREF(tb);
}

void msp_rec_add_tensor(msp_dq_rec_t *r, const char *role, PyObject *t)
{
    if (!msp_role_wanted(role))
        return;
    PyObject *event = NULL;
    char what[MSP_WHAT_SIZE];
    PyObject *d = NULL, *cap = NULL, *dt = NULL;
    char device[24] = "cpu";
    int rg = 0;
    const void *where = NULL; /* the tensor's own bytes (not a host copy): its identity for links */

    what[0] = '\0'; /* written when a warning needs it (WHAT): not per tensor */
    PyObject *v = PyObject_GetAttr(t, s_requires_grad);
    if (v) {
        rg = PyObject_IsTrue(v) == 1;
        Py_DECREF(v);
    }
    dt = PyObject_GetAttr(t, s_dtype);
    if (!dt)
        goto pyfail;
    /* The direct ways read a tensor's data pointer, which only a strided
     * tensor has (torch raises for sparse and mkldnn ones): the layout is
     * looked at only on the way past them. */
    tview_t x;
    if (g_dev_stats && !msp_keep_data(r->name) &&
        read_dev_direct(t, dt, &x, device, sizeof device)) {
        if (msp_dev_stats_add(r, role, t, x.dtype, x.ndim, x.shape, device, rg, x.src,
                              dense_layout(x.ndim, x.shape, x.strides))) {
            where = x.src;
            goto links;
        }
        memcpy(device, "cpu", 4); /* not taken (empty): as any tensor */
    }
    if (read_direct(t, dt, &x))
        goto have_view;
    PyObject *layout = PyObject_GetAttr(t, s_layout);
    if (layout && layout != g_strided) {
        char name[64], kind[80];
        msp_obj_text(layout, 0, name, sizeof name);
        snprintf(kind, sizeof kind, "layout %s", name);
        msp_shim_warn_once(kind,
                           "%s: layout %s is not supported (dense tensors only); such "
                           "tensors are skipped",
                           WHAT, name);
        Py_DECREF(layout);
        goto cleanup;
    }
    Py_XDECREF(layout);
    /* DLPack reads the tensor as it is (torch's to_dlpack neither checks
     * requires_grad nor records a graph): a detached alias is needed only
     * before .cpu(), which would otherwise join the autograd graph. Saves a
     * tensor object per tensor read. */
    d = t;
    Py_INCREF(d);
    if (dt == g_bool) {
        PyObject *u8 = PyObject_CallFunctionObjArgs(g_view, d, g_uint8, NULL);
        Py_DECREF(d);
        if (!(d = u8))
            goto pyfail;
    }
    if (!(cap = call1(g_to_dlpack, d)) && d == t) {
        /* A torch whose to_dlpack refuses a tensor in the graph: the old way. */
        PyErr_Clear();
        PyObject *alias = call1(g_detach, t);
        Py_DECREF(d);
        if (!(d = alias))
            goto pyfail;
        cap = call1(g_to_dlpack, d);
    }
    if (!cap && dlpack_via_host(t, &d, &cap, &event, device, sizeof device) != 0)
        goto pyfail;
    msp_dl_managed_t *mt = PyCapsule_GetPointer(cap, "dltensor");
    if (!mt)
        goto pyfail;
    where = (const char *)mt->dl_tensor.data + mt->dl_tensor.byte_offset;
    const msp_dl_tensor_t *dl = &mt->dl_tensor;
    x.dtype = dt == g_bool ? MSP_DTYPE_BOOL : dl_to_msp(dl->dtype);
    if (x.dtype == MSP_DTYPE_INVALID) {
        char name[64];
        msp_obj_text(dt, 0, name, sizeof name);
        char kind[80];
        snprintf(kind, sizeof kind, "dtype %s", name);
        msp_shim_warn_once(kind, "%s: dtype %s is not supported; such tensors are skipped", WHAT,
                           name);
        goto cleanup;
    }
    if (dl->ndim > MSP_MAX_NDIM) {
        msp_shim_warn_once("ndim", "%s: %d dimensions (at most %d supported)", WHAT, (int)dl->ndim,
                           MSP_MAX_NDIM);
        goto cleanup;
    }
    x.ndim = dl->ndim;
    if (x.ndim > 0)
        memcpy(x.shape, dl->shape, (size_t)x.ndim * sizeof *x.shape);
    int dtp = dl->device.device_type;
    if (dtp == MSP_DL_CUDA || dtp == MSP_DL_ROCM) /* torch's name on ROCm too */
        snprintf(device, sizeof device, "cuda:%d", dl->device.device_id);
    else if (dtp != MSP_DL_CPU)
        snprintf(device, sizeof device, "dl%d:%d", dtp, dl->device.device_id);
    if (g_dev_stats && !event && !msp_keep_data(r->name) &&
        (dtp == MSP_DL_CUDA || dtp == MSP_DL_ROCM || (g_dev_stats_test && dtp == MSP_DL_CPU)) &&
        msp_dev_stats_add(r, role, d, x.dtype, x.ndim, x.shape, device, rg, where,
                          dense_layout(x.ndim, x.shape, (const int64_t *)dl->strides)))
        goto links;
    if (dtp != MSP_DL_CPU || (msp_test.host_copy && !event && strcmp(device, "cpu") == 0)) {
        Py_CLEAR(cap);
        if (to_host(&d, &event) != 0)
            goto pyfail;
        if (!(cap = call1(g_to_dlpack, d)))
            goto pyfail;
        if (!(mt = PyCapsule_GetPointer(cap, "dltensor")))
            goto pyfail;
        dl = &mt->dl_tensor; /* the host copy: same dtype and shape, C order */
    }
    x.strides = dl->strides;
    x.src = (const char *)dl->data + dl->byte_offset;
have_view:
    if (!where)
        where = x.src; /* read in place */
    if (add_view(r, role, &x, d, cap, event, device, rg, what) != 0)
        goto cleanup;
links:
    add_links(r, role, t, where, &x);
    goto cleanup;

pyfail:
    if (PyErr_Occurred())
        warn_read_failed(WHAT);
cleanup:
    Py_XDECREF(event);
    Py_XDECREF(cap);
    Py_XDECREF(d);
    Py_XDECREF(dt);
}

int msp_window_kinds(PyObject *o, int depth)
{
    if (msp_is_tensor(o)) {
        PyObject *dt = PyObject_GetAttr(o, s_dtype);
        int k = dt ? msp_dev_kind(direct_dtype(dt)) : 0;
        Py_XDECREF(dt);
        PyErr_Clear();
        return k;
    }
    int kinds = 0;
    if (depth < 1 && (PyTuple_Check(o) || PyList_Check(o))) {
        Py_ssize_t n = PySequence_Size(o);
        for (Py_ssize_t i = 0; i < n && kinds != MSP_DEV_ALL; i++) {
            PyObject *it = PySequence_GetItem(o, i);
            if (it)
                kinds |= msp_window_kinds(it, depth + 1);
            Py_XDECREF(it);
        }
        PyErr_Clear();
    }
    return kinds;
}
