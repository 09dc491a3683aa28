/* msp_compare_run: resolve inputs, match records from the catalogues, then
 * stream tensor data through the metric kernel.
 *
 * Data path: tensors whose data sits contiguous in the file (offset >= 0) are
 * cut into units of chunk_bytes per side; a window of units is read with
 * pread() into per-thread buffers and compared in parallel (OpenMP), and the
 * units' partial results are merged in unit order, so numbers never depend on
 * the thread count. Memory is threads x 2 x chunk_bytes plus one window of
 * partial results, whatever the dump size. Tensors without an offset
 * (chunked/compressed datasets) are read whole through the format module,
 * one pair at a time, and compared in parallel over the same units. */
#include "cmp_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <omp.h>

/* A window of units is compared in one parallel loop: at most this many units
 * and bytes (both sides; also the granularity of progress reports). */
#define CMP_WINDOW_UNITS 4096
#define CMP_WINDOW_BYTES ((uint64_t)256 << 20)
/* Windows smaller than this run on the calling thread: waking the team costs
 * more than it saves, and on a busy machine a barrier can cost a time slice. */
#define CMP_PARALLEL_MIN_BYTES ((uint64_t)4 << 20)
/* Mapped tensors below this size per side skip the populate/release syscalls;
 * page faults map them and the window releases its span at once. */
#define CMP_SMALL_UNIT_BYTES ((size_t)256 << 10)
/* ... and a window holds at most this many bytes of such units, so that what
 * stays mapped until the window's release is bounded too. */
#define CMP_SMALL_SPAN_BYTES ((uint64_t)16 << 20)

void msp_compare_opts_default(msp_compare_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->level = MSP_LEVEL_ALL;
    o->cos_warn = 0.99;
    o->abs_warn = 0.001;
    o->cos_fail = 0.9;
    o->abs_fail = 1.0;
    o->stats_warn = 0.5;
    o->top = 5;
    o->replay = MSP_REPLAY_AUTO;
    o->replay_budget = 60.0;
}

void msp_compare_result_free(msp_compare_result_t *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_records; i++) {
        free(r->records[i].name);
        free(r->records[i].bench_name);
        free(r->records[i].npu_stack);
        free(r->records[i].arg_diff);
        free(r->records[i].replay_note);
        free(r->records[i].parent);
        free(r->records[i].comm_group);
    }
    for (size_t i = 0; i < r->n_ranks; i++)
        free(r->ranks[i].at);
    free(r->ranks);
    free(r->replay_unavailable);
    for (size_t i = 0; i < r->n_tensors; i++) {
        free(r->tensors[i].npu_name);
        free(r->tensors[i].bench_name);
        free(r->tensors[i].err_message);
        free(r->tensors[i].producer);
        free(r->tensors[i].npu_data_name);
        free(r->tensors[i].bench_data_name);
    }
    for (size_t i = 0; i < r->n_suspects; i++)
        free(r->suspects[i].reason);
    free(r->suspects);
    free(r->suspect_from);
    for (size_t i = 0; i < r->n_unpaired; i++)
        free(r->unpaired[i]);
    free(r->unpaired);
    for (size_t i = 0; i < r->n_unread; i++)
        free(r->unread[i]);
    free(r->unread);
    free(r->first_unreadable);
    free(r->records);
    free(r->tensors);
    free(r);
}

/* ---- growing result arrays ------------------------------------------------ */

typedef struct cmp_build {
    msp_compare_result_t *res;
    size_t cap_rec, cap_ten;
} cmp_build_t;

static msp_err cmp_new_record(cmp_build_t *bld, size_t *idx)
{
    msp_compare_result_t *r = bld->res;
    msp_record_cmp_t *nv = msp_grow(r->records, &bld->cap_rec, r->n_records, sizeof *nv, 64);
    if (!nv)
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory for %zu records", r->n_records + 1);
    r->records = nv;
    *idx = r->n_records++;
    memset(&nv[*idx], 0, sizeof nv[*idx]);
    nv[*idx].order_begin = -1;
    nv[*idx].replay_err = nv[*idx].replay_ref = NAN;
    nv[*idx].comm_peer = -1;
    return MSP_OK;
}

static msp_err cmp_new_tensor(cmp_build_t *bld, size_t *idx)
{
    msp_compare_result_t *r = bld->res;
    msp_tensor_cmp_t *nv = msp_grow(r->tensors, &bld->cap_ten, r->n_tensors, sizeof *nv, 256);
    if (!nv)
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory for %zu tensors", r->n_tensors + 1);
    r->tensors = nv;
    *idx = r->n_tensors++;
    msp_tensor_cmp_t *t = &r->tensors[*idx];
    t->cosine = t->euc_dist = t->max_abs_err = t->max_rel_err = NAN;
    t->one_thousandth_ratio = t->five_thousandths_ratio = NAN;
    t->npu_max = t->npu_min = t->npu_mean = t->npu_norm = NAN;
    t->bench_max = t->bench_min = t->bench_mean = t->bench_norm = NAN;
    t->max_diff = t->min_diff = t->mean_diff = t->norm_diff = NAN;
    t->max_rel_diff = t->min_rel_diff = t->mean_rel_diff = t->norm_rel_diff = NAN;
    t->verdict = MSP_VERDICT_NO;
    t->agree = -1;
    t->rel_err = NAN;
    return MSP_OK;
}

static msp_err cmp_set_message(msp_tensor_cmp_t *t, const char *msg)
{
    free(t->err_message);
    t->err_message = strdup(msg ? msg : "");
    return t->err_message ? MSP_OK : msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
}

static int cmp_same_shape(const msp_tensor_info_t *a, const msp_tensor_info_t *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return 0;
    return 1;
}

static void cmp_side_stats(msp_tensor_cmp_t *t, const msp_tensor_info_t *n,
                           const msp_tensor_info_t *b)
{
    if (n && n->has_stats) {
        t->npu_max = n->stats.max;
        t->npu_min = n->stats.min;
        t->npu_mean = n->stats.mean;
        t->npu_norm = n->stats.norm;
    }
    if (b && b->has_stats) {
        t->bench_max = b->stats.max;
        t->bench_min = b->stats.min;
        t->bench_mean = b->stats.mean;
        t->bench_norm = b->stats.norm;
    }
}

/* npu - bench, and msprobe 26's relative error |diff / bench| x 100 (a
 * percentage; NaN, shown "N/A", when bench is 0). Equal non-finite values
 * (both NaN, same Inf) count as no difference. *mag receives msprobe's
 * warning measure |diff| / (max(|npu|, |bench|) + 1e-10): the 1e-10 keeps two
 * near-zero statistics from warning over nothing. Returns 1 when the two
 * disagree on being finite. */
static int cmp_stat_diff(double n, double b, double *diff, double *rel, double *mag)
{
    if (!isfinite(n) || !isfinite(b)) {
        int same = (isnan(n) && isnan(b)) || (isinf(n) && isinf(b) && (n > 0) == (b > 0));
        *diff = same ? 0.0 : NAN;
        *rel = same ? 0.0 : NAN;
        *mag = same ? 0.0 : NAN;
        return !same;
    }
    *diff = n - b;
    *rel = b > 0.0 || b < 0.0 ? fabs(*diff / b) * 100.0 : NAN;
    *mag = fabs(*diff) / (fmax(fabs(n), fabs(b)) + 1e-10);
    return 0;
}

/* Fills the diff columns; returns the largest warning measure (see above). */
static double cmp_fill_diffs(msp_tensor_cmp_t *t, int *nonfinite_mismatch)
{
    int m = 0;
    double g[4] = {0, 0, 0, 0};
    m |= cmp_stat_diff(t->npu_max, t->bench_max, &t->max_diff, &t->max_rel_diff, &g[0]);
    m |= cmp_stat_diff(t->npu_min, t->bench_min, &t->min_diff, &t->min_rel_diff, &g[1]);
    m |= cmp_stat_diff(t->npu_mean, t->bench_mean, &t->mean_diff, &t->mean_rel_diff, &g[2]);
    m |= cmp_stat_diff(t->npu_norm, t->bench_norm, &t->norm_diff, &t->norm_rel_diff, &g[3]);
    if (nonfinite_mismatch)
        *nonfinite_mismatch = m;
    return fmax(fmax(g[0], g[1]), fmax(g[2], g[3]));
}

/* ---- data jobs ---------------------------------------------------------- */

typedef struct cmp_job {
    size_t row;
    msp_dtype_t ndt, bdt;
    const msp_record_info_t *nrec, *brec;
    const msp_tensor_info_t *nt, *bt;
    uint64_t numel;
    size_t unit, n_units;
    double rtol, atol;
    int side;      /* 1: compute side statistics; 0: both sides have them as attributes */
    cmp_acc_t acc;
    uint32_t crc[2]; /* CRC-32 of the bytes read: npu, bench (checked against the files') */
    char *read_error; /* a tensor file that cannot be read (msprobe's .pt): its row's error */
} cmp_job_t;

typedef struct cmp_item {
    size_t job, unit;
    cmp_acc_t acc;
    int err;       /* errno of a failed read, or -1 for a short read */
    int err_side;  /* 0 npu, 1 bench */
    uint32_t crc[2]; /* of this unit's bytes: npu, bench */
} cmp_item_t;

