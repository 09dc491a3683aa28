/* msprobe's own output files, for compare --msprobe-outputs
 * (msprobe-compare(1), MSPROBE'S OUTPUTS): the details rows under the names
 * msprobe 8.3.3 and 26 give them (compare_result_rank{N}_{stamp}.csv or
 * .xlsx, one per rank; compare_result_{stamp} for two files), and -da's
 * diff_analyze_{nanoseconds}.json. The rows and columns are result.csv's
 * (msprobe's columns with ours beside them); only the names and the one-sheet
 * workbook are msprobe's. */
#include "msprobe/compare.h"

#include "rep_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the per-rank result files ---------------------------------------------- */

/* One file of the parts of rank (all parts when all is set). */
static msp_err msp_ms_file(const msp_compare_tree_t *t, const char *out_dir, const char *file,
                           int xlsx, int64_t rank, int all)
{
    cmp_tree_src_t ts;
    cmp_source_t src;
    if (cmp_tree_source(t, all ? -1 : rank, &ts, &src))
        return msp_fail(MSP_ERR_NOMEM, "out of memory writing %s/%s", out_dir, file);
    const msp_compare_result_t *head = src.head;
    msp_err rc;
    if (xlsx) {
        cmp_book_t b = {.rows = &src, .head = head, .zip64_rows = src.n_tensors, .details_only = 1};
        rc = cmp_write_book(out_dir, file, &b);
    } else {
        rc = cmp_csv_write(&src, out_dir, file);
    }
    free(ts.parts);
    return rc;
}

msp_err msp_report_tree_msprobe(const msp_compare_tree_t *t, const char *out_dir,
                                const msp_msprobe_outputs_t *o, char ***names, size_t *n)
{
    *names = NULL;
    *n = 0;
    const msp_compare_result_t *head = msp_compare_tree_head(t);
    if (!head || !out_dir || !o || !o->stamp)
        return msp_fail(MSP_ERR_USAGE, "report: no result or no output directory");
    msp_err rc = msp_mkdirs(out_dir);
    /* one file when a tag names it (two files, or one rank directory), or
     * when the result knows no rank */
    const char *tag = o->tag ? o->tag : head->n_ranks ? NULL : "";
    size_t files = tag ? 1 : head->n_ranks;
    char **v = rc ? NULL : calloc(files + 1, sizeof *v);
    if (!rc && !v)
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory writing the report in %s", out_dir);
    const char *ext = o->xlsx ? "xlsx" : "csv";
    for (size_t k = 0; !rc && k < files; k++) {
        int64_t rank = tag ? -1 : head->ranks[k].rank;
        v[k] = tag ? msp_asprintf("compare_result%s%s_%s.%s", *tag ? "_" : "", tag, o->stamp, ext)
                   : msp_asprintf("compare_result_rank%lld_%s.%s", (long long)rank, o->stamp, ext);
        if (!v[k]) {
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory writing the report in %s", out_dir);
            break;
        }
        *n = k + 1;
        rc = msp_ms_file(t, out_dir, v[k], o->xlsx, rank, tag != NULL);
    }
    *names = v;
    return rc;
}

/* ---- -da: diff_analyze_{ns}.json ---------------------------------------------- */

/* {"NPU max": .., "NPU min": .., "NPU mean": .., "NPU l2norm": ..}, as msprobe's
 * first-diff analysis lists a node's tensors (NaN as null). */
static cJSON *msp_da_metrics(const msp_tensor_cmp_t *t)
{
    cJSON *m = cJSON_CreateObject();
    const char *keys[] = {"NPU max", "NPU min", "NPU mean", "NPU l2norm"};
    const double vals[] = {t->npu_max, t->npu_min, t->npu_mean, t->npu_norm};
    for (size_t i = 0; m && i < 4; i++)
        if (!(isfinite(vals[i]) ? cJSON_AddNumberToObject(m, keys[i], vals[i])
                                : cJSON_AddNullToObject(m, keys[i]))) {
            cJSON_Delete(m);
            return NULL;
        }
    return m;
}

/* One node: {"op_name", "data_info": {"input": {..}, "output": {..}},
 * "stack_info"}, from rec and its rows in res (the part of the tree that
 * holds it: the head keeps only the rows the suspects name). */
