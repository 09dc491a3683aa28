/* Private to acc_check and api_precision_compare (src/compare/cmp_acc*.c,
 * cmp_apc.c): msprobe's precision standards, which APIs each one judges,
 * how it judges them, and the CSV text both commands read and write. */
#ifndef MSPROBE_CMP_ACC_H
#define MSPROBE_CMP_ACC_H

#include "msprobe/precheck.h"
#include "cmp_report.h"

#include <stdio.h>

/* msprobe's standards (its api_precision_standard lists and StandardConfig). */
typedef enum cmp_std {
    CMP_STD_NONE = 0,       /* not judged by one (float64: msprobe's first-pass rule) */
    CMP_STD_BINARY,         /* 二进制一致法: every element bit-equal */
    CMP_STD_ABSOLUTE,       /* 绝对阈值法: relative error within rtol, small values within atol */
    CMP_STD_ULP,            /* ULP误差比对法 */
    CMP_STD_THOUSANDTH,     /* 双千指标法 */
    CMP_STD_BENCHMARK,      /* 标杆比对法: error ratios against the reference device */
    CMP_STD_ACCUMULATIVE    /* 累积误差比对法 */
} cmp_std_t;

/* "benchmark", ... (ours, for messages) and msprobe's name (its CSV column 比对算法). */
const char *cmp_std_name(cmp_std_t s);
const char *cmp_std_msprobe_name(cmp_std_t s);
/* The standard of api (its last name part: "conv2d", "__mul__", "matmul") for
 * an output of torch dtype name dtype ("torch.float16"), as msprobe assigns
 * it: non-float outputs binary; float16/bfloat16/float32 by the API lists,
 * else benchmark; anything else CMP_STD_NONE. */
cmp_std_t cmp_acc_standard(const char *api, const char *dtype);
/* The API name a standard looks up: "Functional.conv2d.0.forward.output.0"
 * or "Functional.conv2d.0" -> "conv2d"; "Custom.pkg.mul.0" -> "mul". */
void cmp_acc_api_base(const char *name, char *buf, size_t n);

/* api_precision_compare's verdict columns (its details CSV, in order). */
enum {
    CMP_APC_SMALL = 0,      /* 小值域错误比值 / 小值域判定结果 */
    CMP_APC_RMSE,           /* 均方根误差比值 */
    CMP_APC_MAX_REL,        /* 相对误差最大值比值 */
    CMP_APC_MEAN_REL,       /* 相对误差平均值比值 */
    CMP_APC_EB,             /* 误差均衡性比值 */
    CMP_APC_INF_NAN,        /* inf/nan错误率 */
    CMP_APC_REL_ERR,        /* 相对误差错误率 */
    CMP_APC_ABS_ERR,        /* 绝对误差错误率 */
    CMP_APC_ERROR_RATE,     /* 二进制一致错误率 */
    CMP_APC_MEAN_ULP,       /* ULP误差平均值 (value only) */
    CMP_APC_ULP_PROP,       /* ULP误差大于阈值占比 (value only) */
    CMP_APC_ULP_RATIO,      /* ULP误差大于阈值占比比值, status: ULP误差判定结果 */
    CMP_APC_THOUSANDTH,     /* 双千指标 */
    CMP_APC_N
};

typedef struct cmp_apc_verdict {
    cmp_std_t std;
    double v[CMP_APC_N];
    unsigned have;          /* bit i: v[i] is filled */
    msp_acc_status_t st[CMP_APC_N]; /* MSP_ACC_NONE: no status column filled */
    msp_acc_status_t result;
    char msg[640];
} cmp_apc_verdict_t;

/* Judge one output by standard std: npu (the run checked) and gpu (the
 * reference device; acc_check: the same-dtype CPU replay) are msprobe's
 * metric columns (MSP_ACC_*) with their have bits. dtype and api as for
 * cmp_acc_standard. A metric the standard needs that is not there makes the
 * result MSP_ACC_SKIP with the reason. same_kernel (acc_check): gpu is a
 * correct kernel of npu's own dtype, so a tie with it passes (msprobe's ULP
 * rule asks the NPU to beat the GPU), and an output that misses a standard
 * judged on the NPU alone is a warning when gpu misses it too (the dtype
 * cannot meet it), as msprobe's first pass warns on float16/bfloat16. */
void cmp_acc_judge(cmp_std_t std, const char *dtype, const char *api, const double *npu,
                   unsigned npu_have, const double *gpu, unsigned gpu_have, int same_kernel,
                   cmp_apc_verdict_t *out);
/* msprobe's first-pass rule of acc_check's Status (cosine, max abs error,
 * dual hundredths/thousandths/ten-thousandths), for outputs no standard
 * judges (float64); note gets why. */
msp_acc_status_t cmp_acc_first_pass(const char *dtype, const double *m, unsigned have,
                                    char *note, size_t n);

/* "pass", "warning", "error", "SKIP", " " (msprobe's spellings). */
const char *cmp_acc_status_text(msp_acc_status_t s);
/* The reverse; MSP_ACC_NONE for " " or anything else. */
msp_acc_status_t cmp_acc_status_parse(const char *s);

/* ---- CSV text (RFC 4180: quoted when needed, CRLF line ends) ---- */

/* One field: cmp_csv_field (cmp_report.h), the details csv's writer. */
/* A metric as msprobe writes it ("%.14f"), or " " when absent. */
void cmp_csv_metric(FILE *f, double v, int have);
void cmp_csv_end_row(FILE *f);
/* A parsed CSV file: rows of fields (row 0: the header). */
typedef struct cmp_csv {
    char ***rows;
    size_t *nf;
    size_t n;
} cmp_csv_t;
/* Read path (at most 1 GiB; a UTF-8 BOM is skipped). MSP_ERR_FORMAT names
 * the file and line of an unterminated quote. */
msp_err cmp_csv_read(const char *path, cmp_csv_t *out);
void cmp_csv_free(cmp_csv_t *c);
/* Index of header column name, or -1. */
int cmp_csv_col(const cmp_csv_t *c, const char *name);
/* YYYYmmddHHMMSS of now, msprobe's file stamp. */
void cmp_acc_stamp(char *buf, size_t n);

/* The details CSV's columns (accuracy_checking_details_*.csv). */
#define CMP_ACC_DETAIL_NCOLS (4 + MSP_ACC_NMETRICS + 2)
extern const char *const cmp_acc_detail_cols[CMP_ACC_DETAIL_NCOLS];

#endif
