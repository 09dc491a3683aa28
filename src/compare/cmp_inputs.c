/* What the user pointed at (format's msp_dump_tree_scan finds the files):
 * single files pair with each other; steps and ranks pair by number. A step
 * whose file cannot be read on either side is skipped with a warning and the
 * rest is compared. */
#include "cmp_internal.h"

#include <stdlib.h>
#include <string.h>

static int cmp_entry_order(const msp_dump_entry_t *x, const msp_dump_entry_t *y)
{
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->writer != y->writer) /* rank{R}-{K} pairs with rank{R}-{K} */
        return x->writer < y->writer ? -1 : 1;
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

static const char *cmp_kind_name(msp_dump_tree_kind_t k)
{
    return k == MSP_TREE_FILE ? "a dump file or rank dir"
                              : (k == MSP_TREE_STEP ? "a step dir" : "a dump root");
}

static msp_err cmp_push_line(char ***v, size_t *n, const char *s)
{
    char *c = strdup(s);
    char **nv = c ? realloc(*v, (*n + 1) * sizeof *nv) : NULL;
    if (!nv) {
        free(c);
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    *v = nv;
    nv[(*n)++] = c;
    return MSP_OK;
}

/* One line in res->unpaired and one warning: a step/rank on one side only,
 * or one skipped because its file cannot be read (that one in res->unread
 * too: the comparison is then incomplete, and the exit status says so). */
static msp_err cmp_note(msp_compare_result_t *res, const char *side, const msp_dump_entry_t *r)
{
    char *s, k[24] = "";
    if (r->writer)
        snprintf(k, sizeof k, "-%lld", (long long)r->writer);
    if (!r->error)
        s = msp_asprintf("step %lld rank %lld%s only in the %s dump (%s)", (long long)r->step,
                         (long long)r->rank, k, side, r->path);
    else if (strstr(r->error, r->path))
        s = msp_asprintf("step %lld rank %lld%s skipped: %s", (long long)r->step,
                         (long long)r->rank, k, r->error);
    else
        s = msp_asprintf("step %lld rank %lld%s skipped: %s: %s", (long long)r->step,
                         (long long)r->rank, k, r->path, r->error);
    if (!s)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    msp_err rc = cmp_push_line(&res->unpaired, &res->n_unpaired, s);
    if (!rc && r->error)
        rc = cmp_push_line(&res->unread, &res->n_unread, s);
    if (!rc)
        msp_log(MSP_LOG_WARN, "%s; not compared", s);
    free(s);
    return rc;
}

msp_err cmp_note_skipped(msp_compare_result_t *res, const cmp_file_pair_t *fp, const char *detail)
{
    int bench_bad = strstr(detail, fp->bench) != NULL;
    msp_dump_entry_t e = {fp->step, fp->rank, fp->writer, bench_bad ? fp->bench : fp->cmp,
                          (char *)detail};
    return cmp_note(res, bench_bad ? "bench" : "compare", &e);
}

static msp_err cmp_scan(const char *path, const char *what, msp_dump_tree_t *t)
{
    msp_err rc = msp_dump_tree_scan(path, 0, t);
    if (rc) {
        char detail[1024];
        snprintf(detail, sizeof detail, "%s", msp_last_error());
        return msp_fail(rc, "%s dump: %s", what, detail);
    }
    if (t->n_left_out)
        msp_log(MSP_LOG_WARN,
                "%s dump: %zu msprobe dump director%s beside this shim's rank directories "
                "left out (%s): Huawei's msprobe wrote it in the same run; name its directory "
                "to compare it",
                what, t->n_left_out, t->n_left_out == 1 ? "y" : "ies", t->left_out);
    return MSP_OK;
}

msp_err cmp_resolve_inputs(const char *bench, const char *cmp, cmp_file_pair_t **pairs_out,
                           size_t *n_out, msp_compare_result_t *res)
{
    msp_dump_tree_t b = {0}, c = {0};
    cmp_file_pair_t *pairs = NULL;
    size_t np = 0;
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
    pairs = calloc(b.n_files + c.n_files + 1, sizeof *pairs);
    if (!pairs) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    if (b.kind == MSP_TREE_STEP) {
        /* two step dirs pair by rank whatever their step numbers */
        for (size_t i = 0; i < b.n_files; i++)
            b.files[i].step = c.files[0].step;
    }
    size_t i = 0, j = 0;
    while (i < b.n_files || j < c.n_files) {
        msp_dump_entry_t *x = i < b.n_files ? &b.files[i] : NULL;
        msp_dump_entry_t *y = j < c.n_files ? &c.files[j] : NULL;
        int o = !x ? 1 : (!y ? -1 : cmp_entry_order(x, y));
        if (b.kind == MSP_TREE_FILE)
            o = 0;
        if (o < 0) {
            i++;
            if ((rc = cmp_note(res, "bench", x)))
                goto cleanup;
        } else if (o > 0) {
            j++;
            if ((rc = cmp_note(res, "compare", y)))
                goto cleanup;
        } else {
            i++;
            j++;
            if (x->error || y->error) {
                if ((x->error && (rc = cmp_note(res, "bench", x))) ||
                    (y->error && (rc = cmp_note(res, "compare", y))))
                    goto cleanup;
                continue;
            }
            pairs[np].step = y->step;
            pairs[np].rank = y->rank;
            pairs[np].writer = y->writer;
            pairs[np].in_tree = b.kind != MSP_TREE_FILE;
            pairs[np].bench = x->path;
            pairs[np].cmp = y->path;
            x->path = NULL;
            y->path = NULL;
            np++;
        }
    }
    if (!np) {
        rc = msp_fail(MSP_ERR_MISMATCH,
                      "bench %s and compare %s share no readable step/rank: nothing to compare",
                      bench, cmp);
        goto cleanup;
    }
cleanup:
    msp_dump_tree_free(&b);
    msp_dump_tree_free(&c);
    if (rc) {
        cmp_file_pairs_free(pairs, np);
        pairs = NULL;
        np = 0;
    }
    *pairs_out = pairs;
    *n_out = np;
    return rc;
}
