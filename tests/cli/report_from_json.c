/* Test driver for the report writers, independent of the compare engine:
 *
 *   report_from_json json SPEC.json OUT_DIR [ROWS_PER_SHEET [ZIP64_ROWS]]
 *                                        build an msp_compare_result_t from a
 *                                        JSON description, write result.xlsx
 *                                        and result.csv into OUT_DIR
 *   report_from_json generate N OUT_DIR  N records of 2 tensors each (input.0,
 *                                        output.0) with values the Python test
 *                                        recomputes from the row number
 *
 * ROWS_PER_SHEET lowers the sheet size so a few rows reach the details_2
 * overflow path; ZIP64_ROWS lowers the rows past which the workbook is
 * written with ZIP64 records. The Python test owns the expected values (its JSON, or its
 * formula for the generated case) and reads the files back with openpyxl and
 * csv; nothing here decides what is right. Floats that JSON cannot spell are the strings "nan",
 * "inf", "-inf".
 */
#include "msprobe/compare.h"

#include "rep_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsNumber(v))
        return v->valuedouble;
    if (cJSON_IsString(v)) {
        if (strcmp(v->valuestring, "nan") == 0)
            return NAN;
        if (strcmp(v->valuestring, "inf") == 0)
            return INFINITY;
        if (strcmp(v->valuestring, "-inf") == 0)
            return -INFINITY;
    }
    return 0.0;
}

static char *str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
}

static void fixed(const cJSON *o, const char *key, char *dst, size_t n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    snprintf(dst, n, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

static int from_json(const char *spec_path, msp_compare_result_t *r)
{
    char *text = NULL;
    if (msp_read_file(spec_path, (size_t)1 << 30, &text, NULL) != MSP_OK) {
        fprintf(stderr, "%s\n", msp_last_error());
        return -1;
    }
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root) {
        fprintf(stderr, "%s: not JSON\n", spec_path);
        return -1;
    }
    r->stats_mode = (int)num(root, "stats_mode");
    r->root_record = (long)num(root, "root_record");
    r->root_tensor = (long)num(root, "root_tensor");
    const cJSON *recs = cJSON_GetObjectItemCaseSensitive(root, "records");
    const cJSON *tens = cJSON_GetObjectItemCaseSensitive(root, "tensors");
    r->n_records = (size_t)cJSON_GetArraySize(recs);
    r->n_tensors = (size_t)cJSON_GetArraySize(tens);
    r->records = calloc(r->n_records + 1, sizeof *r->records);
    r->tensors = calloc(r->n_tensors + 1, sizeof *r->tensors);
    size_t i = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, recs)
    {
        msp_record_cmp_t *d = &r->records[i++];
        d->name = str(o, "name");
        d->bench_name = str(o, "bench_name");
        d->step = (int64_t)num(o, "step");
        d->rank = (int64_t)num(o, "rank");
        d->order = (int64_t)num(o, "order");
        d->first_tensor = (size_t)num(o, "first_tensor");
        d->n_tensors = (size_t)num(o, "n_tensors");
        d->worst_cosine = num(o, "worst_cosine");
        d->worst_max_abs = num(o, "worst_max_abs");
        d->verdict = (msp_verdict_t)num(o, "verdict");
        d->cause = (msp_cause_t)num(o, "cause");
        d->is_root_cause = (int)num(o, "is_root_cause");
        d->highlight = (msp_highlight_t)num(o, "highlight");
    }
    i = 0;
    cJSON_ArrayForEach(o, tens)
    {
        msp_tensor_cmp_t *t = &r->tensors[i++];
        t->npu_name = str(o, "npu_name");
        t->bench_name = str(o, "bench_name");
        fixed(o, "npu_dtype", t->npu_dtype, sizeof t->npu_dtype);
        fixed(o, "bench_dtype", t->bench_dtype, sizeof t->bench_dtype);
        fixed(o, "npu_shape", t->npu_shape, sizeof t->npu_shape);
        fixed(o, "bench_shape", t->bench_shape, sizeof t->bench_shape);
        t->is_output = (int)num(o, "is_output");
#define F(field) t->field = num(o, #field)
        F(cosine);
        F(euc_dist);
        F(max_abs_err);
        F(max_rel_err);
        F(one_thousandth_ratio);
        F(five_thousandths_ratio);
        F(npu_max);
        F(npu_min);
        F(npu_mean);
        F(npu_norm);
        F(bench_max);
        F(bench_min);
        F(bench_mean);
        F(bench_norm);
        F(max_diff);
        F(min_diff);
        F(mean_diff);
        F(norm_diff);
        F(max_rel_diff);
        F(min_rel_diff);
        F(mean_rel_diff);
        F(norm_rel_diff);
#undef F
        t->verdict = (msp_verdict_t)num(o, "verdict");
        t->highlight = (msp_highlight_t)num(o, "highlight");
        t->err_message = str(o, "err_message");
        if (!t->err_message)
            t->err_message = strdup("");
    }
    cJSON_Delete(root);
    return 0;
}

