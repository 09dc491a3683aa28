/* Comparing two packs item by item into report tables and failure lines. */
#include "cc_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Determinism and parallelism switches compared by default (see
 * msprobe-config_check(1)); a trailing '*' matches a prefix. */
static const char *const msp_cc_default_env_keys[] = {
    "CUBLAS_*", "CUDNN_*", "CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_MAX_CONNECTIONS",
    "NVIDIA_TF32_OVERRIDE", "ASCEND_RT_VISIBLE_DEVICES", "ASCEND_LAUNCH_BLOCKING", "INF_NAN_MODE_ENABLE",
    "HCCL_*", "NCCL_*", "PYTHONHASHSEED", "OMP_*", "KMP_*", "MKL_*", "OPENBLAS_*", "TORCH_*", "PYTORCH_*",
    "TF_ENABLE_ONEDNN_OPTS", "ONEDNN_*", "DNNL_*", "TOKENIZERS_PARALLELISM", "WORLD_SIZE",
};

/* Packages whose version difference is an error; others only warn. */
static const char *const msp_cc_framework_pkgs[] = {
    "python", "torch", "torch-npu", "torchvision", "torchaudio", "numpy", "scipy", "transformers",
    "deepspeed", "megatron", "megatron-core", "megatron-lm", "mindspeed", "mindspeed-llm", "apex",
    "accelerate", "triton", "flash-attn", "xformers", "peft", "tokenizers", "safetensors", "bitsandbytes",
    "nvidia-*", "mkl", "intel-openmp", "jax", "jaxlib",
};

typedef struct msp_cc_keys {
    char **pats;
    size_t n;
} msp_cc_keys_t;

static void msp_cc_keys_free(msp_cc_keys_t *k)
{
    for (size_t i = 0; i < k->n; i++)
        free(k->pats[i]);
    free(k->pats);
    k->pats = NULL;
    k->n = 0;
}

