/* Tensor statistics over raw host bytes. Computed in C rather than with torch
 * ops so that collecting never adds operators to the training process (a
 * dump running alongside would otherwise record them). */
#include "cc_internal.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    msp_cc_dtype_t dt;
} msp_cc_dtypes[] = {
    {"torch.float64", MSP_CC_DT_F64}, {"torch.float32", MSP_CC_DT_F32},
    {"torch.float16", MSP_CC_DT_F16}, {"torch.bfloat16", MSP_CC_DT_BF16},
    {"torch.int64", MSP_CC_DT_I64},   {"torch.int32", MSP_CC_DT_I32},
    {"torch.int16", MSP_CC_DT_I16},   {"torch.int8", MSP_CC_DT_I8},
    {"torch.uint8", MSP_CC_DT_U8},    {"torch.bool", MSP_CC_DT_BOOL},
};

msp_cc_dtype_t msp_cc_dtype_from_name(const char *torch_name)
{
    for (size_t i = 0; torch_name && i < sizeof msp_cc_dtypes / sizeof msp_cc_dtypes[0]; i++)
        if (strcmp(torch_name, msp_cc_dtypes[i].name) == 0)
            return msp_cc_dtypes[i].dt;
    return MSP_CC_DT_UNKNOWN;
}

size_t msp_cc_dtype_size(msp_cc_dtype_t dt)
{
    switch (dt) {
    case MSP_CC_DT_F64:
    case MSP_CC_DT_I64:
        return 8;
    case MSP_CC_DT_F32:
    case MSP_CC_DT_I32:
        return 4;
    case MSP_CC_DT_F16:
    case MSP_CC_DT_BF16:
    case MSP_CC_DT_I16:
        return 2;
    case MSP_CC_DT_I8:
    case MSP_CC_DT_U8:
    case MSP_CC_DT_BOOL:
        return 1;
    default:
        return 0;
    }
}

static inline double msp_cc_half(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
    if (exp == 0) {
        double v = mant * (1.0 / 16777216.0); /* subnormal: mant * 2^-24 */
        return sign ? -v : v;
    }
    if (exp == 31)
        bits = sign | 0x7f800000u | (mant << 13);
    else
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline double msp_cc_bf16(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* One typed loop per dtype (the per-element switch cost more than the hash).
 * NaN is not tested per element: it shows up in the sum, checked once. */
#define MSP_CC_STATS_LOOP(T, CONV)                                                                                     \
    do {                                                                                                               \
        const T *q = data;                                                                                             \
        for (size_t i = 0; i < n; i++) {                                                                               \
            double v = CONV(q[i]);                                                                                     \
            mx = v > mx ? v : mx;                                                                                      \
            mn = v < mn ? v : mn;                                                                                      \
            sum += v;                                                                                                  \
            sq += v * v;                                                                                               \
        }                                                                                                              \
    } while (0)
#define MSP_CC_ID(x) ((double)(x))
#define MSP_CC_BOOL(x) ((x) ? 1.0 : 0.0)

static int msp_cc_has_nan(const void *data, size_t n, msp_cc_dtype_t dt)
{
    for (size_t i = 0; i < n; i++) {
        double v = dt == MSP_CC_DT_F64   ? ((const double *)data)[i]
                   : dt == MSP_CC_DT_F32 ? ((const float *)data)[i]
                   : dt == MSP_CC_DT_F16 ? msp_cc_half(((const uint16_t *)data)[i])
                                         : msp_cc_bf16(((const uint16_t *)data)[i]);
        if (isnan(v))
            return 1;
    }
    return 0;
}

void msp_cc_tensor_stats(const void *data, size_t n, size_t elem_size, msp_cc_dtype_t dt, msp_cc_stats_t *out)
{
    memset(out, 0, sizeof *out);
    msp_cc_sha256_t sh;
    msp_cc_sha256_init(&sh);
    if (data && elem_size)
        msp_cc_sha256_update(&sh, data, n * elem_size);
    msp_cc_sha256_hex(&sh, out->hash);
    size_t es = msp_cc_dtype_size(dt);
    if (!data || !es || es != elem_size || n == 0)
        return;
    double mx = -INFINITY, mn = INFINITY, sum = 0.0, sq = 0.0;
    switch (dt) {
    case MSP_CC_DT_F64:
        MSP_CC_STATS_LOOP(double, MSP_CC_ID);
        break;
    case MSP_CC_DT_F32:
        MSP_CC_STATS_LOOP(float, MSP_CC_ID);
        break;
    case MSP_CC_DT_F16:
        MSP_CC_STATS_LOOP(uint16_t, msp_cc_half);
        break;
    case MSP_CC_DT_BF16:
        MSP_CC_STATS_LOOP(uint16_t, msp_cc_bf16);
        break;
    case MSP_CC_DT_I64:
        MSP_CC_STATS_LOOP(int64_t, MSP_CC_ID);
        break;
    case MSP_CC_DT_I32:
        MSP_CC_STATS_LOOP(int32_t, MSP_CC_ID);
        break;
    case MSP_CC_DT_I16:
        MSP_CC_STATS_LOOP(int16_t, MSP_CC_ID);
        break;
    case MSP_CC_DT_I8:
        MSP_CC_STATS_LOOP(int8_t, MSP_CC_ID);
        break;
    case MSP_CC_DT_U8:
        MSP_CC_STATS_LOOP(uint8_t, MSP_CC_ID);
        break;
    case MSP_CC_DT_BOOL:
        MSP_CC_STATS_LOOP(uint8_t, MSP_CC_BOOL);
        break;
    default:
        return;
    }
    out->valid = 1;
    /* torch.max/min/mean/norm all propagate NaN; so do we. (+inf and -inf
     * together also sum to NaN, hence the rescan.) */
    int has_nan = isnan(sum) && msp_cc_has_nan(data, n, dt);
    out->max = has_nan ? NAN : mx;
    out->min = has_nan ? NAN : mn;
    out->mean = has_nan ? NAN : sum / (double)n;
    out->norm = has_nan ? NAN : sqrt(sq);
}

cJSON *msp_cc_json_double(double v)
{
    if (isnan(v))
        return cJSON_CreateString("nan");
    if (isinf(v))
        return cJSON_CreateString(v > 0 ? "inf" : "-inf");
    return cJSON_CreateNumber(v);
}

int msp_cc_json_get_double(const cJSON *item, double *out)
{
    if (cJSON_IsNumber(item)) {
        *out = item->valuedouble;
        return 1;
    }
    if (cJSON_IsString(item)) {
        const char *s = item->valuestring;
        if (strcmp(s, "nan") == 0)
            *out = NAN;
        else if (strcmp(s, "inf") == 0)
            *out = INFINITY;
        else if (strcmp(s, "-inf") == 0)
            *out = -INFINITY;
        else
            return 0;
        return 1;
    }
    return 0;
}
