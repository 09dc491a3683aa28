/* Dump writer: one HDF5 file per step and rank, a group per record that
 * holds tensor data, one contiguous dataset per tensor written with a single
 * H5Dwrite in its native type (no chunking, no conversion); /index and
 * /attrs (the records' attributes) and /defaults (the APIs' signatures)
 * written at close.
 *
 * Speed: tensor bytes go from the caller's buffer to pwrite() untouched;
 * metadata is kept small (1.8 object headers with compact attribute and
 * link storage, no timestamps) and aggregated into large blocks, and
 * nothing is fsync'ed, so a dump runs close to raw sequential write speed.
 * Durable mode hands each tensor's bytes to the disk as soon as they are
 * written (sync_file_range) and syncs the file and its name at close. */
#include "fmt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fmt_writer_disk.h"

/* Tensors at least this big get their statistics computed on a helper
 * thread while this thread hands the data to HDF5: on a dump's writer thread
 * the two take about as long as each other, so a second core nearly halves
 * the time per tensor. */
#ifndef MSP_PARALLEL_STATS_BYTES
#define MSP_PARALLEL_STATS_BYTES (1024 * 1024)
#endif

struct msp_stats_job {
    msp_dtype_t dtype;
    const void *data;
    size_t numel;
    msp_stats_t stats;
};

static void *msp_stats_main(void *arg)
{
    struct msp_stats_job *j = arg;
    msp_stats_compute(j->dtype, j->data, j->numel, &j->stats);
    return NULL;
}

static void msp_row_free(struct msp_index_row *r)
{
    free(r->record);
    free(r->role);
    free(r->dtype);
    free(r->device);
    free(r->shape.p);
}

static void msp_writer_free(msp_writer_t *w)
{
    if (!w)
        return;
    if (w->group >= 0)
        H5Gclose(w->group);
    if (w->pack_group >= 0)
        H5Gclose(w->pack_group);
    free(w->pack);
    for (int i = 0; i < MSP_DTYPE_COUNT_; i++)
        if (w->types[i] >= 0)
            H5Tclose(w->types[i]);
    if (w->dcpl >= 0)
        H5Pclose(w->dcpl);
    if (w->gcpl >= 0)
        H5Pclose(w->gcpl);
    if (w->file >= 0)
        H5Fclose(w->file);
    for (size_t i = 0; i < w->n_rows; i++) {
        msp_row_free(&w->rows[i].r);
        free(w->rows[i].producer);
    }
    free(w->rows);
    for (size_t i = 0; i < w->n_attrs; i++) {
        free(w->attrs[i].key);
        free(w->attrs[i].value);
    }
    free(w->attrs);
    msp_rows_free(w->defs, w->n_defs);
    free(w->attr_keys);
    msp_index_free(&w->roles);
    msp_index_free(&w->names_ix);
    for (size_t i = 0; i < w->n_names; i++)
        free(w->names[i]);
    free(w->names);
    free(w->path);
    free(w);
}

struct msp_name_key {
    const msp_writer_t *w;
    const char *name;
};

static int msp_name_is(const void *ctx, size_t i)
{
    const struct msp_name_key *k = ctx;
    return strcmp(k->w->names[i], k->name) == 0;
}

/* Adds name to the file's record names (*kept: its copy there): 1 added, 0
 * already there, -1 out of memory. */
static int msp_names_add(msp_writer_t *w, const char *name, const char **kept)
{
    struct msp_name_key key = {w, name};
    uint64_t h = msp_str_hash(name, 0);
    if (msp_index_find(&w->names_ix, h, msp_name_is, &key) != SIZE_MAX)
        return 0;
    char **t = msp_grow(w->names, &w->cap_names, w->n_names, sizeof *t, 256);
    if (t)
        w->names = t;
    char *copy = t ? strdup(name) : NULL;
    if (!copy || msp_index_put(&w->names_ix, h, w->n_names)) {
        free(copy);
        return -1;
    }
    w->names[w->n_names++] = copy;
    *kept = copy;
    return 1;
}

