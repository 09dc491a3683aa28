/* The catalogue of an HDF5 dump from its /index table, and the table checked
 * against the file it describes (for the in-process reader, fmt_h5read.c). */
#include "fmt_h5index.h"
#include "fmt_compact.h" /* msp_shape_size */
#include "fmt_h5pack.h"  /* packed rows */
#include "fmt_h5vlen.h"  /* the table from the mapped file */
#include "fmt_h5walk.h"  /* listing, storage and size checks */
#include "fmt_h5ohdr.h"  /* datasets' headers read from the mapped file */

#include <stdlib.h>
#include <string.h>

/* ---- catalogue from /index -------------------------------------------------- */

/* 1: /index usable (all columns present), 0: absent or not ours, -1 error. */
int msp_index_usable(hid_t file, hid_t *dset)
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

/* Two rows of one record in role order (msp_role_cmp); a and b point at
 * pointers to rows. */
static int msp_row_role_cmp(const void *a, const void *b)
{
    const struct msp_index_row *x = *(const struct msp_index_row *const *)a;
    const struct msp_index_row *y = *(const struct msp_index_row *const *)b;
    return msp_role_cmp(x->role, y->role);
}

/* msp_index's equality for msp_rows_grouped: record i's name is the key. */
static int msp_row_group_is(const void *ctx, size_t i)
{
    const void *const *c = ctx;
    const struct msp_index_row *const *first = c[0];
    return strcmp(first[i]->record, c[1]) == 0;
}

/* The rows (each a struct msp_index_row at stride bytes) into order[]:
 * grouped by record, records in the order the table first names them, a
 * record's rows in role order. A hash of the names where a sort by
 * (record, role) was before: that sort was a twentieth of a helper's work
 * on a file of small tensors, and the table's order, its writer's, is
 * mostly the catalogue's (msp_catalogue_sort then finds it sorted).
 * at_record[k]: 1 where order[k] begins a record. -1: out of memory. */
static int msp_rows_grouped(const void *rows, size_t n, size_t stride,
                            const struct msp_index_row **order, unsigned char *at_record)
{
    size_t *group = malloc((n ? n : 1) * sizeof *group);
    size_t *start = calloc(n + 1, sizeof *start);
    const struct msp_index_row **first = malloc((n ? n : 1) * sizeof *first);
    msp_index_t ix = {0};
    size_t ng = 0;
    int rc = group && start && first && !msp_index_reserve(&ix, n) ? 0 : -1;
    for (size_t i = 0; i < n && !rc; i++) {
        const struct msp_index_row *r = (const void *)((const char *)rows + i * stride);
        uint64_t h = msp_str_hash(r->record, 0);
        const void *key[2] = {first, r->record};
        size_t g = msp_index_find(&ix, h, msp_row_group_is, key);
        if (g == SIZE_MAX) {
            g = ng++;
            first[g] = r;
            rc = msp_index_put(&ix, h, g);
        }
        group[i] = g;
        start[g + 1]++;
    }
    for (size_t g = 0; g < ng && !rc; g++)
        start[g + 1] += start[g];
    for (size_t i = 0; i < n && !rc; i++) /* stable: file order within a record */
        order[start[group[i]]++] = (const void *)((const char *)rows + i * stride);
    for (size_t g = 0, at = 0; g < ng && !rc; at = start[g++]) {
        size_t len = start[g] - at; /* start[g] is now where record g ends */
        at_record[at] = 1;
        msp_sort(order + at, len, sizeof *order, msp_row_role_cmp);
    }
    msp_index_free(&ix);
    free(group);
    free(start);
    free(first);
    return rc;
}

/* The row's place in a message, into w: written only for one (each row's,
 * written ahead, was a thirtieth of a helper's work on small tensors). */
static const char *msp_row_where(char *w, size_t cap, const msp_dump_file_t *f,
                                 const struct msp_index_row *row)
{
    msp_index_where(w, cap, f->path, row->record, row->role);
    return w;
}

