/* A streamed compare's result (msp_compare_tree_t): phase B on process 0
 * (cmp_stream.c hands it each pair in (step, rank) order: modules, the pair's
 * suspects, the final spool; suspects, communication records and rank counts
 * kept in the head), then one order of suspects, the cross-rank pass and the
 * marks; and what the CLI and the report writers read from it, a part at a
 * time or whole when small. */
#include "cmp_internal.h"
#include "cmp_worker.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A global record of the final spool and how the report marks it. */
struct cmp_mark {
    size_t record; /* global record index */
    int suspect_rank;
    int is_root_cause;
    const char *reason; /* the first suspect line that names it (owned by head) */
    msp_cause_t cause;  /* its Error Origin after the cross-rank pass */
};

msp_compare_result_t *cmp_result_new(void)
{
    msp_compare_result_t *r = calloc(1, sizeof *r);
    if (r)
        r->root_record = r->root_tensor = r->first_rank = -1;
    return r;
}

msp_err cmp_oom(void)
{
    return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
}

/* ---- copies ------------------------------------------------------------- */

char *cmp_dup(const char *s, int *oom)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *oom = 1;
    return d;
}

/* A record's copy; stack and tensors left out when lean (replay needs neither). */
msp_err cmp_copy_record(msp_record_cmp_t *dst, const msp_record_cmp_t *src, int lean)
{
    int oom = 0;
    *dst = *src;
    dst->name = cmp_dup(src->name, &oom);
    dst->bench_name = cmp_dup(src->bench_name, &oom);
    dst->npu_stack = lean ? NULL : cmp_dup(src->npu_stack, &oom);
    dst->arg_diff = cmp_dup(src->arg_diff, &oom);
    dst->replay_note = cmp_dup(src->replay_note, &oom);
    dst->comm_group = cmp_dup(src->comm_group, &oom);
    dst->parent = lean ? NULL : cmp_dup(src->parent, &oom);
    dst->params = cmp_dup(src->params, &oom);
    dst->first_tensor = 0;
    dst->n_tensors = lean ? 0 : src->n_tensors;
    return oom ? cmp_oom() : MSP_OK;
}

static msp_err cmp_copy_tensor(msp_tensor_cmp_t *dst, const msp_tensor_cmp_t *src)
{
    int oom = 0;
    *dst = *src;
    dst->npu_name = cmp_dup(src->npu_name, &oom);
    dst->bench_name = cmp_dup(src->bench_name, &oom);
    dst->err_message = cmp_dup(src->err_message ? src->err_message : "", &oom);
    dst->producer = cmp_dup(src->producer, &oom);
    dst->npu_data_name = cmp_dup(src->npu_data_name, &oom);
    dst->bench_data_name = cmp_dup(src->bench_data_name, &oom);
    return oom ? cmp_oom() : MSP_OK;
}

/* ---- phase B, on process 0 ----------------------------------------------------- */

struct cmp_prev {
    int64_t rank, step;
    double worst;
    double opt; /* the worst parameter error its optimizer records wrote (cmp_module_params) */
};

static cmp_prev_t *cmp_prev_of(cmp_finish_t *f, int64_t rank)
{
    for (size_t i = 0; i < f->n_prev; i++) /* ranks of the tree, a handful to thousands */
        if (f->prev[i].rank == rank)
            return &f->prev[i];
    return NULL;
}

/* cmp_rank_suspects on one pair, seeded with the worst output error of the
 * rank's previous step: a record standing for that step sits before the
 * pair's, and goes again after. */
