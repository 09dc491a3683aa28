/* msprobe's precision standards (msprobe-acc_check(1), STANDARDS): which API
 * each one judges and how, as msprobe's API pre-check publishes them (its
 * api_precision_standard lists, StandardConfig thresholds and the rules of
 * api_precision_compare), read there and written anew here. The same judge
 * serves acc_check (the recorded output against the same-dtype CPU replay,
 * each measured against the float64 replay) and api_precision_compare (an
 * NPU run's details against a GPU run's). Also the CSV text both write, and
 * the details read back whole (cmp_csv_read, on msp_csv_read). */
#include "pc_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const cmp_acc_detail_cols[CMP_ACC_DETAIL_NCOLS] = {"API Name",
                                                               "Bench Dtype",
                                                               "DEVICE Dtype",
                                                               "Shape",
                                                               "余弦相似度",
                                                               "最大绝对误差",
                                                               "双百指标",
                                                               "双千指标",
                                                               "双万指标",
                                                               "二进制一致错误率",
                                                               "误差均衡性",
                                                               "均方根误差",
                                                               "小值域错误占比",
                                                               "相对误差最大值",
                                                               "相对误差平均值",
                                                               "inf/nan错误率",
                                                               "相对误差错误率",
                                                               "绝对误差错误率",
                                                               "ULP误差最大值",
                                                               "ULP误差平均值",
                                                               "ULP误差大于阈值占比",
                                                               "Status",
                                                               "Message"};

/* ---- which standard ------------------------------------------------------------ */

static const char *const cmp_std_absolute[] = {
    "mul",      "mul_",     "__mul__",    "__imul__",    "__rmul__", "add",        "add_",
    "__add__",  "__iadd__", "__radd__",   "div",         "div_",     "__div__",    "__idiv__",
    "divide",   "divide_",  "leaky_relu", "leaky_relu_", "prelu",    "reciprocal", "reciprocal_",
    "rsqrt",    "rsqrt_",   "square",     "square_",     "sub",      "sub_",       "rsub",
    "__isub__", "__sub__",  NULL};
static const char *const cmp_std_binary[] = {
    "abs",           "abs_",           "absolute",    "absolute_",   "argmin",       "bitwise_and",
    "bitwise_and_",  "broadcast_to",   "ceil",        "ceil_",       "equal",        "fill_",
    "flatten",       "floor",          "floor_",      "gather",      "greater",      "greater_",
    "greater_equal", "greater_equal_", "histc",       "isfinite",    "isnan",        "less",
    "less_",         "less_equal",     "less_equal_", "logical_and", "logical_and_", "logical_not",
    "logical_not_",  "logical_or",     "logical_or_", "masked_fill", "masked_fill_", "max_pool3d",
    "maximum",       "minimum",        "neg",         "neg_",        "nonzero",      "not_equal",
    "not_equal_",    "one_hot",        "pad",         "relu",        "reshape",      "round",
    "round_",        "select",         "sign",        "sign_",       "sort",         "tile",
    "topk",          "transpose",      "transpose_",  "tril",        "tril_",        "triu",
    "triu_",         "type_as",        NULL};
static const char *const cmp_std_ulp[] = {
    "__matmul__", "addbmm",   "addbmm_", "addmm",        "addmm_",   "baddbmm",
    "baddbmm_",   "bilinear", "bmm",     "chain_matmul", "hspmm",    "linear",
    "matmul",     "mm",       "mv",      "smm",          "sspaddmm", NULL};
static const char *const cmp_std_thousandth[] = {"conv1d", "conv2d", NULL};
static const char *const cmp_std_accumulative[] = {"test_api", NULL};

/* Operator monitoring levels of the benchmark standard (L0 for the rest). */
static const char *const cmp_level1[] = {
    "embedding", "npu_fusion_attention_grad", "npu_fusion_attention", "scatter_", "scatter_add_",
    NULL};
static const char *const cmp_level2[] = {"addmm",
                                         "npu_cross_entropy_loss",
                                         "npu_cross_entropy_loss_backward",
                                         "GELU",
                                         "layer_norm",
                                         "matmul",
                                         "mm",
                                         "index",
                                         "one_hot",
                                         "sum",
                                         "npu_rms_norm",
                                         "npu_rms_norm_backward",
                                         "nonzero",
                                         NULL};

static int cmp_acc_in(const char *api, const char *const *set)
{
    for (; *set; set++)
        if (!strcmp(api, *set))
            return 1;
    return 0;
}

