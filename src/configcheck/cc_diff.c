/* Comparing two packs item by item into report tables and failure lines. */
#include "cc_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Packages whose version difference is an error; others only warn. */
static const char *const msp_cc_framework_pkgs[] = {
    "python",    "torch",         "torch-npu",  "torchvision", "torchaudio",    "numpy",
    "scipy",     "transformers",  "deepspeed",  "megatron",    "megatron-core", "megatron-lm",
    "mindspeed", "mindspeed-llm", "apex",       "accelerate",  "triton",        "flash-attn",
    "xformers",  "peft",          "tokenizers", "safetensors", "bitsandbytes",  "nvidia-*",
    "mkl",       "intel-openmp",  "jax",        "jaxlib",
};

/* ---- pip ---------------------------------------------------------------- */

typedef struct msp_cc_pkg {
    char *key;
    const char *name, *ver;
    int side;
    size_t pos;
} msp_cc_pkg_t;

static char *msp_cc_norm_pkg(const char *name)
{
    char *out = malloc(strlen(name) + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *p = name; *p; p++) {
        if (*p == '-' || *p == '_' || *p == '.') {
            if (o == out || o[-1] != '-')
                *o++ = '-';
        } else {
            *o++ = (char)((*p >= 'A' && *p <= 'Z') ? *p + 32 : *p);
        }
    }
    *o = '\0';
    return out;
}

/* By name, then bench before cmp, then pack order: the first of a side wins,
 * as import resolves it. */
static int msp_cc_cmp_pkg(const void *a, const void *b)
{
    const msp_cc_pkg_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    if (x->side != y->side)
        return x->side - y->side;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

typedef struct msp_cc_pkgs {
    msp_cc_pkg_t *v;
    size_t n, cap;
} msp_cc_pkgs_t;

static msp_err msp_cc_pkg_add(msp_cc_pkgs_t *pk, const char *name, const char *ver, int side)
{
    char *key = msp_cc_norm_pkg(name);
    msp_cc_pkg_t *np = key ? msp_grow(pk->v, &pk->cap, pk->n, sizeof *np, 256) : NULL;
    if (!np) {
        free(key);
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    pk->v = np;
    pk->v[pk->n] = (msp_cc_pkg_t){.key = key, .name = name, .ver = ver, .side = side, .pos = pk->n};
    pk->n++;
    return MSP_OK;
}

static msp_err msp_cc_pkg_collect(const msp_cc_pack_t *p, int side, msp_cc_pkgs_t *pk)
{
    const cJSON *doc = p->items[MSP_CC_ITEM_PIP];
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "packages");
    if (!cJSON_IsArray(arr))
        return msp_fail(MSP_ERR_FORMAT,
                        "pack %s: member pip.json: \"packages\" missing or not an array", p->path);
    msp_err rc = MSP_OK;
    const char *py = msp_cc_str(doc, "python");
    if (py && (rc = msp_cc_pkg_add(pk, "python", py, side)) != MSP_OK)
        return rc;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        const char *name = msp_cc_str(e, "name"), *ver = msp_cc_str(e, "version");
        if (!name || !ver)
            return msp_fail(MSP_ERR_FORMAT,
                            "pack %s: member pip.json: a package lacks \"name\" or \"version\"",
                            p->path);
        if ((rc = msp_cc_pkg_add(pk, name, ver, side)) != MSP_OK)
            return rc;
    }
    return MSP_OK;
}

/* Packages that exist for one platform only (normalised names). */
static const char *const msp_cc_platform_pkgs[] = {"torch-npu", "nvidia-*",
                                                   "triton",    "cupy*",
                                                   "pynvml",    "nvidia-ml-py",
                                                   "te-*",      "transformer-engine*",
                                                   "apex",      "flash-attn",
                                                   "xformers",  "mindspeed*",
                                                   "torchair",  "torch-tb-profiler-ascend",
                                                   "te"};

/* "2.1.0+cu121" and "2.1.0" are one release built for two platforms. */
static int msp_cc_same_release(const char *a, const char *b)
{
    size_t la = strcspn(a, "+"), lb = strcspn(b, "+");
    return la == lb && strncmp(a, b, la) == 0;
}