#define MSP_ROLES_SCAN 16 /* a record with fewer rows: its roles are compared one by one */

struct msp_role_key {
    const msp_writer_t *w;
    const char *role;
};

static int msp_role_is(const void *ctx, size_t i)
{
    const struct msp_role_key *k = ctx;
    return strcmp(k->w->rows[i].r.role, k->role) == 0;
}

/* Whether the open record already has a row for role. */
static int msp_roles_has(msp_writer_t *w, const char *role)
{
    size_t first = w->record_row;
    if (w->n_rows - first >= MSP_ROLES_SCAN) {
        /* rows added since the last look are indexed now */
        size_t i = first + w->roles.n;
        for (; i < w->n_rows; i++)
            if (msp_index_put(&w->roles, msp_str_hash(w->rows[i].r.role, 0), i))
                break;
        if (i == w->n_rows) {
            struct msp_role_key key = {w, role};
            return msp_index_find(&w->roles, msp_str_hash(role, 0), msp_role_is, &key) != SIZE_MAX;
        }
    } /* few rows, or no memory for the index: one by one */
    for (size_t i = first; i < w->n_rows; i++)
        if (strcmp(w->rows[i].r.role, role) == 0)
            return 1;
    return 0;
}

static msp_err msp_writer_props(msp_writer_t *w)
{
    w->dcpl = H5Pcreate(H5P_DATASET_CREATE);
    w->gcpl = H5Pcreate(H5P_GROUP_CREATE);
    if (w->dcpl < 0 || w->gcpl < 0 || H5Pset_layout(w->dcpl, H5D_CONTIGUOUS) < 0 ||
        H5Pset_alloc_time(w->dcpl, H5D_ALLOC_TIME_EARLY) < 0 ||
        H5Pset_fill_time(w->dcpl, H5D_FILL_TIME_NEVER) < 0 ||
        H5Pset_obj_track_times(w->dcpl, 0) < 0 ||
        /* 11 tensor attributes: keep them in the object header rather than
         * a fractal heap + B-tree per dataset (the default goes dense at 8). */
        H5Pset_attr_phase_change(w->dcpl, 32, 24) < 0 || H5Pset_obj_track_times(w->gcpl, 0) < 0 ||
        H5Pset_attr_phase_change(w->gcpl, 64, 48) < 0 ||
        H5Pset_link_phase_change(w->gcpl, 32, 24) < 0 || H5Pset_est_link_info(w->gcpl, 4, 10) < 0)
        return msp_h5_fail(MSP_ERR_HDF5, "file %s: cannot set up HDF5 properties", w->path);
    for (int i = 1; i < MSP_DTYPE_COUNT_; i++) {
        w->types[i] = msp_h5_type_for((msp_dtype_t)i);
        if (w->types[i] < 0)
            return msp_h5_fail(MSP_ERR_HDF5, "file %s: cannot build the HDF5 type for %s", w->path,
                               msp_dtype_name((msp_dtype_t)i));
    }
    return MSP_OK;
}

