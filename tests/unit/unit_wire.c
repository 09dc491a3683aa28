/* The reader helper's wire codec (src/format/fmt_contain_get.c and
 * fmt_contain_put.c): a catalogue message written here by hand, field by
 * field in the order fmt_contain_put.c documents (little-endian integers,
 * str = u64 length + 1, then the bytes; 0 for NULL), is read back with
 * every value as written and written again byte for byte; an error answer
 * likewise. Every truncation of the message, and every lie in it (a count
 * past the end, a string longer than the buffer, a NULL where a name must
 * be, an ndim or dtype out of range, /defaults out of order), is refused
 * with an error naming the file, never a crash. A compact statistics file's
 * tables ("MSPT") are read into the catalogue msprobe builds of them, and
 * their lies refused as well. */
#include "fmt_compact.h"
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
    VERSION,        /* MSP_WIRE_VERSION + 1 */
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
    put_le(e, lie == VERSION ? MSP_WIRE_VERSION + 1 : MSP_WIRE_VERSION, 4);
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

/* Every truncation of message e (of what) refused: a fresh copy of just
 * that many bytes, so that a read past its end is one a memory checker
 * sees. */
static void refuse_truncations(const enc_t *e, const char *of)
{
    for (size_t cut = 0; cut < e->n; cut++) {
        unsigned char *part = malloc(cut ? cut : 1);
        CHECK(part != NULL);
        if (!part)
            break;
        memcpy(part, e->p, cut);
        char what[96];
        snprintf(what, sizeof what, "the first %zu of %zu bytes of the %s", cut, e->n, of);
        refused(part, cut, what);
        free(part);
    }
}

