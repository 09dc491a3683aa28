/* Which process of an MPI compare takes which step x rank pair
 * (msprobe-compare(1), MPI), and the lines that say which pairs no process
 * can compare. One process alone takes every pair. */
#include "cmp_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

msp_err cmp_line_push(char ***v, size_t *n, const char *s)
{
    char *d = strdup(s ? s : "");
    char **nv = d ? realloc(*v, (*n + 1) * sizeof *nv) : NULL;
    if (!nv) {
        free(d);
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    }
    *v = nv;
    nv[(*n)++] = d;
    return MSP_OK;
}

void cmp_plan_free(cmp_plan_t *p)
{
    cmp_file_pairs_free(p->fps, p->nfp);
    free(p->owner);
    for (size_t i = 0; i < p->n_only; i++)
        free(p->only[i]);
    free(p->only);
    memset(p, 0, sizeof *p);
}

/* One line per pair a process sees: "S R W" keys of its pairs, then the
 * one-sided lines it found, each as "!text". */
static msp_err cmp_plan_pack(const cmp_file_pair_t *fps, size_t n, char **only, size_t n_only,
                             char **out, size_t *len)
{
    msp_buf_t b = {0};
    msp_buf_put(&b, "", 0); /* no line at all is still a message */
    for (size_t i = 0; i < n + n_only; i++) {
        if (i < n)
            msp_buf_printf(&b, "%lld %lld %lld\n", (long long)fps[i].step, (long long)fps[i].rank,
                           (long long)fps[i].writer);
        else
            msp_buf_printf(&b, "!%s\n", only[i - n]);
    }
    if (b.oom) {
        msp_buf_free(&b);
        return msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    }
    *out = b.data;
    *len = b.len;
    return MSP_OK;
}

typedef struct cmp_seen {
    int64_t step, rank, writer;
    int proc;
} cmp_seen_t;

static int cmp_seen_order(const void *x, const void *y)
{
    const cmp_seen_t *a = x, *b = y;
    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    if (a->writer != b->writer)
        return a->writer < b->writer ? -1 : 1;
    return a->proc - b->proc;
}

static int cmp_i64_order(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* Every process's view (all, lens[p] bytes from process p, as cmp_plan_pack
 * wrote them): its one-sided lines into plan->only (once each), its pairs
 * into *seen (*ns of them, *cap allocated). */
static msp_err cmp_plan_views(const msp_compare_net_t *net, const char *all, const size_t *lens,
                              cmp_plan_t *plan, cmp_seen_t **seenp, size_t *nsp, size_t *capp)
{
    msp_err rc = MSP_OK;
    cmp_seen_t *seen = *seenp;
    size_t ns = *nsp, cap = *capp;
    size_t at = 0;
    for (int p = 0; !rc && p < net->size; p++) {
        const char *s = all + at, *end = all + at + lens[p];
        at += lens[p];
        while (!rc && s < end) {
            const char *nl = memchr(s, '\n', (size_t)(end - s));
            if (!nl)
                nl = end;
            if (*s == '!') {
                char *line = msp_asprintf("%.*s", (int)(nl - s - 1), s + 1);
                if (!line) {
                    rc = msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
                    break;
                }
                /* the same one-sided line from several processes counts once */
                int dup = 0;
                for (size_t i = 0; i < plan->n_only && !dup; i++)
                    dup = !strcmp(plan->only[i], line);
                if (!dup)
                    rc = cmp_line_push(&plan->only, &plan->n_only, line);
                free(line);
            } else {
                long long a, b, c;
                if (sscanf(s, "%lld %lld %lld", &a, &b, &c) == 3) {
                    cmp_seen_t *nv = msp_grow(seen, &cap, ns, sizeof *nv, 64);
                    if (!nv) {
                        rc = msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
                        break;
                    }
                    seen = nv;
                    seen[ns++] = (cmp_seen_t){a, b, c, p};
                }
            }
            s = nl + 1;
        }
    }
    *seenp = seen;
    *nsp = ns;
    *capp = cap;
    return rc;
}

/* Which pairs exist and who compares each (msprobe-compare(1), MPI): every
 * process resolves the paths as it sees them; a pair goes to a process that
 * sees both of its files, and among those processes the ranks are dealt out
 * in turn (the k-th rank of the tree to the (k mod n)-th of them), so the
 * steps of a rank stay together and the processes of a node share its
 * ranks. With shared storage every process sees every file: the ranks are
 * dealt out over all of them. */