static msp_err msp_writer_root_attrs(msp_writer_t *w, const msp_dump_meta_t *m)
{
    char where[600];
    snprintf(where, sizeof where, "file %s", w->path);
    hid_t root = w->file;
    msp_err rc;
    msp_err (*put_str)(hid_t, const char *, const char *,
                       const char *) = w->compact ? msp_compact_attr_str : msp_h5_attr_put_str;
    if ((rc = put_str(root, "format", MSP_FORMAT_NAME, where)) ||
        (rc = msp_h5_attr_put_i64(root, "format_version",
                                  w->compact      ? MSP_STATS_FORMAT_VERSION
                                  : w->pack_below ? MSP_PACKED_FORMAT_VERSION
                                                  : MSP_TENSOR_FORMAT_VERSION,
                                  where)) ||
        (rc = put_str(root, "framework", m->framework ? m->framework : "pytorch", where)) ||
        (rc = put_str(root, "framework_version", m->framework_version ? m->framework_version : "",
                      where)) ||
        (rc = put_str(root, "task", m->task ? m->task : "tensor", where)) ||
        (rc = put_str(root, "dump_mode", m->dump_mode ? m->dump_mode : "api", where)) ||
        (rc = msp_h5_attr_put_i64(root, "step", m->step, where)) ||
        (rc = msp_h5_attr_put_i64(root, "rank", m->rank, where)) ||
        (rc = msp_h5_attr_put_i64(root, "world_size", m->world_size, where)))
        return rc;
    return MSP_OK;
}

msp_err msp_writer_open(const char *path, const msp_dump_meta_t *meta, msp_writer_t **out)
{
    msp_err rc = MSP_OK;
    hid_t fapl = -1;
    msp_writer_t *w = NULL;
    if (out)
        *out = NULL;
    if (!path || !*path || !meta || !out)
        return msp_fail(MSP_ERR_USAGE, "msp_writer_open: path, meta and out are required");

    msp_h5_lock();
    w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", path);
        goto cleanup;
    }
    w->file = w->group = w->dcpl = w->gcpl = w->pack_group = -1;
    w->fd = -1;
    /* Statistics dumps take the compact layout, which only HDF5 1.10's file
     * format keeps without a B-tree a table; tensor dumps stay readable by
     * HDF5 1.8 and by msprobe before format_version 3. */
    w->compact = meta->task && strcmp(meta->task, "statistics") == 0;
    if (!w->compact && meta->pack_below > 0)
        w->pack_below = (size_t)(meta->pack_below < MSP_PACK_BELOW_MAX ? meta->pack_below
                                                                       : MSP_PACK_BELOW_MAX);
    H5F_libver_t low = w->compact ? H5F_LIBVER_V110 : H5F_LIBVER_V18;
    for (int i = 0; i < MSP_DTYPE_COUNT_; i++)
        w->types[i] = -1;
    if ((rc = msp_writer_props(w)))
        goto cleanup;

    fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_libver_bounds(fapl, low, low) < 0 ||
        /* a statistics file is a few small tables: a
         * big metadata block would stay mostly a hole in it */
        H5Pset_meta_block_size(fapl, w->compact ? MSP_META_BLOCK_COMPACT : MSP_META_BLOCK) < 0 ||
        (w->compact && H5Pset_small_data_block_size(fapl, MSP_SMALL_DATA_COMPACT) < 0) ||
        H5Pset_alignment(fapl, MSP_ALIGN_THRESHOLD, MSP_ALIGN) < 0 ||
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0 ||
        /* Filesystems without flock (some NFS, Lustre setups) must not
         * stop a dump: lock where possible, carry on where not. */
        H5Pset_file_locking(fapl, 1, 1) < 0) {
        rc = msp_h5_fail(MSP_ERR_HDF5, "file %s: cannot set up HDF5 file access", path);
        goto cleanup;
    }
    /* A step writes thousands of small objects: a metadata cache big enough
     * to hold them avoids evicting (and rewriting) headers mid-step. */
    H5AC_cache_config_t mdc;
    mdc.version = H5AC__CURR_CACHE_CONFIG_VERSION;
    if (H5Pget_mdc_config(fapl, &mdc) >= 0) {
        mdc.set_initial_size = 1;
        mdc.initial_size = MSP_MDC_INITIAL;
        mdc.min_size = MSP_MDC_INITIAL;
        mdc.max_size = MSP_MDC_MAX;
        if (H5Pset_mdc_config(fapl, &mdc) < 0)
            H5Eclear2(H5E_DEFAULT); /* the default cache still works */
    }
    errno = 0;
    w->file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (w->file < 0) {
        int e = errno;
        rc = msp_h5_fail(MSP_ERR_IO, "cannot create dump file %s%s%s", path, e ? ": " : "",
                         e ? strerror(e) : "");
        goto cleanup;
    }
    void *handle = NULL;
    if (H5Fget_vfd_handle(w->file, H5P_DEFAULT, &handle) >= 0 && handle)
        w->fd = *(int *)handle;
    else
        H5Eclear2(H5E_DEFAULT); /* no preallocation then */
    rc = msp_writer_root_attrs(w, meta);
