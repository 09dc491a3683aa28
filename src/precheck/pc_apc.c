/* api_precision_compare (msprobe-acc_check(1), API_PRECISION_COMPARE): two
 * acc_check details CSVs, one run on the device under suspicion ("NPU") and
 * one on a trusted device ("GPU"), each measured against the same CPU
 * benchmark; every row is judged by its API's standard (pc_acc_std.c), the
 * device comparisons as ratios NPU/GPU, and rolled up per API into msprobe's
 * api_precision_compare_result_*.csv and _details_*.csv. */
#include "pc_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* msprobe's required columns, and the metric each one is. */
static const struct {
    const char *col;
    int metric; /* MSP_ACC_*, -1: not a metric */
} apc_required[] = {
    {"API Name", -1},
    {"DEVICE Dtype", -1},
    {"小值域错误占比", MSP_ACC_SMALL_VALUE},
    {"均方根误差", MSP_ACC_RMSE},
    {"相对误差最大值", MSP_ACC_MAX_REL},
    {"相对误差平均值", MSP_ACC_MEAN_REL},
    {"误差均衡性", MSP_ACC_EB},
    {"二进制一致错误率", MSP_ACC_ERROR_RATE},
    {"inf/nan错误率", MSP_ACC_INF_NAN},
    {"相对误差错误率", MSP_ACC_REL_ERR_RATIO},
    {"绝对误差错误率", MSP_ACC_ABS_ERR_RATIO},
    {"ULP误差平均值", MSP_ACC_MEAN_ULP},
    {"ULP误差大于阈值占比", MSP_ACC_ULP_PROPORTION},
    {"双千指标", MSP_ACC_THOUSANDTH},
};
#define APC_NREQ (sizeof apc_required / sizeof apc_required[0])

static const char *const apc_detail_cols[] = {"API Name",
                                              "小值域错误比值",
                                              "小值域判定结果",
                                              "均方根误差比值",
                                              "均方根误差判定结果",
                                              "相对误差最大值比值",
                                              "相对误差最大值判定结果",
                                              "相对误差平均值比值",
                                              "相对误差平均值判定结果",
                                              "误差均衡性比值",
                                              "误差均衡性判定结果",
                                              "inf/nan错误率",
                                              "inf/nan判定结果",
                                              "相对误差错误率",
                                              "相对误差判定结果",
                                              "绝对误差错误率",
                                              "绝对误差判定结果",
                                              "二进制一致错误率",
                                              "二进制一致错误率判定结果",
                                              "ULP误差平均值",
                                              "ULP误差大于阈值占比",
                                              "ULP误差大于阈值占比比值",
                                              "ULP误差判定结果",
                                              "双千指标",
                                              "双千指标判定结果",
                                              "比对结果",
                                              "比对算法",
                                              "Message"};

/* The details columns in order as (value column, status column) of the verdict:
 * -1 where the value has no status column of its own, or the reverse. */
static const struct {
    int value, status;
} apc_layout[] = {
    {CMP_APC_SMALL, CMP_APC_SMALL},
    {CMP_APC_RMSE, CMP_APC_RMSE},
    {CMP_APC_MAX_REL, CMP_APC_MAX_REL},
    {CMP_APC_MEAN_REL, CMP_APC_MEAN_REL},
    {CMP_APC_EB, CMP_APC_EB},
    {CMP_APC_INF_NAN, CMP_APC_INF_NAN},
    {CMP_APC_REL_ERR, CMP_APC_REL_ERR},
    {CMP_APC_ABS_ERR, CMP_APC_ABS_ERR},
    {CMP_APC_ERROR_RATE, CMP_APC_ERROR_RATE},
    {CMP_APC_MEAN_ULP, -1},
    {CMP_APC_ULP_PROP, -1},
    {CMP_APC_ULP_RATIO, CMP_APC_ULP_RATIO},
    {CMP_APC_THOUSANDTH, CMP_APC_THOUSANDTH},
};

typedef struct apc_file {
    cmp_csv_t csv;
    int col[APC_NREQ];
    int shape, message;
} apc_file_t;

static msp_err apc_open(const char *path, const char *what, apc_file_t *f)
{
    memset(f, 0, sizeof *f);
    msp_err rc = cmp_csv_read(path, &f->csv);
    if (rc != MSP_OK)
        return rc;
    char missing[512] = "";
    for (size_t i = 0; i < APC_NREQ; i++) {
        f->col[i] = cmp_csv_col(&f->csv, apc_required[i].col);
        if (f->col[i] < 0) {
            size_t at = strlen(missing);
            snprintf(missing + at, sizeof missing - at, "%s%s", at ? ", " : "",
                     apc_required[i].col);
        }
    }
    if (missing[0]) {
        cmp_csv_free(&f->csv);
        return msp_fail(MSP_ERR_FORMAT,
                        "%s (%s details): not an acc_check details CSV: the "
                        "columns %s are missing",
                        path, what, missing);
    }
    f->shape = cmp_csv_col(&f->csv, "Shape");
    f->message = cmp_csv_col(&f->csv, "Message");
    return MSP_OK;
}

