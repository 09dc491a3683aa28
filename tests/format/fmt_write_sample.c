/* Writes a sample dump covering every dtype and tensor kind, values from a
 * formula the Python tests recompute with numpy (see test_format_writer.py).
 *   fmt_write_sample OUT.h5
 *   fmt_write_sample --convert IN.f64 OUT.bin
 *     reads doubles, writes for each: uint16 half, uint16 bf16 (round to
 *     nearest even), then for every 16-bit pattern: float64 half value,
 *     float64 bf16 value.
 *   fmt_write_sample --statistics OUT.h5
 *     the same records in a statistics dump (the compact layout): the
 *     tensors with data in its /index, the rest in its tables.
 *   fmt_write_sample --errors DIR
 *     misuses the writer API; prints "case<TAB>code<TAB>detail" per case.
 *   fmt_write_sample --threads DIR
 *     8 threads at once, each writing DIR/t<k>.h5 (records "Torch.mul.<i>.forward",
 *     i < 300, one float32 tensor "output.0" of 100+i%50 elements, salt 1000*k+i)
 *     and reading the previous file back through the reader while the others
 *     write; prints "ok" per thread or the error.
 *   fmt_write_sample --crc IN
 *     prints "offset length crc32" (msp_crc32, seeded with the length) for
 *     every offset 0..3 and length 0..len(IN)-4. */
#include "msprobe/format.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* u(i, salt) = ((i + 1) * 2654435761 + salt * 40503) mod 2^24 */
static uint32_t msp_u(size_t i, unsigned salt)
{
    return (uint32_t)((((uint64_t)i + 1) * UINT64_C(2654435761) + (uint64_t)salt * 40503) &
                      0xffffff);
}

/* v = (u - 2^23) / 2^16: exact in float32 */
static double msp_v(size_t i, unsigned salt)
{
    return ((double)msp_u(i, salt) - 8388608.0) / 65536.0;
}

static int64_t msp_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

/* Fill buf with n elements of dt from the formula with salt (see the test). */
static void msp_fill(msp_dtype_t dt, void *buf, size_t n, unsigned salt)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = msp_u(i, salt);
        double v = msp_v(i, salt);
        switch (dt) {
        case MSP_DTYPE_FLOAT32:
            ((float *)buf)[i] = (float)v;
            break;
        case MSP_DTYPE_FLOAT64:
            ((double *)buf)[i] = v / 3.0;
            break;
        case MSP_DTYPE_FLOAT16:
            ((uint16_t *)buf)[i] = msp_double_to_half(v / 4.0);
            break;
        case MSP_DTYPE_BFLOAT16:
            ((uint16_t *)buf)[i] = msp_double_to_bf16(v);
            break;
        case MSP_DTYPE_INT8:
            ((int8_t *)buf)[i] = (int8_t)((int)(u % 256) - 128);
            break;
        case MSP_DTYPE_INT16:
            ((int16_t *)buf)[i] = (int16_t)((int32_t)(u % 65536) - 32768);
            break;
        case MSP_DTYPE_INT32:
            ((int32_t *)buf)[i] = (int32_t)((int64_t)u * 97 - (1 << 30));
            break;
        case MSP_DTYPE_INT64:
            ((int64_t *)buf)[i] = (int64_t)u * 1000003 - (INT64_C(1) << 40);
            break;
        case MSP_DTYPE_UINT8:
            ((uint8_t *)buf)[i] = (uint8_t)(u % 256);
            break;
        case MSP_DTYPE_BOOL:
            ((uint8_t *)buf)[i] = (uint8_t)((u >> 3) & 1);
            break;
        default:
            break;
        }
    }
}

struct msp_sample_tensor {
    const char *role;
    msp_dtype_t dtype;
    int ndim;
    int64_t shape[4];
    unsigned salt;
    int special; /* overwrite some elements with NaN/Inf/edge values (see msp_specials) */
};

static int msp_check(msp_err rc, const char *what)
{
    if (rc) {
        fprintf(stderr, "fmt_write_sample: %s: %s\n", what, msp_last_error());
        return 1;
    }
    return 0;
}

