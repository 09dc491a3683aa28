/* msprobe 26's "Result" column: pass / warning / error per row, by its
 * checkers (msprobe's core/compare/indicator_analysis/algorithm.py), run over each
 * record's rows; a record's Result is the worst of its rows. Apart from our
 * own verdict (msprobe 8.x's "Accuracy Reached or Not", cmp_verdict.c) and
 * the error-origin model; msprobe-compare(1), RESULT, lists the rules. */
#include "cmp_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* msprobe's own wording of each finding, appended to the row's Err_message. */
#define CMP_MSG_INFNAN "error: There is nan/inf/-inf in the maximum or minimum value of NPU."
#define CMP_MSG_THOUSANDTH                                                                         \
    "error: The input/parameters of One Thousandth Err Ratio > 0.9 "                               \
    "while the output < 0.6."
#define CMP_MSG_REQGRAD "error: The Required_Grad of NPU and Bench are inconsistent"
#define CMP_MSG_PARAMS "error: The scalar parameters of NPU and Bench are inconsistent."
#define CMP_MSG_DTYPE "error: The dtype of NPU and Bench are inconsistent."
#define CMP_MSG_SHAPE "error: The shape of NPU and Bench are inconsistent."
#define CMP_MSG_COSINE                                                                             \
    "warning: The input/parameters of Cosine > 0.9, and input/parameters "                         \
    "- output > 0.1"
#define CMP_MSG_NORMREL "error: The NormRelativeErr of output is greater than 0.5."
#define CMP_MSG_NORMWARN "warning: The norm relative error of output is 10 times that of input."
#define CMP_MSG_CRC "error: The CRC-32 value of NPU differs from that of the bench."
#define CMP_MSG_CRCMISS "warning: The parameter of NPU does not match the bench."

/* APIs msprobe leaves out of every check, or out of the checks of inputs. */
static const char *const cmp_all_ignore[] = {"empty",
                                             "empty_like",
                                             "numpy",
                                             "to",
                                             "__setitem__",
                                             "empty_with_format",
                                             "new_empty_strided",
                                             "new_empty",
                                             "empty_strided"};
static const char *const cmp_input_ignore[] = {"_reduce_scatter_base", "_all_gather_base",
                                               "all_to_all_single", "batch_isend_irecv"};
enum { CMP_IGNORE_NONE, CMP_IGNORE_INPUT, CMP_IGNORE_ALL };

static int cmp_ignore_of(const char *record)
{
    const char *dot = strchr(record, '.');
    if (!dot)
        return CMP_IGNORE_NONE;
    const char *api = dot + 1, *end = strchr(api, '.');
    size_t n = end ? (size_t)(end - api) : strlen(api);
    for (size_t i = 0; i < sizeof cmp_all_ignore / sizeof *cmp_all_ignore; i++)
        if (strlen(cmp_all_ignore[i]) == n && !strncmp(api, cmp_all_ignore[i], n))
            return CMP_IGNORE_ALL;
    for (size_t i = 0; i < sizeof cmp_input_ignore / sizeof *cmp_input_ignore; i++)
        if (strlen(cmp_input_ignore[i]) == n && !strncmp(api, cmp_input_ignore[i], n))
            return CMP_IGNORE_INPUT;
    return CMP_IGNORE_NONE;
}

static msp_err cmp_mark(msp_tensor_cmp_t *t, msp_result_t level, const char *msg)
{
    if (level > t->result)
        t->result = level;
    if (t->err_message && strstr(t->err_message, msg))
        return MSP_OK;
    char *m = t->err_message && *t->err_message ? msp_asprintf("%s; %s", t->err_message, msg)
                                                : strdup(msg);
    if (!m)
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    free(t->err_message);
    t->err_message = m;
    return MSP_OK;
}

/* Whether a row is checked at all: msprobe skips every row of an ignored
 * API and the inputs of an input-ignored one. */
static int cmp_checked(int ignore, const msp_tensor_cmp_t *t)
{
    return ignore == CMP_IGNORE_NONE || (ignore == CMP_IGNORE_INPUT && t->is_output);
}

/* msprobe's get_min_or_max_value: over the inputs (or outputs), skipping
 * N/A; the default when none is 1 for a minimum, 0 for a maximum. */
static double cmp_extreme(const msp_tensor_cmp_t *t0, size_t n, int outputs, int is_min,
                          double (*get)(const msp_tensor_cmp_t *))
{
    double v = is_min ? 1.0 : 0.0;
    for (size_t i = 0; i < n; i++) {
        if (t0[i].is_output != outputs)
            continue;
        double x = get(&t0[i]);
        if (!isnan(x))
            v = is_min ? fmin(v, x) : fmax(v, x);
    }
    return v;
}

static double cmp_get_ratio(const msp_tensor_cmp_t *t)
{
    return t->one_thousandth_ratio;
}

static double cmp_get_cosine(const msp_tensor_cmp_t *t)
{
    return t->cosine;
}

