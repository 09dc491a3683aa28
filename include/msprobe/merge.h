/* merge_result (src/merge, msprobe-merge_result(1)): compare results of
 * every rank read back and put side by side. */
#ifndef MSPROBE_MERGE_H
#define MSPROBE_MERGE_H

#include "msprobe/compare.h"

#ifdef __cplusplus
extern "C" {
#endif

/* msprobe's merge_result (msprobe-merge_result(1)): the metrics of the APIs
 * config_path names, from the compare results in input_dir (msprobe's
 * compare_result_rank{N}-rank{N}_{timestamp}.xlsx, or msprobe compare's
 * result.csv / result.xlsx / result_rank{R}.xlsx), one sheet per compare
 * index and one column per rank, into out_dir/multi_ranks_compare_merge.xlsx
 * (atomically). info (may be NULL) gets what was merged. */
typedef struct msp_merge_info {
    size_t files, ranks, rows, sheets;
} msp_merge_info_t;
msp_err msp_merge_result(const char *input_dir, const char *out_dir, const char *config_path,
                         msp_merge_info_t *info);

#ifdef __cplusplus
}
#endif
#endif
