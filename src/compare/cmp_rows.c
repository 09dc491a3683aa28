/* A file pair's rows, records in pairing order: a record row per matched
 * record (its attributes, cmp_attrs.c) and a tensor row per tensor, paired
 * by role. A row is filled from the catalogues (statistics, producer gaps,
 * shape and dtype checks, md5 dumps) or queued as a data job (cmp_data.c)
 * whose metrics cmp_finish_jobs puts on it. */
#include "cmp_internal.h"
#include "cmp_job.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- growing result arrays ------------------------------------------------ */

static msp_err cmp_new_record(cmp_build_t *bld, size_t *idx)
{
    msp_compare_result_t *r = bld->res;
    msp_record_cmp_t *nv = msp_grow(r->records, &bld->cap_rec, r->n_records, sizeof *nv, 64);
    if (!nv)
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory for %zu records", r->n_records + 1);
    r->records = nv;
    *idx = r->n_records++;
    memset(&nv[*idx], 0, sizeof nv[*idx]);
    nv[*idx].order_begin = -1;
    nv[*idx].replay_err = nv[*idx].replay_ref = NAN;
    nv[*idx].comm_peer = -1;
    return MSP_OK;
}

static msp_err cmp_new_tensor(cmp_build_t *bld, size_t *idx)
{
    msp_compare_result_t *r = bld->res;
    msp_tensor_cmp_t *nv = msp_grow(r->tensors, &bld->cap_ten, r->n_tensors, sizeof *nv, 256);
    if (!nv)
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory for %zu tensors", r->n_tensors + 1);
    r->tensors = nv;
    *idx = r->n_tensors++;
    msp_tensor_cmp_t *t = &r->tensors[*idx];
    t->cosine = t->euc_dist = t->max_abs_err = t->max_rel_err = NAN;
    t->one_thousandth_ratio = t->five_thousandths_ratio = NAN;
    t->npu_max = t->npu_min = t->npu_mean = t->npu_norm = NAN;
    t->bench_max = t->bench_min = t->bench_mean = t->bench_norm = NAN;
    t->max_diff = t->min_diff = t->mean_diff = t->norm_diff = NAN;
    t->max_rel_diff = t->min_rel_diff = t->mean_rel_diff = t->norm_rel_diff = NAN;
    t->verdict = MSP_VERDICT_NO;
    t->agree = -1;
    t->rel_err = NAN;
    return MSP_OK;
}

static size_t cmp_file_tensors(const msp_dump_file_t *f)
{
    size_t n = 0;
    for (size_t i = 0; i < f->n_records; i++)
        n += f->records[i].n_tensors;
    return n;
}

/* Room in *items (n held, *cap of room) for more of elem bytes; 0 when out of memory. */
static int cmp_reserve(void **items, size_t *cap, size_t n, size_t more, size_t elem)
{
    void *v = more ? msp_grow(*items, cap, n + more - 1, elem, more) : *items;
    if (v)
        *items = v;
    return v != NULL || !more;
}

msp_err cmp_rows_reserve(cmp_build_t *bld, const msp_dump_file_t *b, const msp_dump_file_t *c)
{
    msp_compare_result_t *r = bld->res;
    size_t nr = b->n_records > c->n_records ? b->n_records : c->n_records;
    size_t bt = cmp_file_tensors(b), ct = cmp_file_tensors(c), nt = bt > ct ? bt : ct;
    void *rec = r->records, *ten = r->tensors;
    int ok = cmp_reserve(&rec, &bld->cap_rec, r->n_records, nr, sizeof *r->records) &&
             cmp_reserve(&ten, &bld->cap_ten, r->n_tensors, nt, sizeof *r->tensors);
    r->records = rec;
    r->tensors = ten;
    return ok ? MSP_OK
              : msp_fail(MSP_ERR_NOMEM, "compare: out of memory for %zu records and %zu tensors",
                         r->n_records + nr, r->n_tensors + nt);
}

static msp_err cmp_set_message(msp_tensor_cmp_t *t, const char *msg)
{
    free(t->err_message);
    t->err_message = strdup(msg ? msg : "");
    return t->err_message ? MSP_OK : msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
}

static int cmp_same_shape(const msp_tensor_info_t *a, const msp_tensor_info_t *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return 0;
    return 1;
}

