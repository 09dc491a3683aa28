/* msp_compare_stream: the compare of a whole dump tree with one step x rank
 * pair in memory at a time, alone or spread over the processes of an MPI
 * launch (msprobe-compare(1), SCALE and MPI).
 *
 * It computes what msp_compare_run computes, in phases that each need one
 * pair at most:
 *   A  each pair's metrics, record verdicts and backward links (the engine,
 *      cmp_run.c), packed into a spool file; replay's candidates noted;
 *   R  replay, most suspicious first over all the pairs (a bounded batch of
 *      candidates at a time, copies of their records);
 *   B  pair by pair in (step, rank) order: replay's answers, modules, the
 *      pair's suspects (seeded with the worst error of the rank's previous
 *      step, as msp_compare_run sees it), into the final spool; what the
 *      report and the ranking need from it is kept: its suspects (copies),
 *      communication records, rank counts;
 *   then the suspects of all pairs in one order (cmp_rank_suspects's), the
 *   cross-rank pass (cmp_ranks.c), and the marks the report paints.
 * Under MPI, phases A and R run on every process for the pairs it owns
 * (cmp_plan.c), and process 0 receives the parts in pair order and runs the
 * rest; its result is the single-process compare's, row for row. */
#include "cmp_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Replay candidates held at once (copies of their records); past it replay
 * goes on in further batches, found by another read of the spool. */
#define CMP_REPLAY_BATCH ((size_t)1 << 16)

/* A global record of the final spool and how the report marks it. */
typedef struct cmp_mark {
    size_t record;      /* global record index */
    int suspect_rank;
    int is_root_cause;
    const char *reason; /* the first suspect line that names it (owned by head) */
} cmp_mark_t;

struct msp_compare_tree {
    int is_root;
    msp_compare_result_t *head;  /* suspects with copies of their records and rows */
    size_t n_records, n_tensors, n_failed; /* totals over the tree */
    cmp_spool_t *spool;          /* the final parts, in (step, rank) order */
    size_t n_parts;
    size_t *rec_base, *ten_base; /* per part */
    int64_t *part_rank, *part_step;
    cmp_mark_t *marks;           /* by record */
    size_t n_marks;
    long root_tensor;            /* global */
    size_t *head_rec, *head_ten; /* the global index of each head record and row copy */
    size_t *proc_pairs;          /* pairs each process compared */
    int n_procs;
};

static double cmp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static msp_compare_result_t *cmp_result_new(void)
{
    msp_compare_result_t *r = calloc(1, sizeof *r);
    if (r)
        r->root_record = r->root_tensor = r->first_rank = -1;
    return r;
}

static msp_err cmp_oom(void)
{
    return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
}

/* ---- copies ------------------------------------------------------------- */

static char *cmp_dup(const char *s, int *oom)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *oom = 1;
    return d;
}

/* A record's copy; stack and tensors left out when lean (replay needs neither). */
static msp_err cmp_copy_record(msp_record_cmp_t *dst, const msp_record_cmp_t *src, int lean)
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

/* ---- replay candidates ---------------------------------------------------- */

typedef struct cmp_cand {
    double prio;
    size_t pair, rec; /* pair: index into the global pair list; rec: inside its part */
} cmp_cand_t;

/* Replay's order: higher priority first, then the earlier record. */
static int cmp_cand_before(const cmp_cand_t *a, const cmp_cand_t *b)
{
    if (a->prio > b->prio)
        return 1;
    if (a->prio < b->prio)
        return 0;
    return a->pair != b->pair ? a->pair < b->pair : a->rec < b->rec;
}

/* The best `cap` candidates: a heap whose top is the last of them in order. */
typedef struct cmp_heap {
    cmp_cand_t *v;
    size_t n, cap;
} cmp_heap_t;

static void cmp_heap_sift(cmp_heap_t *h, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && cmp_cand_before(&h->v[m], &h->v[l]))
            m = l;
        if (r < h->n && cmp_cand_before(&h->v[m], &h->v[r]))
            m = r;
        if (m == i)
            return;
        cmp_cand_t t = h->v[i];
        h->v[i] = h->v[m];
        h->v[m] = t;
        i = m;
    }
}

