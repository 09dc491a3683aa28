/* The caller's side of contained reading (fmt_contain.c): the catalogue the
 * reader helper sends (fmt_contain_put.c writes it; the form is described
 * there), parsed with a bounds check at every field, so that no answer, however
 * garbled, can crash the caller, leak, or make it allocate more than the
 * message can describe. Called by fmt_contain.c only; calls nothing of the
 * reader's. */
#include "fmt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading (in the caller) --------------------------------------------------- */

struct msp_wire {
    const unsigned char *p, *end;
    int bad;
};

static void msp_get(struct msp_wire *w, void *dst, size_t n)
{
    if (w->bad || (size_t)(w->end - w->p) < n) {
        w->bad = 1;
        memset(dst, 0, n);
        return;
    }
    memcpy(dst, w->p, n);
    w->p += n;
}

static int64_t msp_get_i64(struct msp_wire *w)
{
    int64_t v;
    msp_get(w, &v, sizeof v);
    return v;
}

static double msp_get_f64(struct msp_wire *w)
{
    double v;
    msp_get(w, &v, sizeof v);
    return v;
}

/* malloc'd string, NULL for a NULL (or on a short or bad message: w->bad) */
static char *msp_get_str(struct msp_wire *w)
{
    uint32_t n;
    msp_get(w, &n, sizeof n);
    if (w->bad || n == UINT32_MAX)
        return NULL;
    if ((size_t)(w->end - w->p) < n) {
        w->bad = 1;
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (!s) {
        w->bad = 1;
        return NULL;
    }
    memcpy(s, w->p, n);
    s[n] = '\0';
    w->p += n;
    return s;
}

static void msp_get_buf(struct msp_wire *w, char *buf, size_t size)
{
    char *s = msp_get_str(w);
    snprintf(buf, size, "%s", s ? s : "");
    free(s);
}

/* A count that fits in what is left of the message (each item takes at
 * least min_bytes), else w->bad: no allocation follows a lie. */
static size_t msp_get_count(struct msp_wire *w, size_t min_bytes)
{
    int64_t n = msp_get_i64(w);
    if (w->bad || n < 0 || (uint64_t)n > (size_t)(w->end - w->p) / min_bytes) {
        w->bad = 1;
        return 0;
    }
    return (size_t)n;
}

static void msp_get_tensor(struct msp_wire *w, msp_tensor_info_t *t)
{
    t->role = msp_get_str(w);
    /* checked as sent: cast first, 2^32 + 1 would pass as float32 */
    int64_t dt = msp_get_i64(w);
    msp_get_buf(w, t->dtype_name, sizeof t->dtype_name);
    int64_t nd = msp_get_i64(w);
    if (nd < 0 || nd > MSP_MAX_NDIM || !t->role || dt < 0 || dt >= MSP_DTYPE_COUNT_) {
        w->bad = 1;
        return;
    }
    t->dtype = (msp_dtype_t)dt;
    t->ndim = (int)nd;
    for (int d = 0; d < t->ndim; d++)
        t->shape[d] = msp_get_i64(w);
    t->numel = msp_get_i64(w);
    t->has_data = msp_get_i64(w) != 0;
    t->has_stats = msp_get_i64(w) != 0;
    t->stats.max = msp_get_f64(w);
    t->stats.min = msp_get_f64(w);
    t->stats.mean = msp_get_f64(w);
    t->stats.norm = msp_get_f64(w);
    t->stats.nan_count = msp_get_i64(w);
    t->stats.inf_count = msp_get_i64(w);
    t->stats.crc32 = (uint32_t)msp_get_i64(w);
    t->offset = msp_get_i64(w);
    t->nbytes = msp_get_i64(w);
    msp_get_buf(w, t->device, sizeof t->device);
    t->requires_grad = msp_get_i64(w) != 0;
    t->producer = msp_get_str(w);
}

/* The /defaults rows at the end of a catalogue message into *defs (*n_defs
 * of them, each string set; sorted by the helper, which sends them sorted
 * by record then key, and checked here so that lookups may rely on it). */
static void msp_get_defaults(struct msp_wire *w, struct msp_attr_row **defs, size_t *n_defs)
{
    size_t nd = msp_get_count(w, 12);
    if (w->bad || !(*defs = calloc(nd ? nd : 1, sizeof **defs))) {
        w->bad = 1;
        return;
    }
    for (size_t i = 0; i < nd && !w->bad; i++) {
        struct msp_attr_row *d = &(*defs)[i];
        *n_defs = i + 1;
        d->record = msp_get_str(w);
        d->key = msp_get_str(w);
        d->value = msp_get_str(w);
        if (!d->record || !d->key || !d->value)
            w->bad = 1;
        else if (i > 0 && strcmp((*defs)[i - 1].record, d->record) > 0)
            w->bad = 1; /* out of order: a lookup would miss rows */
    }
}

/* Fills f (path and impl already set) from a catalogue message; the
 * record attributes go to attrs[i] for record i, the /defaults rows to
 * *defs (freed by the caller with msp_rows_free, also on failure). */
msp_err msp_wire_get_file(const unsigned char *buf, size_t n, msp_dump_file_t *f,
                          struct msp_rattrs **attrs, struct msp_attr_row **defs, size_t *n_defs)
{
    struct msp_wire w = {buf, buf + n, 0};
    uint32_t v = 0;
    if (n < 4 || memcmp(buf, "MSPC", 4) != 0)
        return msp_fail(MSP_ERR_INTERNAL, "file %s: the reader helper gave no catalogue", f->path);
    w.p += 4;
    msp_get(&w, &v, sizeof v);
    if (v != MSP_WIRE_VERSION)
        return msp_fail(MSP_ERR_INTERNAL,
                        "file %s: the reader helper speaks version %u, not %u "
                        "(msprobe-catalogue from another msprobe?)",
                        f->path, v, MSP_WIRE_VERSION);
    msp_get_buf(&w, f->framework, sizeof f->framework);
    msp_get_buf(&w, f->framework_version, sizeof f->framework_version);
    msp_get_buf(&w, f->task, sizeof f->task);
    msp_get_buf(&w, f->dump_mode, sizeof f->dump_mode);
    f->step = msp_get_i64(&w);
    f->rank = msp_get_i64(&w);
    f->world_size = msp_get_i64(&w);
    f->has_index = msp_get_i64(&w) != 0;
    size_t nr = msp_get_count(&w, 28);
    f->records = calloc(nr ? nr : 1, sizeof *f->records);
    *attrs = calloc(nr ? nr : 1, sizeof **attrs);
    if (!f->records || !*attrs)
        return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
    for (size_t i = 0; i < nr && !w.bad; i++) {
        msp_record_info_t *r = &f->records[i];
        struct msp_rattrs *ra = &(*attrs)[i];
        f->n_records = i + 1;
        r->name = msp_get_str(&w);
        r->order = msp_get_i64(&w);
        /* a tensor takes at least 136 bytes (msp_wire_put_file: four
         * empty strings, 4 bytes each, and 15 eight-byte fields) */
        size_t nt = msp_get_count(&w, 136);
        size_t na = msp_get_count(&w, 8);
        if (!r->name)
            w.bad = 1;
        ra->k = calloc(na ? na : 1, sizeof *ra->k);
        ra->v = calloc(na ? na : 1, sizeof *ra->v);
        r->tensors = calloc(nt ? nt : 1, sizeof *r->tensors);
        if (!ra->k || !ra->v || !r->tensors)
            return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
        for (size_t a = 0; a < na && !w.bad; a++) {
            ra->n = a + 1;
            ra->k[a] = msp_get_str(&w);
            ra->v[a] = msp_get_str(&w);
        }
        for (size_t j = 0; j < nt && !w.bad; j++) {
            r->n_tensors = j + 1;
            msp_get_tensor(&w, &r->tensors[j]);
        }
    }
    if (!w.bad)
        msp_get_defaults(&w, defs, n_defs);
    if (w.bad || w.p != w.end)
        return msp_fail(MSP_ERR_INTERNAL, "file %s: the reader helper's answer is malformed",
                        f->path);
    return MSP_OK;
}

int msp_wire_get_error(const unsigned char *buf, size_t n, int64_t *code, char **detail)
{
    struct msp_wire w = {buf, buf + n, 0};
    *code = msp_get_i64(&w);
    *detail = msp_get_str(&w);
    return w.bad ? -1 : 0;
}
