/* Dump reader: loads the catalogue of a dump file from /index, or by walking
 * the record groups when a file has none (a file written by hand with h5py
 * following msprobe-dump(5)). Tensor data whose bytes on disk are exactly
 * the native little-endian elements is read with pread() outside the HDF5
 * lock; everything else goes through H5Dread, converting to native. */
#include "fmt_internal.h"
#include "fmt_foreign.h" /* msprobe dump.json directories: dispatched below */

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct msp_dump_impl {
    hid_t file;        /* -1 when the catalogue came from the reader helper */
    int fd;
    int64_t file_size;
    hsize_t userblock; /* HDF5 addresses are relative to the end of it */
    struct msp_rattrs *attrs; /* contained: record i's attributes at [i] */
};

static struct msp_dump_impl *msp_impl(msp_dump_file_t *f)
{
    return f->impl;
}

static int64_t im_file_size(msp_dump_file_t *f)
{
    return msp_impl(f)->file_size;
}

static void msp_record_free(msp_record_info_t *r)
{
    for (size_t i = 0; i < r->n_tensors; i++) {
        free(r->tensors[i].role);
        free(r->tensors[i].producer);
    }
    free(r->tensors);
    free(r->name);
}

/* Call with the lock held. */
static void msp_dump_free_locked(msp_dump_file_t *f)
{
    if (!f)
        return;
    struct msp_dump_impl *im = f->impl;
    if (im) {
        if (im->file >= 0)
            H5Fclose(im->file);
        if (im->fd >= 0)
            close(im->fd);
        for (size_t i = 0; im->attrs && i < f->n_records; i++) {
            msp_free_strings(im->attrs[i].k, im->attrs[i].n);
            msp_free_strings(im->attrs[i].v, im->attrs[i].n);
        }
        free(im->attrs);
        free(im);
    }
    for (size_t i = 0; i < f->n_records; i++)
        msp_record_free(&f->records[i]);
    free(f->records);
    free(f->path);
    free(f);
}

void msp_dump_close(msp_dump_file_t *f)
{
    if (!f)
        return;
    if (msp_msprobe_owns(f)) {
        msp_msprobe_close(f);
        return;
    }
    msp_h5_lock();
    msp_dump_free_locked(f);
    msp_h5_unlock();
}

/* ---- sorting -------------------------------------------------------------- */

static int msp_tensor_info_order(const void *a, const void *b)
{
    const msp_tensor_info_t *x = a, *y = b;
    return msp_role_cmp(x->role, y->role);
}

static int msp_record_info_order(const void *a, const void *b)
{
    const msp_record_info_t *x = a, *y = b;
    if (x->order != y->order)
        return x->order < y->order ? -1 : 1;
    int c = msp_natural_cmp(x->name, y->name);
    return c ? c : strcmp(x->name, y->name);
}

static void msp_sort_catalogue(msp_dump_file_t *f)
{
    /* qsort's pointer must not be NULL even for 0 elements (C11 7.22.5). */
    for (size_t i = 0; i < f->n_records; i++)
        if (f->records[i].n_tensors > 1)
            qsort(f->records[i].tensors, f->records[i].n_tensors, sizeof(msp_tensor_info_t),
                  msp_tensor_info_order);
    if (f->n_records > 1)
        qsort(f->records, f->n_records, sizeof(msp_record_info_t), msp_record_info_order);
}

/* numel and nbytes of a shape; MSP_ERR_FORMAT on overflow. */
static msp_err msp_shape_size(const int64_t *shape, int ndim, size_t esize, int64_t *numel,
                              int64_t *nbytes, const char *where)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return msp_fail(MSP_ERR_FORMAT, "%s: negative dimension %lld in its shape", where,
                            (long long)shape[i]);
        if (shape[i] && n > INT64_MAX / shape[i])
            return msp_fail(MSP_ERR_FORMAT, "%s: shape is too large", where);
        n *= shape[i];
    }
    if (esize && n > INT64_MAX / (int64_t)esize)
        return msp_fail(MSP_ERR_FORMAT, "%s: shape is too large", where);
    *numel = n;
    *nbytes = n * (int64_t)esize;
    return MSP_OK;
}

/* ---- catalogue from /index -------------------------------------------------- */

/* 1: /index usable (all columns present), 0: absent or not ours, -1 error. */
static int msp_index_usable(hid_t file, hid_t *dset)
{
    *dset = -1;
    htri_t ex = H5Lexists(file, "index", H5P_DEFAULT);
    if (ex <= 0)
        return ex < 0 ? -1 : 0;
    H5O_info_t oi;
    if (H5Oget_info_by_name2(file, "index", &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        return -1;
    if (oi.type != H5O_TYPE_DATASET)
        return 0;
    hid_t d = H5Dopen2(file, "index", H5P_DEFAULT);
    if (d < 0)
        return -1;
    hid_t t = H5Dget_type(d);
    int ok = t >= 0 && H5Tget_class(t) == H5T_COMPOUND;
    for (int i = 0; ok && msp_index_columns[i]; i++)
        ok = H5Tget_member_index(t, msp_index_columns[i]) >= 0;
    if (t >= 0)
        H5Tclose(t);
    if (!ok) {
        H5Dclose(d);
        return 0;
    }
    *dset = d;
    return 1;
}

static int msp_row_cmp(const void *a, const void *b)
{
    const struct msp_index_row *x = a, *y = b;
    int c = strcmp(x->record ? x->record : "", y->record ? y->record : "");
    return c ? c : msp_role_cmp(x->role ? x->role : "", y->role ? y->role : "");
}

static msp_err msp_tensor_from_row(msp_dump_file_t *f, const struct msp_index_row *row,
                                   msp_tensor_info_t *t)
{
    char where[700];
    snprintf(where, sizeof where, "file %s: /index: record %s: %s", f->path, row->record,
             row->role);
    struct msp_dump_impl *im = msp_impl(f);
    if (!(t->role = strdup(row->role)))
        return msp_fail(MSP_ERR_NOMEM, "%s: out of memory", where);
    t->dtype = msp_dtype_from_name(row->dtype);
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s",
             t->dtype ? msp_dtype_name(t->dtype) : row->dtype ? row->dtype : "");
    if (row->ndim < 0 || row->ndim > MSP_MAX_NDIM || row->shape.len != (size_t)row->ndim)
        return msp_fail(MSP_ERR_FORMAT, "%s: ndim %d does not match its shape of %zu entries",
                        where, (int)row->ndim, row->shape.len);
    t->ndim = row->ndim;
    if (t->ndim)
        memcpy(t->shape, row->shape.p, sizeof(int64_t) * (size_t)t->ndim);
    msp_err rc = msp_shape_size(t->shape, t->ndim, msp_dtype_size(t->dtype), &t->numel,
                                &t->nbytes, where);
    if (rc)
        return rc;
    t->has_data = row->has_data != 0;
    t->has_stats = 1;
    t->stats.max = row->max;
    t->stats.min = row->min;
    t->stats.mean = row->mean;
    t->stats.norm = row->norm;
    t->stats.nan_count = row->nan_count;
    t->stats.inf_count = row->inf_count;
    t->stats.crc32 = row->crc32;
    /* Written by us at creation time; still check the bounds so a damaged
     * index falls back to H5Dread instead of reading past the end. */
    t->offset = -1;
    if (t->has_data && t->dtype && t->nbytes > 0 && row->offset >= 0 &&
        row->offset <= im->file_size - t->nbytes)
        t->offset = row->offset;
    snprintf(t->device, sizeof t->device, "%s", row->device ? row->device : "");
    t->requires_grad = row->requires_grad != 0;
    return MSP_OK;
}

/* ---- producer links (msprobe-dump(5) 'producer') ------------------------------ */

struct msp_producer_row {
    char *record, *role, *producer;
};

/* Transfer properties for the /index reads: libhdf5 callocs a conversion
 * background buffer of the transfer buffer's size (1 MiB by default) for
 * every compound read, most of a reader helper's page faults; 64 KiB rows
 * at a time cost no more. Created once per process (the helper reads one
 * file; an in-process reader keeps it for the next). */
static hid_t msp_small_dxpl(void)
{
    static hid_t dxpl = -1;
    if (dxpl < 0) {
        hid_t p = H5Pcreate(H5P_DATASET_XFER);
        if (p >= 0 && H5Pset_buffer(p, 64 * 1024, NULL, NULL) < 0) {
            H5Pclose(p);
            p = -1;
        }
        dxpl = p >= 0 ? p : H5P_DEFAULT;
    }
    return dxpl;
}

static int msp_record_name_cmp(const void *key, const void *elem)
{
    return strcmp(key, ((const msp_record_info_t *)elem)->name);
}

/* The optional /index column 'producer', read by name into its own compound so
 * that files without it (older dumps, hand-written ones) load as before. Call
 * while f->records is still in name order. */
static msp_err msp_load_index_producers(msp_dump_file_t *f, hid_t d)
{
    msp_err rc = MSP_OK;
    hid_t ft = H5Dget_type(d);
    int has = ft >= 0 && H5Tget_member_index(ft, "producer") >= 0;
    if (ft >= 0)
        H5Tclose(ft);
    if (!has) {
        H5Eclear2(H5E_DEFAULT);
        return MSP_OK;
    }
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, H5T_VARIABLE);
    H5Tset_cset(str, H5T_CSET_UTF8);
    hid_t mt = H5Tcreate(H5T_COMPOUND, sizeof(struct msp_producer_row));
    H5Tinsert(mt, "record", HOFFSET(struct msp_producer_row, record), str);
    H5Tinsert(mt, "role", HOFFSET(struct msp_producer_row, role), str);
    H5Tinsert(mt, "producer", HOFFSET(struct msp_producer_row, producer), str);
    hid_t s = H5Dget_space(d);
    hssize_t n = s >= 0 ? H5Sget_simple_extent_npoints(s) : -1;
    struct msp_producer_row *rows = n > 0 ? calloc((size_t)n, sizeof *rows) : NULL;
    if (n > 0 && !rows) {
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /index producers", f->path);
        goto cleanup;
    }
    if (n > 0 && H5Dread(d, mt, H5S_ALL, H5S_ALL, msp_small_dxpl(), rows) < 0) {
        free(rows);
        rows = NULL;
        rc = msp_h5_fail(MSP_ERR_FORMAT, "file %s: cannot read the /index column producer",
                         f->path);
        goto cleanup;
    }
    for (hssize_t i = 0; rows && i < n; i++) {
        const struct msp_producer_row *row = &rows[i];
        if (!row->record || !row->role || !row->producer || !row->producer[0])
            continue;
        msp_record_info_t *r = bsearch(row->record, f->records, f->n_records, sizeof *r,
                                       msp_record_name_cmp);
        for (size_t k = 0; r && k < r->n_tensors; k++) {
            if (strcmp(r->tensors[k].role, row->role) != 0 || r->tensors[k].producer)
                continue;
            if (!(r->tensors[k].producer = strdup(row->producer)))
                rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
            break;
        }
    }
cleanup:
    if (rows) {
        H5Dvlen_reclaim(mt, s, H5P_DEFAULT, rows);
        free(rows);
    }
    if (s >= 0)
        H5Sclose(s);
    H5Tclose(mt);
    H5Tclose(str);
    return rc;
}

