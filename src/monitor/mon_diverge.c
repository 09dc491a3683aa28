/* Where two monitored runs part (include/msprobe/moncmp.h; the rule is
 * msprobe-compare(1), MONITOR OUTPUTS): each series both runs hold is judged
 * on its own. A step's cross-run difference d counts when it passes all of
 *   K x the series' own step-to-step change (the median |x[k] - x[k-1]| of
 *       both runs over the W steps before; over the first W steps while
 *       fewer than 4 such changes came before),
 *   B x the runs' own earlier difference (the median d over the W steps
 *       before: what a run in bf16 or on another device differs by from its
 *       first step on), and
 *   F x the value (a relative floor; a mean against its tensor's max |x|,
 *       zeros against 1; a NaN count against 1/2),
 * and lasts: d passes the same threshold at each of the P - 1 steps after.
 * Runs that agree bit for bit before a step and differ at it diverge at that
 * step, however small the difference (their own noise is nothing).
 * Otherwise the first divergent step is the first step where some series diverges so;
 * of the series diverging there, the one first in the step (weights before
 * it, forward activations in execution order, backward, gradients, optimizer
 * state, weights after) is named. */
#include "mon_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Changes needed before a step's own trailing window is trusted. */
#define MON_MIN_CHANGES 4

void msp_mon_divrule_default(msp_mon_divrule_t *r)
{
    *r = (msp_mon_divrule_t){
        .window = 16, .persist = 3, .k_noise = 8, .k_base = 8, .rel_floor = 1e-2};
}

static int mon_cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* The median of v[0..n) (reordered), 0 when n is 0. */
static double mon_median(double *v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, mon_cmp_dbl);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* |a - b|, 0 when equal (two NaNs too), Inf when one only is finite. */
static double mon_diff(double a, double b)
{
    if (isfinite(a) && isfinite(b))
        return fabs(a - b);
    if ((isnan(a) && isnan(b)) || (isinf(a) && isinf(b) && !signbit(a) == !signbit(b)))
        return 0;
    return INFINITY;
}

/* The value of s at step, NaN when it has none. */
static double mon_at(const msp_mon_series_t *s, int64_t step)
{
    size_t lo = 0, hi = s ? s->n : 0;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->steps[mid] < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    return s && lo < s->n && s->steps[lo] == step ? s->vals[lo] : NAN;
}

/* The scale F multiplies at index i: the value itself, but a mean against
 * its tensor's largest magnitude (a mean near 0 is all cancellation), a
 * ratio of zeros against 1 and a NaN count against 1/2. */
static double mon_scale(const msp_mon_pair_t *p, size_t i, const msp_mon_series_t *mx,
                        const msp_mon_series_t *mn)
{
    const char *m = p->b->metric;
    if (!strcmp(m, "zeros"))
        return 1;
    if (!strcmp(m, "nans"))
        return 0;
    double s = fmax(fabs(p->vb[i]), fabs(p->vc[i]));
    if (!strcmp(m, "mean")) {
        double a = fabs(mon_at(mx, p->steps[i])), b = fabs(mon_at(mn, p->steps[i]));
        s = fmax(s, fmax(isfinite(a) ? a : 0, isfinite(b) ? b : 0));
    }
    return isfinite(s) ? s : 0;
}

/* The threshold of index i (rule above); scratch holds 2W doubles. */
static double mon_threshold(const msp_mon_pair_t *p, size_t i, const msp_mon_divrule_t *r,
                            double scale, double *scratch)
{
    size_t w = (size_t)r->window, n = 0;
    size_t lo = i > w ? i - w + 1 : 1;
    for (size_t k = lo; k < i; k++) {
        double cb = fabs(p->vb[k] - p->vb[k - 1]), cc = fabs(p->vc[k] - p->vc[k - 1]);
        if (isfinite(cb))
            scratch[n++] = cb;
        if (isfinite(cc))
            scratch[n++] = cc;
    }
    if (n < MON_MIN_CHANGES) { /* too few steps before: the first window's */
        n = 0;
        for (size_t k = 1; k < p->n && k <= w; k++) {
            double cb = fabs(p->vb[k] - p->vb[k - 1]), cc = fabs(p->vc[k] - p->vc[k - 1]);
            if (isfinite(cb))
                scratch[n++] = cb;
            if (isfinite(cc))
                scratch[n++] = cc;
        }
    }
    double noise = mon_median(scratch, n);
    n = 0;
    for (size_t k = i > w ? i - w : 0; k < i; k++)
        if (isfinite(p->diff[k]))
            scratch[n++] = p->diff[k];
    double base = mon_median(scratch, n);
    double floor_ = strcmp(p->b->metric, "nans") ? r->rel_floor * scale : 0.5;
    return fmax(fmax(r->k_noise * noise, r->k_base * base), floor_);
}

