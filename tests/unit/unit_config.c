/* msprobe.json's values (src/common/config.c and config_value.c through
 * msp_config_parse, include/msprobe/config.h), from JSON text in memory:
 * each key's accepted values and what it stores, each refused value with a
 * message naming the key, the step-set syntax, both layouts (ours and
 * msprobe's config.json) and the man page's own error examples. Wanted
 * values from msprobe.json(5), by hand. */
#include "msprobe/config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit_check.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static char detail[2048];

/* msp_config_parse of text as "msprobe.json"; detail holds its message. */
static msp_err parse(const char *text, msp_config_t *cfg)
{
    msp_err rc = msp_config_parse(text, "msprobe.json", cfg);
    snprintf(detail, sizeof detail, "%s", rc ? msp_last_error() : "");
    return rc;
}

/* text with one value in the settings: {"dump": {"common_dump_settings": {KEY: VALUE}}} */
static msp_err setting(const char *key, const char *value, msp_config_t *cfg)
{
    char *text = msp_asprintf("{\"dump\": {\"common_dump_settings\": {\"%s\": %s}}}", key, value);
    CHECK(text != NULL);
    msp_err rc = parse(text, cfg);
    free(text);
    return rc;
}

/* The value is refused, its message naming the key. */
static void refused(const char *key, const char *value)
{
    msp_config_t cfg;
    msp_err rc = setting(key, value, &cfg);
    if (rc != MSP_ERR_CONFIG)
        fprintf(stderr, "%s = %s was not refused\n", key, value);
    CHECK_INT(rc, MSP_ERR_CONFIG);
    char where[128];
    snprintf(where, sizeof where, "msprobe.json: dump.common_dump_settings.%s: ", key);
    CHECK_HAS(detail, where);
    if (rc == MSP_OK)
        msp_config_free(&cfg);
}

static void test_defaults(void)
{
    msp_config_t cfg;
    CHECK_INT(parse("{}", &cfg), MSP_OK);
    CHECK_INT(cfg.has_dump, 0); /* an absent section is off */
    CHECK_INT(cfg.has_config_check, 0);
    msp_config_free(&cfg);
    CHECK_INT(parse("{\"dump\": {}, \"config_check\": {}}", &cfg), MSP_OK);
    CHECK_INT(cfg.has_dump, 1); /* an empty one is on, with the defaults */
    CHECK_INT(cfg.has_config_check, 1);
    CHECK_INT(cfg.dump_mode, MSP_DUMP_API);
    CHECK_STR(cfg.dump_path, "./msprobe_dump_data");
    CHECK_INT(cfg.dump_iter.all, 1);
    CHECK_INT(cfg.task, MSP_TASK_TENSOR);
    CHECK_INT(cfg.overflow_nums, 1);
    CHECK_INT(cfg.ranks.all, 1);
    CHECK_INT(cfg.step_trigger, MSP_STEP_OPTIMIZER);
    CHECK_INT(cfg.stacks, 1);
    CHECK_INT(cfg.n_api_list, 0);
    CHECK_STR(cfg.cc_output_zip_path, "./config_check_pack.zip");
    CHECK_INT(cfg.cc_write_at_step, -1);
    CHECK_INT(cfg.cc_dataset_batches, 1);
    CHECK_INT(cfg.msprobe_format, 0);
    msp_config_free(&cfg);
}