static msp_err msp_tensor_from_row(msp_dump_file_t *f, const struct msp_index_row *row,
                                   msp_tensor_info_t *t)
{
    char where[700]; /* written only for a message (msp_row_where) */
    struct msp_h5_impl *im = msp_impl(f);
    if (!(t->role = strdup(row->role)))
        return msp_fail(MSP_ERR_NOMEM, "%s: out of memory",
                        msp_row_where(where, sizeof where, f, row));
    t->dtype = msp_dtype_from_name(row->dtype);
    msp_copy_str(t->dtype_name, sizeof t->dtype_name,
                 t->dtype     ? msp_dtype_name(t->dtype)
                 : row->dtype ? row->dtype
                              : "");
    if (row->ndim < 0 || row->ndim > MSP_MAX_NDIM || row->shape.len != (size_t)row->ndim)
        return msp_fail(MSP_ERR_FORMAT, "%s: ndim %d does not match its shape of %zu entries",
                        msp_row_where(where, sizeof where, f, row), (int)row->ndim, row->shape.len);
    t->ndim = row->ndim;
    if (t->ndim)
        memcpy(t->shape, row->shape.p, sizeof(int64_t) * (size_t)t->ndim);
    size_t esize = msp_dtype_size(t->dtype);
    if (!msp_shape_fits(t->shape, t->ndim, esize, &t->numel, &t->nbytes))
        return msp_shape_size(t->shape, t->ndim, esize, &t->numel, &t->nbytes,
                              msp_row_where(where, sizeof where, f, row));
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
    msp_copy_str(t->device, sizeof t->device, row->device ? row->device : "");
    t->requires_grad = row->requires_grad != 0;
    return MSP_OK;
}

/* The n rows of /index (d) in memory type mt: read from the mapped file
 * (msp_table_vlen_read; *block then holds their strings), else through
 * H5Dread (their strings libhdf5's, for H5Dvlen_reclaim). -1: H5Dread
 * failed. */
static int msp_index_rows(msp_dump_file_t *f, hid_t d, hid_t mt, size_t n, void *rows, char **block)
{
    struct msp_h5_impl *im = msp_impl(f);
    if (msp_table_vlen_read(im->file, d, im->map, im->map_len, mt, n, rows, block))
        return 0;
    return H5Dread(d, mt, H5S_ALL, H5S_ALL, msp_h5_small_dxpl(), rows) < 0 ? -1 : 0;
}

/* An /index row as read: the shared columns, then the optional column
 * producer (msprobe-dump(5) 'producer'; NULL where the file has no such
 * column: older dumps, hand-written ones). */
struct msp_index_prow {
    struct msp_index_row r;
    char *producer;
};

/* The memory type of struct msp_index_prow for /index d: with producer
 * when d has that column. Caller closes. */
static hid_t msp_index_read_type(hid_t d)
{
    hid_t ft = H5Dget_type(d);
    int has = ft >= 0 && H5Tget_member_index(ft, "producer") >= 0;
    if (ft >= 0)
        H5Tclose(ft);
    H5Eclear2(H5E_DEFAULT);
    return msp_h5_index_type_at(sizeof(struct msp_index_prow), 0,
                                has ? (long)offsetof(struct msp_index_prow, producer) : -1, 0);
}

