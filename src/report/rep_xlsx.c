/* result.xlsx: sheet "summary" (one row per record) and sheet "details" (one
 * row per tensor, msprobe's column names), written with libxlsxwriter in
 * constant_memory mode so a dump of millions of tensors costs one row of memory.
 *
 * constant_memory flushes a row as soon as the next one starts, so every sheet
 * is written strictly top to bottom: the summary's links are computed up front
 * from the details layout instead of being patched in afterwards.
 *
 * Colours (documented in msprobe-compare(1)): red rows use Excel's "Bad" fill
 * 0xFFC7CE, yellow rows its "Neutral" fill 0xFFEB9C; msprobe paints the same
 * rules in pure red/yellow, which hides the text on most screens.
 *
 * Which workbooks a result makes, and what goes into each: rep_xlsx_books.c.
 */
#include "msprobe/compare.h"

#include "rep_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xlsxwriter.h>

#define MSP_XLSX_RED_FILL 0xFFC7CE
#define MSP_XLSX_YELLOW_FILL 0xFFEB9C
#define MSP_XLSX_LINK_COLOR 0x0563C1
/* Excel's limits: rows per sheet (one is the header) and hyperlink records
 * per sheet (past it a HYPERLINK() formula does the job); characters per
 * cell are CMP_XLSX_MAX_STR (rep_internal.h). */
#define MSP_XLSX_SHEET_ROWS ((size_t)LXW_ROW_MAX - 1)
#define MSP_XLSX_MAX_URLS 65530

static const double msp_details_width_tensor[] = {
    44, 44, 16, 16, 18, 18, 12, 12, 12, 14, 14, 14, 12, 12, 12, 12, 12,
    12, 12, 12, 12, 9,  36, 12, 7,  7,  12, 12, 14, 40, 40, 10, 10,
};
static const double msp_details_width_stats[] = {
    44, 44, 16, 16, 18, 18, 12, 12, 12, 12, 14, 14, 14, 14, 12, 12, 12, 12,
    12, 12, 12, 12, 12, 9,  36, 12, 7,  7,  12, 12, 14, 40, 40, 10, 10,
};
static const char *const msp_summary_cols[] = {
    "Step",
    "Rank",
    "Name",
    "Bench Name",
    "Order",
    "Worst Output Cosine",
    "Worst Output MaxAbsErr",
    "Accuracy Reached or Not",
    "Error Origin",
    "Root Cause",
    "Details",
    "Result",
    "Replay",
    "Replay Error",
    "Replay Bound",
    "Changed Argument",
    "Reason",
};
static const double msp_summary_width[] = {7,  7,  48, 48, 8,  14, 14, 12, 12,
                                           12, 16, 9,  24, 12, 12, 32, 60};

#define MSP_NCOLS(a) (sizeof(a) / sizeof((a)[0]))
_Static_assert(MSP_NCOLS(msp_details_width_tensor) == CMP_DETAILS_NCOLS_TENSOR,
               "one width per tensor-mode details column");
_Static_assert(MSP_NCOLS(msp_details_width_stats) == CMP_DETAILS_NCOLS_STATS,
               "one width per statistics-mode details column");

size_t cmp_xlsx_data_rows = MSP_XLSX_SHEET_ROWS;

void cmp_report_set_rows_per_sheet(size_t rows)
{
    cmp_xlsx_data_rows = rows && rows < MSP_XLSX_SHEET_ROWS ? rows : MSP_XLSX_SHEET_ROWS;
}

/* About 1 KiB of XML per details row: past a million rows the parts may pass
 * 4 GiB, which needs ZIP64 (older Excel warns about it). */
#define MSP_XLSX_ZIP64_ROWS ((size_t)1000000)
static size_t msp_zip64_rows = MSP_XLSX_ZIP64_ROWS;

void cmp_report_set_zip64_rows(size_t rows)
{
    msp_zip64_rows = rows ? rows : MSP_XLSX_ZIP64_ROWS;
}

typedef struct msp_xlsx {
    lxw_workbook *wb;
    /* [highlight][bold]: plain cells and link cells, and their xf indices
     * for the rows rep_sheet.c writes */
    lxw_format *cell[3][2];
    lxw_format *link[3][2];
    int xf_cell[3][2], xf_link[3][2];
    lxw_format *header;
    const char *dir; /* where the rows' temp files go */
    int n_ws;        /* worksheets added: the next is xl/worksheets/sheet{n_ws + 1}.xml */
    lxw_error err;   /* first libxlsxwriter error, with where it happened */
    char err_sheet[32];
    size_t err_row;
} msp_xlsx_t;

static void msp_xlsx_note(msp_xlsx_t *x, lxw_error e, const char *sheet, size_t row)
{
    if (e != LXW_NO_ERROR && x->err == LXW_NO_ERROR) {
        x->err = e;
        snprintf(x->err_sheet, sizeof x->err_sheet, "%s", sheet);
        x->err_row = row;
    }
}

