/* Tensor data through the metric kernel: the data jobs a file pair's rows
 * queued (cmp_rows.c), run for cmp_run.c.
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

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <omp.h>

/* Windows smaller than this run on the calling thread: waking the team costs
 * more than it saves, and on a busy machine a barrier can cost a time slice. */
#define CMP_PARALLEL_MIN_BYTES ((uint64_t)4 << 20)
/* Mapped tensors below this size per side skip the populate/release syscalls;
 * page faults map them and the window releases its span at once. */
#define CMP_SMALL_UNIT_BYTES ((size_t)256 << 10)
/* ... and a window holds at most this many bytes of such units, so that what
 * stays mapped until the window's release is bounded too. */
#define CMP_SMALL_SPAN_BYTES ((uint64_t)16 << 20)

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
        cmp_acc_run(j->ndt, nb + off * nsz, j->bdt, bb + off * bsz, k, j->rtol, j->atol, j->side,
                    &it->acc);
        cn = msp_crc32(cn, nb + off * nsz, k * nsz);
        cb = msp_crc32(cb, bb + off * bsz, k * bsz);
    }
    it->crc[0] = cn;
    it->crc[1] = cb;
}

static uint64_t cmp_item_elems(const cmp_job_t *job, size_t unit)
{
    uint64_t first = (uint64_t)unit * job->unit;
    return job->numel - first < job->unit ? job->numel - first : job->unit;
}

/* Where an item's bytes lie in the files, npu (0) and bench (1); returns
 * its elements. */
static size_t cmp_item_at(const cmp_ctx_t *cx, const cmp_item_t *it, uint64_t off[2],
                          uint64_t len[2])
{
    const cmp_job_t *j = &cx->jobs[it->job];
    size_t nsz = msp_dtype_size(j->ndt), bsz = msp_dtype_size(j->bdt);
    uint64_t first = (uint64_t)it->unit * j->unit;
    size_t m = (size_t)cmp_item_elems(j, it->unit);
    off[0] = (uint64_t)j->nt->offset + first * nsz;
    off[1] = (uint64_t)j->bt->offset + first * bsz;
    len[0] = m * nsz;
    len[1] = m * bsz;
    return m;
}

static void cmp_do_item(cmp_ctx_t *cx, cmp_item_t *it, unsigned char *nbuf, unsigned char *bbuf)
{
    cmp_job_t *j = &cx->jobs[it->job];
    uint64_t at[2], len[2];
    size_t m = cmp_item_at(cx, it, at, len);
    cmp_acc_init(&it->acc);
    it->err = 0;
    if (cx->use_mmap) {
        int small = cmp_job_small(j);
        if (!small) {
            cmp_map_populate(cx->cmap, at[0], (size_t)len[0]);
            cmp_map_populate(cx->bmap, at[1], (size_t)len[1]);
        }
        cmp_unit_run(j, it, cx->cmap + at[0], cx->bmap + at[1], m);
        if (!small) {
            cmp_map_release(cx->cmap, at[0], (size_t)len[0]);
            cmp_map_release(cx->bmap, at[1], (size_t)len[1]);
        }
        return;
    }
    it->err = cmp_read_full(cx->cfd, nbuf, (size_t)len[0], (int64_t)at[0]);
    if (it->err) {
        it->err_side = 0;
        return;
    }
    it->err = cmp_read_full(cx->bfd, bbuf, (size_t)len[1], (int64_t)at[1]);
    if (it->err) {
        it->err_side = 1;
        return;
    }
    /* The bytes are in cache now: checking them costs little (bench/compare). */
    cmp_unit_run(j, it, nbuf, bbuf, m);
}

/* A run of small items is read with one call a side when its span fits a
 * thread's buffer on both sides and holds at most this many bytes that are
 * not its tensors' (msprobe writes a step's tensors one after the other,
 * with their metadata between them). Two reads of a few KiB a row were a
 * third of compare's CPU on a file of small tensors. */
#define CMP_GROUP_SLACK ((uint64_t)64 << 10)

/* Groups the window's n items (cx->groups); returns how many groups. */
static size_t cmp_group_items(cmp_ctx_t *cx, size_t n)
{
    size_t ng = 0;
    for (size_t i = 0; i < n;) {
        cmp_group_t *g = &cx->groups[ng++];
        *g = (cmp_group_t){.first = i, .n = 1};
        size_t k = i + 1;
        uint64_t lo[2], hi[2], sum[2], at[2], len[2];
        if (!cx->use_mmap && cmp_job_small(&cx->jobs[cx->items[i].job])) {
            cmp_item_at(cx, &cx->items[i], lo, sum);
            for (int s = 0; s < 2; s++)
                hi[s] = lo[s] + sum[s];
            for (; k < n && cmp_job_small(&cx->jobs[cx->items[k].job]); k++) {
                cmp_item_at(cx, &cx->items[k], at, len);
                uint64_t nlo[2], nhi[2];
                int fits = 1;
                for (int s = 0; s < 2; s++) {
                    nlo[s] = at[s] < lo[s] ? at[s] : lo[s];
                    nhi[s] = at[s] + len[s] > hi[s] ? at[s] + len[s] : hi[s];
                    fits &= nhi[s] - nlo[s] <= cx->chunk &&
                            nhi[s] - nlo[s] <= sum[s] + len[s] + CMP_GROUP_SLACK;
                }
                if (!fits)
                    break;
                for (int s = 0; s < 2; s++) {
                    lo[s] = nlo[s];
                    hi[s] = nhi[s];
                    sum[s] += len[s];
                }
            }
        }
        if (k - i > 1) {
            g->n = k - i;
            for (int s = 0; s < 2; s++) {
                g->off[s] = lo[s];
                g->len[s] = hi[s] - lo[s];
            }
        }
        i = i + g->n;
    }
    return ng;
}