static void msp_specials(msp_dtype_t dt, void *buf, size_t n, int kind)
{
    if (dt == MSP_DTYPE_FLOAT32) {
        /* 1: +inf at 0 and -inf at 5 (mean NaN, no NaN element); 2: NaN at 777 */
        float *f = buf;
        if (kind == 1 && n > 5)
            f[0] = INFINITY, f[5] = -INFINITY;
        if (kind == 2 && n > 777)
            f[777] = NAN;
        return;
    }
    /* half: +inf, -inf, NaN, 65504 (max), 65520 (ties to even: inf), 3*2^-24
     * (subnormal); bf16: NaN, -inf, 1+2^-8 (tie, to even: 1), 1+3*2^-8 (tie,
     * to even: up) and the largest finite float32 (overflows to inf). */
    static const double h[] = {INFINITY, -INFINITY, NAN, 65504.0, 65520.0, 3.0 / 16777216.0};
    static const double b[] = {NAN, -INFINITY, 1.00390625, 1.01171875, 3.4028234663852886e38};
    const double *s = dt == MSP_DTYPE_FLOAT16 ? h : b;
    size_t k = dt == MSP_DTYPE_FLOAT16 ? 6 : 5;
    for (size_t i = 0; i < k && i < n; i++)
        ((uint16_t *)buf)[i] = dt == MSP_DTYPE_FLOAT16 ? msp_double_to_half(s[i])
                                                       : msp_double_to_bf16(s[i]);
}

static int msp_write_sample(const char *path, const char *task)
{
    static const struct msp_sample_tensor conv[] = {
        {"input.0", MSP_DTYPE_FLOAT32, 4, {2, 3, 4, 5}, 1, 0},
        {"input.1", MSP_DTYPE_FLOAT16, 1, {37}, 2, 1},
        {"kwarg.weight", MSP_DTYPE_BFLOAT16, 2, {4, 9}, 3, 1},
        {"output.0", MSP_DTYPE_FLOAT64, 2, {3, 7}, 4, 0},
    };
    static const struct msp_sample_tensor mm[] = {
        {"input.0", MSP_DTYPE_INT16, 2, {5, 5}, 5, 0},
        {"input.1", MSP_DTYPE_INT32, 1, {17}, 6, 0},
        {"input.2", MSP_DTYPE_INT8, 1, {300}, 7, 0},
        {"output.0", MSP_DTYPE_INT64, 3, {2, 2, 2}, 8, 0},
        {"output.1", MSP_DTYPE_UINT8, 1, {256}, 9, 0},
        {"output.10", MSP_DTYPE_BOOL, 2, {3, 11}, 10, 0},
        {"output.2", MSP_DTYPE_BOOL, 0, {0}, 11, 0},
    };
    static const struct msp_sample_tensor add[] = {
        {"input.0", MSP_DTYPE_FLOAT32, 0, {0}, 12, 0},
        {"input.1", MSP_DTYPE_FLOAT32, 1, {1}, 13, 0},
        {"input.2", MSP_DTYPE_FLOAT32, 2, {0, 3}, 14, 0},
        {"input.10", MSP_DTYPE_FLOAT16, 1, {6}, 15, 1},
    };
    /* big enough (2 MiB) for the writer's CRC helper thread */
    static const struct msp_sample_tensor big[] = {
        {"input.0", MSP_DTYPE_FLOAT32, 1, {3001}, 17, 1},
        {"input.1", MSP_DTYPE_FLOAT32, 1, {1003}, 18, 2},
        {"output.0", MSP_DTYPE_FLOAT32, 2, {512, 1024}, 16, 0},
    };
    static const struct {
        const char *name;
        int64_t order;
        const struct msp_sample_tensor *t;
        size_t n;
    } recs[] = {
        /* Written out of execution order on purpose: readers sort by order. */
        {"Functional.conv2d.0.forward", 0, conv, sizeof conv / sizeof conv[0]},
        {"Torch.matmul.3.backward", 2, mm, sizeof mm / sizeof mm[0]},
        {"Tensor.__add__.1.forward", 1, add, sizeof add / sizeof add[0]},
        {"Functional.linear.5.forward", 4, big, sizeof big / sizeof big[0]},
    };
    msp_dump_meta_t meta = {"pytorch", "1.13.1", task, "mix", 7, 3, 8, 0};
    msp_writer_t *w = NULL;
    if (msp_check(msp_writer_open(path, &meta, &w), "open"))
        return 1;
    for (size_t r = 0; r < sizeof recs / sizeof recs[0]; r++) {
        if (msp_check(msp_writer_begin_record(w, recs[r].name, recs[r].order), recs[r].name))
            goto fail;
        for (size_t k = 0; k < recs[r].n; k++) {
            const struct msp_sample_tensor *s = &recs[r].t[k];
            size_t n = (size_t)msp_numel(s->ndim, s->shape);
            void *buf = calloc(n ? n : 1, msp_dtype_size(s->dtype));
            if (!buf)
                goto fail;
            msp_fill(s->dtype, buf, n, s->salt);
            if (s->special)
                msp_specials(s->dtype, buf, n, s->special);
            msp_tensor_in_t t = {s->role,
                                 s->dtype,
                                 s->ndim,
                                 s->shape,
                                 buf,
                                 NULL,
                                 (s->salt % 2) ? "cpu" : "cuda:1",
                                 (int)(s->salt % 3 == 0),
                                 NULL};
            msp_err rc = msp_writer_add_tensor(w, &t);
            free(buf);
            if (msp_check(rc, s->role))
                goto fail;
        }
        if (r == 2) {
            /* statistics only: no data, the caller's statistics verbatim */
            int64_t shape[2] = {1000, 1000};
            msp_stats_t st = {2.5, -1.25, 0.125, 1000.5, 3, 4, 0xdeadbeef};
            msp_tensor_in_t t = {"output.0",
                                 MSP_DTYPE_FLOAT32,
                                 2,
                                 shape,
                                 NULL,
                                 &st,
                                 "npu:0",
                                 1,
                                 "Functional.conv2d.0.forward/output.0"};
            if (msp_check(msp_writer_add_tensor(w, &t), "stats-only") ||
                /* set twice: the second value replaces the first */
                msp_check(msp_writer_set_attr(w, "kwarg.alpha", "1"), "attr") ||
                msp_check(msp_writer_set_attr(w, "kwarg.alpha", "2"), "attr") ||
                msp_check(msp_writer_set_attr(w, "input.3", "None"), "attr"))
                goto fail;
        }
        if (msp_check(msp_writer_end_record(w), "end_record"))
            goto fail;
    }
    /* A record with no tensor at all, only an argument. */
    if (msp_check(msp_writer_begin_record(w, "Module.layer1.0.conv1.Conv2d.forward.0", 3),
                  "module") ||
        msp_check(msp_writer_set_attr(w, "kwarg.note", "no tensors"), "attr"))
        goto fail;
    return msp_check(msp_writer_close(w), "close");
fail:
    msp_writer_abort(w);
    return 1;
}