static msp_err cmp_part_suspects(cmp_finish_t *f, msp_compare_result_t *part)
{
    if (!part->n_records)
        return MSP_OK;
    const msp_record_cmp_t *first = &part->records[0];
    cmp_prev_t *pv = cmp_prev_of(f, first->rank);
    int ghost = pv && pv->step != first->step;
    if (ghost) {
        msp_record_cmp_t *nv = realloc(part->records, (part->n_records + 1) * sizeof *nv);
        if (!nv)
            return cmp_oom();
        part->records = nv;
        memmove(&nv[1], &nv[0], part->n_records * sizeof *nv);
        memset(&nv[0], 0, sizeof nv[0]);
        nv[0].name = (char *)"";
        nv[0].step = pv->step;
        nv[0].rank = pv->rank;
        nv[0].order = -1;
        nv[0].worst_cosine = nv[0].worst_max_abs = NAN;
        nv[0].in_err = NAN;
        nv[0].out_err = pv->worst;
        nv[0].order_begin = -1;
        nv[0].replay_err = nv[0].replay_ref = NAN;
        nv[0].comm_peer = -1;
        nv[0].tier = -1;
        part->n_records++;
    }
    msp_err rc = cmp_rank_suspects(part, 0);
    if (ghost) {
        memmove(&part->records[0], &part->records[1],
                (part->n_records - 1) * sizeof *part->records);
        part->n_records--;
        for (size_t i = 0; i < part->n_suspects; i++)
            part->suspects[i].record--;
        if (part->root_record >= 0)
            part->root_record--;
    }
    return rc;
}

/* One finished pair: its suspects (copies) and communication records kept,
 * its counts added, its marks cleared, and into the final spool. */
/* The part's suspects into the head: copies of the records and rows they
 * name (a record's rows are not copied), their global places and tiers. */
static msp_err cmp_head_suspects(cmp_finish_t *f, msp_compare_result_t *part)
{
    msp_compare_tree_t *t = f->t;
    msp_compare_result_t *h = f->head;
    msp_err rc = MSP_OK;
    long *copy_of = part->n_suspects ? malloc(part->n_records * sizeof *copy_of) : NULL;
    if (!rc && part->n_suspects && !copy_of)
        rc = cmp_oom();
    for (size_t i = 0; copy_of && i < part->n_records; i++)
        copy_of[i] = -1;
    for (size_t k = 0; !rc && k < part->n_suspects; k++) {
        const msp_suspect_t *s = &part->suspects[k];
        if (copy_of[s->record] < 0) {
            msp_record_cmp_t *nv = msp_grow(h->records, &f->cap_rec, h->n_records, sizeof *nv, 16);
            size_t *g = nv ? realloc(f->head_rec_global, f->cap_rec * sizeof *g) : NULL;
            if (!nv || !g) {
                if (nv)
                    h->records = nv;
                rc = cmp_oom();
                break;
            }
            h->records = nv;
            f->head_rec_global = g;
            if ((rc = cmp_copy_record(&h->records[h->n_records], &part->records[s->record], 0)))
                break;
            /* only the rows a suspect names are kept: the record claims none */
            h->records[h->n_records].n_tensors = 0;
            g[h->n_records] = t->n_records + (size_t)s->record;
            copy_of[s->record] = (long)h->n_records++;
        }
        long ten = -1;
        if (s->tensor >= 0) {
            msp_tensor_cmp_t *nv = msp_grow(h->tensors, &f->cap_ten, h->n_tensors, sizeof *nv, 16);
            size_t *g = nv ? realloc(f->head_ten_global, f->cap_ten * sizeof *g) : NULL;
            if (!nv || !g) {
                if (nv)
                    h->tensors = nv;
                rc = cmp_oom();
                break;
            }
            h->tensors = nv;
            f->head_ten_global = g;
            if ((rc = cmp_copy_tensor(&h->tensors[h->n_tensors], &part->tensors[s->tensor])))
                break;
            g[h->n_tensors] = t->n_tensors + (size_t)s->tensor;
            ten = (long)h->n_tensors++;
        }
        msp_suspect_t *nv = msp_grow(h->suspects, &f->cap_sus, h->n_suspects, sizeof *nv, 16);
        int *tv = nv ? realloc(f->tiers, f->cap_sus * sizeof *tv) : NULL;
        if (!nv || !tv) {
            if (nv)
                h->suspects = nv;
            rc = cmp_oom();
            break;
        }
        h->suspects = nv;
        f->tiers = tv;
        msp_suspect_t c = *s;
        c.record = copy_of[s->record];
        c.tensor = ten;
        if (!(c.reason = strdup(s->reason ? s->reason : ""))) {
            rc = cmp_oom();
            break;
        }
        /* cmp_rank_suspects's tiers: parameters first, gaps from ratios alone,
         * records their own */
        tv[h->n_suspects] = s->is_gap == 2 ? 0 : s->is_gap ? 1 : part->records[s->record].tier;
        h->suspects[h->n_suspects++] = c;
    }
    free(copy_of);
    return rc;
}

