/* Private to merge_result (src/merge): the compare workbooks it reads back
 * (mrg_xlsx_read.c), its config (mrg_cfg.c) and the merge itself
 * (mrg_result.c, msprobe-merge_result(1)). */
#ifndef MSPROBE_MRG_INTERNAL_H
#define MSPROBE_MRG_INTERNAL_H

#include "cmp_internal.h"
#include "msprobe/merge.h"

/* ---- compare results read back (mrg_xlsx_read.c) ------ */

typedef struct cmp_xlsx cmp_xlsx_t;
/* Open path's workbook: its sheet list and shared strings. */
msp_err cmp_xlsx_open(const char *path, cmp_xlsx_t **out);
size_t cmp_xlsx_sheet_count(const cmp_xlsx_t *x);
const char *cmp_xlsx_sheet_name(const cmp_xlsx_t *x, size_t i);
/* Each row of sheet i, in order: n cells as text (numbers as written; an
 * empty cell NULL). A non-zero return stops the reading and is returned. */
typedef msp_err (*cmp_xlsx_row_cb)(void *ud, size_t row, size_t n, const char *const *cells);
msp_err cmp_xlsx_rows(cmp_xlsx_t *x, size_t sheet, cmp_xlsx_row_cb cb, void *ud);
void cmp_xlsx_close(cmp_xlsx_t *x); /* NULL-safe */

/* ---- merge_result's config (mrg_cfg.c, for mrg_result.c) ------------- */

/* The APIs named (a row is kept when its NPU Name contains one) and the
 * compare indexes (columns) to merge. */
typedef struct cmp_merge_cfg {
    char **api;
    size_t n_api;
    char **index; /* NULL: every index of the compare's kind */
    size_t n_index;
} cmp_merge_cfg_t;
/* Free the n strings of v and v. */
void cmp_strv_free(char **v, size_t n);
void cmp_merge_cfg_free(cmp_merge_cfg_t *c);
/* Read path's config into *c (freed on error); an error names the line. */
msp_err cmp_merge_cfg_load(const char *path, cmp_merge_cfg_t *c);

#endif
