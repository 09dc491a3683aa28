/* Test driver: compare two dumps as msprobe compare does (msp_compare_stream,
 * a pair at a time) and write OUT/result.xlsx and OUT/result.csv as it does
 * (msp_report_tree_write), with the
 * data rows a sheet holds lowered from Excel's 1,048,575 so that the sheet
 * overflow and the per-rank workbooks are reached with few rows.
 *
 *   cmp_report_rows BENCH CMP OUT [--rows N] [--replay auto|off|all] [--top N]
 *
 * Prints one line per suspect, "SUSPECT step rank name [before]", then
 * "ROOT ..." and "FIRST_RANK r". Exit 0, or 2 with the error on stderr. */
#include "msprobe/compare.h"
#include "msprobe/report.h"

#include "rep_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_head(const msp_compare_result_t *r)
{
    for (size_t i = 0; i < r->n_suspects; i++) {
        const msp_record_cmp_t *rec = &r->records[r->suspects[i].record];
        printf("SUSPECT %lld %lld %s%s%s\n", (long long)rec->step, (long long)rec->rank, rec->name,
               r->suspects[i].is_gap ? " before" : "",
               r->suspect_from && r->suspect_from[i] >= 0 ? " via" : "");
    }
    if (r->root_record >= 0)
        printf("ROOT %s\n", r->records[r->root_record].name);
    printf("FIRST_RANK %lld\n",
           r->first_rank >= 0 ? (long long)r->ranks[r->first_rank].rank : -1LL);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: cmp_report_rows BENCH CMP OUT [--rows N] "
                        "[--replay auto|off|all] [--top N]\n");
        return 2;
    }
    msp_compare_opts_t o;
    msp_compare_opts_default(&o);
    for (int i = 4; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rows"))
            cmp_report_set_rows_per_sheet((size_t)strtoull(argv[i + 1], NULL, 10));
        else if (!strcmp(argv[i], "--replay"))
            o.replay = !strcmp(argv[i + 1], "off")   ? MSP_REPLAY_OFF
                       : !strcmp(argv[i + 1], "all") ? MSP_REPLAY_ALL
                                                     : MSP_REPLAY_AUTO;
        else if (!strcmp(argv[i], "--top"))
            o.top = atoi(argv[i + 1]);
    }
    o.replay_budget = 0; /* replay everything it chooses */
    msp_compare_tree_t *t = NULL;
    msp_err rc = msp_compare_stream(argv[1], argv[2], &o, NULL, &t);
    /* the workbooks and the csv as the CLI writes them: from one read of
     * the parts (report.h) */
    msp_report_set_t set = {.out_dir = argv[3], .xlsx = 1, .csv = 1};
    if (!rc && !(rc = msp_report_tree_write(t, &set, NULL)))
        print_head(msp_compare_tree_head(t));
    msp_compare_tree_free(t);
    if (rc) {
        fprintf(stderr, "cmp_report_rows: %s\n", msp_last_error());
        return 2;
    }
    return 0;
}
