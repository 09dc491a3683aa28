/* What the xlsx and csv reports share: the details columns (msprobe's names,
 * then ours), the words written for verdicts and causes, and the check that a
 * result's record ranges lie inside its tensor array. */
#include "rep_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const cmp_details_cols_tensor[] = {
    "NPU Name",
    "Bench Name",
    "NPU Dtype",
    "Bench Dtype",
    "NPU Tensor Shape",
    "Bench Tensor Shape",
    "Cosine",
    "EucDist",
    "MaxAbsErr",
    "MaxRelativeErr",
    "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio",
    "NPU max",
    "NPU min",
    "NPU mean",
    "NPU l2norm",
    "Bench max",
    "Bench min",
    "Bench mean",
    "Bench l2norm",
    "Accuracy Reached or Not",
    "Result",
    "Err_message",
    "Error Origin",
    "Step",
    "Rank",
    "NPU Requires_grad",
    "Bench Requires_grad",
    "Requires_grad Consistent",
    "NPU_Stack_Info",
    "Data_name",
    "NPU MD5",
    "BENCH MD5",
};
const char *const cmp_details_cols_stats[] = {
    "NPU Name",
    "Bench Name",
    "NPU Dtype",
    "Bench Dtype",
    "NPU Tensor Shape",
    "Bench Tensor Shape",
    "Max diff",
    "Min diff",
    "Mean diff",
    "L2norm diff",
    "MaxRelativeErr",
    "MinRelativeErr",
    "MeanRelativeErr",
    "NormRelativeErr",
    "NPU max",
    "NPU min",
    "NPU mean",
    "NPU l2norm",
    "Bench max",
    "Bench min",
    "Bench mean",
    "Bench l2norm",
    "Accuracy Reached or Not",
    "Result",
    "Err_message",
    "Error Origin",
    "Step",
    "Rank",
    "NPU Requires_grad",
    "Bench Requires_grad",
    "Requires_grad Consistent",
    "NPU_Stack_Info",
    "Data_name",
    "NPU MD5",
    "BENCH MD5",
};

/* msprobe 26's Requires_grad columns: "True"/"False", "N/A" for a missing side. */
const char *cmp_bool_text(int v)
{
    return v < 0 ? "N/A" : v ? "True" : "False";
}

const char *cmp_rg_consistent_text(const msp_tensor_cmp_t *t)
{
    if (t->npu_requires_grad < 0 || t->bench_requires_grad < 0)
        return "N/A";
    return t->npu_requires_grad == t->bench_requires_grad ? "True" : "False";
}

/* Statistics-mode relative error as msprobe 26 writes it: "x%" (NaN: "N/A"). */
void cmp_percent_text(msp_num_memo_t *m, double v, char *buf, size_t size)
{
    if (isnan(v))
        snprintf(buf, size, "N/A");
    else if (isinf(v))
        snprintf(buf, size, "%s", v > 0 ? "inf%" : "-inf%");
    else if (size >= MSP_DTOA_SIZE + 2) /* printf's "%.15g%%", without printf */
        memcpy(buf + msp_fmt_g15_memo(m, v, buf), "%", 2);
    else
        snprintf(buf, size, "%.15g%%", v);
}

const char *cmp_verdict_text(msp_verdict_t v)
{
    switch (v) {
    case MSP_VERDICT_YES:
        return "Yes";
    case MSP_VERDICT_NO:
        return "No";
    case MSP_VERDICT_WARNING:
        return "Warning";
    case MSP_VERDICT_NA:
        return "N/A";
    }
    return "No";
}

const char *cmp_result_text(msp_result_t r)
{
    return r == MSP_RESULT_ERROR ? "error" : r == MSP_RESULT_WARNING ? "warning" : "pass";
}

/* msprobe 8.x's Data_name: "['npu file', 'bench file']", "-1" for a side
 * without data. */
void cmp_data_name_text(const msp_tensor_cmp_t *t, char *buf, size_t size)
{
    if (!t->npu_data_name && !t->bench_data_name) /* statistics: every row */
        msp_copy_str(buf, size, "['-1', '-1']");
    else
        snprintf(buf, size, "['%s', '%s']", t->npu_data_name ? t->npu_data_name : "-1",
                 t->bench_data_name ? t->bench_data_name : "-1");
}

/* msprobe's md5 column: the CRC-32 in 8 hex digits, "N/A" when unknown. */
void cmp_md5_text(uint32_t crc, char *buf, size_t size)
{
    static const char hex[] = "0123456789abcdef";
    char t[9];
    for (int i = 0; i < 8; i++)
        t[i] = hex[(crc >> (28 - 4 * i)) & 15];
    t[8] = '\0';
    msp_copy_str(buf, size, crc ? t : "N/A"); /* two a row: printf's "%08x" without printf */
}

const char *cmp_cause_text(msp_cause_t c)
{
    switch (c) {
    case MSP_CAUSE_INTRODUCED:
        return "introduced";
    case MSP_CAUSE_INHERITED:
        return "inherited";
    case MSP_CAUSE_NONE:
        break;
    }
    return "";
}