cleanup:
    if (fapl >= 0)
        H5Pclose(fapl);
    if (rc) {
        msp_writer_free(w);
        w = NULL;
    }
    msp_h5_unlock();
    *out = w;
    return rc;
}

static int msp_name_ok(const char *s)
{
    return s && *s && !strchr(s, '/') && strcmp(s, ".") != 0;
}

msp_err msp_writer_begin_record(msp_writer_t *w, const char *record, int64_t order)
{
    if (!w)
        return msp_fail(MSP_ERR_USAGE, "msp_writer_begin_record: no writer");
    /* the tables' names, the compact layout's included (a record with data
     * in a statistics dump has a group beside them) */
    static const char *const reserved[] = {"index", "attrs",  "defaults", "strings", "records",
                                           "stats", "values", "packed",   NULL};
    int bad = !msp_name_ok(record);
    for (int i = 0; !bad && reserved[i]; i++)
        bad = strcmp(record, reserved[i]) == 0;
    if (bad)
        return msp_fail(MSP_ERR_USAGE,
                        "file %s: invalid record name '%s' (empty, contains '/', or "
                        "a reserved name: 'index', 'attrs', 'defaults', 'strings', "
                        "'records', 'stats', 'values', 'packed')",
                        w->path, record ? record : "(null)");
    if (w->record)
        return msp_fail(MSP_ERR_USAGE, "file %s: record %s: begun while record %s is still open",
                        w->path, record, w->record);
    const char *kept = NULL;
    int added = msp_names_add(w, record, &kept);
    if (added <= 0) {
        if (added < 0)
            return msp_fail(MSP_ERR_NOMEM, "file %s: record %s: out of memory", w->path, record);
        return msp_fail(MSP_ERR_USAGE, "file %s: record %s already exists in this file", w->path,
                        record);
    }
    /* The group comes later, and only when the record needs one (tensor
     * data): a statistics-only record is /index and /attrs rows alone, which
     * saves most of a small tensor's cost (msprobe-dump(5)). */
    w->record = kept;
    w->record_attr = w->n_attrs;
    w->order = order;
    w->record_tensors = 0;
    w->record_row = w->n_rows;
    if (w->roles.n) /* the last record's table */
        msp_index_clear(&w->roles);
    return MSP_OK;
}

/* The open record's group, created on first need. Call with the lock held. */
static msp_err msp_writer_group(msp_writer_t *w)
{
    if (w->group >= 0)
        return MSP_OK;
    char where[600];
    snprintf(where, sizeof where, "file %s: record %s", w->path, w->record);
    w->group = H5Gcreate2(w->file, w->record, H5P_DEFAULT, w->gcpl, H5P_DEFAULT);
    if (w->group < 0)
        return msp_h5_fail(MSP_ERR_IO, "%s: cannot create its group (disk full?)", where);
    msp_err rc = msp_h5_attr_put_i64(w->group, "order", w->order, where);
    if (rc) {
        H5Gclose(w->group);
        w->group = -1;
    }
    return rc;
}