static void cmp_side_stats(msp_tensor_cmp_t *t, const msp_tensor_info_t *n,
                           const msp_tensor_info_t *b)
{
    if (n && n->has_stats) {
        t->npu_max = n->stats.max;
        t->npu_min = n->stats.min;
        t->npu_mean = n->stats.mean;
        t->npu_norm = n->stats.norm;
    }
    if (b && b->has_stats) {
        t->bench_max = b->stats.max;
        t->bench_min = b->stats.min;
        t->bench_mean = b->stats.mean;
        t->bench_norm = b->stats.norm;
    }
}

/* The stored CRC-32 (0: the file gave none) against the bytes compared: a
 * flipped bit in a tensor's data is named on its row, not compared silently.
 * 1 when a side fails it. */
static int cmp_check_crc(msp_tensor_cmp_t *t, const cmp_job_t *job)
{
    const msp_tensor_info_t *side[2] = {job->nt, job->bt};
    static const char *const who[2] = {"NPU", "bench"};
    for (int k = 0; k < 2; k++) {
        uint32_t want = side[k]->stats.crc32;
        if (!want || want == job->crc[k])
            continue;
        char msg[200];
        snprintf(msg, sizeof msg,
                 "%s tensor data fails its CRC-32 check (file says %08x, data "
                 "read %08x): the dump file is damaged",
                 who[k], (unsigned)want, (unsigned)job->crc[k]);
        cmp_set_message(t, msg);
        t->highlight = MSP_HL_RED;
        return 1;
    }
    return 0;
}

/* ---- building rows --------------------------------------------------------- */

/* |d| / |ref|, 0 when both are 0, +Inf when only ref is. */
static double cmp_rel(double d, double ref)
{
    if (isnan(d) || isnan(ref))
        return NAN;
    if (fabs(ref) > 0.0)
        return d / fabs(ref);
    return d > 0.0 ? INFINITY : 0.0;
}

static int cmp_stat_same(double a, double b)
{
    return (isnan(a) && isnan(b)) || !(a < b || a > b);
}

/* Key: "RECORD/ROLE" compared by its RECORD part. */
static int cmp_producer_key(const void *key, const void *elem)
{
    const char *k = key, *slash = strrchr(k, '/');
    const char *name = (*(const msp_record_info_t *const *)elem)->name;
    size_t rl = (size_t)(slash - k);
    int c = strncmp(k, name, rl);
    return c ? c : (name[rl] ? -1 : 0);
}

/* 1 when t names a producer output in the same file whose content (crc32 and
 * statistics) differs from t's: what the producer returned is not what the
 * consumer received. Unknown producer or no statistics: 0. */
static int cmp_producer_gap(const msp_dump_file_t *f, const msp_record_info_t **byname,
                            const msp_tensor_info_t *t)
{
    if (!f || !byname || !t->producer || !t->has_stats)
        return 0;
    const char *slash = strrchr(t->producer, '/');
    if (!slash)
        return 0;
    const msp_record_info_t **hit = bsearch(t->producer, byname, f->n_records, sizeof *byname,
                                            cmp_producer_key);
    if (hit) {
        const msp_record_info_t *p = *hit;
        for (size_t k = 0; k < p->n_tensors; k++) {
            const msp_tensor_info_t *o = &p->tensors[k];
            if (strcmp(o->role, slash + 1) != 0 || !o->has_stats)
                continue;
            if (o->ndim != t->ndim || o->numel != t->numel)
                return 1;
            if (o->stats.crc32 && t->stats.crc32 && o->stats.crc32 != t->stats.crc32)
                return 1;
            return !cmp_stat_same(o->stats.max, t->stats.max) ||
                   !cmp_stat_same(o->stats.min, t->stats.min) ||
                   !cmp_stat_same(o->stats.mean, t->stats.mean) ||
                   !cmp_stat_same(o->stats.norm, t->stats.norm);
        }
        return 0;
    }
    return 0;
}

/* t's producer when it names a record of f: a link to a record the file
 * does not hold (a dump written before the shim dropped links to the data
 * preparation records it did not write) says nothing about t. */
static const char *cmp_producer_in(const msp_dump_file_t *f, const msp_record_info_t **byname,
                                   const msp_tensor_info_t *t)
{
    if (!t || !t->producer || !strrchr(t->producer, '/'))
        return NULL;
    if (!f || !byname)
        return t->producer;
    return bsearch(t->producer, byname, f->n_records, sizeof *byname, cmp_producer_key)
               ? t->producer
               : NULL;
}

int cmp_file_has_producers(const msp_dump_file_t *f)
{
    for (size_t r = 0; r < f->n_records; r++)
        for (size_t k = 0; k < f->records[r].n_tensors; k++)
            if (f->records[r].tensors[k].producer)
                return 1;
    return 0;
}