/* The pair's values, differences and thresholds, and its first divergent
 * step that lasted. */
static msp_err mon_judge(msp_mon_pair_t *p, const msp_mon_run_t *bench, const msp_mon_divrule_t *r,
                         double quantum)
{
    size_t n = 0;
    for (size_t i = 0, j = 0; i < p->b->n && j < p->c->n;) {
        if (p->b->steps[i] == p->c->steps[j])
            n++, i++, j++;
        else if (p->b->steps[i] < p->c->steps[j])
            i++;
        else
            j++;
    }
    p->first = -1;
    p->n = n;
    if (!n)
        return MSP_OK;
    p->steps = malloc(n * sizeof *p->steps);
    p->vb = malloc(n * sizeof *p->vb);
    p->vc = malloc(n * sizeof *p->vc);
    p->diff = malloc(n * sizeof *p->diff);
    p->thr = malloc(n * sizeof *p->thr);
    double *scratch = malloc(2 * (size_t)r->window * sizeof *scratch + 16);
    if (!p->steps || !p->vb || !p->vc || !p->diff || !p->thr || !scratch) {
        free(scratch);
        return msp_fail(MSP_ERR_NOMEM, "out of memory comparing monitor outputs");
    }
    for (size_t i = 0, j = 0, k = 0; i < p->b->n && j < p->c->n;) {
        if (p->b->steps[i] == p->c->steps[j]) {
            p->steps[k] = p->b->steps[i];
            p->vb[k] = p->b->vals[i];
            p->vc[k] = p->c->vals[j];
            p->diff[k] = mon_diff(p->vb[k], p->vc[k]);
            k++, i++, j++;
        } else if (p->b->steps[i] < p->c->steps[j])
            i++;
        else
            j++;
    }
    int mean = !strcmp(p->b->metric, "mean");
    const msp_mon_series_t *mx = mean ? mon_find(bench, p->b, "max") : NULL;
    const msp_mon_series_t *mn = mean ? mon_find(bench, p->b, "min") : NULL;
    for (size_t i = 0; i < n; i++)
        p->thr[i] = fmax(mon_threshold(p, i, r, mon_scale(p, i, mx, mn), scratch), 2 * quantum);
    free(scratch);
    /* the first step the runs share has no earlier difference to stand
     * against: a difference there is how the runs differ from the start
     * (dtype, device, initial weights), kept as the baseline of the steps
     * after it, not a divergence */
    p->from_start = n && p->diff[0] > p->thr[0];
    for (size_t i = 1; i < n && p->first < 0; i++) {
        if (!(p->diff[i] > p->thr[i]))
            continue;
        /* it must last: the P - 1 steps after pass the same threshold; the
         * last step alone counts only for a NaN or Inf in one run */
        size_t after = 0, held = 0;
        for (size_t j = i + 1; j < n && after + 1 < (size_t)r->persist; j++, after++)
            held += p->diff[j] > p->thr[i];
        if (held == after && (after > 0 || isinf(p->diff[i])))
            p->first = (long)i;
    }
    return MSP_OK;
}

/* a before b in a step: phase, then row, then rank, then metric name. */
static int mon_before(const msp_mon_series_t *a, const msp_mon_series_t *b)
{
    if (a->phase != b->phase)
        return a->phase < b->phase;
    if (a->row != b->row)
        return a->row < b->row;
    if (a->rank != b->rank)
        return a->rank < b->rank;
    return strcmp(a->metric, b->metric) < 0;
}

