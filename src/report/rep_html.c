/* result.html: the compare result as one page that opens offline.
 *
 * This file turns the result into one JSON object; the page's script
 * (rep_html.js, embedded at build time with its style) draws it with
 * Chart.js (embedded by common's msp_html_write_page). What the page holds is
 * bounded whatever the compare size: at most max_points error-flow points per
 * step and rank (past that, per bucket of execution order the record with the
 * largest output error, plus every suspect), at most max_records records
 * listed (the charted ones and the suspects first, then the largest errors),
 * and per suspect card a sample of at most MSP_SAMPLE_POINTS element pairs. The
 * page says when it aggregated. */
#include "msprobe/compare.h"

#include "rep_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Generated from rep_html.js / .css (src/compare/CMakeLists.txt). */
extern const char msp_cmp_html_js[];
extern const char msp_cmp_html_css[];

#define CMP_HTML_MAX_POINTS 4000
#define CMP_HTML_MAX_RECORDS 150000
#define CMP_HTML_MAX_CARDS 50
#define CMP_HTML_TREND_TOP 10
/* Digits of the bulk numbers (chart, tree); suspect cards carry exact doubles. */
#define CMP_HTML_DIGITS 7
#define CMP_HTML_EXACT 17

enum { CMP_DIR_FORWARD = 0, CMP_DIR_BACKWARD = 1, CMP_DIR_OPTIMIZER = 2 };

static int cmp_is_backward(const char *name)
{
    const char *p = name;
    while ((p = strstr(p, "backward")) != NULL) {
        if ((p == name || p[-1] == '.') && (p[8] == '\0' || p[8] == '.'))
            return 1;
        p += 8;
    }
    return 0;
}

typedef struct cmp_html {
    const msp_compare_result_t *res;
    msp_html_opts_t opts;
    /* per record: direction, listed position (-1 not listed), charted */
    unsigned char *dir, *charted;
    long *pos;
    size_t *listed; /* listed record indexes, in result order */
    size_t n_listed;
    /* blocks of one step and rank: [start, end) in res->records */
    size_t *blk_start, *blk_end;
    size_t n_blk;
} cmp_html_t;

/* Optimizer records: forward API records after the last backward record of
 * their step and rank (what optimizer.step() runs). */
static void cmp_html_directions(cmp_html_t *h)
{
    const msp_compare_result_t *res = h->res;
    for (size_t b = 0; b < h->n_blk; b++) {
        size_t last_bwd = SIZE_MAX;
        for (size_t i = h->blk_start[b]; i < h->blk_end[b]; i++) {
            h->dir[i] = cmp_is_backward(res->records[i].name) ? CMP_DIR_BACKWARD : CMP_DIR_FORWARD;
            if (h->dir[i] == CMP_DIR_BACKWARD)
                last_bwd = i;
        }
        for (size_t i = last_bwd == SIZE_MAX ? h->blk_end[b] : last_bwd + 1; i < h->blk_end[b]; i++)
            h->dir[i] = CMP_DIR_OPTIMIZER;
    }
}

static int cmp_html_blocks(cmp_html_t *h)
{
    const msp_compare_result_t *res = h->res;
    size_t cap = 0;
    for (size_t i = 0; i < res->n_records; i++) {
        if (i == 0 || res->records[i].step != res->records[i - 1].step ||
            res->records[i].rank != res->records[i - 1].rank) {
            size_t cap2 = cap;
            size_t *s = msp_grow(h->blk_start, &cap, h->n_blk, sizeof *s, 16);
            if (!s)
                return -1;
            h->blk_start = s;
            size_t *e = msp_grow(h->blk_end, &cap2, h->n_blk, sizeof *e, 16);
            if (!e)
                return -1;
            h->blk_end = e;
            if (h->n_blk)
                h->blk_end[h->n_blk - 1] = i;
            h->blk_start[h->n_blk++] = i;
        }
    }
    if (h->n_blk)
        h->blk_end[h->n_blk - 1] = res->n_records;
    return 0;
}

