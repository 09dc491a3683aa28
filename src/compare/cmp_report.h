/* Private to the report writers and their tests (tests/cli/report_from_json.c). */
#ifndef MSPROBE_CMP_REPORT_H
#define MSPROBE_CMP_REPORT_H

#include <stddef.h>

/* Data rows per sheet before "details" continues in "details_2" (and
 * "summary" in "summary_2"). 0 restores Excel's limit, 1,048,575. Only tests
 * lower it, to reach the overflow path without writing a million rows; not
 * thread-safe, set it before writing. */
void cmp_report_set_rows_per_sheet(size_t rows);

#endif
