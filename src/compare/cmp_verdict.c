/* Verdicts (msprobe's "Accuracy Reached or Not"), our introduced/inherited
 * cause, and msprobe's red/yellow highlighting, applied to finished rows. */
#include "cmp_internal.h"

#include <math.h>
#include <stdio.h>
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

static double cmp_row_unit(const msp_tensor_cmp_t *t)
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

static int cmp_rec_key_cmp(const void *x, const void *y)
{
    const msp_record_cmp_t *a = *(const msp_record_cmp_t *const *)x;
    const msp_record_cmp_t *b = *(const msp_record_cmp_t *const *)y;
    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    return strcmp(a->name, b->name);
}

char *cmp_forward_name(const char *name)
{
    const char *p = NULL, *q = name;
    while ((q = strstr(q, "backward")) != NULL) {
        if ((q == name || q[-1] == '.') && (q[8] == '\0' || q[8] == '.'))
            p = q;
        q += 8;
    }
    if (!p)
        return NULL;
    return msp_asprintf("%.*sforward%s", (int)(p - name), name, p + 8);
}

msp_err cmp_link_backward(msp_compare_result_t *res)
{
    size_t n = res->n_records;
    const msp_record_cmp_t **idx = calloc(n + 1, sizeof *idx);
    if (!idx)
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    for (size_t i = 0; i < n; i++)
        idx[i] = &res->records[i];
    qsort(idx, n, sizeof *idx, cmp_rec_key_cmp);
    msp_err rc = MSP_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        msp_record_cmp_t *rec = &res->records[i];
        if (cmp_is_forward(rec->name))
            continue;
        char *fw = cmp_forward_name(rec->name);
        if (!fw)
            continue;
        /* bsearch over idx with a probe record */
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            const msp_record_cmp_t *m = idx[mid];
            int c = m->step != rec->step ? (m->step < rec->step ? -1 : 1)
                    : m->rank != rec->rank ? (m->rank < rec->rank ? -1 : 1)
                                           : strcmp(m->name, fw);
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        const msp_record_cmp_t *f = lo < n ? idx[lo] : NULL;
        if (f && f->step == rec->step && f->rank == rec->rank && !strcmp(f->name, fw)) {
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
    free(idx);
    return rc;
}

/* ---- records by name ---------------------------------------------------------- */

/* res's records sorted by step, rank, name, for lookups by name. */
typedef struct cmp_rec_index {
    const msp_record_cmp_t **v;
    size_t n;
} cmp_rec_index_t;

static msp_err cmp_index_build(const msp_compare_result_t *res, cmp_rec_index_t *ix)
{
    ix->n = res->n_records;
    ix->v = calloc(ix->n + 1, sizeof *ix->v);
    if (!ix->v)
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    for (size_t i = 0; i < ix->n; i++)
        ix->v[i] = &res->records[i];
    qsort(ix->v, ix->n, sizeof *ix->v, cmp_rec_key_cmp);
    return MSP_OK;
}

static msp_record_cmp_t *cmp_index_find(const cmp_rec_index_t *ix, int64_t step, int64_t rank,
                                        const char *name)
{
    size_t lo = 0, hi = ix->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const msp_record_cmp_t *m = ix->v[mid];
        int c = m->step != step ? (m->step < step ? -1 : 1)
                : m->rank != rank ? (m->rank < rank ? -1 : 1)
                                  : strcmp(m->name, name);
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    const msp_record_cmp_t *f = lo < ix->n ? ix->v[lo] : NULL;
    return f && f->step == step && f->rank == rank && !strcmp(f->name, name)
               ? (msp_record_cmp_t *)f
               : NULL;
}

/* "X.forward" / "Module.m.T.forward.0" -> the backward record's name. */
static char *cmp_backward_name(const char *name)
{
    const char *p = NULL, *q = name;
    while ((q = strstr(q, "forward")) != NULL) {
        if ((q == name || q[-1] == '.') && (q[7] == '\0' || q[7] == '.'))
            p = q;
        q += 7;
    }
    if (!p)
        return NULL;
    return msp_asprintf("%.*sbackward%s", (int)(p - name), name, p + 7);
}

/* ---- parameters a module record does not show --------------------------------- */

static int cmp_is_optimizer(const msp_record_cmp_t *r)
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
    if (x->arg_diff && x->out_err > x->floor)
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

/* The records of rec's step and rank with order in [from, to), in res's
 * order (records sort by step, rank, order): first index, count. */
static size_t cmp_span(const msp_compare_result_t *res, const msp_record_cmp_t *rec, int64_t from,
                       int64_t to, size_t *count)
{
    size_t lo = 0, hi = res->n_records;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const msp_record_cmp_t *m = &res->records[mid];
        int before = m->step != rec->step ? m->step < rec->step
                     : m->rank != rec->rank ? m->rank < rec->rank
                                            : m->order < from;
        if (before)
            lo = mid + 1;
        else
            hi = mid;
    }
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
    free(ix.v);
    free(mods);
    return MSP_OK;
}

