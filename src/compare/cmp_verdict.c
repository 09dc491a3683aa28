/* Verdicts (msprobe's "Accuracy Reached or Not"), our introduced/inherited
 * cause, and msprobe's red/yellow highlighting, applied to finished rows;
 * backward records judged with their forward's errors, module records with
 * their parameters' and by what ran inside them. Ranking the records that
 * introduced error: cmp_suspects.c. */
#include "cmp_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void cmp_tensor_verdict(msp_tensor_cmp_t *t, const msp_compare_opts_t *o, int is_scalar)
{
    double cos = t->cosine, mx = t->max_abs_err;
    if (isnan(mx)) {
        t->verdict = MSP_VERDICT_NO;
        return;
    }
    if (isnan(cos)) {
        /* one element: Cosine is undefined, so judge MaxAbsErr alone; any other
         * N/A Cosine (one side all zero) is a No, as in msprobe */
        t->verdict = is_scalar && !(mx > o->abs_fail) ? MSP_VERDICT_YES : MSP_VERDICT_NO;
        return;
    }
    if ((cos < o->cos_warn && mx > o->abs_warn) || cos < o->cos_fail || mx > o->abs_fail)
        t->verdict = MSP_VERDICT_NO;
    else
        t->verdict = MSP_VERDICT_YES;
}

static int cmp_is_output_row(const msp_tensor_cmp_t *t)
{
    return t->is_output;
}

/* Unit roundoff of a torch dtype name; 0 for integer and bool tensors, which
 * are exact. Unknown names count as float32. */
double cmp_unit_roundoff(const char *dtype)
{
    if (!dtype || !dtype[0])
        return 0.0;
    /* torch's own names first, from the dump format's table of them: the
     * searches below ran 1.4 million times a statistics tree of 4 ranks
     * (issue 42) */
    msp_dtype_t d = msp_dtype_from_name(dtype);
    if (d != MSP_DTYPE_INVALID && !strcmp(dtype, msp_dtype_name(d)))
        switch (d) {
        case MSP_DTYPE_BFLOAT16:
            return 0x1p-8;
        case MSP_DTYPE_FLOAT16:
            return 0x1p-11;
        case MSP_DTYPE_FLOAT64:
            return 0x1p-53;
        case MSP_DTYPE_FLOAT32:
            return 0x1p-24;
        default: /* integers and bool */
            return 0.0;
        }
    if (strstr(dtype, "bfloat16") || strstr(dtype, "bf16"))
        return 0x1p-8;
    if (strstr(dtype, "float16") || strstr(dtype, "half"))
        return 0x1p-11;
    if (strstr(dtype, "float64") || strstr(dtype, "double"))
        return 0x1p-53;
    if (strstr(dtype, "int") || strstr(dtype, "bool"))
        return 0.0;
    return 0x1p-24;
}

double cmp_floor_for(double u)
{
    return u > 0.0 ? CMP_FLOOR_ULPS * u + CMP_FLOOR_ABS : 0.0;
}

double cmp_row_unit(const msp_tensor_cmp_t *t)
{
    return fmax(cmp_unit_roundoff(t->npu_dtype), cmp_unit_roundoff(t->bench_dtype));
}

static int cmp_row_discrete(const msp_tensor_cmp_t *t)
{
    return (t->npu_dtype[0] || t->bench_dtype[0]) && !(cmp_row_unit(t) > 0.0);
}

/* Error-origin model (msprobe-compare(1), ROOT CAUSE): an op introduced
 * error when its output error is clearly above both what its inputs carry
 * and what its compute precision explains. */
static void cmp_judge(msp_record_cmp_t *rec, int out_discrete)
{
    double ein = isnan(rec->in_err) ? 0.0 : rec->in_err;
    rec->score = NAN;
    rec->cause = MSP_CAUSE_NONE;
    if (!isnan(rec->out_err) && rec->out_err > rec->floor) {
        double base = fmax(CMP_AMPLIFY * ein, rec->floor);
        /* integer/bool outputs jump under any input noise: introduced only
         * when every input is identical */
        int introduced = out_discrete ? !(ein > 0.0) : rec->out_err > base;
        rec->cause = introduced ? MSP_CAUSE_INTRODUCED : MSP_CAUSE_INHERITED;
        rec->score = base > 0.0 ? rec->out_err / base : INFINITY;
    }
}

