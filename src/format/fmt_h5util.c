/* The process-wide HDF5 lock, HDF5 error capture, the element types msprobe
 * writes, attribute helpers and the role order shared by writer and reader. */
#include "fmt_internal.h"

#include <ctype.h>
#include <pthread.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t msp_h5_mutex = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int msp_h5_quiet;

void msp_h5_lock(void)
{
    pthread_mutex_lock(&msp_h5_mutex);
    if (!msp_h5_quiet) {
        /* HDF5 prints its error stack to stderr by default; we report
         * through msp_fail instead. A thread-safe HDF5 build (Debian's
         * 1.10.8 is one) keeps that setting per thread, a non-thread-safe
         * build globally: set it once in every thread that calls us. */
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        msp_h5_quiet = 1;
    }
}

void msp_h5_unlock(void)
{
    pthread_mutex_unlock(&msp_h5_mutex);
}

struct msp_h5_walk {
    char text[256];
    int found;
};

static herr_t msp_h5_walk_cb(unsigned n, const H5E_error2_t *e, void *ud)
{
    (void)n;
    struct msp_h5_walk *w = ud;
    /* Downward walk starts at the API call; keep the innermost (last) entry
     * with a description: it says what actually went wrong. */
    if (e->desc && e->desc[0]) {
        snprintf(w->text, sizeof w->text, "%s", e->desc);
        w->found = 1;
    }
    return 0;
}

msp_err msp_h5_fail(msp_err code, const char *fmt, ...)
{
    char head[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    struct msp_h5_walk w = {.found = 0};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, msp_h5_walk_cb, &w);
    H5Eclear2(H5E_DEFAULT);
    if (w.found)
        return msp_fail(code, "%s (HDF5: %s)", head, w.text);
    return msp_fail(code, "%s", head);
}

/* ---- types ---------------------------------------------------------------- */