static void msp_put_str(msp_xlsx_t *x, lxw_worksheet *ws, const char *sheet, lxw_row_t r,
                        lxw_col_t c, const char *s, lxw_format *f)
{
    if (!s)
        s = "";
    /* Valid UTF-8, cut on a character boundary: Excel refuses longer cells
     * and an invalid byte makes the whole workbook unreadable. */
    char *cut = NULL;
    s = msp_utf8_clean(s, CMP_XLSX_MAX_STR, &cut);
    if (!s) {
        msp_xlsx_note(x, LXW_ERROR_MEMORY_MALLOC_FAILED, sheet, r);
        return;
    }
    /* An empty string with a format still paints the fill of a highlighted row. */
    if (*s)
        msp_xlsx_note(x, worksheet_write_string(ws, r, c, s, f), sheet, r);
    else if (f)
        msp_xlsx_note(x, worksheet_write_blank(ws, r, c, f), sheet, r);
    free(cut);
}

/* Numbers stay numbers; NaN becomes "N/A" and infinities "inf"/"-inf" text,
 * since the XML has no spelling for them. */
static void msp_put_num(msp_xlsx_t *x, lxw_worksheet *ws, const char *sheet, lxw_row_t r,
                        lxw_col_t c, double v, lxw_format *f)
{
    if (isnan(v))
        msp_put_str(x, ws, sheet, r, c, "N/A", f);
    else if (isinf(v))
        msp_put_str(x, ws, sheet, r, c, v > 0 ? "inf" : "-inf", f);
    else
        msp_xlsx_note(x, worksheet_write_number(ws, r, c, v, f), sheet, r);
}

static lxw_format *msp_fmt(msp_xlsx_t *x, msp_highlight_t hl, int bold)
{
    unsigned h = (unsigned)hl <= MSP_HL_RED ? (unsigned)hl : MSP_HL_NONE;
    return x->cell[h][bold ? 1 : 0];
}

static int msp_xf(const msp_xlsx_t *x, msp_highlight_t hl, int bold)
{
    unsigned h = (unsigned)hl <= MSP_HL_RED ? (unsigned)hl : MSP_HL_NONE;
    return x->xf_cell[h][bold ? 1 : 0];
}

/* Numbers stay numbers; NaN becomes "N/A" and infinities "inf"/"-inf" text,
 * as msp_put_num writes them. */
static void msp_rs_num(rep_sheet_t *s, int c, double v, int xf)
{
    if (isnan(v))
        rep_sheet_str(s, c, "N/A", xf);
    else if (isinf(v))
        rep_sheet_str(s, c, v > 0 ? "inf" : "-inf", xf);
    else
        rep_sheet_num(s, c, v, xf);
}

static void msp_xlsx_formats(msp_xlsx_t *x)
{
    for (int h = 0; h < 3; h++) {
        for (int b = 0; b < 2; b++) {
            for (int l = 0; l < 2; l++) {
                lxw_format *f = workbook_add_format(x->wb);
                if (!f)
                    continue; /* libxlsxwriter then writes the cell unformatted */
                if (h != MSP_HL_NONE) {
                    format_set_pattern(f, LXW_PATTERN_SOLID);
                    format_set_bg_color(f,
                                        h == MSP_HL_RED ? MSP_XLSX_RED_FILL : MSP_XLSX_YELLOW_FILL);
                }
                if (b)
                    format_set_bold(f);
                if (l) {
                    format_set_underline(f, LXW_UNDERLINE_SINGLE);
                    format_set_font_color(f, MSP_XLSX_LINK_COLOR);
                    x->link[h][b] = f;
                } else {
                    x->cell[h][b] = f;
                }
            }
        }
    }
    /* Unhighlighted, not bold: no format at all keeps the file small. */
    x->cell[MSP_HL_NONE][0] = NULL;
    /* the indices the styles part will give them, fixed now */
    for (int h = 0; h < 3; h++)
        for (int b = 0; b < 2; b++) {
            x->xf_cell[h][b] = x->cell[h][b] ? lxw_format_get_xf_index(x->cell[h][b]) : 0;
            x->xf_link[h][b] = x->link[h][b] ? lxw_format_get_xf_index(x->link[h][b]) : 0;
        }
    x->header = workbook_add_format(x->wb);
    if (x->header) {
        format_set_bold(x->header);
        format_set_text_wrap(x->header);
        format_set_align(x->header, LXW_ALIGN_VERTICAL_TOP);
    }
}

/* "details", "details_2", ... : a sheet holds at most LXW_ROW_MAX rows. */
size_t cmp_sheet_name(char *buf, size_t n, const char *base, size_t index)
{
    /* joined by hand: every summary row names its details sheet, and two
     * snprintf calls there were 1.5 % of a statistics compare (issue 42) */
    char t[64];
    size_t len = strnlen(base, 32);
    memcpy(t, base, len);
    if (index) {
        t[len++] = '_';
        len += msp_u64_digits(t + len, (uint64_t)index + 1);
    }
    if (!n)
        return 0;
    len = len < n ? len : n - 1;
    memcpy(buf, t, len);
    buf[len] = '\0';
    return len;
}

