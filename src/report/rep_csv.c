/* result.csv: the details sheet as RFC 4180 text (CRLF line ends, fields with
 * a comma, quote or line break quoted, quotes doubled), for tools that cannot
 * read xlsx. Streamed to a temp file in the output directory, then renamed, so
 * a reader never sees half a report and memory stays flat. */
#include "msprobe/compare.h"

#include "rep_internal.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MSP_CSV_NCOLS(a) (sizeof(a) / sizeof((a)[0]))

/* The texts of the numbers and percentages printed lately (each NULL when
 * out of memory: then printed afresh). */
struct msp_csv_memo {
    msp_num_memo_t *nums, *pcts;
};

/* Rows are formatted into memory (msp_buf_t), a field at a time, and
 * written out a piece at a time: stdio's per-call work (fwrite's and
 * xsputn's checks, a call a field) was a fifth of result.csv's CPU at 1,024
 * ranks (issue 42). A piece's buffer is kept from part to part, so its
 * pages are faulted once; a field goes in with one check of the room left. */

/* n bytes of room at the end of b (and one for the NUL msp_buf keeps); NULL
 * when out of memory */
static inline char *msp_cb_room(msp_buf_t *b, size_t n)
{
    size_t room;
    return b->cap - b->len > n ? b->data + b->len : msp_buf_room(b, n, &room);
}

/* ",s" (or "s" first) for a plain field of n bytes, the NUL kept */
static inline void msp_cb_plain(msp_buf_t *b, const char *s, size_t n, int first)
{
    char *d = msp_cb_room(b, n + 1);
    if (d) {
        *d = ',';
        memcpy(d + !first, s, n);
        b->len += n + !first;
        b->data[b->len] = '\0';
    }
}

/* msp_csv_field_buf's field: a plain one (names, dtypes, shapes) copied
 * here, any other there */
static inline void msp_cb_field(msp_buf_t *b, const char *s, int first)
{
    size_t n = msp_csv_plain_len(s ? s : "");
    if (n == SIZE_MAX)
        msp_csv_field_buf(b, s, first);
    else
        msp_cb_plain(b, s ? s : "", n, first);
}

/* ",v" for an integer, without printf's format parsing (two a row). */
static void msp_cb_int(msp_buf_t *b, long long v)
{
    char d[24];
    msp_cb_plain(b, d, msp_i64_digits(d, (int64_t)v), 0);
}

static void msp_csv_row(msp_buf_t *b, struct msp_csv_memo *m, int stats,
                        const msp_compare_result_t *part, size_t ti, const msp_record_cmp_t *rec,
                        int first)
{
    const msp_tensor_cmp_t *t = &part->tensors[ti];
    int has_npu = t->npu_name != NULL, has_bench = t->bench_name != NULL;
    msp_cb_field(b, has_npu ? t->npu_name : "N/A", 1);
    msp_cb_field(b, has_bench ? t->bench_name : "N/A", 0);
    msp_cb_field(b, has_npu || *t->npu_dtype ? t->npu_dtype : "N/A", 0);
    msp_cb_field(b, has_bench || *t->bench_dtype ? t->bench_dtype : "N/A", 0);
    msp_cb_field(b, has_npu || *t->npu_shape ? t->npu_shape : "N/A", 0);
    msp_cb_field(b, has_bench || *t->bench_shape ? t->bench_shape : "N/A", 0);
    /* the numbers' texts, made once with the workbook's (rep_texts.c): each
     * a plain field (digits, "N/A", "inf", a percentage) */
    rep_row_texts_t local;
    const rep_row_texts_t *tx = rep_texts_row(part, ti, stats, m->nums, m->pcts, &local);
    for (int i = 0; i < (stats ? 16 : 14); i++)
        msp_cb_plain(b, tx->s[i], rep_text_len(tx->s[i]), 0);
    msp_cb_field(b, cmp_verdict_text(t->verdict), 0);
    msp_cb_field(b, cmp_result_text(t->result), 0);
    msp_cb_field(b, t->err_message, 0);
    if (rec) {
        msp_cb_field(b, cmp_cause_text(rec->cause), 0);
        msp_cb_int(b, (long long)rec->step);
        msp_cb_int(b, (long long)rec->rank);
    } else {
        msp_buf_put(b, ",,,", 3);
    }
    msp_cb_field(b, cmp_bool_text(t->npu_requires_grad), 0);
    msp_cb_field(b, cmp_bool_text(t->bench_requires_grad), 0);
    msp_cb_field(b, cmp_rg_consistent_text(t), 0);
    msp_cb_field(b, rec && first && rec->npu_stack ? rec->npu_stack : "", 0);
    char text[1024];
    cmp_data_name_text(t, text, sizeof text);
    msp_cb_field(b, text, 0);
    cmp_md5_text(t->npu_crc32, text, sizeof text);
    msp_cb_field(b, text, 0);
    cmp_md5_text(t->bench_crc32, text, sizeof text);
    msp_cb_field(b, text, 0);
    msp_buf_put(b, "\r\n", 2);
}