static msp_err msp_load_index(msp_dump_file_t *f, hid_t d)
{
    msp_err rc = MSP_OK;
    hid_t mt = msp_h5_index_type(0), s = H5Dget_space(d);
    struct msp_index_row *rows = NULL;
    hssize_t n = s >= 0 ? H5Sget_simple_extent_npoints(s) : -1;
    size_t cap = 0;
    int read_ok = 0;
    if (mt < 0 || n < 0) {
        rc = msp_h5_fail(MSP_ERR_FORMAT, "file %s: cannot read /index", f->path);
        goto cleanup;
    }
    /* A packed row takes over 64 bytes on disk (six variable-length
     * references alone take 96): a count no file of this size can hold is
     * a lie, refused before any allocation follows it. */
    if (n > im_file_size(f) / 64) {
        rc = msp_fail(MSP_ERR_FORMAT, "file %s: /index declares %lld rows, more than a file of "
                      "%lld bytes can hold", f->path, (long long)n, (long long)im_file_size(f));
        goto cleanup;
    }
    rows = calloc(n ? (size_t)n : 1, sizeof *rows);
    if (!rows) {
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /index (%lld rows)", f->path,
                      (long long)n);
        goto cleanup;
    }
    if (n > 0 && H5Dread(d, mt, H5S_ALL, H5S_ALL, msp_small_dxpl(), rows) < 0) {
        rc = msp_h5_fail(MSP_ERR_FORMAT, "file %s: cannot read /index", f->path);
        goto cleanup;
    }
    read_ok = 1;
    qsort(rows, (size_t)n, sizeof *rows, msp_row_cmp);
    for (size_t i = 0; i < (size_t)n; i++) {
        struct msp_index_row *row = &rows[i];
        if (!row->record || !row->role) {
            rc = msp_fail(MSP_ERR_FORMAT, "file %s: /index row %zu has no record or role",
                          f->path, i);
            goto cleanup;
        }
        if (i && rows[i - 1].record && rows[i - 1].role &&
            strcmp(rows[i - 1].record, row->record) == 0 &&
            strcmp(rows[i - 1].role, row->role) == 0) {
            rc = msp_fail(MSP_ERR_FORMAT, "file %s: /index: record %s: %s has two rows: the "
                          "table does not describe the file", f->path, row->record,
                          row->role[0] ? row->role : "(the record's marker row)");
            goto cleanup;
        }
        msp_record_info_t *r = f->n_records ? &f->records[f->n_records - 1] : NULL;
        if (!r || strcmp(r->name, row->record) != 0) {
            msp_record_info_t *nr = msp_grow(f->records, &cap, f->n_records, sizeof *nr, 16);
            if (!nr) {
                rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
                goto cleanup;
            }
            f->records = nr;
            r = &f->records[f->n_records++];
            r->order = row->order;
            if (!(r->name = strdup(row->record))) {
                rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
                goto cleanup;
            }
        }
        if (!row->role[0])
            continue; /* marker row of a record without tensors */
        size_t tcap = r->n_tensors; /* grow by one: rows per record are few */
        msp_tensor_info_t *nt = realloc(r->tensors, (tcap + 1) * sizeof *nt);
        if (!nt) {
            rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
            goto cleanup;
        }
        r->tensors = nt;
        memset(&nt[r->n_tensors], 0, sizeof *nt);
        rc = msp_tensor_from_row(f, row, &nt[r->n_tensors]);
        r->n_tensors++; /* counted even on failure so its role is freed */
        if (rc)
            goto cleanup;
    }
cleanup:
    if (rows && read_ok && n > 0)
        H5Dvlen_reclaim(mt, s, H5P_DEFAULT, rows);
    free(rows);
    if (s >= 0)
        H5Sclose(s);
    if (mt >= 0)
        H5Tclose(mt);
    return rc;
}

/* ---- catalogue by walking groups ---------------------------------------------- */

/* A growable vector of strdup'd names; returns -1 on OOM (an HDF5 iteration stop). */
struct msp_strvec {
    char **v;
    size_t n, cap;
};

static int msp_strvec_push(struct msp_strvec *sv, const char *name)
{
    char **v = msp_grow(sv->v, &sv->cap, sv->n, sizeof *v, 16);
    if (!v)
        return -1;
    sv->v = v;
    if (!(sv->v[sv->n] = strdup(name)))
        return -1;
    sv->n++;
    return 0;
}

struct msp_names {
    struct msp_strvec sv;
    H5O_type_t want;
};