static int cmp_acc_dtype_low(const char *dtype)
{
    return !strcmp(dtype, "torch.float16") || !strcmp(dtype, "torch.bfloat16");
}

static int cmp_acc_dtype_judged(const char *dtype)
{
    return cmp_acc_dtype_low(dtype) || !strcmp(dtype, "torch.float32");
}

static int cmp_acc_dtype_float(const char *dtype)
{
    return cmp_acc_dtype_judged(dtype) || !strcmp(dtype, "torch.float64");
}

cmp_std_t cmp_acc_standard(const char *api, const char *dtype)
{
    if (!cmp_acc_dtype_float(dtype))
        return strncmp(dtype, "torch.complex", 13) ? CMP_STD_BINARY : CMP_STD_NONE;
    if (!cmp_acc_dtype_judged(dtype))
        return CMP_STD_NONE;
    if (cmp_acc_in(api, cmp_std_absolute))
        return CMP_STD_ABSOLUTE;
    if (cmp_acc_in(api, cmp_std_binary))
        return CMP_STD_BINARY;
    if (cmp_acc_in(api, cmp_std_ulp))
        return CMP_STD_ULP;
    if (cmp_acc_in(api, cmp_std_thousandth))
        return CMP_STD_THOUSANDTH;
    if (cmp_acc_in(api, cmp_std_accumulative))
        return CMP_STD_ACCUMULATIVE;
    return CMP_STD_BENCHMARK;
}

const char *cmp_std_name(cmp_std_t s)
{
    static const char *const n[] = {
        "",          "binary consistency", "absolute threshold", "ULP error", "dual thousandths",
        "benchmark", "accumulative error"};
    return n[s];
}

const char *cmp_std_msprobe_name(cmp_std_t s)
{
    static const char *const n[] = {" ",          "二进制一致法", "绝对阈值法",    "ULP误差比对法",
                                    "双千指标法", "标杆比对法",   "累积误差比对法"};
    return n[s];
}

void cmp_acc_api_base(const char *name, char *buf, size_t n)
{
    /* tokens; the API path is what lies between the prefix and the call index */
    const char *tok[64];
    size_t len[64], nt = 0;
    const char *s = name;
    buf[0] = '\0';
    while (nt < 64) {
        const char *dot = strchr(s, '.');
        tok[nt] = s;
        len[nt] = dot ? (size_t)(dot - s) : strlen(s);
        nt++;
        if (!dot)
            break;
        s = dot + 1;
    }
    for (size_t i = nt; i-- > 1;) {
        int digits = len[i] > 0;
        for (size_t k = 0; k < len[i]; k++)
            digits &= isdigit((unsigned char)tok[i][k]) != 0;
        if (digits && i >= 2) { /* the call index: the API ends just before it */
            size_t m = len[i - 1] < n - 1 ? len[i - 1] : n - 1;
            memcpy(buf, tok[i - 1], m);
            buf[m] = '\0';
            return;
        }
    }
}

/* ---- judging ---------------------------------------------------------------------- */

/* StandardConfig's minimum error per dtype: the floor of a ratio's denominator. */
static double cmp_acc_min_err(const char *dtype)
{
    if (!strcmp(dtype, "torch.float16"))
        return 0x1p-11;
    if (!strcmp(dtype, "torch.bfloat16"))
        return 0x1p-8;
    return 0x1p-14;
}

static double cmp_acc_level_threshold(const char *api, int which)
{
    /* which: 0 max_rel, 1 mean_rel, 2 rmse */
    static const double th[3][3] = {{10.0, 2.0, 2.0}, {5.0, 1.5, 1.5}, {2.0, 1.2, 1.2}};
    int level = cmp_acc_in(api, cmp_level2) ? 2 : cmp_acc_in(api, cmp_level1) ? 1 : 0;
    return th[level][which];
}

static void cmp_acc_note(cmp_apc_verdict_t *out, const char *fmt, ...) MSP_PRINTF(2, 3);
static void cmp_acc_note(cmp_apc_verdict_t *out, const char *fmt, ...)
{
    size_t at = strlen(out->msg);
    if (at + 2 >= sizeof out->msg)
        return;
    if (at)
        out->msg[at++] = ' ';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->msg + at, sizeof out->msg - at, fmt, ap);
    va_end(ap);
}

/* msprobe's ratio of an NPU and a GPU value: |x| / max(|y|, minimum error);
 * NaN or Inf on either side agrees only with the same on the other (the
 * ratio is then NaN: no verdict from it). 0 when they disagree. */