/* Takes ownership of r's strings, and copies producer (NULL = unknown). */
static msp_err msp_writer_push_row(msp_writer_t *w, struct msp_index_row *r, const char *producer)
{
    char *p = strdup(producer ? producer : "");
    struct msp_wrow *n = p ? msp_grow(w->rows, &w->cap_rows, w->n_rows, sizeof *n, 256) : NULL;
    if (!n) {
        free(p);
        msp_row_free(r);
        return msp_fail(MSP_ERR_NOMEM, "file %s: record %s: out of memory for /index", w->path,
                        w->record);
    }
    w->rows = n;
    w->rows[w->n_rows].r = *r;
    w->rows[w->n_rows].pending = 0;
    w->rows[w->n_rows++].producer = p;
    return MSP_OK;
}

static msp_err msp_tensor_attrs(hid_t d, const msp_tensor_in_t *t, const msp_stats_t *st,
                                const char *where)
{
    msp_err rc;
    if ((rc = msp_h5_attr_put_str(d, "dtype", msp_dtype_name(t->dtype), where)) ||
        (rc = msp_h5_attr_put_i64_array(d, "shape", t->shape, t->ndim, where)) ||
        (rc = msp_h5_attr_put_f64(d, "max", st->max, where)) ||
        (rc = msp_h5_attr_put_f64(d, "min", st->min, where)) ||
        (rc = msp_h5_attr_put_f64(d, "mean", st->mean, where)) ||
        (rc = msp_h5_attr_put_f64(d, "norm", st->norm, where)) ||
        (rc = msp_h5_attr_put_i64(d, "nan_count", st->nan_count, where)) ||
        (rc = msp_h5_attr_put_i64(d, "inf_count", st->inf_count, where)) ||
        (rc = msp_h5_attr_put_u32(d, "crc32", st->crc32, where)) ||
        (rc = msp_h5_attr_put_str(d, "device", t->device ? t->device : "cpu", where)) ||
        (rc = msp_h5_attr_put_bool(d, "requires_grad", t->requires_grad, where)))
        return rc;
    if (t->producer && *t->producer)
        return msp_h5_attr_put_str(d, "producer", t->producer, where);
    return MSP_OK;
}