/* Record i: step i/1000, rank 0, order i%1000, named "Functional.op.<i>.forward";
 * tensor 2i = input.0, 2i+1 = output.0 with cosine 1 - (2i+1)*1e-9 and
 * max_abs_err (2i+1)*1e-6; every 7th record fails (red). */
static int generate(size_t n, msp_compare_result_t *r)
{
    r->n_records = n;
    r->n_tensors = 2 * n;
    r->records = calloc(n + 1, sizeof *r->records);
    r->tensors = calloc(2 * n + 1, sizeof *r->tensors);
    if (!r->records || !r->tensors)
        return -1;
    r->root_record = -1;
    r->root_tensor = -1;
    for (size_t i = 0; i < n; i++) {
        msp_record_cmp_t *d = &r->records[i];
        d->name = msp_asprintf("Functional.op.%zu.forward", i);
        d->bench_name = strdup(d->name);
        d->step = (int64_t)(i / 1000);
        d->order = (int64_t)(i % 1000);
        d->first_tensor = 2 * i;
        d->n_tensors = 2;
        int bad = i % 7 == 3;
        for (size_t k = 0; k < 2; k++) {
            msp_tensor_cmp_t *t = &r->tensors[2 * i + k];
            size_t j = 2 * i + k;
            t->npu_name = msp_asprintf("%s.%s", d->name, k ? "output.0" : "input.0");
            t->bench_name = strdup(t->npu_name);
            strcpy(t->npu_dtype, "torch.float32");
            strcpy(t->bench_dtype, "torch.float32");
            strcpy(t->npu_shape, "[4, 4]");
            strcpy(t->bench_shape, "[4, 4]");
            t->is_output = (int)k;
            t->cosine = 1.0 - (double)(j + 1) * 1e-9;
            t->max_abs_err = (double)(j + 1) * 1e-6;
            t->verdict = bad && k ? MSP_VERDICT_NO : MSP_VERDICT_YES;
            t->highlight = bad && k ? MSP_HL_RED : MSP_HL_NONE;
            t->err_message = strdup("");
        }
        d->worst_cosine = r->tensors[2 * i + 1].cosine;
        d->worst_max_abs = r->tensors[2 * i + 1].max_abs_err;
        d->verdict = r->tensors[2 * i + 1].verdict;
        d->highlight = r->tensors[2 * i + 1].highlight;
        r->n_failed += bad;
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* On the heap and zeroed (unpaired NULL, n_unpaired 0) so that the
     * library's own msp_compare_result_free releases it. */
    msp_compare_result_t *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    int ok;
    if (argc >= 4 && argc <= 6 && strcmp(argv[1], "json") == 0) {
        if (argc >= 5)
            cmp_report_set_rows_per_sheet((size_t)strtoull(argv[4], NULL, 10));
        if (argc == 6)
            cmp_report_set_zip64_rows((size_t)strtoull(argv[5], NULL, 10));
        ok = from_json(argv[2], r);
    } else if (argc == 4 && strcmp(argv[1], "generate") == 0)
        ok = generate((size_t)strtoull(argv[2], NULL, 10), r);
    else {
        fprintf(stderr,
                "usage: %s json SPEC.json OUT_DIR [ROWS_PER_SHEET [ZIP64_ROWS]] | generate N "
                "OUT_DIR\n",
                argv[0]);
        free(r);
        return 2;
    }
    int rc = 1;
    if (ok == 0) {
        msp_err e = msp_report_write_xlsx(r, argv[3]);
        if (e == MSP_OK)
            e = msp_report_write_csv(r, argv[3]);
        if (e != MSP_OK)
            fprintf(stderr, "%s: %s\n", msp_strerror(e), msp_last_error());
        else
            rc = 0;
    }
    msp_compare_result_free(r);
    return rc;
}