/* The rank's worst output error of this step (and its optimizer's), for its
 * next step's seed. */
static msp_err cmp_prev_note(cmp_finish_t *f, const msp_compare_result_t *part)
{
    msp_err rc = MSP_OK;
    double worst = 0.0, opt = 0.0;
    for (size_t i = 0; i < part->n_records; i++) {
        double e = part->records[i].out_err;
        if (!isnan(e) && !isinf(e))
            worst = fmax(worst, e);
        if (!isnan(e) && !strncmp(part->records[i].name, "Optimizer.", 10))
            opt = fmax(opt, e);
    }
    cmp_prev_t *pv = cmp_prev_of(f, part->records[0].rank);
    if (!pv) {
        cmp_prev_t *nv = msp_grow(f->prev, &f->cap_prev, f->n_prev, sizeof *nv, 16);
        if (!nv) {
            rc = cmp_oom();
        } else {
            f->prev = nv;
            pv = &f->prev[f->n_prev++];
            memset(pv, 0, sizeof *pv);
        }
    }
    /* a parameter carries what any earlier step's update put into it (two
     * optimizers take turns: a GAN's), so the worst runs over every step */
    if (pv)
        *pv = (cmp_prev_t){part->records[0].rank, part->records[0].step, fmax(worst, pv->worst),
                           opt > 0.0 ? opt : pv->opt};
    return rc;
}

/* The part's counts and lists into the head and the tree, and its records'
 * marks cleared (the head holds its suspects now). */
static msp_err cmp_head_totals(cmp_finish_t *f, msp_compare_result_t *part)
{
    msp_compare_tree_t *t = f->t;
    msp_compare_result_t *h = f->head;
    msp_err rc = MSP_OK;
    for (size_t i = 0; !rc && i < part->n_unpaired; i++)
        rc = cmp_line_push(&h->unpaired, &h->n_unpaired, part->unpaired[i]);
    for (size_t i = 0; !rc && i < part->n_unread; i++)
        rc = cmp_line_push(&h->unread, &h->n_unread, part->unread[i]);
    if (!rc && part->first_unreadable && !h->first_unreadable &&
        !(h->first_unreadable = strdup(part->first_unreadable)))
        rc = cmp_oom();
    if (rc)
        return rc;
    h->n_crc_bad += part->n_crc_bad;
    h->n_unreadable += part->n_unreadable;
    h->stats_mode |= part->stats_mode;
    h->n_pairs += part->n_pairs;
    h->bytes_compared += part->bytes_compared;
    for (size_t i = 0; i < part->n_records; i++) {
        msp_record_cmp_t *r = &part->records[i];
        /* as msp_compare_run counts them (n_failed): N/A is no failure, a
         * changed setup is one */
        t->n_failed += (r->verdict != MSP_VERDICT_YES && r->verdict != MSP_VERDICT_NA) ||
                       r->setup_differs;
        cmp_replay_count(h, r->replay);
        r->suspect_rank = 0;
        r->is_root_cause = 0;
    }
    /* the part's suspects live on in the head; the report marks from there */
    for (size_t i = 0; i < part->n_suspects; i++)
        free(part->suspects[i].reason);
    free(part->suspects);
    part->suspects = NULL;
    part->n_suspects = 0;
    part->root_record = part->root_tensor = -1;
    return MSP_OK;
}

