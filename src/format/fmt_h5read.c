/* The in-process HDF5 backend (msp_reader_hdf5, fmt_backend.h): libhdf5
 * parses the dump file in this process. It is what the reader helper
 * (msprobe-catalogue) runs on the file it was given, and what msp_dump_open
 * uses itself only with MSPROBE_READER_INPROC=1 (fuzzing the reader, or
 * debugging it; a corrupt file may then crash the caller). Loads the
 * catalogue from /index (fmt_h5index.c), or by walking the record groups
 * when a file has none (fmt_h5walk.c). Tensor data whose bytes on disk are
 * exactly the native little-endian elements is read with pread() outside
 * the HDF5 lock; everything else goes through H5Dread, converting to
 * native, a block at a time. */
#include "fmt_h5index.h" /* the catalogue from /index */
#include "fmt_h5stats.h" /* the compact tables of statistics dumps */
#include "fmt_h5walk.h"  /* the catalogue by walking groups */

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Call with the lock held. */
static void msp_dump_free_locked(msp_dump_file_t *f)
{
    if (!f)
        return;
    struct msp_h5_impl *im = f->impl;
    if (im) {
        if (im->file >= 0)
            H5Fclose(im->file);
        if (im->map)
            munmap(im->map, im->map_len);
        if (im->fd >= 0)
            close(im->fd);
        msp_rows_free(im->attrs, im->n_attrs);
        msp_rows_free(im->defs, im->n_defs);
        free(im);
    }
    msp_dump_free(f);
}

static void msp_h5_close(msp_dump_file_t *f)
{
    msp_h5_lock();
    msp_dump_free_locked(f);
    msp_h5_unlock();
}

/* ---- /attrs ------------------------------------------------------------------ */

static void *msp_attrs_alloc(size_t n, void *info)
{
    (void)info;
    return malloc(n);
}

static void msp_attrs_free(void *p, void *info)
{
    (void)info;
    free(p);
}

/* The rows of the table /name ((record, key, value) strings: /attrs,
 * /defaults): read whole (strings allocated with malloc, so that they are
 * ours), sorted by record and key. Whatever a failed read left in *out is
 * freed with the file. */
static msp_err msp_load_rows(msp_dump_file_t *f, const char *name, struct msp_attr_row **out,
                             size_t *n_out)
{
    struct msp_h5_impl *im = f->impl;
    msp_err rc = MSP_OK;
    hid_t d = H5Dopen2(im->file, name, H5P_DEFAULT);
    hid_t ft = d >= 0 ? H5Dget_type(d) : -1, sp = d >= 0 ? H5Dget_space(d) : -1;
    hid_t mt = msp_h5_attrs_type(0), xf = H5Pcreate(H5P_DATASET_XFER);
    hssize_t n = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    int ok = ft >= 0 && H5Tget_class(ft) == H5T_COMPOUND && sp >= 0 &&
             H5Sget_simple_extent_ndims(sp) == 1 && n >= 0;
    for (int i = 0; ok && i < 3; i++) {
        static const char *const cols[] = {"record", "key", "value"};
        int m = H5Tget_member_index(ft, cols[i]);
        hid_t c = m >= 0 ? H5Tget_member_type(ft, (unsigned)m) : -1;
        ok = c >= 0 && H5Tget_class(c) == H5T_STRING && H5Tis_variable_str(c) > 0;
        if (c >= 0)
            H5Tclose(c);
    }
    if (!ok) {
        rc = msp_h5_fail(MSP_ERR_FORMAT,
                         "file %s: /%s is not a one-dimensional table of "
                         "(record, key, value) variable-length strings",
                         f->path, name);
        goto cleanup;
    }
    if (!(*out = calloc(n ? (size_t)n : 1, sizeof **out))) {
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /%s (%lld rows)", f->path, name,
                      (long long)n);
        goto cleanup;
    }
    struct msp_attr_row *rows = *out;
    *n_out = (size_t)n; /* rows are zeroed: whatever a failed read left is freed at close */
    if (mt < 0 || xf < 0 ||
        H5Pset_vlen_mem_manager(xf, msp_attrs_alloc, NULL, msp_attrs_free, NULL) < 0 ||
        (n > 0 && H5Dread(d, mt, H5S_ALL, H5S_ALL, xf, rows) < 0)) {
        rc = msp_h5_fail(MSP_ERR_FORMAT, "file %s: cannot read /%s (%lld rows)", f->path, name,
                         (long long)n);
        goto cleanup;
    }
    for (size_t i = 0; i < *n_out; i++) {
        if (!rows[i].record || !rows[i].key || !rows[i].value) {
            rc = msp_fail(MSP_ERR_FORMAT, "file %s: /%s row %zu has a null string", f->path, name,
                          i);
            goto cleanup;
        }
    }
    char where[600];
    snprintf(where, sizeof where, "file %s: /%s", f->path, name);
    rc = msp_rows_sort(rows, *n_out, where);
