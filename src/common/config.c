/* msprobe.json loader: comments blanked in place (offsets kept, so an error's
 * position is the line:column of the user's file), cJSON for the tree, then a
 * strict walk where every object lists its keys, so a typo is an error rather
 * than a silently ignored setting. */
#include "config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A config is a few hundred bytes; anything this large is a wrong path. */
#define MSP_CONFIG_MAX_BYTES (16u * 1024u * 1024u)

#define MSP_NELEM(a) (sizeof(a) / sizeof((a)[0]))

const char *const msp_dump_mode_names[3] = {"api", "module", "mix"};
const char *const msp_task_names[4] = {"tensor", "statistics", "md5", "overflow_check"};
const char *const msp_step_trigger_names[4] = {"optimizer", "backward", "forward", "manual"};


/* Checks every member name against `keys`: unknown or repeated names are errors
 * (cJSON keeps duplicates as siblings; the later one would otherwise be ignored).
 * found[i] receives the member for keys[i], or NULL. */
static msp_err msp_cfg_members(const msp_cfg_walk_t *w, const cJSON *obj, const char *path,
                               const char *const *keys, size_t nkeys, const cJSON **found)
{
    for (size_t k = 0; k < nkeys; k++)
        found[k] = NULL;
    for (const cJSON *m = obj->child; m; m = m->next) {
        size_t k = 0;
        while (k < nkeys && strcmp(m->string, keys[k]) != 0)
            k++;
        char key[80], sub[256];
        msp_cfg_quote(key, sizeof key, m->string);
        if (*path)
            snprintf(sub, sizeof sub, "%s.%s", path, key);
        else
            snprintf(sub, sizeof sub, "%s", key);
        if (k == nkeys) {
            char list[256] = "";
            size_t used = 0;
            for (size_t j = 0; j < nkeys && used < sizeof list; j++) {
                int n = snprintf(list + used, sizeof list - used, "%s%s",
                                 j == 0 ? "" : (j + 1 == nkeys ? " or " : ", "), keys[j]);
                if (n < 0)
                    break;
                used += (size_t)n;
            }
            return msp_cfg_fail(w, sub, "unknown key (expected %s)", list);
        }
        if (found[k])
            return msp_cfg_fail(w, sub, "duplicate key (each key may appear once)");
        found[k] = m;
    }
    return MSP_OK;
}



/* ---- sections ----------------------------------------------------------- */


/* An api_list entry's place for messages: its key and the text written there. */
static char *msp_cfg_entry_key(const char *path, const char *text)
{
    char shown[160];
    msp_cfg_quote(shown, sizeof shown, text);
    return msp_asprintf("%s \"%s\"", path, shown);
}

