/* msprobe compare on two monitor outputs (msprobe-compare(1), MONITOR
 * OUTPUTS): read both, find the first step where the runs part beyond their
 * own step-to-step noise, write OUT/result.xlsx and OUT/result.html and say
 * it in one line. locate (cmd_locate.c) reads the same lines.
 *
 * The stdout lines are documented in msprobe-compare(1); change them only
 * together with the man page and tests/compare/test_compare_monitor.py. */
#include "cli.h"

#include "msprobe/moncmp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int msp_compare_is_monitor(const char *bench, const char *cmp)
{
    return bench && cmp && (msp_mon_is_output(bench) || msp_mon_is_output(cmp));
}

/* "first NaN/Inf (SIDE): step N rank R KIND NAME METRIC" */
void msp_mon_print_nan(FILE *out, const char *side, const msp_mon_nan_t *n)
{
    if (n->step < 0)
        return;
    msp_tprintf(out, "first NaN/Inf (%s): step %lld rank %lld %s %s %s\n", side, (long long)n->step,
                (long long)n->rank, n->s->kind, n->s->name, n->s->metric);
}

void msp_mon_print_verdict(FILE *out, const msp_mon_cmp_t *c)
{
    if (c->start >= 0) {
        const msp_mon_pair_t *p = &c->pairs[c->start];
        msp_tprintf(out,
                    "differ from the first step: %zu series (most: step %lld rank %lld %s %s "
                    "%s, bench %.9g, compare %.9g): how the runs differ from the start, the "
                    "baseline of the steps after\n",
                    c->from_start, (long long)p->steps[0], (long long)p->b->rank, p->b->kind,
                    p->b->name, p->b->metric, p->vb[0], p->vc[0]);
    }
    if (c->div < 0 && c->near >= 0) {
        const msp_mon_pair_t *p = &c->pairs[c->near];
        size_t k = (size_t)c->near_at;
        msp_tprintf(out,
                    "largest lone difference: step %lld rank %lld %s %s %s, difference %.3g, %.3g "
                    "times its threshold\n",
                    (long long)p->steps[k], (long long)p->b->rank, p->b->kind, p->b->name,
                    p->b->metric, p->diff[k], p->diff[k] / p->thr[k]);
    }
    if (c->div < 0) {
        msp_tprintf(out, "no divergent step: %zu series within their own step-to-step noise\n",
                    c->n_pairs);
        return;
    }
    const msp_mon_pair_t *p = &c->pairs[c->div];
    size_t k = (size_t)c->div_at;
    if (c->exact) {
        msp_tprintf(out,
                    "first divergent step: %lld rank %lld %s (%s %s %s: bench %.9g, compare "
                    "%.9g, difference %.3g; the runs agree bit for bit before this step, %zu "
                    "series differ at it)\n",
                    (long long)p->steps[k], (long long)p->b->rank, p->b->module, p->b->kind,
                    p->b->name, p->b->metric, p->vb[k], p->vc[k], p->diff[k], c->div_series);
        return;
    }
    msp_tprintf(out,
                "first divergent step: %lld rank %lld %s (%s %s %s: bench %.9g, compare %.9g, "
                "difference %.3g over its threshold %.3g; %zu series diverge in steps %lld-%lld)\n",
                (long long)p->steps[k], (long long)p->b->rank, p->b->module, p->b->kind, p->b->name,
                p->b->metric, p->vb[k], p->vc[k], p->diff[k], p->thr[k], c->div_series,
                (long long)p->steps[k], (long long)p->steps[k] + c->rule.persist - 1);
}

int msp_compare_monitor(const char *bench, const char *cmp, const char *out_dir, int quiet,
                        int html)
{
    msp_mon_run_t *b = NULL, *c = NULL;
    msp_mon_cmp_t *res = NULL;
    int rc;
    msp_err err;
    for (int side = 0; side < 2; side++)
        if (!msp_mon_is_output(side ? cmp : bench)) {
            msp_errorf("compare: %s is a monitor output and %s is not: compare two monitor "
                       "outputs, or two dumps",
                       side ? bench : cmp, side ? cmp : bench);
            return MSP_EXIT_USAGE;
        }
    if ((err = msp_mon_read(bench, &b)) != MSP_OK || (err = msp_mon_read(cmp, &c)) != MSP_OK ||
        (err = msp_mon_compare(b, c, NULL, &res)) != MSP_OK) {
        rc = msp_report_error(err);
        goto cleanup;
    }
    if (!res->n_pairs) {
        msp_errorf("compare: the monitor outputs %s and %s share no series (a name, kind and "
                   "metric both hold)",
                   bench, cmp);
        rc = MSP_EXIT_USAGE;
        goto cleanup;
    }
    msp_cli_stop_arm("compare", out_dir);
    msp_cli_stop_stage(MSP_STOP_WRITING);
    if ((err = msp_mon_report_xlsx(res, bench, cmp, out_dir)) != MSP_OK ||
        (html && (err = msp_mon_report_html(res, bench, cmp, out_dir)) != MSP_OK)) {
        rc = msp_report_error(err);
        goto cleanup;
    }
    msp_cli_stop_stage(MSP_STOP_WRITTEN);
    if (!quiet)
        msp_tprintf(stdout,
                    "monitor outputs: %zu series paired over %zu steps (bench only %zu, compare "
                    "only %zu)\n",
                    res->n_pairs, res->n_steps, res->only_bench, res->only_cmp);
    msp_mon_print_nan(stdout, "bench", &res->nan_bench);
    msp_mon_print_nan(stdout, "compare", &res->nan_cmp);
    msp_mon_print_verdict(stdout, res);
    if (!quiet) {
        msp_tprintf(stdout, "report: %s/result.xlsx\n", out_dir);
        if (html)
            msp_tprintf(stdout, "report: %s/result.html\n", out_dir);
    }
    rc = res->div >= 0 ? MSP_EXIT_FAIL : MSP_EXIT_OK;
cleanup:
    msp_mon_cmp_free(res);
    msp_mon_run_free(b);
    msp_mon_run_free(c);
    fflush(stdout);
    return rc;
}