static msp_err msp_cc_diff_pip(const msp_cc_pack_t *b, const msp_cc_pack_t *c, int item,
                               const msp_cc_options_t *opt, msp_cc_result_t *r,
                               msp_cc_item_result_t *it)
{
    (void)item, (void)opt, (void)r;
    static const char *const cols[] = {"package", "bench version", "cmp version", "level"};
    int cross = msp_cc_cross_platform(b, c);
    msp_err rc = MSP_OK;
    msp_cc_pkgs_t pk = {0};
    if (!(it->table = msp_cc_table_new(cols, 4)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if ((rc = msp_cc_pkg_collect(b, 0, &pk)) != MSP_OK ||
        (rc = msp_cc_pkg_collect(c, 1, &pk)) != MSP_OK)
        goto cleanup;
    if (pk.n > 1) /* pk.v is NULL for a pip item without packages or python */
        qsort(pk.v, pk.n, sizeof *pk.v, msp_cc_cmp_pkg);
    for (size_t i = 0; i < pk.n;) {
        size_t j = i;
        while (j < pk.n && strcmp(pk.v[j].key, pk.v[i].key) == 0)
            j++;
        const char *bver = NULL, *cver = NULL;
        for (size_t k = j; k-- > i;) /* the first of each side wins */
            *(pk.v[k].side ? &cver : &bver) = pk.v[k].ver;
        const char *key = pk.v[i].key, *name = pk.v[i].name;
        i = j;
        if (msp_cc_streq(bver, cver))
            continue;
        const char *bt = bver ? bver : "<not installed>", *ct = cver ? cver : "<not installed>";
        int plat = cross &&
                   msp_cc_pattern_match(msp_cc_platform_pkgs, MSP_CC_N(msp_cc_platform_pkgs), key);
        if (cross &&
            (plat ? (!bver || !cver) : (bver && cver && msp_cc_same_release(bver, cver)))) {
            /* A platform's own package, or one release built for each platform. */
            size_t row = msp_cc_table_add_row(it->table, MSP_CC_LEVEL_OK);
            msp_cc_table_set_str(it->table, row, 0, name);
            msp_cc_table_set_str(it->table, row, 1, bt);
            msp_cc_table_set_str(it->table, row, 2, ct);
            msp_cc_table_set_str(it->table, row, 3, "info");
            msp_cc_add_info(it, "%s: bench %s vs cmp %s (%s)", name, bt, ct,
                            plat ? "one platform's package"
                                 : "same release, built for each platform");
            continue;
        }
        int err = msp_cc_pattern_match(msp_cc_framework_pkgs, MSP_CC_N(msp_cc_framework_pkgs), key);
        size_t row = msp_cc_table_add_row(it->table, err ? MSP_CC_LEVEL_ERROR : MSP_CC_LEVEL_WARN);
        msp_cc_table_set_str(it->table, row, 0, name);
        msp_cc_table_set_str(it->table, row, 1, bt);
        msp_cc_table_set_str(it->table, row, 2, ct);
        msp_cc_table_set_str(it->table, row, 3, err ? "error" : "warning");
        if (err)
            msp_cc_add_diff(it, name, bt, ct, "");
        else
            it->n_warnings++;
    }
cleanup:
    for (size_t i = 0; i < pk.n; i++)
        free(pk.v[i].key);
    free(pk.v);
    return rc;
}

/* ---- random ------------------------------------------------------------- */

/* Seed calls are grouped by call site: (api, function when the pack has it,
 * file name without directory, line). A dataset that seeds once per sample
 * is one finding, not one per call. */
typedef struct msp_cc_call {
    char *key;  /* api@function@file:line: the group */
    char *site; /* file:line */
    const char *api, *func;
    char *value; /* printed value; NULL = seeded from system entropy */
    size_t pos;  /* order in the pack */
} msp_cc_call_t;

static void msp_cc_calls_free(msp_cc_call_t *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        free(v[i].key);
        free(v[i].site);
        free(v[i].value);
    }
    free(v);
}

static int msp_cc_cmp_call(const void *a, const void *b)
{
    const msp_cc_call_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

/* Calls sorted by group, each group in call order. */
static msp_err msp_cc_calls_load(const msp_cc_pack_t *p, msp_cc_call_t **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(p->items[MSP_CC_ITEM_RANDOM], "calls");
    if (!cJSON_IsArray(arr))
        return msp_fail(MSP_ERR_FORMAT,
                        "pack %s: member random.json: \"calls\" missing or not an array", p->path);
    size_t n = (size_t)cJSON_GetArraySize(arr), k = 0;
    msp_cc_call_t *v = calloc(n + 1, sizeof *v);
    if (!v)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        const char *api = msp_cc_str(e, "api"), *file = msp_cc_str(e, "file");
        const cJSON *line = cJSON_GetObjectItemCaseSensitive(e, "line");
        const cJSON *val = cJSON_GetObjectItemCaseSensitive(e, "value");
        if (!api || !file || !cJSON_IsNumber(line) || !val) {
            msp_cc_calls_free(v, k);
            return msp_fail(MSP_ERR_FORMAT,
                            "pack %s: member random.json: call #%zu lacks \"api\", \"file\", "
                            "\"line\" or \"value\"",
                            p->path, k);
        }
        /* Two checkouts in different directories are still the same call site. */
        const char *base = strrchr(file, '/');
        base = base ? base + 1 : file;
        v[k].api = api;
        v[k].func = msp_cc_str(e, "function");
        v[k].pos = k;
        v[k].site = msp_asprintf("%s:%d", base, line->valueint);
        v[k].value = cJSON_IsString(val) ? strdup(val->valuestring)
                     : cJSON_IsNull(val) ? NULL
                                         : cJSON_PrintUnformatted(val);
        v[k].key = msp_asprintf("%s@%s@%s", api, v[k].func ? v[k].func : "",
                                v[k].site ? v[k].site : "");
        if (!v[k].site || !v[k].key) {
            msp_cc_calls_free(v, k + 1);
            return msp_fail(MSP_ERR_NOMEM, "out of memory");
        }
        k++;
    }
    if (k > 1)
        qsort(v, k, sizeof *v, msp_cc_cmp_call);
    *out = v;
    *nout = k;
    return MSP_OK;
}

typedef struct msp_cc_group {
    const msp_cc_call_t *b, *c; /* first call of the group on each side, or NULL */
    size_t nb, nc;
    size_t first; /* pack position of its first call (bench, else cmp) */
    int side;     /* 0: in the bench pack, 1: cmp only */
} msp_cc_group_t;

static int msp_cc_cmp_group(const void *a, const void *b)
{
    const msp_cc_group_t *x = a, *y = b;
    if (x->side != y->side)
        return x->side - y->side;
    return (x->first > y->first) - (x->first < y->first);
}

static size_t msp_cc_distinct(const msp_cc_call_t *v, size_t n)
{
    /* Calls at one site: count value changes along the calls, a cheap and
     * stable stand-in for distinct values when they are all different. */
    size_t d = n ? 1 : 0;
    for (size_t i = 1; i < n; i++)
        if (!msp_cc_streq(v[i].value, v[i - 1].value))
            d++;
    return d;
}

static void msp_cc_random_row(msp_cc_item_result_t *it, const msp_cc_group_t *g)
{
    size_t n = g->nb < g->nc ? g->nb : g->nc, ndiff = 0, first = (size_t)-1;
    for (size_t k = 0; k < n; k++) {
        const char *x = g->b[k].value, *y = g->c[k].value;
        if (!x || !y || strcmp(x, y) != 0) {
            ndiff++;
            if (first == (size_t)-1)
                first = k;
        }
    }
    int equal = g->nb == g->nc && g->nb > 0 && ndiff == 0;
    if (first == (size_t)-1 && !equal)
        first = n; /* the first call one side has and the other does not */
    size_t at = equal ? 0 : first;
    const msp_cc_call_t *any = g->b ? g->b : g->c;
    const char *bvs = at < g->nb ? (g->b[at].value ? g->b[at].value : "None (system entropy)")
                                 : "<no call>";
    const char *cvs = at < g->nc ? (g->c[at].value ? g->c[at].value : "None (system entropy)")
                                 : "<no call>";
    size_t row = msp_cc_table_add_row(it->table, equal ? MSP_CC_LEVEL_OK : MSP_CC_LEVEL_ERROR);
    msp_cc_table_set_str(it->table, row, 0, any->api);
    msp_cc_table_set_str(it->table, row, 1, any->site);
    if (any->func)
        msp_cc_table_set_str(it->table, row, 2, any->func);
    msp_cc_table_set_num(it->table, row, 3, (double)g->nb);
    msp_cc_table_set_num(it->table, row, 4, (double)g->nc);
    msp_cc_table_set_str(it->table, row, 5, bvs);
    msp_cc_table_set_str(it->table, row, 6, cvs);
    msp_cc_table_set_bool(it->table, row, 7, equal);
    msp_cc_table_set_num(it->table, row, 8,
                         (double)(ndiff + (g->nb > g->nc ? g->nb - g->nc : g->nc - g->nb)));
    if (!equal)
        msp_cc_table_set_num(it->table, row, 9, (double)first);
    msp_cc_table_set_num(it->table, row, 10, (double)msp_cc_distinct(g->b, g->nb));
    msp_cc_table_set_num(it->table, row, 11, (double)msp_cc_distinct(g->c, g->nc));
    if (equal)
        return;
    char *where = any->func ? msp_asprintf("%s at %s in %s", any->api, any->site, any->func)
                            : msp_asprintf("%s at %s", any->api, any->site);
    if (!where)
        return;
    if (g->nb <= 1 && g->nc <= 1)
        msp_cc_add_failed(it, "%s: bench %s vs cmp %s", where, bvs, cvs);
    else
        msp_cc_add_failed(
            it,
            "%s: %zu vs %zu calls, %zu differ (values change %zu times in bench, %zu in cmp); "
            "first at call #%zu: bench %s vs cmp %s",
            where, g->nb, g->nc, ndiff + (g->nb > g->nc ? g->nb - g->nc : g->nc - g->nb),
            msp_cc_distinct(g->b, g->nb), msp_cc_distinct(g->c, g->nc), first, bvs, cvs);
    free(where);
}

static msp_err msp_cc_diff_random(const msp_cc_pack_t *b, const msp_cc_pack_t *c, int item,
                                  const msp_cc_options_t *opt, msp_cc_result_t *r,
                                  msp_cc_item_result_t *it)
{
    (void)item, (void)opt, (void)r;
    static const char *const cols[] = {"api",
                                       "location",
                                       "function",
                                       "bench_calls",
                                       "cmp_calls",
                                       "bench_value",
                                       "cmp_value",
                                       "equal",
                                       "differing_calls",
                                       "first_differing_call",
                                       "bench_value_changes",
                                       "cmp_value_changes"};
    msp_cc_call_t *bv = NULL, *cv = NULL;
    msp_cc_group_t *gs = NULL;
    size_t nb = 0, nc = 0, ng = 0;
    msp_err rc;
    if (!(it->table = msp_cc_table_new(cols, MSP_CC_N(cols))))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if ((rc = msp_cc_calls_load(b, &bv, &nb)) != MSP_OK ||
        (rc = msp_cc_calls_load(c, &cv, &nc)) != MSP_OK)
        goto cleanup;
    if (!(gs = calloc(nb + nc + 1, sizeof *gs))) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    /* Merge join of the two group-sorted lists. */
    for (size_t i = 0, j = 0; i < nb || j < nc;) {
        int d = i >= nb ? 1 : j >= nc ? -1 : strcmp(bv[i].key, cv[j].key);
        msp_cc_group_t *g = &gs[ng++];
        if (d <= 0) {
            g->b = &bv[i];
            while (i + g->nb < nb && strcmp(bv[i + g->nb].key, bv[i].key) == 0)
                g->nb++;
        }
        if (d >= 0) {
            g->c = &cv[j];
            while (j + g->nc < nc && strcmp(cv[j + g->nc].key, cv[j].key) == 0)
                g->nc++;
        }
        g->side = g->b ? 0 : 1;
        g->first = g->b ? g->b->pos : g->c->pos;
        i += g->nb;
        j += g->nc;
    }
    /* Report in call order: bench's sites first, then those only cmp has. */
    if (ng > 1)
        qsort(gs, ng, sizeof *gs, msp_cc_cmp_group);
    for (size_t k = 0; k < ng; k++)
        msp_cc_random_row(it, &gs[k]);
cleanup:
    free(gs);
    msp_cc_calls_free(bv, nb);
    msp_cc_calls_free(cv, nc);
    return rc;
}

/* ---- weights and dataset ------------------------------------------------ */

static double msp_cc_rel(double b, double c)
{
    if (isnan(b) || isnan(c))
        return (isnan(b) && isnan(c)) ? 0.0 : NAN;
    if (isinf(b) || isinf(c))
        return ((b < c) || (b > c)) ? INFINITY : 0.0;
    double m = fmax(fabs(b), fabs(c));
    return m > 0 ? fabs(c - b) / m : 0.0;
}

static char *msp_cc_shape_text(const cJSON *e)
{
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!cJSON_IsArray(shape))
        return strdup("");
    return cJSON_PrintUnformatted(shape);
}

