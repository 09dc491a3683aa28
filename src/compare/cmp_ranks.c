/* The ranks as one (msprobe-compare(1), RANKS): after each rank's suspects
 * are ranked on their own (cmp_rank_suspects), the communication records line
 * the ranks up. A collective (or a recv) whose output error is explained by
 * the error another rank brought into it did not make that error: the rank
 * inherited it through that record. Such a suspect is annotated with the rank
 * it came from and moves behind every suspect of its step that did not come
 * in that way (a stable reorder: everything else keeps the order it had). Each
 * rank then gets its origin: the first of its own suspects, or the first
 * record through which error came in, whichever ran first.
 *
 * One collective is the records of one step with the same name (API and call
 * index) and the same group on each rank of the group; a recv is the k-th
 * send from its peer to it. What a rank brings into a collective is its own
 * worst input error: every member's for the reducing and gathering ones, the
 * root's for broadcast and scatter, the sender's for recv.
 *
 * The pass reads only the suspects, the records they name and the
 * communication records, so a streamed compare (cmp_tree.c) runs it on
 * what it kept of each pair. */
#include "cmp_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void cmp_comm_set_free(cmp_comm_set_t *cs)
{
    if (!cs)
        return;
    for (size_t i = 0; i < cs->n; i++) {
        free(cs->v[i].name);
        free(cs->v[i].group);
    }
    free(cs->v);
    memset(cs, 0, sizeof *cs);
}

static const char *cmp_comm_api(const char *name)
{
    /* "Distributed.all_reduce.3.forward" -> "all_reduce.3.forward" */
    return strncmp(name, "Distributed.", 12) == 0 ? name + 12 : NULL;
}

static int cmp_api_is(const char *api, const char *leaf)
{
    size_t n = strlen(leaf);
    return strncmp(api, leaf, n) == 0 && api[n] == '.';
}

msp_err cmp_comm_collect(cmp_comm_set_t *cs, const msp_compare_result_t *part)
{
    for (size_t i = 0; i < part->n_records; i++) {
        const msp_record_cmp_t *r = &part->records[i];
        if (!cmp_comm_api(r->name) || !cmp_is_forward(r->name))
            continue;
        cmp_comm_t *nv = msp_grow(cs->v, &cs->cap, cs->n, sizeof *nv, 64);
        if (!nv)
            return msp_fail(MSP_ERR_NOMEM, "compare: out of memory for communication records");
        cs->v = nv;
        cmp_comm_t *c = &cs->v[cs->n];
        memset(c, 0, sizeof *c);
        c->step = r->step;
        c->rank = r->rank;
        c->order = r->order;
        c->peer = r->comm_peer;
        c->in_err = r->in_err;
        c->out_err = r->out_err;
        c->floor = r->floor;
        c->name = strdup(r->name);
        c->group = r->comm_group ? strdup(r->comm_group) : NULL;
        if (!c->name || (r->comm_group && !c->group)) {
            free(c->name);
            free(c->group);
            return msp_fail(MSP_ERR_NOMEM, "compare: out of memory for communication records");
        }
        cs->n++;
    }
    return MSP_OK;
}

struct cmp_rank_key {
    const msp_compare_result_t *res;
    int64_t rank;
};

static int cmp_rank_before(const void *ctx, size_t i)
{
    const struct cmp_rank_key *k = ctx;
    return k->res->ranks[i].rank < k->rank;
}

/* Where rank is, or would go, in res->ranks (sorted by rank). */
static size_t cmp_rank_place(const msp_compare_result_t *res, int64_t rank)
{
    struct cmp_rank_key key = {res, rank};
    return msp_lower_bound(res->n_ranks, cmp_rank_before, &key);
}

