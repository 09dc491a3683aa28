/* result.xlsx's chart: the error flow of the first compared step and rank as a
 * native Excel chart (sheet "error_flow"), over its data (sheet
 * "error_flow_data"), for people who stay in Excel. The same numbers as
 * result.html's first chart: output error, input error and dtype floor of
 * each record, by execution order, on a log axis. */
#include "rep_internal.h"

#include <math.h>
#include <stdlib.h>
#include <xlsxwriter.h>

/* Excel 2007 draws at most 32,000 points a series; past that, per bucket of
 * execution order, the record with the largest output error. */
#define CMP_XLSX_CHART_POINTS 32000

static const char *const cmp_flow_cols[] = {"Step",
                                            "Rank",
                                            "Order",
                                            "Record",
                                            "Output error (#N/A: 0 or none)",
                                            "Input error (#N/A: 0 or none)",
                                            "Floor",
                                            "Error Origin"};

/* A log axis cannot show 0, NaN or Inf: #N/A leaves the point out of the chart. */
static lxw_error cmp_flow_num(lxw_worksheet *ws, lxw_row_t r, lxw_col_t c, double v)
{
    if (isfinite(v) && v > 0)
        return worksheet_write_number(ws, r, c, v, NULL);
    return worksheet_write_formula_str(ws, r, c, "=NA()", NULL, "#N/A");
}

static lxw_error cmp_error_flow(lxw_workbook *wb, const msp_compare_result_t *res)
{
    if (!res->n_records)
        return LXW_NO_ERROR;
    size_t end = 0;
    while (end < res->n_records && res->records[end].step == res->records[0].step &&
           res->records[end].rank == res->records[0].rank)
        end++;
    size_t buckets = end < CMP_XLSX_CHART_POINTS ? end : CMP_XLSX_CHART_POINTS;
    lxw_chartsheet *cs = workbook_add_chartsheet(wb, "error_flow");
    lxw_worksheet *ws = workbook_add_worksheet(wb, "error_flow_data");
    lxw_chart *ch = workbook_add_chart(wb, LXW_CHART_SCATTER_STRAIGHT_WITH_MARKERS);
    if (!cs || !ws || !ch)
        return LXW_ERROR_MEMORY_MALLOC_FAILED;
    lxw_error e = LXW_NO_ERROR;
    for (lxw_col_t c = 0; c < sizeof cmp_flow_cols / sizeof cmp_flow_cols[0] && !e; c++)
        e = worksheet_write_string(ws, 0, c, cmp_flow_cols[c], NULL);
    worksheet_set_column(ws, 3, 3, 48, NULL);
    worksheet_set_column(ws, 4, 5, 16, NULL);
    worksheet_freeze_panes(ws, 1, 0);
    lxw_row_t r = 1;
    for (size_t k = 0; k < buckets && !e; k++) {
        size_t lo = k * end / buckets, hi = (k + 1) * end / buckets, best = lo;
        for (size_t i = lo; i < hi; i++)
            if (res->records[i].out_err > res->records[best].out_err ||
                (isnan(res->records[best].out_err) && !isnan(res->records[i].out_err)))
                best = i;
        const msp_record_cmp_t *rec = &res->records[best];
        e = worksheet_write_number(ws, r, 0, (double)rec->step, NULL);
        if (!e)
            e = worksheet_write_number(ws, r, 1, (double)rec->rank, NULL);
        if (!e)
            e = worksheet_write_number(ws, r, 2, (double)rec->order, NULL);
        if (!e) {
            char *owned = NULL; /* a record name is the dump's bytes: valid UTF-8 for the XML */
            const char *name = msp_utf8_clean(rec->name, 32767, &owned);
            e = name ? worksheet_write_string(ws, r, 3, name, NULL)
                     : LXW_ERROR_MEMORY_MALLOC_FAILED;
            free(owned);
        }
        if (!e)
            e = cmp_flow_num(ws, r, 4, rec->out_err);
        if (!e)
            e = cmp_flow_num(ws, r, 5, rec->in_err);
        if (!e)
            e = cmp_flow_num(ws, r, 6, rec->floor);
        if (!e && rec->cause != MSP_CAUSE_NONE)
            e = worksheet_write_string(ws, r, 7, cmp_cause_text(rec->cause), NULL);
        r++;
    }
    if (e)
        return e;
    lxw_row_t last = r - 1;
    const struct {
        const char *name;
        lxw_col_t col;
        lxw_color_t color;
        int line;
    } ser[] = {{"Output error", 4, 0x1F6FD1, 1},
               {"Input error", 5, 0x9DBBE8, 0},
               {"dtype floor", 6, 0x8C96A0, 1}};
    for (size_t s = 0; s < sizeof ser / sizeof ser[0]; s++) {
        lxw_chart_series *se = chart_add_series(ch, NULL, NULL);
        if (!se)
            return LXW_ERROR_MEMORY_MALLOC_FAILED;
        chart_series_set_categories(se, "error_flow_data", 1, 2, last, 2);
        chart_series_set_values(se, "error_flow_data", 1, ser[s].col, last, ser[s].col);
        chart_series_set_name(se, ser[s].name);
        lxw_chart_line line = {.color = ser[s].color, .width = 1.25f, .none = !ser[s].line};
        if (s == 2)
            line.dash_type = LXW_CHART_LINE_DASH_DASH;
        chart_series_set_line(se, &line);
        chart_series_set_marker_type(se, s == 1 ? LXW_CHART_MARKER_CIRCLE : LXW_CHART_MARKER_NONE);
        chart_series_set_marker_size(se, 3);
    }
    char title[128];
    snprintf(title, sizeof title, "Error flow, step %lld rank %lld (||npu-bench||/||bench||)",
             (long long)res->records[0].step, (long long)res->records[0].rank);
    chart_title_set_name(ch, title);
    chart_axis_set_name(ch->x_axis, "execution order in the step");
    chart_axis_set_name(ch->y_axis, "relative error (log)");
    chart_axis_set_log_base(ch->y_axis, 10);
    chart_axis_set_num_format(ch->y_axis, "0.0E+00");
    chart_legend_set_position(ch, LXW_CHART_LEGEND_BOTTOM);
    return chartsheet_set_chart(cs, ch);
}

int cmp_xlsx_error_flow(struct lxw_workbook *wb, const msp_compare_result_t *res)
{
    return (int)cmp_error_flow(wb, res);
}
