/* msp_compare_stream: the compare of a whole dump tree with one step x rank
 * pair in memory at a time, alone or spread over the processes of an MPI
 * launch (msprobe-compare(1), SCALE and MPI).
 *
 * It is the compare (msp_compare_run, at the end of this file, is it made
 * one result), in phases that each need one pair at most:
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
 * rest; its result is the single-process compare's, row for row. Phase B
 * and the tree it fills, which the reports read: cmp_tree.c. */
#include "cmp_internal.h"
#include "cmp_job.h"
#include "cmp_worker.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Replay candidates held at once (copies of their records); past it replay
 * goes on in further batches, found by another read of the spool. */
#define CMP_REPLAY_BATCH ((size_t)1 << 16)

static double cmp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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
    cmp_spool_t *a;  /* phase A: this process's parts, in pair order */
    size_t *a_index; /* per pair: its index in a, or SIZE_MAX when not ours */
    /* replay */
    cmp_heap_t heap;
    size_t n_cands;       /* in the heap: the worker's */
    size_t n_stats_cands; /* decided in phase A: the compare side holds statistics only */
    int spooling;         /* a pair had a candidate: it and every later one wait for phase R */
    size_t n_finished;    /* pairs phase A finished (fin) */
    cmp_outcome_t *out;
    size_t n_out, cap_out;
    int ran_out;           /* the budget ended replay before every candidate */
    cmp_cand_t last;       /* the last candidate replay reached */
    char *unfinished_note; /* what a candidate left by the budget says */
    double replay_seconds;
    char *replay_unavailable;
    cmp_worker_t *worker; /* replay's, asked for before phase A (cmp_worker_prestart) */
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

/* Whether replay has nothing to call for record r of part: its compare side
 * holds tensors, none of them with data (a statistics dump), as
 * cmp_replay.c finds from the file when it meets such a record. */
static int cmp_stats_only(const msp_compare_result_t *part, const msp_record_cmp_t *r)
{
    size_t seen = 0;
    for (size_t k = r->first_tensor; k < r->first_tensor + r->n_tensors; k++) {
        const msp_tensor_cmp_t *t = &part->tensors[k];
        if (t->npu_data_name)
            return 0;
        seen += t->npu_name != NULL;
    }
    return seen > 0;
}

/* Replay's candidates of part (pair i): those it can decide now (statistics
 * only) are marked, the others go on the heap. */
static msp_err cmp_part_cands(cmp_stream_t *st, msp_compare_result_t *part, size_t i)
{
    for (size_t r = 0; st->heap.v && r < part->n_records; r++) {
        msp_record_cmp_t *rec = &part->records[r];
        cmp_cand_t c = {0.0, i, r};
        if (!cmp_replay_choose(rec, st->o, &c.prio))
            continue;
        if (!cmp_stats_only(part, rec)) {
            cmp_heap_add(&st->heap, &c);
            st->n_cands++;
            continue;
        }
        rec->replay = MSP_RV_SKIPPED;
        if (!(rec->replay_note = strdup(CMP_JOB_STATS_ONLY)))
            return cmp_oom();
        st->n_stats_cands++;
    }
    return MSP_OK;
}

/* Phase A for the pairs this process owns. With fin (one process), each
 * pair goes on to phase B at once until one has a candidate the worker must
 * replay: that one and every later one are spooled for phase R (no
 * candidate at all, as without replay or on statistics dumps: no spool). */
static msp_err cmp_phase_a(cmp_stream_t *st, cmp_finish_t *fin)
{
    msp_err rc = MSP_OK;
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
        if (!rc) /* while the pair's files are still open */
            rc = cmp_engine_sample(eng, part);
        if (!rc)
            rc = cmp_part_cands(st, part, i);
        st->spooling |= !fin || st->n_cands > 0;
        if (!rc && !st->spooling) {
            rc = cmp_finish_part(fin, part);
            part = NULL; /* the tree's */
            st->n_finished++;
        } else if (!rc) {
            if (!st->a)
                rc = cmp_spool_open(st->o->spool_dir, &st->a);
            if (!rc) {
                st->a_index[i] = cmp_spool_count(st->a);
                rc = cmp_spool_give(st->a, part);
                part = NULL; /* the spool's */
            }
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
            rc = cmp_replay_run(syn, st->plan.fps, st->plan.nfp, &o2, st->worker);
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
            st->out[st->n_out++] = (cmp_outcome_t){
                st->heap.v[i].pair, st->heap.v[i].rec, r->replay,
                r->replay_err,      r->replay_ref,     cmp_dup(r->replay_note, &oom)};
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
                                                 "out",
                                                 o->replay_budget)))
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