msp_err cmp_rank_stats_add(msp_compare_result_t *res, size_t *cap, const msp_compare_result_t *part)
{
    int64_t last_step = INT64_MIN, last_rank = INT64_MIN;
    for (size_t i = 0; i < part->n_records; i++) {
        const msp_record_cmp_t *r = &part->records[i];
        /* kept sorted by rank: find its place */
        size_t lo = cmp_rank_place(res, r->rank);
        if (lo == res->n_ranks || res->ranks[lo].rank != r->rank) {
            msp_rank_summary_t *nv = msp_grow(res->ranks, cap, res->n_ranks, sizeof *nv, 8);
            if (!nv)
                return msp_fail(MSP_ERR_NOMEM, "compare: out of memory for ranks");
            res->ranks = nv;
            memmove(&nv[lo + 1], &nv[lo], (res->n_ranks - lo) * sizeof *nv);
            memset(&nv[lo], 0, sizeof nv[lo]);
            nv[lo].rank = r->rank;
            nv[lo].worst_cosine = NAN;
            nv[lo].first_suspect = -1;
            nv[lo].at_step = nv[lo].at_order = -1;
            res->n_ranks++;
        }
        msp_rank_summary_t *k = &res->ranks[lo];
        if (r->step != last_step || r->rank != last_rank) {
            /* records come by step, rank, order: a new (step, rank) is a pair */
            k->pairs++;
            last_step = r->step;
            last_rank = r->rank;
        }
        k->records++;
        k->tensors += r->n_tensors;
        k->failing += r->verdict != MSP_VERDICT_YES;
        if (!isnan(r->worst_cosine))
            k->worst_cosine = isnan(k->worst_cosine) ? r->worst_cosine
                                                     : fmin(k->worst_cosine, r->worst_cosine);
    }
    return MSP_OK;
}

/* ---- ranks of a group ------------------------------------------------------- */

/* Whether rank is in "0-3,8,10-11". */
static int cmp_group_has(const char *g, int64_t rank)
{
    while (g && *g) {
        char *end;
        long long a = strtoll(g, &end, 10), b = a;
        if (end == g)
            return 0;
        if (*end == '-') {
            const char *p = end + 1;
            b = strtoll(p, &end, 10);
            if (end == p)
                return 0;
        }
        if (rank >= a && rank <= b)
            return 1;
        g = *end == ',' ? end + 1 : NULL;
    }
    return 0;
}

/* ---- matching one collective across ranks --------------------------------------- */

static int cmp_str_cmp(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "");
}