/* Sheets needed for total data rows (at least one, even empty), and the data
 * rows of sheet s. */
static size_t msp_sheet_count(size_t total)
{
    return total ? (total - 1) / cmp_xlsx_data_rows + 1 : 1;
}

static size_t msp_sheet_rows(size_t total, size_t s)
{
    if (total <= s * cmp_xlsx_data_rows)
        return 0;
    size_t rows = total - s * cmp_xlsx_data_rows;
    return rows > cmp_xlsx_data_rows ? cmp_xlsx_data_rows : rows;
}

static lxw_worksheet *msp_add_sheet(msp_xlsx_t *x, const char *name, const char *const *cols,
                                    const double *widths, size_t ncols, size_t nrows)
{
    lxw_worksheet *ws = workbook_add_worksheet(x->wb, name);
    if (!ws) {
        msp_xlsx_note(x, LXW_ERROR_MEMORY_MALLOC_FAILED, name, 0);
        return NULL;
    }
    x->n_ws++;
    for (size_t c = 0; c < ncols; c++)
        msp_xlsx_note(x, worksheet_set_column(ws, (lxw_col_t)c, (lxw_col_t)c, widths[c], NULL),
                      name, 0);
    for (size_t c = 0; c < ncols; c++)
        msp_put_str(x, ws, name, 0, (lxw_col_t)c, cols[c], x->header);
    worksheet_freeze_panes(ws, 1, 0);
    msp_xlsx_note(x, worksheet_autofilter(ws, 0, 0, (lxw_row_t)nrows, (lxw_col_t)(ncols - 1)), name,
                  0);
    return ws;
}

/* ---- details --------------------------------------------------------- */

typedef struct msp_row_ctx {
    const msp_record_cmp_t *rec; /* NULL for a tensor no record claims */
    int bold;
    int first; /* the record's first row: carries its stack */
    const msp_compare_result_t *part;
    size_t ti; /* the row's tensor in part */
} msp_row_ctx_t;

static void msp_details_row(const msp_xlsx_t *x, rep_sheet_t *ws, size_t r, int stats,
                            const msp_row_ctx_t *ctx)
{
    const msp_tensor_cmp_t *t = &ctx->part->tensors[ctx->ti];
    int f = msp_xf(x, t->highlight, ctx->bold);
    int c = 0;
    int has_npu = t->npu_name != NULL, has_bench = t->bench_name != NULL;
    rep_sheet_row(ws, r);
    /* A side the tensor is missing on reads "N/A", as in msprobe. */
    rep_sheet_str(ws, c++, has_npu ? t->npu_name : "N/A", f);
    rep_sheet_str(ws, c++, has_bench ? t->bench_name : "N/A", f);
    /* texts that repeat row after row are shared strings (rep_sst.c) */
    rep_sheet_str_shared(ws, c++, has_npu || *t->npu_dtype ? t->npu_dtype : "N/A", f);
    rep_sheet_str_shared(ws, c++, has_bench || *t->bench_dtype ? t->bench_dtype : "N/A", f);
    rep_sheet_str_shared(ws, c++, has_npu || *t->npu_shape ? t->npu_shape : "N/A", f);
    rep_sheet_str_shared(ws, c++, has_bench || *t->bench_shape ? t->bench_shape : "N/A", f);
    /* the numbers' texts, made once with result.csv's (rep_texts.c) where
     * both are written; else printed straight into the sheet */
    const rep_row_texts_t *tx = rep_texts_row(ctx->part, ctx->ti, stats, ws->nums, ws->pcts, NULL);
    for (int i = 0; tx && i < (stats ? 16 : 14); i++) {
        const char *slot = tx->s[i];
        if (rep_text_is_num(slot))
            rep_sheet_num_text(ws, c++, slot, rep_text_len(slot), f);
        else
            rep_sheet_str(ws, c++, slot, f);
    }
    double v[16];
    for (int i = 0, n = tx ? 0 : rep_row_numbers(t, stats, v); i < n; i++) {
        if (rep_row_is_pct(stats, i)) {
            char pct[48];
            cmp_percent_text(ws->pcts, v[i], pct, sizeof pct);
            rep_sheet_str(ws, c++, pct, f);
        } else {
            msp_rs_num(ws, c++, v[i], f);
        }
    }
    rep_sheet_str_shared(ws, c++, cmp_verdict_text(t->verdict), f);
    rep_sheet_str_shared(ws, c++, cmp_result_text(t->result), f);
    rep_sheet_str_shared(ws, c++, t->err_message, f);
    if (ctx->rec) {
        rep_sheet_str_shared(ws, c++, cmp_cause_text(ctx->rec->cause), f);
        msp_rs_num(ws, c++, (double)ctx->rec->step, f);
        msp_rs_num(ws, c++, (double)ctx->rec->rank, f);
    } else {
        for (int i = 0; i < 3; i++)
            rep_sheet_str(ws, c++, "", f);
    }
    rep_sheet_str_shared(ws, c++, cmp_bool_text(t->npu_requires_grad), f);
    rep_sheet_str_shared(ws, c++, cmp_bool_text(t->bench_requires_grad), f);
    rep_sheet_str_shared(ws, c++, cmp_rg_consistent_text(t), f);
    rep_sheet_str(ws, c++, ctx->rec && ctx->first && ctx->rec->npu_stack ? ctx->rec->npu_stack : "",
                  f);
    char text[1024];
    cmp_data_name_text(t, text, sizeof text);
    if (!t->npu_data_name && !t->bench_data_name) /* "['-1', '-1']": no file names */
        rep_sheet_str_shared(ws, c++, text, f);
    else
        rep_sheet_str(ws, c++, text, f);
    cmp_md5_text(t->npu_crc32, text, sizeof text);
    rep_sheet_str(ws, c++, text, f);
    cmp_md5_text(t->bench_crc32, text, sizeof text);
    rep_sheet_str(ws, c++, text, f);
}