static int cmp_out_discrete(const msp_record_cmp_t *rec, const msp_tensor_cmp_t *tensors)
{
    for (size_t i = 0; i < rec->n_tensors; i++) {
        const msp_tensor_cmp_t *t = &tensors[rec->first_tensor + i];
        if (t->is_output && cmp_row_discrete(t) && t->rel_err > 0.0)
            return 1;
    }
    return 0;
}

/* A record whose every row is N/A (MSP_VERDICT_NA) is N/A itself. */
static void cmp_record_na(msp_record_cmp_t *rec, const msp_tensor_cmp_t *t0, size_t n)
{
    size_t na = 0;
    for (size_t i = 0; i < n; i++)
        na += t0[i].verdict == MSP_VERDICT_NA;
    if (n && na == n)
        rec->verdict = MSP_VERDICT_NA;
}

void cmp_record_finish(msp_record_cmp_t *rec, msp_tensor_cmp_t *tensors)
{
    msp_tensor_cmp_t *t0 = tensors + rec->first_tensor;
    size_t n = rec->n_tensors;
    int n_inputs = 0, inputs_all_yes = 1, out_discrete = 0;
    double in_max_abs = NAN, in_min_cos = NAN, unit = 0.0;
    rec->worst_cosine = NAN;
    rec->worst_max_abs = NAN;
    rec->verdict = MSP_VERDICT_YES;
    rec->highlight = MSP_HL_NONE;
    rec->in_err = NAN;
    rec->out_err = NAN;
    for (size_t i = 0; i < n; i++) {
        msp_tensor_cmp_t *t = &t0[i];
        if (t->verdict == MSP_VERDICT_NO)
            rec->verdict = MSP_VERDICT_NO;
        else if (t->verdict == MSP_VERDICT_WARNING && rec->verdict == MSP_VERDICT_YES)
            rec->verdict = MSP_VERDICT_WARNING;
        /* the op computed at the coarsest precision any of its tensors has on
         * either side: a bf16-input op with an fp32 output rounds like bf16 */
        unit = fmax(unit, cmp_row_unit(t));
        double e = t->rel_err;
        if (cmp_is_output_row(t)) {
            if (!isnan(e)) {
                rec->out_err = isnan(rec->out_err) ? e : fmax(rec->out_err, e);
                out_discrete |= cmp_row_discrete(t) && e > 0.0;
            }
            if (!isnan(t->cosine))
                rec->worst_cosine = isnan(rec->worst_cosine) ? t->cosine
                                                             : fmin(rec->worst_cosine, t->cosine);
            if (!isnan(t->max_abs_err))
                rec->worst_max_abs = isnan(rec->worst_max_abs)
                                         ? t->max_abs_err
                                         : fmax(rec->worst_max_abs, t->max_abs_err);
        } else {
            n_inputs++;
            /* a changed index or mask explains any output change */
            if (!isnan(e) && cmp_row_discrete(t) && e > 0.0)
                e = INFINITY;
            if (!isnan(e))
                rec->in_err = isnan(rec->in_err) ? e : fmax(rec->in_err, e);
            inputs_all_yes &= t->verdict == MSP_VERDICT_YES;
            double a = t->max_abs_err;
            if (isnan(a) && !isnan(t->max_diff))
                a = fabs(t->max_diff); /* statistics rows */
            if (!isnan(a))
                in_max_abs = isnan(in_max_abs) ? a : fmax(in_max_abs, a);
            if (!isnan(t->cosine))
                in_min_cos = isnan(in_min_cos) ? t->cosine : fmin(in_min_cos, t->cosine);
        }
    }
    /* under autocast the op computed at the autocast dtype, whatever its tensors' */
    rec->floor = cmp_floor_for(fmax(unit, rec->autocast_u));
    /* numbers that differ by about what the tensors around them do were
     * computed from them (clamp(min=float(t.min()))): an input, not a setting */
    double ein = isnan(rec->in_err) ? 0.0 : rec->in_err;
    rec->args_are_data = rec->arg_diff && rec->arg_reldiff > 0.0 &&
                         rec->arg_reldiff <= fmin(CMP_DATA_ARG_MAX, fmax(ein, rec->floor));
    if (rec->args_are_data)
        rec->in_err = fmax(ein, rec->arg_reldiff);
    cmp_judge(rec, out_discrete);
    cmp_record_na(rec, t0, n);

    for (size_t i = 0; i < n; i++) {
        msp_tensor_cmp_t *t = &t0[i];
        if (!cmp_is_output_row(t)) {
            t->highlight = MSP_HL_NONE;
            continue;
        }
        double err = t->max_abs_err;
        if (isnan(err) && !isnan(t->max_diff))
            err = fabs(t->max_diff);
        /* the row builder pre-marks red the outputs whose NPU side holds NaN/Inf */
        msp_highlight_t h = t->highlight == MSP_HL_RED ? MSP_HL_RED : MSP_HL_NONE;
        if (h == MSP_HL_RED || err > 1e10)
            h = MSP_HL_RED;
        else if (n_inputs && inputs_all_yes && t->verdict != MSP_VERDICT_YES)
            h = MSP_HL_RED; /* accuracy lost across the op */
        else if (n_inputs && err > 0.0 && !isnan(in_max_abs) && err >= 10.0 * in_max_abs)
            h = MSP_HL_YELLOW;
        else if (n_inputs && !isnan(t->cosine) && !isnan(in_min_cos) &&
                 t->cosine < in_min_cos - 0.1)
            h = MSP_HL_YELLOW;
        t->highlight = h;
        if (h > rec->highlight)
            rec->highlight = h;
    }
}