static int cmp_acc_ratio(double x, double y, const char *dtype, double *ratio)
{
    if (!isfinite(x) || !isfinite(y)) {
        *ratio = NAN;
        if (isinf(x) && isinf(y))
            return (x > 0) == (y > 0);
        return isnan(x) && isnan(y);
    }
    *ratio = fabs(x) / fmax(fabs(y), cmp_acc_min_err(dtype));
    return 1;
}

static int cmp_acc_need(const unsigned have, int i)
{
    return (have >> i) & 1u;
}

/* One benchmark ratio: value, status; error when it exceeds th or the
 * NaN/Inf sides disagree. */
static msp_acc_status_t cmp_acc_bench_one(cmp_apc_verdict_t *out, int col, double npu, double gpu,
                                          const char *dtype, double th, const char *what)
{
    double r;
    int consistent = cmp_acc_ratio(npu, gpu, dtype, &r);
    out->v[col] = r;
    out->have |= 1u << col;
    msp_acc_status_t st = MSP_ACC_PASS;
    if (!consistent) {
        st = MSP_ACC_ERROR;
        cmp_acc_note(out, "%s: NaN/Inf on one side only (%g against %g).", what, npu, gpu);
    } else if (isfinite(r) && r > th) {
        st = MSP_ACC_ERROR;
        cmp_acc_note(out, "%s ratio %.6g above %g.", what, r, th);
    }
    out->st[col] = st;
    return st;
}

static msp_acc_status_t cmp_acc_worst(msp_acc_status_t a, msp_acc_status_t b)
{
    static const int rank[] = {0, 1, 2, 3, 0};
    return rank[b] > rank[a] ? b : a;
}

/* Absolute threshold: inf/nan, relative and absolute error rates all 0. */
static msp_acc_status_t cmp_acc_absolute(cmp_apc_verdict_t *out, const double *npu)
{
    static const struct {
        int col, metric;
        const char *what;
    } parts[] = {{CMP_APC_INF_NAN, MSP_ACC_INF_NAN, "inf/nan error rate"},
                 {CMP_APC_REL_ERR, MSP_ACC_REL_ERR_RATIO, "relative error rate"},
                 {CMP_APC_ABS_ERR, MSP_ACC_ABS_ERR_RATIO, "absolute error rate"}};
    msp_acc_status_t res = MSP_ACC_PASS;
    for (size_t i = 0; i < 3; i++) {
        double v = npu[parts[i].metric];
        out->v[parts[i].col] = v;
        out->have |= 1u << parts[i].col;
        int ok = v >= 0.0 && v <= 0.0;
        out->st[parts[i].col] = ok ? MSP_ACC_PASS : MSP_ACC_ERROR;
        if (!ok) {
            res = MSP_ACC_ERROR;
            cmp_acc_note(out, "%s %.6g is not 0.", parts[i].what, v);
        }
    }
    return res;
}

static const int cmp_acc_needs[][5] = {
    [CMP_STD_NONE] = {-1},
    [CMP_STD_BINARY] = {MSP_ACC_ERROR_RATE, -1},
    [CMP_STD_ABSOLUTE] = {MSP_ACC_INF_NAN, MSP_ACC_REL_ERR_RATIO, MSP_ACC_ABS_ERR_RATIO, -1},
    [CMP_STD_ULP] = {MSP_ACC_MEAN_ULP, MSP_ACC_ULP_PROPORTION, -1},
    [CMP_STD_THOUSANDTH] = {MSP_ACC_THOUSANDTH, -1},
    [CMP_STD_BENCHMARK] = {MSP_ACC_SMALL_VALUE, MSP_ACC_RMSE, MSP_ACC_MAX_REL, MSP_ACC_MEAN_REL,
                           MSP_ACC_EB},
    [CMP_STD_ACCUMULATIVE] = {MSP_ACC_INF_NAN, MSP_ACC_REL_ERR_RATIO, MSP_ACC_ABS_ERR_RATIO,
                              MSP_ACC_EB, -1},
};

static const char *const cmp_acc_metric_names[MSP_ACC_NMETRICS] = {"cosine",
                                                                   "max abs error",
                                                                   "dual hundredths",
                                                                   "dual thousandths",
                                                                   "dual ten-thousandths",
                                                                   "binary error rate",
                                                                   "error balance",
                                                                   "RMSE",
                                                                   "small value error ratio",
                                                                   "max relative error",
                                                                   "mean relative error",
                                                                   "inf/nan error rate",
                                                                   "relative error rate",
                                                                   "absolute error rate",
                                                                   "max ULP error",
                                                                   "mean ULP error",
                                                                   "ULP error proportion"};