msp_err cmp_finish_part(cmp_finish_t *f, msp_compare_result_t *part)
{
    msp_compare_tree_t *t = f->t;
    msp_compare_result_t *h = f->head;
    /* module records count the parameters the rank's last optimizer step wrote */
    const cmp_prev_t *before = part->n_records ? cmp_prev_of(f, part->records[0].rank) : NULL;
    msp_err rc = cmp_module_params(part, before ? before->opt : 0.0);
    if (!rc)
        rc = cmp_judge_modules(part);
    if (!rc)
        rc = cmp_part_suspects(f, part);
    if (!rc) /* phase A sampled the likely ones: the page needs only these */
        cmp_sample_keep_suspects(part);
    if (!rc)
        rc = cmp_head_suspects(f, part);
    if (!rc)
        rc = cmp_comm_collect(&f->comm, part);
    if (!rc)
        rc = cmp_rank_stats_add(h, &f->cap_ranks, part);
    if (!rc && part->n_records)
        rc = cmp_prev_note(f, part);
    if (!rc)
        rc = cmp_head_totals(f, part);
    if (rc) {
        msp_compare_result_free(part);
        return rc;
    }
    size_t *rb = realloc(t->rec_base, (t->n_parts + 1) * sizeof *rb);
    if (rb)
        t->rec_base = rb;
    size_t *tb = realloc(t->ten_base, (t->n_parts + 1) * sizeof *tb);
    if (tb)
        t->ten_base = tb;
    int64_t *pr = realloc(t->part_rank, (t->n_parts + 1) * sizeof *pr);
    if (pr)
        t->part_rank = pr;
    int64_t *ps = realloc(t->part_step, (t->n_parts + 1) * sizeof *ps);
    if (ps)
        t->part_step = ps;
    if (!rb || !tb || !pr || !ps) {
        msp_compare_result_free(part);
        return cmp_oom();
    }
    t->rec_base[t->n_parts] = t->n_records;
    t->ten_base[t->n_parts] = t->n_tensors;
    t->part_rank[t->n_parts] = part->n_records ? part->records[0].rank : -1;
    t->part_step[t->n_parts] = part->n_records ? part->records[0].step : -1;
    t->n_parts++;
    t->n_records += part->n_records;
    t->n_tensors += part->n_tensors;
    return cmp_spool_give(t->spool, part);
}

/* cmp_rank_suspects's order over every pair's suspects (each pair's already
 * in it): step, tier, execution order, rank, a gap before its record. Stable. */
static int cmp_sus_before(const cmp_finish_t *f, size_t a, size_t b)
{
    const msp_compare_result_t *h = f->head;
    const msp_record_cmp_t *ra = &h->records[h->suspects[a].record];
    const msp_record_cmp_t *rb = &h->records[h->suspects[b].record];
    if (ra->step != rb->step)
        return ra->step < rb->step;
    if (f->tiers[a] != f->tiers[b])
        return f->tiers[a] < f->tiers[b];
    if (ra->order != rb->order)
        return ra->order < rb->order;
    if (ra->rank != rb->rank)
        return ra->rank < rb->rank;
    return h->suspects[a].is_gap && !h->suspects[b].is_gap;
}

static msp_err cmp_sort_suspects(cmp_finish_t *f)
{
    msp_compare_result_t *h = f->head;
    size_t n = h->n_suspects;
    size_t *idx = calloc(n + 1, sizeof *idx), *tmp = calloc(n + 1, sizeof *tmp);
    msp_suspect_t *sv = calloc(n + 1, sizeof *sv);
    if (!idx || !tmp || !sv) {
        free(idx);
        free(tmp);
        free(sv);
        return cmp_oom();
    }
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    /* bottom-up merge sort: stable */
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = cmp_sus_before(f, idx[j], idx[i]) ? idx[j++] : idx[i++];
            while (i < mid)
                tmp[k++] = idx[i++];
            while (j < hi)
                tmp[k++] = idx[j++];
        }
        size_t *s = idx;
        idx = tmp;
        tmp = s;
    }
    for (size_t i = 0; i < n; i++)
        sv[i] = h->suspects[idx[i]];
    if (n)
        memcpy(h->suspects, sv, n * sizeof *sv);
    free(idx);
    free(tmp);
    free(sv);
    return MSP_OK;
}