cleanup:
    if (xf >= 0)
        H5Pclose(xf);
    if (mt >= 0)
        H5Tclose(mt);
    if (sp >= 0)
        H5Sclose(sp);
    if (ft >= 0)
        H5Tclose(ft);
    if (d >= 0)
        H5Dclose(d);
    return rc;
}

/* /attrs, when the file has it. */
static msp_err msp_load_attrs(msp_dump_file_t *f)
{
    struct msp_h5_impl *im = f->impl;
    /* Version 1 kept attributes on the record groups (where "attrs" could
     * even name a record); a version 2 file without the table is read so too. */
    htri_t has = im->version >= 2 ? H5Lexists(im->file, "attrs", H5P_DEFAULT) : 0;
    if (has <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return MSP_OK;
    }
    msp_err rc = msp_load_rows(f, "attrs", &im->attrs, &im->n_attrs);
    im->has_attrs = !rc;
    return rc;
}

/* /defaults (msprobe-dump(5), THE DEFAULTS TABLE), when the file has it:
 * files written before it have none, and their arguments compare as given.
 * A version 1 file may have a record named "defaults": not the table. */
static msp_err msp_load_defaults(msp_dump_file_t *f)
{
    struct msp_h5_impl *im = f->impl;
    htri_t has = im->version >= 2 ? H5Lexists(im->file, "defaults", H5P_DEFAULT) : 0;
    if (has <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return MSP_OK;
    }
    return msp_load_rows(f, "defaults", &im->defs, &im->n_defs);
}

