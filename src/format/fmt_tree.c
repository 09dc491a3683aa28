/* Finding the dump files under what a user pointed at: a dump file, a rank
 * directory (holds dump.h5), a step directory (holds rank{R}/) or a dump root
 * (holds step{N}/rank{R}/). compare and ls both walk trees this one way.
 * Where Huawei's msprobe ran inside a script under our shim, both wrote into
 * one dump root: ours is the dump there, msprobe's is left out. */
#include "msprobe/format.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int msp_tree_is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Digits only, as a number; -1 otherwise. */
static int64_t msp_tree_digits(const char *s, const char *end)
{
    if (s == end)
        return -1;
    int64_t v = 0;
    for (const char *p = s; p < end; p++) {
        if (!isdigit((unsigned char)*p) || v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

/* "step12" -> 12, "rank3" -> 3; with writer non-NULL also "rank3-1" -> 3,
 * *writer = 1 (a second process's directory for rank 3). -1 unless name is
 * prefix followed by that form. */
static int64_t msp_tree_number(const char *name, const char *prefix, int64_t *writer)
{
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl) != 0)
        return -1;
    const char *s = name + pl, *end = s + strlen(s), *dash = writer ? strchr(s, '-') : NULL;
    if (writer)
        *writer = 0;
    if (!dash)
        return msp_tree_digits(s, end);
    int64_t k = msp_tree_digits(dash + 1, end);
    if (k <= 0)
        return -1;
    *writer = k;
    return msp_tree_digits(s, dash);
}

static msp_err msp_tree_add(msp_dump_tree_t *t, size_t *cap, int64_t step, int64_t rank,
                            int64_t writer, char *path, const char *error)
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
    t->files[t->n_files++] = (msp_dump_entry_t){step, rank, writer, path, err};
    return MSP_OK;
}

/* msprobe's directories of a process that knew no rank: 8.x writes
 * stepN/rank/, 26 stepN/proc<PID>/. Both are rank 0 (a single process);
 * *pid gets the PID of a proc<PID> directory, -1 for "rank". -1 otherwise. */
static int64_t msp_tree_single_process(const char *name, int64_t *pid)
{
    if (strcmp(name, "rank") == 0) {
        *pid = -1;
        return 0;
    }
    if (strncmp(name, "proc", 4) != 0 ||
        (*pid = msp_tree_digits(name + 4, name + strlen(name))) < 0)
        return -1;
    return 0;
}

/* Calls fn(t, cap, subdir, number, writer, arg) for each subdirectory of dir
 * named prefix<digits> (for "rank" also prefix<digits>-<K>, and msprobe's
 * "rank" and "proc<PID>", see msp_tree_single_process, with writer -1 - PID
 * for a proc directory until msp_tree_step numbers them); *seen counts them. */
typedef msp_err (*msp_tree_fn)(msp_dump_tree_t *t, size_t *cap, const char *sub, int64_t num,
                               int64_t writer, int64_t arg);

static msp_err msp_tree_each(msp_dump_tree_t *t, size_t *cap, const char *dir, const char *prefix,
                             msp_tree_fn fn, int64_t arg, size_t *seen)
{
    DIR *d = opendir(dir);
    if (!d)
        return msp_fail(MSP_ERR_IO, "cannot read directory %s: %s", dir, strerror(errno));
    msp_err rc = MSP_OK;
    struct dirent *e;
    while (!rc && (e = readdir(d)) != NULL) {
        int64_t writer = 0;
        int is_rank = strcmp(prefix, "rank") == 0;
        int64_t num = msp_tree_number(e->d_name, prefix, is_rank ? &writer : NULL), pid = -1;
        if (num < 0 && is_rank && msp_tree_single_process(e->d_name, &pid) == 0) {
            num = 0;
            writer = pid >= 0 ? -1 - pid : 0;
        }
        if (num < 0)
            continue;
        char *sub = msp_asprintf("%s/%s", dir, e->d_name);
        if (!sub) {
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
            break;
        }
        if (msp_is_dir(sub)) {
            (*seen)++;
            rc = fn(t, cap, sub, num, writer, arg);
        }
        free(sub);
    }
    closedir(d);
    return rc;
}

/* 1 when dir holds a ".dump.h5.PID.part" file: what a killed run left
 * (msprobe-dump(5)); readers ignore it. */
static int msp_tree_only_part(const char *dir)
{
    DIR *d = opendir(dir);
    int found = 0;
    struct dirent *e;
    while (d && !found && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        found = strncmp(e->d_name, ".dump.h5.", 9) == 0 && n > 14 &&
                strcmp(e->d_name + n - 5, ".part") == 0;
    }
    if (d)
        closedir(d);
    return found;
}

/* A rank directory of step `step`: its dump.h5, else msprobe's dump.json,
 * else an entry for the directory itself saying it holds neither (none when
 * it holds only an unfinished .part file). */
static msp_err msp_tree_rank(msp_dump_tree_t *t, size_t *cap, const char *rank_dir, int64_t rank,
                             int64_t writer, int64_t step)
{
    char *p = msp_asprintf("%s/dump.h5", rank_dir);
    struct stat st;
    if (p && lstat(p, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode) &&
        !S_ISDIR(st.st_mode)) /* a FIFO or device would hang whoever opens it */
        return msp_tree_add(t, cap, step, rank, writer, p,
                            "not a regular file (a FIFO, socket or device), not a dump file");
    if (p && !msp_tree_is_file(p)) {
        free(p);
        p = msp_asprintf("%s/dump.json", rank_dir);
        if (p && !msp_tree_is_file(p)) {
            free(p);
            if (msp_tree_only_part(rank_dir))
                return MSP_OK;
            return msp_tree_add(t, cap, step, rank, writer, strdup(rank_dir),
                                "holds neither dump.h5 (msprobe-c) nor dump.json (msprobe)");
        }
    }
    return msp_tree_add(t, cap, step, rank, writer, p, NULL);
}