static herr_t msp_collect_cb(hid_t g, const char *name, const H5L_info_t *li, void *ud)
{
    struct msp_names *ns = ud;
    if (li->type != H5L_TYPE_HARD)
        return 0; /* soft/external links are not part of the format */
    H5O_info_t oi;
    if (H5Oget_info_by_name2(g, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        return -1;
    if (oi.type != ns->want)
        return 0;
    return msp_strvec_push(&ns->sv, name);
}

/* Names of the hard-linked children of type `want`, in creation order when
 * the group tracks it, otherwise in name order. */
static msp_err msp_children(hid_t g, H5O_type_t want, struct msp_names *ns, const char *where)
{
    memset(ns, 0, sizeof *ns);
    ns->want = want;
    H5_index_t idx = H5_INDEX_NAME;
    hid_t gcpl = H5Gget_create_plist(g);
    unsigned flags = 0;
    if (gcpl >= 0 && H5Pget_link_creation_order(gcpl, &flags) >= 0 &&
        (flags & H5P_CRT_ORDER_INDEXED))
        idx = H5_INDEX_CRT_ORDER;
    if (gcpl >= 0)
        H5Pclose(gcpl);
    hsize_t pos = 0;
    if (H5Literate(g, idx, H5_ITER_INC, &pos, msp_collect_cb, ns) < 0) {
        msp_free_strings(ns->sv.v, ns->sv.n);
        memset(ns, 0, sizeof *ns);
        return msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot list its members", where);
    }
    return MSP_OK;
}

/* dtype of a dataset from its HDF5 type and its 'dtype' attribute. */
static msp_err msp_walk_dtype(hid_t d, hid_t ftype, int null_space, msp_tensor_info_t *t,
                              int *exact, const char *where)
{
    char desc[64], attr[64];
    msp_dtype_t stored = msp_h5_dtype_of(ftype, exact, desc, sizeof desc);
    int r = msp_h5_attr_get_str(d, "dtype", attr, sizeof attr, where);
    if (r < 0)
        return MSP_ERR_FORMAT;
    msp_dtype_t named = r ? msp_dtype_from_name(attr) : MSP_DTYPE_INVALID;
    if (r == 0 || (named == stored && stored))
        t->dtype = stored;
    else if (stored == MSP_DTYPE_UINT8 && named == MSP_DTYPE_BOOL)
        t->dtype = MSP_DTYPE_BOOL; /* bool stored as uint8 0/1: same bytes */
    else if (stored && named)
        return msp_fail(MSP_ERR_FORMAT, "%s: attribute dtype says %s but the data is stored as %s",
                        where, attr, desc);
    else if (!stored && null_space)
        t->dtype = named; /* statistics only: the attribute is all there is */
    else
        t->dtype = stored;
    if (t->dtype)
        snprintf(t->dtype_name, sizeof t->dtype_name, "%s", msp_dtype_name(t->dtype));
    else
        snprintf(t->dtype_name, sizeof t->dtype_name, "%.39s", r ? attr : desc);
    return MSP_OK;
}

/* Data kept outside the file (external storage: any path, /etc/passwd or
 * /dev/zero) or assembled from other files (virtual layout) is never read. */
/* plain (may be NULL): set to whether the data is contiguous and unfiltered,
 * read from the same creation properties (copying them is a good part of a
 * dataset's check). */
static msp_err msp_check_storage(hid_t d, const char *where, int *plain)
{
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0)
        return msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot read the dataset's layout", where);
    int external = H5Pget_external_count(dcpl);
    H5D_layout_t layout = H5Pget_layout(dcpl);
    if (plain)
        *plain = layout == H5D_CONTIGUOUS && H5Pget_nfilters(dcpl) == 0;
    H5Pclose(dcpl);
    if (external != 0)
        return msp_fail(MSP_ERR_FORMAT, "%s: the dataset's data is stored in other files "
                        "(external storage): refused", where);
    if (layout == H5D_VIRTUAL)
        return msp_fail(MSP_ERR_FORMAT, "%s: the dataset is a virtual one made of other files: "
                        "refused", where);
    if (layout < 0)
        return msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot read the dataset's layout", where);
    return MSP_OK;
}

/* A tensor read through H5Dread (no plain offset) may not declare far more
 * elements than its storage holds: a chunked dataset of 2^28 floats in a
 * few kilobytes would otherwise cost gigabytes of fill values. */
#define MSP_MAX_EXPANSION 1024
#define MSP_EXPANSION_SLACK ((int64_t)1 << 20)

static msp_err msp_check_expansion(hid_t d, const msp_tensor_info_t *t, const char *where)
{
    hsize_t stored = H5Dget_storage_size(d);
    if (t->nbytes > MSP_EXPANSION_SLACK &&
        (uint64_t)t->nbytes / MSP_MAX_EXPANSION > (uint64_t)stored)
        return msp_fail(MSP_ERR_FORMAT, "%s: declares %lld bytes from %llu bytes of storage "
                        "(more than %d:1): refused", where, (long long)t->nbytes,
                        (unsigned long long)stored, MSP_MAX_EXPANSION);
    return MSP_OK;
}

/* How many datasets group g holds: its link count when that is all of them
 * (as msprobe writes groups), else those counted one by one. -1: error. */
static long msp_count_datasets(hid_t g, size_t expect, const char *where)
{
    H5G_info_t gi;
    if (H5Gget_info(g, &gi) < 0)
        return -1;
    if (gi.nlinks == expect)
        return (long)expect;
    struct msp_names ns;
    if (msp_children(g, H5O_TYPE_DATASET, &ns, where) != MSP_OK)
        return -1;
    long n = (long)ns.sv.n;
    msp_free_strings(ns.sv.v, ns.sv.n);
    return n;
}

/* The dtype a row names against the dataset's own: its stored type (data),
 * else its dtype attribute (statistics only). */
static msp_err msp_verify_row_dtype(hid_t d, hid_t ft, const msp_tensor_info_t *t,
                                    const char *where)
{
    char desc[64], attr[64];
    int exact = 0;
    if (t->has_data) {
        msp_dtype_t stored = msp_h5_dtype_of(ft, &exact, desc, sizeof desc);
        if (stored && t->dtype != stored &&
            !(stored == MSP_DTYPE_UINT8 && t->dtype == MSP_DTYPE_BOOL))
            return msp_fail(MSP_ERR_FORMAT, "%s: the row says dtype %s, the dataset stores %s",
                            where, t->dtype_name, desc);
        return MSP_OK;
    }
    int r = msp_h5_attr_get_str(d, "dtype", attr, sizeof attr, where);
    if (r < 0)
        return MSP_ERR_FORMAT;
    if (r > 0 && strcmp(attr, t->dtype_name) != 0 &&
        !(t->dtype && msp_dtype_from_name(attr) == t->dtype))
        return msp_fail(MSP_ERR_FORMAT, "%s: the row says dtype %s, the dataset's dtype "
                        "attribute %.40s", where, t->dtype_name, attr);
    return MSP_OK;
}

/* One row against its dataset d (see msp_verify_index). */
static msp_err msp_verify_row(msp_dump_file_t *f, hid_t d, const msp_tensor_info_t *t,
                              const char *where)
{
    struct msp_dump_impl *im = msp_impl(f);
    int plain = 0;
    msp_err rc = t->has_data ? msp_check_storage(d, where, &plain) : MSP_OK;
    hid_t s = rc ? -1 : H5Dget_space(d), ft = rc ? -1 : H5Dget_type(d);
    hsize_t dims[MSP_MAX_NDIM];
    int nd = s >= 0 ? H5Sget_simple_extent_ndims(s) : -1;
    if (!rc && (s < 0 || ft < 0 || nd < 0 || nd > MSP_MAX_NDIM))
        rc = msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot read the dataset's shape", where);
    if (!rc && (H5Sget_simple_extent_type(s) != H5S_NULL) != t->has_data)
        rc = msp_fail(MSP_ERR_FORMAT, "%s: the row says the tensor has %sdata, the dataset "
                      "holds %s", where, t->has_data ? "" : "no ", t->has_data ? "none" : "some");
    if (!rc)
        rc = msp_verify_row_dtype(d, ft, t, where);
    if (!rc && t->has_data) {
        H5Sget_simple_extent_dims(s, dims, NULL);
        int same = nd == t->ndim;
        for (int k = 0; same && k < nd; k++)
            same = (int64_t)dims[k] == t->shape[k];
        if (!same)
            rc = msp_fail(MSP_ERR_FORMAT, "%s: the row's shape differs from the dataset's",
                          where);
        if (!rc && t->dtype && H5Tget_size(ft) != msp_dtype_size(t->dtype))
            rc = msp_fail(MSP_ERR_FORMAT, "%s: the row says %s (%zu bytes an element), the "
                          "dataset stores %zu", where, t->dtype_name, msp_dtype_size(t->dtype),
                          H5Tget_size(ft));
        if (!rc && t->offset >= 0) {
            haddr_t a = H5Dget_offset(d);
            if (!plain || a == HADDR_UNDEF || (int64_t)(a + im->userblock) != t->offset ||
                H5Dget_storage_size(d) != (hsize_t)t->nbytes)
                rc = msp_fail(MSP_ERR_FORMAT, "%s: the row says %lld bytes at offset %lld, the "
                              "dataset's own storage differs", where, (long long)t->nbytes,
                              (long long)t->offset);
        } else if (!rc) {
            rc = msp_check_expansion(d, t, where);
        }
    }
    if (s >= 0)
        H5Sclose(s);
    if (ft >= 0)
        H5Tclose(ft);
    return rc;
}

/* Each /index row checked against the dataset it names, and the table
 * against the file: a row with data names a dataset that holds data of the
 * row's dtype, shape and element size, kept in this file, and a row's
 * offset is the dataset's own contiguous storage of exactly nbytes; a row
 * without data names no dataset (msprobe writes none) or one without data
 * whose dtype attribute is the row's. Every record group and dataset of the
 * file has its row (an empty /index is no empty file), and no row appears
 * twice (msp_load_index). Runs where libhdf5 may fail safely (the reader
 * helper). */
static msp_err msp_verify_index(msp_dump_file_t *f)
{
    struct msp_dump_impl *im = msp_impl(f);
    char where[700];
    struct msp_names groups;
    snprintf(where, sizeof where, "file %s", f->path);
    msp_err rc = msp_children(im->file, H5O_TYPE_GROUP, &groups, where);
    if (rc)
        return rc;
    size_t n_groups = groups.sv.n, found = 0;
    msp_free_strings(groups.sv.v, groups.sv.n);
    for (size_t i = 0; i < f->n_records && !rc; i++) {
        msp_record_info_t *r = &f->records[i];
        snprintf(where, sizeof where, "file %s: /index: record %s", f->path, r->name);
        htri_t has_g = H5Lexists(im->file, r->name, H5P_DEFAULT);
        hid_t g = has_g > 0 ? H5Gopen2(im->file, r->name, H5P_DEFAULT) : -1;
        size_t n_sets = 0, n_data = 0;
        found += g >= 0;
        for (size_t j = 0; j < r->n_tensors && !rc; j++) {
            msp_tensor_info_t *t = &r->tensors[j];
            n_data += t->has_data;
            snprintf(where, sizeof where, "file %s: /index: record %s: %s", f->path, r->name,
                     t->role);
            htri_t has_d = g >= 0 ? H5Lexists(g, t->role, H5P_DEFAULT) : 0;
            hid_t d = has_d > 0 ? H5Dopen2(g, t->role, H5P_DEFAULT) : -1;
            if (d < 0 && t->has_data) {
                rc = msp_h5_fail(MSP_ERR_FORMAT, "%s: the row names a dataset the file does "
                                 "not have", where);
                break;
            }
            H5Eclear2(H5E_DEFAULT);
            if (d < 0)
                continue; /* statistics only: the row is all there is */
            n_sets++;
            rc = msp_verify_row(f, d, t, where);
            H5Dclose(d);
        }
        if (!rc && g < 0 && n_data)
            rc = msp_fail(MSP_ERR_FORMAT, "file %s: /index: record %s: the row names a record "
                          "the file does not have", f->path, r->name);
        snprintf(where, sizeof where, "file %s: /index: record %s", f->path, r->name);
        long held = !rc && g >= 0 ? msp_count_datasets(g, n_sets, where) : (long)n_sets;
        if (!rc && held < 0)
            rc = msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot list its datasets", where);
        else if (!rc && held != (long)n_sets)
            rc = msp_fail(MSP_ERR_FORMAT, "%s: the record's group holds %ld datasets, the "
                          "table names %zu of them", where, held, n_sets);
        if (g >= 0)
            H5Gclose(g);
    }
    if (!rc && found != n_groups)
        rc = msp_fail(MSP_ERR_FORMAT, "file %s: /index names %zu of the file's %zu record "
                      "groups: the table does not describe the file", f->path, found, n_groups);
    H5Eclear2(H5E_DEFAULT);
    return rc;
}

static msp_err msp_walk_offset(hid_t d, msp_dump_file_t *f, msp_tensor_info_t *t, int exact)
{
    struct msp_dump_impl *im = msp_impl(f);
    hid_t dcpl = H5Dget_create_plist(d);
    t->offset = -1;
    if (dcpl < 0)
        return msp_h5_fail(MSP_ERR_FORMAT, "file %s: cannot read a dataset's layout", f->path);
    int direct = exact && t->has_data && t->dtype && t->nbytes > 0 &&
                 H5Pget_layout(dcpl) == H5D_CONTIGUOUS && H5Pget_nfilters(dcpl) == 0 &&
                 H5Pget_external_count(dcpl) == 0;
    H5Pclose(dcpl);
    if (!direct)
        return MSP_OK;
    haddr_t a = H5Dget_offset(d);
    if (a == HADDR_UNDEF || H5Dget_storage_size(d) != (hsize_t)t->nbytes) {
        H5Eclear2(H5E_DEFAULT);
        return MSP_OK; /* never written: H5Dread returns the fill value */
    }
    int64_t off = (int64_t)(a + im->userblock);
    if (off >= 0 && off <= im->file_size - t->nbytes)
        t->offset = off;
    return MSP_OK;
}

static msp_err msp_walk_stats(hid_t d, msp_tensor_info_t *t, const char *where)
{
    static const char *const keys[] = {"max", "min", "mean", "norm"};
    double *dst[] = {&t->stats.max, &t->stats.min, &t->stats.mean, &t->stats.norm};
    int have = 0;
    for (int i = 0; i < 4; i++) {
        *dst[i] = NAN;
        int r = msp_h5_attr_get_f64(d, keys[i], dst[i], where);
        if (r < 0)
            return MSP_ERR_FORMAT;
        have += r;
    }
    t->has_stats = have == 4;
    int64_t v;
    int r;
    if ((r = msp_h5_attr_get_i64(d, "nan_count", &v, where)) < 0)
        return MSP_ERR_FORMAT;
    t->stats.nan_count = r ? v : 0;
    if ((r = msp_h5_attr_get_i64(d, "inf_count", &v, where)) < 0)
        return MSP_ERR_FORMAT;
    t->stats.inf_count = r ? v : 0;
    if ((r = msp_h5_attr_get_i64(d, "crc32", &v, where)) < 0)
        return MSP_ERR_FORMAT;
    t->stats.crc32 = r ? (uint32_t)v : 0;
    if ((r = msp_h5_attr_get_i64(d, "requires_grad", &v, where)) < 0)
        return MSP_ERR_FORMAT;
    t->requires_grad = r ? v != 0 : 0;
    if (msp_h5_attr_get_str(d, "device", t->device, sizeof t->device, where) < 0)
        return MSP_ERR_FORMAT;
    return MSP_OK;
}

static msp_err msp_walk_tensor(msp_dump_file_t *f, hid_t g, const char *rec, const char *role,
                               msp_tensor_info_t *t)
{
    char where[700];
    snprintf(where, sizeof where, "file %s: record %s: %s", f->path, rec, role);
    msp_err rc = MSP_OK;
    hid_t d = -1, ft = -1, s = -1;
    int exact = 0;
    if (!(t->role = strdup(role)))
        return msp_fail(MSP_ERR_NOMEM, "%s: out of memory", where);
    d = H5Dopen2(g, role, H5P_DEFAULT);
    ft = d >= 0 ? H5Dget_type(d) : -1;
    s = d >= 0 ? H5Dget_space(d) : -1;
    if (s < 0 || ft < 0) {
        rc = msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot open the dataset", where);
        goto cleanup;
    }
    H5S_class_t sc = H5Sget_simple_extent_type(s);
    if ((rc = msp_walk_dtype(d, ft, sc == H5S_NULL, t, &exact, where)))
        goto cleanup;
    size_t esize = t->dtype ? msp_dtype_size(t->dtype) : H5Tget_size(ft);
    if (sc == H5S_NULL) {
        int n = 0;
        int r = msp_h5_attr_get_i64_array(d, "shape", t->shape, &n, where);
        if (r <= 0) {
            rc = r < 0 ? MSP_ERR_FORMAT
                       : msp_fail(MSP_ERR_FORMAT, "%s: statistics-only dataset (null dataspace) "
                                  "without a 'shape' attribute", where);
            goto cleanup;
        }
        t->ndim = n;
        t->has_data = 0;
    } else {
        hsize_t dims[H5S_MAX_RANK];
        int nd = H5Sget_simple_extent_dims(s, dims, NULL);
        if (nd < 0 || nd > MSP_MAX_NDIM) {
            rc = msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot read its dataspace", where);
            goto cleanup;
        }
        t->ndim = nd;
        for (int i = 0; i < nd; i++)
            t->shape[i] = (int64_t)dims[i];
        t->has_data = 1;
    }
    if ((rc = msp_shape_size(t->shape, t->ndim, esize, &t->numel, &t->nbytes, where)))
        goto cleanup;
    if ((rc = msp_walk_stats(d, t, where)))
        goto cleanup;
    if (msp_h5_attr_get_text(d, "producer", &t->producer, where) < 0) {
        rc = MSP_ERR_FORMAT;
        goto cleanup;
    }
    if (t->producer && !t->producer[0]) {
        free(t->producer);
        t->producer = NULL;
    }
    t->offset = -1;
    if (t->has_data && ((rc = msp_check_storage(d, where, NULL)) ||
                        (rc = msp_walk_offset(d, f, t, exact))))
        goto cleanup;
    if (t->has_data && t->offset < 0)
        rc = msp_check_expansion(d, t, where);
cleanup:
    if (s >= 0)
        H5Sclose(s);
    if (ft >= 0)
        H5Tclose(ft);
    if (d >= 0)
        H5Dclose(d);
    return rc;
}

static msp_err msp_walk_record(msp_dump_file_t *f, const char *name, int64_t position,
                               msp_record_info_t *r)
{
    char where[700];
    snprintf(where, sizeof where, "file %s: record %s", f->path, name);
    msp_err rc = MSP_OK;
    struct msp_names ns = {0};
    hid_t g = H5Gopen2(msp_impl(f)->file, name, H5P_DEFAULT);
    if (!(r->name = strdup(name))) {
        rc = msp_fail(MSP_ERR_NOMEM, "%s: out of memory", where);
        goto cleanup;
    }
    if (g < 0) {
        rc = msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot open its group", where);
        goto cleanup;
    }
    int o = msp_h5_attr_get_i64(g, "order", &r->order, where);
    if (o < 0) {
        rc = MSP_ERR_FORMAT;
        goto cleanup;
    }
    if (o == 0)
        r->order = position;
    if ((rc = msp_children(g, H5O_TYPE_DATASET, &ns, where)))
        goto cleanup;
    r->tensors = calloc(ns.sv.n ? ns.sv.n : 1, sizeof *r->tensors);
    if (!r->tensors) {
        rc = msp_fail(MSP_ERR_NOMEM, "%s: out of memory", where);
        goto cleanup;
    }
    for (size_t i = 0; i < ns.sv.n; i++) {
        rc = msp_walk_tensor(f, g, name, ns.sv.v[i], &r->tensors[i]);
        r->n_tensors = i + 1;
        if (rc)
            goto cleanup;
    }
cleanup:
    msp_free_strings(ns.sv.v, ns.sv.n);
    if (g >= 0)
        H5Gclose(g);
    return rc;
}

static msp_err msp_walk(msp_dump_file_t *f)
{
    struct msp_names ns;
    char where[600];
    snprintf(where, sizeof where, "file %s", f->path);
    msp_err rc = msp_children(msp_impl(f)->file, H5O_TYPE_GROUP, &ns, where);
    if (rc)
        return rc;
    f->records = calloc(ns.sv.n ? ns.sv.n : 1, sizeof *f->records);
    if (!f->records) {
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
        goto cleanup;
    }
    for (size_t i = 0; i < ns.sv.n; i++) {
        rc = msp_walk_record(f, ns.sv.v[i], (int64_t)i, &f->records[i]);
        f->n_records = i + 1;
        if (rc)
            goto cleanup;
    }
cleanup:
    msp_free_strings(ns.sv.v, ns.sv.n);
    return rc;
}

/* ---- open ------------------------------------------------------------------- */

static msp_err msp_root_attrs(msp_dump_file_t *f)
{
    hid_t root = msp_impl(f)->file;
    char where[600], fmt[64];
    snprintf(where, sizeof where, "file %s", f->path);
    int r = msp_h5_attr_get_str(root, "format", fmt, sizeof fmt, where);
    if (r < 0)
        return MSP_ERR_FORMAT;
    if (r == 0)
        return msp_fail(MSP_ERR_FORMAT, "file %s: an HDF5 file but not an msprobe dump: the root "
                        "attribute 'format' is missing (see msprobe-dump(5))", f->path);
    if (strcmp(fmt, MSP_FORMAT_NAME) != 0)
        return msp_fail(MSP_ERR_FORMAT, "file %s: root attribute format is '%s', expected '%s'",
                        f->path, fmt, MSP_FORMAT_NAME);
    int64_t ver = MSP_FORMAT_VERSION;
    if (msp_h5_attr_get_i64(root, "format_version", &ver, where) < 0)
        return MSP_ERR_FORMAT;
    if (ver > MSP_FORMAT_VERSION || ver < 1)
        return msp_fail(MSP_ERR_UNSUPPORTED, "file %s: format_version %lld; this msprobe reads "
                        "version %d: upgrade msprobe", f->path, (long long)ver, MSP_FORMAT_VERSION);
    struct {
        const char *key;
        char *buf;
        size_t size;
    } strs[] = {
        {"framework", f->framework, sizeof f->framework},
        {"framework_version", f->framework_version, sizeof f->framework_version},
        {"task", f->task, sizeof f->task},
        {"dump_mode", f->dump_mode, sizeof f->dump_mode},
    };
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if (msp_h5_attr_get_str(root, strs[i].key, strs[i].buf, strs[i].size, where) < 0)
            return MSP_ERR_FORMAT;
    int64_t *ints[] = {&f->step, &f->rank, &f->world_size};
    const char *ikeys[] = {"step", "rank", "world_size"};
    for (int i = 0; i < 3; i++) {
        *ints[i] = -1;
        if (msp_h5_attr_get_i64(root, ikeys[i], ints[i], where) < 0)
            return MSP_ERR_FORMAT;
    }
    return MSP_OK;
}

static msp_err msp_open_locked(msp_dump_file_t *f)
{
    struct msp_dump_impl *im = f->impl;
    const char *path = f->path;
    htri_t is = H5Fis_hdf5(path);
    if (is <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return msp_fail(MSP_ERR_FORMAT, "file %s: not an HDF5 file (no HDF5 signature; "
                        "%lld bytes)", path, (long long)im->file_size);
    }
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0) {
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
        H5Pset_file_locking(fapl, 1, 1);
    }
    im->file = H5Fopen(path, H5F_ACC_RDONLY, fapl >= 0 ? fapl : H5P_DEFAULT);
    msp_err rc = MSP_OK;
    if (im->file < 0) /* before any other H5 call: each one clears the error stack */
        rc = msp_h5_fail(MSP_ERR_FORMAT, "file %s: cannot open as HDF5: the file is truncated, "
                         "corrupt or still being written", path);
    if (fapl >= 0)
        H5Pclose(fapl);
    if (rc)
        return rc;
    hid_t fcpl = H5Fget_create_plist(im->file);
    if (fcpl >= 0) {
        H5Pget_userblock(fcpl, &im->userblock);
        H5Pclose(fcpl);
    }
    rc = msp_root_attrs(f);
    if (rc)
        return rc;
    hid_t idx = -1;
    int u = msp_index_usable(im->file, &idx);
    if (u < 0)
        return msp_h5_fail(MSP_ERR_FORMAT, "file %s: cannot inspect /index", path);
    if (u > 0) {
        rc = msp_load_index(f, idx);
        if (!rc)
            rc = msp_load_index_producers(f, idx);
        if (!rc)
            rc = msp_verify_index(f);
        H5Dclose(idx);
        f->has_index = 1;
    } else {
        H5Eclear2(H5E_DEFAULT);
        rc = msp_walk(f);
    }
    if (!rc)
        msp_sort_catalogue(f);
    return rc;
}

