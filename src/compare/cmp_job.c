/* The pieces of a replay job (cmp_job.h) every caller sends the same way:
 * its limits, the records by name, its kind, a record's attributes and
 * tensors, the sample a large elementwise job is sent as (and whether that
 * sample shows the record's error), and each tensor streamed to the worker. */
#include "cmp_job.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cmp_job_limits(cJSON *job, uint64_t bytes, double deadline, double per_record)
{
    double left = per_record;
    if (deadline > 0) {
        double d = deadline - msp_monotonic();
        left = left > 0 ? fmin(left, d) : d;
    }
    if (left > 0)
        cJSON_AddNumberToObject(job, "limit_s", fmax(1.0, ceil(left)));
    /* what replay needs grows with the job's tensors (float64 copies of the
     * inputs and outputs, each mode's outputs, gradients); a dump that asks
     * for more through its arguments is refused there */
    cJSON_AddNumberToObject(job, "mem", (double)CMP_JOB_MEM_BASE + 16.0 * (double)bytes);
}

/* ---- records by name ------------------------------------------------------ */

static int cmp_name_cmp(const void *x, const void *y)
{
    return strcmp((*(const msp_record_info_t *const *)x)->name,
                  (*(const msp_record_info_t *const *)y)->name);
}

static int cmp_name_key_cmp(const void *key, const void *elem)
{
    return strcmp(key, (*(const msp_record_info_t *const *)elem)->name);
}

const msp_record_info_t **cmp_name_index(const msp_dump_file_t *f)
{
    const msp_record_info_t **v = calloc(f->n_records + 1, sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < f->n_records; i++)
        v[i] = &f->records[i];
    qsort(v, f->n_records, sizeof *v, cmp_name_cmp);
    return v;
}

const msp_record_info_t *cmp_name_find(const msp_dump_file_t *f, const msp_record_info_t **idx,
                                       const char *name)
{
    if (!f || !idx || !name)
        return NULL;
    const msp_record_info_t **hit = bsearch(name, idx, f->n_records, sizeof *idx, cmp_name_key_cmp);
    return hit ? *hit : NULL;
}

/* ---- the pieces of a job ---------------------------------------------------- */

const char *cmp_job_kind(const char *name, const char **why)
{
    if (!strncmp(name, "Optimizer.", 10))
        return "optimizer";
    if (cmp_is_forward(name))
        return "forward";
    char *fw = cmp_forward_name(name);
    if (fw) {
        free(fw);
        return "backward";
    }
    *why = "not a forward, backward or optimizer record";
    return NULL;
}

/* A record's attributes into args (those not there yet), except the call's
 * context (autocast, alias.*), which goes to ctx: each side is replayed in
 * its own context but with the bench side's arguments. */
int cmp_job_add_attrs(cJSON *args, cJSON *ctx, msp_dump_file_t *f, const msp_record_info_t *r)
{
    char **k = NULL, **v = NULL;
    size_t n = 0;
    if (!r)
        return 0;
    if (msp_dump_record_attrs(f, r, &k, &v, &n) != MSP_OK) {
        msp_clear_error();
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        cJSON *into = !strcmp(k[i], "autocast") || !strncmp(k[i], "alias.", 6) ? ctx : args;
        if (into && !cJSON_GetObjectItemCaseSensitive(into, k[i]))
            cJSON_AddStringToObject(into, k[i], v[i]);
    }
    msp_free_strings(k, n);
    msp_free_strings(v, n);
    return 0;
}

