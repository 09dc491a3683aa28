/* The reader helper's wire codec (src/format/fmt_contain_get.c and
 * fmt_contain_put.c): a catalogue message written here by hand, field by
 * field in the order fmt_contain_put.c documents (little-endian integers,
 * str = u64 length + 1, then the bytes; 0 for NULL), is read back with
 * every value as written and written again byte for byte; an error answer
 * likewise. Every truncation of the message, and every lie in it (a count
 * past the end, a string longer than the buffer, a NULL where a name must
 * be, an ndim or dtype out of range, /defaults out of order), is refused
 * with an error naming the file, never a crash. */
#include "fmt_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "unit_check.h"

typedef struct enc {
    unsigned char *p;
    size_t n, cap;
} enc_t;

static void put(enc_t *e, const void *b, size_t n)
{
    if (e->n + n > e->cap) {
        e->cap = (e->n + n) * 2 + 64;
        e->p = realloc(e->p, e->cap);
        if (!e->p)
            abort();
    }
    memcpy(e->p + e->n, b, n);
    e->n += n;
}

static void put_le(enc_t *e, uint64_t v, int bytes)
{
    unsigned char b[8];
    for (int i = 0; i < bytes; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    put(e, b, (size_t)bytes);
}

static void put_i64(enc_t *e, int64_t v)
{
    put_le(e, (uint64_t)v, 8);
}

static void put_f64(enc_t *e, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    put_le(e, u, 8);
}

/* A string as msprobe's wire codec writes it: u64 length + 1 (0: NULL). */
static void put_str(enc_t *e, const char *s)
{
    put_le(e, s ? strlen(s) + 1 : 0, 8);
    if (s)
        put(e, s, strlen(s));
}

/* The lies a message may tell (one at a time). */
enum lie {
    TRUTH,
    MAGIC,          /* "MSPX" */
    VERSION,        /* 4 */
    NREC_HUGE,      /* 2^40 records */
    NREC_NEGATIVE,  /* -1 */
    NREC_ONE_MORE,  /* 3 where 2 follow */
    NTEN_HUGE,      /* 10^12 tensors */
    NATTR_HUGE,     /* 2^62 attributes */
    NAME_LONG,      /* a record name of 2^31 bytes */
    NAME_NULL,      /* a record without a name */
    ROLE_NULL,      /* a tensor without a role */
    NDIM_HIGH,      /* 33 dimensions */
    NDIM_NEGATIVE,  /* -1 */
    DTYPE_HIGH,     /* MSP_DTYPE_COUNT_ */
    DTYPE_NEGATIVE, /* -1 */
    DTYPE_WRAPS,    /* 2^32 + 1, which a 32-bit enum would read as 1 */
    NDEF_HUGE,      /* 2^40 /defaults rows */
    DEF_UNSORTED,   /* /defaults out of record order */
    DEF_VALUE_NULL, /* a /defaults row without a value */
    TRAILING,       /* one byte after the end */
    N_LIES
};

/* The catalogue of a dump of step 4, rank 1 of 2: a linear record with two
 * attributes and two tensors, an optimizer record with none; three rows of
 * /defaults. */
static void catalogue(enc_t *e, enum lie lie)
{
    put(e, lie == MAGIC ? "MSPX" : "MSPC", 4);
    put_le(e, lie == VERSION ? 4 : 3, 4);
    put_str(e, "pytorch");
    put_str(e, "1.13.1");
    put_str(e, "tensor");
    put_str(e, "api");
    put_i64(e, 4);
    put_i64(e, 1);
    put_i64(e, 2);
    put_i64(e, 1);
    put_i64(e, lie == NREC_HUGE       ? (int64_t)1 << 40
               : lie == NREC_NEGATIVE ? -1
               : lie == NREC_ONE_MORE ? 3
                                      : 2);
    /* record 0 */
    if (lie == NAME_LONG)
        put_le(e, 0x80000000, 8), put(e, "Functional.linear.0.forward", 27);
    else
        put_str(e, lie == NAME_NULL ? NULL : "Functional.linear.0.forward");
    put_i64(e, 3);
    put_i64(e, lie == NTEN_HUGE ? 1000000000000 : 2);
    put_i64(e, lie == NATTR_HUGE ? (int64_t)1 << 62 : 2);
    put_str(e, "input.2");
    put_str(e, "None");
    put_str(e, "stack");
    put_str(e, "File \"train.py\", line 3, in forward");
    /* input.0: float32 [2, 3] */
    put_str(e, lie == ROLE_NULL ? NULL : "input.0");
    put_i64(e, lie == DTYPE_HIGH       ? MSP_DTYPE_COUNT_
               : lie == DTYPE_NEGATIVE ? -1
               : lie == DTYPE_WRAPS    ? ((int64_t)1 << 32) + MSP_DTYPE_FLOAT32
                                       : MSP_DTYPE_FLOAT32);
    put_str(e, "torch.float32");
    put_i64(e, lie == NDIM_HIGH ? MSP_MAX_NDIM + 1 : lie == NDIM_NEGATIVE ? -1 : 2);
    put_i64(e, 2);
    put_i64(e, 3);
    put_i64(e, 6);   /* numel */
    put_i64(e, 1);   /* has_data */
    put_i64(e, 1);   /* has_stats */
    put_f64(e, 1.5); /* max */
    put_f64(e, -2.25);
    put_f64(e, 0.125);
    put_f64(e, 3.0);
    put_i64(e, 0); /* nan_count */
    put_i64(e, 1); /* inf_count */
    put_i64(e, 0xDEADBEEF);
    put_i64(e, 4096); /* offset */
    put_i64(e, 24);   /* nbytes */
    put_str(e, "cpu");
    put_i64(e, 1);
    put_str(e, "Torch.randn.0.forward/output.0");
    /* output.0: a 0-d bfloat16 of statistics only */
    put_str(e, "output.0");
    put_i64(e, MSP_DTYPE_BFLOAT16);
    put_str(e, "torch.bfloat16");
    put_i64(e, 0);
    put_i64(e, 1);
    put_i64(e, 0);
    put_i64(e, 1);
    put_f64(e, NAN);
    put_f64(e, NAN);
    put_f64(e, NAN);
    put_f64(e, INFINITY);
    put_i64(e, 1);
    put_i64(e, 0);
    put_i64(e, 0);
    put_i64(e, -1);
    put_i64(e, 2);
    put_str(e, "");
    put_i64(e, 0);
    put_str(e, NULL);
    /* record 1 */
    put_str(e, "Optimizer.Adam.0.step");
    put_i64(e, 7);
    put_i64(e, 0);
    put_i64(e, 0);
    /* /defaults, sorted by record then key */
    put_i64(e, lie == NDEF_HUGE ? (int64_t)1 << 40 : 3);
    put_str(e, lie == DEF_UNSORTED ? "Functional.layer_norm" : "Functional.gelu");
    put_str(e, "#1");
    put_str(e, "approximate");
    put_str(e, "Functional.gelu");
    put_str(e, "approximate");
    put_str(e, lie == DEF_VALUE_NULL ? NULL : "'none'");
    put_str(e, "Functional.layer_norm");
    put_str(e, "eps");
    put_str(e, "1e-05");
    if (lie == TRAILING)
        put(e, "", 1);
}

static void check_tensors(const msp_record_info_t *r)
{
    CHECK_INT(r->n_tensors, 2);
    if (r->n_tensors != 2)
        return;
    const msp_tensor_info_t *t = &r->tensors[0], *u = &r->tensors[1];
    CHECK_STR(t->role, "input.0");
    CHECK_INT(t->dtype, MSP_DTYPE_FLOAT32);
    CHECK_STR(t->dtype_name, "torch.float32");
    CHECK_INT(t->ndim, 2);
    CHECK_INT(t->shape[0], 2);
    CHECK_INT(t->shape[1], 3);
    CHECK_INT(t->numel, 6);
    CHECK_INT(t->has_data, 1);
    CHECK_INT(t->has_stats, 1);
    CHECK_NUM(t->stats.max, 1.5);
    CHECK_NUM(t->stats.min, -2.25);
    CHECK_NUM(t->stats.mean, 0.125);
    CHECK_NUM(t->stats.norm, 3.0);
    CHECK_INT(t->stats.nan_count, 0);
    CHECK_INT(t->stats.inf_count, 1);
    CHECK_INT(t->stats.crc32, 0xDEADBEEF);
    CHECK_INT(t->offset, 4096);
    CHECK_INT(t->nbytes, 24);
    CHECK_STR(t->device, "cpu");
    CHECK_INT(t->requires_grad, 1);
    CHECK_STR(t->producer, "Torch.randn.0.forward/output.0");
    CHECK_STR(u->role, "output.0");
    CHECK_INT(u->dtype, MSP_DTYPE_BFLOAT16);
    CHECK_INT(u->ndim, 0);
    CHECK_INT(u->has_data, 0);
    CHECK_NUM(u->stats.max, NAN);
    CHECK_NUM(u->stats.norm, INFINITY);
    CHECK_INT(u->stats.nan_count, 1);
    CHECK_INT(u->offset, -1);
    CHECK_STR(u->device, "");
    CHECK_INT(u->requires_grad, 0);
    CHECK_STR(u->producer, NULL);
}

/* The bytes msp_wire_put_file writes for f. */
static unsigned char *put_file(msp_dump_file_t *f, size_t *n)
{
    char *buf = NULL;
    FILE *o = open_memstream(&buf, n);
    CHECK(o != NULL);
    if (!o)
        return NULL;
    CHECK_INT(msp_wire_put_file(o, f), 0);
    fclose(o);
    return (unsigned char *)buf;
}

static void test_round_trip(void)
{
    enc_t e = {0};
    catalogue(&e, TRUTH);
    msp_dump_file_t *f = NULL;
    CHECK_INT(msp_dump_from_wire("x.h5", e.p, e.n, &f), MSP_OK);
    if (!f) {
        free(e.p);
        return;
    }
    CHECK_STR(f->path, "x.h5");
    CHECK_STR(f->framework, "pytorch");
    CHECK_STR(f->framework_version, "1.13.1");
    CHECK_STR(f->task, "tensor");
    CHECK_STR(f->dump_mode, "api");
    CHECK_INT(f->step, 4);
    CHECK_INT(f->rank, 1);
    CHECK_INT(f->world_size, 2);
    CHECK_INT(f->has_index, 1);
    CHECK_INT(f->n_records, 2);
    if (f->n_records == 2) {
        CHECK_STR(f->records[0].name, "Functional.linear.0.forward");
        CHECK_INT(f->records[0].order, 3);
        check_tensors(&f->records[0]);
        CHECK_STR(f->records[1].name, "Optimizer.Adam.0.step");
        CHECK_INT(f->records[1].order, 7);
        CHECK_INT(f->records[1].n_tensors, 0);
        char **k = NULL, **v = NULL;
        size_t n = 0;
        CHECK_INT(msp_dump_record_attrs(f, &f->records[0], &k, &v, &n), MSP_OK);
        CHECK_INT(n, 2);
        if (n == 2) {
            CHECK_STR(k[0], "input.2");
            CHECK_STR(v[0], "None");
            CHECK_STR(k[1], "stack");
            CHECK_STR(v[1], "File \"train.py\", line 3, in forward");
        }
        msp_free_strings(k, n);
        msp_free_strings(v, n);
        CHECK_INT(msp_dump_record_attrs(f, &f->records[1], &k, &v, &n), MSP_OK);
        CHECK_INT(n, 0);
        msp_free_strings(k, n);
        msp_free_strings(v, n);
    }
    char **k = NULL, **v = NULL;
    size_t n = 0;
    CHECK_INT(msp_dump_api_defaults(f, "Functional.gelu", &k, &v, &n), MSP_OK);
    CHECK_INT(n, 2);
    if (n == 2) {
        CHECK_STR(k[0], "#1");
        CHECK_STR(v[0], "approximate");
        CHECK_STR(k[1], "approximate");
        CHECK_STR(v[1], "'none'");
    }
    msp_free_strings(k, n);
    msp_free_strings(v, n);
    CHECK_INT(msp_dump_api_defaults(f, "Functional.relu", &k, &v, &n), MSP_OK);
    CHECK_INT(n, 0);
    msp_free_strings(k, n);
    msp_free_strings(v, n);
    /* written again: the same bytes */
    size_t m = 0;
    unsigned char *again = put_file(f, &m);
    CHECK_INT(m, e.n);
    CHECK(again && m == e.n && memcmp(again, e.p, m) == 0);
    free(again);
    msp_dump_close(f);
    free(e.p);
}

static void test_error_answer(void)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *o = open_memstream(&buf, &n);
    CHECK(o != NULL);
    if (!o)
        return;
    CHECK_INT(msp_wire_put_error(o, MSP_ERR_FORMAT, "file x.h5: not HDF5"), 0);
    fclose(o);
    enc_t e = {0};
    put(&e, "MSPE", 4);
    put_i64(&e, MSP_ERR_FORMAT);
    put_str(&e, "file x.h5: not HDF5");
    CHECK(n == e.n && memcmp(buf, e.p, n) == 0);
    int64_t code = 0;
    char *detail = NULL;
    CHECK_INT(msp_wire_get_error((unsigned char *)buf + 4, n - 4, &code, &detail), 0);
    CHECK_INT(code, MSP_ERR_FORMAT);
    CHECK_STR(detail, "file x.h5: not HDF5");
    free(detail);
    /* cut anywhere: refused */
    for (size_t cut = 4; cut < n; cut++) {
        detail = NULL;
        int bad = msp_wire_get_error((unsigned char *)buf + 4, cut - 4, &code, &detail);
        CHECK_INT(bad, -1);
        free(detail);
    }
    free(buf);
    /* a NULL detail */
    e.n = 0;
    put_i64(&e, MSP_ERR_IO);
    put_str(&e, NULL);
    detail = (char *)"unset";
    CHECK_INT(msp_wire_get_error(e.p, e.n, &code, &detail), 0);
    CHECK_INT(code, MSP_ERR_IO);
    CHECK_STR(detail, NULL);
    free(e.p);
}

