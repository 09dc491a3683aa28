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
#include <unistd.h>

/* Copy the file at path, whole, to f: an earlier check's rows, header first. */
static msp_err acc_copy(FILE *f, const char *path)
{
    FILE *in = fopen(path, "rb");
    if (!in)
        return msp_fail(MSP_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, f) != n)
            break;
    int bad = ferror(in) || ferror(f);
    fclose(in);
    return bad ? msp_fail(MSP_ERR_IO, "cannot copy %s: %s", path, strerror(errno)) : MSP_OK;
}

/* Write res's rows to path (a temp name, then renamed): after a header, or
 * after the whole of the CSV that is at path already when append. */
static msp_err acc_write(const char *path, const msp_acc_result_t *res, int details, int append)
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
    if (append) {
        msp_err rc = acc_copy(f, path);
        if (rc != MSP_OK) {
            fclose(f);
            msp_atomic_discard(tmp);
            free(tmp);
            return rc;
        }
    }
    if (details) {
        for (int c = 0; c < CMP_ACC_DETAIL_NCOLS && !append; c++)
            msp_csv_field(f, cmp_acc_detail_cols[c], c == 0);
        if (!append)
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
        for (int c = 0; c < 4 && !append; c++)
            msp_csv_field(f, cols[c], c == 0);
        if (!append)
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
        rc = acc_write(rp, res, 0, 0);
    if (rc == MSP_OK)
        rc = acc_write(dp, res, 1, 0);
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

/* accuracy_checking_details_{stamp}.csv beside result_csv, which must be
 * named accuracy_checking_result_{stamp}.csv (14 digits), as msprobe checks,
 * into *out (malloc'd). */
static msp_err acc_details_beside(const char *result_csv, char **out)
{
    *out = NULL;
    static const char pre[] = "accuracy_checking_result_";
    const char *base = strrchr(result_csv, '/');
    base = base ? base + 1 : result_csv;
    size_t pl = sizeof pre - 1, i = 0;
    int ok = strncmp(base, pre, pl) == 0;
    for (; ok && i < 14; i++)
        ok = base[pl + i] >= '0' && base[pl + i] <= '9';
    if (!ok || strcmp(base + pl + 14, ".csv") != 0)
        return msp_fail(MSP_ERR_USAGE,
                        "%s: not an acc_check result CSV (its name must be "
                        "accuracy_checking_result_YYYYmmddHHMMSS.csv)",
                        result_csv);
    char *d = msp_asprintf("%.*saccuracy_checking_details_%s", (int)(base - result_csv), result_csv,
                           base + pl);
    if (!d)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if (access(result_csv, R_OK | W_OK) != 0 || access(d, R_OK | W_OK) != 0) {
        int e = errno;
        int res_bad = access(result_csv, R_OK | W_OK) != 0;
        msp_err rc = msp_fail(MSP_ERR_USAGE, "cannot continue %s: %s: %s", result_csv,
                              res_bad ? result_csv : d, strerror(e));
        free(d);
        return rc;
    }
    *out = d;
    return MSP_OK;
}

msp_err msp_acc_read_checked(const char *result_csv, char ***names, size_t *n, int *failed)
{
    *names = NULL;
    *n = 0;
    *failed = 0;
    char *d = NULL;
    msp_err rc = acc_details_beside(result_csv, &d);
    free(d);
    if (rc != MSP_OK)
        return rc;
    cmp_csv_t c;
    memset(&c, 0, sizeof c);
    rc = cmp_csv_read(result_csv, &c);
    int col = rc == MSP_OK ? cmp_csv_col(&c, "API name") : -1;
    if (rc == MSP_OK && col < 0)
        rc = msp_fail(MSP_ERR_USAGE, "%s: not an acc_check result CSV (no column 'API name')",
                      result_csv);
    char **v = rc == MSP_OK ? calloc(c.n + 1, sizeof *v) : NULL;
    if (rc == MSP_OK && !v)
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
    size_t m = 0;
    for (size_t r = 1; rc == MSP_OK && r < c.n; r++) {
        if ((size_t)col >= c.nf[r] || !c.rows[r][col][0])
            continue;
        for (size_t k = 1; k < 3 && col + k < c.nf[r]; k++) {
            msp_acc_status_t st = cmp_acc_status_parse(c.rows[r][col + k]);
            *failed |= st == MSP_ACC_ERROR || st == MSP_ACC_WARNING;
        }
        if (!(v[m++] = strdup(c.rows[r][col])))
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    cmp_csv_free(&c);
    if (rc != MSP_OK) {
        msp_free_strings(v, m);
        return rc;
    }
    *names = v;
    *n = m;
    return MSP_OK;
}

msp_err msp_acc_append_csv(const msp_acc_result_t *res, const char *result_csv, char **details_path)
{
    if (details_path)
        *details_path = NULL;
    char *d = NULL;
    msp_err rc = acc_details_beside(result_csv, &d);
    if (rc == MSP_OK)
        rc = acc_write(result_csv, res, 0, 1);
    if (rc == MSP_OK)
        rc = acc_write(d, res, 1, 1);
    if (rc == MSP_OK && details_path) {
        *details_path = d;
        d = NULL;
    }
    free(d);
    return rc;
}
