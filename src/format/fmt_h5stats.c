/* The compact layout of statistics dumps (format_version 3, fmt_h5stats.h):
 * its row types, and its tables read into a catalogue (for the in-process
 * reader, fmt_h5read.c, which the reader helper runs). Every number a row
 * holds is checked against the table it points into, and a table's declared
 * size against the file's (deflated rows may expand: a table is refused when
 * it declares more bytes than deflate can unpack from the whole file). */
#include "fmt_h5stats.h"
#include "fmt_h5chunks.h" /* msp_table_inflate */
#include "fmt_h5walk.h"   /* msp_children */

#include <stdlib.h>
#include <string.h>

/* The most deflate can expand its input (RFC 1951: a 258-byte match in
 * two bits, about 1032 to 1); no table of a file holds more than this
 * many times the file's size. */
#define MSP_DEFLATE_MAX_RATIO 1032u

/* ---- row types --------------------------------------------------------------- */

/* A row type built (ok) or not (-1), its shape and bool types closed. */
static hid_t msp_row_type_end(int ok, hid_t c, hid_t shp, hid_t bt)
{
    if (!ok && c >= 0) {
        H5Tclose(c);
        c = -1;
    }
    if (shp >= 0)
        H5Tclose(shp);
    if (bt >= 0)
        H5Tclose(bt);
    return c;
}

hid_t msp_srow_type(int packed, int width)
{
    hsize_t w = (hsize_t)(width < 1 ? 1 : width);
    hid_t shp = H5Tarray_create2(H5T_STD_I64LE, 1, &w);
    hid_t bt = msp_h5_type_for(MSP_DTYPE_BOOL);
    hid_t c = shp >= 0 && bt >= 0 ? H5Tcreate(H5T_COMPOUND, sizeof(struct msp_srow)) : -1;
    int ok = c >= 0;
#define MSP_SCOL(name, field, type)                                                                \
    ok = ok && H5Tinsert(c, name, offsetof(struct msp_srow, field), type) >= 0;
    MSP_SCOL("record", record, H5T_STD_U32LE)
    MSP_SCOL("role", role, H5T_STD_U32LE)
    MSP_SCOL("dtype", dtype, H5T_STD_U32LE)
    MSP_SCOL("ndim", ndim, H5T_STD_U8LE)
    MSP_SCOL("shape", shape, shp)
    MSP_SCOL("values", values, H5T_STD_U32LE)
    MSP_SCOL("device", device, H5T_STD_U32LE)
    MSP_SCOL("requires_grad", requires_grad, bt)
    MSP_SCOL("producer", producer, H5T_STD_U32LE)
#undef MSP_SCOL
    ok = ok && (!packed || H5Tpack(c) >= 0);
    return msp_row_type_end(ok, c, shp, bt);
}

hid_t msp_vrow_type(int packed)
{
    hid_t c = H5Tcreate(H5T_COMPOUND, sizeof(struct msp_vrow));
    int ok = c >= 0;
#define MSP_VCOL(name, field, type)                                                                \
    ok = ok && H5Tinsert(c, name, offsetof(struct msp_vrow, field), type) >= 0;
    MSP_VCOL("max", max, H5T_IEEE_F64LE)
    MSP_VCOL("min", min, H5T_IEEE_F64LE)
    MSP_VCOL("mean", mean, H5T_IEEE_F64LE)
    MSP_VCOL("norm", norm, H5T_IEEE_F64LE)
    MSP_VCOL("nan_count", nan_count, H5T_STD_I64LE)
    MSP_VCOL("inf_count", inf_count, H5T_STD_I64LE)
    MSP_VCOL("crc32", crc32, H5T_STD_U32LE)
#undef MSP_VCOL
    ok = ok && (!packed || H5Tpack(c) >= 0);
    if (!ok && c >= 0) {
        H5Tclose(c);
        c = -1;
    }
    return c;
}

hid_t msp_rrow_type(int packed)
{
    hid_t c = H5Tcreate(H5T_COMPOUND, sizeof(struct msp_rrow));
    if (c >= 0 && (H5Tinsert(c, "name", offsetof(struct msp_rrow, name), H5T_STD_U32LE) < 0 ||
                   H5Tinsert(c, "order", offsetof(struct msp_rrow, order), H5T_STD_I64LE) < 0 ||
                   (packed && H5Tpack(c) < 0))) {
        H5Tclose(c);
        c = -1;
    }
    return c;
}

hid_t msp_crow_type(int packed)
{
    hid_t c = H5Tcreate(H5T_COMPOUND, sizeof(struct msp_crow));
    if (c >= 0 && (H5Tinsert(c, "record", offsetof(struct msp_crow, record), H5T_STD_U32LE) < 0 ||
                   H5Tinsert(c, "key", offsetof(struct msp_crow, key), H5T_STD_U32LE) < 0 ||
                   H5Tinsert(c, "value", offsetof(struct msp_crow, value), H5T_STD_U32LE) < 0 ||
                   (packed && H5Tpack(c) < 0))) {
        H5Tclose(c);
        c = -1;
    }
    return c;
}

