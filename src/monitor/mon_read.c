/* Reading a monitor output back (include/msprobe/moncmp.h): msprobe's
 * monitor writes one CSV per kind and group of steps, {kind}_{a}-{b}.csv,
 * into one directory per rank, {time}-rank{R}-{id}, under
 * MONITOR_OUTPUT_DIR. Each row holds vpp_stage, name, step, micro_step (the
 * activation files only) and one column per metric. A row whose every
 * metric is "nan" is one msprobe had nothing for (the gradient of a model's
 * input) and is left out; a NaN among finite metrics is kept. */
#include "mon_internal.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The metrics compared; shape, dtype and id are descriptions, not values. */
static const char *const mon_metrics[] = {"min", "max", "mean", "norm", "zeros", "nans"};
#define MON_N_METRICS (sizeof mon_metrics / sizeof mon_metrics[0])

int msp_mon_phase(const char *kind)
{
    static const char *const order[] = {
        "param_origin", "actv",    "actv_grad",  "grad_unreduced", "grad_accumulated",
        "grad_reduced", "exp_avg", "exp_avg_sq", "param_updated"};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (strcmp(kind, order[i]) == 0)
            return (int)i;
    return (int)(sizeof order / sizeof order[0]);
}

/* "grad_reduced_0-4.csv" -> kind "grad_reduced" (n bytes); 0, or -1 when the
 * name is not a monitor CSV. */
static int mon_csv_name(const char *f, size_t *kind_len)
{
    size_t n = strlen(f);
    if (n < 9 || strcmp(f + n - 4, ".csv") != 0)
        return -1;
    size_t i = n - 4, digits = 0;
    while (i > 0 && f[i - 1] >= '0' && f[i - 1] <= '9')
        i--, digits++;
    if (!digits || i == 0 || f[i - 1] != '-')
        return -1;
    i--;
    digits = 0;
    while (i > 0 && f[i - 1] >= '0' && f[i - 1] <= '9')
        i--, digits++;
    if (!digits || i < 2 || f[i - 1] != '_')
        return -1;
    *kind_len = i - 1;
    return 0;
}

/* The rank of "{time}-rank{R}-{id}", or -1. */
static int64_t mon_rank_dir(const char *d)
{
    const char *p = strstr(d, "-rank");
    if (!p || p[5] < '0' || p[5] > '9')
        return -1;
    char *end;
    long long r = strtoll(p + 5, &end, 10);
    return *end == '-' && end - (p + 5) <= 5 ? (int64_t)r : -1;
}

static int mon_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names in dir that keep(name) accepts (a NULL-ended vector). */
static msp_err mon_list(const char *dir, int (*keep)(const char *dir, const char *name),
                        char ***out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    DIR *d = opendir(dir);
    if (!d)
        return msp_fail(MSP_ERR_IO, "monitor output %s: %s", dir, strerror(errno));
    char **v = NULL;
    size_t n = 0, cap = 0;
    msp_err rc = MSP_OK;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.' || !keep(dir, e->d_name))
            continue;
        char **g = msp_grow(v, &cap, n + 1, sizeof *v, 64);
        if (!g || !(g[n] = strdup(e->d_name))) {
            v = g ? g : v;
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory listing %s", dir);
            break;
        }
        v = g;
        n++;
    }
    closedir(d);
    if (n)
        qsort(v, n, sizeof *v, mon_cmp_str);
    *out = v;
    *n_out = n;
    return rc;
}

static void mon_list_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int mon_keep_csv(const char *dir, const char *name)
{
    (void)dir;
    size_t k;
    return mon_csv_name(name, &k) == 0;
}

static int mon_keep_rank(const char *dir, const char *name)
{
    if (mon_rank_dir(name) < 0)
        return 0;
    char *p = msp_asprintf("%s/%s", dir, name);
    int ok = p && msp_is_dir(p);
    free(p);
    return ok;
}

int msp_mon_is_output(const char *dir)
{
    if (!msp_is_dir(dir))
        return 0;
    char **v;
    size_t n;
    if (mon_list(dir, mon_keep_csv, &v, &n) == MSP_OK && n) {
        mon_list_free(v, n);
        return 1;
    }
    mon_list_free(v, n);
    if (mon_list(dir, mon_keep_rank, &v, &n) != MSP_OK || !n) {
        mon_list_free(v, n);
        return 0;
    }
    char *p = msp_asprintf("%s/%s", dir, v[0]);
    char **w = NULL;
    size_t m = 0;
    int yes = p && mon_list(p, mon_keep_csv, &w, &m) == MSP_OK && m;
    mon_list_free(w, m);
    free(p);
    mon_list_free(v, n);
    return yes;
}

