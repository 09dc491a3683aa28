/* msprobe.json loader: the text becomes a tree (config_json.c), then a strict
 * walk (config_walk.c) over the table of every key its layout has, so a typo
 * is an error rather than a silently ignored setting. The two layouts, ours
 * and msprobe's config.json, are the two tables here. */
#include "config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A config is a few hundred bytes; anything this large is a wrong path. */
#define MSP_CONFIG_MAX_BYTES (16u * 1024u * 1024u)

#define MSP_NELEM(a) (sizeof(a) / sizeof((a)[0]))

const char *const msp_dump_mode_names[3] = {"api", "module", "mix"};
const char *const msp_task_names[4] = {"tensor", "statistics", "md5", "overflow_check"};
const char *const msp_step_trigger_names[4] = {"optimizer", "backward", "forward", "manual"};

/* ---- what both layouts share ---------------------------------------------- */

static const char msp_cfg_overflow_what[] = "a number of overflows >= 1, or -1 for no limit";
static const char msp_cfg_overflow_only[] = "applies only to task \"overflow_check\"";

static int msp_cfg_task_overflow(const msp_config_t *cfg)
{
    return cfg->task == MSP_TASK_OVERFLOW;
}

/* An api_list entry's place for messages: its key and the text written there. */
static char *msp_cfg_entry_key(const char *path, const char *text)
{
    char shown[160];
    msp_cfg_quote(shown, sizeof shown, text);
    return msp_asprintf("%s \"%s\"", path, shown);
}

/* ---- our msprobe.json ----------------------------------------------------- */

static void msp_cfg_dump_on(void *dst)
{
    ((msp_config_t *)dst)->has_dump = 1;
}

static void msp_cfg_config_check_on(void *dst)
{
    ((msp_config_t *)dst)->has_config_check = 1;
}

static void msp_cfg_api_sel_init(void *dst)
{
    ((msp_api_sel_t *)dst)->dirs = MSP_DIR_FORWARD | MSP_DIR_BACKWARD;
}