/* Where a details row lands: sheet index and 1-based row. */
static void msp_details_pos(size_t seq, size_t *sheet, size_t *row1)
{
    *sheet = seq / cmp_xlsx_data_rows;
    *row1 = seq % cmp_xlsx_data_rows + 2; /* +1 header, +1 one-based */
}

/* ---- summary --------------------------------------------------------- */

/* Replay, Replay Error, Replay Bound, Changed Argument and Reason, from column c. */
static void msp_put_replay(rep_sheet_t *ws, int c, const msp_record_cmp_t *rec, const char *reason,
                           int f)
{
    char *text = NULL;
    const char *note = rec->replay_note ? rec->replay_note : "";
    switch (rec->replay) {
    case MSP_RV_INTRODUCED:
        text = msp_asprintf("introduced (%s)", note);
        break;
    case MSP_RV_INHERITED:
        /* a suspect all the same: its evidence stays (ROOT CAUSE) */
        text = msp_asprintf("inherited (%s)%s", note,
                            rec->cause == MSP_CAUSE_INTRODUCED ? "; kept as a suspect for its "
                                                                 "evidence"
                                                               : "");
        break;
    case MSP_RV_SKIPPED:
        text = msp_asprintf("not replayable: %s", note);
        break;
    case MSP_RV_UNFINISHED:
        text = msp_asprintf("not replayed: budget");
        break;
    default:
        break;
    }
    int judged = rec->replay == MSP_RV_INTRODUCED || rec->replay == MSP_RV_INHERITED;
    rep_sheet_str(ws, c++, text ? text : "", f);
    msp_rs_num(ws, c++, judged ? rec->replay_err : NAN, f);
    msp_rs_num(ws, c++, judged ? rec->replay_ref : NAN, f);
    rep_sheet_str(ws, c++, rec->arg_diff ? rec->arg_diff : "", f);
    rep_sheet_str(ws, c++, reason ? reason : "", f);
    free(text);
}

/* ---- summary and details, a part at a time -------------------------------- */

/* The summary's and the details' sheets, made up front in their order (a
 * sheet's place is fixed when it is added) as libxlsxwriter placeholders
 * holding the header, their rows written beside them a part at a time
 * (rep_sheet.c) and spliced in when the workbook is closed. */
typedef struct msp_sheets {
    rep_sheet_t *sum, *det;
    int *sum_ws, *det_ws; /* their worksheet numbers (sheet{N}.xml) */
    size_t n_sum, n_det;
    size_t seq_rec, seq_ten; /* summary / details data rows written */
    size_t links;            /* summary rows given a link so far */
    rep_sst_t *sst;          /* the workbook's shared strings */
} msp_sheets_t;

static void msp_sheets_free(msp_sheets_t *sh)
{
    for (size_t s = 0; sh->sum && s < sh->n_sum; s++)
        rep_sheet_free(&sh->sum[s]);
    for (size_t s = 0; sh->det && s < sh->n_det; s++)
        rep_sheet_free(&sh->det[s]);
    free(sh->sum);
    free(sh->det);
    free(sh->sum_ws);
    free(sh->det_ws);
    rep_sst_free(sh->sst);
    memset(sh, 0, sizeof *sh);
}

/* One placeholder and its rows: MSP_OK, or the failure recorded. */
static msp_err msp_rows_sheet(msp_xlsx_t *x, const char *base, size_t s, const char *const *cols,
                              const double *widths, size_t ncols, size_t nrows, rep_sheet_t *rows,
                              int *ws_no)
{
    char name[32];
    cmp_sheet_name(name, sizeof name, base, s);
    if (!msp_add_sheet(x, name, cols, widths, ncols, nrows))
        return msp_fail(MSP_ERR_NOMEM, "out of memory writing the report in %s", x->dir);
    *ws_no = x->n_ws;
    return rep_sheet_open(rows, x->dir, (int)ncols);
}

