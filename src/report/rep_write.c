/* Every report of a finished tree from one read of its parts (issue 39):
 * result.xlsx (or msprobe's own files) on this thread; result.csv, the
 * whole result behind result.html (and --print-log) and -da's file on
 * threads of their own; each part loaded from the spool once and handed to
 * all that want it (cmp_feed.c). Per-rank workbooks and msprobe's per-rank
 * files of one step take their parts from it too; those of several steps
 * read their own rank's parts (a rank's parts lie a step apart in the
 * tree's order, which the others follow), the one case where a part is
 * read twice. */
#include "msprobe/report.h"

#include "rep_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { REP_XLSX, REP_MSPROBE, REP_CSV, REP_WHOLE, REP_DA, REP_JOBS };

typedef struct rep_job {
    const msp_compare_tree_t *t;
    const msp_report_set_t *s;
    int kind;
    cmp_feed_t *feed; /* NULL: it reads the spool itself */
    int reader;
    int chart; /* per-rank books: the chart's reader of part 0 */
    rep_da_plan_t *da;
    msp_compare_result_t *whole;
    msp_err rc;
    char detail[1024];
} rep_job_t;

static void *rep_job_main(void *arg)
{
    rep_job_t *j = arg;
    const msp_report_set_t *s = j->s;
    if (j->kind == REP_XLSX) {
        j->rc = rep_tree_xlsx(j->t, s->out_dir, j->feed, j->reader, j->chart);
    } else if (j->kind == REP_MSPROBE) {
        j->rc = rep_tree_msprobe(j->t, s->out_dir, s->msprobe, s->ms_names, s->ms_n, j->feed,
                                 j->reader);
    } else if (j->kind == REP_CSV) {
        j->rc = rep_tree_csv(j->t, s->out_dir, j->feed, j->reader);
    } else if (j->kind == REP_DA) {
        j->rc = rep_da_write(j->t, j->da, s->out_dir, s->da_file, s->da_written, j->feed,
                             j->reader);
    } else {
        /* the page reads only the suspects' rows; --print-log (s->whole) every one */
        j->rc = j->feed ? cmp_tree_whole_fed(j->t, s->whole_max, j->feed, j->reader, !s->whole,
                                             &j->whole)
                        : msp_compare_tree_whole(j->t, s->whole_max, &j->whole);
        if (!j->rc && s->html && j->whole)
            j->rc = msp_report_write_html(j->whole, s->out_dir, s->hopts);
    }
    if (j->rc)
        snprintf(j->detail, sizeof j->detail, "%s", msp_last_error());
    return NULL;
}

/* Which readers take which parts: the per-rank books the parts with
 * records, the chart part 0, the others every part. */
typedef struct rep_readers {
    const msp_compare_tree_t *t;
    int books, chart, da; /* -1: none */
    const rep_da_plan_t *plan;
    int share_texts; /* the workbooks and result.csv print the same numbers */
} rep_readers_t;

static msp_err rep_load(const void *ud, size_t i, msp_compare_result_t **part)
{
    const rep_readers_t *rr = ud;
    msp_err rc = cmp_tree_load(rr->t, i, part);
    if (!rc && rr->share_texts)
        rep_texts_share(*part);
    return rc;
}

static int rep_wants(const void *ud, int reader, size_t i)
{
    const rep_readers_t *rr = ud;
    int64_t rank;
    if (reader == rr->chart)
        return i == 0;
    if (reader == rr->da)
        return rep_da_wants(rr->plan, i);
    if (reader != rr->books)
        return 1;
    cmp_tree_part_info(rr->t, i, NULL, NULL, NULL, &rank);
    return rank >= 0;
}