/* Chart points per block: all records with an output error when they fit,
 * else per bucket the largest output error; suspects always. */
static void cmp_html_chart(cmp_html_t *h)
{
    const msp_compare_result_t *res = h->res;
    size_t maxp = h->opts.max_points;
    for (size_t b = 0; b < h->n_blk; b++) {
        size_t n = h->blk_end[b] - h->blk_start[b];
        size_t buckets = n <= maxp ? n : maxp;
        for (size_t k = 0; k < buckets; k++) {
            size_t lo = h->blk_start[b] + k * n / buckets;
            size_t hi = h->blk_start[b] + (k + 1) * n / buckets;
            size_t best = SIZE_MAX;
            for (size_t i = lo; i < hi; i++) {
                double e = res->records[i].out_err;
                if (!isnan(e) && (best == SIZE_MAX || e > res->records[best].out_err))
                    best = i;
            }
            if (best != SIZE_MAX)
                h->charted[best] = 1;
        }
    }
    for (size_t s = 0; s < res->n_suspects; s++)
        if (res->suspects[s].record >= 0 && (size_t)res->suspects[s].record < res->n_records)
            h->charted[res->suspects[s].record] = 1;
}

static int cmp_by_err_desc(const void *a, const void *b, void *ud)
{
    const msp_compare_result_t *res = ud;
    double x = res->records[*(const size_t *)a].out_err;
    double y = res->records[*(const size_t *)b].out_err;
    if (isnan(x) != isnan(y))
        return isnan(x) ? 1 : -1;
    if (x > y)
        return -1;
    if (x < y)
        return 1;
    return 0;
}

/* Listed records: every one when they fit; else the charted ones, then the
 * largest output errors, kept in result order. */
static int cmp_html_listing(cmp_html_t *h)
{
    const msp_compare_result_t *res = h->res;
    size_t n = res->n_records, cap = h->opts.max_records;
    unsigned char *keep = calloc(n ? n : 1, 1);
    if (!keep)
        return -1;
    if (n <= cap) {
        memset(keep, 1, n);
    } else {
        size_t kept = 0;
        for (size_t i = 0; i < n; i++)
            if (h->charted[i]) {
                keep[i] = 1;
                kept++;
            }
        size_t *idx = malloc(n * sizeof *idx);
        if (!idx) {
            free(keep);
            return -1;
        }
        for (size_t i = 0; i < n; i++)
            idx[i] = i;
        qsort_r(idx, n, sizeof *idx, cmp_by_err_desc, (void *)res);
        for (size_t k = 0; k < n && kept < cap; k++)
            if (!keep[idx[k]]) {
                keep[idx[k]] = 1;
                kept++;
            }
        free(idx);
    }
    h->listed = malloc((n ? n : 1) * sizeof *h->listed);
    if (!h->listed) {
        free(keep);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        h->pos[i] = keep[i] ? (long)h->n_listed : -1;
        if (keep[i])
            h->listed[h->n_listed++] = i;
    }
    free(keep);
    return 0;
}

static void cmp_key(msp_buf_t *b, const char *k)
{
    msp_buf_json_str(b, k);
    msp_buf_put(b, ":", 1);
}

static int cmp_parent_cmp(const void *a, const void *b, void *ud)
{
    const msp_compare_result_t *res = ud;
    return strcmp(res->records[*(const size_t *)a].parent, res->records[*(const size_t *)b].parent);
}

/* "pnames": the distinct parent modules of the listed records, and "pidx":
 * each listed record's parent as an index into them (-1: none). By name, so
 * that the tree can show a module even when its own record is not compared
 * (-l api). */
