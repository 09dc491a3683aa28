/* Dump reader: loads the catalogue of a dump file from /index, or by walking
 * the record groups when a file has none (a file written by hand with h5py
 * following msprobe-dump(5)). Tensor data whose bytes on disk are exactly
 * the native little-endian elements is read with pread() outside the HDF5
 * lock; everything else goes through H5Dread, converting to native. */
#include "fmt_h5read.h" /* the catalogue loaders: /index, walking groups */
#include "fmt_foreign.h" /* msprobe dump.json directories: dispatched below */

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
