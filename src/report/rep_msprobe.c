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

/* One file of the parts of rank (all parts when all is set), taken from f
 * as its reader when f is set. */
static msp_err msp_ms_file(const msp_compare_tree_t *t, const char *out_dir, const char *file,
                           int xlsx, int64_t rank, int all, cmp_feed_t *f, int reader)
{
    cmp_tree_src_t ts;
    cmp_source_t src;
    if (cmp_tree_feed_source(t, all ? -1 : rank, f, reader, &ts, &src))
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

int rep_tree_msprobe_fed(const msp_compare_tree_t *t, const msp_msprobe_outputs_t *o)
{
    const msp_compare_result_t *head = msp_compare_tree_head(t);
    return o->tag || !head->n_ranks || rep_tree_rank_parts(t);
}

msp_err msp_report_tree_msprobe(const msp_compare_tree_t *t, const char *out_dir,
                                const msp_msprobe_outputs_t *o, char ***names, size_t *n)
{
    return rep_tree_msprobe(t, out_dir, o, names, n, NULL, -1);
}

msp_err rep_tree_msprobe(const msp_compare_tree_t *t, const char *out_dir,
                         const msp_msprobe_outputs_t *o, char ***names, size_t *n, cmp_feed_t *f,
                         int reader)
{
    *names = NULL;
    *n = 0;
    const msp_compare_result_t *head = msp_compare_tree_head(t);
    if (!head || !out_dir || !o || !o->stamp) {
        if (f)
            cmp_feed_leave(f, reader);
        return msp_fail(MSP_ERR_USAGE, "report: no result or no output directory");
    }
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
        rc = msp_ms_file(t, out_dir, v[k], o->xlsx, rank, tag != NULL, f, reader);
    }
    *names = v;
    if (f)
        cmp_feed_leave(f, reader);
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

/* ---- what -da names, and the parts that hold it ------------------------------- */

struct rep_da_target {
    const msp_record_cmp_t *rec; /* the head's copy */
    int64_t rank;                /* its key, rank_R */
    size_t part;                 /* the part of its step and rank, SIZE_MAX: none */
    cJSON *node;
};

static msp_err rep_da_add(rep_da_plan_t *p, const msp_compare_tree_t *t, const msp_record_cmp_t *r,
                          int64_t rank)
{
    struct rep_da_target *v = realloc(p->v, (p->n + 1) * sizeof *v);
    if (!v)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    p->v = v;
    v[p->n] = (struct rep_da_target){r, rank, SIZE_MAX, NULL};
    for (size_t i = 0; i < cmp_tree_parts(t); i++) {
        int64_t step, prank;
        cmp_tree_part_info(t, i, NULL, NULL, &step, &prank);
        if (step == r->step && prank == r->rank) {
            v[p->n].part = i;
            break;
        }
    }
    p->n++;
    return MSP_OK;
}

msp_err rep_da_plan(const msp_compare_tree_t *t, rep_da_plan_t *p)
{
    memset(p, 0, sizeof *p);
    const msp_compare_result_t *head = msp_compare_tree_head(t);
    msp_err rc = MSP_OK;
    /* each rank's first error of its own, as msprobe names each rank's first
     * diff node; one rank (or no rank summary): the root cause */
    for (size_t k = 0; head && !rc && k < head->n_ranks; k++) {
        const msp_rank_summary_t *r = &head->ranks[k];
        if (r->origin != MSP_ORIGIN_INTRODUCED || r->first_suspect < 0 ||
            (size_t)r->first_suspect >= head->n_suspects)
            continue;
        long rec = head->suspects[r->first_suspect].record;
        if (rec >= 0 && (size_t)rec < head->n_records)
            rc = rep_da_add(p, t, &head->records[rec], r->rank);
    }
    if (head && !rc && !p->n && head->root_record >= 0 &&
        (size_t)head->root_record < head->n_records) {
        const msp_record_cmp_t *rec = &head->records[head->root_record];
        rc = rep_da_add(p, t, rec, rec->rank);
    }
    if (!rc && p->n && !(p->parts = calloc(p->n, sizeof *p->parts)))
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < p->n; i++)
        if (p->v[i].part != SIZE_MAX)
            p->parts[p->n_parts++] = p->v[i].part;
    if (p->n_parts)
        qsort(p->parts, p->n_parts, sizeof *p->parts, msp_size_cmp);
    size_t u = 0; /* distinct, in the tree's order: the order the feed gives them */
    for (size_t i = 0; i < p->n_parts; i++)
        if (!u || p->parts[u - 1] != p->parts[i])
            p->parts[u++] = p->parts[i];
    p->n_parts = u;
    if (rc)
        rep_da_plan_free(p);
    return rc;
}