static msp_err msp_cfg_api_entry(const msp_cfg_walk_t *w, const cJSON *e, const char *path,
                                 msp_api_sel_t *sel)
{
    static const char *const keys[] = {"name", "api_type"};
    static const char *const types[] = {"forward", "backward", "all", "both"};
    static const unsigned dirs[] = {MSP_DIR_FORWARD, MSP_DIR_BACKWARD,
                                    MSP_DIR_FORWARD | MSP_DIR_BACKWARD,
                                    MSP_DIR_FORWARD | MSP_DIR_BACKWARD};
    const cJSON *m[MSP_NELEM(keys)];
    char sub[300];
    msp_err rc = msp_cfg_object(w, e, path);
    if (rc == MSP_OK)
        rc = msp_cfg_members(w, e, path, keys, MSP_NELEM(keys), m);
    if (rc != MSP_OK)
        return rc;
    snprintf(sub, sizeof sub, "%s.name", path);
    if (!m[0])
        return msp_cfg_fail(w, sub, "missing (each api_list entry needs a name, e.g. "
                                    "\"torch.nn.functional.conv2d\" or \"layer1.0.conv1\")");
    rc = msp_cfg_string(w, m[0], sub, "a non-empty API or module name", &sel->name);
    if (rc != MSP_OK)
        return rc;
    if (!(sel->key = msp_cfg_entry_key(sub, m[0]->valuestring)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", w->source);
    for (const char *c = sel->name; *c; c++)
        if (isspace((unsigned char)*c) || (unsigned char)*c < 0x20)
            return msp_cfg_expected(w, sub, "an API or module name without spaces", m[0]);
    sel->dirs = MSP_DIR_FORWARD | MSP_DIR_BACKWARD;
    if (m[1]) {
        int k;
        snprintf(sub, sizeof sub, "%s.api_type", path);
        rc = msp_cfg_enum(w, m[1], sub, types, MSP_NELEM(types), &k);
        if (rc != MSP_OK)
            return rc;
        sel->dirs = dirs[k];
    }
    return MSP_OK;
}

static msp_err msp_cfg_api_list(const msp_cfg_walk_t *w, const cJSON *it, msp_config_t *cfg)
{
    const char *path = "dump.api_list";
    if (!cJSON_IsArray(it))
        return msp_cfg_expected(w, path, "an array of {\"name\": ..., \"api_type\": ...}", it);
    size_t n = (size_t)cJSON_GetArraySize(it);
    if (n == 0)
        return MSP_OK;
    cfg->api_list = calloc(n, sizeof *cfg->api_list);
    if (!cfg->api_list)
        return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", w->source);
    size_t i = 0;
    for (const cJSON *e = it->child; e; e = e->next, i++) {
        char sub[64];
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        cfg->n_api_list = i + 1; /* so msp_config_free releases a partial entry */
        msp_err rc = msp_cfg_api_entry(w, e, sub, &cfg->api_list[i]);
        if (rc != MSP_OK)
            return rc;
    }
    return MSP_OK;
}

/* overflow_nums: a count >= 1, or -1 for no limit; only with task overflow_check. */
static msp_err msp_cfg_overflow_nums(const msp_cfg_walk_t *w, const cJSON *it, const char *path,
                                     msp_config_t *cfg)
{
    const char *what = "a number of overflows >= 1, or -1 for no limit";
    int64_t v;
    msp_err rc = msp_cfg_int(w, it, path, what, -1, &v);
    if (rc != MSP_OK)
        return rc;
    if (v == 0)
        return msp_cfg_expected(w, path, what, it);
    if (cfg->task != MSP_TASK_OVERFLOW)
        return msp_cfg_fail(w, path, "applies only to task \"overflow_check\"");
    cfg->overflow_nums = v;
    return MSP_OK;
}

static msp_err msp_cfg_dump(const msp_cfg_walk_t *w, const cJSON *dump, msp_config_t *cfg)
{
    static const char *const dkeys[] = {"common_dump_settings", "api_list"};
    static const char *const skeys[] = {"dump_mode", "dump_path", "dump_iter", "task",
                                        "step_trigger", "rank", "stack", "overflow_nums"};
    const cJSON *d[MSP_NELEM(dkeys)], *s[MSP_NELEM(skeys)];
    int k;
    msp_err rc = msp_cfg_object(w, dump, "dump");
    if (rc == MSP_OK)
        rc = msp_cfg_members(w, dump, "dump", dkeys, MSP_NELEM(dkeys), d);
    if (rc != MSP_OK)
        return rc;
    cfg->has_dump = 1;
    if (d[0]) {
        const char *base = "dump.common_dump_settings";
        rc = msp_cfg_object(w, d[0], base);
        if (rc == MSP_OK)
            rc = msp_cfg_members(w, d[0], base, skeys, MSP_NELEM(skeys), s);
        if (rc != MSP_OK)
            return rc;
        if (s[0]) {
            if ((rc = msp_cfg_enum(w, s[0], "dump.common_dump_settings.dump_mode",
                                   msp_dump_mode_names, MSP_NELEM(msp_dump_mode_names), &k)) != MSP_OK)
                return rc;
            cfg->dump_mode = (msp_dump_mode_t)k;
        }
        if (s[1] && (rc = msp_cfg_string(w, s[1], "dump.common_dump_settings.dump_path",
                                         "a non-empty directory path", &cfg->dump_path)) != MSP_OK)
            return rc;
        if (s[2] && (rc = msp_cfg_steps(w, s[2], "dump.common_dump_settings.dump_iter",
                                            &cfg->dump_iter)) != MSP_OK)
            return rc;
        if (s[3]) {
            if ((rc = msp_cfg_enum(w, s[3], "dump.common_dump_settings.task", msp_task_names,
                                   MSP_NELEM(msp_task_names), &k)) != MSP_OK)
                return rc;
            cfg->task = (msp_task_t)k;
        }
        if (s[4]) {
            if ((rc = msp_cfg_enum(w, s[4], "dump.common_dump_settings.step_trigger",
                                   msp_step_trigger_names, MSP_NELEM(msp_step_trigger_names), &k)) != MSP_OK)
                return rc;
            cfg->step_trigger = (msp_step_trigger_t)k;
        }
        /* Ranks take the step-set syntax: "0|2", "0-3", [0, 2], "all". */
        if (s[5] && (rc = msp_cfg_steps(w, s[5], "dump.common_dump_settings.rank",
                                            &cfg->ranks)) != MSP_OK)
            return rc;
        /* each record's call site (msprobe's extra_info) */
        if (s[6] && !cJSON_IsBool(s[6]))
            return msp_cfg_expected(w, "dump.common_dump_settings.stack", "true or false", s[6]);
        if (s[6])
            cfg->stacks = cJSON_IsTrue(s[6]);
        if (s[7] && (rc = msp_cfg_overflow_nums(w, s[7], "dump.common_dump_settings.overflow_nums",
                                                cfg)) != MSP_OK)
            return rc;
    }
    if (d[1])
        return msp_cfg_api_list(w, d[1], cfg);
    return MSP_OK;
}

static msp_err msp_cfg_config_check(const msp_cfg_walk_t *w, const cJSON *cc, msp_config_t *cfg)
{
    static const char *const keys[] = {"output_zip_path", "write_at_step", "dataset_batches"};
    const cJSON *m[MSP_NELEM(keys)];
    msp_err rc = msp_cfg_object(w, cc, "config_check");
    if (rc == MSP_OK)
        rc = msp_cfg_members(w, cc, "config_check", keys, MSP_NELEM(keys), m);
    if (rc != MSP_OK)
        return rc;
    cfg->has_config_check = 1;
    if (m[0]) {
        const char *key = "config_check.output_zip_path";
        if ((rc = msp_cfg_string(w, m[0], key, "a non-empty file path",
                                 &cfg->cc_output_zip_path)) != MSP_OK)
            return rc;
        size_t n = strlen(cfg->cc_output_zip_path);
        if (cfg->cc_output_zip_path[n - 1] == '/')
            return msp_cfg_expected(w, key, "a file path, not a directory (ending in '/')", m[0]);
    }
    /* -1 is accepted as the spelled-out default ("only at exit"). */
    if (m[1] && (rc = msp_cfg_int(w, m[1], "config_check.write_at_step",
                                  "a step number >= 0 (or -1: only at exit)", -1,
                                  &cfg->cc_write_at_step)) != MSP_OK)
        return rc;
    if (m[2] && (rc = msp_cfg_int(w, m[2], "config_check.dataset_batches",
                                  "an integer >= 1", 1, &cfg->cc_dataset_batches)) != MSP_OK)
        return rc;
    return MSP_OK;
}

/* ---- msprobe's config.json ---------------------------------------------- */

/* Keys of msprobe's config.json that change nothing here: accepted, and
 * listed once as ignored so the user knows they had no effect. */
static const char *const msp_ms_ignored_top[] = {
    "async_dump", "precision", "risk_level", "framework",
    "is_deterministic", "enable_dataloader", "acc_check", "run_ut",
    "free_benchmark", "grad_probe", "structure", "exception_dump", "online_run_ut"};
static const char *const msp_ms_ignored_section[] = {
    "device", "file_format", "bench_path", "diff_nums", "overflow_nums",
    "check_mode"};

static int msp_ms_in(const char *const *v, size_t n, const char *k)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], k) == 0)
            return 1;
    return 0;
}

