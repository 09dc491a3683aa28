/* acc_check's two CSVs (msprobe-acc_check(1), OUTPUT):
 * accuracy_checking_result_{stamp}.csv, one row per API, and
 * accuracy_checking_details_{stamp}.csv, one row per output, in msprobe's
 * columns, each written to a temp name and renamed. The check itself, which
 * fills the result they are written from, is pc_acc.c. */
#include "pc_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static msp_err acc_write(const char *path, const msp_acc_result_t *res, int details)
{
    char *tmp = msp_atomic_tmp_name(path);
    FILE *f = tmp ? fopen(tmp, "w") : NULL;
    if (!f) {
        msp_err rc = tmp ? msp_fail(MSP_ERR_IO, "cannot write %s: %s", tmp, strerror(errno))
                         : msp_fail(MSP_ERR_NOMEM, "out of memory");
        msp_atomic_discard(tmp);
        free(tmp);
        return rc;
    }
    if (details) {
        for (int c = 0; c < CMP_ACC_DETAIL_NCOLS; c++)
            msp_csv_field(f, cmp_acc_detail_cols[c], c == 0);
        cmp_csv_end_row(f);
        for (size_t i = 0; i < res->n_outputs; i++) {
            const msp_acc_output_t *o = &res->outputs[i];
            int skip = o->status == MSP_ACC_SKIP && !o->have;
            msp_csv_field(f, o->name, 1);
            msp_csv_field(f, skip ? " " : o->bench_dtype, 0);
            msp_csv_field(f, skip ? " " : o->device_dtype, 0);
            msp_csv_field(f, skip ? " " : o->shape, 0);
            for (int m = 0; m < MSP_ACC_NMETRICS; m++)
                cmp_csv_metric(f, o->metric[m], (o->have >> m) & 1u);
            msp_csv_field(f, cmp_acc_status_text(o->status), 0);
            msp_csv_field(f, o->message, 0);
            cmp_csv_end_row(f);
        }
    } else {
        static const char *const cols[] = {"API name", "Forward Test Success",
                                           "Backward Test Success", "Message"};
        for (int c = 0; c < 4; c++)
            msp_csv_field(f, cols[c], c == 0);
        cmp_csv_end_row(f);
        for (size_t i = 0; i < res->n_apis; i++) {
            const msp_acc_api_t *a = &res->apis[i];
            msp_csv_field(f, a->name, 1);
            msp_csv_field(f, cmp_acc_status_text(a->forward), 0);
            msp_csv_field(f, cmp_acc_status_text(a->backward), 0);
            msp_csv_field(f, a->message, 0);
            cmp_csv_end_row(f);
        }
    }
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    msp_err rc = bad ? msp_fail(MSP_ERR_IO, "cannot write %s: %s", path, strerror(errno))
                     : msp_atomic_commit(tmp, path);
    if (bad)
        msp_atomic_discard(tmp);
    free(tmp);
    return rc;
}

msp_err msp_acc_write_csv(const msp_acc_result_t *res, const char *out_dir, char **result_path,
                          char **details_path)
{
    if (result_path)
        *result_path = NULL;
    if (details_path)
        *details_path = NULL;
    msp_err rc = msp_mkdirs(out_dir);
    if (rc != MSP_OK)
        return rc;
    char stamp[32];
    cmp_acc_stamp(stamp, sizeof stamp);
    char *rp = msp_asprintf("%s/accuracy_checking_result_%s.csv", out_dir, stamp);
    char *dp = msp_asprintf("%s/accuracy_checking_details_%s.csv", out_dir, stamp);
    if (!rp || !dp)
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
    if (rc == MSP_OK)
        rc = acc_write(rp, res, 0);
    if (rc == MSP_OK)
        rc = acc_write(dp, res, 1);
    if (rc == MSP_OK && result_path) {
        *result_path = rp;
        rp = NULL;
    }
    if (rc == MSP_OK && details_path) {
        *details_path = dp;
        dp = NULL;
    }
    free(rp);
    free(dp);
    return rc;
}
