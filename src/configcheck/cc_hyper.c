/* Hyperparameters of two packs as named values: argv parsed as argparse
 * would, names folded through an alias table, numbers compared as numbers,
 * locations reported as information. */
#include "cc_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- hyperparameters ---------------------------------------------------- */

/* Spellings of one hyperparameter folded to one name (after msprobe's
 * config_check table, extended). Names are compared after dropping leading
 * dashes, lowercasing and turning '-' into '_' (as argparse does). A user
 * file (--aliases) is looked up first. Documented in msprobe-config_check(1). */
typedef struct msp_cc_alias {
    const char *canon, *alias;
} msp_cc_alias_t;

static const msp_cc_alias_t msp_cc_builtin_aliases[] = {
    {"learning_rate", "lr"},
    {"learning_rate", "base_lr"},
    {"batch_size", "bs"},
    {"batch_size", "batch"},
    {"batch_size", "batch_size_per_gpu"},
    {"batch_size", "per_device_train_batch_size"},
    {"epochs", "epoch"},
    {"epochs", "num_epochs"},
    {"epochs", "max_epochs"},
    {"epochs", "num_train_epochs"},
    {"epochs", "n_epochs"},
    {"weight_decay", "wd"},
    {"weight_decay", "weight_decay_rate"},
    {"dropout", "drop_rate"},
    {"dropout", "dropout_rate"},
    {"dropout", "dropout_prob"},
    {"max_steps", "train_iters"},
    {"max_steps", "total_steps"},
    {"max_steps", "num_train_steps"},
    {"warmup_steps", "warmup"},
    {"warmup_steps", "warmup_iters"},
    {"warmup_steps", "lr_warmup_iters"},
    {"warmup_steps", "lr_warmup_steps"},
    {"gradient_accumulation_steps", "grad_accum"},
    {"gradient_accumulation_steps", "accumulate_grad_batches"},
    {"gradient_accumulation_steps", "grad_acc_steps"},
    {"max_grad_norm", "clip_grad"},
    {"max_grad_norm", "grad_clip"},
    {"max_grad_norm", "clip_grad_norm"},
    {"max_grad_norm", "gradient_clipping"},
    {"seed", "random_seed"},
    {"seed", "manual_seed"},
    /* compute dtype given by value: --dtype bf16, --precision 16-mixed, ... */
    {"dtype", "precision"},
    {"dtype", "mixed_precision"},
    {"dtype", "compute_dtype"},
    {"dtype", "torch_dtype"},
    {"dtype", "amp_dtype"},
    {"dtype", "params_dtype"},
};