msp_err msp_load_index(msp_dump_file_t *f, hid_t d)
{
    msp_err rc = MSP_OK;
    hid_t mt = msp_index_read_type(d), s = H5Dget_space(d);
    struct msp_index_prow *rows = NULL;
    hssize_t n = s >= 0 ? H5Sget_simple_extent_npoints(s) : -1;
    size_t cap = 0;
    int read_ok = 0;
    char *block = NULL;                        /* the strings, when read from the mapped file */
    const struct msp_index_row **order = NULL; /* the rows, grouped by record */
    unsigned char *at_record = NULL;
    if (mt < 0 || n < 0) {
        rc = msp_h5_fail(MSP_ERR_FORMAT, "file %s: cannot read /index", f->path);
        goto cleanup;
    }
    /* A packed row takes over 64 bytes on disk (six variable-length
     * references alone take 96): a count no file of this size can hold is
     * a lie, refused before any allocation follows it. */
    if (n > im_file_size(f) / 64) {
        rc = msp_fail(MSP_ERR_FORMAT,
                      "file %s: /index declares %lld rows, more than a file of "
                      "%lld bytes can hold",
                      f->path, (long long)n, (long long)im_file_size(f));
        goto cleanup;
    }
    rows = calloc(n ? (size_t)n : 1, sizeof *rows);
    if (!rows) {
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /index (%lld rows)", f->path,
                      (long long)n);
        goto cleanup;
    }
    if (n > 0 && msp_index_rows(f, d, mt, (size_t)n, rows, &block) < 0) {
        rc = msp_h5_fail(MSP_ERR_FORMAT, "file %s: cannot read /index", f->path);
        goto cleanup;
    }
    read_ok = !block; /* the strings are libhdf5's, reclaimed by it */
    for (size_t i = 0; i < (size_t)n; i++)
        if (!rows[i].r.record || !rows[i].r.role) {
            rc = msp_fail(MSP_ERR_FORMAT, "file %s: /index row %zu has no record or role", f->path,
                          i);
            goto cleanup;
        }
    order = malloc(n ? (size_t)n * sizeof *order : 1);
    at_record = calloc(n ? (size_t)n : 1, 1);
    if (!order || !at_record || msp_rows_grouped(rows, (size_t)n, sizeof *rows, order, at_record)) {
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /index (%lld rows)", f->path,
                      (long long)n);
        goto cleanup;
    }
    for (size_t i = 0; i < (size_t)n; i++) {
        const struct msp_index_row *row = order[i];
        const struct msp_index_row *prev = i && !at_record[i] ? order[i - 1] : NULL;
        if (prev && strcmp(prev->role, row->role) == 0) {
            rc = msp_fail(MSP_ERR_FORMAT,
                          "file %s: /index: record %s: %s has two rows: the "
                          "table does not describe the file",
                          f->path, row->record,
                          row->role[0] ? row->role : "(the record's marker row)");
            goto cleanup;
        }
        msp_record_info_t *r = f->n_records ? &f->records[f->n_records - 1] : NULL;
        if (at_record[i]) {
            msp_record_info_t *nr = msp_grow(f->records, &cap, f->n_records, sizeof *nr, 16);
            if (!nr) {
                rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
                goto cleanup;
            }
            f->records = nr;
            r = &f->records[f->n_records++];
            r->order = row->order;
            size_t nt = 0; /* the record's tensors: its rows but a marker */
            for (size_t k = i; k < (size_t)n && (k == i || !at_record[k]); k++)
                nt += order[k]->role[0] != '\0';
            if (!(r->name = strdup(row->record)) ||
                (nt && !(r->tensors = calloc(nt, sizeof *r->tensors)))) {
                rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
                goto cleanup;
            }
        }
        if (!row->role[0])
            continue; /* marker row of a record without tensors */
        msp_tensor_info_t *t = &r->tensors[r->n_tensors];
        rc = msp_tensor_from_row(f, row, t);
        r->n_tensors++; /* counted even on failure so its role is freed */
        const char *producer = ((const struct msp_index_prow *)(const void *)row)->producer;
        if (!rc && producer && producer[0] && !(t->producer = strdup(producer)))
            rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
        if (rc)
            goto cleanup;
    }
cleanup:
    if (rows && read_ok && n > 0)
        H5Dvlen_reclaim(mt, s, H5P_DEFAULT, rows);
    free(rows);
    free(block);
    free(order);
    free(at_record);
    if (s >= 0)
        H5Sclose(s);
    if (mt >= 0)
        H5Tclose(mt);
    return rc;
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
        /* the type msprobe writes for the row's dtype: its fields need not be
         * taken apart (eight libhdf5 calls and two snprintf a dataset, a
         * twentieth of a helper's work on a file of small tensors) */
        if (msp_h5_type_is(ft, t->dtype))
            return MSP_OK;
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
        return msp_fail(MSP_ERR_FORMAT,
                        "%s: the row says dtype %s, the dataset's dtype "
                        "attribute %.40s",
                        where, t->dtype_name, attr);
    return MSP_OK;
}

