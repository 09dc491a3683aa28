/* The engine of one file pair at a time (cmp_stream.c drives it): open the
 * pair's files ahead of time, match records from the catalogues, build the
 * rows (cmp_rows.c) and run their data jobs through the metric kernel
 * (cmp_data.c). */
#include "cmp_internal.h"
#include "cmp_job.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <omp.h>

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

/* A string of the row's, unless it lies in the result's name blocks. */
static void cmp_row_str_free(const msp_compare_result_t *r, char *s)
{
    if (s && !cmp_names_hold(r, s))
        free(s);
}

static void cmp_tensor_strings_free(const msp_compare_result_t *r, msp_tensor_cmp_t *t)
{
    cmp_row_str_free(r, t->npu_name);
    cmp_row_str_free(r, t->bench_name);
    free(t->err_message);
    cmp_row_str_free(r, t->producer);
    cmp_row_str_free(r, t->npu_data_name);
    cmp_row_str_free(r, t->bench_data_name);
}

void msp_compare_result_free(msp_compare_result_t *r)
{
    if (!r)
        return;
    if (r->texts && r->texts_free)
        r->texts_free(r->texts);
    for (size_t i = 0; !r->strs && i < r->n_records; i++) {
        cmp_row_str_free(r, r->records[i].name);
        cmp_row_str_free(r, r->records[i].bench_name);
        free(r->records[i].npu_stack);
        free(r->records[i].arg_diff);
        free(r->records[i].replay_note);
        free(r->records[i].parent);
        free(r->records[i].comm_group);
        free(r->records[i].params);
    }
    for (size_t i = 0; i < r->n_ranks; i++)
        free(r->ranks[i].at);
    free(r->ranks);
    free(r->replay_unavailable);
    /* a lean result's rows: its held records' alone (the rest never touched) */
    for (size_t h = 0; !r->strs && h < (r->held_records ? r->n_held_records : 1); h++) {
        size_t from = 0, to = r->n_tensors;
        if (r->held_records) {
            const msp_record_cmp_t *rec = &r->records[r->held_records[h]];
            from = rec->first_tensor < to ? rec->first_tensor : to;
            to = rec->n_tensors < to - from ? from + rec->n_tensors : to;
        }
        for (size_t i = from; i < to; i++)
            cmp_tensor_strings_free(r, &r->tensors[i]);
    }
    free(r->held_records);
    for (size_t i = 0; !r->strs && i < r->n_suspects; i++)
        free(r->suspects[i].reason);
    free(r->strs);
    cmp_names_free(r);
    free(r->suspects);
    free(r->suspect_from);
    for (size_t i = 0; i < r->n_unpaired; i++)
        free(r->unpaired[i]);
    free(r->unpaired);
    for (size_t i = 0; i < r->n_unread; i++)
        free(r->unread[i]);
    free(r->unread);
    free(r->first_unreadable);
    for (size_t i = 0; i < r->n_samples; i++)
        msp_tensor_sample_free(&r->samples[i]);
    free(r->samples);
    free(r->records);
    free(r->tensors);
    free(r);
}

/* ---- one file pair ---------------------------------------------------------- */

