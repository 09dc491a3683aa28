/* Tensor statistics over raw host bytes, by format's msp_stats_compute (the
 * dump's own), in C rather than with torch ops so that collecting never adds
 * operators to the training process (a dump running alongside would record
 * them); and the JSON spelling of non-finite numbers. */
#include "cc_internal.h"

#include <math.h>
#include <string.h>

void msp_cc_tensor_stats(const void *data, size_t n, size_t elem_size, msp_cc_dtype_t dt,
                         msp_cc_stats_t *out)
{
    memset(out, 0, sizeof *out);
    msp_cc_sha256_hex(data, data && elem_size ? n * elem_size : 0, out->hash);
    size_t es = msp_dtype_size(dt);
    if (!data || !es || es != elem_size || n == 0)
        return;
    msp_stats_t st;
    msp_stats_compute(dt, data, n, &st);
    out->valid = 1;
    out->max = st.max;
    out->min = st.min;
    out->mean = st.mean;
    out->norm = st.norm;
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