/* api_list[].name: a name without spaces, and where it was written. */
static msp_err msp_cfg_api_name(const msp_cfg_walk_t *w, const msp_cfg_key_t *k, const cJSON *it,
                                const char *path, void *dst)
{
    msp_api_sel_t *sel = dst;
    msp_err rc = msp_cfg_string(w, it, path, k->what, &sel->name);
    if (rc != MSP_OK)
        return rc;
    if (!(sel->key = msp_cfg_entry_key(path, it->valuestring)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", w->source);
    for (const char *c = sel->name; *c; c++)
        if (isspace((unsigned char)*c) || (unsigned char)*c < 0x20)
            return msp_cfg_expected(w, path, "an API or module name without spaces", it);
    return MSP_OK;
}

static const char *const msp_cfg_api_types[] = {"forward", "backward", "all", "both"};
static const int msp_cfg_api_dirs[] = {MSP_DIR_FORWARD, MSP_DIR_BACKWARD,
                                       MSP_DIR_FORWARD | MSP_DIR_BACKWARD,
                                       MSP_DIR_FORWARD | MSP_DIR_BACKWARD};
_Static_assert(MSP_NELEM(msp_cfg_api_types) == MSP_NELEM(msp_cfg_api_dirs), "a value per name");

/* Shorthands for the tables. */
#define KEY(p, k) .path = (p), .kind = MSP_CFG_##k
#define CFG(f, T) MSP_CFG_AT(msp_config_t, f, T)
#define CFG_ENUM(f) MSP_CFG_ENUM_AT(msp_config_t, f)
#define NAMES(a) .names = (a), .n_names = MSP_NELEM(a)

/* msprobe.json (see msprobe.json(5)). */
static const msp_cfg_key_t msp_cfg_ours[] = {
    {KEY("", OBJECT)},
    {KEY("dump", OBJECT), .init = msp_cfg_dump_on, .flags = MSP_CFG_TELLS},
    {KEY("dump.common_dump_settings", OBJECT)},
    {KEY("dump.common_dump_settings.dump_mode", ENUM), .off = CFG_ENUM(dump_mode),
     NAMES(msp_dump_mode_names)},
    {KEY("dump.common_dump_settings.dump_path", STRING), .off = CFG(dump_path, char *),
     .what = "a non-empty directory path"},
    {KEY("dump.common_dump_settings.dump_iter", STEPS), .off = CFG(dump_iter, msp_step_set_t)},
    {KEY("dump.common_dump_settings.task", ENUM), .off = CFG_ENUM(task), NAMES(msp_task_names)},
    {KEY("dump.common_dump_settings.step_trigger", ENUM), .off = CFG_ENUM(step_trigger),
     NAMES(msp_step_trigger_names)},
    /* ranks take the step-set syntax: "0|2", "0-3", [0, 2], "all" */
    {KEY("dump.common_dump_settings.rank", STEPS), .off = CFG(ranks, msp_step_set_t)},
    /* each record's call site (msprobe's extra_info) */
    {KEY("dump.common_dump_settings.stack", BOOL), .off = CFG(stacks, int)},
    {KEY("dump.common_dump_settings.overflow_nums", INT), .off = CFG(overflow_nums, int64_t),
     .what = msp_cfg_overflow_what, .min = -1, .flags = MSP_CFG_NONZERO,
     .only = msp_cfg_task_overflow, .only_why = msp_cfg_overflow_only},
    {KEY("dump.api_list", LIST), .off = CFG(api_list, msp_api_sel_t *),
     .count = CFG(n_api_list, size_t), .elem_size = sizeof(msp_api_sel_t),
     .what = "an array of {\"name\": ..., \"api_type\": ...}"},
    {KEY("dump.api_list[]", OBJECT), .init = msp_cfg_api_sel_init},
    {KEY("dump.api_list[].name", CUSTOM), .set = msp_cfg_api_name,
     .what = "a non-empty API or module name", .flags = MSP_CFG_REQUIRED,
     .note = "each api_list entry needs a name, e.g. \"torch.nn.functional.conv2d\" or "
             "\"layer1.0.conv1\""},
    {KEY("dump.api_list[].api_type", ENUM), .off = MSP_CFG_ENUM_AT(msp_api_sel_t, dirs),
     NAMES(msp_cfg_api_types), .values = msp_cfg_api_dirs},
    {KEY("config_check", OBJECT), .init = msp_cfg_config_check_on, .flags = MSP_CFG_TELLS},
    {KEY("config_check.output_zip_path", STRING), .off = CFG(cc_output_zip_path, char *),
     .what = "a non-empty file path", .flags = MSP_CFG_FILE},
    /* -1 is accepted as the spelled-out default ("only at exit") */
    {KEY("config_check.write_at_step", INT), .off = CFG(cc_write_at_step, int64_t),
     .what = "a step number >= 0 (or -1: only at exit)", .min = -1},
    {KEY("config_check.dataset_batches", INT), .off = CFG(cc_dataset_batches, int64_t),
     .what = "an integer >= 1", .min = 1},
};
_Static_assert(MSP_NELEM(msp_cfg_ours) <= MSP_CFG_MAX_KEYS, "raise MSP_CFG_MAX_KEYS");

/* ---- msprobe's config.json ------------------------------------------------ */

/* msprobe's defaults: task statistics, level L1. */
static void msp_ms_defaults(void *dst)
{
    msp_config_t *cfg = dst;
    cfg->msprobe_format = 1;
    cfg->has_dump = 1;
    cfg->task = MSP_TASK_STATISTICS;
}

/* The section of the task in use applies (statistics for md5; overflow_check
 * has its own); the others change nothing here. */
static int msp_ms_task_statistics(const msp_config_t *cfg)
{
    return cfg->task != MSP_TASK_TENSOR && cfg->task != MSP_TASK_OVERFLOW;
}

static int msp_ms_task_tensor(const msp_config_t *cfg)
{
    return cfg->task == MSP_TASK_TENSOR;
}

/* dump_enable: given at all, the shim reads the file again at each step's
 * end and follows it (msprobe 26's dynamic dump_enable); false: nothing is
 * dumped until it says true. */
static msp_err msp_ms_dump_enable(const msp_cfg_walk_t *w, const msp_cfg_key_t *k, const cJSON *it,
                                  const char *path, void *dst)
{
    msp_config_t *cfg = dst;
    (void)k;
    if (!cJSON_IsBool(it))
        return msp_cfg_expected(w, path, "true or false", it);
    cfg->dump_enable_set = 1;
    cfg->dump_disabled = cJSON_IsFalse(it);
    return MSP_OK;
}

static int msp_ms_digits(const char *q)
{
    if (!*q)
        return 0;
    for (; *q; q++)
        if (!isdigit((unsigned char)*q))
            return 0;
    return 1;
}

/* The text from p, n bytes long, is word. */
static int msp_ms_is(const char *p, size_t n, const char *word)
{
    return strlen(word) == n && strncmp(p, word, n) == 0;
}

/* The n bytes from p are digits (at least one). */
static int msp_ms_digits_n(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)p[i]))
            return 0;
    return n > 0;
}