static int cmp_html_parents(msp_buf_t *b, const cmp_html_t *h, long *pidx)
{
    const msp_compare_result_t *res = h->res;
    size_t *by = malloc((h->n_listed ? h->n_listed : 1) * sizeof *by), n = 0;
    if (!by)
        return -1;
    for (size_t k = 0; k < h->n_listed; k++) {
        pidx[h->listed[k]] = -1;
        if (res->records[h->listed[k]].parent)
            by[n++] = h->listed[k];
    }
    qsort_r(by, n, sizeof *by, cmp_parent_cmp, (void *)res);
    cmp_key(b, "pnames");
    msp_buf_put(b, "[", 1);
    long id = -1;
    for (size_t k = 0; k < n; k++) {
        if (k == 0 || strcmp(res->records[by[k]].parent, res->records[by[k - 1]].parent) != 0) {
            if (++id)
                msp_buf_put(b, ",", 1);
            msp_buf_json_str(b, res->records[by[k]].parent);
        }
        pidx[by[k]] = id;
    }
    msp_buf_puts(b, "],");
    free(by);
    return 0;
}

/* ---- JSON ------------------------------------------------------------- */

/* One column of the listed records: "key":[v, ...]. */
typedef enum { COL_STR, COL_INT, COL_NUM } cmp_col_kind_t;

static void cmp_col(msp_buf_t *b, const cmp_html_t *h, const char *key, cmp_col_kind_t kind,
                    const void *base, size_t stride, int digits)
{
    cmp_key(b, key);
    msp_buf_put(b, "[", 1);
    for (size_t k = 0; k < h->n_listed && !b->oom; k++) {
        const char *p = (const char *)base + h->listed[k] * stride;
        if (k)
            msp_buf_put(b, ",", 1);
        if (kind == COL_STR)
            msp_buf_json_str(b, *(char *const *)p);
        else if (kind == COL_INT)
            msp_buf_json_int(b, (long long)*(const int64_t *)p);
        else
            msp_buf_json_num(b, *(const double *)p, digits);
    }
    msp_buf_puts(b, "],");
}

/* v's values of the listed records, comma-separated */
static void cmp_listed_ints(msp_buf_t *b, const cmp_html_t *h, const long *v)
{
    for (size_t k = 0; k < h->n_listed && !b->oom; k++) {
        if (k)
            msp_buf_put(b, ",", 1);
        msp_buf_json_int(b, v[h->listed[k]]);
    }
}

static void cmp_col_small(msp_buf_t *b, const cmp_html_t *h, const char *key, const long *v)
{
    cmp_key(b, key);
    msp_buf_put(b, "[", 1);
    cmp_listed_ints(b, h, v);
    msp_buf_puts(b, "],");
}

static void cmp_html_records(msp_buf_t *b, const cmp_html_t *h, long *tmp)
{
    const msp_compare_result_t *res = h->res;
    const msp_record_cmp_t *r0 = res->records;
    size_t st = sizeof *r0;
    cmp_key(b, "rec");
    msp_buf_put(b, "{", 1);
    for (size_t i = 0; i < res->n_records; i++)
        tmp[i] = (long)i;
    cmp_col_small(b, h, "id", tmp);
    cmp_col(b, h, "name", COL_STR, &r0->name, st, 0);
    cmp_col(b, h, "step", COL_INT, &r0->step, st, 0);
    cmp_col(b, h, "rank", COL_INT, &r0->rank, st, 0);
    cmp_col(b, h, "order", COL_INT, &r0->order, st, 0);
    for (size_t i = 0; i < res->n_records; i++)
        tmp[i] = h->dir[i];
    cmp_col_small(b, h, "dir", tmp);
    cmp_col(b, h, "in", COL_NUM, &r0->in_err, st, CMP_HTML_DIGITS);
    cmp_col(b, h, "out", COL_NUM, &r0->out_err, st, CMP_HTML_DIGITS);
    cmp_col(b, h, "floor", COL_NUM, &r0->floor, st, CMP_HTML_DIGITS);
    cmp_col(b, h, "cos", COL_NUM, &r0->worst_cosine, st, CMP_HTML_DIGITS + 3);
    cmp_col(b, h, "mae", COL_NUM, &r0->worst_max_abs, st, CMP_HTML_DIGITS);
    for (size_t i = 0; i < res->n_records; i++)
        tmp[i] = (long)r0[i].cause;
    cmp_col_small(b, h, "cause", tmp);
    for (size_t i = 0; i < res->n_records; i++)
        tmp[i] = (long)r0[i].verdict;
    cmp_col_small(b, h, "verdict", tmp);
    for (size_t i = 0; i < res->n_records; i++)
        tmp[i] = r0[i].is_root_cause ? -1 : r0[i].suspect_rank;
    cmp_col_small(b, h, "sus", tmp);
    for (size_t i = 0; i < res->n_records; i++)
        tmp[i] = h->charted[i];
    cmp_col_small(b, h, "charted", tmp);
    if (cmp_html_parents(b, h, tmp) != 0) {
        b->oom = 1;
        return;
    }
    cmp_key(b, "pidx");
    msp_buf_put(b, "[", 1);
    cmp_listed_ints(b, h, tmp);
    msp_buf_puts(b, "]},");
}