/* ---- records' and rows' names (msp_compare_result_t.names) ---------------- */

struct cmp_names {
    struct cmp_names *next;
    size_t used, cap;
    char text[];
};

#define CMP_NAMES_FIRST ((size_t)16 << 10)
#define CMP_NAMES_MAX ((size_t)4 << 20)

/* Joined by copies, once a row, so no format to parse (an msp_asprintf of
 * "/%s/%s" a row was a twentieth of compare's own CPU on a file of small
 * tensors). */
char *cmp_names_join(msp_compare_result_t *r, char lead, const char *a, char sep, const char *b)
{
    b = b ? b : "";
    size_t l = lead != 0, la = strlen(a), ls = sep != 0, lb = strlen(b), n = l + la + ls + lb + 1;
    struct cmp_names *blk = r->names;
    if (!blk || blk->cap - blk->used < n) {
        size_t cap = blk ? blk->cap * 2 : CMP_NAMES_FIRST;
        cap = cap > CMP_NAMES_MAX ? CMP_NAMES_MAX : cap;
        cap = cap < n ? n : cap;
        struct cmp_names *nb = malloc(sizeof *nb + cap);
        if (!nb)
            return NULL;
        nb->next = blk;
        nb->used = 0;
        nb->cap = cap;
        r->names = blk = nb;
    }
    char *s = blk->text + blk->used;
    blk->used += n;
    s[0] = lead;
    memcpy(s + l, a, la);
    s[l + la] = sep;
    memcpy(s + l + la + ls, b, lb + 1);
    return s;
}

int cmp_names_hold(const msp_compare_result_t *r, const char *s)
{
    uintptr_t at = (uintptr_t)s;
    for (const struct cmp_names *b = r->names; s && b; b = b->next)
        if (at >= (uintptr_t)b->text && at - (uintptr_t)b->text < b->cap)
            return 1;
    return 0;
}

void cmp_names_free(msp_compare_result_t *r)
{
    while (r->names) {
        struct cmp_names *next = r->names->next;
        free(r->names);
        r->names = next;
    }
}

/* A dump of msprobe's own (dump.json) rather than ours. */
static int cmp_is_msprobe_dump(const msp_dump_file_t *f)
{
    size_t pl = f && f->path ? strlen(f->path) : 0;
    return pl >= 9 && strcmp(f->path + pl - 9, "dump.json") == 0;
}

/* Where each side's data is (Data_name), its CRC-32 (msprobe's md5) and
 * whether its statistics hold NaN/Inf. */
static msp_err cmp_row_sources(msp_compare_result_t *res, msp_tensor_cmp_t *t,
                               const msp_record_info_t *nrec, const msp_tensor_info_t *n,
                               const msp_record_info_t *brec, const msp_tensor_info_t *b)
{
    const msp_record_info_t *rs[2] = {nrec, brec};
    const msp_tensor_info_t *ts[2] = {n, b};
    char **names[2] = {&t->npu_data_name, &t->bench_data_name};
    uint32_t *crcs[2] = {&t->npu_crc32, &t->bench_crc32};
    int *bad[2] = {&t->npu_nonfinite, &t->bench_nonfinite};
    for (int k = 0; k < 2; k++) {
        const msp_tensor_info_t *x = ts[k];
        if (!x)
            continue;
        *crcs[k] = x->stats.crc32;
        *bad[k] = x->has_stats && x->numel > 0 &&
                  (x->stats.nan_count > 0 || x->stats.inf_count > 0 || !isfinite(x->stats.max) ||
                   !isfinite(x->stats.min));
        if (x->data_name)
            *names[k] = cmp_names_join(res, 0, x->data_name, 0, NULL);
        else if (x->has_data)
            *names[k] = cmp_names_join(res, '/', rs[k]->name, '/', x->role);
        else
            continue;
        if (!*names[k])
            return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    }
    return MSP_OK;
}

/* One tensor row; n or b may be NULL (missing on that side). Either fills the
 * row completely or queues a data job that will. */
/* 1 when the one tensor of a row (n or b) is a module's parameter and the
 * other side's record holds no parameter at all: that dumper left the
 * module's parameters out (msprobe's L0 and mix records carry them, an older
 * dump of ours did not), which says nothing about the values. */