/* By step, name, group, rank: the members of one collective sit together. */
static int cmp_comm_coll_order(const void *x, const void *y)
{
    const cmp_comm_t *a = *(const cmp_comm_t *const *)x, *b = *(const cmp_comm_t *const *)y;
    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    int c = strcmp(a->name, b->name);
    if (c)
        return c;
    if ((c = cmp_str_cmp(a->group, b->group)))
        return c;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

/* Point-to-point calls by step, (sender, receiver), kind, order: the k-th
 * send from a to b sits at the same position as the k-th recv on b from a. */
typedef struct cmp_p2p {
    const cmp_comm_t *c;
    int64_t from, to;
    int is_recv;
} cmp_p2p_t;

static int cmp_p2p_order(const void *x, const void *y)
{
    const cmp_p2p_t *a = x, *b = y;
    if (a->c->step != b->c->step)
        return a->c->step < b->c->step ? -1 : 1;
    if (a->from != b->from)
        return a->from < b->from ? -1 : 1;
    if (a->to != b->to)
        return a->to < b->to ? -1 : 1;
    if (a->is_recv != b->is_recv)
        return a->is_recv - b->is_recv;
    return a->c->order < b->c->order ? -1 : a->c->order > b->c->order;
}

static double cmp_err0(double e)
{
    return isnan(e) ? 0.0 : e;
}

/* Where error came into a communication record from another rank. */
typedef struct cmp_inflow {
    const cmp_comm_t *c; /* the receiving rank's record */
    int64_t from;        /* the rank that brought it */
    double brought;      /* that rank's input error */
} cmp_inflow_t;

static int cmp_inflow_order(const void *x, const void *y)
{
    const cmp_inflow_t *a = x, *b = y;
    if (a->c->rank != b->c->rank)
        return a->c->rank < b->c->rank ? -1 : 1;
    if (a->c->step != b->c->step)
        return a->c->step < b->c->step ? -1 : 1;
    return a->c->order < b->c->order ? -1 : a->c->order > b->c->order;
}

/* An output error explained by what another rank brought in: more than the
 * record's own input error, and within CMP_AMPLIFY of the output's. */
static int cmp_explains_inflow(const cmp_comm_t *c, double own, double brought)
{
    return !isnan(c->out_err) && c->out_err > c->floor && brought > own && brought > 0.0 &&
           CMP_AMPLIFY * brought >= c->out_err;
}

static msp_err cmp_find_inflows(const cmp_comm_set_t *cs, cmp_inflow_t **out, size_t *n_out)
{
    msp_err rc = MSP_OK;
    const cmp_comm_t **v = calloc(cs->n + 1, sizeof *v);
    cmp_p2p_t *pp = calloc(cs->n + 1, sizeof *pp);
    cmp_inflow_t *in = calloc(cs->n + 1, sizeof *in);
    size_t np = 0, ni = 0;
    if (!v || !pp || !in) {
        rc = msp_fail(MSP_ERR_NOMEM, "compare: out of memory for communication records");
        goto cleanup;
    }
    for (size_t i = 0; i < cs->n; i++)
        v[i] = &cs->v[i];
    qsort(v, cs->n, sizeof *v, cmp_comm_coll_order);
    for (size_t i = 0; i < cs->n;) {
        size_t j = i;
        while (j < cs->n && v[j]->step == v[i]->step && !strcmp(v[j]->name, v[i]->name) &&
               !cmp_str_cmp(v[j]->group, v[i]->group))
            j++;
        const char *api = cmp_comm_api(v[i]->name);
        int rooted = cmp_api_is(api, "broadcast") || cmp_api_is(api, "scatter") ||
                     cmp_api_is(api, "broadcast_object_list");
        int p2p = cmp_api_is(api, "send") || cmp_api_is(api, "recv") || cmp_api_is(api, "isend") ||
                  cmp_api_is(api, "irecv");
        int objects = cmp_api_is(api, "all_gather_object") ||
                      cmp_api_is(api, "broadcast_object_list");
        for (size_t k = i; k < j && !p2p && !objects; k++) {
            const cmp_comm_t *c = v[k];
            double own = cmp_err0(c->in_err), brought = 0.0;
            int64_t from = -1;
            for (size_t m = i; m < j; m++) {
                const cmp_comm_t *o = v[m];
                if (o == c || (c->group && !cmp_group_has(c->group, o->rank)))
                    continue;
                if (rooted && o->rank != c->peer)
                    continue;
                if (cmp_err0(o->in_err) > brought) {
                    brought = cmp_err0(o->in_err);
                    from = o->rank;
                }
            }
            if (rooted)
                own = c->rank == c->peer ? own : 0.0; /* a non-root's input is overwritten */
            if (from >= 0 && cmp_explains_inflow(c, own, brought))
                in[ni++] = (cmp_inflow_t){c, from, brought};
        }
        for (size_t k = i; k < j && p2p; k++) {
            const cmp_comm_t *c = v[k];
            if (c->peer < 0)
                continue;
            int recv = cmp_api_is(cmp_comm_api(c->name), "recv") ||
                       cmp_api_is(cmp_comm_api(c->name), "irecv");
            pp[np++] = (cmp_p2p_t){c, recv ? c->peer : c->rank, recv ? c->rank : c->peer, recv};
        }
        i = j;
    }
    qsort(pp, np, sizeof *pp, cmp_p2p_order);
    for (size_t i = 0; i < np;) {
        size_t j = i;
        while (j < np && pp[j].c->step == pp[i].c->step && pp[j].from == pp[i].from &&
               pp[j].to == pp[i].to)
            j++;
        size_t s = i, r = i;
        while (r < j && !pp[r].is_recv)
            r++;
        /* sends [s, r), recvs [r, j): the k-th of each belong together */
        for (size_t k = 0; s + k < r && r + k < j; k++) {
            const cmp_comm_t *send = pp[s + k].c, *recv = pp[r + k].c;
            double brought = cmp_err0(send->in_err);
            if (cmp_explains_inflow(recv, 0.0, brought))
                in[ni++] = (cmp_inflow_t){recv, send->rank, brought};
        }
        i = j;
    }
    qsort(in, ni, sizeof *in, cmp_inflow_order);
cleanup:
    free(v);
    free(pp);
    if (rc) {
        free(in);
        in = NULL;
        ni = 0;
    }
    *out = in;
    *n_out = ni;
    return rc;
}

/* The inflow at (step, rank, name), or NULL. */
static const cmp_inflow_t *cmp_inflow_at(const cmp_inflow_t *in, size_t n, int64_t step,
                                         int64_t rank, const char *name)
{
    for (size_t i = 0; i < n; i++) /* few: a communication record per collective call */
        if (in[i].c->step == step && in[i].c->rank == rank && !strcmp(in[i].c->name, name))
            return &in[i];
    return NULL;
}

static msp_rank_summary_t *cmp_rank_of(msp_compare_result_t *res, int64_t rank)
{
    size_t lo = cmp_rank_place(res, rank);
    return lo < res->n_ranks && res->ranks[lo].rank == rank ? &res->ranks[lo] : NULL;
}

static int cmp_before(int64_t s1, int64_t o1, int64_t s2, int64_t o2)
{
    return s1 != s2 ? s1 < s2 : o1 < o2;
}

msp_err cmp_ranks_order(msp_compare_result_t *res, const cmp_comm_set_t *cs, int top)
{
    cmp_inflow_t *in = NULL;
    size_t ni = 0;
    cmp_drop_nan_echoes(res); /* across steps: each pair dropped its own */
    msp_err rc = cmp_find_inflows(cs, &in, &ni);
    if (rc)
        return rc;
    msp_suspect_t *tmp = calloc(res->n_suspects + 1, sizeof *tmp);
    int64_t *from = calloc(res->n_suspects + 1, sizeof *from);
    int64_t *ftmp = calloc(res->n_suspects + 1, sizeof *ftmp);
    if (!tmp || !from || !ftmp) {
        free(in);
        free(tmp);
        free(from);
        free(ftmp);
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory for suspects");
    }
    for (size_t i = 0; i < res->n_suspects; i++)
        from[i] = res->suspect_from ? res->suspect_from[i] : -1;
    /* annotate the suspects through which error only came in */
    for (size_t i = 0; i < res->n_suspects && !rc; i++) {
        msp_suspect_t *s = &res->suspects[i];
        const msp_record_cmp_t *rec = &res->records[s->record];
        const cmp_inflow_t *f = s->is_gap ? NULL
                                          : cmp_inflow_at(in, ni, rec->step, rec->rank, rec->name);
        if (!f || from[i] >= 0)
            continue;
        char *reason = msp_asprintf("inherited from rank %lld through this call: rank %lld "
                                    "brought input error %.3g into it and its output error "
                                    "%.3g is within %gx of that",
                                    (long long)f->from, (long long)f->from, f->brought,
                                    f->c->out_err, CMP_AMPLIFY);
        if (!reason) {
            rc = msp_fail(MSP_ERR_NOMEM, "compare: out of memory for suspects");
            break;
        }
        free(s->reason);
        s->reason = reason;
        from[i] = f->from;
    }
    /* stable: what only came in from another rank goes after every suspect
     * of a rank's own, and is no suspect itself: it inherited its error (its
     * Error Origin says so, the suspects sheet keeps it with its From Rank),
     * and it is never the root, even when the rank that brought the error
     * has no suspect of its own (its error is its precision's, or below
     * every floor there) */
    size_t placed = 0, n_own = 0;
    for (int pass = 0; pass < 2 && !rc; pass++)
        for (size_t m = 0; m < res->n_suspects; m++)
            if ((from[m] >= 0) == pass) {
                ftmp[placed] = from[m];
                tmp[placed++] = res->suspects[m];
                n_own += !pass;
            }
    if (!rc && placed) {
        memcpy(res->suspects, tmp, placed * sizeof *tmp);
        memcpy(from, ftmp, placed * sizeof *ftmp);
    }
    free(tmp);
    free(ftmp);
    if (rc) {
        free(in);
        free(from);
        return rc;
    }
    free(res->suspect_from);
    res->suspect_from = from;
    /* marks and root, as cmp_rank_suspects sets them, on the new order */
    for (size_t i = 0; i < res->n_suspects; i++) {
        msp_record_cmp_t *rec = &res->records[res->suspects[i].record];
        rec->suspect_rank = 0;
        rec->is_root_cause = 0;
    }
    for (size_t i = 0; i < n_own && (top <= 0 || i < (size_t)top); i++) {
        msp_record_cmp_t *rec = &res->records[res->suspects[i].record];
        if (!rec->suspect_rank)
            rec->suspect_rank = (int)i + 1;
    }
    for (size_t i = n_own; i < res->n_suspects; i++)
        if (!res->suspects[i].is_gap)
            res->records[res->suspects[i].record].cause = MSP_CAUSE_INHERITED;
    res->root_record = res->root_tensor = -1;
    if (n_own) {
        res->root_record = res->suspects[0].record;
        res->root_tensor = res->suspects[0].tensor;
        res->records[res->root_record].is_root_cause = 1;
    }
    /* each rank's origin: its first own suspect or its first inflow */
    for (size_t i = 0; i < res->n_ranks; i++) {
        msp_rank_summary_t *k = &res->ranks[i];
        free(k->at);
        k->at = NULL;
        k->first_suspect = -1;
        k->origin = MSP_ORIGIN_NONE;
        k->at_step = k->at_order = -1;
    }
    for (size_t i = 0; i < res->n_suspects; i++) {
        const msp_suspect_t *s = &res->suspects[i];
        const msp_record_cmp_t *rec = &res->records[s->record];
        msp_rank_summary_t *k = cmp_rank_of(res, rec->rank);
        if (!k)
            continue;
        if (k->first_suspect < 0)
            k->first_suspect = (long)i;
        if (res->suspect_from[i] >= 0)
            continue;
        if (k->origin == MSP_ORIGIN_NONE ||
            cmp_before(rec->step, rec->order, k->at_step, k->at_order)) {
            k->origin = MSP_ORIGIN_INTRODUCED;
            k->at_step = rec->step;
            k->at_order = rec->order;
            k->from_rank = -1;
            free(k->at);
            k->at = strdup(rec->name);
        }
    }
    for (size_t i = 0; i < ni; i++) {
        msp_rank_summary_t *k = cmp_rank_of(res, in[i].c->rank);
        if (!k || (k->origin != MSP_ORIGIN_NONE &&
                   !cmp_before(in[i].c->step, in[i].c->order, k->at_step, k->at_order)))
            continue;
        k->origin = MSP_ORIGIN_INHERITED;
        k->at_step = in[i].c->step;
        k->at_order = in[i].c->order;
        k->from_rank = in[i].from;
        free(k->at);
        k->at = strdup(in[i].c->name);
    }
    free(in);
    for (size_t i = 0; i < res->n_ranks; i++)
        if (res->ranks[i].origin != MSP_ORIGIN_NONE && !res->ranks[i].at)
            return msp_fail(MSP_ERR_NOMEM, "compare: out of memory for ranks");
    res->first_rank = -1;
    if (n_own) {
        msp_rank_summary_t *k = cmp_rank_of(res, res->records[res->root_record].rank);
        res->first_rank = k ? (long)(k - res->ranks) : -1;
    }
    return MSP_OK;
}