/* msp_dump_from_wire of buf[0..n) is refused with an error naming x.h5. */
static void refused(const unsigned char *buf, size_t n, const char *what)
{
    msp_dump_file_t *f = NULL;
    msp_clear_error();
    msp_err rc = msp_dump_from_wire("x.h5", buf, n, &f);
    if (rc == MSP_OK || f)
        fprintf(stderr, "accepted: %s\n", what);
    CHECK(rc != MSP_OK);
    CHECK(f == NULL);
    CHECK_HAS(msp_last_error(), "x.h5");
    if (f)
        msp_dump_close(f);
}

static void test_refusals(void)
{
    enc_t e = {0};
    catalogue(&e, TRUTH);
    /* every truncation: a fresh copy of just that many bytes, so that a read
     * past its end is one a memory checker sees */
    for (size_t cut = 0; cut < e.n; cut++) {
        unsigned char *part = malloc(cut ? cut : 1);
        CHECK(part != NULL);
        if (!part)
            break;
        memcpy(part, e.p, cut);
        char what[64];
        snprintf(what, sizeof what, "the first %zu of %zu bytes", cut, e.n);
        refused(part, cut, what);
        free(part);
    }
    free(e.p);
    static const char *const names[N_LIES] = {
        "truth",        "magic",         "version",           "records 2^40", "records -1",
        "records 3",    "tensors 1e12",  "attributes 2^62",   "name 2^31",    "name NULL",
        "role NULL",    "ndim 33",       "ndim -1",           "dtype count",  "dtype -1",
        "dtype 2^32+1", "defaults 2^40", "defaults unsorted", "default NULL", "trailing byte",
    };
    for (int lie = TRUTH + 1; lie < N_LIES; lie++) {
        enc_t l = {0};
        catalogue(&l, (enum lie)lie);
        refused(l.p, l.n, names[lie]);
        if (lie == VERSION)
            CHECK_HAS(msp_last_error(), "version 4, not 3");
        free(l.p);
    }
}

