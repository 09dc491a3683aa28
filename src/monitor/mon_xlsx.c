/* result.xlsx of two monitor outputs compared (msprobe-compare(1), MONITOR
 * OUTPUTS): sheet summary (the verdict and the rule), sheet series (one row
 * per series both runs hold: where it first diverged, its largest ratio of
 * difference to threshold) and sheet heatmap (steps down, modules across,
 * each cell that ratio, coloured; the divergent step's row marked). */
#include "mon_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xlsxwriter.h>

typedef struct {
    lxw_workbook *wb;
    lxw_format *bold, *mark;
    lxw_error err;
} mon_book_t;

static void mon_str(mon_book_t *x, lxw_worksheet *ws, lxw_row_t r, lxw_col_t c, const char *s,
                    lxw_format *f)
{
    char *owned = NULL;
    const char *t = msp_utf8_clean(s ? s : "", 32767, &owned);
    lxw_error e = t ? worksheet_write_string(ws, r, c, t, f) : LXW_ERROR_MEMORY_MALLOC_FAILED;
    if (e && !x->err)
        x->err = e;
    free(owned);
}

/* A number; NaN and Inf as text (a cell cannot hold them). */
static void mon_num(mon_book_t *x, lxw_worksheet *ws, lxw_row_t r, lxw_col_t c, double v,
                    lxw_format *f)
{
    if (!isfinite(v)) {
        mon_str(x, ws, r, c, isnan(v) ? "nan" : v > 0 ? "inf" : "-inf", f);
        return;
    }
    lxw_error e = worksheet_write_number(ws, r, c, v, f);
    if (e && !x->err)
        x->err = e;
}

static void mon_kv(mon_book_t *x, lxw_worksheet *ws, lxw_row_t *r, const char *k, const char *v)
{
    mon_str(x, ws, *r, 0, k, x->bold);
    mon_str(x, ws, *r, 1, v, NULL);
    (*r)++;
}

static void mon_summary(mon_book_t *x, const msp_mon_cmp_t *c, const char *bench, const char *cmp)
{
    lxw_worksheet *ws = workbook_add_worksheet(x->wb, "summary");
    if (!ws) {
        x->err = LXW_ERROR_MEMORY_MALLOC_FAILED;
        return;
    }
    worksheet_set_column(ws, 0, 0, 28, NULL);
    worksheet_set_column(ws, 1, 1, 80, NULL);
    lxw_row_t r = 0;
    char buf[512];
    mon_kv(x, ws, &r, "bench", bench);
    mon_kv(x, ws, &r, "compare", cmp);
    snprintf(buf, sizeof buf, "%zu (bench only %zu, compare only %zu)", c->n_pairs, c->only_bench,
             c->only_cmp);
    mon_kv(x, ws, &r, "series compared", buf);
    if (c->div >= 0) {
        const msp_mon_pair_t *p = &c->pairs[c->div];
        snprintf(buf, sizeof buf, "%lld", (long long)p->steps[c->div_at]);
        mon_kv(x, ws, &r, "first divergent step", buf);
        snprintf(buf, sizeof buf, "%lld", (long long)p->b->rank);
        mon_kv(x, ws, &r, "rank", buf);
        mon_kv(x, ws, &r, "module", p->b->module);
        snprintf(buf, sizeof buf, "%s %s %s", p->b->kind, p->b->name, p->b->metric);
        mon_kv(x, ws, &r, "series", buf);
        snprintf(buf, sizeof buf, "bench %.9g, compare %.9g, difference %.6g, threshold %.6g",
                 p->vb[c->div_at], p->vc[c->div_at], p->diff[c->div_at], p->thr[c->div_at]);
        mon_kv(x, ws, &r, "values", buf);
        snprintf(buf, sizeof buf, "%zu", c->div_series);
        mon_kv(x, ws, &r, "series diverging at that step", buf);
    } else
        mon_kv(x, ws, &r, "first divergent step", "none: no divergent step");
    const msp_mon_nan_t *nn[2] = {&c->nan_bench, &c->nan_cmp};
    const char *side[2] = {"first NaN/Inf, bench", "first NaN/Inf, compare"};
    for (int k = 0; k < 2; k++) {
        if (nn[k]->step < 0)
            snprintf(buf, sizeof buf, "none");
        else
            snprintf(buf, sizeof buf, "step %lld rank %lld %s %s %s", (long long)nn[k]->step,
                     (long long)nn[k]->rank, nn[k]->s->kind, nn[k]->s->name, nn[k]->s->metric);
        mon_kv(x, ws, &r, side[k], buf);
    }
    snprintf(buf, sizeof buf, "W %d steps, P %d steps, K %g, B %g, F %g", c->rule.window,
             c->rule.persist, c->rule.k_noise, c->rule.k_base, c->rule.rel_floor);
    mon_kv(x, ws, &r, "rule (msprobe-compare(1))", buf);
}

