/* overflow_check's reading of one record (pc_overflow.c): the API and call
 * index in its name, what its roles are, whether a tensor or an argument
 * holds NaN/Inf, its attributes, and why an origin's finite inputs gave
 * NaN/Inf (the reason line). */
#include "pc_internal.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- names ------------------------------------------------------------------- */

/* "Torch.log.0.forward" -> api "log" (the last token of the API path),
 * call 0; Module records and unparsable names give 0. */
int ov_split_name(const char *name, char *api, size_t n, long *call)
{
    api[0] = '\0';
    *call = -1;
    if (!strncmp(name, "Module.", 7))
        return 0;
    const char *last = strrchr(name, '.');
    if (!last || last == name)
        return 0;
    const char *p = last - 1;
    while (p > name && *p != '.')
        p--;
    if (p == name || !isdigit((unsigned char)p[1]))
        return 0;
    char *end = NULL;
    long v = strtol(p + 1, &end, 10);
    if (end != last)
        return 0;
    const char *q = p - 1;
    while (q > name && *q != '.')
        q--;
    if (q == name)
        return 0;
    size_t len = (size_t)(p - (q + 1));
    if (len + 1 > n)
        len = n - 1;
    memcpy(api, q + 1, len);
    api[len] = '\0';
    *call = v;
    return 1;
}

int ov_is_input(const char *role)
{
    return !strncmp(role, "input", 5) || !strncmp(role, "kwarg.", 6);
}

int ov_is_output(const char *role)
{
    return !strncmp(role, "output", 6);
}

/* "out=": the buffer a call writes its result into, not an input. */
int ov_is_out_buffer(const char *role)
{
    return !strcmp(role, "kwarg.out") || !strncmp(role, "kwarg.out.", 10);
}

/* role is base or inside it ("input.1", "input.1.0"). */
int ov_role_under(const char *role, const char *base)
{
    size_t n = strlen(base);
    return !strncmp(role, base, n) && (role[n] == '\0' || role[n] == '.');
}

/* ---- abnormal values ------------------------------------------------------------ */

int ov_tensor_bad(const msp_tensor_info_t *t)
{
    if (!t->has_stats || !msp_dtype_is_float(t->dtype))
        return t->has_stats && (t->stats.nan_count > 0 || t->stats.inf_count > 0)
                   ? (t->stats.nan_count ? OV_NAN : 0) | (t->stats.inf_count ? OV_INF : 0)
                   : 0;
    int bad = 0;
    if (t->stats.nan_count > 0 || isnan(t->stats.max) || isnan(t->stats.min))
        bad |= OV_NAN;
    if (t->stats.inf_count > 0 || isinf(t->stats.max) || isinf(t->stats.min))
        bad |= OV_INF;
    return bad;
}

/* A non-tensor argument that is itself inf or nan ("-inf", "[0.0, inf]"). */
int ov_text_bad(const char *v)
{
    for (const char *p = v; *p; p++) {
        int before = p == v || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        if (!before)
            continue;
        if ((!strncmp(p, "inf", 3) || !strncmp(p, "nan", 3)) &&
            !(isalnum((unsigned char)p[3]) || p[3] == '_'))
            return 1;
    }
    return 0;
}

/* The record's attributes as a cJSON object (key -> text); NULL on failure. */
cJSON *ov_attrs(msp_dump_file_t *f, const msp_record_info_t *r)
{
    char **k = NULL, **v = NULL;
    size_t n = 0;
    if (msp_dump_record_attrs(f, r, &k, &v, &n) != MSP_OK) {
        msp_clear_error();
        return NULL;
    }
    cJSON *o = cJSON_CreateObject();
    for (size_t i = 0; o && i < n; i++)
        cJSON_AddStringToObject(o, k[i], v[i]);
    msp_free_strings(k, n);
    msp_free_strings(v, n);
    return o;
}

