/* The catalogue of a statistics dump's compact tables (fmt_compact.h): the
 * tables as fmt_h5stats.c read them, in this process or in the reader
 * helper (which sends them as they are). No libhdf5 here: every number a
 * row holds is checked against the table it points into, and what the
 * tables say against itself, whoever read them. */
#include "fmt_compact.h"
#include "fmt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void msp_ctables_free(struct msp_ctables *t)
{
    free(t->strings);
    free(t->records);
    free(t->values);
    free(t->stats);
    free(t->attrs);
    free(t->defaults);
    memset(t, 0, sizeof *t);
}

int msp_shape_fits(const int64_t *shape, int ndim, size_t esize, int64_t *numel, int64_t *nbytes)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] && n > INT64_MAX / shape[i]))
            return 0;
        n *= shape[i];
    }
    if (esize && n > INT64_MAX / (int64_t)esize)
        return 0;
    *numel = n;
    *nbytes = n * (int64_t)esize;
    return 1;
}

msp_err msp_shape_size(const int64_t *shape, int ndim, size_t esize, int64_t *numel,
                       int64_t *nbytes, const char *where)
{
    if (msp_shape_fits(shape, ndim, esize, numel, nbytes))
        return MSP_OK;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return msp_fail(MSP_ERR_FORMAT, "%s: negative dimension %lld in its shape", where,
                            (long long)shape[i]);
    return msp_fail(MSP_ERR_FORMAT, "%s: shape is too large", where);
}

/* ---- /strings ---------------------------------------------------------------- */

/* The strings of /strings: the blob (NUL-ended) and where each starts. */
struct msp_strs {
    const char *blob;
    size_t *off;
    size_t n;
};

/* String number id of s, or NULL when out of range. */
static const char *msp_str_at(const struct msp_strs *s, uint32_t id)
{
    return id < s->n ? s->blob + s->off[id] : NULL;
}

static msp_err msp_strs_index(msp_dump_file_t *f, const struct msp_ctables *t, struct msp_strs *s)
{
    size_t n = t->n_strings;
    s->blob = t->strings;
    if (!n || s->blob[n - 1] != '\0')
        return msp_fail(MSP_ERR_FORMAT, "file %s: /strings does not end with a NUL byte", f->path);
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += s->blob[i] == '\0';
    if (!(s->off = malloc(count * sizeof *s->off)))
        return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /strings", f->path);
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        if (s->blob[i] == '\0') {
            s->off[s->n++] = at;
            at = i + 1;
        }
    return MSP_OK;
}

/* ---- /attrs, /defaults ------------------------------------------------------- */

/* The n rows c of table name ((record, key, value) string numbers) as
 * malloc'd rows sorted by record, then key. */
static msp_err msp_crows_sorted(msp_dump_file_t *f, const struct msp_strs *s, const char *name,
                                const struct msp_crow *c, size_t n, struct msp_attr_row **out,
                                size_t *n_out)
{
    if (!n)
        return MSP_OK; /* no table, or an empty one: no rows */
    struct msp_attr_row *rows = calloc(n, sizeof *rows);
    if (!rows)
        return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /%s", f->path, name);
    *out = rows; /* freed with the file, even half made */
    *n_out = n;
    for (size_t i = 0; i < n; i++) {
        const char *r = msp_str_at(s, c[i].record), *k = msp_str_at(s, c[i].key),
                   *v = msp_str_at(s, c[i].value);
        if (!r || !k || !v)
            return msp_fail(MSP_ERR_FORMAT,
                            "file %s: /%s row %zu names a string /strings "
                            "does not have",
                            f->path, name, i);
        if (!(rows[i].record = strdup(r)) || !(rows[i].key = strdup(k)) ||
            !(rows[i].value = strdup(v)))
            return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /%s", f->path, name);
    }
    char where[600];
    snprintf(where, sizeof where, "file %s: /%s", f->path, name);
    return msp_rows_sort(rows, n, where);
}

/* ---- /records ---------------------------------------------------------------- */

static int msp_rec_name_cmp(const void *a, const void *b)
{
    return strcmp(((const msp_record_info_t *)a)->name, ((const msp_record_info_t *)b)->name);
}

static int msp_rec_key_cmp(const void *key, const void *elem)
{
    return strcmp(key, ((const msp_record_info_t *)elem)->name);
}