/* NormRelativeErr as a fraction (msprobe reads its "x%" back / 100). */
static double cmp_get_normrel(const msp_tensor_cmp_t *t)
{
    return isnan(t->norm_rel_diff) ? NAN : fabs(t->norm_rel_diff) / 100.0;
}

/* One record's rows. mode: 0 tensor, 1 statistics, 2 md5. */
static msp_err cmp_result_record(msp_record_cmp_t *rec, msp_tensor_cmp_t *t0, int mode)
{
    size_t n = rec->n_tensors;
    int ignore = cmp_ignore_of(rec->name);
    msp_err rc = MSP_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        msp_tensor_cmp_t *t = &t0[i];
        t->result = MSP_RESULT_PASS;
        if (!cmp_checked(ignore, t))
            continue;
        int matched = t->npu_name && t->bench_name;
        if (mode == 2) {
            if (t->npu_crc32 != t->bench_crc32)
                rc = cmp_mark(t, matched ? MSP_RESULT_ERROR : MSP_RESULT_WARNING,
                              matched ? CMP_MSG_CRC : CMP_MSG_CRCMISS);
            continue;
        }
        /* NaN/Inf in the NPU's max or min, not in the bench's */
        if (t->npu_name && t->npu_nonfinite && !(t->bench_name && t->bench_nonfinite))
            rc = cmp_mark(t, MSP_RESULT_ERROR, CMP_MSG_INFNAN);
        if (!matched || rc)
            continue;
        if (t->npu_requires_grad >= 0 && t->bench_requires_grad >= 0 &&
            t->npu_requires_grad != t->bench_requires_grad) {
            rc = cmp_mark(t, MSP_RESULT_ERROR, CMP_MSG_REQGRAD);
            rec->setup_differs = 1;
        }
        if (!rc && strcmp(t->npu_dtype, t->bench_dtype) != 0 && !strstr(t->bench_name, "qkv") &&
            !strstr(t->bench_name, "gate_up"))
            rc = cmp_mark(t, MSP_RESULT_ERROR, CMP_MSG_DTYPE);
        if (!rc && strcmp(t->npu_shape, t->bench_shape) != 0)
            rc = cmp_mark(t, MSP_RESULT_ERROR, CMP_MSG_SHAPE);
    }
    if (rc || mode == 2 || !n)
        return rc;
    /* the record's non-tensor arguments, on its first row */
    if (rec->args_scalar_differ && ignore == CMP_IGNORE_NONE) {
        rc = cmp_mark(&t0[0], MSP_RESULT_ERROR, CMP_MSG_PARAMS);
        rec->setup_differs = 1;
    }
    msp_tensor_cmp_t *out0 = NULL;
    for (size_t i = 0; i < n && !out0; i++)
        if (t0[i].is_output)
            out0 = &t0[i];
    if (rc || !out0 || ignore != CMP_IGNORE_NONE)
        return rc;
    if (mode == 0) {
        double in_ratio = cmp_extreme(t0, n, 0, 1, cmp_get_ratio);
        double out_ratio = cmp_extreme(t0, n, 1, 1, cmp_get_ratio);
        if (in_ratio > 0.9 && out_ratio < 0.1)
            rc = cmp_mark(out0, MSP_RESULT_ERROR, CMP_MSG_THOUSANDTH);
        double in_cos = cmp_extreme(t0, n, 0, 1, cmp_get_cosine);
        double out_cos = cmp_extreme(t0, n, 1, 1, cmp_get_cosine);
        if (!rc && in_cos > 0.9 && in_cos - out_cos > 0.1)
            rc = cmp_mark(out0, MSP_RESULT_WARNING, CMP_MSG_COSINE);
        return rc;
    }
    double in_rel = cmp_extreme(t0, n, 0, 0, cmp_get_normrel);
    double out_rel = cmp_extreme(t0, n, 1, 0, cmp_get_normrel);
    if (in_rel < 0.1)
        for (size_t i = 0; i < n && !rc; i++)
            if (t0[i].is_output && !isnan(cmp_get_normrel(&t0[i])) && cmp_get_normrel(&t0[i]) > 0.5)
                rc = cmp_mark(&t0[i], MSP_RESULT_ERROR, CMP_MSG_NORMREL);
    if (!rc && (!(in_rel > 0.0) ? out_rel > 0.1 : out_rel / in_rel > 10.0))
        rc = cmp_mark(out0, MSP_RESULT_WARNING, CMP_MSG_NORMWARN);
    return rc;
}

msp_err cmp_apply_results(msp_compare_result_t *res, int md5)
{
    int mode = md5 ? 2 : res->stats_mode ? 1 : 0;
    for (size_t r = 0; r < res->n_records; r++) {
        msp_record_cmp_t *rec = &res->records[r];
        msp_tensor_cmp_t *t0 = res->tensors + rec->first_tensor;
        rec->setup_differs = 0;
        msp_err rc = cmp_result_record(rec, t0, mode);
        if (rc)
            return rc;
        rec->result = MSP_RESULT_PASS;
        for (size_t i = 0; i < rec->n_tensors; i++)
            if (t0[i].result > rec->result)
                rec->result = t0[i].result;
    }
    return MSP_OK;
}
