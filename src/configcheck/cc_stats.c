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

static double msp_cc_half_to_double(uint16_t h)
{
    int exp = (h >> 10) & 0x1f;
    int mant = h & 0x3ff;
    double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (exp == 0)
        return sign * ldexp(mant, -24);
    if (exp == 31)
        return mant ? NAN : sign * INFINITY;
    return sign * ldexp(mant + 1024, exp - 25);
}

static double msp_cc_element(const unsigned char *p, msp_cc_dtype_t dt)
{
    switch (dt) {
    case MSP_CC_DT_F64: {
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    case MSP_CC_DT_F32: {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    case MSP_CC_DT_F16: {
        uint16_t v;
        memcpy(&v, p, 2);
        return msp_cc_half_to_double(v);
    }
    case MSP_CC_DT_BF16: {
        uint16_t v;
        memcpy(&v, p, 2);
        uint32_t bits = (uint32_t)v << 16;
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    case MSP_CC_DT_I64: {
        int64_t v;
        memcpy(&v, p, 8);
        return (double)v;
    }
    case MSP_CC_DT_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    case MSP_CC_DT_I16: {
        int16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case MSP_CC_DT_I8:
        return (int8_t)p[0];
    case MSP_CC_DT_U8:
        return p[0];
    case MSP_CC_DT_BOOL:
        return p[0] ? 1.0 : 0.0;
    default:
        return NAN;
    }
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
    const unsigned char *p = data;
    double mx = -INFINITY, mn = INFINITY, sum = 0.0, sq = 0.0;
    int has_nan = 0;
    for (size_t i = 0; i < n; i++, p += es) {
        double v = msp_cc_element(p, dt);
        if (isnan(v)) {
            has_nan = 1;
            continue;
        }
        if (v > mx)
            mx = v;
        if (v < mn)
            mn = v;
        sum += v;
        sq += v * v;
    }
    out->valid = 1;
    /* torch.max/min/mean/norm all propagate NaN; so do we. */
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