/* ---- ranked suspects ------------------------------------------------------ */

/* The row of "RECORD/ROLE" among the records of the same step and rank. */
static long cmp_find_producer_row(const msp_compare_result_t *res, const cmp_rec_index_t *ix,
                                  const msp_record_cmp_t *at, const char *producer)
{
    const char *slash = strrchr(producer, '/');
    if (!slash)
        return -1;
    char *name = msp_asprintf("%.*s", (int)(slash - producer), producer);
    const msp_record_cmp_t *p = name ? cmp_index_find(ix, at->step, at->rank, name) : NULL;
    size_t rl = name ? strlen(name) : 0;
    free(name);
    for (size_t k = 0; p && k < p->n_tensors; k++) {
        const msp_tensor_cmp_t *t = &res->tensors[p->first_tensor + k];
        const char *nm = t->npu_name ? t->npu_name : t->bench_name;
        if (nm && strlen(nm) > rl + 1 && strcmp(nm + rl + 1, slash + 1) == 0)
            return (long)(p->first_tensor + k);
    }
    return -1;
}

static const char *cmp_role_of(const msp_tensor_cmp_t *t, const msp_record_cmp_t *rec)
{
    const char *nm = t->npu_name ? t->npu_name : t->bench_name;
    size_t rl = strlen(rec->name);
    if (nm && strncmp(nm, rec->name, rl) == 0 && nm[rl] == '.')
        return nm + rl + 1;
    return nm ? nm : "?";
}

/* The dtype whose floor a record was judged against. */
static const char *cmp_floor_dtype(double fl)
{
    return fl >= cmp_floor_for(0x1p-8)    ? "bfloat16"
           : fl >= cmp_floor_for(0x1p-11) ? "float16"
           : fl >= cmp_floor_for(0x1p-24) ? "float32"
           : fl > 0.0                     ? "float64"
                                          : "exact";
}

/* A suspect with its record, for sorting (qsort has no user pointer). */
typedef struct cmp_ranked {
    const msp_record_cmp_t *rec;
    msp_suspect_t s;
    int tier;
} cmp_ranked_t;

/* Earliest step first; inside a step, decisive evidence (replay, a changed
 * argument) before ratios alone, then execution order: blame goes to the
 * earliest record that introduced error, as the records ran (forward,
 * backward and optimizer alike). */
static int cmp_suspect_order(const void *x, const void *y)
{
    const cmp_ranked_t *a = x, *b = y;
    const msp_record_cmp_t *ra = a->rec, *rb = b->rec;
    if (ra->step != rb->step)
        return ra->step < rb->step ? -1 : 1;
    if (a->tier != b->tier)
        return a->tier < b->tier ? -1 : 1;
    if (ra->order != rb->order)
        return ra->order < rb->order ? -1 : 1;
    if (ra->rank != rb->rank)
        return ra->rank < rb->rank ? -1 : 1;
    return a->s.is_gap == b->s.is_gap ? 0 : (a->s.is_gap ? -1 : 1);
}