void rep_da_plan_free(rep_da_plan_t *p)
{
    for (size_t i = 0; p->v && i < p->n; i++)
        cJSON_Delete(p->v[i].node);
    free(p->v);
    free(p->parts);
    memset(p, 0, sizeof *p);
}

int rep_da_wants(const rep_da_plan_t *p, size_t part)
{
    return p->n_parts && bsearch(&part, p->parts, p->n_parts, sizeof *p->parts, msp_size_cmp);
}

/* The nodes of the targets of each planned part, read from it (from f as
 * `reader` when f is set); a target whose part is gone (or lacks it) gets
 * the head's copy. NULL node: out of memory. */
static msp_err rep_da_nodes(const msp_compare_tree_t *t, rep_da_plan_t *p, cmp_feed_t *f,
                            int reader)
{
    msp_err rc = MSP_OK;
    for (size_t k = 0; !rc && k < p->n_parts; k++) {
        msp_compare_result_t *part = NULL;
        if ((rc = f ? cmp_feed_get(f, reader, p->parts[k], &part)
                    : cmp_tree_load(t, p->parts[k], &part)))
            break;
        for (size_t i = 0; i < p->n; i++) {
            if (p->v[i].part != p->parts[k])
                continue;
            for (size_t r = 0; r < part->n_records && !p->v[i].node; r++)
                if (part->records[r].name && !strcmp(part->records[r].name, p->v[i].rec->name))
                    p->v[i].node = msp_da_node(part, &part->records[r]);
        }
        if (f)
            cmp_feed_put(f, reader, part);
        else
            msp_compare_result_free(part);
    }
    if (f)
        cmp_feed_leave(f, reader);
    for (size_t i = 0; !rc && i < p->n; i++)
        if (!p->v[i].node)
            p->v[i].node = msp_da_node(msp_compare_tree_head(t), p->v[i].rec);
    return rc;
}

msp_err rep_da_write(const msp_compare_tree_t *t, rep_da_plan_t *p, const char *out_dir,
                     const char *file, int *written, cmp_feed_t *f, int reader)
{
    *written = 0;
    msp_err rc = rep_da_nodes(t, p, f, reader);
    cJSON *root = rc ? NULL : cJSON_CreateObject();
    int ok = root != NULL;
    /* {"rank_R": [node]} for each, in the order they were named */
    for (size_t i = 0; ok && i < p->n; i++) {
        char key[32];
        snprintf(key, sizeof key, "rank_%lld", (long long)(p->v[i].rank < 0 ? 0 : p->v[i].rank));
        cJSON *list = cJSON_CreateArray();
        ok = list && p->v[i].node && cJSON_AddItemToArray(list, p->v[i].node);
        if (ok)
            p->v[i].node = NULL; /* the list's now */
        ok = ok && cJSON_AddItemToObject(root, key, list);
        if (!ok)
            cJSON_Delete(list);
    }
    char *text = ok && p->n ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (rc || !ok || (p->n && !text)) {
        free(text);
        return rc ? rc : msp_fail(MSP_ERR_NOMEM, "out of memory writing %s/%s", out_dir, file);
    }
    if (!p->n) /* msprobe writes the file only when it finds a diff node */
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

msp_err msp_report_diff_analyze(const msp_compare_tree_t *t, const char *out_dir, const char *file,
                                int *written)
{
    *written = 0;
    if (!msp_compare_tree_head(t) || !out_dir)
        return msp_fail(MSP_ERR_USAGE, "report: no result or no output directory");
    rep_da_plan_t p;
    msp_err rc = rep_da_plan(t, &p);
    if (!rc)
        rc = rep_da_write(t, &p, out_dir, file, written, NULL, -1);
    rep_da_plan_free(&p);
    return rc;
}
