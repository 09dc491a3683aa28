/* Record matching between the two sides of one file pair: --mapping pairs
 * first, then exact names, or (with --fuzzy, instead of exact names) the same
 * API/module without its call index, aligned in execution order where the
 * tensor shapes agree. Only the catalogue is consulted, never tensor data. */
#include "cmp_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

int cmp_level_keeps(msp_level_t level, const char *name)
{
    int is_module = strncmp(name, "Module.", 7) == 0;
    /* optimizer steps are neither: both levels keep them (they carry the
     * parameters' error into the next step) */
    int is_optimizer = strncmp(name, "Optimizer.", 10) == 0;
    switch (level) {
    case MSP_LEVEL_API:
        return !is_module;
    case MSP_LEVEL_MODULE:
        return is_module || is_optimizer;
    default:
        return 1;
    }
}

static int cmp_is_digits(const char *s, size_t n)
{
    if (!n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

static int cmp_is_direction(const char *s, size_t n)
{
    return (n == 7 && !strncmp(s, "forward", 7)) || (n == 8 && !strncmp(s, "backward", 8));
}

int cmp_is_forward(const char *name)
{
    const char *p = name;
    while ((p = strstr(p, "forward")) != NULL) {
        int starts = p == name || p[-1] == '.';
        int ends = p[7] == '\0' || p[7] == '.';
        if (starts && ends)
            return 1;
        p += 7;
    }
    return 0;
}

const char *cmp_uninit_api(const char *name)
{
    static const char *const apis[] = {"Torch.empty", "Torch.empty_like", "Torch.empty_strided",
                                       "Tensor.new_empty", "Tensor.new_empty_strided"};
    for (size_t i = 0; i < sizeof apis / sizeof apis[0]; i++) {
        size_t n = strlen(apis[i]);
        /* "Torch.empty_like.1.forward", never "Torch.empty_likeX" */
        if (!strncmp(name, apis[i], n) && name[n] == '.' && name[n + 1] >= '0' &&
            name[n + 1] <= '9')
            return apis[i];
    }
    return NULL;
}

char *cmp_fuzzy_key(const char *name)
{
    /* tokens split on '.'; drop the all-digit token next to forward/backward:
     * API "Torch.matmul.3.forward", module "Module.fc.Linear.forward.0" */
    size_t len = strlen(name);
    const char *tok[256];
    size_t tlen[256], nt = 0;
    const char *s = name;
    while (nt < 256) {
        const char *dot = strchr(s, '.');
        tok[nt] = s;
        tlen[nt] = dot ? (size_t)(dot - s) : strlen(s);
        nt++;
        if (!dot)
            break;
        s = dot + 1;
    }
    long drop = -1;
    for (size_t i = nt; i-- > 0;) {
        if (!cmp_is_digits(tok[i], tlen[i]))
            continue;
        if ((i + 1 < nt && cmp_is_direction(tok[i + 1], tlen[i + 1])) ||
            (i > 0 && cmp_is_direction(tok[i - 1], tlen[i - 1]))) {
            drop = (long)i;
            break;
        }
    }
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < nt; i++) {
        if ((long)i == drop)
            continue;
        if (o)
            out[o++] = '.';
        memcpy(out + o, tok[i], tlen[i]);
        o += tlen[i];
    }
    out[o] = '\0';
    return out;
}

/* A compare-side module record's name with its "name.Class" renamed by the
 * cell entries of map (the whole of it first, else the first entry found
 * in it, its first place), or NULL. */
static char *cmp_cell_rename(const cmp_mapping_t *map, const char *name)
{
    if (!map || strncmp(name, "Module.", 7) != 0)
        return NULL;
    const char *mid = name + 7, *end = NULL;
    for (const char *p = mid; (p = strchr(p, '.')) != NULL; p++)
        if (!strncmp(p, ".forward", 8) || !strncmp(p, ".backward", 9) ||
            !strncmp(p, ".parameters_grad", 16))
            end = p;
    if (!end)
        return NULL;
    size_t ml = (size_t)(end - mid);
    cmp_map_entry_t *hit = NULL;
    const char *at = NULL;
    for (size_t i = 0; i < map->n && !hit; i++)
        if (map->e[i].cell && strlen(map->e[i].cmp) == ml && !strncmp(mid, map->e[i].cmp, ml)) {
            hit = &map->e[i];
            at = mid;
        }
    for (size_t i = 0; i < map->n && !hit; i++) {
        const char *f = map->e[i].cell ? strstr(mid, map->e[i].cmp) : NULL;
        if (f && f + strlen(map->e[i].cmp) <= end) {
            hit = &map->e[i];
            at = f;
        }
    }
    if (!hit)
        return NULL;
    hit->cmp_seen = 1;
    return msp_asprintf("%.*s%s%s", (int)(at - name), name, hit->bench, at + strlen(hit->cmp));
}

/* ---- matching ------------------------------------------------------------ */

typedef struct cmp_named {
    const char *name;
    long idx;
    long order;
} cmp_named_t;

static int cmp_named_by_name(const void *a, const void *b)
{
    const cmp_named_t *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    return x->order < y->order ? -1 : (x->order > y->order);
}

struct cmp_name_key {
    const cmp_named_t *v;
    const char *name;
};

static int cmp_named_before(const void *ctx, size_t i)
{
    const struct cmp_name_key *k = ctx;
    return strcmp(k->v[i].name, k->name) < 0;
}

static long cmp_find(const cmp_named_t *v, size_t n, const char *name)
{
    struct cmp_name_key key = {v, name};
    size_t lo = msp_lower_bound(n, cmp_named_before, &key);
    return lo < n && !strcmp(v[lo].name, name) ? (long)lo : -1;
}

/* 1 when every tensor role both records hold has one shape on both sides,
 * and they hold one at least (or neither holds any). A tensor of one side
 * only does not count against the pair: one dumper records a module's
 * parameters or a keyword argument the other leaves out, as exact names
 * would still pair them. */
static int cmp_same_shapes(const msp_record_info_t *a, const msp_record_info_t *b)
{
    size_t common = 0;
    for (size_t i = 0; i < a->n_tensors; i++) {
        const msp_tensor_info_t *t = &a->tensors[i], *u = NULL;
        for (size_t j = 0; j < b->n_tensors; j++)
            if (!strcmp(b->tensors[j].role, t->role)) {
                u = &b->tensors[j];
                break;
            }
        if (!u)
            continue;
        common++;
        if (u->ndim != t->ndim)
            return 0;
        for (int d = 0; d < t->ndim; d++)
            if (u->shape[d] != t->shape[d])
                return 0;
    }
    return common > 0 || (a->n_tensors == 0 && b->n_tensors == 0);
}

/* name with its last direction token `from` (".backward") turned into `to`
 * (".forward"): the forward call a backward record belongs to, or back.
 * NULL when name holds no such token (or out of memory). */
static char *cmp_swap_direction(const char *name, const char *from, const char *to)
{
    size_t fl = strlen(from);
    const char *at = NULL;
    for (const char *p = name; (p = strstr(p, from)) != NULL; p += fl)
        if (p[fl] == '.' || p[fl] == '\0')
            at = p;
    if (!at)
        return NULL;
    return msp_asprintf("%.*s%s%s", (int)(at - name), name, to, at + fl);
}

/* --fuzzy: the bench partner of compare backward record c is the backward of
 * the bench forward that c's own forward paired with (one call, one index on
 * each side), or -1. A backward record's tensors are no guide: msprobe lists
 * a linear's grads in autograd order, ours by argument, so their shapes
 * differ role by role although the values are the same. */
static long cmp_fuzzy_by_forward(const msp_dump_file_t *bf, const msp_dump_file_t *cf,
                                 const cmp_named_t *bv, size_t nb, const cmp_named_t *cv, size_t nc,
                                 const long *b_used, const long *c_match, size_t c)
{
    char *fwd = cmp_swap_direction(cf->records[c].name, ".backward", ".forward");
    long ci = fwd ? cmp_find(cv, nc, fwd) : -1;
    long bfi = ci >= 0 ? c_match[cv[ci].idx] - 1 : -1;
    char *bwd = bfi >= 0 ? cmp_swap_direction(bf->records[bfi].name, ".forward", ".backward")
                         : NULL;
    long bi = bwd ? cmp_find(bv, nb, bwd) : -1;
    free(fwd);
    free(bwd);
    return bi >= 0 && !b_used[bv[bi].idx] ? bv[bi].idx : -1;
}

/* --fuzzy (msprobe's -f/-fm): the bench records still unmatched, grouped by
 * their name without its call index, in execution order; each compare record
 * (in order) takes the first shape-compatible one after the last taken; a
 * backward record first takes the backward of its forward's partner. */
static msp_err cmp_match_fuzzy(const msp_dump_file_t *bf, const msp_dump_file_t *cf,
                               const msp_compare_opts_t *opts, const cmp_named_t *bv, size_t nb,
                               const cmp_named_t *cv, size_t nc, long *b_used, long *c_match)
{
    msp_err rc = MSP_OK;
    char **bkeys = calloc(bf->n_records + 1, sizeof *bkeys);
    char **ckeys = calloc(cf->n_records + 1, sizeof *ckeys);
    cmp_named_t *fz = calloc(nb + 1, sizeof *fz);
    size_t *cursor = NULL;
    if (!bkeys || !ckeys || !fz) {
        rc = msp_fail(MSP_ERR_NOMEM, "fuzzy matching: out of memory");
        goto cleanup;
    }
    size_t nf = 0;
    for (size_t i = 0; i < nb; i++) {
        long b = bv[i].idx;
        if (b_used[b])
            continue;
        bkeys[b] = cmp_fuzzy_key(bf->records[b].name);
        if (!bkeys[b]) {
            rc = msp_fail(MSP_ERR_NOMEM, "fuzzy matching: out of memory");
            goto cleanup;
        }
        fz[nf++] = (cmp_named_t){bkeys[b], b, (long)bf->records[b].order};
    }
    qsort(fz, nf, sizeof *fz, cmp_named_by_name);
    cursor = calloc(nf + 1, sizeof *cursor);
    if (!cursor) {
        rc = msp_fail(MSP_ERR_NOMEM, "fuzzy matching: out of memory");
        goto cleanup;
    }
    /* cmp records in execution order (the reader sorts records by order) */
    for (size_t c = 0; c < cf->n_records; c++) {
        if (c_match[c] || !cmp_level_keeps(opts->level, cf->records[c].name))
            continue;
        long byf = cmp_fuzzy_by_forward(bf, cf, bv, nb, cv, nc, b_used, c_match, c);
        if (byf >= 0) {
            b_used[byf] = (long)c + 1;
            c_match[c] = byf + 1;
            continue;
        }
        ckeys[c] = cmp_fuzzy_key(cf->records[c].name);
        if (!ckeys[c]) {
            free(cursor);
            rc = msp_fail(MSP_ERR_NOMEM, "fuzzy matching: out of memory");
            goto cleanup;
        }
        long g = cmp_find(fz, nf, ckeys[c]);
        if (g < 0)
            continue;
        size_t start = (size_t)g + cursor[g];
        for (size_t k = start; k < nf && !strcmp(fz[k].name, ckeys[c]); k++) {
            long b = fz[k].idx;
            if (b_used[b] || !cmp_same_shapes(&bf->records[b], &cf->records[c]))
                continue;
            b_used[b] = (long)c + 1;
            c_match[c] = b + 1;
            cursor[g] = k + 1 - (size_t)g;
            break;
        }
    }
    free(cursor);
cleanup:
    if (bkeys)
        for (size_t i = 0; i < bf->n_records; i++)
            free(bkeys[i]);
    if (ckeys)
        for (size_t i = 0; i < cf->n_records; i++)
            free(ckeys[i]);
    free(bkeys);
    free(ckeys);
    free(fz);
    return rc;
}

static int cmp_str_order(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Sets stray on each one-sided pair whose name without call index is also
 * that of a one-sided pair of the other side (cmp_pair_t). */
static msp_err cmp_mark_strays(const msp_dump_file_t *bf, const msp_dump_file_t *cf,
                               cmp_pair_t *pairs, size_t np)
{
    msp_err rc = MSP_OK;
    char **keys = calloc(np + 1, sizeof *keys);
    char **side[2] = {calloc(np + 1, sizeof(char *)), calloc(np + 1, sizeof(char *))};
    size_t ns[2] = {0, 0};
    if (!keys || !side[0] || !side[1]) {
        rc = msp_fail(MSP_ERR_NOMEM, "matching: out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < np; i++) {
        if (pairs[i].b >= 0 && pairs[i].c >= 0)
            continue;
        int k = pairs[i].c >= 0; /* 0: a bench record alone, 1: a compare one */
        const char *name = k ? cf->records[pairs[i].c].name : bf->records[pairs[i].b].name;
        if (!(keys[i] = cmp_fuzzy_key(name))) {
            rc = msp_fail(MSP_ERR_NOMEM, "matching: out of memory");
            goto cleanup;
        }
        side[k][ns[k]++] = keys[i];
    }
    qsort(side[0], ns[0], sizeof(char *), cmp_str_order);
    qsort(side[1], ns[1], sizeof(char *), cmp_str_order);
    for (size_t i = 0; i < np; i++) {
        if (!keys[i])
            continue;
        int other = pairs[i].c < 0; /* a bench record looks among the compare ones */
        pairs[i].stray = bsearch(&keys[i], side[other], ns[other], sizeof(char *), cmp_str_order) !=
                         NULL;
    }
cleanup:
    for (size_t i = 0; keys && i < np; i++)
        free(keys[i]);
    free(keys);
    free(side[0]);
    free(side[1]);
    return rc;
}

/* The records of f that the level keeps, into v by name, then order (their
 * count): in the order of f's records by name when given and no name
 * repeats, else sorted here. */
static size_t cmp_named_of(const msp_dump_file_t *f, const msp_record_info_t *const *names,
                           msp_level_t level, cmp_named_t *v)
{
    size_t n = 0;
    for (size_t i = 0; i < f->n_records; i++) {
        const msp_record_info_t *r = names ? names[i] : &f->records[i];
        if (cmp_level_keeps(level, r->name))
            v[n++] = (cmp_named_t){r->name, (long)(r - f->records), (long)r->order};
    }
    int sorted = names != NULL;
    for (size_t i = 1; sorted && i < n; i++)
        sorted = strcmp(v[i - 1].name, v[i].name) < 0;
    if (!sorted)
        qsort(v, n, sizeof *v, cmp_named_by_name);
    return n;
}

msp_err cmp_match_records(const msp_dump_file_t *bf, const msp_dump_file_t *cf,
                          const msp_record_info_t *const *bnames,
                          const msp_record_info_t *const *cnames, const msp_compare_opts_t *opts,
                          const cmp_mapping_t *map, cmp_pair_t **pairs_out, size_t *n_out)
{
    msp_err rc = MSP_OK;
    size_t nb = 0, nc = 0, np = 0;
    cmp_named_t *bv = calloc(bf->n_records + 1, sizeof *bv);
    cmp_named_t *cv = calloc(cf->n_records + 1, sizeof *cv);
    long *b_used = calloc(bf->n_records + 1, sizeof *b_used);   /* matched cmp idx + 1 */
    long *c_match = calloc(cf->n_records + 1, sizeof *c_match); /* matched bench idx + 1 */
    cmp_pair_t *pairs = calloc(bf->n_records + cf->n_records + 1, sizeof *pairs);
    if (!bv || !cv || !b_used || !c_match || !pairs) {
        rc = msp_fail(MSP_ERR_NOMEM, "matching %s with %s: out of memory", bf->path, cf->path);
        goto cleanup;
    }
    nb = cmp_named_of(bf, bnames, opts->level, bv);
    nc = cmp_named_of(cf, cnames, opts->level, cv);

    if (map) {
        for (size_t m = 0; m < map->n; m++) {
            if (map->e[m].cell)
                continue;
            long bi = cmp_find(bv, nb, map->e[m].bench), ci = cmp_find(cv, nc, map->e[m].cmp);
            map->e[m].bench_seen |= bi >= 0;
            map->e[m].cmp_seen |= ci >= 0;
            /* a data_mapping line of tensor names pairs those two tensors
             * alone (cmp_dm_rows), never their records: as msprobe's -dm */
            if (bi < 0 || ci < 0 || map->e[m].cmp_role)
                continue;
            long b = bv[bi].idx, c = cv[ci].idx;
            if (b_used[b] || c_match[c])
                continue;
            b_used[b] = c + 1;
            c_match[c] = b + 1;
        }
    }
    /* With --fuzzy, names are not trusted: one extra call on one side moves
     * every later index of that API, and relu.1 is then bench's relu.0 (as
     * msprobe's -f/-fm: order, name without index and shapes decide). */
    for (size_t i = 0; !opts->fuzzy && i < nc; i++) {
        long c = cv[i].idx;
        if (c_match[c])
            continue;
        long bi = cmp_find(bv, nb, cv[i].name);
        if (bi < 0 || b_used[bv[bi].idx])
            continue;
        b_used[bv[bi].idx] = c + 1;
        c_match[c] = bv[bi].idx + 1;
    }
    /* msprobe's cell_mapping: module records under another name or class */
    for (size_t i = 0; map && i < nc; i++) {
        long c = cv[i].idx;
        char *renamed = c_match[c] ? NULL : cmp_cell_rename(map, cv[i].name);
        long bi = renamed ? cmp_find(bv, nb, renamed) : -1;
        free(renamed);
        if (bi < 0 || b_used[bv[bi].idx])
            continue;
        for (size_t m = 0; m < map->n; m++)
            if (map->e[m].cell && strstr(bv[bi].name, map->e[m].bench))
                map->e[m].bench_seen = 1;
        b_used[bv[bi].idx] = c + 1;
        c_match[c] = bv[bi].idx + 1;
    }
    if (opts->fuzzy && (rc = cmp_match_fuzzy(bf, cf, opts, bv, nb, cv, nc, b_used, c_match)))
        goto cleanup;
    for (size_t c = 0; c < cf->n_records; c++) {
        if (!cmp_level_keeps(opts->level, cf->records[c].name))
            continue;
        pairs[np++] = (cmp_pair_t){.b = c_match[c] - 1, .c = (long)c};
    }
    for (size_t b = 0; b < bf->n_records; b++) {
        if (b_used[b] || !cmp_level_keeps(opts->level, bf->records[b].name))
            continue;
        pairs[np++] = (cmp_pair_t){.b = (long)b, .c = -1};
    }
    rc = cmp_mark_strays(bf, cf, pairs, np);
cleanup:
    free(bv);
    free(cv);
    free(b_used);
    free(c_match);
    if (rc) {
        free(pairs);
        pairs = NULL;
        np = 0;
    }
    *pairs_out = pairs;
    *n_out = np;
    return rc;
}