typedef struct cmp_ctx {
    const msp_compare_opts_t *o;
    size_t pairs_done; /* file pairs compared (not skipped) */
    size_t chunk;
    int nthreads;
    unsigned char *bufs; /* nthreads x 2 x chunk */
    msp_dump_file_t *bf, *cf;
    int bfd, cfd;
    int use_mmap;
    int has_producers;   /* either file of the pair carries producer links */
    const msp_record_info_t **bnames, **cnames; /* records by name, for producer lookups */
    const cmp_mapping_t *map; /* --mapping, or NULL */
    int md5;                  /* some pair was of md5 (hash-only) dumps */
    const unsigned char *bmap, *cmap; /* whole-file read-only maps, or NULL */
    size_t bmap_len, cmap_len;
    cmp_job_t *jobs;
    size_t n_jobs, cap_jobs;
    cmp_item_t *items;
} cmp_ctx_t;

static int cmp_read_full(int fd, void *buf, size_t len, int64_t off)
{
    unsigned char *p = buf;
    while (len) {
        ssize_t r = pread(fd, p, len, (off_t)off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return errno ? errno : EIO;
        }
        if (r == 0)
            return -1;
        p += r;
        len -= (size_t)r;
        off += r;
    }
    return 0;
}

/* Map [off, off+len) in: one syscall instead of a fault per 64 KiB. */
static void cmp_map_populate(const unsigned char *base, uint64_t off, size_t len)
{
#ifdef MADV_POPULATE_READ
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t s = ((uintptr_t)(base + off)) & ~(pg - 1);
    uintptr_t e = ((uintptr_t)(base + off + len) + pg - 1) & ~(pg - 1);
    (void)madvise((void *)s, e - s, MADV_POPULATE_READ);
#else
    (void)base;
    (void)off;
    (void)len;
#endif
}

/* Drop the page-table entries of a range already compared, so the resident set
 * stays at a few units per thread however large the file; the data stays in
 * the page cache and a neighbour that still needs a shared page faults it back. */
static void cmp_map_release(const unsigned char *base, uint64_t off, size_t len)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t s = ((uintptr_t)(base + off)) & ~(pg - 1);
    uintptr_t e = ((uintptr_t)(base + off + len) + pg - 1) & ~(pg - 1);
    (void)madvise((void *)s, e - s, MADV_DONTNEED);
}

/* Whole tensors, not tails of big ones: small tensors sit side by side in the
 * file, so the pages their faults map (whole large folios) are shared by many
 * of them and the window's span bounds what stays mapped. */
static int cmp_job_small(const cmp_job_t *j)
{
    return (uint64_t)j->nt->nbytes < CMP_SMALL_UNIT_BYTES &&
           (uint64_t)j->bt->nbytes < CMP_SMALL_UNIT_BYTES;
}

/* One unit's metrics and both sides' CRC-32, its bytes in memory. The CRC
 * follows the metrics a slice at a time, while the slice is still in L1: a
 * separate pass over the unit (2 MiB, both sides) read it back from L2/L3
 * and cost a tenth of compare's CPU. Slices are whole CMP_BLOCKs (4096
 * elements), the kernel's own blocks, so the metrics are the same bits as
 * one call over the unit. */
#define CMP_CRC_SLICE ((size_t)4096)
static void cmp_unit_run(const cmp_job_t *j, cmp_item_t *it, const unsigned char *nb,
                         const unsigned char *bb, size_t m)
{
    size_t nsz = msp_dtype_size(j->ndt), bsz = msp_dtype_size(j->bdt);
    uint32_t cn = 0, cb = 0;
    for (size_t off = 0; off < m; off += CMP_CRC_SLICE) {
        size_t k = m - off < CMP_CRC_SLICE ? m - off : CMP_CRC_SLICE;
        cmp_acc_run(j->ndt, nb + off * nsz, j->bdt, bb + off * bsz, k, j->rtol, j->atol,
                    j->side, &it->acc);
        cn = msp_crc32(cn, nb + off * nsz, k * nsz);
        cb = msp_crc32(cb, bb + off * bsz, k * bsz);
    }
    it->crc[0] = cn;
    it->crc[1] = cb;
}

static void cmp_do_item(cmp_ctx_t *cx, cmp_item_t *it, unsigned char *nbuf, unsigned char *bbuf)
{
    cmp_job_t *j = &cx->jobs[it->job];
    size_t nsz = msp_dtype_size(j->ndt), bsz = msp_dtype_size(j->bdt);
    uint64_t first = (uint64_t)it->unit * j->unit;
    size_t m = (size_t)(j->numel - first < j->unit ? j->numel - first : j->unit);
    cmp_acc_init(&it->acc);
    it->err = 0;
    if (cx->use_mmap) {
        uint64_t no = (uint64_t)j->nt->offset + first * nsz, bo = (uint64_t)j->bt->offset + first * bsz;
        int small = cmp_job_small(j);
        if (!small) {
            cmp_map_populate(cx->cmap, no, m * nsz);
            cmp_map_populate(cx->bmap, bo, m * bsz);
        }
        cmp_unit_run(j, it, cx->cmap + no, cx->bmap + bo, m);
        if (!small) {
            cmp_map_release(cx->cmap, no, m * nsz);
            cmp_map_release(cx->bmap, bo, m * bsz);
        }
        return;
    }
    it->err = cmp_read_full(cx->cfd, nbuf, m * nsz, j->nt->offset + (int64_t)(first * nsz));
    if (it->err) {
        it->err_side = 0;
        return;
    }
    it->err = cmp_read_full(cx->bfd, bbuf, m * bsz, j->bt->offset + (int64_t)(first * bsz));
    if (it->err) {
        it->err_side = 1;
        return;
    }
    /* The bytes are in cache now: checking them costs little (bench/compare). */
    cmp_unit_run(j, it, nbuf, bbuf, m);
}

static msp_err cmp_item_error(const cmp_ctx_t *cx, const cmp_item_t *it)
{
    const cmp_job_t *j = &cx->jobs[it->job];
    const msp_dump_file_t *f = it->err_side ? cx->bf : cx->cf;
    const msp_record_info_t *r = it->err_side ? j->brec : j->nrec;
    const msp_tensor_info_t *t = it->err_side ? j->bt : j->nt;
    if (it->err < 0)
        return msp_fail(MSP_ERR_FORMAT,
                        "file %s: record %s: tensor %s: data ends before offset %lld + %lld bytes; "
                        "the file is truncated",
                        f->path, r->name, t->role, (long long)t->offset, (long long)t->nbytes);
    return msp_fail(MSP_ERR_IO, "file %s: record %s: tensor %s: read failed: %s", f->path,
                    r->name, t->role, strerror(it->err));
}

static uint64_t cmp_item_elems(const cmp_job_t *job, size_t unit)
{
    uint64_t first = (uint64_t)unit * job->unit;
    return job->numel - first < job->unit ? job->numel - first : job->unit;
}

/* A compared unit into its job, units in order: metrics merged, each
 * side's CRC extended by the unit's. Returns the unit's bytes (both sides). */
static uint64_t cmp_unit_merge(cmp_job_t *job, const cmp_item_t *it)
{
    uint64_t m = cmp_item_elems(job, it->unit);
    size_t nsz = msp_dtype_size(job->ndt), bsz = msp_dtype_size(job->bdt);
    cmp_acc_merge(&job->acc, &it->acc);
    job->crc[0] = (uint32_t)crc32_combine(job->crc[0], it->crc[0], (z_off_t)(m * nsz));
    job->crc[1] = (uint32_t)crc32_combine(job->crc[1], it->crc[1], (z_off_t)(m * bsz));
    return m * (nsz + bsz);
}

/* All jobs whose both sides have a file offset (mapped or pread), in windows of units. */
static msp_err cmp_run_offset_jobs(cmp_ctx_t *cx, uint64_t *bytes_done)
{
    size_t j = 0, u = 0;
    while (j < cx->n_jobs) {
        size_t n = 0;
        uint64_t wbytes = 0;
        /* span of the small mapped units of this window, per side, released at its end */
        uint64_t span[2][2] = {{UINT64_MAX, 0}, {UINT64_MAX, 0}};
        uint64_t sbytes = 0;
        while (j < cx->n_jobs && n < CMP_WINDOW_UNITS && wbytes < CMP_WINDOW_BYTES &&
               sbytes < CMP_SMALL_SPAN_BYTES) {
            cmp_job_t *job = &cx->jobs[j];
            if (job->nt->offset < 0 || job->bt->offset < 0 || u >= job->n_units) {
                j++;
                u = 0;
                continue;
            }
            size_t nsz = msp_dtype_size(job->ndt), bsz = msp_dtype_size(job->bdt);
            uint64_t m = cmp_item_elems(job, u);
            if (cmp_job_small(job)) {
                uint64_t off[2] = {(uint64_t)job->nt->offset + (uint64_t)u * job->unit * nsz,
                                   (uint64_t)job->bt->offset + (uint64_t)u * job->unit * bsz};
                uint64_t len[2] = {m * nsz, m * bsz};
                sbytes += len[0] + len[1];
                for (int side = 0; side < 2; side++) {
                    span[side][0] = off[side] < span[side][0] ? off[side] : span[side][0];
                    span[side][1] = off[side] + len[side] > span[side][1] ? off[side] + len[side]
                                                                          : span[side][1];
                }
            }
            wbytes += m * (nsz + bsz);
            cx->items[n].job = j;
            cx->items[n].unit = u;
            n++;
            u++;
        }
        if (!n)
            break;
        cmp_item_t *items = cx->items;
#pragma omp parallel for schedule(dynamic, 1) num_threads(cx->nthreads) \
    if (wbytes >= CMP_PARALLEL_MIN_BYTES && n > 1)
        for (size_t i = 0; i < n; i++) {
            unsigned char *nb = cx->bufs + (size_t)omp_get_thread_num() * 2 * cx->chunk;
            cmp_do_item(cx, &items[i], nb, nb + cx->chunk);
        }
        if (cx->use_mmap) {
            if (span[0][1] > span[0][0])
                cmp_map_release(cx->cmap, span[0][0], (size_t)(span[0][1] - span[0][0]));
            if (span[1][1] > span[1][0])
                cmp_map_release(cx->bmap, span[1][0], (size_t)(span[1][1] - span[1][0]));
        }
        for (size_t i = 0; i < n; i++) {
            if (items[i].err)
                return cmp_item_error(cx, &items[i]);
            (void)cmp_unit_merge(&cx->jobs[items[i].job], &items[i]);
        }
        *bytes_done += wbytes;
        if (cx->o->progress && wbytes)
            cx->o->progress(wbytes, cx->o->progress_ud);
    }
    return MSP_OK;
}