/* The one record each name may have, by the name's text. */
static int msp_rec_name_is(const void *ctx, size_t i)
{
    const void *const *c = ctx;
    const msp_dump_file_t *f = c[0];
    return strcmp(f->records[i].name, (const char *)c[1]) == 0;
}

/* A file without /index: its /records in the order written (execution
 * order, which the catalogue keeps: no sort by name, then by order again),
 * and (*by_id)[k] the record named by string k (UINT32_MAX: none), for
 * /stats's rows. A name given twice, under one string number or two, is
 * refused. */
static msp_err msp_records_own(msp_dump_file_t *f, const struct msp_strs *s,
                               const struct msp_ctables *t, uint32_t **by_id)
{
    size_t n = t->n_records;
    const struct msp_rrow *rr = t->records;
    msp_index_t seen = {0};
    uint32_t *id = malloc((s->n ? s->n : 1) * sizeof *id);
    msp_record_info_t *nr = realloc(f->records, (n + 1) * sizeof *nr);
    if (nr)
        f->records = nr;
    if (!id || !nr || msp_index_reserve(&seen, n)) {
        free(id);
        msp_index_free(&seen);
        return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /records", f->path);
    }
    memset(id, 0xff, (s->n ? s->n : 1) * sizeof *id);
    msp_err rc = MSP_OK;
    for (size_t i = 0; !rc && i < n; i++) {
        const char *name = msp_str_at(s, rr[i].name);
        if (!name || !*name) {
            rc = msp_fail(MSP_ERR_FORMAT, "file %s: /records row %zu has no name", f->path, i);
            break;
        }
        uint64_t h = msp_str_hash(name, 0);
        const void *ctx[2] = {f, name};
        if (id[rr[i].name] != UINT32_MAX ||
            msp_index_find(&seen, h, msp_rec_name_is, ctx) != SIZE_MAX) {
            rc = msp_fail(MSP_ERR_FORMAT, "file %s: /records: record %s is listed twice", f->path,
                          name);
            break;
        }
        msp_record_info_t *r = &f->records[f->n_records];
        memset(r, 0, sizeof *r);
        r->name = (char *)name; /* in f's strings */
        r->order = rr[i].order;
        id[rr[i].name] = (uint32_t)f->n_records;
        (void)msp_index_put(&seen, h, f->n_records++); /* room reserved */
    }
    msp_index_free(&seen);
    if (rc)
        free(id);
    else
        *by_id = id;
    return rc;
}

/* /records into f->records: the records /index gave (the first n_index, in
 * the table's order, put in name order here) keep theirs; then all in name
 * order, a name given twice refused. */
static msp_err msp_records_merge(msp_dump_file_t *f, const struct msp_strs *s,
                                 const struct msp_ctables *t)
{
    size_t n = t->n_records, n_index = f->n_records;
    const struct msp_rrow *rr = t->records;
    msp_err rc = MSP_OK;
    if (n_index > 1) /* for the binary search below */
        msp_sort(f->records, n_index, sizeof *f->records, msp_rec_name_cmp);
    msp_record_info_t *nr = realloc(f->records, (n_index + n + 1) * sizeof *nr);
    if (!nr)
        rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /records", f->path);
    else
        f->records = nr;
    for (size_t i = 0; !rc && i < n; i++) {
        const char *name = msp_str_at(s, rr[i].name);
        if (!name || !*name) {
            rc = msp_fail(MSP_ERR_FORMAT, "file %s: /records row %zu has no name", f->path, i);
            break;
        }
        if (n_index && bsearch(name, f->records, n_index, sizeof *nr, msp_rec_key_cmp))
            continue; /* its tensors with data are in /index */
        msp_record_info_t *r = &f->records[f->n_records++];
        memset(r, 0, sizeof *r);
        r->name = (char *)name; /* in f's strings */
        r->order = rr[i].order;
    }
    if (!rc && f->n_records > 1)
        msp_sort(f->records, f->n_records, sizeof *f->records, msp_rec_name_cmp);
    for (size_t i = 1; !rc && i < f->n_records; i++)
        if (strcmp(f->records[i - 1].name, f->records[i].name) == 0)
            rc = msp_fail(MSP_ERR_FORMAT, "file %s: /records: record %s is listed twice", f->path,
                          f->records[i].name);
    return rc;
}

/* ---- /stats ------------------------------------------------------------------ */

static uint32_t msp_nrow_u32(const unsigned char *rows, int width, size_t i, size_t col)
{
    uint32_t v;
    memcpy(&v, rows + i * msp_nrow_size(width) + col, 4);
    return v;
}

