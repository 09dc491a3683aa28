/* The helper's side of contained reading (fmt_contain.c): a catalogue the
 * in-process reader loaded, written to the caller in the wire form.
 *
 * Wire form (common's codec, msp_wput_*: i64, f64 = 8 bytes; str = u64
 * length + 1, 0 for NULL, then the bytes without the NUL):
 *   "MSPC" u32 version, then the file, its records, tensors and attributes,
 *   then the /defaults rows (see msp_wire_put_file); or
 *   "MSPT" u32 version, then the file and its compact tables as read, for a
 *   statistics file without /index (msp_wire_put_tables): the caller builds
 *   the catalogue, so that this process only parses (issue 42: building,
 *   sending and parsing a catalogue was half a helper's work); or
 *   "MSPE" i64 code, str detail for an error.
 * Only msprobe-catalogue calls this file; it uses the reader, which uses
 * fmt_contain.c, which never calls back here. */
#include "fmt_compact.h"
#include "fmt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- writing (in the helper) -------------------------------------------------- */

/* What b holds so far goes to o (b emptied): 0, or -1 when out of memory
 * or the write fails. */
static int msp_wire_flush(FILE *o, msp_buf_t *b)
{
    int bad = b->oom || (b->len && fwrite(b->data, 1, b->len, o) != b->len);
    b->len = 0;
    return bad ? -1 : 0;
}

int msp_wire_put_error(FILE *o, msp_err code, const char *detail)
{
    msp_buf_t b = {0};
    msp_wput(&b, "MSPE", 4);
    msp_wput_i64(&b, code);
    msp_wput_str(&b, detail);
    int bad = msp_wire_flush(o, &b) || fflush(o);
    msp_buf_free(&b);
    return bad ? -1 : 0;
}

/* The file's root fields, in the order msp_get_root reads them. */
static void msp_put_root(msp_buf_t *b, const char *magic, const msp_dump_file_t *f)
{
    uint32_t v = MSP_WIRE_VERSION;
    msp_wput(b, magic, 4);
    msp_wput(b, &v, sizeof v);
    msp_wput_str(b, f->framework);
    msp_wput_str(b, f->framework_version);
    msp_wput_str(b, f->task);
    msp_wput_str(b, f->dump_mode);
    msp_wput_i64(b, f->step);
    msp_wput_i64(b, f->rank);
    msp_wput_i64(b, f->world_size);
}

/* n rows of size bytes: u64 n, then the bytes. */
static int msp_put_table(FILE *o, msp_buf_t *b, const void *rows, size_t n, size_t size)
{
    msp_wput_u64(b, n);
    if (!n)
        return 0;
    if (msp_wire_flush(o, b))
        return -1;
    return fwrite(rows, size, n, o) == n ? 0 : -1;
}

int msp_wire_put_tables(FILE *o, msp_dump_file_t *f, const struct msp_ctables *t)
{
    msp_buf_t b = {0};
    msp_put_root(&b, "MSPT", f);
    msp_wput_i64(&b, t->width);
    int bad = msp_put_table(o, &b, t->strings, t->n_strings, 1) ||
              msp_put_table(o, &b, t->records, t->n_records, sizeof *t->records) ||
              msp_put_table(o, &b, t->values, t->n_values, sizeof *t->values) ||
              msp_put_table(o, &b, t->stats, t->n_stats, msp_nrow_size(t->width)) ||
              msp_put_table(o, &b, t->attrs, t->n_attrs, sizeof *t->attrs) ||
              msp_put_table(o, &b, t->defaults, t->n_defaults, sizeof *t->defaults);
    bad = bad || msp_wire_flush(o, &b) || fflush(o);
    msp_buf_free(&b);
    return bad ? -1 : 0;
}

/* One tensor's fields, in the order msp_get_tensor reads them. */
static void msp_put_tensor(msp_buf_t *b, const msp_tensor_info_t *t)
{
    msp_wput_str(b, t->role);
    msp_wput_i64(b, t->dtype);
    msp_wput_str(b, t->dtype_name);
    msp_wput_i64(b, t->ndim);
    for (int d = 0; d < t->ndim; d++)
        msp_wput_i64(b, t->shape[d]);
    msp_wput_i64(b, t->numel);
    msp_wput_i64(b, t->has_data);
    msp_wput_i64(b, t->has_stats);
    msp_wput_f64(b, t->stats.max);
    msp_wput_f64(b, t->stats.min);
    msp_wput_f64(b, t->stats.mean);
    msp_wput_f64(b, t->stats.norm);
    msp_wput_i64(b, t->stats.nan_count);
    msp_wput_i64(b, t->stats.inf_count);
    msp_wput_i64(b, t->stats.crc32);
    msp_wput_i64(b, t->offset);
    msp_wput_i64(b, t->nbytes);
    msp_wput_str(b, t->device);
    msp_wput_i64(b, t->requires_grad);
    msp_wput_str(b, t->producer);
}

/* The whole catalogue of f, with every record's attributes (attrs_of gives
 * them; it may fail for a record, which then has none), sent a megabyte or
 * so at a time. */
int msp_wire_put_file(FILE *o, msp_dump_file_t *f)
{
    msp_buf_t b = {0};
    msp_put_root(&b, "MSPC", f);
    msp_wput_i64(&b, f->has_index);
    msp_wput_u64(&b, f->n_records);
    int bad = 0;
    for (size_t i = 0; i < f->n_records && !bad; i++) {
        const msp_record_info_t *r = &f->records[i];
        char **k = NULL, **val = NULL;
        size_t na = 0;
        if (msp_dump_record_attrs(f, r, &k, &val, &na) != MSP_OK)
            na = 0;
        msp_wput_str(&b, r->name);
        msp_wput_i64(&b, r->order);
        msp_wput_u64(&b, r->n_tensors);
        msp_wput_u64(&b, na);
        for (size_t a = 0; a < na; a++) {
            msp_wput_str(&b, k[a]);
            msp_wput_str(&b, val[a]);
        }
        msp_free_strings(k, na);
        msp_free_strings(val, na);
        for (size_t j = 0; j < r->n_tensors; j++)
            msp_put_tensor(&b, &r->tensors[j]);
        if (b.oom || b.len > (1u << 20))
            bad = msp_wire_flush(o, &b);
    }
    /* u64 count, then (str api, str key, str value) per row of /defaults */
    const msp_reader_ops_t *ops = msp_reader_of(f);
    const struct msp_attr_row *rows = NULL;
    size_t nd = 0;
    if (!ops || !ops->api_defaults || ops->api_defaults(f, &rows, &nd) != MSP_OK)
        nd = 0;
    msp_wput_u64(&b, nd);
    for (size_t i = 0; i < nd; i++) {
        msp_wput_str(&b, rows[i].record);
        msp_wput_str(&b, rows[i].key);
        msp_wput_str(&b, rows[i].value);
    }
    bad = bad || msp_wire_flush(o, &b) || fflush(o);
    msp_buf_free(&b);
    return bad ? -1 : 0;
}