static int cmp_params_left_out(const msp_record_info_t *nrec, const msp_tensor_info_t *n,
                               const msp_record_info_t *brec, const msp_tensor_info_t *b)
{
    const msp_tensor_info_t *one = n ? n : b;
    const msp_record_info_t *other = n ? brec : nrec;
    if (!one || !other || strncmp(one->role, "parameters.", 11) != 0)
        return 0;
    for (size_t i = 0; i < other->n_tensors; i++)
        if (!strncmp(other->tensors[i].role, "parameters.", 11))
            return 0;
    return 1;
}

static msp_err cmp_tensor_row(cmp_ctx_t *cx, cmp_build_t *bld, const msp_record_info_t *nrec,
                              const msp_tensor_info_t *n, const msp_record_info_t *brec,
                              const msp_tensor_info_t *b, int stats_file)
{
    size_t idx = 0;
    msp_err rc = cmp_new_tensor(bld, &idx);
    if (rc)
        return rc;
    msp_tensor_cmp_t *t = &bld->res->tensors[idx];
    const char *role = n ? n->role : b->role;
    /* grad_fn.K: a backward output as msprobe records it (cmp_record_view) */
    t->is_output = strncmp(role, "output", 6) == 0 || strncmp(role, "grad_fn.", 8) == 0;
    t->npu_requires_grad = n ? n->requires_grad != 0 : -1;
    t->bench_requires_grad = b ? b->requires_grad != 0 : -1;
    if (n) {
        t->npu_name = cmp_names_join(bld->res, 0, nrec->name, '.', n->role);
        msp_copy_str(t->npu_dtype, sizeof t->npu_dtype, n->dtype_name);
        msp_shape_str(n->shape, n->ndim, t->npu_shape, sizeof t->npu_shape);
    }
    if (b) {
        t->bench_name = cmp_names_join(bld->res, 0, brec->name, '.', b->role);
        msp_copy_str(t->bench_dtype, sizeof t->bench_dtype, b->dtype_name);
        msp_shape_str(b->shape, b->ndim, t->bench_shape, sizeof t->bench_shape);
    }
    if ((n && !t->npu_name) || (b && !t->bench_name))
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    if ((rc = cmp_row_sources(bld->res, t, nrec, n, brec, b)))
        return rc;
    cmp_side_stats(t, n, b);
    const char *uninit = t->is_output ? cmp_uninit_api(nrec ? nrec->name : brec->name) : NULL;
    if (!t->is_output) {
        const char *prod = cmp_producer_in(cx->cf, cx->cnames, n);
        if (!prod)
            prod = cmp_producer_in(cx->bf, cx->bnames, b);
        if (prod && !(t->producer = cmp_names_join(bld->res, 0, prod, 0, NULL)))
            return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
        t->gap = (n && cmp_producer_gap(cx->cf, cx->cnames, n)) ||
                 (b && cmp_producer_gap(cx->bf, cx->bnames, b));
        /* links recorded, yet none for this float input: an op msprobe did
         * not record made it (or it is a leaf: a parameter, the data) */
        if (!prod && cx->has_producers && msp_dtype_is_float(n ? n->dtype : b->dtype))
            t->gap = 2;
        /* what an allocator of uninitialized memory returned, not written since */
        if (prod && !t->gap)
            uninit = cmp_uninit_api(prod);
    }
    if (uninit) {
        /* garbage on both sides: nothing to compare, nothing to judge (a
         * NaN its bytes happen to spell on one side made nothing) */
        t->gap = 0;
        t->npu_nonfinite = t->bench_nonfinite = 0;
        t->verdict = MSP_VERDICT_YES;
        t->highlight = MSP_HL_NONE;
        char msg[200];
        snprintf(msg, sizeof msg,
                 "uninitialized memory (%s): its values mean nothing, not "
                 "compared",
                 uninit);
        return cmp_set_message(t, msg);
    }
    if (n && n->has_stats &&
        (n->stats.nan_count > 0 || n->stats.inf_count > 0 ||
         (n->numel > 0 && (!isfinite(n->stats.max) || !isfinite(n->stats.min)))))
        t->highlight = MSP_HL_RED; /* NaN/Inf on the NPU side; kept for outputs only */
    if (!n || !b) {
        const char *msg = !nrec   ? "record missing in NPU dump"
                          : !brec ? "record missing in bench dump"
                          : !n    ? "tensor missing in NPU record"
                                  : "tensor missing in bench record";
        /* msprobe's versions wrap different APIs (8.x torch.ones_like, 26
         * not): against msprobe's own dump a record of one side is N/A,
         * as msprobe reports it, not a failure; unless the other side left
         * a record of the same API unpaired too: that is a pairing that
         * failed, and stays No */
        if (cx->stray && (!nrec || !brec))
            msg = !nrec ? "record missing in NPU dump; the NPU dump holds an unpaired record "
                          "of this API or module"
                        : "record missing in bench dump; the bench dump holds an unpaired "
                          "record of this API or module";
        else if ((!nrec || !brec || cmp_params_left_out(nrec, n, brec, b)) &&
                 (cmp_is_msprobe_dump(cx->bf) || cmp_is_msprobe_dump(cx->cf)))
            t->verdict = MSP_VERDICT_NA;
        return cmp_set_message(t, msg);
    }
    if (!cmp_same_shape(n, b)) {
        t->agree = 0;
        if (stats_file || !n->has_data || !b->has_data) {
            /* a statistics dump cannot tell a real divergence from a layout
             * difference: rel_err stays N/A, so no root cause comes from it */
            bld->res->stats_mode = 1;
            return cmp_set_message(t, "Shape of NPU and bench tensor do not match; statistics "
                                      "dump: not used to name a root cause");
        }
        t->rel_err = INFINITY;
        return cmp_set_message(t, "Shape of NPU and bench tensor do not match");
    }
    if (stats_file == 2) {
        /* md5 (hash-only) dumps: msprobe's md5 compare, equal CRC-32 or not;
         * the statistics, when present, fill their columns as well */
        bld->res->stats_mode = 1;
        int nf = 0;
        if (n->has_stats && b->has_stats)
            cmp_fill_diffs(t, cmp_all4(n, b), n->numel, &nf);
        int same = n->stats.crc32 == b->stats.crc32 && n->dtype == b->dtype;
        t->verdict = same ? MSP_VERDICT_YES : MSP_VERDICT_NO;
        char msg[96] = "";
        if (!same)
            snprintf(msg, sizeof msg, "crc32 differs (NPU %08x, bench %08x)",
                     (unsigned)n->stats.crc32, (unsigned)b->stats.crc32);
        return cmp_set_message(t, msg);
    }
    if (stats_file || !n->has_data || !b->has_data) {
        bld->res->stats_mode = 1;
        if (!n->has_stats || !b->has_stats) {
            return cmp_set_message(t, !n->has_stats ? "NPU tensor has no statistics"
                                                    : "bench tensor has no statistics");
        }
        int nf = 0;
        double mag = cmp_fill_diffs(t, cmp_all4(n, b), n->numel, &nf);
        t->rel_err = cmp_rel(fabs(t->npu_norm - t->bench_norm), t->bench_norm);
        t->verdict = MSP_VERDICT_YES;
        const char *msg = "";
        if (nf) {
            t->verdict = MSP_VERDICT_WARNING;
            msg = "NaN/Inf in the statistics of one side only";
        } else if (mag > cx->o->stats_warn) {
            t->verdict = MSP_VERDICT_WARNING;
            msg = "a statistic differs by more than stats_warn of its magnitude";
        }
        return cmp_set_message(t, msg);
    }
    if (!msp_dtype_size(n->dtype) || !msp_dtype_size(b->dtype)) {
        char msg[160];
        snprintf(msg, sizeof msg, "dtype %s cannot be compared",
                 msp_dtype_size(n->dtype) ? b->dtype_name : n->dtype_name);
        return cmp_set_message(t, msg);
    }
    if ((rc = cmp_set_message(t, "")))
        return rc;
    return cmp_add_job(cx, idx, nrec, n, brec, b);
}

