/* Samples of compared tensor pairs, for the HTML report's suspect cards: at
 * most max_points element pairs and a fixed histogram of |npu - bench|,
 * each tensor streamed a block at a time. The compare takes them for a
 * pair's likely suspects while it has the pair's files open
 * (cmp_sample_part, phase A of cmp_stream.c), and the page reads them from
 * the result; rep_sample.c opens the dumps again only for a suspect's row
 * the compare did not sample.
 *
 * A tensor past CMP_SAMPLE_KEEP elements is sampled as replay samples it:
 * every k-th run of CMP_SAMPLE_RUN elements, k the least that keeps at most
 * CMP_SAMPLE_KEEP, and only those runs are read. Reading every element of a
 * large suspect was most of what a default compare of bench/compare's
 * 512 MiB pair spent beyond --replay off (issue 38). */
#include "cmp_internal.h"
#include "cmp_job.h"

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

msp_err cmp_sample_tensor(msp_dump_file_t *cf, const msp_record_info_t *cr,
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

/* ---- phase A: a pair's likely suspects, while its files are open ----------- */

const char *cmp_tensor_role(const char *tensor_name, const char *record)
{
    size_t rl = record ? strlen(record) : 0;
    if (!tensor_name || !rl || strncmp(tensor_name, record, rl) != 0 || tensor_name[rl] != '.')
        return NULL;
    return tensor_name + rl + 1;
}

const msp_tensor_info_t *cmp_record_tensor(const msp_record_info_t *r, const char *role)
{
    for (size_t i = 0; r && role && i < r->n_tensors; i++)
        if (strcmp(r->tensors[i].role, role) == 0)
            return &r->tensors[i];
    return NULL;
}

int cmp_may_suspect(const msp_record_cmp_t *r)
{
    return cmp_replay_in_doubt(r) || isinf(r->out_err);
}

msp_err cmp_sample_part(msp_compare_result_t *part, msp_dump_file_t *bf, msp_dump_file_t *cf,
                        const msp_record_info_t **bnames, const msp_record_info_t **cnames)
{
    size_t cap = 0;
    for (size_t r = 0; !part->stats_mode && r < part->n_records; r++) {
        if (part->n_samples >= CMP_SAMPLE_RECORDS)
            break;
        const msp_record_cmp_t *rec = &part->records[r];
        if (!rec->name || !rec->bench_name || !cmp_may_suspect(rec))
            continue;
        long w = cmp_worst_output(part, rec);
        if (w < 0)
            continue;
        const msp_tensor_cmp_t *t = &part->tensors[w];
        const msp_record_info_t *cr = cmp_name_find(cf, cnames, rec->name);
        const msp_record_info_t *br = cmp_name_find(bf, bnames, rec->bench_name);
        const msp_tensor_info_t *ct = cmp_record_tensor(cr,
                                                        cmp_tensor_role(t->npu_name, rec->name));
        const msp_tensor_info_t *bt = cmp_record_tensor(br, cmp_tensor_role(t->bench_name,
                                                                            rec->bench_name));
        if (!ct || !bt || !ct->has_data || !bt->has_data)
            continue;
        msp_tensor_sample_t *v = msp_grow(part->samples, &cap, part->n_samples + 1, sizeof *v,
                                          CMP_SAMPLE_RECORDS);
        if (!v)
            return msp_fail(MSP_ERR_NOMEM, "compare: out of memory sampling a tensor");
        part->samples = v;
        msp_tensor_sample_t *s = &v[part->n_samples];
        memset(s, 0, sizeof *s);
        msp_err rc = cmp_sample_tensor(cf, cr, ct, bf, br, bt, MSP_SAMPLE_POINTS, s);
        if (rc == MSP_ERR_NOMEM) {
            msp_tensor_sample_free(s);
            return rc;
        }
        if (rc) { /* the page reopens it, and says why when it cannot */
            msp_tensor_sample_free(s);
            msp_clear_error();
            continue;
        }
        s->tensor = w;
        part->n_samples++;
    }
    return MSP_OK;
}

void cmp_sample_keep_suspects(msp_compare_result_t *part)
{
    size_t kept = 0;
    for (size_t i = 0; i < part->n_samples; i++) {
        int named = 0;
        for (size_t k = 0; k < part->n_suspects && !named; k++)
            named = part->suspects[k].tensor == part->samples[i].tensor;
        if (named)
            part->samples[kept++] = part->samples[i];
        else
            msp_tensor_sample_free(&part->samples[i]);
    }
    part->n_samples = kept;
    if (!kept) {
        free(part->samples);
        part->samples = NULL;
    }
}

msp_err cmp_sample_copy(msp_tensor_sample_t *dst, const msp_tensor_sample_t *src)
{
    *dst = *src;
    dst->why = src->why ? strdup(src->why) : NULL;
    dst->npu = malloc((src->n ? src->n : 1) * sizeof *dst->npu);
    dst->bench = malloc((src->n ? src->n : 1) * sizeof *dst->bench);
    if ((src->why && !dst->why) || !dst->npu || !dst->bench) {
        msp_tensor_sample_free(dst);
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory sampling a tensor");
    }
    if (src->n) {
        memcpy(dst->npu, src->npu, src->n * sizeof *dst->npu);
        memcpy(dst->bench, src->bench, src->n * sizeof *dst->bench);
    }
    return MSP_OK;
}