static void cmp_tensor_json(msp_buf_t *b, const msp_compare_result_t *res,
                            const msp_record_cmp_t *rec, size_t ti)
{
    const msp_tensor_cmp_t *t = &res->tensors[ti];
    const char *name = t->npu_name ? t->npu_name : t->bench_name;
    size_t rl = strlen(rec->name);
    const char *role = name && strncmp(name, rec->name, rl) == 0 && name[rl] == '.'
                           ? name + rl + 1
                           : (name ? name : "");
    msp_buf_put(b, "{", 1);
    cmp_key(b, "row");
    msp_buf_json_int(b, (long long)ti);
    msp_buf_put(b, ",", 1);
    cmp_key(b, "name");
    msp_buf_json_str(b, name);
    msp_buf_put(b, ",", 1);
    cmp_key(b, "role");
    msp_buf_json_str(b, role);
    msp_buf_put(b, ",", 1);
    cmp_key(b, "out");
    msp_buf_puts(b, t->is_output ? "1," : "0,");
    cmp_key(b, "dtype");
    msp_buf_json_str(b, *t->npu_dtype ? t->npu_dtype : t->bench_dtype);
    msp_buf_put(b, ",", 1);
    cmp_key(b, "bdtype");
    msp_buf_json_str(b, t->bench_dtype);
    msp_buf_put(b, ",", 1);
    cmp_key(b, "shape");
    msp_buf_json_str(b, *t->npu_shape ? t->npu_shape : t->bench_shape);
    msp_buf_put(b, ",", 1);
    const struct {
        const char *k;
        double v;
    } nums[] = {{"rel", t->rel_err},     {"cos", t->cosine},       {"mae", t->max_abs_err},
                {"mre", t->max_rel_err}, {"maxdiff", t->max_diff}, {"normrel", t->norm_rel_diff},
                {"nmax", t->npu_max},    {"nmin", t->npu_min},     {"bmax", t->bench_max},
                {"bmin", t->bench_min}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        cmp_key(b, nums[i].k);
        msp_buf_json_num(b, nums[i].v, CMP_HTML_EXACT);
        msp_buf_put(b, ",", 1);
    }
    cmp_key(b, "verdict");
    msp_buf_json_str(b, cmp_verdict_text(t->verdict));
    msp_buf_put(b, ",", 1);
    cmp_key(b, "msg");
    msp_buf_json_str(b, t->err_message);
    if (t->producer) {
        msp_buf_put(b, ",", 1);
        cmp_key(b, "producer");
        msp_buf_json_str(b, t->producer);
    }
    if (t->gap) {
        msp_buf_put(b, ",", 1);
        cmp_key(b, "gap");
        msp_buf_json_int(b, t->gap);
    }
    msp_buf_put(b, "}", 1);
}