static const char *apc_cell(const apc_file_t *f, size_t row, int col)
{
    return col >= 0 && (size_t)col < f->csv.nf[row] ? f->csv.rows[row][col] : "";
}

static int apc_blank(const char *s)
{
    for (; *s; s++)
        if (!isspace((unsigned char)*s))
            return 0;
    return 1;
}

/* A row's metrics: a blank cell is absent; "nan", "inf" read as such. */
static unsigned apc_metrics(const apc_file_t *f, size_t row, double *v)
{
    unsigned have = 0;
    for (int i = 0; i < MSP_ACC_NMETRICS; i++)
        v[i] = NAN;
    for (size_t i = 0; i < APC_NREQ; i++) {
        int m = apc_required[i].metric;
        if (m < 0)
            continue;
        const char *s = apc_cell(f, row, f->col[i]);
        char *end = NULL;
        double x = strtod(s, &end);
        if (apc_blank(s) || end == s || !apc_blank(end))
            continue;
        v[m] = x;
        have |= 1u << m;
    }
    return have;
}

/* "Functional.conv2d.0.forward.output.0": the API ("Functional.conv2d.0"),
 * its pass ("forward", "backward", "step") and base name ("conv2d"). 0 when
 * the name has no call index followed by a pass. */
static int apc_split(const char *name, char *api, size_t an, char *pass, size_t pn, char *base,
                     size_t bn)
{
    static const char *const passes[] = {"forward", "backward", "step"};
    const char *p = name;
    while ((p = strchr(p, '.')) != NULL) {
        p++;
        const char *q = p;
        while (isdigit((unsigned char)*q))
            q++;
        if (q == p || *q != '.')
            continue;
        for (int k = 0; k < 3; k++) {
            size_t n = strlen(passes[k]);
            if (!strncmp(q + 1, passes[k], n) && (q[1 + n] == '.' || q[1 + n] == '\0')) {
                snprintf(api, an, "%.*s", (int)(q - name), name);
                snprintf(pass, pn, "%s", passes[k]);
                cmp_acc_api_base(api, base, bn);
                return 1;
            }
        }
    }
    return 0;
}

static int apc_unsupported_dtype(const char *dt)
{
    return apc_blank(dt) || !strcmp(dt, "torch.float64") || !strcmp(dt, "torch.complex64") ||
           !strcmp(dt, "torch.complex128");
}

static void apc_detail_row(FILE *out, const char *name, const cmp_apc_verdict_t *v,
                           const char *message)
{
    msp_csv_field(out, name, 1);
    for (size_t i = 0; i < sizeof apc_layout / sizeof apc_layout[0]; i++) {
        int c = apc_layout[i].value;
        cmp_csv_metric(out, v->v[c], (v->have >> c) & 1u);
        if (apc_layout[i].status >= 0)
            msp_csv_field(out, cmp_acc_status_text(v->st[apc_layout[i].status]), 0);
    }
    msp_csv_field(out, cmp_acc_status_text(v->result), 0);
    msp_csv_field(out,
                  v->result == MSP_ACC_SKIP && v->std == CMP_STD_NONE
                      ? " "
                      : cmp_std_msprobe_name(v->std),
                  0);
    msp_csv_field(out, message, 0);
    cmp_csv_end_row(out);
}

/* msprobe's roll-up of one pass's rows: none " ", all SKIP, else the worst. */
static msp_acc_status_t apc_rollup(const msp_acc_status_t *s, size_t n)
{
    if (!n)
        return MSP_ACC_NONE;
    int skip = 1, warn = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == MSP_ACC_ERROR)
            return MSP_ACC_ERROR;
        warn |= s[i] == MSP_ACC_WARNING;
        skip &= s[i] == MSP_ACC_SKIP;
    }
    return skip ? MSP_ACC_SKIP : warn ? MSP_ACC_WARNING : MSP_ACC_PASS;
}

typedef struct apc_api {
    char name[512];
    char dtype[40];
    msp_acc_status_t *fwd, *bwd;
    size_t nf, nb, capf, capb;
    char skip_msg[512];
} apc_api_t;

