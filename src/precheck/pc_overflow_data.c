/* overflow_check's view of a dump's tensors (pc_overflow.c): what the data
 * holds, not what the file says about it. The statistics and NaN/Inf counts
 * stored beside a tensor are claims of whoever wrote the file: a count of 0
 * over all-NaN data would hide the origin, a count of 2^62 on four elements
 * would invent one. So a tensor whose data the dump holds is read (a block at
 * a time, memory bounded by the block) and its statistics recomputed, as
 * torch computes them (a NaN makes max, min, mean and norm NaN), with its
 * stored CRC-32 checked on the way; a statistics-only tensor keeps its
 * claims, and those that cannot be true (a count above its element count, a
 * negative one, NaN or Inf counted in an integer tensor) refuse the file. */
#include "pc_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define OV_BLOCK ((size_t)1 << 20)

typedef struct ov_acc {
    double max, min, sum, sq;
    int64_t nan, inf;
} ov_acc_t;

static void ov_acc_add(ov_acc_t *a, double v)
{
    if (isnan(v)) {
        a->nan++;
        return;
    }
    if (isinf(v))
        a->inf++;
    a->max = v > a->max ? v : a->max;
    a->min = v < a->min ? v : a->min;
    a->sum += v;
    a->sq += v * v;
}

/* n elements of dtype dt at p into a. */
static void ov_acc_block(ov_acc_t *a, msp_dtype_t dt, const unsigned char *p, size_t n)
{
#define OV_LOOP(T, CONV)                                                                           \
    for (size_t i = 0; i < n; i++) {                                                               \
        T x;                                                                                       \
        memcpy(&x, p + i * sizeof x, sizeof x);                                                    \
        ov_acc_add(a, (double)(CONV));                                                             \
    }                                                                                              \
    break
    switch (dt) {
    case MSP_DTYPE_FLOAT32:
        OV_LOOP(float, x);
    case MSP_DTYPE_FLOAT64:
        OV_LOOP(double, x);
    case MSP_DTYPE_FLOAT16:
        OV_LOOP(uint16_t, msp_half_to_float(x));
    case MSP_DTYPE_BFLOAT16:
        OV_LOOP(uint16_t, msp_bf16_to_float(x));
    case MSP_DTYPE_INT8:
        OV_LOOP(int8_t, x);
    case MSP_DTYPE_INT16:
        OV_LOOP(int16_t, x);
    case MSP_DTYPE_INT32:
        OV_LOOP(int32_t, x);
    case MSP_DTYPE_INT64:
        OV_LOOP(int64_t, x);
    case MSP_DTYPE_UINT8:
        OV_LOOP(uint8_t, x);
    case MSP_DTYPE_BOOL:
        OV_LOOP(uint8_t, x != 0);
    default:
        break;
    }
#undef OV_LOOP
}

/* t's statistics from its data (buf: OV_BLOCK bytes of scratch). */
static msp_err ov_data_stats(msp_dump_file_t *f, const msp_record_info_t *r, msp_tensor_info_t *t,
                             unsigned char *buf)
{
    msp_tensor_stream_t *s = NULL;
    msp_err rc = msp_tensor_stream_open(f, r, t, &s);
    ov_acc_t a = {-INFINITY, INFINITY, 0.0, 0.0, 0, 0};
    size_t es = msp_dtype_size(t->dtype);
    size_t per = OV_BLOCK / es;
    uint32_t crc = 0;
    for (int64_t done = 0; !rc && done < t->numel;) {
        size_t k = (uint64_t)(t->numel - done) < per ? (size_t)(t->numel - done) : per;
        if ((rc = msp_tensor_stream_read(s, buf, k * es)) != MSP_OK)
            break;
        ov_acc_block(&a, t->dtype, buf, k);
        crc = msp_crc32(crc, buf, k * es);
        done += (int64_t)k;
    }
    msp_tensor_stream_close(s);
    if (rc)
        goto cleanup;
    if (t->stats.crc32 && t->stats.crc32 != crc) {
        rc = msp_fail(MSP_ERR_FORMAT,
                      "file %s: record %s: %s: tensor data fails its CRC-32 "
                      "check (file says %08x, data read %08x): the dump file is damaged",
                      f->path, r->name, t->role, (unsigned)t->stats.crc32, (unsigned)crc);
        goto cleanup;
    }
    if (t->numel == 0 || a.nan > 0) {
        t->stats.max = t->stats.min = t->stats.mean = NAN;
        t->stats.norm = t->numel == 0 ? 0.0 : NAN;
    } else {
        t->stats.max = a.max;
        t->stats.min = a.min;
        t->stats.mean = a.sum / (double)t->numel;
        t->stats.norm = sqrt(a.sq);
    }
    t->stats.nan_count = a.nan;
    t->stats.inf_count = a.inf;
    t->has_stats = 1;
cleanup:
    return rc;
}

/* A statistics-only tensor's counts, refused when they cannot be true. */
static msp_err ov_check_counts(const msp_dump_file_t *f, const msp_record_info_t *r,
                               const msp_tensor_info_t *t)
{
    const char *what = NULL;
    int64_t nan = t->stats.nan_count, inf = t->stats.inf_count;
    if (nan < 0 || inf < 0)
        what = "a negative count";
    else if (nan > t->numel || inf > t->numel || nan > t->numel - inf)
        what = "more NaN and Inf than the tensor has elements";
    else if ((nan || inf) && t->dtype != MSP_DTYPE_INVALID && !msp_dtype_is_float(t->dtype))
        what = "NaN or Inf counted in an integer tensor, which cannot hold them";
    if (!what)
        return MSP_OK;
    return msp_fail(MSP_ERR_FORMAT,
                    "file %s: record %s: %s: nan_count %" PRId64 ", inf_count "
                    "%" PRId64 " for %" PRId64 " elements of %s: %s; the dump's statistics "
                    "cannot be trusted: refused",
                    f->path, r->name, t->role, nan, inf, t->numel, t->dtype_name, what);
}

msp_err ov_open_dump(const char *path, msp_dump_file_t **out)
{
    *out = NULL;
    msp_dump_file_t *f = NULL;
    unsigned char *buf = NULL;
    msp_err rc = msp_dump_open(path, &f);
    if (rc)
        goto cleanup;
    if (!(buf = malloc(OV_BLOCK))) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < f->n_records && !rc; i++) {
        msp_record_info_t *r = &f->records[i];
        for (size_t j = 0; j < r->n_tensors && !rc; j++) {
            msp_tensor_info_t *t = &r->tensors[j];
            /* a dtype the reader does not know has no readable data: its
             * claims are all there is */
            if (t->has_data && t->dtype != MSP_DTYPE_INVALID)
                rc = ov_data_stats(f, r, t, buf);
            else
                rc = ov_check_counts(f, r, t);
        }
    }
cleanup:
    free(buf);
    if (rc) {
        msp_dump_close(f);
        return rc;
    }
    *out = f;
    return MSP_OK;
}
