/* overflow_check (msprobe-overflow_check(1)): where the first NaN or Inf of a
 * run came from, from one dump (statistics are enough).
 *
 * Per rank, records are taken in execution order (attribute order: forward,
 * backward and optimizer records alike). A record is abnormal on a side when
 * one of its tensors holds NaN or Inf (in its data when the dump holds it, else
 * by its counts or a NaN/infinite Max/Min), or when a non-tensor argument is itself
 * inf or nan (torch.full(..., -inf), masked_fill(mask, -inf): a mask made on
 * purpose, not an overflow). A rank's origin is its first record whose
 * inputs are finite and whose outputs are not.
 *
 * Across ranks, time is what communication records say: a rank's
 * communication records happen in its order, and the records of one
 * collective (same API and call index on every rank) or of one send/recv
 * pair happen at one time. A record's place is then (time of the next
 * communication record on its rank, position since the previous one, rank).
 * A communication record with finite inputs and abnormal outputs received
 * the NaN/Inf when another member of its group sent an abnormal input (for a
 * directed op, the source); otherwise the communication itself made it (a
 * reduction that overflowed). The origin is the first record, in that order,
 * that made the NaN/Inf; the chain is the communication that carried it.
 * Records read by pc_overflow_rec.c, nodes written by pc_overflow_json.c. */
#include "pc_internal.h"
#include "msprobe/precheck.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- communication ---------------------------------------------------------------- */

enum { OV_UNDIRECTED = 0, OV_FROM_ROOT, OV_TO_ROOT, OV_SEND, OV_RECV };

/* torch.distributed's signatures: where the payload (the real input) and
 * the root or peer rank sit. A buffer that only receives (recv's tensor,
 * all_gather's tensor_list) is not an input: it may hold anything. */
typedef struct ov_comm_api {
    const char *api;
    int kind;
    int pay_pos; /* -1: none (on a receiving rank) */
    const char *pay_kw;
    int root_pos; /* -1: none */
    const char *root_kw;
} ov_comm_api_t;

static const ov_comm_api_t ov_comm_apis[] = {
    {"all_reduce", OV_UNDIRECTED, 0, "tensor", -1, NULL},
    {"all_gather", OV_UNDIRECTED, 1, "tensor", -1, NULL},
    {"all_gather_into_tensor", OV_UNDIRECTED, 1, "input_tensor", -1, NULL},
    {"_all_gather_base", OV_UNDIRECTED, 1, "input_tensor", -1, NULL},
    {"reduce_scatter", OV_UNDIRECTED, 1, "input_list", -1, NULL},
    {"reduce_scatter_tensor", OV_UNDIRECTED, 1, "input", -1, NULL},
    {"_reduce_scatter_base", OV_UNDIRECTED, 1, "input", -1, NULL},
    {"all_to_all", OV_UNDIRECTED, 1, "input_tensor_list", -1, NULL},
    {"all_to_all_single", OV_UNDIRECTED, 1, "input", -1, NULL},
    {"broadcast", OV_FROM_ROOT, 0, "tensor", 1, "src"},
    {"scatter", OV_FROM_ROOT, 1, "scatter_list", 2, "src"},
    {"reduce", OV_TO_ROOT, 0, "tensor", 1, "dst"},
    {"gather", OV_TO_ROOT, 0, "tensor", 2, "dst"},
    {"send", OV_SEND, 0, "tensor", 1, "dst"},
    {"isend", OV_SEND, 0, "tensor", 1, "dst"},
    {"recv", OV_RECV, -1, NULL, 1, "src"},
    {"irecv", OV_RECV, -1, NULL, 1, "src"},
};

static const ov_comm_api_t *ov_comm_api(const char *api)
{
    for (size_t i = 0; i < sizeof ov_comm_apis / sizeof ov_comm_apis[0]; i++)
        if (!strcmp(api, ov_comm_apis[i].api))
            return &ov_comm_apis[i];
    return NULL;
}

/* ---- per rank ----------------------------------------------------------------------- */

