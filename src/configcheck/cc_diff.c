/* Comparing two packs item by item into report tables and failure lines. */
#include "cc_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Determinism and parallelism switches compared by default (see
 * msprobe-config_check(1)); a trailing '*' matches a prefix. */
static const char *const msp_cc_default_env_keys[] = {
    "CUBLAS_*", "CUDNN_*", "CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_MAX_CONNECTIONS",
    "NVIDIA_TF32_OVERRIDE", "ASCEND_RT_VISIBLE_DEVICES", "ASCEND_LAUNCH_BLOCKING", "INF_NAN_MODE_ENABLE",
    "HCCL_*", "NCCL_*", "PYTHONHASHSEED", "OMP_*", "KMP_*", "MKL_*", "OPENBLAS_*", "TORCH_*", "PYTORCH_*",
    "TF_ENABLE_ONEDNN_OPTS", "ONEDNN_*", "DNNL_*", "TOKENIZERS_PARALLELISM", "WORLD_SIZE",
    "TASK_QUEUE_ENABLE", "COMBINED_ENABLE", "NVTE_*",
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

static void msp_cc_push_line(char ***lines, size_t *n, char *line)
{
    if (!line)
        return;
    char **nl = realloc(*lines, (*n + 1) * sizeof *nl);
    if (!nl) {
        free(line);
        return;
    }
    *lines = nl;
    (*lines)[(*n)++] = line;
}

static char *msp_cc_vasprintf(const char *fmt, va_list ap) MSP_PRINTF(1, 0);
static char *msp_cc_vasprintf(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    char *out = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (out)
        vsnprintf(out, (size_t)n + 1, fmt, ap);
    return out;
}

/* Lines are built whole: a difference past a fixed width would be hidden. */
static void msp_cc_add_failed(msp_cc_item_result_t *it, const char *fmt, ...) MSP_PRINTF(2, 3);
static void msp_cc_add_failed(msp_cc_item_result_t *it, const char *fmt, ...)
{
    it->status = MSP_CC_FAIL;
    va_list ap;
    va_start(ap, fmt);
    msp_cc_push_line(&it->failed, &it->n_failed, msp_cc_vasprintf(fmt, ap));
    va_end(ap);
}

static void msp_cc_add_info(msp_cc_item_result_t *it, const char *fmt, ...) MSP_PRINTF(2, 3);
static void msp_cc_add_info(msp_cc_item_result_t *it, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    msp_cc_push_line(&it->info, &it->n_info, msp_cc_vasprintf(fmt, ap));
    va_end(ap);
}

/* Terminal width the one-line form must fit in; longer values go on lines of
 * their own, aligned, with a caret under the first character that differs. */
#define MSP_CC_LINE_FIT 100

/* "NAME: bench B vs cmp C", or when that is long:
 *   NAME:
 *     bench B
 *     cmp   C
 *           ^ first difference at character K
 * q wraps both values (e.g. "'"); values are never cut. */
static char *msp_cc_diff_text(const char *name, const char *bv, const char *cv, const char *q)
{
    size_t lb = strlen(bv), lc = strlen(cv);
    if (strlen(name) + lb + lc + 4 * strlen(q) + 16 <= MSP_CC_LINE_FIT && !strchr(bv, '\n') && !strchr(cv, '\n'))
        return msp_asprintf("%s: bench %s%s%s vs cmp %s%s%s", name, q, bv, q, q, cv, q);
    size_t k = 0;
    while (k < lb && k < lc && bv[k] == cv[k])
        k++;
    size_t col = 8 + strlen(q) + k; /* "  bench " or "  cmp   " is 8 wide */
    char *pad = malloc(col + 1);
    if (!pad)
        return NULL;
    memset(pad, ' ', col);
    pad[col] = '\0';
    char *out = msp_asprintf("%s:\n  bench %s%s%s\n  cmp   %s%s%s\n%s^ first difference at character %zu", name, q,
                             bv, q, q, cv, q, pad, k + 1);
    free(pad);
    return out;
}

static void msp_cc_add_diff(msp_cc_item_result_t *it, const char *name, const char *bv, const char *cv,
                            const char *q)
{
    it->status = MSP_CC_FAIL;
    msp_cc_push_line(&it->failed, &it->n_failed, msp_cc_diff_text(name, bv, cv, q));
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

static const msp_cc_kv_t *msp_cc_kv_find(const msp_cc_kv_t *v, size_t n, const char *key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(v[mid].k, key);
        if (c == 0)
            return &v[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
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
    {"deterministic collectives", "HCCL_DETERMINISTIC", "NCCL_DETERMINISTIC", "false", MSP_CC_ENV_BOOL},
    {"collective algorithm", "HCCL_ALGO", "NCCL_ALGO", NULL, MSP_CC_ENV_STR},
    {"visible devices (count)", "ASCEND_RT_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", NULL, MSP_CC_ENV_DEVICES},
    {"synchronous kernel launch", "ASCEND_LAUNCH_BLOCKING", "CUDA_LAUNCH_BLOCKING", "0", MSP_CC_ENV_BOOL},
    {"allocator settings", "PYTORCH_NPU_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", NULL, MSP_CC_ENV_STR},
    {"IEEE inf/nan arithmetic", "INF_NAN_MODE_ENABLE", NULL, "1", MSP_CC_ENV_BOOL},
};
#define MSP_CC_ENV_TABLE_N (sizeof msp_cc_env_table / sizeof msp_cc_env_table[0])

/* Variables that only mean something on one platform (prefixes). */
static const char *const msp_cc_npu_only[] = {"ASCEND_*", "HCCL_*", "ACL_*", "NPU_*", "PYTORCH_NPU_*",
                                              "TASK_QUEUE_ENABLE", "COMBINED_ENABLE", "INF_NAN_MODE_*",
                                              "ATB_*", "ASDOPS_*", "MINDSPEED_*"};
static const char *const msp_cc_gpu_only[] = {"CUDA_*", "CUBLAS_*", "CUBLASLT_*", "CUDNN_*", "NCCL_*",
                                              "NVIDIA_*", "NVTE_*", "PYTORCH_CUDA_*", "TORCH_CUDNN_*",
                                              "TORCH_NCCL_*", "NV_*"};
#define MSP_CC_N(a) (sizeof(a) / sizeof(a)[0])

enum { MSP_CC_PLAT_UNKNOWN = 0, MSP_CC_PLAT_GPU = 1, MSP_CC_PLAT_NPU = 2 };

static int msp_cc_has_prefix_key(const msp_cc_kv_t *v, size_t n, const char *prefix)
{
    /* v is sorted: the first key >= prefix tells. */
    size_t lo = 0, hi = n, len = strlen(prefix);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(v[mid].k, prefix) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
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
    const cJSON *pk = cJSON_GetObjectItemCaseSensitive(p->items[1], "packages"), *e;
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
    const cJSON *vars = cJSON_GetObjectItemCaseSensitive(p->items[0], "vars");
    if (!cJSON_IsObject(vars))
        return msp_fail(MSP_ERR_FORMAT, "pack %s: member env.json: \"vars\" missing or not an object", p->path);
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

static int msp_cc_bool_word(const char *s)
{
    static const char *const t[] = {"1", "true", "yes", "on", "enable", "enabled"};
    static const char *const f[] = {"0", "false", "no", "off", "disable", "disabled", ""};
    for (size_t i = 0; i < MSP_CC_N(t); i++)
        if (strcasecmp(s, t[i]) == 0)
            return 1;
    for (size_t i = 0; i < MSP_CC_N(f); i++)
        if (strcasecmp(s, f[i]) == 0)
            return 0;
    return -1;
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
        if (msp_cc_streq(key, msp_cc_env_table[i].npu) || msp_cc_streq(key, msp_cc_env_table[i].gpu))
            return 1;
    return 0;
}

static void msp_cc_env_row(msp_cc_item_result_t *it, int level, const char *key, const char *bv, const char *cv)
{
    size_t row = msp_cc_table_add_row(it->table, level);
    msp_cc_table_set_str(it->table, row, 0, key);
    msp_cc_table_set_str(it->table, row, 1, bv);
    msp_cc_table_set_str(it->table, row, 2, cv);
    msp_cc_table_set_str(it->table, row, 3, level == MSP_CC_LEVEL_ERROR ? "error" : "info");
}

/* One row of the platform table: the variable each side set (NPU name first)
 * and its value, or the default. */
static void msp_cc_env_mapped(msp_cc_item_result_t *it, const msp_cc_env_map_t *m, const msp_cc_kv_t *bv,
                              size_t nb, const msp_cc_kv_t *cv, size_t nc)
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
    char *key = bk && ck && strcmp(bk, ck) != 0 ? msp_asprintf("%s / %s", bk, ck) : strdup(bk ? bk : ck);
    char *bs = side[0] ? strdup(side[0]->v) : msp_asprintf("<unset>%s%s%s", m->dflt ? " (default " : "",
                                                           m->dflt ? m->dflt : "", m->dflt ? ")" : "");
    char *cs = side[1] ? strdup(side[1]->v) : msp_asprintf("<unset>%s%s%s", m->dflt ? " (default " : "",
                                                           m->dflt ? m->dflt : "", m->dflt ? ")" : "");
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

static msp_err msp_cc_diff_env(const msp_cc_pack_t *b, const msp_cc_pack_t *c, const msp_cc_options_t *opt,
                               msp_cc_result_t *r, msp_cc_item_result_t *it)
{
    static const char *const cols[] = {"key", "bench_value", "cmp_value", "level"};
    msp_err rc = MSP_OK;
    msp_cc_keys_t keys = {0};
    msp_cc_kv_t *bv = NULL, *cv = NULL;
    size_t nb = 0, nc = 0;
    if (!(it->table = msp_cc_table_new(cols, 4)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if ((rc = msp_cc_keys_load(opt ? opt->env_keys : NULL, &keys)) != MSP_OK)
        goto cleanup;
    if ((rc = msp_cc_env_load(b, &bv, &nb)) != MSP_OK || (rc = msp_cc_env_load(c, &cv, &nc)) != MSP_OK)
        goto cleanup;
    const cJSON *bi = b->items[0], *ci = c->items[0];
    const char *bs = msp_cc_str(bi, "salt"), *cs = msp_cc_str(ci, "salt");
    if (!msp_cc_streq(bs, cs)) {
        r->salt_mismatch = 1;
        it->note = msp_asprintf("secret values were hashed with different salts (%s vs %s): set the same "
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
                            npu_key ? "NPU" : "GPU", x ? "bench" : "cmp", msp_cc_plat_name(x ? pb : pc));
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

/* Packages that exist for one platform only (normalised names). */
static const char *const msp_cc_platform_pkgs[] = {"torch-npu", "nvidia-*", "triton", "cupy*", "pynvml",
                                                   "nvidia-ml-py", "te-*", "transformer-engine*", "apex",
                                                   "flash-attn", "xformers", "mindspeed*", "torchair",
                                                   "torch-tb-profiler-ascend", "te"};

/* "2.1.0+cu121" and "2.1.0" are one release built for two platforms. */
static int msp_cc_same_release(const char *a, const char *b)
{
    size_t la = strcspn(a, "+"), lb = strcspn(b, "+");
    return la == lb && strncmp(a, b, la) == 0;
}

static msp_err msp_cc_diff_pip(const msp_cc_pack_t *b, const msp_cc_pack_t *c, int cross, msp_cc_item_result_t *it)
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
        int plat = cross && msp_cc_pattern_match(msp_cc_platform_pkgs, MSP_CC_N(msp_cc_platform_pkgs), key);
        if (cross && (plat ? (!bver || !cver) : (bver && cver && msp_cc_same_release(bver, cver)))) {
            /* A platform's own package, or one release built for each platform. */
            size_t row = msp_cc_table_add_row(it->table, MSP_CC_LEVEL_OK);
            msp_cc_table_set_str(it->table, row, 0, name);
            msp_cc_table_set_str(it->table, row, 1, bt);
            msp_cc_table_set_str(it->table, row, 2, ct);
            msp_cc_table_set_str(it->table, row, 3, "info");
            msp_cc_add_info(it, "%s: bench %s vs cmp %s (%s)", name, bt, ct,
                            plat ? "one platform's package" : "same release, built for each platform");
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
    char *key;          /* api@function@file:line: the group */
    char *site;         /* file:line */
    const char *api, *func;
    char *value;        /* printed value; NULL = seeded from system entropy */
    size_t pos;         /* order in the pack */
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
        v[k].func = msp_cc_str(e, "function");
        v[k].pos = k;
        v[k].site = msp_asprintf("%s:%d", base, line->valueint);
        v[k].value = cJSON_IsString(val) ? strdup(val->valuestring) : cJSON_IsNull(val) ? NULL : cJSON_PrintUnformatted(val);
        v[k].key = msp_asprintf("%s@%s@%s", api, v[k].func ? v[k].func : "", v[k].site ? v[k].site : "");
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
    size_t first;               /* pack position of its first call (bench, else cmp) */
    int side;                   /* 0: in the bench pack, 1: cmp only */
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
    const char *bvs = at < g->nb ? (g->b[at].value ? g->b[at].value : "None (system entropy)") : "<no call>";
    const char *cvs = at < g->nc ? (g->c[at].value ? g->c[at].value : "None (system entropy)") : "<no call>";
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
    msp_cc_table_set_num(it->table, row, 8, (double)(ndiff + (g->nb > g->nc ? g->nb - g->nc : g->nc - g->nb)));
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
        msp_cc_add_failed(it, "%s: %zu vs %zu calls, %zu differ (values change %zu times in bench, %zu in cmp); "
                              "first at call #%zu: bench %s vs cmp %s",
                          where, g->nb, g->nc, ndiff + (g->nb > g->nc ? g->nb - g->nc : g->nc - g->nb),
                          msp_cc_distinct(g->b, g->nb), msp_cc_distinct(g->c, g->nc), first, bvs, cvs);
    free(where);
}

static msp_err msp_cc_diff_random(const msp_cc_pack_t *b, const msp_cc_pack_t *c, msp_cc_item_result_t *it)
{
    static const char *const cols[] = {"api",       "location",  "function", "bench_calls",
                                       "cmp_calls", "bench_value", "cmp_value", "equal",
                                       "differing_calls", "first_differing_call", "bench_value_changes",
                                       "cmp_value_changes"};
    msp_cc_call_t *bv = NULL, *cv = NULL;
    msp_cc_group_t *gs = NULL;
    size_t nb = 0, nc = 0, ng = 0;
    msp_err rc;
    if (!(it->table = msp_cc_table_new(cols, MSP_CC_N(cols))))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if ((rc = msp_cc_calls_load(b, &bv, &nb)) != MSP_OK || (rc = msp_cc_calls_load(c, &cv, &nc)) != MSP_OK)
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

/* Spellings of one hyperparameter folded to one name (after msprobe's
 * config_check table, extended). Names are compared after dropping leading
 * dashes, lowercasing and turning '-' into '_' (as argparse does). A user
 * file (--aliases) is looked up first. Documented in msprobe-config_check(1). */
typedef struct msp_cc_alias {
    const char *canon, *alias;
} msp_cc_alias_t;

static const msp_cc_alias_t msp_cc_builtin_aliases[] = {
    {"learning_rate", "lr"}, {"learning_rate", "base_lr"},
    {"batch_size", "bs"}, {"batch_size", "batch"}, {"batch_size", "batch_size_per_gpu"},
    {"batch_size", "per_device_train_batch_size"},
    {"epochs", "epoch"}, {"epochs", "num_epochs"}, {"epochs", "max_epochs"}, {"epochs", "num_train_epochs"},
    {"epochs", "n_epochs"},
    {"weight_decay", "wd"}, {"weight_decay", "weight_decay_rate"},
    {"dropout", "drop_rate"}, {"dropout", "dropout_rate"}, {"dropout", "dropout_prob"},
    {"max_steps", "train_iters"}, {"max_steps", "total_steps"}, {"max_steps", "num_train_steps"},
    {"warmup_steps", "warmup"}, {"warmup_steps", "warmup_iters"}, {"warmup_steps", "lr_warmup_iters"},
    {"warmup_steps", "lr_warmup_steps"},
    {"gradient_accumulation_steps", "grad_accum"}, {"gradient_accumulation_steps", "accumulate_grad_batches"},
    {"gradient_accumulation_steps", "grad_acc_steps"},
    {"max_grad_norm", "clip_grad"}, {"max_grad_norm", "grad_clip"}, {"max_grad_norm", "clip_grad_norm"},
    {"max_grad_norm", "gradient_clipping"},
    {"seed", "random_seed"}, {"seed", "manual_seed"},
    /* compute dtype given by value: --dtype bf16, --precision 16-mixed, ... */
    {"dtype", "precision"}, {"dtype", "mixed_precision"}, {"dtype", "compute_dtype"}, {"dtype", "torch_dtype"},
    {"dtype", "amp_dtype"}, {"dtype", "params_dtype"},
};

/* Compute dtype given by a flag: --fp16, --bf16, ... means dtype = value. */
static const msp_cc_alias_t msp_cc_dtype_flags[] = {
    {"fp16", "fp16"}, {"fp16", "half"}, {"fp16", "float16"}, {"bf16", "bf16"}, {"bf16", "bfloat16"},
    {"fp32", "fp32"}, {"fp32", "float32"}, {"fp32", "float"},
};

typedef struct msp_cc_aliases {
    cJSON *user; /* {"canonical": ["alias", ...]} or NULL */
} msp_cc_aliases_t;

static msp_err msp_cc_aliases_load(const char *path, msp_cc_aliases_t *al)
{
    al->user = NULL;
    if (!path)
        return MSP_OK;
    char *text = NULL;
    size_t len = 0;
    msp_err rc = msp_read_file(path, (size_t)4 << 20, &text, &len);
    if (rc != MSP_OK)
        return msp_fail(rc, "--aliases %s: %s", path, msp_last_error());
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        return msp_fail(MSP_ERR_USAGE, "--aliases %s: expected a JSON object {\"canonical\": [\"alias\", ...]}", path);
    }
    const cJSON *e, *a;
    cJSON_ArrayForEach(e, doc)
    {
        int ok = cJSON_IsString(e) || cJSON_IsArray(e);
        const cJSON *list = cJSON_IsArray(e) ? e : NULL;
        cJSON_ArrayForEach(a, list)
        {
            ok = ok && cJSON_IsString(a);
        }
        if (!ok) {
            rc = msp_fail(MSP_ERR_USAGE, "--aliases %s: key \"%s\": expected a list of names (strings)", path,
                          e->string ? e->string : "");
            cJSON_Delete(doc);
            return rc;
        }
    }
    al->user = doc;
    return MSP_OK;
}

/* "--Learning-Rate" -> "learning_rate" (malloc'd). */
static char *msp_cc_norm_name(const char *s)
{
    while (*s == '-')
        s++;
    char *out = strdup(s);
    for (char *p = out; p && *p; p++)
        *p = *p == '-' ? '_' : (char)((*p >= 'A' && *p <= 'Z') ? *p + 32 : *p);
    return out;
}

static int msp_cc_name_eq(const char *user_spelling, const char *norm)
{
    char *n = msp_cc_norm_name(user_spelling);
    int eq = n && strcmp(n, norm) == 0;
    free(n);
    return eq;
}

/* The canonical name of a normalised name (borrowed: from the tables or norm). */
static const char *msp_cc_canon(const msp_cc_aliases_t *al, const char *norm)
{
    const cJSON *e, *a;
    cJSON_ArrayForEach(e, al->user)
    {
        if (e->string && msp_cc_name_eq(e->string, norm))
            return e->string;
        if (cJSON_IsString(e) && msp_cc_name_eq(e->valuestring, norm))
            return e->string;
        const cJSON *list = cJSON_IsArray(e) ? e : NULL;
        cJSON_ArrayForEach(a, list)
        {
            if (msp_cc_name_eq(a->valuestring, norm))
                return e->string;
        }
    }
    for (size_t i = 0; i < MSP_CC_N(msp_cc_builtin_aliases); i++)
        if (strcmp(norm, msp_cc_builtin_aliases[i].alias) == 0)
            return msp_cc_builtin_aliases[i].canon;
    return norm;
}

/* Compute dtypes spelt many ways: "torch.bfloat16", "bf16-mixed", "16" -> "bf16"/"fp16"/"fp32". */
static char *msp_cc_norm_dtype(const char *v)
{
    char *n = msp_cc_norm_name(v);
    if (!n)
        return NULL;
    const char *s = strncmp(n, "torch.", 6) == 0 ? n + 6 : n;
    size_t len = strcspn(s, "_"); /* "bf16_mixed" (normalised "bf16-mixed") */
    static const struct { const char *in, *out; } map[] = {
        {"bf16", "bf16"}, {"bfloat16", "bf16"}, {"fp16", "fp16"}, {"float16", "fp16"}, {"half", "fp16"},
        {"16", "fp16"}, {"fp32", "fp32"}, {"float32", "fp32"}, {"float", "fp32"}, {"32", "fp32"},
        {"fp64", "fp64"}, {"float64", "fp64"}, {"double", "fp64"}, {"64", "fp64"},
    };
    for (size_t i = 0; i < MSP_CC_N(map); i++)
        if (strlen(map[i].in) == len && strncmp(s, map[i].in, len) == 0) {
            free(n);
            return strdup(map[i].out);
        }
    free(n);
    return strdup(v);
}

typedef struct msp_cc_hp {
    char *name;  /* compared name: "args.learning_rate", "optimizers[0].param_groups[0].lr" */
    char *src;   /* as the run spelt it: "--lr", or the name */
    char *text;  /* the value */
    size_t pos;
    int info;    /* never a failure (the raw argv) */
} msp_cc_hp_t;

typedef struct msp_cc_hps {
    msp_cc_hp_t *v;
    size_t n, cap;
} msp_cc_hps_t;

static void msp_cc_hps_free(msp_cc_hps_t *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].src);
        free(l->v[i].text);
    }
    free(l->v);
}

/* Takes ownership of name, src and text (NULL-safe on failure). */
static msp_err msp_cc_hp_add(msp_cc_hps_t *l, char *name, char *src, char *text, int info)
{
    msp_cc_hp_t *nv = name && src && text ? msp_grow(l->v, &l->cap, l->n, sizeof *nv, 64) : NULL;
    if (!nv) {
        free(name);
        free(src);
        free(text);
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    }
    l->v = nv;
    l->v[l->n] = (msp_cc_hp_t){.name = name, .src = src, .text = text, .pos = l->n, .info = info};
    l->n++;
    return MSP_OK;
}

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

static int msp_cc_is_number_text(const char *s, double *out)
{
    char *end = NULL;
    while (*s == ' ')
        s++;
    if (!*s)
        return 0;
    double d = strtod(s, &end);
    while (end && *end == ' ')
        end++;
    if (!end || *end)
        return 0;
    if (out)
        *out = d;
    return 1;
}

/* An option's value: not an option itself ("-1e-3" and "-5" are values). */
static int msp_cc_is_option(const char *t)
{
    return t[0] == '-' && t[1] && !msp_cc_is_number_text(t, NULL);
}

/* One named value from the command line or a namespace, aliases folded. */
static msp_err msp_cc_hp_named(msp_cc_hps_t *l, const msp_cc_aliases_t *al, const char *prefix, const char *spelt,
                               const char *value)
{
    char *norm = msp_cc_norm_name(spelt);
    if (!norm)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    const char *canon = msp_cc_canon(al, norm);
    char *val = NULL;
    if (canon == norm) { /* not an alias: maybe a dtype flag (--bf16) */
        int flag = msp_cc_bool_word(value) == 1;
        for (size_t i = 0; flag && i < MSP_CC_N(msp_cc_dtype_flags); i++)
            if (strcmp(norm, msp_cc_dtype_flags[i].alias) == 0) {
                canon = "dtype";
                val = strdup(msp_cc_dtype_flags[i].canon);
                break;
            }
    }
    if (!val)
        val = strcmp(canon, "dtype") == 0 ? msp_cc_norm_dtype(value) : strdup(value);
    msp_err rc = msp_cc_hp_add(l, msp_asprintf("%s%s", prefix, canon), strdup(spelt), val, 0);
    free(norm);
    return rc;
}

/* argv as argparse would read it: --k v, --k=v, -k v, flags (value "true"),
 * "--" ends the options; other words are positional[i]. */
static msp_err msp_cc_parse_argv(const cJSON *args, const msp_cc_aliases_t *al, msp_cc_hps_t *l)
{
    size_t n = (size_t)cJSON_GetArraySize(args), k = 0, npos = 0;
    const char **t = calloc(n + 1, sizeof *t);
    if (!t)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, args)
    {
        t[k++] = cJSON_IsString(e) ? e->valuestring : "";
    }
    msp_err rc = MSP_OK;
    int opts_done = 0;
    for (size_t i = 0; i < k && rc == MSP_OK; i++) {
        if (!opts_done && strcmp(t[i], "--") == 0) {
            opts_done = 1;
            continue;
        }
        if (opts_done || !msp_cc_is_option(t[i])) {
            char *name = msp_asprintf("args.positional[%zu]", npos++);
            rc = msp_cc_hp_add(l, name, name ? strdup(name + 5) : NULL, strdup(t[i]), 0);
            continue;
        }
        const char *eq = strchr(t[i], '=');
        if (eq) {
            char *spelt = strndup(t[i], (size_t)(eq - t[i]));
            rc = spelt ? msp_cc_hp_named(l, al, "args.", spelt, eq + 1) : msp_fail(MSP_ERR_NOMEM, "out of memory");
            free(spelt);
        } else if (i + 1 < k && !msp_cc_is_option(t[i + 1]) && strcmp(t[i + 1], "--") != 0) {
            rc = msp_cc_hp_named(l, al, "args.", t[i], t[i + 1]);
            i++;
        } else {
            rc = msp_cc_hp_named(l, al, "args.", t[i], "true");
        }
    }
    free(t);
    return rc;
}

static msp_err msp_cc_flatten(const cJSON *node, const char *path, msp_cc_hps_t *out, int depth)
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
    char *text = cJSON_IsString(node) ? strdup(node->valuestring) : cJSON_PrintUnformatted(node);
    return msp_cc_hp_add(out, strdup(path), strdup(path), text, 0);
}

/* Every named value of one pack: argv parsed (and kept whole as "args",
 * information only), argparse namespaces when the pack has them
 * ("namespace": {...} or "namespaces": [{...}]), everything else flattened
 * into dotted names (optimizers[0].param_groups[0].lr). */
static msp_err msp_cc_hp_collect(const cJSON *doc, const msp_cc_aliases_t *al, msp_cc_hps_t *l)
{
    msp_err rc = MSP_OK;
    const cJSON *e;
    cJSON_ArrayForEach(e, doc)
    {
        const char *k = e->string ? e->string : "";
        if (strcmp(k, "args") == 0 && cJSON_IsArray(e) && msp_cc_is_scalar_array(e)) {
            if ((rc = msp_cc_hp_add(l, strdup("args"), strdup("args"), cJSON_PrintUnformatted(e), 1)) != MSP_OK ||
                (rc = msp_cc_parse_argv(e, al, l)) != MSP_OK)
                return rc;
        } else if ((strcmp(k, "namespace") == 0 && cJSON_IsObject(e)) ||
                   (strcmp(k, "namespaces") == 0 && cJSON_IsArray(e))) {
            const cJSON *ns, *kv;
            int i = 0;
            for (ns = cJSON_IsObject(e) ? e : e->child; ns; ns = cJSON_IsObject(e) ? NULL : ns->next, i++) {
                char *prefix = cJSON_IsObject(e) ? strdup("namespace.") : msp_asprintf("namespaces[%d].", i);
                if (!prefix)
                    return msp_fail(MSP_ERR_NOMEM, "out of memory");
                const cJSON *obj = cJSON_IsObject(ns) ? ns : NULL;
                cJSON_ArrayForEach(kv, obj)
                {
                    char *text = cJSON_IsString(kv) ? strdup(kv->valuestring) : cJSON_PrintUnformatted(kv);
                    rc = text ? msp_cc_hp_named(l, al, prefix, kv->string ? kv->string : "", text)
                              : msp_fail(MSP_ERR_NOMEM, "out of memory");
                    free(text);
                    if (rc != MSP_OK)
                        break;
                }
                free(prefix);
                if (rc != MSP_OK)
                    return rc;
            }
        } else if ((rc = msp_cc_flatten(e, k, l, 1)) != MSP_OK) {
            return rc;
        }
    }
    return MSP_OK;
}

/* By name, the last of a name winning (argparse keeps the last --lr). */
static int msp_cc_cmp_hp(const void *a, const void *b)
{
    const msp_cc_hp_t *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

static size_t msp_cc_hp_sort_last(msp_cc_hps_t *l)
{
    if (l->n < 2)
        return l->n;
    qsort(l->v, l->n, sizeof *l->v, msp_cc_cmp_hp);
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (k && strcmp(l->v[k - 1].name, l->v[i].name) == 0) {
            msp_cc_hp_t tmp = l->v[k - 1];
            l->v[k - 1] = l->v[i];
            l->v[i] = tmp; /* the earlier one moves past k and is freed with the rest */
            continue;
        }
        if (k != i) {
            msp_cc_hp_t tmp = l->v[k];
            l->v[k] = l->v[i];
            l->v[i] = tmp;
        }
        k++;
    }
    return k;
}

/* Numbers as numbers (1e-3 = 0.001), booleans as booleans (True = true). */
static int msp_cc_value_equal(const char *a, const char *b)
{
    if (strcmp(a, b) == 0)
        return 1;
    double x, y;
    if (msp_cc_is_number_text(a, &x) && msp_cc_is_number_text(b, &y)) {
        if (isnan(x) || isnan(y))
            return isnan(x) && isnan(y);
        if (isinf(x) || isinf(y))
            return !(x < y) && !(x > y);
        return fabs(x - y) <= 1e-12 * fmax(fabs(x), fabs(y));
    }
    int p = msp_cc_bool_word(a), q = msp_cc_bool_word(b);
    return p >= 0 && q >= 0 && !msp_cc_is_number_text(a, NULL) && !msp_cc_is_number_text(b, NULL) && p == q;
}

static int msp_cc_has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n > m && strcasecmp(s + n - m, suf) == 0;
}

/* A file-system location: has a '/', starts with ~ or ., ends with a file
 * extension, or exists here. Two runs always differ in these. */
static int msp_cc_looks_like_path(const char *v)
{
    static const char *const ext[] = {".json", ".yaml", ".yml", ".pt", ".pth", ".ckpt", ".bin", ".txt", ".csv",
                                      ".npy", ".npz", ".h5", ".hdf5", ".safetensors", ".log", ".zip", ".tar",
                                      ".gz", ".py", ".sh", ".jsonl", ".parquet", ".model", ".onnx", ".xlsx"};
    if (msp_cc_is_number_text(v, NULL) || !*v)
        return 0;
    if (strchr(v, '/') || strchr(v, '\\') || v[0] == '~' || (v[0] == '.' && (v[1] == '/' || v[1] == '.')))
        return 1;
    for (size_t i = 0; i < MSP_CC_N(ext); i++)
        if (msp_cc_has_suffix(v, ext[i]))
            return 1;
    return access(v, F_OK) == 0;
}

/* Option names that hold a location whatever the value: output_dir, save_path, ... */
static int msp_cc_name_is_path(const char *name)
{
    static const char *const words[] = {"dir", "path", "file", "output", "out", "root", "ckpt", "checkpoint",
                                        "cache", "logdir", "workdir", "folder", "filename"};
    const char *last = strrchr(name, '.');
    last = last ? last + 1 : name;
    for (const char *p = last; *p;) {
        size_t n = strcspn(p, "_");
        for (size_t i = 0; i < MSP_CC_N(words); i++)
            if (strlen(words[i]) == n && strncmp(p, words[i], n) == 0)
                return 1;
        p += n;
        while (*p == '_')
            p++;
    }
    return 0;
}

typedef struct msp_cc_hp_pair {
    const msp_cc_hp_t *b, *c;
    int side;
    size_t first;
} msp_cc_hp_pair_t;

static int msp_cc_cmp_hp_pair(const void *a, const void *b)
{
    const msp_cc_hp_pair_t *x = a, *y = b;
    if (x->side != y->side)
        return x->side - y->side;
    return (x->first > y->first) - (x->first < y->first);
}

static void msp_cc_hp_row(msp_cc_item_result_t *it, const msp_cc_hp_t *b, const msp_cc_hp_t *c)
{
    const msp_cc_hp_t *any = b ? b : c;
    const char *bt = b ? b->text : "<missing>", *ct = c ? c->text : "<missing>";
    int equal = b && c && msp_cc_value_equal(b->text, c->text);
    int info = !equal && (any->info || msp_cc_name_is_path(any->name) || (b && msp_cc_looks_like_path(b->text)) ||
                          (c && msp_cc_looks_like_path(c->text)));
    size_t row = msp_cc_table_add_row(it->table, equal || info ? MSP_CC_LEVEL_OK : MSP_CC_LEVEL_ERROR);
    msp_cc_table_set_str(it->table, row, 0, any->name);
    msp_cc_table_set_str(it->table, row, 1, bt);
    msp_cc_table_set_str(it->table, row, 2, ct);
    msp_cc_table_set_bool(it->table, row, 3, equal);
    msp_cc_table_set_str(it->table, row, 4, equal ? "ok" : info ? "info" : "error");
    msp_cc_table_set_str(it->table, row, 5, b ? b->src : "");
    msp_cc_table_set_str(it->table, row, 6, c ? c->src : "");
    if (equal)
        return;
    /* Say how each run spelt it when that differs from the compared name. */
    char *label = NULL;
    char *spelt = msp_cc_norm_name(any->src);
    const char *dot = strrchr(any->name, '.');
    if (b && c && strcmp(b->src, c->src) != 0)
        label = msp_asprintf("%s (bench %s, cmp %s)", any->name, b->src, c->src);
    else if (spelt && strcmp(any->src, any->name) != 0 && strcmp(spelt, dot ? dot + 1 : any->name) != 0)
        label = msp_asprintf("%s (%s)", any->name, any->src);
    free(spelt);
    const char *name = label ? label : any->name;
    if (info) {
        /* The whole command line is in the report; its parts are listed. */
        if (!any->info)
            msp_cc_add_info(it, "%s: bench %s vs cmp %s (a path)", name, bt, ct);
    } else {
        msp_cc_add_diff(it, name, bt, ct, "");
    }
    free(label);
}

static msp_err msp_cc_diff_hyper(const msp_cc_pack_t *b, const msp_cc_pack_t *c, const msp_cc_options_t *opt,
                                 msp_cc_item_result_t *it)
{
    static const char *const cols[] = {"name", "bench_value", "cmp_value", "equal", "level", "bench_name",
                                       "cmp_name"};
    msp_cc_hps_t lb = {0}, lc = {0};
    msp_cc_aliases_t al = {0};
    msp_cc_hp_pair_t *pairs = NULL;
    size_t np = 0;
    msp_err rc;
    if (!(it->table = msp_cc_table_new(cols, MSP_CC_N(cols))))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if ((rc = msp_cc_aliases_load(opt ? opt->aliases_file : NULL, &al)) != MSP_OK)
        goto cleanup;
    if ((rc = msp_cc_hp_collect(b->items[5], &al, &lb)) != MSP_OK ||
        (rc = msp_cc_hp_collect(c->items[5], &al, &lc)) != MSP_OK)
        goto cleanup;
    size_t nb = msp_cc_hp_sort_last(&lb), nc = msp_cc_hp_sort_last(&lc);
    if (!(pairs = calloc(nb + nc + 1, sizeof *pairs))) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    for (size_t i = 0, j = 0; i < nb || j < nc;) {
        int d = i >= nb ? 1 : j >= nc ? -1 : strcmp(lb.v[i].name, lc.v[j].name);
        msp_cc_hp_pair_t *pr = &pairs[np++];
        pr->b = d <= 0 ? &lb.v[i++] : NULL;
        pr->c = d >= 0 ? &lc.v[j++] : NULL;
        pr->side = pr->b ? 0 : 1;
        pr->first = pr->b ? pr->b->pos : pr->c->pos;
    }
    if (np > 1)
        qsort(pairs, np, sizeof *pairs, msp_cc_cmp_hp_pair);
    for (size_t k = 0; k < np; k++)
        msp_cc_hp_row(it, pairs[k].b, pairs[k].c);
cleanup:
    free(pairs);
    cJSON_Delete(al.user);
    msp_cc_hps_free(&lb);
    msp_cc_hps_free(&lc);
    return rc;
}

/* 1 when exactly one of the packs comes from an NPU run (see msp_cc_platform). */
static int msp_cc_cross_platform(const msp_cc_pack_t *b, const msp_cc_pack_t *c)
{
    int p[2] = {MSP_CC_PLAT_UNKNOWN, MSP_CC_PLAT_UNKNOWN};
    const msp_cc_pack_t *packs[2] = {b, c};
    for (int s = 0; s < 2; s++) {
        msp_cc_kv_t *v = NULL;
        size_t n = 0;
        if (packs[s]->items[0] && msp_cc_env_load(packs[s], &v, &n) != MSP_OK)
            msp_clear_error();
        p[s] = msp_cc_platform(packs[s], v, n);
        free(v);
    }
    return (p[0] == MSP_CC_PLAT_NPU) != (p[1] == MSP_CC_PLAT_NPU);
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
            rc = msp_cc_diff_pip(b, c, msp_cc_cross_platform(b, c), it);
            break;
        case 2:
        case 3:
            rc = msp_cc_diff_tensors(b, c, i, it);
            break;
        case 4:
            rc = msp_cc_diff_random(b, c, it);
            break;
        default:
            rc = msp_cc_diff_hyper(b, c, opt, it);
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
        for (size_t j = 0; j < it->n_info; j++)
            free(it->info[j]);
        free(it->info);
        msp_cc_table_free(it->table);
    }
    free(r->bench_path);
    free(r->cmp_path);
    free(r);
}
