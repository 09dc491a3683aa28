/* For the fuzz targets of the parsers that take a path (.npy, .pt,
 * dump.json): a private directory made once per process (mkdtemp, under
 * $TMPDIR or /tmp) and removed with all it holds at exit, and files in it
 * rewritten with each input. A target that cannot write there aborts: a
 * run that parses nothing must not pass. */
#ifndef MSP_FMT_FUZZ_TMP_H
#define MSP_FMT_FUZZ_TMP_H

#include "fmt_foreign.h"

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

static char msp_fuzz_dir_path[512];

static inline int msp_fuzz_rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(p);
    return 0;
}

static inline void msp_fuzz_rm_dir(void)
{
    nftw(msp_fuzz_dir_path, msp_fuzz_rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

static inline void msp_fuzz_die(const char *what, const char *path)
{
    fprintf(stderr, "fuzz target: %s %s\n", what, path);
    abort();
}

/* The private directory, made on first use. */
static inline const char *msp_fuzz_dir(void)
{
    if (!msp_fuzz_dir_path[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(msp_fuzz_dir_path, sizeof msp_fuzz_dir_path, "%s/msp_fuzz_XXXXXX",
                 t && *t ? t : "/tmp");
        if (!mkdtemp(msp_fuzz_dir_path))
            msp_fuzz_die("cannot make a directory like", msp_fuzz_dir_path);
        atexit(msp_fuzz_rm_dir);
    }
    return msp_fuzz_dir_path;
}

/* dir/name (name may hold one '/': its directory is made) rewritten with
 * data; the path goes to path[cap]. */
static inline void msp_fuzz_put(char *path, size_t cap, const char *name, const void *data,
                                size_t size)
{
    snprintf(path, cap, "%s/%s", msp_fuzz_dir(), name);
    char *slash = strrchr(path, '/');
    if (slash > path + strlen(msp_fuzz_dir())) {
        *slash = '\0';
        mkdir(path, 0700);
        *slash = '/';
    }
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        msp_fuzz_die("cannot write", path);
}

/* A torch.save-shaped zip at dir/name: archive/data.pkl = pkl,
 * archive/data/0 = storage, archive/byteorder = "little"; stored, not
 * deflated, as torch writes it. The path goes to path[cap]. */
static inline void msp_fuzz_put_pt(char *path, size_t cap, const char *name, const void *pkl,
                                   size_t pkl_len, const void *storage, size_t storage_len)
{
    snprintf(path, cap, "%s/%s", msp_fuzz_dir(), name);
    static const struct {
        const char *name;
        int which;
    } members[] = {{"archive/data.pkl", 0}, {"archive/data/0", 1}, {"archive/byteorder", 2}};
    int zerr = 0;
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &zerr);
    if (!z)
        msp_fuzz_die("cannot create a zip at", path);
    for (size_t i = 0; i < sizeof members / sizeof members[0]; i++) {
        const void *d = members[i].which == 0 ? pkl : members[i].which == 1 ? storage : "little";
        size_t n = members[i].which == 0 ? pkl_len : members[i].which == 1 ? storage_len : 6;
        zip_source_t *src = zip_source_buffer(z, d, n, 0);
        zip_int64_t idx = src ? zip_file_add(z, members[i].name, src, ZIP_FL_OVERWRITE) : -1;
        if (idx < 0) {
            zip_source_free(src);
            msp_fuzz_die("cannot add a member to", path);
        }
        zip_set_file_compression(z, (zip_uint64_t)idx, ZIP_CM_STORE, 0);
    }
    if (zip_close(z) != 0)
        msp_fuzz_die("cannot write", path);
}

/* MSP_FUZZ_VERBOSE=1 in the environment: each input's outcome on stderr,
 * to see what a seed reaches. */
static inline void msp_fuzz_note(msp_err rc)
{
    static int verbose = -1;
    if (verbose < 0)
        verbose = getenv("MSP_FUZZ_VERBOSE") != NULL;
    if (verbose)
        fprintf(stderr, "fuzz target: %s\n", rc ? msp_last_error() : "ok");
}

/* A loaded tensor is consistent with itself, or a refusal left it zeroed
 * with a detail naming the file. Every element is read (the statistics),
 * so a sanitizer build sees a buffer shorter than the shape says. */
static inline void msp_fuzz_check_raw(msp_err rc, msp_raw_tensor_t *r, const char *path)
{
    msp_fuzz_note(rc);
    if (rc) {
        if (r->data || r->numel || r->ndim || !strstr(msp_last_error(), path))
            msp_fuzz_die("refusal without a clean result or a detail naming", path);
        return;
    }
    int64_t numel = 1;
    for (int i = 0; i < r->ndim; i++)
        numel *= r->shape[i];
    if (!r->dtype || r->ndim < 0 || r->ndim > MSP_MAX_NDIM || numel != r->numel || !r->data)
        msp_fuzz_die("inconsistent tensor from", path);
    msp_stats_t st;
    msp_stats_compute(r->dtype, r->data, (size_t)r->numel, &st);
}

#endif