static char *cmp_fmt_err(double e, char *buf, size_t cap)
{
    if (isnan(e))
        snprintf(buf, cap, "N/A");
    else
        snprintf(buf, cap, "%.3g", e);
    return buf;
}

/* Takes s->reason (NULL: its msp_asprintf ran out of memory), freed on failure. */
static msp_err cmp_push_suspect(msp_compare_result_t *res, size_t *cap, const msp_suspect_t *s)
{
    msp_suspect_t *nv = s->reason ? msp_grow(res->suspects, cap, res->n_suspects, sizeof *nv, 16)
                                  : NULL;
    if (!nv) {
        free(s->reason);
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory for suspects");
    }
    res->suspects = nv;
    res->suspects[res->n_suspects++] = *s;
    return MSP_OK;
}

/* The innermost module forward record of rec's step and rank that ran rec
 * (a module record) inside it, or -1. */
static long cmp_enclosing_module(const msp_compare_result_t *res, size_t r)
{
    const msp_record_cmp_t *rec = &res->records[r];
    if (strncmp(rec->name, "Module.", 7) != 0 || rec->order_begin < 0 || !cmp_is_forward(rec->name))
        return -1;
    long best = -1;
    int64_t span = INT64_MAX;
    for (size_t k = 0; k < res->n_records; k++) {
        const msp_record_cmp_t *e = &res->records[k];
        if (k == r || e->step != rec->step || e->rank != rec->rank || e->order_begin < 0 ||
            strncmp(e->name, "Module.", 7) != 0 || !cmp_is_forward(e->name))
            continue;
        if (e->order_begin <= rec->order_begin && rec->order <= e->order &&
            e->order - e->order_begin < span) {
            span = e->order - e->order_begin;
            best = (long)k;
        }
    }
    return best;
}

/* A changed or unproduced input of a module record was made by code of the
 * module around it that msprobe did not record (its own forward, between
 * its children): name that module, once. 1 when it was named so. */
static int cmp_gap_to_module(msp_compare_result_t *res, size_t *cap, size_t r, size_t ti,
                             double known, double base, msp_err *rc)
{
    long e = cmp_enclosing_module(res, r);
    if (e < 0)
        return 0;
    for (size_t i = 0; i < res->n_suspects; i++)
        if (res->suspects[i].record == e && !res->suspects[i].is_gap)
            return 1;
    const msp_record_cmp_t *rec = &res->records[r], *m = &res->records[e];
    const msp_tensor_cmp_t *t = &res->tensors[ti];
    char a[32], b[32];
    msp_suspect_t s = {e, (long)ti, 0, res->stats_mode != 0, known, t->rel_err,
                       known > 0.0 ? t->rel_err / known : INFINITY,
                       base > 0.0 ? t->rel_err / base : INFINITY, NULL};
    s.reason = msp_asprintf("%sits own code, outside the modules it calls, made %s.%s: error %s, "
                            "above %gx anything recorded before it (%s)",
                            s.from_stats ? "statistics only: " : "", rec->name,
                            cmp_role_of(t, rec), cmp_fmt_err(t->rel_err, a, sizeof a), CMP_AMPLIFY,
                            cmp_fmt_err(known, b, sizeof b));
    (void)m;
    *rc = cmp_push_suspect(res, cap, &s);
    return 1;
}

/* An input no recorded op produced (gap 2) is judged against the worst error
 * any output recorded before it carries (seen: gradients, optimizer updates
 * and the previous step included, since an unrecorded op may combine any of
 * them) and the floor of the coarsest dtype in that step (the unrecorded
 * op's precision is unknown). */
