/* The step x module heat map of a monitor compare (include/msprobe/moncmp.h):
 * each cell is the largest ratio of cross-run difference to threshold among
 * the module's series at that step (above 1: beyond the runs' own noise).
 * Modules are in the order they first appear in a step (weights' rows, then
 * the forward's), steps ascending; every rank's series fall into one cell. */
#include "mon_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A ratio with a threshold of 0 (a series both runs held constant): any
 * difference is beyond it; shown as this. */
#define MON_HEAT_MAX 1e12

/* diff / thr at index k (a threshold of 0: any difference is infinitely beyond it). */
double mon_ratio(const msp_mon_pair_t *p, size_t k)
{
    return p->thr[k] > 0 ? p->diff[k] / p->thr[k] : p->diff[k] > 0 ? INFINITY : 0;
}

static int mon_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static size_t mon_step_index(const int64_t *steps, size_t n, int64_t st)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (steps[mid] < st)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

typedef struct {
    const char *name;
    int phase;
    size_t row;
} mon_mod_t;

static int mon_cmp_mod(const void *a, const void *b)
{
    const mon_mod_t *x = a, *y = b;
    if (x->phase != y->phase)
        return x->phase - y->phase;
    if (x->row != y->row)
        return x->row < y->row ? -1 : 1;
    return strcmp(x->name, y->name);
}

typedef struct {
    const mon_mod_t *m;
    const char *name;
} mon_mod_key_t;

static int mon_mod_eq(const void *ctx, size_t i)
{
    const mon_mod_key_t *k = ctx;
    return strcmp(k->m[i].name, k->name) == 0;
}

/* The modules, each once, by where it first shows in a step. */
static msp_err mon_modules(msp_mon_cmp_t *c, size_t **of_pair)
{
    mon_mod_t *m = calloc(c->n_pairs + 1, sizeof *m);
    *of_pair = calloc(c->n_pairs + 1, sizeof **of_pair);
    if (!m || !*of_pair) {
        free(m);
        return msp_fail(MSP_ERR_NOMEM, "out of memory drawing the heat map");
    }
    size_t n = 0;
    msp_index_t idx = {0};
    for (size_t i = 0; i < c->n_pairs; i++) {
        const msp_mon_series_t *s = c->pairs[i].b;
        uint64_t h = msp_str_hash(s->module, 11);
        mon_mod_key_t key = {m, s->module};
        size_t k = msp_index_find(&idx, h, mon_mod_eq, &key);
        if (k == SIZE_MAX) {
            m[n] = (mon_mod_t){s->module, s->phase, s->row};
            if (msp_index_put(&idx, h, n)) {
                msp_index_free(&idx);
                free(m);
                return msp_fail(MSP_ERR_NOMEM, "out of memory drawing the heat map");
            }
            k = n++;
        } else if (s->phase < m[k].phase || (s->phase == m[k].phase && s->row < m[k].row)) {
            m[k].phase = s->phase;
            m[k].row = s->row;
        }
    }
    msp_index_free(&idx);
    qsort(m, n, sizeof *m, mon_cmp_mod);
    c->modules = calloc(n + 1, sizeof *c->modules);
    msp_err rc = c->modules ? MSP_OK : msp_fail(MSP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n && rc == MSP_OK; i++) {
        if (!(c->modules[i] = strdup(m[i].name)))
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        else
            c->n_modules = i + 1;
    }
    /* each pair's module by name: a binary search would need another sort;
     * modules are few, pairs many, so a linear look per distinct module */
    for (size_t i = 0; i < c->n_pairs && rc == MSP_OK; i++) {
        const char *mod = c->pairs[i].b->module;
        size_t j = i && !strcmp(c->pairs[i - 1].b->module, mod) ? (*of_pair)[i - 1] : 0;
        while (j < c->n_modules && strcmp(c->modules[j], mod))
            j++;
        if (j == c->n_modules)
            for (j = 0; j < c->n_modules && strcmp(c->modules[j], mod); j++)
                ;
        (*of_pair)[i] = j;
    }
    free(m);
    return rc;
}

msp_err mon_heat(msp_mon_cmp_t *c)
{
    size_t total = 0;
    for (size_t i = 0; i < c->n_pairs; i++)
        total += c->pairs[i].n;
    int64_t *all = malloc((total + 1) * sizeof *all);
    if (!all)
        return msp_fail(MSP_ERR_NOMEM, "out of memory drawing the heat map");
    size_t n = 0;
    for (size_t i = 0; i < c->n_pairs; i++)
        for (size_t k = 0; k < c->pairs[i].n; k++)
            all[n++] = c->pairs[i].steps[k];
    qsort(all, n, sizeof *all, mon_cmp_i64);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || all[u - 1] != all[i])
            all[u++] = all[i];
    c->steps = all;
    c->n_steps = u;
    size_t *of_pair = NULL;
    msp_err rc = mon_modules(c, &of_pair);
    if (rc != MSP_OK) {
        free(of_pair);
        return rc;
    }
    size_t cells = c->n_steps * c->n_modules;
    c->heat = malloc((cells + 1) * sizeof *c->heat);
    if (!c->heat) {
        free(of_pair);
        return msp_fail(MSP_ERR_NOMEM, "out of memory drawing the heat map");
    }
    for (size_t i = 0; i < cells; i++)
        c->heat[i] = NAN;
    for (size_t i = 0; i < c->n_pairs; i++) {
        const msp_mon_pair_t *p = &c->pairs[i];
        for (size_t k = 0; k < p->n; k++) {
            size_t s = mon_step_index(c->steps, c->n_steps, p->steps[k]);
            double r = mon_ratio(p, k);
            if (r > MON_HEAT_MAX || isnan(r))
                r = MON_HEAT_MAX;
            double *cell = &c->heat[s * c->n_modules + of_pair[i]];
            if (isnan(*cell) || r > *cell)
                *cell = r;
        }
    }
    free(of_pair);
    return MSP_OK;
}