/* One tensor file of a directory dump that is missing, truncated or not a
 * tensor (msprobe's .pt/.npy) is that row's error; the rest is compared as
 * usual. Returns what the caller goes on with. */
static msp_err cmp_job_read_failed(cmp_job_t *job, msp_err rc)
{
    if (!rc || rc == MSP_ERR_NOMEM)
        return rc;
    free(job->read_error);
    job->read_error = strdup(msp_last_error());
    msp_clear_error();
    return job->read_error ? MSP_OK : msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
}

/* Jobs with a side that has no plain offset (chunked, compressed, converted
 * or msprobe-directory data): both sides streamed a window of units at a
 * time, read in order into the threads' buffers and compared in parallel,
 * so memory stays at the buffers however large the tensor. */
static msp_err cmp_run_stream_jobs(cmp_ctx_t *cx, uint64_t *bytes_done)
{
    msp_err rc = MSP_OK;
    size_t width = (size_t)cx->nthreads < CMP_WINDOW_UNITS ? (size_t)cx->nthreads
                                                           : CMP_WINDOW_UNITS;
    for (size_t j = 0; j < cx->n_jobs && !rc; j++) {
        cmp_job_t *job = &cx->jobs[j];
        if (job->nt->offset >= 0 && job->bt->offset >= 0)
            continue;
        msp_tensor_stream_t *ns = NULL, *bs = NULL;
        if (!(rc = msp_tensor_stream_open(cx->cf, job->nrec, job->nt, &ns)))
            rc = msp_tensor_stream_open(cx->bf, job->brec, job->bt, &bs);
        size_t nsz = msp_dtype_size(job->ndt), bsz = msp_dtype_size(job->bdt);
        cmp_item_t *items = cx->items;
        for (size_t u = 0; u < job->n_units && !rc; u += width) {
            size_t w = job->n_units - u < width ? job->n_units - u : width;
            for (size_t i = 0; i < w && !rc; i++) {
                unsigned char *nb = cx->bufs + i * 2 * cx->chunk;
                size_t m = (size_t)cmp_item_elems(job, u + i);
                if (!(rc = msp_tensor_stream_read(ns, nb, m * nsz)))
                    rc = msp_tensor_stream_read(bs, nb + cx->chunk, m * bsz);
            }
            if (rc)
                break;
#pragma omp parallel for schedule(static, 1) num_threads(cx->nthreads) if (w > 1)
            for (size_t i = 0; i < w; i++) {
                unsigned char *nb = cx->bufs + i * 2 * cx->chunk;
                items[i].unit = u + i;
                cmp_acc_init(&items[i].acc);
                cmp_unit_run(job, &items[i], nb, nb + cx->chunk,
                             (size_t)cmp_item_elems(job, u + i));
            }
            uint64_t wbytes = 0;
            for (size_t i = 0; i < w; i++)
                wbytes += cmp_unit_merge(job, &items[i]);
            *bytes_done += wbytes;
            if (cx->o->progress && wbytes)
                cx->o->progress(wbytes, cx->o->progress_ud);
        }
        msp_tensor_stream_close(ns);
        msp_tensor_stream_close(bs);
        rc = cmp_job_read_failed(job, rc);
    }
    return rc;
}

/* The stored CRC-32 (0: the file gave none) against the bytes compared: a
 * flipped bit in a tensor's data is named on its row, not compared silently.
 * 1 when a side fails it. */
static int cmp_check_crc(msp_tensor_cmp_t *t, const cmp_job_t *job)
{
    const msp_tensor_info_t *side[2] = {job->nt, job->bt};
    static const char *const who[2] = {"NPU", "bench"};
    for (int k = 0; k < 2; k++) {
        uint32_t want = side[k]->stats.crc32;
        if (!want || want == job->crc[k])
            continue;
        char msg[200];
        snprintf(msg, sizeof msg, "%s tensor data fails its CRC-32 check (file says %08x, data "
                 "read %08x): the dump file is damaged", who[k], (unsigned)want,
                 (unsigned)job->crc[k]);
        cmp_set_message(t, msg);
        t->highlight = MSP_HL_RED;
        return 1;
    }
    return 0;
}

static msp_err cmp_add_job(cmp_ctx_t *cx, size_t row, const msp_record_info_t *nrec,
                           const msp_tensor_info_t *nt, const msp_record_info_t *brec,
                           const msp_tensor_info_t *bt)
{
    cmp_job_t *nv = msp_grow(cx->jobs, &cx->cap_jobs, cx->n_jobs, sizeof *nv, 256);
    if (!nv)
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    cx->jobs = nv;
    cmp_job_t *j = &cx->jobs[cx->n_jobs++];
    memset(j, 0, sizeof *j);
    j->row = row;
    j->ndt = nt->dtype;
    j->bdt = bt->dtype;
    j->nrec = nrec;
    j->brec = brec;
    j->nt = nt;
    j->bt = bt;
    j->numel = (uint64_t)nt->numel;
    j->unit = cmp_unit_elems(nt->dtype, bt->dtype, cx->chunk);
    j->n_units = (size_t)((j->numel + j->unit - 1) / j->unit);
    msp_tolerance(nt->dtype, bt->dtype, &j->rtol, &j->atol);
    j->side = !(nt->has_stats && bt->has_stats);
    cmp_acc_init(&j->acc);
    return MSP_OK;
}

/* ---- building rows --------------------------------------------------------- */

/* |d| / |ref|, 0 when both are 0, +Inf when only ref is. */
static double cmp_rel(double d, double ref)
{
    if (isnan(d) || isnan(ref))
        return NAN;
    if (fabs(ref) > 0.0)
        return d / fabs(ref);
    return d > 0.0 ? INFINITY : 0.0;
}

static int cmp_stat_same(double a, double b)
{
    return (isnan(a) && isnan(b)) || !(a < b || a > b);
}

static int cmp_rec_name_order(const void *x, const void *y)
{
    const msp_record_info_t *a = *(const msp_record_info_t *const *)x;
    const msp_record_info_t *b = *(const msp_record_info_t *const *)y;
    return strcmp(a->name, b->name);
}

/* f's records sorted by name (NULL only when out of memory). */
static const msp_record_info_t **cmp_by_name(const msp_dump_file_t *f)
{
    const msp_record_info_t **v = calloc(f->n_records + 1, sizeof *v);
    if (!v)
        return NULL;
    for (size_t r = 0; r < f->n_records; r++)
        v[r] = &f->records[r];
    qsort(v, f->n_records, sizeof *v, cmp_rec_name_order);
    return v;
}

/* Key: a record's name. */
static int cmp_name_key(const void *key, const void *elem)
{
    return strcmp(key, (*(const msp_record_info_t *const *)elem)->name);
}

/* Key: "RECORD/ROLE" compared by its RECORD part. */
static int cmp_producer_key(const void *key, const void *elem)
{
    const char *k = key, *slash = strrchr(k, '/');
    const char *name = (*(const msp_record_info_t *const *)elem)->name;
    size_t rl = (size_t)(slash - k);
    int c = strncmp(k, name, rl);
    return c ? c : (name[rl] ? -1 : 0);
}

/* 1 when t names a producer output in the same file whose content (crc32 and
 * statistics) differs from t's: what the producer returned is not what the
 * consumer received. Unknown producer or no statistics: 0. */
static int cmp_producer_gap(const msp_dump_file_t *f, const msp_record_info_t **byname,
                            const msp_tensor_info_t *t)
{
    if (!f || !byname || !t->producer || !t->has_stats)
        return 0;
    const char *slash = strrchr(t->producer, '/');
    if (!slash)
        return 0;
    const msp_record_info_t **hit =
        bsearch(t->producer, byname, f->n_records, sizeof *byname, cmp_producer_key);
    if (hit) {
        const msp_record_info_t *p = *hit;
        for (size_t k = 0; k < p->n_tensors; k++) {
            const msp_tensor_info_t *o = &p->tensors[k];
            if (strcmp(o->role, slash + 1) != 0 || !o->has_stats)
                continue;
            if (o->ndim != t->ndim || o->numel != t->numel)
                return 1;
            if (o->stats.crc32 && t->stats.crc32 && o->stats.crc32 != t->stats.crc32)
                return 1;
            return !cmp_stat_same(o->stats.max, t->stats.max) ||
                   !cmp_stat_same(o->stats.min, t->stats.min) ||
                   !cmp_stat_same(o->stats.mean, t->stats.mean) ||
                   !cmp_stat_same(o->stats.norm, t->stats.norm);
        }
        return 0;
    }
    return 0;
}

