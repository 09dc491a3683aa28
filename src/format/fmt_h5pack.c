/* Packed tensors read back (format_version 4, msprobe-dump(5) PACKED
 * TENSORS): the segments of /packed checked once each, and every packed
 * /index row checked against them by bounds and overlap, where a row of its
 * own dataset costs an object header (fmt_h5index.c). For the in-process
 * reader, which the reader helper runs; the HDF5 lock held. */
#include "fmt_h5pack.h"
#include "fmt_h5walk.h" /* msp_children, msp_check_header_storage */

#include <stdlib.h>
#include <string.h>

static int msp_seg_cmp(const void *a, const void *b)
{
    const struct msp_seg *x = a, *y = b;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* Segment name of group g as s->v[s->n]: a one-dimensional uint8 dataset,
 * contiguous, unfiltered, inside the file. */
static msp_err msp_seg_add(msp_dump_file_t *f, hid_t g, const char *name, struct msp_segs *s)
{
    char where[700];
    snprintf(where, sizeof where, "file %s: /packed/%s", f->path, name);
    hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
    hid_t sp = d >= 0 ? H5Dget_space(d) : -1, t = d >= 0 ? H5Dget_type(d) : -1;
    int plain = 0;
    msp_err rc = d < 0 ? msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot open it", where)
                       : msp_check_header_storage(d, where, &plain);
    hsize_t dim = 0;
    haddr_t at = rc ? HADDR_UNDEF : H5Dget_offset(d);
    if (!rc &&
        (sp < 0 || t < 0 || H5Sget_simple_extent_ndims(sp) != 1 ||
         H5Sget_simple_extent_dims(sp, &dim, NULL) != 1 || H5Tget_class(t) != H5T_INTEGER ||
         H5Tget_size(t) != 1 || !plain || at == HADDR_UNDEF || H5Dget_storage_size(d) != dim ||
         (int64_t)dim > im_file_size(f) || (int64_t)at > im_file_size(f) - (int64_t)dim))
        rc = msp_fail(MSP_ERR_FORMAT,
                      "%s: not a segment of packed tensors (a one-dimensional uint8 "
                      "dataset stored whole inside the file)",
                      where);
    if (!rc) {
        s->v[s->n].at = (int64_t)at;
        s->v[s->n++].len = (int64_t)dim;
    }
    if (t >= 0)
        H5Tclose(t);
    if (sp >= 0)
        H5Sclose(sp);
    if (d >= 0)
        H5Dclose(d);
    return rc;
}

/* The segments of group g, which must hold nothing else. */
static msp_err msp_segs_of(msp_dump_file_t *f, hid_t g, struct msp_segs *s)
{
    char where[600];
    snprintf(where, sizeof where, "file %s: /packed", f->path);
    struct msp_names ns;
    H5G_info_t gi;
    msp_err rc = msp_children(g, H5O_TYPE_DATASET, &ns, where);
    if (rc)
        return rc;
    if (H5Gget_info(g, &gi) < 0 || gi.nlinks != ns.sv.n)
        rc = msp_h5_fail(MSP_ERR_FORMAT, "%s: holds something other than segments", where);
    else if (ns.sv.n && !(s->v = calloc(ns.sv.n, sizeof *s->v)))
        rc = msp_fail(MSP_ERR_NOMEM, "%s: out of memory", where);
    for (size_t i = 0; !rc && i < ns.sv.n; i++)
        rc = msp_seg_add(f, g, ns.sv.v[i], s);
    msp_free_strings(ns.sv.v, ns.sv.n);
    if (rc || !s->n)
        return rc;
    qsort(s->v, s->n, sizeof *s->v, msp_seg_cmp);
    for (size_t i = 1; i < s->n; i++)
        if (s->v[i].at < s->v[i - 1].at + s->v[i - 1].len)
            return msp_fail(MSP_ERR_FORMAT, "%s: two segments share bytes of the file", where);
    return MSP_OK;
}

msp_err msp_segs_load(msp_dump_file_t *f, struct msp_segs *s)
{
    struct msp_h5_impl *im = msp_impl(f);
    memset(s, 0, sizeof *s);
    if (im->version < MSP_PACKED_FORMAT_VERSION ||
        H5Lexists(im->file, "packed", H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return MSP_OK;
    }
    H5L_info_t li;
    H5O_info_t oi;
    if (H5Lget_info(im->file, "packed", &li, H5P_DEFAULT) < 0 || li.type != H5L_TYPE_HARD ||
        H5Oget_info_by_name2(im->file, "packed", &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0 ||
        oi.type != H5O_TYPE_GROUP)
        return msp_h5_fail(MSP_ERR_FORMAT, "file %s: /packed is not a group of segments", f->path);
    hid_t g = H5Gopen2(im->file, "packed", H5P_DEFAULT);
    if (g < 0)
        return msp_h5_fail(MSP_ERR_FORMAT, "file %s: cannot open /packed", f->path);
    s->group = 1;
    msp_err rc = msp_segs_of(f, g, s);
    H5Gclose(g);
    return rc;
}

const struct msp_seg *msp_segs_find(const struct msp_segs *s, const msp_tensor_info_t *t)
{
    if (!s->n || !t->has_data || t->offset < 0 || t->nbytes <= 0)
        return NULL;
    size_t lo = 0, hi = s->n; /* the last segment at or before t's offset */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->v[mid].at <= t->offset)
            lo = mid;
        else
            hi = mid;
    }
    const struct msp_seg *g = &s->v[lo];
    return g->at <= t->offset && t->offset < g->at + g->len ? g : NULL;
}

msp_err msp_segs_note(struct msp_segs *s, const struct msp_seg *g, const msp_tensor_info_t *t,
                      const char *path, const char *record)
{
    char where[700]; /* built only for an error: this runs once a packed row */
    int past = t->nbytes > g->at + g->len - t->offset;
    struct msp_seg *n = past ? NULL : msp_grow(s->held, &s->cap_held, s->n_held, sizeof *n, 1024);
    if (!n) {
        msp_index_where(where, sizeof where, path, record, t->role);
        return past ? msp_fail(MSP_ERR_FORMAT,
                               "%s: the row says %lld bytes at offset %lld, past the end of "
                               "the /packed segment it begins in",
                               where, (long long)t->nbytes, (long long)t->offset)
                    : msp_fail(MSP_ERR_NOMEM, "%s: out of memory", where);
    }
    s->held = n;
    s->held[s->n_held].at = t->offset;
    s->held[s->n_held++].len = t->nbytes;
    return MSP_OK;
}

msp_err msp_segs_check(struct msp_segs *s, const char *path)
{
    if (s->n_held > 1)
        qsort(s->held, s->n_held, sizeof *s->held, msp_seg_cmp);
    for (size_t i = 1; i < s->n_held; i++)
        if (s->held[i].at < s->held[i - 1].at + s->held[i - 1].len)
            return msp_fail(MSP_ERR_FORMAT,
                            "file %s: /index: two packed rows share bytes at offset %lld", path,
                            (long long)s->held[i].at);
    return MSP_OK;
}

void msp_segs_free(struct msp_segs *s)
{
    free(s->v);
    free(s->held);
    memset(s, 0, sizeof *s);
}