static void cmp_sample_json(msp_buf_t *b, const msp_tensor_sample_t *s)
{
    if (s->why) {
        cmp_key(b, "sample_why");
        msp_buf_json_str(b, s->why);
        msp_buf_put(b, ",", 1);
        return;
    }
    cmp_key(b, "sample");
    msp_buf_printf(b,
                   "{\"numel\":%llu,\"counted\":%llu,\"every\":%llu,\"stride\":%llu,\"lo\":%d,"
                   "\"per\":%d,\"zero\":%llu,\"below\":%llu,\"above\":%llu,\"nonfinite\":%llu,"
                   "\"bins\":[",
                   (unsigned long long)s->numel, (unsigned long long)s->counted,
                   (unsigned long long)s->every, (unsigned long long)s->stride, MSP_SAMPLE_LO_EXP,
                   MSP_SAMPLE_PER_DECADE, (unsigned long long)s->zero, (unsigned long long)s->below,
                   (unsigned long long)s->above, (unsigned long long)s->nonfinite);
    for (int k = 0; k < MSP_SAMPLE_BINS; k++)
        msp_buf_printf(b, k ? ",%llu" : "%llu", (unsigned long long)s->bins[k]);
    msp_buf_puts(b, "],\"npu\":[");
    for (size_t i = 0; i < s->n; i++) {
        if (i)
            msp_buf_put(b, ",", 1);
        msp_buf_json_num(b, s->npu[i], 9);
    }
    msp_buf_puts(b, "],\"bench\":[");
    for (size_t i = 0; i < s->n; i++) {
        if (i)
            msp_buf_put(b, ",", 1);
        msp_buf_json_num(b, s->bench[i], 9);
    }
    msp_buf_puts(b, "]},");
}