static cJSON *msp_da_node(const msp_compare_result_t *res, const msp_record_cmp_t *rec)
{
    cJSON *node = cJSON_CreateObject(), *info = cJSON_CreateObject();
    cJSON *in = cJSON_CreateObject(), *out = cJSON_CreateObject();
    int ok = node && info && in && out && cJSON_AddStringToObject(node, "op_name", rec->name);
    size_t rl = strlen(rec->name);
    for (size_t k = 0; ok && k < rec->n_tensors; k++) {
        size_t ti = rec->first_tensor + k;
        const msp_tensor_cmp_t *t = ti < res->n_tensors ? &res->tensors[ti] : NULL;
        const char *tn = t ? (t->npu_name ? t->npu_name : t->bench_name) : NULL;
        if (!tn || strncmp(tn, rec->name, rl) || tn[rl] != '.')
            continue;
        cJSON *to = !strncmp(tn + rl + 1, "output", 6) ? out : in;
        cJSON *m = msp_da_metrics(t);
        ok = m && cJSON_AddItemToObject(to, tn, m);
    }
    ok = ok && cJSON_AddItemToObject(info, "input", in);
    in = ok ? NULL : in;
    ok = ok && cJSON_AddItemToObject(info, "output", out);
    out = ok ? NULL : out;
    ok = ok && cJSON_AddItemToObject(node, "data_info", info);
    info = ok ? NULL : info;
    ok = ok && (rec->npu_stack ? cJSON_AddStringToObject(node, "stack_info", rec->npu_stack) != NULL
                               : cJSON_AddNullToObject(node, "stack_info") != NULL);
    cJSON_Delete(in);
    cJSON_Delete(out);
    cJSON_Delete(info);
    if (!ok) {
        cJSON_Delete(node);
        return NULL;
    }
    return node;
}

/* The node of the head's record r, read from the tree's part of its step
 * and rank (the head's copy when the part cannot be found). NULL: out of
 * memory, or the part could not be loaded (the error recorded). */
static cJSON *msp_da_node_of(const msp_compare_tree_t *t, const msp_record_cmp_t *r, msp_err *rc)
{
    size_t np = cmp_tree_parts(t);
    for (size_t i = 0; i < np; i++) {
        int64_t step, rank;
        cmp_tree_part_info(t, i, NULL, NULL, &step, &rank);
        if (step != r->step || rank != r->rank)
            continue;
        msp_compare_result_t *part = NULL;
        if ((*rc = cmp_tree_load(t, i, &part)))
            return NULL;
        cJSON *node = NULL;
        for (size_t k = 0; k < part->n_records && !node; k++)
            if (part->records[k].name && !strcmp(part->records[k].name, r->name))
                node = msp_da_node(part, &part->records[k]);
        msp_compare_result_free(part);
        if (node)
            return node;
        break;
    }
    return msp_da_node(msp_compare_tree_head(t), r);
}

/* {"rank_R": [node]} onto root. */
static int msp_da_add(cJSON *root, const msp_compare_tree_t *t, const msp_record_cmp_t *r,
                      int64_t rank, msp_err *rc)
{
    char key[32];
    snprintf(key, sizeof key, "rank_%lld", (long long)(rank < 0 ? 0 : rank));
    cJSON *list = cJSON_CreateArray(), *node = list ? msp_da_node_of(t, r, rc) : NULL;
    int ok = list && node && cJSON_AddItemToArray(list, node);
    if (!ok)
        cJSON_Delete(node);
    ok = ok && cJSON_AddItemToObject(root, key, list);
    if (!ok)
        cJSON_Delete(list);
    return ok;
}

msp_err msp_report_diff_analyze(const msp_compare_tree_t *t, const char *out_dir, const char *file,
                                int *written)
{
    *written = 0;
    const msp_compare_result_t *head = msp_compare_tree_head(t);
    if (!head || !out_dir)
        return msp_fail(MSP_ERR_USAGE, "report: no result or no output directory");
    cJSON *root = cJSON_CreateObject();
    int any = 0, ok = root != NULL;
    msp_err rc = MSP_OK;
    /* each rank's first error of its own, as msprobe names each rank's first
     * diff node; one rank (or no rank summary): the root cause */
    for (size_t k = 0; ok && k < head->n_ranks; k++) {
        const msp_rank_summary_t *r = &head->ranks[k];
        if (r->origin != MSP_ORIGIN_INTRODUCED || r->first_suspect < 0 ||
            (size_t)r->first_suspect >= head->n_suspects)
            continue;
        long rec = head->suspects[r->first_suspect].record;
        if (rec < 0 || (size_t)rec >= head->n_records)
            continue;
        any += ok = msp_da_add(root, t, &head->records[rec], r->rank, &rc);
    }
    if (ok && !any && head->root_record >= 0 && (size_t)head->root_record < head->n_records) {
        const msp_record_cmp_t *rec = &head->records[head->root_record];
        any += ok = msp_da_add(root, t, rec, rec->rank, &rc);
    }
    char *text = ok && any ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (rc || !ok || (any && !text)) {
        free(text);
        return rc ? rc : msp_fail(MSP_ERR_NOMEM, "out of memory writing %s/%s", out_dir, file);
    }
    if (!any) /* msprobe writes the file only when it finds a diff node */
        return MSP_OK;
    char *path = msp_asprintf("%s/%s", out_dir, file);
    rc = path ? msp_mkdirs(out_dir) : msp_fail(MSP_ERR_NOMEM, "out of memory");
    if (!rc)
        rc = msp_write_file_atomic(path, text, strlen(text));
    *written = rc == MSP_OK;
    free(path);
    free(text);
    return rc;
}
