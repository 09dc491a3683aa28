/* msprobe's monitor config.json (msprobe-monitor(1)): the keys Huawei
 * msprobe's TrainerMon reads, checked as its validate_config checks them, but
 * every bad value is an error naming the file and the key (msprobe falls back
 * to defaults for some), so a typo stops the run before training starts. Keys
 * msprobe knows that change nothing here are collected to be named once. */
#include "msprobe/monitor.h"

#include "config_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const msp_mon_op_names[MSP_MON_NOPS] = {"min", "max", "mean", "norm", "zeros", "nans"};

/* msprobe's keys that are accepted but not acted on: "why" says so. */
static const struct {
    const char *key, *why;
} msp_mon_unsupported_keys[] = {
    {"print_struct", "print_struct"},
    {"stack_info", "stack_info"},
    {"l2_targets", "l2_targets"},
    {"recording_l2_features", "recording_l2_features"},
    {"sa_order", "sa_order"},
    {"mg_direction", "mg_direction"},
    {"mg_distribution", "mg_distribution"},
    {"monitor_mbs_grad", "monitor_mbs_grad"},
    {"squash_name", "squash_name"},
    {"append_output", "append_output"},
    {"cc_distribution", "cc_distribution"},
    {"ur_distribution", "ur_distribution (msprobe cancels it in csv format too)"},
    {"opt_ty", "opt_ty"},
};

static msp_err mon_note_unsupported(msp_mon_config_t *c, const char *what)
{
    char **u = realloc(c->unsupported, (c->n_unsupported + 1) * sizeof *u);
    if (!u)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    c->unsupported = u;
    if (!(u[c->n_unsupported] = strdup(what)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    c->n_unsupported++;
    return MSP_OK;
}

static msp_err mon_bad(const msp_mon_config_t *c, const char *key, const char *what,
                       const cJSON *got)
{
    char desc[64];
    msp_cfg_describe(got, desc, sizeof desc);
    return msp_fail(MSP_ERR_CONFIG, "%s: %s: expected %s, got %s", c->source, key, what, desc);
}

static msp_err mon_bool(const msp_mon_config_t *c, const cJSON *root, const char *key, int *out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it)
        return MSP_OK;
    if (!cJSON_IsBool(it))
        return mon_bad(c, key, "true or false", it);
    *out = cJSON_IsTrue(it);
    return MSP_OK;
}

/* A whole number from lo to hi (JSON numbers are doubles: 2^53 at most). */
static msp_err mon_int(const msp_mon_config_t *c, const cJSON *it, const char *key, int64_t lo,
                       int64_t hi, int64_t *out)
{
    char what[96];
    snprintf(what, sizeof what, "a whole number from %lld to %lld", (long long)lo, (long long)hi);
    if (!cJSON_IsNumber(it) || it->valuedouble > floor(it->valuedouble) ||
        it->valuedouble < (double)lo || it->valuedouble > (double)hi)
        return mon_bad(c, key, what, it);
    *out = (int64_t)it->valuedouble;
    return MSP_OK;
}

static msp_err mon_targets(msp_mon_config_t *c, const cJSON *it)
{
    if (!cJSON_IsObject(it))
        return mon_bad(c, "targets", "an object {\"module.name\": {}, ...}", it);
    size_t n = (size_t)cJSON_GetArraySize(it);
    c->targets = calloc(n ? n : 1, sizeof *c->targets);
    if (!c->targets)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, it)
    {
        char key[300];
        snprintf(key, sizeof key, "targets.%s", e->string);
        if (!cJSON_IsObject(e))
            return mon_bad(c, key, "an object ({} or {\"input\": ...})", e);
        if (!(c->targets[c->n_targets] = strdup(e->string)))
            return msp_fail(MSP_ERR_NOMEM, "out of memory");
        c->n_targets++;
    }
    return MSP_OK;
}