static const char *msp_cc_tensor_dtype(const cJSON *e)
{
    const char *d = msp_cc_str(e, "dtype");
    return d ? d : msp_cc_str(e, "type");
}

static int msp_cc_cmp_named(const void *a, const void *b)
{
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    return strcmp(msp_cc_str(x, "name"), msp_cc_str(y, "name"));
}

static msp_err msp_cc_tensors(const msp_cc_pack_t *p, int idx, const cJSON ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(p->items[idx], "tensors");
    if (!cJSON_IsArray(arr))
        return msp_fail(MSP_ERR_FORMAT, "pack %s: member %s: \"tensors\" missing or not an array",
                        p->path, msp_cc_item_members[idx]);
    size_t cnt = (size_t)cJSON_GetArraySize(arr), k = 0;
    const cJSON **v = calloc(cnt + 1, sizeof *v);
    if (!v)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        if (!msp_cc_str(e, "name") || !msp_cc_str(e, "hash")) {
            free(v);
            return msp_fail(MSP_ERR_FORMAT,
                            "pack %s: member %s: entry #%zu lacks \"name\" or \"hash\"", p->path,
                            msp_cc_item_members[idx], k);
        }
        v[k++] = e;
    }
    *out = v;
    *n = k;
    return MSP_OK;
}

