/* What every reader backend (fmt_h5read.c's in-process HDF5, fmt_contain.c's
 * contained HDF5, fmt_msprobe.c's directories) shares, below all of them
 * (fmt_backend.h): the checks and reads of tensor bytes, the stream every
 * kind of tensor stream shares, and the file object of an HDF5 dump. */
#include "fmt_backend.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void msp_free_strings(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void msp_rows_free(struct msp_attr_row *rows, size_t n)
{
    for (size_t i = 0; rows && i < n; i++) {
        free(rows[i].record);
        free(rows[i].key);
        free(rows[i].value);
    }
    free(rows);
}

struct msp_rows_key {
    const struct msp_attr_row *rows;
    const char *record;
};

static int msp_rows_before(const void *ctx, size_t i)
{
    const struct msp_rows_key *k = ctx;
    return strcmp(k->rows[i].record, k->record) < 0;
}

msp_err msp_rows_find(const struct msp_attr_row *rows, size_t n, const char *record, char ***keys,
                      char ***values, size_t *m, const char *where)
{
    struct msp_rows_key key = {rows, record};
    size_t lo = msp_lower_bound(n, msp_rows_before, &key); /* the first row of record, if any */
    size_t end = lo;
    while (end < n && strcmp(rows[end].record, record) == 0)
        end++;
    size_t k = end - lo;
    char **ks = calloc(k ? k : 1, sizeof *ks), **vs = calloc(k ? k : 1, sizeof *vs);
    for (size_t i = 0; ks && vs && i < k; i++)
        if (!(ks[i] = strdup(rows[lo + i].key)) || !(vs[i] = strdup(rows[lo + i].value))) {
            msp_free_strings(ks, k);
            msp_free_strings(vs, k);
            ks = vs = NULL;
        }
    if (!ks || !vs) {
        free(ks);
        free(vs);
        return msp_fail(MSP_ERR_NOMEM, "%s: out of memory", where);
    }
    *keys = ks;
    *values = vs;
    *m = k;
    return MSP_OK;
}

msp_err msp_read_check(const msp_tensor_info_t *t, int has_data, size_t buf_size, const char *where)
{
    if (!has_data)
        return msp_fail(MSP_ERR_USAGE, "%s: statistics only, no data to read", where);
    if (!t->dtype)
        return msp_fail(MSP_ERR_UNSUPPORTED, "%s: element type %s is not supported", where,
                        t->dtype_name);
    if (t->nbytes < 0 || buf_size < (size_t)t->nbytes)
        return msp_fail(MSP_ERR_USAGE, "%s: buffer of %zu bytes, need %lld", where, buf_size,
                        (long long)t->nbytes);
    return MSP_OK;
}

/* ---- data --------------------------------------------------------------------- */

msp_err msp_pread_all(int fd, void *buf, size_t n, int64_t off, const char *where)
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

msp_err msp_stream_drain(msp_tensor_stream_t *s, unsigned char *p, size_t n,
                         msp_err (*fill)(msp_tensor_stream_t *s))
{
    msp_err rc = MSP_OK;
    for (size_t left = n; left && !rc;) {
        if (s->at == s->have) {
            if (!fill) {
                rc = msp_fail(MSP_ERR_INTERNAL, "%s: stream ran dry", s->where);
                break;
            }
            if ((rc = fill(s)))
                break;
        }
        size_t k = s->have - s->at < left ? s->have - s->at : left;
        memcpy(p, s->buf + s->at, k);
        s->at += k;
        p += k;
        left -= k;
    }
    return rc;
}

static msp_err msp_stream_buffer_read(msp_tensor_stream_t *s, void *buf, size_t n)
{
    return msp_stream_drain(s, buf, n, NULL);
}

/* The whole tensor is in s->buf: a skip moves past its bytes. */
static msp_err msp_stream_buffer_skip(msp_tensor_stream_t *s, uint64_t n)
{
    if (n > s->have - s->at)
        return msp_fail(MSP_ERR_INTERNAL, "%s: stream ran dry", s->where);
    s->at += (size_t)n;
    return MSP_OK;
}

const msp_stream_ops_t msp_stream_buffer = {msp_stream_buffer_read, NULL, msp_stream_buffer_skip};

static msp_err msp_stream_pread_read(msp_tensor_stream_t *s, void *buf, size_t n)
{
    return msp_pread_all(s->fd, buf, n, s->offset + (int64_t)s->done, s->where);
}

