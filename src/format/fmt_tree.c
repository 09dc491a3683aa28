/* Finding the dump files under what a user pointed at: a dump file, a rank
 * directory (holds dump.h5), a step directory (holds rank{R}/) or a dump root
 * (holds step{N}/rank{R}/). compare and ls both walk trees this one way. */
#include "msprobe/format.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int msp_tree_is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* "step12" -> 12; -1 unless name is prefix followed by digits only. */
static int64_t msp_tree_number(const char *name, const char *prefix)
{
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl) != 0 || !name[pl])
        return -1;
    for (const char *p = name + pl; *p; p++)
        if (!isdigit((unsigned char)*p))
            return -1;
    errno = 0;
    long long v = strtoll(name + pl, NULL, 10);
    return errno ? -1 : (int64_t)v;
}

static msp_err msp_tree_add(msp_dump_tree_t *t, size_t *cap, int64_t step, int64_t rank,
                            char *path, const char *error)
{
    char *err = NULL;
    if (!path || (error && !(err = strdup(error)))) {
        free(path);
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    msp_dump_entry_t *nv = msp_grow(t->files, cap, t->n_files, sizeof *nv, 16);
    if (!nv) {
        free(path);
        free(err);
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    t->files = nv;
    t->files[t->n_files++] = (msp_dump_entry_t){step, rank, path, err};
    return MSP_OK;
}

/* Calls fn(t, cap, subdir, number, arg) for each subdirectory of dir named
 * prefix<digits>; *seen counts them. */
typedef msp_err (*msp_tree_fn)(msp_dump_tree_t *t, size_t *cap, const char *sub, int64_t num,
                               int64_t arg);

static msp_err msp_tree_each(msp_dump_tree_t *t, size_t *cap, const char *dir,
                             const char *prefix, msp_tree_fn fn, int64_t arg, size_t *seen)
{
    DIR *d = opendir(dir);
    if (!d)
        return msp_fail(MSP_ERR_IO, "cannot read directory %s: %s", dir, strerror(errno));
    msp_err rc = MSP_OK;
    struct dirent *e;
    while (!rc && (e = readdir(d)) != NULL) {
        int64_t num = msp_tree_number(e->d_name, prefix);
        if (num < 0)
            continue;
        char *sub = msp_asprintf("%s/%s", dir, e->d_name);
        if (!sub) {
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
            break;
        }
        if (msp_is_dir(sub)) {
            (*seen)++;
            rc = fn(t, cap, sub, num, arg);
        }
        free(sub);
    }
    closedir(d);
    return rc;
}

/* A rank directory of step `step`: its dump.h5, else msprobe's dump.json,
 * else an entry for the directory itself saying it holds neither. */
static msp_err msp_tree_rank(msp_dump_tree_t *t, size_t *cap, const char *rank_dir, int64_t rank,
                             int64_t step)
{
    char *p = msp_asprintf("%s/dump.h5", rank_dir);
    if (p && !msp_tree_is_file(p)) {
        free(p);
        p = msp_asprintf("%s/dump.json", rank_dir);
        if (p && !msp_tree_is_file(p)) {
            free(p);
            return msp_tree_add(t, cap, step, rank, strdup(rank_dir),
                                "holds neither dump.h5 (msprobe-c) nor dump.json (msprobe)");
        }
    }
    return msp_tree_add(t, cap, step, rank, p, NULL);
}

static msp_err msp_tree_step(msp_dump_tree_t *t, size_t *cap, const char *step_dir, int64_t step,
                             int64_t unused)
{
    (void)unused;
    size_t ranks = 0;
    return msp_tree_each(t, cap, step_dir, "rank", msp_tree_rank, step, &ranks);
}

static int msp_tree_entry_cmp(const void *a, const void *b)
{
    const msp_dump_entry_t *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return strcmp(x->path, y->path);
}

static msp_err msp_tree_walk(const char *path, msp_dump_tree_t *t, size_t *cap)
{
    if (msp_tree_is_file(path)) {
        t->kind = MSP_TREE_FILE;
        return msp_tree_add(t, cap, -1, -1, strdup(path), NULL);
    }
    if (!msp_is_dir(path))
        return msp_fail(MSP_ERR_NOT_FOUND, "%s: %s", path,
                        errno ? strerror(errno) : "not a file or directory");
    char *inner = msp_asprintf("%s/dump.h5", path);
    if (!inner)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if (msp_tree_is_file(inner)) {
        t->kind = MSP_TREE_FILE;
        return msp_tree_add(t, cap, -1, -1, inner, NULL);
    }
    free(inner);
    if (!(inner = msp_asprintf("%s/dump.json", path)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if (msp_tree_is_file(inner)) { /* msprobe's rank directory */
        t->kind = MSP_TREE_FILE;
        return msp_tree_add(t, cap, -1, -1, inner, NULL);
    }
    free(inner);
    size_t steps = 0, ranks = 0;
    msp_err rc = msp_tree_each(t, cap, path, "step", msp_tree_step, 0, &steps);
    if (rc)
        return rc;
    if (steps) {
        t->kind = MSP_TREE_ROOT;
        return MSP_OK;
    }
    /* a step directory: rank{R}/dump.h5 right inside */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if ((rc = msp_tree_each(t, cap, path, "rank", msp_tree_rank, msp_tree_number(base, "step"),
                            &ranks)))
        return rc;
    if (ranks) {
        t->kind = MSP_TREE_STEP;
        return MSP_OK;
    }
    return msp_fail(MSP_ERR_NOT_FOUND,
                    "%s: no dump here: expected dump.h5 or dump.json, rank*/dump.h5 or step*/rank*/dump.h5 "
                    "(or dump.json)",
                    path);
}

msp_err msp_dump_tree_scan(const char *path, int check, msp_dump_tree_t *out)
{
    memset(out, 0, sizeof *out);
    size_t cap = 0;
    errno = 0;
    msp_err rc = msp_tree_walk(path, out, &cap);
    if (rc)
        goto cleanup;
    if (out->n_files > 1)
        qsort(out->files, out->n_files, sizeof *out->files, msp_tree_entry_cmp);
    /* A file the user named is theirs to get an error about; inside a
     * directory one bad step must not hide the others. */
    for (size_t i = 0; check && out->kind != MSP_TREE_FILE && i < out->n_files; i++) {
        msp_dump_entry_t *f = &out->files[i];
        if (f->error)
            continue;
        msp_dump_file_t *df = NULL;
        msp_err orc = msp_dump_open(f->path, &df);
        msp_dump_close(df);
        if (orc == MSP_ERR_NOMEM) {
            rc = orc;
            goto cleanup;
        }
        if (orc && !(f->error = strdup(msp_last_error()))) {
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
            goto cleanup;
        }
    }
    msp_clear_error();
cleanup:
    if (rc)
        msp_dump_tree_free(out);
    return rc;
}

void msp_dump_tree_free(msp_dump_tree_t *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_files; i++) {
        free(t->files[i].path);
        free(t->files[i].error);
    }
    free(t->files);
    memset(t, 0, sizeof *t);
}