static void msp_cc_tensor_row(msp_cc_item_result_t *it, const cJSON *be, const cJSON *ce)
{
    static const char *const stats[] = {"max", "min", "mean", "norm"};
    const cJSON *any = be ? be : ce;
    const char *name = msp_cc_str(any, "name");
    char *bs = be ? msp_cc_shape_text(be) : NULL, *cs = ce ? msp_cc_shape_text(ce) : NULL;
    const char *bd = be ? msp_cc_tensor_dtype(be) : NULL, *cd = ce ? msp_cc_tensor_dtype(ce) : NULL;
    const char *bh = be ? msp_cc_str(be, "hash") : NULL, *ch = ce ? msp_cc_str(ce, "hash") : NULL;
    int equal = be && ce && msp_cc_streq(bs, cs) && msp_cc_streq(bd ? bd : "", cd ? cd : "") &&
                msp_cc_streq(bh, ch);
    size_t row = msp_cc_table_add_row(it->table, equal ? MSP_CC_LEVEL_OK : MSP_CC_LEVEL_ERROR);
    msp_cc_table_set_str(it->table, row, 0, name);
    msp_cc_table_set_str(it->table, row, 1, be ? bs : "<missing>");
    msp_cc_table_set_str(it->table, row, 2, ce ? cs : "<missing>");
    msp_cc_table_set_str(it->table, row, 3, be ? (bd ? bd : "") : "<missing>");
    msp_cc_table_set_str(it->table, row, 4, ce ? (cd ? cd : "") : "<missing>");
    msp_cc_table_set_str(it->table, row, 5, be ? bh : "<missing>");
    msp_cc_table_set_str(it->table, row, 6, ce ? ch : "<missing>");
    for (int s = 0; s < 4; s++) {
        double x, y;
        if (be && ce &&
            msp_cc_json_get_double(cJSON_GetObjectItemCaseSensitive(be, stats[s]), &x) &&
            msp_cc_json_get_double(cJSON_GetObjectItemCaseSensitive(ce, stats[s]), &y)) {
            double rel = msp_cc_rel(x, y);
            if (isfinite(rel))
                msp_cc_table_set_num(it->table, row, (size_t)(7 + s), rel);
            else
                msp_cc_table_set_str(it->table, row, (size_t)(7 + s), isnan(rel) ? "nan" : "inf");
        }
    }
    msp_cc_table_set_bool(it->table, row, 11, equal);
    if (!equal) {
        if (!be || !ce)
            msp_cc_add_failed(it, "%s: only in the %s pack", name, be ? "bench" : "cmp");
        else if (!msp_cc_streq(bs, cs) || !msp_cc_streq(bd ? bd : "", cd ? cd : ""))
            msp_cc_add_failed(it, "%s: shape/dtype %s %s vs %s %s", name, bs, bd ? bd : "", cs,
                              cd ? cd : "");
        else {
            /* Hash prefixes long enough to include the first differing digit. */
            int k = 0;
            while (bh[k] && bh[k] == ch[k])
                k++;
            int w = k + 1 > 12 ? k + 1 : 12;
            msp_cc_add_failed(it, "%s: contents differ (hash %.*s vs %.*s)", name, w, bh, w, ch);
        }
    }
    free(bs);
    free(cs);
}