static void mon_series_sheet(mon_book_t *x, const msp_mon_cmp_t *c)
{
    static const char *const cols[] = {"Rank",
                                       "Kind",
                                       "Name",
                                       "Module",
                                       "Metric",
                                       "Micro",
                                       "First divergent step",
                                       "Bench",
                                       "Compare",
                                       "Difference",
                                       "Threshold",
                                       "Largest difference / threshold",
                                       "At step"};
    lxw_worksheet *ws = workbook_add_worksheet(x->wb, "series");
    if (!ws) {
        x->err = LXW_ERROR_MEMORY_MALLOC_FAILED;
        return;
    }
    for (lxw_col_t k = 0; k < sizeof cols / sizeof cols[0]; k++)
        mon_str(x, ws, 0, k, cols[k], x->bold);
    worksheet_set_column(ws, 2, 3, 36, NULL);
    worksheet_freeze_panes(ws, 1, 0);
    for (size_t i = 0; i < c->n_pairs && !x->err; i++) {
        const msp_mon_pair_t *p = &c->pairs[i];
        lxw_row_t r = (lxw_row_t)(i + 1);
        lxw_format *f = (long)i == c->div ? x->mark : NULL;
        mon_num(x, ws, r, 0, (double)p->b->rank, f);
        mon_str(x, ws, r, 1, p->b->kind, f);
        mon_str(x, ws, r, 2, p->b->name, f);
        mon_str(x, ws, r, 3, p->b->module, f);
        mon_str(x, ws, r, 4, p->b->metric, f);
        mon_num(x, ws, r, 5, (double)p->b->micro, f);
        double worst = 0;
        size_t at = 0;
        for (size_t k = 0; k < p->n; k++) {
            double q = mon_ratio(p, k);
            if (q > worst)
                worst = q, at = k;
        }
        size_t show = p->first >= 0 ? (size_t)p->first : at;
        if (p->first >= 0)
            mon_num(x, ws, r, 6, (double)p->steps[p->first], f);
        else
            mon_str(x, ws, r, 6, "", f);
        if (p->n) {
            mon_num(x, ws, r, 7, p->vb[show], f);
            mon_num(x, ws, r, 8, p->vc[show], f);
            mon_num(x, ws, r, 9, p->diff[show], f);
            mon_num(x, ws, r, 10, p->thr[show], f);
            mon_num(x, ws, r, 11, worst, f);
            mon_num(x, ws, r, 12, (double)p->steps[at], f);
        }
    }
    if (c->n_pairs)
        worksheet_autofilter(ws, 0, 0, (lxw_row_t)c->n_pairs, 12);
}

