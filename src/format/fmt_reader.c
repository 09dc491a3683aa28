/* The dump reader's public functions (msprobe/format.h): each checks its
 * arguments and dispatches through the operations table of the backend that
 * opened the file (fmt_backend.h). Which backend opens a path is decided
 * here, once, by asking each in turn; nothing else here knows one backend
 * from another, and no backend calls back here. */
#include "fmt_backend.h"

#include <stdio.h>
#include <stdlib.h>

/* In the order they are asked; the last takes every path. */
static const msp_reader_ops_t *const msp_readers[] = {
    &msp_reader_msprobe,   /* msprobe's own stepN/rankN/dump.json: our own parsers, no libhdf5 */
    &msp_reader_hdf5,      /* MSPROBE_READER_INPROC=1: libhdf5 in this process */
    &msp_reader_contained, /* libhdf5 in a reader helper process */
};

msp_err msp_dump_open(const char *path, msp_dump_file_t **out)
{
    if (out)
        *out = NULL;
    if (!path || !*path || !out)
        return msp_fail(MSP_ERR_USAGE, "msp_dump_open: path and out are required");
    for (size_t i = 0; i < sizeof msp_readers / sizeof msp_readers[0]; i++) {
        char *file = NULL;
        if (!msp_readers[i]->probe(path, &file))
            continue;
        msp_err rc = msp_readers[i]->open(file ? file : path, out);
        free(file);
        return rc;
    }
    return msp_fail(MSP_ERR_INTERNAL, "file %s: no reader takes it", path);
}

void msp_dump_close(msp_dump_file_t *f)
{
    if (!f)
        return;
    const msp_reader_ops_t *ops = msp_reader_of(f);
    if (ops)
        ops->close(f);
}

msp_err msp_dump_read_tensor(msp_dump_file_t *f, const msp_record_info_t *r,
                             const msp_tensor_info_t *t, void *buf, size_t buf_size)
{
    if (!f || !r || !t || (!buf && t->nbytes > 0))
        return msp_fail(MSP_ERR_USAGE, "msp_dump_read_tensor: file, record, tensor and buffer "
                                       "are required");
    return msp_reader_of(f)->read_tensor(f, r, t, buf, buf_size);
}

msp_err msp_dump_record_attrs(msp_dump_file_t *f, const msp_record_info_t *r, char ***keys,
                              char ***values, size_t *n)
{
    if (!f || !r || !keys || !values || !n)
        return msp_fail(MSP_ERR_USAGE, "msp_dump_record_attrs: missing argument");
    *keys = *values = NULL;
    *n = 0;
    return msp_reader_of(f)->record_attrs(f, r, keys, values, n);
}

msp_err msp_dump_api_defaults(msp_dump_file_t *f, const char *api, char ***keys, char ***values,
                              size_t *n)
{
    if (!f || !api || !keys || !values || !n)
        return msp_fail(MSP_ERR_USAGE, "msp_dump_api_defaults: missing argument");
    *keys = *values = NULL;
    *n = 0;
    const msp_reader_ops_t *ops = msp_reader_of(f);
    const struct msp_attr_row *rows = NULL;
    size_t nr = 0;
    msp_err rc = ops->api_defaults ? ops->api_defaults(f, &rows, &nr) : MSP_OK;
    if (rc)
        return rc;
    /* named on failure only: a call a record pair */
    rc = msp_rows_find(rows, nr, api, keys, values, n, "");
    return rc ? msp_fail(rc, "file %s: /defaults of %s: out of memory", f->path, api) : MSP_OK;
}

/* ---- tensors a block at a time -------------------------------------------- */

msp_err msp_tensor_stream_open(msp_dump_file_t *f, const msp_record_info_t *r,
                               const msp_tensor_info_t *t, msp_tensor_stream_t **out)
{
    if (!out)
        return msp_fail(MSP_ERR_USAGE, "msp_tensor_stream_open: out is NULL");
    *out = NULL;
    if (!f || !r || !t)
        return msp_fail(MSP_ERR_USAGE, "msp_tensor_stream_open: file, record and tensor are "
                                       "required");
    msp_tensor_stream_t *s;
    msp_err rc = msp_stream_new(f, r, t, &s);
    if (rc)
        return rc;
    /* nothing to read: the empty stream msp_stream_new made */
    if (s->total && (rc = msp_reader_of(f)->stream_open(f, r, t, s))) {
        msp_stream_free(s);
        return rc;
    }
    *out = s;
    return MSP_OK;
}

msp_err msp_tensor_stream_read(msp_tensor_stream_t *s, void *buf, size_t n)
{
    if (!s || (!buf && n))
        return msp_fail(MSP_ERR_USAGE, "msp_tensor_stream_read: stream and buffer are required");
    return msp_stream_next(s, buf, n);
}

msp_err msp_tensor_stream_skip(msp_tensor_stream_t *s, uint64_t n)
{
    if (!s)
        return msp_fail(MSP_ERR_USAGE, "msp_tensor_stream_skip: stream is required");
    return msp_stream_skip(s, n);
}

void msp_tensor_stream_close(msp_tensor_stream_t *s)
{
    msp_stream_free(s);
}
