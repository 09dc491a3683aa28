/* Report tables and result.xlsx (written to a temp name, then renamed). */
#include "cc_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xlsxwriter.h>

msp_cc_table_t *msp_cc_table_new(const char *const *cols, size_t ncols)
{
    msp_cc_table_t *t = calloc(1, sizeof *t);
    if (!t || !(t->cols = calloc(ncols, sizeof *t->cols))) {
        free(t);
        return NULL;
    }
    t->ncols = ncols;
    for (size_t i = 0; i < ncols; i++)
        if (!(t->cols[i] = strdup(cols[i]))) {
            msp_cc_table_free(t);
            return NULL;
        }
    return t;
}

void msp_cc_table_free(msp_cc_table_t *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->ncols; i++)
        free(t->cols[i]);
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i].s);
    free(t->cols);
    free(t->cells);
    free(t->levels);
    free(t);
}

size_t msp_cc_table_add_row(msp_cc_table_t *t, int level)
{
    if (!t)
        return (size_t)-1;
    size_t cc = t->cap, cl = t->cap; /* two arrays, one length: a row of cells, a level */
    msp_cc_cell_t *nc = msp_grow(t->cells, &cc, t->nrows, t->ncols * sizeof *nc, 32);
    if (!nc)
        return (size_t)-1;
    t->cells = nc;
    int *nl = msp_grow(t->levels, &cl, t->nrows, sizeof *nl, 32);
    if (!nl)
        return (size_t)-1;
    t->levels = nl;
    t->cap = cc;
    memset(&t->cells[t->nrows * t->ncols], 0, t->ncols * sizeof *t->cells);
    t->levels[t->nrows] = level;
    return t->nrows++;
}

static msp_cc_cell_t *msp_cc_cell(msp_cc_table_t *t, size_t row, size_t col)
{
    if (!t || row >= t->nrows || col >= t->ncols)
        return NULL;
    msp_cc_cell_t *c = &t->cells[row * t->ncols + col];
    free(c->s);
    memset(c, 0, sizeof *c);
    return c;
}

void msp_cc_table_set_str(msp_cc_table_t *t, size_t row, size_t col, const char *s)
{
    msp_cc_cell_t *c = msp_cc_cell(t, row, col);
    if (c && s && (c->s = strdup(s)))
        c->kind = MSP_CC_CELL_STR;
}

void msp_cc_table_set_num(msp_cc_table_t *t, size_t row, size_t col, double v)
{
    msp_cc_cell_t *c = msp_cc_cell(t, row, col);
    if (c) {
        c->kind = MSP_CC_CELL_NUM;
        c->d = v;
    }
}

void msp_cc_table_set_bool(msp_cc_table_t *t, size_t row, size_t col, int b)
{
    msp_cc_cell_t *c = msp_cc_cell(t, row, col);
    if (c) {
        c->kind = MSP_CC_CELL_BOOL;
        c->d = b ? 1 : 0;
    }
}

/* xlsx needs valid UTF-8 without control characters and at most 32767
 * characters per cell; environment values promise none of that. */
static lxw_error msp_cc_write_text(lxw_worksheet *ws, lxw_row_t r, lxw_col_t c, const char *s,
                                   lxw_format *f)
{
    char *owned = NULL;
    const char *t = msp_utf8_clean(s, 32000, &owned);
    if (!t)
        return LXW_ERROR_MEMORY_MALLOC_FAILED;
    lxw_error e = worksheet_write_string(ws, r, c, t, f);
    free(owned);
    return e;
}

typedef struct msp_cc_formats {
    lxw_format *head, *err, *warn;
} msp_cc_formats_t;

static lxw_error msp_cc_write_table(lxw_workbook *wb, const char *name, const msp_cc_table_t *t,
                                    const msp_cc_formats_t *fm)
{
    lxw_worksheet *ws = workbook_add_worksheet(wb, name);
    if (!ws)
        return LXW_ERROR_MEMORY_MALLOC_FAILED;
    lxw_error e = LXW_NO_ERROR;
    for (size_t c = 0; c < t->ncols && !e; c++) {
        /* Wide enough for the longest value (up to a screen): a difference
         * near the end of a long value must not hide behind the next column. */
        size_t w = strlen(t->cols[c]) + 2;
        for (size_t r = 0; r < t->nrows; r++) {
            const msp_cc_cell_t *cell = &t->cells[r * t->ncols + c];
            size_t n = cell->kind == MSP_CC_CELL_STR ? strlen(cell->s) + 1 : 12;
            if (n > w)
                w = n;
        }
        if (w < (c == 0 ? 36u : 12u))
            w = c == 0 ? 36 : 12;
        if (w > 100)
            w = 100;
        e = worksheet_write_string(ws, 0, (lxw_col_t)c, t->cols[c], fm->head);
        worksheet_set_column(ws, (lxw_col_t)c, (lxw_col_t)c, (double)w, NULL);
    }
    for (size_t r = 0; r < t->nrows && !e; r++) {
        lxw_format *f = t->levels[r] == MSP_CC_LEVEL_ERROR  ? fm->err
                        : t->levels[r] == MSP_CC_LEVEL_WARN ? fm->warn
                                                            : NULL;
        for (size_t c = 0; c < t->ncols && !e; c++) {
            const msp_cc_cell_t *cell = &t->cells[r * t->ncols + c];
            lxw_row_t xr = (lxw_row_t)(r + 1);
            switch (cell->kind) {
            case MSP_CC_CELL_STR:
                e = msp_cc_write_text(ws, xr, (lxw_col_t)c, cell->s, f);
                break;
            case MSP_CC_CELL_NUM:
                e = worksheet_write_number(ws, xr, (lxw_col_t)c, cell->d, f);
                break;
            case MSP_CC_CELL_BOOL:
                e = worksheet_write_boolean(ws, xr, (lxw_col_t)c, cell->d > 0.5, f);
                break;
            default:
                if (f)
                    e = worksheet_write_blank(ws, xr, (lxw_col_t)c, f);
                break;
            }
        }
    }
    if (!e) {
        worksheet_freeze_panes(ws, 1, 0);
        if (t->ncols)
            worksheet_autofilter(ws, 0, 0, (lxw_row_t)t->nrows, (lxw_col_t)(t->ncols - 1));
    }
    return e;
}