static void test_settings(void)
{
    msp_config_t cfg;
    static const struct {
        const char *key, *value;
        int want; /* the enum stored */
    } enums[] = {
        {"dump_mode", "\"api\"", MSP_DUMP_API},
        {"dump_mode", "\"module\"", MSP_DUMP_MODULE},
        {"dump_mode", "\"mix\"", MSP_DUMP_MIX},
        {"task", "\"tensor\"", MSP_TASK_TENSOR},
        {"task", "\"statistics\"", MSP_TASK_STATISTICS},
        {"task", "\"md5\"", MSP_TASK_MD5},
        {"task", "\"overflow_check\"", MSP_TASK_OVERFLOW},
        {"step_trigger", "\"optimizer\"", MSP_STEP_OPTIMIZER},
        {"step_trigger", "\"backward\"", MSP_STEP_BACKWARD},
        {"step_trigger", "\"forward\"", MSP_STEP_FORWARD},
        {"step_trigger", "\"manual\"", MSP_STEP_MANUAL},
        {"stack", "true", 1},
        {"stack", "false", 0},
    };
    for (size_t i = 0; i < N(enums); i++) {
        CHECK_INT(setting(enums[i].key, enums[i].value, &cfg), MSP_OK);
        int got = !strcmp(enums[i].key, "dump_mode") ? (int)cfg.dump_mode
                  : !strcmp(enums[i].key, "task")    ? (int)cfg.task
                  : !strcmp(enums[i].key, "stack")   ? cfg.stacks
                                                     : (int)cfg.step_trigger;
        CHECK_INT(got, enums[i].want);
        msp_config_free(&cfg);
    }
    static const char *const bad[][2] = {
        {"dump_mode", "\"API\""},  {"dump_mode", "1"},
        {"dump_mode", "null"},     {"task", "\"tensors\""},
        {"task", "\"acc_check\""}, {"step_trigger", "\"epoch\""},
        {"stack", "\"true\""},     {"stack", "1"},
        {"dump_path", "\"\""},     {"dump_path", "5"},
        {"dump_path", "[\"a\"]"},  {"dump_modee", "\"api\""},
    };
    for (size_t i = 0; i < N(bad); i++)
        refused(bad[i][0], bad[i][1]);
    /* a path is taken as written, // inside a string included */
    CHECK_INT(setting("dump_path", "\"./a//b\" /* c */", &cfg), MSP_OK);
    CHECK_STR(cfg.dump_path, "./a//b");
    msp_config_free(&cfg);

    /* overflow_nums: only with task overflow_check (read after task, wherever written) */
    static const struct {
        const char *text;
        int ok;
        int64_t want;
    } ov[] = {
        {"\"overflow_nums\": 3, \"task\": \"overflow_check\"", 1, 3},
        {"\"task\": \"overflow_check\", \"overflow_nums\": -1", 1, -1},
        {"\"task\": \"overflow_check\"", 1, 1},
        {"\"task\": \"overflow_check\", \"overflow_nums\": 0", 0, 0},
        {"\"task\": \"overflow_check\", \"overflow_nums\": -2", 0, 0},
        {"\"task\": \"overflow_check\", \"overflow_nums\": 1.5", 0, 0},
        {"\"task\": \"tensor\", \"overflow_nums\": 3", 0, 0},
        {"\"overflow_nums\": 3", 0, 0},
    };
    for (size_t i = 0; i < N(ov); i++) {
        char text[256];
        snprintf(text, sizeof text, "{\"dump\": {\"common_dump_settings\": {%s}}}", ov[i].text);
        msp_err rc = parse(text, &cfg);
        CHECK_INT(rc, ov[i].ok ? MSP_OK : MSP_ERR_CONFIG);
        if (rc == MSP_OK) {
            CHECK_INT(cfg.overflow_nums, ov[i].want);
            msp_config_free(&cfg);
        } else {
            CHECK_HAS(detail, "dump.common_dump_settings.overflow_nums: ");
        }
    }
}

/* A step set (msprobe.json(5), STEP SETS) for dump_iter: "" when refused,
 * else its ranges "a-b" joined by ",", or "all". */
static void steps(const char *value, char *out, size_t cap)
{
    msp_config_t cfg;
    out[0] = '\0';
    if (setting("dump_iter", value, &cfg) != MSP_OK) {
        /* the key, or one element of it ("dump_iter[0]") */
        CHECK_HAS(detail, "msprobe.json: dump.common_dump_settings.dump_iter");
        return;
    }
    size_t at = 0;
    if (cfg.dump_iter.all)
        msp_str_add(out, cap, &at, "all");
    for (size_t i = 0; i < cfg.dump_iter.n_ranges; i++) {
        char one[64];
        snprintf(one, sizeof one, "%s%lld-%lld", i ? "," : "",
                 (long long)cfg.dump_iter.ranges[i].first, (long long)cfg.dump_iter.ranges[i].last);
        msp_str_add(out, cap, &at, one);
    }
    msp_config_free(&cfg);
}