/* Row i of a table of narrow rows as a struct msp_srow (shape entries past
 * the width zero). */
static void msp_srow_at(const unsigned char *rows, int width, size_t i, struct msp_srow *r)
{
    const unsigned char *p = rows + i * msp_nrow_size(width);
    memset(r, 0, sizeof *r);
    r->record = msp_nrow_u32(rows, width, i, MSP_NROW_RECORD);
    r->role = msp_nrow_u32(rows, width, i, MSP_NROW_ROLE);
    r->dtype = msp_nrow_u32(rows, width, i, MSP_NROW_DTYPE);
    r->values = msp_nrow_u32(rows, width, i, MSP_NROW_VALUES);
    r->device = msp_nrow_u32(rows, width, i, MSP_NROW_DEVICE);
    r->producer = msp_nrow_u32(rows, width, i, MSP_NROW_PRODUCER);
    memcpy(&r->ndim, p + MSP_NROW_NDIM, 1);
    memcpy(&r->requires_grad, p + MSP_NROW_REQUIRES_GRAD, 1);
    memcpy(r->shape, p + MSP_NROW_SHAPE, 8 * (size_t)width);
}

/* Tensor t from /stats row r (of the table whose shape column has width
 * entries). */
static msp_err msp_tensor_from_srow(msp_dump_file_t *f, const struct msp_strs *s,
                                    const struct msp_srow *r, int width, const char *rec,
                                    const struct msp_vrow *vals, size_t n_vals,
                                    msp_tensor_info_t *t)
{
    char where[700];
    const char *role = msp_str_at(s, r->role), *dt = msp_str_at(s, r->dtype),
               *dev = msp_str_at(s, r->device), *prod = msp_str_at(s, r->producer);
    /* where, for an error only: formatting it for every row was a tenth of
     * a statistics compare's CPU (issue 42) */
#define SROW_WHERE()                                                                               \
    (snprintf(where, sizeof where, "file %s: /stats: record %s: %s", f->path, rec,                 \
              role ? role : "(no role)"),                                                          \
     where)
    if (!role || !*role || !dt || !dev || !prod)
        return msp_fail(MSP_ERR_FORMAT,
                        "%s: the row names a string /strings does not have, "
                        "or no role",
                        SROW_WHERE());
    if (r->values >= n_vals)
        return msp_fail(MSP_ERR_FORMAT, "%s: the row names a row /values does not have",
                        SROW_WHERE());
    const struct msp_vrow *v = &vals[r->values];
    if (r->ndim > width)
        return msp_fail(MSP_ERR_FORMAT, "%s: ndim %d, wider than the table's shape column (%d)",
                        SROW_WHERE(), (int)r->ndim, width);
    t->role = (char *)role; /* in f's strings */
    t->producer = *prod ? (char *)prod : NULL;
    t->dtype = msp_dtype_from_name(dt);
    msp_copy_str(t->dtype_name, sizeof t->dtype_name, t->dtype ? msp_dtype_name(t->dtype) : dt);
    t->ndim = r->ndim;
    memcpy(t->shape, r->shape, sizeof(int64_t) * (size_t)t->ndim);
    msp_err rc = msp_shape_size(t->shape, t->ndim, msp_dtype_size(t->dtype), &t->numel, &t->nbytes,
                                "");
    if (rc != MSP_OK) /* again, to name the row */
        rc = msp_shape_size(t->shape, t->ndim, msp_dtype_size(t->dtype), &t->numel, &t->nbytes,
                            SROW_WHERE());
#undef SROW_WHERE
    t->has_data = 0;
    t->has_stats = MSP_STATS_ALL;
    t->stats = (msp_stats_t){v->max,       v->min,       v->mean, v->norm,
                             v->nan_count, v->inf_count, v->crc32};
    t->offset = -1;
    msp_copy_str(t->device, sizeof t->device, dev);
    t->requires_grad = r->requires_grad != 0;
    return rc;
}

/* /stats's rows as tensors of their records: by_id[k] the record named by
 * string k (msp_records_own), or NULL: f->records in name order. */