static hid_t msp_h5_small_float(int ebits, int mbits, size_t ebias)
{
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    if (t < 0)
        return -1;
    /* Shrink the fields first so they fit once the size drops to 2 bytes. */
    if (H5Tset_fields(t, 15, (size_t)mbits, (size_t)ebits, 0, (size_t)mbits) < 0 ||
        H5Tset_precision(t, 16) < 0 || H5Tset_size(t, 2) < 0 || H5Tset_ebias(t, ebias) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

static hid_t msp_h5_bool_type(void)
{
    hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
    int8_t f = 0, tr = 1;
    if (t < 0)
        return -1;
    if (H5Tenum_insert(t, "FALSE", &f) < 0 || H5Tenum_insert(t, "TRUE", &tr) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

hid_t msp_h5_type_for(msp_dtype_t dt)
{
    switch (dt) {
    case MSP_DTYPE_FLOAT32:
        return H5Tcopy(H5T_IEEE_F32LE);
    case MSP_DTYPE_FLOAT64:
        return H5Tcopy(H5T_IEEE_F64LE);
    case MSP_DTYPE_FLOAT16:
        return msp_h5_small_float(5, 10, 15);
    case MSP_DTYPE_BFLOAT16:
        return msp_h5_small_float(8, 7, 127);
    case MSP_DTYPE_INT8:
        return H5Tcopy(H5T_STD_I8LE);
    case MSP_DTYPE_INT16:
        return H5Tcopy(H5T_STD_I16LE);
    case MSP_DTYPE_INT32:
        return H5Tcopy(H5T_STD_I32LE);
    case MSP_DTYPE_INT64:
        return H5Tcopy(H5T_STD_I64LE);
    case MSP_DTYPE_UINT8:
        return H5Tcopy(H5T_STD_U8LE);
    case MSP_DTYPE_BOOL:
        return msp_h5_bool_type();
    default:
        return -1;
    }
}

int msp_h5_type_is(hid_t t, msp_dtype_t dt)
{
    static hid_t made[MSP_DTYPE_COUNT_]; /* 0: not made yet */
    if (dt <= MSP_DTYPE_INVALID || dt >= MSP_DTYPE_COUNT_)
        return 0;
    if (made[dt] <= 0)
        made[dt] = msp_h5_type_for(dt);
    return made[dt] > 0 && H5Tequal(t, made[dt]) > 0;
}

/* An enum is read as bool when it has exactly the two values 0 and 1 over a
 * one-byte integer (h5py's numpy.bool_ mapping, whatever the member names). */
static int msp_h5_is_bool_enum(hid_t t)
{
    if (H5Tget_size(t) != 1 || H5Tget_nmembers(t) != 2)
        return 0;
    int seen0 = 0, seen1 = 0;
    for (unsigned i = 0; i < 2; i++) {
        unsigned char v = 0xff;
        if (H5Tget_member_value(t, i, &v) < 0)
            return 0;
        seen0 |= v == 0;
        seen1 |= v == 1;
    }
    return seen0 && seen1;
}

msp_dtype_t msp_h5_dtype_of(hid_t t, int *exact, char *name, size_t name_size)
{
    *exact = 0;
    H5T_class_t cls = H5Tget_class(t);
    size_t size = H5Tget_size(t);
    H5T_order_t order = H5Tget_order(t);
    size_t prec = H5Tget_precision(t);
    int off = H5Tget_offset(t);
    int packed = prec == size * 8 && off == 0;
    msp_dtype_t dt = MSP_DTYPE_INVALID;

    if (cls == H5T_INTEGER) {
        int sgn = H5Tget_sign(t) == H5T_SGN_2;
        snprintf(name, name_size, "%sint%zu", sgn ? "" : "u", size * 8);
        if (sgn && size == 1)
            dt = MSP_DTYPE_INT8;
        else if (sgn && size == 2)
            dt = MSP_DTYPE_INT16;
        else if (sgn && size == 4)
            dt = MSP_DTYPE_INT32;
        else if (sgn && size == 8)
            dt = MSP_DTYPE_INT64;
        else if (!sgn && size == 1)
            dt = MSP_DTYPE_UINT8;
        *exact = dt != MSP_DTYPE_INVALID && packed && (size == 1 || order == H5T_ORDER_LE);
    } else if (cls == H5T_FLOAT) {
        size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
        H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize);
        size_t ebias = H5Tget_ebias(t);
        snprintf(name, name_size, "float%zu (e%zu m%zu)", size * 8, esize, msize);
        if (esize == 8 && msize == 23 && ebias == 127)
            dt = MSP_DTYPE_FLOAT32;
        else if (esize == 11 && msize == 52 && ebias == 1023)
            dt = MSP_DTYPE_FLOAT64;
        else if (esize == 5 && msize == 10 && ebias == 15)
            dt = MSP_DTYPE_FLOAT16;
        else if (esize == 8 && msize == 7 && ebias == 127)
            dt = MSP_DTYPE_BFLOAT16;
        /* Identical bit positions to the IEEE layout, little-endian, no
         * padding: then the file bytes are the native elements. */
        int ieee_fields = spos == size * 8 - 1 && epos == msize && mpos == 0;
        *exact = dt != MSP_DTYPE_INVALID && packed && ieee_fields && order == H5T_ORDER_LE &&
                 H5Tget_norm(t) == H5T_NORM_IMPLIED;
        if (dt != MSP_DTYPE_INVALID && msp_dtype_size(dt) != size)
            dt = MSP_DTYPE_INVALID, *exact = 0;
    } else if (cls == H5T_ENUM && msp_h5_is_bool_enum(t)) {
        dt = MSP_DTYPE_BOOL;
        hid_t base = H5Tget_super(t);
        *exact = base >= 0 && H5Tget_class(base) == H5T_INTEGER && H5Tget_precision(base) == 8 &&
                 H5Tget_offset(base) == 0;
        if (base >= 0)
            H5Tclose(base);
        snprintf(name, name_size, "bool");
    } else {
        snprintf(name, name_size, "HDF5 class %d size %zu", (int)cls, size);
    }
    if (dt != MSP_DTYPE_INVALID)
        snprintf(name, name_size, "%s", msp_dtype_name(dt));
    return dt;
}

/* ---- attributes ------------------------------------------------------------- */

static msp_err msp_h5_attr_put(hid_t obj, const char *key, hid_t type, hid_t space, const void *buf,
                               const char *where)
{
    msp_err rc = MSP_OK;
    hid_t a = H5Acreate2(obj, key, type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, type, buf) < 0)
        rc = msp_h5_fail(MSP_ERR_HDF5, "%s: cannot write attribute '%s'", where, key);
    if (a >= 0)
        H5Aclose(a);
    return rc;
}

static hid_t msp_h5_vlen_str(void)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0)
        return -1;
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    return t;
}

