/* The closing tables of a statistics dump in the compact layout
 * (fmt_h5stats.h, msprobe-dump(5) STATISTICS DUMPS): the writer's rows
 * without data become /stats rows, its records /records rows, its
 * attributes and defaults compact /attrs and /defaults, every string once
 * in /strings; rows with data (a statistics dump has none unless a caller
 * gives it some) still go to /index as in a tensor dump; each distinct set of
 * statistics is one /values row, which its tensors' /stats rows name (deflate
 * sees repeats only 32 KiB back, and a parameter's statistics come again in
 * the optimizer's record a whole step later).
 *
 * Size: a record of a few tensors is about 100 bytes, where /index rows of
 * variable-length strings cost some 500 a tensor: strings are numbers, the
 * tables are deflated, and the file format of HDF5 1.10 indexes a table of
 * one chunk without a B-tree. */
#include "fmt_h5stats.h"
#include "fmt_writer_disk.h"

#include <stdlib.h>
#include <string.h>

/* deflate's level for the tables: 9 doubled the writer thread's CPU on a
 * step of small records (the LSTM cell loop of bench/dump/side.sh: 58 -> 104
 * ms of process CPU a step, the step 42 -> 60 ms) for files 1 % smaller than
 * level 6 gives (bench/dump/stats_size.py). */
#define MSP_COMPACT_DEFLATE 6

/* The file's distinct strings, NUL-ended, in the order first met. */
struct msp_strtab {
    char *blob;
    size_t len, cap;
    size_t *off; /* where string k starts */
    size_t n, cap_off;
    msp_index_t ix;
};

struct msp_str_key {
    const struct msp_strtab *t;
    const char *s;
};

static int msp_str_is(const void *ctx, size_t i)
{
    const struct msp_str_key *k = ctx;
    return strcmp(k->t->blob + k->t->off[i], k->s) == 0;
}

/* The number of s in t, added when new; -1 out of memory. */
static int64_t msp_str_id(struct msp_strtab *t, const char *s)
{
    if (!s)
        s = "";
    struct msp_str_key key = {t, s};
    uint64_t h = msp_str_hash(s, 0);
    size_t at = t->n ? msp_index_find(&t->ix, h, msp_str_is, &key) : SIZE_MAX;
    if (at != SIZE_MAX)
        return (int64_t)at;
    size_t n = strlen(s) + 1;
    if (t->n >= UINT32_MAX)
        return -1;
    while (t->len + n > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 4096;
        char *b = realloc(t->blob, cap);
        if (!b)
            return -1;
        t->blob = b;
        t->cap = cap;
    }
    size_t *o = msp_grow(t->off, &t->cap_off, t->n, sizeof *o, 256);
    if (!o)
        return -1;
    t->off = o;
    if (msp_index_put(&t->ix, h, t->n))
        return -1;
    memcpy(t->blob + t->len, s, n);
    t->off[t->n] = t->len;
    t->len += n;
    return (int64_t)t->n++;
}

static void msp_strtab_free(struct msp_strtab *t)
{
    free(t->blob);
    free(t->off);
    msp_index_free(&t->ix);
}

/* Writes table name: n rows of row_size bytes (mt in memory, ft in the
 * file), chunked and deflated. Not shuffled: a tensor that is one record's
 * output and the next one's input has the same statistics in both rows,
 * which deflate finds whole in unshuffled rows (a quarter smaller on a
 * transformer's dump than shuffled). Takes ft and mt. */
static msp_err msp_compact_table(msp_writer_t *w, const char *name, hid_t ft, hid_t mt,
                                 const void *rows, size_t n_rows, size_t row_size)
{
    return msp_writer_table(w, name, ft, mt, rows, n_rows, row_size, MSP_COMPACT_DEFLATE);
}

/* rows[0..n) as compact (record, key, value) rows into table name. */
static msp_err msp_compact_crows(msp_writer_t *w, struct msp_strtab *st, const char *name,
                                 const struct msp_attr_row *rows, size_t n)
{
    struct msp_crow *c = calloc(n ? n : 1, sizeof *c);
    if (!c)
        return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /%s", w->path, name);
    for (size_t i = 0; i < n; i++) {
        int64_t r = msp_str_id(st, rows[i].record), k = msp_str_id(st, rows[i].key),
                v = msp_str_id(st, rows[i].value);
        if (r < 0 || k < 0 || v < 0) {
            free(c);
            return msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for /%s", w->path, name);
        }
        c[i] = (struct msp_crow){(uint32_t)r, (uint32_t)k, (uint32_t)v};
    }
    msp_err rc = msp_compact_table(w, name, msp_crow_type(1), msp_crow_type(0), c, n, sizeof *c);
    free(c);
    return rc;
}

