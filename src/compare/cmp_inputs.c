/* What the user pointed at: a dump.h5 file, a rank dir (holds dump.h5), a step
 * dir (holds rank*), or a dump root (holds step*). Single files pair with each
 * other; steps and ranks pair by number. */
#include "cmp_internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum cmp_kind { CMP_KIND_FILE, CMP_KIND_STEP, CMP_KIND_ROOT };

typedef struct cmp_side {
    enum cmp_kind kind;
    cmp_file_ref_t *refs;
    size_t n, cap;
} cmp_side_t;

static void cmp_side_free(cmp_side_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->refs[i].path);
    free(s->refs);
}

static int cmp_is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* "step12" -> 12; -1 if name is not prefix followed by digits only */
static int64_t cmp_numbered(const char *name, const char *prefix)
{
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl) || !name[pl])
        return -1;
    for (const char *p = name + pl; *p; p++)
        if (!isdigit((unsigned char)*p))
            return -1;
    return strtoll(name + pl, NULL, 10);
}

static msp_err cmp_side_add(cmp_side_t *s, int64_t step, int64_t rank, char *path)
{
    if (!path)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    cmp_file_ref_t *nr = msp_grow(s->refs, &s->cap, s->n, sizeof *nr, 16);
    if (!nr) {
        free(path);
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    s->refs = nr;
    s->refs[s->n++] = (cmp_file_ref_t){step, rank, path};
    return MSP_OK;
}

/* Add each dir/rankR/dump.h5 of one step dir; counts the rank dirs in *seen. */
static msp_err cmp_scan_step(cmp_side_t *s, const char *dir, int64_t step, size_t *seen)
{
    DIR *d = opendir(dir);
    if (!d)
        return msp_fail(MSP_ERR_IO, "cannot read directory %s: %s", dir, strerror(errno));
    msp_err rc = MSP_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int64_t rank = cmp_numbered(e->d_name, "rank");
        if (rank < 0)
            continue;
        char *p = msp_asprintf("%s/%s/dump.h5", dir, e->d_name);
        if (p && !cmp_is_file(p)) {
            msp_log(MSP_LOG_WARN, "%s has no dump.h5; skipped", p);
            free(p);
            continue;
        }
        (*seen)++;
        if ((rc = cmp_side_add(s, step, rank, p)))
            break;
    }
    closedir(d);
    return rc;
}

static msp_err cmp_scan(const char *path, const char *what, cmp_side_t *s)
{
    msp_err rc = MSP_OK;
    if (cmp_is_file(path)) {
        s->kind = CMP_KIND_FILE;
        return cmp_side_add(s, -1, -1, strdup(path));
    }
    if (!msp_is_dir(path))
        return msp_fail(MSP_ERR_NOT_FOUND, "%s dump %s does not exist", what, path);
    char *inner = msp_asprintf("%s/dump.h5", path);
    if (!inner)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if (cmp_is_file(inner)) {
        s->kind = CMP_KIND_FILE;
        return cmp_side_add(s, -1, -1, inner);
    }
    free(inner);
    DIR *d = opendir(path);
    if (!d)
        return msp_fail(MSP_ERR_IO, "cannot read directory %s: %s", path, strerror(errno));
    size_t steps = 0, ranks = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && !rc) {
        int64_t step = cmp_numbered(e->d_name, "step");
        if (step >= 0) {
            char *sd = msp_asprintf("%s/%s", path, e->d_name);
            if (!sd) {
                rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
                break;
            }
            if (msp_is_dir(sd)) {
                steps++;
                rc = cmp_scan_step(s, sd, step, &ranks);
            }
            free(sd);
        }
    }
    closedir(d);
    if (rc)
        return rc;
    if (steps) {
        s->kind = CMP_KIND_ROOT;
        return MSP_OK;
    }
    /* a step dir: rankR/dump.h5 directly inside */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if ((rc = cmp_scan_step(s, path, cmp_numbered(base, "step"), &ranks)))
        return rc;
    if (ranks) {
        s->kind = CMP_KIND_STEP;
        return MSP_OK;
    }
    return msp_fail(MSP_ERR_NOT_FOUND,
                    "%s dump %s: no dump.h5, rank*/dump.h5 or step*/rank*/dump.h5 inside; "
                    "pass a dump file, a rank dir, a step dir or a dump root",
                    what, path);
}