static msp_err msp_make_sheets(msp_xlsx_t *x, const cmp_source_t *src, msp_sheets_t *sh,
                               int details_only)
{
    int stats = src->head->stats_mode != 0;
    sh->n_sum = details_only ? 0 : msp_sheet_count(src->n_records);
    sh->n_det = msp_sheet_count(src->n_tensors);
    sh->sum = calloc(sh->n_sum + 1, sizeof *sh->sum);
    sh->det = calloc(sh->n_det, sizeof *sh->det);
    sh->sum_ws = calloc(sh->n_sum + 1, sizeof *sh->sum_ws);
    sh->det_ws = calloc(sh->n_det, sizeof *sh->det_ws);
    sh->sst = rep_sst_new();
    if (!sh->sum || !sh->det || !sh->sum_ws || !sh->det_ws || !sh->sst) {
        msp_sheets_free(sh);
        return msp_fail(MSP_ERR_NOMEM, "out of memory writing the report in %s", x->dir);
    }
    msp_err rc = MSP_OK;
    for (size_t s = 0; s < sh->n_sum && !rc; s++)
        rc = msp_rows_sheet(x, "summary", s, msp_summary_cols, msp_summary_width,
                            MSP_NCOLS(msp_summary_cols), msp_sheet_rows(src->n_records, s),
                            &sh->sum[s], &sh->sum_ws[s]);
    for (size_t s = 0; s < sh->n_det && !rc; s++)
        rc = msp_rows_sheet(x, "details", s,
                            stats ? cmp_details_cols_stats : cmp_details_cols_tensor,
                            stats ? msp_details_width_stats : msp_details_width_tensor,
                            stats ? CMP_DETAILS_NCOLS_STATS : CMP_DETAILS_NCOLS_TENSOR,
                            msp_sheet_rows(src->n_tensors, s), &sh->det[s], &sh->det_ws[s]);
    for (size_t s = 0; s < sh->n_sum && !rc; s++)
        sh->sum[s].sst = sh->sst;
    for (size_t s = 0; s < sh->n_det && !rc; s++)
        sh->det[s].sst = sh->sst;
    return rc;
}

static void msp_next_details_row(const msp_xlsx_t *x, msp_sheets_t *sh, int stats,
                                 const msp_row_ctx_t *ctx)
{
    size_t s, row1;
    msp_details_pos(sh->seq_ten, &s, &row1);
    if (s >= sh->n_det)
        return; /* the counts said fewer rows: nothing to write them in */
    msp_details_row(x, &sh->det[s], row1 - 1, stats, ctx);
    sh->seq_ten++;
}

static void msp_summary_row(const msp_xlsx_t *x, msp_sheets_t *sh, const msp_record_cmp_t *rec,
                            const char *reason)
{
    size_t s = sh->seq_rec / cmp_xlsx_data_rows;
    if (s >= sh->n_sum)
        return;
    rep_sheet_t *ws = &sh->sum[s];
    size_t r = sh->seq_rec % cmp_xlsx_data_rows + 1;
    int bold = rec->is_root_cause != 0;
    unsigned h = (unsigned)rec->highlight <= MSP_HL_RED ? (unsigned)rec->highlight : 0;
    int f = msp_xf(x, rec->highlight, bold);
    int c = 0;
    sh->seq_rec++;
    rep_sheet_row(ws, r);
    msp_rs_num(ws, c++, (double)rec->step, f);
    msp_rs_num(ws, c++, (double)rec->rank, f);
    rep_sheet_str(ws, c++, rec->name, f);
    rep_sheet_str(ws, c++, rec->bench_name ? rec->bench_name : "N/A", f);
    msp_rs_num(ws, c++, (double)rec->order, f);
    msp_rs_num(ws, c++, rec->worst_cosine, f);
    msp_rs_num(ws, c++, rec->worst_max_abs, f);
    rep_sheet_str_shared(ws, c++, cmp_verdict_text(rec->verdict), f);
    rep_sheet_str_shared(ws, c++, cmp_cause_text(rec->cause), f);
    char mark[32] = "";
    if (rec->is_root_cause)
        snprintf(mark, sizeof mark, "ROOT CAUSE");
    else if (rec->suspect_rank > 0)
        snprintf(mark, sizeof mark, "suspect %d", rec->suspect_rank);
    rep_sheet_str(ws, c++, mark, f);
    /* Details: a link to where its rows start in the details now */
    if (rec->n_tensors == 0) {
        rep_sheet_str(ws, c++, "", f);
    } else {
        size_t dsheet, drow;
        msp_details_pos(sh->seq_ten, &dsheet, &drow);
        char text[64]; /* details!A<row>, details_2!A<row>, ... */
        size_t tl = cmp_sheet_name(text, 32, "details", dsheet);
        memcpy(text + tl, "!A", 2);
        tl += 2;
        tl += msp_u64_digits(text + tl, (uint64_t)drow);
        text[tl] = '\0';
        if (sh->links++ < MSP_XLSX_MAX_URLS) {
            rep_sheet_link(ws, c++, text, x->xf_link[h][bold]);
        } else {
            /* Excel keeps at most 65530 hyperlinks per sheet; a formula has no cap. */
            char formula[160];
            snprintf(formula, sizeof formula, "=HYPERLINK(\"#%s\",\"%s\")", text, text);
            rep_sheet_formula_str(ws, c++, formula, text, x->xf_link[h][bold]);
        }
    }
    /* msprobe 26's Result after the link column, then replay's */
    rep_sheet_str_shared(ws, c++, cmp_result_text(rec->result), f);
    msp_put_replay(ws, c, rec, reason, f);
}