/* The suspect cards: the marked suspects (or opts.top), at most CMP_HTML_MAX_CARDS. */
static msp_err cmp_html_suspects(msp_buf_t *b, const cmp_html_t *h)
{
    const msp_compare_result_t *res = h->res;
    size_t n = 0;
    if (h->opts.top > 0) {
        n = (size_t)h->opts.top;
    } else {
        for (size_t i = 0; i < res->n_suspects; i++)
            if (res->suspects[i].record >= 0 && (size_t)res->suspects[i].record < res->n_records &&
                res->records[res->suspects[i].record].suspect_rank > 0)
                n = i + 1;
    }
    if (n > res->n_suspects)
        n = res->n_suspects;
    for (size_t i = 0; i < n; i++) /* a suspect names a record of the result */
        if (res->suspects[i].record < 0 || (size_t)res->suspects[i].record >= res->n_records)
            return msp_fail(MSP_ERR_INTERNAL, "report: suspect %zu names record %ld of %zu", i + 1,
                            res->suspects[i].record, res->n_records);
    if (n > CMP_HTML_MAX_CARDS)
        n = CMP_HTML_MAX_CARDS;
    /* each card's sample: the one the compare took while it had the files
     * open, else one read again from the dumps (when they are named) */
    const msp_tensor_sample_t **card = NULL;
    msp_tensor_sample_t *samples = NULL;
    long *rows = NULL;
    size_t n_read = 0;
    msp_err rc = MSP_OK;
    if (n && !res->stats_mode) {
        card = calloc(n, sizeof *card);
        samples = calloc(n, sizeof *samples);
        rows = calloc(n, sizeof *rows);
        if (!card || !samples || !rows) {
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory writing result.html");
            goto cleanup;
        }
        for (size_t i = 0; i < n; i++) {
            for (size_t k = 0; k < res->n_samples && !card[i]; k++)
                if (res->samples[k].tensor == res->suspects[i].tensor)
                    card[i] = &res->samples[k];
            if (!card[i] && h->opts.bench && h->opts.cmp)
                rows[n_read++] = res->suspects[i].tensor;
        }
        if (n_read && (rc = msp_compare_sample(h->opts.bench, h->opts.cmp, res, rows, n_read,
                                               MSP_SAMPLE_POINTS, samples)) != MSP_OK)
            goto cleanup;
        for (size_t i = 0, k = 0; i < n && k < n_read; i++)
            if (!card[i] && res->suspects[i].tensor == samples[k].tensor)
                card[i] = &samples[k++];
    }
    cmp_key(b, "suspects");
    msp_buf_put(b, "[", 1);
    for (size_t i = 0; i < n && !b->oom; i++) {
        const msp_suspect_t *s = &res->suspects[i];
        const msp_record_cmp_t *rec = &res->records[s->record];
        if (i)
            msp_buf_put(b, ",", 1);
        msp_buf_put(b, "{", 1);
        msp_buf_printf(b,
                       "\"place\":%zu,\"rec\":%ld,\"recid\":%ld,\"tensor\":%ld,\"gap\":%d,"
                       "\"stats\":%d,",
                       i + 1, h->pos[s->record], s->record, s->tensor, s->is_gap, s->from_stats);
        cmp_key(b, "name");
        msp_buf_json_str(b, rec->name);
        msp_buf_put(b, ",", 1);
        const struct {
            const char *k;
            double v;
        } nums[] = {{"in", s->in_err},
                    {"out", s->out_err},
                    {"amp", s->amplification},
                    {"score", s->score},
                    {"floor", rec->floor}};
        for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) {
            cmp_key(b, nums[k].k);
            msp_buf_json_num(b, nums[k].v, CMP_HTML_EXACT);
            msp_buf_put(b, ",", 1);
        }
        cmp_key(b, "reason");
        msp_buf_json_str(b, s->reason);
        msp_buf_put(b, ",", 1);
        /* Optional fields: present only when the dump or compare has them. */
        if (rec->npu_stack) {
            cmp_key(b, "call_site");
            msp_buf_json_str(b, rec->npu_stack);
            msp_buf_put(b, ",", 1);
        }
        if (rec->parent) {
            cmp_key(b, "module");
            msp_buf_json_str(b, rec->parent);
            msp_buf_put(b, ",", 1);
        }
        if (rec->replay != MSP_RV_NONE) {
            /* what replay decided, as the summary sheet's Replay column says it */
            static const char *const what[] = {"", "introduced", "inherited", "not replayable",
                                               "not replayed (budget)"};
            char *text = msp_asprintf("%s%s%s", what[rec->replay],
                                      rec->replay_note && *rec->replay_note ? ": " : "",
                                      rec->replay_note ? rec->replay_note : "");
            cmp_key(b, "replay");
            msp_buf_json_str(b, text ? text : what[rec->replay]);
            msp_buf_put(b, ",", 1);
            free(text);
        }
        if (rec->arg_diff) {
            cmp_key(b, "changed_argument");
            msp_buf_json_str(b, rec->arg_diff);
            msp_buf_put(b, ",", 1);
        }
        if (card && card[i])
            cmp_sample_json(b, card[i]);
        cmp_key(b, "rows");
        msp_buf_put(b, "[", 1);
        for (size_t k = 0; k < rec->n_tensors; k++) {
            if (k)
                msp_buf_put(b, ",", 1);
            cmp_tensor_json(b, res, rec, rec->first_tensor + k);
        }
        msp_buf_puts(b, "]}");
    }
    msp_buf_puts(b, "],");
cleanup:
    for (size_t i = 0; samples && i < n_read; i++)
        msp_tensor_sample_free(&samples[i]);
    free(samples);
    free(rows);
    free(card);
    return rc;
}

static void cmp_html_series(msp_buf_t *b, const cmp_html_t *h)
{
    const msp_compare_result_t *res = h->res;
    cmp_key(b, "series");
    msp_buf_put(b, "[", 1);
    for (size_t k = 0; k < h->n_blk && !b->oom; k++) {
        size_t s = h->blk_start[k], e = h->blk_end[k];
        msp_buf_printf(b,
                       "%s{\"step\":%lld,\"rank\":%lld,\"records\":%zu,\"aggregated\":%d,"
                       "\"points\":[",
                       k ? "," : "", (long long)res->records[s].step,
                       (long long)res->records[s].rank, e - s, e - s > h->opts.max_points ? 1 : 0);
        int first = 1;
        for (size_t i = s; i < e; i++)
            if (h->charted[i] && h->pos[i] >= 0) {
                if (!first)
                    msp_buf_put(b, ",", 1);
                msp_buf_json_int(b, h->pos[i]);
                first = 0;
            }
        msp_buf_puts(b, "]}");
    }
    msp_buf_puts(b, "],");
}