static msp_err cmp_orphan_suspect(msp_compare_result_t *res, size_t *cap, size_t r, size_t ti,
                                  double seen, double step_floor)
{
    const msp_record_cmp_t *rec = &res->records[r];
    const msp_tensor_cmp_t *t = &res->tensors[ti];
    double base = fmax(CMP_AMPLIFY * seen, step_floor);
    if (!(t->rel_err > base))
        return MSP_OK;
    msp_err rc = MSP_OK;
    if (cmp_gap_to_module(res, cap, r, ti, seen, base, &rc))
        return rc;
    char a[32], b[32];
    msp_suspect_t s = {(long)r, (long)ti, 1, res->stats_mode != 0, seen, t->rel_err,
                       seen > 0.0 ? t->rel_err / seen : INFINITY,
                       base > 0.0 ? t->rel_err / base : INFINITY, NULL};
    s.reason = msp_asprintf("%sno recorded op produced %s.%s: an op msprobe did not record "
                            "(a custom kernel, an in-place update, an API outside the dump's "
                            "list) made it; its error %s is above %gx anything recorded before "
                            "it (%s)",
                            s.from_stats ? "statistics only: " : "", rec->name,
                            cmp_role_of(t, rec), cmp_fmt_err(t->rel_err, a, sizeof a),
                            CMP_AMPLIFY, cmp_fmt_err(seen, b, sizeof b));
    return cmp_push_suspect(res, cap, &s);
}

/* The worst finite output error of the step before records[r]'s, on the same
 * rank (records are sorted by step, then rank); 0 when there is none. */
static double cmp_prev_step_worst(const msp_compare_result_t *res, size_t r)
{
    const msp_record_cmp_t *rec = &res->records[r];
    double worst = 0.0;
    long prev_step = -1;
    for (size_t q = r; q-- > 0;) {
        const msp_record_cmp_t *p = &res->records[q];
        if (p->rank != rec->rank || p->step == rec->step)
            continue;
        if (prev_step < 0)
            prev_step = (long)p->step;
        else if ((long)p->step != prev_step)
            break;
        if (!isnan(p->out_err) && !isinf(p->out_err))
            worst = fmax(worst, p->out_err);
    }
    return worst;
}

/* The reason line of a record that introduced error; its tier in *tier.
 * NULL reason with tier -1: not a suspect. */
static char *cmp_record_reason(const msp_compare_result_t *res, const msp_record_cmp_t *rec,
                               int *tier)
{
    char a[32], b[32], fl[32];
    const char *pre = res->stats_mode ? "statistics only: " : "";
    double ein = isnan(rec->in_err) ? 0.0 : rec->in_err;
    *tier = -1;
    if (rec->replay == MSP_RV_INTRODUCED) {
        *tier = 0;
        return msp_asprintf("replay: its output is %s from the float64 replay of its own "
                            "compare-side inputs, above the %s that rounding in its dtype "
                            "explains (replayed %s); it introduced the error%s%s",
                            cmp_fmt_err(rec->replay_err, a, sizeof a),
                            cmp_fmt_err(rec->replay_ref, b, sizeof b),
                            rec->replay_note && *rec->replay_note ? rec->replay_note : "",
                            rec->arg_diff ? "; argument " : "", rec->arg_diff ? rec->arg_diff : "");
    }
    if (rec->replay == MSP_RV_INHERITED || rec->explained_by)
        return NULL;
    if (rec->arg_diff && rec->out_err > rec->floor) {
        *tier = 0;
        return msp_asprintf("%sthe call's arguments differ (%s) and its output error %s is "
                            "above the %s floor %s", pre, rec->arg_diff,
                            cmp_fmt_err(rec->out_err, a, sizeof a), cmp_floor_dtype(rec->floor),
                            cmp_fmt_err(rec->floor, fl, sizeof fl));
    }
    /* An optimizer's update can normalise each element by its gradient's size
     * (Adam): its output error is no multiple of its inputs'. Replay or a
     * changed hyperparameter decides it, ratios never. */
    if (rec->cause != MSP_CAUSE_INTRODUCED || cmp_is_optimizer(rec))
        return NULL;
    /* identical inputs and a different output decide as much as replay does
     * (not for a module, whose parameters are inputs it does not show) */
    *tier = !isnan(rec->in_err) && !(rec->in_err > 0.0) && strncmp(rec->name, "Module.", 7) ? 0 : 1;
    char note[300] = "";
    if (rec->replay == MSP_RV_SKIPPED || rec->replay == MSP_RV_UNFINISHED)
        snprintf(note, sizeof note, " (not replayed: %s)",
                 rec->replay_note ? rec->replay_note : "?");
    if (ein > 0.0)
        return msp_asprintf("%soutput error %s is %.3gx its worst input's %s, above the %s "
                            "floor %s%s",
                            pre, cmp_fmt_err(rec->out_err, a, sizeof a), rec->out_err / ein,
                            cmp_fmt_err(ein, b, sizeof b), cmp_floor_dtype(rec->floor),
                            cmp_fmt_err(rec->floor, fl, sizeof fl), note);
    if (isnan(rec->in_err))
        return msp_asprintf("%sno comparable input; output error %s is above the %s floor %s%s",
                            pre, cmp_fmt_err(rec->out_err, a, sizeof a),
                            cmp_floor_dtype(rec->floor), cmp_fmt_err(rec->floor, fl, sizeof fl),
                            note);
    return msp_asprintf("%sinputs identical on both sides; output error %s is above the %s "
                        "floor %s%s",
                        pre, cmp_fmt_err(rec->out_err, a, sizeof a), cmp_floor_dtype(rec->floor),
                        cmp_fmt_err(rec->floor, fl, sizeof fl), note);
}