/* ---- one file --------------------------------------------------------- */

typedef struct {
    msp_mon_run_t *run;
    const char *path, *kind;
    int64_t rank;
    int col_vpp, col_name, col_step, col_micro;
    int col_metric[MON_N_METRICS];
    size_t width;
} mon_file_t;

typedef struct {
    const msp_mon_run_t *run;
    int64_t rank, vpp, micro;
    const char *kind, *name, *metric;
} mon_key_t;

static uint64_t mon_key_hash(const mon_key_t *k)
{
    uint64_t h = msp_str_hash(k->name, (uint64_t)k->rank * 31 + (uint64_t)k->vpp);
    h ^= msp_str_hash(k->kind, (uint64_t)k->micro + 7);
    return msp_mix64(h ^ msp_str_hash(k->metric, 3));
}

static int mon_key_eq(const void *ctx, size_t i)
{
    const mon_key_t *k = ctx;
    const msp_mon_series_t *s = &k->run->s[i];
    return s->rank == k->rank && s->vpp == k->vpp && s->micro == k->micro &&
           strcmp(s->kind, k->kind) == 0 && strcmp(s->name, k->name) == 0 &&
           strcmp(s->metric, k->metric) == 0;
}

/* The module a row name belongs to: "h.0.ln_1.output" and "h.0.ln_1.weight"
 * -> "h.0.ln_1"; ".input" (the model itself) -> "(root)". */
static char *mon_module_of(const char *kind, const char *name)
{
    const char *dot = strrchr(name, '.');
    size_t n = dot ? (size_t)(dot - name) : strlen(name);
    (void)kind;
    if (!dot && strncmp(kind, "actv", 4) != 0)
        n = 0; /* a parameter of the model itself */
    if (n == 0)
        return strdup("(root)");
    return strndup(name, n);
}

const msp_mon_series_t *mon_find(const msp_mon_run_t *r, const msp_mon_series_t *s,
                                 const char *metric)
{
    mon_key_t k = {r, s->rank, s->vpp, s->micro, s->kind, s->name, metric ? metric : s->metric};
    size_t i = msp_index_find(&r->idx, mon_key_hash(&k), mon_key_eq, &k);
    return i == SIZE_MAX ? NULL : &r->s[i];
}

static msp_mon_series_t *mon_series(mon_file_t *f, const mon_key_t *k)
{
    msp_mon_run_t *r = f->run;
    uint64_t h = mon_key_hash(k);
    size_t i = msp_index_find(&r->idx, h, mon_key_eq, k);
    if (i != SIZE_MAX)
        return &r->s[i];
    msp_mon_series_t *g = msp_grow(r->s, &r->cap, r->n, sizeof *r->s, 256);
    if (!g)
        return NULL;
    r->s = g;
    msp_mon_series_t *s = &r->s[r->n];
    *s = (msp_mon_series_t){.rank = k->rank,
                            .vpp = k->vpp,
                            .micro = k->micro,
                            .kind = strdup(k->kind),
                            .phase = msp_mon_phase(k->kind),
                            .name = strdup(k->name),
                            .module = mon_module_of(k->kind, k->name),
                            .metric = strdup(k->metric),
                            .row_step = INT64_MAX};
    if (!s->kind || !s->name || !s->module || !s->metric || msp_index_put(&r->idx, h, r->n)) {
        free(s->kind), free(s->name), free(s->module), free(s->metric);
        return NULL;
    }
    r->n++;
    return s;
}

/* Digits after the point a number was written with ("1.3e-11": 12): the
 * CSV's resolution, msprobe rounding to ndigits decimals. */
static int mon_decimals(const char *t)
{
    const char *dot = strchr(t, '.'), *e = strpbrk(t, "eE");
    int d = 0;
    if (dot && (!e || dot < e))
        for (const char *p = dot + 1; *p >= '0' && *p <= '9'; p++)
            d++;
    if (e)
        d -= atoi(e + 1);
    return d;
}