static msp_err mon_ops(msp_mon_config_t *c, const cJSON *it)
{
    if (!cJSON_IsArray(it))
        return mon_bad(c, "ops", "a list of min, max, mean, norm, zeros, nans", it);
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, it)
    {
        char key[32];
        snprintf(key, sizeof key, "ops[%d]", i++);
        const char *s = cJSON_IsString(e) ? e->valuestring : NULL;
        int op = -1;
        for (int k = 0; s && k < MSP_MON_NOPS; k++)
            if (strcmp(s, msp_mon_op_names[k]) == 0)
                op = k;
        if (op < 0 && s && (!strcmp(s, "shape") || !strcmp(s, "dtype")))
            continue; /* always written, after the statistics */
        if (op < 0 && s && !strcmp(s, "id")) {
            msp_err rc = mon_note_unsupported(c, "ops \"id\"");
            if (rc != MSP_OK)
                return rc;
            continue;
        }
        if (op < 0)
            return mon_bad(c, key, "one of min, max, mean, norm, zeros, nans, shape, dtype", e);
        int dup = 0;
        for (size_t k = 0; k < c->n_ops; k++)
            dup |= c->ops[k] == (msp_mon_op_t)op;
        if (!dup)
            c->ops[c->n_ops++] = (msp_mon_op_t)op;
    }
    if (c->n_ops == 0) /* msprobe: "no valid ops, default op norm is used" */
        c->ops[c->n_ops++] = MSP_MON_NORM;
    return MSP_OK;
}

static msp_err mon_alert(msp_mon_config_t *c, const cJSON *it)
{
    if (!cJSON_IsObject(it))
        return mon_bad(c, "alert", "an object {\"rules\": [...], \"dump\": BOOL}", it);
    const cJSON *e;
    cJSON_ArrayForEach(e, it)
    {
        if (strcmp(e->string, "rules") && strcmp(e->string, "dump"))
            return msp_fail(MSP_ERR_CONFIG, "%s: alert.%s: unknown key (known: rules, dump)",
                            c->source, e->string);
    }
    const cJSON *dump = cJSON_GetObjectItemCaseSensitive(it, "dump");
    if (dump && !cJSON_IsBool(dump))
        return mon_bad(c, "alert.dump", "true or false", dump);
    c->alert_dump = dump && cJSON_IsTrue(dump);
    const cJSON *rules = cJSON_GetObjectItemCaseSensitive(it, "rules");
    if (!rules)
        return MSP_OK;
    if (!cJSON_IsArray(rules))
        return mon_bad(c, "alert.rules", "a list of {\"rule_name\": ..., \"args\": {...}}", rules);
    int i = 0;
    cJSON_ArrayForEach(e, rules)
    {
        char key[64];
        snprintf(key, sizeof key, "alert.rules[%d]", i++);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "rule_name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        const cJSON *thr = args ? cJSON_GetObjectItemCaseSensitive(args, "threshold") : NULL;
        if (!cJSON_IsObject(e) || !cJSON_IsString(name))
            return mon_bad(c, key, "an object with \"rule_name\"", e);
        msp_mon_rule_t r = {0};
        if (!strcmp(name->valuestring, "AnomalyTurbulence"))
            r.kind = MSP_MON_TURBULENCE;
        else if (!strcmp(name->valuestring, "AnomalyNan"))
            r.kind = MSP_MON_NAN;
        else
            return mon_bad(c, key, "rule_name AnomalyTurbulence or AnomalyNan", name);
        if (args && !cJSON_IsObject(args))
            return mon_bad(c, key, "\"args\" an object {\"threshold\": NUMBER}", args);
        if (thr && (!cJSON_IsNumber(thr) || thr->valuedouble < 0))
            return mon_bad(c, key, "args.threshold a number >= 0", thr);
        if (r.kind == MSP_MON_TURBULENCE && !thr)
            return msp_fail(MSP_ERR_CONFIG,
                            "%s: %s: AnomalyTurbulence needs \"args\": {\"threshold\": NUMBER}",
                            c->source, key);
        r.has_threshold = thr != NULL;
        r.threshold = thr ? thr->valuedouble : 0;
        if (c->n_rules >= MSP_MON_MAX_RULES)
            return msp_fail(MSP_ERR_CONFIG, "%s: %s: at most %d rules", c->source, key,
                            MSP_MON_MAX_RULES);
        c->rules[c->n_rules++] = r;
    }
    return MSP_OK;
}