static int msp_convert(const char *in, const char *out)
{
    FILE *fi = fopen(in, "rb"), *fo = fopen(out, "wb");
    int rc = 1;
    if (!fi || !fo)
        goto done;
    double v;
    while (fread(&v, sizeof v, 1, fi) == 1) {
        uint16_t h = msp_double_to_half(v), b = msp_double_to_bf16(v);
        fwrite(&h, 2, 1, fo);
        fwrite(&b, 2, 1, fo);
    }
    for (uint32_t i = 0; i < 65536; i++) {
        double h = msp_half_to_float((uint16_t)i), b = msp_bf16_to_float((uint16_t)i);
        fwrite(&h, 8, 1, fo);
        fwrite(&b, 8, 1, fo);
    }
    rc = ferror(fo) ? 1 : 0;
done:
    if (fi)
        fclose(fi);
    if (fo && fclose(fo) != 0)
        rc = 1;
    return rc;
}

static int msp_crc_table(const char *in)
{
    char *data = NULL;
    size_t len = 0;
    if (msp_read_file(in, 1 << 20, &data, &len) || len < 4) {
        fprintf(stderr, "fmt_write_sample: %s: %s\n", in, msp_last_error());
        free(data);
        return 1;
    }
    for (size_t off = 0; off < 4; off++)
        for (size_t n = 0; n + 4 <= len; n++)
            printf("%zu %zu %u\n", off, n, msp_crc32((uint32_t)n, data + off, n));
    free(data);
    return 0;
}

#define MSP_THREADS 8
#define MSP_THREAD_RECORDS 300

struct msp_thread_job {
    char path[4096];
    int k;
    char result[1100];
};