static msp_err msp_cc_keys_add(msp_cc_keys_t *k, const char *s, size_t len)
{
    while (len && (*s == ' ' || *s == '\t'))
        s++, len--;
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r'))
        len--;
    if (!len || *s == '#')
        return MSP_OK;
    char **np = realloc(k->pats, (k->n + 1) * sizeof *np);
    if (!np)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    k->pats = np;
    if (!(k->pats[k->n] = strndup(s, len)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    k->n++;
    return MSP_OK;
}

static msp_err msp_cc_keys_load(const char *spec, msp_cc_keys_t *k)
{
    msp_err rc = MSP_OK;
    char *text = NULL;
    if (!spec) {
        for (size_t i = 0; i < sizeof msp_cc_default_env_keys / sizeof msp_cc_default_env_keys[0]; i++)
            if ((rc = msp_cc_keys_add(k, msp_cc_default_env_keys[i], strlen(msp_cc_default_env_keys[i]))) != MSP_OK)
                return rc;
        return MSP_OK;
    }
    char sep = ',';
    const char *src = spec;
    if (!strchr(spec, ',') && access(spec, R_OK) == 0 && !msp_is_dir(spec)) {
        if ((rc = msp_read_file(spec, (size_t)1 << 20, &text, NULL)) != MSP_OK)
            return rc;
        src = text;
        sep = '\n';
    }
    for (const char *p = src;;) {
        const char *e = strchr(p, sep);
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if ((rc = msp_cc_keys_add(k, p, n)) != MSP_OK)
            break;
        if (!e)
            break;
        p = e + 1;
    }
    free(text);
    if (rc == MSP_OK && k->n == 0)
        rc = msp_fail(MSP_ERR_USAGE, "--env-keys %s: no keys given", spec);
    return rc;
}

static int msp_cc_pattern_match(const char *const *pats, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(pats[i]);
        if (len && pats[i][len - 1] == '*') {
            if (strncmp(key, pats[i], len - 1) == 0)
                return 1;
        } else if (strcmp(key, pats[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

static void msp_cc_add_failed(msp_cc_item_result_t *it, const char *fmt, ...) MSP_PRINTF(2, 3);
static void msp_cc_add_failed(msp_cc_item_result_t *it, const char *fmt, ...)
{
    it->status = MSP_CC_FAIL;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    char **nf = realloc(it->failed, (it->n_failed + 1) * sizeof *nf);
    if (!nf)
        return;
    it->failed = nf;
    if ((it->failed[it->n_failed] = strdup(line)))
        it->n_failed++;
}

static int msp_cc_cmp_strp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static const char *msp_cc_str(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int msp_cc_streq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/* ---- env ---------------------------------------------------------------- */

static msp_err msp_cc_diff_env(const msp_cc_pack_t *b, const msp_cc_pack_t *c, const msp_cc_options_t *opt,
                               msp_cc_result_t *r, msp_cc_item_result_t *it)
{
    static const char *const cols[] = {"key", "bench_value", "cmp_value", "level"};
    msp_err rc = MSP_OK;
    msp_cc_keys_t keys = {0};
    const char **names = NULL;
    if (!(it->table = msp_cc_table_new(cols, 4)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if ((rc = msp_cc_keys_load(opt ? opt->env_keys : NULL, &keys)) != MSP_OK)
        goto cleanup;
    const cJSON *bi = b->items[0], *ci = c->items[0];
    const cJSON *bv = cJSON_GetObjectItemCaseSensitive(bi, "vars");
    const cJSON *cv = cJSON_GetObjectItemCaseSensitive(ci, "vars");
    if (!cJSON_IsObject(bv) || !cJSON_IsObject(cv)) {
        rc = msp_fail(MSP_ERR_FORMAT, "pack %s: member env.json: \"vars\" missing or not an object",
                      cJSON_IsObject(bv) ? c->path : b->path);
        goto cleanup;
    }
    const char *bs = msp_cc_str(bi, "salt"), *cs = msp_cc_str(ci, "salt");
    if (!msp_cc_streq(bs, cs)) {
        r->salt_mismatch = 1;
        it->note = msp_asprintf("secret values were hashed with different salts (%s vs %s): set the same "
                                "MSPROBE_SECRET_SALT for both runs",
                                bs ? bs : "?", cs ? cs : "?");
    }
    size_t cap = (size_t)cJSON_GetArraySize(bv) + (size_t)cJSON_GetArraySize(cv), n = 0;
    names = malloc((cap + 1) * sizeof *names);
    if (!names) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    const cJSON *e;
    const char *const *pats = (const char *const *)keys.pats;
    cJSON_ArrayForEach(e, bv)
    {
        if (e->string && msp_cc_pattern_match(pats, keys.n, e->string))
            names[n++] = e->string;
    }
    cJSON_ArrayForEach(e, cv)
    {
        if (e->string && msp_cc_pattern_match(pats, keys.n, e->string) &&
            !cJSON_GetObjectItemCaseSensitive(bv, e->string))
            names[n++] = e->string;
    }
    qsort(names, n, sizeof *names, msp_cc_cmp_strp);
    for (size_t i = 0; i < n; i++) {
        const char *b1 = msp_cc_str(bv, names[i]), *c1 = msp_cc_str(cv, names[i]);
        if (msp_cc_streq(b1, c1))
            continue;
        size_t row = msp_cc_table_add_row(it->table, MSP_CC_LEVEL_ERROR);
        msp_cc_table_set_str(it->table, row, 0, names[i]);
        msp_cc_table_set_str(it->table, row, 1, b1 ? b1 : "<unset>");
        msp_cc_table_set_str(it->table, row, 2, c1 ? c1 : "<unset>");
        msp_cc_table_set_str(it->table, row, 3, "error");
        msp_cc_add_failed(it, "%s: bench '%.160s' vs cmp '%.160s'", names[i], b1 ? b1 : "<unset>",
                          c1 ? c1 : "<unset>");
    }
cleanup:
    free(names);
    msp_cc_keys_free(&keys);
    return rc;
}

/* ---- pip ---------------------------------------------------------------- */

typedef struct msp_cc_pkg {
    char *key;
    const char *name, *bver, *cver;
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

static int msp_cc_cmp_pkg(const void *a, const void *b)
{
    return strcmp(((const msp_cc_pkg_t *)a)->key, ((const msp_cc_pkg_t *)b)->key);
}

typedef struct msp_cc_pkgs {
    msp_cc_pkg_t *v;
    size_t n, cap;
} msp_cc_pkgs_t;

static msp_err msp_cc_pkg_add(msp_cc_pkgs_t *pk, const char *name, const char *ver, int side)
{
    char *key = msp_cc_norm_pkg(name);
    if (!key)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    size_t j;
    for (j = 0; j < pk->n && strcmp(pk->v[j].key, key) != 0; j++)
        ;
    if (j == pk->n) {
        msp_cc_pkg_t *np = msp_grow(pk->v, &pk->cap, pk->n, sizeof *np, 256);
        if (!np) {
            free(key);
            return msp_fail(MSP_ERR_NOMEM, "out of memory");
        }
        pk->v = np;
        pk->v[j] = (msp_cc_pkg_t){.key = key, .name = name};
        pk->n++;
    } else {
        free(key);
    }
    /* The first occurrence wins, as import resolves it. */
    if (side == 0 && !pk->v[j].bver)
        pk->v[j].bver = ver;
    if (side == 1 && !pk->v[j].cver)
        pk->v[j].cver = ver;
    return MSP_OK;
}

static msp_err msp_cc_pkg_collect(const msp_cc_pack_t *p, int side, msp_cc_pkgs_t *pk)
{
    const cJSON *doc = p->items[1];
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "packages");
    if (!cJSON_IsArray(arr))
        return msp_fail(MSP_ERR_FORMAT, "pack %s: member pip.json: \"packages\" missing or not an array", p->path);
    msp_err rc = MSP_OK;
    const char *py = msp_cc_str(doc, "python");
    if (py && (rc = msp_cc_pkg_add(pk, "python", py, side)) != MSP_OK)
        return rc;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        const char *name = msp_cc_str(e, "name"), *ver = msp_cc_str(e, "version");
        if (!name || !ver)
            return msp_fail(MSP_ERR_FORMAT, "pack %s: member pip.json: a package lacks \"name\" or \"version\"",
                            p->path);
        if ((rc = msp_cc_pkg_add(pk, name, ver, side)) != MSP_OK)
            return rc;
    }
    return MSP_OK;
}

static msp_err msp_cc_diff_pip(const msp_cc_pack_t *b, const msp_cc_pack_t *c, msp_cc_item_result_t *it)
{
    static const char *const cols[] = {"package", "bench version", "cmp version", "level"};
    msp_err rc = MSP_OK;
    msp_cc_pkgs_t pk = {0};
    if (!(it->table = msp_cc_table_new(cols, 4)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if ((rc = msp_cc_pkg_collect(b, 0, &pk)) != MSP_OK || (rc = msp_cc_pkg_collect(c, 1, &pk)) != MSP_OK)
        goto cleanup;
    if (pk.n > 1) /* pk.v is NULL for a pip item without packages or python */
        qsort(pk.v, pk.n, sizeof *pk.v, msp_cc_cmp_pkg);
    for (size_t i = 0; i < pk.n; i++) {
        const msp_cc_pkg_t *q = &pk.v[i];
        if (msp_cc_streq(q->bver, q->cver))
            continue;
        int err = msp_cc_pattern_match(msp_cc_framework_pkgs,
                                       sizeof msp_cc_framework_pkgs / sizeof msp_cc_framework_pkgs[0], q->key);
        size_t row = msp_cc_table_add_row(it->table, err ? MSP_CC_LEVEL_ERROR : MSP_CC_LEVEL_WARN);
        msp_cc_table_set_str(it->table, row, 0, q->name);
        msp_cc_table_set_str(it->table, row, 1, q->bver ? q->bver : "<not installed>");
        msp_cc_table_set_str(it->table, row, 2, q->cver ? q->cver : "<not installed>");
        msp_cc_table_set_str(it->table, row, 3, err ? "error" : "warning");
        if (err)
            msp_cc_add_failed(it, "%s: bench %s vs cmp %s", q->name, q->bver ? q->bver : "<not installed>",
                              q->cver ? q->cver : "<not installed>");
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

typedef struct msp_cc_call {
    char *key;          /* api@file:line#occurrence */
    char *site;         /* file:line */
    const char *api;
    char *value;        /* printed value; NULL = seeded from system entropy */
    int used;
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

static msp_err msp_cc_calls_load(const msp_cc_pack_t *p, msp_cc_call_t **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(p->items[4], "calls");
    if (!cJSON_IsArray(arr))
        return msp_fail(MSP_ERR_FORMAT, "pack %s: member random.json: \"calls\" missing or not an array", p->path);
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
                            "pack %s: member random.json: call #%zu lacks \"api\", \"file\", \"line\" or \"value\"",
                            p->path, k);
        }
        /* Two checkouts in different directories are still the same call site. */
        const char *base = strrchr(file, '/');
        base = base ? base + 1 : file;
        v[k].api = api;
        v[k].site = msp_asprintf("%s:%d", base, line->valueint);
        v[k].value = cJSON_IsString(val) ? strdup(val->valuestring) : cJSON_IsNull(val) ? NULL : cJSON_PrintUnformatted(val);
        int occ = 0;
        for (size_t j = 0; j < k; j++)
            if (strcmp(v[j].api, api) == 0 && v[j].site && v[k].site && strcmp(v[j].site, v[k].site) == 0)
                occ++;
        v[k].key = msp_asprintf("%s@%s#%d", api, v[k].site ? v[k].site : "", occ);
        if (!v[k].site || !v[k].key) {
            msp_cc_calls_free(v, k + 1);
            return msp_fail(MSP_ERR_NOMEM, "out of memory");
        }
        k++;
    }
    *out = v;
    *nout = k;
    return MSP_OK;
}

static void msp_cc_random_row(msp_cc_item_result_t *it, const msp_cc_call_t *bc, const msp_cc_call_t *cc)
{
    const msp_cc_call_t *any = bc ? bc : cc;
    int equal = bc && cc && bc->value && cc->value && strcmp(bc->value, cc->value) == 0;
    const char *bvs = !bc ? "<no call>" : bc->value ? bc->value : "None (system entropy)";
    const char *cvs = !cc ? "<no call>" : cc->value ? cc->value : "None (system entropy)";
    const char *occ = strrchr(any->key, '#');
    size_t row = msp_cc_table_add_row(it->table, equal ? MSP_CC_LEVEL_OK : MSP_CC_LEVEL_ERROR);
    msp_cc_table_set_str(it->table, row, 0, any->api);
    msp_cc_table_set_str(it->table, row, 1, any->site);
    msp_cc_table_set_num(it->table, row, 2, occ ? atof(occ + 1) : 0);
    msp_cc_table_set_str(it->table, row, 3, bvs);
    msp_cc_table_set_str(it->table, row, 4, cvs);
    msp_cc_table_set_bool(it->table, row, 5, equal);
    if (!equal)
        msp_cc_add_failed(it, "%s at %s: bench %.100s vs cmp %.100s", any->api, any->site, bvs, cvs);
}

static msp_err msp_cc_diff_random(const msp_cc_pack_t *b, const msp_cc_pack_t *c, msp_cc_item_result_t *it)
{
    static const char *const cols[] = {"api", "location", "occurrence", "bench_value", "cmp_value", "equal"};
    msp_cc_call_t *bv = NULL, *cv = NULL;
    size_t nb = 0, nc = 0;
    msp_err rc;
    if (!(it->table = msp_cc_table_new(cols, 6)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if ((rc = msp_cc_calls_load(b, &bv, &nb)) != MSP_OK || (rc = msp_cc_calls_load(c, &cv, &nc)) != MSP_OK)
        goto cleanup;
    /* Calls pair by (api, call site, n-th call there), not by position, so
     * one extra call does not shift every later one. */
    for (size_t i = 0; i < nb; i++) {
        msp_cc_call_t *m = NULL;
        for (size_t j = 0; j < nc && !m; j++)
            if (!cv[j].used && strcmp(cv[j].key, bv[i].key) == 0)
                m = &cv[j];
        if (m)
            m->used = 1;
        msp_cc_random_row(it, &bv[i], m);
    }
    for (size_t j = 0; j < nc; j++)
        if (!cv[j].used)
            msp_cc_random_row(it, NULL, &cv[j]);
cleanup:
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
        return msp_fail(MSP_ERR_FORMAT, "pack %s: member %s: \"tensors\" missing or not an array", p->path,
                        msp_cc_item_members[idx]);
    size_t cnt = (size_t)cJSON_GetArraySize(arr), k = 0;
    const cJSON **v = calloc(cnt + 1, sizeof *v);
    if (!v)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        if (!msp_cc_str(e, "name") || !msp_cc_str(e, "hash")) {
            free(v);
            return msp_fail(MSP_ERR_FORMAT, "pack %s: member %s: entry #%zu lacks \"name\" or \"hash\"", p->path,
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
    int equal = be && ce && msp_cc_streq(bs, cs) && msp_cc_streq(bd ? bd : "", cd ? cd : "") && msp_cc_streq(bh, ch);
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
        if (be && ce && msp_cc_json_get_double(cJSON_GetObjectItemCaseSensitive(be, stats[s]), &x) &&
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
            msp_cc_add_failed(it, "%s: shape/dtype %s %s vs %s %s", name, bs, bd ? bd : "", cs, cd ? cd : "");
        else
            msp_cc_add_failed(it, "%s: contents differ (hash %.12s vs %.12s)", name, bh, ch);
    }
    free(bs);
    free(cs);
}

static msp_err msp_cc_diff_tensors(const msp_cc_pack_t *b, const msp_cc_pack_t *c, int idx, msp_cc_item_result_t *it)
{
    static const char *const cols[] = {"name",      "bench_shape", "cmp_shape",    "bench_dtype",
                                       "cmp_dtype", "bench_hash",  "cmp_hash",     "max_rel_diff",
                                       "min_rel_diff", "mean_rel_diff", "norm_rel_diff", "equal"};
    const cJSON **bv = NULL, **cv = NULL, **cs = NULL;
    unsigned char *used = NULL;
    size_t nb = 0, nc = 0;
    msp_err rc;
    if (!(it->table = msp_cc_table_new(cols, 12)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if ((rc = msp_cc_tensors(b, idx, &bv, &nb)) != MSP_OK || (rc = msp_cc_tensors(c, idx, &cv, &nc)) != MSP_OK)
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

/* ---- hyperparameters ---------------------------------------------------- */

typedef struct msp_cc_leaf {
    char *path, *text;
    int used;
} msp_cc_leaf_t;

typedef struct msp_cc_leaves {
    msp_cc_leaf_t *v;
    size_t n, cap;
} msp_cc_leaves_t;

static int msp_cc_is_scalar_array(const cJSON *a)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, a)
    {
        if (cJSON_IsObject(e) || cJSON_IsArray(e))
            return 0;
    }
    return 1;
}

static msp_err msp_cc_flatten(const cJSON *node, const char *path, msp_cc_leaves_t *out, int depth)
{
    if (depth > 32)
        return msp_fail(MSP_ERR_FORMAT, "hyperparameters.json: nested deeper than 32 levels at %s", path);
    if (cJSON_IsObject(node) || (cJSON_IsArray(node) && !msp_cc_is_scalar_array(node))) {
        const cJSON *e;
        int i = 0;
        cJSON_ArrayForEach(e, node)
        {
            char *sub = cJSON_IsObject(node) ? msp_asprintf("%s%s%s", path, *path ? "." : "", e->string)
                                             : msp_asprintf("%s[%d]", path, i);
            i++;
            if (!sub)
                return msp_fail(MSP_ERR_NOMEM, "out of memory");
            msp_err rc = msp_cc_flatten(e, sub, out, depth + 1);
            free(sub);
            if (rc != MSP_OK)
                return rc;
        }
        return MSP_OK;
    }
    msp_cc_leaf_t *nv = msp_grow(out->v, &out->cap, out->n, sizeof *nv, 64);
    if (!nv)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    out->v = nv;
    char *text = cJSON_IsString(node) ? strdup(node->valuestring) : cJSON_PrintUnformatted(node);
    char *p = strdup(path);
    if (!text || !p) {
        free(text);
        free(p);
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    out->v[out->n++] = (msp_cc_leaf_t){.path = p, .text = text};
    return MSP_OK;
}

static void msp_cc_leaves_free(msp_cc_leaves_t *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].path);
        free(l->v[i].text);
    }
    free(l->v);
}

static void msp_cc_hp_row(msp_cc_item_result_t *it, const char *path, const char *bt, const char *ct)
{
    int equal = msp_cc_streq(bt, ct);
    size_t row = msp_cc_table_add_row(it->table, equal ? MSP_CC_LEVEL_OK : MSP_CC_LEVEL_ERROR);
    msp_cc_table_set_str(it->table, row, 0, path);
    msp_cc_table_set_str(it->table, row, 1, bt ? bt : "<missing>");
    msp_cc_table_set_str(it->table, row, 2, ct ? ct : "<missing>");
    msp_cc_table_set_bool(it->table, row, 3, equal);
    if (!equal)
        msp_cc_add_failed(it, "%s: bench %.120s vs cmp %.120s", path, bt ? bt : "<missing>", ct ? ct : "<missing>");
}

static msp_err msp_cc_diff_hyper(const msp_cc_pack_t *b, const msp_cc_pack_t *c, msp_cc_item_result_t *it)
{
    static const char *const cols[] = {"name", "bench_value", "cmp_value", "equal"};
    msp_cc_leaves_t lb = {0}, lc = {0};
    msp_err rc;
    if (!(it->table = msp_cc_table_new(cols, 4)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if ((rc = msp_cc_flatten(b->items[5], "", &lb, 0)) != MSP_OK ||
        (rc = msp_cc_flatten(c->items[5], "", &lc, 0)) != MSP_OK)
        goto cleanup;
    for (size_t i = 0; i < lb.n; i++) {
        msp_cc_leaf_t *m = NULL;
        for (size_t j = 0; j < lc.n && !m; j++)
            if (!lc.v[j].used && strcmp(lc.v[j].path, lb.v[i].path) == 0)
                m = &lc.v[j];
        if (m)
            m->used = 1;
        msp_cc_hp_row(it, lb.v[i].path, lb.v[i].text, m ? m->text : NULL);
    }
    for (size_t j = 0; j < lc.n; j++)
        if (!lc.v[j].used)
            msp_cc_hp_row(it, lc.v[j].path, NULL, lc.v[j].text);
cleanup:
    msp_cc_leaves_free(&lb);
    msp_cc_leaves_free(&lc);
    return rc;
}

/* ---- driver ------------------------------------------------------------- */

msp_err msp_cc_compare_packs(const msp_cc_pack_t *b, const msp_cc_pack_t *c, const msp_cc_options_t *opt,
                             msp_cc_result_t **out)
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
            it->note = msp_asprintf("%s is missing from the %s pack %s (a static -d pack holds only env and pip)",
                                    msp_cc_item_members[i], b->items[i] ? "cmp" : "bench",
                                    b->items[i] ? c->path : b->path);
            continue;
        }
        switch (i) {
        case 0:
            rc = msp_cc_diff_env(b, c, opt, r, it);
            break;
        case 1:
            rc = msp_cc_diff_pip(b, c, it);
            break;
        case 2:
        case 3:
            rc = msp_cc_diff_tensors(b, c, i, it);
            break;
        case 4:
            rc = msp_cc_diff_random(b, c, it);
            break;
        default:
            rc = msp_cc_diff_hyper(b, c, it);
            break;
        }
        if (rc != MSP_OK)
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
        msp_cc_table_free(it->table);
    }
    free(r->bench_path);
    free(r->cmp_path);
    free(r);
}
