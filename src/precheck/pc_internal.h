/* Private to src/precheck, the checks that judge one run by msprobe's
 * standards: acc_check and api_precision_compare (pc_acc*.c, pc_apc.c:
 * msprobe's precision standards, which APIs each one judges, how it judges
 * them, and the CSV text both commands read and write; acc_check replays
 * each API on compare's replay worker, cmp_worker.h) and overflow_check
 * (pc_overflow*.c). */
#ifndef MSPROBE_PC_INTERNAL_H
#define MSPROBE_PC_INTERNAL_H

#include "msprobe/precheck.h"
#include "cmp_internal.h"

#include <stdio.h>

/* msprobe's standards (its api_precision_standard lists and StandardConfig). */
typedef enum cmp_std {
    CMP_STD_NONE = 0,    /* not judged by one (float64: msprobe's first-pass rule) */
    CMP_STD_BINARY,      /* 二进制一致法: every element bit-equal */
    CMP_STD_ABSOLUTE,    /* 绝对阈值法: relative error within rtol, small values within atol */
    CMP_STD_ULP,         /* ULP误差比对法 */
    CMP_STD_THOUSANDTH,  /* 双千指标法 */
    CMP_STD_BENCHMARK,   /* 标杆比对法: error ratios against the reference device */
    CMP_STD_ACCUMULATIVE /* 累积误差比对法 */
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
    CMP_APC_SMALL = 0,  /* 小值域错误比值 / 小值域判定结果 */
    CMP_APC_RMSE,       /* 均方根误差比值 */
    CMP_APC_MAX_REL,    /* 相对误差最大值比值 */
    CMP_APC_MEAN_REL,   /* 相对误差平均值比值 */
    CMP_APC_EB,         /* 误差均衡性比值 */
    CMP_APC_INF_NAN,    /* inf/nan错误率 */
    CMP_APC_REL_ERR,    /* 相对误差错误率 */
    CMP_APC_ABS_ERR,    /* 绝对误差错误率 */
    CMP_APC_ERROR_RATE, /* 二进制一致错误率 */
    CMP_APC_MEAN_ULP,   /* ULP误差平均值 (value only) */
    CMP_APC_ULP_PROP,   /* ULP误差大于阈值占比 (value only) */
    CMP_APC_ULP_RATIO,  /* ULP误差大于阈值占比比值, status: ULP误差判定结果 */
    CMP_APC_THOUSANDTH, /* 双千指标 */
    CMP_APC_N
};

typedef struct cmp_apc_verdict {
    cmp_std_t std;
    double v[CMP_APC_N];
    unsigned have;                  /* bit i: v[i] is filled */
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
msp_acc_status_t cmp_acc_first_pass(const char *dtype, const double *m, unsigned have, char *note,
                                    size_t n);

/* "pass", "warning", "error", "SKIP", " " (msprobe's spellings). */
const char *cmp_acc_status_text(msp_acc_status_t s);
/* The reverse; MSP_ACC_NONE for " " or anything else. */
msp_acc_status_t cmp_acc_status_parse(const char *s);

/* ---- CSV text (RFC 4180: quoted when needed, CRLF line ends) ---- */

/* One field: msp_csv_field (msprobe/common.h), the details csv's writer. */
/* A metric as msprobe writes it ("%.14f"), or " " when absent. */
void cmp_csv_metric(FILE *f, double v, int have);
void cmp_csv_end_row(FILE *f);
/* A parsed CSV file: rows of fields (row 0: the header). */
typedef struct cmp_csv {
    char ***rows;
    size_t *nf;
    size_t n, cap;
} cmp_csv_t;
/* Read path whole (at most 1 GiB) with msp_csv_read (msprobe/common.h: strict
 * RFC 4180, errors naming file and line; blank lines and a BOM skipped). */
msp_err cmp_csv_read(const char *path, cmp_csv_t *out);
void cmp_csv_free(cmp_csv_t *c);
/* Index of header column name, or -1. */
int cmp_csv_col(const cmp_csv_t *c, const char *name);
/* YYYYmmddHHMMSS of now, msprobe's file stamp. */
void cmp_acc_stamp(char *buf, size_t n);

/* --save_error_data (pc_acc_save.c): for the n replayed records recs[i]
 * (indices into f's records) with their workers' answers, save the tensors of
 * each whose API res judged error or warning into dir (made when needed);
 * *n_files counts the files written. */
msp_err acc_save_error_data(const char *dir, msp_dump_file_t *f, const msp_acc_result_t *res,
                            const size_t *recs, char *const *answers, size_t n, size_t *n_files);

/* The details CSV's columns (accuracy_checking_details_*.csv). */
#define CMP_ACC_DETAIL_NCOLS (4 + MSP_ACC_NMETRICS + 2)
extern const char *const cmp_acc_detail_cols[CMP_ACC_DETAIL_NCOLS];

/* ---- overflow_check's records (pc_overflow_rec.c, pc_overflow_json.c) --- */
/* Free what an anomaly node owns and zero it (pc_overflow_json.c, beside
 * msp_overflow_result_free). */
struct msp_anomaly_node;
void cmp_ov_node_free(struct msp_anomaly_node *n);

struct cJSON;
struct msp_anomaly_node;

enum { OV_NAN = 1, OV_INF = 2 };
/* Split a record name into its API and call index (0: not an API record). */
int ov_split_name(const char *name, char *api, size_t n, long *call);
/* What a role or argument name is: an input (input.*, kwarg.*), an output,
 * an out= buffer (holds what the call wrote); role under base ("input.0.1"
 * under "input.0"). */
int ov_is_input(const char *role);
int ov_is_output(const char *role);
int ov_is_out_buffer(const char *role);
int ov_role_under(const char *role, const char *base);
/* OV_NAN | OV_INF held by a tensor (its counts or statistics); whether an
 * argument is itself inf or nan ("-inf", "[0.0, inf]"). */
int ov_tensor_bad(const msp_tensor_info_t *t);
int ov_text_bad(const char *v);
/* path opened for overflow_check (pc_overflow_data.c): every tensor whose
 * data the dump holds gets the statistics and NaN/Inf counts of that data
 * (its CRC-32 checked); a statistics-only tensor whose counts cannot be true
 * (above its element count, negative, NaN in an integer tensor) refuses the
 * file, the error naming file, record and role. */
msp_err ov_open_dump(const char *path, msp_dump_file_t **out);
/* r's attributes as a cJSON object of strings (NULL on failure), and one of them. */
struct cJSON *ov_attrs(msp_dump_file_t *f, const msp_record_info_t *r);
const char *ov_attr(const struct cJSON *attrs, const char *key);
/* The reason line of an origin (bad: what its outputs hold), malloc'd. */
char *ov_reason(const msp_record_info_t *r, int bad, int is_comm);
/* node (of record r of f, in step) as msprobe's node JSON, malloc'd; NULL
 * when out of memory. */
char *ov_node_json(msp_dump_file_t *f, const msp_record_info_t *r, int64_t step,
                   const struct msp_anomaly_node *node);

#endif