msp_err cmp_stream_plan(const char *bench, const char *cmp, const msp_compare_net_t *net,
                        cmp_plan_t *plan)
{
    cmp_file_pair_t *mine = NULL;
    size_t nmine = 0;
    char **only = NULL;
    size_t n_only = 0;
    memset(plan, 0, sizeof *plan);
    /* one-sided and unreadable steps/ranks come back as lines; the unreadable
     * ones ("... skipped: why") are told apart again by the stream's head */
    msp_compare_result_t lines;
    memset(&lines, 0, sizeof lines);
    msp_err rc = cmp_resolve_inputs(bench, cmp, &mine, &nmine, &lines);
    only = lines.unpaired;
    n_only = lines.n_unpaired;
    for (size_t i = 0; i < lines.n_unread; i++)
        free(lines.unread[i]);
    free(lines.unread);
    int alone = !net || net->size <= 1;
    if (rc == MSP_ERR_MISMATCH && !alone) {
        msp_clear_error(); /* this process sees no pair; others may */
        rc = MSP_OK;
    }
    if (alone || rc) {
        if (rc) {
            cmp_file_pairs_free(mine, nmine);
            for (size_t i = 0; i < n_only; i++)
                free(only[i]);
            free(only);
            return rc;
        }
        plan->fps = mine;
        plan->nfp = nmine;
        plan->only = only;
        plan->n_only = n_only;
        plan->owner = calloc(nmine + 1, sizeof *plan->owner);
        return plan->owner ? MSP_OK : msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    }
    /* every process's view, then one list of pairs */
    char *buf = NULL, *all = NULL;
    size_t len = 0, *lens = NULL;
    cmp_seen_t *seen = NULL;
    int64_t *ranks = NULL;
    size_t ns = 0, cap = 0, nr = 0;
    rc = cmp_plan_pack(mine, nmine, only, n_only, &buf, &len);
    if (!rc && !(lens = calloc((size_t)net->size, sizeof *lens)))
        rc = msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
    if (!rc)
        rc = net->allgather(net->ud, buf, len, (void **)&all, lens);
    if (!rc)
        rc = cmp_plan_views(net, all, lens, plan, &seen, &ns, &cap);
    if (rc)
        goto cleanup;
    qsort(seen, ns, sizeof *seen, cmp_seen_order);
    ranks = calloc(ns + 1, sizeof *ranks);
    plan->fps = calloc(ns + 1, sizeof *plan->fps);
    plan->owner = calloc(ns + 1, sizeof *plan->owner);
    if (!ranks || !plan->fps || !plan->owner) {
        rc = msp_fail(MSP_ERR_NOMEM, "compare: out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < ns; i++)
        ranks[nr++] = seen[i].rank;
    qsort(ranks, nr, sizeof *ranks, cmp_i64_order);
    size_t k = 0;
    for (size_t i = 0; i < nr; i++)
        if (i == 0 || ranks[i] != ranks[i - 1])
            ranks[k++] = ranks[i];
    nr = k;
    for (size_t i = 0; i < ns;) {
        size_t j = i;
        while (j < ns && seen[j].step == seen[i].step && seen[j].rank == seen[i].rank &&
               seen[j].writer == seen[i].writer)
            j++;
        int64_t *hit = bsearch(&seen[i].rank, ranks, nr, sizeof *ranks, cmp_i64_order);
        size_t ri = hit ? (size_t)(hit - ranks) : 0;
        int owner = seen[i + ri % (j - i)].proc;
        cmp_file_pair_t *fp = &plan->fps[plan->nfp];
        fp->step = seen[i].step;
        fp->rank = seen[i].rank;
        fp->writer = seen[i].writer;
        fp->in_tree = 1;
        plan->owner[plan->nfp] = owner;
        if (owner == net->rank) {
            /* this process's own paths for it */
            for (size_t m = 0; m < nmine; m++)
                if (mine[m].step == fp->step && mine[m].rank == fp->rank &&
                    mine[m].writer == fp->writer) {
                    fp->bench = mine[m].bench;
                    fp->cmp = mine[m].cmp;
                    fp->in_tree = mine[m].in_tree;
                    mine[m].bench = mine[m].cmp = NULL;
                    break;
                }
        }
        plan->nfp++;
        i = j;
    }
cleanup:
    cmp_file_pairs_free(mine, nmine);
    for (size_t i = 0; i < n_only; i++)
        free(only[i]);
    free(only);
    free(buf);
    free(all);
    free(lens);
    free(seen);
    free(ranks);
    if (!rc && !plan->nfp)
        rc = msp_fail(MSP_ERR_MISMATCH,
                      "bench %s and compare %s share no readable step/rank on any of the %d "
                      "processes: nothing to compare",
                      bench, cmp, net->size);
    if (rc)
        cmp_plan_free(plan);
    return rc;
}
