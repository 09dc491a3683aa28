/* The helper's side of contained reading (fmt_contain.c): a catalogue the
 * in-process reader loaded, written to the caller in the wire form.
 *
 * Wire form, all integers little-endian as on every platform we build for:
 *   "MSPC" u32 version, then the file, its records, tensors and attributes,
 *   then the /defaults rows (see msp_wire_put_file); or "MSPE" i64 code, str detail for an error.
 *   str = u32 length + bytes (no NUL); i64, f64 = 8 bytes.
 * Only msprobe-catalogue calls this file; it uses the reader, which uses
 * fmt_contain.c, which never calls back here. */
#include "fmt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- writing (in the helper) -------------------------------------------------- */

static int msp_put(FILE *o, const void *p, size_t n)
{
    return fwrite(p, 1, n, o) == n ? 0 : -1;
}

static int msp_put_i64(FILE *o, int64_t v)
{
    return msp_put(o, &v, sizeof v);
}

static int msp_put_f64(FILE *o, double v)
{
    return msp_put(o, &v, sizeof v);
}

static int msp_put_str(FILE *o, const char *s)
{
    uint32_t n = s ? (uint32_t)strlen(s) : UINT32_MAX; /* UINT32_MAX: NULL */
    if (msp_put(o, &n, sizeof n))
        return -1;
    return s ? msp_put(o, s, n) : 0;
}

int msp_wire_put_error(FILE *o, msp_err code, const char *detail)
{
    return msp_put(o, "MSPE", 4) || msp_put_i64(o, code) || msp_put_str(o, detail) || fflush(o) ? -1
                                                                                                : 0;
}

/* The whole catalogue of f, with every record's attributes (attrs_of gives
 * them; it may fail for a record, which then has none). */
int msp_wire_put_file(FILE *o, msp_dump_file_t *f)
{
    uint32_t v = MSP_WIRE_VERSION;
    if (msp_put(o, "MSPC", 4) || msp_put(o, &v, sizeof v) || msp_put_str(o, f->framework) ||
        msp_put_str(o, f->framework_version) || msp_put_str(o, f->task) ||
        msp_put_str(o, f->dump_mode) || msp_put_i64(o, f->step) || msp_put_i64(o, f->rank) ||
        msp_put_i64(o, f->world_size) || msp_put_i64(o, f->has_index) ||
        msp_put_i64(o, (int64_t)f->n_records))
        return -1;
    for (size_t i = 0; i < f->n_records; i++) {
        const msp_record_info_t *r = &f->records[i];
        char **k = NULL, **val = NULL;
        size_t na = 0;
        if (msp_dump_record_attrs(f, r, &k, &val, &na) != MSP_OK)
            na = 0;
        int bad = msp_put_str(o, r->name) || msp_put_i64(o, r->order) ||
                  msp_put_i64(o, (int64_t)r->n_tensors) || msp_put_i64(o, (int64_t)na);
        for (size_t a = 0; !bad && a < na; a++)
            bad = msp_put_str(o, k[a]) || msp_put_str(o, val[a]);
        msp_free_strings(k, na);
        msp_free_strings(val, na);
        for (size_t j = 0; !bad && j < r->n_tensors; j++) {
            const msp_tensor_info_t *t = &r->tensors[j];
            bad = msp_put_str(o, t->role) || msp_put_i64(o, t->dtype) ||
                  msp_put_str(o, t->dtype_name) || msp_put_i64(o, t->ndim);
            for (int d = 0; !bad && d < t->ndim; d++)
                bad = msp_put_i64(o, t->shape[d]);
            bad = bad || msp_put_i64(o, t->numel) || msp_put_i64(o, t->has_data) ||
                  msp_put_i64(o, t->has_stats) || msp_put_f64(o, t->stats.max) ||
                  msp_put_f64(o, t->stats.min) || msp_put_f64(o, t->stats.mean) ||
                  msp_put_f64(o, t->stats.norm) || msp_put_i64(o, t->stats.nan_count) ||
                  msp_put_i64(o, t->stats.inf_count) || msp_put_i64(o, t->stats.crc32) ||
                  msp_put_i64(o, t->offset) || msp_put_i64(o, t->nbytes) ||
                  msp_put_str(o, t->device) || msp_put_i64(o, t->requires_grad) ||
                  msp_put_str(o, t->producer);
        }
        if (bad)
            return -1;
    }
    /* i64 count, then (str api, str key, str value) per row of /defaults */
    const msp_reader_ops_t *ops = msp_reader_of(f);
    const struct msp_attr_row *rows = NULL;
    size_t nd = 0;
    if (!ops || !ops->api_defaults || ops->api_defaults(f, &rows, &nd) != MSP_OK)
        nd = 0;
    if (msp_put_i64(o, (int64_t)nd))
        return -1;
    for (size_t i = 0; i < nd; i++)
        if (msp_put_str(o, rows[i].record) || msp_put_str(o, rows[i].key) ||
            msp_put_str(o, rows[i].value))
            return -1;
    return fflush(o) ? -1 : 0;
}
