/* Private to the report writers and their tests (tests/cli/report_from_json.c). */
#ifndef MSPROBE_CMP_REPORT_H
#define MSPROBE_CMP_REPORT_H

#include "msprobe/compare.h"

#include <stddef.h>

/* Details columns: msprobe's names, then Error Origin, Step, Rank. The sizes
 * are part of the declaration so a list that drifts fails to compile. */
#define CMP_DETAILS_NCOLS_TENSOR 25
#define CMP_DETAILS_NCOLS_STATS 27
extern const char *const cmp_details_cols_tensor[CMP_DETAILS_NCOLS_TENSOR];
extern const char *const cmp_details_cols_stats[CMP_DETAILS_NCOLS_STATS];

/* "Yes" / "No" / "Warning", and "introduced" / "inherited" / "". */
const char *cmp_verdict_text(msp_verdict_t v);
const char *cmp_cause_text(msp_cause_t c);

/* MSP_ERR_INTERNAL if a record's tensor range lies outside res->tensors. */
msp_err cmp_report_check_ranges(const msp_compare_result_t *res);

/* Data rows per sheet before "details" continues in "details_2" (and
 * "summary" in "summary_2"). 0 restores Excel's limit, 1,048,575. Only tests
 * lower it, to reach the overflow path without writing a million rows; not
 * thread-safe, set it before writing. */
void cmp_report_set_rows_per_sheet(size_t rows);

#endif