static int cmp_file_has_producers(const msp_dump_file_t *f)
{
    for (size_t r = 0; r < f->n_records; r++)
        for (size_t k = 0; k < f->records[r].n_tensors; k++)
            if (f->records[r].tensors[k].producer)
                return 1;
    return 0;
}

static char *cmp_join(const char *rec, const char *role)
{
    return msp_asprintf("%s.%s", rec, role);
}

/* A dump of msprobe's own (dump.json) rather than ours. */
static int cmp_is_msprobe_dump(const msp_dump_file_t *f)
{
    size_t pl = f && f->path ? strlen(f->path) : 0;
    return pl >= 9 && strcmp(f->path + pl - 9, "dump.json") == 0;
}

/* Where each side's data is (Data_name), its CRC-32 (msprobe's md5) and
 * whether its statistics hold NaN/Inf. */
static msp_err cmp_row_sources(msp_tensor_cmp_t *t, const msp_record_info_t *nrec,
                               const msp_tensor_info_t *n, const msp_record_info_t *brec,
                               const msp_tensor_info_t *b)
{
    const msp_record_info_t *rs[2] = {nrec, brec};
    const msp_tensor_info_t *ts[2] = {n, b};
    char **names[2] = {&t->npu_data_name, &t->bench_data_name};
    uint32_t *crcs[2] = {&t->npu_crc32, &t->bench_crc32};
    int *bad[2] = {&t->npu_nonfinite, &t->bench_nonfinite};
    for (int k = 0; k < 2; k++) {
        const msp_tensor_info_t *x = ts[k];
        if (!x)
            continue;
        *crcs[k] = x->stats.crc32;
        *bad[k] = x->has_stats && x->numel > 0 &&
                  (x->stats.nan_count > 0 || x->stats.inf_count > 0 || !isfinite(x->stats.max) ||
                   !isfinite(x->stats.min));
        if (x->data_name)
            *names[k] = strdup(x->data_name);
        else if (x->has_data)
            *names[k] = msp_asprintf("/%s/%s", rs[k]->name, x->role);
        else
            continue;
        if (!*names[k])
            return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    }
    return MSP_OK;
}

/* One tensor row; n or b may be NULL (missing on that side). Either fills the
 * row completely or queues a data job that will. */
static msp_err cmp_tensor_row(cmp_ctx_t *cx, cmp_build_t *bld, const msp_record_info_t *nrec,
                              const msp_tensor_info_t *n, const msp_record_info_t *brec,
                              const msp_tensor_info_t *b, int stats_file)
{
    size_t idx = 0;
    msp_err rc = cmp_new_tensor(bld, &idx);
    if (rc)
        return rc;
    msp_tensor_cmp_t *t = &bld->res->tensors[idx];
    const char *role = n ? n->role : b->role;
    /* grad_fn.K: a backward output as msprobe records it (cmp_record_view) */
    t->is_output = strncmp(role, "output", 6) == 0 || strncmp(role, "grad_fn.", 8) == 0;
    t->npu_requires_grad = n ? n->requires_grad != 0 : -1;
    t->bench_requires_grad = b ? b->requires_grad != 0 : -1;
    if (n) {
        t->npu_name = cmp_join(nrec->name, n->role);
        snprintf(t->npu_dtype, sizeof t->npu_dtype, "%s", n->dtype_name);
        msp_shape_str(n->shape, n->ndim, t->npu_shape, sizeof t->npu_shape);
    }
    if (b) {
        t->bench_name = cmp_join(brec->name, b->role);
        snprintf(t->bench_dtype, sizeof t->bench_dtype, "%s", b->dtype_name);
        msp_shape_str(b->shape, b->ndim, t->bench_shape, sizeof t->bench_shape);
    }
    if ((n && !t->npu_name) || (b && !t->bench_name))
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    if ((rc = cmp_row_sources(t, nrec, n, brec, b)))
        return rc;
    cmp_side_stats(t, n, b);
    const char *uninit = t->is_output ? cmp_uninit_api(nrec ? nrec->name : brec->name) : NULL;
    if (!t->is_output) {
        const char *prod = n && n->producer ? n->producer : (b ? b->producer : NULL);
        if (prod && !(t->producer = strdup(prod)))
            return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
        t->gap = (n && cmp_producer_gap(cx->cf, cx->cnames, n)) ||
                 (b && cmp_producer_gap(cx->bf, cx->bnames, b));
        /* links recorded, yet none for this float input: an op msprobe did
         * not record made it (or it is a leaf: a parameter, the data) */
        if (!prod && cx->has_producers && msp_dtype_is_float(n ? n->dtype : b->dtype))
            t->gap = 2;
        /* what an allocator of uninitialized memory returned, not written since */
        if (prod && !t->gap)
            uninit = cmp_uninit_api(prod);
    }
    if (uninit) {
        /* garbage on both sides: nothing to compare, nothing to judge */
        t->gap = 0;
        t->verdict = MSP_VERDICT_YES;
        t->highlight = MSP_HL_NONE;
        char msg[200];
        snprintf(msg, sizeof msg, "uninitialized memory (%s): its values mean nothing, not "
                 "compared", uninit);
        return cmp_set_message(t, msg);
    }
    if (n && n->has_stats &&
        (n->stats.nan_count > 0 || n->stats.inf_count > 0 ||
         (n->numel > 0 && (!isfinite(n->stats.max) || !isfinite(n->stats.min)))))
        t->highlight = MSP_HL_RED; /* NaN/Inf on the NPU side; kept for outputs only */
    if (!n || !b) {
        const char *msg = !nrec ? "record missing in NPU dump"
                          : !brec ? "record missing in bench dump"
                          : !n   ? "tensor missing in NPU record"
                                 : "tensor missing in bench record";
        /* msprobe's versions wrap different APIs (8.x torch.ones_like, 26
         * not): against msprobe's own dump a record of one side is N/A,
         * as msprobe reports it, not a failure */
        if ((!nrec || !brec) && (cmp_is_msprobe_dump(cx->bf) || cmp_is_msprobe_dump(cx->cf)))
            t->verdict = MSP_VERDICT_NA;
        return cmp_set_message(t, msg);
    }
    if (!cmp_same_shape(n, b)) {
        t->agree = 0;
        if (stats_file || !n->has_data || !b->has_data) {
            /* a statistics dump cannot tell a real divergence from a layout
             * difference: rel_err stays N/A, so no root cause comes from it */
            bld->res->stats_mode = 1;
            return cmp_set_message(t, "Shape of NPU and bench tensor do not match; statistics "
                                      "dump: not used to name a root cause");
        }
        t->rel_err = INFINITY;
        return cmp_set_message(t, "Shape of NPU and bench tensor do not match");
    }
    if (stats_file == 2) {
        /* md5 (hash-only) dumps: msprobe's md5 compare, equal CRC-32 or not;
         * the statistics, when present, fill their columns as well */
        bld->res->stats_mode = 1;
        int nf = 0;
        if (n->has_stats && b->has_stats)
            cmp_fill_diffs(t, &nf);
        int same = n->stats.crc32 == b->stats.crc32 && n->dtype == b->dtype;
        t->verdict = same ? MSP_VERDICT_YES : MSP_VERDICT_NO;
        char msg[96] = "";
        if (!same)
            snprintf(msg, sizeof msg, "crc32 differs (NPU %08x, bench %08x)",
                     (unsigned)n->stats.crc32, (unsigned)b->stats.crc32);
        return cmp_set_message(t, msg);
    }
    if (stats_file || !n->has_data || !b->has_data) {
        bld->res->stats_mode = 1;
        if (!n->has_stats || !b->has_stats) {
            return cmp_set_message(t, !n->has_stats ? "NPU tensor has no statistics"
                                                    : "bench tensor has no statistics");
        }
        int nf = 0;
        double mag = cmp_fill_diffs(t, &nf);
        t->rel_err = cmp_rel(fabs(t->npu_norm - t->bench_norm), t->bench_norm);
        t->verdict = MSP_VERDICT_YES;
        const char *msg = "";
        if (nf) {
            t->verdict = MSP_VERDICT_WARNING;
            msg = "NaN/Inf in the statistics of one side only";
        } else if (mag > cx->o->stats_warn) {
            t->verdict = MSP_VERDICT_WARNING;
            msg = "a statistic differs by more than stats_warn of its magnitude";
        }
        return cmp_set_message(t, msg);
    }
    if (!msp_dtype_size(n->dtype) || !msp_dtype_size(b->dtype)) {
        char msg[160];
        snprintf(msg, sizeof msg, "dtype %s cannot be compared",
                 msp_dtype_size(n->dtype) ? b->dtype_name : n->dtype_name);
        return cmp_set_message(t, msg);
    }
    if ((rc = cmp_set_message(t, "")))
        return rc;
    return cmp_add_job(cx, idx, nrec, n, brec, b);
}

typedef struct cmp_rec_ref {
    long b, c;
    int64_t order;
    const char *name;
} cmp_rec_ref_t;

