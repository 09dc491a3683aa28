/* The compact layout of statistics dumps (format_version 3, fmt_h5stats.h):
 * its row types, and its tables read into a catalogue (for the in-process
 * reader, fmt_h5read.c, which the reader helper runs). Every number a row
 * holds is checked against the table it points into, and a table's declared
 * size against the file's (deflated rows may expand: a table is refused when
 * it declares more bytes than deflate can unpack from the whole file). */
#include "fmt_h5stats.h"
#include "fmt_h5walk.h" /* msp_children, msp_shape_size */

#include <stdlib.h>
#include <string.h>

/* The most deflate can expand its input (RFC 1951: a 258-byte match in
 * two bits, about 1032 to 1); no table of a file holds more than this
 * many times the file's size. */
#define MSP_DEFLATE_MAX_RATIO 1032u

/* ---- row types --------------------------------------------------------------- */

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

/* The strings of /strings: the blob (NUL-ended) and where each starts. */
struct msp_strs {
    char *blob;
    size_t *off;
    size_t n;
};

static void msp_strs_free(struct msp_strs *s)
{
    free(s->blob);
    free(s->off);
}

/* String number id of s, or NULL when out of range. */
static const char *msp_str_at(const struct msp_strs *s, uint32_t id)
{
    return id < s->n ? s->blob + s->off[id] : NULL;
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
    if (!rc && *n && H5Dread(d, mt, H5S_ALL, H5S_ALL, msp_h5_small_dxpl(), *out) < 0)
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

static msp_err msp_strs_load(msp_dump_file_t *f, struct msp_strs *s)
{
    size_t n = 0;
    void *blob = NULL;
    msp_err rc = msp_table_read(f, "strings", H5Tcopy(H5T_NATIVE_UINT8), 1, &blob, &n);
    if (rc)
        return rc;
    s->blob = blob;
    if (!n || s->blob[n - 1] != '\0') {
        return msp_fail(MSP_ERR_FORMAT, "file %s: /strings does not end with a NUL byte", f->path);
    }
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += s->blob[i] == '\0';
    if (!(s->off = malloc(count * sizeof *s->off)))
        return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /strings", f->path);
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        if (s->blob[i] == '\0') {
            s->off[s->n++] = at;
            at = i + 1;
        }
    return MSP_OK;
}

struct msp_crow_at {
    struct msp_attr_row r;
    size_t at;
};

static int msp_crow_order(const void *a, const void *b)
{
    const struct msp_crow_at *x = a, *y = b;
    int c = strcmp(x->r.record, y->r.record);
    if (!c)
        c = strcmp(x->r.key, y->r.key);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

/* The compact table name ((record, key, value) string numbers), when the
 * file has it, as malloc'd rows sorted by record, then key. */
static msp_err msp_crows_load(msp_dump_file_t *f, const struct msp_strs *s, const char *name,
                              struct msp_attr_row **out, size_t *n_out)
{
    htri_t has = H5Lexists(msp_impl(f)->file, name, H5P_DEFAULT);
    if (has <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return MSP_OK;
    }
    void *raw = NULL;
    size_t n = 0;
    msp_err rc = msp_table_read(f, name, msp_crow_type(0), sizeof(struct msp_crow), &raw, &n);
    struct msp_crow *c = raw;
    struct msp_crow_at *at = rc ? NULL : calloc(n ? n : 1, sizeof *at);
    if (!rc && !at)
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /%s", f->path, name);
    for (size_t i = 0; !rc && i < n; i++) {
        const char *r = msp_str_at(s, c[i].record), *k = msp_str_at(s, c[i].key),
                   *v = msp_str_at(s, c[i].value);
        if (!r || !k || !v)
            rc = msp_fail(MSP_ERR_FORMAT,
                          "file %s: /%s row %zu names a string /strings "
                          "does not have",
                          f->path, name, i);
        else
            at[i] = (struct msp_crow_at){{(char *)r, (char *)k, (char *)v}, i};
    }
    if (!rc && n > 1)
        qsort(at, n, sizeof *at, msp_crow_order);
    struct msp_attr_row *rows = rc ? NULL : calloc(n ? n : 1, sizeof *rows);
    if (!rc && !rows)
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /%s", f->path, name);
    for (size_t i = 0; !rc && i < n; i++) {
        rows[i].record = strdup(at[i].r.record);
        rows[i].key = strdup(at[i].r.key);
        rows[i].value = strdup(at[i].r.value);
        if (!rows[i].record || !rows[i].key || !rows[i].value)
            rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /%s", f->path, name);
    }
    if (rows) { /* freed with the file, even half made */
        *out = rows;
        *n_out = n;
    }
    free(at);
    free(c);
    return rc;
}

static int msp_rec_name_cmp(const void *a, const void *b)
{
    return strcmp(((const msp_record_info_t *)a)->name, ((const msp_record_info_t *)b)->name);
}

static int msp_rec_key_cmp(const void *key, const void *elem)
{
    return strcmp(key, ((const msp_record_info_t *)elem)->name);
}

/* /records into f->records: the records /index gave (the first n_index, in
 * name order) keep theirs; then all in name order, a name given twice
 * refused. */
static msp_err msp_records_merge(msp_dump_file_t *f, const struct msp_strs *s)
{
    void *raw = NULL;
    size_t n = 0, n_index = f->n_records;
    msp_err rc = msp_table_read(f, "records", msp_rrow_type(0), sizeof(struct msp_rrow), &raw, &n);
    struct msp_rrow *rr = raw;
    msp_record_info_t *nr = rc ? NULL : realloc(f->records, (n_index + n + 1) * sizeof *nr);
    if (!rc && !nr)
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /records", f->path);
    if (nr)
        f->records = nr;
    for (size_t i = 0; !rc && i < n; i++) {
        const char *name = msp_str_at(s, rr[i].name);
        if (!name || !*name) {
            rc = msp_fail(MSP_ERR_FORMAT, "file %s: /records row %zu has no name", f->path, i);
            break;
        }
        if (n_index && bsearch(name, f->records, n_index, sizeof *nr, msp_rec_key_cmp))
            continue; /* its tensors with data are in /index */
        msp_record_info_t *r = &f->records[f->n_records];
        memset(r, 0, sizeof *r);
        if (!(r->name = strdup(name)))
            rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
        else
            f->n_records++;
        r->order = rr[i].order;
    }
    if (!rc && f->n_records > 1)
        msp_sort(f->records, f->n_records, sizeof *f->records, msp_rec_name_cmp);
    for (size_t i = 1; !rc && i < f->n_records; i++)
        if (strcmp(f->records[i - 1].name, f->records[i].name) == 0)
            rc = msp_fail(MSP_ERR_FORMAT, "file %s: /records: record %s is listed twice", f->path,
                          f->records[i].name);
    free(rr);
    return rc;
}

/* Tensor t from /stats row r (of the table whose shape column has width
 * entries). */
static msp_err msp_tensor_from_srow(msp_dump_file_t *f, const struct msp_strs *s,
                                    const struct msp_srow *r, int width, const char *rec,
                                    const struct msp_vrow *vals, size_t n_vals,
                                    msp_tensor_info_t *t)
{
    char where[700];
    const char *role = msp_str_at(s, r->role), *dt = msp_str_at(s, r->dtype),
               *dev = msp_str_at(s, r->device), *prod = msp_str_at(s, r->producer);
    /* where, for an error only: formatting it for every row was a tenth of
     * a statistics compare's CPU (issue 42) */
#define SROW_WHERE()                                                                               \
    (snprintf(where, sizeof where, "file %s: /stats: record %s: %s", f->path, rec,                 \
              role ? role : "(no role)"),                                                          \
     where)
    if (!role || !*role || !dt || !dev || !prod)
        return msp_fail(MSP_ERR_FORMAT,
                        "%s: the row names a string /strings does not have, "
                        "or no role",
                        SROW_WHERE());
    if (r->values >= n_vals)
        return msp_fail(MSP_ERR_FORMAT, "%s: the row names a row /values does not have",
                        SROW_WHERE());
    const struct msp_vrow *v = &vals[r->values];
    if (r->ndim > width)
        return msp_fail(MSP_ERR_FORMAT, "%s: ndim %d, wider than the table's shape column (%d)",
                        SROW_WHERE(), (int)r->ndim, width);
    if (!(t->role = strdup(role)) || (*prod && !(t->producer = strdup(prod))))
        return msp_fail(MSP_ERR_NOMEM, "%s: out of memory", SROW_WHERE());
    t->dtype = msp_dtype_from_name(dt);
    msp_copy_str(t->dtype_name, sizeof t->dtype_name, t->dtype ? msp_dtype_name(t->dtype) : dt);
    t->ndim = r->ndim;
    memcpy(t->shape, r->shape, sizeof(int64_t) * (size_t)t->ndim);
    msp_err rc = msp_shape_size(t->shape, t->ndim, msp_dtype_size(t->dtype), &t->numel, &t->nbytes,
                                "");
    if (rc != MSP_OK) /* again, to name the row */
        rc = msp_shape_size(t->shape, t->ndim, msp_dtype_size(t->dtype), &t->numel, &t->nbytes,
                            SROW_WHERE());
#undef SROW_WHERE
    t->has_data = 0;
    t->has_stats = MSP_STATS_ALL;
    t->stats = (msp_stats_t){v->max,       v->min,       v->mean, v->norm,
                             v->nan_count, v->inf_count, v->crc32};
    t->offset = -1;
    msp_copy_str(t->device, sizeof t->device, dev);
    t->requires_grad = r->requires_grad != 0;
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

/* /stats's rows as tensors of their records (f->records in name order). */
static msp_err msp_stats_merge(msp_dump_file_t *f, const struct msp_strs *s)
{
    int width = msp_stats_width(f);
    if (width < 0)
        return msp_h5_fail(MSP_ERR_FORMAT,
                           "file %s: /stats has no shape column of 1 to %d int64 entries", f->path,
                           MSP_MAX_NDIM);
    void *raw = NULL, *vraw = NULL;
    size_t n = 0, n_vals = 0;
    msp_err rc = msp_table_read(f, "values", msp_vrow_type(0), sizeof(struct msp_vrow), &vraw,
                                &n_vals);
    if (!rc)
        rc = msp_table_read(f, "stats", msp_srow_type(0, width), sizeof(struct msp_srow), &raw, &n);
    struct msp_srow *sr = raw;
    const struct msp_vrow *vals = vraw;
    msp_record_info_t *last = NULL; /* a record's rows come together: looked up once */
    for (size_t i = 0; !rc && i < n; i++) {
        const char *rec = msp_str_at(s, sr[i].record);
        msp_record_info_t *r = last && i && sr[i].record == sr[i - 1].record ? last
                               : rec ? bsearch(rec, f->records, f->n_records, sizeof *r,
                                               msp_rec_key_cmp)
                                     : NULL;
        last = r;
        if (!r) {
            rc = msp_fail(MSP_ERR_FORMAT,
                          "file %s: /stats row %zu names a record /records does not list", f->path,
                          i);
            break;
        }
        if (i == 0 || sr[i].record != sr[i - 1].record) {
            /* the record's run of rows, allocated at once (a realloc a row
             * grew and copied the heap row by row) */
            size_t run = 1;
            while (i + run < n && sr[i + run].record == sr[i].record)
                run++;
            msp_tensor_info_t *nt = realloc(r->tensors, (r->n_tensors + run) * sizeof *nt);
            if (!nt) {
                rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
                break;
            }
            r->tensors = nt;
        }
        msp_tensor_info_t *nt = r->tensors;
        memset(&nt[r->n_tensors], 0, sizeof *nt);
        rc = msp_tensor_from_srow(f, s, &sr[i], width, r->name, vals, n_vals, &nt[r->n_tensors]);
        r->n_tensors++; /* counted even on failure so its strings are freed */
    }
    free(sr);
    free(vraw);
    return rc;
}

static int msp_tensor_role_cmp(const void *a, const void *b)
{
    return msp_role_cmp(((const msp_tensor_info_t *)a)->role, ((const msp_tensor_info_t *)b)->role);
}

/* A role given twice in a record (the same tensor in /stats twice, or in
 * /stats and /index) is no description of one tensor. */
static msp_err msp_roles_once(msp_dump_file_t *f)
{
    for (size_t i = 0; i < f->n_records; i++) {
        msp_record_info_t *r = &f->records[i];
        if (r->n_tensors > 1)
            msp_sort(r->tensors, r->n_tensors, sizeof *r->tensors, msp_tensor_role_cmp);
        for (size_t k = 1; k < r->n_tensors; k++)
            if (strcmp(r->tensors[k - 1].role, r->tensors[k].role) == 0)
                return msp_fail(MSP_ERR_FORMAT,
                                "file %s: record %s: %s has two rows: the tables do not "
                                "describe the file",
                                f->path, r->name, r->tensors[k].role);
    }
    return MSP_OK;
}

msp_err msp_load_compact(msp_dump_file_t *f, int has_index)
{
    struct msp_h5_impl *im = msp_impl(f);
    struct msp_strs s;
    memset(&s, 0, sizeof s);
    msp_err rc = msp_strs_load(f, &s);
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
    if (!rc)
        rc = msp_records_merge(f, &s);
    if (!rc)
        rc = msp_stats_merge(f, &s);
    if (!rc)
        rc = msp_roles_once(f);
    if (!rc)
        rc = msp_crows_load(f, &s, "attrs", &im->attrs, &im->n_attrs);
    if (!rc)
        rc = msp_crows_load(f, &s, "defaults", &im->defs, &im->n_defs);
    im->has_attrs = !rc;
    f->has_index = 1;
    msp_strs_free(&s);
    return rc;
}
