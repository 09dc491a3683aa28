/* msprobe config_check: pack the current environment (-d) or compare two
 * packs (-c) into result.xlsx. Exit 0 all passed, 1 some item failed, 2 bad
 * usage or input. */
#include "cli.h"

#include "msprobe/configcheck.h"

#include <getopt.h> /* optarg, optind */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MSP_CC_SHOW_FAILED 20

enum { MSP_OPT_ENV_KEYS = 256, MSP_OPT_MAX_MEMBER, MSP_OPT_ALIASES, MSP_OPT_NO_HTML };

/* The options as parsed (bound in the table below). */
typedef struct msp_check_args {
    int do_static, html, max_member_mib;
    const char *bench, *out;
    msp_cc_options_t opt;
} msp_check_args_t;
static msp_check_args_t msp_ka;

static const msp_opt_t msp_cc_opts[] = {
    MSP_OPT('d', "static", NULL,
            "pack env and pip of the current environment\n"
            "(Python: $MSPROBE_PYTHON, default /usr/bin/python3)",
            MSP_BIND(TRUE, &msp_ka.do_static)),
    MSP_OPT('c', "compare", "BENCH CMP", "compare two packs into OUTDIR/result.xlsx",
            MSP_BIND(STRING, &msp_ka.bench)),
    MSP_OPT('o', "output", "PATH",
            "the pack (-d, default ./config_check_pack.zip) or the\n"
            "report directory (-c, default .)",
            MSP_BIND(STRING, &msp_ka.out)),
    MSP_OPT(MSP_OPT_ENV_KEYS, "env-keys", "SPEC",
            "env keys compared: K1,K2,PREFIX_* or a file of keys,\n"
            "one a line; \"*\" compares every key",
            MSP_BIND(STRING, &msp_ka.opt.env_keys)),
    MSP_OPT(MSP_OPT_ALIASES, "aliases", "FILE",
            "more hyperparameter spellings: JSON\n"
            "{\"canonical\": [\"alias\", ...]}",
            MSP_BIND(STRING, &msp_ka.opt.aliases_file)),
    MSP_OPT(MSP_OPT_MAX_MEMBER, "max-member-mib", "N",
            "refuse packs whose members exceed N MiB, alone or together (default 64)",
            MSP_BIND_INT(&msp_ka.max_member_mib, 1, 1048576)),
    MSP_OPT(MSP_OPT_NO_HTML, "no-html", NULL,
            "-c: do not write OUTDIR/result.html (the report page)", MSP_BIND(FALSE, &msp_ka.html)),
    MSP_OPT('h', "help", NULL, "this help"),
    {.id = 0},
};

static const msp_cmd_doc_t msp_cc_doc = {
    .cmd = "config_check",
    .usage = "Usage: msprobe [-f pytorch] config_check -d [-o PACK.zip]\n"
             "       msprobe [-f pytorch] config_check -c BENCH.zip CMP.zip [-o OUTDIR] "
             "[--env-keys SPEC]\n"
             "                    [--aliases FILE]",
    .about = "Check that two training runs were set up alike before comparing tensors.\n"
             "Packs of a real run are written inside the training process when\n"
             "MSPROBE_CONFIG_CHECK=PACK.zip is set (or msprobe.json has a config_check\n"
             "section) and the dump shim is preloaded.\n",
    .tail = "Exit status: 0 every item passed, 1 some item failed, 2 usage error or bad\n"
            "input. See msprobe-config_check(1).\n",
    .opts = msp_cc_opts,
    .help_width = 23,
};

/* A failing entry may span lines (long values, aligned one under the other):
 * every line gets the same indent so the alignment survives. */
static void msp_cc_print_indented(const char *indent, const char *text)
{
    size_t w = strlen(indent);
    for (const char *p = text, *first = text;;) {
        const char *e = strchr(p, '\n');
        int n = (int)(e ? (size_t)(e - p) : strlen(p));
        msp_tprintf(stdout, "%*s%.*s\n", (int)w, p == first ? indent : "", n, p);
        if (!e)
            break;
        p = e + 1;
    }
}