static void mon_heat_sheet(mon_book_t *x, const msp_mon_cmp_t *c)
{
    lxw_worksheet *ws = workbook_add_worksheet(x->wb, "heatmap");
    if (!ws) {
        x->err = LXW_ERROR_MEMORY_MALLOC_FAILED;
        return;
    }
    size_t cols = c->n_modules < 16383 ? c->n_modules : 16383; /* Excel's last column */
    mon_str(x, ws, 0, 0, "step \\ module", x->bold);
    for (size_t m = 0; m < cols; m++)
        mon_str(x, ws, 0, (lxw_col_t)(m + 1), c->modules[m], x->bold);
    int64_t div = c->div >= 0 ? c->pairs[c->div].steps[c->div_at] : -1;
    for (size_t s = 0; s < c->n_steps && !x->err; s++) {
        lxw_row_t r = (lxw_row_t)(s + 1);
        mon_num(x, ws, r, 0, (double)c->steps[s], c->steps[s] == div ? x->mark : x->bold);
        for (size_t m = 0; m < cols; m++) {
            double v = c->heat[s * c->n_modules + m];
            if (!isnan(v))
                mon_num(x, ws, r, (lxw_col_t)(m + 1), v, NULL);
        }
    }
    worksheet_freeze_panes(ws, 1, 1);
    if (c->n_steps && cols) {
        lxw_conditional_format cf = {.type = LXW_CONDITIONAL_3_COLOR_SCALE,
                                     .min_rule_type = LXW_CONDITIONAL_RULE_TYPE_NUMBER,
                                     .min_value = 0,
                                     .min_color = 0xFFFFFF,
                                     .mid_rule_type = LXW_CONDITIONAL_RULE_TYPE_NUMBER,
                                     .mid_value = 1,
                                     .mid_color = 0xFFEB84,
                                     .max_rule_type = LXW_CONDITIONAL_RULE_TYPE_NUMBER,
                                     .max_value = 10,
                                     .max_color = 0xF8696B};
        worksheet_conditional_format_range(ws, 1, 1, (lxw_row_t)c->n_steps, (lxw_col_t)cols, &cf);
    }
}

msp_err msp_mon_report_xlsx(const msp_mon_cmp_t *c, const char *bench, const char *cmp,
                            const char *out_dir)
{
    msp_err rc = msp_mkdirs(out_dir);
    if (rc != MSP_OK)
        return rc;
    char *path = msp_asprintf("%s/result.xlsx", out_dir);
    char *tmp = path ? msp_atomic_tmp_name(path) : NULL;
    if (!path || !tmp) {
        free(path);
        free(tmp);
        return msp_fail(MSP_ERR_NOMEM, "out of memory writing the report in %s", out_dir);
    }
    if (access(out_dir, W_OK | X_OK) != 0) {
        rc = msp_fail(MSP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        goto cleanup;
    }
    mon_book_t x = {0};
    x.wb = workbook_new(tmp);
    if (!x.wb) {
        rc = msp_fail(MSP_ERR_XLSX, "cannot start workbook %s", tmp);
        goto cleanup;
    }
    x.bold = workbook_add_format(x.wb);
    x.mark = workbook_add_format(x.wb);
    format_set_bold(x.bold);
    format_set_bg_color(x.mark, 0xFFC7CE);
    format_set_bold(x.mark);
    mon_summary(&x, c, bench, cmp);
    if (!x.err)
        mon_series_sheet(&x, c);
    if (!x.err)
        mon_heat_sheet(&x, c);
    if (x.err) {
        rc = msp_fail(MSP_ERR_XLSX, "cannot write %s: %s", path, lxw_strerror(x.err));
        lxw_workbook_free(x.wb);
        goto cleanup;
    }
    lxw_error e = workbook_close(x.wb);
    rc = e ? msp_fail(MSP_ERR_XLSX, "cannot write %s: %s", path, lxw_strerror(e))
           : msp_atomic_commit(tmp, path);
cleanup:
    if (rc != MSP_OK)
        msp_atomic_discard(tmp);
    free(tmp);
    free(path);
    return rc;
}