/* An empty file object for path: no HDF5 handle, no descriptor yet. */
static msp_err msp_dump_alloc(const char *path, msp_dump_file_t **out)
{
    *out = NULL;
    msp_dump_file_t *f = calloc(1, sizeof *f);
    struct msp_dump_impl *im = calloc(1, sizeof *im);
    if (!f || !im || !(f->path = strdup(path))) {
        free(f ? f->path : NULL);
        free(f);
        free(im);
        return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", path);
    }
    f->impl = im;
    im->file = im->fd = -1;
    f->step = f->rank = f->world_size = -1;
    *out = f;
    return MSP_OK;
}

/* A new file object for path (stat'ed as sb), its descriptor open. */
static msp_err msp_dump_new(const char *path, const struct stat *sb, msp_dump_file_t **out)
{
    *out = NULL;
    if (S_ISDIR(sb->st_mode))
        return msp_fail(MSP_ERR_FORMAT, "file %s: is a directory, not a dump file", path);
    /* A FIFO or a device would hang or never end: regular files only. */
    if (!S_ISREG(sb->st_mode))
        return msp_fail(MSP_ERR_FORMAT, "file %s: not a regular file (a FIFO, socket or "
                        "device), not a dump file", path);
    msp_dump_file_t *f;
    msp_err rc = msp_dump_alloc(path, &f);
    if (rc)
        return rc;
    struct msp_dump_impl *im = msp_impl(f);
    im->file_size = (int64_t)sb->st_size;
    im->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (im->fd < 0) {
        rc = msp_fail(MSP_ERR_IO, "file %s: %s", path, strerror(errno));
        msp_dump_close(f);
        return rc;
    }
    struct stat now;
    if (fstat(im->fd, &now) != 0 || !S_ISREG(now.st_mode)) { /* swapped since stat() */
        msp_dump_close(f);
        return msp_fail(MSP_ERR_FORMAT, "file %s: not a regular file, not a dump file", path);
    }
    *out = f;
    return MSP_OK;
}