static int mon_num(const char *t, double *v)
{
    char *end;
    while (*t == ' ')
        t++;
    if (!*t) { /* an empty cell: nothing measured */
        *v = NAN;
        return 0;
    }
    *v = strtod(t, &end);
    return *end && *end != ' ' ? -1 : 0;
}

static msp_err mon_header(mon_file_t *f, size_t n, const char *const *fields)
{
    f->col_vpp = f->col_name = f->col_step = f->col_micro = -1;
    for (size_t m = 0; m < MON_N_METRICS; m++)
        f->col_metric[m] = -1;
    for (size_t i = 0; i < n; i++) {
        const char *h = fields[i];
        if (!strcmp(h, "vpp_stage"))
            f->col_vpp = (int)i;
        else if (!strcmp(h, "name"))
            f->col_name = (int)i;
        else if (!strcmp(h, "step"))
            f->col_step = (int)i;
        else if (!strcmp(h, "micro_step"))
            f->col_micro = (int)i;
        for (size_t m = 0; m < MON_N_METRICS; m++)
            if (!strcmp(h, mon_metrics[m]))
                f->col_metric[m] = (int)i;
    }
    f->width = n;
    if (f->col_name < 0 || f->col_step < 0)
        return msp_fail(MSP_ERR_FORMAT,
                        "%s: not a monitor CSV: its header has no \"name\" or \"step\" column",
                        f->path);
    return MSP_OK;
}

static msp_err mon_row(void *ud, size_t row, size_t n, const char *const *fields)
{
    mon_file_t *f = ud;
    if (row == 0)
        return mon_header(f, n, fields);
    if (n != f->width)
        return msp_fail(MSP_ERR_FORMAT, "%s: row %zu has %zu fields, the header %zu", f->path,
                        row + 1, n, f->width);
    double step, vpp = 0, micro = -1, v[MON_N_METRICS];
    if (mon_num(fields[f->col_step], &step) || step > floor(step) || step < 0 ||
        (f->col_vpp >= 0 && mon_num(fields[f->col_vpp], &vpp)) ||
        (f->col_micro >= 0 && mon_num(fields[f->col_micro], &micro)))
        return msp_fail(MSP_ERR_FORMAT,
                        "%s: row %zu: step, vpp_stage or micro_step is not a "
                        "number",
                        f->path, row + 1);
    int any = 0;
    for (size_t m = 0; m < MON_N_METRICS; m++) {
        v[m] = NAN;
        if (f->col_metric[m] >= 0 && mon_num(fields[f->col_metric[m]], &v[m]))
            return msp_fail(MSP_ERR_FORMAT, "%s: row %zu: %s is not a number: '%s'", f->path,
                            row + 1, mon_metrics[m], fields[f->col_metric[m]]);
        any |= f->col_metric[m] >= 0 && !isnan(v[m]);
        if (f->col_metric[m] >= 0 && isfinite(v[m])) {
            int d = mon_decimals(fields[f->col_metric[m]]);
            if (d > f->run->decimals)
                f->run->decimals = d;
        }
    }
    if (!any)
        return MSP_OK; /* nothing was measured for this row */
    f->run->rows++;
    for (size_t m = 0; m < MON_N_METRICS; m++) {
        if (f->col_metric[m] < 0)
            continue;
        mon_key_t k = {f->run,         f->rank, (int64_t)vpp,
                       (int64_t)micro, f->kind, fields[f->col_name],
                       mon_metrics[m]};
        msp_mon_series_t *s = mon_series(f, &k);
        if (!s)
            return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", f->path);
        if ((int64_t)step < s->row_step) {
            s->row_step = (int64_t)step;
            s->row = row;
        }
        size_t cap = s->cap;
        int64_t *gs = msp_grow(s->steps, &cap, s->n, sizeof *gs, 32);
        if (gs)
            s->steps = gs;
        cap = s->cap;
        double *gv = gs ? msp_grow(s->vals, &cap, s->n, sizeof *gv, 32) : NULL;
        if (!gs || !gv)
            return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", f->path);
        s->vals = gv;
        s->cap = cap;
        s->steps[s->n] = (int64_t)step;
        s->vals[s->n++] = v[m];
    }
    return MSP_OK;
}

