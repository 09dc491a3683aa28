/* The caller's side of contained reading (fmt_contain.c): the catalogue the
 * reader helper sends (fmt_contain_put.c writes it; the form is described
 * there), parsed with a bounds check at every field, so that no answer, however
 * garbled, can crash the caller, leak, or make it allocate more than the
 * message can describe. A compact statistics file comes as its tables,
 * whose catalogue fmt_compact.c builds and checks here, as the reader does
 * in process. Called by fmt_contain.c only; calls nothing of the reader's
 * libhdf5 code. */
#include "fmt_compact.h"
#include "fmt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading (in the caller) --------------------------------------------------- */

/* A string into a fixed field (the helper sends them from such fields). */
static void msp_get_buf(msp_wire_rd_t *w, char *buf, size_t size)
{
    msp_wget_fixed(w, buf, size);
}

/* The file's names, roles and producers copied into one block, f->strings
 * (which msp_dump_free frees whole): a string of len bytes took 8 + len in
 * the message, so a block of the message's size holds them all with their
 * NULs, and is never moved. A malloc a string, and a free each again, were
 * a twentieth of compare's own work on small tensors. */
struct msp_str_block {
    char *p;
    size_t at, cap;
};

/* The next string of w, NUL-ended, in b; NULL for a NULL string (or a bad
 * message: w->bad set). */
static char *msp_get_str(msp_wire_rd_t *w, struct msp_str_block *b)
{
    return msp_wget_str_in(w, b->p, &b->at, b->cap);
}

static void msp_get_tensor(msp_wire_rd_t *w, struct msp_str_block *b, msp_tensor_info_t *t)
{
    t->role = msp_get_str(w, b);
    /* checked as sent: cast first, 2^32 + 1 would pass as float32 */
    int64_t dt = msp_wget_i64(w);
    msp_get_buf(w, t->dtype_name, sizeof t->dtype_name);
    int64_t nd = msp_wget_i64(w);
    if (nd < 0 || nd > MSP_MAX_NDIM || !t->role || dt < 0 || dt >= MSP_DTYPE_COUNT_) {
        w->bad = 1;
        return;
    }
    t->dtype = (msp_dtype_t)dt;
    t->ndim = (int)nd;
    for (int d = 0; d < t->ndim; d++)
        t->shape[d] = msp_wget_i64(w);
    t->numel = msp_wget_i64(w);
    t->has_data = msp_wget_i64(w) != 0;
    t->has_stats = msp_wget_i64(w) != 0;
    t->stats.max = msp_wget_f64(w);
    t->stats.min = msp_wget_f64(w);
    t->stats.mean = msp_wget_f64(w);
    t->stats.norm = msp_wget_f64(w);
    t->stats.nan_count = msp_wget_i64(w);
    t->stats.inf_count = msp_wget_i64(w);
    t->stats.crc32 = (uint32_t)msp_wget_i64(w);
    t->offset = msp_wget_i64(w);
    t->nbytes = msp_wget_i64(w);
    msp_get_buf(w, t->device, sizeof t->device);
    t->requires_grad = msp_wget_i64(w) != 0;
    t->producer = msp_get_str(w, b);
}

/* The /defaults rows at the end of a catalogue message into *defs (*n_defs
 * of them, each string set; sorted by the helper, which sends them sorted
 * by record then key, and checked here so that lookups may rely on it). */
static void msp_get_defaults(msp_wire_rd_t *w, struct msp_attr_row **defs, size_t *n_defs)
{
    size_t nd = msp_wget_count(w, 24);
    if (w->bad || !(*defs = calloc(nd ? nd : 1, sizeof **defs))) {
        w->bad = 1;
        return;
    }
    for (size_t i = 0; i < nd && !w->bad; i++) {
        struct msp_attr_row *d = &(*defs)[i];
        *n_defs = i + 1;
        d->record = msp_wget_str(w);
        d->key = msp_wget_str(w);
        d->value = msp_wget_str(w);
        if (!d->record || !d->key || !d->value)
            w->bad = 1;
        else if (i > 0 && strcmp((*defs)[i - 1].record, d->record) > 0)
            w->bad = 1; /* out of order: a lookup would miss rows */
    }
}

/* The answer's kind and version, then the file's root fields (fmt_contain_put.c's
 * msp_put_root). */
static msp_err msp_get_root(msp_wire_rd_t *w, msp_dump_file_t *f)
{
    uint32_t v = 0;
    msp_wget(w, &v, sizeof v);
    if (v != MSP_WIRE_VERSION)
        return msp_fail(MSP_ERR_INTERNAL,
                        "file %s: the reader helper speaks version %u, not %u "
                        "(msprobe-catalogue from another msprobe?)",
                        f->path, v, MSP_WIRE_VERSION);
    msp_get_buf(w, f->framework, sizeof f->framework);
    msp_get_buf(w, f->framework_version, sizeof f->framework_version);
    msp_get_buf(w, f->task, sizeof f->task);
    msp_get_buf(w, f->dump_mode, sizeof f->dump_mode);
    f->step = msp_wget_i64(w);
    f->rank = msp_wget_i64(w);
    f->world_size = msp_wget_i64(w);
    return MSP_OK;
}

/* A table of rows of size bytes (u64 count, the bytes) into a malloc'd
 * copy (aligned for its rows, as the message's bytes need not be). */
static void *msp_get_table(msp_wire_rd_t *w, size_t size, size_t *n)
{
    *n = msp_wget_count(w, size);
    void *rows = w->bad || !*n ? NULL : malloc(*n * size);
    if (!w->bad && *n && !rows)
        w->oom = 1;
    if (rows)
        msp_wget(w, rows, *n * size);
    return rows;
}