/* Types and the scalar dataspace every attribute uses, created once and
 * kept for the life of the process (HDF5 frees them at exit): building them
 * per attribute was a third of the cost of writing a small tensor. Only
 * touched with the lock held. */
static struct {
    int ready;
    hid_t str, scalar, bool8;
} msp_h5_shared;

static int msp_h5_shared_ready(void)
{
    if (!msp_h5_shared.ready) {
        hid_t str = msp_h5_vlen_str(), sc = H5Screate(H5S_SCALAR), b = msp_h5_bool_type();
        if (str < 0 || sc < 0 || b < 0) {
            if (str >= 0)
                H5Tclose(str);
            if (sc >= 0)
                H5Sclose(sc);
            if (b >= 0)
                H5Tclose(b);
            return 0;
        }
        msp_h5_shared.str = str;
        msp_h5_shared.scalar = sc;
        msp_h5_shared.bool8 = b;
        msp_h5_shared.ready = 1;
    }
    return 1;
}

msp_err msp_h5_attr_put_str(hid_t obj, const char *key, const char *value, const char *where)
{
    if (!msp_h5_shared_ready())
        return msp_h5_fail(MSP_ERR_HDF5, "%s: cannot create string type for '%s'", where, key);
    return msp_h5_attr_put(obj, key, msp_h5_shared.str, msp_h5_shared.scalar, &value, where);
}

static msp_err msp_h5_attr_put_scalar(hid_t obj, const char *key, hid_t type, const void *v,
                                      const char *where)
{
    if (!msp_h5_shared_ready())
        return msp_h5_fail(MSP_ERR_HDF5, "%s: cannot create dataspace for '%s'", where, key);
    /* File type == memory type: HDF5 copies the bytes without conversion. */
    return msp_h5_attr_put(obj, key, type, msp_h5_shared.scalar, v, where);
}

msp_err msp_h5_attr_put_i64(hid_t obj, const char *key, int64_t v, const char *where)
{
    return msp_h5_attr_put_scalar(obj, key, H5T_STD_I64LE, &v, where);
}

msp_err msp_h5_attr_put_f64(hid_t obj, const char *key, double v, const char *where)
{
    return msp_h5_attr_put_scalar(obj, key, H5T_IEEE_F64LE, &v, where);
}

msp_err msp_h5_attr_put_u32(hid_t obj, const char *key, uint32_t v, const char *where)
{
    return msp_h5_attr_put_scalar(obj, key, H5T_STD_U32LE, &v, where);
}

msp_err msp_h5_attr_put_bool(hid_t obj, const char *key, int v, const char *where)
{
    int8_t b = v ? 1 : 0;
    if (!msp_h5_shared_ready())
        return msp_h5_fail(MSP_ERR_HDF5, "%s: cannot create bool type for '%s'", where, key);
    return msp_h5_attr_put_scalar(obj, key, msp_h5_shared.bool8, &b, where);
}

msp_err msp_h5_attr_put_i64_array(hid_t obj, const char *key, const int64_t *v, int n,
                                  const char *where)
{
    hsize_t dim = (hsize_t)n;
    hid_t s = H5Screate_simple(1, &dim, NULL);
    msp_err rc;
    if (s < 0)
        return msp_h5_fail(MSP_ERR_HDF5, "%s: cannot create dataspace for '%s'", where, key);
    int64_t dummy = 0;
    rc = msp_h5_attr_put(obj, key, H5T_STD_I64LE, s, n ? (const void *)v : &dummy, where);
    H5Sclose(s);
    return rc;
}

/* Open key on obj; 0 if absent, -1 on error. */
static int msp_h5_attr_open(hid_t obj, const char *key, hid_t *a, const char *where)
{
    htri_t ex = H5Aexists(obj, key);
    if (ex < 0) {
        msp_h5_fail(MSP_ERR_HDF5, "%s: cannot look up attribute '%s'", where, key);
        return -1;
    }
    if (ex == 0)
        return 0;
    *a = H5Aopen(obj, key, H5P_DEFAULT);
    if (*a < 0) {
        msp_h5_fail(MSP_ERR_HDF5, "%s: cannot open attribute '%s'", where, key);
        return -1;
    }
    return 1;
}

static hssize_t msp_h5_attr_npoints(hid_t a)
{
    hid_t s = H5Aget_space(a);
    if (s < 0)
        return -1;
    hssize_t n = H5Sget_select_npoints(s);
    if (H5Sget_simple_extent_type(s) == H5S_NULL)
        n = 0;
    H5Sclose(s);
    return n;
}