static int cmp_rec_ref_order(const void *x, const void *y)
{
    const cmp_rec_ref_t *a = x, *b = y;
    if (a->order != b->order)
        return a->order < b->order ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* A record attribute that is a call argument (input.*, kwarg.*) or an
 * optimizer's hyperparameter (group.*, class), the ones a changed value of
 * which changes what the call computes. */
static int cmp_is_arg_key(const char *k)
{
    return !strncmp(k, "input", 5) || !strncmp(k, "kwarg", 5) || !strncmp(k, "group.", 6) ||
           !strcmp(k, "class");
}

/* A repr with a memory address in it (<function f at 0x7f...>) differs from
 * run to run: compare them without the address. */
static int cmp_arg_equal(const char *a, const char *b)
{
    for (;;) {
        const char *pa = strstr(a, " at 0x"), *pb = strstr(b, " at 0x");
        size_t la = pa ? (size_t)(pa - a) : strlen(a), lb = pb ? (size_t)(pb - b) : strlen(b);
        if (la != lb || strncmp(a, b, la) != 0 || !pa != !pb)
            return 0;
        if (!pa)
            return 1;
        a = pa + 6;
        b = pb + 6;
        while (isxdigit((unsigned char)*a))
            a++;
        while (isxdigit((unsigned char)*b))
            b++;
    }
}

static const char *cmp_attr_get(char **k, char **v, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k[i], key))
            return v[i];
    return NULL;
}

/* The "stack" attribute of a record: msprobe's stack.json, or the call site
 * our shim recorded, where "@RECORD" names the record of the same file that
 * carries the text (msprobe-dump(5)); NULL when none. byname: f's records
 * sorted by name (cmp_by_name), for the reference. */
static char *cmp_record_stack(msp_dump_file_t *f, const msp_record_info_t **byname,
                              const char *text)
{
    if (!text || text[0] != '@')
        return text ? strdup(text) : NULL;
    const msp_record_info_t **hit =
        byname ? bsearch(text + 1, byname, f->n_records, sizeof *byname, cmp_name_key) : NULL;
    char **k = NULL, **v = NULL, *out = NULL;
    size_t n = 0;
    if (!hit || msp_dump_record_attrs(f, *hit, &k, &v, &n) != MSP_OK) {
        msp_clear_error();
        return NULL;
    }
    const char *to = cmp_attr_get(k, v, n, "stack");
    if (to && to[0] != '@') /* the shim never refers to a reference */
        out = strdup(to);
    msp_free_strings(k, n);
    msp_free_strings(v, n);
    return out;
}

/* A tensor of a record under the role it pairs by: its own, or as_role. */
typedef struct cmp_view {
    const msp_tensor_info_t *t;
    char as_role[32];
} cmp_view_t;

static const char *cmp_view_role(const cmp_view_t *v)
{
    return v->as_role[0] ? v->as_role : v->t->role;
}

static int cmp_view_order(const void *x, const void *y)
{
    return cmp_role_cmp(cmp_view_role(x), cmp_view_role(y));
}

/* Our backward record r seen as msprobe dumps it (add_node_view in the
 * shim): output.K is what the attribute "grad_fn_outputs" names at K, our
 * other grads are not compared. 0 when r carries no such attribute. */
static int cmp_grad_fn_view(msp_dump_file_t *f, const msp_record_info_t *r, cmp_view_t *v, size_t n,
                            size_t *kept)
{
    char **k = NULL, **val = NULL, *map = NULL;
    size_t na = 0;
    if (msp_dump_record_attrs(f, r, &k, &val, &na) != MSP_OK) {
        msp_clear_error();
        return 0;
    }
    for (size_t i = 0; i < na && !map; i++)
        if (strcmp(k[i], "grad_fn_outputs") == 0) {
            map = val[i];
            val[i] = NULL;
        }
    msp_free_strings(k, na);
    msp_free_strings(val, na);
    if (!map)
        return 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const char *role = v[i].t->role;
        int grad = strncmp(role, "output.", 7) == 0 || strncmp(role, "grad_fn.", 8) == 0;
        long pos = -1, at = 0;
        for (const char *p = map; grad && *p && pos < 0; at++) {
            size_t len = strcspn(p, ",");
            if (len == strlen(role) && strncmp(p, role, len) == 0)
                pos = at;
            p += len + (p[len] == ',');
        }
        if (grad && pos < 0)
            continue; /* a grad msprobe's record does not hold */
        v[m] = v[i];
        if (pos >= 0)
            snprintf(v[m].as_role, sizeof v[m].as_role, "output.%ld", pos);
        m++;
    }
    free(map);
    *kept = m;
    return 1;
}

/* The tensors of r (NULL: none) in pairing order, each under the role it
 * pairs by: its own, except for one of our backward records compared with
 * msprobe's dump (cmp_grad_fn_view); our grad_fn.* copies are compared only
 * then. The views point into r; the caller frees *out. */
static msp_err cmp_record_view(msp_dump_file_t *f, const msp_record_info_t *r, int other_is_msprobe,
                               cmp_view_t **out, size_t *n_out);

/* The bench record's tensors a data_mapping line pairs under another role
 * (msprobe's -dm: "...forward.input.0: ...forward.input.1") take that role. */
static void cmp_view_remap(const cmp_mapping_t *map, const msp_record_info_t *brec,
                           const msp_record_info_t *crec, cmp_view_t *v, size_t n)
{
    if (!map || !brec || !crec)
        return;
    int any = 0;
    for (size_t i = 0; i < n; i++) {
        const char *to = cmp_mapping_role(map, brec->name, crec->name, cmp_view_role(&v[i]));
        if (to && strlen(to) < sizeof v[i].as_role) {
            snprintf(v[i].as_role, sizeof v[i].as_role, "%s", to);
            any = 1;
        }
    }
    /* a bench tensor whose role another one took pairs with nothing */
    for (size_t i = 0; any && i < n; i++) {
        if (v[i].as_role[0])
            continue;
        for (size_t j = 0; j < n; j++)
            if (j != i && v[j].as_role[0] && !strcmp(v[j].as_role, v[i].t->role)) {
                snprintf(v[i].as_role, sizeof v[i].as_role, "~%s", v[i].t->role);
                break;
            }
    }
    qsort(v, n, sizeof *v, cmp_view_order);
}

static msp_err cmp_record_view(msp_dump_file_t *f, const msp_record_info_t *r, int other_is_msprobe,
                               cmp_view_t **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    if (!r)
        return MSP_OK;
    cmp_view_t *v = calloc(r->n_tensors + 1, sizeof *v);
    if (!v)
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    size_t n = 0;
    for (size_t i = 0; i < r->n_tensors; i++)
        v[n++] = (cmp_view_t){&r->tensors[i], ""};
    size_t rl = strlen(r->name);
    int backward = rl > 9 && strcmp(r->name + rl - 9, ".backward") == 0;
    if (!(other_is_msprobe && !cmp_is_msprobe_dump(f) && backward &&
          cmp_grad_fn_view(f, r, v, n, &n))) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (strncmp(v[i].t->role, "grad_fn.", 8) != 0)
                v[m++] = v[i];
        n = m;
    }
    qsort(v, n, sizeof *v, cmp_view_order);
    *out = v;
    *n_out = n;
    return MSP_OK;
}

/* A Python scalar argument as msprobe 26 checks them: a number, a bool, or
 * a tuple or list of those ("2", "True", "(2, 2)", "[1, 1]"); its values
 * into v (at most max). -1 for anything else (a string, a dtype, None). */
static int cmp_scalars(const char *s, double *v, int max)
{
    int n = 0, open = 0;
    while (*s == ' ')
        s++;
    if (*s == '(' || *s == '[') {
        open = *s == '(' ? ')' : ']';
        s++;
    }
    for (;;) {
        while (*s == ' ')
            s++;
        if (open && *s == open && s[1] == '\0')
            return n;
        char *end;
        double x;
        if (!strncasecmp(s, "true", 4) || !strncasecmp(s, "false", 5)) {
            x = (*s == 't' || *s == 'T');
            end = (char *)s + (x > 0.5 ? 4 : 5);
        } else {
            x = strtod(s, &end);
            if (end == s)
                return -1;
        }
        if (n == max)
            return -1;
        v[n++] = x;
        s = end;
        while (*s == ' ')
            s++;
        if (!open)
            return *s ? -1 : n;
        if (*s == ',')
            s++;
        else if (*s != open)
            return -1;
    }
}

/* Whether two spellings of an argument differ as msprobe's check sees them:
 * both scalars (or lists of them) with other values; anything else is not
 * compared (1e-05 and 0.00001, True and true are the same). */
static int cmp_args_differ(const char *a, const char *b)
{
    double x[16], y[16];
    int n = cmp_scalars(a, x, 16), m = cmp_scalars(b, y, 16);
    if (n < 0 || m < 0)
        return 0;
    if (n != m)
        return 1;
    for (int i = 0; i < n; i++)
        if (!(isnan(x[i]) && isnan(y[i])) && (x[i] < y[i] || x[i] > y[i]))
            return 1;
    return 0;
}

/* Record attributes both sides share: the compare side's call site
 * ("stack"), "order_begin" (module forward records), the autocast dtype
 * (either side's), and the arguments and optimizer hyperparameters that
 * differ between the sides: arg_diff lists them ("kwarg.stride: NPU (2, 2),
 * bench (1, 1)", joined by "; "), numbers compared as numbers (1e-05 is
 * 0.00001) and other text without memory addresses; args_scalar_differ when
 * one of them is a Python scalar (or a tuple of them), msprobe 26's check. */