/* List rec's tensors (the roles inputs_only allows) in the header and in v. */
const char *cmp_job_add_tensors(cJSON *arr, cmp_job_tensor_t **v, size_t *n, size_t *cap,
                                const msp_record_info_t *rec, const char *tag, int which,
                                uint64_t *bytes)
{
    for (size_t i = 0; i < rec->n_tensors; i++) {
        const msp_tensor_info_t *t = &rec->tensors[i];
        int out = !strncmp(t->role, "output", 6);
        if ((which == CMP_JOB_INPUTS && out) || (which == CMP_JOB_OUTPUTS && !out))
            continue;
        if (!t->has_data)
            return CMP_JOB_STATS_ONLY;
        if (t->dtype == MSP_DTYPE_INVALID || !msp_dtype_size(t->dtype))
            return "a tensor of a dtype msprobe cannot read";
        cmp_job_tensor_t *nv = msp_grow(*v, cap, *n, sizeof **v, 16);
        cJSON *o = cJSON_CreateObject();
        cJSON *sh = cJSON_CreateArray();
        if (!nv || !o || !sh) {
            cJSON_Delete(o);
            cJSON_Delete(sh);
            return "out of memory";
        }
        *v = nv;
        nv[(*n)++] = (cmp_job_tensor_t){rec, t, 1};
        for (int d = 0; d < t->ndim; d++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
        cJSON_AddStringToObject(o, "rec", tag);
        cJSON_AddStringToObject(o, "role", t->role);
        cJSON_AddStringToObject(o, "dtype", msp_dtype_name(t->dtype));
        cJSON_AddItemToObject(o, "shape", sh);
        cJSON_AddNumberToObject(o, "nbytes", (double)t->nbytes);
        cJSON_AddItemToArray(arr, o);
        *bytes += (uint64_t)t->nbytes;
    }
    return NULL;
}

static uint64_t cmp_numel(const msp_tensor_info_t *t)
{
    size_t es = msp_dtype_size(t->dtype);
    return es ? (uint64_t)t->nbytes / es : 0;
}

/* The parameter an optimizer record's role belongs to ("input.param.3",
 * "input.grad.3", "input.state.3.exp_avg", "output.param.3": 3), or -1. */
static long cmp_opt_index(const char *role)
{
    static const char *const pre[] = {"input.param.", "input.grad.", "input.state.",
                                      "output.param."};
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++) {
        size_t l = strlen(pre[i]);
        if (strncmp(role, pre[i], l) || role[l] < '0' || role[l] > '9')
            continue;
        char *e;
        unsigned long v = strtoul(role + l, &e, 10);
        return (*e == '\0' || *e == '.') && v < 1UL << 30 ? (long)v : -1;
    }
    return -1;
}

/* The elements of v[i] that every k-th one covers: 0 when it is sent whole.
 * An optimizer's parameter of at most CMP_JOB_WHOLE_NUMEL elements (a norm's
 * weight, a bias) is sent whole with its gradient and states: every k-th
 * element of it would be one or two, and its error (a bias near zero has a
 * large relative one) would fall between them. */
static uint64_t cmp_sampled_numel(const cmp_job_tensor_t *v, size_t n, size_t i, int opt)
{
    uint64_t m = cmp_numel(v[i].t);
    if (!opt)
        return m;
    long p = cmp_opt_index(v[i].t->role);
    if (p < 0 || m <= 1)
        return 0;
    char want[48];
    snprintf(want, sizeof want, "input.param.%ld", p);
    for (size_t j = 0; j < n; j++)
        if (!strcmp(v[j].t->role, want)) {
            if (cmp_numel(v[j].t) != m)
                return UINT64_MAX; /* not elementwise */
            return m <= CMP_JOB_WHOLE_NUMEL ? 0 : m;
        }
    return UINT64_MAX;
}

uint64_t cmp_job_tensor_every(uint64_t k, const char *kind, const cmp_job_tensor_t *v, size_t n,
                              size_t i)
{
    uint64_t m = cmp_sampled_numel(v, n, i, !strcmp(kind, "optimizer"));
    return k > 1 && m > 1 && m != UINT64_MAX ? k : 1;
}