msp_err msp_writer_add_tensor(msp_writer_t *w, const msp_tensor_in_t *t)
{
    msp_err rc = MSP_OK;
    hid_t space = -1, d = -1;
    struct msp_index_row row;
    memset(&row, 0, sizeof row);
    if (!w || !t)
        return msp_fail(MSP_ERR_USAGE, "msp_writer_add_tensor: no writer or tensor");
    if (!w->record)
        return msp_fail(MSP_ERR_USAGE, "file %s: tensor %s added outside a record", w->path,
                        t->role ? t->role : "(null)");
    char where[700];
    snprintf(where, sizeof where, "file %s: record %s: %s", w->path, w->record,
             t->role ? t->role : "(null)");
    if (!msp_name_ok(t->role))
        return msp_fail(MSP_ERR_USAGE, "%s: invalid role name (empty or contains '/')", where);
    size_t esize = msp_dtype_size(t->dtype);
    if (!esize)
        return msp_fail(MSP_ERR_UNSUPPORTED, "%s: unsupported dtype code %d", where, (int)t->dtype);
    if (t->ndim < 0 || t->ndim > MSP_MAX_NDIM || (t->ndim > 0 && !t->shape))
        return msp_fail(MSP_ERR_USAGE, "%s: ndim %d is outside 0..%d or shape is missing", where,
                        t->ndim, MSP_MAX_NDIM);
    size_t numel = 1;
    hsize_t dims[MSP_MAX_NDIM];
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0)
            return msp_fail(MSP_ERR_USAGE, "%s: negative dimension %lld", where,
                            (long long)t->shape[i]);
        dims[i] = (hsize_t)t->shape[i];
        if (numel && (uint64_t)t->shape[i] > SIZE_MAX / esize / numel)
            return msp_fail(MSP_ERR_LIMIT, "%s: tensor too large", where);
        numel *= (size_t)t->shape[i];
    }
    if (!t->data && !t->stats)
        return msp_fail(MSP_ERR_USAGE, "%s: neither data nor statistics given", where);
    /* The record's rows so far are its roles. */
    if (msp_roles_has(w, t->role))
        return msp_fail(MSP_ERR_USAGE, "%s: role already written in this record", where);

    /* Statistics are the expensive part for big tensors: never under the
     * HDF5 lock, and for big ones on a second thread during the write. */
    msp_stats_t st;
    struct msp_stats_job job = {.dtype = t->dtype, .data = t->data, .numel = numel};
    pthread_t stats_thread;
    int stats_pending = 0;
    if (t->stats)
        st = *t->stats;
    else if (numel * esize >= MSP_PARALLEL_STATS_BYTES &&
             pthread_create(&stats_thread, NULL, msp_stats_main, &job) == 0)
        stats_pending = 1;
    else
        msp_stats_compute(t->dtype, t->data, numel, &st);

    row.record = strdup(w->record);
    row.role = strdup(t->role);
    row.dtype = strdup(msp_dtype_name(t->dtype));
    row.device = strdup(t->device ? t->device : "cpu");
    row.shape.len = (size_t)t->ndim;
    row.shape.p = malloc(sizeof(int64_t) * (t->ndim ? (size_t)t->ndim : 1));
    if (!row.record || !row.role || !row.dtype || !row.device || !row.shape.p) {
        msp_row_free(&row);
        return msp_fail(MSP_ERR_NOMEM, "%s: out of memory", where);
    }
    if (t->ndim)
        memcpy(row.shape.p, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    row.order = w->order;
    row.ndim = t->ndim;
    row.has_data = t->data != NULL;
    row.nbytes = (int64_t)(numel * esize);
    row.offset = -1;
    row.requires_grad = t->requires_grad ? 1 : 0;

    msp_h5_lock();
    /* A small tensor's data goes into /packed, its row says where. */
    int packed = t->data && msp_pack_wants(w, numel * esize);
    if (packed && (rc = msp_pack_add(w, t->data, numel * esize, &row.offset)))
        goto cleanup;
    /* A tensor without data (statistics only) is its /index row alone. */
    if (t->data && !packed && (rc = msp_writer_group(w)))
        goto cleanup;
    if (t->data && !packed) {
        space = t->ndim == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(t->ndim, dims, NULL);
        if (space < 0) {
            rc = msp_h5_fail(MSP_ERR_HDF5, "%s: cannot create its dataspace", where);
            goto cleanup;
        }
        d = H5Dcreate2(w->group, t->role, w->types[t->dtype], space, H5P_DEFAULT, w->dcpl,
                       H5P_DEFAULT);
        if (d < 0) {
            rc = msp_h5_fail(MSP_ERR_IO, "%s: cannot create its dataset (disk full?)", where);
            goto cleanup;
        }
    }
    if (t->data && !packed && numel > 0) {
        haddr_t at = H5Dget_offset(d);
        if (at != HADDR_UNDEF)
            msp_writer_prealloc(w, (int64_t)at, (int64_t)(numel * esize));
        /* Memory type == file type and contiguous layout: HDF5 hands the
         * caller's buffer straight to pwrite(). */
        if (H5Dwrite(d, w->types[t->dtype], H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0) {
            rc = msp_h5_fail(MSP_ERR_IO, "%s: cannot write %zu bytes of tensor data (disk full?)",
                             where, numel * esize);
            goto cleanup;
        }
        row.offset = at == HADDR_UNDEF ? -1 : (int64_t)at;
        if (at != HADDR_UNDEF)
            msp_writer_write_behind(w, (int64_t)at, (int64_t)(numel * esize));
    }
    if (stats_pending) {
        pthread_join(stats_thread, NULL);
        stats_pending = 0;
        st = job.stats;
    }
    row.max = st.max;
    row.min = st.min;
    row.mean = st.mean;
    row.norm = st.norm;
    row.nan_count = st.nan_count;
    row.inf_count = st.inf_count;
    row.crc32 = st.crc32;
    if (d >= 0 && (rc = msp_tensor_attrs(d, t, &st, where)))
        goto cleanup;
    rc = msp_writer_push_row(w, &row, t->producer);
    memset(&row, 0, sizeof row); /* owned by w->rows now, or freed */
    if (!rc)
        w->rows[w->n_rows - 1].pending = packed;
    if (!rc)
        w->record_tensors++;
cleanup:
    if (stats_pending)
        pthread_join(stats_thread, NULL);
    if (d >= 0)
        H5Dclose(d);
    if (space >= 0)
        H5Sclose(space);
    msp_h5_unlock();
    msp_row_free(&row);
    return rc;
}

msp_err msp_writer_set_attr(msp_writer_t *w, const char *key, const char *value)
{
    if (!w)
        return msp_fail(MSP_ERR_USAGE, "msp_writer_set_attr: no writer");
    if (!w->record)
        return msp_fail(MSP_ERR_USAGE, "file %s: attribute %s set outside a record", w->path,
                        key ? key : "(null)");
    if (!key || !*key || strcmp(key, "order") == 0)
        return msp_fail(MSP_ERR_USAGE,
                        "file %s: record %s: invalid attribute name '%s' (empty or "
                        "the reserved 'order')",
                        w->path, w->record, key ? key : "(null)");
    char *v = strdup(value ? value : "");
    if (!v)
        return msp_fail(MSP_ERR_NOMEM, "file %s: record %s: out of memory", w->path, w->record);
    /* A key set again replaces its value (a record has a few keys; an
     * optimizer's record about ten a parameter group). */
    uint64_t h = msp_str_hash(key, 0);
    for (size_t i = w->record_attr; i < w->n_attrs; i++)
        if (w->attr_keys[i] == h && strcmp(w->attrs[i].key, key) == 0) {
            free(w->attrs[i].value);
            w->attrs[i].value = v;
            return MSP_OK;
        }
    char *k = strdup(key);
    struct msp_attr_row *t = k ? msp_grow(w->attrs, &w->cap_attrs, w->n_attrs, sizeof *t, 256)
                               : NULL;
    uint64_t *hs = t ? msp_grow(w->attr_keys, &w->cap_attr_keys, w->n_attrs, sizeof *hs, 256)
                     : NULL;
    if (t)
        w->attrs = t;
    if (!hs) {
        free(k);
        free(v);
        return msp_fail(MSP_ERR_NOMEM, "file %s: record %s: out of memory for /attrs", w->path,
                        w->record);
    }
    w->attr_keys = hs;
    w->attr_keys[w->n_attrs] = h;
    w->attrs[w->n_attrs++] = (struct msp_attr_row){(char *)w->record, k, v};
    return MSP_OK;
}

msp_err msp_writer_add_defaults(msp_writer_t *w, const char *api, const char *const *keys,
                                const char *const *values, size_t n)
{
    if (!w || !api || !*api || (n && (!keys || !values)))
        return msp_fail(MSP_ERR_USAGE, "msp_writer_add_defaults: missing argument");
    for (size_t i = 0; i < n; i++) {
        struct msp_attr_row *t = msp_grow(w->defs, &w->cap_defs, w->n_defs, sizeof *t, 64);
        if (t)
            w->defs = t;
        struct msp_attr_row row = {t ? strdup(api) : NULL, t ? strdup(keys[i]) : NULL,
                                   t ? strdup(values[i] ? values[i] : "") : NULL};
        if (!row.record || !row.key || !row.value) {
            free(row.record);
            free(row.key);
            free(row.value);
            return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /defaults of %s", w->path,
                            api);
        }
        w->defs[w->n_defs++] = row;
    }
    return MSP_OK;
}