/* The file's distinct statistics (/values), in the order first met. */
struct msp_valtab {
    struct msp_vrow *v;
    size_t n, cap;
    msp_index_t ix;
};

static int msp_vrow_same(const struct msp_vrow *a, const struct msp_vrow *b)
{
    /* bit for bit: NaNs of one pattern are one row, 0.0 and -0.0 two */
    return memcmp(&a->max, &b->max, sizeof a->max) == 0 &&
           memcmp(&a->min, &b->min, sizeof a->min) == 0 &&
           memcmp(&a->mean, &b->mean, sizeof a->mean) == 0 &&
           memcmp(&a->norm, &b->norm, sizeof a->norm) == 0 && a->nan_count == b->nan_count &&
           a->inf_count == b->inf_count && a->crc32 == b->crc32;
}

struct msp_val_key {
    const struct msp_valtab *t;
    const struct msp_vrow *v;
};

static int msp_val_is(const void *ctx, size_t i)
{
    const struct msp_val_key *k = ctx;
    return msp_vrow_same(&k->t->v[i], k->v);
}

/* The number of v's row in t, added when new; -1 out of memory. */
static int64_t msp_val_id(struct msp_valtab *t, const struct msp_vrow *v)
{
    uint64_t h = 0, bits[4];
    memcpy(bits, &v->max, sizeof bits); /* max, min, mean, norm: adjacent doubles */
    for (int i = 0; i < 4; i++)
        h = msp_mix64(h ^ bits[i]);
    h = msp_mix64(h ^ (uint64_t)v->nan_count ^ ((uint64_t)v->inf_count << 32) ^ v->crc32);
    struct msp_val_key key = {t, v};
    size_t at = t->n ? msp_index_find(&t->ix, h, msp_val_is, &key) : SIZE_MAX;
    if (at != SIZE_MAX)
        return (int64_t)at;
    struct msp_vrow *g = t->n < UINT32_MAX ? msp_grow(t->v, &t->cap, t->n, sizeof *g, 256) : NULL;
    if (!g)
        return -1;
    t->v = g;
    if (msp_index_put(&t->ix, h, t->n))
        return -1;
    t->v[t->n] = *v;
    return (int64_t)t->n++;
}

/* One /stats row from writer row wr; -1 out of memory. */
static int msp_compact_srow(struct msp_strtab *st, struct msp_valtab *vt, const struct msp_wrow *wr,
                            uint32_t record, struct msp_srow *s)
{
    const struct msp_index_row *r = &wr->r;
    struct msp_vrow v;
    memset(&v, 0, sizeof v);
    v.max = r->max;
    v.min = r->min;
    v.mean = r->mean;
    v.norm = r->norm;
    v.nan_count = r->nan_count;
    v.inf_count = r->inf_count;
    v.crc32 = r->crc32;
    int64_t role = msp_str_id(st, r->role), dt = msp_str_id(st, r->dtype),
            dev = msp_str_id(st, r->device), prod = msp_str_id(st, wr->producer),
            val = msp_val_id(vt, &v);
    if (role < 0 || dt < 0 || dev < 0 || prod < 0 || val < 0)
        return -1;
    memset(s, 0, sizeof *s);
    s->record = record;
    s->role = (uint32_t)role;
    s->dtype = (uint32_t)dt;
    s->ndim = (uint8_t)r->ndim;
    for (int k = 0; k < r->ndim; k++)
        s->shape[k] = ((const int64_t *)r->shape.p)[k];
    s->values = (uint32_t)val;
    s->device = (uint32_t)dev;
    s->requires_grad = r->requires_grad;
    s->producer = (uint32_t)prod;
    return 0;
}