/* Whether name has msprobe's form of an API record ("Functional.relu.0.forward":
 * a prefix msprobe dumps, a name, a call index, a direction) or, with module
 * set, of a module record ("Module.fc.Linear.forward.0"), as its
 * RangeScope.check_name_pattern asks. */
static int msp_ms_record_form(const char *name, int module)
{
    static const char *const api[] = {"Functional.", "Torch.", "Tensor.", "Distributed.",
                                      "NPU.",        "Aten.",  "VF.",     "Custom."};
    const char *last = strrchr(name, '.');
    if (!last || last == name)
        return 0;
    const char *prev = last - 1;
    while (prev > name && *prev != '.')
        prev--;
    if (*prev != '.')
        return 0;
    const char *a = prev + 1, *b = last + 1; /* the last two parts */
    size_t na = (size_t)(last - a), nb = strlen(b);
    if (module)
        return strncmp(name, "Module.", 7) == 0 && prev - name >= 7 && msp_ms_digits_n(b, nb) &&
               (msp_ms_is(a, na, "forward") || msp_ms_is(a, na, "backward"));
    size_t k = 0;
    while (k < MSP_NELEM(api) && strncmp(name, api[k], strlen(api[k])) != 0)
        k++;
    return k < MSP_NELEM(api) && prev - name > (ptrdiff_t)strlen(api[k]) &&
           msp_ms_digits_n(a, na) && (msp_ms_is(b, nb, "forward") || msp_ms_is(b, nb, "backward"));
}

/* scope: [] or two record names, begin and end of the range dumped: API
 * records at L1, module records at L0, either at mix (msprobe's
 * RangeScope.check_name_pattern); a list beside it filters the range. */
static msp_err msp_ms_scope(const msp_cfg_walk_t *w, const msp_cfg_key_t *k, const cJSON *it,
                            const char *path, void *dst)
{
    msp_config_t *cfg = dst;
    (void)k;
    msp_err rc = msp_cfg_strings(w, it, path);
    if (rc != MSP_OK || !it->child)
        return rc;
    if (cJSON_GetArraySize(it) != 2)
        return msp_cfg_fail(w, path,
                            "expected two record names, the first and the last of the range "
                            "dumped, e.g. [\"Module.conv1.Conv2d.forward.0\", "
                            "\"Module.fc2.Linear.forward.0\"], got %d",
                            cJSON_GetArraySize(it));
    size_t i = 0;
    for (const cJSON *e = it->child; e; e = e->next, i++) {
        char esub[MSP_CFG_PATH_MAX];
        snprintf(esub, sizeof esub, "%s[%zu]", path, i);
        int is_api = msp_ms_record_form(e->valuestring, 0);
        int is_mod = !is_api && msp_ms_record_form(e->valuestring, 1);
        const char *want = cfg->dump_mode == MSP_DUMP_API      ? "an API record name like "
                                                                 "\"Functional.conv2d.0.forward\" "
                                                                 "(level L1)"
                           : cfg->dump_mode == MSP_DUMP_MODULE ? "a module record name like "
                                                                 "\"Module.fc.Linear.forward.0\" "
                                                                 "(level L0)"
                                                               : "an API or module record name "
                                                                 "like \"Functional.conv2d.0."
                                                                 "forward\" or \"Module.fc.Linear."
                                                                 "forward.0\" (level mix)";
        if ((cfg->dump_mode == MSP_DUMP_API && !is_api) ||
            (cfg->dump_mode == MSP_DUMP_MODULE && !is_mod) || (!is_api && !is_mod))
            return msp_cfg_expected(w, esub, want, e);
        if (!(cfg->scope[i] = strdup(e->valuestring)))
            return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", w->source);
    }
    return MSP_OK;
}