/* A part's rows in pieces, formatted at once by a few threads (result.csv
 * was the last report to finish, on one core, for a statistics tree: issue
 * 42), each into its own buffer, written in order: the same bytes as one
 * thread writes. */
#define MSP_CSV_MAX_PIECES 4
#define MSP_CSV_PIECE_ROWS 1024 /* fewer rows a piece cost more in threads than they save */

struct msp_csv_split {
    FILE *f;
    int stats, n_pieces;
    struct msp_csv_memo memo[MSP_CSV_MAX_PIECES];
    msp_buf_t buf[MSP_CSV_MAX_PIECES];
    const msp_compare_result_t *part;
    const unsigned char *claimed;
};

struct msp_csv_piece {
    struct msp_csv_split *sp;
    int k;
    size_t rec0, rec1; /* its records [rec0, rec1); the last piece also the unclaimed tensors */
    int last;
};

static int msp_csv_pieces(void)
{
    int n = omp_get_max_threads();
    return n < 1 ? 1 : n > MSP_CSV_MAX_PIECES ? MSP_CSV_MAX_PIECES : n;
}

static void *msp_csv_piece_main(void *arg)
{
    struct msp_csv_piece *pc = arg;
    struct msp_csv_split *sp = pc->sp;
    const msp_compare_result_t *part = sp->part;
    struct msp_csv_memo *m = &sp->memo[pc->k];
    msp_buf_t *b = &sp->buf[pc->k];
    b->len = 0;
    for (size_t i = pc->rec0; i < pc->rec1; i++) {
        const msp_record_cmp_t *rec = &part->records[i];
        for (size_t k = 0; k < rec->n_tensors; k++)
            msp_csv_row(b, m, sp->stats, part, rec->first_tensor + k, rec, k == 0);
    }
    if (pc->last)
        for (size_t t = 0; t < part->n_tensors; t++)
            if (!sp->claimed[t])
                msp_csv_row(b, m, sp->stats, part, t, NULL, 0);
    return NULL;
}

/* The part's rows written to sp->f; 0, or -1 when out of memory. */
static int msp_csv_part(struct msp_csv_split *sp)
{
    const msp_compare_result_t *part = sp->part;
    int n = sp->n_pieces;
    if ((size_t)n > part->n_tensors / MSP_CSV_PIECE_ROWS)
        n = (int)(part->n_tensors / MSP_CSV_PIECE_ROWS);
    if (n < 1)
        n = 1;
    /* pieces of about equal rows, cut between records */
    struct msp_csv_piece pc[MSP_CSV_MAX_PIECES];
    size_t at = 0, rows = 0;
    for (int k = 0; k < n; k++) {
        size_t goal = part->n_tensors * (size_t)(k + 1) / (size_t)n;
        pc[k] = (struct msp_csv_piece){sp, k, at, at, k == n - 1};
        while (at < part->n_records && (k == n - 1 || rows < goal))
            rows += part->records[at++].n_tensors;
        pc[k].rec1 = at;
    }
    pthread_t th[MSP_CSV_MAX_PIECES];
    int started[MSP_CSV_MAX_PIECES] = {0};
    for (int k = 1; k < n; k++)
        started[k] = pthread_create(&th[k], NULL, msp_csv_piece_main, &pc[k]) == 0;
    msp_csv_piece_main(&pc[0]);
    int err = 0;
    for (int k = 0; k < n; k++) {
        if (k && started[k])
            pthread_join(th[k], NULL);
        else if (k)
            msp_csv_piece_main(&pc[k]);
        err |= sp->buf[k].oom;
        if (!err)
            fwrite_unlocked(sp->buf[k].data, 1, sp->buf[k].len, sp->f);
    }
    return err ? -1 : 0;
}