/* ---- reading ----------------------------------------------------------------- */

int msp_compact_present(msp_dump_file_t *f)
{
    struct msp_h5_impl *im = msp_impl(f);
    if (im->version < MSP_COMPACT_VERSION)
        return 0;
    htri_t ex = H5Lexists(im->file, "records", H5P_DEFAULT);
    if (ex < 0)
        return -1;
    return ex > 0;
}

/* Opens table name as a one-dimensional dataset of *n rows, at most what a
 * file of this size can hold; mt: the type to check its columns against
 * (every one of mt's members must be in the file's type), -1 for none. */
static msp_err msp_table_open(msp_dump_file_t *f, const char *name, hid_t mt, hid_t *d, size_t *n)
{
    hid_t s = -1, ft = -1;
    msp_err rc = MSP_OK;
    *d = H5Dopen2(msp_impl(f)->file, name, H5P_DEFAULT);
    s = *d >= 0 ? H5Dget_space(*d) : -1;
    ft = *d >= 0 ? H5Dget_type(*d) : -1;
    hssize_t np = s >= 0 && H5Sget_simple_extent_ndims(s) == 1 ? H5Sget_simple_extent_npoints(s)
                                                               : -1;
    int ok = np >= 0 && ft >= 0;
    if (ok && mt >= 0) {
        ok = H5Tget_class(ft) == H5T_COMPOUND;
        int nm = H5Tget_nmembers(mt);
        for (int i = 0; ok && i < nm; i++) {
            char *m = H5Tget_member_name(mt, (unsigned)i);
            ok = m && H5Tget_member_index(ft, m) >= 0;
            H5free_memory(m);
        }
    } else if (ok) {
        ok = H5Tget_class(ft) == H5T_INTEGER && H5Tget_size(ft) == 1;
    }
    if (!ok)
        rc = msp_h5_fail(MSP_ERR_FORMAT,
                         "file %s: /%s is not a one-dimensional table with the "
                         "columns of msprobe-dump(5)",
                         f->path, name);
    else if ((uint64_t)np > (uint64_t)im_file_size(f) * MSP_DEFLATE_MAX_RATIO / H5Tget_size(ft))
        rc = msp_fail(MSP_ERR_FORMAT,
                      "file %s: /%s declares %lld rows, more than a file of %lld bytes "
                      "can hold",
                      f->path, name, (long long)np, (long long)im_file_size(f));
    *n = ok ? (size_t)np : 0;
    if (s >= 0)
        H5Sclose(s);
    if (ft >= 0)
        H5Tclose(ft);
    return rc;
}

/* Reads the n rows of table name into a new array *out of n rows of size
 * bytes, through memory type mt (closed here). */
static msp_err msp_table_read(msp_dump_file_t *f, const char *name, hid_t mt, size_t size,
                              void **out, size_t *n)
{
    hid_t d = -1;
    *out = NULL;
    msp_err rc = mt < 0
                     ? msp_h5_fail(MSP_ERR_HDF5, "file %s: cannot build the /%s type", f->path,
                                   name)
                     : msp_table_open(f, name, H5Tget_class(mt) == H5T_COMPOUND ? mt : -1, &d, n);
    if (!rc && !(*out = calloc(*n ? *n : 1, size)))
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /%s (%zu rows)", f->path, name,
                      *n);
    if (!rc && *n && !msp_table_inflate(d, mt, size, *n, *out) &&
        H5Dread(d, mt, H5S_ALL, H5S_ALL, msp_h5_small_dxpl(), *out) < 0)
        rc = msp_h5_fail(MSP_ERR_FORMAT, "file %s: cannot read /%s (%zu rows)", f->path, name, *n);
    if (rc) {
        free(*out);
        *out = NULL;
    }
    if (d >= 0)
        H5Dclose(d);
    if (mt >= 0)
        H5Tclose(mt);
    return rc;
}

/* The width of /stats's shape column: 1..MSP_MAX_NDIM, or -1. */
static int msp_stats_width(msp_dump_file_t *f)
{
    hid_t d = H5Dopen2(msp_impl(f)->file, "stats", H5P_DEFAULT);
    hid_t ft = d >= 0 ? H5Dget_type(d) : -1;
    int m = ft >= 0 && H5Tget_class(ft) == H5T_COMPOUND ? H5Tget_member_index(ft, "shape") : -1;
    hid_t st = m >= 0 ? H5Tget_member_type(ft, (unsigned)m) : -1;
    hsize_t dim = 0;
    int width = -1;
    if (st >= 0 && H5Tget_class(st) == H5T_ARRAY && H5Tget_array_ndims(st) == 1 &&
        H5Tget_array_dims2(st, &dim) == 1 && dim >= 1 && dim <= MSP_MAX_NDIM)
        width = (int)dim;
    if (st >= 0)
        H5Tclose(st);
    if (ft >= 0)
        H5Tclose(ft);
    if (d >= 0)
        H5Dclose(d);
    return width;
}