/* One row against its dataset d (see msp_verify_index). */
static msp_err msp_verify_row(hid_t d, const msp_tensor_info_t *t, const char *where)
{
    int plain = 0;
    msp_err rc = !t->has_data     ? MSP_OK
                 : t->offset >= 0 ? msp_check_header_storage(d, where, &plain)
                                  : msp_check_storage(d, where, &plain);
    hid_t s = rc ? -1 : H5Dget_space(d), ft = rc ? -1 : H5Dget_type(d);
    hsize_t dims[MSP_MAX_NDIM];
    int nd = s >= 0 ? H5Sget_simple_extent_ndims(s) : -1;
    if (!rc && (s < 0 || ft < 0 || nd < 0 || nd > MSP_MAX_NDIM))
        rc = msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot read the dataset's shape", where);
    if (!rc && (H5Sget_simple_extent_type(s) != H5S_NULL) != t->has_data)
        rc = msp_fail(MSP_ERR_FORMAT,
                      "%s: the row says the tensor has %sdata, the dataset "
                      "holds %s",
                      where, t->has_data ? "" : "no ", t->has_data ? "none" : "some");
    if (!rc)
        rc = msp_verify_row_dtype(d, ft, t, where);
    if (!rc && t->has_data) {
        H5Sget_simple_extent_dims(s, dims, NULL);
        int same = nd == t->ndim;
        for (int k = 0; same && k < nd; k++)
            same = (int64_t)dims[k] == t->shape[k];
        if (!same)
            rc = msp_fail(MSP_ERR_FORMAT, "%s: the row's shape differs from the dataset's", where);
        if (!rc && t->dtype && H5Tget_size(ft) != msp_dtype_size(t->dtype))
            rc = msp_fail(MSP_ERR_FORMAT,
                          "%s: the row says %s (%zu bytes an element), the "
                          "dataset stores %zu",
                          where, t->dtype_name, msp_dtype_size(t->dtype), H5Tget_size(ft));
        if (!rc && t->offset >= 0) {
            haddr_t a = H5Dget_offset(d);
            if (!plain || a == HADDR_UNDEF || a != (haddr_t)t->offset ||
                H5Dget_storage_size(d) != (hsize_t)t->nbytes)
                rc = msp_fail(MSP_ERR_FORMAT,
                              "%s: the row says %lld bytes at offset %lld, the "
                              "dataset's own storage differs",
                              where, (long long)t->nbytes, (long long)t->offset);
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

/* The root's datasets that are no record: the tables of every layout. */
static const char *const msp_root_tables[] = {"index",   "attrs",  "defaults", "strings",
                                              "records", "values", "stats"};

/* Whether the root's links are exactly `found` hard links to record groups
 * and the tables that are datasets: then no other group is there, and the
 * root need not be listed object by object (msp_children asks each link's
 * object type: a twentieth of a helper's work on a file of small tensors).
 * 0: something else is there, and the caller lists it. */
static int msp_root_is_records(hid_t file, size_t found)
{
    H5G_info_t gi;
    if (H5Gget_info(file, &gi) < 0)
        return 0;
    size_t tables = 0;
    for (size_t i = 0; i < sizeof msp_root_tables / sizeof *msp_root_tables; i++) {
        H5L_info_t li;
        H5O_info_t oi;
        if (H5Lexists(file, msp_root_tables[i], H5P_DEFAULT) > 0 &&
            H5Lget_info(file, msp_root_tables[i], &li, H5P_DEFAULT) >= 0 &&
            li.type == H5L_TYPE_HARD &&
            H5Oget_info_by_name2(file, msp_root_tables[i], &oi, H5O_INFO_BASIC, H5P_DEFAULT) >= 0 &&
            oi.type == H5O_TYPE_DATASET)
            tables++;
    }
    H5Eclear2(H5E_DEFAULT);
    return gi.nlinks == found + tables;
}

/* Whether name is one of the root's own links (a table or /packed), which a
 * record of that name would find in place of a group of its own. */
static int msp_root_link_name(const char *name)
{
    for (size_t i = 0; i < sizeof msp_root_tables / sizeof *msp_root_tables; i++)
        if (!strcmp(name, msp_root_tables[i]))
            return 1;
    return !strcmp(name, "packed");
}

#if H5_VERSION_GE(1, 12, 0)
typedef H5L_info2_t msp_link_info_t;
#define msp_link_get_info H5Lget_info2
#define msp_link_iterate H5Literate2
#else
typedef H5L_info_t msp_link_info_t;
#define msp_link_get_info H5Lget_info
#define msp_link_iterate H5Literate
#endif

/* The object header the link li (at loc) names: UINT64_MAX when it is not a
 * hard link (or its address cannot be had). */
static uint64_t msp_link_addr(hid_t loc, const msp_link_info_t *li)
{
    if (li->type != H5L_TYPE_HARD)
        return UINT64_MAX;
#if H5_VERSION_GE(1, 12, 0)
    haddr_t a;
    return H5VLnative_token_to_addr(loc, li->u.token, &a) >= 0 ? (uint64_t)a : UINT64_MAX;
#else
    (void)loc;
    return (uint64_t)li->u.address;
#endif
}

/* The root's links by name, from one listing of the root: a lookup for
 * each record (H5Lget_info, a walk of the root's dense links each) was
 * half of what was left of the check of an unpacked file. */
struct msp_root_link {
    const char *name;
    size_t at;     /* the name's offset in names while the listing grows */
    uint64_t addr; /* the header a hard link names (UINT64_MAX: none known) */
    int hard;
};
struct msp_root_links {
    struct msp_root_link *v;
    size_t n, cap;
    msp_buf_t names; /* each name with its NUL */
    msp_index_t ix;  /* the links by name */
    int ok;          /* 0: not listed (or out of memory): each record is looked up */
};

static herr_t msp_root_cb(hid_t g, const char *name, const msp_link_info_t *li, void *ud)
{
    struct msp_root_links *rl = ud;
    struct msp_root_link *v = rl->ok ? msp_grow(rl->v, &rl->cap, rl->n, sizeof *v, 256) : NULL;
    if (!v) {
        rl->ok = 0;
        return 0;
    }
    rl->v = v;
    v[rl->n++] = (struct msp_root_link){NULL, rl->names.len, msp_link_addr(g, li),
                                        li->type == H5L_TYPE_HARD};
    msp_buf_put(&rl->names, name, strlen(name) + 1);
    return 0;
}

/* msp_index's equality for the root's links: link i's name is the key. */
static int msp_root_link_is(const void *ctx, size_t i)
{
    const void *const *c = ctx;
    const struct msp_root_links *rl = c[0];
    return strcmp(rl->v[i].name, c[1]) == 0;
}

/* The root's links, found by name through a hash of them (libhdf5 lists a
 * dense group in its own order: sorting the names for a binary search was
 * a fortieth of a helper's work on a file of small tensors). */
static void msp_root_list(hid_t file, struct msp_root_links *rl)
{
    *rl = (struct msp_root_links){.ok = 1};
    if (msp_link_iterate(file, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, msp_root_cb, rl) < 0 ||
        rl->names.oom || msp_index_reserve(&rl->ix, rl->n))
        rl->ok = 0;
    H5Eclear2(H5E_DEFAULT);
    for (size_t i = 0; rl->ok && i < rl->n; i++) {
        rl->v[i].name = rl->names.data + rl->v[i].at;
        rl->ok = !msp_index_put(&rl->ix, msp_str_hash(rl->v[i].name, 0), i);
    }
}

static const struct msp_root_link *msp_root_find(const struct msp_root_links *rl, const char *name)
{
    const void *key[2] = {rl, name};
    size_t i = msp_index_find(&rl->ix, msp_str_hash(name, 0), msp_root_link_is, key);
    return i == SIZE_MAX ? NULL : &rl->v[i];
}

static void msp_root_free(struct msp_root_links *rl)
{
    free(rl->v);
    free(rl->names.data);
    msp_index_free(&rl->ix);
}

/* Whether record r, n_data of whose rows have data, has a link in the
 * root: *hard whether it is a hard one, and *addr then the object header
 * it names (else UINT64_MAX). A record with data must have its group, so
 * its name is not looked up twice; nor is one without data when the root
 * holds no record group at all (no_groups: its links are the tables and
 * /packed, as in a packed or statistics-only file). The root's listing rl
 * answers for a name that is a link's own (no '/': libhdf5 would take a
 * path). */
static int msp_record_link(hid_t file, const struct msp_root_links *rl, const msp_record_info_t *r,
                           size_t n_data, int no_groups, int *hard, uint64_t *addr)
{
    *hard = 0;
    *addr = UINT64_MAX;
    if (!n_data && no_groups && !msp_root_link_name(r->name))
        return 0;
    if (rl->ok && *r->name && !strchr(r->name, '/') && strcmp(r->name, ".") != 0) {
        const struct msp_root_link *k = msp_root_find(rl, r->name);
        if (!k)
            return 0;
        *addr = k->addr;
        *hard = k->hard;
        return 1;
    }
    msp_link_info_t li;
    if ((!n_data && H5Lexists(file, r->name, H5P_DEFAULT) <= 0) ||
        msp_link_get_info(file, r->name, &li, H5P_DEFAULT) < 0)
        return 0;
    *addr = msp_link_addr(file, &li);
    *hard = li.type == H5L_TYPE_HARD;
    return 1;
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
msp_err msp_verify_index(msp_dump_file_t *f)
{
    struct msp_h5_impl *im = msp_impl(f);
    char where[700];
    struct msp_segs segs;
    msp_err rc = msp_segs_load(f, &segs);
    size_t found = 0;
    int all_hard = 1;
    /* the root's links all tables and /packed: no record has a group, and
     * none need be looked up by name (a twelfth of a helper's work on a
     * packed file, whose root holds thousands of links) */
    int no_groups = !rc && msp_root_is_records(im->file, (size_t)segs.group);
    /* a dataset's header read here when it is, but for shape and storage,
     * one libhdf5 opened and accepted already (fmt_h5ohdr.h): opening and
     * closing each was most of the work on a file of small tensors */
    struct msp_ohdr oh;
    struct msp_ohdr_group grp;
    msp_ohdr_init(&oh, im->map, im->map_len);
    struct msp_root_links roots = {0};
    if (!rc && !no_groups)
        msp_root_list(im->file, &roots);
    for (size_t i = 0; i < f->n_records && !rc; i++) {
        msp_record_info_t *r = &f->records[i];
        size_t n_sets = 0, n_data = 0;
        for (size_t j = 0; j < r->n_tensors; j++)
            n_data += r->tensors[j].has_data && !msp_segs_find(&segs, &r->tensors[j]);
        int hard = 0;
        uint64_t gaddr;
        /* the group's links read from its header where they can be (then
         * libhdf5 opens it only for a row that needs libhdf5), else opened */
        int linked = msp_record_link(im->file, &roots, r, n_data, no_groups, &hard, &gaddr);
        int listed = linked && hard && oh.on && msp_ohdr_group(&oh, gaddr, &grp);
        hid_t g = linked && !listed ? H5Gopen2(im->file, r->name, H5P_DEFAULT) : -1;
        int exists = listed || g >= 0;
        found += exists;
        all_hard &= !exists || hard;
        for (size_t j = 0; j < r->n_tensors && !rc; j++) {
            msp_tensor_info_t *t = &r->tensors[j];
            const struct msp_seg *seg = msp_segs_find(&segs, t);
            if (seg) { /* packed: no dataset, its bytes checked */
                rc = msp_segs_note(&segs, seg, t, f->path, r->name);
                continue;
            }
            uint64_t at = UINT64_MAX;
            int named = listed && msp_ohdr_group_find(&grp, t->role, &at);
            if (listed && !named && !t->has_data)
                continue; /* statistics only, and no dataset: the row is all there is */
            if (at != UINT64_MAX && msp_ohdr_accepts(&oh, at, t)) {
                n_sets++;
                continue;
            }
            if (listed && g < 0)
                g = H5Gopen2(im->file, r->name, H5P_DEFAULT);
            msp_index_where(where, sizeof where, f->path, r->name, t->role);
            /* a row with data must name its dataset: no lookup before the open */
            htri_t has_d = g < 0 ? 0 : t->has_data ? 1 : H5Lexists(g, t->role, H5P_DEFAULT);
            hid_t d = has_d > 0 ? H5Dopen2(g, t->role, H5P_DEFAULT) : -1;
            if (d < 0 && t->has_data) {
                rc = msp_h5_fail(MSP_ERR_FORMAT,
                                 "%s: the row names a dataset the file does "
                                 "not have",
                                 where);
                break;
            }
            H5Eclear2(H5E_DEFAULT);
            if (d < 0)
                continue; /* statistics only: the row is all there is */
            n_sets++;
            rc = msp_verify_row(d, t, where);
            haddr_t storage = !rc && at != UINT64_MAX ? H5Dget_offset(d) : HADDR_UNDEF;
            if (storage != HADDR_UNDEF)
                msp_ohdr_learn(&oh, at, t, (uint64_t)storage);
            H5Dclose(d);
        }
        if (!rc && !exists && n_data)
            rc = msp_fail(MSP_ERR_FORMAT,
                          "file %s: /index: record %s: the row names a record "
                          "the file does not have",
                          f->path, r->name);
        if (exists) {
            /* links as many as the datasets the rows named: those are all */
            int all_named = listed && grp.n == n_sets;
            if (!all_named) /* the record's place, for what follows */
                msp_index_where(where, sizeof where, f->path, r->name, NULL);
            if (!rc && !all_named && g < 0)
                g = H5Gopen2(im->file, r->name, H5P_DEFAULT);
            long held = rc || all_named ? (long)n_sets
                        : g >= 0        ? msp_count_datasets(g, n_sets, where)
                                        : -1;
            if (!rc && held < 0)
                rc = msp_h5_fail(MSP_ERR_FORMAT, "%s: cannot list its datasets", where);
            else if (!rc && held != (long)n_sets)
                rc = msp_fail(MSP_ERR_FORMAT,
                              "%s: the record's group holds %ld datasets, the "
                              "table names %zu of them",
                              where, held, n_sets);
            if (g >= 0)
                H5Gclose(g);
        }
    }
    H5Eclear2(H5E_DEFAULT);
    if (!rc)
        rc = msp_segs_check(&segs, f->path);
    size_t packed = (size_t)segs.group; /* /packed: a group of the root, no record's */
    found += packed;
    msp_segs_free(&segs);
    msp_root_free(&roots);
    /* with no_groups the root's links were counted already: when no record
     * found a group, they are counted again to the same answer */
    if (rc ||
        (all_hard && ((no_groups && found == packed) || msp_root_is_records(im->file, found))))
        return rc;
    struct msp_names groups;
    snprintf(where, sizeof where, "file %s", f->path);
    if ((rc = msp_children(im->file, H5O_TYPE_GROUP, &groups, where)))
        return rc;
    size_t n_groups = groups.sv.n;
    msp_free_strings(groups.sv.v, groups.sv.n);
    if (found != n_groups)
        rc = msp_fail(MSP_ERR_FORMAT,
                      "file %s: /index names %zu of the file's %zu record "
                      "groups: the table does not describe the file",
                      f->path, found, n_groups);
    H5Eclear2(H5E_DEFAULT);
    return rc;
}
