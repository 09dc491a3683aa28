/* The suspect cards' samples the compare did not take while it had their
 * files open (cmp_sample.c): the two dumps are opened again, only the
 * step/rank files a sample needs, and each row is sampled as the compare
 * samples it (cmp_sample_tensor). */
#include "rep_internal.h"

#include <stdlib.h>
#include <string.h>

/* The file of (step, rank) in a scanned tree: a single file stands for itself. */
static const char *cmp_tree_file(const msp_dump_tree_t *t, int64_t step, int64_t rank)
{
    if (t->kind == MSP_TREE_FILE)
        return t->n_files && !t->files[0].error ? t->files[0].path : NULL;
    for (size_t i = 0; i < t->n_files; i++) {
        const msp_dump_entry_t *e = &t->files[i];
        if (!e->error && e->writer == 0 && e->rank == rank && (e->step < 0 || e->step == step))
            return e->path;
    }
    return NULL;
}

static const msp_record_info_t *cmp_find_record(const msp_dump_file_t *f, const char *name)
{
    for (size_t i = 0; name && i < f->n_records; i++)
        if (strcmp(f->records[i].name, name) == 0)
            return &f->records[i];
    return NULL;
}

struct cmp_owner_key {
    const msp_compare_result_t *res;
    size_t ti;
};

/* Record i's tensor range ends at or before row ti. */
static int cmp_owner_before(const void *ctx, size_t i)
{
    const struct cmp_owner_key *k = ctx;
    const msp_record_cmp_t *r = &k->res->records[i];
    return r->first_tensor + r->n_tensors <= k->ti;
}

/* Which record's tensor range holds row ti (records are contiguous, in order). */
static const msp_record_cmp_t *cmp_owner(const msp_compare_result_t *res, long ti)
{
    struct cmp_owner_key key = {res, (size_t)ti};
    size_t at = msp_lower_bound(res->n_records, cmp_owner_before, &key);
    if (at < res->n_records && (size_t)ti >= res->records[at].first_tensor &&
        (size_t)ti < res->records[at].first_tensor + res->records[at].n_tensors)
        return &res->records[at];
    for (size_t i = 0; i < res->n_records; i++) { /* ranges out of order: look at all */
        const msp_record_cmp_t *r = &res->records[i];
        if ((size_t)ti >= r->first_tensor && (size_t)ti < r->first_tensor + r->n_tensors)
            return r;
    }
    return NULL;
}

msp_err msp_compare_sample(const char *bench, const char *cmp, const msp_compare_result_t *res,
                           const long *tensors, size_t n, size_t max_points,
                           msp_tensor_sample_t *out)
{
    if (!bench || !cmp || !res || (n && (!tensors || !out)))
        return msp_fail(MSP_ERR_USAGE, "msp_compare_sample: missing argument");
    memset(out, 0, n * sizeof *out);
    msp_dump_tree_t tb = {0}, tc = {0};
    msp_err rc = MSP_OK;
    int have_trees = msp_dump_tree_scan(bench, 0, &tb) == MSP_OK &&
                     msp_dump_tree_scan(cmp, 0, &tc) == MSP_OK;
    if (!have_trees)
        msp_clear_error();
    /* Suspects come by step and rank: keep the last pair of files open. */
    msp_dump_file_t *cf = NULL, *bf = NULL;
    const char *open_c = NULL, *open_b = NULL;
    for (size_t i = 0; i < n && rc != MSP_ERR_NOMEM; i++) {
        msp_tensor_sample_t *s = &out[i];
        s->tensor = tensors[i];
        const msp_tensor_cmp_t *t = tensors[i] >= 0 && (size_t)tensors[i] < res->n_tensors
                                        ? &res->tensors[tensors[i]]
                                        : NULL;
        const msp_record_cmp_t *rec = t ? cmp_owner(res, tensors[i]) : NULL;
        const char *crole = rec ? cmp_tensor_role(t->npu_name, rec->name) : NULL;
        const char *brole = rec ? cmp_tensor_role(t->bench_name, rec->bench_name) : NULL;
        const char *cpath = have_trees && rec ? cmp_tree_file(&tc, rec->step, rec->rank) : NULL;
        const char *bpath = have_trees && rec ? cmp_tree_file(&tb, rec->step, rec->rank) : NULL;
        msp_err e = MSP_OK;
        if (cpath && bpath && (cpath != open_c || bpath != open_b)) {
            msp_dump_close(cf);
            msp_dump_close(bf);
            cf = bf = NULL;
            open_c = open_b = NULL;
            if ((e = msp_dump_open(cpath, &cf)) == MSP_OK &&
                (e = msp_dump_open(bpath, &bf)) == MSP_OK) {
                open_c = cpath;
                open_b = bpath;
            }
        }
        if (!crole || !brole)
            e = msp_fail(MSP_ERR_NOT_FOUND, "the tensor is missing on one side");
        else if (!cpath || !bpath)
            e = msp_fail(MSP_ERR_NOT_FOUND, "the dump files of step %lld rank %lld are gone",
                         (long long)rec->step, (long long)rec->rank);
        else if (e == MSP_OK && cf && bf) {
            const msp_record_info_t *cr = cmp_find_record(cf, rec->name);
            const msp_record_info_t *br = cmp_find_record(bf, rec->bench_name);
            const msp_tensor_info_t *ct = cmp_record_tensor(cr, crole);
            const msp_tensor_info_t *bt = cmp_record_tensor(br, brole);
            if (!ct || !bt)
                e = msp_fail(MSP_ERR_NOT_FOUND, "%s is no longer in the dump files", t->npu_name);
            else
                e = cmp_sample_tensor(cf, cr, ct, bf, br, bt, max_points, s);
        }
        if (e != MSP_OK) {
            const char *why = msp_last_error();
            free(s->npu);
            free(s->bench);
            memset(s, 0, sizeof *s);
            s->tensor = tensors[i];
            s->why = strdup(why && *why ? why : msp_strerror(e));
            msp_clear_error();
            if (e == MSP_ERR_NOMEM || !s->why)
                rc = msp_fail(MSP_ERR_NOMEM, "out of memory sampling tensors");
        }
    }
    msp_dump_close(cf);
    msp_dump_close(bf);
    msp_dump_tree_free(&tb);
    msp_dump_tree_free(&tc);
    return rc;
}
