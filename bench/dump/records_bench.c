/* What a statistics dump's writer spends a record, side by side in one run
 * (not a test: timings are not asserted):
 *   ours     msp_writer: N records of T statistics-only tensors and A string
 *            attributes (a 400-byte call site, then short arguments), open to
 *            close: /index rows and /attrs rows (format_version 2);
 *   groups   the same writer with no attributes, plus what the layout before
 *            (format_version 1) added to each record with arguments: a group
 *            holding "order" and A string attributes, made with HDF5 itself
 *            (in a second file of the same HDF5 format, open beside it);
 *   floor    the same writer, records without attributes: the /index rows alone.
 * Each of ROUNDS rounds runs the three in rotating order; the best round of
 * each is kept. Prints microseconds a record and ours against groups.
 *   records_bench DIR [N [T [A [ROUNDS]]]] */
#include "msprobe/format.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum { OURS, GROUPS, FLOOR, KINDS };
static const char *const kind_name[KINDS] = {"ours (/attrs rows)", "groups (version 1)",
                                             "floor (no attributes)"};

/* One string attribute on a group, as the version 1 writer made it. */
static int put_str(hid_t g, const char *key, const char *value)
{
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR), a = -1;
    int ok = t >= 0 && s >= 0 && H5Tset_size(t, H5T_VARIABLE) >= 0 &&
             H5Tset_cset(t, H5T_CSET_UTF8) >= 0 &&
             (a = H5Acreate2(g, key, t, s, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
             H5Awrite(a, t, &value) >= 0;
    if (a >= 0)
        H5Aclose(a);
    if (s >= 0)
        H5Sclose(s);
    if (t >= 0)
        H5Tclose(t);
    return ok ? 0 : -1;
}

/* Writes one file of kind k; returns seconds, or -1. */
static double write_file(const char *path, int k, int n, int nt, int na)
{
    char stack[401], key[32], name[96], role[32];
    memset(stack, 'x', 400);
    stack[400] = '\0';
    int64_t shape[2] = {64, 64};
    msp_stats_t st = {1.0, -1.0, 0.5, 3.0, 0, 0, 7};
    msp_dump_meta_t meta = {.task = "statistics"};
    double t0 = now();
    msp_writer_t *w;
    if (msp_writer_open(path, &meta, &w) != MSP_OK)
        return -1;
    hid_t file = -1, gcpl = -1;
    char gpath[4200];
    snprintf(gpath, sizeof gpath, "%s.groups", path);
    if (k == GROUPS) {
        hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
        H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18);
        file = H5Fcreate(gpath, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
        H5Pclose(fapl);
        gcpl = H5Pcreate(H5P_GROUP_CREATE);
        H5Pset_obj_track_times(gcpl, 0);
        if (file < 0 || gcpl < 0)
            return -1;
    }
    for (int r = 0; r < n; r++) {
        snprintf(name, sizeof name, "Functional.linear.%d.forward", r);
        if (msp_writer_begin_record(w, name, r) != MSP_OK)
            return -1;
        for (int i = 0; i < nt; i++) {
            snprintf(role, sizeof role, "input.%d", i);
            msp_tensor_in_t t = {.role = role,
                                 .dtype = MSP_DTYPE_FLOAT32,
                                 .ndim = 2,
                                 .shape = shape,
                                 .stats = &st,
                                 .device = "cuda:0"};
            if (msp_writer_add_tensor(w, &t) != MSP_OK)
                return -1;
        }
        for (int a = 0; k == OURS && a < na; a++) {
            snprintf(key, sizeof key, a ? "kwarg.arg%d" : "stack", a);
            if (msp_writer_set_attr(w, key, a ? "None" : stack) != MSP_OK)
                return -1;
        }
        if (k == GROUPS && na > 0) {
            snprintf(name, sizeof name, "Functional.linear.%d.forward", r);
            hid_t g = H5Gcreate2(file, name, H5P_DEFAULT, gcpl, H5P_DEFAULT);
            hid_t s = H5Screate(H5S_SCALAR);
            hid_t o = H5Acreate2(g, "order", H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
            int64_t ord = r;
            int bad = g < 0 || o < 0 || H5Awrite(o, H5T_NATIVE_INT64, &ord) < 0;
            for (int a = 0; !bad && a < na; a++) {
                snprintf(key, sizeof key, a ? "kwarg.arg%d" : "stack", a);
                bad = put_str(g, key, a ? "None" : stack) != 0;
            }
            if (o >= 0)
                H5Aclose(o);
            H5Sclose(s);
            if (g >= 0)
                H5Gclose(g);
            if (bad)
                return -1;
        }
        if (msp_writer_end_record(w) != MSP_OK)
            return -1;
    }
    if (gcpl >= 0)
        H5Pclose(gcpl);
    if (file >= 0 && H5Fclose(file) < 0)
        return -1;
    if (msp_writer_close(w) != MSP_OK)
        return -1;
    double s = now() - t0;
    remove(gpath);
    return s;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: records_bench DIR [N [T [A [ROUNDS]]]]\n");
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 3000, nt = argc > 3 ? atoi(argv[3]) : 3;
    int na = argc > 4 ? atoi(argv[4]) : 2, rounds = argc > 5 ? atoi(argv[5]) : 5;
    if (n < 1 || nt < 0 || na < 0 || rounds < 1) {
        fprintf(stderr, "records_bench: N and ROUNDS must be positive, T and A not negative\n");
        return 2;
    }
    double best[KINDS];
    for (int k = 0; k < KINDS; k++)
        best[k] = 1e30;
    char path[4096];
    for (int round = 0; round < rounds; round++)
        for (int j = 0; j < KINDS; j++) {
            int k = (j + round) % KINDS;
            snprintf(path, sizeof path, "%s/records_bench.%d.h5", argv[1], k);
            double s = write_file(path, k, n, nt, na);
            remove(path);
            if (s < 0) {
                fprintf(stderr, "records_bench: writing %s failed: %s\n", path, msp_last_error());
                return 1;
            }
            if (s < best[k])
                best[k] = s;
        }
    printf("%d statistics records, %d tensors and %d attributes each (best of %d):\n", n, nt, na,
           rounds);
    for (int k = 0; k < KINDS; k++)
        printf("  %-22s %7.2f us a record\n", kind_name[k], best[k] / n * 1e6);
    printf("  ours / groups          %7.2fx\n", best[OURS] / best[GROUPS]);
    printf("  attributes' own cost: ours %.2f us, groups %.2f us a record\n",
           (best[OURS] - best[FLOOR]) / n * 1e6, (best[GROUPS] - best[FLOOR]) / n * 1e6);
    return 0;
}
