/* Prints what msp_config_load made of a file, one "key=value" line each, so
 * test_config.py can compare against expectations written by hand.
 *   cfg_dump_parsed FILE [STEP...]   load FILE; for each STEP print contains
 *   cfg_dump_parsed -s TEXT [STEP...] msp_step_set_parse(TEXT) only
 * On error: "error=<code name>" and "detail=<text>" on stdout, exit 2. */
#include "msprobe/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const code_names[] = {
    "OK",       "NOMEM", "IO",  "NOT_FOUND", "FORMAT", "CONFIG", "USAGE",    "UNSUPPORTED",
    "MISMATCH", "HDF5",  "ZIP", "XLSX",      "PYTHON", "LIMIT",  "INTERNAL",
};

static int fail(msp_err rc)
{
    printf("error=%s\ndetail=%s\n",
           (size_t)rc < sizeof code_names / sizeof code_names[0] ? code_names[rc] : "?",
           msp_last_error());
    return 2;
}

static void print_steps(const char *key, const msp_step_set_t *s)
{
    printf("%s=", key);
    if (s->all) {
        printf("all\n");
        return;
    }
    for (size_t i = 0; i < s->n_ranges; i++) {
        if (s->ranges[i].first == s->ranges[i].last)
            printf("%s%lld", i ? "|" : "", (long long)s->ranges[i].first);
        else
            printf("%s%lld-%lld", i ? "|" : "", (long long)s->ranges[i].first,
                   (long long)s->ranges[i].last);
    }
    printf("\n");
}

static void print_contains(const msp_step_set_t *s, int n, char **steps)
{
    for (int i = 0; i < n; i++)
        printf("contains[%s]=%d\n", steps[i],
               msp_step_set_contains(s, strtoll(steps[i], NULL, 10)));
}

int main(int argc, char **argv)
{
    static const char *const modes[] = {"api", "module", "mix"};
    static const char *const tasks[] = {"tensor", "statistics", "md5", "overflow_check"};
    static const char *const triggers[] = {"optimizer", "backward", "forward", "manual"};
    static const char *const dirs[] = {"none", "forward", "backward", "all"};
    if (argc >= 3 && strcmp(argv[1], "-s") == 0) {
        msp_step_set_t s;
        msp_err rc = msp_step_set_parse(argv[2], &s);
        if (rc != MSP_OK)
            return fail(rc);
        print_steps("steps", &s);
        print_contains(&s, argc - 3, argv + 3);
        msp_step_set_free(&s);
        return 0;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: cfg_dump_parsed FILE [STEP...] | -s TEXT [STEP...]\n");
        return 64;
    }
    msp_config_t cfg;
    msp_err rc = msp_config_load(argv[1], &cfg);
    if (rc != MSP_OK)
        return fail(rc);
    printf("source=%s\n", cfg.source);
    printf("has_dump=%d\n", cfg.has_dump);
    printf("dump_mode=%s\n", modes[cfg.dump_mode]);
    printf("dump_path=%s\n", cfg.dump_path);
    print_steps("dump_iter", &cfg.dump_iter);
    printf("task=%s\n", tasks[cfg.task]);
    printf("overflow_nums=%lld\n", (long long)cfg.overflow_nums);
    printf("step_trigger=%s\n", triggers[cfg.step_trigger]);
    printf("api_list=%zu\n", cfg.n_api_list);
    for (size_t i = 0; i < cfg.n_api_list; i++) {
        printf("api[%zu]=%s %s\n", i, cfg.api_list[i].name, dirs[cfg.api_list[i].dirs & 3u]);
        printf("api_key[%zu]=%s\n", i, cfg.api_list[i].key ? cfg.api_list[i].key : "(none)");
        if (cfg.api_list[i].has_call)
            printf("api_call[%zu]=%lld\n", i, (long long)cfg.api_list[i].call);
        if (cfg.api_list[i].fragment)
            printf("api_fragment[%zu]=1\n", i);
    }
    print_steps("rank", &cfg.ranks);
    printf("dump_dirs=%s\n", dirs[cfg.dump_dirs & 3u]);
    printf("dump_roles=%s\n", cfg.dump_roles == 3u   ? "all"
                              : cfg.dump_roles == 1u ? "input"
                                                     : "output");
    printf("msprobe_format=%d\n", cfg.msprobe_format);
    printf("dump_disabled=%d\n", cfg.dump_disabled);
    printf("dump_enable_set=%d\n", cfg.dump_enable_set);
    printf("scope=%s%s%s\n", cfg.scope[0] ? cfg.scope[0] : "", cfg.scope[0] ? "," : "",
           cfg.scope[1] ? cfg.scope[1] : "");
    printf("stacks=%d\n", cfg.stacks);
    printf("tensor_list=");
    for (size_t i = 0; i < cfg.n_tensor_list; i++)
        printf("%s%s", i ? "," : "", cfg.tensor_list[i]);
    printf("\n");
    printf("ignored=");
    for (size_t i = 0; i < cfg.n_ignored; i++)
        printf("%s%s", i ? "," : "", cfg.ignored[i]);
    printf("\n");
    printf("has_config_check=%d\n", cfg.has_config_check);
    printf("output_zip_path=%s\n", cfg.cc_output_zip_path);
    printf("write_at_step=%lld\n", (long long)cfg.cc_write_at_step);
    printf("dataset_batches=%lld\n", (long long)cfg.cc_dataset_batches);
    print_contains(&cfg.dump_iter, argc - 2, argv + 2);
    msp_config_free(&cfg);
    msp_config_free(&cfg); /* must be safe on a freed (zeroed) config */
    return 0;
}