static void test_step_sets(void)
{
    static const char *const cases[][2] = {
        {"\"10|20\"", "10-10,20-20"},
        {"\"5-8\"", "5-8"},
        {"\"1|3-5\"", "1-1,3-5"},
        {"\" 1 |\t3 - 5 \"", "1-1,3-5"}, /* spaces and tabs around numbers, | and - */
        {"\"all\"", "all"},
        {"\"\"", "all"},
        {"7", "7-7"},
        {"3.0", "3-3"},
        {"3e0", "3-3"},
        {"[1, 5, 9]", "1-1,5-5,9-9"},
        {"9007199254740991", "9007199254740991-9007199254740991"}, /* 2^53 - 1 */
        {"\"9007199254740993\"", "9007199254740993-9007199254740993"},
        {"\"9223372036854775807\"", "9223372036854775807-9223372036854775807"},
        /* refused */
        {"\"-1\"", ""},
        {"-1", ""},
        {"\"8-5\"", ""},
        {"\"1||2\"", ""},
        {"\"1,2\"", ""},
        {"\"all|3\"", ""},
        {"\"5-\"", ""},
        {"\"9223372036854775808\"", ""}, /* beyond 2^63 - 1 */
        {"9007199254740992", ""},        /* 2^53: may already be rounded */
        {"[]", ""},
        {"[1.5]", ""},
        {"[\"1\"]", ""},
        {"true", ""},
        {"2.5", ""},
    };
    char got[256];
    for (size_t i = 0; i < N(cases); i++) {
        steps(cases[i][0], got, sizeof got);
        if (strcmp(got, cases[i][1]))
            fprintf(stderr, "dump_iter %s\n", cases[i][0]);
        CHECK_STR(got, cases[i][1]);
    }
    /* at most 65536 entries */
    size_t cap = 65537 * 7 + 16, at = 0;
    char *big = malloc(cap);
    CHECK(big != NULL);
    if (!big)
        return;
    msp_str_add(big, cap, &at, "\"0");
    for (int i = 1; i < 65536; i++) {
        char one[16];
        snprintf(one, sizeof one, "|%d", i);
        msp_str_add(big, cap, &at, one);
    }
    msp_str_add(big, cap, &at, "\"");
    msp_config_t cfg;
    CHECK_INT(setting("dump_iter", big, &cfg), MSP_OK);
    CHECK_INT(cfg.dump_iter.n_ranges, 65536);
    CHECK(msp_step_set_contains(&cfg.dump_iter, 65535));
    CHECK(!msp_step_set_contains(&cfg.dump_iter, 65536));
    msp_config_free(&cfg);
    at--; /* one more entry */
    big[at] = '\0';
    msp_str_add(big, cap, &at, "|65536\"");
    CHECK_INT(setting("dump_iter", big, &cfg), MSP_ERR_CONFIG);
    free(big);
    /* rank takes the same syntax */
    CHECK_INT(setting("rank", "\"0|2\"", &cfg), MSP_OK);
    CHECK(msp_step_set_contains(&cfg.ranks, 2) && !msp_step_set_contains(&cfg.ranks, 1));
    msp_config_free(&cfg);
    CHECK_INT(setting("rank", "[0, 3]", &cfg), MSP_OK);
    CHECK(msp_step_set_contains(&cfg.ranks, 3) && !msp_step_set_contains(&cfg.ranks, 2));
    msp_config_free(&cfg);
}

