/* result.xlsx's workbooks and what goes into each (rep_xlsx.c writes
 * them): a whole result's one workbook; a streamed tree's one while its
 * details fit a sheet or it has one rank, else one workbook per rank
 * (result_rank{R}.xlsx, a few written at once) and result.xlsx with the
 * ranks and suspects sheets linking to them. */
#include "msprobe/compare.h"

#include "rep_internal.h"

#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- a whole result --------------------------------------------------------- */

typedef struct msp_whole {
    const msp_compare_result_t *res;
    const char **reasons; /* per record: the first suspect line that names it */
} msp_whole_t;

static msp_err msp_whole_load(const cmp_source_t *src, size_t i, msp_compare_result_t **part,
                              size_t *rec_base, size_t *ten_base)
{
    (void)i;
    const msp_whole_t *w = src->ud;
    *part = (msp_compare_result_t *)w->res;
    *rec_base = *ten_base = 0;
    return MSP_OK;
}

static void msp_whole_unload(const cmp_source_t *src, msp_compare_result_t *part)
{
    (void)src;
    (void)part;
}

static const char *msp_whole_reason(const cmp_source_t *src, size_t record)
{
    const msp_whole_t *w = src->ud;
    return w->reasons && record < w->res->n_records ? w->reasons[record] : NULL;
}

/* The ranks sheet's Details of a whole result: the rank's first summary row. */
static void msp_whole_link(const void *ud, int64_t rank, char *buf, size_t n)
{
    const msp_compare_result_t *res = ud;
    for (size_t i = 0; i < res->n_records; i++)
        if (res->records[i].rank == rank) {
            char name[32];
            cmp_sheet_name(name, sizeof name, "summary", i / cmp_xlsx_data_rows);
            snprintf(buf, n, "%s!A%zu", name, i % cmp_xlsx_data_rows + 2);
            return;
        }
    buf[0] = '\0';
}

msp_err msp_report_write_xlsx(const msp_compare_result_t *res, const char *out_dir)
{
    msp_err rc = cmp_report_begin(res, out_dir);
    if (rc != MSP_OK)
        return rc;
    msp_whole_t w = {res, calloc(res->n_records + 1, sizeof(const char *))};
    if (!w.reasons)
        return msp_fail(MSP_ERR_NOMEM, "out of memory writing the report in %s", out_dir);
    for (size_t k = res->n_suspects; k-- > 0;)
        if (res->suspects[k].record >= 0 && (size_t)res->suspects[k].record < res->n_records)
            w.reasons[res->suspects[k].record] = res->suspects[k].reason;
    cmp_source_t src = {res,
                        res->n_records,
                        res->n_tensors,
                        1,
                        msp_whole_load,
                        msp_whole_unload,
                        msp_whole_reason,
                        res->root_tensor,
                        &w};
    cmp_book_t b = {&src, res->n_ranks > 1, 0, res, res, msp_whole_link, res, res->n_tensors, 0, 0};
    rc = cmp_write_book(out_dir, "result.xlsx", &b);
    free(w.reasons);
    return rc;
}

/* ---- a streamed tree ----------------------------------------------------------- */

static void msp_book_link(const void *ud, int64_t rank, char *buf, size_t n)
{
    (void)ud;
    snprintf(buf, n, "result_rank%lld.xlsx", (long long)rank);
}

static void msp_tree_first_row_link(const void *ud, int64_t rank, char *buf, size_t n)
{
    const msp_compare_tree_t *t = ud;
    size_t np = cmp_tree_parts(t);
    for (size_t i = 0; i < np; i++) {
        size_t rb;
        int64_t r;
        cmp_tree_part_info(t, i, &rb, NULL, NULL, &r);
        if (r != rank)
            continue;
        char name[32];
        cmp_sheet_name(name, sizeof name, "summary", rb / cmp_xlsx_data_rows);
        snprintf(buf, n, "%s!A%zu", name, rb % cmp_xlsx_data_rows + 2);
        return;
    }
    buf[0] = '\0';
}