static int cmp_mark_order(const void *x, const void *y)
{
    const cmp_mark_t *a = x, *b = y;
    return a->record < b->record ? -1 : a->record > b->record;
}

/* After every pair: one order of suspects, the cross-rank pass, the marks. */
msp_err cmp_finish_tree(cmp_finish_t *f)
{
    msp_compare_tree_t *t = f->t;
    msp_compare_result_t *h = f->head;
    msp_err rc = cmp_sort_suspects(f);
    if (!rc)
        rc = cmp_ranks_order(h, &f->comm, f->top);
    if (rc)
        return rc;
    t->marks = calloc(h->n_records + 1, sizeof *t->marks);
    if (!t->marks)
        return cmp_oom();
    for (size_t i = 0; i < h->n_records; i++)
        t->marks[i] = (cmp_mark_t){f->head_rec_global[i], h->records[i].suspect_rank,
                                   h->records[i].is_root_cause, NULL, h->records[i].cause};
    for (size_t k = h->n_suspects; k-- > 0;)
        t->marks[h->suspects[k].record].reason = h->suspects[k].reason;
    t->n_marks = h->n_records;
    qsort(t->marks, t->n_marks, sizeof *t->marks, cmp_mark_order);
    t->head_rec = malloc((h->n_records + 1) * sizeof *t->head_rec);
    t->head_ten = malloc((h->n_tensors + 1) * sizeof *t->head_ten);
    if (!t->head_rec || !t->head_ten)
        return cmp_oom();
    if (h->n_records)
        memcpy(t->head_rec, f->head_rec_global, h->n_records * sizeof *t->head_rec);
    if (h->n_tensors)
        memcpy(t->head_ten, f->head_ten_global, h->n_tensors * sizeof *t->head_ten);
    t->root_tensor = h->root_tensor >= 0 ? (long)f->head_ten_global[h->root_tensor] : -1;
    return MSP_OK;
}

/* ---- entry points ---------------------------------------------------------- */

/* ---- entry points ---------------------------------------------------------- */

void msp_compare_tree_free(msp_compare_tree_t *t)
{
    if (!t)
        return;
    msp_compare_result_free(t->head);
    cmp_spool_close(t->spool);
    free(t->rec_base);
    free(t->ten_base);
    free(t->part_rank);
    free(t->part_step);
    free(t->marks);
    free(t->head_rec);
    free(t->head_ten);
    free(t->proc_pairs);
    if (t->worker) {
        cmp_worker_stop(t->worker);
        free(t->worker);
    }
    free(t);
}

static char **cmp_strv_dup(char *const *v, size_t n, int *oom)
{
    char **d = n ? calloc(n, sizeof *d) : NULL;
    if (n && !d)
        *oom = 1;
    for (size_t i = 0; d && i < n; i++)
        if (!(d[i] = strdup(v[i] ? v[i] : "")))
            *oom = 1;
    return d;
}

/* The head's summary of the whole compare into w, whose suspects are the
 * head's in the same order: what was left out or unreadable, replay's
 * account, the ranks and the cross-rank marks. */