/* data_mode: the directions and roles a dump keeps. */
static msp_err msp_ms_data_mode(const msp_cfg_walk_t *w, const msp_cfg_key_t *k, const cJSON *it,
                                const char *path, void *dst)
{
    static const char *const modes[] = {"all", "forward", "backward", "input", "output"};
    msp_config_t *cfg = dst;
    (void)k;
    msp_err rc = msp_cfg_strings(w, it, path);
    if (rc != MSP_OK)
        return rc;
    unsigned dirs = 0, roles = 0;
    int all = !it->child;
    size_t i = 0;
    for (const cJSON *e = it->child; e; e = e->next, i++) {
        char esub[MSP_CFG_PATH_MAX];
        int m;
        snprintf(esub, sizeof esub, "%s[%zu]", path, i);
        if ((rc = msp_cfg_enum(w, e, esub, modes, MSP_NELEM(modes), &m)) != MSP_OK)
            return rc;
        all |= m == 0;
        dirs |= m == 1 ? MSP_DIR_FORWARD : m == 2 ? MSP_DIR_BACKWARD : 0;
        roles |= m == 3 ? MSP_ROLE_INPUT : m == 4 ? MSP_ROLE_OUTPUT : 0;
    }
    if (all && it->child && cJSON_GetArraySize(it) > 1)
        return msp_cfg_fail(w, path, "\"all\" cannot be combined with other modes");
    cfg->dump_dirs = all || !dirs ? MSP_DIR_FORWARD | MSP_DIR_BACKWARD : dirs;
    cfg->dump_roles = all || !roles ? MSP_ROLE_INPUT | MSP_ROLE_OUTPUT : roles;
    return MSP_OK;
}

/* summary_mode md5 with task statistics is task md5; tensor + md5 is the
 * tensor task: it stores the crc32 anyway. */
static msp_err msp_ms_summary_mode(const msp_cfg_walk_t *w, const msp_cfg_key_t *k, const cJSON *it,
                                   const char *path, void *dst)
{
    static const char *const sm[] = {"statistics", "md5"};
    msp_config_t *cfg = dst;
    int m;
    (void)k;
    msp_err rc = msp_cfg_enum(w, it, path, sm, MSP_NELEM(sm), &m);
    if (rc == MSP_OK && m == 1 && cfg->task == MSP_TASK_STATISTICS)
        cfg->task = MSP_TASK_MD5;
    return rc;
}

/* A call index ("3") as a number; 0 when it does not fit. */
static int msp_ms_call(const char *digits, int64_t *call)
{
    char *end;
    errno = 0;
    long long v = strtoll(digits, &end, 10);
    if (errno || *end || v < 0)
        return 0;
    *call = v;
    return 1;
}

/* A list entry in msprobe's naming ("Functional.conv2d.0.forward",
 * "Torch.matmul", "Tensor.add.1.backward", "Module.layer1.0.conv1.Conv2d.forward.0")
 * becomes our api_list entry: the API or module path, the call the name
 * gives (every call when it gives none), in the direction the name gives
 * (both when it gives none). "NPU.npu_rms_norm" names torch_npu.npu_rms_norm.
 * A name already in our spelling ("torch.nn.functional.relu",
 * "layer1.0.conv1") passes as is; so does msprobe's "Aten.add.0.forward",
 * which names nothing here and is reported at exit. A name without a dot
 * ("relu", "conv") is msprobe's name fragment (msp_api_sel_t.fragment). */
