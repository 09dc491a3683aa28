/* msprobe's own compare command lines, 26's ("msprobe compare -tp T -gp G
 * -fm -dm map.yaml") and 8.x's ("msprobe -f pytorch compare -i compare.json
 * -s -f"), rewritten into ours before getopt sees them, so an msprobe user's
 * scripts run unchanged. One table says how each flag maps; msprobe-compare(1)
 * prints the same table (section MSPROBE'S FLAGS). */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MSP_ALIAS_FLAG, MSP_ALIAS_VALUE, MSP_ALIAS_OPTIONAL };

typedef struct msp_alias {
    const char *theirs;
    const char *ours; /* replacement option; NULL: dropped (what it asks is always done) */
    int takes;        /* MSP_ALIAS_* */
    const char *note; /* one line on stderr when given (NULL: none) */
} msp_alias_t;

static const msp_alias_t msp_aliases[] = {
    {"-tp", "-c", MSP_ALIAS_VALUE, NULL},
    {"--target_path", "-c", MSP_ALIAS_VALUE, NULL},
    {"-gp", "-b", MSP_ALIAS_VALUE, NULL},
    {"--golden_path", "-b", MSP_ALIAS_VALUE, NULL},
    {"--output_path", "-o", MSP_ALIAS_VALUE, NULL},
    {"-fm", "--fuzzy", MSP_ALIAS_FLAG, NULL},
    {"--fuzzy_match", "--fuzzy", MSP_ALIAS_FLAG, NULL},
    {"-f", "--fuzzy", MSP_ALIAS_FLAG, NULL}, /* 8.x, after the command */
    {"-dm", "--mapping", MSP_ALIAS_VALUE, NULL},
    {"--data_mapping", "--mapping", MSP_ALIAS_VALUE, NULL},
    {"-cm", "--cell-mapping", MSP_ALIAS_OPTIONAL, NULL},
    {"--cell_mapping", "--cell-mapping", MSP_ALIAS_OPTIONAL, NULL},
    {"-am", NULL, MSP_ALIAS_OPTIONAL,
     "-am (api_mapping) maps MindSpore APIs to PyTorch's; two PyTorch dumps need none: ignored"},
    {"--api_mapping", NULL, MSP_ALIAS_OPTIONAL,
     "--api_mapping maps MindSpore APIs to PyTorch's; two PyTorch dumps need none: ignored"},
    {"-lm", NULL, MSP_ALIAS_OPTIONAL,
     "-lm (layer_mapping) maps MindSpore layers to PyTorch's; two PyTorch dumps need none: "
     "ignored"},
    {"--layer_mapping", NULL, MSP_ALIAS_OPTIONAL,
     "--layer_mapping maps MindSpore layers to PyTorch's; two PyTorch dumps need none: ignored"},
    {"-da", NULL, MSP_ALIAS_FLAG, NULL}, /* the first divergence: always analysed */
    {"--diff_analyze", NULL, MSP_ALIAS_FLAG, NULL},
    {"-tensor_log", "--print-log", MSP_ALIAS_FLAG, NULL},
    {"--is_print_compare_log", "--print-log", MSP_ALIAS_FLAG, NULL},
    {"--xlsx", NULL, MSP_ALIAS_FLAG, NULL}, /* result.xlsx is always written */
    {"-s", NULL, MSP_ALIAS_FLAG, NULL},     /* 8.x stack_mode: NPU_Stack_Info always */
    {"--stack_mode", NULL, MSP_ALIAS_FLAG, NULL},
    {"-hl", NULL, MSP_ALIAS_FLAG, NULL}, /* 8.x highlight: always */
    {"--highlight", NULL, MSP_ALIAS_FLAG, NULL},
    {"--compare_only", NULL, MSP_ALIAS_FLAG, NULL}, /* 8.x: we never re-dump */
    {"-i", "--input-json", MSP_ALIAS_VALUE, NULL},  /* 8.x compare.json */
    {"--input_path", "--input-json", MSP_ALIAS_VALUE, NULL},
    {"-m", "--mode", MSP_ALIAS_VALUE, NULL},
};

static const msp_alias_t *msp_alias_find(const char *arg, const char **value)
{
    *value = NULL;
    for (size_t i = 0; i < sizeof msp_aliases / sizeof msp_aliases[0]; i++) {
        const msp_alias_t *a = &msp_aliases[i];
        size_t n = strlen(a->theirs);
        if (strncmp(arg, a->theirs, n) != 0)
            continue;
        if (arg[n] == '\0')
            return a;
        if (arg[n] == '=' && a->takes != MSP_ALIAS_FLAG && a->theirs[1] == '-') {
            *value = arg + n + 1; /* --target_path=X */
            return a;
        }
    }
    return NULL;
}

/* Appends s (not copied: argv's strings outlive the rewritten argv). */
static int msp_push(msp_compare_argv_t *out, const char *s)
{
    char **nv = realloc(out->argv, (size_t)(out->argc + 2) * sizeof *nv);
    if (!nv)
        return -1;
    out->argv = nv;
    out->argv[out->argc++] = (char *)s;
    out->argv[out->argc] = NULL;
    return 0;
}