typedef struct ov_rec {
    const msp_record_info_t *r;
    int in_bad, out_bad; /* OV_NAN | OV_INF */
    int ignored;         /* an allocator of uninitialized memory */
    long comm;           /* index into the step's communication records, or -1 */
    char *in_note;       /* the first abnormal input, "input.0 holds NaN" */
} ov_rec_t;

typedef struct ov_rank {
    msp_dump_file_t *f;
    int64_t rank;
    ov_rec_t *recs;
    size_t n;
    long first; /* index of its first anomalous record (origin or received), -1 */
    int first_role;
    int64_t from_rank;
    long first_abnormal; /* first record holding NaN/Inf anywhere, -1 */
} ov_rank_t;

typedef struct ov_comm {
    size_t rank_i, rec; /* where it is */
    char api[64];
    long call;
    int kind;
    int64_t root; /* root or peer rank from its arguments, -1 unknown */
    int payload_bad;
    long group;
    long t;   /* time */
    long seq; /* send/recv: index among this pair's messages */
} ov_comm_t;

typedef struct ov_step {
    ov_rank_t *ranks;
    size_t n_ranks;
    ov_comm_t *comms;
    size_t n_comms;
    long n_groups;
} ov_step_t;

static void ov_step_free(ov_step_t *s)
{
    for (size_t i = 0; i < s->n_ranks; i++) {
        for (size_t j = 0; j < s->ranks[i].n; j++)
            free(s->ranks[i].recs[j].in_note);
        free(s->ranks[i].recs);
        msp_dump_close(s->ranks[i].f);
    }
    free(s->ranks);
    free(s->comms);
    memset(s, 0, sizeof *s);
}

static int64_t ov_rank_arg(const cJSON *attrs, int pos, const char *kw)
{
    char key[64];
    const char *v = NULL;
    if (kw) {
        snprintf(key, sizeof key, "kwarg.%s", kw);
        v = ov_attr(attrs, key);
    }
    if (!v && pos >= 0) {
        snprintf(key, sizeof key, "input.%d", pos);
        v = ov_attr(attrs, key);
    }
    char *end = NULL;
    long long r = v ? strtoll(v, &end, 10) : -1;
    return v && end != v && *end == '\0' && r >= 0 ? (int64_t)r : -1;
}

static char *ov_note(const char *role, int bad)
{
    return msp_asprintf("%s holds %s", role,
                        bad == (OV_NAN | OV_INF) ? "NaN and Inf"
                        : bad & OV_NAN           ? "NaN"
                                                 : "Inf");
}

/* Judge one record: which sides hold NaN/Inf; communication records join the
 * step's table. */