static msp_err cmp_whole_summary(msp_compare_result_t *w, const msp_compare_result_t *h)
{
    int oom = 0;
    w->unpaired = cmp_strv_dup(h->unpaired, h->n_unpaired, &oom);
    w->n_unpaired = w->unpaired ? h->n_unpaired : 0;
    w->unread = cmp_strv_dup(h->unread, h->n_unread, &oom);
    w->n_unread = w->unread ? h->n_unread : 0;
    w->n_crc_bad = h->n_crc_bad;
    w->n_unreadable = h->n_unreadable;
    w->first_unreadable = cmp_dup(h->first_unreadable, &oom);
    w->replay_candidates = h->replay_candidates;
    w->replay_done = h->replay_done;
    w->replay_introduced = h->replay_introduced;
    w->replay_inherited = h->replay_inherited;
    w->replay_skipped = h->replay_skipped;
    w->replay_unfinished = h->replay_unfinished;
    w->replay_seconds = h->replay_seconds;
    w->replay_unavailable = cmp_dup(h->replay_unavailable, &oom);
    if (h->suspect_from && h->n_suspects &&
        (w->suspect_from = malloc(h->n_suspects * sizeof *w->suspect_from)))
        memcpy(w->suspect_from, h->suspect_from, h->n_suspects * sizeof *w->suspect_from);
    else if (h->suspect_from && h->n_suspects)
        oom = 1;
    if (h->n_ranks && (w->ranks = calloc(h->n_ranks, sizeof *w->ranks))) {
        w->n_ranks = h->n_ranks;
        for (size_t i = 0; i < h->n_ranks; i++) {
            w->ranks[i] = h->ranks[i];
            w->ranks[i].at = cmp_dup(h->ranks[i].at, &oom);
        }
    } else if (h->n_ranks) {
        oom = 1;
    }
    return oom ? cmp_oom() : MSP_OK;
}

/* The global indexes of the head's suspect records, sorted, each once, in
 * a new array (*n of them); NULL with *n 0 when there are none. */
static size_t *cmp_suspect_records(const msp_compare_tree_t *t, size_t *n, int *oom)
{
    const msp_compare_result_t *h = t->head;
    *n = 0;
    size_t *v = h->n_suspects ? malloc(h->n_suspects * sizeof *v) : NULL;
    if (h->n_suspects && !v)
        *oom = 1;
    for (size_t k = 0; v && k < h->n_suspects; k++)
        if (h->suspects[k].record >= 0)
            v[(*n)++] = t->head_rec[h->suspects[k].record];
    if (*n > 1)
        qsort(v, *n, sizeof *v, msp_size_cmp);
    size_t u = 0;
    for (size_t k = 0; k < *n; k++)
        if (!u || v[u - 1] != v[k])
            v[u++] = v[k];
    *n = u;
    return v;
}

static msp_err cmp_tree_load_as(const msp_compare_tree_t *t, size_t i, int shared,
                                msp_compare_result_t **part);

/* The whole tree as one result, its parts read from the spool (f NULL: the
 * rows moved out of each part) or from the feed f as its reader (copied).
 * lean (fed only): every record, but the rows of the suspects' records
 * alone, each at its index in the whole (the others zero): all the page
 * reads. Copying every row and its six strings was most of what the page
 * cost on a statistics tree (issue 42: 200,000 rows, 0.6 of 3.5 s). */