/* One rank's workbook, result_rank{R}.xlsx (its parts from f as its reader
 * when f is set). */
static msp_err msp_rank_book(const msp_compare_tree_t *t, const char *out_dir, int64_t rank,
                             cmp_feed_t *f, int reader)
{
    cmp_tree_src_t ts;
    cmp_source_t one;
    if (cmp_tree_feed_source(t, rank, f, reader, &ts, &one))
        return msp_fail(MSP_ERR_NOMEM, "out of memory writing the report in %s", out_dir);
    char file[64];
    snprintf(file, sizeof file, "result_rank%lld.xlsx", (long long)rank);
    cmp_book_t b = {&one, 0, 0, one.head, NULL, NULL, NULL, one.n_tensors, 0, 0};
    msp_err rc = cmp_write_book(out_dir, file, &b);
    free(ts.parts);
    return rc;
}

/* Threads taking the next rank until none is left; the error of the lowest
 * rank that failed is the one reported. */
typedef struct msp_rank_books {
    const msp_compare_tree_t *t;
    const char *out_dir;
    cmp_feed_t *feed; /* NULL: each book reads its own parts */
    int reader;
    size_t next;
    pthread_mutex_t mu;
    msp_err rc;
    size_t failed_at;
    char detail[1024];
} msp_rank_books_t;

static void *msp_rank_books_main(void *arg)
{
    msp_rank_books_t *rb = arg;
    const msp_compare_result_t *head = msp_compare_tree_head(rb->t);
    for (;;) {
        pthread_mutex_lock(&rb->mu);
        size_t k = rb->next++;
        int stop = rb->rc != MSP_OK;
        pthread_mutex_unlock(&rb->mu);
        if (stop || k >= head->n_ranks)
            return NULL;
        msp_err rc = msp_rank_book(rb->t, rb->out_dir, head->ranks[k].rank, rb->feed, rb->reader);
        if (rc) {
            pthread_mutex_lock(&rb->mu);
            if (k < rb->failed_at) {
                rb->failed_at = k;
                rb->rc = rc;
                snprintf(rb->detail, sizeof rb->detail, "%s", msp_last_error());
            }
            pthread_mutex_unlock(&rb->mu);
        }
    }
}

int rep_tree_books_fed(const msp_compare_tree_t *t)
{
    return !rep_tree_one_book(t) && rep_tree_rank_parts(t);
}

int rep_tree_rank_parts(const msp_compare_tree_t *t)
{
    /* one part a rank: (step, rank) order is then rank order, the books' */
    int64_t last = -1;
    for (size_t i = 0; i < cmp_tree_parts(t); i++) {
        int64_t r;
        cmp_tree_part_info(t, i, NULL, NULL, NULL, &r);
        if (r < 0)
            continue;
        if (r <= last)
            return 0;
        last = r;
    }
    return 1;
}

/* What the error-flow chart reads of part 0 (its records), taken from the
 * feed as reader `chart` and copied: the books hold parts only while they
 * write them. NULL when it cannot be had (a report without the chart). */
static msp_compare_result_t *msp_chart_of(const msp_compare_tree_t *t, cmp_feed_t *f, int chart)
{
    msp_compare_result_t *part = NULL, *c = NULL;
    if (!cmp_tree_parts(t))
        return NULL;
    if (!f) {
        if (cmp_tree_load(t, 0, &part) != MSP_OK)
            msp_clear_error();
        return part;
    }
    if (cmp_feed_get(f, chart, 0, &part) != MSP_OK) {
        msp_clear_error();
    } else if ((c = cmp_result_new()) &&
               (c->records = calloc(part->n_records + 1, sizeof *c->records))) {
        for (size_t i = 0; i < part->n_records; i++) {
            msp_err e = cmp_copy_record(&c->records[i], &part->records[i], 1);
            c->n_records++; /* freed with the rest, whatever it holds */
            if (e) {
                msp_clear_error();
                break;
            }
        }
    }
    cmp_feed_put(f, chart, part);
    cmp_feed_leave(f, chart);
    return c;
}