static msp_err ov_judge(ov_step_t *s, size_t ri, size_t j, size_t *comm_cap)
{
    ov_rank_t *rk = &s->ranks[ri];
    ov_rec_t *x = &rk->recs[j];
    const msp_record_info_t *r = x->r;
    char api[64];
    long call;
    int parsed = ov_split_name(r->name, api, sizeof api, &call);
    int is_comm = parsed && !strncmp(r->name, "Distributed.", 12);
    x->comm = -1;
    x->ignored = cmp_uninit_api(r->name) != NULL;
    const ov_comm_api_t *ca = is_comm ? ov_comm_api(api) : NULL;
    cJSON *attrs = NULL;
    int64_t root = -1;
    if (is_comm) {
        attrs = ov_attrs(rk->f, r);
        if (ca && ca->root_pos >= 0)
            root = ov_rank_arg(attrs, ca->root_pos, ca->root_kw);
    }
    /* the payload roles of a communication record on this rank */
    char pay_pos[32] = "", pay_kw[80] = "";
    int all_inputs = !is_comm || !ca;
    if (ca) {
        int receiving = (ca->kind == OV_FROM_ROOT && root != rk->rank) || ca->kind == OV_RECV;
        if (!receiving && ca->pay_pos >= 0) {
            snprintf(pay_pos, sizeof pay_pos, "input.%d", ca->pay_pos);
            snprintf(pay_kw, sizeof pay_kw, "kwarg.%s", ca->pay_kw);
        }
    }
    for (size_t i = 0; i < r->n_tensors; i++) {
        const msp_tensor_info_t *t = &r->tensors[i];
        int bad = ov_tensor_bad(t);
        if (!bad)
            continue;
        if (ov_is_output(t->role) || ov_is_out_buffer(t->role)) {
            x->out_bad |= bad;
        } else if (ov_is_input(t->role)) {
            int payload = all_inputs || (pay_pos[0] && (ov_role_under(t->role, pay_pos) ||
                                                        ov_role_under(t->role, pay_kw)));
            if (!payload)
                continue;
            if (!x->in_bad && !(x->in_note = ov_note(t->role, bad))) {
                cJSON_Delete(attrs);
                return msp_fail(MSP_ERR_NOMEM, "out of memory");
            }
            x->in_bad |= bad;
        }
    }
    /* a non-tensor argument that is inf or nan: read only where it decides */
    if (!x->in_bad && x->out_bad && !x->ignored) {
        if (!attrs)
            attrs = ov_attrs(rk->f, r);
        const cJSON *a;
        cJSON_ArrayForEach(a, attrs)
        {
            if (!ov_is_input(a->string) || ov_is_out_buffer(a->string) || !cJSON_IsString(a) ||
                !ov_text_bad(a->valuestring))
                continue;
            x->in_bad = OV_INF;
            if (!(x->in_note = msp_asprintf("argument %s = %.60s", a->string, a->valuestring))) {
                cJSON_Delete(attrs);
                return msp_fail(MSP_ERR_NOMEM, "out of memory");
            }
            break;
        }
    }
    if (is_comm) {
        ov_comm_t *nv = msp_grow(s->comms, comm_cap, s->n_comms, sizeof *nv, 64);
        if (!nv) {
            cJSON_Delete(attrs);
            return msp_fail(MSP_ERR_NOMEM, "out of memory");
        }
        s->comms = nv;
        ov_comm_t *c = &nv[s->n_comms];
        memset(c, 0, sizeof *c);
        c->rank_i = ri;
        c->rec = j;
        snprintf(c->api, sizeof c->api, "%s", api);
        c->call = call;
        c->kind = ca ? ca->kind : OV_UNDIRECTED;
        c->root = root;
        c->payload_bad = x->in_bad != 0;
        c->group = -1;
        x->comm = (long)s->n_comms++;
    }
    cJSON_Delete(attrs);
    return MSP_OK;
}

static int ov_rec_name_cmp(const void *x, const void *y)
{
    return strcmp((*(const ov_rec_t *const *)x)->r->name, (*(const ov_rec_t *const *)y)->r->name);
}

/* A backward record also reads what its forward saved (its inputs and
 * outputs), which the backward record does not hold: a forward that held
 * NaN/Inf makes the backward's inputs abnormal. */
static msp_err ov_link_backward(ov_rank_t *rk)
{
    ov_rec_t **idx = malloc((rk->n + 1) * sizeof *idx);
    if (!idx)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    for (size_t j = 0; j < rk->n; j++)
        idx[j] = &rk->recs[j];
    qsort(idx, rk->n, sizeof *idx, ov_rec_name_cmp);
    msp_err rc = MSP_OK;
    for (size_t j = 0; j < rk->n && rc == MSP_OK; j++) {
        ov_rec_t *x = &rk->recs[j];
        if (x->in_bad || cmp_is_forward(x->r->name))
            continue;
        char *fw = cmp_forward_name(x->r->name);
        if (!fw)
            continue;
        msp_record_info_t probe_r = {.name = fw};
        ov_rec_t probe = {.r = &probe_r};
        const ov_rec_t *pp = &probe;
        ov_rec_t **hit = bsearch(&pp, idx, rk->n, sizeof *idx, ov_rec_name_cmp);
        int bad = hit ? (*hit)->in_bad | (*hit)->out_bad : 0;
        if (bad) {
            x->in_bad = bad;
            if (!(x->in_note = msp_asprintf("its forward %s held %s", fw,
                                            bad == (OV_NAN | OV_INF) ? "NaN and Inf"
                                            : bad & OV_NAN           ? "NaN"
                                                                     : "Inf")))
                rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        }
        free(fw);
    }
    free(idx);
    return rc;
}