static void cmp_heap_add(cmp_heap_t *h, const cmp_cand_t *c)
{
    if (h->n < h->cap) {
        size_t i = h->n++;
        h->v[i] = *c;
        while (i > 0 && cmp_cand_before(&h->v[(i - 1) / 2], &h->v[i])) {
            cmp_cand_t t = h->v[i];
            h->v[i] = h->v[(i - 1) / 2];
            h->v[(i - 1) / 2] = t;
            i = (i - 1) / 2;
        }
        return;
    }
    if (h->n && cmp_cand_before(c, &h->v[0])) {
        h->v[0] = *c;
        cmp_heap_sift(h, 0);
    }
}

static int cmp_cand_index_order(const void *x, const void *y)
{
    const cmp_cand_t *a = x, *b = y;
    if (a->pair != b->pair)
        return a->pair < b->pair ? -1 : 1;
    return a->rec < b->rec ? -1 : a->rec > b->rec;
}

/* What replay said of one record. */
typedef struct cmp_outcome {
    size_t pair, rec;
    msp_replay_verdict_t replay;
    double err, ref;
    char *note;
} cmp_outcome_t;

/* ---- the driver ------------------------------------------------------------ */

typedef struct cmp_stream {
    const msp_compare_opts_t *o;
    const msp_compare_net_t *net;
    int me;
    cmp_plan_t plan;
    cmp_spool_t *a;        /* phase A: this process's parts, in pair order */
    size_t *a_index;       /* per pair: its index in a, or SIZE_MAX when not ours */
    /* replay */
    cmp_heap_t heap;
    size_t n_cands;
    cmp_outcome_t *out;
    size_t n_out, cap_out;
    int ran_out;           /* the budget ended replay before every candidate */
    cmp_cand_t last;       /* the last candidate replay reached */
    char *unfinished_note; /* what a candidate left by the budget says */
    double replay_seconds;
    char *replay_unavailable;
    void (*user_progress)(size_t, size_t, void *);
    void *user_progress_ud;
    size_t progress_base;
} cmp_stream_t;

static void cmp_stream_progress(size_t done, size_t total, void *ud)
{
    cmp_stream_t *st = ud;
    (void)total;
    if (st->user_progress)
        st->user_progress(st->progress_base + done, st->n_cands, st->user_progress_ud);
}

typedef struct cmp_finish cmp_finish_t;
static msp_err cmp_finish_part(cmp_finish_t *f, msp_compare_result_t *part);

/* Phase A for the pairs this process owns. With fin (one process, no
 * replay) each pair goes on to phase B at once, and no spool is needed. */
static msp_err cmp_phase_a(cmp_stream_t *st, cmp_finish_t *fin)
{
    msp_err rc = fin ? MSP_OK : cmp_spool_open(st->o->spool_dir, &st->a);
    cmp_engine_t *eng = NULL;
    st->a_index = calloc(st->plan.nfp + 1, sizeof *st->a_index);
    if (!rc && !st->a_index)
        rc = cmp_oom();
    if (!rc && st->o->replay != MSP_REPLAY_OFF &&
        !(st->heap.v = calloc(CMP_REPLAY_BATCH, sizeof *st->heap.v)))
        rc = cmp_oom();
    st->heap.cap = CMP_REPLAY_BATCH;
    if (!rc)
        rc = cmp_engine_open(st->o, &eng);
    for (size_t i = 0; i < st->plan.nfp; i++)
        st->a_index[i] = SIZE_MAX;
    for (size_t i = 0; i < st->plan.nfp && !rc; i++) {
        if (st->plan.owner[i] != st->me)
            continue;
        const cmp_file_pair_t *ahead[2] = {NULL, NULL};
        size_t na = 0;
        for (size_t j = i + 1; j < st->plan.nfp && na < 2; j++)
            if (st->plan.owner[j] == st->me)
                ahead[na++] = &st->plan.fps[j];
        msp_compare_result_t *part = cmp_result_new();
        int compared = 0;
        if (!part) {
            rc = cmp_oom();
            break;
        }
        rc = cmp_engine_pair(eng, part, &st->plan.fps[i], ahead, na, &compared);
        part->n_pairs = (size_t)compared;
        if (!rc)
            rc = cmp_apply_results(part, cmp_engine_md5(eng));
        for (size_t r = 0; !rc && r < part->n_records; r++)
            cmp_record_finish(&part->records[r], part->tensors);
        if (!rc)
            rc = cmp_link_backward(part);
        for (size_t r = 0; !rc && st->heap.v && r < part->n_records; r++) {
            cmp_cand_t c = {0.0, i, r};
            if (cmp_replay_choose(&part->records[r], st->o, &c.prio)) {
                cmp_heap_add(&st->heap, &c);
                st->n_cands++;
            }
        }
        if (!rc && fin) {
            rc = cmp_finish_part(fin, part);
        } else if (!rc) {
            st->a_index[i] = cmp_spool_count(st->a);
            rc = cmp_spool_put(st->a, part);
        }
        msp_compare_result_free(part);
    }
    cmp_engine_close(eng);
    return rc;
}