/* The gap suspects of one record's inputs: an input that differs from its
 * own producer's output on the same side (gap 1), changed by something
 * msprobe did not record, is a suspect only when its error is above
 * CMP_AMPLIFY times both its producer's and anything recorded before it. */
static msp_err cmp_gap_suspects(msp_compare_result_t *res, const cmp_rec_index_t *ix,
                                size_t *cap, size_t r, double seen, double step_floor)
{
    const msp_record_cmp_t *rec = &res->records[r];
    char a[32], b[32];
    for (size_t k = 0; k < rec->n_tensors; k++) {
        size_t ti = rec->first_tensor + k;
        const msp_tensor_cmp_t *t = &res->tensors[ti];
        if (t->is_output || !t->gap || isnan(t->rel_err))
            continue;
        msp_err rc = MSP_OK;
        if (t->gap == 2) {
            rc = cmp_orphan_suspect(res, cap, r, ti, seen, step_floor);
        } else {
            long pr = t->producer ? cmp_find_producer_row(res, ix, rec, t->producer) : -1;
            double ein = pr >= 0 ? res->tensors[pr].rel_err : NAN;
            double known = fmax(isnan(ein) ? 0.0 : ein, seen);
            double fl = cmp_floor_for(cmp_row_unit(t));
            double base = fmax(CMP_AMPLIFY * known, fl);
            if (!(t->rel_err > base))
                continue;
            if (cmp_gap_to_module(res, cap, r, ti, known, base, &rc)) {
                if (rc)
                    return rc;
                continue;
            }
            msp_suspect_t s = {(long)r, (long)ti, 1, res->stats_mode != 0, ein, t->rel_err,
                               isnan(ein) || ein <= 0.0 ? INFINITY : t->rel_err / ein,
                               base > 0.0 ? t->rel_err / base : INFINITY, NULL};
            s.reason = msp_asprintf("%sgap between %s and %s.%s: the input differs from its "
                                    "producer's output on the same side, so something msprobe "
                                    "did not record (an un-wrapped op, an in-place update, a "
                                    "custom kernel) changed it; error %s -> %s, above %gx "
                                    "anything recorded before it",
                                    s.from_stats ? "statistics only: " : "", t->producer,
                                    rec->name, cmp_role_of(t, rec), cmp_fmt_err(ein, a, sizeof a),
                                    cmp_fmt_err(t->rel_err, b, sizeof b), CMP_AMPLIFY);
            rc = cmp_push_suspect(res, cap, &s);
        }
        if (rc)
            return rc;
    }
    return MSP_OK;
}