/* ---- groups and time ------------------------------------------------------------- */

static const ov_step_t *ov_sort_step; /* qsort has no user pointer */

static int64_t ov_comm_rank(const ov_step_t *s, const ov_comm_t *c)
{
    return s->ranks[c->rank_i].rank;
}

/* Group key: collectives by (api, call index); a send and its recv by
 * (sender, receiver, how many messages that pair exchanged before). */
static int ov_group_cmp(const void *x, const void *y)
{
    const ov_comm_t *a = &ov_sort_step->comms[*(const size_t *)x];
    const ov_comm_t *b = &ov_sort_step->comms[*(const size_t *)y];
    int pa = a->kind == OV_SEND || a->kind == OV_RECV,
        pb = b->kind == OV_SEND || b->kind == OV_RECV;
    if (pa != pb)
        return pa - pb;
    if (!pa) {
        int c = strcmp(a->api, b->api);
        if (c)
            return c;
        return (a->call > b->call) - (a->call < b->call);
    }
    int64_t as = a->kind == OV_SEND ? ov_comm_rank(ov_sort_step, a) : a->root;
    int64_t ad = a->kind == OV_SEND ? a->root : ov_comm_rank(ov_sort_step, a);
    int64_t bs = b->kind == OV_SEND ? ov_comm_rank(ov_sort_step, b) : b->root;
    int64_t bd = b->kind == OV_SEND ? b->root : ov_comm_rank(ov_sort_step, b);
    if (as != bs)
        return (as > bs) - (as < bs);
    if (ad != bd)
        return (ad > bd) - (ad < bd);
    return (a->seq > b->seq) - (a->seq < b->seq);
}

static int ov_lone(const ov_comm_t *c)
{
    return (c->kind == OV_SEND || c->kind == OV_RECV) && c->root < 0;
}

static msp_err ov_groups(ov_step_t *s)
{
    if (!s->n_comms)
        return MSP_OK;
    /* message numbers of each (sender, receiver) pair, in each rank's order */
    for (size_t i = 0; i < s->n_comms; i++) {
        ov_comm_t *c = &s->comms[i];
        if (c->kind != OV_SEND && c->kind != OV_RECV)
            continue;
        long seq = 0;
        for (size_t k = 0; k < i; k++) {
            const ov_comm_t *o = &s->comms[k];
            if (o->rank_i == c->rank_i && o->root == c->root &&
                (o->kind == OV_SEND) == (c->kind == OV_SEND))
                seq++;
        }
        c->seq = seq;
    }
    size_t *idx = malloc(s->n_comms * sizeof *idx);
    if (!idx)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < s->n_comms; i++)
        idx[i] = i;
    ov_sort_step = s;
    qsort(idx, s->n_comms, sizeof *idx, ov_group_cmp);
    long g = -1;
    for (size_t i = 0; i < s->n_comms; i++) {
        ov_comm_t *c = &s->comms[idx[i]];
        /* a send or recv whose peer the dump does not say pairs with nothing */
        if (i == 0 || ov_lone(c) || ov_lone(&s->comms[idx[i - 1]]) ||
            ov_group_cmp(&idx[i - 1], &idx[i]) != 0)
            g++;
        c->group = g;
    }
    s->n_groups = g + 1;
    free(idx);
    /* time: after the previous record of its rank, with its whole group */
    long *gmax = calloc((size_t)s->n_groups, sizeof *gmax);
    if (!gmax)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    for (size_t iter = 0; iter <= s->n_comms + 1; iter++) {
        int changed = 0;
        for (size_t r = 0; r < s->n_ranks; r++) {
            long prev = -1;
            for (size_t j = 0; j < s->ranks[r].n; j++) {
                long ci = s->ranks[r].recs[j].comm;
                if (ci < 0)
                    continue;
                if (s->comms[ci].t < prev + 1) {
                    s->comms[ci].t = prev + 1;
                    changed = 1;
                }
                prev = s->comms[ci].t;
            }
        }
        memset(gmax, 0, (size_t)s->n_groups * sizeof *gmax);
        for (size_t i = 0; i < s->n_comms; i++)
            if (s->comms[i].t > gmax[s->comms[i].group])
                gmax[s->comms[i].group] = s->comms[i].t;
        for (size_t i = 0; i < s->n_comms; i++)
            if (s->comms[i].t != gmax[s->comms[i].group]) {
                s->comms[i].t = gmax[s->comms[i].group];
                changed = 1;
            }
        if (!changed)
            break;
    }
    free(gmax);
    return MSP_OK;
}