static void *msp_thread_main(void *arg)
{
    struct msp_thread_job *j = arg;
    msp_dump_meta_t meta = {"pytorch", "t", "tensor", "api", 0, j->k, 4, 0};
    msp_writer_t *w = NULL;
    snprintf(j->result, sizeof j->result, "ok");
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0 writes, pass 1 reads back the file just written while the
         * other threads are still writing theirs */
        if (pass == 0) {
            if (msp_writer_open(j->path, &meta, &w))
                goto fail;
            for (int i = 0; i < MSP_THREAD_RECORDS; i++) {
                char rec[64];
                int64_t n = 100 + i % 50;
                float *buf = malloc((size_t)n * sizeof *buf);
                if (!buf)
                    goto fail;
                msp_fill(MSP_DTYPE_FLOAT32, buf, (size_t)n, (unsigned)(1000 * j->k + i));
                snprintf(rec, sizeof rec, "Torch.mul.%d.forward", i);
                msp_tensor_in_t t = {"output.0", MSP_DTYPE_FLOAT32, 1, &n, buf, NULL, NULL, 0,
                                     NULL};
                msp_err rc = msp_writer_begin_record(w, rec, i);
                if (!rc)
                    rc = msp_writer_add_tensor(w, &t);
                if (!rc)
                    rc = msp_writer_end_record(w);
                free(buf);
                if (rc) {
                    msp_writer_abort(w);
                    goto fail;
                }
            }
            if (msp_writer_close(w))
                goto fail;
        } else {
            msp_dump_file_t *f = NULL;
            if (msp_dump_open(j->path, &f))
                goto fail;
            for (size_t r = 0; r < f->n_records; r++) {
                const msp_tensor_info_t *t = &f->records[r].tensors[0];
                float *buf = malloc((size_t)t->nbytes);
                msp_err rc = buf ? msp_dump_read_tensor(f, &f->records[r], t, buf,
                                                        (size_t)t->nbytes)
                                 : MSP_ERR_NOMEM;
                uint32_t crc = rc ? 0 : msp_crc32(0, buf, (size_t)t->nbytes);
                free(buf);
                if (rc || crc != t->stats.crc32 || f->records[r].order != (int64_t)r) {
                    snprintf(j->result, sizeof j->result, "thread %d: record %zu differs", j->k, r);
                    msp_dump_close(f);
                    return NULL;
                }
            }
            msp_dump_close(f);
            /* A truncated copy must fail cleanly, and HDF5 must not print
             * its error stack from this thread either. */
            char cut[4200], *data = NULL;
            size_t len = 0;
            snprintf(cut, sizeof cut, "%s.cut.h5", j->path);
            if (msp_read_file(j->path, (size_t)1 << 30, &data, &len) ||
                msp_write_file_atomic(cut, data, len / 2)) {
                free(data);
                goto fail;
            }
            free(data);
            f = NULL;
            msp_err rc = msp_dump_open(cut, &f);
            msp_dump_close(f);
            if (rc != MSP_ERR_FORMAT || !strstr(msp_last_error(), cut)) {
                snprintf(j->result, sizeof j->result, "thread %d: truncated copy gave %d: %s", j->k,
                         (int)rc, msp_last_error());
                return NULL;
            }
        }
    }
    return NULL;
fail:
    snprintf(j->result, sizeof j->result, "thread %d: %s", j->k, msp_last_error());
    return NULL;
}

static int msp_threads(const char *dir)
{
    struct msp_thread_job jobs[MSP_THREADS];
    pthread_t th[MSP_THREADS];
    int started[MSP_THREADS] = {0};
    for (int k = 0; k < MSP_THREADS; k++) {
        snprintf(jobs[k].path, sizeof jobs[k].path, "%s/t%d.h5", dir, k);
        jobs[k].k = k;
        started[k] = pthread_create(&th[k], NULL, msp_thread_main, &jobs[k]) == 0;
    }
    int bad = 0;
    for (int k = 0; k < MSP_THREADS; k++) {
        if (!started[k]) {
            printf("thread %d: not started\n", k);
            bad = 1;
            continue;
        }
        pthread_join(th[k], NULL);
        printf("%s\n", jobs[k].result);
        bad |= strcmp(jobs[k].result, "ok") != 0;
    }
    return bad;
}

static void msp_report(const char *name, msp_err rc)
{
    printf("%s\t%d\t%s\n", name, (int)rc, rc ? msp_last_error() : "");
    msp_clear_error();
}