/* A record's rows of /attrs as msp_dump_record_attrs gives them. */
static msp_err msp_table_attrs(msp_dump_file_t *f, const msp_record_info_t *r, char ***keys,
                               char ***values, size_t *n)
{
    struct msp_h5_impl *im = f->impl;
    /* where only for its one error, out of memory: formatting it for every
     * record cost a statistics compare more than the lookup (issue 42) */
    msp_err rc = msp_rows_find(im->attrs, im->n_attrs, r->name, keys, values, n, "");
    if (rc != MSP_OK)
        return msp_fail(rc, "file %s: record %s: out of memory", f->path, r->name);
    return MSP_OK;
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
        return msp_fail(MSP_ERR_FORMAT,
                        "file %s: an HDF5 file but not an msprobe dump: the root "
                        "attribute 'format' is missing (see msprobe-dump(5))",
                        f->path);
    if (strcmp(fmt, MSP_FORMAT_NAME) != 0)
        return msp_fail(MSP_ERR_FORMAT, "file %s: root attribute format is '%s', expected '%s'",
                        f->path, fmt, MSP_FORMAT_NAME);
    int64_t ver = 1; /* absent: the first layout */
    if (msp_h5_attr_get_i64(root, "format_version", &ver, where) < 0)
        return MSP_ERR_FORMAT;
    if (ver > MSP_FORMAT_VERSION || ver < 1)
        return msp_fail(MSP_ERR_UNSUPPORTED,
                        "file %s: format_version %lld; this msprobe reads "
                        "versions 1 to %d: upgrade msprobe",
                        f->path, (long long)ver, MSP_FORMAT_VERSION);
    msp_impl(f)->version = ver;
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

/* A file of up to this many bytes is opened from a read-only mapping of it
 * (libhdf5's core driver on a file image it neither copies nor frees)
 * rather than read a metadata block at a time: a file of 625 small tensors
 * took 3,800 reads of 512 bytes to check /index against its datasets. Read
 * whole into the core driver's own buffer instead (stop 59), a file of small
 * tensors cost a copy of every tensor byte the catalogue never looks at, and
 * the zeroing of the pages that held it: a third of the helper child's CPU
 * (bench/compare/tree.sh's tensor subset). Mapped, only the pages libhdf5
 * reads are touched. The bound keeps the mapping well inside the helper's
 * address space (MSPROBE_READER_MEMORY_MB, 64 MiB or more). A file that
 * shrinks under the mapping stops the helper with SIGBUS, which its caller
 * reports as it does any crash of a parse. */
#define MSP_H5_CORE_MAX ((int64_t)16 << 20)

/* The file image callbacks: every copy libhdf5 would make of the image (the
 * property list's, the driver's) is the mapping itself, and nothing is
 * freed; a resize (a write) is refused. */
static void *msp_image_malloc(size_t size, H5FD_file_image_op_t op, void *ud)
{
    struct msp_h5_impl *im = ud;
    return op != H5FD_FILE_IMAGE_OP_FILE_RESIZE && size == im->map_len ? im->map : NULL;
}

static void *msp_image_memcpy(void *dest, const void *src, size_t size, H5FD_file_image_op_t op,
                              void *ud)
{
    struct msp_h5_impl *im = ud;
    (void)op;
    return dest == im->map && src == im->map && size == im->map_len ? dest : NULL;
}

static void *msp_image_realloc(void *ptr, size_t size, H5FD_file_image_op_t op, void *ud)
{
    (void)ptr, (void)size, (void)op, (void)ud;
    return NULL;
}

/* Nothing is freed: the mapping is the file object's (msp_dump_free_locked),
 * and a copy closed after it must not look at it. */
static herr_t msp_image_free(void *ptr, H5FD_file_image_op_t op, void *ud)
{
    (void)ptr, (void)op, (void)ud;
    return 0;
}

static void *msp_image_udata_copy(void *ud)
{
    return ud;
}

static herr_t msp_image_udata_free(void *ud)
{
    (void)ud;
    return 0;
}

/* The file access list that opens f from a mapping of it (see
 * MSP_H5_CORE_MAX), from a copy of fapl; -1 (and no mapping) when the file
 * is larger or cannot be mapped, and it is then read as libhdf5 reads it. */
static hid_t msp_mapped_fapl(struct msp_h5_impl *im, hid_t fapl)
{
    if (fapl < 0 || im->file_size <= 0 || im->file_size > MSP_H5_CORE_MAX)
        return -1;
    void *m = mmap(NULL, (size_t)im->file_size, PROT_READ, MAP_PRIVATE, im->fd, 0);
    if (m == MAP_FAILED)
        return -1;
    im->map = m;
    im->map_len = (size_t)im->file_size;
    H5FD_file_image_callbacks_t cb = {msp_image_malloc,
                                      msp_image_memcpy,
                                      msp_image_realloc,
                                      msp_image_free,
                                      msp_image_udata_copy,
                                      msp_image_udata_free,
                                      im};
    /* no backing store: nothing is written back at close */
    hid_t core = H5Pcopy(fapl);
    if (core >= 0 &&
        (H5Pset_fapl_core(core, 4096, 0) < 0 || H5Pset_file_image_callbacks(core, &cb) < 0 ||
         H5Pset_file_image(core, im->map, im->map_len) < 0)) {
        H5Pclose(core);
        core = -1;
    }
    return core;
}

/* Opens f and loads its catalogue; with tables set, a file in the compact
 * layout without /index has its tables read into them instead, and no
 * catalogue (msp_dump_open_tables). */
static msp_err msp_open_locked(msp_dump_file_t *f, struct msp_ctables *tables)
{
    struct msp_h5_impl *im = f->impl;
    const char *path = f->path;
    htri_t is = H5Fis_hdf5(path);
    if (is <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return msp_fail(MSP_ERR_FORMAT,
                        "file %s: not an HDF5 file (no HDF5 signature; "
                        "%lld bytes)",
                        path, (long long)im->file_size);
    }
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), core = -1;
    if (fapl >= 0) {
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
        H5Pset_file_locking(fapl, 1, 1);
        core = msp_mapped_fapl(im, fapl);
    }
    /* the core driver opens no file of an image's name, and refuses one that
     * exists: under a regular file's path, none can */
    char *image = core >= 0 ? msp_asprintf("%s/image", path) : NULL;
    im->file = image ? H5Fopen(image, H5F_ACC_RDONLY, core) : -1;
    free(image);
    if (core >= 0) /* the mapping stays the file object's, whichever open succeeds */
        H5Pclose(core);
    if (im->file < 0) /* as libhdf5 reads it, and its reason if it fails */
        im->file = H5Fopen(path, H5F_ACC_RDONLY, fapl >= 0 ? fapl : H5P_DEFAULT);
    msp_err rc = MSP_OK;
    if (im->file < 0) /* before any other H5 call: each one clears the error stack */
        rc = msp_h5_fail(MSP_ERR_FORMAT,
                         "file %s: cannot open as HDF5: the file is truncated, "
                         "corrupt or still being written",
                         path);
    if (fapl >= 0)
        H5Pclose(fapl);
    if (rc)
        return rc;
    rc = msp_root_attrs(f);
    int compact = rc ? 0 : msp_compact_present(f);
    if (compact < 0)
        return msp_h5_fail(MSP_ERR_FORMAT, "file %s: cannot inspect /records", path);
    if (!rc && !compact) /* the compact layout's /attrs and /defaults are numbers */
        rc = msp_load_attrs(f);
    if (!rc && !compact)
        rc = msp_load_defaults(f);
    if (rc)
        return rc;
    hid_t idx = -1;
    int u = msp_index_usable(im->file, &idx);
    if (u < 0)
        return msp_h5_fail(MSP_ERR_FORMAT, "file %s: cannot inspect /index", path);
    if (u > 0) {
        rc = msp_load_index(f, idx);
        if (!rc)
            rc = msp_verify_index(f);
        H5Dclose(idx);
        f->has_index = 1;
        if (!rc && compact)
            rc = msp_load_compact(f, 1);
    } else if (compact) {
        H5Eclear2(H5E_DEFAULT);
        rc = tables ? msp_compact_read(f, 0, tables) : msp_load_compact(f, 0);
    } else if (im->version >= MSP_PACKED_FORMAT_VERSION &&
               H5Lexists(im->file, "packed", H5P_DEFAULT) > 0) {
        rc = msp_fail(MSP_ERR_FORMAT,
                      "file %s: /packed holds tensor data, but the file has no /index to "
                      "describe it",
                      path);
    } else {
        H5Eclear2(H5E_DEFAULT);
        rc = msp_walk(f);
    }
    if (!rc)
        msp_catalogue_sort(f);
    return rc;
}