/* Candidates after st->last in replay's order, the best CMP_REPLAY_BATCH of
 * them, read again from the spool (only when one batch was not enough). */
static msp_err cmp_refill(cmp_stream_t *st)
{
    st->heap.n = 0;
    msp_err rc = MSP_OK;
    for (size_t i = 0; i < st->plan.nfp && !rc; i++) {
        if (st->a_index[i] == SIZE_MAX)
            continue;
        msp_compare_result_t *part = NULL;
        if ((rc = cmp_spool_get(st->a, st->a_index[i], &part)))
            break;
        for (size_t r = 0; r < part->n_records; r++) {
            cmp_cand_t c = {0.0, i, r};
            if (part->records[r].replay == MSP_RV_NONE &&
                cmp_replay_choose(&part->records[r], st->o, &c.prio) &&
                cmp_cand_before(&st->last, &c))
                cmp_heap_add(&st->heap, &c);
        }
        msp_compare_result_free(part);
    }
    return rc;
}

/* Phase R: replay, most suspicious first over every pair of this process. */
static msp_err cmp_phase_r(cmp_stream_t *st)
{
    const msp_compare_opts_t *o = st->o;
    if (o->replay == MSP_REPLAY_OFF || !st->n_cands)
        return MSP_OK;
    double t0 = cmp_now();
    size_t done = 0;
    msp_err rc = MSP_OK;
    while (!rc && done < st->n_cands) {
        if (done && (rc = cmp_refill(st)))
            break;
        size_t nb = st->heap.n;
        if (!nb)
            break;
        qsort(st->heap.v, nb, sizeof *st->heap.v, cmp_cand_index_order);
        /* the batch's last candidate in replay's order, where the next one starts */
        cmp_cand_t worst = st->heap.v[0];
        for (size_t i = 1; i < nb; i++)
            if (cmp_cand_before(&worst, &st->heap.v[i]))
                worst = st->heap.v[i];
        msp_compare_result_t *syn = cmp_result_new();
        if (!syn || !(syn->records = calloc(nb, sizeof *syn->records))) {
            msp_compare_result_free(syn);
            return cmp_oom();
        }
        /* copies of the batch's records, in index order (replay's tie-break) */
        msp_compare_result_t *part = NULL;
        size_t part_pair = SIZE_MAX;
        for (size_t i = 0; i < nb && !rc; i++) {
            const cmp_cand_t *c = &st->heap.v[i];
            if (c->pair != part_pair) {
                msp_compare_result_free(part);
                part = NULL;
                part_pair = c->pair;
                rc = cmp_spool_get(st->a, st->a_index[c->pair], &part);
            }
            if (!rc && (rc = cmp_copy_record(&syn->records[i], &part->records[c->rec], 1)) == 0)
                syn->n_records++;
        }
        msp_compare_result_free(part);
        msp_compare_opts_t o2 = *o;
        if (o->replay_budget > 0) {
            o2.replay_budget = o->replay_budget - (cmp_now() - t0);
            if (o2.replay_budget <= 0)
                o2.replay_budget = 1e-9; /* spent: the batch is left by the budget */
        }
        o2.replay_progress = cmp_stream_progress;
        o2.replay_progress_ud = st;
        st->progress_base = done;
        if (!rc)
            rc = cmp_replay_run(syn, st->plan.fps, st->plan.nfp, &o2);
        for (size_t i = 0; !rc && i < syn->n_records; i++) {
            const msp_record_cmp_t *r = &syn->records[i];
            if (r->replay == MSP_RV_NONE)
                continue;
            if (r->replay == MSP_RV_UNFINISHED) {
                st->ran_out = 1;
                if (!st->unfinished_note && r->replay_note &&
                    !(st->unfinished_note = strdup(r->replay_note)))
                    rc = cmp_oom();
            }
            cmp_outcome_t *nv = msp_grow(st->out, &st->cap_out, st->n_out, sizeof *nv, 256);
            if (!nv) {
                rc = cmp_oom();
                break;
            }
            st->out = nv;
            int oom = 0;
            st->out[st->n_out++] = (cmp_outcome_t){st->heap.v[i].pair, st->heap.v[i].rec,
                                                   r->replay, r->replay_err, r->replay_ref,
                                                   cmp_dup(r->replay_note, &oom)};
            if (oom)
                rc = cmp_oom();
        }
        if (!rc && syn->replay_unavailable && !st->replay_unavailable &&
            !(st->replay_unavailable = strdup(syn->replay_unavailable)))
            rc = cmp_oom();
        int stop = syn->replay_unavailable || st->ran_out;
        msp_compare_result_free(syn);
        st->last = worst;
        done += nb;
        if (stop)
            break;
    }
    if (!rc && done < st->n_cands && !st->replay_unavailable) {
        /* the budget ended replay: every candidate after it says so */
        st->ran_out = 1;
        if (!st->unfinished_note &&
            !(st->unfinished_note = msp_asprintf("not replayed: the replay budget of %g s ran "
                                                 "out", o->replay_budget)))
            rc = cmp_oom();
    }
    st->replay_seconds = cmp_now() - t0;
    free(st->heap.v);
    st->heap.v = NULL;
    return rc;
}