const char *ov_attr(const cJSON *attrs, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(attrs, key);
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

/* ---- reasons ------------------------------------------------------------------------ */

static double ov_dtype_max(msp_dtype_t dt)
{
    switch (dt) {
    case MSP_DTYPE_FLOAT16:
        return 65504.0;
    case MSP_DTYPE_BFLOAT16:
        return 3.3895313892515355e38;
    case MSP_DTYPE_FLOAT32:
        return FLT_MAX;
    default:
        return DBL_MAX;
    }
}

static int ov_in(const char *api, const char *const *set)
{
    for (; *set; set++)
        if (!strcmp(api, *set))
            return 1;
    return 0;
}

/* The input tensor with the lowest min (and whether one holds a zero). */
static const msp_tensor_info_t *ov_lowest_input(const msp_record_info_t *r, int *has_zero,
                                                double *max_abs)
{
    const msp_tensor_info_t *low = NULL;
    *has_zero = 0;
    *max_abs = 0.0;
    for (size_t i = 0; i < r->n_tensors; i++) {
        const msp_tensor_info_t *t = &r->tensors[i];
        if (!ov_is_input(t->role) || ov_is_out_buffer(t->role) || !t->has_stats ||
            !msp_dtype_is_float(t->dtype) || t->numel == 0)
            continue;
        if (!low || t->stats.min < low->stats.min)
            low = t;
        if (t->stats.min <= 0.0 && t->stats.max >= 0.0)
            *has_zero = 1;
        double m = fmax(fabs(t->stats.max), fabs(t->stats.min));
        if (m > *max_abs)
            *max_abs = m;
    }
    return low;
}

static const msp_tensor_info_t *ov_first_bad_output(const msp_record_info_t *r)
{
    for (size_t i = 0; i < r->n_tensors; i++)
        if (ov_is_output(r->tensors[i].role) && ov_tensor_bad(&r->tensors[i]))
            return &r->tensors[i];
    return NULL;
}

/* Why the record's finite inputs gave NaN/Inf, from what the statistics say:
 * the API's own domain errors first (log or sqrt of a negative, log of zero,
 * x/0), then overflow past the output dtype's range, then an invalid
 * operation inside the op. */
char *ov_reason(const msp_record_info_t *r, int bad, int is_comm)
{
    static const char *const logs[] = {"log", "log2", "log10", "log_", "log2_", "log10_", NULL};
    static const char *const sqrts[] = {"sqrt", "rsqrt", "sqrt_", "rsqrt_", NULL};
    static const char *const divs[] = {
        "div",         "div_",         "divide",       "divide_",   "true_divide", "true_divide_",
        "__truediv__", "__rtruediv__", "__itruediv__", "__div__",   "__rdiv__",    "reciprocal",
        "reciprocal_", "floor_divide", "fmod",         "remainder", NULL};
    static const char *const pows[] = {"pow",      "pow_",        "__pow__", "__rpow__",
                                       "__ipow__", "float_power", NULL};
    static const char *const arcs[] = {"acos",  "asin",  "arccos",  "arcsin", "acos_",
                                       "asin_", "atanh", "arctanh", NULL};
    static const char *const exps[] = {"exp", "exp_", "exp2", "expm1", NULL};
    char api[64];
    long call;
    ov_split_name(r->name, api, sizeof api, &call);
    const msp_tensor_info_t *out = ov_first_bad_output(r);
    int has_zero = 0;
    double max_abs = 0.0;
    const msp_tensor_info_t *low = ov_lowest_input(r, &has_zero, &max_abs);
    const char *dname = out ? out->dtype_name : "?";
    if (!strncmp(dname, "torch.", 6))
        dname += 6;
    double lim = out ? ov_dtype_max(out->dtype) : DBL_MAX;
    char counts[96] = "";
    if (out && (out->stats.nan_count || out->stats.inf_count))
        snprintf(counts, sizeof counts, " (%s: %" PRId64 " NaN, %" PRId64 " Inf of %" PRId64 ")",
                 out->role, out->stats.nan_count, out->stats.inf_count, out->numel);
    int fwd = cmp_is_forward(r->name) || strstr(r->name, ".backward") == NULL;
    int neg = low && low->stats.min < 0.0;
    char nan_why[160] = "", inf_why[160] = "";
    const char *lr = low ? low->role : "input";
    double lmin = low ? low->stats.min : 0.0;
    if (fwd && ov_in(api, logs)) {
        if (neg)
            snprintf(nan_why, sizeof nan_why, "log of a negative number (%s min %.6g)", lr, lmin);
        if (has_zero)
            snprintf(inf_why, sizeof inf_why, "log of zero is -inf (%s holds 0)", lr);
    } else if (fwd && !strncmp(api, "log1p", 5)) {
        if (low && low->stats.min < -1.0)
            snprintf(nan_why, sizeof nan_why, "log1p of a number below -1 (%s min %.6g)", lr, lmin);
    } else if (fwd && ov_in(api, sqrts)) {
        if (neg)
            snprintf(nan_why, sizeof nan_why, "square root of a negative number (%s min %.6g)", lr,
                     lmin);
        if (has_zero && api[0] == 'r')
            snprintf(inf_why, sizeof inf_why, "rsqrt of zero is inf (%s holds 0)", lr);
    } else if (fwd && ov_in(api, pows)) {
        if (neg)
            snprintf(nan_why, sizeof nan_why,
                     "a negative base to a fractional power (%s min "
                     "%.6g)",
                     lr, lmin);
    } else if (fwd && ov_in(api, arcs)) {
        if (max_abs > 1.0)
            snprintf(nan_why, sizeof nan_why, "%s outside [-1, 1] (largest magnitude %.6g)", api,
                     max_abs);
    } else if (fwd && ov_in(api, divs) && has_zero) {
        snprintf(nan_why, sizeof nan_why, "0/0 (the inputs hold zeros)");
        snprintf(inf_why, sizeof inf_why, "a division by zero (an input holds zeros)");
    } else if (fwd && ov_in(api, exps) && low) {
        snprintf(inf_why, sizeof inf_why,
                 "overflow: exp of finite inputs up to %.6g exceeds %s's "
                 "range (largest finite %.6g, exp above %.4g)",
                 max_abs, dname, lim, log(lim));
    }
    if (!(bad & OV_INF))
        inf_why[0] = '\0';
    if (!(bad & OV_NAN))
        nan_why[0] = '\0';
    if (nan_why[0] && inf_why[0])
        return msp_asprintf("NaN and Inf from finite inputs: %s; %s%s", nan_why, inf_why, counts);
    if (nan_why[0] && !(bad & OV_INF))
        return msp_asprintf("NaN from finite inputs: %s%s", nan_why, counts);
    if (inf_why[0] && !(bad & OV_NAN))
        return msp_asprintf("%s%s%s",
                            strncmp(inf_why, "overflow", 8) ? "Inf from finite inputs: " : "",
                            inf_why, counts);
    if (bad == OV_INF) {
        if (is_comm)
            return msp_asprintf("overflow: the reduction of finite inputs (largest magnitude "
                                "%.6g) exceeded %s's range (largest finite %.6g)%s",
                                max_abs, dname, lim, counts);
        return msp_asprintf("overflow: finite inputs (largest magnitude %.6g) gave a result "
                            "past %s's largest finite value %.6g%s",
                            max_abs, dname, lim, counts);
    }
    if (bad == OV_NAN)
        return msp_asprintf("NaN from finite inputs: an invalid operation inside the op (0/0, "
                            "log or sqrt of a negative, or inf - inf / 0 * inf after an "
                            "intermediate overflow)%s",
                            counts);
    if (nan_why[0] || inf_why[0])
        return msp_asprintf("NaN and Inf from finite inputs: %s%s", nan_why[0] ? nan_why : inf_why,
                            counts);
    return msp_asprintf("overflow and NaN from finite inputs: an intermediate result "
                        "overflowed %s (largest finite %.6g) and then made NaN (inf - inf, "
                        "0 * inf)%s",
                        dname, lim, counts);
}