static msp_err cmp_tree_whole(const msp_compare_tree_t *t, size_t max_records, cmp_feed_t *f,
                              int reader, int lean, msp_compare_result_t **out)
{
    *out = NULL;
    if (!t || !t->is_root || !t->head || t->n_records > max_records)
        return MSP_OK;
    const msp_compare_result_t *h = t->head;
    msp_compare_result_t *w = cmp_result_new();
    msp_err rc = w ? MSP_OK : cmp_oom();
    size_t sample_cap = 0;
    if (!rc && (!(w->records = calloc(t->n_records + 1, sizeof *w->records)) ||
                !(w->tensors = calloc(t->n_tensors + 1, sizeof *w->tensors)) ||
                !(w->suspects = calloc(h->n_suspects + 1, sizeof *w->suspects))))
        rc = cmp_oom();
    lean = lean && f;
    int oom = 0;
    size_t n_want = 0, *want = !rc && lean ? cmp_suspect_records(t, &n_want, &oom) : NULL;
    if (oom)
        rc = cmp_oom();
    for (size_t i = 0; !rc && i < t->n_parts; i++) {
        msp_compare_result_t *p = NULL;
        if ((rc = f ? cmp_feed_get(f, reader, i, &p) : cmp_tree_load_as(t, i, 0, &p)))
            break;
        /* From the spool the part's rows and records are moved, not copied:
         * p is freed next, and copying every string of every row was a tenth
         * of a statistics tree's compare (issue 42). A fed part is shared,
         * and one whose strings are one block cannot give them away. */
        size_t base = w->n_tensors;
        if (lean) { /* the suspects' rows only, at their places */
            size_t take = p->n_tensors < t->n_tensors - base ? p->n_tensors : t->n_tensors - base;
            for (size_t r = 0; !rc && r < p->n_records; r++) {
                size_t g = w->n_records + r;
                const msp_record_cmp_t *pr = &p->records[r];
                if (!want || !bsearch(&g, want, n_want, sizeof *want, msp_size_cmp))
                    continue;
                for (size_t k = pr->first_tensor; !rc && k < pr->first_tensor + pr->n_tensors; k++)
                    if (k < take)
                        rc = cmp_copy_tensor(&w->tensors[base + k], &p->tensors[k]);
            }
            w->n_tensors += take;
        }
        for (size_t k = 0; !rc && !lean && k < p->n_tensors && w->n_tensors < t->n_tensors; k++) {
            msp_tensor_cmp_t *d = &w->tensors[w->n_tensors++];
            if (f || p->strs || p->names) { /* shared, or strings in blocks: copied */
                rc = cmp_copy_tensor(d, &p->tensors[k]);
                continue;
            }
            *d = p->tensors[k];
            memset(&p->tensors[k], 0, sizeof p->tensors[k]);
            if (!d->err_message && !(d->err_message = strdup("")))
                rc = cmp_oom();
        }
        for (size_t k = 0; !rc && k < p->n_samples; k++) {
            msp_tensor_sample_t *v = msp_grow(w->samples, &sample_cap, w->n_samples + 1, sizeof *v,
                                              16);
            if (!v) {
                rc = cmp_oom();
                break;
            }
            w->samples = v;
            msp_tensor_sample_t *d = &v[w->n_samples];
            if (f && (rc = cmp_sample_copy(d, &p->samples[k])))
                break;
            if (!f) {
                *d = p->samples[k];
                memset(&p->samples[k], 0, sizeof p->samples[k]);
            }
            d->tensor += (long)base;
            w->n_samples++;
        }
        for (size_t r = 0; !rc && r < p->n_records && w->n_records < t->n_records; r++) {
            msp_record_cmp_t *d = &w->records[w->n_records++];
            if (f || p->strs || p->names) {
                rc = cmp_copy_record(d, &p->records[r], 0);
                d->first_tensor = p->records[r].first_tensor;
            } else {
                *d = p->records[r];
                memset(&p->records[r], 0, sizeof p->records[r]);
            }
            d->first_tensor += base;
        }
        if (f)
            cmp_feed_put(f, reader, p);
        else
            msp_compare_result_free(p);
    }
    if (!rc) {
        w->stats_mode = h->stats_mode;
        w->n_pairs = h->n_pairs;
        w->n_failed = t->n_failed;
        w->bytes_compared = h->bytes_compared;
        w->first_rank = h->first_rank;
        w->root_tensor = t->root_tensor;
        w->root_record = h->root_record >= 0 ? (long)t->head_rec[h->root_record] : -1;
        for (size_t k = 0; !rc && k < h->n_suspects; k++) {
            msp_suspect_t s = h->suspects[k];
            s.record = (long)t->head_rec[s.record];
            s.tensor = s.tensor >= 0 ? (long)t->head_ten[s.tensor] : -1;
            if (!(s.reason = strdup(h->suspects[k].reason ? h->suspects[k].reason : "")))
                rc = cmp_oom();
            else
                w->suspects[w->n_suspects++] = s;
        }
        if (!rc)
            rc = cmp_whole_summary(w, h);
    }
    if (lean && w) { /* freed as what it holds, every record in place */
        w->held_records = want ? want : calloc(1, sizeof *want);
        w->n_held_records = n_want;
        want = NULL;
        if (!w->held_records && !rc)
            rc = cmp_oom();
    }
    free(want);
    if (rc) {
        msp_compare_result_free(w);
        return rc;
    }
    *out = w;
    return MSP_OK;
}