struct cmp_pair_key {
    const cmp_stream_t *st;
    size_t pair;
};

static int cmp_outcome_before(const void *ctx, size_t i)
{
    const struct cmp_pair_key *k = ctx;
    return k->st->out[i].pair < k->pair;
}

/* Replay's answers onto part (pair i of this process's spool). */
static msp_err cmp_apply_outcomes(cmp_stream_t *st, size_t pair, msp_compare_result_t *part)
{
    struct cmp_pair_key key = {st, pair};
    size_t lo = msp_lower_bound(st->n_out, cmp_outcome_before, &key);
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
static msp_err cmp_local_result(cmp_stream_t *st, size_t i, msp_compare_result_t **part)
{
    msp_err rc = cmp_spool_get(st->a, st->a_index[i], part);
    if (!rc)
        rc = cmp_apply_outcomes(st, i, *part);
    return rc;
}

/* The same, packed for process 0. */
static msp_err cmp_local_part(cmp_stream_t *st, size_t i, unsigned char **buf, size_t *len)
{
    msp_compare_result_t *part = NULL;
    msp_err rc = cmp_local_result(st, i, &part);
    if (!rc)
        rc = cmp_part_pack(part, buf, len);
    msp_compare_result_free(part);
    return rc;
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
    char *line = msp_asprintf("%d %zu %.9g\n%s", (int)mine, st->n_cands + st->n_stats_cands,
                              st->replay_seconds, msg ? msg : "");
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

/* ---- entry point ---------------------------------------------------------- */

/* Process 0 after phase R: every pair's part, its own or received in pair
 * order, finished into the tree (phase B; the pairs before the first with a
 * candidate for the worker, alone: already done in phase A). */
static msp_err cmp_gather(cmp_stream_t *st, msp_compare_tree_t *t, cmp_finish_t *fin,
                          const char *bench, const char *cmp)
{
    const msp_compare_opts_t *opts = st->o;
    const msp_compare_net_t *net = st->net;
    int alone = !net || net->size <= 1;
    msp_err rc = MSP_OK;
    t->n_procs = alone ? 1 : net->size;
    if (!(t->proc_pairs = calloc((size_t)t->n_procs, sizeof *t->proc_pairs)))
        rc = cmp_oom();
    for (size_t i = 0; !rc && i < st->plan.nfp; i++)
        if (st->plan.owner[i] >= 0 && st->plan.owner[i] < t->n_procs)
            t->proc_pairs[st->plan.owner[i]]++;
    if (!rc && st->replay_unavailable &&
        !(t->head->replay_unavailable = strdup(st->replay_unavailable)))
        rc = cmp_oom();
    if (!rc && !t->spool)
        rc = cmp_spool_open(opts->spool_dir, &t->spool);
    /* the pairs phase A spooled (those it finished have no index) */
    for (size_t i = 0; i < st->plan.nfp; i++) {
        unsigned char *buf = NULL;
        size_t len = 0;
        msp_err r2 = MSP_OK;
        int owner = st->plan.owner[i];
        msp_compare_result_t *part = NULL;
        /* a pair of another process comes over the network; after an
         * error the rest is still received, so no sender waits forever */
        if (owner == st->me) {
            if (st->a_index[i] == SIZE_MAX)
                continue;
            if (!rc)
                r2 = cmp_local_result(st, i, &part);
        } else {
            void *p = NULL;
            r2 = net->recv(net->ud, owner, &p, &len);
            buf = p;
        }
        if (!rc && !r2 && !part && len == 0)
            r2 = msp_fail(MSP_ERR_IO,
                          "compare: process %d could not send step %lld rank "
                          "%lld",
                          owner, (long long)st->plan.fps[i].step, (long long)st->plan.fps[i].rank);
        if (!rc && !r2 && !part)
            r2 = cmp_part_unpack(buf, len, &part);
        if (!rc && !r2) {
            r2 = cmp_finish_part(fin, part);
            part = NULL; /* the tree's */
        }
        msp_compare_result_free(part);
        free(buf);
        if (!rc)
            rc = r2;
    }
    if (!rc && !t->head->n_pairs)
        rc = msp_fail(MSP_ERR_MISMATCH,
                      "bench %s and compare %s share no readable "
                      "step/rank: nothing to compare",
                      bench, cmp);
    t->head->replay_done = t->head->replay_introduced + t->head->replay_inherited;
    t->head->n_failed = t->n_failed;
    if (!rc)
        rc = cmp_finish_tree(fin);
    return rc;
}

/* Every other process after phase R: its pairs to process 0, in pair order
 * (an empty message for a pair it lost, so that no receiver waits forever). */
static msp_err cmp_send_parts(cmp_stream_t *st)
{
    const msp_compare_net_t *net = st->net;
    msp_err rc = MSP_OK;
    /* send this process's pairs to process 0, in pair order */
    for (size_t i = 0; i < st->plan.nfp; i++) {
        if (st->plan.owner[i] != st->me || st->a_index[i] == SIZE_MAX)
            continue;
        unsigned char *buf = NULL;
        size_t len = 0;
        msp_err r2 = rc ? rc : cmp_local_part(st, i, &buf, &len);
        if (r2 && !rc)
            rc = r2;
        /* an empty message tells process 0 this pair is lost */
        msp_err s2 = net->send(net->ud, 0, r2 ? "" : (const char *)buf, r2 ? 0 : len);
        free(buf);
        if (s2 && !rc)
            rc = s2;
    }
    return rc;
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
    /* alone, each pair is finished as soon as compared until one has a
     * record for the worker to replay (cmp_phase_a) */
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
    if (!rc && alone)
        rc = cmp_spool_open(opts->spool_dir, &t->spool);
    /* a kept worker forks replay's session while phase A computes metrics */
    if (!rc && opts->replay != MSP_REPLAY_OFF && (st.worker = malloc(sizeof *st.worker)))
        cmp_worker_prestart(st.worker, cmp_worker_python(opts->replay_python));
    if (!rc)
        rc = cmp_phase_a(&st, alone ? &fin : NULL);
    if (!rc && alone)
        msp_log(MSP_LOG_INFO,
                "compare: %zu of %zu pairs finished as compared, %zu spooled for replay "
                "(replay's candidates: %zu for the worker, %zu decided without it)",
                st.n_finished, st.plan.nfp, cmp_spool_count(st.a), st.n_cands, st.n_stats_cands);
    if (!rc)
        rc = cmp_phase_r(&st);
    if (st.worker) { /* ended now; the tree's free awaits its end (after the reports) */
        cmp_worker_release(st.worker);
        t->worker = st.worker;
        st.worker = NULL;
    }
    if (alone && t->head) {
        t->head->replay_candidates = st.n_cands + st.n_stats_cands;
        t->head->replay_seconds = st.replay_seconds;
    }
    /* every process learns whether all got this far, and what replay did */
    rc = cmp_agree(net, rc, &st, t->head);
    if (!rc && st.n_out > 1)
        qsort(st.out, st.n_out, sizeof *st.out, cmp_outcome_order);
    if (!rc && t->is_root)
        rc = cmp_gather(&st, t, &fin, bench, cmp);
    else if (!rc)
        rc = cmp_send_parts(&st);
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

msp_err msp_compare_run(const char *bench, const char *cmp, const msp_compare_opts_t *opts,
                        msp_compare_result_t **out)
{
    if (!out)
        return msp_fail(MSP_ERR_USAGE, "msp_compare_run: out is NULL");
    *out = NULL;
    /* one pipeline: the streamed compare of one process, its spool in memory
     * unless a directory is named, then its tree as one result */
    msp_compare_opts_t o = opts ? *opts : (msp_compare_opts_t){0};
    if (!opts)
        msp_compare_opts_default(&o);
    if (!o.spool_dir)
        o.spool_dir = cmp_spool_memory;
    msp_compare_tree_t *t = NULL;
    msp_err rc = msp_compare_stream(bench, cmp, &o, NULL, &t);
    if (!rc && !(rc = msp_compare_tree_whole(t, SIZE_MAX, out)) && !*out)
        rc = msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    msp_compare_tree_free(t);
    return rc;
}