int rep_tree_one_book(const msp_compare_tree_t *t)
{
    const msp_compare_result_t *head = msp_compare_tree_head(t);
    size_t nten = 0;
    msp_compare_tree_totals(t, NULL, &nten, NULL);
    return nten <= cmp_xlsx_data_rows || head->n_ranks <= 1;
}

/* One workbook of every part (from f as its reader when f is set), its
 * chart drawn from the first part as its rows go by. */
static msp_err msp_one_book(const msp_compare_tree_t *t, const char *out_dir, cmp_feed_t *f,
                            int reader)
{
    const msp_compare_result_t *head = msp_compare_tree_head(t);
    cmp_tree_src_t ts;
    cmp_source_t all;
    msp_err rc = cmp_tree_feed_source(t, -1, f, reader, &ts, &all);
    if (rc)
        return rc;
    cmp_book_t b = {&all, head->n_ranks > 1, 0, head, NULL, msp_tree_first_row_link,
                    t,    all.n_tensors,     0, 1};
    rc = cmp_write_book(out_dir, "result.xlsx", &b);
    free(ts.parts);
    return rc;
}

int rep_tree_book_threads(const msp_compare_tree_t *t)
{
    const msp_compare_result_t *head = msp_compare_tree_head(t);
    int nth = omp_get_max_threads();
    nth = nth < 1 ? 1 : nth > 8 ? 8 : nth;
    return (size_t)nth > head->n_ranks ? (int)head->n_ranks : nth;
}

/* Per-rank workbooks (their parts from f as reader `reader`, when f is set
 * and reader >= 0) and result.xlsx over them (its chart's part 0 from f as
 * reader `chart` when chart >= 0). */
static msp_err msp_rank_books(const msp_compare_tree_t *t, const char *out_dir, cmp_feed_t *f,
                              int reader, int chart)
{
    const msp_compare_result_t *head = msp_compare_tree_head(t);
    /* the first pair (the first step compared) draws the error-flow chart */
    msp_compare_result_t *first = msp_chart_of(t, chart >= 0 ? f : NULL, chart);
    /* the ranks' workbooks are independent: written by a few threads at once */
    msp_rank_books_t rb = {t,      out_dir,  reader >= 0 ? f : NULL,
                           reader, 0,        PTHREAD_MUTEX_INITIALIZER,
                           MSP_OK, SIZE_MAX, ""};
    int nth = rep_tree_book_threads(t);
    pthread_t th[8];
    int started = 0;
    for (int i = 1; i < nth; i++)
        started += pthread_create(&th[started], NULL, msp_rank_books_main, &rb) == 0;
    msp_rank_books_main(&rb);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    if (rb.rc) {
        msp_compare_result_free(first);
        return msp_fail(rb.rc, "%s", rb.detail);
    }
    cmp_book_t top = {NULL, 1, 1, head, first, msp_book_link, NULL, 0, 0, 0};
    msp_err rc = cmp_write_book(out_dir, "result.xlsx", &top);
    msp_compare_result_free(first);
    return rc;
}

msp_err rep_tree_xlsx(const msp_compare_tree_t *t, const char *out_dir, cmp_feed_t *f, int reader,
                      int chart)
{
    const msp_compare_result_t *head = msp_compare_tree_head(t);
    msp_err rc = !head || !out_dir
                     ? msp_fail(MSP_ERR_USAGE, "report: no result or no output directory")
                     : msp_mkdirs(out_dir);
    /* One workbook while the details fit one sheet; past that one per rank,
     * as msprobe writes them, each fitting as far as a rank can. */
    if (!rc)
        rc = rep_tree_one_book(t) ? msp_one_book(t, out_dir, f, reader)
                                  : msp_rank_books(t, out_dir, f, reader, chart);
    if (f && reader >= 0)
        cmp_feed_leave(f, reader);
    if (f && chart >= 0)
        cmp_feed_leave(f, chart);
    return rc;
}

msp_err msp_report_tree_xlsx(const msp_compare_tree_t *t, const char *out_dir)
{
    return rep_tree_xlsx(t, out_dir, NULL, -1, -1);
}