msp_err msp_compare_tree_whole(const msp_compare_tree_t *t, size_t max_records,
                               msp_compare_result_t **out)
{
    return cmp_tree_whole(t, max_records, NULL, 0, 0, out);
}

msp_err cmp_tree_whole_fed(const msp_compare_tree_t *t, size_t max_records, cmp_feed_t *f,
                           int reader, int lean, msp_compare_result_t **out)
{
    msp_err rc = cmp_tree_whole(t, max_records, f, reader, lean, out);
    cmp_feed_leave(f, reader); /* also when it read nothing */
    return rc;
}

/* ---- what the CLI and the reports read -------------------------------------- */

int msp_compare_tree_is_root(const msp_compare_tree_t *t)
{
    return t && t->is_root;
}

const msp_compare_result_t *msp_compare_tree_head(const msp_compare_tree_t *t)
{
    return t ? t->head : NULL;
}

void msp_compare_tree_totals(const msp_compare_tree_t *t, size_t *records, size_t *tensors,
                             size_t *failing)
{
    if (records)
        *records = t ? t->n_records : 0;
    if (tensors)
        *tensors = t ? t->n_tensors : 0;
    if (failing)
        *failing = t ? t->n_failed : 0;
}

int msp_compare_tree_processes(const msp_compare_tree_t *t, const size_t **pairs)
{
    if (pairs)
        *pairs = t ? t->proc_pairs : NULL;
    return t ? t->n_procs : 0;
}

size_t cmp_tree_parts(const msp_compare_tree_t *t)
{
    return t->n_parts;
}

void cmp_tree_part_info(const msp_compare_tree_t *t, size_t i, size_t *rec_base, size_t *ten_base,
                        int64_t *step, int64_t *rank)
{
    if (rec_base)
        *rec_base = t->rec_base[i];
    if (ten_base)
        *ten_base = t->ten_base[i];
    if (step)
        *step = t->part_step[i];
    if (rank)
        *rank = t->part_rank[i];
}

long cmp_tree_root_tensor(const msp_compare_tree_t *t)
{
    return t->root_tensor;
}

static const cmp_mark_t *cmp_tree_mark(const msp_compare_tree_t *t, size_t record)
{
    cmp_mark_t key = {record, 0, 0, NULL, MSP_CAUSE_NONE};
    return bsearch(&key, t->marks, t->n_marks, sizeof *t->marks, cmp_mark_order);
}

const char *cmp_tree_reason(const msp_compare_tree_t *t, size_t record)
{
    const cmp_mark_t *m = cmp_tree_mark(t, record);
    return m ? m->reason : NULL;
}

/* shared: the part's strings in one block (cmp_spool_get_shared) */
static msp_err cmp_tree_load_as(const msp_compare_tree_t *t, size_t i, int shared,
                                msp_compare_result_t **part)
{
    msp_err rc = shared ? cmp_spool_get_shared(t->spool, i, part)
                        : cmp_spool_get(t->spool, i, part);
    if (rc)
        return rc;
    msp_compare_result_t *p = *part;
    for (size_t r = 0; r < p->n_records; r++) {
        const cmp_mark_t *m = cmp_tree_mark(t, t->rec_base[i] + r);
        if (m) {
            p->records[r].suspect_rank = m->suspect_rank;
            p->records[r].is_root_cause = m->is_root_cause;
            p->records[r].cause = m->cause;
        }
    }
    return MSP_OK;
}

msp_err cmp_tree_load(const msp_compare_tree_t *t, size_t i, msp_compare_result_t **part)
{
    return cmp_tree_load_as(t, i, 1, part); /* the reports only read it */
}