/* A new file object for path (stat'ed as sb), its descriptor open. */
static msp_err msp_h5_new(const char *path, const struct stat *sb, msp_dump_file_t **out)
{
    *out = NULL;
    msp_dump_file_t *f;
    msp_err rc = msp_dump_check_regular(path, sb);
    if (rc || (rc = msp_dump_alloc(path, &msp_reader_hdf5, sizeof(struct msp_h5_impl), &f)))
        return rc;
    struct msp_h5_impl *im = msp_impl(f);
    im->file = im->fd = -1;
    im->file_size = (int64_t)sb->st_size;
    if ((rc = msp_dump_open_fd(path, &im->fd))) {
        msp_h5_close(f);
        return rc;
    }
    *out = f;
    return MSP_OK;
}

/* msp_dump_open_local, and with tables set msp_dump_open_tables. */
static msp_err msp_open_h5(const char *path, msp_dump_file_t **out, struct msp_ctables *tables)
{
    if (out)
        *out = NULL;
    if (!path || !*path || !out)
        return msp_fail(MSP_ERR_USAGE, "msp_dump_open: path and out are required");
    struct stat sb;
    msp_dump_file_t *f;
    msp_err rc = msp_dump_stat(path, &sb);
    if (rc || (rc = msp_h5_new(path, &sb, &f)))
        return rc;
    msp_h5_lock();
    rc = msp_open_locked(f, tables);
    if (rc) {
        msp_dump_free_locked(f);
        f = NULL;
    }
    msp_h5_unlock();
    *out = f;
    return rc;
}