/* A tensor of a record under the role it pairs by: its own, or as_role. */
typedef struct cmp_view {
    const msp_tensor_info_t *t;
    char as_role[32];
} cmp_view_t;

static const char *cmp_view_role(const cmp_view_t *v)
{
    return v->as_role[0] ? v->as_role : v->t->role;
}

static int cmp_view_order(const void *x, const void *y)
{
    return cmp_role_cmp(cmp_view_role(x), cmp_view_role(y));
}

/* Our backward record r seen as msprobe dumps it (add_node_view in the
 * shim): output.K is what the attribute "grad_fn_outputs" names at K, our
 * other grads are not compared. 0 when r carries no such attribute. */
static int cmp_grad_fn_view(msp_dump_file_t *f, const msp_record_info_t *r, cmp_view_t *v, size_t n,
                            size_t *kept)
{
    char **k = NULL, **val = NULL, *map = NULL;
    size_t na = 0;
    if (msp_dump_record_attrs(f, r, &k, &val, &na) != MSP_OK) {
        msp_clear_error();
        return 0;
    }
    for (size_t i = 0; i < na && !map; i++)
        if (strcmp(k[i], "grad_fn_outputs") == 0) {
            map = val[i];
            val[i] = NULL;
        }
    msp_free_strings(k, na);
    msp_free_strings(val, na);
    if (!map)
        return 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const char *role = v[i].t->role;
        int grad = strncmp(role, "output.", 7) == 0 || strncmp(role, "grad_fn.", 8) == 0;
        long pos = -1, at = 0;
        for (const char *p = map; grad && *p && pos < 0; at++) {
            size_t len = strcspn(p, ",");
            if (len == strlen(role) && strncmp(p, role, len) == 0)
                pos = at;
            p += len + (p[len] == ',');
        }
        if (grad && pos < 0)
            continue; /* a grad msprobe's record does not hold */
        v[m] = v[i];
        if (pos >= 0)
            snprintf(v[m].as_role, sizeof v[m].as_role, "output.%ld", pos);
        m++;
    }
    free(map);
    *kept = m;
    return 1;
}