static int cmp_outcome_order(const void *x, const void *y)
{
    const cmp_outcome_t *a = x, *b = y;
    if (a->pair != b->pair)
        return a->pair < b->pair ? -1 : 1;
    return a->rec < b->rec ? -1 : a->rec > b->rec;
}

/* Replay's answers onto part (pair i of this process's spool). */
static msp_err cmp_apply_outcomes(cmp_stream_t *st, size_t pair, msp_compare_result_t *part)
{
    size_t lo = 0, hi = st->n_out;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (st->out[mid].pair < pair)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t k = lo; k < st->n_out && st->out[k].pair == pair; k++) {
        const cmp_outcome_t *oc = &st->out[k];
        if (oc->rec >= part->n_records)
            return msp_fail(MSP_ERR_INTERNAL, "compare: replay's answer names no record");
        msp_record_cmp_t *r = &part->records[oc->rec];
        r->replay = oc->replay;
        r->replay_err = oc->err;
        r->replay_ref = oc->ref;
        free(r->replay_note);
        r->replay_note = oc->note ? strdup(oc->note) : NULL;
        if (oc->note && !r->replay_note)
            return cmp_oom();
    }
    if (!st->ran_out)
        return MSP_OK;
    for (size_t r = 0; r < part->n_records; r++) {
        msp_record_cmp_t *rec = &part->records[r];
        cmp_cand_t c = {0.0, pair, r};
        if (rec->replay != MSP_RV_NONE || !cmp_replay_choose(rec, st->o, &c.prio) ||
            !cmp_cand_before(&st->last, &c))
            continue;
        rec->replay = MSP_RV_UNFINISHED;
        if (!(rec->replay_note = strdup(st->unfinished_note)))
            return cmp_oom();
    }
    return MSP_OK;
}

/* Pair i as phase B needs it: replay's answers applied. */
static msp_err cmp_local_part(cmp_stream_t *st, size_t i, unsigned char **buf, size_t *len)
{
    msp_compare_result_t *part = NULL;
    msp_err rc = cmp_spool_get(st->a, st->a_index[i], &part);
    if (!rc)
        rc = cmp_apply_outcomes(st, i, part);
    if (!rc)
        rc = cmp_part_pack(part, buf, len);
    msp_compare_result_free(part);
    return rc;
}

/* ---- phase B, on process 0 ----------------------------------------------------- */

typedef struct cmp_prev {
    int64_t rank, step;
    double worst;
    double opt; /* the worst parameter error its optimizer records wrote (cmp_module_params) */
} cmp_prev_t;