static void apc_flush(FILE *res, apc_api_t *a, msp_apc_summary_t *s)
{
    if (!a->name[0])
        return;
    msp_acc_status_t f, b;
    const char *msg = "";
    if (apc_unsupported_dtype(a->dtype) && !apc_blank(a->dtype)) {
        f = b = MSP_ACC_SKIP;
        msg = "This data type does not support benchmark compare.";
    } else {
        f = apc_rollup(a->fwd, a->nf);
        b = apc_rollup(a->bwd, a->nb);
        if (f == MSP_ACC_SKIP)
            msg = a->skip_msg;
    }
    msp_csv_field(res, a->name, 1);
    msp_csv_field(res, cmp_acc_status_text(f), 0);
    msp_csv_field(res, cmp_acc_status_text(b), 0);
    msp_csv_field(res, msg, 0);
    cmp_csv_end_row(res);
    /* an API counts by the worse of its two passes */
    msp_acc_status_t w = f == MSP_ACC_ERROR || b == MSP_ACC_ERROR       ? MSP_ACC_ERROR
                         : f == MSP_ACC_WARNING || b == MSP_ACC_WARNING ? MSP_ACC_WARNING
                         : f == MSP_ACC_PASS || b == MSP_ACC_PASS       ? MSP_ACC_PASS
                                                                        : MSP_ACC_SKIP;
    s->apis++;
    s->pass += w == MSP_ACC_PASS;
    s->warning += w == MSP_ACC_WARNING;
    s->error += w == MSP_ACC_ERROR;
    s->skip += w == MSP_ACC_SKIP;
    free(a->fwd);
    free(a->bwd);
    memset(a, 0, sizeof *a);
}

static int apc_push(msp_acc_status_t **v, size_t *n, size_t *cap, msp_acc_status_t s)
{
    msp_acc_status_t *nv = msp_grow(*v, cap, *n, sizeof *nv, 8);
    if (!nv)
        return -1;
    *v = nv;
    nv[(*n)++] = s;
    return 0;
}

/* The row's verdict. A CSV whose float rows fill only the benchmark
 * columns (msprobe 8's acc_check) is judged by the benchmark standard where
 * the API's own standard finds its columns empty. */
static void apc_judge_row(const apc_file_t *npu, size_t nr, const apc_file_t *gpu, size_t gr,
                          const char *dtype, const char *base, cmp_apc_verdict_t *v)
{
    double nm[MSP_ACC_NMETRICS], gm[MSP_ACC_NMETRICS];
    unsigned nh = apc_metrics(npu, nr, nm), gh = apc_metrics(gpu, gr, gm);
    cmp_std_t std = cmp_acc_standard(base, dtype);
    cmp_acc_judge(std, dtype, base, nm, nh, gm, gh, 0, v);
    if (v->result == MSP_ACC_SKIP && std != CMP_STD_BENCHMARK && std != CMP_STD_BINARY &&
        std != CMP_STD_NONE) {
        cmp_apc_verdict_t b;
        cmp_acc_judge(CMP_STD_BENCHMARK, dtype, base, nm, nh, gm, gh, 0, &b);
        if (b.result != MSP_ACC_SKIP)
            *v = b;
    }
}

