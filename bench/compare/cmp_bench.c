/* cmp_bench: the timing half of bench/compare/run.sh (a benchmark, not a test).
 *
 *   cmp_bench compare BENCH CMP [THREADS [CHUNK_BYTES [pread|mmap]]]
 *       times msp_compare_run; prints one line "compare seconds=.. bytes=.. gbps=..
 *       rss_mib=.. records=.. tensors=.. root=.."
 *   cmp_bench tree BENCH CMP [THREADS [OUT]]
 *       times msp_compare_stream (a pair in memory at a time), and with OUT the
 *       reports written from it too; prints "tree seconds=.. report_s=.. rss_mib=..
 *       records=.. tensors=.." (the RSS is the whole run's peak)
 *   cmp_bench open FILE...
 *       times msp_dump_open of each file, one after the other, as compare
 *       opens them (through the reader helper's server, when it runs one);
 *       prints "open seconds=.. files=.. tensors=.. us_per_tensor=.."
 *   cmp_bench membw BYTES [THREADS]
 *       the machine's read bandwidth: an OpenMP read-only reduction over a
 *       buffer of BYTES (best of 5); prints "membw seconds=.. bytes=.. gbps=.." */
#include "msprobe/compare.h"
#include "msprobe/format.h"
#include "msprobe/proc.h"
#include "msprobe/report.h"

#include <malloc.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int bench_compare(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    msp_compare_opts_t o;
    msp_compare_opts_default(&o);
    o.replay = MSP_REPLAY_OFF; /* the metric engine's speed, not the replay worker's */
    if (argc > 4)
        o.threads = atoi(argv[4]);
    if (argc > 5)
        o.chunk_bytes = strtoull(argv[5], NULL, 10);
    if (argc > 6)
        o.io_mode = !strcmp(argv[6], "pread") ? MSP_IO_PREAD : MSP_IO_MMAP;
    msp_compare_result_t *r = NULL;
    double t0 = now();
    msp_err rc = msp_compare_run(argv[2], argv[3], &o, &r);
    double dt = now() - t0;
    if (rc) {
        fprintf(stderr, "cmp_bench: %s\n", msp_last_error());
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
                 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    printf("compare seconds=%.4f cpu_s=%.4f bytes=%llu gbps=%.3f rss_mib=%.1f records=%zu "
           "tensors=%zu root=%s vcsw=%ld ivcsw=%ld\n",
           dt, cpu, (unsigned long long)r->bytes_compared, (double)r->bytes_compared / dt / 1e9,
           (double)ru.ru_maxrss / 1024.0, r->n_records, r->n_tensors,
           r->root_record >= 0 ? r->records[r->root_record].name : "none", ru.ru_nvcsw,
           ru.ru_nivcsw);
    msp_compare_result_free(r);
    return 0;
}

static int bench_tree(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    msp_compare_opts_t o;
    msp_compare_opts_default(&o);
    o.replay = MSP_REPLAY_OFF;
    if (argc > 4)
        o.threads = atoi(argv[4]);
    msp_compare_tree_t *t = NULL;
    double t0 = now();
    msp_err rc = msp_compare_stream(argv[2], argv[3], &o, NULL, &t);
    double dt = now() - t0, rt = 0;
    if (!rc && argc > 5) {
        double r0 = now();
        /* the workbooks and the csv as the CLI writes them, from one read */
        msp_report_set_t set = {.out_dir = argv[5], .xlsx = 1, .csv = 1};
        rc = msp_report_tree_write(t, &set, NULL);
        rt = now() - r0;
    }
    if (rc) {
        fprintf(stderr, "cmp_bench: %s\n", msp_last_error());
        msp_compare_tree_free(t);
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
                 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    size_t nr, nt;
    msp_compare_tree_totals(t, &nr, &nt, NULL);
    const msp_compare_result_t *h = msp_compare_tree_head(t);
    printf("tree seconds=%.4f report_s=%.4f cpu_s=%.4f bytes=%llu gbps=%.3f rss_mib=%.1f "
           "records=%zu tensors=%zu root=%s\n",
           dt, rt, cpu, (unsigned long long)h->bytes_compared, (double)h->bytes_compared / dt / 1e9,
           (double)ru.ru_maxrss / 1024.0, nr, nt,
           h->root_record >= 0 ? h->records[h->root_record].name : "none");
    msp_compare_tree_free(t);
    return 0;
}

static int bench_membw(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    size_t bytes = strtoull(argv[2], NULL, 10) & ~(size_t)63;
    int threads = argc > 3 ? atoi(argv[3]) : omp_get_max_threads();
    /* integer adds, so the loop is bound by memory and not by FP add latency */
    size_t n = bytes / sizeof(uint64_t);
    uint64_t *buf = aligned_alloc(64, n * sizeof(uint64_t));
    if (!buf) {
        fprintf(stderr, "cmp_bench: cannot allocate %zu bytes\n", bytes);
        return 1;
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < n; i++)
        buf[i] = i & 1023;
    double best = 1e30;
    uint64_t sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        uint64_t s = 0;
#pragma omp parallel for simd num_threads(threads) schedule(static) reduction(+ : s)
        for (size_t i = 0; i < n; i++)
            s += buf[i];
        double dt = now() - t0;
        sink += s;
        if (dt < best)
            best = dt;
    }
    printf("membw seconds=%.4f bytes=%zu gbps=%.3f check=%llu\n", best, n * sizeof(uint64_t),
           (double)(n * sizeof(uint64_t)) / best / 1e9, (unsigned long long)sink);
    free(buf);
    return 0;
}