struct cmp_finish {
    msp_compare_tree_t *t;
    msp_compare_result_t *head;
    size_t cap_rec, cap_ten, cap_sus, cap_ranks;
    size_t *head_rec_global, *head_ten_global; /* per head copy */
    int *tiers;                                /* per head suspect */
    cmp_comm_set_t comm;
    cmp_prev_t *prev;                          /* per rank: its last step with records */
    size_t n_prev, cap_prev;
    int top;
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
static msp_err cmp_finish_part(cmp_finish_t *f, msp_compare_result_t *part)
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
        /* cmp_rank_suspects's tiers: gaps from ratios alone, records their own */
        tv[h->n_suspects] = s->is_gap ? 1 : part->records[s->record].tier;
        h->suspects[h->n_suspects++] = c;
    }
    free(copy_of);
    if (!rc)
        rc = cmp_comm_collect(&f->comm, part);
    if (!rc)
        rc = cmp_rank_stats_add(h, &f->cap_ranks, part);
    if (!rc && part->n_records) {
        /* the rank's worst output error of this step, for its next step */
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
        if (pv)
            *pv = (cmp_prev_t){part->records[0].rank, part->records[0].step, worst,
                               opt > 0.0 ? opt : pv->opt};
    }
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
        switch (r->replay) {
        case MSP_RV_INTRODUCED: h->replay_introduced++; break;
        case MSP_RV_INHERITED: h->replay_inherited++; break;
        case MSP_RV_SKIPPED: h->replay_skipped++; break;
        case MSP_RV_UNFINISHED: h->replay_unfinished++; break;
        default: break;
        }
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
    if (!rb || !tb || !pr || !ps)
        return cmp_oom();
    t->rec_base[t->n_parts] = t->n_records;
    t->ten_base[t->n_parts] = t->n_tensors;
    t->part_rank[t->n_parts] = part->n_records ? part->records[0].rank : -1;
    t->part_step[t->n_parts] = part->n_records ? part->records[0].step : -1;
    t->n_parts++;
    t->n_records += part->n_records;
    t->n_tensors += part->n_tensors;
    return cmp_spool_put(t->spool, part);
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
static msp_err cmp_finish_tree(cmp_finish_t *f)
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
                                   h->records[i].is_root_cause, NULL};
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

/* ---- messages between processes ------------------------------------------------ */

/* A process's outcome before the gather: its status, replay's summary, and
 * its error message. */
static msp_err cmp_agree(const msp_compare_net_t *net, msp_err mine, cmp_stream_t *st,
                         msp_compare_result_t *head)
{
    if (!net || net->size <= 1)
        return mine;
    const char *msg = mine ? msp_last_error() : "";
    char *line = msp_asprintf("%d %zu %.9g\n%s", (int)mine, st->n_cands, st->replay_seconds,
                              msg ? msg : "");
    size_t *lens = calloc((size_t)net->size, sizeof *lens);
    char *all = NULL;
    msp_err rc = line && lens ? net->allgather(net->ud, line, strlen(line), (void **)&all, lens)
                              : cmp_oom();
    free(line);
    msp_err first = MSP_OK;
    char *first_msg = NULL;
    size_t at = 0;
    for (int p = 0; !rc && p < net->size; p++) {
        char *s = all + at;
        size_t l = lens[p];
        at += l;
        int code = 0;
        size_t cands = 0;
        double secs = 0;
        if (sscanf(s, "%d %zu %lg", &code, &cands, &secs) < 3)
            continue;
        if (head) {
            head->replay_candidates += cands;
            head->replay_seconds = fmax(head->replay_seconds, secs);
        }
        if (code && !first) {
            first = (msp_err)code;
            char *nl = memchr(s, '\n', l);
            first_msg = nl ? msp_asprintf("process %d: %.*s", p, (int)(s + l - nl - 1), nl + 1)
                           : NULL;
        }
    }
    free(all);
    free(lens);
    if (rc) {
        free(first_msg);
        return rc;
    }
    if (first) {
        msp_err e = msp_fail(first, "%s", first_msg ? first_msg : "compare failed");
        free(first_msg);
        return e;
    }
    free(first_msg);
    return MSP_OK;
}

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
    free(t);
}