void cmp_acc_judge(cmp_std_t std, const char *dtype, const char *api, const double *npu,
                   unsigned npu_have, const double *gpu, unsigned gpu_have, int same_kernel,
                   cmp_apc_verdict_t *out)
{
    memset(out, 0, sizeof *out);
    out->std = std;
    out->result = MSP_ACC_SKIP;
    if (std == CMP_STD_NONE) {
        cmp_acc_note(out, "%s is not covered by the precision standards.", dtype);
        return;
    }
    int compares = std == CMP_STD_BENCHMARK || std == CMP_STD_ULP;
    for (int i = 0; i < 5 && cmp_acc_needs[std][i] >= 0; i++) {
        int m = cmp_acc_needs[std][i];
        if (!cmp_acc_need(npu_have, m) || (compares && !cmp_acc_need(gpu_have, m))) {
            cmp_acc_note(out, "the %s standard needs the %s of both devices; it is empty.",
                         cmp_std_name(std), cmp_acc_metric_names[m]);
            return;
        }
    }
    msp_acc_status_t res = MSP_ACC_PASS;
    switch (std) {
    case CMP_STD_BINARY: {
        double v = npu[MSP_ACC_ERROR_RATE];
        out->v[CMP_APC_ERROR_RATE] = v;
        out->have |= 1u << CMP_APC_ERROR_RATE;
        res = v >= 0.0 && v <= 0.0 ? MSP_ACC_PASS : MSP_ACC_ERROR;
        out->st[CMP_APC_ERROR_RATE] = res;
        if (res != MSP_ACC_PASS)
            cmp_acc_note(out, "binary error rate %.6g is not 0.", v);
        break;
    }
    case CMP_STD_ABSOLUTE:
        res = cmp_acc_absolute(out, npu);
        break;
    case CMP_STD_ACCUMULATIVE: {
        res = cmp_acc_absolute(out, npu);
        double eb = npu[MSP_ACC_EB];
        double th = !strcmp(dtype, "torch.float16")    ? 0x1p-20
                    : !strcmp(dtype, "torch.bfloat16") ? 0x1p-7
                                                       : 0x1p-14;
        out->v[CMP_APC_EB] = eb;
        out->have |= 1u << CMP_APC_EB;
        out->st[CMP_APC_EB] = eb <= th ? MSP_ACC_PASS : MSP_ACC_ERROR;
        if (!(eb <= th)) {
            res = MSP_ACC_ERROR;
            cmp_acc_note(out, "error balance %.6g above %g.", eb, th);
        }
        break;
    }
    case CMP_STD_THOUSANDTH: {
        double v = npu[MSP_ACC_THOUSANDTH];
        out->v[CMP_APC_THOUSANDTH] = v;
        out->have |= 1u << CMP_APC_THOUSANDTH;
        res = v >= 0.999 ? MSP_ACC_PASS : MSP_ACC_ERROR;
        out->st[CMP_APC_THOUSANDTH] = res;
        if (res != MSP_ACC_PASS)
            cmp_acc_note(out, "dual thousandths %.6g below 0.999.", v);
        break;
    }
    case CMP_STD_ULP: {
        double mean = npu[MSP_ACC_MEAN_ULP], prop = npu[MSP_ACC_ULP_PROPORTION];
        double ratio;
        int mean_ok = isfinite(mean) || (isnan(mean) && isnan(gpu[MSP_ACC_MEAN_ULP])) ||
                      (isinf(mean) && isinf(gpu[MSP_ACC_MEAN_ULP]) &&
                       (mean > 0) == (gpu[MSP_ACC_MEAN_ULP] > 0));
        int ratio_ok = cmp_acc_ratio(prop, gpu[MSP_ACC_ULP_PROPORTION], dtype, &ratio);
        out->v[CMP_APC_MEAN_ULP] = mean;
        out->v[CMP_APC_ULP_PROP] = prop;
        out->v[CMP_APC_ULP_RATIO] = ratio;
        out->have |= (1u << CMP_APC_MEAN_ULP) | (1u << CMP_APC_ULP_PROP) |
                     (1u << CMP_APC_ULP_RATIO);
        if (!mean_ok || !ratio_ok) {
            res = MSP_ACC_ERROR;
            cmp_acc_note(out, "ULP error: NaN/Inf on one device only.");
        } else if (!strcmp(dtype, "torch.float32")) {
            /* any one of: mean ULP error < 64, share above 32 ULP < 0.05, or
             * that share below the reference device's */
            if (!(mean < 64.0 || prop < 0.05 || ratio < 1.0 || (same_kernel && ratio <= 1.0))) {
                res = MSP_ACC_ERROR;
                cmp_acc_note(out,
                             "ULP error: mean %.6g >= 64, share above 32 ULP %.6g >= 0.05, "
                             "%.6g times the reference device's.",
                             mean, prop, ratio);
            }
        } else if (!(prop < 0.001 || ratio < 1.0 || (same_kernel && ratio <= 1.0))) {
            res = MSP_ACC_ERROR;
            cmp_acc_note(out,
                         "ULP error: share above 1 ULP %.6g >= 0.001, %.6g times the "
                         "reference device's.",
                         prop, ratio);
        }
        out->st[CMP_APC_ULP_RATIO] = res;
        break;
    }
    case CMP_STD_BENCHMARK: {
        res = MSP_ACC_PASS;
        res = cmp_acc_worst(res, cmp_acc_bench_one(out, CMP_APC_SMALL, npu[MSP_ACC_SMALL_VALUE],
                                                   gpu[MSP_ACC_SMALL_VALUE], dtype, 2.0,
                                                   "small value error ratio"));
        res = cmp_acc_worst(res, cmp_acc_bench_one(out, CMP_APC_RMSE, npu[MSP_ACC_RMSE],
                                                   gpu[MSP_ACC_RMSE], dtype,
                                                   cmp_acc_level_threshold(api, 2), "RMSE"));
        res = cmp_acc_worst(res, cmp_acc_bench_one(out, CMP_APC_MAX_REL, npu[MSP_ACC_MAX_REL],
                                                   gpu[MSP_ACC_MAX_REL], dtype,
                                                   cmp_acc_level_threshold(api, 0),
                                                   "max relative error"));
        res = cmp_acc_worst(res, cmp_acc_bench_one(out, CMP_APC_MEAN_REL, npu[MSP_ACC_MEAN_REL],
                                                   gpu[MSP_ACC_MEAN_REL], dtype,
                                                   cmp_acc_level_threshold(api, 1),
                                                   "mean relative error"));
        /* the error balance is reported, not part of the verdict */
        char keep[sizeof out->msg];
        memcpy(keep, out->msg, sizeof keep);
        cmp_acc_bench_one(out, CMP_APC_EB, npu[MSP_ACC_EB], gpu[MSP_ACC_EB], dtype, 2.0,
                          "error balance");
        memcpy(out->msg, keep, sizeof keep);
        break;
    }
    case CMP_STD_NONE:
        break;
    }
    out->result = res;
    int npu_only = std == CMP_STD_BINARY || std == CMP_STD_ABSOLUTE || std == CMP_STD_THOUSANDTH ||
                   std == CMP_STD_ACCUMULATIVE;
    if (same_kernel && npu_only && res == MSP_ACC_ERROR) {
        cmp_apc_verdict_t ref;
        cmp_acc_judge(std, dtype, api, gpu, gpu_have, gpu, gpu_have, 0, &ref);
        if (ref.result == MSP_ACC_ERROR) {
            out->result = MSP_ACC_WARNING;
            cmp_acc_note(out,
                         "The same-dtype CPU replay misses it too: %s cannot meet this "
                         "standard here.",
                         dtype);
        }
    }
}