/* Across steps: per rank, the records with the largest output error in any
 * step (and every suspect's record), followed by name through the steps. */
static msp_err cmp_html_trend(msp_buf_t *b, const cmp_html_t *h)
{
    const msp_compare_result_t *res = h->res;
    int64_t *steps = NULL;
    size_t n_steps = 0, cap = 0;
    for (size_t k = 0; k < h->n_blk; k++) {
        int64_t st = res->records[h->blk_start[k]].step;
        size_t j = 0;
        while (j < n_steps && steps[j] != st)
            j++;
        if (j == n_steps) {
            int64_t *ns = msp_grow(steps, &cap, n_steps, sizeof *ns, 8);
            if (!ns) {
                free(steps);
                return msp_fail(MSP_ERR_NOMEM, "out of memory writing result.html");
            }
            steps = ns;
            steps[n_steps++] = st;
        }
    }
    cmp_key(b, "trend");
    msp_buf_puts(b, "{\"steps\":[");
    for (size_t j = 0; j < n_steps; j++)
        msp_buf_printf(b, j ? ",%lld" : "%lld", (long long)steps[j]);
    msp_buf_puts(b, "],\"lines\":[");
    size_t *top = NULL;
    if (n_steps > 1 && res->n_records) {
        size_t want = CMP_HTML_TREND_TOP + 5, nt = 0;
        top = calloc(want, sizeof *top);
        size_t *idx = malloc(res->n_records * sizeof *idx);
        if (!top || !idx) {
            free(idx);
            free(top);
            free(steps);
            return msp_fail(MSP_ERR_NOMEM, "out of memory writing result.html");
        }
        for (size_t s = 0; s < res->n_suspects && nt < 5; s++) {
            long r = res->suspects[s].record;
            int dup = r < 0 || (size_t)r >= res->n_records;
            for (size_t j = 0; j < nt && !dup; j++)
                dup |= strcmp(res->records[top[j]].name, res->records[r].name) == 0 &&
                       res->records[top[j]].rank == res->records[r].rank;
            if (!dup)
                top[nt++] = (size_t)r;
        }
        for (size_t i = 0; i < res->n_records; i++)
            idx[i] = i;
        qsort_r(idx, res->n_records, sizeof *idx, cmp_by_err_desc, (void *)res);
        for (size_t k = 0; k < res->n_records && nt < want; k++) {
            const msp_record_cmp_t *r = &res->records[idx[k]];
            if (isnan(r->out_err))
                break;
            int dup = 0;
            for (size_t j = 0; j < nt && !dup; j++)
                dup = strcmp(res->records[top[j]].name, r->name) == 0 &&
                      res->records[top[j]].rank == r->rank;
            if (!dup)
                top[nt++] = idx[k];
        }
        free(idx);
        for (size_t j = 0; j < nt && !b->oom; j++) {
            const msp_record_cmp_t *t = &res->records[top[j]];
            msp_buf_puts(b, j ? ",{" : "{");
            cmp_key(b, "name");
            msp_buf_json_str(b, t->name);
            msp_buf_printf(b, ",\"rank\":%lld,\"err\":[", (long long)t->rank);
            for (size_t si = 0; si < n_steps; si++) {
                double e = NAN;
                for (size_t k = 0; k < h->n_blk; k++) {
                    const msp_record_cmp_t *r0 = &res->records[h->blk_start[k]];
                    if (r0->step != steps[si] || r0->rank != t->rank)
                        continue;
                    for (size_t i = h->blk_start[k]; i < h->blk_end[k]; i++)
                        if (strcmp(res->records[i].name, t->name) == 0) {
                            e = res->records[i].out_err;
                            break;
                        }
                }
                if (si)
                    msp_buf_put(b, ",", 1);
                msp_buf_json_num(b, e, CMP_HTML_DIGITS);
            }
            msp_buf_puts(b, "]}");
        }
    }
    msp_buf_puts(b, "]},");
    free(top);
    free(steps);
    return MSP_OK;
}