static msp_err msp_dump_stat(const char *path, struct stat *sb)
{
    if (stat(path, sb) != 0)
        return msp_fail(errno == ENOENT || errno == ENOTDIR ? MSP_ERR_NOT_FOUND : MSP_ERR_IO,
                        "file %s: %s", path, strerror(errno));
    return MSP_OK;
}

msp_err msp_dump_open_local(const char *path, msp_dump_file_t **out)
{
    if (out)
        *out = NULL;
    if (!path || !*path || !out)
        return msp_fail(MSP_ERR_USAGE, "msp_dump_open: path and out are required");
    struct stat sb;
    msp_dump_file_t *f;
    msp_err rc = msp_dump_stat(path, &sb);
    if (rc || (rc = msp_dump_new(path, &sb, &f)))
        return rc;
    msp_h5_lock();
    rc = msp_open_locked(f);
    if (rc) {
        msp_dump_free_locked(f);
        f = NULL;
    }
    msp_h5_unlock();
    *out = f;
    return rc;
}

msp_err msp_dump_from_wire(const char *path, const unsigned char *buf, size_t n,
                           msp_dump_file_t **out)
{
    msp_dump_file_t *f;
    msp_err rc = msp_dump_alloc(path, &f);
    if (rc)
        return rc;
    struct msp_dump_impl *im = msp_impl(f);
    rc = msp_wire_get_file(buf, n, f, &im->attrs);
    if (rc) {
        msp_dump_close(f);
        return rc;
    }
    *out = f;
    return MSP_OK;
}