/* One part's rows: each record's summary row, then its details rows; the
 * tensors no record claims last. */
static msp_err msp_write_part(const msp_xlsx_t *x, msp_sheets_t *sh, const cmp_source_t *src,
                              const msp_compare_result_t *part, size_t rec_base, size_t ten_base)
{
    msp_err rc = cmp_report_check_ranges(part);
    if (rc)
        return rc;
    int stats = src->head->stats_mode != 0;
    unsigned char *claimed = calloc(part->n_tensors + 1, 1);
    if (!claimed)
        return msp_fail(MSP_ERR_NOMEM, "out of memory writing the report");
    for (size_t i = 0; i < part->n_records; i++) {
        const msp_record_cmp_t *rec = &part->records[i];
        /* a new summary sheet starts its own count of hyperlinks */
        if (sh->seq_rec % cmp_xlsx_data_rows == 0)
            sh->links = 0;
        if (sh->n_sum)
            msp_summary_row(x, sh, rec, src->reason(src, rec_base + i));
        for (size_t k = 0; k < rec->n_tensors; k++) {
            size_t ti = rec->first_tensor + k;
            claimed[ti] = 1;
            msp_row_ctx_t ctx = {rec, 0, k == 0, part, ti};
            ctx.bold = rec->is_root_cause &&
                       (src->root_tensor >= 0 ? (long)(ten_base + ti) == src->root_tensor : k == 0);
            msp_next_details_row(x, sh, stats, &ctx);
        }
    }
    for (size_t t = 0; t < part->n_tensors; t++) {
        if (claimed[t])
            continue;
        msp_row_ctx_t ctx = {NULL, 0, 0, part, t};
        msp_next_details_row(x, sh, stats, &ctx);
    }
    free(claimed);
    return MSP_OK;
}

/* The rows of every part, into sheets made here; sp[*n_sp] says which
 * worksheet entry each one fills (sh is the caller's to free). */
static msp_err msp_write_rows(msp_xlsx_t *x, const cmp_book_t *b, msp_sheets_t *sh)
{
    const cmp_source_t *src = b->rows;
    msp_err rc = msp_make_sheets(x, src, sh, b->details_only);
    for (size_t i = 0; i < src->n_parts && !rc; i++) {
        msp_compare_result_t *part = NULL;
        size_t rb = 0, tb = 0;
        if ((rc = src->load(src, i, &part, &rb, &tb)))
            break;
        rc = msp_write_part(x, sh, src, part, rb, tb);
        /* the error-flow chart of the first step compared (rep_xlsx_chart.c),
         * while its part is here */
        if (!rc && i == 0 && b->chart_rows && x->err == LXW_NO_ERROR)
            msp_xlsx_note(x, (lxw_error)cmp_xlsx_error_flow(x->wb, part), "error_flow", 0);
        src->unload(src, part);
    }
    for (size_t s = 0; s < sh->n_sum && !rc; s++)
        rc = rep_sheet_end(&sh->sum[s]);
    for (size_t s = 0; s < sh->n_det && !rc; s++)
        rc = rep_sheet_end(&sh->det[s]);
    return rc;
}

/* ---- the ranks sheet and the suspects sheet ------------------------------------- */

static const char *const msp_ranks_cols[] = {
    "Rank",         "Pairs",     "Records", "Tensors", "Failing Records", "Worst Output Cosine",
    "Error Origin", "From Rank", "Step",    "Record",  "First Suspect",   "Details",
};
static const double msp_ranks_width[] = {7, 7, 10, 10, 10, 14, 14, 9, 7, 48, 12, 24};

static const char *msp_origin_text(int origin)
{
    return origin == MSP_ORIGIN_INTRODUCED  ? "introduced"
           : origin == MSP_ORIGIN_INHERITED ? "inherited"
                                            : "none";
}

/* One row per rank: its counts and where its error began (msprobe-compare(1),
 * RANKS). link(rank, buf) gives the Details cell's target, or "" for none. */