msp_err msp_dump_open_local(const char *path, msp_dump_file_t **out)
{
    return msp_open_h5(path, out, NULL);
}

msp_err msp_dump_open_tables(const char *path, msp_dump_file_t **out, struct msp_ctables *t)
{
    memset(t, 0, sizeof *t);
    return msp_open_h5(path, out, t);
}

/* ---- tensors a block at a time -------------------------------------------- */

/* A block of a chunked or compressed dataset: whole rows of the deepest
 * dimension whose row still fits, never crossing an index of the dimensions
 * above it, so each block is one hyperslab. */
#define MSP_STREAM_BLOCK ((size_t)4 << 20)

/* The state of a stream that reads an HDF5 dataset in this process. */
struct msp_h5_stream {
    hid_t d, fs, mt; /* the dataset, its space, the native type */
    int nd;
    hsize_t shape[H5S_MAX_RANK];
    size_t esize;
    int bdim;       /* blocks are whole rows of this dimension, */
    uint64_t inner; /* each row this many elements (msp_stream_h5_rows) */
    uint64_t elem;  /* elements read so far */
};

/* The dimension a block takes whole rows of: the shallowest one whose rows
 * (the product of the dimensions below it) still fit in a block. */
static void msp_stream_h5_rows(struct msp_h5_stream *h)
{
    uint64_t inner = 1;
    int d = h->nd - 1;
    while (d > 0 && inner * h->shape[d] * h->esize <= MSP_STREAM_BLOCK) {
        inner *= h->shape[d];
        d--;
    }
    h->bdim = d;
    h->inner = inner;
}

/* Reads the next block of an in-process HDF5 dataset into s->buf. */
static msp_err msp_stream_h5_fill(msp_tensor_stream_t *s)
{
    struct msp_h5_stream *h = s->state;
    int d = h->bdim;
    uint64_t inner = h->inner;
    hsize_t start[H5S_MAX_RANK], count[H5S_MAX_RANK];
    uint64_t rest = h->elem;
    for (int i = h->nd - 1; i >= 0; i--) {
        start[i] = (hsize_t)(rest % h->shape[i]);
        rest /= h->shape[i];
        count[i] = 1;
    }
    uint64_t k = 1;
    if (h->nd > 0) {
        for (int i = d + 1; i < h->nd; i++) {
            start[i] = 0; /* aligned: blocks advance by whole rows of dimension d */
            count[i] = h->shape[i];
        }
        uint64_t fit = MSP_STREAM_BLOCK / (inner * h->esize);
        k = h->shape[d] - start[d];
        if (fit >= 1 && k > fit)
            k = fit;
        count[d] = (hsize_t)k;
    }
    uint64_t n = k * inner;
    msp_err rc = MSP_OK;
    msp_h5_lock();
    hid_t ms = H5Screate_simple(1, (hsize_t[]){(hsize_t)n}, NULL);
    int ok = ms >= 0 &&
             (h->nd == 0 ||
              H5Sselect_hyperslab(h->fs, H5S_SELECT_SET, start, NULL, count, NULL) >= 0) &&
             H5Dread(h->d, h->mt, ms, h->nd == 0 ? H5S_ALL : h->fs, H5P_DEFAULT, s->buf) >= 0;
    if (!ok)
        rc = msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot read elements %llu to %llu", s->where,
                         (unsigned long long)h->elem, (unsigned long long)(h->elem + n));
    if (ms >= 0)
        H5Sclose(ms);
    msp_h5_unlock();
    h->elem += n;
    s->have = (size_t)(n * h->esize);
    s->at = 0;
    return rc;
}

