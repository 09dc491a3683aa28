/* Packed tensors (format_version 4, msprobe-dump(5) PACKED TENSORS): a
 * tensor dump's small tensors are gathered into segments of at most
 * MSP_PACK_SEGMENT bytes, each written as one contiguous uint8 dataset
 * /packed/<k>, and their /index rows give their place in the file. A small
 * tensor then costs a memcpy and its /index row instead of a dataset of its
 * own: a reader checks one segment, not an object header a tensor, and
 * msprobe compare reads a file of small tensors about twice as fast
 * (bench/compare/tree.sh). */
#include "fmt_writer_disk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A segment's most bytes, and where each tensor starts in it. */
#define MSP_PACK_SEGMENT ((size_t)4 << 20)
#define MSP_PACK_ALIGN ((size_t)8)

int msp_pack_wants(const msp_writer_t *w, size_t n)
{
    return n > 0 && n < w->pack_below;
}

msp_err msp_pack_add(msp_writer_t *w, const void *data, size_t n, int64_t *pos)
{
    size_t at = (w->pack_len + MSP_PACK_ALIGN - 1) & ~(MSP_PACK_ALIGN - 1);
    if (w->pack_len && at + n > MSP_PACK_SEGMENT) {
        msp_err rc = msp_pack_flush(w);
        if (rc)
            return rc;
        at = 0;
    }
    if (at + n > w->pack_cap) {
        size_t cap = w->pack_cap ? w->pack_cap : 64 * 1024;
        while (cap < at + n)
            cap *= 2;
        unsigned char *p = realloc(w->pack, cap);
        if (!p)
            return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory packing %zu bytes", w->path,
                            at + n);
        w->pack = p;
        w->pack_cap = cap;
    }
    memset(w->pack + w->pack_len, 0, at - w->pack_len);
    memcpy(w->pack + at, data, n);
    w->pack_len = at + n;
    *pos = (int64_t)at;
    return MSP_OK;
}

/* The segment's dataset created and written; *at: its offset in the file. */
static msp_err msp_pack_write(msp_writer_t *w, const char *name, haddr_t *at)
{
    hsize_t dim = (hsize_t)w->pack_len;
    hid_t s = H5Screate_simple(1, &dim, NULL);
    hid_t d = s >= 0 ? H5Dcreate2(w->pack_group, name, H5T_STD_U8LE, s, H5P_DEFAULT, w->dcpl,
                                  H5P_DEFAULT)
                     : -1;
    *at = d >= 0 ? H5Dget_offset(d) : HADDR_UNDEF;
    msp_err rc = MSP_OK;
    if (*at == HADDR_UNDEF)
        rc = msp_h5_fail(MSP_ERR_IO, "file %s: /packed/%s: cannot create its dataset (disk full?)",
                         w->path, name);
    if (!rc)
        msp_writer_prealloc(w, (int64_t)*at, (int64_t)w->pack_len);
    if (!rc && H5Dwrite(d, H5T_STD_U8LE, H5S_ALL, H5S_ALL, H5P_DEFAULT, w->pack) < 0)
        rc = msp_h5_fail(MSP_ERR_IO, "file %s: /packed/%s: cannot write %zu bytes (disk full?)",
                         w->path, name, w->pack_len);
    if (!rc)
        msp_writer_write_behind(w, (int64_t)*at, (int64_t)w->pack_len);
    if (d >= 0)
        H5Dclose(d);
    if (s >= 0)
        H5Sclose(s);
    return rc;
}

msp_err msp_pack_flush(msp_writer_t *w)
{
    if (!w->pack_len)
        return MSP_OK;
    if (w->pack_group < 0 &&
        (w->pack_group = H5Gcreate2(w->file, "packed", H5P_DEFAULT, w->gcpl, H5P_DEFAULT)) < 0)
        return msp_h5_fail(MSP_ERR_IO, "file %s: cannot create /packed (disk full?)", w->path);
    char name[16];
    snprintf(name, sizeof name, "%u", w->n_segments);
    haddr_t at;
    msp_err rc = msp_pack_write(w, name, &at);
    if (rc)
        return rc;
    for (size_t i = w->pack_row; i < w->n_rows; i++)
        if (w->rows[i].pending) {
            w->rows[i].r.offset += (int64_t)at;
            w->rows[i].pending = 0;
        }
    w->n_segments++;
    w->pack_len = 0;
    w->pack_row = w->n_rows;
    return MSP_OK;
}