static msp_err msp_ms_list_entry(const msp_cfg_walk_t *w, const cJSON *e, const char *path,
                                 msp_api_sel_t *sel)
{
    static const struct {
        const char *prefix, *ours;
    } map[] = {{"Functional.", "torch.nn.functional."},
               {"Torch.", "torch."},
               {"Tensor.", "torch.Tensor."},
               {"Distributed.", "torch.distributed."},
               {"NPU.", "torch_npu."},
               {"Module.", ""}};
    if (!cJSON_IsString(e) || !e->valuestring[0])
        return msp_cfg_expected(w, path,
                                "an API or module name like \"Functional.conv2d.0.forward\"", e);
    const char *v = e->valuestring;
    for (const char *c = v; *c; c++)
        if (isspace((unsigned char)*c) || (unsigned char)*c < 0x20)
            return msp_cfg_expected(w, path, "a name without spaces", e);
    size_t k = 0;
    while (k < MSP_NELEM(map) && strncmp(v, map[k].prefix, strlen(map[k].prefix)) != 0)
        k++;
    sel->dirs = MSP_DIR_FORWARD | MSP_DIR_BACKWARD;
    if (k == MSP_NELEM(map)) {
        /* a bare fragment ("relu"): every API or module whose name holds it */
        sel->fragment = !strchr(v, '.');
        return (sel->name = strdup(v))
                   ? MSP_OK
                   : msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", w->source);
    }
    /* Split into dot-separated parts; drop the call index and the direction. */
    char *name = msp_asprintf("%s%s", map[k].ours, v + strlen(map[k].prefix));
    if (!name)
        return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", w->source);
    char *parts[64];
    size_t np = 0;
    for (char *p = name + strlen(map[k].ours); p && np < MSP_NELEM(parts);) {
        parts[np++] = p;
        p = strchr(p, '.');
        if (p)
            *p++ = '\0';
    }
    size_t keep = np;
    int is_module = map[k].ours[0] == '\0';
    /* API: X[.N][.forward|.backward]; module: path.Class.forward|backward.N */
    int tail_n = keep > 1 && msp_ms_digits(parts[keep - 1]);
    size_t d = keep - (size_t)tail_n; /* where a direction would be */
    /* the call index, when the name gives one, selects that call alone, as
     * msprobe matches the whole record name */
    if (d > 1 && (strcmp(parts[d - 1], "forward") == 0 || strcmp(parts[d - 1], "backward") == 0)) {
        sel->dirs = parts[d - 1][0] == 'f' ? MSP_DIR_FORWARD : MSP_DIR_BACKWARD;
        keep = d - 1;
        if (is_module && tail_n)
            sel->has_call = msp_ms_call(parts[np - 1], &sel->call); /* "...forward.0" */
        if (is_module && keep > 1)
            keep--; /* the class name */
        else if (!is_module && keep > 1 && msp_ms_digits(parts[keep - 1])) {
            keep--; /* "conv2d.0.forward" */
            sel->has_call = msp_ms_call(parts[keep], &sel->call);
        }
    } else if (!is_module && tail_n) {
        keep--; /* "matmul.3" */
        sel->has_call = msp_ms_call(parts[keep], &sel->call);
    }
    int empty = keep == 0;
    for (size_t i = 0; i < keep; i++)
        empty |= parts[i][0] == '\0';
    if (empty) { /* "Module.", "Functional..forward": no name would match it */
        free(name);
        return msp_cfg_expected(w, path,
                                "an API or module name like \"Functional.conv2d.0.forward\" "
                                "(an empty name between dots selects nothing)",
                                e);
    }
    for (size_t i = 1; i < keep; i++)
        parts[i][-1] = '.';
    sel->name = name;
    return MSP_OK;
}

/* <task>.list[i]: the entry, and where it was written. */
static msp_err msp_ms_list_name(const msp_cfg_walk_t *w, const msp_cfg_key_t *k, const cJSON *it,
                                const char *path, void *dst)
{
    msp_api_sel_t *sel = dst;
    (void)k;
    msp_err rc = msp_ms_list_entry(w, it, path, sel);
    if (rc == MSP_OK && (!(sel->key = msp_cfg_entry_key(path, it->valuestring)) ||
                         !(sel->text = strdup(it->valuestring))))
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", w->source);
    return rc;
}

static const char *const msp_ms_levels[] = {"L1", "L0", "mix"};
_Static_assert(MSP_DUMP_API == 0 && MSP_DUMP_MODULE == 1 && MSP_DUMP_MIX == 2,
               "L1 = api, L0 = module, mix = mix");

static const char msp_ms_section_keys[] =
    "expected scope, list, data_mode, summary_mode, tensor_list, or one msprobe documents";

/* Huawei msprobe's python/msprobe/config.json (see msprobe.json(5), MSPROBE'S
 * CONFIG.JSON). Keys that change nothing here are accepted and listed once
 * as ignored, so the user knows they had no effect. */