msp_err msp_dump_open(const char *path, msp_dump_file_t **out)
{
    if (out)
        *out = NULL;
    if (!path || !*path || !out)
        return msp_fail(MSP_ERR_USAGE, "msp_dump_open: path and out are required");
    char *ms_json = msp_msprobe_json_for(path);
    if (ms_json) { /* msprobe's own stepN/rankN/dump.json: our own parsers, no libhdf5 */
        msp_err mrc = msp_msprobe_open(ms_json, out);
        free(ms_json);
        return mrc;
    }
    /* MSPROBE_READER_INPROC=1: parse in this process (fuzzing the reader
     * itself, or debugging it); a corrupt file may then crash the caller. */
    const char *inproc = getenv("MSPROBE_READER_INPROC");
    if (inproc && strcmp(inproc, "1") == 0)
        return msp_dump_open_local(path, out);
    struct stat sb;
    msp_dump_file_t *f;
    msp_err rc = msp_dump_stat(path, &sb);
    if (rc || (rc = msp_dump_new(path, &sb, &f)))
        return rc;
    struct msp_dump_impl *im = msp_impl(f);
    rc = msp_contained_open(f, im->file_size, &im->attrs);
    if (rc) {
        msp_dump_close(f);
        return rc;
    }
    *out = f;
    return MSP_OK;
}

/* ---- data --------------------------------------------------------------------- */

static msp_err msp_pread_all(int fd, void *buf, size_t n, int64_t off, const char *where)
{
    char *p = buf;
    while (n > 0) {
        ssize_t k = pread(fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return msp_fail(MSP_ERR_IO, "%s: read failed: %s", where, strerror(errno));
        if (k == 0)
            return msp_fail(MSP_ERR_FORMAT, "%s: file ends inside the tensor data (truncated?)",
                            where);
        p += k;
        n -= (size_t)k;
        off += k;
    }
    return MSP_OK;
}

/* ---- tensors a block at a time -------------------------------------------- */

/* A block of a chunked or compressed dataset: whole rows of the deepest
 * dimension whose row still fits, never crossing an index of the dimensions
 * above it, so each block is one hyperslab. */
#define MSP_STREAM_BLOCK ((size_t)4 << 20)

enum { MSP_STREAM_PREAD, MSP_STREAM_BUFFER, MSP_STREAM_H5, MSP_STREAM_HELPER };

struct msp_tensor_stream {
    int kind;
    char where[700];
    uint64_t total, done; /* bytes */
    int fd;               /* pread: the file's descriptor, at offset */
    int64_t offset;
    unsigned char *buf;   /* buffer/h5: bytes [at, have) not yet given */
    size_t have, at;
    hid_t d, fs, mt;      /* h5: the dataset, its space, the native type */
    int nd;
    hsize_t shape[H5S_MAX_RANK];
    size_t esize;
    int bdim;             /* h5: blocks are whole rows of this dimension, */
    uint64_t inner;       /* each row this many elements (msp_stream_h5_rows) */
    uint64_t elem;        /* h5: elements read so far */
    struct msp_helper_stream *helper;
};

/* The dimension a block takes whole rows of: the shallowest one whose rows
 * (the product of the dimensions below it) still fit in a block. */
static void msp_stream_h5_rows(msp_tensor_stream_t *s)
{
    uint64_t inner = 1;
    int d = s->nd - 1;
    while (d > 0 && inner * s->shape[d] * s->esize <= MSP_STREAM_BLOCK) {
        inner *= s->shape[d];
        d--;
    }
    s->bdim = d;
    s->inner = inner;
}

/* Reads the next block of an in-process HDF5 dataset into s->buf. */
static msp_err msp_stream_h5_fill(msp_tensor_stream_t *s)
{
    int d = s->bdim;
    uint64_t inner = s->inner;
    hsize_t start[H5S_MAX_RANK], count[H5S_MAX_RANK];
    uint64_t rest = s->elem;
    for (int i = s->nd - 1; i >= 0; i--) {
        start[i] = (hsize_t)(rest % s->shape[i]);
        rest /= s->shape[i];
        count[i] = 1;
    }
    uint64_t k = 1;
    if (s->nd > 0) {
        for (int i = d + 1; i < s->nd; i++) {
            start[i] = 0; /* aligned: blocks advance by whole rows of dimension d */
            count[i] = s->shape[i];
        }
        uint64_t fit = MSP_STREAM_BLOCK / (inner * s->esize);
        k = s->shape[d] - start[d];
        if (fit >= 1 && k > fit)
            k = fit;
        count[d] = (hsize_t)k;
    }
    uint64_t n = k * inner;
    msp_err rc = MSP_OK;
    msp_h5_lock();
    hid_t ms = H5Screate_simple(1, (hsize_t[]){(hsize_t)n}, NULL);
    int ok = ms >= 0 &&
             (s->nd == 0 || H5Sselect_hyperslab(s->fs, H5S_SELECT_SET, start, NULL, count,
                                                NULL) >= 0) &&
             H5Dread(s->d, s->mt, ms, s->nd == 0 ? H5S_ALL : s->fs, H5P_DEFAULT, s->buf) >= 0;
    if (!ok)
        rc = msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot read elements %llu to %llu", s->where,
                         (unsigned long long)s->elem, (unsigned long long)(s->elem + n));
    if (ms >= 0)
        H5Sclose(ms);
    msp_h5_unlock();
    s->elem += n;
    s->have = (size_t)(n * s->esize);
    s->at = 0;
    return rc;
}

