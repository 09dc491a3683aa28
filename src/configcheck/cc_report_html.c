/* result.html of config_check: the items, pass or fail, and their
 * differences, as one page that opens offline (the script and style below are
 * embedded at build time, Chart.js by common's msp_html_write_page). A table
 * of more than CC_HTML_MAX_ROWS rows is cut there, and the page says so:
 * result.xlsx has every row. */
#include "cc_internal.h"

#include <stdlib.h>

/* Generated from cc_report_html.js / .css (src/configcheck/CMakeLists.txt). */
extern const char msp_cc_html_js[];
extern const char msp_cc_html_css[];

#define CC_HTML_MAX_ROWS 5000
#define CC_HTML_MAX_LINES 5000

static void cc_key(msp_buf_t *b, const char *k)
{
    msp_buf_json_str(b, k);
    msp_buf_put(b, ":", 1);
}

static void cc_lines(msp_buf_t *b, const char *key, char **v, size_t n)
{
    cc_key(b, key);
    msp_buf_put(b, "[", 1);
    for (size_t i = 0; i < n && i < CC_HTML_MAX_LINES; i++) {
        if (i)
            msp_buf_put(b, ",", 1);
        msp_buf_json_str(b, v[i]);
    }
    msp_buf_puts(b, "],");
}

static void cc_table(msp_buf_t *b, const msp_cc_table_t *t)
{
    cc_key(b, "table");
    if (!t) {
        msp_buf_puts(b, "null,");
        return;
    }
    msp_buf_printf(b, "{\"nrows\":%zu,\"cols\":[", t->nrows);
    for (size_t c = 0; c < t->ncols; c++) {
        if (c)
            msp_buf_put(b, ",", 1);
        msp_buf_json_str(b, t->cols[c]);
    }
    msp_buf_puts(b, "],\"rows\":[");
    for (size_t r = 0; r < t->nrows && r < CC_HTML_MAX_ROWS && !b->oom; r++) {
        msp_buf_printf(b, "%s{\"level\":%d,\"cells\":[", r ? "," : "", t->levels[r]);
        for (size_t c = 0; c < t->ncols; c++) {
            const msp_cc_cell_t *cell = &t->cells[r * t->ncols + c];
            if (c)
                msp_buf_put(b, ",", 1);
            switch (cell->kind) {
            case MSP_CC_CELL_STR:
                msp_buf_json_str(b, cell->s);
                break;
            case MSP_CC_CELL_NUM:
                msp_buf_json_num(b, cell->d, 17);
                break;
            case MSP_CC_CELL_BOOL:
                msp_buf_puts(b, cell->d > 0.5 ? "true" : "false");
                break;
            default:
                msp_buf_puts(b, "null");
                break;
            }
        }
        msp_buf_puts(b, "]}");
    }
    msp_buf_puts(b, "]},");
}

msp_err msp_cc_report_write_html(const msp_cc_result_t *r, const char *out_dir)
{
    if (!r || !out_dir)
        return msp_fail(MSP_ERR_USAGE, "config_check report: no result or no output directory");
    msp_err rc = msp_mkdirs(out_dir);
    if (rc != MSP_OK)
        return rc;
    char *path = msp_asprintf("%s/result.html", out_dir);
    if (!path)
        return msp_fail(MSP_ERR_NOMEM, "out of memory writing the report in %s", out_dir);
    msp_buf_t b = {0};
    msp_buf_puts(&b, "{\"kind\":\"config_check\",");
    cc_key(&b, "version");
    msp_buf_json_str(&b, MSP_VERSION);
    msp_buf_put(&b, ",", 1);
    cc_key(&b, "bench");
    msp_buf_json_str(&b, r->bench_path);
    msp_buf_put(&b, ",", 1);
    cc_key(&b, "cmp");
    msp_buf_json_str(&b, r->cmp_path);
    msp_buf_printf(&b, ",\"salt_mismatch\":%d,\"max_rows\":%d,\"max_lines\":%d,\"items\":[",
                   r->salt_mismatch, CC_HTML_MAX_ROWS, CC_HTML_MAX_LINES);
    for (int i = 0; i < MSP_CC_N_ITEMS; i++) {
        const msp_cc_item_result_t *it = &r->items[i];
        msp_buf_puts(&b, i ? ",{" : "{");
        cc_key(&b, "name");
        msp_buf_json_str(&b, it->name);
        msp_buf_put(&b, ",", 1);
        cc_key(&b, "status");
        msp_buf_json_str(&b, it->status == MSP_CC_PASS   ? "pass"
                             : it->status == MSP_CC_FAIL ? "fail"
                                                         : "n/a");
        msp_buf_put(&b, ",", 1);
        cc_key(&b, "note");
        if (it->note)
            msp_buf_json_str(&b, it->note);
        else
            msp_buf_puts(&b, "null");
        msp_buf_printf(&b, ",\"n_failed\":%zu,\"n_warnings\":%zu,\"n_info\":%zu,", it->n_failed,
                       it->n_warnings, it->n_info);
        cc_lines(&b, "failed", it->failed, it->n_failed);
        cc_lines(&b, "info", it->info, it->n_info);
        cc_table(&b, it->table);
        msp_buf_puts(&b, "\"end\":1}");
    }
    msp_buf_puts(&b, "]}");
    if (b.oom) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory writing %s", path);
    } else {
        int failed = msp_cc_result_failed(r);
        rc = msp_html_write_page(path,
                                 failed ? "msprobe config_check: FAIL"
                                        : "msprobe config_check: pass",
                                 msp_cc_html_css, b.data, b.len, msp_cc_html_js);
    }
    msp_buf_free(&b);
    free(path);
    return rc;
}