static const msp_cfg_key_t msp_cfg_msprobe[] = {
    {KEY("", OBJECT), .init = msp_ms_defaults,
     .note = "msprobe's config.json keys are task, dump_path, rank, step, level, statistics, "
             "tensor, ...; ours are dump and config_check"},
    {KEY("task", ENUM), .off = CFG_ENUM(task), NAMES(msp_task_names), .flags = MSP_CFG_TELLS},
    {KEY("dump_path", STRING), .off = CFG(dump_path, char *), .what = "a non-empty directory path",
     .flags = MSP_CFG_TELLS},
    {KEY("rank", MS_STEPS), .off = CFG(ranks, msp_step_set_t)},
    {KEY("step", MS_STEPS), .off = CFG(dump_iter, msp_step_set_t)},
    {KEY("level", ENUM), .off = CFG_ENUM(dump_mode), NAMES(msp_ms_levels), .flags = MSP_CFG_TELLS},
    {KEY("statistics", OBJECT), .keys = "<task>", .only = msp_ms_task_statistics,
     .note = msp_ms_section_keys},
    {KEY("tensor", OBJECT), .keys = "<task>", .only = msp_ms_task_tensor,
     .note = msp_ms_section_keys},
    /* read as met, and a key may repeat there (check_mode is MindSpore's) */
    {KEY("overflow_check", OBJECT), .flags = MSP_CFG_AS_MET, .only = msp_cfg_task_overflow},
    {KEY("overflow_check.overflow_nums", INT), .off = CFG(overflow_nums, int64_t),
     .what = msp_cfg_overflow_what, .min = -1, .flags = MSP_CFG_NONZERO,
     .only = msp_cfg_task_overflow, .only_why = msp_cfg_overflow_only},
    {KEY("overflow_check.check_mode", IGNORED)},
    {KEY("dump_enable", CUSTOM), .set = msp_ms_dump_enable},
    {KEY("extra_info", BOOL), .off = CFG(stacks, int)},
    {KEY("async_dump", IGNORED)},
    {KEY("precision", IGNORED)},
    {KEY("risk_level", IGNORED)},
    {KEY("framework", IGNORED)},
    {KEY("is_deterministic", IGNORED)},
    {KEY("enable_dataloader", IGNORED)},
    {KEY("acc_check", IGNORED)},
    {KEY("run_ut", IGNORED)},
    {KEY("free_benchmark", IGNORED)},
    {KEY("grad_probe", IGNORED)},
    {KEY("structure", IGNORED)},
    {KEY("exception_dump", IGNORED)},
    {KEY("online_run_ut", IGNORED)},
    /* <task>: the keys of the section the task reads (statistics or tensor) */
    {KEY("<task>.scope", CUSTOM), .set = msp_ms_scope},
    {KEY("<task>.list", LIST), .off = CFG(api_list, msp_api_sel_t *),
     .count = CFG(n_api_list, size_t), .elem_size = sizeof(msp_api_sel_t),
     .what = "a list of strings", .flags = MSP_CFG_STRINGS},
    {KEY("<task>.list[]", CUSTOM), .set = msp_ms_list_name},
    {KEY("<task>.data_mode", CUSTOM), .set = msp_ms_data_mode},
    /* names whose records keep their data in a statistics dump */
    {KEY("<task>.tensor_list", LIST), .off = CFG(tensor_list, char **),
     .count = CFG(n_tensor_list, size_t), .elem_size = sizeof(char *), .what = "a list of strings",
     .flags = MSP_CFG_STRINGS},
    {KEY("<task>.tensor_list[]", STRING), .off = 0 /* the element is a char * */,
     .what = "an API or module name"},
    {KEY("<task>.summary_mode", CUSTOM), .set = msp_ms_summary_mode},
    {KEY("<task>.device", IGNORED)},
    {KEY("<task>.file_format", IGNORED)},
    {KEY("<task>.bench_path", IGNORED)},
    {KEY("<task>.diff_nums", IGNORED)},
    {KEY("<task>.overflow_nums", IGNORED)},
    {KEY("<task>.check_mode", IGNORED)},
};
_Static_assert(MSP_NELEM(msp_cfg_msprobe) <= MSP_CFG_MAX_KEYS, "raise MSP_CFG_MAX_KEYS");