static msp_err cmp_record_attrs(cmp_ctx_t *cx, msp_record_cmp_t *rec,
                                const msp_record_info_t *brec, const msp_record_info_t *crec)
{
    char **bk = NULL, **bv = NULL, **ck = NULL, **cv = NULL;
    size_t bn = 0, cn = 0;
    msp_err rc = MSP_OK;
    rec->order_begin = -1;
    if (crec && msp_dump_record_attrs(cx->cf, crec, &ck, &cv, &cn) != MSP_OK)
        msp_clear_error();
    if (brec && msp_dump_record_attrs(cx->bf, brec, &bk, &bv, &bn) != MSP_OK)
        msp_clear_error();
    const char *st = cmp_attr_get(ck, cv, cn, "stack");
    if (st && !(rec->npu_stack = cmp_record_stack(cx->cf, cx->cnames, st)) && st[0] != '@')
        rc = MSP_ERR_NOMEM;
    /* the module it ran in (msprobe's construct.json, our module and mix dumps) */
    const char *pa = cmp_attr_get(ck, cv, cn, "parent");
    if (pa && !(rec->parent = strdup(pa)))
        rc = MSP_ERR_NOMEM;
    /* autocast on either side: the record computed at that dtype's precision */
    for (int side = 0; side < 2; side++) {
        const char *ac = side ? cmp_attr_get(bk, bv, bn, "autocast") : cmp_attr_get(ck, cv, cn, "autocast");
        while (ac && *ac) {
            const char *colon = strchr(ac, ':'), *comma = strchr(ac, ',');
            if (colon && (!comma || colon < comma)) {
                char dt[48];
                size_t len = comma ? (size_t)(comma - colon - 1) : strlen(colon + 1);
                snprintf(dt, sizeof dt, "%.*s", (int)(len < sizeof dt ? len : sizeof dt - 1), colon + 1);
                rec->autocast_u = fmax(rec->autocast_u, cmp_unit_roundoff(dt));
            }
            ac = comma ? comma + 1 : NULL;
        }
    }
    /* where a Distributed call ran (the cross-rank pass, cmp_ranks.c) */
    const char *grp = crec ? cmp_attr_get(ck, cv, cn, "group") : cmp_attr_get(bk, bv, bn, "group");
    if (grp && !strncmp(rec->name, "Distributed.", 12) && !(rec->comm_group = strdup(grp)))
        rc = MSP_ERR_NOMEM;
    const char *peer = crec ? cmp_attr_get(ck, cv, cn, "peer") : cmp_attr_get(bk, bv, bn, "peer");
    if (peer && !strncmp(rec->name, "Distributed.", 12)) {
        char *end;
        long long v = strtoll(peer, &end, 10);
        if (end != peer && !*end && v >= 0)
            rec->comm_peer = v;
    }
    const char *ob = crec ? cmp_attr_get(ck, cv, cn, "order_begin")
                          : cmp_attr_get(bk, bv, bn, "order_begin");
    if (ob) {
        char *end;
        long long v = strtoll(ob, &end, 10);
        if (end != ob && !*end && v >= 0)
            rec->order_begin = v;
    }
    char *acc = NULL;
    for (int side = 0; side < 2 && brec && crec && !rc; side++) {
        /* keys of the compare side first, then those only the bench has */
        char **k = side ? bk : ck, **v = side ? bv : cv;
        size_t n = side ? bn : cn;
        for (size_t i = 0; i < n && !rc; i++) {
            if (!cmp_is_arg_key(k[i]))
                continue;
            const char *other = side ? cmp_attr_get(ck, cv, cn, k[i]) : cmp_attr_get(bk, bv, bn, k[i]);
            if (side && other)
                continue;
            double x[16];
            int scalar = other && cmp_scalars(v[i], x, 16) >= 0 && cmp_scalars(other, x, 16) >= 0;
            if (other && (scalar ? !cmp_args_differ(v[i], other) : cmp_arg_equal(v[i], other)))
                continue;
            rec->args_scalar_differ |= scalar;
            char *no = NULL, *bo = NULL;
            const char *nt = msp_utf8_clean(side ? "<absent>" : v[i], 120, &no);
            const char *bt = msp_utf8_clean(side ? v[i] : (other ? other : "<absent>"), 120, &bo);
            char *next = msp_asprintf("%s%s%s: NPU %s, bench %s", acc ? acc : "", acc ? "; " : "",
                                      k[i], nt ? nt : "?", bt ? bt : "?");
            free(no);
            free(bo);
            free(acc);
            if (!(acc = next))
                rc = MSP_ERR_NOMEM;
        }
    }
    rec->arg_diff = acc;
    msp_free_strings(bk, bn);
    msp_free_strings(bv, bn);
    msp_free_strings(ck, cn);
    msp_free_strings(cv, cn);
    return rc ? msp_fail(rc, "compare: out of memory") : MSP_OK;
}

static msp_err cmp_record_rows(cmp_ctx_t *cx, cmp_build_t *bld, int64_t step, int64_t rank,
                               const msp_record_info_t *brec, const msp_record_info_t *crec,
                               int stats_file)
{
    size_t ri = 0;
    msp_err rc = cmp_new_record(bld, &ri);
    if (rc)
        return rc;
    msp_record_cmp_t *rec = &bld->res->records[ri];
    rec->name = strdup(crec ? crec->name : brec->name);
    rec->bench_name = brec && crec ? strdup(brec->name) : NULL;
    if (!rec->name || (brec && crec && !rec->bench_name))
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    rec->step = step;
    rec->rank = rank;
    rec->order = crec ? crec->order : brec->order;
    if ((rc = cmp_record_attrs(cx, rec, brec, crec)))
        return rc;
    rec->first_tensor = bld->res->n_tensors;
    cmp_view_t *bt = NULL, *ct = NULL;
    size_t nb = 0, nc = 0, i = 0, j = 0;
    if ((rc = cmp_record_view(cx->bf, brec, cmp_is_msprobe_dump(cx->cf), &bt, &nb)) ||
        (rc = cmp_record_view(cx->cf, crec, cmp_is_msprobe_dump(cx->bf), &ct, &nc)))
        goto cleanup;
    cmp_view_remap(cx->map, brec, crec, bt, nb);
    while (!rc && (i < nb || j < nc)) {
        int o = i == nb ? 1
                : (j == nc ? -1 : cmp_role_cmp(cmp_view_role(&bt[i]), cmp_view_role(&ct[j])));
        if (o < 0) {
            rc = cmp_tensor_row(cx, bld, crec, NULL, brec, bt[i++].t, stats_file);
        } else if (o > 0) {
            rc = cmp_tensor_row(cx, bld, crec, ct[j++].t, brec, NULL, stats_file);
        } else {
            rc = cmp_tensor_row(cx, bld, crec, ct[j++].t, brec, bt[i++].t, stats_file);
        }
    }
    bld->res->records[ri].n_tensors = bld->res->n_tensors - bld->res->records[ri].first_tensor;
cleanup:
    free(bt);
    free(ct);
    return rc;
}

static void cmp_finish_jobs(cmp_ctx_t *cx, msp_compare_result_t *res)
{
    for (size_t j = 0; j < cx->n_jobs; j++) {
        cmp_job_t *job = &cx->jobs[j];
        msp_tensor_cmp_t *t = &res->tensors[job->row];
        if (job->read_error) { /* metrics stay N/A, verdict No */
            char *msg = msp_asprintf("tensor data cannot be read: %s", job->read_error);
            cmp_set_message(t, msg ? msg : job->read_error);
            free(msg);
            if (!res->n_unreadable++)
                res->first_unreadable = msp_asprintf("%s: %s", t->npu_name ? t->npu_name
                                                     : t->bench_name ? t->bench_name : "?",
                                                     job->read_error);
            free(job->read_error);
            job->read_error = NULL;
            continue;
        }
        msp_metrics_t m;
        int scalar = job->numel == 1;
        cmp_acc_finish(&job->acc, scalar, &m);
        t->cosine = m.cosine;
        t->euc_dist = m.euc_dist;
        t->max_abs_err = m.max_abs_err;
        t->max_rel_err = m.max_rel_err;
        t->one_thousandth_ratio = m.one_thousandth_ratio;
        t->five_thousandths_ratio = m.five_thousandths_ratio;
        if (job->side) { /* else kept from the dump attributes */
            t->npu_max = m.n_max;
            t->npu_min = m.n_min;
            t->npu_mean = m.n_mean;
            t->npu_norm = m.n_norm;
            t->bench_max = m.b_max;
            t->bench_min = m.b_min;
            t->bench_mean = m.b_mean;
            t->bench_norm = m.b_norm;
        }
        cmp_fill_diffs(t, NULL);
        if (job->acc.pos_mismatch)
            t->rel_err = INFINITY;
        else
            t->rel_err = cmp_rel(sqrt(job->acc.dd), sqrt(job->acc.bb));
        t->highlight = job->acc.n_nan || job->acc.n_inf ? MSP_HL_RED : MSP_HL_NONE;
        t->npu_nonfinite |= job->acc.n_nan || job->acc.n_inf;
        t->bench_nonfinite |= job->acc.b_nan || job->acc.b_inf;
        t->agree = m.agree;
        t->bytes = (uint64_t)job->nt->nbytes + (uint64_t)job->bt->nbytes;
        if (job->numel == 0)
            t->verdict = MSP_VERDICT_YES; /* nothing to disagree about */
        else
            cmp_tensor_verdict(t, cx->o, scalar);
        if (m.message)
            cmp_set_message(t, m.message);
        res->n_crc_bad += (size_t)cmp_check_crc(t, job);
    }
}