/* The chunk cache a stream needs: the chunks one block's rows cross, so
 * each chunk is decompressed once however many blocks touch it (libhdf5's
 * default 1 MiB would decompress a bigger chunk again for every block), at
 * most 64 MiB. Reopens s->d (g/role) with it; keeps the default on any
 * failure. */
static void msp_stream_h5_cache(msp_tensor_stream_t *s, hid_t g, const char *role)
{
    hid_t dcpl = H5Dget_create_plist(s->d);
    hsize_t cd[H5S_MAX_RANK];
    int cn = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED
                 ? H5Pget_chunk(dcpl, H5S_MAX_RANK, cd) : -1;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (cn != s->nd || cn <= 0)
        return;
    int d = s->bdim;
    double need = (double)s->esize;
    for (int i = 0; i < s->nd; i++) {
        uint64_t c = cd[i] ? cd[i] : 1;
        uint64_t span = i <= d ? c : (s->shape[i] + c - 1) / c * c;
        need *= (double)span;
    }
    double cap = (double)((size_t)64 << 20), floor_ = (double)((size_t)1 << 20);
    size_t bytes = (size_t)(need * 2 < floor_ ? floor_ : need * 2 > cap ? cap : need * 2);
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    if (dapl < 0)
        return;
    if (H5Pset_chunk_cache(dapl, 12421, bytes, 1.0) >= 0) {
        hid_t again = H5Dopen2(g, role, dapl);
        if (again >= 0) {
            H5Dclose(s->d);
            s->d = again;
        }
    }
    H5Pclose(dapl);
    H5Eclear2(H5E_DEFAULT);
}

static msp_err msp_stream_h5_open(msp_dump_file_t *f, const msp_record_info_t *r,
                                  const msp_tensor_info_t *t, msp_tensor_stream_t *s)
{
    struct msp_dump_impl *im = msp_impl(f);
    msp_err rc = MSP_OK;
    hid_t g = -1, ft = -1;
    msp_h5_lock();
    g = H5Gopen2(im->file, r->name, H5P_DEFAULT);
    s->d = g >= 0 ? H5Dopen2(g, t->role, H5P_DEFAULT) : -1;
    ft = s->d >= 0 ? H5Dget_type(s->d) : -1;
    s->fs = s->d >= 0 ? H5Dget_space(s->d) : -1;
    int nd = s->fs >= 0 ? H5Sget_simple_extent_ndims(s->fs) : -1;
    if (ft < 0 || nd < 0) {
        rc = msp_h5_fail(MSP_ERR_NOT_FOUND, "%s: cannot open the dataset", s->where);
        goto done;
    }
    if (H5Sget_simple_extent_npoints(s->fs) != t->numel) {
        rc = msp_fail(MSP_ERR_FORMAT, "%s: dataset has %lld elements, catalogue says %lld",
                      s->where, (long long)H5Sget_simple_extent_npoints(s->fs),
                      (long long)t->numel);
        goto done;
    }
    s->nd = nd;
    H5Sget_simple_extent_dims(s->fs, s->shape, NULL);
    H5T_class_t fc = H5Tget_class(ft);
    if (t->dtype == MSP_DTYPE_BOOL && fc == H5T_INTEGER)
        s->mt = H5Tcopy(H5T_NATIVE_UINT8);
    else if (t->dtype == MSP_DTYPE_BOOL && fc == H5T_ENUM)
        s->mt = H5Tget_native_type(ft, H5T_DIR_ASCEND); /* enums convert by member name */
    else
        s->mt = msp_h5_type_for(t->dtype);
    s->esize = msp_dtype_size(t->dtype);
    if (s->mt < 0 || !s->esize) {
        rc = msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot read the data as %s", s->where,
                         t->dtype_name);
        goto done;
    }
    msp_stream_h5_rows(s);
    msp_stream_h5_cache(s, g, t->role);
    /* one block: a row that fits, or a single element of an oversized one */
    size_t cap = MSP_STREAM_BLOCK > s->esize ? MSP_STREAM_BLOCK : s->esize;
    if (!(s->buf = malloc(cap)))
        rc = msp_fail(MSP_ERR_NOMEM, "%s: out of memory", s->where);
done:
    if (ft >= 0)
        H5Tclose(ft);
    if (g >= 0)
        H5Gclose(g);
    msp_h5_unlock();
    return rc;
}

msp_err msp_tensor_stream_open(msp_dump_file_t *f, const msp_record_info_t *r,
                               const msp_tensor_info_t *t, msp_tensor_stream_t **out)
{
    if (!out)
        return msp_fail(MSP_ERR_USAGE, "msp_tensor_stream_open: out is NULL");
    *out = NULL;
    if (!f || !r || !t)
        return msp_fail(MSP_ERR_USAGE, "msp_tensor_stream_open: file, record and tensor are "
                        "required");
    msp_tensor_stream_t *s = calloc(1, sizeof *s);
    if (!s)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    s->d = s->fs = s->mt = -1;
    s->fd = -1;
    snprintf(s->where, sizeof s->where, "file %s: record %s: %s", f->path, r->name, t->role);
    msp_err rc = msp_read_check(t, t->has_data, (size_t)t->nbytes, s->where);
    s->total = t->nbytes > 0 ? (uint64_t)t->nbytes : 0;
    if (rc || !s->total) {
        s->kind = MSP_STREAM_BUFFER;
    } else if (msp_msprobe_owns(f)) {
        /* a .pt or .npy of its own: loaded whole, as its parser reads it */
        s->kind = MSP_STREAM_BUFFER;
        if (!(s->buf = malloc((size_t)s->total)))
            rc = msp_fail(MSP_ERR_NOMEM, "%s: out of memory for %llu bytes", s->where,
                          (unsigned long long)s->total);
        else if (!(rc = msp_msprobe_read_tensor(f, r, t, s->buf, (size_t)s->total)))
            s->have = (size_t)s->total;
    } else if (t->offset >= 0) {
        s->kind = MSP_STREAM_PREAD;
        s->fd = msp_impl(f)->fd;
        s->offset = t->offset;
    } else if (msp_impl(f)->file < 0) {
        s->kind = MSP_STREAM_HELPER;
        rc = msp_contained_stream_open(f, im_file_size(f), r, t, &s->helper);
    } else {
        s->kind = MSP_STREAM_H5;
        rc = msp_stream_h5_open(f, r, t, s);
    }
    if (rc) {
        msp_tensor_stream_close(s);
        return rc;
    }
    *out = s;
    return MSP_OK;
}