/* A record's place across ranks: (time of the communication that closes its
 * segment, 0 before it / 1 the communication itself, position in the segment). */
typedef struct ov_key {
    long t;
    int phase;
    long pos;
    int64_t rank;
} ov_key_t;

static ov_key_t ov_key_of(const ov_step_t *s, size_t ri, size_t j)
{
    const ov_rank_t *rk = &s->ranks[ri];
    ov_key_t k = {0, 0, 0, rk->rank};
    long prev_pos = -1, prev_t = -1;
    for (size_t i = 0; i < rk->n; i++) {
        long ci = rk->recs[i].comm;
        if (ci < 0)
            continue;
        if (i == j) {
            k.t = s->comms[ci].t;
            k.phase = 1;
            return k;
        }
        if (i > j) {
            k.t = s->comms[ci].t;
            k.pos = (long)j - prev_pos - 1;
            return k;
        }
        prev_pos = (long)i;
        prev_t = s->comms[ci].t;
    }
    k.t = prev_t + 1;
    k.pos = (long)j - prev_pos - 1;
    return k;
}

static int ov_key_cmp(const ov_key_t *a, const ov_key_t *b)
{
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    if (a->phase != b->phase)
        return a->phase < b->phase ? -1 : 1;
    if (a->pos != b->pos)
        return a->pos < b->pos ? -1 : 1;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

/* The member of c's group that sent it an abnormal input, or NULL. */
static const ov_comm_t *ov_sender(const ov_step_t *s, const ov_comm_t *c)
{
    const ov_comm_t *best = NULL;
    for (size_t i = 0; i < s->n_comms; i++) {
        const ov_comm_t *o = &s->comms[i];
        if (o == c || o->group != c->group || !o->payload_bad)
            continue;
        int64_t orank = ov_comm_rank(s, o);
        /* a directed op carries from its source only */
        if ((c->kind == OV_FROM_ROOT && c->root >= 0 && orank != c->root) ||
            (c->kind == OV_RECV && orank != c->root) ||
            (c->kind == OV_TO_ROOT && c->root >= 0 && ov_comm_rank(s, c) != c->root) ||
            c->kind == OV_SEND)
            continue;
        if (!best || orank < ov_comm_rank(s, best))
            best = o;
    }
    return best;
}

/* ---- one step ---------------------------------------------------------------------------- */

static int ov_kind(int bad)
{
    return bad == (OV_NAN | OV_INF) ? MSP_ANOM_INF_NAN : bad & OV_NAN ? MSP_ANOM_NAN : MSP_ANOM_INF;
}

static msp_err ov_make_node(const ov_step_t *s, size_t ri, size_t j, int role, int64_t from,
                            int64_t step, msp_anomaly_node_t *out)
{
    const ov_rank_t *rk = &s->ranks[ri];
    const ov_rec_t *x = &rk->recs[j];
    memset(out, 0, sizeof *out);
    out->step = step;
    out->rank = rk->rank;
    out->order = x->r->order;
    out->role = (msp_anomaly_role_t)role;
    out->from_rank = from;
    out->kind = (msp_anomaly_kind_t)ov_kind(role == MSP_ANOM_SENT ? x->in_bad : x->out_bad);
    out->record = strdup(x->r->name);
    if (role == MSP_ANOM_ORIGIN)
        out->reason = ov_reason(x->r, x->out_bad, x->comm >= 0);
    else if (role == MSP_ANOM_SENT)
        out->reason = msp_asprintf("sent it on: %s", x->in_note ? x->in_note : "abnormal input");
    else
        out->reason = msp_asprintf("received it from rank %" PRId64
                                   ": finite inputs, abnormal outputs",
                                   from);
    if (role != MSP_ANOM_SENT)
        out->json = ov_node_json(rk->f, x->r, step, out);
    if (!out->record || !out->reason || (role != MSP_ANOM_SENT && !out->json)) {
        cmp_ov_node_free(out);
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    return MSP_OK;
}

static msp_err ov_add_node(msp_anomaly_node_t **v, size_t *n, size_t *cap, const ov_step_t *s,
                           size_t ri, size_t j, int role, int64_t from, int64_t step)
{
    msp_anomaly_node_t *nv = msp_grow(*v, cap, *n, sizeof *nv, 8);
    if (!nv)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    *v = nv;
    msp_err rc = ov_make_node(s, ri, j, role, from, step, &nv[*n]);
    if (rc == MSP_OK)
        (*n)++;
    return rc;
}

typedef struct ov_chain_ent {
    size_t ri, j;
    int role;
    int64_t from;
    ov_key_t key;
} ov_chain_ent_t;

static int ov_chain_cmp(const void *x, const void *y)
{
    const ov_chain_ent_t *a = x, *b = y;
    ov_key_t ka = a->key, kb = b->key;
    ka.rank = kb.rank = 0;
    int c = ov_key_cmp(&ka, &kb);
    if (c)
        return c;
    if (a->role != b->role) /* at one time, the sender before the receiver */
        return a->role - b->role;
    return (a->key.rank > b->key.rank) - (a->key.rank < b->key.rank);
}

/* Analyse one step's files (open, in s); fills res when an origin is found. */
static msp_err ov_analyse(ov_step_t *s, int64_t step, msp_overflow_result_t *res)
{
    msp_err rc = MSP_OK;
    size_t comm_cap = 0;
    for (size_t ri = 0; ri < s->n_ranks; ri++) {
        for (size_t j = 0; j < s->ranks[ri].n; j++)
            if ((rc = ov_judge(s, ri, j, &comm_cap)) != MSP_OK)
                return rc;
        if ((rc = ov_link_backward(&s->ranks[ri])) != MSP_OK)
            return rc;
    }
    if ((rc = ov_groups(s)) != MSP_OK)
        return rc;
    /* each rank's first anomaly: where it made the NaN/Inf or received it */
    long best_ri = -1;
    ov_key_t best_key = {0, 0, 0, 0};
    ov_key_t abn_key = {0, 0, 0, 0};
    long abn_ri = -1;
    for (size_t ri = 0; ri < s->n_ranks; ri++) {
        ov_rank_t *rk = &s->ranks[ri];
        /* A module's parameters are not among the recorded inputs of older
         * dumps (ours carry them as parameters.NAME since issue 38): NaN
         * parameters would make it look like an origin. Where the dump
         * holds API records too, the ones that ran inside it decide. */
        int has_api = 0;
        for (size_t j = 0; j < rk->n && !has_api; j++)
            has_api = strncmp(rk->recs[j].r->name, "Module.", 7) != 0;
        for (size_t j = 0; j < rk->n && has_api; j++)
            if (!strncmp(rk->recs[j].r->name, "Module.", 7))
                rk->recs[j].ignored = 1;
        rk->first = rk->first_abnormal = -1;
        rk->from_rank = -1;
        for (size_t j = 0; j < rk->n && rk->first < 0; j++) {
            const ov_rec_t *x = &rk->recs[j];
            if (x->ignored)
                continue;
            if ((x->in_bad || x->out_bad) && rk->first_abnormal < 0)
                rk->first_abnormal = (long)j;
            if (!x->out_bad || x->in_bad)
                continue;
            rk->first = (long)j;
            rk->first_role = MSP_ANOM_ORIGIN;
            if (x->comm >= 0) {
                const ov_comm_t *snd = ov_sender(s, &s->comms[x->comm]);
                if (snd) {
                    rk->first_role = MSP_ANOM_RECEIVED;
                    rk->from_rank = ov_comm_rank(s, snd);
                }
            }
        }
        if (rk->first >= 0 && rk->first_role == MSP_ANOM_ORIGIN) {
            ov_key_t k = ov_key_of(s, ri, (size_t)rk->first);
            if (best_ri < 0 || ov_key_cmp(&k, &best_key) < 0) {
                best_ri = (long)ri;
                best_key = k;
            }
        }
        if (rk->first_abnormal >= 0) {
            ov_key_t k = ov_key_of(s, ri, (size_t)rk->first_abnormal);
            if (abn_ri < 0 || ov_key_cmp(&k, &abn_key) < 0) {
                abn_ri = (long)ri;
                abn_key = k;
            }
        }
    }
    if (best_ri < 0) {
        if (abn_ri >= 0 && !res->abnormal_input) {
            const ov_rank_t *rk = &s->ranks[abn_ri];
            const ov_rec_t *x = &rk->recs[rk->first_abnormal];
            res->abnormal_input = msp_asprintf("step %" PRId64 " rank %" PRId64 " %s: %s", step,
                                               rk->rank, x->r->name,
                                               x->in_note ? x->in_note : "abnormal input");
            if (!res->abnormal_input)
                return msp_fail(MSP_ERR_NOMEM, "out of memory");
        }
        return MSP_OK;
    }
    res->found = 1;
    res->step = step;
    ov_rank_t *ork = &s->ranks[best_ri];
    if ((rc = ov_make_node(s, (size_t)best_ri, (size_t)ork->first, MSP_ANOM_ORIGIN, -1, step,
                           &res->origin)) != MSP_OK)
        return rc;
    /* per rank, the origin's first */
    size_t cap = 0;
    for (size_t pass = 0; pass < 2; pass++)
        for (size_t ri = 0; ri < s->n_ranks; ri++) {
            ov_rank_t *rk = &s->ranks[ri];
            if (rk->first < 0 || (pass == 0) != ((long)ri == best_ri))
                continue;
            if ((rc = ov_add_node(&res->ranks, &res->n_ranks, &cap, s, ri, (size_t)rk->first,
                                  rk->first_role, rk->from_rank, step)) != MSP_OK)
                return rc;
        }
    /* the chain: communication groups in time order that carried it from a
     * rank already holding it to a rank whose first anomaly it is */
    char *held = calloc(s->n_ranks, 1);
    ov_chain_ent_t *ents = calloc(2 * s->n_comms + 1, sizeof *ents);
    size_t ne = 0;
    if (!held || !ents) {
        free(held);
        free(ents);
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    held[best_ri] = 1;
    for (int grew = 1; grew;) {
        grew = 0;
        for (size_t i = 0; i < s->n_comms; i++) {
            const ov_comm_t *c = &s->comms[i];
            const ov_rank_t *rk = &s->ranks[c->rank_i];
            if (held[c->rank_i] || rk->first != (long)c->rec || rk->first_role != MSP_ANOM_RECEIVED)
                continue;
            const ov_comm_t *snd = ov_sender(s, c);
            if (!snd || !held[snd->rank_i])
                continue;
            held[c->rank_i] = 1;
            grew = 1;
            ents[ne++] = (ov_chain_ent_t){snd->rank_i, snd->rec, MSP_ANOM_SENT, -1,
                                          ov_key_of(s, snd->rank_i, snd->rec)};
            ents[ne++] = (ov_chain_ent_t){c->rank_i, c->rec, MSP_ANOM_RECEIVED,
                                          ov_comm_rank(s, snd), ov_key_of(s, c->rank_i, c->rec)};
        }
    }
    qsort(ents, ne, sizeof *ents, ov_chain_cmp);
    cap = 0;
    for (size_t i = 0; i < ne && rc == MSP_OK; i++) {
        int dup = 0; /* one sender record carries to several ranks */
        for (size_t k = 0; k < res->n_chain; k++)
            dup |= res->chain[k].rank == s->ranks[ents[i].ri].rank &&
                   !strcmp(res->chain[k].record, s->ranks[ents[i].ri].recs[ents[i].j].r->name);
        if (!dup)
            rc = ov_add_node(&res->chain, &res->n_chain, &cap, s, ents[i].ri, ents[i].j,
                             ents[i].role, ents[i].from, step);
    }
    free(held);
    free(ents);
    return rc;
}

/* ---- files and steps ------------------------------------------------------------------------ */

static msp_err ov_skip(msp_overflow_result_t *res, const char *path, const char *why)
{
    char **nv = realloc(res->skipped, (res->n_skipped + 1) * sizeof *nv);
    if (!nv)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    res->skipped = nv;
    if (!(nv[res->n_skipped] = msp_asprintf("%s: %s", path, why)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    res->n_skipped++;
    return MSP_OK;
}

/* Open the files entries[0..n) (one step) and analyse them. */
static msp_err ov_step_run(const msp_dump_entry_t *e, size_t n, int single,
                           msp_overflow_result_t *res)
{
    ov_step_t s;
    memset(&s, 0, sizeof s);
    msp_err rc = MSP_OK;
    int64_t step = -1;
    if (!(s.ranks = calloc(n, sizeof *s.ranks)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (e[i].error) {
            if ((rc = ov_skip(res, e[i].path, e[i].error)) != MSP_OK)
                goto done;
            continue;
        }
        msp_dump_file_t *f = NULL;
        msp_err orc = ov_open_dump(e[i].path, &f);
        if (orc != MSP_OK) {
            if (single) {
                rc = orc;
                goto done;
            }
            rc = ov_skip(res, e[i].path, msp_last_error());
            msp_clear_error();
            if (rc != MSP_OK)
                goto done;
            continue;
        }
        ov_rank_t *rk = &s.ranks[s.n_ranks++];
        rk->f = f;
        rk->rank = e[i].rank >= 0 ? e[i].rank : f->rank >= 0 ? f->rank : 0;
        if (step < 0)
            step = e[i].step >= 0 ? e[i].step : f->step >= 0 ? f->step : 0;
        rk->n = f->n_records;
        if (rk->n && !(rk->recs = calloc(rk->n, sizeof *rk->recs))) {
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (size_t j = 0; j < rk->n; j++)
            rk->recs[j].r = &f->records[j]; /* already in execution order */
        res->files++;
        res->records += rk->n;
    }
    if (s.n_ranks)
        res->steps_scanned++;
    rc = s.n_ranks ? ov_analyse(&s, step, res) : MSP_OK;
done:
    ov_step_free(&s);
    return rc;
}

msp_err msp_overflow_check(const char *path, const msp_overflow_opts_t *opts,
                           msp_overflow_result_t **out)
{
    *out = NULL;
    msp_overflow_result_t *res = calloc(1, sizeof *res);
    if (!res)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    res->step = -1;
    msp_dump_tree_t t;
    msp_err rc = msp_dump_tree_scan(path, 0, &t);
    if (rc != MSP_OK) {
        msp_dump_tree_free(&t);
        free(res);
        return rc;
    }
    int single = t.kind == MSP_TREE_FILE;
    const msp_step_set_t *steps = opts && t.kind == MSP_TREE_ROOT ? opts->steps : NULL;
    for (size_t i = 0; i < t.n_files && rc == MSP_OK && !res->found;) {
        size_t k = i;
        while (k < t.n_files && t.files[k].step == t.files[i].step)
            k++;
        if (!steps || msp_step_set_contains(steps, t.files[i].step))
            rc = ov_step_run(&t.files[i], k - i, single, res);
        i = k;
    }
    msp_dump_tree_free(&t);
    if (rc == MSP_OK && !res->steps_scanned)
        rc = msp_fail(MSP_ERR_NOT_FOUND, "%s: no readable dump%s", path,
                      steps ? " in the steps asked for" : "");
    if (rc != MSP_OK) {
        msp_overflow_result_free(res);
        return rc;
    }
    *out = res;
    return MSP_OK;
}