/* The first step of run r whose fingerprints carry a NaN or Inf. */
msp_mon_nan_t msp_mon_first_nan(const msp_mon_run_t *r)
{
    msp_mon_nan_t out = {.step = -1, .rank = -1, .s = NULL};
    for (size_t i = 0; i < r->n; i++) {
        const msp_mon_series_t *s = &r->s[i];
        int count = !strcmp(s->metric, "nans");
        int value = !strcmp(s->metric, "min") || !strcmp(s->metric, "max") ||
                    !strcmp(s->metric, "mean") || !strcmp(s->metric, "norm");
        if (!count && !value)
            continue;
        for (size_t k = 0; k < s->n; k++) {
            if (!(count ? s->vals[k] > 0 : !isfinite(s->vals[k])))
                continue;
            if (out.step < 0 || s->steps[k] < out.step ||
                (s->steps[k] == out.step && mon_before(s, out.s)))
                out = (msp_mon_nan_t){.step = s->steps[k], .rank = s->rank, .s = s};
            break;
        }
    }
    return out;
}

typedef struct {
    int64_t step;
    size_t pair;
} mon_first_t;

static int mon_cmp_first(const void *a, const void *b)
{
    const mon_first_t *x = a, *y = b;
    return x->step < y->step ? -1 : x->step > y->step;
}

/* The first divergent step: the first step t where a series diverges such
 * that the series diverging from t to t + P - 1 span two modules at least,
 * or one of them is NaN or Inf in one run only. A fault travels: to the
 * module that reads its module's output, back through the backward to the
 * modules before it, into the weights; one statistic of one tensor passing
 * its threshold alone is a training's own chaos (bf16's drift in an extreme
 * of one parameter after a loss spike). */
static msp_err mon_pick(msp_mon_cmp_t *c)
{
    mon_first_t *f = malloc((c->n_pairs + 1) * sizeof *f);
    if (!f)
        return msp_fail(MSP_ERR_NOMEM, "out of memory comparing monitor outputs");
    size_t n = 0;
    for (size_t i = 0; i < c->n_pairs; i++)
        if (c->pairs[i].first >= 0)
            f[n++] = (mon_first_t){c->pairs[i].steps[c->pairs[i].first], i};
    qsort(f, n, sizeof *f, mon_cmp_first);
    for (size_t a = 0; a < n && c->div < 0;) {
        int64_t t = f[a].step;
        size_t end = a, at_t = a;
        int spread = 0;
        while (end < n && f[end].step <= t + c->rule.persist - 1) {
            const msp_mon_pair_t *p = &c->pairs[f[end].pair];
            spread |= strcmp(p->b->module, c->pairs[f[a].pair].b->module) != 0 ||
                      isinf(p->diff[p->first]);
            end++;
        }
        while (at_t < n && f[at_t].step == t)
            at_t++;
        if (spread) {
            size_t best = f[a].pair;
            for (size_t k = a + 1; k < at_t; k++)
                if (mon_before(c->pairs[f[k].pair].b, c->pairs[best].b))
                    best = f[k].pair;
            c->div = (long)best;
            c->div_at = c->pairs[best].first;
            c->div_series = end - a;
        }
        a = at_t;
    }
    free(f);
    return MSP_OK;
}

/* Runs that agree bit for bit before some step and differ at it: nothing
 * but a change can make two identical runs part, so that step is the first
 * divergent one however small the difference, when it lasts (some series
 * differs at each of the P - 1 steps after that the runs hold). Runs that
 * differ from their first step on are left to mon_pick. */