static int cmp_ref_order(const void *a, const void *b)
{
    const cmp_file_ref_t *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return 0;
}

void cmp_file_pairs_free(cmp_file_pair_t *p, size_t n)
{
    if (!p)
        return;
    for (size_t i = 0; i < n; i++) {
        free(p[i].bench);
        free(p[i].cmp);
    }
    free(p);
}

static const char *cmp_kind_name(enum cmp_kind k)
{
    return k == CMP_KIND_FILE ? "a dump file or rank dir"
                              : (k == CMP_KIND_STEP ? "a step dir" : "a dump root");
}

static msp_err cmp_note_only(char ***only, size_t *n_only, const char *side, const cmp_file_ref_t *r)
{
    char *s = msp_asprintf("step %lld rank %lld only in the %s dump (%s)", (long long)r->step,
                           (long long)r->rank, side, r->path);
    if (!s)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    char **nv = realloc(*only, (*n_only + 1) * sizeof *nv);
    if (!nv) {
        free(s);
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    *only = nv;
    nv[(*n_only)++] = s;
    msp_log(MSP_LOG_WARN, "%s; not compared", s);
    return MSP_OK;
}

msp_err cmp_resolve_inputs(const char *bench, const char *cmp, cmp_file_pair_t **pairs_out,
                           size_t *n_out, char ***only, size_t *n_only)
{
    cmp_side_t b = {0}, c = {0};
    cmp_file_pair_t *pairs = NULL;
    size_t np = 0;
    *only = NULL;
    *n_only = 0;
    msp_err rc = cmp_scan(bench, "bench", &b);
    if (!rc)
        rc = cmp_scan(cmp, "compare", &c);
    if (rc)
        goto cleanup;
    if (b.kind != c.kind) {
        rc = msp_fail(MSP_ERR_USAGE, "bench %s is %s but compare %s is %s; pass two of a kind",
                      bench, cmp_kind_name(b.kind), cmp, cmp_kind_name(c.kind));
        goto cleanup;
    }
    qsort(b.refs, b.n, sizeof *b.refs, cmp_ref_order);
    qsort(c.refs, c.n, sizeof *c.refs, cmp_ref_order);
    pairs = calloc(b.n + c.n + 1, sizeof *pairs);
    if (!pairs) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    if (b.kind == CMP_KIND_STEP) {
        /* two step dirs pair by rank whatever their step numbers */
        for (size_t i = 0; i < b.n; i++)
            b.refs[i].step = c.refs[0].step;
    }
    size_t i = 0, j = 0;
    while (i < b.n || j < c.n) {
        int o = i == b.n ? 1 : (j == c.n ? -1 : cmp_ref_order(&b.refs[i], &c.refs[j]));
        if (b.kind == CMP_KIND_FILE)
            o = 0;
        if (o < 0) {
            if ((rc = cmp_note_only(only, n_only, "bench", &b.refs[i++])))
                goto cleanup;
        } else if (o > 0) {
            if ((rc = cmp_note_only(only, n_only, "compare", &c.refs[j++])))
                goto cleanup;
        } else {
            pairs[np].step = c.refs[j].step;
            pairs[np].rank = c.refs[j].rank;
            pairs[np].bench = b.refs[i].path;
            pairs[np].cmp = c.refs[j].path;
            b.refs[i++].path = NULL;
            c.refs[j++].path = NULL;
            np++;
        }
    }
    if (!np) {
        rc = msp_fail(MSP_ERR_MISMATCH,
                      "bench %s and compare %s share no step/rank: nothing to compare", bench,
                      cmp);
        goto cleanup;
    }
cleanup:
    cmp_side_free(&b);
    cmp_side_free(&c);
    if (rc) {
        cmp_file_pairs_free(pairs, np);
        pairs = NULL;
        np = 0;
    }
    *pairs_out = pairs;
    *n_out = np;
    return rc;
}