static void msp_write_ranks(msp_xlsx_t *x, const msp_compare_result_t *head,
                            void (*link)(const void *ud, int64_t rank, char *buf, size_t n),
                            const void *ud)
{
    lxw_worksheet *ws = msp_add_sheet(x, "ranks", msp_ranks_cols, msp_ranks_width,
                                      MSP_NCOLS(msp_ranks_cols), head->n_ranks);
    for (size_t i = 0; ws && i < head->n_ranks && x->err == LXW_NO_ERROR; i++) {
        const msp_rank_summary_t *k = &head->ranks[i];
        lxw_row_t r = (lxw_row_t)(i + 1);
        int first = head->first_rank == (long)i;
        lxw_format *f = msp_fmt(x,
                                k->origin == MSP_ORIGIN_INTRODUCED  ? MSP_HL_RED
                                : k->origin == MSP_ORIGIN_INHERITED ? MSP_HL_YELLOW
                                                                    : MSP_HL_NONE,
                                first);
        lxw_col_t c = 0;
        msp_put_num(x, ws, "ranks", r, c++, (double)k->rank, f);
        msp_put_num(x, ws, "ranks", r, c++, (double)k->pairs, f);
        msp_put_num(x, ws, "ranks", r, c++, (double)k->records, f);
        msp_put_num(x, ws, "ranks", r, c++, (double)k->tensors, f);
        msp_put_num(x, ws, "ranks", r, c++, (double)k->failing, f);
        msp_put_num(x, ws, "ranks", r, c++, k->worst_cosine, f);
        char origin[48];
        snprintf(origin, sizeof origin, "%s%s", msp_origin_text(k->origin),
                 first ? " (first)" : "");
        msp_put_str(x, ws, "ranks", r, c++, origin, f);
        if (k->origin == MSP_ORIGIN_INHERITED)
            msp_put_num(x, ws, "ranks", r, c++, (double)k->from_rank, f);
        else
            msp_put_str(x, ws, "ranks", r, c++, "", f);
        if (k->at_step >= 0)
            msp_put_num(x, ws, "ranks", r, c++, (double)k->at_step, f);
        else
            msp_put_str(x, ws, "ranks", r, c++, "", f);
        msp_put_str(x, ws, "ranks", r, c++, k->at ? k->at : "", f);
        if (k->first_suspect >= 0)
            msp_put_num(x, ws, "ranks", r, c++, (double)k->first_suspect + 1, f);
        else
            msp_put_str(x, ws, "ranks", r, c++, "", f);
        char target[96] = "";
        link(ud, k->rank, target, sizeof target);
        if (target[0]) {
            char url[128];
            snprintf(url, sizeof url, "%s%s", strchr(target, '!') ? "internal:" : "", target);
            msp_xlsx_note(x,
                          worksheet_write_url_opt(ws, r, c, url, x->link[0][first], target, NULL),
                          "ranks", r);
        } else {
            msp_put_str(x, ws, "ranks", r, c, "", f);
        }
    }
}

static const char *const msp_suspects_cols[] = {
    "#",          "Step",          "Rank",  "Name",      "Tensor", "Input Err",
    "Output Err", "Amplification", "Order", "From Rank", "Reason",
};
static const double msp_suspects_width[] = {6, 7, 7, 48, 20, 12, 12, 14, 8, 9, 80};

/* The ranked suspects, for a tree whose summaries live in one workbook per rank. */
static void msp_write_suspects(msp_xlsx_t *x, const msp_compare_result_t *head)
{
    lxw_worksheet *ws = msp_add_sheet(x, "suspects", msp_suspects_cols, msp_suspects_width,
                                      MSP_NCOLS(msp_suspects_cols), head->n_suspects);
    for (size_t i = 0; ws && i < head->n_suspects && x->err == LXW_NO_ERROR; i++) {
        const msp_suspect_t *s = &head->suspects[i];
        const msp_record_cmp_t *rec = &head->records[s->record];
        const msp_tensor_cmp_t *t = s->tensor >= 0 ? &head->tensors[s->tensor] : NULL;
        const char *tn = t ? (t->npu_name ? t->npu_name : t->bench_name) : NULL;
        size_t rl = strlen(rec->name);
        const char *role = tn && !strncmp(tn, rec->name, rl) && tn[rl] == '.' ? tn + rl + 1 : "";
        lxw_row_t r = (lxw_row_t)(i + 1);
        lxw_format *f = msp_fmt(x, MSP_HL_NONE, i == 0);
        lxw_col_t c = 0;
        msp_put_num(x, ws, "suspects", r, c++, (double)i + 1, f);
        msp_put_num(x, ws, "suspects", r, c++, (double)rec->step, f);
        msp_put_num(x, ws, "suspects", r, c++, (double)rec->rank, f);
        char *name = msp_asprintf("%s%s", s->is_gap ? "before " : "", rec->name);
        msp_put_str(x, ws, "suspects", r, c++, name ? name : rec->name, f);
        free(name);
        msp_put_str(x, ws, "suspects", r, c++, role, f);
        msp_put_num(x, ws, "suspects", r, c++, s->in_err, f);
        msp_put_num(x, ws, "suspects", r, c++, s->out_err, f);
        msp_put_num(x, ws, "suspects", r, c++, s->amplification, f);
        msp_put_num(x, ws, "suspects", r, c++, (double)rec->order, f);
        int64_t from = head->suspect_from ? head->suspect_from[i] : -1;
        if (from >= 0)
            msp_put_num(x, ws, "suspects", r, c++, (double)from, f);
        else
            msp_put_str(x, ws, "suspects", r, c++, "", f);
        msp_put_str(x, ws, "suspects", r, c++, s->reason, f);
    }
}