static void test_api_list(void)
{
    msp_config_t cfg;
    CHECK_INT(parse("{\"dump\": {\"api_list\": [{\"name\": \"torch.matmul\"},"
                    "{\"name\": \"torch.nn.functional.conv2d\", \"api_type\": \"forward\"},"
                    "{\"name\": \"layer1.0.conv1\", \"api_type\": \"backward\"},"
                    "{\"name\": \"a\", \"api_type\": \"all\"},"
                    "{\"name\": \"b\", \"api_type\": \"both\"}]}}",
                    &cfg),
              MSP_OK);
    static const struct {
        const char *name;
        unsigned dirs;
    } want[] = {{"torch.matmul", MSP_DIR_FORWARD | MSP_DIR_BACKWARD},
                {"torch.nn.functional.conv2d", MSP_DIR_FORWARD},
                {"layer1.0.conv1", MSP_DIR_BACKWARD},
                {"a", MSP_DIR_FORWARD | MSP_DIR_BACKWARD},
                {"b", MSP_DIR_FORWARD | MSP_DIR_BACKWARD}};
    CHECK_INT(cfg.n_api_list, N(want));
    for (size_t i = 0; i < N(want) && i < cfg.n_api_list; i++) {
        CHECK_STR(cfg.api_list[i].name, want[i].name);
        CHECK_INT(cfg.api_list[i].dirs, want[i].dirs);
        CHECK_INT(cfg.api_list[i].has_call, 0);
    }
    msp_config_free(&cfg);
    CHECK_INT(parse("{\"dump\": {\"api_list\": []}}", &cfg), MSP_OK);
    CHECK_INT(cfg.n_api_list, 0);
    msp_config_free(&cfg);
    static const char *const bad[][2] = {
        {"[{\"api_type\": \"forward\"}]", "dump.api_list[0].name: missing"},
        {"[{\"name\": \"\"}]", "dump.api_list[0].name: "},
        {"[{\"name\": \"torch.nn functional\"}]", "dump.api_list[0].name: "},
        {"[{\"name\": \"a\", \"typo\": 1}]", "dump.api_list[0].typo: unknown key"},
        {"{\"name\": \"a\"}", "dump.api_list: "},
        {"[\"torch.matmul\"]", "dump.api_list[0]: "},
    };
    for (size_t i = 0; i < N(bad); i++) {
        char text[256];
        snprintf(text, sizeof text, "{\"dump\": {\"api_list\": %s}}", bad[i][0]);
        CHECK_INT(parse(text, &cfg), MSP_ERR_CONFIG);
        CHECK_HAS(detail, bad[i][1]);
    }
}

static void test_config_check(void)
{
    msp_config_t cfg;
    CHECK_INT(parse("{\"config_check\": {\"output_zip_path\": \"./packs/gpu.zip\", "
                    "\"write_at_step\": 0, \"dataset_batches\": 2}}",
                    &cfg),
              MSP_OK);
    CHECK_STR(cfg.cc_output_zip_path, "./packs/gpu.zip");
    CHECK_INT(cfg.cc_write_at_step, 0);
    CHECK_INT(cfg.cc_dataset_batches, 2);
    CHECK_INT(cfg.has_dump, 0);
    msp_config_free(&cfg);
    static const struct {
        const char *text;
        int ok;
    } cases[] = {
        {"\"write_at_step\": -1", 1}, /* the default, spelt out */
        {"\"write_at_step\": 3.0", 1},   {"\"write_at_step\": -2", 0},
        {"\"write_at_step\": \"3\"", 0}, {"\"dataset_batches\": 1", 1},
        {"\"dataset_batches\": 0", 0},   {"\"output_zip_path\": \"\"", 0},
        {"\"output_zip_path\": 1", 0},   {"\"zip\": \"a.zip\"", 0},
    };
    for (size_t i = 0; i < N(cases); i++) {
        char text[256];
        snprintf(text, sizeof text, "{\"config_check\": {%s}}", cases[i].text);
        msp_err rc = parse(text, &cfg);
        CHECK_INT(rc, cases[i].ok ? MSP_OK : MSP_ERR_CONFIG);
        if (rc == MSP_OK)
            msp_config_free(&cfg);
        else
            CHECK_HAS(detail, "msprobe.json: config_check.");
    }
}