msp_err cmp_rank_suspects(msp_compare_result_t *res, int top)
{
    size_t cap = 0;
    double seen = 0.0, step_floor = 0.0;
    cmp_rec_index_t ix = {0};
    msp_err rc = cmp_index_build(res, &ix);
    int *tiers = NULL;
    size_t tcap = 0;
    for (size_t r = 0; r < res->n_records && !rc; r++) {
        msp_record_cmp_t *rec = &res->records[r];
        rec->suspect_rank = 0;
        rec->is_root_cause = 0;
        rec->tier = -1;
        if (r == 0 || rec->step != rec[-1].step || rec->rank != rec[-1].rank) {
            /* parameters and optimizer state have no producer in a step and
             * carry what the earlier steps' gradients put into them: start
             * from the worst error of the previous step of this rank */
            seen = cmp_prev_step_worst(res, r);
            step_floor = 0.0;
            for (size_t q = r; q < res->n_records && res->records[q].step == rec->step &&
                               res->records[q].rank == rec->rank;
                 q++)
                step_floor = fmax(step_floor, res->records[q].floor);
        }
        size_t before = res->n_suspects;
        if ((rc = cmp_gap_suspects(res, &ix, &cap, r, seen, step_floor)))
            break;
        size_t gaps_end = res->n_suspects;
        int tier = -1;
        char *reason = cmp_record_reason(res, rec, &tier);
        if (reason) {
            long worst = -1;
            for (size_t k = 0; k < rec->n_tensors; k++) {
                const msp_tensor_cmp_t *t = &res->tensors[rec->first_tensor + k];
                if (t->is_output && !isnan(t->rel_err) &&
                    (worst < 0 || t->rel_err > res->tensors[worst].rel_err))
                    worst = (long)(rec->first_tensor + k);
            }
            double ein = isnan(rec->in_err) ? 0.0 : rec->in_err;
            msp_suspect_t s = {(long)r, worst, 0, res->stats_mode != 0, rec->in_err,
                               rec->out_err, ein > 0.0 ? rec->out_err / ein : INFINITY,
                               rec->score, reason};
            rec->tier = tier;
            rc = cmp_push_suspect(res, &cap, &s);
        }
        int *nt = rc ? NULL : msp_grow(tiers, &tcap, res->n_suspects, sizeof *tiers, 16);
        if (!rc && !nt)
            rc = msp_fail(MSP_ERR_NOMEM, "compare: out of memory for suspects");
        if (rc)
            break;
        tiers = nt;
        for (size_t i = before; i < res->n_suspects; i++)
            tiers[i] = i < gaps_end ? 1 : tier; /* gaps come from ratios alone */
        if (!isnan(rec->out_err) && !isinf(rec->out_err))
            seen = fmax(seen, rec->out_err);
    }
    if (!rc && res->n_suspects > 1) {
        cmp_ranked_t *v = calloc(res->n_suspects, sizeof *v);
        if (!v) {
            rc = msp_fail(MSP_ERR_NOMEM, "compare: out of memory for suspects");
        } else {
            for (size_t i = 0; i < res->n_suspects; i++)
                v[i] = (cmp_ranked_t){&res->records[res->suspects[i].record], res->suspects[i],
                                      tiers[i]};
            qsort(v, res->n_suspects, sizeof *v, cmp_suspect_order);
            for (size_t i = 0; i < res->n_suspects; i++)
                res->suspects[i] = v[i].s;
            free(v);
        }
    }
    free(tiers);
    free(ix.v);
    if (rc)
        return rc;
    for (size_t i = 0; i < res->n_suspects && (top <= 0 || i < (size_t)top); i++) {
        msp_record_cmp_t *rec = &res->records[res->suspects[i].record];
        if (!rec->suspect_rank)
            rec->suspect_rank = (int)i + 1;
    }
    if (res->n_suspects) {
        res->root_record = res->suspects[0].record;
        res->root_tensor = res->suspects[0].tensor;
        res->records[res->root_record].is_root_cause = 1;
    }
    return MSP_OK;
}