uint64_t cmp_job_every(const cmp_worker_t *w, const char *kind, const char *name, const char *cls,
                       const cmp_job_tensor_t *v, size_t n)
{
    if (!w->sample_keep || !n)
        return 1;
    int opt = !strcmp(kind, "optimizer");
    uint64_t total = 0;
    if (opt) {
        if (!cls || !cmp_worker_elementwise_optimizer(w, cls))
            return 1;
        for (size_t i = 0; i < n; i++) /* what is sampled: not the small ones */
            if (!strncmp(v[i].t->role, "input.param.", 12) &&
                cmp_numel(v[i].t) > CMP_JOB_WHOLE_NUMEL)
                total += cmp_numel(v[i].t);
    } else {
        /* PREFIX.API.N.PASS: an elementwise API, every tensor of one shape */
        const char *dot = strchr(name, '.');
        const char *num = dot ? strchr(dot + 1, '.') : NULL;
        char api[128];
        if (!num || (size_t)(num - dot - 1) >= sizeof api)
            return 1;
        memcpy(api, dot + 1, (size_t)(num - dot - 1));
        api[num - dot - 1] = '\0';
        if (!cmp_worker_elementwise(w, api))
            return 1;
        for (size_t i = 1; i < n; i++)
            if (v[i].t->ndim != v[0].t->ndim ||
                memcmp(v[i].t->shape, v[0].t->shape, (size_t)v[0].t->ndim * sizeof *v[0].t->shape))
                return 1;
        total = cmp_numel(v[0].t);
    }
    if (total <= w->sample_min)
        return 1;
    for (size_t i = 0; i < n; i++)
        if (cmp_sampled_numel(v, n, i, opt) == UINT64_MAX)
            return 1;
    return (total + w->sample_keep - 1) / w->sample_keep;
}

void cmp_job_sample(uint64_t k, const char *kind, cmp_job_tensor_t *v, size_t n, cJSON *arr,
                    uint64_t *bytes)
{
    cJSON *it = arr ? arr->child : NULL;
    for (size_t i = 0; i < n && it; i++, it = it->next) {
        if (cmp_job_tensor_every(k, kind, v, n, i) == 1)
            continue;
        uint64_t m = cmp_numel(v[i].t);
        uint64_t keep = cmp_job_sample_numel(m, k), nb = keep * msp_dtype_size(v[i].t->dtype);
        v[i].every = k;
        *bytes = *bytes - (uint64_t)v[i].t->nbytes + nb;
        cJSON *sh = cJSON_CreateArray();
        if (sh)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)keep));
        cJSON_ReplaceItemInObjectCaseSensitive(it, "shape", sh);
        cJSON_ReplaceItemInObjectCaseSensitive(it, "nbytes", cJSON_CreateNumber((double)nb));
    }
}

/* Element i of a chunk of dtype dt as a double; 0 when dt is not a float. */
static double cmp_elem(msp_dtype_t dt, const unsigned char *p, size_t i)
{
    switch (dt) {
    case MSP_DTYPE_FLOAT32: {
        float f;
        memcpy(&f, p + i * 4, 4);
        return f;
    }
    case MSP_DTYPE_FLOAT64: {
        double d;
        memcpy(&d, p + i * 8, 8);
        return d;
    }
    case MSP_DTYPE_FLOAT16:
    case MSP_DTYPE_BFLOAT16: {
        uint16_t h;
        memcpy(&h, p + i * 2, 2);
        return dt == MSP_DTYPE_FLOAT16 ? msp_half_to_float(h) : msp_bf16_to_float(h);
    }
    default:
        return 0.0;
    }
}

uint64_t cmp_job_sample_numel(uint64_t m, uint64_t k)
{
    uint64_t span = CMP_JOB_BLOCK * k, rest = m % span;
    return m / span * CMP_JOB_BLOCK + (rest < CMP_JOB_BLOCK ? rest : CMP_JOB_BLOCK);
}

/* Into buf, the next n elements of es bytes of the sample of one in k of a
 * tensor of m elements read through s, whose element *at (a multiple of the
 * block, or inside a block) is next: the blocks between are passed over. */
static msp_err cmp_sample_read(msp_tensor_stream_t *s, uint64_t m, uint64_t k, size_t es,
                               uint64_t *at, unsigned char *buf, size_t n)
{
    if (k <= 1) /* the whole tensor */
        return msp_tensor_stream_read(s, buf, n * es);
    uint64_t span = CMP_JOB_BLOCK * k;
    while (n) {
        uint64_t in = *at % span;
        if (in >= CMP_JOB_BLOCK) { /* between blocks: on to the next one */
            uint64_t skip = span - in < m - *at ? span - in : m - *at;
            msp_err rc = msp_tensor_stream_skip(s, skip * es);
            if (rc)
                return rc;
            *at += skip;
            continue;
        }
        uint64_t run = CMP_JOB_BLOCK - in < m - *at ? CMP_JOB_BLOCK - in : m - *at;
        size_t take = run < n ? (size_t)run : n;
        msp_err rc = msp_tensor_stream_read(s, buf, take * es);
        if (rc)
            return rc;
        buf += take * es;
        n -= take;
        *at += take;
    }
    return MSP_OK;
}