/* pread reads at s->offset + s->done: the front's count is the skip. */
static msp_err msp_stream_pread_skip(msp_tensor_stream_t *s, uint64_t n)
{
    (void)s;
    (void)n;
    return MSP_OK;
}

static const msp_stream_ops_t msp_stream_pread_ops = {msp_stream_pread_read, NULL,
                                                      msp_stream_pread_skip};

void msp_stream_pread(msp_tensor_stream_t *s, int fd, int64_t offset)
{
    s->ops = &msp_stream_pread_ops;
    s->fd = fd;
    s->offset = offset;
}

msp_err msp_stream_new(const msp_dump_file_t *f, const msp_record_info_t *r,
                       const msp_tensor_info_t *t, msp_tensor_stream_t **out)
{
    *out = NULL;
    msp_tensor_stream_t *s = calloc(1, sizeof *s);
    if (!s)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    s->ops = &msp_stream_buffer;
    s->fd = -1;
    snprintf(s->where, sizeof s->where, "file %s: record %s: %s", f->path, r->name, t->role);
    msp_err rc = msp_read_check(t, t->has_data, (size_t)t->nbytes, s->where);
    s->total = t->nbytes > 0 ? (uint64_t)t->nbytes : 0;
    if (rc) {
        msp_stream_free(s);
        return rc;
    }
    *out = s;
    return MSP_OK;
}

msp_err msp_stream_next(msp_tensor_stream_t *s, void *buf, size_t n)
{
    if (n > s->total - s->done)
        return msp_fail(MSP_ERR_USAGE, "%s: %zu bytes asked, %llu left", s->where, n,
                        (unsigned long long)(s->total - s->done));
    msp_err rc = s->ops->read(s, buf, n);
    if (!rc)
        s->done += n;
    return rc;
}

msp_err msp_stream_skip(msp_tensor_stream_t *s, uint64_t n)
{
    if (n > s->total - s->done)
        return msp_fail(MSP_ERR_USAGE, "%s: %llu bytes skipped, %llu left", s->where,
                        (unsigned long long)n, (unsigned long long)(s->total - s->done));
    if (s->ops->skip) {
        msp_err rc = s->ops->skip(s, n);
        if (!rc)
            s->done += n;
        return rc;
    }
    /* a kind that cannot seek (a helper's frames, an HDF5 hyperslab): read
     * and drop */
    unsigned char tmp[1 << 14];
    msp_err rc = MSP_OK;
    while (n && !rc) {
        size_t k = n < sizeof tmp ? (size_t)n : sizeof tmp;
        rc = msp_stream_next(s, tmp, k);
        n -= k;
    }
    return rc;
}

void msp_stream_free(msp_tensor_stream_t *s)
{
    if (!s)
        return;
    if (s->ops->close)
        s->ops->close(s);
    free(s->buf);
    free(s);
}

/* A whole tensor through a stream of the backend's own: what the reader
 * helper sends, in blocks. */
static msp_err msp_stream_read_whole(msp_dump_file_t *f, const msp_record_info_t *r,
                                     const msp_tensor_info_t *t, void *buf,
                                     msp_stream_open_fn stream_open)
{
    msp_tensor_stream_t *s;
    msp_err rc = msp_stream_new(f, r, t, &s);
    if (rc)
        return rc;
    if (s->total && (rc = stream_open(f, r, t, s))) {
        msp_stream_free(s);
        return rc;
    }
    rc = msp_stream_next(s, buf, (size_t)s->total);
    msp_stream_free(s);
    return rc;
}

msp_err msp_read_tensor_fd(msp_dump_file_t *f, int fd, const msp_record_info_t *r,
                           const msp_tensor_info_t *t, void *buf, size_t buf_size,
                           msp_stream_open_fn stream_open)
{
    char where[700];
    snprintf(where, sizeof where, "file %s: record %s: %s", f->path, r->name, t->role);
    msp_err prc = msp_read_check(t, t->has_data, buf_size, where);
    if (prc)
        return prc;
    if (t->nbytes == 0)
        return MSP_OK;
    if (t->offset >= 0)
        return msp_pread_all(fd, buf, (size_t)t->nbytes, t->offset, where);
    /* chunked, compressed or converted: a block at a time, here or in the
     * reader helper when the file is contained */
    return msp_stream_read_whole(f, r, t, buf, stream_open);
}

/* ---- the file object of an HDF5 dump ---------------------------------------- */