/* Call with the lock held. A record without tensors still gets one /index
 * row (empty role) so that the index lists every record. */
static msp_err msp_writer_end_locked(msp_writer_t *w)
{
    msp_err rc = MSP_OK;
    if (!w->record)
        return MSP_OK;
    if (w->record_tensors == 0) {
        struct msp_index_row row;
        memset(&row, 0, sizeof row);
        row.record = strdup(w->record);
        row.role = strdup("");
        row.dtype = strdup("");
        row.device = strdup("");
        row.order = w->order;
        row.max = row.min = row.mean = NAN;
        row.offset = -1;
        if (!row.record || !row.role || !row.dtype || !row.device) {
            msp_row_free(&row);
            rc = msp_fail(MSP_ERR_NOMEM, "file %s: record %s: out of memory", w->path, w->record);
        } else {
            rc = msp_writer_push_row(w, &row, NULL);
        }
    }
    if (w->group >= 0 && H5Gclose(w->group) < 0 && !rc)
        rc = msp_h5_fail(MSP_ERR_HDF5, "file %s: record %s: cannot close its group", w->path,
                         w->record);
    w->group = -1;
    w->record = NULL;
    return rc;
}

msp_err msp_writer_end_record(msp_writer_t *w)
{
    if (!w)
        return msp_fail(MSP_ERR_USAGE, "msp_writer_end_record: no writer");
    if (!w->record)
        return msp_fail(MSP_ERR_USAGE, "file %s: end_record without begin_record", w->path);
    msp_h5_lock();
    msp_err rc = msp_writer_end_locked(w);
    msp_h5_unlock();
    return rc;
}