static msp_err msp_stream_h5_read(msp_tensor_stream_t *s, void *buf, size_t n)
{
    return msp_stream_drain(s, buf, n, msp_stream_h5_fill);
}

static void msp_stream_h5_close(msp_tensor_stream_t *s)
{
    struct msp_h5_stream *h = s->state;
    if (h && (h->d >= 0 || h->fs >= 0 || h->mt >= 0)) {
        msp_h5_lock();
        if (h->mt >= 0)
            H5Tclose(h->mt);
        if (h->fs >= 0)
            H5Sclose(h->fs);
        if (h->d >= 0)
            H5Dclose(h->d);
        msp_h5_unlock();
    }
    free(h);
}

static const msp_stream_ops_t msp_stream_h5 = {msp_stream_h5_read, msp_stream_h5_close, NULL};

/* The chunk cache a stream needs: the chunks one block's rows cross, so
 * each chunk is decompressed once however many blocks touch it (libhdf5's
 * default 1 MiB would decompress a bigger chunk again for every block), at
 * most 64 MiB. Reopens h->d (g/role) with it; keeps the default on any
 * failure. */
static void msp_stream_h5_cache(struct msp_h5_stream *h, hid_t g, const char *role)
{
    hid_t dcpl = H5Dget_create_plist(h->d);
    hsize_t cd[H5S_MAX_RANK];
    int cn = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED ? H5Pget_chunk(dcpl, H5S_MAX_RANK, cd)
                                                             : -1;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (cn != h->nd || cn <= 0)
        return;
    int d = h->bdim;
    double need = (double)h->esize;
    for (int i = 0; i < h->nd; i++) {
        uint64_t c = cd[i] ? cd[i] : 1;
        uint64_t span = i <= d ? c : (h->shape[i] + c - 1) / c * c;
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
            H5Dclose(h->d);
            h->d = again;
        }
    }
    H5Pclose(dapl);
    H5Eclear2(H5E_DEFAULT);
}

