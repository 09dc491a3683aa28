/* msprobe ls: list the records and tensors of a dump file, a rank directory
 * or a whole dump root (step{N}/rank{R}/dump.h5, in numeric order). */
#include "cli.h"
#include "msprobe/format.h"

#include <errno.h>
#include <getopt.h> /* optind */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const msp_opt_t msp_ls_opts[] = {
    MSP_OPT('h', "help", NULL, "this help"),
    {.id = 0},
};

static const msp_cmd_doc_t msp_ls_doc = {
    .cmd = "ls",
    .usage = "Usage: msprobe ls [-h] PATH",
    .about = "List what a dump holds. PATH is a dump file (dump.h5), a rank directory\n"
             "holding dump.h5, a step directory (rank*/dump.h5) or a dump root\n"
             "(step*/rank*/dump.h5, listed in numeric step then rank order).\n"
             "\n"
             "For each file: a header line with step, rank, path, task, dump mode and\n"
             "counts; for each record its name and execution order and its non-tensor\n"
             "arguments; for each tensor its role, dtype, shape and statistics\n"
             "(max, min, mean, L2 norm, NaN and Inf counts); \"no data\" marks a\n"
             "statistics-only tensor. The file format is described in msprobe-dump(5).\n",
    .tail = "Exit status: 0 listed, 2 usage error or unreadable input (the readable\n"
            "files of a directory are still listed).\n",
    .opts = msp_ls_opts,
    .help_width = 10,
};

/* %g, except that every NaN prints as "nan" (x86 makes inf - inf a -nan). */
static const char *msp_ls_num(double v, char *buf, size_t size)
{
    if (isnan(v))
        snprintf(buf, size, "nan");
    else
        snprintf(buf, size, "%.6g", v);
    return buf;
}

static void msp_ls_tensor(const msp_tensor_info_t *t)
{
    char shape[MSP_SHAPE_STR_MAX];
    msp_shape_str(t->shape, t->ndim, shape, sizeof shape);
    char *owned = NULL;
    /* a name from the file on one line: its newlines spelled out too */
    msp_tprintf(stdout, "    %-16s %-15s %-20s", msp_term_clean(t->role, 0, &owned), t->dtype_name,
                shape);
    free(owned);
    char b[4][32];
    if (t->has_stats)
        msp_tprintf(stdout,
                    " max=%-12s min=%-12s mean=%-12s norm=%-12s nan=%" PRId64 " inf=%" PRId64,
                    msp_ls_num(t->stats.max, b[0], sizeof b[0]),
                    msp_ls_num(t->stats.min, b[1], sizeof b[1]),
                    msp_ls_num(t->stats.mean, b[2], sizeof b[2]),
                    msp_ls_num(t->stats.norm, b[3], sizeof b[3]), t->stats.nan_count,
                    t->stats.inf_count);
    else
        msp_tprintf(stdout, " no statistics");
    if (!t->has_data)
        msp_tprintf(stdout, "  no data");
    putchar('\n');
}

static int msp_ls_file(const char *path)
{
    msp_dump_file_t *f = NULL;
    msp_err rc = msp_dump_open(path, &f);
    if (rc)
        return msp_report_error(rc);
    size_t n_tensors = 0;
    for (size_t i = 0; i < f->n_records; i++)
        n_tensors += f->records[i].n_tensors;
    msp_tprintf(stdout,
                "step %" PRId64 " rank %" PRId64 ": %s  task=%s mode=%s framework=%s %s  "
                "records=%zu tensors=%zu%s\n",
                f->step, f->rank, f->path, f->task[0] ? f->task : "-",
                f->dump_mode[0] ? f->dump_mode : "-", f->framework[0] ? f->framework : "-",
                f->framework_version[0] ? f->framework_version : "-", f->n_records, n_tensors,
                f->has_index ? "" : " (no /index)");
    int status = MSP_EXIT_OK;
    for (size_t i = 0; i < f->n_records; i++) {
        const msp_record_info_t *r = &f->records[i];
        char *owned = NULL;
        msp_tprintf(stdout, "  %s  order=%" PRId64 "\n", msp_term_clean(r->name, 0, &owned),
                    r->order);
        free(owned);
        char **keys = NULL, **values = NULL;
        size_t n = 0;
        if (msp_dump_record_attrs(f, r, &keys, &values, &n) != MSP_OK) {
            status = msp_report_error(MSP_ERR_FORMAT);
        } else {
            for (size_t k = 0; k < n; k++) {
                msp_tprintf(stdout, "    %-16s = %s\n", msp_term_clean(keys[k], 0, &owned),
                            values[k]);
                free(owned);
            }
        }
        msp_free_strings(keys, n);
        msp_free_strings(values, n);
        for (size_t j = 0; j < r->n_tensors; j++)
            msp_ls_tensor(&r->tensors[j]);
    }
    msp_dump_close(f);
    return status;
}

/* A rank, step or root directory: every dump file format's scanner finds, in
 * step then rank order. One that cannot be read is reported and the rest
 * listed; the exit status is then 2. */
static int msp_ls_dir(const msp_cli_ctx_t *ctx, const char *dir)
{
    msp_dump_tree_t t;
    msp_err rc = msp_dump_tree_scan(dir, 0, &t);
    if (rc)
        return msp_report_error(rc);
    if (t.n_left_out)
        msp_warnf(ctx,
                  "%zu msprobe dump director%s beside this shim's rank directories not listed "
                  "(%s): Huawei's msprobe wrote it in the same run; name its directory to list it",
                  t.n_left_out, t.n_left_out == 1 ? "y" : "ies", t.left_out);
    int status = MSP_EXIT_OK;
    for (size_t i = 0; i < t.n_files; i++) {
        int st;
        if (t.files[i].error) {
            msp_errorf("%s: %s", t.files[i].path, t.files[i].error);
            st = MSP_EXIT_USAGE;
        } else {
            st = msp_ls_file(t.files[i].path);
        }
        if (st != MSP_EXIT_OK)
            status = st;
    }
    msp_dump_tree_free(&t);
    return status;
}

int msp_cmd_ls(msp_cli_ctx_t *ctx, int argc, char **argv)
{
    int c;
    while ((c = msp_opt_next(&msp_ls_doc, argc, argv)) != -1) {
        if (c != 'h')
            return MSP_EXIT_USAGE;
        msp_cmd_help(&msp_ls_doc, stdout);
        return MSP_EXIT_OK;
    }
    if (optind != argc - 1)
        return msp_cmd_usage_error(&msp_ls_doc, "expected exactly one PATH");
    const char *path = argv[optind];
    struct stat sb;
    if (stat(path, &sb) != 0) {
        msp_errorf("%s: %s", path, strerror(errno));
        return MSP_EXIT_USAGE;
    }
    int status = S_ISDIR(sb.st_mode) ? msp_ls_dir(ctx, path) : msp_ls_file(path);
    if (fflush(stdout) != 0) {
        msp_errorf("ls: cannot write the listing: %s", strerror(errno));
        return MSP_EXIT_USAGE;
    }
    return status;
}