static void test_refusals(void)
{
    enc_t e = {0};
    catalogue(&e, TRUTH);
    refuse_truncations(&e, "catalogue");
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
        if (lie == VERSION) {
            char want[64];
            snprintf(want, sizeof want, "version %u, not %u", MSP_WIRE_VERSION + 1,
                     MSP_WIRE_VERSION);
            CHECK_HAS(msp_last_error(), want);
        }
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
    put_le(&e, MSP_WIRE_VERSION, 4);
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

/* ---- a compact statistics file's tables ("MSPT") ---------------------------- */

enum tlie {
    T_TRUTH,
    T_WIDTH_0,    /* a shape column of no entries */
    T_WIDTH_33,   /* wider than MSP_MAX_NDIM */
    T_STRS_HUGE,  /* /strings of 2^40 bytes */
    T_STATS_HUGE, /* 2^40 /stats rows */
    T_ROLE_OUT,   /* a role string number past /strings */
    T_VALUES_OUT, /* a /values row number past the table */
    T_NDIM_WIDE,  /* ndim 3 in a shape column of 2 */
    T_NO_NUL,     /* /strings without its last NUL */
    T_RECORD_OUT, /* an attribute's record past /strings */
    T_TRAILING,   /* one byte after the end */
    T_N_LIES
};

/* The strings of the message's /strings, in order (string number = index). */
static const char *const T_STRS[] = {"",
                                     "Functional.linear.0.forward",
                                     "input.0",
                                     "output.0",
                                     "torch.float32",
                                     "cpu",
                                     "stack",
                                     "linear.py:3",
                                     "Functional.linear",
                                     "#0",
                                     "input"};

static void put_u32(enc_t *e, uint32_t v)
{
    put_le(e, v, 4);
}

/* A narrow /stats row (fmt_compact.h) of a shape column of 2 entries. */
static void put_nrow(enc_t *e, uint32_t rec, uint32_t role, uint32_t values, uint8_t ndim,
                     int64_t d0, int64_t d1)
{
    put_u32(e, rec);
    put_u32(e, role);
    put_u32(e, 4); /* torch.float32 */
    put_u32(e, values);
    put_u32(e, 5); /* cpu */
    put_u32(e, 0); /* no producer */
    unsigned char b[8] = {ndim, 1 /* requires_grad */};
    put(e, b, sizeof b);
    put_i64(e, d0);
    put_i64(e, d1);
}

/* The tables of a statistics dump of step 2, rank 0 of 1: one linear record
 * (order 7) with an input of [3, 4] and an output of [5], their statistics
 * rows, one attribute and one /defaults row. */
static void tables(enc_t *e, enum tlie lie)
{
    put(e, "MSPT", 4);
    put_le(e, MSP_WIRE_VERSION, 4);
    put_str(e, "pytorch");
    put_str(e, "1.13.1");
    put_str(e, "statistics");
    put_str(e, "api");
    put_i64(e, 2);
    put_i64(e, 0);
    put_i64(e, 1);
    put_i64(e, lie == T_WIDTH_0 ? 0 : lie == T_WIDTH_33 ? 33 : 2);
    enc_t strs = {0};
    for (size_t i = 0; i < sizeof T_STRS / sizeof *T_STRS; i++)
        put(&strs, T_STRS[i], strlen(T_STRS[i]) + 1);
    size_t ns = lie == T_NO_NUL ? strs.n - 1 : strs.n;
    put_i64(e, lie == T_STRS_HUGE ? (int64_t)1 << 40 : (int64_t)ns);
    put(e, strs.p, ns);
    free(strs.p);
    struct msp_rrow rr;
    memset(&rr, 0, sizeof rr);
    rr.name = 1;
    rr.order = 7;
    put_i64(e, 1);
    put(e, &rr, sizeof rr);
    struct msp_vrow v[2];
    memset(v, 0, sizeof v);
    v[0] = (struct msp_vrow){2.0, -1.0, 0.5, 3.0, 0, 0, 0x1234};
    v[1] = (struct msp_vrow){4.0, 0.0, 1.5, 6.0, 1, 2, 0};
    put_i64(e, 2);
    put(e, v, sizeof v);
    put_i64(e, lie == T_STATS_HUGE ? (int64_t)1 << 40 : 2);
    put_nrow(e, 1, lie == T_ROLE_OUT ? 99 : 3, lie == T_VALUES_OUT ? 2 : 1, 1, 5, 0);
    put_nrow(e, 1, 2, 0, lie == T_NDIM_WIDE ? 3 : 2, 3, 4);
    struct msp_crow a = {lie == T_RECORD_OUT ? 50 : 1, 6, 7}, d = {8, 9, 10};
    put_i64(e, 1);
    put(e, &a, sizeof a);
    put_i64(e, 1);
    put(e, &d, sizeof d);
    if (lie == T_TRAILING)
        put(e, "x", 1);
}

static void test_tables(void)
{
    enc_t e = {0};
    tables(&e, T_TRUTH);
    msp_dump_file_t *f = NULL;
    msp_err rc = msp_dump_from_wire("x.h5", e.p, e.n, &f);
    if (rc)
        fprintf(stderr, "refused: %s\n", msp_last_error());
    CHECK_INT(rc, MSP_OK);
    if (f) {
        CHECK_STR(f->task, "statistics");
        CHECK_INT(f->step, 2);
        CHECK_INT(f->world_size, 1);
        CHECK_INT(f->has_index, 1);
        CHECK_INT(f->n_records, 1);
    }
    if (f && f->n_records == 1) {
        const msp_record_info_t *r = &f->records[0];
        CHECK_STR(r->name, "Functional.linear.0.forward");
        CHECK_INT(r->order, 7);
        CHECK_INT(r->n_tensors, 2);
        if (r->n_tensors == 2) { /* in role order: input.0 first */
            const msp_tensor_info_t *in = &r->tensors[0], *out = &r->tensors[1];
            CHECK_STR(in->role, "input.0");
            CHECK_INT(in->dtype, MSP_DTYPE_FLOAT32);
            CHECK_INT(in->ndim, 2);
            CHECK_INT(in->shape[0], 3);
            CHECK_INT(in->shape[1], 4);
            CHECK_INT(in->numel, 12);
            CHECK_INT(in->nbytes, 48);
            CHECK_INT(in->has_data, 0);
            CHECK_NUM(in->stats.max, 2.0);
            CHECK_NUM(in->stats.min, -1.0);
            CHECK_NUM(in->stats.mean, 0.5);
            CHECK_NUM(in->stats.norm, 3.0);
            CHECK_INT(in->stats.crc32, 0x1234);
            CHECK_STR(in->device, "cpu");
            CHECK_INT(in->requires_grad, 1);
            CHECK_STR(out->role, "output.0");
            CHECK_INT(out->ndim, 1);
            CHECK_INT(out->numel, 5);
            CHECK_NUM(out->stats.max, 4.0);
            CHECK_NUM(out->stats.norm, 6.0);
            CHECK_INT(out->stats.nan_count, 1);
            CHECK_INT(out->stats.inf_count, 2);
        }
        char **k = NULL, **val = NULL;
        size_t n = 0;
        CHECK_INT(msp_dump_record_attrs(f, r, &k, &val, &n), MSP_OK);
        CHECK_INT(n, 1);
        if (n == 1) {
            CHECK_STR(k[0], "stack");
            CHECK_STR(val[0], "linear.py:3");
        }
        msp_free_strings(k, n);
        msp_free_strings(val, n);
        CHECK_INT(msp_dump_api_defaults(f, "Functional.linear", &k, &val, &n), MSP_OK);
        CHECK_INT(n, 1);
        if (n == 1) {
            CHECK_STR(k[0], "#0");
            CHECK_STR(val[0], "input");
        }
        msp_free_strings(k, n);
        msp_free_strings(val, n);
    }
    if (f)
        msp_dump_close(f);
    refuse_truncations(&e, "tables");
    free(e.p);
    static const struct {
        const char *name, *says;
    } lies[T_N_LIES] = {
        {"truth", ""},
        {"width 0", "malformed"},
        {"width 33", "malformed"},
        {"strings 2^40", "malformed"},
        {"stats 2^40", "malformed"},
        {"role 99", "names a string /strings does not have"},
        {"values 2", "names a row /values does not have"},
        {"ndim 3 of 2", "wider than the table's shape column"},
        {"no NUL", "/strings does not end with a NUL byte"},
        {"attribute's record 50", "/attrs row 0 names a string /strings does not have"},
        {"trailing byte", "malformed"},
    };
    for (int lie = T_TRUTH + 1; lie < T_N_LIES; lie++) {
        enc_t l = {0};
        tables(&l, (enum tlie)lie);
        refused(l.p, l.n, lies[lie].name);
        CHECK_HAS(msp_last_error(), lies[lie].says);
        free(l.p);
    }
}

int main(void)
{
    test_round_trip();
    test_error_answer();
    test_refusals();
    test_smallest_tensors();
    test_tables();
    return unit_done("reader wire codec");
}