struct cmp_open_job {
    const char *path;
    msp_dump_file_t *f;
    msp_err rc;
    char detail[1024];
    msp_dump_file_t *bf; /* cmp_open_both: the bench side (f is the compare side) */
};

static void *cmp_open_main(void *arg)
{
    struct cmp_open_job *j = arg;
    j->rc = msp_dump_open(j->path, &j->f);
    if (j->rc)
        snprintf(j->detail, sizeof j->detail, "%s", msp_last_error());
    return NULL;
}

/* Both sides opened at once: each open waits on its own reader helper
 * (msprobe-dump(5), READING UNTRUSTED FILES), so the two overlap. Runs on a
 * prefetch thread (below); the error, if any, is kept in o->detail. */
static void cmp_open_both(const cmp_file_pair_t *fp, struct cmp_open_job *o)
{
    struct cmp_open_job b = {fp->bench, NULL, MSP_OK, "", NULL};
    pthread_t th;
    int threaded = pthread_create(&th, NULL, cmp_open_main, &b) == 0;
    if (!threaded)
        cmp_open_main(&b);
    o->path = fp->cmp;
    cmp_open_main(o);
    if (threaded)
        pthread_join(th, NULL);
    if (b.rc) { /* the bench side's error is the one reported */
        msp_dump_close(o->f);
        o->f = NULL;
        o->rc = b.rc;
        memcpy(o->detail, b.detail, sizeof o->detail);
        return;
    }
    o->bf = b.f;
}

/* The next pair's files are opened while this pair is compared, so the
 * reader helpers' start (a process each, some ms) is hidden behind the
 * tensor reads: one pair ahead, never more. */
typedef struct {
    const cmp_file_pair_t *fp;
    struct cmp_open_job o;
    pthread_t th;
    int threaded, active;
} cmp_prefetch_t;

static void *cmp_prefetch_main(void *arg)
{
    cmp_prefetch_t *p = arg;
    cmp_open_both(p->fp, &p->o);
    return NULL;
}

static void cmp_prefetch_start(cmp_prefetch_t *p, const cmp_file_pair_t *fp)
{
    memset(p, 0, sizeof *p);
    p->fp = fp;
    p->active = 1;
    p->threaded = pthread_create(&p->th, NULL, cmp_prefetch_main, p) == 0;
    if (!p->threaded)
        cmp_prefetch_main(p);
}

/* Waits for the pair's files: MSP_OK with both open, or its error set here. */
static msp_err cmp_prefetch_finish(cmp_prefetch_t *p, msp_dump_file_t **bf, msp_dump_file_t **cf)
{
    if (p->threaded)
        pthread_join(p->th, NULL);
    p->active = p->threaded = 0;
    *bf = p->o.bf;
    *cf = p->o.f;
    if (p->o.rc)
        return msp_fail(p->o.rc, "%s", p->o.detail);
    return MSP_OK;
}

/* A prefetch whose pair will not be compared (an earlier error). */
static void cmp_prefetch_drop(cmp_prefetch_t *p)
{
    if (!p->active)
        return;
    msp_dump_file_t *bf, *cf;
    (void)cmp_prefetch_finish(p, &bf, &cf);
    msp_dump_close(bf);
    msp_dump_close(cf);
}

static msp_err cmp_file_pair(cmp_ctx_t *cx, cmp_build_t *bld, const cmp_file_pair_t *fp,
                             cmp_prefetch_t *opened, const cmp_mapping_t *map)
{
    msp_err rc = MSP_OK;
    cmp_pair_t *pairs = NULL;
    cmp_rec_ref_t *refs = NULL;
    size_t np = 0;
    cx->bf = cx->cf = NULL;
    cx->bfd = cx->cfd = -1;
    cx->bmap = cx->cmap = NULL;
    cx->n_jobs = 0;
    if ((rc = cmp_prefetch_finish(opened, &cx->bf, &cx->cf))) {
        /* inside directories an unreadable file is skipped, the rest compared */
        if (fp->in_tree && rc != MSP_ERR_NOMEM) {
            char detail[1024];
            snprintf(detail, sizeof detail, "%s", msp_last_error());
            rc = cmp_note_skipped(bld->res, fp, detail);
        }
        goto cleanup;
    }
    cx->pairs_done++;
    cx->bfd = open(fp->bench, O_RDONLY | O_CLOEXEC);
    cx->cfd = open(fp->cmp, O_RDONLY | O_CLOEXEC);
    if (cx->bfd < 0 || cx->cfd < 0) {
        rc = msp_fail(MSP_ERR_IO, "cannot open %s: %s", cx->bfd < 0 ? fp->bench : fp->cmp,
                      strerror(errno));
        goto cleanup;
    }
    cx->use_mmap = 0;
    if (cx->o->io_mode == MSP_IO_MMAP) {
        /* offsets were checked against the file size by the reader; map
         * whole files and fall back to pread when mapping is refused */
        struct stat bs, cs;
        if (fstat(cx->bfd, &bs) == 0 && fstat(cx->cfd, &cs) == 0 && bs.st_size > 0 &&
            cs.st_size > 0) {
            void *bm = mmap(NULL, (size_t)bs.st_size, PROT_READ, MAP_SHARED, cx->bfd, 0);
            void *cm = mmap(NULL, (size_t)cs.st_size, PROT_READ, MAP_SHARED, cx->cfd, 0);
            if (bm != MAP_FAILED && cm != MAP_FAILED) {
                cx->bmap = bm;
                cx->cmap = cm;
                cx->bmap_len = (size_t)bs.st_size;
                cx->cmap_len = (size_t)cs.st_size;
                cx->use_mmap = 1;
            } else {
                if (bm != MAP_FAILED)
                    munmap(bm, (size_t)bs.st_size);
                if (cm != MAP_FAILED)
                    munmap(cm, (size_t)cs.st_size);
            }
        }
    }
    /* 1: a statistics dump on either side; 2: an md5 (hash-only) dump */
    int stats_file = !strcmp(cx->bf->task, "md5") || !strcmp(cx->cf->task, "md5") ? 2
                     : !strcmp(cx->bf->task, "statistics") || !strcmp(cx->cf->task, "statistics");
    cx->has_producers = cmp_file_has_producers(cx->bf) || cmp_file_has_producers(cx->cf);
    /* records by name: producer links and call-site references look them up */
    if (!(cx->bnames = cmp_by_name(cx->bf)) || !(cx->cnames = cmp_by_name(cx->cf))) {
        rc = msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
        goto cleanup;
    }
    if (stats_file)
        bld->res->stats_mode = 1;
    cx->md5 |= stats_file == 2;
    if ((rc = cmp_match_records(cx->bf, cx->cf, cx->o, map, &pairs, &np)))
        goto cleanup;
    refs = calloc(np + 1, sizeof *refs);
    if (!refs) {
        rc = msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < np; i++) {
        const msp_record_info_t *r =
            pairs[i].c >= 0 ? &cx->cf->records[pairs[i].c] : &cx->bf->records[pairs[i].b];
        refs[i] = (cmp_rec_ref_t){pairs[i].b, pairs[i].c, r->order, r->name};
    }
    qsort(refs, np, sizeof *refs, cmp_rec_ref_order);
    /* two single files: step and rank from the compare file's attributes */
    int64_t step = fp->step >= 0 ? fp->step : (cx->cf->step >= 0 ? cx->cf->step : 0);
    int64_t rank = fp->rank >= 0 ? fp->rank : (cx->cf->rank >= 0 ? cx->cf->rank : 0);
    for (size_t i = 0; i < np && !rc; i++)
        rc = cmp_record_rows(cx, bld, step, rank, refs[i].b >= 0 ? &cx->bf->records[refs[i].b] : NULL,
                             refs[i].c >= 0 ? &cx->cf->records[refs[i].c] : NULL, stats_file);
    if (rc)
        goto cleanup;
    if (cx->use_mmap) {
        /* a mapped read past the end of a file is SIGBUS, not an error code */
        for (size_t j = 0; j < cx->n_jobs; j++) {
            const cmp_job_t *job = &cx->jobs[j];
            int n_out = job->nt->offset >= 0 &&
                        (uint64_t)job->nt->offset + (uint64_t)job->nt->nbytes > cx->cmap_len;
            int b_out = job->bt->offset >= 0 &&
                        (uint64_t)job->bt->offset + (uint64_t)job->bt->nbytes > cx->bmap_len;
            if (n_out || b_out) {
                rc = msp_fail(MSP_ERR_FORMAT,
                              "file %s: record %s: tensor %s: data ends past the end of the "
                              "file; the file is truncated",
                              n_out ? fp->cmp : fp->bench, n_out ? job->nrec->name : job->brec->name,
                              n_out ? job->nt->role : job->bt->role);
                goto cleanup;
            }
        }
    }
    if ((rc = cmp_run_offset_jobs(cx, &bld->res->bytes_compared)))
        goto cleanup;
    if ((rc = cmp_run_stream_jobs(cx, &bld->res->bytes_compared)))
        goto cleanup;
    cmp_finish_jobs(cx, bld->res);
cleanup:
    for (size_t j = 0; j < cx->n_jobs; j++) {
        free(cx->jobs[j].read_error);
        cx->jobs[j].read_error = NULL;
    }
    if (cx->bmap)
        munmap((void *)cx->bmap, cx->bmap_len);
    if (cx->cmap)
        munmap((void *)cx->cmap, cx->cmap_len);
    cx->bmap = cx->cmap = NULL;
    cx->use_mmap = 0;
    if (cx->bfd >= 0)
        close(cx->bfd);
    if (cx->cfd >= 0)
        close(cx->cfd);
    free(cx->bnames);
    free(cx->cnames);
    cx->bnames = cx->cnames = NULL;
    msp_dump_close(cx->bf);
    msp_dump_close(cx->cf);
    cx->bf = cx->cf = NULL;
    free(pairs);
    free(refs);
    return rc;
}

