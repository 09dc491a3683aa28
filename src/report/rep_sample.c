/* Samples of compared tensor pairs for the HTML report's suspect cards: the
 * two dumps are opened again (only the step/rank files a sample needs), each
 * tensor pair is streamed a block at a time, and what is kept is bounded: at
 * most max_points element pairs and a fixed histogram of |npu - bench|.
 *
 * A tensor past CMP_SAMPLE_KEEP elements is sampled as replay samples it:
 * every k-th run of CMP_SAMPLE_RUN elements, k the least that keeps at most
 * CMP_SAMPLE_KEEP, and only those runs are read. Reading every element of a
 * large suspect was most of what a default compare of bench/compare's
 * 512 MiB pair spent beyond --replay off (issue 38). */
#include "rep_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CMP_SAMPLE_BLOCK ((size_t)1 << 20)  /* elements per side per read */
#define CMP_SAMPLE_RUN ((uint64_t)1024)     /* elements of a sampled run */
#define CMP_SAMPLE_KEEP ((uint64_t)1 << 16) /* elements a tensor's histogram reads at most */

void msp_tensor_sample_free(msp_tensor_sample_t *s)
{
    if (!s)
        return;
    free(s->why);
    free(s->npu);
    free(s->bench);
    memset(s, 0, sizeof *s);
}

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

static const msp_tensor_info_t *cmp_find_tensor(const msp_record_info_t *r, const char *role)
{
    for (size_t i = 0; r && role && i < r->n_tensors; i++)
        if (strcmp(r->tensors[i].role, role) == 0)
            return &r->tensors[i];
    return NULL;
}