/* The tables of an "MSPT" answer, built into f's catalogue here
 * (fmt_compact.c): record i's attributes into attrs[i]. */
static msp_err msp_wire_get_tables(msp_wire_rd_t *w, msp_dump_file_t *f, struct msp_rattrs **attrs,
                                   struct msp_attr_row **defs, size_t *n_defs)
{
    struct msp_ctables t;
    memset(&t, 0, sizeof t);
    int64_t width = msp_wget_i64(w);
    if (width < 1 || width > MSP_MAX_NDIM)
        w->bad = 1;
    t.width = w->bad ? 1 : (int)width;
    t.strings = msp_get_table(w, 1, &t.n_strings);
    t.records = msp_get_table(w, sizeof *t.records, &t.n_records);
    t.values = msp_get_table(w, sizeof *t.values, &t.n_values);
    t.stats = msp_get_table(w, msp_nrow_size(t.width), &t.n_stats);
    t.attrs = msp_get_table(w, sizeof *t.attrs, &t.n_attrs);
    t.defaults = msp_get_table(w, sizeof *t.defaults, &t.n_defaults);
    msp_err rc = MSP_OK;
    if (w->oom)
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
    else if (w->bad || w->at != w->n)
        rc = msp_fail(MSP_ERR_INTERNAL, "file %s: the reader helper's answer is malformed",
                      f->path);
    struct msp_attr_row *rows = NULL;
    size_t n_rows = 0;
    f->has_index = 1;
    if (!rc)
        rc = msp_compact_build(f, &t, &rows, &n_rows, defs, n_defs);
    msp_ctables_free(&t);
    if (!rc)
        msp_catalogue_sort(f);
    if (!rc && !(*attrs = calloc(f->n_records ? f->n_records : 1, sizeof **attrs)))
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
    for (size_t i = 0; !rc && i < f->n_records; i++) {
        struct msp_rattrs *ra = &(*attrs)[i];
        rc = msp_rows_find(rows, n_rows, f->records[i].name, &ra->k, &ra->v, &ra->n, f->path);
    }
    msp_rows_free(rows, n_rows);
    return rc;
}

/* Fills f (path and impl already set) from a catalogue message; the
 * record attributes go to attrs[i] for record i, the /defaults rows to
 * *defs (freed by the caller with msp_rows_free, also on failure). */
msp_err msp_wire_get_file(const unsigned char *buf, size_t n, msp_dump_file_t *f,
                          struct msp_rattrs **attrs, struct msp_attr_row **defs, size_t *n_defs)
{
    msp_wire_rd_t w = {buf, n, 4, 0, 0};
    int tables = n >= 4 && memcmp(buf, "MSPT", 4) == 0;
    if (n < 4 || (!tables && memcmp(buf, "MSPC", 4) != 0))
        return msp_fail(MSP_ERR_INTERNAL, "file %s: the reader helper gave no catalogue", f->path);
    msp_err rc = msp_get_root(&w, f);
    if (rc)
        return rc;
    if (tables)
        return msp_wire_get_tables(&w, f, attrs, defs, n_defs);
    f->has_index = msp_wget_i64(&w) != 0;
    size_t nr = msp_wget_count(&w, 32);
    struct msp_str_block b = {malloc(n), 0, n};
    f->strings = b.p;
    f->strings_len = n;
    f->records = calloc(nr ? nr : 1, sizeof *f->records);
    *attrs = calloc(nr ? nr : 1, sizeof **attrs);
    if (!b.p || !f->records || !*attrs)
        return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
    for (size_t i = 0; i < nr && !w.bad; i++) {
        msp_record_info_t *r = &f->records[i];
        struct msp_rattrs *ra = &(*attrs)[i];
        f->n_records = i + 1;
        r->name = msp_get_str(&w, &b);
        r->order = msp_wget_i64(&w);
        /* a tensor takes at least 152 bytes (msp_wire_put_file: four
         * strings, 8 bytes each when empty, and 15 eight-byte fields) */
        size_t nt = msp_wget_count(&w, 152);
        size_t na = msp_wget_count(&w, 16);
        if (!r->name)
            w.bad = 1;
        /* no arrays for a record without attributes (NULL, n 0: most records
         * of a file of small tensors; two callocs and frees each) */
        ra->k = na ? calloc(na, sizeof *ra->k) : NULL;
        ra->v = na ? calloc(na, sizeof *ra->v) : NULL;
        r->tensors = calloc(nt ? nt : 1, sizeof *r->tensors);
        if ((na && (!ra->k || !ra->v)) || !r->tensors)
            return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
        for (size_t a = 0; a < na && !w.bad; a++) {
            ra->n = a + 1;
            ra->k[a] = msp_wget_str(&w);
            ra->v[a] = msp_wget_str(&w);
        }
        for (size_t j = 0; j < nt && !w.bad; j++) {
            r->n_tensors = j + 1;
            msp_get_tensor(&w, &b, &r->tensors[j]);
        }
    }
    if (!w.bad)
        msp_get_defaults(&w, defs, n_defs);
    if (w.oom)
        return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
    if (w.bad || w.at != w.n)
        return msp_fail(MSP_ERR_INTERNAL, "file %s: the reader helper's answer is malformed",
                        f->path);
    return MSP_OK;
}

int msp_wire_get_error(const unsigned char *buf, size_t n, int64_t *code, char **detail)
{
    msp_wire_rd_t w = {buf, n, 0, 0, 0};
    *code = msp_wget_i64(&w);
    *detail = msp_wget_str(&w);
    return w.bad || w.oom ? -1 : 0;
}