/* The tensors of r (NULL: none) in pairing order, each under the role it
 * pairs by: its own, except for one of our backward records compared with
 * msprobe's dump (cmp_grad_fn_view); our grad_fn.* copies are compared only
 * then. The views point into r; the caller frees *out. */
static msp_err cmp_record_view(msp_dump_file_t *f, const msp_record_info_t *r, int other_is_msprobe,
                               cmp_view_t **out, size_t *n_out);

static int cmp_view_has(const cmp_view_t *v, size_t n, const char *role)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(cmp_view_role(&v[i]), role))
            return 1;
    return 0;
}

/* A tensor passed by position on one side of record name and by keyword on
 * the other (F.layer_norm(x, s, w) against F.layer_norm(x, s, weight=w))
 * pairs by the keyword: a role of a that b lacks, input.N (output.N of a
 * backward record, its gradient), takes kwarg.NAME (output.kwarg.NAME) when
 * the signature names position N so and b has that role alone. */
static void cmp_view_by_keyword(cmp_ctx_t *cx, const char *name, cmp_view_t *a, size_t na,
                                const cmp_view_t *b, size_t nb)
{
    char *fwd = NULL;
    for (size_t i = 0; i < na; i++) {
        const char *role = cmp_view_role(&a[i]);
        const char *pre = !strncmp(role, "input.", 6) ? "input." : "output.";
        size_t pl = strlen(pre), dig = strspn(role + pl, "0123456789");
        if (strncmp(role, pre, pl) || !dig || role[pl + dig] || dig > 6 ||
            cmp_view_has(b, nb, role))
            continue;
        if (!fwd && !(fwd = cmp_is_forward(name) ? strdup(name) : cmp_forward_name(name)))
            return;
        char *param = cmp_sig_param(cx, fwd, strtoul(role + pl, NULL, 10)), want[32];
        int fits = param && snprintf(want, sizeof want, "%skwarg.%s", *pre == 'i' ? "" : "output.",
                                     param) < (int)sizeof want;
        free(param);
        if (fits && cmp_view_has(b, nb, want) && !cmp_view_has(a, na, want))
            snprintf(a[i].as_role, sizeof a[i].as_role, "%s", want);
    }
    free(fwd);
    msp_sort(a, na, sizeof *a, cmp_view_order); /* mostly in order already */
}

static msp_err cmp_record_view(msp_dump_file_t *f, const msp_record_info_t *r, int other_is_msprobe,
                               cmp_view_t **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    if (!r)
        return MSP_OK;
    cmp_view_t *v = calloc(r->n_tensors + 1, sizeof *v);
    if (!v)
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    size_t n = 0;
    for (size_t i = 0; i < r->n_tensors; i++)
        v[n++] = (cmp_view_t){&r->tensors[i], ""};
    size_t rl = strlen(r->name);
    int backward = rl > 9 && strcmp(r->name + rl - 9, ".backward") == 0;
    if (!(other_is_msprobe && !cmp_is_msprobe_dump(f) && backward &&
          cmp_grad_fn_view(f, r, v, n, &n))) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (strncmp(v[i].t->role, "grad_fn.", 8) != 0)
                v[m++] = v[i];
        n = m;
    }
    msp_sort(v, n, sizeof *v, cmp_view_order); /* the catalogue sorted the roles */
    *out = v;
    *n_out = n;
    return MSP_OK;
}

