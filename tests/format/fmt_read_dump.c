/* Prints what msp_dump_open / msp_dump_read_tensor / msp_dump_record_attrs
 * make of a dump, one tab-separated line per item, for the Python tests:
 *   F has_index step rank world_size task dump_mode framework framework_version
 *   R name order n_tensors
 *   T record role dtype_name ndim shape has_data has_stats offset nbytes
 *     data_crc max min mean norm nan inf crc32 device requires_grad producer
 *   S record role skip_crc  (after T, for a tensor with data)
 *   A record key value
 *   D api key value        (fmt_read_dump FILE API...: msp_dump_api_defaults of each API)
 * data_crc: zlib CRC-32 of the bytes msp_dump_read_tensor returned ("-" if
 * no data); producer: "-" when the tensor has none; when offset >= 0 it also checks that pread() at offset gives
 * the same bytes. skip_crc: CRC-32 of the bytes at offsets i with i mod 8 < 5,
 * read through msp_tensor_stream_read taking 5 bytes and
 * msp_tensor_stream_skip passing over 3 in turn. Exit 2 with the error on
 * stderr if anything fails. */
#include "msprobe/format.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int msp_fail_out(const char *what)
{
    fprintf(stderr, "fmt_read_dump: %s: %s\n", what, msp_last_error());
    return 2;
}

/* The S line of t: its bytes read 5 and passed over 3 in turn. */
static int msp_print_skipping(msp_dump_file_t *f, const msp_record_info_t *r,
                              const msp_tensor_info_t *t)
{
    msp_tensor_stream_t *s = NULL;
    if (msp_tensor_stream_open(f, r, t, &s))
        return -1;
    unsigned char b[5];
    uint32_t crc = 0;
    for (uint64_t at = 0, n = (uint64_t)t->nbytes; at < n;) {
        size_t take = n - at < 5 ? (size_t)(n - at) : 5;
        if (msp_tensor_stream_read(s, b, take)) {
            msp_tensor_stream_close(s);
            return -1;
        }
        crc = msp_crc32(crc, b, take);
        at += take;
        uint64_t skip = n - at < 3 ? n - at : 3;
        if (skip && msp_tensor_stream_skip(s, skip)) {
            msp_tensor_stream_close(s);
            return -1;
        }
        at += skip;
    }
    msp_tensor_stream_close(s);
    printf("S\t%s\t%s\t%u\n", r->name, t->role, crc);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fmt_read_dump FILE [API...]\n");
        return 2;
    }
    msp_dump_file_t *f = NULL;
    if (msp_dump_open(argv[1], &f))
        return msp_fail_out("open");
    printf("F\t%d\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%s\t%s\t%s\t%s\n", f->has_index, f->step,
           f->rank, f->world_size, f->task, f->dump_mode, f->framework, f->framework_version);
    int fd = open(argv[1], O_RDONLY);
    int status = 0;
    for (size_t i = 0; i < f->n_records; i++) {
        const msp_record_info_t *r = &f->records[i];
        printf("R\t%s\t%" PRId64 "\t%zu\n", r->name, r->order, r->n_tensors);
        for (size_t j = 0; j < r->n_tensors; j++) {
            const msp_tensor_info_t *t = &r->tensors[j];
            char shape[600] = "";
            size_t k = 0;
            for (int d = 0; d < t->ndim; d++)
                k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%" PRId64, d ? "," : "",
                                      t->shape[d]);
            char crc[16] = "-";
            if (t->has_data) {
                unsigned char *buf = malloc(t->nbytes ? (size_t)t->nbytes : 1);
                if (!buf || msp_dump_read_tensor(f, r, t, buf, (size_t)t->nbytes)) {
                    int rc = msp_fail_out(t->role); /* before t goes with f */
                    free(buf);
                    msp_dump_close(f);
                    return rc;
                }
                snprintf(crc, sizeof crc, "%u", msp_crc32(0, buf, (size_t)t->nbytes));
                if (t->offset >= 0) {
                    unsigned char *raw = malloc((size_t)t->nbytes);
                    if (!raw || pread(fd, raw, (size_t)t->nbytes, t->offset) != t->nbytes ||
                        memcmp(raw, buf, (size_t)t->nbytes) != 0) {
                        fprintf(stderr, "fmt_read_dump: %s %s: pread at offset differs\n", r->name,
                                t->role);
                        status = 1;
                    }
                    free(raw);
                }
                free(buf);
            }
            printf("T\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t%" PRId64 "\t%" PRId64
                   "\t%s\t%.17g\t%.17g\t%.17g\t%.17g\t%" PRId64 "\t%" PRId64 "\t%u\t%s\t%d\t%s\n",
                   r->name, t->role, t->dtype_name, t->ndim, shape, t->has_data, t->has_stats,
                   t->offset, t->nbytes, crc, t->stats.max, t->stats.min, t->stats.mean,
                   t->stats.norm, t->stats.nan_count, t->stats.inf_count, t->stats.crc32, t->device,
                   t->requires_grad, t->producer ? t->producer : "-");
            if (t->has_data && msp_print_skipping(f, r, t)) {
                msp_dump_close(f);
                return msp_fail_out("stream");
            }
        }
        char **keys = NULL, **values = NULL;
        size_t n = 0;
        if (msp_dump_record_attrs(f, r, &keys, &values, &n)) {
            msp_dump_close(f);
            return msp_fail_out("attrs");
        }
        for (size_t a = 0; a < n; a++)
            printf("A\t%s\t%s\t%s\n", r->name, keys[a], values[a]);
        msp_free_strings(keys, n);
        msp_free_strings(values, n);
    }
    for (int a = 2; a < argc; a++) {
        char **keys = NULL, **values = NULL;
        size_t n = 0;
        if (msp_dump_api_defaults(f, argv[a], &keys, &values, &n)) {
            msp_dump_close(f);
            return msp_fail_out("defaults");
        }
        for (size_t i = 0; i < n; i++)
            printf("D\t%s\t%s\t%s\n", argv[a], keys[i], values[i]);
        msp_free_strings(keys, n);
        msp_free_strings(values, n);
    }
    if (fd >= 0)
        close(fd);
    msp_dump_close(f);
    return status;
}