double cmp_sampled_err(msp_dump_file_t *cf, const msp_record_info_t *crec,
                       const msp_tensor_info_t *ct, msp_dump_file_t *bf,
                       const msp_record_info_t *brec, const msp_tensor_info_t *bt, uint64_t k)
{
    msp_dtype_t cd = ct->dtype, bd = bt->dtype;
    int fl = (cd == MSP_DTYPE_FLOAT32 || cd == MSP_DTYPE_FLOAT64 || cd == MSP_DTYPE_FLOAT16 ||
              cd == MSP_DTYPE_BFLOAT16) &&
             (bd == MSP_DTYPE_FLOAT32 || bd == MSP_DTYPE_FLOAT64 || bd == MSP_DTYPE_FLOAT16 ||
              bd == MSP_DTYPE_BFLOAT16);
    uint64_t n = cmp_numel(ct);
    if (!fl || !k || n != cmp_numel(bt) || !ct->has_data || !bt->has_data)
        return NAN;
    uint64_t keep = k > 1 ? cmp_job_sample_numel(n, k) : n, cat = 0, bat = 0;
    size_t ce = msp_dtype_size(cd), be = msp_dtype_size(bd), chunk = (size_t)1 << 16;
    unsigned char *cb = malloc(chunk * ce), *bb = malloc(chunk * be);
    msp_tensor_stream_t *cs = NULL, *bs = NULL;
    double dd = 0.0, nb = 0.0, r = NAN;
    if (!cb || !bb || msp_tensor_stream_open(cf, crec, ct, &cs) != MSP_OK ||
        msp_tensor_stream_open(bf, brec, bt, &bs) != MSP_OK) {
        msp_clear_error();
        goto done;
    }
    for (uint64_t got = 0; got < keep;) {
        size_t m = keep - got < chunk ? (size_t)(keep - got) : chunk;
        if (cmp_sample_read(cs, n, k, ce, &cat, cb, m) != MSP_OK ||
            cmp_sample_read(bs, n, k, be, &bat, bb, m) != MSP_OK) {
            msp_clear_error();
            goto done;
        }
        for (size_t i = 0; i < m; i++) {
            double x = cmp_elem(cd, cb, i), y = cmp_elem(bd, bb, i);
            dd += (x - y) * (x - y);
            nb += y * y;
        }
        got += m;
    }
    r = nb > 0.0 ? sqrt(dd / nb) : (dd > 0.0 ? INFINITY : 0.0);
done:
    msp_tensor_stream_close(cs);
    msp_tensor_stream_close(bs);
    free(cb);
    free(bb);
    return r;
}

int cmp_worker_send_tensor(cmp_worker_t *w, msp_dump_file_t *f, const cmp_job_tensor_t *x,
                           void *buf, size_t bufsz, double deadline)
{
    msp_tensor_stream_t *s = NULL;
    if (msp_tensor_stream_open(f, x->rec, x->t, &s) != MSP_OK)
        return -3;
    size_t es = msp_dtype_size(x->t->dtype);
    uint64_t k = x->every > 1 ? x->every : 1, m = cmp_numel(x->t), at = 0;
    uint64_t left = k > 1 ? cmp_job_sample_numel(m, k) : (uint64_t)x->t->nbytes / es;
    size_t per = bufsz / es; /* chunks of whole elements */
    int r = 0;
    while (left && !r) {
        size_t n = left < per ? (size_t)left : per;
        if (cmp_sample_read(s, m, k, es, &at, buf, n) != MSP_OK) {
            r = -3;
            break;
        }
        r = cmp_worker_send(w, buf, n * es, deadline);
        left -= n;
    }
    msp_tensor_stream_close(s);
    return r;
}