/* The end of an attribute reader: its attribute, type and memory type
 * closed (those opened), and its result. */
static int attr_done(hid_t a, hid_t t, hid_t m, int ret)
{
    if (m >= 0)
        H5Tclose(m);
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    return ret;
}

int msp_h5_attr_get_text(hid_t obj, const char *key, char **out, const char *where)
{
    hid_t a = -1, t = -1, m = -1;
    int ret = -1;
    *out = NULL;
    int r = msp_h5_attr_open(obj, key, &a, where);
    if (r <= 0)
        return r;
    t = H5Aget_type(a);
    if (t < 0 || msp_h5_attr_npoints(a) != 1) {
        msp_fail(MSP_ERR_FORMAT, "%s: attribute '%s' is not a single value", where, key);
        goto cleanup;
    }
    H5T_class_t cls = H5Tget_class(t);
    if (cls == H5T_STRING) {
        if (H5Tis_variable_str(t) > 0) {
            m = msp_h5_vlen_str();
            char *s = NULL;
            if (m < 0 || H5Aread(a, m, &s) < 0) {
                msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot read string attribute '%s'", where, key);
                goto cleanup;
            }
            *out = strdup(s ? s : "");
            H5free_memory(s);
        } else {
            size_t n = H5Tget_size(t);
            char *s = calloc(1, n + 1);
            m = H5Tcopy(t);
            if (!s || m < 0) {
                free(s);
                msp_fail(MSP_ERR_NOMEM, "%s: attribute '%s': out of memory", where, key);
                goto cleanup;
            }
            if (H5Aread(a, m, s) < 0) {
                free(s);
                msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot read string attribute '%s'", where, key);
                goto cleanup;
            }
            s[n] = '\0';
            *out = s;
        }
    } else if (cls == H5T_INTEGER || cls == H5T_ENUM) {
        int64_t v;
        if (msp_h5_attr_get_i64(obj, key, &v, where) != 1)
            goto cleanup;
        *out = msp_asprintf("%lld", (long long)v);
    } else if (cls == H5T_FLOAT) {
        double v;
        if (msp_h5_attr_get_f64(obj, key, &v, where) != 1)
            goto cleanup;
        *out = msp_asprintf("%.17g", v);
    } else {
        msp_fail(MSP_ERR_FORMAT, "%s: attribute '%s' is neither a string nor a number", where, key);
        goto cleanup;
    }
    if (!*out) {
        msp_fail(MSP_ERR_NOMEM, "%s: attribute '%s': out of memory", where, key);
        goto cleanup;
    }
    ret = 1;
cleanup:
    return attr_done(a, t, m, ret);
}

int msp_h5_attr_get_str(hid_t obj, const char *key, char *buf, size_t size, const char *where)
{
    char *s = NULL;
    int r = msp_h5_attr_get_text(obj, key, &s, where);
    if (r == 1)
        snprintf(buf, size, "%s", s);
    free(s);
    return r;
}

/* Read element(s) of an integer/enum/float attribute converted to mtype.
 * Enums do not convert to integers in HDF5: read them as their own type
 * and widen by hand. */