static msp_err msp_stream_h5_open(msp_dump_file_t *f, const msp_record_info_t *r,
                                  const msp_tensor_info_t *t, msp_tensor_stream_t *s)
{
    struct msp_h5_impl *im = msp_impl(f);
    struct msp_h5_stream *h = calloc(1, sizeof *h);
    if (!h)
        return msp_fail(MSP_ERR_NOMEM, "%s: out of memory", s->where);
    h->d = h->fs = h->mt = -1;
    s->ops = &msp_stream_h5;
    s->state = h;
    msp_err rc = MSP_OK;
    hid_t g = -1, ft = -1;
    msp_h5_lock();
    g = H5Gopen2(im->file, r->name, H5P_DEFAULT);
    h->d = g >= 0 ? H5Dopen2(g, t->role, H5P_DEFAULT) : -1;
    ft = h->d >= 0 ? H5Dget_type(h->d) : -1;
    h->fs = h->d >= 0 ? H5Dget_space(h->d) : -1;
    int nd = h->fs >= 0 ? H5Sget_simple_extent_ndims(h->fs) : -1;
    if (ft < 0 || nd < 0) {
        rc = msp_h5_fail(MSP_ERR_NOT_FOUND, "%s: cannot open the dataset", s->where);
        goto done;
    }
    if (H5Sget_simple_extent_npoints(h->fs) != t->numel) {
        rc = msp_fail(MSP_ERR_FORMAT, "%s: dataset has %lld elements, catalogue says %lld",
                      s->where, (long long)H5Sget_simple_extent_npoints(h->fs),
                      (long long)t->numel);
        goto done;
    }
    h->nd = nd;
    H5Sget_simple_extent_dims(h->fs, h->shape, NULL);
    H5T_class_t fc = H5Tget_class(ft);
    if (t->dtype == MSP_DTYPE_BOOL && fc == H5T_INTEGER)
        h->mt = H5Tcopy(H5T_NATIVE_UINT8);
    else if (t->dtype == MSP_DTYPE_BOOL && fc == H5T_ENUM)
        h->mt = H5Tget_native_type(ft, H5T_DIR_ASCEND); /* enums convert by member name */
    else
        h->mt = msp_h5_type_for(t->dtype);
    h->esize = msp_dtype_size(t->dtype);
    if (h->mt < 0 || !h->esize) {
        rc = msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot read the data as %s", s->where, t->dtype_name);
        goto done;
    }
    msp_stream_h5_rows(h);
    msp_stream_h5_cache(h, g, t->role);
    /* one block: a row that fits, or a single element of an oversized one */
    size_t cap = MSP_STREAM_BLOCK > h->esize ? MSP_STREAM_BLOCK : h->esize;
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

static msp_err msp_h5_stream_open(msp_dump_file_t *f, const msp_record_info_t *r,
                                  const msp_tensor_info_t *t, msp_tensor_stream_t *s)
{
    if (t->offset >= 0) {
        msp_stream_pread(s, msp_impl(f)->fd, t->offset);
        return MSP_OK;
    }
    return msp_stream_h5_open(f, r, t, s);
}

static msp_err msp_h5_read_tensor(msp_dump_file_t *f, const msp_record_info_t *r,
                                  const msp_tensor_info_t *t, void *buf, size_t buf_size)
{
    return msp_read_tensor_fd(f, msp_impl(f)->fd, r, t, buf, buf_size, msp_h5_stream_open);
}

static herr_t msp_attr_name_cb(hid_t loc, const char *name, const H5A_info_t *ai, void *ud)
{
    (void)loc;
    (void)ai;
    if (strcmp(name, "order") == 0)
        return 0;
    return msp_strvec_push(ud, name);
}

static msp_err msp_h5_record_attrs(msp_dump_file_t *f, const msp_record_info_t *r, char ***keys,
                                   char ***values, size_t *n)
{
    if (msp_impl(f)->has_attrs) /* read at open: no HDF5 call */
        return msp_table_attrs(f, r, keys, values, n);
    char where[700];
    snprintf(where, sizeof where, "file %s: record %s", f->path, r->name);
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

static msp_err msp_h5_api_defaults(msp_dump_file_t *f, const struct msp_attr_row **rows, size_t *n)
{
    *rows = msp_impl(f)->defs;
    *n = msp_impl(f)->n_defs;
    return MSP_OK;
}

/* Taken by msp_dump_open only when MSPROBE_READER_INPROC=1. */
static int msp_h5_probe(const char *path, char **file)
{
    (void)path;
    *file = NULL;
    const char *inproc = getenv("MSPROBE_READER_INPROC");
    return inproc && strcmp(inproc, "1") == 0;
}

const msp_reader_ops_t msp_reader_hdf5 = {
    .name = "hdf5",
    .probe = msp_h5_probe,
    .open = msp_dump_open_local,
    .read_tensor = msp_h5_read_tensor,
    .stream_open = msp_h5_stream_open,
    .record_attrs = msp_h5_record_attrs,
    .api_defaults = msp_h5_api_defaults,
    .close = msp_h5_close,
};