/* The rows into /records, /values, /stats and (rows with data) /index. */
static msp_err msp_compact_rows(msp_writer_t *w, struct msp_strtab *st)
{
    msp_err rc = MSP_OK;
    struct msp_srow *s = calloc(w->n_rows ? w->n_rows : 1, sizeof *s);
    struct msp_rrow *rec = calloc(w->n_rows ? w->n_rows : 1, sizeof *rec);
    struct msp_wrow *data = calloc(w->n_rows ? w->n_rows : 1, sizeof *data);
    size_t n_s = 0, n_rec = 0, n_data = 0;
    int width = 1;
    struct msp_valtab vt;
    memset(&vt, 0, sizeof vt);
    if (!s || !rec || !data)
        goto nomem;
    for (size_t i = 0; i < w->n_rows; i++) {
        const struct msp_wrow *wr = &w->rows[i];
        /* a record's rows are consecutive: its first one opens its row */
        if (!i || strcmp(w->rows[i - 1].r.record, wr->r.record) != 0) {
            int64_t id = msp_str_id(st, wr->r.record);
            if (id < 0)
                goto nomem;
            rec[n_rec++] = (struct msp_rrow){(uint32_t)id, wr->r.order};
        }
        if (wr->r.has_data)
            data[n_data++] = *wr; /* shallow: the strings stay the writer's */
        else if (wr->r.role[0]) {
            if (msp_compact_srow(st, &vt, wr, rec[n_rec - 1].name, &s[n_s++]))
                goto nomem;
            if (wr->r.ndim > width)
                width = wr->r.ndim;
        }
    }
    rc = msp_compact_table(w, "records", msp_rrow_type(1), msp_rrow_type(0), rec, n_rec,
                           sizeof *rec);
    if (!rc)
        rc = msp_compact_table(w, "values", msp_vrow_type(1), msp_vrow_type(0), vt.v, vt.n,
                               sizeof *vt.v);
    if (!rc)
        rc = msp_compact_table(w, "stats", msp_srow_type(1, width), msp_srow_type(0, width), s, n_s,
                               sizeof *s);
    if (!rc && n_data)
        rc = msp_writer_table(w, "index", msp_wrow_type(1), msp_wrow_type(0), data, n_data,
                              sizeof *data, 0);
    goto cleanup;
nomem:
    rc = msp_fail(MSP_ERR_NOMEM, "file %s: out of memory for the statistics tables", w->path);
cleanup:
    free(s);
    free(rec);
    free(data);
    free(vt.v);
    msp_index_free(&vt.ix);
    return rc;
}

msp_err msp_writer_compact_tables(msp_writer_t *w)
{
    struct msp_strtab st;
    memset(&st, 0, sizeof st);
    msp_err rc = msp_str_id(&st, "") == 0
                     ? MSP_OK
                     : msp_fail(MSP_ERR_NOMEM, "file %s: out of memory", w->path);
    if (!rc)
        rc = msp_compact_rows(w, &st);
    if (!rc)
        rc = msp_compact_crows(w, &st, "attrs", w->attrs, w->n_attrs);
    if (!rc && w->n_defs)
        rc = msp_compact_crows(w, &st, "defaults", w->defs, w->n_defs);
    if (!rc) /* last: every table above added its strings */
        rc = msp_compact_table(w, "strings", H5Tcopy(H5T_STD_U8LE), H5Tcopy(H5T_NATIVE_UINT8),
                               st.blob, st.len, 1);
    msp_strtab_free(&st);
    return rc;
}

msp_err msp_compact_attr_str(hid_t obj, const char *key, const char *value, const char *where)
{
    msp_err rc = MSP_OK;
    size_t n = strlen(value);
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR), a = -1;
    if (t < 0 || s < 0 || H5Tset_size(t, n ? n : 1) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0 ||
        H5Tset_strpad(t, H5T_STR_NULLPAD) < 0 ||
        (a = H5Acreate2(obj, key, t, s, H5P_DEFAULT, H5P_DEFAULT)) < 0 || H5Awrite(a, t, value) < 0)
        rc = msp_h5_fail(MSP_ERR_HDF5, "%s: cannot write attribute '%s'", where, key);
    if (a >= 0)
        H5Aclose(a);
    if (s >= 0)
        H5Sclose(s);
    if (t >= 0)
        H5Tclose(t);
    return rc;
}