msp_err msp_cc_report_write(const msp_cc_result_t *r, const char *out_dir)
{
    msp_err rc = MSP_OK;
    char *final = NULL, *tmp = NULL;
    msp_cc_table_t *sum = NULL;
    lxw_workbook *wb = NULL;
    if (!msp_is_dir(out_dir) && (rc = msp_mkdirs(out_dir)) != MSP_OK)
        return rc;
    final = msp_asprintf("%s/result.xlsx", out_dir);
    tmp = final ? msp_atomic_tmp_name(final) : NULL;
    static const char *const cols[] = {"filename", "pass_check", "differences", "note", "info"};
    sum = msp_cc_table_new(cols, 5);
    if (!final || !tmp || !sum) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    for (int i = 0; i < MSP_CC_N_ITEMS; i++) {
        const msp_cc_item_result_t *it = &r->items[i];
        size_t row = msp_cc_table_add_row(sum, it->status == MSP_CC_FAIL ? MSP_CC_LEVEL_ERROR
                                                                         : MSP_CC_LEVEL_OK);
        msp_cc_table_set_str(sum, row, 0, it->name);
        if (it->status == MSP_CC_NA)
            msp_cc_table_set_str(sum, row, 1, "N/A");
        else
            msp_cc_table_set_bool(sum, row, 1, it->status == MSP_CC_PASS);
        msp_cc_table_set_num(sum, row, 2, (double)it->n_failed);
        if (it->note)
            msp_cc_table_set_str(sum, row, 3, it->note);
        msp_cc_table_set_num(sum, row, 4, (double)it->n_info);
    }
    /* Keep libxlsxwriter's scratch files inside the output directory too. */
    lxw_workbook_options wo = {.constant_memory = LXW_FALSE, .tmpdir = (char *)out_dir};
    wb = workbook_new_opt(tmp, &wo);
    if (!wb) {
        rc = msp_fail(MSP_ERR_XLSX, "cannot create %s", tmp);
        goto cleanup;
    }
    msp_cc_formats_t fm = {workbook_add_format(wb), workbook_add_format(wb),
                           workbook_add_format(wb)};
    format_set_bold(fm.head);
    format_set_bg_color(fm.err, 0xFFC7CE);
    format_set_bg_color(fm.warn, 0xFFEB9C);
    lxw_error e = msp_cc_write_table(wb, "summary", sum, &fm);
    for (int i = 0; i < MSP_CC_N_ITEMS && !e; i++) {
        const msp_cc_item_result_t *it = &r->items[i];
        if (it->table)
            e = msp_cc_write_table(wb, it->name, it->table, &fm);
        else {
            static const char *const none[] = {"note"};
            msp_cc_table_t *t = msp_cc_table_new(none, 1);
            if (!t) {
                rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
                goto cleanup;
            }
            size_t row = msp_cc_table_add_row(t, it->status == MSP_CC_FAIL ? MSP_CC_LEVEL_ERROR
                                                                           : MSP_CC_LEVEL_OK);
            msp_cc_table_set_str(t, row, 0, it->note ? it->note : "not compared");
            e = msp_cc_write_table(wb, it->name, t, &fm);
            msp_cc_table_free(t);
        }
    }
    if (e) {
        rc = msp_fail(MSP_ERR_XLSX, "%s: %s", tmp, lxw_strerror(e));
        goto cleanup;
    }
    e = workbook_close(wb);
    wb = NULL;
    if (e) {
        rc = msp_fail(MSP_ERR_XLSX, "cannot write %s: %s", tmp, lxw_strerror(e));
        goto cleanup;
    }
    rc = msp_atomic_commit(tmp, final);
cleanup:
    if (wb) {
        /* workbook_close is the only way to free a workbook; its output is discarded. */
        workbook_close(wb);
    }
    if (rc != MSP_OK)
        msp_atomic_discard(tmp);
    msp_cc_table_free(sum);
    free(final);
    free(tmp);
    return rc;
}