/* s, unless it lies in f's block of strings (freed whole). */
static void msp_free_own(const msp_dump_file_t *f, char *s)
{
    uintptr_t at = (uintptr_t)s, from = (uintptr_t)f->strings;
    if (!f->strings || at < from || at - from >= f->strings_len)
        free(s);
}

static void msp_record_free(const msp_dump_file_t *f, msp_record_info_t *r)
{
    for (size_t i = 0; i < r->n_tensors; i++) {
        msp_free_own(f, r->tensors[i].role);
        msp_free_own(f, r->tensors[i].producer);
    }
    free(r->tensors);
    msp_free_own(f, r->name);
}

void msp_dump_free(msp_dump_file_t *f)
{
    for (size_t i = 0; i < f->n_records; i++)
        msp_record_free(f, &f->records[i]);
    free(f->records);
    free(f->strings);
    free(f->path);
    free(f);
}

msp_err msp_dump_alloc(const char *path, const msp_reader_ops_t *ops, size_t impl_size,
                       msp_dump_file_t **out)
{
    *out = NULL;
    msp_dump_file_t *f = calloc(1, sizeof *f);
    struct msp_dump_base *im = calloc(1, impl_size);
    if (!f || !im || !(f->path = strdup(path))) {
        free(f ? f->path : NULL);
        free(f);
        free(im);
        return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", path);
    }
    f->impl = im;
    im->ops = ops;
    f->step = f->rank = f->world_size = -1;
    *out = f;
    return MSP_OK;
}

msp_err msp_dump_stat(const char *path, struct stat *sb)
{
    if (stat(path, sb) != 0)
        return msp_fail(errno == ENOENT || errno == ENOTDIR ? MSP_ERR_NOT_FOUND : MSP_ERR_IO,
                        "file %s: %s", path, strerror(errno));
    return MSP_OK;
}

msp_err msp_dump_check_regular(const char *path, const struct stat *sb)
{
    if (S_ISDIR(sb->st_mode))
        return msp_fail(MSP_ERR_FORMAT, "file %s: is a directory, not a dump file", path);
    /* A FIFO or a device would hang or never end: regular files only. */
    if (!S_ISREG(sb->st_mode))
        return msp_fail(MSP_ERR_FORMAT,
                        "file %s: not a regular file (a FIFO, socket or "
                        "device), not a dump file",
                        path);
    return MSP_OK;
}

msp_err msp_dump_open_fd(const char *path, int *fd)
{
    *fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (*fd < 0)
        return msp_fail(MSP_ERR_IO, "file %s: %s", path, strerror(errno));
    struct stat now;
    if (fstat(*fd, &now) != 0 || !S_ISREG(now.st_mode)) { /* swapped since stat() */
        close(*fd);
        *fd = -1;
        return msp_fail(MSP_ERR_FORMAT, "file %s: not a regular file, not a dump file", path);
    }
    return MSP_OK;
}

/* ---- sorting -------------------------------------------------------------- */

struct msp_row_at {
    struct msp_attr_row r;
    size_t at; /* row number: a key twice (a hand-made file) keeps its order */
};

/* By record, then key in byte order: the order HDF5 lists a version 1
 * group's attributes in, so that every version reads alike. */
static int msp_row_at_order(const void *a, const void *b)
{
    const struct msp_row_at *x = a, *y = b;
    int c = strcmp(x->r.record, y->r.record);
    if (!c)
        c = strcmp(x->r.key, y->r.key);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

msp_err msp_rows_sort(struct msp_attr_row *rows, size_t n, const char *where)
{
    if (n < 2)
        return MSP_OK;
    struct msp_row_at *at = malloc(n * sizeof *at);
    if (!at)
        return msp_fail(MSP_ERR_NOMEM, "%s: out of memory", where);
    for (size_t i = 0; i < n; i++)
        at[i] = (struct msp_row_at){rows[i], i};
    qsort(at, n, sizeof *at, msp_row_at_order);
    for (size_t i = 0; i < n; i++)
        rows[i] = at[i].r;
    free(at);
    return MSP_OK;
}

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

void msp_catalogue_sort(msp_dump_file_t *f)
{
    /* qsort's pointer must not be NULL even for 0 elements (C11 7.22.5). */
    for (size_t i = 0; i < f->n_records; i++)
        if (f->records[i].n_tensors > 1)
            msp_sort(f->records[i].tensors, f->records[i].n_tensors, sizeof(msp_tensor_info_t),
                     msp_tensor_info_order);
    if (f->n_records > 1)
        msp_sort(f->records, f->n_records, sizeof(msp_record_info_t), msp_record_info_order);
}