msp_err msp_config_parse(const char *text, const char *source, msp_config_t *cfg)
{
    msp_err rc = MSP_OK;
    char *buf = NULL;
    cJSON *root = NULL;
    msp_cfg_walk_t w = {.source = source ? source : "msprobe.json", .cfg = cfg};

    /* every key's default, whichever layout is read (msprobe's own differ:
     * its root's init) */
    memset(cfg, 0, sizeof *cfg);
    cfg->dump_mode = MSP_DUMP_API;
    cfg->dump_iter.all = 1;
    cfg->ranks.all = 1;
    cfg->dump_dirs = MSP_DIR_FORWARD | MSP_DIR_BACKWARD;
    cfg->dump_roles = MSP_ROLE_INPUT | MSP_ROLE_OUTPUT;
    cfg->task = MSP_TASK_TENSOR;
    cfg->overflow_nums = 1;
    cfg->step_trigger = MSP_STEP_OPTIMIZER;
    cfg->cc_write_at_step = -1;
    cfg->cc_dataset_batches = 1;
    cfg->stacks = 1;
    cfg->source = strdup(w.source);
    cfg->dump_path = strdup("./msprobe_dump_data");
    cfg->cc_output_zip_path = strdup("./config_check_pack.zip");
    buf = text ? strdup(text) : NULL;
    if (!cfg->source || !cfg->dump_path || !cfg->cc_output_zip_path || (text && !buf)) {
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", w.source);
        goto cleanup;
    }
    if (!text) {
        rc = msp_fail(MSP_ERR_USAGE, "%s: no text to parse", w.source);
        goto cleanup;
    }
    rc = msp_cfg_json_parse(buf, w.source, &root);
    if (rc != MSP_OK)
        goto cleanup;
    if (!cJSON_IsObject(root)) {
        char desc[96];
        msp_cfg_describe(root, desc, sizeof desc);
        rc = msp_fail(MSP_ERR_CONFIG,
                      "%s: expected a JSON object {\"dump\": ..., "
                      "\"config_check\": ...} at the top level, got %s",
                      w.source, desc);
        goto cleanup;
    }
    /* msprobe's layout is told by its keys, and only where none of ours is there */
    w.keys = msp_cfg_ours;
    w.n_keys = MSP_NELEM(msp_cfg_ours);
    if (!msp_cfg_tells(msp_cfg_ours, MSP_NELEM(msp_cfg_ours), root) &&
        msp_cfg_tells(msp_cfg_msprobe, MSP_NELEM(msp_cfg_msprobe), root)) {
        w.keys = msp_cfg_msprobe;
        w.n_keys = MSP_NELEM(msp_cfg_msprobe);
    }
    rc = msp_cfg_walk(&w, root, cfg);
cleanup:
    cJSON_Delete(root);
    free(buf);
    if (rc != MSP_OK)
        msp_config_free(cfg);
    return rc;
}

msp_err msp_config_load(const char *path, msp_config_t *cfg)
{
    char *text = NULL;
    size_t len = 0;
    memset(cfg, 0, sizeof *cfg);
    if (!path || !*path)
        return msp_fail(MSP_ERR_USAGE, "empty config file name");
    /* stat first: a huge file is refused without reading it. */
    struct stat st;
    msp_err rc = MSP_OK;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > (off_t)MSP_CONFIG_MAX_BYTES)
        rc = MSP_ERR_LIMIT;
    else
        rc = msp_read_file(path, MSP_CONFIG_MAX_BYTES, &text, &len);
    if (rc == MSP_ERR_NOT_FOUND)
        return msp_fail(rc, "config file %s not found", path);
    if (rc == MSP_ERR_LIMIT) {
        free(text);
        return msp_fail(MSP_ERR_CONFIG, "%s: larger than %u MiB; not a msprobe.json", path,
                        MSP_CONFIG_MAX_BYTES >> 20);
    }
    if (rc != MSP_OK)
        return rc;
    if (strlen(text) != len) {
        size_t line, col;
        msp_cfg_line_col(text, strlen(text), &line, &col);
        rc = msp_fail(MSP_ERR_CONFIG, "%s:%zu:%zu: invalid JSON: NUL byte (binary file?)", path,
                      line, col);
    } else {
        rc = msp_config_parse(text, path, cfg);
    }
    free(text);
    return rc;
}

void msp_config_free(msp_config_t *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < cfg->n_api_list; i++) {
        free(cfg->api_list[i].name);
        free(cfg->api_list[i].key);
        free(cfg->api_list[i].text);
    }
    free(cfg->api_list);
    free(cfg->source);
    free(cfg->dump_path);
    free(cfg->cc_output_zip_path);
    msp_step_set_free(&cfg->dump_iter);
    msp_step_set_free(&cfg->ranks);
    for (size_t i = 0; i < cfg->n_ignored; i++)
        free(cfg->ignored[i]);
    free(cfg->ignored);
    for (size_t i = 0; i < cfg->n_tensor_list; i++)
        free(cfg->tensor_list[i]);
    free(cfg->tensor_list);
    free(cfg->scope[0]);
    free(cfg->scope[1]);
    memset(cfg, 0, sizeof *cfg);
}