/* A group's items: its span read a side, then each item compared in place;
 * a span that cannot be read whole is read item by item, so that a short
 * or failed read is the item's error as before. */
static void cmp_do_group(cmp_ctx_t *cx, const cmp_group_t *g, unsigned char *nbuf,
                         unsigned char *bbuf)
{
    cmp_item_t *items = cx->items + g->first;
    int whole = g->len[0] && !cmp_read_full(cx->cfd, nbuf, (size_t)g->len[0], (int64_t)g->off[0]) &&
                !cmp_read_full(cx->bfd, bbuf, (size_t)g->len[1], (int64_t)g->off[1]);
    for (size_t i = 0; i < g->n; i++) {
        if (!whole) {
            cmp_do_item(cx, &items[i], nbuf, bbuf);
            continue;
        }
        uint64_t at[2], len[2];
        size_t m = cmp_item_at(cx, &items[i], at, len);
        cmp_acc_init(&items[i].acc);
        items[i].err = 0;
        cmp_unit_run(&cx->jobs[items[i].job], &items[i], nbuf + (at[0] - g->off[0]),
                     bbuf + (at[1] - g->off[1]), m);
    }
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
    return msp_fail(MSP_ERR_IO, "file %s: record %s: tensor %s: read failed: %s", f->path, r->name,
                    t->role, strerror(it->err));
}

/* crc extended by the CRC-32 c of len more bytes. A crc of 0 extends to c
 * itself (zlib's combine multiplies crc by a power of x, then adds c), which
 * is every tensor's first unit: zlib's combine, about 800 instructions, was
 * a fortieth of compare's work on small tensors. */
static uint32_t cmp_crc_extend(uint32_t crc, uint32_t c, uint64_t len)
{
    return crc ? (uint32_t)crc32_combine(crc, c, (z_off_t)len) : c;
}

/* A compared unit into its job, units in order: metrics merged, each
 * side's CRC extended by the unit's. Returns the unit's bytes (both sides). */
static uint64_t cmp_unit_merge(cmp_job_t *job, const cmp_item_t *it)
{
    uint64_t m = cmp_item_elems(job, it->unit);
    size_t nsz = msp_dtype_size(job->ndt), bsz = msp_dtype_size(job->bdt);
    cmp_acc_merge(&job->acc, &it->acc);
    job->crc[0] = cmp_crc_extend(job->crc[0], it->crc[0], m * nsz);
    job->crc[1] = cmp_crc_extend(job->crc[1], it->crc[1], m * bsz);
    return m * (nsz + bsz);
}

/* All jobs whose both sides have a file offset (mapped or pread), in windows of units. */
msp_err cmp_run_offset_jobs(cmp_ctx_t *cx, uint64_t *bytes_done)
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
            cx->items[n].job = j;
            cx->items[n].unit = u;
            uint64_t off[2], len[2];
            cmp_item_at(cx, &cx->items[n], off, len);
            if (cmp_job_small(job)) {
                sbytes += len[0] + len[1];
                for (int side = 0; side < 2; side++) {
                    span[side][0] = off[side] < span[side][0] ? off[side] : span[side][0];
                    span[side][1] = off[side] + len[side] > span[side][1] ? off[side] + len[side]
                                                                          : span[side][1];
                }
            }
            wbytes += len[0] + len[1];
            n++;
            u++;
        }
        if (!n)
            break;
        cmp_item_t *items = cx->items;
        size_t ng = cmp_group_items(cx, n);
#pragma omp parallel for schedule(dynamic, 1)                                                      \
    num_threads(cx->nthreads) if (wbytes >= CMP_PARALLEL_MIN_BYTES && ng > 1)
        for (size_t i = 0; i < ng; i++) {
            unsigned char *nb = cx->bufs + (size_t)omp_get_thread_num() * 2 * cx->chunk;
            cmp_do_group(cx, &cx->groups[i], nb, nb + cx->chunk);
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
msp_err cmp_run_stream_jobs(cmp_ctx_t *cx, uint64_t *bytes_done)
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

msp_err cmp_add_job(cmp_ctx_t *cx, size_t row, const msp_record_info_t *nrec,
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
    j->side = !(nt->has_stats == MSP_STATS_ALL && bt->has_stats == MSP_STATS_ALL);
    cmp_acc_init(&j->acc);
    return MSP_OK;
}
