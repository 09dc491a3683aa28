/* Verdicts (msprobe's "Accuracy Reached or Not"), our introduced/inherited
 * cause, and msprobe's red/yellow highlighting, applied to finished rows. */
#include "cmp_internal.h"

#include <math.h>
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

void cmp_record_finish(msp_record_cmp_t *rec, msp_tensor_cmp_t *tensors)
{
    msp_tensor_cmp_t *t0 = tensors + rec->first_tensor;
    size_t n = rec->n_tensors;
    int n_inputs = 0, inputs_all_yes = 1, input_disagrees = 0, output_disagrees = 0;
    double in_max_abs = NAN, in_min_cos = NAN;
    rec->worst_cosine = NAN;
    rec->worst_max_abs = NAN;
    rec->verdict = MSP_VERDICT_YES;
    rec->highlight = MSP_HL_NONE;
    for (size_t i = 0; i < n; i++) {
        msp_tensor_cmp_t *t = &t0[i];
        if (t->verdict == MSP_VERDICT_NO)
            rec->verdict = MSP_VERDICT_NO;
        else if (t->verdict == MSP_VERDICT_WARNING && rec->verdict == MSP_VERDICT_YES)
            rec->verdict = MSP_VERDICT_WARNING;
        if (cmp_is_output_row(t)) {
            output_disagrees |= t->agree == 0;
            if (!isnan(t->cosine))
                rec->worst_cosine = isnan(rec->worst_cosine) ? t->cosine
                                                             : fmin(rec->worst_cosine, t->cosine);
            if (!isnan(t->max_abs_err))
                rec->worst_max_abs = isnan(rec->worst_max_abs)
                                         ? t->max_abs_err
                                         : fmax(rec->worst_max_abs, t->max_abs_err);
        } else {
            n_inputs++;
            input_disagrees |= t->agree == 0;
            inputs_all_yes &= t->verdict == MSP_VERDICT_YES;
            double e = t->max_abs_err;
            if (isnan(e) && !isnan(t->max_diff))
                e = fabs(t->max_diff); /* statistics rows */
            if (!isnan(e))
                in_max_abs = isnan(in_max_abs) ? e : fmax(in_max_abs, e);
            if (!isnan(t->cosine))
                in_min_cos = isnan(in_min_cos) ? t->cosine : fmin(in_min_cos, t->cosine);
        }
    }
    rec->cause = MSP_CAUSE_NONE;
    if (cmp_is_forward(rec->name) && output_disagrees)
        rec->cause = input_disagrees ? MSP_CAUSE_INHERITED : MSP_CAUSE_INTRODUCED;

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
