/* msprobe's own compare command lines, 26's ("msprobe compare -tp T -gp G
 * -fm -dm map.yaml") and 8.x's ("msprobe -f pytorch compare -i compare.json
 * -s -f"), rewritten into ours before getopt sees them, so an msprobe user's
 * scripts run unchanged. One table says how each flag maps; msprobe-compare(1)
 * prints the same table (section MSPROBE'S FLAGS). Such a command line also
 * gets msprobe's output files and exit status (--msprobe-outputs, written
 * here too: section MSPROBE'S OUTPUTS). */
#include "cli.h"

#include "msprobe/report.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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
    {"-da", "--diff-analyze", MSP_ALIAS_FLAG, NULL},
    {"--diff_analyze", "--diff-analyze", MSP_ALIAS_FLAG, NULL},
    {"-tensor_log", "--print-log", MSP_ALIAS_FLAG, NULL},
    {"--is_print_compare_log", "--print-log", MSP_ALIAS_FLAG, NULL},
    {"--xlsx", "--xlsx", MSP_ALIAS_FLAG, NULL}, /* with --msprobe-outputs: workbooks */
    {"-s", NULL, MSP_ALIAS_FLAG, NULL},         /* 8.x stack_mode: NPU_Stack_Info always */
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
    int json = 0, theirs = 0;
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        const char *v;
        const msp_alias_t *a = msp_alias_find(argv[i], &v);
        json |= a && a->ours && !strcmp(a->ours, "--input-json");
        theirs |= a && a->ours && (!strcmp(a->ours, "-c") || !strcmp(a->ours, "-b"));
    }
    if (msp_push(out, argv[0]))
        goto nomem;
    /* msprobe's spelling of the dumps: a script written for msprobe, which
     * looks for msprobe's files and exit status (8.x writes workbooks only) */
    if ((json || theirs) && msp_push(out, "--msprobe-outputs"))
        goto nomem;
    if (json && msp_push(out, "--xlsx"))
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

/* ---- msprobe's output files (--msprobe-outputs, --diff-analyze) ------------- */

void msp_msprobe_stamp(msp_msprobe_reports_t *r)
{
    time_t now = time(NULL);
    struct tm tm;
    if (!localtime_r(&now, &tm) || !strftime(r->stamp, sizeof r->stamp, "%Y%m%d%H%M%S", &tm))
        snprintf(r->stamp, sizeof r->stamp, "00000000000000");
}

static int msp_is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The one directory msprobe names a single rank's result after: dir holds
 * "rank" (8.x's one-card dump) or "proc<PID>" (26's) and no "rank<N>".
 * NULL: name the files rank{R}. Malloc'd. */
static char *msp_msprobe_tag(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    char *tag = NULL;
    int numbered = 0, lone = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        int proc = !strncmp(n, "proc", 4) && isdigit((unsigned char)n[4]);
        if (!strncmp(n, "rank", 4) && isdigit((unsigned char)n[4]))
            numbered++;
        else if (!strcmp(n, "rank") || proc) {
            lone++;
            free(tag);
            tag = strdup(n);
        }
    }
    closedir(d);
    if (numbered || lone != 1) {
        free(tag);
        tag = NULL;
    }
    return tag;
}

/* "report: OUT/NAME\n" onto *said. */
static int msp_said_add(char **said, const char *out_dir, const char *name)
{
    char *more = msp_asprintf("%sreport: %s/%s\n", *said ? *said : "", out_dir, name);
    if (!more)
        return -1;
    free(*said);
    *said = more;
    return 0;
}

msp_err msp_msprobe_reports_write(const struct msp_compare_tree *tree,
                                  const msp_msprobe_reports_t *r, msp_report_set_t *set,
                                  char **said, msp_compare_result_t **whole)
{
    *said = NULL;
    char **names = NULL, *tag = NULL;
    size_t n = 0;
    msp_msprobe_outputs_t o = {r->stamp, r->xlsx, NULL};
    if (r->msprobe) {
        /* two files: compare_result_{stamp}; else one a rank, or the one
         * directory msprobe would name it after */
        int files = msp_is_file(r->bench) && msp_is_file(r->cmp);
        const msp_compare_result_t *head = msp_compare_tree_head(tree);
        if (!files && head && head->n_ranks == 1)
            tag = msp_msprobe_tag(r->cmp);
        o.tag = files ? "" : tag;
        set->msprobe = &o;
        set->ms_names = &names;
        set->ms_n = &n;
    }
    char file[64];
    int written = 0;
    if (r->diff_analyze) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(file, sizeof file, "diff_analyze_%lld%09ld.json", (long long)ts.tv_sec,
                 ts.tv_nsec);
        set->da_file = file;
        set->da_written = &written;
    }
    /* every file from one read of the compare's result (report.h) */
    msp_err rc = msp_report_tree_write(tree, set, whole);
    for (size_t i = 0; !rc && i < n; i++)
        if (msp_said_add(said, r->out_dir, names[i]))
            rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
    if (!rc && r->msprobe && set->csv && msp_said_add(said, r->out_dir, "result.csv"))
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
    if (!rc && written && msp_said_add(said, r->out_dir, file))
        rc = msp_fail(MSP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(tag);
    return rc;
}