/* The data_mapping line (tensor names) that sends compare tensor (rec, role)
 * to a bench tensor, or NULL. */
static const cmp_map_entry_t *cmp_dm_line(const cmp_mapping_t *m, const char *rec, const char *role)
{
    for (size_t e = 0; m && e < m->n; e++)
        if (m->e[e].cmp_role && !strcmp(m->e[e].cmp, rec) && !strcmp(m->e[e].cmp_role, role))
            return &m->e[e];
    return NULL;
}

/* msprobe's -dm (pt_compare's left join of compare tensor names, mapped, on
 * bench tensor names) for bench tensors: one whose namesake on the compare
 * side (ct) a data_mapping line sent elsewhere has no partner left, and is
 * left out of the report as msprobe leaves it; one without a namesake that a
 * line names as its target is left out here, its row being the compare
 * tensor's (cmp_dm_rows). Returns how many of bt are kept. */
static size_t cmp_dm_bench_keep(cmp_ctx_t *cx, const msp_record_info_t *brec,
                                const msp_record_info_t *crec, cmp_view_t *bt, size_t nb,
                                const cmp_view_t *ct, size_t nc)
{
    const cmp_mapping_t *m = cx->map;
    size_t k = 0;
    for (size_t i = 0; i < nb; i++) {
        const char *role = cmp_view_role(&bt[i]);
        int drop = 0;
        if (crec && cmp_view_has(ct, nc, role))
            drop = cmp_dm_line(m, crec->name, role) != NULL;
        for (size_t e = 0; m && e < m->n && !drop && !(crec && cmp_view_has(ct, nc, role)); e++)
            drop = m->e[e].cmp_role && !strcmp(m->e[e].bench, brec->name) &&
                   !strcmp(m->e[e].bench_role, role) &&
                   cmp_name_find(cx->cf, cx->cnames, m->e[e].cmp);
        if (!drop)
            bt[k++] = bt[i];
    }
    return k;
}

/* The rows of crec's tensors a data_mapping line names, each against the
 * bench tensor the line names wherever it is (a one-sided row when the bench
 * dump lacks it); they leave ct, the other tensors pair as usual. */
static msp_err cmp_dm_rows(cmp_ctx_t *cx, cmp_build_t *bld, const msp_record_info_t *crec,
                           cmp_view_t *ct, size_t *nc, int stats_file)
{
    msp_err rc = MSP_OK;
    size_t k = 0;
    for (size_t j = 0; j < *nc; j++) {
        const cmp_map_entry_t *x = cmp_dm_line(cx->map, crec->name, cmp_view_role(&ct[j]));
        if (!x) {
            ct[k++] = ct[j];
            continue;
        }
        const msp_record_info_t *brec = cmp_name_find(cx->bf, cx->bnames, x->bench);
        cmp_view_t *bv = NULL;
        size_t nbv = 0;
        const msp_tensor_info_t *b = NULL;
        if (!rc)
            rc = cmp_record_view(cx->bf, brec, cmp_is_msprobe_dump(cx->cf), &bv, &nbv);
        for (size_t i = 0; i < nbv && !b; i++)
            if (!strcmp(cmp_view_role(&bv[i]), x->bench_role))
                b = bv[i].t;
        free(bv);
        if (!rc)
            rc = cmp_tensor_row(cx, bld, crec, ct[j].t, brec, b, stats_file);
    }
    *nc = k;
    return rc;
}