/* msprobe.json(5), SYNTAX and ERRORS: the examples, word for word. */
static void test_errors(void)
{
    msp_config_t cfg;
    CHECK_INT(setting("task", "\"tensors\"", &cfg), MSP_ERR_CONFIG);
    CHECK_STR(detail, "msprobe.json: dump.common_dump_settings.task: expected \"tensor\", "
                      "\"statistics\", \"md5\" or \"overflow_check\", got \"tensors\"");
    CHECK_INT(setting("dump_modee", "\"api\"", &cfg), MSP_ERR_CONFIG);
    CHECK_STR(detail, "msprobe.json: dump.common_dump_settings.dump_modee: unknown key (expected "
                      "dump_mode, dump_path, dump_iter, task, step_trigger, rank, stack or "
                      "overflow_nums)");
    CHECK_INT(parse("{\"dump\": {\"api_list\": [{\"name\": \"a\"}, {\"name\": \"b\", "
                    "\"api_type\": \"fw\"}]}}",
                    &cfg),
              MSP_ERR_CONFIG);
    CHECK_STR(detail, "msprobe.json: dump.api_list[1].api_type: expected \"forward\", "
                      "\"backward\", \"all\" or \"both\", got \"fw\"");
    CHECK_INT(setting("dump_iter", "\"8-5\"", &cfg), MSP_ERR_CONFIG);
    CHECK_STR(detail, "msprobe.json: dump.common_dump_settings.dump_iter: expected a step set "
                      "like \"10|20\", \"5-8\", \"1|3-5\" or \"all\", got \"8-5\" (range 8-5 "
                      "ends before it starts)");
    CHECK_INT(parse("{\"dump\": {}, \"dump\": {}}", &cfg), MSP_ERR_CONFIG);
    CHECK_STR(detail, "msprobe.json: dump: duplicate key (each key may appear once)");
    /* "y" at line 3, column 12 */
    CHECK_INT(parse("{\n  \"dump\": {\n    \"x\": 1 \"y\": 2\n  }\n}\n", &cfg), MSP_ERR_CONFIG);
    CHECK_HAS(detail, "msprobe.json:3:12: invalid JSON: expected ',' or '}' (a comma missing?), "
                      "near '\"y\": 2");
    /* the '}' after a trailing comma at line 4, column 5 */
    CHECK_INT(parse("{\n  \"dump\": {\n    \"common_dump_settings\": {},\n    }\n}", &cfg),
              MSP_ERR_CONFIG);
    CHECK_HAS(detail, "msprobe.json:4:5: invalid JSON: comma before '}' (JSON allows no trailing "
                      "comma), near '}");
    /* the end at column 8; the '{' never closed is the one at column 7 */
    CHECK_INT(parse("{\"a\": {", &cfg), MSP_ERR_CONFIG);
    CHECK_STR(detail, "msprobe.json:1:8: invalid JSON: unexpected end of file (the '{' at line "
                      "1, column 7 is never closed)");
    char *missing = msp_asprintf("/nonexistent-%d/msprobe.json", (int)getpid());
    CHECK_INT(msp_config_load(missing, &cfg), MSP_ERR_NOT_FOUND);
    char *want = msp_asprintf("config file %s not found", missing);
    CHECK_STR(msp_last_error(), want);
    free(want);
    free(missing);
    /* comments, a byte order mark; a top level that is no object */
    CHECK_INT(parse("\xEF\xBB\xBF// settings\n{ /* a\n block */ \"dump\": {} // end\n}", &cfg),
              MSP_OK);
    CHECK_INT(cfg.has_dump, 1);
    msp_config_free(&cfg);
    CHECK_INT(parse("[{\"dump\": {}}]", &cfg), MSP_ERR_CONFIG);
    CHECK_INT(parse("", &cfg), MSP_ERR_CONFIG);
    CHECK_INT(parse("{\"dump\": {}, \"task\": \"tensor\"}", &cfg), MSP_ERR_CONFIG);
    CHECK_HAS(detail, "msprobe.json: task: unknown key");
}