static msp_err msp_stats_merge(msp_dump_file_t *f, const struct msp_strs *s,
                               const struct msp_ctables *t, const uint32_t *by_id)
{
    int width = t->width;
    size_t n = t->n_stats;
    if (n && (width < 1 || width > MSP_MAX_NDIM))
        return msp_fail(MSP_ERR_FORMAT,
                        "file %s: /stats has no shape column of 1 to %d int64 entries", f->path,
                        MSP_MAX_NDIM);
    msp_err rc = MSP_OK;
    msp_record_info_t *last = NULL; /* a record's rows come together: looked up once */
    struct msp_srow row;
    for (size_t i = 0; !rc && i < n; i++) {
        msp_srow_at(t->stats, width, i, &row);
        const char *rec = msp_str_at(s, row.record);
        int same = i && row.record == msp_nrow_u32(t->stats, width, i - 1, MSP_NROW_RECORD);
        msp_record_info_t *r =
            last && same ? last
            : !rec       ? NULL
            : by_id ? (by_id[row.record] < f->n_records ? &f->records[by_id[row.record]] : NULL)
                    : bsearch(rec, f->records, f->n_records, sizeof *r, msp_rec_key_cmp);
        last = r;
        if (!r) {
            rc = msp_fail(MSP_ERR_FORMAT,
                          "file %s: /stats row %zu names a record /records does not list", f->path,
                          i);
            break;
        }
        if (!same) {
            /* the record's run of rows, allocated at once (a realloc a row
             * grew and copied the heap row by row) */
            size_t run = 1;
            while (i + run < n &&
                   msp_nrow_u32(t->stats, width, i + run, MSP_NROW_RECORD) == row.record)
                run++;
            msp_tensor_info_t *nt = realloc(r->tensors, (r->n_tensors + run) * sizeof *nt);
            if (!nt) {
                rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", f->path);
                break;
            }
            r->tensors = nt;
        }
        msp_tensor_info_t *nt = r->tensors;
        memset(&nt[r->n_tensors], 0, sizeof *nt);
        rc = msp_tensor_from_srow(f, s, &row, width, r->name, t->values, t->n_values,
                                  &nt[r->n_tensors]);
        r->n_tensors++; /* counted even on failure so its strings are freed */
    }
    return rc;
}

static int msp_tensor_role_cmp(const void *a, const void *b)
{
    return msp_role_cmp(((const msp_tensor_info_t *)a)->role, ((const msp_tensor_info_t *)b)->role);
}

/* A role given twice in a record (the same tensor in /stats twice, or in
 * /stats and /index) is no description of one tensor. */
static msp_err msp_roles_once(msp_dump_file_t *f)
{
    for (size_t i = 0; i < f->n_records; i++) {
        msp_record_info_t *r = &f->records[i];
        if (r->n_tensors > 1)
            msp_sort(r->tensors, r->n_tensors, sizeof *r->tensors, msp_tensor_role_cmp);
        for (size_t k = 1; k < r->n_tensors; k++)
            if (strcmp(r->tensors[k - 1].role, r->tensors[k].role) == 0)
                return msp_fail(MSP_ERR_FORMAT,
                                "file %s: record %s: %s has two rows: the tables do not "
                                "describe the file",
                                f->path, r->name, r->tensors[k].role);
    }
    return MSP_OK;
}

msp_err msp_compact_build(msp_dump_file_t *f, struct msp_ctables *t, struct msp_attr_row **attrs,
                          size_t *n_attrs, struct msp_attr_row **defs, size_t *n_defs)
{
    struct msp_strs s;
    memset(&s, 0, sizeof s);
    uint32_t *by_id = NULL;
    msp_err rc = msp_strs_index(f, t, &s);
    if (!rc && !f->strings) {
        /* the catalogue's strings stay where they are: a copy of each role
         * and producer, freed one by one with the file, was a tenth of a
         * statistics compare's own thread (issue 42) */
        f->strings = t->strings;
        f->strings_len = t->n_strings;
        t->strings = NULL;
    }
    if (!rc) /* without /index (a statistics dump as the shim writes it): in file order */
        rc = f->n_records ? msp_records_merge(f, &s, t) : msp_records_own(f, &s, t, &by_id);
    if (!rc)
        rc = msp_stats_merge(f, &s, t, by_id);
    free(by_id);
    if (!rc)
        rc = msp_roles_once(f);
    if (!rc)
        rc = msp_crows_sorted(f, &s, "attrs", t->attrs, t->n_attrs, attrs, n_attrs);
    if (!rc)
        rc = msp_crows_sorted(f, &s, "defaults", t->defaults, t->n_defaults, defs, n_defs);
    free(s.off);
    return rc;
}