/* The memory type of /stats's narrow rows (fmt_compact.h). */
static hid_t msp_nrow_type(int width)
{
    hsize_t w = (hsize_t)width;
    hid_t shp = H5Tarray_create2(H5T_STD_I64LE, 1, &w);
    hid_t bt = msp_h5_type_for(MSP_DTYPE_BOOL);
    hid_t c = shp >= 0 && bt >= 0 ? H5Tcreate(H5T_COMPOUND, msp_nrow_size(width)) : -1;
    int ok = c >= 0;
    ok = ok && H5Tinsert(c, "record", MSP_NROW_RECORD, H5T_STD_U32LE) >= 0;
    ok = ok && H5Tinsert(c, "role", MSP_NROW_ROLE, H5T_STD_U32LE) >= 0;
    ok = ok && H5Tinsert(c, "dtype", MSP_NROW_DTYPE, H5T_STD_U32LE) >= 0;
    ok = ok && H5Tinsert(c, "values", MSP_NROW_VALUES, H5T_STD_U32LE) >= 0;
    ok = ok && H5Tinsert(c, "device", MSP_NROW_DEVICE, H5T_STD_U32LE) >= 0;
    ok = ok && H5Tinsert(c, "producer", MSP_NROW_PRODUCER, H5T_STD_U32LE) >= 0;
    ok = ok && H5Tinsert(c, "ndim", MSP_NROW_NDIM, H5T_STD_U8LE) >= 0;
    ok = ok && H5Tinsert(c, "requires_grad", MSP_NROW_REQUIRES_GRAD, bt) >= 0;
    ok = ok && H5Tinsert(c, "shape", MSP_NROW_SHAPE, shp) >= 0;
    return msp_row_type_end(ok, c, shp, bt);
}

/* Compact table name ((record, key, value) string numbers) into *rows,
 * when the file has it (none: no rows). */
static msp_err msp_crows_read(msp_dump_file_t *f, const char *name, struct msp_crow **rows,
                              size_t *n)
{
    htri_t has = H5Lexists(msp_impl(f)->file, name, H5P_DEFAULT);
    if (has <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return MSP_OK;
    }
    void *raw = NULL;
    msp_err rc = msp_table_read(f, name, msp_crow_type(0), sizeof(struct msp_crow), &raw, n);
    *rows = raw;
    return rc;
}

msp_err msp_compact_read(msp_dump_file_t *f, int has_index, struct msp_ctables *t)
{
    struct msp_h5_impl *im = msp_impl(f);
    memset(t, 0, sizeof *t);
    t->present = 1;
    void *raw = NULL;
    msp_err rc = msp_table_read(f, "strings", H5Tcopy(H5T_NATIVE_UINT8), 1, &raw, &t->n_strings);
    t->strings = raw;
    if (!rc && !has_index) { /* no /index: no record may have a group */
        struct msp_names groups;
        memset(&groups, 0, sizeof groups);
        char where[600];
        snprintf(where, sizeof where, "file %s", f->path);
        rc = msp_children(im->file, H5O_TYPE_GROUP, &groups, where);
        if (!rc && groups.sv.n)
            rc = msp_fail(MSP_ERR_FORMAT,
                          "file %s: group %s holds tensor data, but the file has no /index "
                          "to describe it",
                          f->path, groups.sv.v[0]);
        msp_free_strings(groups.sv.v, groups.sv.n);
    }
    if (!rc) {
        rc = msp_table_read(f, "records", msp_rrow_type(0), sizeof(struct msp_rrow), &raw,
                            &t->n_records);
        t->records = raw;
    }
    if (!rc && (t->width = msp_stats_width(f)) < 0)
        rc = msp_h5_fail(MSP_ERR_FORMAT,
                         "file %s: /stats has no shape column of 1 to %d int64 entries", f->path,
                         MSP_MAX_NDIM);
    if (!rc) {
        rc = msp_table_read(f, "values", msp_vrow_type(0), sizeof(struct msp_vrow), &raw,
                            &t->n_values);
        t->values = raw;
    }
    if (!rc) {
        rc = msp_table_read(f, "stats", msp_nrow_type(t->width), msp_nrow_size(t->width), &raw,
                            &t->n_stats);
        t->stats = raw;
    }
    if (!rc)
        rc = msp_crows_read(f, "attrs", &t->attrs, &t->n_attrs);
    if (!rc)
        rc = msp_crows_read(f, "defaults", &t->defaults, &t->n_defaults);
    return rc;
}

msp_err msp_load_compact(msp_dump_file_t *f, int has_index)
{
    struct msp_h5_impl *im = msp_impl(f);
    struct msp_ctables t;
    msp_err rc = msp_compact_read(f, has_index, &t);
    if (!rc)
        rc = msp_compact_build(f, &t, &im->attrs, &im->n_attrs, &im->defs, &im->n_defs);
    im->has_attrs = !rc;
    f->has_index = 1;
    msp_ctables_free(&t);
    return rc;
}