msp_acc_status_t cmp_acc_first_pass(const char *dtype, const double *m, unsigned have, char *note,
                                    size_t n)
{
    note[0] = '\0';
    if (!cmp_acc_dtype_float(dtype)) {
        if (!cmp_acc_need(have, MSP_ACC_ERROR_RATE))
            return MSP_ACC_SKIP;
        return m[MSP_ACC_ERROR_RATE] > 0.0 ? MSP_ACC_ERROR : MSP_ACC_PASS;
    }
    if (cmp_acc_need(have, MSP_ACC_COSINE) && !(m[MSP_ACC_COSINE] > 0.99) &&
        !isnan(m[MSP_ACC_COSINE])) {
        snprintf(note, n, "cosine %.6g is not above 0.99.", m[MSP_ACC_COSINE]);
        return MSP_ACC_ERROR;
    }
    if (cmp_acc_need(have, MSP_ACC_MAX_ABS) && m[MSP_ACC_MAX_ABS] < 0.001)
        return MSP_ACC_PASS;
    int low = cmp_acc_dtype_low(dtype);
    if (low && !(m[MSP_ACC_HUNDREDTH] > 0.99)) {
        snprintf(note, n, "dual hundredths %.6g: relative error above 0.01 too often.",
                 m[MSP_ACC_HUNDREDTH]);
        return MSP_ACC_ERROR;
    }
    int thousandth = m[MSP_ACC_THOUSANDTH] > 0.999;
    if (low) {
        if (!thousandth)
            snprintf(note, n, "dual thousandths %.6g: relative error above 0.001 too often.",
                     m[MSP_ACC_THOUSANDTH]);
        return thousandth ? MSP_ACC_PASS : MSP_ACC_WARNING;
    }
    if (!thousandth) {
        snprintf(note, n, "dual thousandths %.6g: relative error above 0.001 too often.",
                 m[MSP_ACC_THOUSANDTH]);
        return MSP_ACC_ERROR;
    }
    if (!(m[MSP_ACC_TEN_THOUSANDTH] > 0.9999)) {
        snprintf(note, n, "dual ten-thousandths %.6g: relative error above 0.0001 too often.",
                 m[MSP_ACC_TEN_THOUSANDTH]);
        return MSP_ACC_WARNING;
    }
    return MSP_ACC_PASS;
}