static msp_err msp_cc_diff_tensors(const msp_cc_pack_t *b, const msp_cc_pack_t *c, int idx,
                                   const msp_cc_options_t *opt, msp_cc_result_t *r,
                                   msp_cc_item_result_t *it)
{
    (void)opt, (void)r;
    static const char *const cols[] = {
        "name",     "bench_shape",  "cmp_shape",    "bench_dtype",   "cmp_dtype",     "bench_hash",
        "cmp_hash", "max_rel_diff", "min_rel_diff", "mean_rel_diff", "norm_rel_diff", "equal"};
    const cJSON **bv = NULL, **cv = NULL, **cs = NULL;
    unsigned char *used = NULL;
    size_t nb = 0, nc = 0;
    msp_err rc;
    if (!(it->table = msp_cc_table_new(cols, 12)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if ((rc = msp_cc_tensors(b, idx, &bv, &nb)) != MSP_OK ||
        (rc = msp_cc_tensors(c, idx, &cv, &nc)) != MSP_OK)
        goto cleanup;
    cs = malloc((nc + 1) * sizeof *cs);
    used = calloc(nc + 1, 1);
    if (!cs || !used) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    if (nc) { /* cv may be NULL then: memcpy and qsort want a real pointer */
        memcpy(cs, cv, nc * sizeof *cs);
        qsort(cs, nc, sizeof *cs, msp_cc_cmp_named);
    }
    for (size_t i = 0; i < nb; i++) {
        const cJSON **hit = bsearch(&bv[i], cs, nc, sizeof *cs, msp_cc_cmp_named);
        if (hit && used[hit - cs])
            hit = NULL;
        if (hit)
            used[hit - cs] = 1;
        msp_cc_tensor_row(it, bv[i], hit ? *hit : NULL);
    }
    for (size_t j = 0; j < nc; j++) {
        const cJSON **hit = bsearch(&cv[j], cs, nc, sizeof *cs, msp_cc_cmp_named);
        if (hit && !used[hit - cs]) {
            used[hit - cs] = 1;
            msp_cc_tensor_row(it, NULL, cv[j]);
        }
    }
cleanup:
    free(bv);
    free(cv);
    free(cs);
    free(used);
    return rc;
}

/* 1 when exactly one of the packs comes from an NPU run (see msp_cc_platform). */
/* ---- driver ------------------------------------------------------------- */

/* Each item's diff, by item (msprobe/configcheck.h): its name is
 * msp_cc_item_names[i], its pack member msp_cc_item_members[i]
 * (cc_pack_read.c); the collectors that fill it run in the training process
 * (the shim's py_cc.c) or, for env and pip, in `msprobe config_check -d`. */
typedef msp_err (*msp_cc_diff_fn)(const msp_cc_pack_t *b, const msp_cc_pack_t *c, int item,
                                  const msp_cc_options_t *opt, msp_cc_result_t *r,
                                  msp_cc_item_result_t *it);
static const msp_cc_diff_fn msp_cc_diffs[MSP_CC_N_ITEMS] = {
    [MSP_CC_ITEM_ENV] = msp_cc_diff_env,         [MSP_CC_ITEM_PIP] = msp_cc_diff_pip,
    [MSP_CC_ITEM_DATASET] = msp_cc_diff_tensors, [MSP_CC_ITEM_WEIGHTS] = msp_cc_diff_tensors,
    [MSP_CC_ITEM_RANDOM] = msp_cc_diff_random,   [MSP_CC_ITEM_HYPER] = msp_cc_diff_hyper,
};

msp_err msp_cc_compare_packs(const msp_cc_pack_t *b, const msp_cc_pack_t *c,
                             const msp_cc_options_t *opt, msp_cc_result_t **out)
{
    *out = NULL;
    msp_err rc = MSP_OK;
    msp_cc_result_t *r = calloc(1, sizeof *r);
    if (!r)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    r->bench_path = strdup(b->path);
    r->cmp_path = strdup(c->path);
    for (int i = 0; i < MSP_CC_N_ITEMS; i++) {
        msp_cc_item_result_t *it = &r->items[i];
        it->name = msp_cc_item_names[i];
        it->status = MSP_CC_PASS;
        if (!b->items[i] && !c->items[i]) {
            it->status = MSP_CC_NA;
            it->note = msp_asprintf("in neither pack");
            continue;
        }
        if (!b->items[i] || !c->items[i]) {
            it->status = MSP_CC_FAIL;
            it->note = msp_asprintf("%s is missing from the %s pack %s (a static -d pack holds "
                                    "only env and pip)",
                                    msp_cc_item_members[i], b->items[i] ? "cmp" : "bench",
                                    b->items[i] ? c->path : b->path);
            continue;
        }
        if ((rc = msp_cc_diffs[i](b, c, i, opt, r, it)) != MSP_OK)
            break;
    }
    if (rc != MSP_OK) {
        msp_cc_result_free(r);
        return rc;
    }
    *out = r;
    return MSP_OK;
}

msp_err msp_cc_compare(const char *bench_zip, const char *cmp_zip, const msp_cc_options_t *opt,
                       msp_cc_result_t **out)
{
    *out = NULL;
    msp_cc_pack_t b = {0}, c = {0};
    size_t cap = opt && opt->max_member_bytes ? opt->max_member_bytes : MSP_CC_DEFAULT_MAX_MEMBER;
    msp_err rc = msp_cc_pack_read(bench_zip, cap, &b);
    if (rc == MSP_OK)
        rc = msp_cc_pack_read(cmp_zip, cap, &c);
    if (rc == MSP_OK)
        rc = msp_cc_compare_packs(&b, &c, opt, out);
    msp_cc_pack_free(&b);
    msp_cc_pack_free(&c);
    return rc;
}

int msp_cc_result_failed(const msp_cc_result_t *r)
{
    for (int i = 0; r && i < MSP_CC_N_ITEMS; i++)
        if (r->items[i].status == MSP_CC_FAIL)
            return 1;
    return 0;
}

void msp_cc_result_free(msp_cc_result_t *r)
{
    if (!r)
        return;
    for (int i = 0; i < MSP_CC_N_ITEMS; i++) {
        msp_cc_item_result_t *it = &r->items[i];
        free(it->note);
        for (size_t j = 0; j < it->n_failed; j++)
            free(it->failed[j]);
        free(it->failed);
        for (size_t j = 0; j < it->n_info; j++)
            free(it->info[j]);
        free(it->info);
        msp_cc_table_free(it->table);
    }
    free(r->bench_path);
    free(r->cmp_path);
    free(r);
}