static void test_msprobe_layout(void);

int main(void)
{
    test_defaults();
    test_settings();
    test_step_sets();
    test_api_list();
    test_config_check();
    test_errors();
    test_msprobe_layout();
    return unit_done("config values");
}

/* msprobe.json(5), MSPROBE'S CONFIG.JSON. */
static void test_msprobe_layout(void)
{
    msp_config_t cfg;
    CHECK_INT(parse("{\"task\": \"tensor\", \"dump_path\": \"./d\", \"rank\": [1, \"0\", \"4-6\"],"
                    " \"step\": [], \"level\": \"L1\"}",
                    &cfg),
              MSP_OK);
    CHECK_INT(cfg.msprobe_format, 1);
    CHECK_INT(cfg.has_dump, 1);
    CHECK_INT(cfg.task, MSP_TASK_TENSOR);
    CHECK_STR(cfg.dump_path, "./d");
    CHECK_INT(cfg.dump_mode, MSP_DUMP_API);
    CHECK_INT(cfg.dump_iter.all, 1); /* [] = all */
    CHECK_INT(cfg.ranks.all, 0);
    CHECK(msp_step_set_contains(&cfg.ranks, 0) && msp_step_set_contains(&cfg.ranks, 5));
    CHECK(!msp_step_set_contains(&cfg.ranks, 2) && !msp_step_set_contains(&cfg.ranks, 7));
    msp_config_free(&cfg);
    /* msprobe's default task is statistics; level L0 is module, mix mix */
    CHECK_INT(parse("{\"dump_path\": \"./d\", \"level\": \"L0\"}", &cfg), MSP_OK);
    CHECK_INT(cfg.task, MSP_TASK_STATISTICS);
    CHECK_INT(cfg.dump_mode, MSP_DUMP_MODULE);
    msp_config_free(&cfg);
    CHECK_INT(parse("{\"level\": \"mix\"}", &cfg), MSP_OK);
    CHECK_INT(cfg.dump_mode, MSP_DUMP_MIX);
    msp_config_free(&cfg);
    CHECK_INT(parse("{\"statistics\": {\"list\": [\"Functional.conv2d.0.forward\", "
                    "\"Torch.matmul\", \"Tensor.add.1.backward\", "
                    "\"Module.layer1.0.conv1.Conv2d.forward.0\", \"NPU.npu_rms_norm.0.forward\", "
                    "\"torch.nn.functional.relu\"], \"summary_mode\": \"md5\", "
                    "\"data_mode\": [\"forward\", \"input\"], \"tensor_list\": "
                    "[\"Functional.linear\"], \"scope\": [], \"device\": \"npu\"}, "
                    "\"tensor\": {\"list\": [\"Torch.add\"]}, \"task\": \"statistics\", "
                    "\"async_dump\": false, \"extra_info\": false}",
                    &cfg),
              MSP_OK);
    static const struct {
        const char *name;
        unsigned dirs;
        int has_call;
        int64_t call;
    } want[] = {
        {"torch.nn.functional.conv2d", MSP_DIR_FORWARD, 1, 0},
        {"torch.matmul", MSP_DIR_FORWARD | MSP_DIR_BACKWARD, 0, 0},
        {"torch.Tensor.add", MSP_DIR_BACKWARD, 1, 1},
        {"layer1.0.conv1", MSP_DIR_FORWARD, 1, 0},
        {"torch_npu.npu_rms_norm", MSP_DIR_FORWARD, 1, 0},
        {"torch.nn.functional.relu", MSP_DIR_FORWARD | MSP_DIR_BACKWARD, 0, 0},
    };
    CHECK_INT(cfg.n_api_list, N(want)); /* the tensor section is not the task's */
    for (size_t i = 0; i < N(want) && i < cfg.n_api_list; i++) {
        CHECK_STR(cfg.api_list[i].name, want[i].name);
        CHECK_INT(cfg.api_list[i].dirs, want[i].dirs);
        CHECK_INT(cfg.api_list[i].has_call, want[i].has_call);
        if (want[i].has_call)
            CHECK_INT(cfg.api_list[i].call, want[i].call);
    }
    if (cfg.n_api_list)
        CHECK_STR(cfg.api_list[0].key, "statistics.list[0] \"Functional.conv2d.0.forward\"");
    CHECK_INT(cfg.task, MSP_TASK_MD5); /* summary_mode md5 with task statistics */
    CHECK_INT(cfg.dump_dirs, MSP_DIR_FORWARD);
    CHECK_INT(cfg.dump_roles, MSP_ROLE_INPUT);
    CHECK_INT(cfg.n_tensor_list, 1);
    if (cfg.n_tensor_list)
        CHECK_STR(cfg.tensor_list[0], "Functional.linear");
    CHECK_INT(cfg.stacks, 0);
    int async = 0, device = 0;
    for (size_t i = 0; i < cfg.n_ignored; i++) {
        async |= strcmp(cfg.ignored[i], "async_dump") == 0;
        device |= strstr(cfg.ignored[i], "device") != NULL;
    }
    CHECK(async && device);
    msp_config_free(&cfg);
    CHECK_INT(parse("{\"task\": \"overflow_check\", \"overflow_check\": {\"overflow_nums\": 3}}",
                    &cfg),
              MSP_OK);
    CHECK_INT(cfg.overflow_nums, 3);
    msp_config_free(&cfg);
    /* dump_enable false: the dump is configured, off until the file says true
     * (msprobe.json(5): followed during the run) */
    CHECK_INT(parse("{\"task\": \"tensor\", \"dump_enable\": false}", &cfg), MSP_OK);
    CHECK_INT(cfg.has_dump, 1);
    CHECK_INT(cfg.dump_disabled, 1);
    CHECK_INT(cfg.dump_enable_set, 1);
    msp_config_free(&cfg);
    /* a bare name fragment selects by what a record name holds */
    CHECK_INT(parse("{\"task\": \"tensor\", \"tensor\": {\"list\": [\"relu\"]}}", &cfg), MSP_OK);
    CHECK_INT(cfg.n_api_list, 1);
    if (cfg.n_api_list)
        CHECK_INT(cfg.api_list[0].fragment, 1);
    msp_config_free(&cfg);
    /* scope: two record names, first and last */
    CHECK_INT(parse("{\"task\": \"tensor\", \"level\": \"L1\", \"tensor\": {\"scope\": "
                    "[\"Functional.linear.0.forward\", \"Functional.relu.1.forward\"]}}",
                    &cfg),
              MSP_OK);
    CHECK_STR(cfg.scope[0], "Functional.linear.0.forward");
    CHECK_STR(cfg.scope[1], "Functional.relu.1.forward");
    msp_config_free(&cfg);
    static const char *const bad[][2] = {
        {"{\"level\": \"L2\"}", "level: "},
        {"{\"task\": \"acc_check\"}", "task: "},
        {"{\"task\": \"tensor\", \"rank\": [-1]}", "rank[0]: "},
        {"{\"task\": \"tensor\", \"rank\": \"0\"}", "rank: "},
        {"{\"task\": \"tensor\", \"step\": [\"1|2\"]}", "step[0]: "},
        {"{\"task\": \"tensor\", \"tensor\": {\"list\": [\"Module.\"]}}", "tensor.list[0]: "},
        {"{\"task\": \"tensor\", \"tensor\": {\"scope\": [\"a\", \"b\"]}}", "tensor.scope[0]: "},
        {"{\"task\": \"statistics\", \"statistics\": {\"summary_mode\": \"xor\"}}",
         "statistics.summary_mode: "},
        {"{\"task\": \"tensor\", \"foo\": 1}", "foo: unknown key"},
    };
    for (size_t i = 0; i < N(bad); i++) {
        CHECK_INT(parse(bad[i][0], &cfg), MSP_ERR_CONFIG);
        CHECK_HAS(detail, bad[i][1]);
    }
}