static msp_err apc_create(const char *path, char **tmp, FILE **f)
{
    *f = NULL;
    if (!(*tmp = msp_atomic_tmp_name(path)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if (!(*f = fopen(*tmp, "w"))) {
        msp_err rc = msp_fail(MSP_ERR_IO, "cannot write %s: %s", *tmp, strerror(errno));
        msp_atomic_discard(*tmp);
        free(*tmp);
        *tmp = NULL;
        return rc;
    }
    return MSP_OK;
}

static msp_err apc_finish(FILE *f, char *tmp, const char *path, msp_err rc)
{
    if (!f)
        return rc;
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (rc == MSP_OK && bad)
        rc = msp_fail(MSP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (rc == MSP_OK)
        rc = msp_atomic_commit(tmp, path);
    else
        msp_atomic_discard(tmp);
    free(tmp);
    return rc;
}

msp_err msp_api_precision_compare(const char *npu_csv, const char *gpu_csv, const char *out_dir,
                                  msp_apc_summary_t *s)
{
    memset(s, 0, sizeof *s);
    apc_file_t npu, gpu;
    msp_err rc = apc_open(npu_csv, "NPU", &npu);
    if (rc != MSP_OK)
        return rc;
    if ((rc = apc_open(gpu_csv, "GPU", &gpu)) != MSP_OK) {
        cmp_csv_free(&npu.csv);
        return rc;
    }
    char stamp[32], *rtmp = NULL, *dtmp = NULL;
    FILE *rf = NULL, *df = NULL;
    apc_api_t cur;
    memset(&cur, 0, sizeof cur);
    cmp_acc_stamp(stamp, sizeof stamp);
    if ((rc = msp_mkdirs(out_dir)) != MSP_OK)
        goto done;
    s->result_path = msp_asprintf("%s/api_precision_compare_result_%s.csv", out_dir, stamp);
    s->details_path = msp_asprintf("%s/api_precision_compare_details_%s.csv", out_dir, stamp);
    if (!s->result_path || !s->details_path) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = apc_create(s->result_path, &rtmp, &rf)) != MSP_OK ||
        (rc = apc_create(s->details_path, &dtmp, &df)) != MSP_OK)
        goto done;
    static const char *const rcols[] = {"API Name", "Forward Test Success", "Backward Test Success",
                                        "Message"};
    for (int c = 0; c < 4; c++)
        msp_csv_field(rf, rcols[c], c == 0);
    cmp_csv_end_row(rf);
    for (size_t c = 0; c < sizeof apc_detail_cols / sizeof apc_detail_cols[0]; c++)
        msp_csv_field(df, apc_detail_cols[c], c == 0);
    cmp_csv_end_row(df);
    for (size_t r = 1; r < npu.csv.n && rc == MSP_OK; r++) {
        const char *name = apc_cell(&npu, r, npu.col[0]);
        const char *dtype = apc_cell(&npu, r, npu.col[1]);
        size_t gr = 0;
        for (size_t k = 1; k < gpu.csv.n; k++)
            if (!strcmp(apc_cell(&gpu, k, gpu.col[0]), name)) {
                if (gr) {
                    rc = msp_fail(MSP_ERR_FORMAT, "%s: API Name %s is on more than one row",
                                  gpu_csv, name);
                    break;
                }
                gr = k;
            }
        if (rc != MSP_OK)
            break;
        char api[512], pass[16], base[128];
        cmp_apc_verdict_t v;
        memset(&v, 0, sizeof v);
        if (!apc_split(name, api, sizeof api, pass, sizeof pass, base, sizeof base)) {
            char msg[600];
            snprintf(msg, sizeof msg, "The API name %s is invalid.", name);
            v.result = MSP_ACC_SKIP;
            apc_detail_row(df, name, &v, msg);
            msp_csv_field(rf, name, 1);
            msp_csv_field(rf, "SKIP", 0);
            msp_csv_field(rf, "SKIP", 0);
            msp_csv_field(rf, msg, 0);
            cmp_csv_end_row(rf);
            s->apis++;
            s->skip++;
            continue;
        }
        if (!gr) {
            s->unmatched++;
            msp_log(MSP_LOG_WARN, "api_precision_compare: %s is not in %s", name, gpu_csv);
            continue;
        }
        const char *npu_msg = apc_cell(&npu, r, npu.message);
        const char *shape = apc_cell(&npu, r, npu.shape);
        if (apc_unsupported_dtype(dtype) || !strcmp(shape, "(0,)")) {
            v.result = MSP_ACC_SKIP;
            apc_detail_row(df, name, &v, npu_msg);
        } else {
            apc_judge_row(&npu, r, &gpu, gr, dtype, base, &v);
            apc_detail_row(df, name, &v, v.msg);
        }
        if (strcmp(cur.name, api) != 0) {
            apc_flush(rf, &cur, s);
            snprintf(cur.name, sizeof cur.name, "%s", api);
        }
        snprintf(cur.dtype, sizeof cur.dtype, "%s", dtype);
        if (apc_unsupported_dtype(dtype) && !apc_blank(dtype))
            continue;
        int bwd = !strcmp(pass, "backward");
        if (!bwd && v.result == MSP_ACC_SKIP)
            snprintf(cur.skip_msg, sizeof cur.skip_msg, "%s", npu_msg);
        if ((bwd ? apc_push(&cur.bwd, &cur.nb, &cur.capb, v.result)
                 : apc_push(&cur.fwd, &cur.nf, &cur.capf, v.result)) != 0)
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    if (rc == MSP_OK)
        apc_flush(rf, &cur, s);
done:
    free(cur.fwd);
    free(cur.bwd);
    rc = apc_finish(rf, rtmp, s->result_path, rc);
    rc = apc_finish(df, dtmp, s->details_path, rc);
    cmp_csv_free(&npu.csv);
    cmp_csv_free(&gpu.csv);
    return rc;
}

void msp_apc_summary_free(msp_apc_summary_t *s)
{
    if (!s)
        return;
    free(s->result_path);
    free(s->details_path);
    s->result_path = s->details_path = NULL;
}