msp_err msp_report_write_html(const msp_compare_result_t *res, const char *out_dir,
                              const msp_html_opts_t *opts)
{
    msp_err rc = cmp_report_begin(res, out_dir);
    if (rc != MSP_OK)
        return rc;
    cmp_html_t h = {.res = res};
    if (opts)
        h.opts = *opts;
    if (!h.opts.max_points)
        h.opts.max_points = CMP_HTML_MAX_POINTS;
    if (!h.opts.max_records)
        h.opts.max_records = CMP_HTML_MAX_RECORDS;
    msp_buf_t b = {0};
    char *path = msp_asprintf("%s/result.html", out_dir);
    size_t n = res->n_records ? res->n_records : 1;
    long *tmp = malloc(n * sizeof *tmp);
    h.dir = calloc(n, 1);
    h.charted = calloc(n, 1);
    h.pos = malloc(n * sizeof *h.pos);
    if (!path || !tmp || !h.dir || !h.charted || !h.pos || cmp_html_blocks(&h) != 0) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory writing the report in %s", out_dir);
        goto cleanup;
    }
    cmp_html_directions(&h);
    cmp_html_chart(&h);
    if (cmp_html_listing(&h) != 0) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory writing %s", path);
        goto cleanup;
    }

    msp_buf_puts(&b, "{\"kind\":\"compare\",");
    cmp_key(&b, "version");
    msp_buf_json_str(&b, MSP_VERSION);
    msp_buf_put(&b, ",", 1);
    cmp_key(&b, "bench");
    msp_buf_json_str(&b, h.opts.bench ? h.opts.bench : "");
    msp_buf_put(&b, ",", 1);
    cmp_key(&b, "cmp");
    msp_buf_json_str(&b, h.opts.cmp ? h.opts.cmp : "");
    msp_buf_printf(&b,
                   ",\"stats_mode\":%d,\"n_records\":%zu,\"n_tensors\":%zu,\"n_failed\":%zu,"
                   "\"n_suspects\":%zu,\"n_pairs\":%zu,\"listed\":%zu,\"max_points\":%zu,"
                   "\"max_records\":%zu,\"sample_points\":%d,",
                   res->stats_mode, res->n_records, res->n_tensors, res->n_failed, res->n_suspects,
                   res->n_pairs, h.n_listed, h.opts.max_points, h.opts.max_records,
                   MSP_SAMPLE_POINTS);
    cmp_key(&b, "unpaired");
    msp_buf_put(&b, "[", 1);
    for (size_t i = 0; i < res->n_unpaired; i++) {
        if (i)
            msp_buf_put(&b, ",", 1);
        msp_buf_json_str(&b, res->unpaired[i]);
    }
    msp_buf_puts(&b, "],");
    cmp_html_records(&b, &h, tmp);
    cmp_html_series(&b, &h);
    if ((rc = cmp_html_suspects(&b, &h)) != MSP_OK || (rc = cmp_html_trend(&b, &h)) != MSP_OK)
        goto cleanup;
    msp_buf_puts(&b, "\"end\":1}");
    if (b.oom) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory writing %s", path);
        goto cleanup;
    }
    {
        char title[160];
        snprintf(title, sizeof title, "msprobe compare: %zu records, %zu suspects", res->n_records,
                 res->n_suspects);
        rc = msp_html_write_page(path, title, msp_cmp_html_css, b.data, b.len, msp_cmp_html_js);
    }

cleanup:
    msp_buf_free(&b);
    free(h.dir);
    free(h.charted);
    free(h.pos);
    free(h.listed);
    free(h.blk_start);
    free(h.blk_end);
    free(tmp);
    free(path);
    return rc;
}
