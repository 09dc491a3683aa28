/* The env item: the variables both packs hold, compared by meaning across
 * platforms (HCCL_ALGO against NCCL_ALGO), secrets by verdict only, and
 * which platform each pack comes from. */
#include "cc_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Determinism and parallelism switches compared by default (see
 * msprobe-config_check(1)); a trailing '*' matches a prefix. */
static const char *const msp_cc_default_env_keys[] = {
    "CUBLAS_*",
    "CUDNN_*",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "NVIDIA_TF32_OVERRIDE",
    "ASCEND_RT_VISIBLE_DEVICES",
    "ASCEND_LAUNCH_BLOCKING",
    "INF_NAN_MODE_ENABLE",
    "HCCL_*",
    "NCCL_*",
    "PYTHONHASHSEED",
    "OMP_*",
    "KMP_*",
    "MKL_*",
    "OPENBLAS_*",
    "TORCH_*",
    "PYTORCH_*",
    "TF_ENABLE_ONEDNN_OPTS",
    "ONEDNN_*",
    "DNNL_*",
    "TOKENIZERS_PARALLELISM",
    "WORLD_SIZE",
    "TASK_QUEUE_ENABLE",
    "COMBINED_ENABLE",
    "NVTE_*",
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
        for (size_t i = 0; i < sizeof msp_cc_default_env_keys / sizeof msp_cc_default_env_keys[0];
             i++)
            if ((rc = msp_cc_keys_add(k, msp_cc_default_env_keys[i],
                                      strlen(msp_cc_default_env_keys[i]))) != MSP_OK)
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

/* ---- sorted key/value views (pairing by sort, never by nested loops) ---- */

typedef struct msp_cc_kv {
    const char *k, *v;
    size_t pos; /* position in the source, to keep the first of equal keys */
} msp_cc_kv_t;

static int msp_cc_cmp_kv(const void *a, const void *b)
{
    const msp_cc_kv_t *x = a, *y = b;
    int c = strcmp(x->k, y->k);
    return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

/* Sort and keep the first entry of each key. */
static size_t msp_cc_kv_sort_unique(msp_cc_kv_t *v, size_t n)
{
    if (n < 2)
        return n;
    qsort(v, n, sizeof *v, msp_cc_cmp_kv);
    size_t k = 1;
    for (size_t i = 1; i < n; i++)
        if (strcmp(v[i].k, v[k - 1].k) != 0)
            v[k++] = v[i];
    return k;
}

struct msp_cc_key {
    const msp_cc_kv_t *v;
    const char *key;
};

static int msp_cc_kv_before(const void *ctx, size_t i)
{
    const struct msp_cc_key *k = ctx;
    return strcmp(k->v[i].k, k->key) < 0;
}

static const msp_cc_kv_t *msp_cc_kv_find(const msp_cc_kv_t *v, size_t n, const char *key)
{
    struct msp_cc_key k = {v, key};
    size_t i = msp_lower_bound(n, msp_cc_kv_before, &k);
    return i < n && strcmp(v[i].k, key) == 0 ? &v[i] : NULL;
}

/* How a variable's value is read when comparing its meaning. */
typedef enum { MSP_CC_ENV_STR, MSP_CC_ENV_BOOL, MSP_CC_ENV_DEVICES } msp_cc_env_kind_t;

/* NPU and GPU variables with one meaning, and the value each platform uses
 * when the variable is unset (NULL: "unset", library's own choice). A NULL
 * name: that platform has no such switch and always behaves as the default.
 * Documented in msprobe-config_check(1), COMPARISON RULES, env. */
typedef struct msp_cc_env_map {
    const char *meaning, *npu, *gpu, *dflt;
    msp_cc_env_kind_t kind;
} msp_cc_env_map_t;

static const msp_cc_env_map_t msp_cc_env_table[] = {
    {"deterministic collectives", "HCCL_DETERMINISTIC", "NCCL_DETERMINISTIC", "false",
     MSP_CC_ENV_BOOL},
    {"collective algorithm", "HCCL_ALGO", "NCCL_ALGO", NULL, MSP_CC_ENV_STR},
    {"visible devices (count)", "ASCEND_RT_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", NULL,
     MSP_CC_ENV_DEVICES},
    {"synchronous kernel launch", "ASCEND_LAUNCH_BLOCKING", "CUDA_LAUNCH_BLOCKING", "0",
     MSP_CC_ENV_BOOL},
    {"allocator settings", "PYTORCH_NPU_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", NULL,
     MSP_CC_ENV_STR},
    {"IEEE inf/nan arithmetic", "INF_NAN_MODE_ENABLE", NULL, "1", MSP_CC_ENV_BOOL},
};
#define MSP_CC_ENV_TABLE_N (sizeof msp_cc_env_table / sizeof msp_cc_env_table[0])

/* Variables that only mean something on one platform (prefixes). */
static const char *const msp_cc_npu_only[] = {
    "ASCEND_*",        "HCCL_*",         "ACL_*", "NPU_*",    "PYTORCH_NPU_*", "TASK_QUEUE_ENABLE",
    "COMBINED_ENABLE", "INF_NAN_MODE_*", "ATB_*", "ASDOPS_*", "MINDSPEED_*"};
static const char *const msp_cc_gpu_only[] = {
    "CUDA_*", "CUBLAS_*",       "CUBLASLT_*",    "CUDNN_*",      "NCCL_*", "NVIDIA_*",
    "NVTE_*", "PYTORCH_CUDA_*", "TORCH_CUDNN_*", "TORCH_NCCL_*", "NV_*"};

enum { MSP_CC_PLAT_UNKNOWN = 0, MSP_CC_PLAT_GPU = 1, MSP_CC_PLAT_NPU = 2 };

static int msp_cc_has_prefix_key(const msp_cc_kv_t *v, size_t n, const char *prefix)
{
    /* v is sorted: the first key >= prefix tells. */
    struct msp_cc_key k = {v, prefix};
    size_t lo = msp_lower_bound(n, msp_cc_kv_before, &k), len = strlen(prefix);
    return lo < n && strncmp(v[lo].k, prefix, len) == 0;
}

/* NPU when the environment has Ascend or HCCL variables or pip has torch_npu;
 * GPU when it has CUDA/NCCL/cuDNN/cuBLAS variables or nvidia-* packages. */
static int msp_cc_platform(const msp_cc_pack_t *p, const msp_cc_kv_t *env, size_t n)
{
    static const char *const npu[] = {"ASCEND_", "HCCL_"};
    static const char *const gpu[] = {"CUDA_", "NCCL_", "CUDNN_", "CUBLAS_", "NVIDIA_"};
    for (size_t i = 0; i < MSP_CC_N(npu); i++)
        if (msp_cc_has_prefix_key(env, n, npu[i]))
            return MSP_CC_PLAT_NPU;
    const cJSON *pk = cJSON_GetObjectItemCaseSensitive(p->items[MSP_CC_ITEM_PIP], "packages"), *e;
    int gpu_pkg = 0;
    cJSON_ArrayForEach(e, pk)
    {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (!cJSON_IsString(nm))
            continue;
        const char *s = nm->valuestring;
        if (strncasecmp(s, "torch-npu", 9) == 0 || strncasecmp(s, "torch_npu", 9) == 0)
            return MSP_CC_PLAT_NPU;
        if (strncasecmp(s, "nvidia-", 7) == 0 || strncasecmp(s, "nvidia_", 7) == 0)
            gpu_pkg = 1;
    }
    for (size_t i = 0; i < MSP_CC_N(gpu); i++)
        if (msp_cc_has_prefix_key(env, n, gpu[i]))
            return MSP_CC_PLAT_GPU;
    return gpu_pkg ? MSP_CC_PLAT_GPU : MSP_CC_PLAT_UNKNOWN;
}

static const char *msp_cc_plat_name(int p)
{
    return p == MSP_CC_PLAT_NPU ? "NPU" : p == MSP_CC_PLAT_GPU ? "GPU" : "CPU/unknown";
}

static msp_err msp_cc_env_load(const msp_cc_pack_t *p, msp_cc_kv_t **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    const cJSON *vars = cJSON_GetObjectItemCaseSensitive(p->items[MSP_CC_ITEM_ENV], "vars");
    if (!cJSON_IsObject(vars))
        return msp_fail(MSP_ERR_FORMAT,
                        "pack %s: member env.json: \"vars\" missing or not an object", p->path);
    size_t cap = (size_t)cJSON_GetArraySize(vars), n = 0;
    msp_cc_kv_t *v = malloc((cap + 1) * sizeof *v);
    if (!v)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, vars)
    {
        if (e->string && cJSON_IsString(e))
            v[n] = (msp_cc_kv_t){.k = e->string, .v = e->valuestring, .pos = n}, n++;
    }
    *out = v;
    *nout = msp_cc_kv_sort_unique(v, n);
    return MSP_OK;
}

static long msp_cc_device_count(const char *s)
{
    long n = 0;
    for (const char *p = s; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            break;
        n++;
        while (*p && *p != ',')
            p++;
    }
    return n;
}

static int msp_cc_env_same(msp_cc_env_kind_t kind, const char *b, const char *c)
{
    if (!b || !c)
        return !b && !c;
    if (kind == MSP_CC_ENV_BOOL) {
        int x = msp_cc_bool_word(b), y = msp_cc_bool_word(c);
        if (x >= 0 && y >= 0)
            return x == y;
    }
    if (kind == MSP_CC_ENV_DEVICES)
        return msp_cc_device_count(b) == msp_cc_device_count(c);
    return strcmp(b, c) == 0;
}

static int msp_cc_env_in_table(const char *key)
{
    for (size_t i = 0; i < MSP_CC_ENV_TABLE_N; i++)
        if (msp_cc_streq(key, msp_cc_env_table[i].npu) ||
            msp_cc_streq(key, msp_cc_env_table[i].gpu))
            return 1;
    return 0;
}

static void msp_cc_env_row(msp_cc_item_result_t *it, int level, const char *key, const char *bv,
                           const char *cv)
{
    size_t row = msp_cc_table_add_row(it->table, level);
    msp_cc_table_set_str(it->table, row, 0, key);
    msp_cc_table_set_str(it->table, row, 1, bv);
    msp_cc_table_set_str(it->table, row, 2, cv);
    msp_cc_table_set_str(it->table, row, 3, level == MSP_CC_LEVEL_ERROR ? "error" : "info");
}

/* One row of the platform table: the variable each side set (NPU name first)
 * and its value, or the default. */
static void msp_cc_env_mapped(msp_cc_item_result_t *it, const msp_cc_env_map_t *m,
                              const msp_cc_kv_t *bv, size_t nb, const msp_cc_kv_t *cv, size_t nc)
{
    const msp_cc_kv_t *side[2] = {NULL, NULL};
    const msp_cc_kv_t *views[2] = {bv, cv};
    size_t ns[2] = {nb, nc};
    for (int s = 0; s < 2; s++) {
        if (m->npu)
            side[s] = msp_cc_kv_find(views[s], ns[s], m->npu);
        if (!side[s] && m->gpu)
            side[s] = msp_cc_kv_find(views[s], ns[s], m->gpu);
    }
    if (!side[0] && !side[1])
        return; /* both at the default */
    const char *b = side[0] ? side[0]->v : m->dflt, *c = side[1] ? side[1]->v : m->dflt;
    int same = msp_cc_env_same(m->kind, b, c);
    const char *bk = side[0] ? side[0]->k : NULL, *ck = side[1] ? side[1]->k : NULL;
    char *key = bk && ck && strcmp(bk, ck) != 0 ? msp_asprintf("%s / %s", bk, ck)
                                                : strdup(bk ? bk : ck);
    char *bs = side[0] ? strdup(side[0]->v)
                       : msp_asprintf("<unset>%s%s%s", m->dflt ? " (default " : "",
                                      m->dflt ? m->dflt : "", m->dflt ? ")" : "");
    char *cs = side[1] ? strdup(side[1]->v)
                       : msp_asprintf("<unset>%s%s%s", m->dflt ? " (default " : "",
                                      m->dflt ? m->dflt : "", m->dflt ? ")" : "");
    /* A platform switch whose value looks secret: never its stored form. */
    for (int s = 0; s < 2; s++) {
        char **shown = s ? &cs : &bs;
        if (side[s] && (msp_cc_secret_kind(side[s]->v) != MSP_CC_SECRET_NONE ||
                        msp_cc_secret_masked(side[s]->v) != MSP_CC_SECRET_NONE)) {
            free(*shown);
            *shown = msp_cc_secret_shown(side[s]->v);
        }
    }
    if (key && bs && cs) {
        if (!same) {
            msp_cc_env_row(it, MSP_CC_LEVEL_ERROR, key, bs, cs);
            msp_cc_add_diff(it, key, bs, cs, "'");
        } else if (!bk || !ck || strcmp(bk, ck) != 0) {
            /* Equal in meaning under other names (or the default): say so, do not fail. */
            msp_cc_env_row(it, MSP_CC_LEVEL_OK, key, bs, cs);
            msp_cc_add_info(it, "%s: same %s (bench '%s', cmp '%s')", key, m->meaning, bs, cs);
        }
    }
    free(key);
    free(bs);
    free(cs);
}

msp_err msp_cc_diff_env(const msp_cc_pack_t *b, const msp_cc_pack_t *c, int item,
                        const msp_cc_options_t *opt, msp_cc_result_t *r, msp_cc_item_result_t *it)
{
    (void)item;
    static const char *const cols[] = {"key", "bench_value", "cmp_value", "level"};
    msp_err rc = MSP_OK;
    msp_cc_keys_t keys = {0};
    msp_cc_kv_t *bv = NULL, *cv = NULL;
    size_t nb = 0, nc = 0;
    if (!(it->table = msp_cc_table_new(cols, 4)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if ((rc = msp_cc_keys_load(opt ? opt->env_keys : NULL, &keys)) != MSP_OK)
        goto cleanup;
    if ((rc = msp_cc_env_load(b, &bv, &nb)) != MSP_OK ||
        (rc = msp_cc_env_load(c, &cv, &nc)) != MSP_OK)
        goto cleanup;
    const cJSON *bi = b->items[MSP_CC_ITEM_ENV], *ci = c->items[MSP_CC_ITEM_ENV];
    const char *bs = msp_cc_str(bi, "salt"), *cs = msp_cc_str(ci, "salt");
    const char *bid = msp_cc_str(bi, "salt_id"), *cid = msp_cc_str(ci, "salt_id");
    if (!msp_cc_streq(bs, cs) || (bid && cid && strcmp(bid, cid) != 0)) {
        r->salt_mismatch = 1;
        it->note =
            msp_asprintf("secret values were hashed with different salts (%s vs %s): set the same "
                         "MSPROBE_SECRET_SALT for both runs",
                         bs ? bs : "?", cs ? cs : "?");
    }
    const char *const *pats = (const char *const *)keys.pats;
    int pb = msp_cc_platform(b, bv, nb), pc = msp_cc_platform(c, cv, nc);
    /* Across platforms a variable of one platform's family set on one side
     * only is information: the other platform has no such switch. */
    int cross = (pb == MSP_CC_PLAT_NPU) != (pc == MSP_CC_PLAT_NPU);
    for (size_t i = 0; i < MSP_CC_ENV_TABLE_N; i++) {
        const msp_cc_env_map_t *m = &msp_cc_env_table[i];
        if ((m->npu && msp_cc_pattern_match(pats, keys.n, m->npu)) ||
            (m->gpu && msp_cc_pattern_match(pats, keys.n, m->gpu)))
            msp_cc_env_mapped(it, m, bv, nb, cv, nc);
    }
    /* Merge join of the two sorted views. */
    size_t i = 0, j = 0;
    while (i < nb || j < nc) {
        int d = i >= nb ? 1 : j >= nc ? -1 : strcmp(bv[i].k, cv[j].k);
        const msp_cc_kv_t *x = d <= 0 ? &bv[i] : NULL, *y = d >= 0 ? &cv[j] : NULL;
        const char *key = x ? x->k : y->k;
        i += d <= 0;
        j += d >= 0;
        if (!msp_cc_pattern_match(pats, keys.n, key) || msp_cc_env_in_table(key))
            continue;
        const char *sv = msp_cc_secret_verdict(x ? x->v : NULL, y ? y->v : NULL);
        if (sv) {
            /* Never a value, not even a hash: the verdict is all a report says. */
            if (r->salt_mismatch && strcmp(sv, "same") != 0 && x && y)
                sv = "not compared";
            int differs = strcmp(sv, "differs") == 0;
            /* "<secret>", or a text with its secrets shown as <secret> */
            char *xs = x ? msp_cc_secret_shown(x->v) : NULL,
                 *ys = y ? msp_cc_secret_shown(y->v) : NULL;
            msp_cc_env_row(it, differs ? MSP_CC_LEVEL_ERROR : MSP_CC_LEVEL_OK, key,
                           x ? (xs ? xs : "<secret>") : "<unset>",
                           y ? (ys ? ys : "<secret>") : "<unset>");
            free(xs);
            free(ys);
            msp_cc_table_set_str(it->table, it->table->nrows - 1, 3, sv);
            if (differs)
                msp_cc_add_failed(it, "%s: secret %s", key,
                                  x && y ? "differs"
                                  : x    ? "set on bench only"
                                         : "set on cmp only");
            else if (strcmp(sv, "not compared") == 0)
                msp_cc_add_info(it,
                                "%s: secret not compared (set the same MSPROBE_SECRET_SALT on both "
                                "machines "
                                "to compare keyed hashes)",
                                key);
            continue;
        }
        if (x && y && strcmp(x->v, y->v) == 0)
            continue;
        const char *b1 = x ? x->v : "<unset>", *c1 = y ? y->v : "<unset>";
        int npu_key = msp_cc_pattern_match(msp_cc_npu_only, MSP_CC_N(msp_cc_npu_only), key);
        int gpu_key = msp_cc_pattern_match(msp_cc_gpu_only, MSP_CC_N(msp_cc_gpu_only), key);
        int other = x ? pc : pb; /* platform of the side without it */
        if (cross && (!x || !y) &&
            ((npu_key && other != MSP_CC_PLAT_NPU) || (gpu_key && other == MSP_CC_PLAT_NPU))) {
            msp_cc_env_row(it, MSP_CC_LEVEL_OK, key, b1, c1);
            msp_cc_add_info(it, "%s: %s-only variable, set on the %s side (%s) only", key,
                            npu_key ? "NPU" : "GPU", x ? "bench" : "cmp",
                            msp_cc_plat_name(x ? pb : pc));
            continue;
        }
        msp_cc_env_row(it, MSP_CC_LEVEL_ERROR, key, b1, c1);
        msp_cc_add_diff(it, key, b1, c1, "'");
    }
cleanup:
    free(bv);
    free(cv);
    msp_cc_keys_free(&keys);
    return rc;
}

int msp_cc_cross_platform(const msp_cc_pack_t *b, const msp_cc_pack_t *c)
{
    int p[2] = {MSP_CC_PLAT_UNKNOWN, MSP_CC_PLAT_UNKNOWN};
    const msp_cc_pack_t *packs[2] = {b, c};
    for (int s = 0; s < 2; s++) {
        msp_cc_kv_t *v = NULL;
        size_t n = 0;
        if (packs[s]->items[MSP_CC_ITEM_ENV] && msp_cc_env_load(packs[s], &v, &n) != MSP_OK)
            msp_clear_error();
        p[s] = msp_cc_platform(packs[s], v, n);
        free(v);
    }
    return (p[0] == MSP_CC_PLAT_NPU) != (p[1] == MSP_CC_PLAT_NPU);
}