static int msp_h5_attr_read_num(hid_t obj, const char *key, int want_float, void *out, size_t maxn,
                                size_t *nread, const char *where)
{
    hid_t a = -1, t = -1, m = -1;
    int ret = -1;
    int r = msp_h5_attr_open(obj, key, &a, where);
    if (r <= 0)
        return r;
    hssize_t n = msp_h5_attr_npoints(a);
    t = H5Aget_type(a);
    if (n < 0 || t < 0 || (size_t)n > maxn) {
        msp_fail(MSP_ERR_FORMAT, "%s: attribute '%s' has %lld values, expected at most %zu", where,
                 key, (long long)n, maxn);
        goto cleanup;
    }
    *nread = (size_t)n;
    if (n == 0) {
        ret = 1;
        goto cleanup;
    }
    H5T_class_t cls = H5Tget_class(t);
    if (cls == H5T_ENUM) {
        m = H5Tget_native_type(t, H5T_DIR_ASCEND);
        size_t sz = m >= 0 ? H5Tget_size(m) : 0;
        unsigned char raw[MSP_MAX_NDIM * 8];
        if (sz == 0 || sz > 8 || (size_t)n * sz > sizeof raw || H5Aread(a, m, raw) < 0) {
            msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot read enum attribute '%s'", where, key);
            goto cleanup;
        }
        for (size_t i = 0; i < (size_t)n; i++) {
            int64_t v = 0;
            if (sz == 1) {
                int8_t x;
                memcpy(&x, raw + i, 1);
                v = x;
            } else if (sz == 2) {
                int16_t x;
                memcpy(&x, raw + 2 * i, 2);
                v = x;
            } else if (sz == 4) {
                int32_t x;
                memcpy(&x, raw + 4 * i, 4);
                v = x;
            } else {
                memcpy(&v, raw + 8 * i, 8);
            }
            if (want_float)
                ((double *)out)[i] = (double)v;
            else
                ((int64_t *)out)[i] = v;
        }
        ret = 1;
        goto cleanup;
    }
    if (cls != H5T_INTEGER && cls != H5T_FLOAT) {
        msp_fail(MSP_ERR_FORMAT, "%s: attribute '%s' is not numeric", where, key);
        goto cleanup;
    }
    if (H5Aread(a, want_float ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64, out) < 0) {
        msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot read attribute '%s' as a number", where, key);
        goto cleanup;
    }
    ret = 1;
cleanup:
    return attr_done(a, t, m, ret);
}

int msp_h5_attr_get_i64(hid_t obj, const char *key, int64_t *out, const char *where)
{
    size_t n = 0;
    int r = msp_h5_attr_read_num(obj, key, 0, out, 1, &n, where);
    if (r == 1 && n != 1) {
        msp_fail(MSP_ERR_FORMAT, "%s: attribute '%s' is empty", where, key);
        return -1;
    }
    return r;
}

int msp_h5_attr_get_f64(hid_t obj, const char *key, double *out, const char *where)
{
    size_t n = 0;
    int r = msp_h5_attr_read_num(obj, key, 1, out, 1, &n, where);
    if (r == 1 && n != 1) {
        msp_fail(MSP_ERR_FORMAT, "%s: attribute '%s' is empty", where, key);
        return -1;
    }
    return r;
}

int msp_h5_attr_get_i64_array(hid_t obj, const char *key, int64_t *v, int *n, const char *where)
{
    size_t got = 0;
    int r = msp_h5_attr_read_num(obj, key, 0, v, MSP_MAX_NDIM, &got, where);
    if (r == 1)
        *n = (int)got;
    return r;
}

/* ---- role order --------------------------------------------------------------- */

int msp_natural_cmp(const char *a, const char *b)
{
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            while (*a == '0')
                a++;
            while (*b == '0')
                b++;
            size_t la = 0, lb = 0;
            while (isdigit((unsigned char)a[la]))
                la++;
            while (isdigit((unsigned char)b[lb]))
                lb++;
            if (la != lb)
                return la < lb ? -1 : 1;
            int c = strncmp(a, b, la);
            if (c)
                return c;
            a += la;
            b += lb;
        } else {
            if (*a != *b)
                return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
            a++;
            b++;
        }
    }
    return *a ? 1 : *b ? -1 : 0;
}

/* input.* < kwarg.* < output.* < anything else. Decided on the first byte
 * before any prefix is compared: a statistics file sorts 12,500 roles this
 * way, and three strncmp calls a side were most of msp_role_cmp's time. */
static int msp_role_rank(const char *r)
{
    switch (r[0]) {
    case 'i':
        return strncmp(r, "input.", 6) == 0 ? 0 : 3;
    case 'k':
        return strncmp(r, "kwarg.", 6) == 0 ? 1 : 3;
    case 'o':
        return strncmp(r, "output.", 7) == 0 ? 2 : 3;
    default:
        return 3;
    }
}

int msp_role_cmp(const char *a, const char *b)
{
    int ra = msp_role_rank(a), rb = msp_role_rank(b);
    if (ra != rb)
        return ra < rb ? -1 : 1;
    int c = msp_natural_cmp(a, b);
    return c ? c : strcmp(a, b);
}

/* ---- /index ------------------------------------------------------------------ */

const char *const msp_index_columns[] = {
    "record", "role",   "order",  "dtype",         "ndim",      "shape",     "has_data",
    "max",    "min",    "mean",   "norm",          "nan_count", "inf_count", "crc32",
    "offset", "nbytes", "device", "requires_grad", NULL,
};