msp_err msp_report_tree_write(const msp_compare_tree_t *t, const msp_report_set_t *s,
                              msp_compare_result_t **whole)
{
    if (whole)
        *whole = NULL;
    if (!msp_compare_tree_head(t) || !s || !s->out_dir)
        return msp_fail(MSP_ERR_USAGE, "report: no result or no output directory");
    msp_err rc = msp_mkdirs(s->out_dir);
    if (rc)
        return rc;
    size_t n_records = 0;
    msp_compare_tree_totals(t, &n_records, NULL, NULL);
    /* The first job writes the workbooks (or msprobe's files); with several
     * files, one a rank, it is the feed's reader only when each rank has
     * one part (then it wants the parts with records), and the workbooks'
     * chart takes part 0 as a reader of its own. */
    rep_job_t job[REP_JOBS];
    int n = 0, readers = 0, per_rank = 0, fed = 0;
    const msp_compare_result_t *head = msp_compare_tree_head(t);
    if (s->msprobe) {
        per_rank = !s->msprobe->tag && head->n_ranks;
        fed = rep_tree_msprobe_fed(t, s->msprobe);
        job[n++] = (rep_job_t){.kind = REP_MSPROBE};
    } else if (s->xlsx) {
        per_rank = !rep_tree_one_book(t);
        fed = !per_rank || rep_tree_books_fed(t);
        job[n++] = (rep_job_t){.kind = REP_XLSX};
    }
    if (n)
        job[0].reader = fed ? readers++ : -1;
    if (s->csv)
        job[n++] = (rep_job_t){.kind = REP_CSV, .reader = readers++};
    if ((s->html || (s->whole && whole)) && n_records <= s->whole_max)
        job[n++] = (rep_job_t){.kind = REP_WHOLE, .reader = readers++};
    rep_da_plan_t plan = {0};
    rep_readers_t rr = {t, -1, -1, -1, &plan, 0};
    if (s->da_file && s->da_written) {
        if ((rc = rep_da_plan(t, &plan)))
            return rc;
        rr.da = readers;
        job[n++] = (rep_job_t){.kind = REP_DA, .reader = readers++, .da = &plan};
    }
    for (int i = 0; i < n; i++) {
        job[i].t = t;
        job[i].s = s;
        job[i].chart = -1;
    }
    if (n && per_rank && fed)
        rr.books = job[0].reader;
    /* the workbooks from the feed beside result.csv: one set of number texts */
    rr.share_texts = n && job[0].kind == REP_XLSX && fed && s->csv;
    if (n && job[0].kind == REP_XLSX && per_rank && readers > fed)
        rr.chart = job[0].chart = readers++; /* beside another reader */
    /* a part for each book thread and one for the others to go on with */
    size_t window = rr.books >= 0 ? (size_t)rep_tree_book_threads(t) + 2 : 3;
    cmp_feed_t *feed = NULL;
    if (readers > 1 && (rc = cmp_feed_new(rep_load, rep_wants, &rr, readers, window, &feed))) {
        rep_da_plan_free(&plan);
        return rc;
    }
    for (int i = 0; i < n; i++)
        if (job[i].reader >= 0 || job[i].chart >= 0)
            job[i].feed = feed;
    /* the first job here, the others on threads; one that cannot start
     * leaves the feed (the others would wait for it) and runs after, alone */
    pthread_t th[REP_JOBS];
    int started[REP_JOBS] = {0};
    for (int i = 1; i < n; i++) {
        started[i] = pthread_create(&th[i], NULL, rep_job_main, &job[i]) == 0;
        if (!started[i] && job[i].feed) {
            cmp_feed_leave(feed, job[i].reader); /* never the first job, the one with a chart */
            job[i].feed = NULL;
        }
    }
    if (n)
        rep_job_main(&job[0]);
    for (int i = 1; i < n; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        else
            rep_job_main(&job[i]);
    }
    cmp_feed_free(feed);
    rep_da_plan_free(&plan);
    /* the first failure in the order the reports are listed */
    for (int i = 0; i < n && !rc; i++)
        if (job[i].rc)
            rc = msp_fail(job[i].rc, "%s", job[i].detail);
    for (int i = 0; i < n; i++) {
        if (job[i].kind != REP_WHOLE)
            continue;
        if (!rc && whole)
            *whole = job[i].whole;
        else
            msp_compare_result_free(job[i].whole);
    }
    return rc;
}