msp_err cmp_csv_write(const cmp_source_t *src, const char *out_dir, const char *file)
{
    msp_err rc = msp_mkdirs(out_dir);
    if (rc != MSP_OK)
        return rc;
    FILE *f = NULL;
    char *path = msp_asprintf("%s/%s", out_dir, file);
    char *tmp = path ? msp_atomic_tmp_name(path) : NULL;
    if (!path || !tmp) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory writing the report in %s", out_dir);
        goto cleanup;
    }
    if ((rc = msp_fopen_seq(tmp, &f)))
        goto cleanup;
    setvbuf(f, NULL, _IOFBF, 1 << 16);
    flockfile(f); /* one writer: the _unlocked calls below skip a lock per character */

    int stats = src->head->stats_mode != 0;
    const char *const *cols = stats ? cmp_details_cols_stats : cmp_details_cols_tensor;
    size_t ncols = stats ? CMP_DETAILS_NCOLS_STATS : CMP_DETAILS_NCOLS_TENSOR;
    for (size_t c = 0; c < ncols; c++)
        msp_csv_field(f, cols[c], c == 0);
    fputs("\r\n", f);
    /* Same row order as the details sheet: each part's records in execution
     * order, then any tensor no record of it claims. */
    struct msp_csv_split sp = {.f = f, .stats = stats, .n_pieces = msp_csv_pieces()};
    for (int k = 0; k < sp.n_pieces; k++)
        sp.memo[k] = (struct msp_csv_memo){msp_num_memo_new(), msp_num_memo_new()};
    for (size_t p = 0; p < src->n_parts && !rc; p++) {
        msp_compare_result_t *part = NULL;
        size_t rb, tb;
        if ((rc = src->load(src, p, &part, &rb, &tb)))
            break;
        unsigned char *claimed = NULL;
        if (!(rc = cmp_report_check_ranges(part)) && !(claimed = calloc(part->n_tensors + 1, 1)))
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory writing %s", path);
        for (size_t i = 0; !rc && i < part->n_records; i++) {
            const msp_record_cmp_t *rec = &part->records[i];
            memset(claimed + rec->first_tensor, 1, rec->n_tensors);
        }
        if (!rc) {
            sp.part = part;
            sp.claimed = claimed;
            if (msp_csv_part(&sp) != 0)
                rc = msp_fail(MSP_ERR_NOMEM, "out of memory writing %s", path);
        }
        free(claimed);
        src->unload(src, part);
    }
    for (int k = 0; k < sp.n_pieces; k++) {
        msp_num_memo_free(sp.memo[k].nums);
        msp_num_memo_free(sp.memo[k].pcts);
        msp_buf_free(&sp.buf[k]);
    }
    funlockfile(f);
    int werr = ferror(f);
    int cerr = fclose(f);
    f = NULL;
    if (!rc && (werr || cerr != 0))
        rc = msp_fail(MSP_ERR_IO, "cannot write %s: %s", tmp, strerror(errno ? errno : EIO));
    if (!rc)
        rc = msp_atomic_commit(tmp, path);

cleanup:
    if (f)
        fclose(f);
    if (rc != MSP_OK)
        msp_atomic_discard(tmp);
    free(tmp);
    free(path);
    return rc;
}

static msp_err msp_csv_whole_load(const cmp_source_t *src, size_t i, msp_compare_result_t **part,
                                  size_t *rec_base, size_t *ten_base)
{
    (void)i;
    *part = (msp_compare_result_t *)src->head;
    *rec_base = *ten_base = 0;
    return MSP_OK;
}

static void msp_csv_whole_unload(const cmp_source_t *src, msp_compare_result_t *part)
{
    (void)src;
    (void)part;
}

msp_err msp_report_write_csv(const msp_compare_result_t *res, const char *out_dir)
{
    if (!res || !out_dir)
        return msp_fail(MSP_ERR_USAGE, "report: no result or no output directory");
    cmp_source_t src = {res,  res->n_records,     res->n_tensors,
                        1,    msp_csv_whole_load, msp_csv_whole_unload,
                        NULL, res->root_tensor,   NULL};
    return cmp_csv_write(&src, out_dir, "result.csv");
}

msp_err rep_tree_csv(const msp_compare_tree_t *t, const char *out_dir, cmp_feed_t *f, int reader)
{
    cmp_tree_src_t ts = {0};
    cmp_source_t src;
    msp_err rc = !msp_compare_tree_head(t) || !out_dir
                     ? msp_fail(MSP_ERR_USAGE, "report: no result or no output directory")
                     : cmp_tree_feed_source(t, -1, f, reader, &ts, &src);
    if (!rc)
        rc = cmp_csv_write(&src, out_dir, "result.csv");
    free(ts.parts);
    if (f)
        cmp_feed_leave(f, reader);
    return rc;
}

msp_err msp_report_tree_csv(const msp_compare_tree_t *t, const char *out_dir)
{
    return rep_tree_csv(t, out_dir, NULL, 0);
}