static int msp_cc_cli_compare(const msp_cli_ctx_t *ctx, const char *bench, const char *cmp,
                              const char *out, const msp_cc_options_t *opt, int html)
{
    msp_cc_result_t *r = NULL;
    msp_err rc = msp_cc_compare(bench, cmp, opt, &r);
    if (rc != MSP_OK)
        return msp_report_error(rc);
    if (r->salt_mismatch)
        msp_warnf(ctx, "the packs hashed secret env values with different salts; set the same "
                       "MSPROBE_SECRET_SALT "
                       "for both runs to compare them");
    if ((rc = msp_cc_report_write(r, out)) != MSP_OK ||
        (html && (rc = msp_cc_report_write_html(r, out)) != MSP_OK)) {
        msp_cc_result_free(r);
        return msp_report_error(rc);
    }
    int failed = msp_cc_result_failed(r);
    if (ctx->verbosity > 0 || failed) {
        msp_tprintf(stdout, "config_check: bench %s, cmp %s\n", bench, cmp);
        for (int i = 0; i < MSP_CC_N_ITEMS; i++) {
            const msp_cc_item_result_t *it = &r->items[i];
            const char *st = it->status == MSP_CC_PASS   ? "pass"
                             : it->status == MSP_CC_FAIL ? "FAIL"
                                                         : "n/a";
            msp_tprintf(stdout, "  %-16s %s", it->name, st);
            if (it->n_failed)
                msp_tprintf(stdout, "  %zu difference%s", it->n_failed,
                            it->n_failed == 1 ? "" : "s");
            if (it->n_warnings)
                msp_tprintf(stdout, "  (%zu warning%s)", it->n_warnings,
                            it->n_warnings == 1 ? "" : "s");
            if (it->n_info)
                msp_tprintf(stdout, "  (%zu info%s)", it->n_info,
                            ctx->verbosity > 1 ? "" : ", -v lists");
            putchar('\n');
            if (it->status == MSP_CC_FAIL && it->note)
                msp_tprintf(stdout, "      %s\n", it->note);
            for (size_t j = 0; j < it->n_failed && j < MSP_CC_SHOW_FAILED; j++)
                msp_cc_print_indented("      ", it->failed[j]);
            if (it->n_failed > MSP_CC_SHOW_FAILED)
                msp_tprintf(stdout, "      ... %zu more in the report\n",
                            it->n_failed - MSP_CC_SHOW_FAILED);
            for (size_t j = 0; ctx->verbosity > 1 && j < it->n_info && j < MSP_CC_SHOW_FAILED; j++)
                msp_cc_print_indented("      info: ", it->info[j]);
            if (ctx->verbosity > 1 && it->n_info > MSP_CC_SHOW_FAILED)
                msp_tprintf(stdout, "      info: ... %zu more in the report\n",
                            it->n_info - MSP_CC_SHOW_FAILED);
        }
        msp_tprintf(stdout, "report: %s/result.xlsx\n", out);
        if (html)
            msp_tprintf(stdout, "report: %s/result.html\n", out);
    }
    msp_cc_result_free(r);
    return failed ? MSP_EXIT_FAIL : MSP_EXIT_OK;
}

int msp_cmd_config_check(msp_cli_ctx_t *ctx, int argc, char **argv)
{
    msp_ka = (msp_check_args_t){.html = 1};
    int c;
    while ((c = msp_opt_next(&msp_cc_doc, argc, argv)) != -1) {
        switch (c) {
        case 'h':
            msp_cmd_help(&msp_cc_doc, stdout);
            return MSP_EXIT_OK;
        default:
            return MSP_EXIT_USAGE;
        }
    }
    int do_static = msp_ka.do_static, html = msp_ka.html;
    const char *bench = msp_ka.bench, *out = msp_ka.out;
    msp_cc_options_t opt = msp_ka.opt;
    if (msp_ka.max_member_mib)
        opt.max_member_bytes = (size_t)msp_ka.max_member_mib << 20;
    if (do_static == !!bench) {
        msp_errorf("config_check: give exactly one of -d (pack this environment) or -c BENCH.zip "
                   "CMP.zip");
        return MSP_EXIT_USAGE;
    }
    if (do_static) {
        if (optind != argc) {
            msp_errorf("config_check -d: unexpected argument '%s'", argv[optind]);
            return MSP_EXIT_USAGE;
        }
        const char *python = getenv("MSPROBE_PYTHON");
        if (!python || !*python)
            python = "/usr/bin/python3";
        const char *pack = out ? out : "config_check_pack.zip";
        if (msp_cc_salt_refused())
            msp_warnf(ctx, "config_check: %s", MSP_CC_SALT_WEAK_WARNING);
        msp_err rc = msp_cc_static_pack(python, pack);
        if (rc != MSP_OK)
            return msp_report_error(rc);
        if (ctx->verbosity > 0)
            msp_tprintf(stdout, "config_check: wrote %s (env and pip; Python %s)\n", pack, python);
        return MSP_EXIT_OK;
    }
    if (argc - optind != 1) {
        msp_errorf("config_check -c: expected BENCH.zip CMP.zip, got %d pack%s",
                   1 + (argc - optind), argc - optind == 0 ? "" : "s");
        return MSP_EXIT_USAGE;
    }
    int rc;
    if ((rc = msp_opt_file(&msp_cc_doc, "-c BENCH", bench)) ||
        (rc = msp_opt_file(&msp_cc_doc, "-c CMP", argv[optind])) ||
        (opt.aliases_file && (rc = msp_opt_file(&msp_cc_doc, "--aliases", opt.aliases_file))))
        return rc;
    /* --env-keys names a file when it is one (msprobe-config_check(1)): a
     * FIFO or device of that name is refused rather than read */
    struct stat st;
    if (opt.env_keys && !strchr(opt.env_keys, ',') && stat(opt.env_keys, &st) == 0 &&
        !S_ISDIR(st.st_mode) && (rc = msp_opt_file(&msp_cc_doc, "--env-keys", opt.env_keys)))
        return rc;
    return msp_cc_cli_compare(ctx, bench, argv[optind], out ? out : ".", &opt, html);
}