static void mon_exact(msp_mon_cmp_t *c)
{
    int64_t first = INT64_MAX, t0 = INT64_MAX;
    long best = -1, best_k = -1;
    for (size_t i = 0; i < c->n_pairs; i++) {
        const msp_mon_pair_t *p = &c->pairs[i];
        if (p->n && p->steps[0] < first)
            first = p->steps[0];
        for (size_t k = 0; k < p->n; k++) {
            if (!(p->diff[k] > 0 || isnan(p->diff[k])))
                continue;
            if (p->steps[k] < t0 || (p->steps[k] == t0 && mon_before(p->b, c->pairs[best].b)))
                t0 = p->steps[k], best = (long)i, best_k = (long)k;
            break;
        }
    }
    if (best < 0 || t0 == first)
        return;
    size_t series = 0;
    for (int64_t j = 0; j < c->rule.persist; j++) {
        int held = 0, present = 0;
        for (size_t i = 0; i < c->n_pairs; i++) {
            const msp_mon_pair_t *p = &c->pairs[i];
            for (size_t k = 0; k < p->n && p->steps[k] <= t0 + j; k++)
                if (p->steps[k] == t0 + j) {
                    present = 1;
                    held |= p->diff[k] > 0 || isnan(p->diff[k]);
                    series += j == 0 && (p->diff[k] > 0 || isnan(p->diff[k]));
                }
        }
        if (present && !held)
            return; /* the runs agree again: a difference that did not last */
    }
    c->div = best;
    c->div_at = best_k;
    c->div_series = series;
    c->exact = 1;
}

msp_err msp_mon_compare(const msp_mon_run_t *bench, const msp_mon_run_t *cmp,
                        const msp_mon_divrule_t *rule, msp_mon_cmp_t **out)
{
    *out = NULL;
    msp_mon_cmp_t *c = calloc(1, sizeof *c);
    if (!c)
        return msp_fail(MSP_ERR_NOMEM, "out of memory comparing monitor outputs");
    if (rule)
        c->rule = *rule;
    else
        msp_mon_divrule_default(&c->rule);
    c->div = c->div_at = c->start = c->near = c->near_at = -1;
    c->quantum = pow(10, -(bench->decimals < cmp->decimals ? bench->decimals : cmp->decimals));
    c->pairs = calloc(bench->n ? bench->n : 1, sizeof *c->pairs);
    msp_err rc = c->pairs ? MSP_OK : msp_fail(MSP_ERR_NOMEM, "out of memory");
    size_t matched = 0;
    for (size_t i = 0; i < bench->n && rc == MSP_OK; i++) {
        const msp_mon_series_t *b = &bench->s[i];
        const msp_mon_series_t *m = mon_find(cmp, b, NULL);
        if (!m) {
            c->only_bench++;
            continue;
        }
        matched++;
        msp_mon_pair_t *p = &c->pairs[c->n_pairs++];
        p->b = b;
        p->c = m;
        rc = mon_judge(p, bench, &c->rule, c->quantum);
    }
    c->only_cmp = cmp->n - matched;
    if (rc == MSP_OK)
        mon_exact(c);
    if (rc == MSP_OK && c->div < 0)
        rc = mon_pick(c);
    for (size_t i = 0; i < c->n_pairs; i++)
        for (size_t k = 1; k < c->pairs[i].n; k++)
            if (c->near < 0 ||
                mon_ratio(&c->pairs[i], k) > mon_ratio(&c->pairs[c->near], (size_t)c->near_at)) {
                c->near = (long)i;
                c->near_at = (long)k;
            }
    for (size_t i = 0; i < c->n_pairs; i++)
        if (c->pairs[i].from_start) {
            c->from_start++;
            if (c->start < 0 || mon_ratio(&c->pairs[i], 0) > mon_ratio(&c->pairs[c->start], 0))
                c->start = (long)i;
        }
    c->nan_bench = msp_mon_first_nan(bench);
    c->nan_cmp = msp_mon_first_nan(cmp);
    if (rc == MSP_OK)
        rc = mon_heat(c);
    if (rc != MSP_OK) {
        msp_mon_cmp_free(c);
        return rc;
    }
    *out = c;
    return MSP_OK;
}

void msp_mon_cmp_free(msp_mon_cmp_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_pairs; i++) {
        msp_mon_pair_t *p = &c->pairs[i];
        free(p->steps), free(p->vb), free(p->vc), free(p->diff), free(p->thr);
    }
    free(c->pairs);
    for (size_t i = 0; i < c->n_modules; i++)
        free(c->modules[i]);
    free(c->modules);
    free(c->steps);
    free(c->heat);
    free(c);
}