/* ---- backward records ------------------------------------------------------ */

/* name with its last dot-delimited word from replaced by to ("X.backward"
 * -> "X.forward"), or NULL when it has none. Joined by hand: msp_asprintf's
 * vsnprintf was a third of cmp_link_backward's time on a statistics pair. */
static char *cmp_swap_word(const char *name, const char *from, const char *to)
{
    size_t fl = strlen(from);
    const char *p = NULL, *q = name;
    while ((q = strstr(q, from)) != NULL) {
        if ((q == name || q[-1] == '.') && (q[fl] == '\0' || q[fl] == '.'))
            p = q;
        q += fl;
    }
    if (!p)
        return NULL;
    size_t head = (size_t)(p - name), tl = strlen(to), tail = strlen(p + fl);
    char *out = malloc(head + tl + tail + 1);
    if (!out)
        return NULL;
    memcpy(out, name, head);
    memcpy(out + head, to, tl);
    memcpy(out + head + tl, p + fl, tail + 1);
    return out;
}

char *cmp_forward_name(const char *name)
{
    return cmp_swap_word(name, "backward", "forward");
}

msp_err cmp_link_backward(msp_compare_result_t *res)
{
    size_t n = res->n_records;
    cmp_rec_index_t ix = {0};
    msp_err rc = cmp_index_build(res, &ix);
    for (size_t i = 0; i < n && !rc; i++) {
        msp_record_cmp_t *rec = &res->records[i];
        if (cmp_is_forward(rec->name))
            continue;
        char *fw = cmp_forward_name(rec->name);
        if (!fw)
            continue;
        const msp_record_cmp_t *f = cmp_index_find(&ix, rec->step, rec->rank, fw);
        if (f) {
            /* A backward op computes from what its forward saved (inputs or
             * outputs), so the forward's error e is an input error of it too.
             * It may also route gradients by comparisons on those tensors (a
             * ReLU mask, a max-pool argmax): a relative error e flips about a
             * share e of such a mask, which shows as an L2 error near sqrt(e).
             * So e counts as max(e, CMP_MASK_FLIP * sqrt(e) / CMP_AMPLIFY). */
            double e = rec->in_err;
            double fe = NAN;
            if (!isnan(f->in_err))
                fe = f->in_err;
            if (!isnan(f->out_err))
                fe = isnan(fe) ? f->out_err : fmax(fe, f->out_err);
            if (!isnan(fe)) {
                fe = fmax(fe, CMP_MASK_FLIP * sqrt(fe) / CMP_AMPLIFY);
                e = isnan(e) ? fe : fmax(e, fe);
            }
            rec->in_err = e;
            rec->floor = fmax(rec->floor, f->floor);
            cmp_judge(rec, cmp_out_discrete(rec, res->tensors));
        }
        free(fw);
    }
    cmp_index_free(&ix);
    return rc;
}

/* ---- records by name ---------------------------------------------------------- */

/* A record's key in the index: its name, seeded by its step and rank. */
static uint64_t cmp_rec_hash(int64_t step, int64_t rank, const char *name)
{
    return msp_str_hash(name, msp_mix64((uint64_t)step * 0x9e3779b97f4a7c15ULL ^ (uint64_t)rank));
}

struct cmp_rec_key {
    const msp_compare_result_t *res;
    int64_t step, rank;
    const char *name;
};

