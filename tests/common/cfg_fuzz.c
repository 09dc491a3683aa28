/* The msprobe.json parser against hostile input. Two builds of one file:
 *  - libFuzzer:  clang -g -D_GNU_SOURCE -DMSP_LIBFUZZER -fsanitize=fuzzer,address,undefined
 *                -Iinclude -Ibuild/include tests/common/cfg_fuzz.c
 *                src/common/{config,config_walk,config_value,config_json,error,fsutil,grow,
 *                log,utf8}.c -lcjson -lm -o cfg_fuzz
 *                then: cfg_fuzz CORPUS (start it from a copy of tests/fuzz/seeds/config)
 *  - ctest:      a deterministic mutation run over a small corpus (argv[1] =
 *                iterations), so every build exercises the same invariants;
 *                tests/fuzz replays the committed seeds.
 * Invariants: the result is MSP_OK or MSP_ERR_CONFIG; an error leaves the
 * config zeroed and a detail naming the source; a success holds values inside
 * their documented domains. Anything else aborts. */
#include "msp_rand.h"
#include "msprobe/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok, const char *what, const char *text)
{
    if (!ok) {
        fprintf(stderr, "cfg_fuzz: invariant broken: %s\ninput: %s\n", what, text);
        abort();
    }
}

static void check_steps(const msp_step_set_t *s, const char *text)
{
    check(s->all || s->n_ranges > 0, "empty step set", text);
    for (size_t i = 0; i < s->n_ranges; i++)
        check(s->ranges[i].first >= 0 && s->ranges[i].first <= s->ranges[i].last, "bad step range",
              text);
}

static void one(const char *text)
{
    msp_config_t cfg;
    msp_err rc = msp_config_parse(text, "fuzz.json", &cfg);
    if (rc != MSP_OK) {
        static const msp_config_t zero;
        check(rc == MSP_ERR_CONFIG, "error other than MSP_ERR_CONFIG", text);
        check(strncmp(msp_last_error(), "fuzz.json", 9) == 0, "detail does not name the file",
              text);
        check(memcmp(&cfg, &zero, sizeof cfg) == 0, "config not zeroed after an error", text);
    } else {
        check(cfg.source && strcmp(cfg.source, "fuzz.json") == 0, "source", text);
        check(cfg.dump_path && *cfg.dump_path, "dump_path empty", text);
        check(cfg.cc_output_zip_path && *cfg.cc_output_zip_path, "output_zip_path empty", text);
        check(cfg.dump_mode <= MSP_DUMP_MIX && cfg.task <= MSP_TASK_STATISTICS &&
                  cfg.step_trigger <= MSP_STEP_MANUAL,
              "enum out of range", text);
        check(cfg.cc_write_at_step >= -1 && cfg.cc_dataset_batches >= 1, "config_check ints", text);
        check((cfg.n_api_list == 0) == (cfg.api_list == NULL), "api_list count", text);
        for (size_t i = 0; i < cfg.n_api_list; i++)
            check(cfg.api_list[i].name && *cfg.api_list[i].name && cfg.api_list[i].dirs >= 1 &&
                      cfg.api_list[i].dirs <= 3,
                  "api_list entry", text);
        check_steps(&cfg.dump_iter, text);
    }
    msp_config_free(&cfg);

    msp_step_set_t s;
    rc = msp_step_set_parse(text, &s);
    check(rc == MSP_OK || rc == MSP_ERR_CONFIG || rc == MSP_ERR_LIMIT, "step set error code", text);
    if (rc == MSP_OK)
        check_steps(&s, text);
    else
        check(s.n_ranges == 0 && s.ranges == NULL, "step set not empty after an error", text);
    msp_step_set_free(&s);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    one(text);
    free(text);
    return 0;
}

#ifndef MSP_LIBFUZZER
static const char *const corpus[] = {
    "{\n  \"dump\": {\n    \"common_dump_settings\": {\n      \"dump_mode\": \"api\", // c\n"
    "      \"dump_path\": \"./msprobe_dump_data\",\n      \"dump_iter\": \"10|20\",\n"
    "      \"task\": \"tensor\" /* block */\n    },\n    \"api_list\": [\n"
    "      { \"name\": \"torch.nn.functional.conv2d\", \"api_type\": \"forward\" },\n"
    "      { \"name\": \"my_model.layer1.0.conv1\",   \"api_type\": \"backward\" }\n    ]\n  },\n"
    "  \"config_check\": { \"output_zip_path\": \"./gpu_config_pack.zip\" }\n}\n",
    "{\"dump\": {\"common_dump_settings\": {\"dump_mode\": \"mix\", \"dump_iter\": [1, 5, 9],"
    " \"step_trigger\": \"manual\", \"task\": \"statistics\"}, \"api_list\": []},"
    " \"config_check\": {\"write_at_step\": 0, \"dataset_batches\": 3}}",
    "{\"dump\": {\"common_dump_settings\": {\"dump_iter\": \"1|3-5| 7 - 9\"}}}",
    "1|3-5|7",
    "{\"a\\u00e9\\ud83d\\ude00\": [1e5, -0.5, true, false, null, \"x\\\"//\\n\"]}",
};

/* fixed seed, so a failure reproduces from the iteration count */
static uint64_t rng_state = MSP_RAND_SEED;
static uint64_t rng(void)
{
    return msp_xorshift64(&rng_state);
}

int main(int argc, char **argv)
{
    static const char alphabet[] = "{}[]:,\"\\/*-|0123456789aeflnrstu \n\t.+eE'";
    long iters = argc > 1 ? atol(argv[1]) : 20000;
    size_t ncorpus = sizeof corpus / sizeof corpus[0];
    char buf[4096];
    for (size_t i = 0; i < ncorpus; i++)
        one(corpus[i]);
    for (long it = 0; it < iters; it++) {
        const char *base = corpus[rng() % ncorpus];
        size_t len = strlen(base);
        memcpy(buf, base, len + 1);
        int edits = 1 + (int)(rng() % 4);
        for (int e = 0; e < edits && len > 0; e++) {
            size_t at = rng() % len;
            switch (rng() % 4) {
            case 0: /* replace a byte */
                buf[at] = alphabet[rng() % (sizeof alphabet - 1)];
                break;
            case 1: /* truncate */
                buf[at] = '\0';
                len = at;
                break;
            case 2: /* delete a byte */
                memmove(buf + at, buf + at + 1, len - at);
                len--;
                break;
            default: /* insert a byte */
                if (len + 2 < sizeof buf) {
                    memmove(buf + at + 1, buf + at, len - at + 1);
                    buf[at] = alphabet[rng() % (sizeof alphabet - 1)];
                    len++;
                }
            }
        }
        one(buf);
    }
    printf("cfg_fuzz: %ld mutated inputs, every invariant held\n", iters);
    return 0;
}
#endif