/* Records claim contiguous tensor ranges; a range that lies outside the tensor
 * array is a bug in the producer, reported rather than read out of bounds. */
msp_err cmp_report_check_ranges(const msp_compare_result_t *res)
{
    for (size_t i = 0; i < res->n_records; i++) {
        const msp_record_cmp_t *rec = &res->records[i];
        if (rec->first_tensor > res->n_tensors ||
            rec->n_tensors > res->n_tensors - rec->first_tensor)
            return msp_fail(MSP_ERR_INTERNAL, "report: record %s claims tensors %zu..%zu of %zu",
                            rec->name ? rec->name : "?", rec->first_tensor,
                            rec->first_tensor + rec->n_tensors, res->n_tensors);
    }
    return MSP_OK;
}

msp_err cmp_report_begin(const msp_compare_result_t *res, const char *out_dir)
{
    if (!res || !out_dir)
        return msp_fail(MSP_ERR_USAGE, "report: no result or no output directory");
    msp_err rc = msp_mkdirs(out_dir);
    return rc != MSP_OK ? rc : cmp_report_check_ranges(res);
}

void cmp_source_free_part(const cmp_source_t *src, msp_compare_result_t *part)
{
    (void)src;
    msp_compare_result_free(part);
}

static msp_err cmp_tree_src_load(const cmp_source_t *src, size_t i, msp_compare_result_t **part,
                                 size_t *rec_base, size_t *ten_base)
{
    const cmp_tree_src_t *ts = src->ud;
    cmp_tree_part_info(ts->t, ts->parts[i], rec_base, ten_base, NULL, NULL);
    return cmp_tree_load(ts->t, ts->parts[i], part);
}

static msp_err cmp_feed_src_load(const cmp_source_t *src, size_t i, msp_compare_result_t **part,
                                 size_t *rec_base, size_t *ten_base)
{
    const cmp_tree_src_t *ts = src->ud;
    cmp_tree_part_info(ts->t, ts->parts[i], rec_base, ten_base, NULL, NULL);
    return cmp_feed_get(ts->feed, ts->reader, ts->parts[i], part);
}

static void cmp_feed_src_unload(const cmp_source_t *src, msp_compare_result_t *part)
{
    const cmp_tree_src_t *ts = src->ud;
    cmp_feed_put(ts->feed, ts->reader, part);
}

static const char *cmp_tree_src_reason(const cmp_source_t *src, size_t record)
{
    const cmp_tree_src_t *ts = src->ud;
    return cmp_tree_reason(ts->t, record);
}

msp_err cmp_tree_source(const msp_compare_tree_t *t, int64_t rank, cmp_tree_src_t *ts,
                        cmp_source_t *src)
{
    size_t np = cmp_tree_parts(t), n = 0, nrec = 0, nten = 0, total_r, total_t;
    ts->t = t;
    ts->feed = NULL;
    ts->reader = 0;
    if (!(ts->parts = calloc(np + 1, sizeof *ts->parts)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory writing the report");
    msp_compare_tree_totals(t, &total_r, &total_t, NULL);
    for (size_t i = 0; i < np; i++) {
        size_t rb, tb, rb2 = total_r, tb2 = total_t;
        int64_t r;
        cmp_tree_part_info(t, i, &rb, &tb, NULL, &r);
        if (i + 1 < np)
            cmp_tree_part_info(t, i + 1, &rb2, &tb2, NULL, NULL);
        if (rank >= 0 && r != rank)
            continue;
        ts->parts[n++] = i;
        nrec += rb2 - rb;
        nten += tb2 - tb;
    }
    *src = (cmp_source_t){msp_compare_tree_head(t),
                          nrec,
                          nten,
                          n,
                          cmp_tree_src_load,
                          cmp_source_free_part,
                          cmp_tree_src_reason,
                          cmp_tree_root_tensor(t),
                          ts};
    return MSP_OK;
}

msp_err cmp_tree_feed_source(const msp_compare_tree_t *t, int64_t rank, cmp_feed_t *f, int reader,
                             cmp_tree_src_t *ts, cmp_source_t *src)
{
    msp_err rc = cmp_tree_source(t, rank, ts, src);
    if (rc || !f)
        return rc;
    ts->feed = f;
    ts->reader = reader;
    src->load = cmp_feed_src_load;
    src->unload = cmp_feed_src_unload;
    return MSP_OK;
}

size_t rep_xml_escape(char *out, const char *text, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '&') {
            memcpy(out + n, "&amp;", 5);
            n += 5;
        } else if (c == '<') {
            memcpy(out + n, "&lt;", 4);
            n += 4;
        } else if (c == '>') {
            memcpy(out + n, "&gt;", 4);
            n += 4;
        } else if (c < 0x20 && c != '\t' && c != '\n') {
            memcpy(out + n, "_x00", 4);
            out[n + 4] = hex[c >> 4];
            out[n + 5] = hex[c & 15];
            out[n + 6] = '_';
            n += 7;
        } else {
            out[n++] = (char)c;
        }
    }
    return n;
}