/* Small tensors, as the helper sends them for 0-d tensors with short
 * names: role "a", dtype_name "torch.bool", ndim 0, device "cpu", no
 * producer take 8 + 1 (role) + 8 (dtype) + 8 + 10 (dtype_name) + 8 (ndim)
 * + 3 x 8 (numel, has_data, has_stats) + 4 x 8 (max, min, mean, norm)
 * + 5 x 8 (nan, inf, crc32, offset, nbytes) + 8 + 3 (device) + 8
 * (requires_grad) + 8 (producer) = 166 bytes each (152 with empty
 * strings). Five of them in the last record and no /defaults: a
 * well-formed message, read as it was written. */
static void test_smallest_tensors(void)
{
    enc_t e = {0};
    put(&e, "MSPC", 4);
    put_le(&e, 3, 4);
    for (int i = 0; i < 4; i++)
        put_str(&e, "");
    for (int i = 0; i < 4; i++)
        put_i64(&e, 0);
    put_i64(&e, 1);
    put_str(&e, "Torch.where.0.forward");
    put_i64(&e, 0);
    put_i64(&e, 5);
    put_i64(&e, 0);
    size_t start = e.n;
    for (int t = 0; t < 5; t++) {
        put_str(&e, "a");
        put_i64(&e, MSP_DTYPE_BOOL);
        put_str(&e, "torch.bool");
        put_i64(&e, 0); /* ndim */
        for (int k = 0; k < 3; k++)
            put_i64(&e, 1); /* numel, has_data, has_stats */
        for (int k = 0; k < 4; k++)
            put_f64(&e, 1.0);
        for (int k = 0; k < 5; k++)
            put_i64(&e, 0); /* nan, inf, crc32, offset, nbytes */
        put_str(&e, "cpu");
        put_i64(&e, 0);
        put_str(&e, NULL);
    }
    CHECK_INT(e.n - start, 5 * 166);
    put_i64(&e, 0); /* no /defaults */
    msp_dump_file_t *f = NULL;
    msp_err rc = msp_dump_from_wire("x.h5", e.p, e.n, &f);
    if (rc)
        fprintf(stderr, "refused: %s\n", msp_last_error());
    CHECK_INT(rc, MSP_OK);
    if (f) {
        CHECK_INT(f->n_records, 1);
        CHECK_INT(f->records[0].n_tensors, 5);
        msp_dump_close(f);
    }
    free(e.p);
}

int main(void)
{
    test_round_trip();
    test_error_answer();
    test_refusals();
    test_smallest_tensors();
    return unit_done("reader wire codec");
}