static msp_err mon_ranks(msp_mon_config_t *c, const cJSON *it)
{
    if (!cJSON_IsArray(it))
        return mon_bad(c, "module_ranks", "a list of ranks", it);
    size_t n = (size_t)cJSON_GetArraySize(it);
    c->module_ranks = calloc(n ? n : 1, sizeof *c->module_ranks);
    if (!c->module_ranks)
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, it)
    {
        char key[48];
        snprintf(key, sizeof key, "module_ranks[%zu]", c->n_module_ranks);
        msp_err rc = mon_int(c, e, key, 0, 1 << 30, &c->module_ranks[c->n_module_ranks]);
        if (rc != MSP_OK)
            return rc;
        c->n_module_ranks++;
    }
    return MSP_OK;
}

/* The numbers and the format. */
static msp_err mon_numbers(msp_mon_config_t *c, const cJSON *root)
{
    static const struct {
        const char *key;
        int64_t lo, hi;
        size_t off;
    } nums[] = {
        {"step_count_per_record", 1, 1000000, offsetof(msp_mon_config_t, step_count_per_record)},
        {"start_step", 0, INT64_C(1) << 53, offsetof(msp_mon_config_t, start_step)},
        {"step_interval", 1, INT64_C(1) << 53, offsetof(msp_mon_config_t, step_interval)},
        {"collect_times", 0, INT64_C(1) << 53, offsetof(msp_mon_config_t, collect_times)},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, nums[i].key);
        msp_err rc = it ? mon_int(c, it, nums[i].key, nums[i].lo, nums[i].hi,
                                  (int64_t *)(void *)((char *)c + nums[i].off))
                        : MSP_OK;
        if (rc != MSP_OK)
            return rc;
    }
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, "ndigits");
    int64_t nd = c->ndigits;
    if (it && mon_int(c, it, "ndigits", 1, 20, &nd) != MSP_OK)
        return MSP_ERR_CONFIG;
    c->ndigits = (int)nd;
    if ((it = cJSON_GetObjectItemCaseSensitive(root, "eps"))) {
        if (!cJSON_IsNumber(it) || !(it->valuedouble > 0))
            return mon_bad(c, "eps", "a number > 0", it);
        c->eps = it->valuedouble;
    }
    if ((it = cJSON_GetObjectItemCaseSensitive(root, "format"))) {
        if (!cJSON_IsString(it))
            return mon_bad(c, "format", "\"csv\"", it);
        if (strcmp(it->valuestring, "csv") != 0) {
            char note[96];
            snprintf(note, sizeof note, "format \"%.40s\" (csv is written)", it->valuestring);
            return mon_note_unsupported(c, note);
        }
    }
    return MSP_OK;
}

static int mon_known(const char *k)
{
    static const char *const known[] = {"targets",
                                        "module_ranks",
                                        "wg_distribution",
                                        "param_distribution",
                                        "mv_distribution",
                                        "xy_distribution",
                                        "all_xy",
                                        "forward_only",
                                        "backward_only",
                                        "ops",
                                        "eps",
                                        "format",
                                        "ndigits",
                                        "step_count_per_record",
                                        "start_step",
                                        "step_interval",
                                        "collect_times",
                                        "alert",
                                        "dynamic_on"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(k, known[i]))
            return 1;
    return 0;
}

static msp_err mon_keys(msp_mon_config_t *c, const cJSON *root)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, root)
    {
        if (mon_known(e->string))
            continue;
        int found = 0;
        for (size_t i = 0; i < sizeof msp_mon_unsupported_keys / sizeof msp_mon_unsupported_keys[0];
             i++) {
            if (strcmp(e->string, msp_mon_unsupported_keys[i].key))
                continue;
            found = 1;
            /* false, {} or [] asks for nothing: not worth a warning */
            int asks = !(cJSON_IsFalse(e) ||
                         ((cJSON_IsObject(e) || cJSON_IsArray(e)) && cJSON_GetArraySize(e) == 0));
            msp_err rc = asks ? mon_note_unsupported(c, msp_mon_unsupported_keys[i].why) : MSP_OK;
            if (rc != MSP_OK)
                return rc;
        }
        if (!found)
            return msp_fail(MSP_ERR_CONFIG,
                            "%s: %s: unknown key (msprobe's monitor keys: targets, "
                            "wg_distribution, param_distribution, mv_distribution, "
                            "xy_distribution, ops, format, ndigits, step_count_per_record, "
                            "start_step, step_interval, collect_times, alert, ...)",
                            c->source, e->string);
    }
    return MSP_OK;
}