/* msprobe 26's proc<PID> directories of one step, added from index `from`
 * on with writer -1 - PID: numbered 0, 1, ... in PID order (each a process
 * of its own, as rank{R}-{K} are). */
static void msp_tree_number_procs(msp_dump_tree_t *t, size_t from)
{
    for (int64_t k = 0;; k++) {
        msp_dump_entry_t *low = NULL;
        for (size_t i = from; i < t->n_files; i++)
            if (t->files[i].writer < 0 && (!low || t->files[i].writer > low->writer))
                low = &t->files[i]; /* the smallest PID: the largest -1 - PID */
        if (!low)
            return;
        low->writer = k;
    }
}

/* Whether entry path lies in msprobe's rank/ or proc<PID>/ directory (1), in
 * our rank{R}/ as dump.h5 (0), or else (-1). */
static int msp_tree_whose(const char *path)
{
    const char *end = strrchr(path, '/'), *dir = end;
    while (dir && dir > path && dir[-1] != '/')
        dir--;
    if (!end || !dir)
        return -1;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(end - dir), dir);
    int64_t pid, writer;
    if (msp_tree_single_process(name, &pid) == 0)
        return 1;
    return msp_tree_number(name, "rank", &writer) >= 0 && strcmp(end, "/dump.h5") == 0 ? 0 : -1;
}

/* The entries from `from` on (a step's, or a whole root's): where our shim
 * wrote rank{R}/dump.h5, msprobe's own directories in them are Huawei's
 * msprobe run inside the same script (its PrecisionDebugger under the shim,
 * counting its own steps), not a rank of ours: left out, in every step of
 * the root, and counted for the caller to say so. */
static msp_err msp_tree_leave_msprobe(msp_dump_tree_t *t, size_t from)
{
    int ours = 0;
    for (size_t i = from; i < t->n_files && !ours; i++)
        ours = msp_tree_whose(t->files[i].path) == 0;
    size_t kept = from;
    for (size_t i = from; i < t->n_files; i++) {
        msp_dump_entry_t *e = &t->files[i];
        if (!ours || msp_tree_whose(e->path) != 1) {
            t->files[kept++] = *e;
            continue;
        }
        if (!t->left_out && !(t->left_out = strdup(e->path)))
            return msp_fail(MSP_ERR_NOMEM, "out of memory");
        t->n_left_out++;
        free(e->path);
        free(e->error);
    }
    t->n_files = kept;
    return MSP_OK;
}

static msp_err msp_tree_step(msp_dump_tree_t *t, size_t *cap, const char *step_dir, int64_t step,
                             int64_t unused, int64_t unused2)
{
    (void)unused;
    (void)unused2;
    size_t ranks = 0, from = t->n_files;
    msp_err rc = msp_tree_each(t, cap, step_dir, "rank", msp_tree_rank, step, &ranks);
    msp_tree_number_procs(t, from);
    return rc;
}

static int msp_tree_entry_cmp(const void *a, const void *b)
{
    const msp_dump_entry_t *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->writer != y->writer)
        return x->writer < y->writer ? -1 : 1;
    return strcmp(x->path, y->path);
}

static msp_err msp_tree_walk(const char *path, msp_dump_tree_t *t, size_t *cap)
{
    if (msp_tree_is_file(path)) {
        t->kind = MSP_TREE_FILE;
        return msp_tree_add(t, cap, -1, -1, 0, strdup(path), NULL);
    }
    if (!msp_is_dir(path))
        return msp_fail(MSP_ERR_NOT_FOUND, "%s: %s", path,
                        errno ? strerror(errno) : "not a file or directory");
    char *inner = msp_asprintf("%s/dump.h5", path);
    if (!inner)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if (msp_tree_is_file(inner)) {
        t->kind = MSP_TREE_FILE;
        return msp_tree_add(t, cap, -1, -1, 0, inner, NULL);
    }
    free(inner);
    if (!(inner = msp_asprintf("%s/dump.json", path)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if (msp_tree_is_file(inner)) { /* msprobe's rank directory */
        t->kind = MSP_TREE_FILE;
        return msp_tree_add(t, cap, -1, -1, 0, inner, NULL);
    }
    free(inner);
    size_t steps = 0, ranks = 0;
    msp_err rc = msp_tree_each(t, cap, path, "step", msp_tree_step, 0, &steps);
    if (rc)
        return rc;
    if (steps) {
        t->kind = MSP_TREE_ROOT;
        return msp_tree_leave_msprobe(t, 0);
    }
    /* a step directory: rank{R}/dump.h5 right inside */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t from = t->n_files;
    rc = msp_tree_each(t, cap, path, "rank", msp_tree_rank, msp_tree_number(base, "step", NULL),
                       &ranks);
    if (!rc)
        rc = msp_tree_leave_msprobe(t, from);
    msp_tree_number_procs(t, from);
    if (rc)
        return rc;
    if (ranks) {
        t->kind = MSP_TREE_STEP;
        return MSP_OK;
    }
    return msp_fail(MSP_ERR_NOT_FOUND,
                    "%s: no dump here: expected dump.h5 or dump.json, rank*/dump.h5 or "
                    "step*/rank*/dump.h5 "
                    "(or dump.json; msprobe's rank/ and proc<PID>/ directories too)",
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
    free(t->left_out);
    memset(t, 0, sizeof *t);
}