/* The role part of "<record>.<role>", or NULL. */
static const char *cmp_role_of(const char *tensor_name, const char *record)
{
    size_t rl = record ? strlen(record) : 0;
    if (!tensor_name || !rl || strncmp(tensor_name, record, rl) != 0 || tensor_name[rl] != '.')
        return NULL;
    return tensor_name + rl + 1;
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

/* The histogram's bin edges, edge[j] = 10^(MSP_SAMPLE_LO_EXP + j /
 * MSP_SAMPLE_PER_DECADE): an error e is in bin j when edge[j] <= e <
 * edge[j + 1], found by comparisons instead of a log10 of every element
 * (a tensor of millions of elements is binned whole). */
typedef struct {
    double edge[MSP_SAMPLE_BINS + 1];
} cmp_hist_edges_t;
_Static_assert((MSP_SAMPLE_BINS & (MSP_SAMPLE_BINS - 1)) == 0,
               "cmp_hist_add halves the bins: their number is a power of 2");

static void cmp_hist_edges(cmp_hist_edges_t *h)
{
    for (int j = 0; j <= MSP_SAMPLE_BINS; j++)
        h->edge[j] = pow(10.0, MSP_SAMPLE_LO_EXP + (double)j / MSP_SAMPLE_PER_DECADE);
}

static void cmp_hist_add(msp_tensor_sample_t *s, const cmp_hist_edges_t *h, double n, double b)
{
    if (!isfinite(n) || !isfinite(b)) {
        s->nonfinite++;
        return;
    }
    double e = fabs(n - b);
    if (!(e > 0.0)) { /* exact: a value, not a bin */
        s->zero++;
        return;
    }
    if (e < h->edge[0]) {
        s->below++;
        return;
    }
    if (e >= h->edge[MSP_SAMPLE_BINS]) {
        s->above++;
        return;
    }
    int lo = 0; /* edge[lo] <= e < edge[lo + step * 2]: halved down to one bin */
    for (int step = MSP_SAMPLE_BINS / 2; step; step /= 2)
        lo += e >= h->edge[lo + step] ? step : 0;
    s->bins[lo]++;
}

/* Stream both tensors, fill s. Returns an msp_err whose detail becomes s->why. */
static msp_err cmp_sample_pair(msp_dump_file_t *cf, const msp_record_info_t *cr,
                               const msp_tensor_info_t *ct, msp_dump_file_t *bf,
                               const msp_record_info_t *br, const msp_tensor_info_t *bt,
                               size_t max_points, msp_tensor_sample_t *s)
{
    if (!ct->has_data || !bt->has_data)
        return msp_fail(MSP_ERR_UNSUPPORTED, "statistics dump: no tensor data to sample");
    if (ct->numel != bt->numel)
        return msp_fail(MSP_ERR_MISMATCH, "the two tensors differ in size (%lld vs %lld)",
                        (long long)ct->numel, (long long)bt->numel);
    size_t ce = msp_dtype_size(ct->dtype), be = msp_dtype_size(bt->dtype);
    if (!ce || !be)
        return msp_fail(MSP_ERR_UNSUPPORTED, "dtype %s / %s cannot be read", ct->dtype_name,
                        bt->dtype_name);
    uint64_t numel = ct->numel > 0 ? (uint64_t)ct->numel : 0;
    /* the runs read: every one (then in CMP_SAMPLE_BLOCK pieces), or every k-th */
    uint64_t runs = (numel + CMP_SAMPLE_RUN - 1) / CMP_SAMPLE_RUN;
    uint64_t per = CMP_SAMPLE_KEEP / CMP_SAMPLE_RUN;
    uint64_t every = numel > CMP_SAMPLE_KEEP ? (runs + per - 1) / per : 1;
    uint64_t counted = numel;
    if (every > 1) {
        counted = 0;
        for (uint64_t j = 0; j < runs; j += every)
            counted += numel - j * CMP_SAMPLE_RUN < CMP_SAMPLE_RUN ? numel - j * CMP_SAMPLE_RUN
                                                                   : CMP_SAMPLE_RUN;
    }
    size_t want = max_points ? max_points : 1;
    uint64_t stride = counted > want ? (counted + want - 1) / want : 1;
    size_t npts = counted ? (size_t)((counted - 1) / stride + 1) : 0;
    msp_tensor_stream_t *cs = NULL, *bs = NULL;
    unsigned char *cbuf = malloc(CMP_SAMPLE_BLOCK * ce), *bbuf = malloc(CMP_SAMPLE_BLOCK * be);
    s->npu = calloc(npts ? npts : 1, sizeof *s->npu);
    s->bench = calloc(npts ? npts : 1, sizeof *s->bench);
    msp_err rc = MSP_OK;
    if (!cbuf || !bbuf || !s->npu || !s->bench) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory sampling a tensor");
        goto cleanup;
    }
    if ((rc = msp_tensor_stream_open(cf, cr, ct, &cs)) != MSP_OK ||
        (rc = msp_tensor_stream_open(bf, br, bt, &bs)) != MSP_OK)
        goto cleanup;
    s->numel = numel;
    s->stride = stride;
    s->counted = counted;
    s->every = every;
    cmp_hist_edges_t h;
    cmp_hist_edges(&h);
    uint64_t seen = 0, next = 0; /* elements counted so far; the next that is a point */
    for (uint64_t at = 0; at < numel;) {
        /* a piece of every element, or the next run read (at is its start) */
        uint64_t piece = every > 1 ? CMP_SAMPLE_RUN : CMP_SAMPLE_BLOCK;
        size_t k = (size_t)(numel - at < piece ? numel - at : piece);
        if ((rc = msp_tensor_stream_read(cs, cbuf, k * ce)) != MSP_OK ||
            (rc = msp_tensor_stream_read(bs, bbuf, k * be)) != MSP_OK)
            goto cleanup;
        for (size_t i = 0; i < k; i++, seen++) {
            double n = cmp_load_at(ct->dtype, cbuf, i), b = cmp_load_at(bt->dtype, bbuf, i);
            cmp_hist_add(s, &h, n, b);
            if (seen == next && s->n < npts) {
                s->npu[s->n] = n;
                s->bench[s->n] = b;
                s->n++;
                next += stride;
            }
        }
        at += k;
        if (every > 1 && at < numel) { /* past the runs not read */
            uint64_t skip = (every - 1) * CMP_SAMPLE_RUN;
            skip = skip < numel - at ? skip : numel - at;
            if ((rc = msp_tensor_stream_skip(cs, skip * ce)) != MSP_OK ||
                (rc = msp_tensor_stream_skip(bs, skip * be)) != MSP_OK)
                goto cleanup;
            at += skip;
        }
    }
cleanup:
    msp_tensor_stream_close(cs);
    msp_tensor_stream_close(bs);
    free(cbuf);
    free(bbuf);
    return rc;
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
        const char *crole = rec ? cmp_role_of(t->npu_name, rec->name) : NULL;
        const char *brole = rec ? cmp_role_of(t->bench_name, rec->bench_name) : NULL;
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
            const msp_tensor_info_t *ct = cmp_find_tensor(cr, crole);
            const msp_tensor_info_t *bt = cmp_find_tensor(br, brole);
            if (!ct || !bt)
                e = msp_fail(MSP_ERR_NOT_FOUND, "%s is no longer in the dump files", t->npu_name);
            else
                e = cmp_sample_pair(cf, cr, ct, bf, br, bt, max_points, s);
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