/* ---- workbooks ------------------------------------------------------------ */

/* The rows' sheets spliced into the workbook libxlsxwriter wrote at from,
 * giving to (rep_book.c). */
static msp_err msp_splice_rows(const msp_sheets_t *sh, const char *from, const char *to, int zip64)
{
    size_t n = sh->n_sum + sh->n_det;
    rep_splice_t *sp = calloc(n + 1, sizeof *sp);
    if (!sp)
        return msp_fail(MSP_ERR_NOMEM, "out of memory writing %s", to);
    for (size_t i = 0; i < n; i++) {
        int sum = i < sh->n_sum;
        size_t k = sum ? i : i - sh->n_sum;
        snprintf(sp[i].entry, sizeof sp[i].entry, "xl/worksheets/sheet%d.xml",
                 sum ? sh->sum_ws[k] : sh->det_ws[k]);
        sp[i].rows = sum ? &sh->sum[k] : &sh->det[k];
    }
    msp_err rc = rep_book_splice(from, to, sp, n, zip64, sh->sst);
    free(sp);
    return rc;
}

msp_err cmp_write_book(const char *out_dir, const char *file, const cmp_book_t *b)
{
    msp_xlsx_t x = {0};
    msp_sheets_t sh = {0};
    msp_err rc = MSP_OK;
    char *path = msp_asprintf("%s/%s", out_dir, file);
    char *tmp = path ? msp_atomic_tmp_name(path) : NULL;
    /* with rows, libxlsxwriter's workbook is a step on the way to tmp */
    char *lxw = tmp && b->rows ? msp_atomic_tmp_name(tmp) : NULL;
    char *tmpdir = strdup(out_dir);
    if (!path || !tmp || (b->rows && !lxw) || !tmpdir) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory writing the report in %s", out_dir);
        goto cleanup;
    }
    x.dir = out_dir;
    /* libxlsxwriter only finds out at close that it cannot write, and then
     * prints to stderr itself; find out first and say it our way. */
    if (access(out_dir, W_OK | X_OK) != 0) {
        rc = msp_fail(MSP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        goto cleanup;
    }
    int zip64 = b->zip64_rows > msp_zip64_rows;
    lxw_workbook_options opts = {
        .constant_memory = LXW_TRUE,
        .tmpdir = tmpdir,
        .use_zip64 = zip64 ? LXW_TRUE : LXW_FALSE,
    };
    /* libxlsxwriter's own temp files in memory: the sheets it writes here
     * are small (a row a rank, the suspects, the chart), the big ones ours */
    rep_tmpfile_in_memory(1);
    x.wb = workbook_new_opt(lxw ? lxw : tmp, &opts);
    if (!x.wb) {
        rc = msp_fail(MSP_ERR_XLSX, "cannot start workbook %s (out of memory?)", tmp);
        goto cleanup;
    }
    msp_xlsx_formats(&x);
    if (b->ranks_sheet)
        msp_write_ranks(&x, b->head, b->link, b->link_ud);
    if (b->suspects_sheet && x.err == LXW_NO_ERROR)
        msp_write_suspects(&x, b->head);
    if (b->rows && x.err == LXW_NO_ERROR && (rc = msp_write_rows(&x, b, &sh)) == MSP_ERR_IO) {
        char detail[1024];
        snprintf(detail, sizeof detail, "%s", msp_last_error());
        rc = msp_fail(rc, "cannot write %s: %s", path, detail);
    }
    /* the error-flow chart of the first step compared (rep_xlsx_chart.c) */
    if (!rc && b->chart && x.err == LXW_NO_ERROR)
        msp_xlsx_note(&x, (lxw_error)cmp_xlsx_error_flow(x.wb, b->chart), "error_flow", 0);
    if (rc || x.err != LXW_NO_ERROR) {
        if (!rc)
            rc = msp_fail(MSP_ERR_XLSX, "cannot write %s: sheet %s row %zu: %s", path, x.err_sheet,
                          x.err_row + 1, lxw_strerror(x.err));
        lxw_workbook_free(x.wb);
        x.wb = NULL;
        goto cleanup;
    }
    lxw_error e = workbook_close(x.wb);
    x.wb = NULL;
    if (e != LXW_NO_ERROR) {
        rc = msp_fail(MSP_ERR_XLSX, "cannot write %s: %s", path, lxw_strerror(e));
        goto cleanup;
    }
    if (lxw)
        rc = msp_splice_rows(&sh, lxw, tmp, zip64);
    if (!rc)
        rc = msp_atomic_commit(tmp, path);
cleanup:
    rep_tmpfile_in_memory(0);
    if (lxw)
        msp_atomic_discard(lxw);
    if (rc != MSP_OK)
        msp_atomic_discard(tmp); /* a name given ends in a commit or a discard */
    msp_sheets_free(&sh);
    free(tmpdir);
    free(lxw);
    free(tmp);
    free(path);
    return rc;
}
