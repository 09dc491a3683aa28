/* result.html of two monitor outputs compared (msprobe-compare(1), MONITOR
 * OUTPUTS): one self-contained page (common's msp_html_write_page, Chart.js
 * embedded) drawing the step x module heat map with the divergent step
 * marked, a module's trend and the named series' values in both runs. The
 * page's data is one JSON object built here; mon_html.js draws it. */
#include "mon_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern const char msp_mon_html_js[];
extern const char msp_mon_html_css[];

static void mon_json_nan(msp_buf_t *b, const char *key, const msp_mon_nan_t *n)
{
    msp_buf_printf(b, ",\"%s\":", key);
    if (n->step < 0) {
        msp_buf_puts(b, "null");
        return;
    }
    msp_buf_printf(b, "{\"step\":%lld,\"rank\":%lld,\"name\":", (long long)n->step,
                   (long long)n->rank);
    char *t = msp_asprintf("%s %s %s", n->s->kind, n->s->name, n->s->metric);
    msp_buf_json_str(b, t ? t : "");
    free(t);
    msp_buf_puts(b, "}");
}

/* The series shown in full: the divergent one, else the one that came
 * nearest its threshold. */
static const msp_mon_pair_t *mon_named(const msp_mon_cmp_t *c)
{
    if (c->div >= 0)
        return &c->pairs[c->div];
    const msp_mon_pair_t *best = NULL;
    double worst = -1;
    for (size_t i = 0; i < c->n_pairs; i++)
        for (size_t k = 0; k < c->pairs[i].n; k++) {
            const msp_mon_pair_t *p = &c->pairs[i];
            double q = mon_ratio(p, k);
            if (q > worst)
                worst = q, best = p;
        }
    return best;
}

static void mon_json_array(msp_buf_t *b, const char *key, const double *v, size_t n)
{
    msp_buf_printf(b, ",\"%s\":[", key);
    for (size_t i = 0; i < n; i++) {
        if (i)
            msp_buf_puts(b, ",");
        msp_buf_json_num(b, isinf(v[i]) ? NAN : v[i], 9);
    }
    msp_buf_puts(b, "]");
}

static void mon_json_divergence(msp_buf_t *b, const msp_mon_cmp_t *c)
{
    msp_buf_puts(b, ",\"divergence\":");
    if (c->div < 0) {
        msp_buf_puts(b, "null");
        return;
    }
    const msp_mon_pair_t *p = &c->pairs[c->div];
    msp_buf_printf(b, "{\"step\":%lld,\"rank\":%lld,\"series\":%zu,\"module\":",
                   (long long)p->steps[c->div_at], (long long)p->b->rank, c->div_series);
    msp_buf_json_str(b, p->b->module);
    msp_buf_puts(b, ",\"kind\":");
    msp_buf_json_str(b, p->b->kind);
    msp_buf_puts(b, ",\"name\":");
    msp_buf_json_str(b, p->b->name);
    msp_buf_puts(b, ",\"metric\":");
    msp_buf_json_str(b, p->b->metric);
    msp_buf_puts(b, "}");
}

msp_err msp_mon_report_html(const msp_mon_cmp_t *c, const char *bench, const char *cmp,
                            const char *out_dir)
{
    msp_err rc = msp_mkdirs(out_dir);
    if (rc != MSP_OK)
        return rc;
    msp_buf_t b = {0};
    msp_buf_puts(&b, "{\"bench\":");
    msp_buf_json_str(&b, bench);
    msp_buf_puts(&b, ",\"cmp\":");
    msp_buf_json_str(&b, cmp);
    msp_buf_printf(&b,
                   ",\"pairs\":%zu,\"from_start\":%zu,\"rule\":{\"window\":%d,"
                   "\"persist\":%d,\"k_noise\":%g,\"k_base\":%g,\"rel_floor\":%g}",
                   c->n_pairs, c->from_start, c->rule.window, c->rule.persist, c->rule.k_noise,
                   c->rule.k_base, c->rule.rel_floor);
    mon_json_divergence(&b, c);
    mon_json_nan(&b, "nan_bench", &c->nan_bench);
    mon_json_nan(&b, "nan_cmp", &c->nan_cmp);
    msp_buf_puts(&b, ",\"steps\":[");
    for (size_t s = 0; s < c->n_steps; s++)
        msp_buf_printf(&b, "%s%lld", s ? "," : "", (long long)c->steps[s]);
    msp_buf_puts(&b, "],\"modules\":[");
    for (size_t m = 0; m < c->n_modules; m++) {
        if (m)
            msp_buf_puts(&b, ",");
        msp_buf_json_str(&b, c->modules[m]);
    }
    msp_buf_puts(&b, "],\"heat\":[");
    for (size_t s = 0; s < c->n_steps; s++) {
        msp_buf_puts(&b, s ? ",[" : "[");
        for (size_t m = 0; m < c->n_modules; m++) {
            if (m)
                msp_buf_puts(&b, ",");
            msp_buf_json_num(&b, c->heat[s * c->n_modules + m], 4);
        }
        msp_buf_puts(&b, "]");
    }
    msp_buf_puts(&b, "]");
    const msp_mon_pair_t *p = mon_named(c);
    if (p && p->n) {
        msp_buf_puts(&b, ",\"named\":{\"label\":");
        char *t = msp_asprintf("%s %s %s (rank %lld)", p->b->kind, p->b->name, p->b->metric,
                               (long long)p->b->rank);
        msp_buf_json_str(&b, t ? t : "");
        free(t);
        msp_buf_puts(&b, ",\"steps\":[");
        for (size_t k = 0; k < p->n; k++)
            msp_buf_printf(&b, "%s%lld", k ? "," : "", (long long)p->steps[k]);
        msp_buf_puts(&b, "]");
        mon_json_array(&b, "bench", p->vb, p->n);
        mon_json_array(&b, "cmp", p->vc, p->n);
        mon_json_array(&b, "diff", p->diff, p->n);
        mon_json_array(&b, "thr", p->thr, p->n);
        msp_buf_puts(&b, "}");
    }
    msp_buf_puts(&b, "}");
    char *path = msp_asprintf("%s/result.html", out_dir);
    if (b.oom || !path)
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory writing %s/result.html", out_dir);
    else
        rc = msp_html_write_page(path, "msprobe compare: monitor outputs", msp_mon_html_css, b.data,
                                 b.len, msp_mon_html_js);
    free(path);
    msp_buf_free(&b);
    return rc;
}