static int cmp_rec_is(const void *ctx, size_t i)
{
    const struct cmp_rec_key *k = ctx;
    const msp_record_cmp_t *m = &k->res->records[i];
    return m->step == k->step && m->rank == k->rank && m->name && !strcmp(m->name, k->name);
}

/* A hash index: sorting the records by name (a qsort of pointers, strcmp
 * through each) three times a pair was a tenth of phase A (issue 42). A
 * name given twice finds its first record. */
msp_err cmp_index_build(const msp_compare_result_t *res, cmp_rec_index_t *ix)
{
    ix->res = res;
    if (msp_index_reserve(&ix->h, res->n_records))
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    for (size_t i = 0; i < res->n_records; i++) {
        const msp_record_cmp_t *r = &res->records[i];
        if (r->name && msp_index_put(&ix->h, cmp_rec_hash(r->step, r->rank, r->name), i))
            return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    }
    return MSP_OK;
}

void cmp_index_free(cmp_rec_index_t *ix)
{
    msp_index_free(&ix->h);
}

msp_record_cmp_t *cmp_index_find(const cmp_rec_index_t *ix, int64_t step, int64_t rank,
                                 const char *name)
{
    struct cmp_rec_key key = {ix->res, step, rank, name};
    size_t i = ix->res ? msp_index_find(&ix->h, cmp_rec_hash(step, rank, name), cmp_rec_is, &key)
                       : SIZE_MAX;
    return i == SIZE_MAX ? NULL : &ix->res->records[i];
}

/* "X.forward" / "Module.m.T.forward.0" -> the backward record's name. */
static char *cmp_backward_name(const char *name)
{
    return cmp_swap_word(name, "forward", "backward");
}

/* ---- parameters a module record does not show --------------------------------- */

int cmp_is_optimizer(const msp_record_cmp_t *r)
{
    return strncmp(r->name, "Optimizer.", 10) == 0;
}

msp_err cmp_module_params(msp_compare_result_t *res, double seed)
{
    /* Records sort by step, rank, order: walk each rank's steps, carrying the
     * worst parameter error the last optimizer step of that rank wrote. */
    size_t r = 0;
    while (r < res->n_records) {
        size_t q = r;
        while (q < res->n_records && res->records[q].step == res->records[r].step &&
               res->records[q].rank == res->records[r].rank)
            q++;
        /* the latest earlier step of this rank that has an optimizer record */
        double p = 0.0;
        int found = 0;
        for (size_t k = r; k-- > 0 && !found;) {
            const msp_record_cmp_t *x = &res->records[k];
            if (x->rank != res->records[r].rank || x->step == res->records[r].step)
                continue;
            if (cmp_is_optimizer(x) && !isnan(x->out_err)) {
                p = fmax(p, x->out_err);
                /* every optimizer record of that step */
                for (size_t j = k; j-- > 0;) {
                    const msp_record_cmp_t *y = &res->records[j];
                    if (y->step != x->step)
                        break;
                    if (y->rank == x->rank && cmp_is_optimizer(y) && !isnan(y->out_err))
                        p = fmax(p, y->out_err);
                }
                found = 1;
            }
        }
        if (!found)
            p = seed; /* a part of a streamed compare: the rank's step before it */
        if (p > 0.0 && !isinf(p)) {
            /* a module computes with parameters it does not show as inputs: the
             * error the optimizer wrote into them is an input error of it */
            for (size_t k = r; k < q; k++) {
                msp_record_cmp_t *m = &res->records[k];
                if (strncmp(m->name, "Module.", 7) != 0)
                    continue;
                m->in_err = isnan(m->in_err) ? p : fmax(m->in_err, p);
                cmp_judge(m, cmp_out_discrete(m, res->tensors));
            }
        }
        r = q;
    }
    return MSP_OK;
}

/* ---- modules, judged by what is inside them -------------------------------------- */

static int cmp_is_module(const msp_record_cmp_t *r)
{
    return strncmp(r->name, "Module.", 7) == 0;
}

/* Whether record x, inside a module, accounts for an error e of the module:
 * it made error itself, or it already carries error near e. */
static int cmp_explains(const msp_record_cmp_t *x, double e)
{
    if (x->replay == MSP_RV_INTRODUCED)
        return 1;
    if (x->cause == MSP_CAUSE_INTRODUCED && x->replay != MSP_RV_INHERITED && !x->explained_by)
        return 1;
    if (x->arg_diff && !x->args_are_data && x->out_err > x->floor)
        return 1;
    return !isnan(x->out_err) && CMP_AMPLIFY * x->out_err >= e;
}