msp_err cmp_record_rows(cmp_ctx_t *cx, cmp_build_t *bld, int64_t step, int64_t rank,
                        const msp_record_info_t *brec, const msp_record_info_t *crec,
                        int stats_file)
{
    size_t ri = 0;
    msp_err rc = cmp_new_record(bld, &ri);
    if (rc)
        return rc;
    msp_record_cmp_t *rec = &bld->res->records[ri];
    rec->name = cmp_names_join(bld->res, 0, crec ? crec->name : brec->name, 0, NULL);
    rec->bench_name = brec && crec ? cmp_names_join(bld->res, 0, brec->name, 0, NULL) : NULL;
    if (!rec->name || (brec && crec && !rec->bench_name))
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    rec->step = step;
    rec->rank = rank;
    rec->order = crec ? crec->order : brec->order;
    if ((rc = cmp_record_attrs(cx, rec, brec, crec)))
        return rc;
    rec->first_tensor = bld->res->n_tensors;
    cmp_view_t *bt = NULL, *ct = NULL;
    size_t nb = 0, nc = 0, i = 0, j = 0;
    if ((rc = cmp_record_view(cx->bf, brec, cmp_is_msprobe_dump(cx->cf), &bt, &nb)) ||
        (rc = cmp_record_view(cx->cf, crec, cmp_is_msprobe_dump(cx->bf), &ct, &nc)))
        goto cleanup;
    if (cx->map && brec)
        nb = cmp_dm_bench_keep(cx, brec, crec, bt, nb, ct, nc);
    if (cx->map && crec && (rc = cmp_dm_rows(cx, bld, crec, ct, &nc, stats_file)))
        goto cleanup;
    if (brec && crec && strncmp(crec->name, "Module.", 7)) {
        cmp_view_by_keyword(cx, crec->name, bt, nb, ct, nc);
        cmp_view_by_keyword(cx, crec->name, ct, nc, bt, nb);
    }
    while (!rc && (i < nb || j < nc)) {
        int o = i == nb
                    ? 1
                    : (j == nc ? -1 : cmp_role_cmp(cmp_view_role(&bt[i]), cmp_view_role(&ct[j])));
        if (o < 0) {
            rc = cmp_tensor_row(cx, bld, crec, NULL, brec, bt[i++].t, stats_file);
        } else if (o > 0) {
            rc = cmp_tensor_row(cx, bld, crec, ct[j++].t, brec, NULL, stats_file);
        } else {
            rc = cmp_tensor_row(cx, bld, crec, ct[j++].t, brec, bt[i++].t, stats_file);
        }
    }
    bld->res->records[ri].n_tensors = bld->res->n_tensors - bld->res->records[ri].first_tensor;
cleanup:
    free(bt);
    free(ct);
    return rc;
}

void cmp_finish_jobs(cmp_ctx_t *cx, msp_compare_result_t *res)
{
    for (size_t j = 0; j < cx->n_jobs; j++) {
        cmp_job_t *job = &cx->jobs[j];
        msp_tensor_cmp_t *t = &res->tensors[job->row];
        if (job->read_error) { /* metrics stay N/A, verdict No */
            char *msg = msp_asprintf("tensor data cannot be read: %s", job->read_error);
            cmp_set_message(t, msg ? msg : job->read_error);
            free(msg);
            if (!res->n_unreadable++)
                res->first_unreadable = msp_asprintf("%s: %s",
                                                     t->npu_name     ? t->npu_name
                                                     : t->bench_name ? t->bench_name
                                                                     : "?",
                                                     job->read_error);
            free(job->read_error);
            job->read_error = NULL;
            continue;
        }
        msp_metrics_t m;
        int scalar = job->numel == 1;
        cmp_acc_finish(&job->acc, scalar, &m);
        t->cosine = m.cosine;
        t->euc_dist = m.euc_dist;
        t->max_abs_err = m.max_abs_err;
        t->max_rel_err = m.max_rel_err;
        t->one_thousandth_ratio = m.one_thousandth_ratio;
        t->five_thousandths_ratio = m.five_thousandths_ratio;
        if (job->side) { /* else kept from the dump attributes */
            t->npu_max = m.n_max;
            t->npu_min = m.n_min;
            t->npu_mean = m.n_mean;
            t->npu_norm = m.n_norm;
            t->bench_max = m.b_max;
            t->bench_min = m.b_min;
            t->bench_mean = m.b_mean;
            t->bench_norm = m.b_norm;
        }
        /* statistics computed from the data, or both sides' own four */
        cmp_fill_diffs(t, 1, (int64_t)job->numel, NULL);
        if (job->acc.pos_mismatch)
            t->rel_err = INFINITY;
        else
            t->rel_err = cmp_rel(sqrt(job->acc.dd), sqrt(job->acc.bb));
        t->highlight = job->acc.n_nan || job->acc.n_inf ? MSP_HL_RED : MSP_HL_NONE;
        t->npu_nonfinite |= job->acc.n_nan || job->acc.n_inf;
        t->bench_nonfinite |= job->acc.b_nan || job->acc.b_inf;
        t->agree = m.agree;
        t->bytes = (uint64_t)job->nt->nbytes + (uint64_t)job->bt->nbytes;
        if (job->numel == 0)
            t->verdict = MSP_VERDICT_YES; /* nothing to disagree about */
        else
            cmp_tensor_verdict(t, cx->o, scalar);
        if (m.message)
            cmp_set_message(t, m.message);
        res->n_crc_bad += (size_t)cmp_check_crc(t, job);
    }
}