msp_err msp_compare_tree_whole(const msp_compare_tree_t *t, size_t max_records,
                               msp_compare_result_t **out)
{
    *out = NULL;
    if (!t || !t->is_root || !t->head || t->n_records > max_records)
        return MSP_OK;
    const msp_compare_result_t *h = t->head;
    msp_compare_result_t *w = cmp_result_new();
    msp_err rc = w ? MSP_OK : cmp_oom();
    if (!rc && (!(w->records = calloc(t->n_records + 1, sizeof *w->records)) ||
                !(w->tensors = calloc(t->n_tensors + 1, sizeof *w->tensors)) ||
                !(w->suspects = calloc(h->n_suspects + 1, sizeof *w->suspects))))
        rc = cmp_oom();
    for (size_t i = 0; !rc && i < t->n_parts; i++) {
        msp_compare_result_t *p = NULL;
        if ((rc = cmp_tree_load(t, i, &p)))
            break;
        size_t base = w->n_tensors;
        for (size_t k = 0; !rc && k < p->n_tensors && w->n_tensors < t->n_tensors; k++)
            if (!(rc = cmp_copy_tensor(&w->tensors[w->n_tensors], &p->tensors[k])))
                w->n_tensors++;
        for (size_t r = 0; !rc && r < p->n_records && w->n_records < t->n_records; r++) {
            msp_record_cmp_t *d = &w->records[w->n_records];
            if (!(rc = cmp_copy_record(d, &p->records[r], 0))) {
                d->first_tensor = base + p->records[r].first_tensor;
                w->n_records++;
            }
        }
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
    }
    if (rc) {
        msp_compare_result_free(w);
        return rc;
    }
    *out = w;
    return MSP_OK;
}