msp_err msp_writer_close(msp_writer_t *w)
{
    if (!w)
        return MSP_OK;
    msp_h5_lock();
    msp_err rc = msp_writer_end_locked(w);
    msp_err rc2 = msp_pack_flush(w); /* the offsets of /index's last packed rows */
    if (!rc2)
        rc2 = w->compact ? msp_writer_compact_tables(w)
                         : msp_writer_table(w, "index", msp_wrow_type(1), msp_wrow_type(0), w->rows,
                                            w->n_rows, sizeof *w->rows, 0);
    if (!rc2 && !w->compact)
        rc2 = msp_writer_table(w, "attrs", msp_h5_attrs_type(1), msp_h5_attrs_type(0), w->attrs,
                               w->n_attrs, sizeof *w->attrs, 0);
    /* only where the shim gave signatures: a file without APIs has no table */
    if (!rc2 && w->n_defs && !w->compact)
        rc2 = msp_writer_table(w, "defaults", msp_h5_attrs_type(1), msp_h5_attrs_type(0), w->defs,
                               w->n_defs, sizeof *w->defs, 0);
    if (!rc)
        rc = rc2;
    /* H5Fclose flushes the metadata; a failure here means the file is
     * incomplete, and the caller must hear about it. */
    hid_t f = w->file;
    w->file = -1;
    if (H5Fclose(f) < 0 && !rc)
        rc = msp_h5_fail(MSP_ERR_IO, "file %s: cannot flush and close (disk full?)", w->path);
    char *path = w->path;
    int64_t end = w->prealloc_end;
    int durable = w->durable;
    w->path = NULL;
    msp_writer_free(w);
    msp_h5_unlock();
    /* Outside the lock: an fdatasync must not hold up other files' HDF5 work. */
    msp_err rc3 = msp_writer_finish_file(path, end, durable);
    if (!rc)
        rc = rc3;
    free(path);
    return rc;
}

void msp_writer_abort(msp_writer_t *w)
{
    if (!w)
        return;
    msp_h5_lock();
    char *path = w->prealloc_end > 0 ? w->path : NULL;
    int64_t end = w->prealloc_end;
    if (path)
        w->path = NULL;
    msp_writer_free(w);
    H5Eclear2(H5E_DEFAULT);
    msp_h5_unlock();
    if (path)
        msp_writer_finish_file(path, end, 0);
    free(path);
}