static msp_err msp_ms_ignore(const msp_cfg_walk_t *w, msp_config_t *cfg, const char *key)
{
    char **nv = realloc(cfg->ignored, (cfg->n_ignored + 1) * sizeof *nv);
    if (!nv)
        return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", w->source);
    cfg->ignored = nv;
    if (!(nv[cfg->n_ignored] = strdup(key)))
        return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", w->source);
    cfg->n_ignored++;
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
 * which names nothing here and is reported at exit. */
static msp_err msp_ms_list_entry(const msp_cfg_walk_t *w, const cJSON *e, const char *path,
                                 msp_api_sel_t *sel)
{
    static const struct { const char *prefix, *ours; } map[] = {
        {"Functional.", "torch.nn.functional."}, {"Torch.", "torch."},
        {"Tensor.", "torch.Tensor."}, {"Distributed.", "torch.distributed."},
        {"NPU.", "torch_npu."}, {"Module.", ""}};
    if (!cJSON_IsString(e) || !e->valuestring[0])
        return msp_cfg_expected(w, path, "an API or module name like \"Functional.conv2d.0.forward\"",
                                e);
    const char *v = e->valuestring;
    for (const char *c = v; *c; c++)
        if (isspace((unsigned char)*c) || (unsigned char)*c < 0x20)
            return msp_cfg_expected(w, path, "a name without spaces", e);
    size_t k = 0;
    while (k < MSP_NELEM(map) && strncmp(v, map[k].prefix, strlen(map[k].prefix)) != 0)
        k++;
    sel->dirs = MSP_DIR_FORWARD | MSP_DIR_BACKWARD;
    if (k == MSP_NELEM(map)) {
        if (!strchr(v, '.'))
            return msp_cfg_expected(w, path, "a full API or module name (msprobe's match of a bare "
                                    "type name anywhere in API names is not supported), e.g. "
                                    "\"Functional.relu.0.forward\"", e);
        return (sel->name = strdup(v)) ? MSP_OK
                                       : msp_fail(MSP_ERR_NOMEM, "out of memory reading %s",
                                                  w->source);
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
        return msp_cfg_expected(w, path, "an API or module name like \"Functional.conv2d.0.forward\" "
                                "(an empty name between dots selects nothing)", e);
    }
    for (size_t i = 1; i < keep; i++)
        parts[i][-1] = '.';
    sel->name = name;
    return MSP_OK;
}

/* The task's own section ("statistics" or "tensor"). */
static msp_err msp_ms_section(const msp_cfg_walk_t *w, const cJSON *sec, const char *name,
                              msp_config_t *cfg)
{
    static const char *const keys[] = {"scope", "list", "data_mode", "summary_mode",
                                       "tensor_list"};
    msp_err rc = msp_cfg_object(w, sec, name);
    if (rc != MSP_OK)
        return rc;
    const cJSON *m[MSP_NELEM(keys)] = {0};
    for (const cJSON *c = sec->child; c; c = c->next) {
        char sub[300], key[80];
        msp_cfg_quote(key, sizeof key, c->string);
        snprintf(sub, sizeof sub, "%s.%s", name, key);
        size_t k = 0;
        while (k < MSP_NELEM(keys) && strcmp(c->string, keys[k]) != 0)
            k++;
        if (k < MSP_NELEM(keys)) {
            if (m[k])
                return msp_cfg_fail(w, sub, "duplicate key (each key may appear once)");
            m[k] = c;
        } else if (msp_ms_in(msp_ms_ignored_section, MSP_NELEM(msp_ms_ignored_section),
                             c->string)) {
            if ((rc = msp_ms_ignore(w, cfg, sub)) != MSP_OK)
                return rc;
        } else {
            return msp_cfg_fail(w, sub, "unknown key (expected scope, list, data_mode, "
                                        "summary_mode, tensor_list, or one msprobe documents)");
        }
    }
    char sub[300];
    if (m[0]) {
        snprintf(sub, sizeof sub, "%s.scope", name);
        if ((rc = msp_cfg_strings(w, m[0], sub)) != MSP_OK)
            return rc;
        if (m[0]->child)
            return msp_cfg_fail(w, sub, "a scope range (start and end record) is not supported; "
                                        "name the APIs or modules in \"list\" instead");
    }
    if (m[1]) {
        snprintf(sub, sizeof sub, "%s.list", name);
        if ((rc = msp_cfg_strings(w, m[1], sub)) != MSP_OK)
            return rc;
        size_t n = (size_t)cJSON_GetArraySize(m[1]), i = 0;
        if (n && !(cfg->api_list = calloc(n, sizeof *cfg->api_list)))
            return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", w->source);
        for (const cJSON *e = m[1]->child; e; e = e->next, i++) {
            char esub[320];
            snprintf(esub, sizeof esub, "%s[%zu]", sub, i);
            cfg->n_api_list = i + 1;
            if ((rc = msp_ms_list_entry(w, e, esub, &cfg->api_list[i])) != MSP_OK)
                return rc;
            if (!(cfg->api_list[i].key = msp_cfg_entry_key(esub, e->valuestring)))
                return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", w->source);
        }
    }
    if (m[2]) {
        static const char *const modes[] = {"all", "forward", "backward", "input", "output"};
        snprintf(sub, sizeof sub, "%s.data_mode", name);
        if ((rc = msp_cfg_strings(w, m[2], sub)) != MSP_OK)
            return rc;
        unsigned dirs = 0, roles = 0;
        int all = !m[2]->child;
        size_t i = 0;
        for (const cJSON *e = m[2]->child; e; e = e->next, i++) {
            char esub[320];
            int k;
            snprintf(esub, sizeof esub, "%s[%zu]", sub, i);
            if ((rc = msp_cfg_enum(w, e, esub, modes, MSP_NELEM(modes), &k)) != MSP_OK)
                return rc;
            all |= k == 0;
            dirs |= k == 1 ? MSP_DIR_FORWARD : k == 2 ? MSP_DIR_BACKWARD : 0;
            roles |= k == 3 ? MSP_ROLE_INPUT : k == 4 ? MSP_ROLE_OUTPUT : 0;
        }
        if (all && m[2]->child && cJSON_GetArraySize(m[2]) > 1)
            return msp_cfg_fail(w, sub, "\"all\" cannot be combined with other modes");
        cfg->dump_dirs = all || !dirs ? MSP_DIR_FORWARD | MSP_DIR_BACKWARD : dirs;
        cfg->dump_roles = all || !roles ? MSP_ROLE_INPUT | MSP_ROLE_OUTPUT : roles;
    }
    if (m[4]) { /* names whose records keep their data in a statistics dump */
        snprintf(sub, sizeof sub, "%s.tensor_list", name);
        if ((rc = msp_cfg_strings(w, m[4], sub)) != MSP_OK)
            return rc;
        size_t n = (size_t)cJSON_GetArraySize(m[4]), i = 0;
        if (n && !(cfg->tensor_list = calloc(n, sizeof *cfg->tensor_list)))
            return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", w->source);
        for (const cJSON *e = m[4]->child; e; e = e->next, i++) {
            if (!e->valuestring[0]) {
                char esub[320];
                snprintf(esub, sizeof esub, "%s[%zu]", sub, i);
                return msp_cfg_expected(w, esub, "an API or module name", e);
            }
            if (!(cfg->tensor_list[i] = strdup(e->valuestring)))
                return msp_fail(MSP_ERR_NOMEM, "out of memory reading %s", w->source);
            cfg->n_tensor_list = i + 1;
        }
    }
    if (m[3]) {
        static const char *const sm[] = {"statistics", "md5"};
        int k;
        snprintf(sub, sizeof sub, "%s.summary_mode", name);
        if ((rc = msp_cfg_enum(w, m[3], sub, sm, MSP_NELEM(sm), &k)) != MSP_OK)
            return rc;
        /* tensor + md5 is the tensor task: it stores the crc32 anyway */
        if (k == 1 && cfg->task == MSP_TASK_STATISTICS)
            cfg->task = MSP_TASK_MD5;
    }
    return MSP_OK;
}

/* The "overflow_check" section of task overflow_check: overflow_nums (check_mode
 * is MindSpore's). */
static msp_err msp_ms_overflow_section(const msp_cfg_walk_t *w, const cJSON *sec,
                                       msp_config_t *cfg)
{
    msp_err rc = msp_cfg_object(w, sec, "overflow_check");
    for (const cJSON *c = sec->child; c && rc == MSP_OK; c = c->next) {
        char sub[300], key[80];
        msp_cfg_quote(key, sizeof key, c->string);
        snprintf(sub, sizeof sub, "overflow_check.%s", key);
        if (!strcmp(c->string, "overflow_nums"))
            rc = msp_cfg_overflow_nums(w, c, sub, cfg);
        else if (!strcmp(c->string, "check_mode"))
            rc = msp_ms_ignore(w, cfg, sub);
        else
            rc = msp_cfg_fail(w, sub, "unknown key (expected overflow_nums or check_mode)");
    }
    return rc;
}

static msp_err msp_cfg_msprobe(const msp_cfg_walk_t *w, const cJSON *root, msp_config_t *cfg)
{
    static const char *const keys[] = {"task", "dump_path", "rank", "step", "level",
                                       "statistics", "tensor", "overflow_check", "dump_enable",
                                       "extra_info"};
    const cJSON *m[MSP_NELEM(keys)] = {0};
    msp_err rc = MSP_OK;
    cfg->msprobe_format = 1;
    cfg->has_dump = 1;
    /* msprobe's default task is statistics, its default level L1 */
    cfg->task = MSP_TASK_STATISTICS;
    for (const cJSON *c = root->child; c; c = c->next) {
        char key[80];
        msp_cfg_quote(key, sizeof key, c->string);
        size_t k = 0;
        while (k < MSP_NELEM(keys) && strcmp(c->string, keys[k]) != 0)
            k++;
        if (k < MSP_NELEM(keys)) {
            if (m[k])
                return msp_cfg_fail(w, key, "duplicate key (each key may appear once)");
            m[k] = c;
        } else if (msp_ms_in(msp_ms_ignored_top, MSP_NELEM(msp_ms_ignored_top), c->string)) {
            if ((rc = msp_ms_ignore(w, cfg, key)) != MSP_OK)
                return rc;
        } else {
            return msp_cfg_fail(w, key, "unknown key (msprobe's config.json keys are task, "
                                        "dump_path, rank, step, level, statistics, tensor, ...; "
                                        "ours are dump and config_check)");
        }
    }
    if (m[0]) {
        int k;
        if ((rc = msp_cfg_enum(w, m[0], "task", msp_task_names, MSP_NELEM(msp_task_names), &k)) !=
            MSP_OK)
            return rc;
        cfg->task = (msp_task_t)k;
    }
    if (m[1] && (rc = msp_cfg_string(w, m[1], "dump_path", "a non-empty directory path",
                                     &cfg->dump_path)) != MSP_OK)
        return rc;
    if (m[2] && (rc = msp_cfg_ms_steps(w, m[2], "rank", &cfg->ranks)) != MSP_OK)
        return rc;
    if (m[3] && (rc = msp_cfg_ms_steps(w, m[3], "step", &cfg->dump_iter)) != MSP_OK)
        return rc;
    if (m[4]) {
        static const char *const levels[] = {"L1", "L0", "mix"};
        int k;
        if ((rc = msp_cfg_enum(w, m[4], "level", levels, MSP_NELEM(levels), &k)) != MSP_OK)
            return rc;
        cfg->dump_mode = (msp_dump_mode_t)k; /* L1 = api, L0 = module, mix */
    }
    /* The section of the task in use applies; the others are ignored. */
    int ovf = cfg->task == MSP_TASK_OVERFLOW;
    const cJSON *own = ovf ? NULL : cfg->task == MSP_TASK_TENSOR ? m[6] : m[5];
    if (own && (rc = msp_ms_section(w, own, own->string, cfg)) != MSP_OK)
        return rc;
    if (ovf && m[7] && (rc = msp_ms_overflow_section(w, m[7], cfg)) != MSP_OK)
        return rc;
    /* the other tasks' sections change nothing here */
    for (size_t i = 5; i <= 7; i++)
        if (m[i] && m[i] != own && !(ovf && i == 7) &&
            (rc = msp_ms_ignore(w, cfg, m[i]->string)) != MSP_OK)
            return rc;
    /* dump_enable false: nothing is dumped (msprobe re-reads it while the run
     * goes on; here it is read once, when training starts) */
    for (int k = 8; k <= 9; k++)
        if (m[k] && !cJSON_IsBool(m[k]))
            return msp_cfg_expected(w, keys[k], "true or false", m[k]);
    if (m[8] && cJSON_IsFalse(m[8])) {
        cfg->dump_disabled = 1;
        cfg->has_dump = 0;
    }
    if (m[9])
        cfg->stacks = cJSON_IsTrue(m[9]);
    return MSP_OK;
}

msp_err msp_config_parse(const char *text, const char *source, msp_config_t *cfg)
{
    msp_err rc = MSP_OK;
    char *buf = NULL;
    cJSON *root = NULL;
    msp_cfg_walk_t w = {.source = source ? source : "msprobe.json"};

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
        rc = msp_fail(MSP_ERR_CONFIG, "%s: expected a JSON object {\"dump\": ..., "
                                      "\"config_check\": ...} at the top level, got %s",
                      w.source, desc);
        goto cleanup;
    }
    static const char *const keys[] = {"dump", "config_check"};
    const cJSON *m[MSP_NELEM(keys)];
    if (!cJSON_GetObjectItemCaseSensitive(root, "dump") &&
        !cJSON_GetObjectItemCaseSensitive(root, "config_check") &&
        (cJSON_GetObjectItemCaseSensitive(root, "task") ||
         cJSON_GetObjectItemCaseSensitive(root, "dump_path") ||
         cJSON_GetObjectItemCaseSensitive(root, "level"))) {
        rc = msp_cfg_msprobe(&w, root, cfg);
        goto cleanup;
    }
    rc = msp_cfg_members(&w, root, "", keys, MSP_NELEM(keys), m);
    if (rc == MSP_OK && m[0])
        rc = msp_cfg_dump(&w, m[0], cfg);
    if (rc == MSP_OK && m[1])
        rc = msp_cfg_config_check(&w, m[1], cfg);
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
    memset(cfg, 0, sizeof *cfg);
}