/* Module span order: innermost (shortest) first, so an outer module sees
 * its inner modules already judged. */
static int cmp_span_order(const void *x, const void *y)
{
    const msp_record_cmp_t *a = *(const msp_record_cmp_t *const *)x;
    const msp_record_cmp_t *b = *(const msp_record_cmp_t *const *)y;
    int64_t sa = a->order - a->order_begin, sb = b->order - b->order_begin;
    return sa != sb ? (sa < sb ? -1 : 1) : (a < b ? -1 : a > b);
}

struct cmp_span_key {
    const msp_compare_result_t *res;
    const msp_record_cmp_t *rec;
    int64_t from;
};

static int cmp_span_before(const void *ctx, size_t i)
{
    const struct cmp_span_key *k = ctx;
    const msp_record_cmp_t *m = &k->res->records[i];
    return m->step != k->rec->step   ? m->step < k->rec->step
           : m->rank != k->rec->rank ? m->rank < k->rec->rank
                                     : m->order < k->from;
}

/* The records of rec's step and rank with order in [from, to), in res's
 * order (records sort by step, rank, order): first index, count. */
static size_t cmp_span(const msp_compare_result_t *res, const msp_record_cmp_t *rec, int64_t from,
                       int64_t to, size_t *count)
{
    struct cmp_span_key key = {res, rec, from};
    size_t lo = msp_lower_bound(res->n_records, cmp_span_before, &key);
    size_t end = lo;
    while (end < res->n_records && res->records[end].step == rec->step &&
           res->records[end].rank == rec->rank && res->records[end].order < to)
        end++;
    *count = end - lo;
    return lo;
}

/* One module record against the records that ran inside it (fwd: its own
 * span; for its backward record, the backward records of what ran inside
 * its forward). Its floor becomes that of the coarsest dtype computed
 * inside; it is explained (never a suspect) when something inside accounts
 * for its error. */
static void cmp_judge_module(msp_compare_result_t *res, const cmp_rec_index_t *ix,
                             msp_record_cmp_t *m, const msp_record_cmp_t *fwd)
{
    size_t n = 0, first = cmp_span(res, fwd, fwd->order_begin, fwd->order, &n);
    double floor = m->floor;
    int explained = 0, inside = 0;
    for (size_t i = first; i < first + n; i++) {
        const msp_record_cmp_t *x = &res->records[i];
        if (x == fwd)
            continue;
        const msp_record_cmp_t *y = x;
        char *bw = NULL;
        if (m != fwd) { /* the backward of what ran inside */
            bw = cmp_backward_name(x->name);
            y = bw ? cmp_index_find(ix, x->step, x->rank, bw) : NULL;
            free(bw);
            floor = fmax(floor, x->floor); /* forward compute dtype counts too */
            if (!y)
                continue;
        }
        inside = 1;
        floor = fmax(floor, y->floor);
        if (cmp_explains(y, m->out_err))
            explained = 1;
    }
    if (!inside)
        return;
    m->floor = floor;
    cmp_judge(m, cmp_out_discrete(m, res->tensors));
    m->explained_by = explained && m->cause == MSP_CAUSE_INTRODUCED;
}

msp_err cmp_judge_modules(msp_compare_result_t *res)
{
    size_t nm = 0;
    const msp_record_cmp_t **mods = calloc(res->n_records + 1, sizeof *mods);
    cmp_rec_index_t ix = {0};
    msp_err rc = mods ? cmp_index_build(res, &ix)
                      : msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    if (rc) {
        cmp_index_free(&ix);
        free(mods);
        return rc;
    }
    for (size_t i = 0; i < res->n_records; i++) {
        const msp_record_cmp_t *r = &res->records[i];
        if (cmp_is_module(r) && cmp_is_forward(r->name) && r->order_begin >= 0 &&
            r->order_begin <= r->order)
            mods[nm++] = r;
    }
    qsort(mods, nm, sizeof *mods, cmp_span_order);
    for (size_t i = 0; i < nm; i++) {
        msp_record_cmp_t *f = (msp_record_cmp_t *)mods[i];
        cmp_judge_module(res, &ix, f, f);
        char *bw = cmp_backward_name(f->name);
        msp_record_cmp_t *b = bw ? cmp_index_find(&ix, f->step, f->rank, bw) : NULL;
        free(bw);
        if (b)
            cmp_judge_module(res, &ix, b, f);
    }
    cmp_index_free(&ix);
    free(mods);
    return MSP_OK;
}