msp_err msp_compare_stream(const char *bench, const char *cmp, const msp_compare_opts_t *opts,
                           const msp_compare_net_t *net, msp_compare_tree_t **out)
{
    msp_compare_opts_t defaults;
    cmp_stream_t st;
    cmp_finish_t fin;
    msp_compare_tree_t *t = NULL;
    msp_err rc = MSP_OK;
    memset(&st, 0, sizeof st);
    memset(&fin, 0, sizeof fin);
    if (!out)
        return msp_fail(MSP_ERR_USAGE, "msp_compare_stream: out is NULL");
    *out = NULL;
    if (!bench || !cmp)
        return msp_fail(MSP_ERR_USAGE,
                        "compare: both a bench (-b) and a compare (-c) path are needed");
    if (!opts) {
        msp_compare_opts_default(&defaults);
        opts = &defaults;
    }
    if (net && net->size > 1 && (!net->allgather || !net->send || !net->recv))
        return msp_fail(MSP_ERR_USAGE, "msp_compare_stream: the network lacks an operation");
    int alone = !net || net->size <= 1;
    st.o = opts;
    st.net = net;
    st.me = alone ? 0 : net->rank;
    st.user_progress = opts->replay_progress;
    st.user_progress_ud = opts->replay_progress_ud;
    t = calloc(1, sizeof *t);
    if (!t)
        return cmp_oom();
    t->is_root = st.me == 0;
    t->root_tensor = -1;
    if (t->is_root && !(t->head = cmp_result_new())) {
        free(t);
        return cmp_oom();
    }
    rc = cmp_stream_plan(bench, cmp, net, &st.plan);
    /* alone and without replay, each pair is finished as soon as compared */
    int fused = alone && opts->replay == MSP_REPLAY_OFF;
    fin.t = t;
    fin.head = t->head;
    fin.top = opts->top;
    /* the steps and ranks one side lacks come first, as msp_compare_run lists them */
    for (size_t i = 0; !rc && t->is_root && i < st.plan.n_only; i++) {
        rc = cmp_line_push(&t->head->unpaired, &t->head->n_unpaired, st.plan.only[i]);
        /* a step/rank whose file cannot be read: the compare is incomplete */
        if (!rc && strstr(st.plan.only[i], " skipped: "))
            rc = cmp_line_push(&t->head->unread, &t->head->n_unread, st.plan.only[i]);
    }
    if (!rc && fused)
        rc = cmp_spool_open(opts->spool_dir, &t->spool);
    if (!rc)
        rc = cmp_phase_a(&st, fused ? &fin : NULL);
    if (!rc && !fused)
        rc = cmp_phase_r(&st);
    if (alone && t->head) {
        t->head->replay_candidates = st.n_cands;
        t->head->replay_seconds = st.replay_seconds;
    }
    /* every process learns whether all got this far, and what replay did */
    rc = cmp_agree(net, rc, &st, t->head);
    if (!rc && st.n_out > 1)
        qsort(st.out, st.n_out, sizeof *st.out, cmp_outcome_order);
    if (!rc && t->is_root) {
        t->n_procs = alone ? 1 : net->size;
        if (!(t->proc_pairs = calloc((size_t)t->n_procs, sizeof *t->proc_pairs)))
            rc = cmp_oom();
        for (size_t i = 0; !rc && i < st.plan.nfp; i++)
            if (st.plan.owner[i] >= 0 && st.plan.owner[i] < t->n_procs)
                t->proc_pairs[st.plan.owner[i]]++;
        if (!rc && st.replay_unavailable &&
            !(t->head->replay_unavailable = strdup(st.replay_unavailable)))
            rc = cmp_oom();
        if (!rc && !fused)
            rc = cmp_spool_open(opts->spool_dir, &t->spool);
        for (size_t i = 0; i < st.plan.nfp && !fused; i++) {
            unsigned char *buf = NULL;
            size_t len = 0;
            msp_err r2 = MSP_OK;
            int owner = st.plan.owner[i];
            /* a pair of another process comes over the network; after an
             * error the rest is still received, so no sender waits forever */
            if (owner == st.me) {
                if (st.a_index[i] == SIZE_MAX)
                    continue;
                if (!rc)
                    r2 = cmp_local_part(&st, i, &buf, &len);
            } else {
                void *p = NULL;
                r2 = net->recv(net->ud, owner, &p, &len);
                buf = p;
            }
            msp_compare_result_t *part = NULL;
            if (!rc && !r2 && len == 0)
                r2 = msp_fail(MSP_ERR_IO, "compare: process %d could not send step %lld rank "
                              "%lld", owner, (long long)st.plan.fps[i].step,
                              (long long)st.plan.fps[i].rank);
            if (!rc && !r2)
                r2 = cmp_part_unpack(buf, len, &part);
            if (!rc && !r2)
                r2 = cmp_finish_part(&fin, part);
            msp_compare_result_free(part);
            free(buf);
            if (!rc)
                rc = r2;
        }
        if (!rc && !t->head->n_pairs)
            rc = msp_fail(MSP_ERR_MISMATCH, "bench %s and compare %s share no readable "
                          "step/rank: nothing to compare", bench, cmp);
        t->head->replay_done = t->head->replay_introduced + t->head->replay_inherited;
        t->head->n_failed = t->n_failed;
        if (!rc)
            rc = cmp_finish_tree(&fin);
    } else if (!rc) {
        /* send this process's pairs to process 0, in pair order */
        for (size_t i = 0; i < st.plan.nfp; i++) {
            if (st.plan.owner[i] != st.me || st.a_index[i] == SIZE_MAX)
                continue;
            unsigned char *buf = NULL;
            size_t len = 0;
            msp_err r2 = rc ? rc : cmp_local_part(&st, i, &buf, &len);
            if (r2 && !rc)
                rc = r2;
            /* an empty message tells process 0 this pair is lost */
            msp_err s2 = net->send(net->ud, 0, r2 ? "" : (const char *)buf, r2 ? 0 : len);
            free(buf);
            if (s2 && !rc)
                rc = s2;
        }
    }
    cmp_plan_free(&st.plan);
    cmp_spool_close(st.a);
    free(st.a_index);
    free(st.heap.v);
    for (size_t i = 0; i < st.n_out; i++)
        free(st.out[i].note);
    free(st.out);
    free(st.unfinished_note);
    free(st.replay_unavailable);
    cmp_comm_set_free(&fin.comm);
    free(fin.head_rec_global);
    free(fin.head_ten_global);
    free(fin.tiers);
    free(fin.prev);
    if (rc) {
        msp_compare_tree_free(t);
        return rc;
    }
    *out = t;
    return MSP_OK;
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

void cmp_tree_part_info(const msp_compare_tree_t *t, size_t i, size_t *rec_base,
                        size_t *ten_base, int64_t *step, int64_t *rank)
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
    cmp_mark_t key = {record, 0, 0, NULL};
    return bsearch(&key, t->marks, t->n_marks, sizeof *t->marks, cmp_mark_order);
}

const char *cmp_tree_reason(const msp_compare_tree_t *t, size_t record)
{
    const cmp_mark_t *m = cmp_tree_mark(t, record);
    return m ? m->reason : NULL;
}

msp_err cmp_tree_load(const msp_compare_tree_t *t, size_t i, msp_compare_result_t **part)
{
    msp_err rc = cmp_spool_get(t->spool, i, part);
    if (rc)
        return rc;
    msp_compare_result_t *p = *part;
    for (size_t r = 0; r < p->n_records; r++) {
        const cmp_mark_t *m = cmp_tree_mark(t, t->rec_base[i] + r);
        if (m) {
            p->records[r].suspect_rank = m->suspect_rank;
            p->records[r].is_root_cause = m->is_root_cause;
        }
    }
    return MSP_OK;
}
