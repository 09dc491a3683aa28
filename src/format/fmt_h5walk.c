/* The catalogue of an HDF5 dump by walking its record groups, for a file
 * without /index (written by hand with h5py following msprobe-dump(5)), and
 * the listing and storage checks the catalogue from /index shares (for the
 * in-process reader, fmt_h5read.c); a shape's size is fmt_compact.c's. */
#include "fmt_h5walk.h"
#include "fmt_compact.h" /* msp_shape_size */

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Transfer properties for reading a compound table (/index, the statistics
 * tables): libhdf5 callocs a conversion background buffer of the transfer
 * buffer's size (1 MiB by default) for every compound read, most of a reader
 * helper's page faults; 64 KiB rows at a time cost no more. Created once per
 * process (the helper reads one file; an in-process reader keeps it for the
 * next). */
hid_t msp_h5_small_dxpl(void)
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

int msp_strvec_push(struct msp_strvec *sv, const char *name)
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
msp_err msp_children(hid_t g, H5O_type_t want, struct msp_names *ns, const char *where)
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

static msp_err msp_refuse_external(const char *where)
{
    return msp_fail(MSP_ERR_FORMAT,
                    "%s: the dataset's data is stored in other files "
                    "(external storage): refused",
                    where);
}

/* Data kept outside the file (external storage: any path, /etc/passwd or
 * /dev/zero) or assembled from other files (virtual layout) is never read. */
/* plain (may be NULL): set to whether the data is contiguous and unfiltered,
 * read from the same creation properties (copying them is a good part of a
 * dataset's check). */
msp_err msp_check_storage(hid_t d, const char *where, int *plain)
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
        return msp_refuse_external(where);
    if (layout == H5D_VIRTUAL)
        return msp_fail(MSP_ERR_FORMAT,
                        "%s: the dataset is a virtual one made of other files: "
                        "refused",
                        where);
    if (layout < 0)
        return msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot read the dataset's layout", where);
    return MSP_OK;
}

/* Header message types (the HDF5 file format specification, "Header
 * Message Types"): external data files, and the filter pipeline. */
#define MSP_H5_MSG_EFL 0x0007
#define MSP_H5_MSG_PLINE 0x000B

/* Copying a dataset's creation properties (H5Dget_create_plist) took a sixth
 * of the helper's instructions on a file of small tensors (issue 42); the
 * header's list of the messages it holds says the same for external storage
 * and filters. The layout class is the caller's: H5Dget_offset is defined
 * for contiguous data alone (chunked, compact and virtual have none). */
msp_err msp_check_header_storage(hid_t d, const char *where, int *plain)
{
    uint64_t present;
#if H5_VERSION_GE(1, 12, 0)
    H5O_native_info_t ni;
    if (H5Oget_native_info(d, &ni, H5O_NATIVE_INFO_HDR) < 0)
        return msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot read the dataset's layout", where);
    present = ni.hdr.mesg.present;
#else
    H5O_info_t oi;
    if (H5Oget_info2(d, &oi, H5O_INFO_HDR) < 0)
        return msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot read the dataset's layout", where);
    present = oi.hdr.mesg.present;
#endif
    if (present & ((uint64_t)1 << MSP_H5_MSG_EFL))
        return msp_refuse_external(where);
    *plain = !(present & ((uint64_t)1 << MSP_H5_MSG_PLINE));
    return MSP_OK;
}

/* A tensor read through H5Dread (no plain offset) may not declare far more
 * elements than its storage holds: a chunked dataset of 2^28 floats in a
 * few kilobytes would otherwise cost gigabytes of fill values. */
#define MSP_MAX_EXPANSION 1024

#define MSP_EXPANSION_SLACK ((int64_t)1 << 20)

msp_err msp_check_expansion(hid_t d, const msp_tensor_info_t *t, const char *where)
{
    hsize_t stored = H5Dget_storage_size(d);
    if (t->nbytes > MSP_EXPANSION_SLACK &&
        (uint64_t)t->nbytes / MSP_MAX_EXPANSION > (uint64_t)stored)
        return msp_fail(MSP_ERR_FORMAT,
                        "%s: declares %lld bytes from %llu bytes of storage "
                        "(more than %d:1): refused",
                        where, (long long)t->nbytes, (unsigned long long)stored, MSP_MAX_EXPANSION);
    return MSP_OK;
}

static msp_err msp_walk_offset(hid_t d, msp_dump_file_t *f, msp_tensor_info_t *t, int exact)
{
    struct msp_h5_impl *im = msp_impl(f);
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
    /* H5Dget_offset is already a file offset: libhdf5 adds the superblock's
     * base address (a user block, or bytes before the signature), which the
     * dataset's own address is relative to. */
    int64_t off = (int64_t)a;
    if (a <= (haddr_t)INT64_MAX && off <= im->file_size - t->nbytes)
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
                       : msp_fail(MSP_ERR_FORMAT,
                                  "%s: statistics-only dataset (null dataspace) "
                                  "without a 'shape' attribute",
                                  where);
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
    if (t->has_data &&
        ((rc = msp_check_storage(d, where, NULL)) || (rc = msp_walk_offset(d, f, t, exact))))
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

msp_err msp_walk(msp_dump_file_t *f)
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
