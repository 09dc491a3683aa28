/* The statistics columns of a tensor row (msprobe-compare(1), "Statistics
 * dumps"): compare minus bench for max, min, mean and norm, msprobe 26's
 * relative errors, and msprobe's warning measure, with the mean's floor of
 * summation-order rounding and the two statistics an integer tensor of
 * msprobe 26 leaves null (MSP_STATS_MAXMIN) left out. */
#include "cmp_internal.h"

#include <float.h>
#include <math.h>

/* npu - bench, and msprobe 26's relative error |diff / bench| x 100 (a
 * percentage; NaN, shown "N/A", when bench is 0). Equal non-finite values
 * (both NaN, same Inf) count as no difference. *mag receives msprobe's
 * warning measure |diff| / (max(|npu|, |bench|) + 1e-10): the 1e-10 keeps two
 * near-zero statistics from warning over nothing. Returns 1 when the two
 * disagree on being finite. */
static int cmp_stat_diff(double n, double b, double *diff, double *rel, double *mag)
{
    if (!isfinite(n) || !isfinite(b)) {
        int same = (isnan(n) && isnan(b)) || (isinf(n) && isinf(b) && (n > 0) == (b > 0));
        *diff = same ? 0.0 : NAN;
        *rel = same ? 0.0 : NAN;
        *mag = same ? 0.0 : NAN;
        return !same;
    }
    *diff = n - b;
    *rel = b > 0.0 || b < 0.0 ? fabs(*diff / b) * 100.0 : NAN;
    *mag = fabs(*diff) / (fmax(fabs(n), fabs(b)) + 1e-10);
    return 0;
}

/* The largest difference two means of the same numel values can show from
 * summation order alone: one side summed in float32 (msprobe's torch), the
 * other in double (ours), so sqrt(numel) roundings of FLT_EPSILON of the
 * largest magnitude, as rounding errors add up at random. A mean near 0
 * (LayerNorm's output, a gradient) is cancellation: its relative difference
 * says nothing, its distance from this floor does. */
static double cmp_mean_floor(const msp_tensor_cmp_t *t, int64_t numel)
{
    double amax = fmax(fmax(fabs(t->npu_max), fabs(t->npu_min)),
                       fmax(fabs(t->bench_max), fabs(t->bench_min)));
    if (!isfinite(amax) || numel <= 0)
        return 0.0;
    return sqrt((double)numel) * FLT_EPSILON * amax;
}

/* 1 when both sides gave all four statistics. */
int cmp_all4(const msp_tensor_info_t *n, const msp_tensor_info_t *b)
{
    return n->has_stats == MSP_STATS_ALL && b->has_stats == MSP_STATS_ALL;
}

/* Fills the diff columns of the statistics both sides hold (max and min
 * always; mean and norm unless a side gave only max and min, see
 * MSP_STATS_MAXMIN); returns the largest warning measure (see above), a mean
 * difference within cmp_mean_floor counting as none. */
double cmp_fill_diffs(msp_tensor_cmp_t *t, int all4, int64_t numel, int *nonfinite_mismatch)
{
    int m = 0;
    double g[4] = {0, 0, 0, 0};
    m |= cmp_stat_diff(t->npu_max, t->bench_max, &t->max_diff, &t->max_rel_diff, &g[0]);
    m |= cmp_stat_diff(t->npu_min, t->bench_min, &t->min_diff, &t->min_rel_diff, &g[1]);
    if (all4) {
        m |= cmp_stat_diff(t->npu_mean, t->bench_mean, &t->mean_diff, &t->mean_rel_diff, &g[2]);
        m |= cmp_stat_diff(t->npu_norm, t->bench_norm, &t->norm_diff, &t->norm_rel_diff, &g[3]);
        if (isfinite(t->mean_diff) && fabs(t->mean_diff) <= cmp_mean_floor(t, numel))
            g[2] = 0.0;
    }
    if (nonfinite_mismatch)
        *nonfinite_mismatch = m;
    return fmax(fmax(g[0], g[1]), fmax(g[2], g[3]));
}