static int msp_errors(const char *dir)
{
    char path[4096], missing[4096];
    snprintf(path, sizeof path, "%s/errors.h5", dir);
    snprintf(missing, sizeof missing, "%s/no/such/dir/dump.h5", dir);
    msp_dump_meta_t meta = {NULL, NULL, NULL, NULL, 1, 0, 1, 0};
    msp_writer_t *w = NULL;
    msp_report("open_missing_dir", msp_writer_open(missing, &meta, &w));
    if (msp_writer_open(path, &meta, &w)) {
        msp_report("open", MSP_ERR_INTERNAL);
        return 1;
    }
    float x[4] = {1, 2, 3, 4};
    int64_t shape[2] = {2, 2}, neg[1] = {-1};
    msp_tensor_in_t t = {"input.0", MSP_DTYPE_FLOAT32, 2, shape, x, NULL, NULL, 0, NULL};
    msp_report("tensor_outside_record", msp_writer_add_tensor(w, &t));
    msp_report("attr_outside_record", msp_writer_set_attr(w, "k", "v"));
    msp_report("end_without_begin", msp_writer_end_record(w));
    msp_report("record_named_index", msp_writer_begin_record(w, "index", 0));
    msp_report("record_named_attrs", msp_writer_begin_record(w, "attrs", 0));
    msp_report("record_with_slash", msp_writer_begin_record(w, "a/b", 0));
    msp_report("begin", msp_writer_begin_record(w, "Torch.add.0.forward", 0));
    msp_report("begin_while_open", msp_writer_begin_record(w, "Torch.add.1.forward", 1));
    msp_report("tensor", msp_writer_add_tensor(w, &t));
    msp_report("same_role_twice", msp_writer_add_tensor(w, &t));
    t.role = "input.1";
    t.dtype = MSP_DTYPE_INVALID;
    msp_report("invalid_dtype", msp_writer_add_tensor(w, &t));
    t.dtype = MSP_DTYPE_FLOAT32;
    t.ndim = 1;
    t.shape = neg;
    msp_report("negative_dim", msp_writer_add_tensor(w, &t));
    t.ndim = 33;
    msp_report("too_many_dims", msp_writer_add_tensor(w, &t));
    t.ndim = 2;
    t.shape = shape;
    t.data = NULL;
    msp_report("no_data_no_stats", msp_writer_add_tensor(w, &t));
    msp_report("attr_order_reserved", msp_writer_set_attr(w, "order", "1"));
    msp_report("attr_twice_last_wins", msp_writer_set_attr(w, "kwarg.alpha", "1"));
    msp_report("attr_twice_last_wins", msp_writer_set_attr(w, "kwarg.alpha", "2"));
    msp_report("end", msp_writer_end_record(w));
    msp_report("duplicate_record", msp_writer_begin_record(w, "Torch.add.0.forward", 2));
    /* an optimizer's record: thousands of roles (looked up by hash past the first few) */
    msp_stats_t st = {0};
    msp_tensor_in_t p = {NULL, MSP_DTYPE_FLOAT32, 2, shape, NULL, &st, NULL, 0, NULL};
    char role[64];
    msp_report("many_begin", msp_writer_begin_record(w, "Optimizer.SGD.0.step", 3));
    for (int i = 0; i < 3000; i++) {
        snprintf(role, sizeof role, "input.param.%d", i);
        p.role = role;
        msp_err rc = msp_writer_add_tensor(w, &p);
        if (rc != MSP_OK)
            msp_report("many_roles", rc);
    }
    int again[] = {0, 7, 15, 16, 1500, 2999};
    for (size_t i = 0; i < sizeof again / sizeof again[0]; i++) {
        snprintf(role, sizeof role, "input.param.%d", again[i]);
        p.role = role;
        msp_report("many_role_again", msp_writer_add_tensor(w, &p));
    }
    p.role = "input.param.3000";
    msp_report("many_new_role", msp_writer_add_tensor(w, &p));
    msp_report("many_end", msp_writer_end_record(w));
    /* the next record starts with no roles */
    msp_report("after_many", msp_writer_begin_record(w, "Torch.add.1.forward", 4));
    p.role = "input.param.7";
    msp_report("after_many_role", msp_writer_add_tensor(w, &p));
    msp_report("after_many_end", msp_writer_end_record(w));
    /* close ends nothing open, writes /index: the file must be complete */
    msp_report("close", msp_writer_close(w));
    msp_writer_close(NULL);
    msp_writer_abort(NULL);
    msp_dump_close(NULL);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--threads") == 0)
        return msp_threads(argv[2]);
    if (argc == 3 && strcmp(argv[1], "--errors") == 0)
        return msp_errors(argv[2]);
    if (argc == 3 && strcmp(argv[1], "--crc") == 0)
        return msp_crc_table(argv[2]);
    if (argc == 3 && strcmp(argv[1], "--statistics") == 0)
        return msp_write_sample(argv[2], "statistics");
    if (argc == 4 && strcmp(argv[1], "--convert") == 0)
        return msp_convert(argv[2], argv[3]);
    if (argc != 2) {
        fprintf(stderr, "usage: fmt_write_sample OUT.h5 | --convert IN.f64 OUT.bin\n");
        return 2;
    }
    return msp_write_sample(argv[1], "tensor");
}
