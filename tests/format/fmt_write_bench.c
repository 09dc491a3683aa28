/* Writer throughput, side by side with a raw write of the same bytes to the
 * same directory: N fp32 tensors of SIZE bytes each, page cache, then
 * fdatasync of each file so both numbers include reaching the disk; and the
 * writer in durable mode (write-behind as it goes, fdatasync at close).
 * Each of ROUNDS rounds runs the three side by side, in rotating order; the
 * best round of each is kept (the machine may be shared). CPU seconds (all threads) per GiB
 * are printed too: they do not depend on what else the machine is doing.
 * Not a test (timings vary); run by hand:
 *   fmt_write_bench DIR [total_MiB [tensor_MiB [ROUNDS]]] */
#include "msprobe/format.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double msp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double msp_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static int msp_sync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    int r = fdatasync(fd);
    close(fd);
    return r;
}

static int msp_bench_raw(const char *path, const float *data, size_t bytes, size_t count,
                         double *t_write, double *t_sync)
{
    double t0 = msp_now();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    for (size_t i = 0; i < count; i++) {
        if (write(fd, data, bytes) != (ssize_t)bytes) {
            close(fd);
            return -1;
        }
    }
    *t_write = msp_now() - t0;
    fdatasync(fd);
    close(fd);
    *t_sync = msp_now() - t0;
    return 0;
}

static int msp_bench_dump(const char *path, const float *data, size_t bytes, size_t count,
                          int with_stats, int durable, double *t_write, double *t_sync)
{
    msp_dump_meta_t meta = {"pytorch", "bench", "tensor", "api", 0, 0, 1, 0};
    msp_writer_t *w = NULL;
    int64_t shape[1] = {(int64_t)(bytes / sizeof(float))};
    msp_stats_t pre;
    msp_stats_compute(MSP_DTYPE_FLOAT32, data, (size_t)shape[0], &pre);
    double t0 = msp_now();
    if (msp_writer_open(path, &meta, &w))
        return -1;
    msp_writer_set_durable(w, durable);
    for (size_t i = 0; i < count; i++) {
        char rec[64];
        snprintf(rec, sizeof rec, "Functional.linear.%zu.forward", i);
        msp_tensor_in_t t = {"output.0", MSP_DTYPE_FLOAT32,        1,     shape,
                             data,       with_stats ? NULL : &pre, "cpu", 0,
                             NULL};
        if (msp_writer_begin_record(w, rec, (int64_t)i) || msp_writer_add_tensor(w, &t) ||
            msp_writer_end_record(w)) {
            msp_writer_abort(w);
            return -1;
        }
    }
    if (msp_writer_close(w))
        return -1;
    *t_write = msp_now() - t0;
    msp_sync_path(path);
    *t_sync = msp_now() - t0;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [total_MiB [tensor_MiB [ROUNDS]]]\n", argv[0]);
        return 2;
    }
    size_t total = (size_t)(argc > 2 ? atol(argv[2]) : 1024) << 20;
    size_t bytes = (size_t)(argc > 3 ? atol(argv[3]) : 4) << 20;
    int rounds = argc > 4 ? atoi(argv[4]) : 3;
    size_t count = total / bytes;
    float *data = malloc(bytes);
    if (!data)
        return 1;
    for (size_t i = 0; i < bytes / sizeof(float); i++)
        data[i] = (float)((double)(i % 1000) * 0.001 - 0.5);
    char raw[4096], h5a[4096], h5b[4096], h5c[4096];
    snprintf(raw, sizeof raw, "%s/bench_raw.bin", argv[1]);
    snprintf(h5a, sizeof h5a, "%s/bench_prestats.h5", argv[1]);
    snprintf(h5b, sizeof h5b, "%s/bench_stats.h5", argv[1]);
    snprintf(h5c, sizeof h5c, "%s/bench_durable.h5", argv[1]);
    double rw = 0, rs = 0, aw = 0, as = 0, bw = 0, bs = 0, dw = 0, ds = 0;
    double best[8] = {1e30, 1e30, 1e30, 1e30, 1e30, 1e30, 1e30, 1e30};
    double cpu[4] = {1e30, 1e30, 1e30, 1e30};
    for (int round = 0; round < rounds; round++) {
        /* Rotate which one goes first: dirty pages left by the previous
         * writer slow down the next one. */
        double c[4] = {0, 0, 0, 0};
        int bad = 0;
        for (int k = 0; k < 4 && !bad; k++) {
            int which = (k + round) % 4;
            double c0 = msp_cpu();
            if (which == 0)
                bad = msp_bench_raw(raw, data, bytes, count, &rw, &rs);
            else if (which == 1)
                bad = msp_bench_dump(h5a, data, bytes, count, 0, 0, &aw, &as);
            else if (which == 2)
                bad = msp_bench_dump(h5b, data, bytes, count, 1, 0, &bw, &bs);
            else
                bad = msp_bench_dump(h5c, data, bytes, count, 1, 1, &dw, &ds);
            c[which] = msp_cpu() - c0;
        }
        if (bad) {
            fprintf(stderr, "bench failed: %s\n", msp_last_error());
            return 1;
        }
        double v[8] = {rw, rs, aw, as, bw, bs, dw, ds};
        for (int i = 0; i < 8; i++)
            best[i] = v[i] < best[i] ? v[i] : best[i];
        for (int i = 0; i < 4; i++)
            cpu[i] = c[i] < cpu[i] ? c[i] : cpu[i];
        unlink(raw);
        unlink(h5a);
        unlink(h5b);
        unlink(h5c);
    }
    double mib = (double)(count * bytes) / 1048576.0, gib = mib / 1024.0;
    printf("%zu tensors x %zu MiB fp32 = %.0f MiB, best of %d rounds\n", count, bytes >> 20, mib,
           rounds);
    printf("%-34s %8s %11s %15s %10s\n", "", "MiB/s", "MiB/s+sync", "vs raw (+sync)", "CPU s/GiB");
    printf("%-34s %8.0f %11.0f %15s %10.2f\n", "raw write() (dd-like)", mib / best[0],
           mib / best[1], "1.00 ( 1.00)", cpu[0] / gib);
    printf("%-34s %8.0f %11.0f %8.2f (%5.2f) %10.2f\n", "msp_writer, stats given", mib / best[2],
           mib / best[3], best[0] / best[2], best[1] / best[3], cpu[1] / gib);
    printf("%-34s %8.0f %11.0f %8.2f (%5.2f) %10.2f\n", "msp_writer, stats+crc32 computed",
           mib / best[4], mib / best[5], best[0] / best[4], best[1] / best[5], cpu[2] / gib);
    printf("%-34s %8s %11.0f %8s (%5.2f) %10.2f\n", "msp_writer, durable, stats computed", "-",
           mib / best[7], "-", best[1] / best[7], cpu[3] / gib);
    free(data);
    return 0;
}