typedef struct cmp_rec_ref {
    long b, c;
    int stray;
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

struct cmp_open_job {
    const char *path;
    msp_dump_file_t *f;
    msp_err rc;
    char detail[1024];
    msp_dump_file_t *bf; /* cmp_open_both: the bench side (f is the compare side) */
    /* f's records by name (cmp_name_index), made on the opening thread (a
     * sort the compare's own thread no longer does); bf's; NULL: none yet */
    const msp_record_info_t **names, **bnames;
};

static void *cmp_open_main(void *arg)
{
    struct cmp_open_job *j = arg;
    j->rc = msp_dump_open(j->path, &j->f);
    if (j->rc)
        snprintf(j->detail, sizeof j->detail, "%s", msp_last_error());
    else
        j->names = cmp_name_index(j->f);
    return NULL;
}

/* Both sides opened at once: each open waits on its own reader helper
 * (msprobe-dump(5), READING UNTRUSTED FILES), so the two overlap. Runs on a
 * prefetch thread (below); the error, if any, is kept in o->detail. */
static void cmp_open_both(const cmp_file_pair_t *fp, struct cmp_open_job *o)
{
    struct cmp_open_job b = {fp->bench, NULL, MSP_OK, "", NULL, NULL, NULL};
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
        free(o->names);
        o->f = NULL;
        o->names = NULL;
        o->rc = b.rc;
        memcpy(o->detail, b.detail, sizeof o->detail);
        return;
    }
    o->bf = b.f;
    o->bnames = b.names;
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
static msp_err cmp_prefetch_finish(cmp_prefetch_t *p, msp_dump_file_t **bf, msp_dump_file_t **cf,
                                   const msp_record_info_t ***bnames,
                                   const msp_record_info_t ***cnames)
{
    if (p->threaded)
        pthread_join(p->th, NULL);
    p->active = p->threaded = 0;
    *bf = p->o.bf;
    *cf = p->o.f;
    *bnames = p->o.bnames;
    *cnames = p->o.names;
    if (p->o.rc)
        return msp_fail(p->o.rc, "%s", p->o.detail);
    return MSP_OK;
}

/* A pair's two files and their records by name, closed and freed. */
static void cmp_close_pair(msp_dump_file_t *bf, msp_dump_file_t *cf,
                           const msp_record_info_t **bnames, const msp_record_info_t **cnames)
{
    free(bnames);
    free(cnames);
    msp_dump_close(bf);
    msp_dump_close(cf);
}

/* A prefetch whose pair will not be compared (an earlier error). */
static void cmp_prefetch_drop(cmp_prefetch_t *p)
{
    if (!p->active)
        return;
    msp_dump_file_t *bf, *cf;
    const msp_record_info_t **bn, **cn;
    (void)cmp_prefetch_finish(p, &bf, &cf, &bn, &cn);
    cmp_close_pair(bf, cf, bn, cn);
}

/* The pair's files, kept after its compare for its samples (cmp_engine_sample). */
static void cmp_ctx_close_files(cmp_ctx_t *cx)
{
    cmp_close_pair(cx->bf, cx->cf, cx->bnames, cx->cnames);
    cx->bnames = cx->cnames = NULL;
    cx->bf = cx->cf = NULL;
}

/* A finished pair's files, closed on a thread of their own while the next
 * pair is compared: freeing a statistics file's catalogue (a string or two
 * per tensor) was a tenth of the compare's own thread (issue 42). One pair
 * at a time: the next close waits for it. */
typedef struct {
    msp_dump_file_t *bf, *cf;
    const msp_record_info_t **bnames, **cnames;
    pthread_t th;
    int threaded;
} cmp_closer_t;

static void *cmp_closer_main(void *arg)
{
    cmp_closer_t *c = arg;
    cmp_close_pair(c->bf, c->cf, c->bnames, c->cnames);
    return NULL;
}

static void cmp_closer_join(cmp_closer_t *c)
{
    if (c->threaded)
        pthread_join(c->th, NULL);
    memset(c, 0, sizeof *c);
}

/* cx's files (taken from it) closed now or on a thread, after the last ones. */
static void cmp_ctx_close_later(cmp_ctx_t *cx, cmp_closer_t *c)
{
    cmp_closer_join(c);
    *c = (cmp_closer_t){.bf = cx->bf, .cf = cx->cf, .bnames = cx->bnames, .cnames = cx->cnames};
    cx->bf = cx->cf = NULL;
    cx->bnames = cx->cnames = NULL;
    c->threaded = pthread_create(&c->th, NULL, cmp_closer_main, c) == 0;
    if (!c->threaded)
        cmp_closer_main(c);
}

static msp_err cmp_file_pair(cmp_ctx_t *cx, cmp_build_t *bld, const cmp_file_pair_t *fp,
                             cmp_prefetch_t *opened, const cmp_mapping_t *map)
{
    msp_err rc = MSP_OK;
    cmp_pair_t *pairs = NULL;
    cmp_rec_ref_t *refs = NULL;
    size_t np = 0;
    cmp_ctx_close_files(cx);
    cx->bfd = cx->cfd = -1;
    cx->bmap = cx->cmap = NULL;
    cx->n_jobs = 0;
    if ((rc = cmp_prefetch_finish(opened, &cx->bf, &cx->cf, &cx->bnames, &cx->cnames))) {
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
    int stats_file = !strcmp(cx->bf->task, "md5") || !strcmp(cx->cf->task, "md5")
                         ? 2
                         : !strcmp(cx->bf->task, "statistics") ||
                               !strcmp(cx->cf->task, "statistics");
    cx->has_producers = cmp_file_has_producers(cx->bf) || cmp_file_has_producers(cx->cf);
    /* records by name: producer links and call-site references look them up
     * (made where the files were opened, unless that ran out of memory) */
    if ((!cx->bnames && !(cx->bnames = cmp_name_index(cx->bf))) ||
        (!cx->cnames && !(cx->cnames = cmp_name_index(cx->cf)))) {
        rc = msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
        goto cleanup;
    }
    if (stats_file)
        bld->res->stats_mode = 1;
    cx->md5 |= stats_file == 2;
    if ((rc = cmp_match_records(cx->bf, cx->cf, cx->bnames, cx->cnames, cx->o, map, &pairs, &np)))
        goto cleanup;
    refs = calloc(np + 1, sizeof *refs);
    if (!refs) {
        rc = msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < np; i++) {
        const msp_record_info_t *r = pairs[i].c >= 0 ? &cx->cf->records[pairs[i].c]
                                                     : &cx->bf->records[pairs[i].b];
        refs[i] = (cmp_rec_ref_t){pairs[i].b, pairs[i].c, pairs[i].stray, r->order, r->name};
    }
    qsort(refs, np, sizeof *refs, cmp_rec_ref_order);
    if ((rc = cmp_rows_reserve(bld, cx->bf, cx->cf)))
        goto cleanup;
    /* two single files: step and rank from the compare file's attributes */
    int64_t step = fp->step >= 0 ? fp->step : (cx->cf->step >= 0 ? cx->cf->step : 0);
    int64_t rank = fp->rank >= 0 ? fp->rank : (cx->cf->rank >= 0 ? cx->cf->rank : 0);
    for (size_t i = 0; i < np && !rc; i++) {
        cx->stray = refs[i].stray;
        rc = cmp_record_rows(cx, bld, step, rank,
                             refs[i].b >= 0 ? &cx->bf->records[refs[i].b] : NULL,
                             refs[i].c >= 0 ? &cx->cf->records[refs[i].c] : NULL, stats_file);
    }
    cx->stray = 0;
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
                              n_out ? fp->cmp : fp->bench,
                              n_out ? job->nrec->name : job->brec->name,
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
    if (rc) /* else kept open for the pair's samples */
        cmp_ctx_close_files(cx);
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
            msp_log(MSP_LOG_WARN,
                    "cell mapping file %s:%zu: no %s module record has \"%s\"; the "
                    "line matched nothing",
                    o->cell_mapping_path, e->line, e->cmp_seen ? "bench" : "compare",
                    e->cmp_seen ? e->bench : e->cmp);
        else
            msp_log(MSP_LOG_WARN,
                    "mapping file %s:%zu: %s record %s is in no %s dump; the line "
                    "matched nothing",
                    o->mapping_path, e->line, e->cmp_seen ? "bench" : "compare",
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
    cmp_closer_t closer;
    cmp_build_t bld;
    const void *last_rec, *last_ten; /* bld.res's arrays when last seen */
};

msp_err cmp_engine_open(const msp_compare_opts_t *opts, cmp_engine_t **out)
{
    *out = NULL;
    cmp_engine_t *e = calloc(1, sizeof *e);
    if (!e)
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    msp_err rc = MSP_OK;
    if ((opts->mapping_path && (rc = cmp_mapping_load(opts->mapping_path, &e->map))) ||
        (opts->cell_mapping_path &&
         (rc = cmp_mapping_load_cell(opts->cell_mapping_path, &e->map)))) {
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
    cx->groups = calloc(CMP_WINDOW_UNITS, sizeof *cx->groups);
    if (!cx->bufs || !cx->items || !cx->groups) {
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

msp_err cmp_engine_sample(cmp_engine_t *e, msp_compare_result_t *res)
{
    cmp_ctx_t *cx = &e->cx;
    msp_err rc = MSP_OK;
    if (cx->bf && cx->cf && e->bld.res == res && !cx->o->no_samples)
        rc = cmp_sample_part(res, cx->bf, cx->cf, cx->bnames, cx->cnames);
    cmp_ctx_close_later(cx, &e->closer);
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
    cmp_closer_join(&e->closer);
    cmp_ctx_close_files(&e->cx);
    if (e->cx.pairs_done)
        cmp_mapping_warn_unused(e->cx.o, &e->map);
    cmp_mapping_free(&e->map);
    free(e->cx.bufs);
    free(e->cx.items);
    free(e->cx.groups);
    free(e->cx.jobs);
    free(e);
}