msp_err msp_tensor_stream_read(msp_tensor_stream_t *s, void *buf, size_t n)
{
    if (!s || (!buf && n))
        return msp_fail(MSP_ERR_USAGE, "msp_tensor_stream_read: stream and buffer are required");
    if (n > s->total - s->done)
        return msp_fail(MSP_ERR_USAGE, "%s: %zu bytes asked, %llu left", s->where, n,
                        (unsigned long long)(s->total - s->done));
    msp_err rc = MSP_OK;
    unsigned char *p = buf;
    switch (s->kind) {
    case MSP_STREAM_PREAD:
        rc = msp_pread_all(s->fd, p, n, s->offset + (int64_t)s->done, s->where);
        break;
    case MSP_STREAM_HELPER:
        rc = msp_contained_stream_read(s->helper, p, n);
        break;
    default:
        for (size_t left = n; left && !rc;) {
            if (s->at == s->have) {
                if (s->kind != MSP_STREAM_H5) {
                    rc = msp_fail(MSP_ERR_INTERNAL, "%s: stream ran dry", s->where);
                    break;
                }
                if ((rc = msp_stream_h5_fill(s)))
                    break;
            }
            size_t k = s->have - s->at < left ? s->have - s->at : left;
            memcpy(p, s->buf + s->at, k);
            s->at += k;
            p += k;
            left -= k;
        }
    }
    if (!rc)
        s->done += n;
    return rc;
}

void msp_tensor_stream_close(msp_tensor_stream_t *s)
{
    if (!s)
        return;
    if (s->helper)
        msp_contained_stream_close(s->helper);
    if (s->d >= 0 || s->fs >= 0 || s->mt >= 0) {
        msp_h5_lock();
        if (s->mt >= 0)
            H5Tclose(s->mt);
        if (s->fs >= 0)
            H5Sclose(s->fs);
        if (s->d >= 0)
            H5Dclose(s->d);
        msp_h5_unlock();
    }
    free(s->buf);
    free(s);
}

/* A whole tensor through a stream: what the reader helper sends, in blocks. */
static msp_err msp_stream_read_whole(msp_dump_file_t *f, const msp_record_info_t *r,
                                     const msp_tensor_info_t *t, void *buf)
{
    msp_tensor_stream_t *s;
    msp_err rc = msp_tensor_stream_open(f, r, t, &s);
    if (rc)
        return rc;
    rc = msp_tensor_stream_read(s, buf, (size_t)s->total);
    msp_tensor_stream_close(s);
    return rc;
}

msp_err msp_dump_read_tensor(msp_dump_file_t *f, const msp_record_info_t *r,
                             const msp_tensor_info_t *t, void *buf, size_t buf_size)
{
    if (!f || !r || !t || (!buf && t->nbytes > 0))
        return msp_fail(MSP_ERR_USAGE, "msp_dump_read_tensor: file, record, tensor and buffer "
                        "are required");
    if (msp_msprobe_owns(f))
        return msp_msprobe_read_tensor(f, r, t, buf, buf_size);
    char where[700];
    snprintf(where, sizeof where, "file %s: record %s: %s", f->path, r->name, t->role);
    msp_err prc = msp_read_check(t, t->has_data, buf_size, where);
    if (prc)
        return prc;
    if (t->nbytes == 0)
        return MSP_OK;
    if (t->offset >= 0)
        return msp_pread_all(msp_impl(f)->fd, buf, (size_t)t->nbytes, t->offset, where);
    /* chunked, compressed or converted: a block at a time, here or in the
     * reader helper when the file is contained */
    return msp_stream_read_whole(f, r, t, buf);
}


static msp_err msp_attrs_copy(const struct msp_rattrs *a, char ***keys, char ***values,
                              size_t *n, const char *where)
{
    char **ks = calloc(a->n ? a->n : 1, sizeof *ks), **vs = calloc(a->n ? a->n : 1, sizeof *vs);
    int ok = ks && vs;
    for (size_t i = 0; ok && i < a->n; i++)
        ok = (ks[i] = strdup(a->k[i] ? a->k[i] : "")) && (vs[i] = strdup(a->v[i] ? a->v[i] : ""));
    if (!ok) {
        msp_free_strings(ks, ks ? a->n : 0);
        msp_free_strings(vs, vs ? a->n : 0);
        return msp_fail(MSP_ERR_NOMEM, "%s: out of memory", where);
    }
    *keys = ks;
    *values = vs;
    *n = a->n;
    return MSP_OK;
}

static herr_t msp_attr_name_cb(hid_t loc, const char *name, const H5A_info_t *ai, void *ud)
{
    (void)loc;
    (void)ai;
    if (strcmp(name, "order") == 0)
        return 0;
    return msp_strvec_push(ud, name);
}

msp_err msp_dump_record_attrs(msp_dump_file_t *f, const msp_record_info_t *r, char ***keys,
                              char ***values, size_t *n)
{
    if (!f || !r || !keys || !values || !n)
        return msp_fail(MSP_ERR_USAGE, "msp_dump_record_attrs: missing argument");
    if (msp_msprobe_owns(f))
        return msp_msprobe_record_attrs(f, r, keys, values, n);
    *keys = *values = NULL;
    *n = 0;
    char where[700];
    snprintf(where, sizeof where, "file %s: record %s", f->path, r->name);
    struct msp_dump_impl *im = msp_impl(f);
    if (im->attrs) /* contained: the helper sent them with the catalogue */
        return msp_attrs_copy(&im->attrs[r - f->records], keys, values, n, where);
    msp_err rc = MSP_OK;
    struct msp_strvec an = {0};
    char **ks = NULL, **vs = NULL;
    size_t m = 0;
    msp_h5_lock();
    /* A record written without data or arguments has no group (its /index
     * rows are all of it): no attributes. */
    if (H5Lexists(msp_impl(f)->file, r->name, H5P_DEFAULT) == 0) {
        msp_h5_unlock();
        return MSP_OK;
    }
    H5Eclear2(H5E_DEFAULT);
    hid_t g = H5Gopen2(msp_impl(f)->file, r->name, H5P_DEFAULT);
    hsize_t pos = 0;
    if (g < 0 || H5Aiterate2(g, H5_INDEX_NAME, H5_ITER_INC, &pos, msp_attr_name_cb, &an) < 0) {
        rc = msp_h5_fail(g < 0 ? MSP_ERR_NOT_FOUND : MSP_ERR_FORMAT,
                         "%s: cannot list its attributes", where);
        goto cleanup;
    }
    ks = calloc(an.n ? an.n : 1, sizeof *ks);
    vs = calloc(an.n ? an.n : 1, sizeof *vs);
    if (!ks || !vs) {
        rc = msp_fail(MSP_ERR_NOMEM, "%s: out of memory", where);
        goto cleanup;
    }
    for (size_t i = 0; i < an.n; i++) {
        char *v = NULL;
        /* Attributes that are neither text nor a number are not arguments
         * msprobe wrote: leave them out rather than fail the record. */
        if (msp_h5_attr_get_text(g, an.v[i], &v, where) != 1) {
            H5Eclear2(H5E_DEFAULT);
            continue;
        }
        ks[m] = an.v[i];
        an.v[i] = NULL;
        vs[m++] = v;
    }
    msp_clear_error();
cleanup:
    if (g >= 0)
        H5Gclose(g);
    msp_h5_unlock();
    msp_free_strings(an.v, an.n);
    if (rc) {
        msp_free_strings(ks, m);
        msp_free_strings(vs, m);
        return rc;
    }
    *keys = ks;
    *values = vs;
    *n = m;
    return MSP_OK;
}