/* Compute dtype given by a flag: --fp16, --bf16, ... means dtype = value. */
static const msp_cc_alias_t msp_cc_dtype_flags[] = {
    {"fp16", "fp16"},     {"fp16", "half"}, {"fp16", "float16"}, {"bf16", "bf16"},
    {"bf16", "bfloat16"}, {"fp32", "fp32"}, {"fp32", "float32"}, {"fp32", "float"},
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
        return msp_fail(MSP_ERR_USAGE,
                        "--aliases %s: expected a JSON object {\"canonical\": [\"alias\", ...]}",
                        path);
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
            rc = msp_fail(MSP_ERR_USAGE,
                          "--aliases %s: key \"%s\": expected a list of names (strings)", path,
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
    static const struct {
        const char *in, *out;
    } map[] = {
        {"bf16", "bf16"},   {"bfloat16", "bf16"}, {"fp16", "fp16"}, {"float16", "fp16"},
        {"half", "fp16"},   {"16", "fp16"},       {"fp32", "fp32"}, {"float32", "fp32"},
        {"float", "fp32"},  {"32", "fp32"},       {"fp64", "fp64"}, {"float64", "fp64"},
        {"double", "fp64"}, {"64", "fp64"},
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
    char *name; /* compared name: "args.learning_rate", "optimizers[0].param_groups[0].lr" */
    char *src;  /* as the run spelt it: "--lr", or the name */
    char *text; /* the value */
    size_t pos;
    int info; /* never a failure (the raw argv) */
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
static msp_err msp_cc_hp_named(msp_cc_hps_t *l, const msp_cc_aliases_t *al, const char *prefix,
                               const char *spelt, const char *value)
{
    char *norm = msp_cc_norm_name(spelt);
    if (!norm)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    const char *canon = msp_cc_canon(al, norm);
    char *val = NULL;
    if (canon == norm) { /* not an alias: maybe a dtype flag (--bf16) */
        int on = msp_cc_bool_word(value);
        for (size_t i = 0; on >= 0 && i < MSP_CC_N(msp_cc_dtype_flags); i++)
            if (strcmp(norm, msp_cc_dtype_flags[i].alias) == 0) {
                if (on == 0) { /* a namespace's bf16=False: the flag not given, the default dtype */
                    free(norm);
                    return MSP_OK;
                }
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
            rc = spelt ? msp_cc_hp_named(l, al, "args.", spelt, eq + 1)
                       : msp_fail(MSP_ERR_NOMEM, "out of memory");
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
        return msp_fail(MSP_ERR_FORMAT, "hyperparameters.json: nested deeper than 32 levels at %s",
                        path);
    if (cJSON_IsObject(node) || (cJSON_IsArray(node) && !msp_cc_is_scalar_array(node))) {
        const cJSON *e;
        int i = 0;
        cJSON_ArrayForEach(e, node)
        {
            char *sub = cJSON_IsObject(node)
                            ? msp_asprintf("%s%s%s", path, *path ? "." : "", e->string)
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
/* The command line as the report shows it: a secret's stored form (even a
 * keyed hash) becomes <secret>, in "--name=V" too. */
static char *msp_cc_args_text(const cJSON *args)
{
    cJSON *copy = cJSON_Duplicate(args, 1);
    for (cJSON *a = copy ? copy->child : NULL; a; a = a->next) {
        if (!cJSON_IsString(a))
            continue;
        const char *v = a->valuestring, *eq = v[0] == '-' ? strchr(v, '=') : NULL;
        if (msp_cc_secret_kind(v) != MSP_CC_SECRET_NONE) {
            cJSON_SetValuestring(a, "<secret>");
        } else if (eq && msp_cc_secret_kind(eq + 1) != MSP_CC_SECRET_NONE) {
            char *t = msp_asprintf("%.*s=<secret>", (int)(eq - v), v);
            if (t)
                cJSON_SetValuestring(a, t);
            free(t);
        } else if (msp_cc_secret_masked(v) != MSP_CC_SECRET_NONE) {
            char *t = msp_cc_secret_shown(v); /* the text, its secrets as <secret> */
            cJSON_SetValuestring(a, t ? t : "<secret>");
            free(t);
        }
    }
    char *text = copy ? cJSON_PrintUnformatted(copy) : NULL;
    cJSON_Delete(copy);
    return text;
}

static msp_err msp_cc_hp_collect(const cJSON *doc, const msp_cc_aliases_t *al, msp_cc_hps_t *l)
{
    msp_err rc = MSP_OK;
    const cJSON *e;
    cJSON_ArrayForEach(e, doc)
    {
        const char *k = e->string ? e->string : "";
        if (strcmp(k, "args") == 0 && cJSON_IsArray(e) && msp_cc_is_scalar_array(e)) {
            if ((rc = msp_cc_hp_add(l, strdup("args"), strdup("args"), msp_cc_args_text(e), 1)) !=
                    MSP_OK ||
                (rc = msp_cc_parse_argv(e, al, l)) != MSP_OK)
                return rc;
        } else if ((strcmp(k, "namespace") == 0 && cJSON_IsObject(e)) ||
                   (strcmp(k, "namespaces") == 0 && cJSON_IsArray(e))) {
            const cJSON *ns, *kv;
            int i = 0;
            for (ns = cJSON_IsObject(e) ? e : e->child; ns;
                 ns = cJSON_IsObject(e) ? NULL : ns->next, i++) {
                char *prefix = cJSON_IsObject(e) ? strdup("namespace.")
                                                 : msp_asprintf("namespaces[%d].", i);
                if (!prefix)
                    return msp_fail(MSP_ERR_NOMEM, "out of memory");
                const cJSON *obj = cJSON_IsObject(ns) ? ns : NULL;
                cJSON_ArrayForEach(kv, obj)
                {
                    char *text = cJSON_IsString(kv) ? strdup(kv->valuestring)
                                                    : cJSON_PrintUnformatted(kv);
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
    return p >= 0 && q >= 0 && !msp_cc_is_number_text(a, NULL) && !msp_cc_is_number_text(b, NULL) &&
           p == q;
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
    static const char *const ext[] = {
        ".json", ".yaml", ".yml",   ".pt",      ".pth",         ".ckpt", ".bin", ".txt", ".csv",
        ".npy",  ".npz",  ".h5",    ".hdf5",    ".safetensors", ".log",  ".zip", ".tar", ".gz",
        ".py",   ".sh",   ".jsonl", ".parquet", ".model",       ".onnx", ".xlsx"};
    if (msp_cc_is_number_text(v, NULL) || !*v)
        return 0;
    if (strchr(v, '/') || strchr(v, '\\') || v[0] == '~' ||
        (v[0] == '.' && (v[1] == '/' || v[1] == '.')))
        return 1;
    for (size_t i = 0; i < MSP_CC_N(ext); i++)
        if (msp_cc_has_suffix(v, ext[i]))
            return 1;
    return access(v, F_OK) == 0;
}

/* Option names that hold a location whatever the value: output_dir, save_path, ... */
static int msp_cc_name_is_path(const char *name)
{
    static const char *const words[] = {"dir",     "path",   "file",       "output", "out",
                                        "root",    "ckpt",   "checkpoint", "cache",  "logdir",
                                        "workdir", "folder", "filename"};
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
    const char *sv = any->info ? NULL
                               : msp_cc_secret_verdict(b ? b->text : NULL, c ? c->text : NULL);
    if (sv) {
        /* A secret: the report says same / differs / not compared, never the value. */
        int same = strcmp(sv, "same") == 0, differs = strcmp(sv, "differs") == 0;
        size_t row = msp_cc_table_add_row(it->table,
                                          differs ? MSP_CC_LEVEL_ERROR : MSP_CC_LEVEL_OK);
        msp_cc_table_set_str(it->table, row, 0, any->name);
        char *bs = b ? msp_cc_secret_shown(b->text) : NULL,
             *cs = c ? msp_cc_secret_shown(c->text) : NULL;
        msp_cc_table_set_str(it->table, row, 1, b ? (bs ? bs : "<secret>") : "<missing>");
        msp_cc_table_set_str(it->table, row, 2, c ? (cs ? cs : "<secret>") : "<missing>");
        free(bs);
        free(cs);
        msp_cc_table_set_bool(it->table, row, 3, same);
        msp_cc_table_set_str(it->table, row, 4, sv);
        msp_cc_table_set_str(it->table, row, 5, b ? b->src : "");
        msp_cc_table_set_str(it->table, row, 6, c ? c->src : "");
        if (differs)
            msp_cc_add_failed(it, "%s: secret differs", any->name);
        else if (!same)
            msp_cc_add_info(it,
                            "%s: secret not compared (set the same MSPROBE_SECRET_SALT on both "
                            "machines to "
                            "compare keyed hashes)",
                            any->name);
        return;
    }
    int equal = b && c && msp_cc_value_equal(b->text, c->text);
    int info = !equal &&
               (any->info || msp_cc_name_is_path(any->name) ||
                (b && msp_cc_looks_like_path(b->text)) || (c && msp_cc_looks_like_path(c->text)));
    size_t row = msp_cc_table_add_row(it->table,
                                      equal || info ? MSP_CC_LEVEL_OK : MSP_CC_LEVEL_ERROR);
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
    else if (spelt && strcmp(any->src, any->name) != 0 &&
             strcmp(spelt, dot ? dot + 1 : any->name) != 0)
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

msp_err msp_cc_diff_hyper(const msp_cc_pack_t *b, const msp_cc_pack_t *c, int item,
                          const msp_cc_options_t *opt, msp_cc_result_t *r, msp_cc_item_result_t *it)
{
    (void)item, (void)r;
    static const char *const cols[] = {"name",  "bench_value", "cmp_value", "equal",
                                       "level", "bench_name",  "cmp_name"};
    msp_cc_hps_t lb = {0}, lc = {0};
    msp_cc_aliases_t al = {0};
    msp_cc_hp_pair_t *pairs = NULL;
    size_t np = 0;
    msp_err rc;
    if (!(it->table = msp_cc_table_new(cols, MSP_CC_N(cols))))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    if ((rc = msp_cc_aliases_load(opt ? opt->aliases_file : NULL, &al)) != MSP_OK)
        goto cleanup;
    if ((rc = msp_cc_hp_collect(b->items[MSP_CC_ITEM_HYPER], &al, &lb)) != MSP_OK ||
        (rc = msp_cc_hp_collect(c->items[MSP_CC_ITEM_HYPER], &al, &lc)) != MSP_OK)
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