static msp_err mon_parse(msp_mon_config_t *c, const cJSON *root)
{
    static const struct {
        const char *key;
        size_t off;
    } flags[] = {
        {"wg_distribution", offsetof(msp_mon_config_t, wg)},
        {"param_distribution", offsetof(msp_mon_config_t, param)},
        {"mv_distribution", offsetof(msp_mon_config_t, mv)},
        {"xy_distribution", offsetof(msp_mon_config_t, xy)},
        {"all_xy", offsetof(msp_mon_config_t, all_xy)},
        {"forward_only", offsetof(msp_mon_config_t, forward_only)},
        {"backward_only", offsetof(msp_mon_config_t, backward_only)},
        {"dynamic_on", offsetof(msp_mon_config_t, dynamic_on)},
    };
    if (!cJSON_IsObject(root))
        return mon_bad(c, "(top level)", "an object", root);
    msp_err rc = mon_keys(c, root);
    for (size_t i = 0; rc == MSP_OK && i < sizeof flags / sizeof flags[0]; i++)
        rc = mon_bool(c, root, flags[i].key, (int *)(void *)((char *)c + flags[i].off));
    const cJSON *it;
    if (rc == MSP_OK && (it = cJSON_GetObjectItemCaseSensitive(root, "targets")))
        rc = mon_targets(c, it);
    if (rc == MSP_OK && (it = cJSON_GetObjectItemCaseSensitive(root, "module_ranks")))
        rc = mon_ranks(c, it);
    if (rc == MSP_OK) {
        it = cJSON_GetObjectItemCaseSensitive(root, "ops");
        if (it)
            rc = mon_ops(c, it);
        else
            c->ops[c->n_ops++] = MSP_MON_NORM;
    }
    if (rc == MSP_OK && (it = cJSON_GetObjectItemCaseSensitive(root, "alert")))
        rc = mon_alert(c, it);
    if (rc == MSP_OK)
        rc = mon_numbers(c, root);
    /* msprobe: no targets and xy_distribution means every module's activations */
    if (rc == MSP_OK && c->n_targets == 0 && c->xy)
        c->all_xy = 1;
    return rc;
}

msp_err msp_mon_config_load(const char *path, msp_mon_config_t *out)
{
    memset(out, 0, sizeof *out);
    out->eps = 1e-8;
    out->ndigits = 6;
    out->step_count_per_record = 1;
    out->step_interval = 1;
    out->collect_times = 100000000;
    char *text = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    if (!(out->source = strdup(path)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory");
    msp_err rc = msp_read_file(path, 16u << 20, &text, &len);
    if (rc == MSP_OK)
        rc = msp_cfg_json_parse(text, path, &root);
    if (rc == MSP_OK)
        rc = mon_parse(out, root);
    cJSON_Delete(root);
    free(text);
    return rc;
}

void msp_mon_config_free(msp_mon_config_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_targets; i++)
        free(c->targets[i]);
    for (size_t i = 0; i < c->n_unsupported; i++)
        free(c->unsupported[i]);
    free(c->targets);
    free(c->unsupported);
    free(c->module_ranks);
    free(c->source);
    memset(c, 0, sizeof *c);
}

char *msp_mon_config_unsupported_text(const msp_mon_config_t *c)
{
    size_t len = 1;
    for (size_t i = 0; i < c->n_unsupported; i++)
        len += strlen(c->unsupported[i]) + 2;
    if (c->n_unsupported == 0)
        return NULL;
    char *s = calloc(1, len);
    for (size_t i = 0; s && i < c->n_unsupported; i++) {
        if (i)
            strcat(s, ", ");
        strcat(s, c->unsupported[i]);
    }
    return s;
}