/* A mapping line that named a record no file pair holds changed nothing:
 * say so, once a line (a typo would otherwise pass in silence). */
static void cmp_mapping_warn_unused(const msp_compare_opts_t *o, const cmp_mapping_t *map)
{
    for (size_t i = 0; i < map->n; i++) {
        const cmp_map_entry_t *e = &map->e[i];
        if (e->bench_seen && e->cmp_seen)
            continue;
        if (e->cell)
            msp_log(MSP_LOG_WARN, "cell mapping file %s:%zu: no %s module record has \"%s\"; the "
                    "line matched nothing", o->cell_mapping_path, e->line,
                    e->cmp_seen ? "bench" : "compare", e->cmp_seen ? e->bench : e->cmp);
        else
            msp_log(MSP_LOG_WARN, "mapping file %s:%zu: %s record %s is in no %s dump; the line "
                    "matched nothing", o->mapping_path, e->line, e->cmp_seen ? "bench" : "compare",
                    e->cmp_seen ? e->bench : e->cmp, e->cmp_seen ? "bench" : "compare");
    }
}

/* ---- one pair at a time (msp_compare_run, and cmp_stream.c's parts) ---------- */

/* Pairs opened ahead of the one compared: one, or two where there are cores
 * for it (each pair's two files are parsed by two reader helpers at once,
 * and fmt_contain.c runs four helpers at most). */
#define CMP_AHEAD_MAX 2
#define CMP_SLOTS (CMP_AHEAD_MAX + 1)

struct cmp_engine {
    cmp_ctx_t cx;
    cmp_mapping_t map;
    cmp_prefetch_t pf[CMP_SLOTS];
    const cmp_file_pair_t *pf_fp[CMP_SLOTS]; /* the pair each prefetch slot is opening */
    cmp_build_t bld;
    const void *last_rec, *last_ten;  /* bld.res's arrays when last seen */
};

msp_err cmp_engine_open(const msp_compare_opts_t *opts, cmp_engine_t **out)
{
    *out = NULL;
    cmp_engine_t *e = calloc(1, sizeof *e);
    if (!e)
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    msp_err rc = MSP_OK;
    if ((opts->mapping_path && (rc = cmp_mapping_load(opts->mapping_path, &e->map))) ||
        (opts->cell_mapping_path && (rc = cmp_mapping_load_cell(opts->cell_mapping_path, &e->map)))) {
        cmp_mapping_free(&e->map);
        free(e);
        return rc;
    }
    cmp_ctx_t *cx = &e->cx;
    cx->o = opts;
    cx->map = e->map.n ? &e->map : NULL;
    cx->chunk = opts->chunk_bytes ? opts->chunk_bytes : CMP_DEFAULT_CHUNK;
    if (cx->chunk < 64 * 1024)
        cx->chunk = 64 * 1024;
    cx->chunk = (cx->chunk + 63) & ~(size_t)63;
    cx->nthreads = opts->threads > 0 ? opts->threads : omp_get_max_threads();
    if (cx->nthreads < 1)
        cx->nthreads = 1;
    cx->bufs = aligned_alloc(64, (size_t)cx->nthreads * 2 * cx->chunk);
    cx->items = calloc(CMP_WINDOW_UNITS, sizeof *cx->items);
    if (!cx->bufs || !cx->items) {
        cmp_engine_close(e);
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory for read buffers");
    }
    *out = e;
    return MSP_OK;
}

size_t cmp_engine_ahead(const cmp_engine_t *e)
{
    return e->cx.nthreads >= 4 ? CMP_AHEAD_MAX : 1;
}

static int cmp_engine_slot(cmp_engine_t *e, const cmp_file_pair_t *fp)
{
    for (int s = 0; s < CMP_SLOTS; s++)
        if (e->pf[s].active && e->pf_fp[s] == fp)
            return s;
    for (int s = 0; s < CMP_SLOTS; s++)
        if (!e->pf[s].active) {
            cmp_prefetch_start(&e->pf[s], fp);
            e->pf_fp[s] = fp;
            return s;
        }
    return -1; /* both busy with other pairs: not how the callers use it */
}

msp_err cmp_engine_pair(cmp_engine_t *e, msp_compare_result_t *res, const cmp_file_pair_t *fp,
                        const cmp_file_pair_t *const *ahead, size_t n_ahead, int *compared)
{
    *compared = 0;
    int s = cmp_engine_slot(e, fp);
    if (s < 0)
        return msp_fail(MSP_ERR_INTERNAL, "compare: no free slot to open %s", fp->cmp);
    /* opened while this pair is compared */
    for (size_t k = 0; k < n_ahead && k < cmp_engine_ahead(e); k++)
        if (ahead[k] && ahead[k] != fp)
            (void)cmp_engine_slot(e, ahead[k]);
    if (e->bld.res != res || e->last_rec != res->records || e->last_ten != res->tensors) {
        /* another result (a new one may sit where a freed one was): its
         * arrays grow from what they hold */
        e->bld.res = res;
        e->bld.cap_rec = res->n_records;
        e->bld.cap_ten = res->n_tensors;
    }
    size_t before = e->cx.pairs_done;
    msp_err rc = cmp_file_pair(&e->cx, &e->bld, fp, &e->pf[s], e->map.n ? &e->map : NULL);
    e->last_rec = res->records;
    e->last_ten = res->tensors;
    e->pf_fp[s] = NULL;
    *compared = e->cx.pairs_done > before;
    return rc;
}

int cmp_engine_md5(const cmp_engine_t *e)
{
    return e && e->cx.md5;
}

void cmp_engine_close(cmp_engine_t *e)
{
    if (!e)
        return;
    for (int s = 0; s < CMP_SLOTS; s++)
        cmp_prefetch_drop(&e->pf[s]);
    if (e->cx.pairs_done)
        cmp_mapping_warn_unused(e->cx.o, &e->map);
    cmp_mapping_free(&e->map);
    free(e->cx.bufs);
    free(e->cx.items);
    free(e->cx.jobs);
    free(e);
}

msp_err msp_compare_run(const char *bench, const char *cmp, const msp_compare_opts_t *opts,
                        msp_compare_result_t **out)
{
    msp_compare_opts_t defaults;
    cmp_file_pair_t *fps = NULL;
    size_t nfp = 0, done = 0;
    cmp_engine_t *eng = NULL;
    msp_compare_result_t *res = NULL;
    msp_err rc = MSP_OK;
    if (!out)
        return msp_fail(MSP_ERR_USAGE, "msp_compare_run: out is NULL");
    *out = NULL;
    if (!bench || !cmp)
        return msp_fail(MSP_ERR_USAGE, "compare: both a bench (-b) and a compare (-c) path are needed");
    if (!opts) {
        msp_compare_opts_default(&defaults);
        opts = &defaults;
    }
    res = calloc(1, sizeof *res);
    if (!res)
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    res->root_record = -1;
    res->root_tensor = -1;
    res->first_rank = -1;
    if ((rc = cmp_resolve_inputs(bench, cmp, &fps, &nfp, res)) ||
        (rc = cmp_engine_open(opts, &eng)))
        goto cleanup;
    for (size_t i = 0; i < nfp && !rc; i++) {
        int compared = 0;
        const cmp_file_pair_t *ahead[CMP_AHEAD_MAX] = {NULL};
        for (size_t k = 0; k < CMP_AHEAD_MAX && i + 1 + k < nfp; k++)
            ahead[k] = &fps[i + 1 + k];
        rc = cmp_engine_pair(eng, res, &fps[i], ahead, CMP_AHEAD_MAX, &compared);
        done += (size_t)compared;
    }
    int md5 = cmp_engine_md5(eng);
    cmp_engine_close(eng);
    eng = NULL;
    if (!rc && !done)
        rc = msp_fail(MSP_ERR_MISMATCH,
                      "bench %s and compare %s share no readable step/rank: nothing to compare",
                      bench, cmp);
    if (rc)
        goto cleanup;
    res->n_pairs = done;
    if ((rc = cmp_apply_results(res, md5)))
        goto cleanup;
    for (size_t r = 0; r < res->n_records; r++) {
        msp_record_cmp_t *rec = &res->records[r];
        cmp_record_finish(rec, res->tensors);
        if ((rec->verdict != MSP_VERDICT_YES && rec->verdict != MSP_VERDICT_NA) ||
            rec->setup_differs)
            res->n_failed++;
    }
    if (!(rc = cmp_link_backward(res)) && !(rc = cmp_replay_run(res, fps, nfp, opts)) &&
        !(rc = cmp_module_params(res, 0.0)) && !(rc = cmp_judge_modules(res)) &&
        !(rc = cmp_rank_suspects(res, opts->top)))
        rc = cmp_ranks_whole(res, opts->top);
cleanup:
    cmp_engine_close(eng);
    cmp_file_pairs_free(fps, nfp);
    if (rc) {
        msp_compare_result_free(res);
        return rc;
    }
    *out = res;
    return MSP_OK;
}