const char *cmp_acc_status_text(msp_acc_status_t s)
{
    static const char *const t[] = {" ", "pass", "warning", "error", "SKIP"};
    return t[s];
}

msp_acc_status_t cmp_acc_status_parse(const char *s)
{
    static const char *const t[] = {" ", "pass", "warning", "error", "SKIP"};
    for (int i = 1; i < 5; i++)
        if (!strcmp(s, t[i]))
            return (msp_acc_status_t)i;
    return MSP_ACC_NONE;
}

/* ---- CSV ------------------------------------------------------------------------------ */

void cmp_csv_metric(FILE *f, double v, int have)
{
    char buf[64];
    if (!have)
        snprintf(buf, sizeof buf, " ");
    else if (isnan(v))
        snprintf(buf, sizeof buf, "nan");
    else if (isinf(v))
        snprintf(buf, sizeof buf, v > 0 ? "inf" : "-inf");
    else
        snprintf(buf, sizeof buf, "%.14f", v);
    msp_csv_field(f, buf, 0);
}

void cmp_csv_end_row(FILE *f)
{
    fputs("\r\n", f);
}

#define CMP_CSV_MAX ((size_t)1 << 30)

/* msp_csv_read's callback: a copy of each record joins out. */
static msp_err cmp_csv_keep(void *ud, size_t row, size_t n, const char *const *fields)
{
    cmp_csv_t *out = ud;
    (void)row;
    if (out->n == out->cap) {
        size_t cap = out->cap;
        char ***nr = msp_grow(out->rows, &cap, out->n, sizeof *nr, 64);
        if (nr)
            out->rows = nr;
        size_t *nn = nr ? realloc(out->nf, cap * sizeof *nn) : NULL;
        if (!nn)
            return msp_fail(MSP_ERR_NOMEM, "out of memory");
        out->nf = nn;
        out->cap = cap;
    }
    char **v = calloc(n ? n : 1, sizeof *v);
    for (size_t i = 0; v && i < n; i++)
        if (!(v[i] = strdup(fields[i]))) {
            while (i)
                free(v[--i]);
            free(v);
            v = NULL;
        }
    if (!v)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    out->rows[out->n] = v;
    out->nf[out->n++] = n;
    return MSP_OK;
}

msp_err cmp_csv_read(const char *path, cmp_csv_t *out)
{
    memset(out, 0, sizeof *out);
    msp_err rc = msp_csv_read(path, CMP_CSV_MAX, cmp_csv_keep, out);
    if (rc)
        cmp_csv_free(out);
    return rc;
}

void cmp_csv_free(cmp_csv_t *c)
{
    for (size_t i = 0; i < c->n; i++) {
        for (size_t j = 0; j < c->nf[i]; j++)
            free(c->rows[i][j]);
        free(c->rows[i]);
    }
    free(c->rows);
    free(c->nf);
    memset(c, 0, sizeof *c);
}

int cmp_csv_col(const cmp_csv_t *c, const char *name)
{
    if (!c->n)
        return -1;
    for (size_t j = 0; j < c->nf[0]; j++)
        if (!strcmp(c->rows[0][j], name))
            return (int)j;
    return -1;
}

void cmp_acc_stamp(char *buf, size_t n)
{
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(buf, n, "%Y%m%d%H%M%S", &tm);
}