static msp_err mon_read_rank(msp_mon_run_t *r, const char *dir, int64_t rank)
{
    char **v;
    size_t n;
    msp_err rc = mon_list(dir, mon_keep_csv, &v, &n);
    for (size_t i = 0; i < n && rc == MSP_OK; i++) {
        size_t kl;
        mon_csv_name(v[i], &kl);
        char *kind = strndup(v[i], kl), *path = msp_asprintf("%s/%s", dir, v[i]);
        if (!kind || !path)
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", dir);
        else if (strcmp(kind, "stack_info") != 0) {
            mon_file_t f = {.run = r, .path = path, .kind = kind, .rank = rank};
            rc = msp_csv_read(path, 0, mon_row, &f);
            r->files++;
        }
        free(kind);
        free(path);
    }
    mon_list_free(v, n);
    return rc;
}

/* Steps ascending in every series (files come in name order, not step
 * order); a step written twice keeps its last value. */
static void mon_sort_series(msp_mon_series_t *s)
{
    for (size_t i = 1; i < s->n; i++) {
        int64_t st = s->steps[i];
        double v = s->vals[i];
        size_t j = i;
        while (j > 0 && s->steps[j - 1] > st) {
            s->steps[j] = s->steps[j - 1];
            s->vals[j] = s->vals[j - 1];
            j--;
        }
        s->steps[j] = st;
        s->vals[j] = v;
    }
    size_t w = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (w && s->steps[w - 1] == s->steps[i])
            w--;
        s->steps[w] = s->steps[i];
        s->vals[w++] = s->vals[i];
    }
    s->n = w;
}

static msp_err mon_read_root(msp_mon_run_t *r, const char *dir)
{
    char **v;
    size_t n;
    msp_err rc = mon_list(dir, mon_keep_rank, &v, &n);
    for (size_t i = 0; i < n && rc == MSP_OK; i++)
        for (size_t j = i + 1; j < n; j++)
            if (mon_rank_dir(v[i]) == mon_rank_dir(v[j]))
                rc = msp_fail(MSP_ERR_USAGE,
                              "monitor output %s holds two runs of rank %lld (%s and %s): "
                              "give the directory of one run",
                              dir, (long long)mon_rank_dir(v[i]), v[i], v[j]);
    for (size_t i = 0; i < n && rc == MSP_OK; i++) {
        char *p = msp_asprintf("%s/%s", dir, v[i]);
        rc = p ? mon_read_rank(r, p, mon_rank_dir(v[i]))
               : msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", dir);
        free(p);
    }
    mon_list_free(v, n);
    return rc;
}

msp_err msp_mon_read(const char *dir, msp_mon_run_t **out)
{
    *out = NULL;
    if (!msp_mon_is_output(dir))
        return msp_fail(MSP_ERR_FORMAT,
                        "%s is not a monitor output: no {kind}_{a}-{b}.csv in it or in its "
                        "{time}-rank{R}-{id} directories",
                        dir);
    msp_mon_run_t *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(dir))) {
        free(r);
        return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", dir);
    }
    char **v;
    size_t n;
    msp_err rc = mon_list(dir, mon_keep_csv, &v, &n);
    if (rc == MSP_OK) {
        /* a run's own directory: its rank from its name, else 0 */
        const char *base = strrchr(dir, '/');
        base = base && base[1] ? base + 1 : dir;
        int64_t rank = mon_rank_dir(base);
        rc = n ? mon_read_rank(r, dir, rank < 0 ? 0 : rank) : mon_read_root(r, dir);
    }
    mon_list_free(v, n);
    r->first_step = r->last_step = -1;
    for (size_t i = 0; i < r->n && rc == MSP_OK; i++) {
        mon_sort_series(&r->s[i]);
        if (r->s[i].n && (r->first_step < 0 || r->s[i].steps[0] < r->first_step))
            r->first_step = r->s[i].steps[0];
        if (r->s[i].n && r->s[i].steps[r->s[i].n - 1] > r->last_step)
            r->last_step = r->s[i].steps[r->s[i].n - 1];
    }
    if (rc == MSP_OK && !r->rows)
        rc = msp_fail(MSP_ERR_FORMAT, "monitor output %s holds no measured row", dir);
    if (rc != MSP_OK) {
        msp_mon_run_free(r);
        return rc;
    }
    *out = r;
    return MSP_OK;
}

void msp_mon_run_free(msp_mon_run_t *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        msp_mon_series_t *s = &r->s[i];
        free(s->kind), free(s->name), free(s->module), free(s->metric);
        free(s->steps), free(s->vals);
    }
    free(r->s);
    msp_index_free(&r->idx);
    free(r->path);
    free(r);
}