void msp_compare_argv_free(msp_compare_argv_t *a)
{
    free(a->argv);
    memset(a, 0, sizeof *a);
}

int msp_compare_argv(const msp_cli_ctx_t *ctx, int argc, char **argv, msp_compare_argv_t *out)
{
    memset(out, 0, sizeof *out);
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        const msp_alias_t *a = msp_alias_find(argv[i], &v);
        json |= a && a->ours && !strcmp(a->ours, "--input-json");
    }
    if (msp_push(out, argv[0]))
        goto nomem;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value = NULL;
        if (!strcmp(arg, "--")) { /* operands from here on */
            for (; i < argc; i++)
                if (msp_push(out, argv[i]))
                    goto nomem;
            break;
        }
        /* 8.x's -c is compare_only (a flag) beside -i: ours takes a path */
        if (json && !strcmp(arg, "-c") && (i + 1 == argc || argv[i + 1][0] == '-'))
            continue;
        const msp_alias_t *a = msp_alias_find(arg, &value);
        if (!a) {
            if (msp_push(out, arg))
                goto nomem;
            continue;
        }
        if (a->takes == MSP_ALIAS_VALUE && !value) {
            if (i + 1 == argc) {
                msp_errorf("compare: option %s needs a value (try 'msprobe compare --help')", arg);
                msp_compare_argv_free(out);
                return MSP_EXIT_USAGE;
            }
            value = argv[++i];
        } else if (a->takes == MSP_ALIAS_OPTIONAL && !value && i + 1 < argc &&
                   argv[i + 1][0] != '-') {
            value = argv[++i];
        }
        if (a->note && ctx->verbosity > 0)
            fprintf(stderr, "msprobe: note: %s\n", a->note);
        if (!a->ours)
            continue;
        if (a->takes == MSP_ALIAS_OPTIONAL && !value) /* "-cm" alone: nothing to map with */
            continue;
        if (msp_push(out, a->ours) || (value && msp_push(out, value)))
            goto nomem;
    }
    return MSP_EXIT_OK;
nomem:
    msp_errorf("compare: out of memory");
    msp_compare_argv_free(out);
    return MSP_EXIT_USAGE;
}

/* 8.x's compare.json: {"npu_path": ..., "bench_path": ..., "stack_path": ...,
 * "is_print_compare_log": true}. The stack is read from beside the dump
 * (stack.json next to dump.json), so stack_path need only exist. */
int msp_compare_input_json(const char *path, char **bench, char **cmp, int *print_log)
{
    char *text = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    int rc = MSP_EXIT_USAGE;
    *bench = *cmp = NULL;
    msp_err err = msp_read_file(path, (size_t)1 << 20, &text, &len);
    if (err) {
        msp_report_error(err);
        return MSP_EXIT_USAGE;
    }
    if (!(root = cJSON_Parse(text)) || !cJSON_IsObject(root)) {
        msp_errorf("compare: -i %s: not a JSON object (msprobe's compare.json: npu_path, "
                   "bench_path, stack_path, is_print_compare_log)",
                   path);
        goto cleanup;
    }
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "npu_path");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(root, "bench_path");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "stack_path");
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(root, "is_print_compare_log");
    if (!cJSON_IsString(n) || !cJSON_IsString(b)) {
        msp_errorf("compare: -i %s: key \"%s\" must be a path string", path,
                   !cJSON_IsString(n) ? "npu_path" : "bench_path");
        goto cleanup;
    }
    if (s && !cJSON_IsString(s) && !cJSON_IsNull(s)) {
        msp_errorf("compare: -i %s: key \"stack_path\" must be a path string", path);
        goto cleanup;
    }
    if (cJSON_IsString(s) && access(s->valuestring, R_OK) != 0) {
        msp_errorf("compare: -i %s: stack_path '%s': %s", path, s->valuestring, strerror(errno));
        goto cleanup;
    }
    if (l && !cJSON_IsBool(l)) {
        msp_errorf("compare: -i %s: key \"is_print_compare_log\" must be true or false", path);
        goto cleanup;
    }
    for (const cJSON *e = root->child; e; e = e->next)
        if (strcmp(e->string, "npu_path") && strcmp(e->string, "bench_path") &&
            strcmp(e->string, "stack_path") && strcmp(e->string, "is_print_compare_log")) {
            msp_errorf("compare: -i %s: unknown key \"%s\" (msprobe's compare.json has npu_path, "
                       "bench_path, stack_path, is_print_compare_log)",
                       path, e->string);
            goto cleanup;
        }
    *print_log |= cJSON_IsTrue(l);
    if (!(*bench = strdup(b->valuestring)) || !(*cmp = strdup(n->valuestring))) {
        free(*bench);
        *bench = NULL;
        msp_errorf("compare: out of memory");
        goto cleanup;
    }
    rc = MSP_EXIT_OK;
cleanup:
    cJSON_Delete(root);
    free(text);
    return rc;
}