hid_t msp_h5_attrs_type(int packed)
{
    hid_t str = msp_h5_vlen_str();
    hid_t c = str >= 0 ? H5Tcreate(H5T_COMPOUND, sizeof(struct msp_attr_row)) : -1;
    if (c >= 0 && (H5Tinsert(c, "record", offsetof(struct msp_attr_row, record), str) < 0 ||
                   H5Tinsert(c, "key", offsetof(struct msp_attr_row, key), str) < 0 ||
                   H5Tinsert(c, "value", offsetof(struct msp_attr_row, value), str) < 0 ||
                   (packed && H5Tpack(c) < 0))) {
        H5Tclose(c);
        c = -1;
    }
    if (str >= 0)
        H5Tclose(str);
    return c;
}

int msp_h5_member_pair(hid_t ft, hid_t mt, unsigned i, hid_t *a, hid_t *b)
{
    char *name = H5Tget_member_name(mt, i);
    int j = name ? H5Tget_member_index(ft, name) : -1;
    H5free_memory(name);
    *a = *b = -1;
    if (j >= 0) {
        *a = H5Tget_member_type(mt, i);
        *b = H5Tget_member_type(ft, (unsigned)j);
    }
    return j;
}

/* where = "file PATH: /index: record NAME", then ": ROLE" when role is set,
 * cut to cap bytes as snprintf would: appended in pieces (msp_str_add), as a
 * row's snprintf calls were a tenth of a reader helper's work on small
 * packed tensors. */
void msp_index_where(char *w, size_t cap, const char *path, const char *name, const char *role)
{
    const char *part[] = {"file ", path, ": /index: record ", name, role ? ": " : "", role};
    size_t at = 0;
    w[0] = '\0';
    for (size_t i = 0; i < sizeof part / sizeof *part && part[i]; i++)
        if (msp_str_add(w, cap, &at, part[i]))
            break;
}

hid_t msp_h5_index_type_at(size_t size, size_t at, long producer_at, int packed)
{
    hid_t str = msp_h5_vlen_str();
    hid_t shp = H5Tvlen_create(H5T_STD_I64LE);
    hid_t bt = msp_h5_bool_type();
    hid_t c = -1;
    if (str < 0 || shp < 0 || bt < 0)
        goto cleanup;
    c = H5Tcreate(H5T_COMPOUND, size);
    if (c < 0)
        goto cleanup;
#define MSP_COL(name, field, type)                                                                 \
    if (H5Tinsert(c, name, at + offsetof(struct msp_index_row, field), type) < 0)                  \
        goto fail;
    MSP_COL("record", record, str)
    MSP_COL("role", role, str)
    MSP_COL("order", order, H5T_STD_I64LE)
    MSP_COL("dtype", dtype, str)
    MSP_COL("ndim", ndim, H5T_STD_I32LE)
    MSP_COL("shape", shape, shp)
    MSP_COL("has_data", has_data, bt)
    MSP_COL("max", max, H5T_IEEE_F64LE)
    MSP_COL("min", min, H5T_IEEE_F64LE)
    MSP_COL("mean", mean, H5T_IEEE_F64LE)
    MSP_COL("norm", norm, H5T_IEEE_F64LE)
    MSP_COL("nan_count", nan_count, H5T_STD_I64LE)
    MSP_COL("inf_count", inf_count, H5T_STD_I64LE)
    MSP_COL("crc32", crc32, H5T_STD_U32LE)
    MSP_COL("offset", offset, H5T_STD_I64LE)
    MSP_COL("nbytes", nbytes, H5T_STD_I64LE)
    MSP_COL("device", device, str)
    MSP_COL("requires_grad", requires_grad, bt)
#undef MSP_COL
    if (producer_at >= 0 && H5Tinsert(c, "producer", (size_t)producer_at, str) < 0)
        goto fail;
    if (packed && H5Tpack(c) < 0)
        goto fail;
    goto cleanup;
fail:
    H5Tclose(c);
    c = -1;
cleanup:
    if (str >= 0)
        H5Tclose(str);
    if (shp >= 0)
        H5Tclose(shp);
    if (bt >= 0)
        H5Tclose(bt);
    return c;
}

hid_t msp_h5_index_type(int packed)
{
    return msp_h5_index_type_at(sizeof(struct msp_index_row), 0, -1, packed);
}