/* Every file's catalogue, as compare gets it: cmp_bench open FILE... */
static int bench_open(int argc, char **argv)
{
    size_t tensors = 0;
    double t0 = now();
    for (int i = 2; i < argc; i++) {
        msp_dump_file_t *f = NULL;
        if (msp_dump_open(argv[i], &f)) {
            fprintf(stderr, "cmp_bench: %s\n", msp_last_error());
            return 1;
        }
        for (size_t r = 0; r < f->n_records; r++)
            tensors += f->records[r].n_tensors;
        msp_dump_close(f);
    }
    double dt = now() - t0;
    printf("open seconds=%.4f files=%d tensors=%zu us_per_tensor=%.1f\n", dt, argc - 2, tensors,
           tensors ? dt * 1e6 / (double)tensors : 0.0);
    return 0;
}

/* The kernel alone on in-memory fp32 arrays (no I/O): cmp_bench kernel MIB [THREADS] */
static int bench_kernel(int argc, char **argv)
{
    size_t n = (size_t)(atof(argv[2]) * 1024 * 1024 / 8);
    if (argc > 3)
        omp_set_num_threads(atoi(argv[3]));
    float *a = malloc(n * 4), *b = malloc(n * 4);
    if (!a || !b)
        return 1;
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) { /* xorshift noise: bench b, npu a = b * (1 + ~1e-4) */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double u = (double)(x >> 11) * 0x1p-53;
        b[i] = (float)(u * 4.0 - 2.0);
        a[i] = b[i] * (float)(1.0 + 2e-4 * ((double)(x & 0xffff) / 65535.0 - 0.5));
    }
    msp_metrics_t m;
    double best = 1e30, best_cpu = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        struct timespec c0, c1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        double t0 = now();
        msp_metrics_compute(MSP_DTYPE_FLOAT32, a, MSP_DTYPE_FLOAT32, b, n, 1.3e-6, 1e-5, &m);
        double dt = now() - t0;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
        best = dt < best ? dt : best;
        best_cpu = cpu < best_cpu ? cpu : best_cpu;
    }
    printf("kernel seconds=%.4f cpu_s=%.4f bytes=%zu gbps=%.3f gbps_per_cpu=%.3f cos=%.17g\n", best,
           best_cpu, n * 8, (double)(n * 8) / best / 1e9, (double)(n * 8) / best_cpu / 1e9,
           m.cosine);
    free(a);
    free(b);
    return 0;
}

int main(int argc, char **argv)
{
    /* OpenMP's idle threads sleep, as in msprobe (msp_omp_passive_restart) */
    msp_omp_passive_restart(argv);
    /* the heap as msprobe compare keeps it (cmd_compare.c): a pair's blocks
     * stay for the next pair instead of going back to the kernel */
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    if (argc >= 3 && !strcmp(argv[1], "kernel"))
        return bench_kernel(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "compare"))
        return bench_compare(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "tree"))
        return bench_tree(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "membw"))
        return bench_membw(argc, argv);
    if (argc >= 3 && !strcmp(argv[1], "open"))
        return bench_open(argc, argv);
    fprintf(stderr, "usage: cmp_bench compare BENCH CMP [THREADS [CHUNK_BYTES [pread|mmap]]]\n"
                    "       cmp_bench tree BENCH CMP [THREADS [OUT]]\n"
                    "       cmp_bench membw BYTES [THREADS]\n"
                    "       cmp_bench open FILE...\n");
    return 2;
}
